//! What `list` shows of a sandbox: each node's process, replication and
//! cluster state, and how many transactions a replica is behind.

use mysql_async::prelude::Queryable;

use crate::cluster;
use crate::converge;
use crate::error::SandboxError;
use crate::galera;
use crate::handle::Sandbox;
use crate::meta::Role;
use crate::node;
use crate::setup::{self, ReplHealth};

/// One node's state, for `list`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NodeStatus {
    pub sandbox: String,
    pub node: String,
    pub role: Role,
    pub port: u16,
    /// The server the sandbox runs (`mariadbd --version`, e.g.
    /// `11.4.5-MariaDB`): the one it was made with.
    pub version: Option<String>,
    pub pid: Option<i32>,
    pub running: bool,
    /// Not running, and its pid file names a process that is gone: it
    /// died (kill -9, a crash) instead of being stopped.
    pub crashed_pid: Option<i32>,
    pub replication: Option<ReplHealth>,
    /// Transactions the primary has committed that this replica has not
    /// applied yet (by GTID, summed over replication domains).
    pub gtid_behind: Option<u64>,
    /// A cluster member's wsrep state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub galera: Option<galera::Health>,
    /// Set when the node runs but could not be asked about replication.
    pub error: Option<String>,
    /// How a running node differs from the role `sandbox.toml` gives it
    /// (a promotion that stopped part way); `up` repairs each.
    pub not_as_configured: Vec<String>,
}

/// Transactions in `primary` (a GTID position) not yet in `applied`.
pub fn gtid_behind(primary: &str, applied: &str) -> u64 {
    let parse = |pos: &str| -> Vec<(u32, u64)> {
        pos.split(',')
            .filter_map(|g| {
                let mut it = g.trim().split('-');
                let domain = it.next()?.parse().ok()?;
                let _server = it.next()?;
                let seq = it.next()?.parse().ok()?;
                Some((domain, seq))
            })
            .collect()
    };
    let have = parse(applied);
    parse(primary)
        .into_iter()
        .map(|(d, seq)| {
            let got = have.iter().find(|(hd, _)| *hd == d).map_or(0, |(_, s)| *s);
            seq.saturating_sub(got)
        })
        .sum()
}

impl Sandbox {
    /// Process and replication state of every node.
    pub async fn status(&self) -> Vec<NodeStatus> {
        let mut out = Vec::new();
        let password = self.password().ok();
        // What the primary has committed, to measure replicas against.
        let primary_pos: Option<String> = async {
            let p = self.meta.primary();
            let nl = self.layout.node(p);
            node::running_pid(&nl)?;
            let mut c = setup::root_conn(&self.label(p), &nl, password.as_ref())
                .await
                .ok()?;
            let v: Option<String> = c.query_first("SELECT @@gtid_binlog_pos").await.ok()?;
            let _ = c.disconnect().await;
            v
        }
        .await;
        let primary_port = self.meta.primary().port;
        let version = self.binaries(None).ok().and_then(|b| b.version());
        for n in &self.meta.nodes {
            let nl = self.layout.node(n);
            let pid = node::running_pid(&nl);
            let mut st = NodeStatus {
                sandbox: self.meta.name.clone(),
                node: n.name.clone(),
                role: n.role,
                port: n.port,
                version: version.clone(),
                pid,
                running: pid.is_some(),
                crashed_pid: pid.is_none().then(|| node::stale_pid(&nl)).flatten(),
                replication: None,
                gtid_behind: None,
                galera: None,
                error: None,
                not_as_configured: Vec::new(),
            };
            if pid.is_some() && n.role == Role::Member {
                let label = self.label(n);
                let r = async {
                    let mut c = setup::root_conn(&label, &nl, password.as_ref()).await?;
                    let h = cluster::health(&mut c).await;
                    let _ = c.disconnect().await;
                    h.map_err(|e| SandboxError::Sql {
                        node: label.clone(),
                        what: e.to_string(),
                    })
                }
                .await;
                match r {
                    Ok(h) => st.galera = Some(h),
                    Err(e) => st.error = Some(e.to_string()),
                }
            }
            let fixes = |seen: &converge::Seen| -> Vec<String> {
                converge::fixes(n.role, primary_port, seen, &self.meta.options)
                    .into_iter()
                    .map(|f| f.what().to_string())
                    .collect()
            };
            if pid.is_some() && n.role == Role::Replica {
                let label = self.label(n);
                let r = async {
                    let mut c = setup::root_conn(&label, &nl, password.as_ref()).await?;
                    let seen = setup::seen(&mut c, &label).await;
                    let applied: Option<String> = c
                        .query_first("SELECT @@gtid_slave_pos")
                        .await
                        .ok()
                        .flatten();
                    let _ = c.disconnect().await;
                    seen.map(|s| (s, applied))
                }
                .await;
                match r {
                    Ok(((seen, h), applied)) => {
                        st.replication = h;
                        st.not_as_configured = fixes(&seen);
                        st.gtid_behind = primary_pos
                            .as_deref()
                            .map(|p| gtid_behind(p, applied.as_deref().unwrap_or("")));
                    }
                    Err(e) => st.error = Some(e.to_string()),
                }
            }
            if pid.is_some() && n.role == Role::Primary {
                let label = self.label(n);
                let r = async {
                    let mut c = setup::root_conn(&label, &nl, password.as_ref()).await?;
                    let seen = setup::seen(&mut c, &label).await;
                    let _ = c.disconnect().await;
                    seen
                }
                .await;
                match r {
                    Ok((seen, _)) => st.not_as_configured = fixes(&seen),
                    Err(e) => st.error = Some(e.to_string()),
                }
            }
            out.push(st);
        }
        out
    }
}

#[cfg(test)]
mod gtid_tests {
    #[test]
    fn transactions_behind_by_domain() {
        use super::gtid_behind;
        assert_eq!(gtid_behind("0-1-100", "0-1-100"), 0);
        assert_eq!(gtid_behind("0-1-100", "0-1-40"), 60);
        assert_eq!(gtid_behind("0-1-100,1-2-5", "0-1-100"), 5);
        assert_eq!(gtid_behind("0-1-10", ""), 10);
        assert_eq!(gtid_behind("", "0-1-10"), 0);
    }
}

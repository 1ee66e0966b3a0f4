//! Promoting a replica without losing a committed transaction: the old
//! primary (when it runs) stops taking writes (read_only, and a global
//! read lock held for the switch, since read_only does not stop accounts
//! with SUPER), the candidate waits until it has applied every GTID the
//! old primary committed (or the promotion is refused and the old primary
//! takes writes again, nothing changed), then it stops replicating and
//! becomes writable, the other replicas and the old primary replicate from
//! it with GTID, and `sandbox.toml` and the client files follow the roles.

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use crate::error::{Result, SandboxError};
use crate::handle::Sandbox;
use crate::meta::Role;
use crate::{node, setup};

/// A promotion's state once its candidate has caught up: the candidate's
/// connection, the old primary's position it applied (`None`: the old
/// primary was not running) and the old primary's fencing connection.
struct Fenced {
    candidate: mysql_async::Conn,
    target: Option<String>,
    fence: Option<mysql_async::Conn>,
}

/// Stopped by an interrupt before the switch.
fn untouched(name: &str) -> SandboxError {
    SandboxError::Interrupted {
        what: format!(
            "sandbox '{name}': interrupted before the switch; nothing changed, the primary \
             takes writes"
        ),
    }
}

/// An SQL error on `node`.
fn sql(node: String) -> impl Fn(mysql_async::Error) -> SandboxError {
    move |w| SandboxError::Sql {
        node: node.clone(),
        what: w.to_string(),
    }
}

/// Lets the old primary take writes again after a promotion that did not
/// happen: its lock released, read_only off.
async fn unfence(fence: &mut Option<mysql_async::Conn>) {
    if let Some(mut o) = fence.take() {
        let _ = o.query_drop("UNLOCK TABLES").await;
        let _ = o.query_drop("SET GLOBAL read_only = 0").await;
        let _ = o.disconnect().await;
    }
}

/// What a promotion did.
#[derive(Debug, Clone)]
pub struct PromoteReport {
    pub new_primary: String,
    pub old_primary: String,
    /// Nodes now replicating from the new primary.
    pub repointed: Vec<String>,
    /// Nodes that were not running (they replicate once started).
    pub not_running: Vec<String>,
    /// The old primary's GTID position the new primary had applied before
    /// it took writes; `None` when the old primary was not running (what
    /// it committed and never sent cannot be checked).
    pub caught_up_to: Option<String>,
    pub elapsed: Duration,
}

impl Sandbox {
    /// Makes replica `name` the primary. An interrupt before the switch
    /// (while the candidate catches up included) stops it with nothing
    /// changed; once the candidate has caught up, the switch is finished.
    pub async fn promote(
        &mut self,
        name: &str,
        wait: Duration,
        stop: &crate::Interrupt,
    ) -> Result<PromoteReport> {
        let t0 = Instant::now();
        if stop.seen() {
            return Err(untouched(&self.meta.name));
        }
        let pos = self.promotable(name)?;
        let password = self.password()?;
        let new = self.meta.nodes[pos].clone();
        let label = self.label(&new);
        let nl = self.layout.node(&new);
        if node::running_pid(&nl).is_none() {
            return Err(SandboxError::Sql {
                node: label,
                what: "not running: start it with 'sqlfleet sandbox up' first".into(),
            });
        }
        let Fenced {
            candidate: mut c,
            target,
            mut fence,
        } = self.fence_and_catch_up(&new, &password, wait, stop).await?;
        sqlfleet_faults::point!("promote::caught_up");
        let switched = async {
            c.query_drop("STOP SLAVE").await?;
            c.query_drop("RESET SLAVE ALL").await?;
            c.query_drop("SET GLOBAL read_only = 0").await
        }
        .await;
        if let Err(e) = switched {
            // sandbox.toml is unchanged: the old primary takes writes
            // again, and `up` puts the candidate back as a replica.
            unfence(&mut fence).await;
            return Err(sql(label)(e));
        }
        sqlfleet_faults::point!("promote::new_primary_writable");
        let _ = c.disconnect().await;
        // The old primary stays read-only; its lock goes before it follows.
        if let Some(mut o) = fence.take() {
            let _ = o.query_drop("UNLOCK TABLES").await;
            let _ = o.disconnect().await;
        }

        let old_primary = self.meta.primary().name.clone();
        for n in &mut self.meta.nodes {
            n.role = if n.name == new.name {
                Role::Primary
            } else {
                Role::Replica
            };
        }
        // The primary comes first in sandbox.toml.
        let promoted = self.meta.nodes.remove(pos);
        self.meta.nodes.insert(0, promoted);
        self.meta.save(&self.layout.meta())?;
        sqlfleet_faults::point!("promote::meta_saved");
        self.write_client_files(&password)?;

        let (repointed, not_running) = self.repoint(&old_primary, &new, &password).await?;
        Ok(PromoteReport {
            new_primary: new.name,
            old_primary,
            repointed,
            not_running,
            caught_up_to: target,
            elapsed: t0.elapsed(),
        })
    }

    /// Stops the old primary's writes (when it runs: read_only and a
    /// global read lock) and waits until the candidate has applied every
    /// GTID it committed. On any failure or an interrupt the old primary
    /// takes writes again before this returns.
    async fn fence_and_catch_up(
        &self,
        new: &crate::meta::NodeMeta,
        password: &sqlfleet_conn::Secret,
        wait: Duration,
        stop: &crate::Interrupt,
    ) -> Result<Fenced> {
        let old = self.meta.primary().clone();
        let old_label = self.label(&old);
        let old_nl = self.layout.node(&old);
        let mut fence = None;
        let mut target = None;
        if node::running_pid(&old_nl).is_some() {
            let mut o = setup::root_conn(&old_label, &old_nl, Some(password)).await?;
            let fenced = async {
                o.query_drop("SET GLOBAL read_only = 1").await?;
                o.query_drop("FLUSH TABLES WITH READ LOCK").await?;
                o.query_first::<Option<String>, _>("SELECT @@gtid_binlog_pos")
                    .await
            }
            .await;
            match fenced {
                Ok(pos) => target = Some(pos.flatten().unwrap_or_default()),
                Err(e) => {
                    let _ = o.query_drop("SET GLOBAL read_only = 0").await;
                    return Err(sql(old_label)(e));
                }
            }
            fence = Some(o);
            sqlfleet_faults::point!("promote::old_primary_fenced");
        }
        match self
            .catch_up(new, password, target.as_deref(), wait, stop)
            .await
        {
            Ok(candidate) => Ok(Fenced {
                candidate,
                target,
                fence,
            }),
            Err(e) => {
                unfence(&mut fence).await;
                Err(e)
            }
        }
    }

    /// The candidate's connection once it has applied `target` (the old
    /// primary's GTID position), within `wait`.
    async fn catch_up(
        &self,
        new: &crate::meta::NodeMeta,
        password: &sqlfleet_conn::Secret,
        target: Option<&str>,
        wait: Duration,
        stop: &crate::Interrupt,
    ) -> Result<mysql_async::Conn> {
        let label = self.label(new);
        let mut c = setup::root_conn(&label, &self.layout.node(new), Some(password)).await?;
        let Some(pos) = target.filter(|p| !p.is_empty()) else {
            return Ok(c);
        };
        let q = format!(
            "SELECT MASTER_GTID_WAIT('{}', {:.3})",
            pos.replace('\'', ""),
            wait.as_secs_f64()
        );
        let waited = tokio::select! {
            r = c.query_first::<Option<i64>, _>(q) => r,
            _ = stop.wait() => return Err(untouched(&self.meta.name)),
        };
        if waited.map_err(sql(label.clone()))?.flatten() == Some(0) {
            return Ok(c);
        }
        let have: Option<String> = c
            .query_first("SELECT @@gtid_slave_pos")
            .await
            .map_err(sql(label.clone()))?;
        Err(SandboxError::Sql {
            node: label,
            what: format!(
                "has not applied everything the primary committed within {:.0} s \
                 (primary at {pos}, replica at {}); nothing changed, the primary \
                 takes writes again (wait longer with --wait)",
                wait.as_secs_f64(),
                have.unwrap_or_default()
            ),
        })
    }

    /// The position of the replica `name` names, or why it cannot be
    /// promoted (no such node, a Galera cluster, the primary already).
    fn promotable(&self, name: &str) -> Result<usize> {
        let Some(pos) = self.meta.nodes.iter().position(|n| n.name == name) else {
            return Err(SandboxError::Sql {
                node: self.meta.name.clone(),
                what: format!(
                    "no node '{name}' (it has {})",
                    self.meta
                        .nodes
                        .iter()
                        .map(|n| n.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        };
        if self.meta.galera() {
            return Err(SandboxError::Sql {
                node: format!("sandbox '{}'", self.meta.name),
                what: "a Galera cluster has no primary to move: every member takes writes".into(),
            });
        }
        if self.meta.nodes[pos].role == Role::Primary {
            return Err(SandboxError::Sql {
                node: self.label(&self.meta.nodes[pos]),
                what: "already the primary".into(),
            });
        }
        Ok(pos)
    }

    /// Points every running replica (the old primary, read-only, among
    /// them) at the new primary: the ones repointed, and the ones not
    /// running.
    async fn repoint(
        &self,
        old_primary: &str,
        new: &crate::meta::NodeMeta,
        password: &sqlfleet_conn::Secret,
    ) -> Result<(Vec<String>, Vec<String>)> {
        let mut repointed = Vec::new();
        let mut not_running = Vec::new();
        for n in self
            .meta
            .nodes
            .clone()
            .iter()
            .filter(|n| n.role == Role::Replica)
        {
            let nl = self.layout.node(n);
            let label = self.label(n);
            if node::running_pid(&nl).is_none() {
                not_running.push(n.name.clone());
                continue;
            }
            if n.name == old_primary {
                let mut c = setup::root_conn(&label, &nl, Some(password)).await?;
                c.query_drop("SET GLOBAL read_only = 1")
                    .await
                    .map_err(|w| SandboxError::Sql {
                        node: label.clone(),
                        what: w.to_string(),
                    })?;
                let _ = c.disconnect().await;
            }
            setup::start_replication(&label, &nl, password, new).await?;
            sqlfleet_faults::point!("promote::replica_repointed");
            repointed.push(n.name.clone());
        }
        Ok((repointed, not_running))
    }
}

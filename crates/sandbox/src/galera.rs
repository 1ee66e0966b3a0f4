//! What a Galera sandbox decides, as pure functions: each node's wsrep
//! options, how to read a node's saved state (`grastate.dat`) and the
//! position `--wsrep-recover` prints, which node bootstraps a cluster that
//! is wholly down, and what a node's `wsrep_%` status says about it. The
//! start sequence that uses them is in [`crate::cluster`].

use serde::{Deserialize, Serialize};

/// Where Debian's galera-4 package puts the provider.
pub const PROVIDER: &str = "/usr/lib/galera/libgalera_smm.so";

/// The ports a node uses besides its SQL port: group communication,
/// incremental state transfer, and full state transfer (rsync).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GaleraPorts {
    pub gcomm: u16,
    pub ist: u16,
    pub sst: u16,
}

/// The wsrep option lines of one node (`key = value`), for its option file
/// (after the common ones, which they override). `members` is every
/// node's group-communication port; `cluster` names the cluster (the
/// sandbox); `domain` is the GTID domain of the cluster's writes.
pub fn options(
    cluster: &str,
    node: &str,
    sql_port: u16,
    own: GaleraPorts,
    members: &[u16],
    domain: u32,
) -> Vec<String> {
    let address = members
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    vec![
        "wsrep-on = ON".into(),
        format!("wsrep-provider = {PROVIDER}"),
        format!("wsrep-cluster-name = sqlfleet-{cluster}"),
        format!("wsrep-cluster-address = gcomm://{address}"),
        format!("wsrep-node-name = {node}"),
        format!("wsrep-node-address = 127.0.0.1:{}", own.gcomm),
        // What wsrep_incoming_addresses shows: where clients reach it.
        format!("wsrep-node-incoming-address = 127.0.0.1:{sql_port}"),
        format!(
            "wsrep-provider-options = \"base_port={g};gmcast.listen_addr=tcp://127.0.0.1:{g};ist.recv_addr=127.0.0.1:{i};gcache.size=256M\"",
            g = own.gcomm,
            i = own.ist
        ),
        format!("wsrep-sst-receive-address = 127.0.0.1:{}", own.sst),
        "wsrep-sst-method = rsync".into(),
        // Galera's own GTIDs: every node writes the same GTID for a
        // transaction (one domain, one server id for the cluster), so a
        // replica or `replicate` can follow any node.
        "wsrep-gtid-mode = ON".into(),
        format!("wsrep-gtid-domain-id = {domain}"),
        // Strict mode refuses the GTIDs a joiner writes after a state
        // transfer; Galera orders transactions itself.
        "gtid-strict-mode = 0".into(),
        "innodb-autoinc-lock-mode = 2".into(),
        "default-storage-engine = InnoDB".into(),
    ]
}

/// A node's `grastate.dat`: the cluster it belongs to, the last
/// transaction it committed (-1: unknown, it did not stop cleanly), and
/// whether it may bootstrap the cluster (it was the last to leave).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grastate {
    pub uuid: String,
    pub seqno: i64,
    pub safe_to_bootstrap: bool,
}

/// Reads `grastate.dat`; `None` when it has no `uuid` line.
pub fn parse_grastate(text: &str) -> Option<Grastate> {
    let mut uuid = None;
    let mut seqno = -1;
    let mut safe = false;
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k.trim() {
            "uuid" => uuid = Some(v.to_string()),
            "seqno" => seqno = v.parse().unwrap_or(-1),
            "safe_to_bootstrap" => safe = v == "1",
            _ => {}
        }
    }
    Some(Grastate {
        uuid: uuid?,
        seqno,
        safe_to_bootstrap: safe,
    })
}

/// `grastate.dat` with `safe_to_bootstrap` set (the documented way to
/// let a chosen node start a new cluster); other lines are kept.
pub fn mark_safe_to_bootstrap(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("safe_to_bootstrap:") {
            out.push_str("safe_to_bootstrap: 1");
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// The position `mariadbd --wsrep-recover` logs: `uuid:seqno` (with
/// wsrep GTID mode, `uuid:seqno,gtid`) after "WSREP: Recovered position: "
/// (the last one in the log).
pub fn recovered_position(log: &str) -> Option<(String, i64)> {
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("WSREP: Recovered position:"))?;
    let pos = line.split("Recovered position:").nth(1)?.trim();
    let pos = pos.split(',').next()?;
    let (uuid, seq) = pos.rsplit_once(':')?;
    Some((uuid.trim().to_string(), seq.trim().parse().ok()?))
}

/// One node's saved position, for choosing who bootstraps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    pub node: String,
    pub safe_to_bootstrap: bool,
    /// From grastate.dat, or recovered; -1 when unknown.
    pub seqno: i64,
}

/// Which node starts a cluster that is wholly down: the one marked safe
/// to bootstrap (it left last, cleanly), else the most advanced by
/// position; on a tie the first. `None` when no node has a position.
pub fn bootstrap_node(nodes: &[Saved]) -> Option<&str> {
    if let Some(n) = nodes.iter().find(|n| n.safe_to_bootstrap) {
        return Some(&n.node);
    }
    let mut best: Option<&Saved> = None;
    for n in nodes.iter().filter(|n| n.seqno >= 0) {
        if best.is_none_or(|b| n.seqno > b.seqno) {
            best = Some(n);
        }
    }
    best.map(|n| n.node.as_str())
}

/// What a node's `wsrep_%` status variables say.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Health {
    /// `wsrep_local_state_comment`: Synced, Donor/Desynced, Joining, ...
    pub state: String,
    /// `wsrep_local_state`: 4 is Synced.
    pub local_state: u32,
    pub cluster_size: u32,
    /// `wsrep_cluster_status`: Primary, non-Primary, Disconnected.
    pub cluster_status: String,
    pub ready: bool,
}

impl Health {
    /// From `SHOW GLOBAL STATUS LIKE 'wsrep_%'` rows.
    pub fn from_status<'a>(rows: impl IntoIterator<Item = (&'a str, &'a str)>) -> Health {
        let mut h = Health::default();
        for (k, v) in rows {
            match k.to_ascii_lowercase().as_str() {
                "wsrep_local_state_comment" => h.state = v.to_string(),
                "wsrep_local_state" => h.local_state = v.parse().unwrap_or(0),
                "wsrep_cluster_size" => h.cluster_size = v.parse().unwrap_or(0),
                "wsrep_cluster_status" => h.cluster_status = v.to_string(),
                "wsrep_ready" => h.ready = v.eq_ignore_ascii_case("ON"),
                _ => {}
            }
        }
        h
    }

    /// Synced, ready, and in the primary component.
    pub fn synced(&self) -> bool {
        self.ready && self.local_state == 4 && self.cluster_status == "Primary"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grastate_files() {
        let clean = "# GALERA saved state\nversion: 2.1\nuuid:    6f3c9a1e-0000-11ef-9d2b-4f2a1b3c4d5e\nseqno:   42\nsafe_to_bootstrap: 1\n";
        let crashed = "# GALERA saved state\nversion: 2.1\nuuid:    6f3c9a1e-0000-11ef-9d2b-4f2a1b3c4d5e\nseqno:   -1\nsafe_to_bootstrap: 0\n";
        // (text, parsed)
        let rows: [(&str, Option<(i64, bool)>); 5] = [
            (clean, Some((42, true))),
            (crashed, Some((-1, false))),
            ("uuid: x\nseqno: junk\n", Some((-1, false))),
            ("", None),
            ("seqno: 5\n", None),
        ];
        for (text, want) in rows {
            let got = parse_grastate(text).map(|g| (g.seqno, g.safe_to_bootstrap));
            assert_eq!(got, want, "{text:?}");
        }
        let marked = mark_safe_to_bootstrap(crashed);
        assert_eq!(
            parse_grastate(&marked).map(|g| g.safe_to_bootstrap),
            Some(true)
        );
        assert!(marked.contains("seqno:   -1"), "{marked}");
    }

    #[test]
    fn recovered_positions_from_the_log() {
        let rows = [
            (
                "2026-11-27 1 [Note] WSREP: Recovered position: 6f3c9a1e-0000-11ef-9d2b-4f2a1b3c4d5e:17\n",
                Some(17),
            ),
            (
                "[Note] WSREP: Recovered position: a:1\n[Note] WSREP: Recovered position: a:9\n",
                Some(9),
            ),
            (
                "[Note] WSREP: Recovered position: 00000000-0000-0000-0000-000000000000:-1\n",
                Some(-1),
            ),
            (
                "0 [Note] WSREP: Recovered position: 5070caa5-ea01-11f1-89be-23e3141e4bea:15,0-1-12\n",
                Some(15),
            ),
            ("[Note] nothing here\n", None),
            ("[Note] WSREP: Recovered position: garbage\n", None),
        ];
        for (log, want) in rows {
            assert_eq!(recovered_position(log).map(|p| p.1), want, "{log:?}");
        }
    }

    #[test]
    fn who_bootstraps_a_cluster_that_is_down() {
        let s = |node: &str, safe: bool, seqno: i64| Saved {
            node: node.into(),
            safe_to_bootstrap: safe,
            seqno,
        };
        // (nodes, chosen)
        let rows = [
            (
                vec![s("node1", false, 10), s("node2", true, 10)],
                Some("node2"),
            ),
            (
                vec![
                    s("node1", false, 10),
                    s("node2", false, 12),
                    s("node3", false, 11),
                ],
                Some("node2"),
            ),
            (
                vec![s("node1", false, 7), s("node2", false, 7)],
                Some("node1"),
            ),
            (
                vec![s("node1", false, -1), s("node2", false, 3)],
                Some("node2"),
            ),
            (vec![s("node1", false, -1), s("node2", false, -1)], None),
            (vec![], None),
        ];
        for (nodes, want) in rows {
            assert_eq!(bootstrap_node(&nodes), want, "{nodes:?}");
        }
    }

    #[test]
    fn health_from_status_rows() {
        let rows = [
            (
                vec![
                    ("wsrep_local_state_comment", "Synced"),
                    ("wsrep_local_state", "4"),
                    ("wsrep_cluster_size", "3"),
                    ("wsrep_cluster_status", "Primary"),
                    ("wsrep_ready", "ON"),
                ],
                true,
            ),
            (
                vec![
                    ("wsrep_local_state", "2"),
                    ("wsrep_cluster_status", "Primary"),
                    ("wsrep_ready", "ON"),
                ],
                false,
            ),
            (
                vec![
                    ("wsrep_local_state", "4"),
                    ("wsrep_cluster_status", "non-Primary"),
                    ("wsrep_ready", "OFF"),
                ],
                false,
            ),
            (vec![], false),
        ];
        for (status, synced) in rows {
            let h = Health::from_status(status.iter().copied());
            assert_eq!(h.synced(), synced, "{status:?}");
        }
    }

    #[test]
    fn every_node_lists_every_member_and_its_own_ports() {
        let own = GaleraPorts {
            gcomm: 4571,
            ist: 4572,
            sst: 4573,
        };
        let o = options("g", "node2", 3308, own, &[4567, 4571, 4575], 0).join("\n");
        assert!(
            o.contains("gcomm://127.0.0.1:4567,127.0.0.1:4571,127.0.0.1:4575"),
            "{o}"
        );
        assert!(o.contains("ist.recv_addr=127.0.0.1:4572"), "{o}");
        assert!(
            o.contains("wsrep-sst-receive-address = 127.0.0.1:4573"),
            "{o}"
        );
        assert!(o.contains("wsrep-node-name = node2"), "{o}");
        assert!(
            o.contains("wsrep-node-incoming-address = 127.0.0.1:3308"),
            "{o}"
        );
    }
}

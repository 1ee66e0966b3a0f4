//! What one check reads from a server, and the rates two checks give.
//!
//! Pure: rows in (column name → text, as the server sent them), numbers
//! out. Replication columns are looked up by every name the flavours use
//! (MariaDB `SHOW ALL SLAVES STATUS`, MySQL 8.0.22+ `SHOW REPLICA STATUS`,
//! older MySQL `SHOW SLAVE STATUS`), so one parser reads them all.

use std::collections::BTreeMap;

use serde::Serialize;

/// The global status counters a check reads (`SHOW GLOBAL STATUS WHERE
/// Variable_name IN (...)`).
pub const STATUS_NAMES: &[&str] = &[
    "Uptime",
    "Questions",
    "Threads_connected",
    "Threads_running",
    "Slow_queries",
    "Innodb_rows_read",
    "Innodb_rows_inserted",
    "Innodb_rows_updated",
    "Innodb_rows_deleted",
    "Innodb_buffer_pool_read_requests",
    "Innodb_buffer_pool_reads",
];

/// The `wsrep_%` status a check reads (only a Galera node has values that
/// mean something; the rest of the 70-odd are left on the server).
pub const GALERA_STATUS: &[&str] = &[
    "wsrep_provider_name",
    "wsrep_cluster_state_uuid",
    "wsrep_local_state_comment",
    "wsrep_local_state",
    "wsrep_cluster_size",
    "wsrep_cluster_status",
    "wsrep_local_recv_queue",
    "wsrep_local_cert_failures",
    "wsrep_last_committed",
    "wsrep_flow_control_paused_ns",
];

/// One row as column name → value (`None` for SQL NULL).
pub type Row = BTreeMap<String, Option<String>>;

/// Everything one successful check read.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Sample {
    pub version: String,
    pub hostname: String,
    pub max_connections: u64,
    pub read_only: bool,
    pub datadir: String,
    /// Counters from [`STATUS_NAMES`] (those the server has).
    pub status: BTreeMap<String, u64>,
    /// Replication channels (empty on a server that replicates from no one).
    pub channels: Vec<Channel>,
    /// The longest-running statements, longest first.
    pub running: Vec<Running>,
    /// Every statement the check saw running, as (schema, text): what
    /// processlist sampling counts (`statements.rs`).
    #[serde(skip)]
    pub statements_running: Vec<(String, String)>,
    /// performance_schema is on (statement figures come from it).
    pub performance_schema: bool,
    /// A Galera node's state (`None` without a wsrep provider).
    pub galera: Option<Galera>,
}

/// A Galera node's `wsrep_%` status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Galera {
    /// `wsrep_cluster_name` (else the state UUID): what groups the nodes.
    pub cluster: String,
    /// `wsrep_node_name`.
    pub node: String,
    /// `wsrep_local_state_comment`: Synced, Donor/Desynced, Joining, ...
    pub state: String,
    /// `wsrep_local_state`: 4 is Synced.
    pub local_state: u64,
    pub cluster_size: u64,
    /// `wsrep_cluster_status`: Primary, non-Primary, Disconnected.
    pub cluster_status: String,
    /// `wsrep_local_recv_queue`: write sets received, not yet applied.
    pub recv_queue: u64,
    /// `wsrep_local_cert_failures` (since the start).
    pub cert_failures: u64,
    /// `wsrep_last_committed`: the node's last seqno.
    pub last_committed: u64,
    /// `wsrep_flow_control_paused_ns` (since the start).
    pub flow_control_paused_ns: u64,
}

impl Galera {
    /// From `SHOW GLOBAL STATUS LIKE 'wsrep%'` rows and the cluster and
    /// node names (`SHOW GLOBAL VARIABLES`); `None` when the server runs
    /// no wsrep provider (every MariaDB has the variables).
    pub fn from_rows(status: &[(String, String)], vars: &[(String, String)]) -> Option<Galera> {
        let get = |rows: &[(String, String)], k: &str| {
            rows.iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(k))
                .map(|(_, v)| v.trim().to_string())
                .unwrap_or_default()
        };
        let num = |k: &str| get(status, k).parse::<u64>().unwrap_or(0);
        if get(status, "wsrep_provider_name").is_empty() {
            return None;
        }
        let name = get(vars, "wsrep_cluster_name");
        Some(Galera {
            cluster: if name.is_empty() {
                get(status, "wsrep_cluster_state_uuid")
            } else {
                name
            },
            node: get(vars, "wsrep_node_name"),
            state: get(status, "wsrep_local_state_comment"),
            local_state: num("wsrep_local_state"),
            cluster_size: num("wsrep_cluster_size"),
            cluster_status: get(status, "wsrep_cluster_status"),
            recv_queue: num("wsrep_local_recv_queue"),
            cert_failures: num("wsrep_local_cert_failures"),
            last_committed: num("wsrep_last_committed"),
            flow_control_paused_ns: num("wsrep_flow_control_paused_ns"),
        })
    }

    pub fn synced(&self) -> bool {
        self.local_state == 4
    }
}

/// One replication channel as the server reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Channel {
    /// "" for the default channel.
    pub name: String,
    pub source: String,
    pub io_running: String,
    pub sql_running: String,
    /// Seconds behind the source; `None` when the server reports NULL (a
    /// thread stopped).
    pub lag: Option<u64>,
    pub gtid: String,
    /// The last I/O or SQL error, "" when none.
    pub last_error: String,
}

impl Channel {
    /// Both threads running ("Yes"; MySQL's "Connecting" is not running).
    pub fn running(&self) -> bool {
        self.io_running.eq_ignore_ascii_case("yes") && self.sql_running.eq_ignore_ascii_case("yes")
    }

    /// Reads a replication status row of any flavour.
    pub fn from_row(r: &Row) -> Channel {
        let get = |names: &[&str]| -> Option<String> {
            names
                .iter()
                .find_map(|n| r.get(*n).cloned().flatten())
                .map(|v| v.trim().to_string())
        };
        let text = |names: &[&str]| get(names).unwrap_or_default();
        let host = text(&["Master_Host", "Source_Host"]);
        let port = text(&["Master_Port", "Source_Port"]);
        let mut errors = Vec::new();
        // The error columns are named alike in every flavour.
        for (no, msg, what) in [
            ("Last_IO_Errno", "Last_IO_Error", "I/O"),
            ("Last_SQL_Errno", "Last_SQL_Error", "SQL"),
        ] {
            let no = text(&[no]);
            let msg = text(&[msg]);
            if !msg.is_empty() || (!no.is_empty() && no != "0") {
                errors.push(format!("{what} error {no}: {msg}"));
            }
        }
        Channel {
            name: text(&["Connection_name", "Channel_Name", "Channel_name"]),
            source: if host.is_empty() {
                String::new()
            } else {
                format!("{host}:{port}")
            },
            io_running: text(&["Slave_IO_Running", "Replica_IO_Running"]),
            sql_running: text(&["Slave_SQL_Running", "Replica_SQL_Running"]),
            lag: get(&["Seconds_Behind_Master", "Seconds_Behind_Source"])
                .and_then(|v| v.parse().ok()),
            gtid: text(&["Gtid_IO_Pos", "Executed_Gtid_Set"]).replace('\n', ""),
            last_error: errors.join("; "),
        }
    }
}

/// One statement in the processlist.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Running {
    pub id: u64,
    pub user: String,
    pub db: String,
    pub seconds: u64,
    pub command: String,
    pub info: String,
}

/// Per-second rates between two samples of one server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Rates {
    pub qps: f64,
    pub slow_per_s: f64,
    pub innodb_rows_per_s: f64,
    /// Share of buffer pool page requests served from memory in the
    /// interval; since the server started when the interval had none
    /// (an idle server); `None` when it never had any.
    pub buffer_pool_hit: Option<f64>,
    /// A Galera node: the share of the interval its replication was
    /// paused by flow control (0..=1).
    pub flow_control_paused: Option<f64>,
}

impl Sample {
    pub fn counter(&self, name: &str) -> u64 {
        self.status.get(name).copied().unwrap_or(0)
    }

    /// Threads_connected as a share of max_connections (0..=1+).
    pub fn connection_use(&self) -> f64 {
        if self.max_connections == 0 {
            return 0.0;
        }
        self.counter("Threads_connected") as f64 / self.max_connections as f64
    }

    /// Fills the status counters from `SHOW GLOBAL STATUS` rows
    /// (Variable_name, Value); values that are not numbers are skipped.
    pub fn read_status(&mut self, rows: &[(String, String)]) {
        for (name, value) in rows {
            if let Ok(v) = value.trim().parse::<u64>() {
                self.status.insert(name.clone(), v);
            }
        }
    }
}

/// Rates from `prev` to `cur`, `secs` apart. `None` when they cannot be
/// told: no time passed, or the server restarted in between (Uptime went
/// back, or a counter did).
pub fn rates(prev: &Sample, cur: &Sample, secs: f64) -> Option<Rates> {
    if !(secs.is_finite() && secs > 0.0) || cur.counter("Uptime") < prev.counter("Uptime") {
        return None;
    }
    let delta = |n: &str| cur.counter(n).checked_sub(prev.counter(n));
    let rows = [
        "Innodb_rows_read",
        "Innodb_rows_inserted",
        "Innodb_rows_updated",
        "Innodb_rows_deleted",
    ]
    .iter()
    .map(|n| delta(n))
    .sum::<Option<u64>>()?;
    let (mut requests, mut reads) = (
        delta("Innodb_buffer_pool_read_requests")?,
        delta("Innodb_buffer_pool_reads")?,
    );
    if requests == 0 {
        requests = cur.counter("Innodb_buffer_pool_read_requests");
        reads = cur.counter("Innodb_buffer_pool_reads");
    }
    let flow_control_paused = match (&prev.galera, &cur.galera) {
        (Some(p), Some(c)) => c
            .flow_control_paused_ns
            .checked_sub(p.flow_control_paused_ns)
            .map(|ns| (ns as f64 / 1e9 / secs).clamp(0.0, 1.0)),
        _ => None,
    };
    Some(Rates {
        flow_control_paused,
        qps: delta("Questions")? as f64 / secs,
        slow_per_s: delta("Slow_queries")? as f64 / secs,
        innodb_rows_per_s: rows as f64 / secs,
        buffer_pool_hit: (requests > 0)
            .then(|| 1.0 - (reads.min(requests) as f64 / requests as f64)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn row(pairs: &[(&str, Option<&str>)]) -> Row {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
            .collect()
    }

    #[test]
    fn every_galera_figure_is_among_the_names_a_check_asks_for() {
        let rows: Vec<(String, String)> = GALERA_STATUS
            .iter()
            .map(|n| (n.to_string(), "7".to_string()))
            .collect();
        let g = Galera::from_rows(&rows, &[]).expect("a provider");
        assert_eq!(
            (
                g.local_state,
                g.cluster_size,
                g.recv_queue,
                g.cert_failures,
                g.last_committed,
                g.flow_control_paused_ns
            ),
            (7, 7, 7, 7, 7, 7)
        );
        assert_eq!(
            (
                g.state.as_str(),
                g.cluster_status.as_str(),
                g.cluster.as_str()
            ),
            ("7", "7", "7")
        );
    }

    #[test]
    fn galera_status_rows() {
        let kv = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let vars = kv(&[("wsrep_cluster_name", "prod"), ("wsrep_node_name", "db2")]);
        // (status, cluster, synced): no provider is no Galera node.
        let rows = [
            (
                kv(&[
                    ("wsrep_provider_name", "Galera"),
                    ("wsrep_local_state", "4"),
                    ("wsrep_local_state_comment", "Synced"),
                    ("wsrep_cluster_size", "3"),
                    ("wsrep_cluster_status", "Primary"),
                    ("wsrep_flow_control_paused_ns", "1500000000"),
                ]),
                Some("prod"),
                true,
            ),
            (
                kv(&[
                    ("wsrep_provider_name", "Galera"),
                    ("wsrep_local_state", "2"),
                    ("wsrep_cluster_status", "Primary"),
                ]),
                Some("prod"),
                false,
            ),
            (
                kv(&[
                    ("wsrep_provider_name", ""),
                    ("wsrep_cluster_status", "Disconnected"),
                ]),
                None,
                false,
            ),
            (kv(&[]), None, false),
        ];
        for (status, cluster, synced) in rows {
            let g = Galera::from_rows(&status, &vars);
            assert_eq!(
                g.as_ref().map(|g| g.cluster.as_str()),
                cluster,
                "{status:?}"
            );
            assert_eq!(g.is_some_and(|g| g.synced()), synced, "{status:?}");
        }
        // Flow control: 1.5 s paused in a 3 s interval is half.
        let at = |ns: u64, uptime: u64| {
            let mut s = Sample::default();
            s.read_status(&[("Uptime".into(), uptime.to_string())]);
            s.galera = Some(Galera {
                flow_control_paused_ns: ns,
                ..Galera::default()
            });
            s
        };
        let r = rates(&at(0, 10), &at(1_500_000_000, 13), 3.0).expect("rates");
        assert_eq!(r.flow_control_paused, Some(0.5));
    }

    #[test]
    fn reads_mariadb_and_mysql_replication_rows() {
        let maria = Channel::from_row(&row(&[
            ("Connection_name", Some("eu")),
            ("Master_Host", Some("10.0.0.1")),
            ("Master_Port", Some("3306")),
            ("Slave_IO_Running", Some("Yes")),
            ("Slave_SQL_Running", Some("No")),
            ("Seconds_Behind_Master", None),
            ("Last_SQL_Errno", Some("1062")),
            ("Last_SQL_Error", Some("Duplicate entry")),
            ("Last_IO_Errno", Some("0")),
            ("Last_IO_Error", Some("")),
            ("Gtid_IO_Pos", Some("0-1-5")),
        ]));
        assert_eq!(maria.name, "eu");
        assert_eq!(maria.source, "10.0.0.1:3306");
        assert!(!maria.running());
        assert_eq!(maria.lag, None);
        assert_eq!(maria.last_error, "SQL error 1062: Duplicate entry");
        let mysql = Channel::from_row(&row(&[
            ("Channel_Name", Some("")),
            ("Source_Host", Some("db1")),
            ("Source_Port", Some("3306")),
            ("Replica_IO_Running", Some("Yes")),
            ("Replica_SQL_Running", Some("Yes")),
            ("Seconds_Behind_Source", Some("7")),
            ("Executed_Gtid_Set", Some("uuid:1-10,\nuuid2:1-3")),
        ]));
        assert!(mysql.running());
        assert_eq!(mysql.lag, Some(7));
        assert_eq!(mysql.gtid, "uuid:1-10,uuid2:1-3");
        assert_eq!(mysql.last_error, "");
    }

    fn sample(uptime: u64, questions: u64, reads: u64, requests: u64) -> Sample {
        let mut s = Sample::default();
        s.read_status(&[
            ("Uptime".into(), uptime.to_string()),
            ("Questions".into(), questions.to_string()),
            ("Slow_queries".into(), "0".into()),
            ("Innodb_buffer_pool_reads".into(), reads.to_string()),
            (
                "Innodb_buffer_pool_read_requests".into(),
                requests.to_string(),
            ),
            ("Threads_connected".into(), "not a number".into()),
        ]);
        s
    }

    #[test]
    fn rates_between_two_samples_and_none_across_a_restart() {
        let a = sample(100, 1000, 10, 100);
        let b = sample(102, 3000, 20, 1100);
        let r = rates(&a, &b, 2.0).expect("rates");
        assert_eq!(r.qps, 1000.0);
        assert_eq!(r.buffer_pool_hit, Some(0.99));
        assert!(!b.status.contains_key("Threads_connected"));
        // restarted: uptime went back
        assert_eq!(rates(&b, &sample(5, 10, 0, 0), 2.0), None);
        assert_eq!(rates(&a, &b, 0.0), None);
        // An idle interval: the hit rate since the server started.
        let idle = sample(104, 3000, 20, 1100);
        assert_eq!(
            rates(&b, &idle, 2.0).and_then(|r| r.buffer_pool_hit),
            Some(1.0 - 20.0 / 1100.0)
        );
        let never = sample(1, 0, 0, 0);
        assert_eq!(
            rates(&never, &sample(2, 0, 0, 0), 1.0).and_then(|r| r.buffer_pool_hit),
            None
        );
    }

    proptest! {
        #[test]
        fn rates_never_panic_and_are_never_negative(
            a in proptest::collection::vec(any::<u64>(), 4),
            b in proptest::collection::vec(any::<u64>(), 4),
            secs in any::<f64>(),
        ) {
            let x = sample(a[0], a[1], a[2], a[3]);
            let y = sample(b[0], b[1], b[2], b[3]);
            if let Some(r) = rates(&x, &y, secs) {
                prop_assert!(r.qps >= 0.0);
                if let Some(h) = r.buffer_pool_hit {
                    prop_assert!((0.0..=1.0).contains(&h));
                }
            }
        }

        #[test]
        fn any_replication_row_reads_without_panic(
            pairs in proptest::collection::vec((".{0,20}", proptest::option::of(".{0,20}")), 0..20)
        ) {
            let r: Row = pairs.into_iter().collect();
            let _ = Channel::from_row(&r);
        }
    }
}

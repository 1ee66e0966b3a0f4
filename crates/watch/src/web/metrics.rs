//! `/metrics`: the fleet in Prometheus' text format 0.0.4 (the `prometheus`
//! crate encodes it, so HELP/TYPE lines, label escaping and the
//! histogram's cumulative buckets are right by construction, and
//! `promtool check metrics` accepts it). Gauges and counters are read
//! from the fleet view at each scrape; the check-time histogram is kept
//! here and fed by the recorder, one observation per check.

use prometheus::core::Collector;
use prometheus::{
    exponential_buckets, Encoder, GaugeVec, Histogram, HistogramOpts, IntCounterVec, IntGaugeVec,
    Opts, Registry, TextEncoder,
};

use crate::figures::Figures;
use crate::monitor::{Fleet, State};
use crate::sample::Galera;

const PREFIX: &str = "sqlfleet_watch_";

/// What outlives a scrape: the check-time histogram.
pub struct Metrics {
    check_seconds: Option<Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        let h = exponential_buckets(0.0005, 2.0, 14).and_then(|b| {
            Histogram::with_opts(
                HistogramOpts::new(
                    format!("{PREFIX}check_duration_seconds"),
                    "How long checks took (login when needed, the status round trip)",
                )
                .buckets(b),
            )
        });
        Metrics {
            check_seconds: h.ok(),
        }
    }
}

const STATES: [State; 6] = [
    State::Unknown,
    State::Ok,
    State::Degraded,
    State::Denied,
    State::Stalled,
    State::Down,
];

/// A host tag's key as a Prometheus label name: letters, digits and `_`,
/// not starting with a digit or `__`, never `server`.
pub fn label_name(key: &str) -> String {
    let mut l: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if l.is_empty()
        || l.starts_with(|c: char| c.is_ascii_digit())
        || l.starts_with("__")
        || l == "server"
    {
        l = format!("tag_{l}");
    }
    l
}

/// (label, tag key) for every distinct tag key, sorted: two keys that make
/// the same label name (`a-b`, `a_b`) each keep their values, the later
/// one as `a_b_2`.
pub fn tag_labels<'a>(keys: impl Iterator<Item = &'a String>) -> Vec<(String, String)> {
    let mut keys: Vec<&String> = keys.collect();
    keys.sort();
    keys.dedup();
    let mut out: Vec<(String, String)> = Vec::new();
    for k in keys {
        let base = label_name(k);
        let mut l = base.clone();
        let mut n = 1;
        while out.iter().any(|(o, _)| *o == l) {
            n += 1;
            l = format!("{base}_{n}");
        }
        out.push((l, k.clone()));
    }
    out
}

fn gauge(name: &str, help: &str, labels: &[&str]) -> prometheus::Result<GaugeVec> {
    GaugeVec::new(Opts::new(format!("{PREFIX}{name}"), help), labels)
}

fn int_gauge(name: &str, help: &str, labels: &[&str]) -> prometheus::Result<IntGaugeVec> {
    IntGaugeVec::new(Opts::new(format!("{PREFIX}{name}"), help), labels)
}

impl Metrics {
    pub fn observe_check(&self, seconds: f64) {
        if let Some(h) = &self.check_seconds {
            h.observe(seconds);
        }
    }

    /// The text exposition of the fleet as it is now.
    pub fn render(&self, fleet: &Fleet) -> prometheus::Result<String> {
        // Per-server series carry the host tags (node=, role=, ...) as
        // labels: the union of every server's keys, "" where one has none.
        let tag_keys = tag_labels(fleet.servers.iter().flat_map(|s| s.tags.keys()));
        let mut tagged_labels: Vec<&str> = vec!["server"];
        tagged_labels.extend(tag_keys.iter().map(|(l, _)| l.as_str()));
        let f = Families::new(&tagged_labels)?;
        for st in STATES {
            f.servers
                .with_label_values(&[st.name()])
                .set(fleet.count(st) as i64);
        }
        for s in &fleet.servers {
            let mut tagged: Vec<&str> = vec![s.server.as_str()];
            tagged.extend(
                tag_keys
                    .iter()
                    .map(|(_, k)| s.tags.get(k).map(String::as_str).unwrap_or("")),
            );
            f.server(s, &tagged);
        }
        let r = f.registry()?;
        if let Some(h) = &self.check_seconds {
            r.register(Box::new(h.clone()))?;
        }
        let mut out = Vec::new();
        TextEncoder::new().encode(&r.gather(), &mut out)?;
        String::from_utf8(out).map_err(|e| prometheus::Error::Msg(e.to_string()))
    }
}

/// A per-server figure: its name, help and value.
type FigureFamily = (&'static str, &'static str, fn(&Figures) -> Option<f64>);

/// The gauges labelled with the server and its tags, from its figures.
const FIGURES: &[FigureFamily] = &[
    (
        "queries_per_second",
        "Questions per second over the last interval",
        |f| f.qps,
    ),
    ("threads_running", "Threads_running", |f| f.running),
    ("threads_connected", "Threads_connected", |f| f.connected),
    (
        "host_cpu_percent",
        "Host CPU busy (user+nice+system), percent",
        |f| f.cpu,
    ),
    (
        "host_memory_used_percent",
        "Host memory in use (total - available), percent",
        |f| f.mem,
    ),
    (
        "host_disk_used_percent",
        "Disk use of the data directory's file system, percent",
        |f| f.disk,
    ),
    (
        "slow_queries_per_second",
        "Slow_queries per second over the last interval",
        |f| f.slow,
    ),
    (
        "buffer_pool_hit_ratio",
        "Share of InnoDB buffer pool page requests served from memory over the last interval (0-1)",
        |f| f.bp_hit.map(|p| p / 100.0),
    ),
    (
        "innodb_row_operations_per_second",
        "InnoDB rows read, inserted, updated and deleted per second over the last interval",
        |f| f.rows,
    ),
];

/// A Galera node's figure: its name, help and value.
type GaleraFamily = (&'static str, &'static str, fn(&Galera) -> i64);

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The gauges labelled with the server, its cluster and node name.
const GALERA: &[GaleraFamily] = &[
    (
        "galera_cluster_size",
        "Members of the Galera cluster as this node sees them (wsrep_cluster_size)",
        |g| int(g.cluster_size),
    ),
    (
        "galera_primary",
        "1 when the node is in the Primary component (wsrep_cluster_status)",
        |g| (g.cluster_status == "Primary") as i64,
    ),
    (
        "galera_synced",
        "1 when the node is Synced (wsrep_local_state 4)",
        |g| g.synced() as i64,
    ),
    (
        "galera_recv_queue",
        "Write sets received and not yet applied (wsrep_local_recv_queue)",
        |g| int(g.recv_queue),
    ),
    (
        "galera_cert_failures",
        "Certification failures since the node started (wsrep_local_cert_failures)",
        |g| int(g.cert_failures),
    ),
    (
        "galera_last_committed",
        "The node's last committed seqno (wsrep_last_committed)",
        |g| int(g.last_committed),
    ),
];

/// Every family of one scrape.
struct Families {
    servers: IntGaugeVec,
    state: IntGaugeVec,
    info: IntGaugeVec,
    checks: IntCounterVec,
    up: IntGaugeVec,
    connect: GaugeVec,
    max_conn: GaugeVec,
    /// One per [`FIGURES`] row.
    figures: Vec<GaugeVec>,
    lag: GaugeVec,
    io: IntGaugeVec,
    sql: IntGaugeVec,
    /// One per [`GALERA`] row.
    galera: Vec<IntGaugeVec>,
    flow_control: GaugeVec,
    st_time: GaugeVec,
    st_calls: GaugeVec,
}

impl Families {
    /// `tagged`: the labels of the per-server series ("server" and the tags').
    fn new(tagged: &[&str]) -> prometheus::Result<Families> {
        let ch = ["server", "channel"];
        let gl = ["server", "cluster", "node"];
        // A server's five costliest statements of the last minute, by
        // digest (bounded: five series per server and figure).
        let st_l = ["server", "method", "digest"];
        Ok(Families {
            servers: int_gauge("servers", "Servers watched, by state", &["state"])?,
            state: int_gauge(
                "state",
                "1 for the state a server is in, 0 for the others",
                &["server", "state"],
            )?,
            info: int_gauge(
                "server_info",
                "The server's version and read_only (value always 1)",
                &["server", "version", "read_only"],
            )?,
            checks: IntCounterVec::new(
                Opts::new(
                    format!("{PREFIX}checks_total"),
                    "Checks made of the server since the watcher started",
                ),
                &["server"],
            )?,
            up: int_gauge("up", "1 when the server answered its last check", tagged)?,
            connect: gauge("connect_seconds", "How long the last login took", tagged)?,
            max_conn: gauge("max_connections", "max_connections", tagged)?,
            figures: FIGURES
                .iter()
                .map(|(name, help, _)| gauge(name, help, tagged))
                .collect::<prometheus::Result<_>>()?,
            lag: gauge(
                "replication_lag_seconds",
                "Seconds_Behind_Master of a replication channel",
                &ch,
            )?,
            io: int_gauge(
                "replication_io_running",
                "1 when the channel's I/O thread runs",
                &ch,
            )?,
            sql: int_gauge(
                "replication_sql_running",
                "1 when the channel's SQL thread runs",
                &ch,
            )?,
            galera: GALERA
                .iter()
                .map(|(name, help, _)| int_gauge(name, help, &gl))
                .collect::<prometheus::Result<_>>()?,
            flow_control: gauge(
                "galera_flow_control_paused_ratio",
                "Share of the last interval the node's replication was paused by flow control (0-1)",
                &gl,
            )?,
            st_time: gauge(
                "statement_seconds_per_second",
                "Time a top statement of the server took per second over the last minute (performance_schema), or the busy time it was seen running (processlist sampling); digest: the normalized text, 200 characters at most",
                &st_l,
            )?,
            st_calls: gauge(
                "statement_calls_per_second",
                "Calls per second of a top statement over the last minute (performance_schema only)",
                &st_l,
            )?,
        })
    }

    /// One server's series; `tagged` its values of the tagged labels.
    fn server(&self, s: &crate::monitor::Server, tagged: &[&str]) {
        let n = s.server.as_str();
        for st in STATES {
            self.state
                .with_label_values(&[n, st.name()])
                .set((s.state == st) as i64);
        }
        self.up
            .with_label_values(tagged)
            // (A denied server answered too: the refusal is its answer.)
            .set(matches!(s.state, State::Ok | State::Degraded | State::Denied) as i64);
        self.checks.with_label_values(&[n]).inc_by(s.checks);
        if let Some(ms) = s.connect_ms {
            self.connect.with_label_values(tagged).set(ms / 1000.0);
        }
        self.statements(s);
        let f = Figures::of(s);
        for (fam, (_, _, value)) in self.figures.iter().zip(FIGURES) {
            if let Some(v) = value(&f) {
                fam.with_label_values(tagged).set(v);
            }
        }
        let Some(x) = s.sample.as_ref().filter(|_| f.running.is_some()) else {
            return;
        };
        self.max_conn
            .with_label_values(tagged)
            .set(x.max_connections as f64);
        let read_only = if x.read_only { "true" } else { "false" };
        self.info
            .with_label_values(&[n, &x.version, read_only])
            .set(1);
        if let Some(g) = &x.galera {
            let l = [n, g.cluster.as_str(), g.node.as_str()];
            for (fam, (_, _, value)) in self.galera.iter().zip(GALERA) {
                fam.with_label_values(&l).set(value(g));
            }
            if let Some(p) = s.rates.as_ref().and_then(|r| r.flow_control_paused) {
                self.flow_control.with_label_values(&l).set(p);
            }
        }
        for c in &x.channels {
            let l = [n, c.name.as_str()];
            if let Some(v) = c.lag {
                self.lag.with_label_values(&l).set(v as f64);
            }
            self.io
                .with_label_values(&l)
                .set(c.io_running.eq_ignore_ascii_case("yes") as i64);
            self.sql
                .with_label_values(&l)
                .set(c.sql_running.eq_ignore_ascii_case("yes") as i64);
        }
    }

    /// The server's top statements of the last minute.
    fn statements(&self, s: &crate::monitor::Server) {
        let Some(m) = s.statements.method else {
            return;
        };
        let secs = s.statements.seconds();
        if secs <= 0.0 {
            return;
        }
        for t in s.statements.top(5, crate::statements::SortBy::Time) {
            let digest: String = t.digest.chars().take(200).collect();
            let l = [s.server.as_str(), m.name(), digest.as_str()];
            self.st_time.with_label_values(&l).set(t.seconds / secs);
            if m == crate::statements::Method::PerformanceSchema {
                self.st_calls.with_label_values(&l).set(t.calls_per_s);
            }
        }
    }

    /// Every family in one registry.
    fn registry(self) -> prometheus::Result<Registry> {
        let r = Registry::new();
        let mut all: Vec<Box<dyn Collector>> = vec![
            Box::new(self.servers),
            Box::new(self.state),
            Box::new(self.up),
            Box::new(self.info),
            Box::new(self.checks),
            Box::new(self.connect),
            Box::new(self.max_conn),
            Box::new(self.lag),
            Box::new(self.io),
            Box::new(self.sql),
            Box::new(self.flow_control),
            Box::new(self.st_time),
            Box::new(self.st_calls),
        ];
        all.extend(
            self.figures
                .into_iter()
                .map(|g| Box::new(g) as Box<dyn Collector>),
        );
        all.extend(
            self.galera
                .into_iter()
                .map(|g| Box::new(g) as Box<dyn Collector>),
        );
        for c in all {
            r.register(c)?;
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_keys_become_distinct_label_names() {
        let keys: Vec<String> = ["role", "a-b", "a_b", "server", "2x", "role"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let got = tag_labels(keys.iter());
        let want: Vec<(String, String)> = [
            ("tag_2x", "2x"),
            ("a_b", "a-b"),
            ("a_b_2", "a_b"),
            ("role", "role"),
            ("tag_server", "server"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(got, want);
    }
}

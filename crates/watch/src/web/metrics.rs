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
        let servers = int_gauge("servers", "Servers watched, by state", &["state"])?;
        let state = int_gauge(
            "state",
            "1 for the state a server is in, 0 for the others",
            &["server", "state"],
        )?;
        let info = int_gauge(
            "server_info",
            "The server's version and read_only (value always 1)",
            &["server", "version", "read_only"],
        )?;
        let checks = IntCounterVec::new(
            Opts::new(
                format!("{PREFIX}checks_total"),
                "Checks made of the server since the watcher started",
            ),
            &["server"],
        )?;
        // Per-server series carry the host tags (node=, role=, ...) as
        // labels: the union of every server's keys, "" where one has none.
        let tag_keys = tag_labels(fleet.servers.iter().flat_map(|s| s.tags.keys()));
        let mut s_: Vec<&str> = vec!["server"];
        s_.extend(tag_keys.iter().map(|(l, _)| l.as_str()));
        let up = int_gauge("up", "1 when the server answered its last check", &s_)?;
        let connect = gauge("connect_seconds", "How long the last login took", &s_)?;
        let qps = gauge(
            "queries_per_second",
            "Questions per second over the last interval",
            &s_,
        )?;
        let running = gauge("threads_running", "Threads_running", &s_)?;
        let connected = gauge("threads_connected", "Threads_connected", &s_)?;
        let max_conn = gauge("max_connections", "max_connections", &s_)?;
        let cpu = gauge(
            "host_cpu_percent",
            "Host CPU busy (user+nice+system), percent",
            &s_,
        )?;
        let mem = gauge(
            "host_memory_used_percent",
            "Host memory in use (total - available), percent",
            &s_,
        )?;
        let disk = gauge(
            "host_disk_used_percent",
            "Disk use of the data directory's file system, percent",
            &s_,
        )?;
        let slow = gauge(
            "slow_queries_per_second",
            "Slow_queries per second over the last interval",
            &s_,
        )?;
        let bp_hit = gauge(
            "buffer_pool_hit_ratio",
            "Share of InnoDB buffer pool page requests served from memory over the last interval (0-1)",
            &s_,
        )?;
        let rows = gauge(
            "innodb_row_operations_per_second",
            "InnoDB rows read, inserted, updated and deleted per second over the last interval",
            &s_,
        )?;
        let ch = ["server", "channel"];
        let lag = gauge(
            "replication_lag_seconds",
            "Seconds_Behind_Master of a replication channel",
            &ch,
        )?;
        let io = int_gauge(
            "replication_io_running",
            "1 when the channel's I/O thread runs",
            &ch,
        )?;
        let sql = int_gauge(
            "replication_sql_running",
            "1 when the channel's SQL thread runs",
            &ch,
        )?;
        let gl = ["server", "cluster", "node"];
        let g_size = int_gauge(
            "galera_cluster_size",
            "Members of the Galera cluster as this node sees them (wsrep_cluster_size)",
            &gl,
        )?;
        let g_primary = int_gauge(
            "galera_primary",
            "1 when the node is in the Primary component (wsrep_cluster_status)",
            &gl,
        )?;
        let g_synced = int_gauge(
            "galera_synced",
            "1 when the node is Synced (wsrep_local_state 4)",
            &gl,
        )?;
        let g_queue = int_gauge(
            "galera_recv_queue",
            "Write sets received and not yet applied (wsrep_local_recv_queue)",
            &gl,
        )?;
        let g_cert = int_gauge(
            "galera_cert_failures",
            "Certification failures since the node started (wsrep_local_cert_failures)",
            &gl,
        )?;
        let g_seqno = int_gauge(
            "galera_last_committed",
            "The node's last committed seqno (wsrep_last_committed)",
            &gl,
        )?;
        let g_fc = gauge(
            "galera_flow_control_paused_ratio",
            "Share of the last interval the node's replication was paused by flow control (0-1)",
            &gl,
        )?;
        // A server's five costliest statements of the last minute, by
        // digest (bounded: five series per server and figure).
        let st_l = ["server", "method", "digest"];
        let st_time = gauge(
            "statement_seconds_per_second",
            "Time a top statement of the server took per second over the last minute (performance_schema), or the busy time it was seen running (processlist sampling); digest: the normalized text, 200 characters at most",
            &st_l,
        )?;
        let st_calls = gauge(
            "statement_calls_per_second",
            "Calls per second of a top statement over the last minute (performance_schema only)",
            &st_l,
        )?;
        for st in STATES {
            servers
                .with_label_values(&[st.name()])
                .set(fleet.count(st) as i64);
        }
        for s in &fleet.servers {
            let n = s.server.as_str();
            let mut tagged: Vec<&str> = vec![n];
            tagged.extend(
                tag_keys
                    .iter()
                    .map(|(_, k)| s.tags.get(k).map(String::as_str).unwrap_or("")),
            );
            for st in STATES {
                state
                    .with_label_values(&[n, st.name()])
                    .set((s.state == st) as i64);
            }
            up.with_label_values(&tagged)
                // (A denied server answered too: the refusal is its answer.)
                .set(matches!(s.state, State::Ok | State::Degraded | State::Denied) as i64);
            checks.with_label_values(&[n]).inc_by(s.checks);
            if let Some(ms) = s.connect_ms {
                connect.with_label_values(&tagged).set(ms / 1000.0);
            }
            if let Some(m) = s.statements.method {
                let secs = s.statements.seconds();
                for t in s
                    .statements
                    .top(5, crate::statements::SortBy::Time)
                    .iter()
                    .filter(|_| secs > 0.0)
                {
                    let digest: String = t.digest.chars().take(200).collect();
                    let l = [n, m.name(), digest.as_str()];
                    st_time.with_label_values(&l).set(t.seconds / secs);
                    if m == crate::statements::Method::PerformanceSchema {
                        st_calls.with_label_values(&l).set(t.calls_per_s);
                    }
                }
            }
            let f = Figures::of(s);
            for (fam, v) in [
                (&qps, f.qps),
                (&running, f.running),
                (&connected, f.connected),
                (&cpu, f.cpu),
                (&mem, f.mem),
                (&disk, f.disk),
                (&slow, f.slow),
                (&bp_hit, f.bp_hit.map(|p| p / 100.0)),
                (&rows, f.rows),
            ] {
                if let Some(v) = v {
                    fam.with_label_values(&tagged).set(v);
                }
            }
            let Some(x) = s.sample.as_ref().filter(|_| f.running.is_some()) else {
                continue;
            };
            max_conn
                .with_label_values(&tagged)
                .set(x.max_connections as f64);
            info.with_label_values(&[n, &x.version, if x.read_only { "true" } else { "false" }])
                .set(1);
            if let Some(g) = &x.galera {
                let l = [n, g.cluster.as_str(), g.node.as_str()];
                let i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
                g_size.with_label_values(&l).set(i(g.cluster_size));
                g_primary
                    .with_label_values(&l)
                    .set((g.cluster_status == "Primary") as i64);
                g_synced.with_label_values(&l).set(g.synced() as i64);
                g_queue.with_label_values(&l).set(i(g.recv_queue));
                g_cert.with_label_values(&l).set(i(g.cert_failures));
                g_seqno.with_label_values(&l).set(i(g.last_committed));
                if let Some(p) = s.rates.as_ref().and_then(|r| r.flow_control_paused) {
                    g_fc.with_label_values(&l).set(p);
                }
            }
            for c in &x.channels {
                let l = [n, c.name.as_str()];
                if let Some(v) = c.lag {
                    lag.with_label_values(&l).set(v as f64);
                }
                io.with_label_values(&l)
                    .set(c.io_running.eq_ignore_ascii_case("yes") as i64);
                sql.with_label_values(&l)
                    .set(c.sql_running.eq_ignore_ascii_case("yes") as i64);
            }
        }
        let r = Registry::new();
        let all: Vec<Box<dyn Collector>> = vec![
            Box::new(servers),
            Box::new(state),
            Box::new(up),
            Box::new(info),
            Box::new(checks),
            Box::new(connect),
            Box::new(qps),
            Box::new(running),
            Box::new(connected),
            Box::new(max_conn),
            Box::new(lag),
            Box::new(io),
            Box::new(sql),
            Box::new(cpu),
            Box::new(mem),
            Box::new(disk),
            Box::new(slow),
            Box::new(bp_hit),
            Box::new(rows),
            Box::new(g_size),
            Box::new(g_primary),
            Box::new(g_synced),
            Box::new(g_queue),
            Box::new(g_cert),
            Box::new(g_seqno),
            Box::new(g_fc),
            Box::new(st_time),
            Box::new(st_calls),
        ];
        for c in all {
            r.register(c)?;
        }
        if let Some(h) = &self.check_seconds {
            r.register(Box::new(h.clone()))?;
        }
        let mut out = Vec::new();
        TextEncoder::new().encode(&r.gather(), &mut out)?;
        String::from_utf8(out).map_err(|e| prometheus::Error::Msg(e.to_string()))
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

//! The numbers of one server at its last check that are charted, kept in
//! the history and exported as metrics: one place decides what "qps" or
//! "connections %" means for every consumer.

use serde::Serialize;

use crate::monitor::{Server, State};

/// A server's figures; `None` where the check did not give one (down,
/// stalled, no SSH, no replication).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Figures {
    pub qps: Option<f64>,
    pub running: Option<f64>,
    pub connected: Option<f64>,
    /// Threads_connected as a share of max_connections, in percent.
    pub conn_pct: Option<f64>,
    /// The largest lag of the replication channels, in seconds.
    pub lag: Option<f64>,
    pub cpu: Option<f64>,
    pub mem: Option<f64>,
    pub disk: Option<f64>,
    /// Slow queries per second (the server's Slow_queries counter).
    pub slow: Option<f64>,
    /// Buffer pool page requests served from memory, in percent.
    pub bp_hit: Option<f64>,
    /// InnoDB row operations (read, inserted, updated, deleted) per second.
    pub rows: Option<f64>,
}

/// The figures a chart or a metric can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Qps,
    Running,
    Connected,
    ConnPct,
    Lag,
    Cpu,
    Mem,
    Disk,
    Slow,
    BpHit,
    Rows,
}

impl Metric {
    pub const ALL: [Metric; 11] = [
        Metric::Qps,
        Metric::Running,
        Metric::Connected,
        Metric::ConnPct,
        Metric::Lag,
        Metric::Cpu,
        Metric::Mem,
        Metric::Disk,
        Metric::Slow,
        Metric::BpHit,
        Metric::Rows,
    ];

    /// The name in URLs, the history's column and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Qps => "qps",
            Metric::Running => "running",
            Metric::Connected => "connected",
            Metric::ConnPct => "conn_pct",
            Metric::Lag => "lag",
            Metric::Cpu => "cpu",
            Metric::Mem => "mem",
            Metric::Disk => "disk",
            Metric::Slow => "slow",
            Metric::BpHit => "bp_hit",
            Metric::Rows => "rows",
        }
    }

    /// What a chart's axis says.
    pub fn label(self) -> &'static str {
        match self {
            Metric::Qps => "queries per second",
            Metric::Running => "threads running",
            Metric::Connected => "connections",
            Metric::ConnPct => "connections, % of max_connections",
            Metric::Lag => "replication lag, s",
            Metric::Cpu => "host CPU, %",
            Metric::Mem => "host memory used, %",
            Metric::Disk => "data directory disk used, %",
            Metric::Slow => "slow queries per second",
            Metric::BpHit => "buffer pool hit rate, %",
            Metric::Rows => "InnoDB row operations per second",
        }
    }

    pub fn parse(s: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == s)
    }

    pub fn of(self, f: &Figures) -> Option<f64> {
        match self {
            Metric::Qps => f.qps,
            Metric::Running => f.running,
            Metric::Connected => f.connected,
            Metric::ConnPct => f.conn_pct,
            Metric::Lag => f.lag,
            Metric::Cpu => f.cpu,
            Metric::Mem => f.mem,
            Metric::Disk => f.disk,
            Metric::Slow => f.slow,
            Metric::BpHit => f.bp_hit,
            Metric::Rows => f.rows,
        }
    }
}

impl Figures {
    pub fn of(s: &Server) -> Figures {
        let sample = s
            .sample
            .as_ref()
            .filter(|_| matches!(s.state, State::Ok | State::Degraded));
        let host = s.host.as_ref();
        let connected = sample.map(|x| x.counter("Threads_connected") as f64);
        let rates = s.rates.filter(|_| sample.is_some());
        Figures {
            qps: rates.map(|r| r.qps),
            running: sample.map(|x| x.counter("Threads_running") as f64),
            connected,
            conn_pct: sample
                .filter(|x| x.max_connections > 0)
                .and_then(|x| connected.map(|c| 100.0 * c / x.max_connections as f64)),
            lag: sample
                .and_then(|x| x.channels.iter().filter_map(|c| c.lag).max())
                .map(|l| l as f64),
            cpu: host.and_then(|h| h.cpu_percent),
            mem: host.and_then(|h| h.mem_used_percent()),
            disk: host.and_then(|h| h.disk_percent),
            slow: rates.map(|r| r.slow_per_s),
            bp_hit: rates.and_then(|r| r.buffer_pool_hit).map(|h| 100.0 * h),
            rows: rates.map(|r| r.innodb_rows_per_s),
        }
    }
}

//! What the server and the host were doing: settings, SHOW GLOBAL STATUS
//! deltas, Threads_running and host CPU sampled once a second.

use std::collections::BTreeMap;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use serde::{Deserialize, Serialize};
use sqlfleet_conn::Target;

/// The database the workloads create their tables in.
pub const DB: &str = "sqlfleet_bench";
pub const CONNECT: std::time::Duration = std::time::Duration::from_secs(10);

/// A connection for set-up and sampling (not a measured one).
pub async fn connect(t: &Target) -> Result<Conn, mysql_async::Error> {
    t.connect(CONNECT)
        .await
        .map_err(|e| mysql_async::Error::Other(e.to_string().into()))
}

/// The server's settings for a report (numbers as numbers) and the
/// endpoint measured; an `error` entry when it cannot be asked.
pub async fn info(t: &Target) -> BTreeMap<String, serde_json::Value> {
    let mut out = BTreeMap::new();
    match connect(t).await {
        Ok(mut c) => {
            let v = variables(&mut c, SETTINGS, false).await.unwrap_or_default();
            let _ = c.disconnect().await;
            for (k, v) in v {
                out.insert(k, setting(&v));
            }
            out.insert("endpoint".into(), t.endpoint.to_string().into());
        }
        Err(e) => {
            out.insert("error".into(), e.to_string().into());
        }
    }
    out
}

/// A server setting as JSON: a number when it reads as one.
pub fn setting(v: &str) -> serde_json::Value {
    if let Ok(n) = v.parse::<i64>() {
        return n.into();
    }
    match v.parse::<f64>() {
        Ok(f) if f.is_finite() && !v.is_empty() => f.into(),
        _ => v.into(),
    }
}

/// Drops what the workloads created (`--cleanup`).
pub async fn cleanup(t: &Target) -> Result<(), mysql_async::Error> {
    let mut c = connect(t).await?;
    c.query_drop(format!("DROP DATABASE IF EXISTS {DB}"))
        .await?;
    c.disconnect().await
}

/// Creates the bench database if needed and `table` afresh from its
/// column definitions. A server that reports `read_only = ON` (a replica)
/// is refused first: the bench's account usually has SUPER, and tables
/// created and filled on a replica fork it from its primary.
pub async fn recreate_table(
    c: &mut Conn,
    table: &str,
    definition: &str,
) -> Result<(), mysql_async::Error> {
    if sqlfleet_conn::read_only::ask(c).await? {
        return Err(mysql_async::Error::Other(
            format!(
                "the server is read_only (a replica?): bench creates and fills its tables in \
                 {DB} there, which would fork it from its primary; bench the primary (--sandbox \
                 NAME does), or SET GLOBAL read_only = 0 there first if you mean it"
            )
            .into(),
        ));
    }
    c.query_drop(format!("CREATE DATABASE IF NOT EXISTS {DB}"))
        .await?;
    c.query_drop(format!("DROP TABLE IF EXISTS {DB}.{table}"))
        .await?;
    c.query_drop(format!(
        "CREATE TABLE {DB}.{table} ({definition}) ENGINE=InnoDB"
    ))
    .await
}

/// Innodb_rows_inserted is gone from MariaDB 10.6+; Handler_write and
/// Com_insert stand in for it there.
pub const STATUS: &[&str] = &[
    "Threads_running",
    "Innodb_rows_inserted",
    "Handler_write",
    "Com_insert",
    "Connections",
    "Aborted_connects",
    "Questions",
];
/// What a pool cell's clients cost the server.
pub const POOL_STATUS: &[&str] = &[
    "Connections",
    "Aborted_connects",
    "Threads_created",
    "Com_select",
    "Questions",
    "Bytes_sent",
];
pub const SETTINGS: &[&str] = &[
    "version",
    "version_comment",
    "max_connections",
    "innodb_buffer_pool_size",
    "innodb_flush_log_at_trx_commit",
    "sync_binlog",
    "log_bin",
    "thread_handling",
];

pub async fn variables(
    c: &mut Conn,
    names: &[&str],
    status: bool,
) -> Result<BTreeMap<String, String>, mysql_async::Error> {
    let list: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
    let sql = format!(
        "SHOW GLOBAL {} WHERE Variable_name IN ({})",
        if status { "STATUS" } else { "VARIABLES" },
        list.join(",")
    );
    let rows: Vec<(String, String)> = c.query(sql).await?;
    Ok(rows.into_iter().collect())
}

/// Counters after minus before (gauges like Threads_running are sampled instead).
pub fn deltas(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> BTreeMap<String, i64> {
    after
        .iter()
        .filter(|(k, _)| k.as_str() != "Threads_running")
        .filter_map(|(k, v)| {
            let a: i64 = v.parse().ok()?;
            let b: i64 = before.get(k)?.parse().ok()?;
            Some((k.clone(), a - b))
        })
        .collect()
}

/// Host CPU busy share from /proc/stat between two readings.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuTimes {
    busy: u64,
    total: u64,
}

pub fn cpu_times() -> Option<CpuTimes> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 5 {
        return None;
    }
    let idle = v[3] + v[4];
    let total: u64 = v.iter().take(8).sum();
    Some(CpuTimes {
        busy: total - idle,
        total,
    })
}

pub fn cpu_busy_percent(a: CpuTimes, b: CpuTimes) -> f64 {
    let dt = b.total.saturating_sub(a.total);
    if dt == 0 {
        return 0.0;
    }
    100.0 * b.busy.saturating_sub(a.busy) as f64 / dt as f64
}

/// Per-second gauges sampled during a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Gauges {
    pub threads_running: Vec<f64>,
    pub host_cpu_percent: Vec<f64>,
}

impl Gauges {
    /// Takes one sample: Threads_running from `side` (if connected) and the
    /// host CPU share since the previous reading in `cpu`.
    pub async fn sample(&mut self, side: Option<&mut Conn>, cpu: &mut Option<CpuTimes>) {
        if let Some(c) = side {
            if let Ok(v) = variables(c, &["Threads_running"], true).await {
                if let Some(t) = v.get("Threads_running").and_then(|x| x.parse().ok()) {
                    self.threads_running.push(t);
                }
            }
        }
        let now = cpu_times();
        if let (Some(a), Some(b)) = (*cpu, now) {
            self.host_cpu_percent.push(cpu_busy_percent(a, b));
        }
        *cpu = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_deltas_skip_gauges() {
        let b: BTreeMap<String, String> = [("Connections", "10"), ("Threads_running", "3")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let a: BTreeMap<String, String> = [("Connections", "25"), ("Threads_running", "9")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let d = deltas(&b, &a);
        assert_eq!(d.get("Connections"), Some(&15));
        assert!(!d.contains_key("Threads_running"));
    }

    #[test]
    fn cpu_reading() {
        let a = cpu_times().expect("/proc/stat");
        let b = CpuTimes {
            busy: a.busy + 50,
            total: a.total + 100,
        };
        assert!((cpu_busy_percent(a, b) - 50.0).abs() < 1e-9);
    }
}

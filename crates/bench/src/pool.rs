//! The connection-pool question: clients that connect, run q queries and
//! disconnect, direct and through each relay or proxy; queries/s per
//! window, connect and query latency histograms kept apart.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use serde::{Deserialize, Serialize};
use sqlfleet_conn::Target;

use crate::server::DB;
use crate::server::{self, Gauges};
use crate::stats::{histogram, micros, Latency, Spread};

use crate::server::CONNECT;

#[derive(Debug, Clone)]
pub struct PoolOptions {
    /// (label, target): "direct" first, then each --via.
    pub targets: Vec<(String, Target)>,
    pub queries_per_connection: Vec<u32>,
    pub clients: Vec<usize>,
    pub rows: u32,
    pub columns: u32,
    pub column_size: u32,
    /// Measured windows per cell, after one warm-up window.
    pub samples: usize,
    pub window: Duration,
    /// A cell whose errors exceed this share of its attempts (connects and
    /// queries) fails the run.
    pub max_error_rate: f64,
    /// Statements each client sends right after logging in (as drivers
    /// do), timed as part of its connect.
    pub connect_queries: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PoolCell {
    pub target: String,
    pub queries_per_connection: u32,
    pub clients: usize,
    pub qps: Spread,
    pub windows: Vec<f64>,
    pub warmup_windows: usize,
    /// Latencies of the measured windows (the warm-up left out, as from
    /// the rate).
    pub connect: Latency,
    pub query: Latency,
    pub errors: u64,
    pub connections: u64,
    /// The first error a client met (with the server's or client's code).
    #[serde(default)]
    pub first_error: Option<String>,
    /// More errors than the run allows (`max_error_rate`): its throughput
    /// says nothing and is not compared.
    #[serde(default)]
    pub failed: bool,
    /// SHOW GLOBAL STATUS deltas over the cell (on the direct server).
    #[serde(default)]
    pub status_deltas: std::collections::BTreeMap<String, i64>,
    pub gauges: Gauges,
    pub too_short: bool,
}

impl PoolCell {
    pub fn key(&self) -> String {
        format!(
            "pool {} q={} clients={}",
            self.target, self.queries_per_connection, self.clients
        )
    }
}

/// Creates the table the clients read (on the direct target).
pub async fn prepare(o: &PoolOptions) -> Result<(), mysql_async::Error> {
    let target = &o.targets[0].1;
    let mut c = server::connect(target).await?;
    let cols: Vec<String> = (1..=o.columns)
        .map(|i| format!("c{i} CHAR({}) NOT NULL", o.column_size))
        .collect();
    server::recreate_table(
        &mut c,
        "bench_pool",
        &format!("id INT PRIMARY KEY, {}", cols.join(", ")),
    )
    .await?;
    let vals: Vec<String> = (1..=o.columns)
        .map(|i| {
            format!(
                "LEFT(REPEAT(CONCAT('c{i}-', seq), {}), {})",
                o.column_size, o.column_size
            )
        })
        .collect();
    c.query_drop(format!(
        "INSERT INTO {DB}.bench_pool SELECT seq, {} FROM {DB}.seq_1_to_{}",
        vals.join(", "),
        o.rows.max(1)
    ))
    .await?;
    let _ = c.disconnect().await;
    Ok(())
}

/// Every cell of the sweep, target by clients by queries per connection;
/// `each` sees a cell as soon as it ends (the binary prints it).
pub async fn sweep(
    o: &PoolOptions,
    progress: &(dyn Fn(&str) + Sync),
    mut each: impl FnMut(&PoolCell),
) -> Vec<PoolCell> {
    let mut cells = Vec::new();
    for (label, t) in &o.targets {
        for &clients in &o.clients {
            for &q in &o.queries_per_connection {
                let c = run_cell(o, label, t, q, clients, progress).await;
                each(&c);
                cells.push(c);
            }
        }
    }
    cells
}

/// The sweep's table header.
pub const TABLE_HEAD: &str = "target                   q/conn clients                queries/s  connect p50/p99    query p50/p99  errors";

impl PoolCell {
    /// One cell's line of the table.
    pub fn line(&self) -> String {
        format!(
            "{:<24} {:>6} {:>7} {:>24} {:>16} {:>16} {:>7}{}",
            self.target,
            self.queries_per_connection,
            self.clients,
            self.qps.show(),
            format!("{}/{} µs", self.connect.p50_us, self.connect.p99_us),
            format!("{}/{} µs", self.query.p50_us, self.query.p99_us),
            self.errors,
            if self.failed {
                "  FAILED: too many errors"
            } else if self.too_short {
                "  (too short)"
            } else {
                ""
            }
        )
    }
}

/// One client of a cell.
struct Client {
    target: Target,
    stop: Arc<AtomicBool>,
    /// Past the warm-up window: latencies are recorded from then on, as
    /// the rates are counted.
    measuring: Arc<AtomicBool>,
    /// Queries answered, all clients.
    done_queries: Arc<AtomicU64>,
    /// Statements run after each login.
    connect_queries: Vec<String>,
    /// Queries per connection.
    q: u32,
}

/// What one client measured: connect and query latencies, errors,
/// connections, the first error.
type Measured = (
    hdrhistogram::Histogram<u64>,
    hdrhistogram::Histogram<u64>,
    u64,
    u64,
    Option<String>,
);

impl Client {
    /// Connects, runs its queries, disconnects, again until the cell stops.
    async fn run(self) -> Measured {
        let Client {
            target,
            stop,
            measuring,
            done_queries,
            connect_queries,
            q,
        } = self;
        let mut connect_h = histogram();
        let mut query_h = histogram();
        let (mut errors, mut connections) = (0u64, 0u64);
        let mut first_error: Option<String> = None;
        let mut note = |e: &dyn std::fmt::Display| {
            if first_error.is_none() {
                first_error = Some(e.to_string());
            }
        };
        let sql = format!("SELECT * FROM {DB}.bench_pool");
        while !stop.load(Ordering::Relaxed) {
            let t = Instant::now();
            let mut c = match target.connect(CONNECT).await {
                Ok(c) => c,
                Err(e) => {
                    errors += 1;
                    note(&e);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let mut login = Ok(());
            for sql in &connect_queries {
                login = c.query_drop(sql.as_str()).await;
                if login.is_err() {
                    break;
                }
            }
            if let Err(e) = login {
                errors += 1;
                note(&e);
                let _ = c.disconnect().await;
                continue;
            }
            connections += 1;
            if measuring.load(Ordering::Relaxed) {
                connect_h.saturating_record(micros(t));
            }
            for _ in 0..q {
                let t = Instant::now();
                match c.query_iter(sql.as_str()).await {
                    Ok(r) => match r.drop_result().await {
                        Ok(()) => {
                            if measuring.load(Ordering::Relaxed) {
                                query_h.saturating_record(micros(t));
                            }
                            done_queries.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            errors += 1;
                            note(&e);
                        }
                    },
                    Err(e) => {
                        errors += 1;
                        note(&e);
                        break;
                    }
                }
                if stop.load(Ordering::Relaxed) {
                    break;
                }
            }
            let _ = c.disconnect().await;
        }
        (connect_h, query_h, errors, connections, first_error)
    }
}

/// Runs one (target, q, clients) cell.
pub async fn run_cell(
    o: &PoolOptions,
    label: &str,
    target: &Target,
    q: u32,
    clients: usize,
    progress: &(dyn Fn(&str) + Sync),
) -> PoolCell {
    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let done_queries = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let client = Client {
                target: target.clone(),
                stop: stop.clone(),
                measuring: measuring.clone(),
                done_queries: done_queries.clone(),
                connect_queries: o.connect_queries.clone(),
                q,
            };
            tokio::spawn(client.run())
        })
        .collect();
    let mut side = target.connect(CONNECT).await.ok();
    // Status is read on the direct server, whatever the cell's target.
    let mut status_conn = o.targets[0].1.connect(CONNECT).await.ok();
    let before = match status_conn.as_mut() {
        Some(c) => server::variables(c, server::POOL_STATUS, true)
            .await
            .unwrap_or_default(),
        None => Default::default(),
    };
    let mut windows = Vec::new();
    let mut gauges = Gauges::default();
    let mut last = 0;
    let mut cpu = server::cpu_times();
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + o.window, o.window);
    for i in 0..=o.samples {
        tick.tick().await;
        let now = done_queries.load(Ordering::Relaxed);
        windows.push((now - last) as f64 / o.window.as_secs_f64());
        last = now;
        measuring.store(true, Ordering::Relaxed);
        gauges.sample(side.as_mut(), &mut cpu).await;
        progress(&format!(
            "{label} q={q} clients={clients} window {i}/{}: {:.0} queries/s",
            o.samples,
            windows[windows.len() - 1]
        ));
    }
    stop.store(true, Ordering::Relaxed);
    let mut connect_h = histogram();
    let mut query_h = histogram();
    let (mut errors, mut connections, mut first_error) = (0, 0, None);
    for t in tasks {
        match t.await {
            Ok((c, qh, e, n, first)) => {
                let _ = connect_h.add(&c);
                let _ = query_h.add(&qh);
                errors += e;
                connections += n;
                first_error = first_error.or(first);
            }
            // A client that stopped at an internal error is an error of
            // the cell, said: never a client quietly left out.
            Err(e) => {
                errors += 1;
                first_error = first_error.or(Some(format!(
                    "a client stopped at an internal error ({}): {}",
                    sqlfleet_conn::text::A_BUG,
                    sqlfleet_conn::text::join_message(e)
                )));
            }
        }
    }
    if let Some(s) = side {
        let _ = s.disconnect().await;
    }
    let status_deltas = match status_conn.as_mut() {
        Some(c) => match server::variables(c, server::POOL_STATUS, true).await {
            Ok(after) => server::deltas(&before, &after),
            Err(_) => Default::default(),
        },
        None => Default::default(),
    };
    if let Some(c) = status_conn {
        let _ = c.disconnect().await;
    }
    let measured = &windows[1.min(windows.len())..];
    let mut cell = PoolCell {
        target: label.to_string(),
        queries_per_connection: q,
        clients,
        qps: Spread::of(measured),
        too_short: measured.len() < 3,
        warmup_windows: 1,
        windows,
        connect: Latency::of(&connect_h),
        query: Latency::of(&query_h),
        errors,
        connections,
        first_error,
        failed: false,
        status_deltas,
        gauges,
    };
    let total_queries = done_queries.load(Ordering::Relaxed);
    let attempts = errors + connections + total_queries;
    cell.failed =
        errors > 0 && (total_queries == 0 || errors as f64 > o.max_error_rate * attempts as f64);
    cell
}

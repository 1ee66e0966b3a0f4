//! The logging workload: N concurrent inserters into a table pre-filled to
//! a size, with or without an index; per-second rates, stalls, connection
//! errors, and a check that every acknowledged insert is in the table
//! exactly once (lost and duplicated rows are named) — what a relay's
//! replay or a failover in between must keep.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use serde::{Deserialize, Serialize};
use sqlfleet_conn::Target;

use crate::server::{self, Gauges};
use crate::stats::Spread;

use crate::server::CONNECT;
use crate::server::DB;

#[derive(Debug, Clone)]
pub struct InsertOptions {
    pub target: Target,
    pub processes: Vec<usize>,
    pub table_sizes: Vec<u64>,
    /// Index on (fname, version): each setting to run.
    pub index: Vec<bool>,
    pub connect_per_insert: bool,
    /// Run each cell this long after the warm-up...
    pub duration: Option<Duration>,
    /// ...or until this many inserts are acknowledged.
    pub rows: Option<u64>,
    /// Seconds excluded from the statistics at the start of each cell.
    pub warmup_seconds: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InsertCell {
    pub processes: usize,
    pub table_size: u64,
    pub index: bool,
    pub connect: String,
    /// Inserts per second over the samples after warm-up.
    pub rate: Spread,
    /// Inserts committed in each second, warm-up included.
    pub series: Vec<u64>,
    pub warmup_seconds: usize,
    pub stalls: usize,
    pub acknowledged: u64,
    pub failed: u64,
    /// Errors by server code and message (or driver error).
    pub errors: BTreeMap<String, u64>,
    pub lost: u64,
    /// Up to 20 acknowledged rows that are missing.
    pub lost_rows: Vec<String>,
    /// Rows of this cell found more than once (each counted once).
    #[serde(default)]
    pub duplicated: u64,
    /// Up to 20 of them.
    #[serde(default)]
    pub duplicated_rows: Vec<String>,
    /// Failed inserts whose row is in the table all the same (the
    /// statement committed and its reply was lost).
    #[serde(default)]
    pub failed_but_present: u64,
    /// Inserters that ended at an internal error: what they were told
    /// is unknown, so the loss check cannot vouch for the cell.
    #[serde(default)]
    pub unaccounted: u64,
    pub status_deltas: BTreeMap<String, i64>,
    pub gauges: Gauges,
    /// Fewer than 3 samples after warm-up: not meaningful.
    pub too_short: bool,
}

/// How the rows of a cell found in the table compare with what its
/// inserters were told: lost, duplicated, failed yet committed.
#[derive(Debug, Default, PartialEq, Eq)]
struct Tally {
    acknowledged: u64,
    failed: u64,
    lost: Vec<(usize, u64)>,
    duplicated: Vec<(usize, u64)>,
    failed_but_present: u64,
}

/// Compares the inserters' accounts (inserter number, attempts, failed
/// attempts) with the rows present, `(inserter, attempt)` each, as many
/// times as found.
fn tally(workers: &[(usize, Worker)], present: &[(usize, u64)]) -> Tally {
    let mut have: BTreeMap<(usize, u64), u64> = BTreeMap::new();
    for k in present {
        *have.entry(*k).or_insert(0) += 1;
    }
    let mut t = Tally::default();
    for (w, st) in workers {
        t.failed += st.failed.len() as u64;
        for n in 0..st.attempts {
            let found = have.get(&(*w, n)).copied().unwrap_or(0);
            if st.failed.contains(&n) {
                t.failed_but_present += u64::from(found > 0);
            } else {
                t.acknowledged += 1;
                if found == 0 {
                    t.lost.push((*w, n));
                }
            }
        }
    }
    // Any row of the cell more than once, whatever its inserter was told.
    t.duplicated = have
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(k, _)| *k)
        .collect();
    t
}

impl InsertCell {
    pub fn key(&self) -> String {
        format!(
            "insert p={} size={} index={} connect={}",
            self.processes,
            self.table_size,
            if self.index { "on" } else { "off" },
            self.connect
        )
    }
}

fn err_key(e: &mysql_async::Error) -> String {
    match e {
        mysql_async::Error::Server(s) => {
            format!("{} {}", s.code, s.message.split(':').next().unwrap_or(""))
        }
        mysql_async::Error::Io(_) => "connection I/O error".into(),
        other => other.to_string().chars().take(60).collect(),
    }
}

struct Worker {
    attempts: u64,
    failed: BTreeSet<u64>,
}

async fn prepare(target: &Target, size: u64, index: bool) -> Result<(), mysql_async::Error> {
    let mut c = server::connect(target).await?;
    let columns = format!(
        "fname CHAR(40) NOT NULL, ndname CHAR(40) NOT NULL, version INT NOT NULL, fdatime DATETIME NOT NULL{}",
        if index { ", KEY fname_version (fname, version)" } else { "" }
    );
    server::recreate_table(&mut c, "bench_log", &columns).await?;
    let mut done = 0;
    while done < size {
        let n = (size - done).min(100_000);
        c.query_drop(format!(
            "INSERT INTO {DB}.bench_log SELECT CONCAT('prefill:', seq), CONCAT('nd', seq), seq, NOW() FROM {DB}.seq_{}_to_{}",
            done + 1,
            done + n
        ))
        .await?;
        done += n;
    }
    let _ = c.disconnect().await;
    Ok(())
}

/// Every cell of the sweep, table size by index by processes; `each`
/// sees a cell as soon as it ends (the binary prints it).
pub async fn sweep(
    o: &InsertOptions,
    progress: &(dyn Fn(&str) + Sync),
    mut each: impl FnMut(&InsertCell),
) -> Result<Vec<InsertCell>, mysql_async::Error> {
    let mut cells = Vec::new();
    for &size in &o.table_sizes {
        for &index in &o.index {
            for &p in &o.processes {
                let cell = run_cell(o, p, size, index, progress).await?;
                each(&cell);
                cells.push(cell);
            }
        }
    }
    Ok(cells)
}

/// The sweep's table header and one cell's lines (its errors and lost
/// rows below it).
pub const TABLE_HEAD: &str =
    "  threads table_size index                inserts/s stalls      acked   lost  errors";

impl InsertCell {
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "{:>9} {:>10} {:>5} {:>24} {:>6} {:>10} {:>6} {:>7}{}",
            self.processes,
            self.table_size,
            if self.index { "on" } else { "off" },
            self.rate.show(),
            self.stalls,
            self.acknowledged,
            self.lost,
            self.errors.values().sum::<u64>(),
            if self.too_short {
                "  (too short to be meaningful)"
            } else {
                ""
            }
        )];
        for (k, n) in &self.errors {
            out.push(format!("           {n} x {k}"));
        }
        if self.lost > 0 {
            out.push(format!("           LOST: {}", self.lost_rows.join(", ")));
        }
        if self.duplicated > 0 {
            out.push(format!(
                "           DUPLICATED: {}",
                self.duplicated_rows.join(", ")
            ));
        }
        if self.failed_but_present > 0 {
            out.push(format!(
                "           {} failed inserts committed all the same (their reply was lost)",
                self.failed_but_present
            ));
        }
        out
    }
}

/// What every inserter of a cell shares.
struct Inserting {
    target: sqlfleet_conn::Target,
    stop: Arc<AtomicBool>,
    /// Inserts acknowledged.
    committed: Arc<AtomicU64>,
    /// Failures by kind.
    errors: Arc<Mutex<BTreeMap<String, u64>>>,
    /// Rows left to insert (`--rows`).
    budget: Option<Arc<AtomicU64>>,
    /// The cell's run name, in every row.
    run: String,
    per_insert: bool,
}

/// One inserter (`w`): inserts until the cell stops, numbering its rows;
/// what it attempted and which failed.
async fn inserter(w: usize, shared: Inserting) -> Worker {
    let Inserting {
        target,
        stop,
        committed,
        errors,
        budget,
        run,
        per_insert,
    } = shared;
    let mut st = Worker {
        attempts: 0,
        failed: BTreeSet::new(),
    };
    let mut conn = None;
    let count_err = |k: String| {
        *errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(k)
            .or_insert(0) += 1
    };
    while !stop.load(Ordering::Relaxed) {
        if let Some(b) = &budget {
            if b.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| v.checked_sub(1))
                .is_err()
            {
                break;
            }
        }
        if conn.is_none() {
            match target.connect(CONNECT).await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    count_err(match &e.source {
                        Some(src) => err_key(src),
                        None => e.what.clone(),
                    });
                    if let Some(b) = &budget {
                        b.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        let n = st.attempts;
        st.attempts += 1;
        let sql = format!(
            "INSERT INTO {DB}.bench_log (fname, ndname, version, fdatime) VALUES ('{run}:{w}:{n}', 'nd{n}', {n}, NOW())"
        );
        match c.query_drop(sql).await {
            Ok(()) => {
                committed.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                st.failed.insert(n);
                count_err(err_key(&e));
                conn = None;
            }
        }
        if per_insert {
            if let Some(c) = conn.take() {
                let _ = c.disconnect().await;
            }
        }
    }
    if let Some(c) = conn {
        let _ = c.disconnect().await;
    }
    st
}

/// Runs one cell.
pub async fn run_cell(
    o: &InsertOptions,
    processes: usize,
    table_size: u64,
    index: bool,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<InsertCell, mysql_async::Error> {
    prepare(&o.target, table_size, index).await?;
    let mut side = server::connect(&o.target).await?;
    let before = server::variables(&mut side, server::STATUS, true).await?;
    let run = format!(
        "r{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros())
            .unwrap_or(0)
    );
    let stop = Arc::new(AtomicBool::new(false));
    let committed = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(Mutex::new(BTreeMap::<String, u64>::new()));
    let budget = o.rows.map(|r| Arc::new(AtomicU64::new(r)));
    let tasks: Vec<_> = (0..processes)
        .map(|w| {
            let shared = Inserting {
                target: o.target.clone(),
                stop: stop.clone(),
                committed: committed.clone(),
                errors: errors.clone(),
                budget: budget.clone(),
                run: run.clone(),
                per_insert: o.connect_per_insert,
            };
            tokio::spawn(inserter(w, shared))
        })
        .collect();
    // Sample once a second until the duration (or the row budget) is done.
    let started = Instant::now();
    let mut series = Vec::new();
    let mut gauges = Gauges::default();
    let mut last = 0;
    let mut cpu = server::cpu_times();
    let total_secs = o
        .duration
        .map(|d| o.warmup_seconds as u64 + d.as_secs().max(1));
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::now() + Duration::from_secs(1),
        Duration::from_secs(1),
    );
    loop {
        tick.tick().await;
        let now = committed.load(Ordering::Relaxed);
        series.push(now - last);
        last = now;
        gauges.sample(Some(&mut side), &mut cpu).await;
        progress(&format!(
            "p={processes} size={table_size} index={} t={}s rate={}/s",
            if index { "on" } else { "off" },
            series.len(),
            series.last().copied().unwrap_or(0)
        ));
        let done = match total_secs {
            Some(t) => series.len() as u64 >= t,
            None => tasks.iter().all(|t| t.is_finished()),
        };
        if done || started.elapsed() > Duration::from_secs(3600) {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut workers = Vec::new();
    let mut unaccounted = 0;
    for (w, t) in tasks.into_iter().enumerate() {
        match t.await {
            Ok(st) => workers.push((w, st)),
            // Its rows cannot be accounted for: said as an error.
            Err(e) => {
                unaccounted += 1;
                let why = sqlfleet_conn::text::join_message(e);
                *errors
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .entry(format!("inserter {w} ended unaccounted: {why}"))
                    .or_insert(0) += 1
            }
        }
    }
    let after = server::variables(&mut side, server::STATUS, true).await?;
    // Every acknowledged insert must be in the table.
    let present: Vec<String> = side
        .query(format!(
            "SELECT fname FROM {DB}.bench_log WHERE fname LIKE '{run}:%'"
        ))
        .await?;
    let rows: Vec<(usize, u64)> = present
        .iter()
        .filter_map(|f| {
            let mut parts = f.trim_end().split(':').skip(1);
            Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
        })
        .collect();
    let t = tally(&workers, &rows);
    let name = |(w, n): &(usize, u64)| format!("{run}:{w}:{n}");
    let _ = side.disconnect().await;
    let warm = o.warmup_seconds.min(series.len());
    let measured: Vec<f64> = series[warm..].iter().map(|&x| x as f64).collect();
    let errors = errors.lock().unwrap_or_else(|e| e.into_inner()).clone();
    Ok(InsertCell {
        processes,
        table_size,
        index,
        connect: if o.connect_per_insert {
            "per-insert".into()
        } else {
            "persistent".into()
        },
        rate: Spread::of(&measured),
        stalls: series[warm..].iter().filter(|&&x| x == 0).count(),
        too_short: measured.len() < 3,
        series,
        warmup_seconds: warm,
        acknowledged: t.acknowledged,
        failed: t.failed,
        errors,
        lost: t.lost.len() as u64,
        lost_rows: t.lost.iter().take(20).map(name).collect(),
        duplicated: t.duplicated.len() as u64,
        duplicated_rows: t.duplicated.iter().take(20).map(name).collect(),
        failed_but_present: t.failed_but_present,
        unaccounted,
        status_deltas: server::deltas(&before, &after),
        gauges,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(attempts: u64, failed: &[u64]) -> Worker {
        Worker {
            attempts,
            failed: failed.iter().copied().collect(),
        }
    }

    #[test]
    fn every_acknowledged_row_is_present_exactly_once() {
        // (inserters, rows present, acknowledged, lost, duplicated, failed, failed but present)
        type Row = (
            Vec<(usize, Worker)>,
            Vec<(usize, u64)>,
            u64,
            Vec<(usize, u64)>,
            Vec<(usize, u64)>,
            u64,
            u64,
        );
        let rows: Vec<(&str, Row)> = vec![
            (
                "all there",
                (
                    vec![(0, worker(2, &[]))],
                    vec![(0, 0), (0, 1)],
                    2,
                    vec![],
                    vec![],
                    0,
                    0,
                ),
            ),
            (
                "one missing",
                (
                    vec![(0, worker(2, &[]))],
                    vec![(0, 1)],
                    2,
                    vec![(0, 0)],
                    vec![],
                    0,
                    0,
                ),
            ),
            (
                "one twice",
                (
                    vec![(0, worker(2, &[]))],
                    vec![(0, 0), (0, 1), (0, 1)],
                    2,
                    vec![],
                    vec![(0, 1)],
                    0,
                    0,
                ),
            ),
            (
                "a failed insert absent",
                (
                    vec![(0, worker(2, &[1]))],
                    vec![(0, 0)],
                    1,
                    vec![],
                    vec![],
                    1,
                    0,
                ),
            ),
            (
                "a failed insert committed",
                (
                    vec![(0, worker(2, &[1]))],
                    vec![(0, 0), (0, 1)],
                    1,
                    vec![],
                    vec![],
                    1,
                    1,
                ),
            ),
            (
                "a failed insert committed twice",
                (
                    vec![(0, worker(1, &[0]))],
                    vec![(0, 0), (0, 0)],
                    0,
                    vec![],
                    vec![(0, 0)],
                    1,
                    1,
                ),
            ),
            // An inserter whose task ended unaccounted (1) is left out:
            // the others keep their own numbers.
            (
                "numbers kept across a gap",
                (
                    vec![(0, worker(1, &[])), (2, worker(1, &[]))],
                    vec![(0, 0), (2, 0), (1, 0)],
                    2,
                    vec![],
                    vec![],
                    0,
                    0,
                ),
            ),
            (
                "another inserter's row is not this one's",
                (
                    vec![(0, worker(1, &[])), (1, worker(1, &[]))],
                    vec![(1, 0), (1, 0)],
                    2,
                    vec![(0, 0)],
                    vec![(1, 0)],
                    0,
                    0,
                ),
            ),
        ];
        for (what, (workers, present, acked, lost, dup, failed, fbp)) in rows {
            let t = tally(&workers, &present);
            assert_eq!(
                t,
                Tally {
                    acknowledged: acked,
                    failed,
                    lost,
                    duplicated: dup,
                    failed_but_present: fbp,
                },
                "{what}"
            );
        }
    }
}

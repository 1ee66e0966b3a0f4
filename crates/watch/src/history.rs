//! The history: every check's figures and every incident, kept in one
//! SQLite file (rusqlite with SQLite bundled, so nothing is installed) that
//! survives restarts.
//!
//! Samples are kept at two resolutions: each check (one row per server and
//! second) for `raw_keep` (an hour by default), and one-minute averages for
//! `minute_keep` (a week). `compact` folds finished minutes into the minute
//! tier, drops what aged out, and while the file is above `max_bytes`
//! drops the oldest rows of whichever tier reaches further back, so the
//! store stays under its bound whatever the fleet's size. The file is
//! opened in exclusive locking mode: a second watcher on the same file is
//! told so at start instead of both writing; a file that is not ours or
//! not a database is refused with one line naming it.

mod digests;
pub use digests::{points_of_read, DigestMetric, DigestPoint, PER_READ, READ};

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{params, Connection, ErrorCode, OptionalExtension};
use serde::Serialize;

use crate::figures::{Figures, Metric};
use crate::monitor::State;
use crate::rules::{IncidentEvent, Phase};

/// A server's row id, made on first sight.
const SERVER_ID: &str =
    "INSERT INTO servers(name) VALUES (?1) ON CONFLICT(name) DO UPDATE SET name = name RETURNING id";

/// `PRAGMA application_id` of a sqlfleet watch history ("sqfw").
const APP_ID: i64 = 0x7371_6677;

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("{path}: the history file is in use by another process (is another `sqlfleet watch` running with it?)")]
    Locked { path: String },
    #[error("{path}: not a sqlfleet watch history, or a damaged one ({what}); move it away or name another file with --history")]
    Foreign { path: String, what: String },
    #[error("{path}: {what}")]
    Sqlite { path: String, what: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Where and how much to keep.
#[derive(Debug, Clone)]
pub struct HistoryConfig {
    pub path: PathBuf,
    /// Seconds each check is kept at full resolution.
    pub raw_keep: f64,
    /// Seconds the one-minute averages are kept.
    pub minute_keep: f64,
    /// The file's bound in bytes.
    pub max_bytes: u64,
}

impl HistoryConfig {
    pub fn new(path: PathBuf) -> HistoryConfig {
        HistoryConfig {
            path,
            raw_keep: 3600.0,
            minute_keep: 7.0 * 86_400.0,
            max_bytes: 1 << 30,
        }
    }

    /// The history a run keeps: at `path` (a file, or a directory that
    /// gets history.db), or, for a run that serves the page, in
    /// `home`/watch/history.db; bounded to `max_mib` MiB when given.
    pub fn chosen(
        path: Option<PathBuf>,
        serves_page: bool,
        home: &std::path::Path,
        max_mib: Option<u64>,
    ) -> Option<HistoryConfig> {
        let p = path.or_else(|| serves_page.then(|| home.join("watch").join("history.db")))?;
        let p = if p.is_dir() { p.join("history.db") } else { p };
        let mut hc = HistoryConfig::new(p);
        if let Some(mb) = max_mib {
            hc.max_bytes = mb << 20;
        }
        Some(hc)
    }
}

/// One server's figures at one check.
#[derive(Debug, Clone)]
pub struct Point {
    pub server: String,
    pub at: f64,
    pub state: State,
    pub figures: Figures,
}

/// An incident as the history knows it.
#[derive(Debug, Clone, Serialize)]
pub struct IncidentRow {
    pub id: i64,
    pub server: String,
    pub rule: String,
    pub detail: String,
    #[serde(serialize_with = "crate::when::iso")]
    pub opened: f64,
    #[serde(serialize_with = "crate::when::iso_opt")]
    pub resolved: Option<f64>,
    /// Why it ended other than by its rule (e.g. the watcher stopped).
    pub end_note: String,
    /// What was sent about it: one line per delivery.
    pub notified: String,
}

/// Row counts per tier and the file's size, for tests and `/api/history`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Usage {
    pub raw_rows: u64,
    pub minute_rows: u64,
    pub bytes: u64,
}

pub struct History {
    conn: Mutex<Connection>,
    cfg: HistoryConfig,
}

fn state_code(s: State) -> i64 {
    match s {
        State::Unknown => 0,
        State::Ok => 1,
        State::Degraded => 2,
        State::Stalled => 3,
        State::Down => 4,
        // (Codes of earlier runs' rows stay: a new state takes a new one.)
        State::Denied => 5,
    }
}

/// The samples table's figure columns, one per [`Metric`], in its order.
fn columns() -> String {
    Metric::ALL.map(Metric::name).join(", ")
}

/// `AVG(qps), AVG(running), ...` for folding samples into minutes.
fn averages() -> String {
    Metric::ALL.map(|m| format!("AVG({})", m.name())).join(", ")
}

/// `?4, ?5, ...`: the figure placeholders after server, at and state.
fn placeholders() -> String {
    (0..Metric::ALL.len())
        .map(|i| format!("?{}", i + 4))
        .collect::<Vec<_>>()
        .join(", ")
}

impl History {
    /// Opens (or creates) the store.
    pub fn open(cfg: HistoryConfig) -> Result<History, HistoryError> {
        let path = cfg.path.display().to_string();
        if let Some(dir) = cfg.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| HistoryError::Io {
                path: dir.display().to_string(),
                source,
            })?;
        }
        let conn = Connection::open(&cfg.path).map_err(|e| classify(&path, e))?;
        setup(&conn).map_err(|e| classify(&path, e))?;
        Ok(History {
            conn: Mutex::new(conn),
            cfg,
        })
    }

    pub fn path(&self) -> &Path {
        &self.cfg.path
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, HistoryError> {
        let path = self.cfg.path.display().to_string();
        let mut c = self.conn.lock().map_err(|_| HistoryError::Sqlite {
            path: path.clone(),
            what: "a writer panicked".into(),
        })?;
        f(&mut c).map_err(|e| classify(&path, e))
    }

    /// Writes a batch of points in one transaction.
    pub fn record(&self, points: &[Point]) -> Result<(), HistoryError> {
        if points.is_empty() {
            return Ok(());
        }
        self.with(|c| {
            let tx = c.transaction()?;
            {
                let mut server = tx.prepare_cached(
                    SERVER_ID,
                )?;
                let mut ins = tx.prepare_cached(&format!(
                    "INSERT OR REPLACE INTO samples(server, tier, at, state, {}) VALUES (?1, 0, ?2, ?3, {})",
                    columns(),
                    placeholders()
                ))?;
                for p in points {
                    let id: i64 = server.query_row([&p.server], |r| r.get(0))?;
                    let mut values: Vec<rusqlite::types::Value> = vec![
                        id.into(),
                        (p.at.floor() as i64).into(),
                        state_code(p.state).into(),
                    ];
                    values.extend(Metric::ALL.map(|m| m.of(&p.figures).into()));
                    ins.execute(rusqlite::params_from_iter(values))?;
                }
            }
            tx.commit()
        })
    }

    /// Records an incident opening or resolving.
    pub fn incident(&self, e: &IncidentEvent) -> Result<(), HistoryError> {
        self.with(|c| {
            match e.phase {
                Phase::Opened => {
                    c.execute(
                        "INSERT INTO incidents(server, rule, detail, opened) VALUES (?1, ?2, ?3, ?4)",
                        params![e.server, e.rule, e.detail, e.opened_at],
                    )?;
                }
                Phase::Resolved => {
                    c.execute(
                        "UPDATE incidents SET resolved = ?4 WHERE server = ?1 AND rule = ?2 AND opened = ?3 AND resolved IS NULL",
                        params![e.server, e.rule, e.opened_at, e.resolved_at.unwrap_or(e.opened_at)],
                    )?;
                }
            }
            Ok(())
        })
    }

    /// Notes on each incident of a message what was sent about it.
    pub fn notified(
        &self,
        at: f64,
        events: &[IncidentEvent],
        what: &str,
    ) -> Result<(), HistoryError> {
        let line = format!("{} {what}\n", crate::when::iso_utc(at));
        self.with(|c| {
            let tx = c.transaction()?;
            for e in events {
                tx.execute(
                    "UPDATE incidents SET notified = notified || ?4 WHERE server = ?1 AND rule = ?2 AND opened = ?3",
                    params![e.server, e.rule, e.opened_at, line],
                )?;
            }
            tx.commit()
        })
    }

    /// Ends the incidents a previous run left open: their rules are judged
    /// afresh by this run, which opens them again if they still hold.
    pub fn close_left_open(&self, at: f64) -> Result<usize, HistoryError> {
        self.with(|c| {
            c.execute(
                "UPDATE incidents SET resolved = ?1, end_note = 'the watcher stopped' WHERE resolved IS NULL",
                [at],
            )
        })
    }

    /// Incidents, newest first, of one server or all, at most `limit`
    /// (resolved ones age out with the minute tier).
    pub fn incidents(
        &self,
        server: Option<&str>,
        limit: usize,
    ) -> Result<Vec<IncidentRow>, HistoryError> {
        self.with(|c| {
            let mut q = c.prepare_cached(
                "SELECT id, server, rule, detail, opened, resolved, end_note, notified FROM incidents
                 WHERE (?1 IS NULL OR server = ?1) ORDER BY opened DESC, id DESC LIMIT ?2",
            )?;
            let rows = q.query_map(params![server, limit as i64], |r| {
                Ok(IncidentRow {
                    id: r.get(0)?,
                    server: r.get(1)?,
                    rule: r.get(2)?,
                    detail: r.get(3)?,
                    opened: r.get(4)?,
                    resolved: r.get(5)?,
                    end_note: r.get(6)?,
                    notified: r.get(7)?,
                })
            })?;
            rows.collect()
        })
    }

    /// A metric of one server between `from` and `to` (unix seconds), at
    /// most `points` of them (averaged into equal buckets): from the checks
    /// when the range lies within the full-resolution window, else from the
    /// one-minute tier.
    pub fn series(
        &self,
        server: &str,
        metric: Metric,
        from: f64,
        to: f64,
        points: usize,
        now: f64,
    ) -> Result<Vec<(f64, f64)>, HistoryError> {
        let tier = if from >= now - self.cfg.raw_keep {
            0
        } else {
            1
        };
        let step = if tier == 0 { 1.0 } else { 60.0 };
        let bucket = (((to - from) / points.max(1) as f64).max(step)).ceil() as i64;
        // The column name comes from the Metric enum, never from the request.
        let sql = format!(
            "SELECT (s.at / ?4) * ?4 AS b, AVG(s.{col}) FROM samples s JOIN servers v ON v.id = s.server
             WHERE v.name = ?1 AND s.tier = ?5 AND s.at >= ?2 AND s.at <= ?3 AND s.{col} IS NOT NULL
             GROUP BY b ORDER BY b",
            col = metric.name()
        );
        self.with(|c| {
            let mut q = c.prepare_cached(&sql)?;
            let rows = q.query_map(
                params![server, from.floor() as i64, to.ceil() as i64, bucket, tier],
                |r| Ok((r.get::<_, i64>(0)? as f64, r.get::<_, f64>(1)?)),
            )?;
            rows.collect()
        })
    }

    /// Folds finished minutes into the minute tier, drops what aged out,
    /// and trims the oldest rows while the file is above its bound.
    pub fn compact(&self, now: f64) -> Result<Usage, HistoryError> {
        let (raw_keep, minute_keep, max_bytes) =
            (self.cfg.raw_keep, self.cfg.minute_keep, self.cfg.max_bytes);
        self.with(|c| {
            let done: i64 = c
                .query_row("SELECT value FROM meta WHERE key = 'minutes_done'", [], |r| r.get::<_, String>(0))
                .optional()?
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let boundary = (now as i64 / 60) * 60;
            let tx = c.transaction()?;
            if boundary > done {
                tx.execute(
                    &format!(
                        "INSERT OR REPLACE INTO samples(server, tier, at, state, {})
                         SELECT server, 1, (at / 60) * 60, MAX(state), {}
                         FROM samples WHERE tier = 0 AND at >= ?1 AND at < ?2 GROUP BY server, at / 60",
                        columns(),
                        averages()
                    ),
                    params![done, boundary],
                )?;
                tx.execute(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES ('minutes_done', ?1)",
                    [boundary.to_string()],
                )?;
            }
            digests::compact(&tx, done, boundary, (now - raw_keep) as i64, (now - minute_keep) as i64)?;
            tx.execute("DELETE FROM samples WHERE tier = 0 AND at < ?1", [(now - raw_keep) as i64])?;
            tx.execute("DELETE FROM samples WHERE tier = 1 AND at < ?1", [(now - minute_keep) as i64])?;
            tx.execute(
                "DELETE FROM incidents WHERE resolved IS NOT NULL AND resolved < ?1",
                [now - minute_keep],
            )?;
            tx.commit()?;
            // Over the bound: drop the oldest tenth of the tier that reaches
            // further back, until under it or nothing is left to drop.
            for _ in 0..64 {
                c.execute_batch("PRAGMA incremental_vacuum")?;
                if used_bytes(c)? <= max_bytes {
                    break;
                }
                let span = |tier: i64| -> rusqlite::Result<Option<(i64, i64)>> {
                    c.query_row(
                        "SELECT MIN(at), MAX(at) FROM samples WHERE tier = ?1",
                        [tier],
                        |r| Ok(r.get::<_, Option<i64>>(0)?.zip(r.get::<_, Option<i64>>(1)?)),
                    )
                };
                let (raw, minute) = (span(0)?, span(1)?);
                let (tier, (lo, hi)) = match (raw, minute) {
                    (Some(r), Some(m)) if m.0 < r.0 => (1, m),
                    (Some(r), _) => (0, r),
                    (None, Some(m)) => (1, m),
                    (None, None) => break,
                };
                let cut = lo + ((hi - lo) / 10).max(1);
                c.execute("DELETE FROM samples WHERE tier = ?1 AND at < ?2", params![tier, cut])?;
                digests::trim(c, tier, cut)?;
            }
            usage(c)
        })
    }

    pub fn usage(&self) -> Result<Usage, HistoryError> {
        self.with(|c| usage(c))
    }
}

fn used_bytes(c: &Connection) -> rusqlite::Result<u64> {
    let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    let free: i64 = c.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
    let size: i64 = c.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    Ok(((pages - free).max(0) * size) as u64)
}

fn usage(c: &Connection) -> rusqlite::Result<Usage> {
    let count = |tier: i64| -> rusqlite::Result<u64> {
        c.query_row(
            "SELECT COUNT(*) FROM samples WHERE tier = ?1",
            [tier],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| n as u64)
    };
    Ok(Usage {
        raw_rows: count(0)?,
        minute_rows: count(1)?,
        bytes: used_bytes(c)?,
    })
}

fn setup(c: &Connection) -> rusqlite::Result<()> {
    // Fail at once when another process holds the file.
    c.busy_timeout(Duration::from_millis(200))?;
    c.execute_batch("PRAGMA locking_mode = EXCLUSIVE")?;
    let app: i64 = c.query_row("PRAGMA application_id", [], |r| r.get(0))?;
    let tables: i64 = c.query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| r.get(0))?;
    if tables > 0 && app != APP_ID {
        return Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_NOTADB),
            Some("a SQLite database of something else".into()),
        ));
    }
    if tables == 0 {
        // Must precede the first table for the file to shrink when trimmed.
        c.execute_batch("PRAGMA auto_vacuum = INCREMENTAL")?;
    }
    c.execute_batch(&format!(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = NORMAL;
         PRAGMA application_id = {APP_ID};
         BEGIN IMMEDIATE;
         CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS servers(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
         CREATE TABLE IF NOT EXISTS samples(
             server INTEGER NOT NULL, tier INTEGER NOT NULL, at INTEGER NOT NULL, state INTEGER NOT NULL,
             qps REAL, running REAL, connected REAL, conn_pct REAL, lag REAL, cpu REAL, mem REAL, disk REAL,
             slow REAL, bp_hit REAL, rows REAL,
             PRIMARY KEY(server, tier, at)) WITHOUT ROWID;
         CREATE TABLE IF NOT EXISTS incidents(
             id INTEGER PRIMARY KEY, server TEXT NOT NULL, rule TEXT NOT NULL, detail TEXT NOT NULL,
             opened REAL NOT NULL, resolved REAL, end_note TEXT NOT NULL DEFAULT '', notified TEXT NOT NULL DEFAULT '');
         CREATE INDEX IF NOT EXISTS incidents_by_server ON incidents(server, rule, opened);
         {digests}
         COMMIT;",
        digests = digests::SCHEMA
    ))?;
    // A file from an older version lacks the newer figures' columns.
    let have: Vec<String> = c
        .prepare("SELECT name FROM pragma_table_info('samples')")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    for m in Metric::ALL {
        if !have.iter().any(|h| h == m.name()) {
            c.execute_batch(&format!("ALTER TABLE samples ADD COLUMN {} REAL", m.name()))?;
        }
    }
    // A damaged file shows here rather than at the first write.
    let ok: String = c.query_row("PRAGMA quick_check(1)", [], |r| r.get(0))?;
    if ok != "ok" {
        return Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
            Some(ok),
        ));
    }
    Ok(())
}

fn classify(path: &str, e: rusqlite::Error) -> HistoryError {
    let path = path.to_string();
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked) => {
            HistoryError::Locked { path }
        }
        Some(ErrorCode::NotADatabase) | Some(ErrorCode::DatabaseCorrupt) => HistoryError::Foreign {
            path,
            what: match &e {
                rusqlite::Error::SqliteFailure(_, Some(m)) => m.clone(),
                _ => e.to_string(),
            },
        },
        _ => HistoryError::Sqlite {
            path,
            what: e.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(server: &str, at: f64, qps: f64) -> Point {
        Point {
            server: server.into(),
            at,
            state: State::Ok,
            figures: Figures {
                qps: Some(qps),
                cpu: Some(qps / 10.0),
                ..Figures::default()
            },
        }
    }

    fn open(dir: &Path) -> History {
        History::open(HistoryConfig::new(dir.join("h.db"))).expect("open")
    }

    #[test]
    fn samples_and_incidents_survive_a_restart() {
        let dir = tempfile::tempdir().expect("dir");
        let t0 = 1_800_000_000.0;
        {
            let h = open(dir.path());
            h.record(
                &(0..30)
                    .map(|i| point("a:1", t0 + i as f64, i as f64))
                    .collect::<Vec<_>>(),
            )
            .expect("record");
            let e = IncidentEvent {
                phase: Phase::Opened,
                server: "a:1".into(),
                rule: "cpu",
                detail: "CPU 95%".into(),
                opened_at: t0 + 3.5,
                resolved_at: None,
            };
            h.incident(&e).expect("incident");
            h.notified(t0 + 4.0, &[e], "webhook ok").expect("notified");
        }
        let h = open(dir.path());
        let s = h
            .series("a:1", Metric::Qps, t0, t0 + 60.0, 100, t0 + 60.0)
            .expect("series");
        assert_eq!(s.len(), 30);
        assert_eq!(s[7], (t0 + 7.0, 7.0));
        let inc = h.incidents(None, 10).expect("incidents");
        assert_eq!(inc.len(), 1);
        assert!(inc[0].resolved.is_none());
        assert!(inc[0].notified.contains("webhook ok"), "{:?}", inc[0]);
        assert_eq!(h.close_left_open(t0 + 61.0).expect("close"), 1);
        let inc = h.incidents(Some("a:1"), 10).expect("incidents");
        assert_eq!(inc[0].resolved, Some(t0 + 61.0));
        assert_eq!(inc[0].end_note, "the watcher stopped");
    }

    #[test]
    fn a_file_from_before_the_newer_figures_gains_their_columns() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("h.db");
        {
            // The samples table as the first versions wrote it.
            let c = Connection::open(&path).expect("open");
            c.execute_batch(&format!(
                "PRAGMA application_id = {APP_ID};
                 CREATE TABLE samples(
                     server INTEGER NOT NULL, tier INTEGER NOT NULL, at INTEGER NOT NULL, state INTEGER NOT NULL,
                     qps REAL, running REAL, connected REAL, conn_pct REAL, lag REAL, cpu REAL, mem REAL, disk REAL,
                     PRIMARY KEY(server, tier, at)) WITHOUT ROWID;"
            ))
            .expect("old schema");
        }
        let h = History::open(HistoryConfig::new(path)).expect("open");
        let t0 = 1_800_000_000.0;
        let mut p = point("a:1", t0, 5.0);
        p.figures.slow = Some(0.5);
        p.figures.bp_hit = Some(99.5);
        p.figures.rows = Some(1234.0);
        h.record(&[p]).expect("record");
        for (m, want) in [
            (Metric::Slow, 0.5),
            (Metric::BpHit, 99.5),
            (Metric::Rows, 1234.0),
        ] {
            let s = h
                .series("a:1", m, t0, t0 + 1.0, 10, t0 + 1.0)
                .expect("series");
            assert_eq!(s, vec![(t0, want)], "{}", m.name());
        }
    }

    #[test]
    fn a_resolved_event_closes_its_incident() {
        let dir = tempfile::tempdir().expect("dir");
        let h = open(dir.path());
        let mut e = IncidentEvent {
            phase: Phase::Opened,
            server: "b:2".into(),
            rule: "unreachable",
            detail: "down".into(),
            opened_at: 100.25,
            resolved_at: None,
        };
        h.incident(&e).expect("open");
        e.phase = Phase::Resolved;
        e.resolved_at = Some(130.0);
        h.incident(&e).expect("resolve");
        let inc = h.incidents(Some("b:2"), 10).expect("rows");
        assert_eq!(inc.len(), 1);
        assert_eq!(inc[0].resolved, Some(130.0));
    }

    #[test]
    fn old_checks_fold_into_minutes_and_the_store_stays_under_its_bound() {
        let dir = tempfile::tempdir().expect("dir");
        let mut cfg = HistoryConfig::new(dir.path().join("h.db"));
        cfg.raw_keep = 600.0;
        cfg.minute_keep = 3.0 * 3600.0;
        cfg.max_bytes = 2 << 20;
        let h = History::open(cfg).expect("open");
        let t0 = 1_800_000_000.0 - 1_800_000_000.0 % 60.0;
        // 40 servers, one check a second, for two hours.
        let mut last = None;
        for minute in 0..120 {
            let pts: Vec<Point> = (0..60)
                .flat_map(|s| (0..40).map(move |n| (s, n)))
                .map(|(s, n)| {
                    point(
                        &format!("db{n}:3306"),
                        t0 + (minute * 60 + s) as f64,
                        s as f64,
                    )
                })
                .collect();
            h.record(&pts).expect("record");
            last = Some(h.compact(t0 + ((minute + 1) * 60) as f64).expect("compact"));
        }
        let u = last.expect("usage");
        let end = t0 + 7200.0;
        assert!(u.bytes <= 2 << 20, "{u:?}");
        let on_disk = std::fs::metadata(dir.path().join("h.db"))
            .expect("meta")
            .len();
        // The file itself (not only its live pages) shrinks back.
        assert!(on_disk <= (2 << 20) + (256 << 10), "file {on_disk} bytes");
        // Only the last 10 minutes are kept at full resolution.
        assert!(u.raw_rows <= 40 * 600, "{u:?}");
        // Older data is there as minute averages: the average of 0..59 is 29.5.
        let m = h
            .series(
                "db3:3306",
                Metric::Qps,
                end - 7000.0,
                end - 1000.0,
                500,
                end,
            )
            .expect("series");
        assert!(!m.is_empty());
        assert!(m.iter().all(|&(_, v)| (v - 29.5).abs() < 1e-9), "{m:?}");
        // Recent data at full resolution.
        let r = h
            .series("db3:3306", Metric::Qps, end - 300.0, end, 1000, end)
            .expect("raw");
        assert_eq!(r.len(), 300);
    }

    #[test]
    fn a_second_process_and_a_foreign_file_are_refused_by_name() {
        let dir = tempfile::tempdir().expect("dir");
        let _h = open(dir.path());
        match History::open(HistoryConfig::new(dir.path().join("h.db"))) {
            Err(HistoryError::Locked { path }) => assert!(path.ends_with("h.db")),
            Err(e) => panic!("expected Locked, got {e}"),
            Ok(_) => panic!("expected Locked, got a second writer"),
        }
        let junk = dir.path().join("junk.db");
        std::fs::write(&junk, vec![0x5au8; 8192]).expect("write");
        let e = History::open(HistoryConfig::new(junk))
            .err()
            .expect("refused");
        assert!(matches!(e, HistoryError::Foreign { .. }), "{e}");
        assert!(e.to_string().contains("junk.db"), "{e}");
        // A history whose pages were damaged (the header intact).
        let hurt = dir.path().join("hurt.db");
        {
            let h = History::open(HistoryConfig::new(hurt.clone())).expect("open");
            let pts: Vec<Point> = (0..3000)
                .map(|i| point(&format!("s{}", i % 50), 1e9 + i as f64, 1.0))
                .collect();
            h.record(&pts).expect("record");
        }
        let mut bytes = std::fs::read(&hurt).expect("read");
        assert!(bytes.len() > 5 * 4096, "{}", bytes.len());
        for b in &mut bytes[2 * 4096..4 * 4096] {
            *b = 0xa5;
        }
        std::fs::write(&hurt, bytes).expect("write");
        let e = History::open(HistoryConfig::new(hurt))
            .err()
            .expect("refused");
        assert!(matches!(e, HistoryError::Foreign { .. }), "{e}");
        assert!(e.to_string().contains("hurt.db"), "{e}");
        let other = dir.path().join("other.db");
        {
            let c = Connection::open(&other).expect("open");
            c.execute_batch("CREATE TABLE t(a)").expect("create");
        }
        let e = History::open(HistoryConfig::new(other))
            .err()
            .expect("refused");
        assert!(
            e.to_string().contains("not a sqlfleet watch history"),
            "{e}"
        );
    }
}

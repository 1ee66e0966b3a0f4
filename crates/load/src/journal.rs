//! The load journal, kept on the target server in the `sqlfleet` schema.
//!
//! `sqlfleet.loads` has one row per dump identity (its state);
//! `sqlfleet.load_journal` one row per committed piece of the dump (its
//! byte range). Data batches insert their journal row inside their own
//! transaction, so a batch's rows and its record commit or vanish
//! together; DDL (which commits implicitly) is recorded right after it
//! runs. `--resume` skips every statement inside a recorded range.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use sqlfleet_conn::quote::literal;

use crate::error::LoadError;

pub const SCHEMA_SQL: &[&str] = &[
    "CREATE DATABASE IF NOT EXISTS sqlfleet",
    "CREATE TABLE IF NOT EXISTS sqlfleet.loads (
        load_id CHAR(32) NOT NULL PRIMARY KEY,
        source VARCHAR(1024) NOT NULL,
        state ENUM('running','done','failed') NOT NULL,
        started_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
        finished_at TIMESTAMP(6) NULL,
        bytes BIGINT UNSIGNED NULL,
        rows_loaded BIGINT UNSIGNED NULL
    ) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS sqlfleet.load_journal (
        load_id CHAR(32) NOT NULL,
        start_offset BIGINT UNSIGNED NOT NULL,
        end_offset BIGINT UNSIGNED NOT NULL,
        kind VARCHAR(16) NOT NULL,
        rows_loaded BIGINT UNSIGNED NOT NULL DEFAULT 0,
        committed_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
        PRIMARY KEY (load_id, start_offset)
    ) ENGINE=InnoDB",
];

/// Byte ranges `[start, end)` already committed, sorted by start.
#[derive(Debug, Default, Clone)]
pub struct Ranges(Vec<(u64, u64)>);

impl Ranges {
    pub fn from_unsorted(mut v: Vec<(u64, u64)>) -> Ranges {
        v.sort_unstable();
        Ranges(v)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True if `[start, end)` overlaps any committed range.
    pub fn intersects(&self, start: u64, end: u64) -> bool {
        let i = self.0.partition_point(|&(s, _)| s < end);
        i > 0 && self.0[i - 1].1 > start
    }

    /// True if the statement starting at `offset` is inside a committed range.
    pub fn contains(&self, offset: u64) -> bool {
        let i = self.0.partition_point(|&(s, _)| s <= offset);
        i > 0 && offset < self.0[i - 1].1
    }
}

/// What the journal says about this dump before we start.
#[derive(Debug)]
pub enum Start {
    Fresh,
    Resume(Ranges),
    AlreadyDone,
}

fn jerr(endpoint: &str) -> impl Fn(mysql_async::Error) -> LoadError + '_ {
    move |e| LoadError::Journal {
        endpoint: endpoint.to_string(),
        what: crate::error::describe(&e).1,
    }
}

/// Creates the journal tables and decides how this run starts.
pub async fn prepare(
    conn: &mut Conn,
    endpoint: &str,
    load_id: &str,
    source: &str,
    resume: bool,
    restart: bool,
) -> Result<Start, LoadError> {
    let e = jerr(endpoint);
    for sql in SCHEMA_SQL {
        conn.query_drop(*sql).await.map_err(&e)?;
    }
    let id = literal(load_id);
    let state: Option<String> = conn
        .query_first(format!(
            "SELECT state FROM sqlfleet.loads WHERE load_id = {id}"
        ))
        .await
        .map_err(&e)?;
    let start = match (state.as_deref(), resume, restart) {
        (Some("done"), true, false) => return Ok(Start::AlreadyDone),
        (Some("running" | "failed"), false, false) => {
            return Err(LoadError::Unfinished {
                load_id: load_id.to_string(),
            })
        }
        (Some(_), true, false) => {
            let rows: Vec<(u64, u64)> = conn
                .query(format!(
                    "SELECT start_offset, end_offset FROM sqlfleet.load_journal WHERE load_id = {id}"
                ))
                .await
                .map_err(&e)?;
            Start::Resume(Ranges::from_unsorted(rows))
        }
        _ => {
            conn.query_drop(format!(
                "DELETE FROM sqlfleet.load_journal WHERE load_id = {id}"
            ))
            .await
            .map_err(&e)?;
            Start::Fresh
        }
    };
    conn.query_drop(format!(
        "INSERT INTO sqlfleet.loads (load_id, source, state) VALUES ({id}, {}, 'running') \
         ON DUPLICATE KEY UPDATE state = 'running', source = VALUES(source), finished_at = NULL",
        literal(&source.chars().take(1000).collect::<String>())
    ))
    .await
    .map_err(&e)?;
    Ok(start)
}

/// The statement that records a committed range.
pub fn record_sql(load_id: &str, start: u64, end: u64, kind: &str, rows: u64) -> String {
    format!(
        "INSERT INTO sqlfleet.load_journal (load_id, start_offset, end_offset, kind, rows_loaded) \
         VALUES ('{load_id}', {start}, {end}, '{kind}', {rows})"
    )
}

/// Marks the run finished (or failed).
pub async fn finish(
    conn: &mut Conn,
    endpoint: &str,
    load_id: &str,
    ok: bool,
    bytes: u64,
    rows: u64,
) -> Result<(), LoadError> {
    conn.query_drop(format!(
        "UPDATE sqlfleet.loads SET state = '{}', finished_at = CURRENT_TIMESTAMP(6), bytes = {bytes}, rows_loaded = {rows} \
         WHERE load_id = {}",
        if ok { "done" } else { "failed" },
        literal(load_id)
    ))
    .await
    .map_err(jerr(endpoint))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_contain() {
        let r = Ranges::from_unsorted(vec![(100, 200), (0, 50), (200, 210)]);
        assert!(r.contains(0) && r.contains(49) && !r.contains(50));
        assert!(r.contains(100) && r.contains(199) && r.contains(205));
        assert!(!r.contains(210) && !r.contains(99));
        assert!(r.intersects(40, 60) && r.intersects(150, 300) && r.intersects(0, 1));
        assert!(!r.intersects(50, 100) && !r.intersects(210, 400));
    }

    proptest::proptest! {
        #[test]
        fn contains_matches_linear_scan(mut v in proptest::collection::vec((0u64..1000, 1u64..50), 0..20), probe in 0u64..1100) {
            // Journal ranges never overlap: make them disjoint.
            v.sort();
            let mut ranges = Vec::new();
            let mut last_end = 0;
            for (s, len) in v {
                let s = s.max(last_end);
                ranges.push((s, s + len));
                last_end = s + len;
            }
            let r = Ranges::from_unsorted(ranges.clone());
            let want = ranges.iter().any(|&(s, e)| s <= probe && probe < e);
            proptest::prop_assert_eq!(r.contains(probe), want);
        }
    }
}

//! Where each stream is, kept on the target in `sqlfleet.*` tables and
//! written in the same transaction as the rows it describes — the reason
//! replicate is exactly once.
//!
//! - `replicate_position (source, stream, domain_id)`: the last GTID a
//!   stream applied in each domain. Stream `''` is the source's *floor*:
//!   every transaction at or before it is applied (or deliberately
//!   skipped) in every stream; a restart reads the source from there and
//!   skips what a stream's own row already covers.
//! - `replicate_ddl (source)`: a standalone statement (DDL) started but
//!   not yet recorded; after a crash it is re-run, and "already done"
//!   errors are taken as done (DDL cannot commit with a position).
//! - `replicate_skip (source, gtid)`: transactions `replicate skip` told
//!   us to pass over, kept as the record that they were.
//! - `replicate_error (source, stream)`: the error a stopped stream hit.
//! - `replicate_retry (id)`: `replicate retry` asking a running process to
//!   try a source's stopped transactions again.

use std::collections::BTreeMap;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use sqlfleet_conn::quote::utf8_literal;

use crate::gtid::{Gtid, GtidPos};

/// Our schema on the target (never replicated).
pub const SCHEMA: &str = "sqlfleet";
/// The stream name of a source's floor.
pub const FLOOR: &str = "";

const DDL: &[&str] = &[
    "CREATE DATABASE IF NOT EXISTS sqlfleet",
    "CREATE TABLE IF NOT EXISTS sqlfleet.replicate_position (
        source VARCHAR(64) NOT NULL, stream VARCHAR(192) NOT NULL,
        domain_id INT UNSIGNED NOT NULL, server_id INT UNSIGNED NOT NULL,
        seq_no BIGINT UNSIGNED NOT NULL,
        binlog_file VARCHAR(255) NOT NULL DEFAULT '', binlog_pos BIGINT UNSIGNED NOT NULL DEFAULT 0,
        source_time BIGINT UNSIGNED NOT NULL DEFAULT 0,
        applied_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
        PRIMARY KEY (source, stream, domain_id)) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS sqlfleet.replicate_ddl (
        source VARCHAR(64) NOT NULL PRIMARY KEY, gtid VARCHAR(64) NOT NULL,
        statement MEDIUMTEXT NOT NULL, started_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS sqlfleet.replicate_skip (
        source VARCHAR(64) NOT NULL, gtid VARCHAR(64) NOT NULL,
        reason VARCHAR(255) NOT NULL DEFAULT '', at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
        PRIMARY KEY (source, gtid)) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS sqlfleet.replicate_error (
        source VARCHAR(64) NOT NULL, stream VARCHAR(192) NOT NULL, gtid VARCHAR(64) NOT NULL,
        error TEXT NOT NULL, statement MEDIUMTEXT NOT NULL,
        at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
        PRIMARY KEY (source, stream)) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS sqlfleet.replicate_retry (
        id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
        source VARCHAR(64) NOT NULL, stream VARCHAR(192) NOT NULL DEFAULT '',
        at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), KEY (source, id)) ENGINE=InnoDB",
];

/// Creates the tables when missing.
pub async fn ensure(conn: &mut Conn) -> mysql_async::Result<()> {
    for d in DDL {
        conn.query_drop(*d).await?;
    }
    Ok(())
}

/// What the target holds for one source.
#[derive(Debug, Clone, Default)]
pub struct Stored {
    pub floor: GtidPos,
    pub streams: BTreeMap<String, GtidPos>,
    pub skips: Vec<Gtid>,
    /// A standalone statement that was started and not recorded.
    pub ddl: Option<Gtid>,
    /// A start position was recorded (the floor is where to read from,
    /// even when empty).
    pub started: bool,
}

impl Stored {
    /// True when `stream` has applied `g` already.
    pub fn applied(&self, stream: &str, g: &Gtid) -> bool {
        self.floor.covers(g) || self.streams.get(stream).is_some_and(|p| p.covers(g))
    }
}

pub async fn load(conn: &mut Conn, source: &str) -> mysql_async::Result<Stored> {
    let mut s = Stored::default();
    let rows: Vec<(String, u32, u32, u64)> = conn
        .exec(
            "SELECT stream, domain_id, server_id, seq_no FROM sqlfleet.replicate_position WHERE source = ?",
            (source,),
        )
        .await?;
    for (stream, domain, server, seq) in rows {
        let g = Gtid {
            domain,
            server,
            seq,
        };
        if stream == FLOOR {
            s.started = true;
            if domain != STARTED {
                s.floor.advance(g);
            }
        } else {
            s.streams.entry(stream).or_default().advance(g);
        }
    }
    let skips: Vec<String> = conn
        .exec(
            "SELECT gtid FROM sqlfleet.replicate_skip WHERE source = ?",
            (source,),
        )
        .await?;
    s.skips = skips.iter().filter_map(|g| g.parse().ok()).collect();
    let ddl: Option<String> = conn
        .exec_first(
            "SELECT gtid FROM sqlfleet.replicate_ddl WHERE source = ?",
            (source,),
        )
        .await?;
    s.ddl = ddl.and_then(|g| g.parse().ok());
    Ok(s)
}

/// A transaction applied for a (source, stream): where it ended.
pub struct Applied<'a> {
    pub source: &'a str,
    pub stream: &'a str,
    pub gtid: Gtid,
    pub file: &'a str,
    pub end_pos: u64,
    pub time: u32,
}

/// The position rows for transactions applied together: the last GTID of
/// each (source, stream, domain), in a stable order.
pub fn positions(done: &[Applied<'_>]) -> Vec<String> {
    let mut last: std::collections::BTreeMap<(&str, &str, u32), &Applied<'_>> =
        std::collections::BTreeMap::new();
    for a in done {
        last.insert((a.source, a.stream, a.gtid.domain), a);
    }
    last.values()
        .map(|a| upsert(a.source, a.stream, &a.gtid, a.file, a.end_pos, a.time))
        .collect()
}

/// Our parameters are UTF-8 text: on a connection that replays the
/// source's statements, the client character set may be a statement's own
/// (latin1, ...) until it is set back.
async fn utf8_client(conn: &mut Conn) -> mysql_async::Result<()> {
    conn.query_drop(sqlfleet_conn::quote::UTF8_CLIENT).await
}

/// Marks a statement outside a transaction (DDL) as started for `source`:
/// after a crash before its position, it is re-run with "already done"
/// errors taken as done.
pub async fn mark_ddl(
    conn: &mut Conn,
    source: &str,
    gtid: &Gtid,
    first: &str,
) -> mysql_async::Result<()> {
    utf8_client(conn).await?;
    conn.exec_drop(
        "REPLACE INTO sqlfleet.replicate_ddl (source, gtid, statement) VALUES (?, ?, ?)",
        (source, gtid.to_string(), first),
    )
    .await
}

/// The statement that clears `source`'s started-DDL mark (committed with
/// the DDL's position).
pub fn clear_ddl_sql(source: &str) -> String {
    format!(
        "DELETE FROM sqlfleet.replicate_ddl WHERE source = {}",
        utf8_literal(source)
    )
}

/// The transactions recorded to be passed over for `source`, oldest first.
pub async fn skips(conn: &mut Conn, source: &str) -> mysql_async::Result<Vec<String>> {
    conn.exec(
        "SELECT gtid FROM sqlfleet.replicate_skip WHERE source = ? ORDER BY at",
        (source,),
    )
    .await
}

/// Asks a running replicate to try `source`'s stopped transactions again
/// (`stream` "" for every stopped stream); returns the request's id.
pub async fn record_retry(conn: &mut Conn, source: &str, stream: &str) -> mysql_async::Result<u64> {
    conn.exec_drop(
        "INSERT INTO sqlfleet.replicate_retry (source, stream) VALUES (?, ?)",
        (source, stream),
    )
    .await?;
    Ok(conn.last_insert_id().unwrap_or(0))
}

/// Retry requests for `source` after request `after`: (id, stream).
pub async fn retries(
    conn: &mut Conn,
    source: &str,
    after: u64,
) -> mysql_async::Result<Vec<(u64, String)>> {
    conn.exec(
        "SELECT id, stream FROM sqlfleet.replicate_retry WHERE source = ? AND id > ? ORDER BY id",
        (source, after),
    )
    .await
}

/// The newest retry request of `source` (0 when none).
pub async fn last_retry(conn: &mut Conn, source: &str) -> mysql_async::Result<u64> {
    let id: Option<Option<u64>> = conn
        .exec_first(
            "SELECT MAX(id) FROM sqlfleet.replicate_retry WHERE source = ?",
            (source,),
        )
        .await?;
    Ok(id.flatten().unwrap_or(0))
}

/// Records that `gtid` of `source` is to be passed over.
pub async fn record_skip(
    conn: &mut Conn,
    source: &str,
    gtid: &Gtid,
    reason: &str,
) -> mysql_async::Result<()> {
    conn.exec_drop(
        "REPLACE INTO sqlfleet.replicate_skip (source, gtid, reason) VALUES (?, ?, ?)",
        (source, gtid.to_string(), reason),
    )
    .await
}

/// Each stream's position row of `source` (not the floor's marks): stream,
/// applied at, domain, server, sequence number, source time, binlog file.
pub type StreamRow = (String, String, u32, u32, u64, u64, String);

pub async fn stream_rows(conn: &mut Conn, source: &str) -> mysql_async::Result<Vec<StreamRow>> {
    conn.exec(
        "SELECT stream, CAST(applied_at AS CHAR), domain_id, server_id, seq_no, source_time, binlog_file \
         FROM sqlfleet.replicate_position WHERE source = ? AND domain_id <> 4294967295 ORDER BY stream, domain_id",
        (source,),
    )
    .await
}

/// The stopped streams' errors of `source`: stream, GTID, error, statement.
pub async fn errors(
    conn: &mut Conn,
    source: &str,
) -> mysql_async::Result<Vec<(String, String, String, String)>> {
    conn.exec(
        "SELECT stream, gtid, error, statement FROM sqlfleet.replicate_error WHERE source = ?",
        (source,),
    )
    .await
}

/// The statement recording `stream` at `g` (also the floor when stream is
/// [`FLOOR`]).
pub fn upsert(source: &str, stream: &str, g: &Gtid, file: &str, pos: u64, time: u32) -> String {
    format!(
        "INSERT INTO sqlfleet.replicate_position (source, stream, domain_id, server_id, seq_no, binlog_file, binlog_pos, source_time, applied_at) \
         VALUES ({}, {}, {}, {}, {}, {}, {}, {}, SYSDATE(6)) \
         ON DUPLICATE KEY UPDATE server_id = VALUES(server_id), seq_no = VALUES(seq_no), \
         binlog_file = VALUES(binlog_file), binlog_pos = VALUES(binlog_pos), source_time = VALUES(source_time), \
         applied_at = SYSDATE(6)",
        utf8_literal(source),
        utf8_literal(stream),
        g.domain,
        g.server,
        g.seq,
        utf8_literal(file),
        pos,
        time
    )
}

/// The floor row marking that a start position was chosen (so that
/// "current" is decided once, even on a server without GTIDs yet).
const STARTED: u32 = u32::MAX;

/// Forgets everything recorded for `source` (positions, errors, a started
/// DDL), so that it starts afresh from what [`write_start`] records next
/// (`replicate seed --force`).
pub async fn forget(conn: &mut Conn, source: &str) -> mysql_async::Result<()> {
    for table in ["replicate_position", "replicate_error", "replicate_ddl"] {
        conn.exec_drop(
            format!("DELETE FROM sqlfleet.{table} WHERE source = ?"),
            (source,),
        )
        .await?;
    }
    Ok(())
}

/// Records where a source starts, the first time.
pub async fn write_start(conn: &mut Conn, source: &str, pos: &GtidPos) -> mysql_async::Result<()> {
    let mark = Gtid {
        domain: STARTED,
        server: 0,
        seq: 0,
    };
    conn.query_drop("START TRANSACTION").await?;
    conn.query_drop(upsert(source, FLOOR, &mark, "", 0, 0))
        .await?;
    write_floor(conn, source, pos).await?;
    conn.query_drop("COMMIT").await
}

/// Writes a floor (every domain of `pos`), autocommitted.
pub async fn write_floor(conn: &mut Conn, source: &str, pos: &GtidPos) -> mysql_async::Result<()> {
    for g in pos.0.values() {
        conn.query_drop(upsert(source, FLOOR, g, "", 0, 0)).await?;
    }
    Ok(())
}

pub async fn record_error(
    conn: &mut Conn,
    source: &str,
    stream: &str,
    g: &Gtid,
    error: &str,
    statement: &str,
) -> mysql_async::Result<()> {
    utf8_client(conn).await?;
    conn.exec_drop(
        "REPLACE INTO sqlfleet.replicate_error (source, stream, gtid, error, statement) VALUES (?, ?, ?, ?, ?)",
        (source, stream, g.to_string(), error, statement),
    )
    .await
}

pub async fn clear_errors(conn: &mut Conn, source: &str) -> mysql_async::Result<()> {
    conn.exec_drop(
        "DELETE FROM sqlfleet.replicate_error WHERE source = ?",
        (source,),
    )
    .await
}

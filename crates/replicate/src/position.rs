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
//! - `replicate_nontx (source, stream)`: the last transaction of a stream
//!   that writes a table a ROLLBACK does not undo (MyISAM, Aria ...),
//!   marked when it starts. When a run finds its mark and no position
//!   covering it, the target stopped (a crash, a lost connection) between
//!   its writes and its commit: part or all of it may be there, so the
//!   stream stops naming it instead of applying it a second time, until
//!   `replicate skip` (it is there) or `replicate retry` (it is not; any
//!   retry recorded after the mark) says which.
//! - `replicate_skip (source, gtid)`: transactions `replicate skip` told
//!   us to pass over, kept as the record that they were.
//! - `replicate_error (source, stream)`: the error a stopped stream hit.
//! - `replicate_retry (id)`: `replicate retry` asking a running process to
//!   try a source's stopped transactions again.
//! - `replicate_retired (source, domain_id)`: a domain the source deleted
//!   after the target applied all of it, and where it ended (retired.rs).

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
    // (Added after the table: a target set up by an earlier version.)
    "ALTER TABLE sqlfleet.replicate_ddl ADD COLUMN IF NOT EXISTS before_def MEDIUMTEXT NULL",
    "CREATE TABLE IF NOT EXISTS sqlfleet.replicate_nontx (
        source VARCHAR(64) NOT NULL, stream VARCHAR(192) NOT NULL, gtid VARCHAR(64) NOT NULL,
        statement MEDIUMTEXT NOT NULL, started_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
        PRIMARY KEY (source, stream)) ENGINE=InnoDB",
    // The newest retry request of the source when the mark was made: a
    // retry answers the marks made before it, told by its id (a marking
    // session's clock is the source's, replayed).
    "ALTER TABLE sqlfleet.replicate_nontx ADD COLUMN IF NOT EXISTS after_retry BIGINT UNSIGNED NULL",
    "CREATE TABLE IF NOT EXISTS sqlfleet.replicate_skip (
        source VARCHAR(64) NOT NULL, gtid VARCHAR(64) NOT NULL,
        reason VARCHAR(255) NOT NULL DEFAULT '', at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
        PRIMARY KEY (source, gtid)) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS sqlfleet.replicate_error (
        source VARCHAR(64) NOT NULL, stream VARCHAR(192) NOT NULL, gtid VARCHAR(64) NOT NULL,
        error TEXT NOT NULL, statement MEDIUMTEXT NOT NULL,
        at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
        PRIMARY KEY (source, stream)) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS sqlfleet.replicate_temp (
        source VARCHAR(64) NOT NULL, thread_id INT UNSIGNED NOT NULL,
        tables MEDIUMTEXT NOT NULL, PRIMARY KEY (source, thread_id)) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS sqlfleet.replicate_retired (
        source VARCHAR(64) NOT NULL, domain_id INT UNSIGNED NOT NULL, gtid VARCHAR(64) NOT NULL,
        proof VARCHAR(255) NOT NULL DEFAULT '', at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
        PRIMARY KEY (source, domain_id)) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS sqlfleet.replicate_retry (
        id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
        source VARCHAR(64) NOT NULL, stream VARCHAR(192) NOT NULL DEFAULT '',
        at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), KEY (source, id)) ENGINE=InnoDB",
    // Whether the target started again since the last run: the record
    // that a run put a row in our MEMORY table (target_start.rs, which
    // makes that table itself: a target that refuses MEMORY tables, as a
    // Galera node in strict mode may, is not refused for it).
    "CREATE TABLE IF NOT EXISTS sqlfleet.replicate_target (
        source VARCHAR(64) NOT NULL PRIMARY KEY) ENGINE=InnoDB",
    // A mark an earlier version made (its time alone, which may be the
    // source's) is taken as made after every retry so far: unsure until
    // a new retry or skip says, never answered by a guess.
    "UPDATE sqlfleet.replicate_nontx n SET after_retry = (SELECT COALESCE(MAX(r.id), 0) \
     FROM sqlfleet.replicate_retry r WHERE r.source = n.source) WHERE after_retry IS NULL",
];

/// Takes the target-wide lock that lets one process replicate `source`
/// (held as long as `conn`), waiting up to `wait` seconds. The inner Err
/// says who holds it instead.
pub async fn lock_source(
    conn: &mut Conn,
    source: &str,
    wait: u32,
) -> mysql_async::Result<Result<(), String>> {
    let lock = format!("sqlfleet:{source}");
    let got: Option<Option<i64>> = conn
        .exec_first("SELECT GET_LOCK(?, ?)", (lock.as_str(), wait))
        .await?;
    if got.flatten() == Some(1) {
        return Ok(Ok(()));
    }
    let holder: Option<Option<u64>> = conn
        .exec_first("SELECT IS_USED_LOCK(?)", (lock.as_str(),))
        .await
        .unwrap_or(None);
    Ok(Err(format!(
        "is being replicated by another sqlfleet replicate (target connection {}); stop that one first",
        holder.flatten().map_or("?".into(), |h| h.to_string())
    )))
}

/// The retired domains of `source` and where each ended.
pub async fn retired(conn: &mut Conn, source: &str) -> mysql_async::Result<BTreeMap<u32, Gtid>> {
    let rows: Vec<(u32, String)> = conn
        .exec(
            "SELECT domain_id, gtid FROM sqlfleet.replicate_retired WHERE source = ?",
            (source,),
        )
        .await?;
    rows.into_iter()
        .map(|(d, g)| {
            // Our own text; unreadable, the source does not start rather
            // than read from a guess.
            g.parse::<Gtid>().map(|g| (d, g)).map_err(|e| {
                mysql_async::Error::Other(
                    format!("sqlfleet.replicate_retired: domain {d}: GTID {g:?}: {e}").into(),
                )
            })
        })
        .collect()
}

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
    /// The definition of the table that statement alters, as it was
    /// before it ran (`ALTER TABLE`: see `apply::definition`).
    pub ddl_before: Option<String>,
    /// A start position was recorded (the floor is where to read from,
    /// even when empty).
    pub started: bool,
    /// The temporary tables each source session (pseudo thread id) had
    /// open on the target when its last transaction committed.
    pub temp: TempTables,
    /// Per stream, a transaction writing tables a ROLLBACK does not undo
    /// that was started and neither recorded nor retried since: whether
    /// it is on the target is unknown (see the module doc).
    pub unsure: BTreeMap<String, Gtid>,
    /// Domains the source deleted after all of them was applied: where
    /// each ended (retired.rs).
    pub retired: BTreeMap<u32, Gtid>,
}

/// Per source session (pseudo thread id): its temporary tables, as
/// `(database, table)` in the source's names.
pub type TempTables = BTreeMap<u32, std::collections::BTreeSet<(String, String)>>;

/// The statement forgetting every source session's temporary tables of
/// `source` (the source started again).
pub fn forget_temp_sql(source: &str) -> String {
    format!(
        "DELETE FROM sqlfleet.replicate_temp WHERE source = {}",
        utf8_literal(source)
    )
}

/// The statement recording source session `thread`'s open temporary
/// tables (committed with the positions of the transaction that made or
/// dropped them); none open: its row goes.
pub fn temp_sql(
    source: &str,
    thread: u32,
    open: &std::collections::BTreeSet<(String, String)>,
) -> String {
    if open.is_empty() {
        return format!(
            "DELETE FROM sqlfleet.replicate_temp WHERE source = {} AND thread_id = {thread}",
            utf8_literal(source)
        );
    }
    let list: Vec<[&str; 2]> = open.iter().map(|(d, t)| [d.as_str(), t.as_str()]).collect();
    format!(
        "REPLACE INTO sqlfleet.replicate_temp (source, thread_id, tables) VALUES ({}, {thread}, {})",
        utf8_literal(source),
        utf8_literal(&serde_json::to_string(&list).unwrap_or_default())
    )
}

impl Stored {
    /// Domain `end.domain` retired: out of the floor and every stream's
    /// position, and its skips and MyISAM marks gone (its next
    /// transactions are new ones, numbered from 1 again: an old record's
    /// GTID would be taken for a new one's), its end kept.
    pub fn retire(&mut self, end: Gtid) {
        let d = end.domain;
        self.floor.0.remove(&d);
        for p in self.streams.values_mut() {
            p.0.remove(&d);
        }
        self.skips.retain(|g| g.domain != d);
        self.unsure.retain(|_, g| g.domain != d);
        self.retired.insert(d, end);
    }

    /// What the target applied of the source: the floor and, past it,
    /// what each stream applied.
    pub fn reached(&self) -> GtidPos {
        GtidPos::furthest(
            self.floor
                .0
                .values()
                .chain(self.streams.values().flat_map(|p| p.0.values())),
        )
    }

    /// True when `stream` has applied `g` already.
    pub fn applied(&self, stream: &str, g: &Gtid) -> bool {
        self.floor.covers(g) || self.streams.get(stream).is_some_and(|p| p.covers(g))
    }
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

/// The position rows for transactions applied together: per (source,
/// stream, domain), the last GTID, written by [`guarded`] with the
/// first one as its guard; in a stable order.
pub fn positions(done: &[Applied<'_>]) -> Vec<String> {
    let mut span: BTreeMap<(&str, &str, u32), (u64, &Applied<'_>)> = BTreeMap::new();
    for a in done {
        span.entry((a.source, a.stream, a.gtid.domain))
            .and_modify(|(first, last)| {
                *first = (*first).min(a.gtid.seq);
                *last = a;
            })
            .or_insert((a.gtid.seq, a));
    }
    span.values()
        .map(|(first, a)| {
            guarded(
                a.source,
                a.stream,
                a.gtid.domain,
                *first,
                &upsert(a.source, a.stream, &a.gtid, a.file, a.end_pos, a.time),
            )
        })
        .collect()
}

/// `MYSQL_ERRNO` of the guard's refusal (the server's own
/// ER_SIGNAL_EXCEPTION); told apart by [`COVERED`] at the message's start.
pub const GUARD_ERRNO: u16 = 1644;
/// The start of the guard's message: the stream's recorded position
/// already covers work this transaction was about to record.
pub const COVERED: &str = "sqlfleet: the recorded stream position already covers this work";

/// True when a server error is [`guarded`]'s refusal.
pub fn is_covered(code: u16, message: &str) -> bool {
    code == GUARD_ERRNO && message.starts_with(COVERED)
}

/// `write` (the upsert of one stream's position in one domain) behind a
/// guard, in the transaction that applied the work: the stream's row is
/// read with a lock (`FOR UPDATE` waits for any other transaction that
/// holds it, then reads what that one committed) and when it is already
/// at or past `first`, the first sequence number of the work being
/// recorded, the statement fails with [`COVERED`] and nothing is written
/// — the caller rolls back. So a transaction applied by a reader that
/// read the positions before another commit landed (a killed process's
/// last commit still running on the server, a connection lost while its
/// COMMIT went through) never applies that work a second time, and a
/// position never moves backwards.
///
/// One compound statement (MariaDB runs `BEGIN NOT ATOMIC` outside stored
/// programs), parsed with an empty sql_mode (a replayed statement may
/// have left the session in ORACLE mode, where it reads otherwise) and a
/// utf8mb4 connection collation (one a replayed statement left at ucs2,
/// utf16 or utf32 makes the SIGNAL's SQLSTATE literal '' when the block is
/// parsed: error 1407 on every chunk after it); both are put back after
/// it for the rows that follow.
pub fn guarded(source: &str, stream: &str, domain: u32, first: u64, write: &str) -> String {
    format!(
        "SET @`sqlfleet mode` = @@session.sql_mode, @@session.sql_mode = '', \
         @`sqlfleet collation` = @@session.collation_connection, \
         @@session.collation_connection = 'utf8mb4_general_ci'\n;\n\
         BEGIN NOT ATOMIC DECLARE cur BIGINT UNSIGNED DEFAULT NULL; \
         DECLARE CONTINUE HANDLER FOR NOT FOUND SET cur = NULL; \
         SELECT seq_no INTO cur FROM sqlfleet.replicate_position \
         WHERE source = {} AND stream = {} AND domain_id = {domain} FOR UPDATE; \
         IF cur >= {first} THEN SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = {GUARD_ERRNO}, \
         MESSAGE_TEXT = '{COVERED}'; END IF; {write}; END\n;\n\
         SET @@session.sql_mode = @`sqlfleet mode`, \
         @@session.collation_connection = @`sqlfleet collation`",
        utf8_literal(source),
        utf8_literal(stream),
    )
}

/// Our parameters are UTF-8 text: on a connection that replays the
/// source's statements, the client character set may be a statement's own
/// (latin1, ...) until it is set back.
async fn utf8_client(conn: &mut Conn) -> mysql_async::Result<()> {
    conn.query_drop(sqlfleet_conn::quote::UTF8_CLIENT).await
}

/// The statement that clears `source`'s started-DDL mark (committed with
/// the DDL's position).
pub fn clear_ddl_sql(source: &str) -> String {
    format!(
        "DELETE FROM sqlfleet.replicate_ddl WHERE source = {}",
        utf8_literal(source)
    )
}

/// Each stream's position row of `source` (not the floor's marks): stream,
/// applied at, domain, server, sequence number, source time, binlog file.
pub type StreamRow = (String, String, u32, u32, u64, u64, String);

/// The statements recording `stream` at `g` (also the floor when stream
/// is [`FLOOR`]), applied at the target's time: the session's clock is set
/// back to it first (a replayed statement left it at its source's), and
/// `NOW(6)` read, which a target logging statements logs with its value
/// (`SYSDATE(6)` was unsafe there: a 1592 warning, in its error log too,
/// on every position written).
pub fn upsert(source: &str, stream: &str, g: &Gtid, file: &str, pos: u64, time: u32) -> String {
    format!(
        "SET @@session.timestamp = DEFAULT; \
         INSERT INTO sqlfleet.replicate_position (source, stream, domain_id, server_id, seq_no, binlog_file, binlog_pos, source_time, applied_at) \
         VALUES ({}, {}, {}, {}, {}, {}, {}, {}, NOW(6)) \
         ON DUPLICATE KEY UPDATE server_id = VALUES(server_id), seq_no = VALUES(seq_no), \
         binlog_file = VALUES(binlog_file), binlog_pos = VALUES(binlog_pos), source_time = VALUES(source_time), \
         applied_at = NOW(6)",
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

/// `source`'s rows in our tables, read and written on one target
/// connection (the applier's, or a command's own).
pub struct Book<'a> {
    conn: &'a mut Conn,
    source: &'a str,
}

impl<'a> Book<'a> {
    pub fn new(conn: &'a mut Conn, source: &'a str) -> Book<'a> {
        Book { conn, source }
    }
}

impl Book<'_> {
    /// Everything recorded for the source: floor, stream positions, skips
    /// and a started DDL.
    pub async fn load(&mut self) -> mysql_async::Result<Stored> {
        let (conn, source) = (&mut *self.conn, self.source);
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
        let ddl: Option<(String, Option<String>)> = conn
            .exec_first(
                "SELECT gtid, before_def FROM sqlfleet.replicate_ddl WHERE source = ?",
                (source,),
            )
            .await?;
        if let Some((g, before)) = ddl {
            s.ddl = g.parse().ok();
            s.ddl_before = before;
        }
        // A mark that a retry recorded after it answers is not unsure any
        // more: the operator said the transaction is not on the target.
        let marks: Vec<(String, String, bool)> = conn
            .exec(
                "SELECT n.stream, n.gtid, EXISTS (SELECT 1 FROM sqlfleet.replicate_retry r \
                 WHERE r.source = n.source AND r.stream IN ('', n.stream) AND r.id > n.after_retry) \
                 FROM sqlfleet.replicate_nontx n WHERE n.source = ?",
                (source,),
            )
            .await?;
        for (stream, g, retried) in marks {
            // Our own text (`mark_nontx` writes a `Gtid`); unreadable, the
            // source does not start rather than pass over the mark.
            let g = g.parse::<Gtid>().map_err(|e| {
                mysql_async::Error::Other(
                    format!("sqlfleet.replicate_nontx: stream '{stream}': GTID {g:?}: {e}").into(),
                )
            })?;
            if !retried && !s.applied(&stream, &g) {
                s.unsure.insert(stream, g);
            }
        }
        s.retired = retired(conn, source).await?;
        let temp: Vec<(u32, String)> = conn
            .exec(
                "SELECT thread_id, tables FROM sqlfleet.replicate_temp WHERE source = ?",
                (source,),
            )
            .await?;
        for (thread, tables) in temp {
            // Unreadable: still a session whose tables are gone (its name
            // list empty), never none.
            let list: Vec<[String; 2]> = serde_json::from_str(&tables).unwrap_or_default();
            s.temp
                .entry(thread)
                .or_default()
                .extend(list.into_iter().map(|[d, t]| (d, t)));
        }
        Ok(s)
    }

    /// Marks a statement outside a transaction (DDL) as started for `source`:
    /// after a crash before its position, it is re-run with "already done"
    /// errors taken as done — or, for an `ALTER TABLE` (`before`: the
    /// table's definition before it), taken as done when the table is no
    /// longer what it was.
    pub async fn mark_ddl(
        &mut self,
        gtid: &Gtid,
        first: &str,
        before: Option<&str>,
    ) -> mysql_async::Result<()> {
        let (conn, source) = (&mut *self.conn, self.source);
        utf8_client(conn).await?;
        conn.exec_drop(
            "REPLACE INTO sqlfleet.replicate_ddl (source, gtid, statement, before_def) VALUES (?, ?, ?, ?)",
            (source, gtid.to_string(), first, before),
        )
        .await
    }

    /// Marks a transaction of `stream` that writes tables a ROLLBACK does
    /// not undo as started (autocommitted, before its first write), with
    /// the newest retry request it comes after, read in the same
    /// statement. (Not by time: the marking session replays statements at
    /// their source's time, so a mark made while catching up read older
    /// than a retry recorded before it, and that retry answered it: a
    /// crash inside the transaction then applied it twice.)
    pub async fn mark_nontx(
        &mut self,
        stream: &str,
        gtid: &Gtid,
        first: &str,
    ) -> mysql_async::Result<()> {
        let (conn, source) = (&mut *self.conn, self.source);
        utf8_client(conn).await?;
        conn.exec_drop(
            // (VALUES with a subquery, not REPLACE ... SELECT: that one
            // is unsafe to log as a statement, a warning in the target's
            // error log on every mark where it logs statements.)
            "REPLACE INTO sqlfleet.replicate_nontx (source, stream, gtid, statement, after_retry) \
             VALUES (?, ?, ?, ?, (SELECT COALESCE(MAX(id), 0) FROM sqlfleet.replicate_retry WHERE source = ?))",
            (source, stream, gtid.to_string(), first, source),
        )
        .await
    }

    /// The transactions recorded to be passed over for `source`, oldest first.
    pub async fn skips(&mut self) -> mysql_async::Result<Vec<String>> {
        let (conn, source) = (&mut *self.conn, self.source);
        conn.exec(
            "SELECT gtid FROM sqlfleet.replicate_skip WHERE source = ? ORDER BY at",
            (source,),
        )
        .await
    }

    /// Asks a running replicate to try `source`'s stopped transactions again
    /// (`stream` "" for every stopped stream); returns the request's id.
    pub async fn record_retry(&mut self, stream: &str) -> mysql_async::Result<u64> {
        let (conn, source) = (&mut *self.conn, self.source);
        conn.exec_drop(
            "INSERT INTO sqlfleet.replicate_retry (source, stream) VALUES (?, ?)",
            (source, stream),
        )
        .await?;
        Ok(conn.last_insert_id().unwrap_or(0))
    }

    /// Retry requests for `source` after request `after`: (id, stream).
    pub async fn retries(&mut self, after: u64) -> mysql_async::Result<Vec<(u64, String)>> {
        let (conn, source) = (&mut *self.conn, self.source);
        conn.exec(
            "SELECT id, stream FROM sqlfleet.replicate_retry WHERE source = ? AND id > ? ORDER BY id",
            (source, after),
        )
        .await
    }

    /// The newest retry request of `source` (0 when none).
    pub async fn last_retry(&mut self) -> mysql_async::Result<u64> {
        let (conn, source) = (&mut *self.conn, self.source);
        let id: Option<Option<u64>> = conn
            .exec_first(
                "SELECT MAX(id) FROM sqlfleet.replicate_retry WHERE source = ?",
                (source,),
            )
            .await?;
        Ok(id.flatten().unwrap_or(0))
    }

    /// Records that `gtid` of `source` is to be passed over.
    pub async fn record_skip(&mut self, gtid: &Gtid, reason: &str) -> mysql_async::Result<()> {
        let (conn, source) = (&mut *self.conn, self.source);
        conn.exec_drop(
            "REPLACE INTO sqlfleet.replicate_skip (source, gtid, reason) VALUES (?, ?, ?)",
            (source, gtid.to_string(), reason),
        )
        .await
    }

    pub async fn stream_rows(&mut self) -> mysql_async::Result<Vec<StreamRow>> {
        let (conn, source) = (&mut *self.conn, self.source);
        conn.exec(
            "SELECT stream, CAST(applied_at AS CHAR), domain_id, server_id, seq_no, source_time, binlog_file \
             FROM sqlfleet.replicate_position WHERE source = ? AND domain_id <> 4294967295 ORDER BY stream, domain_id",
            (source,),
        )
        .await
    }

    /// The stopped streams' errors of `source`: stream, GTID, error, statement.
    pub async fn errors(&mut self) -> mysql_async::Result<Vec<(String, String, String, String)>> {
        let (conn, source) = (&mut *self.conn, self.source);
        conn.exec(
            "SELECT stream, gtid, error, statement FROM sqlfleet.replicate_error WHERE source = ?",
            (source,),
        )
        .await
    }

    /// Forgets everything recorded for `source` (positions, errors, a started
    /// DDL), so that it starts afresh from what [`Book::write_start`] records next
    /// (`replicate seed --force`).
    pub async fn forget(&mut self) -> mysql_async::Result<()> {
        let (conn, source) = (&mut *self.conn, self.source);
        for table in [
            "replicate_position",
            "replicate_retired",
            "replicate_error",
            "replicate_ddl",
            "replicate_temp",
            "replicate_nontx",
        ] {
            conn.exec_drop(
                format!("DELETE FROM sqlfleet.{table} WHERE source = ?"),
                (source,),
            )
            .await?;
        }
        Ok(())
    }

    /// Records where a source starts, the first time.
    pub async fn write_start(&mut self, pos: &GtidPos) -> mysql_async::Result<()> {
        let (conn, source) = (&mut *self.conn, self.source);
        let mark = Gtid {
            domain: STARTED,
            server: 0,
            seq: 0,
        };
        conn.query_drop("START TRANSACTION").await?;
        conn.query_drop(upsert(source, FLOOR, &mark, "", 0, 0))
            .await?;
        self.write_floor(pos).await?;
        self.conn.query_drop("COMMIT").await
    }

    /// Retires domain `end.domain` (retired.rs): what the target keeps of
    /// its old history goes — positions (the floor and every stream's),
    /// skips and MyISAM marks, whose GTIDs the domain's new transactions
    /// will carry again ([`Stored::retire`]; a mark there is of a
    /// transaction applied, since its end was) — and its end is recorded
    /// with `proof`, in one transaction.
    pub async fn retire(&mut self, end: &Gtid, proof: &str) -> mysql_async::Result<()> {
        let (conn, source) = (&mut *self.conn, self.source);
        conn.query_drop("START TRANSACTION").await?;
        conn.exec_drop(
            "DELETE FROM sqlfleet.replicate_position WHERE source = ? AND domain_id = ?",
            (source, end.domain),
        )
        .await?;
        for table in ["replicate_skip", "replicate_nontx"] {
            conn.exec_drop(
                format!(
                    "DELETE FROM sqlfleet.{table} WHERE source = ? AND gtid LIKE CONCAT(?, '-%')"
                ),
                (source, end.domain),
            )
            .await?;
        }
        conn.exec_drop(
            "REPLACE INTO sqlfleet.replicate_retired (source, domain_id, gtid, proof) VALUES (?, ?, ?, ?)",
            (source, end.domain, end.to_string(), proof),
        )
        .await?;
        conn.query_drop("COMMIT").await
    }

    /// Writes a floor (every domain of `pos`), autocommitted.
    pub async fn write_floor(&mut self, pos: &GtidPos) -> mysql_async::Result<()> {
        let (conn, source) = (&mut *self.conn, self.source);
        for g in pos.0.values() {
            conn.query_drop(upsert(source, FLOOR, g, "", 0, 0)).await?;
        }
        Ok(())
    }

    pub async fn record_error(
        &mut self,
        stream: &str,
        g: &Gtid,
        error: &str,
        statement: &str,
    ) -> mysql_async::Result<()> {
        let (conn, source) = (&mut *self.conn, self.source);
        utf8_client(conn).await?;
        conn.exec_drop(
            "REPLACE INTO sqlfleet.replicate_error (source, stream, gtid, error, statement) VALUES (?, ?, ?, ?, ?)",
            (source, stream, g.to_string(), error, statement),
        )
        .await
    }

    pub async fn clear_errors(&mut self) -> mysql_async::Result<()> {
        let (conn, source) = (&mut *self.conn, self.source);
        conn.exec_drop(
            "DELETE FROM sqlfleet.replicate_error WHERE source = ?",
            (source,),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied<'a>(stream: &'a str, domain: u32, seq: u64) -> Applied<'a> {
        Applied {
            source: "s1",
            stream,
            gtid: Gtid {
                domain,
                server: 7,
                seq,
            },
            file: "bin.000002",
            end_pos: 4 + seq,
            time: 1,
        }
    }

    #[test]
    fn each_stream_and_domain_is_written_once_guarded_by_its_first_transaction() {
        // (stream, domain, seq) applied together -> (stream, domain, first, last)
        type Done<'a> = &'a [(&'a str, u32, u64)];
        type Want<'a> = &'a [(&'a str, u32, u64, u64)];
        let table: &[(Done, Want)] = &[
            (&[("a", 1, 5)], &[("a", 1, 5, 5)]),
            (&[("a", 1, 5), ("a", 1, 6), ("a", 1, 9)], &[("a", 1, 5, 9)]),
            (
                &[("a", 1, 5), ("b", 1, 6), ("a", 2, 3), ("a", 1, 7)],
                &[("a", 1, 5, 7), ("a", 2, 3, 3), ("b", 1, 6, 6)],
            ),
        ];
        for (done, want) in table {
            let rows: Vec<Applied> = done.iter().map(|(s, d, q)| applied(s, *d, *q)).collect();
            let got = positions(&rows);
            assert_eq!(got.len(), want.len(), "{done:?}");
            for (sql, (stream, domain, first, last)) in got.iter().zip(want.iter()) {
                let lock = format!(
                    "stream = {} AND domain_id = {domain} FOR UPDATE",
                    utf8_literal(stream)
                );
                assert!(sql.contains(&lock), "{sql}");
                assert!(
                    sql.contains(&format!("IF cur >= {first} THEN SIGNAL")),
                    "{sql}"
                );
                assert!(
                    sql.contains(&format!(
                        "VALUES ({}, {}, {domain}, 7, {last},",
                        utf8_literal("s1"),
                        utf8_literal(stream)
                    )),
                    "{sql}"
                );
                // The guard reads (and locks) before it writes.
                assert!(sql.find("FOR UPDATE") < sql.find("INSERT INTO"), "{sql}");
                assert!(
                    sql.ends_with(
                        "SET @@session.sql_mode = @`sqlfleet mode`, \
                         @@session.collation_connection = @`sqlfleet collation`"
                    ),
                    "{sql}"
                );
            }
        }
    }

    #[test]
    fn only_the_guards_own_refusal_counts_as_covered() {
        assert!(is_covered(GUARD_ERRNO, COVERED));
        assert!(is_covered(1644, &format!("{COVERED} (more)")));
        assert!(!is_covered(1644, "a user's own SIGNAL"));
        assert!(!is_covered(1062, COVERED));
    }
}

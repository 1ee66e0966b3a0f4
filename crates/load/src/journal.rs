//! The load journal, kept on the target server in the `sqlfleet` schema.
//!
//! `sqlfleet.loads` has one row per dump identity (its state);
//! `sqlfleet.load_journal` one row per committed piece of the dump (its
//! byte range). Data batches insert their journal row inside their own
//! transaction, so a batch's rows and its record commit or vanish
//! together; DDL (which commits implicitly) is recorded right after it
//! runs. `--resume` skips every statement inside a recorded range.
//!
//! Work that cannot commit with its record writes a `pending-*` row
//! first and turns it into the final record after: DDL (so `--resume`
//! tolerates "already exists" only for the one DDL that was in flight)
//! and batches into non-transactional tables (MyISAM, Aria: a batch in
//! flight may have left part of its rows, so on `--resume` such a table
//! is emptied and loaded again from the dump, which created it).
//!
//! Each record carries the statement chain (`crate::identity`) at its
//! end, so a resume can tell the same dump from another one.
//!
//! A running load holds a named lock (`GET_LOCK`) on its own connection,
//! so a second process loading the same input is refused while it runs.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use sqlfleet_conn::quote::literal;

use crate::error::LoadError;
use crate::identity::CHAIN_HASH;

/// What `sqlfleet.loads`'s comment says once [`SCHEMA_SQL`] has run:
/// a load that finds it writes no schema statement. A statement added to
/// `SCHEMA_SQL` comes with a new mark (the last statement sets it).
pub const SHAPE: &str = "sqlfleet load journal, shape 3";

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
    "ALTER TABLE sqlfleet.loads ADD COLUMN IF NOT EXISTS size BIGINT UNSIGNED NULL, \
        ADD COLUMN IF NOT EXISTS stateful_line BIGINT UNSIGNED NULL, \
        ADD COLUMN IF NOT EXISTS stateful_why VARCHAR(200) NULL",
    "CREATE TABLE IF NOT EXISTS sqlfleet.load_journal (
        load_id CHAR(32) NOT NULL,
        start_offset BIGINT UNSIGNED NOT NULL,
        end_offset BIGINT UNSIGNED NOT NULL,
        kind VARCHAR(16) NOT NULL,
        rows_loaded BIGINT UNSIGNED NOT NULL DEFAULT 0,
        committed_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
        PRIMARY KEY (load_id, start_offset)
    ) ENGINE=InnoDB",
    "ALTER TABLE sqlfleet.loads MODIFY COLUMN state \
        ENUM('running','done','failed','interrupted') NOT NULL",
    "ALTER TABLE sqlfleet.loads ADD COLUMN IF NOT EXISTS input_id CHAR(32) NULL, \
        ADD COLUMN IF NOT EXISTS target_db VARCHAR(192) NULL",
    "ALTER TABLE sqlfleet.load_journal ADD COLUMN IF NOT EXISTS tbl VARCHAR(600) NULL, \
        ADD COLUMN IF NOT EXISTS chain CHAR(32) NULL, \
        ADD COLUMN IF NOT EXISTS auto_increment BIGINT UNSIGNED NULL",
    // The statement chain's hash (`identity::CHAIN_HASH`); NULL: SHA-256,
    // as sqlfleet wrote before it named the hash.
    "ALTER TABLE sqlfleet.loads ADD COLUMN IF NOT EXISTS chain_hash VARCHAR(16) NULL",
    // A dump finished without its trailer (`End::Cut`): a longer copy of
    // it may be resumed (`earlier`).
    "ALTER TABLE sqlfleet.loads ADD COLUMN IF NOT EXISTS cut_short BOOL NULL",
    // The mark that all of the above ran ([`SHAPE`]).
    "ALTER TABLE sqlfleet.loads COMMENT = 'sqlfleet load journal, shape 3'",
];

/// The schema the journal lives in; a dump's statements on it are skipped.
pub const SCHEMA: &str = "sqlfleet";

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
    Resume(Box<Resume>),
    AlreadyDone,
}

/// What an interrupted load left to go on from.
#[derive(Debug, Default, Clone)]
pub struct Resume {
    /// Committed ranges: skipped.
    pub ranges: Ranges,
    /// Chain value recorded at each range's end (hex), to check the input.
    pub chains: std::collections::HashMap<u64, String>,
    /// The furthest recorded end: the input is checked up to here before
    /// anything runs.
    pub horizon: u64,
    /// Start offsets of DDL that was in flight (may have run).
    pub pending_ddl: std::collections::HashSet<u64>,
    /// Non-transactional tables that had a batch in flight.
    pub dirty_tables: Vec<String>,
    /// The input's size when the load began, if known.
    pub size: Option<u64>,
    /// The hash its chain values were computed with (`None`: SHA-256).
    pub chain_hash: Option<String>,
    /// The load had finished: "already loaded" is said only once this
    /// input has been checked against every recorded statement chain.
    pub done: bool,
    /// The journal was an earlier load's of the same name that read
    /// another input (its id): `crate::earlier`.
    pub taken_over: Option<String>,
}

/// One journal record.
pub struct Record<'a> {
    pub load_id: &'a str,
    pub start: u64,
    pub end: u64,
    /// data | ddl | create | chunk | quarantine | pending-data | pending-ddl
    pub kind: &'a str,
    pub rows: u64,
    pub table: Option<&'a str>,
    pub chain: Option<&'a crate::identity::ChainValue>,
}

impl Record<'_> {
    /// The statement that writes (or, for a pending row, completes) it.
    /// A record naming a table also keeps that table's AUTO_INCREMENT
    /// counter as it stands when the record is written (NULL for a table
    /// without one): see [`restore_auto_increments`].
    pub fn sql(&self) -> String {
        format!(
            "INSERT INTO sqlfleet.load_journal (load_id, start_offset, end_offset, kind, rows_loaded, tbl, chain, auto_increment) \
             VALUES ('{}', {}, {}, '{}', {}, {}, {}, {}) ON DUPLICATE KEY UPDATE end_offset = VALUES(end_offset), \
             kind = VALUES(kind), rows_loaded = VALUES(rows_loaded), tbl = VALUES(tbl), chain = VALUES(chain), \
             auto_increment = VALUES(auto_increment)",
            self.load_id,
            self.start,
            self.end,
            self.kind,
            self.rows,
            self.table.map(literal).unwrap_or_else(|| "NULL".into()),
            self.chain
                .map(|c| format!("'{}'", crate::identity::hex(c)))
                .unwrap_or_else(|| "NULL".into()),
            self.table
                .map(counter_sql)
                .unwrap_or_else(|| "NULL".into()),
        )
    }
}

/// A subquery giving the AUTO_INCREMENT counter of `table` (as shown:
/// `` `db`.`t` `` or `` `t` `` in the connection's database) right now.
///
/// A name with a character outside the Basic Multilingual Plane (an
/// emoji) names no table: identifiers are utf8mb3 on the server, and
/// comparing one with such a literal is itself an error (1267), which
/// would stand in for the server's own word on the dump's statement.
fn counter_sql(table: &str) -> String {
    if table.chars().any(|c| c as u32 > 0xFFFF) {
        return "NULL".into();
    }
    let (schema, name) = split_shown(table);
    let schema = schema.map_or_else(|| "DATABASE()".to_string(), |d| literal(&d));
    format!(
        "(SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = {schema} AND TABLE_NAME = {})",
        literal(&name)
    )
}

pub(crate) fn jerr(endpoint: &str) -> impl Fn(mysql_async::Error) -> LoadError + '_ {
    move |e| LoadError::Journal {
        endpoint: endpoint.to_string(),
        what: crate::error::describe(&e).1,
    }
}

/// Creates the journal tables and decides how this run starts.
/// A dump's load bound to its target database: (the input's id, the
/// `-D` database, empty for none).
pub type Bound<'a> = Option<(&'a str, &'a str)>;

#[allow(clippy::too_many_arguments)]
pub async fn prepare(
    conn: &mut Conn,
    endpoint: &str,
    load_id: &str,
    source: &str,
    resume: bool,
    restart: bool,
    size: Option<u64>,
    bound: Bound<'_>,
) -> Result<Start, LoadError> {
    let (start, begin) = decide(
        conn, endpoint, load_id, source, resume, restart, size, bound,
    )
    .await?;
    begin.run(conn).await.map_err(jerr(endpoint))?;
    Ok(start)
}

/// The writes that start a run's journal (its tables where there are
/// none, a restarted load's old records gone, its row in
/// `sqlfleet.loads`), held by a fresh dump load until its first statement
/// has run (`schedule`): a load stopped before that — a statement the
/// server refuses at once, a file that is not SQL — writes nothing to the
/// target, as the stock client writes nothing.
#[derive(Debug, Default)]
#[must_use]
pub struct Begin(Vec<String>);

/// How many times the journal's start is tried on a transient error.
const BEGIN_ATTEMPTS: u32 = 10;

impl Begin {
    /// Adds the record of a statement run before the journal was written
    /// (one that runs a second time as it ran once: the scheduler's
    /// `reruns_harmlessly`), to be written with it.
    pub fn hold(&mut self, record_sql: String) {
        self.0.push(record_sql);
    }

    /// Runs the writes; again from the start on a transient error (each
    /// is idempotent): on a Galera cluster two loads beginning at once on
    /// two nodes abort each other's writes to the journal with the other's
    /// schema statements (1213), as the galera test saw — over and over
    /// while the other load runs a file of DDL, so the waits double up to
    /// a second ([`BEGIN_ATTEMPTS`] attempts, about 5.5 s in all; five
    /// attempts over half a second were not enough in CI).
    pub async fn run(self, conn: &mut Conn) -> Result<(), mysql_async::Error> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut r = Ok(());
            for sql in &self.0 {
                r = conn.query_drop(sql.as_str()).await;
                if r.is_err() {
                    break;
                }
            }
            match r {
                Err(mysql_async::Error::Server(e))
                    if attempt < BEGIN_ATTEMPTS
                        && sqlfleet_conn::codes::TRANSIENT.contains(&e.code) =>
                {
                    let ms = (50u64 << (attempt - 1).min(5)).min(1000);
                    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                }
                other => return other,
            }
        }
    }
}

/// Is the journal there, and in this version's shape? Read only: a load
/// writes nothing before its first statement has run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Absent,
    Older,
    Current,
}

async fn shape(conn: &mut Conn) -> Result<Shape, mysql_async::Error> {
    let tables: Vec<(String, String)> = conn
        .query(
            "SELECT TABLE_NAME, TABLE_COMMENT FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = 'sqlfleet' AND TABLE_NAME IN ('loads', 'load_journal')",
        )
        .await?;
    Ok(match tables.as_slice() {
        [] => Shape::Absent,
        [_, _] if tables.iter().any(|(t, c)| t == "loads" && c == SHAPE) => Shape::Current,
        _ => Shape::Older,
    })
}

/// Decides how this run starts, reading the journal; the writes that
/// start it come back as a [`Begin`] for the caller to run when it
/// should. (An older journal is brought to this version's shape at once,
/// and a journal taken over is moved: both only where one exists.)
#[allow(clippy::too_many_arguments)]
pub async fn decide(
    conn: &mut Conn,
    endpoint: &str,
    load_id: &str,
    source: &str,
    resume: bool,
    restart: bool,
    size: Option<u64>,
    bound: Bound<'_>,
) -> Result<(Start, Begin), LoadError> {
    let e = jerr(endpoint);
    let mut begin = Begin::default();
    match shape(conn).await.map_err(&e)? {
        Shape::Current => {}
        Shape::Older => {
            for sql in SCHEMA_SQL {
                conn.query_drop(*sql).await.map_err(&e)?;
            }
        }
        Shape::Absent => {
            begin.0.extend(SCHEMA_SQL.iter().map(|s| s.to_string()));
            return Ok((
                Start::Fresh,
                begin.then_row(load_id, source, size, bound, RowStart::Fresh),
            ));
        }
    }
    let id = literal(load_id);
    let state: Option<String> = conn
        .query_first(format!(
            "SELECT state FROM sqlfleet.loads WHERE load_id = {id}"
        ))
        .await
        .map_err(&e)?;
    if let (None, true, Some((input, db))) = (&state, resume, bound) {
        // The same dump interrupted while loading into another database:
        // resuming it here would load only the rest into this one.
        let other: Option<(String, Option<String>)> = conn
            .query_first(format!(
                "SELECT load_id, target_db FROM sqlfleet.loads WHERE input_id = {} AND state <> 'done' \
                 AND load_id <> {id} ORDER BY started_at DESC LIMIT 1",
                literal(input)
            ))
            .await
            .map_err(&e)?;
        if let Some((other_id, other_db)) = other {
            let other_db = other_db.unwrap_or_default();
            return Err(LoadError::Setup {
                what: format!(
                    "{source}: the interrupted load of this dump (load id {other_id}) was loading with {} on {endpoint}; resume it there ({}), or load it with {} from the start with --restart",
                    crate::earlier::with_db(&other_db),
                    crate::earlier::with_db(&other_db),
                    crate::earlier::with_db(db)
                ),
            });
        }
    }
    // Nothing recorded for this input: an earlier load of the same name
    // that read another input (a copy that has grown since, or another
    // dump) is taken over when its loaded part can be checked, refused
    // when it cannot (`earlier`).
    let mut state = state;
    let mut taken_over = None;
    if state.is_none() && resume {
        if let Some(earlier) = crate::earlier::find(conn, source, load_id)
            .await
            .map_err(&e)?
        {
            match crate::earlier::judge(&earlier, source, bound.map(|(_, db)| db), size) {
                crate::earlier::Verdict::Ignore => {}
                crate::earlier::Verdict::Refuse(what) => return Err(LoadError::Setup { what }),
                crate::earlier::Verdict::TakeOver => {
                    take_over(conn, endpoint, &earlier, load_id).await?;
                    state = Some("running".into());
                    taken_over = Some(earlier);
                }
            }
        }
    }
    let start = match earlier_run(state.as_deref(), resume, restart) {
        // Finished: the same id is not the same input (size and first MiB
        // only). A dump is read and checked against every recorded
        // statement chain like a cut-off load's before "already loaded" is
        // said (every dump record carries its chain); a CSV/TSV file
        // against every chunk's recorded value (`flat.rs`). Only a journal
        // of an older sqlfleet, which recorded neither, is taken by its id.
        EarlierRun::Finished => {
            let r = read_resume(conn, load_id).await.map_err(&e)?;
            if r.chains.is_empty() {
                return Ok((Start::AlreadyDone, begin));
            }
            if r.chain_hash.as_deref() != Some(CHAIN_HASH) {
                return Err(LoadError::Setup {
                    what: format!(
                        "{source}: a load with this id (load id {load_id}) finished, recorded by another sqlfleet version, which checks inputs with {} ({CHAIN_HASH} here), so this one cannot tell whether this input is the one it loaded; refusing to call it loaded (use --restart to load it from the start)",
                        r.chain_hash.as_deref().unwrap_or("SHA-256")
                    ),
                });
            }
            return Ok((Start::Resume(Box::new(Resume { done: true, ..r })), begin));
        }
        EarlierRun::Refuse => {
            return Err(LoadError::Unfinished {
                load_id: load_id.to_string(),
            })
        }
        EarlierRun::Continue => {
            let mut r = read_resume(conn, load_id).await.map_err(&e)?;
            if let Some(earlier) = &taken_over {
                // Its size was another input's: the chains decide.
                r.size = None;
                r.taken_over = Some(earlier.load_id.clone());
            }
            if !r.chains.is_empty() && r.chain_hash.as_deref() != Some(CHAIN_HASH) {
                // Its records check the input with another hash: this
                // run could not tell the same dump from another one.
                return Err(LoadError::Setup {
                    what: format!(
                        "{source}: the interrupted load (load id {load_id}) was recorded by another sqlfleet version, which checks the input with {} ({CHAIN_HASH} here), so this one cannot tell whether the input is the same: resume it with that version, or load from the start with --restart",
                        r.chain_hash.as_deref().unwrap_or("SHA-256")
                    ),
                });
            }
            Start::Resume(Box::new(r))
        }
        EarlierRun::Fresh => {
            // (also with no row in sqlfleet.loads: records of this id
            // left without one — a row deleted by hand — must not count)
            begin.0.push(format!(
                "DELETE FROM sqlfleet.load_journal WHERE load_id = {id}"
            ));
            Start::Fresh
        }
    };
    // Resumed, its row says it runs again (with the size of a taken-over
    // load's input); fresh, its row starts over.
    let row = match (&start, taken_over.is_some()) {
        (Start::Fresh, _) => RowStart::Fresh,
        (_, sized) => RowStart::Resumed { sized },
    };
    Ok((start, begin.then_row(load_id, source, size, bound, row)))
}

/// Moves an earlier load's journal to `load_id` once no run of it is
/// alive: its lock taken (a running one is named), a killed run's last
/// statements waited for, then `earlier::move_sql`, and its lock given back.
async fn take_over(
    conn: &mut Conn,
    endpoint: &str,
    e: &crate::earlier::Earlier,
    load_id: &str,
) -> Result<(), LoadError> {
    lock(conn, endpoint, &e.load_id).await?;
    wait_for_leftovers(
        conn,
        endpoint,
        &e.load_id,
        std::time::Duration::from_secs(30),
    )
    .await?;
    let mut sql = crate::earlier::move_sql(e, load_id);
    sql.push(format!(
        "DO RELEASE_LOCK({})",
        literal(&lock_name(&e.load_id))
    ));
    for q in sql {
        conn.query_drop(q).await.map_err(jerr(endpoint))?;
    }
    Ok(())
}

/// What a run's row in `sqlfleet.loads` keeps of an earlier run's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RowStart {
    /// Nothing: size, one-connection mark and chain hash are this run's.
    Fresh,
    /// Everything but the state (and the size, for a load taken over).
    Resumed { sized: bool },
}

impl Begin {
    /// Adds the run's row in `sqlfleet.loads` (a fresh run also clears
    /// what an earlier run of this id left in it).
    fn then_row(
        mut self,
        load_id: &str,
        source: &str,
        size: Option<u64>,
        bound: Bound<'_>,
        row: RowStart,
    ) -> Begin {
        let size_sql = size.map_or("NULL".to_string(), |s| s.to_string());
        let (input_sql, db_sql) = match bound {
            Some((input, db)) => (literal(input), literal(db)),
            None => ("NULL".to_string(), "NULL".to_string()),
        };
        self.0.push(format!(
            "INSERT INTO sqlfleet.loads (load_id, source, state, size, input_id, target_db, chain_hash) \
             VALUES ({}, {}, 'running', {size_sql}, {input_sql}, {db_sql}, '{CHAIN_HASH}') \
             ON DUPLICATE KEY UPDATE state = 'running', source = VALUES(source), finished_at = NULL, \
             input_id = VALUES(input_id), target_db = VALUES(target_db){}",
            literal(load_id),
            literal(&crate::identity::source_column(source)),
            match row {
                RowStart::Fresh => ", size = VALUES(size), stateful_line = NULL, stateful_why = NULL, chain_hash = VALUES(chain_hash)",
                RowStart::Resumed { sized: true } => ", size = VALUES(size)",
                RowStart::Resumed { sized: false } => "",
            }
        ));
        self
    }
}

/// The statement that records a committed range (no table, no chain).
pub fn record_sql(
    load_id: &str,
    start: u64,
    end: u64,
    kind: &str,
    rows: u64,
    table: Option<&str>,
) -> String {
    Record {
        load_id,
        start,
        end,
        kind,
        rows,
        table,
        chain: None,
    }
    .sql()
}

async fn read_resume(conn: &mut Conn, load_id: &str) -> Result<Resume, mysql_async::Error> {
    let id = literal(load_id);
    type Row = (u64, u64, String, Option<String>, Option<String>);
    let rows: Vec<Row> = conn
        .query(format!(
            "SELECT start_offset, end_offset, kind, tbl, chain FROM sqlfleet.load_journal WHERE load_id = {id}"
        ))
        .await?;
    let head: Option<(Option<u64>, Option<String>)> = conn
        .query_first(format!(
            "SELECT size, chain_hash FROM sqlfleet.loads WHERE load_id = {id}"
        ))
        .await?;
    let (size, chain_hash) = head.unwrap_or_default();
    let mut r = Resume {
        size,
        chain_hash,
        ..Resume::default()
    };
    let mut ranges = Vec::new();
    for (start, end, kind, tbl, chain) in rows {
        match kind.as_str() {
            "pending-ddl" => {
                r.pending_ddl.insert(start);
            }
            "pending-data" => {
                if let Some(t) = tbl {
                    if !r.dirty_tables.contains(&t) {
                        r.dirty_tables.push(t);
                    }
                }
            }
            _ => {
                ranges.push((start, end));
                r.horizon = r.horizon.max(end);
                if let Some(c) = chain {
                    r.chains.insert(end, c);
                }
            }
        }
    }
    r.ranges = Ranges::from_unsorted(ranges);
    Ok(r)
}

/// Why an interrupted load cannot be resumed exactly, if it cannot.
pub async fn stateful_since(
    conn: &mut Conn,
    load_id: &str,
) -> Result<Option<(u64, String)>, mysql_async::Error> {
    let row: Option<(Option<u64>, Option<String>)> = conn
        .query_first(format!(
            "SELECT stateful_line, stateful_why FROM sqlfleet.loads WHERE load_id = {}",
            literal(load_id)
        ))
        .await?;
    Ok(row.and_then(|(l, w)| l.map(|l| (l, w.unwrap_or_default()))))
}

/// Records that the load now depends on one connection's state.
pub async fn mark_stateful(
    conn: &mut Conn,
    load_id: &str,
    line: u64,
    why: &str,
) -> Result<(), mysql_async::Error> {
    conn.query_drop(format!(
        "UPDATE sqlfleet.loads SET stateful_line = {line}, stateful_why = {} WHERE load_id = {} AND stateful_line IS NULL",
        literal(why),
        literal(load_id)
    ))
    .await
}

/// Makes a non-transactional table that had a batch in flight exact
/// again: its rows are deleted and its data records dropped, so the
/// resumed load loads all of its data again. Refused when this load did
/// not create the table (its other rows could not be told apart).
pub async fn reset_dirty_table(
    conn: &mut Conn,
    endpoint: &str,
    load_id: &str,
    table: &str,
) -> Result<u64, LoadError> {
    let e = jerr(endpoint);
    let created: Option<u64> = conn
        .query_first(format!(
            "SELECT COUNT(*) FROM sqlfleet.load_journal WHERE load_id = {} AND tbl = {} AND kind = 'create'",
            literal(load_id),
            literal(table)
        ))
        .await
        .map_err(&e)?;
    if created.unwrap_or(0) == 0 {
        return Err(LoadError::Setup {
            what: format!(
                "table {table} is non-transactional and had a batch in flight when the load stopped, and this dump did not create it, so its partial rows cannot be told from the rows it had before: restore {table} and load again with --restart"
            ),
        });
    }
    // Rows the interrupted batch wrote fired the table's triggers, whose
    // writes elsewhere emptying the table cannot undo.
    let (schema, name) = split_shown(table);
    let triggers: Option<u64> = conn
        .query_first(format!(
            "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = {} AND EVENT_OBJECT_TABLE = {}",
            schema.as_deref().map(literal).unwrap_or_else(|| "DATABASE()".into()),
            literal(&name)
        ))
        .await
        .map_err(&e)?;
    if triggers.unwrap_or(0) > 0 {
        return Err(LoadError::Setup {
            what: format!(
                "table {table} is non-transactional and had a batch in flight when the load stopped, and it has triggers: what they wrote for that batch cannot be undone by emptying {table}; restore the target and load again with --restart"
            ),
        });
    }
    conn.query_drop(format!("DELETE FROM {table}"))
        .await
        .map_err(|err| LoadError::Setup {
            what: format!(
                "emptying {table} to load it again: {}",
                crate::error::describe(&err).1
            ),
        })?;
    let deleted = conn.affected_rows();
    conn.query_drop(format!(
        "DELETE FROM sqlfleet.load_journal WHERE load_id = {} AND tbl = {} AND kind IN ('data', 'pending-data', 'quarantine')",
        literal(load_id),
        literal(table)
    ))
    .await
    .map_err(&e)?;
    Ok(deleted)
}

/// On `--resume`: a transaction rolled back by the interruption used up
/// AUTO_INCREMENT values (InnoDB and Aria never hand them out again), so
/// ids the server assigns from here on would differ from an
/// uninterrupted load's. Each table this load created gets back the
/// counter its records kept: the largest since the table's last CREATE
/// or DDL record (counters only grow between them). That is the counter
/// after everything committed, with what committed statements used up
/// and never gave back (a statement refused with `--force`, an INSERT
/// IGNORE's duplicate): the uninterrupted load's. A batch that leaves
/// ids to the server runs alone on its table, so no record keeps what a
/// rolled-back one took. The server takes max(that, largest id + 1).
pub async fn restore_auto_increments(
    conn: &mut Conn,
    endpoint: &str,
    load_id: &str,
) -> Result<usize, LoadError> {
    let e = jerr(endpoint);
    let id = literal(load_id);
    let rows: Vec<(String, u64)> = conn
        .query(format!(
            "SELECT j.tbl, MAX(j.auto_increment) FROM sqlfleet.load_journal j \
             JOIN (SELECT tbl, MAX(start_offset) AS since FROM sqlfleet.load_journal \
                   WHERE load_id = {id} AND kind IN ('create', 'ddl') AND tbl IS NOT NULL GROUP BY tbl) d \
               ON d.tbl = j.tbl AND j.start_offset >= d.since \
             WHERE j.load_id = {id} AND j.auto_increment IS NOT NULL \
               AND EXISTS (SELECT 1 FROM sqlfleet.load_journal c WHERE c.load_id = {id} AND c.kind = 'create' AND c.tbl = j.tbl) \
             GROUP BY j.tbl"
        ))
        .await
        .map_err(&e)?;
    let mut n = 0;
    for (tbl, start) in rows {
        // A table dropped later in the dump is not there: nothing to do.
        if conn
            .query_drop(format!("ALTER TABLE {tbl} AUTO_INCREMENT = {start}"))
            .await
            .is_ok()
        {
            n += 1;
        }
    }
    Ok(n)
}

/// The lock each of a load's connections holds for its slot (worker
/// number, or `c` for the scheduler's), so a later run can see whether a
/// killed run's statements still run on the server.
pub fn slot_lock_name(load_id: &str, slot: &str) -> String {
    format!("sqlfleet_load_{load_id}_{slot}")
}

/// Takes a slot's lock if free (`DO`: nothing to read).
pub fn slot_lock_sql(load_id: &str, slot: &str) -> String {
    format!(
        "DO GET_LOCK({}, 0)",
        literal(&slot_lock_name(load_id, slot))
    )
}

/// Slots checked for leftovers of an interrupted run.
const SLOTS: usize = 256;

/// Before a run reads the journal: waits until no connection of an
/// interrupted run of this load still runs a statement on the server (a
/// killed client's last statement goes on until it ends), killing such
/// a statement if it outlasts `patience`.
pub async fn wait_for_leftovers(
    conn: &mut Conn,
    endpoint: &str,
    load_id: &str,
    patience: std::time::Duration,
) -> Result<(), LoadError> {
    let e = jerr(endpoint);
    let names: Vec<String> = std::iter::once("c".to_string())
        .chain((0..SLOTS).map(|i| i.to_string()))
        .map(|s| format!("IS_USED_LOCK({})", literal(&slot_lock_name(load_id, &s))))
        .collect();
    let q = format!("SELECT CONCAT_WS(',', {})", names.join(", "));
    let started = std::time::Instant::now();
    let mut killed = false;
    loop {
        let held: Option<String> = conn.query_first(q.as_str()).await.map_err(&e)?;
        let held = held.unwrap_or_default();
        if held.is_empty() {
            return Ok(());
        }
        if started.elapsed() > patience {
            if killed {
                return Err(LoadError::Setup {
                    what: format!(
                        "connections {held} of an interrupted run of this load (load id {load_id}) are still running on {endpoint} and would not end; wait for them or KILL them, then resume"
                    ),
                });
            }
            for id in held.split(',') {
                let _ = conn.query_drop(format!("KILL {}", id.trim())).await;
            }
            killed = true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// `` `db`.`t` `` (as the scheduler shows a table) back into its parts.
fn split_shown(shown: &str) -> (Option<String>, String) {
    let mut parts = sqlfleet_conn::quote::split_qualified(shown);
    match parts.len() {
        2 => (Some(parts[0].clone()), parts[1].clone()),
        _ => (None, parts.pop().unwrap_or_default()),
    }
}

/// The lock a running load holds on its own connection.
pub fn lock_name(load_id: &str) -> String {
    format!("sqlfleet_load_{load_id}")
}

/// Takes the load's lock on `conn` (held until it closes), or says who
/// holds it.
pub async fn lock(conn: &mut Conn, endpoint: &str, load_id: &str) -> Result<(), LoadError> {
    let e = jerr(endpoint);
    let name = literal(&lock_name(load_id));
    let got: Option<Option<i64>> = conn
        .query_first(format!("SELECT GET_LOCK({name}, 0)"))
        .await
        .map_err(&e)?;
    if got.flatten() == Some(1) {
        return Ok(());
    }
    let holder: Option<Option<u64>> = conn
        .query_first(format!("SELECT IS_USED_LOCK({name})"))
        .await
        .map_err(&e)?;
    let holder = holder.flatten().unwrap_or(0);
    let host: Option<String> = conn
        .query_first(format!(
            "SELECT HOST FROM information_schema.PROCESSLIST WHERE ID = {holder}"
        ))
        .await
        .map_err(&e)?;
    Err(LoadError::Running {
        load_id: load_id.to_string(),
        connection: holder,
        host: host.unwrap_or_else(|| "?".into()),
        endpoint: endpoint.to_string(),
    })
}

/// This run's turn at `load_id`: its lock ([`lock`]: another run of it
/// alive is named and refused), then no statement of an interrupted run
/// still running on the server ([`wait_for_leftovers`], 30 s). Dumps and
/// CSV/TSV files alike: two loads of one input started at once each read
/// "nothing loaded yet" and loaded every row.
pub async fn take_turn(conn: &mut Conn, endpoint: &str, load_id: &str) -> Result<(), LoadError> {
    lock(conn, endpoint, load_id).await?;
    wait_for_leftovers(conn, endpoint, load_id, std::time::Duration::from_secs(30)).await
}

/// Marks the run finished (or failed).
/// How a run of a load ended, as its row in `sqlfleet.loads` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Done,
    /// Done, but the dump had no trailer: it may have been a copy still
    /// under way, whose completed self `--resume` goes on with.
    Cut,
    Failed,
    /// Stopped by SIGINT or SIGTERM after its committed work was journaled.
    Interrupted,
}

pub async fn finish(
    conn: &mut Conn,
    endpoint: &str,
    load_id: &str,
    end: End,
    bytes: u64,
    rows: u64,
) -> Result<(), LoadError> {
    sqlfleet_faults::point!("load::before_finish");
    conn.query_drop(format!(
        "UPDATE sqlfleet.loads SET state = '{}', finished_at = CURRENT_TIMESTAMP(6), bytes = {bytes}, rows_loaded = {rows}, \
         cut_short = {} WHERE load_id = {}",
        match end {
            End::Done | End::Cut => "done",
            End::Failed => "failed",
            End::Interrupted => "interrupted",
        },
        end == End::Cut,
        literal(load_id)
    ))
    .await
    .map_err(jerr(endpoint))
}

/// Forgets a load that journaled nothing (its input failed before its
/// first statement — binary data, a README loaded by mistake): no
/// "resumable" state is left for a next run to trip over. A load with
/// journal rows (this run's or an earlier one's) is kept.
pub async fn forget_if_empty(
    conn: &mut Conn,
    endpoint: &str,
    load_id: &str,
) -> Result<(), LoadError> {
    let id = literal(load_id);
    conn.query_drop(format!(
        "DELETE FROM sqlfleet.loads WHERE load_id = {id} \
         AND NOT EXISTS (SELECT 1 FROM sqlfleet.load_journal WHERE load_id = {id})"
    ))
    .await
    .map_err(jerr(endpoint))
}

/// What a load does with the earlier run of the same input its journal
/// records (`state`: its row's state, `None` without one), given
/// `--resume` and `--restart`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EarlierRun {
    /// It finished; with --resume the input is checked against it.
    Finished,
    /// It stopped before the end (killed, failed, interrupted) and neither
    /// flag says what to do: refused, so a rerun never loads over it.
    Refuse,
    /// --resume: go on from what it committed.
    Continue,
    /// From the start: no earlier run, --restart, or a finished one
    /// loaded again without --resume.
    Fresh,
}

fn earlier_run(state: Option<&str>, resume: bool, restart: bool) -> EarlierRun {
    match (state, resume, restart) {
        (_, _, true) | (None, _, _) => EarlierRun::Fresh,
        (Some("done"), true, _) => EarlierRun::Finished,
        (Some("done"), false, _) => EarlierRun::Fresh,
        (Some(_), true, _) => EarlierRun::Continue,
        (Some(_), false, _) => EarlierRun::Refuse,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_earlier_run_is_refused_unless_a_flag_says_what_to_do() {
        use super::{earlier_run, EarlierRun::*};
        let table = [
            (None, false, false, Fresh, "nothing recorded"),
            (None, true, false, Fresh, "--resume with nothing recorded"),
            (
                Some("done"),
                false,
                false,
                Fresh,
                "a finished load, loaded again",
            ),
            (
                Some("done"),
                true,
                false,
                Finished,
                "--resume after the end: checked",
            ),
            (Some("running"), false, false, Refuse, "killed"),
            (Some("failed"), false, false, Refuse, "failed"),
            (
                Some("interrupted"),
                false,
                false,
                Refuse,
                "Ctrl-C: loaded over it before",
            ),
            (Some("running"), true, false, Continue, "killed, --resume"),
            (
                Some("interrupted"),
                true,
                false,
                Continue,
                "Ctrl-C, --resume",
            ),
            (Some("failed"), true, false, Continue, "failed, --resume"),
            (Some("interrupted"), false, true, Fresh, "--restart"),
            (Some("done"), false, true, Fresh, "--restart after the end"),
            (
                Some("a state of a later version"),
                false,
                false,
                Refuse,
                "unknown: refused",
            ),
        ];
        for (state, resume, restart, want, why) in table {
            assert_eq!(earlier_run(state, resume, restart), want, "{why}");
        }
    }

    use super::*;

    #[test]
    fn the_shape_mark_is_what_the_schema_statements_end_with() {
        let last = SCHEMA_SQL.last().expect("statements");
        assert!(
            last.starts_with("ALTER TABLE sqlfleet.loads COMMENT")
                && last.contains(&format!("'{SHAPE}'")),
            "{last}"
        );
    }

    #[test]
    fn shown_names_split_back() {
        assert_eq!(split_shown("`d`.`t`"), (Some("d".into()), "t".into()));
        assert_eq!(
            split_shown("`we``ird.db`.`t.x`"),
            (Some("we`ird.db".into()), "t.x".into())
        );
        assert_eq!(split_shown("`t`"), (None, "t".into()));
    }

    #[test]
    fn a_record_naming_a_table_keeps_its_counter() {
        let rec = |table| {
            Record {
                load_id: "x",
                start: 0,
                end: 1,
                kind: "data",
                rows: 0,
                table,
                chain: None,
            }
            .sql()
        };
        assert!(rec(Some("`d`.`t`")).contains(
            "(SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'd' AND TABLE_NAME = 't')"
        ));
        assert!(rec(Some("`t`")).contains("TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 't'"));
        assert!(rec(None).ends_with("auto_increment = VALUES(auto_increment)"));
        assert!(!rec(None).contains("information_schema"));
    }

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

//! Applying transactions on the target: one connection per worker, each
//! stream (source, database) always on the same worker so its order is
//! the source's, several source transactions per target commit, and the
//! stream positions written in that same commit.
//!
//! Row events go through `BINLOG '<base64>'` (the target's own row
//! applier, as `mariadb-binlog | mariadb` does); statements run as text in
//! the session state the source ran them in.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use sqlfleet_conn::quote::{ident, literal, UTF8_CLIENT};
use sqlfleet_conn::Target;
use tokio::sync::mpsc;

use crate::engines::Engines;
use crate::event;
use crate::position;
use crate::sequence;
use crate::txn::{Item, Session, Stmt, Txn, VarValue};

/// Deadlock and lock wait timeout: retried, not a stream failure.
const RETRYABLE: &[u16] = sqlfleet_conn::codes::TRANSIENT;

/// One transaction for one stream.
pub struct Job {
    pub source: Arc<str>,
    /// The source's reading session; jobs of an older one are dropped
    /// after that session failed.
    pub generation: u64,
    pub idx: u64,
    pub stream: String,
    pub txn: Arc<Txn>,
    /// The source's current format description event (raw).
    pub format: Arc<Vec<u8>>,
    pub reply: mpsc::UnboundedSender<Done>,
    /// This job's share of its source's in-flight byte budget, given back
    /// when the worker is done with it.
    pub budget: Option<tokio::sync::OwnedSemaphorePermit>,
}

#[derive(Debug)]
pub struct Done {
    pub generation: u64,
    pub idx: u64,
    pub stream: String,
    pub gtid: crate::gtid::Gtid,
    /// The source's commit time of the transaction.
    pub timestamp: u32,
    pub outcome: Outcome,
}

#[derive(Debug, Clone)]
pub enum Outcome {
    Applied,
    /// Not applied: its stream had stopped, or its session had failed.
    Dropped,
    /// The target refused it (SQL error): its stream stops.
    Failed {
        error: String,
        statement: String,
    },
    /// The connection failed, or the stream's recorded position already
    /// covers the work (another commit landed after the positions were
    /// read): the source must restart from the target's positions (the
    /// commit may or may not have happened).
    Lost {
        error: String,
    },
}

/// Why applying failed.
#[derive(Debug, Clone)]
pub enum ApplyError {
    Sql {
        code: u16,
        error: String,
        statement: String,
    },
    Lost(String),
}

impl ApplyError {
    /// The error's text (the server's, or why the connection is gone).
    pub fn text(&self) -> String {
        match self {
            ApplyError::Lost(s) => s.clone(),
            ApplyError::Sql { error, .. } => error.clone(),
        }
    }

    pub fn from_driver(e: mysql_async::Error, statement: &str) -> ApplyError {
        match e {
            // Another commit recorded this work first: not a failure of
            // the stream, and not to be applied again — the source reads
            // again from the target's positions, which skip it.
            mysql_async::Error::Server(s) if position::is_covered(s.code, &s.message) => {
                ApplyError::Lost(format!(
                    "not applied again: another commit (an earlier run's, or one whose reply was lost) recorded this work after the positions were read; {}",
                    s.message
                ))
            }
            mysql_async::Error::Server(s) => ApplyError::Sql {
                code: s.code,
                error: format!("ERROR {} ({}): {}", s.code, s.state, s.message),
                statement: statement.chars().take(300).collect(),
            },
            other => ApplyError::Lost(other.to_string()),
        }
    }
}

/// Why a transaction does not run on a Galera target (its stream stops).
const GALERA_REFUSAL: &str = "the target is a Galera node, which replicates InnoDB tables only: this transaction writes (or, as a statement, may write) a table that is not InnoDB (MyISAM, Aria, MEMORY ...), so the other nodes would silently differ; make the table InnoDB on the target, then `replicate retry`";

fn galera_refusal(txn: &Txn) -> ApplyError {
    ApplyError::Sql {
        code: 0,
        error: GALERA_REFUSAL.into(),
        statement: txn.first.clone(),
    }
}

/// A failed `BINLOG` statement named as a replica names it: the event,
/// its table, the server's error and the source position — never the
/// base64.
fn rows_error(e: ApplyError, rows: &crate::txn::Rows, txn: &Txn) -> ApplyError {
    match e {
        ApplyError::Sql { code, error, .. } => {
            let error = format!(
                "Could not execute {}; {error}; source binlog {} end_log_pos {}, GTID {}",
                rows.what, txn.file, txn.end_pos, txn.gtid
            );
            ApplyError::Sql {
                code,
                statement: rows.what.clone(),
                error,
            }
        }
        lost => lost,
    }
}

/// A target session ready for `BINLOG` statements.
/// Collation id → (character set, collation) names on the target.
pub type Collations = HashMap<u32, (String, String)>;

pub struct Applier {
    pub conn: Conn,
    /// Names of the collations user variables were logged with.
    collations: Collations,
    /// The format description last sent on this session.
    format: Option<Arc<Vec<u8>>>,
    /// The target is a node of a Galera cluster (wsrep_on): it
    /// replicates InnoDB rows only.
    pub galera: bool,
    /// The prepared `SET` of [`ROWS_VARS`], once per session.
    set_rows: Option<mysql_async::Statement>,
}

impl Applier {
    pub async fn open(target: &Target) -> Result<Applier, ApplyError> {
        let mut conn = target
            .connect(Duration::from_secs(10))
            .await
            .map_err(|e| ApplyError::Lost(e.to_string()))?;
        // No Annotate_rows on the target: it would copy the whole BINLOG
        // statement (megabytes of base64) before every table map in it
        // into the target's binlog — quadratic, 60 GB for a 60k-transaction
        // backlog before this line.
        let prelude =
            "SET @@session.pseudo_slave_mode = 1, @@session.binlog_annotate_row_events = 0";
        conn.query_drop(prelude)
            .await
            .map_err(|e| ApplyError::from_driver(e, prelude))?;
        let ask = "SHOW GLOBAL VARIABLES LIKE 'wsrep_on'";
        let wsrep: Option<(String, String)> = conn
            .query_first(ask)
            .await
            .map_err(|e| ApplyError::from_driver(e, ask))?;
        Ok(Applier {
            conn,
            collations: Collations::new(),
            format: None,
            set_rows: None,
            galera: wsrep.is_some_and(|(_, v)| v.eq_ignore_ascii_case("ON")),
        })
    }

    /// On a Galera target, refuses `items` of `txn` when they may write a
    /// table that is not InnoDB, as the target says now: Galera would
    /// leave those rows on this node alone. The paths outside the workers
    /// (transactions across databases, CREATE ... SELECT) ask here; the
    /// workers judge with the engines they keep.
    pub async fn galera_guard(&mut self, txn: &Txn, items: &[Item]) -> Result<(), ApplyError> {
        if !self.galera {
            return Ok(());
        }
        let read = Engines::read(&mut self.conn, 0, txn.dbs.iter().cloned().collect())
            .await
            .map_err(|e| ApplyError::from_driver(e, "reading the target's table engines"))?;
        let mut e = Engines::default();
        e.store(read);
        if e.no_rollback_in(&txn.dbs, items) {
            return Err(galera_refusal(txn));
        }
        Ok(())
    }

    async fn run(&mut self, sql: &str) -> Result<(), ApplyError> {
        self.conn
            .query_drop(sql)
            .await
            .map_err(|e| ApplyError::from_driver(e, sql))
    }

    /// One query of a batch: its rows into their variables first.
    async fn run_query(&mut self, q: &Query) -> Result<(), ApplyError> {
        if let Some(rows) = &q.rows {
            let set = format!("SET {} = ?, {} = ''", ROWS_VARS.0, ROWS_VARS.1);
            let stmt = match &self.set_rows {
                Some(s) => s.clone(),
                None => {
                    let s = self
                        .conn
                        .prep(&set)
                        .await
                        .map_err(|e| ApplyError::from_driver(e, &set))?;
                    self.set_rows = Some(s.clone());
                    s
                }
            };
            // The parameter is ASCII: read as binary, the server only
            // checks its bytes are 7-bit instead of walking it as
            // utf8mb4 (`Item_param::convert_str_value`: 7% of its CPU).
            self.run(CLIENT_BINARY).await?;
            self.conn
                .exec_drop(&stmt, (rows.as_bytes(),))
                .await
                .map_err(|e| ApplyError::from_driver(e, &set))?;
            let mut sql = UTF8_CLIENT.as_bytes().to_vec();
            sql.extend_from_slice(b"\n;\n");
            sql.extend_from_slice(&q.sql);
            return self.run_bytes(&sql).await;
        }
        self.run_bytes(&q.sql).await
    }

    async fn run_bytes(&mut self, sql: &[u8]) -> Result<(), ApplyError> {
        self.conn
            .query_drop(sql)
            .await
            .map_err(|e| ApplyError::from_driver(e, &String::from_utf8_lossy(sql)))
    }

    /// Looks up the names of collations the sessions' user variables use
    /// and this applier has not seen yet.
    pub async fn learn(&mut self, sessions: &[Session]) -> Result<(), ApplyError> {
        let want: std::collections::BTreeSet<u32> = sessions
            .iter()
            .flat_map(|s| s.user_vars.iter())
            .filter_map(|(_, v)| match v {
                VarValue::Str { collation, .. } => Some(*collation),
                _ => None,
            })
            .filter(|c| !self.collations.contains_key(c))
            .collect();
        if want.is_empty() {
            return Ok(());
        }
        let list = want
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let sql = format!(
            "SELECT ID, CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLLATIONS WHERE ID IN ({list})"
        );
        let rows: Vec<(u32, String, String)> = self
            .conn
            .query(&sql)
            .await
            .map_err(|e| ApplyError::from_driver(e, &sql))?;
        for (id, cs, coll) in rows {
            self.collations.insert(id, (cs, coll));
        }
        Ok(())
    }

    /// Sends the source's format description when this session has not
    /// seen it (a `BINLOG` of rows needs one first).
    pub async fn prime(&mut self, format: &Arc<Vec<u8>>) -> Result<(), ApplyError> {
        if self.format.as_ref().is_some_and(|f| f == format) {
            return Ok(());
        }
        self.run(&binlog_statement(format)).await?;
        self.format = Some(format.clone());
        Ok(())
    }

    /// Applies one transaction's items (inside the caller's transaction).
    pub async fn items(&mut self, txn: &Txn) -> Result<(), ApplyError> {
        self.items_from(txn, 0).await
    }

    /// Applies one transaction's items from the `skip`th on.
    pub async fn items_from(&mut self, txn: &Txn, skip: usize) -> Result<(), ApplyError> {
        for item in txn.items.iter().skip(skip) {
            match item {
                Item::Rows(rows) => {
                    for chunk in rows_chunks(&rows.bytes, CHUNK) {
                        let r = match self.run(&binlog_statement(&chunk)).await {
                            Err(
                                e @ ApplyError::Sql {
                                    code: sequence::ER_SEQUENCE_INVALID_DATA,
                                    ..
                                },
                            ) => self.with_sequences(&chunk, e).await,
                            r => r,
                        };
                        r.map_err(|e| rows_error(e, rows, txn))?;
                    }
                }
                Item::Stmt(s) => self.statement(s).await?,
            }
        }
        Ok(())
    }

    /// A piece whose `BINLOG` a sequence refused (`refused`): event by
    /// event, a sequence's partially logged row written whole (see
    /// [`sequence`]); `refused` stands when no event is one.
    async fn with_sequences(
        &mut self,
        piece: &[u8],
        refused: ApplyError,
    ) -> Result<(), ApplyError> {
        let Some((maps, rest)) = sequence::split(piece) else {
            return Err(refused);
        };
        if !rest
            .iter()
            .any(|e| sequence::partial_write(&maps, e).is_some())
        {
            return Err(refused);
        }
        let prefix: Vec<u8> = maps.concat();
        for e in rest {
            match sequence::partial_write(&maps, e) {
                Some(p) => self.write_sequence(&p).await?,
                None => {
                    let mut one = prefix.clone();
                    one.extend_from_slice(e);
                    self.run(&binlog_statement(&one)).await?;
                }
            }
        }
        Ok(())
    }

    /// The target's sequence row with the logged columns laid over it.
    async fn write_sequence(&mut self, p: &sequence::Partial) -> Result<(), ApplyError> {
        let q = format!("{}.{}", ident(&p.db), ident(&p.table));
        let read = format!("SELECT {} FROM {q}", sequence::COLUMNS.join(", "));
        let row: Option<mysql_async::Row> = self
            .conn
            .query_first(read.as_str())
            .await
            .map_err(|e| ApplyError::from_driver(e, &read))?;
        let Some(row) = row else {
            return Err(ApplyError::Sql {
                code: sequence::ER_SEQUENCE_INVALID_DATA,
                error: format!("sequence {q} has no row on the target"),
                statement: read,
            });
        };
        let mut vals = Vec::with_capacity(8);
        for i in 0..8 {
            let current = match row.as_ref(i) {
                Some(mysql_async::Value::Int(v)) => *v as u64,
                Some(mysql_async::Value::UInt(v)) => *v,
                Some(mysql_async::Value::Bytes(b)) => {
                    let t = String::from_utf8_lossy(b);
                    t.parse::<i64>()
                        .map(|v| v as u64)
                        .or_else(|_| t.parse::<u64>())
                        .map_err(|_| ApplyError::Sql {
                            code: sequence::ER_SEQUENCE_INVALID_DATA,
                            error: format!("sequence {q}: column {i} reads '{t}'"),
                            statement: read.clone(),
                        })?
                }
                other => {
                    return Err(ApplyError::Sql {
                        code: sequence::ER_SEQUENCE_INVALID_DATA,
                        error: format!("sequence {q}: column {i} reads {other:?}"),
                        statement: read,
                    })
                }
            };
            vals.push(p.literal(i, current));
        }
        self.run(&format!("INSERT INTO {q} VALUES ({})", vals.join(", ")))
            .await
    }

    /// A statement in its source session state.
    pub async fn statement(&mut self, s: &Stmt) -> Result<(), ApplyError> {
        self.learn(std::slice::from_ref(&s.session)).await?;
        if let Some(db) = &s.db {
            self.run(&use_sql(db)).await?;
        }
        self.run(&session_sql(&s.session, &self.collations)?)
            .await?;
        self.run_bytes(&s.sql).await
    }
}

/// Raw bytes per `BINLOG` statement, at most (base64 makes it 4/3 of
/// this): well under the default max_allowed_packet of 16 MiB.
const CHUNK: usize = 4 << 20;

/// Splits one statement's events (table maps first, then rows events)
/// into pieces of about `limit` bytes, each starting with every table map:
/// the server forgets table maps at the end of each `BINLOG` statement and
/// silently ignores rows events whose map it does not have.
pub fn rows_chunks(raw: &[u8], limit: usize) -> Vec<Vec<u8>> {
    let mut events = Vec::new();
    let mut p = 0;
    while p + event::HEADER_LEN <= raw.len() {
        let size = u32::from_le_bytes([raw[p + 9], raw[p + 10], raw[p + 11], raw[p + 12]]) as usize;
        if size < event::HEADER_LEN || p + size > raw.len() {
            // Not our own framing: send it whole, as it was.
            return vec![raw.to_vec()];
        }
        events.push(&raw[p..p + size]);
        p += size;
    }
    if p != raw.len() || raw.len() <= limit {
        return vec![raw.to_vec()];
    }
    let maps: Vec<u8> = events
        .iter()
        .take_while(|e| e[4] == 19)
        .flat_map(|e| e.iter().copied())
        .collect();
    let n_maps = events.iter().take_while(|e| e[4] == 19).count();
    let mut out = Vec::new();
    let mut cur = maps.clone();
    for e in &events[n_maps..] {
        if cur.len() > maps.len() && cur.len() + e.len() > limit {
            out.push(std::mem::replace(&mut cur, maps.clone()));
        }
        cur.extend_from_slice(e);
    }
    if cur.len() > maps.len() {
        out.push(cur);
    }
    out
}

/// `BINLOG '<base64>'` for raw events.
pub fn binlog_statement(raw: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(raw);
    format!("BINLOG '{b64}'")
}

const OPTION_AUTO_IS_NULL: u32 = 1 << 14;
const OPTION_NO_FOREIGN_KEY_CHECKS: u32 = 1 << 26;
const OPTION_RELAXED_UNIQUE_CHECKS: u32 = 1 << 27;

/// The default database of a statement, named as our own UTF-8 text: the
/// client character set is utf8mb4 while `USE` is read (a statement
/// replayed before may have left it at its own, e.g. latin1, which would
/// turn `café` into another name), then [`session_sql`] sets the
/// statement's own — the order a replica keeps (database, then the
/// event's character sets).
pub fn use_sql(db: &str) -> String {
    format!("{UTF8_CLIENT}\n;\nUSE {}", ident(db))
}

/// The `SET` that gives a session the source statement's state, user
/// variables included (a string in its character set and collation, as
/// logged; the collation's names from `names`).
pub fn session_sql(s: &Session, names: &Collations) -> Result<String, ApplyError> {
    let mut v = vec![
        format!("@@session.pseudo_thread_id = {}", s.thread_id),
        match s.timestamp_usec {
            Some(u) => format!("TIMESTAMP = {}.{u:06}", s.timestamp),
            None => format!("TIMESTAMP = {}", s.timestamp),
        },
    ];
    if let Some(f) = s.flags2 {
        v.push(format!(
            "@@session.foreign_key_checks = {}",
            u8::from(f & OPTION_NO_FOREIGN_KEY_CHECKS == 0)
        ));
        v.push(format!(
            "@@session.unique_checks = {}",
            u8::from(f & OPTION_RELAXED_UNIQUE_CHECKS == 0)
        ));
        v.push(format!(
            "@@session.sql_auto_is_null = {}",
            u8::from(f & OPTION_AUTO_IS_NULL != 0)
        ));
    }
    if let Some(m) = s.sql_mode {
        v.push(format!("@@session.sql_mode = {m}"));
    }
    if let Some((c, cc, cs)) = s.charset {
        v.push(format!("@@session.character_set_client = {c}"));
        v.push(format!("@@session.collation_connection = {cc}"));
        v.push(format!("@@session.collation_server = {cs}"));
    }
    if let Some(tz) = &s.time_zone {
        v.push(format!("@@session.time_zone = {}", literal(tz)));
    }
    if let Some(n) = s.lc_time_names {
        v.push(format!("@@session.lc_time_names = {n}"));
    }
    if let Some((inc, off)) = s.auto_increment {
        v.push(format!("@@session.auto_increment_increment = {inc}"));
        v.push(format!("@@session.auto_increment_offset = {off}"));
    }
    if let Some(i) = s.insert_id {
        v.push(format!("INSERT_ID = {i}"));
    }
    if let Some(i) = s.last_insert_id {
        v.push(format!("LAST_INSERT_ID = {i}"));
    }
    if let Some((a, b)) = s.rand {
        v.push(format!("@@RAND_SEED1 = {a}, @@RAND_SEED2 = {b}"));
    }
    for (name, value) in &s.user_vars {
        let lit = match value {
            VarValue::Null => "NULL".to_string(),
            VarValue::Int(i) => i.to_string(),
            VarValue::UInt(u) => u.to_string(),
            // Shortest exact round trip, in E notation: a DOUBLE literal.
            VarValue::Real(f) => format!("{f:E}"),
            VarValue::Decimal(d) => d.clone(),
            VarValue::Str { collation, bytes } => {
                let (cs, coll) = names.get(collation).ok_or_else(|| ApplyError::Sql {
                    code: 1273,
                    error: format!(
                        "user variable @{name}: collation id {collation} is unknown on the target"
                    ),
                    statement: String::new(),
                })?;
                let hex: String = bytes.iter().map(|b| format!("{b:02X}")).collect();
                format!("_{cs} X'{hex}' COLLATE {}", ident(coll))
            }
        };
        v.push(format!("@{} := {lit}", ident(name)));
    }
    Ok(format!("SET {}", v.join(", ")))
}

/// The position rows for transactions applied together (see
/// [`position::positions`]).
pub fn position_sql(done: &[(&str, &str, &Txn)]) -> Vec<String> {
    let rows: Vec<position::Applied> = done
        .iter()
        .map(|(source, stream, t)| position::Applied {
            source,
            stream,
            gtid: t.gtid,
            file: &t.file,
            end_pos: t.end_pos,
            time: t.timestamp,
        })
        .collect();
    position::positions(&rows)
}

impl Applier {
    /// The one way applied work becomes durable — the exactly-once rule:
    /// in the transaction the caller opened (and ran the items in), the
    /// position of every (source, stream) it applied, then `extra`
    /// statements on the position tables, then COMMIT. Rolled back on a
    /// server error, so nothing of it stays without its position. The
    /// one-trip batch ([`batch_queries`]) sends these same statements (the
    /// positions in its first query, COMMIT in its last); a chunk run
    /// ahead of its turn commits through here.
    pub async fn commit_with_positions(
        &mut self,
        done: &[(&str, &str, &Txn)],
        extra: &[String],
    ) -> Result<(), ApplyError> {
        // One query: the positions and COMMIT go in one round trip (the
        // server stops at a failing statement; COMMIT then never runs).
        let mut q: Vec<String> = position_sql(done);
        q.extend(extra.iter().cloned());
        q.push("COMMIT".into());
        sqlfleet_faults::point!("replicate::commit_before");
        let r = self.run(&q.join("\n;\n")).await;
        if r.is_err() {
            // Nothing of it stays (a guard's refusal leaves the
            // transaction open; a lost connection has none left).
            let _ = self.conn.query_drop("ROLLBACK").await;
        } else {
            sqlfleet_faults::point!("replicate::commit_after");
        }
        r
    }

    /// Applies a chunk's rows beside earlier open chunks: its own
    /// transaction left open, without positions (they commit in turn:
    /// [`Applier::commit_ahead`]).
    pub async fn run_ahead(&mut self, jobs: &[Job]) -> Result<(), ApplyError> {
        if let Some(f) = jobs.first().map(|j| &j.format) {
            self.prime(f).await?;
        }
        for q in batch_queries(jobs, &self.collations, false)? {
            self.run_query(&q).await?;
        }
        sqlfleet_faults::point!("replicate::ahead_applied");
        Ok(())
    }

    /// Commits a chunk run ahead, with its positions, in one query.
    pub async fn commit_ahead(&mut self, jobs: &[Job]) -> Result<(), ApplyError> {
        let done: Vec<(&str, &str, &Txn)> = jobs
            .iter()
            .map(|j| (&*j.source, j.stream.as_str(), &*j.txn))
            .collect();
        self.commit_with_positions(&done, &[]).await
    }

    /// Rolls the open transaction back; false when the connection is gone.
    pub async fn rollback(&mut self) -> bool {
        self.conn.query_drop("ROLLBACK").await.is_ok()
    }

    /// Opens the target transaction a commit with positions ends.
    pub async fn begin(&mut self) -> Result<(), ApplyError> {
        self.run("START TRANSACTION").await
    }
}

/// Bumped after every DDL the target applies: workers read again which
/// tables do not roll back.
pub type DdlGeneration = Arc<std::sync::atomic::AtomicU64>;

/// How a chunk of one stream's jobs ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkEnd {
    /// Every job committed with its position.
    Applied,
    /// The target refused one: the stream stops there (jobs before it in
    /// the chunk may have committed one by one).
    Failed,
    /// The connection failed: the source restarts from the positions.
    Lost,
    /// Not applied: its stream had stopped before it.
    Dropped,
}

/// Applies one stream's jobs in one target transaction (in turn: every
/// earlier job has committed); on an error, one by one to find the
/// culprit (not `alone` ones: they fail as they are). Replies for every
/// job.
pub async fn apply_chunk(
    applier: &mut Option<Applier>,
    target: &Target,
    live: &[Job],
    alone: bool,
) -> ChunkEnd {
    if live.is_empty() {
        return ChunkEnd::Applied;
    }
    if applier.is_none() {
        match Applier::open(target).await {
            Ok(a) => *applier = Some(a),
            Err(e) => {
                for j in live {
                    reply(j, Outcome::Lost { error: e.text() });
                }
                return ChunkEnd::Lost;
            }
        }
    }
    let Some(a) = applier.as_mut() else {
        return ChunkEnd::Lost;
    };
    if alone && a.galera {
        // Written on this node only, never on the others: the stream
        // stops rather than let the cluster's nodes differ.
        for j in live {
            reply(
                j,
                Outcome::Failed {
                    error: GALERA_REFUSAL.into(),
                    statement: j.txn.first.clone(),
                },
            );
        }
        return ChunkEnd::Failed;
    }
    let t0 = std::time::Instant::now();
    let r = apply_batch(a, live, true, !alone).await;
    tracing::debug!(
        jobs = live.len(),
        micros = t0.elapsed().as_micros() as u64,
        "batch"
    );
    match r {
        Ok(()) => {
            for j in live {
                reply(j, Outcome::Applied);
            }
            ChunkEnd::Applied
        }
        Err(ApplyError::Lost(e)) => {
            *applier = None;
            for j in live {
                reply(j, Outcome::Lost { error: e.clone() });
            }
            ChunkEnd::Lost
        }
        Err(ApplyError::Sql {
            error, statement, ..
        }) if alone => {
            for j in live {
                reply(
                    j,
                    Outcome::Failed {
                        error: error.clone(),
                        statement: statement.clone(),
                    },
                );
            }
            ChunkEnd::Failed
        }
        Err(ApplyError::Sql { .. }) => {
            // Find the failing transaction: one by one; after it, the
            // rest of the chunk is dropped (its stream stops there).
            let mut end = ChunkEnd::Applied;
            for j in live {
                if end != ChunkEnd::Applied {
                    reply(j, Outcome::Dropped);
                    continue;
                }
                let Some(a) = applier.as_mut() else {
                    reply(
                        j,
                        Outcome::Lost {
                            error: "connection lost".into(),
                        },
                    );
                    end = ChunkEnd::Lost;
                    continue;
                };
                match apply_batch(a, std::slice::from_ref(j), false, true).await {
                    Ok(()) => reply(j, Outcome::Applied),
                    Err(ApplyError::Sql {
                        error, statement, ..
                    }) => {
                        reply(j, Outcome::Failed { error, statement });
                        end = ChunkEnd::Failed;
                    }
                    Err(ApplyError::Lost(e)) => {
                        *applier = None;
                        reply(j, Outcome::Lost { error: e });
                        end = ChunkEnd::Lost;
                    }
                }
            }
            end
        }
    }
}

pub fn reply(j: &Job, outcome: Outcome) {
    let _ = j.reply.send(Done {
        generation: j.generation,
        idx: j.idx,
        stream: j.stream.clone(),
        gtid: j.txn.gtid,
        timestamp: j.txn.timestamp,
        outcome,
    });
}

/// Applies jobs in one target transaction with their positions; retries
/// deadlocks and lock wait timeouts.
async fn apply_batch(
    a: &mut Applier,
    jobs: &[Job],
    one_trip: bool,
    retry: bool,
) -> Result<(), ApplyError> {
    let mut tries = 0;
    loop {
        let r = if one_trip {
            try_batch_one_trip(a, jobs).await
        } else {
            try_batch(a, jobs).await
        };
        match &r {
            Err(ApplyError::Sql { code, .. }) if retry && RETRYABLE.contains(code) && tries < 5 => {
                let _ = a.run("ROLLBACK").await;
                tries += 1;
                tokio::time::sleep(Duration::from_millis(50 << tries)).await;
            }
            Err(ApplyError::Sql { .. }) => {
                a.run("ROLLBACK").await?;
                return r;
            }
            _ => return r,
        }
    }
}

/// The whole batch in few round trips: START TRANSACTION and the positions,
/// the rows of consecutive transactions merged into few `BINLOG`
/// statements, statements with their session, COMMIT — as multi-statement
/// queries. A `BINLOG` statement always ends its query: the server does not
/// flag further results after one (MariaDB 10.11 desynchronises the
/// protocol otherwise). On an error the server stops at the failing
/// statement (the COMMIT never runs); the caller rolls back and finds the
/// culprit statement by statement ([`try_batch`]).
async fn try_batch_one_trip(a: &mut Applier, jobs: &[Job]) -> Result<(), ApplyError> {
    if let Some(f) = jobs.first().map(|j| &j.format) {
        if jobs.iter().all(|j| j.format == *f) {
            a.prime(f).await?;
        } else {
            return try_batch(a, jobs).await;
        }
    }
    let sessions: Vec<Session> = jobs
        .iter()
        .flat_map(|j| j.txn.items.iter())
        .filter_map(|i| match i {
            Item::Stmt(st) if !st.session.user_vars.is_empty() => Some(st.session.clone()),
            _ => None,
        })
        .collect();
    a.learn(&sessions).await?;
    let queries = batch_queries(jobs, &a.collations, true)?;
    let last = queries.len().saturating_sub(1);
    for (i, q) in queries.iter().enumerate() {
        if i == last {
            // Rows and positions sent, the transaction open on the target.
            sqlfleet_faults::point!("replicate::batch_before_commit");
        }
        a.run_query(q).await?;
    }
    // Committed; its reply (and so the floor) not yet advanced.
    sqlfleet_faults::point!("replicate::batch_after_commit");
    Ok(())
}

/// One query of a batch: its text and, when it ends with a `BINLOG` of
/// rows, their base64 text, sent apart (see [`ROWS_VARS`]).
#[derive(Debug)]
pub struct Query {
    pub sql: Vec<u8>,
    pub rows: Option<String>,
}

/// The client character set around the rows' `SET` (see
/// [`Applier::run_query`]); our own text after it is read as utf8mb4 again.
const CLIENT_BINARY: &str = "SET @@session.character_set_client = binary";

/// The user variables a batch's rows reach the server in: set by a
/// prepared statement (its parameter is not parsed as SQL text), then
/// `BINLOG @a, @b` applies their concatenation and empties both. The
/// server's lexer otherwise scans every byte of a `BINLOG '<base64>'`
/// literal: about a tenth of the target's CPU on a row-heavy stream.
const ROWS_VARS: (&str, &str) = ("@`sqlfleet rows 0`", "@`sqlfleet rows 1`");

/// The queries of [`try_batch_one_trip`]; without `commit`, those of
/// [`Applier::run_ahead`]: no positions, no COMMIT.
pub fn batch_queries(
    jobs: &[Job],
    names: &Collations,
    commit: bool,
) -> Result<Vec<Query>, ApplyError> {
    let mut out: Vec<Query> = Vec::new();
    let mut q: Vec<u8> = b"START TRANSACTION".to_vec();
    let done: Vec<(&str, &str, &Txn)> = jobs
        .iter()
        .map(|j| (&*j.source, j.stream.as_str(), &*j.txn))
        .collect();
    if commit {
        for sql in position_sql(&done) {
            q.extend_from_slice(b"\n;\n");
            q.extend_from_slice(sql.as_bytes());
        }
    }
    let mut rows: Vec<u8> = Vec::new();
    let flush = |q: &mut Vec<u8>, rows: &mut Vec<u8>, out: &mut Vec<Query>| {
        if !rows.is_empty() {
            if !q.is_empty() {
                q.extend_from_slice(b"\n;\n");
            }
            q.extend_from_slice(format!("BINLOG {}, {}", ROWS_VARS.0, ROWS_VARS.1).as_bytes());
            out.push(Query {
                sql: std::mem::take(q),
                rows: Some(base64::engine::general_purpose::STANDARD.encode(&*rows)),
            });
            rows.clear();
        }
    };
    let next = |q: &mut Vec<u8>| {
        if !q.is_empty() {
            q.extend_from_slice(b"\n;\n");
        }
    };
    for j in jobs {
        for item in &j.txn.items {
            match item {
                Item::Rows(r) if r.bytes.len() > CHUNK => {
                    flush(&mut q, &mut rows, &mut out);
                    for chunk in rows_chunks(&r.bytes, CHUNK) {
                        rows.extend_from_slice(&chunk);
                        flush(&mut q, &mut rows, &mut out);
                    }
                }
                Item::Rows(r) => {
                    if rows.len() + r.bytes.len() > CHUNK {
                        flush(&mut q, &mut rows, &mut out);
                    }
                    rows.extend_from_slice(&r.bytes);
                }
                Item::Stmt(st) => {
                    flush(&mut q, &mut rows, &mut out);
                    next(&mut q);
                    if let Some(db) = &st.db {
                        q.extend_from_slice(use_sql(db).as_bytes());
                        q.extend_from_slice(b"\n;\n");
                    }
                    q.extend_from_slice(session_sql(&st.session, names)?.as_bytes());
                    q.extend_from_slice(b"\n;\n");
                    q.extend_from_slice(&st.sql);
                }
            }
        }
    }
    flush(&mut q, &mut rows, &mut out);
    if commit {
        next(&mut q);
        q.extend_from_slice(b"COMMIT");
    }
    if !q.is_empty() {
        out.push(Query { sql: q, rows: None });
    }
    Ok(out)
}

/// Statement by statement: slower, but an error names its statement.
async fn try_batch(a: &mut Applier, jobs: &[Job]) -> Result<(), ApplyError> {
    a.begin().await?;
    for j in jobs {
        a.prime(&j.format).await?;
        a.items(&j.txn).await?;
    }
    let done: Vec<(&str, &str, &Txn)> = jobs
        .iter()
        .map(|j| (&*j.source, j.stream.as_str(), &*j.txn))
        .collect();
    a.commit_with_positions(&done, &[]).await
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::fixtures::{ev, txn};

    #[test]
    fn big_statements_split_with_their_table_maps_in_every_piece() {
        let (m1, m2) = (ev(19, 40, 1), ev(19, 30, 2));
        let rows: Vec<Vec<u8>> = (0..10).map(|i| ev(23, 100, 10 + i)).collect();
        let mut raw = [m1.clone(), m2.clone()].concat();
        for r in &rows {
            raw.extend_from_slice(r);
        }
        let chunks = rows_chunks(&raw, 350);
        assert!(chunks.len() > 1);
        let maps = [m1, m2].concat();
        let mut rejoined = Vec::new();
        for c in &chunks {
            assert!(
                c.starts_with(&maps),
                "every piece starts with the table maps"
            );
            assert!(c.len() <= 350 || c.len() == maps.len() + 100);
            rejoined.extend_from_slice(&c[maps.len()..]);
        }
        assert_eq!(rejoined, rows.concat(), "every rows event once, in order");
        assert_eq!(rows_chunks(&raw, 1 << 20), vec![raw.clone()]);
        assert_eq!(
            rows_chunks(&raw[..raw.len() - 1], 100),
            vec![raw[..raw.len() - 1].to_vec()]
        );
    }

    /// A queued job of one transaction of `items` in database `db`.
    fn job(items: Vec<Item>) -> Job {
        let (tx, _rx) = mpsc::unbounded_channel();
        Job {
            source: Arc::from("s"),
            generation: 1,
            idx: 0,
            stream: "db".into(),
            txn: Arc::new(txn("db", items)),
            format: Arc::new(vec![]),
            reply: tx,
            budget: None,
        }
    }

    #[test]
    fn a_batch_ends_each_query_at_a_binlog_statement_and_commits_with_its_positions() {
        let rows = || {
            Item::Rows(crate::txn::Rows {
                bytes: [ev(19, 40, 1), ev(23, 60, 2)].concat(),
                what: "Write_rows event on table d.t".into(),
            })
        };
        let stmt = Item::Stmt(Stmt {
            db: Some("db".into()),
            sql: b"UPDATE t SET a = 1".to_vec(),
            session: Session::default(),
        });
        let jobs = vec![job(vec![rows(), rows()]), job(vec![stmt, rows()])];
        let qs = batch_queries(&jobs, &Collations::new(), true).expect("queries");
        let text: Vec<String> = qs
            .iter()
            .map(|q| String::from_utf8_lossy(&q.sql).into_owned())
            .collect();
        assert!(text[0].starts_with("START TRANSACTION"), "{text:?}");
        assert!(
            text[0].contains("replicate_position"),
            "positions in the same transaction"
        );
        assert_eq!(text.last().map(|t| t.ends_with("COMMIT")), Some(true));
        let binlog = format!("BINLOG {}, {}", ROWS_VARS.0, ROWS_VARS.1);
        for (q, t) in qs.iter().zip(&text) {
            let binlogs = t.matches("BINLOG").count();
            assert!(binlogs <= 1, "one BINLOG per query: {t}");
            assert_eq!(
                binlogs == 1,
                q.rows.is_some(),
                "rows go with their BINLOG: {t}"
            );
            if binlogs == 1 {
                assert!(t.ends_with(&binlog), "BINLOG ends its query: {t}");
            }
        }
        // Every rows event reaches the server once, in order, as base64
        // the server decodes (padded pieces joined are valid).
        let sent: Vec<u8> = qs
            .iter()
            .filter_map(|q| q.rows.as_ref())
            .flat_map(|b| {
                base64::engine::general_purpose::STANDARD
                    .decode(b)
                    .expect("base64")
            })
            .collect();
        let ev_all = [ev(19, 40, 1), ev(23, 60, 2)].concat();
        assert_eq!(sent, [ev_all.clone(), ev_all.clone(), ev_all].concat());
        // The two transactions' first rows merge into one BINLOG; the
        // statement splits them.
        assert_eq!(
            text.iter().filter(|t| t.contains("BINLOG")).count(),
            2,
            "{text:?}"
        );
        assert!(text.iter().any(
            |t| t.contains("USE `db`\n;\nSET @@session.pseudo_thread_id")
                && t.contains("\n;\nUPDATE t SET a = 1")
        ));
    }

    #[test]
    fn a_chunk_run_ahead_leaves_positions_and_commit_to_its_turn() {
        let rows = Item::Rows(crate::txn::Rows {
            bytes: [ev(19, 40, 1), ev(23, 60, 2)].concat(),
            what: "Write_rows event on table d.t".into(),
        });
        let qs = batch_queries(&[job(vec![rows])], &Collations::new(), false).expect("queries");
        let text: Vec<String> = qs
            .iter()
            .map(|q| String::from_utf8_lossy(&q.sql).into_owned())
            .collect();
        assert!(text[0].starts_with("START TRANSACTION"), "{text:?}");
        assert!(
            text.iter().all(|t| !t.contains("replicate_position")),
            "{text:?}"
        );
        assert!(text.iter().all(|t| !t.contains("COMMIT")), "{text:?}");
        assert_eq!(text.len(), 1, "{text:?}");
    }

    #[test]
    fn user_variables_become_exact_literals() {
        let mut names = Collations::new();
        names.insert(8, ("latin1".into(), "latin1_swedish_ci".into()));
        let s = Session {
            user_vars: vec![
                ("n".into(), VarValue::Null),
                ("i".into(), VarValue::Int(-42)),
                ("u".into(), VarValue::UInt(u64::MAX)),
                ("r".into(), VarValue::Real(0.1)),
                ("d".into(), VarValue::Decimal("123.4567890123".into())),
                (
                    "l".into(),
                    VarValue::Str {
                        collation: 8,
                        bytes: vec![0xE7, b'a'],
                    },
                ),
            ],
            ..Session::default()
        };
        let sql = session_sql(&s, &names).expect("sql");
        for want in [
            "@`n` := NULL",
            "@`i` := -42",
            "@`u` := 18446744073709551615",
            "@`r` := 1E-1",
            "@`d` := 123.4567890123",
            "@`l` := _latin1 X'E761' COLLATE `latin1_swedish_ci`",
        ] {
            assert!(sql.contains(want), "{sql} lacks {want}");
        }
        names.clear();
        assert!(
            session_sql(&s, &names).is_err(),
            "an unknown collation is an error, not a guess"
        );
    }

    #[test]
    fn the_session_set_names_every_state_the_source_had() {
        let s = Session {
            timestamp: 1_700_000_000,
            thread_id: 9,
            flags2: Some(OPTION_NO_FOREIGN_KEY_CHECKS),
            sql_mode: Some(1_411_383_296),
            charset: Some((33, 33, 45)),
            time_zone: Some("+02:00".into()),
            insert_id: Some(5),
            ..Session::default()
        };
        let sql = session_sql(&s, &Collations::new()).expect("sql");
        for want in [
            "pseudo_thread_id = 9",
            "TIMESTAMP = 1700000000",
            "foreign_key_checks = 0",
            "unique_checks = 1",
            "sql_mode = 1411383296",
            "collation_server = 45",
            "time_zone = '+02:00'",
            "INSERT_ID = 5",
        ] {
            assert!(sql.contains(want), "{sql} lacks {want}");
        }
    }
}

//! Applying transactions on the target: one connection per worker, each
//! stream (source, database) always on the same worker so its order is
//! the source's, several source transactions per target commit, and the
//! stream positions written in that same commit. The SQL it sends is
//! built in batch_sql.rs; a chunk is driven to its end in chunk.rs.
//!
//! Row events go through `BINLOG '<base64>'` (the target's own row
//! applier, as `mariadb-binlog | mariadb` does); statements run as text in
//! the session state the source ran them in.

use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use sqlfleet_conn::quote::{ident, UTF8_CLIENT};
use sqlfleet_conn::Target;

mod recover;
pub(crate) use recover::{already_done, created};

use crate::batch_sql::{
    batch_queries, binlog_statement, merged_in, position_sql, rows_chunks, session_sql,
    stmt_use_sql, Query, CHUNK, CLIENT_BINARY, ROWS_VARS,
};
use crate::engines::Engines;
use crate::sequence;
use crate::txn::{Item, Session, SourceEnd, Stmt, Txn, VarValue};
use crate::work::{ApplyError, Collations, Job};

/// "Found a row not matching the given partition set": the code a
/// LOAD DATA into a partitioned table stops with when the source's
/// partition clause may be lost (`Applier::unpartitioned`).
const ER_ROW_DOES_NOT_MATCH_GIVEN_PARTITION_SET: u16 = 1748;

/// Why a transaction does not run on a Galera target (its stream stops).
pub(crate) const GALERA_REFUSAL: &str = "the target is a Galera node, which replicates InnoDB tables only: this transaction writes (or, as a statement, may write) a table that is not InnoDB (MyISAM, Aria, MEMORY ...), so the other nodes would silently differ; make the table InnoDB on the target, then `replicate retry`";

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
pub struct Applier {
    conn: Conn,
    /// Names of the collations user variables were logged with.
    pub(crate) collations: Collations,
    /// The format description last sent on this session.
    format: Option<Arc<Vec<u8>>>,
    /// The target is a node of a Galera cluster (wsrep_on): it
    /// replicates InnoDB rows only.
    pub galera: bool,
    /// The prepared `SET` of [`ROWS_VARS`], once per session.
    set_rows: Option<mysql_async::Statement>,
    /// Source rows statements the last batch applied in full on this
    /// session sent merged into another (merge.rs); 0 after a batch run
    /// statement by statement. The caller takes it once the chunk is done.
    pub merged: u64,
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
            merged: 0,
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
        let read = self.engines(0, txn.dbs.iter().cloned().collect()).await?;
        let mut e = Engines::default();
        e.store(read);
        if e.no_rollback_in(&txn.dbs, items) {
            return Err(galera_refusal(txn));
        }
        Ok(())
    }

    pub(crate) async fn run(&mut self, sql: &str) -> Result<(), ApplyError> {
        self.conn
            .query_drop(sql)
            .await
            .map_err(|e| ApplyError::from_driver(e, sql))
    }

    /// One query of a batch: its rows into their variables first.
    pub(crate) async fn run_query(&mut self, q: &Query) -> Result<(), ApplyError> {
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

    /// Applies one transaction's items inside the caller's transaction and
    /// ends them as the source did: one the source rolled back is rolled
    /// back here too (what a ROLLBACK does not undo stays, as on the
    /// source and on a native replica), and a new transaction is opened
    /// for the caller's positions. The caller's transaction must hold
    /// nothing else.
    pub async fn items_as_ended(&mut self, txn: &Txn) -> Result<(), ApplyError> {
        self.items(txn).await?;
        if txn.rolled_back {
            self.run("ROLLBACK").await?;
            self.begin().await?;
        }
        Ok(())
    }

    /// Applies one transaction's items from the `skip`th on.
    pub async fn items_from(&mut self, txn: &Txn, skip: usize) -> Result<(), ApplyError> {
        for item in txn.items.iter().skip(skip) {
            match item {
                Item::Rows(rows) => {
                    for chunk in rows_chunks(&rows.bytes, CHUNK) {
                        let r = match self.run(&binlog_statement(&chunk)).await {
                            Err(e @ ApplyError::Sql { code, .. }) if sequence::refusal(code) => {
                                self.with_sequences(&chunk, e).await
                            }
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
        self.run(&stmt_use_sql(s)).await?;
        self.run(&session_sql(&s.session, &self.collations)?)
            .await?;
        if let Some(file) = &s.infile {
            // A LOAD DATA logged as a statement: its `LOCAL INFILE` reads
            // the file the binlog carried, in pieces of 1 MiB.
            let pieces: Vec<bytes::Bytes> = file
                .chunks(1 << 20)
                .map(bytes::Bytes::copy_from_slice)
                .collect();
            self.conn.set_infile_handler(async move {
                use futures_util::StreamExt;
                Ok(futures_util::stream::iter(pieces.into_iter().map(Ok)).boxed())
            });
        }
        let shown = || String::from_utf8_lossy(&s.sql[..s.sql.len().min(200)]).into_owned();
        if s.expect == Some(SourceEnd::Ignoring) {
            self.unpartitioned(&s.sql, &shown()).await?;
        }
        match (self.run_bytes(&s.sql).await, s.expect) {
            (r, None) => r,
            // The source's own end: as there.
            (Err(ApplyError::Sql { code, .. }), Some(SourceEnd::Error(want))) if code == want => Ok(()),
            (Ok(()), Some(SourceEnd::DropOfSomeGone)) => Ok(()),
            (Ok(()), Some(SourceEnd::NoDuplicateKey)) => self.no_duplicate_met(&shown()).await,
            (Err(ApplyError::Sql { code, .. }), Some(SourceEnd::DropOfSomeGone))
                if sqlfleet_conn::codes::GONE.contains(&code) =>
            {
                Ok(())
            }
            (Err(ApplyError::Sql { code, error, statement }), Some(SourceEnd::Error(want))) => Err(ApplyError::Sql {
                code,
                error: format!("{error} (the source ended this statement with error {want}, the target with {code}: they differ)"),
                statement,
            }),
            (Ok(()), Some(SourceEnd::Error(want))) => Err(ApplyError::Sql {
                code: want,
                error: format!(
                    "the source ended this statement with error {want} (and logged it: it had done part of its work there), the target with none: the two differ here"
                ),
                statement: shown(),
            }),
            (lost, Some(_)) => lost,
        }
    }
}

impl Applier {
    /// Before a LOAD DATA with IGNORE (or LOCAL) logged as a statement:
    /// its table must not be partitioned on the target, since a
    /// `PARTITION (...)` the source's statement named (rows outside it
    /// passed over there) is not in the logged text
    /// ([`SourceEnd::Ignoring`]). Asked of the server, in the session's
    /// default database when the text names none.
    async fn unpartitioned(&mut self, sql: &[u8], statement: &str) -> Result<(), ApplyError> {
        let refuse = |why: String| ApplyError::Sql {
            code: ER_ROW_DOES_NOT_MATCH_GIVEN_PARTITION_SET,
            error: why,
            statement: statement.to_string(),
        };
        let Some((db, table)) = crate::load_query::table_of(sql) else {
            return Err(refuse(
                "cannot read which table this LOAD DATA loads into, to check that the target does not partition it".into(),
            ));
        };
        let (Ok(db), Ok(table)) = (
            db.map(String::from_utf8).transpose(),
            String::from_utf8(table),
        ) else {
            return Err(refuse(
                "this LOAD DATA's table is named in bytes that are not UTF-8: cannot check that the target does not partition it".into(),
            ));
        };
        let check = "SELECT COUNT(*) FROM information_schema.PARTITIONS \
                     WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? \
                     AND PARTITION_NAME IS NOT NULL";
        let parts: Option<i64> = self
            .conn
            .exec_first(check, (db, table.as_str()))
            .await
            .map_err(|e| ApplyError::from_driver(e, check))?;
        match parts {
            Some(0) => Ok(()),
            _ => Err(refuse(format!(
                "a LOAD DATA with IGNORE (or LOCAL) into `{table}`, which is partitioned: the source's statement may have named partitions (rows outside them passed over there), and the server leaves that clause out of the logged text, so what it loaded cannot be told (a native replica loads every row); load what the source loaded by hand and skip this transaction — a LOAD DATA under row-based logging replicates"
            ))),
        }
    }

    /// After a LOAD DATA given as LOCAL INFILE that met no duplicate key on
    /// the source: a duplicate the target took for a warning is the copy
    /// differing from the source, which stops the stream (a native replica
    /// stops at the error there).
    async fn no_duplicate_met(&mut self, statement: &str) -> Result<(), ApplyError> {
        if self.conn.get_warnings() == 0 {
            return Ok(());
        }
        let warnings: Vec<(String, u16, String)> = self
            .conn
            .query("SHOW WARNINGS")
            .await
            .map_err(|e| ApplyError::from_driver(e, "SHOW WARNINGS"))?;
        match warnings
            .iter()
            .find(|w| w.1 == sqlfleet_conn::codes::DUPLICATE_KEY)
        {
            None => Ok(()),
            Some((_, code, text)) => Err(ApplyError::Sql {
                code: *code,
                error: format!(
                    "the source's LOAD DATA met no duplicate key (one would have stopped it), the target's met one ({text}): the copy differs from the source here"
                ),
                statement: statement.to_string(),
            }),
        }
    }

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
        let queries = batch_queries(jobs, &self.collations, false)?;
        for q in &queries {
            self.run_query(q).await?;
        }
        self.merged = merged_in(&queries);
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

    /// `source`'s position rows, on this connection.
    pub fn book<'a>(&'a mut self, source: &'a str) -> crate::position::Book<'a> {
        crate::position::Book::new(&mut self.conn, source)
    }

    /// Takes the target-wide lock that lets one process replicate
    /// `source` (held as long as this connection), waiting up to `wait`
    /// seconds. The inner Err says who holds it instead.
    pub async fn lock_source(
        &mut self,
        source: &str,
        wait: u32,
    ) -> Result<Result<(), String>, ApplyError> {
        crate::position::lock_source(&mut self.conn, source, wait)
            .await
            .map_err(|e| ApplyError::Lost(e.to_string()))
    }

    /// The target's table engines in `dbs`, as the workers keep them.
    /// Marks `txn`, which writes tables a ROLLBACK does not undo, as
    /// started on each of `streams` (autocommitted, before its first
    /// write; position.rs, `replicate_nontx`).
    pub async fn mark_nontx<'s>(
        &mut self,
        source: &str,
        streams: impl IntoIterator<Item = &'s str>,
        txn: &Txn,
    ) -> Result<(), ApplyError> {
        for stream in streams {
            self.book(source)
                .mark_nontx(stream, &txn.gtid, &txn.first)
                .await
                .map_err(|e| ApplyError::from_driver(e, "REPLACE INTO sqlfleet.replicate_nontx"))?;
        }
        Ok(())
    }

    pub async fn engines(
        &mut self,
        generation: u64,
        dbs: Vec<String>,
    ) -> Result<crate::engines::Read, ApplyError> {
        Engines::read(&mut self.conn, generation, dbs)
            .await
            .map_err(|e| ApplyError::from_driver(e, "reading the target's table engines"))
    }

    /// Warnings naming `source`'s MEMORY tables when the target started
    /// again since its last session (target_start.rs).
    pub async fn target_restarted(&mut self, source: &crate::config::Source) -> Vec<String> {
        match self
            .conn
            .query::<String, _>("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA")
            .await
        {
            Ok(dbs) => crate::target_start::check(&mut self.conn, &[source], &dbs).await,
            Err(e) => vec![format!("reading the target's databases: {e}")],
        }
    }

    /// The session, for tests that drive it by hand.
    #[cfg(test)]
    pub(crate) fn conn(&mut self) -> &mut Conn {
        &mut self.conn
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

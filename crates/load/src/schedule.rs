//! The scheduler: walks the dump in order and decides what may overlap.
//!
//! Three regimes, chosen so that the result is always that of the stock
//! client running the file on one connection:
//!
//! - **parallel** (mysqldump/mariadb-dump files): session statements
//!   (`SET`, `USE`) extend the prelude every connection replays; plain
//!   INSERTs are grouped into batches of one table and handed to workers;
//!   DDL and triggers on a table wait for that table's batches, then run
//!   in dump order on the scheduler's own connection; everything else
//!   (databases, views, routines, statements that read other tables) is a
//!   barrier that waits for all work in flight and runs alone.
//!   `LOCK TABLES` and `DISABLE/ENABLE KEYS` hints are skipped.
//! - **ordered** (any other .sql file): the same batches and journal, but
//!   everything runs in file order on the scheduler's connection, so
//!   `LAST_INSERT_ID()` and friends see what they would.
//! - **stateful**: from the first statement that needs one connection's
//!   state (user variables, temporary tables, transaction control,
//!   prepared statements, CALL, LAST_INSERT_ID after parallel work is
//!   refused), everything runs as written on the scheduler's connection,
//!   after the work in flight. Such a load cannot be resumed exactly; the
//!   journal says so and `--resume` refuses it.
//!
//! Batches into non-transactional tables (MyISAM, Aria; asked of the
//! server) never take a path that needs a rollback (see `worker`).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use mysql_async::prelude::Queryable;
use sqlfleet_conn::quote::{ident, literal};
use sqlfleet_dump::classify::{database_named, is_drop_table, reruns_harmlessly};
use sqlfleet_dump::inspect::{generates_ids, sets_autocommit_off, Traits};
use sqlfleet_dump::{Kind, Statement, TableRef};
use tokio::sync::oneshot;

use crate::defer;
use crate::error::StatementFailure;
use crate::identity::ChainValue;
use crate::job::{Job, Work};
use crate::journal::{self, Record, Resume};
use crate::placement;
use crate::queue::JobQueue;
use crate::retry::{self, needs_reconnect, ALREADY_DONE};
use crate::session::SessionConn;
use crate::source::Item;
use crate::state::Ctx;
use crate::worker;

type Key = (Option<String>, String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Regime {
    Parallel,
    Ordered,
    Stateful,
}

pub struct Scheduler {
    pub ctx: Arc<Ctx>,
    pub queue: Arc<JobQueue>,
    /// The scheduler's own connection (DDL, barriers, ordered work).
    pub control: Option<SessionConn>,
    /// The connection that holds the load's lock; journal bookkeeping
    /// that must not join a transaction of the file's.
    pub bookkeeping: mysql_async::Conn,
    pub resume: Resume,
    pub batch_bytes: usize,
    pub defer_indexes: bool,
    /// Drop each table before its CREATE TABLE (`--overwrite-tables`).
    pub overwrite_tables: bool,
    /// The database -D named, for a dump (mysqldump, mariadb-dump): one
    /// that creates, alters, drops or goes to another stops there.
    pub named_database: Option<String>,
    /// The server takes database names without regard to ASCII case
    /// (lower_case_table_names 1 or 2): `-D Shop` and `USE shop` are one.
    pub names_fold: bool,
    pub warnings: Vec<String>,
    pub skipped: u64,
    pub tables: std::collections::BTreeSet<String>,
    pub regime: Regime,
    /// Why a resumed run cannot go on exactly (with `--restart` as the
    /// way on); set once, and the load stops before the statement.
    pub refused: Option<String>,
    /// The journal's first writes, until the load's first statement has
    /// run (`journal::Begin`); `None` once written (or for a resume).
    pub begin: Option<journal::Begin>,
    cur_db: Option<String>,
    batch: Option<Batch>,
    inflight: HashMap<Key, Vec<oneshot::Receiver<()>>>,
    /// Tables known to have no AUTO_INCREMENT column (from their CREATE).
    no_auto_inc: std::collections::HashSet<Key>,
    /// Engine and AUTO_INCREMENT column, as the server says.
    info: HashMap<Key, TableInfo>,
    deferred: HashMap<Key, Deferred>,
    /// Some batch went to a worker (another connection).
    workers_used: bool,
    own_schema_noticed: bool,
    /// Tables whose rows fire a trigger (this load's or the target's) or
    /// take values of several sequences by column defaults: they load in
    /// file order on the scheduler's connection (what the trigger writes
    /// elsewhere, e.g. AUTO_INCREMENT ids, and which row gets which
    /// sequence value depend on the order). A batch leaving one
    /// `DEFAULT NEXTVAL(...)` column to its default does too (`flush`).
    triggered: std::collections::HashSet<Key>,
}

struct Batch {
    key: Key,
    stmts: Vec<Statement>,
    bytes: usize,
    /// The statement chain after each statement.
    chains: Vec<ChainValue>,
    /// The order of rows with equal keys matters (IGNORE, REPLACE, ...).
    ordered: bool,
}

#[derive(Clone)]
struct TableInfo {
    transactional: bool,
    /// The engine as the server names it, upper-cased ("" when unknown).
    engine: String,
    /// Rows are kept in insertion order (MyISAM/Aria heaps, InnoDB without
    /// a primary key), which a later SELECT without ORDER BY shows: its
    /// batches go one at a time in file order.
    heap_order: bool,
    /// The AUTO_INCREMENT column: position among the columns, name.
    auto_inc: Option<(usize, String)>,
    /// The one column whose default takes a sequence's next value:
    /// position, name. A batch that leaves it to the default loads inline.
    sequenced: Option<(usize, String)>,
}

struct Deferred {
    keys: Vec<String>,
    record: (u64, u64, u64),
    prelude_len: usize,
}

impl Scheduler {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        ctx: Arc<Ctx>,
        queue: Arc<JobQueue>,
        control: SessionConn,
        bookkeeping: mysql_async::Conn,
        resume: Resume,
        batch_bytes: usize,
        defer_indexes: bool,
        database: Option<String>,
        regime: Regime,
    ) -> Scheduler {
        Scheduler {
            ctx,
            queue,
            control: Some(control),
            bookkeeping,
            resume,
            batch_bytes,
            defer_indexes,
            overwrite_tables: false,
            named_database: None,
            names_fold: false,
            begin: None,
            warnings: Vec::new(),
            skipped: 0,
            tables: Default::default(),
            regime,
            refused: None,
            cur_db: database,
            batch: None,
            inflight: HashMap::new(),
            no_auto_inc: Default::default(),
            info: HashMap::new(),
            deferred: HashMap::new(),
            workers_used: false,
            own_schema_noticed: false,
            triggered: Default::default(),
        }
    }

    fn key(&self, t: &TableRef) -> Key {
        (t.db.clone().or_else(|| self.cur_db.clone()), t.name.clone())
    }

    fn show(key: &Key) -> String {
        match &key.0 {
            Some(db) => format!("{}.{}", ident(db), ident(&key.1)),
            None => ident(&key.1),
        }
    }

    /// Statements on the journal's own schema (a dump of a server that
    /// was itself loaded with sqlfleet) are skipped: they would drop the
    /// live journal.
    fn on_own_schema(&mut self, stmt: &Statement, kind: &Kind) -> bool {
        let own = |db: Option<&str>| db == Some(journal::SCHEMA);
        let hit = match kind {
            Kind::Use(db) => own(Some(db)),
            Kind::Session | Kind::Hint => false,
            Kind::Barrier => {
                own(database_named(&stmt.text).as_deref()) || own(self.cur_db.as_deref())
            }
            other => other.table().is_some_and(|t| own(self.key(t).0.as_deref())),
        };
        if hit && !self.own_schema_noticed {
            self.own_schema_noticed = true;
            self.warn(format!(
                "line {}: the dump contains the `{}` schema (sqlfleet's own load journal, from a server loaded with sqlfleet); its statements are skipped",
                stmt.line,
                journal::SCHEMA
            ));
        }
        hit
    }

    /// Why a dump's statement is refused when -D named a database: the
    /// dump creates, alters, drops or goes to (`USE`) another one — as dumps made
    /// with `--databases` or `--all-databases` do. The mysql client would
    /// follow the dump there (its USE wins over -D), and with the dump's
    /// DROP TABLE statements replace that database's tables, which a user
    /// who named another database did not mean; myloader's -B (and this
    /// loader's -D for a mydumper directory) would load into the named
    /// one. A doubt stops, before the statement runs.
    fn elsewhere(&self, stmt: &Statement, kind: &Kind) -> Option<String> {
        let named = self.named_database.as_deref()?;
        let other = match kind {
            Kind::Use(db) => db.clone(),
            Kind::Barrier => database_named(&stmt.text)?,
            _ => return None,
        };
        if same_database(&other, named, self.names_fold) {
            return None;
        }
        Some(format!(
            "this statement of the dump acts on database {o} while -D named {n}: the mysql client would run it there (a dump's USE wins over -D), replacing or changing what {o} holds; to load the dump where it says, leave -D out; to load one database into {n}, dump it alone (mariadb-dump DB, without --databases; an ALTER DATABASE that mariadb-dump writes around routines of another collation names the dumped database even then: load into a database of that name)",
            o = ident(&other),
            n = ident(named),
        ))
    }

    /// Why this statement needs the one connection the file would run
    /// on, if it does.
    fn needs_one_connection(&self, kind: &Kind, t: &Traits, stmt: &Statement) -> Option<String> {
        if let Some(f) = t.previous_result {
            return Some(format!(
                "{f} (the previous statement's result on this connection)"
            ));
        }
        if let Some(why) = t.session_state {
            return Some(why.to_string());
        }
        if t.temporary {
            return Some("a temporary table".into());
        }
        match kind {
            Kind::Session if t.reads_tables => Some("a SET computed from a query".into()),
            Kind::Session
                if self.regime == Regime::Ordered && sets_autocommit_off(&stmt.scan_text()) =>
            {
                Some("SET autocommit=0 (a transaction the file ends itself)".into())
            }
            Kind::Session | Kind::Use(_) | Kind::Hint => None,
            _ if t.user_vars => Some("a user variable".into()),
            _ => None,
        }
    }

    /// Handles one statement of the dump, in order. Errors are recorded
    /// in the shared failure slot.
    pub async fn feed(&mut self, item: Item) {
        let Item {
            stmt,
            kind,
            traits,
            chain,
        } = item;
        if self.ctx.shared.stopped() || self.refused.is_some() {
            return;
        }
        if self.on_own_schema(&stmt, &kind) {
            if let Kind::Use(db) = kind {
                self.cur_db = Some(db);
            }
            return;
        }
        if matches!(kind, Kind::Session | Kind::Use(_) | Kind::Hint) {
            self.applied(&stmt);
        }
        if !matches!(kind, Kind::Session | Kind::Use(_) | Kind::Hint)
            && self.resume.ranges.contains(stmt.offset)
        {
            self.skipped += 1;
            self.applied(&stmt);
            if let Kind::TableDdl { table, create } = &kind {
                let shown = Self::show(&self.key(table));
                if *create {
                    self.tables.insert(shown);
                } else if is_drop_table(&stmt.text) {
                    self.tables.remove(&shown);
                }
            }
            return;
        }
        if let Some(why) = self.elsewhere(&stmt, &kind) {
            self.ctx.shared.fail(StatementFailure {
                code: None,
                message: why,
                ..StatementFailure::of_text(&stmt, None)
            });
            return;
        }
        if let Some(name) = unreadable_name(&kind) {
            // A latin1 `café`, an sjis `テ`: the loader keeps names as
            // UTF-8 to ask the server about a table (its engine, triggers,
            // AUTO_INCREMENT decide how its rows load safely) and to
            // journal it; it stops here rather than load under a guess
            // (before: such a table was handled as a transactional one
            // with no triggers, and in sjis the load stopped at the
            // journal's "Illegal mix of collations").
            self.ctx.shared.fail(StatementFailure {
                code: None,
                message: format!(
                    "the name {name} is not UTF-8 text as this file is read (--default-character-set {}): sqlfleet keeps database and table names as UTF-8 to ask the server about a table and to journal it, and cannot for this one; nothing of this statement was sent. Convert the file to UTF-8 first (iconv, then --default-character-set=utf8mb4 and its SET NAMES), or load it with the mysql client",
                    self.ctx.target.charset.as_deref().unwrap_or("utf8mb4")
                ),
                ..StatementFailure::of_text(&stmt, None)
            });
            return;
        }
        if let Some(why) = self
            .ctx
            .max_packet
            .and_then(|m| over_packet(stmt.text.len(), m))
        {
            // The server would refuse it and end the connection (the
            // client saw "Connection reset by peer"): said before it goes.
            self.ctx.shared.fail(StatementFailure {
                code: Some(1153),
                message: why,
                ..StatementFailure::of_text(&stmt, None)
            });
            return;
        }
        if let (Some(c), Kind::TableDdl { .. } | Kind::Barrier) = (&self.ctx.galera, &kind) {
            // Input read once (standard input) was not checked before the
            // load: the statement stops here, before it runs.
            if let Some(f) = crate::galera::check(&stmt.scan_text(), stmt.line, c) {
                self.ctx.shared.fail(StatementFailure {
                    code: None,
                    message: crate::galera::message(c, &[f]),
                    ..StatementFailure::of_text(&stmt, None)
                });
                return;
            }
        }
        if self.regime != Regime::Stateful {
            if let Some(why) = self.needs_one_connection(&kind, &traits, &stmt) {
                if let (Some(f), true) = (traits.previous_result, self.skipped > 0) {
                    self.refuse_resume(&stmt, f).await;
                    return;
                }
                if traits.previous_result.is_some() && self.workers_used {
                    self.ctx.shared.fail(StatementFailure {
                        code: None,
                        message: format!(
                            "this statement uses {why}, but the statements before it were loaded in parallel on other connections, so it would not see what the stock client's would: load this file with --serial"
                        ),
                        ..StatementFailure::of_text(&stmt, None)
                    });
                    return;
                }
                self.enter_stateful(&stmt, &why).await;
            }
        }
        if self.regime == Regime::Stateful {
            self.feed_stateful(stmt, kind).await;
        } else {
            self.feed_journaled(stmt, kind, traits, chain).await;
        }
    }

    /// A resumed run reached a statement that reads what an earlier one
    /// left on the connection (`LAST_INSERT_ID()`, `ROW_COUNT()`,
    /// `FOUND_ROWS()`, `ROLLBACK`), and earlier statements ran in the
    /// interrupted load, on a connection that is gone: this one would read
    /// 0 or nothing where the stock client read the value. Refused, and
    /// recorded so that the next `--resume` refuses before anything runs.
    async fn refuse_resume(&mut self, stmt: &Statement, f: &str) {
        let why = format!("{f} (what an earlier statement left on the connection)");
        let _ =
            journal::mark_stateful(&mut self.bookkeeping, &self.ctx.load_id, stmt.line, &why).await;
        self.refused = Some(format!(
            "line {}: {f} reads what an earlier statement left on the connection, and statements before it ran in the interrupted load, on a connection that is gone: this load cannot be resumed exactly; restore the target and load with --restart",
            stmt.line
        ));
    }

    /// From here on, everything runs as written on the scheduler's
    /// connection, after the work in flight.
    async fn enter_stateful(&mut self, stmt: &Statement, why: &str) {
        // The batch not yet sent runs as written too (so ROW_COUNT() and
        // the like after it see its last statement).
        let pending = self.batch.take();
        self.start_all_deferred().await;
        self.wait_all().await;
        self.regime = Regime::Stateful;
        self.warn(format!(
            "line {}: {why} ties the rest of this file to one connection: it runs in order on one connection from here, and this load cannot be resumed after an interruption (--restart instead)",
            stmt.line
        ));
        if !self.begin(stmt).await {
            return;
        }
        if let Err(e) =
            journal::mark_stateful(&mut self.bookkeeping, &self.ctx.load_id, stmt.line, why).await
        {
            self.ctx
                .shared
                .fail(StatementFailure::of_journal(stmt, None, &e));
            return;
        }
        if let Some(b) = pending {
            let table = Self::show(&b.key);
            for s in b.stmts {
                self.execute(&s, Some(&table), None, None).await;
            }
        }
    }

    async fn feed_stateful(&mut self, stmt: Statement, kind: Kind) {
        match kind {
            Kind::Hint => {}
            Kind::Use(_) | Kind::Session => {
                if let Kind::Use(db) = kind {
                    self.cur_db = Some(db);
                }
                if self.execute(&stmt, None, None, None).await {
                    // Kept in the prelude too, for the quarantine's context.
                    let n = self.ctx.prelude.push(&stmt.text);
                    if let Some(c) = self.control.as_mut() {
                        c.mark_applied(n);
                    }
                }
            }
            other => {
                let table = other.table().map(|t| Self::show(&self.key(t)));
                if let Some(t) = &table {
                    if matches!(other, Kind::TableDdl { create: true, .. }) {
                        self.tables.insert(t.clone());
                    }
                }
                let ran = self.execute(&stmt, table.as_deref(), None, None).await;
                // The rows an INSERT/REPLACE run as written put in, as the
                // batched regimes count them (the summary said 0 rows).
                if let (true, Kind::Data(_), Some(c)) = (ran, &other, self.control.as_ref()) {
                    self.ctx
                        .shared
                        .rows
                        .fetch_add(c.conn.affected_rows(), Ordering::Relaxed);
                }
            }
        }
    }

    async fn feed_journaled(
        &mut self,
        stmt: Statement,
        kind: Kind,
        traits: Traits,
        chain: ChainValue,
    ) {
        match kind {
            Kind::Session => {
                self.flush().await;
                self.ctx.prelude.push(&stmt.text);
            }
            Kind::Use(db) => {
                self.flush().await;
                self.ctx.prelude.push(&stmt.text);
                self.cur_db = Some(db);
            }
            Kind::Hint => {}
            Kind::Data(t)
                if traits.reads_tables
                    || traits.expressions
                    || self.triggered.contains(&self.key(&t)) =>
            {
                // Reads other tables (INSERT ... SELECT, a subquery) or
                // calls functions: after everything before it, alone.
                self.flush().await;
                self.start_all_deferred().await;
                self.wait_all().await;
                let key = self.key(&t);
                let info = self.table_info(&key).await;
                if self.galera_refuses(&key, &info, &stmt) || !self.begin(&stmt).await {
                    return;
                }
                let work = Work::Data {
                    table: Self::show(&key),
                    stmts: vec![stmt],
                    chain,
                    nontx: !info.transactional,
                    generates_ids: true,
                    auto_inc: info.auto_inc.is_some(),
                };
                let prelude_len = self.ctx.prelude.len();
                worker::process(&self.ctx, &mut self.control, "c", work, prelude_len, false).await;
            }
            Kind::Data(t) => {
                let key = self.key(&t);
                let len = stmt.text.len();
                let ordered = traits.order_sensitive || self.ctx.continue_on_error;
                match &mut self.batch {
                    Some(b) if b.key == key && b.bytes + len <= self.batch_bytes => {
                        b.stmts.push(stmt);
                        b.bytes += len;
                        b.chains.push(chain);
                        b.ordered |= ordered;
                    }
                    _ => {
                        self.flush().await;
                        self.batch = Some(Batch {
                            key,
                            stmts: vec![stmt],
                            bytes: len,
                            chains: vec![chain],
                            ordered,
                        });
                    }
                }
            }
            Kind::TableDdl { table, create } => {
                self.flush().await;
                let key = self.key(&table);
                let shown = Self::show(&key);
                if create {
                    self.tables.insert(shown.clone());
                } else if is_drop_table(&stmt.text) {
                    // (mysqldump's stand-in tables for views are dropped.)
                    self.tables.remove(&shown);
                }
                self.start_deferred(&key).await;
                self.wait_table(&key).await;
                self.info.remove(&key);
                if create && self.overwrite_tables {
                    // Not journaled: on resume a CREATE already done is
                    // skipped, and its table (with the rows loaded since)
                    // is kept; one not done drops again.
                    let drop = Statement {
                        text: format!("DROP TABLE IF EXISTS {shown}").into_bytes(),
                        ..stmt.clone()
                    };
                    if !self.execute(&drop, Some(&shown), None, None).await {
                        return;
                    }
                }
                if create {
                    if sqlfleet_dump::classify::has_auto_increment(&stmt.text) {
                        self.no_auto_inc.remove(&key);
                    } else {
                        self.no_auto_inc.insert(key.clone());
                    }
                    if self.defer_indexes {
                        if let Some((text, keys)) = defer::strip_secondary_indexes(&stmt.text) {
                            let record = (stmt.offset, stmt.end, stmt.line);
                            let rewritten = Statement { text, ..stmt };
                            // Journaled only once the indexes are back.
                            if self.execute(&rewritten, Some(&shown), None, None).await {
                                self.deferred.insert(
                                    key,
                                    Deferred {
                                        keys,
                                        record,
                                        prelude_len: self.ctx.prelude.len(),
                                    },
                                );
                            }
                            return;
                        }
                    }
                }
                let what = if create { "create" } else { "ddl" };
                self.execute(&stmt, Some(&shown), Some(what), Some(&chain))
                    .await;
            }
            Kind::Trigger(table) => {
                self.flush().await;
                let key = self.key(&table);
                self.triggered.insert(key.clone());
                self.start_deferred(&key).await;
                self.wait_table(&key).await;
                let shown = Self::show(&key);
                self.execute(&stmt, Some(&shown), Some("ddl"), Some(&chain))
                    .await;
            }
            Kind::Barrier => {
                self.flush().await;
                self.start_all_deferred().await;
                self.wait_all().await;
                self.execute(&stmt, None, Some("ddl"), Some(&chain)).await;
            }
        }
    }

    /// Writes the journal's start (`journal::Begin`) if not yet written;
    /// false (the load failed at `stmt`) if that fails.
    async fn begin(&mut self, stmt: &Statement) -> bool {
        let Some(b) = self.begin.take() else {
            return true;
        };
        match b.run(&mut self.bookkeeping).await {
            Ok(()) => true,
            Err(e) => {
                self.ctx
                    .shared
                    .fail(StatementFailure::of_journal(stmt, None, &e));
                false
            }
        }
    }

    /// Counts a statement's bytes as done, for progress.
    fn applied(&self, stmt: &Statement) {
        self.ctx
            .shared
            .applied
            .fetch_add(stmt.end - stmt.offset, Ordering::Relaxed);
    }

    /// Says it now (before the table's rows load) and keeps it for the summary.
    fn warn(&mut self, w: String) {
        crate::progress::say(&format!("warning: {w}"));
        self.warnings.push(w);
    }

    /// At the end of the dump: everything out, everything finished.
    pub async fn finish(&mut self) {
        self.flush().await;
        self.start_all_deferred().await;
        self.wait_all().await;
    }

    /// The table's engine and AUTO_INCREMENT column, asked of the server
    /// once per table (again after each DDL on it), so a default engine,
    /// an ALTER ... ENGINE or a table the dump did not create are all
    /// seen as they are.
    async fn table_info(&mut self, key: &Key) -> TableInfo {
        if let Some(t) = self.info.get(key) {
            return t.clone();
        }
        let unknown = TableInfo {
            transactional: true,
            engine: String::new(),
            heap_order: true,
            auto_inc: None,
            sequenced: None,
        };
        let Some(c) = self.control.as_mut() else {
            return unknown;
        };
        let db = match &key.0 {
            Some(db) => literal(db),
            None => "DATABASE()".into(),
        };
        // Each lookup names its schema and table with constants: the
        // server then opens only that table (a join on columns would read
        // every table of the schema).
        let t = literal(&key.1);
        let q = format!(
            "SELECT (SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = {db} AND TABLE_NAME = {t}), \
             (SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = {db} AND TABLE_NAME = {t} \
              AND EXTRA LIKE '%auto_increment%' LIMIT 1), \
             (SELECT ORDINAL_POSITION FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = {db} AND TABLE_NAME = {t} \
              AND EXTRA LIKE '%auto_increment%' LIMIT 1), \
             (SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = {db} AND EVENT_OBJECT_TABLE = {t}), \
             (SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = {db} AND TABLE_NAME = {t} \
              AND INDEX_NAME = 'PRIMARY'), \
             (SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = {db} AND TABLE_NAME = {t} \
              AND {seq}), \
             (SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = {db} AND TABLE_NAME = {t} \
              AND {seq} LIMIT 1), \
             (SELECT ORDINAL_POSITION FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = {db} AND TABLE_NAME = {t} \
              AND {seq} LIMIT 1)",
            seq = crate::queue::TAKES_SEQUENCE
        );
        type Row = (
            Option<String>,
            Option<String>,
            Option<u64>,
            u64,
            u64,
            u64,
            Option<String>,
            Option<u64>,
        );
        let row: Option<Row> = c.conn.query_first(q).await.unwrap_or(None);
        let Some((Some(engine), col, pos, triggers, pk, sequenced, seq_col, seq_pos)) = row else {
            return unknown; // not there (yet): the INSERT will say so
        };
        if triggers > 0 || sequenced > 1 {
            // Its rows fire triggers the target already had (or take
            // values of several sequences): in file order, always.
            self.triggered.insert(key.clone());
        }
        let transactional = sqlfleet_dump::classify::is_transactional(&engine.to_ascii_uppercase());
        let info = TableInfo {
            transactional,
            engine: engine.to_ascii_uppercase(),
            heap_order: !transactional || pk == 0,
            auto_inc: col.zip(pos).map(|(c, p)| (p.saturating_sub(1) as usize, c)),
            sequenced: seq_col
                .zip(seq_pos)
                .map(|(c, p)| (p.saturating_sub(1) as usize, c)),
        };
        if !info.transactional {
            let shown = Self::show(key);
            self.warn(format!(
                "table {shown} is not transactional: its batches run statement by statement, never retried; if the load stops mid-batch, --resume empties {shown} and loads its data again"
            ));
        }
        self.info.insert(key.clone(), info.clone());
        info
    }

    /// On a Galera target, rows for a table the server says is not
    /// InnoDB stop the load before they are sent (whatever made the table:
    /// the dump's checks read its text, this is the server's word).
    fn galera_refuses(&self, key: &Key, info: &TableInfo, stmt: &Statement) -> bool {
        let Some(c) = &self.ctx.galera else {
            return false;
        };
        if info.engine.is_empty() {
            return false;
        }
        let engine = crate::galera::Engine::Named(info.engine.clone());
        let Some(why) = crate::galera::refusal(&engine, false, &c.default_engine) else {
            return false;
        };
        let f = crate::galera::Finding {
            line: stmt.line,
            table: Self::show(key),
            why: format!("{why}, as the server says"),
        };
        self.ctx.shared.fail(StatementFailure {
            code: None,
            message: crate::galera::message(c, &[f]),
            ..StatementFailure::of_text(stmt, Some(&Self::show(key)))
        });
        true
    }

    async fn flush(&mut self) {
        let Some(b) = self.batch.take() else {
            return;
        };
        // After a failure nothing later in the file runs, as the stock
        // client stops there (a batch held until the end was still run).
        if b.stmts
            .first()
            .is_some_and(|s| self.ctx.shared.past_failure(s.offset))
        {
            return;
        }
        let info = self.table_info(&b.key).await;
        if let Some(first) = b.stmts.first() {
            if self.galera_refuses(&b.key, &info, first) || !self.begin(first).await {
                return;
            }
        }
        let nontx = !info.transactional;
        // Does some statement leave this column (position, name) to the
        // server: no value, NULL, DEFAULT or 0?
        let left_to_server = |col: &Option<(usize, String)>| {
            col.as_ref().is_some_and(|(pos, name)| {
                b.stmts
                    .iter()
                    .any(|s| generates_ids(&s.scan_text(), *pos, name))
            })
        };
        let generates = left_to_server(&info.auto_inc);
        let decided = placement::place(placement::Facts {
            nontx,
            generates_ids: generates,
            takes_sequence: left_to_server(&info.sequenced),
            triggered: self.triggered.contains(&b.key),
            continue_on_error: self.ctx.continue_on_error,
            ordered_regime: self.regime == Regime::Ordered,
            batch_ordered: b.ordered,
            heap_order: info.heap_order,
            no_auto_inc: self.no_auto_inc.contains(&b.key),
        });
        let table = Self::show(&b.key);
        let prelude_len = self.ctx.prelude.len();
        let last = b.chains.last().copied().unwrap_or_default();
        let works: Vec<Work> = if decided.per_statement {
            b.stmts
                .into_iter()
                .zip(b.chains)
                .map(|(s, c)| Work::Data {
                    table: table.clone(),
                    stmts: vec![s],
                    chain: c,
                    nontx,
                    generates_ids: generates,
                    auto_inc: info.auto_inc.is_some(),
                })
                .collect()
        } else {
            vec![Work::Data {
                table: table.clone(),
                stmts: b.stmts,
                chain: last,
                nontx,
                generates_ids: generates,
                auto_inc: info.auto_inc.is_some(),
            }]
        };
        let (auto_inc, ordered) = match decided.place {
            placement::Place::Control {
                after_everything,
                fast_ok,
            } => {
                if after_everything {
                    self.start_all_deferred().await;
                    self.wait_all().await;
                }
                for work in works {
                    worker::process(
                        &self.ctx,
                        &mut self.control,
                        "c",
                        work,
                        prelude_len,
                        fast_ok,
                    )
                    .await;
                }
                return;
            }
            placement::Place::Lane { auto_inc, ordered } => (auto_inc, ordered),
        };
        self.workers_used = true;
        let per = b.bytes / works.len().max(1);
        for work in works {
            let (tx, rx) = oneshot::channel();
            let job = Job {
                work,
                prelude_len,
                done: tx,
            };
            self.queue.push(&table, auto_inc, ordered, job, per).await;
            let list = self.inflight.entry(b.key.clone()).or_default();
            list.push(rx);
            if list.len() > 256 {
                list.retain_mut(|r| {
                    matches!(r.try_recv(), Err(oneshot::error::TryRecvError::Empty))
                });
            }
        }
    }

    async fn start_deferred(&mut self, key: &Key) {
        let Some(d) = self.deferred.remove(key) else {
            return;
        };
        let table = Self::show(key);
        let table_name = table.clone();
        let (tx, rx) = oneshot::channel();
        let job = Job {
            work: Work::Index {
                alter: defer::add_indexes_sql(&table, &d.keys),
                table,
                record: d.record,
            },
            prelude_len: d.prelude_len,
            done: tx,
        };
        self.queue.push(&table_name, true, false, job, 0).await;
        self.inflight.entry(key.clone()).or_default().push(rx);
    }

    async fn start_all_deferred(&mut self) {
        let keys: Vec<Key> = self.deferred.keys().cloned().collect();
        for k in keys {
            self.start_deferred(&k).await;
        }
    }

    async fn wait_table(&mut self, key: &Key) {
        if let Some(list) = self.inflight.remove(key) {
            for rx in list {
                let _ = rx.await;
            }
        }
    }

    async fn wait_all(&mut self) {
        for (_, list) in self.inflight.drain() {
            for rx in list {
                let _ = rx.await;
            }
        }
    }

    /// Runs a statement on the scheduler's connection; journals it as
    /// `record` (a pending row first, so an interrupted DDL is known);
    /// returns false (after recording the failure) if it failed.
    async fn execute(
        &mut self,
        stmt: &Statement,
        table: Option<&str>,
        record: Option<&str>,
        chain: Option<&ChainValue>,
    ) -> bool {
        // Nothing starts after a failure before it, nor after a signal:
        // a DDL that waited for its table's batches (a trigger) found them
        // rolled back by the interrupt, and must not run without them
        // (the interrupt campaign: a trigger made before its table's last
        // rows, which a resume then loaded through it).
        if self.ctx.shared.past_failure(stmt.offset) || self.ctx.shared.is_interrupted() {
            return false;
        }
        let stateful = self.regime == Regime::Stateful;
        let upto = self.ctx.prelude.len();
        let rec = |kind: &'static str, me: &Self| {
            Record {
                load_id: &me.ctx.load_id,
                start: stmt.offset,
                end: stmt.end,
                kind,
                rows: 0,
                table,
                chain,
            }
            .sql()
        };
        // The final record, in a round trip after the statement's (the
        // statement travels alone, so that a server error quotes it and
        // its line numbers, never the journal's statements around it).
        let done_sql = record.map(|kind| {
            let sql = rec(if kind == "create" { "create" } else { "ddl" }, self);
            format!("START TRANSACTION; {sql}; COMMIT")
        });
        // A pending row first, committed before the statement runs (DDL
        // commits on its own): an interrupted DDL is known on resume.
        // Before the journal is written (`journal::Begin`), a statement
        // that runs a second time as it ran once (`DROP TABLE IF EXISTS`,
        // `CREATE DATABASE IF NOT EXISTS`, a `SET GLOBAL`) runs without
        // it, its record held until the journal is written: refused by
        // the server, the load leaves nothing of its own on the target;
        // killed after it, the next run starts over and runs it again.
        // Any other statement writes the journal first.
        let held = self.begin.is_some() && reruns_harmlessly(&stmt.text);
        if !held && self.begin.is_some() {
            // The session it runs in first: a setting the server refuses
            // (a collation it does not have) stops the load here, before
            // the journal. (Other errors: the attempts below retry.)
            let synced = async {
                let c = worker::ensure(&self.ctx, &mut self.control, "c").await?;
                c.sync(&self.ctx.prelude, upto).await
            }
            .await;
            if let Err(e @ mysql_async::Error::Server(_)) = synced {
                self.ctx.shared.fail(StatementFailure::of(stmt, table, &e));
                return false;
            }
        }
        if !held && !self.begin(stmt).await {
            return false;
        }
        let pending_sql = done_sql
            .as_ref()
            .filter(|_| !held)
            .map(|_| format!("START TRANSACTION; {}; COMMIT", rec("pending-ddl", self)));
        let ordered = &mut InOrder {
            ctx: &self.ctx,
            control: &mut self.control,
            upto,
            pending: pending_sql.as_deref(),
            journal_failed: false,
            stmt,
            stateful,
        };
        // The one-connection regime cannot move to a new connection.
        let retries = &self.ctx.shared.retries;
        let result = retry::run(retries, !stateful, retry::Worth::Retryable, ordered).await;
        let journal_failed = ordered.journal_failed;
        let result = match result {
            Err(mysql_async::Error::Server(s))
                if self.resume.pending_ddl.contains(&stmt.offset)
                    && ALREADY_DONE.contains(&s.code) =>
            {
                self.warn(format!(
                    "byte offset {}, line {}: already applied before the interruption ({}), kept",
                    stmt.offset, stmt.line, s.message
                ));
                Ok(())
            }
            other => other,
        };
        match result {
            Ok(()) => {
                self.ctx.shared.statements.fetch_add(1, Ordering::Relaxed);
                self.applied(stmt);
                if held {
                    if let (Some(b), Some(q)) = (self.begin.as_mut(), done_sql) {
                        b.hold(q);
                    }
                    return true;
                }
                match &done_sql {
                    Some(done) => self.record_after(stmt, table, done).await,
                    None => true,
                }
            }
            Err(e) => {
                let mut f = StatementFailure::of(stmt, table, &e);
                if journal_failed {
                    // Not the statement's error: it was not sent.
                    f.message = format!("recording in the journal before it: {}", f.message);
                    self.ctx.shared.fail(f);
                    return false;
                }
                if stateful && needs_reconnect(&e) {
                    f.message.push_str(" (the connection was lost, and with it the session state this file built up: the load cannot go on; restore the target and load again with --restart)");
                }
                if self.ctx.continue_on_error {
                    self.ctx.shared.quarantine(stmt, &f, upto);
                    if !stateful && self.begin(stmt).await {
                        let q = rec("quarantine", self);
                        if let Some(c) = self.control.as_mut() {
                            let _ = c
                                .conn
                                .query_drop(format!("START TRANSACTION; {q}; COMMIT"))
                                .await;
                        }
                    }
                } else {
                    self.ctx.shared.fail(f);
                }
                false
            }
        }
    }

    /// Writes a statement's final journal record (`done`) on the
    /// scheduler's connection, as [`RecordAfter`]; false (after recording
    /// the failure as the journal's) if it could not be written.
    async fn record_after(&mut self, stmt: &Statement, table: Option<&str>, done: &str) -> bool {
        let r = match self.control.as_mut() {
            Some(conn) => {
                let rec = &mut RecordAfter { conn, sql: done };
                let retries = &self.ctx.shared.retries;
                retry::run(retries, false, retry::Worth::Retryable, rec).await
            }
            None => Ok(()),
        };
        match r {
            Ok(()) => true,
            Err(e) => {
                self.ctx
                    .shared
                    .fail(StatementFailure::of_journal(stmt, table, &e));
                false
            }
        }
    }
}

/// A statement's final journal record, on the connection that ran it:
/// tried again by the loader's one retry loop after a deadlock or a lock
/// wait (a Galera node answers 1213 when another node's write-set wins
/// certification). The record is an upsert of its own row, so a second
/// attempt writes what the first would have; a lost connection still
/// ends the load (its session is gone: no new connection).
struct RecordAfter<'a> {
    conn: &'a mut SessionConn,
    sql: &'a str,
}

impl retry::Attempt for RecordAfter<'_> {
    type Out = ();
    async fn once(&mut self, _fresh: bool) -> Result<(), mysql_async::Error> {
        self.conn.conn.query_drop(self.sql).await
    }
}

/// Why a statement of `len` bytes cannot go to a server whose
/// max_allowed_packet is `max` (the command byte counts too), if so.
pub(crate) fn over_packet(len: usize, max: u64) -> Option<String> {
    let size = len as u64 + 1;
    (size > max).then(|| {
        format!(
            "this statement is {size} bytes, more than the server's max_allowed_packet ({max} bytes): the server would refuse it and end the connection; raise it (SET GLOBAL max_allowed_packet = {}), then load again with --resume",
            size.next_power_of_two().max(max)
        )
    })
}

/// A statement the scheduler runs itself (DDL, barriers, the ordered and
/// one-connection regimes), after its journal record when it has one.
struct InOrder<'a> {
    ctx: &'a Ctx,
    control: &'a mut Option<SessionConn>,
    /// The session statements it runs after.
    upto: usize,
    /// Its "pending" journal record.
    pending: Option<&'a str>,
    /// The last attempt failed at that record, not at the statement: the
    /// error is the journal's, and says so.
    journal_failed: bool,
    stmt: &'a Statement,
    stateful: bool,
}

impl retry::Attempt for InOrder<'_> {
    type Out = ();
    async fn once(&mut self, fresh: bool) -> Result<(), mysql_async::Error> {
        if fresh {
            *self.control = None;
        }
        self.journal_failed = false;
        let c = worker::ensure(self.ctx, self.control, "c").await?;
        c.sync(&self.ctx.prelude, self.upto).await?;
        if let Some(p) = self.pending {
            self.journal_failed = true;
            c.conn.query_drop(p).await?;
        }
        self.journal_failed = false;
        c.conn.query_drop(&self.stmt.text[..]).await?;
        // As written on one connection: nothing of ours in between.
        worker::count_applied(self.ctx, c, self.stmt, !self.stateful).await;
        Ok(())
    }
}

/// A database or table name of `kind` that is not UTF-8 text (read in
/// another set: replaced characters in it), shown escaped.
fn unreadable_name(kind: &Kind) -> Option<String> {
    let lossy = |n: &str| n.contains('\u{FFFD}');
    let name = match kind {
        Kind::Use(db) => lossy(db).then(|| format!("`{db}`")),
        other => other.table().and_then(|t| {
            (lossy(&t.name) || t.db.as_deref().is_some_and(lossy)).then(|| match &t.db {
                Some(d) => format!("`{d}`.`{}`", t.name),
                None => format!("`{}`", t.name),
            })
        }),
    }?;
    Some(sqlfleet_dump::printable::printable(&name).into_owned())
}

/// Whether database names `a` and `b` name one database on a server that
/// folds ASCII case in them (`fold`) or not. Only ASCII letters are
/// folded: a name that differs elsewhere is taken for another database (a
/// doubt refuses, see `Scheduler::elsewhere`).
fn same_database(a: &str, b: &str, fold: bool) -> bool {
    a == b || (fold && a.eq_ignore_ascii_case(b))
}

#[cfg(test)]
mod names_tests {
    #[test]
    fn database_names_are_one_as_the_server_folds_them() {
        for (a, b, fold, same) in [
            ("shop", "shop", false, true),
            ("Shop", "shop", false, false),
            ("Shop", "shop", true, true),
            ("SHOP_2024", "shop_2024", true, true),
            ("shop", "shops", true, false),
            // Beyond ASCII: never folded here (the server's casefolding
            // of other letters is not guessed).
            ("Ärger", "ärger", true, false),
            ("ärger", "ärger", true, true),
            ("", "", true, true),
        ] {
            assert_eq!(
                super::same_database(a, b, fold),
                same,
                "{a} {b} fold={fold}"
            );
        }
    }
}

#[cfg(test)]
mod packet_tests {
    #[test]
    fn statements_over_the_servers_packet_are_refused_by_size() {
        for (len, max, refused) in [
            (10, 100, false),
            (99, 100, false),
            (100, 100, true),
            (40 << 20, 16 << 20, true),
        ] {
            assert_eq!(
                super::over_packet(len, max).is_some(),
                refused,
                "{len} of {max}"
            );
        }
    }
}

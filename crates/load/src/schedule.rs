//! The scheduler: walks the dump in order and decides what may overlap.
//!
//! - Session statements (`SET`, `USE`) extend the prelude every connection
//!   replays; `LOCK TABLES` and `DISABLE/ENABLE KEYS` hints are skipped
//!   (they would serialize the workers and change nothing in the result).
//! - INSERTs are grouped into batches of one table and handed to workers;
//!   batches of one table run in parallel once the table exists.
//! - DDL and triggers on a table wait for that table's batches in flight,
//!   then run in dump order on the scheduler's own connection (so a
//!   trigger never fires on the dump's rows, and a table's data never
//!   races its CREATE). Other tables' batches keep flowing meanwhile.
//! - Everything else (databases, views, routines, events, unknown
//!   statements) is a barrier: it waits for all work in flight and runs
//!   alone, so a view is created after the tables it reads are loaded.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use mysql_async::prelude::Queryable;
use sqlfleet_conn::quote::ident;
use sqlfleet_dump::classify::{engine, is_transactional};
use sqlfleet_dump::{Kind, Statement, TableRef};
use tokio::sync::oneshot;

use crate::defer;
use crate::error::StatementFailure;
use crate::retry::{backoff, needs_reconnect, retryable, ALREADY_DONE, MAX_ATTEMPTS};
use crate::journal::{self, Ranges};
use crate::queue::{has_auto_increment, JobQueue};
use crate::session::SessionConn;
use crate::job::{Job, Work};
use crate::state::Ctx;

type Key = (Option<String>, String);

pub struct Scheduler {
    pub ctx: Arc<Ctx>,
    pub queue: Arc<JobQueue>,
    pub control: SessionConn,
    pub resume: Ranges,
    pub batch_bytes: usize,
    pub defer_indexes: bool,
    pub warnings: Vec<String>,
    pub skipped: u64,
    pub tables: std::collections::BTreeSet<String>,
    cur_db: Option<String>,
    batch: Option<(Key, Vec<Statement>, usize)>,
    inflight: HashMap<Key, Vec<oneshot::Receiver<()>>>,
    /// Tables known to have no AUTO_INCREMENT column (from their CREATE).
    no_auto_inc: std::collections::HashSet<Key>,
    deferred: HashMap<Key, Deferred>,
}

struct Deferred {
    keys: Vec<String>,
    record: (u64, u64, u64),
    prelude_len: usize,
}

impl Scheduler {
    pub fn new(
        ctx: Arc<Ctx>,
        queue: Arc<JobQueue>,
        control: SessionConn,
        resume: Ranges,
        batch_bytes: usize,
        defer_indexes: bool,
        database: Option<String>,
    ) -> Scheduler {
        Scheduler {
            ctx,
            queue,
            control,
            resume,
            batch_bytes,
            defer_indexes,
            warnings: Vec::new(),
            skipped: 0,
            tables: Default::default(),
            cur_db: database,
            batch: None,
            inflight: HashMap::new(),
            no_auto_inc: Default::default(),
            deferred: HashMap::new(),
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

    /// Handles one statement of the dump, in order. Errors are recorded
    /// in the shared failure slot.
    pub async fn feed(&mut self, stmt: Statement, kind: Kind) {
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
            _ if self.resume.contains(stmt.offset) => {
                self.skipped += 1;
                // Keep what a deferred-index rewrite needs to know on resume.
                if let Kind::TableDdl {
                    table,
                    create: true,
                } = &kind
                {
                    self.tables.insert(Self::show(&self.key(table)));
                }
            }
            Kind::Data(t) => {
                let key = self.key(&t);
                let len = stmt.text.len();
                match &mut self.batch {
                    Some((k, stmts, bytes)) if *k == key && *bytes + len <= self.batch_bytes => {
                        stmts.push(stmt);
                        *bytes += len;
                    }
                    _ => {
                        self.flush().await;
                        self.batch = Some((key, vec![stmt], len));
                    }
                }
            }
            Kind::TableDdl { table, create } => {
                self.flush().await;
                let key = self.key(&table);
                self.tables.insert(Self::show(&key));
                self.start_deferred(&key).await;
                self.wait_table(&key).await;
                if create {
                    if has_auto_increment(&stmt.text) {
                        self.no_auto_inc.remove(&key);
                    } else {
                        self.no_auto_inc.insert(key.clone());
                    }
                    if let Some(e) = engine(&stmt.text).filter(|e| !is_transactional(e)) {
                        self.warn(format!(
                            "table {} uses {e}, which cannot roll back: its batches are journaled but a crash mid-batch may leave partial rows",
                            Self::show(&key)
                        ));
                    }
                    if self.defer_indexes {
                        if let Some((text, keys)) = defer::strip_secondary_indexes(&stmt.text) {
                            let record = (stmt.offset, stmt.end, stmt.line);
                            let rewritten = Statement { text, ..stmt };
                            // Journaled only once the indexes are back.
                            if self.execute(&rewritten, Some(&key), false).await {
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
                self.execute(&stmt, Some(&key), true).await;
            }
            Kind::Trigger(table) => {
                self.flush().await;
                let key = self.key(&table);
                self.start_deferred(&key).await;
                self.wait_table(&key).await;
                self.execute(&stmt, Some(&key), true).await;
            }
            Kind::Barrier => {
                self.flush().await;
                self.start_all_deferred().await;
                self.wait_all().await;
                self.execute(&stmt, None, true).await;
            }
        }
    }

    /// Says it now (before the table's rows load) and keeps it for the summary.
    fn warn(&mut self, w: String) {
        eprintln!("sqlfleet load: warning: {w}");
        self.warnings.push(w);
    }

    /// At the end of the dump: everything out, everything finished.
    pub async fn finish(&mut self) {
        self.flush().await;
        self.start_all_deferred().await;
        self.wait_all().await;
    }

    async fn flush(&mut self) {
        let Some((key, stmts, bytes)) = self.batch.take() else {
            return;
        };
        let (tx, rx) = oneshot::channel();
        let table = Self::show(&key);
        let job = Job {
            work: Work::Data {
                table: table.clone(),
                stmts,
            },
            prelude_len: self.ctx.prelude.len(),
            done: tx,
        };
        let auto_inc = !self.no_auto_inc.contains(&key);
        self.queue.push(&table, auto_inc, job, bytes).await;
        let list = self.inflight.entry(key).or_default();
        list.push(rx);
        if list.len() > 256 {
            list.retain_mut(|r| matches!(r.try_recv(), Err(oneshot::error::TryRecvError::Empty)));
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
        self.queue.push(&table_name, true, job, 0).await;
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

    /// Runs a statement on the scheduler's connection, journals it if
    /// `record`; returns false (after recording the failure) if it failed.
    async fn execute(&mut self, stmt: &Statement, key: Option<&Key>, record: bool) -> bool {
        if self.ctx.shared.past_failure(stmt.offset) {
            return false;
        }
        let table = key.map(Self::show);
        let upto = self.ctx.prelude.len();
        let mut attempt = 0;
        let result = loop {
            attempt += 1;
            let r = async {
                self.control.sync(&self.ctx.prelude, upto).await?;
                self.control.conn.query_drop(&stmt.text[..]).await
            }
            .await;
            match r {
                Err(e) if retryable(&e) && attempt < MAX_ATTEMPTS => {
                    self.ctx.shared.retries.fetch_add(1, Ordering::Relaxed);
                    if needs_reconnect(&e) {
                        if let Ok(c) = SessionConn::open(&self.ctx.target).await {
                            self.control = c;
                        }
                    }
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Err(mysql_async::Error::Server(s))
                    if self.ctx.shared.resuming && ALREADY_DONE.contains(&s.code) =>
                {
                    self.warn(format!(
                        "byte offset {}, line {}: already applied before the interruption ({}), kept",
                        stmt.offset, stmt.line, s.message
                    ));
                    break Ok(());
                }
                other => break other,
            }
        };
        match result {
            Ok(()) => {
                self.ctx.shared.statements.fetch_add(1, Ordering::Relaxed);
                if record {
                    let rec =
                        journal::record_sql(&self.ctx.load_id, stmt.offset, stmt.end, "ddl", 0);
                    if let Err(e) = self.control.conn.query_drop(rec).await {
                        self.ctx.shared.fail(StatementFailure {
                            message: format!(
                                "recording in the journal: {}",
                                crate::error::describe(&e).1
                            ),
                            ..StatementFailure::of(stmt, table.as_deref(), &e)
                        });
                        return false;
                    }
                }
                true
            }
            Err(e) => {
                let f = StatementFailure::of(stmt, table.as_deref(), &e);
                if self.ctx.continue_on_error {
                    self.ctx.shared.quarantine(stmt, &f);
                    let rec = journal::record_sql(
                        &self.ctx.load_id,
                        stmt.offset,
                        stmt.end,
                        "quarantine",
                        0,
                    );
                    let _ = self.control.conn.query_drop(rec).await;
                } else {
                    self.ctx.shared.fail(f);
                }
                false
            }
        }
    }
}

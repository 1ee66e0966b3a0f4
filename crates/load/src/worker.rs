//! Workers: one connection each, pulling batches from a shared queue.
//!
//! A data batch runs in one transaction together with its journal record;
//! deadlocks, lock-wait timeouts and lost connections retry the whole batch
//! (reconnecting and replaying the session prelude) a bounded number of
//! times. With `--continue-on-error` a batch that fails for good is re-run
//! statement by statement and only the failing statements are quarantined.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use mysql_async::prelude::Queryable;
use sqlfleet_conn::Target;
use sqlfleet_dump::values::{insert_to_rows, Duplicates, Rows};
use sqlfleet_dump::Statement;
use tokio::sync::oneshot;

use crate::chunk_job::{self, ChunkOutcome, ChunkWork};
use crate::error::{describe, retryable, StatementFailure};
use crate::journal;
use crate::queue::{JobQueue, Lease};
use crate::session::{Prelude, SessionConn};

pub const MAX_ATTEMPTS: u32 = 6;

pub enum Work {
    /// INSERTs of one table, loaded in one transaction.
    Data {
        table: String,
        stmts: Vec<Statement>,
    },
    /// A chunk of a CSV/TSV file.
    Chunk(Box<ChunkWork>),
    /// A deferred `ALTER TABLE ... ADD KEY ...`; `record` is the CREATE
    /// TABLE's range, journaled once the indexes exist.
    Index {
        table: String,
        alter: String,
        record: (u64, u64, u64),
    },
}

pub struct Job {
    pub work: Work,
    pub prelude_len: usize,
    /// Dropped when the job is finished, whatever the outcome.
    pub done: oneshot::Sender<()>,
}

/// State shared by the scheduler, the workers and the progress display.
pub struct Shared {
    /// Byte offset of the earliest failing statement (u64::MAX: none).
    /// Work before it in the dump still runs; work after it does not, so
    /// a failed load has applied exactly the dump's prefix up to the first
    /// failure, whatever order the workers hit their errors in.
    pub stop_at: AtomicU64,
    pub failure: Mutex<Option<StatementFailure>>,
    pub rows: AtomicU64,
    pub statements: AtomicU64,
    pub batches: AtomicU64,
    pub retries: AtomicU64,
    pub quarantined: AtomicU64,
    /// Statements loaded through LOAD DATA, and batches that fell back.
    pub fast_statements: AtomicU64,
    pub fast_fallbacks: AtomicU64,
    /// Server warnings reported (CSV/TSV chunks).
    pub warnings: AtomicU64,
    pub quarantine: Option<Mutex<std::fs::File>>,
    pub resuming: bool,
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            stop_at: AtomicU64::new(u64::MAX),
            failure: Mutex::default(),
            rows: AtomicU64::default(),
            statements: AtomicU64::default(),
            batches: AtomicU64::default(),
            retries: AtomicU64::default(),
            quarantined: AtomicU64::default(),
            fast_statements: AtomicU64::default(),
            fast_fallbacks: AtomicU64::default(),
            warnings: AtomicU64::default(),
            quarantine: None,
            resuming: false,
        }
    }
}

impl Shared {
    /// Records a failure; the earliest in the dump is the one reported.
    pub fn fail(&self, f: StatementFailure) {
        let mut slot = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if slot.as_ref().is_none_or(|old| f.offset < old.offset) {
            self.stop_at.fetch_min(f.offset, Ordering::SeqCst);
            *slot = Some(f);
        }
    }

    pub fn stopped(&self) -> bool {
        self.stop_at.load(Ordering::Relaxed) != u64::MAX
    }

    /// True if work starting at `offset` comes after the first failure.
    pub fn past_failure(&self, offset: u64) -> bool {
        offset > self.stop_at.load(Ordering::Relaxed)
    }

    /// Writes a statement the server refused to the quarantine file, with
    /// a comment header saying where it was and why it failed.
    pub fn quarantine(&self, stmt: &Statement, f: &StatementFailure) {
        self.quarantined.fetch_add(1, Ordering::Relaxed);
        let Some(file) = &self.quarantine else { return };
        let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
        let header = format!(
            "-- sqlfleet quarantine: byte offset {}, line {}{}: {}{}\n",
            f.offset,
            f.line,
            f.table
                .as_ref()
                .map(|t| format!(", table {t}"))
                .unwrap_or_default(),
            f.code.map(|c| format!("ERROR {c}: ")).unwrap_or_default(),
            f.message.replace('\n', " ")
        );
        let has_semicolon = stmt.text.contains(&b';');
        let _ = file.write_all(header.as_bytes());
        if has_semicolon {
            let _ = file.write_all(b"DELIMITER $$\n");
        }
        let _ = file.write_all(&stmt.text);
        let _ = file.write_all(if has_semicolon {
            b"$$\nDELIMITER ;\n\n"
        } else {
            b";\n\n"
        });
        let _ = file.flush();
    }
}

pub struct Ctx {
    pub target: Target,
    /// Use LOAD DATA LOCAL for INSERT batches it reproduces exactly.
    pub fast_path: std::sync::atomic::AtomicBool,
    pub prelude: Prelude,
    pub shared: Arc<Shared>,
    pub load_id: String,
    pub continue_on_error: bool,
}

pub fn failure_of(
    stmt: &Statement,
    table: Option<&str>,
    e: &mysql_async::Error,
) -> StatementFailure {
    let (code, message) = describe(e);
    StatementFailure {
        offset: stmt.offset,
        line: stmt.line,
        table: table.map(str::to_owned),
        code,
        message,
        preview: stmt.preview(120),
    }
}

/// Runs jobs until the queue closes.
pub async fn run(ctx: Arc<Ctx>, queue: Arc<JobQueue>) {
    let mut conn: Option<SessionConn> = None;
    while let Some(Lease {
        job,
        table,
        fast_ok,
    }) = queue.pop().await
    {
        let first = match &job.work {
            Work::Data { stmts, .. } => stmts[0].offset,
            Work::Index { record, .. } => record.0,
            // Chunks of different files: a failure in one stops the rest.
            Work::Chunk(_) => 0,
        };
        if !ctx.shared.past_failure(first) {
            process(&ctx, &mut conn, job.work, job.prelude_len, fast_ok).await;
        } // else drain: nothing after the first failure runs
        drop(job.done);
        queue.done(&table);
    }
    if let Some(c) = conn {
        let _ = c.conn.disconnect().await;
    }
}

enum Outcome {
    Ok(u64),
    /// Failed for good, already described (chunks).
    Failed(StatementFailure),
    Retry(mysql_async::Error),
    Fail(usize, mysql_async::Error),
}

async fn process(
    ctx: &Ctx,
    conn: &mut Option<SessionConn>,
    work: Work,
    prelude_len: usize,
    fast_ok: bool,
) {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let outcome = attempt_once(ctx, conn, &work, prelude_len, fast_ok).await;
        match outcome {
            Outcome::Ok(rows) => {
                ctx.shared.rows.fetch_add(rows, Ordering::Relaxed);
                ctx.shared.batches.fetch_add(1, Ordering::Relaxed);
                if let Work::Data { stmts, .. } = &work {
                    ctx.shared
                        .statements
                        .fetch_add(stmts.len() as u64, Ordering::Relaxed);
                }
                return;
            }
            Outcome::Retry(e) if attempt < MAX_ATTEMPTS => {
                ctx.shared.retries.fetch_add(1, Ordering::Relaxed);
                if matches!(e, mysql_async::Error::Io(_) | mysql_async::Error::Driver(_))
                    || matches!(&e, mysql_async::Error::Server(s) if s.code == 2006 || s.code == 2013)
                {
                    *conn = None; // reconnect and replay the prelude
                }
                tokio::time::sleep(Duration::from_millis(50 << attempt.min(6))).await;
            }
            Outcome::Retry(e) => {
                if let Work::Chunk(w) = &work {
                    let (code, msg) = crate::error::describe(&e);
                    ctx.shared.fail(w.failure(code, msg));
                } else {
                    let (stmt, table) = first_stmt(&work);
                    ctx.shared.fail(failure_of(&stmt, Some(&table), &e));
                }
                return;
            }
            Outcome::Failed(f) => {
                ctx.shared.fail(f);
                return;
            }
            Outcome::Fail(i, e) => {
                match &work {
                    Work::Data { table, stmts } if ctx.continue_on_error => {
                        one_by_one(ctx, conn, table, stmts, prelude_len).await;
                    }
                    Work::Data { table, stmts } => {
                        ctx.shared.fail(failure_of(&stmts[i], Some(table), &e));
                    }
                    Work::Index { .. } | Work::Chunk(_) => {
                        let (stmt, table) = first_stmt(&work);
                        let f = failure_of(&stmt, Some(&table), &e);
                        if ctx.continue_on_error {
                            ctx.shared.quarantine(&stmt, &f);
                        } else {
                            ctx.shared.fail(f);
                        }
                    }
                }
                return;
            }
        }
    }
}

fn first_stmt(work: &Work) -> (Statement, String) {
    match work {
        Work::Data { table, stmts } => (stmts[0].clone(), table.clone()),
        Work::Chunk(w) => (
            Statement {
                offset: w.offset,
                end: w.end,
                line: w.record_lines.first().copied().unwrap_or(0),
                text: w.file.clone().into_bytes(),
            },
            w.table.clone(),
        ),
        Work::Index {
            table,
            alter,
            record,
        } => (
            Statement {
                offset: record.0,
                end: record.1,
                line: record.2,
                text: alter.clone().into_bytes(),
            },
            table.clone(),
        ),
    }
}

async fn ensure<'a>(
    ctx: &Ctx,
    conn: &'a mut Option<SessionConn>,
) -> Result<&'a mut SessionConn, mysql_async::Error> {
    if conn.is_none() {
        let c = SessionConn::open(&ctx.target).await.map_err(|e| {
            mysql_async::Error::Io(mysql_async::IoError::Io(std::io::Error::other(
                e.to_string(),
            )))
        })?;
        *conn = Some(c);
    }
    conn.as_mut().ok_or(mysql_async::Error::Driver(
        mysql_async::DriverError::ConnectionClosed,
    ))
}

async fn attempt_once(
    ctx: &Ctx,
    conn: &mut Option<SessionConn>,
    work: &Work,
    prelude_len: usize,
    fast_ok: bool,
) -> Outcome {
    let c = match ensure(ctx, conn).await {
        Ok(c) => c,
        Err(e) => return Outcome::Retry(e),
    };
    if let Err(e) = c.sync(&ctx.prelude, prelude_len).await {
        return if retryable(&e) {
            Outcome::Retry(e)
        } else {
            Outcome::Fail(0, e)
        };
    }
    match work {
        Work::Chunk(w) => match chunk_job::run(ctx, c, w, fast_ok).await {
            ChunkOutcome::Ok(rows) => Outcome::Ok(rows),
            ChunkOutcome::Retry(e) => Outcome::Retry(e),
            ChunkOutcome::Fail(f) => Outcome::Failed(f),
        },
        Work::Data { stmts, .. } => {
            let range = (stmts[0].offset, stmts[stmts.len() - 1].end);
            run_txn(ctx, c, stmts, range, fast_ok).await
        }
        Work::Index { alter, record, .. } => {
            let r = c.conn.query_drop(alter.as_str()).await;
            let r = match r {
                Err(mysql_async::Error::Server(s)) if ctx.shared.resuming && s.code == 1061 => {
                    Ok(())
                }
                other => other,
            };
            if let Err(e) = r {
                return if retryable(&e) {
                    Outcome::Retry(e)
                } else {
                    Outcome::Fail(0, e)
                };
            }
            let rec = journal::record_sql(&ctx.load_id, record.0, record.1, "ddl", 0);
            match c.conn.query_drop(rec).await {
                Ok(()) => Outcome::Ok(0),
                Err(e) if retryable(&e) => Outcome::Retry(e),
                Err(e) => Outcome::Fail(0, e),
            }
        }
    }
}

/// The batch as LOAD DATA groups, if every statement converts.
fn convert(stmts: &[Statement], backslash_escapes: bool) -> Option<Vec<Rows>> {
    let mut groups: Vec<Rows> = Vec::new();
    for s in stmts {
        let r = insert_to_rows(&s.text, backslash_escapes)?;
        match groups.last_mut() {
            Some(g)
                if g.table == r.table && g.columns == r.columns && g.duplicates == r.duplicates =>
            {
                g.tsv.extend_from_slice(&r.tsv);
                g.rows += r.rows;
            }
            _ => groups.push(r),
        }
    }
    Some(groups)
}

enum Fast {
    /// Loaded and committed: rows.
    Done(u64),
    /// Not applicable or not exact: run the INSERTs instead.
    Fallback,
    /// A connection problem: retry the batch.
    Retry(mysql_async::Error),
}

/// BEGIN; LOAD DATA LOCAL for each group; the journal record; COMMIT —
/// only if the server took every row without a warning. Anything else
/// rolls back and leaves the batch to the INSERT path, so results are
/// always what the INSERTs would give.
async fn try_fast(ctx: &Ctx, c: &mut SessionConn, stmts: &[Statement], range: (u64, u64)) -> Fast {
    if !ctx.fast_path.load(Ordering::Relaxed) {
        return Fast::Fallback;
    }
    let (charset, backslashes) = match c.charset().await {
        Ok(v) => v,
        Err(e) if retryable(&e) => return Fast::Retry(e),
        Err(_) => return Fast::Fallback,
    };
    let Some(groups) = convert(stmts, backslashes) else {
        return Fast::Fallback;
    };
    let check = |e: mysql_async::Error| {
        if retryable(&e) {
            Fast::Retry(e)
        } else {
            Fast::Fallback
        }
    };
    if let Err(e) = c.conn.query_drop("BEGIN").await {
        return check(e);
    }
    let mut rows = 0;
    for g in groups {
        let sql = g.load_sql("sqlfleet-batch", &charset);
        let expect = g.rows;
        let duplicates = g.duplicates;
        let data = bytes::Bytes::from(g.tsv);
        c.conn.set_infile_handler(async move {
            Ok(futures_util::stream::once(async move { Ok(data) }).boxed())
        });
        if let Err(e) = c.conn.query_drop(sql).await {
            let _ = c.conn.query_drop("ROLLBACK").await;
            if let mysql_async::Error::Server(s) = &e {
                // The server (or its settings) refuses LOCAL INFILE: stop trying.
                if matches!(s.code, 1148 | 3948 | 4166)
                    && ctx.fast_path.swap(false, Ordering::Relaxed)
                {
                    eprintln!(
                        "sqlfleet load: the server refuses LOAD DATA LOCAL ({}); loading with INSERT statements",
                        s.message
                    );
                }
            }
            return check(e);
        }
        let exact = c.conn.get_warnings() == 0
            && (duplicates == Duplicates::Replace || c.conn.affected_rows() == expect);
        if !exact {
            let _ = c.conn.query_drop("ROLLBACK").await;
            return Fast::Fallback;
        }
        rows += c.conn.affected_rows();
    }
    let rec = journal::record_sql(&ctx.load_id, range.0, range.1, "data", rows);
    if let Err(e) = c.conn.query_drop(rec).await {
        let _ = c.conn.query_drop("ROLLBACK").await;
        return check(e);
    }
    match c.conn.query_drop("COMMIT").await {
        Ok(()) => {
            ctx.shared
                .fast_statements
                .fetch_add(stmts.len() as u64, Ordering::Relaxed);
            Fast::Done(rows)
        }
        Err(e) => check(e),
    }
}

/// The fast path when it applies, else BEGIN; the statements; the
/// journal record; COMMIT.
async fn run_txn(
    ctx: &Ctx,
    c: &mut SessionConn,
    stmts: &[Statement],
    range: (u64, u64),
    fast_ok: bool,
) -> Outcome {
    let fast = if fast_ok {
        try_fast(ctx, c, stmts, range).await
    } else {
        Fast::Fallback
    };
    match fast {
        Fast::Done(rows) => return Outcome::Ok(rows),
        Fast::Retry(e) => return Outcome::Retry(e),
        Fast::Fallback => {
            if ctx.fast_path.load(Ordering::Relaxed) {
                ctx.shared.fast_fallbacks.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    let fail = |i: usize, e: mysql_async::Error| {
        if retryable(&e) {
            Outcome::Retry(e)
        } else {
            Outcome::Fail(i, e)
        }
    };
    if let Err(e) = c.conn.query_drop("BEGIN").await {
        return fail(0, e);
    }
    let mut rows = 0;
    for (i, s) in stmts.iter().enumerate() {
        if let Err(e) = c.conn.query_drop(&s.text[..]).await {
            let _ = c.conn.query_drop("ROLLBACK").await;
            return fail(i, e);
        }
        rows += c.conn.affected_rows();
    }
    let rec = journal::record_sql(&ctx.load_id, range.0, range.1, "data", rows);
    if let Err(e) = c.conn.query_drop(rec).await {
        let _ = c.conn.query_drop("ROLLBACK").await;
        return fail(0, e);
    }
    match c.conn.query_drop("COMMIT").await {
        Ok(()) => Outcome::Ok(rows),
        Err(e) => fail(0, e),
    }
}

/// After a batch failed for good: each statement alone, quarantining the
/// ones the server refuses.
async fn one_by_one(
    ctx: &Ctx,
    conn: &mut Option<SessionConn>,
    table: &str,
    stmts: &[Statement],
    prelude_len: usize,
) {
    for s in stmts {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let c = match ensure(ctx, conn).await {
                Ok(c) => c,
                Err(e) => {
                    ctx.shared.fail(failure_of(s, Some(table), &e));
                    return;
                }
            };
            if let Err(e) = c.sync(&ctx.prelude, prelude_len).await {
                ctx.shared.fail(failure_of(s, Some(table), &e));
                return;
            }
            match run_txn(ctx, c, std::slice::from_ref(s), (s.offset, s.end), false).await {
                Outcome::Ok(rows) => {
                    ctx.shared.rows.fetch_add(rows, Ordering::Relaxed);
                    ctx.shared.statements.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                Outcome::Retry(_) if attempt < MAX_ATTEMPTS => {
                    ctx.shared.retries.fetch_add(1, Ordering::Relaxed);
                    *conn = None;
                }
                Outcome::Failed(f) => {
                    ctx.shared.quarantine(s, &f);
                    break;
                }
                Outcome::Retry(e) | Outcome::Fail(_, e) => {
                    let f = failure_of(s, Some(table), &e);
                    ctx.shared.quarantine(s, &f);
                    // Journal it as handled, so --resume does not retry it.
                    if let Ok(c) = ensure(ctx, conn).await {
                        let _ = c
                            .conn
                            .query_drop(journal::record_sql(
                                &ctx.load_id,
                                s.offset,
                                s.end,
                                "quarantine",
                                0,
                            ))
                            .await;
                    }
                    break;
                }
            }
        }
    }
}

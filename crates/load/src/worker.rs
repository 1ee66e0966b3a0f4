//! Workers: one connection each, pulling batches from a shared queue.
//!
//! A data batch runs in one transaction together with its journal record;
//! deadlocks, lock-wait timeouts and lost connections retry the whole batch
//! (reconnecting and replaying the session prelude) a bounded number of
//! times. With `--continue-on-error` a batch that fails for good is re-run
//! statement by statement and only the failing statements are quarantined.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures_util::FutureExt;

use mysql_async::prelude::Queryable;
use sqlfleet_dump::Statement;

use crate::chunk_job::{self, ChunkOutcome};
use crate::counts::ServerCounts;
use crate::error::StatementFailure;
use crate::fast_path::{try_fast, Fast};
use crate::job::Work;
use crate::journal::{self, Record};
use crate::queue::{JobQueue, Lease};
use crate::retry::{self, needs_reconnect, retryable};
use crate::session::SessionConn;
use crate::state::{Ctx, WARNINGS_SHOWN};

/// Runs jobs until the queue closes.
pub async fn run(ctx: Arc<Ctx>, queue: Arc<JobQueue>, index: usize) {
    let slot = index.to_string();
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
        if !ctx.shared.past_failure(first) && !ctx.shared.is_interrupted() {
            // A panic in the work (a bug) stops the load there as a
            // failure, said with its place; before, the task was gone
            // and the load said "no errors" without its rows.
            let on_panic = failure_at(&job.work);
            let ran = std::panic::AssertUnwindSafe(process(
                &ctx,
                &mut conn,
                &slot,
                job.work,
                job.prelude_len,
                fast_ok,
            ))
            .catch_unwind()
            .await;
            if let Err(p) = ran {
                // (Its connection's state is unknown: dropped, so the
                // server rolls back what it had not committed.)
                conn = None;
                ctx.shared.fail(StatementFailure {
                    message: format!(
                        "an internal error stopped the load here ({}): {}",
                        sqlfleet_conn::text::A_BUG,
                        sqlfleet_conn::text::panic_message(p.as_ref())
                    ),
                    ..on_panic
                });
            }
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
    /// Stopped by an interrupt or an earlier failure in the file, and
    /// rolled back: nothing of it is applied or journaled.
    Stopped,
    /// Failed for good, already described (chunks).
    Failed(StatementFailure),
    /// Worth another attempt (see `retry`).
    Retry(mysql_async::Error),
    /// The statement at this index of the work failed.
    Fail(usize, mysql_async::Error),
    /// No connection, or its session could not be rebuilt: the work
    /// stops with this error.
    Broken(mysql_async::Error),
}

/// One attempt as [`retry::run`] sees it: a `Retry` is its error,
/// anything else its result.
fn tried(o: Outcome) -> Result<Outcome, mysql_async::Error> {
    match o {
        Outcome::Retry(e) => Err(e),
        o => Ok(o),
    }
}

/// Starts an attempt on a new connection when the retry policy says so
/// (the old one is gone: the prelude is replayed on the new one).
fn forget_if(fresh: bool, conn: &mut Option<SessionConn>) {
    if fresh {
        *conn = None;
    }
}

/// A batch, chunk or index step, tried whole.
struct Whole<'a> {
    ctx: &'a Ctx,
    conn: &'a mut Option<SessionConn>,
    slot: &'a str,
    work: &'a Work,
    prelude_len: usize,
    fast_ok: bool,
}

impl retry::Attempt for Whole<'_> {
    type Out = Outcome;
    async fn once(&mut self, fresh: bool) -> Result<Outcome, mysql_async::Error> {
        forget_if(fresh, self.conn);
        let (ctx, work) = (self.ctx, self.work);
        let o = attempt_once(
            ctx,
            self.conn,
            self.slot,
            work,
            self.prelude_len,
            self.fast_ok,
        )
        .await;
        // An interrupted load stops here: what failed meanwhile is most
        // likely its own stopping (and `--resume` runs it again anyway).
        if ctx.shared.is_interrupted() && !matches!(o, Outcome::Ok(_)) {
            return Ok(Outcome::Stopped);
        }
        tried(o)
    }
}

/// One statement on a connection it cannot leave.
struct OnItsConnection<'a> {
    conn: &'a mut SessionConn,
    text: &'a [u8],
}

impl retry::Attempt for OnItsConnection<'_> {
    type Out = ();
    async fn once(&mut self, _fresh: bool) -> Result<(), mysql_async::Error> {
        self.conn.conn.query_drop(self.text).await
    }
}

/// One statement of a failed batch, in a transaction of its own.
struct Alone<'a> {
    ctx: &'a Ctx,
    conn: &'a mut Option<SessionConn>,
    slot: &'a str,
    stmt: &'a Statement,
    table: &'a str,
    prelude_len: usize,
}

impl retry::Attempt for Alone<'_> {
    type Out = Outcome;
    async fn once(&mut self, fresh: bool) -> Result<Outcome, mysql_async::Error> {
        forget_if(fresh, self.conn);
        let (ctx, s, table) = (self.ctx, self.stmt, self.table);
        let c = match ensure(ctx, self.conn, self.slot).await {
            Ok(c) => c,
            Err(e) => return Ok(Outcome::Broken(e)),
        };
        if let Err(e) = c.sync(&ctx.prelude, self.prelude_len).await {
            return Ok(Outcome::Broken(e));
        }
        let record =
            |rows| journal::record_sql(&ctx.load_id, s.offset, s.end, "data", rows, Some(table));
        tried(run_txn(ctx, c, std::slice::from_ref(s), &record, false).await)
    }
}

pub(crate) async fn process(
    ctx: &Ctx,
    conn: &mut Option<SessionConn>,
    slot: &str,
    work: Work,
    prelude_len: usize,
    fast_ok: bool,
) {
    let whole = &mut Whole {
        ctx,
        conn,
        slot,
        work: &work,
        prelude_len,
        fast_ok,
    };
    let outcome = retry::run(&ctx.shared.retries, true, retry::Worth::Sorted, whole).await;
    match outcome {
        Ok(Outcome::Stopped) => (),
        Ok(Outcome::Ok(rows)) => {
            ctx.shared.rows.fetch_add(rows, Ordering::Relaxed);
            ctx.shared.batches.fetch_add(1, Ordering::Relaxed);
            let bytes = match &work {
                Work::Data { stmts, .. } => stmts[stmts.len() - 1].end - stmts[0].offset,
                Work::Chunk(w) => w.end - w.offset,
                Work::Index { .. } => 0,
            };
            ctx.shared.applied.fetch_add(bytes, Ordering::Relaxed);
            if let Work::Data { stmts, .. } = &work {
                ctx.shared
                    .statements
                    .fetch_add(stmts.len() as u64, Ordering::Relaxed);
            }
        }
        // The policy gave up.
        Err(e) | Ok(Outcome::Retry(e)) | Ok(Outcome::Broken(e)) => {
            if let Work::Chunk(w) = &work {
                let (code, msg) = crate::error::describe(&e);
                ctx.shared.fail(w.failure(code, msg));
            } else {
                let (stmt, table) = first_stmt(&work);
                ctx.shared
                    .fail(StatementFailure::of(&stmt, Some(&table), &e));
            }
        }
        Ok(Outcome::Failed(f)) => ctx.shared.fail(f),
        Ok(Outcome::Fail(i, e)) => match &work {
            Work::Data {
                table,
                stmts,
                nontx: false,
                ..
            } if ctx.continue_on_error => {
                one_by_one(ctx, conn, slot, table, stmts, prelude_len, (i, &e)).await;
            }
            Work::Data { table, stmts, .. } => {
                ctx.shared
                    .fail(StatementFailure::of(&stmts[i], Some(table), &e));
            }
            Work::Index { .. } | Work::Chunk(_) => {
                let (stmt, table) = first_stmt(&work);
                let f = StatementFailure::of(&stmt, Some(&table), &e);
                if ctx.continue_on_error {
                    ctx.shared.quarantine(&stmt, &f, prelude_len);
                } else {
                    ctx.shared.fail(f);
                }
            }
        },
    }
}

/// Where `work` starts, as a failure names it (without cloning a batch's
/// statements).
fn failure_at(work: &Work) -> StatementFailure {
    match work {
        Work::Data { table, stmts, .. } => StatementFailure::of_text(&stmts[0], Some(table)),
        Work::Chunk(w) => w.failure(None, String::new()),
        Work::Index { .. } => {
            let (stmt, table) = first_stmt(work);
            StatementFailure::of_text(&stmt, Some(&table))
        }
    }
}

fn first_stmt(work: &Work) -> (Statement, String) {
    match work {
        Work::Data { table, stmts, .. } => (stmts[0].clone(), table.clone()),
        Work::Chunk(w) => (
            Statement {
                offset: w.offset,
                end: w.end,
                line: w.record_lines.first().copied().unwrap_or(0),
                text: w.file.clone().into_bytes(),
                source: None,
                origin: None,
                vertical: false,
                dialect: Default::default(),
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
                source: None,
                origin: None,
                vertical: false,
                dialect: Default::default(),
            },
            table.clone(),
        ),
    }
}

/// The connection, opened if there is none. A new connection takes the
/// load's lock for `slot` (waiting while a killed run's connection in
/// that slot still runs a statement on the server), so a resume never
/// overlaps what an interrupted run left in flight.
pub(crate) async fn ensure<'a>(
    ctx: &Ctx,
    conn: &'a mut Option<SessionConn>,
    slot: &str,
) -> Result<&'a mut SessionConn, mysql_async::Error> {
    if conn.is_none() {
        let mut c = SessionConn::open(&ctx.target, ctx.binlog)
            .await
            .map_err(|e| {
                mysql_async::Error::Io(mysql_async::IoError::Io(std::io::Error::other(
                    e.to_string(),
                )))
            })?;
        // Not waited for: an old connection of this run that still holds
        // the slot is gone from our side and ends with its statement.
        c.conn
            .query_drop(journal::slot_lock_sql(&ctx.load_id, slot))
            .await?;
        *conn = Some(c);
    }
    conn.as_mut().ok_or(mysql_async::Error::Driver(
        mysql_async::DriverError::ConnectionClosed,
    ))
}

async fn attempt_once(
    ctx: &Ctx,
    conn: &mut Option<SessionConn>,
    slot: &str,
    work: &Work,
    prelude_len: usize,
    fast_ok: bool,
) -> Outcome {
    let c = match ensure(ctx, conn, slot).await {
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
        Work::Data {
            stmts,
            table,
            chain,
            nontx,
            generates_ids,
            auto_inc,
        } => {
            let range = (stmts[0].offset, stmts[stmts.len() - 1].end);
            let record = |kind: &'static str, rows: u64| {
                Record {
                    load_id: &ctx.load_id,
                    start: range.0,
                    end: range.1,
                    kind,
                    rows,
                    table: Some(table),
                    chain: Some(chain),
                }
                .sql()
            };
            if *nontx {
                run_nontx(ctx, c, table, stmts, &record, prelude_len).await
            } else {
                // LOAD DATA LOCAL skips duplicate keys (as IGNORE) and so
                // goes past a row the INSERTs stop at; rolled back, the ids
                // of the rows after it stay used. With --continue-on-error a
                // failing batch's counter must stay the stock client's.
                let fast_ok = fast_ok && !generates_ids && !(ctx.continue_on_error && *auto_inc);
                run_txn(ctx, c, stmts, &|rows| record("data", rows), fast_ok).await
            }
        }
        Work::Index { alter, record, .. } => {
            let r = c.conn.query_drop(alter.as_str()).await;
            let r = match r {
                Err(mysql_async::Error::Server(s))
                    if ctx.shared.resuming && s.code == sqlfleet_conn::codes::KEY_EXISTS =>
                {
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
            let rec = journal::record_sql(&ctx.load_id, record.0, record.1, "ddl", 0, None);
            match c.conn.query_drop(rec).await {
                Ok(()) => Outcome::Ok(0),
                Err(e) if retryable(&e) => Outcome::Retry(e),
                Err(e) => Outcome::Fail(0, e),
            }
        }
    }
}

/// The fast path when it applies, else BEGIN; the statements; the
/// journal record; COMMIT.
async fn run_txn(
    ctx: &Ctx,
    c: &mut SessionConn,
    stmts: &[Statement],
    record: &(dyn Fn(u64) -> String + Sync),
    fast_ok: bool,
) -> Outcome {
    let fast = if fast_ok {
        try_fast(ctx, c, stmts, record).await
    } else {
        Fast::Fallback
    };
    match fast {
        Fast::Done(rows) => return Outcome::Ok(rows),
        _ if ctx.shared.stops(stmts[0].offset) => return Outcome::Stopped,
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
    if let Err(e) = c.conn.query_drop("START TRANSACTION").await {
        return fail(0, e);
    }
    let flight = crate::state::InFlight::new(&ctx.shared);
    let mut rows = 0;
    let mut warnings = 0;
    // What the server said of each statement, counted once committed.
    let mut counts = ServerCounts::default();
    let mut texts = Vec::new();
    for (i, s) in stmts.iter().enumerate() {
        if ctx.shared.stops(stmts[0].offset) {
            let _ = c.conn.query_drop("ROLLBACK").await;
            return Outcome::Stopped;
        }
        flight.add(s.end - s.offset);
        if let Err(e) = c.conn.query_drop(&s.text[..]).await {
            let _ = c.conn.query_drop("ROLLBACK").await;
            return fail(i, e);
        }
        let (affected, warned) = (c.conn.affected_rows(), c.conn.get_warnings());
        rows += affected;
        warnings += u64::from(warned);
        counts.add(
            ServerCounts::from_info(&c.conn.info())
                .unwrap_or_else(|| ServerCounts::from_ok(affected, warned)),
        );
        if warned > 0 && texts.len() < WARNINGS_SHOWN && !ctx.shared.warnings_full() {
            match warning_texts(c, s).await {
                Ok(t) => texts.extend(t),
                Err(e) => {
                    let _ = c.conn.query_drop("ROLLBACK").await;
                    return fail(i, e);
                }
            }
        }
    }
    sqlfleet_faults::point!("load::batch_sent");
    if ctx.shared.stops(stmts[0].offset) {
        let _ = c.conn.query_drop("ROLLBACK").await;
        return Outcome::Stopped;
    }
    if let Err(e) = c.conn.query_drop(record(rows)).await {
        let _ = c.conn.query_drop("ROLLBACK").await;
        return fail(0, e);
    }
    sqlfleet_faults::point!("load::batch_journaled");
    match c.conn.query_drop("COMMIT").await {
        Ok(()) => {
            sqlfleet_faults::point!("load::batch_committed");
            // Counted once committed: a batch retried is not counted twice.
            ctx.shared.warnings.fetch_add(warnings, Ordering::Relaxed);
            ctx.shared.add_counts(counts);
            for t in &texts {
                if !ctx.shared.keep_warning(t) {
                    break;
                }
                crate::progress::say(&format!("warning: {t}"));
            }
            Outcome::Ok(rows)
        }
        Err(e) => fail(0, e),
    }
}

/// What the server said of statement `s`, just run on `c` and applied for
/// good on its own (outside a batch's transaction: a non-transactional
/// table's statement, a DDL, a statement that waits for everything): its
/// reply counted now and, with `texts`, its first warnings shown, as a
/// batch's are once committed. The texts are best effort (the count is
/// the reply's): the statement is never run again for them. `texts` is
/// false where the file's next statement may read what this one left in
/// the session: `SHOW WARNINGS` sets ROW_COUNT() to -1, so a file run as
/// written on one connection gets no statement of ours between its own.
/// Returns its affected rows.
pub async fn count_applied(ctx: &Ctx, c: &mut SessionConn, s: &Statement, texts: bool) -> u64 {
    let (affected, warned) = (c.conn.affected_rows(), c.conn.get_warnings());
    ctx.shared
        .warnings
        .fetch_add(u64::from(warned), Ordering::Relaxed);
    ctx.shared.add_counts(
        ServerCounts::from_info(&c.conn.info())
            .unwrap_or_else(|| ServerCounts::from_ok(affected, warned)),
    );
    if texts && warned > 0 && !ctx.shared.warnings_full() {
        if let Ok(texts) = warning_texts(c, s).await {
            for t in &texts {
                if !ctx.shared.keep_warning(t) {
                    break;
                }
                crate::progress::say(&format!("warning: {t}"));
            }
        }
    }
    affected
}

/// The server's warnings of the statement `s` just ran on `c` (the first
/// [`WARNINGS_SHOWN`]), each with the dump line it came from, worded as
/// `SHOW WARNINGS` words it.
async fn warning_texts(
    c: &mut SessionConn,
    s: &Statement,
) -> Result<Vec<String>, mysql_async::Error> {
    let rows: Vec<(String, u16, String)> = c
        .conn
        .query(format!("SHOW WARNINGS LIMIT {WARNINGS_SHOWN}"))
        .await?;
    let place = match &s.origin {
        Some(file) if s.line == 0 => file.to_string(),
        Some(file) => format!("{file} line {}", s.line),
        None => format!("line {}", s.line),
    };
    Ok(rows
        .into_iter()
        .map(|(level, code, msg)| format!("{place}: {level} {code}: {msg}"))
        .collect())
}

/// A batch into a table that cannot roll back (MyISAM, Aria): a pending
/// journal row first, then each statement exactly once (no fast path, no
/// retry once a statement may have written rows), then the final record.
/// A failing statement keeps whatever rows it wrote, as with the stock
/// client; a lost connection leaves the pending row, so `--resume`
/// empties the table and loads its data again.
async fn run_nontx(
    ctx: &Ctx,
    c: &mut SessionConn,
    table: &str,
    stmts: &[Statement],
    record: &(dyn Fn(&'static str, u64) -> String + Sync),
    prelude_len: usize,
) -> Outcome {
    let journal = |sql: String| format!("START TRANSACTION; {sql}; COMMIT");
    if let Err(e) = c.conn.query_drop(journal(record("pending-data", 0))).await {
        // Nothing of the batch ran yet: an ordinary retry is exact.
        return if retryable(&e) {
            Outcome::Retry(e)
        } else {
            Outcome::Fail(0, e)
        };
    }
    let lost = |s: &Statement, e: &mysql_async::Error| {
        let mut f = StatementFailure::of(s, Some(table), e);
        f.message.push_str(&format!(
            " (the connection was lost while loading non-transactional table {table}: rows of this batch may be partly in; rerun with --resume, which empties {table} and loads its data again)"
        ));
        Outcome::Failed(f)
    };
    let mut rows = 0;
    for s in stmts {
        if ctx.shared.stops(stmts[0].offset) {
            // The pending record stays: `--resume` empties the table and
            // loads its data again, as after a lost connection.
            return Outcome::Stopped;
        }
        // A lock wait or deadlock: the statement did not run; a lost
        // connection cannot move (part of the batch may be in).
        let text = &s.text[..];
        let one = &mut OnItsConnection { conn: c, text };
        let r = retry::run(&ctx.shared.retries, false, retry::Worth::Retryable, one).await;
        match r {
            // Applied for good (no transaction): counted now.
            Ok(()) => rows += count_applied(ctx, c, s, true).await,
            Err(e) if needs_reconnect(&e) => return lost(s, &e),
            Err(e) => {
                let mut f = StatementFailure::of(s, Some(table), &e);
                if !ctx.continue_on_error {
                    return Outcome::Failed(f);
                }
                f.message.push_str(&format!(
                    " (table {table} is non-transactional: rows this statement wrote before the error stay, as with the stock client)"
                ));
                ctx.shared.quarantine(s, &f, prelude_len);
                rows += c.conn.affected_rows();
            }
        }
    }
    match c.conn.query_drop(journal(record("data", rows))).await {
        Ok(()) => Outcome::Ok(rows),
        Err(e) => lost(&stmts[stmts.len() - 1], &e),
    }
}

/// Quarantines a statement and journals it as handled, so `--resume`
/// does not run it again.
async fn set_aside(
    ctx: &Ctx,
    conn: &mut Option<SessionConn>,
    slot: &str,
    s: &Statement,
    f: &StatementFailure,
    prelude_len: usize,
) {
    ctx.shared.quarantine(s, f, prelude_len);
    if let Ok(c) = ensure(ctx, conn, slot).await {
        let table = f.table.as_deref();
        let rec = journal::record_sql(&ctx.load_id, s.offset, s.end, "quarantine", 0, table);
        let _ = c
            .conn
            .query_drop(format!("START TRANSACTION; {rec}; COMMIT"))
            .await;
    }
}

/// After a batch failed for good: each statement alone, quarantining the
/// ones the server refuses.
///
/// The statement that failed the batch (`failed`) is not run again: it is
/// quarantined with its error, as the stock client runs each statement
/// once (a second run would fire its triggers and use AUTO_INCREMENT
/// values again).
async fn one_by_one(
    ctx: &Ctx,
    conn: &mut Option<SessionConn>,
    slot: &str,
    table: &str,
    stmts: &[Statement],
    prelude_len: usize,
    failed: (usize, &mysql_async::Error),
) {
    for (idx, s) in stmts.iter().enumerate() {
        if idx == failed.0 {
            let f = StatementFailure::of(s, Some(table), failed.1);
            set_aside(ctx, conn, slot, s, &f, prelude_len).await;
            continue;
        }
        let alone = &mut Alone {
            ctx,
            conn,
            slot,
            stmt: s,
            table,
            prelude_len,
        };
        let outcome = retry::run(&ctx.shared.retries, true, retry::Worth::Sorted, alone).await;
        match outcome {
            Ok(Outcome::Stopped) => return,
            Ok(Outcome::Broken(e)) => {
                ctx.shared.fail(StatementFailure::of(s, Some(table), &e));
                return;
            }
            Ok(Outcome::Ok(rows)) => {
                ctx.shared.rows.fetch_add(rows, Ordering::Relaxed);
                ctx.shared.statements.fetch_add(1, Ordering::Relaxed);
                ctx.shared
                    .applied
                    .fetch_add(s.end - s.offset, Ordering::Relaxed);
            }
            Ok(Outcome::Failed(f)) => ctx.shared.quarantine(s, &f, prelude_len),
            Err(e) | Ok(Outcome::Retry(e)) | Ok(Outcome::Fail(_, e)) => {
                let f = StatementFailure::of(s, Some(table), &e);
                set_aside(ctx, conn, slot, s, &f, prelude_len).await;
            }
        }
    }
}

//! Running statements on many hosts at once.
//!
//! One task per host, at most `parallel` connected at a time. Rows stream
//! to one output task through a bounded channel in blocks, so memory is
//! bounded by the rows in flight, not by the size of the fleet. Three
//! clocks: the connect timeout, the per-query timeout (enforced by the
//! server with `SET STATEMENT max_statement_time` on MariaDB SELECTs, and
//! by a `KILL QUERY` from a side connection when we give up), and the
//! overall deadline after which unfinished hosts are reported as timed out.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use sqlfleet_conn::Target;
use sqlfleet_wire::client::{Client, Step};
use sqlfleet_wire::WireError;
use tokio::sync::{mpsc, Semaphore};

use crate::hosts::Host;
use crate::output::{self, Format, Outcome, Value};
use crate::read_only;

#[derive(Debug, Clone)]
pub enum Databases {
    /// The connection's default database only.
    Default,
    List(Vec<String>),
    /// Every database but the system ones.
    All,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Stream,
    Collapse,
    Diff,
}

#[derive(Debug, Clone)]
pub struct QueryOptions {
    pub base: Target,
    pub hosts: Vec<Host>,
    pub statements: Vec<String>,
    pub databases: Databases,
    pub parallel: usize,
    pub connect_timeout: Duration,
    pub query_timeout: Option<Duration>,
    pub deadline: Option<Duration>,
    pub format: Format,
    pub header: bool,
    pub mode: Mode,
    /// Host tags shown as columns after the host (`--tags node,role`).
    pub tag_columns: Vec<String>,
    /// Becomes true on the first Ctrl-C: statements in flight are stopped
    /// with KILL QUERY and their hosts reported as interrupted.
    pub interrupt: Option<tokio::sync::watch::Receiver<bool>>,
    /// Counts hosts as they finish (for a progress line), when given.
    pub finished: Option<std::sync::Arc<std::sync::atomic::AtomicUsize>>,
    /// Run writes on servers that report read_only = ON (off: their
    /// sessions are made read-only first, see [`crate::read_only`]).
    pub writes_on_read_only: bool,
    /// Which host runs each Galera cluster's writes (shared by the run's
    /// hosts; `Default` for a run).
    pub clusters: read_only::Clusters,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Ok,
    Error,
    Timeout,
    /// No connection to the server (refused, no route, no answer to the
    /// TCP handshake): "down" in watch's words.
    Unreachable,
    /// Something accepts the connection but sends no greeting, or the
    /// login does not finish in time (a SIGSTOPped or overloaded server):
    /// "stalled", as watch says.
    Stalled,
    /// Stopped by the user (Ctrl-C): the statement was killed or not run.
    Interrupted,
}

#[derive(Debug, Clone, Serialize)]
pub struct HostStatus {
    pub host: String,
    pub state: State,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub rows: u64,
    pub seconds: f64,
    /// Of `seconds`: waiting for a slot (`--parallel`), then logging in;
    /// the rest ran the statements and handed the rows to the output.
    pub queued_seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub login_seconds: Option<f64>,
    /// With -B / --all-databases: how each database went.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub databases: Vec<DatabaseStatus>,
}

/// One database's outcome on one host (-B / --all-databases).
#[derive(Debug, Clone, Serialize)]
pub struct DatabaseStatus {
    pub database: String,
    pub state: State,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub rows: u64,
}

/// What one host's work came to.
struct HostResult {
    state: State,
    message: Option<String>,
    rows: u64,
    databases: Vec<DatabaseStatus>,
    login: Option<Duration>,
}

impl HostResult {
    fn of(state: State, message: Option<String>, rows: u64) -> HostResult {
        HostResult {
            state,
            message,
            rows,
            databases: Vec::new(),
            login: None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub hosts: usize,
    /// Hosts whose result differs from the majority's (the largest group
    /// of equal results).
    pub differing: usize,
    pub ok: usize,
    pub error: usize,
    pub timeout: usize,
    pub unreachable: usize,
    pub stalled: usize,
    pub interrupted: usize,
    /// With -B / --all-databases: (host, database) pairs that ran clean.
    pub databases_ok: usize,
    pub databases_failed: usize,
    pub seconds: f64,
    /// Where the run's time went.
    pub timing: Timing,
    pub statuses: Vec<HostStatus>,
}

/// Where a run's wall time went (seconds from its start) and what one
/// host's work cost, for finding the slow part of a big run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timing {
    /// Every host's task spawned (set-up before the first connect).
    pub spawned: f64,
    /// The last login finished.
    pub last_login: f64,
    /// The last host finished its statements.
    pub last_host: f64,
    /// Per host, median and worst: login, and statements with their rows.
    pub login_p50: f64,
    pub login_max: f64,
    pub statements_p50: f64,
    pub statements_max: f64,
}

impl Timing {
    fn of(statuses: &[HostStatus], spawned: f64, ends: &[(f64, f64)]) -> Timing {
        let mut login: Vec<f64> = statuses.iter().filter_map(|s| s.login_seconds).collect();
        let mut stmts: Vec<f64> = statuses
            .iter()
            .filter_map(|s| {
                s.login_seconds
                    .map(|l| (s.seconds - s.queued_seconds - l).max(0.0))
            })
            .collect();
        let p50 = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(0.0)
        };
        Timing {
            spawned,
            last_login: ends.iter().map(|e| e.0).fold(0.0, f64::max),
            last_host: ends.iter().map(|e| e.1).fold(0.0, f64::max),
            login_p50: p50(&mut login),
            login_max: login.last().copied().unwrap_or(0.0),
            statements_p50: p50(&mut stmts),
            statements_max: stmts.last().copied().unwrap_or(0.0),
        }
    }
}

enum Event {
    Rows {
        host: String,
        db: Option<String>,
        columns: Arc<Vec<String>>,
        /// How each column's values are written in jsonl.
        kinds: Arc<Vec<crate::json::Kind>>,
        /// Which result set of the host's output (0 for the first).
        set: usize,
        rows: Vec<Vec<Value>>,
    },
    Outcome {
        host: String,
        outcome: Outcome,
    },
}

const BLOCK_ROWS: usize = 256;
const SYSTEM_DBS: &[&str] = &["information_schema", "performance_schema", "mysql", "sys"];

/// Runs everything; rows go to `out` as they arrive. Returns per-host status.
pub async fn run(opts: QueryOptions, out: Box<dyn Write + Send>) -> std::io::Result<Report> {
    let started = Instant::now();
    let deadline = opts.deadline.map(|d| started + d);
    let (tx, rx) = mpsc::channel::<Event>(64);
    let (batches, to_writer) = mpsc::channel::<Vec<Event>>(2);
    tokio::spawn(batch_events(rx, batches));
    let writer = tokio::task::spawn_blocking({
        let shape = Shape {
            fmt: opts.format,
            header: opts.header,
            mode: opts.mode,
            with_db: !matches!(opts.databases, Databases::Default),
            charset: opts
                .base
                .charset
                .as_deref()
                .map_or(output::Multibyte::AsciiSafe, output::Multibyte::of_charset),
        };
        let tags = Tags {
            names: opts.tag_columns.clone(),
            by_host: opts
                .hosts
                .iter()
                .map(|h| {
                    let values = opts
                        .tag_columns
                        .iter()
                        .map(|k| h.tags.get(k).cloned().unwrap_or_default())
                        .collect();
                    (h.addr(), values)
                })
                .collect(),
        };
        move || write_output(to_writer, out, shape, tags)
    });
    let sem = Arc::new(Semaphore::new(opts.parallel.max(1)));
    let opts = Arc::new(opts);
    let mut tasks = Vec::with_capacity(opts.hosts.len());
    for h in opts.hosts.clone() {
        let (sem, tx, opts) = (sem.clone(), tx.clone(), opts.clone());
        tasks.push((
            h.addr(),
            tokio::spawn(async move {
                let addr = h.addr();
                let t0 = Instant::now();
                let mut queued = Duration::ZERO;
                let work = async {
                    let _permit = sem.acquire().await.ok();
                    queued = t0.elapsed();
                    sqlfleet_faults::point!("query::host_started");
                    if interrupted(&opts) {
                        return HostResult::of(
                            State::Interrupted,
                            Some("not run: interrupted".into()),
                            0,
                        );
                    }
                    // Boxed: a host's work is a few KiB of state, held only
                    // while it runs (at most --threads at once), not by every
                    // task from the start (a page touched per host otherwise).
                    Box::pin(host_work(&opts, &h, &tx, deadline)).await
                };
                let r = match deadline {
                    Some(d) => match tokio::time::timeout_at(d.into(), work).await {
                        Ok(r) => r,
                        Err(_) => HostResult::of(
                            State::Timeout,
                            Some("overall deadline passed before this host finished".into()),
                            0,
                        ),
                    },
                    None => work.await,
                };
                let end = started.elapsed().as_secs_f64();
                if let Some(f) = &opts.finished {
                    f.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                let login_end = r.login.map(|l| (t0 + queued + l - started).as_secs_f64());
                (
                    HostStatus {
                        host: addr,
                        state: r.state,
                        message: r.message,
                        rows: r.rows,
                        seconds: t0.elapsed().as_secs_f64(),
                        queued_seconds: queued.as_secs_f64(),
                        login_seconds: r.login.map(|l| l.as_secs_f64()),
                        databases: r.databases,
                    },
                    (login_end.unwrap_or(0.0), end),
                )
            }),
        ));
    }
    drop(tx);
    let spawned = started.elapsed().as_secs_f64();
    let mut statuses = Vec::with_capacity(tasks.len());
    let mut ends = Vec::with_capacity(tasks.len());
    for (host, t) in tasks {
        let (st, end) = joined(host, t.await, started);
        statuses.push(st);
        ends.push(end);
    }
    let differing = writer.await.map_err(std::io::Error::other)??;
    let count = |s: State| statuses.iter().filter(|x| x.state == s).count();
    Ok(Report {
        differing,
        hosts: statuses.len(),
        ok: count(State::Ok),
        error: count(State::Error),
        timeout: count(State::Timeout),
        unreachable: count(State::Unreachable),
        stalled: count(State::Stalled),
        interrupted: count(State::Interrupted),
        databases_ok: statuses
            .iter()
            .flat_map(|s| &s.databases)
            .filter(|d| d.state == State::Ok)
            .count(),
        databases_failed: statuses
            .iter()
            .flat_map(|s| &s.databases)
            .filter(|d| d.state != State::Ok)
            .count(),
        seconds: started.elapsed().as_secs_f64(),
        timing: Timing::of(&statuses, spawned, &ends),
        statuses,
    })
}

/// A host's task as it ended: its status and (login end, end); one that
/// panicked (a bug) is that host's error, counted and said — never a host
/// left out of the report.
fn joined(
    host: String,
    r: Result<(HostStatus, (f64, f64)), tokio::task::JoinError>,
    started: Instant,
) -> (HostStatus, (f64, f64)) {
    match r {
        Ok(done) => done,
        Err(e) => {
            let end = started.elapsed().as_secs_f64();
            let why = sqlfleet_conn::text::join_message(e);
            let st = HostStatus {
                host,
                state: State::Error,
                message: Some(format!(
                    "an internal error stopped this host's work ({}): {why}",
                    sqlfleet_conn::text::A_BUG
                )),
                rows: 0,
                seconds: end,
                queued_seconds: 0.0,
                login_seconds: None,
                databases: Vec::new(),
            };
            (st, (0.0, end))
        }
    }
}

/// Hands the hosts' events to the writer thread in batches: what has
/// arrived by the time this task runs again goes in one hand-over, so the
/// writer thread wakes once per batch, not once per host (on a thousand
/// hosts of one row each, those wake-ups were a tenth of the client's CPU).
async fn batch_events(mut rx: mpsc::Receiver<Event>, to_writer: mpsc::Sender<Vec<Event>>) {
    const BATCH: usize = 64;
    while let Some(ev) = rx.recv().await {
        let mut batch = Vec::with_capacity(BATCH);
        batch.push(ev);
        // Let the hosts that are ready run first: their events join this batch.
        tokio::task::yield_now().await;
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(ev) => batch.push(ev),
                Err(_) => break,
            }
        }
        if to_writer.send(batch).await.is_err() {
            return;
        }
    }
}

fn interrupted(opts: &QueryOptions) -> bool {
    opts.interrupt.as_ref().is_some_and(|r| *r.borrow())
}

/// Resolves when the user interrupts (never without an interrupt channel).
async fn on_interrupt(opts: &QueryOptions) {
    match opts.interrupt.clone() {
        Some(mut r) => {
            while !*r.borrow_and_update() {
                if r.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        }
        None => std::future::pending::<()>().await,
    }
}

/// Connects, runs every statement in every database; returns the state.
async fn host_work(
    opts: &QueryOptions,
    h: &Host,
    tx: &mpsc::Sender<Event>,
    deadline: Option<Instant>,
) -> HostResult {
    let target = h.target(&opts.base);
    let addr = h.addr();
    let dialing = Instant::now();
    let conn = match target.dial(opts.connect_timeout).await {
        Ok(c) => c,
        Err(e) => {
            let stalled = e.timed_out
                && matches!(
                    e.stage,
                    Some(sqlfleet_conn::Stage::Greeting) | Some(sqlfleet_conn::Stage::Login)
                );
            let (state, what) = if e.server_code().is_some() {
                (State::Error, e.what)
            } else if stalled {
                // The client's own words for it, under watch's name.
                (State::Stalled, format!("stalled: {}", e.what))
            } else {
                (State::Unreachable, e.what)
            };
            return HostResult::of(state, Some(what), 0);
        }
    };
    let login = dialing.elapsed();
    let mut r = statements(opts, &target, conn, &addr, tx, deadline).await;
    r.login = Some(login);
    r
}

/// Runs every statement in every database on a logged-in connection.
async fn statements(
    opts: &QueryOptions,
    target: &Target,
    mut conn: Client,
    addr: &str,
    tx: &mpsc::Sender<Event>,
    deadline: Option<Instant>,
) -> HostResult {
    let mariadb = conn.is_mariadb();
    let guarded = match keep_read_only(opts, &mut conn, addr).await {
        Ok(on) => on,
        Err(refused) => return refused,
    };
    let dbs = match databases(&opts.databases, &mut conn).await {
        Ok(dbs) => dbs,
        Err(e) => return HostResult::of(State::Error, Some(describe(&e)), 0),
    };
    let mut outcome = Outcome {
        columns: Vec::new(),
        rows: Vec::new(),
        error: None,
    };
    let mut total = 0;
    // Each database runs on its own: a failure in one (USE, a statement) is
    // reported for it and the next one still runs.
    let mut per_db: Vec<DatabaseStatus> = Vec::new();
    for (d_at, db) in dbs.iter().enumerate() {
        let before = total;
        let mut db_result: (State, Option<String>) = (State::Ok, None);
        // Result sets of this host (and database), numbered from 0 over
        // its statements: jsonl rows carry the number.
        let mut sets = 0usize;
        if let Some(d) = db {
            if let Err(e) = conn.use_db(d).await {
                let msg = format!("USE {d}: {}", describe(&e));
                if opts.mode != Mode::Stream && outcome.error.is_none() {
                    outcome.error = Some(msg.clone());
                }
                per_db.push(DatabaseStatus {
                    database: d.clone(),
                    state: State::Error,
                    message: Some(msg),
                    rows: 0,
                });
                continue;
            }
        }
        for (s_at, stmt) in opts.statements.iter().enumerate() {
            // The connection's last command takes its COM_QUIT along.
            let last = d_at + 1 == dbs.len() && s_at + 1 == opts.statements.len();
            let limit = statement_limit(opts.query_timeout, deadline);
            let sql = bounded(stmt, limit, mariadb);
            let id = conn.id();
            let run = run_statement(
                &mut conn,
                &sql,
                Dest {
                    addr,
                    db: db.as_deref(),
                    tx,
                    mode: opts.mode,
                    last,
                },
                &mut outcome,
                &mut sets,
            );
            let limited = async {
                match limit {
                    Some(l) => tokio::time::timeout(l + Duration::from_millis(50), run)
                        .await
                        .map_err(|_| l),
                    None => Ok(run.await),
                }
            };
            let limited = tokio::select! {
                r = limited => Some(r),
                _ = on_interrupt(opts) => None,
            };
            // Ctrl-C (as the mysql client: stop the statement on the
            // server) or past the time limit: the statement is killed, the
            // connection (mid-result) dropped, the host reported.
            let r = match limited {
                Some(Ok(r)) => r,
                stopped => {
                    // The kill is tried first: the status says what
                    // happened to it, never that it was sent when it was not.
                    let killed = kill_query(target, id, opts.connect_timeout).await;
                    drop(conn);
                    let timed_out = match stopped {
                        Some(Err(l)) => Some(l),
                        _ => None,
                    };
                    let (state, msg) = stopped_status(timed_out, id, &killed);
                    if opts.mode != Mode::Stream {
                        outcome.error = Some(msg.clone());
                        let _ = tx
                            .send(Event::Outcome {
                                host: addr.to_string(),
                                outcome,
                            })
                            .await;
                    }
                    return HostResult::of(state, Some(msg), total);
                }
            };
            match r {
                Ok(n) => total += n,
                Err(e) => {
                    let (state, said) = failed(&e, &guarded);
                    let msg = match db {
                        Some(d) if dbs.len() > 1 => format!("{d}: {said}"),
                        _ => said,
                    };
                    if outcome.error.is_none() {
                        outcome.error = Some(msg.clone());
                    }
                    db_result = (state, Some(msg));
                    break;
                }
            }
        }
        per_db.push(DatabaseStatus {
            database: db.clone().unwrap_or_default(),
            state: db_result.0,
            message: db_result.1,
            rows: total - before,
        });
    }
    let result = host_verdict(&per_db);
    if matches!(opts.databases, Databases::Default) {
        per_db.clear();
    }
    if opts.mode != Mode::Stream {
        let _ = tx
            .send(Event::Outcome {
                host: addr.to_string(),
                outcome,
            })
            .await;
    }
    conn.quit().await;
    HostResult {
        state: result.0,
        message: result.1,
        rows: total,
        databases: per_db,
        login: None,
    }
}

/// Makes a read-only server's session read-only when the statements may
/// write ([`read_only`]); how, or the host's result when that failed
/// (then nothing ran).
async fn keep_read_only(
    opts: &QueryOptions,
    conn: &mut Client,
    addr: &str,
) -> Result<read_only::Guard, HostResult> {
    if !read_only::needs_guard(&opts.statements, opts.writes_on_read_only) {
        return Ok(read_only::Guard::Open);
    }
    read_only::keep(conn, addr, &opts.clusters)
        .await
        .map_err(|e| {
            let msg = format!(
                "{}: could not set up a session for statements that may write; nothing ran",
                describe(&e)
            );
            HostResult::of(State::Error, Some(msg), 0)
        })
}

/// A failed statement's state (the server's own statement timeouts are
/// timeouts) and words, with what a read-only session's refusal means.
fn failed(e: &WireError, guarded: &read_only::Guard) -> (State, String) {
    match e {
        WireError::Server { code, .. } => (
            match code {
                1969 | 3024 => State::Timeout,
                _ => State::Error,
            },
            match read_only::explain(*code, guarded) {
                Some(why) => format!("{}; {why}", describe(e)),
                None => describe(e),
            },
        ),
        _ => (State::Error, describe(e)),
    }
}

/// The databases the statements run in (`None`: the connection's own).
async fn databases(d: &Databases, conn: &mut Client) -> Result<Vec<Option<String>>, WireError> {
    Ok(match d {
        Databases::Default => vec![None],
        Databases::List(l) => l.iter().cloned().map(Some).collect(),
        Databases::All => conn
            .column("SHOW DATABASES")
            .await?
            .into_iter()
            .flatten()
            .filter(|d| !SYSTEM_DBS.contains(&d.as_str()))
            .map(Some)
            .collect(),
    })
}

/// How long a statement may run: the --query-timeout, within what is
/// left of the host's deadline.
fn statement_limit(query_timeout: Option<Duration>, deadline: Option<Instant>) -> Option<Duration> {
    match (query_timeout, deadline) {
        (Some(q), Some(d)) => Some(q.min(d.saturating_duration_since(Instant::now()))),
        (q, Some(d)) => Some(
            q.unwrap_or(Duration::MAX)
                .min(d.saturating_duration_since(Instant::now())),
        ),
        (q, None) => q,
    }
}

/// A SELECT on MariaDB bounded by the server too (max_statement_time).
fn bounded(stmt: &str, limit: Option<Duration>, mariadb: bool) -> String {
    match (limit, mariadb) {
        (Some(l), true) if is_select(stmt) => format!(
            "SET STATEMENT max_statement_time = {:.3} FOR {stmt}",
            l.as_secs_f64().max(0.001)
        ),
        _ => stmt.to_string(),
    }
}

/// The status of a host whose statement was stopped: past its time
/// limit (`timed_out`), or interrupted; and what became of the kill.
fn stopped_status(
    timed_out: Option<Duration>,
    id: u32,
    killed: &Result<(), String>,
) -> (State, String) {
    match timed_out {
        Some(l) => (
            State::Timeout,
            format!(
                "query timed out after {:.1}s ({})",
                l.as_secs_f64(),
                kill_note(id, killed)
            ),
        ),
        None => (
            State::Interrupted,
            format!("interrupted ({})", kill_note(id, killed)),
        ),
    }
}

/// A host's state and message from its databases': the first failure's,
/// counting the others.
fn host_verdict(per_db: &[DatabaseStatus]) -> (State, Option<String>) {
    let failed: Vec<&DatabaseStatus> = per_db.iter().filter(|d| d.state != State::Ok).collect();
    match failed.first() {
        None => (State::Ok, None),
        Some(f) => (
            f.state,
            Some(match failed.len() {
                1 => f.message.clone().unwrap_or_default(),
                n => format!(
                    "{} (and {} more database{})",
                    f.message.clone().unwrap_or_default(),
                    n - 1,
                    if n == 2 { "" } else { "s" }
                ),
            }),
        ),
    }
}

fn is_select(stmt: &str) -> bool {
    let s = stmt.trim_start().to_ascii_uppercase();
    s.starts_with("SELECT") || s.starts_with("WITH")
}

fn describe(e: &WireError) -> String {
    match e {
        WireError::Closed => "ERROR 2013 (HY000): Lost connection to server during query".into(),
        other => other.to_string(),
    }
}

/// How long the kill of a timed-out statement may take in all (dial and
/// KILL): a host gone dark mid-statement is released within the query
/// timeout and this, not after a full connect timeout more. A kill that
/// gets through takes a few round trips (milliseconds on a LAN); one that
/// does not is said so in the status ("could not be sent ... may still
/// run"), so the bound is kept short: a user's timeout is a bound. With
/// the 50 ms the server's own max_statement_time is given first, a dark
/// host is released under its query timeout plus half a second.
const KILL_BOUND: Duration = Duration::from_millis(400);

/// Asks the server to stop the query of connection `id`, within
/// [`KILL_BOUND`]; what came of it.
async fn kill_query(target: &Target, id: u32, connect_timeout: Duration) -> Result<(), String> {
    let kill = async {
        let mut c = target
            .dial(connect_timeout.min(KILL_BOUND))
            .await
            .map_err(|e| format!("connecting for it: {e}"))?;
        let r = c
            .execute(&format!("KILL QUERY {id}"))
            .await
            .map(drop)
            .map_err(|e| e.to_string());
        c.quit().await;
        r
    };
    match tokio::time::timeout(KILL_BOUND, kill).await {
        Ok(r) => r,
        Err(_) => Err(format!("no answer within {}s", KILL_BOUND.as_secs_f64())),
    }
}

/// What the status says of the kill of connection `id`'s statement.
fn kill_note(id: u32, killed: &Result<(), String>) -> String {
    match killed {
        Ok(()) => format!("KILL QUERY {id} sent"),
        Err(why) => format!(
            "KILL QUERY {id} could not be sent: {why}; the statement may still run on the server"
        ),
    }
}

/// Runs one statement, streaming its rows (or keeping them for
/// collapse/diff). Returns the number of rows.
/// Where a statement's rows go: the host and database they are of, the
/// writer, and whether they stream or are kept (collapse, diff).
struct Dest<'a> {
    addr: &'a str,
    db: Option<&'a str>,
    tx: &'a mpsc::Sender<Event>,
    mode: Mode,
    /// The connection's last statement ([`Client::query_last`]).
    last: bool,
}

async fn run_statement(
    conn: &mut Client,
    sql: &str,
    to: Dest<'_>,
    outcome: &mut Outcome,
    sets: &mut usize,
) -> Result<u64, WireError> {
    let Dest {
        addr,
        db,
        tx,
        mode,
        last,
    } = to;
    if last {
        conn.query_last(sql).await?;
    } else {
        conn.query(sql).await?;
    }
    // The number of the result set being read (each new one takes the
    // next number of the host's output).
    let mut current = *sets;
    let mut columns: Arc<Vec<String>> = Arc::new(Vec::new());
    let mut kinds: Arc<Vec<crate::json::Kind>> = Arc::new(Vec::new());
    let mut n = 0;
    let mut block = Vec::new();
    let flush = |block: &mut Vec<Vec<Value>>,
                 columns: &Arc<Vec<String>>,
                 kinds: &Arc<Vec<crate::json::Kind>>,
                 set: usize| {
        let rows = std::mem::take(block);
        let ev = Event::Rows {
            host: addr.to_string(),
            db: db.map(str::to_owned),
            columns: columns.clone(),
            kinds: kinds.clone(),
            set,
            rows,
        };
        async move {
            let _ = tx.send(ev).await;
        }
    };
    // Every result set of the statement (a CALL or several statements
    // give more than one); rows of the first that has columns name the
    // outcome's columns, as before.
    while let Some(step) = conn.step().await? {
        match step {
            Step::Columns(c) => {
                if !block.is_empty() {
                    flush(&mut block, &columns, &kinds, current).await;
                }
                current = *sets;
                *sets += 1;
                kinds = Arc::new(c.iter().map(crate::json::Kind::of).collect());
                columns = Arc::new(c.into_iter().map(|c| c.name).collect());
                if outcome.columns.is_empty() {
                    outcome.columns = columns.to_vec();
                }
            }
            Step::Row(vals) => {
                n += 1;
                if mode == Mode::Stream {
                    block.push(vals);
                    if block.len() >= BLOCK_ROWS {
                        flush(&mut block, &columns, &kinds, current).await;
                    }
                } else {
                    outcome.rows.push(vals);
                }
            }
            Step::Done { .. } => {}
        }
    }
    if !block.is_empty() {
        flush(&mut block, &columns, &kinds, current).await;
    }
    Ok(n)
}

/// One `--format table` table: its columns, which of them hold numbers,
/// and its rows as text.
type TableBlock = (Vec<String>, Vec<bool>, Vec<Vec<String>>);

/// The host tags shown as columns, and each host's values of them.
struct Tags {
    names: Vec<String>,
    by_host: std::collections::HashMap<String, Vec<String>>,
}

impl Tags {
    fn of(&self, host: &str) -> &[String] {
        self.by_host.get(host).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// How the output is written: its format, a header line, --collapse or
/// --diff, a database column, and the connection's character set (TSV
/// escaping reads its multi-byte characters whole).
struct Shape {
    fmt: Format,
    header: bool,
    mode: Mode,
    with_db: bool,
    charset: output::Multibyte,
}

fn write_output(
    mut rx: mpsc::Receiver<Vec<Event>>,
    out: Box<dyn Write + Send>,
    shape: Shape,
    tags: Tags,
) -> std::io::Result<usize> {
    let Shape {
        fmt,
        header,
        mode,
        with_db,
        charset,
    } = shape;
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    // A header whenever the column set changes (each statement's result
    // set gets its own), not only for the first.
    let mut last_columns: Option<Arc<Vec<String>>> = None;
    let mut outcomes: Vec<(String, Outcome)> = Vec::new();
    // Table format: one table per column set, in order of first appearance,
    // with which columns hold numbers.
    let mut tables: Vec<TableBlock> = Vec::new();
    // Rows written of each (host, database, result set): vertical rows are
    // numbered within their result, which comes in blocks.
    let mut written: std::collections::HashMap<(String, Option<String>, usize), usize> =
        std::collections::HashMap::new();
    while let Some(batch) = rx.blocking_recv() {
        for ev in batch {
            match ev {
                Event::Rows {
                    host,
                    db,
                    columns,
                    kinds,
                    set,
                    rows,
                } => {
                    if fmt == Format::Table {
                        let mut cols = vec!["host".to_string()];
                        cols.extend(tags.names.iter().cloned());
                        if with_db {
                            cols.push("database".into());
                        }
                        cols.extend(columns.iter().cloned());
                        let i = match tables.iter().position(|(c, _, _)| *c == cols) {
                            Some(i) => i,
                            None => {
                                let mut right = vec![false; cols.len() - columns.len()];
                                right.extend(kinds.iter().map(|k| k.is_number()));
                                tables.push((cols, right, Vec::new()));
                                tables.len() - 1
                            }
                        };
                        for r in rows {
                            let mut cells = vec![host.clone()];
                            cells.extend(tags.of(&host).iter().cloned());
                            if with_db {
                                cells.push(db.clone().unwrap_or_default());
                            }
                            cells.extend(r.iter().map(output::display));
                            tables[i].2.push(cells);
                        }
                        continue;
                    }
                    if header && last_columns.as_deref() != Some(&*columns) {
                        if let Some(h) = output::header(fmt, with_db, &tags.names, &columns) {
                            writeln!(out, "{h}")?;
                        }
                        last_columns = Some(columns.clone());
                    }
                    // (Counted for vertical rows only: the other formats
                    // number nothing, and a key per block costs.)
                    let row = if fmt == Format::Vertical {
                        let before = written.entry((host.clone(), db.clone(), set)).or_insert(0);
                        let row = *before;
                        *before += rows.len();
                        row
                    } else {
                        0
                    };
                    output::write_rows(
                        &mut out,
                        fmt,
                        output::Block {
                            host: &host,
                            tags: (&tags.names, tags.of(&host)),
                            db: db.as_deref(),
                            columns: &columns,
                            kinds: &kinds,
                            set,
                            charset,
                            row,
                        },
                        &rows,
                    )?;
                }
                Event::Outcome { host, outcome } => outcomes.push((host, outcome)),
            }
        }
    }
    outcomes.sort_by(|a, b| a.0.cmp(&b.0));
    // Hosts outside the largest group of equal results.
    let differing = output::group(&outcomes)
        .iter()
        .skip(1)
        .map(|(_, hosts)| hosts.len())
        .sum();
    match mode {
        Mode::Collapse => out.write_all(&output::collapse_as(&outcomes, fmt, charset))?,
        Mode::Diff => out.write_all(&output::diff_as(&outcomes, fmt, charset))?,
        Mode::Stream => {
            for (cols, right, rows) in &mut tables {
                // By host (each host's rows in the order they came), not
                // in the order the hosts answered.
                rows.sort_by(|a, b| a.first().cmp(&b.first()));
                out.write_all(output::table(cols, right, rows).as_bytes())?
            }
        }
    }
    out.flush()?;
    Ok(differing)
}

#[cfg(test)]
mod kill_tests {
    #[test]
    fn the_status_says_what_came_of_the_kill() {
        for (killed, want) in [
            (Ok(()), "KILL QUERY 7 sent"),
            (
                Err("no answer within 1s".to_string()),
                "KILL QUERY 7 could not be sent: no answer within 1s; the statement may still run",
            ),
        ] {
            let note = super::kill_note(7, &killed);
            assert!(note.starts_with(want), "{note}");
        }
    }
}

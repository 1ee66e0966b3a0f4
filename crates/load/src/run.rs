//! One dump load from start to end: open the input, connect, lock, check
//! what a resume may trust, feed the scheduler, report.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use mysql_async::prelude::Queryable;
use sqlfleet_conn::Target;

use sqlfleet_dump::Kind;

use crate::engine::{Engine, EngineOptions};
use crate::error::LoadError;
use crate::journal::{self, Start};
use crate::schedule::{Regime, Scheduler};
use crate::session::SessionConn;
use crate::source::{self, Msg};
use crate::summary::Summary;
use crate::{dir, error, galera, identity, progress};

/// What to load and how.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub target: Target,
    /// Whether the load writes the server's binary log.
    pub binlog: crate::session::Binlog,
    pub path: PathBuf,
    pub threads: usize,
    pub resume: bool,
    pub restart: bool,
    pub continue_on_error: bool,
    pub quarantine: Option<PathBuf>,
    pub defer_indexes: bool,
    /// Drop each table before its CREATE TABLE runs (myloader's
    /// `--overwrite-tables`): for dumps and directories made without
    /// DROP TABLE statements, into a database that has the tables.
    pub overwrite_tables: bool,
    pub progress: progress::Mode,
    /// Database for statements before the dump's first `USE`.
    pub database: Option<String>,
    /// Target size of one transaction's statements.
    pub batch_bytes: usize,
    /// Overrides the dump's identity (needed to resume a stdin stream
    /// whose first MiB is not unique).
    pub load_id: Option<String>,
    /// Send INSERT batches as LOAD DATA LOCAL when that is exact.
    pub fast_path: bool,
    /// Bytes of batches the scheduler may queue ahead of the workers
    /// (so several tables load at once; bounds memory).
    pub read_ahead: usize,
    /// Run every statement in file order on one connection, as the
    /// stock client does (the default for files that are not dumps).
    pub serial: bool,
    /// Keep comments inside statements (the client's `--comments`); by
    /// default they are removed as the client removes them.
    pub comments: bool,
    /// Turns true on SIGINT or SIGTERM: the load stops reading, lets what
    /// it started commit, journals it and says how to go on.
    pub interrupt: Option<tokio::sync::watch::Receiver<bool>>,
}

/// Resolves once `interrupt` turns true (never without one).
pub(crate) async fn interrupted(interrupt: &mut Option<tokio::sync::watch::Receiver<bool>>) {
    match interrupt {
        Some(r) => {
            while !*r.borrow_and_update() {
                if r.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        }
        None => std::future::pending().await,
    }
}

/// Watches `interrupt` for the whole of a load — while it reads, while a
/// feed waits for a free worker, and while it waits for what is queued
/// after the input ended (the last was where a signal went unseen: the
/// whole dump had been read ahead, and the load went on to the end and
/// exited 0). Sets [`crate::state::Shared::interrupted`], which every
/// worker checks before each statement; the caller aborts it when done.
pub(crate) fn watch_interrupt(
    interrupt: Option<tokio::sync::watch::Receiver<bool>>,
    shared: std::sync::Arc<crate::state::Shared>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut interrupt = interrupt;
        interrupted(&mut interrupt).await;
        shared.interrupted.store(true, Ordering::Relaxed);
    })
}

/// Holds back what would run on `--resume` until the input has been
/// checked against the interrupted load's journal up to the furthest
/// point it recorded (the statement chain at every recorded end), so a
/// different dump is refused before anything of it runs.
struct ResumeCheck {
    horizon: u64,
    chains: std::collections::HashMap<u64, String>,
    verified: bool,
    /// The last recorded end that matched (for the message).
    matched: u64,
    held: Vec<source::Item>,
}

impl ResumeCheck {
    fn new(r: &journal::Resume) -> ResumeCheck {
        ResumeCheck {
            horizon: r.horizon,
            chains: r.chains.clone(),
            verified: r.horizon == 0,
            matched: 0,
            held: Vec::new(),
        }
    }

    /// Checks an item; `Err` says where the input differs.
    fn check(&mut self, item: &source::Item) -> Result<(), String> {
        let end = item.stmt.end;
        if let Some(want) = self.chains.get(&end) {
            if *want != identity::hex(&item.chain) {
                return Err(format!(
                    "this is not the input the interrupted load read: it first differs between byte {} and byte {end} (line {}); refusing to resume (use --restart to load it from the start)",
                    self.matched, item.stmt.line
                ));
            }
            self.matched = end;
        }
        if !self.verified && end >= self.horizon {
            if end != self.horizon {
                // No statement ended where the journal's last one did: the
                // statements lie elsewhere, so no recorded chain was met.
                return Err(format!(
                    "this is not the input the interrupted load read: no statement ends at byte {} where its journal's last one did (first differs after byte {}); refusing to resume (use --restart)",
                    self.horizon, self.matched
                ));
            }
            self.verified = true;
        }
        Ok(())
    }
}

/// Loads a dump. `Ok` also when statements were quarantined (see
/// `Summary::errors`); `Err` when the load stopped.
pub async fn load(opts: LoadOptions) -> Result<Summary, LoadError> {
    let started = Instant::now();
    let source_name = sqlfleet_dump::reader::display_name(&opts.path);
    let mut opts = opts;
    // A mydumper directory: -D is the database its one database loads
    // into (myloader's -B), created when absent; connections name none.
    let dir = if opts.path.is_dir() {
        let into = opts.target.database.take();
        let d = dir::open(&opts.path, into.as_deref()).map_err(|e| LoadError::Refused {
            path: e.path,
            what: e.what,
        })?;
        Some(d)
    } else {
        None
    };
    let (input, raw_read, total, compressed) = match &dir {
        Some(d) => (
            source::Input::Dir(d.clone()),
            Arc::new(std::sync::atomic::AtomicU64::new(0)),
            Some(d.size),
            d.compressed,
        ),
        None => {
            let opened =
                sqlfleet_dump::reader::open(&opts.path).map_err(|source| LoadError::Open {
                    path: opts.path.clone(),
                    source,
                })?;
            let compressed = opened.compression != sqlfleet_dump::reader::Compression::None;
            (
                source::Input::Stream(opened.reader, opened.size),
                opened.raw_read,
                opened.size,
                compressed,
            )
        }
    };
    let position = dir.as_ref().and_then(|d| d.position.clone());

    // Connect first: a wrong password should not wait for the dump.
    let control = SessionConn::open(&opts.target, opts.binlog).await?;
    // The lock and the journal's own bookkeeping live on a connection of
    // their own, outside any transaction the file opens.
    let mut bookkeeping = SessionConn::open(&opts.target, opts.binlog).await?.conn;
    let endpoint = opts.target.endpoint.to_string();
    // A Galera node: a file is read whole for tables the cluster would
    // not replicate, before anything of it runs.
    let cluster = galera::detect(&mut bookkeeping)
        .await
        .map_err(|e| LoadError::Setup {
            what: format!("{endpoint}: reading its wsrep settings: {e}"),
        })?;
    // The largest statement the server takes (see schedule.rs).
    let max_packet: Option<u64> = bookkeeping
        .query_first("SELECT @@max_allowed_packet")
        .await
        .map_err(|e| LoadError::Setup {
            what: format!("{endpoint}: reading its max_allowed_packet: {e}"),
        })?;
    if let Some(what) = cluster.as_ref().and_then(|c| c.binlog_refusal(opts.binlog)) {
        return Err(LoadError::Setup {
            what: format!("{endpoint}: {what}"),
        });
    }
    if let Some(c) = &cluster {
        let files: Vec<PathBuf> = match &dir {
            Some(d) => d
                .parts
                .iter()
                .filter_map(|p| match p {
                    dir::Part::File(f) => Some(f.clone()),
                    dir::Part::Sql(_) => None,
                })
                .collect(),
            None if sqlfleet_dump::reader::is_stdin(&opts.path) => Vec::new(),
            None => vec![opts.path.clone()],
        };
        for path in files {
            let (p, c2) = (path.clone(), c.clone());
            let in_dir = dir.is_some();
            let found = tokio::task::spawn_blocking(move || galera::scan(&p, &c2, in_dir))
                .await
                .map_err(|e| LoadError::Setup {
                    what: format!("checking the dump for Galera: {e}"),
                })?
                .map_err(|source| LoadError::Input {
                    path: path.clone(),
                    source,
                })?;
            if !found.is_empty() {
                return Err(LoadError::Refused {
                    path,
                    what: galera::message(c, &found),
                });
            }
        }
    }
    let batch_bytes = cluster
        .as_ref()
        .map_or(opts.batch_bytes, |c| c.batch_bytes(opts.batch_bytes));

    let stop_reader = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let read = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Msg>(32);
    let reader = source::spawn(
        input,
        opts.load_id.clone(),
        source::ReadOptions {
            read: read.clone(),
            max_statement: sqlfleet_dump::split::MAX_STATEMENT,
            keep_comments: opts.comments,
            // (a directory's files name none: `source` there is as the
            // client's, relative to the working directory)
            base_dir: opts
                .path
                .parent()
                .filter(|_| !sqlfleet_dump::reader::is_stdin(&opts.path) && dir.is_none())
                .map(Path::to_path_buf),
            raw_read: raw_read.clone(),
        },
        tx,
        stop_reader.clone(),
    )
    .map_err(|source| LoadError::Open {
        path: opts.path.clone(),
        source,
    })?;
    let input_err = |source| LoadError::Input {
        path: opts.path.clone(),
        source,
    };
    let stop = |rx: tokio::sync::mpsc::Receiver<Msg>| {
        stop_reader.store(true, Ordering::Relaxed);
        drop(rx);
    };
    let (load_id, is_dump) = match rx.recv().await {
        Some(Msg::Id { id, dump }) => (id, dump),
        Some(Msg::Error(e)) => {
            stop(rx);
            let _ = reader.join();
            return Err(input_err(e));
        }
        Some(Msg::FileError(path, source)) => {
            stop(rx);
            let _ = reader.join();
            return Err(LoadError::Input { path, source });
        }
        _ => {
            return Err(LoadError::Empty {
                path: opts.path.clone(),
            })
        }
    };
    // A resume is bound to the database it loads into: the same dump
    // loaded with another -D is another load (an id given with --load-id
    // is the user's to choose).
    let input_id = load_id;
    let target_db = opts.target.database.clone().unwrap_or_default();
    let load_id = if opts.load_id.is_some() {
        input_id.clone()
    } else {
        crate::identity::bound(&input_id, &target_db)
    };
    let bound = Some((input_id.as_str(), target_db.as_str()));
    journal::lock(&mut bookkeeping, &endpoint, &load_id).await?;
    journal::wait_for_leftovers(
        &mut bookkeeping,
        &endpoint,
        &load_id,
        std::time::Duration::from_secs(30),
    )
    .await?;
    let mut control = control;
    control
        .conn
        .query_drop(journal::slot_lock_sql(&load_id, "c"))
        .await
        .map_err(|e| LoadError::Journal {
            endpoint: endpoint.clone(),
            what: error::describe(&e).1,
        })?;

    let (start, begin) = journal::decide(
        &mut bookkeeping,
        &endpoint,
        &load_id,
        &source_name,
        opts.resume,
        opts.restart,
        total,
        bound,
    )
    .await?;
    // A fresh load writes its journal once its first statement has run
    // (the scheduler); a resumed one's is there, and says so now.
    // (a resume with nothing to resume — no journal at all, or none for
    // this input — starts fresh: nothing of a journal is read after this)
    let resumed = matches!(start, Start::Resume(_));
    let begin = match start {
        Start::Fresh => Some(begin),
        _ => {
            begin
                .run(&mut bookkeeping)
                .await
                .map_err(|e| LoadError::Journal {
                    endpoint: endpoint.clone(),
                    what: error::describe(&e).1,
                })?;
            None
        }
    };
    let mut resume = match start {
        Start::AlreadyDone => {
            stop(rx);
            let _ = reader.join();
            return Ok(Summary {
                unit: "statements",
                source: source_name,
                load_id,
                complete: true,
                already_done: true,
                seconds: started.elapsed().as_secs_f64(),
                threads: opts.threads,
                ..Summary::default()
            });
        }
        Start::Resume(r) => *r,
        Start::Fresh => Default::default(),
    };
    let mut warnings = Vec::new();
    if let Some(earlier) = &resume.taken_over {
        progress::say(&format!(
            "note: resuming the earlier load of {source_name} (load id {earlier}), which read an input of another size: the part it loaded is checked byte for byte before anything runs"
        ));
    }
    if resumed {
        let refuse = |what: String| {
            stop_reader.store(true, Ordering::Relaxed);
            LoadError::Changed {
                path: opts.path.clone(),
                what,
            }
        };
        if let (Some(was), Some(now)) = (resume.size, total) {
            if was != now {
                return Err(refuse(format!(
                    "the interrupted load read a file of {was} bytes, this one has {now}: not the same input; refusing to resume (use --restart)"
                )));
            }
        }
        let stateful = journal::stateful_since(&mut bookkeeping, &load_id)
            .await
            .map_err(|e| LoadError::Journal {
                endpoint: endpoint.clone(),
                what: error::describe(&e).1,
            })?;
        if let Some((line, why)) = stateful {
            return Err(refuse(format!(
                "the interrupted load had reached line {line}, where {why} tied the file to one connection's state, which a new connection does not have: it cannot be resumed exactly; restore the target and load with --restart"
            )));
        }
        for t in std::mem::take(&mut resume.dirty_tables) {
            let n = journal::reset_dirty_table(&mut bookkeeping, &endpoint, &load_id, &t).await?;
            let w = format!(
                "table {t} is not transactional and had a batch in flight when the load stopped: its {n} rows were deleted and its data is loaded again"
            );
            progress::say(&format!("warning: {w}"));
            warnings.push(w);
            resume = match journal::prepare(
                &mut bookkeeping,
                &endpoint,
                &load_id,
                &source_name,
                true,
                false,
                total,
                bound,
            )
            .await?
            {
                Start::Resume(r) => journal::Resume {
                    dirty_tables: Vec::new(),
                    ..*r
                },
                _ => resume,
            };
        }
    }

    if opts.resume && !resume.ranges.is_empty() {
        journal::restore_auto_increments(&mut bookkeeping, &endpoint, &load_id).await?;
    }

    let threads = opts.threads.max(1);
    let engine = Engine::start(EngineOptions {
        target: opts.target.clone(),
        binlog: opts.binlog,
        threads,
        load_id: load_id.clone(),
        resuming: opts.resume,
        continue_on_error: opts.continue_on_error,
        quarantine: opts.quarantine.clone(),
        fast_path: opts.fast_path,
        queue_bytes: opts.read_ahead.max(batch_bytes),
        progress: opts.progress,
        raw_read: raw_read.clone(),
        compressed,
        read,
        total,
        started,
        galera: cluster.clone(),
        max_packet,
    })?;
    let shared = engine.shared.clone();
    let regime = if is_dump && !opts.serial {
        Regime::Parallel
    } else {
        if !opts.serial {
            let w = format!(
                "{source_name} is not a mysqldump/mariadb-dump file (no dump header): its statements run in file order on one connection, as with the mysql client"
            );
            progress::say(&format!("note: {w}"));
        }
        Regime::Ordered
    };
    let mut check = ResumeCheck::new(&resume);
    // A finished load resumed: "already loaded" once the whole input met
    // its recorded chains (the check refuses another input first).
    let from_done = resume.done;
    let mut sched = Scheduler::new(
        engine.ctx.clone(),
        engine.queue.clone(),
        control,
        bookkeeping,
        resume,
        batch_bytes,
        opts.defer_indexes,
        opts.database
            .clone()
            .or_else(|| opts.target.database.clone()),
        regime,
    );
    sched.warnings.extend(warnings);
    sched.begin = begin;
    sched.overwrite_tables = opts.overwrite_tables;
    let mut input_error = None;
    let mut changed = None;
    let mut bytes = 0;
    let mut saw_statement = false;
    let mut interrupt = opts.interrupt.clone();
    let watcher = watch_interrupt(opts.interrupt.clone(), shared.clone());
    let mut was_interrupted = false;
    let mut ended_cut = false;
    loop {
        let msg = tokio::select! {
            m = rx.recv() => m,
            _ = interrupted(&mut interrupt) => {
                was_interrupted = true;
                // Batches in flight stop at their next statement and roll
                // back; none starts (`Shared::interrupted`).
                shared.interrupted.store(true, Ordering::Relaxed);
                break;
            }
        };
        let Some(msg) = msg else { break };
        if shared.stopped() {
            break;
        }
        if shared.is_interrupted() {
            was_interrupted = true;
            break;
        }
        match msg {
            Msg::Item(item) => {
                saw_statement = true;
                if let Err(what) = check.check(&item) {
                    changed = Some(what);
                    break;
                }
                if check.verified {
                    for held in std::mem::take(&mut check.held) {
                        sched.feed(held).await;
                    }
                    sched.feed(*item).await;
                    // A resumed run that cannot go on exactly stops here.
                    if let Some(what) = sched.refused.take() {
                        changed = Some(what);
                        break;
                    }
                } else if check.held.is_empty()
                    && (matches!(item.kind, Kind::Session | Kind::Use(_) | Kind::Hint)
                        || sched.resume.ranges.contains(item.stmt.offset))
                {
                    sched.feed(*item).await; // runs nothing
                } else {
                    check.held.push(*item);
                }
            }
            Msg::Done {
                bytes: b,
                cut_short,
            } => {
                bytes = b;
                ended_cut = cut_short;
                if cut_short {
                    let w = format!(
                        "{}: the dump has no \"-- Dump completed\" line at its end, which mysqldump and mariadb-dump write last: it may have been cut short (or still be copying: once it is whole, the same command with --resume loads the rest); everything in it was loaded",
                        opts.path.display()
                    );
                    progress::say(&format!("warning: {w}"));
                    sched.warnings.push(w);
                }
                if !check.verified {
                    changed = Some(format!(
                        "this is not the input the interrupted load read: it ends at byte {b}, before byte {} that the interrupted load had reached; refusing to resume (use --restart)",
                        check.horizon
                    ));
                }
                break;
            }
            Msg::Error(e) => {
                input_error = Some(input_err(e));
                break;
            }
            Msg::FileError(path, source) => {
                input_error = Some(LoadError::Input { path, source });
                break;
            }
            Msg::Id { .. } => {}
        }
    }
    stop(rx);
    if changed.is_none() {
        sched.finish().await;
    }
    let Scheduler {
        control,
        mut bookkeeping,
        warnings,
        skipped,
        tables,
        regime,
        begin,
        ..
    } = sched;
    let ctx = engine.ctx.clone();
    engine.finish().await;
    watcher.abort();
    let was_interrupted = was_interrupted || shared.is_interrupted();
    let _ = reader.join();
    let when: Option<String> = bookkeeping
        .query_first("SELECT NOW()")
        .await
        .unwrap_or(None);
    shared.write_quarantine(
        &ctx.prelude,
        &format!(
            "{source_name} (load id {load_id}), run of {}",
            when.unwrap_or_default()
        ),
        opts.database.as_deref().or(opts.target.database.as_deref()),
    );
    if let Some(c) = control {
        let _ = c.conn.disconnect().await;
    }

    let failure = shared
        .failure
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    let ok = failure.is_none()
        && input_error.is_none()
        && changed.is_none()
        && saw_statement
        && !was_interrupted;
    let rows = shared.rows.load(Ordering::Relaxed);
    // Never begun: nothing ran. A load that stopped there leaves nothing
    // on the target; one that ends well (nothing in it to run) is
    // recorded as done.
    let recorded = match begin {
        None => true,
        Some(b) if ok => b.run(&mut bookkeeping).await.is_ok(),
        Some(_) => false,
    };
    let failure = failure.map(|f| crate::StatementFailure {
        nothing_written: !recorded,
        ..f
    });
    if changed.is_none() && recorded {
        let end = if ok && ended_cut {
            journal::End::Cut
        } else if ok {
            journal::End::Done
        } else if was_interrupted && failure.is_none() {
            journal::End::Interrupted
        } else {
            journal::End::Failed
        };
        let _ = journal::finish(&mut bookkeeping, &endpoint, &load_id, end, bytes, rows).await;
        if input_error.is_some() && !saw_statement {
            let _ = journal::forget_if_empty(&mut bookkeeping, &endpoint, &load_id).await;
        }
    }
    let _ = bookkeeping.disconnect().await;
    if let Some(what) = changed {
        return Err(LoadError::Changed {
            path: opts.path.clone(),
            what,
        });
    }
    if let Some(e) = input_error {
        return Err(e);
    }
    if let Some(f) = failure {
        return Err(LoadError::Statement {
            path: opts.path.clone(),
            failure: Box::new(f),
        });
    }
    if was_interrupted {
        return Err(LoadError::Interrupted {
            path: opts.path.clone(),
            unit: "statements",
            statements: shared.statements.load(Ordering::Relaxed),
            rows,
        });
    }
    if !saw_statement {
        return Err(LoadError::Empty {
            path: opts.path.clone(),
        });
    }
    let seconds = started.elapsed().as_secs_f64();
    let server_counts = *shared.server.lock().unwrap_or_else(|e| e.into_inner());
    // The server's first warnings, after the load's own notes.
    let server_texts = shared
        .warning_texts
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    Ok(Summary {
        unit: "statements",
        source: source_name,
        load_id,
        complete: true,
        binlog_skipped: opts.binlog == crate::session::Binlog::Skip,
        already_done: from_done && shared.statements.load(Ordering::Relaxed) == 0,
        bytes,
        statements: shared.statements.load(Ordering::Relaxed),
        batches: shared.batches.load(Ordering::Relaxed),
        rows,
        tables: tables.len(),
        seconds,
        rows_per_sec: rows as f64 / seconds.max(1e-9),
        mb_per_sec: bytes as f64 / 1e6 / seconds.max(1e-9),
        retries: shared.retries.load(Ordering::Relaxed),
        errors: shared.quarantined.load(Ordering::Relaxed),
        skipped_on_resume: skipped,
        fast_path_statements: shared.fast_statements.load(Ordering::Relaxed),
        insert_batches: shared.fast_fallbacks.load(Ordering::Relaxed),
        threads,
        mode: match regime {
            Regime::Parallel => "parallel",
            Regime::Ordered => "ordered",
            Regime::Stateful => "one connection",
        },
        server_warnings_shown: server_texts.len(),
        warnings: warnings.into_iter().chain(server_texts).collect(),
        warning_count: shared.warnings.load(Ordering::Relaxed),
        server: server_counts,
        quarantine: opts.quarantine.clone().filter(|_| opts.continue_on_error),
        source_position: position.map(Into::into),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlfleet_dump::inspect::Traits;

    fn item(offset: u64, end: u64, chain: u8) -> source::Item {
        source::Item {
            stmt: sqlfleet_dump::Statement {
                offset,
                end,
                line: 1,
                text: Vec::new(),
                source: None,
                origin: None,
            },
            kind: Kind::Barrier,
            traits: Traits::default(),
            chain: [chain; 16],
        }
    }

    fn check_for(horizon: u64) -> ResumeCheck {
        let r = journal::Resume {
            horizon,
            chains: [(horizon, identity::hex(&[7u8; 16]))].into_iter().collect(),
            ..journal::Resume::default()
        };
        ResumeCheck::new(&r)
    }

    #[test]
    fn a_resume_is_verified_only_where_a_statement_ends_at_the_recorded_end() {
        let mut same = check_for(100);
        assert!(same.check(&item(0, 50, 1)).is_ok() && !same.verified);
        assert!(same.check(&item(50, 100, 7)).is_ok() && same.verified);
        // Other statement boundaries: no recorded end is ever met.
        let mut shifted = check_for(100);
        assert!(shifted.check(&item(0, 60, 1)).is_ok());
        assert!(shifted.check(&item(60, 120, 7)).is_err());
        // The same end with another chain.
        let mut changed = check_for(100);
        assert!(changed.check(&item(0, 100, 8)).is_err());
    }
}

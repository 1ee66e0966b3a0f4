//! The frame every load runs in, whatever reads its input (a dump, a
//! mydumper directory, CSV/TSV files): the session connection and the
//! checks every input shares, the shared counters, the per-table work
//! queue, the workers, the progress task, the interrupt, and the counted
//! end. An input's reader plugs into it: it feeds the queue with what
//! [`Engine::next`] hands it and journals its own way.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sqlfleet_conn::Target;
use tokio::sync::{mpsc, watch};

use crate::error::{LoadError, StatementFailure};
use crate::galera::{self, Cluster};
use crate::progress;
use crate::queue::JobQueue;
use crate::session::{Binlog, Prelude, SessionConn};
use crate::state::{Ctx, Shared};
use crate::summary::Summary;
use crate::worker;

/// The load's first connection, with what the checks every input shares
/// found on its server.
pub struct Connected {
    pub session: SessionConn,
    /// The server is a Galera node (its cluster's settings).
    pub cluster: Option<Cluster>,
    /// The server as the user named it, for messages.
    pub endpoint: String,
}

/// Opens the load's session connection and checks what every input
/// needs checked before any of it is read: a wrong password or a Galera
/// node the load cannot keep out of the binary log fails here.
pub async fn connect(
    target: &Target,
    binlog: Binlog,
    writes_on_read_only: bool,
) -> Result<Connected, LoadError> {
    let mut session = SessionConn::open(target, binlog).await?;
    let endpoint = target.endpoint.to_string();
    if !writes_on_read_only {
        refuse_read_only(&mut session.conn, &endpoint).await?;
    }
    let cluster = galera::detect(&mut session.conn)
        .await
        .map_err(|e| LoadError::Setup {
            what: format!("{endpoint}: reading its wsrep settings: {e}"),
        })?;
    if let Some(what) = cluster.as_ref().and_then(|c| c.binlog_refusal(binlog)) {
        return Err(LoadError::Setup {
            what: format!("{endpoint}: {what}"),
        });
    }
    Ok(Connected {
        session,
        cluster,
        endpoint,
    })
}

/// A server that reports `read_only = ON` is a replica (or kept from
/// writes on purpose): a load there by an account with SUPER would go
/// through, and on a replica fork its data from its primary's, its GTIDs
/// stopping its replication at the primary's next transaction. Refused
/// before anything runs; `--writes-on-read-only` loads there anyway.
async fn refuse_read_only(conn: &mut mysql_async::Conn, endpoint: &str) -> Result<(), LoadError> {
    let ro = sqlfleet_conn::read_only::ask(conn)
        .await
        .map_err(|e| LoadError::Setup {
            what: format!("{endpoint}: reading @@read_only: {e}"),
        })?;
    match ro {
        false => Ok(()),
        true => Err(LoadError::Setup {
            what: format!(
                "{endpoint} is read_only (a replica?): a load there would fork its data from its \
                 primary's; load into the primary (--sandbox NAME loads there), or give \
                 --writes-on-read-only"
            ),
        }),
    }
}

pub struct EngineOptions {
    pub target: Target,
    pub binlog: crate::session::Binlog,
    pub threads: usize,
    pub load_id: String,
    pub resuming: bool,
    pub continue_on_error: bool,
    pub quarantine: Option<PathBuf>,
    pub fast_path: bool,
    pub queue_bytes: usize,
    pub progress: progress::Mode,
    pub raw_read: Arc<std::sync::atomic::AtomicU64>,
    /// Input bytes read (decompressed), for progress.
    pub read: Arc<std::sync::atomic::AtomicU64>,
    pub total: Option<u64>,
    /// The input is compressed (`total` is its size on disk).
    pub compressed: bool,
    pub started: Instant,
    pub galera: Option<crate::galera::Cluster>,
    pub max_packet: Option<u64>,
    /// Turns true on SIGINT or SIGTERM.
    pub interrupt: Option<watch::Receiver<bool>>,
}

pub struct Engine {
    pub ctx: Arc<Ctx>,
    pub shared: Arc<Shared>,
    pub queue: Arc<JobQueue>,
    workers: Vec<tokio::task::JoinHandle<()>>,
    progress_stop: tokio::sync::oneshot::Sender<()>,
    progress: tokio::task::JoinHandle<()>,
    interrupt: Option<watch::Receiver<bool>>,
    watcher: tokio::task::JoinHandle<()>,
    started: Instant,
    threads: usize,
    binlog: Binlog,
}

/// What the input's reader gets next from [`Engine::next`].
pub enum Next<M> {
    /// A message of its reader.
    Msg(M),
    /// The reader is gone.
    Closed,
    /// A statement failed: nothing later in the input runs.
    Failed,
    /// SIGINT or SIGTERM: what is in flight stops and rolls back.
    Interrupted,
}

impl Engine {
    pub fn start(o: EngineOptions) -> Result<Engine, LoadError> {
        let quarantine = match &o.quarantine {
            Some(p) if o.continue_on_error => Some(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|source| LoadError::Open {
                        path: p.clone(),
                        source,
                    })?,
            )),
            _ => None,
        };
        let shared = Arc::new(Shared {
            quarantine,
            read: o.read,
            resuming: o.resuming,
            ..Shared::default()
        });
        let ctx = Arc::new(Ctx {
            target: o.target,
            binlog: o.binlog,
            fast_path: std::sync::atomic::AtomicBool::new(o.fast_path),
            prelude: Prelude::default(),
            shared: shared.clone(),
            load_id: o.load_id,
            continue_on_error: o.continue_on_error,
            galera: o.galera,
            max_packet: o.max_packet,
        });
        let queue = Arc::new(JobQueue::new(o.queue_bytes));
        let threads = o.threads.max(1);
        let workers = (0..threads)
            .map(|i| tokio::spawn(worker::run(ctx.clone(), queue.clone(), i)))
            .collect();
        let (progress_stop, rx) = tokio::sync::oneshot::channel();
        let progress = tokio::spawn(progress::run(
            progress::Sources {
                shared: shared.clone(),
                raw_read: o.raw_read,
                total: o.total,
                compressed: o.compressed,
                started: o.started,
            },
            o.progress.resolve(),
            rx,
        ));
        let watcher = watch_interrupt(o.interrupt.clone(), shared.clone());
        Ok(Engine {
            ctx,
            shared,
            queue,
            workers,
            progress_stop,
            progress,
            interrupt: o.interrupt,
            watcher,
            started: o.started,
            threads,
            binlog: o.binlog,
        })
    }

    /// The next message of the input's reader, unless the load stops:
    /// an interrupt while it waits marks the load interrupted at once.
    pub async fn next<M>(&mut self, rx: &mut mpsc::Receiver<M>) -> Next<M> {
        let msg = tokio::select! {
            m = rx.recv() => m,
            _ = interrupted(&mut self.interrupt) => {
                // Work in flight stops at its next statement and rolls
                // back; none starts (`Shared::interrupted`).
                self.shared.interrupted.store(true, Ordering::Relaxed);
                return Next::Interrupted;
            }
        };
        let Some(msg) = msg else {
            return Next::Closed;
        };
        if self.shared.stopped() {
            Next::Failed
        } else if self.shared.is_interrupted() {
            Next::Interrupted
        } else {
            Next::Msg(msg)
        }
    }

    /// Closes the queue and waits for the workers and the progress line;
    /// what the load did, counted.
    pub async fn finish(self) -> Ended {
        self.queue.close();
        for w in self.workers {
            let _ = w.await;
        }
        let _ = self.progress_stop.send(());
        let _ = self.progress.await;
        self.watcher.abort();
        let failure = self
            .shared
            .failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        Ended {
            interrupted: self.shared.is_interrupted(),
            rows: self.shared.rows.load(Ordering::Relaxed),
            failure,
            shared: self.shared,
            started: self.started,
            threads: self.threads,
            binlog: self.binlog,
        }
    }
}

/// A load whose workers are done.
pub struct Ended {
    pub shared: Arc<Shared>,
    /// The first statement or chunk that failed for good.
    pub failure: Option<StatementFailure>,
    /// SIGINT or SIGTERM came.
    pub interrupted: bool,
    pub rows: u64,
    started: Instant,
    threads: usize,
    binlog: Binlog,
}

impl Ended {
    /// The summary of what was counted; `unit` says what a statement is
    /// ("chunks": one LOAD DATA statement per chunk, counted as a batch).
    /// The server's first warnings are its `warnings`.
    pub fn summary(&self, unit: &'static str, source: String, bytes: u64) -> Summary {
        let shared = &self.shared;
        let seconds = self.started.elapsed().as_secs_f64();
        let batches = shared.batches.load(Ordering::Relaxed);
        let server_texts = shared
            .warning_texts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        Summary {
            unit,
            source,
            complete: true,
            binlog_skipped: self.binlog == Binlog::Skip,
            bytes,
            statements: match unit {
                "chunks" => batches,
                _ => shared.statements.load(Ordering::Relaxed),
            },
            batches,
            rows: self.rows,
            seconds,
            rows_per_sec: self.rows as f64 / seconds.max(1e-9),
            mb_per_sec: bytes as f64 / 1e6 / seconds.max(1e-9),
            retries: shared.retries.load(Ordering::Relaxed),
            errors: shared.quarantined.load(Ordering::Relaxed),
            fast_path_statements: shared.fast_statements.load(Ordering::Relaxed),
            insert_batches: shared.fast_fallbacks.load(Ordering::Relaxed),
            threads: self.threads,
            server_warnings_shown: server_texts.len(),
            warnings: server_texts,
            warning_count: shared.warnings.load(Ordering::Relaxed),
            server: *shared.server.lock().unwrap_or_else(|e| e.into_inner()),
            ..Summary::default()
        }
    }
}

impl Ended {
    /// The error of a load SIGINT or SIGTERM stopped, counting what it
    /// committed in `unit`s.
    pub fn interrupt_error(
        &self,
        path: &std::path::Path,
        unit: &'static str,
    ) -> Result<(), LoadError> {
        if !self.interrupted {
            return Ok(());
        }
        Err(LoadError::Interrupted {
            path: path.to_path_buf(),
            unit,
            statements: match unit {
                "chunks" => self.shared.batches.load(Ordering::Relaxed),
                _ => self.shared.statements.load(Ordering::Relaxed),
            },
            rows: self.rows,
        })
    }
}

/// Resolves once `interrupt` turns true (never without one).
pub(crate) async fn interrupted(interrupt: &mut Option<watch::Receiver<bool>>) {
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
/// exited 0). Sets [`Shared::interrupted`], which every worker checks
/// before each statement; [`Engine::finish`] stops it.
fn watch_interrupt(
    interrupt: Option<watch::Receiver<bool>>,
    shared: Arc<Shared>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut interrupt = interrupt;
        interrupted(&mut interrupt).await;
        shared.interrupted.store(true, Ordering::Relaxed);
    })
}

//! The running parts shared by dump and flat-file loads: the shared
//! counters, the per-table work queue, the workers and the progress task.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sqlfleet_conn::Target;

use crate::error::LoadError;
use crate::progress;
use crate::queue::JobQueue;
use crate::session::Prelude;
use crate::state::{Ctx, Shared};
use crate::worker;

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
}

pub struct Engine {
    pub ctx: Arc<Ctx>,
    pub shared: Arc<Shared>,
    pub queue: Arc<JobQueue>,
    workers: Vec<tokio::task::JoinHandle<()>>,
    progress_stop: tokio::sync::oneshot::Sender<()>,
    progress: tokio::task::JoinHandle<()>,
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
        let workers = (0..o.threads.max(1))
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
        Ok(Engine {
            ctx,
            shared,
            queue,
            workers,
            progress_stop,
            progress,
        })
    }

    /// Closes the queue and waits for the workers and the progress line.
    pub async fn finish(self) {
        self.queue.close();
        for w in self.workers {
            let _ = w.await;
        }
        let _ = self.progress_stop.send(());
        let _ = self.progress.await;
    }
}

//! The relay's event loops: one single-threaded runtime per thread, each
//! serving its share of the clients with sockets registered on its own
//! poller (haproxy's model). A pooled backend connection remembers the
//! loop it was opened on, and the pool hands a client connections of its
//! own loop first, so a statement's four socket hops are all one thread's.
//!
//! Why not tokio's multi-threaded runtime: its workers share one I/O
//! driver and move tasks between them, so a packet's readiness is seen on
//! one thread and its session runs on another; measured on 2 cores it was
//! no faster than one thread, where independent loops are (the figures are
//! in docs/benchmarks.md).

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::runtime::Handle;

thread_local! {
    static HOME: Cell<usize> = const { Cell::new(0) };
}

/// The event loop the calling thread runs (0: the relay's main one).
pub fn home() -> usize {
    HOME.with(|h| h.get())
}

/// The extra loops' threads, and the main loop's handle.
pub struct EventLoops {
    handles: Vec<Handle>,
    stops: Vec<tokio::sync::oneshot::Sender<()>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    next: AtomicUsize,
}

impl EventLoops {
    /// The calling runtime as loop 0 and up to `n - 1` more threads (a
    /// loop that cannot be started is logged and done without).
    pub fn start(n: usize) -> EventLoops {
        let mut loops = EventLoops {
            handles: vec![Handle::current()],
            stops: Vec::new(),
            threads: Vec::new(),
            next: AtomicUsize::new(0),
        };
        for i in 1..n.max(1) {
            if let Err(e) = loops.add(i) {
                tracing::warn!("sqlfleet relay: event loop {i} not started ({e}); {i} run");
                break;
            }
        }
        loops
    }

    fn add(&mut self, i: usize) -> std::io::Result<()> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = rt.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("relay-loop-{i}"))
            .spawn(move || {
                HOME.with(|h| h.set(i));
                rt.block_on(async {
                    let _ = stopped.await;
                });
            })?;
        self.handles.push(handle);
        self.stops.push(stop);
        self.threads.push(thread);
        Ok(())
    }

    /// The loop the next client goes to (round robin): its index and
    /// handle.
    pub fn next(&self) -> (usize, &Handle) {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len();
        (i, &self.handles[i])
    }
}

impl Drop for EventLoops {
    fn drop(&mut self) {
        for s in self.stops.drain(..) {
            let _ = s.send(());
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

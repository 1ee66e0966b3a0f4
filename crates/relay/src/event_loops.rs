//! The relay's event loops: one single-threaded runtime per thread, each
//! serving its share of the clients with sockets registered on its own
//! poller (haproxy's model). A pooled backend connection remembers the
//! loop it was opened on, and the pool hands a client connections of its
//! own loop first, so a statement's four socket hops are all one thread's.
//!
//! Where a client is served ([`Placement`]): on the loop that accepted it,
//! unless that loop already serves [`SPILL`] more sessions than the least
//! busy one. Handing a new client to another thread costs a wake-up of
//! that thread and splits a short connection's few steps over two threads:
//! measured on 2 cores, clients that connect for one statement ran 8-12%
//! faster through one loop than dealt round robin over two. A session
//! that stays is what needs spreading: after [`MOVE_AFTER`] commands, and
//! every [`RECHECK`] after that, a session on a loop serving two or more
//! sessions more than another moves there between commands (its sockets
//! go to that loop's poller, see `frontend/session.rs` `drive`).
//!
//! Why not tokio's multi-threaded runtime: its workers share one I/O
//! driver and move tasks between them, so a packet's readiness is seen on
//! one thread and its session runs on another; measured on 2 cores it was
//! no faster than one thread, where independent loops are (the figures are
//! in docs/benchmarks.md).

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::runtime::Handle;

thread_local! {
    static HOME: Cell<usize> = const { Cell::new(0) };
}

/// The event loop the calling thread runs (0: the relay's main one).
pub fn home() -> usize {
    HOME.with(|h| h.get())
}

/// A new client stays on the loop that accepted it unless that loop
/// serves this many sessions more than the least busy one.
pub const SPILL: usize = 8;
/// A session is first considered for a move to a less busy loop after
/// this many commands (a client that connects for a few statements never
/// moves)...
pub const MOVE_AFTER: u64 = 8;
/// ...and again every this many commands.
pub const RECHECK: u64 = 1024;

/// The extra loops' threads, and the main loop's handle.
pub struct EventLoops {
    placement: Arc<Placement>,
    stops: Vec<tokio::sync::oneshot::Sender<()>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// Each loop's handle and how many sessions it serves.
pub struct Placement {
    handles: Vec<Handle>,
    live: Vec<AtomicUsize>,
}

/// A session's place on a loop, counted there while it lasts.
pub struct Seat {
    placement: Arc<Placement>,
    at: usize,
}

impl EventLoops {
    /// The calling runtime as loop 0 and up to `n - 1` more threads (a
    /// loop that cannot be started is logged and done without).
    pub fn start(n: usize) -> EventLoops {
        let mut handles = vec![Handle::current()];
        let mut loops = EventLoops {
            placement: Arc::new(Placement {
                handles: Vec::new(),
                live: Vec::new(),
            }),
            stops: Vec::new(),
            threads: Vec::new(),
        };
        for i in 1..n.max(1) {
            match loops.add(i) {
                Ok(h) => handles.push(h),
                Err(e) => {
                    tracing::warn!("sqlfleet relay: event loop {i} not started ({e}); {i} run");
                    break;
                }
            }
        }
        loops.placement = Arc::new(Placement {
            live: handles.iter().map(|_| AtomicUsize::new(0)).collect(),
            handles,
        });
        loops
    }

    fn add(&mut self, i: usize) -> std::io::Result<Handle> {
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
        self.stops.push(stop);
        self.threads.push(thread);
        Ok(handle)
    }

    pub fn placement(&self) -> &Arc<Placement> {
        &self.placement
    }
}

impl Placement {
    /// The least busy loop and its session count (the lowest index of equals).
    fn least(&self) -> (usize, usize) {
        let mut best = (0, usize::MAX);
        for (i, n) in self.live.iter().enumerate() {
            let n = n.load(Ordering::Relaxed);
            if n < best.1 {
                best = (i, n);
            }
        }
        best
    }

    /// A seat for a client accepted on loop `here`: there, unless `here`
    /// serves [`SPILL`] sessions more than the least busy loop.
    pub fn seat_new(self: &Arc<Self>, here: usize) -> Seat {
        let here = here.min(self.live.len().saturating_sub(1));
        let (least, n) = self.least();
        let at = if self.live[here].load(Ordering::Relaxed) >= n + SPILL {
            least
        } else {
            here
        };
        self.live[at].fetch_add(1, Ordering::Relaxed);
        Seat {
            placement: self.clone(),
            at,
        }
    }

    /// Sessions served by each loop.
    pub fn counts(&self) -> Vec<usize> {
        self.live
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .collect()
    }
}

impl Seat {
    /// The loop this seat is on.
    pub fn at(&self) -> usize {
        self.at
    }

    /// The handle of loop `i` (to spawn a session there).
    pub fn handle(&self, i: usize) -> &Handle {
        &self.placement.handles[i]
    }

    /// A loop serving two or more sessions fewer than this seat's (the
    /// move would even them out), if there is one.
    pub fn better(&self) -> Option<usize> {
        let (least, n) = self.placement.least();
        (self.placement.live[self.at].load(Ordering::Relaxed) >= n + 2).then_some(least)
    }

    /// Counts the session on loop `to` from now on.
    pub fn move_to(&mut self, to: usize) {
        self.placement.live[to].fetch_add(1, Ordering::Relaxed);
        self.placement.live[self.at].fetch_sub(1, Ordering::Relaxed);
        self.at = to;
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.placement.live[self.at].fetch_sub(1, Ordering::Relaxed);
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

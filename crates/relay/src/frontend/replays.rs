//! Replays before new work. When a server dies, every client with a
//! transaction on it loses it at once; replayed in the order the clients
//! happen to come back, a client's fresh statement (a transfer that had
//! not read anything yet) may take and change rows another client's
//! transaction had already read, and that replay then fails its
//! comparison. The old server had granted the recorded transactions their
//! locks together, so they can run again together; the statements that
//! start new work meanwhile (the one each replayed client had in flight, a
//! statement run again, a new transaction or autocommit statement of any
//! client) wait until the replays running have finished and none has
//! started for a moment (bounded: never longer than [`LIMIT`]). Outside a
//! failover this costs two atomic loads per command.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// How long without a new replay counts as "the replays are done".
pub const QUIET: Duration = Duration::from_millis(150);
/// The longest new work waits for replays.
pub const LIMIT: Duration = Duration::from_secs(5);

/// Read on every command (two atomic loads), so no lock.
pub struct ReplayGate {
    running: AtomicUsize,
    /// Milliseconds after `epoch` at which the last replay started (0: none).
    last_start_ms: AtomicU64,
    epoch: Instant,
}

impl Default for ReplayGate {
    fn default() -> Self {
        ReplayGate {
            running: AtomicUsize::new(0),
            last_start_ms: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }
}

/// A replay running; done when dropped.
pub struct Running<'a>(&'a ReplayGate);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, SeqCst);
    }
}

impl ReplayGate {
    /// A replay starts.
    pub fn start(&self) -> Running<'_> {
        self.running.fetch_add(1, SeqCst);
        let ms = self.epoch.elapsed().as_millis() as u64 + 1;
        self.last_start_ms.store(ms, SeqCst);
        Running(self)
    }

    /// Whether new work may go: no replay running and none started
    /// within `quiet` (as of `now`).
    pub fn clear(&self, now: Instant, quiet: Duration) -> bool {
        if self.running.load(SeqCst) != 0 {
            return false;
        }
        let last = self.last_start_ms.load(SeqCst);
        let now_ms = now.saturating_duration_since(self.epoch).as_millis() as u64 + 1;
        last == 0 || now_ms.saturating_sub(last) >= quiet.as_millis() as u64
    }

    /// Waits until [`ReplayGate::clear`], at most [`LIMIT`].
    pub async fn wait_clear(&self) {
        let t0 = Instant::now();
        while !self.clear(Instant::now(), QUIET) && t0.elapsed() < LIMIT {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clear_only_with_nothing_running_and_a_quiet_moment() {
        let g = ReplayGate::default();
        let t0 = Instant::now();
        assert!(g.clear(t0, QUIET), "never a replay");
        let r = g.start();
        let later = Instant::now() + QUIET * 2;
        assert!(!g.clear(later, QUIET), "one running");
        drop(r);
        assert!(!g.clear(Instant::now(), QUIET), "one just started");
        assert!(g.clear(later, QUIET), "done, and quiet since");
        let (a, b) = (g.start(), g.start());
        drop(a);
        assert!(!g.clear(later, QUIET), "another still running");
        drop(b);
        assert!(g.clear(Instant::now() + QUIET * 2, QUIET));
    }
}

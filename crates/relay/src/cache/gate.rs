//! Whether the cache may give and keep entries now, when it follows the
//! primary's binary log: only while the follower (`cache/follower.rs`) is
//! caught up to an instant within `max_lag` of now (`cache/caught_up.rs`)
//! — on a Galera cluster whose nodes' logs hold only their own writes,
//! while every member's log is (one slot each; the gate opens until the
//! earliest slot's instant).
//! Blind — not started, refused, disconnected, stalled, too far behind —
//! the cache is bypassed: statements go to the server as if no rule took
//! them, counted per rule. One atomic read per cacheable statement.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What /status shows of the follower.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FollowView {
    /// "starting", "following", "blind", "idle" (no cache rule).
    pub state: String,
    /// Why it is blind (the server's words, or what it lacks).
    pub reason: Option<String>,
    /// The backend followed (several: each member of a Galera cluster
    /// whose logs hold only their own writes, in `members`).
    pub backend: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,
    /// The binlog file and offset read to.
    pub file: Option<String>,
    pub offset: u64,
    /// Transactions read and what they made stale.
    pub commits: u64,
    pub whole: u64,
    pub tables: u64,
    /// Commits that made only some rows stale (`cache/row_change.rs`).
    pub rows: u64,
    /// The server's binlog_row_metadata: FULL names the columns of row
    /// events, which row-level invalidation needs.
    pub row_metadata: Option<String>,
}

pub struct Gate {
    /// A follower runs (else nothing is gated).
    on: AtomicBool,
    epoch: Instant,
    /// Microseconds after `epoch` until which entries may be used: the
    /// least of `slots`.
    open_until: AtomicU64,
    /// Per log followed, until when it allows entries.
    slots: Mutex<Vec<u64>>,
    view: Mutex<FollowView>,
    /// Times the gate was found shut by a cacheable statement.
    pub bypassed: AtomicU64,
}

impl Default for Gate {
    fn default() -> Gate {
        Gate {
            on: AtomicBool::new(false),
            epoch: Instant::now(),
            open_until: AtomicU64::new(0),
            slots: Mutex::new(vec![0]),
            view: Mutex::new(FollowView::default()),
            bypassed: AtomicU64::new(0),
        }
    }
}

impl Gate {
    /// A follower starts: shut until it says how far it has read.
    pub fn follow(&self) {
        self.logs(1);
        self.on.store(true, Relaxed);
        self.set(|v| v.state = "starting".into());
    }

    /// Whether entries may be given and kept now.
    pub fn open(&self) -> bool {
        !self.on.load(Relaxed) || self.micros(Instant::now()) < self.open_until.load(Relaxed)
    }

    /// `n` logs are followed from now (each slot shut until its follower
    /// says how far it has read).
    pub fn logs(&self, n: usize) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        *slots = vec![0; n.max(1)];
        self.open_until.store(0, Relaxed);
    }

    /// The follower is caught up to `at`: open until `at + max_lag`.
    pub fn caught_up(&self, at: Instant, max_lag: Duration) {
        self.caught_up_in(0, at, max_lag);
    }

    /// The follower of log `slot` is caught up to `at`: open until the
    /// earliest of every log's `at + max_lag`.
    pub fn caught_up_in(&self, slot: usize, at: Instant, max_lag: Duration) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = slots.get_mut(slot) {
            *s = self.micros(at + max_lag);
        }
        let least = slots.iter().copied().min().unwrap_or(0);
        self.open_until.store(least, Relaxed);
    }

    /// No cache rule: nothing to follow for (shut; nothing asks).
    pub fn idle(&self) {
        self.open_until.store(0, Relaxed);
        self.set(|v| {
            v.state = "idle".into();
            v.reason = None;
        });
    }

    /// The follower cannot see the primary's writes: shut now.
    pub fn blind(&self, reason: String) {
        let n = self.slots.lock().unwrap_or_else(|e| e.into_inner()).len();
        self.logs(n);
        self.set(|v| {
            v.state = "blind".into();
            v.reason = Some(reason);
        });
    }

    /// Changes what /status shows.
    pub fn set(&self, f: impl FnOnce(&mut FollowView)) {
        f(&mut self.view.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// /status: the follower's view and whether the gate is open (absent
    /// when nothing follows).
    pub fn status(&self) -> Option<serde_json::Value> {
        if !self.on.load(Relaxed) {
            return None;
        }
        let v = self.view.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut j = serde_json::to_value(v).ok()?;
        j["open"] = self.open().into();
        j["bypassed"] = self.bypassed.load(Relaxed).into();
        Some(j)
    }

    fn micros(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_micros() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_only_within_max_lag_of_the_instant_caught_up_to() {
        let g = Gate::default();
        assert!(g.open(), "nothing follows: never gated");
        g.follow();
        assert!(!g.open(), "started, not yet caught up");
        g.caught_up(Instant::now(), Duration::from_secs(60));
        assert!(g.open());
        g.caught_up(
            Instant::now() - Duration::from_secs(2),
            Duration::from_secs(1),
        );
        assert!(!g.open(), "caught up 2 s ago with max_lag 1 s");
        g.caught_up(Instant::now(), Duration::from_secs(60));
        g.blind("lost".into());
        assert!(!g.open());
        assert_eq!(
            g.status()
                .and_then(|s| s["reason"].as_str().map(String::from)),
            Some("lost".into())
        );
    }

    #[test]
    fn with_several_logs_open_only_while_every_one_is_caught_up() {
        let g = Gate::default();
        g.follow();
        g.logs(3);
        let now = Instant::now();
        let lag = Duration::from_secs(60);
        g.caught_up_in(0, now, lag);
        g.caught_up_in(2, now, lag);
        assert!(!g.open(), "member 1 has not said how far it read");
        g.caught_up_in(1, now, lag);
        assert!(g.open());
        g.caught_up_in(1, now - Duration::from_secs(2), Duration::from_secs(1));
        assert!(!g.open(), "member 1 caught up 2 s ago with max_lag 1 s");
        g.caught_up_in(1, now, lag);
        assert!(g.open());
        g.blind("a member lost".into());
        assert!(!g.open());
        g.caught_up_in(0, now, lag);
        assert!(!g.open(), "blind shut every slot, not only the first");
        g.caught_up_in(7, now, lag);
        assert!(!g.open(), "a slot that is not there opens nothing");
    }
}

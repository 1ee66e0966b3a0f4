//! One account's share of a backend's pool: MariaDB's
//! `max_user_connections` (ProxySQL's per-user `max_connections`) for the
//! connections the relay lends. An account whose clients already hold
//! their share waits for one of its own to come back, however many are
//! idle, so sessions of one account that never let go (a stuck
//! application, a refused protocol switch, an attacker) cannot take what
//! the other accounts need. The decision is [`may_lease`], a pure
//! function; [`Shares`] counts the leases and [`Held`] gives one back when
//! its connection does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// The connections of one backend an account may hold at once: `set` when
/// configured (`[pool] max_per_account`), else three quarters of `max`
/// (all of a pool under 8, where a quarter would leave the one account
/// most small deployments have short of connections for little gain).
pub fn share(max: usize, set: Option<usize>) -> usize {
    match set {
        Some(n) => n.clamp(1, max.max(1)),
        None if max < 8 => max.max(1),
        None => max - max / 4,
    }
}

/// Whether an account holding `held` connections may lease one more.
pub fn may_lease(held: usize, share: usize) -> bool {
    held < share
}

/// Leases per account on one backend.
#[derive(Default)]
pub struct Shares {
    held: Mutex<HashMap<Arc<str>, usize>>,
}

impl Shares {
    /// How many connections `user` holds.
    pub fn held(&self, user: &str) -> usize {
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(user)
            .copied()
            .unwrap_or(0)
    }

    /// Counts one more lease for `user` when [`may_lease`] says it may
    /// (checked and counted at once: clients of one account that ask
    /// together cannot all pass the check before any is counted). The
    /// returned [`Held`] gives it back when dropped and wakes the waiters
    /// of `notify`.
    pub fn try_take(
        self: &Arc<Self>,
        user: &Arc<str>,
        share: usize,
        notify: &Arc<Notify>,
    ) -> Option<Held> {
        let mut m = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(user.clone()).or_default();
        if !may_lease(*n, share) {
            return None;
        }
        *n += 1;
        Some(Held {
            shares: self.clone(),
            user: user.clone(),
            share,
            notify: notify.clone(),
        })
    }
}

/// One account's lease of a connection, counted until dropped.
pub struct Held {
    shares: Arc<Shares>,
    user: Arc<str>,
    share: usize,
    notify: Arc<Notify>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut m = self.shares.held.lock().unwrap_or_else(|e| e.into_inner());
        let mut was_full = false;
        if let Some(n) = m.get_mut(&self.user) {
            was_full = !may_lease(*n, self.share);
            *n -= 1;
            if *n == 0 {
                m.remove(&self.user);
            }
        }
        drop(m);
        // Only an account that was at its share can have clients waiting
        // for it (they registered before looking again: pool.rs); any other
        // release wakes no one here — a lease returned under load must not
        // wake every waiter of the backend.
        if was_full {
            self.notify.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pool_size_and_setting_gives_its_share() {
        for (max, set, want) in [
            (100, None, 75),
            (8, None, 6),
            (7, None, 7),
            (4, None, 4),
            (1, None, 1),
            (0, None, 1),
            (100, Some(10), 10),
            (100, Some(0), 1),
            (10, Some(50), 10),
        ] {
            assert_eq!(share(max, set), want, "max {max}, set {set:?}");
        }
        for (held, share, ok) in [(0, 1, true), (2, 3, true), (3, 3, false), (9, 3, false)] {
            assert_eq!(may_lease(held, share), ok, "{held} of {share}");
        }
    }

    #[test]
    fn a_lease_is_given_back_when_its_holder_goes() {
        let s = Arc::new(Shares::default());
        let n = Arc::new(Notify::new());
        let u: Arc<str> = Arc::from("app");
        let a = s.try_take(&u, 2, &n).expect("first");
        let b = s.try_take(&u, 2, &n).expect("second");
        assert!(s.try_take(&u, 2, &n).is_none(), "past its share");
        assert_eq!(s.held("app"), 2);
        assert_eq!(s.held("other"), 0);
        drop(a);
        assert_eq!(s.held("app"), 1);
        drop(b);
        assert_eq!(s.held("app"), 0);
    }
}

//! Failed logins cost the one who fails them: after [`FREE_FAILURES`]
//! failed logins in a row from one address, each new connection from it
//! waits before its greeting, twice as long per further failure up to
//! [`MAX_DELAY`] (the idea of MariaDB's connection_control plugin; the
//! relay answers logins itself, so the server's max_connect_errors never
//! sees them). A login that succeeds clears the address. Other addresses
//! are not slowed. The decision is [`delay`], a pure function; [`Throttle`]
//! keeps the counts, bounded in memory.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failed logins from one address before any delay: a person mistyping a
/// password is not slowed.
pub const FREE_FAILURES: u32 = 10;

/// The longest wait before a greeting.
pub const MAX_DELAY: Duration = Duration::from_secs(5);

/// Addresses remembered at once; past it, the oldest are forgotten.
const KEEP: usize = 10_000;

/// A failure streak older than this is forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(3600);

/// The wait before greeting an address with `failures` failed logins in a
/// row: none up to [`FREE_FAILURES`], then 250 ms doubling per failure, at
/// most [`MAX_DELAY`].
pub fn delay(failures: u32) -> Duration {
    if failures <= FREE_FAILURES {
        return Duration::ZERO;
    }
    let n = (failures - FREE_FAILURES - 1).min(16);
    (Duration::from_millis(250) * 2u32.pow(n)).min(MAX_DELAY)
}

/// Failed-login streaks by address.
#[derive(Default)]
pub struct Throttle {
    streaks: Mutex<HashMap<String, (u32, Instant)>>,
    /// Some address has a streak: while none has (the usual case), a
    /// connect and a login take no lock here.
    any: AtomicBool,
}

impl Throttle {
    /// How long a new connection from `host` waits before its greeting.
    pub fn wait(&self, host: &str) -> Duration {
        if !self.any.load(Ordering::Relaxed) {
            return Duration::ZERO;
        }
        let m = self.streaks.lock().unwrap_or_else(|e| e.into_inner());
        match m.get(host) {
            Some((n, at)) if at.elapsed() < FORGET_AFTER => delay(*n),
            _ => Duration::ZERO,
        }
    }

    /// A login from `host` failed.
    pub fn failed(&self, host: &str) {
        let mut m = self.streaks.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() >= KEEP && !m.contains_key(host) {
            m.retain(|_, (_, at)| at.elapsed() < FORGET_AFTER);
            if m.len() >= KEEP {
                if let Some(oldest) = m
                    .iter()
                    .min_by_key(|(_, (_, at))| *at)
                    .map(|(k, _)| k.clone())
                {
                    m.remove(&oldest);
                }
            }
        }
        let e = m.entry(host.to_string()).or_insert((0, Instant::now()));
        if e.1.elapsed() >= FORGET_AFTER {
            e.0 = 0;
        }
        e.0 = e.0.saturating_add(1);
        e.1 = Instant::now();
        self.any.store(true, Ordering::Relaxed);
    }

    /// A login from `host` succeeded: its streak ends.
    pub fn succeeded(&self, host: &str) {
        if !self.any.load(Ordering::Relaxed) {
            return;
        }
        let mut m = self.streaks.lock().unwrap_or_else(|e| e.into_inner());
        m.remove(host);
        self.any.store(!m.is_empty(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_streak_length_waits_its_time() {
        for (failures, ms) in [
            (0, 0),
            (1, 0),
            (10, 0),
            (11, 250),
            (12, 500),
            (13, 1000),
            (15, 4000),
            (16, 5000),
            (1_000, 5000),
            (u32::MAX, 5000),
        ] {
            assert_eq!(
                delay(failures),
                Duration::from_millis(ms),
                "{failures} failures"
            );
        }
    }

    #[test]
    fn a_streak_is_per_address_and_ends_with_a_success() {
        let t = Throttle::default();
        for _ in 0..13 {
            t.failed("10.0.0.1");
        }
        assert_eq!(t.wait("10.0.0.1"), Duration::from_millis(1000));
        assert_eq!(t.wait("10.0.0.2"), Duration::ZERO, "another address");
        t.succeeded("10.0.0.1");
        assert_eq!(t.wait("10.0.0.1"), Duration::ZERO);
    }

    #[test]
    fn memory_is_bounded() {
        let t = Throttle::default();
        for i in 0..(KEEP + 50) {
            t.failed(&format!("h{i}"));
        }
        assert!(t.streaks.lock().map(|m| m.len()).unwrap_or(0) <= KEEP);
    }
}

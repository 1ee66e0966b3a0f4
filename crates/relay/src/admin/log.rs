//! The relay's log lines (through `tracing`; the binary chooses text or
//! JSON and the level): failed logins and pool exhaustion at most once a
//! second each, with how many were folded in; backend up, down and role
//! changes as they happen.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{SystemTime, UNIX_EPOCH};

/// Lets one line through per second; counts the ones it holds back.
#[derive(Default)]
pub struct Limiter {
    last_second: AtomicU64,
    held: AtomicU64,
}

impl Limiter {
    /// `Some(n)` when a line may be written now, `n` being how many were
    /// held back since the last one.
    pub fn pass(&self) -> Option<u64> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let last = self.last_second.load(Relaxed);
        if now > last
            && self
                .last_second
                .compare_exchange(last, now, Relaxed, Relaxed)
                .is_ok()
        {
            return Some(self.held.swap(0, Relaxed));
        }
        self.held.fetch_add(1, Relaxed);
        None
    }
}

fn folded(n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" (and {n} more since the last line)")
    }
}

static LOGIN: Limiter = Limiter {
    last_second: AtomicU64::new(0),
    held: AtomicU64::new(0),
};
static POOL: Limiter = Limiter {
    last_second: AtomicU64::new(0),
    held: AtomicU64::new(0),
};

/// A client's login was refused.
pub fn login_failed(user: &str, client: u32, why: &str) {
    if let Some(n) = LOGIN.pass() {
        let who = if user.is_empty() {
            String::new()
        } else {
            format!(" for user '{user}'")
        };
        tracing::warn!(
            client,
            "relay: login refused{who} (client {client}): {why}{}",
            folded(n)
        );
    }
}

/// A client could not get a backend connection in time (or the queue
/// was full).
pub fn pool_exhausted(backend: &str, why: &str) {
    if let Some(n) = POOL.pass() {
        tracing::warn!(
            backend,
            "relay: pool exhausted on {backend}: {why}{}",
            folded(n)
        );
    }
}

/// A panic (a bug) caught in the relay's own work: `what` stopped there,
/// `then` says what happens now. Counted in `internal_errors_total`;
/// never rate-limited (each is a bug to report).
pub fn internal_error(
    metrics: &crate::admin::metrics::Metrics,
    what: &str,
    p: &(dyn std::any::Any + Send),
    then: &str,
) {
    metrics.internal_errors.fetch_add(1, Relaxed);
    tracing::error!(
        "relay: {what} stopped at an internal error ({}): {}; {then}",
        sqlfleet_conn::text::A_BUG,
        sqlfleet_conn::text::panic_message(p)
    );
}

/// A Galera cluster's writes moved to another node.
pub fn galera_writer(from: &str, to: &str) {
    if from == "none" {
        tracing::info!(backend = to, "relay: Galera writer is {to}");
    } else {
        tracing::warn!(
            backend = to,
            "relay: Galera writer is now {to} (was {from})"
        );
    }
}

/// A backend's role as health checks see it changed. The line names the
/// backend once (in the message; `role` is the one field), and says what
/// it was only when that was another role.
pub fn backend_role(backend: &str, from: &str, to: &str, error: Option<&str>) {
    match (to, error) {
        ("down", Some(e)) if from == "down" => {
            tracing::error!(role = to, "relay: backend {backend} is down: {e}")
        }
        ("down", Some(e)) => tracing::error!(
            role = to,
            "relay: backend {backend} is down (it was {from}): {e}"
        ),
        ("down", None) => tracing::error!(role = to, "relay: backend {backend} is down"),
        ("excluded", Some(e)) => tracing::warn!(
            role = to,
            "relay: Galera node {backend} gets no traffic (it was {from}): {e}"
        ),
        (_, _) if from == "down" => {
            tracing::info!(role = to, "relay: backend {backend} is up as {to}")
        }
        _ => tracing::warn!(
            role = to,
            "relay: backend {backend} changed role: {from} -> {to}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::Limiter;

    #[test]
    fn one_line_a_second_and_the_rest_counted() {
        let l = Limiter::default();
        assert_eq!(l.pass(), Some(0));
        assert_eq!(l.pass(), None);
        assert_eq!(l.pass(), None);
        assert_eq!(l.held.load(std::sync::atomic::Ordering::Relaxed), 2);
    }
}

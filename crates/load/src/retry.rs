//! The one retry policy of the loader: which errors are worth another
//! attempt, when that attempt needs a new connection (and so a replay of
//! the session prelude), how long to wait, and how often to try.
//!
//! [`run`] is the loader's one retry loop (the scheduler's statements,
//! the workers' batches, chunks and single statements), so they cannot
//! drift apart.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Attempts per piece of work, the first included.
pub const MAX_ATTEMPTS: u32 = 6;

use sqlfleet_conn::codes;

/// Is `e` worth another attempt of the same work?
pub fn retryable(e: &mysql_async::Error) -> bool {
    match e {
        mysql_async::Error::Server(s) => {
            codes::TRANSIENT.contains(&s.code)
                || codes::CONNECTION_LOST.contains(&s.code)
                || s.code == codes::INTERRUPTED
        }
        mysql_async::Error::Io(_) => true,
        mysql_async::Error::Driver(d) => matches!(
            d,
            mysql_async::DriverError::ConnectionClosed | mysql_async::DriverError::PoolDisconnected
        ),
        _ => false,
    }
}

/// Does the next attempt need a fresh connection? True when the
/// connection itself is gone (its session state with it); a deadlock or
/// a lock wait keeps the connection.
pub fn needs_reconnect(e: &mysql_async::Error) -> bool {
    match e {
        mysql_async::Error::Io(_) | mysql_async::Error::Driver(_) => true,
        mysql_async::Error::Server(s) => codes::CONNECTION_LOST.contains(&s.code),
        _ => false,
    }
}

/// The wait before attempt `attempt + 1` (exponential, capped).
pub fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(50 << attempt.min(6))
}

/// What a loop does after attempt `attempt` (1-based) of its work failed
/// with `e`, an error the work may be tried again for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Wait, then try again: on a new connection (the prelude replayed)
    /// when the old one is gone.
    Again { wait: Duration, reconnect: bool },
    /// No more attempts: `e` is the work's error.
    GiveUp,
}

/// The one retry decision of every loop. `may_reconnect`: the work can
/// move to a new connection (not where the connection holds what the
/// work needs: the one-connection regime's session, a non-transactional
/// batch part of which may have applied).
pub fn next(attempt: u32, e: &mysql_async::Error, may_reconnect: bool) -> Next {
    let reconnect = needs_reconnect(e);
    if attempt >= MAX_ATTEMPTS || (reconnect && !may_reconnect) {
        return Next::GiveUp;
    }
    Next::Again {
        wait: backoff(attempt),
        reconnect,
    }
}

/// Which failed attempts [`run`] may try again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Worth {
    /// Those whose error is [`retryable`].
    Retryable,
    /// Every error: the attempt returns as errors only those it sorted
    /// as worth another attempt.
    Sorted,
}

/// One attempt of a piece of work, as [`run`] repeats it.
pub trait Attempt: Send {
    type Out: Send;
    /// Tries the work once; `fresh`: on a new connection (the old one is
    /// gone, and its session with it).
    fn once(
        &mut self,
        fresh: bool,
    ) -> impl std::future::Future<Output = Result<Self::Out, mysql_async::Error>> + Send;
}

/// Runs `attempt` until it succeeds, fails with an error not `worth`
/// another attempt, or the policy ([`next`]) gives up; the result is the
/// last attempt's. Between attempts it waits the policy's backoff and
/// counts the retry in `retries`. `may_reconnect` false gives up where a
/// new connection would be needed.
pub async fn run<A: Attempt>(
    retries: &AtomicU64,
    may_reconnect: bool,
    worth: Worth,
    attempt: &mut A,
) -> Result<A::Out, mysql_async::Error> {
    let (mut n, mut fresh) = (0, false);
    loop {
        n += 1;
        let r = attempt.once(fresh).await;
        let step = match &r {
            Err(e) if worth == Worth::Sorted || retryable(e) => next(n, e, may_reconnect),
            _ => return r,
        };
        let Next::Again { wait, reconnect } = step else {
            return r;
        };
        retries.fetch_add(1, Ordering::Relaxed);
        fresh = reconnect;
        tokio::time::sleep(wait).await;
    }
}

/// Codes that mean "this DDL already ran" (a creating one: dumps create).
/// Tolerated on `--resume` only for the one statement the journal shows
/// as started but not recorded (it may have run just before the
/// interruption).
pub const ALREADY_DONE: &[u16] = codes::EXISTS;

#[cfg(test)]
mod tests {
    use super::*;

    fn server(code: u16) -> mysql_async::Error {
        mysql_async::Error::Server(mysql_async::ServerError {
            code,
            message: String::new(),
            state: "HY000".into(),
        })
    }

    #[test]
    fn deadlocks_retry_on_the_same_connection_lost_connections_reconnect() {
        assert!(retryable(&server(1213)) && !needs_reconnect(&server(1213)));
        assert!(retryable(&server(2013)) && needs_reconnect(&server(2013)));
        assert!(!retryable(&server(1062)));
        assert!(backoff(1) < backoff(2) && backoff(10) == backoff(6));
    }

    #[test]
    fn the_next_step_after_a_failed_attempt() {
        let lost = server(2013);
        let deadlock = server(1213);
        let again = |attempt, reconnect| Next::Again {
            wait: backoff(attempt),
            reconnect,
        };
        let cases = [
            // (attempt, error, may reconnect, next)
            (1, &deadlock, true, again(1, false)),
            (1, &deadlock, false, again(1, false)),
            (1, &lost, true, again(1, true)),
            (1, &lost, false, Next::GiveUp),
            (MAX_ATTEMPTS - 1, &lost, true, again(MAX_ATTEMPTS - 1, true)),
            (MAX_ATTEMPTS, &deadlock, true, Next::GiveUp),
            (MAX_ATTEMPTS + 3, &lost, true, Next::GiveUp),
        ];
        for (attempt, e, may, want) in cases {
            assert_eq!(
                next(attempt, e, may),
                want,
                "attempt {attempt}, {e:?}, may {may}"
            );
        }
    }
}

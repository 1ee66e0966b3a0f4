//! The one retry policy of the loader: which errors are worth another
//! attempt, when that attempt needs a new connection (and so a replay of
//! the session prelude), how long to wait, and how often to try.
//!
//! Every retry loop (the scheduler's statements, the workers' batches and
//! chunks) asks this module, so they cannot drift apart.

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
}

//! The relay's own long-lived tasks (the pool's upkeep, the result
//! cache's binlog follower, learning the server's greeting) kept through
//! a panic in them, a bug: the panic is logged with its words and counted
//! (`admin::log::internal_error`), and the task starts again a second
//! later. Before, a panicked task was simply gone and nobody said so: the
//! pool kept no minimum and closed no expired connection any more, or the
//! result cache stayed bypassed for good.
//!
//! (The health checks catch a panic per check themselves: a panicked
//! check is a failed one, `backend/health.rs`.)

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures_util::FutureExt;

use crate::admin::metrics::Metrics;

/// How long a panicked task waits before it starts again (a panic that
/// comes back at once is then logged once a second, not in a loop).
pub const RESTART_AFTER: Duration = Duration::from_secs(1);

/// Runs `make()`'s future until it ends; when it panics, says so and runs
/// a new one after [`RESTART_AFTER`]. `what` names the task in the log.
pub async fn supervise<F, Fut>(what: &str, metrics: &Metrics, mut make: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    loop {
        match AssertUnwindSafe(make()).catch_unwind().await {
            Ok(()) => return,
            Err(p) => {
                crate::admin::log::internal_error(
                    metrics,
                    what,
                    p.as_ref(),
                    &format!("it starts again in {}s", RESTART_AFTER.as_secs()),
                );
                tokio::time::sleep(RESTART_AFTER).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

    /// A task that panics twice is started a third time, and each panic
    /// is counted; one that ends is not started again.
    #[tokio::test(start_paused = true)]
    async fn a_panicked_task_starts_again_and_an_ended_one_does_not() {
        let metrics = Metrics::default();
        let runs = AtomicU32::new(0);
        supervise("the test's task", &metrics, || {
            let n = runs.fetch_add(1, Relaxed);
            async move {
                if n < 2 {
                    panic!("test panic {n}");
                }
            }
        })
        .await;
        assert_eq!(runs.load(Relaxed), 3);
        assert_eq!(metrics.internal_errors.load(Relaxed), 2);
    }
}

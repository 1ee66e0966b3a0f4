//! A backend stopped (SIGSTOP), or the network to it stalled or cut
//! (`sqlfleet_testkit::netfault`), under readers going through the relay:
//! the scene, and what it measured — the readers' rate before and during the
//! stall, the longest read, errors, when the relay marked it down.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use sqlfleet_conn::Target;

use super::relay::Relay;

/// Readers through the relay in each scene.
pub const READERS: usize = 4;
/// The longest one read may take while a backend is stopped: the health
/// check's timeout (2 s) and its interval, then the retry, with room; a
/// read caught for the whole stall takes the stall.
pub const LONGEST: Duration = Duration::from_secs(5);

/// The share of the readers' rate before a fault they keep during it, at
/// the least (see [`Stall::check`]).
pub const KEPT: f64 = 0.25;

/// One read: when it ended, how long it took, and its error if any.
pub type Done = (Instant, Duration, Option<String>);

pub fn signal(pid: i32, sig: libc::c_int) {
    // SAFETY: a signal to the pid our sandbox server wrote.
    let rc = unsafe { libc::kill(pid, sig) };
    assert_eq!(rc, 0, "signal {sig} to {pid}");
}

/// [`READERS`] clients running `sql` until `stop`; every read's outcome
/// goes to `log`. A failed read reconnects.
pub fn readers(
    rt: &tokio::runtime::Runtime,
    target: Target,
    sql: &'static str,
    log: Arc<Mutex<Vec<Done>>>,
    stop: Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..READERS)
        .map(|_| {
            let (log, stop, target) = (log.clone(), stop.clone(), target.clone());
            rt.spawn(async move {
                let mut c = target
                    .connect(Duration::from_secs(5))
                    .await
                    .expect("reader connects");
                while !stop.load(Ordering::Relaxed) {
                    let t0 = Instant::now();
                    let r: Result<Option<i64>, _> = c.query_first(sql).await;
                    let err = r.err().map(|e| e.to_string());
                    let failed = err.is_some();
                    log.lock()
                        .expect("log")
                        .push((Instant::now(), t0.elapsed(), err));
                    if failed {
                        // A failed read may have cost the connection.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        if let Ok(n) = target.connect(Duration::from_secs(5)).await {
                            c = n;
                        }
                    }
                }
            })
        })
        .collect()
}

/// Reads per second that ended in `[from, to)`, and the errors among them.
pub fn rate(log: &[Done], from: Instant, to: Instant) -> (f64, Vec<String>) {
    let inside: Vec<&Done> = log.iter().filter(|d| d.0 >= from && d.0 < to).collect();
    let errors = inside.iter().filter_map(|d| d.2.clone()).collect();
    let ok = inside.iter().filter(|d| d.2.is_none()).count();
    (ok as f64 / (to - from).as_secs_f64(), errors)
}

/// What one stall scene measured.
#[derive(Debug)]
pub struct Stall {
    pub before: f64,
    pub during: f64,
    pub longest: Duration,
    pub errors: Vec<String>,
    /// When the relay's status first showed the stopped backend down.
    pub marked_down: Option<Duration>,
    /// Reads over half a second: how long, from when (after the stop).
    pub slow: Vec<String>,
}

impl Stall {
    /// Prints the scene's figures and asserts its claims: only the reads
    /// the fault caught were slow — at most two per reader (one on the
    /// faulted backend, one behind a view lookup on it), however long the
    /// stall; no read waited longer than [`LONGEST`]; (`errors_allowed`
    /// false) no read failed; and the readers kept reading, at least
    /// [`KEPT`] of their rate before.
    ///
    /// The counts are the claim; the rate is a floor against a relay that
    /// makes every read pay (a read that waits for the stalled backend's
    /// timeout takes the rate to a few reads a second). It is not half:
    /// on a busy 2-core machine the readers' rate moves by that much on
    /// its own (a CI run: 5518/s to 8878/s between the scenes' "before",
    /// and 5926/s to 2870/s across a cut with no slow read and no error).
    pub fn check(&self, scene: &str, errors_allowed: bool) {
        eprintln!(
            "{scene}: reads {:.0}/s before, {:.0}/s during; longest read {:?}; errors {}; \
             marked down after {:?}; reads over 0.5 s: {:?}",
            self.before,
            self.during,
            self.longest,
            self.errors.len(),
            self.marked_down,
            self.slow
        );
        assert!(
            self.slow.len() <= 2 * READERS,
            "{scene}: {} reads were slow, more than the fault could catch ({}): {:?}",
            self.slow.len(),
            2 * READERS,
            self.slow
        );
        assert!(
            self.during >= self.before * KEPT,
            "{scene}: the readers' rate fell from {:.0}/s to {:.0}/s",
            self.before,
            self.during
        );
        assert!(
            self.longest <= LONGEST,
            "{scene}: a read waited {:?} (bound {LONGEST:?})",
            self.longest
        );
        assert!(
            errors_allowed || self.errors.is_empty(),
            "{scene}: reads failed: {:?}",
            self.errors
        );
    }
}

/// The process `pid` stopped (SIGSTOP), then continued.
pub fn sigstop(pid: i32) -> (impl FnOnce(), impl FnOnce()) {
    (
        move || signal(pid, libc::SIGSTOP),
        move || signal(pid, libc::SIGCONT),
    )
}

/// Readers run `sql` through the relay as `target` for 3 s, then the
/// fault `begin`s on the backend the relay knows as 127.0.0.1:`port`,
/// lasts `stall` and `end`s; a second later the readers stop.
#[allow(clippy::too_many_arguments)]
pub fn stall(
    rt: &tokio::runtime::Runtime,
    relay: &Relay,
    target: Target,
    sql: &'static str,
    (begin, end): (impl FnOnce(), impl FnOnce()),
    port: u16,
    stall: Duration,
) -> Stall {
    let log = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = readers(rt, target, sql, log.clone(), stop.clone());
    std::thread::sleep(Duration::from_secs(3));
    let stopped_at = Instant::now();
    begin();
    let mut marked_down = None;
    while stopped_at.elapsed() < stall {
        if marked_down.is_none()
            && relay
                .roles()
                .iter()
                .any(|(a, r)| a.ends_with(&format!(":{port}")) && r == "down")
        {
            marked_down = Some(stopped_at.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let resumed_at = Instant::now();
    end();
    // Reads caught by the stall end now at the latest.
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    rt.block_on(async {
        for t in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(30), t).await;
        }
    });
    let log = log.lock().expect("log").clone();
    let first = log.iter().map(|d| d.0).min().expect("reads");
    let (before, _) = rate(
        &log,
        first.max(stopped_at - Duration::from_secs(2)),
        stopped_at,
    );
    let (during, errors) = rate(&log, stopped_at, resumed_at);
    let longest = log
        .iter()
        .filter(|d| d.0 > stopped_at)
        .map(|d| d.1)
        .max()
        .unwrap_or_default();
    let slow = log
        .iter()
        .filter(|d| d.1 > Duration::from_millis(500))
        .map(|d| {
            let start = (d.0 - d.1).saturating_duration_since(stopped_at);
            format!(
                "{:.2}s from +{:.2}s",
                d.1.as_secs_f64(),
                start.as_secs_f64()
            )
        })
        .collect();
    Stall {
        before,
        during,
        longest,
        errors,
        marked_down,
        slow,
    }
}

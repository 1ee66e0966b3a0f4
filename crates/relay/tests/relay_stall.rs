//! A backend that stops answering — SIGSTOP, as a hung server or a stalled
//! TCP peer looks from outside: the socket stays open and nothing comes
//! back — costs only the statements that are on it, up to the health
//! check's timeout; every other client keeps reading. On the relay's own
//! primary + 2 replicas (read/write split, read-your-writes), readers in
//! a database that has a view (so the relay's view lookups are on their
//! path) read while (1) a replica and then (2) the primary are stopped for
//! a few seconds. Each scene asserts that the readers' rate during the
//! stall is at least half the rate before it, that no read waited longer
//! than a bound well under the stall, and that no read failed (a read
//! whose replica stops answering is retried elsewhere, as one whose
//! replica dies is).

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::relay::app;
use common::routing::start_routing_relay;
use mysql_async::prelude::Queryable;
use sqlfleet_sandbox::{node, Sandbox};
use sqlfleet_testkit::replicated;

/// How long each stall lasts.
const STALL: Duration = Duration::from_secs(8);
/// Readers through the relay.
const READERS: usize = 4;
/// The longest one read may take while a backend is stopped: the health
/// check's timeout (2 s) and its interval, then the retry, with room; a
/// read caught for the whole stall takes `STALL`.
const LONGEST: Duration = Duration::from_secs(5);

fn signal(sb: &Sandbox, name: &str, sig: libc::c_int) {
    let n = sb.meta.nodes.iter().find(|n| n.name == name).expect("node");
    let pid = node::running_pid(&sb.layout.node(n)).expect("running");
    // SAFETY: a signal to the pid our sandbox server wrote.
    let rc = unsafe { libc::kill(pid, sig) };
    assert_eq!(rc, 0, "signal {sig} to {name}");
}

/// One read: when it ended, how long it took, and its error if any.
type Done = (Instant, Duration, Option<String>);

/// Readers reading until `stop`; every read's outcome goes to `log`.
fn readers(
    rt: &tokio::runtime::Runtime,
    port: u16,
    db: &str,
    log: Arc<Mutex<Vec<Done>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..READERS)
        .map(|_| {
            let (log, stop, db) = (log.clone(), stop.clone(), db.to_string());
            rt.spawn(async move {
                let mut c = app(port, "app-pw", Some(&db))
                    .connect(Duration::from_secs(5))
                    .await
                    .expect("reader connects");
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let t0 = Instant::now();
                    let r: Result<Option<i64>, _> = c
                        .query_first("SELECT COUNT(*) FROM acct WHERE balance >= 0")
                        .await;
                    let err = r.err().map(|e| e.to_string());
                    let failed = err.is_some();
                    log.lock()
                        .expect("log")
                        .push((Instant::now(), t0.elapsed(), err));
                    if failed {
                        // A failed read may have cost the connection.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        if let Ok(n) = app(port, "app-pw", Some(&db))
                            .connect(Duration::from_secs(5))
                            .await
                        {
                            c = n;
                        }
                    }
                }
            })
        })
        .collect()
}

/// Reads per second that ended in `[from, to)`, and the errors among them.
fn rate(log: &[Done], from: Instant, to: Instant) -> (f64, Vec<String>) {
    let inside: Vec<&Done> = log.iter().filter(|d| d.0 >= from && d.0 < to).collect();
    let errors = inside.iter().filter_map(|d| d.2.clone()).collect();
    let ok = inside.iter().filter(|d| d.2.is_none()).count();
    (ok as f64 / (to - from).as_secs_f64(), errors)
}

#[test]
fn a_stopped_replica_or_primary_costs_only_its_own_statements() {
    let srv = replicated();
    let dir = tempfile::tempdir().expect("tmp");
    let relay = start_routing_relay(
        srv,
        dir.path(),
        "read_write_split = true\nconsistency = \"session\"\nhealth_interval = 0.2",
        "",
        "",
    );
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("stall"));
    rt.block_on(async {
        let mut c = app(relay.port, "app-pw", Some(&db))
            .connect(Duration::from_secs(5))
            .await
            .expect("connect");
        c.query_drop(
            "CREATE TABLE acct (id INT PRIMARY KEY, balance BIGINT); \
             INSERT INTO acct SELECT seq, 100 FROM seq_1_to_100; \
             CREATE VIEW rich AS SELECT id FROM acct WHERE balance > 1000",
        )
        .await
        .expect("schema");
    });
    // Both replicas have the table before the readers start.
    std::thread::sleep(Duration::from_secs(1));
    for (scene, name) in [("a replica", "node3"), ("the primary", "node1")] {
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let tasks = readers(&rt, relay.port, &db, log.clone(), stop.clone());
        std::thread::sleep(Duration::from_secs(3));
        let stopped_at = Instant::now();
        signal(&srv.sandbox, name, libc::SIGSTOP);
        let port = srv
            .sandbox
            .meta
            .nodes
            .iter()
            .find(|n| n.name == name)
            .expect("node")
            .port;
        let mut marked_down = None;
        while stopped_at.elapsed() < STALL {
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
        signal(&srv.sandbox, name, libc::SIGCONT);
        // Reads caught by the stall end now at the latest.
        std::thread::sleep(Duration::from_secs(1));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
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
        let slow: Vec<String> = log
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
        eprintln!(
            "{scene} stopped for {STALL:?}: reads {before:.0}/s before, {during:.0}/s during; \
             longest read {longest:?}; errors {}; marked down after {marked_down:?}; \
             reads over 0.5 s: {slow:?}",
            errors.len()
        );
        assert!(
            during >= before * 0.5,
            "{scene} stopped: the readers' rate fell from {before:.0}/s to {during:.0}/s"
        );
        assert!(
            longest <= LONGEST,
            "{scene} stopped: a read waited {longest:?} (bound {LONGEST:?})"
        );
        assert!(
            errors.is_empty(),
            "{scene} stopped: reads failed: {errors:?}"
        );
        // The stopped node is back in its role before the next scene.
        relay.wait_roles(1, 2);
    }
}

//! kill -9 of `replicate` itself, at every boundary where applied work and
//! its recorded position could part (named failpoints) and at seeded
//! random instants, while the source is written in ROW, MIXED and
//! STATEMENT format with non-idempotent changes (`v = v + 1`,
//! `INSERT ... SELECT`, `UPDATE ... ORDER BY ... LIMIT`, DDL — an ALTER
//! that runs twice without an error among it). After the
//! campaign one clean run catches up and every database must equal its
//! source: a transaction applied twice or lost shows as a difference.
//!
//! The replicate process is this test binary run again (the `#[ignore]`d
//! `child_replicate` test), so a kill ends it and not the checker. A
//! failure prints its seed, its fault schedule and the line to replay it;
//! `bench/faults.sh` runs long campaigns with new seeds.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use mysql_async::prelude::Queryable;
use rand::{Rng, SeedableRng};
use sqlfleet_replicate::config;
use sqlfleet_replicate::run::{self, Options};
use sqlfleet_replicate::source::SourceView;
use sqlfleet_testkit::faults::{self, Campaign, Child, Fault};
use sqlfleet_testkit::workload::exec;
use sqlfleet_testkit::TestServer;

/// The boundaries a kill lands on (see the replicate crate's failpoints).
const POINTS: &[&str] = &[
    "replicate::batch_before_commit",
    "replicate::batch_after_commit",
    "replicate::commit_before",
    "replicate::commit_after",
    "replicate::ahead_applied",
    "replicate::floor_before_write",
    "replicate::floor_after_write",
    "replicate::ddl_marked",
    "replicate::ddl_ran",
];

const FORMATS: &[&str] = &["ROW", "MIXED", "STATEMENT"];

const ENTRY: &str = "child_replicate";

/// Where a fixture server lives, for the child (it opens the sandbox
/// itself and never starts one).
fn place(s: &TestServer) -> String {
    format!("{}\n{}", s.home().display(), s.sandbox.name())
}

fn open(place: &str) -> sqlfleet_conn::Target {
    let (home, name) = place.split_once('\n').expect("home and name");
    let sb = sqlfleet_sandbox::Sandbox::open(Path::new(home), name).expect("the sandbox");
    sb.target(sb.meta.primary()).expect("its target")
}

#[test]
#[ignore = "the child process of the kill -9 campaign: run by it, not alone"]
fn child_replicate() {
    let cfg_path = std::env::var("KILL9_CONFIG").expect("run by the kill -9 campaign only");
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let n = sqlfleet_faults::arm_from_env().expect("SQLFLEET_FAILPOINTS");
    eprintln!("child: {n} failpoint(s) armed");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let cfg = config::load(Path::new(&cfg_path)).expect("config");
        let target = open(&std::env::var("KILL9_TARGET").expect("target"));
        let source = open(&std::env::var("KILL9_SOURCE").expect("source"));
        let opts = Options {
            threads: None,
            until_caught_up: std::env::var("KILL9_UNTIL_CAUGHT_UP").is_ok(),
            give_up_after: None,
        };
        let views = vec![Arc::new(Mutex::new(SourceView::default()))];
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let summary = run::run(&cfg, &target, &[source], &opts, rx, views)
            .await
            .expect("replicate ran");
        eprintln!("child: {summary:?}");
        assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    });
}

/// The databases (one per binlog format) and their tables.
async fn create(s: &TestServer) {
    for f in FORMATS {
        let db = format!("k9_{}", f.to_lowercase());
        exec(
            s,
            &format!(
                "DROP DATABASE IF EXISTS {db}; CREATE DATABASE {db}; \
                 CREATE TABLE {db}.t (id INT PRIMARY KEY, v BIGINT NOT NULL, n INT NOT NULL DEFAULT 0) ENGINE=InnoDB; \
                 CREATE TABLE {db}.log (id INT AUTO_INCREMENT PRIMARY KEY, src INT NOT NULL, v BIGINT NOT NULL) ENGINE=InnoDB; \
                 INSERT INTO {db}.t (id, v) SELECT seq, 0 FROM {db}.seq_1_to_20"
            ),
        )
        .await;
    }
}

/// Writes until `stop`: per format one session in that binlog format,
/// transactions of one to three non-idempotent statements, a DDL every
/// few dozen. Returns the transactions committed.
async fn writer(
    s: &'static TestServer,
    format: &'static str,
    seed: u64,
    stop: Arc<AtomicBool>,
) -> u64 {
    let db = format!("k9_{}", format.to_lowercase());
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut c = s.connect().await;
    c.query_drop(format!("SET SESSION binlog_format = '{format}'; USE {db}"))
        .await
        .expect("session");
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        if n.is_multiple_of(40) {
            let k = n / 40;
            c.query_drop(format!(
                "CREATE TABLE x{k} (id INT PRIMARY KEY, v INT) ENGINE=InnoDB; \
                 INSERT INTO x{k} SELECT id, v FROM t WHERE id <= 5; \
                 ALTER TABLE x{k} ADD INDEX (v)"
            ))
            .await
            .expect("ddl");
            if k > 1 {
                c.query_drop(format!("DROP TABLE x{}", k - 1))
                    .await
                    .expect("drop");
            }
            continue;
        }
        let mut sql = String::from("START TRANSACTION");
        for _ in 0..rng.gen_range(1..=8) {
            let id = rng.gen_range(1..=20);
            sql.push_str(";\n");
            sql.push_str(&match rng.gen_range(0..100) {
                0..=44 => format!(
                    "UPDATE t SET v = v + {}, n = n + 1 WHERE id = {id}",
                    rng.gen_range(1..5)
                ),
                45..=64 => format!("INSERT INTO log (src, v) SELECT id, v FROM t WHERE id = {id}"),
                65..=79 => "UPDATE t SET v = (v * 3 + 1) % 1000003 ORDER BY id LIMIT 3".to_string(),
                80..=89 => format!(
                    "INSERT INTO log (src, v) VALUES ({id}, {})",
                    rng.gen_range(0..1000)
                ),
                _ => "DELETE FROM log ORDER BY id LIMIT 1".to_string(),
            });
        }
        if format == "STATEMENT" && rng.gen_range(0..20) == 0 {
            // A slow statement, replayed as slowly: a target commit of a
            // statement chunk runs long on the server, and a kill lands
            // while it does (the server finishes it after the kill).
            sql.push_str(&format!(
                ";\nUPDATE t SET n = n + 1 WHERE id = {} AND SLEEP(0.02) = 0",
                rng.gen_range(1..=20)
            ));
        }
        sql.push_str(";\nCOMMIT");
        c.query_drop(sql).await.expect("write");
        // A steady source (a few hundred transactions a second each), so
        // the backlog a long campaign leaves stays within the final run's
        // reach.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let _ = c.disconnect().await;
    n
}

fn config_file(dir: &Path) -> PathBuf {
    let path = dir.join("kill9.toml");
    std::fs::write(
        &path,
        format!(
            r#"
            [target]
            dsn = "{}"
            [apply]
            threads = 2
            [[source]]
            name = "k9"
            dsn = "{}"
            include = ["k9_*"]
            start = "gtid:{}"
            "#,
            dsn(target()),
            dsn(source(0)),
            START.lock().expect("start").clone()
        ),
    )
    .expect("config");
    path
}

static START: Mutex<String> = Mutex::new(String::new());

fn env(cfg: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("KILL9_CONFIG", cfg.display().to_string()),
        ("KILL9_TARGET", place(target())),
        ("KILL9_SOURCE", place(source(0))),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill9_campaign_leaves_every_format_identical_to_its_source() {
    let seed = faults::seed(20_261_128);
    let rounds = faults::rounds(30);
    let mut campaign = Campaign::new(
        "kill9_campaign_leaves_every_format_identical_to_its_source",
        seed,
    );
    let s = source(0);
    // The source starts before its databases are made: their DDL is
    // replicated too.
    *START.lock().expect("start") = binlog_pos(s).await.to_string();
    create(s).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config_file(dir.path());
    let log = dir.path().join("child.log");

    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = FORMATS
        .iter()
        .enumerate()
        .map(|(i, f)| tokio::spawn(writer(s, f, seed + i as u64, stop.clone())))
        .collect();
    let schedule = faults::plan(
        seed,
        rounds,
        POINTS,
        6,
        (Duration::from_millis(300), Duration::from_millis(2500)),
    );
    let killed_at_point = AtomicU64::new(0);
    for fault in &schedule {
        let env = env(&cfg);
        let fp = fault.failpoints();
        let log2 = log.clone();
        let deadline = fault.deadline() + Duration::from_millis(600);
        let (st, by_us) = tokio::task::spawn_blocking(move || {
            let mut child = Child::spawn(ENTRY, &env, &fp, &log2);
            child.wait_or_kill(deadline)
        })
        .await
        .expect("child");
        match fault {
            Fault::KillAt { .. } if !by_us && faults::killed(&st) => {
                killed_at_point.fetch_add(1, Ordering::Relaxed);
                campaign.fault(format!("{fault}: killed there"));
            }
            Fault::KillAt { .. } if by_us => {
                campaign.fault(format!("{fault}: not reached, killed at the deadline"))
            }
            Fault::KillAfter { .. } if by_us => campaign.fault(fault.to_string()),
            _ => campaign.violations.push(format!(
                "{fault}: the child ended by itself ({st}) before any kill; log {}",
                log.display()
            )),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut written = 0;
    for w in writers {
        written += w.await.expect("writer");
    }
    // One clean run to the source's end.
    let env = env(&cfg);
    let mut env_final = env.clone();
    env_final.push(("KILL9_UNTIL_CAUGHT_UP", "1".into()));
    let log2 = log.clone();
    let st = tokio::task::spawn_blocking(move || {
        let mut child = Child::spawn(ENTRY, &env_final, "", &log2);
        child.wait(Duration::from_secs(240 + 2 * rounds as u64), &log2)
    })
    .await
    .expect("final run");
    if !st.success() {
        campaign.violations.push(format!(
            "the final run failed ({st}); log {}",
            log.display()
        ));
    }
    for f in FORMATS {
        let db = format!("k9_{}", f.to_lowercase());
        let (a, b) = (s.fingerprint(&db).await, target().fingerprint(&db).await);
        if a != b {
            let diff: Vec<String> = a
                .iter()
                .zip(b.iter())
                .filter(|(x, y)| x != y)
                .map(|(x, y)| format!("source: {x}\n    target: {y}"))
                .collect();
            campaign.violations.push(format!(
                "{db} differs from its source:\n    {}",
                diff.join("\n    ")
            ));
        }
    }
    let refused = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .matches("not applied again")
        .count();
    eprintln!(
        "{} transactions written; {} of {} kills landed on their failpoint; {refused} restarts found work a killed run's commit had already recorded",
        written,
        killed_at_point.load(Ordering::Relaxed),
        schedule.len()
    );
    if !campaign.violations.is_empty() {
        if let Ok(text) = std::fs::read_to_string(&log) {
            let tail: Vec<&str> = text.lines().rev().take(60).collect();
            eprintln!("child log (last lines, newest first):\n{}", tail.join("\n"));
        }
    }
    campaign.assert_clean();
    assert!(written > 0);
}

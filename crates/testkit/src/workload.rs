//! A seeded write workload for replication tests (row- and
//! statement-based changes, DDL half-way, transactions across databases)
//! and a crash-and-restart of a fixture server.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use rand::{Rng, SeedableRng};

use crate::TestServer;

/// Runs `sql` (several statements allowed) as root on `s`, or panics.
pub async fn exec(s: &TestServer, sql: &str) {
    let mut c = s.connect().await;
    c.query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let _ = c.disconnect().await;
}

/// Runs `session` (statements that set the session up) and then each of
/// `transactions` as root on one connection of `s`, as an application
/// does: a transaction the server ends with a deadlock (ERROR 1213, which
/// rolls it back whole) is run again; any other error panics, naming the
/// transaction.
pub async fn exec_transactions(s: &TestServer, session: &str, transactions: &[String]) {
    let mut c = s.connect().await;
    c.query_drop(session)
        .await
        .unwrap_or_else(|e| panic!("{session}: {e}"));
    for t in transactions {
        let mut deadlocks = 0;
        loop {
            match c.query_drop(t).await {
                Ok(()) => {
                    if deadlocks > 0 {
                        eprintln!("ran again after {deadlocks} deadlock(s): {t}");
                    }
                    break;
                }
                Err(mysql_async::Error::Server(e)) if e.code == 1213 && deadlocks < 100 => {
                    deadlocks += 1;
                    c.query_drop("ROLLBACK")
                        .await
                        .unwrap_or_else(|e| panic!("ROLLBACK after a deadlock: {e}"));
                }
                Err(e) => panic!("{t}: {e} (after {deadlocks} deadlocks)"),
            }
        }
    }
    let _ = c.disconnect().await;
}

/// Creates `db` with the workload's table on `src`.
pub async fn create_db(src: &TestServer, db: &str) {
    exec(
        src,
        &format!(
            "DROP DATABASE IF EXISTS {db}; CREATE DATABASE {db}; \
             CREATE TABLE {db}.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL, s VARCHAR(60), \
             d DECIMAL(12,3), j JSON, ts TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB"
        ),
    )
    .await;
}

fn text(rng: &mut rand::rngs::StdRng) -> String {
    const PARTS: &[&str] = &["a", "é", "'q'", "\\\\", "漢", " ", "x\"y", "%", "\\n"];
    (0..rng.gen_range(0..8))
        .map(|_| PARTS[rng.gen_range(0..PARTS.len())])
        .collect()
}

/// A seeded mix of inserts, updates and deletes on `db.t` (row-based and,
/// every few operations, statement-based), with `ALTER TABLE` half-way
/// and, when `other` is given, transactions writing both databases.
pub async fn workload(src: &TestServer, db: &str, other: Option<&str>, seed: u64, ops: usize) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut c = src.connect().await;
    let mut sbr = src.connect().await;
    sbr.query_drop("SET SESSION binlog_format = 'STATEMENT'")
        .await
        .expect("statement-based session");
    for i in 0..ops {
        if i == ops / 2 {
            c.query_drop(format!(
                "ALTER TABLE {db}.t ADD COLUMN extra_{seed} INT NOT NULL DEFAULT 7"
            ))
            .await
            .expect("alter");
        }
        let v: i32 = rng.gen_range(-1000..1000);
        let s = text(&mut rng).replace('\'', "''");
        let r = rng.gen_range(0..100);
        let sql = if r < 45 {
            format!(
                "INSERT INTO {db}.t (v, s, d, j) VALUES ({v}, '{s}', {}.{:03}, JSON_OBJECT('k', {v}, 's', '{s}'))",
                rng.gen_range(-9999..9999),
                rng.gen_range(0..1000)
            )
        } else if r < 65 {
            format!(
                "UPDATE {db}.t SET v = v + {v}, s = LEFT(CONCAT(IFNULL(s, ''), '{s}'), 60) WHERE id % 11 = {}",
                rng.gen_range(0..11)
            )
        } else if r < 75 {
            format!(
                "DELETE FROM {db}.t WHERE id % 13 = {}",
                rng.gen_range(0..13)
            )
        } else if r < 85 {
            // Statement-based: INSERT_ID travels in an Intvar event.
            sbr.query_drop(format!("INSERT INTO {db}.t (v, s) VALUES ({v}, 'sbr {s}')"))
                .await
                .expect("statement-based insert");
            continue;
        } else if r < 93 {
            format!(
                "START TRANSACTION; INSERT INTO {db}.t (v) VALUES ({v}); \
                 UPDATE {db}.t SET v = v - 1 WHERE id = LAST_INSERT_ID(); \
                 INSERT INTO {db}.t (v, s) VALUES ({v}, 'second'); COMMIT"
            )
        } else if let Some(o) = other {
            format!(
                "START TRANSACTION; INSERT INTO {db}.t (v, s) VALUES ({v}, 'cross'); \
                 INSERT INTO {o}.t (v, s) VALUES ({v}, 'cross'); COMMIT"
            )
        } else {
            format!("INSERT INTO {db}.t (v) VALUES ({v}), ({v}), ({v})")
        };
        c.query_drop(&sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let _ = c.disconnect().await;
    let _ = sbr.disconnect().await;
}

/// kill -9 of a fixture server, then a start on the same data directory.
pub async fn crash_and_restart(s: &TestServer) {
    stop_and_restart(s, true).await
}

/// A clean shutdown of a fixture server (its binlog ends in a Stop
/// event), then a start on the same data directory.
pub async fn restart_cleanly(s: &TestServer) {
    stop_and_restart(s, false).await
}

async fn stop_and_restart(s: &TestServer, kill: bool) {
    stop(s, kill).await;
    start_again(s).await;
}

/// Stops a fixture server: kill -9 (`kill`) or a clean shutdown; returns
/// once the process is gone.
pub async fn stop(s: &TestServer, kill: bool) {
    let sb = &s.sandbox;
    let layout = sb.layout.node(sb.meta.primary());
    let pid = sqlfleet_sandbox::node::running_pid(&layout).expect("the server runs");
    if kill {
        // SAFETY: signalling our own fixture server's pid.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    } else {
        let mut c = s.connect().await;
        let _ = c.query_drop("SHUTDOWN").await;
        drop(c);
    }
    while sqlfleet_sandbox::node::is_alive(pid) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts a stopped fixture server again on its data directory.
pub async fn start_again(s: &TestServer) {
    let sb = &s.sandbox;
    // The port can be briefly taken (a client's ephemeral port, a socket
    // closing): retry as an operator would.
    let mut tries = 0;
    loop {
        let r = sqlfleet_sandbox::up(
            &sb.home,
            &sqlfleet_sandbox::UpOptions {
                name: sb.meta.name.clone(),
                die_with_parent: true,
                ..Default::default()
            },
        )
        .await;
        match r {
            Ok(_) => return,
            Err(sqlfleet_sandbox::SandboxError::PortInUse { .. }) if tries < 50 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => {
                // The fixture's directory goes with the process: keep the
                // server's whole error log where a later look finds it
                // (a killed 11.4 server that would not start again, seen
                // twice, lost its log both times).
                let log = sb.layout.node(sb.meta.primary()).error_log();
                let kept = std::env::temp_dir().join("sqlfleet-kept").join(format!(
                    "restart-{}-{}-error.log",
                    std::process::id(),
                    sb.meta.name
                ));
                let _ = std::fs::create_dir_all(kept.parent().unwrap_or(&kept));
                let saved = std::fs::copy(&log, &kept).is_ok();
                panic!(
                    "restart the server: {e}{}",
                    if saved {
                        format!(" (its whole error log kept in {})", kept.display())
                    } else {
                        String::new()
                    }
                )
            }
        }
    }
}

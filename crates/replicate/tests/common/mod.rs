//! Shared by the replicate tests: independent primaries (distinct server
//! ids and GTID domains) and a target, a seeded write workload, waiting
//! for catch-up, and the oracle — each source database's fingerprint
//! (SHOW CREATE, CHECKSUM TABLE, row counts) equals its target copy's.

#![allow(dead_code)]

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use rand::{Rng, SeedableRng};
use sqlfleet_replicate::gtid::GtidPos;
use sqlfleet_testkit::TestServer;

/// Three independent primaries (domains 1, 2, 3) and a target (domain 9).
pub fn source(i: usize) -> &'static TestServer {
    static S: [OnceLock<TestServer>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    S[i].get_or_init(|| {
        let domain = format!("gtid-domain-id={}", i + 1);
        let id = format!("server-id={}", 100 + i);
        sqlfleet_testkit::server_with(&[&domain, &id])
    })
}

pub fn target() -> &'static TestServer {
    static T: OnceLock<TestServer> = OnceLock::new();
    T.get_or_init(|| sqlfleet_testkit::server_with(&["gtid-domain-id=9", "server-id=109"]))
}

/// A DSN for a fixture server (root over TCP).
pub fn dsn(s: &TestServer) -> String {
    let t = s.target();
    let pw = t
        .secret()
        .map(|p| p.expose().to_string())
        .unwrap_or_default();
    match &t.endpoint {
        sqlfleet_conn::Endpoint::Tcp { host, port } => {
            format!("mysql://root:{pw}@{host}:{port}/?ssl-mode=DISABLED")
        }
        sqlfleet_conn::Endpoint::Socket(p) => {
            format!("mysql://root:{pw}@localhost/?socket={}", p.display())
        }
    }
}

pub async fn exec(s: &TestServer, sql: &str) {
    let mut c = s.connect().await;
    c.query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let _ = c.disconnect().await;
}

pub async fn binlog_pos(s: &TestServer) -> GtidPos {
    let mut c = s.connect().await;
    let p: Option<String> = c
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .expect("gtid_binlog_pos");
    let _ = c.disconnect().await;
    GtidPos::parse(&p.unwrap_or_default()).expect("a GTID position")
}

/// The floor the target records for `source_name`.
pub async fn floor(source_name: &str) -> GtidPos {
    let mut c = target().connect().await;
    let rows: Vec<(u32, u32, u64)> = c
        .exec(
            "SELECT domain_id, server_id, seq_no FROM sqlfleet.replicate_position \
             WHERE source = ? AND stream = '' AND domain_id <> 4294967295",
            (source_name,),
        )
        .await
        .unwrap_or_default();
    let _ = c.disconnect().await;
    let mut p = GtidPos::default();
    for (domain, server, seq) in rows {
        p.advance(sqlfleet_replicate::gtid::Gtid {
            domain,
            server,
            seq,
        });
    }
    p
}

/// Waits until the target's floor for `name` reaches `src`'s position.
pub async fn wait_caught_up(name: &str, src: &TestServer, within: Duration) {
    let want = binlog_pos(src).await;
    let start = Instant::now();
    loop {
        let f = floor(name).await;
        if f.behind(&want) == 0 {
            return;
        }
        assert!(
            start.elapsed() < within,
            "source {name}: floor {f} did not reach {want} within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The oracle: the source database and its target copy are the same
/// (definitions, checksums, row counts).
pub async fn assert_same(src: &TestServer, db: &str, target_db: &str) {
    let a = src.fingerprint(db).await;
    let b = target().fingerprint(target_db).await;
    assert!(!a.is_empty(), "{db} has nothing to compare");
    assert_eq!(a, b, "source {db} and target {target_db} differ");
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
    let sb = &s.sandbox;
    let layout = sb.layout.node(sb.meta.primary());
    let pid = sqlfleet_sandbox::node::running_pid(&layout).expect("the server runs");
    // SAFETY: signalling our own fixture server's pid.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    while sqlfleet_sandbox::node::is_alive(pid) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
            Err(e) => panic!("restart the server: {e}"),
        }
    }
}

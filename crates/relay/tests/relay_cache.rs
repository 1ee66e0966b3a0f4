//! The relay's result cache against a real server: a hit costs the server
//! nothing (its Com_select does not move); a write through the relay is
//! read by every client as soon as its OK is in (a seeded campaign of
//! writers and readers on single-key registers, the read checked against
//! the last write acknowledged before it began: 0 violations), a
//! transaction's writes as soon as its COMMIT's OK is in; a write made
//! directly on the server is seen once the relay's binlog follower has
//! read it (every binlog shape), also across kill -9 of the primary at
//! seeded instants, and without a binlog to follow the
//! cache is bypassed (or, told so, trusts the ttl); entries are
//! kept apart by account and session settings; transactions and volatile
//! statements are never served from it.

mod common;

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use common::relay::{start_relay, Relay};
use mysql_async::prelude::Queryable;
use mysql_async::Params;
use sqlfleet_testkit::proxy::app;

// (Health checks hourly: their own SELECTs would move the server's
// Com_select, which the tests count.)
const RULES: &str = r#"
[routing]
health_interval = 3600

[[cache_rules]]
name = "kv"
tables = ["kv"]
ttl = 30

[[cache_rules]]
name = "short"
match_regex = "(?i)FROM\\s+short"
ttl = 1

[[cache_rules]]
name = "scoped"
match_regex = "(?i)FROM\\s+(kv_view|child|other)\\b"
ttl = 30
"#;

/// One test at a time: the first counts the server's statements.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn setup(srv: &sqlfleet_testkit::TestServer) -> (Relay, String) {
    setup_with(srv, RULES).await
}

/// `setup` with other rules (and routing settings) than `RULES`.
async fn setup_with(srv: &sqlfleet_testkit::TestServer, rules: &str) -> (Relay, String) {
    let (db, _) = srv.fresh_db("cache").await;
    let mut root = srv.connect().await;
    root.query_drop(format!(
        "CREATE TABLE `{db}`.kv (k INT PRIMARY KEY, v BIGINT); \
         INSERT INTO `{db}`.kv SELECT seq, 0 FROM `{db}`.seq_1_to_16; \
         CREATE TABLE `{db}`.short (k INT PRIMARY KEY, v BIGINT); \
         INSERT INTO `{db}`.short VALUES (1, 0); \
         CREATE PROCEDURE `{db}`.bump() UPDATE kv SET v = v + 1 WHERE k = 3; \
         CREATE TABLE `{db}`.other (k INT PRIMARY KEY, v BIGINT); \
         INSERT INTO `{db}`.other VALUES (1, 0); \
         CREATE TABLE `{db}`.feed (k INT AUTO_INCREMENT PRIMARY KEY, v BIGINT); \
         CREATE TRIGGER `{db}`.feed_kv AFTER INSERT ON `{db}`.feed FOR EACH ROW \
           UPDATE kv SET v = NEW.v WHERE k = 7; \
         CREATE TABLE `{db}`.bump (id INT AUTO_INCREMENT PRIMARY KEY, k INT, v BIGINT); \
         CREATE TRIGGER `{db}`.bump_kv AFTER INSERT ON `{db}`.bump FOR EACH ROW \
           UPDATE kv SET v = NEW.v WHERE k = NEW.k; \
         CREATE VIEW `{db}`.kv_view AS SELECT k, v FROM `{db}`.kv; \
         CREATE TABLE `{db}`.parent (id INT PRIMARY KEY) ENGINE=InnoDB; \
         CREATE TABLE `{db}`.child (id INT PRIMARY KEY, pid INT, \
           FOREIGN KEY (pid) REFERENCES `{db}`.parent (id) ON DELETE CASCADE) ENGINE=InnoDB; \
         INSERT INTO `{db}`.parent VALUES (1), (2); \
         INSERT INTO `{db}`.child VALUES (1, 1), (2, 1), (3, 2)"
    ))
    .await
    .expect("tables");
    // Row events that name their columns: the relay's row-level
    // invalidation (every test here runs on it; `follow.rs`'s tests hold
    // the table-wide reading of the default NO_LOG).
    root.query_drop("SET GLOBAL binlog_row_metadata = FULL")
        .await
        .expect("binlog_row_metadata");
    let relay = start_relay(srv, &["--mode", "transaction", "--toml", rules]);
    relay.wait_cache_following(Duration::from_secs(20));
    // Past the follower's first settle (everything stale once more SETTLE
    // after it starts), so that a test's hits are not lost to it.
    std::thread::sleep(sqlfleet_relay::cache::follower::SETTLE * 3);
    (relay, db)
}

/// A campaign's seed and rounds: SQLFLEET_CACHE_SEED (1) and
/// SQLFLEET_CACHE_ROUNDS (300).
fn campaign() -> (u64, u64) {
    (
        env_or("SQLFLEET_CACHE_SEED", 1),
        env_or("SQLFLEET_CACHE_ROUNDS", 300),
    )
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The next value of a campaign's generator.
fn step(x: &mut u64) -> u64 {
    *x = x
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *x
}

/// Acknowledged writes of one register: when each OK came, and its value.
type Acked = Vec<(std::time::Instant, u64)>;

/// The greatest value acknowledged `bound` or more before `began`: what a
/// read begun then must return at least.
fn floor_before(h: &Acked, began: std::time::Instant, bound: Duration) -> u64 {
    h.iter()
        .filter(|(at, _)| *at + bound <= began)
        .map(|(_, n)| *n)
        .max()
        .unwrap_or(0)
}

async fn client(relay: &Relay, db: &str) -> mysql_async::Conn {
    app(relay.port, "app-pw", Some(db))
        .connect(Duration::from_secs(10))
        .await
        .expect("connect")
}

/// Root, through the relay, in database `db` (another account than
/// `client`'s).
async fn root_client(
    srv: &sqlfleet_testkit::TestServer,
    relay: &Relay,
    db: &str,
) -> mysql_async::Conn {
    let pw = srv.sandbox.password().expect("pw");
    let mut as_root = app(relay.port, pw.expose(), Some(db));
    as_root.user = "root".into();
    as_root
        .connect(Duration::from_secs(10))
        .await
        .expect("root through the relay")
}

/// A connection straight to the server, in database `db`.
async fn direct(srv: &sqlfleet_testkit::TestServer, db: &str) -> mysql_async::Conn {
    let mut c = srv.connect().await;
    c.query_drop(format!("USE `{db}`")).await.expect("use");
    c
}

async fn com_select(srv: &sqlfleet_testkit::TestServer) -> u64 {
    let mut root = srv.connect().await;
    root.query_first("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'COM_SELECT'")
        .await
        .expect("status")
        .expect("row")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hit_costs_the_server_nothing_and_a_write_through_the_relay_is_read_at_once() {
    let _one = SERIAL.lock().await;
    let srv = sqlfleet_testkit::server();
    let (relay, db) = setup(srv).await;
    let mut a = client(&relay, &db).await;
    let mut b = client(&relay, &db).await;
    let read = "SELECT v FROM kv WHERE k = 3";
    let v: Option<i64> = a.query_first(read).await.expect("miss");
    assert_eq!(v, Some(0));
    // Twenty reads from the cache: the server runs none of them (the
    // second status read counts itself once).
    let before = com_select(srv).await;
    for _ in 0..20 {
        let v: Option<i64> = b.query_first(read).await.expect("hit");
        assert_eq!(v, Some(0));
    }
    assert_eq!(
        com_select(srv).await,
        before + 1,
        "cached reads reached the server"
    );
    assert_eq!(
        relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}"),
        20.0
    );
    // A write through the relay: read by the other client at once.
    b.query_drop("UPDATE kv SET v = 1 WHERE k = 3")
        .await
        .expect("write");
    let v: Option<i64> = a.query_first(read).await.expect("read");
    assert_eq!(v, Some(1), "the write's OK was in before this read");
    // A transaction's write: the old value until its COMMIT's OK, then the new.
    b.query_drop("BEGIN").await.expect("begin");
    b.query_drop("UPDATE kv SET v = 2 WHERE k = 3")
        .await
        .expect("write");
    let v: Option<i64> = a.query_first(read).await.expect("read");
    assert_eq!(v, Some(1), "not committed yet");
    let v: Option<i64> = a.query_first(read).await.expect("read");
    assert_eq!(v, Some(1));
    b.query_drop("COMMIT").await.expect("commit");
    let v: Option<i64> = a.query_first(read).await.expect("read");
    assert_eq!(v, Some(2), "the COMMIT's OK was in before this read");
    // A prepared write, and a procedure that writes: the same.
    b.exec_drop("UPDATE kv SET v = ? WHERE k = 3", (5,))
        .await
        .expect("prepared write");
    let v: Option<i64> = a.query_first(read).await.expect("read");
    assert_eq!(
        v,
        Some(5),
        "the prepared write's OK was in before this read"
    );
    b.query_drop("CALL bump()").await.expect("call");
    let v: Option<i64> = a.query_first(read).await.expect("read");
    assert_eq!(v, Some(6), "the CALL's OK was in before this read");
    // Inside a transaction nothing comes from the cache (its snapshot is
    // its own): the count of hits stays.
    let hits = relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}");
    a.query_drop("BEGIN").await.expect("begin");
    let _: Option<i64> = a.query_first(read).await.expect("read");
    a.query_drop("COMMIT").await.expect("commit");
    // Volatile or session-bound statements neither.
    for sql in [
        "SELECT v, NOW() FROM kv WHERE k = 3",
        "SELECT v, @x FROM kv WHERE k = 3",
        "SELECT v FROM kv WHERE k = 3 FOR UPDATE",
    ] {
        a.query_drop(sql).await.expect(sql);
        a.query_drop(sql).await.expect(sql);
    }
    assert_eq!(
        relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}"),
        hits
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_are_kept_apart_by_account_and_settings() {
    let _one = SERIAL.lock().await;
    let srv = sqlfleet_testkit::server();
    let (relay, db) = setup(srv).await;
    let mut a = client(&relay, &db).await;
    let read = "SELECT v FROM kv WHERE k = 5";
    let _: Option<i64> = a.query_first(read).await.expect("miss");
    let misses = relay.metric("sqlfleet_relay_cache_misses_total{rule=\"kv\"}");
    // Another account: its own entry.
    let mut root = root_client(srv, &relay, &db).await;
    let _: Option<i64> = root.query_first(read).await.expect("root reads");
    // Other session settings: their own entry.
    a.query_drop("SET time_zone = '+03:00'").await.expect("tz");
    let _: Option<i64> = a.query_first(read).await.expect("read");
    assert_eq!(
        relay.metric("sqlfleet_relay_cache_misses_total{rule=\"kv\"}"),
        misses + 2.0,
        "each of the two was a miss"
    );
    assert!(
        relay.page("/status").contains("\"cache\""),
        "the cache is in /status"
    );
}

/// A global set through the relay reaches the cache as it reaches new
/// sessions: a client that connects after `SET GLOBAL
/// div_precision_increment` reads what a new direct session reads, not an
/// entry computed under the old default (before: the entry, 8.5000 where
/// the server gives 8.50000000). (A grant changed through the relay
/// parts entries the same way: `cache::tests`, keys by epoch.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_from_before_a_global_change_through_the_relay_are_not_served() {
    let _one = SERIAL.lock().await;
    let srv = sqlfleet_testkit::server();
    let (relay, db) = setup(srv).await;
    let read = "SELECT AVG(k) FROM kv";
    let mut a = client(&relay, &db).await;
    let before: Option<String> = a.query_first(read).await.expect("read");
    let _ = a.disconnect().await;
    let mut root = root_client(srv, &relay, &db).await;
    let old: Option<u64> = root
        .query_first("SELECT @@global.div_precision_increment")
        .await
        .expect("old");
    root.query_drop("SET GLOBAL div_precision_increment = 8")
        .await
        .expect("set global");
    let mut b = client(&relay, &db).await;
    let after: Option<String> = b.query_first(read).await.expect("read");
    let _ = b.disconnect().await;
    let mut d = direct(srv, &db).await;
    let want: Option<String> = d.query_first(read).await.expect("direct");
    d.query_drop(format!(
        "SET GLOBAL div_precision_increment = {}",
        old.unwrap_or(4)
    ))
    .await
    .expect("restore");
    let _ = d.disconnect().await;
    assert_eq!(before.as_deref(), Some("8.5000"));
    assert_eq!(
        after, want,
        "a new client after SET GLOBAL through the relay"
    );
    let _ = root.disconnect().await;
}

/// A prepared SELECT (binary protocol) is cached by its parameters: the
/// same execute again is answered without the server (its
/// Com_stmt_execute does not move) with the server's own binary rows —
/// every column type as a direct execute gives it; other parameters are
/// their own entries; a write through the relay and one made directly
/// are read at once (before: every execute went to the server).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_select_is_cached_by_its_parameters() {
    let _one = SERIAL.lock().await;
    let srv = sqlfleet_testkit::server();
    let (relay, db) = setup(srv).await;
    let mut root = srv.connect().await;
    root.query_drop(format!(
        "USE `{db}`; UPDATE kv SET v = -7 WHERE k = 14; UPDATE kv SET v = 99 WHERE k = 15"
    ))
    .await
    .expect("values");
    let mut a = client(&relay, &db).await;
    let read = "SELECT k, v, CAST(v AS DECIMAL(10,2)) d, CAST('2026-12-02 13:30:00' AS DATETIME) + INTERVAL k SECOND t, \
                CONCAT('k', k) s, NULLIF(k, k) n FROM kv WHERE k = ?";
    type Row = Vec<mysql_async::Value>;
    let vals = |r: Option<mysql_async::Row>| r.map(|r| r.unwrap());
    let v1 = |r: Option<Row>| r.and_then(|r| r.get(1).cloned());
    let direct: Option<Row> = vals(root.exec_first(read, (14,)).await.expect("direct"));
    let stmt_executes = || async {
        let mut c = srv.connect().await;
        let n: Option<u64> = c
            .query_first("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'COM_STMT_EXECUTE'")
            .await
            .expect("status");
        n.unwrap_or(0)
    };
    let hits = || relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}");
    let first: Option<Row> = vals(a.exec_first(read, (14,)).await.expect("miss"));
    assert_eq!(first, direct, "the relay's binary rows are the server's");
    let (h0, e0) = (hits(), stmt_executes().await);
    for _ in 0..5 {
        let again: Option<Row> = vals(a.exec_first(read, (14,)).await.expect("hit"));
        assert_eq!(again, direct);
    }
    assert_eq!(hits(), h0 + 5.0, "five executes from the cache");
    assert_eq!(
        stmt_executes().await,
        e0,
        "cached executes reached the server"
    );
    // Another parameter: its own entry, its own row.
    let other: Option<Row> = vals(a.exec_first(read, (15,)).await.expect("other"));
    assert_eq!(v1(other), Some(mysql_async::Value::Int(99)));
    assert_eq!(hits(), h0 + 5.0, "another parameter was not a hit");
    // A write through the relay, then one made directly: read at once.
    let mut w = client(&relay, &db).await;
    w.query_drop("UPDATE kv SET v = 5 WHERE k = 14")
        .await
        .expect("write");
    let v: Option<Row> = vals(a.exec_first(read, (14,)).await.expect("read"));
    assert_eq!(
        v1(v),
        Some(mysql_async::Value::Int(5)),
        "the write's OK was in before this read"
    );
    let _: Option<mysql_async::Row> = a.exec_first(read, (14,)).await.expect("cached again");
    root.query_drop(format!("UPDATE `{db}`.kv SET v = 6 WHERE k = 14"))
        .await
        .expect("direct write");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let v: Option<Row> = vals(a.exec_first(read, (14,)).await.expect("read"));
        if v1(v) == Some(mysql_async::Value::Int(6)) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the direct write was never read"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Reads `sql` through `c` — as a prepared statement with `params`, or a
/// text query when they are `Params::Empty` — and says whether it was a
/// hit (of the rule `hits` counts) and what it gave.
async fn counted(
    c: &mut mysql_async::Conn,
    hits: &dyn Fn() -> f64,
    sql: &str,
    params: impl Into<Params>,
) -> (bool, Option<i64>) {
    let before = hits();
    let v: Option<i64> = match params.into() {
        Params::Empty => c.query_first(sql).await,
        p => c.exec_first(sql, p).await,
    }
    .expect(sql);
    (hits() > before, v)
}

/// Reads `sql` through `c` until it gives `want` (at most `within`);
/// how long that took.
async fn read_until(
    c: &mut mysql_async::Conn,
    sql: &str,
    want: i64,
    within: Duration,
) -> Result<Duration, Option<i64>> {
    let t0 = std::time::Instant::now();
    loop {
        let v: Option<i64> = c.query_first(sql).await.expect("read");
        if v == Some(want) {
            return Ok(t0.elapsed());
        }
        if t0.elapsed() > within {
            return Err(v);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Writes made directly on the primary (not through the relay), in each
/// binlog shape: rows, a statement, a trigger's rows, a foreign key's
/// cascade (which a row binlog does not show), DDL. Each cached read of
/// what they change gives the new value once the relay's binlog follower
/// has read the commit — long before the rule's 30 s ttl (before: only
/// after it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_made_directly_on_the_primary_are_read_once_the_binlog_says_so() {
    let _one = SERIAL.lock().await;
    let srv = sqlfleet_testkit::server();
    let (relay, db) = setup(srv).await;
    let mut a = client(&relay, &db).await;
    let mut direct = direct(srv, &db).await;
    let cases: [(&str, &str, &str, i64); 7] = [
        (
            "rows",
            "SET SESSION binlog_format = 'ROW'; UPDATE kv SET v = 11 WHERE k = 9",
            "SELECT v FROM kv WHERE k = 9",
            11,
        ),
        (
            "statement",
            "SET SESSION binlog_format = 'STATEMENT'; UPDATE kv SET v = 12 WHERE k = 10",
            "SELECT v FROM kv WHERE k = 10",
            12,
        ),
        (
            "a view's base table",
            "SET SESSION binlog_format = 'ROW'; UPDATE kv SET v = 13 WHERE k = 11",
            "SELECT v FROM kv_view WHERE k = 11",
            13,
        ),
        (
            "a trigger's table",
            "SET SESSION binlog_format = 'STATEMENT'; INSERT INTO feed (v) VALUES (14)",
            "SELECT v FROM kv WHERE k = 7",
            14,
        ),
        (
            "a cascade",
            "SET SESSION binlog_format = 'ROW'; DELETE FROM parent WHERE id = 2",
            "SELECT COUNT(*) FROM child",
            2,
        ),
        (
            "DDL",
            "TRUNCATE TABLE other",
            "SELECT COUNT(*) FROM other",
            0,
        ),
        (
            "after the log rotated",
            "FLUSH BINARY LOGS; SET SESSION binlog_format = 'ROW'; UPDATE kv SET v = 16 WHERE k = 13",
            "SELECT v FROM kv WHERE k = 13",
            16,
        ),
    ];
    for (what, write, read, want) in cases {
        // Cached first (a miss, then a hit).
        let before: Option<i64> = a.query_first(read).await.expect("miss");
        assert_ne!(before, Some(want), "{what}: already {want}");
        let hits = relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}")
            + relay.metric("sqlfleet_relay_cache_hits_total{rule=\"scoped\"}");
        let again: Option<i64> = a.query_first(read).await.expect("hit");
        assert_eq!(again, before);
        assert_eq!(
            relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}")
                + relay.metric("sqlfleet_relay_cache_hits_total{rule=\"scoped\"}"),
            hits + 1.0,
            "{what}: the read was cached"
        );
        direct.query_drop(write).await.expect(what);
        match read_until(&mut a, read, want, Duration::from_secs(10)).await {
            Ok(took) => eprintln!("direct write, {what}: read after {took:?}"),
            Err(v) => panic!("{what}: still {v:?} 10 s after the commit (the rule's ttl is 30 s)"),
        }
    }
    // Still following after the rotation (past max_lag, so the gate is
    // open only if positions in the new file were read and compared):
    // entries are given.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let read = "SELECT v FROM kv WHERE k = 13";
    let _: Option<i64> = a.query_first(read).await.expect("read");
    let hits = relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}");
    let _: Option<i64> = a.query_first(read).await.expect("hit");
    assert_eq!(
        relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}"),
        hits + 1.0,
        "no entry given after the rotation: {}",
        relay.page("/status")
    );
}

/// With row events that name their columns (binlog_row_metadata =
/// FULL), a write made directly on the primary makes stale only the
/// entries that read the rows it changed: `WHERE k = 1` stays cached
/// while row 2 changes (before: every entry of the table went), a row
/// whose key moves is seen at both keys, and an entry not keyed (`v >=
/// 0`) goes at any change of its table. The same for an UPDATE through
/// the relay of one row by its key, alone or in a transaction, as text
/// or prepared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_write_of_some_rows_leaves_the_entries_of_other_rows_cached() {
    let _one = SERIAL.lock().await;
    let srv = sqlfleet_testkit::server();
    let (relay, db) = setup(srv).await;
    let mut a = client(&relay, &db).await;
    let mut direct = direct(srv, &db).await;
    let hits = || relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}");
    let read = |k: &str| format!("SELECT v FROM kv WHERE k = {k}");
    let unkeyed = "SELECT COUNT(*) FROM kv WHERE v >= 0";
    for sql in [
        read("1"),
        read("2"),
        read("3"),
        read("100"),
        unkeyed.to_string(),
    ] {
        let _: Option<i64> = a.query_first(&sql).await.expect("miss");
        let before = hits();
        let _: Option<i64> = a.query_first(&sql).await.expect("hit");
        assert_eq!(hits(), before + 1.0, "{sql} was cached");
    }
    let rows_before = relay.metric("sqlfleet_relay_cache_invalidations_total{scope=\"rows\"}");
    direct
        .query_drop("SET SESSION binlog_format = 'ROW'; UPDATE kv SET v = 5 WHERE k = 2")
        .await
        .expect("write row 2");
    if let Err(v) = read_until(&mut a, &read("2"), 5, Duration::from_secs(10)).await {
        panic!("row 2 still {v:?} 10 s after the commit");
    }
    assert!(
        relay.metric("sqlfleet_relay_cache_invalidations_total{scope=\"rows\"}") > rows_before,
        "the commit was read as rows: {}",
        relay.metrics()
    );
    let before = hits();
    let v: Option<i64> = a.query_first(read("1")).await.expect("row 1");
    assert_eq!(v, Some(0));
    assert_eq!(
        hits(),
        before + 1.0,
        "row 1's entry was kept: {}",
        relay.page("/status")
    );
    let before = hits();
    let n: Option<i64> = a.query_first(unkeyed).await.expect("unkeyed");
    assert_eq!(n, Some(16));
    assert_eq!(hits(), before, "the entry not keyed went");
    // A row whose key moves: stale at the key it left and the one it took.
    direct
        .query_drop("SET SESSION binlog_format = 'ROW'; UPDATE kv SET k = 100, v = 7 WHERE k = 3")
        .await
        .expect("move row 3");
    if let Err(v) = read_until(&mut a, &read("100"), 7, Duration::from_secs(10)).await {
        panic!("row 100 still {v:?} 10 s after the commit");
    }
    let gone: Option<i64> = a.query_first(read("3")).await.expect("row 3");
    assert_eq!(gone, None, "row 3 moved away");
    // Through the relay: the row written is read at once by another
    // client, row 1's entry stays.
    let mut b = client(&relay, &db).await;
    for sql in [read("1"), read("4")] {
        let _: Option<i64> = b.query_first(&sql).await.expect("cache");
    }
    a.query_drop("UPDATE kv SET v = 9 WHERE k = 4")
        .await
        .expect("write row 4");
    let v: Option<i64> = b.query_first(read("4")).await.expect("row 4");
    assert_eq!(v, Some(9), "a write through the relay is read at once");
    let before = hits();
    let v: Option<i64> = b.query_first(read("1")).await.expect("row 1");
    assert_eq!(v, Some(0));
    assert_eq!(
        hits(),
        before + 1.0,
        "row 1's entry was kept: {}",
        relay.page("/status")
    );
    // In a transaction: its COMMIT makes stale the rows it wrote.
    let _: Option<i64> = b.query_first(read("5")).await.expect("cache row 5");
    a.query_drop("BEGIN").await.expect("begin");
    a.query_drop("UPDATE kv SET v = 10 WHERE k = 5")
        .await
        .expect("write row 5");
    a.query_drop("COMMIT").await.expect("commit");
    let v: Option<i64> = b.query_first(read("5")).await.expect("row 5");
    assert_eq!(
        v,
        Some(10),
        "a committed write through the relay is read at once"
    );
    let before = hits();
    let v: Option<i64> = b.query_first(read("1")).await.expect("row 1");
    assert_eq!(v, Some(0));
    assert_eq!(
        hits(),
        before + 1.0,
        "row 1's entry was kept after the COMMIT"
    );
    // Prepared: the reads keyed by their parameters' values, the write
    // of row 6 by its own.
    let pread = "SELECT v FROM kv WHERE k = ?";
    for k in [1i64, 6] {
        let _: Option<i64> = b.exec_first(pread, (k,)).await.expect("cache");
    }
    a.exec_drop("UPDATE kv SET v = ? WHERE k = ?", (11i64, 6i64))
        .await
        .expect("prepared write of row 6");
    let v: Option<i64> = b.exec_first(pread, (6i64,)).await.expect("row 6");
    assert_eq!(
        v,
        Some(11),
        "a prepared write through the relay is read at once"
    );
    let before = hits();
    let v: Option<i64> = b.exec_first(pread, (1i64,)).await.expect("row 1");
    assert_eq!(v, Some(0));
    assert_eq!(hits(), before + 1.0, "row 1's prepared entry was kept");
}

/// A primary that compresses its binary log (`log_bin_compress=ON`, from
/// 10 bytes on) is followed as closely as one that does not: its
/// compressed rows make stale only the entries of the rows they changed
/// (before: every entry of the table), and its compressed statement only
/// the tables it writes (before: the whole cache). The events are checked
/// to be compressed ones in the server's own SHOW BINLOG EVENTS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compressed_binary_log_is_followed_row_by_row() {
    let _one = SERIAL.lock().await;
    let srv = sqlfleet_testkit::server();
    let (relay, db) = setup(srv).await;
    let mut a = client(&relay, &db).await;
    let mut direct = direct(srv, &db).await;
    direct
        .query_drop("SET GLOBAL log_bin_compress = ON, GLOBAL log_bin_compress_min_len = 10")
        .await
        .expect("log_bin_compress");
    let from: Option<(String, u64)> = direct
        .query_first("SHOW MASTER STATUS")
        .await
        .map(|r: Option<mysql_async::Row>| {
            r.map(|r| (r.get(0).expect("file"), r.get(1).expect("pos")))
        })
        .expect("master status");
    let hits = |rule: &str| {
        relay.metric(&format!(
            "sqlfleet_relay_cache_hits_total{{rule=\"{rule}\"}}"
        ))
    };
    let read = |k: &str| format!("SELECT v FROM kv WHERE k = {k}");
    let other = "SELECT v FROM other WHERE k = 1";
    for (rule, sql) in [
        ("kv", read("1")),
        ("kv", read("2")),
        ("scoped", other.into()),
    ] {
        let _: Option<i64> = a.query_first(&sql).await.expect("miss");
        let before = hits(rule);
        let _: Option<i64> = a.query_first(&sql).await.expect("hit");
        assert_eq!(hits(rule), before + 1.0, "{sql} was cached");
    }
    // Rows 2..16 in one compressed rows event.
    direct
        .query_drop("SET SESSION binlog_format = 'ROW'; UPDATE kv SET v = 5 WHERE k >= 2")
        .await
        .expect("write rows 2..16");
    if let Err(v) = read_until(&mut a, &read("2"), 5, Duration::from_secs(10)).await {
        panic!("row 2 still {v:?} 10 s after the commit");
    }
    let before = hits("kv");
    let v: Option<i64> = a.query_first(read("1")).await.expect("row 1");
    assert_eq!(v, Some(0));
    assert_eq!(
        hits("kv"),
        before + 1.0,
        "row 1's entry was kept: {}",
        relay.page("/status")
    );
    // A compressed statement: the tables it writes, not the whole cache.
    direct
        .query_drop(format!(
            "SET SESSION binlog_format = 'STATEMENT'; UPDATE kv SET v = 6 WHERE k = 3 /* {} */",
            "padding ".repeat(20)
        ))
        .await
        .expect("a statement");
    if let Err(v) = read_until(&mut a, &read("1"), 0, Duration::from_secs(10)).await {
        panic!("row 1 read {v:?}");
    }
    let before = hits("scoped");
    let v: Option<i64> = a.query_first(other).await.expect("other");
    assert_eq!(v, Some(0));
    assert_eq!(
        hits("scoped"),
        before + 1.0,
        "the other table's entry was kept: {}",
        relay.page("/status")
    );
    let mut kinds = Vec::new();
    if let Some((file, pos)) = from {
        let rows: Vec<mysql_async::Row> = direct
            .query(format!("SHOW BINLOG EVENTS IN '{file}' FROM {pos}"))
            .await
            .expect("binlog events");
        kinds = rows.iter().filter_map(|r| r.get::<String, _>(2)).collect();
    }
    direct
        .query_drop("SET GLOBAL log_bin_compress = OFF")
        .await
        .expect("log_bin_compress");
    for k in ["Update_rows_compressed_v1", "Query_compressed"] {
        assert!(kinds.iter().any(|x| x == k), "no {k} event: {kinds:?}");
    }
}

/// A read of a range of keys (BETWEEN, `<`, `>`, text or prepared) is
/// stale when a change's row held a key inside it, before or after, and
/// only then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_write_makes_stale_only_the_ranges_holding_its_rows() {
    let _one = SERIAL.lock().await;
    let srv = sqlfleet_testkit::server();
    let (relay, db) = setup(srv).await;
    let mut a = client(&relay, &db).await;
    let mut direct = direct(srv, &db).await;
    let hits = || relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}");
    let low = "SELECT MAX(v) FROM kv WHERE k BETWEEN 1 AND 4";
    let high = "SELECT MAX(v) FROM kv WHERE k >= 10 AND k < 13";
    let far = "SELECT COUNT(*) FROM kv WHERE k > 50";
    let pread = "SELECT MAX(v) FROM kv WHERE k BETWEEN ? AND ?";
    let range = |lo: i64, hi: i64| Params::from((lo, hi));
    for (sql, p) in [
        (low, Params::Empty),
        (high, Params::Empty),
        (far, Params::Empty),
        (pread, range(13, 14)),
        (pread, range(1, 2)),
    ] {
        counted(&mut a, &hits, sql, p.clone()).await;
        assert!(
            counted(&mut a, &hits, sql, p.clone()).await.0,
            "{sql} {p:?} was cached"
        );
    }
    direct
        .query_drop("SET SESSION binlog_format = 'ROW'; UPDATE kv SET v = 5 WHERE k = 2")
        .await
        .expect("write row 2");
    if let Err(v) = read_until(&mut a, low, 5, Duration::from_secs(10)).await {
        panic!("1..4 still {v:?} 10 s after the commit");
    }
    assert_eq!(counted(&mut a, &hits, high, ()).await, (true, Some(0)));
    assert_eq!(counted(&mut a, &hits, far, ()).await, (true, Some(0)));
    assert_eq!(
        counted(&mut a, &hits, pread, range(13, 14)).await,
        (true, Some(0)),
        "13..14 kept"
    );
    assert_eq!(
        counted(&mut a, &hits, pread, range(1, 2)).await,
        (false, Some(5)),
        "1..2 stale"
    );
    // A row moving from 11 to 60: stale in the range it left and the one
    // it entered.
    direct
        .query_drop("SET SESSION binlog_format = 'ROW'; UPDATE kv SET k = 60, v = 7 WHERE k = 11")
        .await
        .expect("move row 11");
    if let Err(v) = read_until(&mut a, far, 1, Duration::from_secs(10)).await {
        panic!("k > 50 still {v:?} rows 10 s after the commit");
    }
    assert!(!counted(&mut a, &hits, high, ()).await.0, "10..12 stale");
    assert_eq!(
        counted(&mut a, &hits, pread, range(13, 14)).await,
        (true, Some(0)),
        "13..14 kept"
    );
    // Through the relay: a write of one key makes its ranges stale at once.
    a.exec_drop("UPDATE kv SET v = ? WHERE k = ?", (8i64, 14i64))
        .await
        .expect("write row 14");
    let mut b = client(&relay, &db).await;
    assert_eq!(
        counted(&mut b, &hits, pread, range(13, 14)).await,
        (false, Some(8)),
        "a write through the relay is read at once"
    );
}

/// An INSERT through the relay makes stale, at once, the entries of the
/// keys its rows hold (a key read empty before, a range it falls in), and
/// no other entry keyed on those columns; a value the column does not
/// store as written (an AUTO_INCREMENT's 0) makes every keyed entry go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_insert_through_the_relay_makes_stale_only_the_entries_of_its_rows() {
    let _one = SERIAL.lock().await;
    let srv = sqlfleet_testkit::server();
    let rules = format!("{RULES}\n[[cache_rules]]\nname = \"ai\"\ntables = [\"ai\"]\nttl = 30\n");
    let (relay, db) = setup_with(srv, &rules).await;
    let mut a = client(&relay, &db).await;
    let mut b = client(&relay, &db).await;
    let hits = || relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}");
    let one = "SELECT v FROM kv WHERE k = 1";
    let new = "SELECT v FROM kv WHERE k = 20";
    let around = "SELECT MAX(v) FROM kv WHERE k BETWEEN 15 AND 25";
    let low = "SELECT MAX(v) FROM kv WHERE k < 5";
    let pnew = "SELECT v FROM kv WHERE k = ?";
    for (sql, p) in [
        (one, Params::Empty),
        (new, Params::Empty),
        (around, Params::Empty),
        (low, Params::Empty),
        (pnew, Params::from((21i64,))),
    ] {
        counted(&mut b, &hits, sql, p.clone()).await;
        assert!(counted(&mut b, &hits, sql, p).await.0, "{sql} was cached");
    }
    a.query_drop("INSERT INTO kv (k, v) VALUES (20, 3), (30, 4)")
        .await
        .expect("insert");
    assert_eq!(
        counted(&mut b, &hits, new, ()).await,
        (false, Some(3)),
        "k = 20 read at once"
    );
    assert_eq!(
        counted(&mut b, &hits, around, ()).await,
        (false, Some(3)),
        "15..25 read at once"
    );
    assert_eq!(
        counted(&mut b, &hits, one, ()).await,
        (true, Some(0)),
        "k = 1 kept"
    );
    assert_eq!(
        counted(&mut b, &hits, low, ()).await,
        (true, Some(0)),
        "k < 5 kept"
    );
    assert_eq!(
        counted(&mut b, &hits, pnew, (21i64,)).await,
        (true, None),
        "k = 21 kept"
    );
    // Prepared, with its parameters' values.
    a.exec_drop("INSERT INTO kv (k, v) VALUES (?, ?)", (21i64, 5i64))
        .await
        .expect("prepared insert");
    assert_eq!(
        counted(&mut b, &hits, pnew, (21i64,)).await,
        (false, Some(5)),
        "k = 21 read at once"
    );
    assert_eq!(
        counted(&mut b, &hits, one, ()).await,
        (true, Some(0)),
        "k = 1 kept"
    );
    // The AUTO_INCREMENT column's 0 is its next value: every entry keyed
    // on it goes. (The binary log's row event, read a moment later, says
    // 3 too; that the relay's own invalidation does not take 0 for a key
    // is write_scope.rs's table test.)
    let mut root = srv.connect().await;
    root.query_drop(format!(
        "CREATE TABLE `{db}`.ai (id INT AUTO_INCREMENT PRIMARY KEY, v BIGINT); \
         INSERT INTO `{db}`.ai (v) VALUES (1), (2)"
    ))
    .await
    .expect("ai");
    let ai = |k: &str| format!("SELECT v FROM ai WHERE id = {k}");
    let ai_hits = || relay.metric("sqlfleet_relay_cache_hits_total{rule=\"ai\"}");
    // The binary log's events of that direct CREATE and INSERT reach the
    // relay a moment later and may drop an entry cached before them: a
    // read is cached once a second read of it is a hit.
    for k in ["1", "3"] {
        let mut tries = 0;
        loop {
            counted(&mut b, &ai_hits, &ai(k), ()).await;
            if counted(&mut b, &ai_hits, &ai(k), ()).await.0 {
                break;
            }
            tries += 1;
            assert!(tries < 50, "ai {k} was never cached");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    a.query_drop("INSERT INTO ai (id, v) VALUES (0, 7)")
        .await
        .expect("insert 0");
    assert_eq!(
        counted(&mut b, &ai_hits, &ai("3"), ()).await,
        (false, Some(7)),
        "id 0 took 3"
    );
    assert!(
        !counted(&mut b, &ai_hits, &ai("1"), ()).await.0,
        "every id entry went"
    );
}

/// A write from a session in a set whose characters hold ASCII bytes makes
/// stale the rows the server changes: in sjis `ソ` is 0x83 0x5C, so the
/// server reads `'ソ'` as a string and this UPDATE as one of every row,
/// while a reading byte by byte takes `\'` for an escaped quote and finds
/// `WHERE k = 1` (the rest a comment). The row keys are read byte by byte
/// (`cached.rs`), which is exact only for a text every dialect reads
/// alike: this one is not, so its table goes stale whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_in_sjis_makes_stale_the_rows_the_server_changes() {
    let _one = SERIAL.lock().await;
    let srv = sqlfleet_testkit::server();
    let (relay, db) = setup(srv).await;
    let mut a = client(&relay, &db).await;
    let mut b = client(&relay, &db).await;
    let hits = || relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}");
    let two = "SELECT v FROM kv WHERE k = 2";
    counted(&mut b, &hits, two, ()).await;
    assert!(counted(&mut b, &hits, two, ()).await.0, "k = 2 was cached");
    a.query_drop("SET NAMES sjis").await.expect("sjis");
    let update: &[u8] =
        b"UPDATE kv SET v = CASE WHEN '\x83\x5C' = ' WHERE k = 1 -- ' THEN 0 ELSE 9 END WHERE k > 0";
    a.query_drop(update).await.expect("update");
    assert_eq!(
        counted(&mut b, &hits, two, ()).await,
        (false, Some(9)),
        "k = 2 read at once"
    );
}

/// While a write through the relay is in flight, a read of the rows it
/// writes is not kept (it may have seen the server before the commit,
/// and the writer gets its reply before the write's second invalidation),
/// and a read of other rows is (before: no read at all was kept).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_during_a_write_is_kept_only_when_the_write_cannot_change_it() {
    let _one = SERIAL.lock().await;
    let srv = sqlfleet_testkit::server();
    let (relay, db) = setup(srv).await;
    let mut w = client(&relay, &db).await;
    let mut r = client(&relay, &db).await;
    let hits = || relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}");
    // (the reads start 0.5 s into a 3 s write: room for a slow machine)
    let write = async move {
        w.query_drop("UPDATE kv SET v = 1 WHERE k = 1 AND SLEEP(3) = 0")
            .await
            .expect("slow write of row 1");
    };
    let reads = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut got = Vec::new();
        for sql in [
            "SELECT v FROM kv WHERE k = 1",
            "SELECT v FROM kv WHERE k = 1",
            "SELECT v FROM kv WHERE k = 2",
            "SELECT v FROM kv WHERE k = 2",
        ] {
            got.push(counted(&mut r, &hits, sql, ()).await);
        }
        got
    };
    let ((), got) = tokio::join!(write, reads);
    assert_eq!(
        got,
        [
            (false, Some(0)),
            (false, Some(0)),
            (false, Some(0)),
            (true, Some(0))
        ],
        "row 1 (written) read twice, then row 2 twice, during the write"
    );
    let v: Option<i64> = r
        .query_first("SELECT v FROM kv WHERE k = 1")
        .await
        .expect("after");
    assert_eq!(v, Some(1));
}

/// Blind to the primary's writes — here a server that keeps no binary
/// log — the cache is bypassed: no entry is given, each read goes to the
/// server, and /status says why. With `binlog = false` (the operator's
/// choice) entries are given and writes made elsewhere wait for the ttl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_primarys_binary_log_the_cache_is_bypassed_unless_told_to_trust_the_ttl() {
    let _one = SERIAL.lock().await;
    let srv = sqlfleet_testkit::server_with(&["skip-log-bin"]);
    let (db, _) = srv.fresh_db("blind").await;
    let mut root = srv.connect().await;
    root.query_drop(format!(
        "CREATE TABLE `{db}`.short (k INT PRIMARY KEY, v BIGINT); INSERT INTO `{db}`.short VALUES (1, 0)"
    ))
    .await
    .expect("table");
    let read = "SELECT v FROM short WHERE k = 1";
    // Blind: every read reaches the server.
    let relay = start_relay(&srv, &["--mode", "transaction", "--toml", RULES]);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !relay.page("/status").contains("log_bin is OFF") {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            relay.page("/status")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut a = client(&relay, &db).await;
    for _ in 0..3 {
        let _: Option<i64> = a.query_first(read).await.expect("read");
    }
    assert_eq!(
        relay.metric("sqlfleet_relay_cache_hits_total{rule=\"short\"}"),
        0.0
    );
    assert_eq!(relay.metric("sqlfleet_relay_cache_bypassed_total"), 3.0);
    assert_eq!(relay.metric("sqlfleet_relay_cache_blind"), 1.0);
    drop(a);
    drop(relay);
    // Told to trust the ttl: entries, and a write made elsewhere is read
    // once the rule's ttl (1 s) has ended.
    let rules = format!("{RULES}\n[cache]\nbinlog = false\n");
    let relay = start_relay(&srv, &["--mode", "transaction", "--toml", &rules]);
    let mut a = client(&relay, &db).await;
    let v: Option<i64> = a.query_first(read).await.expect("miss");
    assert_eq!(v, Some(0));
    root.query_drop(format!("UPDATE `{db}`.short SET v = 9 WHERE k = 1"))
        .await
        .expect("direct write");
    let v: Option<i64> = a.query_first(read).await.expect("hit");
    assert_eq!(v, Some(0), "the entry, until its ttl");
    assert_eq!(
        relay.metric("sqlfleet_relay_cache_hits_total{rule=\"short\"}"),
        1.0
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let v: Option<i64> = a.query_first(read).await.expect("read");
    assert_eq!(v, Some(9), "seen once the ttl ended");
}

/// A write through the relay makes stale only what reads the tables it
/// changes — and those it changes through a trigger, a foreign key's
/// ON DELETE CASCADE, or a view are among them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_makes_stale_only_what_reads_the_tables_it_changes_triggers_keys_and_views_included(
) {
    let _one = SERIAL.lock().await;
    let srv = sqlfleet_testkit::server();
    let (relay, db) = setup(srv).await;
    let mut a = client(&relay, &db).await;
    let mut w = client(&relay, &db).await;
    let hits = |rule: &str| {
        relay.metric(&format!(
            "sqlfleet_relay_cache_hits_total{{rule=\"{rule}\"}}"
        ))
    };
    // (by table or, for a write of rows by key, by row)
    let scoped = || {
        relay.metric("sqlfleet_relay_cache_invalidations_total{scope=\"tables\"}")
            + relay.metric("sqlfleet_relay_cache_invalidations_total{scope=\"rows\"}")
    };
    let read = "SELECT v FROM kv WHERE k = 7";
    let v: Option<i64> = a.query_first(read).await.expect("miss");
    assert_eq!(v, Some(0));
    let _: Option<i64> = a.query_first(read).await.expect("hit");
    let (kv_hits, before) = (hits("kv"), scoped());
    assert_eq!(kv_hits, 1.0);
    // Another table written: the entry for kv stays.
    w.query_drop("UPDATE other SET v = v + 1 WHERE k = 1")
        .await
        .expect("write other");
    assert!(
        scoped() > before,
        "the write's invalidation named its table"
    );
    let v: Option<i64> = a.query_first(read).await.expect("read");
    assert_eq!(v, Some(0));
    assert_eq!(
        hits("kv"),
        kv_hits + 1.0,
        "a write elsewhere left kv cached"
    );
    // A prepared write elsewhere too.
    w.exec_drop("UPDATE other SET v = ? WHERE k = 1", (5,))
        .await
        .expect("prepared write other");
    let v: Option<i64> = a.query_first(read).await.expect("read");
    assert_eq!(v, Some(0));
    assert_eq!(
        hits("kv"),
        kv_hits + 2.0,
        "a prepared write elsewhere left kv cached"
    );
    // A transaction that writes only another table: its COMMIT leaves kv
    // cached (before: a COMMIT made everything stale).
    for sql in [
        "BEGIN",
        "UPDATE other SET v = v + 1 WHERE k = 1",
        "INSERT INTO other VALUES (2, 0) ON DUPLICATE KEY UPDATE v = v + 1",
        "COMMIT",
    ] {
        w.query_drop(sql).await.expect(sql);
    }
    let v: Option<i64> = a.query_first(read).await.expect("read");
    assert_eq!(v, Some(0));
    assert_eq!(
        hits("kv"),
        kv_hits + 3.0,
        "a transaction writing elsewhere left kv cached"
    );
    // One that writes kv (autocommit off): the old value until its
    // COMMIT, then the new.
    let eight = "SELECT v FROM kv WHERE k = 8";
    let _: Option<i64> = a.query_first(eight).await.expect("miss");
    for sql in [
        "SET autocommit = 0",
        "UPDATE other SET v = v + 1 WHERE k = 1",
        "UPDATE kv SET v = 8 WHERE k = 8",
    ] {
        w.query_drop(sql).await.expect(sql);
    }
    let v: Option<i64> = a.query_first(eight).await.expect("read");
    assert_eq!(v, Some(0), "not committed yet");
    w.query_drop("COMMIT").await.expect("commit");
    let v: Option<i64> = a.query_first(eight).await.expect("read");
    assert_eq!(v, Some(8), "the COMMIT's OK was in before this read");
    w.query_drop("SET autocommit = 1")
        .await
        .expect("autocommit");
    // A trigger on the table written changes kv: read at once.
    w.query_drop("INSERT INTO feed (v) VALUES (42)")
        .await
        .expect("write feed");
    let v: Option<i64> = a.query_first(read).await.expect("read");
    assert_eq!(v, Some(42), "the trigger's write was in before this read");
    // A view reads kv without naming it.
    let view = "SELECT v FROM kv_view WHERE k = 7";
    let _: Option<i64> = a.query_first(view).await.expect("miss");
    let v: Option<i64> = a.query_first(view).await.expect("hit");
    assert_eq!(v, Some(42));
    assert_eq!(hits("scoped"), 1.0);
    w.query_drop("UPDATE kv SET v = 43 WHERE k = 7")
        .await
        .expect("write kv");
    let v: Option<i64> = a.query_first(view).await.expect("read");
    assert_eq!(
        v,
        Some(43),
        "a write to the view's table was in before this read"
    );
    // A write through the view.
    let _: Option<i64> = a.query_first(read).await.expect("miss");
    w.query_drop("UPDATE kv_view SET v = 44 WHERE k = 7")
        .await
        .expect("write the view");
    let v: Option<i64> = a.query_first(read).await.expect("read");
    assert_eq!(
        v,
        Some(44),
        "a write through the view was in before this read"
    );
    // ON DELETE CASCADE: deleting a parent deletes its children.
    let count = "SELECT COUNT(*) FROM child";
    let _: Option<i64> = a.query_first(count).await.expect("miss");
    let n: Option<i64> = a.query_first(count).await.expect("hit");
    assert_eq!(n, Some(3));
    w.query_drop("DELETE FROM parent WHERE id = 1")
        .await
        .expect("delete parent");
    let n: Option<i64> = a.query_first(count).await.expect("read");
    assert_eq!(n, Some(1), "the cascade's deletes were in before this read");
    // A transaction's writes: everything at its COMMIT.
    let other = "SELECT v FROM other WHERE k = 1";
    let _: Option<i64> = a.query_first(other).await.expect("miss");
    w.query_drop("BEGIN").await.expect("begin");
    w.query_drop("UPDATE other SET v = 100 WHERE k = 1")
        .await
        .expect("write");
    w.query_drop("COMMIT").await.expect("commit");
    let v: Option<i64> = a.query_first(other).await.expect("read");
    assert_eq!(v, Some(100), "the COMMIT's OK was in before this read");
}

/// Writers through the relay bump single-key registers (directly, through
/// a view, through another table's trigger, each followed by a write to
/// an unrelated table, the two alone or in one transaction); readers read them through the relay with the
/// cache on (from the table or the view). Every read returns a value no
/// older than the last write acknowledged before the read began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_read_is_older_than_a_write_acknowledged_before_it() {
    let _one = SERIAL.lock().await;
    let srv = sqlfleet_testkit::server();
    let (relay, db) = setup(srv).await;
    let (seed, rounds) = campaign();
    let keys = 4u64;
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..keys).map(|_| AtomicU64::new(0)).collect());
    let mut tasks = Vec::new();
    for w in 0..2u64 {
        let mut c = client(&relay, &db).await;
        let acked = acked.clone();
        tasks.push(tokio::spawn(async move {
            let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(w);
            for _ in 0..rounds {
                step(&mut x);
                let k = (x >> 33) % keys;
                // One writer per key parity: each key's values only grow.
                if k % 2 != w {
                    continue;
                }
                let next = acked[k as usize].load(SeqCst) + 1;
                // The table itself, through its view, through a trigger on
                // another table — and a write elsewhere between.
                let key = k + 1;
                let write = match (x >> 20) % 3 {
                    0 => format!("UPDATE kv SET v = {next} WHERE k = {key}"),
                    1 => format!("UPDATE kv_view SET v = {next} WHERE k = {key}"),
                    _ => format!("INSERT INTO bump (k, v) VALUES ({key}, {next})"),
                };
                // Alone, or in a transaction with the write elsewhere
                // (acknowledged at its COMMIT's OK).
                let txn = (x >> 28).is_multiple_of(2);
                if txn {
                    c.query_drop("BEGIN").await.expect("begin");
                }
                c.query_drop(write).await.expect("write");
                c.query_drop("UPDATE other SET v = v + 1 WHERE k = 1")
                    .await
                    .expect("write elsewhere");
                if txn {
                    c.query_drop("COMMIT").await.expect("commit");
                }
                acked[k as usize].store(next, SeqCst);
            }
            0u64
        }));
    }
    for r in 0..3u64 {
        let mut c = client(&relay, &db).await;
        let acked = acked.clone();
        tasks.push(tokio::spawn(async move {
            let mut violations = 0u64;
            let mut x = seed ^ (r + 100);
            for _ in 0..rounds {
                step(&mut x);
                let k = (x >> 33) % keys;
                let floor = acked[k as usize].load(SeqCst);
                let from = if (x >> 20).is_multiple_of(2) {
                    "kv"
                } else {
                    "kv_view"
                };
                let v: Option<u64> = c
                    .query_first(format!("SELECT v FROM {from} WHERE k = {}", k + 1))
                    .await
                    .expect("read");
                if v.unwrap_or(0) < floor {
                    violations += 1;
                }
            }
            violations
        }));
    }
    let mut violations = 0;
    for t in tasks {
        violations += t.await.expect("task");
    }
    let hits = relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}")
        + relay.metric("sqlfleet_relay_cache_hits_total{rule=\"scoped\"}");
    eprintln!("cache campaign seed {seed}: {violations} stale reads, {hits} hits");
    assert_eq!(violations, 0, "reads older than an acknowledged write");
    assert!(hits > 0.0, "the campaign read from the cache");
}

/// A writer directly on the primary (not through the relay) bumps
/// single-key registers — in row and statement binlog format, on the
/// table or through another table's trigger — while readers read them
/// through the relay with the cache on. The bound: a read that began
/// `max_lag` (1 s) after a write was acknowledged returns that write or a
/// later one (0 violations); reads inside the bound may be older, and
/// their greatest age is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_made_directly_are_read_within_the_lag_bound() {
    let _one = SERIAL.lock().await;
    let srv = sqlfleet_testkit::server();
    let (relay, db) = setup(srv).await;
    let (seed, rounds) = campaign();
    const BOUND: Duration = Duration::from_secs(1);
    // Keys 13..=16: each one's acknowledged values, with when.
    type History = std::sync::Mutex<Vec<Acked>>;
    let history: Arc<History> = Arc::new(std::sync::Mutex::new(vec![Vec::new(); 4]));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut direct = direct(srv, &db).await;
    let writer = {
        let history = history.clone();
        let done = done.clone();
        tokio::spawn(async move {
            let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let mut values = [0u64; 4];
            for _ in 0..rounds {
                step(&mut x);
                let i = ((x >> 33) % 4) as usize;
                values[i] += 1;
                let (key, next) = (13 + i, values[i]);
                let format = if (x >> 20).is_multiple_of(2) {
                    "ROW"
                } else {
                    "STATEMENT"
                };
                let write = if (x >> 24).is_multiple_of(3) {
                    format!("INSERT INTO bump (k, v) VALUES ({key}, {next})")
                } else {
                    format!("UPDATE kv SET v = {next} WHERE k = {key}")
                };
                direct
                    .query_drop(format!("SET SESSION binlog_format = '{format}'; {write}"))
                    .await
                    .expect("direct write");
                let at = std::time::Instant::now();
                history.lock().expect("history")[i].push((at, next));
                tokio::time::sleep(Duration::from_millis((x >> 40) % 8)).await;
            }
            done.store(true, SeqCst);
        })
    };
    let mut readers = Vec::new();
    for r in 0..3u64 {
        let mut c = client(&relay, &db).await;
        let history = history.clone();
        let done = done.clone();
        readers.push(tokio::spawn(async move {
            let (mut violations, mut reads, mut oldest) = (0u64, 0u64, Duration::ZERO);
            let mut x = seed ^ (r + 100);
            while !done.load(SeqCst) {
                step(&mut x);
                let i = ((x >> 33) % 4) as usize;
                let began = std::time::Instant::now();
                let v: Option<u64> = c
                    .query_first(format!("SELECT v FROM kv WHERE k = {}", 13 + i))
                    .await
                    .expect("read");
                let v = v.unwrap_or(0);
                reads += 1;
                let h = history.lock().expect("history")[i].clone();
                // The last write acknowledged a bound before the read began.
                if v < floor_before(&h, began, BOUND) {
                    violations += 1;
                }
                // How old the value read was: since the first later write
                // acknowledged before the read began.
                if let Some((at, _)) = h.iter().find(|(at, n)| *n > v && *at <= began) {
                    oldest = oldest.max(began - *at);
                }
            }
            (violations, reads, oldest)
        }));
    }
    writer.await.expect("writer");
    let (mut violations, mut reads, mut oldest) = (0, 0, Duration::ZERO);
    for r in readers {
        let (v, n, o) = r.await.expect("reader");
        violations += v;
        reads += n;
        oldest = oldest.max(o);
    }
    let hits = relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}");
    eprintln!(
        "direct-write campaign seed {seed}: {rounds} writes, {reads} reads, {hits} hits, {violations} past the {BOUND:?} bound, oldest value read {oldest:?} after a newer one was acknowledged"
    );
    assert_eq!(violations, 0, "reads older than the lag bound allows");
    assert!(hits > 0.0, "the campaign read from the cache");
}

/// The network to the primary stalls (its packets held both ways): the
/// relay's binlog follower reads nothing more, so once `max_lag` has
/// passed the cache gives no entry — a write made meanwhile on the
/// primary (directly) can never be answered by the entry it made stale.
/// The reads then go to the stalled server and wait; once the network is
/// back, the follower starts again and entries are given again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_primary_blinds_the_cache_instead_of_serving_old_entries() {
    let _one = SERIAL.lock().await;
    let srv = sqlfleet_testkit::server();
    let (first, db) = setup(srv).await;
    drop(first);
    let link = sqlfleet_testkit::netfault::Link::to(srv.sandbox.meta.primary().port);
    let port = link.port.to_string();
    let relay = start_relay(
        srv,
        &[
            "--mode",
            "transaction",
            "--toml",
            RULES,
            "--backend-port",
            &port,
        ],
    );
    relay.wait_cache_following(Duration::from_secs(20));
    let mut a = client(&relay, &db).await;
    let read = "SELECT v FROM kv WHERE k = 12";
    let v: Option<i64> = a.query_first(read).await.expect("miss");
    assert_eq!(v, Some(0));
    let v: Option<i64> = a.query_first(read).await.expect("hit");
    assert_eq!(v, Some(0));
    link.stall();
    let mut direct = srv.connect().await;
    direct
        .query_drop(format!("UPDATE `{db}`.kv SET v = 5 WHERE k = 12"))
        .await
        .expect("direct write");
    let written = std::time::Instant::now();
    // Past the bound: the old entry is never given (the read waits on the
    // stalled server instead, or times out).
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert_eq!(
        relay.metric("sqlfleet_relay_cache_blind"),
        1.0,
        "{}",
        relay.page("/status")
    );
    let hits = relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}");
    let r = tokio::time::timeout(Duration::from_secs(2), a.query_first::<i64, _>(read)).await;
    assert!(
        !matches!(r, Ok(Ok(Some(0)))),
        "the old entry was given {:?} after the write",
        written.elapsed()
    );
    assert_eq!(
        relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}"),
        hits
    );
    assert!(relay.metric("sqlfleet_relay_cache_bypassed_total") >= 1.0);
    link.heal();
    relay.wait_cache_following(Duration::from_secs(20));
    let mut b = client(&relay, &db).await;
    match read_until(&mut b, read, 5, Duration::from_secs(10)).await {
        Ok(_) => {}
        Err(v) => panic!("after the stall: {v:?}"),
    }
}

/// Eight clients miss the same cold key at once: one server read, the
/// others wait for it and are answered from its entry. While the binlog
/// gate is open, that is: a machine loaded enough that the follower falls
/// behind `max_lag` mid-read shuts it, and then every client reads the
/// server, as it must (counted as whole invalidations) — such a round is
/// run again with another key, up to three times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_key_read_by_many_at_once_costs_one_server_read() {
    let _one = SERIAL.lock().await;
    let srv = sqlfleet_testkit::server();
    let (relay, db) = setup(srv).await;
    let whole = "sqlfleet_relay_cache_invalidations_total{scope=\"whole\"}";
    let mut gate_shut = 0;
    for round in 0..3 {
        let mut clients = Vec::new();
        for _ in 0..8 {
            clients.push(client(&relay, &db).await);
        }
        // Slow enough (a 16^5-row join) that the eight overlap; a key of
        // its own each round.
        let slow = format!(
            "SELECT COUNT(*) AS n{round} FROM kv a, kv b, kv c, kv d, kv e WHERE a.v + b.v + c.v + d.v + e.v >= 0"
        );
        let waits = relay.metric("sqlfleet_relay_cache_waits_total{rule=\"kv\"}");
        let invalidated = relay.metric(whole);
        let before = com_select(srv).await;
        let mut tasks = Vec::new();
        for mut c in clients {
            let slow = slow.clone();
            tasks.push(tokio::spawn(async move {
                let n: Option<u64> = c.query_first(slow).await.expect("read");
                n
            }));
        }
        for t in tasks {
            assert_eq!(t.await.expect("client"), Some(1 << 20));
        }
        if relay.metric(whole) > invalidated {
            gate_shut += 1;
            continue;
        }
        let m = relay.metrics();
        let cache_lines: Vec<&str> = m
            .lines()
            .filter(|l| l.starts_with("sqlfleet_relay_cache"))
            .collect();
        // The key's one server read, the status read, and the two a
        // grouping's FOUND_ROWS() costs the first reader, whose count (0,
        // a new session's) may be what it leaves: made on its connection
        // first, then asked (`sql/found_rows.rs`); the entry keeps what
        // the server said, so the others' hits cost nothing.
        assert_eq!(
            com_select(srv).await,
            before + 4,
            "one server read (and the status read, and the count's two): {cache_lines:?}"
        );
        assert_eq!(
            relay.metric("sqlfleet_relay_cache_waits_total{rule=\"kv\"}"),
            waits + 7.0
        );
        return;
    }
    panic!(
        "the binlog gate shut during each of {gate_shut} rounds: {}",
        relay.page("/status")
    );
}

/// kill -9 of the primary at seeded instants (SQLFLEET_CACHE_KILLS times,
/// 2 by default), started again on its data directory after a seeded
/// while, as a writer writes single-key registers on it directly and
/// three readers read them through the relay's cache. The relay's binlog
/// follower loses its stream with the server; until it has read the new
/// server's log up to its end, the cache is bypassed. Invariants checked
/// over the whole run: no value read is older than the last write
/// acknowledged `max_lag` (1 s) before the read began (0 violations);
/// the cache was bypassed while blind and served hits again after; and
/// at the end every register reads through the relay as the server has
/// it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_killed_at_any_instant_leaves_no_read_older_than_the_lag_bound() {
    use sqlfleet_testkit::workload::{start_again, stop};
    let _one = SERIAL.lock().await;
    // Its own server: the others' tests are not to see it die. Health
    // checked often, so the restarted server is used again soon.
    static S: std::sync::OnceLock<sqlfleet_testkit::TestServer> = std::sync::OnceLock::new();
    let srv: &'static _ = S.get_or_init(|| sqlfleet_testkit::server_with(&[]));
    let rules = RULES.replace("health_interval = 3600", "health_interval = 0.25");
    let (relay, db) = setup_with(srv, &rules).await;
    let (seed, _) = campaign();
    let kills = env_or("SQLFLEET_CACHE_KILLS", 2);
    const BOUND: Duration = Duration::from_secs(1);
    let history: Arc<std::sync::Mutex<Vec<Acked>>> =
        Arc::new(std::sync::Mutex::new(vec![Vec::new(); 4]));
    let killed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let killer = {
        let killed = killed.clone();
        tokio::spawn(async move {
            let mut x = seed ^ 0x6b69_6c6c;
            for k in 0..kills {
                let before = 300 + step(&mut x) % 900;
                tokio::time::sleep(Duration::from_millis(before)).await;
                stop(srv, true).await;
                let down = step(&mut x) % 400;
                eprintln!("kill {k}: after {before} ms, down {down} ms");
                tokio::time::sleep(Duration::from_millis(down)).await;
                start_again(srv).await;
            }
            killed.store(true, SeqCst);
        })
    };
    let writer = {
        let (history, killed, done, db) =
            (history.clone(), killed.clone(), done.clone(), db.clone());
        tokio::spawn(async move {
            let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let mut values = [0u64; 4];
            let (mut conn, mut after, mut unacked) = (None, 0, 0u64);
            // Until the last restart, and 150 writes after it.
            while !killed.load(SeqCst) || after < 150 {
                after += u64::from(killed.load(SeqCst));
                let i = (step(&mut x) >> 33) as usize % 4;
                if conn.is_none() {
                    let t = srv.target().with_database(Some(&db));
                    conn = t.connect(Duration::from_secs(1)).await.ok();
                }
                let Some(c) = conn.as_mut() else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                // A write whose OK never came may or may not be there:
                // the next value is above it either way.
                values[i] += 1;
                let (key, next) = (13 + i, values[i]);
                let write = c.query_drop(format!("UPDATE kv SET v = {next} WHERE k = {key}"));
                match tokio::time::timeout(Duration::from_secs(5), write).await {
                    Ok(Ok(())) => {
                        history.lock().expect("history")[i].push((std::time::Instant::now(), next))
                    }
                    _ => {
                        unacked += 1;
                        conn = None;
                    }
                }
                tokio::time::sleep(Duration::from_millis(step(&mut x) >> 60)).await;
            }
            done.store(true, SeqCst);
            unacked
        })
    };
    let mut readers = Vec::new();
    for r in 0..3u64 {
        let (history, done, port, db) = (history.clone(), done.clone(), relay.port, db.clone());
        readers.push(tokio::spawn(async move {
            let (mut violations, mut reads, mut failed) = (0u64, 0u64, 0u64);
            let mut x = seed ^ (r + 100);
            let mut conn: Option<mysql_async::Conn> = None;
            while !done.load(SeqCst) {
                if conn.is_none() {
                    conn = app(port, "app-pw", Some(&db))
                        .connect(Duration::from_secs(2))
                        .await
                        .ok();
                }
                let Some(c) = conn.as_mut() else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let i = (step(&mut x) >> 33) as usize % 4;
                let began = std::time::Instant::now();
                let read =
                    c.query_first::<u64, _>(format!("SELECT v FROM kv WHERE k = {}", 13 + i));
                match tokio::time::timeout(Duration::from_secs(5), read).await {
                    Ok(Ok(v)) => {
                        reads += 1;
                        let h = history.lock().expect("history")[i].clone();
                        if v.unwrap_or(0) < floor_before(&h, began, BOUND) {
                            violations += 1;
                        }
                    }
                    _ => {
                        failed += 1;
                        conn = None;
                    }
                }
            }
            (violations, reads, failed)
        }));
    }
    killer.await.expect("killer");
    let unacked = writer.await.expect("writer");
    let (mut violations, mut reads, mut failed) = (0, 0, 0);
    for r in readers {
        let (v, n, f) = r.await.expect("reader");
        violations += v;
        reads += n;
        failed += f;
    }
    let hits = relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}");
    let bypassed = relay.metric("sqlfleet_relay_cache_bypassed_total");
    eprintln!(
        "kill -9 campaign seed {seed}: {kills} kills, {unacked} writes unacknowledged, {reads} reads ({failed} failed), {hits} hits, {bypassed} bypassed, {violations} past the {BOUND:?} bound"
    );
    assert_eq!(violations, 0, "reads older than the lag bound allows");
    assert!(
        bypassed >= 1.0,
        "the cache was never bypassed while its follower was blind"
    );
    // Served again once the follower caught up with the new server, and
    // every register ends as the server has it.
    relay.wait_cache_following(Duration::from_secs(30));
    let hits_before = relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}");
    let mut direct = srv.connect().await;
    let mut c = client(&relay, &db).await;
    for key in 13..=16 {
        let sql = format!("SELECT v FROM kv WHERE k = {key}");
        let want: Option<i64> = direct
            .query_first(format!("SELECT v FROM `{db}`.kv WHERE k = {key}"))
            .await
            .expect("direct read");
        let want = want.unwrap_or(0);
        if let Err(v) = read_until(&mut c, &sql, want, Duration::from_secs(10)).await {
            panic!("k = {key} reads {v:?} through the relay, the server has {want}");
        }
        let _: Option<i64> = c.query_first(&sql).await.expect("again");
    }
    assert!(
        relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}") > hits_before,
        "no hit after the restarts: {}",
        relay.page("/status")
    );
}

/// A cached grouping leaves FOUND_ROWS() as the server left it at the
/// miss: its one row where the WHERE can match, the client's own count
/// before it where the optimizer found the WHERE impossible (a key that
/// is not there) — each client reading its own count, as directly. A
/// write that puts the key there makes the entry stale, and the next
/// read learns the new way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_grouping_leaves_found_rows_as_the_server_did() {
    let _one = SERIAL.lock().await;
    let srv = sqlfleet_testkit::server();
    let (relay, db) = setup(srv).await;
    let hits = || relay.metric("sqlfleet_relay_cache_hits_total{rule=\"kv\"}");
    let missing = "SELECT COUNT(*) FROM kv WHERE k = 999";
    let matching = "SELECT COUNT(*) FROM kv WHERE v >= 0";
    let mut direct = srv.connect().await;
    direct.query_drop(format!("USE `{db}`")).await.expect("use");
    // (count before, grouping, a hit): each client's FOUND_ROWS() after
    // it is read once all have run (reading it is no plain read, which
    // makes the cache stale).
    let mut ran = Vec::new();
    for (rows, grouping, hit) in [
        (5, missing, false),
        (3, missing, true),
        (0, missing, true),
        (5, matching, false),
        (3, matching, true),
    ] {
        let mut c = client(&relay, &db).await;
        let mut d = srv.connect().await;
        d.query_drop(format!("USE `{db}`")).await.expect("use");
        for conn in [&mut c, &mut d] {
            conn.query_drop(format!("SELECT * FROM kv WHERE k <= {rows}"))
                .await
                .expect("count");
        }
        let before = hits();
        for conn in [&mut c, &mut d] {
            let _: Option<u64> = conn.query_first(grouping).await.expect("grouping");
        }
        let m = relay.metrics();
        let cache_lines: Vec<&str> = m
            .lines()
            .filter(|l| l.starts_with("sqlfleet_relay_cache") && l.contains("kv"))
            .collect();
        assert_eq!(
            hits() > before,
            hit,
            "{grouping} after {rows} rows: a hit ({cache_lines:?})"
        );
        ran.push((rows, grouping, c, d));
    }
    for (rows, grouping, mut c, mut d) in ran {
        let relayed: Option<u64> = c.query_first("SELECT FOUND_ROWS()").await.expect("found");
        let direct_found: Option<u64> = d.query_first("SELECT FOUND_ROWS()").await.expect("found");
        assert_eq!(relayed, direct_found, "{grouping} after {rows} rows");
        let _ = c.disconnect().await;
    }
    // The premise: directly, the missing key's grouping kept the count.
    direct
        .query_drop("SELECT * FROM kv WHERE k <= 3")
        .await
        .expect("count");
    let _: Option<u64> = direct.query_first(missing).await.expect("grouping");
    let kept: Option<u64> = direct
        .query_first("SELECT FOUND_ROWS()")
        .await
        .expect("found");
    assert_eq!(kept, Some(3));
    // The key put there: stale, read again, its row counted.
    direct
        .query_drop("INSERT INTO kv VALUES (999, 0)")
        .await
        .expect("insert");
    let mut c = client(&relay, &db).await;
    let mut seen = None;
    for _ in 0..100 {
        c.query_drop("SELECT * FROM kv WHERE k <= 3")
            .await
            .expect("count");
        let n: Option<u64> = c.query_first(missing).await.expect("grouping");
        if n == Some(1) {
            seen = c
                .query_first::<u64, _>("SELECT FOUND_ROWS()")
                .await
                .expect("found");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        seen,
        Some(1),
        "the key's row counted once the entry went stale"
    );
    direct
        .query_drop("DELETE FROM kv WHERE k = 999")
        .await
        .expect("delete");
}

/// Built-in functions whose value depends only on their arguments, the
/// tables' data and what a cache entry's key holds (the account, the
/// database, the session's settings): a statement calling one may be
/// cached. Every other function the server lists is volatile
/// (`decide::volatile`); a function the server lists in neither fails
/// the test below until someone decides.
const STABLE: &[&str] = &[
    "ABS",
    "ACOS",
    "ADDDATE",
    "ADDTIME",
    "ADD_MONTHS",
    "AES_DECRYPT",
    "AES_ENCRYPT",
    "ASIN",
    "ATAN",
    "ATAN2",
    "BIN",
    "BIT_AND",
    "BIT_COUNT",
    "BIT_LENGTH",
    "BIT_OR",
    "BIT_XOR",
    "CAST",
    "CEIL",
    "CEILING",
    "CHARACTER_LENGTH",
    "CHAR_LENGTH",
    "CHR",
    "COALESCE",
    "COERCIBILITY",
    "COLLATION",
    "COLUMN_CHECK",
    "COLUMN_EXISTS",
    "COLUMN_JSON",
    "COLUMN_LIST",
    "COMPRESS",
    "CONCAT",
    "CONCAT_OPERATOR_ORACLE",
    "CONCAT_WS",
    "CONV",
    "CONVERT_TZ",
    "COS",
    "COT",
    "COUNT",
    "CRC32",
    "CRC32C",
    "CUME_DIST",
    "DATABASE",
    "DATEDIFF",
    "DATE_ADD",
    "DATE_FORMAT",
    "DATE_SUB",
    "DAYNAME",
    "DAYOFMONTH",
    "DAYOFWEEK",
    "DAYOFYEAR",
    "DECODE",
    "DECODE_HISTOGRAM",
    "DECODE_ORACLE",
    "DEGREES",
    "DENSE_RANK",
    "DES_DECRYPT",
    "DES_ENCRYPT",
    "ELT",
    "ENCODE",
    "EXP",
    "EXPORT_SET",
    "EXTRACT",
    "EXTRACTVALUE",
    "FIELD",
    "FIND_IN_SET",
    "FIRST_VALUE",
    "FLOOR",
    "FORMAT",
    "FORMAT_PICO_TIME",
    "FROM_BASE64",
    "FROM_DAYS",
    "FROM_UNIXTIME",
    "GREATEST",
    "GROUP_CONCAT",
    "HEX",
    "IFNULL",
    "INET6_ATON",
    "INET6_NTOA",
    "INET_ATON",
    "INET_NTOA",
    "INSTR",
    "ISNULL",
    "IS_IPV4",
    "IS_IPV4_COMPAT",
    "IS_IPV4_MAPPED",
    "IS_IPV6",
    "JSON_ARRAY",
    "JSON_ARRAYAGG",
    "JSON_ARRAY_APPEND",
    "JSON_ARRAY_INSERT",
    "JSON_ARRAY_INTERSECT",
    "JSON_COMPACT",
    "JSON_CONTAINS",
    "JSON_CONTAINS_PATH",
    "JSON_DEPTH",
    "JSON_DETAILED",
    "JSON_EQUALS",
    "JSON_EXISTS",
    "JSON_EXTRACT",
    "JSON_INSERT",
    "JSON_KEYS",
    "JSON_KEY_VALUE",
    "JSON_LENGTH",
    "JSON_LOOSE",
    "JSON_MERGE",
    "JSON_MERGE_PATCH",
    "JSON_MERGE_PRESERVE",
    "JSON_NORMALIZE",
    "JSON_OBJECT",
    "JSON_OBJECTAGG",
    "JSON_OBJECT_FILTER_KEYS",
    "JSON_OBJECT_TO_ARRAY",
    "JSON_OVERLAPS",
    "JSON_PRETTY",
    "JSON_QUERY",
    "JSON_QUOTE",
    "JSON_REMOVE",
    "JSON_REPLACE",
    "JSON_SCHEMA_VALID",
    "JSON_SEARCH",
    "JSON_SET",
    "JSON_TYPE",
    "JSON_UNQUOTE",
    "JSON_VALID",
    "JSON_VALUE",
    "KDF",
    "LAG",
    "LAST_DAY",
    "LCASE",
    "LEAD",
    "LEAST",
    "LENGTH",
    "LENGTHB",
    "LN",
    "LOCATE",
    "LOG",
    "LOG10",
    "LOG2",
    "LOWER",
    "LPAD",
    "LPAD_ORACLE",
    "LTRIM",
    "LTRIM_ORACLE",
    "MAKEDATE",
    "MAKETIME",
    "MAKE_SET",
    "MAX",
    "MD5",
    "MEDIAN",
    "MICROSECOND",
    "MID",
    "MIN",
    "MOD",
    "MONTHNAME",
    "NAME_CONST",
    "NATURAL_SORT_KEY",
    "NTH_VALUE",
    "NTILE",
    "NULLIF",
    "NVL",
    "NVL2",
    "OCT",
    "OCTET_LENGTH",
    "OLD_PASSWORD",
    "ORD",
    "PASSWORD",
    "PERCENTILE_CONT",
    "PERCENTILE_DISC",
    "PERCENT_RANK",
    "PERIOD_ADD",
    "PERIOD_DIFF",
    "PI",
    "POSITION",
    "POW",
    "POWER",
    "QUARTER",
    "QUOTE",
    "RADIANS",
    "RANK",
    "REGEXP_INSTR",
    "REGEXP_REPLACE",
    "REGEXP_SUBSTR",
    "REPLACE_ORACLE",
    "REVERSE",
    "ROUND",
    "RPAD",
    "RPAD_ORACLE",
    "RTRIM",
    "RTRIM_ORACLE",
    "SCHEMA",
    "SCHEMAS",
    "SEC_TO_TIME",
    "SFORMAT",
    "SHA",
    "SHA1",
    "SHA2",
    "SIGN",
    "SIN",
    "SOUNDEX",
    "SPACE",
    "SQRT",
    "STD",
    "STDDEV",
    "STDDEV_POP",
    "STDDEV_SAMP",
    "STRCMP",
    "STR_TO_DATE",
    "SUBDATE",
    "SUBSTR",
    "SUBSTRING",
    "SUBSTRING_INDEX",
    "SUBSTR_ORACLE",
    "SUBTIME",
    "SUM",
    "TAN",
    "TIMEDIFF",
    "TIME_FORMAT",
    "TIME_TO_SEC",
    "TO_BASE64",
    "TO_CHAR",
    "TO_DAYS",
    "TO_SECONDS",
    "TRIM",
    "TRIM_ORACLE",
    "UCASE",
    "UNCOMPRESS",
    "UNCOMPRESSED_LENGTH",
    "UNHEX",
    "UPDATEXML",
    "UPPER",
    "VARIANCE",
    "VAR_POP",
    "VAR_SAMP",
    "VERSION",
    "WEEK",
    "WEEKDAY",
    "WEEKOFYEAR",
    "YEARWEEK",
];

/// The cache's list of what is never cached, against the server's own
/// list of its functions (`information_schema.SQL_FUNCTIONS`, 261 on
/// 10.11, 268 on 11.4): each is a built-in to the statement reader (else a call to it
/// would be taken for a stored function's: never shared, never cached),
/// and each is either volatile or in [`STABLE`] — a function a newer
/// server adds stops this test rather than be cached unread. (Before
/// this test WSREP_SYNC_WAIT_UPTO_GTID, which waits for a Galera
/// node to apply a GTID, was cacheable: a hit answered at once, without
/// the wait.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_function_the_server_lists_is_known_and_decided_for_the_cache() {
    use sqlfleet_relay::cache::decide::volatile;
    use sqlfleet_relay::protocol::sql::builtin;
    let srv = sqlfleet_testkit::server();
    let mut c = srv.connect().await;
    let functions = sqlfleet_testkit::server_lists::sql_functions(&mut c).await;
    let _ = c.disconnect().await;
    assert!(functions.len() > 200, "{functions:?}");
    let unknown: Vec<&String> = functions.iter().filter(|f| !builtin(f)).collect();
    assert!(
        unknown.is_empty(),
        "not built-ins to the reader: {unknown:?}"
    );
    let undecided: Vec<&String> = functions
        .iter()
        .filter(|f| volatile(f) == STABLE.contains(&f.as_str()))
        .collect();
    assert!(
        undecided.is_empty(),
        "neither volatile nor stable, or both: {undecided:?}"
    );
    assert!(volatile("WSREP_SYNC_WAIT_UPTO_GTID") && volatile("NOW") && !volatile("ABS"));
}

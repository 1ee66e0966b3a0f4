//! Transaction replay on one server: the server connection holding a
//! client's open transaction is killed (server-side KILL, between the
//! client's statements) and the relay runs the transaction again on
//! another connection, comparing every reply with what the client was
//! given. Each test asserts what the client saw, what the server holds
//! afterwards (applied exactly once, or not at all) and the relay's
//! counters. Faults that kill servers under a workload are in
//! relay_bank.rs.

mod common;

use std::time::Duration;

use common::relay::{app, start_relay, Relay};
use mysql_async::prelude::Queryable;
use sqlfleet_testkit::server;

async fn connect(relay: &Relay, db: &str) -> mysql_async::Conn {
    app(relay.port, "app-pw", Some(db))
        .connect(Duration::from_secs(5))
        .await
        .expect("connect via relay")
}

/// A fresh database with two accounts of 100 and an auto-increment
/// ledger; returns its name and a direct (root) connection to it.
async fn bank(prefix: &str) -> (String, mysql_async::Conn) {
    let srv = server();
    let (db, _) = srv.fresh_db(prefix).await;
    let mut admin = srv.connect().await;
    admin
        .query_drop(format!(
            "CREATE TABLE `{db}`.acct (id INT PRIMARY KEY, balance INT NOT NULL); \
             INSERT INTO `{db}`.acct VALUES (1, 100), (2, 100); \
             CREATE TABLE `{db}`.ledger (id INT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(20))"
        ))
        .await
        .expect("schema");
    (db, admin)
}

/// Kills the server connections in `db` (the relay's, holding the
/// client's open transaction; the test's own direct connection names
/// no database) and waits until they are gone.
async fn kill_trx(admin: &mut mysql_async::Conn, db: &str) {
    let ids: Vec<u64> = admin
        .query(format!(
            "SELECT id FROM information_schema.processlist WHERE db = '{db}'"
        ))
        .await
        .expect("processlist");
    assert!(!ids.is_empty(), "the relay holds a connection in {db}");
    for id in &ids {
        let _ = admin.query_drop(format!("KILL {id}")).await;
    }
    for _ in 0..200 {
        let left: Vec<u64> = admin
            .query(format!(
                "SELECT id FROM information_schema.processlist WHERE db = '{db}'"
            ))
            .await
            .expect("processlist");
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The relay notices the closed connection between commands.
    tokio::time::sleep(Duration::from_millis(100)).await;
}

async fn balances(admin: &mut mysql_async::Conn, db: &str) -> Vec<(i32, i32)> {
    admin
        .query(format!("SELECT id, balance FROM `{db}`.acct ORDER BY id"))
        .await
        .expect("balances")
}

async fn ledger(admin: &mut mysql_async::Conn, db: &str) -> Vec<String> {
    admin
        .query(format!("SELECT k FROM `{db}`.ledger ORDER BY id"))
        .await
        .expect("ledger")
}

#[test]
fn a_transaction_whose_connection_dies_is_replayed_and_applied_once() {
    let relay = start_relay(server(), &[]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, mut admin) = bank("replayed").await;
        let mut c = connect(&relay, &db).await;
        c.query_drop("BEGIN").await.expect("begin");
        let seen: Vec<(i32, i32)> = c
            .query("SELECT id, balance FROM acct ORDER BY id FOR UPDATE")
            .await
            .expect("read");
        assert_eq!(seen, vec![(1, 100), (2, 100)]);
        c.query_drop("UPDATE acct SET balance = balance - 10 WHERE id = 1")
            .await
            .expect("debit");
        kill_trx(&mut admin, &db).await;
        // Lost between statements: replayed, then this one runs.
        c.query_drop("UPDATE acct SET balance = balance + 10 WHERE id = 2")
            .await
            .expect("credit after the first loss");
        c.query_drop("INSERT INTO ledger (k) VALUES ('t1')")
            .await
            .expect("ledger row");
        kill_trx(&mut admin, &db).await;
        // The COMMIT was never sent on the lost connection: the
        // transaction is replayed and committed once.
        c.query_drop("COMMIT")
            .await
            .expect("commit after the second loss");
        assert_eq!(balances(&mut admin, &db).await, vec![(1, 90), (2, 110)]);
        assert_eq!(ledger(&mut admin, &db).await, vec!["t1".to_string()]);
        // The session goes on as before.
        let n: Option<i64> = c
            .query_first("SELECT COUNT(*) FROM ledger")
            .await
            .expect("read");
        assert_eq!(n, Some(1));
    });
    assert_eq!(
        relay.metric("sqlfleet_relay_transaction_replays_total"),
        2.0
    );
    assert_eq!(
        relay.metric("sqlfleet_relay_transaction_replay_failures_total"),
        0.0
    );
}

#[test]
fn a_replay_that_reads_something_else_is_refused_and_nothing_is_applied() {
    let relay = start_relay(server(), &[]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, mut admin) = bank("mismatch").await;
        let mut c = connect(&relay, &db).await;
        c.query_drop("BEGIN").await.expect("begin");
        let b: Option<i32> = c
            .query_first("SELECT balance FROM acct WHERE id = 1")
            .await
            .expect("read");
        assert_eq!(b, Some(100));
        kill_trx(&mut admin, &db).await;
        // Someone else changes what the client read.
        admin
            .query_drop(format!("UPDATE `{db}`.acct SET balance = 500 WHERE id = 1"))
            .await
            .expect("direct update");
        let r = c
            .query_drop("UPDATE acct SET balance = balance - 10 WHERE id = 1")
            .await;
        assert!(
            r.is_err(),
            "a replay whose read differs must not go on as if nothing happened"
        );
        assert_eq!(balances(&mut admin, &db).await, vec![(1, 500), (2, 100)]);
    });
    assert_eq!(
        relay.metric("sqlfleet_relay_transaction_replays_total"),
        0.0
    );
    assert_eq!(
        relay.metric("sqlfleet_relay_transaction_replay_failures_total"),
        1.0
    );
}

#[test]
fn a_replay_asks_for_the_same_generated_key_and_fails_closed_when_it_is_taken() {
    // (checksum, the lost key taken by another client meanwhile, the
    // replay goes through, the client's row keeps its key)
    let rows = [
        ("full", false, true, true),
        ("full", true, false, false),
        ("results", true, true, false),
    ];
    for (checksum, taken, replays, same_key) in rows {
        let case = format!("checksum = {checksum}, key taken: {taken}");
        let toml = format!("[replay]\nchecksum = \"{checksum}\"");
        let relay = start_relay(server(), &["--toml", &toml]);
        let rt = tokio::runtime::Runtime::new().expect("rt");
        rt.block_on(async {
            let (db, mut admin) = bank(&format!("keys_{checksum}")).await;
            let mut c = connect(&relay, &db).await;
            c.query_drop("BEGIN").await.expect("begin");
            c.query_drop("INSERT INTO ledger (k) VALUES ('mine')")
                .await
                .expect("insert");
            let key = c.last_insert_id().expect("a generated key");
            kill_trx(&mut admin, &db).await;
            // Another client inserts meanwhile: its own next key, or
            // the very key the lost insert had.
            let theirs = if taken {
                format!("INSERT INTO `{db}`.ledger (id, k) VALUES ({key}, 'theirs')")
            } else {
                format!("INSERT INTO `{db}`.ledger (k) VALUES ('theirs')")
            };
            admin.query_drop(theirs).await.expect("direct insert");
            let r = c.query_drop("COMMIT").await;
            assert_eq!(r.is_ok(), replays, "{case}: {r:?}");
            let mine: Option<u64> = admin
                .query_first(format!("SELECT id FROM `{db}`.ledger WHERE k = 'mine'"))
                .await
                .expect("read");
            match (replays, same_key) {
                (false, _) => assert_eq!(mine, None, "{case}: nothing applied"),
                (true, true) => assert_eq!(mine, Some(key), "{case}: the key the client was told"),
                (true, false) => assert!(mine.is_some_and(|m| m != key), "{case}: {mine:?}"),
            }
        });
        assert_eq!(
            relay.metric("sqlfleet_relay_transaction_replays_total"),
            f64::from(u8::from(replays)),
            "{case}"
        );
        assert_eq!(
            relay.metric("sqlfleet_relay_transaction_replay_failures_total"),
            f64::from(u8::from(!replays)),
            "{case}"
        );
    }
}

#[test]
fn a_rollback_after_the_loss_is_answered_and_replay_off_keeps_the_lost_connection() {
    let relay = start_relay(server(), &[]);
    let off = start_relay(server(), &["--toml", "[replay]\nenabled = false"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, mut admin) = bank("rollback").await;
        // ROLLBACK of a transaction the server already rolled back.
        let mut c = connect(&relay, &db).await;
        c.query_drop("BEGIN").await.expect("begin");
        c.query_drop("UPDATE acct SET balance = 0 WHERE id = 1")
            .await
            .expect("update");
        kill_trx(&mut admin, &db).await;
        c.query_drop("ROLLBACK")
            .await
            .expect("rollback after the loss");
        let b: Option<i32> = c
            .query_first("SELECT balance FROM acct WHERE id = 1")
            .await
            .expect("read after");
        assert_eq!(b, Some(100));

        // Replay off: the client loses its connection, as directly.
        let mut c = connect(&off, &db).await;
        c.query_drop("BEGIN").await.expect("begin");
        c.query_drop("UPDATE acct SET balance = 0 WHERE id = 1")
            .await
            .expect("update");
        kill_trx(&mut admin, &db).await;
        assert!(c.query_drop("COMMIT").await.is_err(), "replay is off");
        assert_eq!(balances(&mut admin, &db).await, vec![(1, 100), (2, 100)]);
    });
    assert_eq!(off.metric("sqlfleet_relay_transaction_replays_total"), 0.0);
    // Lost while the client sat idle in it, and not replayed: counted.
    assert_eq!(
        off.metric("sqlfleet_relay_transaction_replay_refused_total"),
        1.0
    );
}

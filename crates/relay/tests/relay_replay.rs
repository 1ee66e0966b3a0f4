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
    bank_on(server(), prefix).await
}

async fn bank_on(srv: &sqlfleet_testkit::TestServer, prefix: &str) -> (String, mysql_async::Conn) {
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

/// On a Galera node a replay first waits for the cluster's writes
/// (`SET STATEMENT wsrep_sync_wait = 1 FOR SELECT 1`), and MariaDB reports
/// that variable's restore only with a later reply, a COMMIT's: the relay
/// took it for state it could not follow, so a transaction replayed once
/// pinned its client for good and the client's next lost transaction was
/// not replayed (the Galera bank campaign's failure in CI). Here a read
/// that waits for a lock loses its connection twice, then two later
/// transactions lose theirs between statements: each is replayed.
#[test]
fn a_client_replayed_on_galera_is_replayed_again_and_keeps_no_pin() {
    let g = sqlfleet_testkit::galera();
    let relay = start_relay(g, &[]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, mut admin) = bank_on(g, "replaygalera").await;
        // A direct transaction holds row 2: the client's read waits.
        let mut holder = g.connect().await;
        holder.query_drop("BEGIN").await.expect("begin");
        holder
            .query_drop(format!("SELECT * FROM `{db}`.acct WHERE id = 2 FOR UPDATE"))
            .await
            .expect("lock");
        let mut c = connect(&relay, &db).await;
        c.query_drop("BEGIN").await.expect("begin");
        c.query_drop("UPDATE acct SET balance = balance - 10 WHERE id = 1")
            .await
            .expect("debit");
        let waiting = tokio::spawn(async move {
            let r: Result<Vec<(i32, i32)>, _> = c
                .query("SELECT id, balance FROM acct WHERE id = 2 FOR UPDATE")
                .await;
            (c, r)
        });
        for _ in 0..2 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            kill_trx(&mut admin, &db).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        holder.query_drop("ROLLBACK").await.expect("release");
        let (mut c, r) = waiting.await.expect("join");
        assert_eq!(r.expect("the read after two losses"), vec![(2, 100)]);
        c.query_drop("UPDATE acct SET balance = balance + 10 WHERE id = 2")
            .await
            .expect("credit");
        c.query_drop("COMMIT").await.expect("commit");
        for k in ["t1", "t2"] {
            c.query_drop("BEGIN").await.expect("begin");
            c.query_drop(format!("INSERT INTO ledger (k) VALUES ('{k}')"))
                .await
                .expect("ledger row");
            kill_trx(&mut admin, &db).await;
            c.query_drop("UPDATE acct SET balance = balance - 1 WHERE id = 1")
                .await
                .unwrap_or_else(|e| panic!("{k}: the statement after the loss: {e}"));
            c.query_drop("COMMIT").await.expect("commit");
        }
        assert_eq!(balances(&mut admin, &db).await, vec![(1, 88), (2, 110)]);
        assert_eq!(
            ledger(&mut admin, &db).await,
            vec!["t1".to_string(), "t2".to_string()]
        );
    });
    assert_eq!(
        relay.metric("sqlfleet_relay_transaction_replays_total"),
        4.0
    );
    assert_eq!(
        relay.metric("sqlfleet_relay_transaction_replay_refused_total"),
        0.0
    );
    assert_eq!(
        relay.metric("sqlfleet_relay_pins_total{reason=\"server_state\"}"),
        0.0
    );
}

//! Event loops: a client is served on the loop that accepted it unless
//! that loop is much busier than another; a session that stays moves to
//! a less busy loop between commands, sockets and all, and carries on
//! exactly where it was (transaction, temporary table, user variables,
//! settings, its connection id).

mod common;

use std::time::Duration;

use common::relay::{app, start_relay, Relay};
use mysql_async::prelude::Queryable;
use sqlfleet_relay::event_loops::{MOVE_AFTER, SPILL};
use sqlfleet_testkit::server;

async fn connect(relay: &Relay, db: Option<&str>) -> mysql_async::Conn {
    app(relay.port, "app-pw", db)
        .connect(Duration::from_secs(5))
        .await
        .expect("connect via relay")
}

/// Sessions per event loop, from the metrics page.
fn loop_sessions(relay: &Relay) -> Vec<u64> {
    (0..2)
        .map(|i| relay.metric(&format!("sqlfleet_relay_loop_sessions{{loop=\"{i}\"}}")) as u64)
        .collect()
}

/// Waits until the relay counts `want` sessions per loop (a session that
/// has just quit is uncounted a moment after its client returns).
fn wait_loop_sessions(relay: &Relay, want: &[u64]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let got = loop_sessions(relay);
        if got == want || std::time::Instant::now() > deadline {
            assert_eq!(got, want, "sessions per event loop");
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn long_sessions_move_to_a_less_busy_loop_and_keep_their_state() {
    let srv = server();
    for mode in ["transaction", "session"] {
        let relay = start_relay(srv, &["--threads", "2", "--mode", mode]);
        let rt = tokio::runtime::Runtime::new().expect("rt");
        rt.block_on(async {
            let (db, _) = srv.fresh_db("relayloops").await;
            // Four clients, all accepted and kept on the accepting loop.
            let mut c = Vec::new();
            for _ in 0..4 {
                c.push(connect(&relay, Some(&db)).await);
            }
            wait_loop_sessions(&relay, &[4, 0]);
            // Clients 0 and 2 hold a transaction on a temporary table
            // (pinned to their backend connection); 1 and 3 only have
            // settings and a user variable the relay replays.
            let mut ids = Vec::new();
            for (i, conn) in c.iter_mut().enumerate() {
                let setup: Vec<String> = if i % 2 == 0 {
                    vec![
                        format!("SET @v = {i}"),
                        "CREATE TEMPORARY TABLE t (a INT)".into(),
                        "BEGIN".into(),
                        format!("INSERT INTO t VALUES ({i})"),
                    ]
                } else {
                    vec![
                        format!("SET @v = {i}"),
                        "SET SESSION time_zone = '+03:00'".into(),
                        "SET SESSION sql_mode = 'ANSI_QUOTES'".into(),
                        "DO 1".into(),
                    ]
                };
                for sql in setup {
                    conn.query_drop(sql).await.expect("setup");
                }
                let id: u64 = conn
                    .query_first("SELECT CONNECTION_ID()")
                    .await
                    .expect("id")
                    .expect("row");
                ids.push(id);
            }
            // Round robin until every client is past the first check: the
            // first two to get there move (4:0 -> 3:1 -> 2:2), no more.
            for _ in 0..MOVE_AFTER {
                for conn in c.iter_mut() {
                    conn.query_drop("DO 1").await.expect("do");
                }
            }
            wait_loop_sessions(&relay, &[2, 2]);
            assert_eq!(relay.metric("sqlfleet_relay_session_moves_total"), 2.0);
            for (i, conn) in c.iter_mut().enumerate() {
                let (v, id): (i64, u64) = conn
                    .query_first("SELECT @v, CONNECTION_ID()")
                    .await
                    .expect("after the move")
                    .expect("row");
                assert_eq!(
                    (v, id),
                    (i as i64, ids[i]),
                    "{mode}: client {i} after moving"
                );
                if i % 2 == 0 {
                    let rows: Vec<i64> = conn.query("SELECT a FROM t").await.expect("t");
                    assert_eq!(rows, vec![i as i64], "{mode}: client {i}'s temporary table");
                    let (trx,): (i64,) = conn
                        .query_first("SELECT @@in_transaction")
                        .await
                        .expect("trx")
                        .expect("row");
                    assert_eq!(trx, 1, "{mode}: client {i}'s transaction is still open");
                    conn.query_drop("COMMIT").await.expect("commit");
                } else {
                    let (tz, sql_mode): (String, String) = conn
                        .query_first("SELECT @@session.time_zone, @@session.sql_mode")
                        .await
                        .expect("settings")
                        .expect("row");
                    assert_eq!(
                        (tz.as_str(), sql_mode.as_str()),
                        ("+03:00", "ANSI_QUOTES"),
                        "{mode}: client {i}'s settings"
                    );
                }
            }
            for conn in c {
                conn.disconnect().await.expect("quit");
            }
            wait_loop_sessions(&relay, &[0, 0]);
        });
    }
}

#[test]
fn new_clients_spill_to_another_loop_only_when_the_accepting_one_is_much_busier() {
    let srv = server();
    let relay = start_relay(srv, &["--threads", "2"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let mut c = Vec::new();
        for _ in 0..SPILL {
            c.push(connect(&relay, None).await);
        }
        wait_loop_sessions(&relay, &[SPILL as u64, 0]);
        // The accepting loop serves SPILL more than the other: the next
        // client goes there, the one after stays.
        c.push(connect(&relay, None).await);
        wait_loop_sessions(&relay, &[SPILL as u64, 1]);
        c.push(connect(&relay, None).await);
        wait_loop_sessions(&relay, &[SPILL as u64 + 1, 1]);
        // Every one of them is served.
        for conn in c.iter_mut() {
            let one: i64 = conn.query_first("SELECT 1").await.expect("q").expect("row");
            assert_eq!(one, 1);
        }
        for conn in c {
            conn.disconnect().await.expect("quit");
        }
        wait_loop_sessions(&relay, &[0, 0]);
    });
}

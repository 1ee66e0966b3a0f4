//! Statements too big to hold (a COM_QUERY of 1 MiB and more) go to the
//! server as they arrive (`protocol/io/stream.rs`): they run whole and
//! once; one refused by a query rule is read to its end first, so its
//! error has the right sequence id and the client's next command is read
//! where it starts; one whose ROW_COUNT() the relay answers is read whole;
//! a transaction with one is not replayed (only its head is kept). The
//! relay's memory under twenty at once: crates/sqlfleet/tests/relay_scale.rs.

mod common;

use std::time::Duration;

use common::relay::start_relay;
use mysql_async::prelude::Queryable;
use sqlfleet_testkit::proxy::app;

const MIB: usize = 1 << 20;

fn big_server() -> &'static sqlfleet_testkit::TestServer {
    static S: std::sync::OnceLock<sqlfleet_testkit::TestServer> = std::sync::OnceLock::new();
    S.get_or_init(|| sqlfleet_testkit::server_with(&["max_allowed_packet=128M"]))
}

/// `INSERT INTO t VALUES (id, '<n bytes>')`.
fn insert(id: u32, n: usize) -> String {
    format!("INSERT INTO t VALUES ({id}, '{}')", "z".repeat(n))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_statements_run_whole_and_once_and_the_session_goes_on() {
    let srv = big_server();
    let rules = r#"
[[rules]]
name = "no-big-deletes"
match_regex = "(?i)^\\s*DELETE\\s+FROM\\s+t\\s+WHERE\\s+b\\s*="
reject = "big deletes are refused here"
"#;
    let r = start_relay(srv, &["--mode", "transaction", "--toml", rules]);
    let (db, _) = srv.fresh_db("bigst").await;
    let mut c = app(r.port, "app-pw", Some(&db))
        .connect(Duration::from_secs(10))
        .await
        .expect("connect");
    c.query_drop("CREATE TABLE t (id INT PRIMARY KEY, b LONGBLOB)")
        .await
        .expect("create");
    // Just under and over the threshold, and over one 16 MiB packet.
    for (id, n) in [(1, MIB - 100), (2, MIB + 7), (3, 3 * MIB), (4, 17 * MIB)] {
        c.query_drop(insert(id, n)).await.expect("insert");
        let (rows, len): (u64, u64) = c
            .query_first(format!(
                "SELECT COUNT(*), SUM(LENGTH(b)) FROM t WHERE id = {id}"
            ))
            .await
            .expect("read")
            .expect("row");
        assert_eq!((rows, len), (1, n as u64), "row {id} of {n} bytes");
    }
    // Refused by a rule after its head: the error, then the session goes on.
    let refused = format!("DELETE FROM t WHERE b = '{}'", "z".repeat(2 * MIB));
    let e = c
        .query_drop(&refused)
        .await
        .expect_err("refused by the rule");
    assert!(
        e.to_string().contains("big deletes are refused here"),
        "{e}"
    );
    let n: Option<u64> = c.query_first("SELECT COUNT(*) FROM t").await.expect("next");
    assert_eq!(
        n,
        Some(4),
        "nothing deleted, and the next command read where it starts"
    );
    // A big statement asking the relay-kept ROW_COUNT(): read whole, answered right.
    c.query_drop("UPDATE t SET id = id + 10 WHERE id > 2")
        .await
        .expect("update");
    let (rc, len): (i64, u64) = c
        .query_first(format!(
            "SELECT ROW_COUNT(), LENGTH('{}')",
            "q".repeat(2 * MIB)
        ))
        .await
        .expect("row count")
        .expect("row");
    assert_eq!((rc, len), (2, 2 * MIB as u64));
    // In a transaction: it commits as written.
    c.query_drop("BEGIN").await.expect("begin");
    c.query_drop(insert(5, 5 * MIB))
        .await
        .expect("in a transaction");
    c.query_drop("COMMIT").await.expect("commit");
    let n: Option<u64> = c
        .query_first("SELECT COUNT(*) FROM t WHERE id = 5 AND LENGTH(b) = 5242880")
        .await
        .expect("read");
    assert_eq!(n, Some(1));
    // Over the server's limit: its own 1153, then a new connection works.
    let e = c
        .query_drop(insert(6, 130 * MIB))
        .await
        .expect_err("over max_allowed_packet");
    assert!(
        matches!(&e, mysql_async::Error::Server(s) if s.code == 1153 || s.code == 1158),
        "{e}"
    );
    let mut c = app(r.port, "app-pw", Some(&db))
        .connect(Duration::from_secs(10))
        .await
        .expect("connect again");
    let n: Option<u64> = c
        .query_first("SELECT COUNT(*) FROM t")
        .await
        .expect("count");
    assert_eq!(n, Some(5));
}

//! Read/write split over a primary and two replicas (checked on the
//! servers' own counters), read-your-writes with consistency = session,
//! and query rules that route, reject and count.

mod common;

use std::time::Duration;

use common::relay::app;
use common::routing::{counters, node, replicas_that_wrote, start_routing_relay};
use mysql_async::prelude::Queryable;
use sqlfleet_testkit::replicated;

async fn client(port: u16, db: &str) -> mysql_async::Conn {
    app(port, "app-pw", Some(db))
        .connect(Duration::from_secs(5))
        .await
        .expect("connect via relay")
}

/// Runs `n` one-value reads through the relay; returns how many SELECTs
/// each server (primary first) counted meanwhile.
async fn selects_during_reads(
    srv: &sqlfleet_testkit::TestServer,
    c: &mut mysql_async::Conn,
    sql: &str,
    n: usize,
) -> Vec<u64> {
    let before = counters(srv, "Com_select").await;
    for _ in 0..n {
        let _: Option<i64> = c
            .query_first(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    delta(&counters(srv, "Com_select").await, &before)
}

/// The tests share one sandbox and compare its counters: one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static M: std::sync::Mutex<()> = std::sync::Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

fn delta(after: &[u64], before: &[u64]) -> Vec<u64> {
    after.iter().zip(before).map(|(a, b)| a - b).collect()
}

#[test]
fn reads_go_to_replicas_and_writes_to_the_primary() {
    let _one = serial();
    let srv = replicated();
    let dir = tempfile::tempdir().expect("tmp");
    // Placement alone: without read-your-writes (the default, session,
    // adds a wait on the replica and a GTID read on the primary per write;
    // its own tests below).
    let relay = start_routing_relay(
        srv,
        dir.path(),
        "read_write_split = true\nconsistency = \"none\"\nhealth_interval = 2",
        "",
        "",
    );
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("split").await;
        let mut c = client(relay.port, &db).await;
        c.query_drop("CREATE TABLE t (id INT PRIMARY KEY)")
            .await
            .expect("create");
        let ins0 = counters(srv, "Com_insert").await;
        let sel0 = counters(srv, "Com_select").await;
        for i in 0..50 {
            c.query_drop(format!("INSERT INTO t VALUES ({i})"))
                .await
                .expect("insert");
        }
        for _ in 0..200 {
            let _: Option<i64> = c.query_first("SELECT COUNT(*) FROM t").await.expect("read");
        }
        let ins = delta(&counters(srv, "Com_insert").await, &ins0);
        let sel = delta(&counters(srv, "Com_select").await, &sel0);
        assert!(ins[0] >= 50, "inserts on the primary: {ins:?}");
        let on_replicas: u64 = sel[1..].iter().sum();
        assert!(on_replicas >= 200, "reads on replicas: {sel:?}");
        assert!(sel[0] < 20, "reads kept off the primary: {sel:?}");
        assert!(
            sel[1] > 0 && sel[2] > 0,
            "both replicas serve reads: {sel:?}"
        );

        // Inside a transaction everything goes to the primary.
        let sel0 = counters(srv, "Com_select").await;
        c.query_drop("BEGIN").await.expect("begin");
        for _ in 0..50 {
            let _: Option<i64> = c.query_first("SELECT COUNT(*) FROM t").await.expect("read");
        }
        c.query_drop("COMMIT").await.expect("commit");
        let sel = delta(&counters(srv, "Com_select").await, &sel0);
        assert!(sel[0] >= 50, "transaction reads on the primary: {sel:?}");
        // Locking reads too.
        let sel =
            selects_during_reads(srv, &mut c, "SELECT id FROM t WHERE id = 1 FOR UPDATE", 20).await;
        assert!(sel[0] >= 20, "FOR UPDATE on the primary: {sel:?}");
    });
}

/// Read-your-writes is what a split gives unless `none` is chosen: the
/// routing section here names no consistency.
#[test]
fn session_consistency_reads_its_own_writes() {
    let _one = serial();
    let srv = replicated();
    let dir = tempfile::tempdir().expect("tmp");
    let relay = start_routing_relay(
        srv,
        dir.path(),
        "read_write_split = true\nhealth_interval = 0.5",
        "",
        "",
    );
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("ryw").await;
        let mut c = client(relay.port, &db).await;
        c.query_drop("CREATE TABLE c (v INT PRIMARY KEY)")
            .await
            .expect("create");
        let sel0 = counters(srv, "Com_select").await;
        for i in 1..=200 {
            c.query_drop(format!("INSERT INTO c VALUES ({i})"))
                .await
                .expect("insert");
            let (max, n): (Option<i64>, i64) = c
                .query_first("SELECT MAX(v), COUNT(*) FROM c")
                .await
                .expect("read")
                .expect("row");
            assert_eq!((max, n), (Some(i), i), "read after write {i} was stale");
        }
        let sel = delta(&counters(srv, "Com_select").await, &sel0);
        assert!(
            sel[1] + sel[2] > 0,
            "some reads were served by replicas: {sel:?}"
        );
        // The write's GTID comes with its OK (session tracking): the relay
        // asks the primary nothing after a write (200 writes; the health
        // checks' few SELECTs meanwhile, every 0.5 s; one per write before),
        // and the client's ROW_COUNT() is its write's.
        let before = counters(srv, "Com_select").await;
        for i in 1..=200 {
            c.query_drop(format!("UPDATE c SET v = v WHERE v <= {i}"))
                .await
                .expect("update");
        }
        let asked = delta(&counters(srv, "Com_select").await, &before)[0];
        eprintln!("{asked} SELECTs on the primary during 200 writes");
        assert!(asked < 100, "{asked} SELECTs on the primary for 200 writes");
        c.query_drop("INSERT INTO c VALUES (1001), (1002)")
            .await
            .expect("insert 2");
        let n: Option<i64> = c.query_first("SELECT ROW_COUNT()").await.expect("rc");
        assert_eq!(n, Some(2), "the write's own count");
    });
    eprintln!(
        "consistency waits {}, fallbacks to the primary {}",
        relay.metric("sqlfleet_relay_consistency_waits_total"),
        relay.metric("sqlfleet_relay_consistency_fallbacks_total")
    );
}

#[test]
fn rules_route_reject_and_count() {
    let _one = serial();
    let srv = replicated();
    let dir = tempfile::tempdir().expect("tmp");
    let rules = r#"
[[rules]]
name = "no-deletes"
match_regex = "(?i)^\\s*DELETE\\s+FROM\\s+guarded"
reject = "deletes on guarded are not allowed"

[[rules]]
name = "fresh-reads"
match_digest = "SELECT COUNT(*) FROM fresh"
route = "primary"
"#;
    let relay = start_routing_relay(
        srv,
        dir.path(),
        "read_write_split = true\nhealth_interval = 2",
        "",
        rules,
    );
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("rules").await;
        let mut c = client(relay.port, &db).await;
        c.query_drop("CREATE TABLE guarded (id INT); CREATE TABLE fresh (id INT)")
            .await
            .expect("create");
        let e = c
            .query_drop("delete from guarded where id = 1")
            .await
            .expect_err("rejected");
        assert!(
            e.to_string().contains("deletes on guarded are not allowed"),
            "{e}"
        );
        let sel = selects_during_reads(srv, &mut c, "select count(*)   from fresh", 30).await;
        assert!(sel[0] >= 30, "rule sent them to the primary: {sel:?}");
        let st = relay.status();
        let hits: Vec<(String, u64)> = st["rules"]
            .as_array()
            .expect("rules")
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap_or_default().to_string(),
                    r["hits"].as_u64().unwrap_or(0),
                )
            })
            .collect();
        assert_eq!(
            hits,
            vec![
                ("no-deletes".to_string(), 1),
                ("fresh-reads".to_string(), 30)
            ]
        );
        let digests = st["digests"].as_array().expect("digests");
        assert!(
            digests
                .iter()
                .any(|d| d["digest"] == "select count (*) from fresh"
                    && d["count"] == 30
                    && d["rows"] == 30
                    && d["min_ms"].as_f64() <= d["avg_ms"].as_f64()
                    && d["avg_ms"].as_f64() <= d["max_ms"].as_f64()
                    && d["p99_ms"].as_f64() > Some(0.0)),
            "{digests:?}"
        );
        // A prepared statement meets the same rules, at each execute: a
        // reject cannot be passed by preparing, nor a route.
        let e = match c.prep("DELETE FROM guarded WHERE id = ?").await {
            Err(e) => e,
            Ok(st) => c.exec_drop(&st, (1,)).await.expect_err("rejected"),
        };
        assert!(
            e.to_string().contains("deletes on guarded are not allowed"),
            "prepared: {e}"
        );
        let fresh = c.prep("SELECT COUNT(*) FROM fresh").await.expect("prepare");
        let before = counters(srv, "Com_stmt_execute").await;
        for _ in 0..30 {
            let _: Option<i64> = c.exec_first(&fresh, ()).await.expect("execute");
        }
        let ran = delta(&counters(srv, "Com_stmt_execute").await, &before);
        assert!(
            ran[0] >= 30,
            "the rule sent the executes to the primary: {ran:?}"
        );
        assert_eq!(ran[1] + ran[2], 0, "none to a replica: {ran:?}");
        // Each execute counts in its digest's statistics, as a text run.
        let st = relay.status();
        let count = st["digests"]
            .as_array()
            .expect("digests")
            .iter()
            .find(|d| d["digest"] == "SELECT COUNT (*) FROM fresh")
            .map(|d| d["count"].clone());
        assert_eq!(count, Some(serde_json::json!(30)), "30 executes");
    });
}

#[test]
fn stopped_replication_takes_a_replica_out_and_weights_share_reads() {
    let _one = serial();
    let srv = replicated();
    let dir = tempfile::tempdir().expect("tmp");
    let rules = "[[rules]]\nname = \"sticky\"\nmatch_regex = \"sticky\"\nmultiplex = false\n";
    let relay = start_routing_relay(
        srv,
        dir.path(),
        "read_write_split = true\nhealth_interval = 0.2",
        "weights = [1, 1, 3]",
        rules,
    );
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("weights").await;
        let mut c = client(relay.port, &db).await;
        c.query_drop("CREATE TABLE w (id INT)")
            .await
            .expect("create");
        let sel = selects_during_reads(srv, &mut c, "SELECT COUNT(*) FROM w", 200).await;
        assert!(
            sel[2] > sel[1] * 3 / 2,
            "replica2 (weight 3) gets more reads: {sel:?}"
        );

        // replica2 stops applying: it gets no reads until it runs again.
        let r2 = srv.sandbox.meta.nodes[2].clone();
        let mut direct = srv
            .sandbox
            .target(&r2)
            .expect("target")
            .connect(Duration::from_secs(5))
            .await
            .expect("replica2");
        direct
            .query_drop("STOP SLAVE SQL_THREAD")
            .await
            .expect("stop");
        let t0 = std::time::Instant::now();
        while relay.status()["backends"][2]["replicating"] != false {
            assert!(t0.elapsed() < Duration::from_secs(10), "not noticed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let sel = selects_during_reads(srv, &mut c, "SELECT COUNT(*) FROM w", 100).await;
        assert!(
            sel[1] >= 100 && sel[2] < 10,
            "reads avoid the stopped replica: {sel:?}"
        );
        direct
            .query_drop("START SLAVE SQL_THREAD")
            .await
            .expect("start");

        // A rule that turns multiplexing off pins the client.
        let _: Option<String> = c.query_first("SELECT 'sticky'").await.expect("sticky");
        assert!(relay.metric("sqlfleet_relay_pins_total{reason=\"rule\"}") >= 1.0);
    });
}

#[test]
fn global_consistency_sees_other_clients_writes() {
    let _one = serial();
    let srv = replicated();
    let dir = tempfile::tempdir().expect("tmp");
    let relay = start_routing_relay(
        srv,
        dir.path(),
        "read_write_split = true\nconsistency = \"global\"\nhealth_interval = 0.5",
        "",
        "",
    );
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("global").await;
        // Another client writes straight to the primary, not through the relay.
        let mut writer = srv.connect().await;
        writer
            .query_drop(format!("CREATE TABLE `{db}`.g (v INT PRIMARY KEY)"))
            .await
            .expect("create");
        let mut c = client(relay.port, &db).await;
        let sel0 = counters(srv, "Com_select").await;
        for i in 1..=100 {
            writer
                .query_drop(format!("INSERT INTO `{db}`.g VALUES ({i})"))
                .await
                .expect("insert");
            let max: Option<i64> = c.query_first("SELECT MAX(v) FROM g").await.expect("read");
            assert_eq!(
                max,
                Some(i),
                "read after another client's write {i} was stale"
            );
        }
        let sel = delta(&counters(srv, "Com_select").await, &sel0);
        assert!(sel[1] + sel[2] >= 100, "the reads ran on replicas: {sel:?}");
    });
}

#[test]
fn a_named_replica_group_serves_only_what_rules_send_it() {
    let _one = serial();
    let srv = replicated();
    let dir = tempfile::tempdir().expect("tmp");
    let rules = "[[rules]]\nname = \"reports\"\nmatch_regex = \"(?i)/\\\\* report \\\\*/\"\nroute = \"replica\"\ngroup = \"reporting\"\n";
    let relay = start_routing_relay(
        srv,
        dir.path(),
        "read_write_split = true\nhealth_interval = 2",
        "groups = [\"\", \"\", \"reporting\"]",
        rules,
    );
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("groups").await;
        let mut c = client(relay.port, &db).await;
        c.query_drop("CREATE TABLE r (id INT)")
            .await
            .expect("create");
        let sel = selects_during_reads(srv, &mut c, "SELECT COUNT(*) FROM r", 50).await;
        assert!(
            sel[1] >= 50 && sel[2] < 5,
            "split reads skip the reporting group: {sel:?}"
        );
        let sel =
            selects_during_reads(srv, &mut c, "SELECT /* report */ COUNT(*) FROM r", 50).await;
        assert!(
            sel[2] >= 50 && sel[1] < 5,
            "reports go to the reporting group: {sel:?}"
        );
    });
}

/// Without read/write split, only the writable primary serves: replicas
/// stand by for failover. Before, the quick start spread statements over
/// all three servers, and root's writes (read_only does not stop SUPER)
/// landed on replicas under their own GTIDs and broke replication.
#[test]
fn without_split_only_the_primary_serves_and_replicas_stand_by() {
    let _one = serial();
    let srv = replicated();
    let dir = tempfile::tempdir().expect("tmp");
    let relay = start_routing_relay(srv, dir.path(), "health_interval = 2", "", "");
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("nosplit").await;
        let mut direct = srv.connect().await;
        let primary_id: Option<u32> = direct
            .query_first("SELECT @@server_id")
            .await
            .expect("server id");
        let _ = direct.disconnect().await;
        let mut c = client(relay.port, &db).await;
        c.query_drop("CREATE TABLE t (id INT PRIMARY KEY, sid INT NOT NULL)")
            .await
            .expect("create");
        for i in 0..30 {
            // Each statement on a fresh connection from the pool's view.
            let mut one = client(relay.port, &db).await;
            let sid: Option<u32> = one
                .query_first("SELECT @@session.server_id")
                .await
                .expect("read");
            assert_eq!(
                sid, primary_id,
                "statement {i} was answered by another server"
            );
            one.query_drop(format!("INSERT INTO t VALUES ({i}, @@server_id)"))
                .await
                .expect("insert");
            let _ = one.disconnect().await;
        }
        let _ = c.disconnect().await;
        // Every row was written on the primary (a row written on a replica
        // would be there alone, with its server id).
        for (i, n) in srv.sandbox.meta.nodes.iter().enumerate() {
            let t = srv.sandbox.target(n).expect("target");
            let mut node = t.connect(Duration::from_secs(5)).await.expect("node");
            let foreign: Option<i64> = node
                .query_first(format!(
                    "SELECT COUNT(*) FROM `{db}`.t WHERE sid <> {}",
                    primary_id.unwrap_or(0)
                ))
                .await
                .unwrap_or(Some(0));
            assert_eq!(foreign, Some(0), "node {i} holds rows written there");
            let _ = node.disconnect().await;
        }
    });
}

/// Read-your-writes in numbers: several clients each write a row and read
/// it straight back through the relay (SQLFLEET_CAUSAL_PAIRS pairs, 2000
/// by default; bench/causal.sh runs 20,000); no read misses its row, and
/// replicas serve reads all the while.
#[test]
fn read_your_writes_holds_over_many_pairs_from_several_clients() {
    let _one = serial();
    let srv = replicated();
    let dir = tempfile::tempdir().expect("tmp");
    let relay = start_routing_relay(
        srv,
        dir.path(),
        "read_write_split = true\nconsistency = \"session\"\nhealth_interval = 0.5",
        "",
        "",
    );
    let pairs: usize = std::env::var("SQLFLEET_CAUSAL_PAIRS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let primary = srv.sandbox.meta.primary().server_id;
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (misses, on_primary, reads) = rt.block_on(async {
        let (db, _) = srv.fresh_db("rywn").await;
        client(relay.port, &db)
            .await
            .query_drop("CREATE TABLE p (client INT, k INT, PRIMARY KEY (client, k))")
            .await
            .expect("create");
        let mut tasks = Vec::new();
        for cl in 0..4 {
            let (port, db) = (relay.port, db.clone());
            tasks.push(tokio::spawn(async move {
                let mut c = client(port, &db).await;
                let (mut misses, mut on_primary, mut reads) = (0, 0, 0);
                for k in 0..pairs / 4 {
                    c.query_drop(format!("INSERT INTO p VALUES ({cl}, {k})"))
                        .await
                        .expect("insert");
                    // (The session's server id says which server read:
                    // `@@port` reads the server itself, the primary's.)
                    let (id, n): (u32, u64) = c
                        .query_first(format!(
                            "SELECT @@session.server_id, COUNT(*) FROM p WHERE client = {cl} AND k = {k}"
                        ))
                        .await
                        .expect("read")
                        .expect("row");
                    reads += 1;
                    misses += usize::from(n != 1);
                    on_primary += usize::from(id == primary);
                }
                (misses, on_primary, reads)
            }));
        }
        let mut total = (0, 0, 0);
        for t in tasks {
            let (m, p, r) = t.await.expect("client");
            total = (total.0 + m, total.1 + p, total.2 + r);
        }
        total
    });
    eprintln!(
        "read-your-writes on primary + 2 replicas: {reads} write-then-read pairs, {misses} misses, \
         {on_primary} reads on the primary (consistency waits {}, fallbacks {})",
        relay.metric("sqlfleet_relay_consistency_waits_total"),
        relay.metric("sqlfleet_relay_consistency_fallbacks_total")
    );
    assert_eq!(misses, 0, "reads missed the client's own write");
    assert!(on_primary < reads, "no read was served by a replica");
}

/// A session whose text the server reads in another dialect —
/// NO_BACKSLASH_ESCAPES, ANSI_QUOTES, a client character set whose
/// characters can end in `\` (sjis) — has it read the same way by the
/// relay: `SELECT 'a\'; INSERT ...; -- '` under NO_BACKSLASH_ESCAPES is a
/// read and a write, and the write runs on the primary. Before, the relay
/// read one string, took the text for a read, and sent it to a replica,
/// where the INSERT ran (the primary never had the row).
#[test]
fn a_write_hidden_from_the_default_dialect_runs_on_the_primary() {
    let _one = serial();
    let srv = replicated();
    let dir = tempfile::tempdir().expect("tmp");
    let relay = start_routing_relay(
        srv,
        dir.path(),
        "read_write_split = true\nconsistency = \"none\"\nhealth_interval = 0.5",
        "",
        "",
    );
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("dialect").await;
        let mut admin = srv.connect().await;
        admin
            .query_drop(format!("CREATE TABLE `{db}`.t (id INT PRIMARY KEY)"))
            .await
            .expect("create");
        // Until the relay's first health checks have read the global
        // sql_mode (a client before that is read the careful way).
        tokio::time::sleep(Duration::from_secs(2)).await;
        let cases: [(&str, &[u8]); 3] = [
            (
                "SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'",
                b"SELECT 'a\\'; INSERT INTO t VALUES (1); -- '",
            ),
            (
                "SET SESSION sql_mode = 'ANSI_QUOTES'",
                b"SELECT 1 AS \"a\\\"; INSERT INTO t VALUES (2); -- \"",
            ),
            // 0x95 0x5C is one sjis character.
            (
                "SET NAMES sjis",
                b"SELECT '\x95\x5c'; INSERT INTO t VALUES (3); -- '",
            ),
        ];
        for (i, (set, text)) in cases.iter().enumerate() {
            let mut c = client(relay.port, &db).await;
            c.query_drop(*set).await.expect("set");
            c.query_drop(*text)
                .await
                .unwrap_or_else(|e| panic!("{set}: {e}"));
            let _ = c.disconnect().await;
            let on_primary: Option<i64> = admin
                .query_first(format!(
                    "SELECT COUNT(*) FROM `{db}`.t WHERE id = {}",
                    i + 1
                ))
                .await
                .expect("primary");
            assert_eq!(
                on_primary,
                Some(1),
                "{set}: the INSERT did not run on the primary"
            );
        }
    });
}

/// Under autocommit=0 (what MySQLdb, JDBC's setAutoCommit(false) and
/// mysql_autocommit(0) give a session) a read opens a transaction, and
/// the client's writes after it run in that transaction: every one of
/// them on the primary, none on a replica (where the shared account's
/// writes would pass read_only and break replication) — after a read
/// that answered, after one that failed, and with a rule that sends
/// reads to replicas. Checked on the servers' own counters.
#[test]
fn under_autocommit_off_a_transaction_that_starts_with_a_read_stays_on_the_primary() {
    let _one = serial();
    let srv = replicated();
    let dir = tempfile::tempdir().expect("tmp");
    let rule = "[[rules]]\nname = \"reads-away\"\nmatch_regex = \"(?i)^\\\\s*SELECT\"\nroute = \"replica\"\n";
    let rt = tokio::runtime::Runtime::new().expect("rt");
    for (what, extra) in [
        ("the split", ""),
        ("a rule sending reads to replicas", rule),
    ] {
        let relay = start_routing_relay(
            srv,
            dir.path(),
            "read_write_split = true\nconsistency = \"none\"\nhealth_interval = 2",
            "",
            extra,
        );
        rt.block_on(async {
            let (db, _) = srv.fresh_db("autocommit_off").await;
            let mut admin = srv.connect().await;
            admin
                .query_drop(format!("CREATE TABLE `{db}`.t (id INT PRIMARY KEY)"))
                .await
                .expect("create");
            let mut c = client(relay.port, &db).await;
            c.query_drop("SET autocommit = 0")
                .await
                .expect("autocommit");
            for i in 0..5 {
                let _: Option<i64> = c.query_first("SELECT COUNT(*) FROM t").await.expect("read");
                c.query_drop(format!("INSERT INTO t VALUES ({i})"))
                    .await
                    .expect("insert");
                c.query_drop("COMMIT").await.expect("commit");
            }
            c.query_drop("SELECT * FROM missing WHERE 1 = 0")
                .await
                .expect_err("no such table");
            c.query_drop("INSERT INTO t VALUES (100)")
                .await
                .expect("insert after a failed read");
            c.query_drop("COMMIT").await.expect("commit");
            let _ = c.disconnect().await;
            // A transaction a replica ran itself is in its binlog under its
            // own server id (and stops its replication, strict mode).
            let wrote = replicas_that_wrote(srv).await;
            assert!(
                wrote.is_empty(),
                "{what}: replicas wrote on their own: {wrote:?}"
            );
            let n: Option<i64> = admin
                .query_first(format!("SELECT COUNT(*) FROM `{db}`.t"))
                .await
                .expect("count");
            assert_eq!(n, Some(6), "{what}: rows on the primary");
        });
    }
}

/// Sets @@global.autocommit on the nodes whose index is in `nodes`.
async fn global_autocommit(srv: &sqlfleet_testkit::TestServer, nodes: &[usize], on: bool) {
    for &i in nodes {
        let mut c = node(srv, i).await;
        c.query_drop(format!("SET GLOBAL autocommit = {}", u8::from(on)))
            .await
            .expect("set global");
        let _ = c.disconnect().await;
    }
}

/// Sessions that start with autocommit off (@@global.autocommit = 0, as
/// some servers are configured): on every backend, a client's reads stay
/// on the primary from its first statement (the health check reads what
/// a new session starts with), and its writes with them; on the replicas
/// only, a read that opened a transaction there keeps anything but reads,
/// COMMIT and ROLLBACK from running in it (1792, said why) — never a
/// write on a replica.
#[test]
fn sessions_that_start_with_autocommit_off_never_write_on_a_replica() {
    let _one = serial();
    let srv = replicated();
    let dir = tempfile::tempdir().expect("tmp");
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("fresh_autocommit"));
    rt.block_on(async {
        let mut admin = srv.connect().await;
        admin
            .query_drop(format!("CREATE TABLE `{db}`.t (id INT PRIMARY KEY)"))
            .await
            .expect("create");
        global_autocommit(srv, &[0, 1, 2], false).await;
    });
    let routing = "read_write_split = true\nconsistency = \"none\"\nhealth_interval = 0.3";
    let relay = start_routing_relay(srv, dir.path(), routing, "", "");
    let everywhere_off = rt.block_on(async {
        let mut c = client(relay.port, &db).await;
        for _ in 0..3 {
            let _: Option<i64> = c.query_first("SELECT COUNT(*) FROM t").await.expect("read");
        }
        c.query_drop("INSERT INTO t VALUES (1)")
            .await
            .expect("insert");
        c.query_drop("COMMIT").await.expect("commit");
        let _ = c.disconnect().await;
        let everywhere_off = replicas_that_wrote(srv).await;
        // Only the replicas: the primary's sessions autocommit (a relay
        // whose pooled connections are made now).
        global_autocommit(srv, &[0], true).await;
        everywhere_off
    });
    drop(relay);
    let relay = start_routing_relay(srv, dir.path(), routing, "", "");
    let outcome = rt.block_on(async {
        let primary: u32 = srv
            .connect()
            .await
            .query_first("SELECT @@server_id")
            .await
            .expect("id")
            .expect("row");
        let mut c = client(relay.port, &db).await;
        // (A session found with autocommit on, where a new connection to
        // a replica would start with it off, keeps its connection: its
        // reads stay on the primary.)
        let mut read_on = Vec::new();
        for _ in 0..4 {
            let id: Option<u32> = c
                .query_first("SELECT @@session.server_id")
                .await
                .expect("read");
            read_on.push(id != Some(primary));
        }
        let insert = c.query_drop("INSERT INTO t VALUES (2)").await;
        c.query_drop("COMMIT").await.expect("commit");
        let _ = c.disconnect().await;
        global_autocommit(srv, &[1, 2], true).await;
        let on_primary: Option<i64> = srv
            .connect()
            .await
            .query_first(format!("SELECT COUNT(*) FROM `{db}`.t WHERE id = 2"))
            .await
            .expect("count");
        (
            everywhere_off,
            (read_on, insert, on_primary),
            replicas_that_wrote(srv).await,
        )
    });
    let (everywhere_off, (read_on, insert, on_primary), wrote) = outcome;
    assert!(
        everywhere_off.is_empty(),
        "autocommit off everywhere: {everywhere_off:?}"
    );
    // The write runs on the primary, or (its session held on a replica by
    // a read that opened a transaction there) is refused in words.
    match insert {
        Ok(()) => assert_eq!(on_primary, Some(1), "the INSERT on the primary"),
        Err(mysql_async::Error::Server(e)) => assert!(
            e.code == 1792 && e.message.contains("only reads, COMMIT and ROLLBACK"),
            "{e:?} (reads on a replica: {read_on:?})"
        ),
        Err(e) => panic!("{e}"),
    }
    assert!(
        wrote.is_empty(),
        "autocommit off on the replicas: {wrote:?}"
    );
}

/// A session on the one backend (or the primary), held there by a
/// temporary table, when the server turns read_only under it: the relay
/// took the server for a replica and refused the session's next
/// statement as a write on a replica read (1792, "held on the replica by
/// what a read opened there") — no read had taken it there. Found by the
/// server's own `main.read_only_innodb` through a per-user relay, when
/// the health check ran between its `SET GLOBAL read_only = 1` and its
/// user's `CREATE TEMPORARY TABLE tt2 LIKE t1`. The server answers for
/// itself now (root's temporary tables pass read_only).
///
/// So must a session that begins while the relay sees the server
/// read_only (a client's first lease then was taken for a replica read:
/// in session mode every write of that session was refused, in
/// transaction mode every write while it held that connection (a
/// temporary table, a transaction) — CI's
/// mysql-test run through a per-user relay lost the tests that began in
/// that window). Both modes.
#[test]
fn a_session_held_on_a_server_that_turns_read_only_is_no_replica_read() {
    let srv = sqlfleet_testkit::server_with(&[]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("turns_read_only"));
    for mode in ["transaction", "session"] {
        let relay = common::relay::start_relay(
            &srv,
            &["--mode", mode, "--toml", "[routing]\nhealth_interval = 0.2"],
        );
        rt.block_on(async {
            let mut admin = srv.connect().await;
            admin
                .query_drop(format!("CREATE TABLE IF NOT EXISTS `{db}`.t (a INT)"))
                .await
                .expect("table");
            // (The backend account is root: its temporary tables and
            // writes pass read_only.)
            let mut c = client(relay.port, &db).await;
            c.query_drop("CREATE TEMPORARY TABLE tt1 (a INT)")
                .await
                .expect("tt1");
            admin
                .query_drop("SET GLOBAL read_only = 1")
                .await
                .expect("read_only");
            let t0 = std::time::Instant::now();
            while !relay
                .page("/status")
                .replace([' ', '\n'], "")
                .contains("\"read_only\":true")
            {
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "{}",
                    relay.page("/status")
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let like = c.query_drop("CREATE TEMPORARY TABLE tt2 LIKE t").await;
            let insert = c.query_drop("INSERT INTO tt1 VALUES (1)").await;
            // A session that begins now: a read first (its lease), then
            // writes, alone and in a transaction.
            let mut late = client(relay.port, &db).await;
            let mut late_said = Vec::new();
            for sql in [
                "SELECT 1",
                "CREATE TEMPORARY TABLE tt3 (a INT)",
                "INSERT INTO tt3 VALUES (1)",
                "BEGIN",
                "SELECT COUNT(*) FROM t",
                "INSERT INTO t VALUES (1)",
                "COMMIT",
            ] {
                if let Err(e) = late.query_drop(sql).await {
                    late_said.push(format!("{sql}: {e}"));
                }
            }
            admin
                .query_drop("SET GLOBAL read_only = 0")
                .await
                .expect("read_only off");
            like.unwrap_or_else(|e| {
                panic!(
                    "{mode}: CREATE TEMPORARY TABLE ... LIKE on the server turned read_only: {e}"
                )
            });
            insert.unwrap_or_else(|e| {
                panic!("{mode}: INSERT into the session's temporary table: {e}")
            });
            assert!(
                late_said.is_empty(),
                "{mode}: a session begun while the server was read_only: {late_said:?}"
            );
        });
    }
}

/// A read of the server itself is the primary's to answer, as the SHOW
/// statements of the same facts are: a replica has its own variables,
/// user locks and threads. Drawn from the server's own space: every
/// variable `information_schema.SYSTEM_VARIABLES` lists with a global
/// scope, read through the split relay as `@@global.name` and as `@@name`,
/// must answer what the primary answers directly (before the rule: the
/// answer of a replica, `read_only` 1 where `SHOW GLOBAL VARIABLES` said
/// OFF); so must a lock another session holds on the primary
/// (`IS_FREE_LOCK`, `IS_USED_LOCK`) and that session's row in
/// information_schema's PROCESSLIST, also with information_schema as the
/// default database. Reads of data and of the session's own variables
/// still go to the replicas.
#[test]
fn a_read_of_the_servers_own_state_is_the_primarys() {
    let _one = serial();
    let srv = replicated();
    let dir = tempfile::tempdir().expect("tmp");
    let relay = start_routing_relay(
        srv,
        dir.path(),
        "read_write_split = true\nconsistency = \"none\"\nhealth_interval = 2",
        "",
        "",
    );
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("own_state").await;
        let mut primary = node(srv, 0).await;
        let mut replica = node(srv, 1).await;
        let names: Vec<String> = primary
            .query(
                "SELECT LOWER(VARIABLE_NAME) FROM information_schema.SYSTEM_VARIABLES \
                 WHERE VARIABLE_SCOPE = 'GLOBAL' ORDER BY 1",
            )
            .await
            .expect("variables");
        assert!(names.len() > 100, "global-only variables: {}", names.len());
        // A value or the error a read gets, as text.
        async fn read(c: &mut mysql_async::Conn, sql: &str) -> String {
            match c.query_first::<Option<String>, _>(sql).await {
                Ok(v) => format!("{v:?}"),
                Err(e) => format!("error {e}"),
            }
        }
        let mut c = client(relay.port, &db).await;
        let (mut differ_on_replica, mut wrong) = (Vec::new(), Vec::new());
        for n in &names {
            for sql in [format!("SELECT @@global.{n}"), format!("SELECT @@{n}")] {
                let want = read(&mut primary, &sql).await;
                let got = read(&mut c, &sql).await;
                // (A value that moves on its own between two reads of the
                // primary is not compared.)
                if want != read(&mut primary, &sql).await {
                    continue;
                }
                if read(&mut replica, &sql).await != want {
                    differ_on_replica.push(n.clone());
                }
                if got != want {
                    wrong.push(format!("{sql}: relay {got}, primary {want}"));
                }
            }
        }
        assert!(
            differ_on_replica.iter().any(|n| n == "read_only")
                && differ_on_replica.iter().any(|n| n == "port"),
            "a replica answers these differently, so a read sent there shows: {differ_on_replica:?}"
        );
        assert!(
            wrong.is_empty(),
            "{} reads of {} variables answered elsewhere than on the primary:\n{}",
            wrong.len(),
            names.len(),
            wrong.join("\n")
        );

        // A user lock and a thread of another session on the primary.
        let mut holder = node(srv, 0).await;
        let got: Option<i64> = holder
            .query_first("SELECT GET_LOCK('sqlfleet_own_state', 10)")
            .await
            .expect("lock");
        assert_eq!(got, Some(1));
        let holder_id: u64 = holder
            .query_first("SELECT CONNECTION_ID()")
            .await
            .expect("id")
            .expect("id");
        let free: Option<i64> = c
            .query_first("SELECT IS_FREE_LOCK('sqlfleet_own_state')")
            .await
            .expect("is_free_lock");
        assert_eq!(free, Some(0), "IS_FREE_LOCK of a lock held on the primary");
        let used: Option<u64> = c
            .query_first("SELECT IS_USED_LOCK('sqlfleet_own_state')")
            .await
            .expect("is_used_lock");
        assert_eq!(
            used,
            Some(holder_id),
            "IS_USED_LOCK names the primary's session"
        );
        let seen =
            format!("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = {holder_id}");
        let n: Option<i64> = c.query_first(&seen).await.expect("processlist");
        assert_eq!(n, Some(1), "the primary's session in PROCESSLIST");
        let mut in_is = client(relay.port, "information_schema").await;
        let n: Option<i64> = in_is
            .query_first(format!(
                "SELECT COUNT(*) FROM PROCESSLIST WHERE ID = {holder_id}"
            ))
            .await
            .expect("processlist");
        assert_eq!(
            n,
            Some(1),
            "the primary's session in PROCESSLIST, information_schema the default database"
        );
        // Under ANSI_QUOTES, the schema's name in double quotes.
        let mut ansi = client(relay.port, &db).await;
        ansi.query_drop("SET SESSION sql_mode = 'ANSI_QUOTES'")
            .await
            .expect("sql_mode");
        let n: Option<i64> = ansi
            .query_first(format!(
                "SELECT COUNT(*) FROM \"information_schema\".\"PROCESSLIST\" WHERE ID = {holder_id}"
            ))
            .await
            .expect("processlist under ANSI_QUOTES");
        assert_eq!(
            n,
            Some(1),
            "the primary's session in PROCESSLIST named in double quotes under ANSI_QUOTES"
        );

        // The same reads through views (a view of a view too): the view's
        // definition reads the server, so the statement does.
        for sql in [
            "CREATE VIEW v_lock AS SELECT IS_FREE_LOCK('sqlfleet_own_state') AS f, \
             IS_USED_LOCK('sqlfleet_own_state') AS u",
            "CREATE VIEW v_threads AS SELECT ID FROM information_schema.PROCESSLIST",
            "CREATE VIEW v_over AS SELECT ID FROM v_threads",
        ] {
            c.query_drop(sql).await.expect(sql);
        }
        wait_on_replicas(srv, &db, "v_over").await;
        for _ in 0..10 {
            let (free, used): (Option<i64>, Option<u64>) = c
                .query_first("SELECT f, u FROM v_lock")
                .await
                .expect("v_lock")
                .expect("a row");
            assert_eq!(
                (free, used),
                (Some(0), Some(holder_id)),
                "a view of the lock's state held on the primary"
            );
            for v in ["v_threads", "v_over"] {
                let n: Option<i64> = c
                    .query_first(format!("SELECT COUNT(*) FROM {v} WHERE ID = {holder_id}"))
                    .await
                    .expect("view of PROCESSLIST");
                assert_eq!(n, Some(1), "the primary's session in {v}");
            }
        }
        let _ = holder
            .query_drop("DO RELEASE_LOCK('sqlfleet_own_state')")
            .await;

        // Data and the session's own variables stay the replicas'.
        c.query_drop("CREATE TABLE t (id INT PRIMARY KEY)")
            .await
            .expect("create");
        c.query_drop("CREATE VIEW v_data AS SELECT id FROM t")
            .await
            .expect("create view");
        wait_on_replicas(srv, &db, "t").await;
        wait_on_replicas(srv, &db, "v_data").await;
        for sql in [
            "SELECT COUNT(*) FROM t",
            "SELECT COUNT(*) FROM v_data",
            "SELECT LENGTH(@@session.sql_mode)",
        ] {
            let sel = selects_during_reads(srv, &mut c, sql, 40).await;
            let on_replicas: u64 = sel[1..].iter().sum();
            assert!(on_replicas >= 40, "{sql} on the replicas: {sel:?}");
        }
        // So do an ANSI_QUOTES session's (its PROCESSLIST read above kept
        // to the primary by the rule, not by its dialect).
        let sql = "SELECT COUNT(*) FROM \"t\"";
        let sel = selects_during_reads(srv, &mut ansi, sql, 40).await;
        let on_replicas: u64 = sel[1..].iter().sum();
        assert!(
            on_replicas >= 40,
            "{sql} under ANSI_QUOTES on the replicas: {sel:?}"
        );
    });
}

/// Waits until table or view `name` of `db` is on both replicas of `srv`.
async fn wait_on_replicas(srv: &sqlfleet_testkit::TestServer, db: &str, name: &str) {
    for i in [1, 2] {
        let mut r = node(srv, i).await;
        let t0 = std::time::Instant::now();
        while r
            .query_first::<u64, _>(format!(
                "SELECT COUNT(*) FROM information_schema.TABLES \
                 WHERE TABLE_SCHEMA = '{db}' AND TABLE_NAME = '{name}'"
            ))
            .await
            .expect("tables")
            != Some(1)
        {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "{name} never reached replica {i}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A value for `name` unlike `now` that a read shows (None: a variable
/// no session can set, or one this server lacks).
fn another_value(name: &str, now: &str) -> Option<&'static str> {
    let pick =
        |a: &'static str, b: &'static str| Some(if now.eq_ignore_ascii_case(a) { b } else { a });
    match name {
        "time_zone" => pick("+05:00", "+06:00"),
        "default_regex_flags" => pick("DOTALL", "EXTENDED"),
        "default_week_format" => pick("3", "5"),
        "div_precision_increment" => pick("8", "9"),
        "group_concat_max_len" => pick("5", "6"),
        "lc_time_names" => pick("de_DE", "fr_FR"),
        "max_recursive_iterations" => pick("5", "6"),
        "max_sort_length" => pick("8", "9"),
        "old" => pick("ON", "OFF"),
        "old_mode" => pick("ZERO_DATE_TIME_CAST", "NO_PROGRESS_INFO"),
        "sql_auto_is_null" => pick("ON", "OFF"),
        "sql_mode" => pick("PIPES_AS_CONCAT", "ANSI_QUOTES"),
        "sql_select_limit" => pick("5", "6"),
        "standard_compliant_cte" => pick("OFF", "ON"),
        "system_versioning_asof" => {
            pick("2001-01-01 00:00:00.000000", "2002-01-01 00:00:00.000000")
        }
        "tx_isolation" | "transaction_isolation" => pick("READ-UNCOMMITTED", "SERIALIZABLE"),
        "character_set_collations" => pick("utf8mb4=utf8mb4_bin", "utf8mb4=utf8mb4_general_ci"),
        "block_encryption_mode" => pick("aes-256-cbc", "aes-128-cbc"),
        // (root, the relay's account here, skips it: the judgement is
        // what matters.)
        "init_connect" => pick("SET @sqlfleet_probe = 1", "SET @sqlfleet_probe = 2"),
        // Read-only: stands behind time_zone = SYSTEM.
        "system_time_zone" => None,
        other => panic!("{other}: a setting of READ_DEFAULTS without a value to try here"),
    }
}

/// Session variables the server lists whose global, when a replica's
/// differs from the primary's, does not change the value a read returns
/// (the rest is `routing::defaults::READ_DEFAULTS`): by prefix, then by
/// name, each group with why.
const NO_READ_VALUE_PREFIXES: &[&str] = &[
    // Plans, costs and statistics: the same answer by another way.
    "optimizer_",
    "histogram_",
    "analyze_",
    // Logs, diagnostics kept for SHOW, the relay's own tracking.
    "log_",
    "session_track_",
    // What writes and DDL do, and how they are logged.
    "binlog_",
    "column_compression_",
    "innodb_",
    "aria_",
    "myisam_",
    // Galera's replication of writes; the relay reads a node's state.
    "wsrep_",
    // Lock waits and deadlock searches: a wait, or an error.
    "deadlock_",
    "idle_",
    // The query cache keeps the same answers.
    "query_cache_",
];

const NO_READ_VALUE: &[&str] = &[
    // Set by the client's handshake, or by its default database.
    "autocommit",
    "character_set_client",
    "character_set_connection",
    "character_set_results",
    "collation_connection",
    "character_set_database",
    "collation_database",
    // File names (LOAD_FILE reads the primary's).
    "character_set_filesystem",
    // What writes and DDL do, and where they are logged.
    "alter_algorithm",
    "auto_increment_increment",
    "auto_increment_offset",
    "bulk_insert_buffer_size",
    "character_set_server",
    "collation_server",
    "check_constraint_checks",
    "completion_type",
    "default_storage_engine",
    "default_tmp_storage_engine",
    "enforce_storage_engine",
    "explicit_defaults_for_timestamp",
    "foreign_key_checks",
    "gtid_domain_id",
    "keep_files_on_create",
    "low_priority_updates",
    "max_delayed_threads",
    "max_insert_delayed_threads",
    "max_relay_log_size",
    "old_alter_table",
    "old_passwords",
    "server_id",
    "sql_if_exists",
    "sql_log_bin",
    "sql_safe_updates",
    "sql_slave_skip_counter",
    "storage_engine",
    "system_versioning_alter_history",
    "system_versioning_insert_history",
    "tx_read_only",
    "transaction_read_only",
    "unique_checks",
    "updatable_views_with_limit",
    "use_stat_tables",
    // Memory, buffers and plans: the same answer at another cost.
    "big_tables",
    "eq_range_index_dive_limit",
    "expensive_subquery_limit",
    "in_predicate_conversion_threshold",
    "join_buffer_size",
    "join_buffer_space_limit",
    "join_cache_level",
    "max_heap_table_size",
    "max_length_for_sort_data",
    "max_rowid_filter_size",
    "max_seeks_for_key",
    "mrr_buffer_size",
    "net_buffer_length",
    "preload_buffer_size",
    "query_alloc_block_size",
    "query_prealloc_size",
    "range_alloc_block_size",
    "read_buffer_size",
    "read_rnd_buffer_size",
    "rowid_merge_buff_size",
    "sort_buffer_size",
    "sql_buffer_result",
    "tcp_nodelay",
    "thread_pool_priority",
    "tmp_disk_table_size",
    "tmp_memory_table_size",
    "tmp_table_size",
    "transaction_alloc_block_size",
    "transaction_prealloc_size",
    // Limits that fail a read with an error (loud, never another answer),
    // and timeouts.
    "interactive_timeout",
    "lock_wait_timeout",
    "max_allowed_packet",
    "max_join_size",
    "max_session_mem_used",
    "max_sp_recursion_depth",
    "max_statement_time",
    "max_tmp_tables",
    "max_user_connections",
    "net_read_timeout",
    "net_retry_count",
    "net_write_timeout",
    "sql_big_selects",
    "wait_timeout",
    // Where the server tells a client to reconnect (11.4): no read's value.
    "redirect_url",
    // Diagnostics: warnings, notes, error texts, the slow log, profiles,
    // progress reports.
    "lc_messages",
    "long_query_time",
    "max_error_count",
    "min_examined_row_limit",
    "note_verbosity",
    "profiling",
    "profiling_history_size",
    "progress_report_time",
    "slow_query_log",
    "sql_log_off",
    "sql_notes",
    "sql_quote_show_create",
    "sql_warnings",
];

/// Every session variable the server lists is placed: one of
/// READ_DEFAULTS (a replica whose global differs gets no reads) or of the
/// lists above (its difference changes no read's value). A variable a new
/// server adds fails this until it is placed.
#[test]
fn every_session_variable_the_server_lists_is_placed_for_reads() {
    let srv = replicated();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let names: Vec<String> = rt.block_on(async {
        srv.connect()
            .await
            .query(
                "SELECT LOWER(VARIABLE_NAME) FROM information_schema.SYSTEM_VARIABLES \
                 WHERE VARIABLE_SCOPE = 'SESSION' ORDER BY 1",
            )
            .await
            .expect("variables")
    });
    assert!(names.len() > 150, "{}", names.len());
    let read = sqlfleet_relay::READ_DEFAULTS;
    let unplaced: Vec<&String> = names
        .iter()
        .filter(|n| {
            !read.contains(&n.as_str())
                && !NO_READ_VALUE.contains(&n.as_str())
                && !NO_READ_VALUE_PREFIXES.iter().any(|p| n.starts_with(p))
        })
        .collect();
    assert!(
        unplaced.is_empty(),
        "session variables neither in READ_DEFAULTS nor said to change no read's value: {unplaced:?}"
    );
    let both: Vec<&&str> = read
        .iter()
        .filter(|n| {
            NO_READ_VALUE.contains(n) || NO_READ_VALUE_PREFIXES.iter().any(|p| n.starts_with(p))
        })
        .collect();
    assert!(both.is_empty(), "placed twice: {both:?}");
}

/// A replica whose new sessions read with another setting than the
/// primary's — each of READ_DEFAULTS the server has, set on one replica —
/// gets no reads until it matches again: every read through the split
/// answers as on the primary (before: `FROM_UNIXTIME(0)` read `05:00:00`
/// there with time_zone +05:00, `1/3` eight decimals with
/// div_precision_increment 8), the other replica serves them, and
/// `/status` says why.
#[test]
fn a_replica_whose_sessions_read_otherwise_gets_no_reads() {
    let _one = serial();
    let srv = replicated();
    let dir = tempfile::tempdir().expect("tmp");
    let relay = start_routing_relay(
        srv,
        dir.path(),
        "read_write_split = true\nconsistency = \"none\"\nhealth_interval = 0.2",
        "",
        "",
    );
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("defaults").await;
        let mut primary = node(srv, 0).await;
        let mut replica = node(srv, 1).await;
        let addr = format!("127.0.0.1:{}", srv.sandbox.meta.nodes[1].port);
        let field = "reads_unlike_primary";
        let mut c = client(relay.port, &db).await;
        let probe = "SELECT CONCAT_WS('|', FROM_UNIXTIME(0), 1/3, DATE_FORMAT('2001-01-01', '%M'))";
        let want: Option<String> = primary.query_first(probe).await.expect("probe");
        let mut tried = 0;
        for name in sqlfleet_relay::READ_DEFAULTS {
            let now: Option<String> = replica
                .query_first(format!(
                    "SELECT GLOBAL_VALUE FROM information_schema.SYSTEM_VARIABLES WHERE VARIABLE_NAME = '{name}'"
                ))
                .await
                .expect("global");
            let Some(now) = now else { continue };
            let Some(value) = another_value(name, &now) else { continue };
            // (Numbers bare: a quoted one is refused for a numeric
            // variable; and DEFAULT, system_versioning_asof's.)
            let lit = |v: &str| {
                if v.parse::<f64>().is_ok() || v == "DEFAULT" {
                    v.to_string()
                } else {
                    format!("'{}'", v.replace('\'', "''"))
                }
            };
            replica
                .query_drop(format!("SET GLOBAL {name} = {}", lit(value)))
                .await
                .unwrap_or_else(|e| panic!("SET GLOBAL {name} = '{value}': {e}"));
            relay.wait_backend_says(&addr, field, true);
            let why = relay.backend_says(&addr, field).unwrap_or_default();
            assert!(why.contains(name), "{name}: {why}");
            let withheld = format!(
                "sqlfleet_relay_backend_reads_withheld{{backend=\"{addr}\",reason=\"settings\"}}"
            );
            assert_eq!(relay.metric(&withheld), 1.0, "{name}: {withheld}");
            let before = counters(srv, "Com_select").await;
            for _ in 0..20 {
                let got: Option<String> = c.query_first(probe).await.expect("read");
                assert_eq!(got, want, "{name} = {value} on a replica: a read answered otherwise");
            }
            let sel = delta(&counters(srv, "Com_select").await, &before);
            assert!(sel[1] == 0 && sel[2] >= 20, "{name}: reads by server {sel:?}");
            replica
                .query_drop(format!("SET GLOBAL {name} = {}", lit(&now)))
                .await
                .unwrap_or_else(|e| panic!("{name} back to {now}: {e}"));
            relay.wait_backend_says(&addr, field, false);
            assert_eq!(relay.metric(&withheld), 0.0, "{name}: {withheld} after");
            tried += 1;
        }
        assert!(tried >= 15, "settings tried: {tried}");
        // Matching again, it serves reads.
        let sel = selects_during_reads(srv, &mut c, "SELECT 1", 60).await;
        assert!(sel[1] > 0, "the replica serves reads again: {sel:?}");
    });
    // A difference the operator names as meant keeps the replica reading.
    drop(relay);
    let relay = start_routing_relay(
        srv,
        dir.path(),
        "read_write_split = true\nconsistency = \"none\"\nhealth_interval = 0.2\n\
         settings_may_differ = [\"time_zone\"]",
        "",
        "",
    );
    rt.block_on(async {
        let (db, _) = srv.fresh_db("defaults_meant").await;
        let mut replica = node(srv, 1).await;
        replica
            .query_drop("SET GLOBAL time_zone = '+05:00'")
            .await
            .expect("time_zone");
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut c = client(relay.port, &db).await;
        let sel = selects_during_reads(srv, &mut c, "SELECT 1", 60).await;
        let status = relay.status();
        replica
            .query_drop("SET GLOBAL time_zone = SYSTEM")
            .await
            .expect("time_zone back");
        assert!(
            sel[1] > 0,
            "a replica whose difference is meant serves reads: {sel:?}"
        );
        assert!(
            status["backends"]
                .as_array()
                .is_some_and(|a| a.iter().all(|b| b["reads_unlike_primary"].is_null())),
            "{status}"
        );
    });
}

/// How to give a replica the filter a SHOW SLAVE STATUS column shows, and
/// how to take it off (replication stopped around both); None for a
/// column this test does not know (which fails it: a new server's filter
/// must be placed here).
fn filter_statements(column: &str) -> Option<(&'static str, &'static str)> {
    Some(match column {
        "Replicate_Do_DB" => (
            "SET GLOBAL replicate_do_db = 'x'",
            "SET GLOBAL replicate_do_db = ''",
        ),
        "Replicate_Ignore_DB" => (
            "SET GLOBAL replicate_ignore_db = 'x'",
            "SET GLOBAL replicate_ignore_db = ''",
        ),
        "Replicate_Do_Table" => (
            "SET GLOBAL replicate_do_table = 'x.t'",
            "SET GLOBAL replicate_do_table = ''",
        ),
        "Replicate_Ignore_Table" => (
            "SET GLOBAL replicate_ignore_table = 'x.t'",
            "SET GLOBAL replicate_ignore_table = ''",
        ),
        "Replicate_Wild_Do_Table" => (
            "SET GLOBAL replicate_wild_do_table = 'x.%'",
            "SET GLOBAL replicate_wild_do_table = ''",
        ),
        "Replicate_Wild_Ignore_Table" => (
            "SET GLOBAL replicate_wild_ignore_table = 'x.%'",
            "SET GLOBAL replicate_wild_ignore_table = ''",
        ),
        "Replicate_Rewrite_DB" => (
            "SET GLOBAL replicate_rewrite_db = 'x->y'",
            "SET GLOBAL replicate_rewrite_db = ''",
        ),
        "Replicate_Ignore_Server_Ids" => (
            "CHANGE MASTER TO IGNORE_SERVER_IDS = (99)",
            "CHANGE MASTER TO IGNORE_SERVER_IDS = ()",
        ),
        "Replicate_Do_Domain_Ids" => (
            "CHANGE MASTER TO DO_DOMAIN_IDS = (99)",
            "CHANGE MASTER TO DO_DOMAIN_IDS = ()",
        ),
        "Replicate_Ignore_Domain_Ids" => (
            "CHANGE MASTER TO IGNORE_DOMAIN_IDS = (99)",
            "CHANGE MASTER TO IGNORE_DOMAIN_IDS = ()",
        ),
        _ => return None,
    })
}

/// A replica with replication filters holds part of the primary's data:
/// a read there of what it leaves out would miss the primary's writes,
/// silently. Drawn from the server's own space: each `Replicate_*` column
/// of the replica's SHOW SLAVE STATUS, set in turn on one replica, keeps
/// every read off it (the other replica takes them) and `/status` names
/// the filter; with it taken off the replica reads again. A rule's named
/// group may still send it reads (`pick`'s rows).
#[test]
fn a_replica_with_replication_filters_serves_no_reads() {
    let _one = serial();
    let srv = replicated();
    let dir = tempfile::tempdir().expect("tmp");
    let relay = start_routing_relay(
        srv,
        dir.path(),
        "read_write_split = true\nconsistency = \"none\"\nhealth_interval = 0.2",
        "",
        "",
    );
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("filters").await;
        let mut replica = node(srv, 1).await;
        // (The database must have reached the replica before a filter
        // leaves its creation out for good.)
        let t0 = std::time::Instant::now();
        while replica
            .query_first::<u64, _>(format!(
                "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '{db}'"
            ))
            .await
            .expect("schemata")
            != Some(1)
        {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "{db} never reached the replica"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let addr = format!("127.0.0.1:{}", srv.sandbox.meta.nodes[1].port);
        let field = "replication_filters";
        let row: mysql_async::Row = replica
            .query_first("SHOW SLAVE STATUS")
            .await
            .expect("status")
            .expect("a replica");
        let columns: Vec<String> = row
            .columns_ref()
            .iter()
            .map(|c| c.name_str().to_string())
            .filter(|n| n.starts_with("Replicate_"))
            .collect();
        assert!(columns.len() >= 9, "{columns:?}");
        let mut c = client(relay.port, &db).await;
        for col in &columns {
            let (set, unset) = filter_statements(col)
                .unwrap_or_else(|| panic!("{col}: a replication filter this test does not set"));
            replica
                .query_drop(format!("STOP SLAVE; {set}; START SLAVE"))
                .await
                .unwrap_or_else(|e| panic!("{set}: {e}"));
            relay.wait_backend_says(&addr, field, true);
            let said = relay.backend_says(&addr, field).unwrap_or_default();
            let withheld = relay.metric(&format!(
                "sqlfleet_relay_backend_reads_withheld{{backend=\"{addr}\",reason=\"filters\"}}"
            ));
            let sel = selects_during_reads(srv, &mut c, "SELECT 1", 30).await;
            replica
                .query_drop(format!("STOP SLAVE; {unset}; START SLAVE"))
                .await
                .unwrap_or_else(|e| panic!("{unset}: {e}"));
            assert!(said.contains(col.as_str()), "{col}: {said}");
            assert_eq!(withheld, 1.0, "{col}: the metric");
            assert!(
                sel[1] == 0 && sel[2] >= 30,
                "{col}: reads by server {sel:?}"
            );
            relay.wait_backend_says(&addr, field, false);
            assert_eq!(
                relay.metric(&format!(
                    "sqlfleet_relay_backend_reads_withheld{{backend=\"{addr}\",reason=\"filters\"}}"
                )),
                0.0,
                "{col}: the metric after"
            );
        }
        let sel = selects_during_reads(srv, &mut c, "SELECT 1", 60).await;
        assert!(
            sel[1] > 0,
            "without filters the replica serves reads again: {sel:?}"
        );
    });
}

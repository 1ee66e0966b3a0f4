//! The relay in front of a real 3-node Galera cluster (testkit's
//! `galera()`): one writer, reads on the others; a desynced node gets no
//! reads; read-your-writes waits on the reader (WSREP_SYNC_WAIT_UPTO_GTID);
//! the writer killed -9 under a write loop costs each client at most its
//! in-flight statement (beyond the survivors' own refusals while their new
//! view forms) and writes move; a node left alone (non-Primary)
//! gets nothing, as the cluster refuses it too. One test: the scenes share
//! one cluster and each changes it.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::relay::{free_port, quoted, start_config, Relay};
use common::routing::node;
use mysql_async::prelude::Queryable;
use sqlfleet_testkit::TestServer;

fn roles_are(relay: &Relay, want: &[&str]) -> bool {
    let mut r: Vec<String> = relay.roles().into_iter().map(|x| x.1).collect();
    r.sort();
    let mut w: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    w.sort();
    r == w
}

fn wait_roles(relay: &Relay, want: &[&str]) {
    let t0 = Instant::now();
    while !roles_are(relay, want) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "roles stay {:?}, want {want:?}",
            relay.roles()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn start(g: &TestServer, dir: &std::path::Path) -> Relay {
    start_with(g, dir, "")
}

/// The relay over the cluster, with `sections` of config added.
fn start_with(g: &TestServer, dir: &std::path::Path, sections: &str) -> Relay {
    start_nodes(g, dir, &[0, 1, 2], sections)
}

/// The relay over the cluster's `nodes` (indexes), with `sections` added.
fn start_nodes(g: &TestServer, dir: &std::path::Path, nodes: &[usize], sections: &str) -> Relay {
    let port = free_port();
    let metrics_port = free_port();
    let pwfile = dir.join("backend.pw");
    std::fs::write(&pwfile, g.sandbox.password().expect("pw").expose()).expect("pw");
    let servers: Vec<String> = g
        .sandbox
        .meta
        .nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| nodes.contains(i))
        .map(|(_, n)| format!("\"127.0.0.1:{}\"", n.port))
        .collect();
    let hashes = sqlfleet_relay::config::hash_lines("app-pw");
    let toml = format!(
        "[relay]\nlisten = [\"127.0.0.1:{port}\"]\nmetrics = \"127.0.0.1:{metrics_port}\"\n\n\
         [backend]\nservers = [{}]\nuser = \"root\"\npassword_file = {}\naccounts = \"shared\"\n\n\
         [pool]\nmax = 20\nwait_timeout = 3\n\n\
         [routing]\nread_write_split = true\nconsistency = \"session\"\nhealth_interval = 0.2\nconsistency_wait = 2\n\n\
         [[users]]\nname = \"app\"\n{hashes}\n{sections}\n",
        servers.join(", "),
        quoted(&pwfile.display().to_string())
    );
    start_config(&toml, port, metrics_port)
}

fn opts(port: u16) -> mysql_async::Opts {
    mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some("app"))
        .pass(Some("app-pw"))
        .db_name(Some("gal"))
        .prefer_socket(false)
        .into()
}

/// The ports that answered `n` autocommit reads through the relay.
async fn read_ports(c: &mut mysql_async::Conn, n: usize) -> Vec<u16> {
    let mut out = Vec::new();
    for _ in 0..n {
        let p: Option<u16> = c
            .query_first("SELECT port FROM gal.whoami")
            .await
            .expect("read");
        out.push(p.expect("row"));
    }
    out
}

/// `clients` clients, `pairs` in all: each inserts a row and reads it
/// back at once (text protocol) through the relay on `port`. Returns
/// (reads that missed their row, reads answered on `writer_port`, reads).
pub async fn causal_pairs(
    port: u16,
    pairs: usize,
    clients: usize,
    writer_port: u16,
) -> (usize, usize, usize) {
    let mut tasks = Vec::new();
    for client in 0..clients {
        tasks.push(tokio::spawn(async move {
            let mut c = mysql_async::Conn::new(opts(port)).await.expect("relay");
            let (mut misses, mut on_writer, mut reads) = (0, 0, 0);
            for k in 0..pairs / clients {
                let key = 10_000_000 + (client * 1_000_000 + k) as u64;
                c.query_drop(format!("INSERT INTO t (client, k) VALUES (77, {key})"))
                    .await
                    .expect("insert");
                let (port, n): (u16, u64) = c
                    .query_first(format!(
                        "SELECT (SELECT port FROM whoami), COUNT(*) FROM t WHERE k = {key}"
                    ))
                    .await
                    .expect("read")
                    .expect("row");
                reads += 1;
                misses += usize::from(n != 1);
                on_writer += usize::from(port == writer_port);
            }
            (misses, on_writer, reads)
        }));
    }
    let mut total = (0, 0, 0);
    for t in tasks {
        let (m, w, r) = t.await.expect("client");
        total = (total.0 + m, total.1 + w, total.2 + r);
    }
    total
}

fn kill_node(g: &TestServer, i: usize) {
    let nl = g.sandbox.layout.node(&g.sandbox.meta.nodes[i]);
    let pid = sqlfleet_sandbox::node::running_pid(&nl).expect("running");
    // SAFETY: a signal to the pid our sandbox server wrote.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let t0 = Instant::now();
    while sqlfleet_sandbox::node::is_alive(pid) {
        assert!(t0.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The result cache over the cluster: it follows the writer's binary log,
/// which holds every node's writes (log_slave_updates, as the sandbox
/// sets it) — or, where each node logs only its own, every member's log
/// (`members`: /status names them) — so a row changed directly on node
/// `writes` (indexes) is read through the cache soon after, long before
/// the rule's 30 s ttl. Every node logs its rows' column names
/// (binlog_row_metadata = FULL), the writer's own and those it applies
/// from the others alike: an entry of another row stays a hit through
/// them all (row-level invalidation on the cluster).
fn cache_sees_every_nodes_writes(
    g: &TestServer,
    dir: &std::path::Path,
    rt: &tokio::runtime::Runtime,
    writes: &[usize],
    members: bool,
) {
    rt.block_on(async {
        for i in 0..3 {
            node(g, i)
                .await
                .query_drop("SET GLOBAL binlog_row_metadata = FULL")
                .await
                .expect("binlog_row_metadata");
        }
    });
    let relay = start_with(
        g,
        dir,
        "[[cache_rules]]\nname = \"t\"\ntables = [\"t\"]\nttl = 30\n",
    );
    relay.wait_cache_following(Duration::from_secs(30));
    // (past the follower's first settle, which makes everything stale)
    std::thread::sleep(sqlfleet_relay::cache::follower::SETTLE * 3);
    let status = relay.page("/status").replace([' ', '\n'], "");
    let listed: Vec<String> = g
        .sandbox
        .meta
        .nodes
        .iter()
        .map(|n| format!("\"127.0.0.1:{}\"", n.port))
        .collect();
    let want = format!("\"members\":[{}]", listed.join(","));
    assert_eq!(
        status.contains(&want),
        members,
        "{want} in the follower's /status: {status}"
    );
    rt.block_on(async {
        let mut c = mysql_async::Conn::new(opts(relay.port))
            .await
            .expect("relay");
        let read = "SELECT k FROM t WHERE id = 1000000";
        let other = "SELECT k FROM t WHERE id = 999999";
        let hits = || relay.metric("sqlfleet_relay_cache_hits_total{rule=\"t\"}");
        let before: Option<i64> = c.query_first(read).await.expect("miss");
        let _: Option<i64> = c.query_first(read).await.expect("hit");
        assert!(hits() >= 1.0);
        let _: Option<i64> = c.query_first(other).await.expect("miss");
        let want = before.unwrap_or(0) + 7;
        for &i in writes {
            let mut other = node(g, i).await;
            other
                .query_drop(format!(
                    "UPDATE gal.t SET k = {} WHERE id = 1000000",
                    want + i as i64
                ))
                .await
                .expect("a write on another node");
            let want = want + i as i64;
            let t0 = Instant::now();
            loop {
                let v: Option<i64> = c.query_first(read).await.expect("read");
                if v == Some(want) {
                    break;
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "node{}'s write not read through the cache after 10 s: {v:?}",
                    i + 1
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        let h = hits();
        let v: Option<i64> = c.query_first(other).await.expect("other row");
        assert_eq!(v, None);
        assert_eq!(
            hits(),
            h + 1.0,
            "another row's entry kept through the writes of nodes {writes:?}: {}",
            relay.page("/status")
        );
    });
}

/// One cluster's scenes at a time: each test starts its own.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The table the scenes read and write, made through node1 and waited for
/// on the other two; and `gal.whoami`, whose one row on each node is that
/// node's port, written there alone (wsrep and the binary log off for the
/// write): a read of data that says which node answered it (`@@port`
/// reads the server itself, which the relay asks the writer).
async fn make_table(g: &TestServer) {
    let mut n1 = node(g, 0).await;
    n1.query_drop("CREATE DATABASE IF NOT EXISTS gal; CREATE TABLE IF NOT EXISTS gal.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, client INT, k BIGINT); \
         INSERT IGNORE INTO gal.t (id, client, k) VALUES (1000000, 9, 0)")
        .await
        .expect("ddl");
    for i in [1, 2] {
        let mut n = node(g, i).await;
        let t0 = Instant::now();
        while n
            .query_first::<u64, _>("SELECT COUNT(*) FROM gal.t WHERE id = 1000000")
            .await
            .ok()
            .flatten()
            != Some(1)
        {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "node{} lacks gal.t",
                i + 1
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    n1.query_drop("CREATE TABLE IF NOT EXISTS gal.whoami (port INT)")
        .await
        .expect("whoami");
    for i in [0, 1, 2] {
        let mut n = node(g, i).await;
        let t0 = Instant::now();
        while n
            .query_drop(
                "SET SESSION wsrep_on = OFF, SESSION sql_log_bin = 0; \
                 DELETE FROM gal.whoami; INSERT INTO gal.whoami VALUES (@@port)",
            )
            .await
            .is_err()
        {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "node{} lacks gal.whoami",
                i + 1
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A cluster whose nodes log only their own writes (log_slave_updates
/// OFF): the cache follows every member's log at once, so a row changed
/// directly on any node, the writer included, is read through the cache
/// soon after; before, the cache was bypassed on such a cluster. A
/// member the relay does not know shuts the cache, with the reason.
#[test]
fn the_cache_follows_every_members_log_where_each_holds_only_its_own_writes() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let g: &'static TestServer = Box::leak(Box::new(sqlfleet_testkit::galera_with(&[
        "log-slave-updates=0",
        "wsrep-gtid-mode=OFF",
    ])));
    let dir = tempfile::tempdir().expect("tmp");
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(make_table(g));
    cache_sees_every_nodes_writes(g, dir.path(), &rt, &[0, 1, 2], true);

    // Fail closed: a relay that knows two of the three members cannot see
    // the third's writes; it says so and bypasses the cache.
    let relay = start_nodes(
        g,
        dir.path(),
        &[0, 1],
        "[[cache_rules]]\nname = \"t\"\ntables = [\"t\"]\nttl = 30\n",
    );
    let t0 = Instant::now();
    let want = "the Galera cluster has 3 members and the relay knows 2";
    while !relay.page("/status").contains(want) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{want:?} not in /status: {}",
            relay.page("/status")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    rt.block_on(async {
        let mut c = mysql_async::Conn::new(opts(relay.port))
            .await
            .expect("relay");
        for _ in 0..3 {
            let _: Option<i64> = c
                .query_first("SELECT k FROM t WHERE id = 1000000")
                .await
                .expect("read");
        }
    });
    assert_eq!(
        relay.metric("sqlfleet_relay_cache_hits_total{rule=\"t\"}"),
        0.0,
        "a hit while a member's writes are unseen"
    );
    assert!(relay.metric("sqlfleet_relay_cache_bypassed_total") >= 3.0);
}

#[test]
fn galera_one_writer_reads_elsewhere_desync_read_your_writes_writer_killed_non_primary() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let g = sqlfleet_testkit::galera();
    let ports: Vec<u16> = g.sandbox.meta.nodes.iter().map(|n| n.port).collect();
    let dir = tempfile::tempdir().expect("tmp");
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(make_table(g));
    let relay = start(g, dir.path());
    wait_roles(&relay, &["writer", "reader", "reader"]);
    let writer_port = ports[0];
    cache_sees_every_nodes_writes(g, dir.path(), &rt, &[1, 2], false);
    rt.block_on(async {
        let mut c = mysql_async::Conn::new(opts(relay.port))
            .await
            .expect("relay");
        // Writes (and a transaction) on the writer, node1.
        c.query_drop("INSERT INTO t (client, k) VALUES (0, 1)")
            .await
            .expect("insert");
        let p: Option<u16> = c
            .query_first("SELECT @@port FROM t FOR UPDATE")
            .await
            .expect("locking read");
        assert_eq!(p, Some(writer_port), "a locking read runs on the writer");
        // Autocommit reads on the other two, never the writer.
        let got = read_ports(&mut c, 40).await;
        assert!(
            got.iter().all(|p| *p != writer_port),
            "reads on the writer: {got:?}"
        );
        assert!(
            got.contains(&ports[1]) && got.contains(&ports[2]),
            "{got:?}"
        );

        // A node whose new sessions read otherwise than the writer's (its
        // time_zone) takes no reads until it matches again.
        let mut n3 = node(g, 2).await;
        let n3_addr = format!("127.0.0.1:{}", ports[2]);
        n3.query_drop("SET GLOBAL time_zone = '+05:00'")
            .await
            .expect("time_zone");
        relay.wait_backend_says(&n3_addr, "reads_unlike_primary", true);
        let got = read_ports(&mut c, 30).await;
        n3.query_drop("SET GLOBAL time_zone = SYSTEM")
            .await
            .expect("time_zone back");
        assert!(
            got.iter().all(|p| *p == ports[1]),
            "reads on a node whose sessions read otherwise: {got:?}"
        );
        relay.wait_backend_says(&n3_addr, "reads_unlike_primary", false);

        // Read-your-writes: a read right after a write waits on its reader
        // for that write (counted), and sees it.
        let waits = relay.metric("sqlfleet_relay_consistency_waits_total");
        for k in 0..30u64 {
            c.exec_drop("INSERT INTO t (client, k) VALUES (1, ?)", (1000 + k,))
                .await
                .expect("insert");
            let n: Option<u64> = c
                .exec_first("SELECT COUNT(*) FROM t WHERE k = ?", (1000 + k,))
                .await
                .expect("read");
            assert_eq!(
                n,
                Some(1),
                "the client's own write is not visible to its next read"
            );
        }
        let waited = relay.metric("sqlfleet_relay_consistency_waits_total") - waits;
        let fell = relay.metric("sqlfleet_relay_consistency_fallbacks_total");
        assert!(
            waited + fell >= 1.0,
            "no read waited for its write ({waited} waits, {fell} fallbacks)"
        );

        // Read-your-writes in numbers: clients each write a row (text
        // protocol, autocommit) and read it straight back through the
        // relay; every read runs on a reader node and finds its row.
        let pairs: usize = std::env::var("SQLFLEET_CAUSAL_PAIRS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000);
        let (misses, on_writer, reads) = causal_pairs(relay.port, pairs, 4, writer_port).await;
        eprintln!(
            "read-your-writes on Galera: {reads} write-then-read pairs through the relay, \
             {misses} misses, {on_writer} reads on the writer"
        );
        assert_eq!(misses, 0, "reads missed the client's own write");
        assert_eq!(on_writer, 0, "text reads after a write left the readers");

        // A certification conflict: a transaction on the writer loses to
        // a write another node committed first; the client gets what a
        // direct client gets (1213, its state and message).
        let conflict = |mut a: mysql_async::Conn| async move {
            a.query_drop("BEGIN").await.expect("begin");
            a.query_drop("UPDATE gal.t SET k = k + 1 WHERE id = 1000000")
                .await
                .expect("update");
            let mut other = node(g, 1).await;
            other
                .query_drop("UPDATE gal.t SET k = k + 100 WHERE id = 1000000")
                .await
                .expect("the other node's write");
            let e = match a.query_drop("COMMIT").await {
                Err(mysql_async::Error::Server(e)) => e,
                other => panic!("no certification conflict: {other:?}"),
            };
            (e.code, e.state, e.message)
        };
        let direct = conflict(node(g, 0).await).await;
        assert_eq!(direct.0, 1213, "{direct:?}");
        let relayed = conflict(
            mysql_async::Conn::new(opts(relay.port))
                .await
                .expect("relay"),
        )
        .await;
        assert_eq!(
            relayed, direct,
            "a certification conflict through the relay"
        );

        // A desynced node gets no reads.
        let mut n2 = node(g, 1).await;
        n2.query_drop("SET GLOBAL wsrep_desync = ON")
            .await
            .expect("desync");
        wait_roles(&relay, &["writer", "reader", "excluded"]);
        let got = read_ports(&mut c, 30).await;
        assert!(
            got.iter().all(|p| *p == ports[2]),
            "reads on a desynced node: {got:?}"
        );
        n2.query_drop("SET GLOBAL wsrep_desync = OFF")
            .await
            .expect("resync");
        let _ = n2.disconnect().await;
        wait_roles(&relay, &["writer", "reader", "reader"]);
        let _ = c.disconnect().await;
    });

    // A reader that starts refusing every statement (wsrep_reject_queries
    // = ALL: ERROR 1047, as a node leaving the cluster answers): the reads
    // that meet a refusal before the next health check are retried on the
    // other reader (counted); no reading client sees an error.
    let retries = relay.metric("sqlfleet_relay_read_retries_total");
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (stop, port) = (stop.clone(), relay.port);
            rt.spawn(async move {
                let mut c = mysql_async::Conn::new(opts(port)).await.expect("relay");
                let (mut ok, mut failed) = (0u64, Vec::new());
                while !stop.load(Ordering::Relaxed) {
                    match c.query_first::<u64, _>("SELECT COUNT(*) FROM t").await {
                        Ok(_) => ok += 1,
                        Err(e) => failed.push(e.to_string()),
                    }
                }
                (ok, failed)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    rt.block_on(async {
        node(g, 1)
            .await
            .query_drop("SET GLOBAL wsrep_reject_queries = ALL")
            .await
            .expect("reject queries");
    });
    wait_roles(&relay, &["writer", "reader", "down"]);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let mut reads = 0;
    for r in readers {
        let (ok, failed) = rt.block_on(r).expect("reader");
        assert!(
            failed.is_empty(),
            "a read failed on a refusing node: {failed:?}"
        );
        reads += ok;
    }
    let retried = relay.metric("sqlfleet_relay_read_retries_total") - retries;
    eprintln!("a reader refusing queries: {reads} reads, {retried} retried elsewhere, 0 errors");
    assert!(retried >= 1.0, "no read met the refusal ({reads} reads)");
    rt.block_on(async {
        node(g, 1)
            .await
            .query_drop("SET GLOBAL wsrep_reject_queries = NONE")
            .await
            .expect("accept queries again");
    });
    wait_roles(&relay, &["writer", "reader", "reader"]);

    // A reader stopped (SIGSTOP) for 4 s — under Galera's own suspect
    // timeout (5 s), so the cluster keeps its view and the later scenes
    // their three members — then continued: the other
    // reader's clients keep reading; reads caught on the stopped node end
    // within the health check's timeout and go elsewhere, and so do reads
    // the node refuses while it rejoins (1047); no read fails.
    let nl = g.sandbox.layout.node(&g.sandbox.meta.nodes[2]);
    let pid = sqlfleet_sandbox::node::running_pid(&nl).expect("running");
    let st = common::stall::stall(
        &rt,
        &relay,
        common::relay::app(relay.port, "app-pw", Some("gal")),
        "SELECT COUNT(*) FROM t",
        common::stall::sigstop(pid),
        ports[2],
        Duration::from_secs(4),
    );
    st.check("a Galera reader stopped", false);
    wait_roles(&relay, &["writer", "reader", "reader"]);

    // The writer killed -9 under two clients' write loops: each loses at
    // most its in-flight statement, then writes move to node2; every
    // acknowledged row is in the cluster.
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicU64::new(0));
    let mut loops = Vec::new();
    for client in 0..2u32 {
        let (stop, acked, port) = (stop.clone(), acked.clone(), relay.port);
        loops.push(std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("rt");
            rt.block_on(async move {
                let mut c = mysql_async::Conn::new(opts(port)).await.expect("relay");
                let (mut ok, mut failed, mut k) = (0u64, Vec::new(), 0u64);
                while !stop.load(Ordering::Relaxed) {
                    k += 1;
                    match c
                        .exec_drop("INSERT INTO t (client, k) VALUES (?, ?)", (100 + client, k))
                        .await
                    {
                        Ok(()) => {
                            ok += 1;
                            acked.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            failed.push(e.to_string());
                            // The relay closes a client whose backend
                            // died mid-statement: connect again.
                            if let Ok(n) = mysql_async::Conn::new(opts(port)).await {
                                c = n;
                            }
                        }
                    }
                }
                (ok, failed)
            })
        }));
    }
    let t0 = Instant::now();
    while acked.load(Ordering::Relaxed) < 50 {
        assert!(t0.elapsed() < Duration::from_secs(30), "no writes");
        std::thread::sleep(Duration::from_millis(10));
    }
    kill_node(g, 0);
    wait_roles(&relay, &["down", "writer", "reader"]);
    let after = acked.load(Ordering::Relaxed);
    let t0 = Instant::now();
    while acked.load(Ordering::Relaxed) < after + 50 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "writes did not move to another node"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::Relaxed);
    let (mut acked_rows, mut unacked) = (0, 0);
    for l in loops {
        let (ok, failed) = l.join().expect("loop");
        // The survivors' own refusals while they form the new Primary
        // Component (a commit that meets the view change: ERROR 1180
        // "... Not connected to Primary Component"; 1047 before they
        // serve again) are what a direct client of node2 gets too, and
        // say that nothing was committed; the relay passes them on.
        // Anything else is the relay's doing: at most the statement in
        // flight on the killed writer.
        let (cluster, other): (Vec<&String>, Vec<&String>) = failed.iter().partition(|e| {
            e.contains("Primary Component") || e.contains("1180") || e.contains("1047")
        });
        assert!(
            other.len() <= 1,
            "a client lost more than its in-flight statement: {other:?} \
             (and the cluster refused {cluster:?})"
        );
        acked_rows += ok;
        unacked += failed.len() as u64;
    }
    rt.block_on(async {
        let mut n2 = node(g, 1).await;
        let n: Option<u64> = n2
            .query_first("SELECT COUNT(*) FROM gal.t WHERE client >= 100")
            .await
            .expect("count");
        let n = n.unwrap_or(0);
        // An unacknowledged statement may have committed; none acknowledged is lost.
        assert!(
            n >= acked_rows && n <= acked_rows + unacked,
            "{n} rows, {acked_rows} acknowledged, {unacked} failed"
        );
        let _ = n2.disconnect().await;
    });

    // node3 dies too: node2 is alone, non-Primary, and refuses; so does
    // the relay (no node may take traffic).
    kill_node(g, 2);
    wait_roles(&relay, &["down", "down", "excluded"]);
    rt.block_on(async {
        let mut direct = node(g, 1).await;
        let e = direct
            .query_drop("INSERT INTO gal.t (client, k) VALUES (9, 9)")
            .await
            .expect_err("a non-Primary node refuses writes");
        assert!(
            e.to_string().contains("1047") || e.to_string().contains("WSREP"),
            "{e}"
        );
        // The relay refuses too: at login (the client's database is
        // checked on a node) or at the first statement.
        let refusal = match mysql_async::Conn::new(opts(relay.port)).await {
            Err(e) => e.to_string(),
            Ok(mut c) => c
                .query_drop("INSERT INTO t (client, k) VALUES (9, 9)")
                .await
                .expect_err("the relay refuses")
                .to_string(),
        };
        assert!(
            refusal.contains("no writable backend") && refusal.contains("Galera"),
            "{refusal}"
        );
    });
}

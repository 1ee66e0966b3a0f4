//! Size limits through the relay: 5,000 concurrent client connections over
//! a backend limited to max_connections=100 (every client logs in, then all
//! run a transaction at once; none gets an error and the server never sees
//! more than the pool's connections), packets over 16 MB both ways, and
//! big statements streamed: twenty 64 MiB statements at once cost the
//! relay process less than 64 MiB.

mod common;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use common::relay::{app, start_relay};
use mysql_async::prelude::Queryable;

const CLIENTS: usize = 5000;

fn srv() -> &'static sqlfleet_testkit::TestServer {
    static S: OnceLock<sqlfleet_testkit::TestServer> = OnceLock::new();
    S.get_or_init(|| {
        sqlfleet_testkit::server_with(&["max_connections=100", "max_allowed_packet=256M"])
    })
}

#[test]
fn packets_over_16_mb_pass_both_ways() {
    let srv = srv();
    let relay = start_relay(srv, &["--pool-max", "4"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("big").await;
        let mut c = app(relay.port, "app-pw", Some(&db))
            .connect(Duration::from_secs(5))
            .await
            .expect("connect");
        c.query_drop("CREATE TABLE b (id INT PRIMARY KEY, v LONGBLOB)")
            .await
            .expect("create");
        let blob: Vec<u8> = (0..40 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
        // Text protocol: the INSERT itself is a 40 MB+ packet (hex literal doubles it).
        let hex: String = blob[..20 * 1024 * 1024]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        c.query_drop(format!("INSERT INTO b VALUES (1, x'{hex}')"))
            .await
            .expect("big text insert");
        // Binary protocol: a 40 MB parameter.
        c.exec_drop("INSERT INTO b VALUES (?, ?)", (2, blob.clone()))
            .await
            .expect("big prepared insert");
        let back: Vec<u8> = c
            .query_first("SELECT v FROM b WHERE id = 2")
            .await
            .expect("select")
            .expect("row");
        assert!(back == blob, "40 MB row came back intact");
        let n: u64 = c
            .query_first("SELECT LENGTH(v) FROM b WHERE id = 1")
            .await
            .expect("len")
            .expect("row");
        assert_eq!(n, 20 * 1024 * 1024);
        c.disconnect().await.expect("quit");
    });
}

/// The relay's peak resident memory (VmHWM), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kb * 1024
}

#[test]
fn twenty_64_mib_statements_at_once_cost_the_relay_under_64_mib() {
    let srv = srv();
    // Four backend connections: sixteen clients wait for one with their
    // statements on their sockets, where the relay must leave them.
    let relay = start_relay(srv, &["--pool-max", "4", "--wait-timeout", "120"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    const MIB: usize = 1 << 20;
    let before = peak_rss(relay.child.id());
    rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..20usize {
            let port = relay.port;
            tasks.push(tokio::spawn(async move {
                let mut c = app(port, "app-pw", None)
                    .connect(Duration::from_secs(10))
                    .await
                    .expect("connect");
                // Every client's text differs (its fill byte and size).
                let n = 64 * MIB + i;
                let fill = char::from(b'a' + i as u8);
                let sql = format!("SELECT LENGTH('{}'), {i}", fill.to_string().repeat(n));
                let (len, who): (u64, usize) = c
                    .query_first(sql)
                    .await
                    .expect("a 64 MiB statement through the relay")
                    .expect("row");
                assert_eq!(
                    (len, who),
                    (n as u64, i),
                    "the server saw the whole statement"
                );
                // The session goes on after it.
                let one: Option<i64> = c.query_first("SELECT 1").await.expect("next");
                assert_eq!(one, Some(1));
            }));
        }
        for t in tasks {
            t.await.expect("client");
        }
    });
    let peak = peak_rss(relay.child.id());
    eprintln!(
        "relay peak RSS {} MiB (before the statements: {} MiB)",
        peak / MIB as u64,
        before / MIB as u64
    );
    assert!(
        peak < 64 * MIB as u64,
        "the relay's peak RSS was {} MiB (before: {} MiB) with 20 clients sending 64 MiB statements",
        peak / MIB as u64,
        before / MIB as u64
    );
}

#[test]
fn five_thousand_clients_over_a_hundred_backend_connections() {
    let srv = srv();
    let relay = start_relay(srv, &["--pool-max", "90", "--wait-timeout", "60"]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("scale").await;
        let mut direct = srv.connect().await;
        direct
            .query_drop(format!("CREATE TABLE `{db}`.s (id INT PRIMARY KEY, n INT)"))
            .await
            .expect("create");
        let t0 = Instant::now();
        // Log every client in (at most 256 handshakes in flight), keep them all open.
        let gate = Arc::new(tokio::sync::Semaphore::new(256));
        let mut logins = tokio::task::JoinSet::new();
        for i in 0..CLIENTS {
            let gate = gate.clone();
            let target = app(relay.port, "app-pw", Some(&db));
            logins.spawn(async move {
                let _p = gate.acquire().await;
                (i, target.connect(Duration::from_secs(60)).await)
            });
        }
        let mut conns = Vec::with_capacity(CLIENTS);
        while let Some(r) = logins.join_next().await {
            let (i, c) = r.expect("task");
            conns.push((i, c.unwrap_or_else(|e| panic!("client {i}: {e}"))));
        }
        let logged_in = t0.elapsed();
        assert_eq!(relay.metric("sqlfleet_relay_clients_connected"), CLIENTS as f64);
        // Now all of them run a transaction at once, while a sampler reads
        // the pool's open connections from the relay's metrics.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sampler = std::thread::spawn({
            let stop = stop.clone();
            let metrics_port = relay.metrics_port;
            move || {
                let mut max = 0.0f64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    use std::io::{Read, Write};
                    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", metrics_port)) else {
                        continue;
                    };
                    let _ = s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n");
                    let mut page = String::new();
                    let _ = s.read_to_string(&mut page);
                    for l in page.lines() {
                        if l.starts_with("sqlfleet_relay_backend_connections{") {
                            if let Some(v) = l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) {
                                max = max.max(v);
                            }
                        }
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                max
            }
        });
        let t1 = Instant::now();
        let mut work = tokio::task::JoinSet::new();
        for (i, mut c) in conns {
            work.spawn(async move {
                let r: Result<Option<i64>, mysql_async::Error> = async {
                    c.query_drop("BEGIN").await?;
                    c.query_drop(format!("INSERT INTO s VALUES ({i}, {i})")).await?;
                    let n = c.query_first(format!("SELECT n FROM s WHERE id = {i}")).await?;
                    c.query_drop("COMMIT").await?;
                    Ok(n)
                }
                .await;
                let _ = c.disconnect().await;
                (i, r)
            });
        }
        let mut errors = Vec::new();
        while let Some(r) = work.join_next().await {
            let (i, r) = r.expect("task");
            match r {
                Ok(Some(n)) if n == i as i64 => {}
                other => errors.push(format!("client {i}: {other:?}")),
            }
        }
        let ran = t1.elapsed();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let pool_max_seen = sampler.join().expect("sampler");
        assert!(errors.is_empty(), "{} errors, first: {:?}", errors.len(), errors.first());
        let n: i64 = direct
            .query_first(format!("SELECT COUNT(*) FROM `{db}`.s"))
            .await
            .expect("count")
            .expect("row");
        assert_eq!(n, CLIENTS as i64);
        let max_used: (String, u64) = direct
            .query_first("SHOW GLOBAL STATUS LIKE 'Max_used_connections'")
            .await
            .expect("status")
            .expect("row");
        // ...and the pool itself never held more than its --pool-max 90.
        assert!(pool_max_seen > 0.0, "the sampler saw the pool");
        assert!(
            pool_max_seen <= 90.0,
            "the pool opened {pool_max_seen} backend connections with --pool-max 90"
        );
        assert!(max_used.1 <= 100, "server saw {} connections", max_used.1);
        eprintln!(
            "{CLIENTS} clients: logged in in {logged_in:?}, transactions in {ran:?}; server max used connections {}",
            max_used.1
        );
    });
}

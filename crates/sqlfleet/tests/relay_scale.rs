//! 5,000 concurrent client connections through the relay in transaction
//! mode, over a backend limited to max_connections=100: every client logs
//! in, then all run a transaction at once; none gets an error and the
//! server never sees more than the pool's connections.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::relay::{app, start_relay};
use mysql_async::prelude::Queryable;

const CLIENTS: usize = 5000;

#[test]
fn five_thousand_clients_over_a_hundred_backend_connections() {
    let srv = sqlfleet_testkit::server_with(&["max_connections=100"]);
    let relay = start_relay(&srv, &["--pool-max", "90", "--wait-timeout", "60"]);
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
        // Now all of them run a transaction at once.
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
        assert!(max_used.1 <= 100, "server saw {} connections", max_used.1);
        eprintln!(
            "{CLIENTS} clients: logged in in {logged_in:?}, transactions in {ran:?}; server max used connections {}",
            max_used.1
        );
    });
}

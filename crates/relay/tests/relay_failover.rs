//! Availability through the relay on its own primary + 2 replicas: a
//! replica made writable makes two primaries, and writes are refused
//! until it is read-only again; a killed replica drops out (reads retried elsewhere, no client error) and
//! returns when restarted; a killed primary with a promoted replica keeps
//! writes flowing without restarting the relay. Prints the failover time.

mod common;

use std::time::{Duration, Instant};

use common::relay::app;
use common::routing::start_routing_relay;
use mysql_async::prelude::Queryable;
use sqlfleet_sandbox::{node, Sandbox, UpOptions};
use sqlfleet_testkit::replicated;

fn kill9(sb: &Sandbox, name: &str) {
    let n = sb.meta.nodes.iter().find(|n| n.name == name).expect("node");
    let pid = node::running_pid(&sb.layout.node(n)).expect("running");
    let ok = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
    let t0 = Instant::now();
    while node::running_pid(&sb.layout.node(n)).is_some() {
        assert!(t0.elapsed() < Duration::from_secs(10), "{name} did not die");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn replicas_drop_out_and_return_and_a_promoted_replica_takes_writes() {
    let srv = replicated();
    let dir = tempfile::tempdir().expect("tmp");
    let relay = start_routing_relay(
        srv,
        dir.path(),
        "read_write_split = true\nhealth_interval = 0.2",
        "",
        "",
    );
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("failover"));
    let connect = || async {
        app(relay.port, "app-pw", Some(&db))
            .connect(Duration::from_secs(5))
            .await
            .expect("connect via relay")
    };
    rt.block_on(async {
        let mut c = connect().await;
        c.query_drop("CREATE TABLE f (id INT PRIMARY KEY)")
            .await
            .expect("create");
        c.query_drop("INSERT INTO f VALUES (0)")
            .await
            .expect("insert");
        // Prepared on both replicas before one dies.
        for i in 0..20 {
            let _: Option<i64> = c
                .exec_first("SELECT COUNT(*) + ? FROM f", (i,))
                .await
                .expect("prepared read");
        }
    });

    // A replica someone made writable: two primaries, not Galera. The
    // relay refuses writes at once (ERROR 1290, naming both) rather than
    // spread them over servers that would diverge; back to read_only,
    // writes flow again.
    rt.block_on(async {
        let mut r2 = srv
            .replica_target(1)
            .connect(Duration::from_secs(5))
            .await
            .expect("replica2");
        r2.query_drop("SET GLOBAL read_only = 0")
            .await
            .expect("writable");
        relay.wait_roles(2, 1);
        // Refused at login (the client's database is checked on the
        // primary) or at the write.
        let text = match app(relay.port, "app-pw", Some(&db))
            .connect(Duration::from_secs(5))
            .await
        {
            Err(e) => e.to_string(),
            Ok(mut c) => c
                .query_drop("INSERT INTO f VALUES (-2)")
                .await
                .expect_err("a write with two writable backends")
                .to_string(),
        };
        assert!(
            text.contains("1290") && text.contains("several backends are writable"),
            "{text}"
        );
        r2.query_drop("SET GLOBAL read_only = 1")
            .await
            .expect("read only");
        relay.wait_roles(1, 2);
        let mut c = connect().await;
        c.query_drop("INSERT INTO f VALUES (-2)")
            .await
            .expect("one primary again: the write goes");
        c.query_drop("DELETE FROM f WHERE id = -2")
            .await
            .expect("delete");
        let _ = r2.disconnect().await;
    });

    // A replica dies: reads keep working, on the replica that is left.
    let replica1_selects = || async {
        let mut c = srv
            .replica_target(1)
            .connect(Duration::from_secs(5))
            .await
            .expect("replica1");
        let (_, v): (String, u64) = c
            .query_first("SHOW GLOBAL STATUS LIKE 'Com_select'")
            .await
            .expect("status")
            .expect("row");
        v
    };
    kill9(&srv.sandbox, "node3");
    let before = rt.block_on(replica1_selects());
    rt.block_on(async {
        let mut c = connect().await;
        // Prepared reads too (their statements get prepared again elsewhere).
        for i in 0..100 {
            let _: Option<i64> = c
                .exec_first("SELECT COUNT(*) + ? FROM f", (i,))
                .await
                .expect("prepared read while a replica is down");
        }
        for _ in 0..100 {
            let _: Option<i64> = c
                .query_first("SELECT COUNT(*) FROM f")
                .await
                .expect("read while a replica is down");
        }
    });
    let served = rt.block_on(replica1_selects()) - before;
    assert!(
        served >= 150,
        "replica1 served {served} of the 200 reads made while replica2 was down"
    );
    relay.wait_roles(1, 1);
    // The status page says since when it is down and why (before: only
    // the last socket error, "Broken pipe (os error 32)").
    let st = relay.status();
    let down: Vec<&str> = st["backends"]
        .as_array()
        .expect("backends")
        .iter()
        .filter(|b| b["role"] == "down")
        .filter_map(|b| b["down"].as_str())
        .collect();
    assert!(
        down.len() == 1 && down[0].starts_with("down since ") && down[0].contains("last error: "),
        "{st}"
    );
    // It comes back.
    rt.block_on(async {
        let opts = UpOptions {
            name: srv.sandbox.meta.name.clone(),
            die_with_parent: true,
            ..UpOptions::default()
        };
        sqlfleet_sandbox::up(&srv.sandbox.home, &opts)
            .await
            .expect("restart replica2");
    });
    relay.wait_roles(1, 2);

    // The primary dies; node2 (a replica) is promoted; writes resume.
    kill9(&srv.sandbox, "node1");
    let killed = Instant::now();
    let writer = rt.spawn({
        let port = relay.port;
        let db = db.clone();
        async move {
            let mut attempts = 0u32;
            loop {
                attempts += 1;
                let r = async {
                    let mut c = app(port, "app-pw", Some(&db))
                        .connect(Duration::from_secs(5))
                        .await
                        .map_err(|e| e.to_string())?;
                    c.query_drop("INSERT INTO f VALUES (1)")
                        .await
                        .map_err(|e| e.to_string())
                }
                .await;
                if r.is_ok() {
                    return (Instant::now(), attempts);
                }
                assert!(attempts < 200, "writes never resumed: {r:?}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });
    rt.block_on(async {
        let mut sb = Sandbox::open(&srv.sandbox.home, &srv.sandbox.meta.name).expect("open");
        sb.promote(
            "node2",
            std::time::Duration::from_secs(60),
            &Default::default(),
        )
        .await
        .expect("promote");
    });
    let (first_write, attempts) = rt.block_on(writer).expect("writer");
    let took = first_write - killed;
    eprintln!("failover: first successful write through the relay {took:?} after the primary was killed ({attempts} attempts)");
    relay.wait_roles(1, 1);
    rt.block_on(async {
        // Read back on the new primary (a transaction goes there; an
        // autocommit read may go to the replica, which can lag).
        let mut c = connect().await;
        c.query_drop("BEGIN").await.expect("begin");
        let ids: Vec<i64> = c
            .query("SELECT id FROM f ORDER BY id")
            .await
            .expect("read back");
        c.query_drop("COMMIT").await.expect("commit");
        assert_eq!(
            ids,
            vec![0, 1],
            "every acknowledged write is on the new primary"
        );
    });
    assert!(took < Duration::from_secs(20));
}

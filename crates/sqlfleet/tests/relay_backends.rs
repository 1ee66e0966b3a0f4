//! The relay's quick mode reaches its backends through the shared
//! connection options, as every command does.

mod common;

use std::time::Duration;

use common::relay::app;
use mysql_async::prelude::Queryable;
use sqlfleet_testkit::replicated;

async fn client(port: u16, db: &str) -> mysql_async::Conn {
    app(port, "app-pw", Some(db))
        .connect(Duration::from_secs(5))
        .await
        .expect("connect via relay")
}

/// Quick mode reaches its backends as every command reaches a server:
/// `--sandbox NAME` gives every server of the sandbox (the read/write split
/// then finds the replicas by their health checks), and an option file
/// alone (`--defaults-file`, no `--backend`) names the server and logs in.
#[test]
fn the_relay_takes_a_sandbox_and_option_files_for_its_backends() {
    let srv = replicated();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("bysandbox"));
    let spawn = |args: &[&str]| {
        let port = common::relay::free_port();
        let child = common::sqlfleet()
            .args(["relay", "--listen", &format!("127.0.0.1:{port}")])
            .args([
                "--shared-account",
                "--client-user",
                "app:app-pw",
                "--health-interval",
                "0.2",
            ])
            .args(args)
            .env("SQLFLEET_HOME", srv.home())
            .env_remove("MYSQL_PWD")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn relay");
        common::relay::wait_listening(port);
        common::relay::Relay {
            child,
            port,
            metrics_port: 0,
        }
    };
    let name = srv.sandbox.name().to_string();
    let metrics_port = common::relay::free_port();
    let relay = spawn(&[
        "--sandbox",
        &name,
        "--read-write-split",
        "--metrics",
        &format!("127.0.0.1:{metrics_port}"),
    ]);
    // Each server goes by the name query and watch give it (its
    // host:port), the socket it is reached through beside it.
    common::relay::wait_listening(metrics_port);
    let metrics_at = format!("127.0.0.1:{metrics_port}");
    let (_, _, body) = sqlfleet_testkit::http::http_get(&metrics_at, "/status", &[]);
    let status: serde_json::Value = serde_json::from_str(&body).expect("status json");
    let named: Vec<(String, String)> = status["backends"]
        .as_array()
        .expect("backends")
        .iter()
        .map(|b| {
            (
                b["address"].as_str().unwrap_or("").to_string(),
                b["socket"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let want: Vec<String> = srv
        .sandbox
        .meta
        .nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    assert_eq!(
        named.iter().map(|(a, _)| a.clone()).collect::<Vec<_>>(),
        want,
        "{status}"
    );
    assert!(
        named.iter().all(|(_, s)| s.starts_with("unix:")),
        "{status}"
    );
    let (_, _, page) = sqlfleet_testkit::http::http_get(&metrics_at, "/metrics", &[]);
    assert!(page.contains(&format!("backend=\"{}\"", want[0])), "{page}");
    assert!(!page.contains("backend=\"unix:"), "{page}");
    rt.block_on(async {
        let mut c = client(relay.port, &db).await;
        let primary = srv.sandbox.meta.primary().server_id as i64;
        // Health checks find the replicas; then autocommit reads go there.
        let t0 = std::time::Instant::now();
        let mut seen = std::collections::BTreeSet::new();
        while seen.len() < 2 {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "reads served by the sandbox's two replicas: {seen:?}"
            );
            let id: Option<i64> = c
                .query_first("SELECT @@session.server_id")
                .await
                .expect("id");
            let id = id.expect("a value");
            if id != primary {
                seen.insert(id);
            }
        }
        let ids: Vec<i64> = {
            let mut v = Vec::new();
            for _ in 0..3 {
                c.query_drop("BEGIN").await.expect("begin");
                let id: Option<i64> = c
                    .query_first("SELECT @@session.server_id")
                    .await
                    .expect("id");
                c.query_drop("COMMIT").await.expect("commit");
                v.push(id.expect("a value"));
            }
            v
        };
        assert!(
            ids.iter().all(|&i| i == primary),
            "transactions on the primary ({primary}): {ids:?}"
        );
    });
    drop(relay);

    // An ssl-ca in the option file (common in ~/.my.cnf) is not used
    // without a verifying --ssl-mode, as with every command: no refusal.
    let dir = tempfile::tempdir().expect("tmp");
    let with_ca = dir.path().join("my.cnf");
    std::fs::write(
        &with_ca,
        format!(
            "{}\nssl-ca = /nonexistent/ca.pem\n",
            std::fs::read_to_string(srv.defaults_file()).expect("cnf")
        ),
    )
    .expect("write");
    let relay = spawn(&["--defaults-file", &with_ca.display().to_string()]);
    rt.block_on(async {
        let mut c = client(relay.port, &db).await;
        let id: Option<i64> = c
            .query_first("SELECT @@session.server_id")
            .await
            .expect("id");
        assert_eq!(id, Some(srv.sandbox.meta.primary().server_id as i64));
    });
}

//! Per-user backend accounts: each client's backend connections log in as
//! that client, so the server applies its own privileges (what a direct
//! connection would get); connections are never shared across accounts; a
//! server that refuses one client's account refuses that client only.

mod common;

use std::time::Duration;

use common::relay::{free_port, quoted, start_config};
use mysql_async::prelude::Queryable;
use sqlfleet_conn::{Endpoint, PasswordSpec, Secret, SslMode, Target};
use sqlfleet_testkit::server;

fn client(port: u16, user: &str, pw: &str) -> Target {
    Target {
        endpoint: Endpoint::Tcp {
            host: "127.0.0.1".into(),
            port,
        },
        user: user.into(),
        password: Some(PasswordSpec::Given(Secret::new(pw))),
        database: None,
        ssl_mode: SslMode::Disabled,
        ssl_ca: None,
        charset: None,
    }
}

#[test]
fn each_client_runs_as_its_own_account() {
    let srv = server();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("accounts"));
    rt.block_on(async {
        let mut root = srv.connect().await;
        for sql in [
            "DROP USER IF EXISTS 'alice'@'%', 'bob'@'%', 'carol'@'%'".to_string(),
            "CREATE USER 'alice'@'%' IDENTIFIED BY 'alice-pw'".into(),
            "CREATE USER 'bob'@'%' IDENTIFIED BY 'bob-pw'".into(),
            // carol's password on the server is not the one the relay has.
            "CREATE USER 'carol'@'%' IDENTIFIED BY 'server-side-pw'".into(),
            format!("GRANT SELECT ON `{db}`.* TO 'alice'@'%'"),
            format!("GRANT ALL ON `{db}`.* TO 'bob'@'%'"),
            format!("CREATE TABLE `{db}`.t (id INT PRIMARY KEY)"),
            format!("INSERT INTO `{db}`.t VALUES (1)"),
        ] {
            root.query_drop(sql).await.expect("set-up");
        }
    });
    let port = free_port();
    let metrics_port = free_port();
    let pw = srv.sandbox.password().expect("pw");
    let hash = sqlfleet_relay::config::hash_lines;
    let toml = format!(
        "[relay]\nlisten = [\"127.0.0.1:{port}\"]\nmetrics = \"127.0.0.1:{metrics_port}\"\n\n\
         [backend]\nservers = [\"127.0.0.1:{}\"]\nuser = \"root\"\npassword = {}\naccounts = \"per-user\"\n\n\
         [pool]\nmax = 2\nwait_timeout = 5\n\n\
         [[users]]\nname = \"alice\"\n{}\n[[users]]\nname = \"bob\"\n{}\n[[users]]\nname = \"carol\"\n{}\n",
        srv.sandbox.meta.primary().port,
        quoted(pw.expose()),
        hash("alice-pw"),
        hash("bob-pw"),
        hash("carol-pw"),
    );
    let relay = start_config(&toml, port, metrics_port);
    rt.block_on(async {
        let connect = |u: &'static str, p: &'static str| async move {
            client(port, u, p).connect(Duration::from_secs(5)).await
        };
        for _ in 0..3 {
            let mut a = connect("alice", "alice-pw").await.expect("alice");
            let who: Option<String> = a.query_first("SELECT CURRENT_USER()").await.expect("who");
            assert_eq!(who.as_deref(), Some("alice@%"));
            // alice's own privileges, as directly: no reading mysql.user, no writes.
            let e = a
                .query_drop("SELECT COUNT(*) FROM mysql.user")
                .await
                .expect_err("alice may not read mysql.user");
            assert!(e.to_string().contains("1142"), "{e}");
            let e = a
                .query_drop(format!("INSERT INTO `{db}`.t VALUES (2)"))
                .await
                .expect_err("alice may not write");
            assert!(e.to_string().contains("1142"), "{e}");
            let n: Option<i64> = a
                .query_first(format!("SELECT COUNT(*) FROM `{db}`.t"))
                .await
                .expect("alice reads");
            assert!(n >= Some(1), "{n:?}");
            drop(a);
            // bob after alice, on a pool of 2: never alice's connection.
            let mut b = connect("bob", "bob-pw").await.expect("bob");
            let who: Option<String> = b.query_first("SELECT CURRENT_USER()").await.expect("who");
            assert_eq!(who.as_deref(), Some("bob@%"));
            b.query_drop(format!("INSERT IGNORE INTO `{db}`.t VALUES (2)"))
                .await
                .expect("bob writes");
            drop(b);
        }
        // carol passes the relay's check but not the server's: refused,
        // with the server's code, and the backend stays up for the others.
        let e = connect("carol", "carol-pw")
            .await
            .expect_err("server refuses carol");
        assert!(e.to_string().contains("1045"), "{e}");
        let mut a = connect("alice", "alice-pw")
            .await
            .expect("alice after carol");
        let who: Option<String> = a.query_first("SELECT CURRENT_USER()").await.expect("who");
        assert_eq!(who.as_deref(), Some("alice@%"));
    });
    assert!(relay.metric("sqlfleet_relay_backend_connects_total") >= 2.0);
}

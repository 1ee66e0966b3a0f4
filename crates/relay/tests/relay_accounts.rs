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

/// An anonymous account on the relay's host changes which account every
/// `name@'%'` login matches on the shared server: the test that makes one
/// runs alone, the others beside each other.
static ACCOUNTS: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn beside_others() -> std::sync::RwLockReadGuard<'static, ()> {
    ACCOUNTS.read().unwrap_or_else(|e| e.into_inner())
}

fn alone() -> std::sync::RwLockWriteGuard<'static, ()> {
    ACCOUNTS.write().unwrap_or_else(|e| e.into_inner())
}

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
        ssl_cert: None,
        ssl_key: None,
        tls: Default::default(),
        charset: None,
    }
}

#[test]
fn each_client_runs_as_its_own_account() {
    let _accounts = beside_others();
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

/// Per-user mode takes accounts made on the server without a config entry
/// (looked up in mysql.user with the relay's account): the right password
/// logs in as that account, a wrong one is refused as the server would,
/// and a changed password or a dropped account is seen within the
/// lookup's few seconds.
#[test]
fn accounts_made_on_the_server_log_in_without_a_config_entry() {
    let _accounts = beside_others();
    let srv = server();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let mut root = srv.connect().await;
        for sql in [
            "DROP USER IF EXISTS 'dave'@'%', 'erin'@'%', 'frank'@'%'",
            "CREATE USER 'dave'@'%' IDENTIFIED BY 'dave-pw'",
            "CREATE USER 'frank'@'%'",
            // erin is listed in the relay with another password: the
            // listed one is what the relay checks.
            "CREATE USER 'erin'@'%' IDENTIFIED BY 'erin-server'",
        ] {
            root.query_drop(sql).await.expect("set-up");
        }
    });
    let port = free_port();
    let metrics_port = free_port();
    let pw = srv.sandbox.password().expect("pw");
    let toml = format!(
        "[relay]\nlisten = [\"127.0.0.1:{port}\"]\nmetrics = \"127.0.0.1:{metrics_port}\"\n\n\
         [backend]\nservers = [\"127.0.0.1:{}\"]\nuser = \"root\"\npassword = {}\naccounts = \"per-user\"\n\n\
         [[users]]\nname = \"erin\"\n{}\n",
        srv.sandbox.meta.primary().port,
        quoted(pw.expose()),
        sqlfleet_relay::config::hash_lines("erin-relay"),
    );
    let _relay = start_config(&toml, port, metrics_port);
    rt.block_on(async {
        let connect = |u: &'static str, p: &'static str| async move {
            client(port, u, p).connect(Duration::from_secs(5)).await
        };
        let mut d = connect("dave", "dave-pw")
            .await
            .expect("dave, from the server");
        let who: Option<String> = d.query_first("SELECT CURRENT_USER()").await.expect("who");
        assert_eq!(who.as_deref(), Some("dave@%"));
        drop(d);
        let e = connect("dave", "wrong").await.expect_err("wrong password");
        assert!(e.to_string().contains("1045"), "{e}");
        // An account without a password: only an empty one logs in.
        let mut f = connect("frank", "").await.expect("frank, no password");
        let who: Option<String> = f.query_first("SELECT CURRENT_USER()").await.expect("who");
        assert_eq!(who.as_deref(), Some("frank@%"));
        drop(f);
        let e = connect("frank", "guess")
            .await
            .expect_err("a password frank has not");
        assert!(e.to_string().contains("1045"), "{e}");
        let e = connect("nobody", "x").await.expect_err("no such account");
        assert!(e.to_string().contains("1045"), "{e}");
        // The listed account keeps its listed password (and the server
        // then has the last word: its own password differs, so refused).
        let e = connect("erin", "erin-server")
            .await
            .expect_err("not the listed password");
        assert!(e.to_string().contains("1045"), "{e}");

        // A new password on the server: the old one stops working, the
        // new one works, within the lookup's time to live.
        let mut root = srv.connect().await;
        root.query_drop("ALTER USER 'dave'@'%' IDENTIFIED BY 'dave-new'")
            .await
            .expect("alter");
        tokio::time::sleep(sqlfleet_relay::backend::accounts::TTL + Duration::from_millis(200))
            .await;
        let e = connect("dave", "dave-pw").await.expect_err("old password");
        assert!(e.to_string().contains("1045"), "{e}");
        let mut d = connect("dave", "dave-new").await.expect("new password");
        let one: Option<i64> = d.query_first("SELECT 1").await.expect("query");
        assert_eq!(one, Some(1));
        drop(d);
        root.query_drop("DROP USER 'dave'@'%'").await.expect("drop");
        tokio::time::sleep(sqlfleet_relay::backend::accounts::TTL + Duration::from_millis(200))
            .await;
        let e = connect("dave", "dave-new").await.expect_err("dropped");
        assert!(e.to_string().contains("1045"), "{e}");
    });
}

/// Which account a login gets is the server's rule, not the name alone:
/// an anonymous account on the relay's host beats `name@'%'`, as it does
/// for a direct login (the classic surprise, kept). Each login through the
/// relay is compared with the same login made directly.
#[test]
fn the_account_the_server_matches_is_the_one_the_relay_checks() {
    let _accounts = alone();
    let setup = [
        "DROP USER IF EXISTS 'hank'@'%', ''@'localhost', ''@'127.0.0.1'",
        "CREATE USER 'hank'@'%' IDENTIFIED BY 'hank-pw'",
        "CREATE USER ''@'localhost' IDENTIFIED BY 'anon-pw'",
        "CREATE USER ''@'127.0.0.1' IDENTIFIED BY 'anon-pw'",
    ];
    let (srv, rt, port, _relay) = per_user_relay(&setup);
    let sport = srv.sandbox.meta.primary().port;
    rt.block_on(async {
        for (user, pw) in [
            ("hank", "anon-pw"),
            ("hank", "hank-pw"),
            ("nobody", "anon-pw"),
            ("nobody", "x"),
        ] {
            let login = |p: u16| async move {
                match client(p, user, pw).connect(Duration::from_secs(5)).await {
                    Ok(mut c) => {
                        let who: Option<String> =
                            c.query_first("SELECT CURRENT_USER()").await.expect("who");
                        Ok(who.unwrap_or_default())
                    }
                    Err(e) => Err(e.to_string().contains("1045")),
                }
            };
            let direct = login(sport).await;
            let relayed = login(port).await;
            assert_eq!(relayed, direct, "{user} / {pw}: relay vs direct");
        }
    });
    rt.block_on(async {
        let mut root = srv.connect().await;
        root.query_drop("DROP USER ''@'localhost', ''@'127.0.0.1', 'hank'@'%'")
            .await
            .expect("clean up");
    });
}

/// KILL in per-user mode: a thread id that is not a relay client's goes
/// to the server, which lets an account kill its own statements (here one
/// made around the relay) as it would directly; `KILL CONNECTION USER`
/// ends the account's relay clients too; an account dropped through the
/// relay leaves no idle server connection behind.
#[test]
fn kill_and_drop_user_act_on_the_account_as_on_the_server() {
    let _accounts = beside_others();
    let setup = [
        "DROP USER IF EXISTS 'ivy'@'%', 'jack'@'%', 'kate'@'%'",
        "CREATE USER 'ivy'@'%' IDENTIFIED BY 'ivy-pw'",
        "CREATE USER 'kate'@'%' IDENTIFIED BY 'kate-pw'",
        "CREATE USER 'jack'@'%' IDENTIFIED BY 'jack-pw'",
        "GRANT ALL ON *.* TO 'ivy'@'%'",
    ];
    let (srv, rt, port, _relay) = per_user_relay(&setup);
    let sport = srv.sandbox.meta.primary().port;
    rt.block_on(async {
        let dial = |p: u16, u: &'static str, pw: &'static str| async move {
            client(p, u, pw)
                .connect(Duration::from_secs(5))
                .await
                .expect("login")
        };
        // A statement of jack's, made directly: jack through the relay
        // kills it by its server thread id.
        let mut around = dial(sport, "jack", "jack-pw").await;
        let thread: Option<u64> = around
            .query_first("SELECT CONNECTION_ID()")
            .await
            .expect("id");
        let thread = thread.expect("thread id");
        let sleeper = tokio::spawn(async move {
            let r: Result<Option<i64>, _> = around.query_first("SELECT SLEEP(30)").await;
            r.map_err(|e| e.to_string())
        });
        let mut jack = dial(port, "jack", "jack-pw").await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        jack.query_drop(format!("KILL QUERY {thread}"))
            .await
            .expect("jack may kill jack's own statement");
        let slept = tokio::time::timeout(Duration::from_secs(10), sleeper)
            .await
            .expect("killed well before 30 s")
            .expect("join");
        let e = slept.expect_err("the statement was killed");
        assert!(e.contains("1317"), "interrupted: {e}");
        // Relay ids: jack may not stop ivy's session, ivy (with the
        // privilege, as on the server) may stop jack's.
        let mut ivy = dial(port, "ivy", "ivy-pw").await;
        let e = jack
            .query_drop(format!("KILL QUERY {}", ivy.id()))
            .await
            .expect_err("jack may not kill ivy's");
        assert!(e.to_string().contains("1095"), "{e}");
        ivy.query_drop(format!("KILL QUERY {}", jack.id()))
            .await
            .expect("ivy may kill jack's");
        // ivy ends every connection of jack's, including jack's relay
        // client.
        ivy.query_drop("KILL CONNECTION USER jack")
            .await
            .expect("kill user");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            jack.query_drop("SELECT 1").await.is_err(),
            "jack's relay client was ended"
        );
        // kate's client leaves an idle pooled server connection behind;
        // dropping kate through the relay closes it.
        let count = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'kate'";
        let mut kate = dial(port, "kate", "kate-pw").await;
        kate.query_drop("SELECT 1").await.expect("query");
        drop(kate);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut root = srv.connect().await;
        let idle: Option<i64> = root.query_first(count).await.expect("count");
        assert!(idle.unwrap_or(0) >= 1, "the pool keeps kate's connection");
        ivy.query_drop("DROP USER 'kate'@'%'").await.expect("drop");
        let mut left = 1;
        for _ in 0..50 {
            let n: Option<i64> = root.query_first(count).await.expect("count");
            left = n.unwrap_or(0);
            if left == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(left, 0, "no server session of the dropped account is left");
        root.query_drop("DROP USER 'ivy'@'%', 'jack'@'%'")
            .await
            .expect("clean up");
    });
}

/// A server with `setup` run on it and a per-user relay (no listed users)
/// in front of it: (server, runtime, relay port, relay).
fn per_user_relay(
    setup: &[&str],
) -> (
    &'static sqlfleet_testkit::TestServer,
    tokio::runtime::Runtime,
    u16,
    common::relay::Relay,
) {
    per_user_relay_as(setup, None, "")
}

/// [`per_user_relay`] with the relay's own backend account given (root's
/// when `None`) and `[pool]` settings.
fn per_user_relay_as(
    setup: &[&str],
    account: Option<(&str, &str)>,
    pool: &str,
) -> (
    &'static sqlfleet_testkit::TestServer,
    tokio::runtime::Runtime,
    u16,
    common::relay::Relay,
) {
    let srv = server();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let mut root = srv.connect().await;
        for sql in setup {
            root.query_drop(*sql).await.expect("set-up");
        }
    });
    let port = free_port();
    let metrics_port = free_port();
    let root_pw = srv.sandbox.password().expect("pw");
    let (user, pw) = account.unwrap_or(("root", root_pw.expose()));
    let toml = format!(
        "[relay]\nlisten = [\"127.0.0.1:{port}\"]\nmetrics = \"127.0.0.1:{metrics_port}\"\n\n\
         [backend]\nservers = [\"127.0.0.1:{}\"]\nuser = {}\npassword = {}\naccounts = \"per-user\"\n\n\
         [pool]\n{pool}",
        srv.sandbox.meta.primary().port,
        quoted(user),
        quoted(pw),
    );
    let relay = start_config(&toml, port, metrics_port);
    (srv, rt, port, relay)
}

/// An account with a pre-4.1 (mysql_old_password) hash, on a server that
/// still takes them (secure_auth=0): the mariadb client logs in through a
/// per-user relay as it does directly, and a wrong password is refused
/// the same way.
#[test]
fn old_password_accounts_log_in_as_directly() {
    let _accounts = beside_others();
    let setup = [
        "SET GLOBAL secure_auth = 0",
        "DROP USER IF EXISTS 'olga'@'%'",
        "CREATE USER 'olga'@'%' IDENTIFIED BY PASSWORD '09301740536db389'",
    ];
    let (srv, rt, port, _relay) = per_user_relay(&setup);
    let sport = srv.sandbox.meta.primary().port;
    let login = |p: u16, pw: &str| {
        let out = std::process::Command::new("mariadb")
            .args(["--no-defaults", "-h127.0.0.1", "-uolga", "-N", "-B"])
            .arg(format!("-P{p}"))
            .arg(format!("-p{pw}"))
            .args(["-e", "SELECT CURRENT_USER()"])
            .output()
            .expect("the mariadb client");
        eprintln!("port {p}: {}", String::from_utf8_lossy(&out.stderr).trim());
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
        )
    };
    for pw in ["oldpw", "wrong"] {
        let direct = login(sport, pw);
        let relayed = login(port, pw);
        assert_eq!(relayed, direct, "password {pw}: relay vs direct");
    }
    assert_eq!(login(port, "oldpw"), (true, "olga@%".to_string()));
    rt.block_on(async {
        let mut root = srv.connect().await;
        root.query_drop("DROP USER 'olga'@'%'").await.expect("drop");
        root.query_drop("SET GLOBAL secure_auth = DEFAULT")
            .await
            .expect("restore");
    });
}

/// An account made right after a refused login logs in at once (absence
/// is never remembered), and a password changed through the relay works
/// at once, as both do directly.
#[test]
fn accounts_made_or_changed_log_in_at_once() {
    let _accounts = beside_others();
    let setup = [
        "DROP USER IF EXISTS 'nina'@'%', 'otto'@'%', 'pia'@'%'",
        "CREATE USER 'otto'@'%' IDENTIFIED BY 'otto-1'",
        "GRANT ALL ON *.* TO 'otto'@'%' WITH GRANT OPTION",
    ];
    let (srv, rt, port, relay) = per_user_relay(&setup);
    rt.block_on(async {
        let connect = |u: &'static str, p: &'static str| async move {
            client(port, u, p).connect(Duration::from_secs(5)).await
        };
        let lookups = || relay.metric("sqlfleet_relay_own_queries_total{kind=\"account\"}");
        let before = lookups();
        // A flood of logins with an unknown name: its absence is
        // remembered, so the server is asked once (the host and the
        // rows: one lookup is two queries).
        for _ in 0..8 {
            let e = connect("nina", "nina-pw")
                .await
                .expect_err("no such account yet");
            assert!(e.to_string().contains("1045"), "{e}");
        }
        assert!(
            lookups() - before <= 2.0,
            "eight failed logins of one unknown name asked the server {} times",
            lookups() - before
        );
        let mut root = srv.connect().await;
        root.query_drop("CREATE USER 'nina'@'%' IDENTIFIED BY 'nina-pw'")
            .await
            .expect("create");
        // Made directly on the server: logs in once the absence is older
        // than its TTL.
        tokio::time::sleep(sqlfleet_relay::backend::accounts::ABSENT_TTL).await;
        let mut n = connect("nina", "nina-pw").await.expect("made a moment ago");
        let one: Option<i64> = n.query_first("SELECT 1").await.expect("query");
        assert_eq!(one, Some(1));
        drop(n);
        // otto changes nina's password through the relay.
        let mut o = connect("otto", "otto-1").await.expect("otto");
        o.query_drop("ALTER USER 'nina'@'%' IDENTIFIED BY 'nina-2'")
            .await
            .expect("alter");
        connect("nina", "nina-2")
            .await
            .expect("the new password at once");
        let e = connect("nina", "nina-pw").await.expect_err("the old one");
        assert!(e.to_string().contains("1045"), "{e}");
        // Made through the relay: at once, its absence forgotten.
        connect("pia", "pia-pw").await.expect_err("not yet");
        o.query_drop("CREATE USER 'pia'@'%' IDENTIFIED BY 'pia-pw'")
            .await
            .expect("create through the relay");
        connect("pia", "pia-pw")
            .await
            .expect("made through the relay: at once");
        root.query_drop("DROP USER 'nina'@'%', 'otto'@'%', 'pia'@'%'")
            .await
            .expect("clean up");
    });
}

/// A password rotated directly on the server: a direct session keeps
/// going, a relayed one needs new server connections, which the server
/// now refuses with the password the session logged in with. The client
/// is told why (the server's 1045 and what it means here), not a bare
/// "Access denied" in the middle of a session; a login with the new
/// password works once the relay's kept copy of the account is older
/// than its TTL.
#[test]
fn a_password_rotated_on_the_server_says_why_a_session_is_refused() {
    let _accounts = beside_others();
    let setup = [
        "DROP USER IF EXISTS 'rosa'@'%'",
        "CREATE USER 'rosa'@'%' IDENTIFIED BY 'rosa-1'",
    ];
    let (srv, rt, port, _relay) = per_user_relay(&setup);
    rt.block_on(async {
        let mut r = client(port, "rosa", "rosa-1")
            .connect(Duration::from_secs(5))
            .await
            .expect("rosa");
        let one: Option<i64> = r.query_first("SELECT 1").await.expect("before");
        assert_eq!(one, Some(1));
        let mut root = srv.connect().await;
        root.query_drop("SET PASSWORD FOR 'rosa'@'%' = PASSWORD('rosa-2')")
            .await
            .expect("rotate");
        // Its server connections end (a restart, wait_timeout): the
        // session needs a new one.
        let ids: Vec<u64> = root
            .query("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'rosa'")
            .await
            .expect("ids");
        for id in ids {
            let _ = root.query_drop(format!("KILL {id}")).await;
        }
        let e = r
            .query_drop("SELECT 1")
            .await
            .expect_err("the old password is refused");
        let e = e.to_string();
        assert!(
            e.contains("1045") && e.contains("password changed since"),
            "{e}"
        );
        tokio::time::sleep(sqlfleet_relay::backend::accounts::TTL).await;
        let mut n = client(port, "rosa", "rosa-2")
            .connect(Duration::from_secs(5))
            .await
            .expect("the new password");
        let one: Option<i64> = n.query_first("SELECT 1").await.expect("after");
        assert_eq!(one, Some(1));
        root.query_drop("DROP USER 'rosa'@'%'")
            .await
            .expect("clean up");
    });
}

/// Per-user mode: a client's account may write a table whose columns the
/// relay's own account cannot see, so the relay cannot tell whether a
/// column default advances a sequence (the server reports no such
/// change). Such a write keeps the client's connection, as one whose
/// default is known to does; a table the relay can see and whose defaults
/// do nothing still shares it. Likewise a read of a view whose definition
/// the relay's account may not read: it may call a function that takes a
/// user lock.
#[test]
fn a_write_or_a_view_the_relay_cannot_see_keeps_the_connection() {
    let _accounts = beside_others();
    let setup = [
        "DROP DATABASE IF EXISTS unseen",
        "CREATE DATABASE unseen",
        "CREATE SEQUENCE unseen.s",
        "CREATE TABLE unseen.ts (id BIGINT DEFAULT NEXTVAL(unseen.s) PRIMARY KEY, v INT)",
        "CREATE TABLE unseen.plain (v INT)",
        "CREATE FUNCTION unseen.f() RETURNS INT DETERMINISTIC RETURN GET_LOCK('unseen-view', 1)",
        "CREATE VIEW unseen.v AS SELECT unseen.f() AS l",
        "CREATE VIEW unseen.vp AS SELECT v FROM unseen.plain",
        "DROP USER IF EXISTS 'relaylook'@'%', 'writer'@'%'",
        "CREATE USER 'relaylook'@'%' IDENTIFIED BY 'look-pw'",
        "GRANT SELECT ON mysql.user TO 'relaylook'@'%'",
        "GRANT TRIGGER ON *.* TO 'relaylook'@'%'",
        "GRANT SELECT ON unseen.plain TO 'relaylook'@'%'",
        "CREATE USER 'writer'@'%' IDENTIFIED BY 'writer-pw'",
        "GRANT ALL ON unseen.* TO 'writer'@'%'",
    ];
    let (srv, rt, port, relay) = per_user_relay_as(
        &setup,
        Some(("relaylook", "look-pw")),
        "max = 1\nwait_timeout = 1\n",
    );
    let connect = || async move {
        let mut t = client(port, "writer", "writer-pw");
        t.database = Some("unseen".into());
        t.connect(Duration::from_secs(5)).await
    };
    rt.block_on(async {
        // With one backend connection, a second client gets one (to log
        // in and to query) only if the first client's went back to the
        // pool.
        let shared = || async move {
            let r = match connect().await {
                Ok(mut b) => {
                    let r = b.query_drop("SELECT 1").await.map_err(|e| e.to_string());
                    let _ = b.disconnect().await;
                    r
                }
                Err(e) => Err(e.to_string()),
            };
            match r {
                Ok(()) => true,
                Err(e) => {
                    assert!(e.contains("1040"), "{e}");
                    false
                }
            }
        };
        let mut a = connect().await.expect("writer");
        a.query_drop("INSERT INTO plain VALUES (1)")
            .await
            .expect("plain insert");
        assert!(shared().await, "a table the relay sees, nothing unseen");
        a.query_drop("INSERT INTO ts (v) VALUES (1)")
            .await
            .expect("insert");
        assert!(
            !shared().await,
            "a table the relay cannot see went to the pool after a write"
        );
        let last: Option<i64> = a.query_first("SELECT LASTVAL(s)").await.expect("lastval");
        assert_eq!(last, Some(1), "the writer's LASTVAL");
        a.disconnect().await.expect("quit");
        // Views whose definitions the relay's account may not read (it has
        // no SELECT and SHOW VIEW on them) count as calling functions: the
        // reader keeps its lock.
        let mut a = connect().await.expect("reader");
        a.query_drop("SELECT * FROM plain").await.expect("read");
        assert!(shared().await, "a plain table's read shares");
        a.query_drop("SELECT * FROM v").await.expect("view read");
        assert!(
            !shared().await,
            "a view the relay cannot read went to the pool after a read"
        );
        let mine: Option<i64> = a
            .query_first("SELECT RELEASE_LOCK('unseen-view')")
            .await
            .expect("release");
        assert_eq!(mine, Some(1), "the reader's lock");
        a.disconnect().await.expect("quit");
    });
    let n = relay.metric("sqlfleet_relay_pins_total{reason=\"trigger_or_sequence_default\"}");
    assert!(n >= 1.0, "pins counted: {n}");
    rt.block_on(async {
        let mut root = srv.connect().await;
        root.query_drop("DROP USER 'relaylook'@'%', 'writer'@'%'")
            .await
            .expect("drop users");
        root.query_drop("DROP DATABASE unseen")
            .await
            .expect("drop db");
    });
}

/// Per-user mode with the server unreachable: a login cannot be checked,
/// and the client is told that — not "Access denied", which would make it
/// blame its password.
#[test]
fn a_login_while_the_server_is_unreachable_says_so_not_access_denied() {
    let _accounts = beside_others();
    let port = free_port();
    let metrics_port = free_port();
    let dead = free_port();
    let toml = format!(
        "[relay]\nlisten = [\"127.0.0.1:{port}\"]\nmetrics = \"127.0.0.1:{metrics_port}\"\n\n\
         [backend]\nservers = [\"127.0.0.1:{dead}\"]\nuser = \"root\"\npassword = \"x\"\naccounts = \"per-user\"\n\n\
         [pool]\nmax = 2\nwait_timeout = 2\n"
    );
    let _relay = start_config(&toml, port, metrics_port);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let e = rt
        .block_on(client(port, "dana", "dana-pw").connect(Duration::from_secs(10)))
        .expect_err("nothing to log in to");
    let text = e.to_string();
    assert!(!text.contains("1045"), "{text}");
    assert!(!text.contains("Access denied"), "{text}");
    assert!(text.contains("1429"), "{text}");
    assert!(text.contains("cannot check the login of 'dana'"), "{text}");
}

/// An error the relay repeats from the server (here the database a
/// per-user client may not use, met when its connection is leased) keeps
/// every character: it was cut at 55 ("... to database 'nc3_se").
#[test]
fn a_database_refusal_reaches_the_client_whole() {
    let _accounts = beside_others();
    let srv = server();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let db = "a_database_whose_name_is_long_enough_to_be_cut_before";
    rt.block_on(async {
        let mut root = srv.connect().await;
        for sql in [
            "DROP USER IF EXISTS 'nc3app'@'%'".to_string(),
            "CREATE USER 'nc3app'@'%' IDENTIFIED BY 'nc3-pw'".into(),
            format!("CREATE DATABASE IF NOT EXISTS {db}"),
        ] {
            root.query_drop(sql).await.expect("set-up");
        }
    });
    let port = free_port();
    let metrics_port = free_port();
    let pw = srv.sandbox.password().expect("pw");
    let toml = format!(
        "[relay]\nlisten = [\"127.0.0.1:{port}\"]\nmetrics = \"127.0.0.1:{metrics_port}\"\n\n\
         [backend]\nservers = [\"127.0.0.1:{}\"]\nuser = \"root\"\npassword = {}\naccounts = \"per-user\"\n\n\
         [pool]\nmax = 2\nwait_timeout = 5\n",
        srv.sandbox.meta.primary().port,
        quoted(pw.expose()),
    );
    let _relay = start_config(&toml, port, metrics_port);
    let direct_port = srv.sandbox.meta.primary().port;
    let refusal = |p: u16| {
        let mut t = client(p, "nc3app", "nc3-pw");
        t.database = Some(db.to_string());
        rt.block_on(async {
            match t.connect(Duration::from_secs(10)).await {
                Err(e) => e.to_string(),
                Ok(mut c) => match c.query_drop("SELECT 1").await {
                    Err(e) => e.to_string(),
                    Ok(()) => panic!("nc3app may use {db}"),
                },
            }
        })
    };
    let (direct, relayed) = (refusal(direct_port), refusal(port));
    assert!(direct.contains(db), "{direct}");
    assert!(
        relayed.contains(&format!("'{db}'")),
        "cut: {relayed} (directly: {direct})"
    );
    assert!(relayed.contains("1044"), "{relayed}");
}

/// An account without REPLICATION SLAVE asks for a binlog dump through
/// the relay: it gets the server's refusal (1227) and its session goes on
/// as a direct one does — the next command is answered. Twenty such
/// sessions in a row leave the pool to everyone else. Before: the relay
/// switched to passing bytes after the dump command, the next command went
/// nowhere, and each such session held a server connection for good (the
/// pool ran out and every account got 1040).
#[test]
fn a_refused_binlog_dump_leaves_the_session_usable_and_the_pool_free() {
    let _accounts = beside_others();
    let setup = [
        "DROP USER IF EXISTS 'rita'@'%'",
        "CREATE USER 'rita'@'%' IDENTIFIED BY 'rita-pw'",
    ];
    let (_srv, rt, port, _relay) = per_user_relay_as(&setup, None, "max = 3\n");
    rt.block_on(async {
        use sqlfleet_wire::{handshake, packet};
        let caps = handshake::MULTI_RESULTS | handshake::DEPRECATE_EOF;
        let mut held = Vec::new();
        for round in 0..20 {
            let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("connect");
            common::wire_login(&mut s, "rita", "rita-pw", caps, 45, None)
                .await
                .expect("login");
            // COM_BINLOG_DUMP: position 4, no flags, server id 77, no file.
            let mut dump = vec![0x12, 4, 0, 0, 0, 0, 0];
            dump.extend(77u32.to_le_bytes());
            packet::write(&mut s, 0, &dump).await.expect("send dump");
            let p = tokio::time::timeout(Duration::from_secs(10), packet::read(&mut s, 1 << 20))
                .await
                .expect("an answer to the dump")
                .expect("reply");
            assert_eq!(
                packet::parse_err(&p.payload).map(|e| e.0),
                Some(1227),
                "round {round}: {:?}",
                p.payload
            );
            packet::write(&mut s, 0, b"\x03SELECT 42")
                .await
                .expect("query");
            let p = tokio::time::timeout(Duration::from_secs(10), packet::read(&mut s, 1 << 20))
                .await
                .unwrap_or_else(|_| {
                    panic!("round {round}: the session after a refused dump answers nothing")
                })
                .expect("reply");
            assert_ne!(
                p.payload.first(),
                Some(&0xFF),
                "round {round}: {:?}",
                p.payload
            );
            // Keep the first two open: they hold at most two of the three.
            if round < 2 {
                held.push(s);
            }
        }
        // Another account still gets a server connection.
        let mut c = client(port, "rita", "rita-pw")
            .connect(Duration::from_secs(10))
            .await
            .expect("a login after twenty refused dumps");
        let n: Option<i64> = c.query_first("SELECT 1").await.expect("query");
        assert_eq!(n, Some(1));
        drop(held);
    });
}

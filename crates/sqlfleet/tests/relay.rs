//! `sqlfleet relay` (session pooling) with real clients against a real
//! server: the mariadb CLI, the Rust driver with prepared statements,
//! transactions, errors, wrong passwords, connection reuse, pool limits.

mod common;

use std::time::{Duration, Instant};

use common::relay::{app, cli, start_relay};
use mysql_async::prelude::Queryable;
use sqlfleet_testkit::server;

#[test]
fn clients_work_through_the_relay_and_reuse_backends() {
    let srv = server();
    let relay = start_relay(srv, &[]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("relay"));

    // The stock client: DDL, a rolled-back transaction, an error.
    let o = cli(relay.port, &["-D", &db, "-e", "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10)); INSERT INTO t VALUES (1,'a'); BEGIN; INSERT INTO t VALUES (2,'b'); ROLLBACK; SELECT COUNT(*) FROM t"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(common::stdout(&o).trim(), "1");
    let o = cli(relay.port, &["-e", "SELEC 1"]);
    assert!(!o.status.success());
    assert!(
        common::stderr(&o).contains("ERROR 1064"),
        "{}",
        common::stderr(&o)
    );

    rt.block_on(async {
        // Binary-protocol prepared statements and a transaction with the Rust driver.
        let mut c = app(relay.port, "app-pw", Some(&db))
            .connect(Duration::from_secs(5))
            .await
            .expect("connect via relay");
        c.exec_drop("INSERT INTO t VALUES (?, ?)", (3, "c"))
            .await
            .expect("prepared insert");
        let v: Option<String> = c
            .exec_first("SELECT v FROM t WHERE id = ?", (3,))
            .await
            .expect("prepared select");
        assert_eq!(v.as_deref(), Some("c"));
        c.query_drop("SET @mine = 42").await.expect("set");
        let id1: Option<u64> = c.query_first("SELECT CONNECTION_ID()").await.expect("id");
        c.disconnect().await.expect("quit");

        // The next client gets a pooled backend connection (no new login),
        // reset: the pinned one goes back once its reset is done.
        let resets = "sqlfleet_relay_backend_resets_total";
        let t0 = Instant::now();
        while relay.metric(resets) < 1.0 {
            assert!(t0.elapsed() < Duration::from_secs(5), "no reset");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let opened = relay.metric("sqlfleet_relay_backend_connects_total");
        let mut c = app(relay.port, "app-pw", Some(&db))
            .connect(Duration::from_secs(5))
            .await
            .expect("connect again");
        let (id2, mine): (Option<u64>, Option<i64>) = c
            .query_first("SELECT CONNECTION_ID(), @mine")
            .await
            .expect("q")
            .expect("row");
        assert_eq!(mine, None, "session state reset between clients");
        assert!(id2.is_some() && id1.is_some());
        assert_eq!(
            relay.metric("sqlfleet_relay_backend_connects_total"),
            opened,
            "served from the pool"
        );
        c.disconnect().await.expect("quit");

        // A wrong password is refused by the relay itself.
        let e = app(relay.port, "nope", None)
            .connect(Duration::from_secs(5))
            .await
            .expect_err("refused");
        assert_eq!(e.server_code(), Some(1045), "{e}");
    });
}

#[test]
fn a_full_pool_gives_a_clear_error_after_the_wait_timeout() {
    let srv = server();
    let relay = start_relay(
        srv,
        &[
            "--mode",
            "session",
            "--pool-max",
            "1",
            "--wait-timeout",
            "0.5",
        ],
    );
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let mut holder = app(relay.port, "app-pw", None)
            .connect(Duration::from_secs(5))
            .await
            .expect("first");
        holder
            .query_drop("SELECT 1")
            .await
            .expect("holds a backend");
        let t0 = Instant::now();
        // Session mode leases at the first command.
        let mut second = app(relay.port, "app-pw", None)
            .connect(Duration::from_secs(5))
            .await
            .expect("login needs no backend");
        let e = second.query_drop("SELECT 1").await.expect_err("pool full");
        assert!(
            matches!(&e, mysql_async::Error::Server(s) if s.code == 1040),
            "{e}"
        );
        // The server's words when it is full (go-sql-driver's own tests
        // match them); the relay's metrics say why.
        assert!(
            matches!(&e, mysql_async::Error::Server(s) if s.message == "Too many connections"),
            "{e}"
        );
        assert!(relay.metric("sqlfleet_relay_pool_wait_timeouts_total") >= 1.0);
        assert!(t0.elapsed() >= Duration::from_millis(400));
        holder.disconnect().await.expect("quit");
        // The slot is free again.
        let c = app(relay.port, "app-pw", None)
            .connect(Duration::from_secs(5))
            .await
            .expect("after release");
        c.disconnect().await.expect("quit");
    });
}

#[test]
fn bench_pool_measures_through_the_relay() {
    let srv = server();
    let relay = start_relay(srv, &[]);
    let dir = tempfile::tempdir().expect("tmp");
    let o = common::sqlfleet()
        .args([
            "bench",
            "pool",
            &format!("--defaults-file={}", srv.defaults_file().display()),
        ])
        .args([
            "--via",
            &format!("127.0.0.1:{}", relay.port),
            "--queries-per-connection",
            "1,3",
            "--threads",
            "2",
            "--samples",
            "2",
            "--rows",
            "8",
        ])
        .arg("--out")
        .arg(dir.path())
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("results.json")).expect("json"))
            .expect("json");
    let via: Vec<&serde_json::Value> = r["pool"]
        .as_array()
        .expect("cells")
        .iter()
        .filter(|c| c["target"].as_str().expect("t").starts_with("via"))
        .collect();
    assert_eq!(via.len(), 2);
    for c in via {
        assert_eq!(c["errors"], 0, "{c}");
        assert!(c["qps"]["mean"].as_f64().expect("qps") > 0.0);
    }
}

#[test]
fn idle_connections_close_down_to_the_pool_minimum() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-min", "2", "--idle-timeout", "1"]);
    let series = format!(
        "sqlfleet_relay_backend_connections{{backend=\"127.0.0.1:{}\"}}",
        srv.sandbox.meta.primary().port
    );
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        // Five clients in transactions at once need five backend connections.
        let mut clients = Vec::new();
        for _ in 0..5 {
            let mut c = app(relay.port, "app-pw", None)
                .connect(Duration::from_secs(5))
                .await
                .expect("connect");
            c.query_drop("BEGIN").await.expect("begin");
            clients.push(c);
        }
        assert_eq!(relay.metric(&series), 5.0);
        for mut c in clients {
            c.query_drop("COMMIT").await.expect("commit");
            c.disconnect().await.expect("quit");
        }
    });
    let t0 = Instant::now();
    while relay.metric(&series) != 2.0 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "still {} open",
            relay.metric(&series)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_backend_on_a_unix_socket_and_a_client_on_one() {
    let srv = server();
    let sock = srv.sandbox.layout.node(srv.sandbox.meta.primary()).socket();
    let dir = tempfile::tempdir().expect("tmp");
    let listen = dir.path().join("relay.sock");
    // A relay whose only backend is the server's socket, reached by a client
    // over the relay's own socket.
    let pw = srv.sandbox.password().expect("pw");
    let mut child = common::sqlfleet()
        .args(["relay", "--listen", &format!("unix:{}", listen.display())])
        .args(["--backend", &format!("unix:{}", sock.display())])
        .args([
            "--no-defaults",
            "-u",
            "root",
            "--shared-account",
            "--client-user",
            "app:app-pw",
        ])
        .env("MYSQL_PWD", pw.expose())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("relay");
    let t0 = Instant::now();
    while std::os::unix::net::UnixStream::connect(&listen).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "relay did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = std::process::Command::new("mariadb")
        .arg(format!("--socket={}", listen.display()))
        .args([
            "-u",
            "app",
            "--password=app-pw",
            "-N",
            "-B",
            "-e",
            "SELECT @@socket LIKE '%mysqld.sock'",
        ])
        .output()
        .expect("mariadb");
    // The greeting carries the backend's version, read over its socket,
    // exactly as the server gives it (the relay names itself on /status).
    let direct = std::process::Command::new("mariadb")
        .arg(format!("--defaults-file={}", srv.defaults_file().display()))
        .args(["-e", "status"])
        .output()
        .expect("mariadb status");
    let status = std::process::Command::new("mariadb")
        .arg(format!("--socket={}", listen.display()))
        .args(["-u", "app", "--password=app-pw", "-e", "status"])
        .output()
        .expect("mariadb status");
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    assert_eq!(common::stdout(&o).trim(), "1", "{}", common::stderr(&o));
    let version = |o: &std::process::Output| {
        common::stdout(o)
            .lines()
            .find(|l| l.starts_with("Server version:"))
            .unwrap_or_default()
            .to_string()
    };
    let (relayed, server) = (version(&status), version(&direct));
    assert!(server.contains("-MariaDB"), "{}", common::stdout(&direct));
    assert_eq!(relayed, server, "the greeting's version is the server's");
    assert!(!listen.exists(), "socket file removed at exit");
}

/// What an operator reads: the metrics page passes `promtool check
/// metrics` (histograms cumulative, per-backend counters and latency
/// histogram present), and the log has a line for a refused login and one
/// for a backend that is down (JSON lines here).
#[test]
fn metrics_pass_promtool_and_logs_name_failed_logins_and_down_backends() {
    let srv = server();
    let port = common::relay::free_port();
    let metrics_port = common::relay::free_port();
    let pw = srv.sandbox.password().expect("pw");
    let live = format!("127.0.0.1:{}", srv.sandbox.meta.primary().port);
    let dead = format!("127.0.0.1:{}", common::relay::free_port());
    let mut child = common::sqlfleet()
        .args([
            "relay",
            "--log-format",
            "json",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .args(["--backend", &live, "--backend", &dead])
        .args([
            "--no-defaults",
            "-u",
            "root",
            "--shared-account",
            "--client-user",
            "app:app-pw",
        ])
        .args([
            "--metrics",
            &format!("127.0.0.1:{metrics_port}"),
            "--health-interval",
            "0.1",
        ])
        .env("MYSQL_PWD", pw.expose())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("relay");
    common::relay::wait_listening(port);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        // Traffic through the live backend (the dead one gets no clients
        // once checked), a wrong password, and a pool wait.
        tokio::time::sleep(Duration::from_millis(500)).await;
        for _ in 0..5 {
            let mut c = app(port, "app-pw", None)
                .connect(Duration::from_secs(5))
                .await
                .expect("connect");
            let _: Option<i64> = c.query_first("SELECT 1").await.expect("select");
            let _ = c.query_drop("SELEC 1").await;
            c.disconnect().await.expect("quit");
        }
        let e = app(port, "wrong", None)
            .connect(Duration::from_secs(5))
            .await
            .expect_err("wrong password");
        assert!(e.to_string().contains("1045"), "{e}");
    });
    let page = sqlfleet_testkit::proxy::http_get(metrics_port, "/metrics");
    let body = page.split_once("\r\n\r\n").map(|x| x.1).unwrap_or_default();
    assert!(
        body.contains(&format!(
            "sqlfleet_relay_backend_commands_total{{backend=\"{live}\"}}"
        )) && body.contains("sqlfleet_relay_backend_command_seconds_bucket"),
        "{body}"
    );
    // Every histogram cumulative: bucket counts never fall as `le` grows,
    // and the +Inf bucket equals _count.
    let mut last: std::collections::HashMap<String, f64> = Default::default();
    for l in body.lines().filter(|l| l.contains("_bucket{")) {
        let (series, value) = l.rsplit_once(' ').expect("sample");
        let key = series.split("le=").next().unwrap_or_default().to_string();
        let v: f64 = value.parse().expect("number");
        let prev = last.insert(key.clone(), v).unwrap_or(0.0);
        assert!(v >= prev, "histogram not cumulative at {l} (before {prev})");
    }
    let mut check = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package; scripts/deps.sh installs it)");
    {
        use std::io::Write;
        child_stdin(&mut check)
            .write_all(body.as_bytes())
            .expect("feed");
    }
    let out = check.wait_with_output().expect("promtool");
    // promtool exits 0 when valid (lint warnings go to stdout with exit 3).
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() || (out.status.code() == Some(3) && !said.contains("error")),
        "promtool: {said}"
    );
    assert!(
        !said.contains("non-cumulative") && !said.contains("error while"),
        "{said}"
    );

    // The log lines so far.
    let _ = child.kill();
    let o = child.wait_with_output().expect("relay output");
    let log = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let said = |needle: &str, level: &str| {
        lines.iter().any(|v| {
            v["level"] == level && v["message"].as_str().is_some_and(|m| m.contains(needle))
        })
    };
    assert!(said("login refused", "WARN"), "{log}");
    assert!(said(&format!("backend {dead} is down"), "ERROR"), "{log}");
    assert!(
        said(&format!("backend {live} is up as primary"), "INFO"),
        "{log}"
    );
}

/// A relay whose backend account lacks the TRIGGER privilege cannot see
/// triggers in information_schema, so it cannot tell which writes take a
/// user lock or advance a sequence unseen: it says so in its log.
#[test]
fn a_backend_account_that_cannot_see_triggers_is_named_in_the_log() {
    let srv = server();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("relaynotrigger"));
    rt.block_on(async {
        let mut c = srv.connect().await;
        for sql in [
            "CREATE USER IF NOT EXISTS 'relaynotrig'@'%' IDENTIFIED BY 'nt-pw'".to_string(),
            format!("GRANT SELECT, INSERT, CREATE ON {db}.* TO 'relaynotrig'@'%'"),
            format!("CREATE TABLE {db}.t (v INT)"),
        ] {
            c.query_drop(sql).await.expect("setup");
        }
    });
    let port = common::relay::free_port();
    let mut child = common::sqlfleet()
        .args(["relay", "--listen", &format!("127.0.0.1:{port}")])
        .args([
            "--backend",
            &format!("127.0.0.1:{}", srv.sandbox.meta.primary().port),
        ])
        .args([
            "--no-defaults",
            "-u",
            "relaynotrig",
            "--shared-account",
            "--client-user",
            "app:app-pw",
        ])
        .env("MYSQL_PWD", "nt-pw")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("relay");
    common::relay::wait_listening(port);
    rt.block_on(async {
        let mut c = app(port, "app-pw", Some(&db))
            .connect(Duration::from_secs(5))
            .await
            .expect("connect");
        c.query_drop("INSERT INTO t VALUES (1)")
            .await
            .expect("insert");
        c.disconnect().await.expect("quit");
    });
    let _ = child.kill();
    let o = child.wait_with_output().expect("relay output");
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(
        log.lines()
            .any(|l| l.contains("WARN") && l.contains("no global TRIGGER privilege")),
        "{log}"
    );
}

fn child_stdin(c: &mut std::process::Child) -> std::process::ChildStdin {
    c.stdin.take().expect("stdin")
}

/// SIGTERM stops the accepting and lets the sessions that run finish: a
/// statement in flight gets its result, a new client is refused, and the
/// relay exits 0 once the last session has ended.
#[test]
fn sigterm_lets_running_sessions_finish_and_refuses_new_ones() {
    let srv = server();
    let mut relay = start_relay(srv, &[]);
    let port = relay.port;
    let slow =
        std::thread::spawn(move || cli(port, &["-N", "-B", "-e", "SELECT SLEEP(2), 'done'"]));
    // The statement is on the server before the signal.
    let t0 = Instant::now();
    let mut running = false;
    while t0.elapsed() < Duration::from_secs(10) && !running {
        running = srv_running(srv, "SELECT SLEEP(2)");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(running, "the slow statement never reached the server");
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &relay.child.id().to_string()])
        .status();
    std::thread::sleep(Duration::from_millis(300));
    let late = cli(port, &["-N", "-B", "-e", "SELECT 1"]);
    assert!(
        !late.status.success(),
        "a client after SIGTERM was served: {}",
        common::stdout(&late)
    );
    let o = slow.join().expect("slow client");
    assert_eq!(
        common::stdout(&o).trim(),
        "0\tdone",
        "the statement in flight: {}",
        common::stderr(&o)
    );
    let status = relay.child.wait().expect("relay exit");
    assert_eq!(status.code(), Some(0), "the relay's exit after draining");
}

fn srv_running(srv: &sqlfleet_testkit::TestServer, text: &str) -> bool {
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(srv.running(text)) > 0
}

/// Runs the stock client through `port` as `user`, batch mode.
fn cli_as(port: u16, user: &str, password: &str, sql: &str) -> std::process::Output {
    std::process::Command::new("mariadb")
        .args(["--no-defaults", "-h", "127.0.0.1", "-P", &port.to_string()])
        .args(["-u", user, &format!("--password={password}"), "-N", "-B"])
        .args(["-e", sql])
        .output()
        .expect("mariadb client")
}

/// A panic (a bug) in the relay's own work ends only what it hit: the
/// client whose session start panicked is dropped and the next one is
/// served (the accept loop ended with the panic before, its listener
/// closed, and every later client was refused); a session that panicked
/// holding a backend connection gives back its place among the backend's
/// busy ones (it stayed counted for good, and the least-busy pick shunned
/// that backend); the pool's upkeep starts again and keeps --pool-min
/// open. Each is logged with the panic's words and counted in
/// internal_errors_total.
#[test]
fn a_panic_in_a_session_or_the_pools_upkeep_ends_only_what_it_hit() {
    let (child, port, metrics_port) = relay_with_failpoints(
        &["--pool-min", "2"],
        "relay::session_start=1*panic;relay::leased=1*panic;relay::maintain=1*panic",
    );
    let status = || -> serde_json::Value {
        let at = format!("127.0.0.1:{metrics_port}");
        let (_, _, body) = sqlfleet_testkit::http::http_get(&at, "/status", &[]);
        serde_json::from_str(&body).expect("status json")
    };
    // The first connection (wait_listening's) met the session start's
    // panic; each client here connects anew: the first one's lease
    // panics, the next ones are served.
    let answers: Vec<String> = (0..3)
        .map(|_| {
            let o = cli_as(port, "app", "app-pw", "SELECT 41 + 1");
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        })
        .collect();
    assert_eq!(answers, ["", "42", "42"], "served after the panics");
    let t0 = Instant::now();
    loop {
        let s = status();
        let b = &s["backends"][0];
        let settled = s["internal_errors"] == 3
            && s["clients_connected"] == 0
            && b["clients_busy"] == 0
            && b["connections_open"] == 2;
        if settled {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "three panics counted, nothing left busy, --pool-min kept: {s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = stderr_after_kill(child);
    for (what, then) in [
        ("starting a client's session", "the relay accepts on"),
        ("session stopped at an internal error", "the others go on"),
        ("the pool's upkeep", "it starts again"),
    ] {
        assert!(
            log.lines().any(|l| l.contains(what)
                && l.contains(then)
                && l.contains("a bug in sqlfleet")
                && l.contains("failpoint relay::")),
            "{what}: said with the panic's words: {log}"
        );
    }
}

/// A relay in front of the shared server's primary (JSON logs, a
/// metrics port, user `app` on a shared account) with `failpoints` armed
/// and `extra` flags, listening: the child (stderr piped), its port and
/// its metrics port.
fn relay_with_failpoints(extra: &[&str], failpoints: &str) -> (std::process::Child, u16, u16) {
    let srv = server();
    let port = common::relay::free_port();
    let metrics_port = common::relay::free_port();
    let pw = srv.sandbox.password().expect("pw");
    let live = format!("127.0.0.1:{}", srv.sandbox.meta.primary().port);
    let child = common::sqlfleet()
        .args(["relay", "--log-format", "json"])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--metrics", &format!("127.0.0.1:{metrics_port}")])
        .args(["--backend", &live])
        .args(extra)
        .args(["--no-defaults", "-u", "root", "--shared-account"])
        .args(["--client-user", "app:app-pw"])
        .env("MYSQL_PWD", pw.expose())
        .env("SQLFLEET_FAILPOINTS", failpoints)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("relay");
    common::relay::wait_listening(port);
    (child, port, metrics_port)
}

/// A relay's stderr, read to its end once the relay is killed.
fn stderr_after_kill(mut child: std::process::Child) -> String {
    let _ = child.kill();
    let mut text = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut text);
    }
    let _ = child.wait();
    text
}

/// Secure by default: with no account flag a client logs in to the server
/// as itself and gets its own privileges, with no client list given; a
/// shared account is an explicit choice that needs the relay's own list
/// and is announced at start with the privileges every client gets.
#[test]
fn by_default_each_client_runs_on_the_server_as_itself() {
    let srv = server();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("own_account"));
    rt.block_on(async {
        let mut c = srv.connect().await;
        c.query_drop(format!(
            "CREATE USER IF NOT EXISTS 'relay_own'@'%' IDENTIFIED BY 'own-pw'; \
             GRANT SELECT ON `{db}`.* TO 'relay_own'@'%'"
        ))
        .await
        .expect("make the account");
    });
    let pw = srv.sandbox.password().expect("pw");
    let backend = format!("127.0.0.1:{}", srv.sandbox.meta.primary().port);
    let spawn = |port: u16, extra: &[&str]| {
        common::sqlfleet()
            .args(["relay", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--backend", &backend, "--no-defaults", "-u", "root"])
            .args(extra)
            .env("MYSQL_PWD", pw.expose())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("relay")
    };

    // The default: no client list, each client as itself.
    let port = common::relay::free_port();
    let child = spawn(port, &[]);
    common::relay::wait_listening(port);
    let o = cli_as(port, "relay_own", "own-pw", "SELECT CURRENT_USER()");
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(common::stdout(&o).trim(), "relay_own@%");
    let o = cli_as(
        port,
        "relay_own",
        "own-pw",
        "SELECT COUNT(*) FROM mysql.user",
    );
    assert!(
        !o.status.success() && common::stderr(&o).contains("ERROR 1142"),
        "a client without the privilege must not read mysql.user through the relay: {} {}",
        common::stdout(&o),
        common::stderr(&o)
    );
    let o = cli_as(port, "relay_own", "wrong", "SELECT 1");
    assert!(
        common::stderr(&o).contains("ERROR 1045"),
        "{}",
        common::stderr(&o)
    );
    let o = cli_as(port, "root", pw.expose(), "SELECT CURRENT_USER()");
    assert!(
        common::stdout(&o).starts_with("root@"),
        "{}",
        common::stderr(&o)
    );
    let log = stderr_after_kill(child);
    assert!(
        log.contains("clients log in to the server as themselves")
            && !log.contains("shared account"),
        "{log}"
    );

    // A shared account without the relay's own client list is refused.
    let o = common::sqlfleet()
        .args(["relay", "--listen", "127.0.0.1:0", "--backend", &backend])
        .args(["--no-defaults", "-u", "root", "--shared-account"])
        .env("MYSQL_PWD", pw.expose())
        .output()
        .expect("run");
    assert!(!o.status.success());
    assert!(
        common::stderr(&o).contains("--shared-account: give client accounts"),
        "{}",
        common::stderr(&o)
    );

    // Client accounts without --shared-account would be ignored: refused.
    let o = common::sqlfleet()
        .args(["relay", "--listen", "127.0.0.1:0", "--backend", &backend])
        .args(["--no-defaults", "-u", "root", "--client-user", "app:app-pw"])
        .env("MYSQL_PWD", pw.expose())
        .output()
        .expect("run");
    assert!(!o.status.success());
    assert!(
        common::stderr(&o).contains("name the accounts of --shared-account mode"),
        "{}",
        common::stderr(&o)
    );

    // Chosen: every client is root, and the log says so with root's grants
    // (never its password hash).
    let port = common::relay::free_port();
    let child = spawn(port, &["--shared-account", "--client-user", "app:app-pw"]);
    common::relay::wait_listening(port);
    let o = cli_as(port, "app", "app-pw", "SELECT CURRENT_USER()");
    assert!(
        common::stdout(&o).starts_with("root@"),
        "{}",
        common::stderr(&o)
    );
    let log = stderr_after_kill(child);
    assert!(
        log.contains("every client runs as the backend account 'root' (shared account)")
            && log.contains("GRANT ALL PRIVILEGES ON *.* TO")
            && !log.contains("IDENTIFIED")
            && !log.contains(pw.expose()),
        "{log}"
    );
}

/// A panic in a backend's health check (a failpoint that panics once) is
/// a failed check said as an internal error: the backend is down until
/// the next check passes, and then serves again (before: the checking
/// task was gone and the backend stayed as last seen, up or down, with
/// nobody checking it — a backend that died later was never taken out).
#[test]
fn a_panic_in_a_health_check_is_a_failed_check_and_the_checks_go_on() {
    let (child, port, metrics_port) =
        relay_with_failpoints(&["--health-interval", "0.1"], "relay::health_check=1*panic");
    let live = format!("127.0.0.1:{}", server().sandbox.meta.primary().port);
    // A later check finds it again: its role is the primary's, which only
    // a health check gives.
    let primary = format!("sqlfleet_relay_backend_role{{backend=\"{live}\",role=\"primary\"}} 1");
    let t0 = Instant::now();
    while !sqlfleet_testkit::proxy::http_get(metrics_port, "/metrics").contains(&primary) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "never checked again"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = cli_as(port, "app", "app-pw", "SELECT 41 + 1");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "42");
    let log = stderr_after_kill(child);
    assert!(
        log.lines()
            .any(|l| l.contains(&format!("backend {live} is down"))
                && l.contains("the health check stopped at an internal error")
                && l.contains("failpoint relay::health_check panic")),
        "the failed check is said, with the panic's words: {log}"
    );
}

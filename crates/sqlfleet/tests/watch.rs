//! `sqlfleet watch` from the command line: --once exit codes and JSON, the
//! credential store (round trip, never in argv, wrong passphrase, damaged
//! file), test-alert through real sinks, JSON lines of state changes, and
//! the terminal screen driven in tmux.

mod common;

use std::io::Write;
use std::net::TcpListener;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{sqlfleet, stderr, stdout, tmux};
use sqlfleet_testkit::{replicated, sinks};

/// A port nothing listens on.
fn refused_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

#[test]
fn once_exit_codes_json_and_table() {
    let srv = replicated();
    let name = srv.sandbox.name().to_string();
    let run = |args: &[&str]| {
        sqlfleet()
            .arg("watch")
            .args(args)
            .env("SQLFLEET_HOME", srv.home())
            .stdin(Stdio::null())
            .output()
            .expect("run")
    };
    let o = run(&["--sandbox", &name, "--once"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let table = stdout(&o);
    assert_eq!(
        table.lines().filter(|l| l.contains("  ok  ")).count(),
        3,
        "{table}"
    );
    assert!(table.contains("3 servers: 3 ok"), "{table}");
    // --once says how it judged: one check, no hold times.
    assert!(table.contains("judged on one check"), "{table}");

    let primary = srv.sandbox.meta.primary().port;
    let dead = refused_port();
    let defaults = srv.defaults_file();
    let hosts = format!("127.0.0.1:{primary},127.0.0.1:{dead}");
    let o = run(&[
        &format!("--defaults-file={}", defaults.display()),
        "--hosts",
        &hosts,
        "--once",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON");
    assert!(
        v["judged"]
            .as_str()
            .is_some_and(|j| j.contains("hold time")),
        "{v}"
    );
    let state = |addr: String| {
        v["servers"]
            .as_array()
            .expect("servers")
            .iter()
            .find(|s| s["server"] == addr.as_str())
            .map(|s| s["state"].as_str().unwrap_or_default().to_string())
            .expect("server in output")
    };
    assert_eq!(state(format!("127.0.0.1:{primary}")), "ok");
    assert_eq!(state(format!("127.0.0.1:{dead}")), "down");

    let o = run(&["--hosts", &format!("127.0.0.1:{dead}"), "--once"]);
    assert_eq!(o.status.code(), Some(3), "{}", stdout(&o));
    assert!(stdout(&o).contains("Connection refused"), "{}", stdout(&o));

    // A server that accepts connections and never greets is stalled.
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = silent.local_addr().expect("addr").port();
    let o = run(&[
        "--hosts",
        &format!("127.0.0.1:{port}"),
        "--once",
        "--timeout",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stdout(&o).contains("stalled"), "{}", stdout(&o));
    assert!(stdout(&o).contains("sends no handshake"), "{}", stdout(&o));
}

#[test]
fn credential_store_round_trip_never_in_argv_and_clear_errors() {
    let srv = replicated();
    let home = tempfile::tempdir().expect("home");
    let port = srv.sandbox.meta.primary().port;
    let server = format!("127.0.0.1:{port}");
    let pw = srv
        .sandbox
        .password()
        .expect("root password")
        .expose()
        .to_string();
    let cmd = |args: &[&str], pass: &str| {
        let mut c = sqlfleet();
        c.arg("watch")
            .args(args)
            .env("SQLFLEET_HOME", home.path())
            .env("SQLFLEET_CREDS_PASSPHRASE", pass)
            .env_remove("MYSQL_PWD");
        c
    };
    let o = cmd(&["creds", "init"], "open sesame")
        .output()
        .expect("init");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    // The password goes in on stdin; while add waits for it, its argv
    // (and so `ps`) holds no secret.
    let mut add = cmd(&["creds", "add", &server, "--user", "root"], "open sesame")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("add");
    std::thread::sleep(Duration::from_millis(300));
    let argv = std::fs::read(format!("/proc/{}/cmdline", add.id())).expect("cmdline");
    assert!(
        !String::from_utf8_lossy(&argv).contains(&pw),
        "password in argv"
    );
    add.stdin
        .take()
        .expect("stdin")
        .write_all(format!("{pw}\n").as_bytes())
        .expect("write");
    let o = add.wait_with_output().expect("add");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let store = home.path().join("watch/creds.age");
    let raw = std::fs::read(&store).expect("store");
    assert!(
        !String::from_utf8_lossy(&raw).contains(&pw),
        "plain text on disk"
    );

    let o = cmd(&["creds", "list"], "open sesame")
        .output()
        .expect("list");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains(&server) && stdout(&o).contains("password=yes"));
    assert!(!stdout(&o).contains(&pw), "list printed the password");

    // The login comes from the store: no option file, no -p.
    let o = cmd(
        &[
            "--no-defaults",
            "-u",
            "nobody",
            "--hosts",
            &server,
            "--once",
        ],
        "open sesame",
    )
    .stdin(Stdio::null())
    .output()
    .expect("watch");
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));

    let o = cmd(&["creds", "list"], "wrong").output().expect("list");
    common::assert_setup_error(&o, "wrong passphrase");
    let o = cmd(&["--no-defaults", "--hosts", &server, "--once"], "wrong")
        .stdin(Stdio::null())
        .output()
        .expect("watch");
    common::assert_setup_error(&o, "wrong passphrase");

    let mut bytes = std::fs::read(&store).expect("store");
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&store, &bytes).expect("damage");
    let o = cmd(&["creds", "list"], "open sesame")
        .output()
        .expect("list");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(stderr(&o).trim_end().lines().count(), 1, "{}", stderr(&o));
}

/// Parallel `creds add` (a provisioning script adding a fleet's logins in
/// parallel) each land: every one exits 0 and the store then lists every
/// server. Before, each read the store, added its entry and wrote it back,
/// and the last write lost the others' (1 of 8 left, every add saying
/// "saved").
#[test]
fn parallel_credential_adds_all_land_in_the_store() {
    let home = tempfile::tempdir().expect("home");
    let cmd = |args: &[&str]| {
        let mut c = sqlfleet();
        c.arg("watch")
            .args(args)
            .env("SQLFLEET_HOME", home.path())
            .env("SQLFLEET_CREDS_PASSPHRASE", "open sesame");
        c
    };
    let o = cmd(&["creds", "init"]).output().expect("init");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let servers: Vec<String> = (1..=3).map(|i| format!("10.9.0.{i}:3306")).collect();
    let adds: Vec<std::process::Child> = servers
        .iter()
        .map(|server| {
            let mut c = cmd(&["creds", "add", server, "--user", "app"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("add");
            c.stdin
                .take()
                .expect("stdin")
                .write_all(b"pw\n")
                .expect("password");
            c
        })
        .collect();
    for (server, add) in servers.iter().zip(adds) {
        let o = add.wait_with_output().expect("add");
        assert_eq!(o.status.code(), Some(0), "{server}: {}", stderr(&o));
    }
    let o = cmd(&["creds", "list"]).output().expect("list");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let listed = stdout(&o);
    for server in &servers {
        assert!(
            listed.contains(server.as_str()),
            "{server} was lost:\n{listed}"
        );
    }
}

#[test]
fn test_alert_reports_every_channel() {
    let dir = tempfile::tempdir().expect("dir");
    let (url, hook) = sinks::webhook(0);
    let (smtp_port, mail) = sinks::smtp();
    let cfg = dir.path().join("watch.toml");
    std::fs::write(
        &cfg,
        format!(
            "[notify.webhook]\nurl = \"{url}\"\nattempts = 1\n[notify.smtp]\nserver = \"127.0.0.1\"\nport = {smtp_port}\ntls = \"none\"\nfrom = \"watch@example.com\"\nto = [\"dba@example.com\"]\n"
        ),
    )
    .expect("config");
    let o = sqlfleet()
        .args(["watch", "test-alert", "--config"])
        .arg(&cfg)
        .output()
        .expect("test-alert");
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("webhook\tdelivered"), "{}", stdout(&o));
    assert!(stdout(&o).contains("smtp\tdelivered"), "{}", stdout(&o));
    hook.wait_for(&["test-alert"], Duration::from_secs(5));
    mail.wait_for(
        &["test-alert", "RCPT TO:<dba@example.com>"],
        Duration::from_secs(5),
    );

    // One channel failing: reported, exit 2.
    let dead = refused_port();
    std::fs::write(
        &cfg,
        format!(
            "[notify.webhook]\nurl = \"http://127.0.0.1:{dead}/\"\nattempts = 1\n[notify.smtp]\nserver = \"127.0.0.1\"\nport = {smtp_port}\ntls = \"none\"\nfrom = \"watch@example.com\"\nto = [\"dba@example.com\"]\n"
        ),
    )
    .expect("config");
    let o = sqlfleet()
        .args(["watch", "test-alert", "--config"])
        .arg(&cfg)
        .output()
        .expect("test-alert");
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(stdout(&o).contains("webhook\tFAILED"), "{}", stdout(&o));

    // A typo in the config is refused, naming the key.
    std::fs::write(&cfg, "[rules.cpu]\nabove = 80\nhodl = 5\n").expect("config");
    let o = sqlfleet()
        .args(["watch", "--once", "--hosts", "127.0.0.1:1", "--config"])
        .arg(&cfg)
        .output()
        .expect("watch");
    common::assert_setup_error(&o, "hodl");
}

/// A listener that accepts and never greets (stalled), until dropped
/// (then refused: down).
fn silent_server() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let p = l.local_addr().expect("addr").port();
    (l, p)
}

#[test]
fn json_lines_report_each_state_change_once() {
    let srv = replicated();
    let primary = srv.sandbox.meta.primary().port;
    let (silent, port) = silent_server();
    let mut child = sqlfleet()
        .args([
            "watch",
            "--ui",
            "none",
            "--json",
            "--interval",
            "0.5",
            "--timeout",
            "1",
        ])
        .arg(format!("--defaults-file={}", srv.defaults_file().display()))
        .args(["--hosts", &format!("127.0.0.1:{primary},127.0.0.1:{port}")])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("watch");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<serde_json::Value>();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let v: serde_json::Value = serde_json::from_str(&l).expect("each line is JSON");
            let _ = tx.send(v);
        }
    });
    let wait = |server: &str, to: &str| {
        let t0 = Instant::now();
        loop {
            let v = rx
                .recv_timeout(Duration::from_secs(15).saturating_sub(t0.elapsed()))
                .unwrap_or_else(|_| panic!("no {server} -> {to} line"));
            if v["type"] == "state" && v["server"] == server && v["to"] == to {
                return v;
            }
        }
    };
    wait(&format!("127.0.0.1:{primary}"), "ok");
    let v = wait(&format!("127.0.0.1:{port}"), "stalled");
    assert_eq!(v["from"], "unknown");
    drop(silent);
    let v = wait(&format!("127.0.0.1:{port}"), "down");
    assert_eq!(v["from"], "stalled");
    // The incident line follows (3 failed checks by default).
    let t0 = Instant::now();
    loop {
        let v = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("incident line");
        if v["type"] == "incident" {
            assert_eq!(v["phase"], "opened");
            assert_eq!(v["server"], format!("127.0.0.1:{port}"));
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(10));
    }
    // SIGTERM stops it cleanly.
    unsafe_kill(child.id(), libc::SIGTERM);
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0));
}

fn unsafe_kill(pid: u32, sig: i32) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(pid as i32, sig);
    }
}

#[test]
fn the_screen_shows_every_server_and_a_state_change() {
    let srv = replicated();
    let (silent, port) = silent_server();
    let session = format!("sqlfleet-watch-{}", std::process::id());
    let hosts: Vec<String> = srv
        .sandbox
        .meta
        .nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .chain([format!("127.0.0.1:{port}")])
        .collect();
    let cmd = format!(
        "{} watch --defaults-file={} --hosts {} --interval 0.5 --timeout 1",
        env!("CARGO_BIN_EXE_sqlfleet"),
        srv.defaults_file().display(),
        hosts.join(",")
    );
    tmux(&["kill-session", "-t", &session]);
    tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "180",
        "-y",
        "30",
        &cmd,
    ]);
    let capture = || tmux(&["capture-pane", "-p", "-t", &session]);
    let until = |want: &dyn Fn(&str) -> bool, what: &str| {
        let t0 = Instant::now();
        loop {
            let screen = capture();
            if want(&screen) {
                return screen;
            }
            if t0.elapsed() > Duration::from_secs(20) {
                tmux(&["kill-session", "-t", &session]);
                panic!("the screen never showed {what}:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let screen = until(
        &|s| s.contains("3 ok") && s.contains("1 stalled"),
        "three ok servers and one stalled",
    );
    // Worst first: the stalled server's row comes before the ok ones.
    let row = |s: &str, needle: &str| s.lines().position(|l| l.contains(needle));
    let stalled_row = row(&screen, &format!("127.0.0.1:{port}")).expect("stalled row");
    for n in &srv.sandbox.meta.nodes {
        let r = row(&screen, &format!("127.0.0.1:{}", n.port)).expect("server row");
        assert!(stalled_row < r, "worst first:\n{screen}");
    }
    // Columns without data (no SSH: no CPU/MEM) give their room to WHY;
    // slow queries and the buffer pool hit rate have their columns.
    let header = screen
        .lines()
        .find(|l| l.contains("SERVER"))
        .unwrap_or_default()
        .to_string();
    assert!(
        !header.contains("CPU") && !header.contains("MEM"),
        "{header}"
    );
    until(
        &|s| s.contains("SLOW/s") && s.contains("BP HIT") && s.contains("ROLE"),
        "the SLOW/s, BP HIT and ROLE columns",
    );
    // Enter opens the detail pane; Esc closes it and does not quit.
    let pane = |s: &str| {
        s.lines()
            .any(|l| l.trim_start_matches('─').trim_start().starts_with("detail"))
    };
    tmux(&["send-keys", "-t", &session, "Enter"]);
    until(&|s| pane(s), "the detail pane");
    tmux(&["send-keys", "-t", &session, "Escape"]);
    until(
        &|s| !pane(s) && s.contains("SERVER"),
        "the pane closed by Esc",
    );
    // `t` opens the fleet's top statements (its header even before any
    // statement was seen); Esc closes it.
    let top = |s: &str| s.contains("top statements across the servers shown");
    tmux(&["send-keys", "-t", &session, "t"]);
    until(
        &|s| top(s) && s.contains("SHARE") && s.contains("CALLS/s"),
        "the top statements pane",
    );
    tmux(&["send-keys", "-t", &session, "Escape"]);
    until(
        &|s| !top(s) && s.contains("SERVER"),
        "the top pane closed by Esc",
    );
    drop(silent);
    until(&|s| s.contains("1 down"), "the silent server going down");
    // Compact mode and the filter answer keys.
    tmux(&["send-keys", "-t", &session, "c"]);
    until(
        &|s| !s.contains("VERSION") && s.contains("SERVER"),
        "the compact view",
    );
    tmux(&["send-keys", "-t", &session, "q"]);
    let t0 = Instant::now();
    while tmux(&["list-sessions"]).contains(&session) {
        assert!(t0.elapsed() < Duration::from_secs(5), "q did not quit");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An account without the monitoring privileges: the check names the
/// refusal instead of calling the connection lost.
/// A server that answers while the monitor account lacks a privilege is
/// `denied` (never `down`), with the GRANT this server version needs; an
/// account given exactly that GRANT is `ok`.
#[test]
fn an_account_without_privileges_is_named_as_such() {
    use mysql_async::prelude::Queryable;
    let srv = replicated();
    tokio::runtime::Runtime::new().expect("rt").block_on(async {
        let mut c = srv
            .target()
            .connect(Duration::from_secs(5))
            .await
            .expect("root");
        c.query_drop(
            "CREATE USER IF NOT EXISTS 'watch_nopriv'@'%' IDENTIFIED BY 'np-pw'; \
             CREATE USER IF NOT EXISTS 'watch_oldhint'@'%' IDENTIFIED BY 'np-pw'; \
             GRANT PROCESS, REPLICATION CLIENT ON *.* TO 'watch_oldhint'@'%'; \
             CREATE USER IF NOT EXISTS 'watch_hint'@'%' IDENTIFIED BY 'np-pw'; \
             GRANT PROCESS, SLAVE MONITOR ON *.* TO 'watch_hint'@'%'",
        )
        .await
        .expect("users");
    });
    let port = srv.sandbox.meta.primary().port;
    let once = |user: &str| {
        sqlfleet()
            .args([
                "watch",
                "--no-defaults",
                "-u",
                user,
                "--password=np-pw",
                "--once",
                "--json",
            ])
            .args(["--hosts", &format!("127.0.0.1:{port}")])
            .env_remove("MYSQL_PWD")
            .stdin(Stdio::null())
            .output()
            .expect("watch")
    };
    for user in ["watch_nopriv", "watch_oldhint"] {
        let o = once(user);
        assert_eq!(o.status.code(), Some(3), "{user}: {}", stdout(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON");
        let s = &v["servers"][0];
        assert_eq!(s["state"], "denied", "{user}: {s}");
        let why = s["reason"].as_str().unwrap_or_default();
        assert!(why.contains("1227"), "{user}: {why}");
        assert!(
            why.contains("GRANT PROCESS, SLAVE MONITOR ON *.*"),
            "{user}: {why}"
        );
    }
    let o = once("watch_hint");
    assert_eq!(o.status.code(), Some(0), "the hint's GRANT: {}", stdout(&o));
}

#[test]
fn the_longest_running_statement_is_listed_and_an_idle_server_lists_none() {
    let srv = replicated();
    let primary = format!("127.0.0.1:{}", srv.sandbox.meta.primary().port);
    let defaults = format!("--defaults-file={}", srv.defaults_file().display());
    let once = || {
        let o = sqlfleet()
            .args(["watch", &defaults, "--hosts", &primary, "--once", "--json"])
            .env("SQLFLEET_HOME", srv.home())
            .stdin(Stdio::null())
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON");
        v["servers"][0]["sample"]["running"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    // Nothing but the check itself (and replication's own threads) runs.
    let idle = once();
    assert!(idle.is_empty(), "{idle:?}");
    // A client's long statement is listed, with its text.
    let mut client = std::process::Command::new("mariadb")
        .arg(&defaults)
        .args(["-N", "-e", "SELECT SLEEP(30), 'watch-long-marker'"])
        .stdout(Stdio::null())
        .spawn()
        .expect("mariadb");
    let until = Instant::now() + Duration::from_secs(10);
    let found = loop {
        let running = once();
        if let Some(r) = running.iter().find(|r| {
            r["info"]
                .as_str()
                .is_some_and(|i| i.contains("watch-long-marker"))
        }) {
            break r.clone();
        }
        assert!(Instant::now() < until, "never listed: {running:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(found["command"], "Query", "{found}");
    // The listed id is the server's: KILL QUERY with it ends the statement.
    let id = found["id"].as_u64().expect("id");
    let k = std::process::Command::new("mariadb")
        .arg(&defaults)
        .args(["-e", &format!("KILL QUERY {id}")])
        .output()
        .expect("mariadb");
    assert!(k.status.success(), "{}", stderr(&k));
    let _ = client.wait();
    let _ = client.kill();
}

/// A Galera cluster watched node by node: a desynced node opens one
/// `node_synced` incident and resolves it; a node killed -9 makes both
/// survivors see 2 of 3 members, and that is one `cluster_size` incident
/// for the cluster, not one per node.
#[test]
fn a_galera_cluster_incident_is_one_message_for_the_cluster() {
    let g = sqlfleet_testkit::galera();
    let name = g.sandbox.name().to_string();
    // A host list without tags: each node's sample says its cluster and
    // the fleet view is tagged (and can be grouped) by it.
    let hosts: Vec<String> = g
        .sandbox
        .meta
        .nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let o = sqlfleet()
        .args(["watch", "--once", "--json", "--hosts", &hosts.join(",")])
        .arg(format!("--defaults-file={}", g.defaults_file().display()))
        .stdin(Stdio::null())
        .output()
        .expect("watch --once");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    for s in v["servers"].as_array().expect("servers") {
        assert_eq!(s["tags"]["cluster"], format!("sqlfleet-{name}"), "{s}");
        assert_eq!(s["sample"]["galera"]["state"], "Synced", "{s}");
        assert_eq!(s["sample"]["galera"]["cluster_size"], 3, "{s}");
    }
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("watch.toml");
    std::fs::write(
        &cfg,
        "[rules.node_synced]\nhold = 0\nclear = 0\n[rules.cluster_size]\nhold = 0\nclear = 0\n",
    )
    .expect("config");
    let mut child = sqlfleet()
        .env("SQLFLEET_HOME", g.home())
        .args([
            "watch",
            "--ui",
            "none",
            "--json",
            "--interval",
            "0.3",
            "--timeout",
            "2",
            "--sandbox",
            &name,
            "--config",
        ])
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("watch");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<serde_json::Value>();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&l) {
                let _ = tx.send(v);
            }
        }
    });
    let incident = |rule: &str, phase: &str| {
        let t0 = Instant::now();
        loop {
            let v = rx
                .recv_timeout(Duration::from_secs(30).saturating_sub(t0.elapsed()))
                .unwrap_or_else(|_| panic!("no {rule} {phase} incident"));
            if v["type"] == "incident" && v["rule"] == rule && v["phase"] == phase {
                return v;
            }
        }
    };
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let node2 = g.sandbox.target(&g.sandbox.meta.nodes[1]).expect("t");
    rt.block_on(async {
        use mysql_async::prelude::Queryable;
        let mut c = node2.connect(Duration::from_secs(5)).await.expect("node2");
        // Every node seen Synced first (the watch knows the cluster's size).
        std::thread::sleep(Duration::from_secs(2));
        c.query_drop("SET GLOBAL wsrep_desync = ON")
            .await
            .expect("desync");
        let v = incident("node_synced", "opened");
        assert_eq!(v["server"], format!("cluster sqlfleet-{name}"));
        assert!(v["detail"].as_str().unwrap_or("").contains("node2"), "{v}");
        c.query_drop("SET GLOBAL wsrep_desync = OFF")
            .await
            .expect("resync");
        incident("node_synced", "resolved");
    });
    let nl = g.sandbox.layout.node(&g.sandbox.meta.nodes[2]);
    let pid = sqlfleet_sandbox::node::running_pid(&nl).expect("node3 runs");
    unsafe_kill(pid as u32, libc::SIGKILL);
    let v = incident("cluster_size", "opened");
    assert_eq!(v["server"], format!("cluster sqlfleet-{name}"));
    assert!(v["detail"].as_str().unwrap_or("").contains("2 of 3"), "{v}");
    // Both survivors go on seeing it for a few checks: no second message.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        if let Ok(v) = rx.recv_timeout(Duration::from_millis(200)) {
            assert!(
                !(v["type"] == "incident" && v["rule"] == "cluster_size"),
                "a second cluster_size message: {v}"
            );
        }
    }
    unsafe_kill(child.id(), libc::SIGTERM);
    let _ = child.wait();
}

/// A panic in one server's check (a failpoint that panics once) makes
/// that server down for that check, said with the panic's words, and the
/// next check brings it back; the other servers go on being checked
/// (before: the panicking server's view froze at its last state, and a
/// panic while the fleet's lock was held stopped every server's loop).
#[test]
fn a_panic_in_one_check_is_that_server_down_once_and_the_watch_goes_on() {
    use std::io::BufRead;
    let srv = replicated();
    let name = srv.sandbox.name().to_string();
    let mut child = sqlfleet()
        .args(["watch", "--sandbox", &name, "--json", "--interval", "1"])
        .env("SQLFLEET_HOME", srv.home())
        .env("SQLFLEET_FAILPOINTS", "watch::check=1*panic")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let mut down: Option<String> = None;
    let mut back = false;
    let mut ok_servers = std::collections::BTreeSet::new();
    let mut seen = Vec::new();
    let t0 = std::time::Instant::now();
    while !(back && ok_servers.len() == srv.sandbox.meta.nodes.len()) {
        let left = std::time::Duration::from_secs(30).saturating_sub(t0.elapsed());
        let Ok(line) = rx.recv_timeout(left) else {
            let _ = child.kill();
            panic!("the watch did not go on: {seen:#?}");
        };
        seen.push(line.clone());
        let v: serde_json::Value = serde_json::from_str(&line).expect("JSON line");
        if v["type"] != "state" {
            continue;
        }
        let server = v["server"].as_str().unwrap_or_default().to_string();
        match v["to"].as_str() {
            Some("down") => {
                assert!(
                    v["reason"]
                        .as_str()
                        .is_some_and(|r| r.contains("internal error")
                            && r.contains("failpoint watch::check panic")),
                    "{line}"
                );
                assert!(down.is_none(), "one check panicked, once: {seen:#?}");
                down = Some(server);
            }
            Some("ok") => {
                if down.as_deref() == Some(server.as_str()) {
                    back = true;
                }
                ok_servers.insert(server);
            }
            _ => {}
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(down.is_some(), "{seen:#?}");
}

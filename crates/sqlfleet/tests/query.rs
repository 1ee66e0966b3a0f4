//! `sqlfleet query` against real servers: formats, --diff, dead and silent
//! hosts, timeouts that really stop the query, exit codes.

mod common;

use std::net::TcpListener;
use std::process::Output;
use std::time::{Duration, Instant};

use common::{stderr, stdout};
use mysql_async::prelude::Queryable;
use sqlfleet_testkit::{replicated, server, TestServer};

fn query(srv: &TestServer, args: &[&str]) -> Output {
    common::sqlfleet()
        .arg("query")
        .arg(format!("--defaults-file={}", srv.defaults_file().display()))
        .args(args)
        .env("SQLFLEET_HOME", srv.home())
        .output()
        .expect("run sqlfleet")
}

fn addr(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

#[test]
fn diff_finds_the_odd_server_and_collapse_groups() {
    let srv = replicated();
    let ports: Vec<String> = srv
        .sandbox
        .meta
        .nodes
        .iter()
        .map(|n| addr(n.port))
        .collect();
    let hosts = ports.join(",");
    let o = query(
        srv,
        &["--hosts", &hosts, "-e", "SELECT @@read_only", "--diff"],
    );
    // A difference is exit 4 (a cron drift check can use it), as diff(1)
    // says "different" with its own code.
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        format!(
            "==> {} differs from the majority (2 hosts):\n- 1\n+ 0\n",
            ports[0]
        )
    );
    let o = query(srv, &["--hosts", &hosts, "-e", "SELECT 1", "--diff"]);
    assert_eq!(o.status.code(), Some(0), "all alike: {}", stderr(&o));
    assert_eq!(stdout(&o), "all 3 hosts agree\n");
    // A table lists the hosts in order (not as they answered), numbers
    // right-aligned.
    for _ in 0..3 {
        let o = query(
            srv,
            &[
                "--hosts",
                &hosts,
                "-e",
                "SELECT @@server_id * 1000 AS id",
                "--format",
                "table",
            ],
        );
        let out = stdout(&o);
        let listed: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("| 127."))
            .map(|l| l.split('|').nth(1).unwrap_or("").trim())
            .collect();
        let mut sorted = listed.clone();
        sorted.sort();
        assert_eq!(listed, sorted, "{out}");
        assert!(
            out.lines()
                .filter(|l| l.starts_with("| 127."))
                .all(|l| l.split('|').nth(2).is_some_and(|c| c.ends_with("000 "))),
            "numbers right-aligned: {out}"
        );
    }
    // Tags as columns: --sandbox tags every server with node= and role=.
    let o = query(
        srv,
        &[
            "--sandbox",
            srv.sandbox.name(),
            "--tags",
            "node,role",
            "--format",
            "table",
            "-e",
            "SELECT @@read_only AS ro",
        ],
    );
    let out = stdout(&o);
    assert!(
        out.contains("| host ") && out.contains("| node ") && out.contains("| role "),
        "{out}"
    );
    let primary = format!("127.0.0.1:{}", srv.sandbox.meta.primary().port);
    let line = out
        .lines()
        .find(|l| l.contains(&primary))
        .unwrap_or_else(|| panic!("{out}"));
    let cells: Vec<&str> = line.split('|').map(str::trim).collect();
    assert_eq!(
        &cells[1..5],
        [primary.as_str(), "node1", "primary", "0"],
        "{out}"
    );
    let o = query(
        srv,
        &[
            "--sandbox",
            srv.sandbox.name(),
            "--tags",
            "role",
            "--format",
            "jsonl",
            "-e",
            "SELECT 1 AS one",
        ],
    );
    assert!(
        stdout(&o)
            .lines()
            .all(|l| l.contains("\"tags\":{\"role\":\"")),
        "{}",
        stdout(&o)
    );
    let o = query(
        srv,
        &["--hosts", &hosts, "-e", "SELECT @@read_only", "--collapse"],
    );
    // Hosts within a group are listed in name order.
    let mut replicas = [ports[1].clone(), ports[2].clone()];
    replicas.sort();
    assert_eq!(
        stdout(&o),
        format!(
            "==> {}, {} (2 hosts)\n@@read_only\n1\n==> {} (1 host)\n@@read_only\n0\n",
            replicas[0], replicas[1], ports[0]
        )
    );
}

#[test]
fn streams_tsv_jsonl_and_runs_per_database() {
    let srv = server();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db1, t1) = rt.block_on(srv.fresh_db("q"));
    let (db2, _) = rt.block_on(srv.fresh_db("q"));
    rt.block_on(async {
        let mut c = t1.connect(Duration::from_secs(5)).await.expect("connect");
        c.query_drop("CREATE TABLE t (v VARCHAR(20)); INSERT INTO t VALUES ('tab\there'), (NULL)")
            .await
            .expect("setup");
    });
    let h = addr(srv.sandbox.meta.primary().port);
    let o = query(
        srv,
        &[
            "--hosts",
            &h,
            "-B",
            &format!("{db1},{db2}"),
            "-e",
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), format!("{h}\t{db1}\t1\n{h}\t{db2}\t0\n"));
    let o = query(
        srv,
        &[
            "--hosts",
            &h,
            "-D",
            &db1,
            "-e",
            "SELECT v FROM t ORDER BY v IS NULL",
            "--header",
        ],
    );
    assert_eq!(stdout(&o), format!("host\tv\n{h}\ttab\\there\n{h}\t\\N\n"));
    let o = query(
        srv,
        &[
            "--hosts",
            &h,
            "-D",
            &db1,
            "-e",
            "SELECT v FROM t ORDER BY v IS NULL",
            "--format",
            "jsonl",
        ],
    );
    assert_eq!(stdout(&o), format!("{{\"host\":\"{h}\",\"set\":0,\"row\":{{\"v\":\"tab\\there\"}}}}\n{{\"host\":\"{h}\",\"set\":0,\"row\":{{\"v\":null}}}}\n"));
}

#[test]
fn dead_and_silent_hosts_do_not_hold_up_the_others() {
    let srv = server();
    let good = addr(srv.sandbox.meta.primary().port);
    // A port nobody listens on, and one that accepts but never says a word.
    let dead = TcpListener::bind("127.0.0.1:0").expect("bind");
    let dead_addr = addr(dead.local_addr().expect("addr").port());
    drop(dead);
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let silent_addr = addr(silent.local_addr().expect("addr").port());
    let dir = tempfile::tempdir().expect("tmp");
    let status = dir.path().join("status.json");
    let t0 = Instant::now();
    let o = query(
        srv,
        &[
            "--hosts",
            &format!("{good},{dead_addr},{silent_addr}"),
            "-e",
            "SELECT 42",
            "--connect-timeout",
            "1",
            "--deadline",
            "3",
            "--status-json",
            status.to_str().expect("utf8"),
        ],
    );
    let took = t0.elapsed();
    drop(silent);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stdout(&o), format!("{good}\t42\n"));
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&status).expect("status")).expect("json");
    assert_eq!(
        (
            v["ok"].as_u64(),
            v["unreachable"].as_u64(),
            v["stalled"].as_u64()
        ),
        (Some(1), Some(1), Some(1)),
        "{v}"
    );
    let by_host = |h: &str| {
        v["statuses"]
            .as_array()
            .expect("array")
            .iter()
            .find(|s| s["host"] == h)
            .cloned()
            .expect("host")
    };
    assert_eq!(by_host(&dead_addr)["state"], "unreachable");
    // Connected but never greeted (a SIGSTOPped server): "stalled", as
    // watch calls it.
    assert_eq!(by_host(&silent_addr)["state"], "stalled");
    let dead = by_host(&dead_addr)["message"]
        .as_str()
        .expect("msg")
        .to_string();
    assert!(
        dead.contains("ERROR 2003 (HY000)") && dead.contains("111: Connection refused"),
        "the client's error code, as mysql prints it: {dead}"
    );
    // Connected but never greeted: as the mysql client words a greeting
    // that does not come.
    let silent_msg = by_host(&silent_addr)["message"]
        .as_str()
        .expect("msg")
        .to_string();
    assert!(
        silent_msg.contains(
            "ERROR 2013 (HY000): Lost connection to server at 'handshake: reading initial communication packet'"
        ) && silent_msg.contains("no greeting within 1.0s"),
        "{v}"
    );
    // Where the time went: the good host logged in and ran its statement;
    // the others never logged in; the run's moments are in order.
    let good_s = by_host(&good);
    let (total, queued, login) = (
        good_s["seconds"].as_f64().expect("seconds"),
        good_s["queued_seconds"].as_f64().expect("queued"),
        good_s["login_seconds"].as_f64().expect("login"),
    );
    assert!(login > 0.0 && queued + login <= total, "{good_s}");
    assert!(by_host(&dead_addr).get("login_seconds").is_none(), "{v}");
    let t = &v["timing"];
    let at = |k: &str| t[k].as_f64().unwrap_or(-1.0);
    assert!(
        0.0 <= at("spawned")
            && at("last_login") > 0.0
            && at("last_login") <= at("last_host")
            && at("last_host") <= v["seconds"].as_f64().expect("seconds")
            && at("login_p50") == login
            && at("statements_p50") > 0.0,
        "{t}"
    );
    assert!(
        stderr(&o).contains("1 ok, 0 error, 0 timeout, 1 unreachable, 1 stalled"),
        "{}",
        stderr(&o)
    );
}

/// A host that goes dark mid-statement (its packets stop both ways, as a
/// dropped route) is released at its query timeout: the kill is tried on
/// a side connection bounded by its own short timeout, and the status
/// says it could not be sent — never "sent". Before: the side connection
/// was dialled with the whole connect timeout (query timeout 1 s, connect
/// timeout 5 s: the host held over 6 s), and the status claimed the kill
/// before it was tried.
///
/// `SQLFLEET_DARK_FLEET=HOSTS,DARK` (bench/query_dark.sh) runs the fleet
/// of the report instead — 1,000 endpoints, 100 dark, `SELECT SLEEP(2)`,
/// `--query-timeout 3 --connect-timeout 2` — on a server of its own, and
/// prints how long the run took.
#[test]
fn a_host_gone_dark_mid_statement_is_released_at_its_query_timeout() {
    let fleet: Option<(usize, usize)> = std::env::var("SQLFLEET_DARK_FLEET").ok().map(|v| {
        let (h, d) = v.split_once(',').expect("HOSTS,DARK");
        (h.parse().expect("hosts"), d.parse().expect("dark"))
    });
    let own;
    let srv = match fleet {
        Some(_) => {
            own = sqlfleet_testkit::server_with(&["max-connections=3000"]);
            &own
        }
        None => server(),
    };
    let (hosts, dark_n) = fleet.unwrap_or((2, 1));
    let port = srv.sandbox.meta.primary().port;
    // The first endpoint is the server itself, the others links to it
    // (each its own port): the last `dark_n` go dark.
    let links: Vec<_> = (1..hosts)
        .map(|_| sqlfleet_testkit::netfault::Link::to(port))
        .collect();
    let endpoints: Vec<String> = std::iter::once(addr(port))
        .chain(links.iter().map(|l| addr(l.port)))
        .collect();
    let dark: Vec<&String> = endpoints[hosts - dark_n..].iter().collect();
    let (statement, query_timeout, connect_timeout, bound) = match fleet {
        // (2 s: a thousand logins take a while; every statement runs at
        // once before the links go dark)
        Some(_) => ("SELECT SLEEP(2) /* sqlfleet-dark-test */", "3", "2", None),
        None => (
            "DO SLEEP(3) /* sqlfleet-dark-test */",
            "1",
            "5",
            Some(Duration::from_secs(4)),
        ),
    };
    let dir = tempfile::tempdir().expect("tmp");
    let status = dir.path().join("status.json");
    let hosts_file = dir.path().join("hosts.txt");
    std::fs::write(&hosts_file, endpoints.join("\n")).expect("hosts");
    let child = common::sqlfleet()
        .arg("query")
        .arg(format!("--defaults-file={}", srv.defaults_file().display()))
        .arg("--hosts-file")
        .arg(&hosts_file)
        .args(["-e", statement])
        .args(["--query-timeout", query_timeout])
        .args(["--connect-timeout", connect_timeout])
        .args(["--threads", &hosts.max(2).to_string()])
        .arg("--status-json")
        .arg(&status)
        .env("SQLFLEET_HOME", srv.home())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run sqlfleet");
    let t0 = Instant::now();
    // Every statement is running: then the links go dark.
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let mut c = srv.connect().await;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let n: Option<i64> = c
                .query_first("SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE '% /* sqlfleet-dark-test%' AND info NOT LIKE '%processlist%'")
                .await
                .expect("processlist");
            if n == Some(hosts as i64) {
                break;
            }
            assert!(Instant::now() < deadline, "the statements never all started ({n:?})");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    let went_dark = t0.elapsed();
    for l in &links[hosts - 1 - dark_n..] {
        l.stall();
    }
    let o = child.wait_with_output().expect("wait");
    let took = t0.elapsed();
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&status).expect("status")).expect("json");
    let statuses = v["statuses"].as_array().expect("array");
    assert_eq!(statuses.len(), hosts, "every host once: {v}");
    for st in statuses {
        let host = st["host"].as_str().expect("host").to_string();
        let msg = st["message"].as_str().unwrap_or("");
        if dark.contains(&&host) {
            assert_eq!(st["state"], "timeout", "{st}");
            assert!(
                msg.contains("could not be sent") && msg.contains("may still run"),
                "a dark host's status claims what did not happen: {st}"
            );
        } else if fleet.is_none() {
            // Its statement outlived the timeout: killed, and said so.
            assert!(msg.contains("KILL QUERY") && msg.contains(" sent"), "{st}");
        } else {
            assert_eq!(st["state"], "ok", "{st}");
        }
    }
    // Each dark host from its statement's start (after its queue and
    // login) to its release.
    let held = statuses
        .iter()
        .filter(|st| dark.iter().any(|d| st["host"] == d.as_str()))
        .map(|st| {
            let f = |k: &str| st[k].as_f64().unwrap_or(0.0);
            f("seconds") - f("queued_seconds") - f("login_seconds")
        })
        .fold(0.0f64, f64::max);
    eprintln!(
        "dark fleet: {hosts} endpoints, {dark_n} dark {went_dark:.2?} in: the run took {took:.2?}, a dark host at most {held:.2} s from its statement's start (--query-timeout {query_timeout} --connect-timeout {connect_timeout}); {}",
        stderr(&o).lines().last().unwrap_or("")
    );
    // The bound the name claims: the query timeout and the kill's own
    // 0.4 s, well under the 5 s connect timeout a kill dialled with (the
    // CI slice gives a loaded machine room; the fleet run holds the
    // issue's bound: each dark host within half a second of its timeout).
    if let Some(b) = bound {
        assert!(took < b, "held {took:?}: {}", stderr(&o));
    } else {
        let limit: f64 = query_timeout.parse().expect("timeout");
        assert!(held < limit + 0.5, "a dark host held {held:.2} s");
    }
    drop(links);
}

#[test]
fn query_timeout_really_stops_the_query() {
    let srv = server();
    let h = addr(srv.sandbox.meta.primary().port);
    // A SELECT: the server's own max_statement_time stops it.
    let o = query(
        srv,
        &[
            "--hosts",
            &h,
            "-e",
            "SELECT SLEEP(20)",
            "--query-timeout",
            "0.5",
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("timeout") && stderr(&o).contains("max_statement_time"),
        "{}",
        stderr(&o)
    );
    // Not a SELECT: the client gives up and sends KILL QUERY from a side connection.
    let t0 = Instant::now();
    let o = query(
        srv,
        &[
            "--hosts",
            &h,
            "-e",
            "DO SLEEP(20) /* sqlfleet-kill-test */",
            "--query-timeout",
            "0.5",
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("KILL QUERY"), "{}", stderr(&o));
    assert!(t0.elapsed() < Duration::from_secs(10));
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let mut c = srv.connect().await;
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let n: Option<i64> = c
                .query_first("SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE 'DO SLEEP(20) /* sqlfleet-kill-test%'")
                .await
                .expect("processlist");
            if n == Some(0) {
                break;
            }
            assert!(Instant::now() < deadline, "the query is still running on the server");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

#[test]
fn exit_codes_and_bad_host_lines() {
    let srv = server();
    let h = addr(srv.sandbox.meta.primary().port);
    let dir = tempfile::tempdir().expect("tmp");
    let f = dir.path().join("hosts.txt");
    std::fs::write(&f, format!("# fleet\n{h} role=primary\n{h}\n")).expect("write");
    let o = query(
        srv,
        &["--hosts-file", f.to_str().expect("utf8"), "-e", "SELECT 1"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("hosts.txt:3: ") && stderr(&o).contains("repeats line 2"),
        "{}",
        stderr(&o)
    );
    // Per-host credentials: a wrong password on one host is that host's error.
    std::fs::write(
        &f,
        format!(
            "{h}\nlocalhost:{} password=wrong\n",
            srv.sandbox.meta.primary().port
        ),
    )
    .expect("write");
    let o = query(
        srv,
        &["--hosts-file", f.to_str().expect("utf8"), "-e", "SELECT 1"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("ERROR 1045") && !stderr(&o).contains("wrong"),
        "{}",
        stderr(&o)
    );
    let o = query(srv, &["--hosts", &h, "-e", "SELECT * FROM no_such_table"]);
    assert_eq!(o.status.code(), Some(3));
    std::fs::write(&f, "db1\ndb2:notaport\n").expect("write");
    let o = query(
        srv,
        &["--hosts-file", f.to_str().expect("utf8"), "-e", "SELECT 1"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("hosts.txt:2: port 'notaport'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_password_after_a_bare_p_is_never_echoed_in_a_usage_error() {
    let o = common::sqlfleet()
        .args([
            "query",
            "-p",
            "s3cret-pw",
            "--hosts",
            "127.0.0.1:1",
            "-e",
            "SELECT 1",
        ])
        .output()
        .expect("run sqlfleet");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("unexpected argument"), "{err}");
    assert!(
        !err.contains("s3cret-pw"),
        "the password was printed: {err}"
    );
}

/// Ctrl-C does what the mysql client's does: the statements in flight are
/// stopped with KILL QUERY on every host, the summary prints with those
/// hosts interrupted, and the exit code is 130.
#[test]
fn ctrl_c_and_sigterm_kill_the_queries_in_flight_130_and_143() {
    // SIGTERM (a service manager, a CI timeout) is the same stop, 143.
    for (signal, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        stopped_by(signal, code);
    }
}

fn stopped_by(signal: libc::c_int, code: i32) {
    let help = common::sqlfleet()
        .args(["query", "--help"])
        .output()
        .expect("help");
    assert!(
        stdout(&help).contains(&code.to_string()),
        "query --help does not say {code}"
    );
    let srv = server();
    let host = addr(srv.sandbox.meta.primary().port);
    let marker = "SELECT SLEEP(60) AS ctrl_c_marker";
    let child = common::sqlfleet()
        .arg("query")
        .arg(format!("--defaults-file={}", srv.defaults_file().display()))
        .args(["--hosts", &host, "-e", marker])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run sqlfleet");
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let running = |rt: &tokio::runtime::Runtime| rt.block_on(srv.running("ctrl_c_marker"));
    let t0 = Instant::now();
    while running(&rt) == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the query never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: sending a signal to our own child process.
    unsafe {
        libc::kill(child.id() as i32, signal);
    }
    let o = child.wait_with_output().expect("wait");
    assert_eq!(o.status.code(), Some(code), "{}", stderr(&o));
    assert!(stderr(&o).contains("1 interrupted"), "{}", stderr(&o));
    assert!(stderr(&o).contains("KILL QUERY"), "{}", stderr(&o));
    let t1 = Instant::now();
    while running(&rt) > 0 {
        assert!(
            t1.elapsed() < Duration::from_secs(5),
            "the statement still runs on the server after Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// query finds its servers the way every command finds one: `--sandbox
/// NAME` (or `sandbox env`'s SQLFLEET_SANDBOX) is every server of that
/// sandbox, and `localhost` with `-S` is the socket, as in mysql.
#[test]
fn a_sandbox_or_a_socket_names_the_hosts() {
    let srv = replicated();
    let name = srv.sandbox.name().to_string();
    let mut want: Vec<String> = srv
        .sandbox
        .meta
        .nodes
        .iter()
        .map(|n| n.server_id.to_string())
        .collect();
    want.sort();
    let run = |args: &[&str], envs: &[(&str, &str)]| {
        let o = common::sqlfleet()
            .arg("query")
            .args(args)
            .env("SQLFLEET_HOME", srv.home())
            .envs(envs.iter().copied())
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        // host<TAB>value
        let mut ids: Vec<String> = stdout(&o)
            .lines()
            .filter_map(|l| l.rsplit('\t').next())
            .map(str::to_owned)
            .collect();
        ids.sort();
        ids
    };
    let sql = ["-e", "SELECT @@server_id"];
    assert_eq!(run(&[&["--sandbox", &name][..], &sql].concat(), &[]), want);
    assert_eq!(run(&sql, &[("SQLFLEET_SANDBOX", &name)]), want);

    let primary = srv.sandbox.meta.primary();
    let sock = srv.sandbox.layout.node(primary).socket();
    let pw = srv.sandbox.password().expect("pw");
    let ids = run(
        &[
            "--no-defaults",
            "-u",
            "root",
            "--hosts",
            "localhost",
            "-S",
            sock.to_str().expect("utf8"),
            "-e",
            "SELECT @@server_id",
        ],
        &[("MYSQL_PWD", pw.expose())],
    );
    assert_eq!(ids, vec![primary.server_id.to_string()]);
}

/// Output as asked for in every mode: jsonl keeps column order and
/// repeated names; every result set gets its header; --collapse honours
/// --format; --diff refuses formats it cannot write; -B reports each
/// database (one missing database is a partial failure, exit 2).
#[test]
fn formats_headers_and_per_database_results() {
    let srv = server();
    let h = addr(srv.sandbox.meta.primary().port);
    let ok = |args: &[&str]| {
        let o = query(srv, &[&["--hosts", &h][..], args].concat());
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        stdout(&o)
    };
    assert_eq!(
        ok(&["-e", "SELECT 1 AS z, 2 AS a, 3 AS a", "--format", "jsonl"]),
        format!("{{\"host\":\"{h}\",\"set\":0,\"row\":{{\"z\":1,\"a\":2,\"a_2\":3}}}}\n")
    );
    assert_eq!(
        ok(&["-e", "SELECT 1 AS a; SELECT 2 AS b, 3 AS c", "--header"]),
        format!("host\ta\n{h}\t1\nhost\tb\tc\n{h}\t2\t3\n")
    );
    assert_eq!(
        ok(&["-e", "SELECT 1 AS a", "--collapse", "--format", "jsonl"]),
        format!("{{\"hosts\":[\"{h}\"],\"columns\":[\"a\"],\"rows\":[{{\"a\":\"1\"}}],\"error\":null}}\n")
    );
    let t = ok(&["-e", "SELECT 1 AS a", "--collapse", "--format", "table"]);
    assert!(t.contains("| a |") && t.contains("| 1 |"), "{t}");
    let o = query(
        srv,
        &["--hosts", &h, "-e", "SELECT 1", "--diff", "--format", "csv"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--diff writes tsv or jsonl"),
        "{}",
        stderr(&o)
    );

    let dir = tempfile::tempdir().expect("tmp");
    let status = dir.path().join("status.json");
    let o = query(
        srv,
        &[
            "--hosts",
            &h,
            "-B",
            "mysql,nosuchdb",
            "-e",
            "SELECT 7",
            "--status-json",
            status.to_str().expect("utf8"),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stdout(&o), format!("{h}\tmysql\t7\n"));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&status).expect("status")).expect("json");
    let dbs = &v["statuses"][0]["databases"];
    assert_eq!(dbs[0]["database"], "mysql");
    assert_eq!(dbs[0]["state"], "ok");
    assert_eq!(dbs[1]["database"], "nosuchdb");
    assert_eq!(dbs[1]["state"], "error");
    assert!(
        dbs[1]["message"].as_str().expect("msg").contains("1049"),
        "{v}"
    );
    assert_eq!(
        (v["databases_ok"].as_u64(), v["databases_failed"].as_u64()),
        (Some(1), Some(1))
    );
}

/// `--discover` finds a replication fleet from any one of its servers,
/// both ways: from the primary down, from a replica up and across, with a
/// replica of a replica (depth 2); a server in the topology that is down is
/// reported, not dropped.
#[test]
fn discover_walks_the_topology_both_ways() {
    let home = tempfile::tempdir().expect("tmp");
    let o = common::run_in(
        home.path(),
        &["sandbox", "up", "--name", "topo", "--replicas", "2"],
    );
    assert!(o.status.success(), "up: {}", stderr(&o));
    let sb = sqlfleet_sandbox::Sandbox::open(home.path(), "topo").expect("open");
    let (p, r1, r2) = (
        sb.meta.nodes[0].clone(),
        sb.meta.nodes[1].clone(),
        sb.meta.nodes[2].clone(),
    );
    // replica2 becomes a replica of replica1: a chain.
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        sqlfleet_sandbox::setup::start_replication(
            "replica2",
            &sb.layout.node(&r2),
            &sb.password().expect("pw"),
            &r1,
        )
        .await
        .expect("chain");
    });
    let discover = |from: u16| {
        let o = common::sqlfleet()
            .env("SQLFLEET_HOME", home.path())
            .args(["query", "--sandbox", "topo", "--discover"])
            .arg(format!("127.0.0.1:{from}"))
            .arg("--discover-only")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run");
        let mut lines: Vec<String> = stdout(&o).lines().map(str::to_owned).collect();
        lines.sort();
        (o.status.code(), lines, stderr(&o))
    };
    let mut want = vec![
        format!("127.0.0.1:{} depth=0 role=primary", p.port),
        format!("127.0.0.1:{} depth=1 role=replica", r1.port),
        format!("127.0.0.1:{} depth=2 role=replica", r2.port),
    ];
    want.sort();
    // Registration with the new primary can take a moment.
    let t0 = Instant::now();
    loop {
        let (code, lines, err) = discover(r2.port);
        if lines == want {
            assert_eq!(code, Some(0), "{err}");
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "from replica2: {lines:?} {err}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for from in [p.port, r1.port] {
        let (code, lines, err) = discover(from);
        assert_eq!((code, &lines), (Some(0), &want), "from {from}: {err}");
    }
    // The top primary down: found from a replica, reported as unreachable.
    rt.block_on(async {
        let mut c = sb
            .target(&p)
            .expect("t")
            .connect(Duration::from_secs(5))
            .await
            .expect("primary");
        c.query_drop("SHUTDOWN").await.ok();
    });
    std::thread::sleep(Duration::from_millis(500));
    let (code, lines, err) = discover(r1.port);
    assert_eq!(code, Some(2), "{lines:?} {err}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("127.0.0.1:{} ", p.port))
                && l.contains("unreachable=yes")),
        "{lines:?}"
    );
    assert!(err.contains("could not be read (not reached"), "{err}");
    // An account the servers refuse: not "unreachable" in disguise — the
    // note names the refusal, and no role is guessed.
    let o = common::sqlfleet()
        .env("SQLFLEET_HOME", home.path())
        .args(["query", "--sandbox", "topo", "-u", "nosuch", "--discover"])
        .arg(format!("127.0.0.1:{}", r1.port))
        .arg("--discover-only")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run");
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(2), "{out} {err}");
    assert!(
        out.contains(&format!(
            "127.0.0.1:{} depth=0 role=unknown unreachable=yes",
            r1.port
        )),
        "{out}"
    );
    assert!(
        err.contains("refused the login: ERROR 1045 (28000): Access denied"),
        "{err}"
    );
    assert_eq!(
        err.matches("1045").count(),
        1,
        "the server's error once: {err}"
    );
    let _ = common::run_in(
        home.path(),
        &["sandbox", "destroy", "--name", "topo", "--yes"],
    );
}

/// A server with TLS (a certificate made for the test) beside the plain one.
fn tls_server() -> &'static TestServer {
    static S: std::sync::OnceLock<TestServer> = std::sync::OnceLock::new();
    S.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("sqlfleet-query-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("cert dir");
        let (c, k) = sqlfleet_testkit::tls::self_signed(&dir, "localhost");
        sqlfleet_testkit::server_with(&[
            &format!("ssl-cert={}", c.display()),
            &format!("ssl-key={}", k.display()),
        ])
    })
}

fn global_status(srv: &TestServer, name: &str) -> u64 {
    tokio::runtime::Runtime::new().expect("rt").block_on(async {
        let mut c = srv
            .target()
            .connect(Duration::from_secs(5))
            .await
            .expect("connect");
        let v: Option<(String, u64)> = c
            .query_first(format!("SHOW GLOBAL STATUS LIKE '{name}'"))
            .await
            .expect("status");
        let _ = c.disconnect().await;
        v.expect(name).1
    })
}

/// What a host costs the server: one login with the character set in its
/// handshake (no `SET NAMES` after it: the session's own count of SET
/// statements is 0 when the statement runs), the statements, and a
/// COM_QUIT the server reads (it goes with the last statement): no
/// connection the server counts as aborted, over TLS or plain, with one
/// statement or two, in one database or several.
#[test]
fn a_host_costs_one_login_no_set_names_and_a_quit_the_server_reads() {
    let srv = tls_server();
    let host = addr(srv.sandbox.meta.primary().port);
    let aborted = global_status(srv, "Aborted_clients");
    let session = "SELECT @@character_set_client, @@collation_connection, \
        (SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS \
         WHERE VARIABLE_NAME = 'COM_SET_OPTION')";
    let two = format!("{session}; SELECT 2");
    for mode in ["DISABLED", "PREFERRED"] {
        for (sql, extra) in [
            (session, &[][..]),
            (two.as_str(), &[][..]),
            (session, &["-B", "mysql,information_schema"][..]),
            (session, &["--default-character-set", "latin1"][..]),
        ] {
            let mut args = vec!["--hosts", &host, "--ssl-mode", mode, "-e", sql];
            args.extend_from_slice(extra);
            let o = query(srv, &args);
            assert_eq!(o.status.code(), Some(0), "{mode} {extra:?}: {}", stderr(&o));
            let out = stdout(&o);
            let want = if extra.contains(&"latin1") {
                "\tlatin1\tlatin1_swedish_ci\t0"
            } else {
                "\tutf8mb4\tutf8mb4_general_ci\t0"
            };
            assert!(
                out.lines().next().is_some_and(|l| l.ends_with(want)),
                "{mode} {extra:?}: {out}"
            );
        }
    }
    // The server notes an abort when it reads its end of a connection the
    // client closed without COM_QUIT; give it the time to.
    let mut now = global_status(srv, "Aborted_clients");
    for _ in 0..10 {
        if now != aborted {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        now = global_status(srv, "Aborted_clients");
    }
    assert_eq!(now, aborted, "connections the server counted as aborted");
}

/// The default ssl-mode (PREFERRED) takes TLS where the server offers it
/// and plain where it does not — in one handshake each: the server counts
/// one connection per host and run, not two.
#[test]
fn preferred_tls_is_one_handshake_taken_where_offered() {
    let plain = server();
    let tls = tls_server();
    let cipher = |srv: &TestServer| {
        let before = global_status(srv, "Connections");
        let o = query(
            srv,
            &[
                "--hosts",
                &addr(srv.sandbox.meta.primary().port),
                "-e",
                "SHOW SESSION STATUS LIKE 'Ssl_cipher'",
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        // The status read itself made one more.
        let used = global_status(srv, "Connections") - before - 1;
        assert_eq!(used, 1, "handshakes for one host: {used}");
        let out = stdout(&o);
        // host <TAB> Variable_name <TAB> Value
        let line = out.lines().next().unwrap_or_default().to_string();
        line.split('\t').nth(2).unwrap_or_default().to_string()
    };
    let c = cipher(tls);
    assert!(
        !c.is_empty() && c != "Ssl_cipher",
        "TLS offered but not taken: {c:?}"
    );
    assert_eq!(cipher(plain), "", "a plain server: no TLS");
    // REQUIRED against the plain server is refused, naming why.
    let o = query(
        plain,
        &[
            "--hosts",
            &addr(plain.sandbox.meta.primary().port),
            "--ssl-mode",
            "REQUIRED",
            "-e",
            "SELECT 1",
        ],
    );
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("does not offer TLS"), "{}", stderr(&o));
    // The server answered: an error, not "unreachable" (nothing taking
    // the connection, in the guide's words).
    assert!(
        stderr(&o).contains("1 error") && !stderr(&o).contains("1 unreachable"),
        "{}",
        stderr(&o)
    );
}

/// A table of 200 rows of generated text and bytes (tabs, newlines,
/// backslashes, NUL, quotes, `\N`, multi-byte characters whose second
/// byte is a backslash, invalid UTF-8, NULL) from the seed in
/// SQLFLEET_QUERY_DIFF_SEED (default 1); the seed, and the SELECT of five
/// columns that reads it (id, s IS NULL, s, b IS NULL, b).
fn generated_values(srv: &TestServer) -> (u64, String) {
    use rand::{Rng, SeedableRng};
    let seed: u64 = std::env::var("SQLFLEET_QUERY_DIFF_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let pieces: &[&[u8]] = &[
        b"a",
        b"\t",
        b"\n",
        b"\r",
        b"\\",
        b"\0",
        b"'",
        b"\"",
        b" ",
        b"N",
        b"\\N",
        b"NULL",
        b"\xc3\xa9",
        b"\xf0\x9f\x98\x80",
        b"\xff",
        b"\x80a",
        b"\x1a",
        b"x y",
        // Multi-byte characters whose second byte is a backslash in sjis,
        // cp932, big5, gbk (the client copies them whole).
        b"\x95\\",
        b"\x81\x5c",
        b"\xa4\x5c",
        "表示".as_bytes(),
        "ソ".as_bytes(),
    ];
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("qdiff"));
    let mut values = Vec::new();
    for id in 0..200 {
        let mut text: Vec<u8> = Vec::new();
        let mut bin: Vec<u8> = Vec::new();
        for _ in 0..rng.gen_range(0..5) {
            let p = pieces[rng.gen_range(0..pieces.len())];
            bin.extend_from_slice(p);
            if std::str::from_utf8(p).is_ok() {
                text.extend_from_slice(p);
            }
        }
        let hex = |v: &[u8]| {
            if v.is_empty() {
                "''".to_string()
            } else {
                format!(
                    "X'{}'",
                    v.iter().map(|b| format!("{b:02X}")).collect::<String>()
                )
            }
        };
        let t = if rng.gen_bool(0.1) {
            "NULL".into()
        } else {
            hex(&text)
        };
        let b = if rng.gen_bool(0.1) {
            "NULL".into()
        } else {
            hex(&bin)
        };
        values.push(format!("({id}, {t}, {b})"));
    }
    rt.block_on(async {
        let mut c = srv.connect().await;
        c.query_drop(format!(
            "CREATE TABLE `{db}`.t (id INT PRIMARY KEY, s VARCHAR(100) CHARACTER SET utf8mb4, b VARBINARY(100));
             INSERT INTO `{db}`.t VALUES {}",
            values.join(",")
        ))
        .await
        .expect("values");
    });
    let sql = format!("SELECT id, s IS NULL, s, b IS NULL, b FROM `{db}`.t ORDER BY id");
    (seed, sql)
}

/// The oracle for the TSV format: generated values (tabs, line breaks,
/// backslashes, NUL, quotes, `NULL` and `\N` as text, multibyte text, bytes
/// that are not UTF-8, SQL NULL) in text and binary columns, printed by
/// `sqlfleet query` and by the stock client in batch mode, must be the same
/// bytes, but for NULL (`\N` here, `NULL` there), in every character set
/// the server takes from a client. Seeded (`SQLFLEET_QUERY_DIFF_SEED`),
/// replayable. Before: in sjis and cp932 a character whose second byte is
/// 0x5C (`表`) got that byte escaped, which the client does not do.
#[test]
fn tsv_is_the_stock_clients_batch_output_on_generated_values() {
    let srv = server();
    let (seed, sql) = generated_values(srv);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let h = addr(srv.sandbox.meta.primary().port);
    // Every character set the server takes from a client (the ones it
    // refuses for a client, ucs2, utf16, utf32, are passed over): the
    // text column arrives converted to it, the binary one as it is.
    let sets = rt.block_on(async {
        let mut c = srv.connect().await;
        let v: Vec<String> = c
            .query(
                "SELECT character_set_name FROM information_schema.character_sets \
                 WHERE character_set_name NOT IN ('ucs2', 'utf16', 'utf16le', 'utf32') \
                 ORDER BY 1",
            )
            .await
            .expect("sets");
        v
    });
    assert!(sets.len() > 30, "{sets:?}");
    for cs in &sets {
        same_tsv_as_the_stock_client(srv, &h, &sql, cs, seed);
    }
}

/// The stock client (`mariadb`) with `args` on `srv`, which must succeed.
fn stock_client(srv: &TestServer, args: &[&str]) -> std::process::Output {
    let o = std::process::Command::new("mariadb")
        .arg(format!("--defaults-file={}", srv.defaults_file().display()))
        .args(args)
        .output()
        .expect("mariadb");
    assert!(
        o.status.success(),
        "mariadb {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// `sql`'s rows printed by `sqlfleet query` and by `mariadb -B -N` with
/// client character set `cs` (five columns: id, s IS NULL, s, b IS NULL,
/// b) are the same bytes, but for NULL (`\N` here, `NULL` there).
fn same_tsv_as_the_stock_client(srv: &TestServer, h: &str, sql: &str, cs: &str, seed: u64) {
    let set = format!("--default-character-set={cs}");
    let ours = query(srv, &["--hosts", h, &set, "-e", sql]);
    assert_eq!(ours.status.code(), Some(0), "{cs}: {}", stderr(&ours));
    let stock = stock_client(srv, &[set.as_str(), "-B", "-N", "-e", sql]);
    let lines = |b: &[u8]| -> Vec<Vec<u8>> {
        b.split(|&c| c == b'\n')
            .filter(|l| !l.is_empty())
            .map(<[u8]>::to_vec)
            .collect()
    };
    let (ours, stock) = (lines(&ours.stdout), lines(&stock.stdout));
    assert_eq!(ours.len(), stock.len(), "seed {seed}, {cs}: rows");
    let prefix = format!("{h}\t").into_bytes();
    for (o, s) in ours.iter().zip(&stock) {
        let o = o.strip_prefix(&prefix[..]).unwrap_or_else(|| {
            panic!(
                "seed {seed}, {cs}: no host prefix: {:?}",
                String::from_utf8_lossy(o)
            )
        });
        let of: Vec<&[u8]> = o.split(|&c| c == b'\t').collect();
        let sf: Vec<&[u8]> = s.split(|&c| c == b'\t').collect();
        assert_eq!(
            of.len(),
            5,
            "seed {seed}, {cs}: {:?}",
            String::from_utf8_lossy(o)
        );
        assert_eq!(
            sf.len(),
            5,
            "seed {seed}, {cs}: {:?}",
            String::from_utf8_lossy(s)
        );
        for (i, (a, b)) in of.iter().zip(&sf).enumerate() {
            let null = (i == 2 && sf[1] == b"1") || (i == 4 && sf[3] == b"1");
            if null {
                assert_eq!(
                    (*a, *b),
                    (&b"\\N"[..], &b"NULL"[..]),
                    "seed {seed}, {cs}, row {:?}",
                    String::from_utf8_lossy(sf[0])
                );
            } else {
                assert_eq!(
                    a,
                    b,
                    "seed {seed}, {cs}, row {}, column {i}: sqlfleet {:?}, the stock client {:?}",
                    String::from_utf8_lossy(sf[0]),
                    String::from_utf8_lossy(a),
                    String::from_utf8_lossy(b)
                );
            }
        }
    }
}

/// The oracle for vertical rows (`-E`, statements ending in `\G`): the
/// generated values printed by `sqlfleet query` and by `mariadb -E` are the
/// same bytes, row by row, once our `host:` line is taken out (the column
/// names are longer than `host`, so the alignment is the same), in the
/// character sets where a byte of a multi-byte character can be a
/// backslash or a newline could hide, and in binary.
#[test]
fn vertical_rows_are_the_stock_clients_dash_e_output() {
    let srv = server();
    let (seed, sql) = generated_values(srv);
    let h = addr(srv.sandbox.meta.primary().port);
    for cs in [
        "utf8mb4", "binary", "latin1", "sjis", "cp932", "big5", "gbk",
    ] {
        let set = format!("--default-character-set={cs}");
        let stock = stock_client(srv, &[set.as_str(), "-E", "-e", &sql]);
        assert!(
            stock
                .stdout
                .starts_with(b"*************************** 1. row"),
            "{cs}: {}",
            String::from_utf8_lossy(&stock.stdout)
        );
        let host_line = format!("     host: {h}\n").into_bytes();
        for how in [["-E", "-e"], ["--quiet", "-e"]] {
            let statement = if how[0] == "-E" {
                sql.clone()
            } else {
                format!("{sql}\\G")
            };
            let ours = query(srv, &["--hosts", &h, &set, how[0], how[1], &statement]);
            assert_eq!(ours.status.code(), Some(0), "{cs}: {}", stderr(&ours));
            let n = ours
                .stdout
                .windows(host_line.len())
                .filter(|w| *w == host_line.as_slice())
                .count();
            assert_eq!(n, 200, "seed {seed}, {cs}: a host line per row");
            let mut without = Vec::new();
            let mut rest = &ours.stdout[..];
            while let Some(at) = rest
                .windows(host_line.len())
                .position(|w| w == host_line.as_slice())
            {
                without.extend_from_slice(&rest[..at]);
                rest = &rest[at + host_line.len()..];
            }
            without.extend_from_slice(rest);
            if without != stock.stdout {
                let (o, s) = (
                    String::from_utf8_lossy(&without),
                    String::from_utf8_lossy(&stock.stdout),
                );
                let at = o.chars().zip(s.chars()).take_while(|(a, b)| a == b).count();
                panic!(
                    "seed {seed}, {cs} ({}): differs at char {at}: sqlfleet {:?}, the stock client {:?}",
                    how[0],
                    o.chars().skip(at.saturating_sub(40)).take(120).collect::<String>(),
                    s.chars().skip(at.saturating_sub(40)).take(120).collect::<String>()
                );
            }
        }
    }
}

/// jsonl a machine can trust: numbers are JSON numbers (from the column
/// types), DECIMAL and integers beyond 2^53 strings, binary values their
/// bytes in base64 with a marker, and every row says which result set it
/// belongs to (before: every value a string, x'00ff' as "\u0000\ufffd",
/// the two result sets indistinguishable).
#[test]
fn jsonl_values_keep_their_types_and_result_sets_are_numbered() {
    let srv = server();
    let h = addr(srv.sandbox.meta.primary().port);
    let o = query(
        srv,
        &[
            "--hosts",
            &h,
            "--format",
            "jsonl",
            "-e",
            "SELECT 27002 AS p, 9007199254740993 AS big, CAST(-7 AS SIGNED) AS neg, 1.5e0 AS f, 12.50 AS d, \
             x'00ff' AS b, 'é' AS s, NULL AS n, DATE('2026-11-26') AS dt; SELECT 2 AS q",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 2, "{}", stdout(&o));
    let row = &lines[0]["row"];
    assert_eq!(lines[0]["set"], 0);
    assert_eq!(row["p"], serde_json::json!(27002));
    assert_eq!(row["big"], serde_json::json!("9007199254740993"));
    assert_eq!(row["neg"], serde_json::json!(-7));
    assert_eq!(row["f"], serde_json::json!(1.5));
    assert_eq!(row["d"], serde_json::json!("12.50"));
    assert_eq!(row["b"], serde_json::json!({"base64": "AP8="}));
    assert_eq!(row["s"], serde_json::json!("é"));
    assert_eq!(row["n"], serde_json::Value::Null);
    assert_eq!(row["dt"], serde_json::json!("2026-11-26"));
    assert_eq!(lines[1]["set"], 1);
    assert_eq!(lines[1]["row"]["q"], serde_json::json!(2));
}

/// `--discover` from one node of a Galera cluster finds every member
/// (`wsrep_incoming_addresses`) and tags each with its cluster, node name
/// and state.
#[test]
fn discover_finds_every_galera_member_from_one_node() {
    let g = sqlfleet_testkit::galera();
    let name = g.sandbox.name().to_string();
    let nodes = &g.sandbox.meta.nodes;
    let o = common::sqlfleet()
        .env("SQLFLEET_HOME", g.home())
        .args(["query", "--sandbox", &name, "--discover"])
        .arg(format!("127.0.0.1:{}", nodes[1].port))
        .arg("--discover-only")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut lines: Vec<String> = stdout(&o).lines().map(str::to_owned).collect();
    lines.sort();
    let mut want: Vec<String> = nodes
        .iter()
        .map(|n| {
            format!(
                "127.0.0.1:{} cluster=sqlfleet-{name} depth=0 node={} role=member state=Synced",
                n.port, n.name
            )
        })
        .collect();
    want.sort();
    assert_eq!(lines, want);
}

/// The conventions' words (docs/guide/conventions.md): --json gives the
/// rows as JSON lines, --quiet leaves the summary out, --progress json
/// writes progress objects on standard error (standard output has the
/// rows), and the old --parallel still works with a note.
#[test]
fn json_quiet_progress_and_the_old_parallel() {
    let srv = server();
    let host = addr(srv.sandbox.meta.primary().port);
    let sql = "SELECT 1 AS a";
    let o = query(srv, &["--hosts", &host, "-e", sql, "--json", "--quiet"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rows: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(rows.len(), 1, "{}", stdout(&o));
    assert!(
        !stderr(&o).contains("sqlfleet query:"),
        "--quiet printed a summary: {}",
        stderr(&o)
    );
    let o = query(
        srv,
        &[
            "--hosts",
            &host,
            "-e",
            "SELECT SLEEP(1.2)",
            "--progress",
            "json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let progress: Vec<serde_json::Value> = stderr(&o)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("a JSON progress line"))
        .collect();
    assert!(!progress.is_empty(), "no progress line: {}", stderr(&o));
    assert_eq!(progress[0]["event"], "progress");
    assert_eq!(progress[0]["hosts"], 1);
    assert!(!stdout(&o).contains("progress"), "{}", stdout(&o));
    let o = query(srv, &["--hosts", &host, "-e", sql, "--parallel", "2"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--parallel is now --threads"),
        "{}",
        stderr(&o)
    );
}

/// A write meant for "the fleet" does not fork the replicas: on a server
/// that reports read_only, query makes the session read-only first, so
/// the server refuses the write there (and FLUSH, which read_only lets
/// through, stays out of the replica's binary log); replication carries
/// the primary's write to the replicas. --writes-on-read-only (or the
/// statements' own SET) writes there.
#[test]
fn a_write_run_on_a_sandbox_leaves_its_replicas_replicating() {
    let srv = replicated();
    let name = srv.sandbox.name().to_string();
    let primary_id = srv.sandbox.meta.primary().server_id;
    let db = format!("ro_guard_{}", std::process::id());
    let run = |args: &[&str]| {
        common::sqlfleet()
            .args(["query", "--sandbox", &name])
            .args(args)
            .env("SQLFLEET_HOME", srv.home())
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run")
    };
    let o = run(&["-e", &format!("CREATE DATABASE {db}")]);
    let err = stderr(&o);
    assert_eq!(
        o.status.code(),
        Some(2),
        "primary ok, replicas refused: {err}"
    );
    assert_eq!(
        err.matches("ERROR 1792").count(),
        2,
        "each replica refused the write itself: {err}"
    );
    assert!(err.contains("--writes-on-read-only"), "{err}");
    let o = run(&["-e", "FLUSH TABLES"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The replicas get the database from their primary, and log nothing
    // of their own.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = run(&["-e", &format!("SHOW DATABASES LIKE '{db}'")]);
        if stdout(&o).lines().count() == 3 {
            break;
        }
        assert!(Instant::now() < deadline, "not replicated: {}", stdout(&o));
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = run(&["-e", "SELECT @@gtid_binlog_pos"]);
    for line in stdout(&o).lines() {
        let pos = line.rsplit('\t').next().unwrap_or("");
        for gtid in pos.split(',').filter(|g| !g.is_empty()) {
            assert_eq!(
                gtid.split('-').nth(1),
                Some(primary_id.to_string().as_str()),
                "a transaction of a replica's own: {line}"
            );
        }
    }
    // A write the user means: the flag, with the statements' own
    // sql_log_bin = 0 so the shared sandbox stays replicating.
    let temp = [
        "-e",
        "SET SESSION sql_log_bin = 0; CREATE TEMPORARY TABLE test.ro_guard_t (a int)",
    ];
    let o = run(&temp);
    assert_eq!(o.status.code(), Some(2), "guarded: {}", stderr(&o));
    let o = run(&[&temp[..], &["--writes-on-read-only"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&[
        "--hosts",
        &addr(srv.sandbox.meta.primary().port),
        "-e",
        &format!("DROP DATABASE {db}"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A write on every member of one Galera cluster would be applied once
/// per member (three rows for one INSERT, a CREATE refused on all but
/// one): the first member to log in runs the run's writes, the others'
/// sessions are read-only (ERROR 1792, explained), so the cluster applies
/// each write once. What is not replicated (SET GLOBAL) still runs on
/// every member; --writes-on-read-only runs everything on each host.
#[test]
fn a_write_on_a_galera_cluster_is_applied_once() {
    let g = sqlfleet_testkit::galera();
    let name = g.sandbox.name().to_string();
    let members = g.sandbox.meta.nodes.len();
    let db = format!("galera_once_{}", std::process::id());
    let run = |args: &[&str]| {
        common::sqlfleet()
            .env("SQLFLEET_HOME", g.home())
            .args(["query", "--sandbox", &name])
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run")
    };
    let o = run(&[
        "-e",
        &format!("CREATE DATABASE {db}; CREATE TABLE {db}.t (a INT PRIMARY KEY AUTO_INCREMENT, b INT); INSERT INTO {db}.t (b) VALUES (1)"),
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("ERROR 1792").count(), members - 1, "{err}");
    assert!(err.contains("member of Galera cluster"), "{err}");
    let counts = || {
        let o = run(&["-e", &format!("SELECT COUNT(*) FROM {db}.t")]);
        let mut c: Vec<String> = stdout(&o)
            .lines()
            .filter_map(|l| l.rsplit('\t').next())
            .map(str::to_owned)
            .collect();
        c.sort();
        c
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while counts() != vec!["1".to_string(); members] {
        assert!(
            Instant::now() < deadline,
            "one row on every member: {:?}",
            counts()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = run(&[
        "-e",
        "SET GLOBAL max_connections = @@global.max_connections",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "not replicated, run on each: {}",
        stderr(&o)
    );
    let o = run(&[
        "--writes-on-read-only",
        "-e",
        &format!("INSERT INTO {db}.t (b) VALUES (2)"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let want = vec![(1 + members).to_string(); members];
    while counts() != want {
        assert!(
            Instant::now() < deadline,
            "a row per member: {:?}",
            counts()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = run(&["-e", &format!("DROP DATABASE {db}")]);
    assert_eq!(o.status.code(), Some(2), "dropped once: {}", stderr(&o));
}

/// jsonl is UTF-8: with a client character set whose text is not, it is
/// refused before any host is asked (before: `ü` in latin1 came out as
/// U+FFFD, sjis text as mojibake, exit 0); utf8mb4 and tsv are not.
#[test]
fn jsonl_refuses_a_client_character_set_whose_text_is_not_utf8() {
    let srv = server();
    let h = addr(srv.sandbox.meta.primary().port);
    let sql = "SELECT _utf8mb4'表示ü' AS c";
    for cs in ["latin1", "sjis", "binary"] {
        let set = format!("--default-character-set={cs}");
        let o = query(srv, &["--hosts", &h, &set, "--format", "jsonl", "-e", sql]);
        assert_eq!(o.status.code(), Some(1), "{cs}: {}", stdout(&o));
        assert!(
            stderr(&o).contains("--format jsonl writes UTF-8"),
            "{cs}: {}",
            stderr(&o)
        );
        assert!(stdout(&o).is_empty(), "{cs}: {}", stdout(&o));
        let o = query(srv, &["--hosts", &h, &set, "-e", sql]);
        assert_eq!(o.status.code(), Some(0), "{cs} tsv: {}", stderr(&o));
    }
    let o = query(
        srv,
        &[
            "--hosts",
            &h,
            "--default-character-set=utf8mb4",
            "--json",
            "-e",
            sql,
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("\"c\":\"表示ü\""), "{}", stdout(&o));
}

/// `--collapse` in TSV writes the rows' bytes as the client's character
/// set gives them, as streamed TSV does (before: through lossy UTF-8, so
/// latin1's `ü`, 0xFC, came out as U+FFFD).
#[test]
fn collapse_keeps_the_bytes_of_the_client_character_set() {
    let srv = server();
    let h = addr(srv.sandbox.meta.primary().port);
    let sql = "SELECT _utf8mb4'ü\\\\' AS c";
    for (cs, want) in [
        ("latin1", &b"\xfc\\\\\n"[..]),
        ("sjis", &b"?\x81\x5f\n"[..]),
        ("utf8mb4", "ü\\\\\n".as_bytes()),
    ] {
        let set = format!("--default-character-set={cs}");
        let o = query(srv, &["--hosts", &h, &set, "--collapse", "-e", sql]);
        assert_eq!(o.status.code(), Some(0), "{cs}: {}", stderr(&o));
        assert!(
            o.stdout.ends_with(want),
            "{cs}: {:?}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
}

/// An option file that asks for a checked server certificate the MariaDB
/// client's way (`ssl-verify-server-cert`; it has no ssl-mode) gets one,
/// as the stock client does: against a server whose certificate cannot be
/// checked (here: none offered) both refuse with ERROR 2026. Ignored, it
/// let sqlfleet connect in plain text; an `init-command` sqlfleet would
/// not run is refused, naming the file and line.
#[test]
fn option_files_asking_for_a_checked_certificate_are_obeyed_as_the_stock_client_obeys_them() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let base = std::fs::read_to_string(srv.defaults_file()).expect("defaults");
    let verify = dir.path().join("verify.cnf");
    std::fs::write(&verify, format!("{base}\nssl-verify-server-cert\n")).expect("write");
    let defaults = format!("--defaults-file={}", verify.display());
    let stock = std::process::Command::new("mariadb")
        .args([defaults.as_str(), "-N", "-e", "SELECT 1"])
        .output()
        .expect("mariadb");
    assert!(
        !stock.status.success() && stderr(&stock).contains("2026"),
        "the stock client: {}",
        stderr(&stock)
    );
    let ours = common::sqlfleet()
        .args(["query", defaults.as_str(), "-e", "SELECT 'connected'"])
        .env("SQLFLEET_HOME", srv.home())
        .output()
        .expect("run sqlfleet");
    assert_ne!(ours.status.code(), Some(0), "{}", stdout(&ours));
    assert!(!stdout(&ours).contains("connected"), "{}", stdout(&ours));
    assert!(stderr(&ours).contains("2026"), "{}", stderr(&ours));
    let init = dir.path().join("init.cnf");
    std::fs::write(
        &init,
        format!("{base}\ninit-command = SET sql_log_bin = 0\n"),
    )
    .expect("write");
    let o = common::sqlfleet()
        .args([
            "query",
            &format!("--defaults-file={}", init.display()),
            "-e",
            "SELECT 1",
        ])
        .env("SQLFLEET_HOME", srv.home())
        .output()
        .expect("run sqlfleet");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("init.cnf") && stderr(&o).contains("init-command"),
        "{}",
        stderr(&o)
    );
}

/// A panic in one host's work (a failpoint that panics once, for the
/// first host to start) is that host's error: counted in the summary,
/// named with the panic's words, exit 2; the other hosts answer (before:
/// the host was left out of the report, and the run said every host was
/// ok and exited 0).
#[test]
fn a_panic_in_one_host_s_work_is_that_host_s_error_not_a_host_left_out() {
    let srv = replicated();
    let n = srv.sandbox.meta.nodes.len();
    assert!(n >= 2, "a sandbox of several servers");
    let o = common::sqlfleet()
        .arg("query")
        .args([
            "--sandbox",
            srv.sandbox.name(),
            "--threads",
            "1",
            "-e",
            "SELECT 1",
        ])
        .env("SQLFLEET_HOME", srv.home())
        .env("SQLFLEET_FAILPOINTS", "query::host_started=1*panic")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run");
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{n} hosts"))
            && err.contains(&format!("{} ok, 1 error", n - 1))
            && err.contains("an internal error stopped this host's work")
            && err.contains("failpoint query::host_started panic"),
        "{err}"
    );
    assert_eq!(out.lines().count(), n - 1, "the other hosts' rows: {out}");
}

//! `sqlfleet watch`'s top statements against sandbox servers under a mix
//! of quick point selects and one deliberately bad query (a full scan of
//! an unindexed column, in a loop): the bad query tops the statements by
//! time in `--once --json`, on a server with performance_schema on (calls,
//! latency, rows examined, no index used) and on one with it off
//! (processlist sampling, named as such); a running watcher serves the
//! same on `/api/digests` (the server's and the fleet's), `/metrics` and its pages
//! (in headless Chromium, with screenshots) and the terminal screen's
//! pane (in tmux), and a threads_running incident names the statement in
//! its message. The pages and the pane are checked with performance_schema
//! off too (the top then sampled from the processlist).

mod common;

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use common::{sqlfleet, stderr, stdout, tmux};
use mysql_async::prelude::Queryable;
use sqlfleet_testkit::TestServer;

/// A server with performance_schema on (MariaDB ships it off).
fn with_ps() -> &'static TestServer {
    static S: OnceLock<TestServer> = OnceLock::new();
    S.get_or_init(|| sqlfleet_testkit::server_with(&["performance-schema=ON"]))
}

/// `sqlfleet watch` of `srv` every 0.5 s with no screen, serving its page
/// on a free port (returned), its history under `home`; `extra` flags
/// after those.
fn listening_watcher(
    srv: &TestServer,
    home: &std::path::Path,
    extra: &[&str],
    stdout: Stdio,
) -> (std::process::Child, u16) {
    let port = sqlfleet_testkit::proxy::free_port();
    let child = sqlfleet()
        .args([
            "watch",
            &format!("--defaults-file={}", srv.defaults_file().display()),
            "--hosts",
            &format!("127.0.0.1:{}", srv.sandbox.meta.primary().port),
            "--interval",
            "0.5",
            "--ui",
            "none",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .args(extra)
        .env("SQLFLEET_HOME", home)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .expect("watch");
    (child, port)
}

/// SIGTERM, the watcher's normal stop, and its exit awaited.
fn stop(mut child: std::process::Child) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let _ = child.wait();
}

/// The tests share their servers, and what one test runs would show in
/// another's top (a sysbench prepare's CREATE INDEX): one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static M: std::sync::Mutex<()> = std::sync::Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

/// The bad query's table: 200,000 rows, `v` without an index.
fn big_table(rt: &tokio::runtime::Runtime, srv: &TestServer) -> String {
    rt.block_on(async {
        let (db, _) = srv.fresh_db("topstmt").await;
        let mut c = srv.connect().await;
        c.query_drop(format!(
            "USE `{db}`; CREATE TABLE big (id INT PRIMARY KEY, v INT NOT NULL, pad CHAR(50) NOT NULL DEFAULT ''); \
             INSERT INTO big (id, v) SELECT seq, seq % 1000 FROM seq_1_to_200000"
        ))
        .await
        .expect("table");
        db
    })
}

/// Point selects from `points` clients and the bad query from 2, until
/// dropped.
struct Load {
    stop: Arc<AtomicBool>,
    rt: tokio::runtime::Runtime,
    tasks: Vec<tokio::task::JoinHandle<u64>>,
}

impl Load {
    fn start(srv: &TestServer, db: &str) -> Load {
        Load::with(srv, db, 3)
    }

    fn with(srv: &TestServer, db: &str, points: usize) -> Load {
        let rt = tokio::runtime::Runtime::new().expect("rt");
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for i in 0..points + 2 {
            let (stop, target, db) = (stop.clone(), srv.target(), db.to_string());
            tasks.push(rt.spawn(async move {
                let mut c = target
                    .connect(Duration::from_secs(10))
                    .await
                    .expect("client");
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let q = if i < points {
                        format!("SELECT pad FROM `{db}`.big WHERE id = {}", n % 200_000 + 1)
                    } else {
                        format!("SELECT COUNT(*) FROM `{db}`.big WHERE v = {}", n % 1000)
                    };
                    let _: Vec<String> = c.query(q).await.unwrap_or_default();
                }
                n
            }));
        }
        Load { stop, rt, tasks }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks.drain(..) {
            let _ = self.rt.block_on(t);
        }
    }
}

/// sysbench's oltp_read_only on its own database, 2 threads, until
/// dropped (the account's password in a file, never in argv). Text
/// statements (`db-ps-mode=disable`): MariaDB's performance_schema keeps
/// no digest for a prepared statement's executions.
struct Sysbench {
    child: std::process::Child,
    /// Holds the config file while sysbench runs.
    _dir: tempfile::TempDir,
}

impl Sysbench {
    fn start(rt: &tokio::runtime::Runtime, srv: &TestServer) -> Sysbench {
        let (db, _) = rt.block_on(srv.fresh_db("sb"));
        let dir = tempfile::tempdir().expect("tmp");
        let cfg = dir.path().join("sb.cfg");
        let pw = srv.sandbox.password().expect("pw");
        std::fs::write(
            &cfg,
            format!(
                "mysql-host=127.0.0.1\nmysql-port={}\nmysql-user=root\nmysql-password={}\nmysql-db={db}\nmysql-ssl=off\ndb-ps-mode=disable\n",
                srv.sandbox.meta.primary().port,
                pw.expose()
            ),
        )
        .expect("cfg");
        let base = |step: &str| {
            let mut c = std::process::Command::new("sysbench");
            c.arg(format!("--config-file={}", cfg.display()))
                .args(["oltp_read_only", "--tables=1", "--table-size=10000"])
                .args(if step == "run" {
                    vec!["--threads=2", "--time=300", "--report-interval=0"]
                } else {
                    vec![]
                })
                .arg(step)
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            c
        };
        let o = base("prepare")
            .status()
            .expect("sysbench (scripts/deps.sh installs it)");
        assert!(o.success(), "sysbench prepare");
        let child = base("run").spawn().expect("sysbench run");
        Sysbench { child, _dir: dir }
    }
}

impl Drop for Sysbench {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn once(srv: &TestServer) -> serde_json::Value {
    let o = sqlfleet()
        .args([
            "watch",
            &format!("--defaults-file={}", srv.defaults_file().display()),
            "--hosts",
            &format!("127.0.0.1:{}", srv.sandbox.meta.primary().port),
            "--once",
            "--json",
            "--interval",
            "2",
        ])
        .env("SQLFLEET_HOME", srv.home())
        .stdin(Stdio::null())
        .output()
        .expect("watch --once");
    assert!(o.status.code().is_some_and(|c| c <= 1), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON");
    v["servers"][0]["statements"].clone()
}

fn is_bad(digest: &str) -> bool {
    digest.contains("COUNT") && digest.contains("big")
}

#[test]
fn the_bad_query_tops_the_statements_with_performance_schema_on() {
    let _one = serial();
    let srv = with_ps();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let db = big_table(&rt, srv);
    // A sysbench mix and the scan in a loop, and point selects.
    let _sysbench = Sysbench::start(&rt, srv);
    let _load = Load::start(srv, &db);
    std::thread::sleep(Duration::from_secs(1));
    let st = once(srv);
    assert_eq!(st["method"], "performance_schema", "{st}");
    let top = &st["top"][0];
    assert!(is_bad(top["digest"].as_str().unwrap_or_default()), "{st:#}");
    // What performance_schema adds: calls, latency, rows, no index used.
    assert!(top["calls"].as_u64().unwrap_or(0) >= 1, "{top}");
    assert!(top["avg_ms"].as_f64().unwrap_or(0.0) > 0.0, "{top}");
    assert!(
        top["rows_examined"].as_u64().unwrap_or(0) >= 200_000,
        "{top}"
    );
    assert!(top["no_index"].as_u64().unwrap_or(0) >= 1, "{top}");
    // The point selects are there too, below it.
    let point = st["top"]
        .as_array()
        .and_then(|a| {
            a.iter().find(|t| {
                t["digest"]
                    .as_str()
                    .is_some_and(|d| d.contains("pad") && d.to_lowercase().contains("id"))
            })
        })
        .cloned()
        .unwrap_or_else(|| panic!("the point selects are listed: {st:#}"));
    assert!(
        point["calls"].as_u64() > top["calls"].as_u64(),
        "more point selects than scans: {point} {top}"
    );
    // sysbench's statements are listed under their digests.
    assert!(
        st["top"].as_array().is_some_and(|a| a
            .iter()
            .any(|t| t["digest"].as_str().is_some_and(|d| d.contains("sbtest1")))),
        "sysbench's statements: {st:#}"
    );
}

#[test]
fn the_bad_query_tops_the_statements_sampled_from_the_processlist() {
    let _one = serial();
    let srv = sqlfleet_testkit::server();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let db = big_table(&rt, srv);
    let _sysbench = Sysbench::start(&rt, srv);
    let _load = Load::start(srv, &db);
    std::thread::sleep(Duration::from_secs(1));
    // One read sees what runs at that instant: the scans, as a rule (two
    // of five clients, each scan far longer than a point select).
    let t0 = Instant::now();
    let st = loop {
        let st = once(srv);
        assert_eq!(st["method"], "processlist", "{st}");
        if st["top"][0]["digest"].as_str().is_some_and(is_bad) {
            break st;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the scan never topped the sampled statements: {st:#}"
        );
    };
    let top = &st["top"][0];
    assert_eq!(top["calls"], 0, "sampling counts no calls: {top}");
    assert!(top["avg_ms"].is_null(), "nor latency: {top}");
    // `statements = false` in watch.toml: no statement figures at all.
    let dir = tempfile::tempdir().expect("tmp");
    let config = dir.path().join("watch.toml");
    std::fs::write(&config, "statements = false\n").expect("config");
    let o = sqlfleet()
        .args([
            "watch",
            &format!("--defaults-file={}", srv.defaults_file().display()),
            "--hosts",
            &format!("127.0.0.1:{}", srv.sandbox.meta.primary().port),
            "--once",
            "--json",
            "--config",
        ])
        .arg(&config)
        .env("SQLFLEET_HOME", srv.home())
        .stdin(Stdio::null())
        .output()
        .expect("watch --once");
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON");
    let off = &v["servers"][0]["statements"];
    assert!(
        off["method"].is_null() && off["top"] == serde_json::json!([]),
        "{off}"
    );
}

#[test]
fn a_watcher_serves_the_top_and_names_it_in_a_busy_servers_incident() {
    let _one = serial();
    let srv = with_ps();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let db = big_table(&rt, srv);
    let dir = tempfile::tempdir().expect("tmp");
    let config = dir.path().join("watch.toml");
    // Busy: more than 1 thread running for one check.
    std::fs::write(
        &config,
        "[rules.threads_running]\nabove = 1\nchecks = 1\nhold = 0\n",
    )
    .expect("config");
    // Prepared (its CREATE INDEX done) before the watcher looks.
    let sysbench = Sysbench::start(&rt, srv);
    let (mut child, port) = listening_watcher(
        srv,
        dir.path(),
        &["--json", "--config", &config.display().to_string()],
        Stdio::piped(),
    );
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let load = Load::start(srv, &db);
    // The incident's message names the scan.
    let t0 = Instant::now();
    let opened = loop {
        let Ok(l) = rx.recv_timeout(Duration::from_secs(30)) else {
            panic!("no threads_running incident within 30 s");
        };
        if l.contains("\"threads_running\"") && l.contains("opened") && l.contains("top statements")
        {
            break l;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no incident naming statements"
        );
    };
    assert!(
        opened.contains("COUNT") && opened.contains("big"),
        "{opened}"
    );
    // The API: the server's top and the fleet's.
    let server = format!("127.0.0.1:{}", srv.sandbox.meta.primary().port);
    let addr = format!("127.0.0.1:{port}");
    let get = |path: &str| -> serde_json::Value {
        let (code, _, body) = sqlfleet_testkit::http::http_get(&addr, path, &[]);
        assert_eq!(code, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
    };
    // Within a few reads (the first is performance_schema's baseline).
    let t0 = Instant::now();
    let one = loop {
        let one = get(&format!("/api/digests?server={server}"));
        if one["top"][0]["digest"].as_str().is_some_and(is_bad) {
            break one;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "{one:#}");
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(one["method"], "performance_schema", "{one}");
    let fleet = get("/api/digests?sort=time");
    assert_eq!(fleet["servers"], 1, "{fleet}");
    assert!(
        fleet["top"][0]["digest"].as_str().is_some_and(is_bad),
        "{fleet:#}"
    );
    assert_eq!(fleet["top"][0]["servers"], 1, "{fleet}");
    let by_calls = get("/api/digests?sort=calls");
    assert!(
        !by_calls["top"][0]["digest"].as_str().is_some_and(is_bad),
        "by calls the point selects lead: {by_calls:#}"
    );
    let (code, _, body) = sqlfleet_testkit::http::http_get(&addr, "/api/digests?sort=size", &[]);
    assert_eq!(code, 400, "{body}");
    // The scan's chart over time, from the history: its latency (calls
    // are counted with performance_schema) and its statement time.
    let enc = |s: &str| -> String {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    };
    let chart = |metric: &str| {
        format!(
            "/api/digest_chart.svg?server={}&schema={}&digest={}&metric={metric}",
            enc(&server),
            enc(one["top"][0]["schema"].as_str().unwrap_or_default()),
            enc(one["top"][0]["digest"].as_str().unwrap_or_default()),
        )
    };
    let t0 = Instant::now();
    loop {
        let (code, _, body) = sqlfleet_testkit::http::http_get(&addr, &chart("latency"), &[]);
        if code == 200 {
            assert!(
                body.contains("<svg") && body.contains("avg latency (ms)"),
                "{body}"
            );
            break;
        }
        assert!(
            code == 404 && t0.elapsed() < Duration::from_secs(20),
            "{code}: {body}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let (code, _, body) = sqlfleet_testkit::http::http_get(&addr, &chart("size"), &[]);
    assert_eq!(code, 400, "{body}");
    // Prometheus: the server's costliest statements, bounded, promtool-clean.
    let (code, _, text) = sqlfleet_testkit::http::http_get(&addr, "/metrics", &[]);
    assert_eq!(code, 200, "{text}");
    let series: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("sqlfleet_watch_statement_seconds_per_second{"))
        .collect();
    assert!(
        (1..=5).contains(&series.len())
            && series
                .iter()
                .any(|l| l.contains("COUNT") && l.contains("big")),
        "{series:#?}"
    );
    assert!(
        text.contains("sqlfleet_watch_statement_calls_per_second{"),
        "{text}"
    );
    let o = common::output_with_stdin(
        std::process::Command::new("promtool").args(["check", "metrics"]),
        text.as_bytes(),
    );
    assert!(
        o.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&o.stdout),
        stderr(&o)
    );
    // The pages a person looks at: the fleet's top and the server's, in
    // a real browser (screenshots in target/test-artifacts/watch-statements).
    let shots = sqlfleet_testkit::browser::artifacts("watch-statements");
    let mut b = sqlfleet_testkit::browser::Browser::launch();
    b.goto(&format!("http://{addr}/"));
    let first_row =
        "(document.querySelector('#digests tbody tr td:last-child') || {}).textContent || ''";
    b.wait_for(
        &format!("({first_row}).includes('COUNT') && ({first_row}).includes('big')"),
        Duration::from_secs(20),
    );
    let how = b.eval("document.querySelector('#digests-how').textContent");
    assert!(
        how.as_str()
            .is_some_and(|h| h.contains("1 servers (1 performance_schema")),
        "{how}"
    );
    b.screenshot(&shots.join("fleet-top-statements.png"));
    b.goto(&format!("http://{addr}/server?name={server}"));
    b.wait_for(
        &format!("({first_row}).includes('COUNT') && ({first_row}).includes('big')"),
        Duration::from_secs(20),
    );
    let how = b.eval("document.querySelector('#digests-how').textContent");
    assert!(
        how.as_str()
            .is_some_and(|h| h.contains("performance_schema, last")),
        "{how}"
    );
    // A click on the scan's row draws its charts from the history.
    b.eval("document.querySelector('#digests tbody tr').click()");
    b.wait_for(
        "document.querySelectorAll('#digest-charts figure svg').length >= 2",
        Duration::from_secs(20),
    );
    b.screenshot(&shots.join("server-statement-over-time.png"));
    // Sorted by calls, the point selects lead.
    b.eval("document.querySelector('button[data-sort=\"calls\"]').click()");
    b.wait_for(
        &format!("({first_row}).includes('pad')"),
        Duration::from_secs(10),
    );
    b.screenshot(&shots.join("server-top-statements-by-calls.png"));
    drop(load);
    drop(sysbench);
    stop(child);
}

#[test]
fn the_pages_show_the_bad_query_sampled_with_performance_schema_off() {
    let _one = serial();
    let srv = sqlfleet_testkit::server();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let db = big_table(&rt, srv);
    let _sysbench = Sysbench::start(&rt, srv);
    let dir = tempfile::tempdir().expect("tmp");
    let (child, port) = listening_watcher(srv, dir.path(), &[], Stdio::null());
    let _load = Load::start(srv, &db);
    let server = format!("127.0.0.1:{}", srv.sandbox.meta.primary().port);
    let addr = format!("127.0.0.1:{port}");
    sqlfleet_testkit::proxy::wait_listening(port);
    let shots = sqlfleet_testkit::browser::artifacts("watch-statements");
    let mut b = sqlfleet_testkit::browser::Browser::launch();
    let first_row =
        "(document.querySelector('#digests tbody tr td:last-child') || {}).textContent || ''";
    for (page, how_says, shot) in [
        (
            "/",
            "0 performance_schema, 1 processlist sampling",
            "fleet-top-sampled.png",
        ),
        (
            &format!("/server?name={server}")[..],
            "processlist sampling",
            "server-top-sampled.png",
        ),
    ] {
        b.goto(&format!("http://{addr}{page}"));
        b.wait_for(
            &format!("({first_row}).includes('COUNT') && ({first_row}).includes('big')"),
            Duration::from_secs(30),
        );
        let how = b.eval("document.querySelector('#digests-how').textContent");
        assert!(
            how.as_str().is_some_and(|h| h.contains(how_says)),
            "{page}: {how}"
        );
        b.screenshot(&shots.join(shot));
    }
    stop(child);
}

#[test]
fn the_terminal_screen_shows_the_bad_query_at_the_top_of_its_pane() {
    pane_tops_the_bad_query(with_ps());
}

#[test]
fn the_pane_shows_the_bad_query_sampled_with_performance_schema_off() {
    pane_tops_the_bad_query(sqlfleet_testkit::server());
}

/// The TUI's `t` pane: the scan is its first row.
fn pane_tops_the_bad_query(srv: &TestServer) {
    let _one = serial();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let db = big_table(&rt, srv);
    let _sysbench = Sysbench::start(&rt, srv);
    let _load = Load::start(srv, &db);
    let session = format!("sqlfleet-watch-top-{}", std::process::id());
    let cmd = format!(
        "{} watch --defaults-file={} --hosts 127.0.0.1:{} --interval 0.5 --timeout 1",
        env!("CARGO_BIN_EXE_sqlfleet"),
        srv.defaults_file().display(),
        srv.sandbox.meta.primary().port
    );
    tmux(&["kill-session", "-t", &session]);
    tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "200",
        "-y",
        "40",
        &cmd,
    ]);
    tmux(&["send-keys", "-t", &session, "t"]);
    // The pane's first row under its header is the scan.
    let t0 = Instant::now();
    let screen = loop {
        let screen = tmux(&["capture-pane", "-p", "-t", &session]);
        let first = screen
            .lines()
            .skip_while(|l| !l.contains("SHARE"))
            .nth(1)
            .unwrap_or_default()
            .to_string();
        if first.contains("COUNT") && first.contains("big") {
            break screen;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            tmux(&["kill-session", "-t", &session]);
            panic!("the scan never topped the pane:\n{screen}");
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(
        screen.contains("top statements across the servers shown"),
        "{screen}"
    );
    tmux(&["send-keys", "-t", &session, "q"]);
    let t0 = Instant::now();
    while tmux(&["list-sessions"]).contains(&session) {
        assert!(t0.elapsed() < Duration::from_secs(5), "q did not quit");
        std::thread::sleep(Duration::from_millis(100));
    }
}

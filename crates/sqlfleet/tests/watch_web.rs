//! `sqlfleet watch --listen`: the fleet page in a real browser (headless
//! Chromium) against sandbox servers — every server shown, a killed node
//! turns "down" and comes back, a server page with chart points, the
//! incidents page; `/metrics` checked by `promtool`; the history kept
//! across a restart and refused to a second watcher; a non-loopback bind
//! refused without a login and guarded with one.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::{sqlfleet, stderr};
use sqlfleet_sandbox::{node, UpOptions};
use sqlfleet_testkit::browser::{artifacts, Browser};
use sqlfleet_testkit::http::http_get;
use sqlfleet_testkit::{replicated, TestServer};

/// A running `sqlfleet watch` and the address its page is on.
struct Watcher {
    child: Child,
    addr: String,
}

impl Watcher {
    fn start(srv: &TestServer, extra: &[&str], env: &[(&str, &str)]) -> Watcher {
        let mut child = sqlfleet()
            .arg("watch")
            .args(["--sandbox", srv.sandbox.name()])
            .args([
                "--interval",
                "0.5",
                "--timeout",
                "1",
                "--ui",
                "none",
                "--json",
            ])
            .args(extra)
            .env("SQLFLEET_HOME", srv.home())
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start watch");
        let err = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if let Some(a) = line.split("http://").nth(1) {
                    let _ = tx.send(a.trim_end_matches('/').to_string());
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("watch printed its page's address");
        Watcher { child, addr }
    }

    fn stop(mut self) {
        // SIGTERM: the watcher's normal stop.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the sandbox's stopped nodes again from a thread that lives as
/// long as the test binary: a server dies with the thread that started it
/// (so it never outlives the tests), and the next test needs it up.
fn restart_for_good(srv: &TestServer) {
    let (tx, rx) = mpsc::channel();
    let (home, name) = (srv.sandbox.home.clone(), srv.sandbox.meta.name.clone());
    std::thread::spawn(move || {
        // A current-thread runtime kept with this thread, which parks until
        // the process exits: the server dies with it, not before.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
        let r = match &rt {
            Ok(rt) => rt
                .block_on(sqlfleet_sandbox::up(
                    &home,
                    &UpOptions {
                        name,
                        die_with_parent: true,
                        ..UpOptions::default()
                    },
                ))
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let _ = tx.send(r);
        loop {
            std::thread::park();
        }
    });
    rx.recv()
        .expect("restart thread")
        .expect("restart the sandbox");
}

/// The tests share one sandbox and one of them kills a node: one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

/// `sqlfleet watch` of the sandbox with `extra`, expected to stop at
/// once (refused at start): its output.
fn refused_run(srv: &TestServer, extra: &[&str]) -> std::process::Output {
    sqlfleet()
        .args(["watch", "--sandbox", srv.sandbox.name(), "--ui", "none"])
        .args(extra)
        .env("SQLFLEET_HOME", srv.home())
        .stdin(Stdio::null())
        .output()
        .expect("run watch")
}

fn json(addr: &str, path: &str) -> serde_json::Value {
    let (code, _, body) = http_get(addr, path, &[]);
    assert_eq!(code, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

fn addr_of(srv: &TestServer, i: usize) -> String {
    format!("127.0.0.1:{}", srv.sandbox.meta.nodes[i].port)
}

#[test]
fn fleet_page_in_a_browser_follows_a_node_down_and_back() {
    let _one = serial();
    let srv = replicated();
    let dir = tempfile::tempdir().expect("dir");
    let hist = dir.path().join("h.db");
    let (url, hook) = sqlfleet_testkit::sinks::webhook(0);
    let config = dir.path().join("watch.toml");
    // The default unreachable rule (3 failed checks), cleared after 3 s of
    // answers so the incident's end falls inside the test.
    std::fs::write(
        &config,
        format!("[notify.webhook]\nurl = \"{url}\"\n[rules.unreachable]\nclear = 3\n"),
    )
    .expect("config");
    let w = Watcher::start(
        srv,
        &[
            "--listen",
            "127.0.0.1:0",
            "--history",
            hist.to_str().expect("path"),
            "--config",
            config.to_str().expect("path"),
        ],
        &[],
    );
    let shots = artifacts("watch-web");
    let mut b = Browser::launch();
    b.goto(&format!("http://{}/", w.addr));
    // Every server, live, all ok.
    b.wait_for(
        "document.querySelectorAll('#fleet tbody tr[data-state=\"ok\"]').length === 3",
        Duration::from_secs(20),
    );
    let names = b.eval("[...document.querySelectorAll('#fleet tbody tr[data-server]')].map(r => r.dataset.server).sort().join(',')");
    let mut want: Vec<String> = (0..3).map(|i| addr_of(srv, i)).collect();
    want.sort();
    assert_eq!(names.as_str(), Some(want.join(",").as_str()));
    // Each row has the buffer pool hit rate and slow queries, and a
    // sparkline of the last minutes that fills without a click.
    b.wait_for(
        "[...document.querySelectorAll('#fleet tbody tr[data-server]')].every(r => r.children[7].textContent.endsWith('%') && r.children[6].textContent !== '')",
        Duration::from_secs(20),
    );
    b.wait_for(
        "[...document.querySelectorAll('#fleet tbody svg.spark path[data-series=\"qps\"]')].filter(p => (p.getAttribute('d') || '').length > 0).length === 3",
        Duration::from_secs(25),
    );
    b.screenshot(&shots.join("fleet-ok.png"));
    // Grouped by the sandbox's node tag: one heading per node.
    b.eval("{ const g = document.querySelector('#group'); g.value = 'node'; g.dispatchEvent(new Event('change')) }");
    let groups = b.eval(
        "[...document.querySelectorAll('#fleet tbody tr.group')].map(r => r.textContent).join('|')",
    );
    let groups = groups.as_str().unwrap_or_default();
    for n in ["node=node1", "node=node2", "node=node3"] {
        assert!(groups.contains(n), "{groups}");
    }
    // The filter box leaves only what matches.
    let port = srv.sandbox.meta.nodes[2].port.to_string();
    b.eval(&format!("{{ const f = document.querySelector('#filter'); f.value = '{port}'; f.dispatchEvent(new Event('input')) }}"));
    let shown = b.eval("[...document.querySelectorAll('#fleet tbody tr[data-server]')].filter(r => !r.hidden).map(r => r.dataset.server).join(',')");
    assert_eq!(shown.as_str(), Some(addr_of(srv, 2).as_str()));
    b.eval("{ const f = document.querySelector('#filter'); f.value = ''; f.dispatchEvent(new Event('input')); const g = document.querySelector('#group'); g.value = ''; g.dispatchEvent(new Event('change')) }");

    // kill -9 a replica: its row turns down (and moves to the top) without a reload.
    b.eval("window.__sameDocument = true");
    let victim = addr_of(srv, 1);
    let layout = srv.sandbox.layout.node(&srv.sandbox.meta.nodes[1]);
    let pid = node::running_pid(&layout).expect("replica1 runs");
    let killed = Instant::now();
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let row = format!("document.querySelector('#fleet tbody tr[data-server=\"{victim}\"]')");
    b.wait_for(
        &format!("{row}.dataset.state === 'down'"),
        Duration::from_secs(10),
    );
    let took = killed.elapsed();
    assert!(
        b.eval("window.__sameDocument === true") == serde_json::Value::Bool(true),
        "the page reloaded"
    );
    assert_eq!(
        b.eval("document.querySelector('#fleet tbody tr').dataset.server")
            .as_str(),
        Some(victim.as_str()),
        "the down server is listed first"
    );
    // The kept connection is lost first; the next check names the refusal.
    b.wait_for(
        &format!("{row}.querySelector('td.why').textContent.includes(\"Can't connect\")"),
        Duration::from_secs(10),
    );
    b.screenshot(&shots.join("fleet-down.png"));
    eprintln!("the page showed the kill after {took:?}");
    // The incident opens only after its third failed check: the node stays
    // down until it has (and was notified), so the restart cannot race it.
    hook.wait_for(
        &[&format!("OPENED   {victim}  unreachable")],
        Duration::from_secs(30),
    );

    // Restart: back to ok.
    while node::running_pid(&layout).is_some() {
        std::thread::sleep(Duration::from_millis(20));
    }
    restart_for_good(srv);
    b.wait_for(
        &format!("{row}.dataset.state === 'ok'"),
        Duration::from_secs(60),
    );

    // A server page: charts with points drawn from the history.
    let primary = addr_of(srv, 0);
    b.goto(&format!("http://{}/server?name={primary}", w.addr));
    let points = b.wait_for(
        "document.querySelectorAll('figure[data-metric=\"qps\"] svg circle[data-y]').length",
        Duration::from_secs(20),
    );
    assert!(points.as_u64().unwrap_or(0) >= 1, "{points}");
    assert_eq!(
        b.eval("document.querySelector('#state').textContent")
            .as_str(),
        Some("ok")
    );
    b.wait_for(
        "document.querySelectorAll('#channels tbody tr').length === 0 && document.querySelector('#why').textContent.includes('MariaDB')",
        Duration::from_secs(10),
    );
    b.screenshot(&shots.join("server.png"));

    // The replica's page: its incident is shaded on its charts and listed.
    b.goto(&format!("http://{}/server?name={victim}", w.addr));
    b.wait_for(
        "[...document.querySelectorAll('#incidents tbody tr')].some(r => r.textContent.includes('unreachable'))",
        Duration::from_secs(20),
    );
    b.wait_for(
        "document.querySelectorAll('figure[data-metric=\"qps\"] svg rect.band').length >= 1",
        Duration::from_secs(20),
    );
    let channels = b.eval("document.querySelector('#channels tbody').textContent");
    assert!(
        channels.as_str().unwrap_or_default().contains(&primary),
        "{channels}"
    );
    b.screenshot(&shots.join("server-replica.png"));

    // The incidents page: opened and resolved, with what was notified.
    b.goto(&format!("http://{}/incidents", w.addr));
    let text = b.wait_for(
        &format!("[...document.querySelectorAll('#incidents tbody tr')].map(r => r.textContent).find(t => t.includes('{victim}') && t.includes('unreachable') && !t.includes('open')) || ''"),
        Duration::from_secs(30),
    );
    let text = text.as_str().unwrap_or_default();
    assert!(text.contains("Can't connect"), "{text}");
    // What was sent about it is on the page, and did arrive.
    hook.wait_for(&[&victim, "resolved"], Duration::from_secs(10));
    b.wait_for(
        &format!("[...document.querySelectorAll('#incidents tbody tr')].some(r => r.textContent.includes('{victim}') && (r.textContent.match(/webhook sent/g) || []).length === 2)"),
        Duration::from_secs(10),
    );
    b.screenshot(&shots.join("incidents.png"));
    w.stop();
}

#[test]
fn metrics_pass_promtool_and_the_history_survives_a_restart() {
    let _one = serial();
    let srv = replicated();
    let dir = tempfile::tempdir().expect("dir");
    let hist = dir.path().join("h.db");
    let h = hist.to_str().expect("path");
    let w = Watcher::start(srv, &["--listen", "127.0.0.1:0", "--history", h], &[]);
    let primary = addr_of(srv, 0);
    let series = format!("/api/series?server={primary}&metric=running&range=hour");
    let deadline = Instant::now() + Duration::from_secs(20);
    let first = loop {
        let v = json(&w.addr, &series);
        let n = v["points"].as_array().map(Vec::len).unwrap_or(0);
        if n >= 1 {
            break v;
        }
        assert!(Instant::now() < deadline, "no history points: {v}");
        std::thread::sleep(Duration::from_millis(300));
    };

    // Every server checked and ok before the scrape.
    let deadline = Instant::now() + Duration::from_secs(20);
    while json(&w.addr, "/api/fleet")["servers"]
        .as_array()
        .is_none_or(|v| v.iter().filter(|s| s["state"] == "ok").count() < 3)
    {
        assert!(Instant::now() < deadline, "not all ok");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (code, headers, text) = http_get(&w.addr, "/metrics", &[]);
    assert_eq!(code, 200);
    let ctype = headers
        .iter()
        .find(|(k, _)| k == "content-type")
        .map(|(_, v)| v.as_str());
    assert_eq!(ctype, Some("text/plain; version=0.0.4; charset=utf-8"));
    assert!(headers
        .iter()
        .any(|(k, v)| k == "cache-control" && v == "no-store"));
    for name in [
        // The host tags ride along as labels.
        &format!("sqlfleet_watch_up{{node=\"node1\",role=\"primary\",sandbox=\"{}\",server=\"{primary}\"}} 1", srv.sandbox.name()),
        "sqlfleet_watch_slow_queries_per_second{",
        "sqlfleet_watch_buffer_pool_hit_ratio{",
        "sqlfleet_watch_innodb_row_operations_per_second{",
        "sqlfleet_watch_servers{state=\"ok\"} 3",
        "sqlfleet_watch_replication_sql_running{channel=\"\",server=\"",
        "sqlfleet_watch_check_duration_seconds_bucket{le=\"+Inf\"}",
        &format!("sqlfleet_watch_checks_total{{server=\"{primary}\"}}"),
    ] {
        assert!(text.contains(name), "{name} missing in:\n{text}");
    }
    let o = common::output_with_stdin(
        Command::new("promtool").args(["check", "metrics"]),
        text.as_bytes(),
    );
    assert!(
        o.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&o.stdout),
        stderr(&o)
    );

    // A second watcher on the same file is refused, naming it.
    let o = refused_run(srv, &["--history", h]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("in use by another process"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("h.db"), "{}", stderr(&o));

    // Restart on the same file: the old points are still there.
    let old_first = first["points"][0][0].as_f64().expect("t");
    w.stop();
    let w = Watcher::start(srv, &["--listen", "127.0.0.1:0", "--history", h], &[]);
    let v = json(&w.addr, &series);
    let pts = v["points"].as_array().expect("points");
    assert!(
        pts.iter().any(|p| p[0].as_f64() == Some(old_first)),
        "{old_first} not in {v}"
    );
    w.stop();

    // Not a history file: refused with one line naming it.
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, vec![b'x'; 4096]).expect("write");
    let o = refused_run(srv, &["--history", junk.to_str().expect("path")]);
    common::assert_setup_error(&o, "junk.db: not a sqlfleet watch history");
}

fn store(home: &Path, args: &[&str], stdin: &str) {
    let o = common::output_with_stdin(
        sqlfleet()
            .arg("watch")
            .arg("creds")
            .args(args)
            .env("SQLFLEET_HOME", home)
            .env("SQLFLEET_CREDS_PASSPHRASE", "correct horse"),
        stdin.as_bytes(),
    );
    assert!(o.status.success(), "creds {args:?}: {}", stderr(&o));
}

#[test]
fn a_non_local_bind_needs_a_login_and_every_request_carries_it() {
    let _one = serial();
    let srv = replicated();
    let home = srv.home();
    let o = refused_run(srv, &["--listen", "0.0.0.0:0"]);
    common::assert_setup_error(&o, "not a loopback address, so the page needs a login");

    // A bearer token.
    let hist = tempfile::tempdir().expect("dir");
    let h = hist.path().join("h.db");
    let w = Watcher::start(
        srv,
        &["--listen", "0.0.0.0:0", "--history", h.to_str().expect("p")],
        &[("SQLFLEET_WATCH_TOKEN", "s3cret-token")],
    );
    let port = w.addr.rsplit(':').next().expect("port").to_string();
    let local = format!("127.0.0.1:{port}");
    for path in ["/", "/api/fleet", "/metrics", "/assets/app.js"] {
        let (code, hs, _) = http_get(&local, path, &[]);
        assert_eq!(code, 401, "{path} without a login");
        assert!(hs.iter().any(|(k, _)| k == "www-authenticate"), "{path}");
        let (code, _, _) = http_get(&local, path, &[("Authorization", "Bearer wrong-token!")]);
        assert_eq!(code, 401, "{path} with a wrong token");
        let (code, hs, body) = http_get(&local, path, &[("Authorization", "Bearer s3cret-token")]);
        assert_eq!(code, 200, "{path}: {body}");
        assert!(hs
            .iter()
            .any(|(k, v)| k == "x-content-type-options" && v == "nosniff"));
    }
    w.stop();

    // Basic auth from the credential store; the password never shows.
    let creds = tempfile::tempdir().expect("dir");
    let file = creds.path().join("c.age");
    let f = file.to_str().expect("p");
    store(home, &["--creds", f, "init"], "");
    store(home, &["--creds", f, "web", "--user", "ops"], "pa55-word\n");
    let w = Watcher::start(
        srv,
        &[
            "--listen",
            "0.0.0.0:0",
            "--history",
            h.to_str().expect("p"),
            "--creds",
            f,
        ],
        &[("SQLFLEET_CREDS_PASSPHRASE", "correct horse")],
    );
    let port = w.addr.rsplit(':').next().expect("port").to_string();
    let local = format!("127.0.0.1:{port}");
    let (code, _, _) = http_get(&local, "/api/fleet", &[]);
    assert_eq!(code, 401);
    // "ops:pa55-word" and a wrong password.
    let (code, _, body) = http_get(
        &local,
        "/api/fleet",
        &[("Authorization", "Basic b3BzOnBhNTUtd29yZA==")],
    );
    assert_eq!(code, 200, "{body}");
    assert!(!body.contains("pa55-word"));
    let (code, _, _) = http_get(
        &local,
        "/api/fleet",
        &[("Authorization", "Basic b3BzOndyb25n")],
    );
    assert_eq!(code, 401);
    w.stop();
}

/// Not a test: bench/watch.sh runs it (`--ignored`) against a watcher of
/// 1,000 servers to report how long the browser takes to draw one update
/// of the fleet page. `WATCH_PAGE` is the page's address.
#[test]
#[ignore]
fn fleet_page_draw_time() {
    let Ok(url) = std::env::var("WATCH_PAGE") else {
        return;
    };
    let mut b = Browser::launch();
    let t = Instant::now();
    b.goto(&url);
    let rows = b.wait_for(
        "Number(document.body.dataset.rows || 0)",
        Duration::from_secs(30),
    );
    let first = t.elapsed();
    let mut draws = Vec::new();
    let mut last = String::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    while draws.len() < 10 && Instant::now() < deadline {
        let v = b.eval("document.body.dataset.renderMs + '/' + performance.now()");
        let v = v.as_str().unwrap_or_default().to_string();
        if v != last {
            if let Some(ms) = v.split('/').next().and_then(|m| m.parse::<f64>().ok()) {
                draws.push(ms);
            }
            last = v;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    draws.sort_by(f64::total_cmp);
    let median = draws.get(draws.len() / 2).copied().unwrap_or(f64::NAN);
    let max = draws.last().copied().unwrap_or(f64::NAN);
    b.screenshot(&artifacts("watch-bench").join("fleet-1000.png"));
    println!(
        "PAGE rows={rows} first_view_ms={:.0} draw_median_ms={median:.1} draw_max_ms={max:.1} draws={}",
        first.as_secs_f64() * 1000.0,
        draws.len()
    );
}

/// The processes whose command line holds `needle` (other than ours).
fn argv_holding(needle: &str) -> Vec<String> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter(|e| e.file_name().to_string_lossy() != me)
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(needle))
        .collect()
}

#[test]
fn an_ssh_password_from_the_store_goes_through_askpass_never_argv() {
    let _one = serial();
    let srv = replicated();
    let dir = tempfile::tempdir().expect("dir");
    let pw = format!(
        "ssh-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos() % 100_000
    );
    let user = sqlfleet_testkit::sshd::password_user(&pw);
    // Password logins only: no key of ours is authorised for this login.
    let sshd = sqlfleet_testkit::sshd::start(dir.path(), true);
    let file = dir.path().join("c.age");
    let f = file.to_str().expect("p");
    let home = srv.home();
    store(home, &["--creds", f, "init"], "");
    let primary = addr_of(srv, 0);
    let dest = format!("{user}@127.0.0.1:{}", sshd.port);
    store(
        home,
        &[
            "--creds",
            f,
            "add",
            &primary,
            "--no-password",
            "--ssh",
            &dest,
            "--ssh-password",
        ],
        &format!("{pw}\n"),
    );
    let cfg = dir.path().join("watch.toml");
    std::fs::write(
        &cfg,
        "[ssh]\noptions = [\"-o\", \"PubkeyAuthentication=no\", \"-o\", \"UserKnownHostsFile=/dev/null\", \"-o\", \"StrictHostKeyChecking=no\", \"-o\", \"LogLevel=ERROR\"]\n",
    )
    .expect("config");
    let hist = dir.path().join("h.db");
    let w = Watcher::start(
        srv,
        &[
            "--listen",
            "127.0.0.1:0",
            "--history",
            hist.to_str().expect("p"),
            "--creds",
            f,
            "--config",
            cfg.to_str().expect("p"),
        ],
        &[("SQLFLEET_CREDS_PASSPHRASE", "correct horse")],
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut leaks = Vec::new();
    let v = loop {
        leaks.extend(argv_holding(&pw));
        let v = json(&w.addr, &format!("/api/server?server={primary}"));
        // Its first spelling still answers, for the same server.
        let old = json(&w.addr, &format!("/api/server?name={primary}"));
        assert_eq!(old["server"]["name"], v["server"]["name"], "{old}");
        // The page and the API agree on a name: watched or not.
        let (code, _, _) = http_get(&w.addr, &format!("/server?name={primary}"), &[]);
        assert_eq!(code, 200);
        for path in ["/server?name=nosuch", "/api/server?server=nosuch"] {
            let (code, _, body) = http_get(&w.addr, path, &[]);
            assert_eq!(code, 404, "{path}: {body}");
        }
        if v["server"]["mem"].is_number() {
            break v;
        }
        assert!(
            Instant::now() < deadline,
            "no host figures over a password login: {v}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let mem = v["server"]["mem"].as_f64().unwrap_or(-1.0);
    assert!(mem > 0.0 && mem <= 100.0, "{v}");
    // The session is up: ssh asked our askpass, the password never in any argv.
    let ssh = argv_holding(&format!("{user}@127.0.0.1"));
    assert!(ssh.iter().any(|c| c.contains("BatchMode=no")), "{ssh:?}");
    leaks.extend(argv_holding(&pw));
    assert!(
        leaks.is_empty(),
        "the password on a command line: {leaks:?}"
    );
    w.stop();
}

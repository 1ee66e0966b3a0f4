//! `sqlfleet bench` on a sandbox: files produced, losses caught, refused
//! connections counted, comparisons.

mod common;

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use common::{stderr, stdout};
use mysql_async::prelude::Queryable;
use sqlfleet_testkit::{server, TestServer};

/// The tests on the shared server use the same tables (bench_log,
/// bench_pool): one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static M: std::sync::Mutex<()> = std::sync::Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

fn bench(srv: &TestServer, args: &[&str]) -> Output {
    common::sqlfleet()
        // Nothing from PATH: the PNG charts are drawn in process, without
        // rsvg-convert or any other program.
        .env("PATH", "/nonexistent")
        .arg("bench")
        .arg(args[0])
        .arg(format!("--defaults-file={}", srv.defaults_file().display()))
        .args(&args[1..])
        .output()
        .expect("run sqlfleet")
}

fn results(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("results.json")).expect("results.json"))
        .expect("json")
}

fn assert_charts(dir: &Path, stems: &[&str]) {
    for stem in stems {
        let svg = std::fs::read_to_string(dir.join(format!("{stem}.svg"))).expect("svg");
        assert!(
            svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\"")
                && svg.trim_end().ends_with("</svg>"),
            "{stem}"
        );
        let png = std::fs::read(dir.join(format!("{stem}.png"))).expect("png");
        assert!(
            png.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{stem}.png is not a PNG"
        );
        // Twice the SVG's 760 px width.
        assert_eq!(&png[16..20], &1520u32.to_be_bytes(), "{stem}.png width");
    }
    let html = std::fs::read_to_string(dir.join("report.html")).expect("report.html");
    assert!(
        html.contains("<svg") && html.contains("Server") && html.contains("version"),
        "report.html"
    );
    // The sandbox runs with innodb_flush_log_at_trx_commit=2: said at the top.
    assert!(
        html.contains("relaxed durability (innodb_flush_log_at_trx_commit=2"),
        "no durability warning in report.html"
    );
    // The start is a date, not a count of seconds.
    let started = html.split("<p>started ").nth(1).unwrap_or_default();
    assert!(
        started.starts_with("20") && started[..23].ends_with("UTC"),
        "{}",
        &started[..started.len().min(40)]
    );
}

/// One test, run in order: the insert workloads share a table.
/// Runs `sql` (a change with a LIMIT) until it changes `rows` rows: the
/// benchmark's rows it needs have been written by then.
async fn until_it_changes(c: &mut mysql_async::Conn, sql: &str, rows: u64) {
    let t0 = Instant::now();
    loop {
        let changed = c
            .query_drop(sql)
            .await
            .map(|_| c.affected_rows())
            .unwrap_or(0);
        if changed == rows {
            return;
        }
        assert_eq!(changed, 0, "{sql} changed a part");
        assert!(t0.elapsed() < Duration::from_secs(20), "no rows for {sql}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn insert_sweep_files_loss_check_and_compare() {
    let _one = serial();
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let a = dir.path().join("a");
    let o = bench(
        srv,
        &[
            "insert",
            "--threads",
            "1,2",
            "--table-sizes",
            "0,1000",
            "--index",
            "both",
            "--duration",
            "2",
            "--out",
            a.to_str().expect("utf8"),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = results(&a);
    let cells = r["insert"].as_array().expect("cells");
    assert_eq!(cells.len(), 8);
    for c in cells {
        assert_eq!(c["lost"], 0, "{c}");
        assert!(c["acknowledged"].as_u64().expect("acked") > 0);
        assert_eq!(
            c["series"].as_array().expect("series").len(),
            3,
            "1 s warm-up + 2 s"
        );
        assert_eq!(c["rate"]["n"], 2);
        let d = &c["status_deltas"];
        let inserted = d["Innodb_rows_inserted"]
            .as_i64()
            .or(d["Handler_write"].as_i64())
            .expect("delta");
        assert!(inserted > 0 && d["Com_insert"].as_i64() > Some(0), "{c}");
    }
    let csv = std::fs::read_to_string(a.join("samples.csv")).expect("csv");
    assert_eq!(csv.lines().count(), 1 + 8 * 3);
    assert_charts(&a, &["insert_rate_vs_processes", "insert_rate_over_time"]);
    // Whole ticks on a count axis, error bars for the sd, the warm-up marked.
    let by_p = std::fs::read_to_string(a.join("insert_rate_vs_processes.svg")).expect("svg");
    assert!(
        by_p.contains(">2</text>") && !by_p.contains(">1.5</text>"),
        "{by_p}"
    );
    assert!(by_p.contains("<path d=\"M"), "no error bars");
    let over = std::fs::read_to_string(a.join("insert_rate_over_time.svg")).expect("svg");
    assert!(over.contains("warm-up"), "warm-up not marked");
    assert!(over.contains("1 process, empty table, no index"), "{over}");
    assert!(
        stdout(&o).contains("too short to be meaningful"),
        "n=2 must be flagged: {}",
        stdout(&o)
    );

    // Rows deleted behind the benchmark's back are reported as lost, and
    // rows copied behind its back as duplicated.
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        // Whatever rows appear from now on belong to the next run.
        let mut c = srv.connect().await;
        c.query_drop("DROP TABLE IF EXISTS sqlfleet_bench.bench_log")
            .await
            .expect("drop");
    });
    let b = dir.path().join("b");
    let child = common::sqlfleet()
        .args([
            "bench",
            "insert",
            &format!("--defaults-file={}", srv.defaults_file().display()),
        ])
        .args([
            "--threads",
            "2",
            "--table-sizes",
            "0",
            "--index",
            "off",
            "--duration",
            "3",
            "--out",
            b.to_str().expect("utf8"),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    rt.block_on(async {
        let mut c = srv.connect().await;
        // Seven of the run's rows gone, then five of those still there
        // once more each.
        until_it_changes(
            &mut c,
            "DELETE FROM sqlfleet_bench.bench_log WHERE fname NOT LIKE 'prefill:%' LIMIT 7",
            7,
        )
        .await;
        until_it_changes(
            &mut c,
            "INSERT INTO sqlfleet_bench.bench_log SELECT * FROM sqlfleet_bench.bench_log WHERE fname NOT LIKE 'prefill:%' LIMIT 5",
            5,
        )
        .await;
    });
    let o = child.wait_with_output().expect("wait");
    assert_eq!(
        o.status.code(),
        Some(2),
        "a loss is a partial failure: {}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("LOST: r"), "{}", stdout(&o));
    assert!(stdout(&o).contains("DUPLICATED: r"), "{}", stdout(&o));
    assert_eq!(results(&b)["insert"][0]["lost"], 7);
    assert_eq!(results(&b)["insert"][0]["duplicated"], 5);
    let page = std::fs::read_to_string(b.join("report.html")).expect("report.html");
    assert!(page.contains("5 duplicated (r"), "the page names them");

    // compare: the same results are within noise; a much slower copy regresses.
    let o = common::sqlfleet()
        .args(["bench", "compare"])
        .arg(&a)
        .arg(&a)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("within noise") && !stdout(&o).contains("REGRESSION"));
    let mut slow = results(&a);
    for c in slow["insert"].as_array_mut().expect("cells") {
        let m = c["rate"]["mean"].as_f64().expect("mean");
        c["rate"]["mean"] = (m / 10.0).into();
        c["rate"]["stddev"] = 1.0.into();
    }
    let s = dir.path().join("slow");
    std::fs::create_dir_all(&s).expect("mkdir");
    std::fs::write(s.join("results.json"), slow.to_string()).expect("write");
    let o = common::sqlfleet()
        .args(["bench", "compare"])
        .arg(&a)
        .arg(&s)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(stdout(&o).contains("REGRESSION"), "{}", stdout(&o));

    // One sample each, 37% lower: the noise is unknown and it says so
    // (before: "within noise", exit 0); a scripted comparison that names
    // the drop it will not accept fails on it.
    let one = |scale: f64, name: &str| {
        let mut r = results(&a);
        for c in r["insert"].as_array_mut().expect("cells") {
            let m = c["rate"]["mean"].as_f64().expect("mean");
            c["rate"]["mean"] = (m * scale).into();
            c["rate"]["stddev"] = 0.0.into();
            c["rate"]["n"] = 1.into();
        }
        let d = dir.path().join(name);
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("results.json"), r.to_string()).expect("write");
        d
    };
    let (one_a, one_b) = (one(1.0, "one_a"), one(0.63, "one_b"));
    let cmp = |extra: &[&str]| {
        common::sqlfleet()
            .args(["bench", "compare"])
            .arg(&one_a)
            .arg(&one_b)
            .args(extra)
            .output()
            .expect("run")
    };
    let o = cmp(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("(-37.0%) one sample each: cannot tell noise from change"),
        "{}",
        stdout(&o)
    );
    let o = cmp(&["--fail-on-regression", "20"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("REGRESSION (a drop of 20% or more"),
        "{}",
        stdout(&o)
    );
    let o = cmp(&["--fail-on-regression", "50"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

#[test]
fn too_many_connections_are_counted() {
    static SMALL: std::sync::OnceLock<TestServer> = std::sync::OnceLock::new();
    let srv = SMALL.get_or_init(|| sqlfleet_testkit::server_with(&["max_connections=4"]));
    let dir = tempfile::tempdir().expect("tmp");
    let o = bench(
        srv,
        &[
            "insert",
            "--threads",
            "12",
            "--index",
            "off",
            "--duration",
            "2",
            "--out",
            dir.path().to_str().expect("utf8"),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = results(dir.path());
    let errors = &r["insert"][0]["errors"];
    let refused: u64 = errors
        .as_object()
        .expect("errors")
        .iter()
        .filter(|(k, _)| k.starts_with("1040"))
        .map(|(_, v)| v.as_u64().unwrap_or(0))
        .sum();
    assert!(
        refused > 0,
        "1040 Too many connections not counted: {errors}"
    );
    assert!(
        stdout(&o).contains("x 1040 Too many connections"),
        "{}",
        stdout(&o)
    );
    assert_eq!(r["insert"][0]["lost"], 0);
}

#[test]
fn pool_sweep_produces_every_file() {
    let _one = serial();
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let port = srv.sandbox.meta.primary().port;
    // "via" the same server under another address: two targets, same data.
    let via = format!("localhost:{port}");
    let o = bench(
        srv,
        &[
            "pool",
            "--via",
            &via,
            "--queries-per-connection",
            "1..2",
            "--threads",
            "2",
            "--samples",
            "2",
            "--rows",
            "16",
            "--out",
            dir.path().to_str().expect("utf8"),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = results(dir.path());
    let cells = r["pool"].as_array().expect("cells");
    assert_eq!(cells.len(), 4);
    for c in cells {
        assert!(c["qps"]["mean"].as_f64().expect("qps") > 0.0, "{c}");
        assert!(
            c["connect"]["count"].as_u64().expect("n") > 0
                && c["query"]["count"].as_u64().expect("n") > 0
        );
        assert_eq!(c["errors"], 0);
    }
    assert_charts(
        dir.path(),
        &["pool_qps_vs_queries_per_connection", "pool_latency"],
    );
    let html = std::fs::read_to_string(dir.path().join("report.html")).expect("html");
    assert!(
        html.contains("Latency percentiles") && html.contains("Connections="),
        "pool report lacks the latency percentiles or status deltas"
    );
    // Typed parameters; the swept values on a categorical axis (no line
    // through values never measured); latency in ms with connect p99.
    assert_eq!(
        r["parameters"]["queries_per_connection"],
        serde_json::json!([1, 2])
    );
    assert_eq!(r["parameters"]["clients"], serde_json::json!([2]));
    assert!(r["server"]["max_connections"].is_u64(), "{}", r["server"]);
    let qps = std::fs::read_to_string(dir.path().join("pool_qps_vs_queries_per_connection.svg"))
        .expect("svg");
    assert!(
        qps.contains("data-x=\"1\"") && qps.contains("data-x=\"2\""),
        "{qps}"
    );
    let lat = std::fs::read_to_string(dir.path().join("pool_latency.svg")).expect("svg");
    assert!(
        lat.contains("latency (ms)") && lat.contains("connect p99"),
        "{lat}"
    );
    // A verdict per relay, on the terminal and in the report; what stays
    // on the target, said at the end.
    let out = stdout(&o);
    let verdict = out
        .lines()
        .find(|l| l.starts_with(&format!("verdict: via {via}, 2 clients: ")))
        .unwrap_or_else(|| panic!("no verdict line: {out}"));
    assert!(
        verdict.contains("% qps at q/conn=1, ") && verdict.contains("% at 2"),
        "{verdict}"
    );
    assert!(
        html.contains(&verdict["verdict: ".len()..]),
        "verdict not in report.html"
    );
    assert!(out.contains("DROP DATABASE sqlfleet_bench"), "{out}");
}

/// bench resolves its target as every command does: after `eval "$(sqlfleet
/// sandbox env --name X)"` it benchmarks X (SQLFLEET_SANDBOX), says so, and
/// starts no sandbox of its own.
#[test]
fn sqlfleet_sandbox_is_the_target_and_no_bench_sandbox_starts() {
    let _one = serial();
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let o = common::sqlfleet()
        // (The old spelling of --threads: still taken, with a note.)
        .args(["bench", "insert", "--processes", "1", "--duration", "1"])
        .args([
            "--index",
            "off",
            "--cleanup",
            "--out",
            dir.path().to_str().expect("utf8"),
        ])
        .env("SQLFLEET_HOME", srv.home())
        .env("SQLFLEET_SANDBOX", srv.sandbox.name())
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--processes is now --threads"),
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains(&format!("SQLFLEET_SANDBOX={}", srv.sandbox.name())),
        "{}",
        stderr(&o)
    );
    assert!(
        !srv.home().join("sandboxes/bench").exists(),
        "a sandbox 'bench' was started"
    );
    // --cleanup: nothing of the run stays on the target.
    assert!(
        stdout(&o).contains("dropped the sqlfleet_bench database"),
        "{}",
        stdout(&o)
    );
    let left: Option<String> = tokio::runtime::Runtime::new().expect("rt").block_on(async {
        let mut c = srv.connect().await;
        c.query_first("SHOW DATABASES LIKE 'sqlfleet_bench'")
            .await
            .expect("query")
    });
    assert_eq!(left, None, "sqlfleet_bench still there after --cleanup");
}

/// A `--via` target gets its own credentials from a URL; one whose every
/// connection fails fails the run (exit 2) with the first error and its
/// code, and `compare` calls it a failure, not an improvement; runs of
/// different benchmarks are refused (exit 1).
#[test]
fn a_failing_via_target_fails_the_run_and_compare_refuses_mismatches() {
    let _one = serial();
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let port = srv.sandbox.meta.primary().port;
    let pw = srv.sandbox.password().expect("pw");
    let pool = |out: &str, via: &str| {
        bench(
            srv,
            &[
                "pool",
                "--via",
                via,
                "--queries-per-connection",
                "1",
                "--threads",
                "1",
                "--samples",
                "1",
                "--rows",
                "4",
                "--out",
                dir.path().join(out).to_str().expect("utf8"),
            ],
        )
    };
    let good = pool(
        "good",
        &format!(
            "mysql://root:{}@127.0.0.1:{port}/?ssl-mode=DISABLED",
            pw.expose()
        ),
    );
    assert_eq!(good.status.code(), Some(0), "{}", stderr(&good));
    let bad = pool(
        "bad",
        &format!("mysql://root:wrong@127.0.0.1:{port}/?ssl-mode=DISABLED"),
    );
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("1045") && !stderr(&bad).contains("wrong"),
        "the first error, with its code, and no password: {}",
        stderr(&bad)
    );
    assert!(
        stderr(&bad).contains("no connection succeeded"),
        "said as what happened, not 'N errors in 0 connections': {}",
        stderr(&bad)
    );
    let r = results(&dir.path().join("bad"));
    let via = r["pool"]
        .as_array()
        .expect("cells")
        .iter()
        .find(|c| c["target"].as_str() != Some("direct"))
        .expect("via cell")
        .clone();
    assert_eq!(via["failed"], true, "{via}");

    let compare = |a: &str, b: &std::path::Path| {
        common::sqlfleet()
            .args(["bench", "compare"])
            .arg(dir.path().join(a))
            .arg(b)
            .output()
            .expect("compare")
    };
    let o = compare("good", &dir.path().join("bad"));
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(stdout(&o).contains("FAILED in B"), "{}", stdout(&o));
    assert!(!stdout(&o).contains("improvement"), "{}", stdout(&o));

    let ins = dir.path().join("ins");
    let o = bench(
        srv,
        &[
            "insert",
            "--threads",
            "1",
            "--index",
            "off",
            "--duration",
            "1",
            "--out",
            ins.to_str().expect("utf8"),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = compare("good", &ins);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("same benchmark"), "{}", stderr(&o));
}

/// Both workloads create and fill their tables: on a server that reports
/// read_only (a replica) they refuse before creating anything, so a bench
/// pointed at a replica by mistake does not fork it from its primary.
#[test]
fn a_read_only_server_is_refused_before_any_table_is_made() {
    let srv = sqlfleet_testkit::replicated();
    let replica = srv.sandbox.meta.nodes[1].port.to_string();
    let on_replica = ["-h", "127.0.0.1", "--protocol", "tcp", "-P", &replica];
    let out = tempfile::tempdir().expect("tmp");
    let dir = out.path().to_str().expect("utf8");
    for workload in [
        &["insert", "--table-sizes", "100", "--threads", "1"][..],
        &["pool", "--queries-per-connection", "1", "--threads", "1"][..],
    ] {
        let o = common::sqlfleet()
            .arg("bench")
            .arg(workload[0])
            .arg(format!("--defaults-file={}", srv.defaults_file().display()))
            .args(on_replica)
            .args(&workload[1..])
            .args(["--out", dir, "--progress", "none"])
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(1), "{workload:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("read_only"),
            "{workload:?}: {}",
            stderr(&o)
        );
    }
    let o = common::sqlfleet()
        .arg("query")
        .arg(format!("--defaults-file={}", srv.defaults_file().display()))
        .args(["--hosts", &format!("127.0.0.1:{replica}")])
        .args(["-e", "SHOW DATABASES LIKE 'sqlfleet_bench'"])
        .output()
        .expect("query");
    assert_eq!(stdout(&o), "", "nothing made on the replica");
}

/// Ctrl-C or SIGTERM once the first cell of a sweep has finished: the
/// cell running is dropped, the cells finished are written (results.json
/// and the report), and the exit says which signal (130, 143).
#[test]
fn a_signal_mid_sweep_writes_the_cells_finished_and_exits_by_it() {
    use std::io::BufRead;
    let _one = serial();
    let srv = server();
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let dir = tempfile::tempdir().expect("tmp");
        let mut child = common::sqlfleet()
            .env("PATH", "/nonexistent")
            .args(["bench", "insert"])
            .arg(format!("--defaults-file={}", srv.defaults_file().display()))
            .args(["--threads", "1,2,3", "--index", "off", "--table-sizes", "0"])
            .args(["--duration", "1", "--progress", "none", "--out"])
            .arg(dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("bench");
        let out = child.stdout.take().expect("stdout");
        let mut lines = std::io::BufReader::new(out).lines();
        // The table's head, then the first cell's row.
        let head = lines.next().expect("head").expect("line");
        assert!(head.contains("threads"), "{head}");
        let first = lines.next().expect("first cell").expect("line");
        // SAFETY: a signal to our own child, not yet reaped.
        unsafe { libc::kill(child.id() as i32, sig) };
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        let o = child.wait_with_output().expect("wait");
        assert_eq!(
            o.status.code(),
            Some(code),
            "{first}\n{rest:?}\n{}",
            stderr(&o)
        );
        assert!(
            stderr(&o).contains("interrupted: dropping the cell running"),
            "{}",
            stderr(&o)
        );
        assert!(
            rest.iter().any(|l| l.starts_with("wrote results.json")),
            "{rest:?}"
        );
        let r = results(dir.path());
        let cells = r["insert"].as_array().expect("cells").len();
        assert!(
            (1..3).contains(&cells),
            "{cells} of 3 cells written after the first: {r}"
        );
        assert_eq!(r["insert"][0]["processes"], 1, "{r}");
    }
}

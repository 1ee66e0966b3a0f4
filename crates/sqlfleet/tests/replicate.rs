//! `sqlfleet replicate` from the command line: kill -9 of the process at
//! seeded random moments while the source is written, then a restart
//! that catches up — the target's copy equals the source; status --json,
//! skip, and refusals (binlog off, a rename onto an existing name, a
//! config typo) as one-line errors with exit 1.

mod common;

use std::io::Write;
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use common::{assert_setup_error, sqlfleet, stderr, stdout};
use mysql_async::prelude::Queryable;
use rand::{Rng, SeedableRng};
use sqlfleet_testkit::workload::{create_db, exec, workload};
use sqlfleet_testkit::TestServer;

fn source() -> &'static TestServer {
    static S: OnceLock<TestServer> = OnceLock::new();
    S.get_or_init(|| sqlfleet_testkit::server_with(&["gtid-domain-id=3", "server-id=33"]))
}

fn target() -> &'static TestServer {
    static T: OnceLock<TestServer> = OnceLock::new();
    T.get_or_init(|| sqlfleet_testkit::server_with(&["gtid-domain-id=7", "server-id=77"]))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn gtid_pos(rt: &tokio::runtime::Runtime, s: &TestServer) -> String {
    rt.block_on(async {
        let mut c = s.connect().await;
        let p: Option<String> = c
            .query_first("SELECT @@gtid_binlog_pos")
            .await
            .expect("pos");
        p.unwrap_or_default()
    })
}

fn config(dir: &std::path::Path, name: &str, body: &str) -> std::path::PathBuf {
    let p = dir.join(format!("{name}.toml"));
    let mut f = std::fs::File::create(&p).expect("config file");
    writeln!(f, "{body}").expect("write config");
    p
}

#[test]
fn kill_9_and_signals_at_random_moments_then_a_restart_leaves_the_copy_identical() {
    let rt = runtime();
    let (s, t) = (source(), target());
    let start = gtid_pos(&rt, s);
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(
        dir.path(),
        "k",
        &format!(
            "[target]\ndsn = \"{}\"\n[apply]\nthreads = 3\nbatch = 4\n\
             [[source]]\nname = \"ka\"\ndsn = \"{}\"\ninclude = [\"ka_*\"]\nstart = \"gtid:{start}\"\n",
            t.dsn(),
            s.dsn()
        ),
    );
    rt.block_on(async {
        create_db(s, "ka_a").await;
        create_db(s, "ka_b").await;
    });
    let writer = std::thread::spawn(|| {
        runtime().block_on(async {
            tokio::join!(
                workload(source(), "ka_a", Some("ka_b"), 21, 1500),
                workload(source(), "ka_b", None, 22, 1500),
            )
        });
    });
    // SQLFLEET_REPL_STOP_SEED draws other moments and ways to stop.
    let seed = std::env::var("SQLFLEET_REPL_STOP_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x6b69_6c6c);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for round in 0..8 {
        let mut child = sqlfleet()
            .args(["replicate", "--config"])
            .arg(&cfg)
            .args(["--progress", "none"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn replicate");
        std::thread::sleep(Duration::from_millis(rng.gen_range(150..900)));
        assert!(
            child.try_wait().expect("wait").is_none(),
            "round {round}: replicate exited before it was stopped"
        );
        // How it is stopped: kill -9, SIGTERM, Ctrl-C, or Ctrl-C twice
        // (the second quits at once, as a kill).
        let signal = |sig| unsafe {
            // SAFETY: a signal to our own child, not yet reaped.
            libc::kill(child.id() as i32, sig);
        };
        let (how, want) = match rng.gen_range(0..4) {
            0 => {
                child.kill().expect("kill -9");
                ("kill -9", None)
            }
            1 => {
                signal(libc::SIGTERM);
                ("SIGTERM", Some(0))
            }
            2 => {
                signal(libc::SIGINT);
                ("SIGINT", Some(0))
            }
            _ => {
                signal(libc::SIGINT);
                std::thread::sleep(Duration::from_millis(rng.gen_range(1..50)));
                signal(libc::SIGINT);
                ("SIGINT twice", Some(130))
            }
        };
        let t0 = std::time::Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().expect("wait") {
                break st;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "seed {seed} round {round}: replicate still runs a minute after {how}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        if let Some(want) = want {
            // Twice: the first may already have ended it cleanly.
            assert!(
                status.code() == Some(want) || (want == 130 && status.code() == Some(0)),
                "seed {seed} round {round}: after {how}: {status}"
            );
        }
    }
    writer.join().expect("writer");
    let o = sqlfleet()
        .args(["replicate", "--config"])
        .arg(&cfg)
        .args(["--until-caught-up", "--json", "--progress", "none"])
        .stdin(Stdio::null())
        .output()
        .expect("run replicate");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("summary JSON");
    assert_eq!(v["stopped_streams"], 0, "{v}");
    assert_eq!(
        v["sources"][0]["reconnects"], 0,
        "the last run had nothing to recover from: {v}"
    );
    rt.block_on(async {
        for db in ["ka_a", "ka_b"] {
            assert_eq!(
                s.fingerprint(db).await,
                t.fingerprint(db).await,
                "seed {seed}: {db} differs after kill -9, signals and a restart"
            );
        }
    });

    // status: caught up, both streams ok.
    let o = sqlfleet()
        .args(["replicate", "status", "--json", "--config"])
        .arg(&cfg)
        .output()
        .expect("status");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let st: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("status JSON");
    assert_eq!(st[0]["source"], "ka");
    assert_eq!(st[0]["behind"], 0, "{st}");
    let streams: Vec<&str> = st[0]["streams"]
        .as_array()
        .expect("streams")
        .iter()
        .filter_map(|x| x["stream"].as_str())
        .collect();
    assert_eq!(streams, vec!["ka_a", "ka_b"], "{st}");
}

#[test]
fn refusals_are_one_line_errors_before_anything_is_applied() {
    let rt = runtime();
    let (s, t) = (source(), target());
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |cfg: &std::path::Path, extra: &[&str]| {
        sqlfleet()
            .args(["replicate", "--progress", "none", "--config"])
            .arg(cfg)
            .args(extra)
            .stdin(Stdio::null())
            .output()
            .expect("run")
    };
    let base = |src: &str, more: &str| {
        format!(
            "[target]\ndsn = \"{}\"\n[[source]]\nname = \"rf\"\ndsn = \"{src}\"\n{more}\n",
            t.dsn()
        )
    };

    // A typo in a key.
    let c = config(dir.path(), "typo", &base(&s.dsn(), "includes = [\"x\"]"));
    assert_setup_error(&run(&c, &[]), "typo.toml: line 6: unknown field `includes`");

    // Binary logging off on the source.
    let nolog = sqlfleet_testkit::server_with(&["skip-log-bin"]);
    let c = config(dir.path(), "nolog", &base(&nolog.dsn(), ""));
    assert_setup_error(&run(&c, &[]), "log_bin=OFF");

    // A rename onto a database the source also has.
    rt.block_on(exec(
        s,
        "CREATE DATABASE IF NOT EXISTS rf_a; CREATE DATABASE IF NOT EXISTS rf_b",
    ));
    let c = config(
        dir.path(),
        "rename",
        &base(
            &s.dsn(),
            "include = [\"rf_*\"]\nrename = { rf_a = \"rf_b\" }",
        ),
    );
    let o = run(&c, &[]);
    assert_setup_error(&o, "would both be written into 'rf_b'");
    rt.block_on(async {
        let mut c = t.connect().await;
        let n: Option<u64> = c
            .query_first(
                "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE 'rf\\_%'",
            )
            .await
            .expect("count");
        assert_eq!(n, Some(0), "nothing applied");
    });

    // A second replicate of the same source while one runs.
    let c = config(dir.path(), "ok", &base(&s.dsn(), "include = [\"rf_none\"]"));
    let mport = sqlfleet_testkit::proxy::free_port();
    let maddr = format!("127.0.0.1:{mport}");
    let mut first = sqlfleet()
        .args([
            "replicate",
            "--progress",
            "none",
            "--metrics",
            &maddr,
            "--config",
        ])
        .arg(&c)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn replicate");
    let t0 = std::time::Instant::now();
    while rt.block_on(async {
        let mut c = t.connect().await;
        let h: Option<Option<u64>> = c
            .query_first("SELECT IS_USED_LOCK('sqlfleet:rf')")
            .await
            .expect("lock");
        h.flatten().is_none()
    }) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the first never took the source"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = run(&c, &[]);
    assert_setup_error(&o, "is being replicated by another sqlfleet replicate");
    // The running one's metrics: valid exposition, the source running.
    let (status, _, body) = sqlfleet_testkit::http::http_get(&maddr, "/metrics", &[]);
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("sqlfleet_replicate_running{source=\"rf\"} 1"),
        "{body}"
    );
    let mut check = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package; scripts/deps.sh installs it)");
    check
        .stdin
        .take()
        .expect("stdin")
        .write_all(body.as_bytes())
        .expect("feed promtool");
    let out = check.wait_with_output().expect("promtool");
    assert!(
        out.status.success(),
        "promtool: {}{}",
        stdout(&out),
        stderr(&out)
    );
    first.kill().expect("kill");
    first.wait().expect("reap");

    // skip names a source the config does not have.
    let o = sqlfleet()
        .args([
            "replicate",
            "skip",
            "--source",
            "nope",
            "--gtid",
            "3-33-1",
            "--config",
        ])
        .arg(&c)
        .output()
        .expect("skip");
    assert_setup_error(&o, "no source named 'nope'");
    let o = sqlfleet()
        .args([
            "replicate",
            "skip",
            "--source",
            "rf",
            "--gtid",
            "3-33",
            "--config",
        ])
        .arg(&c)
        .output()
        .expect("skip");
    assert_setup_error(&o, "not a MariaDB GTID");
}

/// The target named as a sandbox (its port and password from the
/// sandbox), the source's password from a file: the copy arrives, and the
/// password is in no argument, log line, summary or status.
#[test]
fn passwords_come_from_files_or_sandboxes_never_argv_or_output() {
    let rt = runtime();
    let (s, t) = (source(), target());
    let dir = tempfile::tempdir().expect("tempdir");
    let start = gtid_pos(&rt, s);
    rt.block_on(exec(
        s,
        "CREATE DATABASE IF NOT EXISTS pw_a; CREATE TABLE IF NOT EXISTS pw_a.t (id INT PRIMARY KEY) ENGINE=InnoDB; \
         REPLACE INTO pw_a.t VALUES (1), (2), (3)",
    ));
    let source_pw = s.sandbox.password().expect("pw");
    let target_pw = t.sandbox.password().expect("pw");
    let c = config(
        dir.path(),
        "secrets",
        &format!(
            "[target]\nsandbox = \"{}\"\n[[source]]\nname = \"pw\"\n\
             dsn = \"mysql://root@127.0.0.1:{}/\"\npassword_file = \"{}\"\n\
             include = [\"pw_*\"]\nstart = \"gtid:{start}\"\n",
            t.sandbox.name(),
            s.sandbox.meta.primary().port,
            s.sandbox.layout.password_file().display()
        ),
    );
    let cfg_text = std::fs::read_to_string(&c).expect("config");
    assert!(!cfg_text.contains(source_pw.expose()) && !cfg_text.contains(target_pw.expose()));
    let run = |args: &[&str]| {
        sqlfleet()
            .args(args)
            .arg("--config")
            .arg(&c)
            .env("SQLFLEET_HOME", t.home())
            .stdin(Stdio::null())
            .output()
            .expect("run")
    };
    let o = run(&[
        "replicate",
        "--progress",
        "bar",
        "--until-caught-up",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let st = run(&["replicate", "status"]);
    assert_eq!(st.status.code(), Some(0), "{}", stderr(&st));
    for text in [stdout(&o), stderr(&o), stdout(&st), stderr(&st)] {
        assert!(
            !text.contains(source_pw.expose()) && !text.contains(target_pw.expose()),
            "a password in the output: {text}"
        );
    }
    rt.block_on(async {
        let mut c = t.connect().await;
        let n: Option<u64> = c
            .query_first("SELECT COUNT(*) FROM pw_a.t")
            .await
            .expect("count");
        assert_eq!(n, Some(3), "the copy arrived on the sandbox target");
    });
    // A missing password file is one line naming it, not a connection error.
    let bad = config(
        dir.path(),
        "missing",
        &cfg_text.replace(
            &s.sandbox.layout.password_file().display().to_string(),
            "/nonexistent/source.pw",
        ),
    );
    let o = sqlfleet()
        .args(["replicate", "--config"])
        .arg(&bad)
        .env("SQLFLEET_HOME", t.home())
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_setup_error(&o, "password_file /nonexistent/source.pw");
}

/// A stream stops on a table the target lacks: progress and status say
/// STOPPED with the reason; the cause is fixed on the target, `replicate
/// retry` asks the running process to try again, and the stream catches
/// up exactly.
#[test]
fn a_stopped_stream_is_said_loudly_and_retry_resumes_it_exactly() {
    let rt = runtime();
    let (s, t) = (source(), target());
    let dir = tempfile::tempdir().expect("tempdir");
    // Made before the replicator starts from the current position: the
    // target never sees the CREATE.
    rt.block_on(exec(
        s,
        "DROP DATABASE IF EXISTS rt_a; CREATE DATABASE rt_a; \
         CREATE TABLE rt_a.t (id INT PRIMARY KEY, v VARCHAR(10)) ENGINE=InnoDB",
    ));
    rt.block_on(exec(t, "DROP DATABASE IF EXISTS rt_a"));
    let start = gtid_pos(&rt, s);
    let c = config(
        dir.path(),
        "retry",
        &format!(
            "[target]\ndsn = \"{}\"\n[[source]]\nname = \"rt\"\ndsn = \"{}\"\ninclude = [\"rt_*\"]\nstart = \"gtid:{start}\"\n",
            t.dsn(),
            s.dsn()
        ),
    );
    let log = dir.path().join("progress.log");
    let mut child = sqlfleet()
        .args(["replicate", "--progress", "bar", "--config"])
        .arg(&c)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("spawn replicate");
    rt.block_on(exec(s, "INSERT INTO rt_a.t VALUES (1, 'a'), (2, 'b')"));
    let status = |json: bool| {
        let mut cmd = sqlfleet();
        cmd.args(["replicate", "status", "--config"]).arg(&c);
        if json {
            cmd.arg("--json");
        }
        cmd.stdin(Stdio::null()).output().expect("status")
    };
    let t0 = std::time::Instant::now();
    loop {
        let o = status(true);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        let stopped = v[0]["streams"].as_array().is_some_and(|a| {
            a.iter()
                .any(|x| x["stream"] == "rt_a" && x["state"] == "stopped")
        });
        if stopped {
            assert_eq!(o.status.code(), Some(2), "a stopped stream: exit 2");
            assert!(v[0]["lag_seconds"].is_u64(), "{v}");
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "never stopped: {v}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let text = stdout(&status(false));
    assert!(
        text.contains("rt_a") && text.contains("STOPPED") && text.contains("1146"),
        "{text}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    // The progress line says it too, with the way on.
    let t0 = std::time::Instant::now();
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("STOPPED 1 of 1 streams: rt_a at")
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("replicate retry --config FILE --source rt"));

    // Fix the cause on the target, then retry.
    rt.block_on(exec(
        t,
        "CREATE DATABASE rt_a; CREATE TABLE rt_a.t (id INT PRIMARY KEY, v VARCHAR(10)) ENGINE=InnoDB",
    ));
    rt.block_on(exec(s, "INSERT INTO rt_a.t VALUES (3, 'c')"));
    let o = sqlfleet()
        .args(["replicate", "retry", "--source", "rt", "--config"])
        .arg(&c)
        .stdin(Stdio::null())
        .output()
        .expect("retry");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let t0 = std::time::Instant::now();
    loop {
        let rows: Vec<(i64, String)> = rt.block_on(async {
            let mut conn = t.connect().await;
            conn.query("SELECT id, v FROM rt_a.t ORDER BY id")
                .await
                .unwrap_or_default()
        });
        if rows.len() == 3 {
            assert_eq!(
                rows,
                vec![(1, "a".into()), (2, "b".into()), (3, "c".into())],
                "exactly the source's rows, once"
            );
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "not caught up after retry: {rows:?}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The floor follows within a tick: then nothing is behind, lag 0.
    let t0 = std::time::Instant::now();
    loop {
        let o = status(false);
        if o.status.code() == Some(0) && stdout(&o).contains("behind 0, lag 0s") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "{}", stdout(&o));
        std::thread::sleep(Duration::from_millis(200));
    }
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let _ = child.wait();
}

/// `replicate seed --threads 2` of `config`, its work files in `work`.
fn seed_command(work: &std::path::Path, config: &std::path::Path) -> std::process::Command {
    let mut cmd = sqlfleet();
    cmd.args(["replicate", "seed", "--threads", "2", "--dir"])
        .arg(work)
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null());
    cmd
}

/// `replicate seed` while the source is written: the copy is killed -9
/// during its load, a rerun resumes it, `replicate` then continues from
/// the snapshot's GTID, and every database equals the source's. A second
/// seed is refused (positions exist), as is one onto non-empty databases.
#[test]
fn seed_under_live_writes_killed_and_resumed_then_replicate_is_identical() {
    let rt = runtime();
    let (s, t) = (source(), target());
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    rt.block_on(async {
        create_db(s, "sd_a").await;
        create_db(s, "sd_b").await;
        tokio::join!(
            workload(source(), "sd_a", Some("sd_b"), 31, 1500),
            workload(source(), "sd_b", None, 32, 1500),
        );
    });
    let c = config(
        dir.path(),
        "seed",
        &format!(
            "[target]\ndsn = \"{}\"\n[[source]]\nname = \"sd\"\ndsn = \"{}\"\ninclude = [\"sd_*\"]\n",
            t.dsn(),
            s.dsn()
        ),
    );
    let writer = std::thread::spawn(|| {
        runtime().block_on(async {
            tokio::join!(
                workload(source(), "sd_a", Some("sd_b"), 33, 1500),
                workload(source(), "sd_b", None, 34, 1500),
            )
        });
    });
    let seed = |extra: &[&str]| {
        let mut cmd = seed_command(&work, &c);
        cmd.args(extra);
        cmd
    };
    // Killed once the dump is whole and its load has begun: at the load's
    // first committed batch (a kill from outside 50 ms after the dump
    // raced a seed that had finished by then, whose rerun then refused).
    let st = seed(&[])
        .env("SQLFLEET_FAILPOINTS", "load::batch_committed=kill@1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run seed");
    let killed = sqlfleet_testkit::faults::killed(&st);
    assert!(killed, "the seed was not killed at its first batch: {st}");
    let state = work.join("sd.state.json");
    assert!(state.exists(), "killed before the dump was whole");
    // The rerun resumes the same dump (same snapshot) and records it.
    let o = seed(&[]).output().expect("seed");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    if killed {
        assert!(
            stderr(&o).contains("is whole") || stdout(&o).contains("seeded"),
            "{}",
            stderr(&o)
        );
    }
    assert!(stdout(&o).contains("seeded source 'sd'"), "{}", stdout(&o));
    // Its own dump is whole: the loader has no "cut short" warning for it.
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    // Killed after the record and before its work files were removed:
    // the rerun finishes (the positions are this snapshot's) rather than
    // refusing its own seed.
    let gtid = stdout(&o)
        .split("snapshot at GTID ")
        .nth(1)
        .and_then(|t| t.split(';').next())
        .expect("the seed names its GTID")
        .to_string();
    std::fs::write(work.join("sd.sql"), "").expect("dump file");
    std::fs::write(
        &state,
        format!(r#"{{"dumped":true,"gtid":"{gtid}","databases":["sd_a","sd_b"]}}"#),
    )
    .expect("state");
    let o = seed(&[]).output().expect("seed");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("an earlier run loaded and recorded it"),
        "{}",
        stdout(&o)
    );
    assert!(!state.exists(), "the finished seed's work state is removed");
    // Again: refused, nothing changed.
    let again = seed(&[]).output().expect("seed");
    assert_setup_error(&again, "already has replication positions");
    writer.join().expect("writer");
    let o = sqlfleet()
        .args([
            "replicate",
            "--until-caught-up",
            "--json",
            "--progress",
            "none",
            "--config",
        ])
        .arg(&c)
        .stdin(Stdio::null())
        .output()
        .expect("replicate");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    rt.block_on(async {
        for db in ["sd_a", "sd_b"] {
            assert_eq!(
                s.fingerprint(db).await,
                t.fingerprint(db).await,
                "{db}: the seeded and replicated copy differs from the source"
            );
        }
    });
    // Another source name onto the same, now full, databases: refused.
    let other = config(
        dir.path(),
        "other",
        &std::fs::read_to_string(&c)
            .expect("config")
            .replace("name = \"sd\"", "name = \"sd2\""),
    );
    let o = sqlfleet()
        .args(["replicate", "seed", "--dir"])
        .arg(&work)
        .arg("--config")
        .arg(&other)
        .stdin(Stdio::null())
        .output()
        .expect("seed");
    assert_setup_error(&o, "already hold tables");
}

/// `replicate seed` stopped by Ctrl-C or SIGTERM at each of its steps
/// (while mariadb-dump runs, after the dump, at the load's first and a
/// later committed batch): it exits 130 or 143 and says what to do in the
/// seed's own words (never load's `--resume`, a flag seed does not have);
/// run again, it finishes, and the copy equals the source.
#[test]
fn a_seed_stopped_by_a_signal_at_each_step_exits_as_interrupted_and_a_rerun_finishes_it() {
    let rt = runtime();
    let (s, t) = (source(), target());
    rt.block_on(async {
        for db in ["sg_a", "sg_b"] {
            exec(
                s,
                &format!(
                    "DROP DATABASE IF EXISTS {db}; CREATE DATABASE {db}; USE {db}; \
                     CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(200)); \
                     INSERT INTO t SELECT seq, REPEAT(CHAR(65 + seq % 26), 150) FROM seq_1_to_60000"
                ),
            )
            .await;
        }
    });
    let cases: &[(&str, &str, i32)] = &[
        ("seed::dumping", "int@1", 130),
        ("seed::dumping", "term@1", 143),
        ("seed::dumped", "int@1", 130),
        ("load::batch_committed", "int@1", 130),
        ("load::batch_committed", "term@2", 143),
    ];
    for (i, (point, action, code)) in cases.iter().enumerate() {
        let dir = tempfile::tempdir().expect("tempdir");
        let work = dir.path().join("work");
        let name = format!("sg{i}");
        // (A source name of its own: no positions from the cases before.)
        rt.block_on(exec(
            t,
            "DROP DATABASE IF EXISTS sg_a; DROP DATABASE IF EXISTS sg_b",
        ));
        let c = config(
            dir.path(),
            "seed",
            &format!(
                "[target]\ndsn = \"{}\"\n[[source]]\nname = \"{name}\"\ndsn = \"{}\"\ninclude = [\"sg_*\"]\n",
                t.dsn(),
                s.dsn()
            ),
        );
        let seed = || seed_command(&work, &c);
        let what = format!("{point}={action}");
        let o = seed()
            .env("SQLFLEET_FAILPOINTS", &what)
            .output()
            .expect("seed");
        assert_eq!(
            o.status.code(),
            Some(*code),
            "{what}: {}{}",
            stdout(&o),
            stderr(&o)
        );
        let err = stderr(&o);
        assert!(
            err.contains("interrupted") && err.contains("run `replicate seed` again"),
            "{what}: {err}"
        );
        assert!(
            !err.contains("--resume"),
            "{what}: load's advice leaked: {err}"
        );
        assert!(
            !stdout(&o).contains("seeded source"),
            "{what}: {}",
            stdout(&o)
        );
        let o = seed().output().expect("seed again");
        assert_eq!(
            o.status.code(),
            Some(0),
            "{what}, then again: {}",
            stderr(&o)
        );
        assert!(
            stdout(&o).contains(&format!("seeded source '{name}'")),
            "{}",
            stdout(&o)
        );
        rt.block_on(async {
            for db in ["sg_a", "sg_b"] {
                assert_eq!(
                    s.fingerprint(db).await,
                    t.fingerprint(db).await,
                    "{what}: {db} differs from the source after the rerun"
                );
            }
        });
    }
}

/// Replicating into one node of a real 3-node Galera cluster, killed -9
/// once under live writes: every node ends equal to the source (the
/// AUTO_INCREMENT counter aside: each Galera node steps its own), and a
/// stream that writes a MyISAM table stops loudly instead of leaving the
/// rows on one node.
#[test]
fn replicate_into_a_galera_node_gives_every_node_the_source_and_refuses_myisam_rows() {
    let rt = runtime();
    let s = source();
    let g = sqlfleet_testkit::galera();
    let start = gtid_pos(&rt, s);
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(
        dir.path(),
        "galera",
        &format!(
            "[target]\ndsn = \"{}\"\n[apply]\nthreads = 2\n\
             [[source]]\nname = \"gr\"\ndsn = \"{}\"\ninclude = [\"gr_*\"]\nstart = \"gtid:{start}\"\n",
            g.dsn(),
            s.dsn()
        ),
    );
    rt.block_on(async {
        create_db(s, "gr_a").await;
        create_db(s, "gr_b").await;
        exec(
            s,
            "DROP DATABASE IF EXISTS gr_m; CREATE DATABASE gr_m; \
             CREATE TABLE gr_m.t (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
        )
        .await;
    });
    let writer = std::thread::spawn(|| {
        runtime().block_on(async {
            tokio::join!(
                workload(source(), "gr_a", Some("gr_b"), 41, 800),
                workload(source(), "gr_b", None, 42, 800),
            )
        });
    });
    let mut child = sqlfleet()
        .args(["replicate", "--progress", "none", "--config"])
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn replicate");
    std::thread::sleep(Duration::from_millis(700));
    child.kill().expect("kill -9");
    child.wait().expect("reap");
    writer.join().expect("writer");
    rt.block_on(exec(s, "INSERT INTO gr_m.t VALUES (1, 1)"));
    let o = sqlfleet()
        .args([
            "replicate",
            "--until-caught-up",
            "--json",
            "--progress",
            "none",
            "--config",
        ])
        .arg(&cfg)
        .stdin(Stdio::null())
        .output()
        .expect("replicate");
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
    assert_eq!(v["stopped_streams"], 1, "only gr_m stops: {v}");
    let st = sqlfleet()
        .args(["replicate", "status", "--config"])
        .arg(&cfg)
        .output()
        .expect("status");
    let text = stdout(&st);
    assert!(text.contains("gr_m") && text.contains("Galera"), "{text}");
    let aside = sqlfleet_testkit::auto_increment_aside;
    rt.block_on(async {
        for db in ["gr_a", "gr_b"] {
            let want = aside(s.fingerprint(db).await);
            for n in 0..3 {
                let t0 = std::time::Instant::now();
                loop {
                    let got = aside(g.fingerprint_node(n, db).await);
                    if got == want {
                        break;
                    }
                    assert!(
                        t0.elapsed() < Duration::from_secs(20),
                        "{db} on node{} differs from the source",
                        n + 1
                    );
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
        // The MyISAM row reached no node.
        for n in 0..3 {
            let mut c = g
                .sandbox
                .target(&g.sandbox.meta.nodes[n])
                .expect("t")
                .connect(Duration::from_secs(5))
                .await
                .expect("node");
            let k: Option<u64> = c
                .query_first("SELECT COUNT(*) FROM gr_m.t")
                .await
                .expect("count");
            assert_eq!(k, Some(0), "node{}", n + 1);
        }
    });
}

/// `replicate seed` under faults: killed -9 at each seed step (dump whole,
/// loaded, recorded) and inside its load (batch sent / journaled /
/// committed, the completion mark), or at seeded random instants, rerun
/// until it succeeds; then `replicate` killed -9 a few times in its first
/// seconds of streaming; the copy equals the source — the snapshot plus
/// everything written while all this happened, exactly once. A failure
/// names its seed and schedule (`SQLFLEET_FAULT_SEED` replays it).
#[test]
fn seed_and_first_streaming_killed_at_every_step_leave_the_copy_identical() {
    use sqlfleet_testkit::faults;
    let rt = runtime();
    let (s, t) = (source(), target());
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    let log = dir.path().join("seed.log");
    let seed_no = faults::seed(20_261_128);
    rt.block_on(async {
        create_db(s, "sk_a").await;
        create_db(s, "sk_b").await;
        // Enough rows for several load batches (the kills inside the
        // load land between them).
        for db in ["sk_a", "sk_b"] {
            exec(
                s,
                &format!(
                    "INSERT INTO {db}.t (v, s, d, j) SELECT seq, REPEAT('x', 50), seq / 7, JSON_OBJECT('k', seq) \
                     FROM {db}.seq_1_to_120000"
                ),
            )
            .await;
        }
        tokio::join!(
            workload(source(), "sk_a", Some("sk_b"), 41, 1000),
            workload(source(), "sk_b", None, 42, 1000),
        );
    });
    let c = config(
        dir.path(),
        "seedkill",
        &format!(
            "[target]\ndsn = \"{}\"\n[[source]]\nname = \"sk\"\ndsn = \"{}\"\ninclude = [\"sk_*\"]\n",
            t.dsn(),
            s.dsn()
        ),
    );
    let writer = std::thread::spawn(|| {
        runtime().block_on(async {
            tokio::join!(
                workload(source(), "sk_a", Some("sk_b"), 43, 1500),
                workload(source(), "sk_b", None, 44, 1500),
            )
        });
    });
    let run = |args: &[&str], failpoints: &str, limit: Duration| {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("log");
        let mut cmd = sqlfleet();
        cmd.args(args)
            .arg("--config")
            .arg(&c)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out);
        if !failpoints.is_empty() {
            cmd.env("SQLFLEET_FAILPOINTS", failpoints);
        }
        let mut child = cmd.spawn().expect("spawn");
        let t0 = std::time::Instant::now();
        loop {
            if let Some(st) = child.try_wait().expect("wait") {
                return (st, false);
            }
            if t0.elapsed() >= limit {
                let _ = child.kill();
                return (child.wait().expect("reap"), true);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let work_s = work.display().to_string();
    let seed_args = ["replicate", "seed", "--threads", "2", "--dir", &work_s];
    let points = [
        "seed::dumped",
        "load::batch_sent",
        "load::batch_journaled",
        "load::batch_committed",
        "load::before_finish",
        "seed::loaded",
        "seed::recorded",
    ];
    // A seed run takes about two seconds here: each fault lands at the
    // first pass of its point, or at a random instant within 0.8 s.
    let schedule = faults::plan(
        seed_no,
        9,
        &points,
        1,
        (Duration::from_millis(50), Duration::from_millis(800)),
    );
    let mut injected = Vec::new();
    let mut seeded = false;
    for f in &schedule {
        let (st, by_us) = run(&seed_args, &f.failpoints(), f.deadline());
        if st.success() {
            seeded = true;
            injected.push(format!("{f}: the seed finished first"));
            break;
        }
        assert!(
            by_us || faults::killed(&st),
            "seed failed by itself ({st}) under {f} (seed {seed_no}): {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        injected.push(format!(
            "{f}: {}",
            if by_us {
                "killed at the deadline"
            } else {
                "killed there"
            }
        ));
    }
    if !seeded {
        let (st, _) = run(&seed_args, "", Duration::from_secs(300));
        assert!(
            st.success(),
            "the seed after {} faults (seed {seed_no}): {st}\n{}",
            injected.len(),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
    // The first seconds of streaming, killed three times.
    for f in faults::plan(
        seed_no + 1,
        3,
        &["replicate::batch_after_commit", "replicate::commit_after"],
        4,
        (Duration::from_millis(300), Duration::from_millis(1500)),
    ) {
        let (st, by_us) = run(
            &["replicate", "--progress", "none"],
            &f.failpoints(),
            f.deadline(),
        );
        assert!(
            by_us || faults::killed(&st),
            "replicate ended by itself ({st}) under {f}: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        injected.push(f.to_string());
    }
    writer.join().expect("writer");
    let (st, _) = run(
        &["replicate", "--until-caught-up", "--progress", "none"],
        "",
        Duration::from_secs(300),
    );
    assert!(
        st.success(),
        "the final run: {st}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    rt.block_on(async {
        for db in ["sk_a", "sk_b"] {
            assert_eq!(
                s.fingerprint(db).await,
                t.fingerprint(db).await,
                "{db}: differs from the source after faults (seed {seed_no}):\n  {}",
                injected.join("\n  ")
            );
        }
    });
    println!(
        "seed campaign (seed {seed_no}):\n  {}",
        injected.join("\n  ")
    );
    println!(
        "faults-survived: campaign=seed seed={seed_no} faults={} violations=0",
        injected.len()
    );
}

/// `--until-caught-up` ends when a source stays down: the source is given
/// up after `--give-up-after` seconds without progress (60 by default with
/// --until-caught-up), said in the summary, exit 2. Before, it retried for
/// ever (backing off to 10 s) and never exited.
#[test]
fn until_caught_up_gives_a_source_that_stays_down_up() {
    let t = target();
    let dir = tempfile::tempdir().expect("tempdir");
    let dead = sqlfleet_testkit::proxy::free_port();
    let c = config(
        dir.path(),
        "down",
        &format!(
            "[target]\ndsn = \"{}\"\n[[source]]\nname = \"gone\"\ndsn = \"mysql://root@127.0.0.1:{dead}/\"\n",
            t.dsn()
        ),
    );
    let t0 = std::time::Instant::now();
    let mut child = sqlfleet()
        .args([
            "replicate",
            "--progress",
            "none",
            "--until-caught-up",
            "--give-up-after",
            "2",
            "--config",
        ])
        .arg(&c)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run");
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if t0.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("replicate --until-caught-up did not end with its source down");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
        .expect("read");
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("GAVE UP: source gone: no progress for 2s") && err.contains("Can't connect"),
        "{err}"
    );
    let o = sqlfleet()
        .args(["replicate", "--give-up-after", "0", "--config"])
        .arg(&c)
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_ne!(o.status.code(), Some(0), "0 seconds is refused");
}

/// A panic in one source's reading (a failpoint that panics where a DDL
/// barrier runs: a bug, or a library meeting bytes it cannot take) ends
/// that source as a refusal the run's report names, with the panic's
/// words and a non-zero exit, while another source goes on and catches up
/// (before: the reading task was gone and nothing in the source's state
/// or the report said so).
#[test]
fn a_panic_in_one_source_s_reading_refuses_that_source_and_the_others_go_on() {
    let rt = runtime();
    let (s, t) = (source(), target());
    let dir = tempfile::tempdir().expect("tempdir");
    for db in ["pn_a", "pn_b"] {
        rt.block_on(exec(
            s,
            &format!(
                "DROP DATABASE IF EXISTS {db}; CREATE DATABASE {db}; \
                 CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB"
            ),
        ));
        rt.block_on(exec(
            t,
            &format!(
                "DROP DATABASE IF EXISTS {db}; CREATE DATABASE {db}; \
                 CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB"
            ),
        ));
    }
    let start = gtid_pos(&rt, s);
    rt.block_on(exec(
        s,
        "INSERT INTO pn_a.t VALUES (1, 1); ALTER TABLE pn_a.t ADD COLUMN w INT; \
         INSERT INTO pn_b.t VALUES (1, 1), (2, 2)",
    ));
    let c = config(
        dir.path(),
        "panic",
        &format!(
            "[target]\ndsn = \"{}\"\n\
             [[source]]\nname = \"pa\"\ndsn = \"{}\"\ninclude = [\"pn_a\"]\nstart = \"gtid:{start}\"\n\
             [[source]]\nname = \"pb\"\ndsn = \"{}\"\ninclude = [\"pn_b\"]\nstart = \"gtid:{start}\"\n",
            t.dsn(),
            s.dsn(),
            s.dsn()
        ),
    );
    let (status, err) = until_caught_up_with(&c, "replicate::ddl_marked=panic");
    assert_ne!(status.code(), Some(0), "{err}");
    assert!(
        err.contains("source 'pa': its reading stopped at an internal error")
            && err.contains("replicate::ddl_marked"),
        "the report names the source and the panic: {err}"
    );
    // The other source applied its rows.
    let n: i64 = rt.block_on(async {
        let mut c = t.connect().await;
        let n: Option<i64> = c
            .query_first("SELECT COUNT(*) FROM pn_b.t")
            .await
            .expect("count");
        n.unwrap_or(0)
    });
    assert_eq!(n, 2, "{err}");
}

/// A panic in the stall watcher (a bug) turns running beside off for the
/// rest of the run, said in the log and the summary: the chunks of the
/// hot stream run in turn after it, and the copy is the source's. Before,
/// the watcher was gone unsaid and an earlier chunk waiting on a row a
/// later one held waited out the server's lock timeout.
#[test]
fn a_panic_in_the_stall_watcher_runs_chunks_in_turn_and_the_copy_is_the_same() {
    let rt = runtime();
    let (s, t) = (source(), target());
    let dir = tempfile::tempdir().expect("tempdir");
    on_both(
        &rt,
        "DROP DATABASE IF EXISTS pn_w; CREATE DATABASE pn_w; \
             CREATE TABLE pn_w.t (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB; \
             INSERT INTO pn_w.t SELECT seq, 0 FROM pn_w.seq_1_to_50",
    );
    let start = gtid_pos(&rt, s);
    rt.block_on(async {
        let writers: Vec<_> = (0..4u64)
            .map(|w| {
                tokio::spawn(async move {
                    let mut c = source().connect().await;
                    for i in 0..150u64 {
                        let (a, b) = (1 + (i * 7 + w * 13) % 50, 1 + (i * 11 + w) % 50);
                        // Four writers updating rows in crossing orders:
                        // the source may pick one as a deadlock's victim
                        // (1213, its transaction rolled back): again.
                        loop {
                            match c
                                .query_drop(format!(
                                    "START TRANSACTION; UPDATE pn_w.t SET v = v + 1 WHERE id = {a}; \
                                     UPDATE pn_w.t SET v = v + {w} WHERE id = {b}; COMMIT"
                                ))
                                .await
                            {
                                Ok(()) => break,
                                Err(mysql_async::Error::Server(e)) if e.code == 1213 => {
                                    c.query_drop("ROLLBACK").await.expect("rollback");
                                }
                                Err(e) => panic!("write: {e}"),
                            }
                        }
                    }
                })
            })
            .collect();
        for w in writers {
            w.await.expect("writer");
        }
    });
    let c = config(
        dir.path(),
        "panic_watch",
        &format!(
            "[target]\ndsn = \"{}\"\n[apply]\nthreads = 4\nbatch = 4\nbeside = true\n\
             [[source]]\nname = \"pw\"\ndsn = \"{}\"\ninclude = [\"pn_w\"]\nstart = \"gtid:{start}\"\n",
            t.dsn(),
            s.dsn()
        ),
    );
    let (status, err) = until_caught_up_with(&c, "replicate::stall_watch=panic");
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(
        err.contains(
            "chunks of a stream ran in turn after the stall watcher stopped at an internal error"
        ) && err.contains("replicate::stall_watch"),
        "the summary says it, with the panic's words: {err}"
    );
    rt.block_on(async {
        assert_eq!(s.fingerprint("pn_w").await, t.fingerprint("pn_w").await);
    });
}

/// Runs `sql` on the source and on the target (a test's tables, made on
/// both before the stream starts).
fn on_both(rt: &tokio::runtime::Runtime, sql: &str) {
    for srv in [source(), target()] {
        rt.block_on(exec(srv, sql));
    }
}

/// `replicate --until-caught-up` with `failpoints` armed (none: `""`),
/// to its end (within 60 s): its exit status and standard error.
fn until_caught_up_with(
    c: &std::path::Path,
    failpoints: &str,
) -> (std::process::ExitStatus, String) {
    let t0 = std::time::Instant::now();
    let mut child = sqlfleet()
        .args([
            "replicate",
            "--progress",
            "none",
            "--until-caught-up",
            "--config",
        ])
        .arg(c)
        .env("SQLFLEET_FAILPOINTS", failpoints)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run");
    let mut pipe = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(&mut pipe, &mut err);
        err
    });
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "replicate --until-caught-up did not end under {failpoints}: {}",
                reader.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status, reader.join().unwrap_or_default())
}

/// A panic while applying (a failpoint that panics before a batch's
/// commit on the target) stops the stream it applied for, named with the
/// panic's words, and the run ends (exit 2) with the stream STOPPED
/// (before: the chunk's answer never came, and the source waited for it
/// for ever: --until-caught-up never ended).
#[test]
fn a_panic_while_applying_stops_that_stream_and_the_run_still_ends() {
    let rt = runtime();
    let (s, t) = (source(), target());
    let dir = tempfile::tempdir().expect("tempdir");
    on_both(
        &rt,
        "DROP DATABASE IF EXISTS pn_c; CREATE DATABASE pn_c; \
             CREATE TABLE pn_c.t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
    );
    let start = gtid_pos(&rt, s);
    rt.block_on(exec(s, "INSERT INTO pn_c.t VALUES (1, 1), (2, 2)"));
    let c = config(
        dir.path(),
        "panic_apply",
        &format!(
            "[target]\ndsn = \"{}\"\n\
             [[source]]\nname = \"pc\"\ndsn = \"{}\"\ninclude = [\"pn_c\"]\nstart = \"gtid:{start}\"\n",
            t.dsn(),
            s.dsn()
        ),
    );
    let (status, err) = until_caught_up_with(&c, "replicate::batch_before_commit=panic");
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("STOPPED: source pc stream pn_c")
            && err.contains("applying stopped at an internal error")
            && err.contains("replicate::batch_before_commit"),
        "the report names the stream and the panic: {err}"
    );
}

/// Exit 1, its last line on standard error the error, naming `want`
/// (before it, the seed's notes).
fn refused(o: &std::process::Output, want: &str) {
    assert_eq!(o.status.code(), Some(1), "{}", stderr(o));
    let err = stderr(o);
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("sqlfleet replicate: ") && last.contains(want),
        "{err}"
    );
}

/// A seed and the XA transactions prepared on its source: a snapshot
/// lacks a prepared branch's changes, and replication after it would stop
/// at the branch's XA COMMIT. Prepared before the dump, the seed waits
/// for the branch to end (`--xa-wait`) and refuses, naming it, when it
/// does not; prepared between that check and the snapshot, the dump is
/// refused after it (the binlog after the snapshot holds no XA PREPARE of
/// it); ended, the seed runs and the copy equals the source. (Before: the
/// seed recorded a snapshot without the branch, and replicate stopped at
/// its XA COMMIT.) A source of its own: XA RECOVER is server-wide.
#[test]
fn a_seed_waits_for_prepared_xa_transactions_and_never_copies_without_them() {
    static S: OnceLock<TestServer> = OnceLock::new();
    let s =
        S.get_or_init(|| sqlfleet_testkit::server_with(&["gtid-domain-id=31", "server-id=131"]));
    let t = target();
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    let prepare = move |xid: &'static str, id: u32| {
        runtime().block_on(async move {
            let mut c = s.connect().await;
            c.query_drop(format!(
                "XA START '{xid}'; INSERT INTO sx_a.t VALUES ({id}); XA END '{xid}'; XA PREPARE '{xid}'"
            ))
            .await
            .expect("prepared");
            // The branch outlives its session.
            let _ = c.disconnect().await;
        })
    };
    let commit = move |xid: &str| {
        let sql = format!("XA COMMIT '{xid}'");
        runtime().block_on(async move { exec(s, &sql).await });
    };
    rt.block_on(async {
        exec(
            s,
            "CREATE DATABASE sx_a; CREATE TABLE sx_a.t (id INT PRIMARY KEY) ENGINE=InnoDB; INSERT INTO sx_a.t VALUES (1)",
        )
        .await
    });
    let c = config(
        dir.path(),
        "xa",
        &format!(
            "[target]\ndsn = \"{}\"\n[[source]]\nname = \"sx\"\ndsn = \"{}\"\ninclude = [\"sx_*\"]\n",
            t.dsn(),
            s.dsn()
        ),
    );
    // Prepared before: waited for, then refused.
    prepare("seedx", 2);
    let o = seed_command(&work, &c)
        .args(["--xa-wait", "1"])
        .output()
        .expect("seed");
    refused(
        &o,
        "prepared on the source (X'7365656478',X'',1) did not end within 1 s",
    );
    assert!(stderr(&o).contains("waiting up to 1 s"), "{}", stderr(&o));
    // Ended while the seed waits: it goes on.
    let ender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        commit("seedx");
    });
    // Prepared between that check and the snapshot: the dump is refused.
    let late = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(4));
        prepare("late", 3);
    });
    let o = seed_command(&work, &c)
        .args(["--xa-wait", "30"])
        .env("SQLFLEET_FAILPOINTS", "seed::xa_checked=sleep(5000)")
        .output()
        .expect("seed");
    ender.join().expect("ender");
    late.join().expect("late");
    assert!(stderr(&o).contains("waiting up to 30 s"), "{}", stderr(&o));
    refused(
        &o,
        "XA transaction X'6c617465',X'',1 was prepared on the source before the snapshot",
    );
    // Ended: seeded, and replicate after it has every row.
    commit("late");
    let o = seed_command(&work, &c).output().expect("seed");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let (status, err) = until_caught_up_with(&c, "");
    assert_eq!(status.code(), Some(0), "{err}");
    rt.block_on(async {
        assert_eq!(
            s.fingerprint("sx_a").await,
            t.fingerprint("sx_a").await,
            "the seeded copy differs from the source"
        );
        let mut c = t.connect().await;
        let n: Option<i64> = c
            .query_first("SELECT COUNT(*) FROM sx_a.t")
            .await
            .expect("rows");
        assert_eq!(n, Some(3));
    });
}

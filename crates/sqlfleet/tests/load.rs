//! `sqlfleet load` against a real server, compared with the stock client.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{stderr, stdout};
use mysql_async::prelude::Queryable;
use sqlfleet_testkit::{server, TestServer};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt")
}

/// The stock client, on the fixture server.
fn mariadb(srv: &TestServer, args: &[&str], stdin: Option<&Path>) -> Output {
    let mut c = Command::new("mariadb");
    c.arg(format!("--defaults-file={}", srv.defaults_file().display()))
        .args(args);
    if let Some(p) = stdin {
        c.stdin(std::fs::File::open(p).expect("open stdin file"));
    }
    let o = c
        .output()
        .expect("mariadb client (apt-get install mariadb-client)");
    assert!(o.status.success(), "mariadb {args:?}: {}", stderr(&o));
    o
}

fn fresh_db(srv: &TestServer, prefix: &str) -> String {
    rt().block_on(srv.fresh_db(prefix)).0
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// A source database with every type, routines, triggers, views, events.
fn source_db(srv: &TestServer) -> String {
    let db = fresh_db(srv, "src");
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/every_type.sql");
    mariadb(srv, &["-D", &db], Some(&schema));
    db
}

fn dump(srv: &TestServer, db: &str, extra: &[&str], out: &Path) {
    let mut c = Command::new("mariadb-dump");
    c.arg(format!("--defaults-file={}", srv.defaults_file().display()))
        .args(["--routines", "--triggers", "--events"])
        .args(extra)
        .arg(db)
        .stdout(std::fs::File::create(out).expect("create dump"));
    let o = c.output().expect("mariadb-dump");
    assert!(o.status.success(), "mariadb-dump: {}", stderr(&o));
}

fn sqlfleet_load(srv: &TestServer, args: &[&str]) -> Output {
    common::load(&srv.defaults_file(), args)
}

/// Everything a load should reproduce, with the database name replaced.
fn fingerprint(srv: &TestServer, db: &str) -> Vec<String> {
    rt().block_on(srv.fingerprint(db))
}

fn assert_same(srv: &TestServer, want_db: &str, got_db: &str, what: &str) {
    let want = fingerprint(srv, want_db);
    let got = fingerprint(srv, got_db);
    assert!(want.len() > 4, "fingerprint too small: {want:?}");
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(w, g, "{what}: first difference");
    }
    assert_eq!(want.len(), got.len(), "{what}: object count");
}

#[test]
fn loads_like_the_stock_client_for_every_dump_style() {
    let srv = server();
    let src = source_db(srv);
    let dir = tmp();
    let variants: &[(&str, &[&str], &[&str])] = &[
        ("default", &[], &[]),
        (
            "one row per INSERT",
            &["--skip-extended-insert"],
            &["--threads", "3"],
        ),
        (
            "complete inserts, hex blobs",
            &["--complete-insert", "--hex-blob"],
            &["--threads", "2"],
        ),
        (
            "small statements, small batches",
            &["--net-buffer-length=4096"],
            &["--threads", "4", "--batch-bytes", "20000"],
        ),
        (
            "no autocommit, no locks",
            &["--no-autocommit", "--skip-add-locks"],
            &[],
        ),
        ("skip-opt", &["--skip-opt"], &["--threads", "4"]),
        (
            "defer indexes",
            &[],
            &[
                "--defer-indexes",
                "--threads",
                "4",
                "--batch-bytes",
                "50000",
            ],
        ),
    ];
    for (i, (name, dump_args, load_args)) in variants.iter().enumerate() {
        let file = dir.path().join(format!("d{i}.sql"));
        dump(srv, &src, dump_args, &file);
        let stock = fresh_db(srv, "stock");
        mariadb(srv, &["-D", &stock], Some(&file));
        let ours = fresh_db(srv, "ours");
        let mut args = vec!["-D", &ours];
        args.extend_from_slice(load_args);
        args.push(file.to_str().expect("utf8"));
        let o = sqlfleet_load(srv, &args);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        // The server's one warning is the event's ("Event scheduler is
        // switched off"), shown as it said it; no statement failed.
        let said = stdout(&o);
        assert!(
            said.contains("no errors")
                || (said.contains("1 warning from the server")
                    && said.contains("no statement failed")),
            "{name}: {said}"
        );
        if said.contains("1 warning") {
            assert!(
                stderr(&o).contains("Warning 1105: Event scheduler is switched off"),
                "{name}: {}",
                stderr(&o)
            );
        }
        // The fast path carried the plain tables (not those with BIT or hex values).
        let fast = stdout(&o).contains("sent as LOAD DATA rows");
        let expect_fast = !load_args.contains(&"--no-fast-path");
        assert_eq!(fast, expect_fast, "{name}: {}", stdout(&o));
        if !dump_args.contains(&"--skip-opt") {
            // (--skip-opt drops ENGINE= from CREATE TABLE.)
            assert!(
                stderr(&o).contains("is not transactional"),
                "{name}: MyISAM warning missing: {}",
                stderr(&o)
            );
        }
        assert_same(srv, &stock, &ours, name);
    }
}

#[test]
fn compressed_and_stdin_inputs() {
    let srv = server();
    let src = source_db(srv);
    let dir = tmp();
    let plain = dir.path().join("d.sql");
    dump(srv, &src, &[], &plain);
    let bytes = std::fs::read(&plain).expect("read");
    let gz = dir.path().join("d.sql.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).expect("create"),
        flate2::Compression::fast(),
    );
    enc.write_all(&bytes).expect("gzip");
    enc.finish().expect("gzip");
    let zst = dir.path().join("d.sql.zst");
    std::fs::write(&zst, zstd::encode_all(&bytes[..], 3).expect("zstd")).expect("write");

    let stock = fresh_db(srv, "stock");
    mariadb(srv, &["-D", &stock], Some(&plain));
    for file in [&gz, &zst] {
        let ours = fresh_db(srv, "ours");
        let o = sqlfleet_load(srv, &["-D", &ours, file.to_str().expect("utf8")]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}: {}",
            file.display(),
            stderr(&o)
        );
        assert_same(srv, &stock, &ours, &file.display().to_string());
    }
    let ours = fresh_db(srv, "ours");
    let o = common::sqlfleet()
        .args([
            "load",
            &format!("--defaults-file={}", srv.defaults_file().display()),
            "-D",
            &ours,
            "--json",
            "-",
        ])
        .stdin(std::fs::File::open(&gz).expect("open"))
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "stdin: {}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json summary");
    assert_eq!(v["event"], "summary");
    assert!(v["rows"].as_u64().expect("rows") >= 20_000, "{v}");
    assert_same(srv, &stock, &ours, "stdin");
}

/// A generated dump: `tables` tables of `rows` rows each, extended inserts.
fn big_dump(path: &Path, tables: usize, rows: usize) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    writeln!(f, "/*!40101 SET NAMES utf8mb4 */;\n/*!40014 SET @OLD_UNIQUE_CHECKS=@@UNIQUE_CHECKS, UNIQUE_CHECKS=0 */;").expect("w");
    for t in 0..tables {
        writeln!(f, "DROP TABLE IF EXISTS `big{t}`;\nCREATE TABLE `big{t}` (\n  `id` int NOT NULL,\n  `k` int NOT NULL,\n  `c` varchar(60) NOT NULL,\n  PRIMARY KEY (`id`),\n  KEY `k` (`k`)\n) ENGINE=InnoDB;").expect("w");
        let mut id = 0;
        while id < rows {
            write!(f, "INSERT INTO `big{t}` VALUES ").expect("w");
            let end = (id + 500).min(rows);
            for i in id..end {
                let sep = if i + 1 == end { ";\n" } else { "," };
                write!(
                    f,
                    "({i},{},'value-{i}-\\'q\\'-{}'){sep}",
                    i * 31 % 9973,
                    "z".repeat(i % 17)
                )
                .expect("w");
            }
            id = end;
        }
    }
    writeln!(f, "/*!40014 SET UNIQUE_CHECKS=@OLD_UNIQUE_CHECKS */;").expect("w");
}

/// The state `sqlfleet.loads` records for `load_id` (None: no row, or no
/// journal tables yet — a load stopped before it made them).
fn load_state(srv: &TestServer, load_id: &str) -> Option<String> {
    rt().block_on(async {
        let mut c = srv.connect().await;
        c.exec_first(
            "SELECT state FROM sqlfleet.loads WHERE load_id = ?",
            (load_id,),
        )
        .await
        .unwrap_or(None)
    })
}

/// A count the server gives for `sql` (0 for no row).
fn count(srv: &TestServer, sql: &str) -> i64 {
    rt().block_on(async {
        let mut c = srv.connect().await;
        let n: Option<i64> = c.query_first(sql).await.expect("count");
        n.unwrap_or(0)
    })
}

fn journal_rows(srv: &TestServer, load_id: &str) -> i64 {
    rt().block_on(async {
        let mut c = srv.connect().await;
        let n: Option<i64> = c
            .exec_first(
                "SELECT COUNT(*) FROM sqlfleet.load_journal WHERE load_id = ? AND kind = 'data'",
                (load_id,),
            )
            .await
            .unwrap_or(None);
        n.unwrap_or(0)
    })
}

#[test]
fn kill_9_then_resume_loads_exactly_once() {
    let srv = server();
    let dir = tmp();
    let file = dir.path().join("big.sql");
    big_dump(&file, 4, 150_000);
    let stock = fresh_db(srv, "stock");
    mariadb(srv, &["-D", &stock], Some(&file));

    let ours = fresh_db(srv, "ours");
    let load_id = format!("kill9-{}", std::process::id());
    let base = |extra: &[&str]| {
        let mut c = common::sqlfleet();
        c.arg("load")
            .arg(format!("--defaults-file={}", srv.defaults_file().display()))
            .args([
                "-D",
                &ours,
                "--progress",
                "none",
                "--threads",
                "3",
                "--batch-bytes",
                "100000",
                "--load-id",
                &load_id,
            ])
            .args(extra)
            .arg(&file);
        c
    };
    let mut child = base(&[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    common::kill_9_when(&mut child, 5, || journal_rows(srv, &load_id));
    let before = journal_rows(srv, &load_id);
    eprintln!("killed after {before} journaled batches");

    // Without --resume: refuse, and say how to go on.
    let o = base(&[]).output().expect("run");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("--resume"), "{}", stderr(&o));

    let o = base(&["--resume", "--json"]).output().expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert!(v["skipped_on_resume"].as_u64().expect("skipped") > 0, "{v}");
    assert_same(srv, &stock, &ours, "after kill -9 and --resume");

    // Resuming a finished load does nothing.
    let o = base(&["--resume"]).output().expect("run");
    assert_eq!(o.status.code(), Some(0));
    assert!(
        stdout(&o).contains("already loaded completely"),
        "{}",
        stdout(&o)
    );
}

/// Each sequence's state, as the server has it (the values a next
/// NEXTVAL would start from), for every sequence in `db`.
fn sequences(srv: &TestServer, db: &str) -> Vec<String> {
    rt().block_on(async {
        let mut c = srv.connect().await;
        let names: Vec<String> = c
            .exec(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND table_type = 'SEQUENCE' ORDER BY 1",
                (db,),
            )
            .await
            .expect("sequences");
        let mut out = Vec::new();
        for n in names {
            let row: Option<(i64, i64, i64)> = c
                .query_first(format!(
                    "SELECT next_not_cached_value, increment, cache_size FROM `{db}`.`{n}`"
                ))
                .await
                .expect("sequence");
            out.push(format!("{n}: {row:?}"));
        }
        out
    })
}

/// A mariadb-dump with sequences (each followed by its `DO SETVAL`) loads
/// in parallel and resumably: no "ties the rest of this file to one
/// connection" (before: the first DO did), killed -9 mid-load and resumed,
/// tables and sequences equal the source's.
#[test]
fn a_dump_with_sequences_loads_in_parallel_and_resumes_after_kill_9() {
    let srv = server();
    let dir = tmp();
    let src = fresh_db(srv, "seqsrc");
    rt().block_on(async {
        let mut c = srv.connect().await;
        c.query_drop(format!(
            "CREATE SEQUENCE `{src}`.s1 START WITH 100 INCREMENT BY 5; \
             CREATE SEQUENCE `{src}`.s2 CACHE 10; \
             SELECT NEXTVAL(`{src}`.s1), NEXTVAL(`{src}`.s1), NEXTVAL(`{src}`.s2); \
             DO SETVAL(`{src}`.s2, 5100, 0)"
        ))
        .await
        .expect("sequences");
        // t1 takes s1's next value as a column default (MariaDB's usual
        // way to use a sequence): the dump writes every value, so its
        // CREATE TABLE ties nothing to one connection.
        for t in 0..3 {
            let (col, cols) = if t == 1 {
                (format!(", n BIGINT DEFAULT NEXTVAL(`{src}`.s1)"), "(id, v)")
            } else {
                (String::new(), "")
            };
            c.query_drop(format!(
                "CREATE TABLE `{src}`.t{t} (id INT PRIMARY KEY, v VARCHAR(40){col}); \
                 INSERT INTO `{src}`.t{t} {cols} SELECT seq, CONCAT('row-', seq, '-', REPEAT('x', seq % 20)) FROM `{src}`.seq_1_to_150000"
            ))
            .await
            .expect("table");
        }
    });
    let file = dir.path().join("seq.sql");
    dump(srv, &src, &[], &file);
    let text = std::fs::read_to_string(&file).expect("read");
    assert!(text.contains("DO SETVAL(`s1`"), "the dump has no DO SETVAL");
    assert!(
        text.contains("DEFAULT nextval("),
        "the dump has no nextval default"
    );
    let want_seq = sequences(srv, &src);
    let ours = fresh_db(srv, "seqours");
    let load_id = format!("seq-{}", std::process::id());
    let base = |extra: &[&str]| {
        let mut c = common::sqlfleet();
        c.arg("load")
            .arg(format!("--defaults-file={}", srv.defaults_file().display()))
            .args(["-D", &ours, "--progress", "none", "--threads", "3"])
            .args(["--batch-bytes", "200000", "--load-id", &load_id])
            .args(extra)
            .arg(&file);
        c
    };
    let mut child = base(&[])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    common::kill_9_when(&mut child, 4, || journal_rows(srv, &load_id));
    let o = base(&["--resume", "--json"]).output().expect("resume");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["mode"], "parallel", "{v}");
    assert!(
        !stderr(&o).contains("ties the rest of this file"),
        "{}",
        stderr(&o)
    );
    assert!(v["skipped_on_resume"].as_u64().unwrap_or(0) > 0, "{v}");
    // mariadb-dump names the default's sequence with its database, so the
    // copy's default takes the source's sequence (as after any client's
    // load under another name); pointed at its own before comparing.
    rt().block_on(async {
        let mut c = srv.connect().await;
        c.query_drop(format!(
            "ALTER TABLE `{ours}`.t1 ALTER n SET DEFAULT NEXTVAL(`{ours}`.s1)"
        ))
        .await
        .expect("default");
    });
    assert_same(srv, &src, &ours, "tables after kill -9 and --resume");
    assert_eq!(sequences(srv, &ours), want_seq, "sequences");
}

#[test]
fn continue_on_error_quarantines_exactly_the_bad_statements() {
    let srv = server();
    let dir = tmp();
    let file = dir.path().join("bad.sql");
    let text = "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(5));\n\
         INSERT INTO t VALUES (1,'a'),(2,'b');\n\
         INSERT INTO t VALUES (2,'dup');\n\
         INSERT INTO missing_table VALUES (1);\n\
         INSERT INTO t VALUES (3,'c');\n\
         CREATE VIEW broken AS SELECT nope FROM t;\n\
         INSERT INTO t VALUES (4,'d');\n";
    std::fs::write(&file, text).expect("write");
    let dup_at = text.find("INSERT INTO t VALUES (2,'dup')").expect("dup");
    let db = fresh_db(srv, "coe");
    let q = dir.path().join("q.sql");
    let o = sqlfleet_load(
        srv,
        &[
            "-D",
            &db,
            "--continue-on-error",
            "--quarantine",
            q.to_str().expect("utf8"),
            file.to_str().expect("utf8"),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("3 statements failed and were quarantined"),
        "{}",
        stdout(&o)
    );
    let quarantined = std::fs::read_to_string(&q).expect("quarantine file");
    let stmts: Vec<&str> = quarantined
        .lines()
        .filter(|l| !l.starts_with("--") && !l.is_empty())
        .collect();
    // In file order, after the database they ran in: replayable alone.
    assert_eq!(
        stmts,
        vec![
            format!("USE `{db}`;").as_str(),
            "INSERT INTO t VALUES (2,'dup');",
            "INSERT INTO missing_table VALUES (1);",
            "CREATE VIEW broken AS SELECT nope FROM t;",
        ]
    );
    // Replayed once the causes are fixed, it loads what was refused.
    mariadb(srv, &["-D", &db, "-e", "DELETE FROM t WHERE id = 2; CREATE TABLE missing_table (a INT); ALTER TABLE t ADD nope INT INVISIBLE"], None);
    mariadb(srv, &[], Some(&q));
    assert!(
        quarantined.contains(&format!(
            "-- sqlfleet quarantine: byte offset {dup_at}, line 3, table `"
        )),
        "{quarantined}"
    );
    assert!(
        quarantined.contains("ERROR 1062: Duplicate entry '2'"),
        "{quarantined}"
    );
    assert!(
        quarantined.contains("line 4") && quarantined.contains("ERROR 1146"),
        "{quarantined}"
    );
    let out = mariadb(
        srv,
        &[
            "-N",
            "-D",
            &db,
            "-e",
            "SELECT GROUP_CONCAT(id ORDER BY id) FROM t",
        ],
        None,
    );
    assert_eq!(stdout(&out).trim(), "1,2,3,4");

    // Without --continue-on-error: stop at the first failure, say where, exit 3.
    let db = fresh_db(srv, "stop");
    let o = sqlfleet_load(srv, &["-D", &db, file.to_str().expect("utf8")]);
    assert_eq!(o.status.code(), Some(3));
    let e = stderr(&o);
    assert!(
        e.contains(&format!("byte offset {dup_at}, line 3"))
            && e.contains("ERROR 1062")
            && e.contains("INSERT INTO t VALUES (2,'dup')"),
        "{e}"
    );
    assert!(e.contains("--resume"), "{e}");
}

#[test]
fn bad_input_errors_say_where_and_exit_nonzero() {
    let srv = server();
    let dir = tmp();
    let w = |name: &str, bytes: &[u8]| -> PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).expect("write");
        p
    };
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(b"CREATE TABLE g (a INT);\n").expect("gz");
    for i in 0..20_000 {
        gz.write_all(format!("INSERT INTO g VALUES ({i});\n").as_bytes())
            .expect("gz");
    }
    let mut gz = gz.finish().expect("gz");
    let cut = gz.len() / 2;
    gz.truncate(cut);
    // Cut short (an interrupted download): called truncated, with its line.
    let truncated = gz.clone();
    gz.extend_from_slice(&[0x55; 40]);
    let cases: Vec<(PathBuf, i32, &str)> = vec![
        (
            w(
                "trunc.sql",
                b"CREATE TABLE t (a TEXT);\nINSERT INTO t VALUES ('abc",
            ),
            3,
            "byte offset 47, line 2: the dump ends inside a '-quoted string",
        ),
        (
            w(
                "trunc_delim.sql",
                b"DELIMITER ;;\nCREATE PROCEDURE p() BEGIN SELECT 1; END",
            ),
            3,
            "line 2: the dump ends inside a DELIMITER ;; block",
        ),
        (
            w("comment.sql", b"SELECT 1;\n/* never closed"),
            3,
            "byte offset 10, line 2: the dump ends inside a /* comment",
        ),
        (w("empty.sql", b""), 3, "the dump is empty"),
        (
            w("garbage.bin", &[0x00, 0x01, 0x02, 0xff, 0x00, 0x13]),
            3,
            "NUL byte outside a string",
        ),
        (
            w(
                "nul_in_string.sql",
                b"CREATE TABLE n (a TEXT);\nINSERT INTO n VALUES ('a\0b');\n",
            ),
            3,
            "byte offset 49, line 2: ASCII '\\0' in the statement",
        ),
        // Garbage inside a gzip stream may decompress to bad SQL before the
        // checksum fails: either way the error names the place.
        (w("corrupt.sql.gz", &gz), 3, "byte offset"),
        (
            w("truncated.sql.gz", &truncated),
            3,
            "of the uncompressed input, line ",
        ),
        (
            w("truncated2.sql.gz", &truncated),
            3,
            "the gzip stream is truncated",
        ),
        (dir.path().join("missing.sql"), 1, "No such file"),
    ];
    for (path, code, want) in cases {
        let db = fresh_db(srv, "bad");
        let o = sqlfleet_load(srv, &["-D", &db, path.to_str().expect("utf8")]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(code), "{}: {e}", path.display());
        assert!(
            e.contains(want),
            "{}: wanted '{want}' in: {e}",
            path.display()
        );
        assert!(
            e.contains(&path.display().to_string()),
            "names the file: {e}"
        );
    }
    // Input refused before its first statement leaves nothing resumable:
    // the same command says the same again (before: "an earlier load of
    // this dump stopped before the end: rerun with --resume").
    let garbage = dir.path().join("garbage.bin");
    let db = fresh_db(srv, "bad_again");
    for _ in 0..2 {
        let o = sqlfleet_load(srv, &["-D", &db, garbage.to_str().expect("utf8")]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(3), "{e}");
        assert!(e.contains("NUL byte outside a string"), "{e}");
    }
}

#[test]
fn password_on_the_command_line_is_hidden_from_ps() {
    let srv = server();
    let pw = srv.sandbox.password().expect("pw");
    let port = srv.sandbox.meta.primary().port.to_string();
    let db = fresh_db(srv, "ps");
    let mut child = common::sqlfleet()
        .args([
            "load",
            "--no-defaults",
            "-h",
            "127.0.0.1",
            "-P",
            &port,
            "-u",
            "root",
        ])
        .arg(format!("-p{}", pw.expose()))
        .args(["-D", &db, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    // Connected and now waiting for stdin: read what `ps` would show.
    let t0 = Instant::now();
    let masked = format!("-p{}", "x".repeat(pw.expose().len()));
    let cmdline = loop {
        // Until exec, the child's cmdline is still the test's own.
        let c = std::fs::read(format!("/proc/{pid}/cmdline")).expect("cmdline");
        let s = String::from_utf8_lossy(&c).replace('\0', " ");
        if s.contains(&masked) || t0.elapsed() > Duration::from_secs(5) {
            break s;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    drop(child.stdin.take());
    let out = child.wait_with_output().expect("wait");
    assert!(
        !cmdline.contains(pw.expose()),
        "password visible: {cmdline}"
    );
    assert!(cmdline.contains(&masked), "{cmdline}: {}", stderr(&out));
}

#[test]
fn falls_back_to_inserts_when_the_server_refuses_local_infile() {
    static NO_LOCAL: std::sync::OnceLock<TestServer> = std::sync::OnceLock::new();
    let srv = NO_LOCAL.get_or_init(|| sqlfleet_testkit::server_with(&["local_infile=0"]));
    let src = source_db(srv);
    let dir = tmp();
    let file = dir.path().join("d.sql");
    dump(srv, &src, &[], &file);
    let stock = fresh_db(srv, "stock");
    mariadb(srv, &["-D", &stock], Some(&file));
    let ours = fresh_db(srv, "ours");
    let o = sqlfleet_load(srv, &["-D", &ours, file.to_str().expect("utf8")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let said = stderr(&o).matches("refuses LOAD DATA LOCAL").count();
    assert_eq!(said, 1, "says so once: {}", stderr(&o));
    assert!(
        !stdout(&o).contains("sent as LOAD DATA rows"),
        "{}",
        stdout(&o)
    );
    assert_same(srv, &stock, &ours, "local_infile=0");
}

/// CSV/TSV options on a dump are refused naming the one that applies
/// (`--character-set latin1` on a .sql file was accepted and ignored).
#[test]
fn csv_options_on_a_dump_are_refused_with_the_one_that_applies() {
    let srv = server();
    let dir = tmp();
    let p = dir.path().join("d.sql");
    std::fs::write(&p, b"CREATE TABLE t (a INT);\n").expect("write");
    let path = p.to_str().expect("utf8 path");
    let db = fresh_db(srv, "csvopts");
    for (args, want) in [
        (vec!["--character-set", "latin1"], "--default-character-set"),
        (vec!["--header"], "--header is for CSV/TSV"),
        (vec!["--format", "csv"], "--format is for CSV/TSV"),
        (vec!["--strict"], "--strict is for CSV/TSV"),
    ] {
        let mut all = vec!["-D", db.as_str()];
        all.extend(args.iter());
        all.push(path);
        let o = sqlfleet_load(srv, &all);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
    let n: Option<i64> = rt().block_on(async {
        let mut c = srv.connect().await;
        mysql_async::prelude::Queryable::exec_first(
            &mut c,
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?",
            (db.as_str(),),
        )
        .await
        .expect("count")
    });
    assert_eq!(n, Some(0), "nothing ran");
}

/// Issue 40, finding 1: a resume is bound to the database it loads into.
/// A dump without USE, interrupted while loading with -D a, is refused on
/// `--resume -D b` (it would load only the rest into b, exit 0), naming
/// -D a; a plain load of it into c is a new load, not a conflict; and
/// `--resume -D a` completes a exactly.
#[test]
fn a_resume_is_bound_to_the_database_it_loads_into() {
    let srv = server();
    let dir = tmp();
    let p = dir.path().join("nouse.sql");
    std::fs::write(
        &p,
        b"CREATE TABLE t (a INT);\nINSERT INTO t VALUES (1);\nINSERT INTO later VALUES (1);\nINSERT INTO t VALUES (2);\n",
    )
    .expect("write");
    let path = p.to_str().expect("utf8 path");
    let (a, b, c) = (
        fresh_db(srv, "bind_a"),
        fresh_db(srv, "bind_b"),
        fresh_db(srv, "bind_c"),
    );
    let o = sqlfleet_load(srv, &["-D", &a, path]);
    assert_ne!(
        o.status.code(),
        Some(0),
        "stops at the missing table: {}",
        stderr(&o)
    );
    let count = |db: &str, sql: &str| -> Option<i64> {
        rt().block_on(async {
            let mut c = srv.connect().await;
            mysql_async::prelude::Queryable::query_first(
                &mut c,
                format!("SELECT {sql} FROM `{db}`.t"),
            )
            .await
            .ok()
            .flatten()
        })
    };
    assert_eq!(
        count(&a, "COUNT(*)"),
        Some(1),
        "nothing after the failing line ran, as with the stock client"
    );
    let o = sqlfleet_load(srv, &["-D", &b, "--resume", path]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("-D {a}")) && err.contains("--restart"),
        "{err}"
    );
    assert_eq!(count(&b, "COUNT(*)"), None, "nothing loaded into b");
    // Another database, no --resume: a load of its own (it stops at the
    // same missing table, not at the interrupted one).
    let o = sqlfleet_load(srv, &["-D", &c, path]);
    assert!(!stderr(&o).contains("interrupted"), "{}", stderr(&o));
    assert!(stderr(&o).contains("later"), "{}", stderr(&o));
    assert!(count(&c, "COUNT(*)").is_some(), "c was loaded");
    // The cause fixed, the original completes.
    rt().block_on(async {
        let mut conn = srv.connect().await;
        mysql_async::prelude::Queryable::query_drop(
            &mut conn,
            format!("CREATE TABLE `{a}`.later (a INT)"),
        )
        .await
        .expect("create later");
    });
    let o = sqlfleet_load(srv, &["-D", &a, "--resume", path]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(count(&a, "COUNT(*)"), Some(2), "a has both rows, once");
}

/// What a load prints of its input is escaped for the terminal, and the
/// server's error quotes the user's statement alone: never the journal
/// statements the loader sends around it (before, a DDL's syntax error
/// read "near '...; BEGIN; INSERT INTO sqlfleet.load_journal ...'").
#[test]
fn messages_show_the_input_escaped_and_never_the_loaders_own_statements() {
    let srv = server();
    let dir = tmp();
    let db = fresh_db(srv, "msg");
    let p = dir.path().join("ddl.sql");
    std::fs::write(
        &p,
        "CREATE TABLE a (id INT);\nCREATE TABLE b (id INT) WRONG STUFF;\nCREATE TABLE c (id INT);\n",
    )
    .expect("write");
    let o = sqlfleet_load(srv, &["-D", &db, p.to_str().expect("utf8")]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{e}");
    assert!(
        e.contains("line 2") && e.contains("ERROR 1064") && e.contains("near 'STUFF' at line 1"),
        "{e}"
    );
    assert!(!e.contains("load_journal") && !e.contains("BEGIN"), "{e}");
    // As the stock client: the statement before ran, the one after not.
    let tables = mariadb(srv, &["-N", "-D", &db, "-e", "SHOW TABLES"], None);
    assert_eq!(stdout(&tables).trim(), "a");

    let db = fresh_db(srv, "esc");
    let p = dir.path().join("esc.sql");
    std::fs::write(
        &p,
        b"CREATE TABLE e (id INT);\nSELECT '\x1b[2J\x1b]0;owned\x07\r' FROM nope;\n",
    )
    .expect("write");
    let o = sqlfleet_load(srv, &["-D", &db, p.to_str().expect("utf8")]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{e}");
    assert!(
        !e.bytes().any(|b| b == 0x1b || b == 0x07 || b == b'\r'),
        "raw control bytes reached the terminal: {e:?}"
    );
    assert!(e.contains("\\x1b[2J\\x1b]0;owned\\x07"), "{e}");
}

/// Ctrl-C (SIGINT) mid-load: the statements in flight commit, the load
/// says what committed (statements, rows, through which line) and how to
/// go on, exits 130, and its journal row says `interrupted` (before: no
/// word, and `running` with the last run's count); `--resume` then
/// completes it exactly.
#[test]
fn ctrl_c_says_what_committed_and_resume_completes() {
    let srv = server();
    let dir = tmp();
    let file = dir.path().join("big.sql");
    big_dump(&file, 4, 150_000);
    let stock = fresh_db(srv, "stock_int");
    mariadb(srv, &["-D", &stock], Some(&file));
    let ours = fresh_db(srv, "ours_int");
    let load_id = format!("sigint-{}", std::process::id());
    let base = |extra: &[&str]| {
        let mut c = common::sqlfleet();
        c.arg("load")
            .arg(format!("--defaults-file={}", srv.defaults_file().display()))
            .args(["-D", &ours, "--progress", "none", "--threads", "3"])
            .args(["--batch-bytes", "100000", "--load-id", &load_id])
            .args(extra)
            .arg(&file);
        c
    };
    let child = base(&[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let t0 = Instant::now();
    while journal_rows(srv, &load_id) < 5 {
        assert!(t0.elapsed() < Duration::from_secs(60), "no progress");
        std::thread::sleep(Duration::from_millis(5));
    }
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(killed.success());
    let o = child.wait_with_output().expect("wait");
    let e = stderr(&o);
    if o.status.code() == Some(0) {
        // It finished before the signal arrived: nothing to check.
        eprintln!("finished before SIGINT: {e}");
        return;
    }
    assert_eq!(o.status.code(), Some(130), "{e}");
    assert!(
        e.contains("interrupted:")
            && e.contains("committed and journaled")
            && e.contains("rerun with --resume"),
        "{e}"
    );
    let state = load_state(srv, &load_id);
    assert_eq!(state.as_deref(), Some("interrupted"));
    // Neither flag: refused, as after a kill (before: it loaded again
    // from the start over the rows already there).
    let o = base(&[]).output().expect("rerun");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("stopped before the end: rerun with --resume"),
        "{}",
        stderr(&o)
    );
    let o = base(&["--resume"]).output().expect("resume");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_same(srv, &stock, &ours, "after Ctrl-C and --resume");
}

/// One Ctrl-C stops a load whose batch holds a whole table (the default
/// 64 MiB batch, one connection): the batch in flight stops at its next
/// statement (or 1 MiB piece of LOAD DATA) and rolls back, no batch starts
/// after it, the load exits 130 with its journal row `interrupted`, and
/// `--resume` completes it exactly. Before: it loaded the whole rest of
/// the file after the signal and exited 0.
#[test]
fn one_ctrl_c_stops_the_batch_in_flight() {
    let srv = server();
    let dir = tmp();
    let file = dir.path().join("one_batch.sql");
    big_dump(&file, 3, 300_000);
    let stock = fresh_db(srv, "stock_stop");
    mariadb(srv, &["-D", &stock], Some(&file));
    let ours = fresh_db(srv, "ours_stop");
    let load_id = format!("stop-{}", std::process::id());
    let base = |extra: &[&str]| {
        let mut c = common::sqlfleet();
        c.arg("load")
            .arg(format!("--defaults-file={}", srv.defaults_file().display()))
            .args(["-D", &ours, "--progress", "none", "--threads", "1"])
            .args(["--load-id", &load_id])
            .args(extra)
            .arg(&file);
        c
    };
    let child = base(&[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // The first table exists: its one batch is being sent.
    let t0 = Instant::now();
    let created = || {
        rt().block_on(async {
            let mut c = srv.connect().await;
            let n: Option<i64> = c
                .exec_first(
                    "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'big0'",
                    (&ours,),
                )
                .await
                .unwrap_or(None);
            n.unwrap_or(0) > 0
        })
    };
    while !created() {
        assert!(t0.elapsed() < Duration::from_secs(60), "no table");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(300));
    let signalled = Instant::now();
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(killed.success());
    let o = child.wait_with_output().expect("wait");
    let e = stderr(&o);
    eprintln!(
        "exited {:?} {:.2} s after SIGINT",
        o.status.code(),
        signalled.elapsed().as_secs_f64()
    );
    assert_eq!(o.status.code(), Some(130), "the load did not stop: {e}");
    let (rows, state): (i64, Option<String>) = rt().block_on(async {
        let mut c = srv.connect().await;
        let rows: Option<i64> = c
            .query_first(format!("SELECT COUNT(*) FROM `{ours}`.big0"))
            .await
            .expect("rows");
        let state: Option<String> = c
            .exec_first(
                "SELECT state FROM sqlfleet.loads WHERE load_id = ?",
                (&load_id,),
            )
            .await
            .expect("state");
        (rows.unwrap_or(0), state)
    });
    assert_eq!(state.as_deref(), Some("interrupted"));
    assert_eq!(
        rows, 0,
        "the batch in flight at the interrupt went on and committed ({rows} rows of big0)"
    );
    assert_eq!(journal_rows(srv, &load_id), 0, "a batch was journaled");
    let o = base(&["--resume"]).output().expect("resume");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_same(srv, &stock, &ours, "after one Ctrl-C and --resume");
}

/// A table in one batch (the default 64 MiB): progress moves while the
/// batch is sent, before it commits (before: `0 B loaded (0%)` and an ETA
/// of hours until the batch committed, then done).
#[test]
fn progress_moves_while_one_big_batch_is_sent() {
    let srv = server();
    let dir = tmp();
    let file = dir.path().join("one_table.sql");
    big_dump(&file, 1, 800_000);
    let db = fresh_db(srv, "progress_big");
    let o = common::sqlfleet()
        .arg("load")
        .arg(format!("--defaults-file={}", srv.defaults_file().display()))
        .args(["-D", &db, "--progress", "json", "--threads", "1"])
        .arg(&file)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let ticks: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "progress")
        .collect();
    let n = |t: &serde_json::Value, k: &str| t[k].as_u64().unwrap_or(0);
    let moving: Vec<_> = ticks
        .iter()
        .filter(|t| n(t, "bytes_sent") > n(t, "bytes_applied"))
        .collect();
    eprintln!(
        "{} progress lines, {} while the batch was in flight: {:?}",
        ticks.len(),
        moving.len(),
        moving
            .iter()
            .map(|t| n(t, "bytes_sent"))
            .collect::<Vec<_>>()
    );
    if ticks.is_empty() {
        eprintln!("finished within the first progress tick: nothing to check");
        return;
    }
    assert!(
        !moving.is_empty(),
        "progress stood still while the batch was sent: {ticks:?}"
    );
    for t in &moving {
        assert!(t["eta_seconds"].as_f64().is_some(), "no ETA: {t}");
    }
    // Once everything is sent, the wait for the commit is its own phase.
    for t in &ticks {
        match t["phase"].as_str() {
            Some("loading") => {}
            Some("committing") => assert!(
                n(t, "bytes_sent") == n(t, "bytes_total")
                    && n(t, "bytes_applied") < n(t, "bytes_sent"),
                "{t}"
            ),
            _ => panic!("no phase: {t}"),
        }
    }
}

/// A dump's rows and warnings as the server counts them: `--json .server`
/// sums each statement's reply (`Records: ... Duplicates: ... Warnings:`),
/// and `.warnings` shows each warning with its dump line, worded as the
/// stock client's `SHOW WARNINGS` words it after the same statement
/// (before: `.server` all zeros, `.warnings` empty, "2 warnings from the
/// server" and none shown).
#[test]
fn a_dumps_server_counts_and_warnings_are_the_servers() {
    let srv = server();
    let dir = tmp();
    let file = dir.path().join("warn.sql");
    let insert = "INSERT INTO w VALUES (1,'abcdef'),(2,'xy'),(3,'toolong');";
    std::fs::write(
        &file,
        format!(
            "/*!40101 SET SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */;\n\
             CREATE TABLE w (id INT PRIMARY KEY, c VARCHAR(3));\n\
             {insert}\n\
             INSERT INTO w VALUES (4,'ok');\n\
             INSERT IGNORE INTO w VALUES (4,'dup'),(5,'new');\n\
             CREATE TABLE w2 (id INT PRIMARY KEY, c VARCHAR(2));\n\
             INSERT INTO w2 SELECT id, c FROM w;\n"
        ),
    )
    .expect("write");
    // The stock client's words for the same statement.
    let stock = fresh_db(srv, "stock_warn");
    let o = mariadb(
        srv,
        &[
            "-D",
            &stock,
            "-N",
            "-B",
            "-e",
            &format!(
                "SET SQL_MODE='NO_AUTO_VALUE_ON_ZERO'; CREATE TABLE w (id INT PRIMARY KEY, c VARCHAR(3)); {insert} SHOW WARNINGS"
            ),
        ],
        None,
    );
    let want: Vec<String> = stdout(&o)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            format!("line 3: {} {}: {}", f[0], f[1], f[2])
        })
        .collect();
    assert_eq!(want.len(), 2, "{want:?}");
    let ours = fresh_db(srv, "ours_warn");
    let o = sqlfleet_load(srv, &["-D", &ours, "--json", file.to_str().expect("utf8")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).expect("json");
    let server = &v["server"];
    // Line 7 reads another table: it runs alone, on the load's own
    // connection, and its reply counts as every batch's does (5 records,
    // 3 values cut to 2 characters).
    assert_eq!(server["records"], 11, "{v}");
    assert_eq!(server["skipped"], 1, "{v}");
    assert_eq!(server["warnings"], 6, "{v}");
    assert_eq!(v["warning_count"], 6, "{v}");
    let shown: Vec<String> = v["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter_map(|w| w.as_str().map(str::to_string))
        .collect();
    for w in &want {
        assert!(shown.contains(w), "{w} not among {shown:?}");
    }
    assert!(
        shown
            .iter()
            .any(|w| w.starts_with("line 5: Warning 1062: Duplicate entry '4'")),
        "{shown:?}"
    );
    assert!(
        shown
            .iter()
            .any(|w| w.starts_with("line 7: Warning 1265: Data truncated for column 'c' at row 1")),
        "{shown:?}"
    );
}

/// Progress on a compressed dump counts one unit — the stream's
/// uncompressed bytes — with the position in the compressed file apart,
/// and no counter ever goes down (before: bytes_applied was scaled by a
/// changing compression ratio and went from 737977 to 516810).
#[test]
fn progress_on_a_compressed_dump_only_goes_up_in_one_unit() {
    let srv = server();
    let dir = tmp();
    let plain = dir.path().join("p.sql");
    big_dump(&plain, 4, 120_000);
    let gz_path = dir.path().join("p.sql.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz_path).expect("create"),
        flate2::Compression::fast(),
    );
    gz.write_all(&std::fs::read(&plain).expect("read"))
        .expect("gz");
    gz.finish().expect("gz");
    let size = std::fs::metadata(&gz_path).expect("size").len();
    let db = fresh_db(srv, "progress");
    let o = common::sqlfleet()
        .arg("load")
        .arg(format!("--defaults-file={}", srv.defaults_file().display()))
        .args(["-D", &db, "--progress", "json", "--threads", "2"])
        .args(["--batch-bytes", "100000"])
        .arg(&gz_path)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let ticks: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "progress")
        .collect();
    assert!(!ticks.is_empty(), "no progress lines: {out}");
    let mut last = (0, 0, 0, 0);
    for t in &ticks {
        let n = |k: &str| t[k].as_u64().unwrap_or_else(|| panic!("{k} in {t}"));
        let now = (
            n("bytes_applied"),
            n("bytes_read"),
            n("compressed_bytes_read"),
            n("rows"),
        );
        assert!(
            now.0 >= last.0 && now.1 >= last.1 && now.2 >= last.2 && now.3 >= last.3,
            "a counter went down: {last:?} then {now:?}"
        );
        assert!(now.0 <= now.1, "applied beyond read: {t}");
        assert_eq!(t["compressed_bytes_total"], size, "{t}");
        assert!(
            t["bytes_total"].is_null(),
            "the stream's size is not the file's: {t}"
        );
        last = now;
    }
}

/// A table name the server cannot hold (an emoji: identifiers are
/// utf8mb3): the load stops with the server's own error for the dump's
/// statement, as the stock client does — not with the error of a
/// question of sqlfleet's own about that name (1267, an illegal mix of
/// collations, from its journal's look at the table).
#[test]
fn a_name_the_server_refuses_is_reported_in_the_servers_words() {
    let srv = server();
    let dir = tmp();
    for (what, ddl) in [
        (
            "DROP",
            "DROP TABLE IF EXISTS `t\u{1F600}`;\nCREATE TABLE `t\u{1F600}` (a int);\n",
        ),
        ("CREATE", "CREATE TABLE `t\u{1F600}` (a int);\n"),
    ] {
        let file = dir.path().join(format!("emoji-{what}.sql"));
        std::fs::write(
            &file,
            format!(
                "-- MariaDB dump 10.19  Distrib 10.11.14-MariaDB\n\
                 /*!40101 SET NAMES utf8mb4 */;\nCREATE TABLE ok (a int);\nINSERT INTO ok VALUES (1);\n\
                 {ddl}INSERT INTO `t\u{1F600}` VALUES (1);\n-- Dump completed on 2026-12-02\n"
            ),
        )
        .expect("write");
        let stock_db = fresh_db(srv, "emoji_stock");
        let mut c = Command::new("mariadb");
        let stock = c
            .arg(format!("--defaults-file={}", srv.defaults_file().display()))
            .args(["-D", &stock_db])
            .stdin(std::fs::File::open(&file).expect("open"))
            .output()
            .expect("mariadb");
        assert!(
            stderr(&stock).contains("ERROR 1300"),
            "{what}: the stock client: {}",
            stderr(&stock)
        );
        let db = fresh_db(srv, "emoji");
        let o = sqlfleet_load(srv, &["-D", &db, file.to_str().expect("utf8")]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(3), "{what}: {e}");
        assert!(
            e.contains("ERROR 1300")
                && e.contains(&format!("statement: {what} TABLE"))
                && !e.contains("1267"),
            "{what}: {e}"
        );
    }
}

/// A load the server stops at once — a MySQL dump's GTID_PURGED, a
/// session collation it does not have after a DROP TABLE IF EXISTS —
/// writes nothing of its own to the target: no journal
/// row, nothing of the journal in the binary log; the same command says
/// the same again (before: ~4 KB of journal in the binary log and "an
/// earlier load of this dump stopped before the end").
#[test]
fn a_load_the_server_stops_at_once_writes_nothing_of_its_own() {
    let srv = server();
    let dir = tmp();
    let head =
        "-- MySQL dump 10.13  Distrib 8.0.36, for Linux (x86_64)\n/*!50503 SET NAMES utf8mb4 */;\n";
    for (what, body, code) in [
        (
            "GTID_PURGED",
            "SET @@GLOBAL.GTID_PURGED=/*!80000 '+'*/ '3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5';\nCREATE TABLE t (a int);\n",
            "ERROR 1193",
        ),
        (
            "0900",
            "DROP TABLE IF EXISTS `t`;\n/*!50503 SET collation_connection = utf8mb4_0900_ai_ci */;\nCREATE TABLE `t` (`a` int) ENGINE=InnoDB;\n",
            "ERROR 1273",
        ),
    ] {
        let file = dir.path().join(format!("stops-{what}.sql"));
        std::fs::write(
            &file,
            format!("{head}{body}INSERT INTO `t` VALUES (1);\n-- Dump completed on 2026-12-02\n"),
        )
        .expect("write");
        let path = file.to_str().expect("utf8");
        let db = fresh_db(srv, "stops");
        let (log, pos) = rt().block_on(async {
            let mut c = srv.connect().await;
            let row: mysql_async::Row = c
                .query_first("SHOW MASTER STATUS")
                .await
                .expect("status")
                .expect("binary log on");
            (
                row.get::<String, _>(0).expect("file"),
                row.get::<u64, _>(1).expect("position"),
            )
        });
        for round in ["first", "again"] {
            let o = sqlfleet_load(srv, &["-D", &db, path]);
            let e = stderr(&o);
            assert_eq!(o.status.code(), Some(3), "{what} {round}: {e}");
            assert!(
                e.contains(code) && e.contains("nothing was written to the target"),
                "{what} {round}: {e}"
            );
        }
        let (rows, logged) = rt().block_on(async {
            let mut c = srv.connect().await;
            // (no journal table at all on a fresh server: nothing written)
            let rows: u64 = match c
                .exec_first("SELECT COUNT(*) FROM sqlfleet.loads WHERE source = ?", (path,))
                .await
            {
                Ok(n) => n.unwrap_or(0),
                Err(mysql_async::Error::Server(e)) if e.code == 1146 => 0,
                Err(e) => panic!("loads: {e}"),
            };
            let events: Vec<mysql_async::Row> = c
                .query(format!("SHOW BINLOG EVENTS IN '{log}' FROM {pos}"))
                .await
                .expect("events");
            let logged = events
                .into_iter()
                // (bytes: another test's statement may be in sjis, and
                // 11.4 returns it so)
                .filter_map(|r| r.get::<Vec<u8>, _>("Info"))
                .map(|i| String::from_utf8_lossy(&i).into_owned())
                // (other tests' loads journal at the same time: ours
                // would name its file)
                .filter(|i| i.contains(path))
                .count();
            (rows, logged)
        });
        assert_eq!(rows, 0, "{what}: a journal row");
        assert_eq!(logged, 0, "{what}: the journal in the binary log");
    }
}

/// A load's row in `sqlfleet.loads` deleted by hand (to "reset" it)
/// while its records stay: a new load of the same dump starts afresh,
/// and its records alone decide a later resume. Found by
/// bench/load_interrupt.sh: the old records (a whole earlier load) were
/// taken for the new run's, and the resume skipped a table it had not
/// loaded (t3 empty, exit 0).
#[test]
fn records_left_without_their_load_row_never_count() {
    let srv = server();
    let dir = tmp();
    let file = dir.path().join("reset.sql");
    big_dump(&file, 3, 60_000);
    let db = fresh_db(srv, "reset");
    let load_id = format!("reset-{}", std::process::id());
    let run = |extra: &[&str], failpoint: Option<&str>| {
        let mut c = common::sqlfleet();
        c.arg("load")
            .arg(format!("--defaults-file={}", srv.defaults_file().display()))
            .args(["-D", &db, "--progress", "none", "--threads", "2"])
            .args(["--batch-bytes", "100000", "--load-id", &load_id])
            .args(extra)
            .arg(&file);
        if let Some(f) = failpoint {
            c.env("SQLFLEET_FAILPOINTS", f);
        }
        c.output().expect("load")
    };
    let o = run(&[], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let whole = fingerprint(srv, &db);
    rt().block_on(async {
        let mut c = srv.connect().await;
        c.exec_drop("DELETE FROM sqlfleet.loads WHERE load_id = ?", (&load_id,))
            .await
            .expect("delete the row");
        c.query_drop(format!("DROP DATABASE `{db}`; CREATE DATABASE `{db}`"))
            .await
            .expect("empty the database");
    });
    // Killed at its third committed batch, then resumed: the whole dump.
    let o = run(&[], Some("load::batch_committed=kill@3"));
    assert_ne!(o.status.code(), Some(0), "the kill: {}", stderr(&o));
    let o = run(&["--resume"], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(fingerprint(srv, &db), whole, "the resume after a reset");
}

/// A dump that names no database, loaded without -D: the error says to
/// give -D with --restart — the way that works (before: "rerun with
/// --resume", which is refused with another -D) — and that way loads it.
#[test]
fn a_load_without_a_database_says_the_way_that_works() {
    let srv = server();
    let dir = tmp();
    let file = dir.path().join("nodb.sql");
    std::fs::write(
        &file,
        "CREATE TABLE nodb_t (id INT PRIMARY KEY);\nINSERT INTO nodb_t VALUES (1),(2);\n",
    )
    .expect("write");
    let o = sqlfleet_load(srv, &[file.to_str().expect("utf8")]);
    let e = stderr(&o);
    assert_ne!(o.status.code(), Some(0), "{e}");
    assert!(
        e.contains("1046") && e.contains("-D DB --restart") && !e.contains("rerun with --resume"),
        "{e}"
    );
    let db = fresh_db(srv, "nodb");
    let o = sqlfleet_load(srv, &["-D", &db, "--restart", file.to_str().expect("utf8")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// ROW_COUNT() after a statement the server warned about is what the
/// stock client's load gives: nothing of sqlfleet's own (its `SHOW
/// WARNINGS`, which sets ROW_COUNT() to -1) runs between two statements
/// of a file run as written on one connection (before: -1 and -1 where
/// the stock client has 2 and 2).
#[test]
fn row_count_after_a_warned_statement_is_the_stock_clients() {
    let srv = server();
    let dir = tmp();
    let body = "SET sql_mode='';\n\
                CREATE TABLE w (c VARCHAR(2));\n\
                CREATE TABLE w2 (c VARCHAR(1));\n\
                CREATE TABLE r (what VARCHAR(10), n INT);\n\
                INSERT INTO w VALUES ('abc'),('de');\n\
                INSERT INTO r SELECT 'insert', ROW_COUNT();\n\
                INSERT INTO w2 SELECT c FROM w;\n\
                INSERT INTO r SELECT 'select', ROW_COUNT();\n";
    for (name, head) in [("plain", ""), ("dump", "-- MariaDB dump 10.19\n")] {
        let file = dir.path().join(format!("rc_{name}.sql"));
        std::fs::write(&file, format!("{head}{body}")).expect("write");
        let stock = fresh_db(srv, "stock_rc");
        mariadb(srv, &["-D", &stock], Some(&file));
        let ours = fresh_db(srv, "ours_rc");
        let o = sqlfleet_load(srv, &["-D", &ours, file.to_str().expect("utf8")]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        let q = |db: &str| {
            let o = mariadb(
                srv,
                &[
                    "-N",
                    "-B",
                    "-D",
                    db,
                    "-e",
                    "SELECT what, n FROM r ORDER BY what",
                ],
                None,
            );
            stdout(&o)
        };
        let want = q(&stock);
        assert_eq!(want, "insert\t2\nselect\t2\n", "the stock client");
        assert_eq!(q(&ours), want, "{name}");
        // The warnings are still counted, from the replies.
        assert!(
            stdout(&o).contains("3 warnings from the server"),
            "{name}: {}",
            stdout(&o)
        );
    }
}

/// The binary log from `from` (file, position) on, as the stock client
/// prints `SHOW BINLOG EVENTS`.
fn binlog_since(srv: &TestServer, from: &(String, String)) -> String {
    let logs = stdout(&mariadb(srv, &["-N", "-B", "-e", "SHOW BINARY LOGS"], None));
    let mut out = String::new();
    for log in logs.lines().filter_map(|l| l.split('\t').next()) {
        if log < from.0.as_str() {
            continue;
        }
        let at = if log == from.0 {
            format!(" FROM {}", from.1)
        } else {
            String::new()
        };
        let q = format!("SHOW BINLOG EVENTS IN '{log}'{at}");
        out.push_str(&stdout(&mariadb(srv, &["-N", "-B", "-e", &q], None)));
    }
    out
}

/// `--skip-binlog` through the binary, for a dump and for a CSV file: the
/// rows are loaded and the binary log holds neither table; without it,
/// it holds the dump's (the probe can find what it looks for).
#[test]
fn skip_binlog_keeps_dumps_and_csv_out_of_the_binary_log() {
    let srv = server();
    let dir = tmp();
    let dump = dir.path().join("skip.sql");
    std::fs::write(
        &dump,
        b"CREATE TABLE cli_binlog_probe (id INT PRIMARY KEY);\nINSERT INTO cli_binlog_probe VALUES (1),(2),(3);\n",
    )
    .expect("write");
    let csv = dir.path().join("skip.csv");
    std::fs::write(&csv, b"1\n2\n").expect("write");
    let position = || {
        let s = stdout(&mariadb(
            srv,
            &["-N", "-B", "-e", "SHOW MASTER STATUS"],
            None,
        ));
        let mut f = s.split('\t');
        (
            f.next().unwrap_or_default().to_string(),
            f.next().unwrap_or_default().to_string(),
        )
    };
    for skip in [true, false] {
        let db = fresh_db(srv, "cli_binlog");
        mariadb(
            srv,
            &[
                "-e",
                &format!("CREATE TABLE {db}.cli_csv_probe (id INT PRIMARY KEY)"),
            ],
            None,
        );
        let from = position();
        let mut args = vec!["-D", db.as_str()];
        if skip {
            args.push("--skip-binlog");
        }
        let o = sqlfleet_load(
            srv,
            &[args.as_slice(), &[dump.to_str().expect("utf8")]].concat(),
        );
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let said = format!("{}{}", stdout(&o), stderr(&o));
        assert_eq!(
            said.contains("Not written into the server's binary log"),
            skip,
            "the summary says so: {said}"
        );
        let into = format!("{db}.cli_csv_probe");
        let o = sqlfleet_load(
            srv,
            &[
                args.as_slice(),
                &[
                    "--into",
                    &into,
                    "--format",
                    "csv",
                    csv.to_str().expect("utf8"),
                ],
            ]
            .concat(),
        );
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let count = format!(
            "SELECT (SELECT COUNT(*) FROM {db}.cli_binlog_probe) + (SELECT COUNT(*) FROM {into})"
        );
        assert_eq!(
            stdout(&mariadb(srv, &["-N", "-B", "-e", &count], None)).trim(),
            "5"
        );
        let log = binlog_since(srv, &from);
        assert_eq!(
            log.contains("cli_binlog_probe") || log.contains("cli_csv_probe"),
            !skip,
            "--skip-binlog {skip}: {log}"
        );
    }
}

/// Every object and row of `got_db` is `want_db`'s (any size of dump).
fn same_tables(srv: &TestServer, want_db: &str, got_db: &str, what: &str) {
    let want = fingerprint(srv, want_db);
    assert!(!want.is_empty(), "{what}: the stock client loaded nothing");
    assert_eq!(want, fingerprint(srv, got_db), "{what}");
}

/// A seeded dump shape for the interrupt campaign: 1–8 tables, InnoDB or
/// (sometimes) MyISAM, 1–5,000 rows per INSERT (1: not extended); a view,
/// a trigger, a routine, a sequence with a table that takes it as a
/// column default, each sometimes.
fn shaped_dump(path: &Path, rng: &mut u64) -> String {
    let mut next = |n: u64| {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        *rng % n
    };
    let tables = 1 + next(8) as usize;
    let mut shape = Vec::new();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    writeln!(f, "/*!40101 SET NAMES utf8mb4 */;").expect("w");
    for t in 0..tables {
        let engine = if next(5) == 0 { "MyISAM" } else { "InnoDB" };
        let rows = 500 + next(if tables > 4 { 8_000 } else { 30_000 }) as usize;
        let per = if next(4) == 0 {
            1
        } else {
            1 + next(5_000) as usize
        };
        shape.push(format!("t{t}: {engine} {rows} rows, {per} per INSERT"));
        writeln!(f, "DROP TABLE IF EXISTS `s{t}`;\nCREATE TABLE `s{t}` (\n  `id` int NOT NULL,\n  `k` int NOT NULL,\n  `c` varchar(40) NOT NULL,\n  PRIMARY KEY (`id`)\n) ENGINE={engine};").expect("w");
        let mut id = 0;
        while id < rows {
            let end = (id + per).min(rows);
            write!(f, "INSERT INTO `s{t}` VALUES ").expect("w");
            for i in id..end {
                let sep = if i + 1 == end { ";\n" } else { "," };
                write!(
                    f,
                    "({i},{},'v{i}\\'{}'){sep}",
                    i * 7 % 101,
                    "x".repeat(i % 13)
                )
                .expect("w");
            }
            id = end;
        }
    }
    if next(2) == 0 {
        writeln!(f, "CREATE VIEW `v0` AS SELECT `id`, `k` FROM `s0`;").expect("w");
        shape.push("a view".into());
    }
    if next(2) == 0 {
        writeln!(f, "CREATE TABLE `log` (`n` int);\nDELIMITER ;;\nCREATE TRIGGER `tr` AFTER INSERT ON `s0` FOR EACH ROW INSERT INTO `log` VALUES (NEW.id) ;;\nDELIMITER ;").expect("w");
        shape.push("a trigger".into());
    }
    if next(3) == 0 {
        writeln!(f, "DELIMITER ;;\nCREATE PROCEDURE `p0`()\nBEGIN\n  SELECT COUNT(*) FROM `s0`;\nEND ;;\nDELIMITER ;").expect("w");
        shape.push("a routine".into());
    }
    if next(3) == 0 {
        // As mariadb-dump writes a sequence, and a table whose column
        // takes its next value by default (every value written).
        writeln!(f, "CREATE SEQUENCE `q0` start with 1 minvalue 1 maxvalue 9223372036854775806 increment by 1 cache 1000 nocycle ENGINE=InnoDB;\nDO SETVAL(`q0`, 3001, 0);\nCREATE TABLE `sq` (\n  `id` int NOT NULL,\n  `n` bigint DEFAULT nextval(`q0`),\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB;").expect("w");
        for chunk in 0..3 {
            let vals: Vec<String> = (chunk * 1000..(chunk + 1) * 1000)
                .map(|i| format!("({i},{})", i + 1))
                .collect();
            writeln!(f, "INSERT INTO `sq` VALUES {};", vals.join(",")).expect("w");
        }
        shape.push("a sequence as a column default".into());
    }
    writeln!(f, "-- Dump completed on 2026-11-29").expect("w");
    shape.join("; ")
}

/// Interrupts as a property: for each seed a dump shape (a dump, or its
/// tables as a mydumper directory), a `--threads` and SIGINT or SIGTERM
/// at a seeded instant. The load stops: it exits
/// 130 or 143 (or 0 when it had finished), its journal row says
/// `interrupted`, and `--resume` then gives the stock client's result.
/// How long each took to exit after its signal is printed (bench/faults.sh
/// runs it long with SQLFLEET_INTERRUPT_SEEDS). Before: a load whose
/// input had been read ahead went on to the end and exited 0.
#[test]
fn signals_at_seeded_instants_stop_the_load_and_resume_exactly() {
    let srv = server();
    let seeds: u64 = std::env::var("SQLFLEET_INTERRUPT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    let first: u64 = std::env::var("SQLFLEET_INTERRUPT_FIRST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let dir = tmp();
    let mut slowest = 0f64;
    for seed in first..first + seeds {
        let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let file = dir.path().join(format!("shape{seed}.sql"));
        let shape = shaped_dump(&file, &mut rng);
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let threads = (1 + rng % 4).to_string();
        let (signal, code) = if (rng >> 8) % 2 == 0 {
            ("-INT", 130)
        } else {
            ("-TERM", 143)
        };
        let stock = fresh_db(srv, "stock_sig");
        mariadb(srv, &["-D", &stock], Some(&file));
        // A fourth of the seeds load the same tables as a mydumper
        // directory (mydumper's dump of the stock client's copy), with
        // myloader's load of it as the oracle.
        let (input, stock) = if (rng >> 40) % 4 == 0 {
            let out = dir.path().join(format!("shape{seed}.d"));
            let tool = |program: &str, args: &[&str]| {
                let o = Command::new(program)
                    .arg(format!("--defaults-file={}", srv.defaults_file().display()))
                    .args(args)
                    .output()
                    .unwrap_or_else(|e| panic!("{program}: {e} (scripts/deps.sh installs it)"));
                if o.status.success() {
                    Ok(())
                } else {
                    Err(stderr(&o))
                }
            };
            let d = out.to_str().expect("utf8");
            let dumped = [
                "-B",
                &stock,
                "-o",
                d,
                "-t",
                "2",
                "-r",
                "2000",
                "-G",
                "-R",
                "-E",
                "--no-locks",
            ];
            tool("mydumper", &dumped).unwrap_or_else(|e| panic!("mydumper: {e}"));
            // (myloader itself stops on a deadlock between its own
            // threads now and then: the oracle is tried again, afresh)
            let mut tries = 0;
            let want = loop {
                let want = fresh_db(srv, "myloader_sig");
                match tool("myloader", &["-d", d, "-s", &stock, "-B", &want, "-t", "2"]) {
                    Ok(()) => break want,
                    Err(e) if tries < 3 && e.contains("Deadlock") => tries += 1,
                    Err(e) => panic!("myloader: {e}"),
                }
            };
            (out, want)
        } else {
            (file.clone(), stock)
        };
        // (a directory of the same rows loads in a fraction of the time)
        let window = if input == file { 700 } else { 150 };
        let delay = Duration::from_millis((rng >> 16) % window);
        let what = format!(
            "seed {seed} ({shape}; {}; --threads {threads}; {signal} after {delay:?})",
            if input == file {
                "a dump"
            } else {
                "a mydumper directory"
            }
        );
        let ours = fresh_db(srv, "ours_sig");
        let load_id = format!("sig-{}-{seed}", std::process::id());
        let base = |extra: &[&str]| {
            let mut c = common::sqlfleet();
            c.arg("load")
                .arg(format!("--defaults-file={}", srv.defaults_file().display()))
                .args(["-D", &ours, "--progress", "none", "--threads", &threads])
                .args(["--load-id", &load_id])
                .args(extra)
                .arg(&input);
            c
        };
        let child = base(&[])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        std::thread::sleep(delay);
        // Batches committed when the signal goes: after it, each
        // connection may finish the one it is committing, no more.
        let before = journal_rows(srv, &load_id);
        let signalled = Instant::now();
        let _ = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status();
        let o = child.wait_with_output().expect("wait");
        let took = signalled.elapsed().as_secs_f64();
        let after = journal_rows(srv, &load_id);
        let e = stderr(&o);
        if o.status.code() == Some(0) {
            // Only a load that had committed everything may end well: one
            // that saw the signal earlier and went on is the bug this
            // campaign is for.
            assert!(
                !e.contains("interrupted: stopping")
                    || e.contains("after everything had committed"),
                "{what}: saw the signal, went on and exited 0: {e}"
            );
            eprintln!("{what}: finished before the signal");
            same_tables(srv, &stock, &ours, &what);
            continue;
        }
        slowest = slowest.max(took);
        eprintln!(
            "{what}: exited {:?} {took:.3} s after the signal, {} batches committed after it",
            o.status.code(),
            after - before
        );
        // A signal in the first milliseconds, before the load has set up
        // its handler (it has not connected yet), ends the process as the
        // signal's default does — a shell reports the same 130 or 143 —
        // with nothing started: said so, and the journal untouched.
        let died_of_it = {
            use std::os::unix::process::ExitStatusExt;
            o.status.signal() == Some(code - 128)
        };
        if died_of_it {
            assert_eq!(
                after, before,
                "{what}: died of the signal after batches committed"
            );
            assert!(
                load_state(srv, &load_id).is_none(),
                "{what}: died of the signal with a journal begun"
            );
        } else {
            assert_eq!(o.status.code(), Some(code), "{what}: {e}");
        }
        // Twice the connections: the journal was read a moment before the
        // signal went, while batches committed.
        let bound = 2 * threads.parse::<i64>().unwrap_or(1);
        assert!(
            after - before <= bound,
            "{what}: {} batches committed after the signal (at most {bound}): the load went on",
            after - before
        );
        let state = load_state(srv, &load_id);
        // A signal before the journal began leaves nothing to resume.
        let args: &[&str] = if state.is_some() {
            assert_eq!(state.as_deref(), Some("interrupted"), "{what}: {e}");
            &["--resume"]
        } else {
            &[]
        };
        let o = base(args).output().expect("resume");
        assert_eq!(o.status.code(), Some(0), "{what}: resume: {}", stderr(&o));
        same_tables(srv, &stock, &ours, &format!("{what}, then --resume"));
    }
    eprintln!("slowest exit after a signal: {slowest:.3} s");
    println!("faults-survived: faults={seeds} violations=0");
}

/// A mariadb-dump file cut inside a statement: called truncated, with the
/// place, and that statement never sent (before: the server's "ERROR 1064
/// ... near ''"). A file cut between statements loads what it has and
/// warns that its "-- Dump completed" line is missing (before: exit 0 and
/// no word).
#[test]
fn a_cut_dump_is_called_cut() {
    let srv = server();
    let dir = tmp();
    let head = "-- MariaDB dump 10.19  Distrib 10.11.19-MariaDB\n/*!40101 SET NAMES utf8mb4 */;\n\
                CREATE TABLE `c` (`id` int NOT NULL, PRIMARY KEY (`id`));\n\
                INSERT INTO `c` VALUES (1),(2);\n";
    let mid = dir.path().join("mid.sql");
    std::fs::write(&mid, format!("{head}INSERT INTO `c` VALUES (3),(4")).expect("write");
    let db = fresh_db(srv, "cut_mid");
    let o = sqlfleet_load(srv, &["-D", &db, mid.to_str().expect("utf8")]);
    let e = stderr(&o);
    assert_ne!(o.status.code(), Some(0), "{e}");
    assert!(e.contains("truncated dump") && e.contains("line 5"), "{e}");
    assert!(
        !e.contains("1064"),
        "the server was sent the cut statement: {e}"
    );
    let between = dir.path().join("between.sql");
    std::fs::write(&between, head).expect("write");
    let db = fresh_db(srv, "cut_between");
    let o = sqlfleet_load(srv, &["-D", &db, between.to_str().expect("utf8")]);
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{all}");
    assert!(
        all.contains("Dump completed"),
        "no warning of the missing trailer: {all}"
    );
    let whole = dir.path().join("whole.sql");
    std::fs::write(&whole, format!("{head}-- Dump completed on 2026-11-29\n")).expect("write");
    let db = fresh_db(srv, "cut_none");
    let o = sqlfleet_load(srv, &["-D", &db, whole.to_str().expect("utf8")]);
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{all}");
    assert!(!all.contains("cut short"), "a whole dump warned: {all}");
}

/// A statement bigger than the server's max_allowed_packet (a long
/// --hex-blob row): named as such — its size, the limit, its line — before
/// it is sent, and nothing after it runs (before: "Connection reset by
/// peer (os error 104)", and the next table already loaded). The server's
/// limit is read, never assumed: the statement here is 2 MiB, the
/// server's limit 1 MiB.
#[test]
fn a_statement_over_max_allowed_packet_is_named_before_it_is_sent() {
    // A server of its own with a 1 MiB limit (a global: the shared one's
    // other tests must not see it).
    let own = sqlfleet_testkit::server_with(&["max-allowed-packet=1048576"]);
    let srv = &own;
    let dir = tmp();
    let file = dir.path().join("big_row.sql");
    let blob: String = "ab".repeat(1 << 20);
    std::fs::write(
        &file,
        format!(
            "CREATE TABLE `r` (`id` int NOT NULL, `b` longblob, PRIMARY KEY (`id`));\n\
             INSERT INTO `r` VALUES (1,0x00);\n\
             INSERT INTO `r` VALUES (2,0x{blob});\n\
             INSERT INTO `r` VALUES (3,0x00);\n\
             CREATE TABLE `after` (`id` int);\n"
        ),
    )
    .expect("write");
    let db = fresh_db(srv, "packet");
    let o = sqlfleet_load(
        srv,
        &["-D", &db, "--threads", "1", file.to_str().expect("utf8")],
    );
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{e}");
    assert!(
        e.contains("max_allowed_packet (1048576 bytes)") && e.contains("line 3"),
        "{e}"
    );
    let rows = count(srv, &format!("SELECT COUNT(*) FROM `{db}`.r WHERE id = 3"));
    let after = count(
        srv,
        &format!("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{db}' AND TABLE_NAME = 'after'"),
    );
    assert_eq!(
        (rows, after),
        (0, 0),
        "statements after the refused one ran: {e}"
    );
}

/// After the first failing statement nothing later in the file commits,
/// on any lane. The test holds a row lock in each of two tables: table
/// `a`'s INSERT and table `b`'s (later in the file, on a second
/// connection) both wait. It commits `a`'s key, so `a`'s INSERT fails with
/// 1062, then lets `b`'s run: `b`'s batch must roll back — the stock
/// client would never have run it (before: `b`'s rows committed after the
/// failure, exit 3 all the same).
#[test]
fn nothing_later_in_the_file_commits_after_the_first_failure() {
    let srv = server();
    let dir = tmp();
    let file = dir.path().join("later.sql");
    std::fs::write(
        &file,
        "-- MariaDB dump 10.19  Distrib 10.11.19-MariaDB\n\
         CREATE TABLE IF NOT EXISTS `a` (`id` int NOT NULL, PRIMARY KEY (`id`));\n\
         CREATE TABLE IF NOT EXISTS `b` (`id` int NOT NULL, PRIMARY KEY (`id`));\n\
         INSERT INTO `a` VALUES (1);\n\
         INSERT INTO `b` VALUES (1),(2),(3);\n\
         -- Dump completed on 2026-12-02\n",
    )
    .expect("write");
    let db = fresh_db(srv, "later");
    let rt = rt();
    let hold = |t: &'static str| {
        let db = db.clone();
        async move {
            let mut c = srv.connect().await;
            c.query_drop(format!(
                "CREATE TABLE `{db}`.{t} (`id` int NOT NULL, PRIMARY KEY (`id`)); BEGIN; INSERT INTO `{db}`.{t} VALUES (1)"
            ))
            .await
            .expect("hold the key");
            c
        }
    };
    let (mut hold_a, mut hold_b) = rt.block_on(async { (hold("a").await, hold("b").await) });
    let child = common::sqlfleet()
        .arg("load")
        .arg(format!("--defaults-file={}", srv.defaults_file().display()))
        .args(["-D", &db, "--progress", "none", "--threads", "2"])
        .arg(&file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("load");
    rt.block_on(async {
        let mut c = srv.connect().await;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let waiting = format!(
            "SELECT COUNT(*) FROM information_schema.processlist WHERE db = '{db}' AND (info LIKE '%INTO `a`%' OR info LIKE '%INTO TABLE `a`%' OR info LIKE '%INTO `b`%' OR info LIKE '%INTO TABLE `b`%')"
        );
        loop {
            let n: Option<i64> = c.query_first(&waiting).await.expect("processlist");
            if n == Some(2) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the two INSERTs never waited side by side ({n:?})"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        hold_a.query_drop("COMMIT").await.expect("commit a");
        // `a`'s failure is known to the load before `b`'s INSERT returns.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        hold_b.query_drop("ROLLBACK").await.expect("let b go");
    });
    let o = child.wait_with_output().expect("wait");
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{e}");
    assert!(e.contains("1062") && e.contains("line 4"), "{e}");
    let b = count(srv, &format!("SELECT COUNT(*) FROM `{db}`.b"));
    assert_eq!(b, 0, "a statement after the failing one committed: {e}");
}

/// `--overwrite-tables` (myloader's): a dump made without DROP TABLE
/// (`--skip-add-drop-table`) into a database that already has its tables
/// stops at the first CREATE TABLE (the server's 1050) without it, and
/// with it replaces each table: the copy is the dump's, rows and all.
#[test]
fn overwrite_tables_drops_each_table_before_creating_it() {
    let srv = sqlfleet_testkit::server();
    let src = fresh_db(srv, "owsrc");
    let dst = fresh_db(srv, "owdst");
    rt().block_on(async {
        let mut c = srv.connect().await;
        c.query_drop(format!(
            "CREATE TABLE `{src}`.a (id INT PRIMARY KEY, v VARCHAR(10)); \
             INSERT INTO `{src}`.a VALUES (1, 'x'), (2, 'y'); \
             CREATE TABLE `{src}`.b (id INT PRIMARY KEY); INSERT INTO `{src}`.b VALUES (7); \
             CREATE TABLE `{dst}`.a (id INT PRIMARY KEY, old INT); \
             INSERT INTO `{dst}`.a VALUES (10, 1), (11, 1), (12, 1); \
             CREATE TABLE `{dst}`.b (id INT PRIMARY KEY); INSERT INTO `{dst}`.b VALUES (8)"
        ))
        .await
        .expect("tables");
    });
    let dir = tmp();
    let file = dir.path().join("nodrop.sql");
    dump(srv, &src, &["--skip-add-drop-table"], &file);
    let f = file.to_str().expect("path");
    let o = sqlfleet_load(srv, &["-D", &dst, "--threads", "2", f]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("1050"), "{}", stderr(&o));
    let o = sqlfleet_load(
        srv,
        &[
            "-D",
            &dst,
            "--threads",
            "2",
            "--overwrite-tables",
            "--restart",
            f,
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        count(
            srv,
            &format!("SELECT COUNT(*) FROM `{dst}`.a WHERE v IN ('x', 'y')")
        ),
        2
    );
    assert_eq!(count(srv, &format!("SELECT COUNT(*) FROM `{dst}`.a")), 2);
    assert_eq!(count(srv, &format!("SELECT SUM(id) FROM `{dst}`.b")), 7);
}

/// A server that reports read_only (a replica) is refused before anything
/// runs: a load there by root would go through read_only and fork the
/// replica from its primary. --writes-on-read-only loads there (this
/// file keeps itself out of the replica's binary log, so the shared
/// sandbox keeps replicating).
#[test]
fn a_read_only_server_is_refused_unless_the_user_says_so() {
    let srv = sqlfleet_testkit::replicated();
    let replica = srv.sandbox.meta.nodes[1].port.to_string();
    let db = format!("ro_load_{}", std::process::id());
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("replica_only.sql");
    std::fs::write(
        &file,
        format!(
            "SET SESSION sql_log_bin = 0;\nCREATE DATABASE {db};\nCREATE TABLE {db}.t (a INT);\nINSERT INTO {db}.t VALUES (1),(2);\n"
        ),
    )
    .expect("write");
    let f = file.to_str().expect("utf8");
    let on_replica = ["-h", "127.0.0.1", "--protocol", "tcp", "-P", &replica];
    let rows = || {
        let o = common::sqlfleet()
            .arg("query")
            .arg(format!("--defaults-file={}", srv.defaults_file().display()))
            .args(["--hosts", &format!("127.0.0.1:{replica}")])
            .args(["-e", &format!("SHOW DATABASES LIKE '{db}'")])
            .output()
            .expect("query");
        stdout(&o).lines().count()
    };
    let o = common::load(&srv.defaults_file(), &[&on_replica[..], &[f]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("is read_only") && stderr(&o).contains("--writes-on-read-only"),
        "{}",
        stderr(&o)
    );
    assert_eq!(rows(), 0, "nothing ran");
    let o = common::load(
        &srv.defaults_file(),
        &[&on_replica[..], &["--writes-on-read-only", f]].concat(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(rows(), 1, "loaded on the replica");
    let o = common::sqlfleet()
        .arg("query")
        .arg(format!("--defaults-file={}", srv.defaults_file().display()))
        .args(["--hosts", &format!("127.0.0.1:{replica}")])
        .arg("--writes-on-read-only")
        .args([
            "-e",
            &format!("SET SESSION sql_log_bin = 0; DROP DATABASE {db}"),
        ])
        .output()
        .expect("query");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// Through a read/write-splitting proxy a plain SELECT goes to a replica,
/// which would say read_only for the primary the load's writes reach: the
/// load asks with a locking read, routed as the writes are, and loads.
/// (sqlfleet's relay sends a read of a global variable to the primary
/// too; another proxy need not.)
#[test]
fn a_load_through_a_read_write_split_relay_is_not_taken_for_a_replica() {
    let srv = sqlfleet_testkit::replicated();
    let nodes = &srv.sandbox.meta.nodes;
    let (r1, r2) = (
        format!("127.0.0.1:{}", nodes[1].port),
        format!("127.0.0.1:{}", nodes[2].port),
    );
    let relay = common::relay::start_relay(
        srv,
        &["--backend", &r1, "--backend", &r2, "--read-write-split"],
    );
    let port = relay.port.to_string();
    let via = ["-h", "127.0.0.1", "--protocol", "tcp", "-P", &port];
    let ask = |sql: &str| {
        let o = common::sqlfleet()
            .arg("query")
            .arg(format!("--defaults-file={}", srv.defaults_file().display()))
            .args(via)
            .args(["-e", sql])
            .output()
            .expect("query");
        stdout(&o)
            .trim()
            .rsplit('\t')
            .next()
            .unwrap_or("")
            .to_string()
    };
    // Plain reads reach a replica once the relay knows the roles.
    let replica_ids = [
        nodes[1].server_id.to_string(),
        nodes[2].server_id.to_string(),
    ];
    let deadline = Instant::now() + Duration::from_secs(20);
    while !replica_ids.contains(&ask("SELECT @@session.server_id")) {
        assert!(Instant::now() < deadline, "reads never went to a replica");
        std::thread::sleep(Duration::from_millis(200));
    }
    let db = format!("ro_relay_{}", std::process::id());
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("through.sql");
    std::fs::write(
        &file,
        format!("CREATE DATABASE {db};\nCREATE TABLE {db}.t (a INT);\nINSERT INTO {db}.t VALUES (1),(2);\n"),
    )
    .expect("write");
    let o = common::load(
        &srv.defaults_file(),
        &[&via[..], &[file.to_str().expect("utf8")]].concat(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let primary = format!("127.0.0.1:{}", srv.sandbox.meta.primary().port);
    let o = common::sqlfleet()
        .arg("query")
        .arg(format!("--defaults-file={}", srv.defaults_file().display()))
        .args(["--hosts", &primary])
        .args([
            "-e",
            &format!("SELECT COUNT(*) FROM {db}.t; DROP DATABASE {db}"),
        ])
        .output()
        .expect("query");
    assert_eq!(stdout(&o), format!("{primary}\t2\n"), "{}", stderr(&o));
}

/// The options mariadb-dump itself lists, not the ones a test happened to
/// need: every boolean in its `--help` variables table flipped from its
/// default (`--X` or `--skip-X`), every `--compatible` mode its help names,
/// and a seeded draw of three of the server's character sets as
/// `--default-character-set`, given to both clients when loading too
/// (`SQLFLEET_DUMP_SEED`; sets in which
/// mariadb-dump cannot name every column are passed over). Each dump (of every type, routines,
/// triggers, an event, a view on a view, a system-versioned table with its
/// history, a sequence) loads into what the stock client makes of it:
/// the same objects, rows and history, and success or failure alike (a
/// mode whose dump the server rejects fails both at the same statement).
/// Left out, each for its reason: options that choose what is dumped
/// from the server rather than how (`all-databases`, `databases`,
/// `no-create-db`, `all-tablespaces`, `no-tablespaces`), act on the
/// server (`flush-logs`, `flush-privileges`, `delete-master-logs`), or
/// shape the connection, locking or diagnostics only (`compress`, `ssl`,
/// `force`, `verbose`, `debug-*`, `lock-*`, `single-transaction`,
/// `quick`, `log-queries`), and those for a replica, Galera, S3 or
/// `--tab` (`apply-slave-statements`, `include-master-host-port`,
/// `galera-info`, `copy-s3-tables`, `header`). Before: under
/// `--compatible=oracle` the loader's own `BEGIN; INSERT INTO
/// sqlfleet.load_journal ...` opened a PL/SQL block and failed, reported as
/// the dump's CREATE SEQUENCE at line 19 (the stock client loaded on).
#[test]
fn every_option_mariadb_dump_lists_loads_like_the_stock_client() {
    use rand::{seq::SliceRandom, SeedableRng};
    let srv = server();
    let src = source_db(srv);
    mariadb(
        srv,
        &[
            "-D",
            &src,
            "-e",
            "CREATE TABLE hist (id INT PRIMARY KEY, v INT) WITH SYSTEM VERSIONING; \
             INSERT INTO hist VALUES (1, 1); UPDATE hist SET v = 2 WHERE id = 1; \
             CREATE SEQUENCE seq1 START WITH 10; DO NEXTVAL(seq1)",
        ],
        None,
    );
    let help = Command::new("mariadb-dump")
        .arg("--help")
        .output()
        .expect("mariadb-dump --help");
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let table = help
        .split("Variables (--variable-name=value)")
        .nth(1)
        .expect("mariadb-dump --help has its variables table");
    const NOT_HOW: &[&str] = &[
        "all-databases",
        "databases",
        "no-create-db",
        "all-tablespaces",
        "no-tablespaces",
        "flush-logs",
        "flush-privileges",
        "delete-master-logs",
        "compress",
        "ssl",
        "ssl-verify-server-cert",
        "force",
        "verbose",
        "debug-check",
        "debug-info",
        "lock-tables",
        "lock-all-tables",
        "single-transaction",
        "quick",
        "log-queries",
        "apply-slave-statements",
        "include-master-host-port",
        "galera-info",
        "copy-s3-tables",
        "header",
    ];
    let mut variants: Vec<Vec<String>> = Vec::new();
    for line in table.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if let [name, v @ ("TRUE" | "FALSE")] = w.as_slice() {
            if !NOT_HOW.contains(name) {
                variants.push(vec![if *v == "TRUE" {
                    format!("--skip-{name}")
                } else {
                    format!("--{name}")
                }]);
            }
        }
    }
    assert!(variants.len() >= 25, "too few options read: {variants:?}");
    let modes = help
        .split("Legal modes are:")
        .nth(1)
        .and_then(|t| t.split('.').next())
        .expect("mariadb-dump --help names its --compatible modes");
    for m in modes.split(',').map(|m| m.trim()).filter(|m| !m.is_empty()) {
        variants.push(vec![format!("--compatible={m}")]);
    }
    let seed: u64 = std::env::var("SQLFLEET_DUMP_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let sets = mariadb(
        srv,
        &[
            "-N",
            "-e",
            "SELECT character_set_name FROM information_schema.character_sets",
        ],
        None,
    );
    let mut sets: Vec<String> = stdout(&sets).lines().map(str::to_string).collect();
    sets.sort();
    sets.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
    println!("SQLFLEET_DUMP_SEED={seed}: character sets in the order {sets:?}");
    for cs in sets.iter().take(12) {
        variants.push(vec![format!("--default-character-set={cs}")]);
    }
    let history = |db: &str| {
        let o = mariadb(
            srv,
            &[
                "-N",
                "-D",
                db,
                "-e",
                "SELECT COUNT(*) FROM hist FOR SYSTEM_TIME ALL",
            ],
            None,
        );
        stdout(&o).trim().to_string()
    };
    let dir = tmp();
    let (mut ran, mut sets_ran) = (0, 0);
    for (i, v) in variants.iter().enumerate() {
        let a_set = v[0].starts_with("--default-character-set");
        if a_set && sets_ran == 3 {
            break;
        }
        let file = dir.path().join(format!("o{i}.sql"));
        let args: Vec<&str> = v.iter().map(String::as_str).collect();
        let o = Command::new("mariadb-dump")
            .arg(format!("--defaults-file={}", srv.defaults_file().display()))
            .args(["--routines", "--triggers", "--events"])
            .args(&args)
            .arg(&src)
            .stdout(std::fs::File::create(&file).expect("create dump"))
            .output()
            .expect("mariadb-dump");
        if !o.status.success() {
            // Only a character set may stop mariadb-dump itself: the
            // server refuses some as a client's (ucs2, utf16, utf32), and
            // a name the set cannot hold (`üñí` in latin2) is then
            // unknown. Nothing to load.
            assert!(a_set, "{v:?}: {}", stderr(&o));
            println!("{v:?}: mariadb-dump: {}", stderr(&o).trim());
            continue;
        }
        ran += 1;
        sets_ran += usize::from(a_set);
        // A dump written in a set is read in it: both clients are given
        // the set it was written with, as a user restoring it would.
        let read_in: &[&str] = if a_set { &args } else { &[] };
        let stock = fresh_db(srv, "stock");
        let s = srv.stock_client(&stock, &file, read_in);
        let ours = fresh_db(srv, "ours");
        let o = sqlfleet_load(
            srv,
            &[&["-D", &ours][..], read_in, &[file.to_str().expect("utf8")]].concat(),
        );
        assert_eq!(
            s.status.success(),
            o.status.success(),
            "{v:?}: stock {} / ours {}",
            stderr(&s),
            stderr(&o)
        );
        assert_eq!(
            fingerprint(srv, &stock),
            fingerprint(srv, &ours),
            "{v:?}: {}",
            stderr(&o)
        );
        if s.status.success() {
            assert_eq!(history(&stock), history(&ours), "{v:?}: history rows");
            // The summary counts the rows its INSERTs put in, whatever
            // quotes their names (it said "0 rows into 0 tables" for a
            // --compatible=ansi dump, whose every INSERT it ran alone).
            let dumped = std::fs::read(&file).expect("dump");
            if dumped.windows(13).any(|w| w == b"\nINSERT INTO ") {
                let said = stdout(&o);
                let rows: u64 = said
                    .split(", ")
                    .nth(1)
                    .and_then(|r| r.split(' ').next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                assert!(rows >= 20_000, "{v:?}: {said}");
            }
        }
    }
    assert_eq!(sets_ran, 3, "three character sets of the draw dumped");
    assert!(ran >= 25 + 3, "{ran} dumps loaded");
}

/// Dumps in the character sets whose characters hold ASCII bytes (the
/// server's own list: every set in which some byte pair with a `\`, a
/// quote, a backquote or a `|` as its second byte is a character the
/// server converts to utf8mb4 and back unchanged — big5, cp932, gbk, sjis
/// on MariaDB 10.11), written with `--default-character-set` and loaded
/// with the same flag: the same rows as the stock client's, by the fast
/// path or not. Before: the first such character in a quoted string
/// (`表` is 0x95 0x5C in sjis) was taken for an escape, and the load
/// stopped at "unknown mysql client command '\\'" where the client loads.
/// The INSERT → LOAD DATA fast path reads them a character at a time as
/// well (it was off in these sets: 1.45x the time).
#[test]
fn a_dump_in_a_set_whose_characters_hold_ascii_bytes_loads_like_the_stock_client() {
    let srv = server();
    let sets = mariadb(
        srv,
        &[
            "-N",
            "-e",
            "SELECT character_set_name FROM information_schema.character_sets \
             WHERE maxlen BETWEEN 2 AND 4 AND character_set_name NOT IN ('ucs2', 'utf16', 'utf16le', 'utf32') ORDER BY 1",
        ],
        None,
    );
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02X}")).collect::<String>();
    let mut tried = Vec::new();
    for cs in stdout(&sets).lines() {
        // The set's characters with an ASCII second byte, as the server
        // says: (lead, tail) pairs it converts there and back unchanged.
        let pairs: Vec<[u8; 2]> = (0x81u8..=0xFE)
            .step_by(3)
            .flat_map(|lead| b"\\'\"`|".iter().map(move |&t| [lead, t]))
            .collect();
        let exprs: Vec<String> = pairs
            .iter()
            .map(|p| {
                format!(
                    "HEX(CONVERT(CONVERT(CONVERT(X'{h}' USING {cs}) USING utf8mb4) USING {cs})) = '{h}'",
                    h = hex(p)
                )
            })
            .collect();
        let o = mariadb(
            srv,
            &["-N", "-e", &format!("SELECT {}", exprs.join(", "))],
            None,
        );
        let chars: Vec<[u8; 2]> = pairs
            .iter()
            .zip(stdout(&o).trim().split('\t'))
            .filter(|(_, ok)| *ok == "1")
            .map(|(p, _)| *p)
            .collect();
        if chars.is_empty() {
            continue;
        }
        tried.push(cs.to_string());
        let src = fresh_db(srv, "mbsrc");
        // Each row: the set's characters beside the bytes they hold, in a
        // column of the set, a utf8mb4 one, a BLOB, and a utf8mb4 TEXT.
        let mut inserts = Vec::new();
        for (i, c) in chars.iter().enumerate() {
            let v = format!("{}{}5C27{}", hex(c), hex(b"x"), hex(c));
            inserts.push(format!(
                "({i}, CONVERT(X'{v}' USING {cs}), CONVERT(CONVERT(X'{v}' USING {cs}) USING utf8mb4), X'{v}', CONVERT(CONVERT(X'{h}' USING {cs}) USING utf8mb4))",
                h = hex(c)
            ));
        }
        mariadb(
            srv,
            &[
                "-D",
                &src,
                "-e",
                &format!(
                    "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(40) CHARACTER SET {cs}, b VARCHAR(40), c BLOB, d TEXT) DEFAULT CHARSET=utf8mb4; \
                     INSERT INTO t VALUES {}",
                    inserts.join(", ")
                ),
            ],
            None,
        );
        let dir = tmp();
        let file = dir.path().join(format!("{cs}.sql"));
        let flag = format!("--default-character-set={cs}");
        dump(srv, &src, &[&flag], &file);
        let stock = fresh_db(srv, "mbstock");
        let s = srv.stock_client(&stock, &file, &[&flag]);
        assert!(s.status.success(), "{cs}: the stock client: {}", stderr(&s));
        for (fast, ours, o) in loaded_both_ways(srv, "mbours", &flag, &file) {
            assert_eq!(
                fingerprint(srv, &stock),
                fingerprint(srv, &ours),
                "{cs} fast={fast}"
            );
            // The fast path reads these sets a character at a time too:
            // the dump's INSERT went as LOAD DATA rows.
            let said = format!("{}{}", stdout(&o), stderr(&o));
            let sent = said
                .split(" INSERTs sent as LOAD DATA rows")
                .next()
                .and_then(|s| s.rsplit(' ').next())
                .and_then(|n| n.parse::<u64>().ok());
            assert_eq!(
                sent.is_some_and(|n| n > 0),
                fast,
                "{cs} fast={fast}: {said}"
            );
            let rows = mariadb(
                srv,
                &["-N", "-e", &format!("SELECT COUNT(*) FROM `{ours}`.t")],
                None,
            );
            assert_eq!(stdout(&rows).trim(), chars.len().to_string(), "{cs}");
        }
    }
    assert!(
        tried.len() >= 4,
        "sets whose characters hold ASCII bytes: {tried:?}"
    );
}

/// `file` loaded with `flag` into a fresh database (named from `prefix`)
/// by the fast path and again without it, each exiting 0: (fast, the
/// database, the run).
fn loaded_both_ways(
    srv: &TestServer,
    prefix: &str,
    flag: &str,
    file: &Path,
) -> Vec<(bool, String, Output)> {
    [true, false]
        .into_iter()
        .map(|fast| {
            let ours = fresh_db(srv, prefix);
            let mut args = vec!["-D", &ours, flag, file.to_str().expect("utf8")];
            if !fast {
                args.push("--no-fast-path");
            }
            let o = sqlfleet_load(srv, &args);
            assert_eq!(
                o.status.code(),
                Some(0),
                "{flag} fast={fast}: {}",
                stderr(&o)
            );
            (fast, ours, o)
        })
        .collect()
}

/// In a set whose characters hold ASCII bytes, text that reads as a
/// comment inside a string after such a character is the string's: the
/// comment stripper read byte by byte took `ソ'` (0x83 0x5C, 0x27) for an
/// escaped quote, found `/* b */` outside any string, cut it, and the
/// server stored `a  c` (exit 0, "no errors"). The same in each set, by
/// INSERTs and by the fast path, against the stock client.
#[test]
fn comment_like_text_in_a_string_after_a_character_holding_a_backslash_is_loaded_as_written() {
    let srv = server();
    let dir = tmp();
    for (cs, ch) in [
        ("sjis", &b"\x83\x5C"[..]),
        ("cp932", b"\x95\x5C"),
        ("big5", b"\xA1\x5C"),
        ("gbk", b"\x81\x5C"),
    ] {
        let mut sql = b"CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(20), b VARCHAR(40), c VARCHAR(10)) DEFAULT CHARSET=utf8mb4;\n".to_vec();
        for (i, b) in ["a /* b */ c", "x -- y", "p # q", "/*!40101 z */"]
            .iter()
            .enumerate()
        {
            sql.extend_from_slice(format!("INSERT INTO t VALUES ({i}, '").as_bytes());
            sql.extend_from_slice(ch);
            sql.extend_from_slice(format!("', '{b}', 'z');\n").as_bytes());
        }
        let file = dir.path().join(format!("{cs}.sql"));
        std::fs::write(&file, &sql).expect("write");
        let flag = format!("--default-character-set={cs}");
        let stock = fresh_db(srv, "cmstock");
        let s = srv.stock_client(&stock, &file, &[&flag]);
        assert!(s.status.success(), "{cs}: the stock client: {}", stderr(&s));
        for (fast, ours, _) in loaded_both_ways(srv, "cmours", &flag, &file) {
            let rows = |db: &str| {
                stdout(&mariadb(
                    srv,
                    &[
                        "-N",
                        "-e",
                        &format!("SELECT id, HEX(a), b, c FROM `{db}`.t ORDER BY id"),
                    ],
                    None,
                ))
            };
            let want = rows(&stock);
            assert!(
                want.contains("a /* b */ c"),
                "{cs}: the stock client's rows: {want}"
            );
            assert_eq!(rows(&ours), want, "{cs} fast={fast}");
        }
    }
}

/// A database or table name that is not UTF-8 text as the file is read (a
/// latin1 `café`, an sjis `テ`) stops the load before the statement is
/// sent, naming the name, its line and the way on: the loader asks the
/// server about a table by its name, and before it took such a table for
/// a transactional one with no triggers (latin1) or stopped at its
/// journal's "Illegal mix of collations" (sjis). The same names in a UTF-8
/// file load.
#[test]
fn a_name_that_is_not_utf8_as_the_file_is_read_stops_before_it_is_sent() {
    let srv = server();
    let dir = tmp();
    for (cs, name) in [
        ("latin1", &b"caf\xE9"[..]),
        ("sjis", b"\x83\x65"),
        ("utf8mb4", "café_表".as_bytes()),
    ] {
        let mut sql = b"CREATE TABLE `".to_vec();
        sql.extend_from_slice(name);
        sql.extend_from_slice(b"` (id INT PRIMARY KEY) ENGINE=MyISAM;\nINSERT INTO `");
        sql.extend_from_slice(name);
        sql.extend_from_slice(b"` VALUES (1),(2);\n");
        let file = dir.path().join(format!("{cs}.sql"));
        std::fs::write(&file, &sql).expect("write");
        let db = fresh_db(srv, "nm");
        let flag = format!("--default-character-set={cs}");
        let o = sqlfleet_load(srv, &["-D", &db, &flag, file.to_str().expect("utf8")]);
        let tables = stdout(&mariadb(
            srv,
            &[
                "-N",
                "-e",
                &format!(
                    "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{db}'"
                ),
            ],
            None,
        ));
        if cs == "utf8mb4" {
            assert_eq!(o.status.code(), Some(0), "{cs}: {}", stderr(&o));
            assert_eq!(tables.trim(), "1", "{cs}");
        } else {
            assert_eq!(o.status.code(), Some(3), "{cs}: {}", stderr(&o));
            let err = stderr(&o);
            assert!(
                err.contains("is not UTF-8 text as this file is read")
                    && err.contains("line 1")
                    && err.contains(&flag[2..].replace('=', " ")),
                "{cs}: {err}"
            );
            assert_eq!(tables.trim(), "0", "{cs}: nothing sent");
        }
    }
}

/// When the loader's own journal record before a statement is refused,
/// the error says so and the statement (never sent) is not blamed: the
/// server refuses the record here through a trigger on the journal that
/// fires for this file's one offset only. Before, it read as the
/// statement's own error at its line (as under `--compatible=oracle`,
/// where the record's `BEGIN` was the server's syntax error).
#[test]
fn a_refused_journal_record_is_named_as_the_journals_not_the_statements() {
    let srv = server();
    let dir = tmp();
    let db = fresh_db(srv, "jrn");
    // The journal's tables exist once any load has run.
    let warm = dir.path().join("warm.sql");
    std::fs::write(&warm, "CREATE TABLE IF NOT EXISTS warm (id INT);\n").expect("write");
    let o = sqlfleet_load(srv, &["-D", &db, warm.to_str().expect("utf8")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // A long comment first: the CREATE's offset is this test's alone.
    let pad = format!("-- {}\n", "j".repeat(737_373));
    let offset = pad.len();
    let p = dir.path().join("j.sql");
    std::fs::write(&p, format!("{pad}CREATE TABLE jf (id INT);\n")).expect("write");
    let trigger = format!("jrn_refuse_{offset}");
    mariadb(
        srv,
        &[
            "-e",
            &format!(
                "DELIMITER //\nCREATE TRIGGER sqlfleet.{trigger} BEFORE INSERT ON sqlfleet.load_journal FOR EACH ROW \
                 IF NEW.kind = 'pending-ddl' AND NEW.start_offset = {offset} THEN \
                 SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'journal refused by the test'; END IF//"
            ),
        ],
        None,
    );
    let o = sqlfleet_load(srv, &["-D", &db, p.to_str().expect("utf8")]);
    mariadb(
        srv,
        &["-e", &format!("DROP TRIGGER sqlfleet.{trigger}")],
        None,
    );
    let e = stderr(&o);
    assert_ne!(o.status.code(), Some(0), "{e}");
    assert!(
        e.contains("recording in the journal before it")
            && e.contains("journal refused by the test"),
        "{e}"
    );
    let tables = mariadb(srv, &["-N", "-D", &db, "-e", "SHOW TABLES LIKE 'jf'"], None);
    assert_eq!(stdout(&tables).trim(), "", "the statement was not sent");
}

/// Every sql_mode flag the server lists (`mariadbd --verbose --help`),
/// each added to the mode a mariadb-dump file sets for its session: the
/// dump (every type, and values a mode reads otherwise: backslashes,
/// quotes, empty strings, NULLs, a zero date, fractions to round) loads
/// into what the stock client makes of it, success or failure alike. The
/// fast path reads the INSERTs' values itself, so a mode that changes how
/// the server reads them (NO_BACKSLASH_ESCAPES, EMPTY_STRING_IS_NULL,
/// ANSI_QUOTES, ...) must be honoured or passed to the server. Before:
/// under EMPTY_STRING_IS_NULL the fast path loaded `''` as an empty string
/// where the server's INSERT gave NULL (both loaded, the rows differed).
#[test]
fn every_sql_mode_the_server_lists_loads_a_dump_as_the_stock_client_does() {
    let srv = server();
    let src = source_db(srv);
    mariadb(
        srv,
        &[
            "-D",
            &src,
            "-e",
            "SET SESSION sql_mode = ''; \
             CREATE TABLE modes (id INT PRIMARY KEY, s VARCHAR(40), e VARCHAR(10) NOT NULL, \
             n VARCHAR(10), c CHAR(6), d DATE, t DATETIME(6), u INT UNSIGNED, f FLOAT); \
             INSERT INTO modes VALUES (1, 'a\\\\b\\\\', '', NULL, 'x', '0000-00-00', \
             '2026-01-01 10:00:00.123456', 4294967295, 1.5), \
             (2, 'it''s \"q\"', 'e', '', '', '2026-02-28', '2026-01-01 10:00:00.999999', 0, -0.25), \
             (3, '\\\\', 'x', 'n', 'abc   ', '1999-12-31', NULL, 7, NULL)",
        ],
        None,
    );
    let flags = sqlfleet_testkit::server_lists::sql_mode_flags();
    let dir = tmp();
    let base = dir.path().join("base.sql");
    dump(srv, &src, &[], &base);
    // (Bytes: the dump's blobs are not UTF-8.)
    let text = std::fs::read(&base).expect("dump");
    let header: &[u8] = b"SQL_MODE='NO_AUTO_VALUE_ON_ZERO'";
    let at = text
        .windows(header.len())
        .position(|w| w == header)
        .expect("the dump sets its session's mode");
    let mut differ = Vec::new();
    for flag in flags {
        let file = dir.path().join(format!("{flag}.sql"));
        let mut with = text[..at].to_vec();
        with.extend_from_slice(format!("SQL_MODE='NO_AUTO_VALUE_ON_ZERO,{flag}'").as_bytes());
        with.extend_from_slice(&text[at + header.len()..]);
        std::fs::write(&file, with).expect("write");
        let stock = fresh_db(srv, "mstock");
        let s = srv.stock_client(&stock, &file, &[]);
        let ours = fresh_db(srv, "mours");
        let o = sqlfleet_load(srv, &["-D", &ours, file.to_str().expect("utf8")]);
        // Both loaded: the same objects and rows. Both stopped: at the
        // same line with the same error (what committed before a stop
        // differs by design: tables load in parallel, and --resume goes on).
        let same = match (s.status.success(), o.status.success()) {
            (true, true) => fingerprint(srv, &stock) == fingerprint(srv, &ours),
            // A client command the client does not know (a backslash
            // in a string under NO_BACKSLASH_ESCAPES): the same command.
            (false, false) if stderr(&s).contains("Unknown command '") => {
                let cmd = stderr(&s)
                    .split("Unknown command '")
                    .nth(1)
                    .and_then(|c| c.split("'.").next())
                    .map(str::to_string)
                    .unwrap_or_default();
                stderr(&o).contains(&format!("unknown mysql client command '{cmd}'"))
            }
            (false, false) => {
                let stock_err = stderr(&s);
                let at = stock_err
                    .split("ERROR ")
                    .nth(1)
                    .and_then(|e| e.split_once(" at line "))
                    .map(|(code, rest)| {
                        let code = code.split_whitespace().next().unwrap_or("").to_string();
                        let line = rest.split(':').next().unwrap_or("").to_string();
                        (code, line)
                    });
                at.is_some_and(|(code, line)| {
                    let e = stderr(&o);
                    e.contains(&format!(", line {line},")) && e.contains(&format!("ERROR {code}:"))
                })
            }
            _ => false,
        };
        println!(
            "{flag}: stock {}, ours {}{}",
            if s.status.success() {
                "loaded"
            } else {
                "failed"
            },
            if o.status.success() {
                "loaded"
            } else {
                "failed"
            },
            if same { "" } else { "  DIFFERENT" }
        );
        if !same {
            let (a, b) = (fingerprint(srv, &stock), fingerprint(srv, &ours));
            let only = |x: &[String], y: &[String]| -> Vec<String> {
                x.iter()
                    .filter(|e| !y.contains(e))
                    .map(|e| e.chars().take(160).collect())
                    .collect()
            };
            differ.push(format!(
                "{flag}: stock {} / ours {}\nonly the stock client's: {:?}\nonly ours: {:?}",
                stderr(&s),
                stderr(&o),
                only(&a, &b),
                only(&b, &a)
            ));
        }
    }
    assert!(differ.is_empty(), "{differ:#?}");
}

/// Ctrl-C or SIGTERM at each of the load's instants (a batch sent, its
/// journal row written, it committed; the last batch done, before the
/// load's end is recorded), at the first and a later hit: the load exits
/// 130 or 143 (0 only when it had nothing left), says what to run next,
/// and that command — whatever it says, taken at its word — finishes it
/// exactly as the stock client loads the dump.
#[test]
fn a_signal_at_each_load_instant_stops_it_and_its_own_advice_finishes_it() {
    let srv = server();
    let dir = tmp();
    let file = dir.path().join("three.sql");
    big_dump(&file, 3, 12_000);
    let stock = fresh_db(srv, "stock_sig");
    mariadb(srv, &["-D", &stock], Some(&file));
    let cases: &[(&str, &str, i32)] = &[
        ("load::batch_sent", "int@1", libc::SIGINT),
        ("load::batch_sent", "term@3", libc::SIGTERM),
        ("load::batch_journaled", "int@2", libc::SIGINT),
        ("load::batch_committed", "term@1", libc::SIGTERM),
        ("load::batch_committed", "int@5", libc::SIGINT),
        ("load::before_finish", "term@1", libc::SIGTERM),
    ];
    for (i, (point, action, sig)) in cases.iter().enumerate() {
        let what = format!("{point}={action}");
        let ours = fresh_db(srv, &format!("ours_sig{i}"));
        let run = |extra: &[&str], armed: bool| {
            let mut c = common::sqlfleet();
            c.arg("load")
                .arg(format!("--defaults-file={}", srv.defaults_file().display()))
                .args(["-D", &ours, "--progress", "none", "--threads", "3"])
                .args(["--batch-bytes", "60000"])
                .args(extra)
                .arg(&file)
                .stdin(Stdio::null());
            if armed {
                c.env("SQLFLEET_FAILPOINTS", &what);
            }
            c.output().expect("load")
        };
        let o = run(&[], true);
        let e = stderr(&o);
        let code = o.status.code();
        eprintln!("{what}: exit {code:?}");
        if code != Some(0) {
            assert_eq!(code, Some(128 + sig), "{what}: {e}");
            assert!(e.contains("interrupted"), "{what}: {e}");
            let next: &[&str] = if e.contains("rerun with --resume") {
                &["--resume"]
            } else if e.contains("run the same command again") {
                &[]
            } else {
                panic!("{what}: no word on what to run next: {e}");
            };
            let again = run(next, false);
            assert_eq!(
                again.status.code(),
                Some(0),
                "{what}, then {next:?}: {}",
                stderr(&again)
            );
        }
        assert_same(srv, &stock, &ours, &what);
    }
}

/// A panic in a worker's batch (a failpoint that panics before the batch
/// is sent, after its journal row, and after its commit) stops the load
/// there with the place and a non-zero exit, and `--resume` then loads
/// exactly the rest (before: the worker's task was gone and the load said
/// "no errors" and exited 0 without its rows).
#[test]
fn a_panic_in_a_batch_stops_the_load_named_and_resume_completes_it() {
    let srv = server();
    let dir = tmp();
    let src = fresh_db(srv, "pnc_src");
    mariadb(
        srv,
        &[
            "-e",
            &format!(
                "CREATE TABLE `{src}`.t (id INT PRIMARY KEY, v VARCHAR(20)); \
                 INSERT INTO `{src}`.t SELECT seq, CONCAT('v', seq) FROM `{src}`.seq_1_to_20000; \
                 CREATE TABLE `{src}`.u LIKE `{src}`.t; INSERT INTO `{src}`.u SELECT * FROM `{src}`.t; \
                 CREATE TABLE `{src}`.w LIKE `{src}`.t; INSERT INTO `{src}`.w SELECT * FROM `{src}`.t WHERE id <= 100"
            ),
        ],
        None,
    );
    let file = dir.path().join("panic.sql");
    dump(srv, &src, &["--skip-extended-insert"], &file);
    for point in [
        "load::batch_sent",
        "load::batch_journaled",
        "load::batch_committed",
    ] {
        let db = fresh_db(srv, "pnc");
        let run = |extra: &[&str], failpoint: Option<&str>| {
            let mut c = common::sqlfleet();
            c.arg("load")
                .arg(format!("--defaults-file={}", srv.defaults_file().display()))
                .args(["-D", &db, "--progress", "none", "--threads", "2"])
                .args(["--batch-bytes", "100000"])
                .args(extra)
                .arg(&file)
                .stdin(Stdio::null());
            if let Some(f) = failpoint {
                c.env("SQLFLEET_FAILPOINTS", f);
            }
            c.output().expect("load")
        };
        let o = run(&[], Some(&format!("{point}=panic")));
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(3), "{point}: {e}");
        assert!(
            e.contains("an internal error stopped the load here")
                && e.contains(&format!("failpoint {point} panic"))
                && e.contains("byte offset"),
            "{point}: {e}"
        );
        let o = run(&["--resume"], None);
        assert_eq!(o.status.code(), Some(0), "{point}: {}", stderr(&o));
        assert_same(srv, &src, &db, point);
    }
}

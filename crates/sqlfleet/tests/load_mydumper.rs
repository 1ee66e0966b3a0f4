//! `sqlfleet load DIR` on mydumper's directories, with myloader itself
//! as the oracle: the same dump loaded by both must give the same tables,
//! rows, views, triggers, routines and events; killed with -9 and
//! resumed, exactly once; another dump in the same place is refused.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{stderr, stdout};
use mysql_async::prelude::Queryable;
use sqlfleet_testkit::{server, TestServer};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt")
}

/// A program of the fixture server's clients (mariadb, mydumper,
/// myloader), with its options file; fails the test when it fails.
fn client(srv: &TestServer, program: &str, args: &[&str]) -> Output {
    let o = Command::new(program)
        .arg(format!("--defaults-file={}", srv.defaults_file().display()))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e} (scripts/deps.sh installs it)"));
    assert!(o.status.success(), "{program} {args:?}: {}", stderr(&o));
    o
}

fn sql(srv: &TestServer, db: &str, text: &str) -> String {
    stdout(&client(srv, "mariadb", &["-N", "-D", db, "-e", text]))
}

fn fresh_db(srv: &TestServer, prefix: &str) -> String {
    rt().block_on(srv.fresh_db(prefix)).0
}

fn load(srv: &TestServer, args: &[&str]) -> Output {
    common::load(&srv.defaults_file(), args)
}

fn assert_same(srv: &TestServer, want_db: &str, got_db: &str, what: &str) {
    let want = rt().block_on(srv.fingerprint(want_db));
    let got = rt().block_on(srv.fingerprint(got_db));
    assert!(want.len() > 4, "fingerprint too small: {want:?}");
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(w, g, "{what}: first difference (myloader, then sqlfleet)");
    }
    assert_eq!(want.len(), got.len(), "{what}: object count");
}

/// A mydumper directory of text in a set whose characters hold ASCII
/// bytes (sjis: `表` is 0x95 0x5C), loaded with `--default-character-set
/// sjis`: as myloader loads it. mydumper writes `SET NAMES binary` and
/// escapes every `\`, so the directory is read byte by byte whatever the
/// client's set. Before: read in sjis, `\x95\\` ran its string on and the
/// load stopped at "unknown mysql client command".
#[test]
fn a_mydumper_directory_of_sjis_text_loads_as_myloader_loads_it_in_any_client_set() {
    let srv = server();
    let src = fresh_db(srv, "mdsjis");
    sql(
        srv,
        &src,
        "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(20) CHARACTER SET sjis, b BLOB, c TEXT) DEFAULT CHARSET=utf8mb4; \
         INSERT INTO t VALUES (1, CONVERT(X'955C' USING sjis), X'955C27', 'a''b'), \
         (2, CONVERT(X'835C955C5C' USING sjis), X'5C', CONVERT(CONVERT(X'955C' USING sjis) USING utf8mb4))",
    );
    let dir = tempfile::tempdir().expect("tmp");
    mydumper(srv, &src, dir.path(), 1000, &[]);
    let theirs = fresh_db(srv, "mdsjis_myloader");
    myloader(srv, dir.path(), &src, &theirs);
    let ours = fresh_db(srv, "mdsjis_ours");
    let d = dir.path().to_str().expect("utf8");
    let o = load(srv, &["--default-character-set", "sjis", "-D", &ours, d]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let (want, got) =
        rt().block_on(async { (srv.fingerprint(&theirs).await, srv.fingerprint(&ours).await) });
    assert!(want.iter().any(|l| l.contains("rows Some(2)")), "{want:?}");
    assert_eq!(
        want, got,
        "sjis text, client set sjis (myloader, then sqlfleet)"
    );
}

/// mydumper's dump of `db` into `dir`: routines, triggers, events, in
/// chunks of `rows` rows.
fn mydumper(srv: &TestServer, db: &str, dir: &Path, rows: usize, extra: &[&str]) {
    let rows = rows.to_string();
    let out = dir.display().to_string();
    // No FLUSH TABLES WITH READ LOCK (--no-locks): the source is still,
    // and the lock would stall every other test writing to the server
    // (two dumps at once have been seen to wait on each other for good).
    let mut args = vec![
        "-B",
        db,
        "-o",
        &out,
        "-t",
        "2",
        "-r",
        &rows,
        "-G",
        "-R",
        "-E",
        "--no-locks",
    ];
    args.extend_from_slice(extra);
    client(srv, "mydumper", &args);
}

/// myloader loading `dir`'s database `from` into `into`; its output,
/// success or not. myloader does not run a deadlocked chunk again (its
/// four threads can deadlock one table's chunks on the server): such a
/// run is done again from an empty database, at most three times, so the
/// oracle is myloader's answer, not its luck.
fn myloader_output(srv: &TestServer, dir: &Path, from: &str, into: &str) -> Output {
    let run = || {
        Command::new("myloader")
            .arg(format!("--defaults-file={}", srv.defaults_file().display()))
            .arg("-d")
            .arg(dir)
            .args(["-s", from, "-B", into, "-t", "4"])
            .stdin(Stdio::null())
            .output()
            .expect("myloader (scripts/deps.sh installs it)")
    };
    let mut o = run();
    for _ in 0..3 {
        if o.status.success() || !stderr(&o).contains("Deadlock found") {
            break;
        }
        eprintln!("myloader deadlocked; its load runs again: {}", stderr(&o));
        // A directory with its schemas makes the database again; a data
        // half loads into the tables a schema half made: those are
        // emptied, and kept.
        let schemas = std::fs::read_dir(dir)
            .expect("ls")
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().ends_with("-schema.sql"));
        rt().block_on(async {
            let mut c = srv.connect().await;
            if schemas {
                c.query_drop(format!("DROP DATABASE IF EXISTS `{into}`"))
                    .await
                    .expect("drop myloader's half load");
            } else {
                let tables: Vec<String> = c
                    .exec(
                        "SELECT TABLE_NAME FROM information_schema.TABLES \
                         WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE'",
                        (into,),
                    )
                    .await
                    .expect("tables");
                for t in tables {
                    c.query_drop(format!("DELETE FROM `{into}`.`{t}`"))
                        .await
                        .expect("empty myloader's half load");
                }
            }
        });
        o = run();
    }
    o
}

fn myloader(srv: &TestServer, dir: &Path, from: &str, into: &str) {
    let o = myloader_output(srv, dir, from, into);
    assert!(
        o.status.success(),
        "myloader {}: {}",
        dir.display(),
        stderr(&o)
    );
}

/// A source database of every type (`tests/data/every_type.sql`, less the
/// name mydumper 0.10 cannot dump), with a row id 0 kept as 0 (myloader's
/// NO_AUTO_VALUE_ON_ZERO) and a sequence.
fn every_type_source(srv: &TestServer, prefix: &str) -> String {
    let src = fresh_db(srv, prefix);
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/every_type.sql");
    let o = Command::new("mariadb")
        .arg(format!("--defaults-file={}", srv.defaults_file().display()))
        .args(["-D", &src])
        .stdin(std::fs::File::open(&schema).expect("schema"))
        .output()
        .expect("mariadb");
    assert!(o.status.success(), "{}", stderr(&o));
    // mydumper 0.10 cannot dump a name with a backtick (it crashes).
    sql(
        srv,
        &src,
        "DROP TABLE `we``ird name`; SET sql_mode='NO_AUTO_VALUE_ON_ZERO'; \
         CREATE TABLE zero (id INT AUTO_INCREMENT PRIMARY KEY, v INT); \
         INSERT INTO zero VALUES (0, 1), (7, 2); CREATE SEQUENCE seq1 START WITH 100",
    );
    src
}

#[test]
fn a_mydumper_directory_loads_as_myloader_loads_it() {
    let srv = server();
    let src = every_type_source(srv, "mdsrc");
    for (style, extra) in [("plain", &[][..]), ("gzip", &["-c"][..])] {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("dump");
        mydumper(srv, &src, &dir, 3000, extra);
        let chunks = std::fs::read_dir(&dir)
            .expect("ls")
            .filter(|e| {
                let n = e.as_ref().expect("entry").file_name();
                n.to_string_lossy().contains(".many.0000")
            })
            .count();
        assert!(
            chunks >= 5,
            "{style}: mydumper wrote {chunks} chunks of table many"
        );

        let want = fresh_db(srv, "mdref");
        myloader(srv, &dir, &src, &want);
        let got = format!("{want}_sf");
        let d = dir.display().to_string();
        let o = load(srv, &["-D", &got, "--json", &d]);
        assert_eq!(o.status.code(), Some(0), "{style}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        assert!(
            v["fast_path_statements"].as_u64().expect("fast") > 0,
            "{style}: {v}"
        );
        // The metadata's position, as mydumper wrote it.
        let meta = std::fs::read_to_string(dir.join("metadata")).expect("metadata");
        let gtid = v["source_position"]["gtid"].as_str().expect("gtid");
        assert!(
            meta.contains(&format!("GTID:{gtid}")),
            "{gtid} not in {meta}"
        );
        assert!(
            meta.contains(&format!("Pos: {}", v["source_position"]["pos"])),
            "{v}\n{meta}"
        );
        assert_same(srv, &want, &got, style);
        assert_eq!(
            sql(srv, &got, "SELECT id FROM zero ORDER BY id").trim(),
            "0\n7"
        );
        assert_eq!(
            sql(srv, &got, "SELECT NEXTVAL(seq1)").trim(),
            sql(srv, &want, "SELECT NEXTVAL(seq1)").trim()
        );
    }

    // What it cannot read is refused before anything runs, naming the file.
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("dump");
    mydumper(srv, &src, &dir, 3000, &[]);
    let d = dir.display().to_string();
    std::fs::write(dir.join("notes.txt"), "mine").expect("write");
    let none = format!("{src}_none");
    let o = load(srv, &["-D", &none, &d]);
    common::assert_setup_error(&o, "notes.txt: not a file of a mydumper dump");
    std::fs::remove_file(dir.join("notes.txt")).expect("rm");
    std::fs::rename(dir.join("metadata"), dir.join("metadata.partial")).expect("mv");
    let o = load(srv, &["-D", &none, &d]);
    common::assert_setup_error(&o, "did not finish");
    assert_eq!(
        sql(
            srv,
            "mysql",
            &format!(
                "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '{none}'"
            )
        )
        .trim(),
        "0",
        "a refused directory created its database"
    );
    std::fs::rename(dir.join("metadata.partial"), dir.join("metadata")).expect("mv");
    // Bad SQL in a chunk: the error names the chunk file and its line.
    let chunk = dir.join(format!("{src}.many.00002.sql"));
    let mut text = std::fs::read_to_string(&chunk).expect("chunk");
    text.push_str("INSERT INTO `many` VALUES (1,'unterminated\n");
    std::fs::write(&chunk, text).expect("write");
    let o = load(srv, &["-D", &none, &d]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains(&format!("{}: byte offset", chunk.display())),
        "{e}"
    );
}

/// A dump split in two (`mydumper --no-data`, then `--no-schemas`): the
/// data half loads into the tables the schema half made, as myloader
/// loads it; into a database without the tables it stops with the
/// server's own error.
#[test]
fn the_data_half_of_a_split_dump_loads_into_the_tables_there_as_myloader_loads_it() {
    let srv = server();
    let src = fresh_db(srv, "mdhalf");
    sql(
        srv,
        &src,
        "CREATE TABLE t (id INT PRIMARY KEY, c VARCHAR(40));          INSERT INTO t SELECT seq, CONCAT('r\"', seq) FROM seq_1_to_10000;          CREATE TABLE u (a INT); INSERT INTO u VALUES (5), (6);          CREATE TABLE log (a INT);          CREATE TRIGGER tr AFTER INSERT ON u FOR EACH ROW INSERT INTO log VALUES (NEW.a); \
         CREATE PROCEDURE pr() SELECT COUNT(*) FROM t",
    );
    let tmp = tempfile::tempdir().expect("tmp");
    let schemas = tmp.path().join("schemas");
    let data = tmp.path().join("data");
    mydumper(srv, &src, &schemas, 3000, &["--no-data"]);
    mydumper(srv, &src, &data, 3000, &["--no-schemas"]);
    let names: Vec<String> = std::fs::read_dir(&data)
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    // Data files, and (mydumper 0.10 -m with -R) the routines: loaded
    // after the data, as myloader does (refused before as "a schema file").
    assert!(
        names
            .iter()
            .all(|n| !n.contains("schema") || n.ends_with("-schema-post.sql"))
            && names.iter().any(|n| n.ends_with("-schema-post.sql"))
            && names.len() >= 5,
        "the data half: {names:?}"
    );
    let want = fresh_db(srv, "mdhref");
    myloader(srv, &schemas, &src, &want);
    myloader(srv, &data, &src, &want);
    let got = format!("{want}_sf");
    let o = load(srv, &["-D", &got, &schemas.display().to_string()]);
    assert_eq!(o.status.code(), Some(0), "schemas: {}", stderr(&o));
    let o = load(
        srv,
        &["-D", &got, "--threads", "3", &data.display().to_string()],
    );
    assert_eq!(o.status.code(), Some(0), "data: {}", stderr(&o));
    assert_same(srv, &want, &got, "the data half");
    // The target's trigger ran for the loaded rows, as under myloader.
    assert_eq!(sql(srv, &got, "SELECT COUNT(*) FROM log").trim(), "2");

    let empty = fresh_db(srv, "mdhnone");
    let o = load(srv, &["-D", &empty, &data.display().to_string()]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("ERROR 1146"), "{}", stderr(&o));
}

/// Batches the journal of loads of `dir` recorded.
fn journaled(srv: &TestServer, dir: &Path) -> i64 {
    let q = format!(
        "SELECT COUNT(*) FROM sqlfleet.load_journal j JOIN sqlfleet.loads l USING (load_id) \
         WHERE l.source = '{}' AND l.state = 'running' AND j.kind = 'data'",
        dir.display()
    );
    let made = "SELECT COUNT(*) FROM information_schema.TABLES \
                WHERE TABLE_SCHEMA = 'sqlfleet' AND TABLE_NAME IN ('load_journal', 'loads')";
    if sql(srv, "mysql", made).trim() != "2" {
        return 0;
    }
    sql(srv, "mysql", &q).trim().parse().unwrap_or(0)
}

#[test]
fn a_mydumper_directory_killed_with_9_resumes_exactly_once_and_another_is_refused() {
    let srv = server();
    let src = fresh_db(srv, "mdbig");
    for t in 0..3 {
        sql(
            srv,
            &src,
            &format!(
                "CREATE TABLE b{t} (id INT PRIMARY KEY, k INT, c VARCHAR(100), KEY (k)); \
                 INSERT INTO b{t} SELECT seq, seq * 31 % 9973, CONCAT('value-', seq, '-\"q\"-', REPEAT('z', seq % 17)) FROM seq_1_to_120000"
            ),
        );
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("dump");
    mydumper(srv, &src, &dir, 5000, &[]);
    let want = fresh_db(srv, "mdkref");
    myloader(srv, &dir, &src, &want);

    let got = format!("{want}_sf");
    let d = dir.display().to_string();
    let args = |extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = ["-D", &got, "--threads", "3", "--batch-bytes", "100000"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a.push(d.clone());
        a
    };
    let mut child = common::sqlfleet()
        .arg("load")
        .arg(format!("--defaults-file={}", srv.defaults_file().display()))
        .args(["--progress", "none"])
        .args(args(&[]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    common::kill_9_when(&mut child, 8, || journaled(srv, &dir));
    eprintln!("killed after {} journaled batches", journaled(srv, &dir));
    let run = |extra: &[&str]| {
        let a = args(extra);
        load(srv, &a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    // Without --resume: refused, saying how to go on.
    let o = run(&[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("--resume"), "{}", stderr(&o));
    let o = retry_while_locked(|| run(&["--resume", "--json"]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert!(v["skipped_on_resume"].as_u64().expect("skipped") > 0, "{v}");
    // The load's own CREATE DATABASE IF NOT EXISTS met the database the
    // killed run made: no note counted as the dump's warning.
    assert_eq!(v["warning_count"], 0, "{v}");
    assert_same(srv, &want, &got, "after kill -9 and --resume");
    let o = run(&["--resume"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("already loaded completely"),
        "{}",
        stdout(&o)
    );

    // Another dump in its place, the same names and sizes, one value
    // changed in the last chunk: never "already loaded".
    let last = (0..100)
        .rev()
        .map(|n| dir.join(format!("{src}.b2.{n:05}.sql")))
        .find(|p| p.exists())
        .expect("a chunk of b2");
    let text = std::fs::read_to_string(&last).expect("chunk");
    let at = text.rfind("value-").expect("a value");
    let changed = format!("{}VALUE-{}", &text[..at], &text[at + 6..]);
    std::fs::write(&last, changed).expect("write");
    let o = run(&["--resume"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stderr(&o).contains("not the input"), "{}", stderr(&o));
    // Without --resume it is a new load, as myloader's: it runs, and the
    // tables already there stop it (mydumper writes no DROP TABLE).
    let o = run(&[]);
    assert_ne!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(!stdout(&o).contains("already loaded"), "{}", stdout(&o));
    assert!(stderr(&o).contains("ERROR 1050"), "{}", stderr(&o));
    // The way on it names works: each table dropped before its CREATE.
    assert!(
        stderr(&o).contains("--restart --overwrite-tables"),
        "{}",
        stderr(&o)
    );
    let o = run(&["--restart", "--overwrite-tables"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// Runs `f` again while the killed run's lock is still held (the server
/// notices the dead connection a moment later).
fn retry_while_locked(f: impl Fn() -> Output) -> Output {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let o = f();
        if o.status.code() == Some(1)
            && stderr(&o).contains("running")
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(200));
            continue;
        }
        return o;
    }
}

/// What each option `mydumper --help` lists means for this test: run it
/// (the arguments to add, `{db}` and `{omit}` filled in), or why not.
/// An option the help lists and this table does not name fails the test.
const MYDUMPER_OPTIONS: &[(&str, Result<&[&str], &str>)] = &[
    ("--statement-size", Ok(&["-s", "2000"])),
    ("--rows", Ok(&["-r", "40"])),
    ("--chunk-filesize", Ok(&["-F", "1"])),
    ("--compress", Ok(&["-c"])),
    ("--build-empty-files", Ok(&["-e"])),
    ("--regex", Ok(&["-x", "^{db}\\.(many|zero|seq1)$"])),
    ("--ignore-engines", Ok(&["-i", "MyISAM"])),
    ("--insert-ignore", Ok(&["-N"])),
    ("--no-views", Ok(&["-W"])),
    ("--no-backup-locks", Ok(&["--no-backup-locks"])),
    ("--less-locking", Ok(&["--less-locking"])),
    ("--tz-utc", Ok(&["--tz-utc"])),
    ("--skip-tz-utc", Ok(&["--skip-tz-utc"])),
    ("--use-savepoints", Ok(&["--use-savepoints"])),
    ("--lock-all-tables", Ok(&["--lock-all-tables"])),
    ("--updated-since", Ok(&["-U", "1"])),
    ("--trx-consistency-only", Ok(&["--trx-consistency-only"])),
    ("--complete-insert", Ok(&["--complete-insert"])),
    ("--tables-list", Ok(&["-T", "{db}.many,{db}.zero"])),
    ("--omit-from-file", Ok(&["-O", "{omit}"])),
    ("--compress-protocol", Ok(&["-C"])),
    (
        "--no-schemas",
        Err("a dump's data half: the split-dump test"),
    ),
    (
        "--no-data",
        Err("a dump's schema half: the split-dump test"),
    ),
    ("--triggers", Err("in every dump here")),
    ("--events", Err("in every dump here")),
    ("--routines", Err("in every dump here")),
    (
        "--no-locks",
        Err("in every dump here (a lock stalls the other tests)"),
    ),
    (
        "--kill-long-queries",
        Err("kills other sessions' queries on the shared server"),
    ),
    (
        "--long-query-guard",
        Err("when to give up on long queries, not what is dumped"),
    ),
    ("--daemon", Err("dumps on a schedule, never ends")),
    ("--snapshot-interval", Err("with --daemon only")),
    ("--logfile", Err("where mydumper logs")),
    (
        "--success-on-1146",
        Err("how a missing table is counted, not what is dumped"),
    ),
    ("--tidb-snapshot", Err("TiDB only")),
    ("--database", Err("in every dump here")),
    ("--outputdir", Err("in every dump here")),
    ("--threads", Err("in every dump here")),
    ("--help", Err("not a dump")),
    ("--version", Err("not a dump")),
    ("--verbose", Err("what mydumper says")),
    ("--host", Err("connection: from --defaults-file")),
    ("--user", Err("connection: from --defaults-file")),
    ("--password", Err("connection: from --defaults-file")),
    ("--ask-password", Err("connection: asks on a terminal")),
    ("--port", Err("connection: from --defaults-file")),
    ("--socket", Err("connection: from --defaults-file")),
    ("--defaults-file", Err("in every dump here")),
    ("--ssl", Err("connection: the fixture server has no TLS")),
    ("--key", Err("connection: TLS")),
    ("--cert", Err("connection: TLS")),
    ("--ca", Err("connection: TLS")),
    ("--capath", Err("connection: TLS")),
    ("--cipher", Err("connection: TLS")),
];

/// Every content option `mydumper --help` lists, each added to the dump
/// the other tests make: the directory loads as myloader loads it (the
/// same objects and rows), or both refuse it. The options come from the
/// help itself, so one a newer mydumper adds fails here until it is
/// classified in [`MYDUMPER_OPTIONS`].
#[test]
fn every_option_mydumper_lists_loads_as_myloader_loads_it() {
    let srv = server();
    let help = Command::new("mydumper")
        .arg("--help")
        .output()
        .expect("mydumper --help");
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let listed: Vec<String> = help
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .find(|w| w.starts_with("--"))
                .map(|w| w.trim_end_matches(',').to_string())
        })
        .collect();
    assert!(listed.len() > 30, "mydumper --help: {help}");
    for o in &listed {
        assert!(
            MYDUMPER_OPTIONS.iter().any(|(n, _)| n == o),
            "mydumper --help lists {o}: say in MYDUMPER_OPTIONS whether and how to run it"
        );
    }
    let src = every_type_source(srv, "mdopt");
    sql(
        srv,
        &src,
        "CREATE TABLE stamps (id INT PRIMARY KEY, t TIMESTAMP(6) NULL, d DATETIME); \
         SET time_zone = '+05:30'; INSERT INTO stamps VALUES (1, '2026-03-29 02:30:00.5', NOW()); \
         CREATE TABLE old_engine (a INT) ENGINE=MyISAM; INSERT INTO old_engine VALUES (1)",
    );
    let tmp = tempfile::tempdir().expect("tmp");
    let omit = tmp.path().join("omit.txt");
    std::fs::write(&omit, format!("{src}.stamps\n{src}.old_engine\n")).expect("omit");
    let omit = omit.display().to_string();
    let mut ran = 0;
    for (i, (name, how)) in MYDUMPER_OPTIONS.iter().enumerate() {
        let Ok(args) = how else { continue };
        let args: Vec<String> = args
            .iter()
            .map(|a| a.replace("{db}", &src).replace("{omit}", &omit))
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let dir = tmp.path().join(format!("d{i}"));
        mydumper(srv, &src, &dir, 3000, &args);
        let want = fresh_db(srv, "mdoref");
        let d = dir.display().to_string();
        let mine = myloader_output(srv, &dir, &src, &want);
        let got = format!("{want}_sf");
        let o = load(srv, &["-D", &got, &d]);
        assert_eq!(
            o.status.success(),
            mine.status.success(),
            "{name} {args:?}: myloader {}: {}\nsqlfleet: {}",
            mine.status,
            stderr(&mine),
            stderr(&o)
        );
        if o.status.success() {
            // (Small for some: --updated-since leaves out tables whose
            // Update_time the server does not know.)
            let (w, g) = rt()
                .block_on(async { (srv.fingerprint(&want).await, srv.fingerprint(&got).await) });
            assert_eq!(w, g, "{name} {args:?}: myloader's, then sqlfleet's");
        }
        ran += 1;
    }
    assert!(ran >= 20, "{ran} options run");
}

//! `sqlfleet load --into` (CSV/TSV) against a real server, compared with
//! one `LOAD DATA LOCAL` of the same file by the stock client.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{stderr, stdout};
use mysql_async::prelude::Queryable;
use sqlfleet_testkit::{server, TestServer};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt")
}

const TABLE: &str = "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, name VARCHAR(40), note TEXT, amount DECIMAL(12,2), seen DATETIME NULL)";

fn db_with_table(srv: &TestServer, prefix: &str) -> String {
    rt().block_on(async {
        let (db, t) = srv.fresh_db(prefix).await;
        let mut c = t.connect(Duration::from_secs(5)).await.expect("connect");
        c.query_drop(TABLE).await.expect("create");
        db
    })
}

fn sql(srv: &TestServer, q: &str) -> String {
    let o = Command::new("mariadb")
        .arg(format!("--defaults-file={}", srv.defaults_file().display()))
        .args(["--local-infile=1", "-N", "-B", "-e", q])
        .output()
        .expect("mariadb client");
    assert!(o.status.success(), "{q}: {}", stderr(&o));
    stdout(&o).trim().to_string()
}

fn checksum(srv: &TestServer, db: &str) -> String {
    sql(
        srv,
        &format!("SELECT COUNT(*) FROM `{db}`.t; CHECKSUM TABLE `{db}`.t"),
    )
    .replace(db, "DB")
}

/// `rows` records in CSV (quotes, commas, newlines, NULLs, unicode) or TSV.
fn write_file(path: &Path, rows: usize, csv: bool, header: bool) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
    if header {
        writeln!(
            f,
            "{}",
            if csv {
                "id,name,note,amount,seen"
            } else {
                "id\tname\tnote\tamount\tseen"
            }
        )
        .expect("w");
    }
    for i in 0..rows {
        let name = match i % 5 {
            0 => format!("plain{i}"),
            1 => format!("comma, {i}"),
            2 => format!("quote \"{i}\""),
            3 => format!("ünï {i} 😀"),
            _ => String::new(),
        };
        let note = if i % 7 == 0 {
            "line one\nline two".to_string()
        } else {
            format!("tab\there {i}")
        };
        let amount = if i % 11 == 0 {
            "\\N".to_string()
        } else {
            format!("{}.{:02}", i, i % 100)
        };
        let seen = if i % 3 == 0 {
            "\\N".to_string()
        } else {
            format!("2026-01-{:02} 10:{:02}:00", i % 28 + 1, i % 60)
        };
        if csv {
            let q = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\"\""));
            writeln!(f, "{i},{},{},{amount},{seen}", q(&name), q(&note)).expect("w");
        } else {
            let e = |s: &str| {
                s.replace('\\', "\\\\")
                    .replace('\t', "\\t")
                    .replace('\n', "\\n")
            };
            writeln!(f, "{i}\t{}\t{}\t{amount}\t{seen}", e(&name), e(&note)).expect("w");
        }
    }
}

fn load(srv: &TestServer, args: &[&str]) -> Output {
    common::load(&srv.defaults_file(), args)
}

fn stock_load(srv: &TestServer, db: &str, file: &Path, clause: &str) {
    sql(
        srv,
        &format!(
            "LOAD DATA LOCAL INFILE '{}' INTO TABLE `{db}`.t {clause}",
            file.display()
        ),
    );
}

#[test]
fn csv_and_tsv_match_one_load_data() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    for (csv, header) in [(true, true), (false, false)] {
        let file = dir.path().join(if csv { "d.csv" } else { "d.tsv" });
        write_file(&file, 20_000, csv, header);
        let want = db_with_table(srv, "want");
        let clause = if csv {
            "FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' ESCAPED BY '\\\\' IGNORE 1 LINES"
        } else {
            ""
        };
        stock_load(srv, &want, &file, clause);
        let got = db_with_table(srv, "got");
        let into = format!("{got}.t");
        let mut args = vec![
            "--into",
            &into,
            "--format",
            if csv { "csv" } else { "tsv" },
            "--threads",
            "4",
            "--chunk-bytes",
            "50000",
        ];
        if header {
            args.push("--header");
        }
        let f = file.to_str().expect("utf8");
        args.push(f);
        let o = load(srv, &args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(stdout(&o).contains("20000 rows"), "{}", stdout(&o));
        assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
        assert_eq!(checksum(srv, &got), checksum(srv, &want), "csv={csv}");
    }
}

/// A file's name says what it is, as to mysqlimport: `t.1.csv` and
/// `t.2.csv.gz` go into table `t` of the -D database, read as CSV, with no
/// --into or --format; names that disagree (two tables, two formats) or a
/// missing -D are refused before anything is loaded.
#[test]
fn files_named_csv_go_into_the_table_their_name_gives() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let whole = dir.path().join("whole.csv");
    write_file(&whole, 2_000, true, false);
    let want = db_with_table(srv, "want");
    let clause = "FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' ESCAPED BY '\\\\'";
    stock_load(srv, &want, &whole, clause);
    // The same records in two files of table t.
    let text = std::fs::read(&whole).expect("read");
    // Record 1000 starts a line of its own (a quoted newline never
    // precedes "1000,").
    let cut = text
        .windows(6)
        .position(|w| w == b"\n1000,")
        .expect("record 1000")
        + 1;
    let (one, two) = (dir.path().join("t.1.csv"), dir.path().join("t.2.csv.gz"));
    std::fs::write(&one, &text[..cut]).expect("write");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&two).expect("create"),
        flate2::Compression::fast(),
    );
    gz.write_all(&text[cut..]).expect("gz");
    gz.finish().expect("gz");
    let got = db_with_table(srv, "got");
    let (f1, f2) = (one.to_str().expect("utf8"), two.to_str().expect("utf8"));
    let refused = |args: &[&str], says: &str| {
        let o = load(srv, args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        // Named by its command, as the load's own messages are.
        assert!(stderr(&o).starts_with("sqlfleet load: "), "{}", stderr(&o));
        assert_eq!(sql(srv, &format!("SELECT COUNT(*) FROM `{got}`.t")), "0");
    };
    refused(&[f1], "give -D DB, or --into DB.TABLE");
    let tsv = dir.path().join("t.3.tsv");
    std::fs::write(&tsv, "").expect("write");
    refused(
        &["-D", &got, f1, tsv.to_str().expect("utf8")],
        "give --format",
    );
    let other = dir.path().join("u.csv");
    std::fs::write(&other, "").expect("write");
    refused(
        &["-D", &got, f1, other.to_str().expect("utf8")],
        "name 2 tables (t, u)",
    );
    let o = load(srv, &["-D", &got, "--threads", "2", f1, f2]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("2000 rows"), "{}", stdout(&o));
    assert_eq!(checksum(srv, &got), checksum(srv, &want));
}

/// Rows whose AUTO_INCREMENT or `DEFAULT NEXTVAL(...)` column the file
/// leaves out, or that fire a trigger, get their values in the order they
/// arrive: loaded in file order they match one LOAD DATA (chunks in
/// parallel gave the same rows other ids, silently).
#[test]
fn server_given_ids_and_triggers_match_one_load_data() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("v.tsv");
    let body: String = (0..20_000).map(|i| format!("{i}\tx{i}\n")).collect();
    std::fs::write(&file, body).expect("write");
    let f = file.to_str().expect("utf8");
    for (table, columns) in [
        ("CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v INT, w VARCHAR(20))", "(v, w)"),
        ("CREATE TABLE t (id BIGINT NOT NULL DEFAULT NEXTVAL(s) PRIMARY KEY, v INT, w VARCHAR(20))", "(v, w)"),
        ("CREATE TABLE t (v INT PRIMARY KEY, w VARCHAR(20))", ""),
    ] {
        let triggered = columns.is_empty();
        let make = |prefix: &str| {
            rt().block_on(async {
                let (db, t) = srv.fresh_db(prefix).await;
                let mut c = t.connect(Duration::from_secs(5)).await.expect("connect");
                c.query_drop("CREATE SEQUENCE s").await.expect("sequence");
                c.query_drop(table).await.expect("create");
                if triggered {
                    c.query_drop("CREATE TABLE log (n INT AUTO_INCREMENT PRIMARY KEY, v INT)")
                        .await
                        .expect("log");
                    c.query_drop("CREATE TRIGGER t_ai AFTER INSERT ON t FOR EACH ROW INSERT INTO log (v) VALUES (NEW.v)")
                        .await
                        .expect("trigger");
                }
                db
            })
        };
        let want = make("want");
        stock_load(srv, &want, &file, columns);
        let got = make("got");
        let into = format!("{got}.t");
        let mut args = vec!["--into", &into, "--format", "tsv", "--threads", "4", "--chunk-bytes", "20000"];
        if !triggered {
            args.extend(["--columns", "v,w"]);
        }
        args.push(f);
        let o = load(srv, &args);
        if table.contains("AUTO_INCREMENT") {
            // InnoDB gives a LOAD DATA's ids in blocks per statement: in
            // chunks they cannot be one LOAD DATA's. Refused, naming the
            // column and the way to load it as one statement.
            assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
            assert!(
                stderr(&o).contains("AUTO_INCREMENT column `id`") && stderr(&o).contains("--chunk-bytes"),
                "{}",
                stderr(&o)
            );
            assert_eq!(sql(srv, &format!("SELECT COUNT(*) FROM `{got}`.t")), "0");
            let big = "10000000";
            let pos = args.iter().position(|a| *a == "20000").expect("chunk bytes");
            args[pos] = big;
            let o = load(srv, &args);
            assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        } else {
            assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
            assert!(stdout(&o).contains("one chunk at a time in file order"), "{}", stdout(&o));
        }
        assert_eq!(checksum(srv, &got), checksum(srv, &want), "{table}");
        if triggered {
            let log = |db: &str| sql(srv, &format!("SELECT SUM(n * v) FROM `{db}`.log"));
            assert_eq!(log(&got), log(&want), "the trigger's rows");
        }
    }
}

/// A file that gives its AUTO_INCREMENT ids but leaves one row's to the
/// server (`\N`) is refused at that row's line when it is several LOAD
/// DATA statements; as one statement it matches one LOAD DATA.
#[test]
fn an_id_left_to_the_server_in_several_chunks_is_refused_at_its_line() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("ids.tsv");
    let body: String = (1..=20_000)
        .map(|i| {
            if i == 15_000 {
                "\\N\tnull id\n".to_string()
            } else {
                format!("{i}\tx{i}\n")
            }
        })
        .collect();
    std::fs::write(&file, body).expect("write");
    let f = file.to_str().expect("utf8");
    let make = |prefix: &str| {
        rt().block_on(async {
            let (db, t) = srv.fresh_db(prefix).await;
            let mut c = t.connect(Duration::from_secs(5)).await.expect("connect");
            c.query_drop("CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, w VARCHAR(20))")
                .await
                .expect("create");
            db
        })
    };
    let want = make("want");
    stock_load(srv, &want, &file, "");
    let got = make("got");
    let into = format!("{got}.t");
    let mut args = vec![
        "--into",
        &into,
        "--format",
        "tsv",
        "--threads",
        "4",
        "--chunk-bytes",
        "20000",
        f,
    ];
    let o = load(srv, &args);
    assert_ne!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("line 15000") && stderr(&o).contains("AUTO_INCREMENT column `id`"),
        "{}",
        stderr(&o)
    );
    let got = make("got");
    let into = format!("{got}.t");
    args[1] = &into;
    args[7] = "10000000";
    let o = load(srv, &args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(checksum(srv, &got), checksum(srv, &want));
}

#[test]
fn falls_back_to_inserts_without_local_infile() {
    static NO_LOCAL: std::sync::OnceLock<TestServer> = std::sync::OnceLock::new();
    let srv = NO_LOCAL.get_or_init(|| sqlfleet_testkit::server_with(&["local_infile=0"]));
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("d.csv");
    write_file(&file, 5_000, true, false);
    // The reference: server-side LOAD DATA (LOCAL is off on this server).
    let want = db_with_table(srv, "want");
    sql(srv, &format!("LOAD DATA INFILE '{}' INTO TABLE `{want}`.t FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"'", file.display()));
    let got = db_with_table(srv, "got");
    let into = format!("{got}.t");
    let o = load(
        srv,
        &[
            "--into",
            &into,
            "--format",
            "csv",
            "--chunk-bytes",
            "30000",
            file.to_str().expect("utf8"),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stderr(&o).matches("refuses LOAD DATA LOCAL").count(),
        1,
        "{}",
        stderr(&o)
    );
    assert_eq!(checksum(srv, &got), checksum(srv, &want));

    // The INSERTs give what LOAD DATA gives for a file in another set than
    // the connection's (sjis, `表` being 0x95 0x5C, into sjis, BLOB and
    // utf8mb4 columns) and for an empty field under EMPTY_STRING_IS_NULL
    // (this server is this test's alone). Before: ERROR 1366 for the sjis
    // file, and NULL where LOAD DATA gives ''.
    let sjis = dir.path().join("s.tsv");
    // (The BLOB's field is read byte by byte: its 0x5C is escaped.)
    std::fs::write(
        &sjis,
        b"1\t\x95\\\t\x95\\\\x\t\n2\t\t\x83\\\\\tz\\\\\n3\t\\N\t\t\x95\\\n",
    )
    .expect("write");
    let table =
        "(id INT, a VARCHAR(20) CHARACTER SET sjis, b BLOB, c VARCHAR(20)) DEFAULT CHARSET=utf8mb4";
    let rows = |db: &str| {
        sql(
            srv,
            &format!("SELECT id, a IS NULL, HEX(a), b IS NULL, HEX(b), c IS NULL, HEX(c) FROM `{db}`.s ORDER BY id"),
        )
    };
    let utf8 = dir.path().join("u.tsv");
    std::fs::write(&utf8, "1\tソ\t\t\n2\t\tx\tz\n3\t\\N\t\\N\t\n").expect("write");
    sql(
        srv,
        "SET GLOBAL sql_mode = CONCAT(@@global.sql_mode, ',EMPTY_STRING_IS_NULL')",
    );
    for (file, cs, has) in [(&sjis, "sjis", "955C"), (&utf8, "utf8mb4", "835C")] {
        let want = db_with_table(srv, "want_s");
        sql(srv, &format!("CREATE TABLE `{want}`.s {table}"));
        sql(srv, &format!("SET SESSION sql_mode = @@global.sql_mode; LOAD DATA INFILE '{}' INTO TABLE `{want}`.s CHARACTER SET {cs}", file.display()));
        let got = db_with_table(srv, "got_s");
        sql(srv, &format!("CREATE TABLE `{got}`.s {table}"));
        let into = format!("{got}.s");
        let o = load(
            srv,
            &[
                "--into",
                &into,
                "--character-set",
                cs,
                file.to_str().expect("utf8"),
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{cs}: {}", stderr(&o));
        assert!(rows(&want).contains(has), "{cs}: {}", rows(&want));
        assert_eq!(rows(&got), rows(&want), "{cs}");
    }
    sql(
        srv,
        "SET GLOBAL sql_mode = REPLACE(@@global.sql_mode, ',EMPTY_STRING_IS_NULL', '')",
    );
}

/// An account that may insert into the table but not read it (LOAD DATA
/// needs no more) loads a file: which columns are binary comes from
/// information_schema when the server refuses to describe the table to
/// it. Before that fallback, the load was refused at "reading the column
/// types" with SELECT denied.
#[test]
fn an_account_that_may_only_insert_loads_a_file() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let db = db_with_table(srv, "insonly");
    let user = format!("ins_{}", std::process::id());
    sql(
        srv,
        &format!(
            "CREATE USER '{user}'@'%' IDENTIFIED BY 'ins-pw'; CREATE USER '{user}'@'localhost' IDENTIFIED BY 'ins-pw'; \
             GRANT INSERT ON `{db}`.* TO '{user}'@'%'; GRANT INSERT ON `{db}`.* TO '{user}'@'localhost'; \
             GRANT ALL ON sqlfleet.* TO '{user}'@'%'; GRANT ALL ON sqlfleet.* TO '{user}'@'localhost'"
        ),
    );
    let p = dir.path().join("ins.tsv");
    write_file(&p, 50, false, false);
    let port = srv.sandbox.meta.primary().port.to_string();
    let o = common::sqlfleet()
        .arg("load")
        .args(["--no-defaults", "-h", "127.0.0.1", "-P", &port, "-u", &user])
        .args(["--into", &format!("{db}.t"), "--format", "tsv"])
        .arg(&p)
        .env("MYSQL_PWD", "ins-pw")
        .output()
        .expect("load");
    sql(
        srv,
        &format!("DROP USER '{user}'@'%'; DROP USER '{user}'@'localhost'"),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(sql(srv, &format!("SELECT COUNT(*) FROM `{db}`.t")), "50");
}

/// Chunks journaled by the loads of `file` (other tests load at the same
/// time: counting theirs killed this one before it had begun).
fn journal_chunks(srv: &TestServer, file: &str) -> i64 {
    rt().block_on(async {
        let mut c = srv.connect().await;
        let n: Option<i64> = c
            .exec_first(
                "SELECT COUNT(*) FROM sqlfleet.load_journal j JOIN sqlfleet.loads l USING (load_id) \
                 WHERE j.kind = 'chunk' AND l.source LIKE CONCAT(?, ' -> %')",
                (file,),
            )
            .await
            .unwrap_or(None);
        n.unwrap_or(0)
    })
}

/// Stopped by kill -9, Ctrl-C or SIGTERM once 5 chunks are journaled: a
/// signal exits 130 or 143 naming what committed; a rerun without
/// `--resume` is refused; `--resume` then gives one LOAD DATA's table.
#[test]
fn kill_9_or_a_signal_then_resume_loads_each_row_once() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("big.tsv");
    write_file(&file, 400_000, false, false);
    let want = db_with_table(srv, "kwant");
    stock_load(srv, &want, &file, "");
    let f = file.to_str().expect("utf8");
    for (how, sig) in [
        ("kill -9", libc::SIGKILL),
        ("Ctrl-C", libc::SIGINT),
        ("SIGTERM", libc::SIGTERM),
    ] {
        let got = db_with_table(srv, "kgot");
        let into = format!("{got}.t");
        let args = [
            "--into",
            into.as_str(),
            "--threads",
            "3",
            "--chunk-bytes",
            "200000",
            f,
        ];
        let before = journal_chunks(srv, f);
        let mut child = common::sqlfleet()
            .arg("load")
            .arg(format!("--defaults-file={}", srv.defaults_file().display()))
            .args(["--progress", "none"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        common::signal_when(&mut child, sig, before + 5, || journal_chunks(srv, f));
        let o = child.wait_with_output().expect("wait");
        if sig != libc::SIGKILL {
            assert_eq!(o.status.code(), Some(128 + sig), "{how}: {}", stderr(&o));
            assert!(
                stderr(&o).contains("committed and journaled; rerun with --resume"),
                "{how}: {}",
                stderr(&o)
            );
        }
        let o = load(srv, &args);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{how}: refuses without --resume: {}",
            stderr(&o)
        );
        let mut resume = args.to_vec();
        resume.insert(0, "--resume");
        let o = load(srv, &resume);
        assert_eq!(o.status.code(), Some(0), "{how}: {}", stderr(&o));
        assert!(
            stdout(&o).contains("skipped (resume)"),
            "{how}: {}",
            stdout(&o)
        );
        assert_eq!(checksum(srv, &got), checksum(srv, &want), "{how}");
    }
}

#[test]
fn bad_input_names_file_and_line() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let db = db_with_table(srv, "bad");
    let into = format!("{db}.t");
    let cases: Vec<(&str, &[u8], i32, &str)> = vec![
        (
            "ragged.csv",
            b"1,a,n,1,\\N\n2,b,n,2\n",
            3,
            "ragged.csv: line 2 (byte offset 11): 4 field(s) where the table takes 5",
        ),
        (
            "open.csv",
            b"1,a,n,1,\\N\n2,\"b,n,2,\\N\n",
            3,
            "open.csv: line 2 (byte offset 13): unterminated \"-quoted field",
        ),
        (
            "latin1.csv",
            b"1,a,n,1,\\N\n2,caf\xe9,n,2,\\N\n",
            3,
            "latin1.csv: line 2 (byte offset 16): invalid UTF-8",
        ),
        ("empty.csv", b"", 3, "empty.csv: no rows in it"),
    ];
    for (name, bytes, code, want) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).expect("write");
        let o = load(
            srv,
            &[
                "--into",
                &into,
                "--format",
                "csv",
                p.to_str().expect("utf8"),
            ],
        );
        assert_eq!(o.status.code(), Some(code), "{name}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(want),
            "{name}: wanted '{want}' in {}",
            stderr(&o)
        );
    }
    let p = dir.path().join("ok.csv");
    std::fs::write(&p, "1,a,n,1,\\N\n").expect("write");
    let o = load(
        srv,
        &[
            "--into",
            &format!("{db}.missing"),
            p.to_str().expect("utf8"),
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("does not exist"), "{}", stderr(&o));
    let o = load(
        srv,
        &[
            "--into",
            &into,
            "--columns",
            "id,nope",
            p.to_str().expect("utf8"),
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no column 'nope'"), "{}", stderr(&o));
    // A set of two- or four-byte characters: LOAD DATA cannot read such
    // files (its terminators are single bytes), so neither is a guess made.
    for wide in ["utf16", "UCS2", "utf16le", "utf32"] {
        let o = load(
            srv,
            &[
                "--into",
                &into,
                "--character-set",
                wide,
                p.to_str().expect("utf8"),
            ],
        );
        assert_eq!(o.status.code(), Some(1), "{wide}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(
                "LOAD DATA cannot read files in a character set of two- or four-byte characters"
            ),
            "{wide}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn server_warnings_name_the_line_and_strict_fails() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let p = dir.path().join("w.csv");
    let long = "x".repeat(60);
    std::fs::write(
        &p,
        format!("1,ok,n,1,\\N\n2,{long},n,2,\\N\n3,ok,n,3,\\N\n"),
    )
    .expect("write");
    let db = db_with_table(srv, "warn");
    let into = format!("{db}.t");
    let f = p.to_str().expect("utf8");
    // LOAD DATA LOCAL turns a too-long value into a warning: reported with its line.
    let o = load(srv, &["--into", &into, "--format", "csv", f]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "w.csv lines 1-3: line 2: Warning 1265: Data truncated for column 'name' at row 2"
        ),
        "{}",
        stderr(&o)
    );
    // --strict: the warning fails the chunk, nothing of it stays.
    let db = db_with_table(srv, "strict");
    let into = format!("{db}.t");
    let o = load(srv, &["--into", &into, "--format", "csv", "--strict", f]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("w.csv lines 1-3")
            && e.contains("--strict and the server warned: line 2: Warning 1265"),
        "{e}"
    );
    assert!(e.contains("--resume"), "{e}");
    assert_eq!(sql(srv, &format!("SELECT COUNT(*) FROM `{db}`.t")), "0");
}

/// The server's word is never lost: a TSV whose 1000 rows each put the
/// text NULL in an INT column loads with 1000 warnings (the first 20 shown,
/// the rest counted), and the same rows again are all skipped as
/// duplicates — neither summary says "no errors", and --json carries the
/// server's own counts (as mysqlimport's Records/Skipped/Warnings line).
#[test]
fn the_servers_warnings_and_skipped_rows_are_counted_not_hidden() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let p = dir.path().join("nulls.tsv");
    let text: String = (1..=1000).map(|i| format!("{i}\tNULL\n")).collect();
    std::fs::write(&p, text).expect("write");
    let (db, _) = rt().block_on(srv.fresh_db("counted"));
    sql(
        srv,
        &format!("CREATE TABLE `{db}`.t (id INT PRIMARY KEY, n INT)"),
    );
    let into = format!("{db}.t");
    let f = p.to_str().expect("utf8");
    let json = |o: &Output| -> serde_json::Value {
        let out = String::from_utf8_lossy(&o.stdout);
        let line = out
            .lines()
            .find(|l| l.contains("\"event\":\"summary\""))
            .unwrap_or_else(|| panic!("no summary: {out}"));
        serde_json::from_str(line).expect("json")
    };
    let o = load(srv, &["--into", &into, "--format", "tsv", f]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let e = stderr(&o) + &stdout(&o);
    assert!(
        e.contains("1000 warnings from the server (the first 20 shown, 980 more not shown")
            && !e.contains("no errors"),
        "{e}"
    );
    assert_eq!(e.matches("Warning 1366").count(), 20, "{e}");
    assert_eq!(
        sql(srv, &format!("SELECT SUM(n), COUNT(*) FROM `{db}`.t")),
        "0\t1000"
    );
    // Again, into the full table, with --json: every row skipped.
    let o = load(
        srv,
        &["--into", &into, "--format", "tsv", "--json", "--restart", f],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["server"]["records"], 1000, "{v}");
    assert_eq!(v["server"]["skipped"], 1000, "{v}");
    assert_eq!(v["rows"], 0, "{v}");
    assert!(v["warning_count"].as_u64().unwrap_or(0) >= 1000, "{v}");
    assert_eq!(v["warnings"].as_array().map(Vec::len), Some(20), "{v}");
    let o = load(srv, &["--into", &into, "--format", "tsv", "--restart", f]);
    let e = stderr(&o) + &stdout(&o);
    assert!(
        e.contains("the server skipped 1000 of the 1000 rows it read") && !e.contains("no errors"),
        "{e}"
    );
}

/// `path` with the byte at `at` (a digit of some id or amount) changed:
/// the same size and, for `at` past the first MiB, the same load id.
fn changed_copy(path: &Path, at: usize, to: &Path) {
    let mut b = std::fs::read(path).expect("read");
    let i = (at..b.len())
        .find(|&i| b[i].is_ascii_digit())
        .expect("a digit");
    b[i] = if b[i] == b'9' { b'8' } else { b[i] + 1 };
    std::fs::write(to, b).expect("write");
}

fn gzip(path: &Path) -> std::path::PathBuf {
    let to = path.with_extension("tsv.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&to).expect("create"),
        flate2::Compression::fast(),
    );
    gz.write_all(&std::fs::read(path).expect("read"))
        .expect("gz");
    gz.finish().expect("gz");
    to
}

/// "Already loaded" and `--resume` for CSV/TSV accept only the same
/// bytes: a file of the same size and first MiB (the same load id) with
/// a change in the middle or in its last chunk is refused before anything
/// runs, naming the chunk's byte offset, after a finished load and after
/// a cut-off one, plain or gzip (before: a finished load of the first
/// file made `--resume` of the second say "already loaded"); the same
/// file is still "already loaded", and `--restart` loads the other one.
#[test]
fn a_flat_file_is_already_loaded_only_for_the_same_bytes() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let first = dir.path().join("a.tsv");
    write_file(&first, 60_000, false, false);
    let size = std::fs::metadata(&first).expect("size").len() as usize;
    assert!(size > 3 << 20, "{size} bytes: past the first MiB");
    let middle = dir.path().join("middle.tsv");
    changed_copy(&first, size / 2, &middle);
    let last = dir.path().join("last.tsv");
    changed_copy(&first, size - 200, &last);
    for compressed in [false, true] {
        let (a, others) = if compressed {
            (gzip(&first), vec![gzip(&middle)])
        } else {
            (first.clone(), vec![middle.clone(), last.clone()])
        };
        let db = db_with_table(srv, "ident");
        let into = format!("{db}.t");
        let args = |f: &Path, extra: &[&str]| -> Vec<String> {
            let mut v: Vec<String> = ["--into", &into, "--chunk-bytes", "262144"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            v.extend(extra.iter().map(|s| s.to_string()));
            v.push(f.display().to_string());
            v
        };
        let run = |v: Vec<String>| {
            let r: Vec<&str> = v.iter().map(String::as_str).collect();
            load(srv, &r)
        };
        let o = run(args(&a, &[]));
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let loaded = checksum(srv, &db);
        // The same file: already loaded, checked.
        let o = run(args(&a, &["--resume"]));
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("already loaded completely"),
            "{}",
            stderr(&o)
        );
        for other in &others {
            let o = run(args(other, &["--resume"]));
            let e = stderr(&o);
            let same_size = std::fs::metadata(other).map(|m| m.len()).ok()
                == std::fs::metadata(&a).map(|m| m.len()).ok();
            if !same_size {
                // Compressed to another size: another load id, so another
                // load (never "already loaded").
                assert!(!e.contains("already loaded"), "{e}");
                continue;
            }
            assert_eq!(o.status.code(), Some(1), "{}: {e}", other.display());
            assert!(
                e.contains(
                    "not the file the earlier load of this name read: the chunk at byte offset "
                ) && e.contains("differs")
                    && e.contains("--restart"),
                "{e}"
            );
            assert_eq!(checksum(srv, &db), loaded, "nothing ran");
        }
    }
    // A cut-off load, then --resume with another file of the same id.
    let db = db_with_table(srv, "identcut");
    let into = format!("{db}.t");
    let f = first.display().to_string();
    let common_args = [
        "--into",
        into.as_str(),
        "--chunk-bytes",
        "262144",
        "--threads",
        "1",
    ];
    let before = journal_chunks(srv, &f);
    let mut child = common::sqlfleet()
        .arg("load")
        .arg(format!("--defaults-file={}", srv.defaults_file().display()))
        .args(["--progress", "none"])
        .args(common_args)
        .arg(&f)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    common::kill_9_when(&mut child, before + 8, || journal_chunks(srv, &f));
    let cut = checksum(srv, &db);
    // A change at 1.5 MiB: past the first MiB (the same load id), inside
    // what the killed run had committed (8 chunks of 256 KiB).
    let early = dir.path().join("early.tsv");
    changed_copy(&first, (3 << 20) / 2, &early);
    std::fs::copy(&early, &first).expect("swap in the changed file");
    let mut resume: Vec<&str> = vec!["--resume"];
    resume.extend(common_args);
    resume.push(&f);
    let o = load(srv, &resume);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("differs") && e.contains("refusing to resume"),
        "{e}"
    );
    assert_eq!(checksum(srv, &db), cut, "nothing ran");
}

/// Loads of one file started at once (an overlapping cron job, a retry
/// wrapper that does not wait) load its rows once: one loads them, each
/// other one is refused while it runs ("is running", exit 1) or finds the
/// file loaded (exit 0). Before, each read "nothing loaded yet" and loaded
/// every row, each saying done (2 loads: twice the rows, both exit 0).
#[test]
fn loads_of_one_file_started_at_once_load_its_rows_once() {
    let srv = server();
    let db = db_with_table(srv, "fparallel");
    sql(srv, &format!("CREATE TABLE `{db}`.u (id INT, name TEXT)"));
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("u.tsv");
    let rows = 200_000;
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&file).expect("create"));
        for i in 0..rows {
            writeln!(f, "{i}\tname {i}").expect("write");
        }
    }
    let into = format!("{db}.u");
    let path = file.display().to_string();
    let runs: Vec<std::thread::JoinHandle<Output>> = (0..3)
        .map(|_| {
            let (defaults, into, path) = (srv.defaults_file(), into.clone(), path.clone());
            std::thread::spawn(move || common::load(&defaults, &["--into", &into, &path]))
        })
        .collect();
    let mut loaded = 0;
    for r in runs {
        let o = r.join().expect("load");
        match o.status.code() {
            Some(0) => loaded += 1,
            Some(1) => assert!(stderr(&o).contains("is running"), "{}", stderr(&o)),
            other => panic!("exit {other:?}: {}", stderr(&o)),
        }
    }
    assert!(loaded >= 1, "no load succeeded");
    assert_eq!(
        sql(
            srv,
            &format!("SELECT COUNT(*), COUNT(DISTINCT id) FROM `{db}`.u")
        ),
        format!("{rows}\t{rows}"),
        "every row once"
    );
}

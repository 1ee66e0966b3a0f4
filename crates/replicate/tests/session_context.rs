//! A statement means on the target what it meant on the source: each
//! example of the outside check (native replication as the oracle, a
//! statement-based source) as a test — session settings of one source
//! session never reach the next, renames never land inside a literal under
//! NO_BACKSLASH_ESCAPES or in sjis, explicit_defaults_for_timestamp=0 is
//! carried, and XA transactions prepared and ended apart apply at their
//! commit (and nothing of a rollback).

mod common;

use common::*;
use mysql_async::prelude::Queryable;
use sqlfleet_replicate::gtid::GtidPos;
use sqlfleet_testkit::workload::exec;
use sqlfleet_testkit::TestServer;

/// A source session logged as statements, in `db` when named.
async fn statement_session(s: &TestServer, db: Option<&str>) -> mysql_async::Conn {
    let mut c = s.connect().await;
    c.query_drop("SET SESSION binlog_format = 'STATEMENT'")
        .await
        .expect("binlog_format");
    if let Some(db) = db {
        c.query_drop(format!("USE {db}")).await.expect("use");
    }
    c
}

/// A folder of the test's own that the server (under its own user) may
/// read a LOAD DATA INFILE's file from.
fn server_readable_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod the test's folder");
    dir
}

/// Runs `sql` (raw bytes: a statement may be in sjis) on one source session
/// logged as statements.
async fn session(s: &TestServer, sql: &[&[u8]]) {
    let mut c = statement_session(s, None).await;
    for q in sql {
        c.query_drop(*q)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", String::from_utf8_lossy(q)));
    }
    let _ = c.disconnect().await;
}

/// Ids from a multi-row INSERT, month names, a TRUNCATE's restart: each
/// depends on a setting the first session changed and the second did not.
/// On the code before, the second session ran with the first one's
/// increment and locale (ids 13 and 18 instead of 9 and 10, 'Montag').
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_source_session_s_settings_never_reach_the_next() {
    let s = source(0);
    exec(s, "DROP DATABASE IF EXISTS sc_leak").await;
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE sc_leak; CREATE TABLE sc_leak.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(40)); \
         CREATE TABLE sc_leak.u (id INT AUTO_INCREMENT PRIMARY KEY, v INT)",
    )
    .await;
    session(
        s,
        &[
            b"SET SESSION auto_increment_increment = 5, auto_increment_offset = 3, lc_time_names = 'de_DE', \
              sql_mode = 'NO_AUTO_VALUE_ON_ZERO', foreign_key_checks = 0",
            b"INSERT INTO sc_leak.t (v) VALUES ('a'), ('b')",
            b"INSERT INTO sc_leak.t (v) VALUES (DATE_FORMAT('2024-01-01', '%W %M'))",
            b"INSERT INTO sc_leak.u VALUES (0, 1)",
        ],
    )
    .await;
    session(
        s,
        &[
            b"INSERT INTO sc_leak.t (v) VALUES ('c'), ('d')",
            b"INSERT INTO sc_leak.t (v) VALUES (DATE_FORMAT('2024-01-01', '%W %M'))",
            b"TRUNCATE sc_leak.u",
            b"INSERT INTO sc_leak.u (v) VALUES (1), (2), (3)",
            b"INSERT INTO sc_leak.u VALUES (0, 4)",
        ],
    )
    .await;
    let summary = until_caught_up(&cfg_for("sc_leak", s, "sc_leak", "", &start), s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    assert_same(s, "sc_leak", "sc_leak").await;
}

/// `explicit_defaults_for_timestamp = 0` makes a TIMESTAMP column NOT NULL
/// DEFAULT current_timestamp() ON UPDATE ...; the next session's table is
/// made with the default (1) again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn explicit_defaults_for_timestamp_is_the_source_session_s() {
    let s = source(0);
    exec(s, "DROP DATABASE IF EXISTS sc_ts").await;
    let start = binlog_pos(s).await;
    exec(s, "CREATE DATABASE sc_ts").await;
    session(
        s,
        &[
            b"SET SESSION explicit_defaults_for_timestamp = 0",
            b"CREATE TABLE sc_ts.old_style (id INT PRIMARY KEY, ts TIMESTAMP)",
            b"INSERT INTO sc_ts.old_style (id) VALUES (1)",
        ],
    )
    .await;
    session(
        s,
        &[b"CREATE TABLE sc_ts.new_style (id INT PRIMARY KEY, ts TIMESTAMP)"],
    )
    .await;
    let summary = until_caught_up(&cfg_for("sc_ts", s, "sc_ts", "", &start), s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    assert_same(s, "sc_ts", "sc_ts").await;
}

/// A renamed database under NO_BACKSLASH_ESCAPES (`'C:\dir\'` is a whole
/// string there) and in sjis (0x95 0x5C is one character): the text that
/// looks like the database name inside the following literal stays as
/// written. The code before rewrote it to `` `sc_nbe_s1`.t ``.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn renames_never_land_inside_a_literal_in_any_session_dialect() {
    let s = source(1);
    exec(s, "DROP DATABASE IF EXISTS sc_nbe").await;
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE sc_nbe; CREATE TABLE sc_nbe.t (id INT PRIMARY KEY, s VARCHAR(60)) CHARACTER SET utf8mb4",
    )
    .await;
    session(
        s,
        &[
            b"SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'",
            b"INSERT INTO sc_nbe.t VALUES (1, 'C:\\dir\\'), (2, ' sc_nbe.t.s2 1')",
            b"SET SESSION sql_mode = 'ANSI_QUOTES'",
            b"INSERT INTO \"sc_nbe\".\"t\" VALUES (3, ' sc_nbe.t 3')",
        ],
    )
    .await;
    session(
        s,
        &[
            b"SET NAMES sjis",
            b"INSERT INTO sc_nbe.t VALUES (4, '\x95\x5c'), (5, ' sc_nbe.t 5')",
        ],
    )
    .await;
    let cfg = cfg_for("sc_nbe", s, "sc_nbe", "sc_nbe = \"sc_nbe_s1\"", &start);
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    assert_same(s, "sc_nbe", "sc_nbe_s1").await;
    let mut c = target().connect().await;
    let v: Option<String> = c
        .query_first("SELECT s FROM sc_nbe_s1.t WHERE id = 2")
        .await
        .expect("row");
    assert_eq!(v.as_deref(), Some(" sc_nbe.t.s2 1"));
    let _ = c.disconnect().await;
}

/// Every character set the server takes from a client, as a source
/// session's `SET NAMES` under STATEMENT logging, with a renamed database:
/// a literal of characters in that set (the server's own conversion of
/// accented, Cyrillic, Greek, CJK and kana text, whose second bytes are
/// `\\` in some sets; what a set lacks becomes `?` on both sides), then the
/// database's name inside a
/// literal, and a name-like text in a comment. The copy must equal the
/// source in each, and the literal's name stay as written. The sets come
/// from the server's list, not from the ones a test happened to need.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_client_character_set_the_server_takes_replicates_as_written() {
    let s = source(1);
    exec(s, "DROP DATABASE IF EXISTS sc_allcs").await;
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE sc_allcs; CREATE TABLE sc_allcs.t \
         (id INT PRIMARY KEY, cs VARCHAR(40), v VARCHAR(200)) CHARACTER SET utf8mb4",
    )
    .await;
    let mut c = s.connect().await;
    let sets: Vec<String> = c
        .query(
            "SELECT CHARACTER_SET_NAME FROM information_schema.CHARACTER_SETS \
             WHERE CHARACTER_SET_NAME NOT IN ('ucs2', 'utf16', 'utf16le', 'utf32') ORDER BY 1",
        )
        .await
        .expect("character sets");
    assert!(sets.len() > 30, "{sets:?}");
    // No quote or backslash of its own: a set's conversion of one is not
    // always an escape (sjis has no ASCII backslash; the server's QUOTE()
    // then escapes with 0x815F). What is probed are trail bytes: each
    // literal ends with a character whose second byte is `\\` in some set
    // (表 0x95 0x5C and ソ 0x83 0x5C in sjis, 許 0xB3 0x5C and 功 0xA5 0x5C
    // in big5), right before its closing quote, where a lexer that took
    // the byte for an escape would run the literal on into the next row.
    let text = "caf\u{e9} \u{416}\u{436} \u{3a9} \u{8868}\u{793a} \u{30bd} \u{4e2d} ";
    let ends = ["\u{8868}", "\u{30bd}", "\u{8a31}", "\u{529f}"];
    for (i, cs) in sets.iter().enumerate() {
        let mut insert = b"INSERT INTO sc_allcs.t VALUES ".to_vec();
        for (k, end) in ends.iter().enumerate() {
            // The text in `cs`, as the server converts it; given in hex,
            // so that the bytes are `cs`'s, not converted back.
            let hex: String = c
                .exec_first(
                    format!("SELECT HEX(CONVERT(? USING {cs}))"),
                    (format!("{text}{end}"),),
                )
                .await
                .expect("convert")
                .unwrap_or_default();
            let lit: Vec<u8> = (0..hex.len())
                .step_by(2)
                .filter_map(|x| u8::from_str_radix(&hex[x..x + 2], 16).ok())
                .collect();
            insert.extend_from_slice(format!("({}, '{cs}', '", i * 10 + k).as_bytes());
            insert.extend_from_slice(&lit);
            insert.extend_from_slice(b"'), ");
        }
        insert.extend_from_slice(
            format!(
                "({}, '{cs}', ' sc_allcs.t {i}') /* sc_allcs.t */",
                i * 10 + 9
            )
            .as_bytes(),
        );
        let names = format!("SET NAMES {cs}");
        session(s, &[names.as_bytes(), &insert]).await;
    }
    let _ = c.disconnect().await;
    let cfg = cfg_for(
        "sc_allcs",
        s,
        "sc_allcs",
        "sc_allcs = \"sc_allcs_r\"",
        &start,
    );
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    assert_same(s, "sc_allcs", "sc_allcs_r").await;
    let mut t = target().connect().await;
    let kept: Vec<String> = t
        .query("SELECT v FROM sc_allcs_r.t WHERE id % 10 = 9 ORDER BY id")
        .await
        .expect("rows");
    let _ = t.disconnect().await;
    assert_eq!(kept.len(), sets.len());
    for (i, v) in kept.iter().enumerate() {
        assert_eq!(
            v,
            &format!(" sc_allcs.t {i}"),
            "{}: the name in a literal",
            sets[i]
        );
    }
}

/// A system-versioned table (and one partitioned by SYSTEM_TIME), written
/// by row, by statement and by mixed sessions: the copy has the source's
/// current rows and as many history rows, and no stream stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn system_versioned_tables_keep_their_current_and_history_rows() {
    let s = source(1);
    exec(s, "DROP DATABASE IF EXISTS sc_ver").await;
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE sc_ver; \
         CREATE TABLE sc_ver.t (id INT PRIMARY KEY, v INT) WITH SYSTEM VERSIONING; \
         CREATE TABLE sc_ver.p (id INT PRIMARY KEY, v INT) WITH SYSTEM VERSIONING \
           PARTITION BY SYSTEM_TIME (PARTITION p_hist HISTORY, PARTITION p_cur CURRENT)",
    )
    .await;
    for format in ["ROW", "STATEMENT", "MIXED"] {
        let set = format!("SET SESSION binlog_format = '{format}'");
        let base = match format {
            "ROW" => 0,
            "STATEMENT" => 100,
            _ => 200,
        };
        let stmts: Vec<String> = vec![
            set,
            format!(
                "INSERT INTO sc_ver.t VALUES ({}, 1), ({}, 2)",
                base + 1,
                base + 2
            ),
            format!("UPDATE sc_ver.t SET v = v + 10 WHERE id = {}", base + 1),
            format!("DELETE FROM sc_ver.t WHERE id = {}", base + 2),
            format!("INSERT INTO sc_ver.p VALUES ({}, 1)", base + 1),
            format!("UPDATE sc_ver.p SET v = 5 WHERE id = {}", base + 1),
        ];
        let refs: Vec<&[u8]> = stmts.iter().map(|q| q.as_bytes()).collect();
        session(s, &refs).await;
    }
    let cfg = cfg_for("sc_ver", s, "sc_ver", "", &start);
    let summary = until_caught_up(&cfg, s).await;
    let counts = |srv: &'static sqlfleet_testkit::TestServer| async move {
        let mut c = srv.connect().await;
        let mut out = Vec::new();
        for q in [
            "SELECT COUNT(*), SUM(v) FROM sc_ver.t",
            "SELECT COUNT(*), SUM(v) FROM sc_ver.t FOR SYSTEM_TIME ALL",
            "SELECT COUNT(*), SUM(v) FROM sc_ver.p",
            "SELECT COUNT(*), SUM(v) FROM sc_ver.p FOR SYSTEM_TIME ALL",
        ] {
            let r: Option<(i64, Option<i64>)> = c.query_first(q).await.expect(q);
            out.push(format!("{q}: {r:?}"));
        }
        let _ = c.disconnect().await;
        out
    };
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    assert_eq!(counts(target()).await, counts(s).await);
}

/// A NULL user variable written into columns of the types MariaDB added
/// (UUID, INET6, INET4) and the classic ones, and geometry variables,
/// logged as statements: the copy is the source's. (A native MariaDB
/// 10.11 replica reads the NULL as a DECIMAL variable and stops: "Cannot
/// cast 'decimal' as 'uuid'".)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_null_user_variable_lands_in_any_column_type() {
    let s = source(1);
    exec(s, "DROP DATABASE IF EXISTS sc_nullvar").await;
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE sc_nullvar; CREATE TABLE sc_nullvar.t (id INT PRIMARY KEY, \
         u UUID, i6 INET6, i4 INET4, d DECIMAL(10,2), j JSON, p POINT, b BLOB, e ENUM('a','b'))",
    )
    .await;
    session(
        s,
        &[
            b"USE sc_nullvar",
            b"SET @v = NULL",
            b"INSERT INTO t VALUES (1, @v, @v, @v, @v, @v, @v, @v, @v)",
            b"SET @v = 'a'",
            b"INSERT INTO t (id, e) VALUES (2, @v)",
            b"SET @v = NULL",
            b"UPDATE t SET e = @v WHERE id = 2",
            // A geometry variable: MariaDB logs its data type's name after
            // the value (the binlog library refused the event: the stream
            // stopped where native replication goes on).
            b"SET @v = ST_GeomFromText('POINT(-764 918)')",
            b"INSERT INTO t (id, p) VALUES (3, @v)",
            b"SET @v = POINT(1, 2)",
            b"UPDATE t SET p = @v, b = ST_AsText(@v) WHERE id = 2",
        ],
    )
    .await;
    let cfg = cfg_for("sc_nullvar", s, "sc_nullvar", "", &start);
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    assert_same(s, "sc_nullvar", "sc_nullvar").await;
}

/// Source sessions whose connection collation is one whose text is not
/// ASCII-based (ucs2, utf16, utf16le, utf32), logged as statements, and
/// transactions after them on the same target connection: all applied,
/// the copy the source's. Before, the position guard after such a
/// statement did not parse (ERROR 1407 "Bad SQLSTATE: ''") and the
/// stream stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn statements_after_a_session_in_a_wide_connection_collation_apply() {
    let s = source(1);
    exec(s, "DROP DATABASE IF EXISTS sc_wide").await;
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE sc_wide; \
         CREATE TABLE sc_wide.t (id INT PRIMARY KEY, v VARCHAR(40)) ENGINE=InnoDB",
    )
    .await;
    for (i, coll) in [
        "ucs2_general_ci",
        "utf16_general_ci",
        "utf16le_general_ci",
        "utf32_unicode_ci",
    ]
    .iter()
    .enumerate()
    {
        let set = format!("SET SESSION collation_connection = {coll}");
        let insert = format!("INSERT INTO sc_wide.t VALUES ({i}, CONCAT('w', '{coll}'))");
        session(
            s,
            &[
                set.as_bytes(),
                insert.as_bytes(),
                b"UPDATE sc_wide.t SET v = CONCAT(v, '+') WHERE id < 2",
            ],
        )
        .await;
        // Rows after it (a BINLOG statement on that connection), and a
        // statement in the default collation.
        let mut c = s.connect().await;
        c.query_drop(format!(
            "SET SESSION binlog_format = 'ROW'; INSERT INTO sc_wide.t VALUES ({}, 'après {coll}')",
            100 + i
        ))
        .await
        .expect("rows");
        let _ = c.disconnect().await;
        exec(
            s,
            &format!("INSERT INTO sc_wide.t VALUES ({}, 'after')", 200 + i),
        )
        .await;
    }
    // One transaction per target commit: each chunk's guard is parsed on
    // the connection the chunk before it left.
    let cfg = sqlfleet_replicate::config::parse(&format!(
        "[target]\ndsn = \"{}\"\n[apply]\nbatch = 1\n[[source]]\nname = \"sc_wide\"\ndsn = \"{}\"\ninclude = [\"sc_wide\"]\nstart = \"gtid:{start}\"\n",
        dsn(target()),
        dsn(s)
    ))
    .expect("config");
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    assert_same(s, "sc_wide", "sc_wide").await;
}

/// Runs `sql` on a source session of its own (logged as statements when
/// `statements`) and leaves: a branch it prepared stays prepared, for
/// any session to end.
async fn prepare_on_own_session(s: &TestServer, statements: bool, sql: &str) {
    let mut c = if statements {
        statement_session(s, None).await
    } else {
        s.connect().await
    };
    c.query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let _ = c.disconnect().await;
}

/// XA transactions as MariaDB logs them (10.5+): XA PREPARE as a group of
/// its own, its XA COMMIT or ROLLBACK later as another, other sessions'
/// commits between, ended from another session. Rows and statements,
/// an id with a branch qualifier and a format id, one across two
/// databases, one committed in ONE PHASE, one rolled back, and one still
/// prepared when the run ends: the copy is the source's committed data
/// at each point, no stream stops, and the branch left prepared is
/// applied by the next run once the source commits it (the floor stayed
/// before its prepare). On the code before, the XA database's stream
/// stopped ("cannot apply it exactly yet").
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn xa_transactions_apply_at_their_commit_and_nothing_of_a_rollback() {
    let s = source(2);
    exec(
        s,
        "DROP DATABASE IF EXISTS sc_xa; DROP DATABASE IF EXISTS sc_xa_ok",
    )
    .await;
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE sc_xa; CREATE TABLE sc_xa.t (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB; \
         CREATE DATABASE sc_xa_ok; CREATE TABLE sc_xa_ok.t (id INT PRIMARY KEY) ENGINE=InnoDB; \
         INSERT INTO sc_xa.t VALUES (100, 'before'); INSERT INTO sc_xa_ok.t VALUES (1)",
    )
    .await;
    prepare_on_own_session(
        s,
        false,
        "XA START 'a1'; INSERT INTO sc_xa.t VALUES (1, 'rows'), (2, 'rows'); \
         UPDATE sc_xa.t SET v = 'rows too' WHERE id = 100; XA END 'a1'; XA PREPARE 'a1'",
    )
    .await;
    exec(
        s,
        "INSERT INTO sc_xa.t VALUES (3, 'between'); INSERT INTO sc_xa_ok.t VALUES (2)",
    )
    .await;
    prepare_on_own_session(
        s,
        true,
        "XA START 'b2', 'q', 7; INSERT INTO sc_xa.t VALUES (4, 'rolled back'); \
         XA END 'b2', 'q', 7; XA PREPARE 'b2', 'q', 7",
    )
    .await;
    prepare_on_own_session(
        s,
        true,
        "XA START X'00ff', X'', 3; INSERT INTO sc_xa.t VALUES (5, 'statements'); \
         UPDATE sc_xa.t SET v = CONCAT(v, '+') WHERE id = 3; INSERT INTO sc_xa_ok.t VALUES (3); \
         XA END X'00ff', X'', 3; XA PREPARE X'00ff', X'', 3",
    )
    .await;
    exec(
        s,
        "XA COMMIT 'a1'; XA ROLLBACK 'b2', 'q', 7; XA COMMIT X'00ff', X'', 3; \
         XA START 'd4'; INSERT INTO sc_xa.t VALUES (6, 'one phase'); XA END 'd4'; XA COMMIT 'd4' ONE PHASE",
    )
    .await;
    prepare_on_own_session(
        s,
        false,
        "XA START 'e5'; INSERT INTO sc_xa.t VALUES (7, 'later'); XA END 'e5'; XA PREPARE 'e5'",
    )
    .await;
    exec(s, "INSERT INTO sc_xa_ok.t VALUES (4)").await;
    let cfg = cfg_for("sc_xa", s, "sc_xa*", "", &start);
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    assert_eq!(summary.sources[0].xa_held, 1, "e5 is held: {summary:?}");
    assert_same(s, "sc_xa_ok", "sc_xa_ok").await;
    assert_same(s, "sc_xa", "sc_xa").await;
    let ids = |srv: &'static TestServer| async move {
        let mut c = srv.connect().await;
        let ids: Vec<(i32, String)> = c
            .query("SELECT id, v FROM sc_xa.t ORDER BY id")
            .await
            .expect("rows");
        let _ = c.disconnect().await;
        ids
    };
    let want: Vec<(i32, String)> = [
        (1, "rows"),
        (2, "rows"),
        (3, "between+"),
        (5, "statements"),
        (6, "one phase"),
        (100, "rows too"),
    ]
    .iter()
    .map(|(i, v)| (*i, v.to_string()))
    .collect();
    assert_eq!(ids(target()).await, want, "committed branches only");
    let floor_now = floor("sc_xa").await;
    // The source commits the branch left prepared: the next run reads
    // it again from the floor, before its prepare.
    exec(s, "XA COMMIT 'e5'; INSERT INTO sc_xa_ok.t VALUES (5)").await;
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    assert_eq!(summary.sources[0].xa_held, 0, "{summary:?}");
    assert_same(s, "sc_xa", "sc_xa").await;
    assert_same(s, "sc_xa_ok", "sc_xa_ok").await;
    assert!(
        ids(target()).await.contains(&(7, "later".to_string())),
        "the branch committed later is applied"
    );
    assert_ne!(floor("sc_xa").await, floor_now, "the floor passed it");
    for st in streams(&cfg, s).await {
        assert_ne!(st.state, "stopped", "{st:?}");
    }
}

/// An XA COMMIT whose XA PREPARE is before where the source's reading
/// starts (replication begun while a branch was prepared): its changes
/// were never read, so the source stops there, named, rather than pass
/// the commit as if it were empty; the run ends as "stopped", not failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_xa_commit_whose_prepare_was_never_read_stops_the_source() {
    let s = source(2);
    // (Named outside `sc_xa*`: the XA test beside it on this source
    // reads those databases.)
    exec(s, "DROP DATABASE IF EXISTS xacut_db").await;
    exec(
        s,
        "CREATE DATABASE xacut_db; CREATE TABLE xacut_db.t (id INT PRIMARY KEY) ENGINE=InnoDB",
    )
    .await;
    let mut t = target().connect().await;
    t.query_drop(
        "DROP DATABASE IF EXISTS xacut_db; CREATE DATABASE xacut_db; \
         CREATE TABLE xacut_db.t (id INT PRIMARY KEY) ENGINE=InnoDB",
    )
    .await
    .expect("target copy");
    let _ = t.disconnect().await;
    prepare_on_own_session(
        s,
        false,
        "XA START 'cut'; INSERT INTO xacut_db.t VALUES (1); XA END 'cut'; XA PREPARE 'cut'",
    )
    .await;
    let start = binlog_pos(s).await;
    exec(s, "XA COMMIT 'cut'").await;
    let cfg = cfg_for("xacut_db", s, "xacut_db", "", &start);
    let summary = until_caught_up(&cfg, s).await;
    assert!(summary.stopped_streams >= 1, "{summary:?}");
    let why = summary.sources[0].last_error.clone().unwrap_or_default()
        + &streams(&cfg, s)
            .await
            .iter()
            .filter_map(|x| x.error.clone())
            .collect::<String>();
    assert!(
        why.contains("XA COMMIT of X'637574',X'',1") && why.contains("never read"),
        "{why}"
    );
}

/// `USE other; INSERT INTO app.t ...` with `other` excluded: every table
/// is qualified, so only the replicated database is written — applied as
/// native replication applies it (the code before refused it as writing
/// an excluded database and stopped the stream), and the excluded
/// database is never made on the target.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_statement_writing_only_replicated_databases_applies_under_any_default() {
    let s = source(0);
    exec(
        s,
        "DROP DATABASE IF EXISTS sc_dd; DROP DATABASE IF EXISTS sc_dd_other",
    )
    .await;
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE sc_dd; CREATE TABLE sc_dd.t (id INT PRIMARY KEY, v VARCHAR(40)); \
         CREATE DATABASE sc_dd_other; CREATE TABLE sc_dd_other.t (id INT PRIMARY KEY)",
    )
    .await;
    session(
        s,
        &[
            b"USE sc_dd",
            b"INSERT INTO t VALUES (1, 'own default')",
            b"USE sc_dd_other",
            b"INSERT INTO sc_dd.t VALUES (2, 'from another default')",
            b"INSERT INTO sc_dd.t SELECT id + 10, CONCAT(v, '+') FROM sc_dd.t",
            b"UPDATE sc_dd.t SET v = UPPER(v) WHERE id = 11",
            b"INSERT INTO sc_dd_other.t VALUES (1)",
            b"DELETE FROM sc_dd.t WHERE id = 12",
        ],
    )
    .await;
    let cfg = cfg_for("sc_dd", s, "sc_dd", "sc_dd = \"sc_dd_r\"", &start);
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    assert_same(s, "sc_dd", "sc_dd_r").await;
    let mut c = target().connect().await;
    let other: Option<String> = c
        .query_first(
            "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'sc_dd_other'",
        )
        .await
        .expect("schemata");
    assert_eq!(other, None, "the excluded database is never made");
    let _ = c.disconnect().await;
}

/// Temporary tables in a statement-based binlog, as an ETL job uses them:
/// two source sessions each with their own `tmp` at the same time, a base
/// table also named `tmp` that a third session reads, INSERT ... SELECT
/// and a multi-table UPDATE from them, an explicit DROP and the server's
/// own at a session's end. Each source session's statements run in a
/// target session of their own: the copy is the source's (the code before
/// stopped the stream: "a temporary table in a statement-based binlog").
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn temporary_tables_of_concurrent_source_sessions_apply_exactly() {
    let s = source(1);
    exec(s, "DROP DATABASE IF EXISTS sc_tmp").await;
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE sc_tmp; CREATE TABLE sc_tmp.t (id INT PRIMARY KEY, v VARCHAR(20)); \
         CREATE TABLE sc_tmp.tmp (id INT, v VARCHAR(20)); INSERT INTO sc_tmp.tmp VALUES (500, 'base')",
    )
    .await;
    let mut k = Vec::new();
    for _ in 0..3 {
        k.push(statement_session(s, Some("sc_tmp")).await);
    }
    for (i, q) in [
        (0, "CREATE TEMPORARY TABLE tmp (id INT, v VARCHAR(20))"),
        (1, "CREATE TEMPORARY TABLE tmp (id INT, v VARCHAR(20))"),
        (0, "INSERT INTO tmp VALUES (1, 'a'), (2, 'b')"),
        (1, "INSERT INTO tmp VALUES (10, 'x')"),
        (2, "INSERT INTO t SELECT id, v FROM tmp"),
        (0, "INSERT INTO t SELECT id, v FROM tmp"),
        (1, "INSERT INTO t SELECT id, CONCAT(v, '-b') FROM tmp"),
        (1, "DROP TEMPORARY TABLE tmp"),
        (1, "INSERT INTO t SELECT id + 1000, v FROM tmp"),
        (0, "UPDATE t JOIN tmp USING (id) SET t.v = CONCAT(t.v, '+')"),
        (
            0,
            "CREATE TEMPORARY TABLE tmp2 AS SELECT id FROM t WHERE id < 100",
        ),
        (
            0,
            "DELETE FROM t WHERE id IN (SELECT id FROM tmp2 WHERE id = 2)",
        ),
        // DDL from a session's temporary table, then ordinary writes to
        // what it made (workers learn its engine).
        (0, "CREATE TABLE made ENGINE=MyISAM SELECT id, v FROM tmp"),
        (2, "INSERT INTO made VALUES (3, 'c')"),
        (2, "UPDATE made SET v = CONCAT(v, '!') WHERE id < 3"),
    ] {
        k[i].query_drop(q)
            .await
            .unwrap_or_else(|e| panic!("{q}: {e}"));
    }
    for c in k {
        let _ = c.disconnect().await;
    }
    let cfg = cfg_for("sc_tmp", s, "sc_tmp", "", &start);
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    assert_same(s, "sc_tmp", "sc_tmp").await;
    let mut t = target().connect().await;
    let rows: Vec<(i32, String)> = t
        .query("SELECT id, v FROM sc_tmp.t ORDER BY id")
        .await
        .expect("rows");
    let _ = t.disconnect().await;
    assert_eq!(
        rows,
        vec![
            (1, "a+".to_string()),
            (10, "x-b".to_string()),
            (500, "base".to_string()),
            (1500, "base".to_string())
        ]
    );
}

/// Database `db` made anew on `s` with a table `t` and a base table
/// `tmp` (row 7), and a STATEMENT session in it holding a temporary `tmp`
/// (row 1) that shadows the base one; the position before it all.
async fn holding_a_temporary_table(s: &TestServer, db: &str) -> (GtidPos, mysql_async::Conn) {
    exec(s, &format!("DROP DATABASE IF EXISTS {db}")).await;
    let start = binlog_pos(s).await;
    exec(
        s,
        &format!(
            "CREATE DATABASE {db}; CREATE TABLE {db}.t (id INT PRIMARY KEY); \
             CREATE TABLE {db}.tmp (id INT); INSERT INTO {db}.tmp VALUES (7)"
        ),
    )
    .await;
    let mut a = statement_session(s, Some(db)).await;
    for q in [
        "CREATE TEMPORARY TABLE tmp (id INT)",
        "INSERT INTO tmp VALUES (1)",
    ] {
        a.query_drop(q).await.expect(q);
    }
    (start, a)
}

/// A source session's temporary table outlives a run of sqlfleet (the
/// target connection that held it is gone): its later use stops the
/// stream with the reason and the table's name, never running against
/// the base table of the same name.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_temporary_table_lost_with_a_restart_stops_its_stream() {
    // (Not source 2: the XA test there replicates every `sc_*`.)
    let s = source(1);
    let (start, mut a) = holding_a_temporary_table(s, "sc_tlost").await;
    let cfg = cfg_for("sc_tlost", s, "sc_tlost", "", &start);
    let first = until_caught_up(&cfg, s).await;
    assert_eq!(first.stopped_streams, 0, "{first:?}");
    a.query_drop("INSERT INTO t SELECT id FROM tmp")
        .await
        .expect("use");
    let _ = a.disconnect().await;
    let second = until_caught_up(&cfg, s).await;
    assert_eq!(second.stopped_streams, 1, "{second:?}");
    let x = stream_status(&cfg, s, "sc_tlost").await;
    assert_eq!(x.state, "stopped", "{x:?}");
    assert!(
        x.error.as_deref().unwrap_or("").contains("sc_tlost.tmp"),
        "{x:?}"
    );
    let mut t = target().connect().await;
    let n: Option<i64> = t
        .query_first("SELECT COUNT(*) FROM sc_tlost.t")
        .await
        .expect("count");
    let _ = t.disconnect().await;
    assert_eq!(n, Some(0), "the base table's row never reached t");
}

/// A stop that comes while a source session holds a temporary table on the
/// target applies on until the session drops it, then stops: the session's
/// later use of the table is applied (a stop that came at once lost the
/// table, and the next run stopped the stream there — seen in the
/// differential test when its half-way stop fell between CREATE and DROP
/// TEMPORARY TABLE).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stop_waits_for_a_source_session_to_drop_its_temporary_tables() {
    let s = source(1);
    let (start, mut a) = holding_a_temporary_table(s, "sc_tstop").await;
    let cfg = cfg_for("sc_tstop", s, "sc_tstop", "", &start);
    let (tx, rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(run_one(cfg.clone(), target(), s, false, rx));
    wait_caught_up("sc_tstop", s, std::time::Duration::from_secs(60)).await;
    tx.send(true).expect("stop");
    // The run goes on while the session holds its table.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert!(
        !run.is_finished(),
        "the run stopped with a temporary table open"
    );
    for q in [
        "INSERT INTO t SELECT id FROM tmp",
        "DROP TEMPORARY TABLE tmp",
    ] {
        a.query_drop(q).await.expect(q);
    }
    let _ = a.disconnect().await;
    let summary = tokio::time::timeout(std::time::Duration::from_secs(20), run)
        .await
        .expect("the run stops once the table is dropped")
        .expect("task")
        .expect("run");
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    let second = until_caught_up(&cfg, s).await;
    assert_eq!(second.stopped_streams, 0, "{second:?}");
    let mut t = target().connect().await;
    let ids: Vec<i32> = t.query("SELECT id FROM sc_tstop.t").await.expect("rows");
    let _ = t.disconnect().await;
    assert_eq!(
        ids,
        vec![1],
        "the temporary table's row, not the base table's"
    );
}

/// The statement reader's character-set table against the server's own
/// list: every collation the server has maps to the class of its character
/// set, and no other character set the server takes as a client's
/// (`SET character_set_client` succeeds) has a two-byte character whose
/// second byte is `\` or a backquote — the server decides which byte pairs
/// are one character.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_multibyte_table_is_the_servers() {
    // 11.4's list holds 10.11's and more (MySQL 8.0's utf8mb4_0900 names).
    let newer = newer(1).connect().await;
    the_multibyte_table_is_this_servers(newer, 1286).await;
    the_multibyte_table_is_this_servers(target().connect().await, 1242).await;
}

/// Every collation id server `c` lists (the UCA 14.0 ones only in
/// COLLATION_CHARACTER_SET_APPLICABILITY), at least `at_least` of them.
async fn the_multibyte_table_is_this_servers(mut c: mysql_async::Conn, at_least: usize) {
    use sqlfleet_dump::lex::Multibyte;
    let rows: Vec<(u32, String, u32)> = c
        .query(
            "SELECT co.ID, co.CHARACTER_SET_NAME, cs.MAXLEN \
             FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY co \
             JOIN information_schema.CHARACTER_SETS cs USING (CHARACTER_SET_NAME) WHERE co.ID IS NOT NULL",
        )
        .await
        .expect("collations");
    assert!(rows.len() >= at_least, "{} collations", rows.len());
    let mut safe_multibyte = std::collections::BTreeSet::new();
    for (id, cs, maxlen) in &rows {
        let want = match cs.as_str() {
            "big5" => Multibyte::Big5,
            "gbk" => Multibyte::Gbk,
            "gb18030" => Multibyte::Gb18030,
            "sjis" | "cp932" => Multibyte::Sjis,
            _ => Multibyte::AsciiSafe,
        };
        let id = u16::try_from(*id).expect("a collation id fits 16 bits");
        assert_eq!(Multibyte::of_collation(id), want, "collation {id} ({cs})");
        let ctx = sqlfleet_replicate::context::Context {
            charset: Some((id, id, id)),
            ..Default::default()
        };
        assert_eq!(
            ctx.utf8_text(),
            matches!(cs.as_str(), "utf8mb3" | "utf8mb4"),
            "collation {id} ({cs}): UTF-8 or not"
        );
        if want == Multibyte::AsciiSafe && *maxlen > 1 {
            safe_multibyte.insert(cs.clone());
        }
    }
    // Only what a client may send text in (ucs2, utf16, utf32 may not).
    let mut client = std::collections::BTreeSet::new();
    for cs in &safe_multibyte {
        if c.query_drop(format!("SET character_set_client = {cs}"))
            .await
            .is_ok()
        {
            client.insert(cs.clone());
        }
    }
    c.query_drop("SET character_set_client = DEFAULT")
        .await
        .expect("reset");
    let safe_multibyte = client;
    assert!(safe_multibyte.contains("utf8mb4"), "{safe_multibyte:?}");
    for cs in &safe_multibyte {
        for trail in ["5C", "60"] {
            let n: Option<i64> = c
                .query_first(format!(
                    "SELECT COUNT(*) FROM mysql.seq_128_to_255 WHERE \
                     CHAR_LENGTH(CONVERT(UNHEX(CONCAT(HEX(seq), '{trail}')) USING {cs})) = 1"
                ))
                .await
                .expect("count");
            assert_eq!(n, Some(0), "{cs} has characters ending in 0x{trail}");
        }
    }
    let _ = c.disconnect().await;
}

/// Values the binary log does not carry. A STATEMENT session's `UUID()`
/// would be the target's own (a native replica computes its own too, with
/// the server's "unsafe statement" warning on the source), and a MIXED
/// session's `DATABASE()` under a renamed default database would name the
/// new database: each stops its stream, naming the call. The same calls in
/// a MIXED session without a rename (`UUID()` logged as rows) apply
/// exactly, and another database's stream goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_value_the_binary_log_does_not_carry_stops_its_stream() {
    let s = source(2);
    exec(
        s,
        "DROP DATABASE IF EXISTS su_uu; DROP DATABASE IF EXISTS su_dbn; DROP DATABASE IF EXISTS su_fine; \
         DROP DATABASE IF EXISTS su_sv",
    )
    .await;
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE su_uu; CREATE TABLE su_uu.t (id INT PRIMARY KEY, v VARCHAR(64)); \
         CREATE DATABASE su_dbn; CREATE TABLE su_dbn.t (id INT PRIMARY KEY, v VARCHAR(64)); \
         CREATE DATABASE su_fine; CREATE TABLE su_fine.t (id INT PRIMARY KEY, v VARCHAR(64)); \
         CREATE DATABASE su_sv; CREATE TABLE su_sv.t (id INT PRIMARY KEY, v VARCHAR(64))",
    )
    .await;
    session(
        s,
        &[
            b"INSERT INTO su_uu.t VALUES (1, UUID())",
            b"INSERT INTO su_sv.t VALUES (1, @@time_zone)",
            b"INSERT INTO su_sv.t VALUES (2, @@hostname)",
        ],
    )
    .await;
    let mut c = s.connect().await;
    for q in [
        "SET SESSION binlog_format = 'MIXED'",
        "USE su_dbn",
        "INSERT INTO t VALUES (1, DATABASE())",
        "USE su_fine",
        "INSERT INTO t VALUES (1, UUID()), (2, DATABASE())",
    ] {
        c.query_drop(q).await.expect(q);
    }
    let _ = c.disconnect().await;
    let cfg = cfg_for("su_uu", s, "su_*", "su_dbn = \"su_dbn_r\"", &start);
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 3, "{summary:?}");
    for (db, call) in [
        ("su_uu", "UUID()"),
        ("su_dbn_r", "DATABASE()"),
        ("su_sv", "@@hostname"),
    ] {
        let x = stream_status(&cfg, s, db).await;
        assert_eq!(x.state, "stopped", "{x:?}");
        let e = x.error.as_deref().unwrap_or("");
        assert!(e.contains(call) && e.contains("does not carry"), "{x:?}");
    }
    assert_same(s, "su_fine", "su_fine").await;
    // `@@time_zone`, which the event carries, applied before the stop.
    let mut c = target().connect().await;
    let n: Option<i64> = c
        .query_first("SELECT COUNT(*) FROM su_sv.t WHERE id = 1")
        .await
        .expect("count");
    assert_eq!(n, Some(1));
}

/// `SET STATEMENT v = x FOR <statement>` is kept so in the binary log, and
/// the event carries the FOR clause's sql_mode. The statement behind the
/// prefix is read as if it stood alone: a `CREATE DATABASE` there was no
/// database statement (filtered, so the renamed copy never had it), and
/// renames land in the statement. A prefix that sets sql_mode over a text
/// that reads otherwise under another mode stops its stream, naming the
/// cause: the source read the text under the session's own sql_mode,
/// which the log does not carry (replaying it stores `c\\d` for the
/// source's `c\d`, and fails on a `"q"`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_set_statement_prefix_replicates_the_statement_behind_it_or_stops() {
    // A source of its own: the statement whose databases cannot be told
    // stops every stream of a source ("*"), which would stop another
    // test's run that reads the same binlog range (seen with 11.4's
    // timing: `a_value_the_binary_log_does_not_carry_stops_its_stream`
    // counted 4 stopped streams for 3).
    static OWN: std::sync::OnceLock<TestServer> = std::sync::OnceLock::new();
    let s =
        OWN.get_or_init(|| sqlfleet_testkit::server_with(&["gtid-domain-id=5", "server-id=105"]));
    exec(
        s,
        "DROP DATABASE IF EXISTS sx_ok; DROP DATABASE IF EXISTS sx_made; \
         DROP DATABASE IF EXISTS sx_nbe; DROP DATABASE IF EXISTS sx_aq",
    )
    .await;
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE sx_ok; CREATE TABLE sx_ok.t (id INT PRIMARY KEY, v VARCHAR(20)); \
         CREATE DATABASE sx_nbe; CREATE TABLE sx_nbe.t (id INT PRIMARY KEY, v VARCHAR(20)); \
         CREATE DATABASE sx_aq; CREATE TABLE sx_aq.t (id INT PRIMARY KEY, v VARCHAR(20))",
    )
    .await;
    session(
        s,
        &[
            b"SET STATEMENT max_statement_time = 10 FOR INSERT INTO sx_ok.t VALUES (1, 'c\\\\d')",
            b"SET STATEMENT foreign_key_checks = 0 FOR CREATE TABLE sx_ok.u (id INT PRIMARY KEY)",
            b"SET STATEMENT max_statement_time = 10 FOR CREATE DATABASE sx_made",
            b"CREATE TABLE sx_made.t (id INT PRIMARY KEY)",
            b"INSERT INTO sx_made.t VALUES (1)",
            b"SET STATEMENT sql_mode = 'NO_BACKSLASH_ESCAPES' FOR INSERT INTO sx_nbe.t VALUES (1, 'c\\\\d')",
            b"SET STATEMENT sql_mode = 'ANSI_QUOTES' FOR INSERT INTO sx_aq.t VALUES (1, \"q\")",
        ],
    )
    .await;
    let cfg = cfg_for(
        "sx",
        s,
        "sx_*",
        "sx_ok = \"sx_ok_r\", sx_made = \"sx_made_r\"",
        &start,
    );
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 2, "{summary:?}");
    for db in ["sx_nbe", "sx_aq"] {
        let x = stream_status(&cfg, s, db).await;
        assert_eq!(x.state, "stopped", "{x:?}");
        let e = x.error.as_deref().unwrap_or("");
        assert!(e.contains("sets sql_mode"), "{x:?}");
    }
    assert_same(s, "sx_ok", "sx_ok_r").await;
    assert_same(s, "sx_made", "sx_made_r").await;
}

/// A source session with `binlog_alter_two_phase = ON` logs each ALTER
/// twice, each its own GTID: at its start, and once it committed or
/// rolled back, the same text both times (the GTID event's extra flags
/// tell which). Only a committed ALTER runs on the copy, once: an index
/// the server names (`ADD INDEX (a)`) is not made twice (`a` and `a_2`,
/// silently, before), a column added is not added again (1060 stopped
/// the stream, before), and an ALTER that failed on the source (a UNIQUE
/// key its rows break: ROLLBACK ALTER) or that another session's write
/// would let succeed on the copy, is not run at all. Under a rename.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_alter_logged_in_two_phases_runs_once_and_only_if_it_committed() {
    let s = source(2);
    exec(
        s,
        "DROP DATABASE IF EXISTS sc_alt; DROP DATABASE IF EXISTS sc_alt_r",
    )
    .await;
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE sc_alt; CREATE TABLE sc_alt.t (id INT PRIMARY KEY, a INT) ENGINE=InnoDB; \
         INSERT INTO sc_alt.t VALUES (1, 1), (2, 1)",
    )
    .await;
    let mut c = s.connect().await;
    c.query_drop("SET SESSION binlog_alter_two_phase = ON; USE sc_alt")
        .await
        .expect("two-phase ALTERs");
    c.query_drop("ALTER TABLE t ADD INDEX (a)")
        .await
        .expect("an index the server names");
    c.query_drop("ALTER TABLE t ADD COLUMN b INT NOT NULL DEFAULT 7")
        .await
        .expect("a column");
    let refused = c.query_drop("ALTER TABLE t ADD UNIQUE KEY u (a)").await;
    assert!(
        matches!(&refused, Err(mysql_async::Error::Server(e)) if e.code == 1062),
        "the UNIQUE key fails on the source: {refused:?}"
    );
    // Its START ALTER is logged; the rows that break it change only
    // after its ROLLBACK ALTER, so on the copy, run at its start, it
    // would have failed too — unless it runs after this write:
    c.query_drop("UPDATE t SET a = 2 WHERE id = 2")
        .await
        .expect("a write");
    c.query_drop("ALTER TABLE t ADD COLUMN c INT, ALGORITHM=COPY")
        .await
        .expect("a copying ALTER");
    let _ = c.disconnect().await;
    let kinds: Vec<String> = binlog_events(s).await.into_iter().map(|e| e.1).collect();
    let cfg = cfg_for("sc_alt", s, "sc_alt", "sc_alt = \"sc_alt_r\"", &start);
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    assert_same(s, "sc_alt", "sc_alt_r").await;
    // (The source did log them in two phases.)
    for phase in ["START ALTER", "COMMIT ALTER", "ROLLBACK ALTER"] {
        assert!(
            kinds.iter().any(|k| k.contains(phase)),
            "no {phase} in the source's binlog"
        );
    }
}

/// A source session may write in a GTID domain of its own (`SET SESSION
/// gtid_domain_id`, as applications do to let replicas apply their
/// writes out of order): its transactions, interleaved with the source's
/// usual domain, are applied exactly once, across a restart of the run,
/// and `--until-caught-up` ends once both domains are read.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_in_a_second_gtid_domain_apply_once_across_a_restart() {
    let s = source(1);
    exec(s, "DROP DATABASE IF EXISTS sc_dom").await;
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE sc_dom; CREATE TABLE sc_dom.t (id INT PRIMARY KEY, d INT) ENGINE=InnoDB",
    )
    .await;
    let cfg = cfg_for("sc_dom", s, "sc_dom", "", &start);
    let mut other = s.connect().await;
    other
        .query_drop("SET SESSION gtid_domain_id = 41")
        .await
        .expect("a session in domain 41");
    let mut id = 0;
    for round in 0..2 {
        for _ in 0..5 {
            id += 1;
            other
                .query_drop(format!("INSERT INTO sc_dom.t VALUES ({id}, 41)"))
                .await
                .expect("domain 41");
            id += 1;
            exec(s, &format!("INSERT INTO sc_dom.t VALUES ({id}, 0)")).await;
        }
        other
            .query_drop("BEGIN; UPDATE sc_dom.t SET d = d + 1 WHERE d >= 41; COMMIT")
            .await
            .expect("a transaction in domain 41");
        let summary = until_caught_up(&cfg, s).await;
        assert_eq!(summary.stopped_streams, 0, "round {round}: {summary:?}");
        assert_same(s, "sc_dom", "sc_dom").await;
    }
    let _ = other.disconnect().await;
    let pos = binlog_pos(s).await;
    assert!(
        pos.0.contains_key(&41),
        "the source's position names domain 41: {pos}"
    );
}

/// A statement that failed on the source after changing a table a
/// ROLLBACK does not undo is logged with the error it ended with, and is
/// to end with that error on the copy too, as a native replica checks: a
/// duplicate key part-way through a MyISAM INSERT (1062: its first rows
/// stay) and a DROP VIEW of two views one of which is not there (4092)
/// apply and leave the copy equal to the source; so do a DROP TABLE and a
/// DROP SEQUENCE of two one of which is not there, which the server logs
/// in a text of its own without the error (as a native replica's default
/// `slave_ddl_exec_mode=IDEMPOTENT` does). Before, each stopped its stream
/// with the error. A
/// statement the source stopped part-way for a reason of its moment (KILL
/// QUERY: 1317) cannot be replayed to the same end — its stream stops
/// (before: it ran whole on the copy, 1000 rows where the source kept
/// some, and the stream said nothing); so does a LOAD DATA that stopped at
/// a duplicate, which the applier's LOCAL INFILE would load past (before:
/// the row after the duplicate was on the copy only, silently).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_statement_that_failed_on_the_source_ends_the_same_on_the_copy_or_stops() {
    let s = source(0);
    exec(
        s,
        "DROP DATABASE IF EXISTS sc_err; DROP DATABASE IF EXISTS sc_err_k; \
         DROP DATABASE IF EXISTS sc_err_l",
    )
    .await;
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE sc_err; CREATE TABLE sc_err.m (id INT PRIMARY KEY, v INT) ENGINE=MyISAM; \
         CREATE TABLE sc_err.a (id INT) ENGINE=InnoDB; CREATE TABLE sc_err.b (id INT) ENGINE=InnoDB; \
         CREATE VIEW sc_err.v AS SELECT 1 AS one; CREATE SEQUENCE sc_err.q; \
         INSERT INTO sc_err.m VALUES (1, 1); \
         CREATE DATABASE sc_err_k; CREATE TABLE sc_err_k.m (id INT PRIMARY KEY, v INT) ENGINE=MyISAM; \
         CREATE DATABASE sc_err_l; CREATE TABLE sc_err_l.m (id INT PRIMARY KEY, v INT) ENGINE=MyISAM; \
         INSERT INTO sc_err_l.m VALUES (1, 1)",
    )
    .await;
    let mut c = statement_session(s, Some("sc_err")).await;
    let dup = c
        .query_drop("INSERT INTO m VALUES (5, 1), (6, 1), (1, 1), (7, 1)")
        .await;
    assert!(
        matches!(&dup, Err(mysql_async::Error::Server(e)) if e.code == 1062),
        "{dup:?}"
    );
    for (drop, code) in [
        ("DROP TABLE a, nosuch", 1051),
        ("DROP VIEW v, nosuch", 4092),
        ("DROP SEQUENCE q, nosuch", 4091),
    ] {
        let r = c.query_drop(drop).await;
        assert!(
            matches!(&r, Err(mysql_async::Error::Server(e)) if e.code == code),
            "{drop}: {r:?}"
        );
    }
    // A LOAD DATA stopped at a duplicate after its first two rows
    // (Execute_load_query carries the error), in a database of its own:
    // given as LOCAL INFILE the target would load past the duplicate.
    let dir = server_readable_dir();
    let file = dir.path().join("m.tsv");
    std::fs::write(&file, "100\t1\n101\t1\n1\t1\n102\t1\n").expect("file");
    let mut nodb = statement_session(s, None).await;
    let load = nodb
        .query_drop(format!(
            "LOAD DATA INFILE '{}' INTO TABLE sc_err_l.m",
            file.display()
        ))
        .await;
    assert!(
        matches!(&load, Err(mysql_async::Error::Server(e)) if e.code == 1062),
        "{load:?}"
    );
    let _ = nodb.disconnect().await;
    c.query_drop("INSERT INTO b VALUES (1)")
        .await
        .expect("after");
    // Killed part-way, from another session.
    let mut k = statement_session(s, Some("sc_err_k")).await;
    let id: Option<u32> = k.query_first("SELECT CONNECTION_ID()").await.expect("id");
    let slow = tokio::spawn(async move {
        let r = k
            .query_drop("INSERT INTO m SELECT seq, SLEEP(0.01) FROM seq_1_to_1000")
            .await;
        let _ = k.disconnect().await;
        r
    });
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    exec(s, &format!("KILL QUERY {}", id.expect("a connection id"))).await;
    let killed = slow.await.expect("task");
    assert!(
        matches!(&killed, Err(mysql_async::Error::Server(e)) if e.code == 1317),
        "{killed:?}"
    );
    let _ = c.disconnect().await;
    let cfg = cfg_for("sc_err", s, "sc_err*", "", &start);
    let summary = until_caught_up(&cfg, s).await;
    let ok = stream_status(&cfg, s, "sc_err").await;
    assert_ne!(ok.state, "stopped", "{ok:?}");
    assert_same(s, "sc_err", "sc_err").await;
    assert_eq!(summary.stopped_streams, 2, "{summary:?}");
    let l = stream_status(&cfg, s, "sc_err_l").await;
    assert_eq!(l.state, "stopped", "{l:?}");
    assert!(
        l.error
            .as_deref()
            .unwrap_or("")
            .contains("stopped part-way on the source (error 1062)"),
        "{l:?}"
    );
    let mut t = target().connect().await;
    let loaded: Option<i64> = t
        .query_first("SELECT COUNT(*) FROM sc_err_l.m WHERE id >= 100")
        .await
        .expect("target");
    assert_eq!(loaded, Some(0), "nothing of the refused LOAD DATA ran");
    let k = stream_status(&cfg, s, "sc_err_k").await;
    assert_eq!(k.state, "stopped", "{k:?}");
    assert!(
        k.error
            .as_deref()
            .unwrap_or("")
            .contains("stopped part-way on the source (error 1317"),
        "{k:?}"
    );
}

/// A LOAD DATA without IGNORE or REPLACE that went well on the source met
/// no duplicate key there (one would have stopped it). The applier gives
/// its file as LOCAL INFILE, under which the target takes a duplicate for
/// a warning: a copy that already differs (a row put there by hand) stops
/// its stream at that LOAD DATA, with nothing of it applied, instead of
/// loading the other rows past the difference and saying nothing (as
/// before; a native replica stops at the error there).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_load_data_meeting_a_duplicate_only_on_the_copy_stops_its_stream() {
    let s = source(1);
    exec(s, "DROP DATABASE IF EXISTS sc_ldd").await;
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE sc_ldd; CREATE TABLE sc_ldd.t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
    )
    .await;
    let cfg = cfg_for("sc_ldd", s, "sc_ldd", "", &start);
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    // The copy differs: a row only it has.
    let mut t = target().connect().await;
    t.query_drop("INSERT INTO sc_ldd.t VALUES (3, 99)")
        .await
        .expect("a row on the copy only");
    let dir = server_readable_dir();
    let file = dir.path().join("t.tsv");
    std::fs::write(&file, "1\t1\n2\t1\n3\t1\n4\t1\n").expect("file");
    let mut c = statement_session(s, None).await;
    c.query_drop(format!(
        "LOAD DATA INFILE '{}' INTO TABLE sc_ldd.t",
        file.display()
    ))
    .await
    .expect("the source meets no duplicate");
    let _ = c.disconnect().await;
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 1, "{summary:?}");
    let st = stream_status(&cfg, s, "sc_ldd").await;
    assert!(
        st.error
            .as_deref()
            .unwrap_or("")
            .contains("the copy differs from the source here"),
        "{st:?}"
    );
    let n: Option<i64> = t
        .query_first("SELECT COUNT(*) FROM sc_ldd.t")
        .await
        .expect("count");
    assert_eq!(n, Some(1), "nothing of the LOAD DATA stayed on the copy");
}

/// A source that encrypts its binary log at rest (`encrypt_binlog`, keys
/// from the file_key_management plugin) replicates like any other: the
/// server decrypts what it sends a replica and marks the
/// `Start_encryption` event that opens each file as one a replica may
/// pass over (read unmarked, as it lies on disk, it stops the source).
/// Before, the fixture could not even start such a server: the sandbox
/// asked the server about each `--option` alone, and the plugin's own
/// variable is unknown until the plugin is loaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_source_that_encrypts_its_binary_log_replicates_as_any_other() {
    static S: std::sync::OnceLock<(TestServer, tempfile::TempDir)> = std::sync::OnceLock::new();
    let (s, _keys) = S.get_or_init(|| {
        let keys = server_readable_dir();
        let file = keys.path().join("keys.txt");
        std::fs::write(
            &file,
            "1;a7addd9adea9978fda19f21e6be987880e68ac92632ca052e5bb42b1a506939a\n",
        )
        .expect("the key file");
        let opt = format!("file-key-management-filename={}", file.display());
        let s = sqlfleet_testkit::server_with(&[
            "gtid-domain-id=17",
            "server-id=117",
            "plugin-load-add=file_key_management",
            &opt,
            "encrypt-binlog=1",
        ]);
        (s, keys)
    });
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE sc_enc; CREATE TABLE sc_enc.t (id INT PRIMARY KEY, v VARCHAR(40)) ENGINE=InnoDB; \
         INSERT INTO sc_enc.t VALUES (1, 'plain words in a row event')",
    )
    .await;
    session(
        s,
        &[b"INSERT INTO sc_enc.t VALUES (2, 'plain words in a statement')"],
    )
    .await;
    // A new file opens with its own Start_encryption event.
    exec(
        s,
        "FLUSH BINARY LOGS; UPDATE sc_enc.t SET v = CONCAT(v, '!')",
    )
    .await;
    let kinds: Vec<String> = binlog_events(s).await.into_iter().map(|e| e.0).collect();
    assert!(
        kinds.iter().any(|k| k == "Start_encryption"),
        "the source encrypts its binary log: {kinds:?}"
    );
    let cfg = cfg_for("sc_enc", s, "sc_enc", "", &start);
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    assert_same(s, "sc_enc", "sc_enc").await;
}

/// `SET GLOBAL binlog_checksum` closes the binary log and opens the next
/// one with the new checksum: a run that is following goes on across
/// files that end their events with a CRC32 and files that do not, in
/// either order, and so does a run that reads them all afterwards; the
/// copy equals the source each time (a reader that kept the first file's
/// framing would cut four bytes off every event after the change, or
/// take four bytes of the next for a checksum).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_checksum_changed_while_reading_is_followed_file_by_file() {
    static S: std::sync::OnceLock<TestServer> = std::sync::OnceLock::new();
    let s =
        S.get_or_init(|| sqlfleet_testkit::server_with(&["gtid-domain-id=18", "server-id=118"]));
    let start = binlog_pos(s).await;
    let writes = |db: &'static str| async move {
        exec(
            s,
            &format!(
                "CREATE DATABASE {db}; CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(40)) ENGINE=InnoDB"
            ),
        )
        .await;
        let mut id = 0;
        for checksum in ["NONE", "CRC32", "NONE", "CRC32"] {
            exec(s, &format!("SET GLOBAL binlog_checksum = {checksum}")).await;
            for _ in 0..3 {
                id += 1;
                exec(
                    s,
                    &format!("INSERT INTO {db}.t VALUES ({id}, 'under {checksum}')"),
                )
                .await;
            }
            let sql = format!("UPDATE {db}.t SET v = CONCAT(v, '+') WHERE id <= {id}");
            session(s, &[sql.as_bytes()]).await;
        }
    };
    // Following: the changes come while the run reads.
    let cfg = cfg_for("sc_crc", s, "sc_crc*", "", &start);
    let (stop, rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(run_one(cfg.clone(), target(), s, false, rx));
    writes("sc_crc").await;
    wait_caught_up("sc_crc", s, std::time::Duration::from_secs(60)).await;
    let _ = stop.send(true);
    let summary = run.await.expect("the run's task").expect("the run");
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    assert_same(s, "sc_crc", "sc_crc").await;
    // Afterwards: the files are all written before the run reads them.
    writes("sc_crc2").await;
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    assert_same(s, "sc_crc2", "sc_crc2").await;
}

/// A source of the newer MariaDB (11.4), and a target of it, each started
/// once for this binary (the shared target is the system's 10.11).
fn newer(i: usize) -> &'static TestServer {
    static S: [std::sync::OnceLock<TestServer>; 2] =
        [std::sync::OnceLock::new(), std::sync::OnceLock::new()];
    S[i].get_or_init(|| {
        let (domain, id) = [
            ("gtid-domain-id=4", "server-id=104"),
            ("gtid-domain-id=8", "server-id=108"),
        ][i];
        sqlfleet_testkit::newer_server_with(&[domain, id])
    })
}

/// MariaDB 11.2+ logs a statement's `character_set_collations` (status
/// variable 131) when the map decided a collation — a database, table or
/// column named with a character set and no collation. On an 11.4 target
/// the columns get the source's collations, and a later session without
/// the map the compiled defaults (never the previous statement's map); a
/// 10.11 target, which has no such variable, stops the stream with the
/// server's own error and applies nothing of it — but takes the empty map
/// an 11.4 session has by default (and logs with every such DDL). Before,
/// every such statement stopped its stream ("status variable 131, which
/// the applier does not know"), whatever the target and the map.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_newer_sources_collation_map_gives_the_same_columns_or_stops_its_stream() {
    let (s, t) = (newer(0), newer(1));
    exec(
        s,
        "DROP DATABASE IF EXISTS sc_map; DROP DATABASE IF EXISTS sc_map0",
    )
    .await;
    let start = binlog_pos(s).await;
    // A default session: its map is empty.
    session(
        s,
        &[
            b"CREATE DATABASE sc_map0 CHARACTER SET utf8mb4",
            b"CREATE TABLE sc_map0.t (id INT PRIMARY KEY, a VARCHAR(10) CHARACTER SET utf8mb4) \
              CHARACTER SET latin1",
            b"INSERT INTO sc_map0.t VALUES (1, 'a')",
        ],
    )
    .await;
    session(
        s,
        &[
            b"SET SESSION character_set_collations = 'utf8mb4=utf8mb4_uca1400_ai_ci,utf8mb3=utf8mb3_bin'",
            b"CREATE DATABASE sc_map CHARACTER SET utf8mb4",
            b"CREATE TABLE sc_map.t (id INT PRIMARY KEY, a VARCHAR(10) CHARACTER SET utf8mb4, \
              b VARCHAR(10) CHARACTER SET utf8mb3)",
            b"INSERT INTO sc_map.t VALUES (1, 'a', 'B'), (2, 'A', 'b')",
        ],
    )
    .await;
    session(
        s,
        &[b"CREATE TABLE sc_map.u (id INT PRIMARY KEY, a VARCHAR(10) CHARACTER SET utf8mb4)"],
    )
    .await;
    // The map decided on the source (so its statements carry it).
    let mut c = s.connect().await;
    let cols: Vec<(String, String)> = c
        .query(
            "SELECT CONCAT(TABLE_NAME, '.', COLUMN_NAME), COLLATION_NAME FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = 'sc_map' AND COLLATION_NAME IS NOT NULL ORDER BY 1",
        )
        .await
        .expect("columns");
    let _ = c.disconnect().await;
    let want = [
        ("t.a", "utf8mb4_uca1400_ai_ci"),
        ("t.b", "utf8mb3_bin"),
        ("u.a", "utf8mb4_general_ci"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(cols, want, "the source's own columns");

    let cfg = cfg_for("sc_map", s, "sc_map*", "", &start);
    let summary = until_caught_up_into(&cfg, t, s, std::time::Duration::from_secs(180)).await;
    assert_eq!(summary.stopped_streams, 0, "into 11.4: {summary:?}");
    for db in ["sc_map", "sc_map0"] {
        assert_eq!(
            s.fingerprint(db).await,
            t.fingerprint(db).await,
            "source and 11.4 target differ in {db}"
        );
    }

    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 1, "into 10.11: {summary:?}");
    let st = stream_status(&cfg, s, "sc_map").await;
    let error = st.error.unwrap_or_default();
    assert!(
        error.contains("character_set_collations") && error.contains("1193"),
        "into 10.11, the server's own refusal: {error}"
    );
    let mut c = target().connect().await;
    let dbs: Vec<String> = c
        .query("SHOW DATABASES LIKE 'sc_map'")
        .await
        .expect("databases");
    let cols: Vec<(String, String)> = c
        .query(
            "SELECT CONCAT(TABLE_NAME, '.', COLUMN_NAME), COLLATION_NAME FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = 'sc_map0' AND COLLATION_NAME IS NOT NULL",
        )
        .await
        .expect("columns");
    let rows: Vec<(i32, String)> = c.query("SELECT * FROM sc_map0.t").await.expect("rows");
    let _ = c.disconnect().await;
    assert!(dbs.is_empty(), "10.11 applied part of it: {dbs:?}");
    assert_eq!(
        (cols, rows),
        (
            vec![("t.a".to_string(), "utf8mb4_general_ci".to_string())],
            vec![(1, "a".to_string())]
        ),
        "10.11: the empty map's statements"
    );
}

/// A sequence refilled under `binlog_row_image = MINIMAL` is logged as a
/// Write_rows event with only the changed columns, which a `BINLOG`
/// statement refuses: 4085 on 10.11, 1105 "Unknown error" on 11.4. Both
/// apply as whole rows, into a target of the source's own version. Before,
/// an 11.4 source's refill stopped its stream at "Unknown error" (found by
/// the differential campaign run on 11.4).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sequence_refilled_under_a_minimal_row_image_applies_on_either_version() {
    for (s, t, version) in [(newer(0), newer(1), "11.4"), (source(0), target(), "10.11")] {
        exec(s, "DROP DATABASE IF EXISTS sc_seqmin").await;
        let start = binlog_pos(s).await;
        let mut c = s.connect().await;
        for q in [
            "SET SESSION binlog_format = 'ROW', binlog_row_image = 'MINIMAL'",
            "CREATE DATABASE sc_seqmin",
            "CREATE SEQUENCE sc_seqmin.s START WITH 100 INCREMENT BY 7 CACHE 2",
            "CREATE TABLE sc_seqmin.t (id BIGINT NOT NULL DEFAULT NEXTVAL(sc_seqmin.s) PRIMARY KEY, v INT)",
            "INSERT INTO sc_seqmin.t (v) VALUES (1), (2), (3), (4), (5)",
            "DO NEXTVAL(sc_seqmin.s), NEXTVAL(sc_seqmin.s), NEXTVAL(sc_seqmin.s)",
        ] {
            c.query_drop(q).await.unwrap_or_else(|e| panic!("{version}: {q}: {e}"));
        }
        let _ = c.disconnect().await;
        let cfg = cfg_for("sc_seqmin", s, "sc_seqmin", "", &start);
        let summary = until_caught_up_into(&cfg, t, s, std::time::Duration::from_secs(180)).await;
        assert_eq!(summary.stopped_streams, 0, "{version}: {summary:?}");
        let row = |srv: &'static TestServer| async move {
            let mut c = srv.connect().await;
            let r: Option<(i64, i64)> = c
                .query_first("SELECT next_not_cached_value, cache_size FROM sc_seqmin.s")
                .await
                .expect("sequence row");
            let _ = c.disconnect().await;
            r
        };
        assert_eq!(row(s).await, row(t).await, "{version}: the sequence's row");
        assert_eq!(
            s.fingerprint("sc_seqmin").await,
            t.fingerprint("sc_seqmin").await,
            "{version}"
        );
    }
}

/// A LOAD DATA's FIELDS and LINES clauses mean on the target what they
/// meant on the source in every mode a session reads strings in. The
/// server logs the clauses with backslash escapes whatever the session's
/// `sql_mode`; under `NO_BACKSLASH_ESCAPES` (logged with it) that text
/// splits the file elsewhere — a native replica of 10.11.19 loaded `p`
/// and `q<TAB>r<LF>` where the source loaded `p\tq` and `r`, and said
/// nothing. Each form below, in both modes, into a table of its own; the
/// copies equal the source's tables. And a `LOAD XML`, which the server
/// logs as a LOAD DATA splitting at its row tag, stops its stream naming
/// it (one into an excluded database passes by).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_load_data_s_clauses_mean_on_the_copy_what_they_meant_in_the_source_s_mode() {
    let s = source(2);
    exec(
        s,
        "DROP DATABASE IF EXISTS sc_ldm; DROP DATABASE IF EXISTS sc_ldme; DROP DATABASE IF EXISTS sc_ldmx_out",
    )
    .await;
    let start = binlog_pos(s).await;
    let dir = server_readable_dir();
    let file = dir.path().join("mixed.txt");
    // Real tabs, newlines and CR LF beside backslash-t and backslash-n
    // written out, commas, quotes, a line-start mark, a quote in a
    // terminator's way.
    let mixed: &[u8] =
        b"head\r\n1\tp\\tq\tr\r\n>2,\"x,y\",z\n3\\n4\tw\\\\n5\tit's6it'sv\n>7,\"a\"\"b\",c\\\n\n";
    std::fs::write(&file, mixed).expect("file");
    // Without its backslashes: under NO_BACKSLASH_ESCAPES a LOAD DATA
    // naming no escape character is logged as one naming a backslash,
    // which loads the same rows only from a file without one.
    let plain = dir.path().join("plain.txt");
    let no_backslash: Vec<u8> = mixed.iter().copied().filter(|b| *b != b'\\').collect();
    std::fs::write(&plain, &no_backslash).expect("file");
    let forms = [
        "",
        "FIELDS ESCAPED BY ''",
        "FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' LINES STARTING BY '>' TERMINATED BY '\\n'",
        // (@p set before, in the session: a User_var event.)
        "LINES TERMINATED BY '\\r\\n' IGNORE 1 LINES (a, @b) SET b = CONCAT(@p, @b, '\\\\')",
        "FIELDS TERMINATED BY 'it''s' ESCAPED BY '' LINES TERMINATED BY '\\n'",
        "FIELDS TERMINATED BY '\\t' ENCLOSED BY '' ESCAPED BY '|' LINES TERMINATED BY '\\\\n'",
    ];
    // The settings the server's text of the statement depends on: how it
    // reads strings, how it quotes names, whether it quotes them at all;
    // and a default database (the table's name written unqualified).
    let modes = [
        ("", 1),
        ("NO_BACKSLASH_ESCAPES", 1),
        ("ANSI_QUOTES", 1),
        ("NO_BACKSLASH_ESCAPES,ANSI_QUOTES", 0),
        ("", 0),
    ];
    let mut c = statement_session(s, None).await;
    c.query_drop("CREATE DATABASE sc_ldm").await.expect("db");
    let mut tables = Vec::new();
    for (m, (mode, quote)) in modes.iter().enumerate() {
        // Odd: a session with no default database (the file is ASCII).
        let mut c = statement_session(s, (m % 2 == 0).then_some("sc_ldm")).await;
        for (i, form) in forms.iter().enumerate() {
            let t = format!("sc_ldm.t{m}_{i}");
            c.query_drop(format!("SET @p = 'pre{m}_{i} '"))
                .await
                .expect("a user variable");
            c.query_drop(format!("SET SESSION sql_quote_show_create = {quote}"))
                .await
                .expect("quote");
            c.query_drop(format!(
                "CREATE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, a VARCHAR(200), b VARCHAR(200))"
            ))
            .await
            .expect("table");
            c.query_drop(format!("SET SESSION sql_mode = '{mode}'"))
                .await
                .expect("mode");
            let from = if mode.contains("NO_BACKSLASH") && !form.contains("ESCAPED") {
                &plain
            } else {
                &file
            };
            c.query_drop(format!(
                "LOAD DATA INFILE '{}' INTO TABLE {t} {}",
                from.display(),
                if form.contains("(a") {
                    form.to_string()
                } else {
                    format!("{form} (a, b)")
                }
            ))
            .await
            .unwrap_or_else(|e| panic!("{mode}: {form}: {e}"));
            c.query_drop("SET SESSION sql_mode = DEFAULT")
                .await
                .expect("mode");
            tables.push(t);
        }
        let _ = c.disconnect().await;
    }
    // A terminator in sjis whose second byte is a backslash's (`表`).
    let sj = dir.path().join("sjis.txt");
    std::fs::write(&sj, b"a\x95\x5cb\x95\x5cc").expect("file");
    c.query_drop("CREATE TABLE sc_ldm.sj (id INT AUTO_INCREMENT PRIMARY KEY, a VARBINARY(20), b VARBINARY(20))")
        .await
        .expect("table");
    c.query_drop("USE sc_ldm").await.expect("use");
    c.query_drop("SET NAMES sjis").await.expect("sjis");
    let mut q = format!(
        "LOAD DATA INFILE '{}' INTO TABLE sc_ldm.sj LINES TERMINATED BY '",
        sj.display()
    )
    .into_bytes();
    q.extend_from_slice(b"\x95\x5c' (a)");
    c.query_drop(q.as_slice()).await.expect("sjis terminator");
    tables.push("sc_ldm.sj".into());
    let _ = c.disconnect().await;
    let cfg = cfg_for("sc_ldm", s, "sc_ldm", "", &start);
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    let digest = |t: &str| {
        format!(
            "SELECT CONCAT(COUNT(*), '/', COALESCE(GROUP_CONCAT(HEX(CONCAT_WS('|', id, IFNULL(a, 'NULL'), IFNULL(b, 'NULL'))) ORDER BY id), '')) FROM {t}"
        )
    };
    let mut src = s.connect().await;
    let mut tgt = target().connect().await;
    let mut splits = std::collections::BTreeSet::new();
    for t in &tables {
        let want: Option<String> = src.query_first(digest(t)).await.expect("source");
        let got: Option<String> = tgt.query_first(digest(t)).await.expect("target");
        assert_eq!(got, want, "{t} on the copy equals the source's");
        splits.insert(want);
    }
    assert!(
        splits.len() >= 8,
        "the forms and modes split the file in different ways: {splits:?}"
    );

    // A LOAD XML logged as statements.
    let xml = dir.path().join("rows.xml");
    std::fs::write(
        &xml,
        "<?xml version=\"1.0\"?>\n<resultset>\n<row><field name=\"a\">1</field><field name=\"b\">one</field></row>\n<row a=\"2\" b=\"two\"/>\n</resultset>\n",
    )
    .expect("xml");
    let mut c = statement_session(s, None).await;
    for q in [
        "CREATE DATABASE sc_ldmx_out".to_string(),
        "CREATE TABLE sc_ldmx_out.t (a VARCHAR(200), b VARCHAR(200))".into(),
        "CREATE TABLE sc_ldm.x (a VARCHAR(200), b VARCHAR(200))".into(),
        "CREATE DATABASE sc_ldme".into(),
        "CREATE TABLE sc_ldme.t (a VARCHAR(200), b VARCHAR(200))".into(),
        "SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'".into(),
        format!("LOAD DATA INFILE '{}' INTO TABLE sc_ldme.t", file.display()),
        "SET SESSION sql_mode = ''".into(),
        format!(
            "LOAD XML INFILE '{}' INTO TABLE sc_ldmx_out.t",
            xml.display()
        ),
        format!(
            "LOAD XML INFILE '{}' INTO TABLE sc_ldm.x ROWS IDENTIFIED BY '<row>'",
            xml.display()
        ),
    ] {
        c.query_drop(&q)
            .await
            .unwrap_or_else(|e| panic!("{q}: {e}"));
    }
    let _ = c.disconnect().await;
    let n: Option<i64> = src
        .query_first("SELECT COUNT(*) FROM sc_ldm.x")
        .await
        .expect("rows");
    assert_eq!(n, Some(2), "the source read the XML");
    // sc_ldmx_out is not included: its LOAD XML is passed by.
    let cfg = cfg_for("sc_ldm", s, "sc_ldm\", \"sc_ldme", "", &start);
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 2, "{summary:?}");
    let st = stream_status(&cfg, s, "sc_ldm").await;
    let why = st.error.as_deref().unwrap_or("");
    assert!(why.contains("LOAD XML") && why.contains("<row>"), "{st:?}");
    let st = stream_status(&cfg, s, "sc_ldme").await;
    let why = st.error.as_deref().unwrap_or("");
    assert!(
        why.contains("NO_BACKSLASH_ESCAPES") && why.contains("ESCAPED BY"),
        "{st:?}"
    );
    let n: Option<i64> = tgt
        .query_first("SELECT COUNT(*) FROM sc_ldme.t")
        .await
        .expect("count");
    assert_eq!(n, Some(0), "nothing of the LOAD DATA was applied");
    let n: Option<i64> = tgt
        .query_first("SELECT COUNT(*) FROM sc_ldm.x")
        .await
        .expect("count");
    assert_eq!(
        n,
        Some(0),
        "nothing of the LOAD XML was applied as LOAD DATA"
    );
}

/// A CREATE ... SELECT logged as rows is logged with the server's own
/// CREATE TABLE text (SHOW CREATE TABLE's), which escapes backslashes
/// whatever the mode, under the session's `NO_BACKSLASH_ESCAPES`: a
/// native replica of 10.11.19 read `DEFAULT 'a\\b'` as two backslashes
/// where the source has one, and said nothing. Defaults, a comment, an
/// ENUM's values, a CHECK and a generated column's expression, a quote
/// and a backslash in each, in both modes and with ANSI_QUOTES; beside
/// them the same CREATE sent by a client (its own text, in its own mode)
/// and a CREATE ... SELECT logged as a statement. The copies' definitions
/// and rows equal the source's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_create_select_logged_as_rows_keeps_its_literals_in_every_mode() {
    let s = source(1);
    exec(s, "DROP DATABASE IF EXISTS sc_cs").await;
    let start = binlog_pos(s).await;
    exec(s, "CREATE DATABASE sc_cs").await;
    let cols = "s VARCHAR(20) DEFAULT 'a\\b''c' COMMENT 'c\\d', \
                e ENUM('x\\y', 'z''w') DEFAULT 'x\\y', \
                k VARCHAR(20) CHECK (k <> 'q\\r'), \
                g VARCHAR(40) AS (CONCAT(s, 'p\\q'))";
    let mut c = s.connect().await;
    let mut tables = Vec::new();
    let modes = [
        "",
        "NO_BACKSLASH_ESCAPES",
        "NO_BACKSLASH_ESCAPES,ANSI_QUOTES",
        "ANSI_QUOTES",
        // The server's text with names unquoted.
        "NO_BACKSLASH_ESCAPES;0",
    ];
    for (m, mode) in modes.iter().enumerate() {
        for (f, format) in ["ROW", "STATEMENT", "MIXED"].iter().enumerate() {
            let t = format!("sc_cs.t{m}_{f}");
            let u = format!("sc_cs.u{m}_{f}");
            for q in [
                format!("SET SESSION binlog_format = '{format}'"),
                format!(
                    "SET SESSION sql_quote_show_create = {}",
                    u8::from(!mode.ends_with(";0"))
                ),
                format!("SET SESSION sql_mode = '{}'", mode.trim_end_matches(";0")),
                format!("CREATE TABLE {t} ({cols}) SELECT 'x\\\\y' AS s, 'z''w' AS e, 'k' AS k"),
                format!("CREATE OR REPLACE TABLE {u} ({cols})"),
                format!("INSERT INTO {u} (k) VALUES ('v')"),
                "SET SESSION sql_mode = DEFAULT".into(),
            ] {
                c.query_drop(&q)
                    .await
                    .unwrap_or_else(|e| panic!("{mode} {format}: {q}: {e}"));
            }
            tables.push(t);
            tables.push(u);
        }
    }
    let _ = c.disconnect().await;
    let cfg = cfg_for("sc_cs", s, "sc_cs", "", &start);
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    let mut tgt = target().connect().await;
    let mut src = s.connect().await;
    for t in &tables {
        let show = format!("SHOW CREATE TABLE {t}");
        let want: Option<(String, String)> = src.query_first(&show).await.expect("source");
        let got: Option<(String, String)> = tgt.query_first(&show).await.expect("target");
        assert_eq!(got, want, "{t}'s definition on the copy");
        let rows =
            format!("SELECT GROUP_CONCAT(HEX(CONCAT_WS('|', s, e, k, g)) ORDER BY k) FROM {t}");
        let want: Option<Option<String>> = src.query_first(&rows).await.expect("source");
        let got: Option<Option<String>> = tgt.query_first(&rows).await.expect("target");
        assert_eq!(got, want, "{t}'s rows on the copy");
    }
}

/// SAVEPOINT and ROLLBACK TO are logged in the server's own spelling of
/// the name: backquoted, double-quoted under ANSI_QUOTES, bare with
/// `sql_quote_show_create = 0`. A rollback to a savepoint after a MyISAM
/// write (so the transaction is logged with it) keeps on the copy what it
/// kept on the source, in each spelling, names with a space and a quote.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rollback_to_a_savepoint_in_every_spelling_the_server_writes_keeps_what_it_kept() {
    let s = source(0);
    exec(s, "DROP DATABASE IF EXISTS sc_sp").await;
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE sc_sp; CREATE TABLE sc_sp.i (a INT) ENGINE=InnoDB; \
         CREATE TABLE sc_sp.m (a INT) ENGINE=MyISAM",
    )
    .await;
    let cases = [
        ("", 1, "`s p``q`"),
        ("ANSI_QUOTES", 1, "\"s p\"\"q\""),
        ("ANSI_QUOTES", 0, "sp"),
        ("", 0, "`s p`"),
        ("NO_BACKSLASH_ESCAPES", 0, "sp2"),
    ];
    let mut c = statement_session(s, Some("sc_sp")).await;
    for (n, (mode, quote, name)) in cases.iter().enumerate() {
        let n = n as i64 * 10;
        for q in [
            format!("SET SESSION sql_mode = '{mode}'"),
            format!("SET SESSION sql_quote_show_create = {quote}"),
            "BEGIN".into(),
            format!("INSERT INTO i VALUES ({n})"),
            format!("SAVEPOINT {name}"),
            format!("INSERT INTO m VALUES ({})", n + 1),
            format!("INSERT INTO i VALUES ({})", n + 2),
            format!("ROLLBACK TO SAVEPOINT {name}"),
            format!("INSERT INTO i VALUES ({})", n + 3),
            "COMMIT".into(),
        ] {
            c.query_drop(&q)
                .await
                .unwrap_or_else(|e| panic!("{mode} {quote}: {q}: {e}"));
        }
    }
    let _ = c.disconnect().await;
    let cfg = cfg_for("sc_sp", s, "sc_sp", "", &start);
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    let mut src = s.connect().await;
    let mut tgt = target().connect().await;
    for t in ["sc_sp.i", "sc_sp.m"] {
        let q = format!("SELECT GROUP_CONCAT(a ORDER BY a) FROM {t}");
        let want: Option<Option<String>> = src.query_first(&q).await.expect("source");
        let got: Option<Option<String>> = tgt.query_first(&q).await.expect("target");
        assert_eq!(got, want, "{t} on the copy");
    }
    let q = "SELECT GROUP_CONCAT(a ORDER BY a) FROM sc_sp.i";
    let want: Option<Option<String>> = src.query_first(q).await.expect("source");
    assert_eq!(
        want,
        Some(Some("0,3,10,13,20,23,30,33,40,43".into())),
        "the rollbacks undid the InnoDB rows after each savepoint"
    );
}

/// A session that ends with temporary tables open has them dropped by
/// the server, which logs the DROP in its own spelling of the names
/// (ANSI_QUOTES: double quotes; `sql_quote_show_create = 0`: bare). Each
/// spelling: the table is known dropped, and one of the same name made by
/// the next session is another table.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_temporary_table_dropped_at_disconnect_is_read_in_every_spelling() {
    let s = source(1);
    exec(s, "DROP DATABASE IF EXISTS sc_tmpq").await;
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE sc_tmpq; CREATE TABLE sc_tmpq.t (a INT, b VARCHAR(20))",
    )
    .await;
    let cases = [
        ("ANSI_QUOTES", 1, "\"x y\""),
        ("ANSI_QUOTES", 0, "tq"),
        ("", 0, "tq"),
        ("", 1, "`x``y`"),
    ];
    for (n, (mode, quote, name)) in cases.iter().enumerate() {
        let mut c = statement_session(s, Some("sc_tmpq")).await;
        for q in [
            format!("SET SESSION sql_mode = '{mode}'"),
            format!("SET SESSION sql_quote_show_create = {quote}"),
            format!("CREATE TEMPORARY TABLE {name} (a INT)"),
            format!("INSERT INTO {name} VALUES ({n}), ({n} + 100)"),
            format!("INSERT INTO t SELECT a, 'case {n}' FROM {name}"),
            format!("CREATE TABLE r{n} (a INT)"),
        ] {
            c.query_drop(&q)
                .await
                .unwrap_or_else(|e| panic!("{mode} {quote}: {q}: {e}"));
        }
        if n % 2 == 1 {
            // One DROP of a table and a temporary one: the server logs
            // it as two DROPs of its own writing.
            c.query_drop(format!("DROP TABLE r{n}, {name}"))
                .await
                .expect("drop both");
        }
        // Else left open: the server drops it, and logs that.
        let _ = c.disconnect().await;
    }
    // The drops are logged when the sessions end.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let cfg = cfg_for("sc_tmpq", s, "sc_tmpq", "", &start);
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    let q = "SELECT GROUP_CONCAT(CONCAT(a, ':', b) ORDER BY a) FROM sc_tmpq.t";
    let mut src = s.connect().await;
    let mut tgt = target().connect().await;
    let want: Option<Option<String>> = src.query_first(q).await.expect("source");
    let got: Option<Option<String>> = tgt.query_first(q).await.expect("target");
    assert_eq!(got, want, "the copy");
    assert_eq!(want.flatten().map(|w| w.split(',').count()), Some(8));
    let q = "SELECT GROUP_CONCAT(TABLE_NAME ORDER BY TABLE_NAME) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'sc_tmpq'";
    let want: Option<Option<String>> = src.query_first(q).await.expect("source");
    let got: Option<Option<String>> = tgt.query_first(q).await.expect("target");
    assert_eq!(got, want, "the copy's tables");
    assert_eq!(want, Some(Some("r0,r2,t".into())));
    // Each drop was read as the drop of its session's table: no session
    // is left recorded as holding one.
    let open: Option<i64> = tgt
        .query_first("SELECT COUNT(*) FROM sqlfleet.replicate_temp WHERE source = 'sc_tmpq'")
        .await
        .expect("temp record");
    assert_eq!(
        open,
        Some(0),
        "sessions recorded as holding temporary tables"
    );
}

/// The server leaves a LOAD DATA's `PARTITION (...)` out of the text it
/// logs: with IGNORE (or LOCAL) the source passed over the rows outside
/// the partitions named, and a native replica of 10.11.19 loaded them
/// (source 1 row, replica 2, no error). A LOAD DATA with IGNORE into a
/// table the target partitions stops its stream, naming the cause, with
/// nothing of it applied; one with IGNORE into a table not partitioned,
/// and one without IGNORE into a partitioned one (a row outside the
/// partitions would have stopped it on the source), apply.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_load_data_ignoring_rows_into_a_partitioned_table_stops_instead_of_guessing() {
    let s = source(2);
    exec(s, "DROP DATABASE IF EXISTS sc_ldp").await;
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE sc_ldp; \
         CREATE TABLE sc_ldp.pt (a INT) PARTITION BY RANGE (a) \
         (PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN MAXVALUE); \
         CREATE TABLE sc_ldp.plain (a INT PRIMARY KEY)",
    )
    .await;
    let dir = server_readable_dir();
    let file = dir.path().join("rows.tsv");
    std::fs::write(&file, "1\n150\n1\n").expect("file");
    let f = file.display();
    let mut c = statement_session(s, Some("sc_ldp")).await;
    for q in [
        format!("LOAD DATA INFILE '{f}' IGNORE INTO TABLE plain"),
        format!("LOAD DATA INFILE '{f}' INTO TABLE pt PARTITION (p1, p0)"),
        format!("LOAD DATA INFILE '{f}' IGNORE INTO TABLE pt PARTITION (p0)"),
    ] {
        c.query_drop(&q)
            .await
            .unwrap_or_else(|e| panic!("{q}: {e}"));
    }
    let _ = c.disconnect().await;
    let mut src = s.connect().await;
    let n: Option<i64> = src
        .query_first("SELECT COUNT(*) FROM sc_ldp.pt")
        .await
        .expect("count");
    assert_eq!(n, Some(5), "3 rows, then the 2 of p0");
    let cfg = cfg_for("sc_ldp", s, "sc_ldp", "", &start);
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 1, "{summary:?}");
    let st = stream_status(&cfg, s, "sc_ldp").await;
    let why = st.error.as_deref().unwrap_or("");
    assert!(
        why.contains("partitioned") && why.contains("IGNORE"),
        "{st:?}"
    );
    let mut tgt = target().connect().await;
    for (t, want) in [("plain", 2), ("pt", 3)] {
        let n: Option<i64> = tgt
            .query_first(format!("SELECT COUNT(*) FROM sc_ldp.{t}"))
            .await
            .expect("count");
        assert_eq!(n, Some(want), "{t} on the copy");
    }
}

/// A LOAD DATA naming no CHARACTER SET reads its file in the default
/// database's character set. Run under a default database the filters
/// exclude (utf16 here: it reads even an ASCII file as other text), the
/// target has nothing to read it in: its stream stops, naming the cause,
/// and nothing of it is applied. With no default database the server
/// logs the session's collation_database (seen on 10.11), which the
/// target is given: a file that is not ASCII applies, equal. Beside
/// them, the same with CHARACTER SET named applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_load_data_read_in_a_character_set_the_target_lacks_stops_instead_of_guessing() {
    let s = source(0);
    exec(
        s,
        "DROP DATABASE IF EXISTS sc_ldc; DROP DATABASE IF EXISTS sc_ldcx_u16; \
         DROP DATABASE IF EXISTS sc_ldc2",
    )
    .await;
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE sc_ldc; CREATE DATABASE sc_ldc2; \
         CREATE DATABASE sc_ldcx_u16 CHARACTER SET utf16; \
         CREATE TABLE sc_ldc.t (a VARCHAR(40) CHARACTER SET utf8mb4); \
         CREATE TABLE sc_ldc2.t (a VARCHAR(40) CHARACTER SET utf8mb4)",
    )
    .await;
    let dir = server_readable_dir();
    let ascii = dir.path().join("ascii.txt");
    std::fs::write(&ascii, "one\ntwo\n").expect("file");
    let latin = dir.path().join("latin.txt");
    std::fs::write(&latin, "caf\u{e9}\n").expect("file");
    let (a, l) = (ascii.display(), latin.display());
    // Applied: named sets, and ASCII with no default database.
    let mut c = statement_session(s, None).await;
    for q in [
        format!("LOAD DATA INFILE '{a}' INTO TABLE sc_ldc.t"),
        format!("LOAD DATA INFILE '{l}' INTO TABLE sc_ldc.t CHARACTER SET utf8mb4"),
        "USE sc_ldcx_u16".into(),
        format!("LOAD DATA INFILE '{a}' INTO TABLE sc_ldc.t CHARACTER SET utf8mb4"),
    ] {
        c.query_drop(&q)
            .await
            .unwrap_or_else(|e| panic!("{q}: {e}"));
    }
    let _ = c.disconnect().await;
    // Stopped: each in a database of its own (a stream each).
    let mut c = statement_session(s, Some("sc_ldcx_u16")).await;
    c.query_drop(format!("LOAD DATA INFILE '{a}' INTO TABLE sc_ldc.t"))
        .await
        .expect("read as utf16 on the source");
    let _ = c.disconnect().await;
    // Applied: no default database (its collation_database logged).
    let mut c = statement_session(s, None).await;
    c.query_drop("SET SESSION collation_database = 'latin1_swedish_ci'")
        .await
        .expect("the session's collation_database");
    c.query_drop(format!("LOAD DATA INFILE '{l}' INTO TABLE sc_ldc2.t"))
        .await
        .expect("no default database");
    let _ = c.disconnect().await;
    let cfg = cfg_for("sc_ldc", s, "sc_ldc\", \"sc_ldc2", "", &start);
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 1, "{summary:?}");
    let st = stream_status(&cfg, s, "sc_ldc").await;
    let why = st.error.as_deref().unwrap_or("");
    assert!(
        why.contains("CHARACTER SET") && why.contains("`sc_ldcx_u16`"),
        "{st:?}"
    );
    let q = "SELECT GROUP_CONCAT(HEX(a) ORDER BY HEX(a)) FROM sc_ldc.t";
    let mut src = s.connect().await;
    let mut tgt = target().connect().await;
    let all: Option<Option<String>> = src.query_first(q).await.expect("source");
    let got: Option<Option<String>> = tgt.query_first(q).await.expect("target");
    // The copy holds the five rows of the loads before the stop, the
    // source those and the utf16 reading's.
    let split = |v: Option<Option<String>>| -> Vec<String> {
        v.flatten()
            .unwrap_or_default()
            .split(',')
            .filter(|h| !h.is_empty())
            .map(str::to_string)
            .collect()
    };
    let (all, got) = (split(all), split(got));
    assert_eq!(got.len(), 5, "the rows before the stop: {got:?}");
    assert!(all.len() > 5, "the source read more: {all:?}");
    assert!(
        got.iter().all(|h| all.contains(h)),
        "{got:?} within {all:?}"
    );
    let q = "SELECT GROUP_CONCAT(HEX(a)) FROM sc_ldc2.t";
    let want: Option<Option<String>> = src.query_first(q).await.expect("source");
    let got: Option<Option<String>> = tgt.query_first(q).await.expect("target");
    assert_eq!(got, want, "read as latin1 on both");
    assert_eq!(
        want,
        Some(Some("636166C383C2A9".into())),
        "caf\u{e9} read as latin1"
    );
}

/// The definitions the server writes itself — a view's (`CREATE
/// ALGORITHM=... DEFINER=... SQL SECURITY ... VIEW`), a routine's, a
/// trigger's and an event's `CREATE DEFINER=...` — in each spelling of
/// names it has (ANSI_QUOTES: double quotes; `sql_quote_show_create = 0`:
/// none, `DEFINER=root@localhost`), and under NO_BACKSLASH_ESCAPES (a
/// routine's COMMENT the server writes again with backslash escapes: a
/// native replica of 10.11.19 got `c\\d` for `c\d`), into a database
/// the config renames: each lands in the renamed copy, defined as on the
/// source (its text with the database's new name), and works there.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn definitions_the_server_writes_in_every_spelling_land_renamed() {
    let s = source(1);
    exec(s, "DROP DATABASE IF EXISTS sc_def").await;
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE sc_def; CREATE TABLE sc_def.t (a INT, b VARCHAR(20))",
    )
    .await;
    // (NO_BACKSLASH_ESCAPES: the server writes a routine's COMMENT again
    // with backslash escapes, before the client's own body.)
    let cases = [
        ("", 1),
        ("ANSI_QUOTES", 1),
        ("ANSI_QUOTES", 0),
        ("", 0),
        ("NO_BACKSLASH_ESCAPES", 1),
        ("NO_BACKSLASH_ESCAPES,ANSI_QUOTES", 0),
    ];
    let mut objects = Vec::new();
    for (n, (mode, quote)) in cases.iter().enumerate() {
        let mut c = statement_session(s, Some("sc_def")).await;
        for q in [
            format!("SET SESSION sql_mode = '{mode}'"),
            format!("SET SESSION sql_quote_show_create = {quote}"),
            format!("CREATE VIEW v{n} AS SELECT a, b FROM t WHERE a > {n}"),
            format!(
                "CREATE PROCEDURE p{n}(IN x INT) COMMENT 'proc {n} x\\y''s' \
                 INSERT INTO sc_def.t VALUES (x, CONCAT('p', {n}))"
            ),
            format!(
                "CREATE FUNCTION f{n}(x INT) RETURNS INT DETERMINISTIC COMMENT 'fn\\{n}' \
                 RETURN x + {n}"
            ),
            format!(
                "CREATE TRIGGER tr{n} BEFORE INSERT ON t FOR EACH ROW \
                 SET NEW.b = IF(NEW.a = {n}, CONCAT(NEW.b, '+{n}'), NEW.b)"
            ),
            format!(
                "CREATE EVENT e{n} ON SCHEDULE EVERY 1 DAY DISABLE COMMENT 'event {n}' \
                 DO INSERT INTO sc_def.t VALUES ({n}, 'event')"
            ),
            format!("CALL p{n}(f{n}({n}))"),
            format!("INSERT INTO t VALUES ({n}, 'row')"),
            format!("INSERT INTO t SELECT a + 100, b FROM v{n} WHERE a = {n}"),
        ] {
            c.query_drop(&q)
                .await
                .unwrap_or_else(|e| panic!("{mode} {quote}: {q}: {e}"));
        }
        let _ = c.disconnect().await;
        objects.extend([
            ("VIEW", format!("v{n}")),
            ("PROCEDURE", format!("p{n}")),
            ("FUNCTION", format!("f{n}")),
            ("TRIGGER", format!("tr{n}")),
            ("EVENT", format!("e{n}")),
        ]);
    }
    let cfg = cfg_for("sc_def", s, "sc_def", "sc_def = \"sc_def_copy\"", &start);
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    let mut src = s.connect().await;
    let mut tgt = target().connect().await;
    let q = "SELECT GROUP_CONCAT(CONCAT(a, ':', b) ORDER BY a, b) FROM {db}.t";
    let want: Option<Option<String>> = src
        .query_first(q.replace("{db}", "sc_def"))
        .await
        .expect("source");
    let got: Option<Option<String>> = tgt
        .query_first(q.replace("{db}", "sc_def_copy"))
        .await
        .expect("target");
    assert_eq!(got, want, "the rows");
    // Each definition as the server shows it, the database's name aside.
    for (kind, name) in &objects {
        let show = |db: &str| format!("SHOW CREATE {kind} {db}.{name}");
        let pick = |row: mysql_async::Row| -> String {
            // The definition's column: 2 for views, routines, triggers
            // (after name, sql_mode), 3 for events (after time_zone).
            let i = match *kind {
                "VIEW" => 1,
                "EVENT" => 3,
                _ => 2,
            };
            row.get::<Option<String>, _>(i)
                .flatten()
                .unwrap_or_default()
        };
        let w: mysql_async::Row = src
            .query_first(show("sc_def"))
            .await
            .expect("source")
            .expect("a definition");
        let g: mysql_async::Row = tgt
            .query_first(show("sc_def_copy"))
            .await
            .unwrap_or_else(|e| panic!("{kind} {name} on the copy: {e}"))
            .expect("a definition");
        // (A renamed name is written quoted where the source's was not.)
        let plain = |d: String| {
            d.replace("sc_def_copy", "sc_def")
                .replace("`sc_def`", "sc_def")
                .replace("\"sc_def\"", "sc_def")
                // (With sql_quote_show_create = 0 the server logs the
                // definer's user bare where it stores it quoted: a native
                // replica shows the same.)
                .replace("\"root\"@", "root@")
                .replace("`root`@", "root@")
        };
        // (An event is made DISABLE ON SLAVE on the copy, as on a native
        // replica.)
        let (w, g) = (
            plain(pick(w)),
            plain(pick(g)).replace(" DISABLE ON SLAVE ", " DISABLE "),
        );
        assert_eq!(g, w, "{kind} {name}");
    }
}

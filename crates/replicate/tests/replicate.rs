//! sqlfleet replicate against real servers: independent primaries with
//! live writes (row- and statement-based, DDL half-way, transactions
//! across databases), renames and filters; the oracle is each source
//! database's fingerprint against its target copy.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use mysql_async::prelude::Queryable;
use sqlfleet_replicate::config;
use sqlfleet_replicate::run::{self, Options, Summary};
use sqlfleet_replicate::source::SourceView;
use sqlfleet_testkit::workload::{create_db, exec, exec_transactions, workload};
use sqlfleet_testkit::TestServer;
use tokio::sync::watch;

struct Running {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<Summary, run::RunError>>,
}

fn start(cfg_text: &str, sources: &[&TestServer], opts: Options) -> (config::Checked, Running) {
    let cfg = config::parse(cfg_text).expect("config");
    let targets: Vec<_> = sources.iter().map(|s| s.target()).collect();
    let (tx, rx) = watch::channel(false);
    let views = cfg
        .sources
        .iter()
        .map(|_| Arc::new(Mutex::new(SourceView::default())))
        .collect();
    let c2 = cfg.clone();
    let task =
        tokio::spawn(
            async move { run::run(&c2, &target().target(), &targets, &opts, rx, views).await },
        );
    (cfg, Running { stop: tx, task })
}

impl Running {
    async fn finish(self) -> Summary {
        let _ = self.stop.send(true);
        tokio::time::timeout(Duration::from_secs(60), self.task)
            .await
            .expect("replicate stops within a minute")
            .expect("task")
            .expect("replicate ran")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn live_writes_on_two_sources_with_ddl_renames_filters_and_cross_database_transactions_end_identical(
) {
    let (s0, s1) = (source(0), source(1));
    let (p0, p1) = (binlog_pos(s0).await, binlog_pos(s1).await);
    let cfg = format!(
        r#"
        [target]
        dsn = "{}"
        [apply]
        threads = 3
        batch = 16
        [[source]]
        name = "ra0"
        dsn = "{}"
        include = ["ra_*"]
        start = "gtid:{p0}"
        [[source]]
        name = "ra1"
        dsn = "{}"
        include = ["ra_*"]
        exclude = ["ra_skip"]
        rename = {{ ra_app = "ra_app_two" }}
        start = "gtid:{p1}"
        "#,
        dsn(target()),
        dsn(s0),
        dsn(s1)
    );
    let (_cfg, running) = start(&cfg, &[s0, s1], Options::default());
    for (s, db) in [(s0, "ra_a"), (s0, "ra_b"), (s1, "ra_app"), (s1, "ra_skip")] {
        create_db(s, db).await;
    }
    tokio::join!(
        workload(s0, "ra_a", Some("ra_b"), 1, 240),
        workload(s0, "ra_b", None, 2, 240),
        workload(s1, "ra_app", None, 3, 240),
        workload(s1, "ra_skip", None, 4, 60),
    );
    wait_caught_up("ra0", s0, Duration::from_secs(90)).await;
    wait_caught_up("ra1", s1, Duration::from_secs(90)).await;
    assert_same(s0, "ra_a", "ra_a").await;
    assert_same(s0, "ra_b", "ra_b").await;
    assert_same(s1, "ra_app", "ra_app_two").await;
    let mut t = target().connect().await;
    let dbs: Vec<String> = t.query("SHOW DATABASES LIKE 'ra\\_%'").await.expect("dbs");
    assert_eq!(
        dbs,
        vec!["ra_a", "ra_app_two", "ra_b"],
        "filtered and renamed-away databases are absent"
    );
    let summary = running.finish().await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    assert!(summary.applied > 400, "{summary:?}");
    let restarts: u64 = summary.sources.iter().map(|s| s.reconnects).sum();
    assert_eq!(
        restarts, 0,
        "nothing failed, so nothing restarted: {summary:?}"
    );
    assert_eq!(
        annotated_binlog_statements().await,
        0,
        "the target's binlog must not copy BINLOG statements into Annotate_rows events"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_conflicting_row_stops_only_its_stream_and_skip_moves_past_it() {
    let s = source(2);
    let p = binlog_pos(s).await;
    let cfg_text = format!(
        r#"
        [target]
        dsn = "{}"
        [[source]]
        name = "rc"
        dsn = "{}"
        include = ["rc_*"]
        start = "gtid:{p}"
        "#,
        dsn(target()),
        dsn(s)
    );
    let (cfg, running) = start(&cfg_text, &[s], Options::default());
    create_db(s, "rc_x").await;
    create_db(s, "rc_y").await;
    wait_caught_up("rc", s, Duration::from_secs(60)).await;
    // The target already has the row the source is about to write.
    exec(target(), "INSERT INTO rc_x.t (id, v) VALUES (1000, 0)").await;
    exec(s, "INSERT INTO rc_x.t (id, v) VALUES (1000, 1)").await;
    let conflict = binlog_pos(s).await;
    exec(s, "INSERT INTO rc_x.t (id, v) VALUES (1001, 1)").await;
    for i in 0..20 {
        exec(s, &format!("INSERT INTO rc_y.t (v) VALUES ({i})")).await;
    }
    let sources = vec![s.target()];
    // rc_y goes on; rc_x stops at the conflict, naming it.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let stopped = loop {
        let st = sqlfleet_replicate::status::status(&cfg, &target().target(), &sources)
            .await
            .expect("status");
        let x = st[0].streams.iter().find(|x| x.stream == "rc_x").cloned();
        let y_rows: Option<u64> = {
            let mut c = target().connect().await;
            c.query_first("SELECT COUNT(*) FROM rc_y.t")
                .await
                .expect("count")
        };
        if let Some(x) = x.filter(|x| x.state == "stopped") {
            if y_rows == Some(20) {
                break x;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no stopped rc_x with rc_y applied: {st:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let err = stopped.error.clone().unwrap_or_default();
    assert!(err.contains("1062"), "{err}");
    let g = stopped.error_gtid.clone().expect("the failing GTID");
    let want = conflict.0.values().next().expect("a domain").to_string();
    assert_eq!(g, want, "the error names the conflicting transaction");
    let mut c = target().connect().await;
    let x_rows: Option<u64> = c
        .query_first("SELECT COUNT(*) FROM rc_x.t WHERE id = 1001")
        .await
        .expect("count");
    assert_eq!(
        x_rows,
        Some(0),
        "nothing after the conflict applied in rc_x"
    );

    // skip: recorded, the stream moves past it and catches up.
    sqlfleet_replicate::status::skip(&target().target(), "rc", &g.parse().expect("gtid"), "test")
        .await
        .expect("skip");
    wait_caught_up("rc", s, Duration::from_secs(60)).await;
    let rows: Vec<(i32, i32)> = c
        .query("SELECT id, v FROM rc_x.t WHERE id >= 1000 ORDER BY id")
        .await
        .expect("rows");
    assert_eq!(
        rows,
        vec![(1000, 0), (1001, 1)],
        "the target's row kept, the next applied"
    );
    let st = sqlfleet_replicate::status::status(&cfg, &target().target(), &sources)
        .await
        .expect("status");
    assert_eq!(st[0].skipped, vec![g]);
    assert!(st[0].streams.iter().all(|x| x.state == "ok"), "{st:?}");
    let summary = running.finish().await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_statement_of_many_megabytes_applies_whole_in_pieces_from_a_file_position() {
    let s = source(1);
    // Started from a binlog file:position (translated to GTIDs by the
    // source), with a MyISAM table on the target to be warned about.
    let (file, pos): (String, u64) = {
        let mut c = s.connect().await;
        let r: mysql_async::Row = c
            .query_first("SHOW MASTER STATUS")
            .await
            .expect("master status")
            .expect("binlog on");
        (r.get(0).expect("file"), r.get(1).expect("position"))
    };
    exec(
        target(),
        "CREATE DATABASE IF NOT EXISTS rb_side; CREATE TABLE IF NOT EXISTS rb_side.m (a INT) ENGINE=MyISAM; \
         CREATE DATABASE IF NOT EXISTS not_rb; CREATE TABLE IF NOT EXISTS not_rb.m (a INT) ENGINE=MyISAM",
    )
    .await;
    let cfg_text = format!(
        "[target]\ndsn = \"{}\"\n[[source]]\nname = \"rb\"\ndsn = \"{}\"\ninclude = [\"rb_*\"]\nstart = \"file:{file}:{pos}\"\n",
        dsn(target()),
        dsn(s)
    );
    let (_cfg, running) = start(&cfg_text, &[s], Options::default());
    exec(
        s,
        "CREATE DATABASE rb_big; USE rb_big; CREATE TABLE rb_big.t (id INT PRIMARY KEY, pad VARCHAR(255)) ENGINE=InnoDB; \
         INSERT INTO rb_big.t SELECT seq, REPEAT(CHAR(65 + seq % 26), 250) FROM seq_1_to_60000; \
         UPDATE rb_big.t SET pad = REPEAT('z', 200) WHERE id % 2 = 0",
    )
    .await;
    wait_caught_up("rb", s, Duration::from_secs(120)).await;
    assert_same(s, "rb_big", "rb_big").await;
    let summary = running.finish().await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    assert_eq!(summary.sources[0].reconnects, 0, "{summary:?}");
    assert!(
        summary
            .warnings
            .iter()
            .any(|w| w.contains("rb_side.m is MyISAM")),
        "{:?}",
        summary.warnings
    );
    // A database no source writes into is not replicate's to warn about.
    assert!(
        !summary.warnings.iter().any(|w| w.contains("not_rb.m")),
        "{:?}",
        summary.warnings
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn statement_based_user_variables_replay_with_their_exact_values() {
    let s = source(0);
    let p = binlog_pos(s).await;
    let cfg_text = format!(
        "[target]\ndsn = \"{}\"\n[[source]]\nname = \"ru\"\ndsn = \"{}\"\ninclude = [\"ru_in\"]\nstart = \"gtid:{p}\"\n",
        dsn(target()),
        dsn(s)
    );
    let (_cfg, running) = start(&cfg_text, &[s], Options::default());
    for db in ["ru_in", "ru_out"] {
        exec(
            s,
            &format!(
                "CREATE DATABASE {db}; CREATE TABLE {db}.u (id INT AUTO_INCREMENT PRIMARY KEY, \
                 s VARCHAR(40) CHARACTER SET utf8mb4, l VARCHAR(40) CHARACTER SET latin1, \
                 i BIGINT, u BIGINT UNSIGNED, r DOUBLE, d DECIMAL(30,10), n INT)"
            ),
        )
        .await;
    }
    // Statement-based: each statement's user variables travel as
    // User_var events and must be set to exactly those values.
    for db in ["ru_out", "ru_in", "ru_in"] {
        exec(
            s,
            &format!(
                "SET SESSION binlog_format = 'STATEMENT'; \
                 SET @s = 'é漢x''\\\\', @l = CONVERT('ça' USING latin1), @i = -42, \
                 @u = 18446744073709551615, @r = 1.5e300 / 7, @d = 123.4567890123, @n = NULL; \
                 INSERT INTO {db}.u (s, l, i, u, r, d, n) VALUES (@s, @l, @i, @u, @r, @d, @n); \
                 UPDATE {db}.u SET r = r + @r, s = CONCAT(s, @s) WHERE id = LAST_INSERT_ID()"
            ),
        )
        .await;
    }
    wait_caught_up("ru", s, Duration::from_secs(60)).await;
    assert_same(s, "ru_in", "ru_in").await;
    let summary = running.finish().await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
}

/// A database named outside ASCII, written in statement format by a
/// latin1 session (what a legacy application keeps): its statements
/// replay in latin1 on a worker, and our own text around them — the
/// statement's `USE`, the stream's position in the next chunk — still
/// names the database exactly. A position under a mangled name would make
/// the restart apply the first rows again (1062, a stopped stream).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_latin1_session_in_a_non_ascii_database_keeps_its_name_and_position_across_a_restart() {
    let s = source(0);
    let p = binlog_pos(s).await;
    let db = "rl_caf\u{e9}";
    let cfg_text = format!(
        "[target]\ndsn = \"{}\"\n[apply]\nthreads = 2\n[[source]]\nname = \"rl\"\ndsn = \"{}\"\ninclude = [\"rl_*\"]\nstart = \"gtid:{p}\"\n",
        dsn(target()),
        dsn(s)
    );
    exec(
        s,
        &format!(
            "CREATE DATABASE `{db}`; \
             CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(20) CHARACTER SET latin1)"
        ),
    )
    .await;
    // The database's name goes in while the client is utf8mb4; the
    // statements after SET NAMES are ASCII.
    let write = |from: u32| {
        format!(
            "USE `{db}`; SET SESSION binlog_format = 'STATEMENT'; SET NAMES latin1; \
             INSERT INTO t VALUES ({from}, 'x'), ({}, 'y'); UPDATE t SET v = 'z' WHERE id = {from}",
            from + 1
        )
    };
    exec(s, &write(1)).await;
    let (_cfg, running) = start(&cfg_text, &[s], Options::default());
    wait_caught_up("rl", s, Duration::from_secs(60)).await;
    exec(s, &write(3)).await;
    wait_caught_up("rl", s, Duration::from_secs(60)).await;
    let summary = running.finish().await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    let mut c = target().connect().await;
    let streams: Vec<String> = c
        .exec(
            "SELECT stream FROM sqlfleet.replicate_position WHERE source = ? AND stream <> ''",
            ("rl",),
        )
        .await
        .expect("positions");
    let _ = c.disconnect().await;
    assert_eq!(
        streams,
        vec![db.to_string()],
        "the position names the database exactly"
    );
    exec(s, &write(5)).await;
    let (_cfg, running) = start(&cfg_text, &[s], Options::default());
    wait_caught_up("rl", s, Duration::from_secs(60)).await;
    assert_same(s, db, db).await;
    let summary = running.finish().await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
}

/// One database written by four sessions at once (row format, a hot row
/// in every third transaction, deletes and re-inserts of the same keys):
/// the backlog is applied by four workers with chunks of one stream
/// running beside each other — and the copy is the source's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_hot_database_is_applied_on_several_connections_and_ends_identical() {
    let s = source(2);
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE rp_hot; CREATE TABLE rp_hot.t (id INT PRIMARY KEY, v INT NOT NULL, k INT NOT NULL, KEY (k)); USE rp_hot; \
         INSERT INTO rp_hot.t SELECT seq, 0, seq % 7 FROM seq_1_to_300",
    )
    .await;
    let mut writers = Vec::new();
    for w in 0..4u64 {
        writers.push(tokio::spawn(async move {
            let mut txns = Vec::new();
            for i in 0..400u64 {
                let a = 2 + (i * 37 + w * 101) % 299;
                let b = 2 + (i * 53 + w * 7) % 299;
                let mut sql = format!(
                    "START TRANSACTION; UPDATE rp_hot.t SET v = v + 1 WHERE id = {a}; \
                     DELETE FROM rp_hot.t WHERE id = {b}; INSERT INTO rp_hot.t VALUES ({b}, {i}, {w});"
                );
                if i % 3 == 0 {
                    sql.push_str("UPDATE rp_hot.t SET v = v + 1, k = k + 1 WHERE id = 1;");
                }
                sql.push_str("COMMIT");
                txns.push(sql);
            }
            exec_transactions(source(2), "SET SESSION binlog_format = 'ROW'", &txns).await;
        }));
    }
    for w in writers {
        w.await.expect("writer");
    }
    let summary = catch_up(
        s,
        "threads = 4\nbatch = 16\nbeside = true",
        "rp_*",
        &start.to_string(),
    )
    .await;
    assert_same(s, "rp_hot", "rp_hot").await;
    let p = &summary.parallel;
    assert!(p.ahead > 0, "chunks ran beside each other: {p:?}");
    eprintln!("one hot database: {p:?}");
}

/// The rows statements of a chunk's transactions go to the target as one
/// statement (each table map once): two tables written in one
/// transaction, full and minimal row images, foreign key checks off in
/// some sessions (their rows never merge with the others'), an ALTER
/// half-way. The summary counts the statements merged, and the copy is the
/// source's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_chunks_rows_statements_apply_as_one_and_end_identical() {
    let s = source(2);
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE rp_merge; USE rp_merge; \
         CREATE TABLE a (id INT PRIMARY KEY, v INT NOT NULL, pad CHAR(30) NOT NULL DEFAULT 'x'); \
         CREATE TABLE b (id INT PRIMARY KEY, a_id INT NOT NULL, w VARCHAR(20), KEY (a_id)); \
         INSERT INTO a (id, v) SELECT seq, 0 FROM seq_1_to_200",
    )
    .await;
    let mut writers = Vec::new();
    for w in 0..3u64 {
        writers.push(tokio::spawn(async move {
            let mut session = String::from("SET SESSION binlog_format = 'ROW';");
            if w == 1 {
                session.push_str("SET SESSION binlog_row_image = 'MINIMAL';");
            }
            if w == 2 {
                session.push_str("SET SESSION foreign_key_checks = 0, unique_checks = 0;");
            }
            let mut txns = Vec::new();
            for i in 0..300u64 {
                let a = 1 + (i * 31 + w * 17) % 200;
                let id = w * 1000 + i;
                let mut sql = format!(
                    "START TRANSACTION; UPDATE rp_merge.a SET v = v + 1 WHERE id = {a}; \
                     INSERT INTO rp_merge.b VALUES ({id}, {a}, 'w{w}'); "
                );
                if i % 4 == 0 {
                    sql.push_str(&format!(
                        "DELETE FROM rp_merge.b WHERE id = {};",
                        id.saturating_sub(2)
                    ));
                }
                sql.push_str("COMMIT");
                txns.push(sql);
                if w == 0 && i == 150 {
                    txns.push(
                        "ALTER TABLE rp_merge.a ADD COLUMN extra INT NOT NULL DEFAULT 5".into(),
                    );
                }
            }
            exec_transactions(source(2), &session, &txns).await;
        }));
    }
    for w in writers {
        w.await.expect("writer");
    }
    let summary = catch_up(s, "threads = 2", "rp_merge", &start.to_string()).await;
    assert_same(s, "rp_merge", "rp_merge").await;
    let p = &summary.parallel;
    assert!(
        p.merged > 100,
        "most of 900 transactions' statements merged: {p:?}"
    );
    eprintln!("merged: {p:?}");
}

/// Runs `replicate --until-caught-up` of source `s` (databases `include`,
/// from GTID `start`) with the `[apply]` settings given; no stream stops.
async fn catch_up(s: &'static TestServer, apply: &str, include: &str, start: &str) -> Summary {
    let cfg = config::parse(&format!(
        "[target]\ndsn = \"{}\"\n[apply]\n{apply}\n[[source]]\nname = \"rp\"\ndsn = \"{}\"\ninclude = [\"{include}\"]\nstart = \"gtid:{start}\"\n",
        dsn(target()),
        dsn(s)
    ))
    .expect("config");
    let (_tx, rx) = watch::channel(false);
    let views = vec![Arc::new(Mutex::new(SourceView::default()))];
    let opts = Options {
        threads: None,
        until_caught_up: true,
        give_up_after: None,
    };
    let summary = tokio::time::timeout(
        Duration::from_secs(120),
        run::run(&cfg, &target().target(), &[s.target()], &opts, rx, views),
    )
    .await
    .expect("catches up")
    .expect("runs");
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    summary
}

/// A transaction the source rolled back after changing a MyISAM table is
/// logged (ending in ROLLBACK) because that change stays; a native
/// replica applies it and rolls back, keeping what the rollback does not
/// undo. So does replicate, in every binlog format, in one database (a
/// worker's chunk), across two (the source's own connection), after a
/// rollback to a savepoint, and with a temporary table the transaction
/// made (its session's connection) — and the streams go on after it.
/// (The code before refused each: "a transaction the source rolled back
/// after changing a non-transactional table", its stream stopped.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_transaction_the_source_rolled_back_keeps_only_what_the_rollback_did_not_undo() {
    let s = source(1);
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE rb_a; CREATE DATABASE rb_b; \
         CREATE TABLE rb_a.m (id INT PRIMARY KEY, v INT) ENGINE=MyISAM; \
         CREATE TABLE rb_a.i (id INT PRIMARY KEY, v INT) ENGINE=InnoDB; \
         CREATE TABLE rb_b.i (id INT PRIMARY KEY, v INT) ENGINE=InnoDB; \
         INSERT INTO rb_a.m VALUES (1, 0), (2, 0)",
    )
    .await;
    for (k, format) in ["ROW", "MIXED", "STATEMENT"].iter().enumerate() {
        let n = 10 * (k + 1);
        exec(
            s,
            &format!(
                "SET SESSION binlog_format = '{format}'; USE rb_a; \
                 START TRANSACTION; INSERT INTO i VALUES ({n}, 1); \
                 UPDATE m SET v = v + 1 WHERE id = 1; INSERT INTO i VALUES ({}, 1); ROLLBACK; \
                 START TRANSACTION; INSERT INTO rb_b.i VALUES ({n}, 1); \
                 INSERT INTO m VALUES ({n}, 1); ROLLBACK; \
                 START TRANSACTION; INSERT INTO i VALUES ({}, 1); SAVEPOINT s1; \
                 UPDATE m SET v = v + 10 WHERE id = 2; INSERT INTO i VALUES ({}, 1); \
                 ROLLBACK TO SAVEPOINT s1; INSERT INTO i VALUES ({}, 1); ROLLBACK; \
                 START TRANSACTION; CREATE TEMPORARY TABLE tt (id INT) ENGINE=InnoDB; \
                 INSERT INTO tt VALUES ({n}); INSERT INTO m SELECT id + 1, 2 FROM tt; ROLLBACK; \
                 DROP TEMPORARY TABLE tt; \
                 INSERT INTO i VALUES ({}, 9)",
                n + 1,
                n + 2,
                n + 3,
                n + 4,
                n + 5,
            ),
        )
        .await;
    }
    let cfg = cfg_for("rb", s, "rb_*", "", &start);
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    assert_same(s, "rb_a", "rb_a").await;
    assert_same(s, "rb_b", "rb_b").await;
    // The claim itself: the MyISAM changes there, the InnoDB ones not.
    let mut c = target().connect().await;
    let m: Vec<(i32, i32)> = c
        .query("SELECT id, v FROM rb_a.m ORDER BY id")
        .await
        .expect("m");
    assert_eq!(
        m,
        [
            (1, 3),
            (2, 30),
            (10, 1),
            (11, 2),
            (20, 1),
            (21, 2),
            (30, 1),
            (31, 2)
        ],
        "every MyISAM change of the rolled-back transactions, once"
    );
    let i: Vec<i32> = c
        .query("SELECT id FROM rb_a.i UNION ALL SELECT id FROM rb_b.i ORDER BY 1")
        .await
        .expect("i");
    assert_eq!(i, [15, 25, 35], "only the committed InnoDB rows");
    let _ = c.disconnect().await;
}

/// `ALTER DATABASE` without a name alters the default database: its
/// copy (renamed here) takes the new default character set, and so the
/// tables made after it, as on the source. (The code before filtered the
/// statement away as naming no database: the copy's next CREATE TABLE
/// made a utf8mb4 table where the source's is latin1, every stream ok.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_alter_database_without_a_name_alters_the_default_databases_copy() {
    let s = source(2);
    let start = binlog_pos(s).await;
    exec(
        s,
        "CREATE DATABASE ad_a; USE ad_a; ALTER DATABASE CHARACTER SET latin1; \
         CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(10)); INSERT INTO t VALUES (1, 'caf\u{e9}'); \
         ALTER SCHEMA COMMENT 'renamed copy'; \
         ALTER DATABASE DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin; \
         CREATE TABLE u (id INT PRIMARY KEY, s VARCHAR(10))",
    )
    .await;
    let cfg = cfg_for("ad", s, "ad_a", "ad_a = \"ad_a_r\"", &start);
    let summary = until_caught_up(&cfg, s).await;
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    assert_same(s, "ad_a", "ad_a_r").await;
    let mut c = target().connect().await;
    let db: Option<(String, String)> = c
        .query_first(
            "SELECT default_collation_name, schema_comment FROM information_schema.schemata \
             WHERE schema_name = 'ad_a_r'",
        )
        .await
        .expect("schema");
    assert_eq!(
        db,
        Some(("utf8mb4_bin".into(), "renamed copy".into())),
        "the copy's own options"
    );
    let t: Option<String> = c
        .query_first(
            "SELECT table_collation FROM information_schema.tables \
             WHERE table_schema = 'ad_a_r' AND table_name = 't'",
        )
        .await
        .expect("table");
    assert_eq!(t.as_deref(), Some("latin1_swedish_ci"));
    let _ = c.disconnect().await;
}

//! Transaction pooling: session state follows a client from one backend
//! connection to another, anything that cannot follow pins the client
//! (and the pin is released when it is safe), prepared statements are
//! re-prepared where they run.

mod common;

use std::time::Duration;

use common::relay::{app, cli, start_relay, Relay};
use mysql_async::prelude::Queryable;
use sqlfleet_testkit::server;

async fn connect(relay: &Relay, db: Option<&str>) -> mysql_async::Conn {
    app(relay.port, "app-pw", db)
        .connect(Duration::from_secs(5))
        .await
        .expect("connect via relay")
}

/// The server thread of the backend connection a statement ran on, read
/// without asking CONNECTION_ID() (which pins the client to keep its
/// answer true).
async fn conn_id(c: &mut mysql_async::Conn) -> u64 {
    c.query_first("SELECT @@pseudo_thread_id")
        .await
        .expect("id")
        .expect("row")
}

/// Whether another client finds the relay's only backend connection
/// taken (a one-connection pool: error 1040 once the wait times out).
fn held(relay: &Relay) -> bool {
    let o = cli(relay.port, &["-e", "SELECT 1"]);
    !o.status.success() && common::stderr(&o).contains("1040")
}

#[test]
fn settings_and_database_follow_the_client_to_another_backend_connection() {
    let srv = server();
    // One backend connection: B must get the one A used, and A gets it
    // back after B: each time the other's session state must be undone
    // and the client's own replayed.
    let relay = start_relay(srv, &["--pool-max", "1"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("relaytxn").await;
        let (home, _) = srv.fresh_db("relaytxnhome").await;
        let mut a = connect(&relay, Some(&home)).await;
        let mut b = connect(&relay, Some(&home)).await;
        a.query_drop(format!("USE `{db}`")).await.expect("use");
        a.query_drop("SET SESSION sql_mode = 'ANSI_QUOTES', time_zone = '+03:00'")
            .await
            .expect("set");
        let x = conn_id(&mut a).await;
        // B takes the connection A used: A's settings are undone for B.
        b.query_drop("BEGIN").await.expect("begin");
        let (bx, mode, tz, bdb): (u64, String, String, Option<String>) = b
            .query_first(
                "SELECT @@pseudo_thread_id, @@session.sql_mode, @@session.time_zone, DATABASE()",
            )
            .await
            .expect("b")
            .expect("row");
        assert_eq!(bx, x, "B runs on the connection A used");
        assert_ne!(mode, "ANSI_QUOTES");
        assert_eq!(tz, "SYSTEM");
        assert_eq!(bdb.as_deref(), Some(home.as_str()));
        b.query_drop("SET SESSION time_zone = '-05:00'")
            .await
            .expect("b set");
        b.query_drop("COMMIT").await.expect("commit");
        // A again, on the connection B just used: B's setting undone, A's
        // settings and database replayed.
        let (ay, mode, tz, adb): (u64, String, String, Option<String>) = a
            .query_first(
                "SELECT @@pseudo_thread_id, @@session.sql_mode, @@session.time_zone, DATABASE()",
            )
            .await
            .expect("a")
            .expect("row");
        assert_eq!(ay, x, "A is back on the one connection");
        assert_eq!(mode, "ANSI_QUOTES");
        assert_eq!(tz, "+03:00");
        assert_eq!(adb.as_deref(), Some(db.as_str()));
        assert!(relay.metric("sqlfleet_relay_state_syncs_total") >= 2.0);
        a.disconnect().await.expect("quit");
        b.disconnect().await.expect("quit");
    });
}

#[test]
fn pins_hold_the_connection_and_release_when_safe() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "1", "--wait-timeout", "1"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("relaypin"));
    cli(
        relay.port,
        &[
            "-D",
            &db,
            "-e",
            "CREATE TABLE t (a INT); CREATE SEQUENCE sq; \
             CREATE FUNCTION f_seq() RETURNS BIGINT DETERMINISTIC RETURN NEXTVAL(sq)",
        ],
    );
    // (statement that pins, check it still sees its state, statement that releases, metric reason)
    let cases: &[(&str, &str, Option<&str>, &str)] = &[
        ("SET @x = 41", "SELECT @x + 1", None, "user_variable"),
        (
            "CREATE TEMPORARY TABLE tt (a INT)",
            "SELECT COUNT(*) FROM tt",
            Some("DROP TEMPORARY TABLE tt"),
            "temporary_table",
        ),
        (
            "LOCK TABLES t READ",
            "SELECT COUNT(*) FROM t",
            Some("UNLOCK TABLES"),
            "lock_tables",
        ),
        (
            "SELECT GET_LOCK('relay-pin', 1)",
            "SELECT IS_FREE_LOCK('relay-pin') = 0",
            Some("SELECT RELEASE_LOCK('relay-pin')"),
            "get_lock",
        ),
        (
            "SELECT GET_LOCK(CONCAT('relay-', 'pin2'), 1)",
            "SELECT 1",
            Some("SELECT RELEASE_ALL_LOCKS()"),
            "get_lock",
        ),
        (
            "PREPARE s FROM 'SELECT 1'",
            "EXECUTE s",
            None,
            "text_prepare",
        ),
        // (A SET to a computed value is replayed from the server's report
        // instead: a_set_to_a_computed_value_is_replayed_not_pinned.)
        (
            "SET ROLE NONE",
            "SELECT CURRENT_ROLE() IS NULL",
            None,
            "set_expression",
        ),
        (
            "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            "BEGIN",
            Some("COMMIT"),
            "set_transaction",
        ),
        ("BEGIN", "INSERT INTO t VALUES (1)", Some("ROLLBACK"), ""),
        // The session's counters: its later reads count on one connection.
        (
            "SHOW SESSION STATUS LIKE 'Com_select'",
            "SELECT 1",
            None,
            "session_status",
        ),
        // LASTVAL lives on the connection NEXTVAL ran on.
        (
            "SELECT NEXTVAL(sq)",
            "SELECT LASTVAL(sq) = 1",
            None,
            "sequence",
        ),
        // A stored function may advance a sequence (or take a user lock)
        // out of the tracker's sight: it holds the connection as CALL does.
        (
            "SELECT f_seq()",
            "SELECT LASTVAL(sq) = 2",
            None,
            "stored_function",
        ),
    ];
    rt.block_on(async {
        for (pin, check, release, reason) in cases {
            let mut a = connect(&relay, Some(&db)).await;
            a.query_drop(*pin)
                .await
                .unwrap_or_else(|e| panic!("{pin}: {e}"));
            // Another client cannot get the only backend connection.
            let o = cli(relay.port, &["-e", "SELECT 1"]);
            assert!(
                !o.status.success() && common::stderr(&o).contains("1040"),
                "{pin}: {}",
                common::stderr(&o)
            );
            a.query_drop(*check)
                .await
                .unwrap_or_else(|e| panic!("{check}: {e}"));
            if let Some(r) = release {
                a.query_drop(*r).await.expect("release");
                let o = cli(relay.port, &["-e", "SELECT 1"]);
                assert!(
                    o.status.success(),
                    "{pin}: after {r}: {}",
                    common::stderr(&o)
                );
            }
            a.disconnect().await.expect("quit");
            // Quitting always gives the connection back, reset.
            let o = cli(relay.port, &["-e", "SELECT @x IS NULL"]);
            assert_eq!(
                common::stdout(&o).trim(),
                "1",
                "{pin}: {}",
                common::stderr(&o)
            );
            if !reason.is_empty() {
                let n = relay.metric(&format!("sqlfleet_relay_pins_total{{reason=\"{reason}\"}}"));
                assert!(n >= 1.0, "{reason} not counted");
            }
        }
    });
}

#[test]
fn last_insert_id_and_found_rows_read_after_the_write() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "2"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("relaylid").await;
        let mut a = connect(&relay, Some(&db)).await;
        let mut b = connect(&relay, Some(&db)).await;
        a.query_drop("CREATE TABLE ai (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
            .await
            .expect("create");
        for i in 0..20 {
            // B keeps taking connections in between.
            b.query_drop("INSERT INTO ai (v) VALUES (0)")
                .await
                .expect("b insert");
            a.query_drop(format!("INSERT INTO ai (v) VALUES ({i} + 1)"))
                .await
                .expect("a insert");
            let id: u64 = a
                .query_first("SELECT LAST_INSERT_ID()")
                .await
                .expect("lid")
                .expect("row");
            let v: i64 = a
                .query_first(format!("SELECT v FROM ai WHERE id = {id}"))
                .await
                .expect("v")
                .expect("row");
            assert_eq!(v, i + 1, "LAST_INSERT_ID from the right connection");
        }
        let _: Vec<i64> = a
            .query("SELECT SQL_CALC_FOUND_ROWS id FROM ai LIMIT 1")
            .await
            .expect("calc");
        let n: u64 = a
            .query_first("SELECT FOUND_ROWS()")
            .await
            .expect("fr")
            .expect("row");
        assert_eq!(n, 40);
        // Right without holding A's connection for it: the id travels with
        // A's session state to whichever connection runs A's next statement.
        assert_eq!(
            relay.metric("sqlfleet_relay_pins_total{reason=\"last_insert_id\"}"),
            0.0
        );
    });
}

#[test]
fn prepared_statements_move_between_backend_connections() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "2"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("relayps").await;
        let mut a = connect(&relay, Some(&db)).await;
        let mut b = connect(&relay, Some(&db)).await;
        a.query_drop("CREATE TABLE p (id INT PRIMARY KEY, s VARCHAR(20), d DOUBLE)")
            .await
            .expect("create");
        let stmt = a
            .prep("SELECT ? + 1, @@pseudo_thread_id")
            .await
            .expect("prepare");
        let (v, x): (i64, u64) = a.exec_first(&stmt, (1,)).await.expect("exec").expect("row");
        assert_eq!(v, 2);
        // B holds A's connection in a transaction; A's next execute runs elsewhere.
        b.query_drop("BEGIN").await.expect("begin");
        let bx = conn_id(&mut b).await;
        assert_eq!(bx, x);
        let (v, y): (i64, u64) = a
            .exec_first(&stmt, (41,))
            .await
            .expect("exec")
            .expect("row");
        assert_eq!(v, 42);
        assert_ne!(y, x, "re-prepared on another backend connection");
        // Parameter types change between executes; NULLs and strings work.
        let ins = a
            .prep("INSERT INTO p VALUES (?, ?, ?)")
            .await
            .expect("prepare insert");
        a.exec_drop(&ins, (1, "one", 1.5)).await.expect("insert 1");
        b.query_drop("COMMIT").await.expect("commit");
        b.query_drop("BEGIN").await.expect("begin");
        a.exec_drop(&ins, (2, None::<String>, "2.5"))
            .await
            .expect("insert 2");
        a.exec_drop(&ins, (3u8, "three", 3))
            .await
            .expect("insert 3");
        b.query_drop("COMMIT").await.expect("commit");
        let rows: Vec<(i64, Option<String>, f64)> = a
            .query("SELECT id, s, d FROM p ORDER BY id")
            .await
            .expect("rows");
        assert_eq!(
            rows,
            vec![
                (1, Some("one".into()), 1.5),
                (2, None, 2.5),
                (3, Some("three".into()), 3.0)
            ]
        );
        a.close(stmt).await.expect("close");
        a.close(ins).await.expect("close");
        // An error from a prepared statement reaches the client.
        let e = a.prep("SELECT * FROM missing").await.expect_err("no table");
        assert!(e.to_string().contains("1146"), "{e}");
        assert!(relay.metric("sqlfleet_relay_reprepares_total") >= 1.0);
        a.disconnect().await.expect("quit");
        b.disconnect().await.expect("quit");
    });
}

#[test]
fn reset_and_change_user() {
    let srv = server();
    let relay = start_relay(srv, &[]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("relaycu").await;
        let mut a = connect(&relay, None).await;
        a.query_drop("SET @v = 1, SESSION sql_mode = 'ANSI_QUOTES'")
            .await
            .expect("set");
        assert!(a.reset().await.expect("reset"), "COM_RESET_CONNECTION used");
        let (v, mode): (Option<i64>, String) = a
            .query_first("SELECT @v, @@session.sql_mode")
            .await
            .expect("q")
            .expect("row");
        assert_eq!(v, None);
        assert_ne!(mode, "ANSI_QUOTES");
        let pw = srv.sandbox.password().expect("pw");
        a.change_user(
            mysql_async::ChangeUserOpts::default()
                .with_user(Some("root".into()))
                .with_pass(Some(pw.expose().to_string()))
                .with_db_name(Some(db.clone())),
        )
        .await
        .expect("change user");
        let d: Option<String> = a
            .query_first("SELECT DATABASE()")
            .await
            .expect("db")
            .expect("row");
        assert_eq!(d.as_deref(), Some(db.as_str()));
        let e = a
            .change_user(
                mysql_async::ChangeUserOpts::default()
                    .with_user(Some("app".into()))
                    .with_pass(Some("wrong".into())),
            )
            .await
            .expect_err("wrong password");
        assert!(e.to_string().contains("1045"), "{e}");
    });
}

/// COM_CHANGE_USER ends the old session before it answers, as the
/// server's does: a named lock the client held is free for everyone once
/// the client hears OK (the relay reset the pinned connection off the
/// client's path, and another connection still found it held).
#[test]
fn change_user_frees_named_locks_before_it_answers() {
    let srv = server();
    let relay = start_relay(srv, &[]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let mut direct = srv.connect().await;
        for i in 0..20 {
            let mut a = connect(&relay, None).await;
            let name = format!("sqlfleet_change_user_{i}");
            let got: Option<i64> = a
                .query_first(format!("SELECT GET_LOCK('{name}', 0)"))
                .await
                .expect("get_lock");
            assert_eq!(got, Some(1));
            a.change_user(
                mysql_async::ChangeUserOpts::default()
                    .with_user(Some("app".into()))
                    .with_pass(Some("app-pw".into())),
            )
            .await
            .expect("change user");
            let free: Option<i64> = direct
                .query_first(format!("SELECT IS_FREE_LOCK('{name}')"))
                .await
                .expect("is_free_lock");
            assert_eq!(
                free,
                Some(1),
                "round {i}: the lock was still held after COM_CHANGE_USER answered"
            );
            a.disconnect().await.expect("quit");
        }
    });
}

#[test]
fn multiple_results_local_infile_and_cli_round_trip() {
    let srv = server();
    let relay = start_relay(srv, &[]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("relaymr"));
    let dir = tempfile::tempdir().expect("tmp");
    let csv = dir.path().join("rows.tsv");
    let mut text = String::new();
    for i in 0..5000 {
        text.push_str(&format!("{i}\tline {i}\n"));
    }
    std::fs::write(&csv, text).expect("write");
    let o = cli(
        relay.port,
        &[
            "-D",
            &db,
            "--local-infile=1",
            "-e",
            &format!(
                "CREATE TABLE l (id INT PRIMARY KEY, s TEXT);\n\
                 LOAD DATA LOCAL INFILE '{}' INTO TABLE l;\n\
                 DELIMITER //\n\
                 CREATE PROCEDURE two() BEGIN SELECT COUNT(*) FROM l; SELECT MAX(id) FROM l; END//\n\
                 DELIMITER ;\n\
                 CALL two(); SELECT 'after'",
                csv.display()
            ),
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(
        common::stdout(&o).split_whitespace().collect::<Vec<_>>(),
        vec!["5000", "4999", "after"]
    );
}

/// Asking CONNECTION_ID() keeps the answer true: the client stays on that
/// backend connection, and KILL with that id reaches it.
#[test]
fn connection_id_pins_and_names_the_client_for_kill() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "2"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let mut a = connect(&relay, None).await;
        let id: u64 = a
            .query_first("SELECT CONNECTION_ID()")
            .await
            .expect("id")
            .expect("row");
        // Another client cannot take A's connection now.
        let mut b = connect(&relay, None).await;
        for _ in 0..5 {
            assert_ne!(conn_id(&mut b).await, id);
            assert_eq!(conn_id(&mut a).await, id);
        }
        // KILL QUERY with that id stops A's statement, not someone else's.
        let sleeper = tokio::spawn(async move {
            let r: Result<Option<i64>, _> = a.query_first("SELECT SLEEP(30)").await;
            (r, a)
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        b.query_drop(format!("KILL QUERY {id}"))
            .await
            .expect("kill");
        let (r, _a) = tokio::time::timeout(Duration::from_secs(10), sleeper)
            .await
            .expect("A's statement stopped")
            .expect("task");
        // Interrupted: SLEEP returns 1 or the statement fails with 1317.
        match r {
            Ok(v) => assert_eq!(v, Some(1)),
            Err(e) => assert!(e.to_string().contains("1317"), "{e}"),
        }
        // An id that names no client is refused, not passed to the server.
        let e = b.query_drop("KILL QUERY 1").await.expect_err("unknown id");
        assert!(e.to_string().contains("1094"), "{e}");
    });
}

/// With one shared account, a client cannot end another client's session
/// by a KILL the relay does not read (the server would kill as the
/// account every client shares): the grammar's expressions and query
/// ids, a KILL among statements or in a compound one, a routine or event
/// body, and dynamic SQL, each aimed at the server thread holding another
/// client's open transaction. Each is refused with 1235; the transaction
/// runs on and commits. In both pooling modes (session mode reads only
/// the first words of most texts). Dynamic SQL from a variable runs when
/// the variable's value (read first) kills nothing; from an expression,
/// only where the config says `shared_dynamic_sql = "run"`.
#[test]
fn a_kill_the_relay_cannot_read_is_refused_with_one_shared_account() {
    let srv = server();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    for mode in ["transaction", "session"] {
        let relay = start_relay(srv, &["--mode", mode]);
        let (db, _) = rt.block_on(srv.fresh_db("relaykill"));
        rt.block_on(async {
            let mut a = connect(&relay, Some(&db)).await;
            a.query_drop("CREATE TABLE t (id INT PRIMARY KEY)")
                .await
                .expect("table");
            a.query_drop("BEGIN").await.expect("begin");
            a.query_drop("INSERT INTO t VALUES (1)")
                .await
                .expect("insert");
            let sleeper = tokio::spawn(async move {
                let r: Result<Option<i64>, _> = a.query_first("SELECT SLEEP(4)").await;
                (r.map_err(|e| e.to_string()), a)
            });
            let mut root = srv.connect().await;
            let mut thread = None;
            for _ in 0..50 {
                thread = root
                    .query_first(
                        "SELECT ID FROM information_schema.PROCESSLIST \
                         WHERE INFO = 'SELECT SLEEP(4)'",
                    )
                    .await
                    .expect("processlist");
                if thread.is_some() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let id: u64 = thread.expect("A's statement runs");
            let mut b = connect(&relay, Some(&db)).await;
            b.query_drop(format!("SET @k = {id}, @q = 'KILL {id}'"))
                .await
                .expect("b's variables");
            for sql in [
                format!("KILL ({id})"),
                format!("KILL CONNECTION 0 + {id}"),
                "KILL @k".to_string(),
                format!("KILL QUERY ID {id}"),
                format!("/* first */ KILL ({id})"),
                format!("SET STATEMENT max_statement_time = 10 FOR KILL ({id})"),
                format!("BEGIN NOT ATOMIC KILL {id}; END"),
                format!("IF 1 THEN KILL {id}; END IF"),
                format!("CREATE PROCEDURE p{id}() KILL {id}"),
                format!("EXECUTE IMMEDIATE 'KILL {id}'"),
                format!("EXECUTE IMMEDIATE 'KI\\LL {id}'"),
                "EXECUTE IMMEDIATE @q".to_string(),
                "PREPARE s FROM @q".to_string(),
                format!("PREPARE s FROM 'KILL {id}'"),
            ] {
                let e = b
                    .query_drop(&sql)
                    .await
                    .expect_err(&format!("{mode}: {sql} is refused"));
                assert!(e.to_string().contains("1235"), "{mode}: {sql}: {e}");
            }
            // A variable read back in a character set whose text is not
            // ASCII's (the KILL would hide between its zero bytes).
            b.query_drop("SET character_set_results = utf16")
                .await
                .expect("utf16 results");
            let e = b
                .query_drop("EXECUTE IMMEDIATE @q")
                .await
                .expect_err("read in utf16, still refused");
            assert!(e.to_string().contains("1235"), "{mode}: utf16: {e}");
            b.query_drop("SET character_set_results = utf8mb4")
                .await
                .expect("back to utf8mb4");
            // As a prepared statement too.
            let e = b.prep("KILL ?").await.expect_err("KILL ? is refused");
            assert!(e.to_string().contains("1235"), "{mode}: KILL ?: {e}");
            let (slept, mut a) = tokio::time::timeout(Duration::from_secs(15), sleeper)
                .await
                .expect("A's statement ends")
                .expect("join");
            assert_eq!(slept, Ok(Some(0)), "{mode}: A's statement ran to its end");
            a.query_drop("COMMIT")
                .await
                .expect("A's transaction commits");
            let n: Option<i64> = root
                .query_first(format!("SELECT COUNT(*) FROM `{db}`.t"))
                .await
                .expect("count");
            assert_eq!(n, Some(1), "{mode}: A's row is there");
            // B's session is whole: a plain query still runs, and so does
            // dynamic SQL from one plain string.
            let one: Option<i64> = b.query_first("SELECT 1").await.expect("b goes on");
            assert_eq!(one, Some(1));
            let one: Option<i64> = b
                .query_first("EXECUTE IMMEDIATE 'SELECT ?' USING 1")
                .await
                .expect("a plain string runs");
            assert_eq!(one, Some(1));
            // ... and from a variable whose value (read first) kills nothing.
            b.query_drop("SET @q = 'SELECT 7'").await.expect("set");
            let seven: Option<i64> = b
                .query_first("EXECUTE IMMEDIATE @q")
                .await
                .expect("a variable's harmless text runs");
            assert_eq!(seven, Some(7));
            b.query_drop("PREPARE s FROM @q").await.expect("prepare");
            let seven: Option<i64> = b.query_first("EXECUTE s").await.expect("execute");
            assert_eq!(seven, Some(7));
            let e = b
                .query_drop("EXECUTE IMMEDIATE CONCAT('SELECT ', 7)")
                .await
                .expect_err("an expression's text is not read");
            assert!(e.to_string().contains("1235"), "{mode}: {e}");
        });
    }
    // Where the config lets dynamic SQL the relay cannot read run, it
    // runs; a KILL it can see is refused still.
    let relay = start_relay(srv, &["--shared-dynamic-sql", "run"]);
    rt.block_on(async {
        let mut b = connect(&relay, None).await;
        let seven: Option<i64> = b
            .query_first("EXECUTE IMMEDIATE CONCAT('SELECT ', 7)")
            .await
            .expect("runs where the config says run");
        assert_eq!(seven, Some(7));
        let e = b
            .query_drop("KILL @k")
            .await
            .expect_err("KILL @k still is not");
        assert!(e.to_string().contains("1235"), "{e}");
    });
}

/// With one shared account, a client cannot change that account: its
/// password or default role (which the server lets any account change
/// for itself, without a privilege), nor its privileges, limits or name —
/// every client would then log in with the new password or run with the
/// new rights. (The statements here would change nothing if they ran —
/// the same password, no default role — so a failure leaves the fixture
/// whole.) Another account's can be changed, as the shared account's
/// privileges allow.
#[test]
fn a_client_cannot_change_the_shared_account_itself() {
    let srv = server();
    let pw = srv.sandbox.password().expect("pw");
    let pw = pw.expose().replace('\'', "''");
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("relayownacct"));
    for mode in ["transaction", "session"] {
        let relay = start_relay(srv, &["--mode", mode]);
        rt.block_on(async {
            let mut c = connect(&relay, Some(&db)).await;
            c.query_drop("SET @own = 'SET DEFAULT ROLE NONE'")
                .await
                .expect("a variable");
            for sql in [
                format!("SET PASSWORD = PASSWORD('{pw}')"),
                format!("SET PASSWORD FOR CURRENT_USER() = PASSWORD('{pw}')"),
                format!("SET PASSWORD FOR root@localhost = PASSWORD('{pw}')"),
                "SET DEFAULT ROLE NONE".to_string(),
                "SET DEFAULT ROLE NONE FOR 'root'@'localhost'".to_string(),
                "ALTER USER CURRENT_USER() WITH MAX_USER_CONNECTIONS 0".to_string(),
                "GRANT USAGE ON *.* TO `root`@`localhost`".to_string(),
                // Where the statement reader alone would not look.
                format!("BEGIN NOT ATOMIC SET PASSWORD = PASSWORD('{pw}'); END"),
                format!(
                    "BEGIN NOT ATOMIC DECLARE CONTINUE HANDLER FOR SQLEXCEPTION \
                 SET PASSWORD = PASSWORD('{pw}'); SIGNAL SQLSTATE '45000'; END"
                ),
                "IF 1 THEN SET DEFAULT ROLE NONE; END IF".to_string(),
                format!(
                    "EXECUTE IMMEDIATE 'SET PASSWORD = PASSWORD(''{}'')'",
                    pw.replace('\'', "''")
                ),
                "EXECUTE IMMEDIATE @own".to_string(),
                // A stored body runs later, as the same account.
                format!("CREATE PROCEDURE pw_{mode}() SET PASSWORD = PASSWORD('{pw}')"),
                format!(
                    "CREATE PROCEDURE role_{mode}() BEGIN DECLARE EXIT HANDLER FOR SQLEXCEPTION \
                     SET DEFAULT ROLE NONE; SIGNAL SQLSTATE '45000'; END"
                ),
                format!("CREATE EVENT ev_{mode} ON SCHEDULE AT NOW() DO SET DEFAULT ROLE NONE"),
            ] {
                let shown = sql.replace(&pw, "***");
                let e = c
                    .query_drop(&sql)
                    .await
                    .expect_err(&format!("{shown} is refused"));
                let e = e.to_string();
                assert!(
                    e.contains("1227") && e.contains("sqlfleet relay"),
                    "{mode}: {shown}: {e}"
                );
            }
            c.query_drop(
                "CREATE USER IF NOT EXISTS 'shared_other'@'%'; \
             SET PASSWORD FOR 'shared_other'@'%' = PASSWORD('other-pw'); \
             DROP USER 'shared_other'@'%'",
            )
            .await
            .expect("another account's password is the shared account's to change");
            // A table's password column is no account; a routine whose
            // dynamic SQL the relay cannot read is refused as the same
            // text run now would be.
            c.query_drop(format!(
                "CREATE TABLE IF NOT EXISTS users (id INT PRIMARY KEY, password TEXT); \
                 CREATE OR REPLACE PROCEDURE reset_{mode}(v TEXT) \
                 UPDATE users SET password = v WHERE id = 1"
            ))
            .await
            .expect("a routine that updates a password column");
            let e = c
                .query_drop(format!(
                    "CREATE PROCEDURE run_{mode}(q TEXT) EXECUTE IMMEDIATE q"
                ))
                .await
                .expect_err("dynamic SQL in a body the relay cannot read");
            assert!(e.to_string().contains("1235"), "{mode}: {e}");
            let mut routines: Vec<String> = c
                .query(format!(
                    "SELECT ROUTINE_NAME FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = '{db}' \
                     UNION ALL SELECT EVENT_NAME FROM information_schema.EVENTS WHERE EVENT_SCHEMA = '{db}'"
                ))
                .await
                .expect("routines");
            routines.retain(|r| r.ends_with(mode));
            assert_eq!(routines, vec![format!("reset_{mode}")], "{mode}");
            // Every client still logs in.
            let mut d = connect(&relay, None).await;
            let one: Option<i64> = d.query_first("SELECT 1").await.expect("select");
            assert_eq!(one, Some(1));
        });
    }
}

/// Named locks nest: taken twice and released once, the lock is still
/// held, so the client keeps its connection; the second release frees it.
/// A temporary table dropped while another remains keeps the pin too.
#[test]
fn pins_release_only_when_nothing_is_left() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "1", "--wait-timeout", "1"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("relaypin2"));
    let other_gets_in = || cli(relay.port, &["-e", "SELECT 1"]).status.success();
    rt.block_on(async {
        let mut a = connect(&relay, Some(&db)).await;
        a.query_drop("SELECT GET_LOCK('n', 1), GET_LOCK('n', 1)")
            .await
            .expect("lock twice");
        a.query_drop("SELECT RELEASE_LOCK('n')")
            .await
            .expect("release once");
        assert!(
            !other_gets_in(),
            "released once of twice: still held, still pinned"
        );
        a.query_drop("SELECT RELEASE_LOCK('n')")
            .await
            .expect("release twice");
        assert!(other_gets_in(), "both released: the connection is free");

        a.query_drop("CREATE TEMPORARY TABLE t1 (a INT)")
            .await
            .expect("t1");
        a.query_drop("CREATE TEMPORARY TABLE t2 (a INT)")
            .await
            .expect("t2");
        a.query_drop("DROP TEMPORARY TABLE t1")
            .await
            .expect("drop t1");
        assert!(!other_gets_in(), "t2 is still there: still pinned");
        let n: Option<i64> = a
            .query_first("SELECT COUNT(*) FROM t2")
            .await
            .expect("t2 is ours");
        assert_eq!(n, Some(0));
        a.query_drop("DROP TEMPORARY TABLE t2")
            .await
            .expect("drop t2");
        assert!(
            other_gets_in(),
            "no temporary table left: the connection is free"
        );
        a.disconnect().await.expect("quit");
    });
}

/// A SET to a computed value (`sql_mode = CONCAT(@@sql_mode, ...)`, as
/// Connector/J sends at every login) is replayed from the value the server
/// reports, not pinned: with one backend connection, another client gets
/// it at once, without the first client's setting, and the first client
/// finds its own again.
#[test]
fn a_set_to_a_computed_value_is_replayed_not_pinned() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "1", "--wait-timeout", "2"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let mut a = connect(&relay, None).await;
        let mut b = connect(&relay, None).await;
        a.query_drop("SET autocommit = 1, sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')")
            .await
            .expect("set");
        let mode: String = b
            .query_first("SELECT @@sql_mode")
            .await
            .expect("B is not kept waiting for A's connection")
            .expect("row");
        assert!(!mode.contains("ANSI_QUOTES"), "B: {mode}");
        let mode: String = a
            .query_first("SELECT @@sql_mode")
            .await
            .expect("a")
            .expect("row");
        assert!(mode.contains("ANSI_QUOTES"), "A: {mode}");
        // SET ROLE changes the session in a way no setting replays: it pins.
        a.query_drop("SET ROLE NONE").await.expect("role");
        let r = tokio::time::timeout(Duration::from_secs(10), b.query_drop("SELECT 1"))
            .await
            .expect("B's wait ends");
        assert!(r.is_err(), "A's SET ROLE keeps the only connection");
    });
    assert!(relay.metric("sqlfleet_relay_pins_total{reason=\"set_expression\"}") >= 2.0);
}

/// A SET TRANSACTION's characteristics stay pending on the server until a
/// transaction uses them: SELECT 1, DO, or an INSERT refused as read-only
/// leave them there (a direct session's second INSERT is refused too).
/// The client keeps its connection until then: released after the first
/// statement, the pending READ ONLY went to the next client of the
/// connection (found by the differential oracle).
#[test]
fn a_pending_set_transaction_keeps_the_connection_until_a_transaction_uses_it() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "1", "--wait-timeout", "1"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("relaysettx"));
    rt.block_on(async {
        let mut direct = srv.connect().await;
        direct
            .query_drop(format!("CREATE TABLE `{db}`.t (a INT)"))
            .await
            .expect("table");
        let mut a = connect(&relay, Some(&db)).await;
        for (sql, code) in [
            ("SET TRANSACTION READ ONLY", None),
            ("SELECT 1", None),
            ("DO 1", None),
            ("INSERT INTO t VALUES (1)", Some(1792)),
            ("INSERT INTO t VALUES (2)", Some(1792)),
        ] {
            let r = a.query_drop(sql).await;
            match (code, r) {
                (None, Ok(())) => {}
                (Some(c), Err(mysql_async::Error::Server(e))) if e.code == c => {}
                (want, got) => panic!("{sql}: wanted {want:?}, got {got:?}"),
            }
            assert!(
                held(&relay),
                "after {sql}: the connection went back to the pool"
            );
        }
        a.query_drop("COMMIT").await.expect("commit");
        // (The refused INSERT's error holds the connection for SHOW
        // WARNINGS until a statement that reads a table.)
        a.query_drop("SELECT COUNT(*) FROM t").await.expect("read");
        assert!(!held(&relay), "after COMMIT the connection is free");
        a.query_drop("INSERT INTO t VALUES (3)")
            .await
            .expect("read-write again");
        // Through a transaction that began and ended.
        a.query_drop("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
            .await
            .expect("set");
        a.query_drop("SELECT 1").await.expect("select");
        assert!(held(&relay), "pending isolation level kept");
        a.query_drop("BEGIN").await.expect("begin");
        a.query_drop("SELECT COUNT(*) FROM t").await.expect("read");
        a.query_drop("COMMIT").await.expect("commit");
        assert!(!held(&relay), "the transaction used it");
        let n: Option<i64> = a
            .query_first("SELECT COUNT(*) FROM t")
            .await
            .expect("count");
        assert_eq!(n, Some(1));
        // A read-only transaction ended by SET autocommit = 1 leaves the
        // session read only (a direct one too), its status saying no
        // transaction: the connection stays the client's until COMMIT.
        for sql in [
            "START TRANSACTION READ ONLY",
            "SET autocommit = 0",
            "SET autocommit = 1",
            "SELECT 1",
        ] {
            a.query_drop(sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            assert!(
                held(&relay),
                "after {sql}: the connection went back to the pool"
            );
        }
        match a.query_drop("INSERT INTO t VALUES (4)").await {
            Err(mysql_async::Error::Server(e)) if e.code == 1792 => {}
            other => panic!("still read only as directly: {other:?}"),
        }
        a.query_drop("COMMIT").await.expect("commit");
        a.query_drop("INSERT INTO t VALUES (5)")
            .await
            .expect("read-write after COMMIT");
        assert!(!held(&relay), "free after COMMIT");
        a.disconnect().await.expect("quit");
    });
}

/// Under autocommit=0 the server keeps a savepoint before the transaction
/// touched a table, while its replies report no transaction: the client
/// keeps its connection until the transaction ends (found by the
/// differential oracle: ROLLBACK TO SAVEPOINT failed with 1305 on another
/// connection).
#[test]
fn a_savepoint_under_autocommit_0_keeps_the_connection_until_the_transaction_ends() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "1", "--wait-timeout", "1"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("relaysavepoint"));
    rt.block_on(async {
        let mut a = connect(&relay, Some(&db)).await;
        a.query_drop("SET autocommit = 0")
            .await
            .expect("autocommit");
        assert!(!held(&relay), "no transaction yet: the connection is free");
        for sql in ["SAVEPOINT sp", "SELECT 1", "ROLLBACK TO SAVEPOINT sp"] {
            a.query_drop(sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            assert!(
                held(&relay),
                "after {sql}: the connection went back to the pool"
            );
        }
        a.query_drop("ROLLBACK").await.expect("rollback");
        assert!(
            !held(&relay),
            "the transaction ended: the connection is free"
        );
        // With autocommit on and no transaction it ends with the statement.
        a.query_drop("SET autocommit = 1")
            .await
            .expect("autocommit");
        a.query_drop("SAVEPOINT sp").await.expect("savepoint");
        assert!(
            !held(&relay),
            "under autocommit a savepoint outside a transaction is gone at once"
        );
        a.disconnect().await.expect("quit");
    });
}

/// `SET STATEMENT v = x FOR <statement>` sets `v` for that statement only;
/// the server's tracking reports `v` changed all the same, and the relay
/// replayed that value on the client's next connection (found by the
/// differential oracle).
#[test]
fn set_statement_leaves_the_session_its_own_values() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "1"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let mut a = connect(&relay, None).await;
        let mut b = connect(&relay, None).await;
        a.query_drop("SET time_zone = '+01:00'").await.expect("set");
        let inside: Option<String> = a
            .query_first("SET STATEMENT time_zone = '+05:00' FOR SELECT @@time_zone")
            .await
            .expect("set statement");
        assert_eq!(inside.as_deref(), Some("+05:00"));
        // B takes the one connection in between: A's settings are replayed.
        let _: Option<i64> = b.query_first("SELECT 1").await.expect("b");
        let after: Option<String> = a.query_first("SELECT @@time_zone").await.expect("a");
        assert_eq!(after.as_deref(), Some("+01:00"));
        a.disconnect().await.expect("quit");
        b.disconnect().await.expect("quit");
    });
}

/// `SET insert_id = N` (as mysqlbinlog writes it) is used by the next
/// insert only: the client keeps its connection rather than have it
/// replayed (its id used again: error 1062; `rand_seed1 = DEFAULT`, to
/// undo one, fails with 1230), and the connection is reset after it.
#[test]
fn a_one_shot_variable_is_used_once_and_never_replayed() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "1", "--wait-timeout", "1"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("relayoneshot"));
    rt.block_on(async {
        let mut a = connect(&relay, Some(&db)).await;
        a.query_drop("CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
            .await
            .expect("table");
        a.query_drop("SET insert_id = 500, rand_seed1 = 1, rand_seed2 = 2")
            .await
            .expect("set");
        a.query_drop("INSERT INTO t (v) VALUES (1)")
            .await
            .expect("insert");
        assert!(held(&relay), "the one-shot variables keep the connection");
        a.query_drop("INSERT INTO t (v) VALUES (2)")
            .await
            .expect("insert");
        let ids: Vec<i64> = a.query("SELECT id FROM t ORDER BY id").await.expect("ids");
        assert_eq!(ids, vec![500, 501]);
        a.disconnect().await.expect("quit");
        let o = cli(
            relay.port,
            &[
                "-D",
                &db,
                "-e",
                "INSERT INTO t (v) VALUES (3); SELECT MAX(id) FROM t",
            ],
        );
        assert_eq!(common::stdout(&o).trim(), "502", "{}", common::stderr(&o));
    });
}

/// `SET gtid_seq_no = N` (as mysqlbinlog writes it before each event
/// group) is used by the next transaction and then cleared by the server,
/// which reports no change: recorded as a setting it was replayed on other
/// connections, giving the same GTID twice. It keeps the connection like
/// insert_id.
#[test]
fn gtid_seq_no_is_used_once_and_never_replayed() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "1", "--wait-timeout", "1"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("relaygtidseq"));
    rt.block_on(async {
        let mut a = connect(&relay, Some(&db)).await;
        a.query_drop("CREATE TABLE t (v INT)").await.expect("table");
        let pos: String = a
            .query_first("SELECT @@gtid_binlog_pos")
            .await
            .expect("pos")
            .expect("row");
        let seq = |pos: &str| -> u64 {
            pos.split(',')
                .filter_map(|g| g.rsplit('-').next()?.parse().ok())
                .max()
                .unwrap_or(0)
        };
        let n = seq(&pos) + 1000;
        a.query_drop(format!("SET gtid_seq_no = {n}"))
            .await
            .expect("set");
        assert!(held(&relay), "gtid_seq_no keeps the connection");
        a.query_drop("INSERT INTO t VALUES (1)")
            .await
            .expect("insert");
        let after: String = a
            .query_first("SELECT @@gtid_binlog_pos")
            .await
            .expect("pos")
            .expect("row");
        assert!(seq(&after) >= n, "the insert used {n}: {after}");
        let left: u64 = a
            .query_first("SELECT @@session.gtid_seq_no")
            .await
            .expect("left")
            .expect("row");
        assert_eq!(left, 0, "the server cleared it after use");
        a.disconnect().await.expect("quit");
    });
}

/// A client that sets LAST_INSERT_ID by SET (`last_insert_id` or its alias
/// `identity`, which have no DEFAULT) keeps it on whichever connection runs
/// its next statement, and the client that gets its connection in between
/// is not handed an error from undoing it.
#[test]
fn last_insert_id_set_by_a_client_follows_it_and_never_fails_another() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "1"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        for set in ["SET last_insert_id = 77", "SET @@session.identity = 77"] {
            let mut a = connect(&relay, None).await;
            let mut b = connect(&relay, None).await;
            a.query_drop(set)
                .await
                .unwrap_or_else(|e| panic!("{set}: {e}"));
            let seen: Option<u64> = b
                .query_first("SELECT LAST_INSERT_ID()")
                .await
                .unwrap_or_else(|e| panic!("after {set}, another client: {e}"));
            assert_eq!(seen, Some(0), "after {set}, another client");
            let own: Option<u64> = a.query_first("SELECT LAST_INSERT_ID()").await.expect("own");
            assert_eq!(own, Some(77), "{set}");
            a.disconnect().await.expect("quit");
            b.disconnect().await.expect("quit");
        }
    });
}

/// A refused COM_STMT_PREPARE leaves ROW_COUNT() -1 and its error for
/// SHOW WARNINGS, as on the server (the relay answered ROW_COUNT() with
/// the statement before's count; found by the differential oracle), and a
/// prepare clears warnings only when its statement opens a table.
#[test]
fn a_refused_prepare_leaves_the_diagnostics_the_server_does() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "2"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("relayprepfail"));
    rt.block_on(async {
        let mut a = connect(&relay, Some(&db)).await;
        a.query_drop("CREATE TABLE t (v INT)").await.expect("table");
        a.query_drop("INSERT INTO t VALUES (1), (2)")
            .await
            .expect("insert");
        let e = a.prep("SELECT no_such_column FROM t").await;
        assert!(
            matches!(e, Err(mysql_async::Error::Server(ref e)) if e.code == 1054),
            "{e:?}"
        );
        let n: Option<i64> = a
            .query_first("SELECT ROW_COUNT()")
            .await
            .expect("row count");
        assert_eq!(n, Some(-1));
        let w: Vec<(String, u32, String)> = a.query("SHOW WARNINGS").await.expect("warnings");
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(w[0].1, 1054);
        // A prepare that opens no table keeps the warnings (and the
        // connection holding them: another client's statement there would
        // clear them); one that opens a table clears them.
        let mut b = connect(&relay, Some(&db)).await;
        a.query_drop("SELECT 1/0").await.expect("warning");
        let _ = a.prep("SET time_zone = ?").await.expect("prepare");
        b.query_drop("SELECT COUNT(*) FROM t").await.expect("b");
        let w: Vec<(String, u32, String)> = a.query("SHOW WARNINGS").await.expect("warnings");
        assert_eq!(w.iter().map(|w| w.1).collect::<Vec<_>>(), vec![1365]);
        let _ = a
            .prep("SELECT v FROM t WHERE v = ?")
            .await
            .expect("prepare");
        let w: Vec<(String, u32, String)> = a.query("SHOW WARNINGS").await.expect("warnings");
        assert!(w.is_empty(), "{w:?}");
        b.disconnect().await.expect("quit");
        a.disconnect().await.expect("quit");
    });
}

/// Runs `sql` through the relay (whose pool holds one connection) and
/// asserts the client kept its backend connection, that `check` answers 1
/// in its session, and that after it left the next client's session has
/// neither sequence `s`'s LASTVAL nor user lock `lock`.
async fn kept_then_left_clean(relay: &Relay, db: &str, sql: &str, check: &str, lock: &str) {
    let mut a = connect(relay, Some(db)).await;
    a.query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    assert!(held(relay), "{sql}: the connection went to the pool");
    let ok: Option<i64> = a.query_first(check).await.expect("check");
    assert_eq!(ok, Some(1), "{sql}: {check}");
    a.disconnect().await.expect("quit");
    // The client's session went with it: the next client's is clean.
    let probe = format!("SELECT LASTVAL(s) IS NULL, IS_FREE_LOCK('{lock}')");
    let o = cli(relay.port, &["-D", db, "-e", &probe]);
    assert_eq!(
        common::stdout(&o).trim(),
        "1\t1",
        "{sql}: {}",
        common::stderr(&o)
    );
}

/// A write to a table whose column DEFAULT NEXTVAL advances a sequence,
/// or whose trigger takes a user lock (directly, through another table's
/// trigger, or through a view), changes the writer's session where no
/// tracker reports it: the client keeps its connection (found by the
/// differential oracle: LASTVAL read NULL on the next connection, and the
/// trigger's lock stayed with a connection another client got). Writes to
/// tables whose triggers do nothing of the kind still share; DDL through
/// the relay is seen at once.
#[test]
fn a_write_whose_default_or_trigger_acts_unseen_keeps_the_connection() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "1", "--wait-timeout", "1"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("relaywriteeffects"));
    rt.block_on(async {
        let mut setup = srv.connect().await;
        setup
            .query_drop(format!(
                "USE {db};
                 CREATE SEQUENCE s;
                 CREATE TABLE ts (id BIGINT DEFAULT NEXTVAL(s) PRIMARY KEY, v INT);
                 CREATE VIEW vts AS SELECT id, v FROM ts;
                 CREATE TABLE tl (id INT AUTO_INCREMENT PRIMARY KEY, v INT);
                 CREATE TRIGGER tl_bi BEFORE INSERT ON tl FOR EACH ROW SET NEW.v = GET_LOCK('relay-trig', 1);
                 CREATE TABLE plain (v INT);
                 CREATE TABLE audited (v INT);
                 CREATE TRIGGER audited_ai AFTER INSERT ON audited FOR EACH ROW INSERT INTO plain VALUES (NEW.v);
                 CREATE TABLE chained (v INT);
                 CREATE TRIGGER chained_ai AFTER INSERT ON chained FOR EACH ROW INSERT INTO ts (v) VALUES (NEW.v);
                 CREATE FUNCTION f_trig_lock() RETURNS INT DETERMINISTIC RETURN GET_LOCK('relay-trig', 1);
                 CREATE VIEW v_trig_lock AS SELECT f_trig_lock() AS l;
                 CREATE TABLE viewed (v INT);
                 CREATE TRIGGER viewed_bi BEFORE INSERT ON viewed FOR EACH ROW SET NEW.v = (SELECT l FROM v_trig_lock);"
            ))
            .await
            .expect("setup");
        let _ = setup.disconnect().await;
        for sql in [
            "INSERT INTO plain VALUES (1)",
            "INSERT INTO audited VALUES (1)",
            "UPDATE plain SET v = v + 1",
        ] {
            let mut a = connect(&relay, Some(&db)).await;
            a.query_drop(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
            assert!(!held(&relay), "{sql}: nothing unseen, the connection is shared");
            a.disconnect().await.expect("quit");
        }
        let cases: &[(&str, &str)] = &[
            ("INSERT INTO ts (v) VALUES (1)", "SELECT LASTVAL(s) IS NOT NULL"),
            ("INSERT INTO chained VALUES (1)", "SELECT LASTVAL(s) IS NOT NULL"),
            ("INSERT INTO vts (v) VALUES (1)", "SELECT LASTVAL(s) IS NOT NULL"),
            (
                "INSERT INTO tl (v) VALUES (0)",
                "SELECT RELEASE_LOCK('relay-trig') = 1",
            ),
            // The trigger only reads, but what it reads is a view whose
            // function takes the lock.
            (
                "INSERT INTO viewed (v) VALUES (0)",
                "SELECT RELEASE_LOCK('relay-trig') = 1",
            ),
        ];
        for (write, check) in cases {
            kept_then_left_clean(&relay, &db, write, check, "relay-trig").await;
        }
        // The same write as a prepared statement.
        let mut a = connect(&relay, Some(&db)).await;
        a.exec_drop("INSERT INTO ts (v) VALUES (?)", (7,))
            .await
            .expect("prepared insert");
        assert!(held(&relay), "a prepared write: the connection went to the pool");
        a.disconnect().await.expect("quit");
        // A trigger made through the relay counts at once (no stale verdict).
        let mut a = connect(&relay, Some(&db)).await;
        a.query_drop(
            "CREATE TRIGGER plain_bi BEFORE INSERT ON plain FOR EACH ROW SET NEW.v = NEXTVAL(s)",
        )
        .await
        .expect("create trigger");
        a.query_drop("INSERT INTO plain VALUES (1)")
            .await
            .expect("insert");
        assert!(held(&relay), "a trigger made a moment ago is followed");
        a.disconnect().await.expect("quit");
        let n = relay.metric("sqlfleet_relay_pins_total{reason=\"trigger_or_sequence_default\"}");
        assert!(n >= 5.0, "pins counted: {n}");
    });
}

/// A read of a view whose definition calls a stored function runs the
/// function, and one that takes a user lock or advances a sequence
/// changes the reader's session where no tracker reports it: the reader
/// keeps its connection, as `SELECT f()` does (left unseen before: the
/// lock stayed with a pooled connection, exit 0). So does a view of such
/// a view, the same read as a prepared statement, and a view made through
/// the relay a moment ago; reads of plain views still share.
#[test]
fn a_read_of_a_view_calling_a_stored_function_keeps_the_connection() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "1", "--wait-timeout", "1"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("relayviewcalls"));
    rt.block_on(async {
        let mut setup = srv.connect().await;
        setup
            .query_drop(format!(
                "USE {db};
                 CREATE TABLE t (v INT);
                 INSERT INTO t VALUES (1);
                 CREATE SEQUENCE s;
                 CREATE FUNCTION f_lock() RETURNS INT DETERMINISTIC RETURN GET_LOCK('relay-view', 1);
                 CREATE FUNCTION f_seq() RETURNS BIGINT DETERMINISTIC RETURN NEXTVAL(s);
                 CREATE VIEW v_plain AS SELECT v, NOW() AS at FROM t;
                 CREATE VIEW v_lock AS SELECT f_lock() AS l;
                 CREATE VIEW v_seq AS SELECT f_seq() AS id FROM t;
                 CREATE VIEW v_outer AS SELECT l FROM v_lock;"
            ))
            .await
            .expect("setup");
        let _ = setup.disconnect().await;
        for sql in ["SELECT * FROM v_plain", "SELECT COUNT(*) FROM t"] {
            let mut a = connect(&relay, Some(&db)).await;
            a.query_drop(sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            assert!(
                !held(&relay),
                "{sql}: nothing unseen, the connection is shared"
            );
            a.disconnect().await.expect("quit");
        }
        let q = format!("SELECT l FROM `{db}`.v_lock");
        let cases: &[(&str, &str)] = &[
            (
                "SELECT * FROM v_lock",
                "SELECT RELEASE_LOCK('relay-view') = 1",
            ),
            (
                "SELECT l FROM v_outer",
                "SELECT RELEASE_LOCK('relay-view') = 1",
            ),
            (&q, "SELECT RELEASE_LOCK('relay-view') = 1"),
            ("SELECT id FROM v_seq", "SELECT LASTVAL(s) IS NOT NULL"),
        ];
        for (read, check) in cases {
            kept_then_left_clean(&relay, &db, read, check, "relay-view").await;
        }
        // The same read as a prepared statement.
        let mut a = connect(&relay, Some(&db)).await;
        let _: Vec<i64> = a
            .exec("SELECT l FROM v_lock WHERE ? = 1", (1,))
            .await
            .expect("prepared read");
        assert!(
            held(&relay),
            "a prepared read: the connection went to the pool"
        );
        let ok: Option<i64> = a
            .query_first("SELECT RELEASE_LOCK('relay-view') = 1")
            .await
            .expect("release");
        assert_eq!(ok, Some(1));
        a.disconnect().await.expect("quit");
        // A view made through the relay counts at once (no stale look).
        let mut a = connect(&relay, Some(&db)).await;
        a.query_drop("SELECT * FROM v_plain").await.expect("read");
        a.query_drop("CREATE OR REPLACE VIEW v_plain AS SELECT f_lock() AS l")
            .await
            .expect("replace view");
        a.query_drop("SELECT * FROM v_plain").await.expect("read");
        assert!(held(&relay), "a view made a moment ago is followed");
        a.disconnect().await.expect("quit");
        let n = relay.metric("sqlfleet_relay_pins_total{reason=\"stored_function\"}");
        assert!(n >= 6.0, "pins counted: {n}");
    });
}

/// `SET NAMES cs COLLATE c` on one connection, the next statement on
/// another (a one-connection pool another client used between): the
/// collation the client chose, not its character set's default — the
/// replayed SET must name the character sets before the collations, as
/// setting a character set resets its collation (mysql-test's
/// main.ctype_utf8mb3_general_mysql500_ci_ws read utf8mb3_general_ci).
#[test]
fn a_chosen_collation_follows_the_client_to_another_connection() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "1"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let mut a = connect(&relay, None).await;
        let mut b = connect(&relay, None).await;
        a.query_drop("SET NAMES utf8mb3 COLLATE utf8mb3_general_mysql500_ci")
            .await
            .expect("set names");
        // B takes the one connection and leaves it with its own defaults.
        let _: Option<u64> = b.query_first("SELECT 1").await.expect("b");
        let (cs, coll): (String, String) = a
            .query_first("SELECT @@character_set_connection, @@collation_connection")
            .await
            .expect("a")
            .expect("row");
        assert_eq!(cs, "utf8mb3");
        assert_eq!(coll, "utf8mb3_general_mysql500_ci");
        a.disconnect().await.expect("quit");
        b.disconnect().await.expect("quit");
    });
}

/// A connection collation whose text is not ASCII-based (every ucs2,
/// utf16, utf16le and utf32 collation the server lists), chosen by one
/// client of a one-connection pool: its writes, reads with literals and
/// transactions run as on a direct connection, it keeps its collation
/// when another client used the connection between, and that other
/// client never sees it (a replicate guard parsed under one such
/// collation failed with error 1407: the relay's own statements on a
/// client's connection must not).
#[test]
fn a_wide_connection_collation_follows_its_client_and_no_other() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "1"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("relaywide").await;
        let mut root = srv.connect().await;
        root.query_drop(format!(
            "CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(40)) DEFAULT CHARSET=utf8mb4"
        ))
        .await
        .expect("table");
        let wide: Vec<String> = root
            .query(
                "SELECT COLLATION_NAME FROM information_schema.COLLATIONS \
                 WHERE CHARACTER_SET_NAME IN ('ucs2', 'utf16', 'utf16le', 'utf32') ORDER BY ID",
            )
            .await
            .expect("collations");
        assert!(wide.len() > 80, "{wide:?}");
        let mut a = connect(&relay, Some(&db)).await;
        let mut b = connect(&relay, Some(&db)).await;
        let default: Option<String> = b
            .query_first("SELECT @@collation_connection")
            .await
            .expect("b's own");
        for (i, coll) in wide.iter().enumerate() {
            a.query_drop(format!("SET SESSION collation_connection = {coll}"))
                .await
                .unwrap_or_else(|e| panic!("{coll}: {e}"));
            for sql in [
                format!("INSERT INTO t VALUES ({i}, 'ç {coll}')"),
                "BEGIN".into(),
                format!("UPDATE t SET v = CONCAT(v, '+') WHERE id = {i} AND v LIKE 'ç%'"),
                "COMMIT".into(),
            ] {
                a.query_drop(&sql)
                    .await
                    .unwrap_or_else(|e| panic!("{coll}: {sql}: {e}"));
            }
            // The other client between: the connection's own defaults.
            let seen: Option<String> = b
                .query_first("SELECT @@collation_connection")
                .await
                .unwrap_or_else(|e| panic!("{coll}: b: {e}"));
            assert_eq!(seen, default, "{coll} leaked to another client");
            let (now, v): (String, String) = a
                .query_first(format!(
                    "SELECT @@collation_connection, v FROM t WHERE id = {i} AND v = 'ç {coll}+'"
                ))
                .await
                .unwrap_or_else(|e| panic!("{coll}: a: {e}"))
                .unwrap_or_else(|| panic!("{coll}: the row as written"));
            assert_eq!(
                (now.as_str(), v.as_str()),
                (coll.as_str(), format!("ç {coll}+").as_str())
            );
        }
        a.disconnect().await.expect("quit");
        b.disconnect().await.expect("quit");
    });
}

/// An XA branch a client prepared and then left (its session gone, as an
/// application server's transaction manager leaves it between the two
/// phases; or reset with COM_RESET_CONNECTION): the next client of a
/// one-connection pool works as on a fresh connection, the branch stays
/// prepared on the server (XA RECOVER lists it, as after a direct
/// client's disconnect), and any client ends it — the relay neither
/// rolls it back nor hands its PREPARED state to another client. Before,
/// the relay reset the connection and pooled it, and the next client's
/// INSERT there failed with error 1031.
#[test]
fn a_prepared_xa_branch_outlives_its_client_and_binds_no_other() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "1"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("relayxa").await;
        let mut root = srv.connect().await;
        root.query_drop(format!(
            "CREATE TABLE `{db}`.t (id INT PRIMARY KEY) ENGINE=InnoDB"
        ))
        .await
        .expect("table");
        // (how the branch ends; whether its client leaves, or resets its
        // session and goes on)
        let rounds = [
            ("XA COMMIT", false),
            ("XA ROLLBACK", false),
            ("XA COMMIT", true),
        ];
        for (i, (end, reset)) in rounds.iter().enumerate() {
            let xid = format!("'relayxa{i}', 'b', 7");
            let mut a = connect(&relay, Some(&db)).await;
            for sql in [
                format!("XA START {xid}"),
                format!("INSERT INTO t VALUES ({i})"),
                format!("XA END {xid}"),
                format!("XA PREPARE {xid}"),
            ] {
                a.query_drop(&sql)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"));
            }
            if *reset {
                a.reset().await.expect("COM_RESET_CONNECTION");
                a.query_drop(format!("INSERT INTO t VALUES ({})", 200 + i))
                    .await
                    .expect("the client goes on after its reset");
            }
            a.disconnect().await.expect("quit");
            let mut b = connect(&relay, Some(&db)).await;
            b.query_drop(format!("INSERT INTO t VALUES ({})", 100 + i))
                .await
                .expect("the next client writes on the connection");
            let listed: Vec<(i64, i64, i64, Vec<u8>)> =
                b.query("XA RECOVER").await.expect("xa recover");
            assert!(
                listed
                    .iter()
                    .any(|r| r.3.starts_with(format!("relayxa{i}").as_bytes())),
                "the branch stays prepared: {listed:?}"
            );
            b.query_drop(format!("{end} {xid}"))
                .await
                .unwrap_or_else(|e| panic!("{end} by another client: {e}"));
            let n: Option<i64> = b
                .query_first(format!("SELECT COUNT(*) FROM t WHERE id = {i}"))
                .await
                .expect("count");
            assert_eq!(n, Some(if *end == "XA COMMIT" { 1 } else { 0 }), "{end}");
            b.disconnect().await.expect("quit");
        }
    });
}

/// A client that leaves holding a server-wide lock (a backup stage,
/// FLUSH TABLES WITH READ LOCK, a table lock, a named lock) leaves none
/// behind on the pooled connection: DDL from another session, with a
/// short lock wait, goes through, and the next client of the
/// one-connection pool runs DDL and writes as on a fresh connection.
#[test]
fn a_client_leaving_with_a_server_wide_lock_leaves_none_behind() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "1"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("relaylocks").await;
        let mut root = srv.connect().await;
        root.query_drop(format!("CREATE TABLE `{db}`.t (id INT PRIMARY KEY) ENGINE=InnoDB"))
            .await
            .expect("table");
        let holds: &[&[&str]] = &[
            &["BACKUP STAGE START", "BACKUP STAGE BLOCK_DDL"],
            &["BACKUP STAGE START", "BACKUP STAGE BLOCK_COMMIT"],
            &["FLUSH TABLES WITH READ LOCK"],
            &["LOCK TABLES t WRITE"],
            &["SELECT GET_LOCK('relaylocks', 0)"],
            &["BEGIN", "SELECT * FROM t FOR UPDATE"],
        ];
        for (i, steps) in holds.iter().enumerate() {
            let mut a = connect(&relay, Some(&db)).await;
            for sql in *steps {
                a.query_drop(*sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
            }
            a.disconnect().await.expect("quit");
            // (The relay resets the connection off the client's path.)
            tokio::time::sleep(Duration::from_millis(200)).await;
            let ddl = format!(
                "SET STATEMENT lock_wait_timeout = 3 FOR CREATE TABLE `{db}`.x{i} (id INT) ENGINE=InnoDB"
            );
            root.query_drop(&ddl)
                .await
                .unwrap_or_else(|e| panic!("{steps:?} left a lock: {ddl}: {e}"));
            root.query_drop(format!(
                "SET STATEMENT innodb_lock_wait_timeout = 3 FOR INSERT INTO `{db}`.t VALUES ({i})"
            ))
            .await
            .unwrap_or_else(|e| panic!("{steps:?} left a row lock: {e}"));
            let mut b = connect(&relay, Some(&db)).await;
            let got: Option<i64> = b
                .query_first("SELECT IS_FREE_LOCK('relaylocks')")
                .await
                .unwrap_or_else(|e| panic!("{steps:?}: next client: {e}"));
            assert_eq!(got, Some(1), "{steps:?}: the named lock is free");
            b.query_drop(format!("CREATE TABLE y{i} (id INT); INSERT INTO y{i} VALUES (1)"))
                .await
                .unwrap_or_else(|e| panic!("{steps:?}: next client's DDL and write: {e}"));
            b.disconnect().await.expect("quit");
        }
    });
}

/// FLUSH STATUS zeroes the session's status counters on the connection it
/// ran on: the client keeps that connection, and its later SHOW STATUS
/// counts its own statements only, while another client works on the
/// other connection (mysql-test's main.features read other sessions'
/// counts).
#[test]
fn flush_status_keeps_the_connection_whose_counters_it_zeroed() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "2"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let mut a = connect(&relay, None).await;
        let mut b = connect(&relay, None).await;
        a.query_drop("FLUSH STATUS").await.expect("flush");
        for _ in 0..10 {
            b.query_drop("SELECT 1").await.expect("b");
            a.query_drop("SELECT 1").await.expect("a");
        }
        let row: Option<(String, u64)> = a
            .query_first("SHOW SESSION STATUS LIKE 'Com_select'")
            .await
            .expect("status");
        assert_eq!(
            row.map(|r| r.1),
            Some(10),
            "A's own SELECTs since its FLUSH STATUS"
        );
        a.disconnect().await.expect("quit");
        b.disconnect().await.expect("quit");
    });
    drop(relay);
    // COM_RESET_CONNECTION on that connection zeroes them again there
    // (mysql-test's main.reset_connection): the client keeps it. With a
    // pool of one, another client then waits and is refused.
    let relay = start_relay(srv, &["--pool-max", "1", "--wait-timeout", "1"]);
    rt.block_on(async {
        let mut a = connect(&relay, None).await;
        let mut b = connect(&relay, None).await;
        a.query_drop("FLUSH STATUS").await.expect("flush");
        a.reset().await.expect("reset");
        a.query_drop("SELECT 1").await.expect("a");
        let refused = b.query_drop("SELECT 1").await;
        assert!(refused.is_err(), "B got A's connection after A's reset");
        let row: Option<(String, u64)> = a
            .query_first("SHOW SESSION STATUS LIKE 'Com_select'")
            .await
            .expect("status");
        assert_eq!(row.map(|r| r.1), Some(1), "A's own SELECTs since its reset");
        a.disconnect().await.expect("quit");
        let _ = b.disconnect().await;
    });
}

/// A client's optimizer trace shows the client's statement: the relay's
/// own FOUND_ROWS() question after an INSERT ... SELECT runs untraced
/// (mysql-test's main.opt_trace read `SELECT FOUND_ROWS()` as the last
/// traced query).
#[test]
fn the_optimizer_trace_keeps_the_clients_statement() {
    let srv = server();
    common::servers::fresh_named_db(srv, "relay_trace");
    let relay = start_relay(srv, &[]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let mut a = connect(&relay, Some("relay_trace")).await;
        a.query_drop("CREATE TABLE t1 (a INT, b INT)")
            .await
            .expect("t1");
        a.query_drop("CREATE TABLE t2 (a INT, b INT)")
            .await
            .expect("t2");
        a.query_drop("INSERT INTO t1 VALUES (1, 2), (5, 6), (7, 8)")
            .await
            .expect("rows");
        a.query_drop("SET optimizer_trace = 'enabled=on'")
            .await
            .expect("trace on");
        let insert = "INSERT INTO t2 SELECT * FROM t1 WHERE a <= b AND a > 4";
        a.query_drop(insert).await.expect("insert select");
        let traced: Option<String> = a
            .query_first("SELECT QUERY FROM information_schema.OPTIMIZER_TRACE")
            .await
            .expect("trace");
        assert_eq!(traced.as_deref(), Some(insert));
        a.disconnect().await.expect("quit");
    });
}

/// FOUND_ROWS() after a statement that runs others (a procedure's SELECT,
/// a compound statement's) is the server's count, as directly: the relay
/// answered with the client's previous SELECT's (1 for 3).
#[test]
fn found_rows_after_a_procedure_or_a_compound_statement_is_the_servers() {
    let srv = server();
    common::servers::fresh_named_db(srv, "relay_found");
    let relay = start_relay(srv, &["--pool-max", "2"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let mut a = connect(&relay, Some("relay_found")).await;
        a.query_drop(
            "CREATE TABLE t1 (a INT); INSERT INTO t1 VALUES (1), (2), (3); \
             CREATE PROCEDURE pf() SELECT * FROM t1",
        )
        .await
        .expect("setup");
        // The compound statement first, while nothing keeps the client's
        // connection (the relay asks at once); CALL and EXECUTE then keep
        // it for good (the count stays on the server's side).
        for run in [
            "IF 1 THEN SELECT * FROM t1; END IF",
            "CALL pf()",
            "EXECUTE s",
        ] {
            if run == "EXECUTE s" {
                a.query_drop("PREPARE s FROM 'SELECT * FROM t1'")
                    .await
                    .expect("prepare");
            }
            let _: Vec<i64> = a.query("SELECT a FROM t1 LIMIT 1").await.expect("one");
            a.query_drop(run).await.expect(run);
            let found: Option<u64> = a.query_first("SELECT FOUND_ROWS()").await.expect("found");
            assert_eq!(found, Some(3), "FOUND_ROWS() after {run}");
        }
        // After a CALL the count stays on the connection the client keeps;
        // a reset lets the client go, and the server keeps the count
        // through it: the relay takes it along.
        let _: Vec<i64> = a.query("SELECT a FROM t1 LIMIT 1").await.expect("one");
        a.query_drop("CALL pf()").await.expect("call");
        a.reset().await.expect("reset");
        let found: Option<u64> = a.query_first("SELECT FOUND_ROWS()").await.expect("found");
        assert_eq!(found, Some(3), "FOUND_ROWS() after CALL and a reset");
        a.disconnect().await.expect("quit");
    });
}

/// Every pin count on the relay's metrics page, by reason.
fn pins(relay: &Relay) -> std::collections::BTreeMap<String, f64> {
    relay
        .metrics()
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("sqlfleet_relay_pins_total{reason=\"")?;
            let (reason, n) = rest.split_once("\"} ")?;
            Some((reason.to_string(), n.parse().ok()?))
        })
        .collect()
}

/// MariaDB restores what `SET STATEMENT v = x FOR` set after the
/// statement, and reports the restored value (with a session-state
/// change) only with the next reply that reports anything, such as a
/// COMMIT's last_gtid. The relay took that late report for an unexplained
/// change: the client was pinned to its connection for good and its
/// transactions were no longer replayed (found by the Galera bank
/// campaign, where the relay's own causal reads use SET STATEMENT).
/// Drawn from the server's own list: every session variable, set to its
/// own value for one statement, then a transaction; no pin may follow
/// beyond the ones the relay documents for that variable. On either
/// server version: MariaDB 11.4's tracker loses count after a plugin's
/// variable (`backend/tracker.rs`), and its reports then named other
/// variables than the restored ones (22 variables pinned the client).
#[test]
fn a_set_statement_of_any_session_variable_leaves_the_client_unpinned() {
    set_statements_leave_the_client_unpinned(server());
    set_statements_leave_the_client_unpinned(common::servers::newer_server());
}

fn set_statements_leave_the_client_unpinned(srv: &sqlfleet_testkit::TestServer) {
    let relay = start_relay(srv, &[]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("relaysetstmt"));
    rt.block_on(async {
        let mut root = srv.connect().await;
        root.query_drop(format!(
            "CREATE TABLE `{db}`.t (id INT PRIMARY KEY, n INT); INSERT INTO `{db}`.t VALUES (1, 0)"
        ))
        .await
        .expect("table");
        // The tracking the relay relies on: a client that changes it keeps
        // its connection, for one statement too (documented; its pin stays
        // with that client's connection until it is reset): not listed.
        let vars = session_variables(&mut root).await;
        let mut c = connect(&relay, Some(&db)).await;
        let (mut ran, mut refused) = (0, 0);
        let mut before = pins(&relay);
        let mut wrong = Vec::new();
        for (name, literal) in &vars {
            let sql = format!("SET STATEMENT {name} = {literal} FOR SELECT 1");
            // Documented: a one-shot variable keeps its connection.
            let allowed = |reason: &str| match reason {
                "one_shot_variable" => ["insert_id", "rand_seed1", "rand_seed2", "gtid_seq_no"]
                    .contains(&name.as_str()),
                "session_tracking" => name.starts_with("session_track"),
                // Its warning (a deprecated variable) is held for SHOW
                // WARNINGS until a statement uses a table.
                "diagnostics" => true,
                // Documented: a statement it traces leaves the trace on
                // the connection, for no other client to read (the relay
                // pins before the server answers, so a refused
                // `SET STATEMENT profiling = 1 FOR ...` too).
                "statement_traces" => ["optimizer_trace", "profiling"].contains(&name.as_str()),
                _ => false,
            };
            let ok = c.query_drop(&sql).await.is_ok();
            if ok {
                ran += 1;
                for s in ["BEGIN", "UPDATE t SET n = n + 1 WHERE id = 1", "COMMIT"] {
                    c.query_drop(s)
                        .await
                        .unwrap_or_else(|e| panic!("{s} after {sql}: {e}"));
                }
            } else {
                // Not settable so (1968, 1971), or not by this account.
                refused += 1;
            }
            let after = pins(&relay);
            let taken: Vec<&String> = after
                .iter()
                .filter(|(k, v)| before.get(*k) != Some(v))
                .map(|(k, _)| k)
                .collect();
            if taken.iter().any(|r| !allowed(r)) {
                wrong.push(format!("{name}: {taken:?}"));
            }
            if !taken.is_empty() {
                // A new client: the pinned one stays pinned.
                let pinned = std::mem::replace(&mut c, connect(&relay, Some(&db)).await);
                pinned.disconnect().await.expect("quit");
            }
            before = after;
        }
        eprintln!("SET STATEMENT of {ran} session variables ran, {refused} refused");
        assert!(ran > 100, "only {ran} of {} ran", vars.len());
        assert!(
            wrong.is_empty(),
            "pinned after SET STATEMENT ... FOR and a transaction: {wrong:?}"
        );
        let n: Option<i64> = c.query_first("SELECT n FROM t").await.expect("n");
        assert_eq!(n, Some(ran), "every transaction committed once");
    });
}

/// A client's `@@last_gtid` through the relay is the GTID the server gave
/// its last write — whatever session variable it set before, by `SET` or
/// `SET STATEMENT ... FOR` the write itself. MariaDB 11.4's tracker
/// stops reporting `last_gtid` on a connection once a plugin's variable
/// (`innodb_lock_wait_timeout`, `aria_*`, `myisam_*`) is set there before
/// any write (`backend/tracker.rs`): the client read '' for its own write,
/// and a read-your-writes wait on a replica waited for nothing. Set by
/// `SET`, by `SET STATEMENT ... FOR` and by a stored procedure. Drawn from
/// the server's own list of session variables, on either version; the
/// truth is the server's binary log (each write's GTID event before its
/// text).
#[test]
fn a_clients_last_gtid_is_its_own_write_whatever_it_set() {
    own_gtids_whatever_was_set(server());
    own_gtids_whatever_was_set(common::servers::newer_server());
}

fn own_gtids_whatever_was_set(srv: &sqlfleet_testkit::TestServer) {
    let relay = start_relay(srv, &[]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("relayowngtid"));
    let said = rt.block_on(async {
        let mut root = srv.connect().await;
        root.query_drop(format!("CREATE TABLE `{db}`.t (k INT PRIMARY KEY, v TEXT)"))
            .await
            .expect("table");
        // (marker written, GTID the relay said)
        let mut said: Vec<(String, String)> = Vec::new();
        let mut k = 0;
        for (name, literal) in &session_variables(&mut root).await {
            // A new client each time: the relay's pool hands it a
            // connection in whatever state the last one left.
            let mut c = connect(&relay, Some(&db)).await;
            if c.query_drop(format!("SET {name} = {literal}"))
                .await
                .is_ok()
            {
                k += 1;
                let mark = format!("set {name} #{k}");
                c.query_drop(format!("INSERT INTO t VALUES ({k}, '{mark}')"))
                    .await
                    .unwrap_or_else(|e| panic!("INSERT after SET {name}: {e}"));
                said.push((mark, last_gtid(&mut c).await));
            }
            // Stored code setting it (the client is held: its state
            // changed out of the text's sight).
            k += 1;
            let proc = format!("p_own_{k}");
            root.query_drop(format!(
                "CREATE PROCEDURE `{db}`.{proc}() SET SESSION {name} = {literal}"
            ))
            .await
            .expect("procedure");
            if c.query_drop(format!("CALL {proc}()")).await.is_ok() {
                let mark = format!("call {name} #{k}");
                c.query_drop(format!("INSERT INTO t VALUES ({k}, '{mark}')"))
                    .await
                    .unwrap_or_else(|e| panic!("INSERT after CALL setting {name}: {e}"));
                said.push((mark, last_gtid(&mut c).await));
            }
            k += 1;
            let mark = format!("for {name} #{k}");
            let write = format!(
                "SET STATEMENT {name} = {literal} FOR INSERT INTO t VALUES ({k}, '{mark}')"
            );
            if c.query_drop(&write).await.is_ok() {
                said.push((mark, last_gtid(&mut c).await));
            }
            c.disconnect().await.expect("quit");
        }
        said
    });
    assert!(said.len() > 200, "only {} writes ran", said.len());
    let logged = gtids_of_marks(srv, &rt);
    let wrong: Vec<String> = said
        .iter()
        .filter(|(mark, gtid)| logged.get(mark) != Some(gtid))
        .map(|(mark, gtid)| format!("{mark}: relay said {gtid:?}, logged {:?}", logged.get(mark)))
        .collect();
    assert!(
        wrong.is_empty(),
        "{} of {} writes' @@last_gtid through the relay is not their GTID: {wrong:#?}",
        wrong.len(),
        said.len()
    );
}

/// Every session variable the server lists, with its own session value
/// as a literal, but the session_track_* ones (the tracking the relay
/// relies on, which a client changes only on a connection of its own).
async fn session_variables(root: &mut mysql_async::Conn) -> Vec<(String, String)> {
    let vars: Vec<(String, Option<String>, String)> = root
        .query(
            "SELECT LOWER(VARIABLE_NAME), SESSION_VALUE, VARIABLE_TYPE \
             FROM information_schema.SYSTEM_VARIABLES \
             WHERE VARIABLE_SCOPE = 'SESSION' ORDER BY VARIABLE_NAME",
        )
        .await
        .expect("variables");
    let numeric = ["INT", "BIGINT", "DOUBLE", "INT UNSIGNED", "BIGINT UNSIGNED"];
    vars.into_iter()
        .filter(|(name, _, _)| !name.starts_with("session_track"))
        .filter_map(|(name, value, kind)| {
            let value = value?;
            let literal = if numeric.contains(&kind.as_str()) {
                value
            } else {
                format!("'{}'", value.replace('\\', "\\\\").replace('\'', "''"))
            };
            Some((name, literal))
        })
        .collect()
}

/// A client that set `timestamp` (as a binary log replayed through the
/// relay does) and then `SET timestamp = DEFAULT` has the clock again on
/// whatever connection its next statement runs. MariaDB 11.4's tracker,
/// on a connection that had not logged a write, reports the variable set
/// first in `last_gtid`'s place with every later write (`timestamp =
/// <its current value>`, `backend/tracker.rs`): the relay recorded that
/// value as the client's setting, and replayed on another connection it
/// froze the client's NOW() in the past.
#[test]
fn a_client_back_on_the_clock_keeps_the_clock_on_another_connection() {
    for srv in [server(), common::servers::newer_server()] {
        let relay = start_relay(srv, &[]);
        let rt = tokio::runtime::Runtime::new().expect("rt");
        let (db, _) = rt.block_on(srv.fresh_db("relayclock"));
        let name = &srv.sandbox.meta.name;
        let said = rt.block_on(async {
            let mut root = srv.connect().await;
            root.query_drop(format!(
                "CREATE TABLE `{db}`.t (k INT PRIMARY KEY, at DATETIME(6), m TEXT)"
            ))
            .await
            .expect("table");
            // (Its first connection: nothing written on it yet.)
            let mut a = connect(&relay, Some(&db)).await;
            let mut said = Vec::new();
            for (k, set) in [
                (1, "SET timestamp = 1000000000"),
                (2, "SET timestamp = DEFAULT"),
            ] {
                a.query_drop(set)
                    .await
                    .unwrap_or_else(|e| panic!("{set}: {e}"));
                let mark = format!("clock #{k}");
                a.query_drop(format!("INSERT INTO t VALUES ({k}, NOW(6), '{mark}')"))
                    .await
                    .expect("insert");
                said.push((mark, last_gtid(&mut a).await));
            }
            assert_eq!(
                pins(&relay).get("server_state"),
                Some(&0.0),
                "{name}: nothing the client did is unseen"
            );
            // Another client holds that connection: a's next statement
            // runs on another one, with a's session replayed there.
            let mut b = connect(&relay, Some(&db)).await;
            b.query_drop("BEGIN").await.expect("begin");
            b.query_drop("SELECT 1").await.expect("hold");
            tokio::time::sleep(Duration::from_millis(1500)).await;
            a.query_drop("INSERT INTO t VALUES (3, NOW(6), 'clock #3')")
                .await
                .expect("insert 3");
            b.query_drop("COMMIT").await.expect("commit");
            let lag: Vec<(i32, i64)> = root
                .query(format!(
                    "SELECT k, TIMESTAMPDIFF(MICROSECOND, at, NOW(6)) FROM `{db}`.t ORDER BY k"
                ))
                .await
                .expect("rows");
            assert!(
                lag[0].1 > 1_000_000_000_000,
                "{name}: row 1 at 2001: {lag:?}"
            );
            assert!(
                lag[2].1 < 1_000_000,
                "{name}: row 3 was written at the clock's time, not {} us before: {lag:?}",
                lag[2].1
            );
            said
        });
        let logged = gtids_of_marks(srv, &rt);
        for (mark, gtid) in said {
            assert_eq!(
                logged.get(&mark),
                Some(&gtid),
                "{name}: @@last_gtid after {mark}"
            );
        }
    }
}

/// FOUND_ROWS() after a locking `SELECT SQL_CALC_FOUND_ROWS ... LIMIT`
/// (only the server knows the count: the relay asks it at once) whose
/// reply also had the relay ask the connection something of its own
/// (MariaDB 11.4: a plugin's variable set for the statement,
/// `backend/tracker.rs`): the client's count, not the relay's
/// question's.
#[test]
fn found_rows_stays_the_clients_when_the_relay_asks_after_its_statement() {
    for srv in [server(), common::servers::newer_server()] {
        let relay = start_relay(srv, &[]);
        let rt = tokio::runtime::Runtime::new().expect("rt");
        let (db, _) = rt.block_on(srv.fresh_db("relayfoundmend"));
        rt.block_on(async {
            let mut c = connect(&relay, Some(&db)).await;
            c.query_drop("CREATE TABLE t (a INT); INSERT INTO t VALUES (1), (2), (3)")
                .await
                .expect("table");
            let rows: Vec<i64> = c
                .query(
                    "SET STATEMENT innodb_lock_wait_timeout = 5 FOR \
                     SELECT SQL_CALC_FOUND_ROWS a FROM t LIMIT 1 FOR UPDATE",
                )
                .await
                .expect("select");
            assert_eq!(rows.len(), 1);
            let found: Option<i64> = c.query_first("SELECT FOUND_ROWS()").await.expect("found");
            assert_eq!(
                found,
                Some(3),
                "FOUND_ROWS() on {:?}",
                srv.sandbox.meta.name
            );
        });
    }
}

/// Each write's marker (the text between quotes after `VALUES (k, `) and
/// the GTID the server's binary log gives its transaction.
fn gtids_of_marks(
    srv: &sqlfleet_testkit::TestServer,
    rt: &tokio::runtime::Runtime,
) -> std::collections::HashMap<String, String> {
    rt.block_on(async {
        let mut root = srv.connect().await;
        let logs: Vec<mysql_async::Row> = root.query("SHOW BINARY LOGS").await.expect("logs");
        let mut out = std::collections::HashMap::new();
        for log in logs {
            let file: String = log.get(0).expect("file");
            let events: Vec<mysql_async::Row> = root
                .query(format!("SHOW BINLOG EVENTS IN '{file}'"))
                .await
                .expect("events");
            let mut gtid = None;
            for e in events {
                let kind: String = e.get("Event_type").expect("type");
                let info = e
                    .get_opt::<Vec<u8>, _>("Info")
                    .and_then(Result::ok)
                    .unwrap_or_default();
                let info = String::from_utf8_lossy(&info);
                if kind == "Gtid" {
                    gtid = info.rsplit(' ').next().map(str::to_string);
                } else if let Some((_, rest)) = info.split_once(", '") {
                    if let (Some((mark, _)), Some(g)) = (rest.split_once('\''), &gtid) {
                        if mark.contains(" #") {
                            out.insert(mark.to_string(), g.clone());
                        }
                    }
                }
            }
        }
        out
    })
}

async fn current_role(c: &mut mysql_async::Conn) -> Option<String> {
    c.query_first::<Option<String>, _>("SELECT CURRENT_ROLE()")
        .await
        .expect("CURRENT_ROLE()")
        .flatten()
}

/// MariaDB's COM_RESET_CONNECTION keeps the session's role: a pooled
/// connection reset for the next client carried the role the last one
/// set, and a new client ran with a role it never asked for (a new login
/// starts with the account's default role, none here). However a client
/// sets it — SET ROLE, dynamic SQL — the connection is closed when that
/// client leaves; a client's own reset keeps its role, as directly.
#[test]
fn a_role_one_client_set_never_reaches_the_next() {
    let srv = server();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let mut root = srv.connect().await;
        let roots: Vec<(String, String)> = root
            .query("SELECT User, Host FROM mysql.user WHERE User = 'root'")
            .await
            .expect("root accounts");
        root.query_drop("CREATE ROLE IF NOT EXISTS relay_role")
            .await
            .expect("role");
        for (u, h) in &roots {
            root.query_drop(format!("GRANT relay_role TO '{u}'@'{h}'"))
                .await
                .expect("grant the role");
        }
    });
    for mode in ["transaction", "session"] {
        let relay = start_relay(srv, &["--mode", mode, "--pool-max", "1"]);
        rt.block_on(async {
            for set in [
                "SET ROLE relay_role",
                "SET STATEMENT max_statement_time = 10 FOR SET ROLE relay_role",
                "EXECUTE IMMEDIATE 'SET ROLE relay_role'",
            ] {
                let mut a = connect(&relay, None).await;
                a.query_drop(set).await.expect(set);
                assert_eq!(
                    current_role(&mut a).await.as_deref(),
                    Some("relay_role"),
                    "{mode}: {set}"
                );
                a.reset().await.expect("the client's own reset");
                assert_eq!(
                    current_role(&mut a).await.as_deref(),
                    Some("relay_role"),
                    "{mode}: {set}: a reset keeps the role, as directly"
                );
                drop(a);
                let mut b = connect(&relay, None).await;
                assert_eq!(current_role(&mut b).await, None, "{mode}: after {set}");
            }
        });
    }
    rt.block_on(async {
        let mut root = srv.connect().await;
        root.query_drop("DROP ROLE relay_role").await.expect("drop");
    });
}

/// MariaDB's COM_RESET_CONNECTION keeps a session's profile history (and
/// goes on profiling the next statement), and the optimizer trace stays
/// after tracing is turned off: SHOW PROFILES and
/// information_schema.OPTIMIZER_TRACE, which need no privilege, listed
/// one client's statement texts to the next client on the pooled
/// connection. A client that names `profiling` or `optimizer_trace`
/// keeps its connection, sees its own traces as directly, and the
/// connection is closed when it leaves.
#[test]
fn a_statement_trace_never_reaches_the_next_client() {
    let srv = server();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    for mode in ["transaction", "session"] {
        let relay = start_relay(srv, &["--mode", mode, "--pool-max", "1"]);
        rt.block_on(async {
            for (set, secret) in [
                ("SET profiling = 1", "SELECT 'secret-of-a' AS s"),
                (
                    "EXECUTE IMMEDIATE 'SET profiling = 1'",
                    "SELECT 'secret-of-a2' AS s",
                ),
            ] {
                let mut a = connect(&relay, None).await;
                a.query_drop(set).await.expect(set);
                a.query_drop(secret).await.expect(secret);
                let own: Vec<(u32, f64, String)> =
                    a.query("SHOW PROFILES").await.expect("own profiles");
                assert!(
                    own.iter().any(|(_, _, q)| secret.contains(q.as_str())),
                    "{mode}: {own:?}"
                );
                drop(a);
                let mut b = connect(&relay, None).await;
                let seen: Vec<(u32, f64, String)> =
                    b.query("SHOW PROFILES").await.expect("profiles");
                assert!(seen.is_empty(), "{mode}: after {secret}: {seen:?}");
            }
            let mut a = connect(&relay, None).await;
            a.query_drop("SET optimizer_trace = 'enabled=on'")
                .await
                .expect("trace");
            a.query_drop("SELECT 'trace-secret' FROM mysql.user WHERE User = 'x'")
                .await
                .expect("traced");
            a.query_drop("SET optimizer_trace = DEFAULT")
                .await
                .expect("trace off");
            drop(a);
            let mut b = connect(&relay, None).await;
            let traced: Vec<String> = b
                .query("SELECT QUERY FROM information_schema.OPTIMIZER_TRACE")
                .await
                .expect("trace");
            assert!(
                traced.iter().all(|q| !q.contains("trace-secret")),
                "{mode}: {traced:?}"
            );
        });
    }
}

async fn last_gtid(c: &mut mysql_async::Conn) -> String {
    c.query_first::<String, _>("SELECT @@last_gtid")
        .await
        .expect("last_gtid")
        .expect("a row")
}

/// A relay of `pool_max` server connections and two of its clients, in a
/// fresh database (named from `prefix`) holding a table `t (a INT)`.
fn two_clients(
    prefix: &str,
    pool_max: &str,
) -> (
    Relay,
    tokio::runtime::Runtime,
    mysql_async::Conn,
    mysql_async::Conn,
) {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", pool_max]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (a, b) = rt.block_on(async {
        let (db, _) = srv.fresh_db(prefix).await;
        let mut a = connect(&relay, Some(&db)).await;
        let b = connect(&relay, Some(&db)).await;
        a.query_drop("CREATE TABLE t (a INT)")
            .await
            .expect("create");
        (a, b)
    });
    (relay, rt, a, b)
}

/// a inserts 3 rows into `t`, then b 1 (on the one connection of a
/// one-connection pool: the server's ROW_COUNT() and `@@last_gtid` there
/// are b's).
async fn a_writes_3_then_b_1(a: &mut mysql_async::Conn, b: &mut mysql_async::Conn) {
    a.query_drop("INSERT INTO t VALUES (1), (2), (3)")
        .await
        .expect("a writes 3");
    b.query_drop("INSERT INTO t VALUES (4)")
        .await
        .expect("b writes 1");
}

/// `@@last_gtid` is the GTID of the session's last write; on a pooled
/// connection it was whoever wrote there last, so a client that waits
/// for its own write on a replica (`MASTER_GTID_WAIT(@@last_gtid)`)
/// waited for another client's. A client's read of it is its own.
#[test]
fn last_gtid_is_the_clients_own_write() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "1"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("relaygtid"));
    rt.block_on(async {
        let mut a = connect(&relay, Some(&db)).await;
        let mut b = connect(&relay, Some(&db)).await;
        a.query_drop("CREATE TABLE t (a INT)")
            .await
            .expect("create");
        a.query_drop("INSERT INTO t VALUES (1)")
            .await
            .expect("a writes");
        let mine = last_gtid(&mut a).await;
        b.query_drop("INSERT INTO t VALUES (2)")
            .await
            .expect("b writes");
        let theirs = last_gtid(&mut b).await;
        assert_ne!(mine, theirs);
        assert_eq!(
            last_gtid(&mut a).await,
            mine,
            "a's own, after b wrote on the connection"
        );
        let named: Option<(String,)> = a
            .query_first("SELECT @@session.last_gtid AS g")
            .await
            .expect("named");
        assert_eq!(named, Some((mine,)));
        // A session that never wrote has none, as a new direct session.
        let mut c = connect(&relay, Some(&db)).await;
        assert_eq!(last_gtid(&mut c).await, "", "a new client's own: none");
        drop(c);
    });
}

/// The relay writes a client's own ROW_COUNT(), FOUND_ROWS() and
/// `@@last_gtid` into its statement; it must read the text as the server
/// does. Under NO_BACKSLASH_ESCAPES `'a\'` is a whole string: read in the
/// default dialect, a call inside the next string was rewritten (the
/// client's data changed) and a call after it was left alone (another
/// client's count). Also for a statement too big to hold, whose text is
/// read whole for the rewrite.
#[test]
fn own_counts_are_written_in_as_the_session_reads_its_text() {
    let (_relay, rt, mut a, mut b) = two_clients("relaynbe", "1");
    rt.block_on(async {
        a.query_drop("SET sql_mode = 'NO_BACKSLASH_ESCAPES'")
            .await
            .expect("nbe");
        let pad = "p".repeat(1 << 21);
        // ("MINE": a's own last GTID, read after.)
        for (what, text, want) in [
            (
                "a call after a string ending in a backslash",
                r"SELECT 'a\', ROW_COUNT(), 'b'".to_string(),
                vec![r"a\", "3", "b"],
            ),
            (
                "a call's text inside a string",
                r"SELECT 'a\', 'ROW_COUNT() @@last_gtid', 'b\'".to_string(),
                vec![r"a\", "ROW_COUNT() @@last_gtid", r"b\"],
            ),
            (
                "@@last_gtid after a string ending in a backslash",
                r"SELECT 'a\', @@last_gtid".to_string(),
                vec![r"a\", "MINE"],
            ),
            (
                "a streamed statement",
                format!(r"SELECT ROW_COUNT(), '{pad}', 'a\', 'ROW_COUNT()', 'b\'"),
                vec!["3", &pad, r"a\", "ROW_COUNT()", r"b\"],
            ),
        ] {
            a_writes_3_then_b_1(&mut a, &mut b).await;
            let row: mysql_async::Row = a
                .query_first(&text)
                .await
                .unwrap_or_else(|e| panic!("{what}: {e}"))
                .expect("a row");
            let got: Vec<String> = (0..row.len())
                .map(|i| {
                    let v: mysql_async::Value = row.as_ref(i).expect("column").clone();
                    mysql_async::from_value::<String>(v)
                })
                .collect();
            let mine = last_gtid(&mut a).await;
            let want: Vec<&str> = want
                .into_iter()
                .map(|w| if w == "MINE" { mine.as_str() } else { w })
                .collect();
            assert!(
                got == want,
                "{what}: got {:?}",
                got.iter()
                    .map(|s| &s[..s.len().min(40)])
                    .collect::<Vec<_>>()
            );
        }
    });
}

/// A prepared statement's reads of ROW_COUNT(), FOUND_ROWS() and
/// `@@last_gtid` are the client's own, as a text statement's are: the
/// connection it executes on may have run another client's write since.
#[test]
fn a_prepared_statement_reads_the_clients_own_counts() {
    let (_relay, rt, mut a, mut b) = two_clients("relaypsrc", "1");
    rt.block_on(async {
        let rc = a.prep("SELECT ROW_COUNT()").await.expect("prepare");
        let g = a.prep("SELECT @@last_gtid").await.expect("prepare");
        a_writes_3_then_b_1(&mut a, &mut b).await;
        let row: mysql_async::Row = a
            .exec_first(&rc, ())
            .await
            .expect("row_count")
            .expect("a row");
        assert_eq!(row.columns_ref()[0].name_str(), "ROW_COUNT()");
        assert_eq!(row.get::<i64, _>(0), Some(3), "a's own ROW_COUNT()");
        // Another value: another backend statement, the same client one.
        a.query_drop("DELETE FROM t WHERE a < 3")
            .await
            .expect("a deletes 2");
        b.query_drop("INSERT INTO t VALUES (4)")
            .await
            .expect("b writes 1");
        let n: Option<i64> = a.exec_first(&rc, ()).await.expect("row_count");
        assert_eq!(n, Some(2), "a's own ROW_COUNT() again");
        let fr = a.prep("SELECT FOUND_ROWS()").await.expect("prepare");
        let _: Vec<i64> = a.query("SELECT a FROM t").await.expect("a reads");
        let _: Vec<i64> = b.query("SELECT a FROM t LIMIT 1").await.expect("b reads");
        let n: Option<u64> = a.exec_first(&fr, ()).await.expect("found_rows");
        assert_eq!(n, Some(3), "a's own FOUND_ROWS() (b's read 1)");
        let mine: Option<String> = a.exec_first(&g, ()).await.expect("last_gtid");
        b.query_drop("INSERT INTO t VALUES (5)")
            .await
            .expect("b writes");
        let again: Option<String> = a.exec_first(&g, ()).await.expect("last_gtid");
        assert_eq!(again, mine, "a's own @@last_gtid after b wrote");
    });
}

/// Com_select as a session status read gives it.
async fn com_select(c: &mut mysql_async::Conn, how: &str) -> u64 {
    let q = match how {
        "show" => "SHOW SESSION STATUS LIKE 'Com_select'",
        _ => "SELECT 'Com_select', VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'COM_SELECT'",
    };
    let (_, v): (String, u64) = c.query_first(q).await.expect("status").expect("row");
    v
}

/// A client's session status counters count its own statements between
/// two reads, as a direct session's do: the first read keeps the
/// connection they count on (while another client works on the other).
#[test]
fn session_status_counts_the_clients_own_statements() {
    let (_relay, rt, mut a, mut b) = two_clients("relaystatus", "2");
    rt.block_on(async {
        for how in ["show", "information_schema"] {
            let before = com_select(&mut a, how).await;
            for i in 0..5 {
                // b's statements go to whichever connection is free.
                b.query_drop("BEGIN").await.expect("begin");
                let _: Option<i64> = b.query_first("SELECT 1").await.expect("b");
                let _: Option<i64> = a.query_first(format!("SELECT {i}")).await.expect("a");
                b.query_drop("COMMIT").await.expect("commit");
            }
            let after = com_select(&mut a, how).await;
            // (Reading information_schema is itself a SELECT.)
            let own = if how == "show" { 5 } else { 6 };
            assert_eq!(after - before, own, "{how}: a's own SELECTs");
        }
    });
}

/// A stored routine, trigger, event or view keeps its body as the client
/// wrote it: the relay writes a client's own ROW_COUNT(), FOUND_ROWS() and
/// `@@last_gtid` into a statement that reads them now, never into a body
/// the server keeps and runs later (where the literal would stand for
/// every later call).
#[test]
fn a_stored_body_that_reads_the_counts_is_kept_as_written() {
    let (_relay, rt, mut a, _b) = two_clients("relaybody", "1");
    rt.block_on(async {
        a.query_drop("INSERT INTO t VALUES (1), (2), (3)")
            .await
            .expect("a writes 3");
        for (create, show, name) in [
            (
                "CREATE PROCEDURE p() SELECT ROW_COUNT(), @@last_gtid",
                "SHOW CREATE PROCEDURE p",
                2,
            ),
            (
                "CREATE FUNCTION f() RETURNS TEXT NO SQL RETURN CONCAT(FOUND_ROWS(), @@last_gtid)",
                "SHOW CREATE FUNCTION f",
                2,
            ),
            (
                "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = ROW_COUNT()",
                "SHOW CREATE TRIGGER tr",
                2,
            ),
            (
                "CREATE VIEW v AS SELECT ROW_COUNT() AS r, FOUND_ROWS() AS f",
                "SHOW CREATE VIEW v",
                1,
            ),
            (
                "CREATE EVENT e ON SCHEDULE AT '2038-01-01 00:00:00' DO INSERT INTO t VALUES (ROW_COUNT())",
                "SHOW CREATE EVENT e",
                3,
            ),
        ] {
            a.query_drop(create)
                .await
                .unwrap_or_else(|e| panic!("{create}: {e}"));
            let row: mysql_async::Row = a
                .query_first(show)
                .await
                .unwrap_or_else(|e| panic!("{show}: {e}"))
                .expect("a row");
            let text: String = row.get(name).expect("the body");
            assert!(!text.contains("COALESCE"), "{create}: stored as {text}");
        }
    });
}

//! The relay against a direct connection, on scripts nobody chose: each of
//! several concurrent clients runs a seeded, generated script of
//! session-state statements (variables set by text, by prepared statement
//! and inside procedures; user variables; temporary tables; GET_LOCK;
//! autocommit=0 transactions with failing statements; warnings then SHOW
//! WARNINGS; ROW_COUNT; LAST_INSERT_ID; KILL QUERY of one's own running
//! statement from a second connection; disconnecting and connecting anew,
//! COM_RESET_CONNECTION, COM_CHANGE_USER; SQL PREPARE/EXECUTE; SET
//! timestamp; sequences' LASTVAL; user variables assigned in a SELECT;
//! isolation levels, one-shot SET TRANSACTION, read-only transactions,
//! savepoints, SET STATEMENT ... FOR; CREATE TEMPORARY ... AS SELECT and
//! a temporary table shadowing a real one; LOCK TABLES; HANDLER; one-shot
//! insert_id and rand seeds; SQL_SELECT_LIMIT, auto_increment_increment,
//! character sets, computed sql_mode; DO GET_LOCK; several statements in
//! one text; stored functions and a trigger that change the session out
//! of the text's sight: user variables, a temporary table, a setting, a
//! user lock, a sequence's LASTVAL; a second database by USE and by
//! COM_CHANGE_USER, and COM_CHANGE_USER to another account; writes to tables whose column DEFAULT or trigger
//! does what no tracker reports, directly, through a trigger and through
//! a view; reads of views that call such functions) once directly and once through a relay whose pool is much
//! smaller than the number of clients. Every client must observe exactly
//! the same results both ways, and its table must hold the same rows
//! afterwards.
//!
//! `SQLFLEET_RELAY_TRACE` adds the relay's record of a failing client
//! (which backend connection each command ran on, its pins) to the
//! message. `SQLFLEET_RELAY_DIFF_SEED` replays one seed; `SQLFLEET_RELAY_DIFF_KINDS`
//! (a list of the generator's step numbers) narrows the scripts down to
//! those kinds of step; `SQLFLEET_RELAY_DIFF_SEEDS`
//! sets how many seeds a run tries (the CI budget), `..._STEPS` the script
//! length.

mod common;

use std::time::Duration;

use mysql_async::prelude::Queryable;
use rand::{Rng, SeedableRng};
use sqlfleet_testkit::{server, TestServer};

const CLIENTS: usize = 8;

/// One step of a client's script.
#[derive(Debug, Clone)]
enum Step {
    /// A statement sent as COM_QUERY.
    Text(String),
    /// A statement sent as a server-side prepared statement with params.
    Prepared(String, Vec<mysql_async::Value>),
    /// `SELECT SLEEP(5)`, which a second connection of the same client
    /// stops with `KILL QUERY <the id its handshake gave>` (what Ctrl-C in
    /// the mariadb client does).
    KillOwn,
    /// The client disconnects and connects anew, as an application that
    /// opens a connection per request does: the new session must start
    /// clean, whatever the old one left on the server connection.
    Reconnect,
    /// COM_RESET_CONNECTION.
    Reset,
    /// COM_CHANGE_USER to the same account (a pool's older reset).
    ChangeUser,
    /// COM_CHANGE_USER to the same account and the client's second
    /// database (`DB_b`).
    ChangeUserDb,
    /// COM_CHANGE_USER to another account (`app2`, with the same rights).
    ChangeUserOther,
}

/// `kills`: whether scripts may stop their own statements (their second
/// connection must log in while the pool may be held by pinned clients:
/// free in the shared-account modes, where a login without a database
/// needs no server connection, not in per-user mode).
fn generate(rng: &mut rand::rngs::StdRng, steps: usize, kills: bool) -> Vec<Step> {
    use Step::*;
    // SQLFLEET_RELAY_DIFF_KINDS=11,12,51: only these kinds of step (to
    // narrow a difference down).
    let kinds: Vec<u32> = std::env::var("SQLFLEET_RELAY_DIFF_KINDS")
        .unwrap_or_default()
        .split(',')
        .filter_map(|k| k.trim().parse().ok())
        .collect();
    let mut out = Vec::new();
    while out.len() < steps {
        let k: u8 = rng.gen_range(0..9);
        let kv = mysql_async::Value::from(k);
        let tz = format!("'+0{k}:00'");
        let kind = rng.gen_range(0..100);
        if !kinds.is_empty() && !kinds.contains(&kind) {
            continue;
        }
        let s: Vec<Step> = match kind {
            0 => vec![Text(format!("SET time_zone = {tz}"))],
            1 => vec![Prepared("SET time_zone = ?".into(), vec![format!("+0{k}:00").into()])],
            2 => vec![Text("SELECT @@session.time_zone, @@session.sql_mode, @@session.autocommit".into())],
            3 => vec![Prepared("SELECT @@session.time_zone, @@session.autocommit".into(), vec![])],
            4 => vec![Text(format!("SET @v = {k}"))],
            5 => vec![Prepared("SET @v = ?".into(), vec![kv])],
            6 => vec![Text("SELECT @v, @pv".into())],
            7 => vec![
                Text("CREATE TEMPORARY TABLE IF NOT EXISTS tmp (a INT)".into()),
                Text(format!("INSERT INTO tmp VALUES ({k})")),
            ],
            8 => vec![Text("SELECT COUNT(*), SUM(a) FROM tmp".into())],
            9 => vec![Text("SELECT GET_LOCK(CONCAT('lk_', DATABASE(), '_', @@session.sql_mode), 1)".into())],
            10 => vec![Text("SELECT IS_USED_LOCK(CONCAT('lk_', DATABASE(), '_', @@session.sql_mode)) IS NOT NULL, RELEASE_LOCK(CONCAT('lk_', DATABASE(), '_', @@session.sql_mode))".into())],
            11 => vec![Text("SET autocommit = 0".into())],
            12 => vec![Prepared("SET autocommit = ?".into(), vec![mysql_async::Value::from(0)])],
            13 => vec![Text("SET autocommit = 1".into())],
            14 | 15 => vec![Text(format!("INSERT INTO t (v) VALUES ({k})"))],
            16 => vec![Text("INSERT INTO no_such_table VALUES (1)".into())],
            17 => vec![Text("COMMIT".into())],
            18 => vec![Text("ROLLBACK".into())],
            19 => vec![Text("SELECT COUNT(*), COALESCE(SUM(v), 0) FROM t".into())],
            20 => vec![Text("SELECT 1/0".into()), Text("SHOW WARNINGS".into())],
            21 => vec![Text("SHOW WARNINGS".into())],
            22 => vec![Text("SELECT @@warning_count, @@error_count".into())],
            23 => vec![Text("UPDATE t SET v = v + 1 WHERE v < 5".into()), Text("SELECT ROW_COUNT()".into())],
            24 => vec![Text("SELECT ROW_COUNT()".into())],
            25 => vec![Text(format!("CALL p_tz({tz})"))],
            26 => vec![Text(format!("CALL p_uv({k})"))],
            27 => vec![Prepared("INSERT INTO t (v) VALUES (?)".into(), vec![kv]), Text("SELECT LAST_INSERT_ID()".into())],
            28 => vec![Text(format!("SET SESSION sql_mode = '{}'", if k.is_multiple_of(2) { "ANSI_QUOTES" } else { "" }))],
            29 => vec![Text("SELECT DATABASE()".into())],
            30 => vec![Text(format!("SET NAMES {}", if k.is_multiple_of(2) { "latin1" } else { "utf8mb4" })), Text("SELECT @@character_set_client, @@collation_connection".into())],
            31 => vec![
                Text(format!("INSERT INTO t (v) VALUES ({k})")),
                Text("SELECT 1".into()),
                Text("SELECT LAST_INSERT_ID(), @@identity".into()),
            ],
            32 => vec![Text("SELECT LAST_INSERT_ID()".into())],
            33 => vec![
                Text("SELECT v FROM t ORDER BY id LIMIT 2".into()),
                Text("SELECT FOUND_ROWS(), ROW_COUNT()".into()),
            ],
            34 => vec![Text("SELECT FOUND_ROWS()".into())],
            // The statement after a kill must leave no trace of the kill's
            // timing: it reads a table under any LOCK TABLES and database
            // (information_schema), so it clears the diagnostics and sets
            // FOUND_ROWS() (a `SELECT ... FROM t` failed with ER 1100 after
            // LOCK TABLES and a USE, and left both as the kill's moment had:
            // seed 1024). Not a grouping: `SELECT COUNT(*) ... WHERE 0`
            // keeps the count before it (`sql/found_rows.rs`), which was
            // the kill's (seed 1024 again, once the relay followed that).
            35 if kills => vec![
                KillOwn,
                Text("SELECT ENGINE FROM information_schema.ENGINES WHERE 0".into()),
            ],
            36 => vec![Reconnect],
            37 => vec![Reset],
            38 => vec![ChangeUser],
            // Reads the relay may answer from a recorded reply.
            39 => vec![Text("select @@version_comment limit 1".into())],
            40 => vec![Text("SELECT @@session.time_zone AS tz, @@sql_mode, @@max_allowed_packet".into())],
            // Session state in other shapes.
            41 => vec![Text("PREPARE s1 FROM 'SELECT ? + 1, @v'".into()), Text(format!("SET @a = {k}"))],
            42 => vec![Text("EXECUTE s1 USING @a".into())],
            43 => vec![Text("DEALLOCATE PREPARE s1".into())],
            44 => vec![Text(format!("SET timestamp = 100000000{k}"))],
            45 => vec![Text("SELECT UNIX_TIMESTAMP() < 1500000000, @@timestamp < 1500000000".into())],
            46 => vec![Text("SELECT NEXTVAL(sq)".into())],
            47 => vec![Text("SELECT LASTVAL(sq), PREVIOUS VALUE FOR sq".into())],
            48 => vec![Text(format!("SELECT @x := {k}")), Text("SELECT @x".into())],
            49 => vec![Text(format!("SELECT {k} INTO @y")), Text("SELECT @y".into())],
            50 => vec![Text("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED".into()), Text("SELECT @@tx_isolation".into())],
            51 => vec![Text("SET TRANSACTION READ ONLY".into()), Text(format!("INSERT INTO t (v) VALUES ({k})"))],
            52 => vec![Text("START TRANSACTION READ ONLY".into()), Text(format!("INSERT INTO t (v) VALUES ({k})"))],
            53 => vec![Text("SAVEPOINT sp1".into()), Text(format!("INSERT INTO t (v) VALUES ({k})")), Text("ROLLBACK TO SAVEPOINT sp1".into())],
            54 => vec![Text("SET STATEMENT time_zone = '+05:00' FOR SELECT @@time_zone".into()), Text("SELECT @@time_zone".into())],
            55 => vec![Text("CREATE TEMPORARY TABLE IF NOT EXISTS tmp2 AS SELECT v FROM t".into()), Text("SELECT COUNT(*) FROM tmp2".into())],
            56 => vec![Text("DROP TEMPORARY TABLE IF EXISTS tmp".into())],
            57 => vec![Text("LOCK TABLES t READ".into())],
            58 => vec![Text("UNLOCK TABLES".into())],
            59 => vec![Text("HANDLER t OPEN".into()), Text("HANDLER t READ FIRST".into())],
            60 => vec![Text("HANDLER t CLOSE".into())],
            61 => vec![Text(format!("SET insert_id = {}", 1000 + u32::from(k))), Text(format!("INSERT INTO t (v) VALUES ({k})"))],
            62 => vec![Text(format!("SET SQL_SELECT_LIMIT = {}", if k.is_multiple_of(2) { "1" } else { "DEFAULT" })), Text("SELECT v FROM t ORDER BY id".into())],
            63 => vec![Text(format!("SET @@session.auto_increment_increment = {}", if k.is_multiple_of(2) { 1 } else { 3 }))],
            64 => vec![Text(format!("SET {}", if k.is_multiple_of(2) { "CHARACTER SET latin1" } else { "character_set_results = NULL" })), Text("SELECT @@character_set_results, @@character_set_client".into())],
            65 => vec![Text("DO GET_LOCK(CONCAT('lk2_', DATABASE()), 1)".into())],
            66 => vec![Text("DO RELEASE_ALL_LOCKS()".into()), Text("SELECT IS_USED_LOCK(CONCAT('lk2_', DATABASE())) IS NULL".into())],
            67 => vec![Text(format!("SET sql_mode = {}", if k.is_multiple_of(2) { "CONCAT(@@sql_mode, ',NO_ZERO_DATE')" } else { "DEFAULT" }))],
            68 => vec![Text(format!("SET rand_seed1 = {k}, rand_seed2 = {k}")), Text("SELECT RAND()".into())],
            69 => vec![Text("CREATE TEMPORARY TABLE IF NOT EXISTS t (v INT)".into())],
            // The same shapes sent as server-side prepared statements.
            70 => vec![Prepared("SET TRANSACTION READ ONLY".into(), vec![]), Prepared("INSERT INTO t (v) VALUES (?)".into(), vec![kv])],
            71 => vec![Prepared("SAVEPOINT sp1".into(), vec![]), Prepared("SELECT NEXTVAL(sq)".into(), vec![])],
            72 => vec![Prepared("SET STATEMENT time_zone = '+05:00' FOR SELECT @@time_zone".into(), vec![])],
            73 => vec![Prepared("SET insert_id = ?".into(), vec![mysql_async::Value::from(2000 + u32::from(k))]), Prepared("INSERT INTO t (v) VALUES (?)".into(), vec![kv])],
            74 => vec![Prepared("SELECT no_such_column FROM t".into(), vec![]), Text("SELECT ROW_COUNT()".into()), Text("SHOW WARNINGS".into())],
            // Several statements in one text.
            75 => vec![Text(format!("SET @m = {k}; SELECT @m + 1, @@time_zone"))],
            76 => vec![Text(format!("INSERT INTO t (v) VALUES ({k}); SELECT LAST_INSERT_ID()")), Text("SELECT LAST_INSERT_ID(), ROW_COUNT()".into())],
            77 => vec![Text(format!("SET time_zone = '+0{k}:00'; SELECT @@time_zone")), Text("SELECT @@time_zone".into())],
            // A CREATE TABLE's SELECT reading the client's counts.
            79 => vec![
                Text(format!("INSERT INTO t (v) VALUES ({k}), ({k})")),
                Text("CREATE OR REPLACE TABLE rc SELECT ROW_COUNT() AS r, FOUND_ROWS() AS f".into()),
                Text("SELECT r, f FROM rc".into()),
            ],
            78 => vec![Text("CREATE TEMPORARY TABLE IF NOT EXISTS tmp3 (a INT); INSERT INTO tmp3 VALUES (1)".into()), Text("SELECT COUNT(*) FROM tmp3".into())],
            // Session state changed out of the text's sight: stored
            // functions and a trigger (user variables, a temporary table,
            // a setting, a user lock, a sequence), and a second database.
            80 => vec![Text(format!("SET time_zone = f_uv({k})")), Text("SELECT @fv, @@time_zone".into())],
            81 => vec![Text(format!("SELECT f_tmp({k})")), Text("SELECT COUNT(*), SUM(a) FROM ftmp".into())],
            82 => vec![Text(format!("SELECT f_tz({k})")), Text("SELECT @@time_zone".into())],
            83 => vec![Text(format!("INSERT INTO tt (v) VALUES ({k})")), Text("SELECT @trig".into())],
            84 => vec![Text("SELECT f_lock()".into())],
            85 => vec![Text("SELECT IS_FREE_LOCK(CONCAT('lkf_', DATABASE())), RELEASE_LOCK(CONCAT('lkf_', DATABASE()))".into())],
            86 => vec![Text(format!("USE {}", if k.is_multiple_of(2) { "{DB}_b" } else { "{DB}" })), Text("SELECT DATABASE(), COUNT(*) FROM t".into())],
            87 => vec![ChangeUserDb, Text("SELECT DATABASE()".into())],
            88 => vec![Text(format!("DO f_uv({k})")), Text("SELECT @fv".into())],
            89 => vec![Prepared("SELECT f_uv(?)".into(), vec![kv]), Prepared("SELECT @fv".into(), vec![])],
            90 => vec![Text("SELECT f_seq()".into()), Text("SELECT LASTVAL(sq)".into())],
            // Writes whose table does what the tracker does not report: a
            // column DEFAULT NEXTVAL, a trigger taking a user lock, a
            // trigger writing such a table, a view over one.
            91 => vec![Text(format!("INSERT INTO ts (v) VALUES ({k})")), Text("SELECT LASTVAL(sq2)".into())],
            92 => vec![Text(format!("INSERT INTO tl (v) VALUES ({k})")), Text("SELECT IS_FREE_LOCK(CONCAT('lkt_', DATABASE()))".into())],
            93 => vec![Text("SELECT RELEASE_LOCK(CONCAT('lkt_', DATABASE()))".into())],
            94 => vec![Text(format!("INSERT INTO ta (v) VALUES ({k})")), Text("SELECT PREVIOUS VALUE FOR sq2".into())],
            95 => vec![Prepared("INSERT INTO vts (v) VALUES (?)".into(), vec![kv]), Text("SELECT LASTVAL(sq2)".into())],
            96 => vec![ChangeUserOther, Text("SELECT DATABASE(), @@time_zone, @v".into())],
            // Reads of views whose definitions call such functions.
            98 => vec![Text("SELECT l FROM v_lock".into())],
            99 => vec![Prepared("SELECT id FROM v_seq".into(), vec![]), Text("SELECT LASTVAL(sq)".into())],
            // A write whose trigger reads such a view.
            97 => vec![Text(format!("INSERT INTO tv (v) VALUES ({k})")), Text("SELECT LASTVAL(sq)".into())],
            _ => vec![Text("SELECT CONVERT_TZ('2020-01-01 00:00:00', @@session.time_zone, '+00:00')".into())],
        };
        out.extend(s);
    }
    out
}

/// What a step returned: its rows, or its error code.
async fn run_step(c: &mut mysql_async::Conn, db: &str, s: &Step) -> String {
    let r: Result<Vec<mysql_async::Row>, mysql_async::Error> = match s {
        Step::Text(q) => c.query(q.replace("{DB}", db)).await,
        Step::Prepared(q, p) => c.exec(q.replace("{DB}", db), p.clone()).await,
        Step::Reset => {
            return match c.reset().await {
                Ok(true) => "reset".into(),
                Ok(false) => "reset not supported".into(),
                Err(e) => format!("reset failed: {e}"),
            }
        }
        Step::ChangeUser => {
            return match c.change_user(Default::default()).await {
                Ok(()) => "changed user".into(),
                Err(e) => format!("change user failed: {e}"),
            }
        }
        Step::ChangeUserDb => {
            let to = mysql_async::ChangeUserOpts::default().with_db_name(Some(format!("{db}_b")));
            return match c.change_user(to).await {
                Ok(()) => "changed user".into(),
                Err(e) => format!("change user failed: {e}"),
            };
        }
        Step::ChangeUserOther => {
            let to = mysql_async::ChangeUserOpts::default()
                .with_user(Some("app2".into()))
                .with_pass(Some("app2-pw".into()));
            return match c.change_user(to).await {
                Ok(()) => "changed user".into(),
                Err(e) => format!("change user failed: {e}"),
            };
        }
        Step::Reconnect => unreachable!("run_all reconnects"),
        Step::KillOwn => {
            let id = c.id();
            // No database and no settings to read at connect: the login
            // and the KILL need no pooled server connection, which pinned
            // clients may all hold.
            // As the account the client is now (COM_CHANGE_USER may have
            // changed it).
            let side_opts = mysql_async::OptsBuilder::from_opts(c.opts().clone())
                .db_name(None::<String>)
                .max_allowed_packet(Some(16 << 20))
                .wait_timeout(Some(28_800));
            let mut side = mysql_async::Conn::new(side_opts)
                .await
                .expect("second connection");
            // KILL until the statement is stopped (one that comes before
            // it started finds nothing to stop, directly and through the
            // relay alike).
            // A KILL already sent when the statement ends is waited for:
            // dropped unanswered, it could reach the server later and stop
            // one of the script's next statements.
            let done = std::sync::atomic::AtomicBool::new(false);
            let killer = async {
                loop {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    if done.load(std::sync::atomic::Ordering::SeqCst) {
                        break;
                    }
                    let _ = side.query_drop(format!("KILL QUERY {id}")).await;
                }
            };
            let sleeper = async {
                let r: Result<Vec<i64>, _> = c.query("SELECT SLEEP(5)").await;
                done.store(true, std::sync::atomic::Ordering::SeqCst);
                r
            };
            let (r, ()) = tokio::join!(sleeper, killer);
            let _ = side.disconnect().await;
            // Stopped mid-sleep SLEEP() returns 1; stopped around it the
            // statement fails with 1317: both are "killed", which one
            // depends on timing alone, and so do the diagnostics and
            // FOUND_ROWS() it leaves (the generator's next statement resets
            // both).
            return match r {
                Ok(v) if v == [1] => "killed".into(),
                Err(mysql_async::Error::Server(e)) if e.code == 1317 => "killed".into(),
                other => format!("not killed: {other:?}"),
            };
        }
    };
    match r {
        Ok(rows) => rows
            .into_iter()
            .map(|r| {
                r.unwrap()
                    .into_iter()
                    .map(|v| v.as_sql(true))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect::<Vec<_>>()
            .join(";"),
        Err(mysql_async::Error::Server(e)) => format!("ERROR {}", e.code),
        Err(e) => format!("FAILED {e}"),
    }
}

async fn client_opts(port: u16, user: &str, pw: &str, db: &str) -> mysql_async::Opts {
    mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some(user))
        .pass(Some(pw))
        .db_name(Some(db))
        .prefer_socket(false)
        .into()
}

/// Prepares database `db` and its second, `db_b`: per-database tables,
/// procedures, functions that change the session, a trigger that sets a
/// user variable.
async fn setup(srv: &TestServer, db: &str) {
    let mut c = srv.connect().await;
    c.query_drop(format!(
        "DROP DATABASE IF EXISTS {db}_b; CREATE DATABASE {db}_b;
         CREATE TABLE {db}_b.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB;
         DROP DATABASE IF EXISTS {db}; CREATE DATABASE {db}; USE {db};
         CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB;
         CREATE TABLE tt (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB;
         CREATE TABLE tu (id INT AUTO_INCREMENT PRIMARY KEY, k INT UNIQUE, v INT) ENGINE=InnoDB;
         CREATE TRIGGER tt_bi BEFORE INSERT ON tt FOR EACH ROW SET @trig = NEW.v;
         CREATE PROCEDURE p_tz(z VARCHAR(10)) SET time_zone = z;
         CREATE PROCEDURE p_uv(k INT) SET @pv = k;
         CREATE FUNCTION f_uv(k INT) RETURNS VARCHAR(10) DETERMINISTIC BEGIN SET @fv = k; RETURN CONCAT('+0', k, ':00'); END;
         CREATE FUNCTION f_tmp(k INT) RETURNS INT DETERMINISTIC BEGIN CREATE TEMPORARY TABLE IF NOT EXISTS ftmp (a INT); INSERT INTO ftmp VALUES (k); RETURN k; END;
         CREATE FUNCTION f_tz(k INT) RETURNS INT DETERMINISTIC BEGIN SET time_zone = CONCAT('+0', k, ':00'); RETURN k; END;
         CREATE FUNCTION f_lock() RETURNS INT DETERMINISTIC RETURN GET_LOCK(CONCAT('lkf_', DATABASE()), 1);
         CREATE SEQUENCE sq;
         CREATE FUNCTION f_seq() RETURNS BIGINT DETERMINISTIC RETURN NEXTVAL(sq);
         CREATE SEQUENCE sq2;
         CREATE TABLE ts (id BIGINT DEFAULT NEXTVAL(sq2) PRIMARY KEY, v INT) ENGINE=InnoDB;
         CREATE VIEW vts AS SELECT id, v FROM ts;
         CREATE VIEW v_lock AS SELECT f_lock() AS l;
         CREATE VIEW v_seq AS SELECT f_seq() AS id;
         CREATE TABLE tl (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB;
         CREATE TRIGGER tl_bi BEFORE INSERT ON tl FOR EACH ROW SET NEW.v = GET_LOCK(CONCAT('lkt_', DATABASE()), 1);
         CREATE TABLE ta (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB;
         CREATE TRIGGER ta_ai AFTER INSERT ON ta FOR EACH ROW INSERT INTO ts (v) VALUES (NEW.v);
         CREATE TABLE tv (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB;
         CREATE TRIGGER tv_bi BEFORE INSERT ON tv FOR EACH ROW SET NEW.v = (SELECT id FROM v_seq);"
    ))
    .await
    .expect("setup");
}

/// Waits (up to 5 s) until server thread `id` has ended. A direct client
/// that disconnects leaves the server to end its thread, and release its
/// user locks, a moment later; on a loaded host the client's next
/// connection could otherwise still find its own lock taken (seen: seed
/// 5015, RELEASE_LOCK 0 directly, NULL through the relay). A relay
/// client's id names no server thread, so nothing is waited for there.
async fn thread_gone(watch: &mysql_async::Opts, id: u32) {
    let Ok(mut w) = mysql_async::Conn::new(watch.clone()).await else {
        return;
    };
    for _ in 0..250 {
        let n: Option<u64> = w
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?",
                (id,),
            )
            .await
            .ok()
            .flatten();
        if n == Some(0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = w.disconnect().await;
}

/// Runs every client's script concurrently against `port`; returns each
/// client's observations followed by its table's final contents.
/// With `SQLFLEET_RELAY_TRACE` set: the ids each script's connections
/// got (prefix, client, id), to print the relay's record of a failing
/// client (`Relay::trace`).
static IDS: std::sync::Mutex<Vec<(String, usize, u32)>> = std::sync::Mutex::new(Vec::new());

fn note_id(prefix: &str, i: usize, id: u32) {
    if std::env::var_os("SQLFLEET_RELAY_TRACE").is_some() {
        IDS.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((prefix.to_string(), i, id));
    }
}

/// The relay's record of client `i` of run `prefix`, when traced.
fn traced(relay: &sqlfleet_relay::Relay, prefix: &str, i: usize) -> String {
    let ids: Vec<u32> = IDS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|(p, j, _)| p == prefix && *j == i)
        .map(|(_, _, id)| *id)
        .collect();
    ids.iter()
        .map(|id| format!("\nrelay client {id}:\n  {}", relay.trace(*id).join("\n  ")))
        .collect()
}

/// Routine DDL anywhere on the server (a CREATE FUNCTION, a DROP DATABASE
/// holding routines) makes every session's next run of a prepared
/// statement that calls a routine prepare again, and that clears the
/// warnings the previous statement left (`Prepared_statement::reprepare`;
/// `@@warning_count` reads 0 where it read 1, directly and through the
/// relay alike). So no test of this binary makes its databases while
/// another's scripts run: setups take this for writing, runs for reading.
static ROUTINE_DDL: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

async fn run_all(
    srv: &TestServer,
    port: u16,
    user: &str,
    pw: &str,
    prefix: &str,
    scripts: &[Vec<Step>],
) -> Vec<Vec<String>> {
    {
        let _ddl = ROUTINE_DDL.write().await;
        for i in 0..scripts.len() {
            setup(srv, &format!("{prefix}_{i}")).await;
        }
    }
    let _running = ROUTINE_DDL.read().await;
    // The server's own view of its threads, to wait for a disconnected
    // client's thread to end (its user locks go with it).
    let root_pw = srv.sandbox.password().expect("password");
    let watch_opts = client_opts(
        srv.sandbox.meta.primary().port,
        "root",
        root_pw.expose(),
        "mysql",
    )
    .await;
    let mut tasks = Vec::new();
    for (i, script) in scripts.iter().enumerate() {
        let db = format!("{prefix}_{i}");
        let opts = client_opts(port, user, pw, &db).await;
        let watch_opts = watch_opts.clone();
        let script = script.clone();
        let prefix = prefix.to_string();
        tasks.push(tokio::spawn(async move {
            let mut c = mysql_async::Conn::new(opts.clone())
                .await
                .expect("client connects");
            note_id(&prefix, i, c.id());
            let mut seen = Vec::new();
            for s in &script {
                if let Step::Reconnect = s {
                    let old = c.id();
                    let _ = c.disconnect().await;
                    thread_gone(&watch_opts, old).await;
                    c = mysql_async::Conn::new(opts.clone())
                        .await
                        .expect("client reconnects");
                    note_id(&prefix, i, c.id());
                    seen.push("reconnected".into());
                    continue;
                }
                seen.push(run_step(&mut c, &db, s).await.replace(&db, "DB"));
            }
            let _ = c.disconnect().await;
            seen
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.expect("client task"));
    }
    // What each client's table holds once every client has gone.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut c = srv.connect().await;
    for (i, seen) in out.iter_mut().enumerate() {
        let rows: Vec<(i64, i64)> = c
            .query(format!("SELECT id, v FROM {prefix}_{i}.t ORDER BY id"))
            .await
            .expect("final rows");
        seen.push(format!("final table: {rows:?}"));
        let rows: Vec<(i64, i64)> = c
            .query(format!("SELECT id, v FROM {prefix}_{i}_b.t ORDER BY id"))
            .await
            .expect("final rows");
        seen.push(format!("second database's table: {rows:?}"));
    }
    out
}

async fn start_relay(
    srv: &TestServer,
    mode: &str,
    accounts: &str,
) -> (u16, tokio::sync::oneshot::Sender<()>) {
    let (port, stop, _) = start_relay_with_metrics(srv, mode, accounts).await;
    (port, stop)
}

async fn start_relay_with_metrics(
    srv: &TestServer,
    mode: &str,
    accounts: &str,
) -> (
    u16,
    tokio::sync::oneshot::Sender<()>,
    std::sync::Arc<sqlfleet_relay::Relay>,
) {
    common::serve_relay(&relay_config(srv, mode, accounts, 2), None).await
}

/// The configuration of a relay before `srv` with a pool of `max`
/// connections and the users `app` and `app2`.
fn relay_config(srv: &TestServer, mode: &str, accounts: &str, max: usize) -> String {
    let pw = srv.sandbox.password().expect("password");
    format!(
        r#"
[relay]
listen = ["127.0.0.1:0"]
mode = "{mode}"

[backend]
servers = ["127.0.0.1:{port}"]
user = "root"
password = "{pw}"
accounts = "{accounts}"

[pool]
max = {max}
wait_timeout = 30

[[users]]
name = "app"
{hashes}

[[users]]
name = "app2"
{hashes2}
"#,
        port = srv.sandbox.meta.primary().port,
        pw = pw.expose(),
        hashes = sqlfleet_relay::config::hash_lines("app-pw"),
        hashes2 = sqlfleet_relay::config::hash_lines("app2-pw"),
    )
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn differential(mode: &str, accounts: &str, seeds: std::ops::Range<u64>) {
    // Enough of the whole generator for its variable reads and SETs to
    // repeat within a recorded reply's lifetime.
    let many =
        seeds.end - seeds.start >= 6 && std::env::var_os("SQLFLEET_RELAY_DIFF_KINDS").is_none();
    let srv = server();

    let root_pw = srv.sandbox.password().expect("password");
    let steps = env_num("SQLFLEET_RELAY_DIFF_STEPS", 40) as usize;
    if accounts == "per-user" {
        // The client's own account on the server, with root's rights (what
        // the direct side runs as), and the relay's user list's password.
        let mut c = srv.connect().await;
        for sql in [
            "CREATE OR REPLACE USER 'app'@'%' IDENTIFIED BY 'app-pw'",
            "GRANT ALL PRIVILEGES ON *.* TO 'app'@'%' WITH GRANT OPTION",
        ] {
            c.query_drop(sql).await.expect("app account");
        }
    }
    // The account scripts change to with COM_CHANGE_USER, on the server
    // (same rights) and in the relay's user list.
    let mut c = srv.connect().await;
    for sql in [
        "CREATE USER IF NOT EXISTS 'app2'@'%' IDENTIFIED BY 'app2-pw'",
        "GRANT ALL PRIVILEGES ON *.* TO 'app2'@'%' WITH GRANT OPTION",
    ] {
        c.query_drop(sql).await.expect("app2 account");
    }
    let (port, stop, relay) = start_relay_with_metrics(srv, mode, accounts).await;
    // The relay's account on the server: same rights as the direct client.
    for seed in seeds {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let scripts: Vec<Vec<Step>> = (0..CLIENTS)
            .map(|_| generate(&mut rng, steps, accounts != "per-user"))
            .collect();
        let direct = run_all(
            srv,
            srv.sandbox.meta.primary().port,
            "root",
            root_pw.expose(),
            &format!("dd{seed}"),
            &scripts,
        )
        .await;
        let relayed = run_all(srv, port, "app", "app-pw", &format!("dr{seed}"), &scripts).await;
        // The kills stop the statement (else the step would test nothing).
        for (script, seen) in scripts.iter().zip(&direct) {
            for (step, got) in script.iter().zip(seen) {
                if matches!(step, Step::KillOwn) {
                    assert_eq!(
                        got, "killed",
                        "seed {seed}: a direct KILL QUERY of one's own statement"
                    );
                }
            }
        }
        for (i, (d, r)) in direct.iter().zip(&relayed).enumerate() {
            if d != r {
                let at = d.iter().zip(r).position(|(a, b)| a != b).unwrap_or(0);
                let script: Vec<String> = scripts[i]
                    .iter()
                    .take(at + 1)
                    .map(|s| format!("{s:?}"))
                    .collect();
                panic!(
                    "{mode} mode, seed {seed} (replay: SQLFLEET_RELAY_DIFF_SEED={seed}), client {i}, step {at}:\n  direct: {}\n  relay:  {}\nscript up to there:\n  {}{}",
                    if std::env::var_os("SQLFLEET_RELAY_DIFF_ALL").is_some() { format!("{d:?}") } else { format!("{:?}", d.get(at)) },
                    if std::env::var_os("SQLFLEET_RELAY_DIFF_ALL").is_some() { format!("{r:?}") } else { format!("{:?}", r.get(at)) },
                    script.join("\n  "),
                    traced(&relay, &format!("dr{seed}"), i)
                );
            }
        }
    }
    let answered = relay
        .metrics()
        .answered_locally
        .load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("{mode} mode, {accounts} accounts: {answered} statements answered by the relay from recorded replies");
    // The scripts' variable reads and session SETs are answered from
    // recorded replies in transaction mode: they were compared too.
    if many && mode == "transaction" {
        assert!(answered > 0, "no statement was answered locally");
    }
    let _ = stop.send(());
}

fn seeds(first: u64) -> std::ops::Range<u64> {
    match std::env::var("SQLFLEET_RELAY_DIFF_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(s) => s..s + 1,
        None => first..first + env_num("SQLFLEET_RELAY_DIFF_SEEDS", 6),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transaction_mode_matches_direct_connections() {
    differential("transaction", "shared", seeds(1000)).await;
}

/// The same scripts with per-user backend accounts: each client's
/// connections log in as that client.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn per_user_accounts_match_direct_connections() {
    differential("transaction", "per-user", seeds(9000)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn session_mode_matches_direct_connections() {
    differential("session", "shared", seeds(5000)).await;
}

/// Runs `scripts` directly, then through a relay in transaction and in
/// session mode, asserts every client saw the same, and gives what the
/// direct clients saw (for the test to check the premise it names).
async fn same_both_ways(
    srv: &TestServer,
    scripts: Vec<Vec<Step>>,
    prefix: &str,
) -> Vec<Vec<String>> {
    let root_pw = srv.sandbox.password().expect("password");
    let port = srv.sandbox.meta.primary().port;
    let direct = run_all(
        srv,
        port,
        "root",
        root_pw.expose(),
        &format!("{prefix}d"),
        &scripts,
    )
    .await;
    for mode in ["transaction", "session"] {
        let (port, stop) = start_relay(srv, mode, "shared").await;
        let relayed = run_all(srv, port, "app", "app-pw", &format!("{prefix}r"), &scripts).await;
        // The first step each way differs at, with its statement.
        for (i, (d, r)) in direct.iter().zip(&relayed).enumerate() {
            if let Some(n) = (0..d.len().max(r.len())).find(|&n| d.get(n) != r.get(n)) {
                let at = |n: usize| {
                    scripts[i]
                        .get(n)
                        .map(|s| format!("{s:?}"))
                        .unwrap_or_default()
                };
                panic!(
                    "{mode} mode, client {i}, step {n}: direct {:?}, relay {:?}; the step: {}; \
                     the two before: {} / {}",
                    d.get(n),
                    r.get(n),
                    at(n),
                    at(n.wrapping_sub(2)),
                    at(n.wrapping_sub(1)),
                );
            }
        }
        assert_eq!(direct, relayed, "{mode} mode");
        let _ = stop.send(());
    }
    direct
}

/// COM_RESET_CONNECTION and COM_CHANGE_USER leave ROW_COUNT(),
/// LAST_INSERT_ID() and FOUND_ROWS() as the server's reset does (the
/// relay answers the counts from what it tracks; it kept the old ones).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_and_change_user_leave_the_counts_a_direct_session_has() {
    use Step::*;
    let srv = server();
    let counts = || Text("SELECT ROW_COUNT(), LAST_INSERT_ID(), FOUND_ROWS()".into());
    let mut script = Vec::new();
    for (reset, rows) in [(Reset, 2), (ChangeUser, 3)] {
        script.extend([
            Text(format!("SELECT * FROM seq_1_to_{rows}")),
            Text("INSERT INTO t (v) VALUES (1), (2)".into()),
            reset,
            counts(),
            Text("INSERT INTO t (v) VALUES (3)".into()),
            counts(),
        ]);
    }
    let direct = same_both_ways(srv, vec![script], "c").await;
    // What the relay must imitate happened: the reset gave ROW_COUNT()
    // 0 and LAST_INSERT_ID() 0 and kept the previous SELECT's FOUND_ROWS().
    for after in ["'0','0','2'", "'0','0','3'"] {
        assert!(
            direct[0].iter().any(|s| s == after),
            "{after} in {direct:?}"
        );
    }
}

/// FOUND_ROWS() after a SELECT that failed is what the server left: 0
/// when a function failed while the SELECT ran, the earlier count when
/// the SELECT failed before running (found by the differential oracle:
/// the relay answered the earlier count in both cases).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_select_leaves_found_rows_as_the_server_does() {
    use Step::*;
    let srv = server();
    let found = || Text("SELECT FOUND_ROWS()".into());
    let script = vec![
        Text("SELECT * FROM seq_1_to_3".into()),
        Text("START TRANSACTION READ ONLY".into()),
        Text("SELECT f_tmp(3)".into()),
        found(),
        Text("COMMIT".into()),
        Text("SELECT * FROM seq_1_to_2".into()),
        Text("SELECT * FROM no_such_table".into()),
        found(),
        Text("SELECT * FROM seq_1_to_4".into()),
        Text("SELECT f_tmp(1) FROM seq_1_to_2 WHERE seq = (SELECT seq FROM seq_1_to_3)".into()),
        found(),
    ];
    let direct = same_both_ways(srv, vec![script], "f").await;
    // What the relay must imitate happened.
    assert_eq!(direct[0][2], "ERROR 1792", "{direct:?}");
    assert_eq!(direct[0][3], "'0'", "{direct:?}");
    assert_eq!(direct[0][7], "'2'", "{direct:?}");
}

/// The statement shapes whose FOUND_ROWS() the server was measured to
/// set in each way (`sql/found_rows.rs`): the rows they return, the count
/// before them, or only the server's — a grouping without GROUP BY whose
/// WHERE the optimizer finds impossible (a constant, a primary key value
/// that is not there, a constant row failing the rest) keeps the count
/// before it, SELECT ... INTO counts the rows it found, EXPLAIN sets 0.
const FOUND_ROWS_SHAPES: &[&str] = &[
    "SELECT COUNT(*) FROM t WHERE 0",
    "SELECT COUNT(*) FROM t WHERE id = 999999",
    "SELECT MAX(v) FROM t WHERE id = 1 AND v = -7",
    "SELECT COUNT(*) FROM t WHERE id < 0",
    "SELECT COUNT(*) FROM t",
    "SELECT SUM(v) FROM t WHERE 1 = 0 HAVING 1",
    "SELECT COUNT(*) FROM t WHERE 0 HAVING COUNT(*) > 0",
    "SELECT 1 UNION ALL SELECT COUNT(*) FROM t WHERE 0",
    "(SELECT COUNT(*) FROM t WHERE 0)",
    "SELECT COUNT(*) FROM (SELECT * FROM t WHERE 0) d",
    "SELECT k, COUNT(*) FROM (SELECT v % 2 AS k FROM t) d GROUP BY k",
    "SELECT COUNT(*) OVER () FROM t",
    "SELECT (SELECT COUNT(*) FROM t WHERE 0)",
    "SELECT COUNT(*) FROM information_schema.ENGINES WHERE 0",
    "SELECT v FROM t WHERE id = 1 INTO @x",
    "SELECT v FROM t WHERE id = 999999 INTO @x",
    "SELECT COUNT(*) FROM t WHERE 0 INTO @x",
    "SELECT 1 INTO @x",
    "SELECT * FROM t LIMIT 1, 2",
    "SELECT COUNT(*) FROM t WHERE 0 LIMIT 1, 1",
    "SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 1",
    "SELECT SQL_CALC_FOUND_ROWS COUNT(*) FROM t WHERE 0",
    "VALUES (1), (2), (3)",
    "SHOW TABLES",
    "SHOW TABLES LIKE 'none'",
    "SHOW FULL COLUMNS FROM t",
    "SHOW SESSION VARIABLES LIKE 'found%'",
    "SHOW CREATE TABLE t",
    "SHOW PROFILES",
    "SHOW ERRORS",
    "SHOW COUNT(*) WARNINGS",
    "DESCRIBE t",
    "EXPLAIN SELECT * FROM t",
    "EXPLAIN FORMAT=JSON SELECT 1",
    "ANALYZE SELECT * FROM t",
    "CHECK TABLE t",
    "CHECKSUM TABLE t",
    "HELP 'no such topic'",
    "INSERT INTO t (v) SELECT COUNT(*) FROM t WHERE 0",
    "INSERT INTO t (v) VALUES (1)",
    "DO 1",
];

/// FOUND_ROWS() after every statement shape of `FOUND_ROWS_SHAPES`, after
/// counts of 5, 1, 0 and 100 (SQL_CALC_FOUND_ROWS), is what a direct
/// session gets: eight clients run the shapes in turns against a pool of
/// two connections, so a statement that may keep the count runs where
/// another client's count is (before, the relay answered 1 for an
/// impossible grouping, the rows of VALUES, its earlier count after SHOW
/// TABLES and SELECT ... INTO).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_statement_leaves_found_rows_as_the_server_does() {
    use Step::*;
    let srv = server();
    let before = [
        "SELECT * FROM seq_1_to_5",
        "SELECT * FROM seq_1_to_1",
        "SELECT * FROM seq_1_to_5 WHERE 0",
        "SELECT SQL_CALC_FOUND_ROWS * FROM seq_1_to_100 LIMIT 1",
    ];
    let scripts: Vec<Vec<Step>> = (0..CLIENTS)
        .map(|i| {
            let mut script = vec![Text("INSERT INTO t (v) VALUES (1), (2), (3)".into())];
            // Each client starts elsewhere in the list.
            for k in 0..FOUND_ROWS_SHAPES.len() {
                let shape = FOUND_ROWS_SHAPES[(k + i * 5) % FOUND_ROWS_SHAPES.len()];
                for b in before {
                    script.push(Text(b.into()));
                    script.push(Text(shape.into()));
                    script.push(Text("SELECT FOUND_ROWS()".into()));
                }
            }
            // The same as server-side prepared statements (a missing key,
            // one that matches nothing), after each count.
            for (sql, key) in [
                ("SELECT COUNT(*) FROM t WHERE id = ?", 999_999),
                ("SELECT COUNT(*) FROM t WHERE id < ?", 0),
            ] {
                for b in before {
                    script.push(Text(b.into()));
                    script.push(Prepared(sql.into(), vec![key.into()]));
                    script.push(Text("SELECT FOUND_ROWS()".into()));
                }
            }
            script
        })
        .collect();
    let direct = same_both_ways(srv, scripts, "fr").await;
    // What the relay must imitate happened (client 0 runs the list in
    // order): FOUND_ROWS() after shape `k` following count `b`.
    let after = |shape: &str, b: usize| {
        let k = FOUND_ROWS_SHAPES
            .iter()
            .position(|s| *s == shape)
            .expect("shape");
        direct[0][1 + (k * before.len() + b) * 3 + 2].clone()
    };
    let impossible = "SELECT COUNT(*) FROM t WHERE 0";
    assert_eq!(
        [0, 1, 2, 3].map(|b| after(impossible, b)),
        ["'5'", "'1'", "'0'", "'100'"],
        "an impossible grouping keeps the count: {direct:?}"
    );
    assert_eq!(after("SELECT COUNT(*) FROM t WHERE id < 0", 0), "'1'");
    assert_eq!(after("VALUES (1), (2), (3)", 0), "'5'");
    assert_eq!(after("SHOW TABLES LIKE 'none'", 0), "'0'");
    assert_eq!(after("SELECT v FROM t WHERE id = 1 INTO @x", 0), "'1'");
    assert_eq!(after("EXPLAIN FORMAT=JSON SELECT 1", 0), "'0'");
    // The prepared ones, last: the missing key kept each count, the other
    // counted its row.
    let prepared: Vec<&str> = direct[0][direct[0].len() - 2 - 8 * 3..direct[0].len() - 2]
        .chunks(3)
        .map(|c| c[2].as_str())
        .collect();
    assert_eq!(
        prepared,
        ["'5'", "'1'", "'0'", "'100'", "'1'", "'1'", "'1'", "'1'"],
        "{direct:?}"
    );
}

/// Two clients of database `db` (set up afresh) on a relay in
/// transaction mode with one pooled connection, which they take in turns.
async fn two_clients_one_connection(
    db: &str,
) -> (
    mysql_async::Conn,
    mysql_async::Conn,
    std::sync::Arc<sqlfleet_relay::Relay>,
    tokio::sync::oneshot::Sender<()>,
) {
    two_clients(db, 1).await
}

/// Two clients of database `db` (set up afresh) on a relay in
/// transaction mode with `pool` pooled connections.
async fn two_clients(
    db: &str,
    pool: usize,
) -> (
    mysql_async::Conn,
    mysql_async::Conn,
    std::sync::Arc<sqlfleet_relay::Relay>,
    tokio::sync::oneshot::Sender<()>,
) {
    let srv = server();
    {
        let _ddl = ROUTINE_DDL.write().await;
        setup(srv, db).await;
    }
    let (port, stop, relay) =
        common::serve_relay(&relay_config(srv, "transaction", "shared", pool), None).await;
    let a = mysql_async::Conn::new(client_opts(port, "app", "app-pw", db).await)
        .await
        .expect("client a");
    let b = mysql_async::Conn::new(client_opts(port, "app", "app-pw", db).await)
        .await
        .expect("client b");
    (a, b, relay, stop)
}

/// A counter of the relay's metrics (`name` without the prefix).
fn metric(relay: &sqlfleet_relay::Relay, name: &str) -> u64 {
    let text = relay.metrics_text();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("sqlfleet_relay_{name} ")))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{name} in {text}"))
}

/// The shapes of `FOUND_ROWS_SHAPES` whose count only the server knows
/// (the relay asks it), run in transactions: the count stays on the
/// connection the client keeps until the transaction ends (asked then,
/// or never when a later SELECT sets one the relay knows), read inside
/// the transaction, after a statement that keeps it, after COMMIT,
/// ROLLBACK or an implicit commit, and after autocommit=0's COMMIT, while
/// eight clients share two connections: each read is what a direct
/// session gets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_left_on_the_connection_through_a_transaction_is_the_servers() {
    use Step::*;
    let srv = server();
    let server_only = [
        "SELECT COUNT(*) FROM t WHERE 0",
        "SELECT COUNT(*) FROM t WHERE id = 999999",
        "SELECT COUNT(*) FROM t WHERE id < 0",
        "SELECT v FROM t WHERE id = 999999 INTO @x",
        "SELECT * FROM t LIMIT 1, 2",
        "SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 1",
        "EXPLAIN SELECT * FROM t",
        "INSERT INTO t (v) SELECT COUNT(*) FROM t WHERE 0",
    ];
    let before = ["SELECT * FROM seq_1_to_5", "SELECT * FROM seq_1_to_1"];
    let found = || Text("SELECT FOUND_ROWS()".into());
    let ends = [
        ("START TRANSACTION", "COMMIT"),
        ("BEGIN", "ROLLBACK"),
        ("START TRANSACTION READ ONLY", "COMMIT"),
        // (A DDL statement commits implicitly.)
        ("BEGIN", "CREATE TABLE IF NOT EXISTS tc (a INT)"),
        ("SET autocommit = 0", "COMMIT"),
    ];
    let scripts: Vec<Vec<Step>> = (0..CLIENTS)
        .map(|i| {
            let mut script = vec![Text("INSERT INTO t (v) VALUES (1), (2), (3)".into())];
            for k in 0..server_only.len() * ends.len() {
                let shape = server_only[(k + i) % server_only.len()];
                let (begin, end) = ends[(k / server_only.len() + i) % ends.len()];
                if begin.starts_with("START TRANSACTION READ ONLY") && shape.starts_with("INSERT") {
                    continue;
                }
                for b in before {
                    // The count before the transaction kept through it
                    // (or not), read after its end; then read inside.
                    script.extend([
                        Text(b.into()),
                        Text(begin.into()),
                        Text(shape.into()),
                        Text("DO 1".into()),
                        Text(shape.into()),
                        Text(end.into()),
                        found(),
                        Text(b.into()),
                        Text(begin.into()),
                        Text(shape.into()),
                        found(),
                        Text(end.into()),
                    ]);
                    if begin.starts_with("SET autocommit") {
                        script.push(Text("SET autocommit = 1".into()));
                    }
                    // Ended with the count unknown: asked at the end, or
                    // (a plain SELECT after it) not needed.
                    script.extend([
                        Text(b.into()),
                        Text(begin.into()),
                        Text(shape.into()),
                        Text("SELECT * FROM seq_1_to_3".into()),
                        Text(end.into()),
                        found(),
                    ]);
                    if begin.starts_with("SET autocommit") {
                        script.push(Text("SET autocommit = 1".into()));
                    }
                }
            }
            script
        })
        .collect();
    let direct = same_both_ways(srv, scripts.clone(), "frt").await;
    // What the relay must imitate happened: an impossible grouping in a
    // transaction kept the count before it, read inside and after COMMIT.
    let first = scripts[0]
        .iter()
        .position(|s| matches!(s, Text(t) if t == "SELECT COUNT(*) FROM t WHERE 0"))
        .expect("the shape");
    assert_eq!(
        [&direct[0][first + 4], &direct[0][first + 8]],
        ["'5'", "'5'"],
        "{direct:?}"
    );
}

/// The relay's own question after a statement whose count only the
/// server knows waits, in a transaction, for the transaction's end, and
/// is not asked at all when a later SELECT sets a count the relay knows:
/// sysbench's `oltp_read_only` transaction (a `SUM(k)` range between
/// other ranges) costs the server no statement of the relay's (before:
/// one per transaction), and a transaction that ends with the count
/// unknown costs one, after which another client on the one connection
/// does not change it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_asks_the_server_its_count_only_when_it_ends_unknown() {
    let (mut a, mut b, relay, stop) = two_clients_one_connection("fra").await;
    a.query_drop("INSERT INTO t (v) VALUES (1), (2), (3)")
        .await
        .expect("rows");
    let asked = || metric(&relay, "found_rows_asked_total");
    let at_start = asked();
    for _ in 0..5 {
        for q in [
            "BEGIN",
            "SELECT * FROM seq_1_to_100",
            "SELECT SUM(v) FROM t WHERE id BETWEEN 1 AND 100",
            "SELECT * FROM seq_1_to_3 ORDER BY seq",
            "COMMIT",
        ] {
            a.query_drop(q).await.expect(q);
        }
    }
    let three: Option<u64> = a.query_first("SELECT FOUND_ROWS()").await.expect("a");
    assert_eq!(three, Some(3));
    assert_eq!(asked(), at_start, "no question for a count set later");
    for q in [
        "SELECT * FROM seq_1_to_5",
        "BEGIN",
        "SELECT COUNT(*) FROM t WHERE 0",
        "COMMIT",
    ] {
        a.query_drop(q).await.expect(q);
    }
    // B's statement runs on the one connection: A's count is the relay's.
    b.query_drop("SELECT * FROM seq_1_to_2").await.expect("b");
    let five: Option<u64> = a.query_first("SELECT FOUND_ROWS()").await.expect("a");
    assert_eq!(five, Some(5));
    // (Read after A's next command: the relay asks after the reply.)
    assert_eq!(asked(), at_start + 1, "asked once, at the end");
    let _ = stop.send(());
}

/// LAST_INSERT_ID() after every INSERT shape that gives the
/// AUTO_INCREMENT column values or not — written ids, generated ones,
/// both in one statement, 0, an expression, a parameter, IGNORE, ON
/// DUPLICATE KEY UPDATE, a table with a trigger, REPLACE, INSERT ...
/// SELECT, LAST_INSERT_ID(expr), in and out of a transaction — read
/// right after, and again after a statement that eight clients sharing
/// two connections interleave, is what a direct session gets. The
/// server's OK carries a written id, which leaves LAST_INSERT_ID() as
/// it was (before, a client that moved to another connection was given
/// the written id: 500 where the server said 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_id_leaves_last_insert_id_as_the_server_does() {
    use Step::*;
    let srv = server();
    let shapes = [
        "INSERT INTO t (id, v) VALUES ({n}, 1)",
        "INSERT INTO t VALUES ({n}, 2)",
        "INSERT INTO t SET id = {n}, v = 3",
        "INSERT INTO t (id, v) VALUES ({n}, 1), (NULL, 2)",
        "INSERT INTO t (id, v) VALUES (DEFAULT, 1), ({n}, 2)",
        "INSERT INTO t (id, v) VALUES (0, 1)",
        "INSERT INTO t (id, v) VALUES ({n} + 0, 1)",
        "INSERT IGNORE INTO t (id, v) VALUES ({n}, 1), ({n}, 2)",
        "INSERT INTO t (id, v) VALUES ({n}, 1) ON DUPLICATE KEY UPDATE v = v + 1",
        "INSERT INTO tt (id, v) VALUES ({n}, 1)",
        "INSERT INTO tt (v) VALUES (5)",
        "REPLACE INTO t (id, v) VALUES ({n}, 9)",
        "INSERT INTO t (id, v) SELECT {n}, 1",
        "INSERT INTO t (v) SELECT 4",
        "SELECT LAST_INSERT_ID({n})",
    ];
    let read = || Text("SELECT LAST_INSERT_ID(), @@last_insert_id".into());
    let scripts: Vec<Vec<Step>> = (0..CLIENTS)
        .map(|i| {
            let mut script = Vec::new();
            let mut n = 1000;
            for k in 0..shapes.len() {
                let shape = shapes[(k + i) % shapes.len()];
                for in_trans in [false, true] {
                    n += 10;
                    script.push(Text("INSERT INTO t (v) VALUES (7)".into()));
                    if in_trans {
                        script.push(Text("BEGIN".into()));
                    }
                    script.extend([
                        Text(shape.replace("{n}", &n.to_string())),
                        read(),
                        Text("SELECT * FROM seq_1_to_2".into()),
                        read(),
                    ]);
                    if in_trans {
                        script.push(Text("COMMIT".into()));
                        script.push(read());
                    }
                }
            }
            // As server-side prepared statements: a written id as a
            // parameter (only the server can tell), a generated one.
            for (sql, id) in [
                ("INSERT INTO t (id, v) VALUES (?, 1)", 5000 + i as i64),
                ("INSERT INTO t (v) VALUES (?)", 1),
            ] {
                script.extend([
                    Text("INSERT INTO t (v) VALUES (7)".into()),
                    Prepared(sql.into(), vec![id.into()]),
                    Text("SELECT * FROM seq_1_to_2".into()),
                    read(),
                ]);
            }
            script
        })
        .collect();
    let direct = same_both_ways(srv, scripts.clone(), "lid").await;
    // What the relay must imitate happened: a written id left the
    // generated one before it (client 0 runs the shapes in order).
    let first = scripts[0]
        .iter()
        .position(
            |s| matches!(s, Text(t) if t.starts_with("INSERT INTO t (id, v) VALUES (1010, 1)")),
        )
        .expect("the shape");
    assert_eq!(direct[0][first + 1], "'1','1'", "{direct:?}");
    assert_eq!(direct[0][first + 3], "'1','1'", "{direct:?}");
}

/// Runs `statements` as client A and after each reads `read` (one
/// integer) as A, while client B holds a connection in a transaction —
/// directly (database `{db}_d`) and through a relay of two connections
/// (`{db}_r`), where A's read runs on another connection than its
/// statement whenever B took that one (the pool gives B the connection
/// that fits it best, so not after every statement; a statement that
/// pins A's connection, a CALL, keeps the read there).
/// `more_setup` runs in both databases first. The reads each way, and the
/// relay.
async fn reads_both_ways(
    db: &str,
    statements: &[&str],
    read: &str,
    more_setup: &str,
) -> (
    Vec<i64>,
    Vec<i64>,
    std::sync::Arc<sqlfleet_relay::Relay>,
    tokio::sync::oneshot::Sender<()>,
) {
    async fn reads(
        mut a: mysql_async::Conn,
        mut b: mysql_async::Conn,
        s: &[&str],
        read: &str,
    ) -> Vec<i64> {
        let mut out = Vec::new();
        for q in s {
            a.query_drop(*q).await.expect(q);
            b.query_drop("BEGIN").await.expect("b");
            b.query_drop("SELECT 1").await.expect("b");
            let v: Option<i64> = a.query_first(read).await.expect("a");
            out.push(v.unwrap_or_default());
            b.query_drop("COMMIT").await.expect("b");
        }
        out
    }
    let srv = server();
    let (d, r) = (format!("{db}_d"), format!("{db}_r"));
    {
        let _ddl = ROUTINE_DDL.write().await;
        setup(srv, &d).await;
    }
    let mut root = srv.connect().await;
    if !more_setup.is_empty() {
        root.query_drop(format!("USE {d}; {more_setup}"))
            .await
            .expect("more setup");
    }
    let root_pw = srv.sandbox.password().expect("password");
    let port = srv.sandbox.meta.primary().port;
    let conn = || async {
        mysql_async::Conn::new(client_opts(port, "root", root_pw.expose(), &d).await)
            .await
            .expect("a direct client")
    };
    let direct = reads(conn().await, conn().await, statements, read).await;
    let (a, b, relay, stop) = two_clients(&r, 2).await;
    if !more_setup.is_empty() {
        root.query_drop(format!("USE {r}; {more_setup}"))
            .await
            .expect("more setup");
    }
    let relayed = reads(a, b, statements, read).await;
    (direct, relayed, relay, stop)
}

/// ROW_COUNT() after a text of several statements is its last one's
/// (not their sum, nor -1 for a SELECT before a write), and after a CALL
/// the procedure's own OK's (0 after a procedure whose last statement is
/// a SELECT), wherever the client's read runs (before, the relay said
/// 3 where the server said 2, -1 where it said 0, 2 and 6).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_count_after_several_statements_and_calls_is_the_last_ones() {
    let statements = [
        "INSERT INTO t (v) VALUES (1); INSERT INTO t (v) VALUES (2), (3)",
        "SELECT 1; INSERT INTO t (v) VALUES (4), (5)",
        "INSERT INTO t (v) VALUES (6); SELECT 1",
        "CALL p_sel()",
        "CALL p_sel_upd()",
        "UPDATE t SET v = 3; DO 1",
        "DO 1; UPDATE t SET v = 4",
        "CALL p_upd()",
        "UPDATE t SET v = 5",
        "SELECT * FROM t",
        "DELETE FROM t WHERE id = 1; SELECT 1; DELETE FROM t WHERE id = 2",
    ];
    let procs = "CREATE PROCEDURE p_sel() SELECT 1; \
         CREATE PROCEDURE p_sel_upd() BEGIN SELECT 1; UPDATE t SET v = v + 1; END; \
         CREATE PROCEDURE p_upd() UPDATE t SET v = v + 1";
    let (direct, relayed, _relay, stop) =
        reads_both_ways("rcm", &statements, "SELECT ROW_COUNT()", procs).await;
    assert_eq!(relayed, direct, "{statements:?}");
    // What the relay must imitate happened.
    assert_eq!(&direct[..5], &[2, 2, -1, 0, 6], "{direct:?}");
    let _ = stop.send(());
}

/// FOUND_ROWS() after a text of several statements is its last SELECT's
/// rows (before, the relay summed every result set's: 5 where the server
/// said 2), the count an earlier SELECT left when the last keeps it, and
/// after a CALL the server's, wherever the client's read runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn found_rows_after_several_statements_is_the_last_selects() {
    let statements = [
        "SELECT * FROM seq_1_to_3; SELECT * FROM seq_1_to_2",
        "SELECT * FROM seq_1_to_3; DO 1",
        "DO 1; SELECT * FROM seq_1_to_4",
        "SELECT * FROM seq_1_to_7",
        "CALL p_three()",
        "SELECT * FROM seq_1_to_7",
        "CALL p_three_two()",
        "SELECT * FROM seq_1_to_3; SELECT COUNT(*) FROM seq_1_to_5 WHERE 0",
        "SELECT * FROM seq_1_to_2; SHOW CREATE TABLE t",
        "SELECT * FROM seq_1_to_6; SELECT * FROM seq_1_to_4 LIMIT 1, 1",
    ];
    let procs = "CREATE PROCEDURE p_three() SELECT * FROM seq_1_to_3; \
         CREATE PROCEDURE p_three_two() BEGIN SELECT * FROM seq_1_to_3; SELECT * FROM seq_1_to_2; END";
    let (direct, relayed, _relay, stop) =
        reads_both_ways("frm", &statements, "SELECT FOUND_ROWS()", procs).await;
    assert_eq!(relayed, direct, "{statements:?}");
    // What the relay must imitate happened.
    assert_eq!(&direct[..3], &[2, 3, 4], "{direct:?}");
    let _ = stop.send(());
}

/// Every way a statement sets LAST_INSERT_ID() — a generated id,
/// LAST_INSERT_ID(expr) in a SELECT (whose rows carry no id), in an
/// UPDATE with 0 (whose OK says 0), in DO and SET, SET of the variable,
/// an INSERT whose values call it — goes with the client: after each,
/// another client holds a connection, often the one it ran on, and each
/// read is what a direct session reads (before, `SELECT LAST_INSERT_ID(42)` and
/// `LAST_INSERT_ID(0)` left the relay's earlier value: 1 where the server
/// said 42 and 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_way_of_setting_last_insert_id_goes_with_the_client() {
    let statements = [
        "INSERT INTO t (v) VALUES (1)",
        "SELECT LAST_INSERT_ID(42)",
        "UPDATE t SET v = LAST_INSERT_ID(0) WHERE id = 1",
        "INSERT INTO t (v) VALUES (2)",
        "DO LAST_INSERT_ID(7)",
        "SET @x = LAST_INSERT_ID(9)",
        "SET LAST_INSERT_ID = 11",
        "SET @@last_insert_id = 12",
        "INSERT INTO t (v) VALUES (LAST_INSERT_ID(13))",
        "INSERT INTO t (id, v) VALUES (900, 1)",
        // A value that calls a function of several arguments before the
        // generated id.
        "INSERT INTO t (v, id) VALUES (GREATEST(1, 7, 2), NULL)",
        "SELECT LAST_INSERT_ID(LAST_INSERT_ID() + 1)",
        // The upsert idiom, on a duplicate and not.
        "INSERT INTO t (id, v) VALUES (1, 5) ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)",
        "INSERT INTO t (id, v) VALUES (950, 5) ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)",
        "INSERT IGNORE INTO t (id, v) VALUES (1, 1)",
        "INSERT IGNORE INTO t (v) VALUES (3)",
        "REPLACE INTO t (id, v) VALUES (1, 2)",
        "INSERT INTO t (v) VALUES (1), (2), (3)",
        "INSERT INTO t (v) SELECT v FROM t LIMIT 2",
        "INSERT INTO tt (v) VALUES (5)",
        "INSERT INTO tt (id, v) VALUES (980, 5)",
        "CREATE TABLE tc2 (id INT AUTO_INCREMENT PRIMARY KEY, v INT) SELECT v FROM t",
        "INSERT INTO t (v) VALUES (1); INSERT INTO t (id, v) VALUES (990, 1)",
        // The upsert idiom on a unique key other than the id: the OK's id
        // is the row's, updated or inserted; without the setter an
        // updated row's id is the OK's while LAST_INSERT_ID() stays.
        "INSERT INTO tu (k, v) VALUES (1, 1)",
        "SELECT LAST_INSERT_ID(77)",
        "INSERT INTO tu (k, v) VALUES (1, 5) ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id), v = VALUES(v)",
        "INSERT INTO tu (k, v) VALUES (3, 5) ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)",
        "SELECT LAST_INSERT_ID(77)",
        "INSERT INTO tu (k, v) VALUES (1, 6) ON DUPLICATE KEY UPDATE v = VALUES(v)",
        "INSERT INTO tu (k, v) VALUES (1, 6) ON DUPLICATE KEY UPDATE v = VALUES(v)",
        "INSERT INTO tu (k, v) VALUES (20, 6) ON DUPLICATE KEY UPDATE v = VALUES(v)",
        "SELECT LAST_INSERT_ID(77)",
        "INSERT INTO tu SET k = 20, v = 9 ON DUPLICATE KEY UPDATE v = 9",
        "INSERT INTO tu (k, v) VALUES (10, 7), (1, 7) ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)",
        "INSERT INTO tu (k, v) SELECT 3, 8 ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)",
    ];
    let (direct, relayed, relay, stop) =
        reads_both_ways("lis", &statements, "SELECT LAST_INSERT_ID()", "").await;
    assert_eq!(relayed, direct, "{statements:?}");
    // What the relay must imitate happened.
    assert_eq!(&direct[..3], &[1, 42, 0], "{direct:?}");
    assert!(metric(&relay, "insert_id_asked_total") >= 2);
    let _ = stop.send(());
}

/// A written id costs nothing: a client that inserts with its own ids
/// (sysbench's `oltp_read_write` does) and shares the one connection
/// with another client has no LAST_INSERT_ID() to carry between them
/// (before, the written id was taken for it and set again each time the
/// client came back: one statement per transaction), and nothing is
/// asked; an id only the server knows is asked once, before the
/// connection goes to the other client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_written_id_costs_no_statement_and_an_unknown_one_is_asked_once() {
    let (mut a, mut b, relay, stop) = two_clients_one_connection("lic").await;
    let metric = |name: &str| metric(&relay, name);
    a.query_drop("SELECT 1").await.expect("a");
    b.query_drop("SELECT 1").await.expect("b");
    let (syncs, asked) = (metric("state_syncs_total"), metric("insert_id_asked_total"));
    for n in 0..10 {
        for q in [
            "BEGIN".to_string(),
            format!("INSERT INTO t (id, v) VALUES ({}, 1)", 100 + n),
            "COMMIT".to_string(),
        ] {
            a.query_drop(&q).await.expect("a");
        }
        b.query_drop("SELECT * FROM seq_1_to_2").await.expect("b");
        // The same as a server-side prepared statement, the id a
        // parameter (sysbench's INSERT).
        a.exec_drop("INSERT INTO t (id, v) VALUES (?, ?)", (300 + n, 1))
            .await
            .expect("a prepared");
        b.query_drop("SELECT * FROM seq_1_to_2").await.expect("b");
    }
    let id: Option<u64> = a.query_first("SELECT LAST_INSERT_ID()").await.expect("a");
    assert_eq!(id, Some(0), "a written id leaves it as it was");
    assert_eq!(metric("state_syncs_total"), syncs, "nothing carried");
    assert_eq!(metric("insert_id_asked_total"), asked, "nothing asked");
    // An id given by an expression: only the server can tell; asked once,
    // then carried to the other client's turn and back.
    a.query_drop("INSERT INTO t (id, v) VALUES (200 + 0, 1)")
        .await
        .expect("a");
    b.query_drop("SELECT * FROM seq_1_to_2").await.expect("b");
    let id: Option<u64> = a.query_first("SELECT LAST_INSERT_ID()").await.expect("a");
    assert_eq!(id, Some(0));
    assert_eq!(metric("insert_id_asked_total"), asked + 1);
    let _ = stop.send(());
}

/// A client whose FOUND_ROWS() another client's statement replaced on
/// the one pooled connection gets its own count made there again before
/// a statement that may keep it, and one too big to make is refused when
/// read, never answered with the other client's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_another_client_replaced_is_made_again_or_refused() {
    let (mut a, mut b, relay, stop) = two_clients_one_connection("frc").await;
    let mut results = Vec::new();
    for rows in [100u64, 3, 200_000] {
        a.query_drop(format!("SELECT * FROM seq_1_to_{rows}"))
            .await
            .expect("a's count");
        // B's statement runs on the one connection: its count is there now.
        b.query_drop("SELECT * FROM seq_1_to_2").await.expect("b");
        a.query_drop("SELECT COUNT(*) FROM t WHERE 0")
            .await
            .expect("a's impossible grouping");
        results.push(
            a.query_first::<u64, _>("SELECT FOUND_ROWS()")
                .await
                .map_err(|e| e.to_string()),
        );
    }
    assert_eq!(results[0], Ok(Some(100)), "{results:?}");
    assert_eq!(results[1], Ok(Some(3)), "{results:?}");
    let refused = results[2]
        .as_ref()
        .expect_err("a count too big to make is refused");
    assert!(
        refused.contains("1235") && refused.contains("FOUND_ROWS() is not known"),
        "{refused}"
    );
    let restored = relay.metrics_text();
    assert!(
        restored.contains("sqlfleet_relay_found_rows_restored_total 2"),
        "{restored}"
    );
    // Read anew, the count is the client's again.
    a.query_drop("SELECT * FROM seq_1_to_4").await.expect("a");
    let four: Option<u64> = a.query_first("SELECT FOUND_ROWS()").await.expect("a");
    assert_eq!(four, Some(4));
    let _ = stop.send(());
}

/// A client that goes away while its statement runs (here: killed while
/// waiting on a long SLEEP) has the statement stopped on the server, as a
/// direct connection's would be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_mid_statement_has_its_statement_stopped() {
    let srv = server();
    let (port, stop) = start_relay(srv, "transaction", "shared").await;
    let mut child = std::process::Command::new("mariadb")
        .args(["-h127.0.0.1", "-uapp", "-papp-pw", "--skip-ssl"])
        .arg(format!("-P{port}"))
        .args(["-e", "SELECT SLEEP(60) AS gone_marker"])
        .spawn()
        .expect("the mariadb client");
    let running = || srv.running("gone_marker");
    let t0 = std::time::Instant::now();
    while running().await == 0 {
        assert!(t0.elapsed() < Duration::from_secs(20), "never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.kill().expect("kill the client");
    let _ = child.wait();
    let t1 = std::time::Instant::now();
    while running().await > 0 {
        assert!(
            t1.elapsed() < Duration::from_secs(5),
            "the statement still runs after its client went away"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop.send(());
}

/// A client that goes away while its INSERT waits (SLEEP in a value)
/// leaves what a direct client leaves: the server ends the wait when it
/// sees its client gone and the row is written all the same. Through the
/// relay the server connection goes with the client (a KILL QUERY would
/// fail the statement: no row).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_mid_insert_leaves_what_a_direct_one_leaves() {
    let srv = server();
    let (port, stop) = start_relay(srv, "transaction", "shared").await;
    let (db, _) = srv.fresh_db("gone_insert").await;
    let mut c = srv.connect().await;
    c.query_drop(format!("CREATE TABLE {db}.t (v INT)"))
        .await
        .expect("table");
    let pw = srv.sandbox.password().expect("pw").expose().to_string();
    let direct = srv.sandbox.meta.primary().port;
    let mut rows = Vec::new();
    for (p, user, password) in [(direct, "root", pw.as_str()), (port, "app", "app-pw")] {
        let mut child = std::process::Command::new("mariadb")
            // --comments: the client strips them by default, and the
            // comment is the statement's marker below.
            .args(["-h127.0.0.1", "--skip-ssl", "--comments", "-u", user])
            .arg(format!("-p{password}"))
            .arg(format!("-P{p}"))
            .args([
                "-e",
                &format!("INSERT INTO {db}.t VALUES (SLEEP(3)) /* left-mid-insert */"),
            ])
            .spawn()
            .expect("the mariadb client");
        let t0 = std::time::Instant::now();
        // The statement's own marker: the database's name also appears in
        // what the relay asks the catalog about the write's table; waiting
        // on it, a loaded machine killed the client during that lookup and
        // counted the rows before the INSERT had slept its 3 s.
        while srv.running("left-mid-insert").await == 0 {
            assert!(t0.elapsed() < Duration::from_secs(20), "never started");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        child.kill().expect("kill the client");
        let _ = child.wait();
        let t1 = std::time::Instant::now();
        while srv.running("left-mid-insert").await > 0 {
            assert!(t1.elapsed() < Duration::from_secs(10), "still running");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let n: Option<u64> = c
            .query_first(format!("SELECT COUNT(*) FROM {db}.t"))
            .await
            .expect("count");
        rows.push(n.unwrap_or(0));
    }
    // Directly one row; through the relay one more.
    assert_eq!(
        rows,
        vec![1, 2],
        "rows after the direct and the relayed client left"
    );
    let _ = stop.send(());
}

/// KILL CONNECTION of a client whose statement is a stored loop ends the
/// loop on the server and the client's connection, as it does directly:
/// the relay kills the backend connection, not only its query (KILL QUERY
/// can be lost between a loop's statements, and the client then waited
/// for ever; main.information_schema_tables hung on it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_connection_ends_a_running_stored_loop() {
    let srv = server();
    for mode in ["transaction", "session"] {
        let (port, stop) = start_relay(srv, mode, "shared").await;
        let (db, _) = srv.fresh_db("kill_loop").await;
        for round in 0..3 {
            let opts = client_opts(port, "app", "app-pw", &db).await;
            let mut victim = mysql_async::Conn::new(opts.clone()).await.expect("connect");
            let id: Option<u64> = victim
                .query_first("SELECT CONNECTION_ID()")
                .await
                .expect("id");
            let id = id.expect("an id");
            let looping = tokio::spawn(async move {
                victim
                    .query_drop("LOOP CREATE OR REPLACE VIEW vv_kill_loop AS SELECT 1; END LOOP")
                    .await
            });
            let t0 = std::time::Instant::now();
            while srv.running("vv_kill_loop").await == 0 {
                assert!(t0.elapsed() < Duration::from_secs(20), "never started");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let mut killer = mysql_async::Conn::new(opts).await.expect("connect");
            killer.query_drop(format!("KILL {id}")).await.expect("kill");
            let ended = tokio::time::timeout(Duration::from_secs(10), looping).await;
            assert!(
                matches!(ended, Ok(Ok(Err(_)))),
                "{mode}, round {round}: the killed client's loop did not end with an error: {ended:?}"
            );
            let t1 = std::time::Instant::now();
            while srv.running("vv_kill_loop").await > 0 {
                assert!(
                    t1.elapsed() < Duration::from_secs(5),
                    "{mode}, round {round}: the loop still runs on the server"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let _ = killer.disconnect().await;
        }
        let _ = stop.send(());
    }
}

/// A session variable set as `SET @@var = v` follows the client to
/// another backend connection: MariaDB's tracker does not report that
/// form, and the relay then lost it (the client read 0 after another
/// client took its connection). Recorded from the text now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_the_tracker_does_not_report_follows_the_client() {
    let srv = server();
    let (port, stop) = start_relay(srv, "transaction", "shared").await;
    let (db, _) = srv.fresh_db("untracked_set").await;
    let opts = client_opts(port, "app", "app-pw", &db).await;
    let mut a = mysql_async::Conn::new(opts.clone()).await.expect("a");
    let mut b = mysql_async::Conn::new(opts).await.expect("b");
    for (set, read, want) in [
        (
            "SET @@max_sp_recursion_depth = 20",
            "SELECT @@max_sp_recursion_depth",
            "20",
        ),
        (
            "SET @@div_precision_increment = 9",
            "SELECT @@div_precision_increment",
            "9",
        ),
    ] {
        a.query_drop(set).await.expect("set");
        // b takes the connection a just gave back and holds it.
        let hold = tokio::spawn(async move {
            b.query_drop("SELECT SLEEP(1)").await.expect("sleep");
            b
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        let got: Option<String> = a.query_first(read).await.expect("read");
        assert_eq!(got.as_deref(), Some(want), "{set} on another connection");
        b = hold.await.expect("b");
    }
    let _ = stop.send(());
}

/// A global set through the relay reaches every client that connects
/// afterwards, as it would on new direct connections: pooled connections
/// whose session defaults predate it are reset first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_global_set_through_the_relay_reaches_later_clients() {
    let srv = server();
    let (port, stop) = start_relay(srv, "transaction", "shared").await;
    let (db, _) = srv.fresh_db("globals").await;
    let opts = client_opts(port, "app", "app-pw", &db).await;
    let read = |opts: mysql_async::Opts| async move {
        let mut c = mysql_async::Conn::new(opts).await.expect("connect");
        let v: Option<u64> = c
            .query_first("SELECT @@session.div_precision_increment")
            .await
            .expect("read");
        let _ = c.disconnect().await;
        v
    };
    // Pooled connections exist with the old default.
    let before = read(opts.clone()).await;
    let mut a = mysql_async::Conn::new(opts.clone()).await.expect("connect");
    a.query_drop("SET GLOBAL div_precision_increment = 9")
        .await
        .expect("set global");
    let after = read(opts.clone()).await;
    a.query_drop(format!(
        "SET GLOBAL div_precision_increment = {}",
        before.unwrap_or(4)
    ))
    .await
    .expect("restore");
    let _ = a.disconnect().await;
    assert_eq!(
        after,
        Some(9),
        "a new client sees the new global (was {before:?})"
    );
    let _ = stop.send(());
}

/// Values no two sessions share (the clock, the thread, the last insert
/// id, the random seed...) and the relay's own session tracking, which a
/// client sees through `SHOW VARIABLES` on the relay's connection.
const PER_SESSION: &[&str] = &[
    "pseudo_thread_id",
    "rand_seed1",
    "rand_seed2",
    "last_insert_id",
    "insert_id",
    "identity",
    "last_gtid",
    "session_track_schema",
    "session_track_state_change",
    "session_track_system_variables",
];

/// A session's variables as `SHOW SESSION VARIABLES` lists them, less
/// [`PER_SESSION`], or the server's error code for the SHOW (a setting
/// such as `max_join_size = 0` refuses it).
type Values = Result<std::collections::BTreeMap<String, String>, u16>;

async fn session_values(c: &mut mysql_async::Conn) -> Values {
    let rows: Vec<mysql_async::Row> = match c.query("SHOW SESSION VARIABLES").await {
        Ok(rows) => rows,
        Err(mysql_async::Error::Server(e)) => return Err(e.code),
        Err(e) => panic!("SHOW SESSION VARIABLES: {e}"),
    };
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            let (n, v): (String, Option<Vec<u8>>) = mysql_async::from_row(r);
            (!PER_SESSION.contains(&n.as_str())).then(|| {
                let v = String::from_utf8_lossy(&v.unwrap_or_default()).into_owned();
                // The clock's reading differs between sessions; whether it
                // is the clock or a value set is what counts.
                let v = if n == "timestamp" && on_the_clock(&v) {
                    "(the clock)".to_string()
                } else {
                    v
                };
                (n, v)
            })
        })
        .collect())
}

/// A `timestamp` value within a minute of this machine's clock (the
/// servers run here).
fn on_the_clock(v: &str) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default();
    v.parse::<f64>().is_ok_and(|t| (t - now).abs() < 60.0)
}

/// The names whose values differ between two sessions, with both values.
fn differences(want: &Values, got: &Values) -> Vec<String> {
    let (want, got) = match (want, got) {
        (Ok(w), Ok(g)) => (w, g),
        _ if want == got => return vec![],
        _ => {
            return vec![format!(
                "SHOW SESSION VARIABLES: direct {want:?}, relay {got:?}"
            )]
        }
    };
    let names: std::collections::BTreeSet<&String> = want.keys().chain(got.keys()).collect();
    names
        .into_iter()
        .filter(|n| want.get(*n) != got.get(*n))
        .map(|n| format!("{n}: direct {:?}, relay {:?}", want.get(n), got.get(n)))
        .collect()
}

/// Global variables the server changes by itself (positions, counters).
const MOVING: &[&str] = &[
    "gtid_binlog_pos",
    "gtid_binlog_state",
    "gtid_current_pos",
    "timestamp",
];

/// The server's global variables, less [`MOVING`].
async fn global_values(c: &mut mysql_async::Conn) -> std::collections::BTreeMap<String, String> {
    let rows: Vec<(String, Option<Vec<u8>>)> = c
        .query("SHOW GLOBAL VARIABLES")
        .await
        .expect("SHOW GLOBAL VARIABLES");
    rows.into_iter()
        .filter(|(n, _)| !MOVING.contains(&n.as_str()))
        .map(|(n, v)| {
            (
                n,
                String::from_utf8_lossy(&v.unwrap_or_default()).into_owned(),
            )
        })
        .collect()
}

/// The global variables that differ from what the two SETs left, when
/// the relay served `whom`.
fn changed(
    set: &std::collections::BTreeMap<String, String>,
    now: &std::collections::BTreeMap<String, String>,
    sql: &str,
    whom: &str,
) -> Vec<String> {
    set.iter()
        .filter(|(n, was)| now.get(*n) != Some(*was))
        .map(|(n, was)| {
            format!(
                "after {sql}, serving {whom} changed the global {n} from {was:?} to {:?}",
                now.get(n)
            )
        })
        .collect()
}

/// Every session variable the server lists (writable, session scope),
/// set through the relay to a value other than its own, stays with the
/// client that set it and reaches no other, and the relay writes nothing
/// global the client did not: the setter reads every variable as a direct
/// session that ran the same SET reads them, after another client had its
/// only pooled connection; the other client, new, reads every variable
/// as a new direct session then does; the server's global variables are
/// as the two SETs left them. A SET the server refuses directly is
/// refused through the relay with the same code. The values come from the
/// server's own description of each variable, so a variable a new server
/// adds is drawn too. (Found this way: `max_relay_log_size` and
/// `sql_slave_skip_counter`, whose session value is the replication
/// connection's, were undone for the next client by a SET that changed
/// them for the whole server.) The server is the test's own: it sets
/// globals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_session_variable_the_server_lists_follows_its_client_and_no_other() {
    let srv = sqlfleet_testkit::server_with(&[]);
    every_variable(&srv, "shared").await;
    every_variable(&srv, "per-user").await;
}

/// The same on MariaDB 11.4, whose list differs (and whose session
/// tracker loses count after a plugin's variable: `backend/tracker.rs`).
/// Its own server: it sets globals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_session_variable_of_the_newer_server_follows_its_client_and_no_other() {
    let srv = sqlfleet_testkit::newer_server_with(&[]);
    every_variable(&srv, "shared").await;
}

/// [`every_session_variable_the_server_lists_follows_its_client_and_no_other`]
/// with the relay's `accounts`: shared (the relay logs in as root, the
/// direct side too), or per-user, where the client is an ordinary account
/// (no SUPER) directly and through the relay, so a SET its rights refuse
/// must be refused alike.
async fn every_variable(srv: &TestServer, accounts: &str) {
    let (db, _) = srv
        .fresh_db(&format!("every_var_{}", accounts.replace('-', "_")))
        .await;
    let (port, stop, relay) =
        common::serve_relay(&relay_config(srv, "transaction", accounts, 1), None).await;
    let pins =
        || sqlfleet_relay::protocol::sql::Pin::ALL.map(|p| (p.name(), relay.metrics().pins(p)));
    let root_pw = srv.sandbox.password().expect("password");
    let server_port = srv.sandbox.meta.primary().port;
    let root = client_opts(server_port, "root", root_pw.expose(), &db).await;
    let mut admin = mysql_async::Conn::new(root.clone()).await.expect("direct");
    let direct = if accounts == "per-user" {
        for sql in [
            "CREATE OR REPLACE USER 'app'@'%' IDENTIFIED BY 'app-pw'".to_string(),
            format!("GRANT ALL PRIVILEGES ON `{db}`.* TO 'app'@'%'"),
        ] {
            admin.query_drop(sql).await.expect("app account");
        }
        client_opts(server_port, "app", "app-pw", &db).await
    } else {
        root
    };
    let relayed = client_opts(port, "app", "app-pw", &db).await;
    let vars = sqlfleet_testkit::server_lists::session_variables(&mut admin).await;
    let (mut set, mut refused, mut unpicked, mut pinning) = (0, 0, Vec::new(), Vec::new());
    let mut wrong = Vec::new();
    let draws: Vec<(&str, String)> = vars
        .iter()
        .flat_map(|v| {
            let values = v.other_values();
            if values.is_empty() {
                unpicked.push(v.name.clone());
            }
            values.into_iter().map(|x| (v.name.as_str(), x))
        })
        .collect();
    for (name, value) in &draws {
        let sql = format!("SET SESSION {name} = {value}");
        let globals_before = global_values(&mut admin).await;
        let mut d = mysql_async::Conn::new(direct.clone())
            .await
            .expect("direct");
        let mut a = mysql_async::Conn::new(relayed.clone())
            .await
            .expect("relay");
        let code = |r: Result<(), mysql_async::Error>| match r {
            Ok(()) => 0,
            Err(mysql_async::Error::Server(e)) => e.code,
            Err(e) => panic!("{sql}: {e}"),
        };
        let pinned_before = pins();
        let (dc, rc) = (
            code(d.query_drop(&sql).await),
            code(a.query_drop(&sql).await),
        );
        // The relay is done with the SET (what it does after the reply,
        // which may take a pin) once its next statement is answered.
        for c in [&mut d, &mut a] {
            c.query_drop("DO 0").await.expect("DO 0");
        }
        let pinned: Vec<&str> = pins()
            .iter()
            .zip(pinned_before)
            .filter(|(now, was)| now.1 > was.1)
            .map(|(now, _)| now.0)
            .collect();
        assert_eq!(dc, rc, "{sql}: error code directly and through the relay");
        if dc != 0 {
            refused += 1;
            continue;
        }
        set += 1;
        let globals_set = global_values(&mut admin).await;
        // Another client, new, on the relay's only connection (unless
        // the setting pinned the setter's session to it).
        if pinned.is_empty() {
            let mut c = mysql_async::Conn::new(relayed.clone())
                .await
                .unwrap_or_else(|e| panic!("a new client after {sql}: {e}"));
            let got = session_values(&mut c).await;
            let _ = c.disconnect().await;
            let mut e = mysql_async::Conn::new(direct.clone())
                .await
                .expect("direct");
            let want = session_values(&mut e).await;
            let _ = e.disconnect().await;
            for diff in differences(&want, &got) {
                wrong.push(format!("after {sql}, a new client's {diff}"));
            }
        } else {
            pinning.push(format!("{sql} ({})", pinned.join(", ")));
        }
        let globals_now = global_values(&mut admin).await;
        wrong.extend(changed(&globals_set, &globals_now, &sql, "a new client"));
        // (Pins from here on: the SHOW may warn, and its warnings hold
        // the connection for SHOW WARNINGS.)
        let pinned_before = pins();
        let want = session_values(&mut d).await;
        let got = session_values(&mut a).await;
        for diff in differences(&want, &got) {
            wrong.push(format!("after {sql}, the setter's {diff}"));
        }
        // Back to DEFAULT, and (unless held) the setter's next statement on
        // the connection after another client had it: what the relay
        // recorded of the DEFAULT is what it replays there. (Found so:
        // `SET timestamp = DEFAULT` replayed the value set before.)
        let back = format!("SET SESSION {name} = DEFAULT");
        let (db_, rb) = (
            code(d.query_drop(&back).await),
            code(a.query_drop(&back).await),
        );
        assert_eq!(db_, rb, "{back}: error code directly and through the relay");
        // (The DEFAULT changes a replication connection's global, directly
        // too: what counts is what serving the setter changes after it.)
        let mut globals_set = globals_set;
        if db_ == 0 {
            for c in [&mut d, &mut a] {
                c.query_drop("DO 0").await.expect("DO 0");
            }
            globals_set = global_values(&mut admin).await;
            let held = pins()
                .iter()
                .zip(pinned_before)
                .any(|(now, was)| now.1 > was.1);
            if pinned.is_empty() && !held {
                let mut c = mysql_async::Conn::new(relayed.clone())
                    .await
                    .unwrap_or_else(|e| panic!("a new client after {sql} and {back}: {e}"));
                let _ = session_values(&mut c).await;
                let _ = c.disconnect().await;
            }
            let want = session_values(&mut d).await;
            let got = session_values(&mut a).await;
            for diff in differences(&want, &got) {
                wrong.push(format!("after {sql} and {back}, the setter's {diff}"));
            }
        }
        let _ = a.disconnect().await;
        let _ = d.disconnect().await;
        let globals_after = global_values(&mut admin).await;
        wrong.extend(changed(&globals_set, &globals_after, &sql, "the setter"));
        // Leave the server as it was for the next variable.
        for (n, was) in &globals_before {
            if globals_after.get(n) != Some(was) {
                let _ = admin
                    .exec_drop(format!("SET GLOBAL {n} = ?"), (was.as_str(),))
                    .await;
            }
        }
    }
    eprintln!(
        "{accounts} accounts: {} session variables, {} values: {set} set, {refused} refused both ways, pinned the setter: {pinning:?}, no value picked: {unpicked:?}",
        vars.len(),
        draws.len()
    );
    assert!(set >= 300, "too few values could be set: {set}");
    assert!(
        wrong.is_empty(),
        "{} differences:\n  {}",
        wrong.len(),
        wrong.join("\n  ")
    );
    let _ = stop.send(());
}

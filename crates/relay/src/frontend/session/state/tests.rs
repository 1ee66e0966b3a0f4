//! Every pin and release rule as a row: a client's statements with the
//! server's replies, run through the state as the session drives it, and
//! what the client is left holding.

use super::*;
use crate::protocol::sql::Query;

/// A reply as the server gives it, reduced to what the state reads.
#[derive(Clone, Copy)]
enum R {
    /// OK, autocommit on, no transaction.
    Ok,
    /// OK inside a transaction.
    InTx,
    /// OK with autocommit off and no transaction open.
    NoAutocommit,
    /// `SET autocommit = 0`'s OK: the status and the tracked variable.
    AutocommitOff,
    /// OK inside a read-only transaction.
    ReadOnlyTx,
    /// An error packet (no status).
    Err,
    /// OK with warnings.
    Warn,
    /// A result set of n rows.
    Rows(u64),
    /// OK with a tracked variable change.
    Track(&'static str, &'static str),
    /// OK with the character set variables reported (SET NAMES's).
    Charsets(&'static str),
    /// OK with an unexplained session-state change.
    State,
    /// OK with a new default database.
    Schema(&'static str),
}

fn outcome(r: R) -> Outcome {
    let ok = |status| Outcome {
        status: Some(status),
        replies: 1,
        ..Outcome::default()
    };
    match r {
        R::Ok => ok(STATUS_AUTOCOMMIT),
        R::InTx => ok(STATUS_AUTOCOMMIT | STATUS_IN_TRANS),
        R::NoAutocommit => ok(0),
        R::AutocommitOff => Outcome {
            changes: vec![Change::SysVar("autocommit".into(), "OFF".into())],
            ..ok(0)
        },
        R::ReadOnlyTx => ok(STATUS_AUTOCOMMIT | STATUS_IN_TRANS | STATUS_IN_TRANS_READONLY),
        R::Err => Outcome {
            error: Some((1146, "no such table".into())),
            ..Outcome::default()
        },
        R::Warn => Outcome {
            warnings: 1,
            ..ok(STATUS_AUTOCOMMIT)
        },
        R::Rows(n) => Outcome {
            result_sets: 1,
            rows: n,
            last_rows: n,
            ..ok(STATUS_AUTOCOMMIT)
        },
        R::Track(name, value) => Outcome {
            changes: vec![Change::SysVar(name.into(), value.into())],
            ..ok(STATUS_AUTOCOMMIT)
        },
        R::Charsets(cs) => Outcome {
            changes: [
                "character_set_client",
                "character_set_connection",
                "character_set_results",
            ]
            .iter()
            .map(|n| Change::SysVar((*n).into(), cs.into()))
            .collect(),
            ..ok(STATUS_AUTOCOMMIT)
        },
        R::State => Outcome {
            changes: vec![Change::State],
            ..ok(STATUS_AUTOCOMMIT)
        },
        R::Schema(db) => Outcome {
            changes: vec![Change::Schema(db.into())],
            ..ok(STATUS_AUTOCOMMIT)
        },
    }
}

/// One statement through the state, in the order the session drives it
/// (`session.rs`, `query`), on a backend that tracks session state.
fn run(st: &mut ClientState, sql: &str, r: R) {
    let o = outcome(r);
    st.begin_command();
    let fx = Query::new(sql.as_bytes()).effects();
    st.begin_statement(&fx);
    st.drop_diagnostics_hold(&fx);
    let had_set_expression = st.pins.contains(&Pin::SetExpression);
    st.take_statement_pins(&fx);
    st.observe(&o, &[]);
    st.counts_after(&o, &fx, Some(false));
    st.hold_diagnostics(&o, fx.uses_tables);
    st.after_text(&fx, &o, true);
    if !had_set_expression {
        st.release_computed_settings(&fx, &o, true);
    }
}

struct Row {
    rule: &'static str,
    mode: Mode,
    steps: &'static [(&'static str, R)],
    /// The pins left after the last step.
    pins: &'static [Pin],
    /// Whether the connection goes back to the pool after the last step.
    release: bool,
}

const T: Mode = Mode::Transaction;

const ROWS: &[Row] = &[
    Row {
        rule: "a plain read holds nothing",
        mode: T,
        steps: &[("SELECT * FROM t", R::Rows(3))],
        pins: &[],
        release: true,
    },
    Row {
        rule: "session mode holds its connection for good",
        mode: Mode::Session,
        steps: &[("SELECT * FROM t", R::Rows(3))],
        pins: &[Pin::Session],
        release: false,
    },
    Row {
        rule: "an open transaction holds the connection",
        mode: T,
        steps: &[("BEGIN", R::InTx), ("INSERT INTO t VALUES (1)", R::InTx)],
        pins: &[],
        release: false,
    },
    Row {
        rule: "COMMIT gives it back",
        mode: T,
        steps: &[
            ("BEGIN", R::InTx),
            ("INSERT INTO t VALUES (1)", R::InTx),
            ("COMMIT", R::Ok),
        ],
        pins: &[],
        release: true,
    },
    Row {
        rule: "an error under autocommit=0 may have opened a transaction",
        mode: T,
        steps: &[
            ("SET autocommit = 0", R::AutocommitOff),
            ("INSERT INTO nope VALUES (1)", R::Err),
        ],
        pins: &[Pin::Diagnostics, Pin::MaybeInTransaction],
        release: false,
    },
    Row {
        rule: "the next status says whether it did",
        mode: T,
        steps: &[
            ("SET autocommit = 0", R::AutocommitOff),
            ("INSERT INTO nope VALUES (1)", R::Err),
            ("SELECT 1", R::NoAutocommit),
        ],
        pins: &[Pin::Diagnostics],
        release: false,
    },
    Row {
        rule: "autocommit=0 as the server has it, but not as a replay would give it",
        mode: T,
        steps: &[("CALL p()", R::NoAutocommit)],
        pins: &[Pin::ServerState, Pin::Call],
        release: false,
    },
    Row {
        rule: "a temporary table pins",
        mode: T,
        steps: &[("CREATE TEMPORARY TABLE tt (a int)", R::Ok)],
        pins: &[Pin::TemporaryTable],
        release: false,
    },
    Row {
        rule: "dropping every temporary table made releases",
        mode: T,
        steps: &[
            ("CREATE TEMPORARY TABLE tt (a int)", R::Ok),
            ("CREATE TEMPORARY TABLE t2 (a int)", R::Ok),
            ("DROP TEMPORARY TABLE tt", R::Ok),
            ("DROP TABLE t2", R::Ok),
        ],
        pins: &[],
        release: true,
    },
    Row {
        rule: "dropping one of two keeps the pin",
        mode: T,
        steps: &[
            ("CREATE TEMPORARY TABLE tt (a int)", R::Ok),
            ("CREATE TEMPORARY TABLE t2 (a int)", R::Ok),
            ("DROP TEMPORARY TABLE tt", R::Ok),
        ],
        pins: &[Pin::TemporaryTable],
        release: false,
    },
    Row {
        rule: "a failed text of several statements forgets what it made: the pin stays",
        mode: T,
        steps: &[
            (
                "CREATE TEMPORARY TABLE tt (a int); SELECT * FROM nope",
                R::Err,
            ),
            ("DROP TEMPORARY TABLE tt", R::Ok),
        ],
        pins: &[Pin::TemporaryTable, Pin::Diagnostics],
        release: false,
    },
    Row {
        rule: "a named lock pins until released as often as taken",
        mode: T,
        steps: &[
            ("SELECT GET_LOCK('a', 1)", R::Rows(1)),
            ("SELECT GET_LOCK('a', 1)", R::Rows(1)),
            ("SELECT RELEASE_LOCK('a')", R::Rows(1)),
        ],
        pins: &[Pin::GetLock],
        release: false,
    },
    Row {
        rule: "the last release frees it",
        mode: T,
        steps: &[
            ("SELECT GET_LOCK('a', 1)", R::Rows(1)),
            ("SELECT GET_LOCK('a', 1)", R::Rows(1)),
            ("SELECT RELEASE_LOCK('a')", R::Rows(1)),
            ("SELECT RELEASE_LOCK('a')", R::Rows(1)),
        ],
        pins: &[],
        release: true,
    },
    Row {
        rule: "RELEASE_ALL_LOCKS frees every lock",
        mode: T,
        steps: &[
            ("SELECT GET_LOCK('a', 1), GET_LOCK('b', 1)", R::Rows(1)),
            ("SELECT RELEASE_ALL_LOCKS()", R::Rows(1)),
        ],
        pins: &[],
        release: true,
    },
    Row {
        rule: "a lock under a computed name is never known released",
        mode: T,
        steps: &[
            ("SELECT GET_LOCK(CONCAT('a', id), 1) FROM t", R::Rows(1)),
            ("SELECT RELEASE_LOCK('a1')", R::Rows(1)),
        ],
        pins: &[Pin::GetLock],
        release: false,
    },
    Row {
        rule: "warnings hold the connection for SHOW WARNINGS",
        mode: T,
        steps: &[("INSERT INTO t VALUES ('x')", R::Warn)],
        pins: &[Pin::Diagnostics],
        release: false,
    },
    Row {
        rule: "SHOW WARNINGS reads them where they are",
        mode: T,
        steps: &[
            ("INSERT INTO t VALUES ('x')", R::Warn),
            ("SHOW WARNINGS", R::Rows(1)),
        ],
        pins: &[Pin::Diagnostics],
        release: false,
    },
    Row {
        rule: "a statement that opens a table clears them",
        mode: T,
        steps: &[
            ("INSERT INTO t VALUES ('x')", R::Warn),
            ("SELECT * FROM t", R::Rows(2)),
        ],
        pins: &[],
        release: true,
    },
    Row {
        rule: "a statement that opens no table leaves them",
        mode: T,
        steps: &[
            ("INSERT INTO t VALUES ('x')", R::Warn),
            ("SELECT 1", R::Rows(1)),
        ],
        pins: &[Pin::Diagnostics],
        release: false,
    },
    Row {
        rule: "a new default database is followed, not pinned",
        mode: T,
        steps: &[("USE b", R::Schema("b"))],
        pins: &[],
        release: true,
    },
    Row {
        rule: "a tracked setting is replayed, not pinned",
        mode: T,
        steps: &[("SET sql_mode = 'ANSI'", R::Track("sql_mode", "ANSI"))],
        pins: &[],
        release: true,
    },
    Row {
        rule: "changing session tracking pins",
        mode: T,
        steps: &[(
            "SET session_track_state_change = 0",
            R::Track("session_track_state_change", "OFF"),
        )],
        pins: &[Pin::Tracking],
        release: false,
    },
    Row {
        rule: "a state change the text explains does not pin",
        mode: T,
        steps: &[("SET NAMES latin1", R::State)],
        pins: &[],
        release: true,
    },
    Row {
        rule: "a state change the text does not explain pins (a procedure's user variable)",
        mode: T,
        steps: &[("SELECT f(1)", R::State)],
        pins: &[Pin::ServerState, Pin::StoredFunction],
        release: false,
    },
    Row {
        rule: "a user variable pins",
        mode: T,
        steps: &[("SET @a = 1", R::State)],
        pins: &[Pin::UserVariable],
        release: false,
    },
    Row {
        rule: "a one-shot variable set out of sight pins",
        mode: T,
        steps: &[("SELECT f(1)", R::Track("insert_id", "5"))],
        pins: &[Pin::OneShotVariable, Pin::StoredFunction],
        release: false,
    },
    Row {
        rule: "SET STATEMENT's variable is not the session's",
        mode: T,
        steps: &[(
            "SET STATEMENT max_statement_time = 5 FOR SELECT * FROM t",
            R::Track("max_statement_time", "5.000000"),
        )],
        pins: &[],
        release: true,
    },
    Row {
        rule: "a read-only transaction's characteristic outlives it",
        mode: T,
        steps: &[
            ("START TRANSACTION READ ONLY", R::ReadOnlyTx),
            ("SET autocommit = 1", R::Ok),
        ],
        pins: &[Pin::SetTransaction],
        release: false,
    },
    Row {
        rule: "until COMMIT or ROLLBACK",
        mode: T,
        steps: &[
            ("START TRANSACTION READ ONLY", R::ReadOnlyTx),
            ("COMMIT", R::Ok),
        ],
        pins: &[],
        release: true,
    },
    Row {
        rule: "SET TRANSACTION waits for the next transaction to end",
        mode: T,
        steps: &[
            ("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", R::Ok),
            ("SELECT 1", R::Rows(1)),
        ],
        pins: &[Pin::SetTransaction],
        release: false,
    },
    Row {
        rule: "a savepoint under autocommit ends at once",
        mode: T,
        steps: &[("SAVEPOINT a", R::Ok)],
        pins: &[],
        release: true,
    },
    Row {
        rule: "a savepoint in a transaction ends with it",
        mode: T,
        steps: &[
            ("BEGIN", R::InTx),
            ("SAVEPOINT a", R::InTx),
            ("INSERT INTO t VALUES (1)", R::InTx),
            ("COMMIT", R::Ok),
        ],
        pins: &[],
        release: true,
    },
    Row {
        rule: "LAST_INSERT_ID() is carried, not pinned",
        mode: T,
        steps: &[
            ("INSERT INTO t VALUES (NULL)", R::Ok),
            ("SELECT LAST_INSERT_ID()", R::Rows(1)),
        ],
        pins: &[],
        release: true,
    },
    Row {
        rule: "SQL_CALC_FOUND_ROWS keeps the connection for the next statement",
        mode: T,
        steps: &[("SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 1", R::Rows(1))],
        pins: &[],
        release: false,
    },
    Row {
        rule: "which then gives it back",
        mode: T,
        steps: &[
            ("SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 1", R::Rows(1)),
            ("SELECT FOUND_ROWS()", R::Rows(1)),
        ],
        pins: &[],
        release: true,
    },
    Row {
        rule: "FLUSH STATUS keeps the connection whose counters it zeroed",
        mode: T,
        steps: &[("FLUSH LOCAL STATUS, TABLES", R::Ok)],
        pins: &[Pin::SessionStatus],
        release: false,
    },
    Row {
        rule: "other FLUSH options hold nothing",
        mode: T,
        steps: &[("FLUSH TABLES", R::Ok), ("FLUSH USER_STATISTICS", R::Ok)],
        pins: &[],
        release: true,
    },
    Row {
        rule: "LOCK TABLES pins until UNLOCK TABLES",
        mode: T,
        steps: &[("LOCK TABLES t READ", R::Ok)],
        pins: &[Pin::LockTables],
        release: false,
    },
    Row {
        rule: "UNLOCK TABLES releases",
        mode: T,
        steps: &[("LOCK TABLES t READ", R::Ok), ("UNLOCK TABLES", R::Ok)],
        pins: &[],
        release: true,
    },
    Row {
        rule: "a SET to a computed value pins until the server reports it",
        mode: T,
        steps: &[("SET sql_mode = CONCAT(@@sql_mode, ',ANSI')", R::Ok)],
        pins: &[Pin::SetExpression],
        release: false,
    },
    Row {
        rule: "reported: replayed by value",
        mode: T,
        steps: &[(
            "SET sql_mode = CONCAT(@@sql_mode, ',ANSI')",
            R::Track("sql_mode", "ANSI"),
        )],
        pins: &[],
        release: true,
    },
];

#[test]
fn every_pin_and_release_rule() {
    let mut failed = Vec::new();
    for row in ROWS {
        let mut st = ClientState::new(row.mode, Some("test".into()));
        for (sql, r) in row.steps {
            run(&mut st, sql, *r);
        }
        let pins: Vec<Pin> = st.pins.iter().copied().collect();
        let want: Vec<Pin> = row
            .pins
            .iter()
            .copied()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if pins != want || st.may_release() != row.release {
            failed.push(format!(
                "{}: pins {pins:?} (expected {:?}), release {} (expected {})",
                row.rule,
                row.pins,
                st.may_release(),
                row.release
            ));
        }
    }
    assert!(failed.is_empty(), "\n{}", failed.join("\n"));
}

#[test]
fn what_the_connection_learns_from_an_observation() {
    let mut st = ClientState::new(T, Some("a".into()));
    let o = Outcome {
        insert_id: 7,
        changes: vec![
            Change::SysVar("time_zone".into(), "+01:00".into()),
            Change::Schema("b".into()),
            Change::SysVar("last_gtid".into(), "0-1-5".into()),
            Change::SysVar("sql_slave_skip_counter".into(), "1".into()),
            Change::SysVar("max_relay_log_size".into(), "4096".into()),
        ],
        ..outcome(R::Ok)
    };
    st.expect_insert_id(InsertId::Sets);
    let f = st.observe(&o, &[]);
    assert_eq!(
        f,
        ForConn {
            settings: vec![Setting::from_server("time_zone", "+01:00")],
            db: Some(Some("b".into())),
            insert_id: Some(7),
            insert_id_unknown: false,
            pinned: vec![],
            reported_vars: true,
            tracking_lost: false,
        }
    );
    assert_eq!(st.db.as_deref(), Some("b"));
    assert_eq!(st.last_insert_id, 7);
    // USE without tracking: from the text.
    let fx = Query::new(b"USE c").effects();
    let f = st.after_text(&fx, &outcome(R::Ok), false);
    assert_eq!(f.db, Some(Some("c".into())));
    // DROP DATABASE of the default one leaves none.
    let fx = Query::new(b"DROP DATABASE c").effects();
    let f = st.after_text(&fx, &outcome(R::Ok), true);
    assert_eq!((f.db, st.db.clone()), (Some(None), None));
}

#[test]
fn counts_are_the_clients_own() {
    let mut st = ClientState::new(T, None);
    let sel = Query::new(b"SELECT * FROM t").effects();
    assert_eq!(
        st.counts_after(&outcome(R::Rows(4)), &sel, None),
        FoundRowsOnConn::Mine
    );
    assert_eq!((st.last_found_rows, st.last_row_count), (4, -1));
    let ins = Query::new(b"INSERT INTO t VALUES (1), (2)").effects();
    let o = Outcome {
        affected: 2,
        ..outcome(R::Ok)
    };
    assert_eq!(st.counts_after(&o, &ins, None), FoundRowsOnConn::Unchanged);
    assert_eq!((st.last_found_rows, st.last_row_count), (4, 2));
    // A failed SELECT where the connection had the client's count: ask.
    assert_eq!(
        st.counts_after(&outcome(R::Err), &sel, Some(true)),
        FoundRowsOnConn::Unknown
    );
    assert!(st.found_rows_calc);
    // INSERT ... SELECT, CREATE ... SELECT: only the server knows the count.
    // (as many replies as the server ran statements)
    for (text, replies) in [
        (&b"INSERT INTO t SELECT * FROM u"[..], 1),
        (b"CREATE TABLE t2 AS SELECT 5", 1),
        (b"SELECT 1 UNION SELECT 2; DO 1", 2),
        (b"DO 1; INSERT INTO t SELECT * FROM u", 2),
    ] {
        let mut st = ClientState::new(T, None);
        let fx = Query::new(text).effects();
        let o = Outcome {
            replies,
            ..outcome(R::Ok)
        };
        assert_eq!(
            st.counts_after(&o, &fx, Some(false)),
            FoundRowsOnConn::Unknown,
            "{}",
            String::from_utf8_lossy(text)
        );
        assert!(st.found_rows_calc);
    }
    for text in [
        &b"UPDATE t SET a = (SELECT 1)"[..],
        b"CREATE PROCEDURE p() BEGIN SELECT 1; END",
        b"CREATE OR REPLACE VIEW v AS SELECT 1",
    ] {
        let fx = Query::new(text).effects();
        assert!(!fx.found_rows_unknown, "{}", String::from_utf8_lossy(text));
    }
    let fx = Query::new(b"CREATE OR REPLACE TEMPORARY TABLE t AS SELECT 1").effects();
    assert!(fx.found_rows_unknown);
    // Statements that run other statements: a procedure's SELECT, a
    // prepared one, a compound statement's body set the server's count.
    for text in [
        &b"CALL p()"[..],
        b"EXECUTE s",
        b"BEGIN NOT ATOMIC INSERT INTO t2 SELECT * FROM t1; END",
        b"lbl: BEGIN NOT ATOMIC SELECT 1; END",
        b"IF 1 THEN SELECT * FROM t LIMIT 1; END IF",
        b"FOR i IN 1..3 DO SELECT i; END FOR",
    ] {
        let fx = Query::new(text).effects();
        assert!(
            fx.found_rows_unknown_first,
            "{}",
            String::from_utf8_lossy(text)
        );
    }
    for text in [&b"BEGIN"[..], b"BEGIN WORK", b"SELECT IF(1, 2, 3)", b"DO 1"] {
        let fx = Query::new(text).effects();
        assert!(!fx.found_rows_unknown, "{}", String::from_utf8_lossy(text));
    }
    // A routine's body is split at its `;` by the text, but the server
    // answers its CREATE as one statement: the body's SELECT did not run
    // (mysql-test's main.sp-vars: the relay's own FOUND_ROWS() question
    // moved the server's row number in the next CALL's warning).
    let body = b"CREATE PROCEDURE p1 (arg DECIMAL(64,2)) BEGIN DECLARE var DECIMAL(64,2); SET var = arg; SELECT var; END";
    let fx = Query::new(body).effects();
    let mut st = ClientState::new(T, None);
    assert_eq!(
        st.counts_after(&outcome(R::Ok), &fx, Some(false)),
        FoundRowsOnConn::Unchanged
    );
    assert!(!st.found_rows_calc);
    // Two replies: the text really was two statements, the SELECT's count
    // stands.
    let fx = Query::new(b"SELECT var FROM t LIMIT 1; END").effects();
    let o = Outcome {
        replies: 2,
        ..outcome(R::Ok)
    };
    assert_eq!(
        st.counts_after(&o, &fx, Some(false)),
        FoundRowsOnConn::Unknown
    );
    let q = Query::new(b"SELECT ROW_COUNT()");
    st.last_row_count = 2;
    let d = sqlfleet_dump::lex::Dialect::default();
    let text = st
        .own_counts(b"SELECT ROW_COUNT()", q.tokens(), d, &q.effects())
        .expect("reads as before");
    assert!(
        String::from_utf8_lossy(&text).starts_with("SELECT COALESCE(2, "),
        "{}",
        String::from_utf8_lossy(&text)
    );
}

#[test]
fn a_reset_leaves_a_new_session() {
    let mut st = ClientState::new(Mode::Session, Some("a".into()));
    run(&mut st, "SET @a = 1", R::State);
    run(&mut st, "BEGIN", R::InTx);
    st.clear();
    assert_eq!(
        st.pins.iter().copied().collect::<Vec<_>>(),
        vec![Pin::Session]
    );
    assert!(!st.in_trans && st.autocommit && st.settings.is_empty());
    assert_eq!((st.last_row_count, st.last_insert_id), (0, 0));
}

/// A SET the tracking server is silent about still follows the client:
/// recorded from its text (MariaDB does not report `SET @@var = v`).
#[test]
fn a_set_the_server_does_not_report_is_recorded_from_its_text() {
    let mut st = ClientState::new(T, None);
    run(&mut st, "SET @@max_sp_recursion_depth = 20", R::Ok);
    assert_eq!(
        st.settings,
        vec![Setting {
            name: "max_sp_recursion_depth".into(),
            text: "@@session.max_sp_recursion_depth = 20".into()
        }]
    );
    // Reported: the server's value, once.
    let mut st = ClientState::new(T, None);
    run(
        &mut st,
        "SET sql_mode = 'ANSI'",
        R::Track("sql_mode", "REAL_AS_FLOAT,ANSI"),
    );
    assert_eq!(
        st.settings,
        vec![Setting::from_server("sql_mode", "REAL_AS_FLOAT,ANSI")]
    );
}

#[test]
fn a_session_with_an_idle_transaction_timeout_is_the_servers_to_end() {
    // (the statement, the server's report, whether a lost connection is
    // then the server's word rather than something to replay elsewhere)
    let rows: &[(&str, R, bool)] = &[
        (
            "SET idle_transaction_timeout = 1",
            R::Track("idle_transaction_timeout", "1"),
            true,
        ),
        (
            "SET idle_write_transaction_timeout = 5",
            R::Track("idle_write_transaction_timeout", "5"),
            true,
        ),
        ("SET idle_readonly_transaction_timeout = 2", R::Ok, true),
        (
            "SET idle_transaction_timeout = 0",
            R::Track("idle_transaction_timeout", "0"),
            false,
        ),
        ("SET idle_transaction_timeout = DEFAULT", R::Ok, false),
        ("SET wait_timeout = 5", R::Track("wait_timeout", "5"), false),
    ];
    for (sql, r, idle) in rows {
        let mut st = ClientState::new(T, None);
        run(&mut st, sql, *r);
        assert_eq!(st.idle_timeout(), *idle, "{sql}: {:?}", st.settings);
        assert_eq!(st.fits_elsewhere().is_err(), *idle, "{sql}");
    }
}

#[test]
fn a_collation_named_by_set_names_follows_until_the_character_set_changes() {
    let coll = |st: &ClientState| {
        st.settings
            .iter()
            .find(|s| s.name == "collation_connection")
            .map(|s| s.text.clone())
    };
    let mut st = ClientState::new(T, None);
    // The server reports the character sets, not the collation.
    let names = R::Charsets;
    run(
        &mut st,
        "SET NAMES utf8mb3 COLLATE utf8mb3_general_mysql500_ci",
        names("utf8mb3"),
    );
    assert_eq!(
        coll(&st).as_deref(),
        Some("@@session.collation_connection = 'utf8mb3_general_mysql500_ci'")
    );
    run(&mut st, "SELECT 1", R::Rows(1));
    assert!(coll(&st).is_some(), "kept");
    run(&mut st, "SET NAMES latin1", names("latin1"));
    assert_eq!(coll(&st), None, "latin1's own default now");
}

#[test]
fn a_setting_replaces_what_it_assigns_on_the_server() {
    // Without a tracking server every SET is recorded from its text, in
    // the client's order; a later one that assigns an earlier one's
    // variable on the server replaces it, so a replay never brings back
    // what the client changed since.
    let untracked = |sqls: &[&str]| {
        let mut st = ClientState::new(T, None);
        for sql in sqls {
            let fx = Query::new(sql.as_bytes()).effects();
            st.after_text(&fx, &outcome(R::Ok), false);
        }
        st.settings
            .iter()
            .map(|s| s.name.clone())
            .collect::<Vec<_>>()
    };
    let rows: &[(&[&str], &[&str])] = &[
        (
            &[
                "SET collation_connection = 'latin1_bin'",
                "SET NAMES utf8mb4",
            ],
            &["names"],
        ),
        (
            &["SET character_set_connection = latin1", "SET NAMES utf8mb4"],
            &["names"],
        ),
        (
            &["SET NAMES utf8mb4", "SET character_set_client = latin1"],
            &["names", "character_set_client"],
        ),
        (
            &[
                "SET collation_connection = 'latin1_bin'",
                "SET character_set_connection = utf8mb4",
            ],
            &["character_set_connection"],
        ),
        (
            &[
                "SET character_set_connection = utf8mb4",
                "SET collation_connection = 'utf8mb4_bin'",
            ],
            &["character_set_connection", "collation_connection"],
        ),
        (
            &["SET sql_mode = 'ANSI'", "SET NAMES latin1"],
            &["sql_mode", "names"],
        ),
    ];
    for (sqls, want) in rows {
        assert_eq!(untracked(sqls), *want, "{sqls:?}");
    }
}

#[test]
fn found_rows_are_asked_untraced_under_a_clients_optimizer_trace() {
    let mut st = ClientState::new(T, None);
    assert_eq!(st.question(true, false), "SELECT FOUND_ROWS() AS f");
    assert_eq!(
        st.question(true, true),
        "SELECT FOUND_ROWS() AS f, LAST_INSERT_ID() AS i"
    );
    run(
        &mut st,
        "SET optimizer_trace = 'enabled=on'",
        R::Track("optimizer_trace", "enabled=on"),
    );
    assert_eq!(
        st.question(false, true),
        "SET STATEMENT optimizer_trace = 'enabled=off' FOR SELECT LAST_INSERT_ID() AS i"
    );
}

#[test]
fn which_pins_keep_the_connection_for_good() {
    let held = |sql: &str| {
        let mut st = ClientState::new(T, None);
        run(&mut st, sql, R::Ok);
        st.holds_conn_for_good()
    };
    assert!(held("CALL p()"));
    assert!(held("EXECUTE s"));
    assert!(!held("SELECT GET_LOCK('a', 0)"));
    assert!(!held("LOCK TABLES t READ"));
    assert!(ClientState::new(Mode::Session, None).holds_conn_for_good());
    assert!(!ClientState::new(T, None).holds_conn_for_good());
}

#[test]
fn a_reset_on_the_connection_holding_the_clients_counters_keeps_it() {
    for (ran_on_held, kept) in [(true, true), (false, false)] {
        let mut st = ClientState::new(T, None);
        run(&mut st, "FLUSH STATUS", R::Ok);
        run(&mut st, "SET @a = 1", R::State);
        st.reset(ran_on_held);
        let want: &[Pin] = if kept { &[Pin::SessionStatus] } else { &[] };
        assert_eq!(st.pins.iter().copied().collect::<Vec<_>>(), want);
    }
    // Without FLUSH STATUS a reset holds nothing.
    let mut st = ClientState::new(T, None);
    run(&mut st, "SET @a = 1", R::State);
    st.reset(true);
    assert!(st.pins.is_empty());
    // The server's reset keeps the session's role: so does the client's
    // hold on that connection, and its end closes it.
    let mut st = ClientState::new(T, None);
    run(&mut st, "SET ROLE r1", R::Ok);
    assert!(
        !st.reset_ends_session(),
        "the client's own reset keeps its role"
    );
    st.reset(true);
    assert_eq!(st.pins.iter().copied().collect::<Vec<_>>(), [Pin::Role]);
    assert_eq!(st.parting(), Parting::Close);
    // A change of user logs in again: the account's default role.
    st.clear();
    assert_eq!(st.parting(), Parting::Reuse);
}

/// MariaDB reports what a `SET STATEMENT ... FOR` restores only with the
/// next reply that reports anything (a COMMIT's last_gtid), on whatever
/// statement comes next on the connection: that report is the restore
/// (no setting, no pin) only when the connection expects it and the
/// statement runs no stored code; otherwise it stays an unexplained
/// change (pinned, fail closed).
#[test]
fn a_late_report_of_a_set_statement_restore_is_no_change_of_the_session() {
    let restore = |var: &str, value: &str| Outcome {
        changes: vec![
            Change::SysVar(var.into(), value.into()),
            Change::SysVar("last_gtid".into(), "0-1-9".into()),
            Change::State,
        ],
        ..outcome(R::Ok)
    };
    let mst = ["max_statement_time".to_string()];
    let wsw = ["wsrep_sync_wait".to_string()];
    // (pending restores, statement, reply, pinned by server state, setting recorded)
    let rows: Vec<(&[String], &str, Outcome, bool, bool)> = vec![
        (
            &mst,
            "COMMIT",
            restore("max_statement_time", "0.000000"),
            false,
            false,
        ),
        (
            &wsw,
            "COMMIT",
            restore("wsrep_sync_wait", "0"),
            false,
            false,
        ),
        (
            &wsw,
            "UPDATE t SET a = 1",
            restore("wsrep_sync_wait", "0"),
            false,
            false,
        ),
        (
            &wsw,
            "SELECT 1",
            restore("WSREP_SYNC_WAIT", "0"),
            false,
            false,
        ),
        // Not expected on this connection: unexplained.
        (
            &[],
            "COMMIT",
            restore("max_statement_time", "0.000000"),
            true,
            true,
        ),
        (
            &wsw,
            "COMMIT",
            restore("max_statement_time", "0.000000"),
            true,
            true,
        ),
        // Stored code may have changed it itself.
        (
            &mst,
            "CALL p()",
            restore("max_statement_time", "0.000000"),
            true,
            true,
        ),
        (
            &mst,
            "SELECT my_func(1)",
            restore("max_statement_time", "0.000000"),
            true,
            true,
        ),
        // The client's own SET of the variable is its setting, alone or
        // among other statements (whose state change stays unexplained),
        // by value or computed.
        (
            &mst,
            "SET max_statement_time = 3",
            restore("max_statement_time", "3.000000"),
            false,
            true,
        ),
        (
            &mst,
            "SET max_statement_time = 3; SELECT 1",
            restore("max_statement_time", "3.000000"),
            true,
            true,
        ),
        (
            &mst,
            "SET max_statement_time = 1 + 2",
            restore("max_statement_time", "3.000000"),
            false,
            true,
        ),
    ];
    for (pending, sql, o, pinned, recorded) in rows {
        let mut st = ClientState::new(T, Some("a".into()));
        st.begin_command();
        let fx = Query::new(sql.as_bytes()).effects();
        st.begin_statement(&fx);
        st.take_statement_pins(&fx);
        let f = st.observe(&o, pending);
        assert_eq!(
            st.pins.contains(&Pin::ServerState),
            pinned,
            "{pending:?} {sql}"
        );
        assert_eq!(!st.settings.is_empty(), recorded, "{pending:?} {sql}");
        assert!(f.reported_vars, "{sql}");
        // A pinned session is never moved (its transaction not replayed);
        // a restore leaves it free to move.
        if pinned {
            assert!(st.fits_elsewhere().is_err(), "{sql}");
        } else if !recorded {
            assert!(st.fits_elsewhere().is_ok(), "{sql}");
        }
    }
}

/// A session's end closes its connection when an XA branch is on it or
/// its role may have changed or it may have traced its statements (the
/// server's reset keeps the role and the profile history), and
/// hands it back for reuse otherwise (whatever else it holds: a reset
/// frees locks, temporary tables and prepared statements).
#[test]
fn a_session_ending_with_an_xa_branch_a_role_or_traces_closes_its_connection() {
    // (statements, what becomes of the connection)
    let rows: &[(&[&str], Parting)] = &[
        (&[], Parting::Reuse),
        (&["SELECT 1"], Parting::Reuse),
        (&["BEGIN", "INSERT INTO t VALUES (1)"], Parting::Reuse),
        (&["LOCK TABLES t WRITE"], Parting::Reuse),
        (&["SELECT GET_LOCK('a', 0)"], Parting::Reuse),
        (&["CREATE TEMPORARY TABLE tt (i INT)"], Parting::Reuse),
        (&["XA START 'x'"], Parting::Close),
        (&["SET ROLE r1"], Parting::Close),
        (&["SET ROLE NONE"], Parting::Close),
        (
            &["SET STATEMENT max_statement_time = 1 FOR SET ROLE r1"],
            Parting::Close,
        ),
        (&["EXECUTE IMMEDIATE 'SET ROLE r1'"], Parting::Close),
        (
            &["PREPARE s FROM 'SET ROLE r1'", "EXECUTE s"],
            Parting::Close,
        ),
        (
            &["EXECUTE IMMEDIATE CONCAT('SET ', 'ROLE r1')"],
            Parting::Close,
        ),
        (&["SELECT CURRENT_ROLE()"], Parting::Reuse),
        (&["SET profiling = 1", "SELECT 1"], Parting::Close),
        (&["SHOW PROFILES"], Parting::Reuse),
        (
            &["SET optimizer_trace = 'enabled=on'", "SELECT 1"],
            Parting::Close,
        ),
        (&["SET DEFAULT ROLE r1 FOR bob"], Parting::Reuse),
        (
            &["XA START 'x'", "INSERT INTO t VALUES (1)", "XA END 'x'"],
            Parting::Close,
        ),
        (
            &["XA START 'x'", "XA END 'x'", "XA PREPARE 'x'"],
            Parting::Close,
        ),
        (
            &[
                "XA START 'x'",
                "XA END 'x'",
                "XA PREPARE 'x'",
                "XA COMMIT 'x'",
            ],
            Parting::Reuse,
        ),
        (
            &["XA START 'x'", "XA END 'x'", "XA ROLLBACK 'x'"],
            Parting::Reuse,
        ),
        (
            &["XA START 'x'", "XA END 'x'", "XA COMMIT 'x' ONE PHASE"],
            Parting::Reuse,
        ),
    ];
    for (steps, want) in rows {
        for mode in [T, Mode::Session] {
            let mut st = ClientState::new(mode, None);
            for sql in *steps {
                run(&mut st, sql, R::Ok);
            }
            assert_eq!(st.parting(), *want, "{steps:?} in {mode:?}");
        }
    }
}

/// What a read of `@@last_gtid` answers, step by step: '' before any
/// write (a new direct session's answer), the GTID the server reported
/// for the client's last write (not one a tracker that lost count
/// reported: the server's answer), the server's own (no rewrite) once a
/// write ran where nothing is reported, and '' again after a reset.
#[test]
fn last_gtid_is_known_from_the_reports_or_left_to_the_server() {
    let read = |st: &ClientState| {
        let q = Query::new(b"SELECT @@last_gtid");
        let d = sqlfleet_dump::lex::Dialect::default();
        match st
            .own_counts(b"SELECT @@last_gtid", q.tokens(), d, &q.effects())
            .expect("reads as before")
        {
            std::borrow::Cow::Owned(v) => {
                let v = String::from_utf8(v).expect("utf8");
                let at = v.find('\'').expect("a literal") + 1;
                Some(v[at..at + v[at..].find('\'').expect("its end")].to_string())
            }
            std::borrow::Cow::Borrowed(_) => None,
        }
    };
    let mut st = ClientState::new(T, Some("a".into()));
    assert_eq!(read(&st).as_deref(), Some(""), "a new session");
    run(
        &mut st,
        "INSERT INTO t VALUES (1)",
        R::Track("last_gtid", "0-1-5"),
    );
    assert_eq!(read(&st).as_deref(), Some("0-1-5"), "reported");
    run(&mut st, "SELECT 1", R::Rows(1));
    assert_eq!(read(&st).as_deref(), Some("0-1-5"), "a read keeps it");
    // MariaDB 11.4's tracker after a plugin's variable: the write's reply
    // names a stale GTID and no variable (`backend/tracker.rs`).
    st.begin_command();
    let fx = Query::new(b"SET STATEMENT innodb_lock_wait_timeout = 5 FOR INSERT INTO t VALUES (3)")
        .effects();
    st.begin_statement(&fx);
    let o = Outcome {
        changes: vec![
            Change::SysVar("last_gtid".into(), "0-1-2".into()),
            Change::State,
        ],
        ..outcome(R::Ok)
    };
    assert!(st.observe(&o, &[]).tracking_lost, "the tracker lost count");
    assert_eq!(read(&st).as_deref(), Some("0-1-5"), "its report not taken");
    st.note_own_gtid("0-1-7".into());
    assert_eq!(read(&st).as_deref(), Some("0-1-7"), "the server's answer");
    // A write on a connection that tracks nothing.
    let fx = Query::new(b"INSERT INTO t VALUES (2)").effects();
    st.after_text(&fx, &outcome(R::Ok), false);
    assert_eq!(read(&st), None, "unseen: the server's");
    st.clear();
    assert_eq!(read(&st).as_deref(), Some(""), "after a reset");
}

/// A read may leave for a replica only when nothing ties the session to
/// its connection: under autocommit=0 the read itself opens a transaction
/// whose writes would follow it to the replica.
#[test]
fn a_read_goes_elsewhere_only_when_it_opens_no_transaction() {
    type Row = (&'static str, Mode, &'static [(&'static str, R)], bool);
    let rows: &[Row] = &[
        ("a fresh session", T, &[], true),
        (
            "autocommit off",
            T,
            &[("SET autocommit = 0", R::AutocommitOff)],
            false,
        ),
        (
            "autocommit off, after a read's OK with no transaction yet",
            T,
            &[
                ("SET autocommit = 0", R::AutocommitOff),
                ("SELECT 1", R::NoAutocommit),
            ],
            false,
        ),
        (
            "autocommit off, after a read's error",
            T,
            &[
                ("SET autocommit = 0", R::AutocommitOff),
                ("SELECT * FROM missing WHERE 1 = 0", R::Err),
            ],
            false,
        ),
        (
            "autocommit back on",
            T,
            &[
                ("SET autocommit = 0", R::AutocommitOff),
                ("SET autocommit = 1", R::Track("autocommit", "ON")),
            ],
            true,
        ),
        ("inside a transaction", T, &[("BEGIN", R::InTx)], false),
        (
            "after the transaction",
            T,
            &[("BEGIN", R::InTx), ("COMMIT", R::Ok)],
            true,
        ),
        ("session mode", Mode::Session, &[], false),
    ];
    let mut failed = Vec::new();
    let sure = Fresh {
        autocommit: true,
        sure: true,
    };
    let rows = rows.iter().map(|&(n, m, s, w)| (n, m, s, w, sure)).chain([
        // What a new session starts with, from the health checks.
        (
            "starts not sure (an init_connect)",
            T,
            &[][..],
            false,
            Fresh {
                autocommit: true,
                sure: false,
            },
        ),
        (
            "not sure, until a reply's status says autocommit",
            T,
            &[("SELECT 1", R::Rows(1))][..],
            true,
            Fresh {
                autocommit: true,
                sure: false,
            },
        ),
        (
            "not sure, and a reply says autocommit off",
            T,
            &[("SELECT 1", R::NoAutocommit)][..],
            false,
            Fresh {
                autocommit: true,
                sure: false,
            },
        ),
        (
            "starts with autocommit off",
            T,
            &[][..],
            false,
            Fresh {
                autocommit: false,
                sure: true,
            },
        ),
    ]);
    for (name, mode, steps, want, fresh) in rows {
        let mut st = ClientState::new(mode, Some("test".into())).starting_as(fresh);
        for (sql, r) in steps {
            run(&mut st, sql, *r);
        }
        if st.may_read_elsewhere() != want {
            failed.push(format!(
                "{name}: {} (expected {want}; pins {:?}, autocommit {})",
                st.may_read_elsewhere(),
                st.pins,
                st.autocommit
            ));
        }
    }
    assert!(failed.is_empty(), "\n{}", failed.join("\n"));
}

/// A session whose servers start it with autocommit off goes back to the
/// pool as a direct one would be: a new connection gives the same; one
/// that is found off where a new connection would have it on keeps its
/// connection.
#[test]
fn autocommit_as_the_servers_start_sessions_is_no_reason_to_hold() {
    let off = Fresh {
        autocommit: false,
        sure: true,
    };
    let mut st = ClientState::new(T, Some("test".into())).starting_as(off);
    run(&mut st, "SELECT 1", R::NoAutocommit);
    assert!(st.pins.is_empty() && st.may_release(), "{:?}", st.pins);
    let unsure = Fresh {
        autocommit: true,
        sure: false,
    };
    let mut st = ClientState::new(T, Some("test".into())).starting_as(unsure);
    run(&mut st, "SELECT 1", R::NoAutocommit);
    assert!(st.pins.contains(&Pin::ServerState), "{:?}", st.pins);
}

/// A count of -1 (the statement before was no write, or failed) is
/// written in as every other: the rewrite reads as the text did.
#[test]
fn a_negative_count_is_written_in() {
    let mut st = ClientState::new(T, None);
    st.last_row_count = -1;
    let q = Query::new(b"SELECT hex(concat(row_count()))");
    let d = sqlfleet_dump::lex::Dialect::default();
    let text = st
        .own_counts(
            b"SELECT hex(concat(row_count()))",
            q.tokens(),
            d,
            &q.effects(),
        )
        .expect("reads as before");
    assert!(
        String::from_utf8_lossy(&text).contains("COALESCE(-1, row_count())"),
        "{}",
        String::from_utf8_lossy(&text)
    );
}

/// `timestamp` and `pseudo_thread_id` are recorded from the statement's
/// text, never from the tracker's value (MariaDB 10.11 reports the value
/// from before `SET timestamp = DEFAULT`, and 0 for the thread id's
/// DEFAULT; the clock's value replayed would stop it); a procedure that
/// sets one holds the client by its call.
#[test]
fn the_clock_and_the_thread_id_are_what_the_text_set() {
    let mut st = ClientState::new(T, Some("a".into()));
    run(
        &mut st,
        "SET timestamp = 1000000000",
        R::Track("timestamp", "1000000000.000000"),
    );
    let texts = |st: &ClientState| -> Vec<String> {
        st.settings.iter().map(|s| s.text.to_lowercase()).collect()
    };
    assert_eq!(texts(&st), vec!["@@session.timestamp = 1000000000"]);
    // 10.11's report: the value before the SET.
    run(
        &mut st,
        "SET timestamp = DEFAULT",
        R::Track("timestamp", "1000000000.000000"),
    );
    assert_eq!(texts(&st), vec!["@@session.timestamp = default"]);
    assert!(!st.pins.contains(&Pin::ServerState));
    // The thread id's DEFAULT is the connection's own (reported as 0).
    run(
        &mut st,
        "SET pseudo_thread_id = DEFAULT",
        R::Track("pseudo_thread_id", "0"),
    );
    assert_eq!(
        texts(&st),
        vec![
            "@@session.timestamp = default",
            "@@session.pseudo_thread_id = default"
        ]
    );
    // A procedure's SET: only the server says so.
    run(&mut st, "CALL p()", R::Track("timestamp", "5.000000"));
    assert!(st.pins.contains(&Pin::Call), "{:?}", st.pins);
    assert_eq!(texts(&st).len(), 2, "nothing recorded from the report");
}

/// Before a statement that may keep the count before it: what gives the
/// connection the client's count, by the client's count and the
/// statement (`found_rows_restore`), and the count after it.
#[test]
fn a_count_a_statement_may_keep_is_made_on_its_connection_first() {
    // (statement, the client's count, the restore's text or None)
    let rows: &[(&str, u64, Option<&str>)] = &[
        ("SELECT * FROM t", 5, None),
        ("INSERT INTO t VALUES (1)", 5, None),
        ("SELECT COUNT(*) FROM t WHERE 0", 1, None),
        (
            "SELECT COUNT(*) FROM t WHERE 0",
            0,
            Some("SELECT 1 FROM DUAL WHERE 0"),
        ),
        (
            "SELECT COUNT(*) FROM t WHERE 0",
            3,
            Some("SELECT 1 UNION ALL SELECT 1 UNION ALL SELECT 1 LIMIT 3"),
        ),
        (
            "SELECT COUNT(*) FROM t WHERE 0 HAVING 1",
            1,
            Some("SELECT 1 LIMIT 1"),
        ),
        ("SELECT 1 INTO @x", 1, Some("SELECT 1 LIMIT 1")),
        ("SELECT * FROM t LIMIT 2, 1", 1, Some("SELECT 1 LIMIT 1")),
        ("INSERT INTO t SELECT * FROM u", 1, Some("SELECT 1 LIMIT 1")),
        ("CALL p()", 2, Some("SELECT 1 UNION ALL SELECT 1 LIMIT 2")),
        (
            "SHOW NEW_THING",
            2,
            Some("SELECT 1 UNION ALL SELECT 1 LIMIT 2"),
        ),
    ];
    for (sql, n, want) in rows {
        let mut st = ClientState::new(T, None);
        st.last_found_rows = *n;
        let fx = Query::new(sql.as_bytes()).effects();
        let got = st.found_rows_restore(&fx).map(|r| r.map(|(q, _)| q));
        assert_eq!(got, want.map(|w| Some(w.to_string())), "{sql} after {n}");
    }
    // Past 64 rows a recursive WITH, its SET STATEMENT variables named;
    // past RESTORE_MAX none (the count is lost).
    let fx = Query::new(b"SELECT MAX(v) FROM t").effects();
    let mut st = ClientState::new(T, None);
    st.last_found_rows = 100;
    let (q, vars) = st.found_rows_restore(&fx).flatten().expect("a restore");
    assert!(
        q.starts_with("SET STATEMENT max_recursive_iterations = 100 FOR WITH RECURSIVE")
            && q.ends_with("LIMIT 0"),
        "{q}"
    );
    assert_eq!(vars, &["max_recursive_iterations"]);
    st.last_found_rows = RESTORE_MAX + 1;
    assert_eq!(st.found_rows_restore(&fx), Some(None));
    // A session tracing its statements keeps its trace.
    st.last_found_rows = 2;
    st.set(&Setting {
        name: "optimizer_trace".into(),
        text: "SET optimizer_trace = 'enabled=on'".into(),
    });
    let (q, vars) = st.found_rows_restore(&fx).flatten().expect("a restore");
    assert!(
        q.starts_with("SET STATEMENT optimizer_trace = 'enabled=off' FOR SELECT 1"),
        "{q}"
    );
    assert_eq!(vars, &["optimizer_trace"]);
    // A connection kept for good (session mode) holds the client's own
    // count, which the relay does not follow there.
    let mut held = ClientState::new(Mode::Session, None);
    held.last_found_rows = 0;
    assert_eq!(held.found_rows_restore(&fx), None);
    // A count only the server knows, or lost: nothing to carry.
    st.found_rows_calc = true;
    assert_eq!(st.found_rows_restore(&fx), None);
    st.found_rows_calc = false;
    st.lose_found_rows(FoundRowsLost::TooBig);
    assert_eq!(st.found_rows_restore(&fx), None);
}

/// After a statement that may keep the count: asked of the server, but
/// for one row of a grouping after a count of 1 (1 either way); a lost
/// count stays lost until a SELECT sets it.
#[test]
fn a_count_a_statement_may_keep_is_the_servers() {
    let agg = Query::new(b"SELECT COUNT(*) FROM t WHERE 0").effects();
    let mut st = ClientState::new(T, None);
    st.last_found_rows = 1;
    assert_eq!(
        st.counts_after(&outcome(R::Rows(1)), &agg, Some(true)),
        FoundRowsOnConn::Mine
    );
    assert_eq!(
        st.counts_after(&outcome(R::Rows(1)), &agg, Some(false)),
        FoundRowsOnConn::Unknown
    );
    assert!(!st.found_rows_calc);
    assert_eq!(st.last_found_rows, 1);
    st.last_found_rows = 5;
    assert_eq!(
        st.counts_after(&outcome(R::Rows(1)), &agg, Some(true)),
        FoundRowsOnConn::Unknown
    );
    assert!(st.found_rows_calc, "asked");
    // VALUES keeps it; SHOW TABLES counts its rows.
    let mut st = ClientState::new(T, None);
    st.last_found_rows = 5;
    let values = Query::new(b"VALUES (1), (2)").effects();
    assert_eq!(
        st.counts_after(&outcome(R::Rows(2)), &values, Some(true)),
        FoundRowsOnConn::Unchanged
    );
    assert_eq!(st.last_found_rows, 5);
    let show = Query::new(b"SHOW TABLES").effects();
    st.counts_after(&outcome(R::Rows(3)), &show, Some(true));
    assert_eq!(st.last_found_rows, 3);
    // Lost: not asked; a SELECT's rows set it again.
    st.lose_found_rows(FoundRowsLost::TooBig);
    assert_eq!(
        st.counts_after(&outcome(R::Rows(1)), &agg, Some(false)),
        FoundRowsOnConn::Unknown
    );
    assert!(st.found_rows_lost.is_some() && !st.found_rows_calc);
    let sel = Query::new(b"SELECT * FROM t").effects();
    st.counts_after(&outcome(R::Rows(2)), &sel, Some(false));
    assert_eq!(st.found_rows_lost, None);
    assert_eq!(st.last_found_rows, 2);
    // An answer the relay gives itself (a recorded one, the cache's)
    // sets the count: the server's left on a connection is no longer it.
    st.found_rows_calc = true;
    st.answered_locally(&[], -1, Some(1));
    assert!(!st.found_rows_calc);
    assert_eq!(st.last_found_rows, 1);
}

/// When a count only the server knows is asked (`found_rows_ask`): at
/// once where the connection may go to another client after the
/// statement; later where the client keeps it (a transaction, a
/// connection kept for good); and a connection gone with it loses it.
#[test]
fn a_count_only_the_server_knows_is_asked_before_its_connection_may_go() {
    use Ask::{Later, No, Now};
    struct Case {
        rule: &'static str,
        mode: Mode,
        in_trans: bool,
        pins: &'static [Pin],
        calc: bool,
        want: Ask,
    }
    let cases = [
        Case {
            rule: "a count the relay knows is not asked",
            mode: T,
            in_trans: false,
            pins: &[],
            calc: false,
            want: No,
        },
        Case {
            rule: "not even in a transaction",
            mode: T,
            in_trans: true,
            pins: &[],
            calc: false,
            want: No,
        },
        Case {
            rule: "outside a transaction the connection goes back after the statement",
            mode: T,
            in_trans: false,
            pins: &[],
            calc: true,
            want: Now,
        },
        Case {
            rule: "a pin that a later statement may drop does not wait",
            mode: T,
            in_trans: false,
            pins: &[Pin::Diagnostics],
            calc: true,
            want: Now,
        },
        Case {
            rule: "a temporary table's pin does not wait either",
            mode: T,
            in_trans: false,
            pins: &[Pin::TemporaryTable],
            calc: true,
            want: Now,
        },
        Case {
            rule: "in a transaction the client keeps the connection until it ends",
            mode: T,
            in_trans: true,
            pins: &[],
            calc: true,
            want: Later,
        },
        Case {
            rule: "a CALL keeps the connection for good",
            mode: T,
            in_trans: false,
            pins: &[Pin::Call],
            calc: true,
            want: Later,
        },
        Case {
            rule: "a text PREPARE keeps it for good",
            mode: T,
            in_trans: false,
            pins: &[Pin::TextPrepare],
            calc: true,
            want: Later,
        },
        Case {
            rule: "session mode holds it for good",
            mode: Mode::Session,
            in_trans: false,
            pins: &[],
            calc: true,
            want: Later,
        },
    ];
    for c in cases {
        let mut st = ClientState::new(c.mode, None);
        st.in_trans = c.in_trans;
        st.pins.extend(c.pins.iter().copied());
        st.found_rows_calc = c.calc;
        assert_eq!(st.found_rows_ask(), c.want, "{}", c.rule);
        // Its connection gone (released, lost, replaced): a count only it
        // held is lost, one the relay knows stays.
        st.last_found_rows = 7;
        st.conn_gone();
        if c.calc {
            assert_eq!(
                st.found_rows_lost(),
                Some(FoundRowsLost::ConnGone),
                "{}",
                c.rule
            );
            assert_eq!(st.found_rows_ask(), No, "{}: lost, not asked", c.rule);
        } else {
            assert_eq!(st.known_found_rows(), Some(7), "{}", c.rule);
        }
    }
}

/// An OK's insert id is the client's LAST_INSERT_ID() only where the
/// statement generated it (`insert_id.rs`); where every id was written the
/// value before stands; where the text cannot tell, only the server knows
/// (asked before the connection may go, later in a transaction), and a
/// connection gone with it loses it.
#[test]
fn an_oks_insert_id_is_the_clients_only_where_it_was_generated() {
    let ok = |id: u64| Outcome {
        insert_id: id,
        ..outcome(R::Ok)
    };
    let mut st = ClientState::new(T, None);
    st.expect_insert_id(InsertId::Sets);
    let f = st.observe(&ok(5), &[]);
    assert_eq!(
        (st.last_insert_id, f.insert_id, f.insert_id_unknown),
        (5, Some(5), false)
    );
    st.expect_insert_id(InsertId::Keeps);
    let f = st.observe(&ok(500), &[]);
    assert_eq!(
        (st.last_insert_id, f.insert_id, f.insert_id_unknown),
        (5, None, false)
    );
    assert_eq!(st.insert_id_ask(), Ask::No);
    // The same value either way: nothing to ask.
    st.expect_insert_id(InsertId::Unsure);
    let f = st.observe(&ok(5), &[]);
    assert!(!f.insert_id_unknown && st.insert_id_ask() == Ask::No);
    st.expect_insert_id(InsertId::Unsure);
    let f = st.observe(&ok(600), &[]);
    assert_eq!((f.insert_id, f.insert_id_unknown), (None, true));
    assert_eq!(st.insert_id_ask(), Ask::Now);
    st.in_trans = true;
    assert_eq!(st.insert_id_ask(), Ask::Later, "in a transaction");
    st.in_trans = false;
    st.note_insert_id(5);
    assert_eq!(st.insert_id_ask(), Ask::No, "asked");
    // Gone with its connection before it was asked: lost, until an id is
    // generated.
    st.expect_insert_id(InsertId::Unsure);
    st.observe(&ok(700), &[]);
    st.conn_gone();
    assert!(st.insert_id_lost() && st.insert_id_ask() == Ask::No);
    st.expect_insert_id(InsertId::Sets);
    st.observe(&ok(8), &[]);
    assert!(!st.insert_id_lost());
    assert_eq!(st.last_insert_id, 8);
    // LAST_INSERT_ID(expr): the OK's id; where no OK carries it (a
    // SELECT's rows, LAST_INSERT_ID(0)) only the server knows.
    st.expect_insert_id(InsertId::Setter);
    st.observe(&ok(42), &[]);
    assert_eq!((st.last_insert_id, st.insert_id_ask()), (42, Ask::No));
    st.expect_insert_id(InsertId::Setter);
    let f = st.observe(&ok(0), &[]);
    assert!(f.insert_id_unknown && st.insert_id_ask() == Ask::Now);
}

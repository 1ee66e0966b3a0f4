//! Values a statement logged as text computes where it runs, which the
//! binary log does not carry: a statement that calls one would write
//! another value on the target than it wrote on the source.
//!
//! MariaDB logs such a statement's rows under `binlog_format = MIXED`
//! (checked on 10.11.19: `UUID()`, `USER()`, `CURRENT_USER()`,
//! `VERSION()`, `SYSDATE()`, `CURRENT_ROLE()`, `@@hostname` each gave
//! `Write_rows`), so their text reaches a reader only from a session
//! with `binlog_format = STATEMENT`, where the server writes it with a
//! warning and a native replica computes its own value too. What the
//! server takes as safe and logs as text in MIXED is exact here, with
//! one exception of our own making: `DATABASE()` (`SCHEMA()`) under a
//! default database the config renames, which names the new database on
//! the target. (`CONNECTION_ID()`, `RAND()`, `LAST_INSERT_ID()`, the time
//! and the session settings come with the event and are given back.)
//!
//! Read over the shared lexer's tokens, so a name inside a literal, a
//! quoted name or a comment is not a call; `db.f(` is a stored function.
//! Only statements that write rows are read (INSERT, REPLACE, UPDATE,
//! DELETE, LOAD DATA, and CREATE TABLE ... SELECT): a routine, view,
//! trigger or column default stores the call, to run later where its
//! rows are logged.

use sqlfleet_dump::lex::{lex_in, Dialect, Tok};

/// Functions the server marks unsafe for statement-based logging whose
/// value depends on where, when or by whom the statement runs.
const UNSAFE: &[&str] = &[
    "UUID",
    "UUID_SHORT",
    "SYSDATE",
    "USER",
    "SESSION_USER",
    "SYSTEM_USER",
    "CURRENT_USER",
    "CURRENT_ROLE",
    "VERSION",
    "LOAD_FILE",
    "FOUND_ROWS",
    "ROW_COUNT",
    "GET_LOCK",
    "RELEASE_LOCK",
    "RELEASE_ALL_LOCKS",
    "IS_FREE_LOCK",
    "IS_USED_LOCK",
    "MASTER_POS_WAIT",
    "MASTER_GTID_WAIT",
];

/// Session variables a statement may read that the server logs as text
/// under MIXED, giving their value with the event (checked on 10.11.19,
/// each read in an INSERT: these gave a Query event; `@@sql_mode`,
/// `@@insert_id`, `@@hostname`, `@@server_id`, `@@warning_count`,
/// `@@autocommit`, any `@@global.` one and the rest gave rows). Any other
/// read from a statement logged as text is the target's own value.
const CARRIED: &[&str] = &[
    "auto_increment_increment",
    "auto_increment_offset",
    "time_zone",
    "lc_time_names",
    "character_set_client",
    "character_set_connection",
    "character_set_server",
    "character_set_database",
    "collation_connection",
    "collation_server",
    "collation_database",
    "unique_checks",
    "foreign_key_checks",
    "check_constraint_checks",
    "sql_auto_is_null",
    "explicit_defaults_for_timestamp",
    "timestamp",
    "last_insert_id",
    "identity",
    "pseudo_thread_id",
];

/// The first call in `sql` whose value the target would compute
/// differently, with why; None when there is none (or the statement
/// writes no rows itself). `renamed_default`: the statement's default
/// database is written under another name on the target.
pub fn call(sql: &[u8], d: Dialect, renamed_default: bool) -> Option<(String, &'static str)> {
    let toks = lex_in(sql, d).toks;
    let first = toks.first().map(|t| &t.0)?;
    let from = if ["INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD"]
        .iter()
        .any(|w| first.is_word(w))
    {
        0
    } else if first.is_word("CREATE") && creates_a_table(&toks) {
        // CREATE TABLE ... SELECT: the rows come from the SELECT.
        toks.iter().position(|t| t.0.is_word("SELECT"))?
    } else {
        return None;
    };
    for (i, (t, _)) in toks.iter().enumerate().skip(from) {
        if let Tok::SysVar(scope, name) = t {
            let global = scope.as_deref() == Some("global");
            if global || !CARRIED.contains(&name.as_str()) {
                let shown = match scope {
                    Some(s) => format!("@@{s}.{name}"),
                    None => format!("@@{name}"),
                };
                return Some((
                    shown,
                    "a server setting the statement event does not carry, and the source logged the statement as text (binlog_format = STATEMENT in that session; MIXED or ROW logs its rows)",
                ));
            }
            continue;
        }
        let Tok::Word(w) = t else { continue };
        let called = toks.get(i + 1).is_some_and(|n| n.0.is_punct(b'('));
        let qualified = i > 0 && toks[i - 1].0.is_punct(b'.');
        if !called || qualified {
            continue;
        }
        if UNSAFE.contains(&w.as_str()) {
            return Some((
                format!("{w}()"),
                "its value depends on the server, session or moment it runs in, and the source logged the statement as text (binlog_format = STATEMENT in that session; MIXED or ROW logs its rows)",
            ));
        }
        if renamed_default && (w == "DATABASE" || w == "SCHEMA") {
            return Some((
                format!("{w}()"),
                "it gives the statement's default database, which the config renames: the target would write the new name",
            ));
        }
    }
    None
}

/// `CREATE [OR REPLACE] [TEMPORARY] TABLE`: not a routine, trigger or
/// event whose body holds one.
fn creates_a_table(toks: &[(Tok, std::ops::Range<usize>)]) -> bool {
    let mut k = 1;
    if toks.get(k).is_some_and(|t| t.0.is_word("OR")) {
        k += 2;
    }
    if toks.get(k).is_some_and(|t| t.0.is_word("TEMPORARY")) {
        k += 1;
    }
    toks.get(k).is_some_and(|t| t.0.is_word("TABLE"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_whose_value_is_not_in_the_binary_log() {
        let ansi = Dialect {
            ansi_quotes: true,
            ..Dialect::default()
        };
        // (statement, default renamed, dialect, the call named or None)
        let rows: &[(&str, bool, Dialect, Option<&str>)] = &[
            (
                "INSERT INTO t VALUES (UUID())",
                false,
                Dialect::default(),
                Some("UUID()"),
            ),
            (
                "insert into t values (uuid ( ))",
                false,
                Dialect::default(),
                Some("UUID()"),
            ),
            (
                "UPDATE t SET a = SYSDATE()",
                false,
                Dialect::default(),
                Some("SYSDATE()"),
            ),
            (
                "DELETE FROM t WHERE u = CURRENT_USER()",
                false,
                Dialect::default(),
                Some("CURRENT_USER()"),
            ),
            (
                "REPLACE INTO t SELECT UUID_SHORT()",
                false,
                Dialect::default(),
                Some("UUID_SHORT()"),
            ),
            (
                "LOAD DATA INFILE 'f' INTO TABLE t SET b = USER()",
                false,
                Dialect::default(),
                Some("USER()"),
            ),
            (
                "CREATE TABLE c AS SELECT UUID() AS u",
                false,
                Dialect::default(),
                Some("UUID()"),
            ),
            (
                "INSERT INTO t VALUES (DATABASE())",
                true,
                Dialect::default(),
                Some("DATABASE()"),
            ),
            (
                "INSERT INTO t VALUES (SCHEMA())",
                true,
                Dialect::default(),
                Some("SCHEMA()"),
            ),
            // The default database is its own name on the target.
            (
                "INSERT INTO t VALUES (DATABASE())",
                false,
                Dialect::default(),
                None,
            ),
            // Not calls: a literal, a quoted name, a comment, a column.
            (
                "INSERT INTO t VALUES ('UUID()')",
                false,
                Dialect::default(),
                None,
            ),
            (
                "INSERT INTO t (`uuid`) VALUES (1)",
                false,
                Dialect::default(),
                None,
            ),
            ("INSERT INTO t (\"uuid\") VALUES (1)", false, ansi, None),
            (
                "INSERT INTO t VALUES (1) /* UUID() */",
                false,
                Dialect::default(),
                None,
            ),
            ("UPDATE t SET uuid = 1", false, Dialect::default(), None),
            // A stored function of that name.
            (
                "INSERT INTO t VALUES (db.uuid())",
                false,
                Dialect::default(),
                None,
            ),
            // Given back from the event.
            (
                "INSERT INTO t VALUES (NOW(), RAND(), CONNECTION_ID(), LAST_INSERT_ID())",
                false,
                Dialect::default(),
                None,
            ),
            // Settings: those the event carries, and the others.
            ("INSERT INTO t VALUES (@@time_zone, @@session.lc_time_names, @@local.foreign_key_checks)", false, Dialect::default(), None),
            ("INSERT INTO t VALUES (@@hostname)", false, Dialect::default(), Some("@@hostname")),
            ("UPDATE t SET v = @@SESSION.sql_mode", false, Dialect::default(), Some("@@session.sql_mode")),
            ("INSERT INTO t VALUES (@@global.time_zone)", false, Dialect::default(), Some("@@global.time_zone")),
            ("INSERT INTO t VALUES ('@@hostname')", false, Dialect::default(), None),
            ("CREATE OR REPLACE TEMPORARY TABLE c SELECT SYSDATE() AS s", false, Dialect::default(), Some("SYSDATE()")),
            ("CREATE PROCEDURE p() CREATE TABLE x AS SELECT UUID()", false, Dialect::default(), None),
            // Stored to run later: the rows it writes then are logged then.
            (
                "CREATE TABLE t (u CHAR(36) DEFAULT UUID())",
                false,
                Dialect::default(),
                None,
            ),
            (
                "CREATE PROCEDURE p() INSERT INTO t VALUES (UUID())",
                false,
                Dialect::default(),
                None,
            ),
            (
                "CREATE TRIGGER g BEFORE INSERT ON t FOR EACH ROW SET NEW.u = UUID()",
                false,
                Dialect::default(),
                None,
            ),
            (
                "CREATE VIEW v AS SELECT DATABASE(), UUID()",
                true,
                Dialect::default(),
                None,
            ),
            ("", false, Dialect::default(), None),
        ];
        for (sql, renamed, d, want) in rows {
            let got = call(sql.as_bytes(), *d, *renamed).map(|(f, _)| f);
            assert_eq!(got.as_deref(), *want, "{sql}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_read_without_panic(sql in proptest::collection::vec(proptest::num::u8::ANY, 0..200), r: bool) {
            let _ = call(&sql, Dialect::default(), r);
        }
    }
}

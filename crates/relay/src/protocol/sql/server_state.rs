//! Reads of the server itself rather than of replicated data: what a
//! read/write split must not send to a replica. A replica holds the
//! primary's rows, not its variables, locks, connections or files:
//! `SELECT @@global.read_only` there says 1 where `SHOW GLOBAL VARIABLES`
//! (which goes to the primary) says OFF, `IS_FREE_LOCK('job')` says free
//! while a session holds the lock on the primary, and
//! `information_schema.PROCESSLIST` lists the replica's threads, whose ids
//! a KILL through the relay would then aim at the primary's.
//!
//! Read from the statement's tokens, with doubt on the side of the
//! primary (a wrong yes costs the replicas one read, a wrong no answers
//! for another server): every system variable not named for the session
//! (`@@global.x`, and `@@x`, which is a global-only variable's global value
//! — the relay does not keep the server's list of which are), a name
//! qualified by one of the server's own schemas, and the built-ins that
//! read server-local state.

use std::ops::Range;

use sqlfleet_dump::lex::Tok;

/// The server's own schemas: its variables, status, threads, locks,
/// accounts and logs, each server's own (`mysql` also holds local tables:
/// `gtid_slave_pos`, the logs).
const SERVER_SCHEMAS: &[&str] = &["INFORMATION_SCHEMA", "MYSQL", "PERFORMANCE_SCHEMA", "SYS"];

/// Built-ins whose answer is the server's own: user locks held by any
/// session (`IS_FREE_LOCK`, `IS_USED_LOCK`), a file on its host
/// (`LOAD_FILE`), its binary log (`BINLOG_GTID_POS`), its version
/// (`VERSION()`, as `@@version`).
const SERVER_BUILTINS: &[&str] = &[
    "BINLOG_GTID_POS",
    "IS_FREE_LOCK",
    "IS_USED_LOCK",
    "LOAD_FILE",
    "VERSION",
];

/// Whether `name` (a database) is one of the server's own schemas.
pub fn server_schema(name: &str) -> bool {
    SERVER_SCHEMAS.iter().any(|s| s.eq_ignore_ascii_case(name))
}

/// Whether the statement reads the server itself (module doc).
pub(super) fn reads_server(t: &[(Tok, Range<usize>)]) -> bool {
    t.iter().enumerate().any(|(i, (k, _))| {
        let next = t.get(i + 1).map(|x| &x.0);
        match k {
            Tok::SysVar(scope, _) => !matches!(scope.as_deref(), Some("session" | "local")),
            Tok::Word(w) => {
                (next.is_some_and(|n| n.is_punct(b'.')) && server_schema(w))
                    || (next.is_some_and(|n| n.is_punct(b'('))
                        && SERVER_BUILTINS.contains(&w.as_str()))
            }
            Tok::Quoted(q) => next.is_some_and(|n| n.is_punct(b'.')) && server_schema(q),
            _ => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_reads_the_server_itself() {
        let rows: &[(&str, bool)] = &[
            ("SELECT a FROM t WHERE id = 1", false),
            ("SELECT @@global.read_only", true),
            ("SELECT @@GLOBAL.read_only", true),
            ("SELECT @@read_only", true),
            ("SELECT @@server_id, @@hostname", true),
            ("SELECT @@global.`read_only`", true),
            ("SELECT @@`read_only`", true),
            ("SELECT @@session.sql_mode", false),
            ("SELECT @@SESSION.time_zone, @@local.autocommit", false),
            ("SELECT @@session.sql_mode, @@version", true),
            ("SELECT * FROM information_schema.PROCESSLIST", true),
            ("SELECT * FROM INFORMATION_SCHEMA.processlist", true),
            ("SELECT * FROM `information_schema`.`PROCESSLIST`", true),
            ("SELECT * FROM performance_schema.threads", true),
            ("SELECT * FROM sys.session", true),
            ("SELECT user FROM mysql.user", true),
            ("SELECT COUNT(*) FROM t JOIN mysql.gtid_slave_pos g", true),
            ("SELECT IS_FREE_LOCK('job')", true),
            ("SELECT is_used_lock('job')", true),
            ("SELECT LOAD_FILE('/etc/hostname')", true),
            ("SELECT BINLOG_GTID_POS('b.000001', 4)", true),
            ("SELECT VERSION()", true),
            // A column named like a built-in, a table named like a schema
            // but not qualifying anything, a string.
            ("SELECT version FROM t", false),
            ("SELECT a FROM mysql", false),
            ("SELECT 'information_schema.tables', '@@global.x'", false),
            ("SELECT a FROM t WHERE b = @x", false),
        ];
        for (sql, want) in rows {
            let lexed = sqlfleet_dump::lex::lex(sql.as_bytes());
            assert_eq!(reads_server(&lexed.toks), *want, "{sql}");
        }
        assert!(server_schema("information_schema") && server_schema("Sys"));
        assert!(!server_schema("shop"));
    }

    #[test]
    fn a_schema_in_double_quotes_is_a_name_under_ansi_quotes_only() {
        use sqlfleet_dump::lex::{lex_in, Dialect};
        let sql = br#"SELECT * FROM "information_schema"."PROCESSLIST""#;
        let ansi = Dialect {
            ansi_quotes: true,
            ..Dialect::default()
        };
        assert!(reads_server(&lex_in(sql, ansi).toks));
        // Without ANSI_QUOTES those are strings (and the text an error).
        assert!(!reads_server(&lex_in(sql, Dialect::default()).toks));
    }
}

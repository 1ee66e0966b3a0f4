//! Read-only servers stay read-only.
//!
//! A replica runs with `read_only = ON`, but an account with SUPER (root,
//! the sandbox's login, most DBA accounts) writes through it. A
//! `query --sandbox demo -e 'CREATE DATABASE x'` meant for "the fleet"
//! then also writes on every replica: the replica logs the statement
//! under its own server id, and with `gtid_strict_mode` its replication
//! stops at the primary's copy of it (error 1950, out-of-order GTID).
//! Even `FLUSH TABLES` or `ANALYZE TABLE`, which `read_only` never
//! refuses, leave such a transaction of the replica's own.
//!
//! So on a server that reports `@@global.read_only = ON`, a run whose
//! statements are not all known reads first makes its session read-only
//! the server's way (`tx_read_only`, `transaction_read_only` on MySQL):
//! the server itself then refuses every write and DDL (ERROR 1792), and
//! `sql_log_bin = 0` keeps the admin statements it still allows (FLUSH,
//! ANALYZE) out of the replica's binary log. `--writes-on-read-only`
//! turns this off; a statement that says so itself (`SET SESSION
//! tx_read_only = 0`, `START TRANSACTION READ WRITE`) is the user's own
//! word and runs.
//!
//! The decision is [`needs_guard`], a pure function of the statements: a
//! run of known reads costs no extra round trip (the 1,000-host SELECT
//! stays as fast), and anything not known to read only — a leading
//! comment, an executable comment, WITH (which precedes UPDATE on MySQL),
//! CALL — is guarded. A stored function called from a SELECT is the one
//! write this lets through; the guide says so.

use sqlfleet_wire::client::Client;
use sqlfleet_wire::WireError;

/// The first words of statements that only read. Anything else may write.
const READS: &[&str] = &["SELECT", "SHOW", "DESC", "DESCRIBE", "EXPLAIN", "HELP"];

/// Whether a statement can only read: its first word is one of [`READS`],
/// and it is not a locking read (FOR UPDATE takes write locks, and on a
/// read-only server it is refused like a write).
pub fn only_reads(stmt: &str) -> bool {
    let word: String = stmt
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect::<String>()
        .to_ascii_uppercase();
    let after = stmt.trim_start().get(word.len()..).unwrap_or("");
    // "SELECTX" is not SELECT: the word must end there.
    let ends =
        after.is_empty() || !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
    ends && READS.contains(&word.as_str())
        && !(word == "SELECT" && stmt.to_ascii_uppercase().contains("FOR UPDATE"))
}

/// Whether a run must make a read-only server's session read-only first.
pub fn needs_guard(statements: &[String], writes_on_read_only: bool) -> bool {
    !writes_on_read_only && !statements.iter().all(|s| only_reads(s))
}

/// What a read-only server's error means, added to it when the guard was
/// on: ERROR 1792 is the server refusing a write in a read-only session.
pub fn explain(code: u16) -> Option<&'static str> {
    (code == 1792).then_some(
        "this server is read_only, as replicas are: sqlfleet query keeps its session read-only \
         so its data cannot fork from its primary's (--writes-on-read-only writes there)",
    )
}

/// Makes the session read-only if the server is; returns whether it was.
/// An account that may not set `sql_log_bin` (ERROR 1227) keeps it: it
/// cannot write data on a read-only server anyway, and the guide says its
/// FLUSH or ANALYZE there are still logged.
pub async fn keep(conn: &mut Client) -> Result<bool, WireError> {
    let ro = conn.column("SELECT @@global.read_only").await?;
    let on = matches!(ro.first(), Some(Some(v)) if v == "1" || v.eq_ignore_ascii_case("ON"));
    if !on {
        return Ok(false);
    }
    let var = if conn.is_mariadb() {
        "tx_read_only"
    } else {
        "transaction_read_only"
    };
    conn.execute(&format!("SET SESSION {var} = 1")).await?;
    match conn.execute("SET SESSION sql_log_bin = 0").await {
        Err(WireError::Server { code: 1227, .. }) | Ok(()) => Ok(true),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_statements_are_known_reads() {
        let table: &[(&str, bool)] = &[
            ("SELECT 1", true),
            ("  select @@port", true),
            ("SHOW SLAVE STATUS", true),
            ("DESC t", true),
            ("DESCRIBE t", true),
            ("EXPLAIN SELECT 1", true),
            ("HELP 'select'", true),
            ("SELECT(1)", true),
            ("SELECT * FROM t FOR UPDATE", false),
            ("select * from t for update", false),
            ("SELECTX", false),
            ("SELECT_ME()", false),
            ("/* c */ SELECT 1", false),
            ("/*!50000 CREATE TABLE t (a int) */", false),
            ("WITH x AS (SELECT 1) SELECT * FROM x", false),
            ("CALL p()", false),
            ("INSERT INTO t VALUES (1)", false),
            ("CREATE DATABASE x", false),
            ("FLUSH TABLES", false),
            ("ANALYZE TABLE t", false),
            ("SET GLOBAL x = 1", false),
            ("DO 1", false),
            ("", false),
        ];
        for (stmt, reads) in table {
            assert_eq!(only_reads(stmt), *reads, "{stmt:?}");
        }
    }

    #[test]
    fn a_run_is_guarded_unless_all_read_or_the_user_said_so() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let table: &[(&[&str], bool, bool)] = &[
            (&["SELECT 1", "SHOW DATABASES"], false, false),
            (&["SELECT 1", "CREATE DATABASE x"], false, true),
            (&["CREATE DATABASE x"], true, false),
            (&["FLUSH TABLES"], false, true),
        ];
        for (stmts, flag, guard) in table {
            assert_eq!(needs_guard(&s(stmts), *flag), *guard, "{stmts:?} {flag}");
        }
    }

    #[test]
    fn only_the_read_only_refusal_is_explained() {
        assert!(explain(1792).is_some_and(|w| w.contains("--writes-on-read-only")));
        assert_eq!(explain(1290), None);
        assert_eq!(explain(1064), None);
    }
}

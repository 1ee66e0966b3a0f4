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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

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

/// How a host's session was set up for a run that may write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guard {
    /// As logged in: the statements only read, the user said so, or the
    /// server takes writes (and runs its cluster's share of them).
    Open,
    /// The server reports read_only: its session is read-only.
    ReadOnly,
    /// A Galera member whose cluster's writes run on `on`, another listed
    /// member: its session is read-only, so a write is applied once in
    /// the cluster, not once per member.
    Member { cluster: String, on: String },
}

/// Which listed host runs the writes of each Galera cluster: the first of
/// its members to log in. Shared by the hosts of one run.
#[derive(Debug, Default, Clone)]
pub struct Clusters(Arc<Mutex<HashMap<String, String>>>);

impl Clusters {
    /// The host that runs `cluster`'s writes, `addr` if it is the first.
    pub fn claim(&self, cluster: &str, addr: &str) -> String {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(cluster.to_string())
            .or_insert_with(|| addr.to_string())
            .clone()
    }
}

/// What a read-only session's refusal (ERROR 1792) means, added to it.
pub fn explain(code: u16, guard: &Guard) -> Option<String> {
    if code != 1792 {
        return None;
    }
    match guard {
        Guard::Open => None,
        Guard::ReadOnly => Some(
            "this server is read_only, as replicas are: sqlfleet query keeps its session \
             read-only so its data cannot fork from its primary's (--writes-on-read-only writes \
             there)"
                .into(),
        ),
        Guard::Member { cluster, on } => Some(format!(
            "this server is a member of Galera cluster {cluster}, whose writes run on {on}: the \
             cluster applies them on every member once (--writes-on-read-only runs them on each \
             host as given)"
        )),
    }
}

/// A Galera cluster's id as a member reports it; `None` outside one.
fn cluster_of(status: Option<&Option<String>>) -> Option<String> {
    match status {
        Some(Some(uuid)) if !uuid.is_empty() && uuid.bytes().any(|b| b != b'0' && b != b'-') => {
            Some(uuid.clone())
        }
        _ => None,
    }
}

/// Sets up a session for a run that may write: read-only on a server
/// that reports read_only (with `sql_log_bin = 0`: an account that may
/// not set it, ERROR 1227, keeps it — it cannot write data on a read-only
/// server anyway, and the guide says its FLUSH there is still logged), and
/// on each Galera member but the first listed of its cluster (`clusters`).
pub async fn keep(conn: &mut Client, addr: &str, clusters: &Clusters) -> Result<Guard, WireError> {
    use sqlfleet_conn::read_only::{answer_is_read_only, ASK, ASK_PLAIN, SYNTAX_ERROR};
    let ro = match conn.column(ASK).await {
        Err(WireError::Server { code, .. }) if code == SYNTAX_ERROR => {
            conn.column(ASK_PLAIN).await?
        }
        r => r?,
    };
    // No row or NULL: taken as read-only, as load and bench take it.
    let on = answer_is_read_only(ro.first().and_then(|v| v.as_deref()));
    let guard = if on {
        Guard::ReadOnly
    } else if !conn.is_mariadb() {
        return Ok(Guard::Open);
    } else {
        let uuid = conn
            .column(
                "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
                 WHERE VARIABLE_NAME = 'WSREP_CLUSTER_STATE_UUID'",
            )
            .await?;
        match cluster_of(uuid.first()) {
            None => return Ok(Guard::Open),
            Some(cluster) => match clusters.claim(&cluster, addr) {
                first if first == addr => return Ok(Guard::Open),
                other => Guard::Member { cluster, on: other },
            },
        }
    };
    let var = if conn.is_mariadb() {
        "tx_read_only"
    } else {
        "transaction_read_only"
    };
    conn.execute(&format!("SET SESSION {var} = 1")).await?;
    // Not on a Galera member: there sql_log_bin = 0 can keep what does
    // run (SET GLOBAL, FLUSH) from the cluster too.
    if guard == Guard::ReadOnly {
        match conn.execute("SET SESSION sql_log_bin = 0").await {
            Err(WireError::Server { code: 1227, .. }) | Ok(()) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(guard)
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
    fn only_a_guarded_sessions_refusal_is_explained() {
        let member = Guard::Member {
            cluster: "u-1".into(),
            on: "h1:3306".into(),
        };
        let table: &[(u16, &Guard, Option<&str>)] = &[
            (1792, &Guard::ReadOnly, Some("read_only, as replicas are")),
            (
                1792,
                &member,
                Some("Galera cluster u-1, whose writes run on h1:3306"),
            ),
            (1792, &Guard::Open, None),
            (1290, &Guard::ReadOnly, None),
            (1064, &member, None),
        ];
        for (code, guard, says) in table {
            let got = explain(*code, guard);
            match says {
                Some(w) => assert!(
                    got.as_deref()
                        .is_some_and(|g| g.contains(w) && g.contains("--writes-on-read-only")),
                    "{code} {guard:?}: {got:?}"
                ),
                None => assert_eq!(got, None, "{code} {guard:?}"),
            }
        }
    }

    #[test]
    fn the_first_member_of_a_cluster_runs_its_writes() {
        let c = Clusters::default();
        assert_eq!(c.claim("a", "h1"), "h1");
        assert_eq!(c.claim("a", "h2"), "h1");
        assert_eq!(c.claim("b", "h2"), "h2");
        assert_eq!(c.claim("a", "h1"), "h1");
    }

    #[test]
    fn a_cluster_id_is_a_non_zero_uuid() {
        let id = |s: Option<&str>| cluster_of(Some(&s.map(str::to_string)));
        assert_eq!(id(Some("a1b2-c3")), Some("a1b2-c3".into()));
        assert_eq!(id(Some("00000000-0000-0000-0000-000000000000")), None);
        assert_eq!(id(Some("")), None);
        assert_eq!(id(None), None);
        assert_eq!(cluster_of(None), None);
    }
}

//! When the server's session-variable tracker has stopped telling the
//! truth on a connection, and what mends it.
//!
//! The relay reads its sessions off the tracker (`session_track_system_variables
//! = '*'`): every OK names the variables that changed, `last_gtid` among
//! them after each logged write. MariaDB 11.4 (seen on 11.4.5; 10.11 does
//! not) loses count once a statement sets a plugin's session variable
//! (`innodb_lock_wait_timeout`, `aria_*`, `myisam_*`) by
//! `SET [SESSION] v = ...`, `SET @@session.v = ...` or `SET STATEMENT v =
//! ... FOR`: that reply names no such variable, only that the state
//! changed (or a stale `last_gtid`), and on a connection that had not
//! reported a `last_gtid` before, no write's `last_gtid` is reported
//! again — a client's read-your-writes wait and its own `@@last_gtid`
//! went stale with nothing said. Later reports can name another variable
//! than the one that changed. Setting `session_track_system_variables`
//! again starts the tracker afresh (checked on 11.4.5: every write's
//! `last_gtid` after it).
//!
//! Its `last_gtid` is one slot with the variables that have no place of
//! their own in the session (`insert_id`, `last_insert_id`, `identity`,
//! `rand_seed1`, `rand_seed2`, `timestamp`): on a connection that had not
//! logged a write, the first of them set names the slot, and every later
//! write reports that variable (`timestamp = <now>`, `insert_id = 5`)
//! instead of its `last_gtid`.
//!
//! The signs, whatever the server and the variable: the statement's text
//! set variables and the reply says the state changed without naming
//! each of them; or the reply names one of those slot-sharing variables
//! ([`STAND_INS`]) the text did not set. Then the connection's tracker is
//! re-armed ([`REARM`]) before it serves another statement, and what the
//! reply said of
//! `last_gtid` is not taken (the server is asked). A variable reported
//! under another name (an alias: `long_query_time` as
//! `log_slow_query_time`) re-arms too, needlessly and harmlessly.
//! `SET @@v = ...` (no scope) is reported by neither version, with no
//! state change either, and leaves the tracker whole: no sign, no re-arm.

use crate::protocol::track::Change;

/// Starts the server's variable tracker afresh (the relay's own
/// tracking, as [`crate::backend::dial::track_sessions`] set it).
pub const REARM: &str = "session_track_system_variables = '*'";

/// The variables MariaDB 11.4's tracker reports in `last_gtid`'s place.
pub const STAND_INS: [&str; 6] = [
    "insert_id",
    "last_insert_id",
    "identity",
    "rand_seed1",
    "rand_seed2",
    "timestamp",
];

/// Whether a reply's `changes` show that the tracker lost count: of the
/// variables `set` the statement's text set (by name, any case), or of
/// `last_gtid`, named for a variable the text did not set. (Stored code
/// setting such a variable shows the same sign: a re-arm, harmless.)
pub fn lost<S: AsRef<str>>(set: impl Iterator<Item = S> + Clone, changes: &[Change]) -> bool {
    if changes.is_empty() {
        return false;
    }
    let named = |v: &str| {
        changes
            .iter()
            .any(|c| matches!(c, Change::SysVar(n, _) if n.eq_ignore_ascii_case(v)))
    };
    let was_set = |n: &str| set.clone().any(|v| v.as_ref().eq_ignore_ascii_case(n));
    let stand_in = changes.iter().any(
        |c| matches!(c, Change::SysVar(n, _) if STAND_INS.contains(&n.as_str()) && !was_set(n)),
    );
    stand_in || (changes.contains(&Change::State) && set.clone().any(|v| !named(v.as_ref())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(n: &str, v: &str) -> Change {
        Change::SysVar(n.into(), v.into())
    }

    /// (what the text set, what the reply reported, lost)
    #[test]
    fn a_reply_that_does_not_name_what_was_set_is_a_lost_tracker() {
        let cases: Vec<(&str, Vec<&str>, Vec<Change>, bool)> = vec![
            (
                "10.11: SET innodb_lock_wait_timeout = 51",
                vec!["innodb_lock_wait_timeout"],
                vec![var("innodb_lock_wait_timeout", "51"), Change::State],
                false,
            ),
            (
                "11.4.5, a connection that never wrote: only the state",
                vec!["innodb_lock_wait_timeout"],
                vec![Change::State],
                true,
            ),
            (
                "11.4.5, a connection that wrote: a stale last_gtid",
                vec!["innodb_lock_wait_timeout"],
                vec![var("last_gtid", "7-701-450"), Change::State],
                true,
            ),
            (
                "11.4.5: SET STATEMENT aria_sort_buffer_size = .. FOR SELECT 1",
                vec!["aria_sort_buffer_size"],
                vec![Change::State],
                true,
            ),
            (
                "10.11: SET STATEMENT max_statement_time = 5 FOR SELECT 1",
                vec!["max_statement_time"],
                vec![var("max_statement_time", "5.000000"), Change::State],
                false,
            ),
            (
                "any case: the server's own spelling",
                vec!["wsrep_osu_method"],
                vec![var("wsrep_OSU_method", "TOI"), Change::State],
                false,
            ),
            (
                "11.4: an alias reported under its other name",
                vec!["long_query_time"],
                vec![var("log_slow_query_time", "10.000000"), Change::State],
                true,
            ),
            (
                "two set, one named",
                vec!["time_zone", "innodb_strict_mode"],
                vec![var("time_zone", "+01:00"), Change::State],
                true,
            ),
            (
                "SET @@v = .. (no scope): neither version reports it, nor a state change",
                vec!["sql_mode"],
                vec![],
                false,
            ),
            (
                "11.4.5, after SET insert_id on a connection that never wrote: a write's reply",
                vec![],
                vec![var("insert_id", "5")],
                true,
            ),
            (
                "11.4.5, after SET timestamp likewise: the clock in last_gtid's place",
                vec![],
                vec![var("timestamp", "1796606624.416124")],
                true,
            ),
            (
                "SET timestamp = 5: its own report",
                vec!["timestamp"],
                vec![var("timestamp", "5.000000"), Change::State],
                false,
            ),
            (
                "nothing set: a state change is another matter",
                vec![],
                vec![Change::State],
                false,
            ),
            (
                "a USE: its schema, no variable set",
                vec![],
                vec![Change::Schema("db".into()), Change::State],
                false,
            ),
        ];
        for (what, set, changes, want) in cases {
            assert_eq!(lost(set.iter(), &changes), want, "{what}");
        }
    }
}

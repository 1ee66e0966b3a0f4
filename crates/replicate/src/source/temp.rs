//! Temporary tables of statement-based binlogs (MIXED, MariaDB's default,
//! and STATEMENT): a temporary table lives in the one source session that
//! made it, so each source session (its pseudo thread id) that makes one
//! gets a target connection of its own, where its transactions run — as a
//! replica's SQL thread keeps the tables per pseudo thread. Which
//! transactions those are the server says, not the text: it flags a
//! statement that uses a temporary table (or CONNECTION_ID(), or one of
//! its own internal ones) thread-specific (`txn::Temp`).
//!
//! Fail closed: the names each session has open are recorded with the
//! positions of the transaction that made or dropped them
//! (`sqlfleet.replicate_temp`), so after a restart of sqlfleet or of the
//! target — which loses them, as a replica's restart does — a session's
//! later use of them stops its streams with the reason instead of running
//! against whatever else carries the name. Not seen: a temporary table
//! made before the run's start position (a replica started there has the
//! same blind spot): its use fails on the target, or reads a base table of
//! its name. [`route`] decides (table tests below);
//! `SourceRunner::apply_in_session` applies.

use std::collections::{BTreeMap, BTreeSet};

use super::{Session, SourceRunner};
use crate::apply::Applier;
use crate::position::{forget_temp_sql as forget_sql, temp_sql, TempTables};
use crate::sqltext;
use crate::txn::{Item, Temp, Txn};
use crate::work::ApplyError;

/// Where a transaction runs, as far as temporary tables go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Route {
    /// As any other, without the drops of temporary tables its session
    /// never made on the target.
    Normal,
    /// On its source session's own connection.
    Session(u32),
    /// It cannot be applied exactly.
    Refuse(String),
}

/// At most this many source sessions hold temporary tables on the target
/// at once (each holds a target connection): one more stops its streams
/// with the reason rather than take the target's connections.
pub(super) const MAX_SESSIONS: usize = 64;

/// The source sessions with temporary tables on the target.
#[derive(Default)]
pub(super) struct Sessions {
    /// Per source session: its connection and the tables open on it.
    open: BTreeMap<u32, (Applier, BTreeSet<(String, String)>)>,
    /// Sessions whose tables were made on a connection that is gone.
    lost: TempTables,
}

/// Where `t`'s transaction runs, given the sessions with tables open on
/// the target (`open`) and those whose tables are gone (`lost`);
/// `mentions` says whether its text names a table (the server flags a
/// statement thread-specific for its own internal temporary tables too —
/// a multi-table DELETE, a derived table — so the flag alone does not say
/// a session's table is used).
pub(super) fn route(
    t: &Temp,
    mentions: &dyn Fn(&str) -> bool,
    open: &BTreeSet<u32>,
    lost: &TempTables,
) -> Route {
    let Some(p) = t.thread else {
        return Route::Normal;
    };
    if open.contains(&p) {
        return Route::Session(p);
    }
    if let Some(names) = lost.get(&p) {
        let used = t.uses && names.iter().any(|(_, n)| mentions(n));
        if used || !t.created.is_empty() {
            let names: Vec<String> = names.iter().map(|(d, n)| format!("{d}.{n}")).collect();
            return Route::Refuse(format!(
                "source session {p} goes on with temporary tables ({}) made on a target connection that is gone (sqlfleet or the target restarted since; a replica loses them the same way)",
                names.join(", ")
            ));
        }
    }
    if !t.created.is_empty() {
        if open.len() >= MAX_SESSIONS {
            return Route::Refuse(format!(
                "source session {p} makes a temporary table while {MAX_SESSIONS} other sessions hold theirs on the target (each on a target connection of its own; sqlfleet opens no more)"
            ));
        }
        return Route::Session(p);
    }
    // No table of its session's on the target (only drops of tables never
    // made here, CONNECTION_ID(), the server's internal tables).
    Route::Normal
}

/// How long a stop waits for source sessions to drop the temporary tables
/// they hold on the target.
pub(super) const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// What a stop request does with the sessions that hold temporary tables
/// on the target: their tables live on this process's connections, so a
/// stop with any open loses them, and those sessions' later statements
/// stop their streams after the restart (as on a replica stopped with
/// `Slave_open_temp_tables` above 0). So a stop applies on until none is
/// open, for at most [`STOP_WAIT`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum AtStop {
    /// None open: stop.
    Now,
    /// Apply on: sessions hold tables and the wait is not over.
    Wait,
    /// The wait is over: stop, losing these sessions' tables.
    Losing(Vec<u32>),
}

/// [`AtStop`] for the sessions `open`, `waited` after the stop came.
pub(super) fn at_stop(open: &BTreeSet<u32>, waited: std::time::Duration) -> AtStop {
    if open.is_empty() {
        AtStop::Now
    } else if waited < STOP_WAIT {
        AtStop::Wait
    } else {
        AtStop::Losing(open.iter().copied().collect())
    }
}

impl SourceRunner {
    /// The source started again (its binlog says so): every session of it
    /// before has ended, its temporary tables with it — as a replica drops
    /// its own then. Their connections close and their record goes.
    pub(super) async fn source_started(&self, temp: &mut Sessions, ctl: &mut Applier) {
        if temp.open.is_empty() && temp.lost.is_empty() {
            return;
        }
        temp.open.clear();
        temp.lost.clear();
        let _ = ctl.run(&forget_sql(&self.cfg.name)).await;
    }
}

/// Whether a statement of `txn` names `table` (any identifier, any case).
pub(super) fn mentions(txn: &Txn, table: &str) -> bool {
    txn.items.iter().any(|i| match i {
        Item::Stmt(s) => sqltext::names_identifier(&s.sql, s.session.ctx.dialect(), table),
        Item::Rows(_) => false,
    })
}

impl Sessions {
    /// The sessions with tables open on the target.
    pub(super) fn open(&self) -> BTreeSet<u32> {
        self.open.keys().copied().collect()
    }

    pub(super) fn lost(&self) -> &TempTables {
        &self.lost
    }

    /// What the target recorded, read at a reading session's start: a
    /// session recorded there whose connection this process does not hold
    /// lost its tables.
    pub(super) fn recorded(&mut self, stored: &TempTables) {
        self.lost = stored
            .iter()
            .filter(|(p, _)| !self.open.contains_key(p))
            .map(|(p, n)| (*p, n.clone()))
            .collect();
    }

    /// A transaction routed [`Route::Normal`] dropped tables of a session
    /// whose tables are gone: those are no longer in use. When none of it
    /// remains: the statement that deletes `source`'s record of it.
    pub(super) fn forget_dropped(&mut self, source: &str, t: &Temp) -> Option<String> {
        let p = t.thread?;
        let names = self.lost.get_mut(&p)?;
        for d in &t.dropped {
            names.remove(d);
        }
        if !names.is_empty() {
            return None;
        }
        self.lost.remove(&p);
        Some(temp_sql(source, p, &BTreeSet::new()))
    }
}

/// The transaction without the drops of temporary tables (run only in
/// their session's connection; elsewhere there is nothing to drop).
/// Nothing else left: nothing of it is applied (as a filtered statement).
pub(super) fn without_drops(txn: &mut Txn) {
    if txn.temp.dropped.is_empty() {
        return;
    }
    let before = txn.items.len();
    txn.items.retain(|i| match i {
        Item::Stmt(s) => sqltext::dropped_temporary(&s.sql, s.session.ctx.dialect()).is_none(),
        Item::Rows(_) => true,
    });
    if txn.items.is_empty() && before > 0 {
        txn.dbs.clear();
    }
}

impl SourceRunner {
    /// Applies `txn` on source session `p`'s own connection (opened for
    /// its first temporary table) with its positions and the session's
    /// tables as they are after it; the connection goes once none is
    /// left. A lost connection loses the session's tables.
    pub(super) async fn apply_in_session(
        &self,
        s: &mut Session,
        temp: &mut Sessions,
        p: u32,
        txn: &Txn,
    ) -> Result<(), ApplyError> {
        let (mut conn, had) = match temp.open.remove(&p) {
            Some(x) => x,
            None => (Applier::open(&self.target).await?, BTreeSet::new()),
        };
        let mut now = had.clone();
        now.extend(txn.temp.created.iter().cloned());
        for d in &txn.temp.dropped {
            now.remove(d);
        }
        let name = self.cfg.name.as_str();
        let r = async {
            conn.prime(&s.format).await?;
            conn.galera_guard(txn, &txn.items).await?;
            // (A transaction that makes its own temporary table runs here
            // again after a restart: marked like any other.)
            let nontx = self.mark_if_nontx(&mut conn, &mut s.engines, txn).await?;
            conn.begin().await?;
            conn.items_as_ended(txn).await?;
            if nontx {
                sqlfleet_faults::point_of!("replicate::nontx_before_commit", name);
            }
            let streams: Vec<(&str, &str, &Txn)> =
                txn.dbs.iter().map(|d| (name, d.as_str(), txn)).collect();
            conn.commit_with_positions(&streams, &[temp_sql(name, p, &now)])
                .await
        }
        .await;
        match r {
            Ok(()) => {
                if !now.is_empty() {
                    temp.open.insert(p, (conn, now));
                }
                Ok(())
            }
            Err(ApplyError::Sql { .. }) => {
                conn.rollback().await;
                if !had.is_empty() {
                    temp.open.insert(p, (conn, had));
                }
                r
            }
            Err(lost) => {
                if !had.is_empty() {
                    temp.lost.insert(p, had);
                }
                Err(lost)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(t: &str) -> (String, String) {
        ("app".to_string(), t.to_string())
    }

    #[test]
    fn a_stop_waits_for_open_temporary_tables_for_a_while() {
        use std::time::Duration;
        let none = BTreeSet::new();
        let two: BTreeSet<u32> = [13, 4].into_iter().collect();
        let cases = [
            (&none, Duration::ZERO, AtStop::Now),
            (&none, STOP_WAIT * 2, AtStop::Now),
            (&two, Duration::ZERO, AtStop::Wait),
            (&two, STOP_WAIT - Duration::from_millis(1), AtStop::Wait),
            (&two, STOP_WAIT, AtStop::Losing(vec![4, 13])),
        ];
        for (open, waited, want) in cases {
            assert_eq!(at_stop(open, waited), want, "{open:?} after {waited:?}");
        }
    }

    /// One row per case: the transaction's marks, the sessions open and
    /// lost, where it runs.
    #[test]
    fn a_session_s_temporary_tables_decide_where_its_work_runs() {
        let mk = |thread: Option<u32>, created: &[&str], dropped: &[&str], uses| Temp {
            thread,
            created: created.iter().map(|t| n(t)).collect(),
            dropped: dropped.iter().map(|t| n(t)).collect(),
            uses,
        };
        let open: BTreeSet<u32> = [7].into_iter().collect();
        let lost: TempTables = [(9, [n("old")].into_iter().collect())]
            .into_iter()
            .collect();
        let names_old = |t: &str| t == "old";
        let names_other = |t: &str| t == "other";
        // Ok: the route; Err: a refusal that says this.
        type Case<'a> = (
            &'a str,
            Temp,
            &'a dyn Fn(&str) -> bool,
            Result<Route, &'a str>,
        );
        let cases: Vec<Case> = vec![
            (
                "not thread-specific",
                mk(None, &[], &[], false),
                &names_old,
                Ok(Route::Normal),
            ),
            (
                "an open session's use",
                mk(Some(7), &[], &[], true),
                &names_other,
                Ok(Route::Session(7)),
            ),
            (
                "an open session's drop",
                mk(Some(7), &[], &["t"], false),
                &names_other,
                Ok(Route::Session(7)),
            ),
            (
                "a new session's first table",
                mk(Some(3), &["t"], &[], false),
                &names_other,
                Ok(Route::Session(3)),
            ),
            (
                "an internal table or CONNECTION_ID()",
                mk(Some(3), &[], &[], true),
                &names_other,
                Ok(Route::Normal),
            ),
            (
                "a drop of a table never made here",
                mk(Some(3), &[], &["t"], false),
                &names_other,
                Ok(Route::Normal),
            ),
            (
                "a lost session's use of its table",
                mk(Some(9), &[], &[], true),
                &names_old,
                Err("app.old"),
            ),
            (
                "a lost session's statement naming none",
                mk(Some(9), &[], &[], true),
                &names_other,
                Ok(Route::Normal),
            ),
            (
                "a lost session's new table",
                mk(Some(9), &["t"], &[], false),
                &names_other,
                Err("gone"),
            ),
            (
                "a lost session's drop",
                mk(Some(9), &[], &["old"], false),
                &names_old,
                Ok(Route::Normal),
            ),
        ];
        for (what, t, mentions, want) in cases {
            let r = route(&t, mentions, &open, &lost);
            match (&r, want) {
                (Route::Refuse(w), Err(says)) => assert!(w.contains(says), "{what}: {w}"),
                (r, Ok(want)) => assert_eq!(*r, want, "{what}"),
                (r, Err(_)) => panic!("{what}: {r:?}, not refused"),
            }
        }
        // The bound: a new session's first table when the target holds
        // the most sessions already; an open one goes on.
        let full: BTreeSet<u32> = (100..100 + MAX_SESSIONS as u32).collect();
        match route(&mk(Some(3), &["t"], &[], false), &names_other, &full, &lost) {
            Route::Refuse(w) => assert!(w.contains("64 other sessions"), "{w}"),
            r => panic!("{r:?}"),
        }
        assert_eq!(
            route(
                &mk(Some(100), &["t"], &[], true),
                &names_other,
                &full,
                &lost
            ),
            Route::Session(100)
        );
    }

    #[test]
    fn a_lost_session_is_forgotten_once_its_tables_are_dropped() {
        let mut s = Sessions::default();
        let stored: TempTables = [(9, [n("a"), n("b")].into_iter().collect())]
            .into_iter()
            .collect();
        s.recorded(&stored);
        let drop = |t: &str| Temp {
            thread: Some(9),
            dropped: vec![n(t)],
            ..Temp::default()
        };
        assert_eq!(s.forget_dropped("src", &drop("a")), None);
        assert!(s.lost().contains_key(&9));
        let gone = s.forget_dropped("src", &drop("b")).expect("record goes");
        assert!(
            gone.starts_with("DELETE FROM sqlfleet.replicate_temp"),
            "{gone}"
        );
        assert!(s.lost().is_empty());
    }
}

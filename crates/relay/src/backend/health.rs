//! Health checks: one connection per backend asks, every interval, whether
//! the server is writable, how far its replication is behind and which
//! GTIDs it has applied, and, on a Galera node, its `wsrep_%` state
//! (`routing::galera` decides what that allows). A backend failing checks
//! is marked down and checked again with growing back-off until it answers.
//!
//! A check that gets no answer within [`CHECK_TIMEOUT`] marks the backend
//! down, and whatever waits on it gives up ([`Health::gone`]): a server
//! that stops answering (SIGSTOP, a hung host, a stalled TCP peer) costs
//! only the statements that were on it, for about that long, never the
//! clients on other backends (ProxySQL's monitor does the same to a
//! server that misses its pings).

use std::sync::Mutex;
use std::time::Duration;

use futures_util::FutureExt;
use serde::Serialize;

use crate::backend::command::{query_row, query_rows};
use crate::backend::dial::{Dialer, Login, Shape};
use crate::config::{Backend, RelayConfig};
use crate::routing::defaults::{self, Defaults};
use crate::routing::galera::Wsrep;

/// What the last check of a backend found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct State {
    /// At least one check has completed.
    pub checked: bool,
    pub up: bool,
    pub read_only: bool,
    /// Replication threads running (replicas).
    pub replicating: bool,
    /// Seconds_Behind_Master.
    pub lag: Option<u64>,
    /// @@gtid_current_pos.
    pub gtid: String,
    /// @@global.sql_mode: how a new session reads text (`session::dialect`).
    pub sql_mode: Option<String>,
    /// @@global.autocommit: what a new session starts with.
    pub autocommit: bool,
    /// @@global.init_connect is set: a new session of an account without
    /// CONNECTION ADMIN runs it after its login, which may change what it
    /// starts with (its autocommit among the rest).
    pub init_connect: bool,
    /// A Galera node's state (`wsrep_on` is ON).
    pub galera: Option<Wsrep>,
    pub error: Option<String>,
    pub failures: u32,
    /// When it was last found down (None while up).
    #[serde(skip)]
    pub down_since: Option<std::time::SystemTime>,
    /// Why its replication could not be read (the relay's account lacks
    /// the privilege): it then counts as not replicating.
    pub replication_unread: Option<String>,
    /// Its replication filters (`Replicate_Do_DB: shop`, ...) when it
    /// has any: it holds only part of the primary's data.
    pub replication_filters: Option<String>,
    /// What its new sessions read with (`routing::defaults`).
    #[serde(skip)]
    pub defaults: Defaults,
    /// Why a read on it would answer otherwise than on the primary (its
    /// sessions' settings differ): it then gets no reads.
    pub reads_unlike_primary: Option<String>,
}

pub use crate::routing::pick::Brief;

impl State {
    /// The role the relay gives it (a Galera node's writer or reader role
    /// is the pool's choice; here it is a member or excluded).
    pub fn role(&self) -> &'static str {
        match (self.up, &self.galera, self.read_only) {
            (false, _, _) => "down",
            (true, Some(w), _) if w.excluded().is_some() => "excluded",
            (true, Some(_), _) => "member",
            (true, None, false) => "primary",
            (true, None, true) => "replica",
        }
    }
}

/// What a client's new session starts with, as far as the relay knows
/// before the server's first reply says it: its autocommit, and whether
/// that is sure. A read under autocommit=0 opens a transaction, so a
/// client whose autocommit is not sure reads on the primary until a reply
/// tells it (`ClientState::may_read_elsewhere`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fresh {
    pub autocommit: bool,
    pub sure: bool,
}

/// What a backend's last check found of its new sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Start {
    pub checked: bool,
    pub up: bool,
    pub autocommit: bool,
    pub init_connect: bool,
}

/// A new session's start on the backends `states` (those checked and up):
/// autocommit when every one has @@global.autocommit on (what the relay
/// tells a client at login, as the server's own login OK does); sure when
/// they agree and none runs an init_connect (which the server runs after
/// that OK). Nothing checked yet: autocommit, not sure.
pub fn fresh_sessions(states: &[Start]) -> Fresh {
    let seen: Vec<&Start> = states.iter().filter(|s| s.checked && s.up).collect();
    let on = seen.iter().filter(|s| s.autocommit).count();
    Fresh {
        autocommit: on == seen.len(),
        sure: !seen.is_empty()
            && (on == 0 || on == seen.len())
            && !seen.iter().any(|s| s.init_connect),
    }
}

/// How long a check may take before the backend counts as not answering.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

pub struct Health {
    states: Vec<Mutex<State>>,
    /// Woken when a backend goes from up to down.
    downs: Vec<tokio::sync::Notify>,
    /// Each backend's address, for the log line of a state change.
    addrs: Vec<String>,
    /// A Galera cluster's writer as the pool last chose it (usize::MAX:
    /// none): the node whose sessions the others' are judged against.
    galera_writer: std::sync::atomic::AtomicUsize,
}

impl Health {
    pub fn new(addrs: Vec<String>) -> Health {
        Health {
            states: addrs.iter().map(|_| Mutex::new(State::default())).collect(),
            downs: addrs.iter().map(|_| tokio::sync::Notify::new()).collect(),
            addrs,
            galera_writer: std::sync::atomic::AtomicUsize::new(usize::MAX),
        }
    }

    /// What a new session starts with on every backend checked so far
    /// ([`fresh_sessions`]; asked at each login: no copy of the states).
    pub fn fresh_sessions(&self) -> Fresh {
        let starts: Vec<Start> = self
            .states
            .iter()
            .map(|m| {
                let s = m.lock().unwrap_or_else(|e| e.into_inner());
                Start {
                    checked: s.checked,
                    up: s.up,
                    autocommit: s.autocommit,
                    init_connect: s.init_connect,
                }
            })
            .collect();
        fresh_sessions(&starts)
    }

    /// The global sql_mode a backend's last check read (the first one's
    /// that was checked: backends of one relay share a configuration);
    /// `None` before any check.
    pub fn sql_mode(&self) -> Option<String> {
        self.states
            .iter()
            .find_map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).sql_mode.clone())
    }

    pub fn get(&self, i: usize) -> State {
        self.states[i]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Backend `i`'s role now (a lock, no copy: asked per statement).
    pub fn role(&self, i: usize) -> &'static str {
        self.states[i]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .role()
    }

    /// Whether every backend's first check has ended.
    pub fn all_checked(&self) -> bool {
        self.states
            .iter()
            .all(|m| m.lock().unwrap_or_else(|e| e.into_inner()).checked)
    }

    pub fn all(&self) -> Vec<State> {
        (0..self.states.len()).map(|i| self.get(i)).collect()
    }

    /// The routing view of every backend.
    pub fn briefs(&self) -> Vec<Brief> {
        self.states
            .iter()
            .map(|m| {
                let s = m.lock().unwrap_or_else(|e| e.into_inner());
                Brief {
                    checked: s.checked,
                    up: s.up,
                    read_only: s.read_only,
                    replicating: s.replicating,
                    lag: s.lag,
                    galera: s.galera.as_ref().map(|w| w.excluded().is_none()),
                    galera_queue: s.galera.as_ref().map_or(0, |w| w.recv_queue),
                    reads_unlike_primary: s.reads_unlike_primary.is_some(),
                    filtered: s.replication_filters.is_some(),
                }
            })
            .collect()
    }

    /// The Galera writer the pool chose (`None`: none), whose sessions the
    /// other nodes' are judged against.
    pub fn note_galera_writer(&self, w: Option<usize>) {
        use std::sync::atomic::Ordering::Relaxed;
        self.galera_writer.store(w.unwrap_or(usize::MAX), Relaxed);
    }

    /// Judges each backend's new sessions against the primary's — on a
    /// Galera cluster, the writer's: the pool's choice, or before its
    /// first pick the one it would choose (`galera::writer`) — with
    /// `defaults::unlike`, and keeps why a read there would answer
    /// otherwise; returns the backends whose judgement changed. Without
    /// one writable, checked primary (or a Galera writer) nothing is
    /// judged and every judgement stands.
    pub fn compare_defaults(&self, may_differ: &[String]) -> Vec<(usize, Option<String>)> {
        use std::sync::atomic::Ordering::Relaxed;
        let states: Vec<State> = (0..self.states.len()).map(|i| self.get(i)).collect();
        let galera = states.iter().any(|s| s.galera.is_some());
        let primaries: Vec<usize> = if galera {
            let noted = self.galera_writer.load(Relaxed);
            let w = if noted == usize::MAX {
                crate::routing::pick::galera_writer(None, &self.briefs())
                    .flatten()
                    .unwrap_or(usize::MAX)
            } else {
                noted
            };
            states
                .get(w)
                .filter(|s| s.checked && s.up)
                .map(|_| vec![w])
                .unwrap_or_default()
        } else {
            (0..states.len())
                .filter(|&i| {
                    let s = &states[i];
                    s.checked && s.up && !s.read_only
                })
                .collect()
        };
        let [p] = primaries.as_slice() else {
            return Vec::new();
        };
        let mut changed = Vec::new();
        for (j, s) in states.iter().enumerate() {
            if j == *p || !s.checked || !s.up {
                continue;
            }
            let why = defaults::unlike(&states[*p].defaults, &s.defaults, may_differ);
            if why != s.reads_unlike_primary {
                self.set(j, |x| x.reads_unlike_primary = why.clone());
                changed.push((j, why));
            }
        }
        // The primary itself reads as the primary.
        if states[*p].reads_unlike_primary.is_some() {
            self.set(*p, |x| x.reads_unlike_primary = None);
        }
        changed
    }

    fn set(&self, i: usize, f: impl FnOnce(&mut State)) {
        let went_down = {
            let mut s = self.states[i].lock().unwrap_or_else(|e| e.into_inner());
            let was_up = s.up;
            let since = s.down_since;
            f(&mut s);
            // Down since the first check or client that found it so.
            s.down_since = match (s.up, since) {
                (true, _) => None,
                (false, Some(t)) if !was_up => Some(t),
                (false, _) => Some(std::time::SystemTime::now()),
            };
            was_up && !s.up
        };
        if went_down {
            self.downs[i].notify_waiters();
        }
    }

    fn is_up(&self, i: usize) -> bool {
        self.states[i].lock().unwrap_or_else(|e| e.into_inner()).up
    }

    /// Resolves when backend `i` is found not answering, for whatever
    /// waits on it to give up: when a check (or a client) marks it down;
    /// if it is down already, after the time a check gets
    /// ([`CHECK_TIMEOUT`]) when it is still down then. Never, for a
    /// backend that stays up.
    pub async fn gone(&self, i: usize) {
        let Some(downs) = self.downs.get(i) else {
            return std::future::pending().await;
        };
        loop {
            // Registered before the look, so a change in between wakes it.
            let woken = downs.notified();
            if !self.is_up(i) {
                tokio::time::sleep(CHECK_TIMEOUT).await;
                if !self.is_up(i) {
                    return;
                }
                continue;
            }
            // Went down while it waited: give up now.
            woken.await;
            return;
        }
    }

    /// `work` on backend `i`, or `None` when the backend is found not
    /// answering first (`gone`); `work` is dropped then, with the
    /// connection it used.
    pub async fn unless_gone<T>(
        &self,
        i: usize,
        work: impl std::future::Future<Output = T>,
    ) -> Option<T> {
        tokio::select! {
            r = work => Some(r),
            _ = self.gone(i) => None,
        }
    }

    /// A client found the backend dead before the next check did: the
    /// change is logged here, once (the check that follows sees it down
    /// already and says nothing until it is up again).
    pub fn mark_down(&self, i: usize, why: &str) {
        let mut from = None;
        self.set(i, |s| {
            if s.up {
                from = Some(s.role());
            }
            s.up = false;
            s.error = Some(why.to_string());
        });
        if let (Some(from), Some(addr)) = (from, self.addrs.get(i)) {
            crate::admin::log::backend_role(addr, from, "down", Some(why));
        }
    }
}

async fn check(dialer: &Dialer, b: &Backend, conn: &mut Option<Login>) -> Result<State, String> {
    if conn.is_none() {
        let shape = Shape {
            caps: 0,
            collation: 45,
            ext: 0,
        };
        *conn = Some(
            dialer
                .login(b, shape, None)
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    let Some(c) = conn.as_mut() else {
        return Err("no connection".into());
    };
    let first = query_row(
        c,
        "SELECT @@read_only AS ro, @@gtid_current_pos AS gtid, @@global.sql_mode AS mode, \
         @@global.autocommit AS ac, @@global.init_connect <> '' AS ic",
    )
    .await
    .map_err(|e| e.to_string())?
    .ok_or("no row")?;
    let get = |r: &[(String, Option<String>)], col: &str| -> String {
        r.iter()
            .find(|(n, _)| n == col)
            .and_then(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let ro: i64 = get(&first, "ro").parse().map_err(|_| "bad @@read_only")?;
    let gtid = get(&first, "gtid");
    // (What a new session starts with decides where its reads go: a value
    // not read as 0 or 1 fails the check rather than be guessed.)
    let flag = |col: &str, what: &str| match get(&first, col).as_str() {
        "1" => Ok(true),
        "0" => Ok(false),
        other => Err(format!("bad {what}: {other:?}")),
    };
    let autocommit = flag("ac", "@@global.autocommit")?;
    let init_connect = flag("ic", "@@global.init_connect <> ''")?;
    let sql_mode = first
        .iter()
        .find(|(n, _)| n == "mode")
        .and_then(|(_, v)| v.clone());
    // An account that may not read replication status (no SLAVE MONITOR)
    // leaves the server up with its replication unknown: counted as not
    // replicating (so no read that needs a replica's lag goes to it) and
    // said, never a healthy server marked down at every check.
    let mut replication_unread = None;
    let row = match query_row(c, "SHOW SLAVE STATUS").await {
        Ok(row) => row,
        Err(e @ sqlfleet_wire::packet::WireError::Server { code: 1227, .. }) => {
            replication_unread = Some(format!(
                "the relay's account cannot read replication status (SHOW SLAVE STATUS: {e}): \
                 grant it SLAVE MONITOR (REPLICATION CLIENT before MariaDB 10.5); until then \
                 the server counts as not replicating"
            ));
            None
        }
        Err(e) => return Err(e.to_string()),
    };
    let text = |r: &Vec<(String, Option<String>)>, col: &str| get(r, col);
    let replication_filters = row.as_ref().and_then(|r| filters(r));
    let (replicating, lag) = match &row {
        Some(r) => (
            text(r, "Slave_IO_Running") == "Yes" && text(r, "Slave_SQL_Running") == "Yes",
            text(r, "Seconds_Behind_Master").parse().ok(),
        ),
        None => (false, None),
    };
    // One read of the globals: a Galera node's switches and what a new
    // session reads with.
    let names: Vec<String> = ["wsrep_on", "wsrep_desync", "wsrep_reject_queries"]
        .iter()
        .chain(defaults::READ_DEFAULTS)
        .map(|n| format!("'{n}'"))
        .collect();
    let vars = query_rows(
        c,
        &format!(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN ({})",
            names.join(", ")
        ),
        64,
    )
    .await
    .map_err(|e| e.to_string())?;
    let session_defaults: Defaults = vars
        .iter()
        .filter_map(|r| {
            let name = r.first()?.1.as_deref()?.to_ascii_lowercase();
            let value = r.get(1)?.1.clone().unwrap_or_default();
            defaults::READ_DEFAULTS
                .contains(&name.as_str())
                .then_some((name, value))
        })
        .collect();
    let galera = wsrep(c, &vars).await?;
    Ok(State {
        checked: true,
        up: true,
        read_only: ro != 0,
        replicating,
        lag,
        gtid,
        sql_mode,
        autocommit,
        init_connect,
        error: galera.as_ref().and_then(Wsrep::excluded),
        galera,
        failures: 0,
        down_since: None,
        replication_unread,
        replication_filters,
        defaults: session_defaults,
        reads_unlike_primary: None,
    })
}

/// A replica's replication filters as its SHOW SLAVE STATUS row gives
/// them (every `Replicate_*` column — databases, tables, wildcards, GTID
/// domains, server ids, rewritten databases — that is not empty), or
/// `None`: it applies all of the primary's events.
pub fn filters(row: &[(String, Option<String>)]) -> Option<String> {
    let set: Vec<String> = row
        .iter()
        .filter(|(n, _)| n.starts_with("Replicate_"))
        .filter_map(|(n, v)| {
            let v = v.as_deref().unwrap_or("").trim();
            (!v.is_empty()).then(|| format!("{n}: {}", v.escape_debug()))
        })
        .collect();
    (!set.is_empty()).then(|| set.join("; "))
}

/// A Galera node's state from its global variables `vars`; `None` when
/// `wsrep_on` is OFF (or absent).
async fn wsrep(
    c: &mut Login,
    vars: &[Vec<(String, Option<String>)>],
) -> Result<Option<Wsrep>, String> {
    let value = |rows: &[Vec<(String, Option<String>)>], name: &str| -> String {
        rows.iter()
            .find(|r| {
                r.first()
                    .and_then(|(_, v)| v.as_deref())
                    .is_some_and(|v| v.eq_ignore_ascii_case(name))
            })
            .and_then(|r| r.get(1))
            .and_then(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    if !value(vars, "wsrep_on").eq_ignore_ascii_case("ON") {
        return Ok(None);
    }
    let st = query_rows(
        c,
        "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_ready', 'wsrep_local_state', \
         'wsrep_local_state_comment', 'wsrep_cluster_status', 'wsrep_cluster_size', \
         'wsrep_local_recv_queue')",
        16,
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok(Some(Wsrep {
        ready: value(&st, "wsrep_ready").eq_ignore_ascii_case("ON"),
        local_state: value(&st, "wsrep_local_state").parse().unwrap_or(0),
        state: value(&st, "wsrep_local_state_comment"),
        cluster_status: value(&st, "wsrep_cluster_status"),
        cluster_size: value(&st, "wsrep_cluster_size").parse().unwrap_or(0),
        desync: value(vars, "wsrep_desync").eq_ignore_ascii_case("ON"),
        reject_queries: value(vars, "wsrep_reject_queries"),
        recv_queue: value(&st, "wsrep_local_recv_queue").parse().unwrap_or(0),
    }))
}

/// Checks backend `i` until the task is dropped.
pub async fn watch(
    cfg: std::sync::Arc<RelayConfig>,
    dialer: Dialer,
    health: std::sync::Arc<Health>,
    i: usize,
) {
    let b = cfg.backends[i].clone();
    let interval = cfg.routing.health_interval;
    let mut conn = None;
    loop {
        // A panic in a check (a bug, or a reply a parser cannot take) is
        // a failed check, said: the backend is down until a check passes,
        // never left as it was last seen with nobody checking it.
        let guarded = std::panic::AssertUnwindSafe(async {
            sqlfleet_faults::point!("relay::health_check");
            tokio::time::timeout(CHECK_TIMEOUT, check(&dialer, &b, &mut conn)).await
        })
        .catch_unwind()
        .await;
        let r = match guarded {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err("health check timed out".to_string()),
            Err(p) => Err(format!(
                "the health check stopped at an internal error ({}): {}",
                sqlfleet_conn::text::A_BUG,
                sqlfleet_conn::text::panic_message(p.as_ref())
            )),
        };
        let before = health.get(i);
        let wait = match r {
            Ok(st) => {
                // (Its likeness to the primary is judged below, with the
                // others' states.)
                health.set(i, |s| {
                    let unlike = s.reads_unlike_primary.take();
                    *s = st;
                    s.reads_unlike_primary = unlike;
                });
                interval
            }
            Err(e) => {
                conn = None;
                let mut failures = 0;
                health.set(i, |s| {
                    s.checked = true;
                    s.up = false;
                    s.failures += 1;
                    failures = s.failures;
                    s.error = Some(e);
                });
                // Back off while it stays down, up to 5 s.
                (interval * 2u32.saturating_pow(failures.min(6))).min(Duration::from_secs(5))
            }
        };
        let after = health.get(i);
        // The first check of a backend that is up says so too.
        let from = if before.checked {
            before.role()
        } else {
            "down"
        };
        if from != after.role() || (!before.checked && !after.up) {
            crate::admin::log::backend_role(&b.addr(), from, after.role(), after.error.as_deref());
        }
        if let (None, Some(why)) = (&before.replication_unread, &after.replication_unread) {
            tracing::warn!("relay: backend {}: {why}", b.addr());
        }
        if before.replication_filters != after.replication_filters {
            match &after.replication_filters {
                Some(f) => tracing::warn!(
                    "relay: backend {}: its replication filters leave part of the primary's data out ({f}): \
                     no reads go to it unless a rule sends them to its group",
                    b.addr()
                ),
                None if before.checked => tracing::info!(
                    "relay: backend {}: no replication filters now; reads go to it",
                    b.addr()
                ),
                None => {}
            }
        }
        for (j, why) in health.compare_defaults(&cfg.routing.settings_may_differ) {
            let addr = cfg.backends[j].addr();
            match why {
                Some(why) => tracing::warn!("relay: backend {addr}: {why}"),
                None => tracing::info!(
                    "relay: backend {addr}: its new sessions read with the primary's settings again; reads go to it"
                ),
            }
        }
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backend_a_client_found_down_is_down_for_routing_and_the_next_check() {
        let h = Health::new(vec!["127.0.0.1:1".into()]);
        h.set(0, |s| {
            s.checked = true;
            s.up = true;
        });
        h.mark_down(0, "connection lost");
        let s = h.get(0);
        assert!(!s.up);
        assert!(s.down_since.is_some(), "when it went down is kept");
        assert_eq!(s.role(), "down");
        assert_eq!(s.error.as_deref(), Some("connection lost"));
        assert!(!h.briefs()[0].up);
        // A second client finding the same: still down, nothing new.
        h.mark_down(0, "again");
        assert_eq!(h.get(0).role(), "down");
        assert_eq!(h.get(0).down_since, s.down_since, "still the first time");
        h.set(0, |s| s.up = true);
        assert_eq!(h.get(0).down_since, None);
    }

    /// (name, each backend's (checked, up, @@global.autocommit,
    /// init_connect set), what a new session starts with)
    #[test]
    fn what_a_new_session_starts_with() {
        type Row = (&'static str, &'static [(bool, bool, bool, bool)], Fresh);
        let f = |autocommit, sure| Fresh { autocommit, sure };
        let rows: &[Row] = &[
            (
                "nothing checked",
                &[(false, false, false, false)],
                f(true, false),
            ),
            ("no backend", &[], f(true, false)),
            (
                "all on",
                &[(true, true, true, false), (true, true, true, false)],
                f(true, true),
            ),
            (
                "all off",
                &[(true, true, false, false), (true, true, false, false)],
                f(false, true),
            ),
            (
                "a replica off",
                &[(true, true, true, false), (true, true, false, false)],
                f(false, false),
            ),
            (
                "init_connect on one",
                &[(true, true, true, false), (true, true, true, true)],
                f(true, false),
            ),
            (
                "a down backend does not count",
                &[(true, true, true, false), (true, false, false, true)],
                f(true, true),
            ),
            (
                "one checked, one not yet",
                &[(true, true, true, false), (false, false, false, false)],
                f(true, true),
            ),
        ];
        for (name, backends, want) in rows {
            let states: Vec<Start> = backends
                .iter()
                .map(|&(checked, up, autocommit, init_connect)| Start {
                    checked,
                    up,
                    autocommit,
                    init_connect,
                })
                .collect();
            assert_eq!(fresh_sessions(&states), *want, "{name}");
        }
    }

    fn up(h: &Health, i: usize) {
        h.set(i, |s| {
            s.checked = true;
            s.up = true;
        });
    }

    /// What waits on a backend gives up when it goes down, not before;
    /// what waits on another backend does not.
    #[tokio::test(start_paused = true)]
    async fn work_on_a_backend_gives_up_when_it_goes_down_and_only_then() {
        let h = std::sync::Arc::new(Health::new(vec!["a:1".into(), "b:2".into()]));
        up(&h, 0);
        up(&h, 1);
        let slow = |h: std::sync::Arc<Health>, i| {
            tokio::spawn(async move {
                h.unless_gone(i, tokio::time::sleep(Duration::from_secs(60)))
                    .await
            })
        };
        let (on_a, on_b) = (slow(h.clone(), 0), slow(h.clone(), 1));
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!on_a.is_finished() && !on_b.is_finished());
        let t0 = tokio::time::Instant::now();
        h.mark_down(0, "health check timed out");
        assert_eq!(on_a.await.expect("task"), None, "gave up on the down one");
        assert_eq!(t0.elapsed(), Duration::ZERO, "at once");
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(!on_b.is_finished(), "the other waits on");
        assert_eq!(on_b.await.expect("task"), Some(()));
        // Work that ends first is its own result.
        assert_eq!(h.unless_gone(1, async { 7 }).await, Some(7));
    }

    /// Sent to a backend that is down already: it gets the time a check
    /// gets, then gives up; back up meanwhile, it goes on.
    #[tokio::test(start_paused = true)]
    async fn work_on_a_backend_already_down_gets_a_checks_time() {
        let h = std::sync::Arc::new(Health::new(vec!["a:1".into()]));
        let t0 = tokio::time::Instant::now();
        let r = h
            .unless_gone(0, tokio::time::sleep(Duration::from_secs(60)))
            .await;
        assert_eq!(r, None);
        assert_eq!(t0.elapsed(), CHECK_TIMEOUT);
        let h2 = h.clone();
        let w = tokio::spawn(async move {
            h2.unless_gone(0, tokio::time::sleep(Duration::from_secs(10)))
                .await
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        up(&h, 0);
        assert_eq!(w.await.expect("task"), Some(()), "back up: it went on");
    }

    /// A replica whose sessions read with other settings than the
    /// primary's is judged so after a check, gets no reads, and is judged
    /// alike again once they match; without one primary nothing changes.
    #[test]
    fn a_replica_is_judged_against_the_primarys_session_settings() {
        let h = Health::new(vec!["p:1".into(), "r:2".into(), "r:3".into()]);
        let tz = |v: &str| vec![("time_zone".to_string(), v.to_string())];
        for (i, ro, zone) in [
            (0, false, "SYSTEM"),
            (1, true, "SYSTEM"),
            (2, true, "+05:00"),
        ] {
            h.set(i, |s| {
                s.checked = true;
                s.up = true;
                s.read_only = ro;
                s.defaults = tz(zone);
            });
        }
        let changed = h.compare_defaults(&[]);
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert_eq!(changed[0].0, 2);
        assert!(
            changed[0]
                .1
                .as_deref()
                .is_some_and(|w| w.contains("time_zone '+05:00'")),
            "{changed:?}"
        );
        let briefs = h.briefs();
        assert!(!briefs[1].reads_unlike_primary && briefs[2].reads_unlike_primary);
        assert!(
            h.compare_defaults(&[]).is_empty(),
            "a judgement is said once"
        );
        // No primary (down): the judgement stands.
        h.set(0, |s| s.up = false);
        h.set(2, |s| s.defaults = tz("SYSTEM"));
        assert!(h.compare_defaults(&[]).is_empty());
        assert!(h.briefs()[2].reads_unlike_primary);
        h.set(0, |s| s.up = true);
        assert_eq!(h.compare_defaults(&[]), vec![(2, None)]);
        assert!(!h.briefs()[2].reads_unlike_primary);
    }

    #[test]
    fn replication_filters_are_every_replicate_column_set() {
        let row = |pairs: &[(&str, &str)]| -> Vec<(String, Option<String>)> {
            pairs
                .iter()
                .map(|(n, v)| (n.to_string(), Some(v.to_string())))
                .collect()
        };
        let none = row(&[
            ("Slave_IO_Running", "Yes"),
            ("Replicate_Do_DB", ""),
            ("Replicate_Ignore_Table", " "),
            ("Replicate_Rewrite_DB", ""),
        ]);
        assert_eq!(filters(&none), None);
        let some = row(&[
            ("Replicate_Do_DB", ""),
            ("Replicate_Wild_Ignore_Table", "tmp.%"),
            ("Replicate_Ignore_Domain_Ids", "7"),
        ]);
        assert_eq!(
            filters(&some).as_deref(),
            Some("Replicate_Wild_Ignore_Table: tmp.%; Replicate_Ignore_Domain_Ids: 7")
        );
        assert_eq!(filters(&[("Replicate_Do_DB".into(), None)]), None);
    }

    /// On a Galera cluster the nodes are judged against the writer the
    /// pool chose, and before its first pick against the one it would
    /// choose (the first usable node): no window where a node that reads
    /// otherwise takes reads unjudged.
    #[test]
    fn galera_nodes_are_judged_against_the_writer_before_the_first_pick_too() {
        let h = Health::new(vec!["g:1".into(), "g:2".into(), "g:3".into()]);
        let synced = Wsrep {
            ready: true,
            local_state: 4,
            state: "Synced".into(),
            cluster_status: "Primary".into(),
            cluster_size: 3,
            reject_queries: "NONE".into(),
            ..Wsrep::default()
        };
        let tz = |v: &str| vec![("time_zone".to_string(), v.to_string())];
        for (i, zone) in [(0, "SYSTEM"), (1, "+05:00"), (2, "SYSTEM")] {
            h.set(i, |s| {
                s.checked = true;
                s.up = true;
                s.galera = Some(synced.clone());
                s.defaults = tz(zone);
            });
        }
        let changed = h.compare_defaults(&[]);
        assert_eq!(changed.iter().map(|c| c.0).collect::<Vec<_>>(), vec![1]);
        // The pool picks node 3 as its writer: judged against it now.
        h.note_galera_writer(Some(2));
        h.set(2, |s| s.defaults = tz("+05:00"));
        let changed = h.compare_defaults(&[]);
        let mut who: Vec<(usize, bool)> = changed.iter().map(|c| (c.0, c.1.is_some())).collect();
        who.sort();
        assert_eq!(who, vec![(0, true), (1, false)]);
    }
}

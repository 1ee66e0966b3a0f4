//! Health checks: one connection per backend asks, every interval, whether
//! the server is writable, how far its replication is behind and which
//! GTIDs it has applied, and, on a Galera node, its `wsrep_%` state
//! (`routing::galera` decides what that allows). A backend failing checks
//! is marked down and checked again with growing back-off until it answers.

use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;

use crate::backend::command::{query_row, query_rows};
use crate::backend::dial::{Dialer, Login, Shape};
use crate::config::{Backend, RelayConfig};
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
    /// A Galera node's state (`wsrep_on` is ON).
    pub galera: Option<Wsrep>,
    pub error: Option<String>,
    pub failures: u32,
}

/// What routing needs of a backend's state (cheap to copy per statement).
#[derive(Debug, Clone, Copy, Default)]
pub struct Brief {
    pub checked: bool,
    pub up: bool,
    pub read_only: bool,
    pub replicating: bool,
    pub lag: Option<u64>,
    /// A Galera node: whether it may take traffic.
    pub galera: Option<bool>,
    /// A Galera node's write sets waiting to be applied.
    pub galera_queue: u64,
}

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

pub struct Health {
    states: Vec<Mutex<State>>,
    /// Each backend's address, for the log line of a state change.
    addrs: Vec<String>,
}

impl Health {
    pub fn new(addrs: Vec<String>) -> Health {
        Health {
            states: addrs.iter().map(|_| Mutex::new(State::default())).collect(),
            addrs,
        }
    }

    pub fn get(&self, i: usize) -> State {
        self.states[i]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
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
                }
            })
            .collect()
    }

    fn set(&self, i: usize, f: impl FnOnce(&mut State)) {
        f(&mut self.states[i].lock().unwrap_or_else(|e| e.into_inner()));
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
    let first = query_row(c, "SELECT @@read_only AS ro, @@gtid_current_pos AS gtid")
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
    let row = query_row(c, "SHOW SLAVE STATUS")
        .await
        .map_err(|e| e.to_string())?;
    let text = |r: &Vec<(String, Option<String>)>, col: &str| get(r, col);
    let (replicating, lag) = match &row {
        Some(r) => (
            text(r, "Slave_IO_Running") == "Yes" && text(r, "Slave_SQL_Running") == "Yes",
            text(r, "Seconds_Behind_Master").parse().ok(),
        ),
        None => (false, None),
    };
    let galera = wsrep(c).await?;
    Ok(State {
        checked: true,
        up: true,
        read_only: ro != 0,
        replicating,
        lag,
        gtid,
        error: galera.as_ref().and_then(Wsrep::excluded),
        galera,
        failures: 0,
    })
}

/// A Galera node's state; `None` when `wsrep_on` is OFF (or absent).
async fn wsrep(c: &mut Login) -> Result<Option<Wsrep>, String> {
    let vars = query_rows(
        c,
        "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('wsrep_on', 'wsrep_desync', 'wsrep_reject_queries')",
        16,
    )
    .await
    .map_err(|e| e.to_string())?;
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
    if !value(&vars, "wsrep_on").eq_ignore_ascii_case("ON") {
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
        desync: value(&vars, "wsrep_desync").eq_ignore_ascii_case("ON"),
        reject_queries: value(&vars, "wsrep_reject_queries"),
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
        let r = tokio::time::timeout(Duration::from_secs(2), check(&dialer, &b, &mut conn)).await;
        let r = match r {
            Ok(r) => r,
            Err(_) => Err("health check timed out".to_string()),
        };
        let before = health.get(i);
        let wait = match r {
            Ok(st) => {
                health.set(i, |s| *s = st);
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
        tokio::time::sleep(wait).await;
    }
}

/// Whether GTID position `pos` (`domain-server-seq,...`) includes every
/// GTID of `want` (one GTID or a position list).
pub fn covers(pos: &str, want: &str) -> bool {
    want.split(',').all(|g| covers_one(pos, g))
}

fn covers_one(pos: &str, gtid: &str) -> bool {
    let parse = |g: &str| -> Option<(u32, u64)> {
        let mut it = g.trim().split('-');
        let domain = it.next()?.parse().ok()?;
        let _server = it.next()?;
        let seq = it.next()?.parse().ok()?;
        Some((domain, seq))
    };
    let Some((d, want)) = parse(gtid) else {
        return true; // nothing to wait for
    };
    pos.split(',')
        .filter_map(parse)
        .any(|(pd, seq)| pd == d && seq >= want)
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
        assert_eq!(s.role(), "down");
        assert_eq!(s.error.as_deref(), Some("connection lost"));
        assert!(!h.briefs()[0].up);
        // A second client finding the same: still down, nothing new.
        h.mark_down(0, "again");
        assert_eq!(h.get(0).role(), "down");
    }

    #[test]
    fn gtid_coverage() {
        use super::covers;
        assert!(covers("0-1-42", "0-1-42"));
        assert!(covers("0-1-43,1-2-5", "1-2-5"));
        assert!(!covers("0-1-41", "0-1-42"));
        assert!(!covers("1-1-100", "0-1-1"));
        assert!(covers("", ""));
        assert!(covers("0-1-42,1-2-9", "0-1-40,1-2-9"));
        assert!(!covers("0-1-42,1-2-8", "0-1-40,1-2-9"));
    }
}

//! Which backend a statement's route may use, and which of those gets it,
//! as pure decisions over what the health checks found ([`Brief`]) — the
//! pool only gathers the facts (states, busy counts, weights, the Galera
//! writer) and asks here.
//!
//! - `Any` (one backend, or no routing): every backend not known to be
//!   down, else any.
//! - `Primary`: the writable one. None until a check has said which is
//!   writable (no guess: a replica is never taken for the primary), and
//!   none while several non-Galera backends are writable, unless
//!   `multi_primary` (writes on two asynchronous primaries diverge them).
//! - `Replica` / `Group`: an up, read-only, replicating backend of that
//!   group within `max_lag` whose sessions read with the primary's
//!   settings (`defaults.rs`), else the primary; a replica with
//!   replication filters holds part of the data and serves only its named
//!   group's reads (a rule's choice).
//! - A Galera cluster (any backend reports `wsrep_on`): `galera.rs` decides
//!   from the usable nodes and the writer; a node whose sessions read
//!   otherwise than the writer's takes no reads.
//!
//! Among the candidates, the least busy per unit of weight
//! ([`least_busy`]); ties take turns in proportion to weight.

use crate::routing::galera::{self, Writers};
use crate::routing::Route;

/// What routing needs of a backend's state (cheap to copy per statement).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
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
    /// Its new sessions read with other settings than the primary's
    /// (`defaults.rs`): a read there would answer otherwise.
    pub reads_unlike_primary: bool,
    /// Its replication filters leave part of the primary's data out: it
    /// serves only the reads a rule sends to its named group.
    pub filtered: bool,
}

/// The settings a pick depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Seconds a replica may be behind and still take reads.
    pub max_lag: u64,
    pub multi_primary: bool,
    pub galera_writers: Writers,
    /// A Galera node with more write sets waiting gets no reads (0: no limit).
    pub galera_max_recv_queue: u64,
}

/// The backends `route` may use. `groups[i]` is backend `i`'s replica
/// group (the route's `Group(g)` names group `g`); `writer` is the Galera
/// writer, when the backends are a Galera cluster.
pub fn candidates(
    route: Route,
    states: &[Brief],
    groups: &[Option<usize>],
    policy: &Policy,
    writer: Option<usize>,
) -> Vec<usize> {
    if let Some(usable) = galera_usable(states) {
        let read = route.is_replica();
        let allowed = if read {
            let queues: Vec<u64> = states.iter().map(|s| s.galera_queue).collect();
            // (A node whose sessions read otherwise than the writer's
            // takes no reads; the writer is never judged so.)
            galera::readable(&usable, &queues, policy.galera_max_recv_queue)
                .into_iter()
                .zip(states)
                .map(|(r, s)| r && !s.reads_unlike_primary)
                .collect()
        } else {
            usable
        };
        return galera::candidates(read, policy.galera_writers, writer, &allowed);
    }
    let all = 0..states.len();
    match route {
        Route::Any => {
            let live: Vec<usize> = all
                .clone()
                .filter(|&i| !states[i].checked || states[i].up)
                .collect();
            if live.is_empty() {
                all.collect()
            } else {
                live
            }
        }
        Route::Primary => {
            let w = writable(states);
            if w.len() > 1 && !policy.multi_primary {
                Vec::new()
            } else {
                w
            }
        }
        Route::Replica | Route::Group(_) => {
            let group = match route {
                Route::Group(g) => Some(g),
                _ => None,
            };
            let replicas: Vec<usize> = all
                .filter(|&i| {
                    let s = &states[i];
                    groups.get(i).copied().flatten() == group
                        && s.up
                        && s.read_only
                        && s.replicating
                        && !s.reads_unlike_primary
                        && (group.is_some() || !s.filtered)
                        && s.lag.is_some_and(|l| l <= policy.max_lag)
                })
                .collect();
            if replicas.is_empty() {
                candidates(Route::Primary, states, groups, policy, writer)
            } else {
                replicas
            }
        }
    }
}

/// The writable backends' indexes when several non-Galera backends are
/// writable and `multi_primary` is off (the statement is refused, naming
/// them); else None.
pub fn several_primaries(states: &[Brief], policy: &Policy) -> Option<Vec<usize>> {
    if policy.multi_primary || galera_usable(states).is_some() {
        return None;
    }
    let w = writable(states);
    (w.len() > 1).then_some(w)
}

/// Backends a check found up and writable (read_only = 0).
fn writable(states: &[Brief]) -> Vec<usize> {
    (0..states.len())
        .filter(|&i| states[i].checked && states[i].up && !states[i].read_only)
        .collect()
}

/// For a Galera cluster (any backend is a Galera node): which nodes may
/// take traffic; None for other backends.
pub fn galera_usable(states: &[Brief]) -> Option<Vec<bool>> {
    states.iter().any(|s| s.galera.is_some()).then(|| {
        states
            .iter()
            .map(|s| s.up && s.galera == Some(true))
            .collect()
    })
}

/// For a Galera cluster: its writer (`galera::writer` over the nodes'
/// states), the current one `current` while it may take traffic; None
/// for other backends. The pool's choice, and the health checks' before
/// the pool's first pick.
pub fn galera_writer(current: Option<usize>, states: &[Brief]) -> Option<Option<usize>> {
    let usable = galera_usable(states)?;
    let checked: Vec<bool> = states.iter().map(|s| s.checked).collect();
    Some(galera::writer(current, &usable, &checked))
}

/// The least busy candidate per unit of weight (`busy(i)`, `weight[i]`,
/// a weight of 0 counting as 1); ties go round-robin from the candidate
/// whose turn `turn` is, each taking turns in proportion to its weight.
/// (`busy` is read only for the candidates: no per-statement copy.)
pub fn least_busy(
    cands: &[usize],
    busy: impl Fn(usize) -> usize,
    weight: &[u32],
    turn: u64,
) -> Option<usize> {
    let w = |i: usize| u64::from(weight.get(i).copied().unwrap_or(1).max(1));
    let total: u64 = cands.iter().map(|&i| w(i)).sum();
    let mut slot = turn % total.max(1);
    let mut preferred = 0;
    for (k, &i) in cands.iter().enumerate() {
        if slot < w(i) {
            preferred = k;
            break;
        }
        slot -= w(i);
    }
    let m = cands.len();
    (0..m)
        .min_by_key(|&k| {
            let i = cands[k];
            (busy(i) as u64 * 1_000_000 / w(i), (k + m - preferred) % m)
        })
        .map(|k| cands[k])
}

#[cfg(test)]
mod tests;

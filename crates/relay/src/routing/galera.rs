//! Routing over a Galera cluster, as pure decisions: whether a node may
//! take traffic (from its `wsrep_%` status and variables), which node is
//! the writer, and which nodes a route may use. Health checks fill
//! [`Wsrep`]; the pool asks [`candidates`].
//!
//! A node takes traffic only when it is Synced (`wsrep_local_state` 4,
//! so not a donor, joiner or desynced node), ready, in the Primary
//! component, not desynced by an operator and not told to reject queries.
//! One node takes the writes by default (writes on several nodes meet as
//! certification conflicts): the current writer keeps them while it can,
//! else the first node in config order that can; reads go to the others.

use serde::{Deserialize, Serialize};

/// What a health check read of a Galera node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Wsrep {
    /// `wsrep_ready`.
    pub ready: bool,
    /// `wsrep_local_state`: 4 Synced, 2 Donor/Desynced, 1 Joining, ...
    pub local_state: u32,
    /// `wsrep_local_state_comment`.
    pub state: String,
    /// `wsrep_cluster_status`: Primary, non-Primary, Disconnected.
    pub cluster_status: String,
    pub cluster_size: u32,
    /// `@@wsrep_desync`.
    pub desync: bool,
    /// `@@wsrep_reject_queries`: NONE, ALL, ALL_KILL.
    pub reject_queries: String,
    /// `wsrep_local_recv_queue`: write sets received, not yet applied.
    pub recv_queue: u64,
}

impl Wsrep {
    /// Why the node gets no traffic; `None` when it may.
    pub fn excluded(&self) -> Option<String> {
        if self.cluster_status != "Primary" {
            return Some(format!(
                "not in the Primary component ({})",
                self.cluster_status
            ));
        }
        if !self.ready {
            return Some("wsrep_ready is OFF".into());
        }
        if self.desync {
            return Some("desynced (wsrep_desync=ON)".into());
        }
        if !self.reject_queries.is_empty() && !self.reject_queries.eq_ignore_ascii_case("NONE") {
            return Some(format!("wsrep_reject_queries={}", self.reject_queries));
        }
        if self.local_state != 4 {
            return Some(format!("not Synced ({})", self.state));
        }
        None
    }
}

/// How many nodes take writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Writers {
    /// One at a time (no certification conflicts between clients of
    /// the relay).
    #[default]
    One,
    /// Every node that may take traffic.
    All,
}

/// The writer: the current one while it may take traffic, else the first
/// that may (config order). A node not yet checked (`checked[i]` false)
/// ahead of that one holds the choice back: at start the writer would
/// otherwise be whichever node answered its first check first, and stay
/// there (the writer is kept while it can).
pub fn writer(current: Option<usize>, usable: &[bool], checked: &[bool]) -> Option<usize> {
    match current {
        Some(c) if usable.get(c).copied().unwrap_or(false) => Some(c),
        _ => {
            let first = usable.iter().position(|u| *u)?;
            checked.iter().take(first).all(|c| *c).then_some(first)
        }
    }
}

/// The nodes that may take reads: usable, and (when `max_queue` is not 0)
/// with no more than `max_queue` write sets waiting to be applied — a
/// node further behind would answer from older data.
pub fn readable(usable: &[bool], queues: &[u64], max_queue: u64) -> Vec<bool> {
    usable
        .iter()
        .zip(queues)
        .map(|(u, q)| *u && (max_queue == 0 || *q <= max_queue))
        .collect()
}

/// The nodes a statement may go to (`usable`: for a read, the readable
/// ones): writes (`read` false) to the writer
/// (or, with [`Writers::All`], to every usable node); reads to the usable
/// nodes that are not the single writer, else to the writer.
pub fn candidates(
    read: bool,
    writers: Writers,
    writer: Option<usize>,
    usable: &[bool],
) -> Vec<usize> {
    let all: Vec<usize> = (0..usable.len()).filter(|&i| usable[i]).collect();
    match (read, writers) {
        (_, Writers::All) => all,
        (false, Writers::One) => writer.into_iter().collect(),
        (true, Writers::One) => {
            let others: Vec<usize> = all.iter().copied().filter(|&i| Some(i) != writer).collect();
            if others.is_empty() {
                writer.into_iter().collect()
            } else {
                others
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synced() -> Wsrep {
        Wsrep {
            ready: true,
            local_state: 4,
            state: "Synced".into(),
            cluster_status: "Primary".into(),
            cluster_size: 3,
            desync: false,
            reject_queries: "NONE".into(),
            recv_queue: 0,
        }
    }

    #[test]
    fn which_nodes_take_traffic() {
        let rows: Vec<(Wsrep, Option<&str>)> = vec![
            (synced(), None),
            (
                Wsrep {
                    local_state: 2,
                    state: "Donor/Desynced".into(),
                    ..synced()
                },
                Some("not Synced (Donor/Desynced)"),
            ),
            (
                Wsrep {
                    local_state: 1,
                    state: "Joining".into(),
                    ..synced()
                },
                Some("not Synced (Joining)"),
            ),
            (
                Wsrep {
                    desync: true,
                    local_state: 2,
                    ..synced()
                },
                Some("desynced (wsrep_desync=ON)"),
            ),
            (
                Wsrep {
                    cluster_status: "non-Primary".into(),
                    ready: false,
                    ..synced()
                },
                Some("not in the Primary component (non-Primary)"),
            ),
            (
                Wsrep {
                    ready: false,
                    ..synced()
                },
                Some("wsrep_ready is OFF"),
            ),
            (
                Wsrep {
                    reject_queries: "ALL".into(),
                    ..synced()
                },
                Some("wsrep_reject_queries=ALL"),
            ),
            (Wsrep::default(), Some("not in the Primary component ()")),
        ];
        for (w, want) in rows {
            assert_eq!(w.excluded().as_deref(), want, "{w:?}");
        }
    }

    #[test]
    fn the_writer_stays_while_it_can_then_moves_to_the_first_that_can() {
        // (current, usable, checked, writer)
        type Row<'a> = (Option<usize>, &'a [bool], &'a [bool], Option<usize>);
        let all = &[true, true, true][..];
        let rows: [Row; 10] = [
            (None, &[true, true, true], all, Some(0)),
            (Some(2), &[true, true, true], all, Some(2)),
            (Some(0), &[false, true, true], all, Some(1)),
            (Some(1), &[true, false, true], all, Some(0)),
            (Some(0), &[false, false, false], all, None),
            (Some(7), &[false, true], &[true, true], Some(1)),
            // At start: node 0 not checked yet, node 1 answered first.
            (None, &[false, true, true], &[false, true, true], None),
            (None, &[false, true, false], &[true, true, false], Some(1)),
            // A writer already chosen stays while it can, checks or not.
            (Some(1), &[false, true, true], &[false, true, true], Some(1)),
            (Some(0), &[false, true, true], &[true, true, true], Some(1)),
        ];
        for (current, usable, checked, want) in rows {
            assert_eq!(
                writer(current, usable, checked),
                want,
                "{current:?} {usable:?} {checked:?}"
            );
        }
    }

    #[test]
    fn a_node_far_behind_takes_no_reads() {
        // (usable, queues, max, readable)
        type Row<'a> = (&'a [bool], &'a [u64], u64, Vec<bool>);
        let rows: [Row; 4] = [
            (
                &[true, true, true],
                &[0, 5, 500],
                100,
                vec![true, true, false],
            ),
            (&[true, true, true], &[0, 5, 500], 0, vec![true, true, true]),
            (
                &[true, false, true],
                &[0, 0, 100],
                100,
                vec![true, false, true],
            ),
            (&[true, true], &[101, 0], 100, vec![false, true]),
        ];
        for (usable, queues, max, want) in rows {
            assert_eq!(
                readable(usable, queues, max),
                want,
                "{usable:?} {queues:?} {max}"
            );
        }
    }

    #[test]
    fn candidates_by_route_and_writers() {
        use Writers::*;
        // (read, writers, writer, usable, candidates)
        type Row<'a> = (bool, Writers, Option<usize>, &'a [bool], Vec<usize>);
        let rows: [Row; 8] = [
            (false, One, Some(0), &[true, true, true], vec![0]),
            (true, One, Some(0), &[true, true, true], vec![1, 2]),
            (true, One, Some(0), &[true, false, true], vec![2]),
            (true, One, Some(0), &[true, false, false], vec![0]),
            (false, One, None, &[false, false, false], vec![]),
            (true, One, None, &[false, false, false], vec![]),
            (false, All, Some(0), &[true, false, true], vec![0, 2]),
            (true, All, Some(0), &[true, true, false], vec![0, 1]),
        ];
        for (read, w, writer, usable, want) in rows {
            assert_eq!(
                candidates(read, w, writer, usable),
                want,
                "{read} {w:?} {writer:?} {usable:?}"
            );
        }
    }
}

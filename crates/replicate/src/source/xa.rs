//! XA transactions prepared on the source and ended later, as a value.
//!
//! MariaDB (10.5+) logs an XA transaction in two groups, each with its own
//! GTID: `XA PREPARE` logs its changes, and its end — `XA COMMIT` or
//! `XA ROLLBACK`, maybe much later, maybe from another session, with other
//! transactions between — is a group of its own holding only that
//! statement. A native replica prepares the branch at the first group and
//! ends it at the second; the target here has one connection per stream
//! and a position row each, so a prepared branch would hold its stream's
//! row locked across the transactions between.
//!
//! So the reader holds a prepared group (in memory, with its place in the
//! floor's window: `floor::Status::Held`, which keeps the floor before it
//! and counts no lag) and, at its end, applies its changes as one
//! transaction at the end's GTID — in the source's commit order: the
//! branch held its rows locked on the source until then, so nothing
//! between depended on them — or, rolled back, applies nothing. The held
//! group's place in the window ends as its end does: applied, or stopped
//! (the floor stays before the prepare, and a restart reads both again).
//! After a restart from before a prepare, its end finds it held again.
//!
//! An end without its prepare (the prepare was logged before where this
//! source's reading started, as when replication starts while a branch
//! is prepared) cannot be applied: a commit stops the source, named, with
//! what to do; a rollback applies nothing, which is what it asks.
//!
//! Pure: source.rs asks [`Held::read`] and carries the answer out; the
//! table test below is the rules.

use std::collections::HashMap;

use crate::gtid::XaId;
use crate::txn::{Txn, XaStep};

/// Prepared groups read in this reading session whose end is not read
/// yet, by XA id: the floor index each holds, and its changes.
#[derive(Debug, Default)]
pub(super) struct Held {
    by_id: HashMap<XaId, (u64, Txn)>,
}

/// What the reader does with a transaction read.
#[derive(Debug)]
pub(super) enum Next {
    /// A prepared group: held until its end (its floor place is `Held`).
    Hold,
    /// `txn` goes on as any transaction read; `tied`, the floor index of
    /// the prepared group it ends, which ends as it does.
    Go { txn: Box<Txn>, tied: Option<u64> },
}

impl Held {
    /// Transaction `txn`, read at floor index `idx`; `covered`, whether
    /// the target's floor already holds its GTID (it was applied before).
    pub(super) fn read(&mut self, idx: u64, mut txn: Txn, covered: bool) -> Next {
        match txn.xa {
            None => Next::Go {
                txn: Box::new(txn),
                tied: None,
            },
            Some(XaStep::Prepared(xid)) => {
                if let Some((_, earlier)) = self.by_id.get(&xid) {
                    let why = format!(
                        "XA PREPARE of {xid} a second time with no end of the first ({}) between: which of them the source ended is not known",
                        earlier.gtid
                    );
                    txn.xa = None;
                    refuse(&mut txn, why);
                    return Next::Go {
                        txn: Box::new(txn),
                        tied: None,
                    };
                }
                if txn.temp.thread.is_some() {
                    // Applied later, with other statements of other
                    // sessions between: a temporary table's session
                    // state cannot be told there.
                    txn.unsupported.get_or_insert_with(|| {
                        format!("the XA transaction {xid} uses temporary tables (or CONNECTION_ID()) of its source session, which are not applied at its end")
                    });
                }
                self.by_id.insert(xid, (idx, txn));
                Next::Hold
            }
            Some(XaStep::Ended { xid, commit }) => match (self.by_id.remove(&xid), commit) {
                (Some((p, mut prepared)), true) => {
                    prepared.gtid = txn.gtid;
                    prepared.timestamp = txn.timestamp;
                    prepared.file = txn.file;
                    prepared.end_pos = txn.end_pos;
                    prepared.xa = None;
                    Next::Go {
                        txn: Box::new(prepared),
                        tied: Some(p),
                    }
                }
                // Rolled back: nothing of it is applied (the end's own
                // group is empty: its place moves the floor).
                (Some((p, _)), false) => Next::Go {
                    txn: Box::new(txn),
                    tied: Some(p),
                },
                (None, false) => Next::Go {
                    txn: Box::new(txn),
                    tied: None,
                },
                (None, true) if covered => Next::Go {
                    txn: Box::new(txn),
                    tied: None,
                },
                (None, true) => {
                    let why = format!(
                        "XA COMMIT of {xid}, whose XA PREPARE was logged before where this source's reading started (the branch was prepared when replication of this source began): its changes were never read, so they cannot be applied here (make its change on the target by hand and skip it, or start this source again from a GTID before its XA PREPARE)"
                    );
                    refuse(&mut txn, why);
                    Next::Go {
                        txn: Box::new(txn),
                        tied: None,
                    }
                }
            },
        }
    }

    /// How many prepared groups are held.
    pub(super) fn len(&self) -> usize {
        self.by_id.len()
    }
}

/// Refused, touching databases nobody can name: the source stops.
fn refuse(txn: &mut Txn, why: String) {
    txn.unsupported.get_or_insert(why);
    txn.unknown_scope = true;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gtid::Gtid;

    fn xid(name: &str) -> XaId {
        XaId::new(1, name.as_bytes(), b"").expect("xid")
    }

    /// A group at sequence number `seq`: `step` "plain", "prepare X",
    /// "commit X" or "rollback X"; a prepare writes db `a`.
    fn group(seq: u64, step: &str) -> Txn {
        let mut t = crate::fixtures::txn("a", Vec::new());
        t.gtid = Gtid {
            domain: 0,
            server: 1,
            seq,
        };
        t.timestamp = seq as u32;
        t.file = format!("bin.{seq}");
        t.end_pos = seq * 100;
        t.first = format!("group {seq}");
        let (verb, id) = step.split_once(' ').unwrap_or((step, ""));
        t.xa = match verb {
            "plain" => None,
            "prepare" => Some(XaStep::Prepared(xid(id))),
            "commit" | "rollback" => {
                // An end group holds no changes of its own.
                t.dbs.clear();
                Some(XaStep::Ended {
                    xid: xid(id),
                    commit: verb == "commit",
                })
            }
            _ => panic!("step {step}"),
        };
        t
    }

    /// What a step came to, in words: "hold", "go <seq> from <group>",
    /// "go <seq> tied <idx>", "refused ... whole".
    fn said(n: &Next) -> String {
        match n {
            Next::Hold => "hold".into(),
            Next::Go { txn, tied } => {
                let mut s = format!("go {} as {}", txn.gtid.seq, txn.first);
                if let Some(p) = tied {
                    s += &format!(" tied {p}");
                }
                if txn.is_empty() {
                    s += " empty";
                }
                if let Some(why) = &txn.unsupported {
                    let head: String = why.split_whitespace().take(3).collect::<Vec<_>>().join(" ");
                    s += &format!(" refused '{head}'");
                    if txn.unknown_scope {
                        s += " whole";
                    }
                }
                s
            }
        }
    }

    #[test]
    fn prepared_groups_wait_for_their_end_and_go_as_it_says() {
        // (name, [(step, covered)], what each step came to, held after)
        type Row = (
            &'static str,
            &'static [(&'static str, bool)],
            &'static [&'static str],
            usize,
        );
        let rows: &[Row] = &[
            (
                "a plain group goes",
                &[("plain", false)],
                &["go 1 as group 1"],
                0,
            ),
            (
                "a commit applies the prepared changes at its own GTID",
                &[("prepare x", false), ("plain", false), ("commit x", false)],
                &["hold", "go 2 as group 2", "go 3 as group 1 tied 0"],
                0,
            ),
            (
                "a rollback applies nothing and frees the prepare's place",
                &[("prepare x", false), ("rollback x", false)],
                &["hold", "go 2 as group 2 tied 0 empty"],
                0,
            ),
            (
                "two branches end in either order",
                &[
                    ("prepare x", false),
                    ("prepare y", false),
                    ("commit y", false),
                    ("rollback x", false),
                ],
                &[
                    "hold",
                    "hold",
                    "go 3 as group 2 tied 1",
                    "go 4 as group 4 tied 0 empty",
                ],
                0,
            ),
            (
                "a branch with no end yet stays held",
                &[("prepare x", false), ("plain", false)],
                &["hold", "go 2 as group 2"],
                1,
            ),
            (
                "an end for another id leaves the held one",
                &[("prepare x", false), ("commit y", false)],
                &["hold", "go 2 as group 2 refused 'XA COMMIT of' whole"],
                1,
            ),
            (
                "a commit whose prepare was never read stops the source",
                &[("commit x", false)],
                &["go 1 as group 1 refused 'XA COMMIT of' whole"],
                0,
            ),
            (
                "unless the target's floor holds it already",
                &[("commit x", true)],
                &["go 1 as group 1 empty"],
                0,
            ),
            (
                "a rollback whose prepare was never read applies nothing",
                &[("rollback x", false)],
                &["go 1 as group 1 empty"],
                0,
            ),
            (
                "the same id prepared twice without an end is refused",
                &[("prepare x", false), ("prepare x", false)],
                &["hold", "go 2 as group 2 refused 'XA PREPARE of' whole"],
                1,
            ),
            (
                "an id ended can be prepared again",
                &[
                    ("prepare x", false),
                    ("commit x", false),
                    ("prepare x", false),
                    ("commit x", false),
                ],
                &[
                    "hold",
                    "go 2 as group 1 tied 0",
                    "hold",
                    "go 4 as group 3 tied 2",
                ],
                0,
            ),
        ];
        for (name, steps, want, left) in rows {
            let mut held = Held::default();
            let got: Vec<String> = steps
                .iter()
                .enumerate()
                .map(|(i, (step, covered))| {
                    said(&held.read(i as u64, group(i as u64 + 1, step), *covered))
                })
                .collect();
            assert_eq!(&got, want, "{name}");
            assert_eq!(held.len(), *left, "{name}: held after");
        }
    }

    #[test]
    fn a_committed_branch_keeps_its_changes_and_takes_the_ends_place() {
        let mut held = Held::default();
        let mut prepare = group(7, "prepare x");
        prepare.items = vec![crate::txn::Item::Rows(crate::txn::Rows {
            bytes: vec![1, 2, 3],
            what: "Write_rows event on table a.t".into(),
            layout: None,
        })];
        assert!(matches!(held.read(0, prepare, false), Next::Hold));
        let Next::Go { txn, tied } = held.read(1, group(9, "commit x"), false) else {
            panic!("the end goes");
        };
        assert_eq!(tied, Some(0));
        assert_eq!(
            (txn.gtid.seq, txn.timestamp, txn.file.as_str(), txn.end_pos),
            (9, 9, "bin.9", 900)
        );
        assert_eq!(txn.items.len(), 1, "the prepared changes");
        assert_eq!(txn.dbs.iter().collect::<Vec<_>>(), ["a"]);
        assert_eq!(txn.xa, None, "applied as any transaction");
        assert!(txn.unsupported.is_none());
    }

    #[test]
    fn a_branch_with_temporary_tables_is_refused_at_its_end() {
        let mut held = Held::default();
        let mut prepare = group(1, "prepare x");
        prepare.temp.thread = Some(5);
        assert!(matches!(held.read(0, prepare, false), Next::Hold));
        let Next::Go { txn, tied } = held.read(1, group(2, "commit x"), false) else {
            panic!("the end goes");
        };
        assert_eq!(tied, Some(0));
        assert!(txn
            .unsupported
            .as_deref()
            .is_some_and(|w| w.contains("temporary tables")));
    }
}

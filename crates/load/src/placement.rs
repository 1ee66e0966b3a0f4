//! Where and how a batch of one table's rows runs, as a pure decision
//! over what the scheduler knows of the table and the statements
//! (schedule.rs gathers the facts and carries the answer out).
//!
//! - Ids the server assigns (AUTO_INCREMENT left to it, a sequence's next
//!   value) depend on the order of inserts, and a rolled-back attempt
//!   would use some up: such batches keep file order on their table's
//!   lane, and never take the fast path (its fallback rolls back).
//! - Rows that fire a trigger (or take a sequence's value) run in file
//!   order after everything before them, on the scheduler's own
//!   connection.
//! - With `--continue-on-error` a failed batch is rolled back and run
//!   again statement by statement; where the server assigned ids in the
//!   rolled-back attempt, the batch goes one statement per transaction.
//! - The ordered regime runs everything on the scheduler's connection.

/// What the scheduler knows when a batch is complete.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Facts {
    /// The table does not roll back (MyISAM, Aria ...).
    pub nontx: bool,
    /// Some statement leaves the AUTO_INCREMENT column to the server.
    pub generates_ids: bool,
    /// Some statement leaves a sequence-defaulted column to the server.
    pub takes_sequence: bool,
    /// The table has triggers.
    pub triggered: bool,
    /// `--continue-on-error`.
    pub continue_on_error: bool,
    /// The whole load runs in file order on one connection.
    pub ordered_regime: bool,
    /// The batch itself must keep file order among its table's batches
    /// (the dump said so: a statement that reads other rows ...).
    pub batch_ordered: bool,
    /// The table keeps rows in insert order (a heap without a key).
    pub heap_order: bool,
    /// The table's AUTO_INCREMENT must not be reset by the lane.
    pub no_auto_inc: bool,
}

/// Where it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// On the scheduler's own connection, now, in file order.
    Control {
        /// Everything queued before it finishes first.
        after_everything: bool,
        /// The fast path (LOAD DATA of the rows) may be tried.
        fast_ok: bool,
    },
    /// On its table's lane, run by the workers.
    Lane {
        /// The lane may set the table's AUTO_INCREMENT.
        auto_inc: bool,
        /// Its pieces keep file order among the table's batches.
        ordered: bool,
    },
}

/// The decision for one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// One statement per transaction (else the batch as one piece).
    pub per_statement: bool,
    pub place: Place,
}

/// Where and how a batch with these facts runs.
pub fn place(f: Facts) -> Placement {
    let triggered = f.triggered || f.takes_sequence;
    let per_statement = f.continue_on_error && (f.generates_ids || triggered);
    let place = if f.ordered_regime || triggered {
        Place::Control {
            after_everything: triggered,
            fast_ok: !f.nontx && !triggered,
        }
    } else {
        Place::Lane {
            auto_inc: !f.no_auto_inc,
            ordered: f.batch_ordered || f.generates_ids || f.heap_order,
        }
    };
    Placement {
        per_statement,
        place,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LANE: Place = Place::Lane {
        auto_inc: true,
        ordered: false,
    };

    #[test]
    fn where_a_batch_runs() {
        let plain = Facts::default();
        let rows: Vec<(&str, Facts, bool, Place)> = vec![
            (
                "plain rows: parallel on the table's lane",
                plain,
                false,
                LANE,
            ),
            (
                "ids left to the server: the lane keeps file order",
                Facts {
                    generates_ids: true,
                    ..plain
                },
                false,
                Place::Lane {
                    auto_inc: true,
                    ordered: true,
                },
            ),
            (
                "a heap keeps insert order",
                Facts {
                    heap_order: true,
                    ..plain
                },
                false,
                Place::Lane {
                    auto_inc: true,
                    ordered: true,
                },
            ),
            (
                "the dump asked for order",
                Facts {
                    batch_ordered: true,
                    ..plain
                },
                false,
                Place::Lane {
                    auto_inc: true,
                    ordered: true,
                },
            ),
            (
                "a table whose AUTO_INCREMENT the lane leaves alone",
                Facts {
                    no_auto_inc: true,
                    ..plain
                },
                false,
                Place::Lane {
                    auto_inc: false,
                    ordered: false,
                },
            ),
            (
                "a non-transactional table stays parallel",
                Facts {
                    nontx: true,
                    ..plain
                },
                false,
                LANE,
            ),
            (
                "triggers: after everything, on the scheduler's connection, no fast path",
                Facts {
                    triggered: true,
                    ..plain
                },
                false,
                Place::Control {
                    after_everything: true,
                    fast_ok: false,
                },
            ),
            (
                "a sequence's next value: as a trigger",
                Facts {
                    takes_sequence: true,
                    ..plain
                },
                false,
                Place::Control {
                    after_everything: true,
                    fast_ok: false,
                },
            ),
            (
                "the ordered regime: in place, fast path allowed",
                Facts {
                    ordered_regime: true,
                    ..plain
                },
                false,
                Place::Control {
                    after_everything: false,
                    fast_ok: true,
                },
            ),
            (
                "the ordered regime, a table that does not roll back: no fast path",
                Facts {
                    ordered_regime: true,
                    nontx: true,
                    ..plain
                },
                false,
                Place::Control {
                    after_everything: false,
                    fast_ok: false,
                },
            ),
            (
                "--continue-on-error with server ids: one statement per transaction",
                Facts {
                    continue_on_error: true,
                    generates_ids: true,
                    ..plain
                },
                true,
                Place::Lane {
                    auto_inc: true,
                    ordered: true,
                },
            ),
            (
                "--continue-on-error with a trigger: per statement, in place",
                Facts {
                    continue_on_error: true,
                    triggered: true,
                    ..plain
                },
                true,
                Place::Control {
                    after_everything: true,
                    fast_ok: false,
                },
            ),
            (
                "--continue-on-error, plain rows: the batch whole",
                Facts {
                    continue_on_error: true,
                    ..plain
                },
                false,
                LANE,
            ),
        ];
        for (name, facts, per_statement, want) in rows {
            let p = place(facts);
            assert_eq!(p.per_statement, per_statement, "{name}: per statement");
            assert_eq!(p.place, want, "{name}: place");
        }
    }
}

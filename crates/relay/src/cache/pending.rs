//! What a client's open transaction will make stale when it commits: the
//! tables of every write in it (each write's own scope, as
//! `decide::write_tables` and the catalog give it) and the rows of those
//! that wrote rows by key (`row_key::write_key`), or everything once one
//! write's scope was everything. Each write is also made stale
//! around its own run (a non-transactional table's rows are seen at
//! once); the COMMIT then makes stale what the transaction wrote instead
//! of everything. A pure value the session keeps (`session/cached.rs`).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::cache::{Change, Scope};

/// Past this many tables' rows, a transaction's rows are kept as their
/// tables.
const MAX_ROWS: usize = 256;

/// The open transaction's writes so far (`None`: none).
#[derive(Debug, Default)]
pub struct Pending(Option<Change>);

/// Where a statement that may write stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// A COMMIT (one statement, read whole): what the transaction wrote.
    Commit,
    /// Inside a transaction (or with autocommit off).
    InTransaction,
    /// On its own (autocommit on, no transaction).
    Alone,
}

impl Pending {
    /// A statement that may write, whose own scope is `own`: the scope to
    /// make stale around its run.
    pub fn statement(&mut self, at: At, own: Change) -> Change {
        match at {
            At::Commit => self
                .0
                .take()
                .unwrap_or_else(|| Scope::Tables(Arc::new(BTreeSet::new())).into()),
            At::InTransaction => {
                self.0 = Some(match self.0.take() {
                    None => own.clone(),
                    Some(p) => union(p, &own),
                });
                own
            }
            At::Alone => {
                // (what a transaction rolled back left: nothing it wrote
                // was ever seen)
                self.0 = None;
                own
            }
        }
    }
}

fn union(a: Change, b: &Change) -> Change {
    let scope = match (&a.scope, &b.scope) {
        (Scope::Tables(x), Scope::Tables(y)) => {
            let mut all = (**x).clone();
            all.extend(y.iter().cloned());
            Scope::Tables(Arc::new(all))
        }
        _ => return Change::whole(),
    };
    let mut rows = (*a.rows).clone();
    rows.extend(b.rows.iter().cloned());
    let c = Change {
        scope,
        rows: Arc::new(rows),
    };
    if c.rows.len() > MAX_ROWS {
        c.tables_only().into()
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(names: &[&str]) -> Scope {
        Scope::Tables(Arc::new(names.iter().map(|n| n.to_string()).collect()))
    }

    /// A row: what it shows, the statements (where, own scope), what the
    /// last one makes stale.
    type Row = (&'static str, Vec<(At, Scope)>, Scope);

    /// One row per statement sequence.
    #[test]
    fn a_commit_makes_stale_what_its_transaction_wrote() {
        use At::*;
        let rows: Vec<Row> = vec![
            (
                "a write alone: its tables",
                vec![(Alone, t(&["a"]))],
                t(&["a"]),
            ),
            (
                "a write in a transaction: its tables now",
                vec![(InTransaction, t(&["a"]))],
                t(&["a"]),
            ),
            (
                "two writes, then COMMIT: both tables",
                vec![
                    (InTransaction, t(&["a"])),
                    (InTransaction, t(&["b"])),
                    (Commit, Scope::Whole),
                ],
                t(&["a", "b"]),
            ),
            (
                "one write of everything: COMMIT makes everything stale",
                vec![
                    (InTransaction, t(&["a"])),
                    (InTransaction, Scope::Whole),
                    (Commit, Scope::Whole),
                ],
                Scope::Whole,
            ),
            (
                "COMMIT of a transaction that wrote nothing",
                vec![(Commit, Scope::Whole)],
                t(&[]),
            ),
            (
                "a second COMMIT after the first",
                vec![
                    (InTransaction, t(&["a"])),
                    (Commit, Scope::Whole),
                    (Commit, Scope::Whole),
                ],
                t(&[]),
            ),
            (
                "a rolled-back transaction's writes, then a write alone, then a transaction",
                vec![
                    (InTransaction, t(&["old"])),
                    (Alone, t(&["x"])),
                    (InTransaction, t(&["b"])),
                    (Commit, Scope::Whole),
                ],
                t(&["b"]),
            ),
            (
                "a rolled-back transaction's writes carried into the next (more, never less)",
                vec![
                    (InTransaction, t(&["old"])),
                    (InTransaction, t(&["b"])),
                    (Commit, Scope::Whole),
                ],
                t(&["b", "old"]),
            ),
        ];
        for (what, steps, want) in rows {
            let mut p = Pending::default();
            let mut got = None;
            for (at, own) in steps {
                got = Some(p.statement(at, own.into()));
            }
            assert_eq!(got, Some(want.into()), "{what}");
        }
    }

    fn rows(table: &str, id: i128) -> Change {
        let keys = [("id".to_string(), [id].into())].into();
        Change {
            scope: t(&[]),
            rows: Arc::new(vec![(table.to_string(), keys)]),
        }
    }

    #[test]
    fn a_commit_makes_stale_the_rows_its_transaction_wrote_by_key() {
        let mut p = Pending::default();
        assert_eq!(p.statement(At::InTransaction, rows("a", 1)), rows("a", 1));
        p.statement(At::InTransaction, t(&["b"]).into());
        p.statement(At::InTransaction, rows("a", 2));
        let c = p.statement(At::Commit, Change::whole());
        assert_eq!(c.scope, t(&["b"]));
        assert_eq!(c.rows.len(), 2);
        assert_eq!(c.tables_only(), t(&["a", "b"]));
        // Past the bound: tables.
        for i in 0..=MAX_ROWS as i128 {
            p.statement(At::InTransaction, rows("a", i));
        }
        let c = p.statement(At::Commit, Change::whole());
        assert_eq!((c.scope, c.rows.len()), (t(&["a"]), 0));
        // Everything absorbs rows.
        p.statement(At::InTransaction, rows("a", 1));
        p.statement(At::InTransaction, Change::whole());
        assert_eq!(p.statement(At::Commit, Change::whole()), Change::whole());
    }
}

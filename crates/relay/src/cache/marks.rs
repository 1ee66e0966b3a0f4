//! When each part of what the cache may hold was last made stale, as
//! invalidation counts: everything, each table, and — for entries whose
//! read reads only the rows holding some values of one column
//! (`cache/row_key.rs`) — each such column's values. An entry is fresh
//! when nothing it reads was made stale after its read started.
//!
//! A change of rows (`cache/row_change.rs`) says, for the integer columns
//! it knows, which values the rows it touched held. It makes stale every
//! entry of the table that is not keyed, every entry keyed on a column it
//! does not know, and the entries keyed on one of the values it names or
//! on a range holding one — no other. The values' marks are ordered, so a
//! range's freshness is a walk over the marks inside it; past
//! [`MAX_WALK`] marks the entry counts as stale (a wide range of a table
//! written all over is not worth the walk). The columns entries are keyed
//! on are registered when the first of them is stored; a column
//! registered after a change of its table counts that change as not
//! knowing it (an entry read before it is not stored).
//!
//! Bounded: past [`MAX_TABLES`] tables, [`MAX_COLUMNS`] keyed columns or
//! [`MAX_VALUES`] marked values, the marks are forgotten and made
//! "everything" (or "every value of every column") from then.

use std::collections::{BTreeMap, BTreeSet};

use crate::cache::row_change::Keys;
use crate::cache::row_key::Rows;
use crate::cache::{HashMap, Scope};

const MAX_TABLES: usize = 100_000;
const MAX_COLUMNS: usize = 10_000;
const MAX_VALUES: usize = 262_144;
/// At most this many marks walked for a range's freshness.
const MAX_WALK: usize = 4096;

/// What a keyed entry reads: the rows of `table` whose column `col` (a
/// registered column's number) holds what `rows` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyed {
    pub table: String,
    pub col: u64,
    pub rows: Rows,
}

#[derive(Default)]
pub struct Marks {
    /// The count at the last invalidation of everything, and of any kind.
    pub whole_at: u64,
    pub any_at: u64,
    tables_at: HashMap<String, u64>,
    /// The last change of rows of each table.
    rows_at: HashMap<String, u64>,
    /// Keyed columns' numbers by (table, column), and by table. A number
    /// is never given twice: one forgotten is stale for good.
    cols: HashMap<(String, String), u64>,
    cols_of: HashMap<String, Vec<(String, u64)>>,
    next: u64,
    /// By column number: the last change of its table's rows that did
    /// not know the column.
    unknown_at: HashMap<u64, u64>,
    /// By (column number, value): the last change of a row holding it.
    val_at: BTreeMap<(u64, i128), u64>,
}

impl Marks {
    /// Whether a read of `reads` (keyed as `keyed`) started at count
    /// `since` is still what the server would answer.
    pub fn fresh(&self, since: u64, reads: &Scope, keyed: Option<&Keyed>) -> bool {
        // Nothing invalidated since: the common case of a read-mostly
        // load, without a name looked up.
        if self.any_at <= since {
            return true;
        }
        let Scope::Tables(t) = reads else {
            return false;
        };
        let after = |m: &HashMap<String, u64>, n: &str| m.get(n).is_some_and(|at| *at > since);
        if self.whole_at > since
            || t.iter().any(|n| {
                after(&self.tables_at, n)
                    || (keyed.is_none_or(|k| k.table != *n) && after(&self.rows_at, n))
            })
        {
            return false;
        }
        let Some(k) = keyed else {
            return true;
        };
        if self.unknown_at.get(&k.col).is_none_or(|at| *at > since) {
            return false;
        }
        match &k.rows {
            Rows::In(vals) => vals
                .iter()
                .all(|v| self.val_at.get(&(k.col, *v)).is_none_or(|at| *at <= since)),
            Rows::Range(lo, hi) if lo > hi => true,
            Rows::Range(lo, hi) => {
                let mut marks = self.val_at.range((k.col, *lo)..=(k.col, *hi));
                marks.by_ref().take(MAX_WALK).all(|(_, at)| *at <= since) && marks.next().is_none()
            }
        }
    }

    /// Everything is stale from count `now`.
    pub fn whole(&mut self, now: u64) {
        self.any_at = now;
        self.whole_at = now;
    }

    /// These tables (every entry that reads one) are stale from `now`.
    pub fn tables(&mut self, now: u64, names: &BTreeSet<String>) {
        self.any_at = now;
        if self.tables_at.len() > MAX_TABLES {
            self.tables_at.clear();
            self.whole_at = now;
        }
        for n in names {
            self.tables_at.insert(n.clone(), now);
        }
    }

    /// Rows of `table` changed at `now`, holding the values `keys` gives
    /// (for the columns it knows).
    pub fn rows(&mut self, now: u64, table: &str, keys: &Keys) {
        self.any_at = now;
        if self.rows_at.len() > MAX_TABLES {
            self.rows_at.clear();
            self.whole_at = now;
        }
        self.rows_at.insert(table.to_string(), now);
        let Some(cols) = self.cols_of.get(table) else {
            return;
        };
        for (c, id) in cols {
            match keys.get(c) {
                Some(vals) => {
                    for v in vals {
                        self.val_at.insert((*id, *v), now);
                    }
                }
                None => {
                    if let Some(at) = self.unknown_at.get_mut(id) {
                        *at = now;
                    }
                }
            }
        }
        if self.val_at.len() > MAX_VALUES {
            self.val_at.clear();
            for at in self.unknown_at.values_mut() {
                *at = now;
            }
        }
    }

    /// The number of keyed column `col` of `table`, registered if new.
    pub fn column(&mut self, table: &str, col: &str) -> u64 {
        if let Some(id) = self.cols.get(&(table.to_string(), col.to_string())) {
            return *id;
        }
        if self.cols.len() >= MAX_COLUMNS {
            // (Entries keyed on the numbers forgotten are stale: no
            // number is found for them.)
            self.cols.clear();
            self.cols_of.clear();
            self.unknown_at.clear();
            self.val_at.clear();
        }
        let id = self.next;
        self.next += 1;
        // Every change of the table so far did not know it.
        self.unknown_at
            .insert(id, self.rows_at.get(table).copied().unwrap_or(0));
        self.cols.insert((table.to_string(), col.to_string()), id);
        self.cols_of
            .entry(table.to_string())
            .or_default()
            .push((col.to_string(), id));
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn tables(names: &[&str]) -> Scope {
        Scope::Tables(Arc::new(names.iter().map(|n| n.to_string()).collect()))
    }

    /// An entry keyed on table t's column number `col`.
    fn keyed(col: u64, vals: &[i128]) -> Keyed {
        Keyed {
            table: "t".into(),
            col,
            rows: Rows::In(vals.into()),
        }
    }

    fn ranged(col: u64, lo: i128, hi: i128) -> Keyed {
        Keyed {
            table: "t".into(),
            col,
            rows: Rows::Range(lo, hi),
        }
    }

    fn keys(cols: &[(&str, &[i128])]) -> Keys {
        cols.iter()
            .map(|(c, v)| (c.to_string(), v.iter().copied().collect()))
            .collect()
    }

    /// Entries read at count 1 (keyed on t.id = 7, on t.id IN (8, 9), on
    /// t.k = 7, not keyed, and reading another table), then one change
    /// at count 2: which are fresh after it.
    #[test]
    fn a_change_of_rows_makes_stale_only_what_reads_them() {
        type Change = fn(&mut Marks);
        let rows: Vec<(&str, Change, [bool; 5])> = vec![
            ("nothing", |_| {}, [true; 5]),
            (
                "row id 7",
                |m| m.rows(2, "t", &keys(&[("id", &[7]), ("k", &[1])])),
                [false, true, true, false, true],
            ),
            (
                "rows id 9 and 10",
                |m| m.rows(2, "t", &keys(&[("id", &[9, 10]), ("k", &[1])])),
                [true, false, true, false, true],
            ),
            (
                "a row with k 7",
                |m| m.rows(2, "t", &keys(&[("id", &[1]), ("k", &[7])])),
                [true, true, false, false, true],
            ),
            (
                "no column known",
                |m| m.rows(2, "t", &keys(&[])),
                [false, false, false, false, true],
            ),
            (
                "id not known",
                |m| m.rows(2, "t", &keys(&[("k", &[1])])),
                [false, false, true, false, true],
            ),
            (
                "no row",
                |m| m.rows(2, "t", &keys(&[("id", &[]), ("k", &[])])),
                [true, true, true, false, true],
            ),
            (
                "another table's rows",
                |m| m.rows(2, "u", &keys(&[("id", &[7])])),
                [true, true, true, true, false],
            ),
            (
                "the table whole",
                |m| m.tables(2, &["t".to_string()].into()),
                [false, false, false, false, true],
            ),
            ("everything", |m| m.whole(2), [false; 5]),
        ];
        for (what, change, want) in rows {
            let mut m = Marks::default();
            m.tables(1, &["x".to_string()].into());
            let id = m.column("t", "id");
            let k = m.column("t", "k");
            assert_eq!(m.column("t", "id"), id);
            let entries = [
                Some(keyed(id, &[7])),
                Some(keyed(id, &[8, 9])),
                Some(keyed(k, &[7])),
                None,
            ];
            change(&mut m);
            let mut got = [false; 5];
            for (i, e) in entries.iter().enumerate() {
                got[i] = m.fresh(1, &tables(&["t", "id", "c"]), e.as_ref());
            }
            got[4] = m.fresh(1, &tables(&["u"]), None);
            assert_eq!(got, want, "{what}");
        }
    }

    /// Entries read at count 1, keyed on t.id in 5..=10, in 10..=5 (no
    /// row), up to 0, and on t.k in 5..=10; then one change at count 2.
    #[test]
    fn a_change_of_rows_makes_stale_the_ranges_holding_them() {
        let rows: Vec<(&str, &[i128], [bool; 4])> = vec![
            ("id 7", &[7], [false, true, true, true]),
            ("id 5", &[5], [false, true, true, true]),
            ("id 10", &[10], [false, true, true, true]),
            ("id 4 and 11", &[4, 11], [true, true, true, true]),
            ("id 0", &[0], [true, true, false, true]),
            ("id -2^63", &[-(1 << 63)], [true, true, false, true]),
            ("no row", &[], [true, true, true, true]),
        ];
        for (what, ids, want) in rows {
            let mut m = Marks::default();
            let id = m.column("t", "id");
            let k = m.column("t", "k");
            m.rows(1, "t", &keys(&[("id", &[6, 1]), ("k", &[1])]));
            let entries = [
                ranged(id, 5, 10),
                ranged(id, 10, 5),
                ranged(id, i128::MIN, 0),
                ranged(k, 5, 10),
            ];
            m.rows(2, "t", &keys(&[("id", ids), ("k", &[1])]));
            let got = entries.map(|e| m.fresh(1, &tables(&["t"]), Some(&e)));
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn a_range_past_the_walk_is_stale() {
        let mut m = Marks::default();
        let id = m.column("t", "id");
        let old: Vec<i128> = (0..MAX_WALK as i128).collect();
        m.rows(1, "t", &keys(&[("id", &old)]));
        m.rows(2, "t", &keys(&[("id", &[MAX_WALK as i128])]));
        m.rows(3, "u", &keys(&[]));
        // (every mark older than the read)
        let walk = ranged(id, 1, MAX_WALK as i128);
        assert!(
            m.fresh(2, &tables(&["t"]), Some(&walk)),
            "as many as the walk"
        );
        let more = ranged(id, 0, MAX_WALK as i128);
        assert!(!m.fresh(2, &tables(&["t"]), Some(&more)), "one more");
    }

    #[test]
    fn a_column_registered_after_a_change_of_its_table_counts_it() {
        let mut m = Marks::default();
        m.rows(5, "t", &keys(&[("id", &[1])]));
        let id = m.column("t", "id");
        let e = keyed(id, &[7]);
        assert!(
            !m.fresh(4, &tables(&["t"]), Some(&e)),
            "read before the change"
        );
        assert!(m.fresh(5, &tables(&["t"]), Some(&e)), "read after it");
    }

    #[test]
    fn a_keyed_entry_is_stale_when_another_table_it_names_changes() {
        let mut m = Marks::default();
        let id = m.column("t", "id");
        let e = keyed(id, &[7]);
        m.rows(2, "c", &keys(&[("id", &[1])]));
        assert!(!m.fresh(1, &tables(&["t", "c"]), Some(&e)));
    }

    #[test]
    fn past_the_bounds_marks_are_forgotten_as_everything() {
        let mut m = Marks::default();
        let id = m.column("t", "id");
        let e = keyed(id, &[-1]);
        let many: Vec<i128> = (0..MAX_VALUES as i128 + 1).collect();
        m.rows(2, "t", &keys(&[("id", &many)]));
        assert!(
            !m.fresh(1, &tables(&["t"]), Some(&e)),
            "a value forgotten is stale"
        );
        let mut m = Marks::default();
        let first = m.column("t", "c0");
        for i in 1..=MAX_COLUMNS {
            m.column("t", &format!("c{i}"));
        }
        let e = keyed(first, &[1]);
        m.any_at = 3;
        assert!(
            !m.fresh(2, &tables(&["t"]), Some(&e)),
            "its number forgotten"
        );
        let again = m.column("t", "c0");
        assert_ne!(again, first);
    }
}

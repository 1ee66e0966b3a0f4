//! The writes through the relay in flight: sent, their reply not yet
//! passed on. A read's result may not be stored while a write in flight
//! may change what it reads: the read may have seen the server before the
//! write's commit, and the write's client gets its reply before the
//! write's second invalidation (`cache.rs`, [`crate::cache::Write`]), so
//! an entry stored in between would be older than a write its client
//! already knows of. A read of other tables, or of other rows of the same
//! table by a key (`cache/row_key.rs`), is stored as if no write were in
//! flight: with a write mix, only what the writes touch waits.

use crate::cache::row_key::RowKey;
use crate::cache::{Change, Scope};

/// The changes of the writes in flight, each by its number.
#[derive(Default)]
pub struct Flying {
    next: u64,
    changes: Vec<(u64, Change)>,
}

impl Flying {
    /// A write of `change` is sent: its number.
    pub fn begin(&mut self, change: Change) -> u64 {
        self.next += 1;
        self.changes.push((self.next, change));
        self.next
    }

    /// Write `id`'s reply is in.
    pub fn end(&mut self, id: u64) {
        self.changes.retain(|(n, _)| *n != id);
    }

    /// Whether a write in flight may change what a read of `reads`
    /// (keyed as `key`) reads.
    pub fn holds(&self, reads: &Scope, key: Option<&RowKey>) -> bool {
        self.changes.iter().any(|(_, c)| may_change(c, reads, key))
    }

    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }
}

/// Whether `c` may change what a read of `reads` (keyed as `key`) reads:
/// a table it reads changed whole, or rows of one — unless the read is
/// keyed on that table, the change knows the key's column, and none of
/// the values it names is among the key's values or in its range.
pub fn may_change(c: &Change, reads: &Scope, key: Option<&RowKey>) -> bool {
    let (Scope::Tables(read), Scope::Tables(whole)) = (reads, &c.scope) else {
        return true;
    };
    if read.iter().any(|n| whole.contains(n)) {
        return true;
    }
    c.rows.iter().any(|(table, keys)| {
        if !read.contains(table) {
            return false;
        }
        let Some(k) = key.filter(|k| k.table == *table) else {
            return true;
        };
        keys.get(&k.col).is_none_or(|vals| k.rows.meets(vals))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::row_key::Rows;
    use std::sync::Arc;

    fn tables(names: &[&str]) -> Scope {
        Scope::Tables(Arc::new(names.iter().map(|n| n.to_string()).collect()))
    }

    /// Rows of t whose columns held these values.
    fn rows(cols: &[(&str, &[i128])]) -> Change {
        let keys = cols
            .iter()
            .map(|(c, v)| (c.to_string(), v.iter().copied().collect()))
            .collect();
        Change {
            scope: tables(&[]),
            rows: Arc::new(vec![("t".to_string(), keys)]),
        }
    }

    fn key(col: &str, rows: Rows) -> RowKey {
        RowKey {
            table: "t".into(),
            col: col.into(),
            rows,
        }
    }

    /// Reads of t (keyed on id = 7, id IN (8, 9), id in 5..=10, id in
    /// 10..=5, k = 7, not keyed) and of u, beside one write in flight.
    #[test]
    fn a_read_waits_only_for_a_write_that_may_change_it() {
        let rows_of: Vec<(&str, Change, [bool; 7])> = vec![
            (
                "row id 7",
                rows(&[("id", &[7]), ("k", &[1])]),
                [true, false, true, false, false, true, false],
            ),
            (
                "row id 9",
                rows(&[("id", &[9])]),
                [false, true, true, false, true, true, false],
            ),
            (
                "row id 11, k 7",
                rows(&[("id", &[11]), ("k", &[7])]),
                [false, false, false, false, true, true, false],
            ),
            (
                "no column known",
                rows(&[]),
                [true, true, true, true, true, true, false],
            ),
            (
                "no row",
                rows(&[("id", &[]), ("k", &[])]),
                [false, false, false, false, false, true, false],
            ),
            (
                "table t whole",
                tables(&["t"]).into(),
                [true, true, true, true, true, true, false],
            ),
            (
                "table u whole",
                tables(&["u"]).into(),
                [false, false, false, false, false, false, true],
            ),
            ("nothing", tables(&[]).into(), [false; 7]),
            ("everything", Change::whole(), [true; 7]),
        ];
        let keys = [
            Some(key("id", Rows::In(Box::new([7])))),
            Some(key("id", Rows::In(Box::new([8, 9])))),
            Some(key("id", Rows::Range(5, 10))),
            Some(key("id", Rows::Range(10, 5))),
            Some(key("k", Rows::In(Box::new([7])))),
            None,
        ];
        for (what, change, want) in rows_of {
            let mut f = Flying::default();
            let id = f.begin(change);
            let mut got = [false; 7];
            for (i, k) in keys.iter().enumerate() {
                got[i] = f.holds(&tables(&["t", "id", "c"]), k.as_ref());
            }
            got[6] = f.holds(&tables(&["u"]), None);
            assert_eq!(got, want, "{what}");
            f.end(id);
            assert!(!f.holds(&Scope::Whole, None), "{what}: ended");
        }
    }

    #[test]
    fn a_read_of_anything_waits_for_every_write() {
        let mut f = Flying::default();
        assert!(!f.holds(&Scope::Whole, None), "none in flight");
        let a = f.begin(tables(&["u"]).into());
        let b = f.begin(rows(&[("id", &[1])]));
        assert!(f.holds(&Scope::Whole, None));
        f.end(a);
        assert!(f.holds(&Scope::Whole, None), "b still flies");
        f.end(b);
        assert!(f.is_empty());
    }
}

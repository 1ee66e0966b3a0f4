//! The rows statements of consecutive transactions in a chunk, applied as
//! one statement on the target.
//!
//! A chunk commits as one target transaction, so nothing between its
//! source transactions can be seen there. The target's row applier opens
//! and locks the tables of each statement, applies its rows and closes
//! them at the event flagged end-of-statement. Per source statement that
//! costs about as much as the rows of a small transaction. Merged, a run
//! of statements is one: every table map once, then every rows event in
//! source order, the end flag on the last one only. The rows are the same
//! and apply in the same order.
//!
//! Merged only when that is exactly the same work:
//! - every event of each statement has the framing its [`Layout`] says,
//!   read back here; anything else goes as it came;
//! - a table id maps the same table in every statement merged (the same
//!   table map bytes after the header): a source restart may reuse an id
//!   for another table, and that ends the merge;
//! - every rows event has the same flags (foreign key and unique checks
//!   off or on): the target takes them from a statement's first rows
//!   event only;
//! - the merged statement stays under the `BINLOG` size limit.
//!
//! Written by hand, as event.rs: the binlog library reads these events but
//! does not rewrite them. Table-tested below and fuzzed
//! (`replicate_event`).

use crate::event::{self, HEADER_LEN, STMT_END_F};
use crate::txn::{Layout, Rows};

const TABLE_MAP: u8 = 19;
const ROWS_TYPES: [u8; 6] = [23, 24, 25, 30, 31, 32];

/// Statements merged so far.
#[derive(Debug, Default)]
pub struct Merged {
    layout: Option<Layout>,
    /// Each table map taken: its id and its bytes after the header.
    maps: Vec<(u64, Vec<u8>)>,
    map_bytes: Vec<u8>,
    rows: Vec<u8>,
    last_rows_at: Option<usize>,
    /// The rows events' flags, end flag aside.
    flags: Option<u16>,
    statements: usize,
}

/// What [`Merged::add`] did with a statement.
#[derive(Debug, PartialEq, Eq)]
pub enum Add {
    /// Merged.
    Taken,
    /// Not now: take what is merged, then add it again.
    Full,
    /// Never: it goes to the target as it came.
    Alone,
}

/// A statement read back: its table maps and rows events.
struct Read<'a> {
    maps: Vec<(u64, &'a [u8], &'a [u8])>,
    rows: Vec<&'a [u8]>,
    flags: u16,
}

/// The events of `raw`, each framed by its header's length; `None` when
/// the lengths do not tile it.
fn events(raw: &[u8]) -> Option<Vec<&[u8]>> {
    let mut out = Vec::new();
    let mut p = 0;
    while p < raw.len() {
        let size = raw.get(p + 9..p + 13)?;
        let size = u32::from_le_bytes([size[0], size[1], size[2], size[3]]) as usize;
        if size < HEADER_LEN || size > raw.len() - p {
            return None;
        }
        out.push(&raw[p..p + size]);
        p += size;
    }
    Some(out)
}

fn read(raw: &[u8], l: Layout) -> Option<Read<'_>> {
    let all = events(raw)?;
    let n_maps = all.iter().take_while(|e| e[4] == TABLE_MAP).count();
    let (maps, rows) = all.split_at(n_maps);
    if maps.is_empty() || rows.is_empty() || rows.iter().any(|e| !ROWS_TYPES.contains(&e[4])) {
        return None;
    }
    let crc = if l.crc { event::CRC_LEN } else { 0 };
    let mut read_maps = Vec::with_capacity(maps.len());
    for m in maps {
        let tm = event::table_map(m, l.crc, l.map_ph).ok()?;
        if l.crc && !event::crc_ok(m) {
            return None;
        }
        read_maps.push((tm.table_id, &m[HEADER_LEN..m.len() - crc], *m));
    }
    let mut flags = None;
    for r in rows {
        let (id, f) = event::rows_header(r, l.rows_ph).ok()?;
        if (l.crc && !event::crc_ok(r)) || !read_maps.iter().any(|(m, _, _)| *m == id) {
            return None;
        }
        let f = f & !STMT_END_F;
        if flags.is_some_and(|g| g != f) {
            return None;
        }
        flags = Some(f);
    }
    Some(Read {
        maps: read_maps,
        rows: rows.to_vec(),
        flags: flags?,
    })
}

impl Merged {
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Bytes of the merged statement.
    pub fn len(&self) -> usize {
        self.map_bytes.len() + self.rows.len()
    }

    /// Merges `r` if that is the same work (module doc), keeping the
    /// statement at most `cap` bytes unless it is the first.
    pub fn add(&mut self, r: &Rows, cap: usize) -> Add {
        let Some(l) = r.layout else {
            return Add::Alone;
        };
        let Some(s) = read(&r.bytes, l) else {
            return Add::Alone;
        };
        // The rows events with their end flags cleared, edited apart
        // first: a flag left set inside the merged statement would end it
        // there, and the target would skip the rows after it (their
        // tables no longer mapped) without an error.
        let mut rows = Vec::with_capacity(r.bytes.len());
        let mut last = 0;
        for e in &s.rows {
            last = rows.len();
            rows.extend_from_slice(e);
            if event::clear_stmt_end(&mut rows[last..], l.crc, l.rows_ph).is_err() {
                return Add::Alone;
            }
        }
        if !self.is_empty() {
            let clash = s.maps.iter().any(|(id, body, _)| {
                self.maps
                    .iter()
                    .any(|(have, b)| have == id && b.as_slice() != *body)
            });
            if self.layout != Some(l)
                || self.flags != Some(s.flags)
                || clash
                || self.len() + r.bytes.len() > cap
            {
                return Add::Full;
            }
        }
        self.layout = Some(l);
        self.flags = Some(s.flags);
        for (id, body, raw) in s.maps {
            if !self.maps.iter().any(|(have, _)| *have == id) {
                self.maps.push((id, body.to_vec()));
                self.map_bytes.extend_from_slice(raw);
            }
        }
        self.last_rows_at = Some(self.rows.len() + last);
        self.rows.extend_from_slice(&rows);
        self.statements += 1;
        Add::Taken
    }

    /// The merged statement (table maps, then rows events, the last one
    /// flagged end-of-statement), and a fresh start.
    pub fn take(&mut self) -> Vec<u8> {
        let mut done = std::mem::take(self);
        if let (Some(at), Some(l)) = (done.last_rows_at, done.layout) {
            // Its flag was cleared by the same edit at the same offset
            // (`add`), so setting it cannot fail.
            let _ = event::set_stmt_end(&mut done.rows[at..], l.crc, l.rows_ph);
        }
        let mut out = done.map_bytes;
        out.extend_from_slice(&done.rows);
        out
    }

    /// How many source statements the merged one holds.
    pub fn statements(&self) -> usize {
        self.statements
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{crc_map as map, crc_rows as rows};
    use proptest::prelude::*;

    const L: Layout = Layout {
        crc: true,
        map_ph: 8,
        rows_ph: 8,
    };

    fn stmt(events: &[Vec<u8>]) -> Rows {
        Rows {
            bytes: events.concat(),
            what: String::new(),
            layout: Some(L),
        }
    }

    fn flags_of(e: &[u8]) -> u16 {
        event::rows_header(e, 8).map(|(_, f)| f).unwrap_or(u16::MAX)
    }

    #[test]
    fn statements_merge_into_one_with_each_map_once_and_one_end() {
        let (m1, m2) = (map(7, "a"), map(8, "b"));
        let (r1, r2, r3) = (
            rows(24, 7, 1, b"one"),
            rows(23, 8, 0, b"two"),
            rows(23, 8, 1, b"three"),
        );
        let mut m = Merged::default();
        assert_eq!(m.add(&stmt(&[m1.clone(), r1.clone()]), 1 << 20), Add::Taken);
        assert_eq!(
            m.add(
                &stmt(&[m2.clone(), m1.clone(), r2.clone(), r3.clone()]),
                1 << 20
            ),
            Add::Taken
        );
        assert_eq!(m.statements(), 2);
        let out = m.take();
        let ev = events(&out).expect("framed");
        assert_eq!(ev.len(), 5, "two maps, three rows events");
        assert_eq!(
            (ev[0], ev[1]),
            (&m1[..], &m2[..]),
            "each map once, first seen first"
        );
        let flags: Vec<u16> = ev[2..].iter().map(|e| flags_of(e)).collect();
        assert_eq!(flags, [0, 0, 1], "the end flag on the last only");
        assert!(ev.iter().all(|e| event::crc_ok(e)), "every CRC fixed");
        // The rows are the source's, in order, flags aside.
        for (got, want) in ev[2..].iter().zip([&r1, &r2, &r3]) {
            assert_eq!(
                got[HEADER_LEN + 8..got.len() - 4],
                want[HEADER_LEN + 8..want.len() - 4]
            );
        }
        assert!(m.is_empty() && m.take().is_empty(), "a fresh start");
    }

    #[test]
    fn what_ends_a_merge_and_what_is_never_merged() {
        let base = stmt(&[map(7, "a"), rows(23, 7, 1, b"x")]);
        // (statement, what add says after `base`)
        let other_table_same_id = stmt(&[map(7, "z"), rows(23, 7, 1, b"y")]);
        let checks_off = stmt(&[map(7, "a"), rows(23, 7, 1 | 2, b"y")]);
        let other_layout = Rows {
            layout: Some(Layout {
                crc: true,
                map_ph: 8,
                rows_ph: 10,
            }),
            ..base.clone()
        };
        let no_layout = Rows {
            layout: None,
            ..base.clone()
        };
        let no_map = stmt(&[rows(23, 7, 1, b"y")]);
        let unmapped_id = stmt(&[map(7, "a"), rows(23, 9, 1, b"y")]);
        let mixed_flags = stmt(&[map(7, "a"), rows(23, 7, 2, b"y"), rows(23, 7, 1, b"z")]);
        let mut bad_crc = stmt(&[map(7, "a"), rows(23, 7, 1, b"y")]);
        let n = bad_crc.bytes.len();
        bad_crc.bytes[n - 1] ^= 1;
        let truncated = Rows {
            bytes: base.bytes[..base.bytes.len() - 1].to_vec(),
            ..base.clone()
        };
        let query = stmt(&[map(7, "a"), rows(2, 7, 1, b"y")]);
        let rows_then_map = stmt(&[map(7, "a"), rows(23, 7, 0, b"y"), map(8, "b")]);
        let cases: [(&str, &Rows, Add); 11] = [
            ("the same table again", &base, Add::Taken),
            (
                "another table under the same id",
                &other_table_same_id,
                Add::Full,
            ),
            ("other checks flags", &checks_off, Add::Full),
            ("another framing", &other_layout, Add::Full),
            ("framing unknown", &no_layout, Add::Alone),
            ("rows without a map", &no_map, Add::Alone),
            ("rows of an id it does not map", &unmapped_id, Add::Alone),
            ("flags that differ inside it", &mixed_flags, Add::Alone),
            ("a CRC that does not match", &bad_crc, Add::Alone),
            ("cut short", &truncated, Add::Alone),
            ("an event that is not rows", &query, Add::Alone),
        ];
        for (what, s, want) in cases {
            let mut m = Merged::default();
            assert_eq!(m.add(&base, 1 << 20), Add::Taken, "{what}");
            assert_eq!(m.add(s, 1 << 20), want, "{what}");
        }
        let mut m = Merged::default();
        assert_eq!(
            m.add(&rows_then_map, 1 << 20),
            Add::Alone,
            "a map after rows"
        );
        // The size cap, but never for the first statement.
        let mut m = Merged::default();
        assert_eq!(m.add(&base, 1), Add::Taken, "the first always");
        assert_eq!(m.add(&base, base.bytes.len() * 2 - 1), Add::Full);
        assert_eq!(m.add(&base, base.bytes.len() * 2), Add::Taken);
    }

    proptest! {
        #[test]
        fn any_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..200), crc: bool, ph in 0u8..12) {
            let r = Rows { bytes: raw, what: String::new(), layout: Some(Layout { crc, map_ph: ph, rows_ph: ph }) };
            let mut m = Merged::default();
            let _ = m.add(&r, 1 << 20);
            let _ = m.add(&r, 1 << 20);
            let _ = m.take();
        }

        #[test]
        fn merged_rows_are_every_statements_rows_in_order(bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..20), 1..12), tables in proptest::collection::vec(0u64..3, 1..12)) {
            let mut m = Merged::default();
            let mut want = Vec::new();
            for (i, b) in bodies.iter().enumerate() {
                let id = tables[i % tables.len()];
                let r = rows(23 + (i % 3) as u8, id, 1, b);
                want.push(r[HEADER_LEN + 8..r.len() - 4].to_vec());
                prop_assert_eq!(m.add(&stmt(&[map(id, &format!("t{id}")), r]), 1 << 20), Add::Taken);
            }
            let out = m.take();
            let ev = events(&out).expect("framed");
            let n_maps = ev.iter().take_while(|e| e[4] == TABLE_MAP).count();
            let got: Vec<Vec<u8>> = ev[n_maps..].iter().map(|e| e[HEADER_LEN + 8..e.len() - 4].to_vec()).collect();
            prop_assert_eq!(got, want);
            let ends = ev[n_maps..].iter().filter(|e| flags_of(e) & STMT_END_F != 0).count();
            prop_assert_eq!(ends, 1);
            prop_assert!(flags_of(ev[ev.len() - 1]) & STMT_END_F != 0);
        }
    }
}

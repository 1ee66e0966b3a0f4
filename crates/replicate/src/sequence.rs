//! A sequence's state written with a partial row image, applied as a full
//! row.
//!
//! With `binlog_row_image=MINIMAL`, MariaDB logs a sequence's refill
//! (NEXTVAL past its cache) as a Write_rows event holding only the
//! columns that changed. Its own replica applies that; a `BINLOG`
//! statement does not — the target fills the missing columns with zeros
//! and refuses the row (ER_SEQUENCE_INVALID_DATA, 4085, on 10.11; 11.4
//! says ER_UNKNOWN_ERROR, 1105, for the same row: [`refusal`];
//! `mariadb-binlog | mariadb` fails the same way). Only on that error, and only for a
//! Write_rows event whose table map has a sequence's exact columns, the
//! applier reads the target's current row, lays the logged columns over
//! it and writes the whole row with `INSERT INTO db.seq VALUES (...)`,
//! which is how MariaDB lets a full sequence row be written. Anything
//! that does not decode exactly stays the error it was.
//!
//! Hand-decoded (fixed-width integer columns only): the binlog library
//! needs the whole event stream's state to decode one rows event.

use crate::event::{crc_ok, CRC_LEN, HEADER_LEN};

/// The server's error for a row a sequence refuses.
pub const ER_SEQUENCE_INVALID_DATA: u16 = 4085;

/// Whether a `BINLOG` statement's error may be a sequence refusing a
/// partially logged row: 4085 (MariaDB 10.11), or 1105 "Unknown error",
/// which 11.4 answers for the same row (measured). Either is only taken
/// for one when an event of the statement decodes as such a row.
pub fn refusal(code: u16) -> bool {
    matches!(code, ER_SEQUENCE_INVALID_DATA | 1105)
}

/// A sequence table's columns, in order: next_not_cached_value,
/// minimum_value, maximum_value, start_value, increment, cache_size,
/// cycle_option, cycle_count (MYSQL_TYPE_LONGLONG = 8, TINY = 1).
const TYPES: [u8; 8] = [8, 8, 8, 8, 8, 8, 1, 8];
pub const COLUMNS: [&str; 8] = [
    "next_not_cached_value",
    "minimum_value",
    "maximum_value",
    "start_value",
    "increment",
    "cache_size",
    "cycle_option",
    "cycle_count",
];

/// The columns one Write_rows event logged for a sequence, as raw 64-bit
/// values (signedness is the column's: the caller prints them so).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partial {
    pub db: String,
    pub table: String,
    pub values: [Option<u64>; 8],
}

impl Partial {
    /// The value of column `i` as SQL text, given the target's current
    /// value for the columns the event left out.
    pub fn literal(&self, i: usize, current: u64) -> String {
        let v = self.values[i].unwrap_or(current);
        // cache_size and cycle_option are unsigned; the others signed.
        if i == 5 || i == 6 {
            v.to_string()
        } else {
            (v as i64).to_string()
        }
    }
}

fn body(raw: &[u8]) -> Option<&[u8]> {
    let end = if crc_ok(raw) {
        raw.len().checked_sub(CRC_LEN)?
    } else {
        raw.len()
    };
    raw.get(HEADER_LEN..end)
}

/// A table map's database, table and column types (MariaDB's 8-byte post
/// header).
fn table_map(raw: &[u8]) -> Option<(u64, String, String, Vec<u8>)> {
    if raw.get(4) != Some(&19) {
        return None;
    }
    let b = body(raw)?;
    let mut id = [0u8; 8];
    id[..6].copy_from_slice(b.get(..6)?);
    let mut p = 8;
    let mut name = || -> Option<String> {
        let n = *b.get(p)? as usize;
        let s = String::from_utf8_lossy(b.get(p + 1..p + 1 + n)?).into_owned();
        p += n + 2;
        Some(s)
    };
    let db = name()?;
    let table = name()?;
    let n = *b.get(p)? as usize;
    if n >= 251 {
        return None;
    }
    let types = b.get(p + 1..p + 1 + n)?.to_vec();
    Some((u64::from_le_bytes(id), db, table, types))
}

/// Reads a Write_rows event (v1 or v2) of a table whose map is one of
/// `maps`, when that table has a sequence's columns and the event logs
/// rows with some of them left out: one per refill (a statement that
/// passed the cache twice, `DO NEXTVAL(s), NEXTVAL(s), NEXTVAL(s)` with
/// `CACHE 2`, logs two in one event). Each row replaces the sequence's
/// one row and every row has the same columns, so the last one's values
/// are the state they leave.
pub fn partial_write(maps: &[&[u8]], ev: &[u8]) -> Option<Partial> {
    let ty = *ev.get(4)?;
    if ty != 23 && ty != 30 {
        return None;
    }
    let b = body(ev)?;
    let mut id = [0u8; 8];
    id[..6].copy_from_slice(b.get(..6)?);
    let id = u64::from_le_bytes(id);
    let mut p = 8;
    if ty == 30 {
        let extra = u16::from_le_bytes([*b.get(8)?, *b.get(9)?]) as usize;
        p = 8 + extra.max(2);
    }
    let (_, db, table, types) = maps
        .iter()
        .filter_map(|m| table_map(m))
        .find(|m| m.0 == id)?;
    if types != TYPES {
        return None;
    }
    if *b.get(p)? != 8 {
        return None;
    }
    let present = *b.get(p + 1)?;
    if present == 0xff {
        return None;
    }
    p += 2;
    let mut values = [None; 8];
    let mut rows = 0;
    // Whole rows up to the event's end, nothing after the last.
    while p < b.len() {
        let nulls = *b.get(p)?;
        p += 1;
        let mut k = 0;
        for (i, v) in values.iter_mut().enumerate() {
            if present & (1 << i) == 0 {
                continue;
            }
            let null = nulls & (1 << k) != 0;
            k += 1;
            if null {
                return None;
            }
            let w = if TYPES[i] == 1 { 1 } else { 8 };
            let mut x = [0u8; 8];
            x[..w].copy_from_slice(b.get(p..p + w)?);
            *v = Some(u64::from_le_bytes(x));
            p += w;
        }
        rows += 1;
    }
    (rows > 0 && p == b.len()).then_some(Partial { db, table, values })
}

/// Raw events of one `BINLOG` piece.
pub type Events<'a> = Vec<&'a [u8]>;

/// Splits one `BINLOG` piece into its table maps and its other events.
pub fn split(raw: &[u8]) -> Option<(Events<'_>, Events<'_>)> {
    let mut maps = Vec::new();
    let mut rest = Vec::new();
    let mut p = 0;
    while p < raw.len() {
        let size = u32::from_le_bytes(raw.get(p + 9..p + 13)?.try_into().ok()?) as usize;
        if size < HEADER_LEN {
            return None;
        }
        let e = raw.get(p..p + size)?;
        if e[4] == 19 {
            maps.push(e);
        } else {
            rest.push(e);
        }
        p += size;
    }
    Some((maps, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn event(ty: u8, body: &[u8]) -> Vec<u8> {
        let mut e = vec![0u8; HEADER_LEN];
        e[4] = ty;
        e.extend_from_slice(body);
        // (a test event: a header with its type and size, then a CRC32)
        let size = (e.len() + CRC_LEN) as u32;
        e[9..13].copy_from_slice(&size.to_le_bytes());
        let c = crc32fast::hash(&e);
        e.extend_from_slice(&c.to_le_bytes());
        e
    }

    fn map(id: u8, types: &[u8]) -> Vec<u8> {
        let mut b = vec![id, 0, 0, 0, 0, 0, 1, 0, 1, b'a', 0, 1, b's', 0];
        b.push(types.len() as u8);
        b.extend_from_slice(types);
        b.extend_from_slice(&[0, 0]);
        event(19, &b)
    }

    fn hex(s: &str) -> Vec<u8> {
        s.split_whitespace()
            .map(|h| u8::from_str_radix(h, 16).expect("hex"))
            .collect()
    }

    /// The events MariaDB 10.11 logged for NEXTVAL past the cache with
    /// binlog_row_image=MINIMAL (`mariadb-binlog` of a real server,
    /// sequence a.s START WITH 100 INCREMENT BY 7): the table map, then a
    /// Write_rows with next_not_cached_value 7100 and cycle_count 0 only.
    #[test]
    fn a_minimal_sequence_refill_decodes() {
        let m = hex(
            "d3 2f 08 6b 13 01 00 00 00 30 00 00 00 a9 03 00 00 00 00 12 00 00 00 00 00 01 00 \
                     01 61 00 01 73 00 08 08 08 08 08 08 08 01 08 00 00 3a 79 1b 09",
        );
        let w = hex(
            "d3 2f 08 6b 17 01 00 00 00 32 00 00 00 db 03 00 00 00 00 12 00 00 00 00 00 01 00 \
                     08 81 fc bc 1b 00 00 00 00 00 00 00 00 00 00 00 00 00 00 5a ca 74 d3",
        );
        let p = partial_write(&[&m], &w).expect("decodes");
        assert_eq!((p.db.as_str(), p.table.as_str()), ("a", "s"));
        assert_eq!(p.values[0], Some(7100));
        assert_eq!(p.values[7], Some(0));
        assert!(p.values[1..7].iter().all(Option::is_none));
        assert_eq!(p.literal(0, 0), "7100");
        assert_eq!(
            p.literal(4, 7),
            "7",
            "a column left out keeps the target's value"
        );
        assert_eq!(p.literal(1, u64::MAX), "-1", "signed columns print signed");
        let both = [m.clone(), w.clone()].concat();
        let (maps, rest) = split(&both).expect("splits");
        assert_eq!((maps, rest), (vec![&m[..]], vec![&w[..]]));
    }

    #[test]
    fn other_tables_and_full_rows_are_not_sequences() {
        let mut b = vec![0x12, 0, 0, 0, 0, 0, 1, 0, 8, 0b0000_0001, 0];
        b.extend_from_slice(&7100u64.to_le_bytes());
        let w = event(23, &b);
        // A table of other columns.
        assert!(partial_write(&[&map(0x12, &[8, 8, 8, 8, 8, 8, 8, 8])], &w).is_none());
        // No map for the table id.
        assert!(partial_write(&[&map(0x13, &TYPES)], &w).is_none());
        // All columns present: BINLOG applies it as it is.
        let mut full = vec![0x12, 0, 0, 0, 0, 0, 1, 0, 8, 0xff, 0];
        for i in 0..8u64 {
            full.extend_from_slice(if i == 6 { &[0u8][..] } else { &[0u8; 8][..] });
        }
        assert!(partial_write(&[&map(0x12, &TYPES)], &event(23, &full)).is_none());
        // A second row cut short.
        let mut cut = b.clone();
        cut.extend_from_slice(&[0, 1, 0]);
        assert!(partial_write(&[&map(0x12, &TYPES)], &event(23, &cut)).is_none());
    }

    /// Two refills in one statement (MariaDB 11.4's bytes, the same layout
    /// as 10.11's: `DO NEXTVAL(s), NEXTVAL(s), NEXTVAL(s)` on a sequence
    /// START WITH 100 INCREMENT BY 7 CACHE 2 in database `sqm`): one
    /// Write_rows event of two rows, 114 then 128; the last is the state.
    /// Before, "one row only" left it to the `BINLOG` that had refused it.
    #[test]
    fn two_refills_in_one_event_leave_the_last_one() {
        let m = event(
            19,
            &hex(
                "31 00 00 00 00 00 01 00 03 73 71 6d 00 01 73 00 08 08 08 08 08 08 08 01 08 00 00",
            ),
        );
        let w = event(
            23,
            &hex(
                "31 00 00 00 00 00 01 00 08 81 fc 72 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
                 fc 80 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00",
            ),
        );
        let p = partial_write(&[&m], &w).expect("decodes");
        assert_eq!((p.db.as_str(), p.table.as_str()), ("sqm", "s"));
        assert_eq!((p.values[0], p.values[7]), (Some(128), Some(0)));
        assert!(p.values[1..7].iter().all(Option::is_none));
    }

    proptest! {
        #[test]
        fn any_bytes_never_panic(a in proptest::collection::vec(any::<u8>(), 0..80),
                                 b in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = partial_write(&[&a], &b);
            let _ = split(&b);
        }
    }
}

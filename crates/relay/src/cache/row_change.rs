//! What a row event of the binary log says about the rows it touched, for
//! the result cache's row-level invalidation (`cache/row_key.rs` is the
//! read's side): for each integer column the server names in the table
//! map (`binlog_row_metadata = FULL`), every value it held in each image
//! of each row — before and after an update, so a row whose key moved
//! is seen at both places. A cached read of `col IN (values)` is stale
//! only when one of its values is among them.
//!
//! What the server reports, decoded by the binlog library (mysql_common's
//! rows and table map reading), not what the relay parsed. Fail closed:
//! a column the metadata does not name, a column absent from an image
//! (`binlog_row_image = MINIMAL`), a value that is not an integer, more
//! than [`MAX_VALUES`] values, an event the library cannot read (or that
//! makes it panic), a partial event — that column, or the
//! whole table, is not known, and every read keyed on it is stale.
//!
//! Integer columns only: an integer compared with an integer literal is
//! exact. A value is taken both as signed and as unsigned at its width
//! (the signedness is not in the metadata unless it is FULL): a read of
//! either is stale, never one missed.

use std::collections::BTreeSet;

use mysql_common::binlog::consts::EventType;
use mysql_common::binlog::events::{
    DeleteRowsEvent, DeleteRowsEventV1, Event, OptionalMetadataField, RowsEventRows, TableMapEvent,
    UpdateRowsEvent, UpdateRowsEventV1, WriteRowsEvent, WriteRowsEventV1,
};
use mysql_common::binlog::value::BinlogValue;
use mysql_common::constants::ColumnType;
use mysql_common::Value;

use crate::backend::write_scope::folded;

/// The known integer columns of a table's changed rows and the values
/// they held: defined beside the catalog, which says which of a write's
/// values are exact.
pub use crate::backend::write_scope::Keys;

/// More values than this in a column (over one transaction): unknown.
pub const MAX_VALUES: usize = 4096;

/// What the rows event `ev` of table `tm` says (`None`: nothing for sure
/// — every read of the table is stale).
pub fn keys_of(ev: &Event, tm: &TableMapEvent<'_>) -> Option<Keys> {
    let names = column_names(tm)?;
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| decode(ev, tm, &names)));
    caught.ok().flatten()
}

/// `$body` with `$e` the rows event `$ev` read as its own type (write,
/// update, delete; MariaDB's v1 and MySQL's v2); `None` for any other
/// event or one the library cannot read. (The six types share no trait
/// that reads them.)
macro_rules! with_rows_event {
    ($ev:expr, |$e:ident| $body:expr) => {{
        let t = $ev.header().event_type_raw();
        let is = |k: EventType| t == k as u8;
        if is(EventType::WRITE_ROWS_EVENT_V1) {
            let $e: WriteRowsEventV1 = $ev.read_event().ok()?;
            $body
        } else if is(EventType::UPDATE_ROWS_EVENT_V1) {
            let $e: UpdateRowsEventV1 = $ev.read_event().ok()?;
            $body
        } else if is(EventType::DELETE_ROWS_EVENT_V1) {
            let $e: DeleteRowsEventV1 = $ev.read_event().ok()?;
            $body
        } else if is(EventType::WRITE_ROWS_EVENT) {
            let $e: WriteRowsEvent = $ev.read_event().ok()?;
            $body
        } else if is(EventType::UPDATE_ROWS_EVENT) {
            let $e: UpdateRowsEvent = $ev.read_event().ok()?;
            $body
        } else if is(EventType::DELETE_ROWS_EVENT) {
            let $e: DeleteRowsEvent = $ev.read_event().ok()?;
            $body
        } else {
            None
        }
    }};
}

/// The table id a rows event names (`None`: not a rows event it reads).
pub fn table_id(ev: &Event) -> Option<u64> {
    with_rows_event!(ev, |e| Some(e.table_id()))
}

/// A column's name as the log spells it (as the rows' columns carry it)
/// and folded (`None`: not ASCII).
type Name = (Vec<u8>, Option<String>);

/// The table's column names, when the metadata has one for each column.
fn column_names(tm: &TableMapEvent<'_>) -> Option<Vec<Name>> {
    for field in tm.iter_optional_meta() {
        if let Ok(OptionalMetadataField::ColumnName(n)) = field {
            let names: Option<Vec<Name>> = n
                .iter_names()
                .map(|r| {
                    let c = r.ok()?;
                    Some((c.name_raw().to_vec(), folded(&c.name())))
                })
                .collect();
            let names = names?;
            return (names.len() as u64 == tm.columns_count()).then_some(names);
        }
    }
    None
}

/// An integer type's width in bits.
fn width(t: ColumnType) -> Option<u32> {
    Some(match t {
        ColumnType::MYSQL_TYPE_TINY => 8,
        ColumnType::MYSQL_TYPE_SHORT => 16,
        ColumnType::MYSQL_TYPE_INT24 => 24,
        ColumnType::MYSQL_TYPE_LONG => 32,
        ColumnType::MYSQL_TYPE_LONGLONG => 64,
        _ => return None,
    })
}

fn decode(ev: &Event, tm: &TableMapEvent<'_>, names: &[Name]) -> Option<Keys> {
    with_rows_event!(ev, |e| rows_keys(
        e.rows(tm),
        e.rows_data().len(),
        tm,
        names
    ))
}

/// Every image of every row: the integer columns each holds. A row
/// takes at least a byte of the event's `len` bytes of rows: more rows
/// than that (images of no column, which take none) say nothing.
fn rows_keys(
    rows: RowsEventRows<'_>,
    len: usize,
    tm: &TableMapEvent<'_>,
    names: &[Name],
) -> Option<Keys> {
    // The named integer columns, by their name as logged: (folded name,
    // width, values), the values `None` once unknown.
    type Slot<'n> = (&'n str, u32, Option<BTreeSet<i128>>);
    let mut known: std::collections::HashMap<&[u8], Slot> = names
        .iter()
        .enumerate()
        .filter_map(|(i, (raw, n))| {
            let w = width(tm.get_column_type(i).ok()??)?;
            Some((&raw[..], (n.as_deref()?, w, Some(BTreeSet::new()))))
        })
        .collect();
    for (n, row) in rows.enumerate() {
        if n >= len {
            return None;
        }
        let (before, after) = row.ok()?;
        for image in [before, after].into_iter().flatten() {
            // One pass over the image's columns; a known column it lacks
            // is unknown from now on.
            let mut seen = 0usize;
            for (p, c) in image.columns_ref().iter().enumerate() {
                let Some((_, w, slot)) = known.get_mut(c.name_ref()) else {
                    continue;
                };
                seen += 1;
                let ok = match (image.as_ref(p), slot.as_mut()) {
                    (_, None) => continue,
                    (Some(BinlogValue::Value(Value::NULL)), _) => true,
                    (Some(BinlogValue::Value(Value::Int(x))), Some(v)) => {
                        add(v, i128::from(*x), *w)
                    }
                    (Some(BinlogValue::Value(Value::UInt(x))), Some(v)) => {
                        add(v, i128::from(*x), *w)
                    }
                    _ => false,
                };
                if !ok {
                    *slot = None;
                }
            }
            if seen < known.len() {
                let present: BTreeSet<&[u8]> =
                    image.columns_ref().iter().map(|c| c.name_ref()).collect();
                for (raw, (_, _, slot)) in known.iter_mut() {
                    if !present.contains(raw) {
                        *slot = None;
                    }
                }
            }
        }
    }
    Some(
        known
            .into_iter()
            .filter_map(|(_, (n, _, v))| Some((n.to_string(), v?)))
            .collect(),
    )
}

/// `v` as signed and as unsigned at `bits`; false past the bound.
fn add(vals: &mut BTreeSet<i128>, v: i128, bits: u32) -> bool {
    let m = 1i128 << bits;
    let u = v.rem_euclid(m);
    let s = if u >= m / 2 { u - m } else { u };
    vals.insert(u);
    vals.insert(s);
    vals.len() <= MAX_VALUES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_taken_signed_and_unsigned_at_its_width() {
        for (v, bits, want) in [
            (7i128, 32, vec![7i128]),
            (-1, 8, vec![-1, 255]),
            (255, 8, vec![-1, 255]),
            (-1, 64, vec![-1, u64::MAX as i128]),
            (u64::MAX as i128, 64, vec![-1, u64::MAX as i128]),
            (8_388_607, 24, vec![8_388_607]),
            (8_388_608, 24, vec![-8_388_608, 8_388_608]),
            (0, 16, vec![0]),
        ] {
            let mut s = BTreeSet::new();
            assert!(add(&mut s, v, bits));
            assert_eq!(s.into_iter().collect::<Vec<_>>(), want, "{v} at {bits}");
        }
    }

    /// An event of type `kind` with `body`, as a v4 binlog writes it.
    fn event(kind: u8, body: &[u8]) -> Event {
        let mut e = Vec::new();
        e.extend_from_slice(&0u32.to_le_bytes());
        e.push(kind);
        e.extend_from_slice(&1u32.to_le_bytes());
        e.extend_from_slice(&((19 + body.len()) as u32).to_le_bytes());
        e.extend_from_slice(&0u32.to_le_bytes());
        e.extend_from_slice(&0u16.to_le_bytes());
        e.extend_from_slice(body);
        let fde = mysql_common::binlog::events::FormatDescriptionEvent::new(
            mysql_common::binlog::consts::BinlogVersion::Version4,
        );
        Event::read(&fde, &e[..]).expect("an event")
    }

    /// Found by the fuzz target (relay_rows): rows whose images hold no
    /// column take no byte, and the library's row iterator gave them for
    /// ever. A bounded walk says nothing instead.
    #[test]
    fn rows_of_no_column_end_instead_of_going_on_for_ever() {
        let input: &[u8] = &[
            0x0c, 0x10, 0xff, 0x0c, 0x0c, 0x0c, 0x2d, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x04, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1b, 0x1b, 0x1b, 0x00, 0x41, 0xc7, 0x57,
            0xf7, 0xa3, 0x48, 0x2f, 0x2f, 0xc8, 0x9a, 0x00, 0xfc, 0x02, 0x2f, 0x2a, 0x4d, 0x00,
            0x00, 0x00, 0x1b, 0x1b, 0x2d, 0x00, 0x50, 0x00, 0x00, 0xdb, 0x10,
        ];
        let (kind, at, rest) = (input[0], input[1] as usize, &input[2..]);
        let (map, rows) = rest.split_at(at.min(rest.len()));
        let rows_kind = [23u8, 24, 25, 30, 31, 32][kind as usize % 6];
        let map = event(19, map);
        let tm: TableMapEvent = map.read_event().expect("a table map");
        assert_eq!(keys_of(&event(rows_kind, rows), &tm), None);
    }

    #[test]
    fn more_values_than_the_bound_are_unknown() {
        let mut s = BTreeSet::new();
        for v in 0..MAX_VALUES as i128 {
            assert!(add(&mut s, v, 64));
        }
        assert!(!add(&mut s, -5, 64));
    }
}

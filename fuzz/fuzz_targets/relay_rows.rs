//! The result cache's row-level invalidation reads outside bytes twice:
//! a client's text (which rows a SELECT reads, an UPDATE or DELETE
//! writes, an INSERT's values: `cache/row_key.rs`; a prepared statement's parameters,
//! `protocol/stmt.rs` `int_param`) and the primary's row events with their
//! table map (`cache/row_change.rs`). Any bytes: never a panic; a key
//! only with values its text holds (a range only for a text comparing),
//! never a range for a write; a rows event's keys only for columns
//! the map names.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mysql_common::binlog::consts::BinlogVersion;
use mysql_common::binlog::events::{Event, FormatDescriptionEvent, TableMapEvent};
use sqlfleet_relay::cache::{row_change, row_key};

/// An event of type `kind` with `body`, as a v4 binlog writes it (no
/// checksum).
fn event(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut e = Vec::with_capacity(19 + body.len());
    e.extend_from_slice(&0u32.to_le_bytes()); // timestamp
    e.push(kind);
    e.extend_from_slice(&1u32.to_le_bytes()); // server id
    e.extend_from_slice(&((19 + body.len()) as u32).to_le_bytes());
    e.extend_from_slice(&0u32.to_le_bytes()); // log position
    e.extend_from_slice(&0u16.to_le_bytes()); // flags
    e.extend_from_slice(body);
    e
}

fuzz_target!(|data: &[u8]| {
    let toks = sqlfleet_dump::lex::lex(data).toks;
    let write = row_key::write_key(data, &toks);
    // (a write's key is never a range)
    assert!(!matches!(
        write.as_ref().map(|k| &k.rows),
        Some(row_key::Rows::Range(..))
    ));
    for k in [row_key::read_key(data, &toks), write].into_iter().flatten() {
        let text = String::from_utf8_lossy(data).to_ascii_lowercase();
        match &k.rows {
            row_key::Rows::In(vals) => {
                for v in vals.iter() {
                    assert!(text.contains(&v.unsigned_abs().to_string()));
                }
            }
            row_key::Rows::Range(..) => {
                assert!(text.contains('<') || text.contains('>') || text.contains("between"))
            }
        }
    }
    // An INSERT's values: only columns and values its text names.
    if let Some((table, keys)) = row_key::insert_key_with(data, &toks, &|_| None) {
        let text = String::from_utf8_lossy(data).to_ascii_lowercase();
        assert!(text.contains(&table));
        for (col, vals) in keys {
            assert!(text.contains(&col));
            for v in vals {
                assert!(text.contains(&v.unsigned_abs().to_string()));
            }
        }
    }
    // A prepared statement's parameters, walked by their types.
    for n in [1u16, 3, 9] {
        for i in 0..n as usize {
            let _ = sqlfleet_relay::protocol::stmt::int_param(data, n, i);
        }
    }
    let [kind, split, rest @ ..] = data else {
        return;
    };
    let at = (*split as usize).min(rest.len());
    let (map_body, rows_body) = rest.split_at(at);
    let rows_kind = [23u8, 24, 25, 30, 31, 32][*kind as usize % 6];
    let fde = FormatDescriptionEvent::new(BinlogVersion::Version4);
    let (Ok(map), Ok(rows)) = (
        Event::read(&fde, &event(19, map_body)[..]),
        Event::read(&fde, &event(rows_kind, rows_body)[..]),
    ) else {
        return;
    };
    let Ok(tm) = map.read_event::<TableMapEvent>() else {
        return;
    };
    let _ = row_change::table_id(&rows);
    if let Some(keys) = row_change::keys_of(&rows, &tm) {
        for (_, vals) in keys {
            assert!(vals.len() <= 2 * row_change::MAX_VALUES);
        }
    }
});

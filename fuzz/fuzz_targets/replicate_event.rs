//! replicate's hand-written decoding of outside bytes must never panic:
//! MariaDB GTID events, table map renames (a rename that succeeds must
//! read back with the new name and a valid CRC), rows event headers,
//! query status variables and statement text (names, calls whose value
//! is not logged), Execute_load_query bodies and the statement sent for
//! one (its clauses read back, refused or rewritten in either mode, the
//! table read from what is sent); texts the server writes itself (a
//! routine's COMMENT rewritten); compressed events (one
//! that uncompresses is whole: its length field is its length); merged
//! rows statements (a merge of any bytes never panics); Gtid_list event
//! bodies and their text as SHOW BINLOG EVENTS prints it.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sqlfleet_replicate::{
    context, event, gtid, load_query, merge, retired, server_written, sqltext, txn, unlogged,
};

fuzz_target!(|data: &[u8]| {
    let _ = retired::list_domains(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = retired::parse_list(text);
    }
    if let Ok(g) = gtid::decode_gtid_event(data) {
        let _ = g.phase();
    }
    // MariaDB's format description's post-header lengths, and others.
    let mut lens = [0u8; 171];
    lens[1] = 13;
    lens[22..25].copy_from_slice(&[8, 8, 8]);
    lens[29..32].copy_from_slice(&[10, 10, 10]);
    lens[164] = 13;
    lens[165..168].copy_from_slice(&[8, 8, 8]);
    lens[168..171].copy_from_slice(&[10, 10, 10]);
    for crc in [false, true] {
        for l in [&lens[..], &[6u8; 171][..], &lens[..100]] {
            if let Ok(plain) = sqlfleet_wire::binlog_compressed::plain_event(data, crc, l) {
                assert_eq!(
                    u32::from_le_bytes([plain[9], plain[10], plain[11], plain[12]]) as usize,
                    plain.len()
                );
            }
        }
    }
    for ph in [13u8, 26, 40] {
        if let Ok(q) = event::execute_load_query(data, ph) {
            for backslashes in [true, false] {
                if let Ok(sent) = load_query::statement(&q, backslashes, data) {
                    // What is sent names the table the logged text names.
                    assert!(load_query::table_of(&sent.sql).is_some());
                }
            }
        }
    }
    let _ = load_query::written(data);
    let _ = load_query::table_of(data);
    let _ = server_written::create_select(data);
    if let Some(out) = server_written::routine_comment(data) {
        assert!(out.starts_with(b"CREATE "));
    }
    for crc in [false, true] {
        for ph in [6u8, 8, 10] {
            if event::table_map(data, crc, ph).is_ok() {
                let r = event::rename_table_map(data, crc, ph, b"renamed")
                    .expect("a readable map renames");
                let tm = event::table_map(&r, crc, ph).expect("reads back");
                assert_eq!(tm.db, b"renamed");
                if crc {
                    assert!(event::crc_ok(&r));
                }
            }
            let _ = event::rows_header(data, ph);
            let mut m = data.to_vec();
            let _ = event::set_stmt_end(&mut m, crc, ph);
        }
    }
    let half = data.len() / 2;
    for (crc, ph) in [(false, 8u8), (true, 8), (true, 6), (true, 10)] {
        let layout = Some(txn::Layout {
            crc,
            map_ph: ph,
            rows_ph: ph,
        });
        let mut m = merge::Merged::default();
        for part in [&data[..half], &data[half..], data] {
            let r = txn::Rows {
                bytes: part.to_vec(),
                what: String::new(),
                layout,
            };
            if m.add(&r, 1 << 20) == merge::Add::Full {
                let _ = m.take();
                let _ = m.add(&r, 1 << 20);
            }
        }
        let _ = m.take();
    }
    // A Query event's status variables, and the SET they give.
    let ctx = context::read(data);
    let _ = context::set_items(&ctx);
    // The dialect drawn from the input's first byte: every sql_mode and
    // character set the statement reader distinguishes.
    let pick = data.first().copied().unwrap_or(0);
    let d = sqltext::Dialect {
        no_backslash_escapes: pick & 1 != 0,
        ansi_quotes: pick & 2 != 0,
        charset: sqlfleet_dump::lex::Multibyte::of_collation(
            [33, 1, 28, 248, 13][(pick as usize >> 2) % 5],
        ),
    };
    let _ = sqltext::event_as_replica(data, d);
    let _ = sqltext::created_table(data, d);
    let _ = unlogged::call(data, d, pick & 32 != 0);
    {
        // (Checked on printable ASCII, where bytes no character set
        // reads as one cannot split a name from what stands before it.)
        let printable = data
            .iter()
            .all(|b| (0x20..0x7f).contains(b) || b"\t\n\r".contains(b));
        if let Some(named) = sqltext::read(data, d).ok().filter(|_| printable) {
            // A rename lands on every database the statement names and
            // nowhere else: read again, the renamed text names exactly
            // the renamed databases.
            let renamed = sqltext::rename(data, &named, |n| Some(format!("{n}_x")));
            // (Text that is no SQL may read only before: a name where
            // the statement's keyword stands. The renamed text is not
            // read again in replicate; what is checked is where it lands.)
            let Ok(again) = sqltext::read(&renamed, d) else {
                return;
            };
            let mut want: Vec<String> =
                named.databases().iter().map(|n| format!("{n}_x")).collect();
            want.sort();
            assert_eq!(
                again.databases(),
                want,
                "{:?} renamed {:?}",
                String::from_utf8_lossy(data),
                String::from_utf8_lossy(&renamed)
            );
            assert_eq!(again.refs.len(), named.refs.len());
            assert_eq!(again.uses_default, named.uses_default);
            assert_eq!(again.database_statement, named.database_statement);
        }
    }
});

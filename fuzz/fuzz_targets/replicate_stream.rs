//! replicate's transaction assembler over a whole event stream, as the
//! source's binlog connection hands it events: every event type the
//! servers define (MySQL's 1..=41, MariaDB's 160..=171, and any other
//! byte), any header flags, any body, with and without CRC32 — never a
//! panic; a transaction it gives is the one its last GTID event opened;
//! after an error the stream goes on once the open transaction is
//! abandoned, as a restart would.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mysql_common::binlog::consts::{BinlogChecksumAlg, BinlogVersion};
use mysql_common::binlog::events::{BinlogEventFooter, Event, FormatDescriptionEvent};
use sqlfleet_replicate::config::DbMap;
use sqlfleet_replicate::txn::{Assembler, Out};

/// MariaDB 10.11's post-header lengths, by event type (type 1 first).
fn mariadb_lengths() -> Vec<u8> {
    let mut l = vec![0u8; 171];
    let mut set = |ty: usize, len: u8| l[ty - 1] = len;
    set(1, 56);
    set(2, 13);
    set(4, 8);
    set(6, 18);
    set(8, 4);
    set(9, 4);
    set(10, 4);
    set(11, 4);
    set(12, 18);
    set(15, 84);
    set(17, 4);
    set(18, 26);
    set(19, 8);
    for t in 20..=25 {
        set(t, 8);
    }
    set(26, 2);
    for t in 30..=32 {
        set(t, 10);
    }
    set(161, 4);
    set(162, 19);
    set(163, 4);
    set(165, 13);
    for t in 166..=168 {
        set(t, 8);
    }
    for t in 169..=171 {
        set(t, 10);
    }
    l
}

/// Event types drawn most: the ones a MariaDB source writes.
const TYPES: &[u8] = &[
    2, 4, 5, 13, 14, 15, 16, 17, 18, 19, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 38, 160, 161, 162,
    163, 164, 165, 166, 167, 168, 169, 170, 171,
];

fuzz_target!(|data: &[u8]| {
    let Some((&setup, mut rest)) = data.split_first() else {
        return;
    };
    let crc = setup & 1 != 0;
    let lengths = if setup & 2 != 0 {
        mariadb_lengths()
    } else {
        // A description from another server: MySQL's rows post-headers
        // where MariaDB's compressed ones would be.
        let mut l = mariadb_lengths();
        l.truncate(usize::from(setup >> 2) + 40);
        l
    };
    let fde = FormatDescriptionEvent::new(BinlogVersion::Version4)
        .with_server_version(b"10.11.19-MariaDB-log".to_vec())
        .with_event_type_header_lengths(lengths)
        .with_footer(if crc {
            BinlogEventFooter::new(BinlogChecksumAlg::BINLOG_CHECKSUM_ALG_CRC32)
        } else {
            BinlogEventFooter::new(BinlogChecksumAlg::BINLOG_CHECKSUM_ALG_OFF)
        });
    let map = DbMap::new(&[], &["skip*".to_string()], &Default::default());
    let mut a = Assembler::new(map);
    let mut open = None;
    let mut pos = 4u32;
    // Each event: type choice, flags, body length, body.
    while let [kind, flags, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (body, after) = tail.split_at(n);
        rest = after;
        let ty = if kind & 0x80 != 0 {
            TYPES[usize::from(kind & 0x7f) % TYPES.len()]
        } else {
            *kind
        };
        let mut raw = Vec::with_capacity(19 + body.len() + 4);
        raw.extend_from_slice(&0x6000_0000u32.to_le_bytes());
        raw.push(ty);
        raw.extend_from_slice(&7u32.to_le_bytes());
        let size = 19 + body.len() + if crc { 4 } else { 0 };
        raw.extend_from_slice(&(size as u32).to_le_bytes());
        pos = pos.saturating_add(size as u32);
        raw.extend_from_slice(&pos.to_le_bytes());
        raw.extend_from_slice(
            &u16::from(*flags)
                .rotate_left(u32::from(flags & 7))
                .to_le_bytes(),
        );
        raw.extend_from_slice(body);
        if crc {
            let c = crc32fast::hash(&raw);
            raw.extend_from_slice(&c.to_le_bytes());
        }
        // A format description's own footer is read from its body: the
        // reader of the stream gives it whole only when it holds one.
        if ty == 15 && body.len() < 57 {
            continue;
        }
        let Ok(ev) = Event::read(&fde, raw.as_slice()) else {
            continue;
        };
        if ty == 162 {
            if let Ok(g) = sqlfleet_replicate::gtid::decode_gtid_event(ev.data()) {
                open = Some((g.domain, 7u32, g.seq));
            }
        }
        match a.push(&ev) {
            Ok(Out::Txn(t)) => {
                let (domain, server, seq) = open.expect("a transaction comes after its GTID event");
                assert_eq!(
                    (t.gtid.domain, t.gtid.server, t.gtid.seq),
                    (domain, server, seq)
                );
                assert_eq!(a.last(), Some(t.gtid));
                assert!(!a.in_transaction());
            }
            Ok(_) => {}
            Err(_) => {
                let _ = a.abandon();
            }
        }
    }
});

//! A primary's binlog events as the result cache's follower reads them
//! (`cache/follow.rs`): any kinds in any order, any bytes where a
//! statement, a database or a table name would be — never a panic, and a
//! group holding an event it cannot read ends as "everything".
#![no_main]
use libfuzzer_sys::fuzz_target;
use sqlfleet_relay::cache::follow::{Ev, Follow, Stale};

fuzz_target!(|data: &[u8]| {
    let mut f = Follow::default();
    let mut unread = false;
    let mut rest = data;
    while let [kind, len, tail @ ..] = rest {
        let n = (*len as usize).min(tail.len());
        let (bytes, after) = tail.split_at(n);
        let half = bytes.len() / 2;
        let (a, b) = bytes.split_at(half);
        let ev = match kind % 7 {
            0 => Ev::Gtid {
                standalone: kind & 0x80 != 0,
            },
            1 => Ev::Query { db: a, sql: b },
            2 => Ev::TableMap { db: a, table: b },
            3 => Ev::Rows,
            4 => Ev::Xid,
            5 => Ev::Meta,
            _ => Ev::Unread,
        };
        match ev {
            Ev::Gtid { .. } => unread = false,
            Ev::Unread => unread = true,
            _ => {}
        }
        let out = f.step(ev);
        if unread && out.is_some() {
            assert_eq!(out, Some(Stale::Whole));
            unread = false;
        }
        rest = after;
    }
});

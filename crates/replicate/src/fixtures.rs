//! Test fixtures shared by the apply and engine tests: binlog events of a
//! given type and size, a table map, a transaction of items.

use crate::txn::{Item, Txn};

/// An event of type `ty`, `len` bytes long, filled with `fill`.
pub fn ev(ty: u8, len: usize, fill: u8) -> Vec<u8> {
    let mut e = vec![fill; len];
    e[4] = ty;
    e[9..13].copy_from_slice(&(len as u32).to_le_bytes());
    e
}

/// A table map for db.table (MariaDB's 8-byte post header, no CRC).
pub fn table_map(db: &str, table: &str) -> Vec<u8> {
    let mut e = vec![0u8; 19];
    e[4] = 19;
    e.extend_from_slice(&[7, 0, 0, 0, 0, 0, 1, 0]);
    for n in [db, table] {
        e.push(n.len() as u8);
        e.extend_from_slice(n.as_bytes());
        e.push(0);
    }
    e.extend_from_slice(&[1, 3, 0, 0]);
    let size = e.len() as u32;
    e[9..13].copy_from_slice(&size.to_le_bytes());
    e
}

/// A table map for id `id` of `db.table` as MariaDB writes it (8-byte post
/// header, CRC32).
pub fn crc_map(id: u64, table: &str) -> Vec<u8> {
    let mut e = vec![0u8; 19];
    e[4] = 19;
    e.extend_from_slice(&id.to_le_bytes()[..6]);
    e.extend_from_slice(&1u16.to_le_bytes());
    for n in ["db", table] {
        e.push(n.len() as u8);
        e.extend_from_slice(n.as_bytes());
        e.push(0);
    }
    e.extend_from_slice(&[1, 3, 0, 0]);
    sealed(e)
}

/// A rows event of type `ty` on table id `id` with `flags` and `body`
/// (8-byte post header, CRC32).
pub fn crc_rows(ty: u8, id: u64, flags: u16, body: &[u8]) -> Vec<u8> {
    let mut e = vec![0u8; 19];
    e[4] = ty;
    e.extend_from_slice(&id.to_le_bytes()[..6]);
    e.extend_from_slice(&flags.to_le_bytes());
    e.extend_from_slice(body);
    sealed(e)
}

/// `e` with room for its CRC32, its length and CRC written in.
fn sealed(mut e: Vec<u8>) -> Vec<u8> {
    e.extend_from_slice(&[0; crate::event::CRC_LEN]);
    let n = e.len() as u32;
    e[9..13].copy_from_slice(&n.to_le_bytes());
    crate::event::fix_crc(&mut e, true);
    e
}

/// A transaction (GTID 1-1-5) of `items` in database `db`.
pub fn txn(db: &str, items: Vec<Item>) -> Txn {
    Txn {
        gtid: crate::gtid::Gtid {
            domain: 1,
            server: 1,
            seq: 5,
        },
        standalone: false,
        timestamp: 1,
        file: "bin.000001".into(),
        end_pos: 100,
        items,
        dbs: [db.to_string()].into_iter().collect(),
        unsupported: None,
        unknown_scope: false,
        first: String::new(),
        temp: Default::default(),
        xa: None,
        rolled_back: false,
    }
}

/// A Query event's status variables as MariaDB 10.11 writes them for a
/// statement in a default session (flags2 with explicit_defaults_for_timestamp,
/// the default sql_mode, catalog "std", utf8mb3 client, latin1 server).
pub fn default_status() -> Vec<u8> {
    let mut raw = vec![0];
    raw.extend(crate::context::OPTION_EXPLICIT_DEF_TIMESTAMP.to_le_bytes());
    raw.push(1);
    raw.extend(1_411_383_296u64.to_le_bytes());
    raw.extend([6, 3, b's', b't', b'd']);
    raw.extend([4, 33, 0, 33, 0, 8, 0]);
    raw
}

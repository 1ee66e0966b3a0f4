//! Raw binlog events as they travel to the target: the bytes of a table
//! map or rows event are sent unchanged inside a `BINLOG '<base64>'`
//! statement, so the target server decodes and applies the rows itself
//! (the same code its own replication uses: every column type, charset
//! and row image exactly as native replication handles it).
//!
//! Two edits are made by hand, because the binlog library can parse these
//! events but not rewrite them: a table map's database name (renames), and
//! a rows event's end-of-statement flag (when filtering drops the flagged
//! last event of a statement). Each edit fixes the event length and the
//! CRC32. Property-tested here and fuzzed (`replicate_event`).

/// Binlog event header length (v4).
pub const HEADER_LEN: usize = 19;
/// CRC32 checksum length.
pub const CRC_LEN: usize = 4;
/// A rows event's "end of statement" flag.
pub const STMT_END_F: u16 = 1;

/// MariaDB's own event types (the library leaves them unparsed).
pub mod mariadb {
    pub const ANNOTATE_ROWS: u8 = 160;
    pub const BINLOG_CHECKPOINT: u8 = 161;
    pub const GTID: u8 = 162;
    pub const GTID_LIST: u8 = 163;
    pub const START_ENCRYPTION: u8 = 164;
    // 165..=171, compressed events (log_bin_compress=ON), are read as the
    // plain events they stand for: sqlfleet_wire::binlog_compressed.
}

use crate::gtid::DecodeError;

/// Where a table map event points, and which table id it defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableMap {
    pub table_id: u64,
    pub db: Vec<u8>,
    pub table: Vec<u8>,
    /// Byte offset of the database length byte in the raw event.
    db_at: usize,
}

fn err(what: &str, len: usize) -> DecodeError {
    DecodeError {
        what: what.to_string(),
        len,
    }
}

fn body_end(raw: &[u8], crc: bool) -> Result<usize, DecodeError> {
    let end = raw
        .len()
        .checked_sub(if crc { CRC_LEN } else { 0 })
        .filter(|e| *e >= HEADER_LEN)
        .ok_or_else(|| err("event shorter than its header", raw.len()))?;
    Ok(end)
}

fn table_id(raw: &[u8], post_header_len: u8) -> Result<(u64, usize), DecodeError> {
    let id_len = if post_header_len == 6 { 4 } else { 6 };
    let b = raw
        .get(HEADER_LEN..HEADER_LEN + id_len)
        .ok_or_else(|| err("event too short for its table id", raw.len()))?;
    let mut id = [0u8; 8];
    id[..id_len].copy_from_slice(b);
    Ok((u64::from_le_bytes(id), HEADER_LEN + id_len))
}

/// Reads a table map event's table id, database and table name.
/// `post_header_len` is the format description's value for table maps.
pub fn table_map(raw: &[u8], crc: bool, post_header_len: u8) -> Result<TableMap, DecodeError> {
    let end = body_end(raw, crc)?;
    let (table_id, _) = table_id(raw, post_header_len)?;
    let db_at = HEADER_LEN + post_header_len as usize;
    let name = |at: usize| -> Result<(Vec<u8>, usize), DecodeError> {
        let n = *raw
            .get(at)
            .filter(|_| at < end)
            .ok_or_else(|| err("table map too short for a name length", raw.len()))?
            as usize;
        let bytes = raw
            .get(at + 1..at + 1 + n)
            .filter(|_| at + 2 + n <= end)
            .ok_or_else(|| err("table map name runs past the event", raw.len()))?;
        if raw[at + 1 + n] != 0 {
            return Err(err("table map name is not NUL-terminated", raw.len()));
        }
        Ok((bytes.to_vec(), at + 2 + n))
    };
    let (db, next) = name(db_at)?;
    let (table, _) = name(next)?;
    Ok(TableMap {
        table_id,
        db,
        table,
        db_at,
    })
}

/// The table id a rows event refers to and its flags.
pub fn rows_header(raw: &[u8], post_header_len: u8) -> Result<(u64, u16), DecodeError> {
    let (id, at) = table_id(raw, post_header_len)?;
    let f = raw
        .get(at..at + 2)
        .ok_or_else(|| err("rows event too short for its flags", raw.len()))?;
    Ok((id, u16::from_le_bytes([f[0], f[1]])))
}

/// Sets a rows event's end-of-statement flag.
pub fn set_stmt_end(raw: &mut [u8], crc: bool, post_header_len: u8) -> Result<(), DecodeError> {
    stmt_end(raw, crc, post_header_len, true)
}

/// Clears a rows event's end-of-statement flag (merge.rs: the statement
/// goes on with the next transaction's rows).
pub fn clear_stmt_end(raw: &mut [u8], crc: bool, post_header_len: u8) -> Result<(), DecodeError> {
    stmt_end(raw, crc, post_header_len, false)
}

fn stmt_end(raw: &mut [u8], crc: bool, post_header_len: u8, on: bool) -> Result<(), DecodeError> {
    let (_, at) = table_id(raw, post_header_len)?;
    body_end(raw, crc)?;
    let f = raw
        .get_mut(at)
        .ok_or_else(|| err("rows event too short for its flags", 0))?;
    let was = *f;
    if on {
        *f |= STMT_END_F as u8;
    } else {
        *f &= !(STMT_END_F as u8);
    }
    // Unchanged bytes keep their CRC (merge.rs clears the flag on every
    // rows event, most of which never had it).
    if *f != was {
        fix_crc(raw, crc);
    }
    Ok(())
}

/// A copy of a table map event pointing at database `db`.
pub fn rename_table_map(
    raw: &[u8],
    crc: bool,
    post_header_len: u8,
    db: &[u8],
) -> Result<Vec<u8>, DecodeError> {
    let tm = table_map(raw, crc, post_header_len)?;
    let n = u8::try_from(db.len()).map_err(|_| err("database name over 255 bytes", db.len()))?;
    let old_end = tm.db_at + 2 + tm.db.len();
    let mut out = Vec::with_capacity(raw.len() + db.len());
    out.extend_from_slice(&raw[..tm.db_at]);
    out.push(n);
    out.extend_from_slice(db);
    out.push(0);
    out.extend_from_slice(&raw[old_end..]);
    let size = u32::try_from(out.len()).map_err(|_| err("event over 4 GiB", out.len()))?;
    out[9..13].copy_from_slice(&size.to_le_bytes());
    fix_crc(&mut out, crc);
    Ok(out)
}

/// Recomputes the trailing CRC32 of a checksummed event.
pub fn fix_crc(raw: &mut [u8], crc: bool) {
    if crc && raw.len() >= HEADER_LEN + CRC_LEN {
        let n = raw.len() - CRC_LEN;
        let c = crc32fast::hash(&raw[..n]);
        raw[n..].copy_from_slice(&c.to_le_bytes());
    }
}

/// True when a checksummed event's CRC32 matches its bytes.
pub fn crc_ok(raw: &[u8]) -> bool {
    raw.len() >= HEADER_LEN + CRC_LEN && {
        let n = raw.len() - CRC_LEN;
        crc32fast::hash(&raw[..n]).to_le_bytes() == raw[n..]
    }
}

/// An Execute_load_query event (a LOAD DATA logged as a statement, after
/// the Begin_load_query and Append_block events that carry the file): the
/// session's status variables, its default database and the statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadQuery {
    pub status_vars: Vec<u8>,
    pub db: Vec<u8>,
    pub sql: Vec<u8>,
    /// The file (Begin_load_query and Append_block events of this id).
    pub file_id: u32,
    /// Where in `sql` the `INFILE '...' [REPLACE|IGNORE] INTO` part
    /// starts and ends (a replayer puts its own file there).
    pub fn_start: usize,
    pub fn_end: usize,
    /// 0 error on duplicates, 1 IGNORE, 2 REPLACE.
    pub dup: u8,
    /// The error the LOAD DATA ended with on the source (0: none).
    pub error_code: u16,
}

/// Reads an Execute_load_query event's body (after the common header,
/// without the checksum). Its post-header (`post_header_len`, 26 on
/// MariaDB) is a Query event's 13 bytes — thread id, exec time, database
/// length, error code, status variables' length — and then file id,
/// file-name start and end in the statement, and duplicate handling.
pub fn execute_load_query(body: &[u8], post_header_len: u8) -> Result<LoadQuery, DecodeError> {
    let ph = post_header_len as usize;
    if ph < 26 || body.len() < ph {
        return Err(err(
            "Execute_load_query event too short for its post-header",
            body.len(),
        ));
    }
    let db_len = body[8] as usize;
    let sv_len = u16::from_le_bytes([body[11], body[12]]) as usize;
    let sv_end = ph + sv_len;
    let db_end = sv_end + db_len;
    let (Some(status_vars), Some(db)) = (body.get(ph..sv_end), body.get(sv_end..db_end)) else {
        return Err(err(
            "Execute_load_query event too short for its status variables and database",
            body.len(),
        ));
    };
    // The database name ends in a NUL before the statement.
    let sql = match body.get(db_end) {
        Some(0) => &body[db_end + 1..],
        _ => {
            return Err(err(
                "Execute_load_query event without the NUL after its database",
                body.len(),
            ))
        }
    };
    let u32_at = |i: usize| u32::from_le_bytes([body[i], body[i + 1], body[i + 2], body[i + 3]]);
    let (fn_start, fn_end) = (u32_at(17) as usize, u32_at(21) as usize);
    if fn_start > fn_end || fn_end > sql.len() {
        return Err(err(
            "Execute_load_query event whose file name lies outside its statement",
            body.len(),
        ));
    }
    Ok(LoadQuery {
        status_vars: status_vars.to_vec(),
        db: db.to_vec(),
        sql: sql.to_vec(),
        file_id: u32_at(13),
        fn_start,
        fn_end,
        dup: body[25],
        error_code: u16::from_le_bytes([body[9], body[10]]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A table map event as MariaDB writes it (8-byte post header).
    pub(crate) fn make_table_map(id: u64, db: &[u8], table: &[u8], tail: &[u8]) -> Vec<u8> {
        let mut e = vec![0u8; HEADER_LEN];
        e[4] = 19;
        e.extend_from_slice(&id.to_le_bytes()[..6]);
        e.extend_from_slice(&1u16.to_le_bytes());
        e.push(db.len() as u8);
        e.extend_from_slice(db);
        e.push(0);
        e.push(table.len() as u8);
        e.extend_from_slice(table);
        e.push(0);
        e.extend_from_slice(tail);
        e.extend_from_slice(&[0; CRC_LEN]);
        let n = e.len() as u32;
        e[9..13].copy_from_slice(&n.to_le_bytes());
        fix_crc(&mut e, true);
        e
    }

    #[test]
    fn a_renamed_table_map_keeps_everything_but_the_database() {
        let raw = make_table_map(18, b"app", b"t", &[2, 3, 15, 2, 10, 0, 2]);
        let r = rename_table_map(&raw, true, 8, b"app_eu").expect("renames");
        let tm = table_map(&r, true, 8).expect("reads back");
        assert_eq!(
            (tm.table_id, tm.db.as_slice(), tm.table.as_slice()),
            (18, &b"app_eu"[..], &b"t"[..])
        );
        assert!(crc_ok(&r));
        assert_eq!(
            u32::from_le_bytes([r[9], r[10], r[11], r[12]]) as usize,
            r.len()
        );
        assert_eq!(
            &r[r.len() - CRC_LEN - 7..r.len() - CRC_LEN],
            &[2, 3, 15, 2, 10, 0, 2]
        );
    }

    #[test]
    fn a_truncated_table_map_is_an_error() {
        let raw = make_table_map(1, b"app", b"t", &[]);
        let names_end = HEADER_LEN + 8 + (1 + 3 + 1) + (1 + 1 + 1);
        assert_eq!(raw.len(), names_end + CRC_LEN);
        for cut in 0..names_end {
            let mut short = raw[..cut].to_vec();
            short.extend_from_slice(&[0; CRC_LEN]);
            assert!(table_map(&short, true, 8).is_err(), "cut at {cut}");
        }
    }

    /// An Execute_load_query body as MariaDB writes it.
    fn load_query(status: &[u8], db: &[u8], sql: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; 26];
        b[8] = db.len() as u8;
        b[13..17].copy_from_slice(&7u32.to_le_bytes());
        b[17..21].copy_from_slice(&0u32.to_le_bytes());
        b[21..25].copy_from_slice(&(sql.len() as u32).to_le_bytes());
        b[25] = 2;
        b[9..11].copy_from_slice(&1062u16.to_le_bytes());
        b[11..13].copy_from_slice(&(status.len() as u16).to_le_bytes());
        b.extend_from_slice(status);
        b.extend_from_slice(db);
        b.push(0);
        b.extend_from_slice(sql);
        b
    }

    #[test]
    fn an_execute_load_query_gives_its_database_and_statement() {
        let sql = b"LOAD DATA INFILE '/tmp/SQL_LOAD-1-2-3.data' INTO TABLE t";
        let body = load_query(&[0, 0, 0, 0, 0], b"app", sql);
        let q = execute_load_query(&body, 26).expect("reads");
        assert_eq!(q.db, b"app");
        assert_eq!(q.sql, sql);
        assert_eq!(q.status_vars.len(), 5);
        assert_eq!(
            (q.file_id, q.fn_start, q.fn_end, q.dup),
            (7, 0, sql.len(), 2)
        );
        // Cut anywhere before the statement: an error, never a panic.
        for cut in 0..body.len() - sql.len() {
            assert!(
                execute_load_query(&body[..cut], 26).is_err(),
                "cut at {cut}"
            );
        }
        assert!(
            execute_load_query(&body, 12).is_err(),
            "a post-header too short"
        );
    }

    proptest! {
        #[test]
        fn an_execute_load_query_reads_back_what_it_was_made_of(
            status in proptest::collection::vec(any::<u8>(), 0..40),
            db in proptest::collection::vec(1u8..=255, 0..64),
            sql in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let q = execute_load_query(&load_query(&status, &db, &sql), 26).expect("reads");
            let n = sql.len();
            prop_assert_eq!(q, LoadQuery { status_vars: status, db, sql, file_id: 7, fn_start: 0, fn_end: n, dup: 2, error_code: 1062 });
        }

        #[test]
        fn rename_round_trips(id in 0u64..(1 << 48), db in "[a-z_]{1,64}", new in "[a-z_]{1,64}", table in "[a-z_]{1,64}", tail in proptest::collection::vec(any::<u8>(), 0..64)) {
            let raw = make_table_map(id, db.as_bytes(), table.as_bytes(), &tail);
            let r = rename_table_map(&raw, true, 8, new.as_bytes()).expect("renames");
            let tm = table_map(&r, true, 8).expect("reads");
            prop_assert_eq!(tm.table_id, id);
            prop_assert_eq!(tm.db, new.as_bytes().to_vec());
            prop_assert_eq!(tm.table, table.as_bytes().to_vec());
            prop_assert!(crc_ok(&r));
            let back = rename_table_map(&r, true, 8, db.as_bytes()).expect("renames back");
            prop_assert_eq!(back, raw);
        }

        #[test]
        fn any_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..80), ph in 0u8..12, crc: bool) {
            let _ = execute_load_query(&raw, ph.wrapping_mul(3));
            let _ = table_map(&raw, crc, ph);
            let _ = rename_table_map(&raw, crc, ph, b"x");
            let _ = rows_header(&raw, ph);
            let mut m = raw.clone();
            let _ = set_stmt_end(&mut m, crc, ph);
        }
    }
}

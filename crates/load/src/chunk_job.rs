//! Loading one chunk of a CSV/TSV file: `LOAD DATA LOCAL` of the chunk's
//! bytes and its journal record in one transaction, or, when the server
//! refuses LOCAL INFILE, the same rows as multi-row INSERTs.
//!
//! Warnings the server raises are reported with the file and the lines of
//! the rows they name; with `--strict` they fail the chunk instead.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use mysql_async::prelude::Queryable;
use sqlfleet_flat::fields::records;
use sqlfleet_flat::Format;

use crate::counts::ServerCounts;
use crate::error::{describe, StatementFailure};
use crate::journal;
use crate::retry::retryable;
use crate::session::SessionConn;
use crate::state::Ctx;

/// A chunk and everything needed to load it.
pub struct ChunkWork {
    pub file: String,
    pub load_id: String,
    /// `` `db`.`t` ``
    pub table: String,
    /// `(a, b, c)` or empty.
    pub columns: String,
    /// How many fields each record has (the chunker checked): a record
    /// that comes shorter from [`records`] gets DEFAULT for the rest, as
    /// LOAD DATA gives a missing field its column's default.
    pub fields: usize,
    pub format: Arc<Format>,
    pub charset: String,
    pub strict: bool,
    pub offset: u64,
    pub end: u64,
    pub record_lines: Vec<u64>,
    pub data: bytes::Bytes,
}

impl ChunkWork {
    fn lines(&self) -> String {
        let first = self.record_lines.first().copied().unwrap_or(0);
        let last = self.record_lines.last().copied().unwrap_or(first);
        if first == last {
            format!("line {first}")
        } else {
            format!("lines {first}-{last}")
        }
    }

    fn line_of_row(&self, row: usize) -> Option<u64> {
        row.checked_sub(1)
            .and_then(|i| self.record_lines.get(i))
            .copied()
    }

    pub fn failure(&self, code: Option<u16>, message: String) -> StatementFailure {
        StatementFailure {
            origin: None,
            offset: self.offset,
            line: self.record_lines.first().copied().unwrap_or(0),
            table: Some(self.table.clone()),
            code,
            message,
            preview: format!(
                "{} {} ({} rows)",
                self.file,
                self.lines(),
                self.record_lines.len()
            ),
            nothing_written: false,
        }
    }
}

pub enum ChunkOutcome {
    Ok(u64),
    Retry(mysql_async::Error),
    Fail(StatementFailure),
}

/// One attempt at a chunk on `c`.
/// `local_ok`: this worker may use LOAD DATA (see `queue`: only the first
/// worker on an AUTO_INCREMENT table does; the others send INSERTs).
pub async fn run(ctx: &Ctx, c: &mut SessionConn, w: &ChunkWork, local_ok: bool) -> ChunkOutcome {
    let fail = |e: mysql_async::Error| {
        if retryable(&e) {
            ChunkOutcome::Retry(e)
        } else {
            let (code, msg) = describe(&e);
            ChunkOutcome::Fail(w.failure(code, msg))
        }
    };
    if let Err(e) = c.conn.query_drop("START TRANSACTION").await {
        return fail(e);
    }
    let rows = if local_ok && ctx.fast_path.load(Ordering::Relaxed) {
        let sql = format!(
            "LOAD DATA LOCAL INFILE 'sqlfleet-chunk' INTO TABLE {} CHARACTER SET {} {} {}",
            w.table,
            w.charset,
            w.format.clause(),
            w.columns
        );
        let shared = ctx.shared.clone();
        let flight = crate::state::InFlight::new(&ctx.shared);
        let sent = flight.adder();
        // The chunk's bytes are the input's bytes.
        crate::infile::send(&mut c.conn, &w.data, 0..w.data.len(), move |piece| {
            sent(piece as u64);
            !shared.is_interrupted()
        });
        match c.conn.query_drop(sql).await {
            Ok(()) => match ServerCounts::from_info(&c.conn.info()) {
                Some(n) => Some((c.conn.affected_rows(), n)),
                None => {
                    // The server's own account of the rows is the only
                    // one: a reply it cannot read is not taken as zero.
                    let _ = c.conn.query_drop("ROLLBACK").await;
                    return ChunkOutcome::Fail(w.failure(
                        None,
                        format!(
                            "the server's reply to LOAD DATA did not say how many rows it read and skipped ({:?})",
                            c.conn.info()
                        ),
                    ));
                }
            },
            Err(mysql_async::Error::Server(s)) if matches!(s.code, 1148 | 3948 | 4166) => {
                let _ = c.conn.query_drop("ROLLBACK").await;
                if ctx.fast_path.swap(false, Ordering::Relaxed) {
                    crate::progress::say(&format!(
                        "the server refuses LOAD DATA LOCAL ({}); loading with INSERT statements",
                        s.message
                    ));
                }
                if let Err(e) = c.conn.query_drop("START TRANSACTION").await {
                    return fail(e);
                }
                None
            }
            Err(e) => {
                let _ = c.conn.query_drop("ROLLBACK").await;
                return fail(e);
            }
        }
    } else {
        None
    };
    let (rows, counts) = match rows {
        Some(r) => r,
        None => match insert_rows(c, w).await {
            Ok(r) => r,
            Err(e) => {
                let _ = c.conn.query_drop("ROLLBACK").await;
                return fail(e);
            }
        },
    };
    if counts.warnings > 0 {
        let warnings: Vec<(String, u16, String)> =
            match c.conn.query("SHOW WARNINGS LIMIT 20").await {
                Ok(v) => v,
                Err(e) => {
                    let _ = c.conn.query_drop("ROLLBACK").await;
                    return fail(e);
                }
            };
        if !warnings.is_empty() {
            let described: Vec<String> = warnings
                .iter()
                .map(|(level, code, msg)| {
                    let row = msg
                        .rsplit_once(" at row ")
                        .and_then(|(_, n)| n.trim().parse::<usize>().ok())
                        .and_then(|r| w.line_of_row(r));
                    match row {
                        Some(line) => format!("line {line}: {level} {code}: {msg}"),
                        None => format!("{level} {code}: {msg}"),
                    }
                })
                .collect();
            if w.strict {
                let _ = c.conn.query_drop("ROLLBACK").await;
                let first = &warnings[0];
                return ChunkOutcome::Fail(w.failure(
                    Some(first.1),
                    format!("--strict and the server warned: {}", described.join("; ")),
                ));
            }
            for d in &described {
                let text = format!("{} {}: {d}", w.file, w.lines());
                if !ctx.shared.keep_warning(&text) {
                    break;
                }
                crate::progress::say(&format!("warning: {text}"));
            }
        }
    }
    sqlfleet_faults::point!("load::chunk_sent");
    // The chunk's bytes are recorded with it: a resume, or a load of the
    // same name later, skips it only for the same bytes.
    let value = crate::identity::chunk_value(w.offset, &w.data);
    let rec = journal::Record {
        load_id: &w.load_id,
        start: w.offset,
        end: w.end,
        kind: "chunk",
        rows,
        table: None,
        chain: Some(&value),
    }
    .sql();
    if let Err(e) = c.conn.query_drop(rec).await {
        let _ = c.conn.query_drop("ROLLBACK").await;
        return fail(e);
    }
    sqlfleet_faults::point!("load::chunk_journaled");
    match c.conn.query_drop("COMMIT").await {
        Ok(()) => {
            sqlfleet_faults::point!("load::chunk_committed");
            ctx.shared
                .warnings
                .fetch_add(counts.warnings, Ordering::Relaxed);
            ctx.shared.add_counts(counts);
            ChunkOutcome::Ok(rows)
        }
        Err(e) => fail(e),
    }
}

/// The chunk's rows as multi-row INSERTs of string literals (the server
/// converts them as LOAD DATA would), about 1 MB per statement.
/// Returns the rows inserted and the server's counts over the statements.
async fn insert_rows(
    c: &mut SessionConn,
    w: &ChunkWork,
) -> Result<(u64, ServerCounts), mysql_async::Error> {
    let (client_charset, quoting) = c.charset().await?;
    let backslashes = quoting.backslash_escapes;
    // Bytes of another character set than the connection's are sent as
    // that set's hex strings (`_sjis X'955C'`): as string literals the
    // server read them as the connection's (a latin1 or sjis file failed
    // with ERROR 1366, or, outside strict mode, loaded as '?').
    let foreign = (!same_charset(&w.charset, &client_charset)).then_some(w.charset.as_str());
    let mut rows = 0;
    let mut counts = ServerCounts::default();
    let head = format!("INSERT INTO {} {} VALUES ", w.table, w.columns);
    let mut sql: Vec<u8> = head.clone().into_bytes();
    let mut n = 0;
    for rec in records(&w.data, &w.format) {
        if n > 0 {
            sql.push(b',');
        }
        sql.push(b'(');
        for (i, f) in rec.iter().enumerate() {
            if i > 0 {
                sql.push(b',');
            }
            match f {
                None => sql.extend_from_slice(b"NULL"),
                // A binary column's field goes in as its bytes, as
                // LOAD DATA puts them there (no conversion).
                Some(v) if w.format.binary_fields.get(i) == Some(&true) => {
                    push_hex(&mut sql, "binary", v)
                }
                // An empty field is an empty string, as LOAD DATA gives
                // it; a literal '' would be NULL under EMPTY_STRING_IS_NULL
                // (a hex string never is).
                Some(v) if v.is_empty() && !quoting.empty_strings => {
                    push_hex(&mut sql, foreign.unwrap_or(&w.charset), v)
                }
                Some(v) => match foreign {
                    Some(cs) => push_hex(&mut sql, cs, v),
                    None => push_literal(&mut sql, v, backslashes),
                },
            }
        }
        for i in rec.len()..w.fields {
            if i > 0 {
                sql.push(b',');
            }
            sql.extend_from_slice(b"DEFAULT");
        }
        sql.push(b')');
        n += 1;
        if sql.len() > 1 << 20 {
            c.conn.query_drop(&sql[..]).await?;
            rows += c.conn.affected_rows();
            counts.add(reply_counts(c));
            sql.truncate(head.len());
            n = 0;
        }
    }
    if n > 0 {
        c.conn.query_drop(&sql[..]).await?;
        rows += c.conn.affected_rows();
        counts.add(reply_counts(c));
    }
    Ok((rows, counts))
}

/// An INSERT reply's counts: its info text for several rows, its OK
/// packet for one (the server writes no info then).
fn reply_counts(c: &SessionConn) -> ServerCounts {
    ServerCounts::from_info(&c.conn.info())
        .unwrap_or_else(|| ServerCounts::from_ok(c.conn.affected_rows(), c.conn.get_warnings()))
}

/// Whether two character set names name one set (`utf8` is utf8mb3, as
/// the server reads it by default).
fn same_charset(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        let s = s.to_ascii_lowercase();
        if s == "utf8" {
            "utf8mb3".to_string()
        } else {
            s
        }
    };
    norm(a) == norm(b)
}

/// Raw bytes as a string of character set `cs`, in hex: read the same
/// whatever the connection's set and sql_mode.
fn push_hex(out: &mut Vec<u8>, cs: &str, v: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push(b'_');
    out.extend_from_slice(cs.as_bytes());
    out.extend_from_slice(b" X'");
    for &b in v {
        out.push(HEX[usize::from(b >> 4)]);
        out.push(HEX[usize::from(b & 15)]);
    }
    out.push(b'\'');
}

/// `_binary`-free string literal of raw bytes, for either escape mode.
fn push_literal(out: &mut Vec<u8>, v: &[u8], backslashes: bool) {
    out.push(b'\'');
    for &b in v {
        match b {
            b'\'' => out.extend_from_slice(b"''"),
            b'\\' if backslashes => out.extend_from_slice(b"\\\\"),
            0 if backslashes => out.extend_from_slice(b"\\0"),
            other => out.push(other),
        }
    }
    out.push(b'\'');
}

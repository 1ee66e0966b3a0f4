//! The INSERT → `LOAD DATA LOCAL` fast path: a batch of plain INSERTs is
//! sent as tab-separated rows when that gives exactly what the INSERTs
//! would (every row taken, no warning); anything else rolls back and the
//! caller runs the INSERTs. Only for transactional tables: a rollback is
//! what makes the fallback exact. In big5, gbk, gb18030, sjis and cp932
//! the server is asked which columns are binary (`binary_columns.rs`), since
//! LOAD DATA reads those byte by byte and the others a character at a
//! time (`values::append_rows`).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use mysql_async::prelude::Queryable;
use sqlfleet_dump::lex::Multibyte;
use sqlfleet_dump::values::{append_rows, target, Duplicates, Quoting, Target};
use sqlfleet_dump::Statement;

use crate::retry::retryable;
use crate::session::SessionConn;
use crate::state::Ctx;

/// Consecutive statements into the same table: one LOAD DATA.
struct Group {
    target: Target,
    /// The group's rows in the batch's buffer.
    range: Range<usize>,
    rows: u64,
    /// The input bytes of its statements (for progress).
    input: u64,
}

/// Which columns of each table a batch writes are binary, by a value's
/// place in its row (see `values::append_rows`): asked of the server
/// (`binary_columns.rs`) for each table once per batch, and only in a
/// set whose characters hold ASCII bytes, where
/// LOAD DATA reads a binary column's field byte by byte and a text
/// column's a character at a time. `None`: a statement does not convert,
/// or the server did not say (the INSERTs give its own error).
async fn binary_columns(
    c: &mut SessionConn,
    stmts: &[Statement],
    quoting: Quoting,
) -> Result<Option<HashMap<Target, Vec<bool>>>, mysql_async::Error> {
    let mut out = HashMap::new();
    if quoting.charset == Multibyte::AsciiSafe {
        return Ok(Some(out));
    }
    for s in stmts {
        let Some((t, width)) = target(&s.text, quoting) else {
            return Ok(None);
        };
        if out.contains_key(&t) {
            continue;
        }
        let columns = t.columns.as_deref().map_or("*", |c| {
            c.strip_prefix('(')
                .and_then(|c| c.strip_suffix(')'))
                .unwrap_or(c)
        });
        let binary =
            match crate::binary_columns::binary_columns(&mut c.conn, &t.table, columns).await {
                Ok(b) => b,
                Err(e) if retryable(&e) => return Err(e),
                Err(_) => return Ok(None),
            };
        if binary.len() != width {
            return Ok(None);
        }
        out.insert(t, binary);
    }
    Ok(Some(out))
}

/// The batch as LOAD DATA groups, its rows written into `buf`, if every
/// statement converts.
fn convert(
    stmts: &[Statement],
    quoting: Quoting,
    binary: &HashMap<Target, Vec<bool>>,
    buf: &mut Vec<u8>,
) -> Option<Vec<Group>> {
    buf.clear();
    // The rows take about as many bytes as the statements.
    buf.reserve(stmts.iter().map(|s| s.text.len()).sum());
    let mut groups: Vec<Group> = Vec::new();
    for s in stmts {
        let start = buf.len();
        let columns = match quoting.charset {
            Multibyte::AsciiSafe => &[][..],
            _ => binary.get(&target(&s.text, quoting)?.0)?.as_slice(),
        };
        let (target, rows) = append_rows(&s.text, quoting, columns, buf)?;
        match groups.last_mut() {
            Some(g) if g.target == target => {
                g.range.end = buf.len();
                g.rows += rows;
                g.input += s.end - s.offset;
            }
            _ => groups.push(Group {
                target,
                range: start..buf.len(),
                rows,
                input: s.end - s.offset,
            }),
        }
    }
    Some(groups)
}

/// The converted rows, shared by the pieces sent: when the last piece is
/// gone the buffer comes back for the next batch.
struct Shared(Arc<Vec<u8>>);

impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

pub enum Fast {
    /// Loaded and committed: rows.
    Done(u64),
    /// Not applicable or not exact: run the INSERTs instead.
    Fallback,
    /// A connection problem: retry the batch.
    Retry(mysql_async::Error),
}

/// BEGIN; LOAD DATA LOCAL for each group; the journal record; COMMIT —
/// only if the server took every row without a warning. Anything else
/// rolls back and leaves the batch to the INSERT path, so results are
/// always what the INSERTs would give.
pub async fn try_fast(
    ctx: &Ctx,
    c: &mut SessionConn,
    stmts: &[Statement],
    record: &(dyn Fn(u64) -> String + Sync),
) -> Fast {
    if !ctx.fast_path.load(Ordering::Relaxed) {
        return Fast::Fallback;
    }
    let (charset, quoting) = match c.charset().await {
        Ok(v) => v,
        Err(e) if retryable(&e) => return Fast::Retry(e),
        Err(_) => return Fast::Fallback,
    };
    let binary = match binary_columns(c, stmts, quoting).await {
        Ok(Some(b)) => b,
        Ok(None) => return Fast::Fallback,
        Err(e) => return Fast::Retry(e),
    };
    // The buffer is the connection's, kept across batches: a batch's
    // rows are tens of MiB, and fresh memory costs a page fault per 4 KiB.
    let mut buf = std::mem::take(&mut c.rows_buf);
    let Some(groups) = convert(stmts, quoting, &binary, &mut buf) else {
        c.rows_buf = buf;
        return Fast::Fallback;
    };
    let shared = Arc::new(buf);
    let all = Bytes::from_owner(Shared(shared.clone()));
    let first = stmts[0].offset;
    let out = load(
        ctx,
        c,
        (first, stmts.len()),
        &groups,
        &all,
        &charset,
        record,
    )
    .await;
    drop(all);
    // Every piece is gone once the server has read them; if the driver
    // still holds one (a statement that failed before reading), the
    // buffer is not reused.
    if let Ok(buf) = Arc::try_unwrap(shared) {
        c.rows_buf = buf;
    }
    out
}

async fn load(
    ctx: &Ctx,
    c: &mut SessionConn,
    (first, statements): (u64, usize),
    groups: &[Group],
    all: &Bytes,
    charset: &str,
    record: &(dyn Fn(u64) -> String + Sync),
) -> Fast {
    let check = |e: mysql_async::Error| {
        if retryable(&e) {
            Fast::Retry(e)
        } else {
            Fast::Fallback
        }
    };
    if let Err(e) = c.conn.query_drop("START TRANSACTION").await {
        return check(e);
    }
    let mut rows = 0;
    let mut counts = crate::counts::ServerCounts::default();
    let flight = crate::state::InFlight::new(&ctx.shared);
    for g in groups {
        let sql = g.target.load_sql("sqlfleet-batch", charset);
        let shared = ctx.shared.clone();
        let (sent, len) = (flight.adder(), g.range.len().max(1) as u64);
        let input = g.input;
        crate::infile::send(&mut c.conn, all, g.range.clone(), move |piece| {
            // Each piece stands for its share of the statements' bytes.
            sent(input * piece as u64 / len);
            !shared.stops(first)
        });
        if let Err(e) = c.conn.query_drop(sql).await {
            let _ = c.conn.query_drop("ROLLBACK").await;
            if let mysql_async::Error::Server(s) = &e {
                // The server (or its settings) refuses LOCAL INFILE: stop trying.
                if matches!(s.code, 1148 | 3948 | 4166)
                    && ctx.fast_path.swap(false, Ordering::Relaxed)
                {
                    crate::progress::say(&format!(
                        "the server refuses LOAD DATA LOCAL ({}); loading with INSERT statements",
                        s.message
                    ));
                }
            }
            return check(e);
        }
        let exact = c.conn.get_warnings() == 0
            && (g.target.duplicates == Duplicates::Replace || c.conn.affected_rows() == g.rows);
        if !exact {
            let _ = c.conn.query_drop("ROLLBACK").await;
            return Fast::Fallback;
        }
        rows += c.conn.affected_rows();
        match crate::counts::ServerCounts::from_info(&c.conn.info()) {
            Some(n) => counts.add(n),
            None => {
                // The server's own account is the only one: a reply that
                // does not give it sends the batch the INSERT way.
                let _ = c.conn.query_drop("ROLLBACK").await;
                return Fast::Fallback;
            }
        }
    }
    sqlfleet_faults::point!("load::batch_sent");
    if ctx.shared.stops(first) {
        // Rolled back; the caller sees why (`Shared::stops`).
        let _ = c.conn.query_drop("ROLLBACK").await;
        return Fast::Fallback;
    }
    if let Err(e) = c.conn.query_drop(record(rows)).await {
        let _ = c.conn.query_drop("ROLLBACK").await;
        return check(e);
    }
    sqlfleet_faults::point!("load::batch_journaled");
    match c.conn.query_drop("COMMIT").await {
        Ok(()) => {
            sqlfleet_faults::point!("load::batch_committed");
            ctx.shared
                .fast_statements
                .fetch_add(statements as u64, Ordering::Relaxed);
            ctx.shared.add_counts(counts);
            Fast::Done(rows)
        }
        Err(e) => check(e),
    }
}

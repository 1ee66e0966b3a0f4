//! The INSERT → `LOAD DATA LOCAL` fast path: a batch of plain INSERTs is
//! sent as tab-separated rows when that gives exactly what the INSERTs
//! would (every row taken, no warning); anything else rolls back and the
//! caller runs the INSERTs. Only for transactional tables: a rollback is
//! what makes the fallback exact.

use std::sync::atomic::Ordering;

use futures_util::StreamExt;
use mysql_async::prelude::Queryable;
use sqlfleet_dump::values::{insert_to_rows, Duplicates, Rows};
use sqlfleet_dump::Statement;

use crate::retry::retryable;
use crate::session::SessionConn;
use crate::state::Ctx;

/// The batch as LOAD DATA groups, if every statement converts.
fn convert(stmts: &[Statement], backslash_escapes: bool) -> Option<Vec<Rows>> {
    let mut groups: Vec<Rows> = Vec::new();
    // The rows take about as many bytes as the statements: the first group
    // (usually the only one: a batch is one table's) is sized once instead
    // of doubling through a batch of up to 64 MiB.
    let total: usize = stmts.iter().map(|s| s.text.len()).sum();
    for s in stmts {
        let r = insert_to_rows(&s.text, backslash_escapes)?;
        match groups.last_mut() {
            Some(g)
                if g.table == r.table && g.columns == r.columns && g.duplicates == r.duplicates =>
            {
                g.tsv.extend_from_slice(&r.tsv);
                g.rows += r.rows;
            }
            _ => {
                let mut r = r;
                if groups.is_empty() {
                    r.tsv.reserve(total.saturating_sub(r.tsv.len()));
                }
                groups.push(r)
            }
        }
    }
    Some(groups)
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
    let (charset, backslashes) = match c.charset().await {
        Ok(v) => v,
        Err(e) if retryable(&e) => return Fast::Retry(e),
        Err(_) => return Fast::Fallback,
    };
    let Some(groups) = convert(stmts, backslashes) else {
        return Fast::Fallback;
    };
    let check = |e: mysql_async::Error| {
        if retryable(&e) {
            Fast::Retry(e)
        } else {
            Fast::Fallback
        }
    };
    if let Err(e) = c.conn.query_drop("BEGIN").await {
        return check(e);
    }
    let mut rows = 0;
    for g in groups {
        let sql = g.load_sql("sqlfleet-batch", &charset);
        let expect = g.rows;
        let duplicates = g.duplicates;
        let data = bytes::Bytes::from(g.tsv);
        c.conn.set_infile_handler(async move {
            Ok(futures_util::stream::once(async move { Ok(data) }).boxed())
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
            && (duplicates == Duplicates::Replace || c.conn.affected_rows() == expect);
        if !exact {
            let _ = c.conn.query_drop("ROLLBACK").await;
            return Fast::Fallback;
        }
        rows += c.conn.affected_rows();
    }
    if let Err(e) = c.conn.query_drop(record(rows)).await {
        let _ = c.conn.query_drop("ROLLBACK").await;
        return check(e);
    }
    match c.conn.query_drop("COMMIT").await {
        Ok(()) => {
            ctx.shared
                .fast_statements
                .fetch_add(stmts.len() as u64, Ordering::Relaxed);
            Fast::Done(rows)
        }
        Err(e) => check(e),
    }
}

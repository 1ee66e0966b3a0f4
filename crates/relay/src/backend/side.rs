//! The relay's own connection for looking things up on the server (the
//! accounts of per-user mode, what writing a table does): dialed with the
//! relay's account on the first backend that answers, when first needed,
//! kept between lookups, and dialed once more when a kept one has gone
//! stale. Lookups through it take turns. Every query is counted by its
//! kind ([`OwnQuery`], `sqlfleet_relay_own_queries_total` in /metrics):
//! what the relay costs the server on its own behalf is measured, and
//! none of it scans the whole catalog.

use std::sync::Arc;

use crate::admin::metrics::Metrics;
pub use crate::admin::metrics::OwnQuery;
use crate::backend::command::query_rows;
use crate::backend::dial::{Dialer, Login, Shape};
use crate::config::Backend;

/// One row as (column name, value) pairs.
pub type Row = Vec<(String, Option<String>)>;

pub struct SideConn {
    dialer: Dialer,
    backends: Vec<Backend>,
    conn: tokio::sync::Mutex<Option<Login>>,
    metrics: Arc<Metrics>,
}

impl SideConn {
    pub fn new(dialer: Dialer, backends: Vec<Backend>, metrics: Arc<Metrics>) -> SideConn {
        SideConn {
            dialer,
            backends,
            conn: tokio::sync::Mutex::new(None),
            metrics,
        }
    }

    /// Runs `sqls` in order on the one connection and gives each one's
    /// rows (up to `limit`); a failure on a kept connection dials once
    /// more and runs them all again. Each statement sent counts as one
    /// own query of `kind`.
    pub async fn queries(
        &self,
        kind: OwnQuery,
        sqls: &[&str],
        limit: usize,
    ) -> Result<Vec<Vec<Row>>, String> {
        let mut guard = self.conn.lock().await;
        for attempt in 0..2 {
            if guard.is_none() {
                *guard = Some(self.dial().await?);
            }
            let Some(c) = guard.as_mut() else { continue };
            let mut out = Vec::with_capacity(sqls.len());
            let mut failed = None;
            for sql in sqls {
                self.metrics.own_query(kind);
                match query_rows(c, sql, limit).await {
                    Ok(rows) => out.push(rows),
                    Err(e) => {
                        failed = Some(e.to_string());
                        break;
                    }
                }
            }
            match failed {
                None => return Ok(out),
                // A kept connection may have gone stale: dial once more.
                Some(e) if attempt == 0 => {
                    tracing::debug!("the relay's lookup connection: {e}");
                    *guard = None;
                }
                Some(e) => return Err(e),
            }
        }
        Err("no connection".into())
    }

    async fn dial(&self) -> Result<Login, String> {
        let shape = Shape {
            caps: 0,
            collation: 45,
            ext: 0,
        };
        let mut last = String::from("no backend");
        for b in &self.backends {
            match self.dialer.login(b, shape, None).await {
                Ok(l) => return Ok(l),
                Err(e) => last = format!("{}:{}: {e}", b.host, b.port),
            }
        }
        Err(last)
    }
}

/// A row's value in column `col` (NULL and a missing column: None).
pub fn field(row: Option<&Row>, col: &str) -> Option<String> {
    row?.iter()
        .find(|(n, _)| n == col)
        .and_then(|(_, v)| v.clone())
}

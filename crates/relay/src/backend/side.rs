//! The relay's own connection for looking things up on the server (the
//! accounts of per-user mode, what writing a table does): dialed with the
//! relay's account when first needed, on a backend the health checks
//! find usable (the writable primary first, then other members; never
//! one marked down or outside a Galera Primary Component while another
//! will do), kept between lookups, and dialed once more when a kept one
//! has gone stale or its backend stopped being usable. A lookup gives up
//! on a backend found not answering (`Health::gone`) or after
//! [`LOOKUP_TIMEOUT`], and runs once more elsewhere: one stalled server
//! never holds the lookups of every client. Lookups through it take
//! turns. Every query is counted by its
//! kind ([`OwnQuery`], `sqlfleet_relay_own_queries_total` in /metrics):
//! what the relay costs the server on its own behalf is measured, and
//! none of it scans the whole catalog.

use std::sync::Arc;

use crate::admin::metrics::Metrics;
pub use crate::admin::metrics::OwnQuery;
use crate::backend::command::query_rows;
use crate::backend::dial::{Dialer, Login, Shape};
use crate::backend::health::{Brief, Health};
use crate::config::Backend;

/// The longest one round of lookups may take on a backend that still
/// passes its health checks.
pub const LOOKUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// One row as (column name, value) pairs.
pub type Row = Vec<(String, Option<String>)>;

pub struct SideConn {
    dialer: Dialer,
    backends: Vec<Backend>,
    health: Arc<Health>,
    /// The kept connection and the backend it is on.
    conn: tokio::sync::Mutex<Option<(usize, Login)>>,
    metrics: Arc<Metrics>,
}

/// Backends in the order lookups try them: usable ones (up, not excluded
/// from a Galera cluster) with the writable first, then those not yet
/// checked, then the rest (down: tried only when nothing else answers).
/// Config order within each group.
pub fn lookup_order(briefs: &[Brief]) -> Vec<usize> {
    let rank = |b: &Brief| match (b.checked, b.up, b.galera) {
        (true, true, Some(false)) => 3,
        (true, true, _) if !b.read_only || b.galera.is_some() => 0,
        (true, true, _) => 1,
        (false, _, _) => 2,
        (true, false, _) => 3,
    };
    let mut order: Vec<usize> = (0..briefs.len()).collect();
    order.sort_by_key(|&i| rank(&briefs[i]));
    order
}

impl SideConn {
    pub fn new(
        dialer: Dialer,
        backends: Vec<Backend>,
        health: Arc<Health>,
        metrics: Arc<Metrics>,
    ) -> SideConn {
        SideConn {
            dialer,
            backends,
            health,
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
    ) -> Result<Vec<Vec<Row>>, LookupError> {
        let mut guard = self.conn.lock().await;
        // A kept connection on a backend no longer the first choice (down,
        // excluded, or a better one back) is let go.
        if let Some((at, _)) = guard.as_ref() {
            if lookup_order(&self.health.briefs()).first() != Some(at) {
                *guard = None;
            }
        }
        for attempt in 0..2 {
            if guard.is_none() {
                *guard = Some(self.dial().await.map_err(LookupError::Dial)?);
            }
            let Some((at, c)) = guard.as_mut() else {
                continue;
            };
            let at = *at;
            let run = async {
                let mut out = Vec::with_capacity(sqls.len());
                for sql in sqls {
                    self.metrics.own_query(kind);
                    out.push(query_rows(c, sql, limit).await?);
                }
                Ok::<_, sqlfleet_wire::packet::WireError>(out)
            };
            let ran = tokio::time::timeout(LOOKUP_TIMEOUT, self.health.unless_gone(at, run)).await;
            let failed = match ran {
                Ok(Some(Ok(out))) => return Ok(out),
                // The server answered: the connection is sound, the
                // statement is what it refused.
                Ok(Some(Err(sqlfleet_wire::packet::WireError::Server {
                    code, message, ..
                }))) => {
                    return Err(LookupError::Refused { code, message });
                }
                Ok(Some(Err(e))) => e.to_string(),
                Ok(None) => format!(
                    "{}: found down ({})",
                    self.backends[at].addr(),
                    self.health
                        .get(at)
                        .error
                        .as_deref()
                        .unwrap_or("by its health check")
                ),
                Err(_) => {
                    let why = format!(
                        "{}: did not answer the relay's lookup within {LOOKUP_TIMEOUT:?}",
                        self.backends[at].addr()
                    );
                    self.health.mark_down(at, &why);
                    why
                }
            };
            // A kept connection may have gone stale, or its server stopped
            // answering: dial once more (elsewhere, if it is marked down).
            *guard = None;
            if attempt == 1 {
                return Err(LookupError::Failed(failed));
            }
            tracing::debug!("the relay's lookup connection: {failed}");
        }
        Err(LookupError::Failed("no connection".into()))
    }

    async fn dial(&self) -> Result<(usize, Login), String> {
        let shape = Shape {
            caps: 0,
            collation: 45,
            ext: 0,
        };
        let mut last = String::from("no backend");
        for i in lookup_order(&self.health.briefs()) {
            let b = &self.backends[i];
            match self.dialer.login(b, shape, None).await {
                Ok(l) => return Ok((i, l)),
                Err(e) => last = format!("{}:{}: {e}", b.host, b.port),
            }
        }
        Err(last)
    }
}

/// Why the relay's own lookup got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// No backend could be logged in to (the last one's error).
    #[error("{0}")]
    Dial(String),
    /// A statement failed, or its server stopped answering.
    #[error("{0}")]
    Failed(String),
    /// The server answered the statement with an error.
    #[error("ERROR {code}: {message}")]
    Refused { code: u16, message: String },
}

/// A row's value in column `col` (NULL and a missing column: None).
pub fn field(row: Option<&Row>, col: &str) -> Option<String> {
    row?.iter()
        .find(|(n, _)| n == col)
        .and_then(|(_, v)| v.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brief(checked: bool, up: bool, read_only: bool, galera: Option<bool>) -> Brief {
        Brief {
            checked,
            up,
            read_only,
            galera,
            ..Brief::default()
        }
    }

    #[test]
    fn lookups_go_to_usable_backends_first() {
        let primary = brief(true, true, false, None);
        let replica = brief(true, true, true, None);
        let down = brief(true, false, false, None);
        let unchecked = brief(false, false, false, None);
        let member = brief(true, true, false, Some(true));
        let excluded = brief(true, true, false, Some(false));
        let table: &[(&str, Vec<Brief>, Vec<usize>)] = &[
            ("primary first", vec![replica, primary], vec![1, 0]),
            (
                "a stopped primary last",
                vec![down, replica, replica],
                vec![1, 2, 0],
            ),
            (
                "unchecked after usable",
                vec![unchecked, replica],
                vec![1, 0],
            ),
            ("unchecked before down", vec![down, unchecked], vec![1, 0]),
            (
                "a node outside the Primary Component last",
                vec![excluded, member, member],
                vec![1, 2, 0],
            ),
            (
                "a read-only Galera member is a member",
                vec![brief(true, true, true, Some(true)), replica],
                vec![0, 1],
            ),
            (
                "all down: still tried, in order",
                vec![down, down],
                vec![0, 1],
            ),
        ];
        for (what, briefs, want) in table {
            assert_eq!(&lookup_order(briefs), want, "{what}");
        }
    }
}

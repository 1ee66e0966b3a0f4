//! The dump's session settings, replayed on every connection.
//!
//! A dump sets up its session (`SET NAMES`, `SET SQL_MODE`, `SET
//! FOREIGN_KEY_CHECKS=0`, `USE db`, user variables it restores later) and
//! changes it as it goes. The loader keeps those statements in an
//! append-only [`Prelude`]; each piece of work carries the prelude length
//! at its place in the dump, and a connection replays what it has not yet
//! applied before running it. So every statement runs with the session
//! state it would have had on the single connection of `mysql < dump.sql`.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use sqlfleet_conn::Target;
use sqlfleet_dump::values::Quoting;

use crate::error::LoadError;

#[derive(Clone, Default)]
pub struct Prelude(Arc<RwLock<Vec<Arc<[u8]>>>>);

impl Prelude {
    pub fn push(&self, stmt: &[u8]) -> usize {
        let mut v = self.0.write().unwrap_or_else(|e| e.into_inner());
        v.push(stmt.into());
        v.len()
    }

    pub fn len(&self) -> usize {
        self.0.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn range(&self, from: usize, to: usize) -> Vec<Arc<[u8]>> {
        let v = self.0.read().unwrap_or_else(|e| e.into_inner());
        v[from.min(v.len())..to.min(v.len())].to_vec()
    }
}

/// A connection that tracks how much of the prelude it has applied.
pub struct SessionConn {
    pub conn: Conn,
    applied: usize,
    /// `character_set_client` and how literals quote, as the prelude left
    /// them; read lazily for the LOAD DATA fast path.
    charset: Option<(String, Quoting)>,
    /// The fast path's row buffer, kept across batches (see `fast_path`).
    pub rows_buf: Vec<u8>,
}

pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// Whether the load's sessions write the server's binary log. `Write`,
/// the default, lets replicas and point-in-time recovery see the restore;
/// `Skip` (`--skip-binlog`, what myloader does unless `--enable-binlog`)
/// turns `sql_log_bin` off on every connection of the load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Binlog {
    #[default]
    Write,
    Skip,
}

impl SessionConn {
    pub async fn open(target: &Target, binlog: Binlog) -> Result<SessionConn, LoadError> {
        let mut conn = target.connect(CONNECT_TIMEOUT).await?;
        if binlog == Binlog::Skip {
            // Refused (no BINLOG ADMIN/SUPER): stop. Loading with the
            // binlog on after the user asked for it off would be a quiet
            // change of what the replicas receive.
            conn.query_drop("SET SESSION sql_log_bin = 0")
                .await
                .map_err(|e| LoadError::Setup {
                    what: format!(
                        "{}: --skip-binlog: the server refused SET sql_log_bin = 0 ({e}); it needs the BINLOG ADMIN or SUPER privilege. Leave the option out to load with the binary log on",
                        target.endpoint
                    ),
                })?;
        }
        Ok(SessionConn {
            conn,
            applied: 0,
            charset: None,
            rows_buf: Vec::new(),
        })
    }

    /// Replays prelude statements `[applied, upto)`.
    pub async fn sync(&mut self, prelude: &Prelude, upto: usize) -> Result<(), mysql_async::Error> {
        if upto <= self.applied {
            return Ok(());
        }
        // One round trip for the lot: a dump sets and restores a handful
        // of session variables around every table, and a worker that
        // catches up on thousands of them one by one pays a round trip
        // each. Statements with a `;` of their own go alone.
        let mut batch: Vec<u8> = Vec::new();
        for stmt in prelude.range(self.applied, upto) {
            if stmt.contains(&b';') {
                if !batch.is_empty() {
                    self.conn.query_drop(&batch[..]).await?;
                    batch.clear();
                }
                self.conn.query_drop(&*stmt).await?;
            } else {
                if !batch.is_empty() {
                    // (a newline first: a statement may end in a -- comment)
                    batch.extend_from_slice(b"\n;\n");
                }
                batch.extend_from_slice(&stmt);
            }
        }
        if !batch.is_empty() {
            self.conn.query_drop(&batch[..]).await?;
        }
        self.applied = upto;
        self.charset = None;
        Ok(())
    }

    /// Says the connection already has the prelude up to `n` (it ran
    /// those statements itself).
    pub fn mark_applied(&mut self, n: usize) {
        self.applied = self.applied.max(n);
        self.charset = None;
    }

    /// The session's client character set and how its string literals
    /// quote (NO_BACKSLASH_ESCAPES, ANSI_QUOTES, EMPTY_STRING_IS_NULL), as
    /// the server says.
    pub async fn charset(&mut self) -> Result<(String, Quoting), mysql_async::Error> {
        if let Some(c) = &self.charset {
            return Ok(c.clone());
        }
        let row: Option<(String, i64, i64, i64)> = self
            .conn
            .query_first(
                "SELECT @@character_set_client, @@sql_mode NOT LIKE '%NO_BACKSLASH_ESCAPES%', \
                 @@sql_mode NOT LIKE '%ANSI_QUOTES%', @@sql_mode NOT LIKE '%EMPTY_STRING_IS_NULL%'",
            )
            .await?;
        // No answer: assume the least (no double-quoted strings, no
        // empty strings).
        let c = row
            .map(|(cs, bs, dq, es)| {
                let quoting = Quoting {
                    backslash_escapes: bs == 1,
                    double_quoted_strings: dq == 1,
                    empty_strings: es == 1,
                    charset: sqlfleet_dump::lex::Multibyte::of_charset(&cs),
                };
                (cs, quoting)
            })
            .unwrap_or_else(|| {
                let quoting = Quoting {
                    double_quoted_strings: false,
                    empty_strings: false,
                    ..Quoting::DEFAULT
                };
                ("utf8mb4".into(), quoting)
            });
        self.charset = Some(c.clone());
        Ok(c)
    }
}

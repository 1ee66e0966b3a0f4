//! Connect-time variable reads answered without a server round trip, from
//! the server's own recorded reply (`frontend/answers.rs` says when that is
//! exact); the first such read of a kind goes to the server and is
//! recorded on the way.

use std::sync::atomic::Ordering::Relaxed;

use super::{Fail, Session};
use crate::config::Mode;
use crate::frontend::answers::{self, Key};
use crate::protocol::reply::{Outcome, STATUS_AUTOCOMMIT};

impl Session {
    /// The key this statement's reply is recorded under, when the client
    /// is in the state a recorded reply is exact for.
    pub(super) fn local_key(&self, sql: &[u8]) -> Option<Key> {
        if self.mode != Mode::Transaction
            || self.conn.is_some()
            || self.in_trans
            || !self.autocommit
            || !self.pins.is_empty()
            || self.pin_next.is_some()
            || self.found_rows_calc
            || !answers::is_variable_read(sql)
        {
            return None;
        }
        Some(Key {
            backend: self.ctx.pool.pick(self.route)?,
            shape: self.shape,
            db: self.db.clone(),
            account: self.account.as_ref().map(|a| a.user.clone()),
            settings: self.settings.clone(),
            sql: sql.to_vec(),
        })
    }

    /// Sends the recorded reply for `key`, if there is a fresh one, and
    /// leaves the session as the server's reply would have.
    pub(super) async fn answer_locally(&mut self, key: &Key) -> Result<bool, Fail> {
        let Some(reply) = self.ctx.answers.get(key, self.ctx.pool.epoch()) else {
            return Ok(false);
        };
        // Counted before the client can see the reply (a reader of the
        // metrics right after it must find it counted).
        self.ctx.metrics.answered_locally.fetch_add(1, Relaxed);
        self.ctx
            .metrics
            .bytes_to_client
            .fetch_add(reply.len() as u64, Relaxed);
        use tokio::io::AsyncWriteExt;
        self.io.s.write_all(&reply).await.map_err(|_| Fail::Close)?;
        // One result set of one row, no warnings: what a SELECT leaves.
        self.last_row_count = -1;
        self.last_found_rows = 1;
        self.found_rows_calc = false;
        Ok(true)
    }

    /// Keeps what the client just received for `key` when the reply was
    /// one that can be given again as it is.
    /// `epoch` is the pool's when the statement was sent.
    pub(super) fn record_answer(
        &self,
        mut key: Key,
        epoch: u64,
        o: &Outcome,
        reply: Option<Vec<u8>>,
    ) {
        let (Some(reply), Some(c)) = (reply, self.conn.as_ref()) else {
            return;
        };
        let exact = o.error.is_none()
            && o.warnings == 0
            && o.result_sets == 1
            && o.rows == 1
            && o.changes.is_empty()
            && o.status == Some(STATUS_AUTOCOMMIT)
            && o.insert_id == 0;
        if exact {
            key.backend = c.backend;
            self.ctx.answers.put(key, reply, epoch);
        }
    }
}

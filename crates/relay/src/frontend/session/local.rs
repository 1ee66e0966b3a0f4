//! Connect-time variable reads and session SETs answered without a server
//! round trip, from the server's own recorded reply (`frontend/answers.rs`
//! says when that is exact); the first such statement of a kind goes to
//! the server and is recorded on the way, with what it left of the
//! client's session (its settings, ROW_COUNT(), FOUND_ROWS()).

use std::sync::atomic::Ordering::Relaxed;

use super::{Fail, Session};
use crate::frontend::answers::{self, Key, Left};
use crate::protocol::reply::{Outcome, STATUS_AUTOCOMMIT};
use crate::protocol::sql::Effects;

/// Status flags a reply may carry besides autocommit and still be given
/// again: the session's sql_mode as the flags show it (NO_BACKSLASH_ESCAPES,
/// ANSI_QUOTES), which the key's settings fix.
const STATUS_SQL_MODE: u16 = 0x0200 | 0x8000;
/// The OK status flag saying the session's state changed (a tracking
/// client's SET reply carries it).
const STATUS_STATE_CHANGED: u16 = 0x4000;

impl Session {
    /// The key this statement's reply is recorded under, when the client
    /// is in the state a recorded reply is exact for.
    pub(super) fn local_key(&self, sql: &[u8]) -> Option<Key> {
        Some(Key {
            backend: self.ctx.pool.pick(self.route)?,
            shape: self.shape,
            db: self.st.db().clone(),
            account: self.account.as_ref().map(|a| a.user.clone()),
            settings: self.st.settings().to_vec(),
            sql: sql.to_vec(),
        })
    }

    /// Sends the recorded reply for `key`, if there is a fresh one, and
    /// leaves the session as the server's reply would have.
    pub(super) async fn answer_locally(&mut self, key: &Key) -> Result<bool, Fail> {
        let Some((reply, left)) = self.ctx.answers.get(key, self.ctx.pool.epoch()) else {
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
        self.io.s.flush().await.map_err(|_| Fail::Close)?;
        self.st
            .answered_locally(&left.settings, left.row_count, left.found_rows);
        if left.found_rows.is_some() {
            // The server's count on a connection the client holds is not
            // this answer's.
            if let Some(c) = self.conn.as_mut() {
                c.note_found_rows_of(None);
            }
        }
        Ok(true)
    }

    /// Keeps what the client just received for `key`, and what the
    /// statement left of the session, when both can be given again as they
    /// are: no error or warning, nothing the relay pins or holds the
    /// connection for, autocommit on and no transaction; a read's reply is
    /// one row with nothing tracked, a SET's an OK of no rows.
    /// `epoch` is the pool's when the statement was sent.
    pub(super) fn record_answer(
        &self,
        mut key: Key,
        epoch: u64,
        o: &Outcome,
        fx: &Effects,
        reply: Vec<u8>,
    ) {
        let Some(c) = self.conn.as_ref() else {
            return;
        };
        // (A count only the server knows is no recorded answer's.)
        let common = self.st.is_plain()
            && o.error.is_none()
            && o.warnings == 0
            && o.insert_id == 0
            && !fx.found_rows_server;
        let exact = if answers::is_session_set(fx) {
            common
                && o.result_sets == 0
                && o.affected == 0
                && o.status.is_some_and(|st| {
                    st & !(STATUS_STATE_CHANGED | STATUS_SQL_MODE) == STATUS_AUTOCOMMIT
                })
        } else {
            common
                && o.result_sets == 1
                && o.rows == 1
                && o.changes.is_empty()
                && o.status
                    .is_some_and(|st| st & !STATUS_SQL_MODE == STATUS_AUTOCOMMIT)
        };
        if exact {
            key.backend = c.backend();
            let left = Left {
                settings: self.st.settings().to_vec(),
                row_count: self.st.last_row_count(),
                found_rows: fx.selects.then_some(self.st.last_found_rows()),
            };
            self.ctx.answers.put(key, reply, left, epoch);
        }
    }
}

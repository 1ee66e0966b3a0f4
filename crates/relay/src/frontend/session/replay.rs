//! What a session does when the server connection under a statement is
//! lost before any of the reply reached the client (`journal.rs` decides,
//! pure): run the statement again, replay the open transaction on another
//! server and then run it, answer a ROLLBACK, or let the client see the
//! lost connection.
//!
//! A replay leases a connection on the route's server (the new writer
//! once health checks have chosen one; waiting up to `replay.wait`),
//! brings it to the client's settings and database, sends the recorded
//! statements one by one and compares each reply's digest with the one
//! the client was given (`protocol/digest.rs`). One that differs ends the
//! replay: the connection is dropped (the server rolls back what it ran)
//! and the client sees the lost connection, as it would directly. A
//! server that dies or stops answering during the replay is left for the
//! next one the route gives.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use sqlfleet_wire::command::COM_QUERY;

use super::journal::{self, OnLoss, Stmt};
use super::{Fail, Session};
use crate::backend::command;
use crate::protocol::digest::Leave;

/// At most this many recoveries for one client command (a statement
/// whose retry is lost again is decided again, once).
const RECOVERIES: usize = 2;

impl Session {
    /// Runs a client command; when its server connection is lost before
    /// any reply reached the client, recovers as the journal says.
    pub(super) async fn run_command(&mut self, cmd: &[u8]) -> Result<(), Fail> {
        let (in_trans, autocommit) = (self.st.in_trans(), self.st.autocommit());
        self.client_sent = false;
        self.replied = false;
        // New work waits while transactions lost with a server are being
        // replayed (`frontend/replays.rs`); a client inside a transaction
        // of its own goes on (it may hold what a replay waits for).
        if !in_trans
            && self.pending_loss.is_none()
            && !self
                .ctx
                .replays
                .clear(std::time::Instant::now(), crate::frontend::replays::QUIET)
        {
            self.ctx.replays.wait_clear().await;
        }
        let mut r = match self.pending_loss.take() {
            // Lost between statements: this one was never sent there.
            Some(why) => Err(Fail::Lost(why)),
            None => self.command(cmd).await,
        };
        for _ in 0..RECOVERIES {
            let sent = std::mem::take(&mut self.client_sent);
            let Err(Fail::Lost(why)) = &r else { break };
            if self.replied {
                // Lost after the client had its reply: nothing to recover.
                break;
            }
            let why = why.clone();
            let text = cmd.first() == Some(&COM_QUERY);
            let stmt = if text {
                journal::kind(&cmd[1..])
            } else {
                Stmt::Other
            };
            let read = text && self.stmt_read;
            let fits = self.st.fits_elsewhere();
            let decision = self
                .journal
                .on_loss(in_trans, autocommit, stmt, read, sent, fits);
            tracing::debug!(client = self.id, ?decision, "server connection lost: {why}");
            if let Some(c) = self.conn.take() {
                self.ctx.pool.discard(c);
            }
            if let Some(b) = self.backend {
                self.ctx.pool.doubt(b);
            }
            match decision {
                OnLoss::Retry => {
                    self.ctx.metrics.lost_retries.fetch_add(1, Relaxed);
                    self.ctx.replays.wait_clear().await;
                    self.route = self.default_route();
                    self.route_fixed = false;
                    r = self.command(cmd).await;
                }
                OnLoss::Replay => match self.replay(&why).await {
                    Ok(()) => {
                        self.ctx.metrics.replays.fetch_add(1, Relaxed);
                        tracing::info!(
                            client = self.id,
                            statements = self.journal.entries().len(),
                            "transaction replayed on another server connection after: {why}"
                        );
                        self.ctx.replays.wait_clear().await;
                        self.route = self.default_route();
                        self.route_fixed = false;
                        r = self.command(cmd).await;
                    }
                    Err(e) => {
                        self.ctx.metrics.replay_failures.fetch_add(1, Relaxed);
                        if let Fail::Lost(m) = &e {
                            tracing::info!(client = self.id, "transaction replay failed: {m}");
                        }
                        return Err(e);
                    }
                },
                OnLoss::RolledBack => {
                    // The server rolled back what the lost connection
                    // held; the ROLLBACK (or COMMIT of nothing) is done.
                    self.st.rolled_back();
                    self.journal.end();
                    self.ctx.metrics.lost_retries.fetch_add(1, Relaxed);
                    return self.local_ok().await;
                }
                OnLoss::GiveUp(reason) => {
                    if in_trans {
                        self.not_replayed(reason, &why);
                    }
                    break;
                }
            }
        }
        r
    }

    /// A transaction lost with its server connection is not replayed:
    /// counted (`transaction_replay_refused_total`) and logged with the
    /// reason — under a statement, while the client sat idle in it, or
    /// after the client had a reply.
    pub(super) fn not_replayed(&self, reason: journal::Why, why: &str) {
        self.ctx.metrics.replay_given_up.fetch_add(1, Relaxed);
        tracing::info!(
            client = self.id,
            "transaction not replayed ({reason}) after: {why}"
        );
    }

    /// Runs the journal's statements on a connection of the route's
    /// server, each reply as before; the connection is then the client's.
    async fn replay(&mut self, why: &str) -> Result<(), Fail> {
        let cfg = &self.ctx.cfg.replay;
        let (wait, leave) = (cfg.wait, cfg.leave);
        let deadline = Instant::now() + wait;
        let entries = self.journal.entries().to_vec();
        let mut last = String::from("no server was tried");
        let ctx = self.ctx.clone();
        let _running = ctx.replays.start();
        loop {
            if let Some(c) = self.conn.take() {
                self.ctx.pool.discard(c);
            }
            if Instant::now() >= deadline {
                return Err(Fail::Lost(format!(
                    "{why}; the transaction could not be replayed within replay.wait ({:.1} s): {last}",
                    wait.as_secs_f64()
                )));
            }
            self.route = self.default_route();
            self.route_fixed = false;
            if let Err(e) = self.ensure_conn().await {
                last = match e {
                    Fail::Close => return Err(Fail::Close),
                    Fail::Err(code, _, m) => format!("ERROR {code}: {m}"),
                    Fail::Lost(m) => m,
                };
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            let Some(c) = self.conn.as_mut() else {
                continue;
            };
            let backend = c.backend();
            let addr = self
                .ctx
                .cfg
                .backends
                .get(backend)
                .map(|b| b.addr())
                .unwrap_or_default();
            let health = self.ctx.pool.health.clone();
            // A Galera node applies what others committed a little later:
            // the replay's reads must see every write the client's reads
            // had seen on the node that died (one causality wait first).
            let galera = health.get(backend).galera.is_some();
            let ran = health
                .unless_gone(backend, async {
                    if galera {
                        let o = command::command(
                            c,
                            b"\x03SET STATEMENT wsrep_sync_wait = 1 FOR SELECT 1",
                            crate::protocol::reply::Expect::Results { cursor: false },
                        )
                        .await?;
                        if let Some((code, m)) = o.error {
                            return Err(sqlfleet_wire::packet::WireError::Protocol(format!(
                                "the causality wait: ERROR {code}: {m}"
                            )));
                        }
                        // Its restore is reported with a later reply.
                        c.note_restores(&["wsrep_sync_wait"]);
                    }
                    let mut insert_id = None;
                    let mut set_insert_id = false;
                    for (i, e) in entries.iter().enumerate() {
                        sqlfleet_faults::point!("relay::replay_statement");
                        if e.insert_id != 0 && leave == Leave::Nothing {
                            let set = format!("\x03SET insert_id = {}", e.insert_id);
                            let o = command::command(
                                c,
                                set.as_bytes(),
                                crate::protocol::reply::Expect::Results { cursor: false },
                            )
                            .await?;
                            if let Some((code, m)) = o.error {
                                return Err(sqlfleet_wire::packet::WireError::Protocol(format!(
                                    "SET insert_id: ERROR {code}: {m}"
                                )));
                            }
                            set_insert_id = true;
                        }
                        let (o, d) = command::command_digest(c, &e.payload, leave).await?;
                        if o.insert_id != 0 {
                            insert_id = Some(o.insert_id);
                        }
                        if d != e.digest {
                            return Ok(Err((i, o)));
                        }
                    }
                    if set_insert_id {
                        // The relay's own one-shot `insert_id`: MariaDB 11.4
                        // reports its use late (with the client's next
                        // reply, taken there for the client's one-shot
                        // variable: a pin) or loses count of other
                        // variables after it (`backend/tracker.rs`). The
                        // tracker starts afresh instead.
                        c.note_tracking_lost();
                        c.mend_tracking().await?;
                    }
                    Ok::<_, sqlfleet_wire::packet::WireError>(Ok(insert_id))
                })
                .await;
            match ran {
                None => last = format!("{addr} stopped answering during the replay"),
                Some(Err(e)) => last = format!("{addr}: {e}"),
                // The server refused the statement (not serving now): not
                // an answer; another server, or this one later.
                Some(Ok(Err((_, o))))
                    if o.error
                        .as_ref()
                        .is_some_and(|e| crate::protocol::reply::refuses_service(e.0)) =>
                {
                    let (code, m) = o.error.clone().unwrap_or_default();
                    last = format!("{addr} refused: ERROR {code}: {m}");
                    self.ctx.pool.health.mark_down(backend, &last);
                }
                Some(Ok(Err((i, o)))) => {
                    if let Some(c) = self.conn.take() {
                        self.ctx.pool.discard(c);
                    }
                    self.ctx.metrics.replay_mismatches.fetch_add(1, Relaxed);
                    let said = match &o.error {
                        Some((code, m)) => format!("ERROR {code}: {m}"),
                        None => format!(
                            "{} rows, {} affected, insert id {}",
                            o.rows, o.affected, o.insert_id
                        ),
                    };
                    return Err(Fail::Lost(format!(
                        "{why}; the transaction was not replayed: its statement {} of {} answered differently on {addr} ({said})",
                        i + 1,
                        entries.len()
                    )));
                }
                Some(Ok(Ok(insert_id))) => {
                    if let (Some(c), Some(_)) = (self.conn.as_mut(), insert_id) {
                        // (An OK's id may be one written, which leaves
                        // LAST_INSERT_ID() as it was: set again.)
                        c.forget_last_insert_id();
                    }
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

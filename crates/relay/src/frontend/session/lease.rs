//! The backend connection a client holds (its lease): leased from the
//! pool for the client's route and brought to the client's session — its
//! settings replayed (`ClientState`'s settings against the connection's),
//! its default database set, diagnostics another client left made empty —
//! then a command forwarded on it and its reply streamed to the client;
//! given back when the client's state allows (`ClientState::may_release`).

use std::sync::atomic::Ordering::Relaxed;

use sqlfleet_wire::command::{COM_INIT_DB, COM_STMT_CLOSE};
use sqlfleet_wire::handshake::SESSION_TRACK;
use sqlfleet_wire::packet::WireError;

use super::{Fail, Session};
use crate::backend::command::{self, Link};
use crate::backend::pool::BackendConn;
use crate::config::Mode;
use crate::frontend::session::state::{FoundRowsLost, Parting};
use crate::protocol::io::ForwardError;
use crate::protocol::reply::{Expect, Outcome};
use crate::protocol::sql::{Effects, Pin};

impl Session {
    /// On a connection the client's previous statement did not run on,
    /// diagnostics are made the client's own: empty (its previous
    /// statement left nothing to report, else the connection would still
    /// be held).
    pub(super) async fn carry_over(&mut self, fx: &Effects, text: bool) -> Result<(), Fail> {
        // Same connection as the previous statement, or a statement that
        // clears diagnostics itself (it uses a table): nothing to do.
        if self.conn.is_some() || (fx.uses_tables && !fx.reads_diagnostics) {
            return Ok(());
        }
        self.before_replica_read(text).await?;
        self.ensure_conn().await?;
        // What the previous user of the connection left must not show.
        let dirty = self.conn.as_ref().is_some_and(|c| c.diagnostics_dirty());
        if fx.reads_diagnostics || dirty {
            self.clear_diagnostics().await?;
        }
        Ok(())
    }

    /// Before a statement whose FOUND_ROWS() may be the count before it
    /// (`carry_found_rows`): the connection holds the client's count,
    /// made there when it holds another's — else the server's answer after
    /// the statement could be that other count. A count too big to make
    /// is lost instead (`ClientState::lose_found_rows`).
    pub(super) async fn restore_found_rows(&mut self) -> Result<(), Fail> {
        let Some(restore) = self.carry_found_rows.clone() else {
            return Ok(());
        };
        let id = self.id;
        let c = self.ensure_conn().await?;
        if c.holds_found_rows_of(id) {
            return Ok(());
        }
        let Some((sql, vars)) = restore else {
            self.st.lose_found_rows(FoundRowsLost::TooBig);
            return Ok(());
        };
        let mut p = vec![0x03];
        p.extend_from_slice(sql.as_bytes());
        let o = command::command(c, &p, Expect::Results { cursor: false })
            .await
            .map_err(|e| Fail::Lost(e.to_string()))?;
        c.note_restores(&vars);
        if o.error.is_some() {
            self.st.lose_found_rows(FoundRowsLost::NotMade);
        } else {
            c.note_found_rows_of(Some(id));
            self.ctx.metrics.found_rows_restored.fetch_add(1, Relaxed);
        }
        Ok(())
    }

    /// On a connection the client's previous statement did not run on:
    /// empty diagnostics, and the row count that statement left where it
    /// is one a statement reproduces (-1 after a query, 0 after others).
    pub(super) async fn clear_diagnostics(&mut self) -> Result<(), Fail> {
        let row_count = self.st.last_row_count();
        let c = self.ensure_conn().await?;
        let lost = |e: WireError| Fail::Lost(e.to_string());
        // Only a statement that reads a table clears the warning list.
        let clear = b"\x03SELECT * FROM (SELECT 1) AS sqlfleet_relay WHERE 0";
        command::command(c, clear, Expect::Results { cursor: false })
            .await
            .map_err(lost)?;
        if row_count == 0 {
            command::simple(c, b"\x03DO 0").await.map_err(lost)?;
        }
        c.diagnostics_cleared();
        Ok(())
    }

    /// The client's backend connection, leased and brought to the
    /// client's session state if it has none.
    pub(super) async fn ensure_conn(&mut self) -> Result<&mut BackendConn, Fail> {
        let mut attempts = 0;
        while self.conn.is_none() {
            attempts += 1;
            let b = match self.backend {
                Some(b) if self.st.mode() == Mode::Session => b,
                _ => self.pick_backend().await?,
            };
            self.backend = Some(b);
            let health = self.ctx.pool.health.clone();
            let leased = health.unless_gone(b, self.ctx.pool.lease(b, self.want()));
            let Some(leased) = leased.await else {
                // Not answering: like a backend that refuses connections.
                if attempts < 3
                    && self.ctx.cfg.backends.len() > 1
                    && self.st.mode() == Mode::Transaction
                {
                    continue;
                }
                return Err(Fail::Lost(found_down(
                    &self.ctx.cfg.backends,
                    &self.ctx.pool.health,
                    b,
                )));
            };
            let c = match leased {
                Ok(c) => c,
                Err(e @ crate::backend::pool::LeaseError::Connect(..)) => {
                    // Dead before a health check noticed: mark it and, with
                    // several backends, try the next one the route allows.
                    self.ctx.pool.health.mark_down(b, &e.to_string());
                    if attempts < 3
                        && self.ctx.cfg.backends.len() > 1
                        && self.st.mode() == Mode::Transaction
                    {
                        continue;
                    }
                    return Err(e.into());
                }
                // Per-user, a session that has run commands logged in to
                // the relay with a password the server no longer takes
                // for its account (rotated directly on the server, or
                // the account locked or dropped): a direct session would
                // keep going, a pooled one needs new server connections.
                Err(crate::backend::pool::LeaseError::Denied(1045, text))
                    if self.account.is_some() && self.commands_run > 0 =>
                {
                    return Err(Fail::Err(
                        1045,
                        "28000",
                        format!(
                            "{text} (sqlfleet relay: the server refused a new connection for this session's account with the password the session gave the relay: if it logged in earlier, the account's password changed since, or the account was dropped; log in again)"
                        ),
                    ));
                }
                Err(e) => return Err(e.into()),
            };
            match self.adopt(c).await {
                // A pooled connection found dead while being brought to
                // the client's state: the others are doubted, and another
                // is tried.
                Err(Fail::Lost(_)) if attempts < 3 && self.st.mode() == Mode::Transaction => {
                    self.ctx.pool.doubt(b);
                }
                r => r?,
            }
        }
        self.conn.as_mut().ok_or(Fail::Close)
    }

    /// Brings `c` to the client's session state and makes it the client's
    /// connection; one that could not be brought there, or whose server
    /// stopped answering meanwhile, is discarded.
    pub(super) async fn adopt(&mut self, mut c: BackendConn) -> Result<(), Fail> {
        let health = self.ctx.pool.health.clone();
        let synced = health
            .unless_gone(c.backend(), self.sync(&mut c))
            .await
            .unwrap_or_else(|| {
                self.ctx.metrics.backend_lost.fetch_add(1, Relaxed);
                Err(Fail::Lost(found_down(
                    &self.ctx.cfg.backends,
                    &health,
                    c.backend(),
                )))
            });
        match synced {
            Ok(()) => {
                // A replica read's lease: the route asked for a replica
                // and got one. A connection got for any other route is
                // no replica read, whatever the server's role now (the
                // one backend turned read_only a moment: the sessions
                // that began then were refused every write).
                self.leased_on_replica =
                    self.route.is_replica() && health.role(c.backend()) == "replica";
                if self.st.mode() == Mode::Session {
                    self.handle.set_alias(Some(c.thread_id()));
                }
                if let Some(bytes) = self.login_db_bytes.take() {
                    if let Err(e) = self.login_db_by_bytes(&mut c, bytes).await {
                        self.ctx.pool.discard(c);
                        return Err(e);
                    }
                }
                // (A replay's new connection: a count only the old one
                // held is not this one's.)
                self.st.conn_gone();
                self.conn = Some(c);
                Ok(())
            }
            Err(e) => {
                self.ctx.pool.discard(c);
                Err(e)
            }
        }
    }

    /// Replays the client's settings and default database on `c`.
    pub(super) async fn sync(&self, c: &mut BackendConn) -> Result<(), Fail> {
        let lost = |e: WireError| Fail::Lost(e.to_string());
        // (A connection left so by a path that did not mend it.)
        c.mend_tracking().await.map_err(lost)?;
        if c.needs_reset_for(self.st.settings()) {
            self.ctx.metrics.resets.fetch_add(1, Relaxed);
            c.reset().await.map_err(lost)?;
        }
        if let Err(e) = self.replay_settings(c).await {
            // Undoing what another client left can fail where replaying
            // the client's own would not (a variable without a DEFAULT):
            // that is not this client's error. A reset undoes everything.
            if !matches!(e, Fail::Err(..)) || !c.has_settings() {
                return Err(e);
            }
            tracing::debug!(
                client = self.id,
                "undoing another client's settings failed; resetting the connection"
            );
            self.ctx.metrics.resets.fetch_add(1, Relaxed);
            c.reset().await.map_err(lost)?;
            self.replay_settings(c).await?;
        }
        match (&self.st.db(), c.db()) {
            // The login's database, named next in the client's bytes.
            (None, _) if self.login_db_bytes.is_some() => {}
            (Some(d), cur) if cur != Some(d.as_str()) => {
                let mut p = vec![COM_INIT_DB];
                p.extend_from_slice(d.as_bytes());
                let o = command::command(c, &p, Expect::Single)
                    .await
                    .map_err(lost)?;
                if let Some((code, msg)) = o.error {
                    return Err(Fail::Err(code, "42000", msg));
                }
                c.note_db(Some(d.clone()));
            }
            (None, Some(_)) => {
                return Err(Fail::Err(
                    1046,
                    "3D000",
                    "sqlfleet relay: no backend connection without a default database".into(),
                ))
            }
            _ => {}
        }
        Ok(())
    }

    /// The login's database named in the client's own bytes (`schema.rs`):
    /// the name the server reports back for it becomes the session's, and
    /// the session keeps `c` while it is its default. A server that does
    /// not report it (session_track_schema off) refuses the login clearly
    /// rather than leave the relay a name it cannot say again.
    async fn login_db_by_bytes(&mut self, c: &mut BackendConn, bytes: Vec<u8>) -> Result<(), Fail> {
        let mut p = vec![COM_INIT_DB];
        p.extend_from_slice(&bytes);
        let o = command::command(c, &p, Expect::Single)
            .await
            .map_err(|e| Fail::Lost(e.to_string()))?;
        if let Some((code, msg)) = o.error {
            return Err(Fail::Err(code, "42000", msg));
        }
        let named = o.changes.iter().rev().find_map(|ch| match ch {
            crate::protocol::track::Change::Schema(d) if !d.is_empty() => Some(d.clone()),
            _ => None,
        });
        let Some(name) = named else {
            return Err(Fail::Err(
                1049,
                "42000",
                format!(
                    "sqlfleet relay: the server did not report the name of database '{}' (session_track_schema is off), which this client's character set writes outside ASCII; log in without a database and USE it, or turn session_track_schema on",
                    String::from_utf8_lossy(&bytes).escape_debug()
                ),
            ));
        };
        self.st.use_db(Some(name.clone()));
        c.note_db(Some(name));
        self.hold_for_schema();
        Ok(())
    }

    /// Keeps the connection while only the client's bytes can name its
    /// default database (`schema.rs`).
    pub(super) fn hold_for_schema(&mut self) {
        let keep = super::schema::keeps_connection(
            self.st.db().as_deref(),
            self.st.settings(),
            self.shape.collation,
        );
        if self.st.hold(Pin::Schema, keep) {
            self.ctx.metrics.pin(Pin::Schema);
        }
    }

    /// One SET: the client's settings `c` lacks, its LAST_INSERT_ID(), and
    /// `= DEFAULT` for what another client left on `c`.
    pub(super) async fn replay_settings(&self, c: &mut BackendConn) -> Result<(), Fail> {
        let lost = |e: WireError| Fail::Lost(e.to_string());
        let parts = c
            .replay_for(self.st.settings(), self.st.last_insert_id())
            .set;
        if !parts.is_empty() {
            self.ctx.metrics.state_syncs.fetch_add(1, Relaxed);
            let mut q = b"\x03SET ".to_vec();
            q.extend_from_slice(parts.join(", ").as_bytes());
            if c.tracking() {
                // Last: a plugin's variable among them (or its undoing)
                // makes MariaDB 11.4's tracker lose count
                // (`backend/tracker.rs`); set again after them, it starts
                // afresh, in the same round trip.
                q.extend_from_slice(b", ");
                q.extend_from_slice(crate::backend::tracker::REARM.as_bytes());
            }
            sqlfleet_faults::point!("relay::before_replay");
            let o = command::command(c, &q, Expect::Results { cursor: false })
                .await
                .map_err(lost)?;
            sqlfleet_faults::point!("relay::after_replay");
            if let Some((code, msg)) = o.error {
                return Err(Fail::Err(
                    code,
                    "HY000",
                    format!("sqlfleet relay: replaying session settings: {msg}"),
                ));
            }
            c.replayed(self.st.settings(), self.st.last_insert_id());
        }
        Ok(())
    }

    /// Sends a command on the client's backend connection and forwards the
    /// reply; `rewrite_id` replaces a prepared statement's id in it.
    pub(super) async fn forward(
        &mut self,
        payload: &[u8],
        expect: Expect,
        rewrite_id: Option<u32>,
    ) -> Result<Outcome, Fail> {
        // For this forward only, whatever happens before the reply.
        let hold_refusal = std::mem::take(&mut self.hold_refusal);
        let with_wait = self.galera_wait_prefix(payload);
        let payload = with_wait.as_deref().unwrap_or(payload);
        self.ensure_conn().await?;
        let Some(mut c) = self.conn.take() else {
            return Err(Fail::Close);
        };
        // From here until the reply ends, KILL from another client reaches
        // this statement.
        let running = (c.backend(), c.thread_id());
        // A streamed statement's rest goes from the client's socket to the
        // server's behind its head (`protocol/io/stream.rs`).
        let mut streamed = self.streamed.take();
        let client_io = &mut self.io;
        let sent = async {
            for id in std::mem::take(&mut c.stmts().to_close) {
                let mut p = vec![COM_STMT_CLOSE];
                p.extend_from_slice(&id.to_le_bytes());
                c.io.write_packet(0, &p).await.map_err(Some)?;
            }
            let Some(st) = streamed.as_mut() else {
                return c.io.write_packet(0, payload).await.map(drop).map_err(Some);
            };
            // Boxed: the streaming steps' state lives only when a
            // statement streams, not in every forward's future.
            Box::pin(crate::protocol::io::stream_command(
                client_io, &mut c.io, payload, st,
            ))
            .await
        };
        self.handle.running(Some(running));
        let sent = sent.await;
        let stream_seq = self.streamed_sent(streamed.as_ref(), payload.len());
        if let Err(e) = sent {
            self.handle.running(None);
            return Err(self.send_failed(c, e, stream_seq, payload.len()).await);
        }
        self.client_sent = true;
        // Until the reply starts, watch the client too: one that goes away
        // mid-statement (a lock wait, a long query) leaves its server
        // connection too, as a direct client's leaving would. And the
        // backend: one found not answering (health checks) fails the
        // statement, which a read on a replica retries elsewhere.
        let health = self.ctx.pool.health.clone();
        let gone = health.gone(c.backend());
        tokio::pin!(gone);
        loop {
            let pipelined = self.io.buffered();
            tokio::select! {
                _ = &mut gone => {
                    self.handle.running(None);
                    let why = found_down(&self.ctx.cfg.backends, &self.ctx.pool.health, c.backend());
                    self.ctx.pool.discard(c);
                    self.ctx.metrics.backend_lost.fetch_add(1, Relaxed);
                    return Err(Fail::Lost(why));
                }
                r = c.io.readable() => {
                    if let Err(e) = r {
                        self.handle.running(None);
                        self.ctx.pool.discard(c);
                        return Err(Fail::Lost(e.to_string()));
                    }
                    break;
                }
                r = self.io.read_more(), if pipelined < (1 << 20) => {
                    if r.is_err() {
                        // The client went away mid-statement: its server
                        // connection goes too, so that the server sees
                        // what it sees of a direct client that leaves —
                        // waits (SLEEP, GET_LOCK) end early and the
                        // statement finishes or fails as the server
                        // decides. (A KILL QUERY would fail statements a
                        // direct client's departure lets finish: an
                        // INSERT ... SLEEP(1) wrote its row directly and
                        // none through the relay.)
                        self.handle.running(None);
                        self.ctx.pool.discard(c);
                        return Err(Fail::Close);
                    }
                }
            }
        }
        let mut t = self.tracker(&c, expect, rewrite_id, hold_refusal);
        let forwarded = c.io.forward_reply(&mut self.io, &mut t).await;
        self.handle.running(None);
        if t.held {
            return Err(self.held(c, &mut t, hold_refusal));
        }
        match forwarded {
            Ok(n) => {
                self.replied = true;
                self.capture = t.capture.take();
                self.ctx.metrics.bytes_to_client.fetch_add(n, Relaxed);
                if let Some(b) = self.ctx.metrics.backend(c.backend()) {
                    b.bytes_to_client.fetch_add(n, Relaxed);
                }
                self.conn = Some(c);
            }
            Err(ForwardError::Client(_)) => {
                // Gone mid-reply: the rest of the reply is still coming.
                self.ctx.pool.discard(c);
                return Err(Fail::Close);
            }
            Err(ForwardError::Backend { err, forwarded }) => {
                self.ctx.pool.discard(c);
                self.ctx.metrics.backend_lost.fetch_add(1, Relaxed);
                if forwarded {
                    return Err(Fail::Close);
                }
                return Err(Fail::Lost(err.to_string()));
            }
        }
        Ok(self.server_answered(&mut t))
    }

    /// The statement with Galera's causal wait in front when the route
    /// asked for one (`SET STATEMENT wsrep_sync_wait = 1 FOR ...`).
    fn galera_wait_prefix(&mut self, payload: &[u8]) -> Option<Vec<u8>> {
        if !std::mem::take(&mut self.sync_wait_next)
            || payload.first() != Some(&sqlfleet_wire::command::COM_QUERY)
        {
            return None;
        }
        // What the server's tracker reports of it is no setting of the
        // client's, and the state change it flags is that one (a read
        // chosen for a replica changes nothing itself).
        self.st.sync_wait_added();
        Some([&payload[..1], GALERA_SYNC_WAIT, &payload[1..]].concat())
    }

    /// A streamed statement is sent: its bytes counted, and the sequence
    /// id its reply starts at (kept for the command's end in `run`,
    /// whatever else this command forwards after it).
    fn streamed_sent(
        &mut self,
        streamed: Option<&crate::protocol::io::Streamed>,
        head: usize,
    ) -> Option<u8> {
        let st = streamed?;
        self.ctx
            .metrics
            .bytes_to_backend
            .fetch_add(st.total.saturating_sub(head) as u64, Relaxed);
        let seq = st.reply_seq();
        self.streamed_seq = Some(seq);
        Some(seq)
    }

    /// Sending the command failed (`None`: on the client's side). The
    /// server may have refused the command before it went out whole
    /// (1153: bigger than its max_allowed_packet) and closed: its own
    /// error, when it is there, is the answer.
    async fn send_failed(
        &mut self,
        mut c: BackendConn,
        e: Option<WireError>,
        stream_seq: Option<u8>,
        head: usize,
    ) -> Fail {
        let Some(e) = e else {
            self.ctx.pool.discard(c);
            return Fail::Close;
        };
        let refusal = tokio::time::timeout(
            std::time::Duration::from_millis(200),
            c.io.read_packet(1 << 16),
        )
        .await
        .ok()
        .and_then(Result::ok)
        .and_then(|(_, p)| sqlfleet_wire::packet::parse_err(&p));
        self.ctx.pool.discard(c);
        let Some((code, msg)) = refusal else {
            return Fail::Lost(e.to_string());
        };
        if !self.st.lives_on_conn() {
            return Fail::Err(code, "08S01", msg);
        }
        // The session died with the server's connection: the client gets
        // the server's words, then the end.
        let seq = stream_seq.unwrap_or(super::reply_seq(head));
        let _ = self
            .io
            .write_packet(
                seq,
                &sqlfleet_wire::packet::err_payload(code, "08S01", &msg),
            )
            .await;
        Fail::Close
    }

    /// How the reply on `c` is read and passed on: the client's session
    /// tracking, the digest a transaction's journal wants, a captured
    /// result for the cache, a refusal held back for a retry elsewhere.
    fn tracker(
        &mut self,
        c: &BackendConn,
        expect: Expect,
        rewrite_id: Option<u32>,
        hold_refusal: bool,
    ) -> crate::protocol::reply::Tracker {
        use crate::protocol::reply::ClientTracking;
        let layout = c.caps() & SESSION_TRACK != 0;
        let client = if self.caps & SESSION_TRACK == 0 {
            ClientTracking::Strip
        } else if self.st.pins().contains(&Pin::Tracking) {
            // The client's own tracking settings are on the connection.
            ClientTracking::Raw
        } else {
            c.client_tracking()
                .cloned()
                .map_or(ClientTracking::Raw, ClientTracking::Filter)
        };
        let mut t = crate::protocol::reply::Tracker::new(expect, c.deprecate_eof())
            .tracking(layout, client);
        if std::mem::take(&mut self.digest_next) {
            t.digest = Some(Default::default());
        }
        t.rewrite_id = rewrite_id;
        t.capture = self.capture.take();
        t.capture_max = std::mem::replace(&mut self.capture_max, usize::MAX);
        // On a Galera node with replay on, a refusal (1047 while the node
        // is outside the Primary component, 1053, 1927) is held back too:
        // the statement did not run there, and it runs again elsewhere
        // (`replay.rs`) instead of failing the client.
        let galera = self.ctx.pool.health.get(c.backend()).galera.is_some();
        t.hold_refusal = hold_refusal || (galera && self.journal.enabled());
        t
    }

    /// The server will not serve now (shutting down, not Synced) and its
    /// refusal was held back: the caller retries elsewhere; the connection
    /// is not reused.
    fn held(
        &mut self,
        c: BackendConn,
        t: &mut crate::protocol::reply::Tracker,
        hold_refusal: bool,
    ) -> Fail {
        self.capture = t.capture.take();
        let addr = self
            .ctx
            .cfg
            .backends
            .get(c.backend())
            .map(|b| b.addr())
            .unwrap_or_default();
        let backend = c.backend();
        self.ctx.pool.discard(c);
        let (code, msg) = t.outcome.error.clone().unwrap_or_default();
        if code == 1047 {
            // Refused before it ran: as if never sent.
            self.client_sent = false;
        }
        let why = format!("{addr} refused the statement: ERROR {code}: {msg}");
        if !hold_refusal {
            // A writer that will not serve now: others are chosen until
            // its health check finds it serving again.
            self.ctx.pool.health.mark_down(backend, &why);
        }
        Fail::Lost(why)
    }

    /// The server's reply reached the client whole: its digest kept for
    /// the journal, counted, observed; the server thread id the client can
    /// learn (CONNECTION_ID(); in session mode its own connection's) names
    /// it for KILL too.
    fn server_answered(&mut self, t: &mut crate::protocol::reply::Tracker) -> Outcome {
        if let Some(d) = t.digest.take() {
            self.last_digest = Some(d.finish(t.outcome.answer(), self.ctx.cfg.replay.leave));
        }
        // (Taken, not the tracker moved here: it is large, and this runs
        // for every statement.)
        let o = std::mem::take(&mut t.outcome);
        if o.error.is_some() {
            self.ctx.metrics.errors.fetch_add(1, Relaxed);
        }
        self.observe(&o);
        if (self.st.pins().contains(&Pin::ConnectionId) || self.st.mode() == Mode::Session)
            && self.handle.alias().is_none()
        {
            self.handle
                .set_alias(self.conn.as_ref().map(|c| c.thread_id()));
        }
        o
    }

    /// In transaction mode, hands the backend connection back when nothing
    /// ties the client to it.
    pub(super) fn release_if_free(&mut self) {
        self.hold_for_schema();
        if self.st.may_release() {
            if let Some(c) = self.conn.take() {
                self.ctx.pool.put(c);
            }
        }
    }

    /// The client is done: its connection (between commands, so in a known
    /// state apart from the session's leftovers) is reset and reused — or
    /// closed, as the client's own disconnect would end it, when the
    /// session's state says so (`ClientState::parting`: an XA branch).
    pub(super) fn finish(&mut self) {
        if let Some(c) = self.conn.take() {
            match self.st.parting() {
                Parting::Reuse => self.ctx.pool.reset_and_put(c),
                Parting::Close => self.ctx.pool.discard(c),
            }
        }
    }

    /// The server session the client held on `c` ends (a reset or a change
    /// of user): reset and back to the pool when done, or closed
    /// (`ClientState::parting`).
    pub(super) async fn end_server_session(&mut self, c: BackendConn) {
        match self.st.parting() {
            Parting::Reuse => self.ctx.pool.reset_then_put(c).await,
            Parting::Close => self.ctx.pool.discard(c),
        }
    }

    /// What this client needs of a backend connection.
    pub(super) fn want(&self) -> crate::backend::pool::Want<'_> {
        crate::backend::pool::Want {
            user: &self.user,
            shape: self.shape,
            account: self.account.as_ref(),
            db: self.st.db(),
            settings: self.st.settings(),
        }
    }
}

/// Put before a read on a Galera node that must see the cluster's
/// committed writes (`route.rs`, `galera_causal_read`).
const GALERA_SYNC_WAIT: &[u8] = b"SET STATEMENT wsrep_sync_wait = 1 FOR ";

/// What a client is told when its statement's backend was found down
/// while the statement ran (by a health check, or another client): the
/// reason the health state holds — a check that timed out, a refusal, a
/// closed connection — not always "stopped answering".
pub(super) fn found_down(
    backends: &[crate::config::Backend],
    health: &crate::backend::health::Health,
    b: usize,
) -> String {
    let addr = backends.get(b).map(|x| x.addr()).unwrap_or_default();
    found_down_words(&addr, health.get(b).error.as_deref())
}

fn found_down_words(addr: &str, why: Option<&str>) -> String {
    let why = why.unwrap_or("its health check found it down");
    format!(
        "sqlfleet relay: the server at {addr} was found down while the statement ran ({why}); \
         the statement's outcome on it is unknown"
    )
}

#[cfg(test)]
mod found_down_tests {
    #[test]
    fn the_client_is_told_why_its_server_was_found_down() {
        for (why, says) in [
            (Some("health check timed out"), "(health check timed out)"),
            (
                Some("127.0.0.1:3307 refused the statement: ERROR 1047: WSREP has not yet prepared node for application use"),
                "ERROR 1047",
            ),
            (None, "(its health check found it down)"),
        ] {
            let m = super::found_down_words("127.0.0.1:3307", why);
            assert!(m.contains(says) && m.contains("outcome on it is unknown"), "{m}");
            assert!(!m.contains("stopped answering") , "{m}");
        }
    }
}

//! Binary-protocol prepared statement commands, with the client's ids
//! mapped to whichever backend connection runs them.

use std::sync::atomic::Ordering::Relaxed;

use super::route::{Execute, Send};
use super::{Fail, Session};
use crate::backend::command;
use crate::protocol::reply::Expect;
use crate::protocol::stmt::{self, ClientStmt, StmtDef, StmtKey};
use sqlfleet_wire::command::{COM_INIT_DB, COM_STMT_BULK_EXECUTE, COM_STMT_PREPARE};

fn unknown(id: u32, what: &str) -> Fail {
    Fail::Err(
        1243,
        "HY000",
        format!("Unknown prepared statement handler ({id}) given to {what}"),
    )
}

impl Session {
    fn update_stmt_pins(&mut self) {
        for p in self.st.update_stmt_pins() {
            self.ctx.metrics.pin(p);
        }
    }

    pub(super) async fn prepare(&mut self, cmd: &[u8]) -> Result<(), Fail> {
        let (q, unsure) = match self.dialect() {
            Some(d) => (crate::protocol::sql::Query::new_in(&cmd[1..], d), false),
            None => crate::protocol::sql::Query::new_unsure(&cmd[1..]),
        };
        let mut fx = q.effects();
        if unsure {
            // (as `read_statement` takes a text it cannot be sure of)
            fx.read = false;
            fx.pins.push(crate::protocol::sql::Pin::Dialect);
        }
        // (Taken only where something reads it, as a text statement's.)
        let rules = self.ctx.rules();
        let digest = (self.ctx.digests.enabled() || !rules.rules.is_empty()).then(|| q.digest());
        if let Some(d) = &digest {
            self.rules_refuse_prepare(&rules, &cmd[1..], d)?;
        }
        self.shared_account_guard(&fx).await?;
        if fx.kill.is_some() {
            // The id would reach the backend untranslated.
            return Err(Fail::Err(
                1295,
                "HY000",
                "KILL cannot be a prepared statement through the relay; send it as a query".into(),
            ));
        }
        let id = self.stmts.reserve();
        let o = self.forward(cmd, Expect::Prepare, Some(id)).await?;
        // As the server: a refused prepare leaves its error for SHOW
        // WARNINGS and ROW_COUNT() -1; one that succeeds leaves ROW_COUNT()
        // as it was and clears the warnings when its statement opens a
        // table (as a statement run does).
        if o.error.is_some() {
            self.st.prepare_refused();
            self.stmts.forget_last();
        }
        self.hold_diagnostics(&o, fx.uses_tables);
        if let Some((bid, params, columns)) = o.prepared {
            let s = ClientStmt::new(
                self.st.db().clone(),
                &cmd[1..],
                params,
                columns,
                fx,
                (q.into_tokens(), digest),
            );
            let cap = self.ctx.pool.settings().statement_cache;
            if let Some(c) = self.conn.as_mut() {
                c.stmts().insert(s.def.key.clone(), bid, cap);
            }
            self.stmts.insert(id, s);
        }
        Ok(())
    }

    /// The backend id of a client statement on the current connection
    /// (`key`: its shared backend statement, or one of its own for a
    /// cursor), preparing it there first if needed (under the default
    /// database it was prepared with).
    async fn backend_stmt(&mut self, key: &StmtKey) -> Result<u32, Fail> {
        self.ensure_conn().await?;
        let Some(c) = self.conn.as_mut() else {
            return Err(Fail::Close);
        };
        if let Some(b) = c.stmts().get_mut(key) {
            return Ok(b.id);
        }
        let cap = self.ctx.pool.settings().statement_cache;
        let client_db = &self.st.db();
        let metrics = &self.ctx.metrics;
        let (db, sql) = (&key.db, &key.sql);
        let lost = |e: sqlfleet_wire::packet::WireError| Fail::Lost(e.to_string());
        let init_db = |db: &str| {
            let mut p = vec![COM_INIT_DB];
            p.extend_from_slice(db.as_bytes());
            p
        };
        if db.as_deref() != c.db() {
            let Some(d) = db else {
                return Err(Fail::Err(
                    1046,
                    "3D000",
                    "sqlfleet relay: this statement was prepared without a default database and cannot be prepared again on a connection that has one".into(),
                ));
            };
            command::simple(c, &init_db(d)).await.map_err(lost)?;
            c.note_db(Some(d.clone()));
        }
        let mut p = vec![COM_STMT_PREPARE];
        p.extend_from_slice(sql);
        let o = command::command(c, &p, Expect::Prepare)
            .await
            .map_err(lost)?;
        if c.db() != client_db.as_deref() {
            if let Some(d) = client_db {
                command::simple(c, &init_db(d)).await.map_err(lost)?;
                c.note_db(Some(d.clone()));
            }
        }
        if let Some((code, msg)) = o.error {
            return Err(Fail::Err(code, "HY000", msg));
        }
        let (bid, _, _) = o
            .prepared
            .ok_or_else(|| Fail::Lost("prepare reply without a statement id".into()))?;
        c.stmts().insert(key.clone(), bid, cap);
        metrics.reprepares.fetch_add(1, Relaxed);
        Ok(bid)
    }

    /// The client statement's cursor is gone (closed, or the statement ran
    /// again without one): its own backend statement (`key`), if it has
    /// one on this connection, is closed with it.
    fn drop_cursor(&mut self, cid: u32, key: &StmtKey) {
        self.st.close_cursor(cid);
        if let Some(c) = self.conn.as_mut() {
            c.stmts().close(key);
        }
    }

    /// COM_STMT_EXECUTE and MariaDB's COM_STMT_BULK_EXECUTE (array
    /// binding: the rows of one execute, answered once).
    pub(super) async fn execute(&mut self, cmd: &[u8]) -> Result<(), Fail> {
        let t0 = std::time::Instant::now();
        let bulk = cmd.first() == Some(&COM_STMT_BULK_EXECUTE);
        let bulk_allowed =
            self.shape.ext & sqlfleet_wire::handshake::MARIADB_STMT_BULK_OPERATIONS != 0;
        if let Some((code, state, msg)) = stmt::refused_before_lookup(cmd, bulk_allowed) {
            return Err(Fail::Err(code, state, msg.into()));
        }
        let id = stmt::packet_id(cmd).unwrap_or(0);
        let Some((cid, s)) = self.stmts.get_mut(id) else {
            let name = if bulk {
                "mysqld_stmt_bulk_execute"
            } else {
                "mysqld_stmt_execute"
            };
            return Err(unknown(id, name));
        };
        let s = s.def.clone();
        let fx = &s.fx;
        let rules = self.ctx.rules();
        if !rules.rules.is_empty() {
            // (Rules loaded after the prepare, without digest statistics:
            // its digest taken now.)
            let digest = match &s.digest {
                Some(d) => std::borrow::Cow::Borrowed(d.as_str()),
                None => {
                    let d = self.dialect().unwrap_or_default();
                    std::borrow::Cow::Owned(
                        crate::protocol::sql::Query::new_in(&s.key.sql, d).digest(),
                    )
                }
            };
            self.apply_rules(&rules, &s.key.sql, &digest, s.key.db.as_deref())?;
        }
        self.st.begin_statement(fx);
        self.drop_diagnostics_hold(fx);
        let cursor = !bulk && stmt::wants_cursor(cmd);
        self.route_and_pin(&s.key.sql, &s.toks, fx, cursor).await?;
        // (An INSERT's parameters, for how it leaves LAST_INSERT_ID(): the
        // types sent now, or the client's last ones.)
        let iparams = if fx.insert.is_some() && !bulk {
            let sent = stmt::sent_types(cmd, s.params);
            let types =
                sent.or_else(|| self.stmts.get_mut(id).and_then(|(_, cs)| cs.types.clone()));
            stmt::params_key(cmd, s.params, types.as_deref())
        } else {
            None
        };
        self.judge_insert_id(fx, iparams.as_deref().map(|p| (p, s.params)))
            .await;
        self.carry_over(fx, false).await?;
        let (key, old_cursor) = self.run_as(cid, &s, cursor)?;
        // Running again closes the cursor the statement had open: with a
        // cursor again, on its own backend statement (the server closes
        // the old one, unless the statement runs as another text now);
        // without, that statement goes.
        if cursor {
            self.st.close_cursor(cid);
        }
        if let Some(old) = old_cursor.filter(|k| !cursor || *k != key) {
            self.drop_cursor(cid, &old);
        }
        let rewritten = self
            .stmts
            .get_mut(cid)
            .is_some_and(|(_, c)| c.ran_as.is_some());
        // A rule's SELECT, executed with the same parameters before: from
        // the cache (binary rows as the server sent them), else read and
        // kept. Not with a cursor, array binding or long data.
        let mut miss = None;
        if self.ctx.cache.active() && !bulk && !cursor && !rewritten && !self.st.has_long_data(cid)
        {
            // The types it sends are the client's from now on, answered
            // from the cache or not (rewrite_execute keeps them too).
            let sent = stmt::sent_types(cmd, s.params);
            let types = self.stmts.get_mut(id).and_then(|(_, cs)| {
                if sent.is_some() {
                    cs.types = sent;
                }
                cs.types.clone()
            });
            let cached = stmt::params_key(cmd, s.params, types.as_deref())
                .and_then(|p| self.execute_cache_key(&s, p));
            if let Some((rule, ckey)) = cached {
                miss = self
                    .answer_or_miss(rule, ckey, (&s.key.sql, &s.toks, s.params), fx)
                    .await?;
                if miss.is_none() {
                    if let (true, Some(d)) = (self.ctx.digests.enabled(), &s.digest) {
                        let d = d.clone();
                        self.ctx.digests.record(d, false, false, 1, t0.elapsed());
                    }
                    self.update_stmt_pins();
                    return Ok(());
                }
            }
        }
        // A prepared write makes what it may change stale around it, as a
        // text write does (names are no parameters).
        // (its parameters, for a write by key: `row_key::write_key_with`;
        // a read makes nothing stale and needs none)
        let wparams = if self.ctx.cache.active() && !bulk && !fx.read {
            let types = self.stmts.get_mut(id).and_then(|(_, cs)| cs.types.clone());
            stmt::params_key(cmd, s.params, types.as_deref())
        } else {
            None
        };
        let stale = self
            .cache_stale(fx, &s.key.sql, wparams.as_deref().map(|p| (p, s.params)))
            .await;
        let writing = stale
            .as_ref()
            .map(|(c, sc)| c.cache.write_begins(sc.clone()));
        self.carry_found_rows = self.st.found_rows_restore(fx);
        let count_before = self.st.known_found_rows();
        let o = self
            .run_statement(Send::Execute(Execute {
                cmd,
                cid,
                def: &s,
                key: &key,
                cursor,
            }))
            .await;
        self.carry_found_rows = None;
        drop(writing);
        let mut captured = self.capture.take();
        let store = miss.map(|m| (m, captured.as_mut().map(std::mem::take)));
        // In its digest's statistics, as a text statement's run is.
        if let (true, Some(d)) = (self.ctx.digests.enabled(), &s.digest) {
            self.record_digest(d.clone(), &o, t0);
        }
        let o = o?;
        // (The counts first, as for a text statement.)
        self.keep_diagnostics(&o, fx);
        self.capture_counts().await?;
        if let Some((m, reply)) = store {
            self.cache_store(m, &o, reply, (fx, count_before));
        }
        self.after_write(fx.read, &o).await?;
        self.after_text_effects(fx, &o);
        self.st.forget_long_data(cid);
        if cursor && o.error.is_none() {
            self.st.open_cursor(cid);
        }
        self.update_stmt_pins();
        Ok(())
    }

    /// The backend statement client statement `cid` runs as at this
    /// execute, and the one its open cursor lived on: its text, or with
    /// the client's own ROW_COUNT(), FOUND_ROWS() and `@@last_gtid`
    /// written in as literals (`Session::own_counts`; the connection may
    /// have run another client's statements since the client's last one,
    /// and the server only reproduces -1 and 0). Each value is a backend
    /// statement of its own, prepared where it runs (such reads are rare;
    /// the statement cache bounds them). Long data went to the shared
    /// statement as it ran last: an execute that would run elsewhere (with
    /// a cursor, or other values written in) is refused, where the server
    /// would find the value missing.
    fn run_as(
        &mut self,
        cid: u32,
        def: &StmtDef,
        cursor: bool,
    ) -> Result<(StmtKey, Option<StmtKey>), Fail> {
        let dialect = self.dialect();
        let text = self.own_counts(&def.key.sql, (&def.toks, false), dialect, &def.fx)?;
        let open = self.st.cursor_open(cid);
        let Some((_, cs)) = self.stmts.get_mut(cid) else {
            return Err(Fail::Close);
        };
        let old_cursor = open.then(|| cs.backend_key(Some(cid)));
        cs.ran_as = text.map(std::sync::Arc::from);
        let key = cs.backend_key(cursor.then_some(cid));
        let moved = self.st.has_long_data(cid) && cs.long_data_at.as_ref() != Some(&key);
        if moved {
            return Err(Fail::Err(
                1235,
                "42000",
                "This version of the sqlfleet relay doesn't yet support long data for an \
                 execute with a cursor, or for a statement that reads ROW_COUNT(), \
                 FOUND_ROWS() or @@last_gtid: send the value with the execute"
                    .into(),
            ));
        }
        Ok((key, old_cursor))
    }

    /// An execute as the connection the client holds now takes it:
    /// prepared there if it is not yet, its ids and types rewritten.
    pub(super) async fn execute_packet(&mut self, e: &Execute<'_>) -> Result<Vec<u8>, Fail> {
        let (cmd, cid, s, key) = (e.cmd, e.cid, e.def, e.key);
        self.backend_stmt(key).await?;
        let (Some((_, cs)), Some(c)) = (self.stmts.get_mut(cid), self.conn.as_mut()) else {
            return Err(Fail::Close);
        };
        let Some(bs) = c.stmts().get_mut(key) else {
            return Err(Fail::Close);
        };
        let (out, name) = if cmd.first() == Some(&COM_STMT_BULK_EXECUTE) {
            (
                stmt::rewrite_bulk(cmd, s.params, cs, bs),
                "mysqld_stmt_bulk_execute",
            )
        } else {
            (
                stmt::rewrite_execute(cmd, s.params, cs, bs),
                "mysqld_stmt_execute",
            )
        };
        out.map_err(|e| match e {
            // As the server: a packet its sanity check finds short is
            // malformed; parameters missing or never typed are wrong
            // arguments (stmt::ExecuteError says which is which).
            stmt::ExecuteError::Short => {
                Fail::Err(1835, "HY000", "Malformed communication packet".into())
            }
            e => Fail::Err(1210, "HY000", format!("Incorrect arguments to {name}: {e}")),
        })
    }

    pub(super) async fn send_long_data(&mut self, cmd: &[u8]) -> Result<(), Fail> {
        let id = stmt::packet_id(cmd).unwrap_or(0);
        let Some((cid, s)) = self.stmts.get_mut(id) else {
            return Ok(()); // no reply to this command, even for errors
        };
        // (Where the first piece went, the rest and the execute go: the
        // shared statement, as it ran last.)
        let key = match &s.long_data_at {
            Some(k) if self.st.has_long_data(cid) => k.clone(),
            _ => s.backend_key(None),
        };
        s.long_data_at = Some(key.clone());
        let bid = self.backend_stmt(&key).await?;
        self.st.note_long_data(cid);
        self.update_stmt_pins();
        let Some(c) = self.conn.as_mut() else {
            return Err(Fail::Close);
        };
        c.io.write_packet(0, &stmt::with_id(cmd, bid))
            .await
            .map_err(|e| Fail::Lost(e.to_string()))?;
        Ok(())
    }

    pub(super) async fn close_stmt(&mut self, cmd: &[u8]) -> Result<(), Fail> {
        let id = stmt::packet_id(cmd).unwrap_or(0);
        let Some(cid) = self.stmts.get_mut(id).map(|(cid, _)| cid) else {
            return Ok(());
        };
        let s = self.stmts.remove(cid);
        self.st.forget_long_data(cid);
        // An open cursor's own backend statement is closed with it (before
        // the connection's next command); the shared one stays cached.
        if let Some(s) = s {
            self.drop_cursor(cid, &s.backend_key(Some(cid)));
        }
        self.update_stmt_pins();
        Ok(())
    }

    pub(super) async fn reset_stmt(&mut self, cmd: &[u8]) -> Result<(), Fail> {
        let id = stmt::packet_id(cmd).unwrap_or(0);
        let Some((cid, s)) = self.stmts.get_mut(id) else {
            return Err(unknown(id, "mysqld_stmt_reset"));
        };
        let key = s.backend_key(self.st.cursor_open(cid).then_some(cid));
        let bid = self
            .conn
            .as_mut()
            .and_then(|c| c.stmts().get_mut(&key).map(|b| b.id));
        self.st.forget_long_data(cid);
        self.st.close_cursor(cid);
        match bid {
            Some(bid) => {
                self.forward(&stmt::with_id(cmd, bid), Expect::Single, None)
                    .await?;
            }
            // Not prepared on this connection: nothing to reset there.
            None => self.local_ok().await?,
        }
        self.update_stmt_pins();
        Ok(())
    }

    pub(super) async fn fetch(&mut self, cmd: &[u8]) -> Result<(), Fail> {
        let id = stmt::packet_id(cmd).unwrap_or(0);
        let Some((cid, s)) = self.stmts.get_mut(id) else {
            return Err(unknown(id, "mysqld_stmt_fetch"));
        };
        let key = s.backend_key(Some(cid));
        let bid = self
            .conn
            .as_mut()
            .filter(|_| self.st.cursor_open(cid))
            .and_then(|c| c.stmts().get_mut(&key).map(|b| b.id));
        let Some(bid) = bid else {
            return Err(Fail::Err(
                1421,
                "HY000",
                format!("The statement ({id}) has no open cursor"),
            ));
        };
        self.forward(&stmt::with_id(cmd, bid), Expect::Rows, None)
            .await?;
        Ok(())
    }
}

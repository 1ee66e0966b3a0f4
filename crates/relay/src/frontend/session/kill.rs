//! `KILL [QUERY|CONNECTION] <id>` and COM_PROCESS_KILL with the ids the
//! relay hands out: the id names a relay client, never a backend thread.
//! The server thread id a client learnt from CONNECTION_ID() names it too
//! (asking CONNECTION_ID() pins the client to that connection). A
//! statement that client is running is killed on its backend with
//! `KILL QUERY <thread>` over a connection of its own (the pool may be
//! full); KILL CONNECTION kills that backend connection (the session it
//! holds dies with the client's, as directly) and ends the client's session. A client may
//! kill sessions of its own account, and in per-user mode others' too when
//! its account has SUPER or CONNECTION ADMIN on the server.
//!
//! In per-user mode the client's backend connections are its own account's,
//! so an id that is not a relay client's (an event worker's, a connection
//! made around the relay) goes to the server, whose privileges decide, as
//! they would for a direct client. With one shared account it is refused:
//! the server would kill as the relay.
//!
//! A text that may run a KILL the relay cannot read (`protocol/sql/kill.rs`)
//! goes to the server in per-user mode (the client's own account) and is
//! refused with one shared account (`shared.rs`).
//!
//! `KILL ... USER name[@host]` ends (or stops the statements of) the relay
//! clients logged in as that account; in per-user mode the server first
//! runs it as the client (its privileges decide, and it reaches the
//! account's connections made around the relay), in shared mode only the
//! client's own account may be named.

use sqlfleet_wire::packet;

use super::{Fail, Session};
use crate::backend::command;
use crate::backend::dial::Shape;
use crate::frontend::clients::FIRST_ID;
use crate::protocol::reply::Expect;
use crate::protocol::sql::KillTarget;

/// Waits (up to 5 s) until killed sessions have ended and their sockets
/// are closed, as the server's KILL returns after closing the victim's.
async fn wait_ended(targets: &[(u32, std::sync::Arc<crate::frontend::clients::Handle>)]) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    for (_, t) in targets {
        let _ = tokio::time::timeout_at(deadline, t.ended()).await;
    }
}

impl Session {
    /// `KILL QUERY <thread>` on backend `b` — or `KILL CONNECTION` when
    /// the client's whole session ends, as it would directly: a statement
    /// stopped with KILL QUERY may run on (a stored loop resets the flag
    /// between its statements), a killed connection does not. Over a
    /// connection of its own (the pool may be full); a statement that
    /// finished meanwhile leaves nothing to kill.
    pub(super) async fn kill_backend(&self, b: usize, thread: u32, connection: bool) {
        let backend = &self.ctx.cfg.backends[b];
        let shape = Shape {
            caps: 0,
            collation: self.shape.collation,
            ext: 0,
        };
        // As the client's own backend account in per-user mode (a query of
        // its own), else the relay's.
        let account = self.account.as_deref();
        if let Ok(mut c) = self.ctx.pool.dialer().login(backend, shape, account).await {
            let what = if connection { "CONNECTION" } else { "QUERY" };
            let q = format!("\x03KILL {what} {thread}");
            let _ = command::simple(&mut c, q.as_bytes()).await;
        }
    }

    /// `cmd` is the client's command as sent (COM_QUERY or
    /// COM_PROCESS_KILL), for the server when it decides.
    pub(super) async fn kill(
        &mut self,
        query_only: bool,
        target: KillTarget,
        cmd: &[u8],
    ) -> Result<(), Fail> {
        match target {
            KillTarget::Id(id) => self.kill_id(query_only, id, cmd).await,
            KillTarget::Own => self.kill_id(query_only, u64::from(self.id), cmd).await,
            KillTarget::User(user, host) => {
                self.kill_user(query_only, &user, host.as_deref(), cmd)
                    .await
            }
        }
    }

    async fn kill_id(&mut self, query_only: bool, id: u64, cmd: &[u8]) -> Result<(), Fail> {
        let target = u32::try_from(id).ok().and_then(|i| self.ctx.clients.get(i));
        let Some((target_id, target)) = target else {
            if self.account.is_some() && id < u64::from(FIRST_ID) {
                return self.forward(cmd, Expect::Single, None).await.map(drop);
            }
            return Err(Fail::Err(1094, "HY000", format!("Unknown thread id: {id}")));
        };
        if *target.user() != *self.user && !self.may_kill_others().await? {
            return Err(Fail::Err(
                1095,
                "HY000",
                format!("You are not owner of thread {id}"),
            ));
        }
        if target_id == self.id {
            if query_only {
                // Nothing of ours runs while this runs.
                return self.local_ok().await;
            }
            // As the server does: the error, then the connection closes.
            let _ = self
                .io
                .write_packet(
                    1,
                    &packet::err_payload(1927, "70100", "Connection was killed"),
                )
                .await;
            return Err(Fail::Close);
        }
        if let Some((b, thread)) = target.running_at() {
            self.kill_backend(b, thread, !query_only).await;
        }
        if !query_only {
            target.kill();
            wait_ended(&[(target_id, target)]).await;
        }
        self.local_ok().await
    }

    /// Whether the client may kill other accounts' sessions: in per-user
    /// mode, when its own account holds SUPER or CONNECTION ADMIN on the
    /// server (asked as that account); with one shared account, never.
    async fn may_kill_others(&mut self) -> Result<bool, Fail> {
        if self.account.is_none() {
            return Ok(false);
        }
        self.settle_found_rows().await?;
        let c = self.ensure_conn().await?;
        let n = command::query_value(
            c,
            // Its own rows only: an account that may read mysql.user sees
            // every account's privileges here (root's SUPER among them).
            // (CHAR(39) is a quote whatever the client's sql_mode.) A name
            // the GRANTEE text cannot match (quotes, an '@') finds none:
            // refused, never allowed by mistake.
            "SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES \
             WHERE PRIVILEGE_TYPE IN ('SUPER', 'CONNECTION ADMIN') \
             AND GRANTEE = CONCAT(CHAR(39), SUBSTRING_INDEX(CURRENT_USER(), '@', 1), \
             CHAR(39), '@', CHAR(39), SUBSTRING_INDEX(CURRENT_USER(), '@', -1), CHAR(39))",
        )
        .await
        .map_err(|e| Fail::Lost(e.to_string()))?;
        self.release_if_free();
        Ok(n.as_deref().is_some_and(|n| n != "0"))
    }

    async fn kill_user(
        &mut self,
        query_only: bool,
        user: &str,
        host: Option<&str>,
        cmd: &[u8],
    ) -> Result<(), Fail> {
        let per_user = self.account.is_some();
        if !per_user && user != &*self.user {
            return Err(Fail::Err(
                1095,
                "HY000",
                format!("You are not owner of thread of user {user}"),
            ));
        }
        let targets: Vec<_> = self
            .ctx
            .clients
            .of_user(user, host)
            .into_iter()
            .filter(|(id, _)| *id != self.id)
            .collect();
        if per_user {
            // The server's verdict and count, as a direct client gets them.
            let o = self.forward(cmd, Expect::Single, None).await?;
            if o.error.is_some() {
                return Ok(());
            }
        }
        for (_, t) in &targets {
            if let Some((b, thread)) = t.running_at() {
                self.kill_backend(b, thread, !query_only).await;
            }
            if !query_only {
                t.kill();
            }
        }
        if !query_only {
            wait_ended(&targets).await;
        }
        if per_user {
            return Ok(());
        }
        let mut ok = vec![0x00];
        sqlfleet_wire::packet::put_lenenc(&mut ok, targets.len() as u64);
        ok.extend_from_slice(&self.ok()[2..]);
        self.io
            .write_packet(1, &ok)
            .await
            .map(drop)
            .map_err(|_| Fail::Close)
    }
}

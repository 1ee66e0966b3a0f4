//! Commands that change who the client is or reset its session:
//! COM_RESET_CONNECTION and COM_CHANGE_USER.

use std::sync::atomic::Ordering::Relaxed;

use sqlfleet_wire::packet;

use super::{Fail, Session};
use crate::backend::dial::BackendAccount;
use crate::backend::pool::BackendConn;
use crate::config::Mode;
use crate::frontend::auth;
use crate::frontend::session::state::Parting;
use crate::protocol::reply::Expect;

/// Refused COM_CHANGE_USER attempts a connection gets, as the server allows.
const MAX_CHANGE_USER_FAILURES: u8 = 3;

impl Session {
    /// The client's session is a new one (`ClientState::reset`: a reset
    /// that ran on the connection the client holds may keep it).
    pub(super) fn clear_state(&mut self, ran_on_held: bool) {
        self.handle.set_alias(None);
        self.stmts.clear();
        self.st.reset(ran_on_held);
        // A reset session takes the global sql_mode of now.
        self.login_sql_mode = self.ctx.pool.health.sql_mode();
    }

    /// A count only the server holds (`found_rows_calc`, left on a
    /// connection the client kept for good) is asked before a reset or a
    /// change of user lets the client go elsewhere: the server keeps
    /// FOUND_ROWS() through both.
    async fn take_found_rows(&mut self) -> Result<(), Fail> {
        if self.st.found_rows_calc() && self.conn.is_some() {
            self.ask_server(true, false).await?;
        }
        Ok(())
    }

    pub(super) async fn reset_connection(&mut self, cmd: &[u8]) -> Result<(), Fail> {
        // (Session mode keeps its connection through a reset, and the
        // count with it.)
        if self.st.mode() == Mode::Transaction {
            self.take_found_rows().await?;
        }
        let mut ran_on_held = false;
        if self.st.reset_ends_session() {
            // Ended as the client's disconnect would end it (an XA branch
            // on it); the client's next statement leases another.
            if let Some(c) = self.conn.take() {
                self.ctx.pool.discard(c);
            }
        }
        if self.conn.is_some() {
            let o = self.forward(cmd, Expect::Single, None).await?;
            if o.error.is_none() {
                if let Some(c) = self.conn.as_mut() {
                    c.after_reset()
                        .await
                        .map_err(|e| Fail::Lost(e.to_string()))?;
                }
                ran_on_held = true;
            }
        } else {
            self.local_ok().await?;
        }
        self.clear_state(ran_on_held);
        // What the server's reset leaves that a new session would not have
        // is a setting like any other.
        for s in crate::backend::pool::left_by_client_reset(self.shape.caps) {
            self.st.set(&s);
            if let Some(c) = self.conn.as_mut() {
                c.note_setting(&s);
            }
        }
        Ok(())
    }

    /// COM_CHANGE_USER on the client's own connection (session mode): the
    /// server's session reset, then the client's settings and database.
    async fn reset_in_place(&mut self, mut c: BackendConn) -> Result<(), Fail> {
        self.ctx.metrics.resets.fetch_add(1, Relaxed);
        if let Err(e) = c.reset().await {
            self.ctx.pool.discard(c);
            return Err(Fail::Lost(e.to_string()));
        }
        self.adopt(c).await
    }

    /// A refused COM_CHANGE_USER leaves what the server's leaves: the
    /// server resets the session before it authenticates (transaction
    /// rolled back, temporary tables, user variables, prepared statements
    /// and locks gone, settings back to their defaults) and then restores
    /// only the user and the database. (Its character set is then the
    /// server's default; here the client's login one.)
    async fn change_user_refused(&mut self) -> Result<(), Fail> {
        let db = self.st.db().clone();
        let held = self.conn.take();
        let parting = self.st.parting();
        match held {
            Some(c) if parting == Parting::Close => self.end_server_session(c).await,
            Some(c) if self.st.mode() == Mode::Session => {
                self.clear_state(false);
                self.st.use_db(db);
                return self.reset_in_place(c).await;
            }
            Some(c) => self.end_server_session(c).await,
            None => {}
        }
        self.clear_state(false);
        self.st.use_db(db);
        Ok(())
    }

    pub(super) async fn change_user(&mut self, cmd: &[u8]) -> Result<(), Fail> {
        // The server's limit (MDEV-3915): three refused attempts per
        // connection, then the command itself is refused, successes
        // between them not counting.
        if self.change_user_failures >= MAX_CHANGE_USER_FAILURES {
            self.change_user_refused().await?;
            return Err(Fail::Err(1047, "08S01", "Unknown command".into()));
        }
        let Some(req) = parse_change_user(cmd, self.caps) else {
            self.change_user_refused().await?;
            return Err(Fail::Err(1047, "08S01", "malformed COM_CHANGE_USER".into()));
        };
        let (utf8, set) =
            super::schema::name_set(self.st.settings(), self.shape.collation, req.collation);
        if !super::schema::user_name_readable(&req.user_raw, utf8) {
            let (code, state, msg) = super::schema::user_name_refusal(&set);
            crate::admin::log::login_failed(&req.user, self.id, &msg);
            self.change_user_refused().await?;
            return self
                .io
                .write_packet(1, &packet::err_payload(code, state, &msg))
                .await
                .map(drop)
                .map_err(|_| Fail::Close);
        }
        let users = self
            .ctx
            .users
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut extra = None;
        let users = match auth::with_server_account(
            &users,
            self.ctx.server_accounts.as_ref(),
            &req.user,
            &mut extra,
        )
        .await
        {
            Ok(users) => users,
            Err(why) => {
                // As a failed change of user: the session goes on as the
                // user it was, told why.
                let (msg, payload) = auth::unreachable_payload(&req.user, &why.to_string());
                crate::admin::log::login_failed(&req.user, self.id, &msg);
                self.change_user_refused().await?;
                self.io
                    .write_packet(1, &payload)
                    .await
                    .map_err(|_| Fail::Close)?;
                return Ok(());
            }
        };
        let (seq, credential) = match auth::check(
            &self.ctx.cfg,
            users,
            &mut self.io.s,
            1,
            &req.user,
            req.plugin.as_deref(),
            req.auth,
            &self.nonce,
            self.tls,
            &self.host,
        )
        .await
        {
            Ok(seq) => seq,
            Err(auth::AuthError::Denied(why)) => {
                // The client got its access-denied error; as with a direct
                // connection, the session goes on as the user it was.
                self.change_user_failures = self.change_user_failures.saturating_add(1);
                self.ctx.metrics.auth_failures.fetch_add(1, Relaxed);
                crate::admin::log::login_failed(&req.user, self.id, &why);
                return self.change_user_refused().await;
            }
            Err(_) => {
                self.ctx.metrics.auth_failures.fetch_add(1, Relaxed);
                return Err(Fail::Close);
            }
        };
        let account = match (self.ctx.cfg.per_user_accounts, credential) {
            (false, _) => None,
            (true, Some(c)) => Some(std::sync::Arc::new(BackendAccount {
                user: req.user.clone(),
                credential: c,
            })),
            (true, None) => {
                // The relay could not log in to the server as that user:
                // refused, and the session goes on as it was.
                self.change_user_failures = self.change_user_failures.saturating_add(1);
                self.ctx.metrics.auth_failures.fetch_add(1, Relaxed);
                self.change_user_refused().await?;
                let msg = format!(
                    "Access denied for user '{}': the relay logs in to the server as you, which needs mysql_native_password or caching_sha2_password with full authentication",
                    req.user
                );
                return self
                    .io
                    .write_packet(seq, &packet::err_payload(1045, "28000", &msg))
                    .await
                    .map(drop)
                    .map_err(|_| Fail::Close);
            }
        };
        let named = (req.user, req.database, req.collation);
        self.become_user(named, account, seq).await
    }

    /// The session of a user whose change was accepted: the old session
    /// ended as the server ends it, the new one's connection ready, OK.
    async fn become_user(
        &mut self,
        (user, database, collation): (String, Option<Vec<u8>>, Option<u8>),
        account: Option<std::sync::Arc<BackendAccount>>,
        seq: u8,
    ) -> Result<(), Fail> {
        self.take_found_rows().await?;
        // Session mode, same account and character set, and a database the
        // connection can take: the client's own connection is reset in
        // place, as the server's COM_CHANGE_USER resets its session (which
        // keeps FOUND_ROWS() and the connection id); otherwise it goes back
        // to the pool and another is leased.
        let in_place = |c: &BackendConn| {
            self.st.mode() == Mode::Session
                && collation.is_none_or(|x| x == self.shape.collation)
                && c.account().map(|a| &a.user) == account.as_ref().map(|a| &a.user)
                && (database.is_some() || c.db().is_none())
        };
        let keep = match self.conn.take() {
            Some(c) if in_place(&c) && self.st.parting() == Parting::Reuse => Some(c),
            Some(c) => {
                // As the server's COM_CHANGE_USER ends the old session
                // before it answers: its named and table locks are free
                // when the client hears OK (a reset off the client's path
                // let another client find a GET_LOCK still held).
                self.end_server_session(c).await;
                None
            }
            None => None,
        };
        self.clear_state(false);
        self.account = account;
        self.user = std::sync::Arc::from(user.as_str());
        self.handle.set_user(&user);
        if let Some(coll) = collation {
            self.shape.collation = coll;
        }
        // A name only the client's bytes say is sent as they are (`schema.rs`).
        let (name, bytes) = match database {
            None => (None, None),
            Some(b) => match super::schema::login_name(&b, self.shape.collation) {
                Some(name) => (Some(name), None),
                None => (None, Some(b)),
            },
        };
        self.st.use_db(name);
        self.login_db_bytes = bytes;
        let ready = match keep {
            Some(c) => self.reset_in_place(c).await,
            None if self.st.db().is_some()
                || self.login_db_bytes.is_some()
                || self.account.is_some() =>
            {
                self.ensure_conn().await.map(drop)
            }
            None => Ok(()),
        };
        if let Err(f) = ready {
            let (code, state, msg) = match f {
                Fail::Err(c, s, m) => (c, s, m),
                Fail::Lost(m) => (crate::frontend::session::LOST_CODE, "08S01", m),
                Fail::Close => return Err(Fail::Close),
            };
            let _ = self
                .io
                .write_packet(seq, &packet::err_payload(code, state, &msg))
                .await;
            return Err(Fail::Close);
        }
        let ok = self.ok();
        self.io
            .write_packet(seq, &ok)
            .await
            .map(drop)
            .map_err(|_| Fail::Close)
    }
}

struct ChangeUser {
    user: String,
    /// The name as sent, in the client's character set.
    user_raw: Vec<u8>,
    auth: Vec<u8>,
    /// In the client's bytes (its collation's character set).
    database: Option<Vec<u8>>,
    collation: Option<u8>,
    plugin: Option<String>,
}

fn parse_change_user(p: &[u8], caps: u32) -> Option<ChangeUser> {
    let cstr = |i: &mut usize| -> Option<Vec<u8>> {
        let end = p.get(*i..)?.iter().position(|&b| b == 0)?;
        let s = p[*i..*i + end].to_vec();
        *i += end + 1;
        Some(s)
    };
    let mut i = 1;
    let user_raw = cstr(&mut i)?;
    let user = String::from_utf8_lossy(&user_raw).into_owned();
    let auth = if caps & sqlfleet_wire::handshake::SECURE_CONNECTION != 0 {
        let n = *p.get(i)? as usize;
        let a = p.get(i + 1..i + 1 + n)?.to_vec();
        i += 1 + n;
        a
    } else {
        cstr(&mut i)?
    };
    // The database always follows the credential and ends in NUL inside
    // the packet, an empty one too: without it the server refuses the
    // packet as malformed (1047), as it does a packet that ends right
    // after the credential.
    let db = cstr(&mut i)?;
    let database = (!db.is_empty()).then_some(db);
    let mut collation = None;
    if let Some(c) = p.get(i..i + 2) {
        collation = Some(c[0]);
        i += 2;
    }
    // A client that logged in with plugin authentication names the
    // plugin: without the field the server refuses the packet (1047),
    // whoever the user is.
    if caps & sqlfleet_wire::handshake::PLUGIN_AUTH != 0 && i >= p.len() {
        return None;
    }
    let plugin = cstr(&mut i).map(|v| String::from_utf8_lossy(&v).into_owned());
    // A client that logged in with connection attributes sends them
    // again (a length the packet holds; their inside is not checked):
    // without them the server refuses the packet (1047).
    if caps & sqlfleet_wire::handshake::CONNECT_ATTRS != 0 {
        sqlfleet_wire::packet::lenenc_bytes(p, &mut i).ok()?;
    }
    Some(ChangeUser {
        user,
        user_raw,
        auth,
        database,
        collation,
        plugin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlfleet_wire::handshake::{CONNECT_ATTRS, PLUGIN_AUTH, SECURE_CONNECTION};

    #[test]
    fn a_change_user_is_read_as_the_server_reads_it() {
        // (packet, read as: user and database; None: malformed, 1047)
        type Row<'a> = (&'a [u8], Option<(&'a str, Option<&'a str>)>);
        let rows: [Row; 8] = [
            (b"\x11u\0\x02ab\0", Some(("u", None))),
            (b"\x11u\0\x02abdb\0", Some(("u", Some("db")))),
            (
                b"\x11u\0\x02ab\0\x21\0mysql_native_password\0",
                Some(("u", None)),
            ),
            // Nothing after the credential (the fuzzer's seeds 109673
            // and 196382: the relay tried the login, 1045).
            (b"\x11u\0\x02ab", None),
            (b"\x11u\0\0", None),
            (b"\x11u\0\x02abdb", None),
            (b"\x11u\0\x05ab", None),
            (b"\x11u", None),
        ];
        for (p, want) in rows {
            let got = parse_change_user(p, SECURE_CONNECTION);
            let got = got.as_ref().map(|r| {
                (
                    r.user.as_str(),
                    r.database.as_deref().map(String::from_utf8_lossy),
                )
            });
            let want = want.map(|(u, d)| (u, d.map(std::borrow::Cow::from)));
            assert_eq!(got, want, "{p:?}");
        }
        // A login with connection attributes: the change sends them too
        // (a length the packet holds).
        let with_attrs = |tail: &[u8]| {
            let mut p = b"\x11u\0\x02abdb\0\x21\0mysql_native_password\0".to_vec();
            p.extend_from_slice(tail);
            parse_change_user(&p, SECURE_CONNECTION | PLUGIN_AUTH | CONNECT_ATTRS).is_some()
        };
        assert!(!with_attrs(b""));
        assert!(with_attrs(b"\x00"));
        assert!(with_attrs(b"\x03\x01k\x05"));
        assert!(!with_attrs(b"\x09\x01k"));
    }
}

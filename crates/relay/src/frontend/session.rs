//! One client session: log in, then read commands one at a time, run each
//! on a backend connection and forward the reply as it arrives.
//!
//! In `transaction` mode the backend connection goes back to the pool when
//! a command ends outside a transaction and nothing pins the client to it;
//! the next command may run on another connection, after the client's
//! default database and settings are replayed there. In `session` mode the
//! client keeps its connection until it quits; it is then reset and reused.

mod ps;
mod route;
mod user;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, RwLock};

use sqlfleet_wire::handshake::SESSION_SHAPE;
use sqlfleet_wire::packet::{self, WireError};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::admin::metrics::Metrics;
use crate::backend::command::{self, Link};
use crate::backend::pool::{BackendConn, Pool, Route, Shape};
use crate::config::{Account, Mode, RelayConfig};
use crate::frontend::auth::{self, Greeting};
use crate::protocol::io::{AnyStream, ForwardError, PacketIo};
use crate::protocol::reply::{Expect, Outcome, STATUS_AUTOCOMMIT, STATUS_IN_TRANS};
use crate::protocol::sql::{self, Effects, Pin, Setting};
use crate::protocol::stmt::ClientStmts;

const COM_QUIT: u8 = 0x01;
const COM_INIT_DB: u8 = 0x02;
const COM_QUERY: u8 = 0x03;
const COM_FIELD_LIST: u8 = 0x04;
const COM_REFRESH: u8 = 0x07;
const COM_STATISTICS: u8 = 0x09;
const COM_PROCESS_INFO: u8 = 0x0A;
const COM_PROCESS_KILL: u8 = 0x0C;
const COM_DEBUG: u8 = 0x0D;
const COM_PING: u8 = 0x0E;
const COM_CHANGE_USER: u8 = 0x11;
const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;
const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
const COM_STMT_CLOSE: u8 = 0x19;
const COM_STMT_RESET: u8 = 0x1A;
const COM_SET_OPTION: u8 = 0x1B;
const COM_STMT_FETCH: u8 = 0x1C;
const COM_RESET_CONNECTION: u8 = 0x1F;

/// What every session shares.
pub struct Ctx {
    pub cfg: Arc<RelayConfig>,
    pub pool: Arc<Pool>,
    pub users: RwLock<Arc<HashMap<String, Account>>>,
    pub rules: RwLock<Arc<crate::routing::rules::RuleSet>>,
    pub digests: crate::routing::rules::Digests,
    pub greeting: Greeting,
    pub metrics: Arc<Metrics>,
}

impl Ctx {
    pub fn rules(&self) -> Arc<crate::routing::rules::RuleSet> {
        self.rules.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Why a command did not complete normally.
enum Fail {
    /// Answer the command with this error; the session goes on.
    Err(u16, &'static str, String),
    /// The backend connection broke before any of the reply was forwarded.
    Lost(String),
    /// End the session (the client went away, or a reply was cut).
    Close,
}

impl From<crate::backend::pool::LeaseError> for Fail {
    fn from(e: crate::backend::pool::LeaseError) -> Fail {
        Fail::Err(e.code(), "08004", format!("sqlfleet relay: {e}"))
    }
}

struct Session {
    ctx: Arc<Ctx>,
    io: PacketIo<AnyStream>,
    mode: Mode,
    shape: Shape,
    caps: u32,
    nonce: [u8; 20],
    tls: bool,
    db: Option<String>,
    settings: Vec<Setting>,
    stmts: ClientStmts,
    pins: BTreeSet<Pin>,
    cursors: HashSet<u32>,
    long_data: HashSet<u32>,
    pin_next: Option<Pin>,
    set_tx_armed: bool,
    in_trans: bool,
    autocommit: bool,
    conn: Option<BackendConn>,
    backend: Option<usize>,
    /// Where the next leased connection comes from.
    route: Route,
    /// A query rule chose the route.
    route_fixed: bool,
    /// The client's last committed write (consistency = session).
    last_write_gtid: Option<String>,
    user: String,
}

struct ConnectedGauge(Arc<Metrics>);
impl Drop for ConnectedGauge {
    fn drop(&mut self) {
        self.0.clients_connected.fetch_sub(1, Relaxed);
    }
}

pub async fn serve<S>(ctx: Arc<Ctx>, stream: S, id: u32)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static,
{
    ctx.metrics.clients_total.fetch_add(1, Relaxed);
    ctx.metrics.clients_connected.fetch_add(1, Relaxed);
    let _gauge = ConnectedGauge(ctx.metrics.clone());
    let users = ctx.users.read().unwrap_or_else(|e| e.into_inner()).clone();
    let login = auth::login(&ctx.cfg, &users, &ctx.greeting, stream, id);
    let li = match tokio::time::timeout(std::time::Duration::from_secs(10), login).await {
        Ok(Ok(li)) => li,
        Ok(Err(auth::AuthError::Denied(_))) => {
            ctx.metrics.auth_failures.fetch_add(1, Relaxed);
            return;
        }
        _ => return, // stalled, malformed or gone mid-handshake
    };
    let mut s = Session {
        mode: ctx.cfg.mode,
        shape: Shape {
            caps: li.hello.caps & SESSION_SHAPE,
            collation: li.hello.collation,
        },
        caps: li.hello.caps,
        nonce: li.nonce,
        tls: li.tls,
        db: li.hello.database.clone(),
        settings: Vec::new(),
        stmts: ClientStmts::default(),
        pins: BTreeSet::new(),
        cursors: HashSet::new(),
        long_data: HashSet::new(),
        pin_next: None,
        set_tx_armed: false,
        in_trans: false,
        autocommit: true,
        conn: None,
        backend: None,
        route: Route::Any,
        route_fixed: false,
        last_write_gtid: None,
        user: li.hello.user.clone(),
        io: PacketIo::small(li.stream),
        ctx,
    };
    if s.mode == Mode::Session {
        s.pins.insert(Pin::Session);
        s.ctx.metrics.pin(Pin::Session);
    }
    s.route = s.default_route();
    // A default database asked for at login must exist.
    if s.db.is_some() {
        if let Err(f) = s.ensure_conn().await {
            let (code, state, msg) = match f {
                Fail::Err(c, st, m) => (c, st, m),
                Fail::Lost(m) => (2013, "HY000", m),
                Fail::Close => return,
            };
            let _ =
                s.io.write_packet(li.seq, &packet::err_payload(code, state, &msg))
                    .await;
            return;
        }
    }
    if s.io.write_packet(li.seq, &s.ok()).await.is_err() {
        s.finish();
        return;
    }
    s.release_if_free();
    s.run().await;
    s.finish();
}

fn upsert(list: &mut Vec<Setting>, s: &Setting) {
    list.retain(|x| x.name != s.name);
    list.push(s.clone());
}

impl Session {
    fn ok(&self) -> Vec<u8> {
        let mut status = 0;
        if self.autocommit {
            status |= STATUS_AUTOCOMMIT;
        }
        if self.in_trans {
            status |= STATUS_IN_TRANS;
        }
        packet::ok_payload(status)
    }

    async fn run(&mut self) {
        loop {
            let (seq, cmd) = match self.io.read_packet(self.ctx.cfg.max_packet).await {
                Ok(p) => p,
                Err(WireError::TooBig { len, max }) => {
                    let msg = format!(
                        "Got a packet bigger than the relay's max_packet ({len} > {max} bytes)"
                    );
                    let _ = self
                        .io
                        .write_packet(1, &packet::err_payload(1153, "08S01", &msg))
                        .await;
                    return;
                }
                Err(_) => return,
            };
            if seq != 0 || cmd.is_empty() {
                let _ = self
                    .io
                    .write_packet(
                        1,
                        &packet::err_payload(1156, "08S01", "Got packets out of order"),
                    )
                    .await;
                return;
            }
            self.ctx.metrics.commands.fetch_add(1, Relaxed);
            self.ctx
                .metrics
                .bytes_to_backend
                .fetch_add(cmd.len() as u64 + 4, Relaxed);
            if cmd[0] == COM_QUIT {
                return;
            }
            // A one-statement pin ends after the statement it was kept for.
            self.pin_next = None;
            self.route = self.default_route();
            self.route_fixed = false;
            let r = self.command(&cmd).await;
            match r {
                Ok(()) => {}
                Err(Fail::Close) => return,
                Err(Fail::Err(code, state, msg)) => {
                    self.ctx.metrics.errors.fetch_add(1, Relaxed);
                    if self
                        .io
                        .write_packet(1, &packet::err_payload(code, state, &msg))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                Err(Fail::Lost(msg)) => {
                    self.ctx.metrics.errors.fetch_add(1, Relaxed);
                    self.ctx.metrics.backend_lost.fetch_add(1, Relaxed);
                    if let Some(c) = self.conn.take() {
                        self.ctx.pool.discard(c);
                    }
                    // Session mode always holds Pin::Session.
                    let stateful = self.in_trans || !self.pins.is_empty();
                    let msg = format!("Lost connection to backend server during query ({msg})");
                    let _ = self
                        .io
                        .write_packet(1, &packet::err_payload(2013, "HY000", &msg))
                        .await;
                    if stateful {
                        // The session's state died with the backend: the
                        // client must reconnect rather than carry on without it.
                        return;
                    }
                }
            }
            self.release_if_free();
        }
    }

    async fn command(&mut self, cmd: &[u8]) -> Result<(), Fail> {
        match cmd[0] {
            COM_QUERY => self.query(cmd).await,
            COM_PING if self.conn.is_none() => self.local_ok().await,
            COM_PING | COM_STATISTICS | COM_PROCESS_KILL | COM_DEBUG | COM_REFRESH => {
                self.forward(cmd, Expect::Single, None).await.map(drop)
            }
            COM_PROCESS_INFO => self
                .forward(cmd, Expect::Results { cursor: false }, None)
                .await
                .map(drop),
            COM_FIELD_LIST => self.forward(cmd, Expect::FieldList, None).await.map(drop),
            COM_INIT_DB => {
                let o = self.forward(cmd, Expect::Single, None).await?;
                if o.error.is_none() {
                    let db = String::from_utf8_lossy(&cmd[1..]).into_owned();
                    self.set_db(db);
                }
                Ok(())
            }
            COM_SET_OPTION => {
                self.pin(Pin::SetOption);
                self.forward(cmd, Expect::Single, None).await.map(drop)
            }
            COM_RESET_CONNECTION => self.reset_connection(cmd).await,
            COM_CHANGE_USER => self.change_user(cmd).await,
            COM_STMT_PREPARE => self.prepare(cmd).await,
            COM_STMT_EXECUTE => self.execute(cmd).await,
            COM_STMT_SEND_LONG_DATA => self.send_long_data(cmd).await,
            COM_STMT_CLOSE => self.close_stmt(cmd).await,
            COM_STMT_RESET => self.reset_stmt(cmd).await,
            COM_STMT_FETCH => self.fetch(cmd).await,
            c => Err(Fail::Err(
                1047,
                "08S01",
                format!("Unknown command 0x{c:02x} (not passed through by the relay)"),
            )),
        }
    }

    async fn local_ok(&mut self) -> Result<(), Fail> {
        let ok = self.ok();
        self.io
            .write_packet(1, &ok)
            .await
            .map(drop)
            .map_err(|_| Fail::Close)
    }

    fn pin(&mut self, p: Pin) {
        if self.pins.insert(p) {
            self.ctx.metrics.pin(p);
        }
    }

    fn set_db(&mut self, db: String) {
        if let Some(c) = self.conn.as_mut() {
            c.db = Some(db.clone());
        }
        self.db = Some(db);
    }

    async fn query(&mut self, cmd: &[u8]) -> Result<(), Fail> {
        let t0 = std::time::Instant::now();
        let rules = self.ctx.rules();
        let want_digest = self.ctx.digests.enabled() || !rules.rules.is_empty();
        // One lex, and none at all in session mode without stats or rules.
        let q = (self.mode == Mode::Transaction || want_digest).then(|| sql::Query::new(&cmd[1..]));
        let fx = match (&q, self.mode) {
            (Some(q), Mode::Transaction) => q.effects(),
            _ => Effects::default(),
        };
        let digest = q.as_ref().filter(|_| want_digest).map(|q| q.digest());
        self.apply_rules(&rules, &cmd[1..], digest.as_deref().unwrap_or_default())?;
        let digest = digest.filter(|_| self.ctx.digests.enabled());
        self.choose_route(fx.read && fx.pins.is_empty() && fx.pin_next.is_none());
        // Take the pins first so that nothing releases the connection early.
        let had_set_tx = self.set_tx_armed && self.pins.contains(&Pin::SetTransaction);
        for p in &fx.pins {
            self.pin(*p);
        }
        let o = self
            .forward_routed(cmd, Expect::Results { cursor: false })
            .await;
        if let Some(d) = digest {
            self.ctx.digests.record(
                d,
                self.route.is_replica(),
                !matches!(&o, Ok(o) if o.error.is_none()),
                t0.elapsed(),
            );
        }
        let o = o?;
        self.after_write(fx.read, &o).await?;
        if o.error.is_none() {
            for s in &fx.settings {
                upsert(&mut self.settings, s);
                if let Some(c) = self.conn.as_mut() {
                    upsert(&mut c.settings, s);
                }
            }
            if let Some(db) = fx.use_db {
                self.set_db(db);
            }
        }
        for p in &fx.unpins {
            self.pins.remove(p);
        }
        if had_set_tx && !self.in_trans {
            self.pins.remove(&Pin::SetTransaction);
        }
        self.set_tx_armed = self.pins.contains(&Pin::SetTransaction);
        let next = if o.insert_id != 0 {
            Some(Pin::LastInsertId)
        } else {
            fx.pin_next
        };
        if let Some(p) = next {
            if self.mode == Mode::Transaction {
                self.ctx.metrics.pin(p);
            }
            self.pin_next = Some(p);
        }
        Ok(())
    }

    /// The client's backend connection, leased and brought to the
    /// client's session state if it has none.
    async fn ensure_conn(&mut self) -> Result<&mut BackendConn, Fail> {
        let mut attempts = 0;
        while self.conn.is_none() {
            attempts += 1;
            let b = match self.backend {
                Some(b) if self.mode == Mode::Session => b,
                _ => self.pick_backend().await?,
            };
            self.backend = Some(b);
            let mut c = match self
                .ctx
                .pool
                .lease(b, self.shape, &self.db, &self.settings)
                .await
            {
                Ok(c) => c,
                Err(e @ crate::backend::pool::LeaseError::Connect(..)) => {
                    // Dead before a health check noticed: mark it and, with
                    // several backends, try the next one the route allows.
                    self.ctx.pool.health.mark_down(b, &e.to_string());
                    if attempts < 3
                        && self.ctx.cfg.backends.len() > 1
                        && self.mode == Mode::Transaction
                    {
                        continue;
                    }
                    return Err(e.into());
                }
                Err(e) => return Err(e.into()),
            };
            match self.sync(&mut c).await {
                Ok(()) => self.conn = Some(c),
                Err(e) => {
                    self.ctx.pool.discard(c);
                    return Err(e);
                }
            }
        }
        self.conn.as_mut().ok_or(Fail::Close)
    }

    /// Replays the client's settings and default database on `c`.
    async fn sync(&self, c: &mut BackendConn) -> Result<(), Fail> {
        let lost = |e: WireError| Fail::Lost(e.to_string());
        if c.settings
            .iter()
            .any(|s| s.is_pseudo() && !self.settings.contains(s))
        {
            self.ctx.metrics.resets.fetch_add(1, Relaxed);
            command::simple(c, &[0x1F]).await.map_err(lost)?;
            c.after_reset();
        }
        let mut parts: Vec<String> = self
            .settings
            .iter()
            .filter(|s| !c.settings.contains(s))
            .map(|s| s.text.clone())
            .collect();
        for s in &c.settings {
            if !self.settings.iter().any(|x| x.name == s.name) {
                parts.push(format!("@@session.{} = DEFAULT", s.name));
            }
        }
        if !parts.is_empty() {
            self.ctx.metrics.state_syncs.fetch_add(1, Relaxed);
            let mut q = b"\x03SET ".to_vec();
            q.extend_from_slice(parts.join(", ").as_bytes());
            let o = command::command(c, &q, Expect::Results { cursor: false })
                .await
                .map_err(lost)?;
            if let Some((code, msg)) = o.error {
                return Err(Fail::Err(
                    code,
                    "HY000",
                    format!("sqlfleet relay: replaying session settings: {msg}"),
                ));
            }
            c.settings = self.settings.clone();
        }
        match (&self.db, &c.db) {
            (Some(d), cur) if cur.as_ref() != Some(d) => {
                let mut p = vec![COM_INIT_DB];
                p.extend_from_slice(d.as_bytes());
                let o = command::command(c, &p, Expect::Single)
                    .await
                    .map_err(lost)?;
                if let Some((code, msg)) = o.error {
                    return Err(Fail::Err(code, "42000", msg));
                }
                c.db = Some(d.clone());
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

    /// Sends a command on the client's backend connection and forwards the
    /// reply; `rewrite_id` replaces a prepared statement's id in it.
    async fn forward(
        &mut self,
        payload: &[u8],
        expect: Expect,
        rewrite_id: Option<u32>,
    ) -> Result<Outcome, Fail> {
        self.ensure_conn().await?;
        let Some(mut c) = self.conn.take() else {
            return Err(Fail::Close);
        };
        let sent = async {
            for id in std::mem::take(&mut c.stmts.to_close) {
                let mut p = vec![COM_STMT_CLOSE];
                p.extend_from_slice(&id.to_le_bytes());
                c.io.write_packet(0, &p).await?;
            }
            c.io.write_packet(0, payload).await
        };
        if let Err(e) = sent.await {
            self.ctx.pool.discard(c);
            return Err(Fail::Lost(e.to_string()));
        }
        let mut t = crate::protocol::reply::Tracker::new(expect, c.deprecate_eof());
        t.rewrite_id = rewrite_id;
        match c.io.forward_reply(&mut self.io, &mut t).await {
            Ok(n) => {
                self.ctx.metrics.bytes_to_client.fetch_add(n, Relaxed);
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
        let o = t.outcome;
        if o.error.is_some() {
            self.ctx.metrics.errors.fetch_add(1, Relaxed);
        }
        if let Some(st) = o.status {
            self.in_trans = st & STATUS_IN_TRANS != 0;
            self.autocommit = st & STATUS_AUTOCOMMIT != 0;
        }
        Ok(o)
    }

    /// In transaction mode, hands the backend connection back when nothing
    /// ties the client to it.
    fn release_if_free(&mut self) {
        if self.mode == Mode::Transaction
            && !self.in_trans
            && self.pins.is_empty()
            && self.pin_next.is_none()
        {
            if let Some(c) = self.conn.take() {
                self.ctx.pool.put(c);
            }
        }
    }

    /// The client is done: its connection (between commands, so in a known
    /// state apart from the session's leftovers) is reset and reused.
    fn finish(&mut self) {
        if let Some(c) = self.conn.take() {
            self.ctx.pool.reset_and_put(c);
        }
    }
}

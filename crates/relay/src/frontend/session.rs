//! One client session: log in, then read commands one at a time, run each
//! on a backend connection and forward the reply as it arrives.
//!
//! In `transaction` mode the backend connection goes back to the pool when
//! a command ends outside a transaction and nothing pins the client to it;
//! the next command may run on another connection, after the client's
//! default database and settings are replayed there. In `session` mode the
//! client keeps its connection until it quits; it is then reset and reused.

mod analysed;
mod binlog;
mod cached;
mod dialect;
mod journal;
mod kill;
mod lease;
mod local;
mod moves;
mod plan;
mod ps;
mod replay;
mod route;
pub(crate) mod schema;
mod shared;
mod state;
mod user;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use sqlfleet_wire::handshake::SESSION_SHAPE;
use sqlfleet_wire::packet::{self, WireError};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::admin::metrics::Metrics;
use crate::backend::command;
use crate::backend::dial::BackendAccount;
use crate::backend::pool::{BackendConn, Route, Shape};
use crate::config::Mode;
use crate::event_loops::Seat;
use crate::frontend::auth::{self};
use crate::frontend::ctx::Ctx;
use crate::protocol::io::{AnyStream, Command, PacketIo, STREAM_OVER};
use crate::protocol::reply::{Expect, Outcome};
use crate::protocol::sql::{self, Effects, KillTarget, Pin};
use crate::protocol::stmt::ClientStmts;
use crate::protocol::track::Change;
use state::{Ask, ClientState, ForConn, FoundRowsLost, FoundRowsOnConn};

use sqlfleet_wire::command::*;

/// The error code for a backend lost mid-command: a server-range code
/// (ER_NET_READ_ERROR, SQLSTATE 08S01) that client libraries accept in an
/// ERR packet and treat as a communication failure.
pub const LOST_CODE: u16 = 1158;

/// The sequence id of the first packet answering a command of `len`
/// bytes: the command took `len / 0xFFFFFF + 1` packets (one of 16 MiB - 1
/// or more is followed by a shorter one, empty if need be), numbered from
/// 0, and the answer goes on from there. A one-packet command's answer is
/// 1; a 40 MiB statement's is 3.
pub(crate) fn reply_seq(len: usize) -> u8 {
    ((len / 0xFF_FFFF + 1) % 256) as u8
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
        use crate::backend::pool::LeaseError;
        match &e {
            // The server's own words may name the relay's backend account:
            // they go to /status (the backend's health), not to clients.
            LeaseError::Connect(addr, why) => {
                let why = why.to_string();
                // Keep the server's error code, not its text: a server
                // that answered refused the relay's login (an account,
                // a limit); one that did not cannot be reached.
                let what = match why.find("ERROR ") {
                    Some(i) => format!(
                        "refused the relay's connection: {}",
                        why[i..].split(':').next().unwrap_or("")
                    ),
                    None => format!("cannot be reached: {why}"),
                };
                Fail::Err(
                    e.code(),
                    "08004",
                    format!(
                        "sqlfleet relay: backend {addr} {what} (details in the relay's /status)"
                    ),
                )
            }
            LeaseError::Denied(code, text) => {
                // A character set the server refuses is a syntax-class
                // error; an account's refusal an access one.
                let state = if matches!(code, 1231 | 1115) {
                    "42000"
                } else {
                    "28000"
                };
                Fail::Err(*code, state, text.clone())
            }
            // The server's own answer when it is full, word for word
            // (drivers and their tests match it); the relay's log and
            // pool_wait_timeouts_total say which pool was busy.
            LeaseError::Timeout(..) | LeaseError::Queue(..) | LeaseError::Share(..) => {
                Fail::Err(e.code(), "08004", "Too many connections".into())
            }
        }
    }
}

struct Session {
    ctx: Arc<Ctx>,
    /// The event loop serving this session (counted there).
    seat: Seat,
    /// `run` returned to move the session to this loop.
    moving: Option<usize>,
    /// Commands served, and at which count to look for a less busy loop.
    commands_run: u64,
    next_move_check: u64,
    io: PacketIo<AnyStream>,
    /// The current command is a big COM_QUERY read only up to its head
    /// (`protocol/io/stream.rs`): the rest is still on the client's
    /// socket until `forward` passes it on (or `run` drops it).
    streamed: Option<crate::protocol::io::Streamed>,
    /// The most of a reply `capture` keeps (a cache rule's largest entry).
    capture_max: usize,
    /// What the open transaction's writes make stale at its COMMIT
    /// (`cache/pending.rs`).
    cache_pending: crate::cache::pending::Pending,
    /// The reply's sequence id after a streamed command `forward` passed
    /// on (its packets are counted there).
    streamed_seq: Option<u8>,
    /// The client's session as the relay follows it (`state.rs`).
    st: ClientState,
    shape: Shape,
    /// The server's global sql_mode when the session began (or was last
    /// reset): its sql_mode until it sets one (`dialect`).
    login_sql_mode: Option<String>,
    /// The last dialect worked out, with the settings generation and login
    /// collation it was for (`Session::dialect`, asked every statement).
    dialect_memo: Option<(u64, u8, sqlfleet_dump::lex::Dialect)>,
    /// The login's database in the client's bytes, when only they name it
    /// (`schema.rs`): sent once, by the first COM_INIT_DB.
    login_db_bytes: Option<Vec<u8>>,
    caps: u32,
    /// COM_CHANGE_USER attempts refused on this connection: as the server
    /// (MDEV-3915), after three every further one is refused unheard, so a
    /// connection cannot be used to guess passwords.
    change_user_failures: u8,
    /// The client's host, for access-denied messages worded as the server's.
    host: String,
    nonce: [u8; 20],
    tls: bool,
    stmts: ClientStmts,
    conn: Option<BackendConn>,
    backend: Option<usize>,
    /// The server of the connection the client holds was a replica when
    /// the client got it (`routing/read.rs`, `runs_on_held`).
    leased_on_replica: bool,
    /// Where the next leased connection comes from.
    route: Route,
    /// A query rule chose the route.
    route_fixed: bool,
    /// The next forward holds back a reply that only says its server
    /// will not serve now (`reply::refuses_service`): a read on a replica
    /// that can go elsewhere.
    hold_refusal: bool,
    /// The next forward of a COM_QUERY carries a Galera causality wait
    /// (`route.rs`, `galera_causal_read`).
    sync_wait_next: bool,
    /// The client's last committed write (consistency = session).
    last_write_gtid: Option<String>,
    /// The client's last write committed and its position could not be
    /// read: its reads go to the primary (consistency = session).
    own_write_unknown: bool,
    /// The current command's reply reached the client: a failure after
    /// it (the relay's own follow-up) gets no second reply.
    replied: bool,
    /// The open transaction's statements and replies (transaction replay).
    journal: journal::Journal,
    /// The next forward digests its reply into `last_digest`.
    digest_next: bool,
    /// The statement being run needs the client's FOUND_ROWS() on its
    /// connection first (`ClientState::found_rows_restore`; made again
    /// where a retry runs it on another).
    carry_found_rows: Option<state::Restore>,
    last_digest: Option<u128>,
    /// The statement being run is a plain read (its text says so).
    stmt_read: bool,
    /// The client's command reached its server connection (`forward`).
    client_sent: bool,
    /// The connection holding the client's open transaction was lost
    /// between commands: the next command replays it first.
    pending_loss: Option<String>,
    /// A reply being recorded as it is forwarded (see `local.rs`).
    capture: Option<Vec<u8>>,
    /// The client's login name (shared with the pool, which counts each
    /// account's connections by it: backend/share.rs).
    user: Arc<str>,
    /// Per-user mode: the backend account this client's connections log
    /// in as (its own).
    account: Option<Arc<BackendAccount>>,
    /// The id the client was given in the greeting.
    id: u32,
    /// What KILL from another client sees of this one.
    handle: Arc<crate::frontend::clients::Handle>,
    /// The look at views that call stored functions this session holds
    /// (`backend/view_calls.rs`).
    view_look: Option<crate::backend::view_calls::Look>,
}

struct ConnectedGauge(Arc<Metrics>);
impl Drop for ConnectedGauge {
    fn drop(&mut self) {
        self.0.clients_connected.fetch_sub(1, Relaxed);
    }
}

/// Serves one client; `host` is its address as the server would name it
/// in an error ('localhost' over a socket).
pub async fn serve<S>(ctx: Arc<Ctx>, stream: S, id: u32, host: String, seat: Seat)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static,
{
    let accepted = std::time::Instant::now();
    ctx.metrics.clients_total.fetch_add(1, Relaxed);
    let connected = ctx.metrics.clients_connected.fetch_add(1, Relaxed) + 1;
    let _gauge = ConnectedGauge(ctx.metrics.clone());
    if connected > ctx.max_clients as i64 {
        // The server's own answer when it is full: an error packet in
        // place of the greeting, never a reset.
        ctx.metrics.clients_refused_full.fetch_add(1, Relaxed);
        let mut stream = stream;
        let err = sqlfleet_wire::packet::err_payload(1040, "08004", "Too many connections");
        let _ = sqlfleet_wire::packet::write(&mut stream, 0, &err).await;
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut stream).await;
        return;
    }
    // An address whose logins keep failing waits before its greeting (a
    // Unix socket's clients are this machine's: not slowed).
    let wait = if host == "localhost" {
        std::time::Duration::ZERO
    } else {
        ctx.throttle.wait(&host)
    };
    if !wait.is_zero() {
        ctx.metrics.login_delays.fetch_add(1, Relaxed);
        tokio::time::sleep(wait).await;
    }
    let users = ctx.users.read().unwrap_or_else(|e| e.into_inner()).clone();
    let greeting = ctx.greeting();
    let login = auth::login(
        &ctx.cfg,
        &users,
        ctx.server_accounts.as_ref(),
        &greeting,
        stream,
        id,
        &host,
    );
    let li = match tokio::time::timeout(std::time::Duration::from_secs(10), login).await {
        Ok(Ok(li)) => {
            ctx.throttle.succeeded(&host);
            li
        }
        Ok(Err(auth::AuthError::Denied(why))) => {
            ctx.metrics.auth_failures.fetch_add(1, Relaxed);
            ctx.throttle.failed(&host);
            crate::admin::log::login_failed("", id, &why);
            return;
        }
        Ok(Err(auth::AuthError::Unavailable(why) | auth::AuthError::Refused(why))) => {
            crate::admin::log::login_failed("", id, &why);
            return;
        }
        _ => return, // stalled, malformed or gone mid-handshake
    };
    let (handle, _registered) = ctx.clients.register(id, &li.hello.user, &host);
    let (mut s, seq, credential) = Session::new(ctx, li, &greeting, (id, host, seat, handle));
    if s.st.mode() == Mode::Session {
        s.ctx.metrics.pin(Pin::Session);
    }
    s.route = s.default_route();
    if s.ctx.cfg.per_user_accounts {
        match &credential {
            Some(c) => {
                s.account = Some(Arc::new(BackendAccount {
                    user: s.user.to_string(),
                    credential: c.clone(),
                }))
            }
            None => {
                s.ctx.metrics.auth_failures.fetch_add(1, Relaxed);
                crate::admin::log::login_failed(
                    &s.user,
                    id,
                    "no credential the server can take (per-user accounts)",
                );
                let msg = format!(
                    "Access denied for user '{}': the relay logs in to the server as you, which needs mysql_native_password or caching_sha2_password with full authentication (sha2_full_auth)",
                    s.user
                );
                let _ =
                    s.io.write_packet(seq, &packet::err_payload(1045, "28000", &msg))
                        .await;
                return;
            }
        }
    }
    // A default database asked for at login must exist; per-user, the
    // server must take the client's account (its refusal is the login's).
    if s.st.db().is_some() || s.login_db_bytes.is_some() || s.account.is_some() {
        if let Err(f) = s.ensure_conn().await {
            let (code, state, msg) = match f {
                Fail::Err(c, st, m) => (c, st, m),
                Fail::Lost(m) => (LOST_CODE, "08S01", m),
                Fail::Close => return,
            };
            let _ =
                s.io.write_packet(seq, &packet::err_payload(code, state, &msg))
                    .await;
            return;
        }
    }
    if s.io.write_packet(seq, &s.ok()).await.is_err() {
        s.finish();
        return;
    }
    if s.caps & sqlfleet_wire::handshake::COMPRESS != 0 {
        s.io.compress(false);
    }
    s.ctx.metrics.login.observe(accepted.elapsed());
    s.release_if_free();
    drive(s).await;
}

impl Session {
    /// A client's session right after its login: the relay's own state,
    /// no backend connection yet.
    fn new(
        ctx: Arc<Ctx>,
        li: auth::LoggedIn,
        greeting: &auth::Greeting,
        (id, host, seat, handle): (u32, String, Seat, Arc<crate::frontend::clients::Handle>),
    ) -> (Session, u8, Option<sqlfleet_wire::handshake::Credential>) {
        let auth::LoggedIn {
            stream,
            hello,
            seq,
            nonce,
            tls,
            credential,
        } = li;
        // A name the relay could not say again in the client's bytes is
        // sent as the client sent it, once (`schema.rs`).
        let (login_db, login_db_bytes) = match hello.database.as_deref() {
            None => (None, None),
            Some(b) => match schema::login_name(b, hello.collation) {
                Some(name) => (Some(name), None),
                None => (None, Some(b.to_vec())),
            },
        };
        let s = Session {
            id,
            seat,
            moving: None,
            next_move_check: crate::event_loops::MOVE_AFTER,
            commands_run: 0,
            handle,
            view_look: None,
            st: ClientState::new(ctx.cfg.mode, login_db)
                .starting_as(ctx.pool.health.fresh_sessions()),
            login_db_bytes,
            shape: Shape {
                caps: hello.caps & SESSION_SHAPE,
                collation: hello.collation,
                ext: hello.ext & greeting.ext,
            },
            login_sql_mode: ctx.pool.health.sql_mode(),
            dialect_memo: None,
            caps: hello.caps,
            change_user_failures: 0,
            host,
            nonce,
            tls,
            stmts: ClientStmts::default(),
            conn: None,
            backend: None,
            leased_on_replica: false,
            route: Route::Any,
            route_fixed: false,
            hold_refusal: false,
            sync_wait_next: false,
            last_write_gtid: None,
            own_write_unknown: false,
            replied: false,
            journal: journal::Journal::new(ctx.cfg.replay.max_bytes),
            digest_next: false,
            carry_found_rows: None,
            last_digest: None,
            stmt_read: false,
            client_sent: false,
            streamed: None,
            streamed_seq: None,
            capture_max: usize::MAX,
            cache_pending: Default::default(),
            pending_loss: None,
            capture: None,
            user: Arc::from(hello.user.as_str()),
            account: None,
            io: PacketIo::small(stream),
            ctx,
        };
        (s, seq, credential)
    }
}

/// The statement's lexed text and what it does, read once — and not at
/// all in session mode without digests or rules. In every mode, KILL is
/// the relay's (the ids it names are the relay's), a global set makes
/// pooled sessions stale, and a role or statement traces the session may
/// have left close its connection at the end (a reset keeps the role and
/// the profile history).
fn read_statement(
    text: &[u8],
    mode: Mode,
    want_digest: bool,
    dialect: Option<sqlfleet_dump::lex::Dialect>,
    shared: bool,
) -> (Option<sql::Query<'_>>, Effects) {
    // (Transaction mode reads every text whole: the cheap tests, which
    // scan it, are for session mode only.)
    let in_any_mode = mode != Mode::Transaction
        && ([
            "KILL", "SET", "DROP", "CREATE", "ALTER", "RENAME", "GRANT", "REVOKE",
        ]
        .iter()
        .any(|w| sql::starts_with_word(text, w))
            || (shared && sql::may_touch_the_account(text))
            || sql::may_set_what_a_reset_keeps(text));
    // Lexed as the session writes (see `dialect`); a text that reads
    // otherwise in some dialect, from a session whose dialect is unknown,
    // pins the client to its connection on the primary.
    let mut unsure = false;
    let q = (mode == Mode::Transaction || want_digest || in_any_mode).then(|| match dialect {
        Some(d) => sql::Query::new_in(text, d),
        None => {
            let (q, differs) = sql::Query::new_unsure(text);
            unsure = differs;
            q
        }
    });
    let fx = match (&q, mode) {
        (Some(q), Mode::Transaction) if unsure => {
            let mut fx = q.effects();
            fx.read = false;
            fx.pins.push(Pin::Dialect);
            fx
        }
        (Some(q), Mode::Transaction) => q.effects(),
        (Some(q), _) if in_any_mode => {
            let fx = q.effects();
            Effects {
                kill: fx.kill,
                kill_unread: fx.kill_unread,
                dynamic_var: fx.dynamic_var,
                account_targets: fx.account_targets,
                sets_global: fx.sets_global,
                drops_users: fx.drops_users,
                changes_accounts: fx.changes_accounts,
                changes_privileges: fx.changes_privileges,
                statement_vars: fx.statement_vars,
                changes_schema: fx.changes_schema,
                // The session holds its connection anyway; a role or
                // statement traces close it at the end instead of a reset.
                pins: fx
                    .pins
                    .into_iter()
                    .filter(|p| matches!(p, Pin::Role | Pin::Traces))
                    .collect(),
                ..Effects::default()
            }
        }
        _ => Effects::default(),
    };
    (q, fx)
}

/// Runs a session to its end; when its event loop serves more sessions
/// than another by two or more, the session moves there between commands
/// (its sockets to that loop's poller) and goes on as before.
fn drive(mut s: Session) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    Box::pin(async move {
        loop {
            s.run().await;
            let Some(to) = s.moving.take() else {
                s.finish();
                return;
            };
            let Some(client) = s.take_off() else {
                // Its socket was lost on the way (run() then ends the
                // session at its next read).
                continue;
            };
            s.seat.move_to(to);
            s.ctx.metrics.session_moves.fetch_add(1, Relaxed);
            let handle = s.seat.handle(to).clone();
            // This task waits for the session's end so that a relay
            // draining its sessions still waits for this one.
            let _ = handle
                .spawn(async move {
                    if s.put_on(client) {
                        drive(s).await;
                    }
                })
                .await;
            return;
        }
    })
}

/// What the command loop does next.
#[derive(Debug, PartialEq, Eq)]
enum Next<T> {
    /// Runs this command.
    Command(T),
    /// Reads the next command.
    Again,
    /// The session ends.
    End,
}

impl Session {
    fn ok(&self) -> Vec<u8> {
        packet::ok_payload(self.st.status())
    }

    /// Applies what an observation of the client's session asks of its
    /// connection, and counts the pins it took.
    fn apply(&mut self, f: ForConn) {
        for p in &f.pinned {
            self.ctx.metrics.pin(*p);
        }
        if let Some(c) = self.conn.as_mut() {
            c.note_changes(&f.settings, f.db, f.insert_id);
            if f.insert_id_unknown {
                c.forget_last_insert_id();
            }
        }
    }

    async fn run(&mut self) {
        loop {
            if self.commands_run >= self.next_move_check {
                self.next_move_check += crate::event_loops::RECHECK;
                if let Some(to) = self.seat.better().filter(|_| self.movable()) {
                    self.moving = Some(to);
                    return;
                }
            }
            self.commands_run += 1;
            let cmd = match self.next_command().await {
                Next::Command(cmd) => cmd,
                Next::Again => continue,
                Next::End => return,
            };
            self.ctx.metrics.commands.fetch_add(1, Relaxed);
            if !matches!(cmd[0], COM_QUERY | COM_STMT_EXECUTE | COM_STMT_BULK_EXECUTE) {
                self.drop_diagnostics_hold(&Effects::default());
            }
            self.ctx
                .metrics
                .bytes_to_backend
                .fetch_add(cmd.len() as u64 + 4, Relaxed);
            if cmd[0] == COM_QUIT {
                return;
            }
            // A one-statement pin ends after the statement it was kept for.
            self.st.begin_command();
            if self.conn.is_none() {
                // (Dropped since the last command: a count only it held
                // went with it.)
                self.st.conn_gone();
            }
            self.route = self.default_route();
            self.route_fixed = false;
            let t0 = std::time::Instant::now();
            let before = self.conn.as_ref().map(|c| c.thread_id());
            let r = self.run_command(&cmd).await;
            if self.answered(&cmd, r, t0, before).await == Next::End {
                return;
            }
            self.release_if_free();
        }
    }

    /// The client's next command, checked as the server checks it (its
    /// sequence id, an empty packet, the largest packet); meanwhile a
    /// backend connection the client keeps between commands (its session
    /// lives there) says nothing — unless the server closes it
    /// (wait_timeout, KILL, a restart): then the client's socket closes
    /// too, promptly, as it would directly, so a driver's check of an
    /// idle connection sees it.
    async fn next_command(&mut self) -> Next<Vec<u8>> {
        let max = self.ctx.cfg.max_packet;
        let handle = self.handle.clone();
        let io = &mut self.io;
        let held = self.conn.as_mut().map(|c| &mut c.io);
        let backend_closed = async move {
            match held {
                Some(b) => {
                    let _ = b.read_packet(1 << 16).await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        let read = tokio::select! {
            r = io.read_command(max, STREAM_OVER) => r,
            _ = handle.killed() => return Next::End,
            _ = backend_closed => {
                if let Some(c) = self.conn.take() {
                    self.ctx.metrics.backend_lost.fetch_add(1, Relaxed);
                    self.ctx.pool.discard(c);
                }
                // A transaction the relay can run again elsewhere
                // outlives its connection: the client's next
                // command replays it first (`replay.rs`).
                if !self.st.in_trans() {
                    return Next::End;
                }
                let why = "the server closed the connection holding the transaction";
                match self.journal.replay_later(self.st.fits_elsewhere()) {
                    Ok(()) => {
                        self.pending_loss = Some(why.into());
                        return Next::Again;
                    }
                    Err(not) => {
                        self.not_replayed(not, why);
                        return Next::End;
                    }
                }
            }
        };
        let (seq, cmd) = match read {
            Ok(Command::Whole(seq, p)) => (seq, p),
            Ok(Command::Head(p, streamed)) => {
                self.streamed = Some(streamed);
                (0, p)
            }
            Ok(Command::OutOfOrder(seq)) => (seq, Vec::new()),
            Err(WireError::TooBig { len, max }) => {
                let msg = format!(
                    "Got a packet bigger than the relay's max_packet ({len} > {max} bytes)"
                );
                let _ = self
                    .io
                    .write_packet(1, &packet::err_payload(1153, "08S01", &msg))
                    .await;
                return Next::End;
            }
            Err(_) => return Next::End,
        };
        if seq != 0 {
            // As the server: its error with sequence id 0, then the end.
            let _ = self
                .io
                .write_packet(
                    0,
                    &packet::err_payload(1156, "08S01", "Got packets out of order"),
                )
                .await;
            return Next::End;
        }
        if cmd.is_empty() {
            // An empty packet is no command: the server's answer, and
            // the session goes on.
            let refused = packet::err_payload(1047, "08S01", "Unknown command");
            return match self.io.write_packet(1, &refused).await {
                Ok(_) => Next::Again,
                Err(_) => Next::End,
            };
        }
        Next::Command(cmd)
    }

    /// After a command ran: its streamed rest skipped, what it counts,
    /// and the client's error reply when it failed. `End`: the session
    /// ends here.
    async fn answered(
        &mut self,
        cmd: &[u8],
        r: Result<(), Fail>,
        t0: std::time::Instant,
        before: Option<u32>,
    ) -> Next<()> {
        // A streamed command that went nowhere (refused, or its backend
        // lost before its head went out): its rest is read and dropped,
        // so a reply follows its last packet.
        let mut reply_seq = self
            .streamed_seq
            .take()
            .unwrap_or_else(|| reply_seq(cmd.len()));
        if let Some(mut s) = self.streamed.take() {
            if self.io.skip_rest(&mut s).await.is_err() {
                return Next::End;
            }
            reply_seq = s.reply_seq();
        }
        if cmd[0] != COM_QUERY {
            self.journal.other_command(cmd[0], self.st.in_trans());
        }
        self.count_command(cmd[0], &r, t0, before);
        if std::mem::take(&mut self.replied) {
            if let Err(f) = &r {
                // The client has its reply; what failed after it is
                // the relay's own follow-up on the connection. A
                // second reply would answer the client's next command.
                if let Some(c) = self.conn.take() {
                    self.ctx.pool.discard(c);
                }
                if matches!(f, Fail::Close) || self.st.lives_on_conn() {
                    if let Fail::Lost(why) = f {
                        if self.st.in_trans() {
                            // (Its journal never took this statement: a
                            // replay could not know the reply the client has.)
                            self.not_replayed("the client already had its reply".into(), why);
                        }
                    }
                    return Next::End;
                }
                return Next::Again;
            }
        }
        let (code, state, msg) = match r {
            Ok(()) => return Next::Again,
            Err(Fail::Close) => return Next::End,
            Err(Fail::Err(code, state, msg)) => {
                self.ctx.metrics.errors.fetch_add(1, Relaxed);
                (code, state, msg)
            }
            Err(Fail::Lost(msg)) => {
                self.ctx.metrics.errors.fetch_add(1, Relaxed);
                self.ctx.metrics.backend_lost.fetch_add(1, Relaxed);
                if let Some(c) = self.conn.take() {
                    self.ctx.pool.discard(c);
                }
                // Session mode always holds Pin::Session.
                if self.st.lives_on_conn() {
                    // The session's state died with its server
                    // connection (killed, server gone): it ends as a
                    // direct connection would, closed without a word,
                    // so the client's library reports its own 2013
                    // (Lost connection) and retry-on-2013 logic runs.
                    tracing::info!(
                        client = self.id,
                        "the server connection holding this client's session was lost ({msg}); the client is disconnected"
                    );
                    return Next::End;
                }
                // Nothing of the client's lived there: it carries on
                // after an error in the server's range.
                let msg = format!("Lost connection to backend server during query ({msg})");
                let reply = packet::err_payload(LOST_CODE, "08S01", &msg);
                let _ = self.io.write_packet(reply_seq, &reply).await;
                return Next::Again;
            }
        };
        let reply = packet::err_payload(code, state, &msg);
        match self.io.write_packet(reply_seq, &reply).await {
            Ok(_) => Next::Again,
            Err(_) => Next::End,
        }
    }

    /// A command's trace line and its backend's figures: the command it
    /// answered, its latency, errors.
    fn count_command(
        &self,
        command: u8,
        r: &Result<(), Fail>,
        t0: std::time::Instant,
        before: Option<u32>,
    ) {
        if self.ctx.trace.on() {
            let after = self.conn.as_ref().map(|c| c.thread_id());
            let ok = if r.is_ok() { "ok" } else { "failed" };
            self.ctx.trace.add(
                self.id,
                format!(
                    "command {command:#04x} {ok}: connection {before:?} -> {after:?}, pins {:?}, dirty {:?}",
                    self.st.pins(),
                    self.conn.as_ref().map(|c| c.diagnostics_dirty())
                ),
            );
        }
        if let Some(c) = self
            .conn
            .as_ref()
            .and_then(|c| self.ctx.metrics.backend(c.backend()))
        {
            c.commands.fetch_add(1, Relaxed);
            c.latency.observe(t0.elapsed());
            if matches!(r, Err(Fail::Err(..))) {
                c.errors.fetch_add(1, Relaxed);
            }
        } else if let (Err(Fail::Lost(_)), Some(c)) =
            (r, self.backend.and_then(|b| self.ctx.metrics.backend(b)))
        {
            c.errors.fetch_add(1, Relaxed);
        }
    }

    async fn command(&mut self, cmd: &[u8]) -> Result<(), Fail> {
        match cmd[0] {
            COM_QUERY => self.query(cmd).await,
            COM_PING if self.conn.is_none() => self.local_ok().await,
            COM_PROCESS_KILL => {
                let id = cmd
                    .get(1..5)
                    .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                self.kill(false, KillTarget::Id(u64::from(id)), cmd).await
            }
            COM_PING | COM_STATISTICS | COM_DEBUG | COM_REFRESH => {
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
                    self.set_db(Some(db));
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
            COM_STMT_EXECUTE | COM_STMT_BULK_EXECUTE => self.execute(cmd).await,
            COM_STMT_SEND_LONG_DATA => self.send_long_data(cmd).await,
            COM_STMT_CLOSE => self.close_stmt(cmd).await,
            COM_STMT_RESET => self.reset_stmt(cmd).await,
            COM_STMT_FETCH => self.fetch(cmd).await,
            COM_REGISTER_SLAVE => {
                self.pin(Pin::Replication);
                self.forward(cmd, Expect::Single, None).await.map(drop)
            }
            COM_BINLOG_DUMP | COM_BINLOG_DUMP_GTID => self.binlog_dump(cmd).await,
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
        if self.st.pin(p) {
            self.ctx.metrics.pin(p);
        }
    }

    fn set_db(&mut self, db: Option<String>) {
        if let Some(c) = self.conn.as_mut() {
            c.note_db(db.clone());
        }
        self.st.use_db(db);
    }

    /// The statement's text with the client's own ROW_COUNT(),
    /// FOUND_ROWS() and `@@last_gtid` written in
    /// (`ClientState::own_counts`), `None` when it reads none of them.
    /// Read as the session writes: `toks` unless the rest of a streamed
    /// text was read since (`rest`) or they were lexed before the dialect
    /// was known; a session whose dialect is not known is rewritten only
    /// where every dialect reads the text alike, else refused (its data
    /// would change, or another client's count).
    pub(super) fn own_counts(
        &self,
        text: &[u8],
        (toks, rest): (&[sql::Token], bool),
        dialect: Option<sqlfleet_dump::lex::Dialect>,
        fx: &Effects,
    ) -> Result<Option<Vec<u8>>, Fail> {
        if self.st.insert_id_lost() && fx.reads_insert_id {
            return Err(Fail::Err(
                1235,
                "42000",
                "sqlfleet relay: this session's LAST_INSERT_ID() is not known: only the server \
                 connection that held it knew it (an INSERT whose ids the relay could not tell \
                 generated from written), and that connection is gone; an INSERT that \
                 generates an id, or LAST_INSERT_ID(expr), sets it anew"
                    .into(),
            ));
        }
        if !(fx.reads_diagnostics || fx.reads_last_gtid) {
            return Ok(None);
        }
        if let Some(why) = self.st.found_rows_lost() {
            if sql::calls_builtin(toks, "FOUND_ROWS") {
                return Err(Fail::Err(1235, "42000", self.found_rows_lost_words(why)));
            }
        }
        // (Tokens lexed while the dialect was not known, and read
        // otherwise in some dialect, carry Pin::Dialect: a prepared
        // statement's may be executed once it is known.)
        let unsure = fx.pins.contains(&Pin::Dialect);
        let relexed;
        let (toks, sure) = match (rest || unsure, dialect) {
            (false, _) => (toks, true),
            (true, Some(d)) => {
                relexed = sql::Query::new_in(text, d);
                (relexed.tokens(), true)
            }
            // (Already found to read otherwise in some dialect.)
            (true, None) if !rest => (toks, false),
            (true, None) => {
                let (q, differs) = sql::Query::new_unsure(text);
                relexed = q;
                (relexed.tokens(), !differs)
            }
        };
        match self
            .st
            .own_counts(text, toks, dialect.unwrap_or_default(), fx)
        {
            Some(std::borrow::Cow::Borrowed(_)) => Ok(None),
            Some(std::borrow::Cow::Owned(_)) if !sure => Err(Fail::Err(
                1235,
                "42000",
                "sqlfleet relay: this statement reads ROW_COUNT(), FOUND_ROWS() or @@last_gtid, \
                 which the relay writes in for this client, but the session's sql_mode or \
                 character set is not known and they read this text differently; set them to \
                 literal values first (SET sql_mode = '...', NAMES ...)"
                    .into(),
            )),
            Some(std::borrow::Cow::Owned(v)) => Ok(Some(v)),
            None => Err(Fail::Err(
                1235,
                "42000",
                "sqlfleet relay: this statement reads ROW_COUNT(), FOUND_ROWS() or @@last_gtid, \
                 which the relay writes in for this client, but written in here they would \
                 change how the rest of the text reads (a string or comment beside them); \
                 give the read a plain place of its own (its own select item, spaced)"
                    .into(),
            )),
        }
    }

    async fn query(&mut self, cmd: &[u8]) -> Result<(), Fail> {
        let t0 = std::time::Instant::now();
        let rules = self.ctx.rules();
        let caching = self.ctx.cache.active();
        let want_digest = self.ctx.digests.enabled() || !rules.rules.is_empty() || caching;
        let mut analysed = self.analyse(&cmd[1..], caching, want_digest);
        let mut fx = std::mem::take(&mut analysed.fx);
        if self.streamed.is_some() {
            // Only its head was read: what its tail does is unknown, so
            // it is a write (the primary's) that no replay can repeat.
            fx.read = false;
        }
        let digest = analysed.digest.take();
        if !rules.rules.is_empty() {
            let db = self.st.db().clone();
            let digest_text = digest.as_deref().unwrap_or_default();
            self.apply_rules(&rules, &cmd[1..], digest_text, db.as_deref())?;
        }
        let cache_digest = digest.clone().filter(|_| caching);
        let digest = digest.filter(|_| self.ctx.digests.enabled());
        self.shared_account_guard(&fx).await?;
        if let Some((query_only, target)) = fx.kill.clone() {
            return self.kill(query_only, target, cmd).await;
        }
        self.st.begin_statement(&fx);
        self.drop_diagnostics_hold(&fx);
        let had_set_expression = self.st.pins().contains(&Pin::SetExpression);
        let toks = analysed.tokens();
        self.route_and_pin(&cmd[1..], toks, &fx, false).await?;
        self.judge_insert_id(&fx, None).await;
        let dialect = self.dialect();
        let plan = plan::plan(
            (&cmd[1..], toks, dialect.unwrap_or_default()),
            &fx,
            &self.st,
            plan::Facts {
                held: self.conn.is_some(),
                streamed: self.streamed.is_some(),
                journal: self.journal.enabled(),
                caching,
            },
        );
        // The relay's own answers and rewrites need the whole text: a
        // streamed statement that would have one is read whole after all.
        let whole;
        let mut read_rest = false;
        let cmd: &[u8] = match self.streamed.take() {
            Some(mut st) if plan.read_whole => {
                let mut all = cmd.to_vec();
                if self.io.read_rest(&mut st, &mut all).await.is_err() {
                    return Err(Fail::Close);
                }
                whole = all;
                read_rest = true;
                &whole
            }
            st => {
                self.streamed = st;
                cmd
            }
        };
        let rewritten = self
            .own_counts(&cmd[1..], (toks, read_rest), dialect, &fx)?
            .map(|v| [&[COM_QUERY][..], &v].concat());
        let cmd: &[u8] = rewritten.as_deref().unwrap_or(cmd);
        // A connect-time variable read: the server's recorded reply, or
        // the server's reply recorded on its way.
        let local = plan.local.then(|| self.local_key(&cmd[1..])).flatten();
        if let Some(key) = &local {
            if self.answer_locally(key).await? {
                if let Some(d) = digest {
                    self.ctx
                        .digests
                        .record(d, self.route.is_replica(), false, 1, t0.elapsed());
                }
                return Ok(());
            }
            self.capture = Some(Vec::new());
        }
        // A cache rule's SELECT: the cached reply, or the read recorded.
        let mut miss = None;
        if let Some((rule, key)) = plan
            .cache
            .then(|| {
                let db = self.st.db().clone();
                self.cache_key(db, &cmd[1..], &fx, toks, cache_digest.as_deref(), None)
            })
            .flatten()
        {
            miss = self
                .answer_or_miss(rule, key, (&cmd[1..], toks, 0), &fx)
                .await?;
            if let Some(m) = miss.as_mut().filter(|_| rewritten.is_none()) {
                // Kept with its entry: the text as the client sent it.
                m.analysis = Some(analysed.to_keep(&fx, cache_digest.as_deref()));
            }
            if miss.is_none() {
                if let Some(d) = digest {
                    self.ctx.digests.record(d, false, false, 1, t0.elapsed());
                }
                return Ok(());
            }
        }
        // A statement that may write: what it may change is stale before
        // it runs and again once its reply is in (`cache.rs`).
        let stale = self.cache_stale(&fx, &cmd[1..], None).await;
        let writing = stale.as_ref().map(|(c, s)| c.cache.write_begins(s.clone()));
        let streamed = self.streamed.is_some();
        let epoch = self.ctx.pool.epoch();
        self.stmt_read = fx.read;
        self.carry_over(&fx, true).await?;
        let was_in_trans = self.st.in_trans();
        self.digest_next = plan.digest;
        self.last_digest = None;
        self.carry_found_rows = self.st.found_rows_restore(&fx);
        let count_before = self.st.known_found_rows();
        let o = self.run_statement(route::Send::Text(cmd)).await;
        self.carry_found_rows = None;
        drop(writing);
        self.digest_next = false;
        let mut captured = self.capture.take();
        // (No capture: the reply grew past the rule's largest entry.)
        let store = miss.map(|m| (m, captured.as_mut().map(std::mem::take)));
        if let Some(d) = digest {
            self.record_digest(d, &o, t0);
        }
        let o = o?;
        if fx.sets_global && o.error.is_none() {
            self.ctx.pool.globals_changed();
        }
        // (The counts first: what `after_write` may ask the connection
        // replaces the server's FOUND_ROWS().)
        self.keep_diagnostics(&o, &fx);
        self.capture_counts().await?;
        // Stored once the count it left is known (`Hit::keeps`).
        if let Some((m, reply)) = store {
            self.cache_store(m, &o, reply, (&fx, count_before));
        }
        self.after_write(fx.read, &o).await?;
        self.after_text_effects(&fx, &o);
        if !had_set_expression {
            let tracked = self.conn.as_ref().is_some_and(|c| c.tracking());
            self.st.release_computed_settings(&fx, &o, tracked);
        }
        if let (Some(key), Some(reply)) = (local, captured) {
            self.record_answer(key, epoch, &o, &fx, reply);
        }
        let fits = if streamed {
            Err("a statement too big to hold was streamed, not kept".into())
        } else {
            self.st.fits_elsewhere()
        };
        let digest = self.last_digest.take().map(|d| (d, o.insert_id));
        self.journal
            .statement(was_in_trans, self.st.in_trans(), cmd, digest, fits);
        Ok(())
    }

    /// A statement's run in its digest's statistics: rows returned (or
    /// affected), whether it failed, how long it took since `t0`.
    pub(super) fn record_digest(
        &self,
        d: String,
        o: &Result<Outcome, Fail>,
        t0: std::time::Instant,
    ) {
        let rows = match o {
            Ok(o) if o.result_sets > 0 => o.rows,
            Ok(o) => o.affected,
            Err(_) => 0,
        };
        self.ctx.digests.record(
            d,
            self.route.is_replica(),
            !matches!(o, Ok(o) if o.error.is_none()),
            rows,
            t0.elapsed(),
        );
    }

    /// What the statement's text says it did, where the server's tracker
    /// is silent (`ClientState::after_text`), and what it changed of the
    /// relay's shared knowledge: the tables whose writes act unseen, the
    /// accounts it remembers.
    fn after_text_effects(&mut self, fx: &Effects, o: &Outcome) {
        let tracked = self.conn.as_ref().is_some_and(|c| c.tracking());
        if fx.changes_schema {
            self.ctx.write_effects.forget();
            self.ctx.write_scopes.forget();
            self.ctx.view_calls.forget();
        }
        if o.error.is_none() {
            for u in &fx.drops_users {
                self.ctx.pool.forget_account(u);
            }
            if fx.changes_accounts {
                if let Some(sa) = &self.ctx.server_accounts {
                    sa.forget();
                }
            }
            if fx.changes_privileges {
                self.ctx.pool.privileges_changed();
            }
        }
        let f = self.st.after_text(fx, o, tracked);
        self.apply(f);
    }

    /// Keeps the connection while the client's diagnostics live on it:
    /// warnings and errors stay until a statement that uses a table (or
    /// raises new ones), so SHOW WARNINGS, GET DIAGNOSTICS and
    /// @@warning_count must run where they were left. The row count and
    /// found rows are remembered instead (`ClientState::own_counts`), so no
    /// connection is held through a client's think time for them.
    fn keep_diagnostics(&mut self, o: &Outcome, fx: &Effects) {
        let id = self.id;
        let mine = self.conn.as_ref().map(|c| c.holds_found_rows_of(id));
        let found = self.st.counts_after(o, fx, mine);
        self.hold_diagnostics(o, fx.uses_tables);
        if let Some(c) = self.conn.as_mut() {
            match found {
                FoundRowsOnConn::Mine => c.note_found_rows_of(Some(id)),
                FoundRowsOnConn::Unknown => c.note_found_rows_of(None),
                FoundRowsOnConn::Unchanged => {}
            }
        }
    }

    /// Warnings or an error hold the connection for SHOW WARNINGS; a
    /// statement that opens a table clears them (on the connection too).
    pub(super) fn hold_diagnostics(&mut self, o: &Outcome, uses_tables: bool) {
        if let Some(p) = self.st.hold_diagnostics(o, uses_tables) {
            self.ctx.metrics.pin(p);
        }
        let dirty = o.error.is_some() || o.warnings > 0;
        if let Some(c) = self.conn.as_mut() {
            c.note_diagnostics(dirty, uses_tables);
        }
    }

    /// Why a FOUND_ROWS() read is refused (`ClientState::found_rows_lost`).
    fn found_rows_lost_words(&self, why: FoundRowsLost) -> String {
        let why = match why {
            FoundRowsLost::TooBig => format!(
                "a statement that may keep the count before it ran on a server connection that \
                 held another client's, and the count ({} rows) is too big to make there again \
                 (over {})",
                self.st.last_found_rows(),
                state::RESTORE_MAX
            ),
            FoundRowsLost::NotMade => "a statement that may keep the count before it ran on a \
                 server connection that held another client's, and making the count there \
                 again failed"
                .to_string(),
            FoundRowsLost::ConnGone => "only the server connection that held it knew it, and \
                 that connection is gone (lost, or replaced to replay the transaction)"
                .to_string(),
        };
        format!(
            "sqlfleet relay: this session's FOUND_ROWS() is not known: {why}; run the SELECT \
             whose count you need again"
        )
    }

    /// After a statement that left a count or a LAST_INSERT_ID() only the
    /// server knows (`ClientState::found_rows_ask`, `insert_id_ask`):
    /// asked at once, on the same connection and in one question, so that
    /// the client's later reads are answered with them wherever they run —
    /// or left there while the client keeps the connection (its reads go
    /// there as written, and the server's status counters see no question
    /// of the relay's: mysql-test's main.status2). `after_write`'s own
    /// statements come after this, outside a transaction only, so they
    /// find nothing left to ask.
    async fn capture_counts(&mut self) -> Result<(), Fail> {
        let (found, insert) = (self.st.found_rows_ask(), self.st.insert_id_ask());
        if found == Ask::Now || insert == Ask::Now {
            return self.ask_server(found != Ask::No, insert != Ask::No).await;
        }
        if found == Ask::Later {
            let id = self.id;
            if let Some(c) = self.conn.as_mut() {
                c.note_found_rows_of(Some(id));
            }
        }
        Ok(())
    }

    /// Before the relay's own statement on the client's connection (which
    /// replaces the server's FOUND_ROWS()): a count left there for later
    /// (`Ask::Later`) is asked first. A connection kept for good
    /// is not asked (session mode does not follow the client's count).
    pub(super) async fn settle_found_rows(&mut self) -> Result<(), Fail> {
        if self.st.found_rows_ask() != Ask::No && !self.st.holds_conn_for_good() {
            self.ask_server(true, false).await?;
        }
        Ok(())
    }

    /// Asks the connection now for the client's FOUND_ROWS() (`found`)
    /// and LAST_INSERT_ID() (`insert`), and keeps them as the client's.
    pub(super) async fn ask_server(&mut self, found: bool, insert: bool) -> Result<(), Fail> {
        let Some(c) = self.conn.as_mut() else {
            return Ok(());
        };
        let question = self.st.question(found, insert);
        if found {
            self.ctx.metrics.found_rows_asked.fetch_add(1, Relaxed);
        }
        if insert {
            self.ctx.metrics.insert_id_asked.fetch_add(1, Relaxed);
        }
        let row = command::query_row(c, &question)
            .await
            .map_err(|e| Fail::Lost(e.to_string()))?;
        if question.starts_with("SET STATEMENT") {
            c.note_restores(&["optimizer_trace"]);
        }
        let get = |name: &str| -> Option<u64> {
            row.iter()
                .flatten()
                .find(|(n, _)| n == name)
                .and_then(|(_, v)| v.as_deref()?.parse().ok())
        };
        // The question's own one row is the server's count now.
        if let Some(n) = get("f").filter(|_| found) {
            self.st.note_found_rows(n);
            if n == 1 {
                c.note_found_rows_of(Some(self.id));
            }
        }
        if let Some(n) = get("i").filter(|_| insert) {
            self.st.note_insert_id(n);
            c.note_last_insert_id(n);
        }
        Ok(())
    }

    /// Before a statement that does not read the previous one's
    /// diagnostics and uses a table (which clears warnings on any
    /// connection): the connection kept for the warnings goes back and
    /// routing may choose again.
    fn drop_diagnostics_hold(&mut self, fx: &Effects) {
        if self.st.drop_diagnostics_hold(fx) {
            self.release_if_free();
        }
    }

    /// Takes in what the server said about the session after a command
    /// (`ClientState::observe`).
    fn observe(&mut self, o: &Outcome) {
        let restores = self.conn.as_ref().map(|c| c.restores()).unwrap_or_default();
        let f = self.st.observe(o, restores);
        if let Some(c) = self.conn.as_mut() {
            if f.reported_vars {
                c.restores_reported();
            }
            if f.tracking_lost {
                c.note_tracking_lost();
            } else if let Some(g) = o.changes.iter().find_map(|ch| match ch {
                Change::SysVar(n, g) if n == "last_gtid" => Some(g),
                _ => None,
            }) {
                c.note_last_gtid(g);
            }
            // This statement's own restore comes after its reply.
            c.note_restores(self.st.statement_vars());
        }
        self.apply(f);
    }
}

#[cfg(test)]
mod reply_seq_tests {
    #[test]
    fn an_answer_follows_the_command_s_last_packet() {
        for (len, seq) in [
            (1, 1),
            (0xFF_FFFE, 1),
            (0xFF_FFFF, 2),
            (0xFF_FFFF * 2 + 5, 3),
            (40 << 20, 3),
            (0xFF_FFFF * 255, 0),
        ] {
            assert_eq!(super::reply_seq(len), seq, "{len}");
        }
    }
}

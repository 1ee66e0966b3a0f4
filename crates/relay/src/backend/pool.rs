//! Backend connections, logged in ahead of need and shared between
//! clients. Each backend has at most `pool.max` connections open (in use
//! or idle); clients wait for one in a bounded queue with a timeout. A
//! connection remembers its session state (default database, settings,
//! prepared statements) so that the one closest to what a client needs is
//! chosen and only the difference is replayed.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use sqlfleet_wire::handshake::DEPRECATE_EOF;
use sqlfleet_wire::packet::WireError;

pub use crate::backend::dial::Shape;
use crate::backend::dial::{BackendAccount, Dialer};
use crate::protocol::io::AnyStream;
use crate::routing::pick;
pub use crate::routing::Route;

use crate::backend::command::{ping, simple, Link};
use tokio::sync::Notify;

use crate::admin::metrics::{BackendGauge, Metrics};
use crate::config::{Backend, PoolSettings, RelayConfig};
use crate::protocol::io::PacketIo;
use crate::protocol::sql::Setting;
use crate::protocol::stmt::BackendStmts;
use crate::protocol::track::TrackView;

/// A backend connection with what the relay knows of its session, held in
/// a box: it moves between the pool and a session on every statement of
/// transaction pooling, and as a box that is 8 bytes, not the whole
/// connection (its stream, buffers and state: the largest part of the
/// relay's user-space copying before, see docs/benchmarks.md).
pub struct BackendConn(Box<ConnParts>);

impl std::ops::Deref for BackendConn {
    type Target = ConnParts;
    fn deref(&self) -> &ConnParts {
        &self.0
    }
}

impl std::ops::DerefMut for BackendConn {
    fn deref_mut(&mut self) -> &mut ConnParts {
        &mut self.0
    }
}

/// What a [`BackendConn`] holds.
pub struct ConnParts {
    pub io: PacketIo<AnyStream>,
    pub(in crate::backend) shape: Shape,
    /// Capabilities in effect on this connection.
    pub(in crate::backend) caps: u32,
    pub(in crate::backend) db: Option<String>,
    pub(in crate::backend) settings: Vec<Setting>,
    pub(in crate::backend) stmts: BackendStmts,
    pub(in crate::backend) backend: usize,
    /// Per-user mode: the client account it is logged in as (else the
    /// relay's own). Only that account's clients get it.
    pub(in crate::backend) account: Option<Arc<BackendAccount>>,
    /// The server's thread id for this connection (for KILL QUERY).
    pub(in crate::backend) thread_id: u32,
    /// Session tracking is on: OKs report changed variables, schema, state.
    pub(in crate::backend) tracking: bool,
    /// What a tracking client's own session would report (the server's
    /// tracking settings for a new session).
    pub(in crate::backend) client_tracking: Option<Arc<TrackView>>,
    /// LAST_INSERT_ID() on this connection, as far as the relay has seen.
    pub(in crate::backend) last_insert_id: Option<u64>,
    /// The last statement on it left warnings or an error, which stay
    /// until a statement that uses a table.
    pub(in crate::backend) diagnostics_dirty: bool,
    /// The client (relay id) whose FOUND_ROWS() the server holds on it:
    /// that client's last SELECT ran here and nothing since changed the
    /// count (every statement of the relay's own forgets it:
    /// `Link::own_statement`).
    pub(in crate::backend) found_rows_of: Option<u32>,
    /// Variables a `SET STATEMENT ... FOR` on it set whose restore the
    /// server has not reported yet (`conn_state.rs`, `restores`).
    pub(in crate::backend) restores: Vec<String>,
    /// A reply showed its variable tracker lost count (`tracker.rs`): it
    /// is re-armed before the connection serves another statement.
    pub(in crate::backend) tracking_lost: bool,
    /// Its `@@last_gtid` as the relay last learned it (None: not known):
    /// a write's own GTID, asked of the server, is told from one it had.
    pub(in crate::backend) last_gtid: Option<String>,
    /// The event loop whose poller its socket is registered on.
    home: usize,
    /// The pool's global-settings epoch when this session was last reset
    /// (or opened): its session defaults are the globals of that time.
    epoch: u64,
    /// The pool's grants epoch when it logged in (see `Pool::grants`).
    grants: u64,
    created: Instant,
    idle_since: Instant,
    _slot: Slot,
    /// The account whose client holds it, counted against its share
    /// until it goes back (or away).
    held: Option<crate::backend::share::Held>,
    /// Counts it among its backend's busy connections while a client
    /// holds it, until it goes back or is dropped.
    busy: Option<Busy>,
}

impl BackendConn {
    /// Moves its socket to the calling event loop's poller: a connection
    /// used from another loop would have every reply cross threads. A TLS
    /// connection stays polled where it was opened. On an error the
    /// socket is lost (the caller drops the connection).
    pub fn come_home(&mut self) -> std::io::Result<()> {
        let here = crate::event_loops::home();
        if self.home == here {
            return Ok(());
        }
        if let Some(d) = crate::listen::detach_plain(&mut self.io.s) {
            self.io.s = d?.attach()?.into();
            self.home = here;
        }
        Ok(())
    }
}

impl Link for BackendConn {
    fn io(&mut self) -> &mut PacketIo<AnyStream> {
        &mut self.io
    }
    fn deprecate_eof(&self) -> bool {
        self.caps & DEPRECATE_EOF != 0
    }
    fn own_statement(&mut self) {
        self.found_rows_of = None;
    }
    fn session_track(&self) -> bool {
        self.caps & sqlfleet_wire::handshake::SESSION_TRACK != 0
    }
    fn state_reported(&mut self) {
        self.restores_reported();
    }
}

/// Session variables a new connection starts from its login's
/// capabilities rather than from the global, and which the server's
/// COM_RESET_CONNECTION sets to the global all the same: (the flag, the
/// variable, what a login with the flag starts it at). CLIENT_IGNORE_SPACE
/// adds IGNORE_SPACE to the global sql_mode; CLIENT_INTERACTIVE starts
/// wait_timeout at interactive_timeout. (Each one expression: the
/// assignments of one SET all read the values from before it.)
const LOGIN_STARTS: [(u32, &str, &str); 2] = [
    (
        sqlfleet_wire::handshake::IGNORE_SPACE,
        "sql_mode",
        "CONCAT(@@global.sql_mode, ',IGNORE_SPACE')",
    ),
    (
        sqlfleet_wire::handshake::INTERACTIVE,
        "wait_timeout",
        "@@global.interactive_timeout",
    ),
];

/// What brings session variable `name` back to the value a new
/// connection of capabilities `caps` starts with: its global (`DEFAULT`),
/// or what the login's capabilities started it at (`LOGIN_STARTS`).
/// Settings `DEFAULT` cannot undo (`Setting::undone_by_reset`: the
/// character set variables come from the login's collation) are undone by
/// resetting the connection instead.
pub fn undo_setting(name: &str, caps: u32) -> String {
    if let Some((_, _, expr)) = LOGIN_STARTS
        .iter()
        .find(|(flag, n, _)| *n == name && caps & flag != 0)
    {
        return format!("@@session.{name} = {expr}");
    }
    // No DEFAULT for these: a new session's value is 0.
    if name == "last_insert_id" || name == "identity" {
        return format!("@@session.{name} = 0");
    }
    format!("@@session.{name} = DEFAULT")
}

/// What a client's own COM_RESET_CONNECTION leaves that differs from a new
/// session of capabilities `caps`, as settings to replay: the server's
/// reset gives the `LOGIN_STARTS` variables the global's value.
pub fn left_by_client_reset(caps: u32) -> Vec<Setting> {
    LOGIN_STARTS
        .iter()
        .filter(|(flag, _, _)| caps & flag != 0)
        .map(|(_, name, _)| Setting {
            name: (*name).into(),
            text: format!("@@session.{name} = DEFAULT"),
        })
        .collect()
}

impl BackendConn {
    /// Forgets the session state after COM_RESET_CONNECTION.
    /// After a COM_RESET_CONNECTION (sent by the relay or forwarded for
    /// the client): the server dropped the session's variables (session
    /// tracking among them, so it is turned on again) and prepared
    /// statements; it keeps the default database.
    pub async fn after_reset(&mut self) -> Result<(), WireError> {
        self.last_insert_id = Some(0);
        self.settings.clear();
        self.stmts.clear();
        // The SET that turns tracking on again takes every pending report,
        // and starts the tracker afresh.
        self.restores.clear();
        self.tracking_lost = false;
        self.last_gtid = None;
        if self.tracking {
            let caps = self.caps;
            if !crate::backend::dial::track_sessions(self, caps).await {
                return Err(WireError::Protocol(
                    "turning session tracking back on after a reset failed".into(),
                ));
            }
        }
        Ok(())
    }

    /// Starts its variable tracker afresh when a reply showed it lost
    /// count (`tracker.rs`); the SET's reply takes every pending restore.
    pub async fn mend_tracking(&mut self) -> Result<(), WireError> {
        if !self.tracking_lost {
            return Ok(());
        }
        let set = format!("\x03SET {}", crate::backend::tracker::REARM);
        simple(self, set.as_bytes()).await?;
        self.tracking_lost = false;
        self.restores.clear();
        Ok(())
    }

    /// Resets the session on the server (COM_RESET_CONNECTION) and frees
    /// the user-level locks (GET_LOCK) the reset may leave held: the
    /// session a new connection of its shape starts with.
    pub async fn reset(&mut self) -> Result<(), WireError> {
        simple(self, &[sqlfleet_wire::command::COM_RESET_CONNECTION]).await?;
        crate::backend::command::command(
            self,
            b"\x03DO RELEASE_ALL_LOCKS()",
            crate::protocol::reply::Expect::Results { cursor: false },
        )
        .await?;
        self.after_reset().await?;
        // The server's reset gives these the global's value, not what the
        // login's capabilities started them with: the next client must
        // find the session a new connection would have.
        let starts: Vec<String> = LOGIN_STARTS
            .iter()
            .filter(|(flag, _, _)| self.shape.caps & flag != 0)
            .map(|(_, name, expr)| format!("@@session.{name} = {expr}"))
            .collect();
        if !starts.is_empty() {
            let set = format!("\x03SET {}", starts.join(", "));
            simple(self, set.as_bytes()).await?;
        }
        Ok(())
    }
}

/// Counts an open connection; dropping it frees the place and wakes a waiter.
struct Slot {
    side: Arc<Side>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.side.inner().open -= 1;
        self.side.notify.notify_one();
    }
}

/// Counts a leased connection in its backend's busy ones (the least-busy
/// pick reads them); dropping it, however the connection goes (back to
/// the pool, closed, or with a session that panicked), uncounts it. A
/// count the session decremented by hand stayed up for good when it
/// panicked holding the connection: that backend looked busy to every
/// pick after.
struct Busy(Arc<Side>);

impl Busy {
    fn new(side: &Arc<Side>) -> Busy {
        side.busy.fetch_add(1, Relaxed);
        Busy(side.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Relaxed);
    }
}

struct Inner {
    idle: Vec<BackendConn>,
    open: usize,
    /// The last shape asked for, used to keep `min` connections open.
    last_shape: Option<Shape>,
}

/// One backend's share of the pool.
struct Side {
    backend: Backend,
    inner: Mutex<Inner>,
    /// Wakes one client waiting for a connection when one comes back or
    /// a place to open one frees.
    notify: Arc<Notify>,
    /// Wakes the clients waiting at their account's share when it frees.
    /// Apart from `notify`: a client at its share that took `notify`'s
    /// one wake-up could not use it, and the connection that came back
    /// sat idle while other accounts' clients waited it out (64 clients
    /// of one account got 1040 beside 14 waiting at another's share).
    share_notify: Arc<Notify>,
    /// Connections each account's clients hold (see share.rs).
    shares: Arc<crate::backend::share::Shares>,
    waiting: AtomicUsize,
    /// Clients holding one of its connections (least outstanding work).
    busy: AtomicUsize,
    /// What a tracking client's own session reports here, and the pool
    /// epoch it was read in (see [`Pool::client_tracking`]).
    tracked: Mutex<Option<(u64, Arc<TrackView>)>>,
}

impl Side {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The error code a client gets when no backend can be reached: a
/// server-range code (ER_CONNECT_TO_FOREIGN_DATA_SOURCE), as client
/// libraries reject client-range codes (2003) inside an ERR packet.
pub const UNREACHABLE_CODE: u16 = 1429;

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("no backend connection became free within {0:?} (pool of {1} per backend is busy)")]
    Timeout(Duration, usize),
    #[error("too many clients ({0}) are already waiting for a backend connection")]
    Queue(usize),
    #[error("backend {0}: {1}")]
    Connect(String, WireError),
    /// The account's clients held their share of the pool for the whole
    /// wait (see share.rs).
    #[error("User '{0}' already has {1} active backend connections through the relay, its share of the pool ([pool] max_per_account): no connection of its own came back within {2:?}")]
    Share(String, usize, Duration),
    /// Per-user mode: the server refused the client's own account (its
    /// code and words go to that client; the backend is not down).
    #[error("{1}")]
    Denied(u16, String),
}

impl LeaseError {
    /// The MySQL error code a client gets.
    pub fn code(&self) -> u16 {
        match self {
            LeaseError::Timeout(..) | LeaseError::Queue(..) => 1040,
            // The server's answer when full (drivers expect it; the
            // relay's log names the account).
            LeaseError::Share(..) => 1040,
            LeaseError::Connect(..) => UNREACHABLE_CODE,
            LeaseError::Denied(code, _) => *code,
        }
    }
}

/// Login refusals caused by the shape a client's login asked for, not by
/// the relay's account or the backend: 1231 (a character set a client
/// cannot use) and 1115 (an unknown one).
const CLIENT_SHAPE_REFUSALS: [u16; 2] = [1231, 1115];

/// The server's refusal of a login (1045 Access denied ...) as (code, text).
fn login_refusal(e: &WireError) -> Option<(u16, String)> {
    match e {
        WireError::Server { code, message, .. } => Some((*code, message.clone())),
        _ => None,
    }
}

pub struct Pool {
    cfg: Arc<RelayConfig>,
    /// Bumped when a client sets a global variable.
    epoch: std::sync::atomic::AtomicU64,
    /// Bumped when a client changes accounts or privileges (GRANT, REVOKE,
    /// CREATE/ALTER/DROP USER, roles): a server session keeps the database
    /// privileges it read at login, so a pooled one from before must not
    /// serve a new client.
    grants: std::sync::atomic::AtomicU64,
    turn: AtomicUsize,
    /// A Galera cluster's writer (`usize::MAX`: none yet).
    writer: AtomicUsize,
    /// The distinct replica group names, in backend order; each
    /// backend's group (index into them) and weight, for `routing::pick`.
    group_names: Vec<String>,
    groups: Vec<Option<usize>>,
    weights: Vec<u32>,
    pub health: Arc<crate::backend::health::Health>,
    dialer: Dialer,
    settings: RwLock<PoolSettings>,
    sides: Vec<Arc<Side>>,
    pub metrics: Arc<Metrics>,
    /// Accounts dropped through the relay: their connections are not kept
    /// idle (until the name logs in again, made anew).
    dropped: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// What a client needs of a backend connection.
pub struct Want<'a> {
    /// The client's login name: its account's share is counted by it.
    pub user: &'a Arc<str>,
    pub shape: Shape,
    pub account: Option<&'a Arc<BackendAccount>>,
    pub db: &'a Option<String>,
    pub settings: &'a [Setting],
}

/// How well an idle connection fits what a client needs: same database
/// and settings best, then same database, then another database; among
/// equals, one of the event loop the client runs on (its socket is on
/// that loop's poller). [`BEST_FIT`] is the best.
fn fit(c: &BackendConn, w: &Want) -> Option<u8> {
    let (shape, db, settings) = (w.shape, w.db, w.settings);
    if c.shape != shape || c.account.as_deref() != w.account.map(|a| &**a) {
        return None;
    }
    let f = match (&c.db, db) {
        (a, b) if a == b => Some(if c.settings == settings { 3 } else { 2 }),
        (Some(_), Some(_)) => Some(1),
        _ => None, // a default database cannot be unset
    }?;
    Some(f * 2 + u8::from(c.home == crate::event_loops::home()))
}

const BEST_FIT: u8 = 7;

impl Pool {
    /// A client set a global variable: connections whose session defaults
    /// predate it are reset (to the new globals) before their next client.
    pub fn globals_changed(&self) {
        self.epoch.fetch_add(1, Relaxed);
    }

    /// A client changed accounts or privileges: server sessions logged in
    /// before serve no new client (a new session reads the privileges
    /// anew, as a direct client's new connection would).
    pub fn privileges_changed(&self) {
        self.grants.fetch_add(1, Relaxed);
    }

    /// How many times a client has set a global through the relay.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Relaxed)
    }

    /// How many times a client has changed accounts or privileges through
    /// the relay.
    pub fn grants_epoch(&self) -> u64 {
        self.grants.load(Relaxed)
    }

    /// The dial path every backend connection uses.
    /// A client dropped the account `user`: its idle server connections
    /// are closed (a dropped account's sessions would linger otherwise,
    /// counted on the server and of no use to anyone), and those its
    /// clients still hold are closed when they come back.
    pub fn forget_account(&self, user: &str) {
        self.dropped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(user.to_string());
        for side in &self.sides {
            let gone: Vec<BackendConn> = {
                let mut inner = side.inner();
                let (gone, keep) = std::mem::take(&mut inner.idle)
                    .into_iter()
                    .partition(|c| c.account.as_ref().is_some_and(|a| a.user == user));
                inner.idle = keep;
                gone
            };
            drop(gone);
        }
    }

    fn is_dropped(&self, c: &BackendConn) -> bool {
        c.account.as_ref().is_some_and(|a| {
            self.dropped
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&a.user)
        })
    }

    pub fn dialer(&self) -> &Dialer {
        &self.dialer
    }

    pub fn new(cfg: Arc<RelayConfig>, metrics: Arc<Metrics>, dialer: Dialer) -> Arc<Pool> {
        let sides = cfg
            .backends
            .iter()
            .map(|b| {
                Arc::new(Side {
                    backend: b.clone(),
                    inner: Mutex::new(Inner {
                        idle: Vec::new(),
                        open: 0,
                        last_shape: None,
                    }),
                    notify: Arc::new(Notify::new()),
                    share_notify: Arc::new(Notify::new()),
                    shares: Default::default(),
                    waiting: AtomicUsize::new(0),
                    busy: AtomicUsize::new(0),
                    tracked: Mutex::new(None),
                })
            })
            .collect();
        let mut group_names: Vec<String> = Vec::new();
        for g in cfg.backends.iter().filter_map(|b| b.group.as_ref()) {
            if !group_names.contains(g) {
                group_names.push(g.clone());
            }
        }
        let groups = cfg
            .backends
            .iter()
            .map(|b| {
                b.group
                    .as_ref()
                    .and_then(|g| group_names.iter().position(|n| n == g))
            })
            .collect();
        let weights = cfg.backends.iter().map(|b| b.weight).collect();
        Arc::new(Pool {
            group_names,
            groups,
            weights,
            turn: AtomicUsize::new(0),
            writer: AtomicUsize::new(usize::MAX),
            epoch: std::sync::atomic::AtomicU64::new(0),
            grants: std::sync::atomic::AtomicU64::new(0),
            dropped: Default::default(),
            health: Arc::new(crate::backend::health::Health::new(
                cfg.backends.iter().map(|b| b.addr()).collect(),
            )),
            dialer,
            settings: RwLock::new(cfg.dynamic.pool.clone()),
            cfg,
            sides,
            metrics,
        })
    }

    pub fn settings(&self) -> PoolSettings {
        self.settings
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// New sizes and timeouts; connections over a lower max close as they
    /// come back.
    pub fn reconfigure(&self, s: PoolSettings) {
        *self.settings.write().unwrap_or_else(|e| e.into_inner()) = s;
        for side in &self.sides {
            side.notify.notify_waiters();
            side.share_notify.notify_waiters();
        }
    }

    /// The backend for a statement: the least busy of those its route may
    /// use (`routing::pick` decides both from the health states).
    pub fn pick(&self, route: Route) -> Option<usize> {
        // One backend: `Any` gets it whatever its state (as below), with
        // no per-statement look at the health states.
        if self.sides.len() == 1 && route == Route::Any {
            return Some(0);
        }
        let states = self.health.briefs();
        let writer = self.galera_writer(&states);
        let cands = pick::candidates(route, &states, &self.groups, &self.policy(), writer);
        let turn = self.turn.fetch_add(1, Relaxed) as u64;
        let busy = |i: usize| self.sides.get(i).map_or(0, |s| s.busy.load(Relaxed));
        pick::least_busy(&cands, busy, &self.weights, turn)
    }

    fn policy(&self) -> pick::Policy {
        let r = &self.cfg.routing;
        pick::Policy {
            max_lag: r.max_lag.as_secs(),
            multi_primary: r.multi_primary,
            galera_writers: r.galera_writers,
            galera_max_recv_queue: r.galera_max_recv_queue,
        }
    }

    /// The Galera writer now: kept while it may take traffic, else moved
    /// (and the move logged once).
    fn galera_writer(&self, states: &[pick::Brief]) -> Option<usize> {
        let cur = self.writer.load(Relaxed);
        let w = pick::galera_writer((cur != usize::MAX).then_some(cur), states)?;
        let new = w.unwrap_or(usize::MAX);
        if new != cur {
            self.health.note_galera_writer(w);
        }
        if new != cur
            && self
                .writer
                .compare_exchange(cur, new, Relaxed, Relaxed)
                .is_ok()
        {
            let name = |i: usize| {
                self.sides
                    .get(i)
                    .map_or_else(|| "none".to_string(), |s| s.backend.addr())
            };
            sqlfleet_faults::point!("relay::writer_switched");
            crate::admin::log::galera_writer(&name(cur), &name(new));
        }
        w
    }

    /// The writable backends' addresses when more than one is writable,
    /// not a Galera cluster, and `multi_primary` is off: writes are
    /// refused then.
    pub fn several_primaries(&self) -> Option<Vec<String>> {
        self.writable_of(self.policy())
    }

    /// The writable backends' addresses when more than one is writable and
    /// not a Galera cluster, whatever `multi_primary` allows (the result
    /// cache's binlog follower cannot follow one log for all of them).
    pub fn several_writable(&self) -> Option<Vec<String>> {
        self.writable_of(pick::Policy {
            multi_primary: false,
            ..self.policy()
        })
    }

    fn writable_of(&self, policy: pick::Policy) -> Option<Vec<String>> {
        let w = pick::several_primaries(&self.health.briefs(), &policy)?;
        Some(w.iter().map(|&i| self.sides[i].backend.addr()).collect())
    }

    /// True when the backends are a Galera cluster's nodes.
    pub fn is_galera(&self) -> bool {
        pick::galera_usable(&self.health.briefs()).is_some()
    }

    /// The distinct replica group names, in backend order.
    pub fn group_names(&self) -> &[String] {
        &self.group_names
    }

    pub fn gauges(&self) -> Vec<BackendGauge> {
        let writer = self.galera_writer(&self.health.briefs());
        self.sides
            .iter()
            .enumerate()
            .map(|(n, s)| {
                let i = s.inner();
                let h = self.health.get(n);
                BackendGauge {
                    busy: s.busy.load(Relaxed),
                    addr: s.backend.addr(),
                    socket: s.backend.socket_addr(),
                    open: i.open,
                    idle: i.idle.len(),
                    waiting: s.waiting.load(Relaxed),
                    up: h.checked && h.up,
                    role: match h.role() {
                        _ if !h.checked => "down",
                        "member" if writer == Some(n) => "writer",
                        "member" => "reader",
                        r => r,
                    },
                    lag: h.lag,
                    settings_differ: h.reads_unlike_primary.is_some(),
                    filtered: h.replication_filters.is_some(),
                }
            })
            .collect()
    }

    /// A connection for a client: the idle one that fits best, else a new
    /// one, else wait. Idle connections unused for a while are pinged
    /// first.
    pub async fn lease(&self, backend: usize, want: Want<'_>) -> Result<BackendConn, LeaseError> {
        let side = &self.sides[backend];
        let s = self.settings();
        let t0 = Instant::now();
        // The time of the last look at the idle list (the start, or the end
        // of a wait): how long a connection found there has been idle.
        let mut clock = t0;
        let deadline = t0 + s.wait_timeout;
        let mut waiting = WaitGuard {
            n: &side.waiting,
            counted: false,
        };
        let share = crate::backend::share::share(s.max, s.max_per_account);
        let mut at_share;
        // Woken by `notify` (a connection came back, a place freed).
        let mut woken = false;
        let mut result = loop {
            let held = side.shares.try_take(want.user, share, &side.share_notify);
            at_share = held.is_none();
            if at_share && std::mem::take(&mut woken) {
                // Woken for a connection this client may not take now
                // (its account reached its share meanwhile): the wake-up
                // goes on to the next client waiting for one.
                side.notify.notify_one();
            }
            let next = if at_share {
                Next::Wait
            } else {
                pick_idle(side, &want, s.max)
            };
            match next {
                Next::Again => continue,
                Next::Use(mut c) => {
                    if !self.ready(backend, &mut c, clock, &s).await {
                        continue;
                    }
                    c.held = held;
                    break Ok(c);
                }
                Next::Open(slot) => {
                    break self
                        .open(backend, want.shape, want.account, slot)
                        .await
                        .map(|mut c| {
                            c.held = held;
                            c
                        })
                }
                Next::Wait => {
                    if !waiting.counted {
                        waiting.counted = true;
                        if side.waiting.fetch_add(1, Relaxed) >= s.max_waiters {
                            self.metrics.lease_rejected.fetch_add(1, Relaxed);
                            crate::admin::log::pool_exhausted(
                                &side.backend.addr(),
                                &format!("{} clients already waiting", s.max_waiters),
                            );
                            break Err(LeaseError::Queue(s.max_waiters));
                        }
                    }
                    let notify = if at_share {
                        &side.share_notify
                    } else {
                        &side.notify
                    };
                    let notified = notify.notified();
                    tokio::pin!(notified);
                    // A client waiting at its account's share is woken by
                    // `notify_waiters`, which keeps no permit: registered
                    // first, then the share looked at again, so a release
                    // in between is not missed.
                    notified.as_mut().enable();
                    if at_share
                        && crate::backend::share::may_lease(side.shares.held(want.user), share)
                    {
                        continue;
                    }
                    let now = Instant::now();
                    if now >= deadline
                        || tokio::time::timeout(deadline - now, notified)
                            .await
                            .is_err()
                    {
                        break Err(self.lease_timed_out(side, at_share, want.user, share, &s));
                    }
                    woken = !at_share;
                    clock = Instant::now();
                }
            }
        };
        drop(waiting);
        self.metrics.wait(t0.elapsed());
        if let Ok(c) = &mut result {
            c.busy = Some(Busy::new(side));
            // Leased: a connection is the client's; nothing sent yet.
            sqlfleet_faults::point!("relay::leased");
        }
        result
    }

    /// An idle connection found for a client made ready for it: false
    /// when it cannot serve (logged in before privileges changed, dead on
    /// a ping after `check_after` idle, a failed reset after the globals
    /// changed); it is closed then and the lease looks again. (By
    /// reference: a connection moved in and out of this future costs two
    /// copies of it on every lease.)
    async fn ready(
        &self,
        backend: usize,
        c: &mut BackendConn,
        clock: Instant,
        s: &PoolSettings,
    ) -> bool {
        if c.grants < self.grants.load(Relaxed) {
            return false;
        }
        if clock.saturating_duration_since(c.idle_since) >= s.check_after && ping(c).await.is_err()
        {
            return false;
        }
        let epoch = self.epoch.load(Relaxed);
        if c.epoch < epoch {
            // Its session defaults are globals since changed.
            self.metrics.resets.fetch_add(1, Relaxed);
            if c.reset().await.is_err() {
                return false;
            }
            c.epoch = epoch;
            if c.tracking {
                c.client_tracking = self.client_tracking(backend, c).await;
            }
        }
        if c.come_home().is_err() {
            return false;
        }
        if let Some(m) = self.metrics.backend(backend) {
            m.reuses.fetch_add(1, Relaxed);
        }
        true
    }

    /// No connection within `wait_timeout`: counted, logged, and the error
    /// that says whose limit it was (the account's share or the pool's).
    fn lease_timed_out(
        &self,
        side: &Side,
        at_share: bool,
        user: &str,
        share: usize,
        s: &PoolSettings,
    ) -> LeaseError {
        self.metrics.lease_timeouts.fetch_add(1, Relaxed);
        if at_share {
            crate::admin::log::pool_exhausted(
                &side.backend.addr(),
                &format!(
                    "account '{user}' held its share ({share}) for {:?}",
                    s.wait_timeout
                ),
            );
            return LeaseError::Share(user.to_string(), share, s.wait_timeout);
        }
        crate::admin::log::pool_exhausted(
            &side.backend.addr(),
            &format!(
                "no connection free within {:?} (pool max {})",
                s.wait_timeout, s.max
            ),
        );
        LeaseError::Timeout(s.wait_timeout, s.max)
    }

    /// What a tracking client's own session reports on `backend`: the
    /// server's session_track_* globals, read on `l` once per pool epoch
    /// (a global set through the relay starts a new one).
    async fn client_tracking(&self, backend: usize, l: &mut impl Link) -> Option<Arc<TrackView>> {
        let epoch = self.epoch.load(Relaxed);
        let side = &self.sides[backend];
        let cached = side
            .tracked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|(e, _)| *e == epoch)
            .map(|(_, v)| v.clone());
        if cached.is_some() {
            return cached;
        }
        let v = crate::backend::dial::client_tracking(l).await?;
        *side.tracked.lock().unwrap_or_else(|e| e.into_inner()) = Some((epoch, v.clone()));
        Some(v)
    }

    async fn open(
        &self,
        backend: usize,
        shape: Shape,
        account: Option<&Arc<BackendAccount>>,
        slot: Slot,
    ) -> Result<BackendConn, LeaseError> {
        let b = &self.cfg.backends[backend];
        match self.dialer.login(b, shape, account.map(|a| &**a)).await {
            Ok(mut l) => {
                if let Some(a) = account {
                    // Logged in: the account exists (again).
                    self.dropped
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&a.user);
                }
                self.metrics.backend_connects.fetch_add(1, Relaxed);
                if let Some(m) = self.metrics.backend(backend) {
                    m.connects.fetch_add(1, Relaxed);
                }
                let caps = l.caps;
                let client_tracking = match caps & sqlfleet_wire::handshake::SESSION_TRACK {
                    0 => None,
                    _ => self.client_tracking(backend, &mut l).await,
                };
                let tracking = crate::backend::dial::track_sessions(&mut l, caps).await;
                let now = Instant::now();
                Ok(BackendConn(Box::new(ConnParts {
                    thread_id: l.hello.connection_id,
                    last_insert_id: Some(0),
                    diagnostics_dirty: false,
                    found_rows_of: None,
                    restores: Vec::new(),
                    tracking_lost: false,
                    // A new session's is ''.
                    last_gtid: Some(String::new()),
                    home: crate::event_loops::home(),
                    epoch: self.epoch.load(Relaxed),
                    grants: self.grants.load(Relaxed),
                    tracking,
                    client_tracking,
                    io: l.io,
                    shape,
                    caps: l.caps,
                    db: None,
                    settings: Vec::new(),
                    stmts: BackendStmts::default(),
                    backend,
                    account: account.cloned(),
                    created: now,
                    idle_since: now,
                    _slot: slot,
                    held: None,
                    busy: None,
                })))
            }
            Err(e) => {
                self.metrics.backend_connect_errors.fetch_add(1, Relaxed);
                // The server answered the client's own account, or what
                // the client's login asked for (its character set), with
                // an error: that client is refused, the backend is fine —
                // one client must not make it look down to the others.
                if let Some((code, msg)) = login_refusal(&e) {
                    if account.is_some() || CLIENT_SHAPE_REFUSALS.contains(&code) {
                        return Err(LeaseError::Denied(code, msg));
                    }
                }
                Err(LeaseError::Connect(b.addr(), e))
            }
        }
    }

    /// A connection whose session state is known goes back to the pool.
    pub fn put(&self, mut c: BackendConn) {
        c.busy = None;
        self.make_idle(c);
    }

    /// Keeps `c` for the next client unless the pool shrank or it is old.
    fn make_idle(&self, mut c: BackendConn) {
        // No client holds it now: its account's share is free again once
        // it is idle (dropped at the end, so a waiter it wakes finds it).
        let _held = c.held.take();
        let side = &self.sides[c.backend];
        let s = self.settings();
        let now = Instant::now();
        c.idle_since = now;
        let mut inner = side.inner();
        if inner.open > s.max
            || now.duration_since(c.created) >= s.max_lifetime
            || self.is_dropped(&c)
        {
            drop(inner);
            drop(c);
            return;
        }
        inner.idle.push(c);
        drop(inner);
        side.notify.notify_one();
    }

    /// A connection to `backend` was found dead: the idle ones are pinged
    /// before their next use (a server that died or restarted left them
    /// all dead, and each would cost a client its statement).
    pub fn doubt(&self, backend: usize) {
        let Some(side) = self.sides.get(backend) else {
            return;
        };
        let s = self.settings();
        let mut inner = side.inner();
        for c in inner.idle.iter_mut() {
            if let Some(t) = c.idle_since.checked_sub(s.check_after) {
                c.idle_since = t;
            }
        }
    }

    /// A connection in an unknown state is closed.
    pub fn discard(&self, c: BackendConn) {
        drop(c);
    }

    /// Resets a connection off the client's path and returns it to the pool.
    pub fn reset_and_put(self: &Arc<Self>, c: BackendConn) {
        let pool = self.clone();
        tokio::spawn(async move { pool.reset_then_put(c).await });
    }

    /// Resets a connection and returns it to the pool, done when it is:
    /// what the session held on the server (named locks, table locks) is
    /// free once this returns.
    pub async fn reset_then_put(&self, mut c: BackendConn) {
        self.metrics.resets.fetch_add(1, Relaxed);
        let epoch = self.epoch.load(Relaxed);
        if c.reset().await.is_ok() {
            c.epoch = epoch;
            self.put(c);
        } else {
            self.discard(c);
        }
    }

    /// Closes idle connections past their idle timeout or lifetime and
    /// opens connections up to `min`. Runs every second until dropped.
    pub async fn maintain(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            sqlfleet_faults::point!("relay::maintain");
            let s = self.settings();
            for (b, side) in self.sides.iter().enumerate() {
                let (old, want) = {
                    let mut inner = side.inner();
                    let mut old = Vec::new();
                    let mut i = 0;
                    while i < inner.idle.len() {
                        let c = &inner.idle[i];
                        let expired = c.created.elapsed() >= s.max_lifetime
                            || (c.idle_since.elapsed() >= s.idle_timeout
                                && inner.open - old.len() > s.min);
                        if expired {
                            old.push(inner.idle.swap_remove(i));
                        } else {
                            i += 1;
                        }
                    }
                    let open_after = inner.open - old.len();
                    let want = match inner.last_shape {
                        Some(shape) if open_after < s.min => {
                            inner.open += s.min - open_after;
                            Some((shape, s.min - open_after))
                        }
                        _ => None,
                    };
                    (old, want)
                };
                drop(old);
                if let Some((shape, n)) = want {
                    for _ in 0..n {
                        let slot = Slot { side: side.clone() };
                        // Kept open as the relay's own account (per-user
                        // mode pools open as clients arrive).
                        if let Ok(c) = self.open(b, shape, None, slot).await {
                            self.make_idle(c);
                        }
                    }
                }
            }
        }
    }
}

/// What a lease does next. Not boxed: a lease per statement would cost
/// an allocation.
#[allow(clippy::large_enum_variant)]
enum Next {
    Use(BackendConn),
    Open(Slot),
    Wait,
    /// An idle connection that fitted nobody was closed: look again.
    Again,
}

/// The idle connection that fits `want` best, else a place for a new one
/// (below `max`), else the oldest idle one closed (a full pool of
/// connections that do not fit), else a wait.
fn pick_idle(side: &Arc<Side>, want: &Want<'_>, max: usize) -> Next {
    let mut inner = side.inner();
    inner.last_shape = Some(want.shape);
    // The most recently returned connection usually fits exactly.
    let last = inner.idle.len().checked_sub(1);
    let best = match last {
        Some(i) if fit(&inner.idle[i], want) == Some(BEST_FIT) => Some((BEST_FIT, i)),
        _ => inner
            .idle
            .iter()
            .enumerate()
            .filter_map(|(i, c)| fit(c, want).map(|f| (f, i)))
            .max(),
    };
    if let Some((_, i)) = best {
        Next::Use(inner.idle.swap_remove(i))
    } else if inner.open < max {
        inner.open += 1;
        Next::Open(Slot { side: side.clone() })
    } else if !inner.idle.is_empty() {
        let old = inner.idle.remove(0);
        drop(inner);
        drop(old);
        Next::Again
    } else {
        Next::Wait
    }
}

/// Counts a client in the wait queue; leaves it when dropped.
struct WaitGuard<'a> {
    n: &'a AtomicUsize,
    counted: bool,
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        if self.counted {
            self.n.fetch_sub(1, Relaxed);
        }
    }
}

#[cfg(test)]
mod login_start_tests {
    use super::*;
    use sqlfleet_wire::handshake::{IGNORE_SPACE, INTERACTIVE};

    /// What undoes a variable, and what a client's own reset leaves, for
    /// each capability that starts a variable away from its global.
    #[test]
    fn variables_a_login_starts_away_from_the_global() {
        let rows: &[(&str, u32, &str)] = &[
            ("sql_mode", 0, "@@session.sql_mode = DEFAULT"),
            (
                "sql_mode",
                IGNORE_SPACE,
                "@@session.sql_mode = CONCAT(@@global.sql_mode, ',IGNORE_SPACE')",
            ),
            ("wait_timeout", 0, "@@session.wait_timeout = DEFAULT"),
            (
                "wait_timeout",
                IGNORE_SPACE,
                "@@session.wait_timeout = DEFAULT",
            ),
            (
                "wait_timeout",
                INTERACTIVE,
                "@@session.wait_timeout = @@global.interactive_timeout",
            ),
            (
                "interactive_timeout",
                INTERACTIVE,
                "@@session.interactive_timeout = DEFAULT",
            ),
            (
                "last_insert_id",
                INTERACTIVE,
                "@@session.last_insert_id = 0",
            ),
        ];
        for (name, caps, want) in rows {
            assert_eq!(undo_setting(name, *caps), *want, "{name} {caps:#x}");
        }
        let left = |caps| -> Vec<String> {
            left_by_client_reset(caps)
                .into_iter()
                .map(|s| s.text)
                .collect()
        };
        assert!(left(0).is_empty());
        assert_eq!(
            left(IGNORE_SPACE | INTERACTIVE),
            [
                "@@session.sql_mode = DEFAULT",
                "@@session.wait_timeout = DEFAULT"
            ]
        );
    }
}

//! A relay as a whole: built from its configuration (pool, accounts,
//! lookups, metrics), serving accepted clients on the event loops, reloaded
//! on SIGHUP, drained on stop.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures_util::FutureExt;
use tokio::net::TcpListener;

use crate::backend::pool::Pool;
use crate::config::RelayConfig;
use crate::frontend::ctx::Ctx;
use crate::listen::{self, accept_loop, Accepted, Listener};
use crate::start_error::StartError;
use crate::supervise::supervise;
use crate::{admin, backend, event_loops, frontend, routing, status, tls};

/// A running relay's shared state.
pub struct Relay {
    /// See [`Relay::accounts`].
    accounts: AccountsNote,
    ctx: Arc<Ctx>,
}

impl Relay {
    /// Waits until each backend's first health check has ended (at most
    /// a check's own limit): a client's session then starts as the
    /// backends' do, its dialect and autocommit known, instead of the
    /// careful guesses of a relay that knows nothing yet. Clients that
    /// connect meanwhile wait in the listen queue.
    async fn first_checks(&self) {
        let until = tokio::time::Instant::now()
            + backend::health::CHECK_TIMEOUT
            + std::time::Duration::from_millis(100);
        while !self.ctx.pool.health.all_checked() && tokio::time::Instant::now() < until {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    pub async fn new(cfg: RelayConfig) -> Result<Relay, StartError> {
        let tls = match &cfg.tls {
            Some(t) => Some(Arc::new(
                tls::tls_acceptor(&t.cert, &t.key).map_err(StartError::ClientTls)?,
            )),
            None => None,
        };
        let dialer = backend::dial::Dialer::new(&cfg).map_err(StartError::BackendTls)?;
        // The greeting is the backend's: its exact version string (with
        // MariaDB's "5.5.5-" prefix, which drivers read for features) and
        // collation. The relay names itself on /status, not there.
        let hello = match cfg.backends.first() {
            Some(b) => dialer.hello(b).await.ok(),
            None => None,
        };
        if hello.is_none() {
            tracing::warn!(
                "relay: no backend answered at start; clients are greeted with a stand-in version (5.5.5-10.11.0-MariaDB) and no MariaDB extensions until one answers (asked every second)"
            );
        }
        let greeting = frontend::auth::Greeting::of(
            hello.as_ref(),
            tls,
            cfg.tls.as_ref().is_some_and(|t| t.require),
        );
        let metrics = Arc::new(admin::metrics::Metrics::new(cfg.backends.len()));
        let cfg = Arc::new(cfg);
        let pool = Pool::new(cfg.clone(), metrics.clone(), dialer.clone());
        let server_accounts = cfg.per_user_accounts.then(|| {
            backend::accounts::ServerAccounts::new(
                dialer.clone(),
                cfg.backends.clone(),
                pool.health.clone(),
                metrics.clone(),
            )
        });
        // One lookup connection for the tables' and the views' questions.
        let side = Arc::new(backend::side::SideConn::new(
            dialer,
            cfg.backends.clone(),
            pool.health.clone(),
            metrics.clone(),
        ));
        let accounts = accounts_note(&cfg, &side).await;
        let write_effects = backend::write_effects::WriteEffects::new(side.clone());
        let write_scopes = backend::write_scope::WriteScopes::new(side.clone());
        let view_calls = backend::view_calls::ViewCalls::new(side);
        let max_clients = cfg.client_limit(open_file_limit());
        let cfg_cache = cfg.dynamic.cache.clone();
        Ok(Relay {
            accounts,
            ctx: Arc::new(Ctx {
                users: RwLock::new(Arc::new(cfg.dynamic.users.clone())),
                rules: RwLock::new(Arc::new(routing::rules::RuleSet::new(
                    cfg.dynamic.rules.clone(),
                ))),
                digests: routing::rules::Digests::new(cfg.metrics.is_some(), 1000),
                cfg,
                pool,
                greeting: RwLock::new(Arc::new(greeting)),
                metrics,
                clients: Default::default(),
                answers: Default::default(),
                server_accounts,
                write_effects,
                write_scopes,
                view_calls,
                trace: frontend::trace::Trace::from_env(),
                replays: Default::default(),
                max_clients,
                throttle: Default::default(),
                cache: crate::cache::Cache::new(cfg_cache),
            }),
        })
    }

    /// Whose account and privileges clients get on the server, for the
    /// start-up log; `Err` for the shared account, which an operator must
    /// have chosen knowingly (it names the privileges every client gets).
    pub fn accounts(&self) -> &AccountsNote {
        &self.accounts
    }

    /// Clients allowed at once (relay.max_clients, or its default); more
    /// get ERROR 1040 at the handshake.
    pub fn max_clients(&self) -> usize {
        self.ctx.max_clients
    }

    /// Applies what SIGHUP reloads (accounts and pool settings); returns
    /// what changed that needs a restart.
    pub fn reload(&self, new: &RelayConfig) -> Vec<String> {
        *self.ctx.users.write().unwrap_or_else(|e| e.into_inner()) =
            Arc::new(new.dynamic.users.clone());
        self.ctx.pool.reconfigure(new.dynamic.pool.clone());
        self.ctx.answers.clear();
        *self.ctx.rules.write().unwrap_or_else(|e| e.into_inner()) =
            Arc::new(routing::rules::RuleSet::new(new.dynamic.rules.clone()));
        self.ctx.cache.reconfigure(new.dynamic.cache.clone());
        let old = &self.ctx.cfg;
        let mut ignored = Vec::new();
        if old.listen != new.listen {
            ignored.push("relay.listen".to_string());
        }
        if old.backends != new.backends || old.backend_user != new.backend_user {
            ignored.push("backend".to_string());
        }
        if old.mode != new.mode {
            ignored.push("relay.mode".to_string());
        }
        if old.tls != new.tls {
            ignored.push("tls".to_string());
        }
        if old.routing != new.routing {
            ignored.push("routing".to_string());
        }
        // (the binlog follower runs with the settings it started with)
        if old.dynamic.cache.follow != new.dynamic.cache.follow {
            ignored.push("cache.binlog, cache.max_lag, cache.server_id".to_string());
        }
        ignored
    }

    pub fn metrics_text(&self) -> String {
        let mut o = self.ctx.metrics.render(&self.ctx.pool.gauges());
        self.ctx.cache.render(&mut o);
        o
    }

    pub fn metrics(&self) -> &admin::metrics::Metrics {
        &self.ctx.metrics
    }

    /// Client `id`'s command record, when `SQLFLEET_RELAY_TRACE` was set
    /// at start (see [`frontend::trace`]).
    pub fn trace(&self, id: u32) -> Vec<String> {
        self.ctx.trace.of(id)
    }

    /// The admin status as JSON (see [`admin::status`]).
    pub fn status_json(&self) -> String {
        status::render(&self.ctx)
    }

    /// Serves `GET /metrics` (Prometheus) and `GET /status` (JSON) on
    /// `listener` until the relay stops.
    pub fn serve_metrics(self: &Arc<Self>, listener: TcpListener) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(admin::http::serve_http(
            listener,
            Arc::new(move |path: &str| match path {
                "/metrics" => Some(("text/plain; version=0.0.4", me.metrics_text())),
                "/status" => Some(("application/json", me.status_json())),
                _ => None,
            }),
            self.ctx.cfg.metrics_token.clone(),
        ))
    }

    /// Accepts clients until `shutdown` resolves; then stops accepting and
    /// gives running sessions up to `drain` to finish.
    pub async fn serve(
        &self,
        listeners: Vec<Listener>,
        shutdown: impl std::future::Future<Output = ()>,
        drain: Duration,
    ) {
        // Client ids start far above any server thread id, so that KILL of
        // a relay id and KILL of a CONNECTION_ID() can never be confused.
        let ids = Arc::new(AtomicU32::new(frontend::clients::FIRST_ID));
        let ctx = self.ctx.clone();
        let maintain = tokio::spawn(async move {
            let upkeep = || ctx.pool.clone().maintain();
            supervise("the pool's upkeep", &ctx.metrics, upkeep).await
        });
        if self.ctx.greeting().stand_in {
            let ctx = self.ctx.clone();
            tokio::spawn(async move {
                let learn = || ctx.clone().learn_greeting(ctx.pool.dialer().clone());
                supervise("learning the server's greeting", &ctx.metrics, learn).await
            });
        }
        let watchers: Vec<_> = (0..self.ctx.cfg.backends.len())
            .map(|i| {
                tokio::spawn(backend::health::watch(
                    self.ctx.cfg.clone(),
                    self.ctx.pool.dialer().clone(),
                    self.ctx.pool.health.clone(),
                    i,
                ))
            })
            .collect();
        self.first_checks().await;
        let follower = self.ctx.cfg.dynamic.cache.follow.clone().map(|f| {
            let ctx = self.ctx.clone();
            tokio::spawn(async move {
                let follow = || follow_binlog(ctx.clone(), f.clone());
                supervise("the result cache's binlog follower", &ctx.metrics, follow).await
            })
        });
        let loops = event_loops::EventLoops::start(self.ctx.cfg.threads);
        let _ = self.ctx.metrics.loops.set(loops.placement().clone());
        let sessions = Arc::new(std::sync::Mutex::new(tokio::task::JoinSet::new()));
        let mut acceptors = Vec::new();
        for l in listeners {
            let starter = Starter {
                ctx: self.ctx.clone(),
                ids: ids.clone(),
                placement: loops.placement().clone(),
                sessions: sessions.clone(),
            };
            acceptors.push(tokio::spawn(accept_loop(l, move |c| starter.start(c))));
        }
        shutdown.await;
        // Stop accepting; awaiting the aborted tasks drops the listeners
        // (and removes Unix socket files) before the process exits.
        for a in &acceptors {
            a.abort();
        }
        for a in acceptors {
            let _ = a.await;
        }
        // No session starts any more: the ones running get the drain time,
        // and what is left then is aborted with the set.
        let mut sessions = std::mem::take(&mut *lock(&sessions));
        let _ = tokio::time::timeout(drain, async {
            while sessions.join_next().await.is_some() {}
        })
        .await;
        maintain.abort();
        for w in watchers {
            w.abort();
        }
        if let Some(f) = follower {
            f.abort();
        }
    }
}

/// The result cache's binlog follower (`cache/follower.rs`), wired to
/// the relay: the backend writes go to, reached as the relay's account.
async fn follow_binlog(ctx: Arc<Ctx>, settings: crate::cache::FollowSettings) {
    let server_id = settings
        .server_id
        .unwrap_or_else(|| crate::cache::follower::default_server_id(&ctx.cfg.listen));
    if ctx.cache.active() {
        tracing::info!(
            "relay: the result cache follows the primary's binary log as replica id {server_id} (the relay's account needs REPLICATION SLAVE and BINLOG MONITOR); it gives entries only while caught up within {:.2}s, else it is bypassed",
            settings.max_lag.as_secs_f64()
        );
    }
    let wiring = crate::cache::follower::Wiring {
        cache: &ctx.cache,
        scopes: &ctx.write_scopes,
        metrics: &ctx.metrics,
        primary: Box::new(|| {
            // Several writable servers outside Galera (refused, or
            // multi_primary): one binary log need not hold the others'.
            if let Some(list) = ctx.pool.several_writable() {
                return Err(format!(
                    "several writable backends ({}): one binary log need not hold the others' writes",
                    list.join(", ")
                ));
            }
            let i = ctx
                .pool
                .pick(crate::backend::pool::Route::Primary)
                .ok_or("no backend takes writes now")?;
            let b = ctx.cfg.backends.get(i).ok_or("no such backend")?;
            Ok((b.addr(), ctx.cfg.backend_target(b)))
        }),
        // The nodes the health checks last found up in a Galera cluster:
        // a member down and gone from the cluster writes nothing; one the
        // relay cannot reach but the cluster still counts is caught by
        // the cluster's size (follower.rs).
        members: Box::new(|| {
            let health = ctx.pool.health.all();
            ctx.cfg
                .backends
                .iter()
                .zip(health)
                .filter(|(_, h)| h.up && h.galera.is_some())
                .map(|(b, _)| (b.addr(), ctx.cfg.backend_target(b)))
                .collect()
        }),
        server_id,
    };
    crate::cache::follower::run(wiring, settings).await;
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts the session of each client an accept loop takes, on the
/// accepting task (no channel or second task between them).
struct Starter {
    ctx: Arc<Ctx>,
    ids: Arc<AtomicU32>,
    placement: Arc<event_loops::Placement>,
    /// Every session, so that a stopping relay can drain them; finished
    /// ones are reaped as new ones start.
    sessions: Arc<std::sync::Mutex<tokio::task::JoinSet<()>>>,
}

impl Starter {
    /// Starts `client`'s session. A panic in starting it (a bug) drops that
    /// client, said and counted, and the accept loop goes on: before, the
    /// loop ended with it and its listener closed, and every later client
    /// was refused while the relay still ran.
    fn start(&self, client: listen::Client) {
        let started =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.start_session(client)));
        if let Err(p) = started {
            crate::admin::log::internal_error(
                &self.ctx.metrics,
                "starting a client's session",
                p.as_ref(),
                "that client is dropped, and the relay accepts on",
            );
        }
    }

    fn start_session(&self, client: listen::Client) {
        sqlfleet_faults::point!("relay::session_start");
        let listen::Client { conn: a, host } = client;
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let ctx = self.ctx.clone();
        // Each client is served on one event loop: the accepting one
        // unless it is much busier than another (event_loops.rs); its
        // socket moves to that loop's poller.
        let seat = self.placement.seat_new(event_loops::home());
        let at = seat.at();
        let mut set = lock(&self.sessions);
        while set.try_join_next().is_some() {}
        // Boxed first: the session's future is large, and each move on
        // the way into the task would copy it.
        if at == event_loops::home() {
            set.spawn(Box::pin(serve_accepted(ctx, a, id, host, seat)));
            return;
        }
        match a.detach() {
            Ok(d) => {
                let handle = seat.handle(at).clone();
                set.spawn_on(
                    Box::pin(async move {
                        if let Ok(a) = d.attach() {
                            serve_accepted(ctx, a, id, host, seat).await;
                        }
                    }),
                    &handle,
                );
            }
            Err(e) => tracing::debug!("client {id} dropped moving to event loop {at}: {e}"),
        }
    }
}

/// Serves one accepted client (see [`frontend::session::serve`]). A
/// panic in its session (a bug) ends that client only, said and counted:
/// its socket and the backend connection it held close as the session
/// unwinds (the server rolls back what it had open), and everything the
/// session counted in the pool and the limits is given back by the
/// guards that hold it.
async fn serve_accepted(
    ctx: Arc<Ctx>,
    a: Accepted,
    id: u32,
    host: String,
    seat: event_loops::Seat,
) {
    let metrics = ctx.metrics.clone();
    let served = std::panic::AssertUnwindSafe(async move {
        match a {
            Accepted::Tcp(s) => frontend::session::serve(ctx, s, id, host, seat).await,
            Accepted::Unix(s) => frontend::session::serve(ctx, s, id, host, seat).await,
        }
    })
    .catch_unwind()
    .await;
    if let Err(p) = served {
        crate::admin::log::internal_error(
            &metrics,
            &format!("client {id}'s session"),
            p.as_ref(),
            "that client's connection is closed, and the others go on",
        );
    }
}

/// The process's soft open-file limit (1024 when it cannot be read).
fn open_file_limit() -> u64 {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } == 0 {
        l.rlim_cur
    } else {
        1024
    }
}

/// Whose account clients run as on the server: their own (per-user), or
/// the relay's backend account with the global privileges it has there
/// (read with SHOW GRANTS; when they cannot be read, says so).
async fn accounts_note(cfg: &RelayConfig, side: &backend::side::SideConn) -> AccountsNote {
    if cfg.per_user_accounts {
        return AccountsNote::PerUser(
            "clients log in to the server as themselves (per-user accounts)".into(),
        );
    }
    let grants = match side
        .queries(backend::side::OwnQuery::Privileges, &["SHOW GRANTS"], 100)
        .await
    {
        Ok(sets) => sets
            .into_iter()
            .flatten()
            .filter_map(|row| row.into_iter().next().and_then(|(_, v)| v))
            // The password hash is the server's secret, not the log's.
            .map(|g| match g.find(" IDENTIFIED BY") {
                Some(i) => g[..i].to_string(),
                None => g,
            })
            .collect::<Vec<_>>()
            .join("; "),
        Err(e) => format!("(could not be read: {e})"),
    };
    AccountsNote::Shared(format!(
        "every client runs as the backend account '{}' (shared account): each gets its privileges on the server: {grants}",
        cfg.backend_user
    ))
}

/// Whose account clients run as, said at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccountsNote {
    /// Their own (per-user accounts): information.
    PerUser(String),
    /// The relay's one backend account, with the privileges every client
    /// gets: a warning an operator must have chosen knowingly.
    Shared(String),
}

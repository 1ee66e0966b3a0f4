//! `sqlfleet relay`: a MySQL-protocol connection pool and proxy.
//!
//! Clients log in to the relay ([`auth`], optionally over TLS); their
//! commands run on pre-authenticated backend connections from the
//! [`pool`], with replies forwarded packet by packet without decoding rows
//! ([`io`], [`response`]). In transaction mode a backend connection serves
//! many clients, one transaction at a time; session state is tracked from
//! statement text ([`sql`]) and replayed, prepared statements are remapped
//! ([`stmt`]), and anything unsafe to share pins the client ([`session`]).

pub mod auth;
pub mod backend;
pub mod config;
pub mod health;
pub mod io;
pub mod metrics;
pub mod pool;
pub mod response;
pub mod rules;
pub mod session;
pub mod sql;
pub mod stmt;

pub use config::RelayConfig;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::net::{TcpListener, UnixListener};

/// A bound client listener.
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

impl Listener {
    /// Binds `HOST:PORT` or `unix:/path` (a stale socket file is replaced).
    pub async fn bind(addr: &str) -> std::io::Result<Listener> {
        match addr.strip_prefix("unix:") {
            Some(path) => {
                let path = PathBuf::from(path);
                if std::fs::symlink_metadata(&path).is_ok()
                    && std::os::unix::net::UnixStream::connect(&path).is_err()
                {
                    let _ = std::fs::remove_file(&path);
                }
                Ok(Listener::Unix(UnixListener::bind(&path)?, path))
            }
            None => Ok(Listener::Tcp(TcpListener::bind(addr).await?)),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Listener::Tcp(l) => l
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_else(|_| "?".into()),
            Listener::Unix(_, p) => format!("unix:{}", p.display()),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, p) = self {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A client connection just accepted.
pub enum Accepted {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

/// Accepts on one listener and hands connections to the relay's loop.
pub async fn accept_loop(l: Listener, tx: tokio::sync::mpsc::Sender<Accepted>) {
    loop {
        let a = match &l {
            Listener::Tcp(t) => t.accept().await.map(|(s, _)| {
                let _ = s.set_nodelay(true);
                Accepted::Tcp(s)
            }),
            Listener::Unix(u, _) => u.accept().await.map(|(s, _)| Accepted::Unix(s)),
        };
        match a {
            Ok(a) => {
                if tx.send(a).await.is_err() {
                    return;
                }
            }
            // Out of file descriptors and the like: back off briefly.
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
        }
    }
}

/// A running relay's shared state.
pub struct Relay {
    ctx: Arc<session::Ctx>,
}

/// The first backend's server version, for the greeting.
async fn backend_version(cfg: &RelayConfig) -> Option<String> {
    let b = cfg.backends.first()?;
    let connect = async {
        let mut s = pool::dial(b).await.ok()?;
        let p = sqlfleet_wire::packet::read(&mut s, 1 << 16).await.ok()?;
        sqlfleet_wire::handshake::parse_server_hello(&p.payload).ok()
    };
    let hello = tokio::time::timeout(Duration::from_secs(3), connect)
        .await
        .ok()??;
    Some(hello.version)
}

impl Relay {
    pub async fn new(cfg: RelayConfig) -> Result<Relay, String> {
        let tls = match &cfg.tls {
            Some(t) => Some(Arc::new(auth::tls_acceptor(&t.cert, &t.key)?)),
            None => None,
        };
        let version = backend_version(&cfg)
            .await
            .map(|v| {
                let v = v.strip_prefix("5.5.5-").unwrap_or(&v).to_string();
                format!("{v}-sqlfleet-relay")
            })
            .unwrap_or_else(|| "10.11.0-sqlfleet-relay".into());
        let greeting = auth::Greeting {
            version,
            tls_required: cfg.tls.as_ref().is_some_and(|t| t.require),
            tls,
        };
        let metrics = Arc::new(metrics::Metrics::default());
        let cfg = Arc::new(cfg);
        let backend_tls = match &cfg.backend_tls {
            Some(ca) => Some(auth::tls_connector(ca.as_deref())?),
            None => None,
        };
        let pool = pool::Pool::new(cfg.clone(), metrics.clone(), backend_tls);
        Ok(Relay {
            ctx: Arc::new(session::Ctx {
                users: RwLock::new(Arc::new(cfg.dynamic.users.clone())),
                rules: RwLock::new(Arc::new(rules::RuleSet::new(cfg.dynamic.rules.clone()))),
                digests: rules::Digests::new(cfg.metrics.is_some(), 1000),
                cfg,
                pool,
                greeting,
                metrics,
            }),
        })
    }

    /// Applies what SIGHUP reloads (accounts and pool settings); returns
    /// what changed that needs a restart.
    pub fn reload(&self, new: &RelayConfig) -> Vec<String> {
        *self.ctx.users.write().unwrap_or_else(|e| e.into_inner()) =
            Arc::new(new.dynamic.users.clone());
        self.ctx.pool.reconfigure(new.dynamic.pool.clone());
        *self.ctx.rules.write().unwrap_or_else(|e| e.into_inner()) =
            Arc::new(rules::RuleSet::new(new.dynamic.rules.clone()));
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
        ignored
    }

    pub fn metrics_text(&self) -> String {
        self.ctx.metrics.render(&self.ctx.pool.gauges())
    }

    pub fn metrics(&self) -> &metrics::Metrics {
        &self.ctx.metrics
    }

    /// The admin status: backends with their health and pools, clients,
    /// pins by reason, rule hits and the most frequent query digests.
    pub fn status_json(&self) -> String {
        let health = self.ctx.pool.health.all();
        let backends: Vec<serde_json::Value> = self
            .ctx
            .pool
            .gauges()
            .into_iter()
            .zip(health)
            .map(|(g, h)| {
                serde_json::json!({
                    "address": g.addr, "role": h.role(), "up": h.up, "read_only": h.read_only,
                    "replicating": h.replicating, "lag_seconds": h.lag, "gtid": h.gtid,
                    "error": h.error, "connections_open": g.open, "connections_idle": g.idle,
                    "clients_waiting": g.waiting, "clients_busy": g.busy,
                })
            })
            .collect();
        let m = &self.ctx.metrics;
        let pins: serde_json::Map<String, serde_json::Value> = sql::Pin::ALL
            .iter()
            .map(|p| (p.name().to_string(), m.pins(*p).into()))
            .collect();
        let rules = self.ctx.rules();
        let rule_hits: Vec<serde_json::Value> = rules
            .rules
            .iter()
            .zip(&rules.hits)
            .map(|(r, h)| serde_json::json!({"name": r.name, "hits": h.load(Ordering::Relaxed)}))
            .collect();
        let (top, other) = self.ctx.digests.top(50);
        let v = serde_json::json!({
            "backends": backends,
            "clients_connected": m.clients_connected.load(Ordering::Relaxed),
            "commands": m.commands.load(Ordering::Relaxed),
            "pins": pins,
            "rules": rule_hits,
            "digests": top,
            "digests_other": other,
        });
        serde_json::to_string_pretty(&v).unwrap_or_default()
    }

    /// Serves `GET /metrics` (Prometheus) and `GET /status` (JSON) on
    /// `listener` until the relay stops.
    pub fn serve_metrics(self: &Arc<Self>, listener: TcpListener) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(metrics::serve_http(
            listener,
            Arc::new(move |path: &str| match path {
                "/metrics" => Some(("text/plain; version=0.0.4", me.metrics_text())),
                "/status" => Some(("application/json", me.status_json())),
                _ => None,
            }),
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
        let ids = Arc::new(AtomicU32::new(1));
        let maintain = tokio::spawn(self.ctx.pool.clone().maintain());
        let watchers: Vec<_> = (0..self.ctx.cfg.backends.len())
            .map(|i| {
                tokio::spawn(health::watch(
                    self.ctx.cfg.clone(),
                    self.ctx.pool.health.clone(),
                    i,
                ))
            })
            .collect();
        let mut sessions = tokio::task::JoinSet::new();
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Accepted>(1024);
        let mut acceptors = Vec::new();
        for l in listeners {
            let tx = tx.clone();
            acceptors.push(tokio::spawn(accept_loop(l, tx)));
        }
        drop(tx);
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                a = rx.recv() => match a {
                    Some(a) => {
                        let id = ids.fetch_add(1, Ordering::Relaxed);
                        let ctx = self.ctx.clone();
                        match a {
                            Accepted::Tcp(s) => { sessions.spawn(session::serve(ctx, s, id)); }
                            Accepted::Unix(s) => { sessions.spawn(session::serve(ctx, s, id)); }
                        }
                    }
                    None => break,
                },
                Some(_) = sessions.join_next(), if !sessions.is_empty() => {}
            }
        }
        // Stop accepting; awaiting the aborted tasks drops the listeners
        // (and removes Unix socket files) before the process exits.
        for a in &acceptors {
            a.abort();
        }
        for a in acceptors {
            let _ = a.await;
        }
        let _ = tokio::time::timeout(drain, async {
            while sessions.join_next().await.is_some() {}
        })
        .await;
        maintain.abort();
        for w in watchers {
            w.abort();
        }
    }
}

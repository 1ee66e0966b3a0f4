//! `sqlfleet relay`, first slice: a session-pooling MySQL-protocol relay.
//!
//! Clients log in to the relay ([`auth`]); each session leases a
//! pre-authenticated backend connection from the [`pool`] and its packets
//! are passed through without decoding rows ([`session`]). When the client
//! quits, the backend connection is reset (COM_RESET_CONNECTION) and, if
//! clean, goes back to the pool for the next client: connect-per-request
//! applications skip the backend login.

pub mod auth;
pub mod config;
pub mod pool;
pub mod session;

pub use config::RelayConfig;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Accepts clients until `shutdown` resolves; then stops accepting and
/// gives running sessions up to `drain` to finish.
pub async fn serve(
    cfg: RelayConfig,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()>,
    drain: std::time::Duration,
) {
    let cfg = Arc::new(cfg);
    let pool = pool::Pool::new(cfg.clone());
    let ids = AtomicU32::new(1);
    let mut sessions = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            a = listener.accept() => {
                if let Ok((stream, _)) = a {
                    let id = ids.fetch_add(1, Ordering::Relaxed);
                    sessions.spawn(session::serve(cfg.clone(), pool.clone(), stream, id));
                }
            }
            Some(_) = sessions.join_next(), if !sessions.is_empty() => {}
        }
    }
    drop(listener);
    let _ = tokio::time::timeout(drain, async {
        while sessions.join_next().await.is_some() {}
    })
    .await;
}

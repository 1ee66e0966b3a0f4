//! What every client session of a relay shares: its configuration, the
//! pool, the account lists and query rules, what it has learned of the
//! server (recorded replies, write effects, views calling functions), the
//! metrics, and the connected clients. `Relay` (lib.rs) makes one; each
//! session (`session.rs`) holds it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use super::auth::Greeting;
use crate::admin::metrics::Metrics;
use crate::backend::pool::Pool;
use crate::config::{Account, RelayConfig};

impl Ctx {
    /// The greeting clients get now.
    pub fn greeting(&self) -> Arc<Greeting> {
        self.greeting
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Until a backend answers, asks each every second for its greeting
    /// and takes the first one's (a relay started before its servers
    /// then greets clients with their version and capabilities).
    pub async fn learn_greeting(self: Arc<Self>, dialer: crate::backend::dial::Dialer) {
        let weak = Arc::downgrade(&self);
        drop(self);
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            let Some(ctx) = weak.upgrade() else { return };
            for b in &ctx.cfg.backends {
                if let Ok(h) = dialer.hello(b).await {
                    let old = ctx.greeting();
                    let g = Greeting::of(Some(&h), old.tls.clone(), old.tls_required);
                    tracing::info!(
                        "relay: {} answered; clients are greeted as {}",
                        b.addr(),
                        g.version
                    );
                    *ctx.greeting.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(g);
                    return;
                }
            }
        }
    }
}

/// What every session shares.
pub struct Ctx {
    pub cfg: Arc<RelayConfig>,
    pub pool: Arc<Pool>,
    pub users: RwLock<Arc<HashMap<String, Account>>>,
    pub rules: RwLock<Arc<crate::routing::rules::RuleSet>>,
    pub digests: crate::routing::rules::Digests,
    /// Recorded replies to connect-time variable reads.
    pub answers: super::answers::Answers,
    /// What clients are greeted with: the backend's own, a stand-in
    /// until one answers (`Ctx::greeting`).
    pub greeting: RwLock<Arc<Greeting>>,
    pub metrics: Arc<Metrics>,
    /// Connected clients by the id the relay gave them (for KILL).
    pub clients: super::clients::Clients,
    /// Per-user mode: accounts looked up on the server.
    pub server_accounts: Option<crate::backend::accounts::ServerAccounts>,
    /// Which tables' writes change the session unseen (triggers, defaults).
    pub write_effects: crate::backend::write_effects::WriteEffects,
    /// Which tables a write changes, for the result cache.
    pub write_scopes: crate::backend::write_scope::WriteScopes,
    pub view_calls: crate::backend::view_calls::ViewCalls,
    /// Which backend connection each command ran on (tests only; off).
    pub trace: super::trace::Trace,
    /// Transactions being replayed (new work after a loss waits for them).
    pub replays: super::replays::ReplayGate,
    /// Clients connected at once; more get ERROR 1040 at the handshake.
    pub max_clients: usize,
    /// Failed-login streaks by address (frontend/throttle.rs).
    pub throttle: super::throttle::Throttle,
    /// The result cache (`cache.rs`).
    pub cache: crate::cache::Cache,
}

impl Ctx {
    pub fn rules(&self) -> Arc<crate::routing::rules::RuleSet> {
        self.rules.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

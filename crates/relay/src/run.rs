//! Starting a relay from its configuration: every client listener and the
//! metrics page bound, the relay made, then served until a shutdown. The
//! one start-up the binary and the relay's tests share.

use std::sync::Arc;
use std::time::Duration;

use crate::config::RelayConfig;
use crate::listen::Listener;
use crate::relay::Relay;

pub use crate::start_error::StartError;

/// A relay whose listeners are bound, not yet accepting.
pub struct Started {
    pub relay: Arc<Relay>,
    listeners: Vec<Listener>,
    /// Each client listener, as the start-up log names it.
    pub names: Vec<String>,
    /// Where the metrics and status page is, when configured.
    pub metrics: Option<std::net::SocketAddr>,
}

/// Binds every listener of `cfg` (an error names the address), makes the
/// relay and starts its metrics page.
pub async fn start(cfg: RelayConfig) -> Result<Started, StartError> {
    let mut listeners = Vec::new();
    for l in &cfg.listen {
        listeners.push(
            Listener::bind(l)
                .await
                .map_err(|source| StartError::Listen {
                    addr: l.to_string(),
                    source,
                })?,
        );
    }
    let metrics_listener =
        match &cfg.metrics {
            Some(m) => Some(tokio::net::TcpListener::bind(m).await.map_err(|source| {
                StartError::Metrics {
                    addr: m.clone(),
                    source,
                }
            })?),
            None => None,
        };
    let names = listeners.iter().map(|l| l.describe()).collect();
    let relay = Arc::new(Relay::new(cfg).await?);
    let metrics = match metrics_listener {
        Some(l) => {
            let at = l.local_addr().ok();
            relay.serve_metrics(l);
            at
        }
        None => None,
    };
    Ok(Started {
        relay,
        listeners,
        names,
        metrics,
    })
}

impl Started {
    /// Accepts clients until `shutdown` resolves, then gives running
    /// sessions up to `drain` to finish.
    pub async fn serve(self, shutdown: impl std::future::Future<Output = ()>, drain: Duration) {
        self.relay.serve(self.listeners, shutdown, drain).await;
    }
}

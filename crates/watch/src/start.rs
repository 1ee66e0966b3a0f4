//! A running watcher put together: the history opened (and what a
//! previous run left open closed), the monitor started, the page bound and
//! served, and the recorder keeping checks, incidents and metrics. The
//! binary decides only the options and what to show (`ui`).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use crate::history::{History, HistoryConfig, HistoryError};
use crate::monitor::{self, Event, Fleet, MonitorConfig};
use crate::web::metrics::Metrics;
use crate::web::{Auth, Web, WebError};

/// What to start.
pub struct Options {
    pub monitor: MonitorConfig,
    /// Where to keep the history, when one is kept.
    pub history: Option<HistoryConfig>,
    /// The page's address and who may read it.
    pub listen: Option<(SocketAddr, Auth)>,
}

/// A started watcher.
pub struct Running {
    /// The shared view every screen draws.
    pub fleet: Arc<Mutex<Fleet>>,
    /// Incidents, notifications and state changes, in order (already
    /// written to the history when one is kept).
    pub events: mpsc::UnboundedReceiver<Event>,
    /// Where the page is served.
    pub page: Option<SocketAddr>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    History(#[from] HistoryError),
    #[error(transparent)]
    Web(#[from] WebError),
}

/// Opens the history and binds the page before the first check (either
/// refusing stops the start), then starts everything.
pub async fn start(o: Options) -> Result<Running, StartError> {
    let history = match o.history {
        Some(hc) => {
            let h = History::open(hc)?;
            h.close_left_open(monitor::now_unix())?;
            Some(Arc::new(h))
        }
        None => None,
    };
    let metrics = o.listen.as_ref().map(|_| Arc::new(Metrics::default()));
    let interval = o.monitor.interval;
    let (fleet, events) = monitor::start(o.monitor);
    let mut page = None;
    if let (Some((addr, auth)), Some(m)) = (o.listen, &metrics) {
        let w = Web::bind(
            addr,
            auth,
            fleet.clone(),
            history.clone(),
            m.clone(),
            interval,
        )
        .await?;
        page = w.local_addr();
        w.spawn();
    }
    if history.is_some() || metrics.is_some() {
        crate::record::spawn(fleet.clone(), interval, history.clone(), metrics.clone());
    }
    let events = match &history {
        Some(h) => crate::record::tee(h.clone(), events),
        None => events,
    };
    Ok(Running {
        fleet,
        events,
        page,
    })
}

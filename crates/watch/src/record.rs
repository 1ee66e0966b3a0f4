//! Keeping what the monitor sees: every new check's figures (and its
//! statement read's costliest digests) go to the history (when one is kept) and to the metrics' check-time histogram;
//! incidents and what was sent about them go to the history as they
//! happen. Runs beside the monitor, reading its shared view once a
//! second, so the poller never waits on a disk.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::figures::Figures;
use crate::history::{DigestPoint, History, Point};
use crate::monitor::{now_unix, Event, Fleet};
use crate::web::metrics::Metrics;

/// How often finished minutes are folded and the bound enforced.
const COMPACT_EVERY: Duration = Duration::from_secs(60);

/// Starts the recorder: reads the fleet view every `min(interval, 1 s)`
/// and writes the checks made since the last look.
pub fn spawn(
    fleet: Arc<Mutex<Fleet>>,
    interval: Duration,
    history: Option<Arc<History>>,
    metrics: Option<Arc<Metrics>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut seen: Vec<u64> = Vec::new();
        let mut seen_read: Vec<f64> = Vec::new();
        let mut tick = tokio::time::interval(interval.min(Duration::from_secs(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_compact = tokio::time::Instant::now();
        loop {
            tick.tick().await;
            let (points, digests) = {
                let f = crate::monitor::read(&fleet);
                seen.resize(f.servers.len(), 0);
                let mut out = Vec::new();
                let mut digests: Vec<DigestPoint> = Vec::new();
                for (i, s) in f.servers.iter().enumerate() {
                    if s.checks == seen[i] {
                        continue;
                    }
                    seen[i] = s.checks;
                    if let (Some(m), Some(ms)) = (&metrics, s.check_ms) {
                        m.observe_check(ms / 1000.0);
                    }
                    out.push(Point {
                        server: s.server.clone(),
                        at: s.checked_at.unwrap_or_else(now_unix),
                        state: s.state,
                        figures: Figures::of(s),
                    });
                    // The read's costliest statements (a read is recorded
                    // once: its time moves on with each new one).
                    if let Some((at, span, deltas)) = s.statements.newest() {
                        if seen_read.get(i).copied() != Some(at) {
                            seen_read.resize(f.servers.len(), f64::NAN);
                            seen_read[i] = at;
                            digests.extend(crate::history::points_of_read(
                                &s.server, at, span, deltas,
                            ));
                        }
                    }
                }
                (out, digests)
            };
            let Some(h) = history.clone() else { continue };
            let compact = last_compact.elapsed() >= COMPACT_EVERY;
            if compact {
                last_compact = tokio::time::Instant::now();
            }
            let r = tokio::task::spawn_blocking(move || {
                h.record(&points)?;
                h.record_digests(&digests)?;
                if compact {
                    h.compact(now_unix())?;
                }
                Ok::<_, crate::history::HistoryError>(())
            })
            .await;
            if let Ok(Err(e)) = r {
                tracing::warn!("history: {e}");
            }
        }
    })
}

/// Passes the monitor's events on unchanged, writing incidents and
/// notifications to the history on the way.
pub fn tee(
    history: Arc<History>,
    mut events: mpsc::UnboundedReceiver<Event>,
) -> mpsc::UnboundedReceiver<Event> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(e) = events.recv().await {
            let h = history.clone();
            let ev = e.clone();
            let r = tokio::task::spawn_blocking(move || match &ev {
                Event::Incident(i) => h.incident(i),
                Event::Notification {
                    at,
                    deliveries,
                    events,
                    ..
                } => h.notified(*at, events, &crate::notify::outcome(deliveries)),
                Event::State { .. } => Ok(()),
            })
            .await;
            if let Ok(Err(err)) = r {
                tracing::warn!("history: {err}");
            }
            if tx.send(e).is_err() {
                return;
            }
        }
    });
    rx
}

//! The Alertmanager channel: each incident is an alert posted to
//! Alertmanager's v2 API (`POST /api/v2/alerts`) on every configured
//! Alertmanager (the client's half of an Alertmanager cluster), labelled
//! by rule and server, with `startsAt` when it opened and `endsAt` when it
//! resolved. Two watchers with the same config post the same alerts (the
//! same labels): Alertmanager deduplicates them, so people get one
//! notification, and a watcher that dies leaves nothing firing forever.
//!
//! An alert Alertmanager does not hear about again resolves itself after
//! its `resolve_timeout`; open incidents are therefore posted again every
//! [`REFRESH`] with an `endsAt` a few refreshes ahead (`keep_firing`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::config::AlertmanagerConfig;
use crate::notify::{Delivery, Message};
use crate::rules::{IncidentEvent, Phase};

/// How often open incidents are posted again.
pub const REFRESH: Duration = Duration::from_secs(60);

/// Open incidents by (server, rule): what is posted again.
pub type Firing = Arc<Mutex<BTreeMap<(String, String), IncidentEvent>>>;

fn severity(rule: &str) -> &'static str {
    match rule {
        "unreachable" | "cluster_primary" | "replication" => "critical",
        _ => "warning",
    }
}

/// One incident event as an Alertmanager alert; `now` for the `endsAt` of
/// one still open.
pub fn alert(e: &IncidentEvent, now: f64) -> Value {
    let iso = crate::when::iso_utc;
    let ends = match (e.phase, e.resolved_at) {
        (Phase::Resolved, Some(t)) => iso(t),
        (Phase::Resolved, None) => iso(now),
        // Firing until told otherwise; refreshed well before this.
        (Phase::Opened, _) => iso(now + 4.0 * REFRESH.as_secs_f64()),
    };
    json!({
        "labels": {
            "alertname": format!("sqlfleet_{}", e.rule),
            "rule": e.rule,
            "server": e.server,
            "severity": severity(e.rule),
            "source": "sqlfleet watch",
        },
        "annotations": {
            "summary": format!("{} {}", e.server, e.rule),
            "description": e.detail,
        },
        "startsAt": iso(e.opened_at),
        "endsAt": ends,
    })
}

/// Keeps `firing` as the events say: opened incidents in, resolved out.
pub fn follow(firing: &Firing, events: &[IncidentEvent]) {
    let mut f = firing.lock().unwrap_or_else(|e| e.into_inner());
    for e in events {
        let k = (e.server.clone(), e.rule.to_string());
        match e.phase {
            Phase::Opened => {
                f.insert(k, e.clone());
            }
            Phase::Resolved => {
                f.remove(&k);
            }
        }
    }
}

/// Posts `alerts` to every Alertmanager, retried with back-off; one
/// delivery for them all (ok when every Alertmanager took them).
async fn post(cfg: &AlertmanagerConfig, alerts: Value) -> Delivery {
    let attempts = cfg.attempts.unwrap_or(4).max(1);
    let mut failed = Vec::new();
    for base in &cfg.urls {
        let url = format!("{}/api/v2/alerts", base.trim_end_matches('/'));
        if let Err(last) = super::webhook::post_json(&url, &alerts, attempts).await {
            failed.push(format!("{url} after {attempts} attempts: {last}"));
        }
    }
    Delivery {
        channel: "alertmanager".into(),
        ok: failed.is_empty(),
        detail: if failed.is_empty() {
            format!("{} alertmanager(s) took it", cfg.urls.len())
        } else {
            failed.join("; ")
        },
    }
}

/// Sends a message's incidents as alerts, and follows them for the refresh.
pub async fn send(cfg: &AlertmanagerConfig, firing: &Firing, m: &Message) -> Delivery {
    follow(firing, &m.events);
    let now = crate::when::now_unix();
    let alerts: Vec<Value> = m.events.iter().map(|e| alert(e, now)).collect();
    post(cfg, Value::Array(alerts)).await
}

/// Posts the open incidents again every [`REFRESH`] (runs until the
/// runtime stops).
pub fn keep_firing(cfg: AlertmanagerConfig, firing: Firing) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(REFRESH);
        tick.tick().await;
        loop {
            tick.tick().await;
            let open: Vec<IncidentEvent> = match firing.lock() {
                Ok(f) => f.values().cloned().collect(),
                Err(_) => return,
            };
            if open.is_empty() {
                continue;
            }
            let now = crate::when::now_unix();
            let d = post(
                &cfg,
                Value::Array(open.iter().map(|e| alert(e, now)).collect()),
            )
            .await;
            if !d.ok {
                tracing::warn!("alertmanager refresh failed: {}", d.detail);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(phase: Phase, rule: &'static str) -> IncidentEvent {
        IncidentEvent {
            phase,
            server: "db1:3306".into(),
            rule,
            detail: "down: refused".into(),
            opened_at: 1_795_000_000.0,
            resolved_at: (phase == Phase::Resolved).then_some(1_795_000_060.0),
        }
    }

    #[test]
    fn alerts_carry_labels_and_the_incidents_times() {
        let a = alert(&ev(Phase::Opened, "unreachable"), 1_795_000_010.0);
        assert_eq!(a["labels"]["alertname"], "sqlfleet_unreachable");
        assert_eq!(a["labels"]["server"], "db1:3306");
        assert_eq!(a["labels"]["severity"], "critical");
        assert_eq!(a["startsAt"], "2026-11-18T11:06:40.000Z");
        // Open: ends a few refreshes ahead (posted again before then).
        assert_eq!(a["endsAt"], "2026-11-18T11:10:50.000Z");
        let r = alert(&ev(Phase::Resolved, "lag"), 1_795_000_100.0);
        assert_eq!(r["endsAt"], "2026-11-18T11:07:40.000Z");
        assert_eq!(r["labels"]["severity"], "warning");
    }

    #[test]
    fn open_incidents_are_followed_until_they_resolve() {
        let f: Firing = Default::default();
        follow(
            &f,
            &[ev(Phase::Opened, "unreachable"), ev(Phase::Opened, "lag")],
        );
        assert_eq!(f.lock().map(|x| x.len()).unwrap_or(0), 2);
        follow(&f, &[ev(Phase::Resolved, "lag")]);
        let left: Vec<String> = f
            .lock()
            .map(|x| x.keys().map(|k| k.1.clone()).collect())
            .unwrap_or_default();
        assert_eq!(left, vec!["unreachable".to_string()]);
    }
}

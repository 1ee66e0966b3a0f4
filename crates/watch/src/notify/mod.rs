//! Notifications: incidents gathered for a moment (`notify.batch`) into one
//! message, so twenty servers failing in one interval are one mail listing
//! them, then sent to every channel (webhook, SMTP, Alertmanager) from
//! their own tasks:
//! a slow or failing channel is retried with back-off and logged, and
//! never holds up polling.

pub mod alertmanager;
pub mod smtp;
pub mod webhook;

use std::time::Duration;

use serde::Serialize;
use tokio::sync::mpsc;

use crate::config::NotifyConfig;
use crate::rules::{IncidentEvent, Phase};

/// One message: what every channel sends.
#[derive(Debug, Clone, Serialize)]
pub struct Message {
    pub subject: String,
    pub text: String,
    pub events: Vec<IncidentEvent>,
}

/// What one channel did with a message.
#[derive(Debug, Clone, Serialize)]
pub struct Delivery {
    pub channel: String,
    pub ok: bool,
    pub detail: String,
}

fn unix_time(t: f64) -> String {
    sqlfleet_conn::text::iso_utc(t)
}

/// What became of a message, for the log and the incident's history:
/// each channel's outcome, or that none was configured.
pub fn outcome(deliveries: &[Delivery]) -> String {
    if deliveries.is_empty() {
        return "not sent: no channel configured".into();
    }
    deliveries
        .iter()
        .map(|d| match d.ok {
            true => format!("{} sent", d.channel),
            false => format!("{} failed: {}", d.channel, d.detail),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What `watch test-alert` sends: one incident that says it is a test.
pub fn test_message(now: f64) -> Message {
    message(vec![IncidentEvent {
        phase: Phase::Opened,
        server: "test-alert".into(),
        rule: "test",
        detail: "a test message from sqlfleet watch test-alert; nothing is wrong".into(),
        opened_at: now,
        resolved_at: None,
    }])
}

/// Builds the message for a batch of events.
pub fn message(events: Vec<IncidentEvent>) -> Message {
    let opened: Vec<&IncidentEvent> = events.iter().filter(|e| e.phase == Phase::Opened).collect();
    let resolved: Vec<&IncidentEvent> = events
        .iter()
        .filter(|e| e.phase == Phase::Resolved)
        .collect();
    let servers = |v: &[&IncidentEvent]| {
        let mut s: Vec<&str> = v.iter().map(|e| e.server.as_str()).collect();
        s.dedup();
        let n = s.len();
        let mut list = s.into_iter().take(5).collect::<Vec<_>>().join(", ");
        if n > 5 {
            list.push_str(&format!(" and {} more", n - 5));
        }
        list
    };
    let subject = match (opened.len(), resolved.len()) {
        (1, 0) => format!(
            "[sqlfleet watch] {} {}: {}",
            opened[0].server, opened[0].rule, opened[0].detail
        ),
        (0, 1) => format!(
            "[sqlfleet watch] resolved: {} {}",
            resolved[0].server, resolved[0].rule
        ),
        (o, 0) => format!(
            "[sqlfleet watch] {o} incidents opened: {}",
            servers(&opened)
        ),
        (0, r) => format!(
            "[sqlfleet watch] {r} incidents resolved: {}",
            servers(&resolved)
        ),
        (o, r) => format!(
            "[sqlfleet watch] {o} opened ({}), {r} resolved",
            servers(&opened)
        ),
    };
    let mut text = String::new();
    for e in &opened {
        text.push_str(&format!(
            "OPENED   {}  {}  {}  (since {})\n",
            e.server,
            e.rule,
            e.detail,
            unix_time(e.opened_at)
        ));
    }
    for e in &resolved {
        text.push_str(&format!(
            "RESOLVED {}  {}  {}  (from {} to {})\n",
            e.server,
            e.rule,
            e.detail,
            unix_time(e.opened_at),
            unix_time(e.resolved_at.unwrap_or(e.opened_at))
        ));
    }
    Message {
        subject,
        text,
        events,
    }
}

/// Sends one message through every configured channel; returns what each
/// did. `firing`: the open incidents Alertmanager is reminded of.
pub async fn send(cfg: &NotifyConfig, firing: &alertmanager::Firing, m: &Message) -> Vec<Delivery> {
    let mut out = Vec::new();
    let (w, s, a) = tokio::join!(
        async {
            match &cfg.webhook {
                Some(w) => Some(webhook::send(w, m).await),
                None => None,
            }
        },
        async {
            match &cfg.smtp {
                Some(s) => Some(smtp::send(s, m).await),
                None => None,
            }
        },
        async {
            match &cfg.alertmanager {
                Some(a) => Some(alertmanager::send(a, firing, m).await),
                None => None,
            }
        }
    );
    out.extend(w);
    out.extend(s);
    out.extend(a);
    out
}

/// Starts the notifier: events sent to the returned channel are gathered
/// for `batch` and sent; each delivery is reported on `deliveries`.
pub fn spawn(
    cfg: NotifyConfig,
    batch: Duration,
    deliveries: mpsc::UnboundedSender<(Message, Vec<Delivery>)>,
) -> mpsc::UnboundedSender<IncidentEvent> {
    let (tx, mut rx) = mpsc::unbounded_channel::<IncidentEvent>();
    let firing = alertmanager::Firing::default();
    if let Some(a) = &cfg.alertmanager {
        alertmanager::keep_firing(a.clone(), firing.clone());
    }
    tokio::spawn(async move {
        while let Some(first) = rx.recv().await {
            let mut events = vec![first];
            let until = tokio::time::Instant::now() + batch;
            while let Ok(Some(e)) = tokio::time::timeout_at(until, rx.recv()).await {
                events.push(e);
            }
            let m = message(events);
            let cfg = cfg.clone();
            let deliveries = deliveries.clone();
            let firing = firing.clone();
            // Each batch goes out on its own task: retries of one never
            // delay the next batch, or the poller.
            tokio::spawn(async move {
                let d = send(&cfg, &firing, &m).await;
                for x in d.iter().filter(|x| !x.ok) {
                    tracing::warn!(channel = %x.channel, "notification failed: {}", x.detail);
                }
                let _ = deliveries.send((m, d));
            });
        }
    });
    tx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(server: &str, phase: Phase) -> IncidentEvent {
        IncidentEvent {
            phase,
            server: server.into(),
            rule: "unreachable",
            detail: "down: refused".into(),
            opened_at: 1_795_000_000.0,
            resolved_at: (phase == Phase::Resolved).then_some(1_795_000_060.0),
        }
    }

    #[test]
    fn one_message_lists_every_server_of_a_batch() {
        let m = message(
            (0..20)
                .map(|i| ev(&format!("db{i}:3306"), Phase::Opened))
                .collect(),
        );
        assert_eq!(outcome(&[]), "not sent: no channel configured");
        let d = |channel: &str, ok: bool, detail: &str| Delivery {
            channel: channel.into(),
            ok,
            detail: detail.into(),
        };
        assert_eq!(
            outcome(&[d("webhook", true, ""), d("smtp", false, "refused")]),
            "webhook sent, smtp failed: refused"
        );
        assert!(m.subject.contains("20 incidents opened"), "{}", m.subject);
        assert!(m.subject.contains("and 15 more"), "{}", m.subject);
        assert_eq!(m.text.lines().count(), 20);
        let one = message(vec![ev("db1:3306", Phase::Resolved)]);
        assert_eq!(
            one.subject,
            "[sqlfleet watch] resolved: db1:3306 unreachable"
        );
        assert!(
            one.text
                .contains("from 2026-11-18T11:06:40.000Z to 2026-11-18T11:07:40.000Z"),
            "{}",
            one.text
        );
    }
}

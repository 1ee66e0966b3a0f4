//! The webhook channel: the message as JSON in a POST, retried with
//! exponential back-off (1 s, 2 s, 4 s, ...) up to `attempts`, each
//! attempt bounded by a 10 s timeout. ureq is blocking, so attempts run on
//! the blocking pool.

use std::time::Duration;

use crate::config::WebhookConfig;
use crate::notify::{Delivery, Message};

pub async fn send(cfg: &WebhookConfig, m: &Message) -> Delivery {
    let attempts = cfg.attempts.unwrap_or(4).max(1);
    let body = serde_json::json!({
        "source": "sqlfleet watch",
        "subject": m.subject,
        "text": m.text,
        "events": m.events,
    });
    match post_json(&cfg.url, &body, attempts).await {
        Ok(status) => Delivery {
            channel: "webhook".into(),
            ok: true,
            detail: format!("{} answered {status}", cfg.url),
        },
        Err(last) => Delivery {
            channel: "webhook".into(),
            ok: false,
            detail: format!("{} after {attempts} attempts: {last}", cfg.url),
        },
    }
}

/// POSTs `body` as JSON to `url`, up to `attempts` times with exponential
/// back-off, each bounded by 10 s (on the blocking pool: ureq blocks);
/// the answer's status, or the last error. Alertmanager's channel posts
/// the same way.
pub(crate) async fn post_json(
    url: &str,
    body: &serde_json::Value,
    attempts: u32,
) -> Result<u16, String> {
    let mut last = String::new();
    for i in 0..attempts.max(1) {
        if i > 0 {
            tokio::time::sleep(Duration::from_secs(1 << (i - 1).min(5))).await;
        }
        let (url, body) = (url.to_string(), body.clone());
        let r = tokio::task::spawn_blocking(move || {
            ureq::post(&url)
                .timeout(Duration::from_secs(10))
                .send_json(body)
                .map(|r| r.status())
                .map_err(|e| e.to_string())
        })
        .await;
        match r {
            Ok(Ok(status)) => return Ok(status),
            Ok(Err(e)) => last = e,
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

//! `--metrics ADDR`: the sources' and streams' state in Prometheus' text
//! format at `/metrics` (encoded by the `prometheus` crate; checked with
//! `promtool check metrics` in the tests), read from the live views at
//! each scrape. Served by axum on its own task; never slows applying.

use std::net::SocketAddr;

use axum::response::IntoResponse;
use prometheus::{Encoder, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder};

use crate::run::Views;

const PREFIX: &str = "sqlfleet_replicate_";

fn counter(
    r: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<IntCounterVec> {
    let c = IntCounterVec::new(Opts::new(format!("{PREFIX}{name}"), help), labels)?;
    r.register(Box::new(c.clone()))?;
    Ok(c)
}

fn gauge(r: &Registry, name: &str, help: &str, labels: &[&str]) -> prometheus::Result<IntGaugeVec> {
    let g = IntGaugeVec::new(Opts::new(format!("{PREFIX}{name}"), help), labels)?;
    r.register(Box::new(g.clone()))?;
    Ok(g)
}

/// The text exposition of every source and stream now.
pub fn render(views: &Views) -> prometheus::Result<String> {
    let r = Registry::new();
    let applied = counter(
        &r,
        "applied_transactions_total",
        "Source transactions applied on the target",
        &["source"],
    )?;
    let skipped = counter(
        &r,
        "skipped_transactions_total",
        "Source transactions passed over by `replicate skip`",
        &["source"],
    )?;
    let restarts = counter(
        &r,
        "restarts_total",
        "Reading sessions restarted from the target's positions (lost connections, skips)",
        &["source"],
    )?;
    let behind = gauge(
        &r,
        "behind_transactions",
        "Source transactions past the floor (not yet known applied everywhere)",
        &["source"],
    )?;
    let lag = gauge(&r, "lag_seconds", "Now minus the source commit time of the oldest transaction not yet applied (stopped ones included); 0 when caught up", &["source"])?;
    let xa = gauge(
        &r,
        "xa_prepared_held",
        "XA transactions the source prepared and has not committed or rolled back yet, held until it does (the floor stays before the oldest)",
        &["source"],
    )?;
    let up = gauge(
        &r,
        "running",
        "1 while the source's binlog is being read",
        &["source"],
    )?;
    let s_applied = counter(
        &r,
        "stream_applied_transactions_total",
        "Transactions applied per stream (source, target database)",
        &["source", "stream"],
    )?;
    let s_stopped = gauge(
        &r,
        "stream_stopped",
        "1 when the stream stopped on an error (see replicate status)",
        &["source", "stream"],
    )?;
    for v in views
        .iter()
        .filter_map(|v| v.lock().ok().map(|g| g.clone()))
    {
        let l = [v.name.as_str()];
        applied.with_label_values(&l).inc_by(v.applied);
        skipped.with_label_values(&l).inc_by(v.skipped);
        restarts.with_label_values(&l).inc_by(v.reconnects);
        let b = v.behind();
        behind.with_label_values(&l).set(b as i64);
        // Seconds_Behind_Master's meaning: the oldest unapplied
        // transaction's source commit time; 0 when caught up.
        if let Some(lag_s) = v.lag_seconds {
            lag.with_label_values(&l).set(lag_s as i64);
        }
        xa.with_label_values(&l).set(v.xa_held as i64);
        up.with_label_values(&l)
            .set(i64::from(v.state == "running"));
        for (name, s) in &v.streams {
            let sl = [v.name.as_str(), name.as_str()];
            s_applied.with_label_values(&sl).inc_by(s.applied);
            s_stopped
                .with_label_values(&sl)
                .set(i64::from(s.error.is_some()));
        }
    }
    let mut out = Vec::new();
    TextEncoder::new().encode(&r.gather(), &mut out)?;
    String::from_utf8(out).map_err(|e| prometheus::Error::Msg(e.to_string()))
}

/// Serves `/metrics` on `addr` until the task is dropped.
pub async fn serve(addr: SocketAddr, views: Views) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let views = views.clone();
            async move {
                match render(&views) {
                    Ok(text) => (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "text/plain; version=0.0.4",
                        )],
                        text,
                    )
                        .into_response(),
                    Err(e) => (
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                        format!("# error: {e}\n"),
                    )
                        .into_response(),
                }
            }
        }),
    );
    Ok(tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    }))
}

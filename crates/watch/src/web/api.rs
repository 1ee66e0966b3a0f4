//! The page's handlers: the pages themselves, the JSON API, the live
//! stream, server-drawn charts and the metrics text.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::Stream;
use serde::Serialize;
use serde_json::json;

use super::WebState;
use crate::figures::{Figures, Metric};
use crate::history::{DigestMetric, IncidentRow};
use crate::monitor::{now_unix, Fleet, Server};
use crate::sample::{Channel, Running};

pub const INDEX: &str = include_str!("assets/index.html");
pub const SERVER: &str = include_str!("assets/server.html");
pub const INCIDENTS: &str = include_str!("assets/incidents.html");
pub const APP_JS: &str = include_str!("assets/app.js");
pub const STYLE: &str = include_str!("assets/style.css");

/// One server as the fleet page shows it.
#[derive(Serialize)]
struct Row<'a> {
    name: &'a str,
    state: &'static str,
    reason: &'a str,
    tags: &'a BTreeMap<String, String>,
    version: Option<&'a str>,
    uptime: Option<u64>,
    max_connections: Option<u64>,
    replication: String,
    #[serde(serialize_with = "crate::when::iso_opt")]
    checked_at: Option<f64>,
    incidents: usize,
    #[serde(flatten)]
    figures: Figures,
}

fn row(s: &Server) -> Row<'_> {
    let figures = Figures::of(s);
    let sample = s.sample.as_ref().filter(|_| figures.running.is_some());
    Row {
        name: &s.server,
        state: s.state.name(),
        reason: &s.reason,
        tags: &s.tags,
        version: sample.map(|x| x.version.as_str()),
        uptime: sample.map(|x| x.counter("Uptime")),
        max_connections: sample.map(|x| x.max_connections),
        replication: if sample.is_some() {
            crate::ui::replication(s)
        } else {
            String::new()
        },
        checked_at: s.checked_at,
        incidents: s.incidents.len(),
        figures,
    }
}

fn fleet_json(st: &WebState) -> serde_json::Value {
    let f = crate::monitor::read(&st.fleet);
    json!({
        "at": crate::when::iso_utc(now_unix()),
        "interval": st.interval.as_secs_f64(),
        "servers": f.servers.iter().map(row).collect::<Vec<_>>(),
    })
}

fn error(code: StatusCode, msg: impl Into<String>) -> Response {
    Fail(code, msg.into()).into_response()
}

/// A refused request: its status and a JSON `{"error": ...}` body.
struct Fail(StatusCode, String);

impl IntoResponse for Fail {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

fn find(f: &Fleet, name: &str) -> Option<Server> {
    f.servers.iter().find(|s| s.server == name).cloned()
}

/// The server page: for a watched server (`name=`, or `server=` as the
/// API spells it); 404 for a name not watched, as `/api/server` answers,
/// and 400 without one.
pub async fn server_page(State(st): State<Arc<WebState>>, Query(q): Params) -> Response {
    let Some(name) = q.get("name").or_else(|| q.get("server")) else {
        return error(StatusCode::BAD_REQUEST, "name= is missing");
    };
    let known = find(&crate::monitor::read(&st.fleet), name).is_some();
    if !known {
        return error(
            StatusCode::NOT_FOUND,
            format!("{name}: not a watched server"),
        );
    }
    (
        [(axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8")],
        SERVER,
    )
        .into_response()
}

pub async fn fleet(State(st): State<Arc<WebState>>) -> Response {
    Json(fleet_json(&st)).into_response()
}

/// The live page's stream: the whole fleet as one `fleet` event per tick.
pub async fn events(
    State(st): State<Arc<WebState>>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    let stream = futures_util::stream::unfold((st, true), |(st, first)| async move {
        if !first {
            tokio::time::sleep(st.tick()).await;
        }
        let ev = SseEvent::default()
            .event("fleet")
            .data(fleet_json(&st).to_string());
        Some((Ok(ev), (st, false)))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

type Params = Query<HashMap<String, String>>;

async fn history_incidents(
    st: &Arc<WebState>,
    server: Option<String>,
    limit: usize,
) -> Option<Vec<IncidentRow>> {
    let h = st.history.clone()?;
    tokio::task::spawn_blocking(move || h.incidents(server.as_deref(), limit))
        .await
        .ok()?
        .map_err(|e| tracing::warn!("history: {e}"))
        .ok()
}

pub async fn server(State(st): State<Arc<WebState>>, Query(q): Params) -> Response {
    // `server=` as in every other call (`name=`, its first spelling, is
    // still read).
    let Some(name) = q.get("server").or_else(|| q.get("name")) else {
        return error(StatusCode::BAD_REQUEST, "server= is missing");
    };
    let s = find(&crate::monitor::read(&st.fleet), name);
    let Some(s) = s else {
        return error(
            StatusCode::NOT_FOUND,
            format!("{name}: not a watched server"),
        );
    };
    let incidents = history_incidents(&st, Some(name.clone()), 50).await;
    let empty_c: Vec<Channel> = Vec::new();
    let empty_r: Vec<Running> = Vec::new();
    let sample = s.sample.as_ref();
    Json(json!({
        "server": row(&s),
        "connect_ms": s.connect_ms,
        "check_ms": s.check_ms,
        "hostname": sample.map(|x| x.hostname.as_str()),
        "read_only": sample.map(|x| x.read_only),
        "channels": sample.map(|x| &x.channels).unwrap_or(&empty_c),
        "processlist": sample.map(|x| &x.running).unwrap_or(&empty_r),
        "host_error": s.host_error,
        "open_incidents": s.incidents,
        "incidents": incidents,
        "history": st.history.is_some(),
    }))
    .into_response()
}

/// Statement digests over the last minute: one server's (`server=`) or
/// the fleet's (the same digest on many servers is one row, `servers`
/// says on how many), `sort=time|calls|latency`, `n=` rows (default 20,
/// at most 200).
pub async fn digests(State(st): State<Arc<WebState>>, Query(q): Params) -> Response {
    use crate::statements::{top_of, Method, SortBy};
    let by = match q.get("sort").map(String::as_str) {
        None => SortBy::Time,
        Some(s) => match SortBy::parse(s) {
            Some(b) => b,
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("sort={s}: use time, calls or latency"),
                )
            }
        },
    };
    let n = match q.get("n").map(|v| v.parse::<usize>()) {
        None => 20,
        Some(Ok(n)) if (1..=200).contains(&n) => n,
        Some(_) => return error(StatusCode::BAD_REQUEST, "n= takes 1 to 200"),
    };
    let f = crate::monitor::read(&st.fleet);
    match q.get("server") {
        Some(name) => {
            let Some(s) = f.servers.iter().find(|s| &s.server == name) else {
                return error(
                    StatusCode::NOT_FOUND,
                    format!("{name}: not a watched server"),
                );
            };
            let w = &s.statements;
            Json(json!({
                "server": s.server,
                "method": w.method,
                "seconds": w.seconds(),
                "top": w.top(n, by),
            }))
            .into_response()
        }
        None => {
            let with: Vec<&crate::statements::Window> = f
                .servers
                .iter()
                .map(|s| &s.statements)
                .filter(|w| w.method.is_some())
                .collect();
            let count = |m: Method| with.iter().filter(|w| w.method == Some(m)).count();
            Json(json!({
                "servers": with.len(),
                "methods": {
                    "performance_schema": count(Method::PerformanceSchema),
                    "processlist": count(Method::Processlist),
                },
                "top": top_of(with.iter().copied(), n, by),
            }))
            .into_response()
        }
    }
}

/// The window a `range=` names: hour (default), day, week.
fn window(q: &HashMap<String, String>) -> Result<(f64, &'static str, f64), String> {
    match q.get("range").map(String::as_str).unwrap_or("hour") {
        "hour" => Ok((3600.0, "minutes ago", 60.0)),
        "day" => Ok((86_400.0, "hours ago", 3600.0)),
        "week" => Ok((7.0 * 86_400.0, "days ago", 86_400.0)),
        r => Err(format!("range={r}: use hour, day or week")),
    }
}

/// A chart's time range: its length, the x axis' unit and its seconds.
struct Frame {
    span: f64,
    unit: &'static str,
    per: f64,
}

fn frame(q: &HashMap<String, String>) -> Result<Frame, Fail> {
    let (span, unit, per) = window(q).map_err(|e| Fail(StatusCode::BAD_REQUEST, e))?;
    Ok(Frame { span, unit, per })
}

fn server_param(q: &HashMap<String, String>) -> Result<String, Fail> {
    q.get("server")
        .cloned()
        .ok_or_else(|| Fail(StatusCode::BAD_REQUEST, "server= is missing".into()))
}

struct SeriesReq {
    name: String,
    metric: Metric,
    frame: Frame,
}

fn series_req(q: &HashMap<String, String>) -> Result<SeriesReq, Fail> {
    let name = server_param(q)?;
    let m = q.get("metric").map(String::as_str).unwrap_or("qps");
    let metric = Metric::parse(m).ok_or_else(|| {
        let names: Vec<&str> = Metric::ALL.iter().map(|m| m.name()).collect();
        Fail(
            StatusCode::BAD_REQUEST,
            format!("metric={m}: one of {}", names.join(", ")),
        )
    })?;
    Ok(SeriesReq {
        name,
        metric,
        frame: frame(q)?,
    })
}

type Drawn = (Vec<(f64, f64)>, Vec<IncidentRow>);

async fn load_series(st: &Arc<WebState>, r: &SeriesReq, now: f64) -> Result<Drawn, Fail> {
    let Some(h) = st.history.clone() else {
        return Err(Fail(
            StatusCode::SERVICE_UNAVAILABLE,
            "no history is kept (run with --history)".into(),
        ));
    };
    let (name, metric, from) = (r.name.clone(), r.metric, now - r.frame.span);
    tokio::task::spawn_blocking(move || {
        let pts = h.series(&name, metric, from, now, 360, now)?;
        let inc = h.incidents(Some(&name), 500)?;
        Ok::<_, crate::history::HistoryError>((pts, inc))
    })
    .await
    .map_err(|e| Fail(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
    .map_err(|e| Fail(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

pub async fn series(State(st): State<Arc<WebState>>, Query(q): Params) -> Response {
    let r = match series_req(&q) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let now = now_unix();
    match load_series(&st, &r, now).await {
        Ok((pts, _)) => Json(json!({
            "server": r.name,
            "metric": r.metric.name(),
            "from": now - r.frame.span,
            "to": now,
            "points": pts,
        }))
        .into_response(),
        Err(e) => e.into_response(),
    }
}

/// A metric's chart over the range, the incidents shaded on it.
pub async fn chart(State(st): State<Arc<WebState>>, Query(q): Params) -> Response {
    let r = match series_req(&q) {
        Ok(r) => r,
        Err(e) => return e.into_response(),
    };
    let now = now_unix();
    let (pts, inc) = match load_series(&st, &r, now).await {
        Ok(x) => x,
        Err(e) => return e.into_response(),
    };
    if pts.is_empty() {
        let why = match r.metric {
            Metric::Cpu | Metric::Mem | Metric::Disk => " (host figures need SSH to the host)",
            Metric::Lag => " (the server replicates from no one, or its threads are stopped)",
            _ => "",
        };
        return error(
            StatusCode::NOT_FOUND,
            format!("no samples of {} in this range{why}", r.metric.label()),
        );
    }
    let title = format!("{} — {}", r.name, r.metric.label());
    svg_chart(&title, r.metric.label(), &r.frame, now, &pts, &inc)
}

/// A line chart of `pts` over the request's range, ending now, with the
/// incidents shaded on it.
fn svg_chart(
    title: &str,
    y_label: &str,
    r: &Frame,
    now: f64,
    pts: &[(f64, f64)],
    inc: &[IncidentRow],
) -> Response {
    let from = now - r.span;
    let rel = |t: f64| (t - now) / r.per;
    let series = vec![sqlfleet_chart::Series::new(
        y_label,
        pts.iter().map(|&(t, v)| (rel(t), v)).collect(),
    )];
    let bands: Vec<(f64, f64, &str)> = inc
        .iter()
        .filter(|i| i.resolved.unwrap_or(now) >= from)
        .map(|i| {
            (
                rel(i.opened.max(from)),
                rel(i.resolved.unwrap_or(now)),
                i.rule.as_str(),
            )
        })
        .collect();
    let first = pts
        .iter()
        .map(|p| p.0)
        .chain(inc.iter().map(|i| i.opened))
        .fold(now, f64::min)
        .max(from);
    let x_label = r.unit.to_string();
    let svg = sqlfleet_chart::line_chart(&sqlfleet_chart::Chart {
        title,
        x_label: &x_label,
        y_label,
        x_integer: false,
        bands: &bands,
        band_fill: "#fbd5d5",
        // From the first sample (or incident) in range to now: a watcher
        // started five minutes ago draws five minutes, not a sliver.
        x_range: Some((rel(first), 0.0)),
        x_ticks: None,
        series: &series,
    });
    ([(header::CONTENT_TYPE, "image/svg+xml")], svg).into_response()
}

/// One statement digest of one server over the range (`digest=` its
/// normalized text, `schema=`, `metric=` calls, latency or time), from the
/// history, with the server's incidents shaded.
pub async fn digest_chart(State(st): State<Arc<WebState>>, Query(q): Params) -> Response {
    let (name, r) = match server_param(&q).and_then(|n| Ok((n, frame(&q)?))) {
        Ok(x) => x,
        Err(e) => return e.into_response(),
    };
    let Some(digest) = q.get("digest").cloned() else {
        return error(StatusCode::BAD_REQUEST, "digest= is missing");
    };
    let schema = q.get("schema").cloned().unwrap_or_default();
    let m = q.get("metric").map(String::as_str).unwrap_or("time");
    let Some(metric) = DigestMetric::parse(m) else {
        return error(
            StatusCode::BAD_REQUEST,
            format!("metric={m}: one of calls, latency, time"),
        );
    };
    let Some(h) = st.history.clone() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "no history is kept (run with --history)",
        );
    };
    let now = now_unix();
    let from = now - r.span;
    let (d, title_name) = (digest.clone(), name.clone());
    let got = tokio::task::spawn_blocking(move || {
        let pts = h.digest_series(&name, &schema, &d, metric, from, now, 360, now)?;
        let inc = h.incidents(Some(&name), 500)?;
        Ok::<_, crate::history::HistoryError>((pts, inc))
    })
    .await;
    let (pts, inc) = match got {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    if pts.is_empty() {
        return error(
            StatusCode::NOT_FOUND,
            format!("no {} of this statement in this range", metric.label()),
        );
    }
    let mut short: String = digest.chars().take(40).collect();
    if short.len() < digest.len() {
        short.push('…');
    }
    let title = format!("{title_name} — {short} — {}", metric.label());
    svg_chart(&title, metric.label(), &r, now, &pts, &inc)
}

/// Every server's last ten minutes of qps and threads running, in
/// buckets, for the fleet page's sparklines.
pub async fn trends(State(st): State<Arc<WebState>>) -> Response {
    let now = now_unix();
    let f = crate::monitor::read(&st.fleet);
    let servers: serde_json::Map<String, serde_json::Value> = f
        .servers
        .iter()
        .map(|s| {
            (
                s.server.clone(),
                serde_json::to_value(s.trend.buckets(now)).unwrap_or_default(),
            )
        })
        .collect();
    Json(json!({
        "at": crate::when::iso_utc(now),
        "window_s": crate::trend::WINDOW,
        "bucket_s": crate::trend::WINDOW / crate::trend::BUCKETS as f64,
        "servers": servers,
    }))
    .into_response()
}

pub async fn incidents(State(st): State<Arc<WebState>>, Query(q): Params) -> Response {
    let server = q.get("server").cloned();
    match history_incidents(&st, server.clone(), 1000).await {
        Some(rows) => Json(json!({ "history": true, "incidents": rows })).into_response(),
        None => {
            // Without a history: the open incidents the monitor holds.
            let open: Vec<serde_json::Value> = crate::monitor::read(&st.fleet)
                    .servers
                    .iter()
                    .filter(|s| server.as_ref().is_none_or(|n| *n == s.server))
                    .flat_map(|s| {
                        s.incidents.iter().map(|i| {
                            json!({"server": s.server, "rule": i.rule, "detail": i.detail, "opened": crate::when::iso_utc(i.since),
                                   "resolved": null, "end_note": "", "notified": ""})
                        })
                    })
                    .collect();
            Json(json!({ "history": false, "incidents": open })).into_response()
        }
    }
}

pub async fn history(State(st): State<Arc<WebState>>) -> Response {
    let Some(h) = st.history.clone() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "no history is kept (run with --history)",
        );
    };
    let path = h.path().display().to_string();
    match tokio::task::spawn_blocking(move || h.usage()).await {
        Ok(Ok(u)) => Json(json!({ "path": path, "usage": u })).into_response(),
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

pub async fn metrics(State(st): State<Arc<WebState>>) -> Response {
    let text = st.metrics.render(&crate::monitor::read(&st.fleet));
    match text {
        Ok(t) => (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            t,
        )
            .into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

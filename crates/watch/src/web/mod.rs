//! The fleet in a browser: a live fleet page, a page per server with
//! charts from the history, the incidents, `/metrics` for Prometheus and
//! `/api/...` JSON of the same data. Served by axum from the monitor's
//! shared view; everything the pages need is inside the binary
//! (`assets/`), charts are SVG drawn on the server (`sqlfleet_chart`).
//!
//! Read-only, never shows a password. Binds to loopback unless told
//! otherwise; a non-loopback bind refuses to start without a login (basic
//! auth from the credential store or a bearer token), and then every
//! request must carry it. Responses carry content types, `nosniff`, a
//! same-origin content security policy, and `no-store` on data.

mod api;
pub mod metrics;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::history::History;
use crate::monitor::Fleet;
use metrics::Metrics;

/// Who may read the pages.
#[derive(Clone, Default)]
pub struct Auth {
    /// user and password for HTTP basic auth.
    pub basic: Option<(String, String)>,
    /// A bearer token (`Authorization: Bearer ...`).
    pub token: Option<String>,
}

impl Auth {
    /// The page's logins: the store's web login (`creds web`) and a
    /// token from $SQLFLEET_WATCH_TOKEN.
    pub fn of(store: Option<&crate::creds::Store>) -> Auth {
        Auth {
            basic: store
                .and_then(|s| s.get(crate::creds::WEB_LOGIN))
                .and_then(|e| Some((e.user.clone()?, e.password.clone()?))),
            token: std::env::var("SQLFLEET_WATCH_TOKEN")
                .ok()
                .filter(|t| !t.is_empty()),
        }
    }
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("basic_user", &self.basic.as_ref().map(|b| &b.0))
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}

impl Auth {
    pub fn is_set(&self) -> bool {
        self.basic.is_some() || self.token.is_some()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error("--listen {addr}: not a loopback address, so the page needs a login: add one with `sqlfleet watch creds web --user NAME` or set SQLFLEET_WATCH_TOKEN")]
    NeedsAuth { addr: SocketAddr },
    #[error("--listen {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

pub(crate) struct WebState {
    pub fleet: Arc<Mutex<Fleet>>,
    pub history: Option<Arc<History>>,
    pub metrics: Arc<Metrics>,
    pub auth: Auth,
    pub interval: Duration,
}

impl WebState {
    /// How often the live page gets a fresh view: the interval, within
    /// 0.25 s and 2 s.
    pub fn tick(&self) -> Duration {
        self.interval
            .clamp(Duration::from_millis(250), Duration::from_secs(2))
    }
}

/// A bound listener, ready to serve.
pub struct Web {
    listener: tokio::net::TcpListener,
    router: Router,
}

impl Web {
    /// Binds `addr` (refusing a non-loopback bind without a login).
    pub async fn bind(
        addr: SocketAddr,
        auth: Auth,
        fleet: Arc<Mutex<Fleet>>,
        history: Option<Arc<History>>,
        metrics: Arc<Metrics>,
        interval: Duration,
    ) -> Result<Web, WebError> {
        if !addr.ip().is_loopback() && !auth.is_set() {
            return Err(WebError::NeedsAuth { addr });
        }
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| WebError::Bind { addr, source })?;
        let st = Arc::new(WebState {
            fleet,
            history,
            metrics,
            auth,
            interval,
        });
        let router = Router::new()
            .route("/", get(|| async { page(api::INDEX) }))
            .route("/server", get(api::server_page))
            .route("/incidents", get(|| async { page(api::INCIDENTS) }))
            .route(
                "/assets/app.js",
                get(|| async { asset("text/javascript; charset=utf-8", api::APP_JS) }),
            )
            .route(
                "/assets/style.css",
                get(|| async { asset("text/css; charset=utf-8", api::STYLE) }),
            )
            .route("/api/fleet", get(api::fleet))
            .route("/api/events", get(api::events))
            .route("/api/trends", get(api::trends))
            .route("/api/server", get(api::server))
            .route("/api/series", get(api::series))
            .route("/api/chart.svg", get(api::chart))
            .route("/api/incidents", get(api::incidents))
            .route("/api/digests", get(api::digests))
            .route("/api/digest_chart.svg", get(api::digest_chart))
            .route("/api/history", get(api::history))
            .route("/metrics", get(api::metrics))
            .layer(middleware::from_fn_with_state(st.clone(), guard))
            .with_state(st);
        Ok(Web { listener, router })
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until the runtime stops.
    pub fn spawn(self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            if let Err(e) = axum::serve(self.listener, self.router).await {
                tracing::warn!("web page: {e}");
            }
        })
    }
}

fn page(html: &'static str) -> Response {
    asset("text/html; charset=utf-8", html)
}

fn asset(ctype: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, ctype)], body).into_response()
}

/// Equal without telling, by its timing, how much of a secret matched.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn allowed(auth: &Auth, req: &Request) -> bool {
    if !auth.is_set() {
        return true;
    }
    let Some(h) = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
    else {
        return false;
    };
    if let (Some(t), Some(given)) = (&auth.token, h.strip_prefix("Bearer ")) {
        return same(t.as_bytes(), given.trim().as_bytes());
    }
    if let (Some((u, p)), Some(b64)) = (&auth.basic, h.strip_prefix("Basic ")) {
        use base64::Engine;
        let Ok(raw) = base64::engine::general_purpose::STANDARD.decode(b64.trim()) else {
            return false;
        };
        let want = format!("{u}:{p}");
        return same(want.as_bytes(), &raw);
    }
    false
}

/// Login check and the headers every response carries.
async fn guard(State(st): State<Arc<WebState>>, req: Request, next: Next) -> Response {
    let data = req.uri().path().starts_with("/api/") || req.uri().path() == "/metrics";
    let mut resp = if allowed(&st.auth, &req) {
        next.run(req).await
    } else {
        let mut r = (StatusCode::UNAUTHORIZED, "a login is needed\n").into_response();
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"sqlfleet watch\", charset=\"UTF-8\""),
        );
        r
    };
    let h = resp.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; object-src 'none'; frame-ancestors 'none'",
        ),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(if data { "no-store" } else { "no-cache" }),
    );
    resp
}

#[cfg(test)]
mod tests {
    /// Every route the router serves is in the guide's API list.
    #[test]
    fn the_guide_lists_every_route() {
        let src = include_str!("mod.rs");
        let guide = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide/watch.md"),
        )
        .expect("docs/guide/watch.md");
        let routes: Vec<&str> = src
            .split(".route(\"")
            .skip(1)
            .filter_map(|r| r.split('"').next())
            .filter(|r| r.starts_with("/api/") || *r == "/metrics")
            .collect();
        assert!(routes.len() >= 10, "{routes:?}");
        for r in routes {
            assert!(
                guide.contains(&format!("`{r}")),
                "{r} is not in watch.md's API list"
            );
        }
    }
}

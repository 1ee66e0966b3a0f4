//! A minimal HTTP/1.1 server for the admin pages: GET only, one request
//! per connection, bounded header size and read time.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A page for a path: its content type and body.
pub type Pages = Arc<dyn Fn(&str) -> Option<(&'static str, String)> + Send + Sync>;

/// Serves GET requests for `pages` until the task is dropped.
///
/// With `token`, a request must carry `Authorization: Bearer <token>`
/// (Prometheus: `authorization: {credentials_file: ...}`).
pub async fn serve_http(listener: tokio::net::TcpListener, render: Pages, token: Option<String>) {
    let token = Arc::new(token);
    loop {
        let Ok((mut s, _)) = listener.accept().await else {
            continue;
        };
        let render = render.clone();
        let token = token.clone();
        tokio::spawn(async move {
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            let read = async {
                while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return false,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                true
            };
            if !matches!(
                tokio::time::timeout(std::time::Duration::from_secs(5), read).await,
                Ok(true)
            ) {
                return;
            }
            let first = req.split(|&b| b == b'\n').next().unwrap_or_default();
            let first = String::from_utf8_lossy(first);
            let path = first
                .strip_prefix("GET ")
                .and_then(|r| r.split_whitespace().next())
                .unwrap_or("");
            let authorized = match token.as_deref() {
                None => true,
                Some(t) => String::from_utf8_lossy(&req).lines().any(|l| {
                    l.split_once(':').is_some_and(|(k, v)| {
                        k.trim().eq_ignore_ascii_case("authorization")
                            && v.trim().strip_prefix("Bearer ").map(str::trim) == Some(t)
                    })
                }),
            };
            let (status, ctype, body) = match render(path).filter(|_| authorized) {
                _ if !authorized => (
                    "401 Unauthorized",
                    "text/plain",
                    "a bearer token is required\n".to_string(),
                ),
                Some((ctype, body)) => ("200 OK", ctype, body),
                None => (
                    "404 Not Found",
                    "text/plain",
                    "try /metrics or /status\n".to_string(),
                ),
            };
            let resp = format!(
                "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = s.write_all(resp.as_bytes()).await;
        });
    }
}

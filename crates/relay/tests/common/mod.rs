//! Running a relay inside a test process, from a config file's text.

#![allow(dead_code)]

pub mod drivers;
pub mod relay;
pub mod routing;
pub mod servers;
pub mod stall;

#[allow(unused_imports)]
pub use relay::{stderr, stdout};

use std::sync::Arc;
use std::time::Duration;

use sqlfleet_relay::{Listener, Relay};

/// A relay serving on a free TCP port on 127.0.0.1 (and on `unix` when
/// given) until the returned sender is used or dropped.
pub async fn serve(
    config: &str,
    unix: Option<&std::path::Path>,
) -> (u16, tokio::sync::oneshot::Sender<()>) {
    let (port, stop, _) = serve_relay(config, unix).await;
    (port, stop)
}

/// [`serve`], with the relay itself (its metrics).
pub async fn serve_relay(
    config: &str,
    unix: Option<&std::path::Path>,
) -> (u16, tokio::sync::oneshot::Sender<()>, Arc<Relay>) {
    let f = tempfile::NamedTempFile::new().expect("tmp");
    std::fs::write(f.path(), config).expect("write config");
    let cfg = sqlfleet_relay::config::load(f.path()).expect("config");
    let relay = Arc::new(Relay::new(cfg).await.expect("relay"));
    let tcp = Listener::bind("127.0.0.1:0").await.expect("bind");
    let port: u16 = tcp
        .describe()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    let mut listeners = vec![tcp];
    if let Some(path) = unix {
        listeners.push(
            Listener::bind(&format!("unix:{}", path.display()))
                .await
                .expect("bind unix"),
        );
    }
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let serving = relay.clone();
    tokio::spawn(async move {
        serving
            .serve(
                listeners,
                async {
                    let _ = rx.await;
                },
                Duration::from_secs(1),
            )
            .await;
    });
    (port, tx, relay)
}

/// Logs in as `user` over a plain stream with these session flags and
/// collation (raw-protocol tests); returns the greeting.
pub async fn wire_login<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    s: &mut S,
    user: &str,
    password: &str,
    shape: u32,
    collation: u8,
    database: Option<&str>,
) -> Result<sqlfleet_wire::handshake::ServerHello, sqlfleet_wire::WireError> {
    use sqlfleet_wire::handshake;
    let hello =
        handshake::parse_server_hello(&sqlfleet_wire::packet::read(s, 1 << 16).await?.payload)?;
    let caps = handshake::client_caps(&hello, shape, database.is_some(), false);
    let cred = handshake::Credential::Password(password.to_string());
    handshake::respond(
        s,
        &hello,
        &handshake::Response {
            seq: 1,
            caps,
            ext: 0,
            user,
            cred: &cred,
            collation,
            database,
            secure: false,
        },
    )
    .await?;
    Ok(hello)
}

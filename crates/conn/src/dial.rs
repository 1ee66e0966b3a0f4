//! Logging in with our own handshake (the wire crate's), for commands that
//! talk to many servers once each (`query`): one TCP connection, the
//! greeting read, TLS taken in the same handshake when the server offers
//! it (`PREFERRED`) or required by the ssl-mode, then the login — and no
//! query after it (the client's character set travels in the handshake,
//! as the stock client sends it; only a set [`crate::charset`] does not
//! know is set by `SET NAMES`). The driver (`open.rs`) cannot take TLS
//! "if offered" without a second handshake, which doubles the cost of a
//! run on a plain fleet.
//!
//! Every packet of the login is read from a buffer, so a greeting or an
//! OK costs one read from the socket, not one for its header and one for
//! its body: on a fleet of a thousand new connections these reads are a
//! good part of the client's CPU.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use sqlfleet_wire::client::{Client, Duplex};
use sqlfleet_wire::handshake::{self, Credential};
use sqlfleet_wire::WireError;
use tokio::io::{BufReader, BufStream};

use crate::open::{client_io_error, ConnectError, Stage};
use crate::resolve::{Endpoint, Target};
use crate::tls::SslMode;

/// What a query session asks of the server.
const CAPS: u32 = handshake::MULTI_STATEMENTS
    | handshake::MULTI_RESULTS
    | handshake::PS_MULTI_RESULTS
    | handshake::DEPRECATE_EOF;

impl Target {
    /// Connects and logs in within `timeout` (see the module doc). A
    /// timeout says how far the login had got (`ConnectError::stage`) and
    /// words it as the mysql client does for that stage.
    pub async fn dial(&self, timeout: Duration) -> Result<Client, ConnectError> {
        let stage = AtomicU8::new(Stage::Connecting as u8);
        match tokio::time::timeout(timeout, self.dial_now(&stage)).await {
            Ok(r) => r,
            Err(_) => {
                let at = Stage::from_u8(stage.load(Ordering::Relaxed));
                let mut e = self.failed(
                    at.timed_out(&self.endpoint, timeout.as_secs_f64()),
                    None,
                    true,
                );
                e.stage = Some(at);
                Err(e)
            }
        }
    }

    fn failed(&self, what: String, code: Option<u16>, timed_out: bool) -> ConnectError {
        ConnectError {
            endpoint: self.endpoint.to_string(),
            user: self.user.clone(),
            what,
            source: None,
            code,
            timed_out,
            stage: None,
        }
    }

    fn wire_failed(&self, e: WireError) -> ConnectError {
        match e {
            WireError::Server {
                code,
                state,
                message,
            } => self.failed(format!("ERROR {code} ({state}): {message}"), Some(code), false),
            WireError::Io(io) => self.failed(client_io_error(&self.endpoint, &io), None, false),
            WireError::Closed => self.failed(
                "ERROR 2013 (HY000): Lost connection to server at 'handshake: reading initial communication packet'".into(),
                None,
                false,
            ),
            // As the stock client says it: the server answered.
            WireError::Plugin { plugin, why } => self.failed(
                format!("ERROR 2059 (HY000): Authentication plugin '{plugin}' cannot be loaded: {why}"),
                Some(2059),
                false,
            ),
            other => self.failed(format!("login failed: {other}"), None, false),
        }
    }

    async fn dial_now(&self, stage: &AtomicU8) -> Result<Client, ConnectError> {
        let mut raw: Box<dyn Duplex> = match &self.endpoint {
            Endpoint::Tcp { host, port } => {
                let s = tokio::net::TcpStream::connect((host.as_str(), *port))
                    .await
                    .map_err(|e| self.failed(client_io_error(&self.endpoint, &e), None, false))?;
                let _ = s.set_nodelay(true);
                Box::new(s)
            }
            Endpoint::Socket(p) => Box::new(
                tokio::net::UnixStream::connect(p)
                    .await
                    .map_err(|e| self.failed(client_io_error(&self.endpoint, &e), None, false))?,
            ),
        };
        stage.store(Stage::Greeting as u8, Ordering::Relaxed);
        let greeting = {
            let mut r = BufReader::with_capacity(1024, &mut raw);
            let g = sqlfleet_wire::packet::read(&mut r, 1 << 16)
                .await
                .map_err(|e| self.wire_failed(e))?;
            // The server says nothing more until the client answers; bytes
            // after the greeting would be lost with this buffer.
            if !r.buffer().is_empty() {
                return Err(self.wire_failed(WireError::Protocol(
                    "the server sent more than its greeting before the login".into(),
                )));
            }
            g
        };
        let hello =
            handshake::parse_server_hello(&greeting.payload).map_err(|e| self.wire_failed(e))?;
        stage.store(Stage::Login as u8, Ordering::Relaxed);
        let offered = hello.caps & handshake::SSL != 0;
        // A Unix socket is already local and private: no TLS over it,
        // unless there is a client certificate to show (as the stock
        // client shows it there too).
        let tcp = matches!(self.endpoint, Endpoint::Tcp { .. }) || self.ssl_cert.is_some();
        let tls = match self.ssl_mode {
            SslMode::Disabled => false,
            SslMode::Preferred => tcp && offered,
            _ if !tcp => false,
            mode => {
                if !offered {
                    return Err(self.failed(
                        format!(
                            "ERROR 2026 (HY000): TLS/SSL error: ssl-mode {mode} but the server does not offer TLS"
                        ),
                        // The server answered: an error, not "unreachable".
                        Some(2026),
                        false,
                    ));
                }
                true
            }
        };
        let caps = handshake::client_caps(&hello, CAPS, self.database.is_some(), tls);
        let (collation, set_names) = match self.charset.as_deref() {
            None => (crate::charset::UTF8MB4_GENERAL_CI, None),
            Some(cs) => match crate::charset::handshake_collation(cs, &hello.version) {
                Some(id) => (id, None),
                None => (crate::charset::UTF8MB4_GENERAL_CI, Some(cs)),
            },
        };
        let (stream, seq): (Box<dyn Duplex>, u8) = if tls {
            let connector = self
                .client_cert()
                .and_then(|c| {
                    crate::tls::connector(self.ssl_mode, self.ssl_ca.as_deref(), c, &self.tls)
                })
                .map_err(|e| {
                    self.failed(
                        format!("ERROR 2026 (HY000): TLS/SSL error: {e}"),
                        Some(2026),
                        false,
                    )
                })?
                .ok_or_else(|| {
                    self.failed(
                        "ERROR 2026 (HY000): TLS/SSL error: no TLS configuration".into(),
                        Some(2026),
                        false,
                    )
                })?;
            let host = match &self.endpoint {
                Endpoint::Tcp { host, .. } => host.clone(),
                Endpoint::Socket(_) => "localhost".into(),
            };
            let t = crate::tls::start(raw, &connector, &host, caps, 0, collation)
                .await
                .map_err(|e| match e {
                    crate::tls::StartTlsError::Wire(e) => self.wire_failed(e),
                    e => self.failed(
                        format!("ERROR 2026 (HY000): TLS/SSL error: {e}"),
                        Some(2026),
                        false,
                    ),
                })?;
            (Box::new(t), 2)
        } else {
            (raw, 1)
        };
        let mut stream = BufStream::new(stream);
        let password = self
            .secret()
            .map(|s| s.expose().to_string())
            .unwrap_or_default();
        let cred = Credential::Password(password);
        handshake::respond(
            &mut stream,
            &hello,
            &handshake::Response {
                seq,
                caps,
                ext: 0,
                user: &self.user,
                cred: &cred,
                collation,
                database: self.database.as_deref(),
                // The password itself may go over TLS or a Unix socket.
                secure: tls || matches!(self.endpoint, Endpoint::Socket(_)),
            },
        )
        .await
        .map_err(|e| self.wire_failed(e))?;
        let mut client = Client::buffered(stream, hello, caps, tls);
        if tls && self.tls.checks_session() {
            let rows = session_status(&mut client)
                .await
                .map_err(|e| self.wire_failed(e))?;
            if let Err(why) = self.tls.allows_status(&rows) {
                client.quit().await;
                return Err(self.failed(
                    format!("ERROR 2026 (HY000): TLS/SSL error: {why}"),
                    Some(2026),
                    false,
                ));
            }
        }
        if let Some(cs) = set_names {
            client
                .execute(&format!("SET NAMES {cs}"))
                .await
                .map_err(|e| self.wire_failed(e))?;
        }
        Ok(client)
    }
}

/// The session's TLS as the server reports it (name, value rows).
async fn session_status(c: &mut Client) -> Result<Vec<(String, String)>, WireError> {
    c.query(crate::tls_policy::SESSION_TLS_SQL).await?;
    let mut rows = Vec::new();
    while let Some(step) = c.step().await? {
        if let sqlfleet_wire::client::Step::Row(r) = step {
            let text = |i: usize| {
                r.get(i)
                    .cloned()
                    .flatten()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default()
            };
            rows.push((text(0), text(1)));
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener that accepts and, when `greet`, sends a greeting, then
    /// says nothing more (holding the connections open).
    async fn silent(greet: bool) -> (u16, tokio::task::JoinHandle<()>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = l.local_addr().expect("addr").port();
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut s, _)) = l.accept().await {
                if greet {
                    let hello = handshake::greeting(
                        "10.11.6-MariaDB",
                        7,
                        &[1; 20],
                        crate::charset::UTF8MB4_GENERAL_CI,
                    );
                    let _ = sqlfleet_wire::packet::write(&mut s, 0, &hello).await;
                }
                held.push(s);
            }
        });
        (port, task)
    }

    fn target(port: u16) -> Target {
        Target {
            endpoint: Endpoint::Tcp {
                host: "127.0.0.1".into(),
                port,
            },
            user: "u".into(),
            password: None,
            database: None,
            ssl_mode: SslMode::Disabled,
            ssl_ca: None,
            ssl_cert: None,
            ssl_key: None,
            tls: Default::default(),
            charset: None,
        }
    }

    #[tokio::test]
    async fn a_timeout_names_how_far_the_login_got() {
        let t = Duration::from_millis(300);
        let (port, task) = silent(false).await;
        let e = target(port).dial(t).await.err().expect("no greeting");
        assert!(e.timed_out);
        assert_eq!(e.stage, Some(Stage::Greeting), "{}", e.what);
        assert!(
            e.what.contains("reading initial communication packet"),
            "{}",
            e.what
        );
        task.abort();

        let (port, task) = silent(true).await;
        let e = target(port).dial(t).await.err().expect("no login answer");
        assert_eq!(e.stage, Some(Stage::Login), "{}", e.what);
        assert!(
            e.what.contains("reading authorization packet"),
            "{}",
            e.what
        );
        task.abort();

        // A refused connection is no timeout at all.
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        drop(l);
        let e = target(port).dial(t).await.err().expect("refused");
        assert!(!e.timed_out && e.stage.is_none(), "{}", e.what);
        assert!(e.what.contains("ERROR 2003"), "{}", e.what);
    }
}

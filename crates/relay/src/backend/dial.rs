//! The one way the relay reaches a backend: a socket (TCP with NODELAY or
//! the server's Unix socket), TLS when configured, and the login with the
//! relay's backend account (mysql_native_password or caching_sha2_password,
//! as the server asks). The pool, health checks and the version probe all
//! come through here, so a change to backend TLS or login is made once.

use std::sync::Arc;
use std::time::Duration;

use sqlfleet_wire::handshake::{self, Credential, ServerHello, DEPRECATE_EOF, SESSION_SHAPE};
use sqlfleet_wire::packet::WireError;
use tokio::net::TcpStream;

use crate::backend::command::Link;
use crate::config::{Backend, BackendTls, RelayConfig};
use crate::protocol::io::{AnyStream, PacketIo};
use crate::protocol::track::TrackView;

/// How long a dial and login may take.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The protocol shape and collation a backend connection was opened with;
/// only clients with the same can use it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Shape {
    pub caps: u32,
    pub collation: u8,
    /// MariaDB extended capabilities (extended column metadata).
    pub ext: u32,
}

/// A backend account a client's connections log in as (per-user mode):
/// the client's own name, proven with what its login gave the relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendAccount {
    pub user: String,
    pub credential: Credential,
}

/// Dials and logs in to backends with the relay's account and TLS setting.
#[derive(Clone)]
pub struct Dialer {
    user: String,
    password: String,
    tls: Option<tokio_rustls::TlsConnector>,
    /// TLS only when the server offers it over TCP (`preferred`).
    tls_optional: bool,
}

/// A logged-in backend connection, before the pool takes it.
pub struct Login {
    pub io: PacketIo<AnyStream>,
    pub hello: ServerHello,
    /// Capabilities in effect (asked for and offered).
    pub caps: u32,
}

impl Link for Login {
    fn io(&mut self) -> &mut PacketIo<AnyStream> {
        &mut self.io
    }
    fn deprecate_eof(&self) -> bool {
        self.caps & DEPRECATE_EOF != 0
    }
}

/// A socket to a backend (TCP with NODELAY, or its Unix socket).
async fn socket(b: &Backend) -> std::io::Result<AnyStream> {
    Ok(match &b.socket {
        Some(path) => AnyStream(Box::new(tokio::net::UnixStream::connect(path).await?)),
        None => {
            let tcp = TcpStream::connect((b.host.as_str(), b.port)).await?;
            tcp.set_nodelay(true)?;
            AnyStream(Box::new(tcp))
        }
    })
}

impl Dialer {
    pub fn new(cfg: &RelayConfig) -> Result<Dialer, sqlfleet_conn::tls::TlsError> {
        let tls = match &cfg.backend_tls {
            BackendTls::Disabled => None,
            BackendTls::Preferred | BackendTls::Required => sqlfleet_conn::tls::connector(
                sqlfleet_conn::SslMode::Required,
                None,
                None,
                &Default::default(),
            )?,
            BackendTls::Verify(ca) => sqlfleet_conn::tls::connector(
                sqlfleet_conn::SslMode::VerifyIdentity,
                Some(ca),
                None,
                &Default::default(),
            )?,
        };
        Ok(Dialer {
            user: cfg.backend_user.clone(),
            password: cfg.backend_password.clone(),
            tls,
            tls_optional: cfg.backend_tls == BackendTls::Preferred,
        })
    }

    /// The server's greeting only (no login): what it calls itself.
    pub async fn hello(&self, b: &Backend) -> Result<ServerHello, WireError> {
        let probe = async {
            let mut s = socket(b).await?;
            let p = sqlfleet_wire::packet::read(&mut s, 1 << 16).await?;
            handshake::parse_server_hello(&p.payload)
        };
        tokio::time::timeout(Duration::from_secs(3), probe)
            .await
            .map_err(|_| WireError::Protocol("greeting timed out after 3 s".into()))?
    }

    /// Dials `b` and logs in with `shape`'s capabilities and collation, as
    /// `account` (per-user mode) or the relay's own backend account.
    pub async fn login(
        &self,
        b: &Backend,
        shape: Shape,
        account: Option<&BackendAccount>,
    ) -> Result<Login, WireError> {
        tokio::time::timeout(LOGIN_TIMEOUT, self.login_now(b, shape, account))
            .await
            .map_err(|_| WireError::Protocol("connect timed out after 10 s".into()))?
    }

    async fn login_now(
        &self,
        b: &Backend,
        shape: Shape,
        account: Option<&BackendAccount>,
    ) -> Result<Login, WireError> {
        let mut raw = socket(b).await?;
        let hello = handshake::parse_server_hello(
            &sqlfleet_wire::packet::read(&mut raw, 1 << 16)
                .await?
                .payload,
        )?;
        // Session tracking is always asked for: the relay reads what the
        // server says changed (see track_sessions) and strips it for
        // clients that did not ask.
        let want = shape.caps | handshake::SESSION_TRACK;
        // `preferred`: TLS in this same handshake when the server offers it
        // over TCP, plain otherwise (as the mysql client's PREFERRED).
        let tls = self.tls.as_ref().filter(|_| {
            !self.tls_optional || (b.socket.is_none() && hello.caps & handshake::SSL != 0)
        });
        let caps = handshake::client_caps(&hello, want, false, tls.is_some());
        let (mut stream, seq) = match tls {
            None => (raw, 1),
            Some(tls) => {
                if hello.caps & handshake::SSL == 0 {
                    return Err(WireError::Protocol(
                        "backend does not offer TLS, which the relay is configured to require"
                            .into(),
                    ));
                }
                let ext = shape.ext & hello.ext;
                let t = sqlfleet_conn::tls::start(raw, tls, &b.host, caps, ext, shape.collation)
                    .await
                    .map_err(|e| match e {
                        sqlfleet_conn::tls::StartTlsError::Wire(e) => e,
                        e => WireError::Protocol(format!("TLS to backend: {e}")),
                    })?;
                (AnyStream(Box::new(t)), 2)
            }
        };
        let cred = account.map_or_else(
            || Credential::Password(self.password.clone()),
            |a| a.credential.clone(),
        );
        handshake::respond(
            &mut stream,
            &hello,
            &handshake::Response {
                seq,
                caps,
                ext: shape.ext & hello.ext,
                user: account.map_or(&self.user, |a| &a.user),
                cred: &cred,
                collation: shape.collation,
                database: None,
                secure: tls.is_some(),
            },
        )
        .await?;
        let mut io = PacketIo::new(stream);
        if caps & handshake::COMPRESS != 0 {
            io.compress(true);
        }
        Ok(Login {
            io,
            caps: want & SESSION_SHAPE & hello.caps,
            hello,
        })
    }
}

/// Turns on the server's session-state tracking on a fresh connection:
/// every OK then names the session variables that changed (with their
/// values), a new default database, and that something else changed.
/// False when the server has no tracking (the relay then pins on what it
/// cannot see instead).
pub async fn track_sessions(l: &mut impl Link, caps: u32) -> bool {
    if caps & handshake::SESSION_TRACK == 0 {
        return false;
    }
    let set = b"\x03SET session_track_schema = ON, session_track_state_change = ON, \
session_track_system_variables = '*'";
    crate::backend::command::simple(l, set).await.is_ok()
}

/// What a new session on this server tracks (the globals, whatever
/// [`track_sessions`] did to this one): what a tracking client is shown.
pub async fn client_tracking(l: &mut impl Link) -> Option<Arc<TrackView>> {
    let v = crate::backend::command::query_value(
        l,
        "SELECT CONCAT_WS(',,', @@global.session_track_system_variables, @@global.session_track_schema, @@global.session_track_state_change)",
    )
    .await
    .ok()??;
    let mut parts = v.rsplitn(3, ",,");
    let state = parts.next()?;
    let schema = parts.next()?;
    let vars = parts.next()?;
    Some(Arc::new(TrackView::from_values(vars, schema, state)))
}

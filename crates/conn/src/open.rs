//! Opening connections to a [`Target`] with mysql_async.
//!
//! `PREFERRED` TLS is done as the mysql client does it: TLS when the
//! server offers it, plain otherwise. mysql_async has no such mode, so we
//! try TLS and, if the server says it has none, reconnect without and
//! remember that endpoint so later connections skip the failed attempt.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, SslOpts};

use crate::resolve::{Endpoint, Target};
use crate::tls::SslMode;

/// A connection failure, naming the endpoint and user (never the password).
#[derive(Debug, thiserror::Error)]
#[error("{endpoint} (user '{user}'): {what}")]
pub struct ConnectError {
    pub endpoint: String,
    pub user: String,
    pub what: String,
    #[source]
    pub source: Option<mysql_async::Error>,
    /// The server's error code, when the server refused us.
    pub code: Option<u16>,
    /// No connection (or no login) within the connect timeout.
    pub timed_out: bool,
    /// When it timed out: how far the login had got (our own handshake
    /// knows; the driver does not say).
    pub stage: Option<Stage>,
}

/// How far a login had got: what a timeout tells an operator about the
/// server (no TCP connection is a server that is not there; a connection
/// without a greeting, or a login that does not finish, is one that is
/// there but does not answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The TCP (or socket) connection is not established.
    Connecting = 0,
    /// Connected; the server's greeting has not arrived.
    Greeting = 1,
    /// Greeted; TLS and the login exchange have not finished.
    Login = 2,
}

impl Stage {
    /// The stage a login's progress counter holds (`Stage as u8`).
    pub(crate) fn from_u8(v: u8) -> Stage {
        match v {
            0 => Stage::Connecting,
            1 => Stage::Greeting,
            _ => Stage::Login,
        }
    }

    /// A timeout at this stage, worded as the mysql client words it.
    pub(crate) fn timed_out(self, endpoint: &Endpoint, secs: f64) -> String {
        match self {
            Stage::Connecting => format!(
                "ERROR 2003 (HY000): Can't connect to server on '{endpoint}' (connect timed out after {secs:.1}s)"
            ),
            Stage::Greeting => format!(
                "ERROR 2013 (HY000): Lost connection to server at 'handshake: reading initial communication packet' (connected to '{endpoint}', no greeting within {secs:.1}s)"
            ),
            Stage::Login => format!(
                "ERROR 2013 (HY000): Lost connection to server at 'handshake: reading authorization packet' ('{endpoint}' greeted but the login did not finish within {secs:.1}s)"
            ),
        }
    }
}

impl ConnectError {
    /// The server's error code, when the server refused us.
    pub fn server_code(&self) -> Option<u16> {
        match &self.source {
            Some(mysql_async::Error::Server(s)) => Some(s.code),
            _ => self.code,
        }
    }
}

fn plain_endpoints() -> &'static Mutex<HashSet<String>> {
    static S: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    S.get_or_init(|| Mutex::new(HashSet::new()))
}

impl Target {
    /// Driver options for this target with the given TLS choice.
    pub fn builder(&self, tls: Option<SslOpts>) -> OptsBuilder {
        let b = OptsBuilder::default()
            .user(Some(self.user.clone()))
            .pass(self.secret().map(|s| s.expose().to_string()))
            .db_name(self.database.clone())
            // Never silently reconnect to a socket found through @@socket:
            // we connect where we were told to.
            .prefer_socket(false)
            .tcp_nodelay(true)
            .stmt_cache_size(0)
            // Known up front, so the driver doesn't spend a round trip
            // asking the server after every connect (the server still
            // enforces its own max_allowed_packet).
            .max_allowed_packet(Some(1 << 30))
            .wait_timeout(Some(28_800))
            // A mysql_old_password account logs in, as with the stock
            // client and sqlfleet's own logins.
            .secure_auth(false)
            // The client's default-character-set, on every new connection.
            .init(
                self.charset
                    .iter()
                    .map(|cs| format!("SET NAMES {cs}"))
                    .collect::<Vec<_>>(),
            );
        let b = match &self.endpoint {
            Endpoint::Tcp { host, port } => b.ip_or_hostname(host.clone()).tcp_port(*port),
            Endpoint::Socket(p) => b.socket(Some(p.to_string_lossy().into_owned())),
        };
        b.ssl_opts(tls)
    }

    /// The TLS options for this target's mode, before any fallback.
    pub fn ssl_opts(&self) -> Option<SslOpts> {
        if matches!(self.endpoint, Endpoint::Socket(_)) {
            return None; // a Unix socket is already local and private
        }
        // (An unreadable CA directory is refused before connecting.)
        let ca = || {
            self.tls
                .ca_files(self.ssl_ca.as_deref())
                .unwrap_or_default()
                .into_iter()
                .map(Into::into)
                .collect::<Vec<_>>()
        };
        // (A key without a certificate was refused when the target was
        // resolved.)
        let identity = self.client_cert().ok().flatten().map(|c| {
            mysql_async::ClientIdentity::new(
                c.cert.to_path_buf().into(),
                c.key.to_path_buf().into(),
            )
        });
        let opts = match self.ssl_mode {
            SslMode::Disabled => return None,
            SslMode::Preferred | SslMode::Required => SslOpts::default()
                .with_danger_accept_invalid_certs(true)
                .with_danger_skip_domain_validation(true),
            // Only the CA named: the driver would trust its built-in
            // public roots beside it, where the stock client and our own
            // logins trust the CA alone.
            SslMode::VerifyCa => SslOpts::default()
                .with_root_certs(ca())
                .with_disable_built_in_roots(true)
                .with_danger_skip_domain_validation(true),
            SslMode::VerifyIdentity => SslOpts::default()
                .with_root_certs(ca())
                .with_disable_built_in_roots(true),
        };
        Some(opts.with_client_identity(identity))
    }

    /// Opts for a one-off driver use (pools etc.), honouring a known
    /// plain-only endpoint for `PREFERRED`.
    pub fn opts(&self) -> Opts {
        let key = self.endpoint.to_string();
        let tls = match self.ssl_mode {
            SslMode::Preferred if plain_endpoints().lock().is_ok_and(|s| s.contains(&key)) => None,
            _ => self.ssl_opts(),
        };
        self.builder(tls).into()
    }

    /// Opens one connection, with a connect timeout.
    pub async fn connect(&self, timeout: Duration) -> Result<Conn, ConnectError> {
        if self.ssl_opts().is_some() {
            if let Some(c) = self.client_cert().map_err(|e| self.tls_refused(e))? {
                c.check_for_driver().map_err(|e| self.tls_refused(e))?;
            }
            self.driver_can_verify().map_err(|e| self.tls_refused(e))?;
        }
        let mut conn = self.connect_as_told(timeout).await?;
        if self.tls.checks_session() {
            let rows: Vec<(String, String)> = conn
                .query(crate::tls_policy::SESSION_TLS_SQL)
                .await
                .map_err(|e| self.connect_error(Some(e), timeout))?;
            if let Err(why) = self.tls.allows_status(&rows) {
                let _ = conn.disconnect().await;
                return Err(self.tls_refused(crate::tls::TlsError::Config(why)));
            }
        }
        Ok(conn)
    }

    /// What this driver cannot check where a verifying mode asks for it:
    /// revocation lists; and the CA directory must be readable.
    fn driver_can_verify(&self) -> Result<(), crate::tls::TlsError> {
        if !matches!(self.ssl_mode, SslMode::VerifyCa | SslMode::VerifyIdentity) {
            return Ok(());
        }
        let unreadable = |dir: &Option<std::path::PathBuf>, e| {
            crate::tls::TlsError::file(dir.as_deref().unwrap_or(std::path::Path::new(".")), e)
        };
        let cas = self
            .tls
            .ca_files(self.ssl_ca.as_deref())
            .map_err(|e| unreadable(&self.tls.capath, e))?;
        if cas.is_empty() {
            return Err(crate::tls::TlsError::NeedsCa(self.ssl_mode));
        }
        let crls = self
            .tls
            .crl_files()
            .map_err(|e| unreadable(&self.tls.crlpath, e))?;
        if !crls.is_empty() {
            return Err(crate::tls::TlsError::Config(
                "this command's driver cannot check certificate revocation lists (ssl-crl, ssl-crlpath); `sqlfleet query` can".into(),
            ));
        }
        Ok(())
    }

    /// Opens one connection as the target says, PREFERRED falling back
    /// to plain text where the server has no TLS.
    async fn connect_as_told(&self, timeout: Duration) -> Result<Conn, ConnectError> {
        let attempt = |opts: Opts| async move {
            match tokio::time::timeout(timeout, Conn::new(opts)).await {
                Ok(r) => r.map_err(Some),
                Err(_) => Err(None),
            }
        };
        match attempt(self.opts()).await {
            Ok(c) => Ok(c),
            Err(Some(mysql_async::Error::Driver(
                mysql_async::DriverError::NoClientSslFlagFromServer,
            ))) if self.ssl_mode == SslMode::Preferred => {
                if let Ok(mut s) = plain_endpoints().lock() {
                    s.insert(self.endpoint.to_string());
                }
                attempt(self.builder(None).into())
                    .await
                    .map_err(|e| self.connect_error(e, timeout))
            }
            Err(e) => Err(self.connect_error(e, timeout)),
        }
    }

    /// A client certificate this login cannot show, as the mysql client
    /// words a TLS setup error.
    fn tls_refused(&self, e: crate::tls::TlsError) -> ConnectError {
        ConnectError {
            endpoint: self.endpoint.to_string(),
            user: self.user.clone(),
            what: format!("ERROR 2026 (HY000): TLS/SSL error: {e}"),
            timed_out: false,
            stage: None,
            code: Some(2026),
            source: None,
        }
    }

    fn connect_error(&self, e: Option<mysql_async::Error>, timeout: Duration) -> ConnectError {
        let what = match &e {
            // The driver does not say how far it got: named as a connect.
            None => Stage::Connecting.timed_out(&self.endpoint, timeout.as_secs_f64()),
            Some(mysql_async::Error::Driver(
                mysql_async::DriverError::NoClientSslFlagFromServer,
            )) => {
                format!(
                    "ssl-mode {} but the server does not offer TLS",
                    self.ssl_mode
                )
            }
            Some(mysql_async::Error::Server(s)) => {
                let mut m = format!("ERROR {} ({}): {}", s.code, s.state, s.message);
                if s.code == 1045
                    && self.ssl_cert.is_some()
                    && matches!(self.endpoint, Endpoint::Socket(_))
                {
                    m.push_str(" (the client certificate was not shown: this command does not use TLS over a Unix socket; connect by TCP to show it)");
                }
                m
            }
            Some(mysql_async::Error::Io(io)) => client_error(&self.endpoint, io),
            // As the stock client says it, and as sqlfleet's own logins do.
            Some(mysql_async::Error::Driver(mysql_async::DriverError::UnknownAuthPlugin {
                name,
            })) => format!(
                "ERROR 2059 (HY000): Authentication plugin '{name}' cannot be loaded: this command's driver logs in with mysql_native_password, caching_sha2_password, client_ed25519 or mysql_old_password"
            ),
            Some(mysql_async::Error::Driver(mysql_async::DriverError::CleartextPluginDisabled)) => {
                "ERROR 2059 (HY000): Authentication plugin 'mysql_clear_password' cannot be loaded: this command's driver does not send the password in clear text (`sqlfleet query` does, over TLS or a Unix socket)".to_string()
            }
            Some(other) => format!("{other}"),
        };
        let plugin = matches!(
            &e,
            Some(mysql_async::Error::Driver(
                mysql_async::DriverError::UnknownAuthPlugin { .. }
                    | mysql_async::DriverError::CleartextPluginDisabled
            ))
        );
        ConnectError {
            endpoint: self.endpoint.to_string(),
            user: self.user.clone(),
            what,
            timed_out: e.is_none(),
            stage: None,
            code: plugin.then_some(2059),
            source: e,
        }
    }
}

/// An I/O failure as the mysql client words it, with its client error
/// code: 2002 (socket), 2003 (TCP, with the system error number), 2005
/// (unknown host), 2013 (lost during the handshake), 2026 (TLS).
fn client_error(endpoint: &Endpoint, e: &mysql_async::IoError) -> String {
    match e {
        mysql_async::IoError::Io(io) => client_io_error(endpoint, io),
        other => format!("ERROR 2026 (HY000): TLS/SSL error: {other}"),
    }
}

/// An I/O failure on the way to a server, in the mysql client's words.
pub(crate) fn client_io_error(endpoint: &Endpoint, io: &std::io::Error) -> String {
    let errno = io.raw_os_error();
    // "111: Connection refused": the number as the client prints it, and its meaning.
    let sys = |n: i32| {
        let text = std::io::Error::from_raw_os_error(n).to_string();
        let text = text
            .split(" (os error")
            .next()
            .unwrap_or_default()
            .to_string();
        format!("{n}: {text}")
    };
    match (endpoint, errno) {
        (Endpoint::Socket(p), Some(n)) => format!(
            "ERROR 2002 (HY000): Can't connect to local server through socket '{}' ({})",
            p.display(),
            sys(n)
        ),
        (Endpoint::Tcp { host, .. }, None) if io.to_string().contains("lookup address") => {
            format!("ERROR 2005 (HY000): Unknown server host '{host}' ({io})")
        }
        (Endpoint::Tcp { .. }, Some(n)) => {
            format!(
                "ERROR 2003 (HY000): Can't connect to server on '{endpoint}' ({})",
                sys(n)
            )
        }
        _ => format!(
            "ERROR 2013 (HY000): Lost connection to server at 'handshake: reading initial communication packet' ({io})"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(mode: SslMode) -> Target {
        Target {
            endpoint: Endpoint::Tcp {
                host: "db.example".into(),
                port: 3306,
            },
            user: "u".into(),
            password: None,
            database: None,
            ssl_mode: mode,
            ssl_ca: Some("/etc/ca.pem".into()),
            ssl_cert: None,
            ssl_key: None,
            tls: Default::default(),
            charset: None,
        }
    }

    /// A verifying mode trusts the CA named and nothing else (the driver
    /// adds its built-in public roots unless told not to).
    #[test]
    fn a_verifying_driver_login_trusts_only_the_ca_named() {
        for (mode, only_named, names_checked) in [
            (SslMode::VerifyCa, true, false),
            (SslMode::VerifyIdentity, true, true),
        ] {
            let o = target(mode).ssl_opts().expect("tls");
            assert_eq!(o.disable_built_in_roots(), only_named, "{mode}");
            assert_eq!(o.root_certs().len(), 1, "{mode}");
            assert_eq!(!o.skip_domain_validation(), names_checked, "{mode}");
        }
        assert!(target(SslMode::Disabled).ssl_opts().is_none());
    }
}

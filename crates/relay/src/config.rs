//! Relay settings: from flags (quick mode) or a TOML file (full mode).
//! Client accounts are kept as hashes only: SHA1(SHA1(pw)) for
//! mysql_native_password, SHA256(SHA256(pw)) for caching_sha2_password.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

mod file;
pub use file::{from_flags, load, ConfigError, Flags};
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backend {
    pub host: String,
    pub port: u16,
    /// A Unix socket instead of TCP (a relay on the database host).
    pub socket: Option<PathBuf>,
    /// Share of the clients it gets relative to the others (default 1).
    pub weight: u32,
    /// A named replica group: it serves only reads a rule sends to the
    /// group; replicas without one serve the read/write split.
    pub group: Option<String>,
    /// The name it goes by in /status, metrics and logs when it is
    /// reached through a socket but known by a `host:port` (a sandbox's
    /// node, as query and watch name it).
    pub name: Option<String>,
}

impl Backend {
    /// The server's name everywhere the relay shows it: the address
    /// given, or the name a socket backend goes by.
    pub fn addr(&self) -> String {
        if let Some(n) = &self.name {
            return n.clone();
        }
        self.socket_addr()
            .unwrap_or_else(|| format!("{}:{}", self.host, self.port))
    }

    /// `unix:/path` of a socket backend.
    pub fn socket_addr(&self) -> Option<String> {
        self.socket
            .as_ref()
            .map(|p| format!("unix:{}", p.display()))
    }

    /// `host[:port]`, `[v6]:port` or `unix:/path` (the shared parser);
    /// `unix:/path as host:port` names a socket backend by the address
    /// others know the server by.
    pub fn parse(s: &str) -> Result<Backend, ConfigError> {
        if let Some((socket, name)) = s.split_once(" as ") {
            let mut b = Backend::parse(socket.trim())?;
            let name = name.trim();
            if b.socket.is_none() {
                return Err(ConfigError::Value(format!(
                    "'{socket} as {name}': only a socket backend (unix:/path) takes a name with 'as'"
                )));
            }
            sqlfleet_conn::addr::parse_address(name, 3306)
                .map_err(|e| ConfigError::Value(format!("the name after 'as': {e}")))?;
            b.name = Some(name.to_string());
            return Ok(b);
        }
        let addr = sqlfleet_conn::addr::parse_address(s, 3306)
            .map_err(|e| ConfigError::Value(e.to_string()))?;
        let (host, port, socket) = match addr {
            sqlfleet_conn::addr::Address::Tcp(h, p) => (h, p, None),
            sqlfleet_conn::addr::Address::Unix(p) => ("localhost".to_string(), 0, Some(p)),
        };
        Ok(Backend {
            host,
            port,
            socket,
            weight: 1,
            group: None,
            name: None,
        })
    }
}

/// Pooling mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A client keeps its backend connection for its whole session.
    Session,
    /// The backend connection goes back to the pool after each
    /// transaction or autocommit statement.
    Transaction,
}

/// A client account's stored hashes.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Account {
    pub native: Option<[u8; 20]>,
    pub sha2: Option<[u8; 32]>,
    /// A server account with a mysql_old_password hash (per-user mode,
    /// servers with secure_auth=0): checked with that plugin only.
    pub old: Option<[u32; 2]>,
}

impl Account {
    pub fn from_password(pw: &str) -> Account {
        Account {
            native: Some(sqlfleet_wire::handshake::native_hash(pw)),
            sha2: Some(sha2_hash(pw)),
            old: None,
        }
    }
}

/// SHA256(SHA256(password)), what caching_sha2_password checks against.
pub fn sha2_hash(pw: &str) -> [u8; 32] {
    let once = Sha256::digest(pw.as_bytes());
    Sha256::digest(once).into()
}

/// Pool sizes and timeouts (reloadable).
#[derive(Debug, Clone, PartialEq)]
pub struct PoolSettings {
    /// Open backend connections per backend, in use or idle.
    pub max: usize,
    /// Kept open even when idle.
    pub min: usize,
    pub idle_timeout: Duration,
    pub max_lifetime: Duration,
    /// A connection idle longer than this is pinged before reuse.
    pub check_after: Duration,
    /// How long a client waits for a connection before ERROR 1040.
    pub wait_timeout: Duration,
    /// Clients allowed to wait at once; more get ERROR 1040 at once.
    pub max_waiters: usize,
    /// Prepared statements kept per backend connection.
    pub statement_cache: usize,
    /// Connections of one backend an account's clients may hold at once
    /// (None: three quarters of `max`, see backend/share.rs).
    pub max_per_account: Option<usize>,
}

impl Default for PoolSettings {
    fn default() -> Self {
        PoolSettings {
            max: 100,
            min: 0,
            idle_timeout: Duration::from_secs(60),
            max_lifetime: Duration::from_secs(3600),
            check_after: Duration::from_secs(1),
            wait_timeout: Duration::from_secs(5),
            max_waiters: 10_000,
            statement_cache: 256,
            max_per_account: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Refuse clients that do not switch to TLS.
    pub require: bool,
}

pub use crate::routing::read::Consistency;

/// Backend roles and read routing. Roles come from health checks: a
/// writable server (read_only=0) is the primary, read_only ones replicas.
#[derive(Debug, Clone, PartialEq)]
pub struct Routing {
    /// Autocommit reads go to replicas (transaction mode only).
    pub read_write_split: bool,
    pub consistency: Consistency,
    /// Replicas further behind than this get no reads.
    pub max_lag: Duration,
    pub health_interval: Duration,
    /// How long a replica may wait for a client's write before the read
    /// goes to the primary.
    pub consistency_wait: Duration,
    /// On a Galera cluster: one writer at a time, or every node.
    pub galera_writers: crate::routing::galera::Writers,
    /// On a Galera cluster: a node with more write sets than this waiting
    /// to be applied takes no reads (0: no limit).
    pub galera_max_recv_queue: u64,
    /// Several writable servers that are not a Galera cluster share the
    /// writes. Off: while more than one is writable the relay refuses the
    /// writes (asynchronous primaries written both would diverge: a
    /// failover that left the old primary writable, a replica someone set
    /// read_only=0 on).
    pub multi_primary: bool,
    /// Settings of `routing::defaults::READ_DEFAULTS` a replica's sessions
    /// may have otherwise than the primary's and still take reads (the
    /// operator's word that the difference is meant, e.g. a reporting
    /// replica's longer group_concat_max_len).
    pub settings_may_differ: Vec<String>,
}

impl Default for Routing {
    fn default() -> Self {
        Routing {
            read_write_split: false,
            // Read-your-writes: a split that loses a client's own write
            // is never the default (`none` is an explicit choice).
            consistency: Consistency::Session,
            max_lag: Duration::from_secs(10),
            health_interval: Duration::from_millis(500),
            consistency_wait: Duration::from_secs(1),
            galera_writers: crate::routing::galera::Writers::One,
            galera_max_recv_queue: 100,
            multi_primary: false,
            settings_may_differ: Vec::new(),
        }
    }
}

/// Transaction replay: a transaction the writer's death interrupted runs
/// again on the new writer when every reply it gave can be shown the same
/// (`frontend/session/journal.rs`, `replay.rs`).
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// Most statement bytes recorded per transaction (a larger one is
    /// not replayed); 0: replay is off.
    pub max_bytes: usize,
    /// How long a replay waits for a server to run it on.
    pub wait: Duration,
    /// What the comparison of replies leaves out.
    pub leave: crate::protocol::digest::Leave,
}

impl Default for Replay {
    fn default() -> Self {
        Replay {
            max_bytes: 1 << 20,
            wait: Duration::from_secs(30),
            leave: crate::protocol::digest::Leave::Nothing,
        }
    }
}

pub use crate::routing::rules::{RouteTo, Rule};

/// What SIGHUP reloads.
#[derive(Clone, Default)]
pub struct Dynamic {
    pub users: HashMap<String, Account>,
    pub pool: PoolSettings,
    pub rules: Vec<Rule>,
    /// The result cache's rules and size.
    pub cache: crate::routing::cache_rules::CacheSettings,
}

#[derive(Clone)]
pub struct RelayConfig {
    /// `HOST:PORT` or `unix:/path`.
    pub listen: Vec<String>,
    pub backends: Vec<Backend>,
    pub backend_user: String,
    pub backend_password: String,
    /// TLS towards backends.
    pub backend_tls: BackendTls,
    /// Per-user backend accounts: each client's backend connections log in
    /// as that client (same name and password), pooled per account; the
    /// relay's own account only runs health checks. Otherwise every client
    /// shares the relay's backend account and its privileges.
    pub per_user_accounts: bool,
    /// With a shared account, dynamic SQL run from a text the relay cannot
    /// read (`PREPARE s FROM @q`, `EXECUTE IMMEDIATE CONCAT(...)`) goes to
    /// the server (`shared_dynamic_sql = "run"`) instead of being refused:
    /// it could run a KILL of another client's connection or change the
    /// account every client shares.
    pub shared_dynamic_sql: bool,
    pub mode: Mode,
    /// Event-loop threads: each serves its share of the clients on its
    /// own (one per core by default).
    pub threads: usize,
    /// Clients connected at once; more get ERROR 1040 at the handshake.
    /// None: [`RelayConfig::client_limit`] sizes it to the open-file limit.
    pub max_clients: Option<usize>,
    pub tls: Option<TlsFiles>,
    /// caching_sha2_password: always ask for the full password (over TLS)
    /// instead of the scramble.
    pub sha2_full_auth: bool,
    pub metrics: Option<String>,
    /// Bearer token the admin pages ask for (required when they listen
    /// beyond loopback).
    pub metrics_token: Option<String>,
    pub max_packet: usize,
    pub routing: Routing,
    pub replay: Replay,
    pub dynamic: Dynamic,
}

impl RelayConfig {
    /// How many clients may be connected at once: the configured number,
    /// or what the open-file limit (`open_files`) leaves after every
    /// backend connection the pool may open and a reserve for listeners,
    /// lookups and health checks.
    pub fn client_limit(&self, open_files: u64) -> usize {
        self.max_clients.unwrap_or_else(|| {
            let backend = self.backends.len() * self.dynamic.pool.max * 2;
            (open_files as usize).saturating_sub(backend + 128).max(64)
        })
    }

    /// Backend `b` as the relay's own account reaches it, for the driver
    /// the other commands use (the cache's binlog follower).
    pub fn backend_target(&self, b: &Backend) -> sqlfleet_conn::Target {
        use sqlfleet_conn::{Endpoint, PasswordSpec, Secret, SslMode};
        let (ssl_mode, ssl_ca) = match &self.backend_tls {
            BackendTls::Disabled => (SslMode::Disabled, None),
            BackendTls::Preferred => (SslMode::Preferred, None),
            BackendTls::Required => (SslMode::Required, None),
            BackendTls::Verify(ca) => (SslMode::VerifyIdentity, Some(ca.clone())),
        };
        sqlfleet_conn::Target {
            endpoint: match &b.socket {
                Some(p) => Endpoint::Socket(p.clone()),
                None => Endpoint::Tcp {
                    host: b.host.clone(),
                    port: b.port,
                },
            },
            user: self.backend_user.clone(),
            password: Some(PasswordSpec::Given(Secret::new(
                self.backend_password.clone(),
            ))),
            database: None,
            ssl_mode: if b.socket.is_some() {
                SslMode::Disabled
            } else {
                ssl_mode
            },
            ssl_ca,
            ssl_cert: None,
            ssl_key: None,
            tls: Default::default(),
            charset: None,
        }
    }
}

impl std::fmt::Debug for RelayConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayConfig")
            .field("listen", &self.listen)
            .field("backends", &self.backends)
            .field("backend_user", &self.backend_user)
            .field("mode", &self.mode)
            .field("users", &self.dynamic.users.keys().collect::<Vec<_>>())
            .field("pool", &self.dynamic.pool)
            .finish_non_exhaustive()
    }
}

/// Parses `NAME:PASSWORD` into the stored form.
pub fn parse_user(s: &str) -> Result<(String, Account), ConfigError> {
    let bad = |why: &str| ConfigError::Value(why.to_string());
    let (name, pw) = s
        .split_once(':')
        .ok_or_else(|| bad("--client-user takes NAME:PASSWORD"))?;
    if name.is_empty() {
        return Err(bad("--client-user: empty user name"));
    }
    Ok((name.to_string(), Account::from_password(pw)))
}

/// The accounts of a `--client-users-file`: one `NAME:PASSWORD` per line;
/// blank lines and `#` comments are skipped; a bad line is an error naming
/// `origin` and its line number.
pub fn parse_users_file(text: &str, origin: &str) -> Result<Vec<(String, Account)>, ConfigError> {
    let at = |line: usize, why: String| ConfigError::At {
        path: format!("{origin}:{line}"),
        msg: why,
    };
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let l = l.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        if !l.contains(':') {
            return Err(at(i + 1, "expected NAME:PASSWORD".into()));
        }
        out.push(parse_user(l).map_err(|e| at(i + 1, e.to_string()))?);
    }
    Ok(out)
}

/// Both stored forms of a password, as the config file takes them.
pub fn hash_lines(pw: &str) -> String {
    let a = Account::from_password(pw);
    let h = |b: &[u8]| b.iter().map(|x| format!("{x:02X}")).collect::<String>();
    format!(
        "native_hash = \"*{}\"\nsha2_hash = \"{}\"\n",
        h(&a.native.unwrap_or_default()),
        h(&a.sha2.unwrap_or_default())
    )
}

/// TLS towards backends, as the file's `backend.tls` (or quick mode's
/// `--ssl-mode`) says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum BackendTls {
    /// Plain.
    #[default]
    Disabled,
    /// TLS over TCP when the server offers it, plain otherwise (and over a
    /// Unix socket); the certificate is not checked.
    Preferred,
    /// TLS or no connection; the certificate is not checked.
    Required,
    /// TLS, the certificate chained to this CA and naming the backend host.
    Verify(PathBuf),
}

/// `disabled` | `preferred` | `required` | `verify` (with a CA file) into
/// the config form.
pub fn backend_tls(mode: Option<&str>, ca: Option<PathBuf>) -> Result<BackendTls, ConfigError> {
    let bad = |why: String| Err(ConfigError::Value(why));
    match (mode.unwrap_or("disabled"), ca) {
        ("disabled", None) => Ok(BackendTls::Disabled),
        ("preferred", None) => Ok(BackendTls::Preferred),
        ("required", None) => Ok(BackendTls::Required),
        ("verify", Some(ca)) => Ok(BackendTls::Verify(ca)),
        ("verify", None) => bad("verify needs a CA file (tls_ca)".into()),
        ("disabled" | "preferred" | "required", Some(_)) => {
            bad("a CA file is only used with verify".into())
        }
        (other, _) => bad(format!(
            "{other:?}: use disabled, preferred, required or verify"
        )),
    }
}

/// `host`, `host:port`, `[v6]:port`.
pub fn parse_addr(s: &str) -> Result<(String, u16), ConfigError> {
    sqlfleet_conn::addr::parse_addr(s, 3306).map_err(|e| ConfigError::Value(e.to_string()))
}

#[cfg(test)]
mod tests;

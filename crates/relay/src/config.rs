//! Relay settings: from flags (quick mode) or a TOML file (full mode).
//! Client accounts are kept as hashes only: SHA1(SHA1(pw)) for
//! mysql_native_password, SHA256(SHA256(pw)) for caching_sha2_password.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
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
}

impl Backend {
    pub fn addr(&self) -> String {
        match &self.socket {
            Some(p) => format!("unix:{}", p.display()),
            None => format!("{}:{}", self.host, self.port),
        }
    }

    /// `host[:port]`, `[v6]:port` or `unix:/path`.
    pub fn parse(s: &str) -> Result<Backend, String> {
        if let Some(p) = s.strip_prefix("unix:") {
            if p.is_empty() {
                return Err("empty socket path".into());
            }
            return Ok(Backend {
                host: "localhost".into(),
                port: 0,
                socket: Some(PathBuf::from(p)),
                weight: 1,
                group: None,
            });
        }
        let (host, port) = parse_addr(s)?;
        Ok(Backend {
            host,
            port,
            socket: None,
            weight: 1,
            group: None,
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
}

impl Account {
    pub fn from_password(pw: &str) -> Account {
        Account {
            native: Some(sqlfleet_wire::handshake::native_hash(pw)),
            sha2: Some(sha2_hash(pw)),
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

/// Read-your-writes for reads sent to replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Consistency {
    /// Replicas may lag.
    None,
    /// A client's reads see its own writes: the replica waits for the
    /// client's last write (MASTER_GTID_WAIT, bounded), else the primary.
    Session,
    /// Reads see every write committed before they arrived: the replica
    /// waits for the primary's current binlog position (one small query to
    /// the primary per read), else the primary.
    Global,
}

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
}

impl Default for Routing {
    fn default() -> Self {
        Routing {
            read_write_split: false,
            consistency: Consistency::None,
            max_lag: Duration::from_secs(10),
            health_interval: Duration::from_millis(500),
            consistency_wait: Duration::from_secs(1),
        }
    }
}

/// Where a rule sends a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RouteTo {
    Primary,
    Replica,
}

/// An ordered query rule; the first that matches applies.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub digest: Option<String>,
    pub regex: Option<regex::Regex>,
    pub user: Option<String>,
    pub schema: Option<String>,
    pub route: Option<RouteTo>,
    /// With `route = "replica"`: replicas of this group.
    pub group: Option<String>,
    pub reject: Option<String>,
    /// `false`: the client is pinned to its connection after a match.
    pub multiplex: bool,
}

/// What SIGHUP reloads.
#[derive(Clone, Default)]
pub struct Dynamic {
    pub users: HashMap<String, Account>,
    pub pool: PoolSettings,
    pub rules: Vec<Rule>,
}

#[derive(Clone)]
pub struct RelayConfig {
    /// `HOST:PORT` or `unix:/path`.
    pub listen: Vec<String>,
    pub backends: Vec<Backend>,
    pub backend_user: String,
    pub backend_password: String,
    /// TLS towards backends: `Some(None)` encrypts without checking the
    /// certificate, `Some(Some(ca))` checks it against `ca`.
    pub backend_tls: Option<Option<PathBuf>>,
    pub mode: Mode,
    pub tls: Option<TlsFiles>,
    /// caching_sha2_password: always ask for the full password (over TLS)
    /// instead of the scramble.
    pub sha2_full_auth: bool,
    pub metrics: Option<String>,
    pub max_packet: usize,
    pub routing: Routing,
    pub dynamic: Dynamic,
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
pub fn parse_user(s: &str) -> Result<(String, Account), String> {
    let (name, pw) = s.split_once(':').ok_or("--user takes NAME:PASSWORD")?;
    if name.is_empty() {
        return Err("--user: empty user name".into());
    }
    Ok((name.to_string(), Account::from_password(pw)))
}

// ---- the TOML file ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    relay: RelaySection,
    backend: BackendSection,
    #[serde(default)]
    pool: PoolSection,
    tls: Option<TlsSection>,
    #[serde(default)]
    users: Vec<UserSection>,
    #[serde(default)]
    routing: RoutingSection,
    #[serde(default)]
    rules: Vec<RuleSection>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RoutingSection {
    read_write_split: Option<bool>,
    consistency: Option<Consistency>,
    max_lag: Option<f64>,
    health_interval: Option<f64>,
    consistency_wait: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleSection {
    name: Option<String>,
    match_digest: Option<String>,
    match_regex: Option<String>,
    user: Option<String>,
    schema: Option<String>,
    route: Option<RouteTo>,
    group: Option<String>,
    reject: Option<String>,
    multiplex: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RelaySection {
    listen: Vec<String>,
    #[serde(default = "default_mode")]
    mode: Mode,
    metrics: Option<String>,
    max_packet: Option<usize>,
    #[serde(default)]
    sha2_full_auth: bool,
}

fn default_mode() -> Mode {
    Mode::Transaction
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BackendSection {
    servers: Vec<String>,
    user: String,
    password: Option<String>,
    password_file: Option<PathBuf>,
    password_env: Option<String>,
    /// "disabled" (default), "required" or "verify".
    tls: Option<String>,
    tls_ca: Option<PathBuf>,
    /// One weight per server (default 1 each).
    weights: Option<Vec<u32>>,
    /// One replica group name per server ("" for none).
    groups: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct PoolSection {
    max: Option<usize>,
    min: Option<usize>,
    idle_timeout: Option<f64>,
    max_lifetime: Option<f64>,
    check_after: Option<f64>,
    wait_timeout: Option<f64>,
    max_waiters: Option<usize>,
    statement_cache: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsSection {
    cert: PathBuf,
    key: PathBuf,
    #[serde(default)]
    require: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UserSection {
    name: String,
    /// `*HEX` as in mysql.user (SHA1(SHA1(pw))).
    native_hash: Option<String>,
    /// Hex SHA256(SHA256(pw)).
    sha2_hash: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {msg}")]
    At { path: String, msg: String },
}

fn secs(v: Option<f64>, default: Duration, what: &str) -> Result<Duration, String> {
    match v {
        None => Ok(default),
        Some(s) if s.is_finite() && s >= 0.0 => Ok(Duration::from_secs_f64(s)),
        Some(s) => Err(format!(
            "{what} = {s}: must be a non-negative number of seconds"
        )),
    }
}

fn hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let s = s.trim_start_matches('*');
    if s.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
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

/// Reads and checks a config file. Errors name the file and, for TOML
/// syntax and unknown keys, the line.
pub fn load(path: &Path) -> Result<RelayConfig, ConfigError> {
    let p = path.display().to_string();
    let at = |msg: String| ConfigError::At {
        path: p.clone(),
        msg,
    };
    let text = std::fs::read_to_string(path).map_err(|e| at(e.to_string()))?;
    let f: File = toml::from_str(&text).map_err(|e| {
        let line = e.span().map(|s| {
            text.as_bytes()[..s.start.min(text.len())]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1
        });
        match line {
            Some(l) => at(format!("line {l}: {}", e.message())),
            None => at(e.message().to_string()),
        }
    })?;
    build(f).map_err(at)
}

fn build(f: File) -> Result<RelayConfig, String> {
    if f.relay.listen.is_empty() {
        return Err("relay.listen: give at least one address".into());
    }
    let mut backends = Vec::new();
    for s in &f.backend.servers {
        backends.push(Backend::parse(s).map_err(|e| format!("backend.servers: {s}: {e}"))?);
    }
    if backends.is_empty() {
        return Err("backend.servers: give at least one server".into());
    }
    if let Some(w) = &f.backend.weights {
        if w.len() != backends.len() || w.contains(&0) {
            return Err(format!(
                "backend.weights: give one positive weight per server ({} servers, {} weights)",
                backends.len(),
                w.len()
            ));
        }
        for (b, w) in backends.iter_mut().zip(w) {
            b.weight = *w;
        }
    }
    if let Some(g) = &f.backend.groups {
        if g.len() != backends.len() {
            return Err(format!(
                "backend.groups: give one group name (or \"\") per server ({} servers, {} names)",
                backends.len(),
                g.len()
            ));
        }
        for (b, g) in backends.iter_mut().zip(g) {
            b.group = (!g.is_empty()).then(|| g.clone());
        }
    }
    let password = match (
        &f.backend.password,
        &f.backend.password_file,
        &f.backend.password_env,
    ) {
        (Some(p), None, None) => p.clone(),
        (None, Some(file), None) => std::fs::read_to_string(file)
            .map_err(|e| format!("backend.password_file {}: {e}", file.display()))?
            .trim_end_matches(['\n', '\r'])
            .to_string(),
        (None, None, Some(var)) => {
            std::env::var(var).map_err(|_| format!("backend.password_env: ${var} is not set"))?
        }
        (None, None, None) => String::new(),
        _ => return Err("backend: give one of password, password_file, password_env".into()),
    };
    let mut users = HashMap::new();
    for (i, u) in f.users.iter().enumerate() {
        let native = match &u.native_hash {
            Some(h) => Some(hex::<20>(h).ok_or_else(|| {
                format!(
                    "users[{i}] ({}): native_hash must be * and 40 hex digits",
                    u.name
                )
            })?),
            None => None,
        };
        let sha2 = match &u.sha2_hash {
            Some(h) => Some(hex::<32>(h).ok_or_else(|| {
                format!("users[{i}] ({}): sha2_hash must be 64 hex digits", u.name)
            })?),
            None => None,
        };
        if native.is_none() && sha2.is_none() {
            return Err(format!(
                "users[{i}] ({}): give native_hash and/or sha2_hash (see `sqlfleet relay --hash-password`)",
                u.name
            ));
        }
        if users
            .insert(u.name.clone(), Account { native, sha2 })
            .is_some()
        {
            return Err(format!("users: {} is listed twice", u.name));
        }
    }
    let d = PoolSettings::default();
    let pool = PoolSettings {
        max: f.pool.max.unwrap_or(d.max).max(1),
        min: f.pool.min.unwrap_or(d.min),
        idle_timeout: secs(f.pool.idle_timeout, d.idle_timeout, "pool.idle_timeout")?,
        max_lifetime: secs(f.pool.max_lifetime, d.max_lifetime, "pool.max_lifetime")?,
        check_after: secs(f.pool.check_after, d.check_after, "pool.check_after")?,
        wait_timeout: secs(f.pool.wait_timeout, d.wait_timeout, "pool.wait_timeout")?,
        max_waiters: f.pool.max_waiters.unwrap_or(d.max_waiters),
        statement_cache: f.pool.statement_cache.unwrap_or(d.statement_cache).max(1),
    };
    if pool.min > pool.max {
        return Err(format!(
            "pool.min ({}) exceeds pool.max ({})",
            pool.min, pool.max
        ));
    }
    let d = Routing::default();
    let r = &f.routing;
    let routing = Routing {
        read_write_split: r.read_write_split.unwrap_or(false),
        consistency: r.consistency.unwrap_or(Consistency::None),
        max_lag: secs(r.max_lag, d.max_lag, "routing.max_lag")?,
        health_interval: secs(
            r.health_interval,
            d.health_interval,
            "routing.health_interval",
        )?,
        consistency_wait: secs(
            r.consistency_wait,
            d.consistency_wait,
            "routing.consistency_wait",
        )?,
    };
    if routing.health_interval.is_zero() {
        return Err("routing.health_interval must be above 0".into());
    }
    let mut rules = Vec::new();
    for (i, r) in f.rules.into_iter().enumerate() {
        let name = r.name.clone().unwrap_or_else(|| format!("rule{}", i + 1));
        let at = |m: &str| format!("rules[{i}] ({name}): {m}");
        if r.match_digest.is_none() && r.match_regex.is_none() {
            return Err(at("give match_digest or match_regex"));
        }
        if r.route.is_none() && r.reject.is_none() && r.multiplex.is_none() {
            return Err(at("give route, reject or multiplex"));
        }
        if let Some(g) = &r.group {
            if r.route != Some(RouteTo::Replica) {
                return Err(at("group goes with route = \"replica\""));
            }
            if !backends.iter().any(|b| b.group.as_ref() == Some(g)) {
                return Err(at(&format!("no server is in group {g:?} (backend.groups)")));
            }
        }
        let regex = match &r.match_regex {
            Some(x) => Some(regex::Regex::new(x).map_err(|e| at(&format!("match_regex: {e}")))?),
            None => None,
        };
        rules.push(Rule {
            digest: r.match_digest.map(|d| crate::sql::digest(d.as_bytes())),
            regex,
            user: r.user,
            schema: r.schema,
            route: r.route,
            group: r.group,
            reject: r.reject,
            multiplex: r.multiplex.unwrap_or(true),
            name,
        });
    }
    let tls = f.tls.map(|t| TlsFiles {
        cert: t.cert,
        key: t.key,
        require: t.require,
    });
    let backend_tls = backend_tls(f.backend.tls.as_deref(), f.backend.tls_ca)
        .map_err(|e| format!("backend.tls: {e}"))?;
    Ok(RelayConfig {
        listen: f.relay.listen,
        backends,
        backend_user: f.backend.user,
        backend_password: password,
        backend_tls,
        mode: f.relay.mode,
        tls,
        sha2_full_auth: f.relay.sha2_full_auth,
        metrics: f.relay.metrics,
        max_packet: f.relay.max_packet.unwrap_or(1 << 30),
        routing,
        dynamic: Dynamic { users, pool, rules },
    })
}

/// `disabled` | `required` | `verify` (with a CA file) into the config form.
pub fn backend_tls(
    mode: Option<&str>,
    ca: Option<PathBuf>,
) -> Result<Option<Option<PathBuf>>, String> {
    match (mode.unwrap_or("disabled"), ca) {
        ("disabled", None) => Ok(None),
        ("required", None) => Ok(Some(None)),
        ("verify", Some(ca)) => Ok(Some(Some(ca))),
        ("verify", None) => Err("verify needs a CA file (tls_ca)".into()),
        ("disabled" | "required", Some(_)) => Err("a CA file is only used with verify".into()),
        (other, _) => Err(format!("{other:?}: use disabled, required or verify")),
    }
}

/// `host`, `host:port`, `[v6]:port`.
pub fn parse_addr(s: &str) -> Result<(String, u16), String> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, after) = rest.split_once(']').ok_or("unclosed [")?;
        (h.to_string(), after.strip_prefix(':'))
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (s.to_string(), None),
        }
    };
    let port = match port {
        Some(p) => p.parse().map_err(|_| format!("bad port {p:?}"))?,
        None => 3306,
    };
    if host.is_empty() {
        return Err("empty host".into());
    }
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().expect("tmp");
        std::fs::write(f.path(), text).expect("write");
        f
    }

    #[test]
    fn a_full_file() {
        let hashes = hash_lines("app-pw");
        let f = write(&format!(
            r#"
[relay]
listen = ["127.0.0.1:6033", "unix:/tmp/r.sock"]
mode = "session"
metrics = "127.0.0.1:9104"

[backend]
servers = ["db1:3307", "db2"]
user = "relay"
password = "x"

[pool]
max = 20
min = 2
wait_timeout = 0.5

[[users]]
name = "app"
{hashes}
"#
        ));
        let c = load(f.path()).expect("loads");
        assert_eq!(c.mode, Mode::Session);
        assert_eq!(c.backends[1].addr(), "db2:3306");
        assert_eq!(c.dynamic.pool.max, 20);
        assert_eq!(c.dynamic.pool.wait_timeout, Duration::from_millis(500));
        assert!(c.dynamic.users["app"] == Account::from_password("app-pw"));
    }

    #[test]
    fn errors_name_the_line() {
        let f = write(
            "[relay]\nlisten = [\"a:1\"]\nbogus = 1\n[backend]\nservers=[\"x\"]\nuser=\"u\"\n",
        );
        let e = load(f.path()).map(|_| ()).expect_err("fails").to_string();
        assert!(e.contains("line 3") && e.contains("bogus"), "{e}");
        let f = write("[relay]\nlisten = [\"a:1\"]\n[backend]\nservers=[\"x\"]\nuser=\"u\"\n[[users]]\nname=\"a\"\nnative_hash=\"*12\"\n");
        let e = load(f.path()).map(|_| ()).expect_err("fails").to_string();
        assert!(e.contains("native_hash"), "{e}");
        let f = write("[relay]\nlisten = [\"a:1\"]\n[backend]\nservers=[\"x\", \"y\"]\nuser=\"u\"\ngroups = [\"\", \"olap\"]\n[[rules]]\nmatch_regex=\"x\"\nroute=\"replica\"\ngroup=\"oltp\"\n");
        let e = load(f.path()).map(|_| ()).expect_err("fails").to_string();
        assert!(e.contains("no server is in group \"oltp\""), "{e}");
        let f = write("[relay\n");
        let e = load(f.path()).map(|_| ()).expect_err("fails").to_string();
        assert!(e.contains("line 1"), "{e}");
    }
}

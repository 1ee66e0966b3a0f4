//! The TOML config file: its sections, checks, and errors that name the
//! file and line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::*;

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
    #[serde(default)]
    replay: ReplaySection,
    #[serde(default)]
    cache: CacheSection,
    #[serde(default)]
    cache_rules: Vec<CacheRuleSection>,
}

/// `[cache]`: the result cache's size (its rules are `[[cache_rules]]`).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CacheSection {
    /// All entries together at most, in bytes (default 64 MiB).
    max_bytes: Option<usize>,
    /// Follow the primary's binary log, so that writes made elsewhere make
    /// entries stale (default true); false: they wait for the ttl.
    binlog: Option<bool>,
    /// Seconds: entries are given only while the binlog follower has read
    /// everything committed up to this long ago (default 1).
    max_lag: Option<f64>,
    /// The replica id the follower registers with (default: one derived
    /// from this host and the relay's listen address).
    server_id: Option<u32>,
}

/// `[[cache_rules]]`: which SELECTs' results are cached, how long.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CacheRuleSection {
    name: Option<String>,
    match_digest: Option<String>,
    match_regex: Option<String>,
    /// `table` or `db.table`: the statement names one of them.
    tables: Option<Vec<String>>,
    user: Option<String>,
    /// Seconds an entry is given at most (writes made elsewhere than
    /// through the relay are seen after it).
    ttl: f64,
    /// Replies larger than this are not kept (default 1 MiB).
    max_entry_bytes: Option<usize>,
}

/// The cache's rules, checked.
fn cache_settings(
    c: CacheSection,
    rules: Vec<CacheRuleSection>,
) -> Result<crate::routing::cache_rules::CacheSettings, String> {
    use crate::routing::cache_rules::{CacheRule, CacheSettings, FollowSettings};
    let mut out = Vec::new();
    for (i, r) in rules.into_iter().enumerate() {
        let name = r.name.clone().unwrap_or_else(|| format!("cache{}", i + 1));
        let at = |m: &str| format!("cache_rules[{i}] ({name}): {m}");
        if r.match_digest.is_none() && r.match_regex.is_none() && r.tables.is_none() {
            return Err(at("give match_digest, match_regex or tables"));
        }
        if !(r.ttl > 0.0 && r.ttl <= 86_400.0) {
            return Err(at("ttl: seconds above 0, at most 86400"));
        }
        let regex = match &r.match_regex {
            Some(x) => Some(regex::Regex::new(x).map_err(|e| at(&format!("match_regex: {e}")))?),
            None => None,
        };
        out.push(CacheRule {
            digest: r
                .match_digest
                .map(|d| crate::protocol::sql::digest(d.as_bytes())),
            regex,
            tables: r
                .tables
                .unwrap_or_default()
                .into_iter()
                .map(|t| t.to_ascii_lowercase())
                .collect(),
            user: r.user,
            ttl: Duration::from_secs_f64(r.ttl),
            max_entry_bytes: r.max_entry_bytes.unwrap_or(1 << 20),
            name,
        });
    }
    let max_bytes = c.max_bytes.unwrap_or(64 << 20);
    if max_bytes == 0 {
        return Err("cache.max_bytes: at least 1".into());
    }
    let max_lag = c.max_lag.unwrap_or(1.0);
    if !(0.05..=3600.0).contains(&max_lag) {
        return Err("cache.max_lag: seconds, at least 0.05, at most 3600".into());
    }
    if c.server_id == Some(0) {
        return Err("cache.server_id: 1 to 4294967295 (0 is not a replica id)".into());
    }
    let follow = c.binlog.unwrap_or(true).then(|| FollowSettings {
        max_lag: Duration::from_secs_f64(max_lag),
        server_id: c.server_id,
    });
    Ok(CacheSettings {
        rules: out,
        max_bytes,
        follow,
    })
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ReplaySection {
    /// Transaction replay on failover (default true).
    enabled: Option<bool>,
    /// Most statement bytes recorded per transaction (default 1 MiB).
    max_bytes: Option<usize>,
    /// Seconds a replay waits for a server (default 30).
    wait: Option<f64>,
    /// "full" (default): a replay must give every reply as before,
    /// generated keys included; "results": all but the last insert id.
    checksum: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RoutingSection {
    read_write_split: Option<bool>,
    consistency: Option<Consistency>,
    max_lag: Option<f64>,
    health_interval: Option<f64>,
    consistency_wait: Option<f64>,
    galera_writers: Option<crate::routing::galera::Writers>,
    galera_max_recv_queue: Option<u64>,
    multi_primary: Option<bool>,
    settings_may_differ: Option<Vec<String>>,
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
    /// A file holding the bearer token the admin pages require.
    metrics_token_file: Option<PathBuf>,
    max_packet: Option<usize>,
    #[serde(default)]
    sha2_full_auth: bool,
    /// Event-loop threads (default: one per core).
    threads: Option<usize>,
    /// Clients connected at once; more get ERROR 1040 at the handshake
    /// (default: what the open-file limit leaves after the backends).
    max_clients: Option<usize>,
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
    /// "disabled" (default), "preferred", "required" or "verify".
    tls: Option<String>,
    /// "per-user" (default: each client's connections log in to the
    /// server as that client, so the server applies its own privileges)
    /// or "shared" (every client runs as `user`).
    accounts: Option<String>,
    /// With `accounts = "shared"`: "refuse" (default) or "run" dynamic SQL
    /// whose text the relay cannot read.
    shared_dynamic_sql: Option<String>,
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
    max_per_account: Option<usize>,
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

/// The quick-mode command-line flags: turned into the file's sections and
/// checked by the same code, so a flag is refused exactly when the file
/// would refuse the same setting.
pub struct Flags {
    pub listen: Vec<String>,
    pub backends: Vec<String>,
    pub backend_user: String,
    pub backend_password: String,
    pub backend_tls: Option<String>,
    pub backend_tls_ca: Option<PathBuf>,
    /// Every client runs as the backend account (`--shared-account`).
    pub shared_account: bool,
    pub mode: Mode,
    pub threads: Option<usize>,
    pub metrics: Option<String>,
    pub metrics_token_file: Option<PathBuf>,
    pub pool_max: usize,
    pub pool_min: usize,
    pub wait_timeout: f64,
    pub idle_timeout: f64,
    pub max_lifetime: f64,
    pub read_write_split: bool,
    pub consistency: Consistency,
    pub max_lag: f64,
    pub health_interval: f64,
    /// (certificate, key, require TLS)
    pub tls: Option<(PathBuf, PathBuf, bool)>,
    pub users: HashMap<String, Account>,
}

/// File keys and the flags that set them, for errors about flags.
const FLAG_NAMES: &[(&str, &str)] = &[
    ("relay.listen", "--listen"),
    ("relay.metrics_token_file", "--metrics-token-file"),
    ("relay.metrics", "--metrics"),
    ("relay.threads", "--threads"),
    ("backend.servers", "--backend"),
    ("backend.tls", "--ssl-mode"),
    ("backend.accounts", "--shared-account"),
    ("pool.max", "--pool-max"),
    ("pool.min", "--pool-min"),
    ("pool.wait_timeout", "--wait-timeout"),
    ("pool.idle_timeout", "--idle-timeout"),
    ("pool.max_lifetime", "--max-lifetime"),
    ("routing.max_lag", "--max-lag"),
    ("routing.health_interval", "--health-interval"),
];

/// A configuration from quick-mode flags.
pub fn from_flags(q: Flags) -> Result<RelayConfig, ConfigError> {
    // Per-user, the accounts are the server's; a shared account needs
    // the relay's own list of who may log in.
    if q.shared_account && q.users.is_empty() {
        return Err(ConfigError::Flags(
            "--shared-account: give client accounts with --client-user NAME:PASSWORD or --client-users-file (every client then runs as the backend account)".into(),
        ));
    }
    // Without --shared-account each client logs in to the server as
    // itself: a list of the relay's own would not do what it says.
    if !q.shared_account && !q.users.is_empty() {
        return Err(ConfigError::Flags(
            "--client-user / --client-users-file name the accounts of --shared-account mode; without it each client logs in to the server with its own account and password (add --shared-account, or leave the client accounts out)".into(),
        ));
    }
    let f = File {
        relay: RelaySection {
            listen: q.listen,
            mode: q.mode,
            metrics: q.metrics,
            metrics_token_file: q.metrics_token_file,
            max_packet: None,
            sha2_full_auth: false,
            threads: q.threads,
            max_clients: None,
        },
        backend: BackendSection {
            servers: q.backends,
            user: q.backend_user,
            password: Some(q.backend_password),
            password_file: None,
            password_env: None,
            tls: q.backend_tls,
            tls_ca: q.backend_tls_ca,
            shared_dynamic_sql: None,
            accounts: Some(
                if q.shared_account {
                    "shared"
                } else {
                    "per-user"
                }
                .to_string(),
            ),
            weights: None,
            groups: None,
        },
        pool: PoolSection {
            max: Some(q.pool_max),
            min: Some(q.pool_min),
            idle_timeout: Some(q.idle_timeout),
            max_lifetime: Some(q.max_lifetime),
            check_after: None,
            wait_timeout: Some(q.wait_timeout),
            max_waiters: None,
            statement_cache: None,
            max_per_account: None,
        },
        tls: q
            .tls
            .map(|(cert, key, require)| TlsSection { cert, key, require }),
        users: Vec::new(),
        routing: RoutingSection {
            read_write_split: Some(q.read_write_split),
            consistency: Some(q.consistency),
            max_lag: Some(q.max_lag),
            galera_writers: None,
            galera_max_recv_queue: None,
            multi_primary: None,
            settings_may_differ: None,
            health_interval: Some(q.health_interval),
            consistency_wait: None,
        },
        rules: Vec::new(),
        replay: ReplaySection::default(),
        cache: CacheSection::default(),
        cache_rules: Vec::new(),
    };
    let mut cfg = build(f).map_err(|e| {
        ConfigError::Flags(
            FLAG_NAMES
                .iter()
                .fold(e, |e, (key, flag)| e.replace(key, flag)),
        )
    })?;
    cfg.dynamic.users = q.users;
    Ok(cfg)
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A configuration file that cannot be used: where, and why.
    #[error("{path}: {msg}")]
    At { path: String, msg: String },
    /// Quick-mode flags that make no configuration, naming the flags.
    #[error("{0}")]
    Flags(String),
    /// A value that cannot be read (an address, an account, a TLS mode),
    /// and why.
    #[error("{0}")]
    Value(String),
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

/// Reads and checks a config file. Errors name the file and, for TOML
/// syntax and unknown keys, the line.
pub fn load(path: &Path) -> Result<RelayConfig, ConfigError> {
    let p = path.display().to_string();
    let at = |msg: String| ConfigError::At {
        path: p.clone(),
        msg,
    };
    let text = std::fs::read_to_string(path).map_err(|e| at(e.to_string()))?;
    let f: File = toml::from_str(&text)
        .map_err(|e| at(sqlfleet_conn::at_line(&text, e.span(), e.message())))?;
    build(f).map_err(at)
}

fn build(f: File) -> Result<RelayConfig, String> {
    if f.relay.listen.is_empty() {
        return Err("relay.listen: give at least one address".into());
    }
    let backends = backends(&f.backend)?;
    let password = sqlfleet_conn::secret::configured(
        f.backend.password.as_deref(),
        f.backend.password_file.as_deref(),
        f.backend.password_env.as_deref(),
        "backend",
    )
    .map_err(|e| e.to_string())?
    .map(|s| s.expose().to_string())
    .unwrap_or_default();
    let users = users(&f.users)?;
    let pool = pool(&f.pool)?;
    let routing = routing(&f.routing)?;
    let cache = cache_settings(f.cache, f.cache_rules)?;
    if !cache.rules.is_empty() && f.relay.mode != Mode::Transaction {
        return Err(
            "cache_rules: the result cache needs relay.mode = \"transaction\" (in session mode a client's FOUND_ROWS() and diagnostics live on its own connection, which a cached answer would not update)"
                .into(),
        );
    }
    let rules = rules(f.rules, &backends)?;
    let tls = f.tls.map(|t| TlsFiles {
        cert: t.cert,
        key: t.key,
        require: t.require,
    });
    let backend_tls = backend_tls(f.backend.tls.as_deref(), f.backend.tls_ca)
        .map_err(|e| format!("backend.tls: {e}"))?;
    let per_user_accounts = match f.backend.accounts.as_deref() {
        Some("shared") => false,
        None | Some("per-user") => true,
        Some(other) => {
            return Err(format!(
                "backend.accounts: {other:?}: use \"shared\" or \"per-user\""
            ))
        }
    };
    let shared_dynamic_sql = match f.backend.shared_dynamic_sql.as_deref() {
        None | Some("refuse") => false,
        Some("run") if !per_user_accounts => true,
        Some("run") => {
            return Err(
                "backend.shared_dynamic_sql: only with accounts = \"shared\" (per-user, the server decides as each client's own account)"
                    .into(),
            )
        }
        Some(other) => {
            return Err(format!(
                "backend.shared_dynamic_sql: {other:?}: use \"refuse\" or \"run\""
            ))
        }
    };
    let metrics_token = metrics_token(&f.relay)?;
    let threads = match f.relay.threads {
        Some(0) | Some(257..) => {
            return Err("relay.threads: from 1 to 256 event-loop threads".into());
        }
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let replay = replay(&f.replay)?;
    if f.relay.max_clients == Some(0) {
        return Err("relay.max_clients: at least 1 (leave it out for the default)".into());
    }
    Ok(RelayConfig {
        listen: f.relay.listen,
        threads,
        max_clients: f.relay.max_clients,
        backends,
        backend_user: f.backend.user,
        backend_password: password,
        backend_tls,
        per_user_accounts,
        shared_dynamic_sql,
        mode: f.relay.mode,
        tls,
        sha2_full_auth: f.relay.sha2_full_auth,
        metrics_token,
        metrics: f.relay.metrics,
        max_packet: f.relay.max_packet.unwrap_or(1 << 30),
        routing,
        replay,
        dynamic: Dynamic {
            users,
            pool,
            rules,
            cache,
        },
    })
}

/// `[backend]` servers, with their weights and groups.
fn backends(b: &BackendSection) -> Result<Vec<Backend>, String> {
    let mut backends = Vec::new();
    for s in &b.servers {
        backends.push(Backend::parse(s).map_err(|e| format!("backend.servers: {s}: {e}"))?);
    }
    if backends.is_empty() {
        return Err("backend.servers: give at least one server".into());
    }
    if let Some(w) = &b.weights {
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
    if let Some(g) = &b.groups {
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
    Ok(backends)
}

/// `[[users]]`: each account's password hashes.
fn users(list: &[UserSection]) -> Result<HashMap<String, Account>, String> {
    let mut users = HashMap::new();
    for (i, u) in list.iter().enumerate() {
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
        let account = Account {
            native,
            sha2,
            old: None,
        };
        if users.insert(u.name.clone(), account).is_some() {
            return Err(format!("users: {} is listed twice", u.name));
        }
    }
    Ok(users)
}

fn pool(p: &PoolSection) -> Result<PoolSettings, String> {
    let d = PoolSettings::default();
    let pool = PoolSettings {
        max: p.max.unwrap_or(d.max).max(1),
        min: p.min.unwrap_or(d.min),
        idle_timeout: secs(p.idle_timeout, d.idle_timeout, "pool.idle_timeout")?,
        max_lifetime: secs(p.max_lifetime, d.max_lifetime, "pool.max_lifetime")?,
        check_after: secs(p.check_after, d.check_after, "pool.check_after")?,
        wait_timeout: secs(p.wait_timeout, d.wait_timeout, "pool.wait_timeout")?,
        max_waiters: p.max_waiters.unwrap_or(d.max_waiters),
        statement_cache: p.statement_cache.unwrap_or(d.statement_cache).max(1),
        max_per_account: p.max_per_account,
    };
    if pool.min > pool.max {
        return Err(format!(
            "pool.min ({}) exceeds pool.max ({})",
            pool.min, pool.max
        ));
    }
    Ok(pool)
}

fn routing(r: &RoutingSection) -> Result<Routing, String> {
    let d = Routing::default();
    let routing = Routing {
        read_write_split: r.read_write_split.unwrap_or(false),
        consistency: r.consistency.unwrap_or(Consistency::Session),
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
        galera_writers: r.galera_writers.unwrap_or_default(),
        galera_max_recv_queue: r.galera_max_recv_queue.unwrap_or(d.galera_max_recv_queue),
        multi_primary: r.multi_primary.unwrap_or(d.multi_primary),
        settings_may_differ: r
            .settings_may_differ
            .iter()
            .flatten()
            .map(|n| n.to_ascii_lowercase())
            .collect(),
    };
    if routing.health_interval.is_zero() {
        return Err("routing.health_interval must be above 0".into());
    }
    let known = crate::routing::defaults::READ_DEFAULTS;
    if let Some(n) = routing
        .settings_may_differ
        .iter()
        .find(|n| !known.contains(&n.as_str()))
    {
        return Err(format!(
            "routing.settings_may_differ: '{}' is not a setting the relay compares between \
             servers (one of {})",
            n.escape_debug(),
            known.join(", ")
        ));
    }
    Ok(routing)
}

/// `[[rules]]`, checked against the servers' groups.
fn rules(list: Vec<RuleSection>, backends: &[Backend]) -> Result<Vec<Rule>, String> {
    let mut rules = Vec::new();
    for (i, r) in list.into_iter().enumerate() {
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
            digest: r
                .match_digest
                .map(|d| crate::protocol::sql::digest(d.as_bytes())),
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
    Ok(rules)
}

/// The admin pages' bearer token; the pages show query digests and
/// backend state, so beyond loopback they need one.
fn metrics_token(relay: &RelaySection) -> Result<Option<String>, String> {
    let token = match &relay.metrics_token_file {
        Some(p) => {
            let t = std::fs::read_to_string(p)
                .map_err(|e| format!("relay.metrics_token_file {}: {e}", p.display()))?
                .trim()
                .to_string();
            if t.is_empty() {
                return Err(format!("relay.metrics_token_file {}: empty", p.display()));
            }
            Some(t)
        }
        None => None,
    };
    if let Some(m) = &relay.metrics {
        let loopback = parse_addr(m)
            .map(|(h, _)| {
                h == "localhost"
                    || h.parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback())
            })
            .map_err(|e| format!("relay.metrics: {m}: {e}"))?;
        if !loopback && token.is_none() {
            return Err(format!(
                "relay.metrics: {m} is reachable beyond this machine: give relay.metrics_token_file (a bearer token the pages then require), or listen on 127.0.0.1"
            ));
        }
    }
    Ok(token)
}

fn replay(r: &ReplaySection) -> Result<Replay, String> {
    let d = Replay::default();
    let replay = Replay {
        max_bytes: match r.enabled {
            Some(false) => 0,
            _ => r.max_bytes.unwrap_or(d.max_bytes),
        },
        wait: secs(r.wait, d.wait, "replay.wait")?,
        leave: match r.checksum.as_deref() {
            None | Some("full") => crate::protocol::digest::Leave::Nothing,
            Some("results") => crate::protocol::digest::Leave::InsertIds,
            Some(other) => {
                return Err(format!(
                    "replay.checksum: {other:?}: use \"full\" (every reply, generated keys included) or \"results\" (all but the last insert id)"
                ))
            }
        },
    };
    if r.enabled != Some(false) && r.max_bytes == Some(0) {
        return Err("replay.max_bytes: at least 1 (or enabled = false)".into());
    }
    Ok(replay)
}

//! `sqlfleet relay`: a MySQL-protocol connection pool and proxy, from
//! flags (quick mode) or a TOML file (full mode).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use sqlfleet_conn::text::count;
use sqlfleet_conn::{ConnArgs, Endpoint, Origin, SslMode};
use sqlfleet_relay::config::{self, parse_user, Consistency, Mode, RelayConfig};

use crate::exit::Exit;

/// Listen for MySQL clients and serve them from a pool of logged-in
/// backend connections.
///
/// Quick mode: the backend from the connection options (as every command:
/// -h/-P/-S/-u/-p, --dsn, option files, MYSQL_PWD, --ssl-mode, or
/// --sandbox NAME for all of a sandbox's servers), or several with
/// --backend. Each client logs in to the backend as itself (its own
/// account and privileges on the server); --shared-account with
/// --client-user NAME:PASSWORD runs every client as the backend account.
/// Full mode: `--config relay.toml`. SIGTERM or Ctrl-C stops accepting and
/// lets sessions finish (up to 30 s); SIGHUP reloads the config file's
/// users and pool settings without dropping clients.
/// Exit codes: 0 stopped cleanly (or --check-config: the file is valid),
/// 1 a usage, config or start-up error.
#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true)]
pub struct RelayArgs {
    /// The backends' login, TLS and (without --backend) address
    #[command(flatten)]
    conn: ConnArgs,
    /// Print help
    #[arg(long, action = clap::ArgAction::HelpLong)]
    help: Option<bool>,
    /// A TOML config file (full mode); the other flags are then not used
    #[arg(long, value_name = "FILE", conflicts_with_all = ["backends", "users", "users_file"])]
    config: Option<PathBuf>,
    /// Check the config file and exit (0 if it is valid)
    #[arg(long, requires = "config")]
    check_config: bool,
    /// Read a password on stdin and print the hashes a config file takes
    #[arg(long, exclusive = true)]
    hash_password: bool,
    /// Address to listen on: HOST:PORT or unix:/path (repeatable)
    #[arg(long = "listen", default_value = "127.0.0.1:6033")]
    listen: Vec<String>,
    /// A backend server, HOST:PORT or unix:/path (repeatable; clients go
    /// to the least busy writable one; read_only ones stand by unless
    /// --read-write-split); logged into with the connection options'
    /// user, password and --ssl-mode. Default: the connection options'
    /// server, or every server of --sandbox
    #[arg(long = "backend", value_name = "HOST:PORT")]
    backends: Vec<String>,
    /// A client account, NAME:PASSWORD (repeatable); kept as hashes only
    #[arg(long = "client-user", value_name = "NAME:PASSWORD")]
    users: Vec<String>,
    /// A file of client accounts, one NAME:PASSWORD per line (keeps
    /// passwords off the command line)
    #[arg(long = "client-users-file", value_name = "FILE")]
    users_file: Option<PathBuf>,
    /// Every client runs as the backend account (-u), whatever account it
    /// logged in to the relay with: its privileges, its processlist, its
    /// read_only exemption. Needs --client-user or --client-users-file.
    /// Without it (the default) each client logs in to the backends as
    /// itself (same name and password; pools per account), so the server
    /// applies the client's own privileges, and -u/-p only look accounts up
    /// and run health checks; clients then log in with mysql_native_password
    /// (or caching_sha2_password with full authentication)
    #[arg(long, conflicts_with = "per_user_accounts")]
    shared_account: bool,
    /// The default (kept for scripts that say it)
    #[arg(long, hide = true)]
    per_user_accounts: bool,
    /// Pooling mode: transaction (share backend connections between
    /// transactions) or session (one per client session)
    #[arg(long, default_value = "transaction", value_parser = ["transaction", "session"])]
    mode: String,
    /// Event-loop threads, each serving its share of the clients with its
    /// own sockets (default: one per core)
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Backend connections open per backend (in use or idle)
    #[arg(long, default_value_t = 100)]
    pool_max: usize,
    /// Backend connections kept open per backend even when idle
    #[arg(long, default_value_t = 0)]
    pool_min: usize,
    /// Seconds a client waits for a free backend connection
    #[arg(long, default_value_t = 5.0)]
    wait_timeout: f64,
    /// Seconds an idle backend connection is kept (above --pool-min)
    #[arg(long, default_value_t = 60.0)]
    idle_timeout: f64,
    /// Seconds a backend connection lives at most
    #[arg(long, default_value_t = 3600.0)]
    max_lifetime: f64,
    /// Send autocommit reads to replicas (servers with read_only=1); the
    /// writable server gets writes and transactions (transaction mode).
    /// Without it only the writable server serves; replicas stand by
    #[arg(long)]
    read_write_split: bool,
    /// Read-your-writes on replicas: session (the default: a client's
    /// reads wait for its own last write); global (reads wait for
    /// everything the primary had committed); else the read goes to the
    /// primary; none (reads may miss the client's own writes)
    #[arg(long, default_value = "session", value_parser = ["none", "session", "global"])]
    consistency: String,
    /// Seconds of replication lag past which a replica gets no reads
    #[arg(long, default_value_t = 10.0)]
    max_lag: f64,
    /// Seconds between health checks of each backend
    #[arg(long, default_value_t = 0.5)]
    health_interval: f64,
    /// Serve Prometheus metrics at http://ADDR/metrics (and JSON status at /status)
    #[arg(long, value_name = "HOST:PORT")]
    metrics: Option<String>,
    /// A file with a bearer token the metrics and status pages require
    /// (needed when --metrics listens beyond loopback)
    #[arg(long, value_name = "FILE")]
    metrics_token_file: Option<PathBuf>,
    /// TLS certificate (PEM) offered to clients
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// TLS private key (PEM)
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Refuse clients that do not use TLS
    #[arg(long, requires = "tls_cert")]
    require_tls: bool,
}

/// How quick mode reaches its backends, from the shared connection options.
struct BackendLogin {
    servers: Vec<String>,
    user: String,
    password: String,
    /// The config file's `backend.tls` word.
    tls: &'static str,
    tls_ca: Option<PathBuf>,
}

/// The backends' address, account and TLS as every command resolves a
/// target (flags, DSN, option files, environment, --sandbox); `--backend`
/// replaces the address, and a sandbox gives all of its servers.
fn backend_login(a: &RelayArgs) -> anyhow::Result<BackendLogin> {
    anyhow::ensure!(
        a.conn.database.is_none(),
        "-D/--database: the relay does not choose a database; its clients do"
    );
    anyhow::ensure!(
        a.conn.default_character_set.is_none(),
        "--default-character-set: the relay's clients choose their own character set"
    );
    let (target, origin) = sqlfleet_conn::resolve_interactive_traced(&a.conn)?;
    let servers = if !a.backends.is_empty() {
        a.backends.clone()
    } else if let Origin::Sandbox { name, .. } = &origin {
        let home = sqlfleet_conn::home::sqlfleet_home();
        let sb = sqlfleet_sandbox::Sandbox::open(&home, name)?;
        sb.meta
            .nodes
            .iter()
            // The socket (no TCP on the way), named as query and watch
            // name the node.
            .map(|n| {
                format!(
                    "unix:{} as 127.0.0.1:{}",
                    sb.layout.node(n).socket().display(),
                    n.port
                )
            })
            .collect()
    } else {
        vec![match &target.endpoint {
            Endpoint::Socket(p) => format!("unix:{}", p.display()),
            e @ Endpoint::Tcp { .. } => e.to_string(),
        }]
    };
    // The relay logs in to its backends without a client certificate:
    // one named for the other commands (often in ~/.my.cnf) is refused
    // here, not left unused.
    if let Some(c) = target.client_cert()? {
        anyhow::bail!(
            "the relay does not show a client certificate to its backends ({} from --ssl-cert or an option file's ssl-cert): give the relay an account that needs none and leave the certificate out (if it comes from an option file: --no-defaults, or --defaults-file with one that names none)",
            c.cert.display()
        );
    }
    if target.tls != sqlfleet_conn::tls_policy::TlsChecks::default() {
        anyhow::bail!(
            "the relay checks its backends' certificates against --ssl-ca only: ssl-capath, ssl-crl, ssl-crlpath, tls-version and ssl-cipher (from flags or an option file) are not read for them; leave them out (if they come from an option file: --no-defaults, or --defaults-file with one that names none)"
        );
    }
    let (tls, tls_ca) = match target.ssl_mode {
        SslMode::Disabled => ("disabled", None),
        SslMode::Preferred => ("preferred", None),
        SslMode::Required => ("required", None),
        SslMode::VerifyIdentity => (
            "verify",
            Some(target.ssl_ca.clone().context(
                "--ssl-mode=VERIFY_IDENTITY needs --ssl-ca (the CA the backends' certificates chain to)",
            )?),
        ),
        SslMode::VerifyCa => anyhow::bail!(
            "--ssl-mode=VERIFY_CA: the relay always checks the backend's name as well; use VERIFY_IDENTITY"
        ),
    };
    // As every command: a CA (often in ~/.my.cnf) only matters when the
    // mode verifies; otherwise it is not used.
    Ok(BackendLogin {
        servers,
        user: target.user.clone(),
        password: target
            .secret()
            .map(|s| s.expose().to_string())
            .unwrap_or_default(),
        tls,
        tls_ca,
    })
}

fn quick_config(a: &RelayArgs) -> anyhow::Result<RelayConfig> {
    let mut users = HashMap::new();
    for u in &a.users {
        let (n, h) = parse_user(u).map_err(anyhow::Error::msg)?;
        users.insert(n, h);
    }
    if let Some(f) = &a.users_file {
        let text = std::fs::read_to_string(f).with_context(|| format!("{}", f.display()))?;
        users.extend(
            config::parse_users_file(&text, &f.display().to_string())
                .map_err(anyhow::Error::msg)?,
        );
    }
    let login = backend_login(a)?;
    // The same checks as the config file's (one validation for both).
    config::from_flags(config::Flags {
        listen: a.listen.clone(),
        backends: login.servers,
        backend_user: login.user,
        backend_password: login.password,
        backend_tls: Some(login.tls.to_string()),
        backend_tls_ca: login.tls_ca,
        shared_account: a.shared_account,
        mode: if a.mode == "session" {
            Mode::Session
        } else {
            Mode::Transaction
        },
        threads: a.threads,
        metrics: a.metrics.clone(),
        metrics_token_file: a.metrics_token_file.clone(),
        pool_max: a.pool_max,
        pool_min: a.pool_min,
        wait_timeout: a.wait_timeout,
        idle_timeout: a.idle_timeout,
        max_lifetime: a.max_lifetime,
        read_write_split: a.read_write_split,
        consistency: match a.consistency.as_str() {
            "session" => Consistency::Session,
            "global" => Consistency::Global,
            _ => Consistency::None,
        },
        max_lag: a.max_lag,
        health_interval: a.health_interval,
        tls: a
            .tls_cert
            .clone()
            .zip(a.tls_key.clone())
            .map(|(c, k)| (c, k, a.require_tls)),
        users,
    })
    .map_err(anyhow::Error::msg)
}

pub async fn run(a: RelayArgs) -> anyhow::Result<Exit> {
    if a.hash_password {
        let mut pw = String::new();
        std::io::stdin()
            .read_line(&mut pw)
            .context("reading the password on stdin")?;
        print!("{}", config::hash_lines(pw.trim_end_matches(['\n', '\r'])));
        return Ok(Exit::Ok);
    }
    let cfg = match &a.config {
        Some(path) => {
            anyhow::ensure!(
                !conn_given(&a.conn),
                "--config: the connection options are not used with a config file (its [backend] section says how backends are reached)"
            );
            config::load(path)?
        }
        None => quick_config(&a)?,
    };
    if let Some(t) = &cfg.tls {
        sqlfleet_relay::tls::tls_acceptor(&t.cert, &t.key)?;
    }
    if a.check_config {
        println!(
            "{}: ok ({}, {}, {}, {:?} mode)",
            a.config
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            count(cfg.listen.len() as u64, "listener"),
            count(cfg.backends.len() as u64, "backend"),
            count(cfg.dynamic.users.len() as u64, "user"),
            cfg.mode
        );
        return Ok(Exit::Ok);
    }
    // Two sockets per active client.
    crate::fdlimit::raise();
    let n_backends = cfg.backends.len();
    let mode = cfg.mode;
    let started = sqlfleet_relay::run::start(cfg).await?;
    let relay = started.relay.clone();
    let names = started.names.clone();
    if let Some(at) = started.metrics {
        tracing::info!("relay: metrics on http://{at}/metrics");
    }
    tracing::info!(
        "relay: listening on {} for {}, {mode:?} pooling, at most {} clients at once (more get ERROR 1040)",
        names.join(", "),
        count(n_backends as u64, "backend"),
        relay.max_clients()
    );
    match relay.accounts() {
        sqlfleet_relay::AccountsNote::PerUser(note) => tracing::info!("relay: {note}"),
        sqlfleet_relay::AccountsNote::Shared(warning) => tracing::warn!("relay: {warning}"),
    }
    if let Some(path) = a.config.clone() {
        let relay = relay.clone();
        tokio::spawn(async move {
            let Ok(mut hup) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            else {
                return;
            };
            while hup.recv().await.is_some() {
                match config::load(&path) {
                    Ok(new) => {
                        let ignored = relay.reload(&new);
                        tracing::info!(
                            "relay: reloaded users and pool settings from {}",
                            path.display()
                        );
                        if !ignored.is_empty() {
                            tracing::warn!(
                                "relay: changes to {} need a restart and were not applied",
                                ignored.join(", ")
                            );
                        }
                    }
                    Err(e) => {
                        tracing::error!("relay: reload refused, keeping the running config: {e}")
                    }
                }
            }
        });
    }
    started
        .serve(crate::shutdown::signal(), Duration::from_secs(30))
        .await;
    tracing::info!("relay: stopped");
    Ok(Exit::Ok)
}

/// Whether any connection option was given on the command line.
fn conn_given(c: &ConnArgs) -> bool {
    let ConnArgs {
        host,
        port,
        user,
        password,
        socket,
        database,
        dsn,
        defaults_file,
        defaults_extra_file,
        defaults_group_suffix,
        no_defaults,
        protocol,
        ssl_mode,
        ssl,
        skip_ssl,
        ssl_verify_server_cert,
        ssl_ca,
        ssl_cert,
        ssl_key,
        ssl_capath,
        ssl_crl,
        ssl_crlpath,
        tls_version,
        ssl_cipher,
        default_character_set,
        sandbox,
    } = c;
    host.is_some()
        || port.is_some()
        || user.is_some()
        || password.is_some()
        || socket.is_some()
        || database.is_some()
        || dsn.is_some()
        || defaults_file.is_some()
        || defaults_extra_file.is_some()
        || defaults_group_suffix.is_some()
        || *no_defaults
        || protocol.is_some()
        || ssl_mode.is_some()
        || *ssl
        || *skip_ssl
        || *ssl_verify_server_cert
        || ssl_ca.is_some()
        || ssl_cert.is_some()
        || ssl_key.is_some()
        || ssl_capath.is_some()
        || ssl_crl.is_some()
        || ssl_crlpath.is_some()
        || tls_version.is_some()
        || ssl_cipher.is_some()
        || default_character_set.is_some()
        || sandbox.is_some()
}

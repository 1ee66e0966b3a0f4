//! `sqlfleet relay` (quick mode): a session-pooling MySQL-protocol relay.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Context;
use sqlfleet_relay::config::{parse_user, Backend, RelayConfig};

use crate::exit::Exit;

/// Listen for MySQL clients and serve them from a pool of logged-in
/// backend connections (session pooling; mysql_native_password; no TLS yet).
///
/// SIGTERM or Ctrl-C stops accepting and lets sessions finish (up to 30 s).
#[derive(clap::Args, Debug)]
pub struct RelayArgs {
    /// Address to listen on
    #[arg(long, default_value = "127.0.0.1:6033")]
    listen: String,
    /// A backend server (repeatable; sessions go to the least busy)
    #[arg(long = "backend", value_name = "HOST:PORT", required = true)]
    backends: Vec<String>,
    /// User the relay logs in to backends as
    #[arg(long)]
    backend_user: String,
    /// Its password (or MYSQL_PWD)
    #[arg(long, env = "SQLFLEET_BACKEND_PASSWORD", hide_env_values = true)]
    backend_password: Option<String>,
    /// A client account, NAME:PASSWORD (repeatable); kept as a hash
    #[arg(
        long = "user",
        value_name = "NAME:PASSWORD",
        required_unless_present = "users_file"
    )]
    users: Vec<String>,
    /// A file of client accounts, one NAME:PASSWORD per line (keeps
    /// passwords off the command line)
    #[arg(long, value_name = "FILE")]
    users_file: Option<std::path::PathBuf>,
    /// Backend connections in use per backend
    #[arg(long, default_value_t = 100)]
    pool_max: usize,
    /// Seconds a client waits for a free backend connection
    #[arg(long, default_value_t = 5.0)]
    wait_timeout: f64,
}

pub async fn run(a: RelayArgs) -> anyhow::Result<Exit> {
    let mut backends = Vec::new();
    for b in &a.backends {
        let (host, port) = sqlfleet_fanout::hosts::parse_addr(b, 3306)
            .map_err(|e| anyhow::anyhow!("--backend {b}: {e}"))?;
        backends.push(Backend { host, port });
    }
    let mut users = HashMap::new();
    let mut lines: Vec<String> = a.users.clone();
    if let Some(f) = &a.users_file {
        let text = std::fs::read_to_string(f).with_context(|| format!("{}", f.display()))?;
        for (i, l) in text.lines().enumerate() {
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            anyhow::ensure!(
                l.contains(':'),
                "{}:{}: expected NAME:PASSWORD",
                f.display(),
                i + 1
            );
            lines.push(l.to_string());
        }
    }
    for u in &lines {
        let (n, h) = parse_user(u).map_err(anyhow::Error::msg)?;
        users.insert(n, h);
    }
    anyhow::ensure!(
        a.wait_timeout.is_finite() && a.wait_timeout > 0.0,
        "--wait-timeout must be positive"
    );
    let backend_password = a
        .backend_password
        .or_else(|| std::env::var("MYSQL_PWD").ok())
        .unwrap_or_default();
    let cfg = RelayConfig {
        listen: a.listen.clone(),
        backends,
        backend_user: a.backend_user,
        backend_password,
        users,
        pool_max: a.pool_max.max(1),
        wait_timeout: Duration::from_secs_f64(a.wait_timeout),
        max_packet: 1 << 30,
    };
    let listener = tokio::net::TcpListener::bind(&a.listen)
        .await
        .with_context(|| format!("listening on {}", a.listen))?;
    eprintln!(
        "sqlfleet relay: listening on {} for {} backend(s)",
        listener.local_addr()?,
        cfg.backends.len()
    );
    let shutdown = async {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
        }
    };
    sqlfleet_relay::serve(cfg, listener, shutdown, Duration::from_secs(30)).await;
    eprintln!("sqlfleet relay: stopped");
    Ok(Exit::Ok)
}

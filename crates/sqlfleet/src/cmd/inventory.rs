//! Which servers a fleet command works on: the one inventory of `query`
//! and `watch`. Hosts come from --hosts or --hosts-file; else from the
//! replication topology of one server (--discover); else from a server
//! named on the command line (-h, -S, --dsn, --sandbox: every server of
//! the sandbox); else from standard input (when it is not a terminal);
//! else from the option files, the environment or SQLFLEET_SANDBOX.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use sqlfleet_conn::{ConnArgs, Endpoint, Origin, Target};
use sqlfleet_fanout::hosts::{parse_list, Host};

/// The host-list flags every fleet command takes.
#[derive(clap::Args, Debug, Clone)]
pub struct HostArgs {
    /// Hosts, comma-separated: h1,h2:3307,[::1]:3306
    #[arg(long, value_name = "LIST")]
    pub hosts: Option<String>,
    /// A file of hosts, one per line
    #[arg(long, value_name = "FILE", conflicts_with = "hosts")]
    pub hosts_file: Option<PathBuf>,
    /// Find the hosts from this server: its replication topology both ways
    /// (primaries from replication status on every channel, replicas that
    /// register with report_host), tagged role=, depth=, channel=
    #[arg(long, value_name = "HOST[:PORT]", conflicts_with_all = ["hosts", "hosts_file"])]
    pub discover: Option<String>,
}

/// The hosts and where they came from (for messages).
pub struct Inventory {
    pub hosts: Vec<Host>,
    pub source: String,
    /// Servers of a discovered topology that could not be reached.
    pub unreachable: Vec<String>,
}

fn default_port(base: &Target) -> u16 {
    match &base.endpoint {
        Endpoint::Tcp { port, .. } => *port,
        Endpoint::Socket(_) => 3306,
    }
}

/// Resolves the host list. `command` names the command in warnings;
/// `connect_timeout` bounds each connection of a --discover walk.
pub async fn resolve(
    command: &str,
    h: &HostArgs,
    conn: &ConnArgs,
    base: &Target,
    origin: &Origin,
    connect_timeout: Duration,
) -> anyhow::Result<Inventory> {
    let plain = |(hosts, source)| Inventory {
        hosts,
        source,
        unreachable: Vec::new(),
    };
    let inv = match &h.discover {
        Some(start) => {
            let (host, port) = sqlfleet_conn::addr::parse_addr(start, default_port(base))
                .map_err(|e| anyhow::anyhow!("--discover {start}: {e}"))?;
            let (found, unreachable) =
                sqlfleet_fanout::discover::discover(base, (host, port), connect_timeout, 10_000)
                    .await;
            for u in &unreachable {
                eprintln!("sqlfleet {command}: warning: {u}");
            }
            Inventory {
                hosts: found,
                source: format!("--discover {start}"),
                unreachable,
            }
        }
        None => plain(listed(command, h, conn, base, origin)?),
    };
    anyhow::ensure!(!inv.hosts.is_empty(), "no hosts in {}", inv.source);
    Ok(inv)
}

fn listed(
    command: &str,
    h: &HostArgs,
    conn: &ConnArgs,
    base: &Target,
    origin: &Origin,
) -> anyhow::Result<(Vec<Host>, String)> {
    let list = |text: &str, source: String| -> anyhow::Result<(Vec<Host>, String)> {
        let (hosts, warnings) =
            parse_list(text, &source, default_port(base), conn.socket.as_deref())?;
        for w in warnings {
            eprintln!("sqlfleet {command}: warning: {w}");
        }
        Ok((hosts, source))
    };
    if let Some(l) = &h.hosts {
        return list(
            &l.split(',').collect::<Vec<_>>().join("\n"),
            "--hosts".into(),
        );
    }
    if let Some(f) = &h.hosts_file {
        let t = std::fs::read_to_string(f).with_context(|| format!("{}", f.display()))?;
        return list(&t, f.display().to_string());
    }
    let on_command_line = matches!(
        origin,
        Origin::Flags
            | Origin::Dsn
            | Origin::Sandbox {
                from_env: false,
                ..
            }
    ) && conn
        .port
        .is_none_or(|_| conn.host.is_some() || conn.socket.is_some());
    if !on_command_line && !std::io::stdin().is_terminal() {
        let mut t = String::new();
        std::io::stdin()
            .read_to_string(&mut t)
            .context("reading hosts from stdin")?;
        if !t.trim().is_empty() || !origin.named() {
            return list(&t, "stdin".into());
        }
    }
    anyhow::ensure!(
        origin.named(),
        "no hosts: give --hosts h1,h2, --hosts-file FILE, a list on standard input, or one server (-h, -S, --dsn, --sandbox)"
    );
    if let Origin::Sandbox { name, .. } = origin {
        let home = sqlfleet_conn::home::sqlfleet_home();
        let sb = sqlfleet_sandbox::Sandbox::open(&home, name)?;
        let hosts = sb
            .meta
            .nodes
            .iter()
            .map(|n| {
                let mut h = Host::tcp("127.0.0.1", n.port);
                h.tags.insert("sandbox".into(), name.clone());
                h.tags.insert("node".into(), n.name.clone());
                h.tags.insert("role".into(), n.role.as_str().into());
                if sb.meta.galera() {
                    h.tags.insert("cluster".into(), name.clone());
                }
                h
            })
            .collect();
        return Ok((hosts, format!("sandbox {name}")));
    }
    let host = match &base.endpoint {
        Endpoint::Tcp { host, port } => Host::tcp(host.clone(), *port),
        Endpoint::Socket(p) => Host {
            socket: Some(p.clone()),
            ..Host::tcp("localhost", 0)
        },
    };
    Ok((vec![host], origin.to_string()))
}

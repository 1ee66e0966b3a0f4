//! `sqlfleet sandbox up|down|list|env|destroy`.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use sqlfleet_conn::home::sqlfleet_home;
use sqlfleet_sandbox::{self as sandbox, Role, Sandbox, UpOptions, DEFAULT_NAME};

use crate::exit::Exit;

#[derive(Subcommand, Debug)]
pub enum SandboxCmd {
    /// Create (first time) and start a sandbox; ready when this returns.
    /// Exit codes: 0 running, 1 it could not be started (the reason is
    /// printed), 130 interrupted by Ctrl-C, 143 by SIGTERM (the servers
    /// still starting are stopped; a sandbox being made is removed)
    Up(UpArgs),
    /// Stop a sandbox's servers cleanly. Exit codes: 0 stopped (or was not
    /// running), 1 no such sandbox or a server did not stop
    Down(Which),
    /// Name, ports, pid, state and replication health of every sandbox.
    /// Exit codes: 0 listed, 1 the sandbox directory cannot be read
    List {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Shell exports (or the defaults-file path) to reach a sandbox.
    /// Exit codes: 0 printed, 1 no such sandbox or node
    Env(EnvArgs),
    /// Stop a sandbox and delete its data (asks first on a terminal).
    /// Exit codes: 0 destroyed, 1 no such sandbox, not confirmed, or an error
    Destroy(DestroyArgs),
    /// Make a replica the primary: it becomes writable and the other nodes
    /// replicate from it (GTID). Exit codes: 0 promoted, 1 refused (the
    /// replica did not catch up in --wait seconds; nothing changed) or an
    /// error, 130 interrupted by Ctrl-C, 143 by SIGTERM, before the switch
    /// (nothing changed; a switch already begun is finished, exit 0)
    Promote(PromoteArgs),
}

#[derive(Args, Debug)]
pub struct PromoteArgs {
    /// Sandbox name
    #[arg(long, default_value = DEFAULT_NAME)]
    name: String,
    /// The replica to promote, e.g. node2
    #[arg(long)]
    node: String,
    /// Seconds to wait for the replica to apply everything the primary
    /// committed; past that the promotion is refused and nothing changes
    #[arg(long, default_value_t = 60.0)]
    wait: f64,
}

#[derive(Args, Debug)]
pub struct UpArgs {
    /// Sandbox name
    #[arg(long, default_value = DEFAULT_NAME)]
    name: String,
    /// First port of the block: the primary's (replicas take the next
    /// ones; a Galera cluster's gcomm, IST and SST ports follow its SQL
    /// ports); default: the first free from 3307 (cluster ports from
    /// 4567), reserved machine-wide
    #[arg(long)]
    port: Option<u16>,
    /// Number of GTID replicas of the primary
    #[arg(long, conflicts_with = "galera")]
    replicas: Option<usize>,
    /// A Galera cluster of N nodes instead (every node takes writes;
    /// node1 bootstraps, the others join by state transfer)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=9))]
    galera: Option<u16>,
    /// GTID domain of this sandbox (gtid_domain_id; server ids become
    /// DOMAIN*100+1..): sandboxes with distinct domains are independent
    /// primaries, e.g. sources for `replicate` or native multi-source
    #[arg(long)]
    domain: Option<u32>,
    /// Extra server option, e.g. --option local_infile=0 (repeatable);
    /// checked with the server binary before it is saved
    #[arg(long = "option", value_name = "KEY=VALUE")]
    options: Vec<String>,
    /// Restart running servers to apply changed --option values (without
    /// it, changing the options of a running sandbox is refused)
    #[arg(long)]
    restart: bool,
    /// The server to make the sandbox with, e.g. another version's
    /// bin/mariadbd (its mariadb-install-db is taken from beside it);
    /// default: $SQLFLEET_MARIADBD, else the system's. Recorded: the
    /// sandbox always starts with it
    #[arg(long, value_name = "PATH")]
    mariadbd: Option<std::path::PathBuf>,
}

#[derive(Args, Debug)]
pub struct Which {
    /// Sandbox name
    #[arg(long, default_value = DEFAULT_NAME)]
    name: String,
    /// Every sandbox (instead of --name)
    #[arg(long)]
    all: bool,
}

#[derive(Args, Debug)]
pub struct DestroyArgs {
    #[command(flatten)]
    which: Which,
    /// Do not ask (a terminal is asked before its data is deleted)
    #[arg(long, short = 'y')]
    yes: bool,
}

#[derive(Args, Debug)]
pub struct EnvArgs {
    /// Sandbox name
    #[arg(long, default_value = DEFAULT_NAME)]
    name: String,
    /// Which node by name (node1, node2, ...); default: whichever is
    /// the primary now (after `sandbox promote` that is a former replica)
    #[arg(long)]
    node: Option<String>,
    /// Print only the path of a client option file (for --defaults-file)
    #[arg(long)]
    defaults_file: bool,
}

pub async fn run(cmd: SandboxCmd) -> anyhow::Result<Exit> {
    let home = sqlfleet_home();
    match cmd {
        SandboxCmd::Up(a) => up(home, a).await,
        SandboxCmd::Down(w) => {
            for sb in selected(&home, &w)? {
                let _turn = one_at_a_time(&home, sb.name()).await?;
                let stopped = sb.down().await?;
                if stopped.is_empty() {
                    println!("sandbox '{}' was not running", sb.name());
                } else {
                    println!("sandbox '{}' stopped ({})", sb.name(), stopped.join(", "));
                }
            }
            Ok(Exit::Ok)
        }
        SandboxCmd::Destroy(a) => {
            // A directory without sandbox.toml (left by an older failed
            // `up`) is no sandbox: remove it so the name is free again.
            let dir = sqlfleet_conn::home::sandbox_dir(&home, &a.which.name);
            if !a.which.all && dir.is_dir() && !dir.join("sandbox.toml").is_file() {
                sqlfleet_conn::resolve::check_sandbox_name(&a.which.name)?;
                std::fs::remove_dir_all(&dir).with_context(|| format!("{}", dir.display()))?;
                println!("removed {} (an unfinished sandbox)", dir.display());
                return Ok(Exit::Ok);
            }
            let all = selected(&home, &a.which)?;
            if !a.yes && std::io::stdin().is_terminal() && !all.is_empty() {
                let names: Vec<&str> = all.iter().map(|s| s.name()).collect();
                eprint!(
                    "Destroy sandbox{} {} and delete {} data (under {})? [y/N] ",
                    if names.len() == 1 { "" } else { "es" },
                    names.join(", "),
                    if names.len() == 1 { "its" } else { "their" },
                    home.join("sandboxes").display()
                );
                let mut answer = String::new();
                std::io::stdin()
                    .read_line(&mut answer)
                    .context("reading the answer")?;
                if !matches!(answer.trim(), "y" | "Y" | "yes" | "YES") {
                    anyhow::bail!("not destroyed (answer y, or give --yes)");
                }
            }
            for sb in all {
                let _turn = one_at_a_time(&home, sb.name()).await?;
                // As it is now that this process has its turn.
                let sb = Sandbox::open(&home, sb.name())?;
                let name = sb.name().to_string();
                let dir = sb.layout.dir.clone();
                sb.destroy().await?;
                println!("sandbox '{name}' destroyed ({} removed)", dir.display());
            }
            Ok(Exit::Ok)
        }
        SandboxCmd::List { json } => list(home, json).await,
        SandboxCmd::Promote(a) => {
            let _turn = one_at_a_time(&home, &a.name).await?;
            let mut sb = Sandbox::open(&home, &a.name)?;
            if !(a.wait.is_finite() && a.wait >= 0.0) {
                anyhow::bail!("--wait takes a number of seconds (>= 0), not {}", a.wait);
            }
            let stop = sandbox::Interrupt::new(crate::shutdown::on_interrupt(
                "sandbox",
                "stopping before the switch, or finishing a switch already begun",
            ));
            let r = match sb
                .promote(&a.node, std::time::Duration::from_secs_f64(a.wait), &stop)
                .await
            {
                Err(e @ sandbox::SandboxError::Interrupted { .. }) => {
                    eprintln!("sqlfleet sandbox: {e}");
                    return Ok(crate::shutdown::interrupted_exit());
                }
                r => r?,
            };
            println!(
                "sandbox '{}': {} is the primary (was {}); replicating from it: {}{} ({:.2} s)",
                a.name,
                r.new_primary,
                r.old_primary,
                if r.repointed.is_empty() {
                    "none".to_string()
                } else {
                    r.repointed.join(", ")
                },
                if r.not_running.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; not running, will follow when started: {}",
                        r.not_running.join(", ")
                    )
                },
                r.elapsed.as_secs_f64()
            );
            match &r.caught_up_to {
                // (An empty position: the old primary had written no
                // transaction yet.)
                Some(pos) if pos.is_empty() => println!(
                    "{} had applied everything of the old primary's (it had written no transaction yet)",
                    r.new_primary
                ),
                Some(pos) => println!(
                    "{} had applied everything of the old primary's, up to GTID position {pos}",
                    r.new_primary
                ),
                None => eprintln!(
                    "warning: the old primary was not running: what it committed and had not \
                     sent to {} is not on the new primary",
                    r.new_primary
                ),
            }
            Ok(Exit::Ok)
        }
        SandboxCmd::Env(a) => env(home, a),
    }
}

/// Said when another sqlfleet command holds a sandbox's lock.
fn say_waiting(name: &str) {
    eprintln!(
        "sqlfleet sandbox: waiting for another sqlfleet command on sandbox '{name}' to finish"
    );
}

/// This process's turn on sandbox `name` (see `sqlfleet_sandbox::lock`).
async fn one_at_a_time(home: &std::path::Path, name: &str) -> anyhow::Result<sandbox::SandboxLock> {
    Ok(
        sandbox::lock(home, name, &sandbox::Interrupt::default(), || {
            say_waiting(name)
        })
        .await?,
    )
}

fn selected(home: &std::path::Path, w: &Which) -> anyhow::Result<Vec<Sandbox>> {
    if w.all {
        return sandbox::names(home)?
            .iter()
            .map(|n| Sandbox::open(home, n).map_err(Into::into))
            .collect();
    }
    Ok(vec![Sandbox::open(home, &w.name)?])
}

async fn up(home: PathBuf, a: UpArgs) -> anyhow::Result<Exit> {
    for o in &a.options {
        if !o.contains('=') && o.starts_with('-') {
            anyhow::bail!("--option '{o}': write server options as key=value, without dashes");
        }
    }
    let opts = UpOptions {
        name: a.name,
        port: a.port,
        ports: None,
        replicas: a.replicas,
        galera: a.galera.map(usize::from),
        domain: a.domain,
        options: a.options,
        mariadbd: a.mariadbd,
        die_with_parent: false,
        restart: a.restart,
        interrupt: sandbox::Interrupt::new(crate::shutdown::on_interrupt(
            "sandbox",
            "stopping the servers still starting",
        )),
        waiting: Some(say_waiting),
    };
    let report = match sandbox::up(&home, &opts).await {
        Err(e @ sandbox::SandboxError::Interrupted { .. }) => {
            eprintln!("sqlfleet sandbox: {e}");
            return Ok(crate::shutdown::interrupted_exit());
        }
        r => r?,
    };
    let sb = &report.sandbox;
    let version = sb
        .binaries(None)
        .ok()
        .and_then(|b| b.version())
        .unwrap_or_else(|| "MariaDB".into());
    let verb = if !report.created.is_empty() {
        "created and started"
    } else if !report.started.is_empty() {
        "started"
    } else {
        "already running"
    };
    println!(
        "sandbox '{}' {verb} in {:.1}s: {version}",
        sb.name(),
        report.elapsed.as_secs_f64()
    );
    for n in &sb.meta.nodes {
        let role = match n.role {
            Role::Primary => "primary",
            Role::Replica => "replica (GTID, read_only)",
            Role::Member => "Galera member (Synced, writable)",
        };
        println!("  {:<9} 127.0.0.1:{:<5}  {role}", n.name, n.port);
    }
    for r in &report.repaired {
        println!("  repaired {r}");
    }
    println!("connect:");
    println!("  mariadb --defaults-file={}", sb.defaults_file().display());
    println!("  sqlfleet <command> --sandbox {}", sb.name());
    println!("  eval \"$(sqlfleet sandbox env --name {})\"", sb.name());
    println!(
        "root password: {} (mode 0600)",
        sb.layout.password_file().display()
    );
    Ok(Exit::Ok)
}

async fn list(home: PathBuf, json: bool) -> anyhow::Result<Exit> {
    let mut rows = Vec::new();
    for name in sandbox::names(&home)? {
        let sb = Sandbox::open(&home, &name)?;
        rows.extend(sb.status().await);
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(Exit::Ok);
    }
    if rows.is_empty() {
        println!(
            "no sandboxes under {} ('sqlfleet sandbox up' makes one)",
            home.display()
        );
        return Ok(Exit::Ok);
    }
    println!(
        "{:<12} {:<9} {:<8} {:<6} {:<9} {:>8} {:<8} REPLICATION",
        "SANDBOX", "NODE", "ROLE", "PORT", "VERSION", "PID", "STATE"
    );
    for r in rows {
        let role = r.role.as_str();
        let repl = match (&r.replication, &r.error, r.role, r.running) {
            (_, Some(e), _, _) => format!("unknown: {e}"),
            (_, _, Role::Member, true) => match &r.galera {
                Some(g) => format!(
                    "galera {}, cluster of {} ({}){}",
                    g.state,
                    g.cluster_size,
                    g.cluster_status,
                    if g.ready { "" } else { ", NOT ready" }
                ),
                None => "galera: unknown".into(),
            },
            (Some(h), _, _, _) if h.healthy() => format!(
                "ok, {} transactions behind ({}s), gtid {}",
                r.gtid_behind.map_or("?".into(), |n| n.to_string()),
                h.seconds_behind.map_or("?".into(), |s| s.to_string()),
                if h.gtid_io_pos.is_empty() {
                    "(none yet)"
                } else {
                    h.gtid_io_pos.as_str()
                }
            ),
            (Some(h), _, _, _) => format!(
                "BROKEN: io={} sql={} {}",
                h.io_running,
                h.sql_running,
                // (The server's words quote a statement's values.)
                sqlfleet_dump::printable::printable(&h.last_error)
            ),
            (None, _, Role::Replica, true) => "not configured".into(),
            _ => "-".into(),
        };
        let repl = if r.not_as_configured.is_empty() {
            repl
        } else {
            format!(
                "{}NOT AS sandbox.toml SAYS: {} ('sqlfleet sandbox up --name {}' repairs it)",
                if repl == "-" {
                    String::new()
                } else {
                    format!("{repl}; ")
                },
                r.not_as_configured.join("; "),
                r.sandbox
            )
        };
        println!(
            "{:<12} {:<9} {:<8} {:<6} {:<9} {:>8} {:<8} {}",
            r.sandbox,
            r.node,
            role,
            r.port,
            // `11.4.5` of `11.4.5-MariaDB` (--json has it whole).
            r.version
                .as_deref()
                .and_then(|v| v.split('-').next())
                .unwrap_or("?"),
            r.pid.map_or("-".into(), |p| p.to_string()),
            match (r.running, r.crashed_pid) {
                (true, _) => "running".to_string(),
                (false, Some(p)) => format!("crashed (stale pid {p})"),
                (false, None) => "stopped".to_string(),
            },
            repl
        );
    }
    Ok(Exit::Ok)
}

fn env(home: PathBuf, a: EnvArgs) -> anyhow::Result<Exit> {
    let sb = Sandbox::open(&home, &a.name)?;
    let want = a
        .node
        .clone()
        .unwrap_or_else(|| sb.meta.primary().name.clone());
    let node = sb
        .meta
        .nodes
        .iter()
        .find(|n| n.name == want)
        .with_context(|| {
            let names: Vec<&str> = sb.meta.nodes.iter().map(|n| n.name.as_str()).collect();
            format!(
                "sandbox '{}' has no node '{}' (it has {})",
                a.name,
                want,
                names.join(", ")
            )
        })?;
    let cnf = sb.layout.client_cnf(node);
    if a.defaults_file {
        println!("{}", cnf.display());
        return Ok(Exit::Ok);
    }
    // The password is read from its file when the shell evaluates this, so
    // it never appears in our output.
    let q = |p: &std::path::Path| format!("'{}'", p.display().to_string().replace('\'', "'\\''"));
    println!("export MYSQL_HOST=127.0.0.1");
    println!("export MYSQL_TCP_PORT={}", node.port);
    println!(
        "export MYSQL_PWD=\"$(cat {})\"",
        q(&sb.layout.password_file())
    );
    println!("export SQLFLEET_SANDBOX={}", sb.name());
    println!("export SQLFLEET_DEFAULTS_FILE={}", q(&cnf));
    println!("# mariadb -uroot  |  mariadb --defaults-file=\"$SQLFLEET_DEFAULTS_FILE\"");
    Ok(Exit::Ok)
}

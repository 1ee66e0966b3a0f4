//! `sqlfleet watch`: flags and files in, the monitor run, exit codes out.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use sqlfleet_conn::ConnArgs;
use sqlfleet_watch::config::{self, FileConfig};
use sqlfleet_watch::creds::{self, Entry, Store};
use sqlfleet_watch::history::HistoryConfig;
use sqlfleet_watch::monitor::{self, MonitorConfig, State};
use sqlfleet_watch::web;

use super::inventory::{self, HostArgs};
use crate::exit::Exit;

/// Watch a fleet: who is down, stalled or maxed out, with alerts.
///
/// Every server is checked every --interval over one kept connection;
/// "down" (refused, unreachable, login refused) is told apart from
/// "stalled" (accepts connections but does not answer within --timeout).
/// Rules with hold times open incidents; each incident sends one message
/// when it opens and one when it resolves (webhook and SMTP from
/// --config). Hosts come as for `sqlfleet query` (--hosts, --hosts-file,
/// --discover, -h/-S/--dsn, --sandbox NAME), or from the config file.
/// Logins (and SSH destinations for host metrics) can come from the
/// encrypted credential store (`sqlfleet watch creds`).
///
/// Exit codes: with --once 0 every server ok, 2 some not ok, 3 none ok;
/// otherwise 0 when stopped, 1 usage or setup error.
#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true, args_conflicts_with_subcommands = true)]
pub struct WatchArgs {
    #[command(subcommand)]
    cmd: Option<WatchCmd>,
    #[command(flatten)]
    conn: ConnArgs,
    /// Print help
    #[arg(long, action = clap::ArgAction::HelpLong)]
    help: Option<bool>,
    #[command(flatten)]
    hosts: HostArgs,
    /// watch.toml: hosts, interval, rules, notification channels
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Seconds between checks of a server [default: 5, or the config's]
    #[arg(long, value_name = "S")]
    interval: Option<f64>,
    /// Seconds a check may take before the server counts as stalled [default: 2]
    #[arg(long, value_name = "S")]
    timeout: Option<f64>,
    /// Checks in flight at once [default: 256]
    #[arg(long)]
    parallel: Option<usize>,
    /// tui (a live screen; the default on a terminal) or none (lines on stdout)
    #[arg(long, value_enum)]
    ui: Option<Ui>,
    /// JSON: one object per state change, incident and notification
    /// (with --once: the whole fleet)
    #[arg(long)]
    json: bool,
    /// Check every server once, print the table (or JSON) and exit
    #[arg(long)]
    once: bool,
    /// Serve the fleet page, /metrics and /api on ADDR (e.g. 127.0.0.1:8080);
    /// an address other than loopback needs a login (`creds web`, or a
    /// token in $SQLFLEET_WATCH_TOKEN)
    #[arg(long, value_name = "ADDR")]
    listen: Option<std::net::SocketAddr>,
    /// Keep the samples and incidents in this SQLite file (or DIR/history.db)
    /// [default with --listen: $SQLFLEET_HOME/watch/history.db]
    #[arg(long, value_name = "DIR|FILE")]
    history: Option<PathBuf>,
    /// The history's bound in MiB; the oldest samples go first [default: 1024]
    #[arg(long, value_name = "MIB")]
    history_max_mb: Option<u64>,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(clap::Args, Debug, Clone)]
pub struct StoreArgs {
    /// The credential store [default: $SQLFLEET_HOME/watch/creds.age when it exists]
    #[arg(long, value_name = "FILE", global = true)]
    creds: Option<PathBuf>,
    /// A file whose first line is the store's passphrase (else
    /// $SQLFLEET_CREDS_PASSPHRASE, else a prompt)
    #[arg(long, value_name = "FILE", global = true)]
    creds_key_file: Option<PathBuf>,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum Ui {
    Tui,
    None,
}

#[derive(clap::Subcommand, Debug)]
enum WatchCmd {
    /// The encrypted credential store (logins and SSH destinations)
    #[command(subcommand)]
    Creds(CredsCmd),
    /// Send one test message through every channel of the config and report.
    /// Exit codes: 0 every channel delivered, 2 some failed, 3 all failed,
    /// 1 no channel configured
    TestAlert {
        /// watch.toml with [notify.webhook] and/or [notify.smtp]
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
}

#[derive(clap::Subcommand, Debug)]
enum CredsCmd {
    /// Create an empty store (asks for a new passphrase)
    Init,
    /// Add or replace a server's login; the password is read from the
    /// terminal or one line of standard input, never from the command line
    Add {
        /// host:port (or unix:/path) as the host list names it
        server: String,
        #[arg(long)]
        user: Option<String>,
        /// user@host for host metrics over SSH
        #[arg(long, value_name = "USER@HOST")]
        ssh: Option<String>,
        /// Store no password (the server or option files provide the login)
        #[arg(long)]
        no_password: bool,
        /// Also store a password for the SSH login (read after the
        /// server's, from the terminal or the next line of standard input)
        #[arg(long, requires = "ssh")]
        ssh_password: bool,
    },
    /// Set the web page's login (HTTP basic auth for --listen); the
    /// password is read from the terminal or one line of standard input
    Web {
        #[arg(long)]
        user: String,
    },
    /// List the servers in the store (never the passwords)
    List,
    /// Remove a server's entry
    Remove { server: String },
    /// Change the store's passphrase
    Passwd,
}

fn secs(v: f64, what: &str) -> anyhow::Result<Duration> {
    anyhow::ensure!(
        v.is_finite() && v > 0.0,
        "{what} must be a positive number of seconds"
    );
    Ok(Duration::from_secs_f64(v))
}

fn store_path(s: &StoreArgs, file: Option<&FileConfig>) -> PathBuf {
    s.creds
        .clone()
        .or_else(|| file.and_then(|f| f.creds.clone()))
        .unwrap_or_else(|| creds::default_path(&sqlfleet_conn::home::sqlfleet_home()))
}

/// The passphrase: key file, environment, or a prompt on the terminal.
fn passphrase(s: &StoreArgs, prompt: &str) -> anyhow::Result<String> {
    if let Some(f) = &s.creds_key_file {
        let t = std::fs::read_to_string(f).with_context(|| format!("{}", f.display()))?;
        let p = t.lines().next().unwrap_or_default().to_string();
        anyhow::ensure!(!p.is_empty(), "{}: the first line is empty", f.display());
        return Ok(p);
    }
    if let Ok(p) = std::env::var("SQLFLEET_CREDS_PASSPHRASE") {
        return Ok(p);
    }
    rpassword::prompt_password(prompt).context(
        "no passphrase: give --creds-key-file FILE or SQLFLEET_CREDS_PASSPHRASE, or run on a terminal",
    )
}

fn new_passphrase(s: &StoreArgs) -> anyhow::Result<String> {
    if s.creds_key_file.is_some() || std::env::var_os("SQLFLEET_CREDS_PASSPHRASE").is_some() {
        return passphrase(s, "");
    }
    let a = rpassword::prompt_password("New passphrase: ")?;
    let b = rpassword::prompt_password("Again: ")?;
    anyhow::ensure!(a == b, "the passphrases differ; nothing changed");
    anyhow::ensure!(!a.is_empty(), "an empty passphrase protects nothing");
    Ok(a)
}

/// A password from the terminal (no echo) or one line of stdin.
fn read_password(server: &str) -> anyhow::Result<String> {
    if std::io::stdin().is_terminal() {
        return Ok(rpassword::prompt_password(format!(
            "Password for {server}: "
        ))?);
    }
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line.trim_end_matches(['\n', '\r']).to_string())
}

fn creds_cmd(c: CredsCmd, s: &StoreArgs) -> anyhow::Result<Exit> {
    let path = store_path(s, None);
    match c {
        CredsCmd::Init => {
            let p = new_passphrase(s)?;
            creds::init(&path, &p)?;
            println!("created {}", path.display());
        }
        CredsCmd::Add {
            server,
            user,
            ssh,
            no_password,
            ssh_password,
        } => {
            let p = passphrase(s, "Store passphrase: ")?;
            let mut store = creds::load(&path, &p)?;
            let password = if no_password {
                None
            } else {
                Some(read_password(&server)?)
            };
            let ssh_password = if ssh_password {
                let d = ssh.as_deref().unwrap_or_default();
                Some(read_password(&format!("{d} (SSH)"))?)
            } else {
                None
            };
            store.put(Entry {
                server: server.clone(),
                user,
                password,
                ssh,
                ssh_password,
            });
            creds::save(&path, &p, &store)?;
            println!("saved {server} in {}", path.display());
        }
        CredsCmd::Web { user } => {
            let p = passphrase(s, "Store passphrase: ")?;
            let mut store = creds::load(&path, &p)?;
            let password = read_password(&format!("the web page's user {user}"))?;
            anyhow::ensure!(!password.is_empty(), "an empty password protects nothing");
            store.put(Entry {
                server: creds::WEB_LOGIN.into(),
                user: Some(user.clone()),
                password: Some(password),
                ssh: None,
                ssh_password: None,
            });
            creds::save(&path, &p, &store)?;
            println!("saved the web login {user} in {}", path.display());
        }
        CredsCmd::List => {
            let p = passphrase(s, "Store passphrase: ")?;
            let store = creds::load(&path, &p)?;
            for e in &store.entries {
                println!(
                    "{}\tuser={}\tpassword={}\tssh={}\tssh_password={}",
                    e.server,
                    e.user.as_deref().unwrap_or("-"),
                    if e.password.is_some() { "yes" } else { "no" },
                    e.ssh.as_deref().unwrap_or("-"),
                    if e.ssh_password.is_some() {
                        "yes"
                    } else {
                        "no"
                    },
                );
            }
        }
        CredsCmd::Remove { server } => {
            let p = passphrase(s, "Store passphrase: ")?;
            let mut store = creds::load(&path, &p)?;
            anyhow::ensure!(
                store.remove(&server),
                "{server} is not in {}",
                path.display()
            );
            creds::save(&path, &p, &store)?;
            println!("removed {server}");
        }
        CredsCmd::Passwd => {
            let old = passphrase(s, "Current passphrase: ")?;
            let store = creds::load(&path, &old)?;
            let new = if std::io::stdin().is_terminal() {
                let a = rpassword::prompt_password("New passphrase: ")?;
                let b = rpassword::prompt_password("Again: ")?;
                anyhow::ensure!(a == b, "the passphrases differ; nothing changed");
                a
            } else {
                read_password("the store (new passphrase)")?
            };
            anyhow::ensure!(!new.is_empty(), "an empty passphrase protects nothing");
            creds::save(&path, &new, &store)?;
            println!("passphrase changed for {}", path.display());
        }
    }
    Ok(Exit::Ok)
}

async fn test_alert(config: &Path) -> anyhow::Result<Exit> {
    let file = config::read(config).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(
        file.notify.webhook.is_some()
            || file.notify.smtp.is_some()
            || file.notify.alertmanager.is_some(),
        "{}: no [notify.webhook], [notify.smtp] or [notify.alertmanager] to test",
        config.display()
    );
    let m = sqlfleet_watch::notify::test_message(monitor::now_unix());
    let d = sqlfleet_watch::notify::send(&file.notify, &Default::default(), &m).await;
    for x in &d {
        println!(
            "{}\t{}\t{}",
            x.channel,
            if x.ok { "delivered" } else { "FAILED" },
            x.detail
        );
    }
    let ok = d.iter().filter(|x| x.ok).count();
    Ok(if ok == d.len() {
        Exit::Ok
    } else if ok == 0 {
        Exit::Total
    } else {
        Exit::Partial
    })
}

pub async fn run(a: WatchArgs) -> anyhow::Result<Exit> {
    match a.cmd {
        Some(WatchCmd::Creds(c)) => return creds_cmd(c, &a.store),
        Some(WatchCmd::TestAlert { config }) => return test_alert(&config).await,
        None => {}
    }
    let file = match &a.config {
        Some(p) => config::read(p).map_err(anyhow::Error::msg)?,
        None => FileConfig::default(),
    };
    let interval = secs(a.interval.or(file.interval).unwrap_or(5.0), "--interval")?;
    let timeout = secs(a.timeout.or(file.timeout).unwrap_or(2.0), "--timeout")?;
    let mut host_args = a.hosts.clone();
    if host_args.hosts.is_none() && host_args.hosts_file.is_none() && host_args.discover.is_none() {
        host_args.hosts = file.hosts.as_ref().map(|h| h.join(","));
        host_args.hosts_file = file.hosts_file.clone();
    }
    let (base, origin) = sqlfleet_conn::resolve_interactive_traced(&a.conn)?;
    let inv = inventory::resolve("watch", &host_args, &a.conn, &base, &origin, timeout).await?;
    // The store is read when one is named, or when the default one exists.
    let path = store_path(&a.store, Some(&file));
    let store: Option<Store> = if a.store.creds.is_some() || file.creds.is_some() || path.exists() {
        let p = passphrase(&a.store, "Credential store passphrase: ")?;
        Some(creds::load(&path, &p)?)
    } else {
        None
    };
    let servers = sqlfleet_watch::watched::watched(&inv.hosts, &base, store.as_ref(), &file.ssh);
    // One kept connection per server, an SSH pipe per host with metrics.
    let needed =
        servers.len() as u64 + servers.iter().filter(|w| w.ssh.is_some()).count() as u64 * 3 + 64;
    if let Some(w) = crate::fdlimit::ensure(
        needed,
        &format!(
            "watching {}",
            sqlfleet_conn::text::count(servers.len() as u64, "server")
        ),
    ) {
        tracing::warn!("{w}");
    }
    let cfg = MonitorConfig {
        servers,
        interval,
        timeout,
        parallel: a.parallel.or(file.parallel).unwrap_or(256).max(1),
        rules: file.rules(),
        notify: file.notify.clone(),
        batch: file.batch(),
        statements: file.statements.unwrap_or(true),
    };
    if a.once {
        let fleet = monitor::once(&cfg).await;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&fleet)?);
        } else {
            print!("{}", sqlfleet_watch::ui::table(&fleet));
        }
        let ok = fleet.count(State::Ok);
        return Ok(if ok == fleet.servers.len() {
            Exit::Ok
        } else if ok == 0 {
            Exit::Total
        } else {
            Exit::Partial
        });
    }
    let ui =
        a.ui.unwrap_or(if std::io::stdout().is_terminal() && !a.json {
            Ui::Tui
        } else {
            Ui::None
        });
    // The history and the page, set up (and refused) before polling starts.
    let history = a
        .history
        .clone()
        .or_else(|| {
            a.listen.map(|_| {
                sqlfleet_conn::home::sqlfleet_home()
                    .join("watch")
                    .join("history.db")
            })
        })
        .map(|p| {
            let p = if p.is_dir() { p.join("history.db") } else { p };
            let mut hc = HistoryConfig::new(p);
            if let Some(mb) = a.history_max_mb {
                anyhow::ensure!(mb >= 1, "--history-max-mb must be at least 1");
                hc.max_bytes = mb << 20;
            }
            Ok(hc)
        })
        .transpose()?;
    let listen = a.listen.map(|addr| {
        let auth = web::Auth {
            basic: store
                .as_ref()
                .and_then(|s| s.get(creds::WEB_LOGIN))
                .and_then(|e| Some((e.user.clone()?, e.password.clone()?))),
            token: std::env::var("SQLFLEET_WATCH_TOKEN")
                .ok()
                .filter(|t| !t.is_empty()),
        };
        (addr, auth)
    });
    let running = sqlfleet_watch::start::start(sqlfleet_watch::start::Options {
        monitor: cfg,
        history,
        listen,
    })
    .await?;
    if let Some(bound) = running.page {
        // Once: the log goes to standard error (or the log file behind
        // the TUI).
        tracing::info!("the fleet page is at http://{bound}/");
    }
    let (fleet, mut events) = (running.fleet, running.events);
    match ui {
        Ui::Tui => {
            // Events still go to the log (stderr is the screen's, so only
            // when it is redirected).
            tokio::spawn(async move { while events.recv().await.is_some() {} });
            tokio::task::spawn_blocking(move || sqlfleet_watch::ui::tui::run(fleet))
                .await?
                .context("the terminal screen")?;
            Ok(Exit::Ok)
        }
        Ui::None => {
            let stop = crate::shutdown::signal();
            tokio::pin!(stop);
            let mut out = std::io::stdout();
            loop {
                tokio::select! {
                    _ = &mut stop => return Ok(Exit::Ok),
                    e = events.recv() => {
                        let Some(e) = e else { return Ok(Exit::Ok) };
                        let line = if a.json { serde_json::to_string(&e)? } else { sqlfleet_watch::ui::event_line(&e) };
                        writeln!(out, "{line}")?;
                        out.flush()?;
                    }
                }
            }
        }
    }
}

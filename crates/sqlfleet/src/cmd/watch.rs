//! `sqlfleet watch`: flags and files in, the monitor run, exit codes out.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use sqlfleet_conn::ConnArgs;
use sqlfleet_watch::config::{self, FileConfig};
use sqlfleet_watch::creds::{self, Store};
use sqlfleet_watch::history::HistoryConfig;
use sqlfleet_watch::monitor::{self, MonitorConfig, State};
use sqlfleet_watch::web;

use super::inventory::{self, HostArgs};
use super::watch_creds::{self, passphrase, store_path, CredsCmd, StoreArgs};
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
    // Global: clap's own help flag is off for -h = --host, and that holds
    // for watch's subcommands too (`watch creds add --help` was an error).
    #[arg(long, action = clap::ArgAction::HelpLong, global = true)]
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
    /// Checks in flight at once [default: 256, or the config's]
    #[arg(long)]
    threads: Option<usize>,
    /// The old name of --threads
    #[arg(long, hide = true, conflicts_with = "threads")]
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
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..))]
    history_max_mb: Option<u64>,
    #[command(flatten)]
    store: StoreArgs,
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

fn secs(v: f64, what: &str) -> anyhow::Result<Duration> {
    anyhow::ensure!(
        v.is_finite() && v > 0.0,
        "{what} must be a positive number of seconds"
    );
    Ok(Duration::from_secs_f64(v))
}

async fn test_alert(config: &Path) -> anyhow::Result<Exit> {
    let file = config::read(config)?;
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
    Ok(Exit::of_share(d.iter().filter(|x| x.ok).count(), d.len()))
}

pub async fn run(a: WatchArgs) -> anyhow::Result<Exit> {
    match a.cmd {
        Some(WatchCmd::Creds(c)) => return watch_creds::run(c, &a.store),
        Some(WatchCmd::TestAlert { config }) => return test_alert(&config).await,
        None => {}
    }
    let file = match &a.config {
        Some(p) => config::read(p)?,
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
        parallel: a
            .threads
            .or(super::vocab::renamed(a.parallel, "--parallel", "--threads"))
            .or(file.threads)
            .unwrap_or(256)
            .max(1),
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
        return Ok(Exit::of_share(fleet.count(State::Ok), fleet.servers.len()));
    }
    let ui =
        a.ui.unwrap_or(if std::io::stdout().is_terminal() && !a.json {
            Ui::Tui
        } else {
            Ui::None
        });
    // The history and the page, set up (and refused) before polling starts.
    let history = HistoryConfig::chosen(
        a.history.clone(),
        a.listen.is_some(),
        &sqlfleet_conn::home::sqlfleet_home(),
        a.history_max_mb,
    );
    let listen = a.listen.map(|addr| (addr, web::Auth::of(store.as_ref())));
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

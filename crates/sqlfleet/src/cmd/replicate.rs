//! `sqlfleet replicate`: flags and config file in, the replicate crate's
//! run, status or skip, exit code out.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, Context};
use sqlfleet_conn::{ConnArgs, Env, Target};
use sqlfleet_replicate::config::{self, Checked};
use sqlfleet_replicate::gtid::Gtid;
use sqlfleet_replicate::run::{self, Options};
use sqlfleet_replicate::source::SourceView;

use super::vocab::Progress;
use crate::exit::Exit;

/// Replicate many MariaDB primaries into one server, per database, exactly once.
///
/// Each source's binlog is split by database and applied in parallel, each
/// transaction committed together with its position (exactly once across
/// kill -9, target restarts and reconnects). The config file (TOML) has
/// [target] with dsn (and password_file or password_env) or sandbox;
/// optional [apply] threads and batch; one [[source]] per primary with
/// name, dsn or sandbox, include and exclude (database globs), rename (a
/// table of old = new), start ("current", "gtid:D-S-N" or
/// "file:NAME:POS") and server_id. Unknown keys are refused.
///
/// Exit codes: 0 stopped cleanly (Ctrl-C/SIGTERM, or caught up with
/// --until-caught-up), 1 usage or setup error (bad config, a source
/// refused: binlog off, not MariaDB; the target lacks BINLOG REPLAY),
/// 2 some streams stopped on an error (see `replicate status`), or a
/// source was given up (--give-up-after without progress).
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ReplicateArgs {
    #[command(subcommand)]
    action: Option<Action>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(clap::Args, Debug, Default)]
struct RunArgs {
    /// The config file (TOML: [target], [[source]], [apply])
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Target connections applying in parallel (overrides [apply] threads)
    #[arg(long)]
    threads: Option<usize>,
    /// Stop once everything each source had at start is applied
    #[arg(long)]
    until_caught_up: bool,
    /// Give a source up after SECONDS without progress (down, refusing,
    /// failing again and again): its reader ends and the exit code is 2.
    /// Default: 60 with --until-caught-up, else never
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    give_up_after: Option<u64>,
    /// Progress every 2 s: auto (a line on standard error on a
    /// terminal), bar (that line always), json (one object per line on
    /// standard output, each source's state) or none
    #[arg(long, default_value = "auto", value_parser = progress_value())]
    progress: Progress,
    /// Print the summary as JSON on stdout
    #[arg(long)]
    json: bool,
    /// Errors only: no progress, and a summary only of what stopped
    #[arg(long)]
    quiet: bool,
    /// Serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9105)
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Per stream: position, lag, state, last error. Exit codes: 0 all
    /// streams ok, 1 setup error, 2 some stream stopped, a source
    /// unreachable, or a source refused (its binlog behind what was
    /// applied of it)
    Status {
        /// The config file replicate runs with
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// JSON on stdout
        #[arg(long)]
        json: bool,
    },
    /// Copy each source's included databases to the target (renamed, from
    /// one consistent snapshot per source), then record that snapshot's
    /// GTID as where replication starts. Resumable: run it again after an
    /// interruption. Exit codes: 0 seeded, 1 error (nothing recorded), 130
    /// interrupted (143 on SIGTERM; run it again to go on)
    Seed {
        /// The config file replicate runs with
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// Only this source (default: every source)
        #[arg(long)]
        source: Option<String>,
        /// Where the dump files go (kept until the seed is recorded)
        #[arg(long, value_name = "DIR", default_value = "sqlfleet-seed")]
        dir: PathBuf,
        /// Target connections loading each dump
        #[arg(long, default_value_t = 4)]
        threads: usize,
        /// Seed although target databases have tables, or the source
        /// already replicates (its positions are replaced by the snapshot's)
        #[arg(long)]
        force: bool,
        /// How long to wait for XA transactions prepared on the source to
        /// end before its dump (a snapshot lacks their changes, and
        /// replication would stop at their XA COMMIT): then refused
        #[arg(long, value_name = "SECONDS", default_value_t = 60)]
        xa_wait: u64,
    },
    /// Try a source's stopped transactions again, after their cause was
    /// fixed on the target: a running replicate does within a second (the
    /// next start does anyway). Exit codes: 0 requested, 1 error
    Retry {
        #[command(flatten)]
        on: OneSource,
        /// Only when this stream (target database) is one of those stopped
        #[arg(long, value_name = "DB")]
        stream: Option<String>,
    },
    /// Pass over one transaction of a source, recorded on the target
    /// (sqlfleet.replicate_skip). Exit codes: 0 recorded, 1 error
    Skip {
        #[command(flatten)]
        on: OneSource,
        /// The transaction's GTID (domain-server-seq)
        #[arg(long)]
        gtid: String,
        /// Why (kept with the record)
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Record that a GTID domain the source deleted (FLUSH BINARY LOGS
    /// DELETE_DOMAIN_ID) was applied up to GTID, its end: the source is
    /// read on, and the domain's next transactions are applied as new.
    /// Only where the source's binlog no longer names the domain's end
    /// (replicate retires it by itself while it does). Refused while
    /// replicate runs for the source, unless GTID is the one applied last
    /// in its domain, and where the source has the domain (written again
    /// since, or another server's history of it).
    /// Exit codes: 0 recorded, 1 error or refused
    RetireDomain {
        #[command(flatten)]
        on: OneSource,
        /// The domain's last GTID applied (domain-server-seq; `replicate
        /// status` shows the floor)
        #[arg(long)]
        gtid: String,
        /// Why (kept with the record)
        #[arg(long, default_value = "")]
        reason: String,
    },
}

/// The source a request is about: `--config FILE --source NAME`.
#[derive(clap::Args, Debug)]
pub struct OneSource {
    /// The config file replicate runs with
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The source's name in the config
    #[arg(long)]
    source: String,
}

/// A config's server as a connection target: a DSN (its password from the
/// DSN, a file or the environment) or a sandbox's primary. Errors name the
/// server without its password.
fn target_of(server: &config::Server) -> anyhow::Result<Target> {
    let (args, password) = match server {
        config::Server::Dsn { dsn, password } => (
            ConnArgs {
                dsn: Some(dsn.clone()),
                ..ConnArgs::default()
            },
            password.clone(),
        ),
        config::Server::Sandbox(name) => (
            ConnArgs {
                sandbox: Some(name.clone()),
                ..ConnArgs::default()
            },
            None,
        ),
    };
    let mut t =
        sqlfleet_conn::resolve(&args, &Env::from_process()).with_context(|| server.describe())?;
    if let Some(p) = password {
        t.password = Some(sqlfleet_conn::PasswordSpec::Given(p));
    }
    Ok(t)
}

fn load(path: &std::path::Path) -> anyhow::Result<(Checked, Target, Vec<Target>)> {
    let cfg = config::load(path)?;
    let target = target_of(&cfg.target).context("[target]")?;
    let sources = cfg
        .sources
        .iter()
        .map(|s| target_of(&s.server).with_context(|| format!("source '{}'", s.name)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok((cfg, target, sources))
}

/// A `--source` must name one of the config's sources.
fn named(cfg: &Checked, name: &str, config: &std::path::Path) -> anyhow::Result<()> {
    anyhow::ensure!(
        cfg.sources.iter().any(|s| s.name == name),
        "no source named '{name}' in {}",
        config.display()
    );
    Ok(())
}

pub async fn run(a: ReplicateArgs) -> anyhow::Result<Exit> {
    match a.action {
        Some(Action::Status { config, json }) => status(&config, json).await,
        Some(Action::Skip {
            on: OneSource { config, source },
            gtid,
            reason,
        }) => {
            let (cfg, target, _) = load(&config)?;
            named(&cfg, &source, &config)?;
            let g: Gtid = gtid.parse()?;
            sqlfleet_replicate::status::skip(&target, &source, &g, &reason).await?;
            println!("recorded: source '{source}' passes over {g}");
            Ok(Exit::Ok)
        }
        Some(Action::RetireDomain {
            on: OneSource { config, source },
            gtid,
            reason,
        }) => {
            let (cfg, target, sources) = load(&config)?;
            named(&cfg, &source, &config)?;
            let g: Gtid = gtid.parse()?;
            let src = cfg
                .sources
                .iter()
                .zip(&sources)
                .find(|(s, _)| s.name == source)
                .map(|(_, t)| t)
                .ok_or_else(|| anyhow!("no source named '{source}'"))?;
            sqlfleet_replicate::status::retire_domain(&target, src, &source, &g, &reason).await?;
            println!(
                "recorded: source '{source}' retires domain {} at {g}; its next transactions there are read as new",
                g.domain
            );
            Ok(Exit::Ok)
        }
        Some(Action::Seed {
            config,
            source,
            dir,
            threads,
            force,
            xa_wait,
        }) => {
            let (cfg, target, sources) = load(&config)?;
            if let Some(name) = &source {
                named(&cfg, name, &config)?;
            }
            let interrupt = crate::shutdown::on_interrupt(
                "replicate seed",
                "finishing the statements in flight and journaling them (run seed again to go on)",
            );
            for (s, src) in cfg.sources.iter().zip(&sources) {
                if source.as_ref().is_some_and(|n| *n != s.name) {
                    continue;
                }
                if *interrupt.borrow() {
                    eprintln!(
                        "sqlfleet replicate seed: interrupted before source '{}': run `replicate seed` again to go on",
                        s.name
                    );
                    return Ok(crate::shutdown::interrupted_exit());
                }
                let opts = crate::cmd::replicate_seed::Options {
                    dir: &dir,
                    threads: threads.max(1),
                    force,
                    xa_wait: std::time::Duration::from_secs(xa_wait),
                };
                let seeded =
                    crate::cmd::replicate_seed::seed_one(s, src, &target, &opts, interrupt.clone())
                        .await;
                match seeded {
                    Ok(()) => {}
                    Err(e) if e.is::<crate::cmd::replicate_seed::Interrupted>() => {
                        eprintln!("sqlfleet replicate seed: {e}");
                        return Ok(crate::shutdown::interrupted_exit());
                    }
                    Err(e) => return Err(e.context(format!("seeding source '{}'", s.name))),
                }
            }
            Ok(Exit::Ok)
        }
        Some(Action::Retry {
            on: OneSource { config, source },
            stream,
        }) => {
            let (cfg, target, _) = load(&config)?;
            named(&cfg, &source, &config)?;
            let id = sqlfleet_replicate::status::retry(
                &target,
                &source,
                stream.as_deref().unwrap_or(""),
            )
            .await?;
            println!(
                "requested (#{id}): source '{source}' tries its stopped {} again (a running replicate within a second; otherwise at its next start); see `replicate status`",
                stream.map_or("streams".to_string(), |s| format!("stream {s}"))
            );
            Ok(Exit::Ok)
        }
        None => replicate(a.run).await,
    }
}

async fn replicate(a: RunArgs) -> anyhow::Result<Exit> {
    let path = a.config.ok_or_else(|| {
        anyhow!("replicate needs --config FILE (or a subcommand: status, seed, retry, skip, retire-domain)")
    })?;
    let (cfg, target, sources) = load(&path)?;
    let stop_rx = crate::shutdown::on_interrupt(
        "replicate",
        "letting each stream finish its transaction and record its position",
    );
    let views: Vec<Arc<Mutex<SourceView>>> = cfg
        .sources
        .iter()
        .map(|_| Arc::new(Mutex::new(SourceView::default())))
        .collect();
    let mode = if a.quiet {
        Progress::None
    } else {
        a.progress.resolve()
    };
    let progress = matches!(mode, Progress::Bar | Progress::Json).then(|| {
        let views = views.clone();
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                if mode == Progress::Json {
                    let now: Vec<SourceView> = views
                        .iter()
                        .filter_map(|v| v.lock().ok().map(|g| g.clone()))
                        .collect();
                    println!(
                        "{}",
                        serde_json::json!({"event": "progress", "seconds": started.elapsed().as_secs(), "sources": now})
                    );
                } else {
                    eprintln!("replicate: {}", line(&views));
                }
            }
        })
    });
    let metrics = match a.metrics {
        Some(addr) => Some(
            sqlfleet_replicate::metrics::serve(addr, views.clone())
                .await
                .with_context(|| format!("--metrics {addr}"))?,
        ),
        None => None,
    };
    let opts = Options {
        threads: a.threads,
        until_caught_up: a.until_caught_up,
        give_up_after: a
            .give_up_after
            .or(a.until_caught_up.then_some(60))
            .map(std::time::Duration::from_secs),
    };
    let r = run::run(&cfg, &target, &sources, &opts, stop_rx, views).await;
    if let Some(p) = progress {
        p.abort();
    }
    if let Some(m) = metrics {
        m.abort();
    }
    let summary = r?;
    let text = sqlfleet_replicate::report::summary_text(&summary);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
        // A stopped stream is said on standard error too.
        for l in text.lines().filter(|l| l.contains("STOPPED")) {
            eprintln!("{l}");
        }
    } else if a.quiet {
        for l in text
            .lines()
            .filter(|l| l.contains("STOPPED") || l.contains("GAVE UP"))
        {
            eprintln!("{l}");
        }
    } else {
        eprint!("{text}");
    }
    Ok(
        if summary.stopped_streams > 0 || summary.given_up_sources > 0 {
            Exit::Partial
        } else {
            Exit::Ok
        },
    )
}

fn line(views: &[Arc<Mutex<SourceView>>]) -> String {
    let now: Vec<SourceView> = views
        .iter()
        .filter_map(|v| v.lock().ok().map(|g| g.clone()))
        .collect();
    sqlfleet_replicate::report::progress_line(&now)
}

async fn status(path: &std::path::Path, json: bool) -> anyhow::Result<Exit> {
    let (cfg, target, sources) = load(path)?;
    let st = sqlfleet_replicate::status::status(&cfg, &target, &sources)
        .await
        .map_err(|e| anyhow!(e))?;
    let bad = st.iter().any(|s| {
        s.source_error.is_some()
            || s.behind_the_floor.is_some()
            || s.streams.iter().any(|x| x.state != "ok")
    });
    if json {
        println!("{}", serde_json::to_string_pretty(&st)?);
    } else {
        print!("{}", sqlfleet_replicate::report::status_text(&st));
    }
    Ok(if bad { Exit::Partial } else { Exit::Ok })
}

/// `--progress`'s values: the four words, and `always` and `never`, its
/// old words, hidden, still meaning `bar` and `none` (with a note).
fn progress_value() -> impl clap::builder::TypedValueParser<Value = Progress> {
    use clap::builder::{PossibleValue, TypedValueParser};
    clap::builder::PossibleValuesParser::new([
        PossibleValue::new("auto"),
        PossibleValue::new("bar"),
        PossibleValue::new("json"),
        PossibleValue::new("none"),
        PossibleValue::new("always").hide(true),
        PossibleValue::new("never").hide(true),
    ])
    .map(|s| match s.as_str() {
        "bar" => Progress::Bar,
        "json" => Progress::Json,
        "none" => Progress::None,
        "always" | "never" => {
            let (new, p) = if s == "always" {
                ("bar", Progress::Bar)
            } else {
                ("none", Progress::None)
            };
            super::vocab::renamed(
                Some(()),
                &format!("--progress {s}"),
                &format!("--progress {new}"),
            );
            p
        }
        _ => Progress::Auto,
    })
}

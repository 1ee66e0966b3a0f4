//! `sqlfleet bench insert|pool|compare`.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::json;
use sqlfleet_bench::insert::{self, InsertOptions};
use sqlfleet_bench::pool::{self, PoolOptions};
use sqlfleet_bench::report::{self, Results};
use sqlfleet_conn::{ConnArgs, Endpoint, PasswordSpec, Target};

use crate::exit::Exit;

#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// Concurrent inserters x table sizes x index: rates, stalls, errors, lost rows.
    /// Exit codes: 0 done, 1 usage or setup error, 2 acknowledged rows were lost
    Insert(Box<InsertArgs>),
    /// Connect / q queries / disconnect clients, direct and through relays.
    /// Exit codes: 0 done, 1 usage or setup error, 2 a cell failed (more
    /// errors than --max-errors)
    Pool(Box<PoolArgs>),
    /// Compare two result directories (Welch's t test per cell). Exit
    /// codes: 0 no regression, 1 the runs do not compare (different
    /// benchmarks, no cell in common), 2 a regression or a cell that
    /// failed in B
    Compare {
        /// The earlier run's directory (results.json)
        a: PathBuf,
        /// The later run's directory
        b: PathBuf,
        /// A cell regressed only when lower by at least PCT percent (and
        /// beyond the noise, where samples tell it); with one sample each,
        /// a drop of PCT percent counts (for scripted comparisons)
        #[arg(long, value_name = "PCT")]
        fail_on_regression: Option<f64>,
    },
}

#[derive(Args, Debug)]
#[command(disable_help_flag = true)]
pub struct InsertArgs {
    #[command(flatten)]
    conn: ConnArgs,
    /// Print help
    #[arg(long, action = clap::ArgAction::HelpLong)]
    help: Option<bool>,
    /// Concurrent inserters to try
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    processes: Vec<usize>,
    /// Rows in the table before each run
    #[arg(long, value_delimiter = ',', default_value = "0")]
    table_sizes: Vec<u64>,
    /// Index on (fname, version): on, off or both
    #[arg(long, default_value = "both", value_parser = ["on", "off", "both"])]
    index: String,
    /// per-insert (connect for every insert) or persistent
    #[arg(long, default_value = "persistent", value_parser = ["per-insert", "persistent"])]
    connect: String,
    /// Seconds per cell, after a 1 s warm-up
    #[arg(long, default_value_t = 5, conflicts_with = "rows")]
    duration: u64,
    /// Or: acknowledged inserts per cell
    #[arg(long)]
    rows: Option<u64>,
    /// Where to write CSV, JSON, charts and report.html
    #[arg(long, default_value = "bench-insert")]
    out: PathBuf,
    /// Drop the sqlfleet_bench database from the target at the end
    #[arg(long)]
    cleanup: bool,
    /// Print a progress line every S seconds (as sysbench's
    /// --report-interval); without it a terminal gets one line updated in place
    #[arg(long, value_name = "S")]
    report_interval: Option<u64>,
}

#[derive(Args, Debug)]
#[command(disable_help_flag = true)]
pub struct PoolArgs {
    #[command(flatten)]
    conn: ConnArgs,
    /// Print help
    #[arg(long, action = clap::ArgAction::HelpLong)]
    help: Option<bool>,
    /// Also measure through this relay or proxy (repeatable): HOST:PORT
    /// (with the direct target's user, password and TLS) or a URL with its
    /// own, mysql://user:pass@host:port/?ssl-mode=DISABLED
    #[arg(long, value_name = "HOST:PORT|URL")]
    via: Vec<String>,
    /// Fail the run (exit 2) when a cell's errors exceed this percentage of
    /// its attempts (connects and queries), or when it ran no query at all
    #[arg(long, default_value_t = 1.0, value_name = "PCT")]
    max_errors: f64,
    /// A list (1,2,5) or a range (1..10)
    #[arg(long, default_value = "1,2,5,10,20")]
    queries_per_connection: String,
    /// A statement each client sends right after logging in, as drivers
    /// do, timed as part of its connect (repeatable, in order): e.g. the
    /// mariadb client's `select @@version_comment limit 1`
    #[arg(long, value_name = "SQL")]
    connect_query: Vec<String>,
    /// Rows in the table each query reads whole
    #[arg(long, default_value_t = 256)]
    rows: u32,
    /// CHAR columns in that table
    #[arg(long, default_value_t = 16)]
    columns: u32,
    /// Width of each CHAR column (1 to 255)
    #[arg(long, default_value_t = 32)]
    column_size: u32,
    /// Concurrent clients to try
    #[arg(long, value_delimiter = ',', default_value = "8")]
    clients: Vec<usize>,
    /// Measured 1-second windows per cell (after one warm-up window)
    #[arg(long, default_value_t = 5)]
    samples: usize,
    /// Where to write CSV, JSON, charts and report.html
    #[arg(long, default_value = "bench-pool")]
    out: PathBuf,
    /// Drop the sqlfleet_bench database from the target at the end
    #[arg(long)]
    cleanup: bool,
    /// Print a progress line every S seconds (as sysbench's
    /// --report-interval); without it a terminal gets one line updated in place
    #[arg(long, value_name = "S")]
    report_interval: Option<u64>,
}

fn parse_qs(s: &str) -> anyhow::Result<Vec<u32>> {
    if let Some((a, b)) = s.split_once("..") {
        let (a, b): (u32, u32) = (a.trim().parse()?, b.trim().parse()?);
        anyhow::ensure!(
            a >= 1 && a <= b,
            "--queries-per-connection {s}: need 1 <= A <= B"
        );
        return Ok((a..=b).collect());
    }
    let v: Vec<u32> = s
        .split(',')
        .map(|x| x.trim().parse())
        .collect::<Result<_, _>>()?;
    anyhow::ensure!(
        v.iter().all(|&q| q >= 1),
        "queries per connection must be at least 1"
    );
    Ok(v)
}

/// The target as every command resolves it (flags, DSN, option files,
/// environment, SQLFLEET_SANDBOX), or, when none of them names a server,
/// the embedded default: sandbox "bench", started if needed.
async fn target(conn: &ConnArgs) -> anyhow::Result<Target> {
    let (target, origin) = sqlfleet_conn::resolve_interactive_traced(conn)?;
    if origin.named() {
        tracing::info!("bench: target {} (from {origin})", target.endpoint);
        return Ok(target);
    }
    let home = sqlfleet_conn::home::sqlfleet_home();
    let opts = sqlfleet_sandbox::UpOptions {
        name: "bench".into(),
        ..Default::default()
    };
    tracing::info!(
        "bench: no target given (no -h/-P/-S, --dsn, --sandbox, option file host or SQLFLEET_SANDBOX): using sandbox 'bench' (starting it if needed)"
    );
    let r = sqlfleet_sandbox::up(&home, &opts).await?;
    Ok(r.sandbox.target(r.sandbox.meta.primary())?)
}

/// Progress while a cell runs: on a terminal one line rewritten in place;
/// with `--report-interval S` (as sysbench's) a kept line every S seconds,
/// prefixed with the elapsed time, terminal or not.
fn progress_fn(report_interval: Option<u64>) -> impl Fn(&str) + Sync {
    let tty = std::io::stderr().is_terminal();
    let start = std::time::Instant::now();
    let last = std::sync::Mutex::new(0u64);
    move |s: &str| {
        let mut e = std::io::stderr().lock();
        if let Some(every) = report_interval.filter(|n| *n > 0) {
            let now = start.elapsed().as_secs();
            let mut l = last.lock().unwrap_or_else(|p| p.into_inner());
            if now >= *l + every {
                *l = now;
                let _ = writeln!(e, "{}[ {now}s ] {s}", if tty { "\r\x1b[2K" } else { "" });
            }
        } else if tty {
            let _ = write!(e, "\r\x1b[2K{s}");
            let _ = e.flush();
        }
    }
}

fn clear_progress() {
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K");
    }
}

fn now_string() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    report::utc_date(secs)
}

pub async fn run(cmd: BenchCmd) -> anyhow::Result<Exit> {
    match cmd {
        BenchCmd::Compare {
            a,
            b,
            fail_on_regression,
        } => {
            if let Some(p) = fail_on_regression {
                anyhow::ensure!(
                    p.is_finite() && p >= 0.0,
                    "--fail-on-regression {p}: a percentage of 0 or more"
                );
            }
            let ra = report::read(&a).map_err(anyhow::Error::msg)?;
            let rb = report::read(&b).map_err(anyhow::Error::msg)?;
            let (text, regressed) = report::compare(&ra, &rb, fail_on_regression)
                .map_err(|e| anyhow::anyhow!("{} vs {}: {e}", a.display(), b.display()))?;
            print!("{text}");
            Ok(if regressed { Exit::Partial } else { Exit::Ok })
        }
        BenchCmd::Insert(a) => insert_cmd(*a).await,
        BenchCmd::Pool(a) => pool_cmd(*a).await,
    }
}

async fn insert_cmd(a: InsertArgs) -> anyhow::Result<Exit> {
    let target = target(&a.conn).await?;
    anyhow::ensure!(
        a.processes.iter().all(|&p| p >= 1),
        "--processes must be at least 1"
    );
    let opts = InsertOptions {
        target: target.clone(),
        processes: a.processes.clone(),
        table_sizes: a.table_sizes.clone(),
        index: match a.index.as_str() {
            "on" => vec![true],
            "off" => vec![false],
            _ => vec![false, true],
        },
        connect_per_insert: a.connect == "per-insert",
        duration: if a.rows.is_some() {
            None
        } else {
            Some(Duration::from_secs(a.duration.max(1)))
        },
        rows: a.rows,
        warmup_seconds: 1,
    };
    let mut results = Results {
        command: "bench insert".into(),
        parameters: BTreeMap::from([
            ("processes".to_string(), json!(a.processes)),
            ("table_sizes".to_string(), json!(a.table_sizes)),
            ("index".to_string(), json!(a.index)),
            ("connect".to_string(), json!(a.connect)),
            (
                "seconds_per_cell".to_string(),
                json!(a.rows.is_none().then_some(a.duration)),
            ),
            ("warmup_seconds".to_string(), json!(1)),
            ("inserts_per_cell".to_string(), json!(a.rows)),
        ]),
        server: sqlfleet_bench::server::info(&target).await,
        started: now_string(),
        insert: Vec::new(),
        pool: Vec::new(),
    };
    let progress = progress_fn(a.report_interval);
    println!("{}", insert::TABLE_HEAD);
    results.insert = insert::sweep(&opts, &progress, |cell| {
        clear_progress();
        for l in cell.lines() {
            println!("{l}");
        }
    })
    .await
    .context("insert cell")?;
    let lost_any = results.insert.iter().any(|c| c.lost > 0);
    finish(&a.out, &results, &target, a.cleanup).await?;
    Ok(if lost_any { Exit::Partial } else { Exit::Ok })
}

async fn pool_cmd(a: PoolArgs) -> anyhow::Result<Exit> {
    let direct = target(&a.conn).await?;
    let mut targets = vec![("direct".to_string(), direct.clone())];
    for v in &a.via {
        let (label, t) = via_target(&direct, v).map_err(|e| anyhow::anyhow!("--via {e}"))?;
        targets.push((label, t));
    }
    anyhow::ensure!(
        a.max_errors.is_finite() && (0.0..=100.0).contains(&a.max_errors),
        "--max-errors {}: a percentage from 0 to 100",
        a.max_errors
    );
    let opts = PoolOptions {
        targets,
        queries_per_connection: parse_qs(&a.queries_per_connection)?,
        clients: a.clients.clone(),
        rows: a.rows,
        columns: a.columns.max(1),
        column_size: a.column_size.clamp(1, 255),
        samples: a.samples.max(1),
        window: Duration::from_secs(1),
        max_error_rate: a.max_errors / 100.0,
        connect_queries: a.connect_query.clone(),
    };
    pool::prepare(&opts)
        .await
        .context("creating the table the clients read")?;
    let mut results = Results {
        command: "bench pool".into(),
        parameters: BTreeMap::from([
            (
                "targets".to_string(),
                json!(opts.targets.iter().map(|t| &t.0).collect::<Vec<_>>()),
            ),
            (
                "queries_per_connection".to_string(),
                json!(opts.queries_per_connection),
            ),
            ("clients".to_string(), json!(opts.clients)),
            ("connect_queries".to_string(), json!(opts.connect_queries)),
            ("table_rows".to_string(), json!(a.rows)),
            ("char_columns".to_string(), json!(opts.columns)),
            ("column_size".to_string(), json!(opts.column_size)),
            ("windows_per_cell".to_string(), json!(opts.samples)),
            ("window_seconds".to_string(), json!(1)),
            ("warmup_windows".to_string(), json!(1)),
        ]),
        server: sqlfleet_bench::server::info(&direct).await,
        started: now_string(),
        insert: Vec::new(),
        pool: Vec::new(),
    };
    let progress = progress_fn(a.report_interval);
    println!("{}", pool::TABLE_HEAD);
    results.pool = pool::sweep(&opts, &progress, |c| {
        clear_progress();
        println!("{}", c.line());
    })
    .await;
    finish(&a.out, &results, &direct, a.cleanup).await?;
    let failed: Vec<_> = results.pool.iter().filter(|c| c.failed).collect();
    for c in &failed {
        eprintln!(
            "sqlfleet bench: {}: {} errors in {} connections (more than {}%); first: {}",
            c.key(),
            c.errors,
            c.connections,
            a.max_errors,
            c.first_error.as_deref().unwrap_or("?")
        );
    }
    Ok(if failed.is_empty() {
        Exit::Ok
    } else {
        Exit::Partial
    })
}

/// After the cells: the files, the verdicts, the warnings, and what stays
/// on the target (or its removal with --cleanup).
async fn finish(
    out: &std::path::Path,
    results: &Results,
    target: &Target,
    cleanup: bool,
) -> anyhow::Result<()> {
    let w = report::write(out, results)?;
    println!("wrote {} in {}", w.files.join(", "), out.display());
    for v in report::verdicts(results) {
        println!("verdict: {v}");
    }
    for n in w.notes {
        println!("note: {n}");
    }
    for w in report::warnings(results) {
        println!("warning: {w}");
    }
    if cleanup {
        sqlfleet_bench::server::cleanup(target)
            .await
            .context("--cleanup")?;
        println!(
            "dropped the {} database (--cleanup)",
            sqlfleet_bench::server::DB
        );
    } else {
        println!("note: {}", report::leftover_note());
    }
    Ok(())
}

/// A `--via` target: `HOST:PORT` with the direct target's login and TLS,
/// or a URL whose parts replace them. Returns (label, target); the label
/// never shows a password.
fn via_target(direct: &Target, v: &str) -> Result<(String, Target), String> {
    if v.contains("://") {
        let d = sqlfleet_conn::Dsn::parse(v).map_err(|e| e.to_string())?;
        let mut t = direct.clone();
        let host = d.host.clone().unwrap_or_else(|| "127.0.0.1".into());
        t.endpoint = match &d.socket {
            Some(s) => Endpoint::Socket(s.into()),
            None => Endpoint::Tcp {
                host,
                port: d.port.unwrap_or(3306),
            },
        };
        if let Some(u) = d.user {
            t.user = u;
        }
        if let Some(p) = d.password {
            t.password = Some(PasswordSpec::Given(p));
        }
        if let Some(m) = d.ssl_mode {
            t.ssl_mode = m;
        }
        if let Some(ca) = d.ssl_ca {
            t.ssl_ca = Some(ca.into());
        }
        return Ok((format!("via {}", t.endpoint), t));
    }
    let (h, p) = sqlfleet_conn::addr::parse_addr(v, 3306).map_err(|e| format!("{v}: {e}"))?;
    Ok((
        format!("via {v}"),
        direct.with_endpoint(Endpoint::Tcp { host: h, port: p }),
    ))
}

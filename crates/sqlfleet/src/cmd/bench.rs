//! `sqlfleet bench insert|pool|compare`.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use anyhow::Context;
use serde_json::json;
use sqlfleet_bench::insert::{self, InsertOptions};
use sqlfleet_bench::pool::{self, PoolOptions};
use sqlfleet_bench::report::{self, Results};
use sqlfleet_bench::sweep;
use sqlfleet_conn::{ConnArgs, Target};

use super::bench_args::{parse_qs, BenchCmd, InsertArgs, PoolArgs, ShowArgs};
use super::vocab::{renamed, Progress};
use crate::exit::Exit;

/// The target as every command resolves it (flags, DSN, option files,
/// environment, SQLFLEET_SANDBOX), or, when none of them names a server,
/// the embedded default: sandbox "bench", started if needed.
async fn target(conn: &ConnArgs, stop: &Stop) -> anyhow::Result<Target> {
    let (target, origin) = sqlfleet_conn::resolve_interactive_traced(conn)?;
    if origin.named() {
        tracing::info!("bench: target {} (from {origin})", target.endpoint);
        return Ok(target);
    }
    let home = sqlfleet_conn::home::sqlfleet_home();
    let opts = sqlfleet_sandbox::UpOptions {
        name: "bench".into(),
        interrupt: sqlfleet_sandbox::Interrupt::new(stop.clone()),
        ..Default::default()
    };
    tracing::info!(
        "bench: no target given (no -h/-P/-S, --dsn, --sandbox, option file host or SQLFLEET_SANDBOX): using sandbox 'bench' (starting it if needed)"
    );
    let r = sqlfleet_sandbox::up(&home, &opts).await?;
    Ok(r.sandbox.target(r.sandbox.meta.primary())?)
}

/// Ctrl-C or SIGTERM: the cell running is dropped, and the cells finished
/// are written as a run's results are (exit 130 or 143).
type Stop = tokio::sync::watch::Receiver<bool>;

fn on_interrupt() -> Stop {
    crate::shutdown::on_interrupt(
        "bench",
        "dropping the cell running and writing the cells finished",
    )
}

/// Resolves when `stop` fires (never when signals cannot be watched).
async fn fired(stop: &Stop) {
    let mut rx = stop.clone();
    if rx.wait_for(|v| *v).await.is_err() {
        std::future::pending::<()>().await
    }
}

/// The target, or the exit of a signal that stopped the embedded
/// sandbox's start.
async fn target_or_exit(conn: &ConnArgs, stop: &Stop) -> anyhow::Result<Result<Target, Exit>> {
    match target(conn, stop).await {
        Ok(t) => Ok(Ok(t)),
        Err(e) if crate::shutdown::seen() => {
            eprintln!("sqlfleet bench: {e:#}");
            Ok(Err(crate::shutdown::interrupted_exit()))
        }
        Err(e) => Err(e),
    }
}

/// Progress while a cell runs: on a terminal one line rewritten in place;
/// with `--report-interval S` (as sysbench's) a kept line every S seconds,
/// prefixed with the elapsed time, terminal or not.
/// The progress of a sweep as `mode` says: a line in place (every
/// `report_interval` seconds a kept line instead, as sysbench's), JSON
/// lines on standard error, or nothing.
fn progress_fn(mode: Progress, report_interval: Option<u64>) -> impl Fn(&str) + Sync {
    let mode = mode.resolve();
    let tty = std::io::stderr().is_terminal();
    let start = std::time::Instant::now();
    let last = std::sync::Mutex::new(None::<u64>);
    move |s: &str| {
        let mut e = std::io::stderr().lock();
        let now = start.elapsed().as_secs();
        match mode {
            // At most one object a second (the first at once).
            Progress::Json => {
                let mut l = last.lock().unwrap_or_else(|p| p.into_inner());
                if l.is_none_or(|at| now > at) {
                    *l = Some(now);
                    let _ = writeln!(
                        e,
                        "{}",
                        json!({"event": "progress", "seconds": now, "cell": s})
                    );
                }
            }
            Progress::Bar => {
                if let Some(every) = report_interval.filter(|n| *n > 0) {
                    let mut l = last.lock().unwrap_or_else(|p| p.into_inner());
                    if now >= l.unwrap_or(0) + every {
                        *l = Some(now);
                        let _ = writeln!(e, "{}[ {now}s ] {s}", if tty { "\r\x1b[2K" } else { "" });
                    }
                } else {
                    let _ = write!(e, "\r\x1b[2K{s}");
                    let _ = e.flush();
                }
            }
            _ => {}
        }
    }
}

fn clear_progress() {
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K");
    }
}

impl ShowArgs {
    /// The progress mode, none with --quiet.
    fn progress(&self) -> Progress {
        if self.quiet {
            Progress::None
        } else {
            self.progress
        }
    }

    /// A line of the results table (not with --json).
    fn row(&self, l: &str) {
        if !self.json {
            println!("{l}");
        }
    }
}

/// After the cells: the files, verdicts and warnings on stdout.
async fn finish(
    out: &std::path::Path,
    results: &Results,
    target: &Target,
    cleanup: bool,
    show: ShowArgs,
) -> anyhow::Result<()> {
    // With --json the lines go to standard error (warnings always).
    sweep::finish(out, results, target, cleanup, |l| {
        if l.starts_with("warning:") || !show.quiet {
            if show.json {
                eprintln!("{l}");
            } else {
                println!("{l}");
            }
        }
    })
    .await?;
    if show.json {
        println!("{}", serde_json::to_string_pretty(results)?);
    }
    Ok(())
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
            let ra = report::read(&a)?;
            let rb = report::read(&b)?;
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
    let stop = on_interrupt();
    let target = match target_or_exit(&a.conn, &stop).await? {
        Ok(t) => t,
        Err(exit) => return Ok(exit),
    };
    let threads = renamed(a.processes.clone(), "--processes", "--threads")
        .unwrap_or_else(|| a.threads.clone());
    anyhow::ensure!(
        threads.iter().all(|&p| p >= 1),
        "--threads must be at least 1"
    );
    let show = a.show;
    let opts = InsertOptions {
        target: target.clone(),
        processes: threads.clone(),
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
    let parameters = BTreeMap::from([
        ("processes".to_string(), json!(threads)),
        ("table_sizes".to_string(), json!(a.table_sizes)),
        ("index".to_string(), json!(a.index)),
        ("connect".to_string(), json!(a.connect)),
        (
            "seconds_per_cell".to_string(),
            json!(a.rows.is_none().then_some(a.duration)),
        ),
        ("warmup_seconds".to_string(), json!(1)),
        ("inserts_per_cell".to_string(), json!(a.rows)),
    ]);
    let mut results = sweep::begin("bench insert", parameters, &target).await;
    let progress = progress_fn(show.progress(), show.report_interval);
    show.row(insert::TABLE_HEAD);
    let kept = std::sync::Mutex::new(Vec::new());
    let sweep = insert::sweep(&opts, &progress, |cell| {
        clear_progress();
        for l in cell.lines() {
            show.row(&l);
        }
        kept.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(cell.clone());
    });
    let stopped = tokio::select! {
        r = sweep => {
            results.insert = r.context("insert cell")?;
            false
        }
        _ = fired(&stop) => true,
    };
    if stopped {
        clear_progress();
        results.insert = kept.into_inner().unwrap_or_else(|p| p.into_inner());
    }
    let lost_any = results
        .insert
        .iter()
        .any(|c| c.lost > 0 || c.duplicated > 0 || c.unaccounted > 0);
    finish(&a.out, &results, &target, a.cleanup, show).await?;
    Ok(if stopped {
        crate::shutdown::interrupted_exit()
    } else if lost_any {
        Exit::Partial
    } else {
        Exit::Ok
    })
}

async fn pool_cmd(a: PoolArgs) -> anyhow::Result<Exit> {
    let stop = on_interrupt();
    let direct = match target_or_exit(&a.conn, &stop).await? {
        Ok(t) => t,
        Err(exit) => return Ok(exit),
    };
    let mut targets = vec![("direct".to_string(), direct.clone())];
    for v in &a.via {
        // The label never shows a password.
        let t = direct
            .with_dsn(v)
            .map_err(|e| anyhow::anyhow!("--via {e}"))?;
        let label = if v.contains("://") {
            format!("via {}", t.endpoint)
        } else {
            format!("via {v}")
        };
        targets.push((label, t));
    }
    anyhow::ensure!(
        a.max_errors.is_finite() && (0.0..=100.0).contains(&a.max_errors),
        "--max-errors {}: a percentage from 0 to 100",
        a.max_errors
    );
    let show = a.show;
    let opts = PoolOptions {
        targets,
        queries_per_connection: parse_qs(&a.queries_per_connection)?,
        clients: renamed(a.clients.clone(), "--clients", "--threads")
            .unwrap_or_else(|| a.threads.clone()),
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
    let parameters = BTreeMap::from([
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
    ]);
    let mut results = sweep::begin("bench pool", parameters, &direct).await;
    let progress = progress_fn(show.progress(), show.report_interval);
    show.row(pool::TABLE_HEAD);
    let kept = std::sync::Mutex::new(Vec::new());
    let sweep = pool::sweep(&opts, &progress, |c| {
        clear_progress();
        show.row(&c.line());
        kept.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(c.clone());
    });
    let stopped = tokio::select! {
        r = sweep => {
            results.pool = r;
            false
        }
        _ = fired(&stop) => true,
    };
    if stopped {
        clear_progress();
        results.pool = kept.into_inner().unwrap_or_else(|p| p.into_inner());
    }
    finish(&a.out, &results, &direct, a.cleanup, show).await?;
    let failed: Vec<_> = results.pool.iter().filter(|c| c.failed).collect();
    for c in &failed {
        let first = c.first_error.as_deref().unwrap_or("?");
        if c.connections == 0 {
            // (A dead --via port: every connect failed.)
            eprintln!(
                "sqlfleet bench: {}: no connection succeeded ({} attempts failed); first: {first}",
                c.key(),
                c.errors
            );
        } else {
            eprintln!(
                "sqlfleet bench: {}: {} errors in {} connections (more than {}%); first: {first}",
                c.key(),
                c.errors,
                c.connections,
                a.max_errors
            );
        }
    }
    Ok(if stopped {
        crate::shutdown::interrupted_exit()
    } else if failed.is_empty() {
        Exit::Ok
    } else {
        Exit::Partial
    })
}

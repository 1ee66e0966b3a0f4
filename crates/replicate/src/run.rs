//! Wires one `replicate` run: checks every source and the target before
//! anything is applied, starts the workers (one target connection each)
//! and one reader per source, and reports progress until stopped.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use serde::Serialize;
use sqlfleet_conn::Target;
use tokio::sync::watch;

use crate::config::Checked;
use crate::lanes;
use crate::position;
use crate::source::{self, SourceRunner, SourceView};

/// How a run behaves.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Overrides `[apply] threads`.
    pub threads: Option<usize>,
    /// Return once each source's position at start is applied.
    pub until_caught_up: bool,
    /// A source that makes no progress this long (down, refusing,
    /// failing again and again) is given up: its reader ends, said in the
    /// summary, and the run's exit says so. `None`: retried for ever.
    pub give_up_after: Option<std::time::Duration>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub elapsed_seconds: f64,
    pub applied: u64,
    pub transactions_per_second: f64,
    pub stopped_streams: usize,
    /// Sources given up after `--give-up-after` without progress.
    pub given_up_sources: usize,
    /// How the target transactions went: chunks, run ahead, conflicts.
    pub parallel: lanes::Parallel,
    pub warnings: Vec<String>,
    pub sources: Vec<SourceView>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("target: {0}")]
    Target(String),
    #[error(transparent)]
    Refused(#[from] source::Refused),
}

/// Live views of every source, for progress lines.
pub type Views = Vec<Arc<Mutex<SourceView>>>;

pub async fn run(
    cfg: &Checked,
    target: &Target,
    sources: &[Target],
    opts: &Options,
    stop: watch::Receiver<bool>,
    views: Views,
) -> Result<Summary, RunError> {
    let started = Instant::now();
    let mut ctl = target
        .connect(Duration::from_secs(10))
        .await
        .map_err(|e| RunError::Target(e.to_string()))?;
    check_target(&mut ctl).await?;
    position::ensure(&mut ctl)
        .await
        .map_err(|e| RunError::Target(format!("creating sqlfleet.replicate_* tables: {e}")))?;
    let warnings = non_transactional(&mut ctl, cfg).await;
    for w in &warnings {
        tracing::warn!("{w}");
    }
    drop(ctl);
    for (s, t) in cfg.sources.iter().zip(sources) {
        source::preflight(s, t).await?;
    }

    let threads = opts.threads.unwrap_or(cfg.threads).max(1);
    let (workers, worker_tasks) = lanes::Workers::start(target, threads, cfg.batch, cfg.beside);
    let workers = Arc::new(workers);
    let mut tasks = Vec::new();
    for ((s, t), view) in cfg.sources.iter().zip(sources).zip(&views) {
        if let Ok(mut v) = view.lock() {
            v.name = s.name.clone();
        }
        let runner = SourceRunner {
            cfg: s.clone(),
            source: t.clone(),
            target: target.clone(),
            workers: workers.clone(),
            view: view.clone(),
            stop: stop.clone(),
            until_caught_up: opts.until_caught_up,
            give_up_after: opts.give_up_after,
            retry_after: cfg.retry_after,
            auto_retries: Default::default(),
            ask_retired: Default::default(),
            budget: Arc::new(tokio::sync::Semaphore::new(source::IN_FLIGHT_KIB as usize)),
        };
        tasks.push(tokio::spawn(runner.run()));
    }
    let mut refused = None;
    for t in tasks {
        match t.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => refused = Some(e),
            Err(e) => {
                refused = Some(source::Refused {
                    source_name: "?".into(),
                    what: format!("reader task failed: {e}"),
                })
            }
        }
    }
    let parallel = workers.parallel();
    drop(workers);
    for w in worker_tasks {
        let _ = w.await;
    }
    if let Some(e) = refused {
        return Err(e.into());
    }
    let sources: Vec<SourceView> = views
        .iter()
        .filter_map(|v| v.lock().ok().map(|g| g.clone()))
        .collect();
    let applied = sources.iter().map(|s| s.applied).sum();
    let mut warnings = warnings;
    warnings.extend(sources.iter().flat_map(|s| s.warnings.iter().cloned()));
    let elapsed = started.elapsed().as_secs_f64();
    Ok(Summary {
        elapsed_seconds: elapsed,
        applied,
        transactions_per_second: if elapsed > 0.0 {
            applied as f64 / elapsed
        } else {
            0.0
        },
        stopped_streams: sources
            .iter()
            .map(|s| s.streams.values().filter(|x| x.error.is_some()).count())
            .sum(),
        given_up_sources: sources
            .iter()
            .filter(|s| s.state == source::GAVE_UP)
            .count(),
        parallel,
        warnings,
        sources,
    })
}

/// The target must be MariaDB and let us run `BINLOG` statements.
async fn check_target(c: &mut mysql_async::Conn) -> Result<(), RunError> {
    let version: String = c
        .query_first("SELECT @@version")
        .await
        .map_err(|e| RunError::Target(e.to_string()))?
        .unwrap_or_default();
    if !version.contains("MariaDB") {
        return Err(RunError::Target(format!(
            "server version {version} is not MariaDB; the target applies MariaDB row events"
        )));
    }
    let grants: Vec<String> = c
        .query("SHOW GRANTS")
        .await
        .map_err(|e| RunError::Target(e.to_string()))?;
    let global = grants.iter().filter(|g| g.contains(" ON *.* "));
    let ok = global.clone().any(|g| {
        g.contains("ALL PRIVILEGES") || g.contains("SUPER") || g.contains("BINLOG REPLAY")
    });
    if !ok {
        return Err(RunError::Target(
            "the target user needs the BINLOG REPLAY privilege (or SUPER) to apply row events: GRANT BINLOG REPLAY ON *.* TO ..."
                .into(),
        ));
    }
    Ok(())
}

/// Tables on the target that cannot commit with a position, in the
/// databases the sources write into (named in a warning: a crash while
/// applying to them may apply a change twice; the target's other
/// databases are not replicate's); and the MEMORY tables a restart of the
/// target emptied since a source's last run (target_start.rs).
async fn non_transactional(c: &mut mysql_async::Conn, cfg: &Checked) -> Vec<String> {
    // The databases first (their names alone), then at most 50 of their
    // tables: what is asked does not grow with the rest of the target.
    let dbs: Vec<String> = match c
        .query("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA")
        .await
    {
        Ok(d) => d,
        // (Not an empty list: the restart check would record a start it
        // had not looked at.)
        Err(e) => return vec![format!("reading the target's databases: {e}")],
    };
    let written: Vec<String> = dbs
        .iter()
        .filter(|d| cfg.sources.iter().any(|s| s.dbs.writes_into(d)))
        .map(|d| sqlfleet_conn::quote::utf8_literal(d))
        .collect();
    let sources: Vec<&crate::config::Source> = cfg.sources.iter().collect();
    let mut out = crate::target_start::check(c, &sources, &dbs).await;
    if written.is_empty() {
        return out;
    }
    let rows: Vec<(String, String, String)> = c
        .query(format!(
            "SELECT TABLE_SCHEMA, TABLE_NAME, ENGINE FROM information_schema.TABLES \
             WHERE TABLE_TYPE = 'BASE TABLE' AND ENGINE NOT IN ('InnoDB') \
             AND TABLE_SCHEMA IN ({}) ORDER BY 1, 2 LIMIT 50",
            written.join(",")
        ))
        .await
        .unwrap_or_default();
    out.extend(rows.into_iter().map(|(d, t, e)| {
        let restart = if e.eq_ignore_ascii_case("MEMORY") {
            "; a restart of the target empties it (said when replicate next opens a session there)"
        } else {
            ""
        };
        format!("target table {d}.{t} is {e} (not transactional): a crash while applying to it stops the stream until `replicate skip` or `retry` says whether the change is there{restart}")
    }));
    out
}

//! `sqlfleet replicate seed`: wires `mariadb-dump` (the snapshot and its
//! GTID), the replicate crate's renaming copy of the dump and its position
//! record, and the loader. What each step decides lives in
//! `sqlfleet_replicate::seed`.

use std::path::Path;

use anyhow::{anyhow, Context};
use sqlfleet_conn::Target;
use sqlfleet_replicate::config::Source;
use sqlfleet_replicate::gtid::GtidPos;
use sqlfleet_replicate::seed::{self, State, Step, Work};
use sqlfleet_replicate::seed_xa;

/// A seed a signal stopped: what it had done, in the seed's own words
/// (the caller exits 130, or 143 on SIGTERM).
#[derive(Debug)]
pub struct Interrupted(pub String);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Interrupted {}

/// How `replicate seed` runs: work files in `dir`, `threads` loading,
/// `force` over positions and tables, and how long it waits for prepared
/// XA transactions on the source to end.
pub struct Options<'a> {
    pub dir: &'a Path,
    pub threads: usize,
    pub force: bool,
    pub xa_wait: std::time::Duration,
}

/// Copies one source to the target and records where it starts.
pub async fn seed_one(
    s: &Source,
    source: &Target,
    target: &Target,
    opts: &Options<'_>,
    interrupt: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let (dir, threads, force) = (opts.dir, opts.threads, opts.force);
    std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
    set_mode(dir, 0o700)?;
    let work = Work::new(dir, &s.name);
    let state = work.read_state();
    let stored = seed::stored(target, &s.name)
        .await
        .map_err(|e| anyhow!(e))?;
    match (
        seed::positions(&stored, &state, work.dump.exists()),
        force,
    ) {
        (seed::Positions::ThisSeed, false) => {
            println!(
                "seeded source '{}' into {}, from the snapshot at GTID {}: an earlier run loaded and recorded it and was stopped before it ended; `replicate` continues from there",
                s.name,
                state.databases.join(", "),
                state.gtid
            );
            let _ = std::fs::remove_file(&work.dump);
            let _ = std::fs::remove_file(&work.state);
            return Ok(());
        }
        (seed::Positions::None, _) | (_, true) => {}
        (seed::Positions::Other, false) => {
            return Err(anyhow!(
                "source '{}' already has replication positions on the target (it replicates, or was seeded); --force seeds it again and replaces them",
                s.name
            ))
        }
    }
    let (gtid, fresh) = match seed::next_step(&state, work.dump.exists()) {
        Step::Load => {
            eprintln!(
                "seed {}: the dump in {} is whole (snapshot at {}): loading it, resuming what was loaded",
                s.name,
                work.dump.display(),
                state.gtid
            );
            (GtidPos::parse(&state.gtid).map_err(|e| anyhow!(e))?, false)
        }
        Step::Dump => (
            dump(s, source, target, &work, opts, interrupt.clone()).await?,
            true,
        ),
    };
    let opts = sqlfleet_load::LoadOptions {
        target: target.with_database(None),
        // The target's own replicas and its point-in-time recovery see
        // the seeded copy, as they see the streamed changes.
        binlog: sqlfleet_load::Binlog::Write,
        // A consolidation target is often read_only for its applications;
        // replicate writes there as a replica's applier does.
        writes_on_read_only: true,
        path: work.dump.clone(),
        threads,
        resume: !fresh,
        restart: fresh,
        continue_on_error: false,
        quarantine: None,
        defer_indexes: false,
        overwrite_tables: false,
        progress: sqlfleet_load::progress::Mode::Auto,
        database: None,
        batch_bytes: 4 << 20,
        load_id: None,
        fast_path: true,
        read_ahead: 256 << 20,
        serial: false,
        comments: false,
        interrupt: Some(interrupt),
    };
    let summary = sqlfleet_load::load(opts).await.map_err(|e| match e {
        sqlfleet_load::LoadError::Interrupted { rows, .. } => anyhow::Error::new(Interrupted(format!(
            "interrupted while loading the copy of source '{}' ({rows} rows committed by this run, journaled): nothing is recorded yet; run `replicate seed` again to go on from there",
            s.name
        ))),
        e => anyhow!("loading {}: {e}", work.dump.display()),
    })?;
    anyhow::ensure!(
        summary.complete && summary.errors == 0,
        "loading {}: not complete; run seed again to go on",
        work.dump.display()
    );
    sqlfleet_faults::point!("seed::loaded");
    seed::record(target, &s.name, &gtid, force)
        .await
        .map_err(|e| anyhow!(e))?;
    sqlfleet_faults::point!("seed::recorded");
    println!(
        "seeded source '{}' into {} ({} rows loaded by this run), from the snapshot at GTID {gtid}; `replicate` continues from there",
        s.name,
        work.read_state().databases.join(", "),
        summary.rows
    );
    // The copy is recorded: its work files are no longer needed.
    let _ = std::fs::remove_file(&work.dump);
    let _ = std::fs::remove_file(&work.state);
    Ok(())
}

/// Dumps the source's databases from one snapshot, renames them into the
/// work file and records the state; returns the snapshot's GTID.
async fn dump(
    s: &Source,
    source: &Target,
    target: &Target,
    work: &Work,
    opts: &Options<'_>,
    mut interrupt: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<GtidPos> {
    let force = opts.force;
    let dbs = seed::source_databases(source, &s.dbs)
        .await
        .map_err(|e| anyhow!(e))?;
    anyhow::ensure!(
        !dbs.is_empty(),
        "the source has no database this source's include/exclude take"
    );
    let targets: Vec<String> = dbs
        .iter()
        .filter_map(|d| s.dbs.map(d).map(str::to_string))
        .collect();
    let full = seed::non_empty(target, &targets)
        .await
        .map_err(|e| anyhow!(e))?;
    anyhow::ensure!(
        full.is_empty() || force,
        "target database{} {} already hold tables; a seed would overwrite them (--force to do it anyway)",
        if full.len() == 1 { "" } else { "s" },
        full.join(", ")
    );
    // A prepared XA transaction's changes are not in a snapshot, and its
    // XA COMMIT would stop replication (`sqlfleet_replicate::seed_xa`).
    wait_for_xa(s, source, opts.xa_wait, &mut interrupt).await?;
    sqlfleet_faults::point!("seed::xa_checked");
    // The password goes to the dump program in a private option file.
    let cnf = work.dump.with_extension("cnf");
    write_private(&cnf, source.option_file().as_bytes())?;
    eprintln!(
        "seed {}: dumping {} from one snapshot ({})",
        s.name,
        dbs.join(", "),
        sqlfleet_conn::text::count(dbs.len() as u64, "database")
    );
    // DDL waits while the dump runs: a table's definition is read when
    // the dump gets to it, after the snapshot its rows come from.
    let held = match seed::block_ddl(source).await.map_err(|e| anyhow!(e))? {
        Ok(c) => Some(c),
        Err(why) => {
            eprintln!(
                "seed {}: warning: could not hold DDL off on the source while dumping ({why}); an ALTER, CREATE, DROP, RENAME or TRUNCATE that runs meanwhile can make the dump's table definitions newer than its snapshot (grant RELOAD to the source account so the seed holds them off)",
                s.name
            );
            None
        }
    };
    let raw = std::fs::File::create(&work.raw).with_context(|| work.raw.display().to_string())?;
    let child = tokio::process::Command::new("mariadb-dump")
        .arg(format!("--defaults-file={}", cnf.display()))
        .args([
            "--single-transaction",
            "--gtid",
            "--master-data=2",
            "--routines",
            "--hex-blob",
            "--databases",
        ])
        .args(&dbs)
        .stdout(raw)
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("running mariadb-dump (Debian's mariadb-client)")?;
    sqlfleet_faults::point!("seed::dumping");
    // A signal stops the dump (dropped, the child is killed): the next
    // run dumps again from a new snapshot.
    let out = tokio::select! {
        out = child.wait_with_output() => Some(out),
        _ = interrupt.wait_for(|stop| *stop) => None,
    };
    let _ = std::fs::remove_file(&cnf);
    let Some(out) = out else {
        if let Some(h) = held {
            h.end().await;
        }
        let _ = std::fs::remove_file(&work.raw);
        return Err(anyhow::Error::new(Interrupted(format!(
            "interrupted while dumping source '{}': nothing is copied or recorded; run `replicate seed` again (it dumps again)",
            s.name
        ))));
    };
    if let Some(h) = held {
        h.end().await;
    }
    let out = out.context("mariadb-dump")?;
    anyhow::ensure!(
        out.status.success(),
        "mariadb-dump failed: {}",
        sqlfleet_dump::printable::printable(String::from_utf8_lossy(&out.stderr).trim())
    );
    let tail = tail(&work.raw, 64 << 10)?;
    anyhow::ensure!(
        sqlfleet_load::has_trailer(&tail),
        "{}: mariadb-dump ended without its \"-- Dump completed\" line: the dump is not whole; run seed again",
        work.raw.display()
    );
    let gtid = seed::dump_gtid(&tail).ok_or_else(|| {
        anyhow!("the dump names no GTID position (is the source MariaDB with GTIDs and binary logging on?)")
    })?;
    let still = seed_xa::recovered(source).await.map_err(|e| anyhow!(e))?;
    if !still.is_empty() {
        let after = seed_xa::prepared_after(source, &s.name, &gtid, &still)
            .await
            .map_err(|e| anyhow!("source: reading its binlog after the snapshot {gtid}: {e}"))?;
        let lacking = seed_xa::before_the_snapshot(&still, &after);
        if !lacking.is_empty() {
            let _ = std::fs::remove_file(&work.raw);
            anyhow::bail!(
                "XA transaction{} {} {} prepared on the source before the snapshot ({gtid}) was taken: the dump lacks {} changes, and replication would stop at {} XA COMMIT; end {} (XA COMMIT or XA ROLLBACK; XA RECOVER lists them) and run seed again (it dumps again)",
                if lacking.len() == 1 { "" } else { "s" },
                seed_xa::list(&lacking),
                if lacking.len() == 1 { "was" } else { "were" },
                if lacking.len() == 1 { "its" } else { "their" },
                if lacking.len() == 1 { "its" } else { "their" },
                if lacking.len() == 1 { "it" } else { "them" },
            );
        }
    }
    let input = std::fs::File::open(&work.raw).with_context(|| work.raw.display().to_string())?;
    let output =
        std::fs::File::create(&work.dump).with_context(|| work.dump.display().to_string())?;
    set_mode(&work.dump, 0o600)?;
    // This dump's own stamp (see `seed::rewrite`).
    let stamp = format!(
        "seed of source '{}', snapshot {gtid}, dumped at {} by process {}",
        s.name,
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| format!("{}.{:09}", d.as_secs(), d.subsec_nanos()))
            .unwrap_or_default(),
        std::process::id()
    );
    let r = seed::rewrite(std::io::BufReader::new(input), output, &s.dbs, &stamp)
        .map_err(|e| anyhow!("{}: {e}", work.raw.display()))?;
    work.write_state(&State {
        dumped: true,
        gtid: gtid.to_string(),
        databases: r.databases,
    })?;
    sqlfleet_faults::point!("seed::dumped");
    let _ = std::fs::remove_file(&work.raw);
    Ok(gtid)
}

/// Waits up to `wait` for the XA transactions prepared on the source to
/// end; refused, naming them, when they do not.
async fn wait_for_xa(
    s: &Source,
    source: &Target,
    wait: std::time::Duration,
    interrupt: &mut tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + wait;
    let mut said = false;
    loop {
        let prepared = seed_xa::recovered(source).await.map_err(|e| anyhow!(e))?;
        if prepared.is_empty() {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            anyhow::bail!(
                "{} XA transaction{} prepared on the source ({}) did not end within {} s (--xa-wait): a snapshot lacks a prepared transaction's changes, and replication would stop at its XA COMMIT; end {} (XA COMMIT or XA ROLLBACK; XA RECOVER lists them) and run seed again",
                prepared.len(),
                if prepared.len() == 1 { "" } else { "s" },
                seed_xa::list(&prepared),
                wait.as_secs(),
                if prepared.len() == 1 { "it" } else { "them" }
            );
        }
        if !said {
            eprintln!(
                "seed {}: waiting up to {} s for {} XA transaction{} prepared on the source to end (XA RECOVER: {})",
                s.name,
                wait.as_secs(),
                prepared.len(),
                if prepared.len() == 1 { "" } else { "s" },
                seed_xa::list(&prepared)
            );
            said = true;
        }
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
            _ = interrupt.wait_for(|stop| *stop) => {
                return Err(anyhow::Error::new(Interrupted(format!(
                    "interrupted while waiting for XA transactions on source '{}' to end: nothing is copied or recorded; run `replicate seed` again",
                    s.name
                ))));
            }
        }
    }
}

fn tail(path: &Path, n: u64) -> anyhow::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).with_context(|| path.display().to_string())?;
    let len = f.metadata()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(n)))?;
    let mut v = Vec::new();
    f.read_to_end(&mut v)?;
    Ok(v)
}

fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| path.display().to_string())?;
    f.write_all(bytes)?;
    Ok(())
}

fn set_mode(path: &Path, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| path.display().to_string())
}

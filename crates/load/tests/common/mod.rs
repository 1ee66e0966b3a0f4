//! Shared by the loader's integration tests: loading a file with the
//! library the way the CLI does, on a runtime of its own (so a test can
//! drop the runtime mid-load, as kill -9 would), and comparing with the
//! stock client.

#![allow(dead_code)]

pub mod charsets;
pub mod gen;

use std::path::Path;
use std::time::Duration;

use sqlfleet_load::{LoadError, LoadOptions, Summary};
use sqlfleet_testkit::TestServer;

pub fn options(srv: &TestServer, db: &str, path: &Path) -> LoadOptions {
    LoadOptions {
        target: srv.target().with_database(Some(db)),
        binlog: sqlfleet_load::Binlog::Write,
        writes_on_read_only: false,
        path: path.to_path_buf(),
        threads: 4,
        resume: false,
        restart: false,
        continue_on_error: false,
        quarantine: None,
        defer_indexes: false,
        overwrite_tables: false,
        progress: sqlfleet_load::progress::Mode::None,
        database: None,
        batch_bytes: 4 << 20,
        load_id: None,
        fast_path: true,
        read_ahead: 128 << 20,
        serial: false,
        comments: false,
        interrupt: None,
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Loads on a runtime of its own.
pub fn load(opts: LoadOptions) -> Result<Summary, LoadError> {
    runtime().block_on(sqlfleet_load::load(opts))
}

/// Starts a load and kills it after `after`: the runtime, its tasks and
/// its connections are dropped at once, as if the process died (the
/// server rolls back what was not committed). `None` if it ended first.
pub fn load_killed_after(opts: LoadOptions, after: Duration) -> Option<Result<Summary, LoadError>> {
    let rt = runtime();
    let r = rt.block_on(async { tokio::time::timeout(after, sqlfleet_load::load(opts)).await });
    rt.shutdown_background();
    r.ok()
}

/// Starts a load and kills it (as [`load_killed_after`]) once `ready`
/// says so (it is asked every 10 ms). `None` if it was killed.
pub fn load_killed_when(
    opts: LoadOptions,
    ready: impl Fn() -> bool,
) -> Option<Result<Summary, LoadError>> {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let run = std::thread::spawn(move || {
        let rt = runtime();
        let r = rt.block_on(async {
            tokio::select! {
                r = sqlfleet_load::load(opts) => Some(r),
                _ = rx => None,
            }
        });
        rt.shutdown_background();
        r
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !run.is_finished() && std::time::Instant::now() < deadline {
        if ready() {
            let _ = tx.send(());
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    run.join().expect("load thread")
}

/// Waits until no connection has `db` as its database: a killed run's
/// connections are gone from the server, and what they had sent has ended
/// there (committed or rolled back), so counts read afterwards are final.
pub fn settled(srv: &TestServer, db: &str) {
    let q = format!(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = '{db}' AND ID <> CONNECTION_ID()"
    );
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while query(srv, &q).first().map(String::as_str) != Some("0") {
        assert!(
            std::time::Instant::now() < until,
            "the killed run's connections to {db} are still on the server"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The furthest byte the journal of loads of `path` has recorded.
pub fn journaled_up_to(srv: &TestServer, path: &Path) -> u64 {
    // Before the first load on this server made the journal: nothing yet.
    let made = "SELECT COUNT(*) FROM information_schema.TABLES \
                WHERE TABLE_SCHEMA = 'sqlfleet' AND TABLE_NAME IN ('load_journal', 'loads')";
    if query(srv, made).first().map(String::as_str) != Some("2") {
        return 0;
    }
    let q = format!(
        "SELECT COALESCE(MAX(j.end_offset), 0) FROM sqlfleet.load_journal j JOIN sqlfleet.loads l USING (load_id) \
         WHERE l.source = '{}' AND l.state = 'running' AND j.kind = 'data'",
        path.display()
    );
    query(srv, &q)
        .first()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// `--resume`, retried while the killed run's lock is still held (the
/// server notices the dead connection a moment later).
pub fn resume(mut opts: LoadOptions) -> Result<Summary, LoadError> {
    opts.resume = true;
    opts.restart = false;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        match load(opts.clone()) {
            Err(LoadError::Running { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            other => return other,
        }
    }
}

pub fn fresh_db(srv: &TestServer, prefix: &str) -> String {
    runtime().block_on(srv.fresh_db(prefix)).0
}

pub fn fingerprint(srv: &TestServer, db: &str) -> Vec<String> {
    runtime().block_on(srv.fingerprint(db))
}

/// The first line where two fingerprints differ, if any.
pub fn first_difference(want: &[String], got: &[String]) -> Option<String> {
    for (w, g) in want.iter().zip(got) {
        if w != g {
            return Some(format!("stock: {w:?}\nours:  {g:?}"));
        }
    }
    (want.len() != got.len()).then(|| format!("{} objects vs {}", want.len(), got.len()))
}

/// Runs SQL on the server and returns the first column of each row.
pub fn query(srv: &TestServer, sql: &str) -> Vec<String> {
    rows(srv, sql)
        .into_iter()
        .map(|r| r.into_iter().next().unwrap_or_else(|| "NULL".into()))
        .collect()
}

/// Runs SQL on the server and returns every row's columns as text.
pub fn rows(srv: &TestServer, sql: &str) -> Vec<Vec<String>> {
    use mysql_async::prelude::Queryable;
    runtime().block_on(async {
        let mut c = srv.connect().await;
        let rows: Vec<mysql_async::Row> = c.query(sql).await.expect("query");
        let _ = c.disconnect().await;
        rows.into_iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| {
                        r.get_opt::<Option<String>, _>(i)
                            .and_then(|v| v.ok())
                            .flatten()
                            .unwrap_or_else(|| "NULL".into())
                    })
                    .collect()
            })
            .collect()
    })
}

/// The end of a differential run (`what` against `oracle`): keeps the files of the failing seeds
/// (each failure starts `seed N `; `file(N)` names its file in `dir`) in
/// the temporary directory `keep` for a look, prints `summary`, and fails
/// with the failures, or when fewer than half of `files` were compared.
pub fn report(
    (what, oracle): (&str, &str),
    dir: &Path,
    keep: &str,
    file: impl Fn(u64) -> String,
    failures: &[String],
    (files, compared): (u64, u64),
    summary: String,
) {
    if !failures.is_empty() {
        let keep = std::env::temp_dir().join(keep);
        let _ = std::fs::create_dir_all(&keep);
        for f in failures {
            if let Some(seed) = f
                .strip_prefix("seed ")
                .and_then(|r| r.split([' ', ':']).next())
                .and_then(|n| n.parse().ok())
            {
                let _ = std::fs::copy(dir.join(file(seed)), keep.join(file(seed)));
            }
        }
        eprintln!("{what}: failing files kept in {}", keep.display());
    }
    eprintln!("{what}: {summary}, {} failures", failures.len());
    assert!(
        failures.is_empty(),
        "{} of {files} files differ from {oracle}:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert!(compared > files / 2, "too few files compared: {compared}");
}

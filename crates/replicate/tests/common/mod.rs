//! Shared by the replicate tests: independent primaries (distinct server
//! ids and GTID domains) and a target, a seeded write workload, waiting
//! for catch-up, and the oracle — each source database's fingerprint
//! (SHOW CREATE, CHECKSUM TABLE, row counts) equals its target copy's.

#![allow(dead_code)]

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use sqlfleet_replicate::config;
use sqlfleet_replicate::gtid::GtidPos;
use sqlfleet_replicate::run::{self, Options, Summary};
use sqlfleet_replicate::source::SourceView;
use sqlfleet_testkit::TestServer;

/// Three independent primaries (domains 1, 2, 3) and a target (domain 9).
pub fn source(i: usize) -> &'static TestServer {
    static S: [OnceLock<TestServer>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    S[i].get_or_init(|| {
        let domain = format!("gtid-domain-id={}", i + 1);
        let id = format!("server-id={}", 100 + i);
        sqlfleet_testkit::server_with(&[&domain, &id])
    })
}

pub fn target() -> &'static TestServer {
    static T: OnceLock<TestServer> = OnceLock::new();
    T.get_or_init(|| sqlfleet_testkit::server_with(&["gtid-domain-id=9", "server-id=109"]))
}

pub async fn binlog_pos(s: &TestServer) -> GtidPos {
    let mut c = s.connect().await;
    let p: Option<String> = c
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .expect("gtid_binlog_pos");
    let _ = c.disconnect().await;
    GtidPos::parse(&p.unwrap_or_default()).expect("a GTID position")
}

/// A DSN for a fixture server.
pub fn dsn(s: &TestServer) -> String {
    s.dsn()
}

/// The floor the target records for `source_name`.
pub async fn floor(source_name: &str) -> GtidPos {
    let mut c = target().connect().await;
    let rows: Vec<(u32, u32, u64)> = c
        .exec(
            "SELECT domain_id, server_id, seq_no FROM sqlfleet.replicate_position \
             WHERE source = ? AND stream = '' AND domain_id <> 4294967295",
            (source_name,),
        )
        .await
        .unwrap_or_default();
    let _ = c.disconnect().await;
    let mut p = GtidPos::default();
    for (domain, server, seq) in rows {
        p.advance(sqlfleet_replicate::gtid::Gtid {
            domain,
            server,
            seq,
        });
    }
    p
}

/// Waits until the target's floor for `name` reaches `src`'s position.
pub async fn wait_caught_up(name: &str, src: &TestServer, within: Duration) {
    let want = binlog_pos(src).await;
    let start = Instant::now();
    loop {
        let f = floor(name).await;
        if f.behind(&want) == 0 {
            return;
        }
        assert!(
            start.elapsed() < within,
            "source {name}: floor {f} did not reach {want} within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The oracle: the source database and its target copy are the same
/// (definitions, checksums, row counts).
pub async fn assert_same(src: &TestServer, db: &str, target_db: &str) {
    let a = src.fingerprint(db).await;
    let b = target().fingerprint(target_db).await;
    assert!(!a.is_empty(), "{db} has nothing to compare");
    assert_eq!(a, b, "source {db} and target {target_db} differ");
}

/// Every event in `s`'s binary logs, file by file: (event type, info) as
/// SHOW BINLOG EVENTS gives them.
pub async fn binlog_events(s: &TestServer) -> Vec<(String, String)> {
    let mut c = s.connect().await;
    let logs: Vec<mysql_async::Row> = c.query("SHOW BINARY LOGS").await.expect("binary logs");
    let mut all = Vec::new();
    for l in logs {
        let file: String = l.get(0).expect("log name");
        let events: Vec<mysql_async::Row> = c
            .query(format!("SHOW BINLOG EVENTS IN '{file}'"))
            .await
            .expect("binlog events");
        // (As bytes: a statement in another character set, sjis, is not
        // UTF-8, and a String would panic on it.)
        let text = |e: &mysql_async::Row, i: usize| {
            e.get::<Option<Vec<u8>>, _>(i)
                .flatten()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default()
        };
        all.extend(events.iter().map(|e| (text(e, 2), text(e, 5))));
    }
    let _ = c.disconnect().await;
    all
}

/// Annotate_rows events in the target's binlog that copy a `BINLOG '...'`
/// statement (each would hold the whole statement: the binlog explodes).
pub async fn annotated_binlog_statements() -> usize {
    binlog_events(target())
        .await
        .iter()
        .filter(|(ty, info)| ty == "Annotate_rows" && info.starts_with("BINLOG"))
        .count()
}

/// A config replicating `include` of `s` (with `rename`, TOML inline-table
/// entries, possibly none) into the target from `start`.
pub fn cfg_for(
    name: &str,
    s: &TestServer,
    include: &str,
    rename: &str,
    start: &GtidPos,
) -> config::Checked {
    config::parse(&format!(
        "[target]\ndsn = \"{}\"\n[[source]]\nname = \"{name}\"\ndsn = \"{}\"\ninclude = [\"{include}\"]\nrename = {{ {rename} }}\nstart = \"gtid:{start}\"\n",
        dsn(target()),
        dsn(s)
    ))
    .expect("config")
}

/// Runs `cfg` for source `s` with `--until-caught-up`: its summary (a
/// stopped stream is a summary, not a failed run).
pub async fn until_caught_up(cfg: &config::Checked, s: &TestServer) -> Summary {
    until_caught_up_into(cfg, target(), s, Duration::from_secs(120)).await
}

/// [`until_caught_up`] into target `t` (a test's own), within `within`.
pub async fn until_caught_up_into(
    cfg: &config::Checked,
    t: &TestServer,
    s: &TestServer,
    within: Duration,
) -> Summary {
    let (_tx, rx) = tokio::sync::watch::channel(false);
    tokio::time::timeout(within, run_one(cfg.clone(), t, s, true, rx))
        .await
        .expect("returns once caught up")
        .expect("runs to the end: a stopped stream is not a failed run")
}

/// Runs `cfg` for source `s` into `t` with two threads, until caught up
/// (`until`) or until `stop` turns true.
pub fn run_one(
    cfg: config::Checked,
    t: &TestServer,
    s: &TestServer,
    until: bool,
    stop: tokio::sync::watch::Receiver<bool>,
) -> impl std::future::Future<Output = Result<Summary, run::RunError>> + Send + 'static {
    let (target, source) = (t.target(), s.target());
    async move {
        let views = vec![std::sync::Arc::new(std::sync::Mutex::new(
            SourceView::default(),
        ))];
        let opts = Options {
            threads: Some(2),
            until_caught_up: until,
            give_up_after: None,
        };
        run::run(&cfg, &target, &[source], &opts, stop, views).await
    }
}

/// Every stream of source `s` as `replicate status` shows it.
pub async fn streams(
    cfg: &config::Checked,
    s: &TestServer,
) -> Vec<sqlfleet_replicate::status::StreamStatus> {
    let st = sqlfleet_replicate::status::status(cfg, &target().target(), &[s.target()])
        .await
        .expect("status");
    st.into_iter().next().map(|x| x.streams).unwrap_or_default()
}

/// Source `s`'s stream `name` as `replicate status` shows it.
pub async fn stream_status(
    cfg: &config::Checked,
    s: &TestServer,
    name: &str,
) -> sqlfleet_replicate::status::StreamStatus {
    let all = streams(cfg, s).await;
    all.iter()
        .find(|x| x.stream == name)
        .cloned()
        .unwrap_or_else(|| panic!("no stream {name}: {all:?}"))
}

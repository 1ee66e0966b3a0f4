//! MariaDB's own test suite as the oracle: a list of `main` tests runs
//! with `mariadb-test-run --extern` against a server directly, then
//! through the relay in transaction mode and in session mode. Every test
//! that passes directly must pass through the relay, except those in
//! `mysqltest/known.list`, each with the reason a pool cannot give the
//! same answer (or the relay feature it waits for).
//!
//! CI runs `mysqltest/ci.list`; `bench/mysqltest.sh` runs the full
//! curated list (`SQLFLEET_MYSQLTEST_LIST`) and records the counts.
//!
//! The server is started as mariadb-test-run starts its own (latin1,
//! MyISAM by default, the buffer sizes results depend on), root has an
//! empty password on the socket as the tests assume, and the `mtr`
//! schema has its suppression procedures.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use mysql_async::prelude::Queryable;
use sqlfleet_testkit::{server_with, TestServer};

const SUITE: &str = "/usr/share/mysql/mysql-test";

/// The options mariadb-test-run gives its own servers that results
/// depend on (include/default_mysqld.cnf).
const SERVER_OPTIONS: &[&str] = &[
    "character-set-server=latin1",
    "collation-server=latin1_swedish_ci",
    "default-storage-engine=myisam",
    "local-infile=1",
    "log-bin-trust-function-creators=1",
    "use_stat_tables=preferably",
    "histogram_type=json_hb",
    "key_buffer_size=1M",
    "sort_buffer_size=256K",
    "max_heap_table_size=1M",
];

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mysqltest")
}

/// Test names from a list file (`main.x`, one per line, `#` comments).
fn read_list(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Known differences: test name, the runs it differs in and the reason. A
/// line reads `main.x REASON`, or `main.x [TAGS] REASON` for a difference
/// in some runs only: each tag (comma-separated) names a mode
/// (`transaction`, `session`) or an account kind (`shared`, `per-user`),
/// and the run must match every tag.
fn known() -> BTreeMap<String, (Vec<String>, String)> {
    std::fs::read_to_string(here().join("known.list"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                return None;
            }
            let (name, rest) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
            let rest = rest.trim();
            let (tags, why) = match rest.strip_prefix('[').and_then(|r| r.split_once(']')) {
                Some((t, why)) => (
                    t.split(',').map(|t| t.trim().to_string()).collect(),
                    why.trim(),
                ),
                None => (Vec::new(), rest),
            };
            Some((name.to_string(), (tags, why.to_string())))
        })
        .collect()
}

/// Whether `test` is a known difference in a run of `mode` with shared or
/// per-user accounts.
fn is_known(
    known: &BTreeMap<String, (Vec<String>, String)>,
    test: &str,
    mode: &str,
    per_user: bool,
) -> bool {
    let accounts = if per_user { "per-user" } else { "shared" };
    known.get(test).is_some_and(|(tags, _)| {
        tags.iter().all(|t| match t.as_str() {
            "transaction" | "session" => t == mode,
            "shared" | "per-user" => t == accounts,
            // Shared-account runs refuse dynamic SQL the relay cannot
            // read (the default of `shared_dynamic_sql`); the per-user
            // run of `[shared]` tests below leaves these out.
            "shared-dynamic" => accounts == "shared",
            other => panic!("known.list: unknown tag [{other}] for {test}"),
        })
    })
}

/// Prepares the server as the suite expects it.
async fn prepare(srv: &TestServer) {
    let mut c = srv.connect().await;
    c.query_drop(
        "SET PASSWORD FOR root@localhost = PASSWORD(''); \
         SET PASSWORD FOR root@'127.0.0.1' = PASSWORD(''); \
         CREATE DATABASE IF NOT EXISTS test; \
         DROP DATABASE IF EXISTS mtr; CREATE DATABASE mtr",
    )
    .await
    .expect("prepare the server");
    drop(c);
    // The suite's helper procedures (mtr.add_suppression and friends),
    // written for mysqltest: read them with the stock client.
    let sql = std::fs::read_to_string(format!("{SUITE}/include/mtr_warnings.sql"))
        .expect("mariadb-test is installed (apt-get install mariadb-test)");
    let sql: String = sql
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .map(|l| match l.trim().to_ascii_lowercase().as_str() {
            "delimiter ||;" => "DELIMITER ||".to_string(),
            "delimiter ;||" => "DELIMITER ;".to_string(),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let socket = srv.sandbox.layout.node(srv.sandbox.meta.primary()).socket();
    let mut child = Command::new("mariadb")
        .args(["-uroot", "-S"])
        .arg(&socket)
        .arg("mtr")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("the mariadb client");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(sql.as_bytes())
        .expect("write");
    assert!(
        child.wait().expect("mariadb").success(),
        "loading mtr_warnings.sql"
    );
}

/// Runs `tests` with mariadb-test-run against a server at `socket` and
/// `port`; returns each test's verdict (pass, fail, skipped).
fn run_suite(label: &str, socket: &Path, port: u16, tests: &[String]) -> BTreeMap<String, String> {
    let vardir = std::env::temp_dir().join(format!("sqlfleet-mtr-{}-{label}", std::process::id()));
    let _ = std::fs::remove_dir_all(&vardir);
    let out = Command::new("perl")
        .current_dir(SUITE)
        .arg("mariadb-test-run.pl")
        .arg("--extern")
        .arg(format!("socket={}", socket.display()))
        .arg("--extern")
        .arg(format!("port={port}"))
        .arg(format!("--vardir={}", vardir.display()))
        .args([
            "--force",
            "--max-test-fail=0",
            "--nocheck-testcases",
            "--parallel=1",
        ])
        .args(["--testcase-timeout=1", "--suite-timeout=30"])
        // Each test run this many times in a row (a hunt for a failure
        // that comes now and then; bench/mysqltest.sh passes it on).
        .arg(format!(
            "--repeat={}",
            std::env::var("SQLFLEET_MYSQLTEST_REPEAT").unwrap_or_else(|_| "1".into())
        ))
        .args(tests)
        .output()
        .expect("perl and mariadb-test (apt-get install mariadb-test)");
    let _ = std::fs::remove_dir_all(&vardir);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    // The whole output (diffs of failing tests) for whoever looks next.
    let saved = std::env::temp_dir().join(format!(
        "sqlfleet-mysqltest-{}-{label}.out",
        std::process::id()
    ));
    let _ = std::fs::write(&saved, &text);
    eprintln!("mariadb-test-run output ({label}): {}", saved.display());
    let mut verdicts = BTreeMap::new();
    let mut last_failed: Option<String> = None;
    for line in text.lines() {
        // What mysqltest said of the test that failed last (its first
        // complaint), in the verdict, so that a failure in CI names its
        // cause in the test's own output.
        if let Some(t) = &last_failed {
            let l = line.trim();
            if l.starts_with("mysqltest:") || l.starts_with("ERROR") || l.starts_with("---") {
                // (Run more than once: the first failure's words.)
                if verdicts.get(t).map(String::as_str) == Some("fail") {
                    verdicts.insert(t.clone(), format!("fail: {l}"));
                }
                last_failed = None;
            }
        }
        let mut words = line.split_whitespace();
        let (Some(name), Some(rest)) = (words.next(), line.find('[')) else {
            continue;
        };
        if !name.starts_with("main.") {
            continue;
        }
        let v = &line[rest..];
        let verdict = if v.starts_with("[ pass ]") {
            "pass"
        } else if v.starts_with("[ fail ]") {
            "fail"
        } else if v.starts_with("[ skipped ]") {
            "skipped"
        } else {
            continue;
        };
        if verdict == "fail" {
            last_failed = Some(name.to_string());
        }
        // A test run more than once keeps its first failure.
        if verdicts
            .get(name)
            .is_none_or(|v: &String| !v.starts_with("fail"))
        {
            verdicts.insert(name.to_string(), verdict.to_string());
        }
    }
    verdicts
}

/// A relay in front of `srv` that logs in to it over its socket as
/// root@localhost, the account the suite's own connections use, so that
/// CURRENT_USER(), DEFINER clauses and privileges read the same.
/// With `split`, in front of every node of `srv` with read/write split.
async fn start_relay(
    srv: &TestServer,
    mode: &str,
    per_user: bool,
    dir: &Path,
    split: bool,
) -> (PathBuf, u16, tokio::sync::oneshot::Sender<()>) {
    let nodes: Vec<_> = if split {
        srv.sandbox.meta.nodes.iter().collect()
    } else {
        vec![srv.sandbox.meta.primary()]
    };
    let servers = nodes
        .iter()
        .map(|n| format!("\"unix:{}\"", srv.sandbox.layout.node(n).socket().display()))
        .collect::<Vec<_>>()
        .join(", ");
    let socket = dir.join(format!("relay-{mode}.sock"));
    let cfg_text = format!(
        r#"
[relay]
listen = ["127.0.0.1:0"]
mode = "{mode}"

[backend]
servers = [{servers}]
user = "root"
password = ""
{accounts}
[routing]
read_write_split = {split}

[pool]
max = {max}
wait_timeout = 30
{idle}

[[users]]
name = "root"
{hashes}
"#,
        hashes = sqlfleet_relay::config::hash_lines(""),
        // A small pool shares server connections between the test's clients
        // as much as it can. Per-user mode holds connections per account:
        // there the pool is sized for the most connections a test opens at
        // once, and idle ones close after a second (else the accounts'
        // connections a test leaves behind would count in the next test's
        // wait for the server's session count to drop).
        max = if per_user { 16 } else { 4 },
        idle = if per_user { "idle_timeout = 1" } else { "" },
        // Per-user: each test connection logs in to the server as itself
        // (accounts the tests make included, looked up in mysql.user).
        accounts = if per_user {
            "accounts = \"per-user\"\n"
        } else {
            "accounts = \"shared\"\n"
        },
    );
    let (port, stop) = common::serve(&cfg_text, Some(&socket)).await;
    (socket, port, stop)
}

/// One suite at a time: mariadb-test-run's directories are named by
/// process and run label.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The suite's tests through a relay with read/write split over a primary
/// and two replicas (transaction mode, per-user accounts): whatever each
/// test's verdict (a replica's read may lag behind another client's
/// write, or list rows in another order), no replica runs a transaction of
/// its own — the suite's autocommit=0 sessions, cursors, XA, locks,
/// temporary tables and routines all write on the primary or not at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_own_tests_through_a_split_relay_never_write_on_a_replica() {
    let list = std::env::var("SQLFLEET_MYSQLTEST_LIST")
        .map(PathBuf::from)
        .unwrap_or_else(|_| here().join("ci.list"));
    let tests = read_list(&list);
    let _turn = ONE_AT_A_TIME.lock().await;
    let srv = sqlfleet_testkit::replicated_with(SERVER_OPTIONS);
    prepare(&srv).await;
    let dir = tempfile::tempdir().expect("tmp");
    let (socket, port, stop) = start_relay(&srv, "transaction", true, dir.path(), true).await;
    let verdicts = tokio::task::spawn_blocking(move || run_suite("split", &socket, port, &tests))
        .await
        .expect("suite");
    let _ = stop.send(());
    let passed = verdicts.values().filter(|v| *v == "pass").count();
    eprintln!("split: {passed} of {} pass", verdicts.len());
    // (As root@localhost over each replica's socket: the suite's
    // password, empty.)
    let mut conns = Vec::new();
    for n in &srv.sandbox.meta.nodes[1..] {
        let socket = srv.sandbox.layout.node(n).socket();
        let opts = mysql_async::OptsBuilder::default()
            .socket(Some(socket.display().to_string()))
            .user(Some("root"));
        let c = mysql_async::Conn::new(opts).await.expect("replica");
        conns.push((socket.display().to_string(), c));
    }
    let wrote = common::routing::servers_that_wrote(conns).await;
    assert!(
        wrote.is_empty(),
        "replicas that ran transactions of their own: {wrote:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_own_tests_pass_through_the_relay() {
    let list = std::env::var("SQLFLEET_MYSQLTEST_LIST")
        .map(PathBuf::from)
        .unwrap_or_else(|_| here().join("ci.list"));
    let per_user = std::env::var("SQLFLEET_MYSQLTEST_ACCOUNTS").as_deref() == Ok("per-user");
    run_list(read_list(&list), per_user, known()).await;
}

/// The tests that log in as accounts they create (known differences of
/// the shared-account runs above, `[shared]` in known.list) pass through
/// a per-user relay, which looks such accounts up on the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tests_that_log_in_as_their_own_accounts_pass_through_a_per_user_relay() {
    let known = known();
    let tests = known
        .iter()
        .filter(|(_, (tags, _))| tags == &["shared"])
        .map(|(t, _)| t.clone())
        .collect();
    run_list(tests, true, known).await;
}

async fn run_list(
    tests: Vec<String>,
    per_user: bool,
    known: BTreeMap<String, (Vec<String>, String)>,
) {
    let _turn = ONE_AT_A_TIME.lock().await;
    // A fresh server for each run: what one run's failures leave behind
    // must not decide the next run's results.
    let srv = server_with(SERVER_OPTIONS);
    prepare(&srv).await;
    let dir = tempfile::tempdir().expect("tmp");
    let node = srv.sandbox.meta.primary().clone();
    let node_socket = srv.sandbox.layout.node(&node).socket();
    let direct = run_suite("direct", &node_socket, node.port, &tests);
    let passed: BTreeSet<&String> = direct
        .iter()
        .filter(|(_, v)| *v == "pass")
        .map(|(k, _)| k)
        .collect();
    assert!(
        !passed.is_empty(),
        "no test passed directly: see the mariadb-test-run output above"
    );
    let mut report = vec![format!(
        "{} tests listed; direct: {} pass",
        tests.len(),
        passed.len()
    )];
    let mut regressions = Vec::new();
    for mode in ["transaction", "session"] {
        let srv = server_with(SERVER_OPTIONS);
        prepare(&srv).await;
        let (socket, port, stop) = start_relay(&srv, mode, per_user, dir.path(), false).await;
        // Known differences are left out of the run: a test that fails
        // half-way leaves tables and accounts that would fail the next.
        let relayed = tokio::task::spawn_blocking({
            let tests: Vec<String> = passed
                .iter()
                .filter(|t| !is_known(&known, t, mode, per_user))
                .map(|s| s.to_string())
                .collect();
            let label = if per_user {
                format!("{mode}-per-user")
            } else {
                mode.to_string()
            };
            move || run_suite(&label, &socket, port, &tests)
        })
        .await
        .expect("suite");
        let _ = stop.send(());
        let ok = passed
            .iter()
            .filter(|t| relayed.get(**t).map(String::as_str) == Some("pass"))
            .count();
        let failed: Vec<&&String> = passed
            .iter()
            .filter(|t| relayed.get(**t).map(String::as_str) != Some("pass"))
            .filter(|t| !is_known(&known, t, mode, per_user))
            .collect();
        let excluded = passed
            .iter()
            .filter(|t| is_known(&known, t, mode, per_user))
            .count();
        report.push(format!(
            "{mode} mode: {ok} of the {} that pass directly ({excluded} known differences not run); failing: {failed:?}",
            passed.len()
        ));
        for t in failed {
            if !is_known(&known, t, mode, per_user) {
                let why = relayed.get(*t).map(String::as_str).unwrap_or("no verdict");
                regressions.push(format!("{mode}: {t}: {why}"));
            }
        }
    }
    eprintln!("{}", report.join("\n"));
    if let Ok(p) = std::env::var("SQLFLEET_MYSQLTEST_REPORT") {
        std::fs::write(p, report.join("\n") + "\n").expect("write report");
    }
    assert!(
        passed.len() * 10 >= tests.len() * 9,
        "most listed tests should pass directly: {}",
        report.join("\n")
    );
    assert!(
        regressions.is_empty(),
        "tests that pass directly but not through the relay (not in known.list):\n{}\n{}",
        regressions.join("\n"),
        report.join("\n")
    );
}

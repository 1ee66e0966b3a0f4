//! A client library's own test suite as the oracle: MariaDB Connector/C's
//! unit tests (built from Debian's source by `scripts/connector_c.sh`,
//! which `scripts/deps.sh` runs) run directly against a server that offers
//! TLS, then through relays in transaction mode with per-user accounts,
//! session mode with per-user accounts and transaction mode with the
//! shared account, each offering TLS to clients. Every test that passes
//! directly must pass through each relay — bulk (array binding), cursors
//! across COMMIT, `mariadb_stmt_execute_direct`, the compressed protocol,
//! session-state tracking and the TLS 1.3 ciphers included.
//!
//! A run of the suite takes a minute or more (its connection and async
//! programs wait out timeouts), so CI runs a seeded slice: the default
//! mode (transaction, per-user) every time and one of the other two by
//! `SQLFLEET_CONNECTOR_C_SEED` (`common::relay::seeded_modes`; default:
//! the day's number, printed); `SQLFLEET_CONNECTOR_C_MODES=all` runs the
//! three (`bench/client_suites.sh`).

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::relay::start_suite_relay;
use common::routing::{replicas_that_wrote, start_split_suite_relay};
use sqlfleet_testkit::TestServer;

/// Tests that pass directly and cannot through a relay in one account
/// mode, with the reason.
const KNOWN: &[(&str, &str, &str)] = &[(
    "shared",
    "connection/test_conc66",
    "logs in as an account the test creates on the server (conc66): with one \
     shared account the relay admits only the clients of its own list",
)];

/// Where the unit tests were built.
fn tests_dir() -> PathBuf {
    if let Ok(d) = std::env::var("SQLFLEET_CONNECTOR_C_TESTS") {
        return PathBuf::from(d);
    }
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let d = PathBuf::from(home).join(".cache/sqlfleet/connector-c/build/unittest/libmariadb");
    assert!(
        d.join(".built").is_file(),
        "{}: Connector/C's unit tests are not built; run scripts/connector_c.sh (scripts/deps.sh does)",
        d.display()
    );
    d
}

/// The test programs: every executable in the directory.
fn programs(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("tests dir")
        .filter_map(Result::ok)
        .filter(|e| {
            e.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// One TAP line's verdict: `Some((name, passed))` for a test that ran
/// (skips are neither).
fn verdict(line: &str) -> Option<(String, bool)> {
    let (pass, rest) = if let Some(r) = line.strip_prefix("ok ") {
        (true, r)
    } else {
        (false, line.strip_prefix("not ok ")?)
    };
    if rest.contains("# skip") {
        return None;
    }
    let name = rest.split_once(" - ")?.1.trim();
    Some((name.to_string(), pass))
}

/// Runs every program against `port` as root in database `db`; returns
/// the tests that passed (`program/test`) and each program's output.
fn run_suite(dir: &Path, port: u16, password: &str, db: &str) -> (BTreeSet<String>, String) {
    run_programs(dir, &programs(dir), port, password, db)
}

/// [`run_suite`] for the programs named.
fn run_programs(
    dir: &Path,
    programs: &[String],
    port: u16,
    password: &str,
    db: &str,
) -> (BTreeSet<String>, String) {
    let mut passed = BTreeSet::new();
    let mut text = String::new();
    let work = tempfile::tempdir().expect("tmp");
    for p in programs {
        let child = Command::new(dir.join(p))
            .current_dir(work.path())
            .env("MARIADB_CC_TEST", "1")
            .env("MYSQL_TEST_HOST", "127.0.0.1")
            .env("MYSQL_TEST_PORT", port.to_string())
            .env("MYSQL_TEST_USER", "root")
            .env("MYSQL_TEST_PASSWD", password)
            .env("MYSQL_TEST_DB", db)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("test program");
        // A program that hangs is killed; what it printed counts.
        let pid = child.id();
        let (done, watch) = std::sync::mpsc::channel::<()>();
        let killer = std::thread::spawn(move || {
            if watch.recv_timeout(Duration::from_secs(300)).is_err() {
                // SAFETY: kill(2) on the child's pid, which this test owns.
                unsafe {
                    libc::kill(pid as i32, libc::SIGKILL);
                }
            }
        });
        let o = child.wait_with_output().expect("wait");
        let _ = done.send(());
        let _ = killer.join();
        let out = common::stdout(&o) + &common::stderr(&o);
        for (name, ok) in out.lines().filter_map(verdict) {
            if ok {
                passed.insert(format!("{p}/{name}"));
            }
        }
        text.push_str(&format!("==== {p}\n{out}\n"));
    }
    (passed, text)
}

fn make_db(srv: &TestServer, db: &str) {
    common::servers::fresh_named_db(srv, db);
}

#[test]
fn verdicts_are_read_from_tap_lines() {
    assert_eq!(
        verdict("ok 3 - test_bug12243"),
        Some(("test_bug12243".into(), true))
    );
    assert_eq!(
        verdict("not ok 5 - test_conc633"),
        Some(("test_conc633".into(), false))
    );
    assert_eq!(verdict("ok 4 # skip test_conc71"), None);
    assert_eq!(verdict("# ok 1 - diag"), None);
    assert_eq!(verdict("Bail out! Signal 11 thrown"), None);
}

#[test]
fn connector_cs_own_tests_pass_through_the_relay() {
    let dir = tests_dir();
    let srv = common::servers::tls_server();
    let pw = srv.sandbox.password().expect("pw").expose().to_string();
    let direct_port = srv.sandbox.meta.primary().port;
    make_db(srv, "cctest_direct");
    let (direct, text) = run_suite(&dir, direct_port, &pw, "cctest_direct");
    assert!(
        direct.len() >= 300,
        "most of the suite passes directly ({} passed):\n{text}",
        direct.len()
    );
    let certs = tempfile::tempdir().expect("tmp");
    let (cert, key) = sqlfleet_testkit::tls::self_signed(certs.path(), "127.0.0.1");
    let mut report = vec![format!("direct: {} pass", direct.len())];
    let mut regressions = Vec::new();
    let modes = common::relay::seeded_modes(
        "SQLFLEET_CONNECTOR_C",
        &[("transaction", "per-user")],
        &[("session", "per-user"), ("transaction", "shared")],
    );
    for (mode, accounts) in modes {
        let relay = start_suite_relay(
            &[&format!("127.0.0.1:{direct_port}")],
            "",
            &pw,
            mode,
            accounts,
            Some((&cert, &key)),
        );
        let port = relay.port;
        let db = format!("cctest_{mode}_{}", accounts.replace('-', "_"));
        make_db(srv, &db);
        let (got, text) = run_suite(&dir, port, &pw, &db);
        drop(relay);
        let lost: Vec<&String> = direct
            .iter()
            .filter(|t| !got.contains(*t))
            .filter(|t| !KNOWN.iter().any(|(m, k, _)| *m == accounts && k == t))
            .collect();
        report.push(format!(
            "{mode} mode, {accounts} accounts: {} of the {} that pass directly; lost: {lost:?}",
            direct.iter().filter(|t| got.contains(*t)).count(),
            direct.len()
        ));
        if !lost.is_empty() {
            let saved =
                std::env::temp_dir().join(format!("sqlfleet-connector-c-{mode}-{accounts}.out"));
            let _ = std::fs::write(&saved, &text);
            regressions.push(format!(
                "{mode}/{accounts}: {lost:?} (output: {})",
                saved.display()
            ));
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(
        regressions.is_empty(),
        "tests that pass directly but not through the relay:\n{}\n{}",
        regressions.join("\n"),
        report.join("\n")
    );
}

/// The suite's cursor tests through a relay with read/write split over a
/// primary and two replicas: every one that passes directly passes, and
/// no replica runs a write. A prepared read executed with a cursor holds
/// its connection while the cursor is open; on a replica, the client's
/// next statements followed it there (test_bug13524's DROP TABLE ran on
/// the replica, as root past read_only). It opens on the primary now.
/// (The suite's other programs read rows without ORDER BY from tables
/// without a key, in the order they were inserted: a replica applying in
/// parallel stores them in another order, relay or not.)
#[test]
fn connector_cs_cursor_tests_through_a_split_relay_never_write_on_a_replica() {
    let dir = tests_dir();
    let srv = sqlfleet_testkit::replicated();
    let pw = srv.sandbox.password().expect("pw").expose().to_string();
    let cursor = vec!["cursor".to_string()];
    make_db(srv, "cccursor_direct");
    let primary = srv.sandbox.meta.primary().port;
    let (direct, text) = run_programs(&dir, &cursor, primary, &pw, "cccursor_direct");
    assert!(
        direct.len() >= 20,
        "the cursor tests pass directly:\n{text}"
    );
    let relay = start_split_suite_relay(srv, &pw, "transaction", "per-user");
    make_db(srv, "cccursor_split");
    let (got, text) = run_programs(&dir, &cursor, relay.port, &pw, "cccursor_split");
    drop(relay);
    let lost: Vec<&String> = direct.iter().filter(|t| !got.contains(*t)).collect();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let wrote = rt.block_on(replicas_that_wrote(srv));
    assert!(
        lost.is_empty() && wrote.is_empty(),
        "through a split relay: lost {lost:?}, replicas that wrote {wrote:?}\n{text}"
    );
}

//! A client library's own test suite as the oracle: go-sql-driver/mysql's
//! tests (shipped with its Debian source package, which `scripts/deps.sh`
//! installs) run directly against a server, then through a relay in
//! transaction mode with per-user accounts and in session mode with the
//! shared account. Every test that passes directly must pass through the
//! relay, except those in `KNOWN` with the reason (and those in `RACY`,
//! also racy directly, which must then pass on a rerun alone). The suite's concurrency
//! test is on: it opens @@max_connections transactions at once and takes,
//! for each, success or exactly `Error 1040: Too many connections`.
//! A run of the go suite takes a minute or more: CI takes one of its two
//! relay modes by `SQLFLEET_GO_SUITE_SEED` (default: the day's number,
//! printed); `SQLFLEET_GO_SUITE_MODES=all` runs both.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::routing::{replicas_that_wrote, start_split_suite_relay};
use sqlfleet_testkit::replicated;

const SOURCE: &str = "/usr/share/gocode/src/github.com/go-sql-driver/mysql";

/// Tests that pass directly and cannot through a pool, with the reason.
const KNOWN: &[(&str, &str)] = &[];

/// Tests whose outcome depends on goroutine scheduling in the driver and
/// Go's `database/sql`, with or without a relay: one that fails through
/// the relay is run again alone (up to [`RERUNS`] times) and must pass.
/// Every other test must pass the first time.
const RACY: &[(&str, &str)] = &[(
    "TestContextCancelBegin",
    "the cancel closes the parent context's Done before its child's (the \
     transaction's), so the driver can see the cancel and close the \
     connection while Tx.Commit still finds its context live and reaches \
     the closed connection: `invalid connection`",
)];
const RERUNS: usize = 3;

/// A copy of the driver's source in a GOPATH of its own (the tests build
/// there; the system copy stays untouched).
fn gopath() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tmp");
    let dst = d.path().join("src/github.com/go-sql-driver");
    std::fs::create_dir_all(&dst).expect("mkdir");
    let ok = Command::new("cp")
        .args(["-r", SOURCE])
        .arg(&dst)
        .status()
        .expect("cp");
    assert!(
        ok.success(),
        "{SOURCE}: install golang-github-go-sql-driver-mysql-dev (scripts/deps.sh)"
    );
    d
}

/// Runs the suite against `addr` as root in database `db`; returns the
/// names of the tests that passed, and the whole output.
/// `only`: one test's name (`-run ^NAME$`), or every test.
fn run_suite(
    gopath: &Path,
    addr: &str,
    password: &str,
    db: &str,
    only: Option<&str>,
) -> (BTreeSet<String>, String) {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let run = only.map_or_else(|| ".".to_string(), |t| format!("^{t}$"));
    let o = Command::new("go")
        .args([
            "test", "-v", "-count=1", "-timeout", "600s", "-run", &run, ".",
        ])
        .current_dir(gopath.join("src/github.com/go-sql-driver/mysql"))
        .env("GO111MODULE", "off")
        .env("GOPATH", format!("{}:/usr/share/gocode", gopath.display()))
        .env(
            "GOCACHE",
            PathBuf::from(home).join(".cache/sqlfleet/go-build"),
        )
        .env("GOFLAGS", "")
        .env("MYSQL_TEST_USER", "root")
        .env("MYSQL_TEST_PASS", password)
        .env("MYSQL_TEST_PROT", "tcp")
        .env("MYSQL_TEST_ADDR", addr)
        .env("MYSQL_TEST_DBNAME", db)
        .env("MYSQL_TEST_CONCURRENT", "1")
        .output()
        .expect("go (scripts/deps.sh installs golang-go)");
    let text = common::stdout(&o) + &common::stderr(&o);
    let passed = text
        .lines()
        .filter_map(|l| l.strip_prefix("--- PASS: "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    (passed, text)
}

/// A suite's runs through relays, against its direct run: a line each
/// for the report, and what was lost or written on a replica.
struct Runs<'d> {
    suite: &'static str,
    direct: &'d BTreeSet<String>,
    report: Vec<String>,
    regressions: Vec<String>,
}

impl<'d> Runs<'d> {
    fn new(suite: &'static str, direct: &'d BTreeSet<String>) -> Runs<'d> {
        Runs {
            suite,
            direct,
            report: vec![format!("direct: {} pass", direct.len())],
            regressions: Vec::new(),
        }
    }

    /// One run through a relay in `(mode, accounts)`: the tests that
    /// passed, those lost (what passes directly and may not be forgiven),
    /// its output (kept when something went wrong); the replicas are
    /// checked for transactions of their own.
    fn record(
        &mut self,
        srv: &sqlfleet_testkit::TestServer,
        (mode, accounts): (&str, &str),
        got: &BTreeSet<String>,
        lost: &[&String],
        text: &str,
    ) {
        self.report.push(format!(
            "{mode} mode, {accounts} accounts: {} of the {} that pass directly; failing: {lost:?}",
            self.direct.iter().filter(|t| got.contains(*t)).count(),
            self.direct.len()
        ));
        let rt = tokio::runtime::Runtime::new().expect("rt");
        let wrote = rt.block_on(replicas_that_wrote(srv));
        if !lost.is_empty() || !wrote.is_empty() {
            let saved =
                std::env::temp_dir().join(format!("sqlfleet-{}-suite-{mode}.out", self.suite));
            let _ = std::fs::write(&saved, text);
            self.regressions.push(format!(
                "{mode}: lost {lost:?}, replicas that wrote {wrote:?} (output: {})",
                saved.display()
            ));
        }
    }

    fn assert_none_lost(self) {
        eprintln!("{}", self.report.join("\n"));
        assert!(
            self.regressions.is_empty(),
            "through the relay:\n{}\n{}",
            self.regressions.join("\n"),
            self.report.join("\n")
        );
    }
}

#[test]
fn go_sql_drivers_own_tests_pass_through_the_relay() {
    let srv = replicated();
    let pw = srv.sandbox.password().expect("pw").expose().to_string();
    let gopath = gopath();
    let direct_addr = format!("127.0.0.1:{}", srv.sandbox.meta.primary().port);
    common::servers::fresh_named_db(srv, "gotest_direct");
    let (direct, text) = run_suite(gopath.path(), &direct_addr, &pw, "gotest_direct", None);
    assert!(
        direct.len() >= 100,
        "most of the suite passes directly ({} passed):\n{text}",
        direct.len()
    );
    let mut runs = Runs::new("go", &direct);
    // (A run of the suite takes a minute: CI takes one mode by seed.)
    let modes = common::relay::seeded_modes(
        "SQLFLEET_GO_SUITE",
        &[],
        &[("transaction", "per-user"), ("session", "shared")],
    );
    for (mode, accounts) in modes {
        let relay = start_split_suite_relay(srv, &pw, mode, accounts);
        let port = relay.port;
        let db = format!("gotest_{mode}");
        common::servers::fresh_named_db(srv, &db);
        let addr = format!("127.0.0.1:{port}");
        let (got, text) = run_suite(gopath.path(), &addr, &pw, &db, None);
        let mut lost: Vec<&String> = direct
            .iter()
            .filter(|t| !got.contains(*t))
            .filter(|t| !KNOWN.iter().any(|(k, _)| k == t))
            .collect();
        // A racy test passes on a rerun alone, or it is lost.
        lost.retain(|t| {
            if !RACY.iter().any(|(k, _)| k == t) {
                return true;
            }
            let again = (1..=RERUNS).find(|_| {
                run_suite(gopath.path(), &addr, &pw, &db, Some(t))
                    .0
                    .contains(*t)
            });
            if let Some(n) = again {
                runs.report
                    .push(format!("{mode}: {t} (racy) passed on rerun {n}"));
            }
            again.is_none()
        });
        drop(relay);
        runs.record(srv, (mode, accounts), &got, &lost, &text);
    }
    runs.assert_none_lost();
}

/// Runs mysqlclient's (Python MySQLdb, on Connector/C) own tests in `dir`
/// against 127.0.0.1:`port` as root in database `db`; returns the names
/// of the tests that passed, and the whole output.
fn run_mysqldb_suite(dir: &Path, port: u16, pw: &str, db: &str) -> (BTreeSet<String>, String) {
    let cnf = tempfile::NamedTempFile::new().expect("cnf");
    std::fs::write(
        cnf.path(),
        format!(
            "[MySQLdb-tests]\nhost = 127.0.0.1\nport = {port}\nuser = root\npassword = \"{pw}\"\ndatabase = {db}\n"
        ),
    )
    .expect("cnf");
    let o = Command::new("/usr/bin/python3")
        .args(["-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", "."])
        .current_dir(dir)
        .env("TESTDB", cnf.path())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 -m pytest (scripts/deps.sh installs python3-pytest)");
    let text = common::stdout(&o) + &common::stderr(&o);
    let passed = text
        .lines()
        .filter_map(|l| l.strip_prefix("PASSED "))
        .map(|l| l.trim().to_string())
        .collect();
    (passed, text)
}

/// mysqlclient's own suite (`scripts/mysqldb_suite.sh` fetches it from
/// Debian's source package) directly against the primary of a primary
/// with two replicas, then through a relay with read/write split over all
/// three: transaction mode with per-user accounts, session mode with the
/// shared one. Every test that passes directly passes through the relay,
/// and no replica ran a transaction of its own: MySQLdb sessions run with
/// autocommit off, where a read opens the transaction the writes after it
/// run in (they once followed it to a replica, as root past read_only).
#[test]
fn mysqldbs_own_tests_pass_through_a_split_relay_and_no_replica_writes() {
    let srv = replicated();
    let pw = srv.sandbox.password().expect("pw").expose().to_string();
    let o = Command::new("bash")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/mysqldb_suite.sh"
        ))
        .output()
        .expect("scripts/mysqldb_suite.sh");
    assert!(o.status.success(), "{}", common::stderr(&o));
    let dir = PathBuf::from(common::stdout(&o).trim());
    let primary = srv.sandbox.meta.primary().port;
    common::servers::fresh_named_db(srv, "mdbtest_direct");
    let (direct, text) = run_mysqldb_suite(&dir, primary, &pw, "mdbtest_direct");
    assert!(
        direct.len() >= 80,
        "most of the suite passes directly ({} passed):\n{text}",
        direct.len()
    );
    let mut runs = Runs::new("mysqldb", &direct);
    for (mode, accounts) in [("transaction", "per-user"), ("session", "shared")] {
        let relay = start_split_suite_relay(srv, &pw, mode, accounts);
        let db = format!("mdbtest_{mode}");
        common::servers::fresh_named_db(srv, &db);
        let (got, text) = run_mysqldb_suite(&dir, relay.port, &pw, &db);
        drop(relay);
        let lost: Vec<&String> = direct.iter().filter(|t| !got.contains(*t)).collect();
        runs.record(srv, (mode, accounts), &got, &lost, &text);
    }
    runs.assert_none_lost();
}

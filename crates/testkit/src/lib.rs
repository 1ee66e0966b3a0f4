//! The integration-test fixture.
//!
//! [`server()`] starts one sandbox (primary only) per test binary, the
//! first time a test asks; [`replicated()`] one with two replicas. Ports
//! come from the kernel and directories are unique, so test binaries run
//! concurrently without colliding. The servers die with the test process
//! (SIGTERM on parent death) and are stopped and deleted at exit; leftovers
//! of a killed run are cleaned up by the next.
//!
//! No test is skipped when mariadbd is missing: the fixture panics with
//! the install hint.

pub mod browser;
pub mod faults;
pub mod http;
pub mod netfault;
pub mod proxy;
pub mod server_lists;
pub mod sinks;
pub mod sshd;
pub mod tls;
pub mod workload;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use sqlfleet_conn::quote::ident;
use sqlfleet_conn::Target;
use sqlfleet_sandbox::node::{is_alive, running_pid};
use sqlfleet_sandbox::{Sandbox, SandboxError, UpOptions};

/// A running sandbox owned by this test process.
pub struct TestServer {
    pub sandbox: Sandbox,
}

static HOMES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// The primary-only server of this test binary.
pub fn server() -> &'static TestServer {
    static S: OnceLock<TestServer> = OnceLock::new();
    S.get_or_init(|| start("t", 0, vec![]))
}

/// A primary with two replicas, for replication tests.
pub fn replicated() -> &'static TestServer {
    static S: OnceLock<TestServer> = OnceLock::new();
    S.get_or_init(|| start("r", 2, vec![]))
}

/// A primary with two replicas of the caller's own, for a test that
/// changes the topology (kills the primary, promotes a replica).
pub fn replicated_own() -> TestServer {
    start("p", 2, vec![])
}

/// Fingerprint lines with each table's AUTO_INCREMENT counter left out.
/// A Galera node offsets the counter by node and runs
/// `innodb_autoinc_lock_mode = 2`, where a multi-row insert may reserve
/// more values than it uses: the next value depends on how rows were
/// batched and on which node, the rows do not.
pub fn auto_increment_aside(lines: Vec<String>) -> Vec<String> {
    lines
        .into_iter()
        .map(|l| {
            l.split(' ')
                .filter(|w| !w.starts_with("AUTO_INCREMENT="))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// A 3-node Galera cluster (one per test binary); its nodes are
/// `sandbox.meta.nodes`.
pub fn galera() -> &'static TestServer {
    static S: OnceLock<TestServer> = OnceLock::new();
    S.get_or_init(|| start_shape("g", 0, Some(3), vec![]))
}

/// A 3-node Galera cluster started with extra options (e.g.
/// `log-slave-updates=0`); one per distinct call site, kept by the caller.
pub fn galera_with(options: &[&str]) -> TestServer {
    start_shape(
        "go",
        0,
        Some(3),
        options.iter().map(|s| s.to_string()).collect(),
    )
}

/// A primary with two replicas started with extra options; one per
/// distinct call site, kept by the caller.
pub fn replicated_with(options: &[&str]) -> TestServer {
    start("q", 2, options.iter().map(|s| s.to_string()).collect())
}

/// A server started with extra options (e.g. `local_infile=0`); one per
/// distinct call site, kept in the caller's own `OnceLock`.
pub fn server_with(options: &[&str]) -> TestServer {
    start("o", 0, options.iter().map(|s| s.to_string()).collect())
}

fn tests_root() -> PathBuf {
    std::env::temp_dir().join("sqlfleet-tests")
}

/// A server of the newer MariaDB ([`newer_mariadbd`]) started with extra
/// options; one per distinct call site, kept by the caller.
pub fn newer_server_with(options: &[&str]) -> TestServer {
    let options = options.iter().map(|s| s.to_string()).collect();
    start_with("n", 0, None, options, Some(newer_mariadbd()))
}

/// The newer MariaDB server `scripts/mariadb_next.sh` fetches (11.4, while
/// the system's is Debian's 10.11): what a newer source writes. The script
/// names it (its version is written there only), fetching it first when
/// it is not there yet; panics with the script's words when it cannot.
pub fn newer_mariadbd() -> PathBuf {
    static BIN: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    let got = BIN.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/mariadb_next.sh");
        let out = std::process::Command::new("bash")
            .arg(&script)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("{}: {e}", script.display()))?;
        let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !out.status.success() || path.is_empty() {
            return Err(format!(
                "{} failed ({}): {}",
                script.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(PathBuf::from(path))
    });
    match got {
        Ok(p) => p.clone(),
        Err(e) => panic!("the newer MariaDB server: {e}"),
    }
}

fn start(name: &str, replicas: usize, options: Vec<String>) -> TestServer {
    start_shape(name, replicas, None, options)
}

fn start_shape(
    name: &str,
    replicas: usize,
    galera: Option<usize>,
    options: Vec<String>,
) -> TestServer {
    start_with(name, replicas, galera, options, None)
}

fn start_with(
    name: &str,
    replicas: usize,
    galera: Option<usize>,
    options: Vec<String>,
    mariadbd: Option<PathBuf>,
) -> TestServer {
    clean_stale();
    let home = tests_root().join(format!(
        "{}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        name
    ));
    let _ = std::fs::remove_dir_all(&home);
    if let Err(e) = std::fs::create_dir_all(&home) {
        panic!("test fixture: cannot create {}: {e}", home.display());
    }
    register_cleanup(&home);
    let (tx, rx) = std::sync::mpsc::channel();
    let h2 = home.clone();
    let name = name.to_string();
    // The servers are spawned from a thread that lives as long as the
    // process, because PR_SET_PDEATHSIG fires when the spawning *thread*
    // exits.
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("test fixture runtime");
        let r = rt.block_on(async {
            let mut last = None;
            for _ in 0..5 {
                let ports = sqlfleet_sandbox::ports::ephemeral(galera.unwrap_or(replicas + 1))?;
                let opts = UpOptions {
                    name: name.clone(),
                    ports: Some(ports),
                    replicas: galera.is_none().then_some(replicas),
                    galera,
                    options: options.clone(),
                    mariadbd: mariadbd.clone(),
                    die_with_parent: true,
                    ..UpOptions::default()
                };
                match sqlfleet_sandbox::up(&h2, &opts).await {
                    Ok(r) => return Ok(r.sandbox),
                    Err(e @ SandboxError::PortInUse { .. }) => {
                        // Another process took a port between our check and
                        // the server's bind: try new ports.
                        if let Ok(sb) = Sandbox::open(&h2, &name) {
                            let _ = sb.destroy().await;
                        }
                        last = Some(e);
                    }
                    Err(e) => return Err(e),
                }
            }
            Err(last.unwrap_or(SandboxError::PortInUse { port: 0 }))
        });
        let _ = tx.send(r);
        loop {
            std::thread::park();
        }
    });
    match rx.recv() {
        Ok(Ok(sandbox)) => TestServer { sandbox },
        Ok(Err(e)) => panic!("test fixture: cannot start a sandbox server: {e}"),
        Err(_) => panic!("test fixture: the server thread died"),
    }
}

fn register_cleanup(home: &Path) {
    let mut homes = HOMES.lock().unwrap_or_else(|e| e.into_inner());
    if homes.is_empty() {
        // SAFETY: registering a plain extern "C" function with atexit.
        unsafe { libc::atexit(cleanup_at_exit) };
    }
    homes.push(home.to_owned());
}

extern "C" fn cleanup_at_exit() {
    let homes = HOMES.lock().map(|h| h.clone()).unwrap_or_default();
    for h in homes {
        stop_all_under(&h);
        let _ = std::fs::remove_dir_all(&h);
    }
}

/// Stops every server whose pid file is under `dir`, without a runtime.
fn stop_all_under(dir: &Path) {
    let Ok(sandboxes) = std::fs::read_dir(dir.join("sandboxes")) else {
        return;
    };
    let mut pids = Vec::new();
    for sb in sandboxes.flatten() {
        for node in std::fs::read_dir(sb.path()).into_iter().flatten().flatten() {
            let nl = sqlfleet_sandbox::meta::NodeLayout { dir: node.path() };
            if let Some(pid) = running_pid(&nl) {
                // SAFETY: signalling a pid read from our own server's pid file.
                unsafe { libc::kill(pid, libc::SIGTERM) };
                pids.push(pid);
            }
        }
    }
    let start = Instant::now();
    while pids.iter().any(|&p| is_alive(p)) && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Removes fixture directories of test processes that no longer exist.
fn clean_stale() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let Ok(entries) = std::fs::read_dir(tests_root()) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
                continue;
            };
            if pid != std::process::id() as i32 && !is_alive(pid) {
                stop_all_under(&e.path());
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    });
}

impl TestServer {
    /// Root on the primary over TCP.
    pub fn target(&self) -> Target {
        self.sandbox
            .target(self.sandbox.meta.primary())
            .expect("sandbox password file")
    }

    /// Root on replica `i` (1-based).
    pub fn replica_target(&self, i: usize) -> Target {
        self.sandbox
            .target(&self.sandbox.meta.nodes[i])
            .expect("sandbox password file")
    }

    /// A DSN for root on the primary over TCP (for config files).
    pub fn dsn(&self) -> String {
        let t = self.target();
        let pw = t
            .secret()
            .map(|p| p.expose().to_string())
            .unwrap_or_default();
        let port = self.sandbox.meta.primary().port;
        format!("mysql://root:{pw}@127.0.0.1:{port}/?ssl-mode=DISABLED")
    }

    /// The client option file for the primary (`--defaults-file`).
    pub fn defaults_file(&self) -> PathBuf {
        self.sandbox.defaults_file()
    }

    /// `$SQLFLEET_HOME` of this fixture (for `--sandbox NAME` in CLI tests).
    pub fn home(&self) -> &Path {
        &self.sandbox.home
    }

    /// A new, empty database whose name starts with `prefix`; returns its
    /// name and a target that uses it.
    pub async fn fresh_db(&self, prefix: &str) -> (String, Target) {
        let name = format!(
            "{}_{}",
            prefix
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect::<String>(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let mut c = self.connect().await;
        c.query_drop(format!(
            "DROP DATABASE IF EXISTS {0}; CREATE DATABASE {0}",
            ident(&name)
        ))
        .await
        .expect("create test database");
        let _ = c.disconnect().await;
        let t = self.target().with_database(Some(&name));
        (name, t)
    }

    /// Everything a load of `db` should reproduce, as lines with the
    /// database name replaced by `DB`: each table's and view's SHOW
    /// CREATE, each table's CHECKSUM TABLE and row count, the triggers,
    /// routines and events. Two databases loaded from the same input
    /// must give the same lines.
    pub async fn fingerprint(&self, db: &str) -> Vec<String> {
        self.fingerprint_node(0, db).await
    }

    /// [`TestServer::fingerprint`] on node `i` (0: the primary, or a
    /// cluster's first node).
    pub async fn fingerprint_node(&self, i: usize, db: &str) -> Vec<String> {
        let mut c = self
            .sandbox
            .target(&self.sandbox.meta.nodes[i])
            .expect("sandbox password file")
            .connect(Duration::from_secs(10))
            .await
            .expect("connect to the test server");
        let mut out = Vec::new();
        let objects: Vec<(String, String)> = c
            .exec(
                "SELECT table_name, table_type FROM information_schema.tables WHERE table_schema = ? ORDER BY table_name",
                (db,),
            )
            .await
            .expect("tables");
        for (name, ty) in objects {
            let q = format!("{}.{}", ident(db), ident(&name));
            let create: mysql_async::Row = c
                .query_first(format!("SHOW CREATE TABLE {q}"))
                .await
                .expect("show")
                .expect("row");
            let create: String = create.get(1).expect("create text");
            out.push(format!("{ty} {name}: {create}"));
            if ty == "BASE TABLE" {
                let sum: Option<(String, Option<i64>)> = c
                    .query_first(format!("CHECKSUM TABLE {q}"))
                    .await
                    .expect("checksum");
                let n: Option<i64> = c
                    .query_first(format!("SELECT COUNT(*) FROM {q}"))
                    .await
                    .expect("count");
                out.push(format!(
                    "checksum {name}: {:?} rows {:?}",
                    sum.map(|s| s.1),
                    n
                ));
            }
        }
        for (kind, sql) in [
            ("TRIGGER", "SELECT trigger_name, action_statement, action_timing, event_manipulation, sql_mode FROM information_schema.triggers WHERE trigger_schema = ? ORDER BY 1"),
            ("ROUTINE", "SELECT routine_name, routine_type, routine_definition, sql_mode FROM information_schema.routines WHERE routine_schema = ? ORDER BY 1"),
            ("EVENT", "SELECT event_name, event_definition, status, interval_value FROM information_schema.events WHERE event_schema = ? ORDER BY 1"),
        ] {
            let rows: Vec<mysql_async::Row> = c.exec(sql, (db,)).await.expect("objects");
            for r in rows {
                let vals: Vec<String> = (0..r.len())
                    .map(|i| {
                        r.get_opt::<Option<String>, _>(i)
                            .and_then(|v| v.ok())
                            .flatten()
                            .unwrap_or_else(|| "NULL".into())
                    })
                    .collect();
                out.push(format!("{kind} {}", vals.join(" | ")));
            }
        }
        let _ = c.disconnect().await;
        out.into_iter().map(|l| l.replace(db, "DB")).collect()
    }

    /// Runs the stock client (`mariadb`) with this server's option file,
    /// `-D db`, the file on stdin; returns its output.
    pub fn stock_client(&self, db: &str, file: &Path, extra: &[&str]) -> std::process::Output {
        let input = std::fs::File::open(file).expect("open the file for the stock client");
        std::process::Command::new("mariadb")
            .arg(format!(
                "--defaults-file={}",
                self.defaults_file().display()
            ))
            .args(extra)
            .args(["-D", db])
            .stdin(input)
            .output()
            .expect("the mariadb client (apt-get install mariadb-client)")
    }

    /// How many statements whose text contains `marker` run on the primary
    /// now (this probe itself not counted).
    pub async fn running(&self, marker: &str) -> u64 {
        let mut c = self.connect().await;
        let n: Option<u64> = c
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
                 WHERE INFO LIKE CONCAT('%', ?, '%') AND ID <> CONNECTION_ID()",
                (marker,),
            )
            .await
            .expect("processlist");
        let _ = c.disconnect().await;
        n.unwrap_or(0)
    }

    /// A root connection to the primary.
    pub async fn connect(&self) -> mysql_async::Conn {
        self.target()
            .connect(Duration::from_secs(10))
            .await
            .expect("connect to the test server")
    }
}

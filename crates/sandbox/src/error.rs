use std::path::PathBuf;

/// Everything that can go wrong with a sandbox, each a one-line message
/// naming the cause.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("{what} not found: install it with 'apt-get install mariadb-server' (or point SQLFLEET_MARIADBD at mariadbd)")]
    MariadbMissing { what: &'static str },
    #[error("{path}: no such mariadbd (named by --mariadbd or SQLFLEET_MARIADBD; without a name the system's is used: apt-get install mariadb-server)")]
    NamedMariadbdMissing { path: PathBuf },
    #[error("sandbox '{name}' was made with {have}; its data directories are that server's and it keeps it (asked for {want}; destroy the sandbox to make it with another)")]
    MariadbdChange {
        name: String,
        have: String,
        want: PathBuf,
    },
    #[error("port {port} is in use on 127.0.0.1: pick another with --port")]
    PortInUse { port: u16 },
    #[error("no sandbox named '{0}' ('sqlfleet sandbox list' shows them)")]
    Unknown(String),
    #[error("{0}")]
    BadName(#[from] sqlfleet_conn::ResolveError),
    #[error("sandbox '{name}' has {}; 'sqlfleet sandbox destroy --name {name}' first to make it with {want}", sqlfleet_conn::text::count(*have as u64, "replica"))]
    ReplicaCount {
        name: String,
        have: usize,
        want: usize,
    },
    #[error("sandbox '{name}' is {}; 'sqlfleet sandbox destroy --name {name}' first to make it another shape", match have { Some(n) => format!("a Galera cluster of {n} nodes"), None => "a primary with replicas, not a Galera cluster".to_string() })]
    ClusterShape { name: String, have: Option<usize> },
    #[error(
        "sandbox '{name}' was made with GTID domain {have}; it keeps it (destroy it to change it)"
    )]
    DomainChange { name: String, have: u32 },
    #[error(
        "sandbox '{name}' was made on port {have}; it keeps its ports (destroy it to change them)"
    )]
    PortChange { name: String, have: u16 },
    #[error("sandbox '{name}' is running: new server options take effect on a restart; add --restart to restart it with them (nothing was changed)")]
    OptionsNeedRestart { name: String },
    #[error("--option {option}: the server refuses it: {why}")]
    BadOption { option: String, why: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {what}")]
    Meta { path: PathBuf, what: String },
    #[error("{node}: mariadb-install-db failed (exit {code}); its output: {log}")]
    InitFailed {
        node: String,
        code: String,
        log: String,
    },
    #[error("{node}: mariadbd exited during start-up; {log_path}: {tail}")]
    StartFailed {
        node: String,
        log_path: PathBuf,
        tail: String,
    },
    #[error("{node}: not ready after {secs}s; see {log_path}")]
    StartTimeout {
        node: String,
        secs: u64,
        log_path: PathBuf,
    },
    #[error("{node}: {what}")]
    Sql { node: String, what: String },
    #[error("{node}: did not stop within {secs}s (pid {pid}); it was killed")]
    StopTimeout { node: String, secs: u64, pid: i32 },
    /// Stopped by Ctrl-C or SIGTERM; `what` says what was left.
    #[error("{what}")]
    Interrupted { what: String },
}

impl SandboxError {
    /// Stopped by a signal (the caller says what that left).
    pub(crate) fn interrupted() -> SandboxError {
        SandboxError::Interrupted {
            what: "interrupted".into(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> SandboxError {
        let path = path.into();
        move |source| SandboxError::Io { path, source }
    }
}

pub type Result<T, E = SandboxError> = std::result::Result<T, E>;

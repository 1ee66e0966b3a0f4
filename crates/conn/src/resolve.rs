//! Turning flags, a DSN, option files and the environment into one
//! [`Target`], with the mysql client's precedence.
//!
//! Precedence, highest first:
//! 1. command-line flags (`-h -P -u -p -S -D --ssl-mode --ssl-ca --protocol`)
//! 2. `--dsn URL`
//! 3. option files, groups `[client]` < `[client-server]` < `[client-mariadb]`
//!    < `[sqlfleet]`; files in order `/etc/my.cnf`, `/etc/mysql/my.cnf`,
//!    `--defaults-extra-file`, `~/.my.cnf` (later wins). `--defaults-file`
//!    or `--sandbox NAME` replace that list with one file; `--no-defaults`
//!    empties it. `SQLFLEET_SANDBOX=NAME` in the environment (what
//!    `sqlfleet sandbox env` exports) acts as `--sandbox NAME` unless a flag,
//!    a DSN or `--defaults-file` names the server.
//! 4. environment: `MYSQL_PWD`, `MYSQL_HOST`, `MYSQL_TCP_PORT`, `MYSQL_UNIX_PORT`
//! 5. built-in: host `localhost`, port 3306, socket `/run/mysqld/mysqld.sock`,
//!    user = login name.
//!
//! Like the mysql client, host `localhost` means the Unix socket, unless a
//! port is given on the command line or DSN without a socket, or
//! `--protocol tcp`.

use std::path::{Path, PathBuf};

use crate::args::ConnArgs;
use crate::dsn::{Dsn, DsnError};
use crate::home;
use crate::optfile::{normalize_key, OptFileError, OptionFiles};
use crate::secret::Secret;
use crate::tls::SslMode;

/// Option-file groups read, in increasing precedence.
pub const GROUPS: &[&str] = &["client", "client-server", "client-mariadb", "sqlfleet"];

pub const DEFAULT_SOCKET: &str = "/run/mysqld/mysqld.sock";

/// What sqlfleet does with an option the stock client programs share
/// (what a `[client]` group holds for all of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientOption {
    /// Read, with the meaning the stock client gives it (the value is a
    /// sample a test sets to see it read).
    Read(&'static str),
    /// Left alone: it changes nothing sqlfleet's connections do, for the
    /// reason given.
    Ignored(&'static str),
    /// Refused, naming file and line: sqlfleet would not do what the
    /// stock client does with it.
    Refused(&'static str),
}

/// Every option the stock client programs share (`mariadb`,
/// `mariadb-dump`, `mariadb-admin`, `mariadb-import`: what their
/// `--help --verbose` all list, and the few they take unlisted), and what
/// sqlfleet does with it. A test reads the installed programs' lists and
/// fails on an option not here.
pub const CLIENT_OPTIONS: &[(&str, ClientOption)] = &[
    ("host", ClientOption::Read("db.example")),
    ("port", ClientOption::Read("3307")),
    ("socket", ClientOption::Read("/tmp/other.sock")),
    ("user", ClientOption::Read("someone")),
    ("password", ClientOption::Read("secret")),
    ("database", ClientOption::Read("shop")),
    ("protocol", ClientOption::Read("tcp")),
    ("default-character-set", ClientOption::Read("latin1")),
    ("ssl", ClientOption::Read("0")),
    ("ssl-mode", ClientOption::Read("REQUIRED")),
    ("ssl-ca", ClientOption::Read("/etc/ca.pem")),
    ("ssl-capath", ClientOption::Read("/etc/ssl/certs")),
    ("ssl-cert", ClientOption::Read("/etc/client-cert.pem")),
    ("ssl-key", ClientOption::Read("/etc/client-key.pem")),
    ("ssl-crl", ClientOption::Read("/etc/crl.pem")),
    ("ssl-crlpath", ClientOption::Read("/etc/crls")),
    ("ssl-cipher", ClientOption::Read("ECDHE-RSA-AES256-GCM-SHA384")),
    ("tls-version", ClientOption::Read("TLSv1.3")),
    ("ssl-verify-server-cert", ClientOption::Read("1")),
    ("init-command", ClientOption::Refused("sqlfleet does not run it")),
    ("compress", ClientOption::Ignored("compression of the protocol changes no answer")),
    ("character-sets-dir", ClientOption::Ignored("sqlfleet's character sets are built in")),
    ("plugin-dir", ClientOption::Ignored("sqlfleet's authentication plugins are built in")),
    ("default-auth", ClientOption::Ignored("the first plugin a login tries: the server names the one the account needs and sqlfleet answers with that")),
    ("debug-check", ClientOption::Ignored("the client library's own debugging")),
    ("debug-info", ClientOption::Ignored("the client library's own debugging")),
    ("force", ClientOption::Ignored("the mysql client's going on after an error; sqlfleet's commands stop, or go on by their own flags (load --continue-on-error)")),
];

/// The process environment that resolution reads, injectable for tests.
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub home: Option<PathBuf>,
    pub sqlfleet_home: PathBuf,
    pub login_user: Option<String>,
    pub mysql_pwd: Option<Secret>,
    pub mysql_host: Option<String>,
    pub mysql_tcp_port: Option<String>,
    pub mysql_unix_port: Option<String>,
    /// Global option files, normally `/etc/my.cnf` and `/etc/mysql/my.cnf`.
    pub global_files: Vec<PathBuf>,
    /// `SQLFLEET_SANDBOX`: the sandbox `sqlfleet sandbox env` points at.
    pub sqlfleet_sandbox: Option<String>,
    /// `MARIADB_HOME` (or `MYSQL_HOME`): its `my.cnf` is read after the
    /// global files, as the stock client reads it.
    pub mysql_home: Option<PathBuf>,
    /// `MARIADB_GROUP_SUFFIX` (or `MYSQL_GROUP_SUFFIX`): each group is
    /// read under its suffixed name too (`[client_prod]`).
    pub group_suffix: Option<String>,
}

impl Env {
    pub fn from_process() -> Env {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Env {
            home: std::env::var_os("HOME").map(PathBuf::from),
            sqlfleet_home: home::sqlfleet_home(),
            login_user: var("USER").or_else(|| var("LOGNAME")).or_else(login_name),
            mysql_pwd: std::env::var("MYSQL_PWD").ok().map(Secret::new),
            mysql_host: var("MYSQL_HOST"),
            mysql_tcp_port: var("MYSQL_TCP_PORT"),
            mysql_unix_port: var("MYSQL_UNIX_PORT"),
            global_files: vec!["/etc/my.cnf".into(), "/etc/mysql/my.cnf".into()],
            sqlfleet_sandbox: var("SQLFLEET_SANDBOX"),
            mysql_home: var("MARIADB_HOME")
                .or_else(|| var("MYSQL_HOME"))
                .map(PathBuf::from),
            group_suffix: var("MARIADB_GROUP_SUFFIX").or_else(|| var("MYSQL_GROUP_SUFFIX")),
        }
    }

    /// The groups read: [`GROUPS`], each also under the group suffix.
    pub fn groups(&self) -> Vec<String> {
        let mut out: Vec<String> = GROUPS.iter().map(|g| g.to_string()).collect();
        if let Some(sfx) = &self.group_suffix {
            out.extend(
                GROUPS
                    .iter()
                    .map(|g| format!("{g}{sfx}").to_ascii_lowercase()),
            );
        }
        out
    }
}

fn login_name() -> Option<String> {
    // SAFETY: getuid has no preconditions; getpwuid returns a pointer into
    // static storage or null, read immediately and copied.
    unsafe {
        let pw = libc::getpwuid(libc::getuid());
        if pw.is_null() || (*pw).pw_name.is_null() {
            return None;
        }
        std::ffi::CStr::from_ptr((*pw).pw_name)
            .to_str()
            .ok()
            .map(str::to_owned)
    }
}

/// Where the server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Tcp { host: String, port: u16 },
    Socket(PathBuf),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Tcp { host, port } if host.contains(':') => write!(f, "[{host}]:{port}"),
            Endpoint::Tcp { host, port } => write!(f, "{host}:{port}"),
            Endpoint::Socket(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Which source named the server (its host, port or socket): how a
/// command tells "the user pointed me somewhere" from "nothing was said"
/// (then some commands fall back to a sandbox, saying so).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// `-h`, `-P`, `-S` or `--protocol` on the command line.
    Flags,
    Dsn,
    /// `--sandbox NAME`, or `SQLFLEET_SANDBOX` (`from_env`).
    Sandbox {
        name: String,
        from_env: bool,
    },
    /// An option file (the one whose value won).
    OptionFile(PathBuf),
    /// `MYSQL_HOST`, `MYSQL_TCP_PORT` or `MYSQL_UNIX_PORT`.
    Environment,
    /// Nothing: the built-in defaults (the local server's socket).
    BuiltIn,
}

impl Origin {
    /// Whether anything named the server.
    pub fn named(&self) -> bool {
        *self != Origin::BuiltIn
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Flags => f.write_str("the command line"),
            Origin::Dsn => f.write_str("--dsn"),
            Origin::Sandbox {
                name,
                from_env: false,
            } => write!(f, "--sandbox {name}"),
            Origin::Sandbox {
                name,
                from_env: true,
            } => write!(f, "SQLFLEET_SANDBOX={name}"),
            Origin::OptionFile(p) => write!(f, "{}", p.display()),
            Origin::Environment => f.write_str("MYSQL_HOST/MYSQL_TCP_PORT/MYSQL_UNIX_PORT"),
            Origin::BuiltIn => f.write_str("the built-in default"),
        }
    }
}

/// A password, or a request to ask for one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordSpec {
    Given(Secret),
    Prompt,
}

/// A fully resolved connection target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub endpoint: Endpoint,
    pub user: String,
    pub password: Option<PasswordSpec>,
    pub database: Option<String>,
    pub ssl_mode: SslMode,
    pub ssl_ca: Option<PathBuf>,
    /// A client certificate to show the server (`--ssl-cert`), and its
    /// key (`--ssl-key`; the certificate's file when not given).
    pub ssl_cert: Option<PathBuf>,
    pub ssl_key: Option<PathBuf>,
    /// The stock client's other TLS options (CA directory, revocation
    /// lists, versions and ciphers allowed).
    pub tls: crate::tls_policy::TlsChecks,
    /// `SET NAMES` after connecting (the client's default-character-set);
    /// `None`: utf8mb4, set in the handshake.
    pub charset: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error(transparent)]
    OptFile(#[from] OptFileError),
    #[error(transparent)]
    Dsn(#[from] DsnError),
    #[error("{path}:{line}: option '{key}': {what}")]
    BadOption {
        path: PathBuf,
        line: usize,
        key: String,
        what: String,
    },
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    #[error("{var}: {what}")]
    BadEnv { var: &'static str, what: String },
    #[error("no sandbox named '{0}' ('sqlfleet sandbox list' shows them; 'sqlfleet sandbox up --name {0}' makes it)")]
    UnknownSandbox(String),
    #[error("the sandbox '{0}' is stopped (none of its servers is running): 'sqlfleet sandbox up --name {0}' starts it")]
    SandboxStopped(String),
    #[error("sandbox name '{0}' is not valid: use letters, digits, '-' and '_'")]
    BadSandboxName(String),
    #[error("sandbox name '{0}...' is too long ({1} characters; at most 64)")]
    SandboxNameTooLong(String, usize),
    #[error(
        "a password is needed but there is no terminal to ask on; use MYSQL_PWD or an option file"
    )]
    NoTerminal,
    #[error("reading the password from the terminal: {0}")]
    Prompt(std::io::Error),
}

/// Checks a sandbox name (it becomes a directory name).
pub fn check_sandbox_name(name: &str) -> Result<(), ResolveError> {
    let chars = name.chars().count();
    if chars > 64 {
        return Err(ResolveError::SandboxNameTooLong(
            name.chars().take(20).collect(),
            chars,
        ));
    }
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(ResolveError::BadSandboxName(name.to_string()))
    }
}

/// One source's contribution; `None` means "not set here".
#[derive(Default)]
struct Layer {
    host: Option<String>,
    port: Option<u16>,
    user: Option<String>,
    password: Option<PasswordSpec>,
    socket: Option<PathBuf>,
    database: Option<String>,
    ssl_mode: Option<SslMode>,
    ssl_ca: Option<PathBuf>,
    ssl_cert: Option<PathBuf>,
    ssl_key: Option<PathBuf>,
    ssl_capath: Option<PathBuf>,
    ssl_crl: Option<PathBuf>,
    ssl_crlpath: Option<PathBuf>,
    tls_version: Option<Vec<String>>,
    ssl_cipher: Option<Vec<String>>,
    protocol_tcp: Option<bool>,
    charset: Option<String>,
}

impl Layer {
    /// Fields set in `hi` replace those in `self`.
    fn overlay(&mut self, hi: Layer) {
        macro_rules! take {
            ($($f:ident),*) => { $( if hi.$f.is_some() { self.$f = hi.$f; } )* };
        }
        take!(
            host,
            port,
            user,
            password,
            socket,
            database,
            ssl_mode,
            ssl_ca,
            ssl_cert,
            ssl_key,
            ssl_capath,
            ssl_crl,
            ssl_crlpath,
            tls_version,
            ssl_cipher,
            protocol_tcp,
            charset
        );
    }
}

/// The sandbox these flags (or `SQLFLEET_SANDBOX`) point at, and whether
/// it came from the environment. The variable yields to anything on the
/// command line that names the server.
pub fn sandbox_of<'a>(args: &'a ConnArgs, env: &'a Env) -> Option<(&'a str, bool)> {
    if let Some(n) = &args.sandbox {
        return Some((n, false));
    }
    let named_here = args.host.is_some()
        || args.port.is_some()
        || args.socket.is_some()
        || args.dsn.is_some()
        || args.defaults_file.is_some()
        || args.no_defaults;
    match &env.sqlfleet_sandbox {
        Some(n) if !named_here => Some((n, true)),
        _ => None,
    }
}

/// Whether no server of the sandbox whose defaults file this is runs:
/// each node's server makes its socket (`NODE/mysqld.sock` beside the
/// file) and its pid file when it starts and removes both when it stops,
/// so none there is a stopped sandbox, said as such instead of a bare
/// ERROR 2003. A server that did not stop cleanly (killed, or the machine
/// restarted) leaves both behind: its socket counts only while the pid
/// file names a live server process. Nothing is sent to a server to find
/// out (a connection dropped before its login would count in its
/// Aborted_connects). (One node down is not a stopped sandbox: its
/// neighbours may still be asked, by address.)
fn sandbox_stopped(defaults: &Path) -> bool {
    let Some(dir) = defaults.parent() else {
        return false;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut nodes = 0;
    for e in entries.flatten() {
        let node = e.path();
        if node.is_dir() {
            nodes += 1;
            if node.join("mysqld.sock").exists() && !left_by_a_dead_server(&node) {
                return false;
            }
        }
    }
    nodes > 0
}

/// Whether a node's pid file names a process that is not a running
/// server: gone, or its number taken since by another program (after a
/// restart of the machine). No pid file: not known, so not said.
fn left_by_a_dead_server(node: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(node.join("mariadbd.pid")) else {
        return false;
    };
    let Ok(pid) = text.trim().parse::<u32>() else {
        return false;
    };
    match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
        Ok(comm) => !matches!(comm.trim(), "mariadbd" | "mysqld"),
        Err(_) => true,
    }
}

/// Which option files to read for these flags, in order.
pub fn option_file_list(args: &ConnArgs, env: &Env) -> Result<Vec<(PathBuf, bool)>, ResolveError> {
    // (path, must_exist)
    if let Some(name) = sandbox_of(args, env).map(|(n, _)| n) {
        check_sandbox_name(name)?;
        let f = home::sandbox_defaults_file(&env.sqlfleet_home, name);
        if !f.exists() {
            return Err(ResolveError::UnknownSandbox(name.to_string()));
        }
        if sandbox_stopped(&f) {
            return Err(ResolveError::SandboxStopped(name.to_string()));
        }
        return Ok(vec![(f, true)]);
    }
    if args.no_defaults {
        return Ok(vec![]);
    }
    if let Some(f) = &args.defaults_file {
        return Ok(vec![(f.clone(), true)]);
    }
    let mut files: Vec<(PathBuf, bool)> = env
        .global_files
        .iter()
        .map(|f| (f.clone(), false))
        .collect();
    if let Some(h) = &env.mysql_home {
        files.push((h.join("my.cnf"), false));
    }
    if let Some(f) = &args.defaults_extra_file {
        files.push((f.clone(), true));
    }
    if let Some(h) = &env.home {
        files.push((h.join(".my.cnf"), false));
    }
    Ok(files)
}

/// What a `--dsn` sets.
fn dsn_layer(d: Dsn) -> Layer {
    Layer {
        host: d.host,
        port: d.port,
        user: d.user,
        password: d.password.map(PasswordSpec::Given),
        socket: d.socket.map(PathBuf::from),
        database: d.database,
        ssl_mode: d.ssl_mode,
        ssl_ca: d.ssl_ca.map(PathBuf::from),
        ssl_cert: d.ssl_cert.map(PathBuf::from),
        ssl_key: d.ssl_key.map(PathBuf::from),
        ssl_capath: d.ssl_capath.map(PathBuf::from),
        ssl_crl: d.ssl_crl.map(PathBuf::from),
        ssl_crlpath: d.ssl_crlpath.map(PathBuf::from),
        tls_version: d.tls_version,
        ssl_cipher: d.ssl_cipher,
        ..Layer::default()
    }
}

/// What the command line's flags set.
fn flag_layer(args: &ConnArgs) -> Result<Layer, ResolveError> {
    Ok(Layer {
        host: args.host.clone(),
        port: args.port,
        user: args.user.clone(),
        password: args.password.clone().map(|p| match p {
            Some(p) => PasswordSpec::Given(Secret::new(p)),
            None => PasswordSpec::Prompt,
        }),
        socket: args.socket.clone(),
        database: args.database.clone(),
        ssl_mode: args.ssl_mode.or(if args.skip_ssl {
            Some(SslMode::Disabled)
        } else if args.ssl_verify_server_cert {
            Some(SslMode::VerifyIdentity)
        } else {
            None
        }),
        ssl_ca: args.ssl_ca.clone(),
        ssl_cert: args.ssl_cert.clone(),
        ssl_key: args.ssl_key.clone(),
        ssl_capath: args.ssl_capath.clone(),
        ssl_crl: args.ssl_crl.clone(),
        ssl_crlpath: args.ssl_crlpath.clone(),
        tls_version: parsed_flag(
            &args.tls_version,
            "--tls-version",
            crate::tls_policy::parse_versions,
        )?,
        ssl_cipher: parsed_flag(
            &args.ssl_cipher,
            "--ssl-cipher",
            crate::tls_policy::parse_ciphers,
        )?,
        protocol_tcp: parsed_flag(&args.protocol, "--protocol", parse_protocol)?,
        charset: parsed_flag(
            &args.default_character_set,
            "--default-character-set",
            parse_charset,
        )?,
    })
}

/// A flag's value read by `parse`, a bad one named by its flag.
fn parsed_flag<T>(
    value: &Option<String>,
    flag: &'static str,
    parse: fn(&str) -> Result<T, String>,
) -> Result<Option<T>, ResolveError> {
    value
        .as_deref()
        .map(parse)
        .transpose()
        .map_err(|what| ResolveError::BadEnv { var: flag, what })
}

/// The option files these flags and this environment read, in order (as
/// the stock client's `--help` lists its own).
pub fn option_files_read(args: &ConnArgs, env: &Env) -> Result<Vec<PathBuf>, ResolveError> {
    Ok(option_file_list(args, env)?
        .into_iter()
        .map(|(f, _)| f)
        .collect())
}

/// The option files' settings, and the file that named the server (if any).
fn option_layer(args: &ConnArgs, env: &Env) -> Result<(Layer, Option<PathBuf>), ResolveError> {
    let mut files = OptionFiles::default();
    for (path, must) in option_file_list(args, env)? {
        if must {
            files.read(&path)?;
        } else {
            files.read_if_exists(&path)?;
        }
    }
    let groups = match &args.defaults_group_suffix {
        Some(sfx) => Env {
            group_suffix: Some(sfx.clone()),
            ..Env::default()
        }
        .groups(),
        None => env.groups(),
    };
    let merged = files.merged(&groups.iter().map(String::as_str).collect::<Vec<_>>());
    let mut layer = Layer::default();
    let mut named_by = None;
    let mut verify_server_cert = false;
    for (key, v) in &merged {
        if matches!(
            normalize_key(key).as_str(),
            "host" | "port" | "socket" | "protocol"
        ) {
            named_by = Some(v.path.clone());
        }
        let bad = |what: String| ResolveError::BadOption {
            path: v.path.clone(),
            line: v.line,
            key: key.clone(),
            what,
        };
        let need = || v.value.clone().ok_or_else(|| bad("needs a value".into()));
        match normalize_key(key).as_str() {
            "host" => layer.host = Some(need()?),
            "port" => {
                let s = need()?;
                layer.port = Some(
                    s.parse()
                        .map_err(|_| bad(format!("'{s}' is not a port number")))?,
                );
            }
            "user" => layer.user = Some(need()?),
            "password" => {
                layer.password = Some(match &v.value {
                    Some(p) => PasswordSpec::Given(Secret::new(p.clone())),
                    None => PasswordSpec::Prompt,
                })
            }
            "socket" => layer.socket = Some(PathBuf::from(need()?)),
            "database" => layer.database = Some(need()?),
            "ssl-mode" => layer.ssl_mode = Some(need()?.parse().map_err(bad)?),
            // The MariaDB client's way to ask for a checked certificate
            // (it has no ssl-mode): TLS required, the certificate chained
            // to the CA and naming the host. Ignored, it let sqlfleet
            // connect unchecked, or in plain text, where the stock client
            // refuses (ERROR 2026).
            "ssl-verify-server-cert" => {
                verify_server_cert = flag_on(v.value.as_deref()).map_err(bad)?;
            }
            "skip-ssl-verify-server-cert" => verify_server_cert = false,
            // A session the stock client starts with a statement sqlfleet
            // would not run: refused, not ignored.
            "init-command" => {
                return Err(bad(
                    "sqlfleet does not run an init-command, so its sessions would not be the ones the stock client gets: remove it here, or move it to a [mysql] group (read by the mysql client only)".into(),
                ))
            }
            "ssl-ca" => layer.ssl_ca = Some(PathBuf::from(need()?)),
            // A client certificate: left out, an account made REQUIRE
            // X509 was "Access denied" where the stock client logs in.
            "ssl-cert" => layer.ssl_cert = Some(PathBuf::from(need()?)),
            "ssl-key" => layer.ssl_key = Some(PathBuf::from(need()?)),
            "ssl-capath" => layer.ssl_capath = Some(PathBuf::from(need()?)),
            "ssl-crl" => layer.ssl_crl = Some(PathBuf::from(need()?)),
            "ssl-crlpath" => layer.ssl_crlpath = Some(PathBuf::from(need()?)),
            "tls-version" => {
                layer.tls_version = Some(crate::tls_policy::parse_versions(&need()?).map_err(bad)?)
            }
            "ssl-cipher" => {
                layer.ssl_cipher = Some(crate::tls_policy::parse_ciphers(&need()?).map_err(bad)?)
            }
            // The MariaDB client's switch: `ssl=0` or `skip-ssl` is plain
            // text; `ssl` alone asks for nothing more than PREFERRED does
            // (its client does not insist on TLS for it).
            "ssl" => {
                let on = flag_on(v.value.as_deref()).map_err(bad)?;
                if !on {
                    layer.ssl_mode = Some(SslMode::Disabled);
                }
            }
            "skip-ssl" | "disable-ssl" => layer.ssl_mode = Some(SslMode::Disabled),
            "protocol" => layer.protocol_tcp = Some(parse_protocol(&need()?).map_err(bad)?),
            "default-character-set" => layer.charset = Some(parse_charset(&need()?).map_err(bad)?),
            _ => {} // other programs' options share [client]
        }
    }
    if verify_server_cert {
        layer.ssl_mode = Some(SslMode::VerifyIdentity);
    }
    Ok((layer, named_by))
}

/// An option file's boolean: bare (`ssl-verify-server-cert`) or 1/0,
/// ON/OFF, TRUE/FALSE, as the client library reads it.
fn flag_on(v: Option<&str>) -> Result<bool, String> {
    match v.map(|s| s.trim().to_ascii_lowercase()) {
        None => Ok(true),
        Some(s) if matches!(s.as_str(), "" | "1" | "on" | "true" | "yes") => Ok(true),
        Some(s) if matches!(s.as_str(), "0" | "off" | "false" | "no") => Ok(false),
        Some(s) => Err(format!("'{s}' is not 1/0, ON/OFF or TRUE/FALSE")),
    }
}

/// A character set name as `SET NAMES` takes it (`auto`: utf8mb4).
fn parse_charset(s: &str) -> Result<String, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok("utf8mb4".into());
    }
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(format!("'{s}' is not a character set name"));
    }
    Ok(s.to_ascii_lowercase())
}

fn parse_protocol(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "tcp" => Ok(true),
        "socket" => Ok(false),
        _ => Err(format!("protocol '{s}' is not tcp or socket")),
    }
}

/// Resolves a target without prompting: a bare `-p` stays
/// [`PasswordSpec::Prompt`].
pub fn resolve(args: &ConnArgs, env: &Env) -> Result<Target, ResolveError> {
    resolve_traced(args, env).map(|(t, _)| t)
}

/// As [`resolve()`], and which source named the server.
pub fn resolve_traced(args: &ConnArgs, env: &Env) -> Result<(Target, Origin), ResolveError> {
    let mut acc = Layer {
        host: Some("localhost".into()),
        port: Some(3306),
        user: env.login_user.clone().or_else(|| Some("root".into())),
        socket: Some(PathBuf::from(DEFAULT_SOCKET)),
        ..Layer::default()
    };
    let mut env_layer = Layer {
        host: env.mysql_host.clone(),
        password: env.mysql_pwd.clone().map(PasswordSpec::Given),
        socket: env.mysql_unix_port.clone().map(PathBuf::from),
        ..Layer::default()
    };
    if let Some(p) = &env.mysql_tcp_port {
        env_layer.port = Some(p.parse().map_err(|_| ResolveError::BadEnv {
            var: "MYSQL_TCP_PORT",
            what: format!("'{p}' is not a port number"),
        })?);
    }
    let mut origin = Origin::BuiltIn;
    if env_layer.host.is_some() || env_layer.port.is_some() || env_layer.socket.is_some() {
        origin = Origin::Environment;
    }
    acc.overlay(env_layer);
    let (files, file) = option_layer(args, env)?;
    acc.overlay(files);
    if let Some((name, from_env)) = sandbox_of(args, env) {
        origin = Origin::Sandbox {
            name: name.to_string(),
            from_env,
        };
    } else if let Some(p) = file {
        origin = Origin::OptionFile(p);
    }

    // Explicit endpoint choices (DSN and flags) decide socket vs TCP.
    let mut explicit_port = false;
    let mut explicit_socket = false;
    if let Some(d) = &args.dsn {
        let d = Dsn::parse(d)?;
        if d.host.is_some() || d.port.is_some() || d.socket.is_some() {
            origin = Origin::Dsn;
        }
        explicit_port |= d.port.is_some();
        explicit_socket |= d.socket.is_some();
        acc.overlay(dsn_layer(d));
    }
    explicit_port |= args.port.is_some();
    explicit_socket |= args.socket.is_some();
    if args.host.is_some()
        || args.port.is_some()
        || args.socket.is_some()
        || args.protocol.is_some()
    {
        origin = Origin::Flags;
    }
    acc.overlay(flag_layer(args)?);

    let host = acc.host.unwrap_or_else(|| "localhost".into());
    let port = acc.port.unwrap_or(3306);
    let use_socket = match acc.protocol_tcp {
        Some(tcp) => !tcp,
        None => host == "localhost" && (explicit_socket || !explicit_port),
    };
    let endpoint = if use_socket {
        Endpoint::Socket(acc.socket.unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET)))
    } else {
        // TCP to "localhost" is TCP to the loopback address.
        let host = if host == "localhost" {
            "127.0.0.1".to_string()
        } else {
            host
        };
        Endpoint::Tcp { host, port }
    };
    crate::tls::ClientCert::of(acc.ssl_cert.as_deref(), acc.ssl_key.as_deref())?;
    Ok((
        Target {
            endpoint,
            user: acc.user.unwrap_or_else(|| "root".into()),
            password: acc.password,
            database: acc.database,
            ssl_mode: acc.ssl_mode.unwrap_or_default(),
            ssl_ca: acc.ssl_ca,
            ssl_cert: acc.ssl_cert,
            ssl_key: acc.ssl_key,
            tls: crate::tls_policy::TlsChecks {
                capath: acc.ssl_capath,
                crl: acc.ssl_crl,
                crlpath: acc.ssl_crlpath,
                versions: acc.tls_version.unwrap_or_default(),
                ciphers: acc.ssl_cipher.unwrap_or_default(),
            },
            charset: acc.charset,
        },
        origin,
    ))
}

impl Target {
    /// Replaces a [`PasswordSpec::Prompt`] by asking on the terminal.
    pub fn prompt_password(mut self) -> Result<Target, ResolveError> {
        if self.password == Some(PasswordSpec::Prompt) {
            let tty = std::fs::OpenOptions::new().read(true).open("/dev/tty");
            if tty.is_err() {
                return Err(ResolveError::NoTerminal);
            }
            let pw =
                rpassword::prompt_password("Enter password: ").map_err(ResolveError::Prompt)?;
            self.password = Some(PasswordSpec::Given(Secret::new(pw)));
        }
        Ok(self)
    }

    /// The password to send, if any.
    pub fn secret(&self) -> Option<&Secret> {
        match &self.password {
            Some(PasswordSpec::Given(s)) => Some(s),
            _ => None,
        }
    }

    /// The client certificate to show the server, if any (`--ssl-key`
    /// without `--ssl-cert` is refused).
    pub fn client_cert(&self) -> Result<Option<crate::tls::ClientCert<'_>>, crate::tls::TlsError> {
        crate::tls::ClientCert::of(self.ssl_cert.as_deref(), self.ssl_key.as_deref())
    }

    /// The same target with another default database.
    pub fn with_database(&self, db: Option<&str>) -> Target {
        Target {
            database: db.map(str::to_owned),
            ..self.clone()
        }
    }

    /// A `[client]` option file for the stock client programs
    /// (`mariadb-dump --defaults-file=...`): the endpoint, user, password
    /// and TLS settings, so no secret goes on a command line. Write it
    /// with mode 0600.
    pub fn option_file(&self) -> String {
        let q = |v: &str| format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""));
        let mut s = String::from("[client]\n");
        match &self.endpoint {
            Endpoint::Tcp { host, port } => {
                s.push_str(&format!("host={}\nport={port}\nprotocol=tcp\n", q(host)));
            }
            Endpoint::Socket(p) => {
                s.push_str(&format!(
                    "socket={}\nprotocol=socket\n",
                    q(&p.display().to_string())
                ));
            }
        }
        s.push_str(&format!("user={}\n", q(&self.user)));
        if let Some(p) = self.secret() {
            s.push_str(&format!("password={}\n", q(p.expose())));
        }
        match self.ssl_mode {
            crate::tls::SslMode::Disabled => s.push_str("skip-ssl\n"),
            crate::tls::SslMode::Preferred => {}
            crate::tls::SslMode::Required => s.push_str("ssl\n"),
            crate::tls::SslMode::VerifyCa | crate::tls::SslMode::VerifyIdentity => {
                s.push_str("ssl\nssl-verify-server-cert\n");
            }
        }
        for (key, file) in [
            ("ssl-ca", &self.ssl_ca),
            ("ssl-cert", &self.ssl_cert),
            ("ssl-key", &self.ssl_key),
            ("ssl-capath", &self.tls.capath),
            ("ssl-crl", &self.tls.crl),
            ("ssl-crlpath", &self.tls.crlpath),
        ] {
            if let Some(f) = file {
                s.push_str(&format!("{key}={}\n", q(&f.display().to_string())));
            }
        }
        if !self.tls.versions.is_empty() {
            s.push_str(&format!("tls-version={}\n", self.tls.versions.join(",")));
        }
        if !self.tls.ciphers.is_empty() {
            s.push_str(&format!("ssl-cipher={}\n", self.tls.ciphers.join(":")));
        }
        s
    }

    /// A target for `host:port` with this one's credentials and TLS settings.
    pub fn with_endpoint(&self, endpoint: Endpoint) -> Target {
        Target {
            endpoint,
            ..self.clone()
        }
    }

    /// This target at another place: `HOST:PORT` keeps its login and TLS;
    /// a DSN (`mysql://user:pw@host:port/?ssl-mode=...`) replaces what it
    /// names (host or socket, port, user, password, TLS mode and CA).
    pub fn with_dsn(&self, place: &str) -> Result<Target, PlaceError> {
        if !place.contains("://") {
            let (host, port) =
                crate::addr::parse_addr(place, 3306).map_err(|what| PlaceError::Address {
                    place: place.into(),
                    what,
                })?;
            return Ok(self.with_endpoint(Endpoint::Tcp { host, port }));
        }
        let d = Dsn::parse(place)?;
        let mut t = self.clone();
        t.endpoint = match &d.socket {
            Some(s) => Endpoint::Socket(s.into()),
            None => Endpoint::Tcp {
                host: d.host.clone().unwrap_or_else(|| "127.0.0.1".into()),
                port: d.port.unwrap_or(3306),
            },
        };
        if let Some(u) = d.user {
            t.user = u;
        }
        if let Some(p) = d.password {
            t.password = Some(PasswordSpec::Given(p));
        }
        if let Some(m) = d.ssl_mode {
            t.ssl_mode = m;
        }
        if let Some(ca) = d.ssl_ca {
            t.ssl_ca = Some(ca.into());
        }
        if let Some(c) = d.ssl_cert {
            t.ssl_cert = Some(c.into());
        }
        if let Some(k) = d.ssl_key {
            t.ssl_key = Some(k.into());
        }
        if let Some(p) = d.ssl_capath {
            t.tls.capath = Some(p.into());
        }
        if let Some(p) = d.ssl_crl {
            t.tls.crl = Some(p.into());
        }
        if let Some(p) = d.ssl_crlpath {
            t.tls.crlpath = Some(p.into());
        }
        if let Some(v) = d.tls_version {
            t.tls.versions = v;
        }
        if let Some(c) = d.ssl_cipher {
            t.tls.ciphers = c;
        }
        Ok(t)
    }
}

/// A place (`HOST:PORT` or a DSN) that names no server.
#[derive(Debug, thiserror::Error)]
pub enum PlaceError {
    #[error(transparent)]
    Dsn(#[from] DsnError),
    #[error("{place}: {what}")]
    Address {
        place: String,
        #[source]
        what: crate::addr::AddrError,
    },
}

/// Resolves and prompts: what subcommands call.
pub fn resolve_interactive(args: &ConnArgs) -> Result<Target, ResolveError> {
    resolve_interactive_traced(args).map(|(t, _)| t)
}

/// As [`resolve_interactive()`], and which source named the server.
pub fn resolve_interactive_traced(args: &ConnArgs) -> Result<(Target, Origin), ResolveError> {
    let (t, origin) = resolve_traced(args, &Env::from_process())?;
    Ok((t.prompt_password()?, origin))
}

#[cfg(test)]
mod tests;

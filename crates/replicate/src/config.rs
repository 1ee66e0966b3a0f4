//! `replicate.toml`: the target, the sources, and which of each source's
//! databases go where. Unknown keys are refused (a typo must not turn a
//! filter off); every error names the source and the key.
//!
//! ```toml
//! [target]
//! sandbox = "hub"               # a local sandbox: its port and password (or dsn = ...)
//!
//! [apply]
//! threads = 8          # target connections applying in parallel
//! batch = 1024         # source transactions per target commit, at most (and 16 MiB)
//! beside = false       # run chunks of one database beside each other (optimistic)
//!
//! [[source]]
//! name = "eu"
//! dsn = "mysql://repl@eu-db1.example.com:3306/"
//! password_file = "/etc/sqlfleet/eu.pw"   # or password_env = "EU_PW"; never in the DSN
//! include = ["app*"]            # glob (* and ?); default: all but system schemas
//! exclude = ["app_tmp"]
//! rename = { app = "app_eu" }
//! start = "current"             # or "gtid:0-1-1234[,1-2-9]" or "file:mysql-bin.000003:4"
//! server_id = 4001              # the id this reader registers with (default from the name)
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use sqlfleet_conn::Dsn;

use crate::gtid::GtidPos;

/// Databases never replicated: the server's own, and ours (positions).
pub const SYSTEM_SCHEMAS: &[&str] = &[
    "mysql",
    "information_schema",
    "performance_schema",
    "sys",
    crate::position::SCHEMA,
];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub target: TargetCfg,
    #[serde(default)]
    pub apply: ApplyCfg,
    #[serde(default)]
    pub source: Vec<SourceCfg>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetCfg {
    pub dsn: Option<String>,
    pub sandbox: Option<String>,
    pub password_file: Option<std::path::PathBuf>,
    pub password_env: Option<String>,
}

/// How to reach a server: a DSN (its password inline, or from a file or an
/// environment variable, so it stays out of the config and of `ps`), or a
/// local sandbox by name (its primary's port and password).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Server {
    Dsn {
        dsn: String,
        /// From `password_file` / `password_env`; `None`: the DSN's own.
        password: Option<sqlfleet_conn::secret::Secret>,
    },
    Sandbox(String),
}

impl Server {
    /// What errors and logs may show of it: never a password.
    pub fn describe(&self) -> String {
        match self {
            Server::Dsn { dsn, .. } => sqlfleet_conn::dsn::mask_password(dsn),
            Server::Sandbox(n) => format!("sandbox '{n}'"),
        }
    }
}

/// One server's settings checked: exactly one of `dsn` and `sandbox`; a
/// password given one way only; `at` names the section in errors.
fn server(
    at: &str,
    dsn: &Option<String>,
    sandbox: &Option<String>,
    file: &Option<std::path::PathBuf>,
    env: &Option<String>,
) -> Result<Server, String> {
    match (dsn, sandbox) {
        (Some(d), None) => {
            let parsed = Dsn::parse(d).map_err(|e| format!("{at}: dsn: {e}"))?;
            let inline = parsed.password.as_ref().map(|p| p.expose());
            let password = sqlfleet_conn::secret::configured(
                inline,
                file.as_deref(),
                env.as_deref(),
                at,
            )
            .map_err(|e| e.to_string())?;
            Ok(Server::Dsn {
                dsn: d.clone(),
                // The DSN's own password stays in it.
                password: if inline.is_some() { None } else { password },
            })
        }
        (None, Some(name)) => {
            if file.is_some() || env.is_some() {
                return Err(format!(
                    "{at}: sandbox = \"{name}\" has its own password: remove password_file/password_env"
                ));
            }
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(format!(
                    "{at}: sandbox = \"{name}\": use letters, digits, '-' and '_'"
                ));
            }
            Ok(Server::Sandbox(name.clone()))
        }
        (Some(_), Some(_)) => Err(format!("{at}: give dsn or sandbox, not both")),
        (None, None) => Err(format!(
            "{at}: no server: give dsn = \"mysql://user@host:port/\" (with password_file or password_env) or sandbox = \"NAME\""
        )),
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApplyCfg {
    #[serde(default = "default_threads")]
    pub threads: usize,
    #[serde(default = "default_batch")]
    pub batch: usize,
    /// Seconds after which stopped streams are tried again (doubling each
    /// time the same stop repeats); none: only `replicate retry` or a restart.
    pub retry_after: Option<u64>,
    /// Chunks of one stream run beside each other on several workers
    /// (optimistic, see `order.rs`); off: one chunk of a stream at a time.
    #[serde(default)]
    pub beside: bool,
}

fn default_threads() -> usize {
    4
}
fn default_batch() -> usize {
    1024
}

impl Default for ApplyCfg {
    fn default() -> Self {
        ApplyCfg {
            threads: default_threads(),
            batch: default_batch(),
            retry_after: None,
            beside: false,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceCfg {
    pub name: String,
    pub dsn: Option<String>,
    pub sandbox: Option<String>,
    pub password_file: Option<std::path::PathBuf>,
    pub password_env: Option<String>,
    #[serde(default)]
    pub include: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
    #[serde(default)]
    pub rename: BTreeMap<String, String>,
    #[serde(default = "default_start")]
    pub start: String,
    pub server_id: Option<u32>,
}

fn default_start() -> String {
    "current".into()
}

/// Where a source starts when the target holds no position for it yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// The source's position when replication is first started.
    Current,
    Gtid(GtidPos),
    File {
        file: String,
        pos: u64,
    },
}

/// A config (or a part of one) that cannot be used: what and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

impl Start {
    pub fn parse(s: &str) -> Result<Start, ConfigError> {
        start(s).map_err(ConfigError)
    }
}

fn start(s: &str) -> Result<Start, String> {
    if s == "current" {
        Ok(Start::Current)
    } else if let Some(g) = s.strip_prefix("gtid:") {
        GtidPos::parse(g)
            .map(Start::Gtid)
            .map_err(|e| e.to_string())
    } else if let Some(f) = s.strip_prefix("file:") {
        let (file, pos) = f
            .rsplit_once(':')
            .ok_or_else(|| format!("'{s}': expected file:NAME:POSITION"))?;
        let pos = pos
            .parse()
            .map_err(|_| format!("'{s}': '{pos}' is not a byte position"))?;
        if file.is_empty() {
            return Err(format!("'{s}': empty binlog file name"));
        }
        Ok(Start::File {
            file: file.to_string(),
            pos,
        })
    } else {
        Err(format!(
            "'{s}': expected \"current\", \"gtid:D-S-N[,..]\" or \"file:NAME:POSITION\""
        ))
    }
}

/// Which databases of one source are taken, and under what name.
#[derive(Debug, Clone, Default)]
pub struct DbMap {
    include: Vec<String>,
    exclude: Vec<String>,
    rename: BTreeMap<String, String>,
}

impl DbMap {
    pub fn new(include: &[String], exclude: &[String], rename: &BTreeMap<String, String>) -> Self {
        DbMap {
            include: include.to_vec(),
            exclude: exclude.to_vec(),
            rename: rename.clone(),
        }
    }

    /// The target database for source database `db`, or None when it is
    /// not replicated.
    pub fn map<'a>(&'a self, db: &'a str) -> Option<&'a str> {
        if db.is_empty() || SYSTEM_SCHEMAS.contains(&db) {
            return None;
        }
        if !self.include.is_empty() && !self.include.iter().any(|g| glob(g, db)) {
            return None;
        }
        if self.exclude.iter().any(|g| glob(g, db)) {
            return None;
        }
        Some(self.rename.get(db).map(String::as_str).unwrap_or(db))
    }

    /// Whether target database `db` is one a source database is written
    /// into: renamed onto it, or taken under its own name.
    pub fn writes_into(&self, db: &str) -> bool {
        self.map(db) == Some(db)
            || self
                .rename
                .iter()
                .any(|(from, to)| to == db && self.map(from) == Some(db))
    }

    /// The source database renamed onto `db`'s own name, when `db` is
    /// taken under its own name too: the two would be written into one
    /// database. (Checked at start for the databases that exist; this
    /// catches one created later.)
    pub fn collides(&self, db: &str) -> Option<&str> {
        if self.rename.contains_key(db) || self.map(db) != Some(db) {
            return None;
        }
        self.rename
            .iter()
            .find(|(_, to)| to.as_str() == db)
            .map(|(from, _)| from.as_str())
    }
}

/// `*` any run, `?` one character; everything else literal.
pub fn glob(pattern: &str, s: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = s.chars().collect();
    let (mut pi, mut si) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// A checked source.
#[derive(Debug, Clone)]
pub struct Source {
    pub name: String,
    pub server: Server,
    pub dbs: DbMap,
    pub start: Start,
    pub server_id: u32,
    /// Target database names renames point at (checked against the
    /// source's own databases once connected).
    pub renamed_to: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Checked {
    pub target: Server,
    pub threads: usize,
    pub batch: usize,
    /// `[apply] retry_after`.
    pub retry_after: Option<std::time::Duration>,
    /// `[apply] beside`.
    pub beside: bool,
    pub sources: Vec<Source>,
}

fn valid_db_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && !s.ends_with(' ') && !s.contains(['/', '\\', '.', '\0'])
}

/// Reads and checks a config file.
pub fn load(path: &Path) -> Result<Checked, sqlfleet_conn::FileError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| sqlfleet_conn::FileError::read(path, e))?;
    parse(&text).map_err(|e| sqlfleet_conn::FileError::invalid(path, e))
}

/// Parses and checks config text.
pub fn parse(text: &str) -> Result<Checked, ConfigError> {
    check(text).map_err(ConfigError)
}

fn check(text: &str) -> Result<Checked, String> {
    let c: Config =
        toml::from_str(text).map_err(|e| sqlfleet_conn::at_line(text, e.span(), e.message()))?;
    let target = server(
        "[target]",
        &c.target.dsn,
        &c.target.sandbox,
        &c.target.password_file,
        &c.target.password_env,
    )?;
    if c.apply.threads == 0 || c.apply.threads > 256 {
        return Err(format!(
            "[apply] threads = {}: must be 1..=256",
            c.apply.threads
        ));
    }
    if c.apply.batch == 0 || c.apply.batch > 10_000 {
        return Err(format!(
            "[apply] batch = {}: must be 1..=10000",
            c.apply.batch
        ));
    }
    if c.apply.retry_after == Some(0) {
        return Err("[apply] retry_after = 0: give seconds (1 or more), or leave it out".into());
    }
    if c.source.is_empty() {
        return Err("no [[source]]: name at least one server to replicate from".into());
    }
    let mut sources = Vec::new();
    let mut ids = BTreeMap::new();
    for s in &c.source {
        let at = format!("source '{}'", s.name);
        if s.name.is_empty()
            || s.name.len() > 55
            || !s
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!(
                "source name '{}': use 1-55 letters, digits, '_' or '-'",
                s.name
            ));
        }
        if sources.iter().any(|x: &Source| x.name == s.name) {
            return Err(format!("{at} is named twice"));
        }
        let srv = server(&at, &s.dsn, &s.sandbox, &s.password_file, &s.password_env)?;
        let start = Start::parse(&s.start).map_err(|e| format!("{at}: start = {e}"))?;
        for g in s.include.iter().chain(&s.exclude) {
            if g.is_empty() {
                return Err(format!("{at}: empty database pattern"));
            }
            if SYSTEM_SCHEMAS.contains(&g.as_str()) {
                return Err(format!(
                    "{at}: '{g}' is a system schema; it is never replicated"
                ));
            }
        }
        let mut seen = BTreeMap::new();
        for (from, to) in &s.rename {
            if !valid_db_name(from) || !valid_db_name(to) {
                return Err(format!("{at}: rename {from} = {to}: not a database name"));
            }
            if SYSTEM_SCHEMAS.contains(&to.as_str()) || SYSTEM_SCHEMAS.contains(&from.as_str()) {
                return Err(format!(
                    "{at}: rename {from} = {to}: system schemas cannot be renamed or written"
                ));
            }
            if let Some(other) = seen.insert(to.clone(), from.clone()) {
                return Err(format!(
                    "{at}: rename {other} = {to} and {from} = {to}: two databases onto one name"
                ));
            }
            if to != from && !s.rename.contains_key(to) && s.include.iter().any(|g| g == to) {
                return Err(format!(
                    "{at}: rename {from} = {to}: '{to}' is also taken from this source under its own name"
                ));
            }
        }
        let server_id = s.server_id.unwrap_or_else(|| default_server_id(&s.name));
        if server_id == 0 {
            return Err(format!("{at}: server_id 0 is not a replica id"));
        }
        if let Some(other) = ids.insert(server_id, s.name.clone()) {
            return Err(format!(
                "{at}: server_id {server_id} is also used by source '{other}'"
            ));
        }
        sources.push(Source {
            name: s.name.clone(),
            server: srv,
            dbs: DbMap::new(&s.include, &s.exclude, &s.rename),
            start,
            server_id,
            renamed_to: s.rename.values().cloned().collect(),
        });
    }
    Ok(Checked {
        target,
        threads: c.apply.threads,
        batch: c.apply.batch,
        retry_after: c.apply.retry_after.map(std::time::Duration::from_secs),
        beside: c.apply.beside,
        sources,
    })
}

/// A replica id derived from the source name: high enough not to collide
/// with hand-numbered servers, stable across restarts.
pub fn default_server_id(name: &str) -> u32 {
    let h = name.bytes().fold(2_166_136_261u32, |h, b| {
        (h ^ b as u32).wrapping_mul(16_777_619)
    });
    0x5000_0000 | (h & 0x0FFF_FFFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"
        [target]
        dsn = "mysql://root:pw@127.0.0.1:3310/"
        [[source]]
        name = "eu"
        dsn = "mysql://repl:pw@eu:3306/"
        include = ["app*"]
        rename = { app = "app_eu" }
        [[source]]
        name = "us"
        dsn = "mysql://repl:pw@us:3306/"
        start = "gtid:0-1-1234"
    "#;

    #[test]
    fn the_issue_example_parses() {
        let c = parse(OK).expect("parses");
        assert_eq!(c.sources.len(), 2);
        assert_eq!(c.sources[0].dbs.map("app"), Some("app_eu"));
        assert_eq!(c.sources[0].dbs.map("appx"), Some("appx"));
        assert_eq!(c.sources[0].dbs.map("other"), None);
        assert_eq!(c.sources[1].dbs.map("mysql"), None);
        assert_eq!(c.sources[1].dbs.map("sqlfleet"), None);
        assert_eq!(c.sources[1].dbs.map("other"), Some("other"));
        assert!(matches!(c.sources[1].start, Start::Gtid(_)));
        assert_ne!(c.sources[0].server_id, c.sources[1].server_id);
    }

    #[test]
    fn mistakes_are_named() {
        let cases = [
            (OK.replace("include", "includes"), "unknown field"),
            (OK.replace("\"us\"", "\"eu\""), "named twice"),
            (
                OK.replace("gtid:0-1-1234", "gtid:zero"),
                "not a MariaDB GTID",
            ),
            (
                OK.replace("gtid:0-1-1234", "latest"),
                "expected \"current\"",
            ),
            (
                OK.replace("app = \"app_eu\"", "app = \"mysql\""),
                "system schemas",
            ),
            (
                OK.replace("app = \"app_eu\"", "app = \"x\", appy = \"x\""),
                "two databases onto one name",
            ),
            (
                OK.replace("include = [\"app*\"]", "include = [\"app\", \"app_eu\"]"),
                "also taken from this source",
            ),
            (
                OK.replace("mysql://repl:pw@us", "mysq://repl:pw@us"),
                "source 'us': dsn",
            ),
            (
                OK.replace("include = [\"app*\"]", "include = [\"sqlfleet\"]"),
                "system schema",
            ),
        ];
        for (text, want) in cases {
            let e = parse(&text).expect_err(want).to_string();
            assert!(e.contains(want), "{e} should say {want}");
        }
        let e = parse("[target]\ndsn = \"mysql://h/\"\n")
            .expect_err("no sources")
            .to_string();
        assert!(e.contains("no [[source]]"), "{e}");
    }

    #[test]
    fn servers_by_dsn_password_file_env_or_sandbox() {
        let dir = tempfile::tempdir().expect("dir");
        let pw = dir.path().join("eu.pw");
        std::fs::write(&pw, "s3cret\n").expect("write");
        std::env::set_var("SQLFLEET_TEST_US_PW", "from-env");
        let base = |target: &str, eu: &str| {
            format!("[target]\n{target}\n[[source]]\nname = \"eu\"\n{eu}\n")
        };
        let secret = |s: &str| Some(sqlfleet_conn::secret::Secret::new(s));
        // (target lines, source lines, the source's server or the error)
        let file = format!(
            "dsn = \"mysql://repl@eu:3306/\"\npassword_file = \"{}\"",
            pw.display()
        );
        let rows: Vec<(&str, String, Result<Server, &str>)> = vec![
            (
                "sandbox = \"hub\"",
                file.clone(),
                Ok(Server::Dsn {
                    dsn: "mysql://repl@eu:3306/".into(),
                    password: secret("s3cret"),
                }),
            ),
            (
                "sandbox = \"hub\"",
                "dsn = \"mysql://repl@eu/\"\npassword_env = \"SQLFLEET_TEST_US_PW\"".into(),
                Ok(Server::Dsn {
                    dsn: "mysql://repl@eu/".into(),
                    password: secret("from-env"),
                }),
            ),
            (
                "sandbox = \"hub\"",
                "dsn = \"mysql://repl:inline@eu/\"".into(),
                Ok(Server::Dsn {
                    dsn: "mysql://repl:inline@eu/".into(),
                    password: None,
                }),
            ),
            (
                "sandbox = \"hub\"",
                "sandbox = \"eu\"".into(),
                Ok(Server::Sandbox("eu".into())),
            ),
            (
                "sandbox = \"hub\"",
                format!(
                    "dsn = \"mysql://repl:inline@eu/\"\npassword_file = \"{}\"",
                    pw.display()
                ),
                Err("give the password one way"),
            ),
            (
                "sandbox = \"hub\"",
                "dsn = \"mysql://repl@eu/\"\npassword_env = \"SQLFLEET_TEST_UNSET_PW\"".into(),
                Err("$SQLFLEET_TEST_UNSET_PW is not set"),
            ),
            (
                "sandbox = \"hub\"",
                "dsn = \"mysql://repl@eu/\"\npassword_file = \"/nonexistent/pw\"".into(),
                Err("password_file /nonexistent/pw"),
            ),
            (
                "sandbox = \"hub\"",
                "sandbox = \"eu\"\ndsn = \"mysql://h/\"".into(),
                Err("not both"),
            ),
            (
                "sandbox = \"hub\"",
                "sandbox = \"eu\"\npassword_env = \"X\"".into(),
                Err("has its own password"),
            ),
            (
                "sandbox = \"hub\"",
                "include = [\"a\"]".into(),
                Err("source 'eu': no server"),
            ),
            ("", "sandbox = \"eu\"".into(), Err("[target]: no server")),
            (
                "sandbox = \"h b\"",
                "sandbox = \"eu\"".into(),
                Err("use letters"),
            ),
        ];
        for (target, eu, want) in rows {
            let text = base(target, &eu);
            match (parse(&text), want) {
                (Ok(c), Ok(w)) => assert_eq!(c.sources[0].server, w, "{text}"),
                (Err(e), Err(w)) => {
                    let e = e.to_string();
                    assert!(e.contains(w), "{text}: {e} should say {w}");
                    assert!(!e.contains("s3cret") && !e.contains("inline"), "{e}");
                }
                (got, w) => panic!("{text}: {got:?}, want {w:?}"),
            }
        }
        assert!(!Server::Dsn {
            dsn: "mysql://repl:inline@eu/".into(),
            password: None
        }
        .describe()
        .contains("inline"));
    }

    #[test]
    fn a_database_named_like_a_rename_target_collides() {
        let mut r = BTreeMap::new();
        r.insert("app".to_string(), "app_eu".to_string());
        let m = DbMap::new(&[], &[], &r);
        assert_eq!(m.collides("app_eu"), Some("app"));
        assert_eq!(m.collides("app"), None);
        assert_eq!(m.collides("other"), None);
        let m = DbMap::new(&[], &["app_eu".to_string()], &r);
        assert_eq!(m.collides("app_eu"), None, "excluded: never written");
    }

    #[test]
    fn the_target_databases_written_are_the_included_ones_and_the_renamed_onto() {
        let mut r = BTreeMap::new();
        r.insert("app".to_string(), "app_eu".to_string());
        r.insert("old".to_string(), "old_eu".to_string());
        let m = DbMap::new(
            &["app*".to_string(), "shop".to_string()],
            &["old".to_string()],
            &r,
        );
        // (target database, written into)
        for (db, want) in [
            ("app_eu", true),
            ("shop", true),
            ("app2", true),
            // `app` is written into app_eu, not under its own name.
            ("app", false),
            // Renamed onto, but excluded at the source.
            ("old_eu", false),
            ("other", false),
            ("mysql", false),
        ] {
            assert_eq!(m.writes_into(db), want, "{db}");
        }
    }

    #[test]
    fn globs() {
        assert!(glob("app*", "app"));
        assert!(glob("app*", "app_eu"));
        assert!(glob("a?p", "app"));
        assert!(glob("*_eu", "shop_eu"));
        assert!(!glob("app", "apps"));
        assert!(!glob("*_eu", "shop_us"));
        assert!(glob("*", ""));
    }

    #[test]
    fn starts() {
        assert_eq!(
            Start::parse("file:mysql-bin.000003:4"),
            Ok(Start::File {
                file: "mysql-bin.000003".into(),
                pos: 4
            })
        );
        assert!(Start::parse("file:x").is_err());
    }
}

//! The handle of an existing sandbox: where it lives, its nodes, its
//! password and targets, stopping and removing it. The cluster, promotion,
//! status and `up` rooms build on it; it imports none of them.

use std::path::{Path, PathBuf};

use sqlfleet_conn::resolve::check_sandbox_name;
use sqlfleet_conn::{home, Endpoint, PasswordSpec, Secret, SslMode, Target};

use crate::error::{Result, SandboxError};
use crate::meta::{self, Layout, Meta, NodeMeta};
use crate::node::{self, Binaries};
use crate::ports;

/// The sandbox used when none is named.
pub const DEFAULT_NAME: &str = "default";
/// Where new sandboxes look for free ports.
pub const FIRST_PORT: u16 = 3307;

/// An existing sandbox.
#[derive(Debug, Clone)]
pub struct Sandbox {
    pub home: PathBuf,
    pub meta: Meta,
    pub layout: Layout,
}

/// Names of all sandboxes under `home`.
pub fn names(home: &Path) -> Result<Vec<String>> {
    let dir = home.join("sandboxes");
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(SandboxError::io(&dir)(e)),
    };
    let mut out: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("sandbox.toml").is_file())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    out.sort();
    Ok(out)
}

impl Sandbox {
    /// The server programs this sandbox runs: the mariadbd it was made
    /// with. `asked` (a `--mariadbd` given again) must be that one: a data
    /// directory is never handed to another server version.
    pub fn binaries(&self, asked: Option<&Path>) -> Result<Binaries> {
        let have = match &self.meta.mariadbd {
            Some(p) => Binaries::find(Some(p))?,
            None => Binaries::system()?,
        };
        if let Some(want) = asked {
            let same = std::fs::canonicalize(want).is_ok_and(|w| w == have.mariadbd);
            if !same {
                return Err(SandboxError::MariadbdChange {
                    name: self.meta.name.clone(),
                    have: match &self.meta.mariadbd {
                        Some(p) => p.display().to_string(),
                        None => format!("the system's mariadbd ({})", have.mariadbd.display()),
                    },
                    want: want.to_owned(),
                });
            }
        }
        Ok(have)
    }

    /// Opens an existing sandbox by name.
    pub fn open(home: &Path, name: &str) -> Result<Sandbox> {
        check_sandbox_name(name)?;
        let layout = Layout {
            dir: home::sandbox_dir(home, name),
        };
        if !layout.meta().is_file() {
            return Err(SandboxError::Unknown(name.to_string()));
        }
        let meta = Meta::load(&layout.meta())?;
        Ok(Sandbox {
            home: home.to_owned(),
            meta,
            layout,
        })
    }

    pub fn name(&self) -> &str {
        &self.meta.name
    }

    pub fn password(&self) -> Result<Secret> {
        let p = self.layout.password_file();
        let text = std::fs::read_to_string(&p).map_err(SandboxError::io(&p))?;
        Ok(Secret::new(text.trim_end_matches('\n')))
    }

    /// A TCP target for root on `node`.
    pub fn target(&self, node: &NodeMeta) -> Result<Target> {
        Ok(Target {
            endpoint: Endpoint::Tcp {
                host: "127.0.0.1".into(),
                port: node.port,
            },
            user: "root".into(),
            password: Some(PasswordSpec::Given(self.password()?)),
            database: None,
            ssl_mode: SslMode::Disabled,
            ssl_ca: None,
            ssl_cert: None,
            ssl_key: None,
            tls: Default::default(),
            charset: None,
        })
    }

    /// The client option file for the primary.
    pub fn defaults_file(&self) -> PathBuf {
        self.layout.client_cnf(self.meta.primary())
    }

    /// Stops every node, replicas first. Returns the nodes that were running.
    pub async fn down(&self) -> Result<Vec<String>> {
        let mut stopped = Vec::new();
        for n in self.meta.nodes.iter().rev() {
            let label = self.label(n);
            if node::stop(&label, &self.layout.node(n)).await? {
                stopped.push(n.name.clone());
            }
        }
        Ok(stopped)
    }

    /// Stops the sandbox and deletes its directory.
    pub async fn destroy(self) -> Result<()> {
        self.down().await?;
        // Its ports are free for others once it is down.
        for n in &self.meta.nodes {
            for p in
                std::iter::once(n.port).chain(n.galera.iter().flat_map(|g| [g.gcomm, g.ist, g.sst]))
            {
                ports::release(p, &self.layout.dir);
            }
        }
        std::fs::remove_dir_all(&self.layout.dir).map_err(SandboxError::io(&self.layout.dir))
    }

    pub fn label(&self, n: &NodeMeta) -> String {
        format!(
            "sandbox '{}' {} (127.0.0.1:{})",
            self.meta.name, n.name, n.port
        )
    }

    pub(crate) fn write_client_files(&self, password: &Secret) -> Result<()> {
        // Quoted, so a '#' in a path is not read as a comment.
        let quoted = |v: &str| format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""));
        for n in &self.meta.nodes {
            let text = format!(
                "# sqlfleet sandbox '{}' {}: use with --defaults-file\n[client]\nhost = 127.0.0.1\nport = {}\nuser = root\npassword = {}\nsocket = {}\ndefault-character-set = utf8mb4\n",
                self.meta.name,
                n.name,
                n.port,
                quoted(password.expose()),
                quoted(&self.layout.node(n).socket().display().to_string())
            );
            meta::write_atomic(&self.layout.client_cnf(n), text.as_bytes(), 0o600)?;
        }
        Ok(())
    }
}

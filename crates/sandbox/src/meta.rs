//! What a sandbox is made of, kept in `sandbox.toml` in its directory, and
//! where each node's files live.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Result, SandboxError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Primary,
    Replica,
    /// A node of a Galera cluster: every member takes writes.
    Member,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Primary => "primary",
            Role::Replica => "replica",
            Role::Member => "member",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeMeta {
    /// `node1`, `node2`, ... (`primary`, `replica1`, ... in sandboxes
    /// made before names were role-neutral)
    pub name: String,
    pub port: u16,
    pub server_id: u32,
    pub role: Role,
    /// A cluster member's other ports (Galera sandboxes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub galera: Option<crate::galera::GaleraPorts>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    pub name: String,
    /// GTID domain (gtid_domain_id) of every node; 0 by default.
    #[serde(default)]
    pub domain: u32,
    /// The primary first, then replicas.
    pub nodes: Vec<NodeMeta>,
    /// Extra server options (`key=value`) written into every node's config.
    #[serde(default)]
    pub options: Vec<String>,
    /// The mariadbd this sandbox was made with when one was named
    /// (`--mariadbd`, `$SQLFLEET_MARIADBD`); absent: the system's. Its data
    /// directories are that server's, so every later start uses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mariadbd: Option<std::path::PathBuf>,
}

impl Meta {
    /// The primary; in a Galera cluster, the first node (the one a new
    /// cluster bootstraps from).
    pub fn primary(&self) -> &NodeMeta {
        &self.nodes[0]
    }

    /// True for a Galera cluster (every node a member).
    pub fn galera(&self) -> bool {
        self.nodes.first().is_some_and(|n| n.role == Role::Member)
    }

    pub fn replicas(&self) -> impl Iterator<Item = &NodeMeta> {
        self.nodes.iter().filter(|n| n.role == Role::Replica)
    }

    pub fn load(path: &Path) -> Result<Meta> {
        let text = std::fs::read_to_string(path).map_err(SandboxError::io(path))?;
        let meta: Meta = toml::from_str(&text).map_err(|e| SandboxError::Meta {
            path: path.to_owned(),
            what: e
                .to_string()
                .lines()
                .next()
                .unwrap_or("invalid")
                .to_string(),
        })?;
        let members = meta.nodes.iter().filter(|n| n.role == Role::Member).count();
        let cluster = members > 0 && members == meta.nodes.len();
        if !cluster && meta.nodes.first().map(|n| n.role) != Some(Role::Primary) {
            return Err(SandboxError::Meta {
                path: path.to_owned(),
                what: "the first node must be the primary".into(),
            });
        }
        if members > 0 && (!cluster || meta.nodes.iter().any(|n| n.galera.is_none())) {
            return Err(SandboxError::Meta {
                path: path.to_owned(),
                what: "a cluster's nodes must all be members, each with its galera ports".into(),
            });
        }
        Ok(meta)
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        let text = toml::to_string_pretty(self).map_err(|e| SandboxError::Meta {
            path: path.to_owned(),
            what: e.to_string(),
        })?;
        write_atomic(path, text.as_bytes(), 0o644)
    }
}

/// Where a sandbox's files are.
#[derive(Debug, Clone)]
pub struct Layout {
    pub dir: PathBuf,
}

impl Layout {
    pub fn meta(&self) -> PathBuf {
        self.dir.join("sandbox.toml")
    }
    pub fn password_file(&self) -> PathBuf {
        self.dir.join("root.pw")
    }
    /// The client option file for `node` (the primary's, or a cluster's
    /// first node's, is `client.cnf`).
    pub fn client_cnf(&self, node: &NodeMeta) -> PathBuf {
        match node.role {
            Role::Primary => self.dir.join("client.cnf"),
            Role::Member if node.name == "node1" => self.dir.join("client.cnf"),
            Role::Replica | Role::Member => self.dir.join(format!("client-{}.cnf", node.name)),
        }
    }
    pub fn node(&self, node: &NodeMeta) -> NodeLayout {
        NodeLayout {
            dir: self.dir.join(&node.name),
        }
    }
}

/// Where one server's files are.
#[derive(Debug, Clone)]
pub struct NodeLayout {
    pub dir: PathBuf,
}

impl NodeLayout {
    pub fn datadir(&self) -> PathBuf {
        self.dir.join("data")
    }
    pub fn tmpdir(&self) -> PathBuf {
        self.dir.join("tmp")
    }
    pub fn server_cnf(&self) -> PathBuf {
        self.dir.join("my.cnf")
    }
    pub fn socket(&self) -> PathBuf {
        self.dir.join("mysqld.sock")
    }
    pub fn pid_file(&self) -> PathBuf {
        self.dir.join("mariadbd.pid")
    }
    pub fn error_log(&self) -> PathBuf {
        self.dir.join("error.log")
    }
    /// Present once the node's users and replication are set up.
    pub fn setup_marker(&self) -> PathBuf {
        self.dir.join(".setup-done")
    }
}

/// Writes a file through a temporary name and a rename, with `mode`.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let tmp = path.with_extension("tmp~");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(SandboxError::io(&tmp))?;
    f.write_all(bytes).map_err(SandboxError::io(&tmp))?;
    f.sync_all().map_err(SandboxError::io(&tmp))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(SandboxError::io(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_validation() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("sandbox.toml");
        let m = Meta {
            name: "x".into(),
            domain: 0,
            nodes: vec![
                NodeMeta {
                    name: "node1".into(),
                    port: 4000,
                    server_id: 1,
                    role: Role::Primary,
                    galera: None,
                },
                NodeMeta {
                    name: "node2".into(),
                    port: 4001,
                    server_id: 2,
                    role: Role::Replica,
                    galera: None,
                },
            ],
            options: vec!["local_infile=0".into()],
            mariadbd: None,
        };
        m.save(&p).expect("save");
        assert_eq!(Meta::load(&p).expect("load"), m);
        // A sandbox of a named server keeps its path.
        let named = Meta {
            mariadbd: Some("/opt/mariadb-11.4/bin/mariadbd".into()),
            ..m.clone()
        };
        named.save(&p).expect("save");
        assert_eq!(Meta::load(&p).expect("load"), named);
        std::fs::write(&p, "name = 1\n").expect("write");
        let e = Meta::load(&p).expect_err("bad").to_string();
        assert!(e.starts_with(&p.display().to_string()), "{e}");
    }
}

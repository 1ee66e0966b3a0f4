//! Sandboxes as a whole: options, `up` (new or started again), the
//! handle with its nodes' status, and what a new one's metadata holds.

use mysql_async::prelude::Queryable;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::distributions::{Alphanumeric, DistString};
use sqlfleet_conn::resolve::check_sandbox_name;
use sqlfleet_conn::{home, Endpoint, PasswordSpec, Secret, SslMode, Target};

use crate::error::{Result, SandboxError};
use crate::meta::{Layout, Meta, NodeMeta, Role};
use crate::node::{self, Binaries};
use crate::setup::{self, ReplHealth};
use crate::{cluster, galera, meta, ports};

/// The sandbox used when none is named.
pub const DEFAULT_NAME: &str = "default";
/// Where new sandboxes look for free ports.
pub const FIRST_PORT: u16 = 3307;

/// What `up` should make or start.
#[derive(Debug, Clone, Default)]
pub struct UpOptions {
    pub name: String,
    /// The primary's port; replicas take the next ones. Chosen if absent.
    pub port: Option<u16>,
    /// Exact ports for every node (tests use kernel-chosen ones).
    pub ports: Option<Vec<u16>>,
    /// Number of replicas; for an existing sandbox, must match if given.
    pub replicas: Option<usize>,
    /// A Galera cluster of this many nodes instead of a primary and
    /// replicas; for an existing sandbox, must match if given.
    pub galera: Option<usize>,
    /// GTID domain of this sandbox's writes (gtid_domain_id), and server
    /// ids `domain*100 + 1..`: sandboxes with distinct domains are
    /// independent primaries one server can replicate from together.
    pub domain: Option<u32>,
    /// Extra server options, `key=value`.
    pub options: Vec<String>,
    /// Servers get SIGTERM when this process dies (test fixtures).
    pub die_with_parent: bool,
    /// Restart running servers when `options` change (else that is refused).
    pub restart: bool,
}

/// What `up` did.
#[derive(Debug, Clone)]
pub struct UpReport {
    pub sandbox: Sandbox,
    /// Nodes started by this call (the others were already running).
    pub started: Vec<String>,
    /// Nodes initialised by this call (new data directories).
    pub created: Vec<String>,
    pub elapsed: Duration,
}

/// An existing sandbox.
#[derive(Debug, Clone)]
pub struct Sandbox {
    pub home: PathBuf,
    pub meta: Meta,
    pub layout: Layout,
}

/// One node's state, for `list`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NodeStatus {
    pub sandbox: String,
    pub node: String,
    pub role: Role,
    pub port: u16,
    pub pid: Option<i32>,
    pub running: bool,
    /// Not running, and its pid file names a process that is gone: it
    /// died (kill -9, a crash) instead of being stopped.
    pub crashed_pid: Option<i32>,
    pub replication: Option<ReplHealth>,
    /// Transactions the primary has committed that this replica has not
    /// applied yet (by GTID, summed over replication domains).
    pub gtid_behind: Option<u64>,
    /// A cluster member's wsrep state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub galera: Option<galera::Health>,
    /// Set when the node runs but could not be asked about replication.
    pub error: Option<String>,
}

/// Transactions in `primary` (a GTID position) not yet in `applied`.
pub fn gtid_behind(primary: &str, applied: &str) -> u64 {
    let parse = |pos: &str| -> Vec<(u32, u64)> {
        pos.split(',')
            .filter_map(|g| {
                let mut it = g.trim().split('-');
                let domain = it.next()?.parse().ok()?;
                let _server = it.next()?;
                let seq = it.next()?.parse().ok()?;
                Some((domain, seq))
            })
            .collect()
    };
    let have = parse(applied);
    parse(primary)
        .into_iter()
        .map(|(d, seq)| {
            let got = have.iter().find(|(hd, _)| *hd == d).map_or(0, |(_, s)| *s);
            seq.saturating_sub(got)
        })
        .sum()
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

    /// Process and replication state of every node.
    pub async fn status(&self) -> Vec<NodeStatus> {
        let mut out = Vec::new();
        let password = self.password().ok();
        // What the primary has committed, to measure replicas against.
        let primary_pos: Option<String> = async {
            let p = self.meta.primary();
            let nl = self.layout.node(p);
            node::running_pid(&nl)?;
            let mut c = setup::root_conn(&self.label(p), &nl, password.as_ref())
                .await
                .ok()?;
            let v: Option<String> = c.query_first("SELECT @@gtid_binlog_pos").await.ok()?;
            let _ = c.disconnect().await;
            v
        }
        .await;
        for n in &self.meta.nodes {
            let nl = self.layout.node(n);
            let pid = node::running_pid(&nl);
            let mut st = NodeStatus {
                sandbox: self.meta.name.clone(),
                node: n.name.clone(),
                role: n.role,
                port: n.port,
                pid,
                running: pid.is_some(),
                crashed_pid: pid.is_none().then(|| node::stale_pid(&nl)).flatten(),
                replication: None,
                gtid_behind: None,
                galera: None,
                error: None,
            };
            if pid.is_some() && n.role == Role::Member {
                let label = self.label(n);
                let r = async {
                    let mut c = setup::root_conn(&label, &nl, password.as_ref()).await?;
                    let h = cluster::health(&mut c).await;
                    let _ = c.disconnect().await;
                    h.map_err(|e| SandboxError::Sql {
                        node: label.clone(),
                        what: e.to_string(),
                    })
                }
                .await;
                match r {
                    Ok(h) => st.galera = Some(h),
                    Err(e) => st.error = Some(e.to_string()),
                }
            }
            if pid.is_some() && n.role == Role::Replica {
                let label = self.label(n);
                let r = async {
                    let mut c = setup::root_conn(&label, &nl, password.as_ref()).await?;
                    let h = setup::repl_health(&mut c, &label).await;
                    let applied: Option<String> = c
                        .query_first("SELECT @@gtid_slave_pos")
                        .await
                        .ok()
                        .flatten();
                    let _ = c.disconnect().await;
                    h.map(|h| (h, applied))
                }
                .await;
                match r {
                    Ok((h, applied)) => {
                        st.replication = h;
                        st.gtid_behind = primary_pos
                            .as_deref()
                            .map(|p| gtid_behind(p, applied.as_deref().unwrap_or("")));
                    }
                    Err(e) => st.error = Some(e.to_string()),
                }
            }
            out.push(st);
        }
        out
    }

    pub(crate) fn write_client_files(&self, password: &Secret) -> Result<()> {
        for n in &self.meta.nodes {
            let text = format!(
                "# sqlfleet sandbox '{}' {}: use with --defaults-file\n[client]\nhost = 127.0.0.1\nport = {}\nuser = root\npassword = \"{}\"\nsocket = {}\ndefault-character-set = utf8mb4\n",
                self.meta.name,
                n.name,
                n.port,
                password.expose().replace('\\', "\\\\").replace('"', "\\\""),
                self.layout.node(n).socket().display()
            );
            meta::write_atomic(&self.layout.client_cnf(n), text.as_bytes(), 0o600)?;
        }
        Ok(())
    }
}

fn new_meta(home: &Path, opts: &UpOptions) -> Result<Meta> {
    let count = opts.galera.unwrap_or(opts.replicas.unwrap_or(0) + 1);
    if opts.galera.is_some_and(|n| n < 1) {
        return Err(SandboxError::Sql {
            node: format!("sandbox '{}'", opts.name),
            what: "a Galera cluster needs at least one node (three to survive the loss of one)"
                .into(),
        });
    }
    let mut taken = Vec::new();
    for n in names(home)? {
        if let Ok(s) = Sandbox::open(home, &n) {
            for n in &s.meta.nodes {
                taken.push(n.port);
                taken.extend(n.galera.iter().flat_map(|g| [g.gcomm, g.ist, g.sst]));
            }
        }
    }
    // Every port is reserved machine-wide for this sandbox (`ports`).
    let owner = home::sandbox_dir(home, &opts.name);
    // The directory exists before any port is reserved for it: a
    // reservation whose directory is missing is one whose sandbox is gone
    // (`ports::reserve` takes those back), never one being made.
    std::fs::create_dir_all(&owner).map_err(SandboxError::io(&owner))?;
    let fixed = |from: u16, n: usize| -> Result<Vec<u16>> {
        let ports: Vec<u16> = (0..n as u16).map(|i| from.saturating_add(i)).collect();
        for p in &ports {
            ports::ensure_free(*p)?;
        }
        ports::reserve_all(&ports, &owner)?;
        Ok(ports)
    };
    let ports: Vec<u16> = match (&opts.ports, opts.port) {
        (Some(p), _) => {
            ports::reserve_all(p, &owner)?;
            p.clone()
        }
        (None, Some(base)) => fixed(base, count)?,
        (None, None) => {
            let base = ports::find_block(FIRST_PORT, count, &taken, &owner)
                .ok_or(SandboxError::PortInUse { port: FIRST_PORT })?;
            (0..count as u16).map(|i| base + i).collect()
        }
    };
    // A cluster's group, IST and SST ports: kernel-chosen when the SQL
    // ports are (tests); right after the SQL ports with --port (one flag
    // moves the whole block); else a block from Galera's usual 4567.
    let cluster_ports: Option<Vec<u16>> = match (opts.galera, &opts.ports, opts.port) {
        (None, _, _) => None,
        (Some(_), Some(_), _) => {
            let p = ports::ephemeral(3 * count)?;
            ports::reserve_all(&p, &owner)?;
            Some(p)
        }
        (Some(_), None, Some(base)) => Some(fixed(base.saturating_add(count as u16), 3 * count)?),
        (Some(_), None, None) => {
            taken.extend(&ports);
            let base = ports::find_block(4567, 3 * count, &taken, &owner)
                .ok_or(SandboxError::PortInUse { port: 4567 })?;
            Some((0..3 * count as u16).map(|i| base + i).collect())
        }
    };
    let nodes = ports
        .iter()
        .enumerate()
        .map(|(i, &port)| NodeMeta {
            // Role-neutral: a promotion changes roles, never names.
            name: format!("node{}", i + 1),
            port,
            // A cluster's members share one server id: Galera's GTIDs
            // are the same on every node.
            server_id: opts.domain.unwrap_or(0) * 100
                + if cluster_ports.is_some() {
                    1
                } else {
                    i as u32 + 1
                },
            role: match (&cluster_ports, i) {
                (Some(_), _) => Role::Member,
                (None, 0) => Role::Primary,
                (None, _) => Role::Replica,
            },
            galera: cluster_ports.as_ref().map(|p| galera::GaleraPorts {
                gcomm: p[3 * i],
                ist: p[3 * i + 1],
                sst: p[3 * i + 2],
            }),
        })
        .collect();
    Ok(Meta {
        name: opts.name.clone(),
        domain: opts.domain.unwrap_or(0),
        nodes,
        options: opts.options.clone(),
    })
}

/// Creates the sandbox if needed and starts every node that is not
/// running; returns when all are ready and replicas replicate. A sandbox
/// this call began and could not start is removed again (its error says
/// why), so nothing is left that `list` does not show.
pub async fn up(home: &Path, opts: &UpOptions) -> Result<UpReport> {
    check_sandbox_name(&opts.name)?;
    let dir = home::sandbox_dir(home, &opts.name);
    let existed = dir.join("sandbox.toml").is_file();
    let r = up_now(home, opts).await;
    if r.is_err() && !existed {
        if let Ok(sb) = Sandbox::open(home, &opts.name) {
            let _ = sb.down().await;
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    r
}

/// An existing sandbox for `up`: refused when the options ask for
/// another shape, domain or port; new server options saved (the servers
/// restarted with `--restart`).
async fn reopen(
    home: &Path,
    opts: &UpOptions,
    bins: &Binaries,
    layout: &Layout,
) -> Result<Sandbox> {
    let mut sb = Sandbox::open(home, &opts.name)?;
    if let Some(want) = opts.galera {
        if !sb.meta.galera() || sb.meta.nodes.len() != want {
            return Err(SandboxError::ClusterShape {
                name: opts.name.clone(),
                have: sb.meta.galera().then_some(sb.meta.nodes.len()),
            });
        }
    } else if sb.meta.galera() && opts.replicas.is_some() {
        return Err(SandboxError::ClusterShape {
            name: opts.name.clone(),
            have: Some(sb.meta.nodes.len()),
        });
    }
    let have = sb.meta.nodes.len() - 1;
    if let Some(want) = opts.replicas.filter(|w| *w != have && !sb.meta.galera()) {
        return Err(SandboxError::ReplicaCount {
            name: opts.name.clone(),
            have,
            want,
        });
    }
    if opts.domain.is_some_and(|d| d != sb.meta.domain) {
        return Err(SandboxError::DomainChange {
            name: opts.name.clone(),
            have: sb.meta.domain,
        });
    }
    if let Some(p) = opts.port.filter(|p| *p != sb.meta.primary().port) {
        let _ = p;
        return Err(SandboxError::PortChange {
            name: opts.name.clone(),
            have: sb.meta.primary().port,
        });
    }
    if !opts.options.is_empty() && opts.options != sb.meta.options {
        // Checked before anything is saved: a refused option must not
        // break every later `up`.
        node::check_options(bins, &opts.options)?;
        let running = sb
            .meta
            .nodes
            .iter()
            .any(|n| node::running_pid(&sb.layout.node(n)).is_some());
        if running && !opts.restart {
            return Err(SandboxError::OptionsNeedRestart {
                name: opts.name.clone(),
            });
        }
        if running {
            sb.down().await?;
        }
        sb.meta.options = opts.options.clone();
        sb.meta.save(&layout.meta())?;
    }
    Ok(sb)
}

/// A new sandbox's files: its password, its description, the client's
/// option files.
fn create(home: &Path, opts: &UpOptions, bins: &Binaries, layout: &Layout) -> Result<Sandbox> {
    node::check_options(bins, &opts.options)?;
    let meta = new_meta(home, opts)?;
    std::fs::create_dir_all(&layout.dir).map_err(SandboxError::io(&layout.dir))?;
    let password = Secret::new(Alphanumeric.sample_string(&mut rand::thread_rng(), 24));
    meta::write_atomic(&layout.password_file(), password.expose().as_bytes(), 0o600)?;
    meta.save(&layout.meta())?;
    let sb = Sandbox {
        home: home.to_owned(),
        meta,
        layout: layout.clone(),
    };
    sb.write_client_files(&password)?;
    Ok(sb)
}

async fn up_now(home: &Path, opts: &UpOptions) -> Result<UpReport> {
    let t0 = Instant::now();
    let bins = Binaries::find()?;
    let layout = Layout {
        dir: home::sandbox_dir(home, &opts.name),
    };
    let sandbox = if layout.meta().is_file() {
        reopen(home, opts, &bins, &layout).await?
    } else {
        create(home, opts, &bins, &layout)?
    };
    let password = sandbox.password()?;
    if sandbox.meta.galera() {
        let (started, created) =
            cluster::up(&sandbox, &bins, &password, opts.die_with_parent).await?;
        return Ok(UpReport {
            sandbox,
            started,
            created,
            elapsed: t0.elapsed(),
        });
    }

    // Initialise and start every stopped node at once.
    let mut created = Vec::new();
    let mut started = Vec::new();
    let mut pending = tokio::task::JoinSet::new();
    for n in sandbox.meta.nodes.clone() {
        let nl = sandbox.layout.node(&n);
        if node::running_pid(&nl).is_some() {
            continue;
        }
        let label = sandbox.label(&n);
        let fresh = !nl.datadir().join("mysql").is_dir();
        if fresh {
            created.push(n.name.clone());
        }
        started.push(n.name.clone());
        let bins = bins.clone();
        let mut options = sandbox.meta.options.clone();
        if sandbox.meta.domain != 0 {
            // First, so a user's own --option still has the last word.
            options.insert(0, format!("gtid-domain-id={}", sandbox.meta.domain));
        }
        let die = opts.die_with_parent;
        pending.spawn(async move {
            if fresh {
                let (b, l, nl2) = (bins.clone(), label.clone(), nl.clone());
                tokio::task::spawn_blocking(move || node::init_datadir(&b, &l, &nl2))
                    .await
                    .map_err(|e| SandboxError::Sql {
                        node: label.clone(),
                        what: format!("init task failed: {e}"),
                    })??;
            }
            let mut child = node::spawn(&bins, &n, &nl, &options, &[], die)?;
            node::wait_ready(&mut child, &label, n.port, &nl).await?;
            Ok::<_, SandboxError>(())
        });
    }
    let mut first_err = None;
    while let Some(r) = pending.join_next().await {
        let r = r.unwrap_or_else(|e| {
            Err(SandboxError::Sql {
                node: opts.name.clone(),
                what: format!("start task failed: {e}"),
            })
        });
        if let Err(e) = r {
            first_err.get_or_insert(e);
        }
    }
    if let Some(e) = first_err {
        // Leave nothing half-started behind.
        let _ = sandbox.down().await;
        return Err(e);
    }

    // Users first (all nodes), then replication.
    for n in &sandbox.meta.nodes {
        let nl = sandbox.layout.node(n);
        if !nl.setup_marker().exists() {
            setup::secure_users(&sandbox.label(n), &nl, &password).await?;
            if n.role == Role::Replica {
                setup::start_replication(&sandbox.label(n), &nl, &password, sandbox.meta.primary())
                    .await?;
            }
            meta::write_atomic(&nl.setup_marker(), b"", 0o644)?;
        }
    }
    // A node demoted while it was down (sandbox promote) has never been
    // pointed at the new primary.
    for n in sandbox.meta.replicas() {
        let nl = sandbox.layout.node(n);
        let label = sandbox.label(n);
        let mut c = setup::root_conn(&label, &nl, Some(&password)).await?;
        let configured = setup::repl_health(&mut c, &label).await?.is_some();
        let _ = c.disconnect().await;
        if !configured {
            setup::start_replication(&label, &nl, &password, sandbox.meta.primary()).await?;
        }
    }
    for n in sandbox.meta.replicas() {
        setup::wait_replicating(&sandbox.label(n), &sandbox.layout.node(n), &password).await?;
    }
    Ok(UpReport {
        sandbox,
        started,
        created,
        elapsed: t0.elapsed(),
    })
}

#[cfg(test)]
mod gtid_tests {
    #[test]
    fn transactions_behind_by_domain() {
        use super::gtid_behind;
        assert_eq!(gtid_behind("0-1-100", "0-1-100"), 0);
        assert_eq!(gtid_behind("0-1-100", "0-1-40"), 60);
        assert_eq!(gtid_behind("0-1-100,1-2-5", "0-1-100"), 5);
        assert_eq!(gtid_behind("0-1-10", ""), 10);
        assert_eq!(gtid_behind("", "0-1-10"), 0);
    }
}

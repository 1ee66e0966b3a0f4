//! `up`: a new sandbox made (its metadata: ports, roles, server ids) or an
//! existing one started again, every node ready and replicating.

use std::path::Path;
use std::time::{Duration, Instant};

use rand::distributions::{Alphanumeric, DistString};
use sqlfleet_conn::resolve::check_sandbox_name;
use sqlfleet_conn::{home, Secret};

use crate::error::{Result, SandboxError};
use crate::handle::{names, Sandbox, FIRST_PORT};
use crate::meta::{Layout, Meta, NodeMeta, Role};
use crate::node::{self, Binaries};
use crate::setup;
use crate::{cluster, converge, galera, meta, ports};

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
    /// The mariadbd to make the sandbox with (else `$SQLFLEET_MARIADBD`,
    /// else the system's); recorded, and an existing sandbox keeps its own.
    pub mariadbd: Option<std::path::PathBuf>,
    /// Servers get SIGTERM when this process dies (test fixtures).
    pub die_with_parent: bool,
    /// Restart running servers when `options` change (else that is refused).
    pub restart: bool,
    /// Ctrl-C or SIGTERM: the servers still starting are stopped, and a
    /// sandbox this call was making is removed.
    pub interrupt: crate::Interrupt,
    /// Called with the sandbox's name when another command holds its lock
    /// (this call waits for it: see [`crate::lock`]).
    pub waiting: Option<fn(&str)>,
}

/// What `up` did.
#[derive(Debug, Clone)]
pub struct UpReport {
    pub sandbox: Sandbox,
    /// Nodes started by this call (the others were already running).
    pub started: Vec<String>,
    /// Nodes initialised by this call (new data directories).
    pub created: Vec<String>,
    /// What was brought back to the role `sandbox.toml` gives a node
    /// (after a promotion that stopped part way): "node: what was wrong".
    pub repaired: Vec<String>,
    pub elapsed: Duration,
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
        mariadbd: None,
    })
}

/// Creates the sandbox if needed and starts every node that is not
/// running; returns when all are ready and replicas replicate. A sandbox
/// this call began and could not start is removed again (its error says
/// why), so nothing is left that `list` does not show.
pub async fn up(home: &Path, opts: &UpOptions) -> Result<UpReport> {
    check_sandbox_name(&opts.name)?;
    let _one_at_a_time = crate::lock(home, &opts.name, &opts.interrupt, || {
        if let Some(w) = opts.waiting {
            w(&opts.name)
        }
    })
    .await
    .map_err(|e| match e {
        SandboxError::Interrupted { .. } => SandboxError::Interrupted {
            what: format!(
                "sandbox '{}': interrupted while waiting for another sqlfleet command on it; \
                 nothing was changed",
                opts.name
            ),
        },
        e => e,
    })?;
    let dir = home::sandbox_dir(home, &opts.name);
    let existed = dir.join("sandbox.toml").is_file();
    let r = up_now(home, opts).await;
    if r.is_err() && !existed {
        if let Ok(sb) = Sandbox::open(home, &opts.name) {
            let _ = sb.down().await;
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    let name = &opts.name;
    r.map_err(|e| match e {
        SandboxError::Interrupted { .. } if existed => SandboxError::Interrupted {
            what: format!(
                "sandbox '{name}': interrupted before every node was ready; the servers \
                 still starting were stopped ('sqlfleet sandbox list' shows each node; \
                 'sqlfleet sandbox up --name {name}' finishes it)"
            ),
        },
        SandboxError::Interrupted { .. } => SandboxError::Interrupted {
            what: format!(
                "sandbox '{name}': interrupted while it was being made; its servers were \
                 stopped and its directory removed (nothing is left)"
            ),
        },
        e => e,
    })
}

/// An existing sandbox for `up`: refused when the options ask for
/// another shape, domain or port; new server options saved (the servers
/// restarted with `--restart`).
async fn reopen(
    mut sb: Sandbox,
    opts: &UpOptions,
    bins: &Binaries,
    layout: &Layout,
) -> Result<Sandbox> {
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
    let meta = Meta {
        mariadbd: bins.named.then(|| bins.mariadbd.clone()),
        ..new_meta(home, opts)?
    };
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
    let layout = Layout {
        dir: home::sandbox_dir(home, &opts.name),
    };
    let (sandbox, bins) = if layout.meta().is_file() {
        let sb = Sandbox::open(home, &opts.name)?;
        let bins = sb.binaries(opts.mariadbd.as_deref())?;
        (reopen(sb, opts, &bins, &layout).await?, bins)
    } else {
        let bins = Binaries::find(opts.mariadbd.as_deref())?;
        (create(home, opts, &bins, &layout)?, bins)
    };
    let password = sandbox.password()?;
    let how = node::Starting {
        die_with_parent: opts.die_with_parent,
        stop: opts.interrupt.clone(),
    };
    how.stop.check()?;
    if sandbox.meta.galera() {
        let (started, created) = cluster::up(&sandbox, &bins, &password, &how).await?;
        return Ok(UpReport {
            sandbox,
            started,
            created,
            repaired: Vec::new(),
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
        let how = how.clone();
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
            how.stop.check()?;
            let mut child = node::spawn(&bins, &n, &nl, &options, &[], how.die_with_parent)?;
            node::wait_ready(&mut child, &label, n.port, &nl, &how.stop).await?;
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
        how.stop.check()?;
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
    how.stop.check()?;
    let repaired = repair(&sandbox, &password).await?;
    for n in sandbox.meta.replicas() {
        let nl = sandbox.layout.node(n);
        setup::wait_replicating(&sandbox.label(n), &nl, &password, &how.stop).await?;
    }
    Ok(UpReport {
        sandbox,
        started,
        created,
        repaired,
        elapsed: t0.elapsed(),
    })
}

/// Brings every running node to the role `sandbox.toml` gives it (see
/// [`converge`]): the primary first, so replicas point at a server that
/// takes writes. Returns what was repaired, a line per node and fix.
async fn repair(sb: &Sandbox, password: &Secret) -> Result<Vec<String>> {
    let primary = sb.meta.primary().clone();
    let mut repaired = Vec::new();
    for n in std::iter::once(&primary).chain(sb.meta.replicas()) {
        let nl = sb.layout.node(n);
        let label = sb.label(n);
        let mut c = setup::root_conn(&label, &nl, Some(password)).await?;
        let (seen, _) = setup::seen(&mut c, &label).await?;
        let _ = c.disconnect().await;
        for fix in converge::fixes(n.role, primary.port, &seen, &sb.meta.options) {
            setup::apply_fix(&label, &nl, password, &primary, fix).await?;
            repaired.push(format!("{}: {}", n.name, fix.what()));
        }
    }
    Ok(repaired)
}

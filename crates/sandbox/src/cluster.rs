//! Starting a Galera sandbox: the order in which its nodes come up. A new
//! cluster bootstraps from node1 (the only node `mariadb-install-db`
//! initialises; the others join empty and receive a full copy by rsync
//! state transfer). A cluster that is wholly down bootstraps from the node
//! that left last, or else the most advanced one (by `grastate.dat`, or by
//! `--wsrep-recover` for a node that did not stop cleanly). Every other
//! stopped node then joins, one at a time, from the position it saved or
//! recovered, so it catches up by incremental transfer (IST) when the
//! donor's cache still holds what it missed. Nodes left running outside
//! a Primary component (quorum lost) are stopped first and the cluster
//! restarts from its most advanced node. What is decided lives in
//! [`crate::galera`]; this file runs the programs.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use sqlfleet_conn::Secret;

use crate::error::{Result, SandboxError};
use crate::galera::{self, Health, Saved};
use crate::handle::Sandbox;
use crate::meta::{NodeLayout, NodeMeta};
use crate::node::{self, Binaries};
use crate::setup;

/// How long a node may take from ready to Synced (a state transfer of a
/// sandbox's data).
const SYNC_TIMEOUT: Duration = Duration::from_secs(180);

/// The option lines of a cluster member: the wsrep settings, then the
/// user's own (which have the last word).
pub fn member_options(sb: &Sandbox, n: &NodeMeta) -> Vec<String> {
    let members: Vec<u16> = sb
        .meta
        .nodes
        .iter()
        .filter_map(|m| m.galera.map(|g| g.gcomm))
        .collect();
    let mut out = match n.galera {
        Some(own) => galera::options(
            &sb.meta.name,
            &n.name,
            n.port,
            own,
            &members,
            sb.meta.domain,
        ),
        None => Vec::new(),
    };
    out.extend(sb.meta.options.iter().cloned());
    out
}

/// Starts every stopped node of a cluster; returns the names started and
/// those initialised. Returns when every node is Synced.
pub async fn up(
    sb: &Sandbox,
    bins: &Binaries,
    password: &Secret,
    how: &node::Starting,
) -> Result<(Vec<String>, Vec<String>)> {
    let mut started = Vec::new();
    let mut created = Vec::new();
    stop_a_lone_minority(sb, password).await?;
    let down: Vec<&NodeMeta> = sb
        .meta
        .nodes
        .iter()
        .filter(|n| node::running_pid(&sb.layout.node(n)).is_none())
        .collect();
    // Positions already recovered while choosing who bootstraps.
    let mut recovered = Recovered::new();
    if down.len() == sb.meta.nodes.len() {
        let first = bootstrap(sb, bins, password, how, &mut created, &mut recovered).await?;
        started.push(first);
    }
    for n in &sb.meta.nodes {
        if started.contains(&n.name) || node::running_pid(&sb.layout.node(n)).is_some() {
            continue;
        }
        let known = recovered.remove(&n.name);
        how.stop.check()?;
        join(sb, bins, n, password, how, &mut created, known).await?;
        started.push(n.name.clone());
    }
    for n in &sb.meta.nodes {
        wait_synced(&sb.label(n), &sb.layout.node(n), password, &how.stop).await?;
    }
    Ok((started, created))
}

/// Running nodes that are all outside a Primary component (the others
/// were killed, so quorum was lost) cannot take joiners: they are stopped
/// cleanly (saving their position), and the cluster restarts wholly from
/// the most advanced node, which may be one that was down.
async fn stop_a_lone_minority(sb: &Sandbox, password: &Secret) -> Result<()> {
    let running: Vec<&NodeMeta> = sb
        .meta
        .nodes
        .iter()
        .filter(|n| node::running_pid(&sb.layout.node(n)).is_some())
        .collect();
    if running.is_empty() || running.len() == sb.meta.nodes.len() {
        return Ok(());
    }
    for n in &running {
        let label = sb.label(n);
        let mut c = setup::root_conn(&label, &sb.layout.node(n), Some(password)).await?;
        let h = health(&mut c).await.map_err(|e| SandboxError::Sql {
            node: label.clone(),
            what: format!("reading its cluster state: {e}"),
        });
        let _ = c.disconnect().await;
        // A node that cannot say is not stopped on a guess.
        if h?.cluster_status == "Primary" {
            return Ok(());
        }
    }
    for n in running {
        node::stop(&sb.label(n), &sb.layout.node(n)).await?;
    }
    Ok(())
}

/// Positions `--wsrep-recover` gave, by node name.
type Recovered = std::collections::BTreeMap<String, (String, i64)>;

/// Starts a new cluster from one node; returns its name. The positions
/// it recovered are left in `recovered` for the nodes that join next.
async fn bootstrap(
    sb: &Sandbox,
    bins: &Binaries,
    password: &Secret,
    how: &node::Starting,
    created: &mut Vec<String>,
    recovered: &mut Recovered,
) -> Result<String> {
    let first = sb.meta.primary();
    let fresh = !sb.layout.node(first).datadir().join("mysql").is_dir();
    if fresh {
        // A new cluster: node1 is initialised and bootstraps; its users
        // reach the others with the state transfer.
        let nl = sb.layout.node(first);
        let (b, l, nl2) = (bins.clone(), sb.label(first), nl.clone());
        tokio::task::spawn_blocking(move || node::init_datadir(&b, &l, &nl2))
            .await
            .map_err(|e| SandboxError::Sql {
                node: sb.label(first),
                what: format!("init task failed: {e}"),
            })??;
        created.push(first.name.clone());
        start(sb, bins, first, &["--wsrep-new-cluster".into()], how).await?;
        // A node takes connections before wsrep is ready for them (ERROR
        // 1047 "WSREP has not yet prepared node for application use"):
        // its users are set up once it is Synced.
        wait_synced(&sb.label(first), &nl, password, &how.stop).await?;
        setup::secure_users(&sb.label(first), &nl, password).await?;
        crate::meta::write_atomic(&nl.setup_marker(), b"", 0o644)?;
        return Ok(first.name.clone());
    }
    // Wholly down: the node that left last, or the most advanced.
    let mut saved = Vec::new();
    for n in &sb.meta.nodes {
        let nl = sb.layout.node(n);
        let Some(g) = grastate(&nl) else { continue };
        let seqno = if g.seqno >= 0 {
            g.seqno
        } else {
            let r = recover(sb, bins, n).await?.filter(|(_, s)| *s >= 0);
            let s = r.as_ref().map_or(-1, |(_, s)| *s);
            if let Some(r) = r {
                recovered.insert(n.name.clone(), r);
            }
            s
        };
        saved.push(Saved {
            node: n.name.clone(),
            safe_to_bootstrap: g.safe_to_bootstrap,
            seqno,
        });
    }
    let Some(name) = galera::bootstrap_node(&saved).map(str::to_string) else {
        return Err(SandboxError::Sql {
            node: format!("sandbox '{}'", sb.meta.name),
            what: format!(
                "no node has a saved or recoverable cluster position ({}); the cluster cannot be restarted safely",
                saved
                    .iter()
                    .map(|s| format!("{}: seqno {}", s.node, s.seqno))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    };
    let n = sb
        .meta
        .nodes
        .iter()
        .find(|n| n.name == name)
        .ok_or_else(|| SandboxError::Sql {
            node: sb.meta.name.clone(),
            what: format!("no node {name}"),
        })?;
    let path = sb.layout.node(n).datadir().join("grastate.dat");
    let text = std::fs::read_to_string(&path).map_err(SandboxError::io(&path))?;
    if !galera::parse_grastate(&text).is_some_and(|g| g.safe_to_bootstrap) {
        crate::meta::write_atomic(
            &path,
            galera::mark_safe_to_bootstrap(&text).as_bytes(),
            0o660,
        )?;
    }
    let mut args = vec!["--wsrep-new-cluster".to_string()];
    if let Some((uuid, seq)) = recovered.remove(&name) {
        args.push(format!("--wsrep-start-position={uuid}:{seq}"));
    }
    start(sb, bins, n, &args, how).await?;
    Ok(name)
}

/// Starts a node that joins the running cluster (`known`: its position,
/// when already recovered).
async fn join(
    sb: &Sandbox,
    bins: &Binaries,
    n: &NodeMeta,
    password: &Secret,
    how: &node::Starting,
    created: &mut Vec<String>,
    known: Option<(String, i64)>,
) -> Result<()> {
    let nl = sb.layout.node(n);
    let datadir = nl.datadir();
    if !datadir.join("mysql").is_dir() {
        created.push(n.name.clone());
    }
    for d in [&nl.dir, &datadir, &nl.tmpdir()] {
        std::fs::create_dir_all(d).map_err(SandboxError::io(d))?;
    }
    let mut args = Vec::new();
    let start_at = match known {
        Some(p) => Some(p),
        None => recovered_start(sb, bins, n).await?,
    };
    if let Some((uuid, seq)) = start_at {
        args.push(format!("--wsrep-start-position={uuid}:{seq}"));
    }
    if node::running_as_root() {
        // rsync's daemon on the joiner drops root for `nobody`: it must
        // be able to write the data directory a full transfer fills.
        let out = Command::new("chown")
            .args(["-R", "nobody:nogroup"])
            .arg(&datadir)
            .stdin(Stdio::null())
            .output()
            .map_err(SandboxError::io("chown"))?;
        if !out.status.success() {
            return Err(SandboxError::Sql {
                node: sb.label(n),
                what: format!(
                    "chown -R nobody:nogroup {}: {}",
                    datadir.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            });
        }
    }
    start(sb, bins, n, &args, how).await?;
    wait_synced(&sb.label(n), &nl, password, &how.stop).await?;
    crate::meta::write_atomic(&nl.setup_marker(), b"", 0o644)?;
    Ok(())
}

/// The position a node that did not stop cleanly restarts from
/// (`--wsrep-recover`); `None` when its grastate.dat knows it.
async fn recovered_start(
    sb: &Sandbox,
    bins: &Binaries,
    n: &NodeMeta,
) -> Result<Option<(String, i64)>> {
    match grastate(&sb.layout.node(n)) {
        Some(g) if g.seqno < 0 => Ok(recover(sb, bins, n).await?.filter(|(_, s)| *s >= 0)),
        _ => Ok(None),
    }
}

fn grastate(nl: &NodeLayout) -> Option<galera::Grastate> {
    let text = std::fs::read_to_string(nl.datadir().join("grastate.dat")).ok()?;
    galera::parse_grastate(&text)
}

/// Runs `mariadbd --wsrep-recover` for a stopped node: InnoDB recovers
/// and the server logs the last committed position, then exits.
async fn recover(sb: &Sandbox, bins: &Binaries, n: &NodeMeta) -> Result<Option<(String, i64)>> {
    let nl = sb.layout.node(n);
    let cnf = nl.server_cnf();
    crate::meta::write_atomic(
        &cnf,
        node::server_cnf(n, &nl, &member_options(sb, n)).as_bytes(),
        0o644,
    )?;
    let log = nl.error_log();
    let before = std::fs::metadata(&log).map_or(0, |m| m.len() as usize);
    let mut cmd = Command::new(&bins.mariadbd);
    cmd.arg(format!("--defaults-file={}", cnf.display()))
        .arg("--wsrep-recover");
    if node::running_as_root() {
        cmd.arg("--user=root");
    }
    let label = sb.label(n);
    let status = tokio::task::spawn_blocking(move || {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
    })
    .await
    .map_err(|e| SandboxError::Sql {
        node: label.clone(),
        what: format!("recover task failed: {e}"),
    })?
    .map_err(SandboxError::io(&bins.mariadbd))?;
    let text = std::fs::read(&log).map_err(SandboxError::io(&log))?;
    let tail = String::from_utf8_lossy(text.get(before..).unwrap_or(&[]));
    let pos = galera::recovered_position(&tail);
    if pos.is_none() && !status.success() {
        return Err(SandboxError::Sql {
            node: label,
            what: format!(
                "mariadbd --wsrep-recover failed ({status}); see {}",
                log.display()
            ),
        });
    }
    Ok(pos)
}

/// Spawns a member with `args` and waits until it answers.
async fn start(
    sb: &Sandbox,
    bins: &Binaries,
    n: &NodeMeta,
    args: &[String],
    how: &node::Starting,
) -> Result<()> {
    let nl = sb.layout.node(n);
    for p in n.galera.iter().flat_map(|g| [g.gcomm, g.ist, g.sst]) {
        crate::ports::ensure_free(p)?;
    }
    how.stop.check()?;
    let mut child = node::spawn(
        bins,
        n,
        &nl,
        &member_options(sb, n),
        args,
        how.die_with_parent,
    )?;
    node::wait_ready(&mut child, &sb.label(n), n.port, &nl, &how.stop).await
}

/// The node's wsrep status.
pub async fn health(conn: &mut mysql_async::Conn) -> mysql_async::Result<Health> {
    let rows: Vec<(String, String)> = conn.query("SHOW GLOBAL STATUS LIKE 'wsrep%'").await?;
    Ok(Health::from_status(
        rows.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    ))
}

/// Waits until the node is Synced in the primary component (logging in
/// as root with `password`, or, on a new node whose users are not set up
/// yet, without one).
pub async fn wait_synced(
    label: &str,
    nl: &NodeLayout,
    password: &Secret,
    stop: &crate::Interrupt,
) -> Result<Health> {
    let t0 = Instant::now();
    let mut last = Health::default();
    while t0.elapsed() < SYNC_TIMEOUT {
        stop.check()?;
        if node::running_pid(nl).is_none() && t0.elapsed() > Duration::from_secs(5) {
            return Err(SandboxError::StartFailed {
                node: label.to_string(),
                log_path: nl.error_log(),
                tail: format!("the server stopped before it was Synced ({})", last.state),
            });
        }
        let conn = match setup::root_conn(label, nl, Some(password)).await {
            Ok(c) => Ok(c),
            Err(_) => setup::root_conn(label, nl, None).await,
        };
        if let Ok(mut c) = conn {
            if let Ok(h) = health(&mut c).await {
                let _ = c.disconnect().await;
                if h.synced() {
                    return Ok(h);
                }
                last = h;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(SandboxError::Sql {
        node: label.to_string(),
        what: format!(
            "not Synced after {}s (state {:?}, cluster {:?}, size {}); see {}",
            SYNC_TIMEOUT.as_secs(),
            last.state,
            last.cluster_status,
            last.cluster_size,
            nl.error_log().display()
        ),
    })
}

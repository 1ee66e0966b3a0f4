//! A relay over a replicated test sandbox (primary + replicas), and the
//! servers' own counters to check where statements ran.

use std::path::Path;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use sqlfleet_testkit::TestServer;

use super::relay::{free_port, quoted, start_config, Relay};

/// Starts a relay with every node of `srv` as a backend,
/// account app:app-pw, `routing` as the [routing] section, `backend` added
/// to [backend] (e.g. weights) and `extra` TOML appended (e.g. [[rules]]).
pub fn start_routing_relay(
    srv: &TestServer,
    dir: &Path,
    routing: &str,
    backend: &str,
    extra: &str,
) -> Relay {
    let ports: Vec<u16> = srv.sandbox.meta.nodes.iter().map(|n| n.port).collect();
    start_routing_relay_at(srv, dir, routing, backend, extra, &ports)
}

/// [`start_routing_relay`] with the backends reached at `ports` (one per
/// node, in order: e.g. `netfault` links in front of them). Over a
/// primary and replicas it returns once the roles are known; over Galera
/// (roles writer and reader) the caller waits as it needs.
pub fn start_routing_relay_at(
    srv: &TestServer,
    dir: &Path,
    routing: &str,
    backend: &str,
    extra: &str,
    ports: &[u16],
) -> Relay {
    let port = free_port();
    let metrics_port = free_port();
    let pwfile = dir.join("backend.pw");
    std::fs::write(&pwfile, srv.sandbox.password().expect("pw").expose()).expect("pw");
    let servers: Vec<String> = ports.iter().map(|p| format!("\"127.0.0.1:{p}\"")).collect();
    let hashes = sqlfleet_relay::config::hash_lines("app-pw");
    let toml = format!(
        "[relay]\nlisten = [\"127.0.0.1:{port}\"]\nmetrics = \"127.0.0.1:{metrics_port}\"\n\n\
         [backend]\nservers = [{}]\nuser = \"root\"\npassword_file = {}\naccounts = \"shared\"\n{backend}\n\n\
         [pool]\nmax = 20\nwait_timeout = 20\n\n[routing]\n{routing}\n\n\
         [[users]]\nname = \"app\"\n{hashes}\n{extra}",
        servers.join(", "),
        quoted(&pwfile.display().to_string())
    );
    let relay = start_config(&toml, port, metrics_port);
    if !srv.sandbox.meta.galera() {
        relay.wait_roles(1, srv.sandbox.meta.nodes.len() - 1);
    }
    relay
}

/// [`start_routing_relay_at`] with each node reached through a fault link
/// of its own (the servers' own traffic does not pass there), with the
/// session-consistent read/write split every fault test uses (and
/// `extra`); the links, in node order.
pub fn start_routing_relay_through_links(
    srv: &TestServer,
    dir: &Path,
    extra: &str,
) -> (Relay, Vec<sqlfleet_testkit::netfault::Link>) {
    let links: Vec<sqlfleet_testkit::netfault::Link> = srv
        .sandbox
        .meta
        .nodes
        .iter()
        .map(|n| sqlfleet_testkit::netfault::Link::to(n.port))
        .collect();
    let ports: Vec<u16> = links.iter().map(|l| l.port).collect();
    let relay = start_routing_relay_at(
        srv,
        dir,
        "read_write_split = true\nconsistency = \"session\"\nhealth_interval = 0.2",
        "",
        extra,
        &ports,
    );
    (relay, links)
}

impl Relay {
    pub fn status(&self) -> serde_json::Value {
        let out = self.page("/status");
        let body = out.split_once("\r\n\r\n").map(|x| x.1).unwrap_or_default();
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {out}"))
    }

    /// What `/status` says in `field` of the backend at `addr` (a text
    /// field; None when it is null or absent).
    pub fn backend_says(&self, addr: &str, field: &str) -> Option<String> {
        self.status()["backends"]
            .as_array()
            .and_then(|a| a.iter().find(|b| b["address"] == addr))
            .and_then(|b| b[field].as_str().map(str::to_string))
    }

    /// Waits (at most 10 s) until the backend at `addr` has `field` said
    /// (`said`) or not.
    pub fn wait_backend_says(&self, addr: &str, field: &str, said: bool) {
        let t0 = Instant::now();
        while self.backend_says(addr, field).is_some() != said {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "{field} of {addr} never {}: {}",
                if said { "said" } else { "cleared" },
                self.status()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Roles as the relay sees them, by backend address.
    pub fn roles(&self) -> Vec<(String, String)> {
        self.status()["backends"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|b| {
                        (
                            b["address"].as_str().unwrap_or_default().to_string(),
                            b["role"].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Waits until the relay sees these roles, by backend in order
    /// ("writer", "reader", "down", ... on Galera).
    pub fn wait_roles_in_order(&self, want: &[&str]) {
        let t0 = Instant::now();
        loop {
            let r = self.roles();
            if r.iter().map(|(_, x)| x.as_str()).eq(want.iter().copied()) {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "roles stay {r:?}, want {want:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the relay sees this many primaries and replicas.
    pub fn wait_roles(&self, primaries: usize, replicas: usize) {
        let t0 = Instant::now();
        loop {
            let r = self.roles();
            let n = |role: &str| r.iter().filter(|(_, x)| x == role).count();
            if n("primary") == primaries && n("replica") == replicas {
                return;
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "roles stay {r:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A direct connection to node `i` of `srv` (0: the primary).
pub async fn node(srv: &TestServer, i: usize) -> mysql_async::Conn {
    srv.sandbox
        .target(&srv.sandbox.meta.nodes[i])
        .expect("target")
        .connect(Duration::from_secs(5))
        .await
        .expect("node")
}

/// A global status counter on each node, primary first.
pub async fn counters(srv: &TestServer, name: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for n in &srv.sandbox.meta.nodes {
        let t = srv.sandbox.target(n).expect("target");
        let mut c = t.connect(Duration::from_secs(5)).await.expect("node");
        let v: Option<(String, u64)> = c
            .query_first(format!("SHOW GLOBAL STATUS LIKE '{name}'"))
            .await
            .expect("status");
        out.push(v.map(|x| x.1).unwrap_or(0));
        let _ = c.disconnect().await;
    }
    out
}

/// Every node of `srv` (the primary first), as a relay's backend address.
#[allow(dead_code)]
pub fn node_addrs(srv: &TestServer) -> Vec<String> {
    srv.sandbox
        .meta
        .nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect()
}

/// The replicas of `srv` whose binary log holds a transaction of their own
/// (their server id in their GTID position): a write that reached them
/// directly, not through replication. Each is named with its own events'
/// texts.
#[allow(dead_code)]
pub async fn replicas_that_wrote(srv: &TestServer) -> Vec<String> {
    let mut conns = Vec::new();
    for n in &srv.sandbox.meta.nodes[1..] {
        let t = srv.sandbox.target(n).expect("target");
        let c = t.connect(Duration::from_secs(5)).await.expect("replica");
        conns.push((format!("127.0.0.1:{}", n.port), c));
    }
    servers_that_wrote(conns).await
}

/// [`replicas_that_wrote`] over connections to the replicas, each with
/// its name.
#[allow(dead_code)]
pub async fn servers_that_wrote(conns: Vec<(String, mysql_async::Conn)>) -> Vec<String> {
    let mut out = Vec::new();
    for (name, mut c) in conns {
        let (id, pos): (u32, String) = c
            .query_first("SELECT @@server_id, @@gtid_binlog_pos")
            .await
            .expect("gtid")
            .expect("row");
        if !pos
            .split(',')
            .any(|g| g.split('-').nth(1) == Some(&id.to_string()))
        {
            let _ = c.disconnect().await;
            continue;
        }
        let logs: Vec<(String, u64)> = c.query("SHOW BINARY LOGS").await.unwrap_or_default();
        let mut own = Vec::new();
        for (log, _) in logs {
            let events: Vec<mysql_async::Row> = c
                .query(format!("SHOW BINLOG EVENTS IN '{log}'"))
                .await
                .unwrap_or_default();
            for e in events {
                let server: Option<u32> = e.get("Server_id");
                let kind: Option<String> = e.get("Event_type");
                // (Bytes: a statement's text need not be UTF-8.)
                let info: Option<String> = e
                    .get_opt::<Vec<u8>, _>("Info")
                    .and_then(Result::ok)
                    .map(|b| String::from_utf8_lossy(&b).into_owned());
                let written = matches!(
                    kind.as_deref(),
                    Some("Gtid" | "Query" | "Xid" | "Table_map")
                );
                if server == Some(id) && written && own.len() < 20 {
                    own.extend(info);
                }
            }
        }
        out.push(format!(
            "{name} (server id {id}): {pos}; its own events: {own:?}"
        ));
        let _ = c.disconnect().await;
    }
    out
}

/// A client library suite's relay (`start_suite_relay`) over every node of
/// `srv` with read/write split, once it knows the roles.
#[allow(dead_code)]
pub fn start_split_suite_relay(srv: &TestServer, pw: &str, mode: &str, accounts: &str) -> Relay {
    let backends = node_addrs(srv);
    let backends: Vec<&str> = backends.iter().map(String::as_str).collect();
    let relay = super::relay::start_suite_relay(
        &backends,
        "read_write_split = true\nhealth_interval = 0.5",
        pw,
        mode,
        accounts,
        None,
    );
    relay.wait_roles(1, backends.len() - 1);
    relay
}

//! Finding a replication fleet from any one of its servers: walk the
//! topology both ways — each server's primaries from its replication
//! status (every channel: `SHOW ALL SLAVES STATUS` on MariaDB, `SHOW
//! REPLICA STATUS` / `SHOW SLAVE STATUS` elsewhere) and its replicas from
//! `SHOW SLAVE HOSTS` (replicas that set `report_host`) — until no new
//! server turns up. Each host gets tags `role=primary|replica`, `depth=`
//! (hops from the top of its chain) and `channel=` (the channels it
//! replicates through); servers named in the topology that cannot be
//! reached are kept, tagged `unreachable=yes`, so a run reports them.
//! A Galera node names every member of its cluster
//! (`wsrep_incoming_addresses`); members are tagged `role=member`,
//! `cluster=` (`wsrep_cluster_name`), `node=` (`wsrep_node_name`) and
//! `state=` (`wsrep_local_state_comment`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::Row;
use sqlfleet_conn::{Endpoint, Target};

use crate::hosts::Host;

/// One server found, and what it said about its neighbours.
#[derive(Debug, Clone, Default)]
struct Node {
    /// (primary, channel) pairs it replicates from.
    primaries: Vec<((String, u16), String)>,
    /// A Galera member's cluster, node name and state.
    galera: Option<Member>,
    /// It could not be read: why (the connect error, or the server's
    /// refusal of the login).
    unreachable: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Member {
    cluster: String,
    node: String,
    state: String,
}

/// The servers found from `start`, in the order found (at most `limit`),
/// and a note for each that could not be read: not reached, or reached
/// and its login refused (ERROR 1045 is not "down").
pub async fn discover(
    base: &Target,
    start: (String, u16),
    connect_timeout: Duration,
    limit: usize,
) -> (Vec<Host>, Vec<String>) {
    let mut nodes: BTreeMap<(String, u16), Node> = BTreeMap::new();
    let mut order = Vec::new();
    // One spelling per server: TCP to "localhost" is the loopback address.
    let norm = |(h, p): (String, u16)| {
        if h == "localhost" {
            ("127.0.0.1".to_string(), p)
        } else {
            (h, p)
        }
    };
    let mut queue = VecDeque::from([norm(start)]);
    let mut seen = BTreeSet::new();
    while let Some(addr) = queue.pop_front() {
        if seen.len() >= limit || !seen.insert(addr.clone()) {
            continue;
        }
        order.push(addr.clone());
        let node = match look(base, &addr, connect_timeout).await {
            Ok(seen) => {
                let primaries: Vec<_> = seen
                    .primaries
                    .into_iter()
                    .map(|(p, ch)| (norm(p), ch))
                    .collect();
                for (p, _) in &primaries {
                    queue.push_back(p.clone());
                }
                queue.extend(seen.replicas.into_iter().map(norm));
                queue.extend(seen.members.into_iter().map(norm));
                Node {
                    primaries,
                    galera: seen.galera,
                    unreachable: None,
                }
            }
            Err(e) => Node {
                unreachable: Some(e),
                ..Node::default()
            },
        };
        nodes.insert(addr, node);
    }
    let notes = order
        .iter()
        .filter_map(|addr| {
            let why = nodes[addr].unreachable.as_ref()?;
            Some(format!(
                "{}:{} is in the topology but could not be read ({why})",
                addr.0, addr.1
            ))
        })
        .collect();
    let hosts = order
        .iter()
        .map(|addr| {
            let n = &nodes[addr];
            let mut tags = BTreeMap::new();
            // A server that could not be read has a role nobody knows.
            let role = match (&n.galera, n.primaries.is_empty(), &n.unreachable) {
                (_, _, Some(_)) => "unknown",
                (Some(_), _, _) => "member",
                (None, true, None) => "primary",
                (None, false, None) => "replica",
            };
            tags.insert("role".to_string(), role.to_string());
            if let Some(m) = &n.galera {
                tags.insert("cluster".to_string(), m.cluster.clone());
                tags.insert("node".to_string(), m.node.clone());
                tags.insert("state".to_string(), m.state.clone());
            }
            tags.insert("depth".to_string(), depth(&nodes, addr, 0).to_string());
            let channels: Vec<&str> = n
                .primaries
                .iter()
                .map(|(_, c)| c.as_str())
                .filter(|c| !c.is_empty())
                .collect();
            if !channels.is_empty() {
                tags.insert("channel".to_string(), channels.join(","));
            }
            if n.unreachable.is_some() {
                tags.insert("unreachable".to_string(), "yes".to_string());
            }
            Host {
                tags,
                ..Host::tcp(addr.0.clone(), addr.1)
            }
        })
        .collect();
    (hosts, notes)
}

/// Hops to the top of the chain (the shortest over channels; a cycle,
/// as in a primary-primary pair, stops counting).
fn depth(nodes: &BTreeMap<(String, u16), Node>, addr: &(String, u16), hops: usize) -> usize {
    let Some(n) = nodes.get(addr) else {
        return hops;
    };
    if n.primaries.is_empty() || hops > nodes.len() {
        return hops;
    }
    n.primaries
        .iter()
        .map(|(p, _)| depth(nodes, p, hops + 1))
        .min()
        .unwrap_or(hops)
}

/// What one server says about its neighbours.
struct Neighbours {
    /// (primary, channel) pairs.
    primaries: Vec<((String, u16), String)>,
    /// Registered replicas.
    replicas: Vec<(String, u16)>,
    /// The other members of its Galera cluster (itself included).
    members: Vec<(String, u16)>,
    galera: Option<Member>,
}

/// `wsrep_incoming_addresses`: `host:port` entries, comma-separated
/// (IPv6 in brackets); entries without a usable port (`AUTO`, empty) are
/// left out.
fn incoming_addresses(text: &str) -> Vec<(String, u16)> {
    text.split(',')
        .filter_map(|a| {
            let (h, p) = a.trim().rsplit_once(':')?;
            let h = h.trim_start_matches('[').trim_end_matches(']');
            let p: u16 = p.parse().ok()?;
            (!h.is_empty() && p != 0).then(|| (h.to_string(), p))
        })
        .collect()
}

/// One server's primaries (with channel names), registered replicas and
/// Galera cluster.
async fn look(
    base: &Target,
    addr: &(String, u16),
    connect_timeout: Duration,
) -> Result<Neighbours, String> {
    let t = base.with_endpoint(Endpoint::Tcp {
        host: addr.0.clone(),
        port: addr.1,
    });
    let mut c = t
        .connect(connect_timeout)
        .await
        .map_err(|e| match e.server_code() {
            // `what` is the server's words as the mysql client prints
            // them (ERROR code (state): message), once.
            Some(_) => format!("it refused the login: {}", e.what),
            None => format!("not reached: {e}"),
        })?;
    let text = |r: &Row, col: &str| -> String {
        r.get_opt::<String, _>(col)
            .and_then(Result::ok)
            .unwrap_or_default()
    };
    // MariaDB: every channel; MySQL 8: SHOW REPLICA STATUS (channels as rows).
    let mut status: Vec<Row> = match c.query("SHOW ALL SLAVES STATUS").await {
        Ok(rows) => rows,
        Err(_) => match c.query("SHOW REPLICA STATUS").await {
            Ok(rows) => rows,
            Err(_) => c.query("SHOW SLAVE STATUS").await.unwrap_or_default(),
        },
    };
    let mut primaries = Vec::new();
    for r in status.drain(..) {
        let host = [text(&r, "Master_Host"), text(&r, "Source_Host")]
            .into_iter()
            .find(|h| !h.is_empty());
        let port = [text(&r, "Master_Port"), text(&r, "Source_Port")]
            .into_iter()
            .find_map(|p| p.parse::<u16>().ok());
        let channel = [text(&r, "Connection_name"), text(&r, "Channel_Name")]
            .into_iter()
            .find(|c| !c.is_empty())
            .unwrap_or_default();
        if let (Some(h), Some(p)) = (host, port) {
            primaries.push(((h, p), channel));
        }
    }
    let hosts: Vec<Row> = match c.query("SHOW SLAVE HOSTS").await {
        Ok(r) => r,
        Err(_) => c.query("SHOW REPLICAS").await.unwrap_or_default(),
    };
    let replicas = hosts
        .iter()
        .filter_map(|r| {
            let h = text(r, "Host");
            let p = text(r, "Port").parse::<u16>().ok()?;
            (!h.is_empty() && p != 0).then_some((h, p))
        })
        .collect();
    let (members, galera) = cluster(&mut c).await;
    let _ = c.disconnect().await;
    Ok(Neighbours {
        primaries,
        replicas,
        members,
        galera,
    })
}

/// A Galera node's members and tags; nothing when `wsrep_on` is OFF or
/// the server has no such variables (MySQL).
async fn cluster(c: &mut mysql_async::Conn) -> (Vec<(String, u16)>, Option<Member>) {
    let vars: Vec<(String, String)> = c
        .query(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('wsrep_on', 'wsrep_cluster_name', 'wsrep_node_name')",
        )
        .await
        .unwrap_or_default();
    let get = |rows: &[(String, String)], k: &str| {
        rows.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(k))
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    if !get(&vars, "wsrep_on").eq_ignore_ascii_case("ON") {
        return (Vec::new(), None);
    }
    let status: Vec<(String, String)> = c
        .query(
            "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_incoming_addresses', 'wsrep_local_state_comment')",
        )
        .await
        .unwrap_or_default();
    (
        incoming_addresses(&get(&status, "wsrep_incoming_addresses")),
        Some(Member {
            cluster: get(&vars, "wsrep_cluster_name"),
            node: get(&vars, "wsrep_node_name"),
            state: get(&status, "wsrep_local_state_comment"),
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn galera_incoming_addresses() {
        let hp = |h: &str, p: u16| (h.to_string(), p);
        let rows: [(&str, Vec<(String, u16)>); 6] = [
            (
                "127.0.0.1:3308,127.0.0.1:3309,127.0.0.1:3310",
                vec![
                    hp("127.0.0.1", 3308),
                    hp("127.0.0.1", 3309),
                    hp("127.0.0.1", 3310),
                ],
            ),
            ("db1:3306, db2:3306", vec![hp("db1", 3306), hp("db2", 3306)]),
            ("[::1]:3306", vec![hp("::1", 3306)]),
            ("AUTO,db2:3306", vec![hp("db2", 3306)]),
            ("", vec![]),
            ("db1:0,db2:x,:3306", vec![]),
        ];
        for (text, want) in rows {
            assert_eq!(incoming_addresses(text), want, "{text:?}");
        }
    }

    #[test]
    fn depth_follows_the_shortest_chain_and_stops_on_cycles() {
        let a = ("a".to_string(), 1);
        let b = ("b".to_string(), 1);
        let c = ("c".to_string(), 1);
        let mut nodes = BTreeMap::new();
        nodes.insert(a.clone(), Node::default());
        nodes.insert(
            b.clone(),
            Node {
                primaries: vec![(a.clone(), String::new())],
                ..Node::default()
            },
        );
        nodes.insert(
            c.clone(),
            Node {
                primaries: vec![(b.clone(), String::new())],
                ..Node::default()
            },
        );
        assert_eq!(depth(&nodes, &a, 0), 0);
        assert_eq!(depth(&nodes, &c, 0), 2);
        // a <-> b replicate from each other: no endless count.
        nodes.get_mut(&a).expect("a").primaries = vec![(b.clone(), String::new())];
        assert!(depth(&nodes, &a, 0) <= nodes.len() + 2);
    }
}

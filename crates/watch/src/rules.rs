//! Alert rules and incidents.
//!
//! A rule is a condition on one server's latest check plus a hold time: it
//! opens an incident only after being true that long (down/stalled counts
//! consecutive failed checks instead), and the incident resolves only after
//! the condition has been false for the clear time, so a flapping server
//! gives one incident, not one per flap. Each incident yields exactly two
//! events: opened and resolved. Pure: time comes in as seconds, so the
//! engine is tested without waiting.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::probe::Health;
use crate::sample::{Rates, Sample};
use crate::ssh::HostMetrics;

/// What a rule looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleKind {
    /// Down or stalled for `checks` consecutive checks.
    Unreachable,
    /// Host CPU (user+nice+system) at or above `above` percent.
    Cpu,
    /// Threads_running above `above`.
    ThreadsRunning,
    /// Threads_connected at or above `above` percent of max_connections.
    Connections,
    /// A replication channel stopped or erroring.
    Replication,
    /// A replication channel more than `above` seconds behind.
    Lag,
    /// The data directory's file system at or above `above` percent.
    Disk,
    /// A Galera cluster with fewer members than `above` (0: than the most
    /// this watch has seen of it).
    ClusterSize,
    /// A Galera node outside the Primary component (split brain, lost
    /// quorum): it refuses queries. Critical.
    ClusterPrimary,
    /// A Galera node not Synced (joining, donor, desynced).
    NodeSynced,
    /// A Galera node's replication paused by flow control more than
    /// `above` percent of the time.
    FlowControl,
}

impl RuleKind {
    pub fn name(self) -> &'static str {
        match self {
            RuleKind::Unreachable => "unreachable",
            RuleKind::Cpu => "cpu",
            RuleKind::ThreadsRunning => "threads_running",
            RuleKind::Connections => "connections",
            RuleKind::Replication => "replication",
            RuleKind::Lag => "lag",
            RuleKind::Disk => "disk",
            RuleKind::ClusterSize => "cluster_size",
            RuleKind::ClusterPrimary => "cluster_primary",
            RuleKind::NodeSynced => "node_synced",
            RuleKind::FlowControl => "flow_control",
        }
    }

    /// A Galera rule: one incident per cluster, not per node.
    pub fn per_cluster(self) -> bool {
        matches!(
            self,
            RuleKind::ClusterSize
                | RuleKind::ClusterPrimary
                | RuleKind::NodeSynced
                | RuleKind::FlowControl
        )
    }
}

/// One rule with its thresholds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rule {
    pub kind: RuleKind,
    pub above: f64,
    /// Unreachable only: consecutive failed checks.
    pub checks: u32,
    /// Seconds the condition must hold before an incident opens.
    pub hold: f64,
    /// Seconds the condition must be false before the incident resolves.
    pub clear: f64,
}

/// The default rule set: the cases an operator is woken for.
pub fn defaults() -> Vec<Rule> {
    let r = |kind, above, hold| Rule {
        kind,
        above,
        checks: 3,
        hold,
        clear: 30.0,
    };
    vec![
        r(RuleKind::Unreachable, 0.0, 0.0),
        r(RuleKind::Cpu, 90.0, 300.0),
        r(RuleKind::ThreadsRunning, 50.0, 120.0),
        r(RuleKind::Connections, 90.0, 60.0),
        r(RuleKind::Replication, 0.0, 10.0),
        r(RuleKind::Lag, 300.0, 60.0),
        r(RuleKind::Disk, 90.0, 60.0),
        r(RuleKind::ClusterSize, 0.0, 10.0),
        r(RuleKind::ClusterPrimary, 0.0, 0.0),
        r(RuleKind::NodeSynced, 0.0, 60.0),
        r(RuleKind::FlowControl, 10.0, 60.0),
    ]
}

/// What the rules see of one server after a check.
pub struct Observation<'a> {
    pub health: &'a Health,
    /// Failed checks in a row, this one included.
    pub failures: u32,
    pub sample: Option<&'a Sample>,
    pub rates: Option<&'a Rates>,
    pub host: Option<&'a HostMetrics>,
}

impl Rule {
    /// `Some(what)` when the condition holds now.
    pub fn condition(&self, o: &Observation) -> Option<String> {
        self.condition_seen(o, 0)
    }

    /// As [`Rule::condition`], with the most members this watch has seen
    /// of the server's Galera cluster (what `cluster_size` expects when
    /// no size is configured).
    pub fn condition_seen(&self, o: &Observation, most_seen: u64) -> Option<String> {
        let galera = || o.sample.and_then(|s| s.galera.as_ref());
        match self.kind {
            RuleKind::ClusterSize => {
                let g = galera()?;
                let want = if self.above > 0.0 {
                    self.above as u64
                } else {
                    most_seen
                };
                // A node outside the Primary component sees only itself:
                // that is cluster_primary's incident.
                (g.cluster_status == "Primary" && g.cluster_size < want).then(|| {
                    format!(
                        "cluster {} has {} of {want} members (seen from {})",
                        g.cluster, g.cluster_size, g.node
                    )
                })
            }
            RuleKind::ClusterPrimary => {
                let g = galera()?;
                (g.cluster_status != "Primary").then(|| {
                    format!(
                        "CRITICAL: node {} is outside the Primary component ({}): it refuses queries",
                        g.node, g.cluster_status
                    )
                })
            }
            RuleKind::NodeSynced => {
                let g = galera()?;
                (!g.synced()).then(|| format!("node {} is {}, not Synced", g.node, g.state))
            }
            RuleKind::FlowControl => {
                let g = galera()?;
                let paused = o.rates?.flow_control_paused? * 100.0;
                (paused > self.above).then(|| {
                    format!(
                        "node {}: replication paused by flow control {paused:.0}% of the time (rule: > {}%)",
                        g.node, self.above
                    )
                })
            }
            RuleKind::Unreachable => match o.health {
                Health::Ok => None,
                Health::Down(why) | Health::Stalled(why) if o.failures >= self.checks.max(1) => {
                    let state = if matches!(o.health, Health::Down(_)) {
                        "down"
                    } else {
                        "stalled"
                    };
                    Some(format!("{state}: {why}"))
                }
                _ => None,
            },
            RuleKind::Cpu => {
                let cpu = o.host?.cpu_percent?;
                (cpu >= self.above).then(|| format!("CPU {cpu:.0}% (rule: >= {})", self.above))
            }
            RuleKind::ThreadsRunning => {
                let n = o.sample?.counter("Threads_running");
                (n as f64 > self.above)
                    .then(|| format!("Threads_running {n} (rule: > {})", self.above))
            }
            RuleKind::Connections => {
                let s = o.sample?;
                let pct = s.connection_use() * 100.0;
                (pct >= self.above).then(|| {
                    format!(
                        "{} of max_connections {} in use ({pct:.0}%)",
                        s.counter("Threads_connected"),
                        s.max_connections
                    )
                })
            }
            RuleKind::Replication => {
                let bad: Vec<String> = o
                    .sample?
                    .channels
                    .iter()
                    .filter(|c| !c.running() || !c.last_error.is_empty())
                    .map(|c| {
                        let name = if c.name.is_empty() {
                            "replication".to_string()
                        } else {
                            format!("channel '{}'", c.name)
                        };
                        let err = if c.last_error.is_empty() {
                            String::new()
                        } else {
                            format!(": {}", c.last_error)
                        };
                        format!("{name} IO={} SQL={}{err}", c.io_running, c.sql_running)
                    })
                    .collect();
                (!bad.is_empty()).then(|| bad.join("; "))
            }
            RuleKind::Lag => {
                let worst = o.sample?.channels.iter().filter_map(|c| c.lag).max()?;
                (worst as f64 > self.above)
                    .then(|| format!("{worst}s behind its source (rule: > {}s)", self.above))
            }
            RuleKind::Disk => {
                let pct = o.host?.disk_percent?;
                (pct >= self.above).then(|| {
                    format!(
                        "data directory disk {pct:.0}% full (rule: >= {})",
                        self.above
                    )
                })
            }
        }
    }
}

/// An incident's two moments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Opened,
    Resolved,
}

/// An incident opening or resolving: what notifications and logs carry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IncidentEvent {
    pub phase: Phase,
    pub server: String,
    pub rule: &'static str,
    /// What the condition said when the incident opened.
    pub detail: String,
    /// Unix seconds (ISO 8601 in JSON).
    #[serde(serialize_with = "crate::when::iso")]
    pub opened_at: f64,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::when::iso_opt"
    )]
    pub resolved_at: Option<f64>,
}

#[derive(Debug, Clone)]
struct Track {
    /// When the condition last became true (pending or open).
    true_since: Option<f64>,
    /// When it last became false while open.
    false_since: Option<f64>,
    open: Option<(f64, String)>,
}

/// Open incidents and pending conditions of every server.
#[derive(Debug, Default)]
pub struct Incidents {
    tracks: BTreeMap<(String, RuleKind), Track>,
    /// Per Galera cluster and rule, the servers whose condition is open:
    /// the cluster's incident opens with the first, resolves with the last.
    clusters: BTreeMap<(String, RuleKind), std::collections::BTreeSet<String>>,
    /// The most members seen of each Galera cluster.
    sizes: BTreeMap<String, u64>,
}

impl Incidents {
    /// Applies one observation of `server` at `now` (unix seconds); returns
    /// the incidents that opened or resolved.
    pub fn observe(
        &mut self,
        rules: &[Rule],
        server: &str,
        now: f64,
        o: &Observation,
    ) -> Vec<IncidentEvent> {
        let mut out = Vec::new();
        // While a server is unreachable, the other rules have nothing to
        // look at: their incidents neither open nor resolve.
        let reachable = matches!(o.health, Health::Ok);
        let cluster = o.sample.and_then(|s| s.galera.as_ref()).map(|g| {
            (
                g.cluster.clone(),
                g.cluster_size,
                g.cluster_status == "Primary",
            )
        });
        let most_seen = match &cluster {
            Some((name, size, primary)) => {
                let m = self.sizes.entry(name.clone()).or_insert(0);
                if *primary {
                    *m = (*m).max(*size);
                }
                *m
            }
            None => 0,
        };
        for rule in rules {
            if !reachable && rule.kind != RuleKind::Unreachable {
                continue;
            }
            let t = self
                .tracks
                .entry((server.to_string(), rule.kind))
                .or_insert(Track {
                    true_since: None,
                    false_since: None,
                    open: None,
                });
            // A Galera rule's incident is its cluster's: named for it,
            // opened by the first node and resolved with the last.
            let group = cluster
                .as_ref()
                .filter(|_| rule.kind.per_cluster())
                .map(|(name, ..)| (name.clone(), rule.kind));
            match rule.condition_seen(o, most_seen) {
                Some(detail) => {
                    t.false_since = None;
                    let since = *t.true_since.get_or_insert(now);
                    if t.open.is_none() && now - since >= rule.hold {
                        t.open = Some((now, detail.clone()));
                        let first = match &group {
                            Some(k) => {
                                let open = self.clusters.entry(k.clone()).or_default();
                                open.insert(server.to_string());
                                open.len() == 1
                            }
                            None => true,
                        };
                        if first {
                            out.push(IncidentEvent {
                                phase: Phase::Opened,
                                server: group.as_ref().map_or_else(
                                    || server.to_string(),
                                    |(c, _)| format!("cluster {c}"),
                                ),
                                rule: rule.kind.name(),
                                detail,
                                opened_at: now,
                                resolved_at: None,
                            });
                        }
                    }
                }
                None => {
                    if t.open.is_none() {
                        t.true_since = None;
                        continue;
                    }
                    let since = *t.false_since.get_or_insert(now);
                    if now - since >= rule.clear {
                        if let Some((opened_at, detail)) = t.open.take() {
                            let last = match &group {
                                Some(k) => {
                                    let open = self.clusters.entry(k.clone()).or_default();
                                    open.remove(server);
                                    open.is_empty()
                                }
                                None => true,
                            };
                            if last {
                                out.push(IncidentEvent {
                                    phase: Phase::Resolved,
                                    server: group.as_ref().map_or_else(
                                        || server.to_string(),
                                        |(c, _)| format!("cluster {c}"),
                                    ),
                                    rule: rule.kind.name(),
                                    detail,
                                    opened_at,
                                    resolved_at: Some(now),
                                });
                            }
                        }
                        t.true_since = None;
                        t.false_since = None;
                    }
                }
            }
        }
        out
    }

    /// The rules with an open incident on `server`.
    pub fn open_on(&self, server: &str) -> Vec<(&'static str, String, f64)> {
        self.tracks
            .iter()
            .filter(|((s, _), _)| s == server)
            .filter_map(|((_, k), t)| t.open.as_ref().map(|(at, d)| (k.name(), d.clone(), *at)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(kind: RuleKind, above: f64, hold: f64, clear: f64) -> Rule {
        Rule {
            kind,
            above,
            checks: 2,
            hold,
            clear,
        }
    }

    fn busy(n: u64) -> Sample {
        let mut s = Sample::default();
        s.status.insert("Threads_running".into(), n);
        s
    }

    fn see(inc: &mut Incidents, rules: &[Rule], now: f64, s: &Sample) -> Vec<IncidentEvent> {
        inc.observe(
            rules,
            "db1:3306",
            now,
            &Observation {
                health: &Health::Ok,
                failures: 0,
                sample: Some(s),
                rates: None,
                host: None,
            },
        )
    }

    #[test]
    fn opens_after_the_hold_time_not_before_and_resolves_once() {
        let rules = [rule(RuleKind::ThreadsRunning, 10.0, 5.0, 3.0)];
        let mut inc = Incidents::default();
        assert!(see(&mut inc, &rules, 0.0, &busy(20)).is_empty());
        assert!(see(&mut inc, &rules, 4.0, &busy(20)).is_empty());
        let e = see(&mut inc, &rules, 5.0, &busy(20));
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].phase, Phase::Opened);
        assert!(
            see(&mut inc, &rules, 6.0, &busy(20)).is_empty(),
            "one message per incident"
        );
        // flapping below the clear time: still the same incident
        assert!(see(&mut inc, &rules, 7.0, &busy(1)).is_empty());
        assert!(see(&mut inc, &rules, 8.0, &busy(20)).is_empty());
        assert!(see(&mut inc, &rules, 9.0, &busy(1)).is_empty());
        let e = see(&mut inc, &rules, 12.0, &busy(1));
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].phase, Phase::Resolved);
        assert_eq!(e[0].opened_at, 5.0);
        assert!(see(&mut inc, &rules, 13.0, &busy(1)).is_empty());
    }

    #[test]
    fn a_condition_that_drops_before_its_hold_never_opens() {
        let rules = [rule(RuleKind::ThreadsRunning, 10.0, 5.0, 3.0)];
        let mut inc = Incidents::default();
        for t in 0..4 {
            assert!(see(&mut inc, &rules, t as f64, &busy(20)).is_empty());
        }
        assert!(see(&mut inc, &rules, 4.0, &busy(1)).is_empty());
        // the clock starts again
        assert!(see(&mut inc, &rules, 5.0, &busy(20)).is_empty());
        assert!(see(&mut inc, &rules, 9.0, &busy(20)).is_empty());
        assert_eq!(see(&mut inc, &rules, 10.0, &busy(20)).len(), 1);
    }

    fn node(name: &str, size: u64, status: &str, local_state: u64) -> Sample {
        Sample {
            galera: Some(crate::sample::Galera {
                cluster: "prod".into(),
                node: name.into(),
                state: if local_state == 4 {
                    "Synced"
                } else {
                    "Donor/Desynced"
                }
                .into(),
                local_state,
                cluster_size: size,
                cluster_status: status.into(),
                ..Default::default()
            }),
            ..Sample::default()
        }
    }

    #[test]
    fn galera_conditions() {
        // (rule, sample, most seen, holds)
        let rows = [
            (
                rule(RuleKind::ClusterSize, 0.0, 0.0, 0.0),
                node("a", 3, "Primary", 4),
                3,
                false,
            ),
            (
                rule(RuleKind::ClusterSize, 0.0, 0.0, 0.0),
                node("a", 2, "Primary", 4),
                3,
                true,
            ),
            (
                rule(RuleKind::ClusterSize, 3.0, 0.0, 0.0),
                node("a", 2, "Primary", 4),
                2,
                true,
            ),
            (
                rule(RuleKind::ClusterSize, 0.0, 0.0, 0.0),
                node("a", 1, "non-Primary", 4),
                3,
                false,
            ),
            (
                rule(RuleKind::ClusterPrimary, 0.0, 0.0, 0.0),
                node("a", 1, "non-Primary", 4),
                3,
                true,
            ),
            (
                rule(RuleKind::ClusterPrimary, 0.0, 0.0, 0.0),
                node("a", 3, "Primary", 4),
                3,
                false,
            ),
            (
                rule(RuleKind::NodeSynced, 0.0, 0.0, 0.0),
                node("a", 3, "Primary", 2),
                3,
                true,
            ),
            (
                rule(RuleKind::NodeSynced, 0.0, 0.0, 0.0),
                node("a", 3, "Primary", 4),
                3,
                false,
            ),
            (
                rule(RuleKind::NodeSynced, 0.0, 0.0, 0.0),
                Sample::default(),
                0,
                false,
            ),
        ];
        for (r, sample, seen, holds) in rows {
            let o = Observation {
                health: &Health::Ok,
                failures: 0,
                sample: Some(&sample),
                rates: None,
                host: None,
            };
            assert_eq!(
                r.condition_seen(&o, seen).is_some(),
                holds,
                "{:?} {sample:?}",
                r.kind
            );
        }
        let paused = |p: f64| Rates {
            flow_control_paused: Some(p),
            ..Rates::default()
        };
        let s = node("a", 3, "Primary", 4);
        for (p, holds) in [(0.5, true), (0.05, false)] {
            let rates = paused(p);
            let o = Observation {
                health: &Health::Ok,
                failures: 0,
                sample: Some(&s),
                rates: Some(&rates),
                host: None,
            };
            assert_eq!(
                rule(RuleKind::FlowControl, 10.0, 0.0, 0.0)
                    .condition(&o)
                    .is_some(),
                holds
            );
        }
    }

    #[test]
    fn a_cluster_incident_is_one_message_however_many_nodes_see_it() {
        let rules = [rule(RuleKind::ClusterSize, 0.0, 0.0, 5.0)];
        let mut inc = Incidents::default();
        let seen = |inc: &mut Incidents, server: &str, now: f64, s: &Sample| {
            inc.observe(
                &rules,
                server,
                now,
                &Observation {
                    health: &Health::Ok,
                    failures: 0,
                    sample: Some(s),
                    rates: None,
                    host: None,
                },
            )
        };
        for n in ["a", "b", "c"] {
            assert!(seen(&mut inc, n, 0.0, &node(n, 3, "Primary", 4)).is_empty());
        }
        // c is gone: a and b both see 2 of 3; one message, for the cluster.
        let e = seen(&mut inc, "a", 1.0, &node("a", 2, "Primary", 4));
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].server, "cluster prod");
        assert_eq!(e[0].phase, Phase::Opened);
        assert!(seen(&mut inc, "b", 1.0, &node("b", 2, "Primary", 4)).is_empty());
        // c is back: resolved once, when the last node that saw it clears.
        for t in [2.0, 8.0] {
            // a clears at 8, but b still sees it: nothing yet.
            assert!(seen(&mut inc, "a", t, &node("a", 3, "Primary", 4)).is_empty());
        }
        let e = seen(&mut inc, "b", 2.0, &node("b", 3, "Primary", 4));
        assert!(e.is_empty());
        let e = seen(&mut inc, "b", 8.0, &node("b", 3, "Primary", 4));
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(
            (e[0].phase, e[0].server.as_str()),
            (Phase::Resolved, "cluster prod")
        );
    }

    #[test]
    fn unreachable_counts_checks_and_names_down_or_stalled() {
        let rules = [rule(RuleKind::Unreachable, 0.0, 0.0, 0.0)];
        let mut inc = Incidents::default();
        let down = Health::Down("refused".into());
        let obs = |h: &'static Health, failures| Observation {
            health: h,
            failures,
            sample: None,
            rates: None,
            host: None,
        };
        static DOWN: std::sync::OnceLock<Health> = std::sync::OnceLock::new();
        let h: &'static Health = DOWN.get_or_init(|| down.clone());
        assert!(inc.observe(&rules, "a", 0.0, &obs(h, 1)).is_empty());
        let e = inc.observe(&rules, "a", 1.0, &obs(h, 2));
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].detail, "down: refused");
        assert_eq!(inc.open_on("a").len(), 1);
        let e = inc.observe(&rules, "a", 2.0, &obs(&Health::Ok, 0));
        assert_eq!(e[0].phase, Phase::Resolved);
    }
}

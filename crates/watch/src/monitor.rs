//! The poller: one task per server, every `interval`, at most one check in
//! flight per server, each bounded by the check deadline. Checks take a
//! permit from one of two lanes: servers that answered last time use the
//! live lane, failing ones the back-off lane (and, after the unreachable
//! rule's count of failures, a growing delay up to 30 s), so dead hosts
//! never hold slots that live ones need. Results land in the shared
//! [`Fleet`] (what the screens draw) and as [`Event`]s (state changes,
//! incidents, deliveries) for logs and JSON lines.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use serde::Serialize;
use sqlfleet_conn::Target;
use sqlfleet_fanout::hosts::Host;
use tokio::sync::{mpsc, Semaphore};

use crate::config::NotifyConfig;
use crate::notify::{self, Delivery, Message};
use crate::probe::{self, Health};
use crate::rules::{IncidentEvent, Incidents, Observation, Phase, Rule, RuleKind};
use crate::sample::{rates, Rates, Sample};
use crate::ssh::{self, HostMetrics, Latest, SshTarget};
use crate::statements::{Baseline, Delta, Method};

/// A server's state, worst last (sorting by it puts the worst first when
/// reversed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Not checked yet.
    Unknown,
    Ok,
    /// Answering, with a rule's incident open.
    Degraded,
    /// Answering, but the monitor account may not read its status (the
    /// reason names the GRANT).
    Denied,
    /// Accepting connections but not answering within the deadline.
    Stalled,
    /// Refused, unreachable, or turning the login away.
    Down,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Unknown => "unknown",
            State::Ok => "ok",
            State::Degraded => "degraded",
            State::Denied => "denied",
            State::Stalled => "stalled",
            State::Down => "down",
        }
    }
}

/// How many samples the sparklines keep.
pub const HISTORY: usize = 60;

/// How many resolved incidents a server's view keeps.
pub const RECENT: usize = 5;

/// What the screens and `--json` show of one server.
#[derive(Debug, Clone, Serialize)]
pub struct Server {
    pub server: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    pub state: State,
    /// Why it is not ok ("" when ok).
    pub reason: String,
    /// Unix seconds of the last check.
    #[serde(serialize_with = "crate::when::iso_opt")]
    pub checked_at: Option<f64>,
    /// Unix seconds of the check that read `sample` (older than
    /// `checked_at` while the server does not answer).
    #[serde(serialize_with = "crate::when::iso_opt")]
    pub sampled_at: Option<f64>,
    /// Milliseconds the last login took (a kept connection logs in once).
    pub connect_ms: Option<f64>,
    /// Milliseconds the last check took (login, if any, and the queries).
    pub check_ms: Option<f64>,
    /// Checks made since the monitor started.
    pub checks: u64,
    pub failures: u32,
    pub sample: Option<Sample>,
    pub rates: Option<Rates>,
    pub host: Option<HostMetrics>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_error: Option<String>,
    pub incidents: Vec<OpenIncident>,
    /// The last few incidents that resolved, newest last (the screen's
    /// detail; the history keeps them all).
    #[serde(skip)]
    pub resolved: VecDeque<IncidentEvent>,
    #[serde(skip)]
    pub qps_history: VecDeque<f64>,
    #[serde(skip)]
    pub cpu_history: VecDeque<f64>,
    /// The last ten minutes of qps and threads running (the page's sparklines).
    #[serde(skip)]
    pub trend: crate::trend::Trend,
    /// Statement digests over the last minute (`statements.rs`); JSON
    /// carries the method and the top by time.
    #[serde(serialize_with = "crate::statements::serialize_window")]
    pub statements: crate::statements::Window,
}

#[derive(Debug, Clone, Serialize)]
pub struct OpenIncident {
    pub rule: &'static str,
    pub detail: String,
    #[serde(serialize_with = "crate::when::iso")]
    pub since: f64,
}

impl Server {
    pub fn new(h: &Host) -> Server {
        Server {
            server: h.addr(),
            tags: h
                .tags
                .iter()
                .filter(|(k, _)| k.as_str() != "password")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            state: State::Unknown,
            reason: String::new(),
            checked_at: None,
            sampled_at: None,
            connect_ms: None,
            check_ms: None,
            checks: 0,
            failures: 0,
            sample: None,
            rates: None,
            host: None,
            host_error: None,
            incidents: Vec::new(),
            resolved: VecDeque::new(),
            qps_history: VecDeque::new(),
            cpu_history: VecDeque::new(),
            trend: Default::default(),
            statements: Default::default(),
        }
    }
}

/// Every server, in inventory order.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Fleet {
    pub servers: Vec<Server>,
    /// How the states were judged, when not by the rules as configured
    /// (`--once`: one check, so no hold times).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judged: Option<&'static str>,
}

/// The fleet's view, read even when a panic elsewhere poisoned its lock:
/// a bug in one server's check must not stop the others' loops, the
/// pages, the metrics or the history.
pub fn read(fleet: &Mutex<Fleet>) -> std::sync::MutexGuard<'_, Fleet> {
    fleet.lock().unwrap_or_else(|e| e.into_inner())
}

impl Fleet {
    pub fn count(&self, s: State) -> usize {
        self.servers.iter().filter(|x| x.state == s).count()
    }
}

/// What happened, for logs and `--json` lines.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Event {
    State {
        #[serde(serialize_with = "crate::when::iso")]
        at: f64,
        server: String,
        from: State,
        to: State,
        reason: String,
    },
    Incident(IncidentEvent),
    Notification {
        #[serde(serialize_with = "crate::when::iso")]
        at: f64,
        subject: String,
        deliveries: Vec<Delivery>,
        /// The incident events the message carried.
        #[serde(skip)]
        events: Vec<IncidentEvent>,
    },
}

/// One server to watch.
#[derive(Debug, Clone)]
pub struct Watched {
    pub host: Host,
    pub target: Target,
    pub ssh: Option<SshTarget>,
}

#[derive(Debug, Clone)]
pub struct MonitorConfig {
    pub servers: Vec<Watched>,
    pub interval: Duration,
    pub timeout: Duration,
    pub parallel: usize,
    pub rules: Vec<Rule>,
    pub notify: NotifyConfig,
    pub batch: Duration,
    /// Read statement figures (`statements.rs`) with each check.
    pub statements: bool,
}

pub use crate::when::now_unix;

fn push(h: &mut VecDeque<f64>, v: f64) {
    if h.len() == HISTORY {
        h.pop_front();
    }
    h.push_back(v);
}

/// What `--once` says of its judgement.
pub const ONCE: &str = "on one check: each rule without its hold time (a busy moment counts), the unreachable rule at the first failure";

/// Checks every server once, at most `parallel` at a time; rules are
/// judged on that one check (no hold times: there is no history).
pub async fn once(cfg: &MonitorConfig) -> Fleet {
    let sem = Arc::new(Semaphore::new(cfg.parallel.max(1)));
    let rules: Vec<Rule> = cfg
        .rules
        .iter()
        .map(|r| Rule {
            hold: 0.0,
            checks: 1,
            ..r.clone()
        })
        .collect();
    let mut tasks = Vec::new();
    for w in cfg.servers.clone() {
        let (sem, timeout, interval, wanted) =
            (sem.clone(), cfg.timeout, cfg.interval, cfg.statements);
        tasks.push(tokio::spawn(async move {
            let _p = sem.acquire().await.ok();
            let mut link = None;
            let c = guarded_check(&w.target, &mut link, timeout).await;
            // Statement figures need two reads of performance_schema's
            // counters: the second one interval after the first.
            let mut baseline = Baseline::default();
            let mut statements = match wanted {
                true => read_statements(&mut link, &c, &mut baseline, interval, timeout).await,
                false => None,
            };
            if statements
                .as_ref()
                .is_some_and(|(m, _)| *m == Method::PerformanceSchema)
            {
                tokio::time::sleep(interval).await;
                statements = read_statements(&mut link, &c, &mut baseline, interval, timeout).await;
            }
            (w, c, statements)
        }));
    }
    let mut fleet = Fleet {
        judged: Some(ONCE),
        ..Fleet::default()
    };
    for t in tasks {
        let Ok((w, c, statements)) = t.await else {
            continue;
        };
        let mut s = Server::new(&w.host);
        let now = now_unix();
        if let Some((method, deltas)) = statements {
            s.statements
                .add(now, cfg.interval.as_secs_f64(), method, deltas);
        }
        let mut inc = Incidents::default();
        apply(&mut s, &c, None, &rules, &mut inc, now);
        fleet.servers.push(s);
    }
    fleet
}

/// What statements ran since the previous read, by the server's method:
/// performance_schema's digest counters where it is on (the first read
/// only sets `baseline`), else the statements the check saw running.
/// `None` when the server did not answer; a server that refuses the
/// digest table (a privilege) is sampled from its processlist.
async fn read_statements(
    link: &mut Option<probe::Link>,
    c: &probe::Check,
    baseline: &mut Baseline,
    interval: Duration,
    timeout: Duration,
) -> Option<(Method, Vec<Delta>)> {
    let sample = c.sample.as_ref().filter(|_| c.health == Health::Ok)?;
    let seen = || {
        let d = crate::statements::seen_running(&sample.statements_running, interval.as_secs_f64());
        Some((Method::Processlist, d))
    };
    if !sample.performance_schema {
        return seen();
    }
    let l = link.as_mut()?;
    // Seen since the previous read (a whole second more, and one more for
    // the clocks' rounding): a digest that ran since is always in it.
    let since = baseline.primed().then(|| interval.as_secs() + 2);
    match tokio::time::timeout(timeout, probe::read_digests(l, since)).await {
        Ok(Ok(rows)) => Some((Method::PerformanceSchema, baseline.deltas(&rows))),
        Ok(Err(sqlfleet_wire::WireError::Server { .. })) => seen(),
        _ => {
            *link = None;
            None
        }
    }
}

/// [`bounded_check`], where a panic in the check (a bug, or a parser
/// meeting a reply it cannot take) makes the server down for this check
/// with the panic's words, never a server whose view stops changing.
async fn guarded_check(
    target: &Target,
    link: &mut Option<probe::Link>,
    timeout: Duration,
) -> probe::Check {
    let taken = Instant::now();
    let checked = std::panic::AssertUnwindSafe(bounded_check(target, link, timeout))
        .catch_unwind()
        .await;
    checked.unwrap_or_else(|p| {
        *link = None;
        probe::Check {
            health: Health::Down(format!(
                "sqlfleet's check of this server stopped at an internal error ({}): {}",
                sqlfleet_conn::text::A_BUG,
                sqlfleet_conn::text::panic_message(p.as_ref())
            )),
            connect: None,
            sample: None,
            taken,
        }
    })
}

async fn bounded_check(
    target: &Target,
    link: &mut Option<probe::Link>,
    timeout: Duration,
) -> probe::Check {
    sqlfleet_faults::point!("watch::check");
    let taken = Instant::now();
    // The check bounds its own login and queries; this outer bound is a
    // guard (a margin so the check's own, better-worded timeout wins).
    match tokio::time::timeout(
        timeout + Duration::from_millis(300),
        probe::check(target, link, timeout),
    )
    .await
    {
        Ok(c) => c,
        Err(_) => {
            *link = None;
            probe::Check {
                health: Health::Stalled(format!("no answer within {:.1}s", timeout.as_secs_f64())),
                connect: None,
                sample: None,
                taken,
            }
        }
    }
}

/// Folds one check into a server's view; returns the incident events.
fn apply(
    s: &mut Server,
    c: &probe::Check,
    prev: Option<(&Sample, Instant)>,
    rules: &[Rule],
    inc: &mut Incidents,
    now: f64,
) -> Vec<IncidentEvent> {
    s.checked_at = Some(now);
    s.check_ms = Some(c.taken.elapsed().as_secs_f64() * 1000.0);
    s.checks += 1;
    if let Some(d) = c.connect {
        s.connect_ms = Some(d.as_secs_f64() * 1000.0);
    }
    match &c.health {
        // A server that answers is not failing (the unreachable rule and
        // the back-off count failures).
        Health::Ok | Health::Denied(_) => s.failures = 0,
        _ => s.failures = s.failures.saturating_add(1),
    }
    if let (Some(cur), Some((p, at))) = (&c.sample, prev) {
        s.rates = rates(p, cur, c.taken.duration_since(at).as_secs_f64());
    } else if c.sample.is_none() {
        s.rates = None;
    }
    if let Some(r) = &s.rates {
        push(&mut s.qps_history, r.qps);
        if let Some(x) = &c.sample {
            s.trend
                .push(now, r.qps, x.counter("Threads_running") as f64);
        }
    }
    if let Some(cpu) = s.host.as_ref().and_then(|h| h.cpu_percent) {
        push(&mut s.cpu_history, cpu);
    }
    if c.sample.is_some() {
        s.sample = c.sample.clone();
        s.sampled_at = Some(now);
    }
    // A Galera node says which cluster it is in: the fleet view can group
    // by it even when the host list did not (a tag given wins).
    if let Some(g) = c.sample.as_ref().and_then(|x| x.galera.as_ref()) {
        if !g.cluster.is_empty() {
            s.tags
                .entry("cluster".to_string())
                .or_insert_with(|| g.cluster.clone());
        }
    }
    let mut events = inc.observe(
        rules,
        &s.server,
        now,
        &Observation {
            health: &c.health,
            failures: s.failures,
            sample: c.sample.as_ref(),
            rates: s.rates.as_ref(),
            host: s.host.as_ref(),
        },
    );
    // A server busy, maxed out or short of connections: the incident
    // names the statements that cost it most in the minute before.
    for e in events.iter_mut() {
        let busy = [
            RuleKind::Cpu,
            RuleKind::ThreadsRunning,
            RuleKind::Connections,
        ]
        .iter()
        .any(|k| k.name() == e.rule);
        if busy && e.phase == Phase::Opened {
            let running = c
                .sample
                .as_ref()
                .map_or(&[][..], |x| x.statements_running.as_slice());
            if let Some(cause) = crate::statements::cause(&s.statements, running, 3) {
                e.detail = format!("{}; {cause}", e.detail);
            }
        }
    }
    for e in events.iter().filter(|e| e.phase == Phase::Resolved) {
        if s.resolved.len() == RECENT {
            s.resolved.pop_front();
        }
        s.resolved.push_back(e.clone());
    }
    s.incidents = inc
        .open_on(&s.server)
        .into_iter()
        .map(|(rule, detail, since)| OpenIncident {
            rule,
            detail,
            since,
        })
        .collect();
    let degraded: Vec<String> = s
        .incidents
        .iter()
        .filter(|i| i.rule != RuleKind::Unreachable.name())
        .map(|i| format!("{}: {}", i.rule, i.detail))
        .collect();
    (s.state, s.reason) = match &c.health {
        Health::Down(why) => (State::Down, why.clone()),
        Health::Denied(why) => (State::Denied, why.clone()),
        Health::Stalled(why) => (State::Stalled, why.clone()),
        Health::Ok if !degraded.is_empty() => (State::Degraded, degraded.join("; ")),
        Health::Ok => (State::Ok, String::new()),
    };
    events
}

/// Starts watching: returns the shared view and the event stream. Runs
/// until the runtime stops.
pub fn start(cfg: MonitorConfig) -> (Arc<Mutex<Fleet>>, mpsc::UnboundedReceiver<Event>) {
    let fleet = Arc::new(Mutex::new(Fleet {
        servers: cfg.servers.iter().map(|w| Server::new(&w.host)).collect(),
        judged: None,
    }));
    let (etx, erx) = mpsc::unbounded_channel::<Event>();
    let (dtx, mut drx) = mpsc::unbounded_channel::<(Message, Vec<Delivery>)>();
    let notifier = notify::spawn(cfg.notify.clone(), cfg.batch, dtx);
    {
        let etx = etx.clone();
        tokio::spawn(async move {
            while let Some((m, d)) = drx.recv().await {
                let _ = etx.send(Event::Notification {
                    at: now_unix(),
                    subject: m.subject,
                    deliveries: d,
                    events: m.events,
                });
            }
        });
    }
    let live = Arc::new(Semaphore::new(cfg.parallel.max(1)));
    let backoff = Arc::new(Semaphore::new((cfg.parallel / 8).max(4)));
    let incidents = Arc::new(Mutex::new(Incidents::default()));
    let cfg = Arc::new(cfg);
    for (i, w) in cfg.servers.iter().cloned().enumerate() {
        let ctx = Ctx {
            cfg: cfg.clone(),
            fleet: fleet.clone(),
            events: etx.clone(),
            notifier: notifier.clone(),
            live: live.clone(),
            backoff: backoff.clone(),
            incidents: incidents.clone(),
        };
        // Spread the first checks over the interval so a big fleet does
        // not arrive at the same instant every second.
        let offset = cfg
            .interval
            .mul_f64(i as f64 / cfg.servers.len().max(1) as f64);
        tokio::spawn(async move {
            tokio::time::sleep(offset).await;
            server_loop(ctx, i, w).await
        });
    }
    (fleet, erx)
}

struct Ctx {
    cfg: Arc<MonitorConfig>,
    fleet: Arc<Mutex<Fleet>>,
    events: mpsc::UnboundedSender<Event>,
    notifier: mpsc::UnboundedSender<IncidentEvent>,
    live: Arc<Semaphore>,
    backoff: Arc<Semaphore>,
    incidents: Arc<Mutex<Incidents>>,
}

async fn server_loop(ctx: Ctx, index: usize, w: Watched) {
    let cfg = &ctx.cfg;
    let unreachable_checks = cfg
        .rules
        .iter()
        .find(|r| r.kind == RuleKind::Unreachable)
        .map(|r| r.checks)
        .unwrap_or(3);
    let mut link: Option<probe::Link> = None;
    let mut prev: Option<(Sample, Instant)> = None;
    let mut baseline = Baseline::default();
    let mut last_read: Option<Instant> = None;
    let mut failures = 0u32;
    let host_metrics: Arc<Mutex<Latest>> = Arc::default();
    let mut ssh_task: Option<tokio::task::JoinHandle<()>> = None;
    let mut next = tokio::time::Instant::now();
    loop {
        let lane = if failures == 0 {
            &ctx.live
        } else {
            &ctx.backoff
        };
        let (c, statements) = {
            let _permit = lane.acquire().await.ok();
            let c = guarded_check(&w.target, &mut link, cfg.timeout).await;
            let st = match cfg.statements {
                true => {
                    read_statements(&mut link, &c, &mut baseline, cfg.interval, cfg.timeout).await
                }
                false => None,
            };
            (c, st)
        };
        let now = now_unix();
        if let (Some(ssh), Some(s), None) = (&w.ssh, &c.sample, &ssh_task) {
            ssh_task = Some(ssh::spawn(
                ssh.clone(),
                s.datadir.clone(),
                cfg.interval,
                host_metrics.clone(),
            ));
        }
        let events = {
            // (A lock another server's loop poisoned by a panic is still
            // this server's view: it goes on being checked and shown.)
            let mut fleet = read(&ctx.fleet);
            let Some(s) = fleet.servers.get_mut(index) else {
                return;
            };
            if let Ok(l) = host_metrics.lock() {
                // Host figures older than three intervals are not shown as current.
                let fresh = l.at.is_some_and(|at| at.elapsed() < cfg.interval * 3);
                s.host = if fresh { l.metrics.clone() } else { None };
                s.host_error = l.error.clone();
            }
            if let Some((method, deltas)) = statements {
                let span = last_read.map_or(cfg.interval, |t| t.elapsed());
                last_read = Some(Instant::now());
                s.statements.add(now, span.as_secs_f64(), method, deltas);
            }
            let before = s.state;
            let mut inc = ctx.incidents.lock().unwrap_or_else(|e| e.into_inner());
            let events = apply(
                s,
                &c,
                prev.as_ref().map(|(p, at)| (p, *at)),
                &cfg.rules,
                &mut inc,
                now,
            );
            failures = s.failures;
            if s.state != before {
                let _ = ctx.events.send(Event::State {
                    at: now,
                    server: s.server.clone(),
                    from: before,
                    to: s.state,
                    reason: s.reason.clone(),
                });
            }
            events
        };
        for e in events {
            let _ = ctx.events.send(Event::Incident(e.clone()));
            let _ = ctx.notifier.send(e);
        }
        if let Some(s) = c.sample {
            prev = Some((s, c.taken));
        } else if !matches!(c.health, Health::Ok) {
            prev = None;
        }
        // Back-off: past the unreachable rule's count, wait longer each time.
        let delay = if failures > unreachable_checks {
            let k = (failures - unreachable_checks).min(5);
            (cfg.interval * (1u32 << k)).min(Duration::from_secs(30).max(cfg.interval))
        } else {
            cfg.interval
        };
        next += delay;
        let now_i = tokio::time::Instant::now();
        if next < now_i {
            // A slow check: start again from now rather than firing a burst.
            next = now_i;
        }
        tokio::time::sleep_until(next).await;
    }
}

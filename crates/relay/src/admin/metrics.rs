//! Counters and gauges, served in the Prometheus text format.

use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use crate::protocol::sql::Pin;

/// Upper bounds (seconds) of the pool wait and command latency histograms.
const WAIT_BUCKETS: [f64; 10] = [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0];

/// A histogram over WAIT_BUCKETS: one counter per bucket (rendered
/// cumulative, as Prometheus wants), a count and a sum.
#[derive(Default)]
pub struct Histogram {
    buckets: [AtomicU64; WAIT_BUCKETS.len()],
    count: AtomicU64,
    sum_us: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, d: std::time::Duration) {
        let s = d.as_secs_f64();
        if let Some(i) = WAIT_BUCKETS.iter().position(|b| s <= *b) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_us.fetch_add(d.as_micros() as u64, Relaxed);
    }

    /// The `_bucket`, `_sum` and `_count` lines; `labels` go before `le`.
    fn render(&self, o: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (i, b) in WAIT_BUCKETS.iter().enumerate() {
            cumulative += self.buckets[i].load(Relaxed);
            let _ = writeln!(o, "{name}_bucket{{{labels}le=\"{b}\"}} {cumulative}");
        }
        let count = self.count.load(Relaxed).max(cumulative);
        let _ = writeln!(o, "{name}_bucket{{{labels}le=\"+Inf\"}} {count}");
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{}}}", labels.trim_end_matches(','))
        };
        let _ = writeln!(
            o,
            "{name}_sum{braces} {}",
            self.sum_us.load(Relaxed) as f64 / 1e6
        );
        let _ = writeln!(o, "{name}_count{braces} {count}");
    }
}

/// What one backend did, for /metrics and /status.
#[derive(Default)]
pub struct BackendCounters {
    /// Client commands it answered.
    pub commands: AtomicU64,
    /// Of those, answered with an error (or lost).
    pub errors: AtomicU64,
    pub bytes_to_client: AtomicU64,
    /// Connections opened to it, and leases of an idle one.
    pub connects: AtomicU64,
    pub reuses: AtomicU64,
    /// Command latency as the client saw it (through the relay).
    pub latency: Histogram,
}

/// What the relay asks the server on its own behalf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnQuery {
    /// One database's view names (`view_calls.rs`).
    ViewNames,
    /// One view's definition.
    ViewDefinition,
    /// One table's triggers, defaults and columns (`write_effects.rs`).
    TableEffects,
    /// One table's type, triggers and acting foreign keys (`write_scope.rs`).
    TableScope,
    /// The relay account's own privileges (once).
    Privileges,
    /// Per-user mode: one account's login and grants (`accounts.rs`).
    Account,
}

impl OwnQuery {
    pub const ALL: [OwnQuery; 6] = [
        OwnQuery::ViewNames,
        OwnQuery::ViewDefinition,
        OwnQuery::TableEffects,
        OwnQuery::TableScope,
        OwnQuery::Privileges,
        OwnQuery::Account,
    ];

    /// Its label in /metrics.
    pub fn name(self) -> &'static str {
        match self {
            OwnQuery::ViewNames => "view_names",
            OwnQuery::ViewDefinition => "view_definition",
            OwnQuery::TableEffects => "table_effects",
            OwnQuery::TableScope => "table_scope",
            OwnQuery::Privileges => "privileges",
            OwnQuery::Account => "account",
        }
    }
}

/// A label value with `\`, `"` and newlines escaped.
pub fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[derive(Default)]
pub struct Metrics {
    /// One per configured backend, in order.
    pub backends: Vec<BackendCounters>,
    pub clients_connected: AtomicI64,
    pub clients_total: AtomicU64,
    /// Clients turned away with ERROR 1040 (relay.max_clients reached).
    pub clients_refused_full: AtomicU64,
    pub auth_failures: AtomicU64,
    /// Connections made to wait before their greeting (frontend/throttle.rs).
    pub login_delays: AtomicU64,
    pub commands: AtomicU64,
    pub errors: AtomicU64,
    pub backend_lost: AtomicU64,
    pub bytes_to_client: AtomicU64,
    pub bytes_to_backend: AtomicU64,
    pub backend_connects: AtomicU64,
    pub backend_connect_errors: AtomicU64,
    pub lease_timeouts: AtomicU64,
    pub lease_rejected: AtomicU64,
    pub resets: AtomicU64,
    pub reprepares: AtomicU64,
    pub state_syncs: AtomicU64,
    /// Statements answered from a recorded server reply.
    pub answered_locally: AtomicU64,
    pub read_retries: AtomicU64,
    /// Statements run again on another server after theirs was lost
    /// where nothing of the client's was lost with it (a BEGIN, a read,
    /// a write under autocommit = 0).
    pub lost_retries: AtomicU64,
    /// Transactions replayed on another server after theirs was lost.
    pub replays: AtomicU64,
    /// Replays that failed: a reply differed, or no server took it in
    /// time (the client saw the lost connection).
    pub replay_failures: AtomicU64,
    /// Of those, replays a reply differed in (the rest found no server in
    /// time).
    pub replay_mismatches: AtomicU64,
    /// Lost connections in a transaction the relay could not replay (the
    /// client saw the lost connection): an unknown COMMIT, a statement that
    /// may have committed, a transaction it could not follow.
    pub replay_given_up: AtomicU64,
    pub consistency_waits: AtomicU64,
    pub consistency_fallbacks: AtomicU64,
    pins: [AtomicU64; Pin::ALL.len()],
    /// Queries the relay sent on its own behalf, by kind.
    own: [AtomicU64; OwnQuery::ALL.len()],
    wait: Histogram,
    /// Client logins, from accept to the final OK (greeting, TLS,
    /// credentials, and the first lease when the login needs one).
    pub login: Histogram,
    /// Sessions moved to a less busy event loop.
    pub session_moves: AtomicU64,
    /// Where sessions run (set when the relay starts serving).
    pub loops: std::sync::OnceLock<std::sync::Arc<crate::event_loops::Placement>>,
}

/// Per-backend gauges the pool reports at scrape time.
#[derive(serde::Serialize)]
pub struct BackendGauge {
    pub addr: String,
    /// `unix:/path` when it is reached through a socket.
    pub socket: Option<String>,
    /// Clients holding one of its connections.
    pub busy: usize,
    pub open: usize,
    pub idle: usize,
    pub waiting: usize,
    /// The last health check (or a client) found it up.
    pub up: bool,
    /// "primary", "replica" or "down"; on a Galera cluster "writer",
    /// "reader" or "excluded".
    pub role: &'static str,
    /// Seconds_Behind_Master, when it replicates.
    pub lag: Option<u64>,
}

impl Metrics {
    /// Counters for `backends` backends.
    pub fn new(backends: usize) -> Metrics {
        Metrics {
            backends: (0..backends).map(|_| BackendCounters::default()).collect(),
            ..Metrics::default()
        }
    }

    /// The counters of backend `i` (a spare set if out of range).
    pub fn backend(&self, i: usize) -> Option<&BackendCounters> {
        self.backends.get(i)
    }

    pub fn pin(&self, p: Pin) {
        if let Some(i) = Pin::ALL.iter().position(|&x| x == p) {
            self.pins[i].fetch_add(1, Relaxed);
        }
    }

    /// Counts one query the relay sent on its own behalf.
    pub fn own_query(&self, k: OwnQuery) {
        if let Some(i) = OwnQuery::ALL.iter().position(|&x| x == k) {
            self.own[i].fetch_add(1, Relaxed);
        }
    }

    /// Own queries of kind `k` so far.
    pub fn own_queries(&self, k: OwnQuery) -> u64 {
        OwnQuery::ALL
            .iter()
            .position(|&x| x == k)
            .map_or(0, |i| self.own[i].load(Relaxed))
    }

    pub fn pins(&self, p: Pin) -> u64 {
        Pin::ALL
            .iter()
            .position(|&x| x == p)
            .map_or(0, |i| self.pins[i].load(Relaxed))
    }

    pub fn wait(&self, d: std::time::Duration) {
        self.wait.observe(d);
    }

    pub fn render(&self, backends: &[BackendGauge]) -> String {
        let mut o = String::new();
        let mut one = |name: &str, kind: &str, help: &str, v: String| {
            let _ = writeln!(o, "# HELP sqlfleet_relay_{name} {help}");
            let _ = writeln!(o, "# TYPE sqlfleet_relay_{name} {kind}");
            let _ = writeln!(o, "sqlfleet_relay_{name} {v}");
        };
        let g = |a: &AtomicU64| a.load(Relaxed).to_string();
        one(
            "clients_connected",
            "gauge",
            "Client connections open.",
            self.clients_connected.load(Relaxed).to_string(),
        );
        one(
            "clients_total",
            "counter",
            "Client connections accepted.",
            g(&self.clients_total),
        );
        one(
            "clients_refused_total",
            "counter",
            "Clients turned away with ERROR 1040 at the handshake: relay.max_clients were connected.",
            g(&self.clients_refused_full),
        );
        one(
            "auth_failures_total",
            "counter",
            "Client logins refused.",
            g(&self.auth_failures),
        );
        one(
            "login_delays_total",
            "counter",
            "Connections that waited before their greeting: their address had failed logins in a row.",
            g(&self.login_delays),
        );
        one(
            "commands_total",
            "counter",
            "Client commands handled.",
            g(&self.commands),
        );
        one(
            "errors_total",
            "counter",
            "Commands answered with an error.",
            g(&self.errors),
        );
        one(
            "backend_lost_total",
            "counter",
            "Backend connections lost mid-command.",
            g(&self.backend_lost),
        );
        one(
            "bytes_to_client_total",
            "counter",
            "Bytes forwarded to clients.",
            g(&self.bytes_to_client),
        );
        one(
            "bytes_to_backend_total",
            "counter",
            "Bytes forwarded to backends.",
            g(&self.bytes_to_backend),
        );
        one(
            "backend_connects_total",
            "counter",
            "Backend connections opened.",
            g(&self.backend_connects),
        );
        one(
            "backend_connect_errors_total",
            "counter",
            "Backend connections that failed to open.",
            g(&self.backend_connect_errors),
        );
        one(
            "pool_wait_timeouts_total",
            "counter",
            "Clients that waited too long for a backend connection.",
            g(&self.lease_timeouts),
        );
        one(
            "pool_wait_rejected_total",
            "counter",
            "Clients refused because too many were waiting.",
            g(&self.lease_rejected),
        );
        one(
            "backend_resets_total",
            "counter",
            "COM_RESET_CONNECTION sent before reuse.",
            g(&self.resets),
        );
        one(
            "reprepares_total",
            "counter",
            "Statements prepared again on another backend connection.",
            g(&self.reprepares),
        );
        one(
            "answered_locally_total",
            "counter",
            "Connect-time variable reads answered from the server's recorded reply.",
            g(&self.answered_locally),
        );
        one(
            "state_syncs_total",
            "counter",
            "Session state replayed on a backend connection.",
            g(&self.state_syncs),
        );
        for (name, help, v) in [
            (
                "read_retries_total",
                "Reads retried on another backend after their replica died.",
                &self.read_retries,
            ),
            (
                "lost_retries_total",
                "Statements run again after their server connection was lost with nothing of the client's on it (BEGIN, a read, a write under autocommit=0).",
                &self.lost_retries,
            ),
            (
                "transaction_replays_total",
                "Transactions replayed on another server after theirs was lost, every reply the same.",
                &self.replays,
            ),
            (
                "transaction_replay_failures_total",
                "Transaction replays that failed (a reply differed, or no server took it in time); the client saw the lost connection.",
                &self.replay_failures,
            ),
            (
                "transaction_replay_mismatches_total",
                "Transaction replays that failed because a reply differed from the one the client was given (someone changed what the transaction read, a key taken).",
                &self.replay_mismatches,
            ),
            (
                "transaction_replay_refused_total",
                "Transactions lost with their server and not replayed (an unknown COMMIT, a statement that may have committed, state the relay could not follow).",
                &self.replay_given_up,
            ),
            (
                "consistency_waits_total",
                "Replica reads that waited for the client's own write.",
                &self.consistency_waits,
            ),
            (
                "consistency_fallbacks_total",
                "Reads sent to the primary because a replica had not caught up.",
                &self.consistency_fallbacks,
            ),
        ] {
            one(name, "counter", help, g(v));
        }
        one(
            "session_moves_total",
            "counter",
            "Sessions moved to a less busy event loop between commands.",
            g(&self.session_moves),
        );
        if let Some(p) = self.loops.get() {
            let _ = writeln!(
                o,
                "# HELP sqlfleet_relay_loop_sessions Client sessions each event loop serves."
            );
            let _ = writeln!(o, "# TYPE sqlfleet_relay_loop_sessions gauge");
            for (i, n) in p.counts().into_iter().enumerate() {
                let _ = writeln!(o, "sqlfleet_relay_loop_sessions{{loop=\"{i}\"}} {n}");
            }
        }
        let _ = writeln!(o, "# HELP sqlfleet_relay_own_queries_total Queries the relay sent to the server on its own behalf (lookups), by kind; none scans the whole catalog.");
        let _ = writeln!(o, "# TYPE sqlfleet_relay_own_queries_total counter");
        for (i, k) in OwnQuery::ALL.iter().enumerate() {
            let _ = writeln!(
                o,
                "sqlfleet_relay_own_queries_total{{kind=\"{}\"}} {}",
                k.name(),
                self.own[i].load(Relaxed)
            );
        }
        let _ = writeln!(o, "# HELP sqlfleet_relay_pins_total Times a client was pinned to its backend connection, by reason.");
        let _ = writeln!(o, "# TYPE sqlfleet_relay_pins_total counter");
        for (i, p) in Pin::ALL.iter().enumerate() {
            let _ = writeln!(
                o,
                "sqlfleet_relay_pins_total{{reason=\"{}\"}} {}",
                p.name(),
                self.pins[i].load(Relaxed)
            );
        }
        let _ = writeln!(
            o,
            "# HELP sqlfleet_relay_pool_wait_seconds Time clients waited for a backend connection."
        );
        let _ = writeln!(o, "# TYPE sqlfleet_relay_pool_wait_seconds histogram");
        self.wait
            .render(&mut o, "sqlfleet_relay_pool_wait_seconds", "");
        let _ = writeln!(
            o,
            "# HELP sqlfleet_relay_login_seconds Client logins, from accept to the final OK."
        );
        let _ = writeln!(o, "# TYPE sqlfleet_relay_login_seconds histogram");
        self.login
            .render(&mut o, "sqlfleet_relay_login_seconds", "");
        for (name, help, f) in [
            (
                "backend_commands_total",
                "Client commands the backend answered.",
                (|c: &BackendCounters| c.commands.load(Relaxed)) as fn(&BackendCounters) -> u64,
            ),
            (
                "backend_errors_total",
                "Client commands the backend answered with an error (or lost).",
                |c| c.errors.load(Relaxed),
            ),
            (
                "backend_bytes_to_client_total",
                "Reply bytes from the backend forwarded to clients.",
                |c| c.bytes_to_client.load(Relaxed),
            ),
            (
                "backend_connections_created_total",
                "Connections the pool opened to the backend.",
                |c| c.connects.load(Relaxed),
            ),
            (
                "backend_connections_reused_total",
                "Leases of an idle pooled connection to the backend.",
                |c| c.reuses.load(Relaxed),
            ),
        ] {
            let _ = writeln!(o, "# HELP sqlfleet_relay_{name} {help}");
            let _ = writeln!(o, "# TYPE sqlfleet_relay_{name} counter");
            for (b, c) in backends.iter().zip(&self.backends) {
                let _ = writeln!(
                    o,
                    "sqlfleet_relay_{name}{{backend=\"{}\"}} {}",
                    label(&b.addr),
                    f(c)
                );
            }
        }
        let _ = writeln!(
            o,
            "# HELP sqlfleet_relay_backend_command_seconds Client command latency through the relay, by backend."
        );
        let _ = writeln!(o, "# TYPE sqlfleet_relay_backend_command_seconds histogram");
        for (b, c) in backends.iter().zip(&self.backends) {
            c.latency.render(
                &mut o,
                "sqlfleet_relay_backend_command_seconds",
                &format!("backend=\"{}\",", label(&b.addr)),
            );
        }
        let _ = writeln!(
            o,
            "# HELP sqlfleet_relay_backend_up 1 when the last health check (or a client) found the backend up."
        );
        let _ = writeln!(o, "# TYPE sqlfleet_relay_backend_up gauge");
        for b in backends {
            let _ = writeln!(
                o,
                "sqlfleet_relay_backend_up{{backend=\"{}\"}} {}",
                label(&b.addr),
                u8::from(b.up)
            );
        }
        let _ = writeln!(
            o,
            "# HELP sqlfleet_relay_backend_role The role the relay gives the backend: 1 for its current one."
        );
        let _ = writeln!(o, "# TYPE sqlfleet_relay_backend_role gauge");
        for b in backends {
            for role in ["primary", "replica", "writer", "reader", "excluded", "down"] {
                let _ = writeln!(
                    o,
                    "sqlfleet_relay_backend_role{{backend=\"{}\",role=\"{role}\"}} {}",
                    label(&b.addr),
                    u8::from(b.role == role)
                );
            }
        }
        let _ = writeln!(
            o,
            "# HELP sqlfleet_relay_backend_lag_seconds Replication lag of a backend that replicates (Seconds_Behind_Master)."
        );
        let _ = writeln!(o, "# TYPE sqlfleet_relay_backend_lag_seconds gauge");
        for b in backends {
            if let Some(lag) = b.lag {
                let _ = writeln!(
                    o,
                    "sqlfleet_relay_backend_lag_seconds{{backend=\"{}\"}} {lag}",
                    label(&b.addr)
                );
            }
        }
        for (name, help, f) in [
            (
                "backend_connections",
                "Backend connections open (in use or idle).",
                (|b: &BackendGauge| b.open) as fn(&BackendGauge) -> usize,
            ),
            (
                "backend_idle",
                "Backend connections idle in the pool.",
                |b| b.idle,
            ),
            (
                "pool_waiting",
                "Clients waiting for a backend connection.",
                |b| b.waiting,
            ),
        ] {
            let _ = writeln!(o, "# HELP sqlfleet_relay_{name} {help}");
            let _ = writeln!(o, "# TYPE sqlfleet_relay_{name} gauge");
            for b in backends {
                let _ = writeln!(
                    o,
                    "sqlfleet_relay_{name}{{backend=\"{}\"}} {}",
                    label(&b.addr),
                    f(b)
                );
            }
        }
        o
    }
}

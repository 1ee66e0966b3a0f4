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
    /// The cache's binlog follower: where the primary's binary log ends,
    /// and its checks before following (`cache/follower.rs`).
    BinlogPosition,
}

impl OwnQuery {
    pub const ALL: [OwnQuery; 7] = [
        OwnQuery::ViewNames,
        OwnQuery::ViewDefinition,
        OwnQuery::TableEffects,
        OwnQuery::TableScope,
        OwnQuery::Privileges,
        OwnQuery::Account,
        OwnQuery::BinlogPosition,
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
            OwnQuery::BinlogPosition => "binlog_position",
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
    /// Clients' FOUND_ROWS() made on a connection before a statement
    /// that may keep it (`ClientState::found_rows_restore`).
    pub found_rows_restored: AtomicU64,
    /// The relay's own `SELECT FOUND_ROWS()` after a client's statement
    /// whose count only the server knew (`ClientState::found_rows_ask`).
    pub found_rows_asked: AtomicU64,
    /// The relay's own `SELECT LAST_INSERT_ID()` after a client's INSERT
    /// whose ids it could not tell generated from written
    /// (`protocol/sql/insert_id.rs`).
    pub insert_id_asked: AtomicU64,
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
    pins: PinCounts,
    /// Queries the relay sent on its own behalf, by kind.
    own: [AtomicU64; OwnQuery::ALL.len()],
    wait: Histogram,
    /// Client logins, from accept to the final OK (greeting, TLS,
    /// credentials, and the first lease when the login needs one).
    pub login: Histogram,
    /// Sessions moved to a less busy event loop.
    pub session_moves: AtomicU64,
    /// Panics caught in the relay's own work (see `admin/log.rs`,
    /// `internal_error`).
    pub internal_errors: AtomicU64,
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
    /// Its new sessions read with other settings than the primary's: no
    /// reads go to it (`routing/defaults.rs`).
    pub settings_differ: bool,
    /// Its replication filters leave part of the primary's data out: no
    /// general reads go to it.
    pub filtered: bool,
}

/// A count per pin reason (more reasons than `Default` takes for an
/// array).
struct PinCounts([AtomicU64; Pin::ALL.len()]);

impl Default for PinCounts {
    fn default() -> Self {
        PinCounts(std::array::from_fn(|_| AtomicU64::new(0)))
    }
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
            self.pins.0[i].fetch_add(1, Relaxed);
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
            .map_or(0, |i| self.pins.0[i].load(Relaxed))
    }

    pub fn wait(&self, d: std::time::Duration) {
        self.wait.observe(d);
    }

    pub fn render(&self, backends: &[BackendGauge]) -> String {
        let mut o = String::new();
        family(
            &mut o,
            "clients_connected",
            "gauge",
            "Client connections open.",
        );
        let _ = writeln!(
            o,
            "sqlfleet_relay_clients_connected {}",
            self.clients_connected.load(Relaxed)
        );
        for (name, help, counter) in COUNTERS {
            family(&mut o, name, "counter", help);
            let _ = writeln!(o, "sqlfleet_relay_{name} {}", counter(self).load(Relaxed));
        }
        self.render_labelled(&mut o);
        render_backends(&mut o, backends, &self.backends);
        o
    }

    /// The families with a label of the relay's own: sessions per event
    /// loop, own queries by kind, pins by reason, and the two histograms.
    fn render_labelled(&self, o: &mut String) {
        if let Some(p) = self.loops.get() {
            family(
                o,
                "loop_sessions",
                "gauge",
                "Client sessions each event loop serves.",
            );
            for (i, n) in p.counts().into_iter().enumerate() {
                let _ = writeln!(o, "sqlfleet_relay_loop_sessions{{loop=\"{i}\"}} {n}");
            }
        }
        family(o, "own_queries_total", "counter", "Queries the relay sent to the server on its own behalf (lookups), by kind; none scans the whole catalog.");
        for (i, k) in OwnQuery::ALL.iter().enumerate() {
            let _ = writeln!(
                o,
                "sqlfleet_relay_own_queries_total{{kind=\"{}\"}} {}",
                k.name(),
                self.own[i].load(Relaxed)
            );
        }
        family(
            o,
            "pins_total",
            "counter",
            "Times a client was pinned to its backend connection, by reason.",
        );
        for (i, p) in Pin::ALL.iter().enumerate() {
            let _ = writeln!(
                o,
                "sqlfleet_relay_pins_total{{reason=\"{}\"}} {}",
                p.name(),
                self.pins.0[i].load(Relaxed)
            );
        }
        family(
            o,
            "pool_wait_seconds",
            "histogram",
            "Time clients waited for a backend connection.",
        );
        self.wait.render(o, "sqlfleet_relay_pool_wait_seconds", "");
        family(
            o,
            "login_seconds",
            "histogram",
            "Client logins, from accept to the final OK.",
        );
        self.login.render(o, "sqlfleet_relay_login_seconds", "");
    }
}

/// `# HELP` and `# TYPE` of family `sqlfleet_relay_<name>`.
fn family(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(o, "# HELP sqlfleet_relay_{name} {help}");
    let _ = writeln!(o, "# TYPE sqlfleet_relay_{name} {kind}");
}

/// The relay's counters without labels, as rendered: name, help, field.
type Counter = (&'static str, &'static str, fn(&Metrics) -> &AtomicU64);

const COUNTERS: &[Counter] = &[
    ("clients_total", "Client connections accepted.", |m| &m.clients_total),
    ("clients_refused_total", "Clients turned away with ERROR 1040 at the handshake: relay.max_clients were connected.", |m| &m.clients_refused_full),
    ("auth_failures_total", "Client logins refused.", |m| &m.auth_failures),
    ("login_delays_total", "Connections that waited before their greeting: their address had failed logins in a row.", |m| &m.login_delays),
    ("commands_total", "Client commands handled.", |m| &m.commands),
    ("errors_total", "Commands answered with an error.", |m| &m.errors),
    ("backend_lost_total", "Backend connections lost mid-command.", |m| &m.backend_lost),
    ("bytes_to_client_total", "Bytes forwarded to clients.", |m| &m.bytes_to_client),
    ("bytes_to_backend_total", "Bytes forwarded to backends.", |m| &m.bytes_to_backend),
    ("backend_connects_total", "Backend connections opened.", |m| &m.backend_connects),
    ("backend_connect_errors_total", "Backend connections that failed to open.", |m| &m.backend_connect_errors),
    ("pool_wait_timeouts_total", "Clients that waited too long for a backend connection.", |m| &m.lease_timeouts),
    ("pool_wait_rejected_total", "Clients refused because too many were waiting.", |m| &m.lease_rejected),
    ("backend_resets_total", "COM_RESET_CONNECTION sent before reuse.", |m| &m.resets),
    ("reprepares_total", "Statements prepared again on another backend connection.", |m| &m.reprepares),
    ("answered_locally_total", "Connect-time variable reads answered from the server's recorded reply.", |m| &m.answered_locally),
    ("found_rows_restored_total", "Statements a client's FOUND_ROWS() was made on their connection for first (one that may leave the count before it ran on a connection holding another's).", |m| &m.found_rows_restored),
    ("found_rows_asked_total", "Statements the relay ran to ask the server a client's FOUND_ROWS() (after a statement whose count only the server knew, before the connection went back to the pool).", |m| &m.found_rows_asked),
    ("insert_id_asked_total", "Statements the relay ran to ask the server a client's LAST_INSERT_ID() (after an INSERT whose ids it could not tell generated from written, before the connection went back to the pool).", |m| &m.insert_id_asked),
    ("state_syncs_total", "Session state replayed on a backend connection.", |m| &m.state_syncs),
    ("read_retries_total", "Reads retried on another backend after their replica died.", |m| &m.read_retries),
    ("lost_retries_total", "Statements run again after their server connection was lost with nothing of the client's on it (BEGIN, a read, a write under autocommit=0).", |m| &m.lost_retries),
    ("transaction_replays_total", "Transactions replayed on another server after theirs was lost, every reply the same.", |m| &m.replays),
    ("transaction_replay_failures_total", "Transaction replays that failed (a reply differed, or no server took it in time); the client saw the lost connection.", |m| &m.replay_failures),
    ("transaction_replay_mismatches_total", "Transaction replays that failed because a reply differed from the one the client was given (someone changed what the transaction read, a key taken).", |m| &m.replay_mismatches),
    ("transaction_replay_refused_total", "Transactions lost with their server and not replayed (an unknown COMMIT, a statement that may have committed, state the relay could not follow).", |m| &m.replay_given_up),
    ("consistency_waits_total", "Replica reads that waited for the client's own write.", |m| &m.consistency_waits),
    ("consistency_fallbacks_total", "Reads sent to the primary because a replica had not caught up.", |m| &m.consistency_fallbacks),
    ("session_moves_total", "Sessions moved to a less busy event loop between commands.", |m| &m.session_moves),
    ("internal_errors_total", "Panics caught in the relay's own work (a bug; each is logged with its words): a client's session or its start (that client is dropped, the others go on), the pool's upkeep or the result cache's follower (started again). Alert on any increase.", |m| &m.internal_errors),
];

/// The counters a backend's clients count, as rendered.
type PerBackend = (&'static str, &'static str, fn(&BackendCounters) -> u64);

const BACKEND_COUNTERS: &[PerBackend] = &[
    (
        "backend_commands_total",
        "Client commands the backend answered.",
        |c| c.commands.load(Relaxed),
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
];

/// A backend's pool gauges, as rendered.
type PoolGauge = (&'static str, &'static str, fn(&BackendGauge) -> usize);

const POOL_GAUGES: &[PoolGauge] = &[
    (
        "backend_connections",
        "Backend connections open (in use or idle).",
        |b| b.open,
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
];

/// Family `name` with one sample per backend (`backend="addr"`); a backend
/// whose value is None has none.
fn by_backend<V: std::fmt::Display>(
    o: &mut String,
    (name, kind, help): (&str, &str, &str),
    rows: impl Iterator<Item = (String, Option<V>)>,
) {
    family(o, name, kind, help);
    for (addr, v) in rows {
        if let Some(v) = v {
            let _ = writeln!(o, "sqlfleet_relay_{name}{{backend=\"{addr}\"}} {v}");
        }
    }
}

/// Every family labelled by backend: its clients' counters and latency,
/// health, role, lag and pool.
fn render_backends(o: &mut String, backends: &[BackendGauge], counters: &[BackendCounters]) {
    let addr = |b: &BackendGauge| label(&b.addr);
    for (name, help, f) in BACKEND_COUNTERS {
        let rows = backends
            .iter()
            .zip(counters)
            .map(|(b, c)| (addr(b), Some(f(c))));
        by_backend(o, (name, "counter", help), rows);
    }
    family(
        o,
        "backend_command_seconds",
        "histogram",
        "Client command latency through the relay, by backend.",
    );
    for (b, c) in backends.iter().zip(counters) {
        c.latency.render(
            o,
            "sqlfleet_relay_backend_command_seconds",
            &format!("backend=\"{}\",", addr(b)),
        );
    }
    by_backend(
        o,
        (
            "backend_up",
            "gauge",
            "1 when the last health check (or a client) found the backend up.",
        ),
        backends.iter().map(|b| (addr(b), Some(u8::from(b.up)))),
    );
    family(
        o,
        "backend_role",
        "gauge",
        "The role the relay gives the backend: 1 for its current one.",
    );
    for b in backends {
        for role in ["primary", "replica", "writer", "reader", "excluded", "down"] {
            let _ = writeln!(
                o,
                "sqlfleet_relay_backend_role{{backend=\"{}\",role=\"{role}\"}} {}",
                addr(b),
                u8::from(b.role == role)
            );
        }
    }
    by_backend(
        o,
        (
            "backend_lag_seconds",
            "gauge",
            "Replication lag of a backend that replicates (Seconds_Behind_Master).",
        ),
        backends.iter().map(|b| (addr(b), b.lag)),
    );
    family(
        o,
        "backend_reads_withheld",
        "gauge",
        "1 when the relay sends the backend no reads a replica could take, as a read there would \
         answer otherwise than on the primary: its sessions' settings differ (reason=\"settings\") \
         or its replication filters leave data out (reason=\"filters\").",
    );
    for b in backends {
        for (reason, on) in [("settings", b.settings_differ), ("filters", b.filtered)] {
            let _ = writeln!(
                o,
                "sqlfleet_relay_backend_reads_withheld{{backend=\"{}\",reason=\"{reason}\"}} {}",
                addr(b),
                u8::from(on)
            );
        }
    }
    for (name, help, f) in POOL_GAUGES {
        let rows = backends.iter().map(|b| (addr(b), Some(f(b))));
        by_backend(o, (name, "gauge", help), rows);
    }
}

//! Which statements are hurting a server, and the fleet: per-digest
//! figures over a recent window, agentless, read over the connection the
//! checks already hold (`probe.rs` reads, this module decides; pure, with
//! table tests below).
//!
//! Two methods, named wherever the figures are shown:
//! - **performance_schema** (`events_statements_summary_by_digest`), where
//!   it is on: the server's counters since it started, turned into deltas
//!   between reads — calls, time, rows examined and sent, errors,
//!   statements that used no index;
//! - **processlist**, where it is off: the statements the check sees
//!   running (it reads the processlist anyway when something runs). A
//!   statement seen running in n reads has kept a thread busy about n
//!   intervals: its share of busy time, without call counts or latency.
//!
//! Digests are the dump crate's normalizer (the relay's too), so the same
//! statement on 200 shards is one row of the fleet's top.

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};

use serde::Serialize;

/// Where a server's statement figures come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    PerformanceSchema,
    Processlist,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::PerformanceSchema => "performance_schema",
            Method::Processlist => "processlist sampling",
        }
    }
}

/// One digest's counters as performance_schema keeps them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub calls: u64,
    /// Picoseconds.
    pub time_ps: u64,
    pub rows_examined: u64,
    pub rows_sent: u64,
    pub errors: u64,
    pub no_index: u64,
}

impl Counters {
    /// What was added since `before` (all of it when the counters went
    /// back: the table was truncated or the digest evicted and seen anew).
    fn since(&self, before: &Counters) -> Counters {
        if self.calls < before.calls || self.time_ps < before.time_ps {
            return *self;
        }
        Counters {
            calls: self.calls - before.calls,
            time_ps: self.time_ps - before.time_ps,
            rows_examined: self.rows_examined.saturating_sub(before.rows_examined),
            rows_sent: self.rows_sent.saturating_sub(before.rows_sent),
            errors: self.errors.saturating_sub(before.errors),
            no_index: self.no_index.saturating_sub(before.no_index),
        }
    }
}

/// A row of `events_statements_summary_by_digest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PsRow {
    pub schema: String,
    /// The server's digest hash (empty: the row of statements the full
    /// digest table had no room for).
    pub hash: String,
    /// The server's normalized text.
    pub text: String,
    pub counters: Counters,
}

/// What one read added, for one digest.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delta {
    /// The statement, normalized (`sqlfleet_dump::digest`).
    pub digest: String,
    pub schema: String,
    pub calls: u64,
    /// Time spent (performance_schema), or the busy time it was seen
    /// running (processlist: reads × interval).
    pub seconds: f64,
    pub rows_examined: u64,
    pub rows_sent: u64,
    pub errors: u64,
    pub no_index: u64,
    /// Reads that saw it running (processlist).
    pub seen: u64,
}

fn key(schema: &str, hash: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (schema, hash).hash(&mut h);
    h.finish()
}

fn normalize(text: &str) -> String {
    if text.is_empty() {
        return "(other statements: the server's digest table is full)".into();
    }
    sqlfleet_dump::digest::digest(text.as_bytes())
}

/// performance_schema's counters of one server between reads.
#[derive(Debug, Default)]
pub struct Baseline {
    prev: HashMap<u64, Counters>,
    primed: bool,
}

impl Baseline {
    /// Whether a first, whole read has been taken (later reads may ask
    /// only for the digests seen since).
    pub fn primed(&self) -> bool {
        self.primed
    }

    /// The deltas since the previous read. The first read only sets the
    /// baseline (its counters go back to the server's start). A digest
    /// not in the baseline is new since: all of it is the delta.
    pub fn deltas(&mut self, rows: &[PsRow]) -> Vec<Delta> {
        let first = !self.primed;
        self.primed = true;
        let mut out = Vec::new();
        for r in rows {
            let k = key(&r.schema, &r.hash);
            let d = match self.prev.insert(k, r.counters) {
                Some(before) => r.counters.since(&before),
                None => r.counters,
            };
            if first || d.calls == 0 {
                continue;
            }
            out.push(Delta {
                digest: normalize(&r.text),
                schema: r.schema.clone(),
                calls: d.calls,
                seconds: d.time_ps as f64 / 1e12,
                rows_examined: d.rows_examined,
                rows_sent: d.rows_sent,
                errors: d.errors,
                no_index: d.no_index,
                seen: 0,
            });
        }
        out
    }
}

/// The statements one read saw running (processlist: schema, text), as
/// deltas of `interval` seconds of busy time each.
pub fn seen_running(running: &[(String, String)], interval: f64) -> Vec<Delta> {
    let mut by: HashMap<(String, String), Delta> = HashMap::new();
    for (schema, text) in running {
        if text.trim().is_empty() {
            continue;
        }
        let digest = normalize(text);
        let d = by.entry((schema.clone(), digest.clone())).or_insert(Delta {
            digest,
            schema: schema.clone(),
            calls: 0,
            seconds: 0.0,
            rows_examined: 0,
            rows_sent: 0,
            errors: 0,
            no_index: 0,
            seen: 0,
        });
        d.seen += 1;
        d.seconds += interval;
    }
    let mut out: Vec<Delta> = by.into_values().collect();
    out.sort_by(|a, b| a.digest.cmp(&b.digest));
    out
}

/// How a top is ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortBy {
    /// Total time (the default: what costs the server most).
    #[default]
    Time,
    Calls,
    /// Average latency.
    Latency,
}

impl SortBy {
    pub fn parse(s: &str) -> Option<SortBy> {
        match s {
            "time" => Some(SortBy::Time),
            "calls" => Some(SortBy::Calls),
            "latency" => Some(SortBy::Latency),
            _ => None,
        }
    }
}

/// One digest's figures over a window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Top {
    pub digest: String,
    pub schema: String,
    pub calls: u64,
    pub calls_per_s: f64,
    /// Time spent (or busy time seen, processlist), seconds.
    pub seconds: f64,
    /// Average latency in milliseconds (performance_schema only).
    pub avg_ms: Option<f64>,
    /// Share of the window's statement time, 0..=1.
    pub share: f64,
    pub rows_examined: u64,
    pub rows_sent: u64,
    pub errors: u64,
    pub no_index: u64,
    /// Unix seconds of the first and last read it was in, in the window.
    #[serde(serialize_with = "crate::when::iso")]
    pub first_seen: f64,
    #[serde(serialize_with = "crate::when::iso")]
    pub last_seen: f64,
    /// Servers it ran on (1 for a server's own top).
    pub servers: usize,
}

/// A server's recent reads: when each was taken, the seconds it covers
/// (since the read before), what it added.
#[derive(Debug, Clone, Default)]
pub struct Window {
    pub method: Option<Method>,
    reads: VecDeque<(f64, f64, Vec<Delta>)>,
}

/// How far back a window looks, seconds.
pub const SPAN: f64 = 60.0;

impl Window {
    /// Adds a read taken at `at` (Unix seconds) covering the `span`
    /// seconds before it; reads older than [`SPAN`] go.
    pub fn add(&mut self, at: f64, span: f64, method: Method, deltas: Vec<Delta>) {
        if self.method != Some(method) {
            self.reads.clear();
            self.method = Some(method);
        }
        self.reads.push_back((at, span, deltas));
        while self.reads.front().is_some_and(|(t, _, _)| at - *t > SPAN) {
            self.reads.pop_front();
        }
    }

    /// The newest read: when it was taken, the seconds it covers, and
    /// what it added.
    pub fn newest(&self) -> Option<(f64, f64, &[Delta])> {
        self.reads
            .back()
            .map(|(at, span, ds)| (*at, *span, ds.as_slice()))
    }

    /// Seconds the window's reads cover.
    pub fn seconds(&self) -> f64 {
        self.reads.iter().map(|(_, span, _)| span).sum()
    }

    fn deltas(&self) -> impl Iterator<Item = (f64, &Delta)> {
        self.reads
            .iter()
            .flat_map(|(at, _, ds)| ds.iter().map(move |d| (*at, d)))
    }

    /// The first `n` digests by `by` (reads after `since` only, when given).
    pub fn top(&self, n: usize, by: SortBy) -> Vec<Top> {
        top_of(std::iter::once(self), n, by)
    }
}

/// The first `n` digests of several servers' windows together: one row
/// per digest and schema, whichever servers ran it.
pub fn top_of<'a>(windows: impl Iterator<Item = &'a Window>, n: usize, by: SortBy) -> Vec<Top> {
    let mut rows: HashMap<(&str, &str), (Top, std::collections::HashSet<usize>)> = HashMap::new();
    let mut span: f64 = 0.0;
    let mut total = 0.0;
    for (i, w) in windows.enumerate() {
        span = span.max(w.seconds());
        for (at, d) in w.deltas() {
            total += d.seconds;
            let (t, servers) = rows
                .entry((d.digest.as_str(), d.schema.as_str()))
                .or_insert_with(|| {
                    (
                        Top {
                            digest: d.digest.clone(),
                            schema: d.schema.clone(),
                            calls: 0,
                            calls_per_s: 0.0,
                            seconds: 0.0,
                            avg_ms: None,
                            share: 0.0,
                            rows_examined: 0,
                            rows_sent: 0,
                            errors: 0,
                            no_index: 0,
                            first_seen: at,
                            last_seen: at,
                            servers: 0,
                        },
                        Default::default(),
                    )
                });
            t.calls += d.calls;
            t.seconds += d.seconds;
            t.rows_examined += d.rows_examined;
            t.rows_sent += d.rows_sent;
            t.errors += d.errors;
            t.no_index += d.no_index;
            t.first_seen = t.first_seen.min(at);
            t.last_seen = t.last_seen.max(at);
            servers.insert(i);
        }
    }
    let mut out: Vec<Top> = rows
        .into_values()
        .map(|(mut t, servers)| {
            t.servers = servers.len();
            t.avg_ms = (t.calls > 0).then(|| t.seconds * 1000.0 / t.calls as f64);
            t.calls_per_s = if span > 0.0 {
                t.calls as f64 / span
            } else {
                0.0
            };
            t.share = if total > 0.0 { t.seconds / total } else { 0.0 };
            t
        })
        .collect();
    let key = |t: &Top| match by {
        SortBy::Time => t.seconds,
        SortBy::Calls => t.calls as f64,
        SortBy::Latency => t.avg_ms.unwrap_or(0.0),
    };
    out.sort_by(|a, b| {
        key(b)
            .total_cmp(&key(a))
            .then_with(|| a.digest.cmp(&b.digest))
    });
    out.truncate(n);
    out
}

/// How many digests a server's JSON carries (`--once --json`, the API).
pub const TOP_N: usize = 10;

/// A window as JSON: its method, the seconds it covers, its top digests
/// by time.
pub fn serialize_window<S: serde::Serializer>(w: &Window, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct View {
        method: Option<Method>,
        seconds: f64,
        top: Vec<Top>,
    }
    View {
        method: w.method,
        seconds: w.seconds(),
        top: w.top(TOP_N, SortBy::Time),
    }
    .serialize(s)
}

/// The few statements that cost a server most in its window, one line
/// (an incident's cause); before the window has figures (an incident at
/// the first checks), the statements `running` at the check (schema,
/// text).
pub fn cause(w: &Window, running: &[(String, String)], n: usize) -> Option<String> {
    let line = |what: String, top: Vec<Top>| {
        let parts: Vec<String> = top
            .iter()
            .map(|t| {
                let text: String = t.digest.chars().take(80).collect();
                format!("{:.0}% {text}", t.share * 100.0)
            })
            .collect();
        format!("top statements by time ({what}): {}", parts.join(" | "))
    };
    let top = w.top(n, SortBy::Time);
    if !top.is_empty() {
        let method = w.method.map_or("", Method::name);
        return Some(line(
            format!("{method}, last {:.0} s", w.seconds().max(1.0)),
            top,
        ));
    }
    let mut now = Window::default();
    now.add(0.0, 1.0, Method::Processlist, seen_running(running, 1.0));
    let top = now.top(n, SortBy::Time);
    (!top.is_empty()).then(|| line("running at the check".into(), top))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn row(hash: &str, text: &str, calls: u64, ms: u64) -> PsRow {
        PsRow {
            schema: "shop".into(),
            hash: hash.into(),
            text: text.into(),
            counters: Counters {
                calls,
                time_ps: ms * 1_000_000_000,
                rows_examined: calls * 10,
                rows_sent: calls,
                errors: 0,
                no_index: 0,
            },
        }
    }

    #[test]
    fn deltas_between_reads() {
        let mut b = Baseline::default();
        // (reads, what each gives: (digest, calls, ms))
        let first = b.deltas(&[row("a", "SELECT * FROM t WHERE id = ?", 100, 500)]);
        assert!(first.is_empty(), "the first read is the baseline");
        type Row = (Vec<PsRow>, Vec<(&'static str, u64, u64)>);
        let rows: Vec<Row> = vec![
            // 10 more calls, 50 ms.
            (
                vec![row("a", "SELECT * FROM t WHERE id = ?", 110, 550)],
                vec![("SELECT * FROM t WHERE id = ?", 10, 50)],
            ),
            // Nothing new: nothing.
            (
                vec![row("a", "SELECT * FROM t WHERE id = ?", 110, 550)],
                vec![],
            ),
            // A digest first seen: all of it.
            (
                vec![row("b", "UPDATE t SET a = ? WHERE id = ?", 3, 9)],
                vec![("UPDATE t SET a = ? WHERE id = ?", 3, 9)],
            ),
            // Counters went back (TRUNCATE): what is there now.
            (
                vec![row("a", "SELECT * FROM t WHERE id = ?", 4, 2)],
                vec![("SELECT * FROM t WHERE id = ?", 4, 2)],
            ),
        ];
        for (read, want) in rows {
            let got: Vec<(String, u64, u64)> = b
                .deltas(&read)
                .iter()
                .map(|d| {
                    (
                        d.digest.clone(),
                        d.calls,
                        (d.seconds * 1000.0).round() as u64,
                    )
                })
                .collect();
            let want: Vec<(String, u64, u64)> = want
                .iter()
                .map(|(t, c, ms)| (t.to_string(), *c, *ms))
                .collect();
            assert_eq!(got, want, "{read:?}");
        }
        // The row of statements a full table had no room for is named.
        let mut b = Baseline::default();
        b.deltas(&[]);
        let d = b.deltas(&[row("", "", 5, 5)]);
        assert!(d[0].digest.contains("digest table is full"), "{d:?}");
    }

    #[test]
    fn processlist_reads_count_busy_time_by_digest() {
        let running = vec![
            (
                "shop".to_string(),
                "SELECT SLEEP(5) FROM t WHERE a = 1".to_string(),
            ),
            (
                "shop".to_string(),
                "SELECT SLEEP(5) FROM t WHERE a = 2".to_string(),
            ),
            ("shop".to_string(), "UPDATE t SET b = 1".to_string()),
            ("shop".to_string(), "   ".to_string()),
        ];
        let d = seen_running(&running, 1.0);
        let got: Vec<(&str, u64, f64)> = d
            .iter()
            .map(|d| (d.digest.as_str(), d.seen, d.seconds))
            .collect();
        assert_eq!(
            got,
            vec![
                ("SELECT SLEEP (?) FROM t WHERE a = ?", 2, 2.0),
                ("UPDATE t SET b = ?", 1, 1.0)
            ]
        );
    }

    /// A digest's figures over a read: `calls` calls taking `seconds`
    /// (the statement tests of the history use it too).
    pub(crate) fn delta(digest: &str, calls: u64, seconds: f64) -> Delta {
        Delta {
            digest: digest.into(),
            schema: "shop".into(),
            calls,
            seconds,
            rows_examined: 0,
            rows_sent: 0,
            errors: 0,
            no_index: 0,
            seen: 0,
        }
    }

    #[test]
    fn tops_by_time_calls_and_latency_over_the_window_and_the_fleet() {
        let mut w = Window::default();
        w.add(
            100.0,
            1.0,
            Method::PerformanceSchema,
            vec![delta("fast", 1000, 1.0), delta("slow", 2, 4.0)],
        );
        w.add(
            101.0,
            1.0,
            Method::PerformanceSchema,
            vec![delta("fast", 1000, 1.0), delta("slow", 2, 4.0)],
        );
        let names = |t: Vec<Top>| t.into_iter().map(|t| t.digest).collect::<Vec<_>>();
        assert_eq!(names(w.top(5, SortBy::Time)), vec!["slow", "fast"]);
        assert_eq!(names(w.top(5, SortBy::Calls)), vec!["fast", "slow"]);
        assert_eq!(names(w.top(5, SortBy::Latency)), vec!["slow", "fast"]);
        let slow = &w.top(1, SortBy::Time)[0];
        assert_eq!((slow.calls, slow.seconds), (4, 8.0));
        assert_eq!(slow.avg_ms, Some(2000.0));
        assert!((slow.share - 0.8).abs() < 1e-9);
        assert_eq!((slow.first_seen, slow.last_seen), (100.0, 101.0));
        // Reads older than the span go; a change of method starts afresh.
        w.add(
            100.0 + SPAN + 0.5,
            1.0,
            Method::PerformanceSchema,
            vec![delta("new", 1, 0.1)],
        );
        assert_eq!(names(w.top(5, SortBy::Time)), vec!["slow", "fast", "new"]);
        w.add(102.0 + SPAN, 1.0, Method::PerformanceSchema, vec![]);
        assert_eq!(names(w.top(5, SortBy::Time)), vec!["new"]);
        w.add(
            103.0 + SPAN,
            1.0,
            Method::Processlist,
            vec![delta("seen", 0, 1.0)],
        );
        assert_eq!(names(w.top(5, SortBy::Time)), vec!["seen"]);
        // The same digest on two servers is one fleet row.
        let mut a = Window::default();
        let mut b = Window::default();
        a.add(
            1.0,
            1.0,
            Method::PerformanceSchema,
            vec![delta("q", 10, 1.0)],
        );
        b.add(
            1.0,
            1.0,
            Method::PerformanceSchema,
            vec![delta("q", 30, 3.0), delta("r", 1, 0.5)],
        );
        let fleet = top_of([&a, &b].into_iter(), 5, SortBy::Time);
        assert_eq!(fleet[0].digest, "q");
        assert_eq!((fleet[0].calls, fleet[0].servers), (40, 2));
        assert_eq!(fleet[1].servers, 1);
        // The incident's cause names the costliest first.
        let c = cause(&b, &[], 2).expect("a cause");
        assert!(
            c.starts_with("top statements by time (performance_schema"),
            "{c}"
        );
        let at = |x: &str| c.find(x).unwrap_or(usize::MAX);
        assert!(at("% q") < at("% r"), "{c}");
        assert_eq!(cause(&Window::default(), &[], 3), None);
        // Before the window has figures: what runs at the check.
        let running = [(
            "shop".to_string(),
            "SELECT COUNT(*) FROM big WHERE v = 1".to_string(),
        )];
        let c = cause(&Window::default(), &running, 3).expect("a cause");
        assert!(
            c.contains("running at the check") && c.contains("FROM big WHERE v = ?"),
            "{c}"
        );
    }
}

//! Query rules (what a rule is, the reloadable set with hit counts) and per-digest statistics
//! kept in bounded memory: the first `cap` digests are counted apart, the
//! rest together as "other".

use std::sync::atomic::AtomicU64;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// Where a rule sends a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RouteTo {
    Primary,
    Replica,
}

/// An ordered query rule; the first that matches applies.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub digest: Option<String>,
    pub regex: Option<regex::Regex>,
    pub user: Option<String>,
    pub schema: Option<String>,
    pub route: Option<RouteTo>,
    /// With `route = "replica"`: replicas of this group.
    pub group: Option<String>,
    pub reject: Option<String>,
    /// `false`: the client is pinned to its connection after a match.
    pub multiplex: bool,
}

pub struct RuleSet {
    pub rules: Vec<Rule>,
    pub hits: Vec<AtomicU64>,
}

impl RuleSet {
    pub fn new(rules: Vec<Rule>) -> RuleSet {
        let hits = rules.iter().map(|_| AtomicU64::new(0)).collect();
        RuleSet { rules, hits }
    }

    /// The first rule a statement matches: of text `sql` and digest
    /// `digest`, from `user`, run in default database `schema` (a text
    /// statement's session database; a prepared one's, the database it
    /// was prepared in, where it runs).
    pub fn first_match(
        &self,
        user: &str,
        schema: Option<&str>,
        sql: &[u8],
        digest: &str,
    ) -> Option<usize> {
        self.rules.iter().position(|r| {
            r.user.as_deref().is_none_or(|u| u == user)
                && r.schema.as_deref().is_none_or(|s| Some(s) == schema)
                // Keywords may be written in any case; so may identifiers here.
                && r.digest.as_ref().is_none_or(|d| d.eq_ignore_ascii_case(digest))
                && r.regex.as_ref().is_none_or(|x| crate::protocol::sql::regex_matches(x, sql))
        })
    }
}

/// Latency buckets per digest: bucket i holds times up to 2^(i/2) µs.
const TIME_BUCKETS: usize = 64;

fn bucket_bound_us(i: usize) -> f64 {
    2f64.powf(i as f64 / 2.0)
}

/// Every bucket's bound, worked out once (a statement's time finds its
/// bucket by a binary search, not a power per bucket).
static BOUNDS_US: std::sync::LazyLock<[f64; TIME_BUCKETS]> =
    std::sync::LazyLock::new(|| std::array::from_fn(bucket_bound_us));

/// The bucket of a time of `us` microseconds: the first whose bound is at
/// or above it (the last for anything longer).
fn bucket_of(us: f64) -> usize {
    BOUNDS_US.partition_point(|&b| b < us).min(TIME_BUCKETS - 1)
}

#[derive(Debug, Clone, Serialize)]
pub struct DigestStat {
    pub count: u64,
    pub errors: u64,
    pub on_replicas: u64,
    /// Rows returned (or affected) over all executions.
    pub rows: u64,
    pub total_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    #[serde(skip)]
    buckets: [u32; TIME_BUCKETS],
}

impl Default for DigestStat {
    fn default() -> DigestStat {
        DigestStat {
            count: 0,
            errors: 0,
            on_replicas: 0,
            rows: 0,
            total_ms: 0.0,
            min_ms: 0.0,
            max_ms: 0.0,
            buckets: [0; TIME_BUCKETS],
        }
    }
}

impl DigestStat {
    fn add(&mut self, replica: bool, error: bool, rows: u64, took: Duration) {
        let ms = took.as_secs_f64() * 1e3;
        self.min_ms = if self.count == 0 {
            ms
        } else {
            self.min_ms.min(ms)
        };
        self.max_ms = self.max_ms.max(ms);
        self.count += 1;
        self.errors += u64::from(error);
        self.on_replicas += u64::from(replica);
        self.rows += rows;
        self.total_ms += ms;
        let us = took.as_secs_f64() * 1e6;
        let i = bucket_of(us);
        self.buckets[i] = self.buckets[i].saturating_add(1);
    }

    pub fn avg_ms(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total_ms / self.count as f64
        }
    }

    /// The 99th percentile, as the upper bound of its bucket (within a
    /// factor of 1.41), never above the maximum seen.
    pub fn p99_ms(&self) -> f64 {
        let total: u64 = self.buckets.iter().map(|&b| u64::from(b)).sum();
        if total == 0 {
            return 0.0;
        }
        let want = (total as f64 * 0.99).ceil() as u64;
        let mut seen = 0;
        for (i, &b) in self.buckets.iter().enumerate() {
            seen += u64::from(b);
            if seen >= want {
                return (bucket_bound_us(i) / 1e3).min(self.max_ms);
            }
        }
        self.max_ms
    }
}

pub struct Digests {
    enabled: bool,
    cap: usize,
    /// (Keyed by what clients send: see Cargo.toml's foldhash.)
    map: Mutex<(HashMap<String, DigestStat>, DigestStat)>,
}

#[derive(Serialize)]
pub struct DigestRow {
    pub digest: String,
    #[serde(flatten)]
    pub stat: DigestStat,
    pub avg_ms: f64,
    pub p99_ms: f64,
}

impl Digests {
    pub fn new(enabled: bool, cap: usize) -> Digests {
        Digests {
            enabled,
            cap,
            map: Mutex::new((HashMap::default(), DigestStat::default())),
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    pub fn record(&self, digest: String, replica: bool, error: bool, rows: u64, took: Duration) {
        let mut g = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let (map, other) = &mut *g;
        let full = map.len() >= self.cap;
        let s = match map.get_mut(&digest) {
            Some(s) => s,
            None if full => other,
            None => map.entry(digest).or_default(),
        };
        s.add(replica, error, rows, took);
    }

    /// The `n` most frequent digests, and everything past the cap.
    pub fn top(&self, n: usize) -> (Vec<DigestRow>, DigestStat) {
        let g = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let mut rows: Vec<DigestRow> =
            g.0.iter()
                .map(|(d, s)| DigestRow {
                    digest: d.clone(),
                    stat: s.clone(),
                    avg_ms: s.avg_ms(),
                    p99_ms: s.p99_ms(),
                })
                .collect();
        rows.sort_by(|a, b| {
            b.stat
                .count
                .cmp(&a.stat.count)
                .then(a.digest.cmp(&b.digest))
        });
        rows.truncate(n);
        (rows, g.1.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each condition of a rule as a row: what matches, what does not,
    /// and that the first matching rule is the one.
    #[test]
    fn the_first_rule_that_matches_every_condition_is_the_one() {
        let rule = |name: &str| Rule {
            name: name.into(),
            digest: None,
            regex: None,
            user: None,
            schema: None,
            route: None,
            group: None,
            reject: None,
            multiplex: true,
        };
        let set = RuleSet::new(vec![
            Rule {
                regex: Some(regex::Regex::new("(?i)^DELETE FROM guarded").expect("re")),
                ..rule("regex")
            },
            Rule {
                digest: Some("SELECT COUNT (*) FROM fresh".into()),
                ..rule("digest")
            },
            Rule {
                user: Some("shop".into()),
                schema: Some("orders".into()),
                ..rule("user and schema")
            },
            rule("any"),
        ]);
        let first = |user, schema, sql: &str, digest| {
            set.first_match(user, schema, sql.as_bytes(), digest)
                .map(|i| set.rules[i].name.as_str())
        };
        for (user, schema, sql, digest, want) in [
            (
                "app",
                None,
                "delete from guarded where id = ?",
                "x",
                "regex",
            ),
            ("app", None, "DELETE FROM other", "x", "any"),
            (
                "app",
                None,
                "select count(*) from fresh",
                "select count (*) from fresh",
                "digest",
            ),
            ("app", None, "select 1", "select ?", "any"),
            (
                "shop",
                Some("orders"),
                "select 1",
                "select ?",
                "user and schema",
            ),
            ("shop", Some("other"), "select 1", "select ?", "any"),
            ("shop", None, "select 1", "select ?", "any"),
            ("shop2", Some("orders"), "select 1", "select ?", "any"),
        ] {
            assert_eq!(
                first(user, schema, sql, digest),
                Some(want),
                "{user} {schema:?} {sql}"
            );
        }
        assert_eq!(RuleSet::new(vec![]).first_match("a", None, b"x", "x"), None);
    }

    #[test]
    fn a_time_lands_in_the_first_bucket_whose_bound_holds_it() {
        // The definition, bucket by bucket, against the search: at every
        // bound, just below and above it, and past the last.
        let by_definition = |us: f64| {
            (0..TIME_BUCKETS)
                .find(|&i| us <= bucket_bound_us(i))
                .unwrap_or(TIME_BUCKETS - 1)
        };
        let mut times = vec![0.0, 0.5, 1e30];
        for i in 0..TIME_BUCKETS {
            let b = bucket_bound_us(i);
            times.extend([b, b * (1.0 - 1e-12), b * (1.0 + 1e-12), b + 0.5]);
        }
        for us in times {
            assert_eq!(bucket_of(us), by_definition(us), "{us} µs");
        }
    }

    #[test]
    fn bounded_with_other() {
        let d = Digests::new(true, 2);
        for q in ["A", "B", "C", "A", "D"] {
            d.record(q.into(), false, q == "D", 3, Duration::from_millis(1));
        }
        let (top, other) = d.top(10);
        assert_eq!(
            top.iter()
                .map(|r| (r.digest.as_str(), r.stat.count))
                .collect::<Vec<_>>(),
            vec![("A", 2), ("B", 1)]
        );
        assert_eq!((other.count, other.errors), (2, 1));
        assert_eq!(top[0].stat.rows, 6);
    }

    #[test]
    fn times_min_avg_max_p99() {
        let d = Digests::new(true, 10);
        for ms in 1..=100u64 {
            d.record("Q".into(), false, false, 1, Duration::from_millis(ms));
        }
        let (top, _) = d.top(1);
        let r = &top[0];
        assert_eq!(r.stat.count, 100);
        assert!((r.stat.min_ms - 1.0).abs() < 1e-9 && (r.stat.max_ms - 100.0).abs() < 1e-9);
        assert!((r.avg_ms - 50.5).abs() < 1e-9, "{}", r.avg_ms);
        // The 99th of 1..=100 ms is 99 ms: its bucket's bound is within 1.42x.
        assert!(r.p99_ms >= 99.0 && r.p99_ms <= 100.0, "{}", r.p99_ms);
    }
}

//! Query rules (reloadable, with hit counts) and per-digest statistics
//! kept in bounded memory: the first `cap` digests are counted apart, the
//! rest together as "other".

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;

use crate::config::Rule;

pub struct RuleSet {
    pub rules: Vec<Rule>,
    pub hits: Vec<AtomicU64>,
}

impl RuleSet {
    pub fn new(rules: Vec<Rule>) -> RuleSet {
        let hits = rules.iter().map(|_| AtomicU64::new(0)).collect();
        RuleSet { rules, hits }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct DigestStat {
    pub count: u64,
    pub errors: u64,
    pub on_replicas: u64,
    pub total_ms: f64,
}

pub struct Digests {
    enabled: bool,
    cap: usize,
    map: Mutex<(HashMap<String, DigestStat>, DigestStat)>,
}

#[derive(Serialize)]
pub struct DigestRow {
    pub digest: String,
    #[serde(flatten)]
    pub stat: DigestStat,
}

impl Digests {
    pub fn new(enabled: bool, cap: usize) -> Digests {
        Digests {
            enabled,
            cap,
            map: Mutex::new((HashMap::new(), DigestStat::default())),
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    pub fn record(&self, digest: String, replica: bool, error: bool, took: Duration) {
        let mut g = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let (map, other) = &mut *g;
        let full = map.len() >= self.cap;
        let s = match map.get_mut(&digest) {
            Some(s) => s,
            None if full => other,
            None => map.entry(digest).or_default(),
        };
        s.count += 1;
        s.errors += u64::from(error);
        s.on_replicas += u64::from(replica);
        s.total_ms += took.as_secs_f64() * 1e3;
    }

    /// The `n` most frequent digests, and everything past the cap.
    pub fn top(&self, n: usize) -> (Vec<DigestRow>, DigestStat) {
        let g = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let mut rows: Vec<DigestRow> =
            g.0.iter()
                .map(|(d, s)| DigestRow {
                    digest: d.clone(),
                    stat: s.clone(),
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

    #[test]
    fn bounded_with_other() {
        let d = Digests::new(true, 2);
        for q in ["A", "B", "C", "A", "D"] {
            d.record(q.into(), false, q == "D", Duration::from_millis(1));
        }
        let (top, other) = d.top(10);
        assert_eq!(
            top.iter()
                .map(|r| (r.digest.as_str(), r.stat.count))
                .collect::<Vec<_>>(),
            vec![("A", 2), ("B", 1)]
        );
        assert_eq!((other.count, other.errors), (2, 1));
    }
}

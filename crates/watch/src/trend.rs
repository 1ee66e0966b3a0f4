//! The last ten minutes of a server's qps and threads running, for the
//! fleet page's sparklines: kept in memory by the monitor (the history
//! file is optional), folded into fixed buckets when a page asks.

use std::collections::VecDeque;

/// How far back a trend reaches, in seconds.
pub const WINDOW: f64 = 600.0;
/// How many buckets a trend is drawn from.
pub const BUCKETS: usize = 60;

#[derive(Debug, Clone, Default)]
pub struct Trend {
    /// (Unix seconds, qps, threads running), oldest first.
    points: VecDeque<(f64, f64, f64)>,
}

/// A trend folded into buckets: the mean of each, `None` where a bucket
/// had no check (before the first one, or while the server was down).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Buckets {
    pub qps: Vec<Option<f64>>,
    pub running: Vec<Option<f64>>,
}

impl Trend {
    /// Adds a check's figures and forgets what left the window.
    pub fn push(&mut self, at: f64, qps: f64, running: f64) {
        self.points.push_back((at, qps, running));
        while self.points.front().is_some_and(|p| p.0 < at - WINDOW) {
            self.points.pop_front();
        }
    }

    /// The window ending at `now` in [`BUCKETS`] buckets, oldest first.
    pub fn buckets(&self, now: f64) -> Buckets {
        let width = WINDOW / BUCKETS as f64;
        let start = now - WINDOW;
        let mut sums = vec![(0.0, 0.0, 0u32); BUCKETS];
        for &(at, q, r) in &self.points {
            if at < start || at > now {
                continue;
            }
            let i = (((at - start) / width) as usize).min(BUCKETS - 1);
            sums[i].0 += q;
            sums[i].1 += r;
            sums[i].2 += 1;
        }
        let mean = |pick: fn(&(f64, f64, u32)) -> f64| {
            sums.iter()
                .map(|b| (b.2 > 0).then(|| pick(b) / f64::from(b.2)))
                .collect()
        };
        Buckets {
            qps: mean(|b| b.0),
            running: mean(|b| b.1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_fold_into_ten_second_buckets() {
        let now = 10_000.0;
        let mut t = Trend::default();
        // (checks as (seconds before now, qps, running), bucket, its means)
        type Row<'a> = (&'a [(f64, f64, f64)], usize, Option<f64>, Option<f64>);
        let rows: &[Row] = &[
            // Two checks in the newest bucket: their mean.
            (
                &[(1.0, 10.0, 1.0), (2.0, 20.0, 3.0)],
                BUCKETS - 1,
                Some(15.0),
                Some(2.0),
            ),
            // One check five minutes ago.
            (&[(300.0, 7.0, 4.0)], BUCKETS / 2, Some(7.0), Some(4.0)),
        ];
        for (checks, _, _, _) in rows {
            for &(ago, q, r) in *checks {
                t.push(now - ago, q, r);
            }
        }
        let b = t.buckets(now);
        assert_eq!(b.qps.len(), BUCKETS);
        for (_, i, q, r) in rows {
            assert_eq!((b.qps[*i], b.running[*i]), (*q, *r), "bucket {i}");
        }
        // Nothing before the first check: the line starts there.
        assert_eq!(b.qps[0], None);
        assert_eq!(b.qps.iter().filter(|v| v.is_some()).count(), 2);
    }

    #[test]
    fn what_leaves_the_window_is_forgotten() {
        let mut t = Trend::default();
        t.push(0.0, 1.0, 1.0);
        t.push(WINDOW + 10.0, 2.0, 2.0);
        assert_eq!(t.points.len(), 1);
        let b = t.buckets(WINDOW + 10.0);
        assert_eq!(b.qps.iter().flatten().copied().collect::<Vec<_>>(), [2.0]);
    }
}

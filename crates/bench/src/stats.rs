//! Mean, spread and percentiles, always reported with the sample count.

use serde::{Deserialize, Serialize};

/// Summary of per-second (or per-window) samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub n: usize,
    pub mean: f64,
    pub stddev: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// Sample standard deviation (n-1); zero for fewer than two samples.
    pub fn of(samples: &[f64]) -> Spread {
        let n = samples.len();
        if n == 0 {
            return Spread {
                n,
                mean: 0.0,
                stddev: 0.0,
                min: 0.0,
                max: 0.0,
            };
        }
        let mean = samples.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        Spread {
            n,
            mean,
            stddev: var.sqrt(),
            min: samples.iter().copied().fold(f64::INFINITY, f64::min),
            max: samples.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }

    /// `12345 ± 67 (n=10)`
    pub fn show(&self) -> String {
        format!("{:.0} ± {:.0} (n={})", self.mean, self.stddev, self.n)
    }

    /// How `later` compares with this earlier spread: Welch's t test
    /// (unequal variances, Welch–Satterthwaite degrees of freedom) at 95%,
    /// two-sided. With fewer than two samples on a side the noise is
    /// unknown, and so is the verdict — however large the change looks.
    pub fn verdict(&self, later: &Spread) -> Verdict {
        if self.n < 2 || later.n < 2 {
            return Verdict::Unknown;
        }
        let (va, vb) = (
            self.stddev.powi(2) / self.n as f64,
            later.stddev.powi(2) / later.n as f64,
        );
        let se = (va + vb).sqrt();
        let diff = later.mean - self.mean;
        if se <= self.mean.abs() * 1e-9 {
            // No spread on either side: any difference is the difference.
            return match diff {
                d if d < 0.0 => Verdict::Lower,
                d if d > 0.0 => Verdict::Higher,
                _ => Verdict::Noise,
            };
        }
        let df = (va + vb).powi(2)
            / (va.powi(2) / (self.n as f64 - 1.0) + vb.powi(2) / (later.n as f64 - 1.0));
        if (diff / se).abs() <= t_975(df) {
            Verdict::Noise
        } else if diff < 0.0 {
            Verdict::Lower
        } else {
            Verdict::Higher
        }
    }
}

/// What a comparison of two spreads can say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Lower beyond the noise (a throughput regression).
    Lower,
    Higher,
    /// The difference is within what the samples vary by.
    Noise,
    /// One sample on a side: nothing can be told.
    Unknown,
}

/// Student's t at 97.5% (two-sided 95%) for `df` degrees of freedom,
/// interpolated between tabled values (df below 1 counts as 1).
fn t_975(df: f64) -> f64 {
    const T: [(f64, f64); 19] = [
        (1.0, 12.706),
        (2.0, 4.303),
        (3.0, 3.182),
        (4.0, 2.776),
        (5.0, 2.571),
        (6.0, 2.447),
        (7.0, 2.365),
        (8.0, 2.306),
        (9.0, 2.262),
        (10.0, 2.228),
        (12.0, 2.179),
        (15.0, 2.131),
        (20.0, 2.086),
        (25.0, 2.060),
        (30.0, 2.042),
        (40.0, 2.021),
        (60.0, 2.000),
        (120.0, 1.980),
        (1e9, 1.960),
    ];
    let df = if df.is_finite() { df.max(1.0) } else { 1e9 };
    for w in T.windows(2) {
        let ((d0, t0), (d1, t1)) = (w[0], w[1]);
        if df <= d1 {
            return t0 + (t1 - t0) * (df - d0) / (d1 - d0);
        }
    }
    1.960
}

/// Latency percentiles from an HDR histogram of microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub count: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

impl Latency {
    pub fn of(h: &hdrhistogram::Histogram<u64>) -> Latency {
        Latency {
            count: h.len(),
            p50_us: h.value_at_quantile(0.50),
            p90_us: h.value_at_quantile(0.90),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
        }
    }
}

/// Microseconds since `t`, at least 1, for [`histogram`]. A latency past
/// its 100 s is recorded as 100 s (`saturating_record`), never dropped:
/// the worst samples are the ones a percentile must not lose.
pub fn micros(t: std::time::Instant) -> u64 {
    u64::try_from(t.elapsed().as_micros())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// A histogram for 1 µs .. 100 s at 3 significant digits.
pub fn histogram() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new_with_bounds(1, 100_000_000, 3).expect("valid histogram bounds")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_sample_stddev() {
        let s = Spread::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(s.n, 8);
        assert!((s.mean - 5.0).abs() < 1e-9);
        assert!((s.stddev - 2.138089935).abs() < 1e-6);
        assert_eq!((s.min, s.max), (2.0, 9.0));
        assert_eq!(Spread::of(&[]).n, 0);
        assert_eq!(Spread::of(&[3.0]).stddev, 0.0);
    }

    #[test]
    fn verdicts_by_welchs_t() {
        let sp = |x: &[f64]| Spread::of(x);
        let a = sp(&[100.0, 102.0, 98.0, 101.0, 99.0]);
        let rows: Vec<(&str, Spread, Spread, Verdict)> = vec![
            (
                "noise",
                a,
                sp(&[97.0, 103.0, 99.0, 100.0, 96.0]),
                Verdict::Noise,
            ),
            (
                "20% lower, tight",
                a,
                sp(&[80.0, 82.0, 79.0, 81.0, 80.0]),
                Verdict::Lower,
            ),
            (
                "20% higher, tight",
                a,
                sp(&[120.0, 122.0, 119.0, 121.0, 120.0]),
                Verdict::Higher,
            ),
            (
                "37% lower, one sample each",
                sp(&[1227.0]),
                sp(&[770.0]),
                Verdict::Unknown,
            ),
            ("one sample on one side", a, sp(&[50.0]), Verdict::Unknown),
            (
                "lower by less than its wide spread",
                sp(&[100.0, 140.0, 60.0]),
                sp(&[90.0, 130.0, 50.0]),
                Verdict::Noise,
            ),
            (
                "no spread, same",
                sp(&[5.0, 5.0]),
                sp(&[5.0, 5.0]),
                Verdict::Noise,
            ),
            (
                "no spread, lower",
                sp(&[5.0, 5.0]),
                sp(&[4.0, 4.0]),
                Verdict::Lower,
            ),
        ];
        for (what, x, y, want) in rows {
            assert_eq!(x.verdict(&y), want, "{what}");
        }
    }

    #[test]
    fn t_table() {
        assert!((t_975(1.0) - 12.706).abs() < 1e-9);
        assert!((t_975(11.0) - 2.2035).abs() < 1e-3);
        assert!((t_975(1e12) - 1.96).abs() < 1e-9);
        assert!((t_975(0.2) - 12.706).abs() < 1e-9);
        assert!((t_975(f64::NAN) - 1.96).abs() < 1e-9);
    }

    #[test]
    fn percentiles() {
        let mut h = histogram();
        for v in 1..=1000u64 {
            h.record(v).expect("record");
        }
        let l = Latency::of(&h);
        assert_eq!(l.count, 1000);
        assert!((495..=505).contains(&l.p50_us), "{l:?}");
        assert!((985..=995).contains(&l.p99_us), "{l:?}");
        assert_eq!(l.max_us, 1000);
        // Past the top: kept, at the top.
        h.saturating_record(1_000_000_000);
        let l = Latency::of(&h);
        assert_eq!(l.count, 1001);
        assert!(l.max_us >= 100_000_000, "{l:?}");
    }
}

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

    /// Is `other` lower than `self` by more than the noise of both?
    /// (Difference of means beyond twice its standard error.)
    pub fn regressed_to(&self, other: &Spread) -> bool {
        if self.n < 2 || other.n < 2 {
            return false;
        }
        let se =
            (self.stddev.powi(2) / self.n as f64 + other.stddev.powi(2) / other.n as f64).sqrt();
        self.mean - other.mean > 2.0 * se.max(self.mean * 1e-9)
    }
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
    fn regression_needs_more_than_noise() {
        let a = Spread::of(&[100.0, 102.0, 98.0, 101.0, 99.0]);
        let noisy = Spread::of(&[97.0, 103.0, 99.0, 100.0, 96.0]);
        let worse = Spread::of(&[80.0, 82.0, 79.0, 81.0, 80.0]);
        assert!(!a.regressed_to(&noisy));
        assert!(a.regressed_to(&worse));
        assert!(!worse.regressed_to(&a));
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
    }
}

//! Summary statistics over latency samples and over runs.
//!
//! Percentiles use the nearest-rank definition, on sorted samples:
//! `pN = samples[ceil(N/100 * len) - 1]`. It always returns a measured value
//! (no interpolation), so `p100` is the maximum and a percentile is never
//! better than what a real call achieved.

/// The nearest-rank `p`th percentile (1..=100) of `sorted`, which must be
/// sorted ascending. `None` when `sorted` is empty or `p` is out of range.
pub fn percentile(sorted: &[u64], p: u32) -> Option<u64> {
    if sorted.is_empty() || !(1..=100).contains(&p) {
        return None;
    }
    // Integer arithmetic: with floats, 0.29 * 100.0 is not 29.0, and a rank
    // that should be exact could round up to the next sample.
    let len = sorted.len() as u64;
    let rank = (u64::from(p) * len).div_ceil(100);
    let index = usize::try_from(rank - 1).ok()?;
    sorted.get(index).copied()
}

/// The latency summary of one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    /// Median, in nanoseconds.
    pub p50_ns: u64,
    /// 90th percentile, in nanoseconds.
    pub p90_ns: u64,
    /// 99th percentile, in nanoseconds.
    pub p99_ns: u64,
    /// Slowest sample, in nanoseconds.
    pub max_ns: u64,
}

impl Latency {
    /// Summarise `samples` (nanoseconds, any order; sorted in place).
    /// `None` when there are no samples.
    pub fn from_samples(samples: &mut [u64]) -> Option<Latency> {
        samples.sort_unstable();
        Some(Latency {
            p50_ns: percentile(samples, 50)?,
            p90_ns: percentile(samples, 90)?,
            p99_ns: percentile(samples, 99)?,
            max_ns: percentile(samples, 100)?,
        })
    }
}

/// The median of `values` (any order): the middle value, or the mean of the
/// two middle values for an even count. `None` when empty or when a value is
/// NaN. Used across runs, where a run count of 4 should not silently favour
/// the faster or the slower half.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    })
}

/// Smallest, median and largest of `values`; `None` when empty or NaN.
pub fn min_median_max(values: &[f64]) -> Option<(f64, f64, f64)> {
    let median = median(values)?;
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((min, median, max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_nearest_rank() {
        let samples: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&samples, 50), Some(50));
        assert_eq!(percentile(&samples, 90), Some(90));
        assert_eq!(percentile(&samples, 99), Some(99));
        assert_eq!(percentile(&samples, 100), Some(100));
        assert_eq!(percentile(&samples, 1), Some(1));
    }

    #[test]
    fn percentile_rounds_rank_up() {
        // ceil(0.5 * 5) = 3 -> third sample; ceil(0.9 * 5) = 5 -> last.
        let samples = [10, 20, 30, 40, 50];
        assert_eq!(percentile(&samples, 50), Some(30));
        assert_eq!(percentile(&samples, 90), Some(50));
        assert_eq!(percentile(&samples, 99), Some(50));
        // ceil(0.2 * 5) = 1 exactly: no spurious round-up to the second.
        assert_eq!(percentile(&samples, 20), Some(10));
        // 29% of 100 is exactly rank 29 (floats would give 29.000000000000004).
        let hundred: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&hundred, 29), Some(29));
    }

    #[test]
    fn percentile_small_and_empty() {
        assert_eq!(percentile(&[7], 50), Some(7));
        assert_eq!(percentile(&[7], 99), Some(7));
        assert_eq!(percentile(&[3, 9], 50), Some(3));
        assert_eq!(percentile(&[], 50), None);
        assert_eq!(percentile(&[1, 2], 0), None);
        assert_eq!(percentile(&[1, 2], 101), None);
    }

    #[test]
    fn latency_sorts_samples() {
        let mut samples: Vec<u64> = (1..=1000).rev().collect();
        let summary = Latency::from_samples(&mut samples);
        assert_eq!(
            summary,
            Some(Latency {
                p50_ns: 500,
                p90_ns: 900,
                p99_ns: 990,
                max_ns: 1000,
            })
        );
        assert_eq!(Latency::from_samples(&mut []), None);
    }

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn min_median_max_of_runs() {
        assert_eq!(
            min_median_max(&[30.0, 10.0, 20.0]),
            Some((10.0, 20.0, 30.0))
        );
        assert_eq!(min_median_max(&[]), None);
    }
}

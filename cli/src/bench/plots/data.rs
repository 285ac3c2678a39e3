//! The data of the plots: densities as keys, summaries (median, min, max) by density, and the
//! grouping of shapes into lines.

use std::collections::{BTreeMap, BTreeSet};

use crate::bench::record::Record;

/// Shapes with fewer weights than this are "small" (the size bands of the shape groups).
pub(super) const SMALL_BELOW: usize = 32_000_000;
/// Shapes with at least this many weights are "large".
pub(super) const LARGE_FROM: usize = 200_000_000;

/// A density as a map key, in parts per million, so that 0.9 and 0.900000001 meet.
pub(super) fn density_key(d: f64) -> i64 {
    (d * 1e6).round() as i64
}

/// The density of a key.
pub(super) fn key_density(k: i64) -> f64 {
    k as f64 / 1e6
}

/// A usable density: finite and within [0, 1].
pub(super) fn valid_density(d: f64) -> bool {
    d.is_finite() && (0.0..=1.0).contains(&d)
}

/// Median, minimum and maximum of the values at one density.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Summary {
    /// Density.
    pub(super) d: f64,
    /// Median of the values.
    pub(super) median: f64,
    /// Smallest value.
    pub(super) min: f64,
    /// Largest value.
    pub(super) max: f64,
}

/// Summarises `value` over `records` by density, leaving out non-finite figures; sorted by
/// density, densest first.
pub(super) fn by_density<'r>(
    records: impl IntoIterator<Item = &'r Record>,
    value: impl Fn(&Record) -> Option<f64>,
) -> Vec<Summary> {
    let mut groups: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
    for r in records {
        if !valid_density(r.density) {
            continue;
        }
        if let Some(v) = value(r).filter(|v| v.is_finite()) {
            groups.entry(density_key(r.density)).or_default().push(v);
        }
    }
    groups
        .into_iter()
        .rev()
        .filter_map(|(k, mut v)| {
            v.sort_by(f64::total_cmp);
            let (min, max) = (*v.first()?, *v.last()?);
            let mid = v.len() / 2;
            let median = if v.len() % 2 == 1 {
                v[mid]
            } else {
                (v[mid - 1] + v[mid]) / 2.0
            };
            Some(Summary {
                d: key_density(k),
                median,
                min,
                max,
            })
        })
        .collect()
}

/// How the shapes of one backend are grouped into lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Grouping {
    /// By number of weights (rows · cols): small, medium, large.
    Size,
    /// By aspect: square, tall, wide.
    Aspect,
    /// One group of all shapes.
    All,
}

impl Grouping {
    /// The group of a shape, an index into [`Grouping::names`].
    pub(super) fn group(self, rows: usize, cols: usize) -> usize {
        match self {
            Grouping::Size => {
                let n = rows.saturating_mul(cols);
                if n < SMALL_BELOW {
                    0
                } else if n < LARGE_FROM {
                    1
                } else {
                    2
                }
            }
            Grouping::Aspect => match rows.cmp(&cols) {
                std::cmp::Ordering::Equal => 0,
                std::cmp::Ordering::Greater => 1,
                std::cmp::Ordering::Less => 2,
            },
            Grouping::All => 0,
        }
    }

    /// Legend names of the groups.
    pub(super) fn names(self) -> &'static [&'static str] {
        match self {
            Grouping::Size => &["< 32M weights", "32M–200M weights", "≥ 200M weights"],
            Grouping::Aspect => &[
                "square (rows = cols)",
                "tall (rows > cols)",
                "wide (rows < cols)",
            ],
            Grouping::All => &["all shapes"],
        }
    }

    /// The grouping that splits `shapes` best: by size if that gives two groups or more, else
    /// by aspect if that does, else all in one.
    pub(super) fn choose(shapes: &BTreeSet<(usize, usize)>) -> Grouping {
        for g in [Grouping::Size, Grouping::Aspect] {
            let used: BTreeSet<usize> = shapes.iter().map(|&(r, c)| g.group(r, c)).collect();
            if used.len() >= 2 {
                return g;
            }
        }
        Grouping::All
    }
}

/// The largest finite value of the series (maxima included), if any.
pub(super) fn series_max<'s>(series: impl IntoIterator<Item = &'s Summary>) -> Option<f64> {
    series
        .into_iter()
        .map(|s| s.max)
        .filter(|v| v.is_finite())
        .fold(None, |acc: Option<f64>, v| {
            Some(acc.map_or(v, |a| a.max(v)))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping_splits_by_size_else_aspect() {
        let small: BTreeSet<_> = [(64, 64), (128, 64)].into_iter().collect();
        assert_eq!(Grouping::choose(&small), Grouping::Aspect);
        let sized: BTreeSet<_> = [(4096, 4096), (32000, 8192)].into_iter().collect();
        assert_eq!(Grouping::choose(&sized), Grouping::Size);
    }
}

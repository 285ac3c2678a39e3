//! Magnitude pruning per output row: for users whose checkpoint is not pruned yet.
//!
//! Each row of a weight matrix (one output feature of `y = W·x`) keeps its ⌊d·cols⌋ elements of
//! largest magnitude and sets the rest to +0.0, so every row ends up with the same density. The
//! choice is made on the binary16 values (the values that will be stored), so it is exactly
//! reproducible from the f16 source: `macko verify --against` re-applies it and compares bit for
//! bit.
//!
//! Order: larger |w| first; NaN counts as larger than ∞, which counts as larger than any finite
//! value (a NaN weight is kept, where it stays visible, rather than silently dropped); between
//! equal magnitudes the lower column wins. ±0.0 are equal in magnitude.
//!
//! ```
//! use macko::prune;
//! use macko::DenseMatrix;
//! use half::f16;
//!
//! let w = DenseMatrix::new(1, 4, [0.5f32, -3.0, 1.0, 2.0].map(f16::from_f32).to_vec())?;
//! let p = prune::magnitude_per_row(&w, 0.5)?;
//! assert_eq!(p.values(), &[0.0f32, -3.0, 0.0, 2.0].map(f16::from_f32));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;

use half::f16;
use macko_format::DenseMatrix;
use rayon::prelude::*;

/// A density outside (0, 1] (or NaN) was asked for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DensityOutOfRange {
    /// The density given.
    pub density: f64,
}

impl fmt::Display for DensityOutOfRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "density {} is outside (0, 1]: it is the fraction of each row's weights that is kept",
            self.density
        )
    }
}

impl std::error::Error for DensityOutOfRange {}

/// Checks that `density` lies in (0, 1] (NaN does not).
pub fn check_density(density: f64) -> Result<f64, DensityOutOfRange> {
    if density > 0.0 && density <= 1.0 {
        Ok(density)
    } else {
        Err(DensityOutOfRange { density })
    }
}

/// How many elements a row of `cols` keeps at `density`: ⌊density·cols⌋, at most `cols`.
///
/// `density` must already be checked ([`check_density`]); values outside (0, 1] are clamped.
pub fn keep_count(cols: usize, density: f64) -> usize {
    let k = (density.clamp(0.0, 1.0) * cols as f64).floor();
    // k ∈ [0, cols] as an f64 of an integer ≤ usize::MAX; the cast saturates and `min` keeps
    // any rounding of a huge `cols` in range.
    (k as usize).min(cols)
}

/// The magnitude key of a binary16 value: its bits without the sign. As integers these order
/// finite magnitudes as the numbers do, put ∞ above them and NaN above ∞.
#[inline]
fn magnitude(v: f16) -> u16 {
    v.to_bits() & 0x7fff
}

/// Prunes one row in place: keeps the `keep` elements of largest magnitude (lower column first
/// among equals) and writes +0.0 elsewhere.
fn prune_row(row: &mut [f16], keep: usize, order: &mut Vec<usize>) {
    if keep >= row.len() {
        return;
    }
    if keep == 0 {
        row.fill(f16::ZERO);
        return;
    }
    order.clear();
    order.extend(0..row.len());
    // Descending magnitude, ascending column: a strict total order, so the kept set is unique.
    let key = |&i: &usize| (std::cmp::Reverse(magnitude(row[i])), i);
    order.select_nth_unstable_by_key(keep - 1, key);
    let mut kept = vec![false; row.len()];
    for &i in &order[..keep] {
        kept[i] = true;
    }
    for (v, keep) in row.iter_mut().zip(kept) {
        if !keep {
            *v = f16::ZERO;
        }
    }
}

/// Magnitude pruning per output row to `density`: each row keeps its ⌊density·cols⌋ elements
/// of largest |w| (see the [module documentation](self) for ties and NaN) and every other
/// element becomes +0.0. Rows are pruned in parallel. A density outside (0, 1] is refused.
///
/// Elements that are already zero may be among the kept ones (a row with fewer non-zeros than
/// it may keep is left as it is), so the result has *at most* ⌊density·cols⌋ non-zeros per row.
pub fn magnitude_per_row(w: &DenseMatrix, density: f64) -> Result<DenseMatrix, DensityOutOfRange> {
    let density = check_density(density)?;
    let (rows, cols) = (w.rows(), w.cols());
    let keep = keep_count(cols, density);
    let mut values = w.values().to_vec();
    if cols > 0 {
        values
            .par_chunks_mut(cols)
            .for_each_init(Vec::new, |order, row| prune_row(row, keep, order));
    }
    // Same shape and length as `w`, which was valid.
    match DenseMatrix::new(rows, cols, values) {
        Ok(m) => Ok(m),
        Err(_) => unreachable!("pruning keeps the shape of a valid matrix"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(v: &[f32]) -> Vec<f16> {
        v.iter().map(|&x| f16::from_f32(x)).collect()
    }

    #[test]
    fn densities_outside_the_interval_are_refused() {
        let w = DenseMatrix::zeros(2, 3).expect("shape");
        for d in [0.0, -0.5, 1.0000001, f64::NAN, f64::INFINITY] {
            let e = magnitude_per_row(&w, d).expect_err("refused");
            assert!(e.density.is_nan() || e.density == d);
            assert!(e.to_string().contains("outside (0, 1]"), "{e}");
        }
        assert!(magnitude_per_row(&w, 1.0).is_ok());
        assert!(magnitude_per_row(&w, f64::MIN_POSITIVE).is_ok());
    }

    #[test]
    fn keep_count_is_the_floor() {
        assert_eq!(keep_count(384, 0.5), 192);
        assert_eq!(keep_count(10, 0.25), 2);
        assert_eq!(keep_count(10, 1.0), 10);
        assert_eq!(keep_count(3, 0.1), 0);
        assert_eq!(keep_count(0, 0.5), 0);
    }

    #[test]
    fn keeps_the_largest_magnitudes_of_each_row() {
        let w = DenseMatrix::new(
            2,
            5,
            f(&[
                0.1, -5.0, 3.0, -0.2, 4.0, /* row 1 */ 1.0, 2.0, -3.0, 4.0, -5.0,
            ]),
        )
        .expect("shape");
        let p = magnitude_per_row(&w, 0.4).expect("pruned");
        assert_eq!(
            p.values(),
            f(&[0.0, -5.0, 0.0, 0.0, 4.0, 0.0, 0.0, 0.0, 4.0, -5.0]).as_slice()
        );
    }

    #[test]
    fn ties_keep_the_lower_column_and_nan_ranks_highest() {
        let w = DenseMatrix::new(1, 6, f(&[1.0, -1.0, 1.0, f32::INFINITY, 0.5, f32::NAN]))
            .expect("shape");
        let p = magnitude_per_row(&w, 0.5).expect("pruned");
        let bits: Vec<u16> = p.values().iter().map(|v| v.to_bits()).collect();
        let expected: Vec<u16> = f(&[1.0, 0.0, 0.0, f32::INFINITY, 0.0, f32::NAN])
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(bits, expected);
    }

    #[test]
    fn every_row_keeps_exactly_the_count_and_the_kept_dominate() {
        let (rows, cols) = (17, 103);
        let values: Vec<f16> = (0..rows * cols)
            .map(|i| f16::from_f32(((i * 7919 % 1009) as f32 - 504.0) / 97.0))
            .collect();
        let w = DenseMatrix::new(rows, cols, values).expect("shape");
        for d in [0.1, 0.33, 0.5, 0.9, 1.0] {
            let p = magnitude_per_row(&w, d).expect("pruned");
            let keep = keep_count(cols, d);
            for r in 0..rows {
                let (src, out) = (w.row(r), p.row(r));
                let nonzero = out.iter().filter(|v| magnitude(**v) != 0).count();
                let src_nonzero = src.iter().filter(|v| magnitude(**v) != 0).count();
                assert_eq!(nonzero, keep.min(src_nonzero), "row {r} at d={d}");
                // Every kept value is the source's; no dropped value is larger than a kept one.
                let min_kept = (0..cols)
                    .filter(|&c| magnitude(out[c]) != 0)
                    .map(|c| magnitude(src[c]))
                    .min();
                for c in 0..cols {
                    if magnitude(out[c]) != 0 {
                        assert_eq!(out[c].to_bits(), src[c].to_bits());
                    } else if let Some(m) = min_kept {
                        assert!(magnitude(src[c]) <= m, "row {r} col {c} at d={d}");
                    }
                }
            }
        }
    }

    #[test]
    fn pruning_is_idempotent_and_density_one_is_identity() {
        let w = DenseMatrix::new(
            3,
            8,
            f(&[
                1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, -8.0, 7.0, -6.0, 5.0, -4.0, 3.0, -2.0, 1.0,
                0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0,
            ]),
        )
        .expect("shape");
        assert_eq!(magnitude_per_row(&w, 1.0).expect("pruned"), w);
        let once = magnitude_per_row(&w, 0.5).expect("pruned");
        assert_eq!(magnitude_per_row(&once, 0.5).expect("pruned"), once);
        // Row 2 has one non-zero, fewer than the 4 it may keep: unchanged.
        assert_eq!(once.row(2), w.row(2));
    }
}

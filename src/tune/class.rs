//! The key a tuned plan is filed under: what a matrix looks like to the planners (its kind,
//! shape and fill), not its values, so that every layer of one shape and density shares one
//! measurement. A leaf module.

use macko_format::{MatrixKind, MatrixRef};

/// Width of a fill bucket, in percent: matrices whose stored entries fill the shape within
/// the same 5 % share a plan (the planners' own thresholds are coarser than that).
pub const FILL_STEP_PERCENT: u32 = 5;

/// A class of matrices that share a tuned plan: the format, the shape and the fill (stored
/// entries over rows × cols, padding included, the figure the planners read) rounded to the
/// nearest [`FILL_STEP_PERCENT`]. Products of one vector only: few-token plans are the
/// rules' own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MatrixClass {
    /// The format.
    pub kind: MatrixKindKey,
    /// Rows.
    pub rows: u64,
    /// Columns.
    pub cols: u64,
    /// Fill in percent, a multiple of [`FILL_STEP_PERCENT`] (100 for dense matrices).
    pub fill_percent: u32,
}

/// [`MatrixKind`] with an order, so that classes sort (the cache file lists them sorted, which
/// keeps its diffs readable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MatrixKindKey(u8);

const KINDS: [MatrixKind; 7] = [
    MatrixKind::Macko,
    MatrixKind::Csr,
    MatrixKind::Dense,
    MatrixKind::MackoQuant,
    MatrixKind::DenseQuant,
    MatrixKind::Sparse24,
    MatrixKind::HomogeneousCsr,
];

impl MatrixKindKey {
    /// The key of `kind`.
    pub fn of(kind: MatrixKind) -> Self {
        Self(KINDS.iter().position(|&k| k == kind).unwrap_or(0) as u8)
    }

    /// The kind it stands for.
    pub fn kind(self) -> MatrixKind {
        KINDS
            .get(usize::from(self.0))
            .copied()
            .unwrap_or(MatrixKind::Macko)
    }
}

impl MatrixClass {
    /// The class of `m`.
    pub fn of(m: MatrixRef<'_>) -> Self {
        let (rows, cols) = m.shape();
        let stored = match m {
            MatrixRef::Macko(a) => a.entries() as f64,
            MatrixRef::MackoQuant(a) => a.entries() as f64,
            MatrixRef::Csr(a) => a.nnz() as f64,
            MatrixRef::HomogeneousCsr(a) => a.nnz() as f64,
            MatrixRef::Sparse24(_) => rows as f64 * cols as f64 / 2.0,
            MatrixRef::Dense(_) | MatrixRef::DenseQuant(_) => rows as f64 * cols as f64,
        };
        Self::new(m.kind(), rows as u64, cols as u64, stored)
    }

    /// The class of a `kind` matrix of `rows × cols` holding `stored` entries.
    pub fn new(kind: MatrixKind, rows: u64, cols: u64, stored: f64) -> Self {
        let cells = (rows as f64 * cols as f64).max(1.0);
        Self {
            kind: MatrixKindKey::of(kind),
            rows,
            cols,
            fill_percent: bucket(stored / cells),
        }
    }

    /// "macko 4096x4096 fill 50%".
    pub fn describe(&self) -> String {
        format!(
            "{} {}x{} fill {}%",
            self.kind.kind().as_str(),
            self.rows,
            self.cols,
            self.fill_percent
        )
    }
}

/// `fill` (0 to 1) in percent, rounded to the nearest bucket; at least one step, so that a
/// nearly empty matrix shares the lowest bucket instead of one of its own.
pub fn bucket(fill: f64) -> u32 {
    let pct = (fill.clamp(0.0, 1.0) * 100.0 / f64::from(FILL_STEP_PERCENT)).round() as u32;
    pct.max(1) * FILL_STEP_PERCENT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_round_to_the_nearest_bucket() {
        assert_eq!(bucket(0.5), 50);
        assert_eq!(bucket(0.524), 50);
        assert_eq!(bucket(0.526), 55);
        assert_eq!(bucket(0.0), 5);
        assert_eq!(bucket(1.0), 100);
        assert_eq!(bucket(7.0), 100);
    }

    #[test]
    fn kinds_round_trip_through_their_keys() {
        for k in KINDS {
            assert_eq!(MatrixKindKey::of(k).kind(), k);
        }
    }
}

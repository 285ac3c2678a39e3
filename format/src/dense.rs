//! Dense row-major binary16 matrices: the baseline every sparse format must beat, and the
//! usual input of the encoders.

use half::f16;

use crate::error::{FormatError, Result};

/// A `rows × cols` matrix of binary16 values in row-major order.
#[derive(Debug, Clone)]
pub struct DenseMatrix {
    rows: usize,
    cols: usize,
    values: Vec<f16>,
}

/// Whether two arrays of binary16 hold the same bits. Matrices compare their stored values this
/// way, not as numbers: a stored NaN equals itself, so `load(save(m)) == m` holds for every
/// valid matrix, and a stored −0.0 differs from +0.0, as the arrays do.
pub(crate) fn same_bits(a: &[f16], b: &[f16]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// Equal when the shapes match and the values are the same bits (`same_bits`): a stored NaN
/// equals itself, −0.0 differs from +0.0.
impl PartialEq for DenseMatrix {
    fn eq(&self, other: &Self) -> bool {
        self.rows == other.rows && self.cols == other.cols && same_bits(&self.values, &other.values)
    }
}

impl Eq for DenseMatrix {}

/// `rows × cols`, checked: every size the library derives from a shape goes through here.
pub(crate) fn element_count(rows: usize, cols: usize) -> Result<usize> {
    rows.checked_mul(cols).ok_or(FormatError::ShapeTooLarge {
        rows,
        cols,
        what: "rows × cols overflows usize",
    })
}

impl DenseMatrix {
    /// Wraps row-major values; fails when `values.len() != rows × cols`.
    pub fn new(rows: usize, cols: usize, values: Vec<f16>) -> Result<Self> {
        let expected = element_count(rows, cols)?;
        if values.len() != expected {
            return Err(FormatError::DenseLength {
                rows,
                cols,
                expected,
                found: values.len(),
            });
        }
        Ok(Self { rows, cols, values })
    }

    /// An all-zero matrix.
    pub fn zeros(rows: usize, cols: usize) -> Result<Self> {
        let n = element_count(rows, cols)?;
        Ok(Self {
            rows,
            cols,
            values: vec![f16::ZERO; n],
        })
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// All values, row-major.
    pub fn values(&self) -> &[f16] {
        &self.values
    }

    /// Row `r` (panics if `r >= rows`, like slice indexing).
    pub fn row(&self, r: usize) -> &[f16] {
        &self.values[r * self.cols..(r + 1) * self.cols]
    }

    /// Consumes the matrix, returning its values.
    pub fn into_values(self) -> Vec<f16> {
        self.values
    }

    /// Storage in bytes: 2 · rows · cols.
    pub fn bytes(&self) -> u64 {
        2 * self.values.len() as u64
    }

    /// Number of elements that are not zero (±0.0 count as zero, NaN does not).
    pub fn count_nonzero(&self) -> usize {
        self.values.iter().filter(|v| !is_zero(**v)).count()
    }
}

/// docs/FORMAT.md's notion of zero: compares equal to 0.0 (so ±0.0), and NaN is not zero.
#[inline(always)]
pub fn is_zero(v: f16) -> bool {
    v.to_bits() & 0x7fff == 0
}

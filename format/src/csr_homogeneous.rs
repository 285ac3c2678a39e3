//! Homogeneous CSR: a CSR pattern (u32 row pointers and column indices) without a values
//! array, every stored entry carrying one binary16 weight shared by the whole matrix
//! (docs/FORMAT.md, "Homogeneous CSR"). Graphs, masks, one-hot selections and binarized
//! layers have one value for every edge; storing it once saves 2 of CSR's 6 bytes per entry,
//! and a product reads only indices.
//!
//! It is a matrix kind of its own (`csr-homogeneous` in files), not an option of
//! [`CsrMatrix`]: every consumer of a `CsrMatrix` (the GPU uploads, the container, Python)
//! reads one value per index, and a CSR without values would reach them as an array too short.
//! As a kind of its own, each consumer is made to handle it, or to refuse it.
//!
//! ```
//! use macko_format::{f16, reference, HomogeneousCsrMatrix};
//!
//! // 2×3: row 0 has columns 0 and 2, row 1 none; every entry is 0.5.
//! let a = HomogeneousCsrMatrix::from_parts(2, 3, vec![0, 2, 2], vec![0, 2], f16::from_f32(0.5))?;
//! assert_eq!(a.bytes(), 4 * 3 + 4 * 2 + 2);
//! let x = [2.0, 7.0, 4.0].map(f16::from_f32);
//! assert_eq!(reference::spmv_csr_homogeneous(&a, &x)?.y, vec![3.0, 0.0]);
//! # Ok::<(), macko_format::FormatError>(())
//! ```

use half::f16;

use crate::csr::{check_columns, effective, CsrMatrix};
use crate::dense::{element_count, is_zero, DenseMatrix};
use crate::error::{FormatError, Result};
use crate::row_ptr::check_row_ptr;

/// A validated homogeneous CSR matrix: `row_ptr` (rows + 1, from 0, non-decreasing), column
/// indices strictly increasing within each row and below `cols` (CSR's rules), and one
/// binary16 `weight` that every stored entry holds.
///
/// Semantics are CSR's with every value equal to `weight`: a weight of ±0 makes every entry a
/// stored zero, which contributes nothing even where x holds NaN or ±∞; a NaN or ±∞ weight is
/// kept (as CSR keeps such values) and reaches y wherever a row has an entry.
#[derive(Debug, Clone)]
pub struct HomogeneousCsrMatrix {
    rows: usize,
    cols: usize,
    row_ptr: Vec<u32>,
    col_idx: Vec<u32>,
    weight: f16,
}

/// Equal when every array is the same and the weights are the same bits (a NaN weight equals
/// itself), as the other matrices compare.
impl PartialEq for HomogeneousCsrMatrix {
    fn eq(&self, other: &Self) -> bool {
        self.rows == other.rows
            && self.cols == other.cols
            && self.row_ptr == other.row_ptr
            && self.col_idx == other.col_idx
            && self.weight.to_bits() == other.weight.to_bits()
    }
}

impl Eq for HomogeneousCsrMatrix {}

impl HomogeneousCsrMatrix {
    /// Builds a matrix from untrusted arrays, checking CSR's rules on `row_ptr` and `col_idx`
    /// (`col_idx` must hold exactly `row_ptr[rows]` indices: [`FormatError::CsrLength`], with
    /// `values` reported equal to the indices, since there is no values array).
    pub fn from_parts(
        rows: usize,
        cols: usize,
        row_ptr: Vec<u32>,
        col_idx: Vec<u32>,
        weight: f16,
    ) -> Result<Self> {
        let entries = check_row_ptr(rows, &row_ptr)?;
        if col_idx.len() != entries {
            return Err(FormatError::CsrLength {
                entries,
                col_idx: col_idx.len(),
                values: col_idx.len(),
            });
        }
        check_columns(rows, cols, &row_ptr, &col_idx)?;
        Ok(Self {
            rows,
            cols,
            row_ptr,
            col_idx,
            weight,
        })
    }

    /// The pattern of a CSR matrix (its stored entries, zeros included) with one weight for
    /// all of them; the CSR's values are not read.
    pub fn from_pattern(csr: &CsrMatrix, weight: f16) -> Self {
        Self {
            rows: csr.rows(),
            cols: csr.cols(),
            row_ptr: csr.row_ptr().to_vec(),
            col_idx: csr.col_idx().to_vec(),
            weight,
        }
    }

    /// The pattern of the non-zero elements of a dense matrix (±0.0 dropped, NaN and ±∞ kept,
    /// as [`CsrMatrix::from_dense`] keeps them) with one weight for all of them.
    pub fn from_dense_pattern(dense: &DenseMatrix, weight: f16) -> Result<Self> {
        Ok(Self::from_pattern(&CsrMatrix::from_dense(dense)?, weight))
    }

    /// The CSR matrix with `weight` as every value.
    pub fn to_csr(&self) -> CsrMatrix {
        CsrMatrix::from_trusted(
            self.rows,
            self.cols,
            self.row_ptr.clone(),
            self.col_idx.clone(),
            vec![self.weight; self.col_idx.len()],
        )
    }

    /// The dense matrix this describes: `weight` at every stored position, +0.0 elsewhere.
    pub fn to_dense(&self) -> Result<DenseMatrix> {
        let mut out = vec![f16::ZERO; element_count(self.rows, self.cols)?];
        for r in 0..self.rows {
            for c in self.row_columns(r) {
                out[r * self.cols + c] = self.weight;
            }
        }
        DenseMatrix::new(self.rows, self.cols, out)
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Row pointers (rows + 1).
    pub fn row_ptr(&self) -> &[u32] {
        &self.row_ptr
    }
    /// Column indices.
    pub fn col_idx(&self) -> &[u32] {
        &self.col_idx
    }
    /// The weight every stored entry holds.
    pub fn weight(&self) -> f16 {
        self.weight
    }
    /// Whether the weight is ±0, so that no entry contributes to a product.
    pub fn is_zero_weight(&self) -> bool {
        is_zero(self.weight)
    }
    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.col_idx.len()
    }
    /// Index range of row `r`'s entries.
    pub fn row_range(&self, r: usize) -> std::ops::Range<usize> {
        self.row_ptr[r] as usize..self.row_ptr[r + 1] as usize
    }
    /// The columns of row `r`'s entries, increasing.
    pub fn row_columns(&self, r: usize) -> impl Iterator<Item = usize> + '_ {
        self.col_idx[self.row_range(r)].iter().map(|&c| c as usize)
    }
    /// Storage in bytes: 4·(rows + 1) + 4·nnz + 2 (the weight).
    pub fn bytes(&self) -> u64 {
        4 * (self.rows as u64 + 1) + 4 * self.nnz() as u64 + 2
    }
    /// Bytes over the dense binary16 size (about 2·d).
    pub fn effective_density(&self) -> f64 {
        effective(self.bytes(), self.rows, self.cols)
    }
    /// Consumes the matrix, returning `(row_ptr, col_idx, weight)`.
    pub fn into_parts(self) -> (Vec<u32>, Vec<u32>, f16) {
        (self.row_ptr, self.col_idx, self.weight)
    }
}

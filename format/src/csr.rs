//! CSR with u32 row pointers and column indices and binary16 values: the format users would
//! otherwise pick, kept as a baseline and as an interchange format for the encoders.

use half::f16;
use rayon::prelude::*;

use crate::dense::{element_count, is_zero, DenseMatrix};
use crate::error::{FormatError, Result};
use crate::row_ptr::check_row_ptr;

/// A validated CSR matrix: `row_ptr` (rows + 1, from 0, non-decreasing), column indices strictly
/// increasing within each row and below `cols`, one binary16 value per index.
#[derive(Debug, Clone)]
pub struct CsrMatrix {
    rows: usize,
    cols: usize,
    row_ptr: Vec<u32>,
    col_idx: Vec<u32>,
    values: Vec<f16>,
}

/// Equal when every array is the same, the values bit for bit (a stored NaN equals itself).
impl PartialEq for CsrMatrix {
    fn eq(&self, other: &Self) -> bool {
        self.rows == other.rows
            && self.cols == other.cols
            && self.row_ptr == other.row_ptr
            && self.col_idx == other.col_idx
            && crate::dense::same_bits(&self.values, &other.values)
    }
}

impl Eq for CsrMatrix {}

impl CsrMatrix {
    /// Builds a matrix from untrusted arrays, checking every rule (see [`FormatError`]).
    pub fn from_parts(
        rows: usize,
        cols: usize,
        row_ptr: Vec<u32>,
        col_idx: Vec<u32>,
        values: Vec<f16>,
    ) -> Result<Self> {
        let entries = check_row_ptr(rows, &row_ptr)?;
        if col_idx.len() != entries || values.len() != entries {
            return Err(FormatError::CsrLength {
                entries,
                col_idx: col_idx.len(),
                values: values.len(),
            });
        }
        check_columns(rows, cols, &row_ptr, &col_idx)?;
        Ok(Self {
            rows,
            cols,
            row_ptr,
            col_idx,
            values,
        })
    }

    /// Assembles arrays the caller guarantees valid (encoders of this crate).
    pub(crate) fn from_trusted(
        rows: usize,
        cols: usize,
        row_ptr: Vec<u32>,
        col_idx: Vec<u32>,
        values: Vec<f16>,
    ) -> Self {
        debug_assert!(Self::from_parts(
            rows,
            cols,
            row_ptr.clone(),
            col_idx.clone(),
            values.clone()
        )
        .is_ok());
        Self {
            rows,
            cols,
            row_ptr,
            col_idx,
            values,
        }
    }

    /// CSR of the non-zero elements of a dense matrix (±0.0 dropped, NaN and ±∞ kept), built in
    /// parallel over rows.
    pub fn from_dense(dense: &DenseMatrix) -> Result<Self> {
        let (rows, cols) = (dense.rows(), dense.cols());
        let row = |r: usize| &dense.values()[r * cols..(r + 1) * cols];
        let counts: Vec<u64> = (0..rows)
            .into_par_iter()
            .map(|r| row(r).iter().filter(|v| !is_zero(**v)).count() as u64)
            .collect();
        let nnz: u64 = counts.iter().sum();
        if nnz > u32::MAX as u64 {
            return Err(FormatError::TooManyEntries {
                entries: nnz,
                padded: nnz,
            });
        }
        let mut row_ptr = Vec::with_capacity(rows + 1);
        row_ptr.push(0u32);
        for &n in &counts {
            row_ptr.push(row_ptr[row_ptr.len() - 1] + n as u32);
        }
        let mut col_idx = vec![0u32; nnz as usize];
        let mut values = vec![f16::ZERO; nnz as usize];
        let mut parts = Vec::with_capacity(rows);
        let (mut c_rest, mut v_rest) = (col_idx.as_mut_slice(), values.as_mut_slice());
        for &n in &counts {
            let (c, c_tail) = std::mem::take(&mut c_rest).split_at_mut(n as usize);
            let (v, v_tail) = std::mem::take(&mut v_rest).split_at_mut(n as usize);
            parts.push((c, v));
            (c_rest, v_rest) = (c_tail, v_tail);
        }
        parts.into_par_iter().enumerate().for_each(|(r, (c, v))| {
            let nonzeros = row(r).iter().enumerate().filter(|(_, x)| !is_zero(**x));
            for ((slot_c, slot_v), (col, x)) in c.iter_mut().zip(v.iter_mut()).zip(nonzeros) {
                *slot_c = col as u32;
                *slot_v = *x;
            }
        });
        Ok(Self::from_trusted(rows, cols, row_ptr, col_idx, values))
    }

    /// The dense matrix this CSR describes.
    pub fn to_dense(&self) -> Result<DenseMatrix> {
        let mut out = vec![f16::ZERO; element_count(self.rows, self.cols)?];
        for r in 0..self.rows {
            for i in self.row_range(r) {
                out[r * self.cols + self.col_idx[i] as usize] = self.values[i];
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
    /// Values.
    pub fn values(&self) -> &[f16] {
        &self.values
    }
    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.values.len()
    }
    /// Index range of row `r`'s entries.
    pub fn row_range(&self, r: usize) -> std::ops::Range<usize> {
        self.row_ptr[r] as usize..self.row_ptr[r + 1] as usize
    }
    /// Storage in bytes: 4·(rows + 1) + 6·nnz.
    pub fn bytes(&self) -> u64 {
        4 * (self.rows as u64 + 1) + 6 * self.nnz() as u64
    }
    /// Bytes over the dense binary16 size (about 3·d).
    pub fn effective_density(&self) -> f64 {
        effective(self.bytes(), self.rows, self.cols)
    }
    /// Consumes the matrix, returning `(row_ptr, col_idx, values)`.
    pub fn into_parts(self) -> (Vec<u32>, Vec<u32>, Vec<f16>) {
        (self.row_ptr, self.col_idx, self.values)
    }
}

/// The CSR rules on column indices, for CSR and homogeneous CSR alike: within each row (as the
/// already checked `row_ptr` delimits them) strictly increasing, and below `cols`.
pub(crate) fn check_columns(
    rows: usize,
    cols: usize,
    row_ptr: &[u32],
    col_idx: &[u32],
) -> Result<()> {
    for row in 0..rows {
        let (start, end) = (row_ptr[row] as usize, row_ptr[row + 1] as usize);
        let mut previous: Option<u32> = None;
        for (index, &column) in col_idx.iter().enumerate().take(end).skip(start) {
            if column as usize >= cols {
                return Err(FormatError::CsrColumnOutOfRange {
                    row,
                    index,
                    column,
                    cols,
                });
            }
            if let Some(previous) = previous {
                if column <= previous {
                    return Err(FormatError::CsrColumnsNotIncreasing {
                        row,
                        index,
                        previous,
                        column,
                    });
                }
            }
            previous = Some(column);
        }
    }
    Ok(())
}

/// `bytes / (2·rows·cols)`, or 0 for an empty shape.
pub(crate) fn effective(bytes: u64, rows: usize, cols: usize) -> f64 {
    let dense = 2.0 * rows as f64 * cols as f64;
    if dense == 0.0 {
        0.0
    } else {
        bytes as f64 / dense
    }
}

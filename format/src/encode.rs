//! Encoders into MACKO-16-4: from dense rows (parallel over rows), from CSR, from COO triplets.
//!
//! All three share one rule (FORMAT.md, "Canonical encoding"): a non-zero at column c, with
//! `next` the column after the previous entry of its row, skips `g = c − next` zeros; it is
//! preceded by ⌊g/16⌋ padding entries (+0.0, code 15, each covering 16 columns) and stored with
//! code `g mod 16`. Zeros after the last non-zero of a row produce nothing.

use half::f16;
use rayon::prelude::*;

use crate::csr::CsrMatrix;
use crate::dense::{is_zero, DenseMatrix};
use crate::error::{FormatError, Result};
use crate::macko::{padded_len, MackoMatrix, MAX_CODE};

/// Rows handed to one parallel task: big enough to amortise scheduling, small enough to balance.
const ROWS_PER_TASK: usize = 16;

/// Entries (padding included) that a row with these non-zero columns needs.
#[inline]
fn count_entries(nonzero_columns: impl Iterator<Item = usize>) -> u64 {
    let mut next = 0usize;
    let mut count = 0u64;
    for c in nonzero_columns {
        count += 1 + ((c - next) / 16) as u64;
        next = c + 1;
    }
    count
}

/// Writes a row's entries into `values`/`codes` (one code per byte, packed later); returns how
/// many were written. The slices must hold exactly [`count_entries`] of the same columns.
#[inline]
fn write_entries(
    nonzeros: impl Iterator<Item = (usize, f16)>,
    values: &mut [f16],
    codes: &mut [u8],
) -> usize {
    let mut next = 0usize;
    let mut k = 0usize;
    for (c, v) in nonzeros {
        let mut gap = c - next;
        while gap >= 16 {
            values[k] = f16::ZERO;
            codes[k] = MAX_CODE;
            k += 1;
            gap -= 16;
        }
        values[k] = v;
        codes[k] = gap as u8;
        k += 1;
        next = c + 1;
    }
    k
}

fn dense_nonzeros(row: &[f16]) -> impl Iterator<Item = (usize, f16)> + '_ {
    row.iter()
        .enumerate()
        .filter(|(_, v)| !is_zero(**v))
        .map(|(c, v)| (c, *v))
}

/// Row pointers from per-row entry counts, refusing a total whose padding exceeds u32.
fn row_ptr_from_counts(counts: &[u64]) -> Result<Vec<u32>> {
    let mut row_ptr = Vec::with_capacity(counts.len() + 1);
    let mut total = 0u64;
    row_ptr.push(0u32);
    for &n in counts {
        total += n;
        padded_len(total)?;
        row_ptr.push(total as u32);
    }
    Ok(row_ptr)
}

/// Packs one code per byte into two per byte (low nibble first), in parallel.
fn pack_codes(unpacked: &[u8]) -> Vec<u8> {
    let mut packed = vec![0u8; unpacked.len() / 2];
    packed
        .par_chunks_mut(1 << 14)
        .zip(unpacked.par_chunks(1 << 15))
        .for_each(|(out, inp)| {
            for (o, pair) in out.iter_mut().zip(inp.chunks_exact(2)) {
                *o = pair[0] | (pair[1] << 4);
            }
        });
    packed
}

/// Splits `values` and `codes` into one pair of slices per task of [`ROWS_PER_TASK`] rows.
fn split_by_tasks<'a>(
    row_ptr: &[u32],
    mut values: &'a mut [f16],
    mut codes: &'a mut [u8],
) -> Vec<(usize, &'a mut [f16], &'a mut [u8])> {
    let rows = row_ptr.len() - 1;
    let mut parts = Vec::with_capacity(rows.div_ceil(ROWS_PER_TASK));
    for first in (0..rows).step_by(ROWS_PER_TASK) {
        let last = (first + ROWS_PER_TASK).min(rows);
        let len = (row_ptr[last] - row_ptr[first]) as usize;
        let (v, v_rest) = std::mem::take(&mut values).split_at_mut(len);
        let (c, c_rest) = std::mem::take(&mut codes).split_at_mut(len);
        values = v_rest;
        codes = c_rest;
        parts.push((first, v, c));
    }
    parts
}

impl MackoMatrix {
    /// Canonical encoding of a dense matrix, in parallel over rows. Bit-compatible with the
    /// reference encoder.
    ///
    /// ```
    /// use half::f16;
    /// use macko_format::{DenseMatrix, MackoMatrix};
    /// let x = |v: f32| f16::from_f32(v);
    /// let dense = DenseMatrix::new(2, 3, vec![x(1.0), x(0.0), x(2.0), x(0.0), x(0.0), x(0.0)])?;
    /// let m = MackoMatrix::from_dense(&dense)?;
    /// assert_eq!(m.row_ptr(), &[0, 2, 2]);
    /// assert_eq!(m.to_dense()?, dense);
    /// # Ok::<(), macko_format::FormatError>(())
    /// ```
    pub fn from_dense(dense: &DenseMatrix) -> Result<Self> {
        let (rows, cols) = (dense.rows(), dense.cols());
        let row = |r: usize| &dense.values()[r * cols..(r + 1) * cols];
        let counts: Vec<u64> = (0..rows)
            .into_par_iter()
            .with_min_len(ROWS_PER_TASK)
            .map(|r| count_entries(dense_nonzeros(row(r)).map(|(c, _)| c)))
            .collect();
        let row_ptr = row_ptr_from_counts(&counts)?;
        let entries = row_ptr[rows] as u64;
        let padded = padded_len(entries)?;
        let mut values = vec![f16::ZERO; padded];
        let mut unpacked = vec![0u8; padded];
        split_by_tasks(&row_ptr, &mut values, &mut unpacked)
            .into_par_iter()
            .for_each(|(first, mut v, mut c)| {
                let last = (first + ROWS_PER_TASK).min(rows);
                for r in first..last {
                    let n = write_entries(dense_nonzeros(row(r)), v, c);
                    v = &mut std::mem::take(&mut v)[n..];
                    c = &mut std::mem::take(&mut c)[n..];
                }
            });
        let codes = pack_codes(&unpacked);
        Ok(Self::from_trusted(rows, cols, row_ptr, values, codes))
    }

    /// Canonical encoding of a dense row-major slice (see [`MackoMatrix::from_dense`]).
    pub fn from_dense_f16(rows: usize, cols: usize, values: &[f16]) -> Result<Self> {
        Self::from_dense(&DenseMatrix::new(rows, cols, values.to_vec())?)
    }

    /// Canonical encoding of a CSR matrix. Stored zeros of the CSR are treated as zeros (not
    /// kept), so the result equals `from_dense(csr.to_dense())`.
    pub fn from_csr(csr: &CsrMatrix) -> Result<Self> {
        let rows = csr.rows();
        let row_nonzeros = |r: usize| {
            csr.row_range(r)
                .map(|i| (csr.col_idx()[i] as usize, csr.values()[i]))
                .filter(|(_, v)| !is_zero(*v))
        };
        let counts: Vec<u64> = (0..rows)
            .map(|r| count_entries(row_nonzeros(r).map(|(c, _)| c)))
            .collect();
        let row_ptr = row_ptr_from_counts(&counts)?;
        let padded = padded_len(row_ptr[rows] as u64)?;
        let mut values = vec![f16::ZERO; padded];
        let mut unpacked = vec![0u8; padded];
        for r in 0..rows {
            let range = row_ptr[r] as usize..row_ptr[r + 1] as usize;
            write_entries(
                row_nonzeros(r),
                &mut values[range.clone()],
                &mut unpacked[range],
            );
        }
        let codes = pack_codes(&unpacked);
        Ok(Self::from_trusted(rows, csr.cols(), row_ptr, values, codes))
    }

    /// Canonical encoding of unsorted `(row, col, value)` triplets. A coordinate outside the
    /// shape or given twice is an error naming it.
    pub fn from_coo(rows: usize, cols: usize, triplets: &[(u32, u32, f16)]) -> Result<Self> {
        Self::from_csr(&CsrMatrix::from_coo(rows, cols, triplets)?)
    }
}

impl CsrMatrix {
    /// CSR from unsorted `(row, col, value)` triplets; zeros are kept as given. A coordinate
    /// outside the shape or given twice is an error naming it.
    pub fn from_coo(rows: usize, cols: usize, triplets: &[(u32, u32, f16)]) -> Result<Self> {
        if triplets.len() > u32::MAX as usize {
            return Err(FormatError::TooManyEntries {
                entries: triplets.len() as u64,
                padded: triplets.len() as u64,
            });
        }
        if let Some(&(row, col, _)) = triplets
            .iter()
            .find(|(r, c, _)| *r as usize >= rows || *c as usize >= cols)
        {
            return Err(FormatError::CoordinateOutOfRange {
                row,
                col,
                rows,
                cols,
            });
        }
        let mut sorted = triplets.to_vec();
        sorted.par_sort_unstable_by_key(|&(r, c, _)| (r, c));
        if let Some(w) = sorted
            .windows(2)
            .find(|w| (w[0].0, w[0].1) == (w[1].0, w[1].1))
        {
            return Err(FormatError::DuplicateCoordinate {
                row: w[0].0,
                col: w[0].1,
            });
        }
        // `rows + 1` checked: a caller may pass any `rows` (usize::MAX would wrap to an empty
        // row_ptr and then index out of bounds).
        let row_ptr_len = rows.checked_add(1).ok_or(FormatError::ShapeTooLarge {
            rows,
            cols,
            what: "rows + 1 overflows usize",
        })?;
        let mut row_ptr = vec![0u32; row_ptr_len];
        for &(r, _, _) in &sorted {
            row_ptr[r as usize + 1] += 1;
        }
        for r in 0..rows {
            row_ptr[r + 1] += row_ptr[r];
        }
        let col_idx = sorted.iter().map(|t| t.1).collect();
        let values = sorted.iter().map(|t| t.2).collect();
        Ok(Self::from_trusted(rows, cols, row_ptr, col_idx, values))
    }
}

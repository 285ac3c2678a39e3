//! The MACKO-16-4 matrix: validated arrays, entry decoding, canonical form and storage.
//! See docs/FORMAT.md, "Arrays": `row_ptr` (u32, rows + 1), `values` (binary16, P) and `codes`
//! (4-bit gap codes, two per byte, P / 2), with P = ⌈N/8⌉·8 and N = row_ptr[rows].

use half::f16;

use crate::csr::{effective, CsrMatrix};
use crate::dense::{element_count, is_zero, DenseMatrix};
use crate::error::{FormatError, Result};
use crate::row_ptr::check_row_ptr;

/// Entries per aligned group: one 16-byte load of values, one 32-bit load of codes.
pub const GROUP: usize = 8;

/// Largest gap one code can express.
pub const MAX_CODE: u8 = 15;

/// Format name and version written into containers.
pub const FORMAT_NAME: &str = "MACKO-16-4";
/// Version of the array layout (bumped on any incompatible change).
pub const FORMAT_VERSION: u32 = 1;

/// A validated MACKO-16-4 matrix. Every instance satisfies rules 1–4 of docs/FORMAT.md
/// ("Validity of untrusted arrays"), so any backend can multiply it without further checks.
#[derive(Debug, Clone)]
pub struct MackoMatrix {
    rows: usize,
    cols: usize,
    row_ptr: Vec<u32>,
    values: Vec<f16>,
    codes: Vec<u8>,
}

/// Equal when every array is the same bit for bit: the values are stored binary16 bits, not
/// numbers, so a stored NaN equals itself (`load(save(m)) == m` holds for every valid matrix)
/// and a stored −0.0 differs from +0.0.
impl PartialEq for MackoMatrix {
    fn eq(&self, other: &Self) -> bool {
        self.rows == other.rows
            && self.cols == other.cols
            && self.row_ptr == other.row_ptr
            && self.codes == other.codes
            && crate::dense::same_bits(&self.values, &other.values)
    }
}

impl Eq for MackoMatrix {}

/// Padded length P = ⌈N/8⌉·8, refused when it does not fit u32.
pub fn padded_len(entries: u64) -> Result<usize> {
    let padded = entries.div_ceil(GROUP as u64) * GROUP as u64;
    if padded > u32::MAX as u64 {
        return Err(FormatError::TooManyEntries { entries, padded });
    }
    Ok(padded as usize)
}

/// Code of entry `i` (low nibble for even i).
#[inline(always)]
pub fn code_at(codes: &[u8], i: usize) -> u8 {
    (codes[i / 2] >> ((i & 1) * 4)) & 0x0f
}

/// Rules 2–4 of docs/FORMAT.md for the gap codes of a matrix whose `row_ptr` passed rule 1 and
/// whose entries pad to `padded`: `codes` holds P / 2 bytes, the tail's codes are 0, and every
/// row's last column is below `cols`. Shared by every layout with MACKO gap codes (f16 and
/// quantized values), which check their values themselves.
pub(crate) fn check_gap_codes(
    rows: usize,
    cols: usize,
    row_ptr: &[u32],
    codes: &[u8],
    padded: usize,
) -> Result<()> {
    let entries = row_ptr[rows] as usize;
    if codes.len() != padded / 2 {
        return Err(FormatError::CodesLength {
            entries,
            expected: padded / 2,
            found: codes.len(),
        });
    }
    if let Some(index) = (entries..padded).find(|&i| code_at(codes, i) != 0) {
        return Err(FormatError::TailCodeNotZero {
            index,
            code: code_at(codes, index),
        });
    }
    for row in 0..rows {
        let (start, end) = (row_ptr[row] as usize, row_ptr[row + 1] as usize);
        if start == end {
            continue;
        }
        // u64: at most 2^32 entries of code ≤ 15 each, far below 2^64.
        let gaps: u64 = (start..end).map(|i| code_at(codes, i) as u64).sum();
        let column = (end - start - 1) as u64 + gaps;
        if column >= cols as u64 {
            return Err(FormatError::ColumnOutOfRange { row, column, cols });
        }
    }
    Ok(())
}

impl MackoMatrix {
    /// Builds a matrix from untrusted arrays, checking rules 1–4 of docs/FORMAT.md ("Validity of
    /// untrusted arrays"). The error names the rule and the row or index that breaks it. Runs in
    /// O(rows + P), allocates nothing.
    pub fn from_parts(
        rows: usize,
        cols: usize,
        row_ptr: Vec<u32>,
        values: Vec<f16>,
        codes: Vec<u8>,
    ) -> Result<Self> {
        let entries = check_row_ptr(rows, &row_ptr)?;
        let padded = padded_len(entries as u64)?;
        if values.len() != padded {
            return Err(FormatError::ValuesLength {
                entries,
                expected: padded,
                found: values.len(),
            });
        }
        if let Some((index, value)) = values
            .iter()
            .enumerate()
            .skip(entries)
            .find(|(_, v)| v.to_bits() != 0)
        {
            return Err(FormatError::TailValueNotZero {
                index,
                bits: value.to_bits(),
            });
        }
        check_gap_codes(rows, cols, &row_ptr, &codes, padded)?;
        Ok(Self {
            rows,
            cols,
            row_ptr,
            values,
            codes,
        })
    }

    /// Assembles arrays the encoders of this crate produced (valid by construction).
    pub(crate) fn from_trusted(
        rows: usize,
        cols: usize,
        row_ptr: Vec<u32>,
        values: Vec<f16>,
        codes: Vec<u8>,
    ) -> Self {
        let m = Self {
            rows,
            cols,
            row_ptr,
            values,
            codes,
        };
        debug_assert!(Self::from_parts(
            m.rows,
            m.cols,
            m.row_ptr.clone(),
            m.values.clone(),
            m.codes.clone()
        )
        .is_ok());
        m
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Row pointers: row r owns entries `row_ptr[r]..row_ptr[r + 1]`.
    pub fn row_ptr(&self) -> &[u32] {
        &self.row_ptr
    }
    /// Entry values, padded with +0.0 to P.
    pub fn values(&self) -> &[f16] {
        &self.values
    }
    /// Gap codes, two per byte (low nibble first), P / 2 bytes.
    pub fn codes(&self) -> &[u8] {
        &self.codes
    }
    /// N: stored entries, padding entries included, tail padding excluded.
    pub fn entries(&self) -> usize {
        self.row_ptr[self.rows] as usize
    }
    /// P: the length of `values` (N rounded up to a multiple of 8).
    pub fn padded_entries(&self) -> usize {
        self.values.len()
    }
    /// Index range of row `r`'s entries.
    pub fn row_range(&self, r: usize) -> std::ops::Range<usize> {
        self.row_ptr[r] as usize..self.row_ptr[r + 1] as usize
    }
    /// Consumes the matrix, returning `(row_ptr, values, codes)`.
    pub fn into_parts(self) -> (Vec<u32>, Vec<f16>, Vec<u8>) {
        (self.row_ptr, self.values, self.codes)
    }

    /// The entries of row `r` as `(column, value)`, padding entries included.
    pub fn row_entries(&self, r: usize) -> impl Iterator<Item = (usize, f16)> + '_ {
        let mut next_column = 0usize;
        self.row_range(r).map(move |i| {
            let column = next_column + code_at(&self.codes, i) as usize;
            next_column = column + 1;
            (column, self.values[i])
        })
    }

    /// Storage in bytes: 2.5·P + 4·(rows + 1).
    pub fn bytes(&self) -> u64 {
        2 * self.values.len() as u64 + self.codes.len() as u64 + 4 * self.row_ptr.len() as u64
    }

    /// Bytes over the dense binary16 size (`2·rows·cols`); 0 for an empty shape.
    pub fn effective_density(&self) -> f64 {
        effective(self.bytes(), self.rows, self.cols)
    }

    /// Whether the arrays are the canonical encoding of their dense matrix: every zero-valued
    /// entry has code 15 (is a padding entry) and no row ends with a zero. Only canonical
    /// matrices round-trip through dense bit for bit.
    pub fn is_canonical(&self) -> bool {
        (0..self.rows).all(|r| {
            let range = self.row_range(r);
            if range.is_empty() {
                return true;
            }
            let last_nonzero = !is_zero(self.values[range.end - 1]);
            let zeros_are_padding = range
                .clone()
                .all(|i| !is_zero(self.values[i]) || code_at(&self.codes, i) == MAX_CODE);
            // A canonical padding entry is +0.0 (−0.0 is not preserved).
            let zeros_positive = range
                .clone()
                .all(|i| !is_zero(self.values[i]) || self.values[i].to_bits() == 0);
            last_nonzero && zeros_are_padding && zeros_positive
        })
    }

    /// The dense matrix these arrays describe (padding entries write their +0.0).
    pub fn to_dense(&self) -> Result<DenseMatrix> {
        let mut out = vec![f16::ZERO; element_count(self.rows, self.cols)?];
        for r in 0..self.rows {
            let row = &mut out[r * self.cols..(r + 1) * self.cols];
            for (c, v) in self.row_entries(r) {
                row[c] = v;
            }
        }
        DenseMatrix::new(self.rows, self.cols, out)
    }

    /// CSR of the non-zero entries (padding entries, and any other zero-valued entry, dropped).
    pub fn to_csr(&self) -> Result<CsrMatrix> {
        let mut row_ptr = Vec::with_capacity(self.rows + 1);
        let mut col_idx = Vec::new();
        let mut values = Vec::new();
        row_ptr.push(0u32);
        for r in 0..self.rows {
            for (c, v) in self.row_entries(r) {
                if !is_zero(v) {
                    col_idx.push(c as u32);
                    values.push(v);
                }
            }
            row_ptr.push(col_idx.len() as u32);
        }
        Ok(CsrMatrix::from_trusted(
            self.rows, self.cols, row_ptr, col_idx, values,
        ))
    }
}

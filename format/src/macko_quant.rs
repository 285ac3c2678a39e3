//! MACKO with quantized values (MACKO-Q8 and MACKO-Q4): the row pointers and 4-bit gap codes of
//! MACKO-16-4, unchanged, with int8 or int4 values and binary16 scales instead of binary16
//! values (docs/FORMAT.md, "Quantized values"). 1.5 bytes per entry with int8, 1 with int4,
//! plus the scales.

use half::f16;

use crate::dense::{element_count, DenseMatrix};
use crate::error::Result;
use crate::macko::{check_gap_codes, code_at, padded_len, MackoMatrix};
use crate::quant::{QuantValues, Quantization};
use crate::row_ptr::check_row_ptr;

/// A validated MACKO matrix with quantized values: every instance satisfies the rules of
/// docs/FORMAT.md for its row pointers and codes, and those of quantized values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuantMackoMatrix {
    rows: usize,
    cols: usize,
    row_ptr: Vec<u32>,
    codes: Vec<u8>,
    values: QuantValues,
}

impl QuantMackoMatrix {
    /// Builds a matrix from untrusted arrays: `row_ptr` and `codes` as in
    /// [`MackoMatrix::from_parts`], `q` the P packed codes of the values (int8: P bytes, int4:
    /// P / 2), `scales` one per row or per G entries. The error names the rule broken.
    pub fn from_parts(
        quant: Quantization,
        rows: usize,
        cols: usize,
        row_ptr: Vec<u32>,
        codes: Vec<u8>,
        q: Vec<u8>,
        scales: Vec<f16>,
    ) -> Result<Self> {
        let entries = check_row_ptr(rows, &row_ptr)?;
        let padded = padded_len(entries as u64)?;
        let values = QuantValues::from_parts(quant, rows, padded, entries, q, scales)?;
        check_gap_codes(rows, cols, &row_ptr, &codes, padded)?;
        Ok(Self {
            rows,
            cols,
            row_ptr,
            codes,
            values,
        })
    }

    /// Quantizes a MACKO matrix's values (symmetric round-to-nearest, absmax scales); the
    /// structure (row pointers, gap codes, padding entries) is kept as it is. Refuses NaN and
    /// ±∞ values.
    pub fn quantize(m: &MackoMatrix, quant: Quantization) -> Result<Self> {
        let values =
            QuantValues::quantize(quant, m.values(), (0..m.rows()).map(|r| m.row_range(r)))?;
        Ok(Self {
            rows: m.rows(),
            cols: m.cols(),
            row_ptr: m.row_ptr().to_vec(),
            codes: m.codes().to_vec(),
            values,
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
    /// Row pointers, as in [`MackoMatrix::row_ptr`].
    pub fn row_ptr(&self) -> &[u32] {
        &self.row_ptr
    }
    /// Gap codes, as in [`MackoMatrix::codes`].
    pub fn codes(&self) -> &[u8] {
        &self.codes
    }
    /// The quantized values (P of them) and their scales.
    pub fn values(&self) -> &QuantValues {
        &self.values
    }
    /// The width and scale layout.
    pub fn quantization(&self) -> Quantization {
        self.values.quantization()
    }
    /// N: stored entries (tail padding excluded).
    pub fn entries(&self) -> usize {
        self.row_ptr[self.rows] as usize
    }
    /// Index range of row `r`'s entries.
    pub fn row_range(&self, r: usize) -> std::ops::Range<usize> {
        self.row_ptr[r] as usize..self.row_ptr[r + 1] as usize
    }

    /// The entries of row `r` as `(column, scale · q)` with the value exact in f64, padding
    /// entries included.
    pub fn row_entries(&self, r: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        let mut next_column = 0usize;
        self.row_range(r).map(move |i| {
            let column = next_column + code_at(&self.codes, i) as usize;
            next_column = column + 1;
            (column, self.values.value(i, r))
        })
    }

    /// Storage in bytes: the packed values, P / 2 bytes of codes, 4·(rows + 1) of row pointers
    /// and 2 per scale.
    pub fn bytes(&self) -> u64 {
        self.values.bytes() + self.codes.len() as u64 + 4 * self.row_ptr.len() as u64
    }

    /// Bytes over the dense binary16 size (`2·rows·cols`); 0 for an empty shape.
    pub fn effective_density(&self) -> f64 {
        crate::csr::effective(self.bytes(), self.rows, self.cols)
    }

    /// The dequantized matrix in binary16 (each `scale · q` rounded to the nearest binary16:
    /// lossy where the product needs more than 11 bits; the f64 reference uses the exact
    /// values).
    pub fn dequantize(&self) -> Result<DenseMatrix> {
        let mut out = vec![f16::ZERO; element_count(self.rows, self.cols)?];
        for r in 0..self.rows {
            let row = &mut out[r * self.cols..(r + 1) * self.cols];
            for (c, v) in self.row_entries(r) {
                row[c] = f16::from_f64(v);
            }
        }
        DenseMatrix::new(self.rows, self.cols, out)
    }

    /// Consumes the matrix: `(row_ptr, codes, values)`.
    pub fn into_parts(self) -> (Vec<u32>, Vec<u8>, QuantValues) {
        (self.row_ptr, self.codes, self.values)
    }
}

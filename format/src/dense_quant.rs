//! Dense matrices with quantized values (dense int8 and int4, the FastGEMV-style baselines of
//! the quantized MACKO layouts): row-major codes with binary16 scales (docs/FORMAT.md,
//! "Quantized values").

use half::f16;

use crate::dense::{element_count, DenseMatrix};
use crate::error::Result;
use crate::quant::{QuantValues, Quantization};

/// A validated `rows × cols` matrix of quantized values in row-major order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuantDenseMatrix {
    rows: usize,
    cols: usize,
    values: QuantValues,
}

impl QuantDenseMatrix {
    /// Builds a matrix from untrusted arrays: `q` the rows·cols packed codes (int8: one byte
    /// each; int4: ⌈rows·cols / 2⌉ bytes, a spare high nibble 0), `scales` one per row or per G
    /// values in row-major order.
    pub fn from_parts(
        quant: Quantization,
        rows: usize,
        cols: usize,
        q: Vec<u8>,
        scales: Vec<f16>,
    ) -> Result<Self> {
        let n = element_count(rows, cols)?;
        let values = QuantValues::from_parts(quant, rows, n, n, q, scales)?;
        Ok(Self { rows, cols, values })
    }

    /// Quantizes a dense matrix (symmetric round-to-nearest, absmax scales). Refuses NaN and
    /// ±∞ values.
    pub fn quantize(m: &DenseMatrix, quant: Quantization) -> Result<Self> {
        let cols = m.cols();
        let values = QuantValues::quantize(
            quant,
            m.values(),
            (0..m.rows()).map(|r| r * cols..(r + 1) * cols),
        )?;
        Ok(Self {
            rows: m.rows(),
            cols,
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
    /// The quantized values (rows·cols of them) and their scales.
    pub fn values(&self) -> &QuantValues {
        &self.values
    }
    /// The width and scale layout.
    pub fn quantization(&self) -> Quantization {
        self.values.quantization()
    }
    /// Element (r, c) exactly: `scale · q` in f64.
    pub fn value(&self, r: usize, c: usize) -> f64 {
        self.values.value(r * self.cols + c, r)
    }
    /// Storage in bytes: the packed values and 2 per scale.
    pub fn bytes(&self) -> u64 {
        self.values.bytes()
    }
    /// Bytes over the dense binary16 size; 0 for an empty shape.
    pub fn effective_density(&self) -> f64 {
        crate::csr::effective(self.bytes(), self.rows, self.cols)
    }
    /// The dequantized matrix in binary16 (each `scale · q` rounded to the nearest binary16).
    pub fn dequantize(&self) -> Result<DenseMatrix> {
        let mut out = Vec::with_capacity(element_count(self.rows, self.cols)?);
        for r in 0..self.rows {
            for c in 0..self.cols {
                out.push(f16::from_f64(self.value(r, c)));
            }
        }
        DenseMatrix::new(self.rows, self.cols, out)
    }
    /// Consumes the matrix, returning its values.
    pub fn into_values(self) -> QuantValues {
        self.values
    }
}

//! What the CPU backend stores: a matrix's arrays and a vector's elements. A leaf module, shared
//! by the single-vector loops (mod.rs) and the few-token ones (batch.rs).

use super::bitmap::BitmapMatrix;
use half::f16;
use macko_format::{
    CsrMatrix, DenseMatrix, HomogeneousCsrMatrix, MackoMatrix, QuantDenseMatrix, QuantMackoMatrix,
    Sparse24Matrix,
};

/// Rows per parallel task.
pub(super) const ROWS_PER_TASK: usize = 32;

/// The arrays of a CPU matrix (a copy of the validated host arrays).
pub(super) enum CpuData {
    Macko(MackoMatrix),
    Csr(CsrMatrix),
    Dense(DenseMatrix),
    /// A binary16 MACKO matrix in the bitmap layout (bitmap.rs), stored instead of its MACKO
    /// arrays where the plan's layout is `CpuLayout::Bitmap`.
    Bitmap(BitmapMatrix),
}

impl CpuData {
    /// Rows and columns.
    pub(super) fn shape(&self) -> (usize, usize) {
        match self {
            CpuData::Macko(m) => (m.rows(), m.cols()),
            CpuData::Csr(m) => (m.rows(), m.cols()),
            CpuData::Dense(m) => (m.rows(), m.cols()),
            CpuData::Bitmap(m) => m.shape(),
        }
    }
}

/// The arrays of a CPU matrix with quantized values (multiplied by quant.rs).
pub(super) enum CpuQuant {
    Macko(QuantMackoMatrix),
    Dense(QuantDenseMatrix),
}

/// What a CPU matrix holds: binary16 values, multiplied by the loops of mod.rs and batch.rs,
/// quantized ones, multiplied by quant.rs (one pass for all the vectors of a product), a 2:4
/// matrix, multiplied by sparse24.rs (one pass too), or a homogeneous CSR matrix, multiplied by
/// sparse_inputs.rs.
pub(super) enum CpuStored {
    Plain(CpuData),
    Quant(CpuQuant),
    Sparse24(Sparse24Matrix),
    HomogeneousCsr(HomogeneousCsrMatrix),
}

impl CpuStored {
    /// Rows and columns.
    pub(super) fn shape(&self) -> (usize, usize) {
        match self {
            CpuStored::Plain(d) => d.shape(),
            CpuStored::Quant(CpuQuant::Macko(m)) => (m.rows(), m.cols()),
            CpuStored::Quant(CpuQuant::Dense(m)) => (m.rows(), m.cols()),
            CpuStored::Sparse24(m) => (m.rows(), m.cols()),
            CpuStored::HomogeneousCsr(m) => (m.rows(), m.cols()),
        }
    }
}

/// A vector on the CPU.
pub(crate) enum CpuVector {
    F16(Vec<f16>),
    F32(Vec<f32>),
}

/// A sparse vector on the CPU: its stored entries, the values widened to f32 once at upload and
/// the ±0 ones dropped (they contribute nothing to any product).
pub(crate) struct CpuSparseVector {
    /// Elements of the vector, stored or not.
    pub(super) len: usize,
    /// `(index, value)` of the non-zero entries, indices increasing.
    pub(super) entries: Vec<(usize, f32)>,
}

//! The kernels: which WGSL kernel multiplies which matrix on which path, its source (composed
//! of shaders/ files with `include_str!`), its workgroup size and the bind group layout of its
//! matrix. Pipelines, their keys and their layouts are pipelines.rs's.

use crate::backend::MatrixKind;

/// A kernel's full source: common.wgsl, then the given preludes and the kernel file; with
/// `enable: "..."` that directive line first (WGSL wants it before every declaration).
macro_rules! kernel_source {
    ($($file:literal),+) => {
        kernel_source!(enable: ""; $($file),+)
    };
    (enable: $directive:literal; $($file:literal),+) => {
        concat!(
            $directive,
            include_str!("../../../shaders/common.wgsl"),
            $("\n", include_str!(concat!("../../../shaders/", $file))),+
        )
    };
}

/// A quantized kernel's full source: common.wgsl, quant.wgsl, the width file of int4 (`$int4`
/// true) or int8 codes, then the given preludes and the kernel file.
macro_rules! quant_source {
    ($int4:expr; $($file:literal),+) => {
        if $int4 {
            kernel_source!("quant.wgsl", "quant_int4.wgsl", $($file),+)
        } else {
            kernel_source!("quant.wgsl", "quant_int8.wgsl", $($file),+)
        }
    };
}

/// Which family of kernels runs the products.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelPath {
    /// Subgroup operations (scan, sum, broadcast).
    Subgroup,
    /// Workgroup memory and barriers only.
    Workgroup,
}

/// One compute kernel.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    MackoSubgroup,
    MackoWorkgroup,
    CsrSubgroup,
    CsrWorkgroup,
    /// 2:4 structured sparsity (shaders/README.md, "2:4 structured sparsity").
    Sparse24Subgroup,
    Sparse24Workgroup,
    DenseSubgroup,
    DenseWorkgroup,
    Stream,
    /// Few-token products (shaders/README.md, "Few-token products"): the kernels of a chunk
    /// of W vectors, and the transposition of the chunk's x into XT before them.
    MackoBatchSubgroup,
    MackoBatchWorkgroup,
    CsrBatchSubgroup,
    CsrBatchWorkgroup,
    Sparse24BatchSubgroup,
    Sparse24BatchWorkgroup,
    /// Dense few-token products on both paths (no subgroup operation).
    DenseBatch,
    BatchTranspose,
    /// Quantized matrices (int8 or int4 values, binary16 scales; shaders/README.md, "Quantized
    /// matrices"): MACKO and dense, single vector on each path, few-token on both.
    QuantMackoSubgroup,
    QuantMackoWorkgroup,
    QuantDenseSubgroup,
    QuantDenseWorkgroup,
    QuantMackoBatch,
    QuantDenseBatch,
    /// The transposed CSR product with a sparse x, y = Aᵀ·x (shaders/README.md, "Transposed
    /// products with a sparse x"): one path, workgroup memory and barriers only.
    CsrTransposed,
    /// The same kernel with a dense x (`DENSE_X`), its zeros skipped (the `DenseXTransposed`
    /// layout).
    CsrTransposedDense,
    /// The transposed MACKO (binary16) product with a sparse x: CSR's column tiles, each
    /// selected row decoded by the workgroup (shaders/macko_transposed_wg.wgsl).
    MackoTransposed,
    /// The same kernel with a dense x (`DENSE_X`; the `DenseXTransposed` layout).
    MackoTransposedDense,
    /// The transposed products' second pass: y from the chunks' partial sums
    /// (shaders/transposed_combine_wg.wgsl).
    TransposedCombine,
}

/// What a quantized kernel's code depends on besides the kernel: the width of the codes (the
/// width file composed after quant.wgsl) and where values find their scales (`PER_GROUP`,
/// `SCALE_POW2`).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QuantKey {
    /// int4 codes (quant_int4.wgsl), else int8 (quant_int8.wgsl).
    pub int4: bool,
    /// Scales per group of G stored values, else per row.
    pub per_group: bool,
    /// Per group: the units per scale (G / 8 MACKO groups, G dense values) are a power of two,
    /// so a scale's index is a shift instead of a division.
    pub pow2: bool,
}

/// Which bind group layout a kernel's group 0 uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MatrixLayout {
    /// Params, row_ptr, values, codes or col_idx, and the partial row sums of the MACKO
    /// subgroup kernel with x in column tiles (the other sparse kernels leave them alone).
    Sparse,
    /// Params, values.
    Dense,
    /// 2:4: params, values (binding 2), positions (binding 3), both read-only.
    Sparse24,
    /// Quantized MACKO: params, row_ptr, codes of values, gap codes, scales (all read-only).
    QuantSparse,
    /// Quantized dense: params, codes of values (binding 2), scales (binding 4).
    QuantDense,
    /// Stream params, data, per-workgroup sums.
    Stream,
    /// `Sparse` or `Dense`, then x and y, then the chunk (uniform and XT) as group 3.
    SparseBatch,
    DenseBatch,
    Sparse24Batch,
    QuantSparseBatch,
    QuantDenseBatch,
    /// The chunk (uniform and XT, written) as group 0, x as group 1.
    Transpose,
    /// `Sparse`, then the sparse x (uniform, indices, f32 values at bindings 2..4), then y,
    /// then the partial sums (group 3, written; shaders/transposed.wgsl).
    SparseTransposed,
    /// `Sparse`, then x, y and the partial sums: the transposed products with a dense x.
    DenseXTransposed,
    /// `Sparse` (for its params), an empty group 1, y, then the partial sums (read).
    TransposedCombine,
}

/// Rows computed by one workgroup of the dense kernels (ROWS in dense_*.wgsl).
pub(super) const DENSE_ROWS_PER_WORKGROUP: u32 = 4;
/// Invocations of a stream workgroup, and words each reads per step (stream.wgsl).
pub(super) const STREAM_WORKGROUP: u32 = 256;
pub(super) const STREAM_UNROLL: u32 = 4;

impl Kernel {
    /// The kernel multiplying `format` on `path`. Homogeneous CSR matrices share CSR's kernels,
    /// built with `HOMOGENEOUS` (csr.wgsl: one weight for every entry).
    pub fn for_product(format: MatrixKind, path: KernelPath) -> Self {
        match (format, path) {
            (MatrixKind::Macko, KernelPath::Subgroup) => Kernel::MackoSubgroup,
            (MatrixKind::Macko, KernelPath::Workgroup) => Kernel::MackoWorkgroup,
            (MatrixKind::Csr | MatrixKind::HomogeneousCsr, KernelPath::Subgroup) => {
                Kernel::CsrSubgroup
            }
            (MatrixKind::Csr | MatrixKind::HomogeneousCsr, KernelPath::Workgroup) => {
                Kernel::CsrWorkgroup
            }
            (MatrixKind::Sparse24, KernelPath::Subgroup) => Kernel::Sparse24Subgroup,
            (MatrixKind::Sparse24, KernelPath::Workgroup) => Kernel::Sparse24Workgroup,
            (MatrixKind::Dense, KernelPath::Subgroup) => Kernel::DenseSubgroup,
            (MatrixKind::Dense, KernelPath::Workgroup) => Kernel::DenseWorkgroup,
            (MatrixKind::MackoQuant, KernelPath::Subgroup) => Kernel::QuantMackoSubgroup,
            (MatrixKind::MackoQuant, KernelPath::Workgroup) => Kernel::QuantMackoWorkgroup,
            (MatrixKind::DenseQuant, KernelPath::Subgroup) => Kernel::QuantDenseSubgroup,
            (MatrixKind::DenseQuant, KernelPath::Workgroup) => Kernel::QuantDenseWorkgroup,
        }
    }

    /// The kernel of few-token products of the matrices this single-vector kernel multiplies
    /// (itself for the batch kernels and the streaming read, which have none).
    pub fn for_batch(self) -> Self {
        match self {
            Kernel::MackoSubgroup => Kernel::MackoBatchSubgroup,
            Kernel::MackoWorkgroup => Kernel::MackoBatchWorkgroup,
            Kernel::CsrSubgroup => Kernel::CsrBatchSubgroup,
            Kernel::CsrWorkgroup => Kernel::CsrBatchWorkgroup,
            Kernel::Sparse24Subgroup => Kernel::Sparse24BatchSubgroup,
            Kernel::Sparse24Workgroup => Kernel::Sparse24BatchWorkgroup,
            Kernel::DenseSubgroup | Kernel::DenseWorkgroup => Kernel::DenseBatch,
            Kernel::QuantMackoSubgroup | Kernel::QuantMackoWorkgroup => Kernel::QuantMackoBatch,
            Kernel::QuantDenseSubgroup | Kernel::QuantDenseWorkgroup => Kernel::QuantDenseBatch,
            other => other,
        }
    }

    /// Whether this is a few-token kernel whose invocations per workgroup are the pipeline
    /// constant `WORKGROUP` (the subgroup ones).
    pub fn batch_workgroup_constant(self) -> bool {
        matches!(
            self,
            Kernel::MackoBatchSubgroup | Kernel::CsrBatchSubgroup | Kernel::Sparse24BatchSubgroup
        )
    }

    /// Whether this is a few-token product kernel (group 3 the chunk, `W` a constant).
    pub fn is_batch(self) -> bool {
        matches!(
            self,
            Kernel::MackoBatchSubgroup
                | Kernel::MackoBatchWorkgroup
                | Kernel::CsrBatchSubgroup
                | Kernel::CsrBatchWorkgroup
                | Kernel::Sparse24BatchSubgroup
                | Kernel::Sparse24BatchWorkgroup
                | Kernel::DenseBatch
                | Kernel::QuantMackoBatch
                | Kernel::QuantDenseBatch
        )
    }

    /// The kernel's WGSL; `x_f16`: the MACKO subgroup kernels (binary16 or quantized) with x
    /// staged as f16 scalars.
    /// `int4`: a quantized kernel's codes are int4 (else int8).
    pub(super) fn source(self, x_f16: bool, int4: bool) -> &'static str {
        match self {
            Kernel::MackoSubgroup if x_f16 => kernel_source!(
                enable: "enable f16;\n";
                "macko.wgsl", "macko_x_f16.wgsl", "macko_sg.wgsl"
            ),
            Kernel::MackoSubgroup => {
                kernel_source!("macko.wgsl", "macko_x_words.wgsl", "macko_sg.wgsl")
            }
            Kernel::MackoWorkgroup => {
                kernel_source!("macko.wgsl", "macko_x_words.wgsl", "macko_wg.wgsl")
            }
            Kernel::CsrSubgroup => kernel_source!("csr.wgsl", "csr_sg.wgsl"),
            Kernel::CsrWorkgroup => kernel_source!("csr.wgsl", "csr_wg.wgsl"),
            Kernel::Sparse24Subgroup => kernel_source!("sparse24.wgsl", "sparse24_sg.wgsl"),
            Kernel::Sparse24Workgroup => kernel_source!("sparse24.wgsl", "sparse24_wg.wgsl"),
            Kernel::DenseSubgroup => kernel_source!("dense_sg.wgsl"),
            Kernel::DenseWorkgroup => kernel_source!("dense_wg.wgsl"),
            Kernel::Stream => kernel_source!("stream.wgsl"),
            Kernel::MackoBatchSubgroup => kernel_source!(
                "macko.wgsl",
                "macko_x_words.wgsl",
                "batch.wgsl",
                "macko_batch.wgsl",
                "macko_batch_sg.wgsl"
            ),
            Kernel::MackoBatchWorkgroup => kernel_source!(
                "macko.wgsl",
                "macko_x_words.wgsl",
                "batch.wgsl",
                "macko_batch.wgsl",
                "macko_batch_wg.wgsl"
            ),
            Kernel::CsrBatchSubgroup => {
                kernel_source!("csr.wgsl", "batch.wgsl", "csr_batch_sg.wgsl")
            }
            Kernel::CsrBatchWorkgroup => {
                kernel_source!("csr.wgsl", "batch.wgsl", "csr_batch_wg.wgsl")
            }
            Kernel::Sparse24BatchSubgroup => {
                kernel_source!("sparse24.wgsl", "batch.wgsl", "sparse24_batch_sg.wgsl")
            }
            Kernel::Sparse24BatchWorkgroup => {
                kernel_source!("sparse24.wgsl", "batch.wgsl", "sparse24_batch_wg.wgsl")
            }
            Kernel::DenseBatch => kernel_source!("batch.wgsl", "dense_batch_wg.wgsl"),
            Kernel::BatchTranspose => kernel_source!("batch_xt.wgsl"),
            // With macko_sg's x layouts: f16 scalars (x_f16) or f16 pairs.
            Kernel::QuantMackoSubgroup if x_f16 && int4 => kernel_source!(
                enable: "enable f16;\n";
                "quant.wgsl",
                "quant_int4.wgsl",
                "quant_macko.wgsl",
                "macko_x_f16.wgsl",
                "quant_macko_sg.wgsl"
            ),
            Kernel::QuantMackoSubgroup if x_f16 => kernel_source!(
                enable: "enable f16;\n";
                "quant.wgsl",
                "quant_int8.wgsl",
                "quant_macko.wgsl",
                "macko_x_f16.wgsl",
                "quant_macko_sg.wgsl"
            ),
            Kernel::QuantMackoSubgroup => quant_source!(
                int4;
                "quant_macko.wgsl",
                "macko_x_words.wgsl",
                "quant_macko_sg.wgsl"
            ),
            Kernel::QuantMackoWorkgroup => {
                quant_source!(int4; "quant_macko.wgsl", "quant_macko_wg.wgsl")
            }
            // 16-byte words of codes: the word file instead of the width file.
            Kernel::QuantDenseSubgroup if int4 => kernel_source!(
                "quant.wgsl",
                "quant_word_int4.wgsl",
                "quant_dense.wgsl",
                "quant_dense_sg.wgsl"
            ),
            Kernel::QuantDenseSubgroup => kernel_source!(
                "quant.wgsl",
                "quant_word_int8.wgsl",
                "quant_dense.wgsl",
                "quant_dense_sg.wgsl"
            ),
            Kernel::QuantDenseWorkgroup => {
                quant_source!(int4; "quant_dense.wgsl", "quant_dense_wg.wgsl")
            }
            Kernel::QuantMackoBatch => quant_source!(
                int4;
                "quant_macko.wgsl",
                "batch.wgsl",
                "quant_batch.wgsl",
                "quant_macko_batch_wg.wgsl"
            ),
            Kernel::QuantDenseBatch => quant_source!(
                int4;
                "quant_dense.wgsl",
                "batch.wgsl",
                "quant_batch.wgsl",
                "quant_dense_batch_wg.wgsl"
            ),
            Kernel::CsrTransposed | Kernel::CsrTransposedDense => {
                kernel_source!("csr.wgsl", "transposed.wgsl", "csr_transposed_wg.wgsl")
            }
            Kernel::TransposedCombine => {
                kernel_source!("transposed.wgsl", "transposed_combine_wg.wgsl")
            }
            // The MACKO prelude for its bindings and group decoding; x_words because
            // macko.wgsl calls x_at (the kernel never does).
            Kernel::MackoTransposed | Kernel::MackoTransposedDense => kernel_source!(
                "macko.wgsl",
                "macko_x_words.wgsl",
                "transposed.wgsl",
                "macko_transposed_wg.wgsl"
            ),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kernel::MackoSubgroup => "macko_sg",
            Kernel::MackoWorkgroup => "macko_wg",
            Kernel::CsrSubgroup => "csr_sg",
            Kernel::CsrWorkgroup => "csr_wg",
            Kernel::Sparse24Subgroup => "sparse24_sg",
            Kernel::Sparse24Workgroup => "sparse24_wg",
            Kernel::DenseSubgroup => "dense_sg",
            Kernel::DenseWorkgroup => "dense_wg",
            Kernel::Stream => "stream",
            Kernel::MackoBatchSubgroup => "macko_batch_sg",
            Kernel::MackoBatchWorkgroup => "macko_batch_wg",
            Kernel::CsrBatchSubgroup => "csr_batch_sg",
            Kernel::CsrBatchWorkgroup => "csr_batch_wg",
            Kernel::Sparse24BatchSubgroup => "sparse24_batch_sg",
            Kernel::Sparse24BatchWorkgroup => "sparse24_batch_wg",
            Kernel::DenseBatch => "dense_batch_wg",
            Kernel::BatchTranspose => "batch_xt",
            Kernel::QuantMackoSubgroup => "quant_macko_sg",
            Kernel::QuantMackoWorkgroup => "quant_macko_wg",
            Kernel::QuantDenseSubgroup => "quant_dense_sg",
            Kernel::QuantDenseWorkgroup => "quant_dense_wg",
            Kernel::QuantMackoBatch => "quant_macko_batch_wg",
            Kernel::QuantDenseBatch => "quant_dense_batch_wg",
            Kernel::CsrTransposed => "csr_transposed_wg",
            Kernel::CsrTransposedDense => "csr_transposed_wg (dense x)",
            Kernel::MackoTransposed => "macko_transposed_wg",
            Kernel::MackoTransposedDense => "macko_transposed_wg (dense x)",
            Kernel::TransposedCombine => "transposed_combine_wg",
        }
    }

    /// Invocations per workgroup (WORKGROUP in the shader).
    pub fn workgroup_size(self) -> u32 {
        match self {
            Kernel::MackoSubgroup | Kernel::CsrSubgroup => 128,
            Kernel::MackoBatchSubgroup | Kernel::CsrBatchSubgroup => 128,
            Kernel::MackoWorkgroup | Kernel::CsrWorkgroup => 64,
            Kernel::MackoBatchWorkgroup | Kernel::CsrBatchWorkgroup => 64,
            Kernel::Sparse24Subgroup | Kernel::Sparse24BatchSubgroup => 128,
            Kernel::Sparse24Workgroup | Kernel::Sparse24BatchWorkgroup => 64,
            Kernel::DenseBatch | Kernel::BatchTranspose => 64,
            Kernel::DenseSubgroup | Kernel::DenseWorkgroup | Kernel::Stream => 256,
            Kernel::QuantMackoSubgroup => 128,
            Kernel::QuantMackoWorkgroup | Kernel::QuantMackoBatch | Kernel::QuantDenseBatch => 64,
            Kernel::QuantDenseSubgroup | Kernel::QuantDenseWorkgroup => 256,
            Kernel::CsrTransposed | Kernel::CsrTransposedDense => 64,
            Kernel::MackoTransposed | Kernel::MackoTransposedDense => 64,
            Kernel::TransposedCombine => 64,
        }
    }

    pub(super) fn layout(self) -> MatrixLayout {
        match self {
            Kernel::MackoSubgroup
            | Kernel::MackoWorkgroup
            | Kernel::CsrSubgroup
            | Kernel::CsrWorkgroup => MatrixLayout::Sparse,
            Kernel::DenseSubgroup | Kernel::DenseWorkgroup => MatrixLayout::Dense,
            Kernel::Sparse24Subgroup | Kernel::Sparse24Workgroup => MatrixLayout::Sparse24,
            Kernel::Sparse24BatchSubgroup | Kernel::Sparse24BatchWorkgroup => {
                MatrixLayout::Sparse24Batch
            }
            Kernel::Stream => MatrixLayout::Stream,
            Kernel::MackoBatchSubgroup
            | Kernel::MackoBatchWorkgroup
            | Kernel::CsrBatchSubgroup
            | Kernel::CsrBatchWorkgroup => MatrixLayout::SparseBatch,
            Kernel::DenseBatch => MatrixLayout::DenseBatch,
            Kernel::BatchTranspose => MatrixLayout::Transpose,
            Kernel::QuantMackoSubgroup | Kernel::QuantMackoWorkgroup => MatrixLayout::QuantSparse,
            Kernel::QuantDenseSubgroup | Kernel::QuantDenseWorkgroup => MatrixLayout::QuantDense,
            Kernel::QuantMackoBatch => MatrixLayout::QuantSparseBatch,
            Kernel::QuantDenseBatch => MatrixLayout::QuantDenseBatch,
            Kernel::CsrTransposed | Kernel::MackoTransposed => MatrixLayout::SparseTransposed,
            Kernel::CsrTransposedDense | Kernel::MackoTransposedDense => {
                MatrixLayout::DenseXTransposed
            }
            Kernel::TransposedCombine => MatrixLayout::TransposedCombine,
        }
    }

    /// Whether the kernel relies on workgroup memory starting at zero (the streaming read's
    /// atomic sum). The others write every word before reading it, and the staged x of the
    /// MACKO subgroup kernels (up to 48 KiB) would otherwise be zeroed by every workgroup for
    /// nothing; the small scan and sum arrays keep wgpu's zeroing.
    pub(super) fn needs_zeroed_workgroup_memory(self) -> bool {
        !matches!(self, Kernel::MackoSubgroup | Kernel::QuantMackoSubgroup)
    }

    /// Whether x may be staged in workgroup memory for the kernel (plan.rs): the MACKO
    /// subgroup kernels, binary16 and quantized.
    pub fn stages_x(self) -> bool {
        matches!(self, Kernel::MackoSubgroup | Kernel::QuantMackoSubgroup)
    }

    /// Whether the kernel writes y (and so has the `Y_F16` constant).
    pub fn writes_y(self) -> bool {
        !matches!(self, Kernel::Stream | Kernel::BatchTranspose)
    }
}

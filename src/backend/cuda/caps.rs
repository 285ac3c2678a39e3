//! What the planner knows of a GPU and of the kernels compiled for it, as plain data: the
//! multiprocessors' limits and each kernel's registers, filled once at open (`kernels.rs` reads
//! the loaded functions, `probe.rs` the device), so that plans are computed, and unit tested,
//! without a GPU. The occupancy of a kernel (blocks resident per SM) follows from them the way
//! the driver's `cuOccupancyMaxActiveBlocksPerMultiprocessor` computes it.

/// Threads per block of every kernel (the `__launch_bounds__` of kernels/*.cu).
pub const BLOCK: u32 = 512;
/// Threads per block of the MACKO kernel's `_big` entries (`MACKO_BIG_BLOCK` of kernels/macko.cu).
pub const BIG_BLOCK: u32 = 1024;
/// `MACKO_X_SLACK + MACKO_X_TAIL` of kernels/common.cuh: staged slots around x.
const X_EXTRA_SLOTS: u64 = 8 + 16;

/// Dynamic shared memory that staging `cols` columns of x takes (see `macko_stage_x`: f32
/// slots for the columns and the slack, one padding word after every 32).
pub fn x_smem_bytes(cols: u32) -> u64 {
    let last = u64::from(cols) + X_EXTRA_SLOTS - 1;
    4 * (last + (last >> 5) + 1)
}

/// Dynamic shared memory that staging `cols` columns of x as binary16 takes (see
/// `macko_stage_x_half`: the columns and the slack, rounded up to 16 bytes).
pub fn x_smem_half_bytes(cols: u32) -> u64 {
    (2 * (u64::from(cols) + X_EXTRA_SLOTS)).div_ceil(16) * 16
}

/// A kernel of kernels/*.cu, both output precisions together (they differ only in the store,
/// and are compiled under the same register cap). The plan names the one it launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// `macko_spmv_xs_*`: MACKO rows, x staged padded, 512-thread blocks.
    RowPadded,
    /// `macko_spmv_xg_*`: MACKO rows, x read from global memory.
    RowGlobal,
    /// `macko_spmv_xu_*`: MACKO rows, x staged plain (f32).
    RowPlain,
    /// `macko_spmv_xh_*`: MACKO rows, x staged as binary16.
    RowHalf,
    /// `macko_spmv_xs_*_big`: x staged padded, 1024-thread blocks.
    BigPadded,
    /// `macko_spmv_xu_*_big`: x staged plain, 1024-thread blocks.
    BigPlain,
    /// `macko_flat_xs_*`: the flat kernel (one range of entries per warp), x padded.
    FlatPadded,
    /// `macko_flat_xu_*`: the flat kernel, x plain.
    FlatPlain,
    /// `macko_flat_xh_*`: the flat kernel, x as binary16.
    FlatHalf,
    /// `macko_lean_*`: whole rows on warps, x plain, 40 registers.
    Lean,
    /// `macko_lean_xh_*`: the lean kernel, x as binary16.
    LeanHalf,
    /// `macko_combine_*`: a split matrix's partial sums into y.
    Combine,
    /// `macko_combine_rows_*`: the rows the flat kernel's ranges cut, into y.
    CombineRows,
    /// `csr_spmv_xs_*`: CSR, x staged.
    CsrStaged,
    /// `csr_spmv_xg_*`: CSR, x from global memory.
    CsrGlobal,
    /// `dense_gemv_a16_*`: dense rows starting on 16-byte boundaries.
    DenseAligned,
    /// `dense_gemv_any_*`: dense rows of any length.
    DenseAny,
    /// `stream_read`: the streaming-read ceiling.
    StreamRead,
    /// A few-token product kernel of kernels/batch.cu (one format, x place and chunk width).
    Batch(BatchKernel),
    /// `batch_transpose`: a chunk of X into W lanes per column (kernels/batch.cu).
    BatchTranspose,
}

/// Chunk widths of the few-token kernels: W f32 sums per lane, the chunk's vector count rounded
/// up to a power of two (lanes past the count compute on zero x and are never stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Width {
    W2,
    W4,
    W8,
    W16,
}

impl Width {
    /// Every width, narrowest first (the order of [`Width::index`]).
    pub const ALL: [Width; 4] = [Width::W2, Width::W4, Width::W8, Width::W16];

    /// Vectors per pass.
    pub fn lanes(self) -> u32 {
        match self {
            Width::W2 => 2,
            Width::W4 => 4,
            Width::W8 => 8,
            Width::W16 => 16,
        }
    }

    /// Position in [`Width::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The width of a chunk of `count` vectors (2 to 16; `None` above 16).
    pub fn for_count(count: usize) -> Option<Width> {
        Width::ALL.into_iter().find(|w| count <= w.lanes() as usize)
    }
}

/// Format and x place of a few-token kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BatchFormat {
    /// `macko_batch_xs_*`: MACKO rows, XT staged in shared memory.
    MackoShared,
    /// `macko_batch_xg_*`: MACKO rows, XT read from global memory.
    MackoGlobal,
    /// `csr_batch_xs_*`: CSR rows, XT staged.
    CsrShared,
    /// `csr_batch_xg_*`: CSR rows, XT from global memory.
    CsrGlobal,
    /// `dense_batch_a16_*`: dense rows starting on 16-byte boundaries.
    DenseAligned,
    /// `dense_batch_any_*`: dense rows of any length.
    DenseAny,
    /// `dense_batch_mma_*`: dense rows on tensor cores (cols % 8 == 0, sm_80+; X read as it
    /// is, no XT).
    DenseMma,
    /// `macko_batch_mma_*`: MACKO rows decoded into tiles in shared memory and multiplied on
    /// tensor cores (cols % 8 == 0, sm_80+; X read as it is, no XT).
    MackoMma,
}

impl BatchFormat {
    /// Every format, in the order of [`BatchFormat::index`].
    pub const ALL: [BatchFormat; 8] = [
        BatchFormat::MackoShared,
        BatchFormat::MackoGlobal,
        BatchFormat::CsrShared,
        BatchFormat::CsrGlobal,
        BatchFormat::DenseAligned,
        BatchFormat::DenseAny,
        BatchFormat::DenseMma,
        BatchFormat::MackoMma,
    ];

    /// Position in [`BatchFormat::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether the kernel takes dynamic shared memory (XT staged, or the tensor-core MACKO
    /// kernel's tiles), and so may opt in to more than 48 KiB of it.
    pub fn stages_x(self) -> bool {
        matches!(
            self,
            BatchFormat::MackoShared | BatchFormat::CsrShared | BatchFormat::MackoMma
        )
    }

    /// Whether the kernel runs on tensor cores (kernels/batch_mma.cu): it reads X as it is,
    /// so the chunk needs no transpose into XT.
    pub fn tensor_cores(self) -> bool {
        matches!(self, BatchFormat::DenseMma | BatchFormat::MackoMma)
    }
}

/// A few-token product kernel: a format (with its x place) at one chunk width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchKernel {
    pub format: BatchFormat,
    pub width: Width,
}

impl BatchKernel {
    /// Number of few-token product kernels.
    pub const COUNT: usize = 32;

    /// Position among the few-token kernels: format-major, widths narrowest first.
    pub fn index(self) -> usize {
        self.format.index() * Width::ALL.len() + self.width.index()
    }
}

/// Entry names (f16, f32) of the few-token kernels, in the order of [`BatchKernel::index`].
const BATCH_ENTRIES: [(&str, &str); BatchKernel::COUNT] = [
    ("macko_batch_xs_w2_f16", "macko_batch_xs_w2_f32"),
    ("macko_batch_xs_w4_f16", "macko_batch_xs_w4_f32"),
    ("macko_batch_xs_w8_f16", "macko_batch_xs_w8_f32"),
    ("macko_batch_xs_w16_f16", "macko_batch_xs_w16_f32"),
    ("macko_batch_xg_w2_f16", "macko_batch_xg_w2_f32"),
    ("macko_batch_xg_w4_f16", "macko_batch_xg_w4_f32"),
    ("macko_batch_xg_w8_f16", "macko_batch_xg_w8_f32"),
    ("macko_batch_xg_w16_f16", "macko_batch_xg_w16_f32"),
    ("csr_batch_xs_w2_f16", "csr_batch_xs_w2_f32"),
    ("csr_batch_xs_w4_f16", "csr_batch_xs_w4_f32"),
    ("csr_batch_xs_w8_f16", "csr_batch_xs_w8_f32"),
    ("csr_batch_xs_w16_f16", "csr_batch_xs_w16_f32"),
    ("csr_batch_xg_w2_f16", "csr_batch_xg_w2_f32"),
    ("csr_batch_xg_w4_f16", "csr_batch_xg_w4_f32"),
    ("csr_batch_xg_w8_f16", "csr_batch_xg_w8_f32"),
    ("csr_batch_xg_w16_f16", "csr_batch_xg_w16_f32"),
    ("dense_batch_a16_w2_f16", "dense_batch_a16_w2_f32"),
    ("dense_batch_a16_w4_f16", "dense_batch_a16_w4_f32"),
    ("dense_batch_a16_w8_f16", "dense_batch_a16_w8_f32"),
    ("dense_batch_a16_w16_f16", "dense_batch_a16_w16_f32"),
    ("dense_batch_any_w2_f16", "dense_batch_any_w2_f32"),
    ("dense_batch_any_w4_f16", "dense_batch_any_w4_f32"),
    ("dense_batch_any_w8_f16", "dense_batch_any_w8_f32"),
    ("dense_batch_any_w16_f16", "dense_batch_any_w16_f32"),
    ("dense_batch_mma_w2_f16", "dense_batch_mma_w2_f32"),
    ("dense_batch_mma_w4_f16", "dense_batch_mma_w4_f32"),
    ("dense_batch_mma_w8_f16", "dense_batch_mma_w8_f32"),
    ("dense_batch_mma_w16_f16", "dense_batch_mma_w16_f32"),
    ("macko_batch_mma_w2_f16", "macko_batch_mma_w2_f32"),
    ("macko_batch_mma_w4_f16", "macko_batch_mma_w4_f32"),
    ("macko_batch_mma_w8_f16", "macko_batch_mma_w8_f32"),
    ("macko_batch_mma_w16_f16", "macko_batch_mma_w16_f32"),
];

/// The single-vector kernels, in the order of [`Kernel::index`].
const SINGLE: [Kernel; 18] = [
    Kernel::RowPadded,
    Kernel::RowGlobal,
    Kernel::RowPlain,
    Kernel::RowHalf,
    Kernel::BigPadded,
    Kernel::BigPlain,
    Kernel::FlatPadded,
    Kernel::FlatPlain,
    Kernel::FlatHalf,
    Kernel::Lean,
    Kernel::LeanHalf,
    Kernel::Combine,
    Kernel::CombineRows,
    Kernel::CsrStaged,
    Kernel::CsrGlobal,
    Kernel::DenseAligned,
    Kernel::DenseAny,
    Kernel::StreamRead,
];

/// Every kernel: the single-vector ones, the few-token ones, the transpose.
const fn all_kernels() -> [Kernel; Kernel::COUNT] {
    let mut all = [Kernel::BatchTranspose; Kernel::COUNT];
    let mut i = 0;
    while i < SINGLE.len() {
        all[i] = SINGLE[i];
        i += 1;
    }
    let mut f = 0;
    while f < BatchFormat::ALL.len() {
        let mut w = 0;
        while w < Width::ALL.len() {
            all[SINGLE.len() + f * Width::ALL.len() + w] = Kernel::Batch(BatchKernel {
                format: BatchFormat::ALL[f],
                width: Width::ALL[w],
            });
            w += 1;
        }
        f += 1;
    }
    all
}

impl Kernel {
    /// Number of kernels.
    pub const COUNT: usize = SINGLE.len() + BatchKernel::COUNT + 1;

    /// Every kernel, in the order of [`Kernel::index`].
    pub const ALL: [Kernel; Self::COUNT] = all_kernels();

    /// Position in [`Kernel::ALL`] (and in [`CudaCaps::kernels`]).
    pub fn index(self) -> usize {
        match self {
            Kernel::RowPadded => 0,
            Kernel::RowGlobal => 1,
            Kernel::RowPlain => 2,
            Kernel::RowHalf => 3,
            Kernel::BigPadded => 4,
            Kernel::BigPlain => 5,
            Kernel::FlatPadded => 6,
            Kernel::FlatPlain => 7,
            Kernel::FlatHalf => 8,
            Kernel::Lean => 9,
            Kernel::LeanHalf => 10,
            Kernel::Combine => 11,
            Kernel::CombineRows => 12,
            Kernel::CsrStaged => 13,
            Kernel::CsrGlobal => 14,
            Kernel::DenseAligned => 15,
            Kernel::DenseAny => 16,
            Kernel::StreamRead => 17,
            Kernel::Batch(b) => SINGLE.len() + b.index(),
            Kernel::BatchTranspose => Self::COUNT - 1,
        }
    }

    /// The entry names of the f16 and f32 outputs (the same name twice where the kernel has one
    /// output type).
    pub fn entries(self) -> (&'static str, &'static str) {
        match self {
            Kernel::RowPadded => ("macko_spmv_xs_f16", "macko_spmv_xs_f32"),
            Kernel::RowGlobal => ("macko_spmv_xg_f16", "macko_spmv_xg_f32"),
            Kernel::RowPlain => ("macko_spmv_xu_f16", "macko_spmv_xu_f32"),
            Kernel::RowHalf => ("macko_spmv_xh_f16", "macko_spmv_xh_f32"),
            Kernel::BigPadded => ("macko_spmv_xs_f16_big", "macko_spmv_xs_f32_big"),
            Kernel::BigPlain => ("macko_spmv_xu_f16_big", "macko_spmv_xu_f32_big"),
            Kernel::FlatPadded => ("macko_flat_xs_f16", "macko_flat_xs_f32"),
            Kernel::FlatPlain => ("macko_flat_xu_f16", "macko_flat_xu_f32"),
            Kernel::FlatHalf => ("macko_flat_xh_f16", "macko_flat_xh_f32"),
            Kernel::Lean => ("macko_lean_f16", "macko_lean_f32"),
            Kernel::LeanHalf => ("macko_lean_xh_f16", "macko_lean_xh_f32"),
            Kernel::Combine => ("macko_combine_f16", "macko_combine_f32"),
            Kernel::CombineRows => ("macko_combine_rows_f16", "macko_combine_rows_f32"),
            Kernel::CsrStaged => ("csr_spmv_xs_f16", "csr_spmv_xs_f32"),
            Kernel::CsrGlobal => ("csr_spmv_xg_f16", "csr_spmv_xg_f32"),
            Kernel::DenseAligned => ("dense_gemv_a16_f16", "dense_gemv_a16_f32"),
            Kernel::DenseAny => ("dense_gemv_any_f16", "dense_gemv_any_f32"),
            Kernel::StreamRead => ("stream_read", "stream_read"),
            Kernel::Batch(b) => BATCH_ENTRIES[b.index()],
            Kernel::BatchTranspose => ("batch_transpose", "batch_transpose"),
        }
    }

    /// Whether the kernel stages x in dynamic shared memory (and so may opt in to more than
    /// 48 KiB of it).
    pub fn stages_x(self) -> bool {
        if let Kernel::Batch(b) = self {
            return b.format.stages_x();
        }
        matches!(
            self,
            Kernel::RowPadded
                | Kernel::RowPlain
                | Kernel::RowHalf
                | Kernel::BigPadded
                | Kernel::BigPlain
                | Kernel::FlatPadded
                | Kernel::FlatPlain
                | Kernel::FlatHalf
                | Kernel::Lean
                | Kernel::LeanHalf
                | Kernel::CsrStaged
        )
    }
}

/// What a compiled kernel takes of an SM (the f32 entry's; the f16 one is compiled under the
/// same bounds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KernelUse {
    /// Registers per thread (`CU_FUNC_ATTRIBUTE_NUM_REGS`).
    pub registers: u32,
    /// Static shared memory per block, in bytes.
    pub static_smem: u32,
}

/// A GPU's limits that the plans depend on, and the kernels' use of them.
#[derive(Debug, Clone, PartialEq)]
pub struct CudaCaps {
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Threads resident per SM at most (2048 on sm_80 and sm_90).
    pub max_threads_per_sm: u32,
    /// Blocks resident per SM at most (32 on sm_80 and sm_90).
    pub max_blocks_per_sm: u32,
    /// 32-bit registers per SM (65 536).
    pub regs_per_sm: u32,
    /// 32-bit registers one block may use (65 536).
    pub regs_per_block: u32,
    /// Shared memory per SM, in bytes (228 KiB on sm_90, 164 KiB on sm_80).
    pub smem_per_sm: u32,
    /// Shared memory the system reserves per resident block (1 KiB since sm_80).
    pub smem_reserved_per_block: u32,
    /// Dynamic shared memory a kernel that stages x may use per block: the opt-in limit less
    /// its static shared memory, or 48 KiB where the driver refused the opt-in.
    pub smem_limit: u32,
    /// L2 cache, in bytes.
    pub l2_bytes: u64,
    /// DRAM bytes per SM cycle (peak DRAM bandwidth over SMs × SM clock; `None` where the
    /// clocks are not reported): the measure that separates an H100 (12.8) from an H200
    /// (18.4) in the rules that depend on the GPU.
    pub dram_bytes_per_sm_cycle: Option<f64>,
    /// Whether the GPU has the tensor-core instructions of kernels/batch_mma.cu
    /// (`mma.sync.m16n8k16` with f16 inputs: compute capability 8.0 and up).
    pub tensor_cores: bool,
    /// Each kernel's use of an SM, indexed by [`Kernel::index`].
    pub kernels: [KernelUse; Kernel::COUNT],
}

/// Registers are given to warps in units of this many.
const REG_ALLOC_UNIT: u32 = 256;
/// Each SM is four sub-partitions with a quarter of the register file each; a warp lives in one.
const SUB_PARTITIONS: u32 = 4;
/// Shared memory is given to blocks in units of this many bytes.
const SMEM_ALLOC_UNIT: u32 = 128;

impl CudaCaps {
    /// What `kernel` takes of an SM.
    pub fn kernel(&self, kernel: Kernel) -> KernelUse {
        self.kernels[kernel.index()]
    }

    /// Blocks of `block` threads with `smem` bytes of dynamic shared memory each that `kernel`
    /// keeps resident on one SM (0: it cannot run so), the least of the limits by threads,
    /// blocks, registers and shared memory, as the driver's occupancy calculator counts them.
    pub fn blocks_per_sm(&self, kernel: Kernel, block: u32, smem: u32) -> u32 {
        let k = self.kernel(kernel);
        if block == 0 {
            return 0;
        }
        let warps_per_block = block.div_ceil(32);
        let by_threads = self.max_threads_per_sm / 32 / warps_per_block;
        let by_regs = if k.registers == 0 {
            u32::MAX
        } else if u64::from(k.registers) * u64::from(block) > u64::from(self.regs_per_block) {
            0
        } else {
            let per_warp = (k.registers * 32).div_ceil(REG_ALLOC_UNIT) * REG_ALLOC_UNIT;
            let warps_per_partition = self.regs_per_sm / SUB_PARTITIONS / per_warp;
            warps_per_partition * SUB_PARTITIONS / warps_per_block
        };
        let used = u64::from(smem) + u64::from(k.static_smem);
        let by_smem = if smem > 0 && smem > self.smem_limit {
            0
        } else {
            let per_block = (used + u64::from(self.smem_reserved_per_block))
                .div_ceil(u64::from(SMEM_ALLOC_UNIT))
                * u64::from(SMEM_ALLOC_UNIT);
            u32::try_from(u64::from(self.smem_per_sm) / per_block.max(1)).unwrap_or(u32::MAX)
        };
        by_threads
            .min(self.max_blocks_per_sm)
            .min(by_regs)
            .min(by_smem)
    }

    /// Blocks of `kernel` resident at once on the whole GPU (`None`: it cannot run with that
    /// block and shared memory).
    pub fn resident_blocks(&self, kernel: Kernel, block: u32, smem: u32) -> Option<u32> {
        let per_sm = self.blocks_per_sm(kernel, block, smem);
        (per_sm > 0).then(|| per_sm.saturating_mul(self.sm_count))
    }

    /// Persistent grid for `kernel` in blocks of `block` threads with `smem` bytes each:
    /// resident blocks, at most one warp per row (work item), at least one block. `None`: the
    /// kernel cannot run with that much shared memory.
    pub fn grid(&self, kernel: Kernel, block: u32, smem: u32, rows: u32) -> Option<u32> {
        let resident = self.resident_blocks(kernel, block, smem)?;
        Some(resident.min(rows.div_ceil(block / 32)).max(1))
    }
}

/// Capability tables of the GPUs the plans were measured on, for the planner's tests (and for
/// the cross-backend suite, which plans without a GPU). Registers as NVRTC 13 compiles
/// kernels/*.cu for sm_90 (`--ptxas-options=-v`).
#[doc(hidden)]
pub mod tables {
    use crate::backend::cuda::caps::{
        BatchFormat, BatchKernel, CudaCaps, Kernel, KernelUse, Width,
    };

    /// Registers per thread of each kernel for sm_90, in the order of [`Kernel::ALL`]: the
    /// single-vector kernels, then the few-token ones (format-major: MACKO staged, MACKO global,
    /// CSR staged, CSR global, dense aligned, dense any, dense and MACKO on tensor cores; widths
    /// 2, 4, 8, 16), the transpose.
    const SM90_REGISTERS: [u32; Kernel::COUNT] = [
        64, 64, 64, 64, 64, 64, 64, 64, 64, 40, 40, 32, 32, 39, 32, 62, 64, 32, // single
        43, 53, 63, 72, 47, 54, 64, 120, // MACKO
        32, 32, 44, 55, 32, 32, 45, 70, // CSR
        48, 62, 64, 128, 32, 38, 51, 78, // dense
        64, 64, 64, 96, // dense on tensor cores
        94, 94, 94, 116, // MACKO on tensor cores
        20,  // transpose
    ];

    /// Static shared memory of the tensor-core kernels (the warps' partial sums of a band).
    const MMA_STATIC_SMEM: [(BatchFormat, Width, u32); 4] = [
        (BatchFormat::DenseMma, Width::W2, 8 << 10),
        (BatchFormat::DenseMma, Width::W4, 8 << 10),
        (BatchFormat::DenseMma, Width::W8, 8 << 10),
        (BatchFormat::DenseMma, Width::W16, 16 << 10),
    ];

    /// The kernels' use of an SM for sm_90.
    pub fn sm90_kernels() -> [KernelUse; Kernel::COUNT] {
        let mut k = [KernelUse::default(); Kernel::COUNT];
        for (use_, regs) in k.iter_mut().zip(SM90_REGISTERS) {
            use_.registers = regs;
        }
        k[Kernel::StreamRead.index()].static_smem = 64;
        for (format, width, bytes) in MMA_STATIC_SMEM {
            k[Kernel::Batch(BatchKernel { format, width }).index()].static_smem = bytes;
        }
        k
    }

    /// An H100 SXM: 132 SMs, 228 KiB of shared memory per SM (227 KiB per block), 50 MiB of
    /// L2, 12.8 DRAM bytes per SM cycle (3.35 TB/s at 1.98 GHz).
    pub fn h100() -> CudaCaps {
        CudaCaps {
            sm_count: 132,
            max_threads_per_sm: 2048,
            max_blocks_per_sm: 32,
            regs_per_sm: 65536,
            regs_per_block: 65536,
            smem_per_sm: 228 << 10,
            smem_reserved_per_block: 1024,
            smem_limit: 227 << 10,
            l2_bytes: 50 << 20,
            dram_bytes_per_sm_cycle: Some(12.8),
            tensor_cores: true,
            kernels: sm90_kernels(),
        }
    }

    /// An H200: the H100's SMs with 4.8 TB/s of HBM3e, 18.8 DRAM bytes per SM cycle.
    pub fn h200() -> CudaCaps {
        CudaCaps {
            dram_bytes_per_sm_cycle: Some(18.8),
            ..h100()
        }
    }

    /// A small GPU: 46 SMs of an Ampere part (sm_86: 1536 threads, 16 blocks and 100 KiB of
    /// shared memory per SM, 99 KiB per block), clocks unknown.
    pub fn small() -> CudaCaps {
        CudaCaps {
            sm_count: 46,
            max_threads_per_sm: 1536,
            max_blocks_per_sm: 16,
            regs_per_sm: 65536,
            regs_per_block: 65536,
            smem_per_sm: 100 << 10,
            smem_reserved_per_block: 1024,
            smem_limit: 99 << 10,
            l2_bytes: 4 << 20,
            dram_bytes_per_sm_cycle: None,
            tensor_cores: true,
            kernels: sm90_kernels(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tables::h100;
    use super::*;

    #[test]
    fn kernels_are_listed_in_index_order() {
        for (i, k) in Kernel::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
        }
    }

    #[test]
    fn occupancy_on_an_h100_is_what_the_notes_measured() {
        let caps = h100();
        // 64 registers: 32 warps per SM, two 512-thread blocks, one 1024-thread block.
        assert_eq!(caps.blocks_per_sm(Kernel::RowPlain, BLOCK, 0), 2);
        assert_eq!(caps.blocks_per_sm(Kernel::BigPlain, BIG_BLOCK, 0), 1);
        // The lean kernel's 40 registers: 48 warps per SM.
        assert_eq!(caps.blocks_per_sm(Kernel::Lean, BLOCK, 0), 3);
        // Three lean blocks' binary16 copies of x fit up to 36 864 columns.
        let half = u32::try_from(x_smem_half_bytes(36864)).expect("fits");
        assert_eq!(caps.blocks_per_sm(Kernel::LeanHalf, BLOCK, half), 3);
        // f32 x of 28 672 columns leaves one 512-thread block per SM.
        let f32x = u32::try_from(x_smem_bytes(28672)).expect("fits");
        assert_eq!(caps.blocks_per_sm(Kernel::RowPlain, BLOCK, f32x), 1);
        // More than a block may opt in to: none.
        assert_eq!(caps.blocks_per_sm(Kernel::RowPlain, BLOCK, 228 << 10), 0);
        assert_eq!(caps.grid(Kernel::RowPlain, BLOCK, 228 << 10, 100), None);
        // 4224 warps on 132 SMs; the grid stops at one warp per row.
        assert_eq!(caps.grid(Kernel::RowPlain, BLOCK, 0, u32::MAX), Some(264));
        assert_eq!(caps.grid(Kernel::RowPlain, BLOCK, 0, 3584), Some(224));
        assert_eq!(caps.grid(Kernel::RowPlain, BLOCK, 0, 0), Some(1));
    }

    #[test]
    fn x_staging_size_covers_the_last_padded_slot() {
        // cols + 24 slots, the last at index cols + 23, padded by one word per 32.
        for cols in [0u32, 1, 7, 8, 31, 4096, 12288, 28672] {
            let last = u64::from(cols) + 23;
            let floats = last + last / 32 + 1;
            assert_eq!(x_smem_bytes(cols), 4 * floats);
        }
        assert!(x_smem_bytes(12288) < 64 << 10);
    }

    #[test]
    fn x_staged_as_binary16_covers_the_slack_in_whole_16_byte_words() {
        // cols + 24 halves (slots 0 .. cols + 23), rounded up to 16 bytes: the kernel stores
        // x's 16-byte words from slot 8 on, so cols rounded up to 8 must fit as well.
        for cols in [0u32, 1, 7, 8, 9, 31, 4096, 28672, 36864, 49152] {
            let bytes = x_smem_half_bytes(cols);
            assert_eq!(bytes % 16, 0);
            assert!(bytes >= 2 * (u64::from(cols) + 24));
            assert!(bytes >= 2 * (8 + u64::from(cols.div_ceil(8)) * 8));
            assert!(bytes < 2 * (u64::from(cols) + 24) + 16);
        }
        // Three lean blocks' copies of x fit an H100's 228 KiB up to 36 864 columns.
        assert!(3 * (x_smem_half_bytes(36864) + 1024) <= 228 << 10);
    }
}

//! The few-token planner: how a chunk of 2 to 16 vectors is multiplied (kernels/batch.cu), as
//! data. [`batch_plans`] is a pure function of the format, the shape, the GPU's capabilities
//! ([`CudaCaps`]) and the tuning; `plan.rs` calls it once per matrix at upload for every chunk
//! width and stores the four plans in the matrix's [`CudaPlan`](super::plan::CudaPlan), so a
//! product only binds and dispatches.
//!
//! Each chunk runs two launches: `batch_transpose` writes XT (W binary16 lanes per column slot)
//! into the backend's scratch buffer, then the product kernel reads it, staged in shared memory
//! (MACKO and CSR, where XT fits without costing resident blocks) or from global memory.

use super::caps::{BatchFormat, BatchKernel, CudaCaps, Kernel, Width, BLOCK};
use super::cursors::{split_width, SPLITS};
use super::errors::internal;
use super::tuning::{CudaTuning, XPlace};
use crate::error::Result;

/// `MACKO_X_SLACK + MACKO_X_TAIL` of kernels/common.cuh: XT slots around the columns.
const XT_EXTRA_SLOTS: u64 = 8 + 16;

/// Which few-token kernels a matrix runs.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchMatrix {
    /// MACKO rows, `entries` stored (what the tensor-core kernel's team size depends on).
    Macko {
        entries: u64,
    },
    Csr,
    Dense,
}

/// How one chunk width of a matrix is launched.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchPlan {
    /// The product kernel (a [`Kernel::Batch`]).
    pub kernel: Kernel,
    /// Blocks of the product kernel (persistent: resident blocks, at most one warp per row).
    pub grid: u32,
    /// Threads per block of both launches.
    pub block: u32,
    /// Dynamic shared memory of the product kernel: XT staged, 0 when read from global memory.
    pub smem_bytes: u32,
    /// Column slots of XT: the columns and the slack around them, a multiple of 8 (so that XT is
    /// whole 16-byte words at every width).
    pub slots: u32,
    /// Blocks of the transpose (one thread per 32-bit word of XT, grid-stride); 0 on tensor
    /// cores (no transpose).
    pub transpose_grid: u32,
    /// MACKO on tensor cores: columns of each warp's split (`cursors::split_width`), else 0.
    pub split_width: u32,
    /// MACKO on tensor cores: columns per window (the tiles' K), else 0.
    pub window: u32,
    /// MACKO on tensor cores: lanes decoding one row (4, 8, 16 or 32), else 0.
    pub lanes: u32,
}

impl BatchPlan {
    /// The chunk width.
    pub fn width(&self) -> Option<Width> {
        match self.kernel {
            Kernel::Batch(b) => Some(b.width),
            _ => None,
        }
    }

    /// Whether XT is staged in shared memory (a tensor-core plan's shared memory holds tiles of
    /// the matrix, not XT).
    pub fn x_in_smem(&self) -> bool {
        self.smem_bytes > 0 && !self.tensor_cores()
    }

    /// 16-bit elements of XT (the scratch buffer the transpose writes).
    pub fn xt_len(&self) -> usize {
        if self.tensor_cores() {
            return 0;
        }
        let lanes = self.width().map_or(0, Width::lanes);
        self.slots as usize * lanes as usize
    }

    /// Whether the product runs on tensor cores (kernels/batch_mma.cu): X is read as it is, no
    /// transpose is queued and XT is not used.
    pub fn tensor_cores(&self) -> bool {
        matches!(self.kernel, Kernel::Batch(b) if b.format.tensor_cores())
    }
}

/// The plans of every chunk width, indexed by [`Width::index`].
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchPlans(pub [BatchPlan; 4]);

impl BatchPlans {
    /// The plan of chunks of width `w`.
    pub fn get(&self, w: Width) -> &BatchPlan {
        &self.0[w.index()]
    }
}

/// XT slots of a matrix of `cols` columns (see [`BatchPlan::slots`]).
pub fn xt_slots(cols: u32) -> Result<u32> {
    let slots = (u64::from(cols) + XT_EXTRA_SLOTS).div_ceil(8) * 8;
    u32::try_from(slots).map_err(|_| internal("XT slots"))
}

/// Bytes of XT at width `w` (what staging it in shared memory takes).
pub fn xt_bytes(slots: u32, w: Width) -> u64 {
    u64::from(slots) * u64::from(w.lanes()) * 2
}

/// The plans of every chunk width for a `rows × cols` matrix of kind `m`.
pub fn batch_plans(
    caps: &CudaCaps,
    tuning: &CudaTuning,
    m: BatchMatrix,
    rows: u32,
    cols: u32,
) -> Result<BatchPlans> {
    let plan = |w| batch_plan(caps, tuning, m, rows, cols, w);
    Ok(BatchPlans([
        plan(Width::W2)?,
        plan(Width::W4)?,
        plan(Width::W8)?,
        plan(Width::W16)?,
    ]))
}

/// The plan of one chunk width. MACKO and CSR stage XT in shared memory where it fits and the
/// staged kernel keeps at least as many blocks resident per SM as the kernel that reads XT from
/// global memory (staging then costs no occupancy; not measured yet, see kernels/README.md,
/// "Few-token products"); `cuda.batch_x=smem` stages wherever XT fits at all, `global` never.
/// Dense rows read XT from global memory (every warp reads all of it, in order, from L1/L2).
pub fn batch_plan(
    caps: &CudaCaps,
    tuning: &CudaTuning,
    m: BatchMatrix,
    rows: u32,
    cols: u32,
    width: Width,
) -> Result<BatchPlan> {
    if mma_wanted(caps, tuning, m, (rows, cols), width) {
        if let Some(plan) = mma_plan(caps, tuning, m, rows, cols, width)? {
            return Ok(plan);
        }
    }
    let slots = xt_slots(cols)?;
    let (staged, global) = match m {
        BatchMatrix::Macko { .. } => (BatchFormat::MackoShared, BatchFormat::MackoGlobal),
        BatchMatrix::Csr => (BatchFormat::CsrShared, BatchFormat::CsrGlobal),
        BatchMatrix::Dense if cols % 8 == 0 => {
            (BatchFormat::DenseAligned, BatchFormat::DenseAligned)
        }
        BatchMatrix::Dense => (BatchFormat::DenseAny, BatchFormat::DenseAny),
    };
    let kernel = |format| Kernel::Batch(BatchKernel { format, width });
    let global_per_sm = caps.blocks_per_sm(kernel(global), BLOCK, 0);
    let bytes = xt_bytes(slots, width);
    let smem = u32::try_from(bytes)
        .ok()
        .filter(|&b| staged != global && b <= caps.smem_limit);
    let staged_per_sm = smem.map_or(0, |b| caps.blocks_per_sm(kernel(staged), BLOCK, b));
    let stage = staged_per_sm > 0
        && match tuning.batch_x {
            Some(XPlace::Global) => false,
            Some(XPlace::Shared) => true,
            None => staged_per_sm >= global_per_sm,
        };
    let (format, smem_bytes) = match smem {
        Some(b) if stage => (staged, b),
        _ => (global, 0),
    };
    let grid = caps
        .grid(kernel(format), BLOCK, smem_bytes, rows)
        .ok_or_else(|| internal("a few-token kernel cannot be resident"))?;
    let words = u64::from(slots) * u64::from(width.lanes() / 2);
    let transpose_grid = u32::try_from(words.div_ceil(u64::from(BLOCK)))
        .unwrap_or(u32::MAX)
        .clamp(1, caps.sm_count.max(1).saturating_mul(4));
    Ok(BatchPlan {
        kernel: kernel(format),
        grid,
        block: BLOCK,
        smem_bytes,
        slots,
        transpose_grid,
        split_width: 0,
        window: 0,
        lanes: 0,
    })
}

/// Rows of a band of the dense tensor-core kernel (`16 · DENSE_MMA_MT` of kernels/batch_mma.cu):
/// one block multiplies one band at a time, its warps splitting the columns.
pub const DENSE_MMA_BAND: u32 = 32;

/// Rows of a band of the MACKO tensor-core kernel (one m16 tile).
pub const MACKO_MMA_BAND: u32 = 16;

/// The MACKO tensor-core kernel's default window: 128 columns, 80 KiB of tiles per 512-thread
/// block, two blocks per SM on sm_80 and sm_90 (kernels/README.md, "Tensor cores": the estimate
/// behind it; 256 is the variant to measure at low density).
pub const DEFAULT_WINDOW: u32 = 128;

/// `MMA_TILE_PAD` of kernels/batch_mma.cu: halves after each tile row.
const MMA_TILE_PAD: u32 = 32;

/// Dynamic shared memory of the MACKO tensor-core kernel: one 16-row tile per warp, each row
/// `window + MMA_TILE_PAD` binary16 values (the partial sums reuse it).
pub fn mma_tile_bytes(window: u32) -> u64 {
    SPLITS as u64 * 16 * (u64::from(window) + u64::from(MMA_TILE_PAD)) * 2
}

/// Whether chunks of `width` run on tensor cores: where the GPU has them (sm_80+), X's rows are
/// 16-byte aligned (`cols % 8 == 0`, read as they are) and the matrix has a tensor-core kernel
/// (dense and MACKO rows); then as `cuda.batch_mma` says, by default:
/// - dense rows at every width: measured on an H100 (2026-11-26, 8192² and 14336×4096), the
///   tensor-core kernel takes 56–57 µs at B = 2–16 on 8192² (84–89 % of the streaming read)
///   where the CUDA-core one takes 77 / 143 / 274 / 538 µs at B = 2 / 4 / 8 / 16;
/// - MACKO rows at width 16 only, where at least [`MMA_MIN_DENSITY`] of the cells are stored:
///   measured the same day, the tiles win only there (8192², d = 0.5: 125 against 156 µs;
///   14336×4096: 126 against 123), and lose at every width at d = 0.1 (50–59 against 25–55 µs)
///   and at width 8 (108–121 against 58–67 µs at d = 0.5): kernels/README.md, "Tensor cores".
fn mma_wanted(
    caps: &CudaCaps,
    tuning: &CudaTuning,
    m: BatchMatrix,
    (rows, cols): (u32, u32),
    w: Width,
) -> bool {
    let by_default = match m {
        BatchMatrix::Dense => true,
        BatchMatrix::Macko { entries } => {
            let cells = f64::from(rows) * f64::from(cols);
            w.lanes() == 16 && cells > 0.0 && entries as f64 >= MMA_MIN_DENSITY * cells
        }
        BatchMatrix::Csr => return false,
    };
    caps.tensor_cores && cols % 8 == 0 && tuning.batch_mma.unwrap_or(by_default)
}

/// The stored density (entries per cell, padding included) from which MACKO chunks of width 16
/// go to the tensor cores by default (`mma_wanted`).
pub const MMA_MIN_DENSITY: f64 = 0.3;

/// The tensor-core plan of one chunk width: a persistent grid of 512-thread blocks, at most one
/// per band, no XT. `None` where the MACKO tiles of the window do not fit a block's shared
/// memory (the CUDA-core kernels take the chunk then).
fn mma_plan(
    caps: &CudaCaps,
    tuning: &CudaTuning,
    m: BatchMatrix,
    rows: u32,
    cols: u32,
    width: Width,
) -> Result<Option<BatchPlan>> {
    let (format, band, window, lanes, smem) = match m {
        BatchMatrix::Dense => (BatchFormat::DenseMma, DENSE_MMA_BAND, 0, 0, 0),
        BatchMatrix::Macko { entries } => {
            let window = tuning.batch_window.unwrap_or(DEFAULT_WINDOW);
            let Some(smem) = u32::try_from(mma_tile_bytes(window))
                .ok()
                .filter(|&b| b <= caps.smem_limit)
            else {
                return Ok(None);
            };
            let lanes = tuning
                .batch_lanes
                .unwrap_or_else(|| team_lanes(window, entries, rows, cols));
            (BatchFormat::MackoMma, MACKO_MMA_BAND, window, lanes, smem)
        }
        BatchMatrix::Csr => return Err(internal("a tensor-core plan for a matrix without one")),
    };
    let kernel = Kernel::Batch(BatchKernel { format, width });
    let Some(resident) = caps.resident_blocks(kernel, BLOCK, smem) else {
        return Ok(None);
    };
    Ok(Some(BatchPlan {
        kernel,
        grid: resident.min(rows.div_ceil(band)).max(1),
        block: BLOCK,
        smem_bytes: smem,
        slots: 0,
        transpose_grid: 0,
        split_width: if window > 0 { split_width(cols) } else { 0 },
        window,
        lanes,
    }))
}

/// Lanes per row of the MACKO tensor-core kernel's decoding, by default: enough aligned groups
/// of 8 entries for a row's expected entries in one window (`window` × the stored density) and
/// the group straddling its start, so that a row takes one pass per window; at least 4 (8 rows
/// decoded at once), at most 8: 4 at d ≈ 0.1 and 128-column windows, 8 from d ≈ 0.3. Measured
/// on an H100 (2026-11-26, 8192² and 14336×4096): at d = 0.5, 8 lanes took 113–121 µs where 16
/// took 120–126 (B = 8 and 16); at d = 0.1, 8 lanes took 71–80 µs where 4 took 50–59.
pub fn team_lanes(window: u32, entries: u64, rows: u32, cols: u32) -> u32 {
    let cells = u64::from(rows) * u64::from(cols);
    let per_window = (u64::from(window) * entries)
        .checked_div(cells)
        .unwrap_or(0);
    let groups = u32::try_from(per_window.div_ceil(8) + 1).unwrap_or(u32::MAX);
    groups.next_power_of_two().clamp(4, 8)
}

#[cfg(test)]
#[path = "batch_plan_tests.rs"]
mod tests;

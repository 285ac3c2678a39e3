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
use super::cursors::{windows, BAND, WINDOW};
use super::errors::internal;
use super::tuning::{CudaTuning, XPlace};
use crate::error::Result;

/// `MACKO_X_SLACK + MACKO_X_TAIL` of kernels/common.cuh: XT slots around the columns.
const XT_EXTRA_SLOTS: u64 = 8 + 16;

/// Which few-token kernels a matrix runs.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchMatrix {
    /// MACKO rows, `entries` stored; `stage_groups`: the most groups a window of a band of 16
    /// rows holds (`cursors::stage_groups`, known once the upload computed the cursors; before,
    /// estimated from the density).
    Macko {
        entries: u64,
        stage_groups: Option<u32>,
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
    /// MACKO on tensor cores: windows of 128 columns per row (`cursors::windows`), else 0.
    pub windows: u32,
    /// MACKO on tensor cores: groups of 8 entries one shared-memory stage holds, else 0.
    pub stage_groups: u32,
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
        if let Some(plan) = mma_plan(caps, m, rows, cols, width)? {
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
        windows: 0,
        stage_groups: 0,
    })
}

/// Rows of a band of the dense tensor-core kernel (`16 · DENSE_MMA_MT` of kernels/batch_mma.cu):
/// one block multiplies one band at a time, its warps splitting the columns.
pub const DENSE_MMA_BAND: u32 = 16;

/// Threads per block of the MACKO tensor-core kernel (`MACKO_MMA_BLOCK`: 8 warps).
pub const MACKO_MMA_BLOCK: u32 = 256;

/// The widest MACKO matrix the tensor-core kernel takes: a row then holds at most 2²³ + 2 groups
/// (one entry per column at most), so a window cursor's group fits its 24 bits
/// (`cursors::window_cursors`). Wider matrices run on the CUDA cores.
pub const MMA_MAX_COLS: u32 = 1 << 26;

/// `MMA_STAGES` of kernels/batch_mma.cu: shared-memory stages of each warp's ring (the next
/// item's loads in flight while one is decoded; the measurement that chose 2 is there).
pub const MMA_STAGES: u32 = 2;

/// `MMA_DESC` of kernels/batch_mma.cu: words per row of a stage's table.
const MMA_DESC: u64 = 6;

/// Dynamic shared memory of the MACKO tensor-core kernel at width `w` (`mma_red_bytes`,
/// `mma_warp_bytes` of kernels/batch_mma.cu): the block's sums, then per warp its tile, its
/// exact-path table and [`MMA_STAGES`] stages of a table and `stage_groups` groups (16 + 4 bytes,
/// rounded up to 16 bytes: each stage's values stay 16-byte aligned for cp.async).
pub fn macko_mma_smem(w: Width, stage_groups: u32) -> u64 {
    let nt = u64::from(w.lanes().div_ceil(8));
    let warps = u64::from(MACKO_MMA_BLOCK / 32);
    let red = warps * 16 * 8 * nt * 4;
    let table = 16 * MMA_DESC * 4;
    let stage = table + (u64::from(stage_groups) * 20).div_ceil(16) * 16;
    let tile = 16 * u64::from(WINDOW) * 2; // swizzled, unpadded (`mma_swizzle`)
    red + warps * (tile + table + u64::from(MMA_STAGES) * stage)
}

/// The stage size the planner assumes before the upload measured it: a band's expected groups
/// per window (16 rows × the window's expected entries / 8, plus the group each row's next
/// window starts in), a quarter more for uneven windows, never more than a dense window holds.
pub fn estimated_stage_groups(entries: u64, rows: u32, cols: u32) -> u32 {
    let cells = u64::from(rows) * u64::from(cols);
    let band = BAND as u64;
    let per_window = (band * u64::from(WINDOW) * entries)
        .checked_div(cells)
        .unwrap_or(0);
    let groups = per_window.div_ceil(8) * 5 / 4 + 2 * band;
    let most = band * (u64::from(WINDOW) / 8 + 2);
    u32::try_from(groups.min(most)).unwrap_or(u32::MAX)
}

/// Whether chunks of `width` run on tensor cores: where the GPU has them (sm_80+), X's rows are
/// 16-byte aligned (`cols % 8 == 0`, read as they are) and the matrix has a tensor-core kernel
/// (dense and MACKO rows); then as `cuda.batch_mma` says, by default:
/// - dense rows at every width: measured on an H100 (2026-11-26, 8192² and 14336×4096), the
///   tensor-core kernel takes 56–57 µs at B = 2–16 on 8192² (84–89 % of the streaming read)
///   where the CUDA-core one takes 77 / 143 / 274 / 538 µs at B = 2 / 4 / 8 / 16;
/// - MACKO rows at width 16 only, where at least [`MMA_MIN_DENSITY`] of the cells are stored:
///   measured the same day with the window-cursor kernel (8192², 28672×8192, 4096², 14336×4096),
///   the tiles win only there (d = 0.5: 30–330 against 45–516 µs; d = 0.3: 26–296 against
///   32–333, but 90 against 80 on 14336×4096); at widths 2–8 the CUDA cores were 1.04–3.6×
///   faster, and the first tile kernel lost at every width at d = 0.1 (50–59 against 25–55 µs):
///   kernels/README.md, "Tensor cores".
fn mma_wanted(
    caps: &CudaCaps,
    tuning: &CudaTuning,
    m: BatchMatrix,
    (rows, cols): (u32, u32),
    w: Width,
) -> bool {
    let by_default = match m {
        BatchMatrix::Dense => true,
        BatchMatrix::Macko { entries, .. } => {
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

/// The tensor-core plan of one chunk width: a persistent grid, at most one block per band, no
/// XT. `None` where the MACKO kernel's stages do not fit a block's shared memory (the CUDA-core
/// kernels take the chunk then).
fn mma_plan(
    caps: &CudaCaps,
    m: BatchMatrix,
    rows: u32,
    cols: u32,
    width: Width,
) -> Result<Option<BatchPlan>> {
    let (format, band, block, smem, windows_, stage_groups) = match m {
        BatchMatrix::Dense => (BatchFormat::DenseMma, DENSE_MMA_BAND, BLOCK, 0, 0, 0),
        BatchMatrix::Macko {
            entries,
            stage_groups,
        } => {
            if cols > MMA_MAX_COLS {
                return Ok(None);
            }
            let stage = stage_groups.unwrap_or_else(|| estimated_stage_groups(entries, rows, cols));
            let Some(smem) = u32::try_from(macko_mma_smem(width, stage))
                .ok()
                .filter(|&b| b <= caps.smem_limit)
            else {
                return Ok(None);
            };
            let band = u32::try_from(BAND).map_err(|_| internal("band rows"))?;
            let block = MACKO_MMA_BLOCK;
            (
                BatchFormat::MackoMma,
                band,
                block,
                smem,
                windows(cols),
                stage,
            )
        }
        BatchMatrix::Csr => return Err(internal("a tensor-core plan for a matrix without one")),
    };
    let kernel = Kernel::Batch(BatchKernel { format, width });
    let Some(resident) = caps.resident_blocks(kernel, block, smem) else {
        return Ok(None);
    };
    Ok(Some(BatchPlan {
        kernel,
        grid: resident.min(rows.div_ceil(band)).max(1),
        block,
        smem_bytes: smem,
        slots: 0,
        transpose_grid: 0,
        windows: windows_,
        stage_groups,
    }))
}

#[cfg(test)]
#[path = "batch_plan_tests.rs"]
mod tests;

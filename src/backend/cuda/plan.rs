//! The CUDA planner: how each matrix is launched, as data. [`macko_plan`], [`csr_plan`] and
//! [`dense_plan`] are pure functions of the matrix's shape and statistics, the GPU's
//! capabilities ([`CudaCaps`]) and the tuning ([`CudaTuning`]); the upload stores the plan with
//! the device matrix, and the launch only binds and dispatches what it says.
//!
//! Grids are persistent: as many blocks as can be resident at once (the occupancy of the
//! kernel's registers and shared memory, times the SM count), capped by the number of rows;
//! each warp then walks rows grid-stride. With x staged in shared memory, the staging cost is
//! paid once per resident block, not once per row.

use super::batch_plan::{batch_plans, BatchMatrix, BatchPlan, BatchPlans};
use super::caps::{x_smem_bytes, x_smem_half_bytes, CudaCaps, Kernel, BIG_BLOCK, BLOCK};
use super::errors::internal;
use super::flat;
use super::rules::{
    balance, flat_for_one_round, half_warps_on_a_tie, half_x_by_default, lean_measured_for,
    lean_rows, pipelined_by_default, segment_entries, short_rows, split_segments, spread_grid,
    wide_half_x_measured_for, FLAT_SNAP, PAD_MIN_FILL,
};
use super::tuning::{CudaTuning, SplitPolicy, XPlace};
use crate::backend::tuning::ForcedPlan;
use crate::backend::BackendKind;
use crate::error::{Error, Result};

/// What the planner needs of a MACKO matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MackoStats {
    pub rows: u32,
    pub cols: u32,
    /// Stored entries (non-zeros and padding).
    pub entries: u64,
    /// Whether every row holds at least `flat::MIN_ROW_ENTRIES` (9) entries (the flat kernel
    /// needs it; where not, a flat plan falls back to rows).
    pub rows_fit_flat: bool,
}

impl MackoStats {
    /// The statistics of a matrix of `rows × cols` whose row pointers are `row_ptr`.
    pub fn new(rows: u32, cols: u32, row_ptr: &[u32]) -> Self {
        Self {
            rows,
            cols,
            entries: row_ptr.last().map_or(0, |&n| u64::from(n)),
            rows_fit_flat: flat::rows_long_enough(row_ptr),
        }
    }
}

/// How one matrix is launched.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CudaPlan {
    /// The product kernel.
    pub kernel: Kernel,
    /// Blocks.
    pub grid: u32,
    /// Threads per block: [`BLOCK`], or [`BIG_BLOCK`] (MACKO with x staged only).
    pub block: u32,
    /// Dynamic shared memory per block (x staged), 0 when x is read from global memory.
    pub smem_bytes: u32,
    /// MACKO only: x staged in the padded layout (else plain), when staged at all.
    pub padded_x: bool,
    /// MACKO only: x staged as binary16 in the plain layout (`macko_*_xh_*`), else as f32.
    pub half_x: bool,
    /// MACKO only: a half-warp per row (else a warp).
    pub half_warp: bool,
    /// MACKO only: batches of `MACKO_CHUNKS_SHORT` chunks (else `MACKO_CHUNKS`).
    pub short_chunks: bool,
    /// MACKO only: rows cut into segments of this many entries (see `split.rs`), else whole.
    pub split_entries: Option<u32>,
    /// MACKO only: two-chunk warp batches software-pipelined.
    pub pipelined: bool,
    /// MACKO only: the flat kernel (one range of entries per warp); its grid holds one warp
    /// per range.
    pub flat: bool,
    /// MACKO only, with `flat`: the ranges to cut the entries into (one per resident warp, at
    /// most one per 256 entries).
    pub flat_ranges: u32,
    /// MACKO only, with `flat`: how far from the even cut a range may start at a row's start.
    pub flat_snap: f64,
    /// MACKO only: uploaded row-aligned (macko_format::aligned), so the row kernel masks
    /// nothing (flags bit 4); set at upload, only for the row kernel on whole rows.
    pub aligned_rows: bool,
    /// MACKO only: the lean row kernel (`macko_lean_*`, see `rules::lean_rows`): whole rows on
    /// warps, x staged plain, short batches, not pipelined.
    pub lean: bool,
    /// MACKO row kernels: the grid holds every resident block, more warps than items
    /// (`rules::spread_grid`).
    pub spread: bool,
    /// The few-token plans of every chunk width (`batch_plan.rs`), set by the public planners
    /// ([`macko_plan`], [`csr_plan`], [`dense_plan`]).
    pub batch: Option<BatchPlans>,
}

impl CudaPlan {
    /// A plan of `kernel` in `grid` blocks of `block` threads with `smem_bytes` of x staged,
    /// everything else off.
    fn new(kernel: Kernel, grid: u32, block: u32, smem_bytes: u32) -> Self {
        Self {
            kernel,
            grid,
            block,
            smem_bytes,
            padded_x: false,
            half_x: false,
            half_warp: false,
            short_chunks: false,
            split_entries: None,
            pipelined: false,
            flat: false,
            flat_ranges: 0,
            flat_snap: 0.0,
            aligned_rows: false,
            lean: false,
            spread: false,
            batch: None,
        }
    }

    /// Warps of the grid. Within `macko_plan`'s rules, at most one per item; the plan it returns
    /// may launch more (every resident block, `rules::spread_grid`), the extra warps finding no
    /// item.
    pub fn warps(&self) -> u64 {
        u64::from(self.grid) * u64::from(self.block / 32)
    }

    /// Whether x is staged in shared memory.
    pub fn x_in_smem(&self) -> bool {
        self.smem_bytes > 0
    }

    /// The MACKO row kernel of the plan's x staging, block and lean choice (not the flat one).
    fn row_kernel(&self) -> Kernel {
        match (self.lean, self.half_x) {
            (true, true) => return Kernel::LeanHalf,
            (true, false) => return Kernel::Lean,
            (false, true) => return Kernel::RowHalf,
            (false, false) => {}
        }
        match (self.x_in_smem(), self.padded_x, self.block == BIG_BLOCK) {
            (false, _, _) => Kernel::RowGlobal,
            (true, true, false) => Kernel::RowPadded,
            (true, false, false) => Kernel::RowPlain,
            (true, true, true) => Kernel::BigPadded,
            (true, false, true) => Kernel::BigPlain,
        }
    }

    /// The flat kernel of the plan's x staging.
    fn flat_kernel(&self) -> Kernel {
        if self.half_x {
            Kernel::FlatHalf
        } else if self.padded_x {
            Kernel::FlatPadded
        } else {
            Kernel::FlatPlain
        }
    }

    /// The MACKO product kernel the plan's fields call for.
    fn macko_kernel(&self) -> Kernel {
        if self.flat {
            self.flat_kernel()
        } else {
            self.row_kernel()
        }
    }
}

/// The planner's view of one GPU and tuning.
struct Planner<'a> {
    caps: &'a CudaCaps,
    tuning: &'a CudaTuning,
}

/// Plan of a sparse kernel pair (x staged in `xs` or gathered in `xg`) for a `rows × cols`
/// matrix: x staged (padded) where it fits, unless the tuning says otherwise.
fn sparse_plan(
    caps: &CudaCaps,
    tuning: &CudaTuning,
    (xs, xg): (Kernel, Kernel),
    rows: u32,
    cols: u32,
) -> Result<CudaPlan> {
    let smem = x_smem_bytes(cols);
    if tuning.x != Some(XPlace::Global) && smem <= u64::from(caps.smem_limit) {
        let smem = u32::try_from(smem).map_err(|_| internal("smem size"))?;
        if let Some(grid) = caps.grid(xs, BLOCK, smem, rows) {
            let mut plan = CudaPlan::new(xs, grid, BLOCK, smem);
            plan.padded_x = true;
            return Ok(plan);
        }
    }
    if tuning.x == Some(XPlace::Shared) {
        return Err(Error::TooLarge {
            backend: BackendKind::Cuda,
            what: format!("x of {cols} columns staged in shared memory (cuda.x=smem)"),
            needed: smem,
            limit: u64::from(caps.smem_limit),
        });
    }
    let grid = caps
        .grid(xg, BLOCK, 0, rows)
        .ok_or_else(|| internal("a kernel without shared memory cannot be resident"))?;
    Ok(CudaPlan::new(xg, grid, BLOCK, 0))
}

/// Launch plan of a CSR matrix.
pub fn csr_plan(caps: &CudaCaps, tuning: &CudaTuning, rows: u32, cols: u32) -> Result<CudaPlan> {
    let mut plan = sparse_plan(
        caps,
        tuning,
        (Kernel::CsrStaged, Kernel::CsrGlobal),
        rows,
        cols,
    )?;
    plan.batch = Some(batch_plans(caps, tuning, BatchMatrix::Csr, rows, cols)?);
    Ok(plan)
}

/// Launch plan of a dense matrix: the 16-byte-aligned GEMV where every row starts on a 16-byte
/// boundary (`cols % 8 == 0`). The tuning reaches only the few-token plans (`cuda.batch_mma`).
pub fn dense_plan(caps: &CudaCaps, tuning: &CudaTuning, rows: u32, cols: u32) -> Result<CudaPlan> {
    let batch = batch_plans(caps, tuning, BatchMatrix::Dense, rows, cols)?;
    let kernel = if cols % 8 == 0 {
        Kernel::DenseAligned
    } else {
        Kernel::DenseAny
    };
    let grid = caps
        .grid(kernel, BLOCK, 0, rows)
        .ok_or_else(|| internal("the dense kernel cannot be resident"))?;
    let mut plan = CudaPlan::new(kernel, grid, BLOCK, 0);
    plan.batch = Some(batch);
    Ok(plan)
}

/// Launch plan of a MACKO matrix: x padded in shared memory only when rows are nearly dense
/// (or as the tuning says); x plain staged as binary16 where that fits more 512-thread
/// blocks, or x is wide on a DRAM-bound GPU (`rules::half_x_by_default`), else 1024-thread blocks
/// where two 512-thread blocks' f32 x do not fit an SM; a half-warp per row for short rows;
/// long rows cut into segments where whole rows would spread unevenly over the warps; then the
/// lean kernel on whole rows in place of any of those where it spreads the rows better
/// (`rules::lean_rows`); for the launch, the grid grown to every resident block where the rows are
/// fewer (`rules::spread_grid`); last, the flat kernel's ranges where it was chosen and every row
/// is long enough for it (else whole rows, or the split rows chosen before it).
///
/// A split plan's grid still counts rows: the upload, which cuts the rows into items, sets it
/// with [`with_split_items`].
pub fn macko_plan(caps: &CudaCaps, tuning: &CudaTuning, m: &MackoStats) -> Result<CudaPlan> {
    let p = Planner { caps, tuning };
    let mut plan = p.rules(m.rows, m.cols, m.entries)?;
    if plan.flat {
        if m.rows_fit_flat {
            p.flat_ranges(&mut plan, m.entries)?;
        } else {
            plan.flat = false;
        }
    }
    plan.kernel = plan.macko_kernel();
    plan.batch = Some(batch_plans(
        caps,
        tuning,
        BatchMatrix::Macko {
            entries: m.entries,
            stage_groups: None,
        },
        m.rows,
        m.cols,
    )?);
    Ok(plan)
}

/// A split plan's grid for the `items` work items the upload cut (more items than rows: the
/// grid may grow up to every resident warp, and to every resident block where `rules::spread_grid`
/// says so).
pub fn with_split_items(
    caps: &CudaCaps,
    tuning: &CudaTuning,
    plan: &CudaPlan,
    items: u32,
) -> Result<CudaPlan> {
    let p = Planner { caps, tuning };
    let grid = caps
        .grid(plan.kernel, plan.block, plan.smem_bytes, items)
        .ok_or_else(|| internal("the MACKO kernel cannot be resident"))?;
    let mut plan = *plan;
    let (grid, spread) = p.spread(&plan, grid);
    plan.grid = grid;
    plan.spread = spread;
    Ok(plan)
}

impl Planner<'_> {
    /// The rules of [`macko_plan`] up to the spread grid.
    fn rules(&self, rows: u32, cols: u32, entries: u64) -> Result<CudaPlan> {
        let t = self.tuning;
        let mut plan = sparse_plan(
            self.caps,
            t,
            (Kernel::RowPadded, Kernel::RowGlobal),
            rows,
            cols,
        )?;
        let fill = if rows == 0 || cols == 0 {
            0.0
        } else {
            entries as f64 / (f64::from(rows) * f64::from(cols))
        };
        let nearly_dense = fill >= PAD_MIN_FILL;
        plan.padded_x = t.xpad.unwrap_or(nearly_dense);
        if !plan.padded_x && t.x != Some(XPlace::Global) && t.xhalf != Some(false) {
            self.stage_x_half(&mut plan, rows, cols)?;
        }
        plan.short_chunks = t.short_chunks.unwrap_or(!nearly_dense);
        let mean_entries = if rows == 0 {
            0.0
        } else {
            entries as f64 / f64::from(rows)
        };
        let short_rows = short_rows(mean_entries);
        // Whether and how to split, for a plan's resident warps.
        let split_for = |warps: u64| match t.split {
            Some(SplitPolicy::Off) => None,
            Some(SplitPolicy::Segments(k)) => Some((k, segment_entries(mean_entries, k))),
            None if t.lanes == Some(16) || short_rows => None,
            None => split_segments(rows, mean_entries, warps),
        };
        if plan.x_in_smem() {
            self.choose_block(&mut plan, rows, &split_for)?;
        }
        // Teams (warps or half-warps) resident at once.
        let warps = plan.warps();
        let split = split_for(warps);
        plan.split_entries = split.map(|(_, seg)| seg);
        // The kernel runs half-warps only with cols >= 1 (it checks too).
        plan.half_warp = cols > 0
            && match t.lanes {
                Some(l) => l == 16,
                None => {
                    short_rows
                        || (split.is_none()
                            && half_warps_on_a_tie(rows, warps, mean_entries, nearly_dense))
                }
            };
        // Work items and their mean length, as the upload will cut them.
        let items = match split {
            Some((k, _)) => u64::from(rows) * u64::from(k),
            None => u64::from(rows),
        };
        let item_entries = if items == 0 {
            0.0
        } else {
            mean_entries * f64::from(rows) / items as f64
        };
        plan.pipelined = plan.short_chunks
            && !plan.half_warp
            && t.pipe
                .unwrap_or(pipelined_by_default(item_entries, items, warps));
        // The flat kernel runs 512-thread blocks with x staged (the upload checks the rows): by
        // default where whole rows would spread unevenly enough to be split. Measured on an H200
        // (kernels/README.md, "Flat ranges"): 5120×13824 gained 4–9 points of the ceiling at
        // d = 0.3–1 over split rows, while matrices of short or evenly spread rows lost 1–25.
        // And where fewer long rows than warps leave warps idle (flat_for_one_round).
        let flat_ok = plan.x_in_smem() && plan.block == BLOCK && rows > 0;
        plan.flat = flat_ok
            && match t.flat {
                Some(f) => f,
                None => {
                    split.is_some()
                        || (u64::from(rows) <= warps
                            && flat_for_one_round(
                                rows,
                                self.resident_warps(&plan),
                                mean_entries,
                                nearly_dense,
                                self.caps.dram_bytes_per_sm_cycle,
                            ))
                }
            };
        if self.lean_allowed(&plan, nearly_dense) {
            self.choose_lean(&mut plan, rows)?;
        }
        // Last, and for the launch only. A flat plan's grid is replaced by its ranges
        // (flat_ranges), or stays this one where the rows are too short for the flat kernel.
        let (grid, spread) = self.spread(&plan, plan.grid);
        plan.grid = grid;
        plan.spread = spread;
        Ok(plan)
    }

    /// The grid of a row-kernel plan's `grid` blocks (at most one warp per item), grown to every
    /// resident block where the tuning or `rules::spread_grid` says so, and whether it grew. Only
    /// the launch changes: the plan's rules count the warps of the grid before this.
    fn spread(&self, plan: &CudaPlan, grid: u32) -> (u32, bool) {
        let Some(resident) = self.resident_blocks(plan) else {
            return (grid, false);
        };
        let spread = match self.tuning.spread {
            Some(on) => on && grid < resident,
            None => spread_grid(grid, resident, self.caps.sm_count),
        };
        if spread {
            (resident, true)
        } else {
            (grid, false)
        }
    }

    /// Turns a plan with x staged plain as f32 (or in global memory, x too wide to stage as f32)
    /// into one with x staged as binary16 in 512-thread blocks, where that fits and the tuning
    /// asks for it — by default (`rules::half_x_by_default`) where the regular kernel's 512-thread
    /// blocks then fit the GPU more times than they do now, or as many times with a wide x on a
    /// GPU where that was measured to gain, and the tuning does not ask for 1024-thread blocks;
    /// leaves it as it is otherwise.
    fn stage_x_half(&self, plan: &mut CudaPlan, rows: u32, cols: u32) -> Result<()> {
        let caps = self.caps;
        let smem = x_smem_half_bytes(cols);
        if smem > u64::from(caps.smem_limit) {
            return Ok(());
        }
        let smem = u32::try_from(smem).map_err(|_| internal("smem size"))?;
        let Some(half_blocks) = caps.grid(Kernel::RowHalf, BLOCK, smem, u32::MAX) else {
            return Ok(());
        };
        // The regular kernel's 512-thread blocks resident now: x staged as f32, or (too wide for
        // that) read from global memory.
        let (now, now_smem) = if plan.x_in_smem() {
            (Kernel::RowPlain, plan.smem_bytes)
        } else {
            (Kernel::RowGlobal, 0)
        };
        let now_blocks = caps.grid(now, BLOCK, now_smem, u32::MAX);
        // cuda.block=1024 asks for the f32 copy's 1024-thread blocks (binary16 has none).
        // The wide rule was measured against f32 x staged, not against x in global memory.
        let wide_measured =
            plan.x_in_smem() && wide_half_x_measured_for(caps.dram_bytes_per_sm_cycle);
        let auto = self.tuning.block != Some(BIG_BLOCK)
            && half_x_by_default(now_blocks, half_blocks, cols, wide_measured);
        if self.tuning.xhalf != Some(true) && !auto {
            return Ok(());
        }
        if let Some(grid) = caps.grid(Kernel::RowHalf, BLOCK, smem, rows) {
            *plan = CudaPlan::new(Kernel::RowHalf, grid, BLOCK, smem);
            plan.half_x = true;
        }
        Ok(())
    }

    /// Whether a MACKO plan may go to the lean kernel: x staged plain in 512-thread blocks, no
    /// tuning forcing what the lean kernel does not run (half-warps, long batches, pipelining,
    /// splits, the flat kernel); for `auto` also rows not nearly dense (long batches) on a GPU
    /// where it was measured to gain (`rules::lean_measured_for`).
    fn lean_allowed(&self, plan: &CudaPlan, nearly_dense: bool) -> bool {
        let t = self.tuning;
        let forced_elsewhere = t.lanes == Some(16)
            || t.short_chunks == Some(false)
            || t.pipe == Some(true)
            || matches!(t.split, Some(SplitPolicy::Segments(_)))
            || t.flat == Some(true);
        let runnable = plan.x_in_smem() && !plan.padded_x && plan.block == BLOCK;
        match t.lean {
            Some(false) => false,
            Some(true) => runnable && !forced_elsewhere,
            None => {
                runnable
                    && !forced_elsewhere
                    && !nearly_dense
                    && lean_measured_for(self.caps.dram_bytes_per_sm_cycle)
            }
        }
    }

    /// Turns a plan into the lean kernel's (whole rows on warps, short batches, not pipelined)
    /// where the tuning says so or `rules::lean_rows` picks it; leaves it as it is otherwise.
    fn choose_lean(&self, plan: &mut CudaPlan, rows: u32) -> Result<()> {
        let caps = self.caps;
        let (lean, regular) = if plan.half_x {
            (Kernel::LeanHalf, Kernel::RowHalf)
        } else {
            (Kernel::Lean, Kernel::RowPlain)
        };
        let Some(grid) = caps.grid(lean, BLOCK, plan.smem_bytes, u32::MAX) else {
            return Ok(());
        };
        let lean_warps = u64::from(grid) * u64::from(BLOCK / 32);
        let warps = caps.grid(regular, BLOCK, plan.smem_bytes, u32::MAX);
        let warps = warps.map_or(0, |g| u64::from(g) * u64::from(BLOCK / 32));
        // Against the teams the regular plan chose (half-warps or warps), whole rows.
        let cuts = plan.split_entries.is_some() || plan.flat;
        if self.tuning.lean != Some(true)
            && !lean_rows(rows, warps, lean_warps, plan.half_warp, cuts)
        {
            return Ok(());
        }
        let half_x = plan.half_x;
        *plan = CudaPlan::new(
            lean,
            grid.min(rows.div_ceil(BLOCK / 32)).max(1),
            BLOCK,
            plan.smem_bytes,
        );
        plan.half_x = half_x;
        plan.short_chunks = true;
        plan.lean = true;
        Ok(())
    }

    /// Blocks of a MACKO plan's row kernel resident at once on the whole GPU (`None`: it cannot
    /// run with the plan's shared memory).
    fn resident_blocks(&self, plan: &CudaPlan) -> Option<u32> {
        self.caps
            .resident_blocks(plan.row_kernel(), plan.block, plan.smem_bytes)
    }

    /// Warps of a MACKO plan's row kernel resident at once on the whole GPU (the grid of the
    /// plan rules stops at one warp per row; the launch may be spread to these, see
    /// `rules::spread_grid`).
    fn resident_warps(&self, plan: &CudaPlan) -> u64 {
        self.resident_blocks(plan)
            .map_or(0, |g| u64::from(g) * u64::from(plan.block / 32))
    }

    /// Turns a MACKO plan into the flat kernel's (same x layout, 512-thread blocks): one range
    /// per resident warp, at most one per chunk (256 entries), one warp per range.
    fn flat_ranges(&self, plan: &mut CudaPlan, entries: u64) -> Result<()> {
        let blocks = self
            .caps
            .grid(plan.flat_kernel(), BLOCK, plan.smem_bytes, u32::MAX)
            .ok_or_else(|| internal("the flat MACKO kernel cannot be resident"))?;
        let warps = u64::from(blocks) * u64::from(BLOCK / 32);
        let ranges = warps.min((entries / 256).max(1));
        plan.block = BLOCK;
        plan.grid = u32::try_from(ranges.div_ceil(u64::from(BLOCK / 32)))
            .map_err(|_| internal("flat grid"))?;
        plan.flat_ranges = u32::try_from(ranges).map_err(|_| internal("flat ranges"))?;
        plan.flat_snap = self.tuning.flat_snap.unwrap_or(FLAT_SNAP);
        plan.split_entries = None;
        plan.spread = false;
        Ok(())
    }

    /// Picks the block of a MACKO plan with x staged: 1024 threads (one block per SM, one copy
    /// of x for all its warps) where the 512-thread kernel would get fewer resident threads — as
    /// long as the rows (split as `split_for` would split them) spread about as evenly over the
    /// larger number of warps (within 0.05 of the balance) — or as the tuning says; the grid
    /// follows. Measured on an H200 (kernels/README.md, "Blocks of 512 or 1024 threads"):
    /// 9216×36864 went from 66–67 % of the ceiling to 71–80 % at d = 0.3–0.7 with 1024-thread
    /// blocks and split rows, but lost 6 points at d = 0.1, where rows too short to split fell into
    /// an uneven last round.
    fn choose_block(
        &self,
        plan: &mut CudaPlan,
        rows: u32,
        split_for: &dyn Fn(u64) -> Option<(u32, u32)>,
    ) -> Result<()> {
        let caps = self.caps;
        // x staged as binary16 runs 512-thread blocks only (it fits two of them wherever the
        // 1024-thread blocks' f32 copy fits one).
        let (small, big) = if plan.half_x {
            (Kernel::RowHalf, None)
        } else if plan.padded_x {
            (Kernel::RowPadded, Some(Kernel::BigPadded))
        } else {
            (Kernel::RowPlain, Some(Kernel::BigPlain))
        };
        let small_grid = caps.grid(small, BLOCK, plan.smem_bytes, rows);
        let big_grid = big.and_then(|big| caps.grid(big, BIG_BLOCK, plan.smem_bytes, rows));
        let warps = |g: Option<u32>, b: u32| g.map_or(0, |g| u64::from(g) * u64::from(b / 32));
        let spread = |w: u64| {
            let k = split_for(w).map_or(1, |(k, _)| k);
            balance(rows.saturating_mul(k), w)
        };
        let (small_warps, big_warps) = (warps(small_grid, BLOCK), warps(big_grid, BIG_BLOCK));
        let use_big = match self.tuning.block {
            Some(b) => b == BIG_BLOCK && big_grid.is_some(),
            None => {
                big_warps > small_warps
                    && (small_warps == 0 || spread(big_warps) + 0.05 >= spread(small_warps))
            }
        };
        let (grid, block) = if use_big {
            (big_grid, BIG_BLOCK)
        } else {
            (small_grid, BLOCK)
        };
        plan.grid = grid.ok_or_else(|| internal("the MACKO kernel cannot be resident"))?;
        plan.block = block;
        Ok(())
    }
}

/// Whether a plan runs the MACKO row kernel on warps of lanes (regular or 1024-thread blocks),
/// the only kernel that reads the half-warp, batch and pipelining choices: a forced plan of
/// those that ends on the flat or lean kernel was not taken.
fn row_warps(p: &CudaPlan) -> bool {
    matches!(
        p.kernel,
        Kernel::RowPadded
            | Kernel::RowGlobal
            | Kernel::RowPlain
            | Kernel::RowHalf
            | Kernel::BigPadded
            | Kernel::BigPlain
    )
}

impl CudaTuning {
    /// Named tunings that each force one non-default plan, with a predicate on the plan that
    /// says it was taken. Each forces only what the plan needs so that it can run on every
    /// matrix the suite multiplies (the flat kernel, for one, still needs rows of 9 entries).
    pub fn forced_plans() -> Vec<ForcedPlan<CudaTuning, CudaPlan>> {
        let t = CudaTuning::default;
        vec![
            ForcedPlan {
                name: "cuda x global",
                tuning: CudaTuning {
                    x: Some(XPlace::Global),
                    ..t()
                },
                taken: |p| !p.x_in_smem(),
            },
            ForcedPlan {
                name: "cuda x padded",
                tuning: CudaTuning {
                    xpad: Some(true),
                    ..t()
                },
                taken: |p| {
                    matches!(
                        p.kernel,
                        Kernel::RowPadded | Kernel::BigPadded | Kernel::FlatPadded
                    )
                },
            },
            ForcedPlan {
                name: "cuda x binary16",
                tuning: CudaTuning {
                    xpad: Some(false),
                    xhalf: Some(true),
                    lean: Some(false),
                    ..t()
                },
                taken: |p| p.half_x,
            },
            ForcedPlan {
                name: "cuda half-warps, long batches",
                tuning: CudaTuning {
                    lanes: Some(16),
                    short_chunks: Some(false),
                    ..t()
                },
                taken: |p| row_warps(p) && p.half_warp && !p.short_chunks,
            },
            ForcedPlan {
                name: "cuda 1024-thread blocks",
                tuning: CudaTuning {
                    block: Some(1024),
                    xhalf: Some(false),
                    lean: Some(false),
                    ..t()
                },
                taken: |p| p.block == BIG_BLOCK,
            },
            ForcedPlan {
                name: "cuda split rows",
                tuning: CudaTuning {
                    split: Some(SplitPolicy::Segments(3)),
                    flat: Some(false),
                    ..t()
                },
                taken: |p| p.split_entries.is_some(),
            },
            ForcedPlan {
                name: "cuda pipelined warps",
                tuning: CudaTuning {
                    lanes: Some(32),
                    short_chunks: Some(true),
                    pipe: Some(true),
                    ..t()
                },
                taken: |p| row_warps(p) && p.pipelined,
            },
            ForcedPlan {
                name: "cuda flat ranges cut inside rows",
                tuning: CudaTuning {
                    flat: Some(true),
                    flat_snap: Some(0.0),
                    ..t()
                },
                taken: |p| p.flat && p.flat_snap == 0.0,
            },
            ForcedPlan {
                name: "cuda lean kernel",
                tuning: CudaTuning {
                    xpad: Some(false),
                    lean: Some(true),
                    ..t()
                },
                taken: |p| p.lean,
            },
            ForcedPlan {
                name: "cuda few-token XT from global memory",
                tuning: CudaTuning {
                    batch_x: Some(XPlace::Global),
                    batch_mma: Some(false),
                    ..t()
                },
                taken: |p| p.batch.is_some_and(|b| b.0.iter().all(|w| !w.x_in_smem())),
            },
            ForcedPlan {
                name: "cuda few-token tensor cores at every width",
                tuning: CudaTuning {
                    batch_mma: Some(true),
                    ..t()
                },
                taken: |p| {
                    p.batch
                        .is_some_and(|b| b.0.iter().all(BatchPlan::tensor_cores))
                },
            },
            ForcedPlan {
                name: "cuda every resident block",
                tuning: CudaTuning {
                    spread: Some(true),
                    ..t()
                },
                taken: |p| p.spread,
            },
        ]
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

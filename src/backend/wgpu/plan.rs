//! The plan of a product: which kernel, its workgroup size and grid, how x is held, and the
//! layout of the matrix, as a pure function of the matrix's shape and fill, the device's
//! capabilities and the tuning. Computed once, at upload, and stored with the matrix; a product
//! only binds and dispatches what it says (the output precision, chosen per product, picks one
//! of the plan's two pipelines).
//!
//! The rules and the measurements that set them: shaders/README.md, one section per rule (from
//! "Rows dealt by stride" to "The grid"). Planned without a GPU, so the unit tests below pin the
//! rules from tables of capabilities.

use macko_format::MatrixKind;

use super::kernel::{Kernel, KernelPath, QuantKey, DENSE_ROWS_PER_WORKGROUP};
use super::pipelines::{PipelineKey, XForm};
use super::tiles::{plan_tiles, TilePlan, TILE_COLS_GRANULE};
use super::tuning::WgpuTuning;

/// Default workgroup sizes of the MACKO subgroup kernel, below and from `LARGE_ROWS` rows.
/// Measured on an H200 (shaders/README.md, "Workgroup size"): 512 is 5–13% faster than 256 on
/// 12288 and 36864 rows, equal on 11008 rows at d >= 0.3 but 11% slower at d = 0.1, 12–15%
/// slower on 4096 (fewer, larger workgroups leave SMs idle when rows are few).
pub const WORKGROUP_SMALL: u32 = 256;
pub const WORKGROUP_LARGE: u32 = 512;
pub const LARGE_ROWS: usize = 12288;
/// Columns from which a staged x takes the large workgroups whatever the rows. Measured on an
/// H200, 512 against 256 invocations with x staged as f16: 3584×18944, 3584×20480, 4096×11008,
/// 4096×14336, 5120×13824 1.32–1.45× faster at d = 1 and 0.5, 1.2–1.3× at d = 0.1; 8192² and
/// 9216² 1.12–1.27×; 7168² 1.05–1.18×; but 5120² 1.10–1.18× slower, 11008×4096 1.04–1.05×
/// slower (so not for 5120 columns or fewer).
pub const WIDE_COLS: usize = 7168;
pub const DEFAULT_MAX_STAGED_WORKGROUPS: u32 = 1024;
/// About the invocations a large GPU keeps resident with this kernel: 132 SMs × 1024 (an H100
/// or H200 at the kernel's 60 registers). Dispatching more makes a second wave of workgroups
/// that each stage x again; capping the grid there makes it persistent (the rows' stride gives
/// every row to a resident subgroup). Measured on an H200: 12288², 28672×8192 and 36864×12288
/// 3–16 % faster, 11008×4096 1.5–3.5 % faster. wgpu exposes no count of compute units, so on a
/// smaller GPU the cap is too high and on a larger one a little low.
pub const DEFAULT_MAX_STAGED_INVOCATIONS: u32 = 132 * 1024;
/// Where a workgroup's staged x takes more than `WIDE_WORKGROUP_BYTES`: one workgroup of 512
/// per SM of an H100 or H200, half the cap above (two workgroups no longer fit an SM's ~48 KB,
/// so the cap above would dispatch two waves). Measured on an H200: 1.01–1.17× faster on the
/// tiled shapes, 1.02–1.14× on 3584×18944, 4096×14336, 5120×13824 and 12288² staged whole.
pub const DEFAULT_MAX_WIDE_INVOCATIONS: u32 = 132 * 512;
/// Workgroup memory per workgroup (the staged x and the kernel's other variables) above which
/// the wide cap applies: half the ~48 KB an SM of an H100 or H200 gives these pipelines under
/// NVIDIA's Vulkan driver (measured: 22–23 KB of x fit twice, 24 KB does not). Other GPUs were
/// not measured.
pub const WIDE_WORKGROUP_BYTES: u32 = 24 * 1024;
/// Rows per workgroup aimed at when x is staged (the copy of x is then a small fraction of a
/// workgroup's reads), before the caps.
pub const DEFAULT_ROWS_PER_STAGED_WORKGROUP: u32 = 16;
/// Fill (stored entries, explicit zeros included, over rows × columns) below which a
/// row-aligned matrix with x staged whole takes two rows per subgroup. Measured on an H200
/// (9 shapes), two rows per subgroup against one: at d = 0.1 (fill 0.12–0.15) 1.05× faster in
/// the median (0.97–1.15×); at d = 0.3 mixed (0.95–1.11×), at d ≥ 0.5 mostly slower.
pub const HALF_ROWS_MAX_FILL: f64 = 0.2;
/// Fill from which x staged as f16 scalars is padded (the lanes of a nearly dense row gather
/// columns about 8 apart, which the plain layout puts 4 to a bank; below it the columns are
/// spread at random and the padding would only cost its instructions: the CUDA kernel's
/// rule), and below which the value masks come from the table in the uniform (1.00–1.04×
/// faster on 8 shapes at d = 0.5 / 0.3 / 0.1; at d = 1 0.96–1.01×, hence not there).
pub const X_PAD_MIN_FILL: f64 = 0.85;
/// Words of workgroup memory x is staged in are rounded up to this, so matrices of similar
/// widths share one pipeline. 256 (1024 before): at 1024, 4096 columns took 12 KB and four
/// workgroups of 256 no longer fit an SM's ~48 KB on an H200 (11008×4096 1.11–1.27× slower).
pub const X_WORDS_GRANULE: u32 = 256;
/// Bytes of workgroup memory the MACKO subgroup kernel declares besides the staged x
/// (`x_nonfinite` and `x_finite_copy` in macko.wgsl: 8), with room to spare for small
/// additions. A pipeline over the limit is not rejected by every driver (on an H200, f32 x of
/// exactly 48 KiB plus these 8 bytes hung the product).
pub const MACKO_OTHER_WORKGROUP_BYTES: u32 = 64;

/// What the planner needs to know of a device: filled from the adapter at open.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq)]
pub struct WgpuCaps {
    /// The subgroup kernels run (the adapter has `SUBGROUP` and the options did not turn them
    /// off).
    pub subgroups: bool,
    /// The smallest subgroup size the adapter may use (at least 1).
    pub subgroup_min: u32,
    pub subgroup_max: u32,
    /// `SHADER_F16`: x may be staged as one f16 per column.
    pub has_f16: bool,
    /// Bytes of workgroup memory a workgroup may declare.
    pub workgroup_storage: u32,
    /// Invocations a workgroup may have (the lesser of the per-workgroup and x-size limits).
    pub max_invocations: u32,
    /// Workgroups a dispatch may have along one dimension.
    pub max_workgroups_per_dim: u32,
}

/// What the planner needs to know of a matrix.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatrixStats {
    pub format: MatrixKind,
    pub rows: usize,
    pub cols: usize,
    /// Stored entries over rows × columns (MACKO: explicit zeros included; 0 for the other
    /// formats, whose kernels no fill rule concerns).
    pub fill: f64,
}

/// Where the MACKO subgroup kernel reads x from.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XStaging {
    /// Gathered from memory (the f32 copy): the other kernels, or where staging is off.
    Memory,
    /// Staged whole in workgroup memory by every workgroup.
    Whole,
    /// Staged one column tile at a time; the matrix's row pointers are then tile tables.
    Tiles(TilePlan),
}

/// How many workgroups a block of `rows` rows dispatches.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grid {
    /// `rows / rows_per_workgroup` (rounded up) workgroups in x, at least 1 and at most `max`;
    /// the kernel's subgroups deal the rows by stride, so a capped grid is persistent.
    Capped { rows_per_workgroup: u32, max: u32 },
    /// `rows / rows_per_workgroup` (rounded up) workgroups, one per `rows_per_workgroup` rows,
    /// over a 2-D grid of at most `max_x` in x.
    Spread { rows_per_workgroup: u32, max_x: u32 },
}

impl Grid {
    /// The dispatch (x, y) for a block of `rows` rows.
    pub fn dispatch(self, rows: u32) -> (u32, u32) {
        match self {
            Grid::Capped {
                rows_per_workgroup,
                max,
            } => (
                rows.div_ceil(rows_per_workgroup.max(1))
                    .clamp(1, max.max(1)),
                1,
            ),
            Grid::Spread {
                rows_per_workgroup,
                max_x,
            } => {
                let n = rows.div_ceil(rows_per_workgroup.max(1));
                let x = n.clamp(1, max_x.max(1));
                (x, n.div_ceil(x).max(1))
            }
        }
    }
}

/// The plan of one matrix's products.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq)]
pub struct WgpuPlan {
    pub kernel: Kernel,
    /// Invocations per workgroup.
    pub workgroup: u32,
    pub grid: Grid,
    /// MACKO subgroup kernels (binary16 and quantized; the quantized one never in tiles):
    /// where x is read from, in which form and in how many words of workgroup memory (0 from
    /// memory).
    pub x: XStaging,
    pub x_form: XForm,
    pub x_words: u32,
    /// MACKO subgroup kernel: value masks from the table in the uniform.
    pub mask_table: bool,
    /// MACKO subgroup kernel: the matrix is uploaded row-aligned (macko_format::aligned; with
    /// tiles, each row's part in each tile), so pipelined steps mask nothing. The upload keeps
    /// the format's layout instead where the aligned rows do not fit a binding, and says so
    /// here (`WgpuPlan::in_format_layout`).
    pub aligned_rows: bool,
    /// MACKO subgroup kernel: two rows per exact subgroup (row-aligned, x staged whole).
    pub half_rows: bool,
    /// The test hook of `WgpuTuning::gather_probe` (x staged as f16 scalars only).
    pub gather_probe: bool,
    /// The few-token products' plans, one per chunk width (`batch_plan::BATCH_WIDTHS`, in
    /// order): a pure function of the fields above, the capabilities and the tuning.
    pub batch: Vec<BatchPlan>,
    /// Quantized matrices: the codes' width and the scale layout their kernels are built for
    /// (set by the upload, `WgpuPlan::quantized`; `None` for the other formats).
    pub quant: Option<QuantKey>,
    /// A homogeneous CSR matrix: CSR's kernels built with `HOMOGENEOUS` (shaders/csr.wgsl),
    /// the values binding holding the one weight.
    pub homogeneous: bool,
}

impl WgpuPlan {
    /// The plan for a matrix uploaded in the format's own layout after all: no row-aligned
    /// steps, so no two rows per subgroup either.
    pub fn in_format_layout(mut self) -> Self {
        self.aligned_rows = false;
        self.half_rows = false;
        self
    }

    /// The plan of a quantized matrix whose values are `quant`, its few-token plans included.
    pub fn quantized(mut self, quant: QuantKey) -> Self {
        self.quant = Some(quant);
        for b in &mut self.batch {
            b.quant = Some(quant);
        }
        self
    }

    /// The most workgroups a block dispatches.
    pub fn max_staged_workgroups(&self) -> u32 {
        match self.grid {
            Grid::Capped { max, .. } => max,
            Grid::Spread { .. } => u32::MAX,
        }
    }

    /// Whether the kernel is compiled without naga's per-access clamps, every gather of x
    /// bounded by construction (pipelines.rs says why that is sound): x staged as f16 scalars.
    pub fn bounded_gathers(&self) -> bool {
        self.kernel == Kernel::MackoSubgroup && self.x != XStaging::Memory && self.x_form.is_f16()
    }

    /// The pipeline that runs the plan with f16 (`y_f16`) or f32 output.
    pub(super) fn pipeline_key(&self, y_f16: bool) -> PipelineKey {
        let macko = self.kernel.stages_x();
        PipelineKey {
            width: 0,
            kernel: self.kernel,
            y_f16: y_f16 && self.kernel.writes_y(),
            x_words: self.x_words,
            x_form: self.x_form,
            workgroup: if macko { self.workgroup } else { 0 },
            x_tiled: matches!(self.x, XStaging::Tiles(_)),
            bounded_gathers: self.bounded_gathers(),
            gather_probe: self.gather_probe,
            mask_table: self.mask_table,
            aligned_rows: self.aligned_rows,
            half_rows: self.half_rows,
            quant: self.quant,
            homogeneous: self.homogeneous,
            sparse_x: false,
        }
    }
}

/// The MACKO subgroup kernel's workgroup sizes, small and large: `WORKGROUP_SMALL` and
/// `WORKGROUP_LARGE` (or the forced size), halved down to the adapter's limit, never below 32.
fn workgroup_sizes(caps: &WgpuCaps, tuning: &WgpuTuning) -> (u32, u32) {
    let fit = |mut n: u32| {
        while n > 32 && n > caps.max_invocations {
            n /= 2;
        }
        n
    };
    (
        fit(tuning.macko_workgroup.unwrap_or(WORKGROUP_SMALL)),
        fit(tuning.macko_workgroup.unwrap_or(WORKGROUP_LARGE)),
    )
}

/// How x of `cols` columns is staged: the words of workgroup memory and the form, or `None`
/// where it does not fit (or staging is off). f16 scalars where the adapter has `SHADER_F16`
/// (padded for nearly dense rows, where that fits), else f16 pairs.
fn x_staging(caps: &WgpuCaps, t: &WgpuTuning, cols: usize, fill: f64) -> Option<(u32, XForm)> {
    if t.x_in_workgroup == Some(false) {
        return None;
    }
    let budget = u64::from(
        caps.workgroup_storage
            .saturating_sub(MACKO_OTHER_WORKGROUP_BYTES)
            / 4,
    );
    let granule = u64::from(t.x_words_granule.unwrap_or(X_WORDS_GRANULE).max(8));
    let words = |form: XForm| form.words(cols as u64).div_ceil(granule) * granule;
    let half = if t.x_f16.unwrap_or(true) && caps.has_f16 {
        XForm::F16
    } else {
        XForm::Pairs
    };
    let padded = half == XForm::F16 && t.x_pad.unwrap_or(fill >= X_PAD_MIN_FILL);
    let form = [XForm::F16Padded, half]
        .into_iter()
        .filter(|&f| f != XForm::F16Padded || padded)
        .find(|&f| words(f) <= budget)?;
    Some((u32::try_from(words(form)).ok()?, form))
}

/// The column tiles of an x of `cols` columns: where it does not fit whole (or is wider than
/// `x_tile_cols`) but tiles of at least one granule do; `None` otherwise.
fn x_tiles(caps: &WgpuCaps, t: &WgpuTuning, cols: usize, fill: f64) -> Option<TilePlan> {
    if t.x_tiles == Some(false) {
        return None;
    }
    let fits = |c: usize| x_staging(caps, t, c, fill).is_some();
    let cap = t.x_tile_cols.map_or(usize::MAX, |n| n.max(64) as usize);
    if fits(cols) && cols <= cap {
        return None;
    }
    // The widest tile (a multiple of the granule) that fits: staging fits every width below
    // one that fits, so a binary search over granules.
    let (mut lo, mut hi) = (0usize, cols.min(cap) / TILE_COLS_GRANULE);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if fits(mid * TILE_COLS_GRANULE) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    plan_tiles(cols, lo * TILE_COLS_GRANULE)
}

/// The most workgroups of `workgroup` invocations dispatched with x staged, in a pipeline that
/// takes `bytes` of workgroup memory: the workgroup cap, and the invocation cap (above
/// `WIDE_WORKGROUP_BYTES`, the wide one; 0: none) over the workgroup size, at least 1.
fn staged_workgroup_cap(t: &WgpuTuning, workgroup: u32, bytes: u32) -> u32 {
    let invocations = if bytes > WIDE_WORKGROUP_BYTES {
        t.macko_wide_invocations
            .unwrap_or(DEFAULT_MAX_WIDE_INVOCATIONS)
    } else {
        t.macko_invocations
            .unwrap_or(DEFAULT_MAX_STAGED_INVOCATIONS)
    };
    let by_invocations = match invocations {
        0 => u32::MAX,
        n => (n / workgroup.max(1)).max(1),
    };
    t.macko_workgroups
        .unwrap_or(DEFAULT_MAX_STAGED_WORKGROUPS)
        .min(by_invocations)
        .max(1)
}

/// The plan of a matrix (see the module's documentation), with its few-token plans.
pub fn plan(stats: &MatrixStats, caps: &WgpuCaps, tuning: &WgpuTuning) -> WgpuPlan {
    let mut p = single_plan(stats, caps, tuning);
    p.batch = batch_plans(&p, caps, tuning);
    p
}

/// The plan of single-vector products (`batch` left empty).
fn single_plan(stats: &MatrixStats, caps: &WgpuCaps, tuning: &WgpuTuning) -> WgpuPlan {
    let path = if caps.subgroups {
        KernelPath::Subgroup
    } else {
        KernelPath::Workgroup
    };
    let kernel = Kernel::for_product(stats.format, path);
    let max_dim = caps.max_workgroups_per_dim.max(1);
    let plain = |grid| WgpuPlan {
        kernel,
        workgroup: kernel.workgroup_size(),
        grid,
        x: XStaging::Memory,
        x_form: XForm::Pairs,
        x_words: 0,
        mask_table: false,
        aligned_rows: false,
        half_rows: false,
        gather_probe: false,
        batch: Vec::new(),
        quant: None,
        homogeneous: stats.format == MatrixKind::HomogeneousCsr,
    };
    // Enough subgroups for every row to start at once (assuming the smallest subgroups, so the
    // most of them), capped by the dispatch limit; subgroups loop over rows beyond that.
    let per_subgroup = |size: u32| Grid::Capped {
        rows_per_workgroup: (size / caps.subgroup_min.max(1)).max(1),
        max: max_dim,
    };
    let spread = |rows_per_workgroup| Grid::Spread {
        rows_per_workgroup,
        max_x: max_dim,
    };
    match kernel {
        Kernel::MackoSubgroup | Kernel::QuantMackoSubgroup => {}
        Kernel::CsrSubgroup | Kernel::Sparse24Subgroup => {
            return plain(per_subgroup(kernel.workgroup_size()))
        }
        Kernel::DenseSubgroup
        | Kernel::DenseWorkgroup
        | Kernel::QuantDenseSubgroup
        | Kernel::QuantDenseWorkgroup => return plain(spread(DENSE_ROWS_PER_WORKGROUP)),
        Kernel::MackoWorkgroup
        | Kernel::CsrWorkgroup
        | Kernel::Sparse24Workgroup
        | Kernel::QuantMackoWorkgroup
        | Kernel::Stream => return plain(spread(1)),
        // Never a matrix's own kernel (`Kernel::for_product`).
        Kernel::MackoBatchSubgroup
        | Kernel::MackoBatchWorkgroup
        | Kernel::CsrBatchSubgroup
        | Kernel::CsrBatchWorkgroup
        | Kernel::Sparse24BatchSubgroup
        | Kernel::Sparse24BatchWorkgroup
        | Kernel::DenseBatch
        | Kernel::QuantMackoBatch
        | Kernel::QuantDenseBatch
        | Kernel::BatchTranspose
        | Kernel::CsrTransposed
        | Kernel::CsrTransposedDense
        | Kernel::MackoTransposed
        | Kernel::MackoTransposedDense
        | Kernel::TransposedCombine => return plain(spread(1)),
    }
    let (cols, fill) = (stats.cols, stats.fill);
    // The quantized kernel stages x whole or not at all (its binding 4 holds the scales, not
    // the tiles' partial sums), in the format's own layout (no row-aligned upload), and keeps
    // naga's clamps (no bounded gathers, so no gather probe).
    let quant = kernel == Kernel::QuantMackoSubgroup;
    let tiles = if quant {
        None
    } else {
        x_tiles(caps, tuning, cols, fill)
    };
    let staged = x_staging(caps, tuning, tiles.map_or(cols, |t| t.cols as usize), fill);
    let (x, (x_words, x_form)) = match (tiles, staged) {
        (Some(t), Some(s)) => (XStaging::Tiles(t), s),
        (None, Some(s)) => (XStaging::Whole, s),
        // Tiles are cut only where a tile is staged.
        (_, None) => (XStaging::Memory, (0, XForm::Pairs)),
    };
    let (small, large) = workgroup_sizes(caps, tuning);
    let workgroup = if stats.rows >= LARGE_ROWS || (x_words > 0 && cols >= WIDE_COLS) {
        large
    } else {
        small
    };
    let grid = if x_words > 0 {
        // Each workgroup pays for copying x, so a bounded number of them (about what a large
        // GPU keeps resident: no second wave staging x again) work through the rows.
        let bytes = x_words.saturating_mul(4) + MACKO_OTHER_WORKGROUP_BYTES;
        Grid::Capped {
            rows_per_workgroup: tuning
                .macko_rows_per_workgroup
                .unwrap_or(DEFAULT_ROWS_PER_STAGED_WORKGROUP),
            max: staged_workgroup_cap(tuning, workgroup, bytes).clamp(1, max_dim),
        }
    } else {
        per_subgroup(workgroup)
    };
    let aligned_rows = !quant && tuning.aligned_rows.unwrap_or(true);
    WgpuPlan {
        kernel,
        workgroup,
        grid,
        x,
        x_form,
        x_words,
        mask_table: !quant && tuning.mask_table.unwrap_or(fill < X_PAD_MIN_FILL),
        aligned_rows,
        half_rows: aligned_rows
            && x == XStaging::Whole
            && tuning.half_rows.unwrap_or(fill < HALF_ROWS_MAX_FILL),
        gather_probe: !quant && tuning.gather_probe && x != XStaging::Memory && x_form.is_f16(),
        batch: Vec::new(),
        quant: None,
        homogeneous: false,
    }
}

// ---- Few-token products -------------------------------------------------------------------
//
// The plans of few-token products (shaders/README.md, "Few-token products"): for each chunk
// width W (2, 4, 8, 16 vectors per pass over the matrix), which kernel, its workgroup size and
// its grid, as a pure function of the matrix's single-vector plan, the device's capabilities
// and the tuning. Computed by `plan`, at upload, and stored in it (`WgpuPlan::batch`).

/// The chunk widths, one plan each.
pub const BATCH_WIDTHS: [u32; 4] = [2, 4, 8, 16];
/// Invocations per workgroup of the subgroup few-token kernels (`WORKGROUP` there) unless
/// tuned: the single-vector CSR kernel's size; not measured on a GPU yet.
pub const BATCH_WORKGROUP: u32 = 128;
/// Rows per workgroup of the dense few-token kernel (ROWS in dense_batch_wg.wgsl).
pub const DENSE_BATCH_ROWS: u32 = 2;

/// The plan of a few-token product's passes for chunks of `width` vectors.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchPlan {
    pub kernel: Kernel,
    /// Vectors per pass: the chunk's count rounded up to a power of two, 2..=16.
    pub width: u32,
    /// Invocations per workgroup.
    pub workgroup: u32,
    pub grid: Grid,
    /// MACKO: the matrix's row pointers are column-tile tables (its single-vector plan stages
    /// x in tiles); the few-token kernels read x from XT in memory, so only the table matters.
    pub x_tiled: bool,
    /// Quantized matrices: as `WgpuPlan::quant`.
    pub quant: Option<QuantKey>,
    /// Homogeneous CSR: as `WgpuPlan::homogeneous`.
    pub homogeneous: bool,
}

impl BatchPlan {
    /// The pipeline that runs it with f16 (`y_f16`) or f32 output.
    pub(super) fn pipeline_key(&self, y_f16: bool) -> PipelineKey {
        let workgroup = if self.kernel.batch_workgroup_constant() {
            self.workgroup
        } else {
            0
        };
        PipelineKey {
            quant: self.quant,
            homogeneous: self.homogeneous,
            ..PipelineKey::batch(self.kernel, y_f16, self.width, workgroup, self.x_tiled)
        }
    }
}

/// The width of a chunk of `count` vectors (1..=16): `count` rounded up to a power of two,
/// at least 2.
pub fn batch_width(count: usize) -> u32 {
    (count.clamp(2, 16) as u32).next_power_of_two()
}

/// Where the plan of `width` is in `WgpuPlan::batch` (the index in `BATCH_WIDTHS`).
pub fn width_index(width: u32) -> usize {
    BATCH_WIDTHS
        .iter()
        .position(|&w| w == width)
        .unwrap_or(BATCH_WIDTHS.len() - 1)
}

/// `n` halved down to the adapter's limit, never below 32.
fn fit_workgroup(caps: &WgpuCaps, mut n: u32) -> u32 {
    while n > 32 && n > caps.max_invocations {
        n /= 2;
    }
    n
}

/// The plan of chunks of `width` vectors for a matrix whose single-vector plan is `plan`.
pub fn batch_plan(plan: &WgpuPlan, caps: &WgpuCaps, tuning: &WgpuTuning, width: u32) -> BatchPlan {
    let kernel = plan.kernel.for_batch();
    let max_dim = caps.max_workgroups_per_dim.max(1);
    let (workgroup, grid) = if kernel.batch_workgroup_constant() {
        // A row per subgroup, enough subgroups for every row at once (assuming the smallest
        // subgroups), capped by the tuning's persistent grid or the dispatch limit.
        let workgroup = fit_workgroup(caps, tuning.batch_workgroup.unwrap_or(BATCH_WORKGROUP));
        let grid = Grid::Capped {
            rows_per_workgroup: (workgroup / caps.subgroup_min.max(1)).max(1),
            max: tuning.batch_workgroups.unwrap_or(max_dim).clamp(1, max_dim),
        };
        (workgroup, grid)
    } else {
        let rows = if kernel == Kernel::DenseBatch {
            DENSE_BATCH_ROWS
        } else {
            1
        };
        let grid = Grid::Spread {
            rows_per_workgroup: rows,
            max_x: max_dim,
        };
        (kernel.workgroup_size(), grid)
    };
    BatchPlan {
        kernel,
        width,
        workgroup,
        grid,
        x_tiled: matches!(plan.x, XStaging::Tiles(_)),
        quant: plan.quant,
        homogeneous: plan.homogeneous,
    }
}

/// The plans of every width (`BATCH_WIDTHS`, in order).
pub fn batch_plans(plan: &WgpuPlan, caps: &WgpuCaps, tuning: &WgpuTuning) -> Vec<BatchPlan> {
    BATCH_WIDTHS
        .iter()
        .map(|&w| batch_plan(plan, caps, tuning, w))
        .collect()
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "batch_plan_tests.rs"]
mod batch_tests;

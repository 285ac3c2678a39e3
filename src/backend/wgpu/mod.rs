//! The wgpu backend: the products as WGSL compute shaders (shaders/, see shaders/NOTES.md) on
//! any adapter wgpu can open — Vulkan, Metal, DX12, GL — chosen at run time.
//!
//! - `adapter`: the instance, the choice of adapter and the device request (the adapter's own
//!   limits, optional features only where present).
//! - `gpu`: the device with error capture (no wgpu panic reaches the caller), waiting, buffers,
//!   staging uploads and downloads.
//! - `pipelines`: kernel sources, bind group layouts, pipelines compiled once on first use.
//! - `products`: matrices split into row blocks, vectors, recording and queueing of products.
//! - `tiles`: x too wide for workgroup memory, cut into column tiles, and the table of where
//!   each row's entries cross from one tile into the next.
//! - `timing`: timestamp-query timing of products and the streaming-read ceiling.
//!
//! Two kernel paths: with subgroup operations where the adapter has `SUBGROUP` (and
//! `DeviceOptions::wgpu_subgroups` is on), else workgroup memory only.

mod adapter;
mod gpu;
mod pipelines;
mod products;
mod specialize;
mod tiles;
mod timing;

use std::sync::{Arc, Mutex};

use half::f16;

use super::{
    Backend, BackendKind, DeviceInfo, HostVector, MatrixRef, MatrixStorage, Precision,
    VectorStorage,
};
use crate::device::{DeviceOptions, ENV_WGPU_SUBGROUPS};
use crate::error::Result;

use gpu::Gpu;
use pipelines::{KernelPath, Pipelines, X_WORDS_GRANULE};
use products::Pending;
pub(crate) use products::{GpuMatrix as WgpuMatrix, GpuVector as WgpuVector};

/// Environment variable that, set to `0`, makes the MACKO subgroup kernel gather x from memory
/// even where x fits in workgroup memory (for comparisons and tests of that path).
pub const ENV_X_IN_WORKGROUP: &str = "MACKO_WGPU_X_IN_WORKGROUP";

/// Environment variable that, set to `1`, makes the MACKO subgroup kernel stage x as f32 where
/// that fits workgroup memory (default: f16 pairs, half the space, so more workgroups resident).
pub const ENV_X_F32: &str = "MACKO_WGPU_X_F32";
/// Environment variable that, set to `0`, makes the MACKO subgroup kernel stage x as f16 pairs
/// (macko_x_words.wgsl) even on adapters with `SHADER_F16`, where it stages one f16 per column
/// by default (macko_x_f16.wgsl: measured 2–13 % faster on an H200, shaders/NOTES.md "Session
/// 5").
pub const ENV_X_F16: &str = "MACKO_WGPU_X_F16";
/// Environment variable: `on`, `off` or `auto` (the default) for the padded layout of an x staged
/// as f16 scalars (one unused word after every 32, `X_PAD` in macko_x_f16.wgsl); `auto` pads it
/// for nearly dense matrices (`X_PAD_MIN_FILL` in products.rs).
pub const ENV_X_PAD: &str = "MACKO_WGPU_X_PAD";
/// Environment variable that, set to `0`, makes the MACKO subgroup kernel gather x from memory
/// where it is too wide for workgroup memory, instead of staging it in column tiles (`X_TILED`
/// in macko.wgsl; on by default, with rows by stride only).
pub const ENV_X_TILES: &str = "MACKO_WGPU_X_TILES";
/// Environment variable: the most columns of x the MACKO subgroup kernel stages at a time (a
/// multiple of 64 is used, at least 64): x wider than that is staged in column tiles even
/// where it would fit whole (for tests and comparisons).
pub const ENV_X_TILE_COLS: &str = "MACKO_WGPU_X_TILE_COLS";
/// Environment variable: invocations per workgroup of the MACKO subgroup kernel (a power of two,
/// 32..=1024, within the adapter's limit) for every matrix; by default 256 for matrices of fewer
/// than `MackoTuning::LARGE_ROWS` rows and 512 from there, or from `MackoTuning::WIDE_COLS`
/// columns of a staged x.
pub const ENV_MACKO_WORKGROUP: &str = "MACKO_WGPU_MACKO_WORKGROUP";
/// Environment variable: the most workgroups the MACKO subgroup kernel dispatches when x is
/// staged (default `MackoTuning::DEFAULT_MAX_STAGED_WORKGROUPS`).
pub const ENV_MACKO_WORKGROUPS: &str = "MACKO_WGPU_MACKO_WORKGROUPS";
/// Environment variable: the most invocations the MACKO subgroup kernel dispatches in all when
/// the staged x and a reserve of 64 bytes for the kernel's other workgroup variables take at most
/// `MackoTuning::WIDE_WORKGROUP_BYTES` (default
/// `MackoTuning::DEFAULT_MAX_STAGED_INVOCATIONS`; `0` for no such cap).
pub const ENV_MACKO_INVOCATIONS: &str = "MACKO_WGPU_MACKO_INVOCATIONS";
/// Environment variable: the most invocations the MACKO subgroup kernel dispatches in all when
/// staging x, whole or in column tiles, takes more than `MackoTuning::WIDE_WORKGROUP_BYTES` of
/// workgroup memory (default
/// `MackoTuning::DEFAULT_MAX_WIDE_INVOCATIONS`; `0` for no such cap).
pub const ENV_MACKO_WIDE_INVOCATIONS: &str = "MACKO_WGPU_MACKO_WIDE_INVOCATIONS";
/// Environment variable: rows per workgroup aimed at when x is staged (default
/// `MackoTuning::DEFAULT_ROWS_PER_STAGED_WORKGROUP`), before the cap above.
pub const ENV_MACKO_ROWS_PER_WORKGROUP: &str = "MACKO_WGPU_MACKO_ROWS_PER_WORKGROUP";

/// Environment variable: sets of 4 groups a lane of the MACKO subgroup kernel loads per step
/// (1 or 2).
pub const ENV_MACKO_DEPTH: &str = "MACKO_WGPU_MACKO_DEPTH";
/// Environment variable that, set to `1`, swizzles the staged x (see macko.wgsl; off by default:
/// measured slower on an H200 at every density).
pub const ENV_X_SWIZZLE: &str = "MACKO_WGPU_X_SWIZZLE";
/// Environment variable that, set to `0`, keeps the per-entry zero select of the MACKO subgroup
/// kernel even where the staged x is finite (see `FAST_FINITE` in macko.wgsl; on by default).
pub const ENV_FAST_FINITE: &str = "MACKO_WGPU_FAST_FINITE";
/// Environment variable: `1` compiles the MACKO subgroup kernel with naga's loop bounding and
/// integer-division checks, `0` (the default) without them (`create_shader_module_trusted`;
/// array indices stay clamped unless `MackoTuning::bounded_gathers` applies, which `1` turns
/// off). See `MackoTuning::loop_bounds`.
pub const ENV_LOOP_BOUNDS: &str = "MACKO_WGPU_LOOP_BOUNDS";
/// Environment variable that, set to `0`, decodes a step's groups of the MACKO subgroup kernel when
/// they are loaded instead of keeping them as raw code words until their products (`LATE_DECODE`
/// in macko_sg.wgsl; on by default since the H200 sweep of shaders/NOTES.md, "Session 3").
pub const ENV_LATE_DECODE: &str = "MACKO_WGPU_LATE_DECODE";
/// Environment variable: rows in flight per subgroup of the MACKO subgroup kernel, `1` (the
/// default since the H200 sweep: fewer registers, more subgroups resident) or `2` (the next row's
/// bounds loading and the row after it claimed) (`ROW_AHEAD` in macko_sg.wgsl).
pub const ENV_ROW_AHEAD: &str = "MACKO_WGPU_ROW_AHEAD";
/// Environment variable that, set to `0`, makes full subgroups of the MACKO subgroup kernel count
/// their lanes instead of using the builtin subgroup size and invocation id (`LANE_BUILTINS` in
/// macko_sg.wgsl; on by default).
pub const ENV_LANE_BUILTINS: &str = "MACKO_WGPU_LANE_BUILTINS";
/// Environment variable that, set to `0`, makes the MACKO subgroup kernel take its rows from its
/// atomic counter instead of dealing them by a fixed stride over the dispatch's subgroups
/// (`STATIC_ROWS` in macko_sg.wgsl; on by default since the H200 sweep of shaders/NOTES.md,
/// "Session 6").
pub const ENV_STATIC_ROWS: &str = "MACKO_WGPU_STATIC_ROWS";
/// Environment variable: `1` numbers the MACKO subgroup kernel's subgroups across workgroups
/// first when rows are dealt by stride, `0` workgroup by workgroup (`INTERLEAVED_ROWS` in
/// macko_sg.wgsl; see `MackoTuning::DEFAULT_INTERLEAVED_ROWS`).
pub const ENV_INTERLEAVED_ROWS: &str = "MACKO_WGPU_INTERLEAVED_ROWS";
/// Environment variable that, set to `0`, makes exact subgroups of the MACKO subgroup kernel scan
/// with subgroupExclusiveAdd and subgroupAdd instead of shuffles up (`SHUFFLE_SCAN` in
/// macko_sg.wgsl; on by default, only with builtin lane ids).
pub const ENV_SHUFFLE_SCAN: &str = "MACKO_WGPU_SHUFFLE_SCAN";
/// Environment variable that, set to `0`, makes exact subgroups of the MACKO subgroup kernel work
/// through a row in steps of 4 groups per lane, loaded then computed, instead of pipelined steps
/// of 2, the next step loading while one is computed (`PIPELINE` in macko_sg.wgsl; on by default
/// since the H200 sweep of shaders/NOTES.md, "Session 6"; only with late decode, builtin lane ids
/// and 1 set per step).
pub const ENV_PIPELINE: &str = "MACKO_WGPU_PIPELINE";
/// Environment variable that, set to `0`, masks the pipelined steps of the MACKO subgroup kernel
/// when they are loaded instead of when they are computed (`LATE_MASK` in macko_sg.wgsl; on by
/// default: a mask at load time waits for the loads it masks).
pub const ENV_LATE_MASK: &str = "MACKO_WGPU_LATE_MASK";
/// Environment variable: `1` makes the MACKO subgroup kernel hold its rows' sums in lanes and
/// store them together, `0` stores each row's sum when the row ends (`HELD_SUMS` in
/// macko_sg.wgsl; see `MackoTuning::DEFAULT_HELD_SUMS`).
pub const ENV_HELD_SUMS: &str = "MACKO_WGPU_HELD_SUMS";
/// Environment variable: `1` makes full subgroups of the MACKO subgroup kernel sum a row by
/// shuffles xor, `0` by `subgroupAdd` (`BUTTERFLY_SUM` in macko_sg.wgsl; see
/// `MackoTuning::DEFAULT_BUTTERFLY_SUM`).
pub const ENV_BUTTERFLY_SUM: &str = "MACKO_WGPU_BUTTERFLY_SUM";
/// Environment variable: `1` compiles the MACKO subgroup kernel, where x is staged as f16
/// scalars, without naga's per-access clamps, its gathers bounded by construction, `0` with them
/// (`BOUNDED_GATHERS` in macko.wgsl; see `MackoTuning::bounded_gathers`).
pub const ENV_BOUNDED_GATHERS: &str = "MACKO_WGPU_BOUNDED_GATHERS";
/// Environment variable: the granule (words, a multiple of 8) the staged x's words are rounded
/// up to (`MackoTuning::x_words_granule`).
pub const ENV_X_WORDS_GRANULE: &str = "MACKO_WGPU_X_WORDS_GRANULE";
/// Environment variable: `1` turns on a test hook of the MACKO subgroup kernel with x staged as
/// f16 scalars: a gather of the pipelined loop outside the staged slots reads NaN
/// (`GATHER_PROBE` in macko_x_f16.wgsl; tests/wgpu_macko_bounded_gathers.rs).
pub const ENV_GATHER_PROBE: &str = "MACKO_WGPU_GATHER_PROBE";
/// Environment variable: `1` makes the MACKO subgroup kernel read its value masks from a table
/// in the uniform, `0` build them (`MASK_TABLE` in macko_sg.wgsl; see
/// `MackoTuning::DEFAULT_MASK_TABLE`).
pub const ENV_MASK_TABLE: &str = "MACKO_WGPU_MASK_TABLE";
/// Environment variable: `1` uploads MACKO matrices row-aligned for the MACKO subgroup kernel,
/// `0` in the format's own layout (`ALIGNED_ROWS` in macko_sg.wgsl; see
/// `MackoTuning::DEFAULT_ALIGNED_ROWS`).
pub const ENV_ALIGNED_ROWS: &str = "MACKO_WGPU_ALIGNED_ROWS";
/// Environment variable: `1` makes exact subgroups of the MACKO subgroup kernel take two rows at
/// a time (one per half) wherever the matrix allows it, `0` never, unset or `auto` for sparse
/// matrices only (`HALF_ROWS` in macko_sg.wgsl; see `MackoTuning::HALF_ROWS_MAX_FILL`).
pub const ENV_HALF_ROWS: &str = "MACKO_WGPU_HALF_ROWS";
/// Environment variable: `0` hands every kernel to wgpu as WGSL with its override constants,
/// for wgpu and the driver to specialize; unset or anything else specializes it here first
/// (constants set, the branches they rule out removed: specialize.rs), which builds the same
/// code in a fraction of the driver's time.
pub const ENV_SPECIALIZE: &str = "MACKO_WGPU_SPECIALIZE";

/// Tuning of the MACKO subgroup kernel, from the environment (for benchmark sweeps); values
/// that do not parse or are out of range keep the defaults.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MackoTuning {
    /// Stage x as f32 where it fits (else f16 pairs).
    pub x_f32: bool,
    /// Stage x as f16 scalars where the adapter has `SHADER_F16` (else f16 pairs); `x_f32`
    /// comes first where both are asked for.
    pub x_f16: bool,
    /// Pad an x staged as f16 scalars: `None` for nearly dense matrices only.
    pub x_pad: Option<bool>,
    /// Invocations per workgroup for matrices of fewer than `LARGE_ROWS` rows, and from there.
    pub workgroup_small: u32,
    pub workgroup_large: u32,
    /// The most workgroups dispatched with x staged.
    pub max_staged_workgroups: u32,
    /// The most invocations dispatched with x staged in at most `WIDE_WORKGROUP_BYTES`, in all
    /// (0: no such cap); see [`MackoTuning::DEFAULT_MAX_STAGED_INVOCATIONS`].
    pub max_staged_invocations: u32,
    /// The same where staging takes more (0: no such cap); see
    /// [`MackoTuning::DEFAULT_MAX_WIDE_INVOCATIONS`].
    pub max_wide_invocations: u32,
    /// Rows per workgroup aimed at with x staged (the copy of x is then a small fraction of a
    /// workgroup's reads), before the cap of `max_staged_workgroups`.
    pub rows_per_staged_workgroup: u32,
    /// Sets of 4 groups per lane per step.
    pub depth: u32,
    /// Swizzle the staged x.
    pub x_swizzle: bool,
    /// Skip the per-entry zero select where the staged x is finite.
    pub fast_finite: bool,
    /// Keep naga's runtime loop bounding and integer-division checks in the MACKO subgroup
    /// kernel (off by default; `MACKO_WGPU_LOOP_BOUNDS=1` turns them on). wgpu adds to every
    /// loop a 64-bit iteration counter that is decremented and tested each iteration (so that a
    /// driver never meets an infinite loop): on an H200, 4–5 registers more per invocation and
    /// instructions in the kernel's hottest loops (shaders/NOTES.md). The kernel needs neither:
    /// - `stage_x` (macko.wgsl) and the `copy_x` it calls: loops `i = t; i < bound;
    ///   i += invocations`, with `invocations` = the workgroup size (>= 32) and every bound at
    ///   most `X_WORDS`, `X_HALVES` or `cols / 4` (< 2³⁰), so `i` never wraps and each loop
    ///   ends;
    /// - `row_dot` / `row_dot_late` (macko_sg.wgsl): `g0` starts at `s / 8` and grows by
    ///   `4 · DEPTH · lanes >= 4` (lanes >= 1: counted at entry, when every invocation is active,
    ///   or the builtin subgroup size) while `g0 < gend <= 2²⁹`, so it never wraps;
    ///   `row_dot_piped` likewise by `2 · lanes >= 2`;
    /// - `exact_scan` and `exact_scan1`: the shift doubles up to the subgroup size (<= 128);
    ///   `lane_sum` (`BUTTERFLY_SUM`): it halves from half the subgroup size down to 0;
    ///   `half_scan` and `half_sum` (`HALF_ROWS`) likewise up to and down from half of it;
    /// - `row_pair_piped` (`HALF_ROWS`): `g0` grows by `2 · (size / 2) >= 2` while some half's
    ///   next step starts below its `gend <= 2²⁹`; `rows_loop_pairs`: every iteration adds
    ///   the row stride (twice the dispatch's subgroups) to rows below `params.rows` < 2³¹ and
    ///   the loop leaves once both halves' rows are past it;
    /// - `main` with column tiles (`X_TILED`): the tile counts up by 1 to `params.tiles`;
    /// - `rows_loop` with rows by stride (`STATIC_ROWS`): every iteration adds the dispatch's
    ///   subgroup count (>= 1) to a row below `params.rows` < 2³¹, so the row grows without
    ///   wrapping and the loop leaves within `params.rows` iterations;
    /// - `rows_loop` with the counter: every iteration moves on to a row newly claimed from the
    ///   atomic counter (one `atomicAdd` of 1 per claim, so all claims are distinct); a subgroup's claims below `params.rows` are at most
    ///   `params.rows`, so it leaves after at most `params.rows + 2` iterations, whatever the
    ///   counter held at the start.
    ///
    /// The only divisors that are not constants are the lane count (>= 1, as above) and, with
    /// `HALF_ROWS`, half the builtin subgroup size (taken only where the size is >= 2); every
    /// other division is by a nonzero constant and all are unsigned (no `MIN / -1`).
    pub loop_bounds: bool,
    /// Keep a step's groups as raw code words until their products (`LATE_DECODE`).
    pub late_decode: bool,
    /// Rows in flight per subgroup, 1 or 2 (`ROW_AHEAD`).
    pub row_ahead: u32,
    /// Full subgroups use the builtin subgroup size and invocation id (`LANE_BUILTINS`).
    pub lane_builtins: bool,
    /// Rows dealt out by a fixed stride, not the counter (`STATIC_ROWS`).
    pub static_rows: bool,
    /// With `static_rows`, subgroups numbered across workgroups first (`INTERLEAVED_ROWS`).
    pub interleaved_rows: bool,
    /// Exact subgroups scan by shuffles up (`SHUFFLE_SCAN`; only with `lane_builtins`).
    pub shuffle_scan: bool,
    /// Pipelined steps of 2 groups in exact subgroups (`PIPELINE`).
    pub pipeline: bool,
    /// Pipelined steps masked when computed (`LATE_MASK`).
    pub late_mask: bool,
    /// Row sums held in lanes and stored together (`HELD_SUMS`).
    pub held_sums: bool,
    /// Exact subgroups sum a row by shuffles xor (`BUTTERFLY_SUM`).
    pub butterfly_sum: bool,
    /// Compile the MACKO subgroup kernel without naga's per-access clamps where x is staged as
    /// f16 scalars and the pipelined loop runs (`BOUNDED_GATHERS`): a gather of x is then one
    /// workgroup load instead of a clamp and a load. Sound because every index the kernel
    /// computes is in range by construction, not by the clamp:
    /// - gathers of x in the pipelined loop (row_dot_piped says why: slack of 32 zero slots
    ///   before x and 128 after it, group starts clamped to the tile's width); the other row
    ///   loops clamp their gathers themselves (x_at);
    /// - the copy of x writes slots below `X_HALVES` (`XForm::words` counts the slack) and reads
    ///   words of x below its padded length;
    /// - values and codes are read at groups below a row's end group (`min(g, gend - 1)` in
    ///   masked steps, whole steps only where they lie inside the row), or, with row-aligned
    ///   uploads (`ALIGNED_ROWS`, `HALF_ROWS`), at the block's zero group past it (the last
    ///   group of the block's arrays: `RowAligned::zero_group`), and rows' bounds and
    ///   tile tables at rows below `params.rows` (the format's rule 4 keeps a row's columns
    ///   below `cols`, so a tile part's columns lie in its tile);
    /// - y, its f32 copy, the counters and partial sums at rows below `params.rows` of blocks
    ///   the backend sized.
    ///
    /// On Vulkan with robustBufferAccess2 the driver bounds storage-buffer accesses as well
    /// (wgpu then never clamps them); on Metal and DX12, and for workgroup memory everywhere,
    /// nothing does, hence the argument above, which covers every buffer.
    pub bounded_gathers: bool,
    /// Words the staged x's word count is rounded up to (a multiple of 8), so that matrices of
    /// similar widths share one pipeline (`MACKO_WGPU_X_WORDS_GRANULE`).
    pub x_words_granule: u32,
    /// The test hook `GATHER_PROBE` (`MACKO_WGPU_GATHER_PROBE=1`).
    pub gather_probe: bool,
    /// Value masks of the steps at a row's ends read from a table (`MASK_TABLE`).
    pub mask_table: bool,
    /// MACKO matrices uploaded row-aligned (macko_format::aligned; with x in column tiles,
    /// each row's part in each tile: tiles.rs), so that pipelined steps mask nothing
    /// (`ALIGNED_ROWS`).
    pub aligned_rows: bool,
    /// Two rows per exact subgroup (`HALF_ROWS`): `None` for matrices filled below
    /// `HALF_ROWS_MAX_FILL`, else always or never. Only for row-aligned matrices with x staged
    /// whole, rows by stride and pipelined steps.
    pub half_rows: Option<bool>,
    /// Stage x too wide for workgroup memory in column tiles (`X_TILED`).
    pub x_tiles: bool,
    /// The most columns of a staged x, whatever fits (`None`: what fits).
    pub x_tile_cols: Option<usize>,
}

impl MackoTuning {
    /// Default workgroup sizes, below and from `LARGE_ROWS` rows. Measured on an H200 (see
    /// shaders/NOTES.md): 512 is 5–13% faster than 256 on 12288 and 36864 rows, equal on 11008
    /// rows at d >= 0.3 but 11% slower at d = 0.1, 12–15% slower on 4096 (fewer, larger
    /// workgroups leave SMs idle when rows are few). The boundary lies between those shapes.
    pub const DEFAULT_WORKGROUP_SMALL: u32 = 256;
    pub const DEFAULT_WORKGROUP_LARGE: u32 = 512;
    pub const LARGE_ROWS: usize = 12288;
    /// Columns from which a staged x takes the large workgroups whatever the rows. Measured on an
    /// H200 (shaders/NOTES.md, "Session 5"), 512 against 256 invocations with x staged as f16:
    /// 3584×18944, 3584×20480, 4096×11008, 4096×14336, 5120×13824 1.32–1.45× faster at d = 1 and
    /// 0.5, 1.2–1.3× at d = 0.1; 8192² and 9216² 1.12–1.27×; 7168² 1.05 / 1.18 / 1.14× at
    /// d = 1 / 0.5 / 0.1; but 5120² 1.10–1.18× slower, 11008×4096 1.04–1.05× slower, 4096² mixed
    /// (so not for 5120 columns or fewer). Eight rows per workgroup of 256 instead (the same
    /// subgroups per row) was slower, so it is the workgroup's size, not the rows per subgroup.
    pub const WIDE_COLS: usize = 7168;
    pub const DEFAULT_MAX_STAGED_WORKGROUPS: u32 = 1024;
    /// About the invocations a large GPU keeps resident with this kernel: 132 SMs × 1024 (an H100
    /// or H200 at the kernel's 60 registers: 32 warps per SM). Dispatching more makes a second
    /// wave of workgroups that each stage x again and start their rows late; capping the grid
    /// there makes it persistent (the rows' stride, or with `MACKO_WGPU_STATIC_ROWS=0` the atomic
    /// counter, gives every row to a resident subgroup).
    /// Measured on an H200 (shaders/NOTES.md, "Session 4"): 12288², 28672×8192 and 36864×12288
    /// (512-invocation workgroups, 768–1024 of them before) 3–16 % faster at d = 1 / 0.5 / 0.1,
    /// 11008×4096 (688 workgroups of 256) 1.5–3.5 % faster; matrices of fewer rows dispatch fewer
    /// workgroups anyway. wgpu exposes no count of compute units, so on a smaller GPU the cap is
    /// too high (the old behaviour) and on a larger one a little low.
    pub const DEFAULT_MAX_STAGED_INVOCATIONS: u32 = 132 * 1024;
    /// Where the staged x takes more than `WIDE_WORKGROUP_BYTES`: one workgroup of 512 per SM of
    /// an H100 or H200, half the cap above. Two reasons, both measured on an H200
    /// (shaders/NOTES.md, "Session 7"; until session 8 the rule was x of 11 008 columns or more):
    /// - with x in column tiles the kernel takes 67 registers instead of 60 (`shader_stats`), so
    ///   an SM holds one workgroup of 512, not two, and the cap above dispatched two waves (the
    ///   second staging every tile again, late): one wave is 1.01–1.17× faster on the three
    ///   tiled shapes measured;
    /// - with x staged whole, half as many subgroups are faster from 11 008 columns on
    ///   (3584×18944, 4096×11008, 4096×14336, 5120×13824, 12288²: 1.02–1.04× at d = 1,
    ///   1.05–1.08× at d = 0.5 / 0.3, 1.07–1.14× at d = 0.1; 36864×12288, 49152×12288 within
    ///   ±2 %), but slower below (28672×8192: 1.13–1.21× slower, 11008×4096 1.02–1.09×). Why:
    ///   the driver gives these pipelines about 48 KB of workgroup memory per SM (two
    ///   workgroups fit at 22 KB each, not at 24 KB: measured with unused workgroup memory,
    ///   commit ff84a8d), and from 11 008 columns x took 24 KB (granule included), so two
    ///   workgroups of 512 no longer fit an SM and the grid above is two waves.
    ///
    /// Session 8 (shaders/NOTES.md): with 256-word granules, 4096×11008 stages 22–23 KB, and
    /// the grid above is 1.05–1.13× faster there at d = 1 / 0.5 / 0.3 (equal at d = 0.1), while
    /// 3584×18944, 4096×14336, 5120×13824 and 12288² (25 KB and more) stay 1.01–1.14× faster
    /// with this one. Hence a rule by the bytes staged, `WIDE_WORKGROUP_BYTES`.
    pub const DEFAULT_MAX_WIDE_INVOCATIONS: u32 = 132 * 512;
    /// Workgroup memory per workgroup (the staged x and the kernel's other variables) above
    /// which `max_wide_invocations` caps the grid: half the ~48 KB an SM of an H100 or H200
    /// gives these pipelines under NVIDIA's Vulkan driver, so that two workgroups no longer fit
    /// (measured: 22–23 KB of x fit twice, 24 KB does not). Other GPUs were not measured.
    pub const WIDE_WORKGROUP_BYTES: u32 = 24 * 1024;
    pub const DEFAULT_ROWS_PER_STAGED_WORKGROUP: u32 = 16;
    pub const DEFAULT_DEPTH: u32 = 1;
    pub const DEFAULT_ROW_AHEAD: u32 = 1;
    /// Row sums held in lanes (`HELD_SUMS`), row sums by shuffles xor (`BUTTERFLY_SUM`) and
    /// gathers bounded by construction (`BOUNDED_GATHERS`): on by default since the H200 sweep
    /// of shaders/NOTES.md ("Session 8"): each alone 0.99–1.05×, the three together 1.02–1.11×
    /// faster on 9 shapes × d = 1 / 0.5 / 0.3 / 0.1 (most at d = 0.1), slower nowhere.
    pub const DEFAULT_HELD_SUMS: bool = true;
    /// Subgroups numbered across workgroups first (`INTERLEAVED_ROWS`): a partial last round of
    /// rows spread over every multiprocessor (shaders/NOTES.md, "Session 11").
    pub const DEFAULT_INTERLEAVED_ROWS: bool = true;
    pub const DEFAULT_BUTTERFLY_SUM: bool = true;
    pub const DEFAULT_BOUNDED_GATHERS: bool = true;
    /// Value masks from a table (`MASK_TABLE`), for matrices that are not nearly dense (the
    /// backend's `X_PAD_MIN_FILL`): on by default since the H200 sweep of shaders/NOTES.md
    /// ("Session 8"), 1.00–1.04× faster on 8 shapes at d = 0.5 / 0.3 / 0.1; at d = 1 0.96–1.01×,
    /// hence not there.
    pub const DEFAULT_MASK_TABLE: bool = true;
    /// Row-aligned uploads (`ALIGNED_ROWS`): see shaders/NOTES.md, "Session 9".
    pub const DEFAULT_ALIGNED_ROWS: bool = true;
    /// Fill (stored entries, explicit zeros included, over rows × columns) below which
    /// `half_rows` (unset) takes two rows per subgroup. Measured on an H200 (shaders/NOTES.md,
    /// "Session 9"; 9 shapes), two rows per subgroup against one: at d = 0.1 (fill 0.12–0.15)
    /// 1.05× faster in the median (0.97–1.15×: 32000×5120 1.15×, 11008×4096 0.97×); at d = 0.3
    /// mixed (0.95–1.11×), at d ≥ 0.5 mostly slower (0.84–1.07×). Fitted to that one sweep.
    pub const HALF_ROWS_MAX_FILL: f64 = 0.2;

    /// Whether the MACKO subgroup kernel takes two rows per exact subgroup for a matrix of
    /// `fill` (the kernel's other conditions aside).
    pub fn half_rows_for(&self, fill: f64) -> bool {
        self.half_rows.unwrap_or(fill < Self::HALF_ROWS_MAX_FILL)
    }

    /// The most workgroups of `workgroup` invocations dispatched with x staged (whole or in
    /// column tiles) in a pipeline that takes `workgroup_bytes` of workgroup memory: the
    /// workgroup cap, and the invocation cap (above `WIDE_WORKGROUP_BYTES`, the wide one) over
    /// the workgroup size (at least 1).
    pub fn staged_workgroup_cap(&self, workgroup: u32, workgroup_bytes: u32) -> u32 {
        let invocations = if workgroup_bytes > Self::WIDE_WORKGROUP_BYTES {
            self.max_wide_invocations
        } else {
            self.max_staged_invocations
        };
        let by_invocations = match invocations {
            0 => u32::MAX,
            n => (n / workgroup.max(1)).max(1),
        };
        self.max_staged_workgroups.min(by_invocations).max(1)
    }

    /// Invocations per workgroup for a matrix of `rows` rows and `cols` columns, with x `staged`
    /// in workgroup memory or not: the large size from `LARGE_ROWS` rows, and also for fewer rows
    /// of a staged x of at least `WIDE_COLS` columns.
    pub fn workgroup_for(&self, rows: usize, cols: usize, staged: bool) -> u32 {
        if rows >= Self::LARGE_ROWS || (staged && cols >= Self::WIDE_COLS) {
            self.workgroup_large
        } else {
            self.workgroup_small
        }
    }

    fn from_env(limits: &wgpu::Limits) -> Self {
        let var = |name: &str| std::env::var(name).ok().map(|v| v.trim().to_string());
        let on = |name: &str| matches!(var(name).as_deref(), Some("1" | "true" | "on" | "yes"));
        let x_f32 = on(ENV_X_F32);
        let x_swizzle = on(ENV_X_SWIZZLE);
        let fast_finite = !matches!(
            var(ENV_FAST_FINITE).as_deref(),
            Some("0" | "false" | "off" | "no")
        );
        let loop_bounds = on(ENV_LOOP_BOUNDS);
        let off = |name: &str| matches!(var(name).as_deref(), Some("0" | "false" | "off" | "no"));
        // Defaults from the H200 sweep of shaders/NOTES.md ("Session 3"): 60 registers instead
        // of 65, 1.0–1.3× faster.
        let late_decode = !off(ENV_LATE_DECODE);
        // Session 5 (H200): f16 scalars where the adapter has SHADER_F16.
        let x_f16 = !off(ENV_X_F16);
        let x_pad = match var(ENV_X_PAD).as_deref() {
            Some("1" | "true" | "on" | "yes") => Some(true),
            Some("0" | "false" | "off" | "no") => Some(false),
            _ => None,
        };
        let lane_builtins = !off(ENV_LANE_BUILTINS);
        // Session 6 (H200): rows by stride, scans by shuffles.
        let static_rows = !off(ENV_STATIC_ROWS);
        let shuffle_scan = !off(ENV_SHUFFLE_SCAN);
        let pipeline = !off(ENV_PIPELINE);
        let late_mask = !off(ENV_LATE_MASK);
        let switch = |name: &str, default: bool| {
            if on(name) {
                true
            } else if off(name) {
                false
            } else {
                default
            }
        };
        let held_sums = switch(ENV_HELD_SUMS, Self::DEFAULT_HELD_SUMS);
        let interleaved_rows = switch(ENV_INTERLEAVED_ROWS, Self::DEFAULT_INTERLEAVED_ROWS);
        let butterfly_sum = switch(ENV_BUTTERFLY_SUM, Self::DEFAULT_BUTTERFLY_SUM);
        let bounded_gathers = switch(ENV_BOUNDED_GATHERS, Self::DEFAULT_BOUNDED_GATHERS);
        let x_words_granule = var(ENV_X_WORDS_GRANULE)
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|&n| n >= 8 && n % 8 == 0)
            .unwrap_or(X_WORDS_GRANULE);
        let x_tiles = !off(ENV_X_TILES);
        let x_tile_cols = var(ENV_X_TILE_COLS)
            .and_then(|v| v.parse::<usize>().ok())
            .map(|n| n.max(64));
        let row_ahead = var(ENV_ROW_AHEAD)
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|n| (1..=2).contains(n))
            .unwrap_or(Self::DEFAULT_ROW_AHEAD);
        let depth = var(ENV_MACKO_DEPTH)
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|n| (1..=2).contains(n))
            .unwrap_or(Self::DEFAULT_DEPTH);
        let max_size = limits
            .max_compute_invocations_per_workgroup
            .min(limits.max_compute_workgroup_size_x);
        let forced = var(ENV_MACKO_WORKGROUP)
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|&n| n.is_power_of_two() && (32..=1024).contains(&n));
        // Within the adapter's limit, never below 32 (a power of two: halving stays one).
        let fit = |mut n: u32| {
            while n > 32 && n > max_size {
                n /= 2;
            }
            n
        };
        let workgroup_small = fit(forced.unwrap_or(Self::DEFAULT_WORKGROUP_SMALL));
        let workgroup_large = fit(forced.unwrap_or(Self::DEFAULT_WORKGROUP_LARGE));
        let max_staged_workgroups = var(ENV_MACKO_WORKGROUPS)
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|&n| n >= 1)
            .unwrap_or(Self::DEFAULT_MAX_STAGED_WORKGROUPS);
        let max_staged_invocations = var(ENV_MACKO_INVOCATIONS)
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(Self::DEFAULT_MAX_STAGED_INVOCATIONS);
        let max_wide_invocations = var(ENV_MACKO_WIDE_INVOCATIONS)
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(Self::DEFAULT_MAX_WIDE_INVOCATIONS);
        let rows_per_staged_workgroup = var(ENV_MACKO_ROWS_PER_WORKGROUP)
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|&n| n >= 1)
            .unwrap_or(Self::DEFAULT_ROWS_PER_STAGED_WORKGROUP);
        Self {
            x_f32,
            x_f16,
            x_pad,
            workgroup_small,
            workgroup_large,
            max_staged_workgroups,
            max_staged_invocations,
            max_wide_invocations,
            rows_per_staged_workgroup,
            depth,
            x_swizzle,
            fast_finite,
            loop_bounds,
            late_decode,
            row_ahead,
            lane_builtins,
            static_rows,
            interleaved_rows,
            shuffle_scan,
            pipeline,
            late_mask,
            held_sums,
            butterfly_sum,
            bounded_gathers,
            x_words_granule,
            gather_probe: on(ENV_GATHER_PROBE),
            mask_table: switch(ENV_MASK_TABLE, Self::DEFAULT_MASK_TABLE),
            aligned_rows: switch(ENV_ALIGNED_ROWS, Self::DEFAULT_ALIGNED_ROWS),
            half_rows: match var(ENV_HALF_ROWS).as_deref() {
                Some("1" | "true" | "on" | "yes") => Some(true),
                Some("0" | "false" | "off" | "no") => Some(false),
                _ => None,
            },
            x_tiles,
            x_tile_cols,
        }
    }
}

/// Opens the wgpu device `opts` asks for.
pub(crate) fn open(opts: &DeviceOptions) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(WgpuBackend::open(opts)?))
}

/// The products on one wgpu device.
pub(crate) struct WgpuBackend {
    gpu: Gpu,
    pipelines: Pipelines,
    /// Which kernels run the products, and why.
    path: KernelPath,
    path_reason: String,
    /// Bytes one matrix array may bind: the adapter's binding and buffer limits, or the
    /// artificial cap of the options if smaller. Larger matrices are split into row blocks.
    matrix_limit: u64,
    /// Bytes one vector may bind (the adapter's limits; vectors are not split).
    vector_limit: u64,
    /// The artificial cap, for `info`.
    binding_cap: Option<u64>,
    /// Whether the MACKO subgroup kernel may stage x in workgroup memory (where it fits);
    /// `MACKO_WGPU_X_IN_WORKGROUP=0` turns it off, to compare with gathering from memory.
    x_in_workgroup: bool,
    /// Workgroup size, x precision and grid of the MACKO subgroup kernel.
    tuning: MackoTuning,
    /// Bound as the f32 copy of y when y is f32 (which has none): 16 bytes never written.
    no_wide_copy: wgpu::Buffer,
    pending: Mutex<Pending>,
}

/// "2 GiB", "64 KiB", "1000 B".
fn bytes_text(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if v.fract() == 0.0 {
        format!("{v} {}", UNITS[unit])
    } else {
        format!("{v:.2} {} ({n} B)", UNITS[unit])
    }
}

/// Whether the environment variable `name` turns a default-on setting off (`0`, `false`,
/// `off`, `no`).
fn turned_off(name: &str) -> bool {
    matches!(
        std::env::var(name).as_deref().map(str::trim),
        Ok("0" | "false" | "off" | "no")
    )
}

impl WgpuBackend {
    fn open(opts: &DeviceOptions) -> Result<Self> {
        let gpu = Gpu::new(adapter::open_device(opts)?);
        let specialize = !turned_off(ENV_SPECIALIZE);
        let pipelines = Pipelines::new(&gpu, specialize)?;
        let has_subgroups = gpu.features.contains(wgpu::Features::SUBGROUP);
        let (path, path_reason) = if !opts.wgpu_subgroups {
            (
                KernelPath::Workgroup,
                format!(
                    "workgroup memory (subgroups turned off: option or {ENV_WGPU_SUBGROUPS}=0)"
                ),
            )
        } else if has_subgroups {
            (KernelPath::Subgroup, "subgroup operations".to_string())
        } else {
            (
                KernelPath::Workgroup,
                "workgroup memory (the adapter lacks SUBGROUP)".to_string(),
            )
        };
        let adapter_limit = gpu
            .limits
            .max_storage_buffer_binding_size
            .min(gpu.limits.max_buffer_size);
        let cap = opts.max_binding_bytes.unwrap_or(u64::MAX);
        let no_wide_copy = gpu.create_buffer(
            16,
            wgpu::BufferUsages::STORAGE,
            "placeholder for the f32 copy of an f32 y",
        )?;
        let x_in_workgroup = !turned_off(ENV_X_IN_WORKGROUP);
        let tuning = MackoTuning::from_env(&gpu.limits);
        Ok(Self {
            x_in_workgroup,
            tuning,
            no_wide_copy,
            matrix_limit: adapter_limit.min(cap) / 16 * 16,
            vector_limit: adapter_limit / 16 * 16,
            binding_cap: opts.max_binding_bytes,
            gpu,
            pipelines,
            path,
            path_reason,
            pending: Mutex::new(Pending::default()),
        })
    }

    fn properties(&self) -> Vec<(String, String)> {
        let a = &self.gpu.adapter;
        let l = &self.gpu.limits;
        let mut p = vec![
            ("API".to_string(), format!("{:?}", a.backend)),
            ("device type".to_string(), format!("{:?}", a.device_type)),
            (
                "driver".to_string(),
                format!("{} {}", a.driver, a.driver_info).trim().to_string(),
            ),
            (
                "vendor:device".to_string(),
                format!("{:04x}:{:04x}", a.vendor, a.device),
            ),
            (
                "subgroup size".to_string(),
                if a.subgroup_min_size == a.subgroup_max_size {
                    a.subgroup_min_size.to_string()
                } else {
                    format!("{}–{}", a.subgroup_min_size, a.subgroup_max_size)
                },
            ),
            (
                "max_storage_buffer_binding_size".to_string(),
                bytes_text(l.max_storage_buffer_binding_size),
            ),
            ("max_buffer_size".to_string(), bytes_text(l.max_buffer_size)),
            (
                "workgroup memory".to_string(),
                bytes_text(l.max_compute_workgroup_storage_size as u64),
            ),
        ];
        if let Some(cap) = self.binding_cap {
            p.push((
                "binding cap (option)".to_string(),
                format!("{} (matrices split into row blocks)", bytes_text(cap)),
            ));
        }
        let features: Vec<String> = self
            .gpu
            .features
            .iter_names()
            .map(|(name, _)| name.to_string())
            .collect();
        p.push((
            "features".to_string(),
            if features.is_empty() {
                "none".to_string()
            } else {
                features.join(", ")
            },
        ));
        let mut kernels = self.path_reason.clone();
        if self.path == KernelPath::Subgroup {
            let t = &self.tuning;
            kernels += &if !self.x_in_workgroup {
                "; MACKO gathers x from memory (MACKO_WGPU_X_IN_WORKGROUP=0)".to_string()
            } else if t.x_tiles && t.static_rows {
                format!(
                    "; MACKO stages x in workgroup memory, in column tiles where it does not fit{}",
                    match t.x_tile_cols {
                        Some(n) => format!(" or is wider than {n} columns"),
                        None => String::new(),
                    }
                )
            } else {
                "; MACKO stages x in workgroup memory where it fits".to_string()
            };
            let f16_scalars =
                !t.x_f32 && t.x_f16 && self.gpu.features.contains(wgpu::Features::SHADER_F16);
            kernels += &format!(
                "; MACKO workgroups of {}, {} x 4 groups per step, x staged{} as {}, at most {} \
                 workgroups and {} invocations when staged ({} above {} bytes per workgroup){}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}",
                if t.workgroup_small == t.workgroup_large {
                    t.workgroup_small.to_string()
                } else {
                    format!(
                        "{} ({} from {} rows or {} staged columns)",
                        t.workgroup_small,
                        t.workgroup_large,
                        MackoTuning::LARGE_ROWS,
                        MackoTuning::WIDE_COLS
                    )
                },
                t.depth,
                // The f16-scalar layout has no swizzle (macko_x_f16.wgsl).
                if t.x_swizzle && !f16_scalars {
                    " (swizzled)"
                } else {
                    ""
                },
                if t.x_f32 {
                    "f32 where it fits"
                } else if f16_scalars {
                    match t.x_pad {
                        None => "f16 scalars (padded for nearly dense rows)",
                        Some(true) => "f16 scalars (padded where it fits)",
                        Some(false) => "f16 scalars (never padded)",
                    }
                } else {
                    "f16 pairs"
                },
                t.max_staged_workgroups,
                t.max_staged_invocations,
                t.max_wide_invocations,
                MackoTuning::WIDE_WORKGROUP_BYTES,
                if t.fast_finite {
                    ", no zero select where x is finite"
                } else {
                    ""
                },
                if t.loop_bounds {
                    ", loops bounded by naga"
                } else {
                    ""
                },
                if t.late_decode {
                    ", codes decoded late"
                } else {
                    ""
                },
                if t.row_ahead == 1 {
                    ", one row ahead"
                } else {
                    ""
                },
                if t.lane_builtins {
                    ", builtin lane ids"
                } else {
                    ""
                },
                match (t.static_rows, t.interleaved_rows) {
                    (true, true) => ", rows by stride (subgroups across workgroups)",
                    (true, false) => ", rows by stride",
                    (false, _) => "",
                },
                if t.shuffle_scan && t.lane_builtins {
                    ", scans by shuffles"
                } else {
                    ""
                },
                match (
                    t.pipeline && t.lane_builtins && t.late_decode && t.depth == 1,
                    t.late_mask
                ) {
                    (true, true) => ", pipelined steps of 2 groups, masked when computed",
                    (true, false) => ", pipelined steps of 2 groups, masked when loaded",
                    (false, _) => "",
                },
                if t.held_sums && t.static_rows {
                    ", row sums held in lanes (x staged whole)"
                } else {
                    ""
                },
                if t.butterfly_sum && t.lane_builtins {
                    ", row sums by shuffles"
                } else {
                    ""
                },
                if t.bounded_gathers
                    && f16_scalars
                    && !t.loop_bounds
                    && t.pipeline
                    && t.lane_builtins
                    && t.late_decode
                    && t.depth == 1
                {
                    ", gathers bounded by construction"
                } else {
                    ""
                },
                if t.gather_probe && f16_scalars {
                    ", gathers probed"
                } else {
                    ""
                },
                if t.mask_table {
                    ", value masks from a table below nearly dense"
                } else {
                    ""
                },
                if t.aligned_rows {
                    ", rows aligned to groups"
                } else {
                    ""
                },
                match (t.aligned_rows, t.half_rows) {
                    (true, Some(true)) => ", two rows per subgroup (rows aligned, x staged whole)",
                    (true, None) => {
                        ", two rows per subgroup below fill 0.2 (rows aligned, x staged whole)"
                    }
                    _ => "",
                },
                if t.x_words_granule == X_WORDS_GRANULE {
                    String::new()
                } else {
                    format!(", x staged in granules of {} words", t.x_words_granule)
                }
            );
        }
        if !self.pipelines.specialized() {
            kernels.push_str(", WGSL specialized by the driver");
        }
        p.push(("kernels".to_string(), kernels));

        p.push(("timer".to_string(), self.timer().to_string()));
        p
    }
}

impl Backend for WgpuBackend {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            backend: BackendKind::Wgpu,
            name: self.gpu.adapter.name.clone(),
            properties: self.properties(),
        }
    }

    fn upload_matrix(&self, m: MatrixRef<'_>) -> Result<MatrixStorage> {
        Ok(From::from(self.upload_matrix_impl(m)?))
    }

    fn upload_vector(&self, x: &[f16]) -> Result<VectorStorage> {
        Ok(From::from(self.upload_vector_impl(x)?))
    }

    fn alloc_vector(&self, len: usize, precision: Precision) -> Result<VectorStorage> {
        Ok(From::from(self.alloc_vector_impl(len, precision)?))
    }

    fn spmv(&self, a: &MatrixStorage, x: &VectorStorage, y: &mut VectorStorage) -> Result<()> {
        let a = a.wgpu()?;
        let x = x.wgpu()?;
        let y = y.wgpu_mut()?;
        self.spmv_impl(a, x, y)
    }

    fn plan(&self, _a: &MatrixStorage) -> Result<super::Plan> {
        Err(crate::error::Error::Backend {
            backend: BackendKind::Wgpu,
            message: "TEMPORARY: plans arrive with the wgpu restructure".into(),
        })
    }

    fn synchronize(&self) -> Result<()> {
        self.synchronize_impl()
    }

    fn download(&self, v: &VectorStorage) -> Result<HostVector> {
        self.download_impl(v.wgpu()?)
    }

    fn timer(&self) -> &'static str {
        if self.has_timestamps() {
            "wgpu timestamp queries"
        } else {
            "wall clock (the adapter lacks TIMESTAMP_QUERY)"
        }
    }

    fn time_spmv(
        &self,
        a: &[&MatrixStorage],
        x: &VectorStorage,
        y: &mut VectorStorage,
        warmup: usize,
        iters: usize,
    ) -> Result<Vec<f64>> {
        let a = a.iter().map(|m| m.wgpu()).collect::<Result<Vec<_>>>()?;
        let x = x.wgpu()?;
        let y = y.wgpu_mut()?;
        self.time_products(&a, x, y, warmup, iters)
    }

    fn stream_read(&self, bytes: u64, warmup: usize, iters: usize) -> Result<Option<Vec<f64>>> {
        self.stream_read_impl(bytes, warmup, iters).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The backend on lavapipe or any adapter, or `None` (printed) where wgpu has none.
    fn backend() -> Option<WgpuBackend> {
        match WgpuBackend::open(&DeviceOptions::for_backend(BackendKind::Wgpu)) {
            Ok(b) => Some(b),
            Err(e) => {
                println!("skipping: {e}");
                None
            }
        }
    }

    #[test]
    fn staged_workgroups_are_capped_by_workgroups_and_by_invocations() {
        let mut t = MackoTuning::from_env(&wgpu::Limits::default());
        t.max_staged_workgroups = 1024;
        t.max_staged_invocations = MackoTuning::DEFAULT_MAX_STAGED_INVOCATIONS;
        // An H200's resident workgroups at 32 warps per SM: 2 of 512, 4 of 256 per SM.
        t.max_wide_invocations = MackoTuning::DEFAULT_MAX_WIDE_INVOCATIONS;
        let kib = |n: u32| n * 1024;
        assert_eq!(t.staged_workgroup_cap(512, kib(9)), 264);
        assert_eq!(t.staged_workgroup_cap(256, kib(9)), 528);
        // Two workgroups fit an SM up to 24 KB each; above, one workgroup of 512 per SM.
        assert_eq!(t.staged_workgroup_cap(512, kib(23)), 264);
        assert_eq!(t.staged_workgroup_cap(512, kib(24)), 264);
        assert_eq!(t.staged_workgroup_cap(512, kib(24) + 1), 132);
        assert_eq!(t.staged_workgroup_cap(512, kib(47)), 132);
        // Small workgroups hit the workgroup cap first; huge ones still get one workgroup.
        assert_eq!(t.staged_workgroup_cap(32, kib(9)), 1024);
        t.max_staged_invocations = 100;
        assert_eq!(t.staged_workgroup_cap(512, kib(9)), 1);
        // 0: no invocation cap.
        t.max_staged_invocations = 0;
        assert_eq!(t.staged_workgroup_cap(512, kib(9)), 1024);
        assert_eq!(t.staged_workgroup_cap(0, kib(9)), 1024);
    }

    #[test]
    fn large_workgroups_from_many_rows_or_a_wide_staged_x() {
        let mut t = MackoTuning::from_env(&wgpu::Limits::default());
        t.workgroup_small = 256;
        t.workgroup_large = 512;
        // Many rows: large, whatever x.
        assert_eq!(t.workgroup_for(12288, 4096, true), 512);
        assert_eq!(t.workgroup_for(36864, 12288, false), 512);
        // Few rows of a wide staged x (4096×11008, 3584×20480, 8192²): large.
        assert_eq!(t.workgroup_for(4096, 11008, true), 512);
        assert_eq!(t.workgroup_for(3584, 20480, true), 512);
        assert_eq!(t.workgroup_for(8192, 8192, true), 512);
        assert_eq!(t.workgroup_for(7168, 7168, true), 512);
        // Few rows of a narrow x (11008×4096, 4096², 5120²), or x from memory: small.
        assert_eq!(t.workgroup_for(11008, 4096, true), 256);
        assert_eq!(t.workgroup_for(4096, 4096, true), 256);
        assert_eq!(t.workgroup_for(5120, 5120, true), 256);
        assert_eq!(t.workgroup_for(7168, 28672, false), 256);
    }

    #[test]
    fn a_lost_device_turns_every_later_call_into_an_error() {
        let Some(b) = backend() else { return };
        let x = b.upload_vector(&[f16::ONE; 8]).unwrap();
        b.gpu.device.destroy();
        let after: [(&str, Result<()>); 4] = [
            ("synchronize", b.synchronize()),
            ("download", b.download(&x).map(|_| ())),
            ("upload", b.upload_vector(&[f16::ONE; 8]).map(|_| ())),
            ("alloc", b.alloc_vector(8, Precision::F32).map(|_| ())),
        ];
        for (what, r) in after {
            match r {
                Err(e) => println!("{what}: {e}"),
                Ok(()) => panic!("{what} succeeded on a destroyed device"),
            }
        }
    }
}

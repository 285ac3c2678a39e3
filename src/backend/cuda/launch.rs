//! Loading the compiled kernels into a context, choosing each matrix's launch shape, and
//! queueing the products.
//!
//! Grids are persistent: as many blocks as can be resident at once (the occupancy the driver
//! computes for the kernel's registers and shared memory, times the SM count), capped by the
//! number of rows; each warp then walks rows grid-stride. With x staged in shared memory, the
//! staging cost is paid once per resident block, not once per row.

use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute_enum;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;

use super::cuda_error;
use super::memory::{CsrDev, DenseDev, DeviceArray, FlatDev, MackoDev, VectorData};
use super::nvrtc::{self, KernelSource};
use super::probe::{internal, DeviceProps};
use crate::backend::{BackendKind, Precision};
use crate::error::{Error, Result};

/// Threads per block of every kernel (the `__launch_bounds__` of kernels/*.cu).
pub(crate) const BLOCK: u32 = 512;
/// Threads per block of the MACKO kernel's `_big` entries (`MACKO_BIG_BLOCK` of kernels/macko.cu).
pub(crate) const BIG_BLOCK: u32 = 1024;
/// `MACKO_X_SLACK + MACKO_X_TAIL` of kernels/common.cuh: staged slots around x.
const X_EXTRA_SLOTS: u64 = 8 + 16;

/// Environment variable that forces where the sparse kernels read x from: `smem` (staged in
/// shared memory; an error where the f32 copy does not fit), `global` (read-only cache), or
/// `auto`.
pub const ENV_X: &str = "MACKO_CUDA_X";

/// Environment variable: `1` prints each MACKO matrix's launch plan to stderr at upload (for
/// experiments: which kernel, block, grid, teams and cuts the rules chose).
pub const ENV_LOG_PLAN: &str = "MACKO_CUDA_LOG_PLAN";

/// Whether `MACKO_CUDA_LOG_PLAN` asks for the plans.
pub(crate) fn log_plans() -> bool {
    std::env::var(ENV_LOG_PLAN).is_ok_and(|v| v.trim() == "1")
}

/// Environment variable that forces the layout of x staged for the MACKO kernel: `on` (one unused
/// word after every 32), `off` (plain), or `auto` (padded only for nearly dense matrices, see
/// [`PAD_MIN_FILL`]).
pub const ENV_XPAD: &str = "MACKO_CUDA_XPAD";

/// Entries per row over columns from which the MACKO kernel stages x padded. Lanes then read
/// columns about 8 apart, which the plain layout puts in 4 banks (8-way conflicts); below it the
/// lanes' columns are spread at random and the padding only costs an instruction per entry.
const PAD_MIN_FILL: f64 = 0.85;

/// Environment variable that forces the lanes per row of the MACKO kernel: `16` (a half-warp per
/// row), `32` (a warp per row), or `auto` (16 for short rows, see [`HALF_WARP_MAX_GROUPS`]).
pub const ENV_LANES: &str = "MACKO_CUDA_LANES";

/// Fill of the warps' last round of rows up to which long rows stay on warps even where
/// half-warps would spread them as evenly (see [`sparse_last_round`]).
const SPARSE_LAST_ROUND: f64 = 0.3;

/// Whether whole rows on `warps` warps take more than one round and the last is at most
/// [`SPARSE_LAST_ROUND`] full. Such a round is cheap (its few warps stream faster than in a full
/// one), so half-warps, which even out the rounds at the price of the slower 16-lane path, lose.
/// Measured on an H200 (kernels/NOTES.md, step 5), warps against half-warps at d = 0.5 / 0.7:
/// 5120² (last round 21 % full) +6 / +8 points of the ceiling, 13824×5120 (27 %) +7 / +8,
/// 21504×7168 (9 %) +7 / +9; but 14336×4096 (39 %) −2.4 / +0.6 and 7168² (70 %) −2 / 0.
fn sparse_last_round(rows: u32, warps: u64) -> bool {
    if warps == 0 || u64::from(rows) <= warps {
        return false;
    }
    let last = u64::from(rows) % warps;
    last > 0 && last as f64 <= SPARSE_LAST_ROUND * warps as f64
}

/// Whether rows of `mean_entries` entries always get half-warps (see [`HALF_WARP_MAX_GROUPS`]).
fn short_rows(mean_entries: f64) -> bool {
    mean_entries / 8.0 <= HALF_WARP_MAX_GROUPS
}

/// Whether rows that are not short (more than [`HALF_WARP_MAX_GROUPS`] groups) and not split
/// get half-warps: where half-warps spread them as evenly over the resident teams as warps do
/// (see [`balance`]), except where the warps' last round is sparse ([`sparse_last_round`]) or,
/// in batches of 2 chunks (not nearly dense), the rows hold more than
/// [`HALF_WARP_TIE_MAX_GROUPS`] groups: in both cases the warp path measured faster.
fn half_warps_on_a_tie(rows: u32, warps: u64, mean_entries: f64, nearly_dense: bool) -> bool {
    balance(rows, 2 * warps) >= balance(rows, warps)
        && !sparse_last_round(rows, warps)
        && (nearly_dense || mean_entries / 8.0 <= HALF_WARP_TIE_MAX_GROUPS)
}

/// Whether a warp's two-chunk batches are pipelined for `items` work items of `item_entries`
/// entries on `warps` resident warps: long items in more than one round ([`PIPE_MIN_ENTRIES`]),
/// or shorter ones in many rounds ([`PIPE_MIN_ENTRIES_MANY_ROUNDS`], [`PIPE_MANY_ROUNDS`]).
fn pipelined_by_default(item_entries: f64, items: u64, warps: u64) -> bool {
    (item_entries >= PIPE_MIN_ENTRIES && items > warps)
        || (item_entries >= PIPE_MIN_ENTRIES_MANY_ROUNDS && items >= PIPE_MANY_ROUNDS * warps)
}

/// Shortest rows (mean entries) for which [`flat_for_one_round`] picks the flat kernel.
const FLAT_ONE_ROUND_MIN_ENTRIES: f64 = 8192.0;

/// DRAM bytes per SM cycle ([`DeviceProps::dram_bytes_per_sm_cycle`]) from which
/// [`flat_for_one_round`] picks the flat kernel: between the H100's 12.8 (where it lost) and the
/// H200's 18.8 (where it won).
const FLAT_ONE_ROUND_MIN_BYTES_PER_SM_CYCLE: f64 = 15.0;

/// Whether the flat kernel takes a matrix whose rows, fewer than the resident warps, leave more
/// than a tenth of them idle (balance below [`SPLIT_MIN_BALANCE`]) and whose rows are long
/// (≥ [`FLAT_ONE_ROUND_MIN_ENTRIES`]) and not nearly dense (where split rows found no better
/// balance in segments long enough). Its ranges keep every warp busy to the entry. Measured on
/// an H200 (kernels/NOTES.md, step 5), flat against whole rows: 3584×20480 +4.2 / +2.0 points of
/// the ceiling at d = 0.7 / 0.5 (14 336 / 10 240 entries per row), 3584×18944 +4.2 / +1.2, but
/// −2.7 and −2.2 at d = 0.3 (~6 000 entries), where the flat kernel's per-chunk costs weigh more.
/// Only on GPUs of many DRAM bytes per SM cycle (≥ [`FLAT_ONE_ROUND_MIN_BYTES_PER_SM_CYCLE`],
/// unknown: no): the full runs of session 5 (BENCHMARKS.md, "Fifth round") measured the same two
/// shapes at d = 0.7 / 0.5 +2.2 to +4.9 points on the H200 (18.8 bytes per SM cycle, whole rows
/// at 71–73 % of the ceiling) but −3.9 to −5.1 on the H100 (12.8, whole rows at 84–86 %): idle
/// warps cost only where the SMs, not the memory, set the pace.
fn flat_for_one_round(
    rows: u32,
    warps: u64,
    mean_entries: f64,
    nearly_dense: bool,
    bytes_per_sm_cycle: Option<f64>,
) -> bool {
    u64::from(rows) < warps
        && balance(rows, warps) < SPLIT_MIN_BALANCE
        && mean_entries >= FLAT_ONE_ROUND_MIN_ENTRIES
        && !nearly_dense
        && flat_measured_for(bytes_per_sm_cycle)
}

/// Whether [`flat_for_one_round`] may pick the flat kernel on a GPU of `bytes_per_sm_cycle`
/// (unknown: no).
fn flat_measured_for(bytes_per_sm_cycle: Option<f64>) -> bool {
    bytes_per_sm_cycle.is_some_and(|b| b >= FLAT_ONE_ROUND_MIN_BYTES_PER_SM_CYCLE)
}

/// Mean 8-entry groups per row beyond which rows that are not nearly dense stay on warps even
/// where half-warps would spread them as evenly. Measured on an H200 (kernels/NOTES.md, step 5),
/// warps against half-warps where both spread the rows equally, d = 0.5 / 0.7: 8192×28672
/// (1 792 / 2 509 groups) +3.5 / +3.7 points of the ceiling, 49152×12288 (768 / 1 075) +2.4 / +4.4,
/// 32000×8192 (512 / 717) +1.9 / +0.6; 32000×4096 and 14336×4096 at d = 0.5 (256 groups) −4.4
/// and −3.2; 7168² (448 / 627) −1.1 / −1.4, the one loss above the threshold. 300, not 256:
/// rows of 4096 columns at d = 0.5 hold a few padding entries more than 2 048.
const HALF_WARP_TIE_MAX_GROUPS: f64 = 300.0;

/// Mean 8-entry groups per row up to which the MACKO kernel always gives each row a half-warp: a
/// warp then keeps two rows' loads in flight and shares the per-row costs (bounds, reduction,
/// store) between them, where a whole warp would leave most of its lanes without a group. Longer
/// rows get a half-warp only where that splits the rows more evenly over the resident teams
/// (see [`Kernels::macko_plan`]). 144, not 128: rows of 129–144 groups fill a warp's third
/// two-chunk batch (64 groups) a fifth, a half-warp's fifth (32 groups) two fifths; measured on
/// an H200 (kernels/NOTES.md, step 5), half-warps against warps: 27648×9216 and 36864×9216 at
/// d = 0.1 (141 groups) +8.7 and +5.6 points of the ceiling, 18944×3584 and 20480×3584 at d = 0.3
/// (134) +6.0 and +1.7, 9216² at d = 0.1 −1.5.
const HALF_WARP_MAX_GROUPS: f64 = 144.0;

/// Environment variable that forces the chunks per batch of the MACKO kernel: `long`
/// (`MACKO_CHUNKS`, 4), `short` (`MACKO_CHUNKS_SHORT`, 2) or `auto` (long only for nearly dense
/// matrices, [`PAD_MIN_FILL`]).
pub const ENV_CHUNKS: &str = "MACKO_CUDA_CHUNKS";

/// A knob read from the environment: `None` when unset, empty or `auto`, else what `parse` makes
/// of the lowercase value, or an error naming the variable and the values it takes.
fn env_knob<T>(name: &str, choices: &str, parse: impl Fn(&str) -> Option<T>) -> Result<Option<T>> {
    match std::env::var(name) {
        Err(_) => Ok(None),
        Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(None),
            other => parse(other).map(Some).ok_or_else(|| Error::Backend {
                backend: BackendKind::Cuda,
                message: format!("{name} must be auto, {choices}, not {v:?}"),
            }),
        },
    }
}

/// The batch `MACKO_CUDA_CHUNKS` asks for: `None` for auto, `Some(true)` for the short one.
fn short_chunks_from_env() -> Result<Option<bool>> {
    env_knob(ENV_CHUNKS, "short or long", |v| match v {
        "short" => Some(true),
        "long" => Some(false),
        _ => None,
    })
}

/// An on/off knob's value (lower case, trimmed): `on`/`1` or `off`/`0`, else `None` (malformed).
fn parse_on_off(v: &str) -> Option<bool> {
    match v {
        "on" | "1" => Some(true),
        "off" | "0" => Some(false),
        _ => None,
    }
}

/// How evenly `rows` rows spread over `teams` teams taking them round-robin: the mean rows per
/// team over the most any team gets (1 when every team gets the same number).
fn balance(rows: u32, teams: u64) -> f64 {
    if rows == 0 || teams == 0 {
        return 1.0;
    }
    let per_team = f64::from(rows) / teams as f64;
    per_team / per_team.ceil()
}

/// The lanes per row `MACKO_CUDA_LANES` asks for: `None` for auto.
fn lanes_from_env() -> Result<Option<u32>> {
    env_knob(ENV_LANES, "16 or 32", |v| match v {
        "16" => Some(16),
        "32" => Some(32),
        _ => None,
    })
}

/// The layout `MACKO_CUDA_XPAD` asks for: `None` for auto.
fn xpad_from_env() -> Result<Option<bool>> {
    env_knob(ENV_XPAD, "on or off", parse_on_off)
}

/// Environment variable that forces x staged for the MACKO kernel as binary16 (`macko_*_xh_*`:
/// the plain layout at half the shared memory, one conversion more per entry): `on` (wherever x
/// is staged plain, and for x too wide to stage as f32 where binary16 fits — but
/// `MACKO_CUDA_X=smem` asks for the f32 copy and fails first where that does not fit), `off`,
/// or `auto` (see [`half_x_by_default`]).
pub const ENV_XHALF: &str = "MACKO_CUDA_XHALF";

/// The staging `MACKO_CUDA_XHALF` asks for: `None` for auto.
fn xhalf_from_env() -> Result<Option<bool>> {
    env_knob(ENV_XHALF, "on or off", parse_on_off)
}

/// Environment variable that says whether a MACKO row kernel's grid holds every block that can be
/// resident where its rows (work items) are fewer than the warps those blocks hold: `on`, `off`
/// (at most one warp per item, the grid of steps 1–9), or `auto` (see [`spread_grid`]).
pub const ENV_SPREAD: &str = "MACKO_CUDA_SPREAD";

/// The grid `MACKO_CUDA_SPREAD` asks for: `None` for auto.
fn spread_from_env() -> Result<Option<bool>> {
    env_knob(ENV_SPREAD, "on or off", parse_on_off)
}

/// Whether a row kernel's grid of `grid` blocks (at most one warp per item) grows to the
/// `resident` blocks the GPU holds at once, on `sms` multiprocessors. By default where the grid
/// already fills every SM at least once but not all their slots: the hardware then hands the
/// blocks out in rounds over the SMs, so some SMs hold one block (16 warps of rows) more than
/// the others, and the most loaded SM sets the time. With every resident block launched, warps
/// numbered across blocks (`MACKO_INTERLEAVE`, kernels/macko.cu) take the items, so every SM
/// gets the same number of them, give or take one per block; the extra warps find no item after
/// their block has staged x. Measured on an H100 (kernels/NOTES.md, step 10), on against off
/// in time at d = 0.7 / 0.5 / 0.3 / 0.1: 5120×13824 (lean, 320 of 396 blocks) 1.01 / 1.03 /
/// 1.06 / 1.10×, 5120² 1.06 / 1.05 / 1.09 / 1.02×, 3584×20480 (224 of 264) 1.00 / 1.01 / 1.01 /
/// 1.03×, 3584×18944 1.00 / 1.00 / 1.01 / 1.02×; 4096 rows (256 of 264) 1.00–1.02×.
fn spread_grid(grid: u32, resident: u32, sms: u32) -> bool {
    grid >= sms && grid < resident
}

/// Environment variable that forces the block of the MACKO kernel with x staged: `512` (two
/// blocks per SM where the shared memory allows), `1024` (one block per SM, every warp of the SM
/// sharing one copy of x), or `auto` (1024 only where two 512-thread blocks' copies of x do not
/// fit an SM).
pub const ENV_BLOCK: &str = "MACKO_CUDA_BLOCK";

/// The block `MACKO_CUDA_BLOCK` asks for: `None` for auto.
fn block_from_env() -> Result<Option<u32>> {
    env_knob(ENV_BLOCK, "512 or 1024", |v| match v {
        "512" => Some(BLOCK),
        "1024" => Some(BIG_BLOCK),
        _ => None,
    })
}

/// Environment variable that controls splitting MACKO rows into segments shared out over the
/// warps: `off`, a number of segments per row (1 to [`MAX_SPLIT`]), or `auto` (split only where
/// whole rows spread unevenly over the resident warps, see [`split_segments`]).
pub const ENV_SPLIT: &str = "MACKO_CUDA_SPLIT";

/// Most segments per row the automatic choice considers (and `MACKO_CUDA_SPLIT` accepts).
pub(crate) const MAX_SPLIT: u32 = 8;

/// How `MACKO_CUDA_SPLIT` is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SplitPolicy {
    Off,
    Segments(u32),
}

/// The splitting `MACKO_CUDA_SPLIT` asks for: `None` for auto.
fn split_from_env() -> Result<Option<SplitPolicy>> {
    env_knob(ENV_SPLIT, "off or a segment count 1..=8", |v| match v {
        "off" | "0" => Some(SplitPolicy::Off),
        n => match n.parse::<u32>() {
            Ok(k @ 1..=MAX_SPLIT) => Some(SplitPolicy::Segments(k)),
            _ => None,
        },
    })
}

/// Environment variable for a *tail split*, an experiment: `F:K` keeps the rows below the
/// fraction F (0 to 1) of the rows whole and cuts every later row into K (2 to [`MAX_SPLIT`])
/// segments, where rows are not otherwise split (`MACKO_CUDA_SPLIT`, or the flat kernel, which
/// `MACKO_CUDA_FLAT=on` or the plan may choose, take precedence); `off` or `auto` (the same:
/// never by default).
/// Meant to shorten the last, partly filled round of rows; measured on an H200 (kernels/NOTES.md,
/// step 5) it lost to whole rows on warps almost everywhere (each warp of a sparse last round
/// streams faster than in a full one, so that round costs far less than a row-time, while the
/// partials and the combine launch cost 2–10 points), so nothing chooses it.
pub const ENV_TAIL: &str = "MACKO_CUDA_TAIL";

/// How `MACKO_CUDA_TAIL` is set.
#[derive(Debug, Clone, Copy, PartialEq)]
enum TailPolicy {
    Off,
    Forced { from: f64, segments: u32 },
}

/// The tail split `MACKO_CUDA_TAIL` asks for: `None` for auto.
fn tail_from_env() -> Result<Option<TailPolicy>> {
    let choices = format!("off or F:K (F in [0, 1], K in 2..={MAX_SPLIT})");
    env_knob(ENV_TAIL, &choices, parse_tail)
}

/// A `MACKO_CUDA_TAIL` value other than auto (lower case, trimmed), or `None` if malformed.
fn parse_tail(v: &str) -> Option<TailPolicy> {
    if v == "off" || v == "0" {
        return Some(TailPolicy::Off);
    }
    let (f, k) = v.split_once(':')?;
    let from = f.parse::<f64>().ok().filter(|f| (0.0..=1.0).contains(f))?;
    let segments = k
        .parse::<u32>()
        .ok()
        .filter(|k| (2..=MAX_SPLIT).contains(k))?;
    Some(TailPolicy::Forced { from, segments })
}

/// Environment variable that forces the lean row kernel (`macko_lean_*` of kernels/macko.cu):
/// `on` (wherever it can run: x staged in the plain layout in 512-thread blocks, and no other
/// knob forcing half-warps, long batches, pipelining, split rows, a tail split or the flat
/// kernel; elsewhere the plan stays as it was), `off`, or `auto` (on GPUs measured to gain,
/// [`lean_measured_for`], for rows not nearly dense that its warps spread more evenly, or as
/// evenly in few rounds where the regular plan cuts no rows: [`lean_rows`]).
pub const ENV_LEAN: &str = "MACKO_CUDA_LEAN";

/// The lean kernel as `MACKO_CUDA_LEAN` asks for it: `None` for auto.
fn lean_from_env() -> Result<Option<bool>> {
    env_knob(ENV_LEAN, "on or off", parse_on_off)
}

/// DRAM bytes per SM cycle ([`DeviceProps::dram_bytes_per_sm_cycle`]) under which `auto` may pick
/// the lean kernel: the H100 (12.8), where it was measured (kernels/NOTES.md, step 8), is under
/// it; the H200 (18.4), SM-bound rather than DRAM-bound and not yet measured with it, is not.
const LEAN_MAX_BYTES_PER_SM_CYCLE: f64 = 15.0;

/// Whether `auto` may pick the lean kernel on a GPU of `bytes_per_sm_cycle` (unknown: no).
fn lean_measured_for(bytes_per_sm_cycle: Option<f64>) -> bool {
    bytes_per_sm_cycle.is_some_and(|b| b < LEAN_MAX_BYTES_PER_SM_CYCLE)
}

/// The plan rules that depend on the GPU's DRAM bytes per SM cycle, in words, for `macko info`:
/// which of the lean kernel ([`lean_measured_for`]), the flat kernel for one partial round of
/// long rows ([`flat_for_one_round`]) and binary16 x wherever x is wide
/// ([`wide_half_x_measured_for`]) `auto` may pick on this GPU.
pub(crate) fn gpu_dependent_rules(bytes_per_sm_cycle: Option<f64>) -> String {
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    format!(
        "lean kernel {}, flat kernel for one round of long rows {}, binary16 x from {} columns {}",
        yes_no(lean_measured_for(bytes_per_sm_cycle)),
        yes_no(flat_measured_for(bytes_per_sm_cycle)),
        HALF_X_WIDE_MIN_COLS,
        yes_no(wide_half_x_measured_for(bytes_per_sm_cycle))
    )
}

/// Whether x staged plain goes to shared memory as binary16 by default: where the regular
/// kernel's 512-thread blocks fit the GPU more times with it (`half_blocks` resident) than they
/// do now (`now_blocks`: with the f32 copy, or with x read from global memory where the f32 copy
/// does not fit; `None`: not at all) — that is, from about 28 K columns on, where the f32 copy
/// leaves one 512-thread block per SM (or one 1024-thread block), up to where binary16 too fits
/// only one (about 56 K columns on an H100: wider, x stays in global memory, two blocks per SM,
/// as before; binary16 at one block per SM there is not measured). One conversion more per
/// entry buys the second block, and three lean blocks up to about 37 K columns. Measured on an
/// H100 (kernels/NOTES.md, step 9), `MACKO_CUDA_XHALF=on` against the f32 plans at
/// d = 0.5 / 0.3 / 0.1: 7168×28672 +9 / +9 / −2 points of the
/// ceiling (the f32 plan ran the flat kernel at 16 warps per SM at d ≥ 0.3), 12288×49152
/// +4 to +5, 9216×36864 +3 at d = 0.3 and 0.1; 3584×20480, where f32 already fits two
/// blocks, +1 to +2. Also, where the f32 copy is staged now on a GPU where this was measured
/// (`wide_measured`: [`wide_half_x_measured_for`]), wherever x has at least
/// [`HALF_X_WIDE_MIN_COLS`] columns and binary16 fits as many blocks as the f32 copy: each
/// block then copies half the bytes and its gathers take fewer shared-memory wavefronts
/// (step 10).
fn half_x_by_default(
    now_blocks: Option<u32>,
    half_blocks: u32,
    cols: u32,
    wide_measured: bool,
) -> bool {
    let now = now_blocks.unwrap_or(0);
    half_blocks > now || (wide_measured && cols >= HALF_X_WIDE_MIN_COLS && half_blocks >= now)
}

/// Narrowest x (columns) that [`half_x_by_default`] stages as binary16 on a GPU where that was
/// measured ([`wide_half_x_measured_for`]) even where it fits no more blocks than the f32 copy.
/// Measured on an H100 (kernels/NOTES.md, step 10), `MACKO_CUDA_XHALF=on` against the plans of
/// step 9 at d = 0.7 / 0.5 / 0.3 / 0.1, in time: 5120×13824 1.04 / 1.04 / 1.04 / 1.03×,
/// 3584×20480 1.01 / 1.01 / 1.02 / 1.03×, 4096×14336 1.01 / 1.02 / 1.01 / 1.03×, 12288²
/// 1.00 / 1.01 / 1.01 / 1.03×; from 11 008 columns down (4096×11008, 9216², 5120 columns and
/// narrower) within ±2 %, the spread of two runs of the same plan.
const HALF_X_WIDE_MIN_COLS: u32 = 12_288;

/// DRAM bytes per SM cycle under which [`half_x_by_default`] stages a wide x
/// (≥ [`HALF_X_WIDE_MIN_COLS`] columns) as binary16 for its own sake: the H100 (12.8), where
/// binary16 gained up to 4 % (ncu on 5120×13824: 9 % fewer shared-memory wavefronts, half the
/// short-scoreboard stalls, for 7 % more instructions) while DRAM set the pace; not the H200
/// (18.4), where the SMs' issue and shared-memory pipes co-limit (step 4), so the trade is not
/// known until measured there. The same bound as the lean rule's today, but its own constant:
/// each moves when its rule is measured on an H200.
const HALF_X_WIDE_MAX_BYTES_PER_SM_CYCLE: f64 = 15.0;

/// Whether [`half_x_by_default`] may stage a wide x as binary16 for its own sake on a GPU of
/// `bytes_per_sm_cycle` (unknown: no).
fn wide_half_x_measured_for(bytes_per_sm_cycle: Option<f64>) -> bool {
    bytes_per_sm_cycle.is_some_and(|b| b < HALF_X_WIDE_MAX_BYTES_PER_SM_CYCLE)
}

/// Slack in comparing two balances (see [`balance`]) that should count as equal.
const BALANCE_EPS: f64 = 1e-9;

/// Balance by which the lean kernel's warps must spread the rows more evenly than the regular
/// kernel's teams where those take more than [`LEAN_EVEN_MAX_ROUNDS`] rounds (see [`lean_rows`]).
const LEAN_MIN_GAIN: f64 = 0.05;

/// Rounds of the regular kernel's teams up to which the lean kernel takes rows it spreads as
/// evenly: measured up to 3 (12288², neutral); in more rounds the regular kernel's pipelining
/// (long rows) was not measured against it.
const LEAN_EVEN_MAX_ROUNDS: u64 = 3;

/// Whether whole rows go to the lean kernel, with `lean_warps` resident warps, rather than to the
/// regular one with `warps` (whose teams are half-warps, twice as many, for `half_warps`): where
/// the lean kernel's 40 registers give more warps (48 per SM against 32 where x is small enough)
/// and those spread the rows more evenly than the regular teams (by [`LEAN_MIN_GAIN`]), or as
/// evenly where the teams take at most [`LEAN_EVEN_MAX_ROUNDS`] rounds. Rows on half-warps (short
/// ones) need more than one round of lean warps besides. Measured on an H100
/// (kernels/NOTES.md, step 8; `MACKO_CUDA_LEAN=on` against the default plans, 17 shapes):
/// - more even: 5120² and 5120×13824 +2 to +10 % at d ≥ 0.3 (0.61 → 0.81: 1.21 rounds of 4224
///   warps become 0.81 of 6336); short rows on half-warps 18944×3584 +6 / +8 % at d = 0.3 / 0.1
///   (0.75 → 1.00), 28672×8192 +6 % and 9216² +9 % at d = 0.1;
/// - as even: 9216² +4 to +6 % at d ≥ 0.3, 20480×3584 +4 / +8 % at d = 0.3 / 0.1 (half-warps),
///   11008×4096 and 12288² −2 to +4 %;
/// - less even: 7168² −7 to −11 % (0.85 → 0.57), 14336×4096 and 13824×5120 −4 to +3 %;
/// - short rows in one round: 4096² and 5120² −2 % at d = 0.1 (4096×11008 +2 %).
///
/// Where the regular plan cuts rows (`regular_cuts`: into segments, or flat ranges), "as
/// evenly" is not enough: the lean kernel, which cannot cut them, would lose the better balance
/// of the cut rows. Measured on an H100 (step 9), x as binary16: 9216×36864 at d = 0.5 / 0.3
/// (whole rows 0.73 either way, cut rows 0.93) lean 82.7 / 82.1 % of the ceiling against the
/// flat kernel's 87.9 / 85.4 %. "More evenly" still compares with whole rows, cut or not: the
/// measured case is 5120×13824 (step 8), where the lean kernel's 0.81 beat the flat kernel that
/// the regular plan would run. (`regular_cuts` counts the flat kernel as the plan chose it; the
/// upload may still fall back to whole rows where a row holds under 9 entries.)
fn lean_rows(rows: u32, warps: u64, lean_warps: u64, half_warps: bool, regular_cuts: bool) -> bool {
    let teams = if half_warps { 2 * warps } else { warps };
    lean_warps > warps && (!half_warps || u64::from(rows) > lean_warps) && {
        let (lean, regular) = (balance(rows, lean_warps), balance(rows, teams));
        lean >= regular + LEAN_MIN_GAIN
            || (!regular_cuts
                && lean + BALANCE_EPS >= regular
                && u64::from(rows) <= LEAN_EVEN_MAX_ROUNDS * teams)
    }
}

/// Environment variable that forces software pipelining of the MACKO kernel's two-chunk warp
/// batches: `on`, `off`, or `auto` (on for long items in more than one round, or shorter ones in
/// many rounds, see [`pipelined_by_default`]).
pub const ENV_PIPE: &str = "MACKO_CUDA_PIPE";

/// The pipelining `MACKO_CUDA_PIPE` asks for: `None` for auto.
fn pipe_from_env() -> Result<Option<bool>> {
    env_knob(ENV_PIPE, "on or off", parse_on_off)
}

/// Environment variable: `off` uploads MACKO matrices in the format's own layout, `on` (the
/// default, [`DEFAULT_ALIGNED_ROWS`]) row-aligned where the row kernel runs on whole rows
/// (macko_format::aligned: no row starts inside a group, so no batch masks entries).
pub const ENV_ALIGNED_ROWS: &str = "MACKO_CUDA_ALIGNED_ROWS";

/// Default of [`ENV_ALIGNED_ROWS`]: kernels/NOTES.md, step 7.
pub(crate) const DEFAULT_ALIGNED_ROWS: bool = true;

/// Whether `MACKO_CUDA_ALIGNED_ROWS` (or its default) asks for row-aligned uploads.
pub(crate) fn aligned_rows_from_env() -> Result<bool> {
    Ok(env_knob(ENV_ALIGNED_ROWS, "on or off", parse_on_off)?.unwrap_or(DEFAULT_ALIGNED_ROWS))
}

/// Environment variable that forces the flat MACKO kernel (one range of entries per warp, see
/// `flat.rs`): `on` (wherever it can run: x staged in 512-thread blocks, rows of at least 9
/// entries), `off`, or `auto` (see [`Kernels::macko_plan`]).
pub const ENV_FLAT: &str = "MACKO_CUDA_FLAT";

/// The flat kernel `MACKO_CUDA_FLAT` asks for: `None` for auto.
fn flat_from_env() -> Result<Option<bool>> {
    env_knob(ENV_FLAT, "on or off", parse_on_off)
}

/// Environment variable: how far from the even cut (a fraction of the mean range) a flat range
/// may start at a row's start instead of inside a row (default [`FLAT_SNAP`]).
pub const ENV_FLAT_SNAP: &str = "MACKO_CUDA_FLAT_SNAP";

/// Default of [`ENV_FLAT_SNAP`]: ranges stay within ±1/16 of equal, and rows shorter than an
/// eighth of a range are never cut (no combine launch for them).
pub(crate) const FLAT_SNAP: f64 = 0.0625;

/// The snap `MACKO_CUDA_FLAT_SNAP` asks for, else [`FLAT_SNAP`].
fn flat_snap_from_env() -> Result<f64> {
    Ok(env_knob(ENV_FLAT_SNAP, "a fraction in [0, 0.5]", |v| {
        v.parse::<f64>().ok().filter(|f| (0.0..=0.5).contains(f))
    })?
    .unwrap_or(FLAT_SNAP))
}

/// Mean entries per work item from which a warp's two-chunk batches are pipelined (measured on
/// an H200, kernels/NOTES.md: +2 to +4.5 points of the ceiling for items of 2 458 to 8 601
/// entries with several items per warp; −2 to −4 points for items of 1 229 to 2 048 entries in
/// few rounds or a single round of rows, where the extra batch in flight delays the staging of x
/// and the next item's bounds more than it hides; in ≥ 3 rounds, items from 1 500 entries gain:
/// [`PIPE_MIN_ENTRIES_MANY_ROUNDS`]).
const PIPE_MIN_ENTRIES: f64 = 2400.0;

/// Mean entries per work item from which batches are pipelined where items take at least
/// [`PIPE_MANY_ROUNDS`] rounds of the warps. Measured on an H200 (kernels/NOTES.md, step 5), with
/// pipelining against without: 28672×7168, 21504×7168 and 13824×5120 at d = 0.3 (1 536 to 2 150
/// entries, 3.3 to 6.8 rounds) +2.1 to +2.3 points, 36864×12288 and 49152×12288 at d = 0.1 (1 510
/// entries) +0.9 to +1.1; 12288² at d = 0.1 (2.9 rounds) −1.1, 11008×4096 at d = 0.3 −2.5.
const PIPE_MIN_ENTRIES_MANY_ROUNDS: f64 = 1500.0;

/// Rounds of items per warp from which [`PIPE_MIN_ENTRIES_MANY_ROUNDS`] applies.
const PIPE_MANY_ROUNDS: u64 = 3;

/// Balance (see [`balance`]) from which whole rows are handed out as they are.
const SPLIT_MIN_BALANCE: f64 = 0.9;

/// Shortest segment worth its own work item, in entries. Measured on an H200 (kernels/NOTES.md):
/// segments of 4 600 to 9 000 entries gained up to 15 points of the ceiling, segments of 2 000
/// to 3 100 entries lost 5 to 11 points on matrices whose whole rows spread at least 0.73
/// evenly (each segment's last batch is partly empty, and that waste outweighed the balance).
const MIN_SPLIT_ENTRIES: f64 = 4096.0;

/// Shortest segment where whole rows spread very unevenly (balance below
/// [`POOR_BALANCE`]): there even 2 300-entry segments gained 10 points (5120×13824 at
/// d = 0.5: 1.2 rounds of rows). Two full batches of a warp (2 × 32 lanes × 2 chunks × 8).
const MIN_SPLIT_ENTRIES_POOR: f64 = 2048.0;

/// Balance of whole rows under which [`MIN_SPLIT_ENTRIES_POOR`] applies.
const POOR_BALANCE: f64 = 0.65;

/// Rows are cut every `segment` entries; rows up to this much longer than the mean still get
/// `k` segments, not `k` and a sliver.
const SPLIT_SLACK: f64 = 1.05;

/// Segments per row (k ≥ 2) and their length in entries (a multiple of 8) for `rows` rows of
/// `mean_entries` stored entries on `teams` resident warps, or `None` when whole rows already
/// spread evenly (balance ≥ [`SPLIT_MIN_BALANCE`]) or no split of segments of at least
/// [`MIN_SPLIT_ENTRIES`] ([`MIN_SPLIT_ENTRIES_POOR`] where whole rows spread very unevenly)
/// improves the balance by 0.05. A warp's last round of rows decides the
/// product's time: 5120 rows on 4224 warps leave the second round 21 % full, while the same rows
/// in 3 segments each take 3.6 rounds, the last 64 % full.
fn split_segments(rows: u32, mean_entries: f64, teams: u64) -> Option<(u32, u32)> {
    let whole = balance(rows, teams);
    if whole >= SPLIT_MIN_BALANCE || rows == 0 {
        return None;
    }
    let min_entries = if whole < POOR_BALANCE {
        MIN_SPLIT_ENTRIES_POOR
    } else {
        MIN_SPLIT_ENTRIES
    };
    let mut best: Option<(u32, f64)> = None;
    for k in 2..=MAX_SPLIT {
        if mean_entries / f64::from(k) < min_entries {
            break;
        }
        let b = balance(rows.saturating_mul(k), teams);
        if b >= SPLIT_MIN_BALANCE {
            best = Some((k, b));
            break;
        }
        if best.is_none_or(|(_, bb)| b > bb) {
            best = Some((k, b));
        }
    }
    let (k, b) = best?;
    (b >= whole + 0.05).then(|| (k, segment_entries(mean_entries, k)))
}

/// Entries per segment for `k` segments of a row of `mean_entries`: a multiple of 8.
fn segment_entries(mean_entries: f64, k: u32) -> u32 {
    let raw = (mean_entries * SPLIT_SLACK / f64::from(k)).ceil().max(8.0);
    let raw = if raw >= f64::from(u32::MAX - 8) {
        u32::MAX - 8
    } else {
        raw as u32
    };
    raw.div_ceil(8) * 8
}

/// Where the sparse kernels read x from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum XPolicy {
    /// Shared memory when it fits, else global.
    Auto,
    /// Always shared memory.
    Smem,
    /// Always global memory.
    Global,
}

impl XPolicy {
    /// The policy `MACKO_CUDA_X` asks for.
    pub fn from_env() -> Result<Self> {
        match std::env::var(ENV_X) {
            Err(_) => Ok(XPolicy::Auto),
            Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
                "" | "auto" => Ok(XPolicy::Auto),
                "smem" | "shared" => Ok(XPolicy::Smem),
                "global" => Ok(XPolicy::Global),
                _ => Err(Error::Backend {
                    backend: BackendKind::Cuda,
                    message: format!("{ENV_X} must be auto, smem or global, not {v:?}"),
                }),
            },
        }
    }
}

/// How one matrix is launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Plan {
    /// Blocks.
    pub grid: u32,
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
    /// Threads per block: [`BLOCK`], or [`BIG_BLOCK`] (MACKO with x staged only).
    pub block: u32,
    /// MACKO only: rows cut into segments of this many entries (see `split.rs`), else whole.
    pub split_entries: Option<u32>,
    /// MACKO only, with `split_entries`: the rows below this one stay whole (a tail split, see
    /// [`ENV_TAIL`]); 0 cuts every row.
    pub split_from_row: u32,
    /// MACKO only: two-chunk warp batches software-pipelined.
    pub pipelined: bool,
    /// MACKO only: the flat kernel (one range of entries per warp), when the matrix allows it.
    pub flat: bool,
    /// MACKO only: uploaded row-aligned (macko_format::aligned), so the row kernel masks
    /// nothing (flags bit 4); set at upload, only for the row kernel on whole rows.
    pub aligned_rows: bool,
    /// MACKO only: the lean row kernel (`macko_lean_*`, see [`lean_rows`]): whole rows on warps,
    /// x staged plain, short batches, not pipelined.
    pub lean: bool,
}

impl Plan {
    /// Warps of the grid. Within `macko_plan`'s rules, at most one per item; the plan it returns
    /// may launch more (every resident block, [`spread_grid`]), the extra warps finding no item.
    pub fn warps(&self) -> u64 {
        u64::from(self.grid) * u64::from(self.block / 32)
    }
    /// Whether x is staged in shared memory.
    pub fn x_in_smem(&self) -> bool {
        self.smem_bytes > 0
    }
    fn config(&self) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (self.grid, 1, 1),
            block_dim: (self.block, 1, 1),
            shared_mem_bytes: self.smem_bytes,
        }
    }
}

/// Dynamic shared memory that staging `cols` columns of x takes (see `macko_stage_x`: f32
/// slots for the columns and the slack, one padding word after every 32).
pub(crate) fn x_smem_bytes(cols: u32) -> u64 {
    let last = u64::from(cols) + X_EXTRA_SLOTS - 1;
    4 * (last + (last >> 5) + 1)
}

/// Dynamic shared memory that staging `cols` columns of x as binary16 takes (see
/// `macko_stage_x_half`: the columns and the slack, rounded up to 16 bytes).
pub(crate) fn x_smem_half_bytes(cols: u32) -> u64 {
    (2 * (u64::from(cols) + X_EXTRA_SLOTS)).div_ceil(16) * 16
}

/// A kernel compiled for both output precisions.
pub(crate) struct ByOutput {
    f16: CudaFunction,
    f32: CudaFunction,
}

impl ByOutput {
    fn pick(&self, p: Precision) -> &CudaFunction {
        match p {
            Precision::F16 => &self.f16,
            Precision::F32 => &self.f32,
        }
    }
}

/// Every kernel of the backend, loaded into its context.
pub(crate) struct Kernels {
    macko_xs: ByOutput,
    macko_xg: ByOutput,
    /// MACKO with x staged in the plain layout.
    macko_xu: ByOutput,
    /// The same two in 1024-thread blocks.
    macko_xs_big: ByOutput,
    macko_xu_big: ByOutput,
    /// The second launch of a split matrix's product: partial sums into y.
    macko_combine: ByOutput,
    /// The flat kernel, x staged padded or plain, and the second launch for the rows it cuts.
    macko_flat_xs: ByOutput,
    macko_flat_xu: ByOutput,
    macko_combine_rows: ByOutput,
    /// The lean row kernel (`macko_lean_*`: whole rows on warps, x plain, 40 registers, so 48
    /// warps per SM; see [`lean_rows`]).
    macko_lean: ByOutput,
    /// The regular, flat and lean kernels with x staged as binary16 (512-thread blocks).
    macko_xh: ByOutput,
    macko_flat_xh: ByOutput,
    macko_lean_xh: ByOutput,
    csr_xs: ByOutput,
    csr_xg: ByOutput,
    dense_aligned: ByOutput,
    dense_any: ByOutput,
    stream_read: CudaFunction,
    spin_wait: CudaFunction,
    ctx: Arc<CudaContext>,
    sms: u32,
    /// [`DeviceProps::dram_bytes_per_sm_cycle`], for the plan rules that depend on it.
    dram_bytes_per_sm_cycle: Option<f64>,
    /// Dynamic shared memory a staging kernel may use per block.
    smem_limit: u32,
    x_policy: XPolicy,
    /// `MACKO_CUDA_XPAD`: `None` chooses per matrix.
    xpad: Option<bool>,
    /// `MACKO_CUDA_LANES`: `None` chooses per matrix.
    lanes: Option<u32>,
    /// `MACKO_CUDA_CHUNKS`: `None` chooses per matrix.
    short_chunks: Option<bool>,
    /// `MACKO_CUDA_BLOCK`: `None` chooses per matrix.
    block: Option<u32>,
    /// `MACKO_CUDA_SPLIT`: `None` chooses per matrix.
    split: Option<SplitPolicy>,
    /// `MACKO_CUDA_PIPE`: `None` chooses per matrix.
    pipe: Option<bool>,
    /// `MACKO_CUDA_FLAT`: `None` chooses per matrix.
    flat: Option<bool>,
    /// `MACKO_CUDA_FLAT_SNAP`.
    flat_snap: f64,
    /// `MACKO_CUDA_TAIL`: `None` chooses per matrix.
    tail: Option<TailPolicy>,
    /// `MACKO_CUDA_LEAN`: `None` chooses per matrix.
    lean: Option<bool>,
    /// `MACKO_CUDA_XHALF`: `None` chooses per matrix.
    xhalf: Option<bool>,
    /// `MACKO_CUDA_SPREAD`: `None` chooses per matrix.
    spread: Option<bool>,
}

/// Loads one kernel file's CUBIN (compiled once per process) and returns its functions in the
/// order of `kernel.entries`.
fn load_file(
    ctx: &Arc<CudaContext>,
    kernel: &KernelSource,
    arch: &str,
    defines: &[String],
) -> Result<Vec<CudaFunction>> {
    let cubin = nvrtc::cubin_cached(kernel, arch, defines)?;
    let module = ctx
        .load_module(Ptx::from_binary(cubin.as_ref().clone()))
        .map_err(|e| cuda_error(&format!("loading kernels/{} ({arch})", kernel.file), e))?;
    kernel
        .entries
        .iter()
        .map(|name| {
            module
                .load_function(name)
                .map_err(|e| cuda_error(&format!("finding kernel {name}"), e))
        })
        .collect()
}

/// Splits the four entries `{x}_f16, {x}_f32, {y}_f16, {y}_f32` into two pairs.
fn two_pairs(mut f: Vec<CudaFunction>, file: &str) -> Result<(ByOutput, ByOutput)> {
    if f.len() != 4 {
        return Err(internal(&format!("kernels/{file} should have 4 entries")));
    }
    let (b32, b16, a32, a16) = (f.remove(3), f.remove(2), f.remove(1), f.remove(0));
    Ok((
        ByOutput { f16: a16, f32: a32 },
        ByOutput { f16: b16, f32: b32 },
    ))
}

/// Shared memory a block may use without asking (every CUDA GPU since Kepler).
const DEFAULT_SMEM: u32 = 48 << 10;

/// Lets a kernel that stages x use all the dynamic shared memory a block may opt in to (above
/// 48 KiB a kernel must ask), minus what it declares statically. Returns the limit in force for
/// both output variants: the opt-in one, or 48 KiB if the driver refused (x then goes to global
/// memory for wider matrices instead of the launch failing).
fn allow_large_smem(k: &ByOutput, optin: u32) -> Result<u32> {
    let mut limit = optin;
    for f in [&k.f16, &k.f32] {
        let fixed = f
            .shared_size_bytes()
            .map_err(|e| cuda_error("reading a kernel's static shared memory", e))?;
        let dynamic = optin.saturating_sub(u32::try_from(fixed).unwrap_or(0));
        let raised = f.set_attribute(
            CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            i32::try_from(dynamic).unwrap_or(i32::MAX),
        );
        limit = limit.min(if raised.is_ok() {
            dynamic
        } else {
            DEFAULT_SMEM
        });
    }
    Ok(limit)
}

impl Kernels {
    /// Compiles (once per process) and loads every kernel for the GPU of `ctx`.
    pub fn load(ctx: &Arc<CudaContext>, props: &DeviceProps, x_policy: XPolicy) -> Result<Self> {
        let arch = props.arch();
        let defines = nvrtc::env_defines()?;
        let macko = load_file(ctx, &nvrtc::MACKO, &arch, &defines)?;
        // Entries in the order of nvrtc::MACKO (f16 then f32 of each).
        let Ok(
            [xs16, xs32, xg16, xg32, xu16, xu32, xsb16, xsb32, xub16, xub32, c16, c32, fs16, fs32, fu16, fu32, cr16, cr32, l16, l32, xh16, xh32, fh16, fh32, lh16, lh32],
        ) = <[CudaFunction; 26]>::try_from(macko)
        else {
            return Err(internal("kernels/macko.cu should have 26 entries"));
        };
        let pair = |f16, f32| ByOutput { f16, f32 };
        let (macko_xs, macko_xg, macko_xu) = (pair(xs16, xs32), pair(xg16, xg32), pair(xu16, xu32));
        let (macko_xs_big, macko_xu_big) = (pair(xsb16, xsb32), pair(xub16, xub32));
        let macko_combine = pair(c16, c32);
        let (macko_flat_xs, macko_flat_xu) = (pair(fs16, fs32), pair(fu16, fu32));
        let macko_combine_rows = pair(cr16, cr32);
        let macko_lean = pair(l16, l32);
        let (macko_xh, macko_flat_xh) = (pair(xh16, xh32), pair(fh16, fh32));
        let macko_lean_xh = pair(lh16, lh32);
        let (csr_xs, csr_xg) = two_pairs(
            load_file(ctx, &nvrtc::CSR, &arch, &defines)?,
            nvrtc::CSR.file,
        )?;
        let (dense_aligned, dense_any) = two_pairs(
            load_file(ctx, &nvrtc::DENSE, &arch, &defines)?,
            nvrtc::DENSE.file,
        )?;
        let mut timing = load_file(ctx, &nvrtc::STREAM, &arch, &defines)?;
        let (spin_wait, stream_read) = match (timing.pop(), timing.pop()) {
            (Some(spin), Some(read)) => (spin, read),
            _ => return Err(internal("kernels/stream.cu should have 2 entries")),
        };
        let smem_limit = allow_large_smem(&macko_xs, props.smem_per_block_optin)?
            .min(allow_large_smem(&macko_xu, props.smem_per_block_optin)?)
            .min(allow_large_smem(&macko_xs_big, props.smem_per_block_optin)?)
            .min(allow_large_smem(&macko_xu_big, props.smem_per_block_optin)?)
            .min(allow_large_smem(
                &macko_flat_xs,
                props.smem_per_block_optin,
            )?)
            .min(allow_large_smem(
                &macko_flat_xu,
                props.smem_per_block_optin,
            )?)
            .min(allow_large_smem(&macko_lean, props.smem_per_block_optin)?)
            .min(allow_large_smem(&macko_xh, props.smem_per_block_optin)?)
            .min(allow_large_smem(
                &macko_flat_xh,
                props.smem_per_block_optin,
            )?)
            .min(allow_large_smem(
                &macko_lean_xh,
                props.smem_per_block_optin,
            )?)
            .min(allow_large_smem(&csr_xs, props.smem_per_block_optin)?);
        Ok(Self {
            macko_xs,
            macko_xg,
            macko_xu,
            macko_xs_big,
            macko_xu_big,
            macko_combine,
            macko_flat_xs,
            macko_flat_xu,
            macko_combine_rows,
            macko_lean,
            macko_xh,
            macko_flat_xh,
            macko_lean_xh,
            csr_xs,
            csr_xg,
            dense_aligned,
            dense_any,
            stream_read,
            spin_wait,
            ctx: ctx.clone(),
            sms: props.sms,
            dram_bytes_per_sm_cycle: props.dram_bytes_per_sm_cycle,
            smem_limit,
            x_policy,
            xpad: xpad_from_env()?,
            lanes: lanes_from_env()?,
            short_chunks: short_chunks_from_env()?,
            block: block_from_env()?,
            split: split_from_env()?,
            pipe: pipe_from_env()?,
            flat: flat_from_env()?,
            flat_snap: flat_snap_from_env()?,
            tail: tail_from_env()?,
            lean: lean_from_env()?,
            xhalf: xhalf_from_env()?,
            spread: spread_from_env()?,
        })
    }

    /// Persistent grid for `f` in blocks of `block` threads with `smem` bytes each: resident
    /// blocks, at most one warp per row (work item). `None`: the kernel cannot run with that much
    /// shared memory.
    fn grid(&self, f: &CudaFunction, block: u32, smem: u32, rows: u32) -> Result<Option<u32>> {
        // The occupancy query goes straight to the driver: make this thread's context current.
        self.ctx
            .bind_to_thread()
            .map_err(|e| cuda_error("binding the CUDA context", e))?;
        let per_sm = f
            .occupancy_max_active_blocks_per_multiprocessor(block, smem as usize, None)
            .map_err(|e| cuda_error("computing occupancy", e))?;
        if per_sm == 0 {
            return Ok(None);
        }
        let resident = per_sm.saturating_mul(self.sms);
        Ok(Some(resident.min(rows.div_ceil(block / 32)).max(1)))
    }

    /// Plan of a sparse kernel pair (x staged or gathered) for a `rows × cols` matrix.
    fn sparse_plan(&self, xs: &ByOutput, xg: &ByOutput, rows: u32, cols: u32) -> Result<Plan> {
        let smem = x_smem_bytes(cols);
        if self.x_policy != XPolicy::Global && smem <= u64::from(self.smem_limit) {
            let smem = u32::try_from(smem).map_err(|_| internal("smem size"))?;
            if let Some(grid) = self.grid(&xs.f32, BLOCK, smem, rows)? {
                return Ok(Plan {
                    grid,
                    smem_bytes: smem,
                    padded_x: true,
                    block: BLOCK,
                    ..Plan::default()
                });
            }
        }
        if self.x_policy == XPolicy::Smem {
            return Err(Error::TooLarge {
                backend: BackendKind::Cuda,
                what: format!("x of {cols} columns staged in shared memory ({ENV_X}=smem)"),
                needed: smem,
                limit: u64::from(self.smem_limit),
            });
        }
        let grid = self
            .grid(&xg.f32, BLOCK, 0, rows)?
            .ok_or_else(|| internal("a kernel without shared memory cannot be resident"))?;
        Ok(Plan {
            grid,
            block: BLOCK,
            ..Plan::default()
        })
    }

    /// Launch plan of a MACKO matrix of `entries` stored entries: x padded in shared memory
    /// only when rows are nearly dense (or as `MACKO_CUDA_XPAD` says); x plain staged as
    /// binary16 where that fits more 512-thread blocks, or x is wide on a DRAM-bound GPU
    /// ([`half_x_by_default`]), else 1024-thread
    /// blocks where two 512-thread blocks' f32 x do not fit an SM; a half-warp per row for short
    /// rows; long rows cut into segments where whole rows would spread unevenly over the warps;
    /// then the lean kernel on whole rows in place of any of those where it spreads the rows
    /// better ([`lean_rows`]); last, for the launch only, the grid grown to every resident block
    /// where the rows are fewer ([`spread_grid`]).
    pub fn macko_plan(&self, rows: u32, cols: u32, entries: u64) -> Result<Plan> {
        let mut plan = self.sparse_plan(&self.macko_xs, &self.macko_xg, rows, cols)?;
        let fill = if rows == 0 || cols == 0 {
            0.0
        } else {
            entries as f64 / (f64::from(rows) * f64::from(cols))
        };
        let nearly_dense = fill >= PAD_MIN_FILL;
        plan.padded_x = self.xpad.unwrap_or(nearly_dense);
        if !plan.padded_x && self.x_policy != XPolicy::Global && self.xhalf != Some(false) {
            self.stage_x_half(&mut plan, rows, cols)?;
        }
        plan.short_chunks = self.short_chunks.unwrap_or(!nearly_dense);
        let mean_entries = if rows == 0 {
            0.0
        } else {
            entries as f64 / f64::from(rows)
        };
        let short_rows = short_rows(mean_entries);
        // Whether and how to split, for a plan's resident warps.
        let split_for = |warps: u64| match self.split {
            Some(SplitPolicy::Off) => None,
            Some(SplitPolicy::Segments(k)) => Some((k, segment_entries(mean_entries, k))),
            None if self.lanes == Some(16) || short_rows => None,
            None => split_segments(rows, mean_entries, warps),
        };
        if plan.x_in_smem() {
            self.choose_block(&mut plan, rows, &split_for)?;
        }
        // Teams (warps or half-warps) resident at once.
        let warps = plan.warps();
        let split = split_for(warps);
        // An experiment only (MACKO_CUDA_TAIL=F:K): the rows from F·rows on cut into K segments
        // (nothing when that is no row).
        let tail = match (split, self.tail) {
            (Some(_), _) | (None, Some(TailPolicy::Off)) | (None, None) => None,
            (None, Some(TailPolicy::Forced { from, segments })) => {
                let from_row = (f64::from(rows) * from).floor() as u32;
                (from_row < rows).then_some((from_row, segments))
            }
        };
        plan.split_entries = split
            .map(|(_, seg)| seg)
            .or_else(|| tail.map(|(_, k)| segment_entries(mean_entries, k)));
        plan.split_from_row = tail.map_or(0, |(from, _)| from);
        // The kernel runs half-warps only with cols >= 1 (it checks too).
        plan.half_warp = cols > 0
            && match self.lanes {
                Some(l) => l == 16,
                None => {
                    short_rows
                        || (split.is_none()
                            && tail.is_none()
                            && half_warps_on_a_tie(rows, warps, mean_entries, nearly_dense))
                }
            };
        // Work items and their mean length, as the upload will cut them.
        let items = match (split, tail) {
            (Some((k, _)), _) => u64::from(rows) * u64::from(k),
            (None, Some((from, k))) => u64::from(from) + u64::from(rows - from) * u64::from(k),
            (None, None) => u64::from(rows),
        };
        let item_entries = if items == 0 {
            0.0
        } else {
            mean_entries * f64::from(rows) / items as f64
        };
        plan.pipelined = plan.short_chunks
            && !plan.half_warp
            && self
                .pipe
                .unwrap_or(pipelined_by_default(item_entries, items, warps));
        // The flat kernel runs 512-thread blocks with x staged (the upload checks the rows): by
        // default where whole rows would spread unevenly enough to be split. Measured on an H200
        // (kernels/NOTES.md, step 4): 5120×13824 gained 4–9 points of the ceiling at d = 0.3–1
        // over split rows, while matrices of short or evenly spread rows lost 1–25. And where
        // fewer long rows than warps leave warps idle (flat_for_one_round).
        let flat_ok = plan.x_in_smem() && plan.block == BLOCK && rows > 0;
        plan.flat = flat_ok
            && match self.flat {
                Some(f) => f,
                None => {
                    split.is_some()
                        || (tail.is_none()
                            && u64::from(rows) <= warps
                            && flat_for_one_round(
                                rows,
                                self.resident_warps(&plan)?,
                                mean_entries,
                                nearly_dense,
                                self.dram_bytes_per_sm_cycle,
                            ))
                }
            };
        if self.lean_allowed(&plan, nearly_dense, tail.is_some()) {
            self.choose_lean(&mut plan, rows)?;
        }
        // Last, and for the launch only. A flat plan's grid is replaced at upload by its ranges
        // (flat_plan), or stays this one where the upload falls back to rows.
        plan.grid = self.spread(&plan, plan.grid)?;
        Ok(plan)
    }

    /// The grid of a row-kernel plan's `grid` blocks (at most one warp per item), grown to every
    /// resident block where `MACKO_CUDA_SPREAD` or [`spread_grid`] says so. Only the launch
    /// changes: the plan's rules above count the warps of the grid before this.
    fn spread(&self, plan: &Plan, grid: u32) -> Result<u32> {
        let Some(resident) = self.resident_blocks(plan)? else {
            return Ok(grid);
        };
        let spread = match self.spread {
            Some(on) => on && grid < resident,
            None => spread_grid(grid, resident, self.sms),
        };
        Ok(if spread { resident } else { grid })
    }

    /// Turns a plan with x staged plain as f32 (or in global memory, x too wide to stage as f32)
    /// into one with x staged as binary16 in 512-thread blocks, where that fits and
    /// `MACKO_CUDA_XHALF` asks for it — by default ([`half_x_by_default`]) where the regular
    /// kernel's 512-thread blocks then fit the GPU more times than they do now, or as many times
    /// with a wide x on a GPU where that was measured to gain, and `MACKO_CUDA_BLOCK` does not ask
    /// for 1024-thread blocks; leaves it as it is otherwise.
    fn stage_x_half(&self, plan: &mut Plan, rows: u32, cols: u32) -> Result<()> {
        let smem = x_smem_half_bytes(cols);
        if smem > u64::from(self.smem_limit) {
            return Ok(());
        }
        let smem = u32::try_from(smem).map_err(|_| internal("smem size"))?;
        let Some(half_blocks) = self.grid(&self.macko_xh.f32, BLOCK, smem, u32::MAX)? else {
            return Ok(());
        };
        // The regular kernel's 512-thread blocks resident now: x staged as f32, or (too wide for
        // that) read from global memory.
        let (now, now_smem) = if plan.x_in_smem() {
            (&self.macko_xu, plan.smem_bytes)
        } else {
            (&self.macko_xg, 0)
        };
        let now_blocks = self.grid(&now.f32, BLOCK, now_smem, u32::MAX)?;
        // MACKO_CUDA_BLOCK=1024 asks for the f32 copy's 1024-thread blocks (binary16 has none).
        // The wide rule was measured against f32 x staged, not against x in global memory.
        let wide_measured =
            plan.x_in_smem() && wide_half_x_measured_for(self.dram_bytes_per_sm_cycle);
        let auto = self.block != Some(BIG_BLOCK)
            && half_x_by_default(now_blocks, half_blocks, cols, wide_measured);
        if self.xhalf != Some(true) && !auto {
            return Ok(());
        }
        if let Some(grid) = self.grid(&self.macko_xh.f32, BLOCK, smem, rows)? {
            *plan = Plan {
                grid,
                smem_bytes: smem,
                half_x: true,
                block: BLOCK,
                ..Plan::default()
            };
        }
        Ok(())
    }

    /// Whether a MACKO plan may go to the lean kernel: x staged plain in 512-thread blocks, no
    /// tail split, no knob forcing what the lean kernel does not run (half-warps, long batches,
    /// pipelining, splits, the flat kernel); for `auto` also rows not nearly dense (long
    /// batches) on a GPU where it was measured to gain ([`lean_measured_for`]).
    fn lean_allowed(&self, plan: &Plan, nearly_dense: bool, tail: bool) -> bool {
        let forced_elsewhere = self.lanes == Some(16)
            || self.short_chunks == Some(false)
            || self.pipe == Some(true)
            || matches!(self.split, Some(SplitPolicy::Segments(_)))
            || self.flat == Some(true)
            || tail;
        let runnable = plan.x_in_smem() && !plan.padded_x && plan.block == BLOCK;
        match self.lean {
            Some(false) => false,
            Some(true) => runnable && !forced_elsewhere,
            None => {
                runnable
                    && !forced_elsewhere
                    && !nearly_dense
                    && lean_measured_for(self.dram_bytes_per_sm_cycle)
            }
        }
    }

    /// Turns a plan into the lean kernel's (whole rows on warps, short batches, not pipelined)
    /// where `MACKO_CUDA_LEAN=on` says so or [`lean_rows`] picks it; leaves it as it is otherwise.
    fn choose_lean(&self, plan: &mut Plan, rows: u32) -> Result<()> {
        let (lean, regular) = if plan.half_x {
            (&self.macko_lean_xh, &self.macko_xh)
        } else {
            (&self.macko_lean, &self.macko_xu)
        };
        let Some(grid) = self.grid(&lean.f32, BLOCK, plan.smem_bytes, u32::MAX)? else {
            return Ok(());
        };
        let lean_warps = u64::from(grid) * u64::from(BLOCK / 32);
        let warps = self.grid(&regular.f32, BLOCK, plan.smem_bytes, u32::MAX)?;
        let warps = warps.map_or(0, |g| u64::from(g) * u64::from(BLOCK / 32));
        // Against the teams the regular plan chose (half-warps or warps), whole rows.
        let cuts = plan.split_entries.is_some() || plan.flat;
        if self.lean != Some(true) && !lean_rows(rows, warps, lean_warps, plan.half_warp, cuts) {
            return Ok(());
        }
        *plan = Plan {
            grid: grid.min(rows.div_ceil(BLOCK / 32)).max(1),
            smem_bytes: plan.smem_bytes,
            half_x: plan.half_x,
            short_chunks: true,
            block: BLOCK,
            lean: true,
            ..Plan::default()
        };
        Ok(())
    }

    /// Blocks of a MACKO plan's kernel resident at once on the whole GPU (`None`: it cannot run
    /// with the plan's shared memory).
    fn resident_blocks(&self, plan: &Plan) -> Result<Option<u32>> {
        let f = &self.macko_kernel(plan).f32;
        self.grid(f, plan.block, plan.smem_bytes, u32::MAX)
    }

    /// Warps of a MACKO plan's kernel resident at once on the whole GPU (the grid of the plan
    /// rules stops at one warp per row; the launch may be spread to these, see [`spread_grid`]).
    fn resident_warps(&self, plan: &Plan) -> Result<u64> {
        let blocks = self.resident_blocks(plan)?;
        Ok(blocks.map_or(0, |g| u64::from(g) * u64::from(plan.block / 32)))
    }

    /// Turns a MACKO plan into the flat kernel's (same x layout, 512-thread blocks) and returns
    /// the number of ranges to cut: one per resident warp, at most one per chunk (256 entries).
    pub fn flat_plan(&self, plan: &mut Plan, entries: u64) -> Result<usize> {
        let f = &self.flat_kernel(plan).f32;
        let blocks = self
            .grid(f, BLOCK, plan.smem_bytes, u32::MAX)?
            .ok_or_else(|| internal("the flat MACKO kernel cannot be resident"))?;
        let warps = u64::from(blocks) * u64::from(BLOCK / 32);
        let ranges = warps.min((entries / 256).max(1));
        plan.block = BLOCK;
        plan.grid = u32::try_from(ranges.div_ceil(u64::from(BLOCK / 32)))
            .map_err(|_| internal("flat grid"))?;
        plan.split_entries = None;
        plan.split_from_row = 0;
        plan.flat = true;
        usize::try_from(ranges).map_err(|_| internal("flat ranges"))
    }

    /// The flat kernel for a plan's x staging.
    fn flat_kernel(&self, plan: &Plan) -> &ByOutput {
        if plan.half_x {
            &self.macko_flat_xh
        } else if plan.padded_x {
            &self.macko_flat_xs
        } else {
            &self.macko_flat_xu
        }
    }

    /// `MACKO_CUDA_FLAT_SNAP` (or its default).
    pub fn flat_snap(&self) -> f64 {
        self.flat_snap
    }

    /// Picks the block of a MACKO plan with x staged: 1024 threads (one block per SM, one copy
    /// of x for all its warps) where the 512-thread kernel would get fewer resident threads — as
    /// long as the rows (split as `split_for` would split them) spread about as evenly over the
    /// larger number of warps (within 0.05 of the balance) — or as `MACKO_CUDA_BLOCK` says; the
    /// grid follows. Measured on an H200 (kernels/NOTES.md): 9216×36864 went from 66–67 % of the
    /// ceiling to 71–80 % at d = 0.3–0.7 with 1024-thread blocks and split rows, but lost 6
    /// points at d = 0.1, where rows too short to split fell into an uneven last round.
    fn choose_block(
        &self,
        plan: &mut Plan,
        rows: u32,
        split_for: &dyn Fn(u64) -> Option<(u32, u32)>,
    ) -> Result<()> {
        // x staged as binary16 runs 512-thread blocks only (it fits two of them wherever the
        // 1024-thread blocks' f32 copy fits one).
        let (small, big) = if plan.half_x {
            (&self.macko_xh, None)
        } else if plan.padded_x {
            (&self.macko_xs, Some(&self.macko_xs_big))
        } else {
            (&self.macko_xu, Some(&self.macko_xu_big))
        };
        let small_grid = self.grid(&small.f32, BLOCK, plan.smem_bytes, rows)?;
        let big_grid = match big {
            Some(big) => self.grid(&big.f32, BIG_BLOCK, plan.smem_bytes, rows)?,
            None => None,
        };
        let warps = |g: Option<u32>, b: u32| g.map_or(0, |g| u64::from(g) * u64::from(b / 32));
        let spread = |w: u64| {
            let k = split_for(w).map_or(1, |(k, _)| k);
            balance(rows.saturating_mul(k), w)
        };
        let (small_warps, big_warps) = (warps(small_grid, BLOCK), warps(big_grid, BIG_BLOCK));
        let use_big = match self.block {
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

    /// The grid of a split MACKO matrix of `items` work items (more items than rows: the grid
    /// may grow up to every resident warp, and to every resident block where [`spread_grid`]
    /// says so).
    pub fn macko_split_grid(&self, plan: &Plan, items: u32) -> Result<u32> {
        let f = &self.macko_kernel(plan).f32;
        let grid = self
            .grid(f, plan.block, plan.smem_bytes, items)?
            .ok_or_else(|| internal("the MACKO kernel cannot be resident"))?;
        self.spread(plan, grid)
    }

    /// The MACKO product kernel a plan runs: where x is read, its layout, the block.
    fn macko_kernel(&self, plan: &Plan) -> &ByOutput {
        match (plan.lean, plan.half_x) {
            (true, true) => return &self.macko_lean_xh,
            (true, false) => return &self.macko_lean,
            (false, true) => return &self.macko_xh,
            (false, false) => {}
        }
        let big = plan.block == BIG_BLOCK;
        match (plan.x_in_smem(), plan.padded_x, big) {
            (false, _, _) => &self.macko_xg,
            (true, true, false) => &self.macko_xs,
            (true, false, false) => &self.macko_xu,
            (true, true, true) => &self.macko_xs_big,
            (true, false, true) => &self.macko_xu_big,
        }
    }

    /// Launch plan of a CSR matrix.
    pub fn csr_plan(&self, rows: u32, cols: u32) -> Result<Plan> {
        self.sparse_plan(&self.csr_xs, &self.csr_xg, rows, cols)
    }

    /// Launch plan of a dense matrix.
    pub fn dense_plan(&self, rows: u32, cols: u32) -> Result<Plan> {
        let f = if cols % 8 == 0 {
            &self.dense_aligned.f32
        } else {
            &self.dense_any.f32
        };
        let grid = self
            .grid(f, BLOCK, 0, rows)?
            .ok_or_else(|| internal("the dense kernel cannot be resident"))?;
        Ok(Plan {
            grid,
            block: BLOCK,
            ..Plan::default()
        })
    }

    /// Queues y = A·x for a MACKO matrix.
    pub fn macko(
        &self,
        stream: &CudaStream,
        m: &MackoDev,
        x: &DeviceArray<u16>,
        y: &mut VectorData,
    ) -> Result<()> {
        if m.rows == 0 {
            return Ok(());
        }
        if let Some(fl) = &m.flat {
            let f = self.flat_kernel(&m.plan);
            let (cr, c) = (&self.macko_combine_rows, self.sms);
            return match y {
                VectorData::F16(y) => {
                    flat_into(stream, f.pick(Precision::F16), m, fl, x, y.buf_mut())?;
                    combine_rows_into(stream, cr.pick(Precision::F16), c, fl, y.buf_mut())
                }
                VectorData::F32(y) => {
                    flat_into(stream, f.pick(Precision::F32), m, fl, x, y.buf_mut())?;
                    combine_rows_into(stream, cr.pick(Precision::F32), c, fl, y.buf_mut())
                }
            };
        }
        let pair = self.macko_kernel(&m.plan);
        let (p, c) = (&self.macko_combine, self.sms);
        match y {
            VectorData::F16(y) => {
                macko_into(stream, pair.pick(Precision::F16), m, x, y.buf_mut())?;
                combine_into(stream, p.pick(Precision::F16), c, m, y.buf_mut())
            }
            VectorData::F32(y) => {
                macko_into(stream, pair.pick(Precision::F32), m, x, y.buf_mut())?;
                combine_into(stream, p.pick(Precision::F32), c, m, y.buf_mut())
            }
        }
    }

    /// Queues y = A·x for a CSR matrix.
    pub fn csr(
        &self,
        stream: &CudaStream,
        m: &CsrDev,
        x: &DeviceArray<u16>,
        y: &mut VectorData,
    ) -> Result<()> {
        if m.rows == 0 {
            return Ok(());
        }
        let pair = if m.plan.x_in_smem() {
            &self.csr_xs
        } else {
            &self.csr_xg
        };
        match y {
            VectorData::F16(y) => csr_into(stream, pair.pick(Precision::F16), m, x, y.buf_mut()),
            VectorData::F32(y) => csr_into(stream, pair.pick(Precision::F32), m, x, y.buf_mut()),
        }
    }

    /// Queues y = A·x for a dense matrix with macko's GEMV.
    pub fn dense(
        &self,
        stream: &CudaStream,
        m: &DenseDev,
        x: &DeviceArray<u16>,
        y: &mut VectorData,
    ) -> Result<()> {
        if m.rows == 0 {
            return Ok(());
        }
        let pair = if m.cols % 8 == 0 {
            &self.dense_aligned
        } else {
            &self.dense_any
        };
        match y {
            VectorData::F16(y) => dense_into(stream, pair.pick(Precision::F16), m, x, y.buf_mut()),
            VectorData::F32(y) => dense_into(stream, pair.pick(Precision::F32), m, x, y.buf_mut()),
        }
    }

    /// Queues a one-thread kernel that holds the stream for `ns` nanoseconds (see
    /// kernels/stream.cu, `spin_wait`).
    pub fn spin_wait(&self, stream: &CudaStream, ns: u64) -> Result<()> {
        let mut args = stream.launch_builder(&self.spin_wait);
        args.arg(&ns);
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: matches `spin_wait(unsigned long long)`; the kernel touches no memory.
        unsafe { args.launch(cfg) }
            .map(|_| ())
            .map_err(|e| cuda_error("launching the spin-wait kernel", e))
    }

    /// Grid of the streaming-read kernel: every block resident once.
    pub fn stream_grid(&self) -> Result<u32> {
        self.grid(&self.stream_read, BLOCK, 0, u32::MAX)?
            .ok_or_else(|| internal("the streaming-read kernel cannot be resident"))
    }

    /// Queues one pass of the streaming-read kernel over `words` 16-byte words of `buf`.
    pub fn stream_read(
        &self,
        stream: &CudaStream,
        buf: &CudaSlice<u32>,
        words: u64,
        out: &mut CudaSlice<u32>,
        grid: u32,
    ) -> Result<()> {
        if (buf.len() as u64) < words.saturating_mul(4) || (out.len() as u64) < u64::from(grid) {
            return Err(internal("streaming-read buffers are too small"));
        }
        let mut args = stream.launch_builder(&self.stream_read);
        args.arg(buf).arg(&words).arg(out);
        let cfg = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: matches `stream_read(const uint4*, unsigned long long, unsigned*)`; `buf`
        // holds at least 16·words bytes and `out` one word per block (checked above).
        unsafe { args.launch(cfg) }
            .map(|_| ())
            .map_err(|e| cuda_error("launching the streaming-read kernel", e))
    }
}

fn macko_into<T: DeviceRepr>(
    stream: &CudaStream,
    f: &CudaFunction,
    m: &MackoDev,
    x: &DeviceArray<u16>,
    y: &mut CudaSlice<T>,
) -> Result<()> {
    let flags: u32 = u32::from(m.plan.half_warp)
        | (u32::from(m.plan.short_chunks) << 1)
        | (u32::from(m.split.is_some()) << 2)
        | (u32::from(m.plan.pipelined) << 3)
        | (u32::from(m.plan.aligned_rows) << 4);
    let mut args = stream.launch_builder(f);
    args.arg(m.row_ptr.buf())
        .arg(m.values.buf())
        .arg(m.codes.buf())
        .arg(x.buf())
        .arg(y)
        .arg(&m.rows)
        .arg(&m.cols)
        .arg(&flags);
    // Unsplit: the split arguments are never read; any device pointer stands in for them.
    match &m.split {
        Some(sp) => args
            .arg(sp.desc.buf())
            .arg(sp.partials.buf())
            .arg(&sp.items),
        None => args.arg(m.row_ptr.buf()).arg(m.row_ptr.buf()).arg(&m.rows),
    };
    // SAFETY: the arguments match `macko_spmv_*` (and `macko_lean_*`, which take the same
    // parameters and never read the split table) in kernels/macko.cu in order and type (u32
    // row_ptr of rows + 1, P/8 16-byte value words, P/8 32-bit code words, f16 x of cols, y of
    // rows in the kernel's output type, rows, cols and flags as u32, then the split table: items
    // + 1 8-byte descriptors, items f32 partials, items as u32 — read and written only when
    // flags bit 2 is set, which it is exactly when `m.split` is); every buffer lives on this
    // stream and outlives the launch in stream order; the kernel reads only inside the arrays
    // of a valid matrix, which macko-format guarantees (or of its row-aligned copy, whose row
    // pointers, values and codes macko_format::aligned keeps consistent; kernels/NOTES.md, step 7,
    // for its columns past x), and the split table's entries lie
    // inside them (split.rs; argued in kernels/NOTES.md).
    unsafe { args.launch(m.plan.config()) }
        .map(|_| ())
        .map_err(|e| cuda_error("launching the MACKO kernel", e))
}

/// Launch shape of a second (combine) launch: one thread per item, grid-stride over at most
/// `sms` × 4 blocks.
fn per_item_config(items: u32, sms: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (items.div_ceil(BLOCK).clamp(1, sms.max(1) * 4), 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Queues the flat kernel's product (see `flat.rs`).
fn flat_into<T: DeviceRepr>(
    stream: &CudaStream,
    f: &CudaFunction,
    m: &MackoDev,
    fl: &FlatDev,
    x: &DeviceArray<u16>,
    y: &mut CudaSlice<T>,
) -> Result<()> {
    let mut args = stream.launch_builder(f);
    args.arg(m.row_ptr.buf())
        .arg(m.values.buf())
        .arg(m.codes.buf())
        .arg(x.buf())
        .arg(y)
        .arg(&m.rows)
        .arg(&m.cols)
        .arg(fl.desc.buf())
        .arg(fl.partials.buf())
        .arg(&fl.ranges);
    // SAFETY: the arguments match `macko_flat_*` in kernels/macko.cu in order and type (the
    // matrix arrays as for `macko_spmv_*`, y of rows elements of the kernel's output type, rows
    // and cols as u32, then ranges + 1 16-byte range descriptors, 2 · ranges f32 partials and
    // ranges as u32); every buffer lives on this stream and outlives the launch in stream order;
    // the descriptors come from `flat_ranges` (entries inside the matrix, every row of at least 9
    // entries, checked there), and the kernel reads only inside the arrays of a valid matrix.
    unsafe { args.launch(m.plan.config()) }
        .map(|_| ())
        .map_err(|e| cuda_error("launching the flat MACKO kernel", e))
}

/// Queues the second launch of a flat product when some row is cut by a range (nothing
/// otherwise): the cut rows' partial sums into y, one thread per cut row.
fn combine_rows_into<T: DeviceRepr>(
    stream: &CudaStream,
    f: &CudaFunction,
    sms: u32,
    fl: &FlatDev,
    y: &mut CudaSlice<T>,
) -> Result<()> {
    if fl.cut_rows == 0 {
        return Ok(());
    }
    let cfg = per_item_config(fl.cut_rows, sms);
    let mut args = stream.launch_builder(f);
    args.arg(fl.cut.buf())
        .arg(fl.partials.buf())
        .arg(y)
        .arg(&fl.cut_rows);
    // SAFETY: matches `macko_combine_rows_*(const uint4* cut, const float* partials, OUT* y,
    // unsigned count)`: `cut` holds cut_rows entries of (row < rows, first <= end <= 2 · ranges),
    // partials 2 · ranges floats, y rows elements; all on this stream, after the product.
    unsafe { args.launch(cfg) }
        .map(|_| ())
        .map_err(|e| cuda_error("launching the MACKO combine-rows kernel", e))
}

/// Queues the second launch of a split matrix's product (nothing for an unsplit one): y from the
/// partial sums, one thread per row over `sms` × 4 blocks at most.
fn combine_into<T: DeviceRepr>(
    stream: &CudaStream,
    f: &CudaFunction,
    sms: u32,
    m: &MackoDev,
    y: &mut CudaSlice<T>,
) -> Result<()> {
    let Some(sp) = &m.split else {
        return Ok(());
    };
    let cfg = per_item_config(m.rows, sms);
    let mut args = stream.launch_builder(f);
    args.arg(sp.row_item.buf())
        .arg(sp.partials.buf())
        .arg(y)
        .arg(&m.rows);
    // SAFETY: matches `macko_combine_*(const unsigned* row_item, const float* partials, OUT* y,
    // unsigned rows)`: row_item holds rows + 1 non-decreasing item indices up to `items`,
    // partials `items` floats, y rows elements of the kernel's output type; all on this stream,
    // queued after the product that wrote the partials.
    unsafe { args.launch(cfg) }
        .map(|_| ())
        .map_err(|e| cuda_error("launching the MACKO combine kernel", e))
}

fn csr_into<T: DeviceRepr>(
    stream: &CudaStream,
    f: &CudaFunction,
    m: &CsrDev,
    x: &DeviceArray<u16>,
    y: &mut CudaSlice<T>,
) -> Result<()> {
    let mut args = stream.launch_builder(f);
    args.arg(m.row_ptr.buf())
        .arg(m.col_idx.buf())
        .arg(m.values.buf())
        .arg(x.buf())
        .arg(y)
        .arg(&m.rows)
        .arg(&m.cols);
    // SAFETY: the arguments match `csr_spmv_*` in kernels/csr.cu in order and type; the CSR
    // arrays were validated by macko-format (indices < cols, row_ptr non-decreasing up to nnz).
    unsafe { args.launch(m.plan.config()) }
        .map(|_| ())
        .map_err(|e| cuda_error("launching the CSR kernel", e))
}

fn dense_into<T: DeviceRepr>(
    stream: &CudaStream,
    f: &CudaFunction,
    m: &DenseDev,
    x: &DeviceArray<u16>,
    y: &mut CudaSlice<T>,
) -> Result<()> {
    let mut args = stream.launch_builder(f);
    args.arg(m.values.buf())
        .arg(x.buf())
        .arg(y)
        .arg(&m.rows)
        .arg(&m.cols);
    // SAFETY: the arguments match `dense_gemv_*` in kernels/dense.cu; A holds rows·cols halves,
    // x cols, y rows; the aligned variant runs only when cols % 8 == 0, so that every row starts
    // on a 16-byte boundary of the (256-byte aligned) allocation.
    unsafe { args.launch(m.plan.config()) }
        .map(|_| ())
        .map_err(|e| cuda_error("launching the dense kernel", e))
}

#[cfg(test)]
mod tests {
    use super::{
        balance, flat_for_one_round, gpu_dependent_rules, half_warps_on_a_tie, half_x_by_default,
        lean_measured_for, lean_rows, parse_tail, pipelined_by_default, segment_entries,
        short_rows, sparse_last_round, split_segments, spread_grid, wide_half_x_measured_for,
        TailPolicy, HALF_X_WIDE_MIN_COLS, MAX_SPLIT, MIN_SPLIT_ENTRIES, MIN_SPLIT_ENTRIES_POOR,
    };

    #[test]
    fn a_sparse_last_round_keeps_long_rows_on_warps() {
        // 13824 rows on 4224 warps: 3 full rounds and 1152 rows (27 %).
        assert!(sparse_last_round(13824, 4224));
        assert!(sparse_last_round(5120, 4224));
        assert!(sparse_last_round(21504, 4224));
        // 14336 rows (39 %), 7168 (70 %), full rounds, one round or less: not sparse.
        assert!(!sparse_last_round(14336, 4224));
        assert!(!sparse_last_round(7168, 4224));
        assert!(!sparse_last_round(8448, 4224));
        assert!(!sparse_last_round(4224, 4224));
        assert!(!sparse_last_round(1000, 4224));
        assert!(!sparse_last_round(1000, 0));
    }

    #[test]
    fn half_warps_take_tied_rows_only_when_short_enough_and_the_last_round_is_full() {
        // 32000 rows of 2 048 entries (256 groups) on 4224 warps: a tie, half-warps measured
        // faster (kernels/NOTES.md, step 5).
        assert!(half_warps_on_a_tie(32000, 4224, 2048.5, false));
        // The same rows at d = 0.7 (358 groups): warps, unless nearly dense.
        assert!(!half_warps_on_a_tie(32000, 4224, 2867.0, false));
        assert!(half_warps_on_a_tie(32000, 4224, 2867.0, true));
        // 13824 rows: the warps' last round is 27 % full, so warps even for short-ish rows.
        assert!(!half_warps_on_a_tie(13824, 4224, 2560.0, false));
        // 12288 rows: half-warps spread them worse (1.45 rounds against 2.9).
        assert!(!half_warps_on_a_tie(12288, 4224, 1000.0, false));
        // Rows of 141 groups (9216 columns at d = 0.1 with padding) are short: always half-warps;
        // 12288 columns at d = 0.1 (189 groups) are not.
        assert!(short_rows(1131.0));
        assert!(!short_rows(1510.0));
    }

    #[test]
    fn the_flat_kernel_takes_one_partial_round_of_long_rows() {
        const H200: Option<f64> = Some(18.8);
        // 3584 rows on 4224 warps (85 % busy) of 14 336 and 10 240 entries on an H200: flat.
        assert!(flat_for_one_round(3584, 4224, 14336.0, false, H200));
        assert!(flat_for_one_round(3584, 4224, 10240.0, false, H200));
        // The same rows at d = 0.3 (6 144 entries), nearly dense, or 4096 rows (97 % busy), or
        // more than one round: not.
        assert!(!flat_for_one_round(3584, 4224, 6144.0, false, H200));
        assert!(!flat_for_one_round(3584, 4224, 20480.0, true, H200));
        assert!(!flat_for_one_round(4096, 4224, 14336.0, false, H200));
        assert!(!flat_for_one_round(5120, 4224, 14336.0, false, H200));
        // On an H100 (12.8 bytes per SM cycle), or where the clocks are unknown: whole rows.
        assert!(!flat_for_one_round(3584, 4224, 14336.0, false, Some(12.8)));
        assert!(!flat_for_one_round(3584, 4224, 14336.0, false, None));
    }

    #[test]
    fn batches_are_pipelined_for_long_items_or_many_rounds() {
        // 12288 rows of 6 144 entries (2.9 rounds): long items.
        assert!(pipelined_by_default(6144.0, 12288, 4224));
        // 13824 rows of 1 541 entries: 3.3 rounds of medium items.
        assert!(pipelined_by_default(1541.0, 13824, 4224));
        // 12288 rows of 1 510 entries: 2.9 rounds, measured slower pipelined.
        assert!(!pipelined_by_default(1510.0, 12288, 4224));
        // One round of long rows, and short items however many.
        assert!(!pipelined_by_default(11008.0, 4096, 4224));
        assert!(!pipelined_by_default(1229.0, 36864, 4224));
    }

    #[test]
    fn the_tail_knob_parses_off_and_forced_cuts_only() {
        assert_eq!(parse_tail("off"), Some(TailPolicy::Off));
        assert_eq!(
            parse_tail("0.5:3"),
            Some(TailPolicy::Forced {
                from: 0.5,
                segments: 3
            })
        );
        assert_eq!(
            parse_tail("1:2"),
            Some(TailPolicy::Forced {
                from: 1.0,
                segments: 2
            })
        );
        for bad in [
            "on", "1.5:3", "-0.1:2", "nan:2", "0.5:1", "0.5:9", "0.5", ":3", "x:y",
        ] {
            assert_eq!(parse_tail(bad), None, "{bad}");
        }
    }

    #[test]
    fn rows_that_spread_evenly_are_not_split() {
        // 12288 rows on 4224 warps: 2.9 rounds, the last 91 % full.
        assert_eq!(split_segments(12288, 6144.0, 4224), None);
        // 36864 rows: 8.7 rounds.
        assert_eq!(split_segments(36864, 12288.0, 4224), None);
    }

    #[test]
    fn a_ragged_last_round_is_split_into_an_even_one() {
        // 5120 rows of 13824 entries on 4224 warps: 1.2 rounds (balance 0.61).
        let (k, seg) = split_segments(5120, 13824.0, 4224).expect("split");
        assert!((2..=MAX_SPLIT).contains(&k));
        assert!(balance(5120 * k, 4224) >= 0.9, "k = {k}");
        assert_eq!(seg % 8, 0);
        // k segments of seg entries cover a row 5 % longer than the mean.
        assert!(u64::from(seg) * u64::from(k) >= (13824.0_f64 * 1.05) as u64);
        assert!(f64::from(seg) >= MIN_SPLIT_ENTRIES_POOR);
        // The same rows at d = 0.5 (6912 entries): still split, the balance being so poor.
        assert!(split_segments(5120, 6912.0, 4224).is_some());
    }

    #[test]
    fn rows_that_spread_fairly_are_split_only_into_long_segments() {
        // 14336 rows of 4096 entries (balance 0.85): two segments would be 2048 entries.
        assert_eq!(split_segments(14336, 4096.0, 4224), None);
        // 9216 rows of 18432 entries on 4224 warps (balance 0.73): segments of >= 4096.
        let (k, seg) = split_segments(9216, 18432.0, 4224).expect("split");
        assert!(
            k >= 2 && f64::from(seg) >= MIN_SPLIT_ENTRIES,
            "k {k}, seg {seg}"
        );
    }

    #[test]
    fn short_rows_are_never_split() {
        // 5120 rows of 1000 entries: segments would be shorter than two batches.
        assert_eq!(split_segments(5120, 1000.0, 4224), None);
        assert_eq!(split_segments(0, 0.0, 4224), None);
    }

    #[test]
    fn segment_lengths_are_multiples_of_8_and_at_least_8() {
        for (mean, k) in [(0.0, 1), (1.0, 8), (13824.0, 3), (1e12, 2)] {
            let seg = segment_entries(mean, k);
            assert!(seg >= 8 && seg % 8 == 0, "mean {mean}, k {k}: {seg}");
        }
    }

    #[test]
    fn the_lean_kernel_takes_rows_its_extra_warps_spread_at_least_as_evenly() {
        // 132 SMs: 32 warps each on the regular kernel, 48 on the lean one (kernels/NOTES.md,
        // step 8), and the shapes measured there.
        let (warps, lean) = (132 * 32, 132 * 48);
        assert!(
            lean_rows(5120, warps, lean, false, false),
            "1.21 rounds become 0.81"
        );
        assert!(
            lean_rows(18944, warps, lean, false, false),
            "4.48 rounds become 2.99"
        );
        assert!(lean_rows(9216, warps, lean, false, false), "as even");
        assert!(
            !lean_rows(9216, warps, lean, false, true),
            "as even, but the regular plan cuts the rows"
        );
        assert!(
            lean_rows(5120, warps, lean, false, true),
            "more even than whole rows, even where the regular plan cuts them"
        );
        assert!(
            lean_rows(18944, warps, lean, true, false),
            "half-warps: 2.24 rounds"
        );
        assert!(
            lean_rows(20480, warps, lean, true, false),
            "half-warps: as even"
        );
        assert!(
            lean_rows(28672, warps, lean, true, false),
            "half-warps: 3.39 rounds, 0.85 to 0.91"
        );
        assert!(
            !lean_rows(49152, warps, lean, false, false),
            "as even, but 11.6 rounds"
        );
        assert!(!lean_rows(13824, warps, lean, false, false), "less even");
        assert!(!lean_rows(7168, warps, lean, false, false), "less even");
        assert!(
            !lean_rows(3584, warps, lean, false, false),
            "one round already: less even on more warps"
        );
        assert!(
            !lean_rows(32000, warps, lean, false, false),
            "7.6 rounds: less even"
        );
        assert!(
            !lean_rows(5120, warps, lean, true, false),
            "short rows in one lean round"
        );
        assert!(
            !lean_rows(9216, warps, warps, false, false),
            "x too wide for more lean blocks"
        );
        // The edges of each clause: a gain of 0.043 over 10 rounds is not enough, nor equal
        // balance in 3.67 rounds (12288 rows: 2.9 rounds, taken); half-warps need more rows
        // than lean warps (6336 rows would fill one lean round exactly: 1.0 against 0.75).
        assert!(
            !lean_rows(42241, warps, lean, false, false),
            "gain under LEAN_MIN_GAIN"
        );
        assert!(
            !lean_rows(1100, 300, 400, false, false),
            "as even, in more than 3 rounds"
        );
        assert!(
            lean_rows(12288, warps, lean, false, false),
            "as even, in 2.9 rounds"
        );
        assert!(
            !lean_rows(6336, warps, lean, true, false),
            "exactly one lean round"
        );
        assert!(
            lean_rows(12672, warps, lean, true, false),
            "two full lean rounds"
        );
        assert!(
            !lean_rows(5120, warps, 0, false, false),
            "the lean kernel cannot be resident"
        );
    }

    #[test]
    fn the_lean_kernel_is_automatic_only_where_measured() {
        assert!(lean_measured_for(Some(12.8)), "the H100");
        assert!(!lean_measured_for(Some(18.4)), "the H200: not measured yet");
        assert!(!lean_measured_for(None), "unknown clocks");
        assert_eq!(
            gpu_dependent_rules(Some(12.8)),
            "lean kernel yes, flat kernel for one round of long rows no, binary16 x from 12288 columns yes"
        );
        assert_eq!(
            gpu_dependent_rules(Some(18.4)),
            "lean kernel no, flat kernel for one round of long rows yes, binary16 x from 12288 columns no"
        );
        assert_eq!(
            gpu_dependent_rules(None),
            "lean kernel no, flat kernel for one round of long rows no, binary16 x from 12288 columns no"
        );
    }

    #[test]
    fn x_goes_binary16_by_default_where_more_regular_blocks_fit_or_wide_x_was_measured() {
        for wide_measured in [false, true] {
            assert!(
                half_x_by_default(Some(132), 264, 28_672, wide_measured),
                "one f32 block per SM, two binary16"
            );
            assert!(
                !half_x_by_default(Some(264), 132, 60_000, wide_measured),
                "x too wide for f32: global x's two blocks against one binary16 block"
            );
            assert!(
                half_x_by_default(None, 132, 28_672, wide_measured),
                "nothing else resident"
            );
            assert!(
                !half_x_by_default(Some(264), 264, HALF_X_WIDE_MIN_COLS - 1, wide_measured),
                "two blocks either way, x narrower than measured"
            );
        }
        assert!(
            !half_x_by_default(Some(264), 264, HALF_X_WIDE_MIN_COLS, false),
            "two blocks either way, on a GPU where a wide x was not measured"
        );
        assert!(
            half_x_by_default(Some(264), 264, HALF_X_WIDE_MIN_COLS, true),
            "two blocks either way, a wide x on a GPU where it was measured"
        );
    }

    #[test]
    fn the_grid_spreads_only_where_some_sms_would_hold_a_block_more() {
        let sms = 132;
        assert!(
            spread_grid(224, 264, sms),
            "3584 rows: 92 SMs of two blocks, 40 of one"
        );
        assert!(
            spread_grid(320, 396, sms),
            "5120 rows, lean: 56 SMs of three blocks"
        );
        assert!(!spread_grid(264, 264, sms), "every resident block already");
        assert!(
            !spread_grid(400, 264, sms),
            "more items than warps: the grid is resident"
        );
        assert!(
            !spread_grid(100, 264, sms),
            "fewer blocks than SMs: one block at most each"
        );
    }

    #[test]
    fn binary16_for_a_wide_x_only_where_it_was_measured() {
        assert!(wide_half_x_measured_for(Some(12.8)), "the H100");
        assert!(
            !wide_half_x_measured_for(Some(18.4)),
            "the H200: not measured"
        );
        assert!(!wide_half_x_measured_for(None), "unknown clocks");
    }

    #[test]
    fn balance_counts_the_last_round_of_rows() {
        assert_eq!(balance(0, 10), 1.0);
        assert_eq!(balance(20, 10), 1.0);
        assert!((balance(15, 10) - 0.75).abs() < 1e-12);
        // 7168 rows: 4224 warps leave a ragged second round, 8448 half-warps one round.
        assert!(balance(7168, 8448) >= balance(7168, 4224));
        // 12288 rows: warps take 3 rounds almost full, half-warps 2 rounds, the second half empty.
        assert!(balance(12288, 8448) < balance(12288, 4224));
    }
}

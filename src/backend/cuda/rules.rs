//! The measured rules of the CUDA planner: each predicate or constant here decides one choice of
//! a MACKO plan, with the measurement that set it (kernels/README.md, one section per rule, from
//! "Teams: warps and half-warps" to "GPU-dependent rules"). They are pure functions of counts
//! (rows, resident warps, entries) and of the GPU's DRAM bytes per SM cycle; `plan.rs` composes
//! them with the occupancy of `caps.rs`.

/// Entries per row over columns from which the MACKO kernel stages x padded. Lanes then read
/// columns about 8 apart, which the plain layout puts in 4 banks (8-way conflicts); below it the
/// lanes' columns are spread at random and the padding only costs an instruction per entry.
pub(super) const PAD_MIN_FILL: f64 = 0.85;

/// Fill of the warps' last round of rows up to which long rows stay on warps even where
/// half-warps would spread them as evenly (see [`sparse_last_round`]).
pub(super) const SPARSE_LAST_ROUND: f64 = 0.3;

/// Whether whole rows on `warps` warps take more than one round and the last is at most
/// [`SPARSE_LAST_ROUND`] full. Such a round is cheap (its few warps stream faster than in a full
/// one), so half-warps, which even out the rounds at the price of the slower 16-lane path, lose.
/// Measured on an H200 (kernels/README.md, "Teams: warps and half-warps"), warps against half-warps
/// at d = 0.5 / 0.7: 5120² (last round 21 % full) +6 / +8 points of the ceiling, 13824×5120 (27 %)
/// +7 / +8, 21504×7168 (9 %) +7 / +9; but 14336×4096 (39 %) −2.4 / +0.6 and 7168² (70 %) −2 / 0.
pub(super) fn sparse_last_round(rows: u32, warps: u64) -> bool {
    if warps == 0 || u64::from(rows) <= warps {
        return false;
    }
    let last = u64::from(rows) % warps;
    last > 0 && last as f64 <= SPARSE_LAST_ROUND * warps as f64
}

/// Whether rows of `mean_entries` entries always get half-warps (see [`HALF_WARP_MAX_GROUPS`]).
pub(super) fn short_rows(mean_entries: f64) -> bool {
    mean_entries / 8.0 <= HALF_WARP_MAX_GROUPS
}

/// Whether rows that are not short (more than [`HALF_WARP_MAX_GROUPS`] groups) and not split
/// get half-warps: where half-warps spread them as evenly over the resident teams as warps do
/// (see [`balance`]), except where the warps' last round is sparse ([`sparse_last_round`]) or,
/// in batches of 2 chunks (not nearly dense), the rows hold more than
/// [`HALF_WARP_TIE_MAX_GROUPS`] groups: in both cases the warp path measured faster.
pub(super) fn half_warps_on_a_tie(
    rows: u32,
    warps: u64,
    mean_entries: f64,
    nearly_dense: bool,
) -> bool {
    balance(rows, 2 * warps) >= balance(rows, warps)
        && !sparse_last_round(rows, warps)
        && (nearly_dense || mean_entries / 8.0 <= HALF_WARP_TIE_MAX_GROUPS)
}

/// Whether a warp's two-chunk batches are pipelined for `items` work items of `item_entries`
/// entries on `warps` resident warps: long items in more than one round ([`PIPE_MIN_ENTRIES`]),
/// or shorter ones in many rounds ([`PIPE_MIN_ENTRIES_MANY_ROUNDS`], [`PIPE_MANY_ROUNDS`]).
pub(super) fn pipelined_by_default(item_entries: f64, items: u64, warps: u64) -> bool {
    (item_entries >= PIPE_MIN_ENTRIES && items > warps)
        || (item_entries >= PIPE_MIN_ENTRIES_MANY_ROUNDS && items >= PIPE_MANY_ROUNDS * warps)
}

/// Shortest rows (mean entries) for which [`flat_for_one_round`] picks the flat kernel.
pub(super) const FLAT_ONE_ROUND_MIN_ENTRIES: f64 = 8192.0;

/// DRAM bytes per SM cycle (`CudaCaps::dram_bytes_per_sm_cycle`) from which
/// [`flat_for_one_round`] picks the flat kernel: between the H100's 12.8 (where it lost) and the
/// H200's 18.8 (where it won).
pub(super) const FLAT_ONE_ROUND_MIN_BYTES_PER_SM_CYCLE: f64 = 15.0;

/// Whether the flat kernel takes a matrix whose rows, fewer than the resident warps, leave more
/// than a tenth of them idle (balance below [`SPLIT_MIN_BALANCE`]) and whose rows are long (≥
/// [`FLAT_ONE_ROUND_MIN_ENTRIES`]) and not nearly dense (where split rows found no better balance
/// in segments long enough). Its ranges keep every warp busy to the entry. Measured on an H200
/// (kernels/README.md, "Flat ranges"), flat against whole rows: 3584×20480 +4.2 / +2.0 points of
/// the ceiling at d = 0.7 / 0.5 (14 336 / 10 240 entries per row), 3584×18944 +4.2 / +1.2, but −2.7
/// and −2.2 at d = 0.3 (~6 000 entries), where the flat kernel's per-chunk costs weigh more. Only
/// on GPUs of many DRAM bytes per SM cycle (≥ [`FLAT_ONE_ROUND_MIN_BYTES_PER_SM_CYCLE`], unknown:
/// no): full benchmark runs measured the same two shapes at d = 0.7 / 0.5 +2.2 to +4.9 points on
/// the H200 (18.8 bytes per SM cycle, whole rows at 71–73 % of the ceiling) but −3.9 to −5.1 on the
/// H100 (12.8, whole rows at 84–86 %): idle warps cost only where the SMs, not the memory, set the
/// pace.
pub(super) fn flat_for_one_round(
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
pub(super) fn flat_measured_for(bytes_per_sm_cycle: Option<f64>) -> bool {
    bytes_per_sm_cycle.is_some_and(|b| b >= FLAT_ONE_ROUND_MIN_BYTES_PER_SM_CYCLE)
}

/// Mean 8-entry groups per row beyond which rows that are not nearly dense stay on warps even where
/// half-warps would spread them as evenly. Measured on an H200 (kernels/README.md, "Teams: warps
/// and half-warps"), warps against half-warps where both spread the rows equally, d = 0.5 / 0.7:
/// 8192×28672 (1 792 / 2 509 groups) +3.5 / +3.7 points of the ceiling, 49152×12288 (768 / 1 075)
/// +2.4 / +4.4, 32000×8192 (512 / 717) +1.9 / +0.6; 32000×4096 and 14336×4096 at d = 0.5 (256
/// groups) −4.4 and −3.2; 7168² (448 / 627) −1.1 / −1.4, the one loss above the threshold. 300, not
/// 256: rows of 4096 columns at d = 0.5 hold a few padding entries more than 2 048.
pub(super) const HALF_WARP_TIE_MAX_GROUPS: f64 = 300.0;

/// Mean 8-entry groups per row up to which the MACKO kernel always gives each row a half-warp: a
/// warp then keeps two rows' loads in flight and shares the per-row costs (bounds, reduction,
/// store) between them, where a whole warp would leave most of its lanes without a group. Longer
/// rows get a half-warp only where that splits the rows more evenly over the resident teams (see
/// `plan::macko_plan`). 144, not 128: rows of 129–144 groups fill a warp's third two-chunk batch
/// (64 groups) a fifth, a half-warp's fifth (32 groups) two fifths; measured on an H200
/// (kernels/README.md, "Teams: warps and half-warps"), half-warps against warps: 27648×9216 and
/// 36864×9216 at d = 0.1 (141 groups) +8.7 and +5.6 points of the ceiling, 18944×3584 and
/// 20480×3584 at d = 0.3 (134) +6.0 and +1.7, 9216² at d = 0.1 −1.5.
pub(super) const HALF_WARP_MAX_GROUPS: f64 = 144.0;

/// How evenly `rows` rows spread over `teams` teams taking them round-robin: the mean rows per
/// team over the most any team gets (1 when every team gets the same number).
pub(super) fn balance(rows: u32, teams: u64) -> f64 {
    if rows == 0 || teams == 0 {
        return 1.0;
    }
    let per_team = f64::from(rows) / teams as f64;
    per_team / per_team.ceil()
}

/// Whether a row kernel's grid of `grid` blocks (at most one warp per item) grows to the
/// `resident` blocks the GPU holds at once, on `sms` multiprocessors. By default where the grid
/// already fills every SM at least once but not all their slots: the hardware then hands the
/// blocks out in rounds over the SMs, so some SMs hold one block (16 warps of rows) more than
/// the others, and the most loaded SM sets the time. With every resident block launched, warps
/// numbered across blocks (kernels/macko.cu, `macko_spmv_impl`) take the items, so every SM
/// gets the same number of them, give or take one per block; the extra warps find no item after
/// their block has staged x. Measured on an H100 (kernels/README.md, "Every resident block"), on
/// against off in time at d = 0.7 / 0.5 / 0.3 / 0.1: 5120×13824 (lean, 320 of 396 blocks) 1.01 /
/// 1.03 / 1.06 / 1.10×, 5120² 1.06 / 1.05 / 1.09 / 1.02×, 3584×20480 (224 of 264) 1.00 / 1.01 /
/// 1.01 / 1.03×, 3584×18944 1.00 / 1.00 / 1.01 / 1.02×; 4096 rows (256 of 264) 1.00–1.02×.
pub(super) fn spread_grid(grid: u32, resident: u32, sms: u32) -> bool {
    grid >= sms && grid < resident
}

/// Most segments per row the automatic choice considers (and `cuda.split` accepts).
pub(super) const MAX_SPLIT: u32 = 8;

/// DRAM bytes per SM cycle (`CudaCaps::dram_bytes_per_sm_cycle`) under which `auto` may pick the
/// lean kernel: the H100 (12.8), where it was measured (kernels/README.md, "The lean kernel"), is
/// under it; the H200 (18.4), SM-bound rather than DRAM-bound, is not. `macko tune` on an H200
/// (2026-11-27, bench-results/nvidia-h200/tune/) measured it there: with this bound above 18.8,
/// the rule would pick the lean kernel on 17 of the 62 classes of the 31 paper shapes at
/// d = 0.5 and 0.1; the lean kernel was the tuned winner on 10 of them (+3 to +15 %), but not on
/// the other 7 (28672×8192, 20480×3584, 21504×7168, 27648×9216, 36864×9216 and 12288² at
/// d = 0.1, 12288² at d = 0.5), where it did not beat the rules' plan by 2 %. Mixed, so the
/// bound stays; on an H200 the plan cache picks the lean kernel where it wins.
pub(super) const LEAN_MAX_BYTES_PER_SM_CYCLE: f64 = 15.0;

/// Whether `auto` may pick the lean kernel on a GPU of `bytes_per_sm_cycle` (unknown: no).
pub(super) fn lean_measured_for(bytes_per_sm_cycle: Option<f64>) -> bool {
    bytes_per_sm_cycle.is_some_and(|b| b < LEAN_MAX_BYTES_PER_SM_CYCLE)
}

/// The plan rules that depend on the GPU's DRAM bytes per SM cycle, in words, for `macko info`:
/// which of the lean kernel ([`lean_measured_for`]), the flat kernel for one partial round of
/// long rows ([`flat_for_one_round`]) and binary16 x wherever x is wide
/// ([`wide_half_x_measured_for`]) `auto` may pick on this GPU.
pub(super) fn gpu_dependent_rules(bytes_per_sm_cycle: Option<f64>) -> String {
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
/// H100 (kernels/README.md, "x staged as binary16"), `cuda.xhalf=on` against the f32 plans at
/// d = 0.5 / 0.3 / 0.1: 7168×28672 +9 / +9 / −2 points of the
/// ceiling (the f32 plan ran the flat kernel at 16 warps per SM at d ≥ 0.3), 12288×49152
/// +4 to +5, 9216×36864 +3 at d = 0.3 and 0.1; 3584×20480, where f32 already fits two
/// blocks, +1 to +2. Also, where the f32 copy is staged now on a GPU where this was measured
/// (`wide_measured`: [`wide_half_x_measured_for`]), wherever x has at least
/// [`HALF_X_WIDE_MIN_COLS`] columns and binary16 fits as many blocks as the f32 copy: each
/// block then copies half the bytes and its gathers take fewer shared-memory wavefronts
/// (kernels/README.md, "x staged as binary16").
pub(super) fn half_x_by_default(
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
/// Measured on an H100 (kernels/README.md, "x staged as binary16"), `cuda.xhalf=on` against the
/// plans without it at d = 0.7 / 0.5 / 0.3 / 0.1, in time: 5120×13824 1.04 / 1.04 / 1.04 / 1.03×,
/// 3584×20480 1.01 / 1.01 / 1.02 / 1.03×, 4096×14336 1.01 / 1.02 / 1.01 / 1.03×, 12288²
/// 1.00 / 1.01 / 1.01 / 1.03×; from 11 008 columns down (4096×11008, 9216², 5120 columns and
/// narrower) within ±2 %, the spread of two runs of the same plan.
pub(super) const HALF_X_WIDE_MIN_COLS: u32 = 12_288;

/// DRAM bytes per SM cycle under which [`half_x_by_default`] stages a wide x
/// (≥ [`HALF_X_WIDE_MIN_COLS`] columns) as binary16 for its own sake: the H100 (12.8), where
/// binary16 gained up to 4 % (ncu on 5120×13824: 9 % fewer shared-memory wavefronts, half the
/// short-scoreboard stalls, for 7 % more instructions) while DRAM set the pace; not the H200
/// (18.4), where the SMs' issue and shared-memory pipes co-limit, so the trade is not
/// known until measured there. The same bound as the lean rule's today, but its own constant:
/// each moves when its rule is measured on an H200.
pub(super) const HALF_X_WIDE_MAX_BYTES_PER_SM_CYCLE: f64 = 15.0;

/// Whether [`half_x_by_default`] may stage a wide x as binary16 for its own sake on a GPU of
/// `bytes_per_sm_cycle` (unknown: no).
pub(super) fn wide_half_x_measured_for(bytes_per_sm_cycle: Option<f64>) -> bool {
    bytes_per_sm_cycle.is_some_and(|b| b < HALF_X_WIDE_MAX_BYTES_PER_SM_CYCLE)
}

/// Slack in comparing two balances (see [`balance`]) that should count as equal.
pub(super) const BALANCE_EPS: f64 = 1e-9;

/// Balance by which the lean kernel's warps must spread the rows more evenly than the regular
/// kernel's teams where those take more than [`LEAN_EVEN_MAX_ROUNDS`] rounds (see [`lean_rows`]).
pub(super) const LEAN_MIN_GAIN: f64 = 0.05;

/// Rounds of the regular kernel's teams up to which the lean kernel takes rows it spreads as
/// evenly: measured up to 3 (12288², neutral); in more rounds the regular kernel's pipelining
/// (long rows) was not measured against it.
pub(super) const LEAN_EVEN_MAX_ROUNDS: u64 = 3;

/// Whether whole rows go to the lean kernel, with `lean_warps` resident warps, rather than to the
/// regular one with `warps` (whose teams are half-warps, twice as many, for `half_warps`): where
/// the lean kernel's 40 registers give more warps (48 per SM against 32 where x is small enough)
/// and those spread the rows more evenly than the regular teams (by [`LEAN_MIN_GAIN`]), or as
/// evenly where the teams take at most [`LEAN_EVEN_MAX_ROUNDS`] rounds. Rows on half-warps (short
/// ones) need more than one round of lean warps besides. Measured on an H100
/// (kernels/README.md, "The lean kernel"; `cuda.lean=on` against the default plans, 17 shapes):
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
/// of the cut rows. Measured on an H100, x as binary16: 9216×36864 at d = 0.5 / 0.3
/// (whole rows 0.73 either way, cut rows 0.93) lean 82.7 / 82.1 % of the ceiling against the
/// flat kernel's 87.9 / 85.4 %. "More evenly" still compares with whole rows, cut or not: the
/// measured case is 5120×13824, where the lean kernel's 0.81 beat the flat kernel that
/// the regular plan would run. (`regular_cuts` counts the flat kernel as the plan chose it; the
/// upload may still fall back to whole rows where a row holds under 9 entries.)
pub(super) fn lean_rows(
    rows: u32,
    warps: u64,
    lean_warps: u64,
    half_warps: bool,
    regular_cuts: bool,
) -> bool {
    let teams = if half_warps { 2 * warps } else { warps };
    lean_warps > warps && (!half_warps || u64::from(rows) > lean_warps) && {
        let (lean, regular) = (balance(rows, lean_warps), balance(rows, teams));
        lean >= regular + LEAN_MIN_GAIN
            || (!regular_cuts
                && lean + BALANCE_EPS >= regular
                && u64::from(rows) <= LEAN_EVEN_MAX_ROUNDS * teams)
    }
}

/// Default of the `flat_snap` tuning: ranges stay within ±1/16 of equal, and rows shorter than an
/// eighth of a range are never cut (no combine launch for them).
pub(super) const FLAT_SNAP: f64 = 0.0625;

/// Mean entries per work item from which a warp's two-chunk batches are pipelined (measured on an
/// H200, kernels/README.md, "Pipelined batches": +2 to +4.5 points of the ceiling for items of
/// 2 458 to 8 601 entries with several items per warp; −2 to −4 points for items of 1 229 to
/// 2 048 entries in few rounds or a single round of rows, where the extra batch in flight delays
/// the staging of x and the next item's bounds more than it hides; in ≥ 3 rounds, items from
/// 1 500 entries gain: [`PIPE_MIN_ENTRIES_MANY_ROUNDS`]).
pub(super) const PIPE_MIN_ENTRIES: f64 = 2400.0;

/// Mean entries per work item from which batches are pipelined where items take at least
/// [`PIPE_MANY_ROUNDS`] rounds of the warps. Measured on an H200 (kernels/README.md, "Pipelined
/// batches"), with pipelining against without: 28672×7168, 21504×7168 and 13824×5120 at
/// d = 0.3 (1 536 to 2 150 entries, 3.3 to 6.8 rounds) +2.1 to +2.3 points, 36864×12288 and
/// 49152×12288 at d = 0.1 (1 510 entries) +0.9 to +1.1; 12288² at d = 0.1 (2.9 rounds) −1.1,
/// 11008×4096 at d = 0.3 −2.5.
pub(super) const PIPE_MIN_ENTRIES_MANY_ROUNDS: f64 = 1500.0;

/// Rounds of items per warp from which [`PIPE_MIN_ENTRIES_MANY_ROUNDS`] applies.
pub(super) const PIPE_MANY_ROUNDS: u64 = 3;

/// Balance (see [`balance`]) from which whole rows are handed out as they are.
pub(super) const SPLIT_MIN_BALANCE: f64 = 0.9;

/// Shortest segment worth its own work item, in entries. Measured on an H200 (kernels/README.md,
/// "Rows split into segments"): segments of 4 600 to 9 000 entries gained up to 15 points of the
/// ceiling, segments of 2 000 to 3 100 entries lost 5 to 11 points on matrices whose whole rows
/// spread at least 0.73 evenly (each segment's last batch is partly empty, and that waste
/// outweighed the balance).
pub(super) const MIN_SPLIT_ENTRIES: f64 = 4096.0;

/// Shortest segment where whole rows spread very unevenly (balance below
/// [`POOR_BALANCE`]): there even 2 300-entry segments gained 10 points (5120×13824 at
/// d = 0.5: 1.2 rounds of rows). Two full batches of a warp (2 × 32 lanes × 2 chunks × 8).
pub(super) const MIN_SPLIT_ENTRIES_POOR: f64 = 2048.0;

/// Balance of whole rows under which [`MIN_SPLIT_ENTRIES_POOR`] applies.
pub(super) const POOR_BALANCE: f64 = 0.65;

/// Rows are cut every `segment` entries; rows up to this much longer than the mean still get
/// `k` segments, not `k` and a sliver.
pub(super) const SPLIT_SLACK: f64 = 1.05;

/// Segments per row (k ≥ 2) and their length in entries (a multiple of 8) for `rows` rows of
/// `mean_entries` stored entries on `teams` resident warps, or `None` when whole rows already
/// spread evenly (balance ≥ [`SPLIT_MIN_BALANCE`]) or no split of segments of at least
/// [`MIN_SPLIT_ENTRIES`] ([`MIN_SPLIT_ENTRIES_POOR`] where whole rows spread very unevenly)
/// improves the balance by 0.05. A warp's last round of rows decides the
/// product's time: 5120 rows on 4224 warps leave the second round 21 % full, while the same rows
/// in 3 segments each take 3.6 rounds, the last 64 % full.
pub(super) fn split_segments(rows: u32, mean_entries: f64, teams: u64) -> Option<(u32, u32)> {
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
pub(super) fn segment_entries(mean_entries: f64, k: u32) -> u32 {
    let raw = (mean_entries * SPLIT_SLACK / f64::from(k)).ceil().max(8.0);
    let raw = if raw >= f64::from(u32::MAX - 8) {
        u32::MAX - 8
    } else {
        raw as u32
    };
    raw.div_ceil(8) * 8
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // faster (kernels/README.md, "Teams: warps and half-warps").
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
        // 132 SMs: 32 warps each on the regular kernel, 48 on the lean one (kernels/README.md, "The
        // lean kernel"), and the shapes measured there.
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

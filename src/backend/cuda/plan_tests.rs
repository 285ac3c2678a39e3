//! The planner's tests: the plans of the benchmark's shapes on an H100 and an H200 (pinned: the
//! rules as they stood before the restructure give exactly these), and what each tuning forces.

use super::*;
use crate::backend::cuda::caps::tables::{h100, h200, small};
use crate::backend::cuda::caps::Kernel::{self, *};
use crate::backend::tuning::ForcedPlan;

/// An expected plan: kernel, grid, shared memory and the flags set, in 512-thread blocks.
type Expected = (Kernel, u32, u32, &'static str);

/// The 31 paper shapes at d = 0.5 and 0.1, with the stored entries of the benchmark's synthetic
/// matrices (seeded, mean entries per row of 16 sampled rows, times the rows), and the default
/// plans on an H100 and an H200. Flags: `half_x`, `half_warp`, `short` (batches of
/// `MACKO_CHUNKS_SHORT`), `pipe`, `flat=RANGES`, `lean`, `spread`.
#[rustfmt::skip]
const BENCHMARK_PLANS: [(u32, u32, f64, u64, Expected, Expected); 62] = [
    (4096, 4096, 0.5, 8388608,
        (RowPlain, 264, 16992, "short spread"),
        (RowPlain, 264, 16992, "short spread")),
    (8192, 8192, 0.5, 33554432,
        (RowPlain, 264, 33888, "short pipe"),
        (RowPlain, 264, 33888, "short pipe")),
    (8192, 29568, 0.5, 121118720,
        (RowHalf, 264, 59184, "half_x short pipe"),
        (RowHalf, 264, 59184, "half_x short pipe")),
    (32000, 5120, 0.5, 81920000,
        (RowPlain, 264, 21216, "short pipe"),
        (RowPlain, 264, 21216, "short pipe")),
    (32000, 8192, 0.5, 131072000,
        (RowPlain, 264, 33888, "short pipe"),
        (RowPlain, 264, 33888, "short pipe")),
    (28672, 8192, 0.5, 117440512,
        (RowPlain, 264, 33888, "short pipe"),
        (RowPlain, 264, 33888, "short pipe")),
    (5120, 5120, 0.5, 13107200,
        (Lean, 396, 21216, "short lean spread"),
        (RowPlain, 264, 21216, "short pipe")),
    (5120, 13824, 0.5, 35394560,
        (LeanHalf, 396, 27696, "half_x short lean spread"),
        (FlatPlain, 264, 57120, "short pipe flat=4224")),
    (3584, 20480, 0.5, 36703744,
        (RowHalf, 264, 41008, "half_x short spread"),
        (FlatPlain, 264, 84576, "short flat=4224")),
    (4096, 11008, 0.5, 22548480,
        (RowPlain, 264, 45504, "short spread"),
        (RowPlain, 264, 45504, "short spread")),
    (13824, 5120, 0.5, 35389440,
        (RowPlain, 264, 21216, "short pipe"),
        (RowPlain, 264, 21216, "short pipe")),
    (18944, 3584, 0.5, 33947648,
        (Lean, 396, 14880, "short lean"),
        (RowPlain, 264, 14880, "short pipe")),
    (14336, 4096, 0.5, 29360128,
        (RowPlain, 264, 16992, "half_warp short"),
        (RowPlain, 264, 16992, "half_warp short")),
    (4096, 14336, 0.5, 29364224,
        (RowHalf, 264, 28720, "half_x short spread"),
        (RowPlain, 264, 59232, "short spread")),
    (8192, 28672, 0.5, 117448704,
        (RowHalf, 264, 57392, "half_x short pipe"),
        (RowHalf, 264, 57392, "half_x short pipe")),
    (11008, 4096, 0.5, 22544384,
        (Lean, 396, 16992, "short lean"),
        (RowPlain, 264, 16992, "short")),
    (32000, 4096, 0.5, 65536000,
        (RowPlain, 264, 16992, "half_warp short"),
        (RowPlain, 264, 16992, "half_warp short")),
    (20480, 3584, 0.5, 36700160,
        (RowPlain, 264, 14880, "short pipe"),
        (RowPlain, 264, 14880, "short pipe")),
    (3584, 18944, 0.5, 33951232,
        (RowHalf, 264, 37936, "half_x short spread"),
        (FlatPlain, 264, 78240, "short flat=4224")),
    (21504, 7168, 0.5, 77070336,
        (RowPlain, 264, 29664, "short pipe"),
        (RowPlain, 264, 29664, "short pipe")),
    (7168, 7168, 0.5, 25690112,
        (RowPlain, 264, 29664, "short pipe"),
        (RowPlain, 264, 29664, "short pipe")),
    (28672, 7168, 0.5, 102760448,
        (RowPlain, 264, 29664, "short pipe"),
        (RowPlain, 264, 29664, "short pipe")),
    (7168, 28672, 0.5, 102767616,
        (RowHalf, 264, 57392, "half_x short pipe"),
        (RowHalf, 264, 57392, "half_x short pipe")),
    (27648, 9216, 0.5, 127429632,
        (RowPlain, 264, 38112, "short pipe"),
        (RowPlain, 264, 38112, "short pipe")),
    (9216, 9216, 0.5, 42476544,
        (Lean, 396, 38112, "short lean"),
        (RowPlain, 264, 38112, "short pipe")),
    (36864, 9216, 0.5, 169906176,
        (RowPlain, 264, 38112, "short pipe"),
        (RowPlain, 264, 38112, "short pipe")),
    (9216, 36864, 0.5, 169878528,
        (FlatHalf, 264, 73776, "half_x short pipe flat=4224"),
        (FlatHalf, 264, 73776, "half_x short pipe flat=4224")),
    (36864, 12288, 0.5, 226529280,
        (RowHalf, 264, 24624, "half_x short pipe"),
        (RowPlain, 264, 50784, "short pipe")),
    (12288, 12288, 0.5, 75509760,
        (LeanHalf, 396, 24624, "half_x short lean"),
        (RowPlain, 264, 50784, "short pipe")),
    (49152, 12288, 0.5, 302039040,
        (RowHalf, 264, 24624, "half_x short pipe"),
        (RowPlain, 264, 50784, "short pipe")),
    (12288, 49152, 0.5, 302002176,
        (RowHalf, 264, 98352, "half_x short pipe"),
        (RowHalf, 264, 98352, "half_x short pipe")),
    (4096, 4096, 0.1, 2068480,
        (RowPlain, 264, 16992, "half_warp short spread"),
        (RowPlain, 264, 16992, "half_warp short spread")),
    (8192, 8192, 0.1, 8241152,
        (RowPlain, 264, 33888, "half_warp short"),
        (RowPlain, 264, 33888, "half_warp short")),
    (8192, 29568, 0.1, 29753344,
        (RowHalf, 264, 59184, "half_x short pipe"),
        (RowHalf, 264, 59184, "half_x short pipe")),
    (32000, 5120, 0.1, 20128000,
        (RowPlain, 264, 21216, "half_warp short"),
        (RowPlain, 264, 21216, "half_warp short")),
    (32000, 8192, 0.1, 32192000,
        (RowPlain, 264, 33888, "half_warp short"),
        (RowPlain, 264, 33888, "half_warp short")),
    (28672, 8192, 0.1, 28844032,
        (Lean, 396, 33888, "short lean"),
        (RowPlain, 264, 33888, "half_warp short")),
    (5120, 5120, 0.1, 3220480,
        (RowPlain, 264, 21216, "half_warp short"),
        (RowPlain, 264, 21216, "half_warp short")),
    (5120, 13824, 0.1, 8688640,
        (LeanHalf, 396, 27696, "half_x short lean spread"),
        (RowPlain, 264, 57120, "short")),
    (3584, 20480, 0.1, 8995840,
        (RowHalf, 264, 41008, "half_x short spread"),
        (RowPlain, 264, 84576, "short spread")),
    (4096, 11008, 0.1, 5537792,
        (RowPlain, 264, 45504, "short spread"),
        (RowPlain, 264, 45504, "short spread")),
    (13824, 5120, 0.1, 8695296,
        (RowPlain, 264, 21216, "half_warp short"),
        (RowPlain, 264, 21216, "half_warp short")),
    (18944, 3584, 0.1, 8373248,
        (Lean, 396, 14880, "short lean"),
        (RowPlain, 264, 14880, "half_warp short")),
    (14336, 4096, 0.1, 7239680,
        (RowPlain, 264, 16992, "half_warp short"),
        (RowPlain, 264, 16992, "half_warp short")),
    (4096, 14336, 0.1, 7204864,
        (RowHalf, 264, 28720, "half_x short spread"),
        (RowPlain, 264, 59232, "short spread")),
    (8192, 28672, 0.1, 28852224,
        (RowHalf, 264, 57392, "half_x short pipe"),
        (RowHalf, 264, 57392, "half_x short pipe")),
    (11008, 4096, 0.1, 5559040,
        (Lean, 396, 16992, "short lean"),
        (RowPlain, 264, 16992, "half_warp short")),
    (32000, 4096, 0.1, 16160000,
        (RowPlain, 264, 16992, "half_warp short"),
        (RowPlain, 264, 16992, "half_warp short")),
    (20480, 3584, 0.1, 9052160,
        (Lean, 396, 14880, "short lean"),
        (RowPlain, 264, 14880, "half_warp short")),
    (3584, 18944, 0.1, 8322048,
        (RowHalf, 264, 37936, "half_x short spread"),
        (RowPlain, 264, 78240, "short spread")),
    (21504, 7168, 0.1, 18945024,
        (Lean, 396, 29664, "short lean"),
        (RowPlain, 264, 29664, "half_warp short")),
    (7168, 7168, 0.1, 6315008,
        (RowPlain, 264, 29664, "half_warp short"),
        (RowPlain, 264, 29664, "half_warp short")),
    (28672, 7168, 0.1, 25260032,
        (Lean, 396, 29664, "short lean"),
        (RowPlain, 264, 29664, "half_warp short")),
    (7168, 28672, 0.1, 25245696,
        (RowHalf, 264, 57392, "half_x short pipe"),
        (RowHalf, 264, 57392, "half_x short pipe")),
    (27648, 9216, 0.1, 31269888,
        (Lean, 396, 38112, "short lean"),
        (RowPlain, 264, 38112, "half_warp short")),
    (9216, 9216, 0.1, 10423296,
        (Lean, 396, 38112, "short lean"),
        (RowPlain, 264, 38112, "half_warp short")),
    (36864, 9216, 0.1, 41693184,
        (Lean, 396, 38112, "short lean"),
        (RowPlain, 264, 38112, "half_warp short")),
    (9216, 36864, 0.1, 41739264,
        (LeanHalf, 396, 73776, "half_x short lean"),
        (RowHalf, 264, 73776, "half_x short pipe")),
    (36864, 12288, 0.1, 55554048,
        (RowHalf, 264, 24624, "half_x short pipe"),
        (RowPlain, 264, 50784, "short pipe")),
    (12288, 12288, 0.1, 18518016,
        (LeanHalf, 396, 24624, "half_x short lean"),
        (RowPlain, 264, 50784, "short")),
    (49152, 12288, 0.1, 74072064,
        (RowHalf, 264, 24624, "half_x half_warp short"),
        (RowPlain, 264, 50784, "half_warp short")),
    (12288, 49152, 0.1, 74219520,
        (RowHalf, 264, 98352, "half_x short pipe"),
        (RowHalf, 264, 98352, "half_x short pipe")),
];

/// The plan `e` stands for.
fn expected(e: Expected) -> CudaPlan {
    let (kernel, grid, smem, flags) = e;
    let mut p = CudaPlan::new(kernel, grid, BLOCK, smem);
    for flag in flags.split_whitespace() {
        match flag.split_once('=') {
            Some(("flat", n)) => {
                p.flat = true;
                p.flat_ranges = n.parse().expect("flat ranges");
                p.flat_snap = FLAT_SNAP;
            }
            _ => match flag {
                "padded" => p.padded_x = true,
                "half_x" => p.half_x = true,
                "half_warp" => p.half_warp = true,
                "short" => p.short_chunks = true,
                "pipe" => p.pipelined = true,
                "lean" => p.lean = true,
                "spread" => p.spread = true,
                other => panic!("unknown flag {other}"),
            },
        }
    }
    p
}

/// Statistics of a matrix whose rows all fit the flat kernel.
fn stats(rows: u32, cols: u32, entries: u64) -> MackoStats {
    MackoStats {
        rows,
        cols,
        entries,
        rows_fit_flat: true,
    }
}

#[test]
fn the_benchmark_shapes_get_the_pinned_plans_on_an_h100_and_an_h200() {
    let tuning = CudaTuning::default();
    for (rows, cols, d, entries, on_h100, on_h200) in BENCHMARK_PLANS {
        for (gpu, caps, want) in [("H100", h100(), on_h100), ("H200", h200(), on_h200)] {
            let plan = macko_plan(&caps, &tuning, &stats(rows, cols, entries))
                .unwrap_or_else(|e| panic!("{gpu} {rows}x{cols} d = {d}: {e}"));
            // The few-token plans are pinned in batch_plan_tests.rs.
            assert!(
                plan.batch.is_some(),
                "{gpu} {rows}x{cols}: no few-token plans"
            );
            let single = CudaPlan {
                batch: None,
                ..plan
            };
            assert_eq!(single, expected(want), "{gpu} {rows}x{cols} d = {d}");
        }
    }
}

#[test]
fn the_notes_cases_are_among_the_pinned_plans() {
    let h100 = h100();
    let plan = |rows, cols, entries| {
        macko_plan(&h100, &CudaTuning::default(), &stats(rows, cols, entries)).expect("plan")
    };
    // 5120×13824 (kernels/README.md, "Every resident block"): lean, binary16 x, 320 of 396 blocks
    // spread.
    let p = plan(5120, 13824, 35_394_560);
    assert!(p.lean && p.half_x && p.spread && p.grid == 396);
    // 3584×20480: 224 of 264 blocks spread.
    let p = plan(3584, 20480, 36_703_744);
    assert!(p.spread && p.grid == 264 && !p.lean && !p.flat);
}

#[test]
fn a_flat_plan_falls_back_to_rows_where_a_row_is_too_short() {
    let caps = h200();
    let tuning = CudaTuning::default();
    let mut s = stats(3584, 20480, 36_703_744);
    assert!(macko_plan(&caps, &tuning, &s).expect("plan").flat);
    s.rows_fit_flat = false;
    let p = macko_plan(&caps, &tuning, &s).expect("plan");
    assert!(!p.flat && p.kernel == RowPlain && p.flat_ranges == 0);
}

#[test]
fn split_rows_take_a_grid_of_their_items() {
    let caps = small();
    let tuning = CudaTuning {
        split: Some(SplitPolicy::Segments(3)),
        flat: Some(false),
        ..CudaTuning::default()
    };
    let p = macko_plan(&caps, &tuning, &stats(1000, 4096, 2_048_000)).expect("plan");
    let seg = p.split_entries.expect("split");
    assert_eq!(seg % 8, 0);
    let q = with_split_items(&caps, &tuning, &p, 3000).expect("grid");
    assert!(q.grid >= p.grid && q.warps() >= 3000_u64.min(q.warps()));
}

#[test]
fn x_too_wide_to_stage_goes_to_global_memory_unless_forced() {
    let caps = small();
    let s = stats(4096, 200_000, 4096 * 20_000);
    let p = macko_plan(&caps, &CudaTuning::default(), &s).expect("plan");
    assert!(!p.x_in_smem() && p.kernel == RowGlobal);
    let forced = CudaTuning {
        x: Some(XPlace::Shared),
        ..CudaTuning::default()
    };
    assert!(matches!(
        macko_plan(&caps, &forced, &s),
        Err(Error::TooLarge { .. })
    ));
}

#[test]
fn csr_and_dense_plans_name_their_kernels() {
    let caps = h100();
    let tuning = CudaTuning::default();
    assert_eq!(
        csr_plan(&caps, &tuning, 4096, 4096).expect("csr").kernel,
        CsrStaged
    );
    let global = CudaTuning {
        x: Some(XPlace::Global),
        ..CudaTuning::default()
    };
    assert_eq!(
        csr_plan(&caps, &global, 4096, 4096).expect("csr").kernel,
        CsrGlobal
    );
    assert_eq!(
        dense_plan(&caps, &CudaTuning::default(), 4096, 4096)
            .expect("dense")
            .kernel,
        DenseAligned
    );
    assert_eq!(
        dense_plan(&caps, &CudaTuning::default(), 4096, 4097)
            .expect("dense")
            .kernel,
        DenseAny
    );
}

/// Every forced plan is taken on a matrix it can run on, on each GPU, and on the Hopper parts
/// not by default (the small GPU spreads that matrix's grid by default).
#[test]
fn every_forced_plan_is_taken() {
    for (caps, hopper) in [(h100(), true), (h200(), true), (small(), false)] {
        for ForcedPlan {
            name,
            tuning,
            taken,
        } in CudaTuning::forced_plans()
        {
            // 1024 rows of 512 entries, 4096 columns: x fits everywhere, rows long enough for
            // the flat kernel, fewer than the resident warps (so the grid can spread).
            let s = stats(1024, 4096, 1024 * 512);
            let plan = macko_plan(&caps, &tuning, &s).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(taken(&plan), "{name} not taken: {plan:?}");
            let default = macko_plan(&caps, &CudaTuning::default(), &s).expect("plan");
            assert!(!hopper || !taken(&default), "{name} is the default");
        }
    }
}

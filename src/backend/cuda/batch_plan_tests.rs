use super::*;
use crate::backend::cuda::caps::tables::{h100, h200, small};

/// A MACKO matrix of no stated entries (the team size is tested on its own).
const MACKO: BatchMatrix = BatchMatrix::Macko {
    entries: 0,
    stage_groups: None,
};

fn staged(p: &BatchPlan) -> bool {
    matches!(
        p.kernel,
        Kernel::Batch(BatchKernel {
            format: BatchFormat::MackoShared | BatchFormat::CsrShared,
            ..
        })
    )
}

fn plans(caps: &CudaCaps, t: &CudaTuning, m: BatchMatrix, rows: u32, cols: u32) -> BatchPlans {
    batch_plans(caps, t, m, rows, cols).expect("a plan")
}

#[test]
fn xt_slots_cover_the_slack_in_whole_16_byte_words() {
    for cols in [0u32, 1, 7, 8, 9, 4096, 28672] {
        let s = xt_slots(cols).expect("fits");
        assert_eq!(s % 8, 0);
        assert!(u64::from(s) >= u64::from(cols) + 24);
        assert!(u64::from(s) < u64::from(cols) + 32);
        for w in Width::ALL {
            assert_eq!(xt_bytes(s, w) % 16, 0, "{cols} columns at {w:?}");
        }
    }
}

#[test]
fn every_width_gets_its_own_kernel_and_a_runnable_launch() {
    let t = CudaTuning::default();
    for caps in [h100(), h200(), small()] {
        for m in [MACKO, BatchMatrix::Csr, BatchMatrix::Dense] {
            for (rows, cols) in [(0, 0), (1, 1), (4096, 4096), (3584, 20480), (28672, 8192)] {
                let ps = plans(&caps, &t, m, rows, cols);
                for w in Width::ALL {
                    let p = ps.get(w);
                    assert_eq!(p.width(), Some(w));
                    let tc_macko = p.tensor_cores() && matches!(m, BatchMatrix::Macko { .. });
                    let block = if tc_macko { MACKO_MMA_BLOCK } else { BLOCK };
                    assert_eq!(p.block, block);
                    assert!(p.smem_bytes <= caps.smem_limit);
                    assert!(caps.blocks_per_sm(p.kernel, p.block, p.smem_bytes) > 0);
                    assert!(p.grid >= 1);
                    // At most one warp per row, at most every resident block.
                    assert!(u64::from(p.grid) <= u64::from(rows.div_ceil(16)).max(1));
                    let resident = caps.resident_blocks(p.kernel, p.block, p.smem_bytes);
                    assert!(p.grid <= resident.expect("resident"));
                    assert_eq!(p.x_in_smem(), staged(p), "{m:?} {rows}×{cols} {w:?}");
                    if p.x_in_smem() {
                        assert_eq!(u64::from(p.smem_bytes), xt_bytes(p.slots, w));
                    }
                    if p.tensor_cores() {
                        // X read as it is: no XT, no transpose; shared memory for MACKO's
                        // tiles only.
                        assert_eq!((p.xt_len(), p.transpose_grid), (0, 0));
                        let tiles = if tc_macko {
                            macko_mma_smem(w, p.stage_groups)
                        } else {
                            0
                        };
                        assert_eq!(u64::from(p.smem_bytes), tiles);
                        continue;
                    }
                    assert_eq!(p.xt_len(), p.slots as usize * w.lanes() as usize);
                    // The transpose covers XT's words grid-stride in at most 4 blocks per SM.
                    assert!(p.transpose_grid >= 1 && p.transpose_grid <= caps.sm_count * 4);
                }
            }
        }
    }
}

#[test]
fn xt_is_staged_where_it_costs_no_resident_blocks_on_an_h100_and_h200() {
    let t = CudaTuning {
        batch_mma: Some(false),
        ..CudaTuning::default()
    };
    for caps in [h100(), h200()] {
        // 4096 columns: XT fits every width (132 KiB at 16 lanes, one block per SM, as many as
        // the 120-register global kernel keeps).
        let p = plans(&caps, &t, MACKO, 4096, 4096);
        assert!(Width::ALL.iter().all(|&w| p.get(w).x_in_smem()));
        // 28 672 columns: 2 lanes (112 KiB) fit two blocks, as many as the global kernel keeps;
        // 4 lanes and more do not fit.
        let p = plans(&caps, &t, MACKO, 8192, 28672);
        assert!(p.get(Width::W2).x_in_smem());
        assert!(!p.get(Width::W4).x_in_smem());
        assert!(!p.get(Width::W16).x_in_smem());
        // 12 288 columns: 4 lanes (96 KiB) keep two MACKO blocks, as the 54-register global
        // kernel does: staged; 8 lanes (192 KiB) one block against two: global.
        let p = plans(&caps, &t, MACKO, 4096, 12288);
        assert!(p.get(Width::W4).x_in_smem());
        assert!(!p.get(Width::W8).x_in_smem());
        // CSR at 4 lanes: the 32-register global kernel keeps four blocks: global.
        let p = plans(&caps, &t, BatchMatrix::Csr, 4096, 12288);
        assert!(!p.get(Width::W4).x_in_smem());
    }
}

#[test]
fn the_tuning_forces_where_xt_is_read() {
    let caps = h100();
    let global = CudaTuning {
        batch_x: Some(XPlace::Global),
        batch_mma: Some(false),
        ..CudaTuning::default()
    };
    let shared = CudaTuning {
        batch_x: Some(XPlace::Shared),
        batch_mma: Some(false),
        ..CudaTuning::default()
    };
    for m in [MACKO, BatchMatrix::Csr] {
        let g = plans(&caps, &global, m, 8192, 12288);
        assert!(g.0.iter().all(|p| !p.x_in_smem() && p.smem_bytes == 0));
        let s = plans(&caps, &shared, m, 8192, 12288);
        // Staged wherever it fits at all: up to 8 lanes (192 KiB); 16 lanes (384 KiB) cannot.
        assert!(s.get(Width::W8).x_in_smem());
        assert!(!s.get(Width::W16).x_in_smem());
    }
}

#[test]
fn dense_rows_read_xt_from_global_memory_aligned_where_rows_are() {
    let caps = h100();
    let t = CudaTuning {
        batch_x: Some(XPlace::Shared),
        batch_mma: Some(false),
        ..CudaTuning::default()
    };
    let aligned = plans(&caps, &t, BatchMatrix::Dense, 100, 4096);
    let any = plans(&caps, &t, BatchMatrix::Dense, 100, 4095);
    for w in Width::ALL {
        let format = |p: &BatchPlan| match p.kernel {
            Kernel::Batch(b) => Some(b.format),
            _ => None,
        };
        assert_eq!(format(aligned.get(w)), Some(BatchFormat::DenseAligned));
        assert_eq!(format(any.get(w)), Some(BatchFormat::DenseAny));
        assert!(!aligned.get(w).x_in_smem() && !any.get(w).x_in_smem());
    }
}

#[test]
fn chunk_counts_map_to_the_narrowest_width_that_holds_them() {
    assert_eq!(Width::for_count(1), Some(Width::W2));
    assert_eq!(Width::for_count(2), Some(Width::W2));
    assert_eq!(Width::for_count(3), Some(Width::W4));
    assert_eq!(Width::for_count(8), Some(Width::W8));
    assert_eq!(Width::for_count(9), Some(Width::W16));
    assert_eq!(Width::for_count(16), Some(Width::W16));
    assert_eq!(Width::for_count(17), None);
}

fn format(p: &BatchPlan) -> Option<BatchFormat> {
    match p.kernel {
        Kernel::Batch(b) => Some(b.format),
        _ => None,
    }
}

#[test]
fn dense_rows_run_on_tensor_cores_at_every_width_where_the_gpu_has_them() {
    let t = CudaTuning::default();
    for caps in [h100(), h200(), small()] {
        let p = plans(&caps, &t, BatchMatrix::Dense, 8192, 8192);
        assert_eq!(format(p.get(Width::W2)), Some(BatchFormat::DenseMma));
        assert_eq!(format(p.get(Width::W4)), Some(BatchFormat::DenseMma));
        assert_eq!(format(p.get(Width::W8)), Some(BatchFormat::DenseMma));
        assert_eq!(format(p.get(Width::W16)), Some(BatchFormat::DenseMma));
        // Rows not 16-byte aligned: X cannot be read in 16-byte words: CUDA cores.
        let p = plans(&caps, &t, BatchMatrix::Dense, 8192, 8191);
        assert_eq!(format(p.get(Width::W16)), Some(BatchFormat::DenseAny));
    }
    // Before sm_80: never.
    let old = CudaCaps {
        tensor_cores: false,
        ..h100()
    };
    let on = CudaTuning {
        batch_mma: Some(true),
        ..CudaTuning::default()
    };
    let p = plans(&old, &on, BatchMatrix::Dense, 8192, 8192);
    assert!(p.0.iter().all(|p| !p.tensor_cores()));
}

#[test]
fn the_tuning_forces_tensor_cores_at_every_width_or_none() {
    let caps = h100();
    let on = CudaTuning {
        batch_mma: Some(true),
        ..CudaTuning::default()
    };
    let off = CudaTuning {
        batch_mma: Some(false),
        ..CudaTuning::default()
    };
    let p = plans(&caps, &on, BatchMatrix::Dense, 8192, 8192);
    assert!(p.0.iter().all(BatchPlan::tensor_cores));
    let p = plans(&caps, &off, BatchMatrix::Dense, 8192, 8192);
    assert!(p.0.iter().all(|p| !p.tensor_cores()));
    // CSR has no tensor-core kernel: forcing it changes nothing.
    let p = plans(&caps, &on, BatchMatrix::Csr, 8192, 8192);
    assert!(p.0.iter().all(|p| !p.tensor_cores()));
}

#[test]
fn a_dense_tensor_core_grid_holds_at_most_one_block_per_band() {
    let caps = h100();
    let t = CudaTuning::default();
    // 64 and 96 registers: two and one 512-thread blocks per SM (and 8 / 16 KiB of partial
    // sums each).
    let p = plans(&caps, &t, BatchMatrix::Dense, 28672, 8192);
    assert_eq!(p.get(Width::W8).grid, 264);
    assert_eq!(p.get(Width::W16).grid, 132);
    // 100 rows: 7 bands of 16.
    let p = plans(&caps, &t, BatchMatrix::Dense, 100, 4096);
    assert_eq!(p.get(Width::W16).grid, 7);
}

#[test]
fn macko_runs_on_tensor_cores_at_width_16_from_density_0_3_where_the_stages_fit() {
    let t = CudaTuning::default();
    let cells = 8192u64 * 8192;
    let macko = |entries| BatchMatrix::Macko {
        entries,
        stage_groups: None,
    };
    let (half, tenth) = (macko(cells / 2), macko(cells / 10));
    for caps in [h100(), h200()] {
        // d = 0.1: CUDA cores at every width (the tiles lost there, batch_plan.rs).
        let p = plans(&caps, &t, tenth, 8192, 8192);
        assert!(p.0.iter().all(|p| !p.tensor_cores()));
        let p = plans(&caps, &t, half, 8192, 8192);
        for w in [Width::W2, Width::W4, Width::W8] {
            assert!(!p.get(w).tensor_cores(), "{w:?}");
        }
        let q = p.get(Width::W16);
        assert_eq!(format(q), Some(BatchFormat::MackoMma));
        assert_eq!(q.windows, 64);
        // d = 0.5: 1024 entries per band and window, 128 groups, a quarter more and the 32
        // groups the rows' next windows start in.
        assert_eq!(q.stage_groups, 192);
        // 109 KiB: two 256-thread blocks per SM; at most one block per 16 rows.
        assert_eq!(u64::from(q.smem_bytes), macko_mma_smem(Width::W16, 192));
        assert_eq!(q.smem_bytes, 111_616);
        assert_eq!(caps.blocks_per_sm(q.kernel, q.block, q.smem_bytes), 2);
        assert_eq!(q.grid, 2 * caps.sm_count);
        // Columns not a multiple of 8: CUDA cores.
        let p = plans(&caps, &t, half, 8192, 8190);
        assert!(p.0.iter().all(|p| !p.tensor_cores()));
    }
    // Wider than the window cursors can address: CUDA cores.
    let half_of = |cols: u32| macko(16 * u64::from(cols) / 2);
    let p = plans(&h100(), &t, half_of(MMA_MAX_COLS + 8), 16, MMA_MAX_COLS + 8);
    assert!(!p.get(Width::W16).tensor_cores());
    let p = plans(&h100(), &t, half_of(MMA_MAX_COLS), 16, MMA_MAX_COLS);
    assert!(p.get(Width::W16).tensor_cores());
    // The small GPU's 100 KiB of shared memory hold no such block: CUDA cores.
    let p = plans(&small(), &t, half, 8192, 8192);
    assert!(p.0.iter().all(|p| !p.tensor_cores()));
    // A measured stage replaces the estimate; one too large for any block goes to CUDA cores.
    let measured = BatchMatrix::Macko {
        entries: cells / 2,
        stage_groups: Some(150),
    };
    assert_eq!(
        plans(&h100(), &t, measured, 8192, 8192)
            .get(Width::W16)
            .stage_groups,
        150
    );
    let huge = BatchMatrix::Macko {
        entries: cells / 2,
        stage_groups: Some(4000),
    };
    assert!(!plans(&h100(), &t, huge, 8192, 8192)
        .get(Width::W16)
        .tensor_cores());
}

#[test]
fn the_stage_estimate_follows_the_density_up_to_a_dense_window() {
    let cells = 8192u64 * 8192;
    // d = 0.3: 614.4 entries per band and window → 77 groups, 96 with a quarter more, + 32.
    assert_eq!(estimated_stage_groups(cells * 3 / 10, 8192, 8192), 128);
    // Nothing stored: the 32 boundary groups; dense: 16 rows × (16 + 2) at most.
    assert_eq!(estimated_stage_groups(0, 8192, 8192), 32);
    assert_eq!(estimated_stage_groups(cells, 8192, 8192), 288);
    assert_eq!(estimated_stage_groups(0, 0, 0), 32);
}

#[test]
fn the_shared_memory_layout_is_the_kernels() {
    // Sums: 8 warps × 16 rows × 8·NT vectors of f32; per warp a 16 × 128 tile of binary16, a
    // table of 16 × 6 words, and two stages of a table and the groups (16 + 4 bytes each).
    let per_warp = |groups: u64| 4096 + 384 + 2 * (384 + groups);
    assert_eq!(macko_mma_smem(Width::W8, 100), 4096 + 8 * per_warp(2000));
    assert_eq!(macko_mma_smem(Width::W16, 0), 8192 + 8 * per_warp(0));
    // 101 groups: 2020 bytes, 2032 with the next stage 16-byte aligned.
    assert_eq!(macko_mma_smem(Width::W8, 101), 4096 + 8 * per_warp(2032));
}

//! The few-token plans (plan.rs, "Few-token products") from tables of capabilities (H100, lavapipe, AMD-like, Intel-like).

use macko_format::MatrixKind;

use super::*;
use crate::backend::wgpu::tiles::TilePlan;

/// (subgroup min, subgroup max, workgroup storage, max invocations).
type Caps = (u32, u32, u32, u32);
const H100: Caps = (32, 32, 49152, 1024);
const LAVAPIPE: Caps = (8, 8, 32768, 1024);
const AMD: Caps = (64, 64, 65536, 1024);
const INTEL: Caps = (16, 32, 65536, 1024);
const SMALL: Caps = (4, 4, 16384, 64);

fn caps((subgroup_min, subgroup_max, workgroup_storage, max_invocations): Caps) -> WgpuCaps {
    WgpuCaps {
        subgroups: true,
        subgroup_min,
        subgroup_max,
        has_f16: true,
        workgroup_storage,
        max_invocations,
        max_workgroups_per_dim: 65535,
    }
}

fn stats(format: MatrixKind, rows: usize, cols: usize) -> MatrixStats {
    MatrixStats {
        format,
        rows,
        cols,
        fill: if format == MatrixKind::Macko {
            0.5
        } else {
            0.0
        },
    }
}

#[test]
fn chunk_widths_are_powers_of_two_from_two_to_sixteen() {
    let want = [2, 2, 4, 4, 8, 8, 8, 8, 16, 16, 16, 16, 16, 16, 16, 16];
    for (count, &w) in (1..=16).zip(&want) {
        assert_eq!(batch_width(count), w, "count {count}");
        assert!(w as usize >= count);
        assert_eq!(BATCH_WIDTHS[width_index(w)], w);
    }
}

#[test]
fn every_width_has_a_plan_for_the_matrix_kernel() {
    let formats = [
        MatrixKind::Macko,
        MatrixKind::Csr,
        MatrixKind::Dense,
        MatrixKind::Sparse24,
    ];
    for c in [H100, LAVAPIPE, AMD, INTEL, SMALL] {
        for subgroups in [true, false] {
            let caps = WgpuCaps {
                subgroups,
                ..caps(c)
            };
            for format in formats {
                let p = plan(&stats(format, 4096, 4096), &caps, &WgpuTuning::default());
                let widths: Vec<u32> = p.batch.iter().map(|b| b.width).collect();
                assert_eq!(widths, BATCH_WIDTHS, "{c:?} {format:?}");
                for b in &p.batch {
                    assert_eq!(b.kernel, p.kernel.for_batch());
                    assert!(b.kernel.is_batch(), "{:?}", b.kernel);
                    assert!(b.workgroup <= caps.max_invocations.max(32));
                    let sg = matches!(
                        b.kernel,
                        Kernel::MackoBatchSubgroup
                            | Kernel::CsrBatchSubgroup
                            | Kernel::Sparse24BatchSubgroup
                    );
                    assert_eq!(sg, subgroups && format != MatrixKind::Dense, "{b:?}");
                }
            }
        }
    }
}

#[test]
fn subgroup_kernels_give_every_row_a_subgroup() {
    for (c, workgroup, rows_per) in [
        (H100, 128, 4),
        (LAVAPIPE, 128, 16),
        (AMD, 128, 2),
        (INTEL, 128, 8),
        (SMALL, 64, 16),
    ] {
        let p = plan(
            &stats(MatrixKind::Macko, 11008, 4096),
            &caps(c),
            &WgpuTuning::default(),
        );
        for b in &p.batch {
            assert_eq!(b.workgroup, workgroup, "{c:?}");
            assert_eq!(
                b.grid,
                Grid::Capped {
                    rows_per_workgroup: rows_per,
                    max: 65535
                },
                "{c:?}"
            );
            // Every row starts at once: subgroups dispatched >= rows.
            let (x, y) = b.grid.dispatch(11008);
            assert!(x * y * (workgroup / c.0) >= 11008, "{c:?}");
        }
    }
}

#[test]
fn the_workgroup_path_and_dense_take_one_or_two_rows_per_workgroup() {
    let wg = WgpuCaps {
        subgroups: false,
        ..caps(H100)
    };
    for (format, c, rows) in [
        (MatrixKind::Macko, wg.clone(), 1),
        (MatrixKind::Csr, wg.clone(), 1),
        (MatrixKind::Dense, wg, 2),
        (MatrixKind::Dense, caps(H100), 2),
    ] {
        let p = plan(&stats(format, 1000, 300), &c, &WgpuTuning::default());
        for b in &p.batch {
            assert_eq!(b.workgroup, 64);
            assert_eq!(
                b.grid,
                Grid::Spread {
                    rows_per_workgroup: rows,
                    max_x: 65535
                }
            );
            assert_eq!(b.grid.dispatch(1000), (1000 / rows, 1));
        }
    }
}

#[test]
fn tiled_macko_matrices_read_their_tile_tables() {
    let t = WgpuTuning {
        x_tile_cols: Some(128),
        ..WgpuTuning::default()
    };
    let p = plan(&stats(MatrixKind::Macko, 300, 2000), &caps(LAVAPIPE), &t);
    assert!(matches!(p.x, XStaging::Tiles(TilePlan { cols: 128, .. })));
    assert!(p.batch.iter().all(|b| b.x_tiled));
    let p = plan(
        &stats(MatrixKind::Macko, 300, 2000),
        &caps(LAVAPIPE),
        &WgpuTuning::default(),
    );
    assert!(p.batch.iter().all(|b| !b.x_tiled));
}

#[test]
fn the_tuning_sets_the_workgroup_and_caps_the_grid() {
    let t = WgpuTuning {
        batch_workgroup: Some(512),
        batch_workgroups: Some(3),
        ..WgpuTuning::default()
    };
    let p = plan(&stats(MatrixKind::Csr, 20000, 4096), &caps(H100), &t);
    for b in &p.batch {
        assert_eq!(b.workgroup, 512);
        assert_eq!(b.grid.dispatch(20000), (3, 1));
        let key = b.pipeline_key(true);
        let constants = key.constants();
        assert!(constants.contains(&("W", f64::from(b.width))));
        assert!(constants.contains(&("WORKGROUP", 512.0)));
        assert!(constants.contains(&("Y_F16", 1.0)));
    }
    // Halved to the adapter's limit.
    let p = plan(&stats(MatrixKind::Macko, 20000, 4096), &caps(SMALL), &t);
    assert!(p.batch.iter().all(|b| b.workgroup == 64));
}

//! Unit tests of memory.rs: row blocks, the mask table, x in column tiles on a device.

#[test]
fn the_mask_table_keeps_exactly_the_kept_range() {
    let t = super::mask_table();
    assert_eq!(t[8], [u32::MAX; 4]);
    // Entries 3 and 4: the high half of word 1, the low half of word 2.
    assert_eq!(t[9 * 3 + 5], [0, 0xffff_0000, 0xffff, 0]);
    // (lo, hi) = (1, 8) and (0, 7).
    assert_eq!(t[9 + 8], [0xffff_0000, u32::MAX, u32::MAX, u32::MAX]);
    assert_eq!(t[7], [u32::MAX, u32::MAX, u32::MAX, 0xffff]);
    // Empty ranges, and the unused tail of the table.
    assert_eq!(t[9 * 5 + 2], [0; 4]);
    assert_eq!(t[9 * 8 + 8], [0; 4]);
    assert!(t[81..].iter().all(|w| *w == [0; 4]));
}

use super::*;

#[test]
fn sparse_plan_keeps_whole_rows_within_the_limit() {
    // 6 rows of 10 entries: a block of r rows spans at most 10r + 7 entries in whole groups.
    let row_ptr: Vec<u32> = (0..=6).map(|r| 10 * r).collect();
    let plan = plan_sparse_blocks(&row_ptr, 8, 2, 4, 64, "MACKO").unwrap();
    assert!(plan.len() >= 2);
    assert_eq!(plan.first().unwrap().start, 0);
    assert_eq!(plan.last().unwrap().end, 6);
    for w in plan.windows(2) {
        assert_eq!(w[0].end, w[1].start);
    }
    for r in &plan {
        let base = row_ptr[r.start] / 8 * 8;
        let end = row_ptr[r.end].div_ceil(8) * 8;
        assert!(2 * (end - base) <= 64, "{r:?}");
    }
}

#[test]
fn a_row_too_long_for_the_limit_is_too_large() {
    let row_ptr = [0u32, 8, 200];
    assert!(matches!(
        plan_sparse_blocks(&row_ptr, 8, 2, 4, 64, "MACKO"),
        Err(Error::TooLarge { .. })
    ));
}

#[test]
fn empty_matrices_have_no_blocks() {
    assert!(plan_sparse_blocks(&[0], 8, 2, 4, 64, "MACKO")
        .unwrap()
        .is_empty());
    assert_eq!(plan_dense_blocks(0, 0, 64).unwrap(), 1);
    assert_eq!(plan_dense_blocks(10, 32, 64).unwrap(), 2);
    assert!(plan_dense_blocks(10, 128, 64).is_err());
}

/// x in column tiles (`X_TILED`), forced on narrow matrices by capping a tile at 128
/// columns, with bindings capped at 8 KiB (matrices split into row blocks) and a grid of 3
/// workgroups: the matrices are tiled (checked, so a path that silently stopped tiling
/// fails here), split into row blocks (each with its partial sums at its own offset), and
/// every product agrees with the f64 reference in f16 and f32 y, repeated (the partials of
/// one product never leak into the next), with x ±∞ or NaN over columns that hold only
/// padding in one tile and finite in the others (each tile decides its zero select alone),
/// and with a row whose entries all lie in the last tile.
#[test]
fn tiled_x_agrees_with_the_reference() {
    use super::super::config::WgpuConfig;
    use super::super::tuning::WgpuTuning;
    use macko_format::reference::{self, OutputPrecision};
    let config = WgpuConfig {
        allow_software_adapter: true,
        max_binding_bytes: Some(8 << 10),
        tuning: WgpuTuning {
            x_tile_cols: Some(128),
            macko_workgroups: Some(3),
            ..WgpuTuning::default()
        },
        ..WgpuConfig::default()
    };
    let b = match WgpuBackend::open(&config) {
        Ok(b) => b,
        Err(e) => {
            println!("skipping: {e}");
            return;
        }
    };
    if !b.caps.subgroups {
        println!(
            "skipping: {} (tiles are the subgroup kernel's)",
            b.path_reason
        );
        return;
    }
    let check = |m: &MackoMatrix, x: &[f16], what: &str| {
        let a = b.upload_matrix_impl(MatrixRef::Macko(m)).unwrap();
        let XStaging::Tiles(plan) = a.plan.x else {
            panic!("{what}: not tiled: {:?}", a.plan);
        };
        assert_eq!(plan.cols, 128, "{what}");
        assert_eq!(plan.tiles as usize, m.cols().div_ceil(128), "{what}");
        let r = reference::spmv_macko(m, x).unwrap();
        let xv = b.upload_vector_impl(x).unwrap();
        for p in [Precision::F16, Precision::F32] {
            let y = b.alloc_vector_impl(m.rows(), p).unwrap();
            for _ in 0..3 {
                b.spmv_impl(&a, &xv, &y, 1).unwrap();
            }
            let got = b.download_impl(&y).unwrap();
            let out: OutputPrecision = got.precision();
            if let Some(bad) = r.first_disagreement(&got.to_f64(), out) {
                panic!("{what} ({p:?} y): row, got, want, tolerance {bad:?}");
            }
        }
        a.blocks.len()
    };
    for (i, &(rows, cols, d)) in [(37, 1001, 0.3), (90, 700, 1.0), (64, 530, 0.05)]
        .iter()
        .enumerate()
    {
        let dense = crate::synthetic::pruned_matrix(rows, cols, d, 40 + i as u64).unwrap();
        let m = MackoMatrix::from_dense(&dense).unwrap();
        let x = crate::synthetic::activations(cols, 40 + i as u64);
        let blocks = check(&m, &x, &format!("{rows}×{cols} d = {d}"));
        if d == 1.0 {
            assert!(blocks > 1, "{blocks} block");
        }
    }
    // Rows 0..4 hold entries only at columns 300.., row 4 only at column 399; x is NaN or
    // ±∞ over columns 128..256 (tile 1), where the stored entries are all padding.
    let cols = 400;
    let mut values = vec![f16::ZERO; 5 * cols];
    for r in 0..4 {
        for c in (300 + r..cols).step_by(7) {
            values[r * cols + c] = f16::from_f32(0.25 * (c % 5) as f32 - 0.5);
        }
        values[r * cols + r] = f16::ONE;
    }
    values[4 * cols + 399] = f16::from_f32(3.0);
    let m = MackoMatrix::from_dense(&DenseMatrix::new(5, cols, values).unwrap()).unwrap();
    assert!(m.values().iter().any(|v| v.to_bits() == 0));
    let mut x = crate::synthetic::activations(cols, 7);
    for (c, xc) in x.iter_mut().enumerate().take(256).skip(128) {
        *xc = [f16::NAN, f16::INFINITY, f16::NEG_INFINITY][c % 3];
    }
    check(&m, &x, "NaN/∞ over padding in tile 1");
}

//! The MACKO subgroup kernel's two-rows-per-subgroup path (`MACKO_WGPU_HALF_ROWS=1`,
//! `HALF_ROWS` in shaders/macko_sg.wgsl; off by default): each half of a subgroup computes its own
//! row of a pair, and the steps go on while either row has groups left. Checked under the knob
//! shapes and on shapes that stress the pairing: an odd number of rows (the last pair's second
//! row lies past the matrix), a single row, empty rows (one at entry 0), rows starting and ending
//! at every offset in a group, and neighbouring rows of very different lengths (one half done
//! while the other has many steps left), in a grid of 3 workgroups (every subgroup works through
//! many pairs); then again with x gathered from memory (`MACKO_WGPU_X_IN_WORKGROUP=0`, where the
//! guarded copy of the loop runs). The settings are environment variables read when a device
//! opens; this file is its own process, so they reach no other test.
#![cfg(feature = "wgpu")]

mod common;

use half::f16;
use macko::DenseMatrix;

use common::{
    check_all_formats, check_macko_shapes, open_wgpu_subgroup_or_skip, ragged_matrix, random_x,
    KNOB_SHAPES,
};

/// Rows whose lengths differ by orders of magnitude from one row to the next: empty, a handful
/// of entries, and up to 90 % of `cols`, with row 0 empty and row 1 among the longest (so the
/// first pair has an empty row at entry 0 beside a long one).
fn mixed_lengths(rows: usize, cols: usize) -> DenseMatrix {
    const DENSITY_PER_MILLE: [usize; 9] = [0, 900, 2, 0, 500, 10, 0, 3, 250];
    let mut values = vec![f16::ZERO; rows * cols];
    for r in 0..rows {
        let d = DENSITY_PER_MILLE[r % DENSITY_PER_MILLE.len()];
        for c in 0..cols {
            let h = ((r * 131 + c * 7919) as u64).wrapping_mul(2_654_435_761) >> 7;
            if (h % 1000) < d as u64 {
                let v = ((r + c) % 17) as f32 - 8.0;
                values[r * cols + c] = f16::from_f32(v / 8.0 + 0.0625);
            }
        }
    }
    DenseMatrix::new(rows, cols, values).unwrap()
}

/// The shapes built to stress the pairing, beside the knob shapes.
fn check_pairing(dev: &macko::Device, seed0: u64) {
    check_macko_shapes(
        dev,
        &[
            (101, 3000, 0.1),
            (1, 5000, 0.2),
            (2, 700, 0.3),
            (200, 12288, 0.1),
        ],
        seed0,
    );
    for (name, dense) in [
        ("ragged 203×300", ragged_matrix(203, 300)),
        ("mixed lengths 99×3000", mixed_lengths(99, 3000)),
        ("mixed lengths 8×9000", mixed_lengths(8, 9000)),
    ] {
        let x = random_x(dense.cols(), seed0 + 10);
        check_all_formats("wgpu", dev, name, &dense, &x);
    }
}

#[test]
fn macko_agrees_with_two_rows_per_subgroup() {
    std::env::set_var("MACKO_WGPU_HALF_ROWS", "1");
    // Pairs claimed from the counter (tests/wgpu_macko_static_rows.rs deals them by stride).
    std::env::set_var("MACKO_WGPU_STATIC_ROWS", "0");
    std::env::set_var("MACKO_WGPU_MACKO_WORKGROUPS", "3");
    let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
        return;
    };
    for what in ["two rows per subgroup", "at most 3 workgroups"] {
        assert!(kernels.contains(what), "{what}: {kernels}");
    }
    check_macko_shapes(&dev, &KNOB_SHAPES, 400);
    check_pairing(&dev, 410);

    // x gathered from memory: never known finite, so the guarded copy of the pair loop runs.
    std::env::set_var("MACKO_WGPU_X_IN_WORKGROUP", "0");
    let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
        return;
    };
    for what in ["two rows per subgroup", "gathers x from memory"] {
        assert!(kernels.contains(what), "{what}: {kernels}");
    }
    check_macko_shapes(&dev, &KNOB_SHAPES[..3], 430);
    check_pairing(&dev, 440);
}

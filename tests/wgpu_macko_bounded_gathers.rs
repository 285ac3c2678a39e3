//! The MACKO subgroup kernel compiled without naga's per-access clamps (`BOUNDED_GATHERS` in
//! shaders/macko.wgsl, `MACKO_WGPU_BOUNDED_GATHERS=1`), whose pipelined loop keeps every gather of
//! x inside the staged slots by construction (row_dot_piped in shaders/macko_sg.wgsl). A gather
//! outside them would read whatever lies there, usually a finite value that a masked entry's zero
//! then hides, so no product could show it; the test hook `MACKO_WGPU_GATHER_PROBE=1` makes such
//! a gather read NaN instead, which reaches y. With x rounded to granules of 8 words (so the
//! staged slots end right after the slack the argument needs), over rows that start and end in
//! every position of a step, rows mostly padding, the ragged matrix, x in column tiles of 128
//! (parts whose first count lies before the tile), padded x, and x holding NaN and ±∞ (the
//! guarded copy of the loop), every product must still agree with the reference. The settings
//! are environment variables read when a device opens; this file is its own process.
#![cfg(feature = "wgpu")]

mod common;

use common::{
    check_macko_product, check_macko_shapes, open_wgpu_subgroup_or_skip, ragged_matrix,
    random_dense,
};
use macko::half::f16;
use macko::MackoMatrix;

/// Rows of random lengths at several densities, all 1030 columns wide (each width staged is a
/// pipeline of its own at this granule, and compiling is what takes time on a CPU adapter): rows
/// that start and end in every position of a step (subgroups of 8 to 64 lanes, 2 groups of 8
/// entries per lane per step), long rows, and rows mostly padding.
const STEP_SHAPES: [(usize, usize, f64); 4] = [
    (50, 1030, 1.0),
    (40, 1030, 0.5),
    (60, 1030, 0.3),
    (70, 1030, 0.05),
];

/// (settings, seed): whole x (rows aligned, two rows per subgroup at low fill); x in column
/// tiles of 128; padded x; two rows per subgroup everywhere; the format's own layout (masked
/// steps).
const SETTINGS: [(&[(&str, &str)], u64); 5] = [
    (&[], 1000),
    (&[("MACKO_WGPU_X_TILE_COLS", "128")], 1040),
    (&[("MACKO_WGPU_X_PAD", "1")], 1080),
    (&[("MACKO_WGPU_HALF_ROWS", "1")], 1120),
    (&[("MACKO_WGPU_ALIGNED_ROWS", "0")], 1160),
];

#[test]
fn bounded_gathers_stay_inside_the_staged_x() {
    std::env::set_var("MACKO_WGPU_BOUNDED_GATHERS", "1");
    std::env::set_var("MACKO_WGPU_GATHER_PROBE", "1");
    std::env::set_var("MACKO_WGPU_X_WORDS_GRANULE", "8");
    std::env::set_var("MACKO_WGPU_MACKO_WORKGROUPS", "3");
    for (settings, seed) in SETTINGS {
        for (name, value) in settings {
            std::env::set_var(name, value);
        }
        let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
            return;
        };
        if !kernels.contains("as f16 scalars") {
            println!("skipping: no f16 scalars on this adapter, so no bounded gathers");
            return;
        }
        for what in ["gathers bounded by construction", "gathers probed"] {
            assert!(kernels.contains(what), "{what}: {kernels}");
        }
        check_macko_shapes(&dev, &STEP_SHAPES, seed);
        check_ragged(&dev);
        check_non_finite_x(&dev, seed + 30);
        for (name, _) in settings {
            std::env::remove_var(name);
        }
    }
}

/// The ragged 203×300 matrix (empty rows, rows of every length), f16 and f32 y.
fn check_ragged(dev: &macko::Device) {
    let m = MackoMatrix::from_dense(&ragged_matrix(203, 300)).unwrap();
    let x: Vec<f16> = (0..300)
        .map(|c| f16::from_f32(((c % 7) as f32 - 3.0) / 2.0))
        .collect();
    check_macko_product("wgpu", dev, "ragged 203×300", &m, &x);
}

/// x holding NaN, +∞ and −∞ (the loop that keeps its zero select) on a matrix with rows of many
/// lengths: rows that meet them are NaN or infinite in the reference, the others must not be.
fn check_non_finite_x(dev: &macko::Device, seed: u64) {
    let (rows, cols) = (70, 1030);
    let m = MackoMatrix::from_dense(&random_dense(rows, cols, 0.2, seed)).unwrap();
    let mut x: Vec<f16> = (0..cols)
        .map(|c| f16::from_f32(((c % 11) as f32 - 5.0) / 4.0))
        .collect();
    x[3] = f16::NAN;
    x[450] = f16::INFINITY;
    x[1029] = f16::NEG_INFINITY;
    check_macko_product("wgpu", dev, "non-finite x", &m, &x);
}

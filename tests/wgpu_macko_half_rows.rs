//! Two rows per exact subgroup in the MACKO subgroup kernel (`HALF_ROWS` in
//! shaders/macko_sg.wgsl, `MACKO_WGPU_HALF_ROWS`): each half of a subgroup works through its own
//! row-aligned row, the halves step together until both rows are done, and each half's first
//! lane stores its row. Checked forced on (every matrix), with a grid of 3 workgroups (many
//! pairs per subgroup), on pairs of rows of unequal lengths, empty rows, an odd row count (the
//! last pair's second row past the matrix), fewer rows than subgroups, f16 y (the two rows of a
//! pair share a word) and f32 y, and x holding NaN and ±∞ (the guarded copy); then off, and by
//! default (sparse matrices only). The settings are environment variables read when a device
//! opens; this file is its own process, so they reach no other test.
#![cfg(feature = "wgpu")]

mod common;

use common::{
    check_macko_product, check_shapes_and_ragged, open_wgpu_subgroup_or_skip, random_dense,
};
use macko::half::f16;
use macko::MackoMatrix;

/// Rows of random lengths (pairs of unequal ones), many short rows with empty ones among them,
/// an odd row count, long rows of many steps, and fewer rows than a workgroup has subgroups.
const SHAPES: [(usize, usize, f64); 6] = [
    (601, 300, 0.1),
    (300, 1030, 0.02),
    (77, 1030, 0.5),
    (40, 1030, 1.0),
    (3, 300, 0.3),
    (1, 1030, 0.1),
];

/// The "kernels" property's text for each setting of the knob.
const SETTINGS: [(&str, &str); 3] = [
    ("1", "two rows per subgroup (rows aligned"),
    ("0", ""),
    ("auto", "two rows per subgroup below fill 0.2"),
];

#[test]
fn macko_agrees_with_two_rows_per_subgroup() {
    std::env::set_var("MACKO_WGPU_MACKO_WORKGROUPS", "3");
    for (i, (half, text)) in SETTINGS.iter().enumerate() {
        std::env::set_var("MACKO_WGPU_HALF_ROWS", half);
        let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
            return;
        };
        if !text.is_empty() {
            assert!(kernels.contains(text), "{text}: {kernels}");
        } else {
            assert!(!kernels.contains("two rows per subgroup"), "{kernels}");
        }
        let seed = 1400 + 40 * i as u64;
        check_shapes_and_ragged(&dev, &SHAPES, seed);
        check_non_finite_x(&dev, seed + 30);
    }
}

/// x holding NaN, +∞ and −∞ on a sparse matrix of rows of many lengths (the pairs' guarded
/// loop): rows whose stored entries meet them are NaN or infinite in the reference, the others
/// must not be, padding included.
fn check_non_finite_x(dev: &macko::Device, seed: u64) {
    let (rows, cols) = (81, 1030);
    let m = MackoMatrix::from_dense(&random_dense(rows, cols, 0.1, seed)).unwrap();
    let mut x: Vec<f16> = (0..cols)
        .map(|c| f16::from_f32(((c % 11) as f32 - 5.0) / 4.0))
        .collect();
    x[7] = f16::NAN;
    x[500] = f16::INFINITY;
    x[cols - 1] = f16::NEG_INFINITY;
    check_macko_product("wgpu", dev, "non-finite x", &m, &x);
}

//! MACKO matrices uploaded row-aligned for the subgroup kernel (format/src/aligned.rs,
//! `ALIGNED_ROWS` in shaders/macko_sg.wgsl, `MACKO_WGPU_ALIGNED_ROWS`): every row starts at a
//! whole group and ends in zero padding, a group of zeros follows each block's last row, and the
//! pipelined loop masks nothing, reading the zero group for a step's groups past a row's end.
//! Checked on and off, with x staged and gathered from memory, on rows that end in every position
//! of a step, many short and empty rows, rows mostly padding, the ragged matrix, x holding NaN
//! and ±∞ next to the padding's columns, and blocks split by a small binding limit (a zero group
//! per block; there with two rows per subgroup, elsewhere one). The settings are environment
//! variables read when a device opens; this file is its own process, so they reach no other
//! test.
#![cfg(feature = "wgpu")]

mod common;

use common::{
    check_macko_product, check_macko_shapes, check_shapes_and_ragged, kernels_property,
    open_or_skip, open_wgpu_subgroup_or_skip, random_dense, KNOB_SHAPES,
};
use macko::half::f16;
use macko::{BackendKind, DeviceOptions, MackoMatrix};

/// Rows that end in every position of a step (subgroups of 8 to 64 lanes, 2 groups per lane per
/// step), long rows, many short rows with empty ones among them, and rows mostly padding.
const SHAPES: [(usize, usize, f64); 6] = [
    (50, 130, 1.0),
    (40, 1030, 0.5),
    (30, 9000, 0.3),
    (600, 64, 0.1),
    (300, 500, 0.02),
    (70, 2000, 0.05),
];

/// The "kernels" property's text when the layout is on.
const ON: &str = "rows aligned to groups";

#[test]
fn macko_agrees_with_rows_aligned_and_not() {
    std::env::set_var("MACKO_WGPU_MACKO_WORKGROUPS", "3");
    // One row per subgroup here (two per subgroup, which reads the same layout, is
    // tests/wgpu_macko_half_rows.rs; and the blocks below).
    std::env::set_var("MACKO_WGPU_HALF_ROWS", "0");
    // (aligned, x staged in workgroup memory, seed)
    for (aligned, staged, seed) in [("1", "1", 1200), ("1", "0", 1240), ("0", "1", 1280)] {
        std::env::set_var("MACKO_WGPU_ALIGNED_ROWS", aligned);
        std::env::set_var("MACKO_WGPU_X_IN_WORKGROUP", staged);
        let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
            return;
        };
        assert_eq!(kernels.contains(ON), aligned == "1", "{kernels}");
        check_shapes_and_ragged(&dev, &SHAPES, seed);
        if aligned == "1" && staged == "1" {
            // The default: also every path the knob tests walk (pipelines of more widths, which
            // a CPU adapter compiles slowly, so not in every setting).
            check_macko_shapes(&dev, &KNOB_SHAPES, seed + 20);
        }
        check_non_finite_x(&dev, seed + 30);
    }
    std::env::remove_var("MACKO_WGPU_X_IN_WORKGROUP");
    check_blocks();
}

/// Row-aligned blocks, each ending in its own zero group: one test with the one above, as both
/// set the process's environment.
fn check_blocks() {
    std::env::set_var("MACKO_WGPU_ALIGNED_ROWS", "1");
    // Two rows per subgroup: pairs whose halves read up to the zero group of their block.
    std::env::set_var("MACKO_WGPU_HALF_ROWS", "1");
    // 8 KiB per binding: a 300×2000 matrix at d = 0.3 (~200 KB of values) takes dozens of
    // blocks, each with rows cut wherever the limit falls.
    let opts = DeviceOptions {
        max_binding_bytes: Some(8 << 10),
        ..DeviceOptions::for_backend(BackendKind::Wgpu)
    };
    let Some(dev) = open_or_skip("wgpu", &opts) else {
        return;
    };
    let kernels = kernels_property(&dev);
    if !kernels.contains("subgroup operations") {
        println!("skipping: no subgroup path on this adapter");
        return;
    }
    assert!(kernels.contains(ON), "{kernels}");
    for (i, &(rows, cols, d)) in [(300, 2000, 0.3), (500, 700, 0.05), (90, 1500, 1.0)]
        .iter()
        .enumerate()
    {
        let m = MackoMatrix::from_dense(&random_dense(rows, cols, d, 1300 + i as u64)).unwrap();
        let x: Vec<f16> = (0..cols)
            .map(|c| f16::from_f32(((c % 9) as f32 - 4.0) / 4.0))
            .collect();
        check_macko_product(
            "wgpu",
            &dev,
            &format!("{rows}×{cols} d={d}, blocks"),
            &m,
            &x,
        );
    }
}

/// x holding NaN, +∞ and −∞ right after rows' last entries (where the padding's columns fall)
/// and elsewhere: rows whose stored entries meet them are NaN or infinite in the reference, the
/// others must not be, padding included.
fn check_non_finite_x(dev: &macko::Device, seed: u64) {
    let (rows, cols) = (80, 1030);
    let m = MackoMatrix::from_dense(&random_dense(rows, cols, 0.2, seed)).unwrap();
    let mut x: Vec<f16> = (0..cols)
        .map(|c| f16::from_f32(((c % 11) as f32 - 5.0) / 4.0))
        .collect();
    for (r, bad) in [(3, f16::NAN), (17, f16::INFINITY), (40, f16::NEG_INFINITY)] {
        // One past row r's last stored entry: the first padding entry's column.
        let last = m.row_entries(r).map(|(c, _)| c).max().unwrap_or(0);
        if last + 1 < cols {
            x[last + 1] = bad;
        }
    }
    x[cols - 1] = f16::NAN;
    check_macko_product("wgpu", dev, "non-finite x after rows' ends", &m, &x);
}

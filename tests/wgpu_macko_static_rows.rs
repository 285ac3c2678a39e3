//! The MACKO subgroup kernel with rows dealt out by a fixed stride (`STATIC_ROWS` in
//! shaders/macko_sg.wgsl; the default since session 6, set here explicitly all the same) instead
//! of the atomic counter: subgroup k of the dispatch takes rows k, k + n, k + 2n, ... Checked
//! under the knob shapes in a grid of 3 workgroups (every subgroup works through many rows, the
//! stride crossing workgroups), on matrices of fewer rows than subgroups (subgroups with no row
//! at all), with rows one step ahead and two, and with x gathered from memory. The settings are
//! environment variables read when a device opens; this file is its own process, so they reach
//! no other test.
#![cfg(feature = "wgpu")]

mod common;

use common::{
    check_macko_shapes, check_shapes_and_ragged, open_wgpu_subgroup_or_skip, KNOB_SHAPES,
};

/// Shapes whose rows are fewer than, about as many as, and many times the dispatch's subgroups.
const STRIDE_SHAPES: [(usize, usize, f64); 4] = [
    (1, 5000, 0.2),
    (7, 300, 0.5),
    (257, 3000, 0.1),
    (1000, 64, 0.9),
];

#[test]
fn macko_agrees_with_rows_by_stride() {
    std::env::set_var("MACKO_WGPU_STATIC_ROWS", "1");
    std::env::set_var("MACKO_WGPU_MACKO_WORKGROUPS", "3");
    let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
        return;
    };
    for what in ["rows by stride", "at most 3 workgroups"] {
        assert!(kernels.contains(what), "{what}: {kernels}");
    }
    check_macko_shapes(&dev, &KNOB_SHAPES, 500);
    check_shapes_and_ragged(&dev, &STRIDE_SHAPES, 510);

    // Two rows in flight per subgroup (the row after next computed by the stride too), and the
    // default grid, where small matrices leave subgroups without a row.
    std::env::remove_var("MACKO_WGPU_MACKO_WORKGROUPS");
    std::env::set_var("MACKO_WGPU_ROW_AHEAD", "2");
    let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
        return;
    };
    assert!(kernels.contains("rows by stride"), "{kernels}");
    assert!(!kernels.contains("one row ahead"), "{kernels}");
    check_macko_shapes(&dev, &KNOB_SHAPES[..3], 520);
    check_shapes_and_ragged(&dev, &STRIDE_SHAPES, 530);

    // x gathered from memory: the guarded copy of the row loop.
    std::env::remove_var("MACKO_WGPU_ROW_AHEAD");
    std::env::set_var("MACKO_WGPU_X_IN_WORKGROUP", "0");
    let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
        return;
    };
    for what in ["rows by stride", "gathers x from memory"] {
        assert!(kernels.contains(what), "{what}: {kernels}");
    }
    check_shapes_and_ragged(&dev, &STRIDE_SHAPES, 540);
}

//! The MACKO subgroup kernel's padded f16 x (`X_PAD` in shaders/macko_x_f16.wgsl: one unused
//! word after every 32, chosen by default for nearly dense matrices): forced on for every density
//! (`MACKO_WGPU_X_PAD=on`), on widths around the pads (63, 64, 65, 127, 128, 129 columns, where a
//! column's slot and its word's first slot disagree if the pad is misplaced) and wide ones, in a
//! grid of 3 workgroups; then forced off on nearly dense rows, which would take it by default.
//! The settings are environment variables read when a device opens; this file is its own
//! process, so they reach no other test.
#![cfg(feature = "wgpu")]

mod common;

use common::{check_macko_shapes, open_wgpu_subgroup_or_skip, KNOB_SHAPES};

/// Widths on both sides of the first two pads, and wide rows of every density.
const PAD_SHAPES: [(usize, usize, f64); 8] = [
    (40, 63, 1.0),
    (40, 64, 1.0),
    (40, 65, 0.9),
    (33, 127, 1.0),
    (33, 128, 0.5),
    (33, 129, 1.0),
    (20, 9000, 1.0),
    (20, 9000, 0.2),
];

#[test]
fn macko_agrees_with_padded_x() {
    std::env::set_var("MACKO_WGPU_X_PAD", "on");
    std::env::set_var("MACKO_WGPU_MACKO_WORKGROUPS", "3");
    let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
        return;
    };
    if !kernels.contains("f16 scalars (padded where it fits)") {
        println!("skipping: x is not staged as f16 scalars here ({kernels})");
        return;
    }
    check_macko_shapes(&dev, &KNOB_SHAPES, 600);
    check_macko_shapes(&dev, &PAD_SHAPES, 610);

    std::env::set_var("MACKO_WGPU_X_PAD", "off");
    let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
        return;
    };
    assert!(kernels.contains("f16 scalars (never padded)"), "{kernels}");
    check_macko_shapes(&dev, &PAD_SHAPES, 620);
}

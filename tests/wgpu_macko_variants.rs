//! The MACKO subgroup kernel in its non-default shapes: two sets of 4 groups per step instead of
//! one, x staged as f32 instead of f16 pairs, swizzled, with the per-entry zero select kept for
//! finite x (`MACKO_WGPU_FAST_FINITE=0`), in workgroups of 128, and a grid of
//! only 3 workgroups (so every subgroup works through many rows and the counter hands out rows
//! far beyond one pass). The settings are environment variables read when a device opens; this
//! file is its own process, so they reach no other test. The defaults are covered by
//! tests/wgpu_backend.rs and tests/agreement.rs.
#![cfg(feature = "wgpu")]

mod common;

use common::{check_macko_shapes, open_wgpu_subgroup_or_skip, KNOB_SHAPES};

#[test]
fn macko_agrees_in_every_tuning_of_the_subgroup_kernel() {
    std::env::set_var("MACKO_WGPU_MACKO_DEPTH", "2");
    std::env::set_var("MACKO_WGPU_X_F32", "1");
    std::env::set_var("MACKO_WGPU_X_SWIZZLE", "1");
    std::env::set_var("MACKO_WGPU_MACKO_WORKGROUP", "128");
    std::env::set_var("MACKO_WGPU_MACKO_WORKGROUPS", "3");
    std::env::set_var("MACKO_WGPU_FAST_FINITE", "0");
    let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
        return;
    };
    assert!(kernels.contains("workgroups of 128, 2 x 4"), "{kernels}");
    assert!(kernels.contains("swizzled"), "{kernels}");
    assert!(kernels.contains("at most 3 workgroups"), "{kernels}");
    assert!(!kernels.contains("no zero select"), "{kernels}");
    check_macko_shapes(&dev, &KNOB_SHAPES, 100);
}

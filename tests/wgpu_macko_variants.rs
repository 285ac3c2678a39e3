//! The MACKO subgroup kernel in its non-default shapes: two sets of 4 groups per step instead of
//! one, x staged as f32 instead of f16 pairs, swizzled, with the per-entry zero select kept for
//! finite x (`MACKO_WGPU_FAST_FINITE=0`), in workgroups of 128, and a grid of
//! only 3 workgroups (so every subgroup works through many rows and the counter hands out rows
//! far beyond one pass). The settings are environment variables read when a device opens; this
//! file is its own process, so they reach no other test. The defaults are covered by
//! tests/wgpu_backend.rs and tests/agreement.rs.
#![cfg(feature = "wgpu")]

mod common;

use common::{check_macko, kernels_property, open_or_skip};

use macko::{BackendKind, DeviceOptions};

#[test]
fn macko_agrees_in_every_tuning_of_the_subgroup_kernel() {
    std::env::set_var("MACKO_WGPU_MACKO_DEPTH", "2");
    std::env::set_var("MACKO_WGPU_X_F32", "1");
    std::env::set_var("MACKO_WGPU_X_SWIZZLE", "1");
    std::env::set_var("MACKO_WGPU_MACKO_WORKGROUP", "128");
    std::env::set_var("MACKO_WGPU_MACKO_WORKGROUPS", "3");
    std::env::set_var("MACKO_WGPU_FAST_FINITE", "0");
    let Some(dev) = open_or_skip("wgpu", &DeviceOptions::for_backend(BackendKind::Wgpu)) else {
        return;
    };
    let kernels = kernels_property(&dev);
    println!("{}: {kernels}", dev.describe());
    if !kernels.contains("subgroup operations") {
        println!("skipping: no subgroup path on this adapter");
        return;
    }
    assert!(kernels.contains("workgroups of 128, 2 x 4"), "{kernels}");
    assert!(kernels.contains("swizzled"), "{kernels}");
    assert!(kernels.contains("at most 3 workgroups"), "{kernels}");
    assert!(!kernels.contains("no zero select"), "{kernels}");
    for (i, &(rows, cols, d)) in [
        (1, 1, 1.0),
        (37, 1001, 0.3),
        (130, 4099, 0.7),
        (300, 2000, 1.0),
        (64, 96, 0.05),
        (5, 9000, 0.5),
    ]
    .iter()
    .enumerate()
    {
        check_macko("wgpu", &dev, rows, cols, d, 100 + i as u64);
    }
}

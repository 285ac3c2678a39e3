//! The MACKO subgroup kernel with x gathered from memory instead of staged in workgroup memory
//! (`MACKO_WGPU_X_IN_WORKGROUP=0`, set before any device opens; this file is its own process, so
//! the setting reaches no other test). The staged path is covered by tests/wgpu_backend.rs.
#![cfg(feature = "wgpu")]

mod common;

use common::{check_macko, kernels_property, open_or_skip};

use macko::{BackendKind, DeviceOptions};

#[test]
fn macko_agrees_with_x_gathered_from_memory() {
    std::env::set_var("MACKO_WGPU_X_IN_WORKGROUP", "0");
    let Some(dev) = open_or_skip("wgpu", &DeviceOptions::for_backend(BackendKind::Wgpu)) else {
        return;
    };
    let kernels = kernels_property(&dev);
    println!("{}: {kernels}", dev.describe());
    assert!(!kernels.contains("stages x"), "{kernels}");
    for (i, &(rows, cols, d)) in [
        (1, 1, 1.0),
        (37, 1001, 0.3),
        (130, 4099, 0.7),
        (64, 96, 0.05),
    ]
    .iter()
    .enumerate()
    {
        check_macko("wgpu", &dev, rows, cols, d, i as u64);
    }
}

//! The MACKO subgroup kernel without its register-trimming defaults (shaders/NOTES.md, "Session
//! 3"), all at once: codes decoded at load (`MACKO_WGPU_LATE_DECODE=0`), two rows ahead
//! (`MACKO_WGPU_ROW_AHEAD=2`), counted lane ids (`MACKO_WGPU_LANE_BUILTINS=0`), and naga's loop
//! bounding back on (`MACKO_WGPU_LOOP_BOUNDS=1`, off by default), in a grid of only 3 workgroups
//! (every subgroup works through many rows). The settings are environment variables read when a
//! device opens; this file is its own process, so they reach no other test. Each knob on its own
//! is covered by running tests/agreement.rs with it set (shaders/NOTES.md says how).
#![cfg(feature = "wgpu")]

mod common;

use common::{check_macko, kernels_property, open_or_skip};

use macko::{BackendKind, DeviceOptions};

#[test]
fn macko_agrees_without_the_register_trimming_defaults() {
    std::env::set_var("MACKO_WGPU_LATE_DECODE", "0");
    std::env::set_var("MACKO_WGPU_ROW_AHEAD", "2");
    std::env::set_var("MACKO_WGPU_LANE_BUILTINS", "0");
    std::env::set_var("MACKO_WGPU_LOOP_BOUNDS", "1");
    std::env::set_var("MACKO_WGPU_MACKO_WORKGROUPS", "3");
    let Some(dev) = open_or_skip("wgpu", &DeviceOptions::for_backend(BackendKind::Wgpu)) else {
        return;
    };
    let kernels = kernels_property(&dev);
    println!("{}: {kernels}", dev.describe());
    if !kernels.contains("subgroup operations") {
        println!("skipping: no subgroup path on this adapter");
        return;
    }
    for what in ["loops bounded by naga", "at most 3 workgroups"] {
        assert!(kernels.contains(what), "{what}: {kernels}");
    }
    for what in ["codes decoded late", "one row ahead", "builtin lane ids"] {
        assert!(!kernels.contains(what), "{what}: {kernels}");
    }
    for (i, &(rows, cols, d)) in [
        (1, 1, 1.0),
        (37, 1001, 0.3),
        (130, 4099, 0.7),
        (300, 2000, 1.0),
        (64, 96, 0.05),
        (5, 9000, 0.5),
        (200, 12288, 0.1),
    ]
    .iter()
    .enumerate()
    {
        check_macko("wgpu", &dev, rows, cols, d, 200 + i as u64);
    }
}

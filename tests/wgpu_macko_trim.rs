//! The MACKO subgroup kernel without its register-trimming defaults (shaders/NOTES.md, "Session
//! 3"), all at once: codes decoded at load (`MACKO_WGPU_LATE_DECODE=0`), two rows ahead
//! (`MACKO_WGPU_ROW_AHEAD=2`), counted lane ids (`MACKO_WGPU_LANE_BUILTINS=0`), and naga's loop
//! bounding back on (`MACKO_WGPU_LOOP_BOUNDS=1`, off by default), in a grid of only 3 workgroups
//! (every subgroup works through many rows). The settings are environment variables read when a
//! device opens; this file is its own process, so they reach no other test. Each knob on its own
//! is covered by running tests/agreement.rs with it set (shaders/NOTES.md says how).
#![cfg(feature = "wgpu")]

mod common;

use common::{check_macko_shapes, open_wgpu_subgroup_or_skip, KNOB_SHAPES};

#[test]
fn macko_agrees_without_the_register_trimming_defaults() {
    std::env::set_var("MACKO_WGPU_LATE_DECODE", "0");
    std::env::set_var("MACKO_WGPU_ROW_AHEAD", "2");
    std::env::set_var("MACKO_WGPU_LANE_BUILTINS", "0");
    std::env::set_var("MACKO_WGPU_LOOP_BOUNDS", "1");
    std::env::set_var("MACKO_WGPU_MACKO_WORKGROUPS", "3");
    let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
        return;
    };
    for what in ["loops bounded by naga", "at most 3 workgroups"] {
        assert!(kernels.contains(what), "{what}: {kernels}");
    }
    for what in ["codes decoded late", "one row ahead", "builtin lane ids"] {
        assert!(!kernels.contains(what), "{what}: {kernels}");
    }
    check_macko_shapes(&dev, &KNOB_SHAPES, 200);
    check_macko_shapes(&dev, &[(200, 12288, 0.1)], 206);
}

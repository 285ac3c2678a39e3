//! The MACKO subgroup kernel with x staged as one f16 per column (`MACKO_WGPU_X_F16=1`,
//! shaders/macko_x_f16.wgsl, composed after `enable f16;`), on adapters with `SHADER_F16`
//! (lavapipe has it): the kernel's paths under the knob shapes, in a grid of 3 workgroups. The
//! setting is an environment variable read when a device opens; this file is its own process, so
//! it reaches no other test. Non-finite x in this form: run tests/agreement.rs with the variable
//! set (shaders/NOTES.md).
#![cfg(feature = "wgpu")]

mod common;

use common::{check_macko_shapes, open_wgpu_subgroup_or_skip, KNOB_SHAPES};

#[test]
fn macko_agrees_with_x_staged_as_f16_scalars() {
    std::env::set_var("MACKO_WGPU_X_F16", "1");
    std::env::set_var("MACKO_WGPU_MACKO_WORKGROUPS", "3");
    let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
        return;
    };
    if !kernels.contains("f16 scalars") {
        println!("skipping: the adapter lacks SHADER_F16 ({kernels})");
        return;
    }
    assert!(kernels.contains("at most 3 workgroups"), "{kernels}");
    check_macko_shapes(&dev, &KNOB_SHAPES, 300);
    check_macko_shapes(&dev, &[(200, 12288, 0.1), (3, 24000, 0.9)], 306);
}

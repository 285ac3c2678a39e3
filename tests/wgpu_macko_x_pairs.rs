//! The MACKO subgroup kernel's two layouts of a staged x: one f16 per column (the default on
//! adapters with `SHADER_F16`, which lavapipe has: shaders/macko_x_f16.wgsl, composed after
//! `enable f16;`) is what tests/agreement.rs and tests/wgpu_backend.rs run (non-finite x
//! included); this file checks the f16 pairs of every other adapter (`MACKO_WGPU_X_F16=0`,
//! shaders/macko_x_words.wgsl) under the knob shapes, in a grid of 3 workgroups. The setting is
//! an environment variable read when a device opens; this file is its own process, so it reaches
//! no other test.
#![cfg(feature = "wgpu")]

mod common;

use common::{check_macko_shapes, open_wgpu_subgroup_or_skip, KNOB_SHAPES};

#[test]
fn macko_agrees_with_x_staged_as_f16_pairs() {
    std::env::set_var("MACKO_WGPU_X_F16", "0");
    std::env::set_var("MACKO_WGPU_MACKO_WORKGROUPS", "3");
    let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
        return;
    };
    assert!(kernels.contains("x staged as f16 pairs"), "{kernels}");
    assert!(kernels.contains("at most 3 workgroups"), "{kernels}");
    check_macko_shapes(&dev, &KNOB_SHAPES, 300);
    check_macko_shapes(&dev, &[(200, 12288, 0.1), (3, 24000, 0.9)], 306);
}

//! The MACKO subgroup kernel's pipelined steps (`PIPELINE` in shaders/macko_sg.wgsl; the
//! default since session 6, set here explicitly all the same): 2 groups per lane per step, the
//! next step's loads issued before the current one is computed. Checked under the knob shapes in
//! a grid of 3 workgroups, on rows that end in every position of a step (one group, a partial
//! first set, a partial second set, exactly one or two steps), with the steps at the rows' ends
//! masked when computed (the default) and when loaded (`MACKO_WGPU_LATE_MASK=0`), both also with
//! the value masks read from the table in the uniform (`MACKO_WGPU_MASK_TABLE=1`), with x
//! gathered from memory (never known finite: the guarded copy of the pipelined loop), and turned
//! off (`MACKO_WGPU_PIPELINE=0`: the unpipelined steps of 4 groups). Matrices are uploaded in
//! the format's own layout here (`MACKO_WGPU_ALIGNED_ROWS=0`), where the masks run: the
//! row-aligned layout, which needs none, is tests/wgpu_macko_aligned_rows.rs. The settings are
//! environment variables read when a device opens; this file is its own process, so they reach
//! no other test.
#![cfg(feature = "wgpu")]

mod common;

use common::{
    check_macko_shapes, check_shapes_and_ragged, open_wgpu_subgroup_or_skip, KNOB_SHAPES,
};

/// Row lengths around the step boundaries of subgroups of 8 to 64 lanes (2 groups of 8 entries
/// per lane per step) at several densities, and long rows of many steps.
const STEP_SHAPES: [(usize, usize, f64); 6] = [
    (50, 130, 1.0),
    (50, 260, 1.0),
    (40, 1030, 1.0),
    (40, 2050, 0.5),
    (30, 9000, 0.3),
    (30, 9000, 1.0),
];

#[test]
fn macko_agrees_with_pipelined_steps() {
    std::env::set_var("MACKO_WGPU_ALIGNED_ROWS", "0");
    std::env::set_var("MACKO_WGPU_PIPELINE", "1");
    std::env::set_var("MACKO_WGPU_MACKO_WORKGROUPS", "3");
    let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
        return;
    };
    assert!(
        kernels.contains("pipelined steps of 2 groups, masked when computed"),
        "{kernels}"
    );
    check_macko_shapes(&dev, &KNOB_SHAPES, 700);
    check_shapes_and_ragged(&dev, &STEP_SHAPES, 710);

    std::env::set_var("MACKO_WGPU_X_IN_WORKGROUP", "0");
    let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
        return;
    };
    for what in ["pipelined steps of 2 groups", "gathers x from memory"] {
        assert!(kernels.contains(what), "{what}: {kernels}");
    }
    check_shapes_and_ragged(&dev, &STEP_SHAPES, 720);

    // Value masks from the table in the uniform (MACKO_WGPU_MASK_TABLE=1), when computed and
    // when loaded.
    std::env::set_var("MACKO_WGPU_MASK_TABLE", "1");
    let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
        return;
    };
    assert!(
        kernels.contains("value masks from a table below nearly dense"),
        "{kernels}"
    );
    check_shapes_and_ragged(&dev, &STEP_SHAPES, 722);
    std::env::set_var("MACKO_WGPU_LATE_MASK", "0");
    let Some((dev, _)) = open_wgpu_subgroup_or_skip() else {
        return;
    };
    check_shapes_and_ragged(&dev, &STEP_SHAPES, 723);
    std::env::remove_var("MACKO_WGPU_LATE_MASK");
    std::env::remove_var("MACKO_WGPU_MASK_TABLE");

    // Masked when loaded (MACKO_WGPU_LATE_MASK=0), the mask's other place.
    std::env::remove_var("MACKO_WGPU_X_IN_WORKGROUP");
    std::env::set_var("MACKO_WGPU_LATE_MASK", "0");
    let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
        return;
    };
    assert!(kernels.contains("masked when loaded"), "{kernels}");
    check_shapes_and_ragged(&dev, &STEP_SHAPES, 725);
    std::env::remove_var("MACKO_WGPU_LATE_MASK");

    // Off: exact subgroups take the unpipelined steps of 4 groups (row_dot_late, scanned by
    // shuffles), which no other test reaches now that the pipelined ones are the default.
    std::env::remove_var("MACKO_WGPU_X_IN_WORKGROUP");
    std::env::set_var("MACKO_WGPU_PIPELINE", "0");
    let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
        return;
    };
    assert!(!kernels.contains("pipelined steps"), "{kernels}");
    check_macko_shapes(&dev, &KNOB_SHAPES, 730);
    check_shapes_and_ragged(&dev, &STEP_SHAPES, 740);
}

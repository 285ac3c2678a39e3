//! The MACKO subgroup kernel with x staged in column tiles (`X_TILED` in shaders/macko.wgsl; the
//! default where x is too wide for workgroup memory), forced on narrow matrices with
//! `MACKO_WGPU_X_TILE_COLS=128` (every matrix of more than 128 columns is then tiled): shapes of
//! 2 to 71 tiles and the ragged matrix, in a grid of 3 workgroups, with the default row loop (and
//! the knob shapes), with two rows ahead, with the counted loop of subgroups that are not exact
//! (`LANE_BUILTINS=0`), with codes decoded when loaded, without the finite-x check, and with x
//! staged as f16 pairs and as f32. (src/backend/wgpu/products.rs checks that matrices are in
//! fact tiled, over row blocks, and with NaN and ±∞ in one tile.) The settings are environment
//! variables read when a device opens; this file is its own process, so they reach no other test.
#![cfg(feature = "wgpu")]

mod common;

use common::{
    check_macko_shapes, check_shapes_and_ragged, open_wgpu_subgroup_or_skip, KNOB_SHAPES,
};

/// Widths of 2 to 71 tiles of 128 columns, rows dense to mostly padding.
const TILE_SHAPES: [(usize, usize, f64); 4] = [
    (20, 129, 1.0),
    (33, 256, 0.5),
    (9, 1500, 0.1),
    (3, 9000, 0.7),
];

/// Opens the device with the settings in the environment and checks the tile shapes and the
/// ragged matrix (with `knobs`, the knob shapes too) from seed `seed`; `false` where there is no
/// subgroup path.
fn check_tiled(seed: u64, knobs: bool) -> bool {
    let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
        return false;
    };
    assert!(
        kernels.contains("in column tiles where it does not fit or is wider than 128 columns"),
        "{kernels}"
    );
    if knobs {
        check_macko_shapes(&dev, &KNOB_SHAPES, seed);
    }
    check_shapes_and_ragged(&dev, &TILE_SHAPES, seed + 10);
    true
}

#[test]
fn macko_agrees_with_x_in_column_tiles() {
    std::env::set_var("MACKO_WGPU_X_TILE_COLS", "128");
    std::env::set_var("MACKO_WGPU_MACKO_WORKGROUPS", "3");
    if !check_tiled(700, true) {
        return;
    }

    // Each setting on top of the defaults, then taken back: two rows ahead; the counted loop;
    // codes decoded when loaded (row_dot, whose start count is then a tile part's); the zero
    // select kept (no finite-x check: only the tile loop's own barrier guards the copy); x as
    // f16 pairs; x as f32; the tile parts in the format's own layout (masked steps: by default
    // each part starts at a whole group, src/backend/wgpu/tiles.rs).
    let settings: [(&[(&str, &str)], u64); 7] = [
        (&[("MACKO_WGPU_ROW_AHEAD", "2")], 720),
        (&[("MACKO_WGPU_LANE_BUILTINS", "0")], 740),
        (&[("MACKO_WGPU_LATE_DECODE", "0")], 745),
        (&[("MACKO_WGPU_FAST_FINITE", "0")], 750),
        (&[("MACKO_WGPU_X_F16", "0")], 760),
        (&[("MACKO_WGPU_X_F16", "0"), ("MACKO_WGPU_X_F32", "1")], 780),
        (&[("MACKO_WGPU_ALIGNED_ROWS", "0")], 790),
    ];
    for (vars, seed) in settings {
        for (name, value) in vars {
            std::env::set_var(name, value);
        }
        check_tiled(seed, false);
        for (name, _) in vars {
            std::env::remove_var(name);
        }
    }

    // Tiles turned off: x staged whole where it fits, else gathered from memory.
    std::env::set_var("MACKO_WGPU_X_TILES", "0");
    let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
        return;
    };
    assert!(!kernels.contains("column tiles where"), "{kernels}");
    check_macko_shapes(&dev, &TILE_SHAPES, 800);
}

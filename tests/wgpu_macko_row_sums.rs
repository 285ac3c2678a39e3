//! How the MACKO subgroup kernel finishes a row (shaders/macko_sg.wgsl, NOTES.md "Session 8"):
//! sums held in lanes and stored together (`HELD_SUMS`, `MACKO_WGPU_HELD_SUMS`) and a row's
//! lanes summed by shuffles xor (`BUTTERFLY_SUM`, `MACKO_WGPU_BUTTERFLY_SUM`), each on and off.
//! The grid is capped at 3 workgroups so that a subgroup takes many more rows than it has lanes
//! (held sums stored in the row loop and after it, the last batch part full), and few-row shapes
//! leave subgroups with none. f16 y (two rows per word, from different subgroups) and f32 y are
//! both checked on every row. The settings are environment variables read when a device opens;
//! this file is its own process, so they reach no other test.
#![cfg(feature = "wgpu")]

mod common;

use common::{check_shapes_and_ragged, open_wgpu_subgroup_or_skip, KNOB_SHAPES};

/// Many short rows (each subgroup of the 3 workgroups takes dozens: several full batches and a
/// part-full one), and an odd row count so the last y word holds one row.
const MANY_ROWS: [(usize, usize, f64); 3] = [(4099, 64, 0.5), (2001, 200, 0.1), (777, 33, 1.0)];

/// (held sums, sums by shuffles, rows ahead) and the text the device's "kernels" property then
/// holds or lacks.
const SETTINGS: [(&str, &str, &str); 5] = [
    ("1", "1", "1"),
    ("1", "0", "1"),
    ("0", "1", "1"),
    ("1", "1", "2"),
    ("0", "0", "1"),
];

#[test]
fn macko_agrees_with_held_sums_and_sums_by_shuffles() {
    std::env::set_var("MACKO_WGPU_MACKO_WORKGROUPS", "3");
    // One row per subgroup: the loop that holds sums (two rows per subgroup store each row).
    std::env::set_var("MACKO_WGPU_HALF_ROWS", "0");
    for (i, &(held, butterfly, ahead)) in SETTINGS.iter().enumerate() {
        std::env::set_var("MACKO_WGPU_HELD_SUMS", held);
        std::env::set_var("MACKO_WGPU_BUTTERFLY_SUM", butterfly);
        std::env::set_var("MACKO_WGPU_ROW_AHEAD", ahead);
        let Some((dev, kernels)) = open_wgpu_subgroup_or_skip() else {
            return;
        };
        for (on, what) in [
            (held == "1", "row sums held in lanes (x staged whole)"),
            (butterfly == "1", "row sums by shuffles"),
        ] {
            assert_eq!(kernels.contains(what), on, "{what}: {kernels}");
        }
        let seed = 900 + 40 * i as u64;
        check_shapes_and_ragged(&dev, &KNOB_SHAPES, seed);
        check_shapes_and_ragged(&dev, &MANY_ROWS, seed + 20);
    }
}

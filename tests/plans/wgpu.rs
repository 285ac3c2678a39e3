//! The wgpu part of the suite: every non-default plan of the wgpu backend's MACKO subgroup kernel, forced through its
//! typed tuning (`WgpuTuning::forced_plans`) in one process: for each, a device opened with
//! that tuning takes the forced plan (asserted on the typed plan of an uploaded matrix), and
//! its products agree with the f64 reference on the shapes that walk the kernel's paths (the
//! knob shapes, the ragged matrix in every format, an x holding NaN and ±∞, and the shapes
//! that concern the plan: column widths around the pads, tiles, many rows per subgroup, ...).
//! Adapters without subgroups skip; plans that need `SHADER_F16` skip on adapters without it.

use crate::common::{
    check_all_formats_batch, check_macko_product, check_macko_shapes, check_shapes_and_ragged,
    kernels_property, open_or_skip, ragged_matrix, random_batch, random_dense, KNOB_SHAPES,
};

use half::f16;
use macko::backend::wgpu::WgpuPlan;
use macko::backend::wgpu::{WgpuTuning, XForm};
use macko::{BackendKind, Device, DeviceMatrix, DeviceOptions, MackoMatrix, Plan};

/// The typed plan of a matrix on a wgpu device.
fn wgpu_plan(dev: &Device, a: &DeviceMatrix) -> WgpuPlan {
    match dev.plan(a).unwrap() {
        Plan::Wgpu(p) => p,
        other => panic!("not a wgpu plan: {other:?}"),
    }
}

/// Rows of many steps and rows shorter than one, in masked and unmasked steps.
const STEP_SHAPES: [(usize, usize, f64); 6] = [
    (50, 130, 1.0),
    (40, 1030, 0.5),
    (40, 2050, 0.5),
    (30, 9000, 0.3),
    (60, 1030, 0.3),
    (70, 1030, 0.05),
];
/// Many rows per subgroup (held sums stored in the row loop and after it), and few rows.
const MANY_ROWS: [(usize, usize, f64); 5] = [
    (4099, 64, 0.5),
    (2001, 200, 0.1),
    (777, 33, 1.0),
    (257, 3000, 0.1),
    (1, 5000, 0.2),
];
/// Widths around the pads of an x staged as padded f16 scalars (one word per 32).
const PAD_SHAPES: [(usize, usize, f64); 8] = [
    (40, 63, 1.0),
    (40, 64, 1.0),
    (40, 65, 0.9),
    (33, 127, 1.0),
    (33, 128, 0.5),
    (33, 129, 1.0),
    (20, 9000, 1.0),
    (20, 9000, 0.2),
];
/// Tiles of 128 columns: one column past a tile, two tiles, many tiles of short rows.
const TILE_SHAPES: [(usize, usize, f64); 4] = [
    (20, 129, 1.0),
    (33, 256, 0.5),
    (9, 1500, 0.1),
    (3, 9000, 0.7),
];
/// Pairs of rows: an odd row count, very sparse rows, a lone row.
const PAIR_SHAPES: [(usize, usize, f64); 5] = [
    (601, 300, 0.1),
    (300, 1030, 0.02),
    (77, 1030, 0.5),
    (3, 300, 0.3),
    (1, 1030, 0.1),
];
/// Wide x staged as f16 pairs.
const WIDE_SHAPES: [(usize, usize, f64); 2] = [(200, 12288, 0.1), (3, 24000, 0.9)];

/// The shapes that concern a forced plan, beyond the knob shapes and the ragged matrix.
fn shapes_of(name: &str) -> &'static [(usize, usize, f64)] {
    match name {
        "few_workgroups" => &MANY_ROWS,
        "x_from_memory" | "format_layout" | "format_layout_masks_built" => &STEP_SHAPES,
        "format_layout_mask_table" | "gather_probe" | "gather_probe_format_layout" => &STEP_SHAPES,
        "x_tiles" | "x_tiles_format_layout" | "x_tiles_pairs" | "gather_probe_tiles" => {
            &TILE_SHAPES
        }
        "x_pairs" => &WIDE_SHAPES,
        "x_padded" | "gather_probe_padded" => &PAD_SHAPES,
        "half_rows" | "gather_probe_half_rows" => &PAIR_SHAPES,
        _ => &[],
    }
}

/// A device of the wgpu backend with `tuning` (and bindings capped at `max_binding_bytes`),
/// or `None` (printed) where there is no adapter or no subgroup path.
fn open_tuned(label: &str, tuning: WgpuTuning, max_binding_bytes: Option<u64>) -> Option<Device> {
    let mut opts = DeviceOptions {
        max_binding_bytes,
        ..DeviceOptions::for_backend(BackendKind::Wgpu)
    };
    opts.tuning.get_or_insert_with(Default::default).wgpu = tuning;
    let dev = open_or_skip(label, &opts)?;
    let kernels = kernels_property(&dev);
    if !kernels.starts_with("subgroup operations") {
        println!("skipping {label}: no subgroup path ({kernels})");
        return None;
    }
    Some(dev)
}

/// The fill at which a forced plan applies (padding: nearly dense; two rows per subgroup:
/// sparse), as the density of a 300×2000 probe matrix.
fn probe_density(name: &str) -> f64 {
    if name.contains("padded") {
        1.0
    } else if name.contains("half_rows") {
        0.1
    } else {
        0.5
    }
}

/// x holding NaN, +∞ and −∞ right after rows' last entries (where padding entries' columns
/// fall) and elsewhere: rows whose stored entries meet them are NaN or infinite in the
/// reference, the others must not be, padding included.
fn check_non_finite_x(dev: &Device, seed: u64) {
    let (rows, cols) = (80, 1030);
    let m = MackoMatrix::from_dense(&random_dense(rows, cols, 0.2, seed)).unwrap();
    let mut x: Vec<f16> = (0..cols)
        .map(|c| f16::from_f32(((c % 11) as f32 - 5.0) / 4.0))
        .collect();
    for (r, bad) in [(3, f16::NAN), (17, f16::INFINITY), (40, f16::NEG_INFINITY)] {
        let last = m.row_entries(r).map(|(c, _)| c).max().unwrap_or(0);
        if last + 1 < cols {
            x[last + 1] = bad;
        }
    }
    x[450] = f16::INFINITY;
    x[cols - 1] = f16::NAN;
    check_macko_product("wgpu", dev, "non-finite x after rows' ends", &m, &x);
}

/// The forced plan `name`: taken, and agreeing with the reference (seeds from `seed`).
fn check_forced(name: &str, seed: u64) {
    let forced = WgpuTuning::forced_plans()
        .into_iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no forced plan {name}"));
    let label = format!("wgpu, {name}");
    let Some(dev) = open_tuned(&label, forced.tuning.clone(), None) else {
        return;
    };
    let probe = |d: f64| {
        let m = MackoMatrix::from_dense(&random_dense(300, 2000, d, seed)).unwrap();
        wgpu_plan(&dev, &dev.upload(&m).unwrap())
    };
    if (name.contains("padded") || name.contains("gather_probe"))
        && probe(0.5).x_form == XForm::Pairs
    {
        println!("skipping {label}: x is not staged as f16 scalars here (no SHADER_F16)");
        return;
    }
    let plan = probe(probe_density(name));
    assert!((forced.taken)(&plan), "{label}: not taken: {plan:?}");
    check_shapes_and_ragged(&dev, &KNOB_SHAPES, seed);
    check_macko_shapes(&dev, shapes_of(name), seed + 20);
    check_non_finite_x(&dev, seed + 40);
    // Few-token products read the plan's layout (tile tables, the format's layout) and take
    // the few-token tuning: chunks of every other width, in every format.
    if name.contains("tiles") || name.contains("format_layout") || name.starts_with("batch_") {
        check_few_token(&label, &dev, seed + 60);
    }
}

/// Few-token products (chunks of 4 and 16 vectors, and 9 + 8) on a tiled-width matrix, a
/// sparse one and the ragged matrix, in every format.
fn check_few_token(label: &str, dev: &Device, seed: u64) {
    let cases = [
        ("300×2000 d=0.5", random_dense(300, 2000, 0.5, seed)),
        ("70×1030 d=0.05", random_dense(70, 1030, 0.05, seed + 1)),
        ("ragged", ragged_matrix(123, 300)),
    ];
    for (name, dense) in &cases {
        for batch in [3, 16, 17] {
            let x = random_batch(dense.cols(), batch, seed + batch as u64);
            check_all_formats_batch(label, dev, name, dense, &x, batch);
        }
    }
}

/// One test per forced plan (run in parallel), and a check that they are all listed.
macro_rules! forced_plan_tests {
    ($($name:ident = $seed:literal),+ $(,)?) => {
        $(
            #[test]
            fn $name() {
                check_forced(stringify!($name), $seed);
            }
        )+

        #[test]
        fn every_forced_plan_is_tested() {
            let tested = [$(stringify!($name)),+];
            for forced in WgpuTuning::forced_plans() {
                assert!(tested.contains(&forced.name), "{} is not tested", forced.name);
            }
        }
    };
}

forced_plan_tests!(
    few_workgroups = 100,
    x_from_memory = 200,
    x_tiles = 300,
    x_tiles_format_layout = 400,
    x_tiles_pairs = 500,
    x_pairs = 600,
    x_padded = 700,
    half_rows = 800,
    format_layout = 900,
    format_layout_masks_built = 1000,
    format_layout_mask_table = 1100,
    workgroup_128 = 1200,
    gather_probe = 1300,
    gather_probe_tiles = 1400,
    gather_probe_padded = 1500,
    gather_probe_half_rows = 1600,
    gather_probe_format_layout = 1700,
    batch_workgroup_64 = 1800,
    batch_few_workgroups = 2000,
);

/// Row-aligned blocks, each ending in its own zero group, with two rows per subgroup (pairs
/// whose halves read up to the zero group of their block): bindings of 8 KiB cut a 300×2000
/// matrix at d = 0.3 into dozens of blocks, rows cut wherever the limit falls.
#[test]
fn row_aligned_blocks_of_pairs() {
    let tuning = WgpuTuning {
        half_rows: Some(true),
        ..WgpuTuning::default()
    };
    let Some(dev) = open_tuned("wgpu, pairs in 8 KiB blocks", tuning, Some(8 << 10)) else {
        return;
    };
    for (i, &(rows, cols, d)) in [(300, 2000, 0.3), (500, 700, 0.05), (90, 1500, 1.0)]
        .iter()
        .enumerate()
    {
        let m = MackoMatrix::from_dense(&random_dense(rows, cols, d, 1900 + i as u64)).unwrap();
        let a = dev.upload(&m).unwrap();
        let plan = wgpu_plan(&dev, &a);
        assert!(plan.aligned_rows && plan.half_rows, "{plan:?}");
        let x: Vec<f16> = (0..cols)
            .map(|c| f16::from_f32(((c % 9) as f32 - 4.0) / 4.0))
            .collect();
        let what = format!("{rows}×{cols} d={d}, blocks");
        check_macko_product("wgpu", &dev, &what, &m, &x);
    }
}

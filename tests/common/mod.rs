//! Shared by the integration tests: the devices under test, seeded random matrices, the golden
//! vectors, and the one comparison against the f64 reference.
#![allow(dead_code)]

use half::f16;
use macko::{
    reference, BackendKind, CsrMatrix, DenseMatrix, Device, DeviceOptions, Error, HostVector,
    MackoMatrix, MatrixRef, OutputPrecision, Precision,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Environment variable naming the backends that must be present (e.g. `cpu,wgpu`).
pub const ENV_REQUIRE: &str = "MACKO_REQUIRE_BACKENDS";

/// Whether `MACKO_REQUIRE_BACKENDS` names this backend.
pub fn required(kind: BackendKind) -> bool {
    std::env::var(ENV_REQUIRE)
        .unwrap_or_default()
        .split(',')
        .any(|s| s.trim().eq_ignore_ascii_case(kind.name()))
}

/// Says what a long test is doing, on the terminal while it runs: written straight to the
/// process's stderr, which the test harness does not capture (it captures `print!` and
/// `eprint!`, whose output it shows only for a failed test). For the steps that take seconds to
/// minutes on CI's two cores: kernels compiled by NVRTC or by a software adapter, real models.
pub fn progress(test: &str, what: std::fmt::Arguments<'_>) {
    use std::io::Write;
    // A failed write to the terminal is no reason to fail a test.
    let _ = writeln!(std::io::stderr().lock(), "    [{test}] {what}");
}

/// Opens a device, or prints why it is skipped; panics when the backend is required. The first
/// wgpu device of a test binary that runs on a software adapter says, on the terminal, why the
/// next tests are slow: each kernel is compiled on first use, seconds each on lavapipe.
pub fn open_or_skip(label: &str, opts: &DeviceOptions) -> Option<Device> {
    static SOFTWARE_NOTED: std::sync::Once = std::sync::Once::new();
    let kind = opts.backend.expect("tests name their backend");
    match Device::with_options(opts) {
        Ok(dev) => {
            println!("testing {label}: {}", dev.describe());
            let software = dev
                .info()
                .properties
                .iter()
                .any(|(k, v)| k == "device type" && v == "Cpu");
            if kind == BackendKind::Wgpu && software {
                SOFTWARE_NOTED.call_once(|| {
                    progress(
                        label,
                        format_args!(
                            "{}: a software adapter; kernels compile on their first use, \
                             seconds each, so the first tests of this binary take a while",
                            dev.describe()
                        ),
                    )
                });
            }
            Some(dev)
        }
        Err(e) if required(kind) => {
            panic!("{label} is required by {ENV_REQUIRE} but unavailable: {e}")
        }
        Err(e) => {
            println!("skipping {label}: {e}");
            None
        }
    }
}

/// Every device configuration the agreement suite covers: the CPU; wgpu with its subgroup
/// kernels, without them, and with a tiny binding cap (row-block splitting); CUDA.
pub fn devices_under_test() -> Vec<(String, Device)> {
    let wgpu = DeviceOptions::for_backend(BackendKind::Wgpu);
    let configs = [
        ("cpu", DeviceOptions::for_backend(BackendKind::Cpu)),
        ("wgpu", wgpu.clone()),
        (
            "wgpu without subgroups",
            DeviceOptions {
                wgpu_subgroups: false,
                ..wgpu.clone()
            },
        ),
        (
            "wgpu with 64 KiB bindings",
            DeviceOptions {
                max_binding_bytes: Some(64 << 10),
                ..wgpu
            },
        ),
        ("cuda", DeviceOptions::for_backend(BackendKind::Cuda)),
    ];
    configs
        .into_iter()
        .filter_map(|(label, opts)| open_or_skip(label, &opts).map(|d| (label.to_string(), d)))
        .collect()
}

/// A seeded dense matrix with about `density` of its elements non-zero, values of mixed sign
/// and magnitude (never exactly zero where kept).
pub fn random_dense(rows: usize, cols: usize, density: f64, seed: u64) -> DenseMatrix {
    let mut rng = StdRng::seed_from_u64(seed);
    let values = (0..rows * cols)
        .map(|_| {
            if rng.random::<f64>() < density {
                let v: f32 = rng.random_range(-2.0..2.0);
                f16::from_f32(if v == 0.0 { 0.5 } else { v })
            } else {
                f16::ZERO
            }
        })
        .collect();
    DenseMatrix::new(rows, cols, values).expect("shape matches")
}

/// A seeded x with values in [-1, 1].
pub fn random_x(cols: usize, seed: u64) -> Vec<f16> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    (0..cols)
        .map(|_| f16::from_f32(rng.random_range(-1.0..1.0)))
        .collect()
}

/// Asserts that a device's y agrees with the reference on every row.
pub fn assert_agrees(label: &str, what: &str, r: &reference::Reference, y: &HostVector) {
    assert_eq!(
        y.len(),
        r.y.len(),
        "{label}, {what}: y has the wrong length"
    );
    let precision: OutputPrecision = y.precision();
    if let Some((row, got, want, tol)) = r.first_disagreement(&y.to_f64(), precision) {
        panic!(
            "{label}, {what} ({precision:?} output): row {row} is {got}, reference {want} (tolerance {tol:e}, {} terms)",
            r.terms[row]
        );
    }
}

/// The golden vectors' folder (fixtures/macko-reference): in the workspace where the test was
/// built, else relative to the working directory (a test binary run from the root of a copy of
/// the repository, as on a GPU machine).
pub fn golden_dir() -> std::path::PathBuf {
    let candidates = [
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/macko-reference"),
        std::path::PathBuf::from("fixtures/macko-reference"),
    ];
    match candidates.iter().find(|d| d.join("manifest.tsv").is_file()) {
        Some(dir) => dir.clone(),
        None => panic!("golden vectors not found (no manifest.tsv) in any of {candidates:?}"),
    }
}

/// The golden cases as `(name, dense matrix)`.
pub fn golden_cases() -> Vec<(String, DenseMatrix)> {
    let dir = golden_dir();
    let manifest = std::fs::read_to_string(dir.join("manifest.tsv"))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    manifest
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            let (name, rows, cols) = (f[0], f[1].parse().unwrap(), f[2].parse().unwrap());
            let bytes = std::fs::read(dir.join(format!("{name}.dense.f16"))).unwrap();
            let values = bytes
                .chunks_exact(2)
                .map(|b| f16::from_bits(u16::from_le_bytes([b[0], b[1]])))
                .collect();
            (
                name.to_string(),
                DenseMatrix::new(rows, cols, values).unwrap(),
            )
        })
        .collect()
}

/// Multiplies `dense` in all three formats on `dev`, both output precisions, and checks each
/// against the reference of its own format.
pub fn check_all_formats(label: &str, dev: &Device, name: &str, dense: &DenseMatrix, x: &[f16]) {
    let macko = MackoMatrix::from_dense(dense).unwrap();
    let csr = CsrMatrix::from_dense(dense).unwrap();
    let cases: [(&str, MatrixRef, reference::Reference); 3] = [
        (
            "macko",
            (&macko).into(),
            reference::spmv_macko(&macko, x).unwrap(),
        ),
        ("csr", (&csr).into(), reference::spmv_csr(&csr, x).unwrap()),
        (
            "dense",
            dense.into(),
            reference::spmv_dense(dense, x).unwrap(),
        ),
    ];
    let x_dev = dev.upload_vector(x).unwrap();
    for (format, m, r) in cases {
        let a = dev.upload(m).unwrap();
        for precision in [Precision::F16, Precision::F32] {
            let mut y = dev.zeros(dense.rows(), precision).unwrap();
            dev.spmv(&a, &x_dev, &mut y).unwrap();
            let y = dev.download(&y).unwrap();
            assert_agrees(label, &format!("{name} as {format}"), &r, &y);
        }
    }
}

/// Rows of every length from 0 to 40 in sequence, so rows start and end at every offset inside
/// a group of 8 entries, with empty rows and gaps that need padding entries (14–18, 30–34).
pub fn ragged_matrix(rows: usize, cols: usize) -> DenseMatrix {
    let mut values = vec![f16::ZERO; rows * cols];
    for r in 0..rows {
        let len = (r * 7) % 41;
        let gap = [0, 14, 15, 16, 17, 18, 30, 31, 32, 33, 34][r % 11];
        let mut c = r % 5;
        for k in 0..len {
            if c >= cols {
                break;
            }
            values[r * cols + c] = f16::from_f32(((k % 9) as f32 - 4.0) / 4.0 + 0.125);
            c += 1 + if k % 3 == 0 { gap } else { 0 };
        }
    }
    DenseMatrix::new(rows, cols, values).unwrap()
}

/// The device's "kernels" property (which kernel path and tuning it uses).
pub fn kernels_property(dev: &Device) -> String {
    dev.info()
        .properties
        .iter()
        .find(|(k, _)| k == "kernels")
        .map(|(_, v)| v.clone())
        .expect("the device reports its kernels")
}

/// A seeded MACKO matrix times a patterned x on `dev`, f16 and f32 y, checked on every row.
pub fn check_macko(label: &str, dev: &Device, rows: usize, cols: usize, d: f64, seed: u64) {
    let m = MackoMatrix::from_dense(&random_dense(rows, cols, d, seed)).unwrap();
    let x: Vec<f16> = (0..cols)
        .map(|c| f16::from_f32(((c % 13) as f32 - 6.0) / 8.0))
        .collect();
    check_macko_product(label, dev, &format!("{rows}×{cols} d={d}"), &m, &x);
}

/// `m` times `x` on `dev`, f16 and f32 y, checked on every row against the f64 reference.
pub fn check_macko_product(label: &str, dev: &Device, what: &str, m: &MackoMatrix, x: &[f16]) {
    let r = reference::spmv_macko(m, x).unwrap();
    let a = dev.upload(m).unwrap();
    let x_dev = dev.upload_vector(x).unwrap();
    for p in [Precision::F16, Precision::F32] {
        let mut y = dev.zeros(m.rows(), p).unwrap();
        dev.spmv(&a, &x_dev, &mut y).unwrap();
        assert_agrees(label, what, &r, &dev.download(&y).unwrap());
    }
}

/// Shapes (rows, cols, density) that walk the MACKO subgroup kernel's paths under a tuning knob:
/// one entry, rows shorter than a step, rows of many steps, dense rows, rows mostly padding, a
/// few very long rows.
pub const KNOB_SHAPES: [(usize, usize, f64); 6] = [
    (1, 1, 1.0),
    (37, 1001, 0.3),
    (130, 4099, 0.7),
    (300, 2000, 1.0),
    (64, 96, 0.05),
    (5, 9000, 0.5),
];

/// The wgpu device with the settings already in the environment, and its "kernels" property,
/// or `None` (printed) where there is no adapter or no subgroup path to test.
pub fn open_wgpu_subgroup_or_skip() -> Option<(Device, String)> {
    let dev = open_or_skip("wgpu", &DeviceOptions::for_backend(BackendKind::Wgpu))?;
    let kernels = kernels_property(&dev);
    println!("{}: {kernels}", dev.describe());
    if !kernels.contains("subgroup operations") {
        println!("skipping: no subgroup path on this adapter");
        return None;
    }
    Some((dev, kernels))
}

/// [`check_macko`] on every shape of `shapes`, seeds from `seed0` on.
pub fn check_macko_shapes(dev: &Device, shapes: &[(usize, usize, f64)], seed0: u64) {
    for (i, &(rows, cols, d)) in shapes.iter().enumerate() {
        check_macko("wgpu", dev, rows, cols, d, seed0 + i as u64);
    }
}

/// `check_macko_shapes`, then the ragged 203×300 matrix (empty rows, rows of every length) in
/// every format: what the knob tests of the row loop check besides their own shapes.
pub fn check_shapes_and_ragged(dev: &Device, shapes: &[(usize, usize, f64)], seed0: u64) {
    check_macko_shapes(dev, shapes, seed0);
    let dense = ragged_matrix(203, 300);
    let x = random_x(dense.cols(), seed0 + 10);
    check_all_formats("wgpu", dev, "ragged 203×300", &dense, &x);
}

/// `batch` seeded vectors of `cols` elements, one after another (`[batch][cols]`).
pub fn random_batch(cols: usize, batch: usize, seed: u64) -> Vec<f16> {
    (0..batch)
        .flat_map(|b| random_x(cols, seed.wrapping_mul(1000).wrapping_add(b as u64)))
        .collect()
}

/// Multiplies `dense` by `batch` vectors at once ([`Device::spmm`]) in all three formats, both
/// output precisions, and checks every vector's every row against the f64 reference.
pub fn check_all_formats_batch(
    label: &str,
    dev: &Device,
    name: &str,
    dense: &DenseMatrix,
    x: &[f16],
    batch: usize,
) {
    let macko = MackoMatrix::from_dense(dense).unwrap();
    let csr = CsrMatrix::from_dense(dense).unwrap();
    let x_dev = dev.upload_batch(x, batch).unwrap();
    for (format, m) in [
        ("macko", MatrixRef::from(&macko)),
        ("csr", MatrixRef::from(&csr)),
        ("dense", MatrixRef::from(dense)),
    ] {
        let r = reference::spmm(m, x, batch).unwrap();
        let a = dev.upload(m).unwrap();
        for precision in [Precision::F16, Precision::F32] {
            let mut y = dev.zeros_batch(dense.rows(), batch, precision).unwrap();
            dev.spmm(&a, &x_dev, &mut y).unwrap();
            let y = dev.download(&y).unwrap();
            assert_agrees(label, &format!("{name} as {format}, B = {batch}"), &r, &y);
        }
    }
}

/// Whether `e` is the refusal a GPU backend owes a product with a sparse input it has no kernel
/// for (a sparse x, a transposed product). The CPU owes none.
pub fn refused_sparse_input(dev: &Device, e: &Error) -> bool {
    let owed = [
        macko::backend::UNSUPPORTED_SPARSE_X,
        macko::backend::UNSUPPORTED_TRANSPOSED,
    ];
    dev.kind() != BackendKind::Cpu
        && matches!(e, Error::Unsupported { backend, what }
            if *backend == dev.kind() && owed.contains(what))
}

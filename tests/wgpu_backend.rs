//! The wgpu backend on its own: both kernel paths (subgroup and workgroup memory), f16 and f32
//! outputs, every format, edge shapes, padding under NaN/∞, exact f16 rounding of y, row-block
//! splitting under a tiny binding cap, queueing, timing and typed errors. Every product is
//! checked against the f64 reference of macko-format.
//!
//! Without a wgpu adapter each test prints why and passes, unless `MACKO_REQUIRE_BACKENDS`
//! names `wgpu` (CI sets `cpu,wgpu` and runs on lavapipe).
#![cfg(feature = "wgpu")]

mod common;

use common::{
    assert_agrees, check_all_formats, open_or_skip, ragged_matrix, random_dense, random_x,
};

use half::f16;
use macko::{
    reference, BackendKind, CsrMatrix, DenseMatrix, Device, DeviceOptions, Error, HostVector,
    MackoMatrix, MatrixRef, Precision,
};

fn wgpu_options() -> DeviceOptions {
    DeviceOptions::for_backend(BackendKind::Wgpu)
}

/// The subgroup path (where the adapter has subgroups) and the workgroup path.
fn both_paths() -> Vec<(String, Device)> {
    [
        ("wgpu", wgpu_options()),
        (
            "wgpu without subgroups",
            DeviceOptions {
                wgpu_subgroups: false,
                ..wgpu_options()
            },
        ),
    ]
    .into_iter()
    .filter_map(|(label, opts)| open_or_skip(label, &opts).map(|d| (label.to_string(), d)))
    .collect()
}

/// The two sparse formats of `dense`.
fn sparse_formats(dense: &DenseMatrix) -> (MackoMatrix, CsrMatrix) {
    (
        MackoMatrix::from_dense(dense).unwrap(),
        CsrMatrix::from_dense(dense).unwrap(),
    )
}

#[test]
fn info_names_the_adapter_and_the_kernel_path() {
    for (label, dev) in both_paths() {
        let info = dev.info();
        assert_eq!(info.backend, BackendKind::Wgpu);
        assert!(!info.name.is_empty(), "{label}: adapter name");
        for key in [
            "API",
            "driver",
            "subgroup size",
            "max_storage_buffer_binding_size",
            "features",
            "kernels",
            "timer",
        ] {
            assert!(
                info.properties.iter().any(|(k, _)| k == key),
                "{label}: no {key} in {:?}",
                info.properties
            );
        }
        let kernels = &info
            .properties
            .iter()
            .find(|(k, _)| k == "kernels")
            .unwrap()
            .1;
        if label.contains("without") {
            assert!(kernels.starts_with("workgroup"), "{label}: {kernels}");
        }
        println!("{label}: {:#?}", info.properties);
    }
}

/// Shapes that are multiples of nothing, degenerate ones, and rows long enough for many
/// chunks of the subgroup and workgroup kernels.
const SHAPES: &[(usize, usize)] = &[
    (0, 0),
    (0, 9),
    (9, 0),
    (1, 1),
    (3, 1),
    (1, 4099),
    (31, 33),
    (33, 777),
    (130, 2049),
    (257, 129),
    (1000, 3),
];

#[test]
fn random_matrices_agree_with_the_reference_on_both_paths() {
    for (label, dev) in both_paths() {
        for (i, &(rows, cols)) in SHAPES.iter().enumerate() {
            for (j, &d) in [0.0, 0.05, 0.3, 0.7, 1.0].iter().enumerate() {
                let seed = (100 * i + j) as u64;
                let dense = random_dense(rows, cols, d, seed);
                let x = random_x(cols, seed);
                check_all_formats(&label, &dev, &format!("{rows}×{cols} d={d}"), &dense, &x);
            }
        }
    }
}

#[test]
fn ragged_rows_and_padding_entries_agree() {
    let dense = ragged_matrix(150, 333);
    let x = random_x(dense.cols(), 3);
    for (label, dev) in both_paths() {
        check_all_formats(&label, &dev, "ragged", &dense, &x);
    }
}

#[test]
fn padding_never_contributes_even_where_x_is_nan_or_infinite() {
    let dense = ragged_matrix(150, 333);
    let (macko, csr) = sparse_formats(&dense);
    assert!(macko.values().iter().any(|v| v.to_bits() == 0));
    // x is NaN or ±∞ in every column where the whole matrix is zero, finite elsewhere.
    let mut x = random_x(dense.cols(), 11);
    for (c, xc) in x.iter_mut().enumerate() {
        if (0..dense.rows()).all(|r| dense.row(r)[c].to_bits() & 0x7fff == 0) {
            *xc = [f16::NAN, f16::INFINITY, f16::NEG_INFINITY][c % 3];
        }
    }
    assert!(x.iter().any(|v| !v.is_finite()));
    let refs = [
        reference::spmv_macko(&macko, &x).unwrap(),
        reference::spmv_csr(&csr, &x).unwrap(),
    ];
    for (label, dev) in both_paths() {
        let x_dev = dev.upload_vector(&x).unwrap();
        for ((format, m), r) in [("macko", MatrixRef::from(&macko)), ("csr", (&csr).into())]
            .into_iter()
            .zip(&refs)
        {
            assert!(r.y.iter().all(|v| v.is_finite()));
            let a = dev.upload(m).unwrap();
            for p in [Precision::F16, Precision::F32] {
                let mut y = dev.zeros(dense.rows(), p).unwrap();
                dev.spmv(&a, &x_dev, &mut y).unwrap();
                assert_agrees(
                    "wgpu",
                    &format!("{label}: {format} with NaN/∞ in x"),
                    r,
                    &dev.download(&y).unwrap(),
                );
            }
        }
    }
}

#[test]
fn nan_and_infinity_under_nonzeros_propagate() {
    let dense = random_dense(40, 70, 0.5, 5);
    let mut x = random_x(70, 5);
    x[3] = f16::NAN;
    x[10] = f16::INFINITY;
    x[11] = f16::NEG_INFINITY;
    for (label, dev) in both_paths() {
        check_all_formats(&label, &dev, "NaN/∞ under non-zeros", &dense, &x);
    }
}

/// Row sums whose f16 rounding is known exactly: ties to even, overflow to ∞, subnormals.
#[test]
fn f16_output_rounds_to_nearest_even_like_ieee() {
    let p = |e: i32| 2f32.powi(e);
    // (a0, x0, a1, x1, expected f16 bits of a0·x0 + a1·x1)
    let rows: [(f32, f32, f32, f32, u16); 8] = [
        (1.0, 1.0, 1.0, p(-11), 0x3c00),    // 1 + 2⁻¹¹: tie, down to even 1
        (1.0, 1.0, 3.0, p(-11), 0x3c02),    // 1 + 3·2⁻¹¹: tie, up to even
        (65504.0, 1.0, 16.0, 1.0, 0x7c00),  // 65520 rounds to ∞
        (65504.0, 1.0, 8.0, 1.0, 0x7bff),   // 65512 rounds to the largest finite
        (p(-14), p(-10), 0.0, 0.0, 0x0001), // 2⁻²⁴: smallest subnormal
        (3.0 * p(-14), p(-11), 0.0, 0.0, 0x0002), // 3·2⁻²⁵: tie, up to even 2 units
        (-1.0, 1.0, -1.0, p(-11), 0xbc00),  // negative tie
        (p(-14), p(-11), 0.0, 0.0, 0x0000), // 2⁻²⁵: tie, down to zero
    ];
    let cols = 2 * rows.len();
    let mut values = vec![f16::ZERO; rows.len() * cols];
    let mut x = vec![f16::ZERO; cols];
    for (r, &(a0, x0, a1, x1, _)) in rows.iter().enumerate() {
        values[r * cols + 2 * r] = f16::from_f32(a0);
        values[r * cols + 2 * r + 1] = f16::from_f32(a1);
        x[2 * r] = f16::from_f32(x0);
        x[2 * r + 1] = f16::from_f32(x1);
    }
    let dense = DenseMatrix::new(rows.len(), cols, values).unwrap();
    let (macko, csr) = sparse_formats(&dense);
    for (label, dev) in both_paths() {
        let x_dev = dev.upload_vector(&x).unwrap();
        for (format, m) in [
            ("macko", MatrixRef::from(&macko)),
            ("csr", (&csr).into()),
            ("dense", (&dense).into()),
        ] {
            let a = dev.upload(m).unwrap();
            let mut y = dev.zeros(rows.len(), Precision::F16).unwrap();
            dev.spmv(&a, &x_dev, &mut y).unwrap();
            let HostVector::F16(got) = dev.download(&y).unwrap() else {
                panic!("{label}: f16 y came back as another type");
            };
            for (r, row) in rows.iter().enumerate() {
                assert_eq!(
                    got[r].to_bits(),
                    row.4,
                    "{label}: {format} row {r}: got {} ({:#06x})",
                    got[r],
                    got[r].to_bits()
                );
            }
        }
    }
}

#[test]
fn a_tiny_binding_cap_splits_matrices_into_row_blocks() {
    const CAP: u64 = 1 << 10;
    let dense = random_dense(200, 300, 0.5, 21);
    let x = random_x(300, 21);
    let (macko, csr) = sparse_formats(&dense);
    // Every format's largest array is several times the cap, so each is split into 2+ blocks.
    assert!(macko.values().len() as u64 * 2 > 4 * CAP);
    assert!(csr.col_idx().len() as u64 * 4 > 4 * CAP);
    assert!(dense.bytes() > 4 * CAP);
    for subgroups in [true, false] {
        let opts = DeviceOptions {
            wgpu_subgroups: subgroups,
            max_binding_bytes: Some(CAP),
            ..wgpu_options()
        };
        let label = format!("wgpu, 1 KiB bindings, subgroups {subgroups}");
        let Some(dev) = open_or_skip(&label, &opts) else {
            continue;
        };
        assert!(dev
            .info()
            .properties
            .iter()
            .any(|(k, _)| k == "binding cap (option)"));
        check_all_formats(&label, &dev, "200×300 d=0.5", &dense, &x);
        let ragged = ragged_matrix(150, 333);
        let xr = random_x(ragged.cols(), 4);
        check_all_formats(&label, &dev, "ragged", &ragged, &xr);
    }
}

#[test]
fn a_row_longer_than_the_binding_cap_is_too_large() {
    let dense = random_dense(2, 4000, 1.0, 3);
    let opts = DeviceOptions {
        max_binding_bytes: Some(1 << 10),
        ..wgpu_options()
    };
    let Some(dev) = open_or_skip("wgpu, 1 KiB bindings", &opts) else {
        return;
    };
    for m in [
        MatrixRef::from(&MackoMatrix::from_dense(&dense).unwrap()),
        MatrixRef::from(&CsrMatrix::from_dense(&dense).unwrap()),
        MatrixRef::from(&dense),
    ] {
        match dev.upload(m) {
            Err(Error::TooLarge { needed, limit, .. }) => assert!(needed > limit),
            Err(e) => panic!("expected TooLarge, got {e}"),
            Ok(_) => panic!("a row of 8000 bytes fit a 1 KiB binding"),
        }
    }
}

#[test]
fn a_vector_too_long_to_bind_is_too_large() {
    let Some(dev) = open_or_skip("wgpu", &wgpu_options()) else {
        return;
    };
    // 4 TiB of f32: beyond any adapter's binding limit, refused before anything is allocated.
    match dev.zeros(1 << 40, Precision::F32) {
        Err(Error::TooLarge { needed, limit, .. }) => assert!(needed > limit),
        Err(e) => panic!("expected TooLarge, got {e}"),
        Ok(_) => panic!("a 4 TiB vector was allocated"),
    }
}

#[test]
fn a_large_upload_goes_through_the_staging_buffer() {
    // 700×700 f16 = 980 KB: above the small-write threshold, so the mapped staging path runs.
    let dense = random_dense(700, 700, 0.9, 8);
    let x = random_x(700, 8);
    for (label, dev) in both_paths() {
        let r = reference::spmv_dense(&dense, &x).unwrap();
        let a = dev.upload(&dense).unwrap();
        let xd = dev.upload_vector(&x).unwrap();
        let mut y = dev.zeros(700, Precision::F32).unwrap();
        dev.spmv(&a, &xd, &mut y).unwrap();
        assert_agrees(
            "wgpu",
            &format!("{label}: large dense"),
            &r,
            &dev.download(&y).unwrap(),
        );
    }
}

#[test]
fn queued_and_chained_products_agree() {
    let a = MackoMatrix::from_dense(&random_dense(64, 96, 0.5, 1)).unwrap();
    let b = MackoMatrix::from_dense(&random_dense(48, 64, 0.5, 2)).unwrap();
    let x = random_x(96, 1);
    for (label, dev) in both_paths() {
        let (ad, bd) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap());
        let xd = dev.upload_vector(&x).unwrap();
        // 300 queued products (more than one submission's worth) before one wait; each
        // overwrites y1 with the same values.
        let mut y1 = dev.zeros(64, Precision::F16).unwrap();
        let mut y2 = dev.zeros(48, Precision::F32).unwrap();
        for _ in 0..300 {
            dev.spmv(&ad, &xd, &mut y1).unwrap();
        }
        dev.spmv(&bd, &y1, &mut y2).unwrap();
        dev.synchronize().unwrap();
        let HostVector::F16(y1_host) = dev.download(&y1).unwrap() else {
            panic!("{label}: y1 type");
        };
        assert_agrees(
            "wgpu",
            &format!("{label}: queued"),
            &reference::spmv_macko(&a, &x).unwrap(),
            &HostVector::F16(y1_host.clone()),
        );
        assert_agrees(
            "wgpu",
            &format!("{label}: chained"),
            &reference::spmv_macko(&b, &y1_host).unwrap(),
            &dev.download(&y2).unwrap(),
        );
    }
}

#[test]
fn timing_and_streaming_read_report_positive_seconds() {
    let dense = random_dense(128, 512, 0.5, 6);
    let m = MackoMatrix::from_dense(&dense).unwrap();
    for (label, dev) in both_paths() {
        println!("{label}: timer = {}", dev.timer());
        let copies = [dev.upload(&m).unwrap(), dev.upload(&m).unwrap()];
        let refs: Vec<_> = copies.iter().collect();
        let x = dev.upload_vector(&random_x(512, 6)).unwrap();
        let mut y = dev.zeros(128, Precision::F32).unwrap();
        let times = dev.time_spmv(&refs, &x, &mut y, 2, 5).unwrap();
        assert_eq!(times.len(), 5);
        assert!(
            times.iter().all(|t| t.is_finite() && *t >= 0.0),
            "{label}: {times:?}"
        );
        assert!(times.iter().any(|t| *t > 0.0), "{label}: {times:?}");
        let r = reference::spmv_macko(&m, &random_x(512, 6)).unwrap();
        assert_agrees(
            "wgpu",
            &format!("{label}: timed"),
            &r,
            &dev.download(&y).unwrap(),
        );
        let stream = dev
            .stream_read(3 << 20, 1, 3)
            .unwrap()
            .expect("wgpu has a streaming-read kernel");
        assert_eq!(stream.len(), 3);
        assert!(
            stream.iter().all(|t| t.is_finite() && *t > 0.0),
            "{label}: {stream:?}"
        );
    }
}

#[test]
fn a_software_adapter_is_refused_unless_allowed() {
    let opts = DeviceOptions {
        allow_software_adapter: false,
        ..wgpu_options()
    };
    match Device::with_options(&opts) {
        Ok(dev) => {
            let kind = dev
                .info()
                .properties
                .iter()
                .find(|(k, _)| k == "device type")
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            assert_ne!(
                kind, "Cpu",
                "a software adapter was opened without being allowed"
            );
        }
        Err(Error::Unavailable { backend, reason }) => {
            assert_eq!(backend, BackendKind::Wgpu);
            assert!(
                reason.contains("MACKO_BACKEND=wgpu") || reason.contains("no wgpu adapter"),
                "{reason}"
            );
        }
        Err(e) => panic!("expected Unavailable, got {e}"),
    }
}

#[test]
fn wide_x_staged_in_several_copy_rounds_keeps_every_column_and_its_nan_check() {
    // 12000 columns: 1500 words of x, more than 4 loads per invocation of a 256-invocation
    // workgroup copy at once (macko_x_f16.wgsl: rounds of 4 · invocations words), so the
    // staged copy takes every load slot and a second round. Columns 6200..8100 (words 775..1012:
    // the 4th slot of the first round) are zero in every row, so the format stores explicit
    // zeros among them (gaps of more than 15), and NaN or ±∞ in x: a copy that missed them in
    // its non-finite check would let those zeros meet them on the finite-x fast path.
    let (rows, cols) = (24, 12000);
    let hole = 6200..8100;
    let random = random_dense(rows, cols, 0.3, 21);
    let values: Vec<f16> = (0..rows)
        .flat_map(|r| {
            let row = random.row(r).to_vec();
            let hole = hole.clone();
            row.into_iter()
                .enumerate()
                .map(move |(c, v)| if hole.contains(&c) { f16::ZERO } else { v })
        })
        .collect();
    let dense = DenseMatrix::new(rows, cols, values).unwrap();
    let macko = MackoMatrix::from_dense(&dense).unwrap();
    let mut x = random_x(cols, 22);
    for c in hole.clone() {
        x[c] = [f16::NAN, f16::INFINITY, f16::NEG_INFINITY][c % 3];
    }
    let r = reference::spmv_macko(&macko, &x).unwrap();
    assert!(r.y.iter().all(|v| v.is_finite()));
    for (label, dev) in both_paths() {
        let a = dev.upload(&macko).unwrap();
        let x_dev = dev.upload_vector(&x).unwrap();
        for p in [Precision::F16, Precision::F32] {
            let mut y = dev.zeros(rows, p).unwrap();
            dev.spmv(&a, &x_dev, &mut y).unwrap();
            assert_agrees(
                "wgpu",
                &format!("{label}: {rows}×{cols}, NaN/∞ in x under a hole"),
                &r,
                &dev.download(&y).unwrap(),
            );
        }
    }
}

//! Quantized values (int8 / int4 with binary16 scales, docs/FORMAT.md "Quantized values") on
//! every device: the CPU multiplies them, every batch size and output precision checked row by
//! row against the f64 reference of the exact values, padding never meeting NaN/∞ in X. wgpu
//! multiplies every quantized kind on both kernel paths (and in row blocks under a tiny binding
//! cap), CUDA with its int8 / int4 kernels. Edge cases (extreme codes, zero scales, single-entry groups, scale groups that are
//! not powers of two) are built through `from_parts`.

mod common;

use common::*;
use half::f16;
use macko::{
    reference, BackendKind, DenseMatrix, Device, DeviceMatrix, DeviceOptions, MackoMatrix,
    MatrixRef, Precision, QuantBits, QuantDenseMatrix, QuantMackoMatrix, Quantization, ScaleLayout,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn quantizations() -> Vec<Quantization> {
    let mut out = Vec::new();
    for bits in [QuantBits::Int8, QuantBits::Int4] {
        for scales in [
            ScaleLayout::PerRow,
            ScaleLayout::PerGroup(8),
            ScaleLayout::PerGroup(64),
        ] {
            out.push(Quantization { bits, scales });
        }
    }
    out
}

/// The matrix on the device: every backend multiplies every quantized kind.
fn upload_quant(label: &str, dev: &Device, m: MatrixRef<'_>) -> DeviceMatrix {
    match dev.upload(m) {
        Ok(a) => a,
        Err(e) => panic!("{label}: uploading {:?}: {e}", m.kind()),
    }
}

#[test]
fn quantized_products_agree_on_every_device() {
    let shapes = [
        (1, 1, 1.0),
        (31, 33, 0.3),
        (65, 1000, 0.5),
        (70, 300, 0.0),
        (9, 130, 1.0),
    ];
    for (label, dev) in devices_under_test() {
        for (i, &(rows, cols, d)) in shapes.iter().enumerate() {
            let dense = random_dense(rows, cols, d, 900 + i as u64);
            let macko = MackoMatrix::from_dense(&dense).unwrap();
            for quant in quantizations() {
                let qm = QuantMackoMatrix::quantize(&macko, quant).unwrap();
                let qd = QuantDenseMatrix::quantize(&dense, quant).unwrap();
                for (format, m) in [
                    ("macko", MatrixRef::from(&qm)),
                    ("dense", MatrixRef::from(&qd)),
                ] {
                    let a = upload_quant(&label, &dev, m);
                    for batch in [1, 2, 3, 8, 17] {
                        let x = random_batch(cols, batch, (i * 31 + batch) as u64);
                        let r = reference::spmm(m, &x, batch).unwrap();
                        let x_dev = dev.upload_batch(&x, batch).unwrap();
                        for precision in [Precision::F16, Precision::F32] {
                            let mut y = dev.zeros_batch(rows, batch, precision).unwrap();
                            dev.spmm(&a, &x_dev, &mut y).unwrap();
                            let y = dev.download(&y).unwrap();
                            let what = format!("{rows}×{cols} d={d} {format} {quant:?} B={batch}");
                            assert_agrees(&label, &what, &r, &y);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn padding_never_meets_nan_or_infinity_in_quantized_macko() {
    // Row 0: entries at columns 0 and 40 (two padding entries between them, at 16 and 32).
    let mut values = vec![f16::ZERO; 2 * 48];
    values[0] = f16::from_f32(1.0);
    values[40] = f16::from_f32(-3.0);
    values[48 + 47] = f16::from_f32(0.5);
    let dense = macko::DenseMatrix::new(2, 48, values).unwrap();
    let macko = MackoMatrix::from_dense(&dense).unwrap();
    for (label, dev) in devices_under_test() {
        for quant in quantizations() {
            let qm = QuantMackoMatrix::quantize(&macko, quant).unwrap();
            let a = upload_quant(&label, &dev, MatrixRef::from(&qm));
            for bad in [f16::NAN, f16::INFINITY, f16::NEG_INFINITY] {
                let mut x = vec![f16::from_f32(1.0); 48];
                x[16] = bad;
                x[32] = bad;
                let r = reference::spmv(MatrixRef::from(&qm), &x).unwrap();
                assert!(r.y.iter().all(|v| v.is_finite()));
                let x_dev = dev.upload_batch(&x, 1).unwrap();
                let mut y = dev.zeros_batch(2, 1, Precision::F32).unwrap();
                dev.spmm(&a, &x_dev, &mut y).unwrap();
                assert_agrees(
                    &label,
                    &format!("{quant:?} x = {bad}"),
                    &r,
                    &dev.download(&y).unwrap(),
                );
            }
        }
    }
}

/// Codes of `live` values (then zero up to `len`) for `bits`, packed as the format stores them:
/// seeded, every code of the range including the extremes −128/127 and −8/7 (forced at fixed
/// strides so every matrix has them), and zeros (padding-like values) among them.
fn random_codes(bits: QuantBits, live: usize, len: usize, seed: u64) -> Vec<u8> {
    let mut rng = StdRng::seed_from_u64(seed);
    let qmax = bits.qmax();
    let mut out = vec![0u8; bits.bytes_for(len)];
    for i in 0..live {
        let code = match i % 7 {
            0 => -qmax - 1,
            3 => qmax,
            5 => 0,
            _ => rng.random_range(-qmax - 1..=qmax),
        } as i8;
        match bits {
            QuantBits::Int8 => out[i] = code as u8,
            QuantBits::Int4 => out[i / 2] |= ((code as u8) & 0x0f) << ((i & 1) * 4),
        }
    }
    out
}

/// `count` seeded scales, small enough that no sum reaches binary16's range, with zeros (a zero
/// scale zeroes its values) and subnormals among them.
fn random_scales(count: usize, seed: u64) -> Vec<f16> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5ca1e);
    (0..count)
        .map(|i| match i % 5 {
            1 => f16::ZERO,
            3 => f16::from_bits(0x8003), // a negative subnormal
            _ => f16::from_f32(rng.random_range(-0.01..0.01)),
        })
        .collect()
}

/// A quantized MACKO matrix with the structure of `dense` and seeded codes and scales (built
/// through `from_parts`, so codes the quantizer never writes, −128 and −8, and zero scales
/// appear).
fn random_quant_macko(dense: &DenseMatrix, quant: Quantization, seed: u64) -> QuantMackoMatrix {
    let m = MackoMatrix::from_dense(dense).unwrap();
    let (rows, cols) = (m.rows(), m.cols());
    let live = m.entries();
    let len = m.values().len();
    let q = random_codes(quant.bits, live, len, seed);
    let scales = random_scales(quant.scales.scale_count(rows, len), seed);
    let (row_ptr, _, codes) = m.into_parts();
    QuantMackoMatrix::from_parts(quant, rows, cols, row_ptr, codes, q, scales).unwrap()
}

/// A quantized dense matrix of seeded codes and scales (see `random_quant_macko`).
fn random_quant_dense(
    rows: usize,
    cols: usize,
    quant: Quantization,
    seed: u64,
) -> QuantDenseMatrix {
    let len = rows * cols;
    let q = random_codes(quant.bits, len, len, seed);
    let scales = random_scales(quant.scales.scale_count(rows, len), seed);
    QuantDenseMatrix::from_parts(quant, rows, cols, q, scales).unwrap()
}

/// Both widths with scales per row and per group of 8, 16 (a power of two beyond one MACKO
/// group), 24 and 40 (units per scale that are not powers of two: divided, not shifted).
fn edge_quantizations() -> Vec<Quantization> {
    let mut out = Vec::new();
    for bits in [QuantBits::Int8, QuantBits::Int4] {
        for scales in [
            ScaleLayout::PerRow,
            ScaleLayout::PerGroup(8),
            ScaleLayout::PerGroup(16),
            ScaleLayout::PerGroup(24),
            ScaleLayout::PerGroup(40),
        ] {
            out.push(Quantization { bits, scales });
        }
    }
    out
}

/// x of `cols` × `batch` seeded values with +∞ and −∞ (no NaN) at a few columns of each vector:
/// in a dense row that is ±∞ where the code under it is non-zero and its scale too, NaN where
/// the code or the scale is 0 (0 · ∞) or the two infinities meet.
fn x_with_infinities(cols: usize, batch: usize, seed: u64) -> Vec<f16> {
    let mut x = random_batch(cols, batch, seed);
    for (b, v) in x.chunks_mut(cols).enumerate() {
        let c = (11 * b + seed as usize) % cols;
        v[c] = if b % 2 == 0 {
            f16::INFINITY
        } else {
            f16::NEG_INFINITY
        };
        if b % 3 == 2 {
            v[(c + cols / 2) % cols] = f16::INFINITY;
        }
    }
    x
}

/// x of `cols` × `batch` seeded values with NaN, +∞ and −∞ at a few columns of each vector.
fn x_with_non_finite(cols: usize, batch: usize, seed: u64) -> Vec<f16> {
    let mut x = random_batch(cols, batch, seed);
    for (b, v) in x.chunks_mut(cols).enumerate() {
        for (k, bad) in [f16::NAN, f16::INFINITY, f16::NEG_INFINITY]
            .into_iter()
            .enumerate()
        {
            let c = (7 * b + 13 * k + seed as usize) % cols;
            v[c] = bad;
        }
    }
    x
}

/// Multiplies `m` on `dev` by `x` (`batch` vectors), both output precisions, and checks every
/// row against the reference.
fn check_product(label: &str, dev: &Device, what: &str, m: MatrixRef<'_>, x: &[f16], batch: usize) {
    let a = upload_quant(label, dev, m);
    let r = reference::spmm(m, x, batch).unwrap();
    let x_dev = dev.upload_batch(x, batch).unwrap();
    for precision in [Precision::F16, Precision::F32] {
        let mut y = dev.zeros_batch(m.rows(), batch, precision).unwrap();
        dev.spmm(&a, &x_dev, &mut y).unwrap();
        let y = dev.download(&y).unwrap();
        assert_agrees(label, &format!("{what} B={batch}"), &r, &y);
    }
}

/// Edge cases of the quantized kernels on every device: the largest and smallest codes, zero
/// scales (in MACKO their values contribute nothing even under NaN or ±∞; dense is IEEE), a 1×1
/// matrix, rows shorter than a group, a last group of a single entry (entries ≡ 1 mod 8, and
/// mod G), dense rows whose chunks straddle two scale groups, and scale groups of 16, 24 and 40
/// values (a shift, and divisions), with finite x and with x holding NaN and ±∞.
#[test]
fn quantized_edge_cases_agree_on_every_device() {
    // (rows, cols, density): 1×1; rows of 1–3 entries; 41 rows of 1 entry + one of 2 (so 43
    // entries ≡ 3 mod 8 and the last group holds 3); 17 entries in one row (≡ 1 mod 8 and mod
    // 16); 25 in one row (≡ 1 mod 24); cols not a multiple of 8.
    let shapes = [
        (1, 1, 1.0),
        (5, 3, 0.7),
        (42, 9, 0.12),
        (1, 17, 1.0),
        (1, 25, 1.0),
        (3, 41, 1.0),
        (13, 77, 0.4),
    ];
    for (label, dev) in devices_under_test() {
        for (i, &(rows, cols, d)) in shapes.iter().enumerate() {
            let dense = random_dense(rows, cols, d, 700 + i as u64);
            for (k, quant) in edge_quantizations().into_iter().enumerate() {
                let seed = (100 * i + k) as u64;
                let qm = random_quant_macko(&dense, quant, seed);
                let qd = random_quant_dense(rows, cols, quant, seed);
                for batch in [1, 3] {
                    for (kind, x) in [
                        ("finite x", random_batch(cols, batch, seed)),
                        ("x with NaN and ±∞", x_with_non_finite(cols, batch, seed)),
                    ] {
                        let what = format!("{rows}×{cols} {quant:?} {kind}");
                        check_product(
                            &label,
                            &dev,
                            &format!("macko {what}"),
                            (&qm).into(),
                            &x,
                            batch,
                        );
                        check_product(
                            &label,
                            &dev,
                            &format!("dense {what}"),
                            (&qd).into(),
                            &x,
                            batch,
                        );
                    }
                }
            }
        }
    }
}

/// A tiny binding cap cuts quantized matrices into many row blocks, on both kernel paths: every
/// block must bind its own rows' scales and start in the right place of its scale group (blocks
/// start anywhere in a group of 8 entries, and anywhere in a scale group).
#[test]
fn quantized_row_blocks_keep_their_scales() {
    let (rows, cols) = (120, 300);
    let dense = random_dense(rows, cols, 0.5, 77);
    for subgroups in [true, false] {
        let opts = DeviceOptions {
            wgpu_subgroups: subgroups,
            max_binding_bytes: Some(1 << 10),
            ..DeviceOptions::for_backend(BackendKind::Wgpu)
        };
        let label = format!("wgpu, 1 KiB bindings, subgroups {subgroups}");
        let Some(dev) = open_or_skip(&label, &opts) else {
            continue;
        };
        for (k, quant) in edge_quantizations().into_iter().enumerate() {
            let qm = random_quant_macko(&dense, quant, k as u64);
            let qd = random_quant_dense(rows, cols, quant, k as u64);
            // Several blocks: the largest array of each is many times the cap.
            assert!(qm.values().packed().len() > 4 << 10);
            assert!(qd.values().packed().len() > 4 << 10);
            for batch in [1, 2] {
                let x = random_batch(cols, batch, k as u64);
                check_product(
                    &label,
                    &dev,
                    &format!("macko {quant:?}"),
                    (&qm).into(),
                    &x,
                    batch,
                );
                check_product(
                    &label,
                    &dev,
                    &format!("dense {quant:?}"),
                    (&qd).into(),
                    &x,
                    batch,
                );
            }
        }
    }
}

/// Every device's dense product of seeded quantized matrices of each shape, width and scale
/// layout, for each batch size, with
/// finite x and with NaN and ±∞, against the reference. `seed_base` keeps the callers' seeds
/// apart.
fn dense_rows_agree(
    shapes: &[(usize, usize)],
    layouts: &[ScaleLayout],
    batches: &[usize],
    seed_base: u64,
) {
    for (label, dev) in devices_under_test() {
        for (i, &(rows, cols)) in shapes.iter().enumerate() {
            for bits in [QuantBits::Int8, QuantBits::Int4] {
                for (k, &scales) in layouts.iter().enumerate() {
                    let quant = Quantization { bits, scales };
                    let seed = seed_base + (10 * i + k) as u64;
                    let qd = random_quant_dense(rows, cols, quant, seed);
                    for &batch in batches {
                        for (kind, x) in [
                            ("finite x", random_batch(cols, batch, seed)),
                            ("x with NaN and ±∞", x_with_non_finite(cols, batch, seed)),
                        ] {
                            let what = format!("dense {rows}×{cols} {quant:?} {kind}");
                            check_product(&label, &dev, &what, (&qd).into(), &x, batch);
                        }
                    }
                }
            }
        }
    }
}

/// Long dense rows in every scale mode of quant_dense_sg.wgsl: per row; per group with one
/// scale per 16-byte word (G and cols multiples of its 16 or 32 codes); one per chunk of 8
/// (cols a multiple of 8); chunks split between two scales (other cols). The rows hold more than
/// 512 words of codes for both widths, so the kernel's two-step loop, its single step and its
/// guarded last word (x words past x's end) all run, with finite x and with NaN and ±∞.
#[test]
fn long_quantized_dense_rows_agree_in_every_scale_mode() {
    dense_rows_agree(
        &[(5, 19200), (2, 16416), (4, 19208), (3, 19203)],
        &[
            ScaleLayout::PerRow,
            ScaleLayout::PerGroup(8),
            ScaleLayout::PerGroup(24),
            ScaleLayout::PerGroup(32),
            ScaleLayout::PerGroup(64),
        ],
        &[1, 2],
        0,
    );
}

/// Dense quantized rows in many shapes of groups: cols a multiple of 64 with groups of 64, 128 and
/// 192 (not a power of two; neither divides 4 160, so groups span rows there) besides per-row
/// scales, from one 64-column row to
/// rows of 4 160 columns, 3 to 100 rows, finite x and x with NaN and ±∞, one and three vectors.
/// (Written for an earlier tensor-core dense GEMV, measured slower and removed; it keeps the
/// f32 kernels' grouped scales, and the tensor-core int4 entries' per-row, 64 and 128, under
/// test at these shapes.)
#[test]
fn dense_quantized_rows_with_wide_groups_agree() {
    dense_rows_agree(
        &[(16, 64), (37, 4160), (100, 1024), (3, 192)],
        &[
            ScaleLayout::PerRow,
            ScaleLayout::PerGroup(64),
            ScaleLayout::PerGroup(128),
            ScaleLayout::PerGroup(192),
        ],
        &[1, 3],
        5000,
    );
}

/// The tensor-core dense int4 GEMV (kernels/dense_quant.cu, `dense_q_tc_*`) under forced warps
/// per band (1: a warp walks every 64-byte window of a row, full and partial batches of two;
/// 2 and 16: the row split, warps with one window or none) and, as a check of the check, the f32
/// entries (which int8 always takes). Scale groups of one 16-byte chunk (32 codes), two chunks,
/// one window, several (a power of two, and 384, whose window index is divided, not shifted),
/// and per row, besides groups of 16 (f32 entries); rows not a multiple of the 16-row band;
/// columns ending inside a window; finite x, x holding ±∞ (rows of ±∞ or NaN by the codes and
/// scales under them) and x holding NaN. The plan must show the forced block, so a fallback to
/// another entry fails the test.
#[cfg(feature = "cuda")]
#[test]
fn dense_quantized_rows_agree_on_tensor_cores() {
    use macko::backend::cuda::tuning::CudaTuning;
    use macko::Plan;
    let forced: [(&str, Option<u32>, bool); 4] = [
        ("one warp per band", Some(1), true),
        ("two warps per band", Some(2), true),
        ("16 warps per band", Some(16), true),
        ("f32 entries", None, false),
    ];
    // (rows, cols, scale layouts) with cols a multiple of every group listed and of 32.
    let cases: [(usize, usize, &[ScaleLayout]); 5] = [
        (
            17,
            4352,
            &[
                ScaleLayout::PerRow,
                ScaleLayout::PerGroup(16),
                ScaleLayout::PerGroup(32),
                ScaleLayout::PerGroup(64),
                ScaleLayout::PerGroup(128),
                ScaleLayout::PerGroup(256),
            ],
        ),
        (
            33,
            4160,
            &[
                ScaleLayout::PerRow,
                ScaleLayout::PerGroup(32),
                ScaleLayout::PerGroup(64),
            ],
        ),
        (5, 4128, &[ScaleLayout::PerRow, ScaleLayout::PerGroup(32)]),
        (1, 32, &[ScaleLayout::PerRow, ScaleLayout::PerGroup(32)]),
        (
            9,
            4608,
            &[ScaleLayout::PerGroup(384), ScaleLayout::PerGroup(1152)],
        ),
    ];
    for (name, warps, on) in forced {
        let mut opts = DeviceOptions::for_backend(BackendKind::Cuda);
        opts.tuning.get_or_insert_with(Default::default).cuda = CudaTuning {
            dense_quant_mma: Some(on),
            dense_quant_warps: warps,
            ..CudaTuning::default()
        };
        let label = format!("cuda, {name}");
        let Some(dev) = open_or_skip(&label, &opts) else {
            return;
        };
        let tensor_cores = dev.info().properties.iter().any(|(k, v)| {
            k == "compute capability"
                && v.strip_prefix("sm_")
                    .and_then(|n| n.parse::<u32>().ok())
                    .is_some_and(|n| n >= 80)
        });
        for (i, &(rows, cols, layouts)) in cases.iter().enumerate() {
            for bits in [QuantBits::Int8, QuantBits::Int4] {
                for (k, &scales) in layouts.iter().enumerate() {
                    let quant = Quantization { bits, scales };
                    let qd = random_quant_dense(rows, cols, quant, 7000 + (10 * i + k) as u64);
                    let a = upload_quant(&label, &dev, (&qd).into());
                    let Ok(Plan::Cuda(plan)) = dev.plan(&a) else {
                        panic!("{label}: no CUDA plan for a dense quantized matrix");
                    };
                    let group_fits = match scales {
                        ScaleLayout::PerRow => true,
                        ScaleLayout::PerGroup(g) => g == 32 || g == 64 || g % 128 == 0,
                    };
                    let int4 = bits == QuantBits::Int4;
                    if let (Some(w), true, true, true) = (warps, tensor_cores, group_fits, int4) {
                        assert_eq!(
                            (plan.grid, plan.block),
                            (rows.div_ceil(16) as u32, 32 * w),
                            "{label}: {rows}×{cols} {quant:?} did not run on tensor cores"
                        );
                    }
                    for batch in [1, 2] {
                        for (kind, x) in [
                            ("finite x", random_batch(cols, batch, 70 + i as u64)),
                            ("x with ±∞", x_with_infinities(cols, batch, 72 + k as u64)),
                            (
                                "x with NaN and ±∞",
                                x_with_non_finite(cols, batch, 71 + k as u64),
                            ),
                        ] {
                            let what = format!("{name}: dense {rows}×{cols} {quant:?} {kind}");
                            check_product(&label, &dev, &what, (&qd).into(), &x, batch);
                        }
                    }
                }
            }
        }
    }
}

/// Quantized MACKO on the wgpu subgroup path in each way its kernel reads x, forced through
/// the typed tuning: staged as f16 scalars (where the adapter has `SHADER_F16`), padded or
/// not, or as f16 pairs; gathered from memory; with 3 workgroups, so that every subgroup works
/// through many rows (sums held in lanes), and 512 invocations per workgroup. Rows of many
/// pipelined steps and rows shorter than one, scales per row and per group (shift and
/// division), finite x and x holding NaN and ±∞ (zero codes and zero scales must keep them
/// out of every sum but those of live entries).
#[cfg(feature = "wgpu")]
#[test]
fn quantized_macko_agrees_in_every_x_staging() {
    use macko::backend::wgpu::{WgpuPlan, WgpuTuning, XForm, XStaging};
    use macko::Plan;
    let few = WgpuTuning {
        macko_workgroups: Some(3),
        ..WgpuTuning::default()
    };
    // Whether a plan is the one a tuning forces.
    type Taken = fn(&WgpuPlan) -> bool;
    let tunings: [(&str, WgpuTuning, Taken); 5] = [
        ("x staged", few.clone(), |p| p.x == XStaging::Whole),
        (
            "x as pairs",
            WgpuTuning {
                x_f16: Some(false),
                ..few.clone()
            },
            |p| p.x == XStaging::Whole && p.x_form == XForm::Pairs,
        ),
        (
            "x padded",
            WgpuTuning {
                x_pad: Some(true),
                ..few.clone()
            },
            |p| p.x == XStaging::Whole,
        ),
        (
            "x from memory",
            WgpuTuning {
                x_in_workgroup: Some(false),
                ..few.clone()
            },
            |p| p.x == XStaging::Memory,
        ),
        (
            "512 invocations",
            WgpuTuning {
                macko_workgroup: Some(512),
                ..WgpuTuning::default()
            },
            |p| p.x == XStaging::Whole,
        ),
    ];
    let shapes = [
        (40, 1030, 0.5),
        (30, 9000, 0.3),
        (2001, 200, 0.1),
        (70, 1030, 0.05),
        (1, 5000, 0.2),
        (33, 129, 1.0),
    ];
    let quants = [
        Quantization::int8_per_row(),
        Quantization::int4_per_group(64),
        Quantization {
            bits: QuantBits::Int8,
            scales: ScaleLayout::PerGroup(24),
        },
        Quantization {
            bits: QuantBits::Int4,
            scales: ScaleLayout::PerGroup(8),
        },
    ];
    for (name, tuning, taken) in tunings {
        let mut opts = DeviceOptions::for_backend(BackendKind::Wgpu);
        opts.tuning.get_or_insert_with(Default::default).wgpu = tuning;
        let label = format!("wgpu, {name}");
        let Some(dev) = open_or_skip(&label, &opts) else {
            return;
        };
        for (i, &(rows, cols, d)) in shapes.iter().enumerate() {
            let dense = random_dense(rows, cols, d, 300 + i as u64);
            for (k, &quant) in quants.iter().enumerate() {
                let seed = (10 * i + k) as u64;
                let qm = random_quant_macko(&dense, quant, seed);
                if i == 0 && k == 0 {
                    match dev.plan(&upload_quant(&label, &dev, (&qm).into())) {
                        Ok(Plan::Wgpu(p)) if p.kernel.name() != "quant_macko_sg" => {
                            println!("skipping {label}: no subgroup path");
                            return;
                        }
                        Ok(Plan::Wgpu(p)) => assert!(taken(&p), "{label}: not taken: {p:?}"),
                        other => panic!("{label}: not a wgpu plan: {other:?}"),
                    }
                }
                for (kind, x) in [
                    ("finite x", random_batch(cols, 1, seed)),
                    ("x with NaN and ±∞", x_with_non_finite(cols, 1, seed)),
                ] {
                    let what = format!("macko {rows}×{cols} d={d} {quant:?} {kind}");
                    check_product(&label, &dev, &what, (&qm).into(), &x, 1);
                }
            }
        }
    }
}

//! Both CPU layouts of a binary16 MACKO matrix (its arrays, and the bitmap derived from them)
//! on the same matrices, with the AVX2 loops and the portable ones, for one vector and every
//! few-token batch from 1 to 17, against the f64 reference: odd column counts (a last block of
//! fewer than 8 columns), empty rows, ±65504, subnormals, stored zeros, and NaN/±∞ in x where
//! no entry is kept (which must not reach y) and where one is (which must).

use half::f16;
use macko_format::reference::{self, OutputPrecision, Reference};
use macko_format::{DenseMatrix, MackoMatrix, MatrixRef, SparseVector};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{avx2, CpuBackend, CpuLayout};
use crate::backend::{Backend, HostVector, Precision, SparseInput};

/// Most vectors of a product tested (every count from 1 runs).
pub(super) const MAX_BATCH: usize = 17;

/// The backends tested: both layouts, AVX2 (where this CPU has it) and portable.
fn backends() -> Vec<(String, CpuBackend)> {
    let mut out = Vec::new();
    for layout in [CpuLayout::AsUploaded, CpuLayout::Bitmap] {
        for simd in [false, true] {
            if simd && !avx2::supported() {
                continue;
            }
            let backend = CpuBackend {
                avx2: simd,
                forced_layout: Some(layout),
            };
            out.push((format!("{layout:?}, avx2 {simd}"), backend));
        }
    }
    out
}

/// A random value of either sign: mostly in 0.01..4, some ±65504 (the largest binary16) and
/// some subnormals.
fn value(rng: &mut StdRng) -> f16 {
    let v = match rng.random_range(0..20) {
        0 => f16::MAX,
        1 => f16::from_bits(rng.random_range(1..0x0400)), // subnormal
        _ => f16::from_f32(rng.random_range(0.01..4.0)),
    };
    if rng.random::<bool>() {
        -v
    } else {
        v
    }
}

/// A random `rows × cols` matrix of density `density`, every fifth row empty, column 2 and the
/// last column empty (so x may hold NaN/∞ there).
pub(super) fn random_dense(rows: usize, cols: usize, density: f64, seed: u64) -> DenseMatrix {
    let mut rng = StdRng::seed_from_u64(seed);
    let values = (0..rows * cols)
        .map(|k| {
            let (r, c) = (k / cols, k % cols);
            let empty = r % 5 == 3 || (cols > 3 && (c == 2 || c == cols - 1));
            if empty || rng.random::<f64>() >= density {
                f16::ZERO
            } else {
                value(&mut rng)
            }
        })
        .collect();
    DenseMatrix::new(rows, cols, values).unwrap()
}

/// [`MAX_BATCH`] vectors of `cols`, row-major: vector b % 3 == 0 finite, 1 with NaN, +∞ and
/// −∞ at the empty columns (nothing kept there), 2 also with +∞ at column 0 (kept in some rows:
/// those rows are ±∞ or NaN in the reference too).
pub(super) fn vectors(cols: usize, seed: u64) -> Vec<f16> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    let mut x = Vec::with_capacity(cols * MAX_BATCH);
    for b in 0..MAX_BATCH {
        let mut v: Vec<f16> = (0..cols)
            .map(|_| f16::from_f32(rng.random_range(-3.0..3.0)))
            .collect();
        if b % 3 != 0 && cols > 3 {
            v[2] = f16::NAN;
            v[cols - 1] = if b % 2 == 0 {
                f16::INFINITY
            } else {
                f16::NEG_INFINITY
            };
        }
        if b % 3 == 2 && cols > 0 {
            v[0] = f16::INFINITY;
        }
        x.extend(v);
    }
    x
}

pub(super) fn assert_agrees(what: &str, want: &Reference, got: &HostVector) {
    let out: OutputPrecision = got.precision();
    assert_eq!(got.len(), want.y.len(), "{what}: length");
    if let Some((row, g, w, tol)) = want.first_disagreement(&got.to_f64(), out) {
        panic!("{what} ({out:?}): row {row} is {g}, reference {w} (tolerance {tol:e})");
    }
}

/// Every backend, every batch from 1 to [`MAX_BATCH`], f16 and f32 output, against the
/// reference; the sparse-x and transposed products too.
fn check_matrix(name: &str, m: &MackoMatrix, x: &[f16]) {
    let (rows, cols) = (m.rows(), m.cols());
    for (label, backend) in backends() {
        let a = backend.upload_matrix(MatrixRef::Macko(m)).unwrap();
        assert_eq!(
            backend.plan(&a).unwrap().layout,
            backend.forced_layout.unwrap(),
            "{name}, {label}: the forced layout was not taken"
        );
        for batch in 1..=MAX_BATCH {
            let xb = &x[..cols * batch];
            let want = reference::spmm(MatrixRef::Macko(m), xb, batch).unwrap();
            let xv = backend.upload_vector(xb).unwrap();
            for precision in [Precision::F16, Precision::F32] {
                let mut y = backend.alloc_vector(rows * batch, precision).unwrap();
                backend.multiply(&a, &xv, &mut y, batch).unwrap();
                let got = backend.download(&y).unwrap();
                assert_agrees(&format!("{name}, {label}, B = {batch}"), &want, &got);
            }
        }
        // One vector at a time too: B = 1 above is only the finite first vector.
        for b in 1..3.min(MAX_BATCH) {
            let xb = &x[b * cols..(b + 1) * cols];
            let want = reference::spmv(MatrixRef::Macko(m), xb).unwrap();
            let xv = backend.upload_vector(xb).unwrap();
            let mut y = backend.alloc_vector(rows, Precision::F32).unwrap();
            backend.multiply(&a, &xv, &mut y, 1).unwrap();
            let got = backend.download(&y).unwrap();
            assert_agrees(&format!("{name}, {label}, vector {b} alone"), &want, &got);
        }
        // A sparse x (every third element of the first vector) and the transposed product.
        let x0 = &x[..cols];
        let indices: Vec<u32> = (0..cols as u32).step_by(3).collect();
        let picked = indices.iter().map(|&i| x0[i as usize]).collect();
        let sx = SparseVector::new(cols, indices, picked).unwrap();
        let want = reference::spmv_sparse_x(MatrixRef::Macko(m), &sx).unwrap();
        let xs = backend.upload_sparse_vector(&sx).unwrap();
        let mut y = backend.alloc_vector(rows, Precision::F32).unwrap();
        backend.multiply_sparse_x(&a, &xs, &mut y).unwrap();
        let got = backend.download(&y).unwrap();
        assert_agrees(&format!("{name}, {label}, sparse x"), &want, &got);
        let xt: Vec<f16> = (0..rows)
            .map(|i| f16::from_f32(i as f32 % 5.0 - 2.0))
            .collect();
        let want = reference::spmv_transposed(MatrixRef::Macko(m), &xt).unwrap();
        let xv = backend.upload_vector(&xt).unwrap();
        let mut y = backend.alloc_vector(cols, Precision::F32).unwrap();
        backend
            .multiply_transposed(&a, SparseInput::Dense(&xv), &mut y)
            .unwrap();
        let got = backend.download(&y).unwrap();
        assert_agrees(&format!("{name}, {label}, transposed"), &want, &got);
    }
}

#[test]
fn both_layouts_agree_with_the_reference() {
    let shapes = [
        (4, 0, 1.0),
        (0, 9, 1.0),
        (1, 1, 1.0),
        (3, 7, 0.5),
        (5, 9, 0.3),
        (33, 13, 0.9),
        (40, 100, 0.5),
        (10, 64, 1.0),
        (37, 257, 0.05),
        (70, 1003, 0.25),
        (65, 4099, 0.7),
    ];
    for (i, &(rows, cols, d)) in shapes.iter().enumerate() {
        let seed = 40 + i as u64;
        let m = MackoMatrix::from_dense(&random_dense(rows, cols, d, seed)).unwrap();
        check_matrix(&format!("{rows}×{cols} d = {d}"), &m, &vectors(cols, seed));
    }
}

/// Stored zeros that are not padding (gap code below 15), +0 and −0, under NaN and ±∞ of x: the
/// bitmap keeps only non-zero values, so they add nothing, as in the reference.
#[test]
fn stored_zeros_under_nan_add_nothing() {
    let one = f16::ONE;
    let two = f16::from_f32(2.0);
    // Row 0: columns 0 (1), 1 (+0), 2 (−0), 5 (2); row 1: column 3 (+0); row 2: nothing.
    let mut values = vec![one, f16::ZERO, f16::NEG_ZERO, two, f16::ZERO];
    values.resize(8, f16::ZERO);
    let codes = [0u8, 0, 2, 3]; // entry gaps 0, 0, 0, 2 | 3, then the tail's zeros
    let packed = vec![codes[0] | codes[1] << 4, codes[2] | codes[3] << 4, 0, 0];
    let m = MackoMatrix::from_parts(3, 9, vec![0, 4, 5, 5], values, packed).unwrap();
    let mut x = Vec::new();
    for b in 0..MAX_BATCH {
        let mut v = vec![f16::from_f32(1.5); 9];
        v[1] = f16::NAN;
        v[2] = f16::INFINITY;
        v[3] = if b % 2 == 0 {
            f16::NEG_INFINITY
        } else {
            f16::NAN
        };
        x.extend(v);
    }
    check_matrix("stored zeros", &m, &x);
}

/// Wherever the rule picks the bitmap, it is at most `BITMAP_SIZE_SLACK` larger than the MACKO
/// arrays it replaces, and it is not picked where it would be more than that.
#[test]
fn the_bitmap_is_at_most_the_slack_larger_where_it_is_chosen() {
    let mut chosen = 0;
    for (i, d) in [
        0.05, 0.1, 0.15, 0.19, 0.2, 0.22, 0.3, 0.32, 0.35, 0.5, 0.7, 1.0,
    ]
    .into_iter()
    .enumerate()
    {
        let m = MackoMatrix::from_dense(&random_dense(64, 1000, d, 90 + i as u64)).unwrap();
        let stored = m.entries() as f64 / (64.0 * 1000.0);
        let bitmap = super::BitmapMatrix::from_macko(&m).bytes() as f64;
        let limit = (1.0 + super::BITMAP_SIZE_SLACK) * m.bytes() as f64;
        if CpuLayout::for_macko(stored, 1000) != CpuLayout::Bitmap {
            // Not chosen: it would have been larger than the slack allows, or about so (the
            // rule bounds the kept values by the entries, padding included).
            assert!(
                bitmap > m.bytes() as f64 * (1.0 + super::BITMAP_SIZE_SLACK / 2.0),
                "d = {d} (stored {stored}): bitmap {bitmap} bytes, MACKO {}, not chosen",
                m.bytes()
            );
            continue;
        }
        chosen += 1;
        assert!(
            bitmap <= limit,
            "d = {d} (stored {stored}): bitmap {bitmap} bytes, MACKO {}",
            m.bytes()
        );
    }
    assert!(chosen >= 6, "the bitmap was chosen {chosen} times");
}

/// Not a check: times both layouts and the dense product on one realistic shape, products
/// alternated so that a neighbour's load hits them alike, and prints the fastest and the
/// median of each, with the streaming read of the dense bytes and the bytes of each layout
/// (`cargo test --release --lib layout_timings -- --ignored --nocapture`; the shape, batches
/// and densities are the constants below). What the layout rule and BENCHMARKS.md's CPU
/// figures were measured with.
#[test]
#[ignore = "timing, not a check: run by hand on an idle machine"]
fn layout_timings() {
    const SHAPE: (usize, usize) = (11008, 4096);
    const BATCHES: [usize; 3] = [1, 4, 8];
    const REPS: usize = 25;
    const DENSITIES: [f64; 6] = [0.1, 0.2, 0.25, 0.3, 0.5, 0.7];
    let (rows, cols) = SHAPE;
    let simd = avx2::supported();
    let backend = |layout| CpuBackend {
        avx2: simd,
        forced_layout: Some(layout),
    };
    let xs = crate::synthetic::activations(cols * 8, 1);
    for batch in BATCHES {
        let x_dense = backend(CpuLayout::AsUploaded)
            .upload_vector(&xs[..cols * batch])
            .unwrap();
        for d in DENSITIES {
            let dense = crate::synthetic::pruned_matrix(rows, cols, d, 7).unwrap();
            let m = MackoMatrix::from_dense(&dense).unwrap();
            let cases = [
                (
                    "macko",
                    backend(CpuLayout::AsUploaded),
                    MatrixRef::Macko(&m),
                ),
                ("bitmap", backend(CpuLayout::Bitmap), MatrixRef::Macko(&m)),
                (
                    "dense",
                    backend(CpuLayout::AsUploaded),
                    MatrixRef::Dense(&dense),
                ),
            ];
            let uploaded: Vec<_> = cases
                .iter()
                .map(|(_, b, m)| b.upload_matrix(*m).unwrap())
                .collect();
            let mut times = vec![Vec::new(); cases.len()];
            let mut y = backend(CpuLayout::AsUploaded)
                .alloc_vector(rows * batch, Precision::F16)
                .unwrap();
            for rep in 0..REPS + 2 {
                for (k, ((_, b, _), a)) in cases.iter().zip(&uploaded).enumerate() {
                    let start = std::time::Instant::now();
                    b.multiply(a, &x_dense, &mut y, batch).unwrap();
                    if rep >= 2 {
                        times[k].push(start.elapsed().as_secs_f64() * 1e3);
                    }
                }
            }
            let line: Vec<String> = cases
                .iter()
                .zip(&mut times)
                .map(|((name, _, _), t)| {
                    t.sort_by(f64::total_cmp);
                    format!("{name} {:.2}/{:.2} ms", t[0], t[t.len() / 2])
                })
                .collect();
            // The streaming read of the dense matrix's bytes, fastest of as many passes.
            let dense_bytes = 2 * (rows * cols) as u64;
            let stream = super::stream_read(dense_bytes, 2, REPS).unwrap();
            let stream_ms = stream.iter().copied().fold(f64::INFINITY, f64::min) * 1e3;
            let bitmap_bytes = super::BitmapMatrix::from_macko(&m).bytes();
            println!(
                "B={batch} d={d}: {} (fastest/median); stream read of dense {stream_ms:.2} ms; \
                 MB macko {:.1} bitmap {:.1} dense {:.1}",
                line.join(", "),
                m.bytes() as f64 / 1e6,
                bitmap_bytes as f64 / 1e6,
                dense_bytes as f64 / 1e6
            );
        }
    }
}

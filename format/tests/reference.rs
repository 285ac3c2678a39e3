//! The f64 reference product: docs/FORMAT.md's semantics (padding never contributes, even against
//! NaN or ±∞; dense follows IEEE; an empty row is +0.0) and the tolerance a backend must meet.

mod common;

use common::h;
use macko_format::reference::{self, agrees, tolerance};
use macko_format::{f16, CsrMatrix, DenseMatrix, FormatError, MackoMatrix, OutputPrecision};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// 3×40: row 0 = 2 at column 0 and 3 at column 20 (a padding entry at column 16 between);
/// row 1 empty; row 2 = −1 at column 39 (two padding entries before it, at 15 and 31).
fn matrix() -> DenseMatrix {
    let mut v = vec![f16::ZERO; 3 * 40];
    v[0] = h(2.0);
    v[20] = h(3.0);
    v[2 * 40 + 39] = h(-1.0);
    DenseMatrix::new(3, 40, v).unwrap()
}

#[test]
fn padding_never_contributes_even_against_nan_and_infinity() {
    let d = matrix();
    let m = MackoMatrix::from_dense(&d).unwrap();
    // The padding entries sit where we think they do.
    let padding: Vec<usize> = (0..3)
        .flat_map(|r| m.row_entries(r).collect::<Vec<_>>())
        .filter(|(_, v)| v.to_bits() == 0)
        .map(|(c, _)| c)
        .collect();
    assert_eq!(padding, [16, 15, 31]);
    // x is NaN or ±∞ at every column except the ones real entries use.
    let poison = [f16::NAN, f16::INFINITY, f16::NEG_INFINITY];
    let mut x: Vec<f16> = (0..40).map(|c| poison[c % 3]).collect();
    x[0] = h(1.0);
    x[20] = h(0.5);
    x[39] = h(4.0);

    let r = reference::spmv_macko(&m, &x).unwrap();
    assert_eq!(r.y, [3.5, 0.0, -4.0]);
    assert_eq!(r.terms, [2, 0, 1]);
    assert_eq!(r.abs_sum, [3.5, 0.0, 4.0]);

    // CSR, even with explicitly stored zeros at poisoned columns, gives the same.
    let csr = CsrMatrix::from_parts(
        3,
        40,
        vec![0, 3, 4, 5],
        vec![0, 16, 20, 1, 39],
        vec![h(2.0), f16::ZERO, h(3.0), f16::NEG_ZERO, h(-1.0)],
    )
    .unwrap();
    assert_eq!(reference::spmv_csr(&csr, &x).unwrap(), r);
    // A non-canonical MACKO matrix with a zero entry (code 0) at a NaN column: still nothing.
    let values = [
        h(2.0),
        f16::ZERO,
        f16::ZERO,
        f16::ZERO,
        f16::ZERO,
        f16::ZERO,
        f16::ZERO,
        f16::ZERO,
    ];
    let nc = MackoMatrix::from_parts(1, 40, vec![0, 2], values.to_vec(), vec![0, 0, 0, 0]).unwrap();
    assert!(!nc.is_canonical());
    assert_eq!(reference::spmv_macko(&nc, &x).unwrap().y, [2.0]);
}

#[test]
fn dense_follows_ieee() {
    let d = matrix();
    let mut x = vec![h(1.0); 40];
    x[5] = f16::INFINITY; // row 0 has a stored zero at column 5: 0·∞ = NaN
    let r = reference::spmv_dense(&d, &x).unwrap();
    assert!(r.y[0].is_nan() && r.y[1].is_nan() && r.y[2].is_nan());
    // Without infinities, dense agrees with the sparse formats exactly.
    let x: Vec<f16> = (0..40).map(|c| h(c as f32 * 0.25 - 3.0)).collect();
    let dense = reference::spmv_dense(&d, &x).unwrap();
    let sparse = reference::spmv_macko(&MackoMatrix::from_dense(&d).unwrap(), &x).unwrap();
    assert_eq!(dense.y, sparse.y);
}

#[test]
fn empty_rows_give_positive_zero() {
    let d = DenseMatrix::zeros(3, 4).unwrap();
    let x = vec![h(-1.0); 4];
    for y in [
        reference::spmv_macko(&MackoMatrix::from_dense(&d).unwrap(), &x)
            .unwrap()
            .y,
        reference::spmv_csr(&CsrMatrix::from_dense(&d).unwrap(), &x)
            .unwrap()
            .y,
    ] {
        assert!(y.iter().all(|v| v.to_bits() == 0), "{y:?}");
    }
    // Dense multiplies its zeros (terms of −0.0 here), but a sum that starts at +0.0 stays +0.0.
    let y = reference::spmv_dense(&d, &x).unwrap().y;
    assert!(y.iter().all(|v| v.to_bits() == 0), "{y:?}");
    // A matrix with no columns: every row is empty.
    let m = MackoMatrix::from_dense(&DenseMatrix::zeros(2, 0).unwrap()).unwrap();
    assert_eq!(reference::spmv_macko(&m, &[]).unwrap().y, [0.0, 0.0]);
}

#[test]
fn wrong_vector_length_is_an_error() {
    let m = MackoMatrix::from_dense(&matrix()).unwrap();
    assert_eq!(
        reference::spmv_macko(&m, &[h(1.0); 39]).unwrap_err(),
        FormatError::VectorLength {
            what: "x must have one element per column",
            expected: 40,
            found: 39
        }
    );
    assert!(reference::spmv_csr(&m.to_csr().unwrap(), &[]).is_err());
    assert!(reference::spmv_dense(&matrix(), &[h(1.0); 41]).is_err());
}

/// What a backend computes: products in f32 (exact for binary16 inputs), summed in f32 in row
/// order, optionally rounded once to binary16.
fn f32_accumulated(m: &MackoMatrix, x: &[f16]) -> Vec<f32> {
    (0..m.rows())
        .map(|r| {
            m.row_entries(r)
                .filter(|(_, v)| v.to_bits() & 0x7fff != 0)
                .fold(0.0f32, |acc, (c, v)| acc + v.to_f32() * x[c].to_f32())
        })
        .collect()
}

#[test]
fn tolerance_accepts_f32_accumulation_and_rejects_four_times_the_bound() {
    // Moderate magnitudes, so that f16 output stays finite and both bounds are exercised.
    let mut rng = StdRng::seed_from_u64(7);
    let mut v = vec![f16::ZERO; 64 * 2048];
    for e in v.iter_mut() {
        if rng.random_bool(0.5) {
            *e = h(rng.random_range(-4.0..4.0));
        }
    }
    let m = MackoMatrix::from_dense(&DenseMatrix::new(64, 2048, v).unwrap()).unwrap();
    let x: Vec<f16> = (0..2048).map(|_| h(rng.random_range(-2.0..2.0))).collect();
    let r = reference::spmv_macko(&m, &x).unwrap();
    let got = f32_accumulated(&m, &x);
    let mut rounding_seen = false;
    for (row, &g) in got.iter().enumerate() {
        for out in [OutputPrecision::F32, OutputPrecision::F16] {
            let value = match out {
                OutputPrecision::F32 => f64::from(g),
                OutputPrecision::F16 => f16::from_f32(g).to_f64(),
            };
            let tol = r.tolerance(row, out);
            assert!(tol > 0.0);
            assert!(
                r.agrees(row, value, out),
                "row {row} {out:?}: got {value}, reference {}, tolerance {tol}",
                r.y[row]
            );
            rounding_seen |= value != r.y[row];
            // Off by four times the bound, in either direction: refused.
            for wrong in [r.y[row] + 4.0 * tol, r.y[row] - 4.0 * tol] {
                assert!(
                    !r.agrees(row, wrong, out),
                    "row {row} {out:?}: accepted {wrong}"
                );
            }
        }
    }
    // The test exercised real rounding, not only exact sums.
    assert!(rounding_seen);
    assert!(r
        .first_disagreement(&vec![0.0; 64], OutputPrecision::F32)
        .is_some());
    let exact: Vec<f64> = got.iter().map(|&g| f64::from(g)).collect();
    assert_eq!(r.first_disagreement(&exact, OutputPrecision::F32), None);
}

#[test]
fn agreement_on_special_values() {
    let f16_out = OutputPrecision::F16;
    // NaN only matches NaN.
    assert!(agrees(f64::NAN, f64::NAN, 0.0, 0, f16_out));
    assert!(!agrees(1.0, f64::NAN, 1.0, 1, f16_out));
    assert!(!agrees(f64::NAN, 1.0, 1.0, 1, f16_out));
    // Infinity matches only the same infinity.
    assert!(agrees(
        f64::INFINITY,
        f64::INFINITY,
        f64::INFINITY,
        1,
        f16_out
    ));
    assert!(!agrees(
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::INFINITY,
        1,
        f16_out
    ));
    // A finite reference beyond binary16's range: an f16 backend returns ∞, which is right.
    assert!(agrees(f64::INFINITY, 70000.0, 70000.0, 2, f16_out));
    assert!(!agrees(
        f64::INFINITY,
        70000.0,
        70000.0,
        2,
        OutputPrecision::F32
    ));
    assert!(!agrees(f64::NEG_INFINITY, 70000.0, 70000.0, 2, f16_out));
    assert!(!agrees(f64::INFINITY, 1000.0, 1000.0, 2, f16_out));
    // The bound grows with the number of terms and their magnitudes.
    let t1 = tolerance(1.0, 10.0, 10, OutputPrecision::F32);
    let t2 = tolerance(1.0, 10.0, 20, OutputPrecision::F32);
    let t3 = tolerance(1.0, 20.0, 10, OutputPrecision::F32);
    assert!(t2 > t1 && t3 > t1);
    // f16 output allows binary16's own rounding: 2⁻¹¹ relative.
    assert!(tolerance(1.0, 1.0, 1, f16_out) >= 1.0 / 2048.0);
    assert!(tolerance(1.0, 1.0, 1, OutputPrecision::F32) < 1.0 / 2048.0);
}

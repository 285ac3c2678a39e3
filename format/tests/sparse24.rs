//! 2:4 structured sparsity (docs/FORMAT.md, "2:4 structured sparsity"): the pruning rule,
//! exact encoding and its refusal, every validity rule broken once with its exact error, round
//! trips through the parts (randomized), and the f64 reference against the dense one.

mod common;

use common::{h, random_dense};
use macko_format::sparse24::groups_per_row;
use macko_format::{f16, is_zero, reference, DenseMatrix, FormatError, Sparse24Matrix};
use proptest::prelude::*;

fn row_of(m: &Sparse24Matrix, r: usize) -> Vec<(usize, f32)> {
    m.row_entries(r).map(|(c, v)| (c, v.to_f32())).collect()
}

#[test]
fn pruning_keeps_the_two_largest_magnitudes_lower_column_first() {
    let w = [
        1.0, -4.0, 3.0, 2.0, // |−4| and 3
        2.0, 2.0, 2.0, 1.0, // ties: the first two
        0.0, 0.0, 0.0, 7.0, // one non-zero: a zero at the lowest column fills
        -0.0, 0.0, 0.0, 0.0, // none: columns 0 and 1
    ]
    .map(h)
    .to_vec();
    let m = Sparse24Matrix::prune_from_dense(&DenseMatrix::new(1, 16, w).unwrap()).unwrap();
    assert_eq!(
        row_of(&m, 0),
        [
            (1, -4.0),
            (2, 3.0),
            (4, 2.0),
            (5, 2.0),
            (8, 0.0),
            (11, 7.0),
            (12, -0.0),
            (13, 0.0)
        ]
    );
}

#[test]
fn pruning_counts_nan_as_the_largest_and_infinity_as_large() {
    let w = vec![h(1.0), f16::NAN, f16::NEG_INFINITY, h(65504.0)];
    let m = Sparse24Matrix::prune_from_dense(&DenseMatrix::new(1, 4, w).unwrap()).unwrap();
    let cols: Vec<usize> = m.row_entries(0).map(|(c, _)| c).collect();
    assert_eq!(cols, [1, 2]);
}

#[test]
fn a_last_partial_group_pads_with_zeros_past_the_matrix() {
    // 5 columns: the second group has one real column.
    let w = [0.0, 1.0, 2.0, 3.0, 9.0, 5.0, 6.0, 0.0, 0.0, 0.0]
        .map(h)
        .to_vec();
    let m = Sparse24Matrix::prune_from_dense(&DenseMatrix::new(2, 5, w).unwrap()).unwrap();
    assert_eq!(groups_per_row(5), 2);
    assert_eq!(row_of(&m, 0), [(2, 2.0), (3, 3.0), (4, 9.0), (5, 0.0)]);
    assert_eq!(row_of(&m, 1), [(0, 5.0), (1, 6.0), (4, 0.0), (5, 0.0)]);
    let back = m.to_dense().unwrap();
    let expect = [0.0, 0.0, 2.0, 3.0, 9.0, 5.0, 6.0, 0.0, 0.0, 0.0]
        .map(h)
        .to_vec();
    assert_eq!(back, DenseMatrix::new(2, 5, expect).unwrap());
    // 4 groups: 8 values, 2 bytes of metadata.
    assert_eq!(m.storage_bytes(), 8 * 2 + 2);
}

#[test]
fn encoding_as_given_refuses_a_group_of_three_non_zeros() {
    let w = [1.0, 0.0, 0.0, 0.0, 1.0, 2.0, 0.0, 3.0].map(h).to_vec();
    let err = Sparse24Matrix::from_dense(&DenseMatrix::new(1, 8, w).unwrap()).unwrap_err();
    assert_eq!(
        err,
        FormatError::Not24 {
            row: 0,
            group: 1,
            nonzeros: 3
        }
    );
    assert!(err.to_string().contains("columns 4..8"), "{err}");
}

#[test]
fn every_validity_rule_is_its_own_error() {
    let two = |a: f32, b: f32| vec![h(a), h(b)];
    // 1×4: one group, one byte of metadata with a spare nibble.
    let ok = Sparse24Matrix::from_parts(1, 4, two(1.0, 2.0), vec![0b1000]).unwrap();
    assert_eq!(row_of(&ok, 0), [(0, 1.0), (2, 2.0)]);
    assert_eq!(
        Sparse24Matrix::from_parts(1, 4, vec![h(1.0)], vec![0b0100]).unwrap_err(),
        FormatError::Sparse24Length {
            what: "values (two per group)",
            expected: 2,
            found: 1
        }
    );
    assert_eq!(
        Sparse24Matrix::from_parts(1, 4, two(1.0, 2.0), vec![]).unwrap_err(),
        FormatError::Sparse24Length {
            what: "metadata (a nibble per group)",
            expected: 1,
            found: 0
        }
    );
    assert_eq!(
        Sparse24Matrix::from_parts(1, 4, two(1.0, 2.0), vec![0x14]).unwrap_err(),
        FormatError::Sparse24SpareNibble { found: 1 }
    );
    // Positions 2 then 1, and equal positions.
    for (n, first, second) in [(0b0110u8, 2, 1), (0b0101, 1, 1)] {
        assert_eq!(
            Sparse24Matrix::from_parts(1, 4, two(1.0, 2.0), vec![n]).unwrap_err(),
            FormatError::Sparse24Positions {
                row: 0,
                group: 0,
                first,
                second
            }
        );
    }
    // 1×3: position 3 is padding and must hold a zero (either sign).
    assert!(Sparse24Matrix::from_parts(1, 3, two(1.0, -0.0), vec![0b1100]).is_ok());
    assert_eq!(
        Sparse24Matrix::from_parts(1, 3, two(1.0, 2.0), vec![0b1100]).unwrap_err(),
        FormatError::Sparse24PaddingNotZero {
            row: 0,
            col: 3,
            bits: h(2.0).to_bits()
        }
    );
    // 2×8: two groups per row; the first group of row 1 is nibble 2 (byte 1, low nibble).
    let mut meta = vec![0b0100_0100u8, 0b0100_0111];
    let values = vec![h(1.0); 8];
    assert_eq!(
        Sparse24Matrix::from_parts(2, 8, values.clone(), meta.clone()).unwrap_err(),
        FormatError::Sparse24Positions {
            row: 1,
            group: 0,
            first: 3,
            second: 1
        }
    );
    meta[1] = 0b0100_0100;
    assert!(Sparse24Matrix::from_parts(2, 8, values, meta).is_ok());
    assert!(matches!(
        Sparse24Matrix::from_parts(usize::MAX, 8, vec![], vec![]).unwrap_err(),
        FormatError::ShapeTooLarge { .. }
    ));
}

#[test]
fn zero_values_contribute_nothing_even_under_infinite_x() {
    let w = [0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0].map(h).to_vec();
    let m = Sparse24Matrix::from_dense(&DenseMatrix::new(1, 8, w).unwrap()).unwrap();
    // Stored zeros at columns 0, 4, 5 (fill); x is ∞ or NaN there.
    let x = vec![
        f16::INFINITY,
        h(3.0),
        h(1.0),
        h(1.0),
        f16::NAN,
        f16::NEG_INFINITY,
        h(1.0),
        h(1.0),
    ];
    let r = reference::spmv_sparse24(&m, &x).unwrap();
    assert_eq!(r.y, [6.0]);
    assert_eq!(r.terms, [1]);
    assert!(matches!(
        reference::spmv_sparse24(&m, &x[..7]).unwrap_err(),
        FormatError::VectorLength { .. }
    ));
}

/// A dense matrix with at most two non-zeros per group of four (the rest of `random_dense`'s
/// entries zeroed).
fn two_of_four(rows: usize, cols: usize, seed: u64) -> DenseMatrix {
    let d = random_dense(rows, cols, 0.7, seed);
    let mut v = d.values().to_vec();
    for r in 0..rows {
        for j in 0..groups_per_row(cols) {
            let mut kept = 0;
            for c in j * 4..(j * 4 + 4).min(cols) {
                let i = r * cols + c;
                if !is_zero(v[i]) {
                    kept += 1;
                    if kept > 2 {
                        v[i] = f16::ZERO;
                    }
                }
            }
        }
    }
    DenseMatrix::new(rows, cols, v).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn two_of_four_matrices_round_trip(rows in 0usize..6, cols in 0usize..23, seed: u64) {
        let d = two_of_four(rows, cols, seed);
        let m = Sparse24Matrix::from_dense(&d).unwrap();
        prop_assert_eq!(m.to_dense().unwrap(), d.clone());
        let again = Sparse24Matrix::from_parts(rows, cols, m.values().to_vec(), m.meta().to_vec())
            .unwrap();
        prop_assert_eq!(&again, &m);
        // Pruning a matrix that is already 2:4 keeps every non-zero.
        prop_assert_eq!(Sparse24Matrix::prune_from_dense(&d).unwrap().to_dense().unwrap(), d);
    }

    #[test]
    fn pruned_products_match_the_dense_reference(
        rows in 1usize..6, cols in 1usize..23, seed: u64,
    ) {
        let d = random_dense(rows, cols, 0.9, seed);
        let m = Sparse24Matrix::prune_from_dense(&d).unwrap();
        let pruned = m.to_dense().unwrap();
        // At most two non-zeros per group, and each kept value is one of the group's largest.
        for r in 0..rows {
            for j in 0..groups_per_row(cols) {
                let group: Vec<f16> = (j * 4..(j * 4 + 4).min(cols))
                    .map(|c| d.row(r)[c]).collect();
                let kept: Vec<f16> = (j * 4..(j * 4 + 4).min(cols))
                    .map(|c| pruned.row(r)[c]).filter(|v| !is_zero(*v)).collect();
                prop_assert!(kept.len() <= 2);
                let mut mags: Vec<f32> = group.iter().map(|v| v.to_f32().abs()).collect();
                mags.sort_by(|a, b| b.total_cmp(a));
                for v in kept {
                    prop_assert!(v.to_f32().abs() >= mags[mags.len().min(2) - 1]);
                }
            }
        }
        let x: Vec<f16> = (0..cols).map(|c| h(((c * 7 + 3) % 11) as f32 / 4.0 - 1.0)).collect();
        let sparse = reference::spmv_sparse24(&m, &x).unwrap();
        let dense = reference::spmv_dense(&pruned, &x).unwrap();
        for r in 0..rows {
            prop_assert!((sparse.y[r] - dense.y[r]).abs() <= 1e-9 * dense.abs_sum[r].max(1.0));
        }
    }
}

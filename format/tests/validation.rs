//! Untrusted arrays: every validity rule of docs/FORMAT.md ("Validity of untrusted arrays") broken
//! at least once, with the exact error asserted; the CSR rules; `is_canonical`; and random
//! corruption that must never panic.

mod common;

use common::{h, random_dense};
use macko_format::{f16, CsrMatrix, FormatError, MackoMatrix};
use proptest::prelude::*;

/// Arrays of a small valid matrix: 3×40, row 0 = 1.0, 2.0, 3.0 at columns 0, 17, 39 (a padding
/// entry before 17 and one before 39); row 1 empty; row 2 = 4.0 at column 5.
/// Entries (value, code): row 0 → (1, 0) (pad, 15) (2, 0) (pad, 15) (3, 5); row 2 → (4, 5).
/// N = 6, P = 8.
fn parts() -> (Vec<u32>, Vec<f16>, Vec<u8>) {
    let row_ptr = vec![0, 5, 5, 6];
    let mut values = vec![f16::ZERO; 8];
    values[0] = h(1.0);
    values[2] = h(2.0);
    values[4] = h(3.0);
    values[5] = h(4.0);
    let codes = [0u8, 15, 0, 15, 5, 5, 0, 0];
    (row_ptr, values, pack(&codes))
}

fn pack(codes: &[u8]) -> Vec<u8> {
    codes
        .chunks(2)
        .map(|p| p[0] | (p.get(1).copied().unwrap_or(0) << 4))
        .collect()
}

fn build(
    rows: usize,
    cols: usize,
    (row_ptr, values, codes): (Vec<u32>, Vec<f16>, Vec<u8>),
) -> Result<MackoMatrix, FormatError> {
    MackoMatrix::from_parts(rows, cols, row_ptr, values, codes)
}

#[test]
fn the_fixture_is_valid_and_canonical() {
    let m = build(3, 40, parts()).unwrap();
    assert!(m.is_canonical());
    let cols: Vec<usize> = m.row_entries(0).map(|(c, _)| c).collect();
    assert_eq!(cols, [0, 16, 17, 33, 39]);
    assert_eq!(m.row_entries(2).collect::<Vec<_>>(), [(5, h(4.0))]);
    // It is exactly what the encoder produces for its dense matrix.
    assert_eq!(MackoMatrix::from_dense(&m.to_dense().unwrap()).unwrap(), m);
}

#[test]
fn rule_1_row_ptr_length_start_and_order() {
    let (mut rp, v, c) = parts();
    rp.pop();
    assert_eq!(
        build(3, 40, (rp, v.clone(), c.clone())).unwrap_err(),
        FormatError::RowPtrLength {
            rows: 3,
            expected: 4,
            found: 3
        }
    );
    let (mut rp, ..) = parts();
    rp.push(6);
    assert_eq!(
        build(3, 40, (rp, v.clone(), c.clone())).unwrap_err(),
        FormatError::RowPtrLength {
            rows: 3,
            expected: 4,
            found: 5
        }
    );
    // Empty row_ptr even for zero rows.
    assert_eq!(
        build(0, 40, (vec![], vec![], vec![])).unwrap_err(),
        FormatError::RowPtrLength {
            rows: 0,
            expected: 1,
            found: 0
        }
    );
    let (mut rp, ..) = parts();
    rp[0] = 1;
    assert_eq!(
        build(3, 40, (rp, v.clone(), c.clone())).unwrap_err(),
        FormatError::RowPtrStart { found: 1 }
    );
    let rp = vec![0, 5, 4, 6];
    assert_eq!(
        build(3, 40, (rp, v, c)).unwrap_err(),
        FormatError::RowPtrDecreasing {
            row: 1,
            start: 5,
            end: 4
        }
    );
}

#[test]
fn rule_2_values_and_codes_lengths() {
    let (rp, mut v, c) = parts();
    v.pop();
    assert_eq!(
        build(3, 40, (rp.clone(), v, c.clone())).unwrap_err(),
        FormatError::ValuesLength {
            entries: 6,
            expected: 8,
            found: 7
        }
    );
    // Unpadded values (N instead of P) are refused too.
    let (_, v, _) = parts();
    assert_eq!(
        build(3, 40, (rp.clone(), v[..6].to_vec(), c.clone())).unwrap_err(),
        FormatError::ValuesLength {
            entries: 6,
            expected: 8,
            found: 6
        }
    );
    let mut long = v.clone();
    long.extend([f16::ZERO; 8]);
    assert_eq!(
        build(3, 40, (rp.clone(), long, c.clone())).unwrap_err(),
        FormatError::ValuesLength {
            entries: 6,
            expected: 8,
            found: 16
        }
    );
    let mut c2 = c.clone();
    c2.push(0);
    assert_eq!(
        build(3, 40, (rp.clone(), v.clone(), c2)).unwrap_err(),
        FormatError::CodesLength {
            entries: 6,
            expected: 4,
            found: 5
        }
    );
    assert_eq!(
        build(3, 40, (rp, v, c[..3].to_vec())).unwrap_err(),
        FormatError::CodesLength {
            entries: 6,
            expected: 4,
            found: 3
        }
    );
}

#[test]
fn rule_3_tail_padding_is_zero() {
    let (rp, mut v, c) = parts();
    v[7] = f16::NEG_ZERO; // −0.0 is not +0.0: tail padding must be bit-zero
    assert_eq!(
        build(3, 40, (rp.clone(), v, c.clone())).unwrap_err(),
        FormatError::TailValueNotZero {
            index: 7,
            bits: 0x8000
        }
    );
    let (_, v, mut c) = parts();
    c[3] = 0x30; // entry 7 (odd: the high nibble of byte 3) gets code 3
    assert_eq!(
        build(3, 40, (rp.clone(), v.clone(), c)).unwrap_err(),
        FormatError::TailCodeNotZero { index: 7, code: 3 }
    );
    // Odd N: the last real entry shares its byte with the first tail entry's code.
    let rp5 = vec![0, 5, 5, 5];
    let (_, mut v5, mut c5) = parts();
    v5[5] = f16::ZERO;
    c5[2] = 0x55; // entry 4 (real) code 5, entry 5 (tail) code 5
    assert_eq!(
        build(3, 40, (rp5.clone(), v5.clone(), c5.clone())).unwrap_err(),
        FormatError::TailCodeNotZero { index: 5, code: 5 }
    );
    c5[2] = 0x05;
    assert!(build(3, 40, (rp5, v5, c5)).is_ok());
}

#[test]
fn rule_4_columns_below_cols() {
    // Row 0 ends at column 39: 40 columns are enough, 39 are not.
    assert!(build(3, 40, parts()).is_ok());
    assert_eq!(
        build(3, 39, parts()).unwrap_err(),
        FormatError::ColumnOutOfRange {
            row: 0,
            column: 39,
            cols: 39
        }
    );
    // The error names the row: here row 1 (column 15) while row 0 (column 0) fits.
    let values = pad_values(&[h(1.0), h(2.0)]);
    let codes = pack(&[0, 15, 0, 0, 0, 0, 0, 0]);
    assert!(MackoMatrix::from_parts(2, 16, vec![0, 1, 2], values.clone(), codes.clone()).is_ok());
    assert_eq!(
        MackoMatrix::from_parts(2, 10, vec![0, 1, 2], values, codes).unwrap_err(),
        FormatError::ColumnOutOfRange {
            row: 1,
            column: 15,
            cols: 10
        }
    );
    // cols = 0 with any entry at all.
    let m = MackoMatrix::from_parts(1, 0, vec![0, 1], pad_values(&[h(1.0)]), vec![0; 4]);
    assert_eq!(
        m.unwrap_err(),
        FormatError::ColumnOutOfRange {
            row: 0,
            column: 0,
            cols: 0
        }
    );
    // cols = 0 and no entries is a valid (empty) matrix.
    assert!(MackoMatrix::from_parts(2, 0, vec![0, 0, 0], vec![], vec![]).is_ok());
}

fn pad_values(v: &[f16]) -> Vec<f16> {
    let mut out = v.to_vec();
    out.resize(v.len().div_ceil(8) * 8, f16::ZERO);
    out
}

#[test]
fn sums_that_overflow_u32_are_refused_before_touching_the_arrays() {
    // N = u32::MAX pads to 2^32 > u32::MAX: refused from row_ptr alone, with empty arrays (no
    // 4 GiB of values needed to reach the check).
    assert_eq!(
        MackoMatrix::from_parts(1, 10, vec![0, u32::MAX], vec![], vec![]).unwrap_err(),
        FormatError::TooManyEntries {
            entries: u32::MAX as u64,
            padded: 1 << 32
        }
    );
    // N = u32::MAX − 7 pads to u32::MAX − 7 + 7 = 2^32 − 8 < u32::MAX: not a size error, so the
    // length check speaks.
    let n = u32::MAX - 7;
    assert!(matches!(
        MackoMatrix::from_parts(1, 10, vec![0, n], vec![], vec![]).unwrap_err(),
        FormatError::ValuesLength { found: 0, .. }
    ));
    // Huge shapes are errors, never panics or allocations.
    assert!(matches!(
        MackoMatrix::from_parts(usize::MAX, 1, vec![0], vec![], vec![]).unwrap_err(),
        FormatError::ShapeTooLarge {
            rows: usize::MAX,
            ..
        }
    ));
    assert!(matches!(
        CsrMatrix::from_parts(usize::MAX, 1, vec![0], vec![], vec![]).unwrap_err(),
        FormatError::ShapeTooLarge { .. }
    ));
    assert_eq!(
        MackoMatrix::from_parts(usize::MAX - 1, 1, vec![0], vec![], vec![]).unwrap_err(),
        FormatError::RowPtrLength {
            rows: usize::MAX - 1,
            expected: usize::MAX,
            found: 1
        }
    );
    // A huge `cols` is fine: it only bounds the columns.
    assert!(MackoMatrix::from_parts(3, usize::MAX, parts().0, parts().1, parts().2).is_ok());
}

#[test]
fn csr_rules() {
    let ok = || {
        (
            vec![0u32, 2, 3],
            vec![1u32, 4, 0],
            vec![h(1.0), h(2.0), h(3.0)],
        )
    };
    let (rp, ci, v) = ok();
    assert!(CsrMatrix::from_parts(2, 5, rp, ci, v).is_ok());
    let (rp, mut ci, v) = ok();
    ci[1] = 1; // equal to the previous column: not strictly increasing
    assert_eq!(
        CsrMatrix::from_parts(2, 5, rp, ci, v).unwrap_err(),
        FormatError::CsrColumnsNotIncreasing {
            row: 0,
            index: 1,
            previous: 1,
            column: 1
        }
    );
    let (rp, mut ci, v) = ok();
    ci[1] = 0;
    assert_eq!(
        CsrMatrix::from_parts(2, 5, rp, ci, v).unwrap_err(),
        FormatError::CsrColumnsNotIncreasing {
            row: 0,
            index: 1,
            previous: 1,
            column: 0
        }
    );
    let (rp, ci, v) = ok();
    assert_eq!(
        CsrMatrix::from_parts(2, 4, rp, ci, v).unwrap_err(),
        FormatError::CsrColumnOutOfRange {
            row: 0,
            index: 1,
            column: 4,
            cols: 4
        }
    );
    let (rp, mut ci, v) = ok();
    ci.pop();
    assert_eq!(
        CsrMatrix::from_parts(2, 5, rp, ci, v).unwrap_err(),
        FormatError::CsrLength {
            entries: 3,
            col_idx: 2,
            values: 3
        }
    );
    let (rp, ci, mut v) = ok();
    v.push(h(9.0));
    assert_eq!(
        CsrMatrix::from_parts(2, 5, rp, ci, v).unwrap_err(),
        FormatError::CsrLength {
            entries: 3,
            col_idx: 3,
            values: 4
        }
    );
    // Rule 1 applies to CSR as well.
    let (_, ci, v) = ok();
    assert_eq!(
        CsrMatrix::from_parts(2, 5, vec![0, 3, 2], ci.clone(), v.clone()).unwrap_err(),
        FormatError::RowPtrDecreasing {
            row: 1,
            start: 3,
            end: 2
        }
    );
    assert_eq!(
        CsrMatrix::from_parts(2, 5, vec![1, 2, 3], ci, v).unwrap_err(),
        FormatError::RowPtrStart { found: 1 }
    );
    // A new row may restart at a lower column.
    let (rp, ci, v) = ok();
    assert_eq!(
        CsrMatrix::from_parts(2, 5, rp, ci, v).unwrap().col_idx()[2],
        0
    );
}

#[test]
fn canonical_form() {
    // A zero entry whose code is below 15 is valid but not canonical.
    let (rp, mut v, c) = parts();
    v[0] = f16::ZERO;
    let m = build(3, 40, (rp.clone(), v, c.clone())).unwrap();
    assert!(!m.is_canonical());
    // A row ending with a zero (even a padding-like one, code 15) is not canonical.
    let (_, mut v, _) = parts();
    v[4] = f16::ZERO;
    let codes = [0u8, 15, 0, 15, 15, 5, 0, 0]; // row 0's last entry now at column 49
    let m = MackoMatrix::from_parts(3, 50, rp.clone(), v, pack(&codes)).unwrap();
    assert!(!m.is_canonical());
    // −0.0 as a padding entry decodes to −0.0 and would not round-trip: not canonical.
    let (_, mut v, _) = parts();
    v[1] = f16::NEG_ZERO;
    assert!(!build(3, 40, (rp.clone(), v, c)).unwrap().is_canonical());
    // NaN entries are non-zero and fine.
    let (_, mut v, c) = parts();
    v[0] = f16::NAN;
    assert!(build(3, 40, (rp.clone(), v, c)).unwrap().is_canonical());
    // Encoder output is canonical.
    for seed in 0..5 {
        let d = random_dense(20, 100, 0.05 * seed as f64, seed);
        assert!(MackoMatrix::from_dense(&d).unwrap().is_canonical());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Random corruption of valid arrays (bytes flipped in any array, entries added or removed,
    /// shape changed) gives a matrix or an error, never a panic; and what is accepted decodes
    /// without a panic too (the checks really do bound every column).
    #[test]
    fn corrupted_arrays_never_panic(
        seed in any::<u64>(),
        density in 0.0f64..1.0,
        edits in proptest::collection::vec((0u8..6, any::<prop::sample::Index>(), any::<u32>()), 1..5),
        rows_delta in -1i64..=1,
        cols_delta in -20i64..=5,
    ) {
        let d = random_dense(6, 50, density, seed);
        let m = MackoMatrix::from_dense(&d).unwrap();
        let (mut rp, mut v, mut c) = m.into_parts();
        for (which, at, x) in edits {
            match which {
                0 if !rp.is_empty() => { let i = at.index(rp.len()); rp[i] = x % 512; }
                1 if !v.is_empty() => { let i = at.index(v.len()); v[i] = f16::from_bits(x as u16); }
                2 if !c.is_empty() => { let i = at.index(c.len()); c[i] = x as u8; }
                3 => { v.truncate(at.index(v.len() + 1)); c.truncate(at.index(c.len() + 1)); }
                4 => { v.extend(std::iter::repeat_n(f16::ZERO, (x % 9) as usize)); c.extend(std::iter::repeat_n(0, (x % 5) as usize)); }
                _ => { let i = at.index(rp.len() + 1); rp.insert(i, x); }
            }
        }
        let rows = (6 + rows_delta) as usize;
        let cols = (50 + cols_delta) as usize;
        if let Ok(m) = MackoMatrix::from_parts(rows, cols, rp, v, c) {
            let dense = m.to_dense().unwrap();
            prop_assert_eq!((dense.rows(), dense.cols()), (rows, cols));
            let csr = m.to_csr().unwrap();
            prop_assert!(csr.nnz() <= m.entries());
            let _ = m.is_canonical();
        }
    }
}

//! Round trips between dense, CSR, COO and MACKO over random shapes and densities (proptest),
//! with forced gaps around the padding thresholds, and the small cases docs/FORMAT.md lists as
//! consequences worth testing ("Canonical encoding of a dense row").

mod common;

use common::{bits, h, nonzero_value};
use macko_format::{f16, CsrMatrix, DenseMatrix, FormatError, MackoMatrix};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// Largest rows × cols generated: keeps the debug-build suite fast.
const MAX_ELEMENTS: usize = 300_000;

/// How the zeros of a generated matrix are laid out.
#[derive(Debug, Clone, Copy)]
enum Gaps {
    /// Each element independently non-zero with the given density.
    Uniform,
    /// Rows built from non-zeros separated by gaps of 14–18 or 30–34 zeros (and some short
    /// ones), the lengths where padding entries start and double.
    Forced,
}

/// A value for a non-zero slot: mostly ordinary numbers, sometimes NaN or ±∞ (stored like any
/// non-zero), and −0.0 now and then (which is a zero and must vanish).
fn slot_value(rng: &mut StdRng) -> f16 {
    match rng.random_range(0..200) {
        0 => f16::NAN,
        1 => f16::INFINITY,
        2 => f16::NEG_INFINITY,
        3 => f16::NEG_ZERO,
        _ => nonzero_value(rng),
    }
}

fn generate(rows: usize, cols: usize, density: f64, gaps: Gaps, seed: u64) -> DenseMatrix {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut values = vec![f16::ZERO; rows * cols];
    for row in values.chunks_mut(cols.max(1)).take(rows) {
        match gaps {
            Gaps::Uniform => {
                for v in row.iter_mut() {
                    if rng.random_bool(density) {
                        *v = slot_value(&mut rng);
                    }
                }
            }
            Gaps::Forced => {
                let mut c = rng.random_range(0..20usize);
                while c < row.len() {
                    row[c] = slot_value(&mut rng);
                    let gap = match rng.random_range(0..5) {
                        0 | 1 => rng.random_range(14..=18),
                        2 | 3 => rng.random_range(30..=34),
                        _ => rng.random_range(0..4),
                    };
                    c += 1 + gap;
                }
            }
        }
    }
    DenseMatrix::new(rows, cols, values).unwrap()
}

/// The dense matrix as MACKO decodes it: −0.0 becomes +0.0, everything else is kept.
fn expected_decode(d: &DenseMatrix) -> Vec<u16> {
    d.values()
        .iter()
        .map(|v| {
            if v.to_bits() == 0x8000 {
                0
            } else {
                v.to_bits()
            }
        })
        .collect()
}

/// Σ over non-zeros of (1 + ⌊g/16⌋), g the zeros skipped before it in its row: the entry count
/// docs/FORMAT.md's encoding implies, computed straight from the dense rows.
fn entries_by_formula(d: &DenseMatrix) -> usize {
    (0..d.rows())
        .map(|r| {
            let mut next = 0usize;
            let mut n = 0usize;
            for (c, v) in d.row(r).iter().enumerate() {
                if v.to_bits() & 0x7fff != 0 {
                    n += 1 + (c - next) / 16;
                    next = c + 1;
                }
            }
            n
        })
        .sum()
}

/// docs/FORMAT.md's canonical encoding, transcribed literally (one element at a time with a counter
/// z of skipped columns, then the entries after a row's last non-zero dropped): an oracle that
/// shares no code with the library's encoder. Returns row_ptr, values and one code per entry.
fn naive_encode(d: &DenseMatrix) -> (Vec<u32>, Vec<u16>, Vec<u8>) {
    let (mut row_ptr, mut values, mut codes) = (vec![0u32], Vec::new(), Vec::new());
    for r in 0..d.rows() {
        let mut entries: Vec<(u16, u8, bool)> = Vec::new(); // (bits, code, is a real non-zero)
        let mut z = 0u8;
        for v in d.row(r) {
            let zero = *v == f16::ZERO; // IEEE comparison: true for ±0.0, false for NaN
            if !zero || z == 15 {
                entries.push((if zero { 0 } else { v.to_bits() }, z, !zero));
                z = 0;
            } else {
                z += 1;
            }
        }
        while entries.last().is_some_and(|e| !e.2) {
            entries.pop();
        }
        values.extend(entries.iter().map(|e| e.0));
        codes.extend(entries.iter().map(|e| e.1));
        row_ptr.push(values.len() as u32);
    }
    (row_ptr, values, codes)
}

fn assert_matches_naive(m: &MackoMatrix, d: &DenseMatrix) {
    let (row_ptr, values, codes) = naive_encode(d);
    assert_eq!(
        m.row_ptr(),
        row_ptr.as_slice(),
        "row_ptr differs from the literal scan"
    );
    let n = m.entries();
    assert_eq!(&bits(m.values())[..n], values.as_slice(), "values");
    assert!(
        m.values()[n..].iter().all(|v| v.to_bits() == 0),
        "tail values"
    );
    let ours: Vec<u8> = (0..m.padded_entries())
        .map(|i| macko_format::code_at(m.codes(), i))
        .collect();
    assert_eq!(&ours[..n], codes.as_slice(), "codes");
    assert!(ours[n..].iter().all(|&c| c == 0), "tail codes");
}

/// Bit-exact equality (derived `PartialEq` would call NaN unequal to itself).
fn assert_same_macko(a: &MackoMatrix, b: &MackoMatrix, what: &str) {
    assert_eq!((a.rows(), a.cols()), (b.rows(), b.cols()), "{what}: shape");
    assert_eq!(a.row_ptr(), b.row_ptr(), "{what}: row_ptr");
    assert_eq!(bits(a.values()), bits(b.values()), "{what}: values");
    assert_eq!(a.codes(), b.codes(), "{what}: codes");
}

fn assert_same_csr(a: &CsrMatrix, b: &CsrMatrix, what: &str) {
    assert_eq!((a.rows(), a.cols()), (b.rows(), b.cols()), "{what}: shape");
    assert_eq!(a.row_ptr(), b.row_ptr(), "{what}: row_ptr");
    assert_eq!(a.col_idx(), b.col_idx(), "{what}: col_idx");
    assert_eq!(bits(a.values()), bits(b.values()), "{what}: values");
}

/// Shapes with rows and cols from 0 to 3000 and at most [`MAX_ELEMENTS`] elements; a third of
/// the cases are small, where edge effects (one group, one row) live.
fn shape() -> impl Strategy<Value = (usize, usize)> {
    prop_oneof![
        (0usize..=40, 0usize..=80),
        (0usize..=3000).prop_flat_map(|rows| {
            let max_cols = (MAX_ELEMENTS / rows.max(1)).min(3000);
            (Just(rows), 0..=max_cols)
        }),
    ]
}

fn gaps() -> impl Strategy<Value = Gaps> {
    prop_oneof![Just(Gaps::Uniform), Just(Gaps::Forced)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn dense_macko_csr_coo_agree(
        (rows, cols) in shape(),
        density in prop_oneof![Just(0.0), Just(1.0), 0.0f64..=1.0],
        gaps in gaps(),
        seed in any::<u64>(),
    ) {
        let dense = generate(rows, cols, density, gaps, seed);
        let m = MackoMatrix::from_dense(&dense).unwrap();

        // The literal scan of docs/FORMAT.md gives the same arrays.
        assert_matches_naive(&m, &dense);

        // Entry count and padded length follow the formulas.
        prop_assert_eq!(m.entries(), entries_by_formula(&dense));
        prop_assert_eq!(m.padded_entries(), m.entries().div_ceil(8) * 8);
        prop_assert!(m.is_canonical());

        // dense → MACKO → dense is exact (−0.0 aside).
        let back = m.to_dense().unwrap();
        prop_assert_eq!(bits(back.values()), expected_decode(&dense));

        // MACKO → CSR → MACKO, and CSR from dense is the same CSR.
        let csr = m.to_csr().unwrap();
        assert_same_csr(&csr, &CsrMatrix::from_dense(&dense).unwrap(), "CSR");
        prop_assert_eq!(bits(csr.to_dense().unwrap().values()), expected_decode(&dense));
        assert_same_macko(&MackoMatrix::from_csr(&csr).unwrap(), &m, "via CSR");

        // Shuffled COO triplets encode to the same matrix.
        let mut triplets: Vec<(u32, u32, f16)> = (0..rows)
            .flat_map(|r| {
                dense.row(r).iter().enumerate().filter(|(_, v)| v.to_bits() & 0x7fff != 0)
                    .map(move |(c, v)| (r as u32, c as u32, *v))
            })
            .collect();
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
        triplets.shuffle(&mut rng);
        assert_same_macko(&MackoMatrix::from_coo(rows, cols, &triplets).unwrap(), &m, "via COO");

        // A duplicated coordinate is refused, naming it.
        if !triplets.is_empty() {
            let i = rng.random_range(0..triplets.len());
            let (r, c, _) = triplets[i];
            triplets.push((r, c, h(7.0)));
            triplets.shuffle(&mut rng);
            prop_assert_eq!(
                MackoMatrix::from_coo(rows, cols, &triplets).unwrap_err(),
                FormatError::DuplicateCoordinate { row: r, col: c }
            );
        }

        // The arrays pass validation as untrusted input.
        let (row_ptr, values, codes) = m.clone().into_parts();
        let again = MackoMatrix::from_parts(rows, cols, row_ptr, values, codes).unwrap();
        assert_same_macko(&again, &m, "from_parts(into_parts)");
        let (row_ptr, col_idx, values) = csr.clone().into_parts();
        let again = CsrMatrix::from_parts(rows, cols, row_ptr, col_idx, values).unwrap();
        assert_same_csr(&again, &csr, "CSR from_parts(into_parts)");
    }
}

// ---- Small deterministic cases (docs/FORMAT.md, "Canonical encoding of a dense row") --------

/// A one-row matrix of width `cols` with non-zeros (value 1, 2, …) at the given columns.
fn row_with(cols: usize, nonzeros: &[usize]) -> DenseMatrix {
    let mut v = vec![f16::ZERO; cols];
    for (k, &c) in nonzeros.iter().enumerate() {
        v[c] = h(k as f32 + 1.0);
    }
    DenseMatrix::new(1, cols, v).unwrap()
}

/// Codes of a matrix's first N entries.
fn codes_of(m: &MackoMatrix) -> Vec<u8> {
    (0..m.entries())
        .map(|i| macko_format::code_at(m.codes(), i))
        .collect()
}

#[test]
fn gap_lengths_around_the_padding_thresholds() {
    // (zeros between two non-zeros, expected codes of the row)
    let cases: [(usize, &[u8]); 7] = [
        (0, &[0, 0]),
        (14, &[0, 14]),
        (15, &[0, 15]),    // no padding: 15 fits one code
        (16, &[0, 15, 0]), // one padding entry
        (17, &[0, 15, 1]),
        (31, &[0, 15, 15]),    // still one
        (32, &[0, 15, 15, 0]), // two
    ];
    for (gap, expected) in cases {
        let d = row_with(gap + 2, &[0, gap + 1]);
        let m = MackoMatrix::from_dense(&d).unwrap();
        assert_eq!(codes_of(&m), expected, "gap {gap}");
        // Padding entries hold +0.0; the real entries their values.
        let n = m.entries();
        assert_eq!(m.values()[0], h(1.0));
        assert_eq!(m.values()[n - 1], h(2.0));
        assert!(
            m.values()[1..n - 1].iter().all(|v| v.to_bits() == 0),
            "gap {gap}"
        );
        assert_eq!(m.to_dense().unwrap(), d);
    }
}

#[test]
fn every_pair_of_columns_across_block_boundaries() {
    // The encoder scans rows in blocks of 64 columns; gaps that start or end on either side of
    // a block boundary (and of the partial last block) are where a fast path could go wrong.
    // One row per pair of non-zero columns (a, b), plus one row per single non-zero.
    let cols = 200;
    let mut rows: Vec<Vec<f16>> = Vec::new();
    for a in 0..cols {
        let mut single = vec![f16::ZERO; cols];
        single[a] = h(1.0);
        rows.push(single);
        for b in a + 1..cols {
            let mut row = vec![f16::ZERO; cols];
            row[a] = h(1.0);
            row[b] = h(-2.0);
            rows.push(row);
        }
    }
    let n = rows.len();
    let d = DenseMatrix::new(n, cols, rows.concat()).unwrap();
    let m = MackoMatrix::from_dense(&d).unwrap();
    assert_matches_naive(&m, &d);
    assert_eq!(m.to_dense().unwrap(), d);
}

#[test]
fn leading_zeros_count_like_any_gap() {
    for (lead, expected) in [
        (0usize, &[0u8][..]),
        (15, &[15]),
        (16, &[15, 0]),
        (40, &[15, 15, 8]),
    ] {
        let m = MackoMatrix::from_dense(&row_with(lead + 1, &[lead])).unwrap();
        assert_eq!(codes_of(&m), expected, "{lead} leading zeros");
        assert_eq!(m.row_entries(0).last().unwrap(), (lead, h(1.0)));
    }
}

#[test]
fn trailing_zeros_are_trimmed_and_zero_rows_are_empty() {
    // Row 0 ends with 50 zeros, row 1 is all zero, row 2 is a single element at the end.
    let mut v = vec![f16::ZERO; 3 * 60];
    v[9] = h(3.0);
    v[2 * 60 + 59] = h(-1.0);
    let d = DenseMatrix::new(3, 60, v).unwrap();
    let m = MackoMatrix::from_dense(&d).unwrap();
    // Row 0: one entry (code 9); row 1: nothing; row 2: 59 zeros = 3 paddings + code 11.
    assert_eq!(m.row_ptr(), &[0, 1, 1, 5]);
    assert_eq!(codes_of(&m), [9, 15, 15, 15, 11]);
    assert_eq!(m.padded_entries(), 8);
    assert_eq!(m.to_dense().unwrap(), d);
    // An all-zero matrix has no entries at all.
    let z = MackoMatrix::from_dense(&DenseMatrix::zeros(7, 100).unwrap()).unwrap();
    assert_eq!(z.row_ptr(), &[0; 8]);
    assert!(z.values().is_empty() && z.codes().is_empty());
}

#[test]
fn negative_zero_is_a_zero_and_nan_inf_are_stored() {
    let v = vec![
        f16::NEG_ZERO,
        f16::NAN,
        f16::NEG_ZERO,
        f16::INFINITY,
        f16::NEG_INFINITY,
        f16::NEG_ZERO,
    ];
    let d = DenseMatrix::new(1, 6, v).unwrap();
    let m = MackoMatrix::from_dense(&d).unwrap();
    // Three entries: NaN (skipping one zero), +∞, −∞; the trailing −0.0 is trimmed.
    assert_eq!(m.row_ptr(), &[0, 3]);
    assert_eq!(codes_of(&m), [1, 1, 0]);
    assert!(m.values()[0].is_nan());
    assert_eq!(m.values()[1], f16::INFINITY);
    assert_eq!(m.values()[2], f16::NEG_INFINITY);
    // Decoding gives +0.0 where −0.0 was.
    let back = m.to_dense().unwrap();
    assert_eq!(
        bits(back.values()),
        [0, f16::NAN.to_bits(), 0, 0x7c00, 0xfc00, 0]
    );
    // A row of only −0.0 has no entries; CSR drops −0.0 as well.
    let d = DenseMatrix::new(1, 3, vec![f16::NEG_ZERO; 3]).unwrap();
    assert_eq!(MackoMatrix::from_dense(&d).unwrap().entries(), 0);
    assert_eq!(CsrMatrix::from_dense(&d).unwrap().nnz(), 0);
}

#[test]
fn coo_errors_name_the_coordinate() {
    let t = [(0u32, 1u32, h(1.0)), (2, 3, h(2.0)), (0, 1, h(3.0))];
    assert_eq!(
        MackoMatrix::from_coo(3, 4, &t).unwrap_err(),
        FormatError::DuplicateCoordinate { row: 0, col: 1 }
    );
    let e = MackoMatrix::from_coo(3, 3, &t[..2]).unwrap_err();
    assert_eq!(
        e,
        FormatError::CoordinateOutOfRange {
            row: 2,
            col: 3,
            rows: 3,
            cols: 3
        }
    );
    // Explicit zeros in COO are kept by CSR but vanish in MACKO (canonical form).
    let t = [(0u32, 0u32, h(0.0)), (0, 2, h(5.0))];
    assert_eq!(CsrMatrix::from_coo(1, 3, &t).unwrap().nnz(), 2);
    let m = MackoMatrix::from_coo(1, 3, &t).unwrap();
    assert_eq!((m.entries(), codes_of(&m)), (1, vec![2]));
    // Any `rows` is an error or a matrix, never a panic.
    assert!(matches!(
        CsrMatrix::from_coo(usize::MAX, 1, &[]).unwrap_err(),
        FormatError::ShapeTooLarge { .. }
    ));
}

#[test]
fn empty_shapes() {
    for (rows, cols) in [(0, 0), (0, 5), (5, 0)] {
        let d = DenseMatrix::zeros(rows, cols).unwrap();
        let m = MackoMatrix::from_dense(&d).unwrap();
        assert_eq!(m.row_ptr(), vec![0; rows + 1].as_slice());
        assert_eq!(m.to_dense().unwrap(), d);
        assert_eq!(MackoMatrix::from_coo(rows, cols, &[]).unwrap(), m);
        assert!(m.is_canonical());
    }
}

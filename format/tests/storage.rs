//! Storage accounting: the table of effective densities that docs/FORMAT.md's formulas give, and
//! random matrices measured against it.

use macko_format::{f16, storage, CsrMatrix, DenseMatrix, MackoMatrix};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

/// docs/FORMAT.md's storage formulas evaluated independently (Python, 6 decimals):
/// d, best 1.25·d, expected 1.25·d·(1 + z/(1 − z)) with z = (1 − d)¹⁶, worst
/// 1.25·(d + (1 − d)/16), CSR 3·d.
const TABLE: [(f64, f64, f64, f64, f64); 10] = [
    (0.1, 0.125000, 0.153431, 0.195312, 0.3),
    (0.2, 0.250000, 0.257241, 0.312500, 0.6),
    (0.3, 0.375000, 0.376250, 0.429688, 0.9),
    (0.4, 0.500000, 0.500141, 0.546875, 1.2),
    (0.5, 0.625000, 0.625010, 0.664062, 1.5),
    (0.6, 0.750000, 0.750000, 0.781250, 1.8),
    (0.7, 0.875000, 0.875000, 0.898438, 2.1),
    (0.8, 1.000000, 1.000000, 1.015625, 2.4),
    (0.9, 1.125000, 1.125000, 1.132812, 2.7),
    (1.0, 1.250000, 1.250000, 1.250000, 3.0),
];

#[test]
fn storage_table_from_the_formulas() {
    println!("   d   best   expected  worst    CSR");
    for (d, best, expected, worst, csr) in TABLE {
        let row = (
            storage::macko_best(d),
            storage::macko_expected(d),
            storage::macko_worst(d),
            storage::csr(d),
        );
        println!(
            " {d:.1}  {:.4}  {:.4}    {:.4}  {:.2}",
            row.0, row.1, row.2, row.3
        );
        assert!((row.0 - best).abs() < 1e-6, "best at d = {d}: {}", row.0);
        assert!(
            (row.1 - expected).abs() < 1e-6,
            "expected at d = {d}: {}",
            row.1
        );
        assert!((row.2 - worst).abs() < 1e-6, "worst at d = {d}: {}", row.2);
        assert!((row.3 - csr).abs() < 1e-12, "CSR at d = {d}: {}", row.3);
        assert!(
            row.0 <= row.1 && row.1 <= row.2,
            "best ≤ expected ≤ worst at d = {d}"
        );
    }
    // An all-zero matrix costs nothing beyond its row pointers.
    assert_eq!(storage::macko_expected(0.0), 0.0);
}

/// A matrix whose elements are non-zero independently with probability `d` (to 2⁻¹⁶). Each
/// 64-bit draw decides four elements, which keeps the debug-build test quick.
fn uniform(rows: usize, cols: usize, d: f64, seed: u64) -> DenseMatrix {
    let mut rng = StdRng::seed_from_u64(seed);
    let threshold = (d * 65536.0).round() as u32;
    let mut values = Vec::with_capacity(rows * cols);
    while values.len() < rows * cols {
        let draw = rng.next_u64();
        for k in 0..4 {
            let u = (draw >> (16 * k)) as u16;
            values.push(if u32::from(u) < threshold {
                f16::ONE
            } else {
                f16::ZERO
            });
        }
    }
    values.truncate(rows * cols);
    DenseMatrix::new(rows, cols, values).unwrap()
}

#[test]
fn random_matrices_land_on_the_expected_column() {
    let (rows, cols) = (512, 4096);
    println!("   d   measured  expected   CSR measured");
    for (i, (d, _, expected, _, _)) in TABLE.into_iter().enumerate() {
        let dense = uniform(rows, cols, d, 100 + i as u64);
        let m = MackoMatrix::from_dense(&dense).unwrap();
        let csr = CsrMatrix::from_dense(&dense).unwrap();

        // Bytes = 2.5·P + 4·(rows + 1), exactly.
        let p = m.padded_entries() as u64;
        assert_eq!(m.bytes(), 2 * p + p / 2 + 4 * (rows as u64 + 1));
        assert_eq!(
            m.effective_density(),
            m.bytes() as f64 / (2.0 * rows as f64 * cols as f64)
        );
        // Within 1% (absolute) of the expected column.
        let measured = m.effective_density();
        println!(
            " {d:.1}   {measured:.4}    {expected:.4}    {:.4}",
            csr.effective_density()
        );
        assert!(
            (measured - expected).abs() <= 0.01,
            "d = {d}: measured {measured}, expected {expected}"
        );
        // CSR: 6 bytes per non-zero plus row pointers, about 3·d.
        assert_eq!(csr.bytes(), 4 * (rows as u64 + 1) + 6 * csr.nnz() as u64);
        assert!(
            (csr.effective_density() - 3.0 * d).abs() <= 0.01,
            "CSR at d = {d}: {}",
            csr.effective_density()
        );
    }
}

#[test]
fn worst_and_best_cases_are_reached() {
    // Best: no gap of 16 or more, so no padding: exactly 1.25·d plus row pointers.
    // One non-zero every 4 columns: d = 0.25.
    let (rows, cols) = (64, 1024);
    let best: Vec<f16> = (0..rows * cols)
        .map(|i| if i % 4 == 3 { f16::ONE } else { f16::ZERO })
        .collect();
    let m = MackoMatrix::from_dense(&DenseMatrix::new(rows, cols, best).unwrap()).unwrap();
    let row_ptr_share = 4.0 * (rows + 1) as f64 / (2.0 * (rows * cols) as f64);
    assert!((m.effective_density() - storage::macko_best(0.25) - row_ptr_share).abs() < 1e-12);
    // Worst: a gap of exactly 16 zeros costs a whole padding entry for one skipped column more
    // than a code can express. One non-zero every 17 columns: a padding entry per non-zero.
    let worst: Vec<f16> = (0..rows * 1020)
        .map(|i| if i % 17 == 16 { f16::ONE } else { f16::ZERO })
        .collect();
    let m = MackoMatrix::from_dense(&DenseMatrix::new(rows, 1020, worst).unwrap()).unwrap();
    assert_eq!(m.entries(), 2 * rows * 60);
    let d = 1.0 / 17.0;
    let row_ptr_share = 4.0 * (rows + 1) as f64 / (2.0 * (rows * 1020) as f64);
    assert!(
        (m.effective_density() - storage::macko_worst(d) - row_ptr_share).abs() < 1e-9,
        "{} vs {}",
        m.effective_density(),
        storage::macko_worst(d)
    );
}

#[test]
fn quantized_matrices_land_on_their_expected_column() {
    use macko_format::{QuantBits, QuantDenseMatrix, QuantMackoMatrix, Quantization, ScaleLayout};
    let (rows, cols) = (512, 4096);
    for (i, d) in [0.1, 0.3, 0.5, 0.7].into_iter().enumerate() {
        let dense = uniform(rows, cols, d, 300 + i as u64);
        let m = MackoMatrix::from_dense(&dense).unwrap();
        for (bits, scales) in [
            (QuantBits::Int8, ScaleLayout::PerRow),
            (QuantBits::Int4, ScaleLayout::PerGroup(64)),
        ] {
            let quant = Quantization { bits, scales };
            let q = QuantMackoMatrix::quantize(&m, quant).unwrap();
            let expected = storage::macko_quant_expected(d, bits, scales);
            let measured = q.effective_density();
            assert!(
                (measured - expected).abs() <= 0.01,
                "{quant:?} at d = {d}: measured {measured}, expected {expected}"
            );
            let qd = QuantDenseMatrix::quantize(&dense, quant).unwrap();
            assert!((qd.effective_density() - storage::dense_quant(bits, scales)).abs() <= 0.01);
        }
    }
    // int8 keeps 1.5 of MACKO-16-4's 2.5 bytes per entry, int4 1 of them.
    assert!(
        (storage::macko_quant_expected(0.5, QuantBits::Int8, ScaleLayout::PerRow)
            - 0.6 * storage::macko_expected(0.5))
        .abs()
            < 1e-12
    );
    assert_eq!(
        storage::dense_quant(QuantBits::Int4, ScaleLayout::PerGroup(64)),
        0.265625
    );
}

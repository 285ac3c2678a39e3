//! Quantized values (docs/FORMAT.md, "Quantized values"): the quantizer's error bound and
//! determinism, every validity rule of the quantized layouts broken once with the exact error,
//! the edge cases (zero scales, single-entry groups, rows shorter than a group, the extreme
//! codes) and the f64 reference against an independent dense computation.

mod common;

use common::{h, random_dense};
use macko_format::quant::{q_at, QuantValues};
use macko_format::{
    f16, reference, DenseMatrix, FormatError, MackoMatrix, QuantBits, QuantDenseMatrix,
    QuantMackoMatrix, Quantization, ScaleLayout,
};
use proptest::prelude::*;

fn layouts() -> Vec<Quantization> {
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

/// |w − s·q| ≤ s/2, except where the code clamped at ±qmax (the binary16 scale rounded below
/// absmax / qmax): there |w| − qmax·s, which is at most qmax·s·2⁻¹¹.
fn check_error(w: f16, s: f16, q: i8, bits: QuantBits) {
    let (w, s) = (w.to_f64(), s.to_f64());
    let err = (w - s * q as f64).abs();
    let qmax = bits.qmax() as f64;
    let bound = if (q as f64).abs() == qmax {
        (s / 2.0).max(w.abs() - qmax * s) + 1e-12
    } else {
        s / 2.0 + 1e-12
    };
    assert!(err <= bound, "w {w} s {s} q {q}: error {err} > {bound}");
    assert!((q as f64).abs() <= qmax, "q {q} beyond ±{qmax}");
}

#[test]
fn macko_quantization_keeps_the_structure_and_bounds_every_error() {
    let dense = random_dense(37, 90, 0.4, 7);
    let m = MackoMatrix::from_dense(&dense).unwrap();
    for quant in layouts() {
        let qm = QuantMackoMatrix::quantize(&m, quant).unwrap();
        assert_eq!(qm.row_ptr(), m.row_ptr());
        assert_eq!(qm.codes(), m.codes());
        assert_eq!(qm.quantization(), quant);
        let v = qm.values();
        assert_eq!(v.len(), m.padded_entries());
        for r in 0..m.rows() {
            for i in m.row_range(r) {
                check_error(m.values()[i], v.scale(i, r), v.q(i), quant.bits);
                if m.values()[i].to_bits() & 0x7fff == 0 {
                    assert_eq!(v.q(i), 0, "a zero (padding) entry stays zero");
                }
            }
        }
        // The same input quantizes to the same arrays, and they pass validation as given.
        assert_eq!(QuantMackoMatrix::quantize(&m, quant).unwrap(), qm);
        let (row_ptr, codes, values) = qm.clone().into_parts();
        let (q, scales) = values.into_parts();
        let back =
            QuantMackoMatrix::from_parts(quant, m.rows(), m.cols(), row_ptr, codes, q, scales)
                .unwrap();
        assert_eq!(back, qm);
    }
}

#[test]
fn dense_quantization_bounds_every_error_and_round_trips() {
    // 7 × 13: an odd element count, so int4 has a spare nibble.
    let dense = random_dense(7, 13, 0.9, 3);
    for quant in layouts() {
        let qd = QuantDenseMatrix::quantize(&dense, quant).unwrap();
        for r in 0..7 {
            for c in 0..13 {
                let i = r * 13 + c;
                check_error(
                    dense.values()[i],
                    qd.values().scale(i, r),
                    qd.values().q(i),
                    quant.bits,
                );
            }
        }
        let (q, scales) = qd.clone().into_values().into_parts();
        assert_eq!(
            QuantDenseMatrix::from_parts(quant, 7, 13, q, scales).unwrap(),
            qd
        );
        assert_eq!(qd.dequantize().unwrap().rows(), 7);
    }
}

#[test]
fn storage_is_what_the_layout_promises() {
    let dense = random_dense(64, 256, 0.5, 11);
    let m = MackoMatrix::from_dense(&dense).unwrap();
    let p = m.padded_entries() as u64;
    let fixed = p / 2 + 4 * 65; // codes and row pointers
    let q8 = QuantMackoMatrix::quantize(&m, Quantization::int8_per_row()).unwrap();
    assert_eq!(q8.bytes(), p + fixed + 2 * 64);
    let q4 = QuantMackoMatrix::quantize(&m, Quantization::int4_per_group(64)).unwrap();
    assert_eq!(q4.bytes(), p / 2 + fixed + 2 * p.div_ceil(64));
    assert!(q4.effective_density() < q8.effective_density());
    assert!(q8.effective_density() < m.effective_density());
    let d4 = QuantDenseMatrix::quantize(&dense, Quantization::int4_per_group(128)).unwrap();
    assert_eq!(d4.bytes(), 64 * 256 / 2 + 2 * (64 * 256 / 128));
}

#[test]
fn quantizing_refuses_weights_that_are_not_finite() {
    let mut values = vec![h(1.0); 16];
    values[9] = f16::INFINITY;
    let dense = DenseMatrix::new(2, 8, values).unwrap();
    assert_eq!(
        QuantDenseMatrix::quantize(&dense, Quantization::int8_per_row()),
        Err(FormatError::NotFiniteWeight {
            index: 9,
            bits: 0x7c00
        })
    );
    let mut values = vec![h(1.0); 16];
    values[3] = f16::NAN;
    let m = MackoMatrix::from_dense(&DenseMatrix::new(2, 8, values).unwrap()).unwrap();
    assert!(matches!(
        QuantMackoMatrix::quantize(&m, Quantization::int4_per_group(8)),
        Err(FormatError::NotFiniteWeight { index: 3, .. })
    ));
}

/// The arrays of a small valid int8 MACKO matrix: 3 × 40 as in validation.rs (row 0 = 1, 2, 3
/// at columns 0, 17, 39 with two padding entries; row 1 empty; row 2 = 4 at column 5), scale 1
/// per row, so q = the values. N = 6, P = 8.
fn q8_parts() -> (Vec<u32>, Vec<u8>, Vec<u8>, Vec<f16>) {
    let codes = [0u8, 15, 0, 15, 5, 5, 0, 0];
    let codes = codes.chunks(2).map(|p| p[0] | (p[1] << 4)).collect();
    let q = vec![1u8, 0, 2, 0, 3, 4, 0, 0];
    (vec![0, 5, 5, 6], codes, q, vec![h(1.0); 3])
}

fn q8(parts: (Vec<u32>, Vec<u8>, Vec<u8>, Vec<f16>)) -> Result<QuantMackoMatrix, FormatError> {
    let (row_ptr, codes, q, scales) = parts;
    QuantMackoMatrix::from_parts(
        Quantization::int8_per_row(),
        3,
        40,
        row_ptr,
        codes,
        q,
        scales,
    )
}

#[test]
fn every_rule_of_the_quantized_layouts_is_checked() {
    let m = q8(q8_parts()).unwrap();
    let entries: Vec<(usize, f64)> = m.row_entries(0).collect();
    assert_eq!(
        entries,
        vec![(0, 1.0), (16, 0.0), (17, 2.0), (33, 0.0), (39, 3.0)]
    );

    let (rp, c, mut q, s) = q8_parts();
    q.push(0);
    assert_eq!(
        q8((rp, c, q, s)),
        Err(FormatError::QuantValuesLength {
            bits: "int8",
            values: 8,
            expected: 8,
            found: 9
        })
    );
    let (rp, c, q, mut s) = q8_parts();
    s.pop();
    assert_eq!(
        q8((rp, c, q, s)),
        Err(FormatError::ScalesLength {
            layout: "row".into(),
            expected: 3,
            found: 2
        })
    );
    let (rp, c, q, mut s) = q8_parts();
    s[1] = f16::NAN;
    assert!(matches!(
        q8((rp, c, q, s)),
        Err(FormatError::ScaleNotFinite { index: 1, .. })
    ));
    let (rp, c, mut q, s) = q8_parts();
    q[7] = 0xff;
    assert_eq!(
        q8((rp, c, q, s)),
        Err(FormatError::TailQuantNotZero { index: 7, q: -1 })
    );
    let (rp, mut c, q, s) = q8_parts();
    c[2] = 0x5f; // entry 4 (row 0's last) gets code 15: column 49 ≥ 40
    assert!(matches!(
        q8((rp, c, q, s)),
        Err(FormatError::ColumnOutOfRange { row: 0, .. })
    ));
    let (mut rp, c, q, s) = q8_parts();
    rp[2] = 4;
    assert!(matches!(
        q8((rp, c, q, s)),
        Err(FormatError::RowPtrDecreasing { row: 1, .. })
    ));
    let (rp, c, q, _) = q8_parts();
    assert_eq!(
        QuantMackoMatrix::from_parts(
            Quantization::int4_per_group(12),
            3,
            40,
            rp,
            c,
            q,
            vec![h(1.0)]
        ),
        Err(FormatError::ScaleGroup { group: 12 })
    );
    // int4 of an odd count: the spare high nibble must be 0.
    let bad = QuantDenseMatrix::from_parts(
        Quantization {
            bits: QuantBits::Int4,
            scales: ScaleLayout::PerRow,
        },
        1,
        3,
        vec![0x21, 0x13],
        vec![h(1.0)],
    );
    assert_eq!(bad, Err(FormatError::TailQuantNotZero { index: 3, q: 1 }));
}

#[test]
fn edge_cases_zero_scales_single_entries_short_rows_extreme_codes() {
    // Extreme codes decode with their sign: int8 −128 and 127, int4 −8 and 7.
    let q8 = QuantDenseMatrix::from_parts(
        Quantization::int8_per_row(),
        1,
        2,
        vec![0x80, 0x7f],
        vec![h(0.5)],
    )
    .unwrap();
    assert_eq!((q8.value(0, 0), q8.value(0, 1)), (-64.0, 63.5));
    let q4 = QuantDenseMatrix::from_parts(
        Quantization {
            bits: QuantBits::Int4,
            scales: ScaleLayout::PerRow,
        },
        1,
        2,
        vec![0x78],
        vec![h(2.0)],
    )
    .unwrap();
    assert_eq!((q4.value(0, 0), q4.value(0, 1)), (-16.0, 14.0));
    // A zero scale makes every value of its row zero, whatever the codes.
    let z = QuantDenseMatrix::from_parts(
        Quantization::int8_per_row(),
        2,
        1,
        vec![5, 5],
        vec![h(0.0), h(1.0)],
    )
    .unwrap();
    assert_eq!((z.value(0, 0), z.value(1, 0)), (0.0, 5.0));
    let x = [f16::INFINITY];
    let r = reference::spmv_dense_quant(&z, &x).unwrap();
    assert!(r.y[0].is_nan(), "dense is IEEE: 0 · ∞ = NaN");
    // Rows of one entry, rows shorter than a group, an all-zero group: per-row scales give a
    // single entry its own exact scale; MACKO zeros never meet x's ∞.
    let mut values = vec![f16::ZERO; 3 * 20];
    values[5] = h(3.0); // row 0: one entry
    values[20 + 2] = h(-1.0); // row 1: two entries
    values[20 + 19] = h(0.25);
    let dense = DenseMatrix::new(3, 20, values).unwrap(); // row 2: empty
    let m = MackoMatrix::from_dense(&dense).unwrap();
    for quant in layouts() {
        let qm = QuantMackoMatrix::quantize(&m, quant).unwrap();
        let mut x = vec![h(1.0); 20];
        // Row 1's gap of 16 needs a padding entry at column 18: NaN there must not reach y,
        // nor ∞ at column 0, where no row has an entry.
        x[18] = f16::NAN;
        x[0] = f16::INFINITY;
        assert!(m.row_entries(1).any(|(c, v)| c == 18 && v.to_bits() == 0));
        let r = reference::spmv_macko_quant(&qm, &x).unwrap();
        assert!(r.y.iter().all(|y| y.is_finite()), "{quant:?}: {:?}", r.y);
        assert_eq!(r.y[2], 0.0);
        if quant.scales == ScaleLayout::PerRow {
            // A single entry is its own absmax: off by the binary16 rounding of its scale only.
            let scale_error = 3.0 * 2f64.powi(-11) + 1e-12;
            assert!((r.y[0] - 3.0).abs() <= scale_error, "{quant:?}: {}", r.y[0]);
        }
    }
}

#[test]
fn reference_products_agree_with_a_dense_f64_product_of_the_exact_values() {
    let dense = random_dense(23, 70, 0.3, 5);
    let m = MackoMatrix::from_dense(&dense).unwrap();
    let x: Vec<f16> = (0..70)
        .map(|i| h(((i * 37 % 17) as f32 - 8.0) / 4.0))
        .collect();
    for quant in layouts() {
        let qm = QuantMackoMatrix::quantize(&m, quant).unwrap();
        let v = qm.values();
        // Independent path: columns from the f16 matrix, values from the packed codes.
        let mut want = [0.0f64; 23];
        for (r, w) in want.iter_mut().enumerate() {
            for (k, (c, _)) in m.row_entries(r).enumerate() {
                let i = m.row_range(r).start + k;
                let value = v.scales()[match quant.scales {
                    ScaleLayout::PerRow => r,
                    ScaleLayout::PerGroup(g) => i / g as usize,
                }]
                .to_f64()
                    * q_at(quant.bits, v.packed(), i) as f64;
                *w += value * x[c].to_f64();
            }
        }
        let got = reference::spmv_macko_quant(&qm, &x).unwrap();
        for (r, &w) in want.iter().enumerate() {
            assert!((got.y[r] - w).abs() <= 1e-9 * (1.0 + w.abs()));
            assert!(got.agrees(r, w as f32 as f64, macko_format::OutputPrecision::F32));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random shapes, densities, widths and groups: validation accepts what the quantizer
    /// writes, every error is bounded, and random corruption of the arrays never panics.
    #[test]
    fn quantized_arrays_validate_and_corruption_never_panics(
        rows in 1usize..12, cols in 1usize..60, d in 0.0f64..1.0, seed in 0u64..1000,
        int4 in any::<bool>(), group in prop::sample::select(vec![0u32, 8, 16, 24, 128]),
        flip in any::<usize>(), byte in any::<u8>(),
    ) {
        let bits = if int4 { QuantBits::Int4 } else { QuantBits::Int8 };
        let scales = if group == 0 { ScaleLayout::PerRow } else { ScaleLayout::PerGroup(group) };
        let quant = Quantization { bits, scales };
        let dense = random_dense(rows, cols, d, seed);
        let m = MackoMatrix::from_dense(&dense).unwrap();
        let qm = QuantMackoMatrix::quantize(&m, quant).unwrap();
        for r in 0..rows {
            for i in m.row_range(r) {
                check_error(m.values()[i], qm.values().scale(i, r), qm.values().q(i), bits);
            }
        }
        let (row_ptr, codes, values) = qm.into_parts();
        let (mut q, scales_v) = values.into_parts();
        if !q.is_empty() {
            let k = flip % q.len();
            q[k] = byte;
        }
        // Corrupted codes either validate (then every entry decodes) or give a typed error.
        if let Ok(back) = QuantMackoMatrix::from_parts(quant, rows, cols, row_ptr, codes, q, scales_v) {
            let x = vec![h(1.0); cols];
            prop_assert!(reference::spmv_macko_quant(&back, &x).is_ok());
        }
        let dq = QuantDenseMatrix::quantize(&dense, quant).unwrap();
        let back = QuantValues::from_parts(
            quant, rows, rows * cols, rows * cols,
            dq.values().packed().to_vec(), dq.values().scales().to_vec(),
        );
        prop_assert_eq!(&back.unwrap(), dq.values());
    }
}

#[test]
fn quantized_matrices_round_trip_through_the_container() {
    use macko_format::container::{self, AnyMatrix, MatrixRef};
    let dense = random_dense(9, 33, 0.5, 21);
    let m = MackoMatrix::from_dense(&dense).unwrap();
    let a = QuantMackoMatrix::quantize(&m, Quantization::int4_per_group(16)).unwrap();
    let b = QuantMackoMatrix::quantize(&m, Quantization::int8_per_row()).unwrap();
    let c = QuantDenseMatrix::quantize(&dense, Quantization::int4_per_group(8)).unwrap();
    let bytes = container::to_bytes(&[
        ("a", MatrixRef::from(&a)),
        ("b", MatrixRef::from(&b)),
        ("c", MatrixRef::from(&c)),
    ])
    .unwrap();
    let file = container::MatrixFile::from_bytes("mem", bytes).unwrap();
    assert_eq!(file.matrix("a").unwrap(), AnyMatrix::MackoQuant(a));
    assert_eq!(file.matrix("b").unwrap(), AnyMatrix::MackoQuant(b.clone()));
    assert_eq!(file.matrix("c").unwrap(), AnyMatrix::DenseQuant(c));
    let infos = file.matrix_infos().unwrap();
    assert_eq!(infos[1].quant, Some(Quantization::int8_per_row()));
    assert_eq!(infos[0].quant, Some(Quantization::int4_per_group(16)));
    // A reference product over any format dispatches to the quantized one.
    let x = vec![h(0.5); 33];
    assert_eq!(
        reference::spmv(MatrixRef::from(&b), &x).unwrap(),
        reference::spmv_macko_quant(&b, &x).unwrap()
    );
}

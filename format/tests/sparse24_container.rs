//! 2:4 as a first-class matrix kind: saved and loaded through the container (tensors, metadata,
//! checksums, validation of what a file holds), the reference dispatch, and the storage formula
//! against the bytes a matrix really stores.

mod common;

use std::collections::HashMap;

use common::{h, random_dense};
use macko_format::container::{self, AnyMatrix, MatrixFile, MatrixKind, MatrixRef};
use macko_format::{f16, reference, storage, DenseMatrix, FormatError, Sparse24Matrix};
use proptest::prelude::*;
use safetensors::{Dtype, View};

/// The byte range of a tensor's data in a safetensors file's bytes.
fn tensor_range(bytes: &[u8], name: &str) -> std::ops::Range<usize> {
    let (header_len, meta) = safetensors::SafeTensors::read_metadata(bytes).unwrap();
    let (start, end) = meta.info(name).unwrap().data_offsets;
    (8 + header_len + start)..(8 + header_len + end)
}

/// A pruned random matrix with a NaN, an infinity and a negative zero kept among its values.
fn pruned_with_specials() -> Sparse24Matrix {
    let mut d = random_dense(5, 30, 0.6, 3).values().to_vec();
    d[0] = f16::NAN;
    d[33] = f16::INFINITY;
    d[61] = f16::NEG_ZERO;
    Sparse24Matrix::prune_from_dense(&DenseMatrix::new(5, 30, d).unwrap()).unwrap()
}

#[test]
fn a_2_4_matrix_round_trips_beside_the_other_kinds() {
    let m = pruned_with_specials();
    let dense = m.to_dense().unwrap();
    let bytes = container::to_bytes(&[("w", (&m).into()), ("d", (&dense).into())]).unwrap();
    let file = MatrixFile::from_bytes("s24", bytes).unwrap();

    assert_eq!(file.matrix("w").unwrap(), AnyMatrix::Sparse24(m.clone()));
    let info = &file.matrix_infos().unwrap()[1];
    assert_eq!(
        (info.kind, info.rows, info.cols),
        (MatrixKind::Sparse24, 5, 30)
    );
    assert_eq!(info.quant, None);
    assert_eq!(MatrixKind::parse("sparse24"), Some(MatrixKind::Sparse24));
    assert_eq!(MatrixKind::Sparse24.as_str(), "sparse24");

    let meta = file.metadata().unwrap();
    let w: serde_json::Value = serde_json::from_str(&meta["macko.w"]).unwrap();
    assert_eq!(w["kind"], "sparse24");
    assert_eq!(
        (w["rows"].as_u64(), w["cols"].as_u64()),
        (Some(5), Some(30))
    );
    assert_eq!(
        file.tensor_names(),
        ["d", "w.meta", "w.values"].map(String::from)
    );
    let record = &meta[container::CHECKSUMS_KEY];
    for tensor in ["\"w.values\"", "\"w.meta\""] {
        assert!(record.contains(tensor), "{record}");
    }
    // Through AnyMatrix: the kind, the shape, the bytes, and MACKO of the same dense matrix.
    let any = file.matrix("w").unwrap();
    assert_eq!(any.kind(), MatrixKind::Sparse24);
    assert_eq!(any.as_ref().bytes(), m.storage_bytes() as u64);
    assert_eq!(
        any.into_macko().unwrap().to_dense().unwrap(),
        dense,
        "into_macko keeps every stored value"
    );
}

#[test]
fn stored_arrays_are_the_2_4_arrays_with_their_dtypes() {
    let m = pruned_with_specials();
    let bytes = container::to_bytes(&[("w", (&m).into())]).unwrap();
    let (_, header) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let values = header.info("w.values").unwrap();
    let meta = header.info("w.meta").unwrap();
    assert_eq!(
        (values.dtype, values.shape.clone()),
        (Dtype::F16, vec![m.values().len()])
    );
    assert_eq!(
        (meta.dtype, meta.shape.clone()),
        (Dtype::U8, vec![m.meta().len()])
    );
    assert_eq!(&bytes[tensor_range(&bytes, "w.meta")], m.meta());
}

#[test]
fn a_changed_meta_byte_is_caught_by_its_checksum() {
    let m = pruned_with_specials();
    let mut bytes = container::to_bytes(&[("w", (&m).into())]).unwrap();
    let meta = tensor_range(&bytes, "w.meta");
    bytes[meta.start] ^= 0x4;
    let text = MatrixFile::from_bytes("flip", bytes)
        .unwrap_err()
        .to_string();
    assert!(text.contains("w.meta"), "{text}");
}

/// A tensor written as is, for crafted files (no checksum record: the validation is what
/// refuses them).
struct Raw(Dtype, Vec<usize>, Vec<u8>);

impl View for &Raw {
    fn dtype(&self) -> Dtype {
        self.0
    }
    fn shape(&self) -> &[usize] {
        &self.1
    }
    fn data(&self) -> std::borrow::Cow<'_, [u8]> {
        std::borrow::Cow::Borrowed(&self.2)
    }
    fn data_len(&self) -> usize {
        self.2.len()
    }
}

/// A file of one 1×6 2:4 matrix `m` with the given arrays (two groups).
fn crafted(values: &[f32], meta: &[u8]) -> MatrixFile {
    let v: Vec<u8> = values
        .iter()
        .flat_map(|x| h(*x).to_bits().to_le_bytes())
        .collect();
    let tensors = [
        ("m.values", Raw(Dtype::F16, vec![values.len()], v)),
        ("m.meta", Raw(Dtype::U8, vec![meta.len()], meta.to_vec())),
    ];
    let metadata = HashMap::from([(
        "macko.m".to_string(),
        r#"{"format":"MACKO-16-4","version":1,"kind":"sparse24","rows":1,"cols":6}"#.to_string(),
    )]);
    let bytes = safetensors::serialize(
        tensors.iter().map(|(n, t)| (n.to_string(), t)),
        Some(metadata),
    )
    .unwrap();
    MatrixFile::from_bytes("crafted", bytes).unwrap()
}

#[test]
fn arrays_in_a_file_are_validated_with_from_parts() {
    // Group 0 at positions 0 and 1, group 1 at 0 and 1 (columns 4 and 5): valid.
    let good = crafted(&[1.0, 2.0, 3.0, 4.0], &[0b0100_0100]);
    assert!(matches!(good.matrix("m").unwrap(), AnyMatrix::Sparse24(_)));

    let source = |file: MatrixFile| match file.matrix("m").unwrap_err() {
        FormatError::InContainer { context, source } => {
            assert!(context.contains("sparse24 matrix `m`"), "{context}");
            *source
        }
        other => panic!("expected InContainer, got {other:?}"),
    };
    // Group 1 stores positions 2 and 3 (columns 6 and 7, padding) with non-zero values.
    assert_eq!(
        source(crafted(&[1.0, 2.0, 3.0, 4.0], &[0b1110_0100])),
        FormatError::Sparse24PaddingNotZero {
            row: 0,
            col: 6,
            bits: h(3.0).to_bits()
        }
    );
    // Group 0's positions decrease.
    assert_eq!(
        source(crafted(&[1.0, 2.0, 3.0, 4.0], &[0b0100_0001])),
        FormatError::Sparse24Positions {
            row: 0,
            group: 0,
            first: 1,
            second: 0
        }
    );
    // Three values for two groups.
    assert_eq!(
        source(crafted(&[1.0, 2.0, 3.0], &[0b0100_0100])),
        FormatError::Sparse24Length {
            what: "values (two per group)",
            expected: 4,
            found: 3
        }
    );
}

#[test]
fn the_reference_dispatches_to_the_2_4_product() {
    let m = pruned_with_specials();
    let x: Vec<f16> = (0..30).map(|c| h(c as f32 / 8.0 - 1.5)).collect();
    // Row 0 holds the NaN, so compare bits (NaN != NaN).
    let bits = |y: &[f64]| y.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    let direct = reference::spmv_sparse24(&m, &x).unwrap();
    assert!(direct.y[0].is_nan());
    let via_ref = reference::spmv(MatrixRef::Sparse24(&m), &x).unwrap();
    assert_eq!(bits(&via_ref.y), bits(&direct.y));
    let two: Vec<f16> = x.iter().chain(&x).copied().collect();
    let batch = reference::spmm((&m).into(), &two, 2).unwrap();
    assert_eq!(bits(&batch.y[5..]), bits(&direct.y));
    assert_eq!(batch.terms[..5], direct.terms[..]);
}

#[test]
fn storage_formula_matches_the_stored_bytes() {
    for rows in [0usize, 1, 2, 3, 7] {
        for cols in 0usize..13 {
            let m =
                Sparse24Matrix::prune_from_dense(&DenseMatrix::zeros(rows, cols).unwrap()).unwrap();
            assert_eq!(
                storage::sparse24_bytes(rows, cols),
                Some(m.storage_bytes() as u64),
                "{rows}×{cols}"
            );
        }
    }
    // Whole groups, an even count: exactly 0.5625 of dense binary16.
    let m = Sparse24Matrix::prune_from_dense(&random_dense(6, 64, 0.9, 1)).unwrap();
    let effective = m.storage_bytes() as f64 / (2.0 * 6.0 * 64.0);
    assert_eq!(effective, storage::SPARSE24);
    assert_eq!(storage::sparse24_bytes(usize::MAX, 8), None);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn pruned_matrices_round_trip_through_a_file(
        rows in 0usize..7, cols in 0usize..27, density in 0.0f64..1.0, seed: u64,
    ) {
        let m = Sparse24Matrix::prune_from_dense(&random_dense(rows, cols, density, seed))
            .unwrap();
        let bytes = container::to_bytes(&[("w", (&m).into())]).unwrap();
        let back = MatrixFile::from_bytes("prop", bytes).unwrap().matrix("w").unwrap();
        prop_assert_eq!(back.as_ref().bytes(), m.bytes());
        prop_assert_eq!(back, AnyMatrix::Sparse24(m));
    }
}

//! Homogeneous CSR as a matrix kind (`csr-homogeneous`): saved and loaded through the container
//! (its tensors, the weight covered by the checksum record), and crafted files refused with the
//! error that names what is wrong: a weight tensor that is not one value, indices that break
//! CSR's rules.

mod common;

use std::collections::HashMap;

use common::random_dense;
use macko_format::container::{self, AnyMatrix, MatrixFile, MatrixKind};
use macko_format::{f16, CsrMatrix, FormatError, HomogeneousCsrMatrix};
use safetensors::{Dtype, View};

#[test]
fn a_homogeneous_csr_matrix_round_trips_with_its_tensors_and_checksum() {
    let csr = CsrMatrix::from_dense(&random_dense(6, 40, 0.3, 4)).unwrap();
    let m = HomogeneousCsrMatrix::from_pattern(&csr, f16::from_f32(-0.375));
    let bytes = container::to_bytes(&[("w", (&m).into()), ("c", (&csr).into())]).unwrap();
    let file = MatrixFile::from_bytes("memory", bytes.clone()).unwrap();
    assert_eq!(
        file.matrix("w").unwrap(),
        AnyMatrix::HomogeneousCsr(m.clone())
    );
    assert_eq!(
        container::tensor_names(MatrixKind::HomogeneousCsr, "w"),
        ["w.row_ptr", "w.col_idx", "w.weight"]
    );
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let weight = st.tensor("w.weight").unwrap();
    assert_eq!(
        (weight.dtype(), weight.shape()),
        (Dtype::F16, &[1usize][..])
    );
    assert_eq!(weight.data(), m.weight().to_bits().to_le_bytes());

    // A flipped bit of the weight is caught by its checksum, naming the tensor.
    let (header_len, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let start = 8 + header_len + meta.info("w.weight").unwrap().data_offsets.0;
    let mut bad = bytes;
    bad[start] ^= 1;
    let text = MatrixFile::from_bytes("flip", bad).unwrap_err().to_string();
    assert!(text.contains("w.weight"), "{text}");
}

/// A tensor written as is, for crafted files (no checksum record).
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

/// A file of one 2×4 homogeneous CSR matrix `m` with the given arrays.
fn crafted(row_ptr: &[u32], col_idx: &[u32], weights: &[f32]) -> MatrixFile {
    let u32s = |v: &[u32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let w: Vec<u8> = weights
        .iter()
        .flat_map(|x| f16::from_f32(*x).to_bits().to_le_bytes())
        .collect();
    let tensors = [
        (
            "m.row_ptr",
            Raw(Dtype::U32, vec![row_ptr.len()], u32s(row_ptr)),
        ),
        (
            "m.col_idx",
            Raw(Dtype::U32, vec![col_idx.len()], u32s(col_idx)),
        ),
        ("m.weight", Raw(Dtype::F16, vec![weights.len()], w)),
    ];
    let metadata = HashMap::from([(
        "macko.m".to_string(),
        r#"{"format":"MACKO-16-4","version":1,"kind":"csr-homogeneous","rows":2,"cols":4}"#
            .to_string(),
    )]);
    let bytes = safetensors::serialize(
        tensors.iter().map(|(n, t)| (n.to_string(), t)),
        Some(metadata),
    )
    .unwrap();
    MatrixFile::from_bytes("crafted", bytes).unwrap()
}

#[test]
fn crafted_files_are_refused_naming_what_is_wrong() {
    let good = crafted(&[0, 2, 3], &[0, 3, 1], &[2.0]);
    match good.matrix("m").unwrap() {
        AnyMatrix::HomogeneousCsr(m) => {
            assert_eq!((m.nnz(), m.weight()), (3, f16::from_f32(2.0)));
        }
        other => panic!("expected a homogeneous CSR matrix, got {other:?}"),
    }
    for weights in [&[][..], &[1.0, 2.0][..]] {
        let text = crafted(&[0, 2, 3], &[0, 3, 1], weights)
            .matrix("m")
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("m.weight") && text.contains(&format!("holds {} values", weights.len())),
            "{text}"
        );
    }
    match crafted(&[0, 2, 3], &[0, 4, 1], &[1.0])
        .matrix("m")
        .unwrap_err()
    {
        FormatError::InContainer { context, source } => {
            assert!(context.contains("csr-homogeneous matrix `m`"), "{context}");
            assert_eq!(
                *source,
                FormatError::CsrColumnOutOfRange {
                    row: 0,
                    index: 1,
                    column: 4,
                    cols: 4
                }
            );
        }
        other => panic!("expected InContainer, got {other:?}"),
    }
}

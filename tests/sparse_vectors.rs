//! Sparse vectors (docs/FORMAT.md, "Sparse vectors"), the x of the products with a sparse input
//! (`tests/sparse_inputs.rs`): the typed errors of `SparseVector::new` (with a proptest against a
//! model of its rules), `SparseVector::from_dense`, and the checks a device makes before any
//! such product (shapes, element types, the device a handle belongs to).

mod common;

use common::*;
use half::f16;
use macko::{BackendKind, CsrMatrix, Device, Error, FormatError, Precision, SparseVector};
use proptest::prelude::*;

#[test]
fn sparse_vectors_refuse_bad_indices_with_typed_errors() {
    let v = |n: usize| vec![f16::ONE; n];
    assert_eq!(
        SparseVector::new(10, vec![1, 2], v(3)),
        Err(FormatError::SparseVectorLength {
            indices: 2,
            values: 3
        })
    );
    assert_eq!(
        SparseVector::new(10, vec![1, 5, 5, 7], v(4)),
        Err(FormatError::SparseIndexDuplicate {
            position: 2,
            index: 5
        })
    );
    assert_eq!(
        SparseVector::new(10, vec![1, 5, 3], v(3)),
        Err(FormatError::SparseIndexUnsorted {
            position: 2,
            index: 3,
            previous: 5
        })
    );
    assert_eq!(
        SparseVector::new(10, vec![1, 10], v(2)),
        Err(FormatError::SparseIndexOutOfRange {
            position: 1,
            index: 10,
            len: 10
        })
    );
    assert_eq!(
        SparseVector::new(0, vec![0], v(1)),
        Err(FormatError::SparseIndexOutOfRange {
            position: 0,
            index: 0,
            len: 0
        })
    );
    let msg = SparseVector::new(10, vec![4, 4], v(2))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("index 4") && msg.contains("repeats"), "{msg}");
    // A NaN or ∞ is not zero and is kept by from_dense; ±0 are dropped.
    let x = [0.0, -0.0, f32::NAN, f32::INFINITY, 1.0].map(f16::from_f32);
    let s = SparseVector::from_dense(&x).unwrap();
    assert_eq!(s.indices(), &[2, 3, 4]);
    assert_eq!(s.len(), 5);
}

#[test]
fn devices_check_the_shapes_of_products_with_sparse_inputs() {
    let dev = Device::new(BackendKind::Cpu).unwrap();
    let a = dev
        .upload(&CsrMatrix::from_dense(&random_dense(4, 6, 0.5, 1)).unwrap())
        .unwrap();
    let x6 = dev.upload_sparse_vector(&SparseVector::zeros(6)).unwrap();
    let x4 = dev.upload_sparse_vector(&SparseVector::zeros(4)).unwrap();
    let mut y4 = dev.zeros(4, Precision::F32).unwrap();
    let mut y6 = dev.zeros(6, Precision::F32).unwrap();
    let shape = |r: macko::Result<()>| match r {
        Err(Error::ShapeMismatch {
            expected, found, ..
        }) => (expected, found),
        other => panic!("expected a shape mismatch, got {other:?}"),
    };
    assert_eq!(shape(dev.spmv_sparse_x(&a, &x4, &mut y4)), (6, 4));
    assert_eq!(shape(dev.spmv_sparse_x(&a, &x6, &mut y6)), (4, 6));
    assert_eq!(
        shape(dev.spmv_transposed_sparse_x(&a, &x6, &mut y6)),
        (4, 6)
    );
    assert_eq!(
        shape(dev.spmv_transposed_sparse_x(&a, &x4, &mut y4)),
        (6, 4)
    );
    let xd = dev.upload_vector(&[f16::ONE; 6]).unwrap();
    assert_eq!(shape(dev.spmv_transposed(&a, &xd, &mut y6)), (4, 6));
    let y32 = dev.zeros(4, Precision::F32).unwrap();
    assert!(matches!(
        dev.spmv_transposed(&a, &y32, &mut y6),
        Err(Error::WrongElementType { .. })
    ));
    let mut yb = dev.zeros_batch(4, 2, Precision::F32).unwrap();
    assert_eq!(shape(dev.spmv_sparse_x(&a, &x6, &mut yb)), (1, 2));
    let other = Device::new(BackendKind::Cpu).unwrap();
    assert!(matches!(
        other.spmv_sparse_x(&a, &x6, &mut y4),
        Err(Error::WrongDevice { .. })
    ));
}

/// The first rule `indices` break for a vector of `len` elements, as `SparseVector::new`
/// must report it: a model of the rules, written independently of the type.
fn first_violation(len: usize, indices: &[u32], values: usize) -> Option<FormatError> {
    if indices.len() != values {
        return Some(FormatError::SparseVectorLength {
            indices: indices.len(),
            values,
        });
    }
    for (position, &index) in indices.iter().enumerate() {
        if index as usize >= len {
            return Some(FormatError::SparseIndexOutOfRange {
                position,
                index,
                len,
            });
        }
        if position > 0 {
            let previous = indices[position - 1];
            if previous == index {
                return Some(FormatError::SparseIndexDuplicate { position, index });
            }
            if previous > index {
                return Some(FormatError::SparseIndexUnsorted {
                    position,
                    index,
                    previous,
                });
            }
        }
    }
    None
}

proptest! {
    #[test]
    fn sparse_vector_validation_matches_its_rules(
        len in 0usize..40,
        indices in proptest::collection::vec(0u32..45, 0..12),
        sorted in any::<bool>(),
        extra_values in 0usize..3,
        short in any::<bool>(),
    ) {
        let mut indices = indices;
        if sorted {
            indices.sort_unstable();
        }
        let values = if short && extra_values > 0 && !indices.is_empty() {
            indices.len() - 1
        } else if short {
            indices.len()
        } else {
            indices.len() + extra_values
        };
        let got = SparseVector::new(len, indices.clone(), vec![f16::ONE; values]);
        match first_violation(len, &indices, values) {
            Some(e) => prop_assert_eq!(got, Err(e)),
            None => {
                let v = got.unwrap();
                prop_assert_eq!(v.indices(), &indices[..]);
                prop_assert_eq!(v.nnz(), indices.len());
            }
        }
    }

    #[test]
    fn from_dense_keeps_exactly_the_non_zeros(
        bits in proptest::collection::vec(any::<u16>(), 0..64),
    ) {
        let x: Vec<f16> = bits.iter().map(|&b| f16::from_bits(b)).collect();
        let s = SparseVector::from_dense(&x).unwrap();
        prop_assert_eq!(s.len(), x.len());
        let back = s.to_dense();
        for (i, (a, b)) in x.iter().zip(&back).enumerate() {
            if macko::format::is_zero(*a) {
                prop_assert_eq!(b.to_bits(), 0, "element {} is zero, stored as +0", i);
            } else {
                prop_assert_eq!(a.to_bits(), b.to_bits(), "element {} kept bit for bit", i);
            }
        }
        // And it passes new()'s checks.
        let (len, indices, values) = s.clone().into_parts();
        prop_assert_eq!(SparseVector::new(len, indices, values), Ok(s));
    }
}

//! Sparse vectors: the x of a product whose input is mostly zero (activations after a ReLU, a
//! one-hot selection of rows), stored as strictly increasing u32 indices and their binary16
//! values (docs/FORMAT.md, "Sparse vectors").
//!
//! A product with a sparse x reads only what x's non-zeros select: `Aᵀ·x` reads the rows of A
//! that x's indices name (`reference::spmv_transposed_sparse_x`), so its cost follows nnz(x),
//! not the size of A.
//!
//! ```
//! use macko_format::{f16, FormatError, SparseVector};
//!
//! let x = SparseVector::new(10, vec![1, 4, 7], [0.5, -2.0, 3.0].map(f16::from_f32).to_vec())?;
//! assert_eq!(x.nnz(), 3);
//! assert_eq!(x.to_dense()[4], f16::from_f32(-2.0));
//!
//! // From a dense vector: ±0 dropped, everything else (NaN and ±∞ included) kept.
//! let dense = [0.0, 1.0, 0.0, f32::NAN].map(f16::from_f32);
//! assert_eq!(SparseVector::from_dense(&dense)?.indices(), &[1, 3]);
//!
//! // Indices must strictly increase: a repeated one is named.
//! let bad = SparseVector::new(10, vec![2, 2], vec![f16::ONE; 2]);
//! assert_eq!(bad, Err(FormatError::SparseIndexDuplicate { position: 1, index: 2 }));
//! # Ok::<(), FormatError>(())
//! ```

use half::f16;

use crate::dense::is_zero;
use crate::error::{FormatError, Result};

/// A validated sparse vector of `len` elements: `indices` strictly increasing and below `len`,
/// one binary16 value per index; every other element is zero.
///
/// A stored value may itself be ±0 (built with [`SparseVector::new`]); like the sparse
/// formats' stored zeros it contributes nothing to a product, even where the matrix holds NaN
/// or ±∞ ([`crate::reference::spmv_sparse_x`]). NaN and ±∞ values are kept and do reach y.
#[derive(Debug, Clone)]
pub struct SparseVector {
    len: usize,
    indices: Vec<u32>,
    values: Vec<f16>,
}

/// Equal when the lengths and indices match and the values are the same bits (a stored NaN
/// equals itself, −0.0 differs from +0.0), as the matrices compare.
impl PartialEq for SparseVector {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && self.indices == other.indices
            && crate::dense::same_bits(&self.values, &other.values)
    }
}

impl Eq for SparseVector {}

impl SparseVector {
    /// Builds a vector of `len` elements from untrusted indices and values, checking every
    /// rule: as many values as indices ([`FormatError::SparseVectorLength`]), each index below
    /// `len` ([`FormatError::SparseIndexOutOfRange`]), each above the one before it
    /// ([`FormatError::SparseIndexDuplicate`] for a repeat, [`FormatError::SparseIndexUnsorted`]
    /// for a smaller one). The first broken rule in index order is reported. Duplicates are an
    /// error rather than summed: a caller who repeats an index has usually made a mistake, and a
    /// silent sum would hide it.
    pub fn new(len: usize, indices: Vec<u32>, values: Vec<f16>) -> Result<Self> {
        if indices.len() != values.len() {
            return Err(FormatError::SparseVectorLength {
                indices: indices.len(),
                values: values.len(),
            });
        }
        let mut previous: Option<u32> = None;
        for (position, &index) in indices.iter().enumerate() {
            if index as usize >= len {
                return Err(FormatError::SparseIndexOutOfRange {
                    position,
                    index,
                    len,
                });
            }
            match previous {
                Some(p) if p == index => {
                    return Err(FormatError::SparseIndexDuplicate { position, index })
                }
                Some(p) if p > index => {
                    return Err(FormatError::SparseIndexUnsorted {
                        position,
                        index,
                        previous: p,
                    })
                }
                _ => {}
            }
            previous = Some(index);
        }
        Ok(Self {
            len,
            indices,
            values,
        })
    }

    /// The non-zero elements of a dense vector, in order. An element is zero when it compares
    /// equal to 0.0 (+0.0 and −0.0 are dropped, as the matrix encoders drop them); NaN and ±∞
    /// are not zero and are kept, so they reach y exactly as they would through the dense
    /// vector. Fails only when an index would not fit u32 (a vector longer than 2³²).
    pub fn from_dense(x: &[f16]) -> Result<Self> {
        if x.len() > u32::MAX as usize + 1 {
            return Err(FormatError::SparseVectorTooLong { len: x.len() });
        }
        let (indices, values) = x
            .iter()
            .enumerate()
            .filter(|(_, v)| !is_zero(**v))
            .map(|(i, &v)| (i as u32, v))
            .unzip();
        Ok(Self {
            len: x.len(),
            indices,
            values,
        })
    }

    /// An all-zero vector of `len` elements (no stored entry).
    pub fn zeros(len: usize) -> Self {
        Self {
            len,
            indices: Vec::new(),
            values: Vec::new(),
        }
    }

    /// Number of elements (stored or not).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the vector has no element at all (`len == 0`; see [`SparseVector::nnz`] for the
    /// stored ones).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }

    /// The stored indices, strictly increasing.
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }

    /// The stored values, one per index.
    pub fn values(&self) -> &[f16] {
        &self.values
    }

    /// The stored `(index, value)` pairs in index order.
    pub fn entries(&self) -> impl Iterator<Item = (usize, f16)> + '_ {
        self.indices
            .iter()
            .zip(&self.values)
            .map(|(&i, &v)| (i as usize, v))
    }

    /// The dense vector: the stored values at their indices, +0.0 elsewhere.
    pub fn to_dense(&self) -> Vec<f16> {
        let mut out = vec![f16::ZERO; self.len];
        for (i, v) in self.entries() {
            out[i] = v;
        }
        out
    }

    /// Consumes the vector, returning `(len, indices, values)`.
    pub fn into_parts(self) -> (usize, Vec<u32>, Vec<f16>) {
        (self.len, self.indices, self.values)
    }
}

//! # macko-format
//!
//! The MACKO-16-4 sparse matrix format, and the dense and CSR formats beside it: types,
//! encoders, decoders, validation of untrusted arrays, storage accounting, safetensors I/O and
//! the f64 reference product. No GPU code lives here: every backend of `macko` is fed from this
//! crate and never re-derives a layout on its own. The contract is docs/FORMAT.md (MACKO-16-4 is
//! CSR whose column indices are 4-bit gap codes, with explicit zeros where a gap does not fit).
//!
//! ```
//! use half::f16;
//! use macko_format::{reference, DenseMatrix, MackoMatrix, OutputPrecision};
//!
//! // A 2×40 matrix with a gap of 20 zeros in row 0: one padding entry is needed.
//! let mut values = vec![f16::ZERO; 80];
//! values[0] = f16::from_f32(1.5);
//! values[21] = f16::from_f32(-2.0);
//! values[45] = f16::from_f32(4.0);
//! let dense = DenseMatrix::new(2, 40, values)?;
//! let m = MackoMatrix::from_dense(&dense)?;
//! assert_eq!(m.row_ptr(), &[0, 3, 4]);          // entry, padding, entry | entry
//! assert!(m.is_canonical());
//! assert_eq!(m.to_dense()?, dense);             // exact round trip
//!
//! let x = vec![f16::ONE; 40];
//! let r = reference::spmv_macko(&m, &x)?;
//! assert_eq!(r.y, vec![-0.5, 4.0]);
//! assert!(r.agrees(0, -0.5, OutputPrecision::F16));
//! # Ok::<(), macko_format::FormatError>(())
//! ```

#![deny(missing_docs)]

pub mod aligned;
pub mod container;
mod csr;
mod csr_homogeneous;
mod dense;
mod dense_quant;
mod encode;
mod error;
mod macko;
mod macko_quant;
mod matrix;
pub mod quant;
pub mod reference;
mod row_ptr;
pub mod sparse24;
mod sparse_vector;
pub mod storage;

pub use container::MatrixFile;
pub use csr::CsrMatrix;
pub use csr_homogeneous::HomogeneousCsrMatrix;
pub use dense::{is_zero, DenseMatrix};
pub use dense_quant::QuantDenseMatrix;
pub use error::{FormatError, Result};
pub use half::f16;
pub use macko::{code_at, padded_len, MackoMatrix, FORMAT_NAME, FORMAT_VERSION, GROUP, MAX_CODE};
pub use macko_quant::QuantMackoMatrix;
pub use matrix::{AnyMatrix, MatrixKind, MatrixRef};
pub use quant::{QuantBits, Quantization, ScaleLayout};
pub use reference::OutputPrecision;
pub use sparse24::Sparse24Matrix;
pub use sparse_vector::SparseVector;

//! The three formats behind one borrowed (`MatrixRef`) and one owned (`AnyMatrix`) type, so
//! code that takes "a matrix in any format" — the container, the devices of `macko` — shares one
//! definition.

use crate::csr::CsrMatrix;
use crate::dense::DenseMatrix;
use crate::error::Result;
use crate::macko::MackoMatrix;

/// Which of the three formats a stored matrix is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatrixKind {
    /// MACKO-16-4 (`row_ptr`, `values`, `codes`).
    Macko,
    /// CSR with u32 indices (`row_ptr`, `col_idx`, `values`).
    Csr,
    /// Dense row-major binary16 (one 2-D tensor).
    Dense,
}

impl MatrixKind {
    /// The name written into the metadata: `macko`, `csr` or `dense`.
    pub fn as_str(self) -> &'static str {
        match self {
            MatrixKind::Macko => "macko",
            MatrixKind::Csr => "csr",
            MatrixKind::Dense => "dense",
        }
    }

    /// The kind named by [`MatrixKind::as_str`], if any.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "macko" => Some(MatrixKind::Macko),
            "csr" => Some(MatrixKind::Csr),
            "dense" => Some(MatrixKind::Dense),
            _ => None,
        }
    }
}

/// A borrowed matrix of any of the three formats, to be saved.
#[derive(Debug, Clone, Copy)]
pub enum MatrixRef<'a> {
    /// A MACKO-16-4 matrix.
    Macko(&'a MackoMatrix),
    /// A CSR matrix.
    Csr(&'a CsrMatrix),
    /// A dense matrix.
    Dense(&'a DenseMatrix),
}

impl<'a> From<&'a MackoMatrix> for MatrixRef<'a> {
    fn from(m: &'a MackoMatrix) -> Self {
        MatrixRef::Macko(m)
    }
}
impl<'a> From<&'a CsrMatrix> for MatrixRef<'a> {
    fn from(m: &'a CsrMatrix) -> Self {
        MatrixRef::Csr(m)
    }
}
impl<'a> From<&'a DenseMatrix> for MatrixRef<'a> {
    fn from(m: &'a DenseMatrix) -> Self {
        MatrixRef::Dense(m)
    }
}
impl<'a> From<&'a AnyMatrix> for MatrixRef<'a> {
    fn from(m: &'a AnyMatrix) -> Self {
        m.as_ref()
    }
}

impl MatrixRef<'_> {
    /// The format of the matrix.
    pub fn kind(&self) -> MatrixKind {
        match self {
            MatrixRef::Macko(_) => MatrixKind::Macko,
            MatrixRef::Csr(_) => MatrixKind::Csr,
            MatrixRef::Dense(_) => MatrixKind::Dense,
        }
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        match self {
            MatrixRef::Macko(m) => m.rows(),
            MatrixRef::Csr(m) => m.rows(),
            MatrixRef::Dense(m) => m.rows(),
        }
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        match self {
            MatrixRef::Macko(m) => m.cols(),
            MatrixRef::Csr(m) => m.cols(),
            MatrixRef::Dense(m) => m.cols(),
        }
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows(), self.cols())
    }

    /// Bytes of the stored arrays (what a product must read, vectors aside).
    pub fn bytes(&self) -> u64 {
        match self {
            MatrixRef::Macko(m) => m.bytes(),
            MatrixRef::Csr(m) => m.bytes(),
            MatrixRef::Dense(m) => m.bytes(),
        }
    }
}

/// An owned, validated matrix of any of the three formats, as loaded from a file.
#[derive(Debug, Clone, PartialEq)]
pub enum AnyMatrix {
    /// A MACKO-16-4 matrix.
    Macko(MackoMatrix),
    /// A CSR matrix.
    Csr(CsrMatrix),
    /// A dense matrix.
    Dense(DenseMatrix),
}

impl From<MackoMatrix> for AnyMatrix {
    fn from(m: MackoMatrix) -> Self {
        AnyMatrix::Macko(m)
    }
}
impl From<CsrMatrix> for AnyMatrix {
    fn from(m: CsrMatrix) -> Self {
        AnyMatrix::Csr(m)
    }
}
impl From<DenseMatrix> for AnyMatrix {
    fn from(m: DenseMatrix) -> Self {
        AnyMatrix::Dense(m)
    }
}

impl AnyMatrix {
    /// Borrows the matrix (to save it again, or to inspect its shape).
    pub fn as_ref(&self) -> MatrixRef<'_> {
        match self {
            AnyMatrix::Macko(m) => MatrixRef::Macko(m),
            AnyMatrix::Csr(m) => MatrixRef::Csr(m),
            AnyMatrix::Dense(m) => MatrixRef::Dense(m),
        }
    }

    /// The format of the matrix.
    pub fn kind(&self) -> MatrixKind {
        self.as_ref().kind()
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.as_ref().rows()
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.as_ref().cols()
    }

    /// The matrix in MACKO-16-4: returned as is when it already is one, canonically encoded
    /// from CSR or dense otherwise (stored zeros of a CSR are dropped, see
    /// [`MackoMatrix::from_csr`]).
    pub fn into_macko(self) -> Result<MackoMatrix> {
        match self {
            AnyMatrix::Macko(m) => Ok(m),
            AnyMatrix::Csr(m) => MackoMatrix::from_csr(&m),
            AnyMatrix::Dense(m) => MackoMatrix::from_dense(&m),
        }
    }
}

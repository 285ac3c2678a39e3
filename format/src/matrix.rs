//! The formats behind one borrowed (`MatrixRef`) and one owned (`AnyMatrix`) type, so
//! code that takes "a matrix in any format" — the container, the devices of `macko` — shares one
//! definition.

use crate::csr::CsrMatrix;
use crate::csr_homogeneous::HomogeneousCsrMatrix;
use crate::dense::DenseMatrix;
use crate::dense_quant::QuantDenseMatrix;
use crate::error::Result;
use crate::macko::MackoMatrix;
use crate::macko_quant::QuantMackoMatrix;
use crate::sparse24::Sparse24Matrix;

/// Which format a stored matrix is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatrixKind {
    /// MACKO-16-4 (`row_ptr`, `values`, `codes`).
    Macko,
    /// CSR with u32 indices (`row_ptr`, `col_idx`, `values`).
    Csr,
    /// Dense row-major binary16 (one 2-D tensor).
    Dense,
    /// MACKO with int8 or int4 values and binary16 scales (`row_ptr`, `codes`, `q`, `scales`).
    MackoQuant,
    /// Dense row-major int8 or int4 values with binary16 scales (`q`, `scales`).
    DenseQuant,
    /// 2:4 structured sparsity: two binary16 values and a position nibble per group of four
    /// columns (`values`, `meta`).
    Sparse24,
    /// Homogeneous CSR: a CSR pattern without values, one binary16 weight for every entry
    /// (`row_ptr`, `col_idx`, `weight`).
    HomogeneousCsr,
}

impl MatrixKind {
    /// The name written into the metadata: `macko`, `csr`, `dense`, `macko-quant`,
    /// `dense-quant`, `sparse24` (not `2:4`: the name also appears in file names and CLI
    /// listings, where a colon is awkward).
    pub fn as_str(self) -> &'static str {
        match self {
            MatrixKind::Macko => "macko",
            MatrixKind::Csr => "csr",
            MatrixKind::Dense => "dense",
            MatrixKind::MackoQuant => "macko-quant",
            MatrixKind::DenseQuant => "dense-quant",
            MatrixKind::Sparse24 => "sparse24",
            MatrixKind::HomogeneousCsr => "csr-homogeneous",
        }
    }

    /// The kind named by [`MatrixKind::as_str`], if any.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "macko" => Some(MatrixKind::Macko),
            "csr" => Some(MatrixKind::Csr),
            "dense" => Some(MatrixKind::Dense),
            "macko-quant" => Some(MatrixKind::MackoQuant),
            "dense-quant" => Some(MatrixKind::DenseQuant),
            "sparse24" => Some(MatrixKind::Sparse24),
            "csr-homogeneous" => Some(MatrixKind::HomogeneousCsr),
            _ => None,
        }
    }
}

/// A borrowed matrix of any format, to be saved or uploaded.
#[derive(Debug, Clone, Copy)]
pub enum MatrixRef<'a> {
    /// A MACKO-16-4 matrix.
    Macko(&'a MackoMatrix),
    /// A CSR matrix.
    Csr(&'a CsrMatrix),
    /// A dense matrix.
    Dense(&'a DenseMatrix),
    /// A MACKO matrix with quantized values.
    MackoQuant(&'a QuantMackoMatrix),
    /// A dense matrix with quantized values.
    DenseQuant(&'a QuantDenseMatrix),
    /// A 2:4 structured sparse matrix.
    Sparse24(&'a Sparse24Matrix),
    /// A homogeneous CSR matrix (one weight for every entry).
    HomogeneousCsr(&'a HomogeneousCsrMatrix),
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
impl<'a> From<&'a QuantMackoMatrix> for MatrixRef<'a> {
    fn from(m: &'a QuantMackoMatrix) -> Self {
        MatrixRef::MackoQuant(m)
    }
}
impl<'a> From<&'a QuantDenseMatrix> for MatrixRef<'a> {
    fn from(m: &'a QuantDenseMatrix) -> Self {
        MatrixRef::DenseQuant(m)
    }
}
impl<'a> From<&'a Sparse24Matrix> for MatrixRef<'a> {
    fn from(m: &'a Sparse24Matrix) -> Self {
        MatrixRef::Sparse24(m)
    }
}
impl<'a> From<&'a HomogeneousCsrMatrix> for MatrixRef<'a> {
    fn from(m: &'a HomogeneousCsrMatrix) -> Self {
        MatrixRef::HomogeneousCsr(m)
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
            MatrixRef::MackoQuant(_) => MatrixKind::MackoQuant,
            MatrixRef::DenseQuant(_) => MatrixKind::DenseQuant,
            MatrixRef::Sparse24(_) => MatrixKind::Sparse24,
            MatrixRef::HomogeneousCsr(_) => MatrixKind::HomogeneousCsr,
        }
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        match self {
            MatrixRef::Macko(m) => m.rows(),
            MatrixRef::Csr(m) => m.rows(),
            MatrixRef::Dense(m) => m.rows(),
            MatrixRef::MackoQuant(m) => m.rows(),
            MatrixRef::DenseQuant(m) => m.rows(),
            MatrixRef::Sparse24(m) => m.rows(),
            MatrixRef::HomogeneousCsr(m) => m.rows(),
        }
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        match self {
            MatrixRef::Macko(m) => m.cols(),
            MatrixRef::Csr(m) => m.cols(),
            MatrixRef::Dense(m) => m.cols(),
            MatrixRef::MackoQuant(m) => m.cols(),
            MatrixRef::DenseQuant(m) => m.cols(),
            MatrixRef::Sparse24(m) => m.cols(),
            MatrixRef::HomogeneousCsr(m) => m.cols(),
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
            MatrixRef::MackoQuant(m) => m.bytes(),
            MatrixRef::DenseQuant(m) => m.bytes(),
            MatrixRef::Sparse24(m) => m.bytes(),
            MatrixRef::HomogeneousCsr(m) => m.bytes(),
        }
    }
}

/// An owned, validated matrix of any format, as loaded from a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnyMatrix {
    /// A MACKO-16-4 matrix.
    Macko(MackoMatrix),
    /// A CSR matrix.
    Csr(CsrMatrix),
    /// A dense matrix.
    Dense(DenseMatrix),
    /// A MACKO matrix with quantized values.
    MackoQuant(QuantMackoMatrix),
    /// A dense matrix with quantized values.
    DenseQuant(QuantDenseMatrix),
    /// A 2:4 structured sparse matrix.
    Sparse24(Sparse24Matrix),
    /// A homogeneous CSR matrix (one weight for every entry).
    HomogeneousCsr(HomogeneousCsrMatrix),
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

impl From<QuantMackoMatrix> for AnyMatrix {
    fn from(m: QuantMackoMatrix) -> Self {
        AnyMatrix::MackoQuant(m)
    }
}
impl From<QuantDenseMatrix> for AnyMatrix {
    fn from(m: QuantDenseMatrix) -> Self {
        AnyMatrix::DenseQuant(m)
    }
}

impl From<Sparse24Matrix> for AnyMatrix {
    fn from(m: Sparse24Matrix) -> Self {
        AnyMatrix::Sparse24(m)
    }
}

impl From<HomogeneousCsrMatrix> for AnyMatrix {
    fn from(m: HomogeneousCsrMatrix) -> Self {
        AnyMatrix::HomogeneousCsr(m)
    }
}

impl AnyMatrix {
    /// Borrows the matrix (to save it again, or to inspect its shape).
    pub fn as_ref(&self) -> MatrixRef<'_> {
        match self {
            AnyMatrix::Macko(m) => MatrixRef::Macko(m),
            AnyMatrix::Csr(m) => MatrixRef::Csr(m),
            AnyMatrix::Dense(m) => MatrixRef::Dense(m),
            AnyMatrix::MackoQuant(m) => MatrixRef::MackoQuant(m),
            AnyMatrix::DenseQuant(m) => MatrixRef::DenseQuant(m),
            AnyMatrix::Sparse24(m) => MatrixRef::Sparse24(m),
            AnyMatrix::HomogeneousCsr(m) => MatrixRef::HomogeneousCsr(m),
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
    /// [`MackoMatrix::from_csr`]), from the dense form of a 2:4 matrix (exact), and from the
    /// binary16 rounding of the values of a quantized matrix (lossy: see
    /// [`QuantMackoMatrix::dequantize`]), and from the CSR a homogeneous CSR stands for (its
    /// weight at every entry; a zero weight leaves no entry).
    pub fn into_macko(self) -> Result<MackoMatrix> {
        match self {
            AnyMatrix::Macko(m) => Ok(m),
            AnyMatrix::Csr(m) => MackoMatrix::from_csr(&m),
            AnyMatrix::Dense(m) => MackoMatrix::from_dense(&m),
            AnyMatrix::MackoQuant(m) => MackoMatrix::from_dense(&m.dequantize()?),
            AnyMatrix::DenseQuant(m) => MackoMatrix::from_dense(&m.dequantize()?),
            AnyMatrix::Sparse24(m) => MackoMatrix::from_dense(&m.to_dense()?),
            AnyMatrix::HomogeneousCsr(m) => MackoMatrix::from_csr(&m.to_csr()),
        }
    }
}

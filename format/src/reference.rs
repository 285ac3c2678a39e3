//! The f64 reference product y = A·x that every backend is tested against, and the tolerance
//! a backend's f32-accumulated result must meet.
//!
//! Semantics (docs/FORMAT.md, "Multiplication semantics"): in the sparse formats (MACKO, CSR,
//! homogeneous CSR, 2:4) an entry whose value is ±0 — padding entries, tail padding —
//! contributes nothing, even where x holds NaN or ±∞. Dense follows IEEE arithmetic, as every
//! dense GEMV (cuBLAS included) does: a stored zero times ∞ is NaN. Products with a sparse
//! input and the transposed product Aᵀ·x skip x's zeros besides ([`spmv_sparse_x`],
//! [`spmv_transposed`]).

use half::f16;

use crate::csr::CsrMatrix;
use crate::csr_homogeneous::HomogeneousCsrMatrix;
use crate::dense::{is_zero, DenseMatrix};
use crate::dense_quant::QuantDenseMatrix;
use crate::error::{FormatError, Result};
use crate::macko::MackoMatrix;
use crate::macko_quant::QuantMackoMatrix;
use crate::sparse24::Sparse24Matrix;
use crate::sparse_vector::SparseVector;
use crate::MatrixRef;

/// The precision a backend returns y in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputPrecision {
    /// binary16, rounded once from the f32 accumulator.
    F16,
    /// binary32, the accumulator itself.
    F32,
}

/// Reference result of one product: per row, the exact-ish value, the sum of the magnitudes of
/// its terms and the number of terms (what the tolerance is derived from).
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// Σ aᵢ·x\[cᵢ\] in f64.
    pub y: Vec<f64>,
    /// Σ |aᵢ·x\[cᵢ\]| in f64.
    pub abs_sum: Vec<f64>,
    /// Number of terms added in the row.
    pub terms: Vec<usize>,
}

/// Unit roundoff of binary32 (2⁻²⁴).
const U32: f64 = 1.0 / (1u64 << 24) as f64;
/// Unit roundoff of binary16 (2⁻¹¹).
const U16: f64 = 1.0 / (1u64 << 11) as f64;
/// Half the smallest binary16 subnormal (2⁻²⁵): the absolute rounding error near zero.
const HALF_MIN_SUBNORMAL_HALF: f64 = 1.0 / (1u64 << 25) as f64;
/// Values at or above this round to ±∞ in binary16.
const F16_OVERFLOW: f64 = 65520.0;

impl Reference {
    fn with_rows(rows: usize) -> Self {
        Self {
            y: vec![0.0; rows],
            abs_sum: vec![0.0; rows],
            terms: vec![0; rows],
        }
    }

    /// The largest error allowed in row `r` for a backend that accumulates in f32 and returns
    /// `out` (see [`tolerance`]).
    pub fn tolerance(&self, r: usize, out: OutputPrecision) -> f64 {
        tolerance(self.y[r], self.abs_sum[r], self.terms[r], out)
    }

    /// Whether `got` is an acceptable value for row `r` (see [`agrees`]).
    pub fn agrees(&self, r: usize, got: f64, out: OutputPrecision) -> bool {
        agrees(got, self.y[r], self.abs_sum[r], self.terms[r], out)
    }

    /// The first row whose `got` value is not acceptable, as `(row, got, expected, tolerance)`.
    pub fn first_disagreement(
        &self,
        got: &[f64],
        out: OutputPrecision,
    ) -> Option<(usize, f64, f64, f64)> {
        (0..self.y.len())
            .find(|&r| !self.agrees(r, got[r], out))
            .map(|r| (r, got[r], self.y[r], self.tolerance(r, out)))
    }
}

/// Error bound of an f32-accumulated product, from the arithmetic rather than a guess.
///
/// Each term aᵢ·x\[cᵢ\] of two binary16 numbers is exact in binary32 (11 + 11 significant bits ≤
/// 24, exponents in range), so only the additions round. Summing n terms in any order (serial,
/// tree, warp shuffles) errs by at most (n − 1)·u·Σ|terms| to first order, u = 2⁻²⁴; we allow
/// n·u·Σ|terms|, which also covers the second-order term for any n < 2²³. An f16 output then
/// rounds once more: 2⁻¹¹ relative plus 2⁻²⁵ absolute (subnormals). The f64 reference's own
/// error (≈ n·2⁻⁵³·Σ) is three orders below and covered by the same slack.
pub fn tolerance(reference: f64, abs_sum: f64, terms: usize, out: OutputPrecision) -> f64 {
    let accumulate = terms as f64 * U32 * abs_sum;
    match out {
        OutputPrecision::F32 => accumulate * (1.0 + U32) + U32 * reference.abs(),
        OutputPrecision::F16 => {
            accumulate * (1.0 + U16) + U16 * reference.abs() + HALF_MIN_SUBNORMAL_HALF
        }
    }
}

/// Whether a backend's `got` is acceptable for a reference value: NaN exactly where the
/// reference is NaN, the same infinity where it is infinite, else within [`tolerance`] (for f16
/// output, ±∞ is also accepted where the bound reaches the binary16 overflow threshold).
pub fn agrees(got: f64, reference: f64, abs_sum: f64, terms: usize, out: OutputPrecision) -> bool {
    if reference.is_nan() || got.is_nan() {
        return reference.is_nan() && got.is_nan();
    }
    if reference.is_infinite() {
        return got == reference;
    }
    let tol = tolerance(reference, abs_sum, terms, out);
    if got.is_infinite() {
        return out == OutputPrecision::F16
            && got.signum() == reference.signum()
            && reference.abs() + tol >= F16_OVERFLOW;
    }
    (got - reference).abs() <= tol
}

fn check_x(cols: usize, x: &[f16]) -> Result<()> {
    if x.len() != cols {
        return Err(FormatError::VectorLength {
            what: "x must have one element per column",
            expected: cols,
            found: x.len(),
        });
    }
    Ok(())
}

/// Adds one term to row `r`.
#[inline]
fn accumulate(out: &mut Reference, r: usize, a: f16, x: f16) {
    let term = a.to_f64() * x.to_f64();
    out.y[r] += term;
    out.abs_sum[r] += term.abs();
    out.terms[r] += 1;
}

/// Reference y = A·x for a MACKO matrix; zero-valued entries (padding) contribute nothing.
pub fn spmv_macko(a: &MackoMatrix, x: &[f16]) -> Result<Reference> {
    spmv_stored_entries(a.rows(), a.cols(), x, |r| a.row_entries(r))
}

/// Reference y = A·x over the stored (column, value) entries of each row, as `entries(r)` gives
/// them; zero-valued entries contribute nothing (the sparse formats' semantics).
fn spmv_stored_entries<I: Iterator<Item = (usize, f16)>>(
    rows: usize,
    cols: usize,
    x: &[f16],
    entries: impl Fn(usize) -> I,
) -> Result<Reference> {
    check_x(cols, x)?;
    let mut out = Reference::with_rows(rows);
    for r in 0..rows {
        for (c, v) in entries(r).filter(|(_, v)| !is_zero(*v)) {
            accumulate(&mut out, r, v, x[c]);
        }
    }
    Ok(out)
}

/// Reference y = A·x for a CSR matrix; zero-valued entries contribute nothing.
pub fn spmv_csr(a: &CsrMatrix, x: &[f16]) -> Result<Reference> {
    check_x(a.cols(), x)?;
    let mut out = Reference::with_rows(a.rows());
    for r in 0..a.rows() {
        for i in a.row_range(r) {
            let v = a.values()[i];
            if !is_zero(v) {
                accumulate(&mut out, r, v, x[a.col_idx()[i] as usize]);
            }
        }
    }
    Ok(out)
}

/// Reference y = A·x for a homogeneous CSR matrix: CSR's with every value the matrix's weight
/// (a zero weight makes every entry a stored zero, which contributes nothing).
pub fn spmv_csr_homogeneous(a: &HomogeneousCsrMatrix, x: &[f16]) -> Result<Reference> {
    check_x(a.cols(), x)?;
    let mut out = Reference::with_rows(a.rows());
    if a.is_zero_weight() {
        return Ok(out);
    }
    for r in 0..a.rows() {
        for c in a.row_columns(r) {
            accumulate(&mut out, r, a.weight(), x[c]);
        }
    }
    Ok(out)
}

/// Reference y = A·x for a dense matrix, with IEEE semantics (0·∞ = NaN) like any dense GEMV.
pub fn spmv_dense(a: &DenseMatrix, x: &[f16]) -> Result<Reference> {
    check_x(a.cols(), x)?;
    let mut out = Reference::with_rows(a.rows());
    for r in 0..a.rows() {
        for (c, &v) in a.row(r).iter().enumerate() {
            accumulate(&mut out, r, v, x[c]);
        }
    }
    Ok(out)
}

/// Reference y = A·x for a 2:4 matrix; zero values (including the fill of groups with fewer
/// than two non-zeros and the padding past the last column) contribute nothing, as in MACKO.
pub fn spmv_sparse24(a: &Sparse24Matrix, x: &[f16]) -> Result<Reference> {
    spmv_stored_entries(a.rows(), a.cols(), x, |r| a.row_entries(r))
}

/// Adds one term of a quantized matrix, whose value `scale · q` is exact in f64. It counts as
/// two terms for the tolerance: a backend may round once more per term (`scale · q · x` in f32
/// is no longer exact: 8 + 11 + 11 significant bits), or once per scale group (codes times x
/// summed, then scaled), which the doubled count covers.
#[inline]
fn accumulate_quant(out: &mut Reference, r: usize, a: f64, x: f16) {
    let term = a * x.to_f64();
    out.y[r] += term;
    out.abs_sum[r] += term.abs();
    out.terms[r] += U_TERMS_QUANT;
}

/// What one term of a quantized matrix counts for in the tolerance (see `accumulate_quant`).
const U_TERMS_QUANT: usize = 2;

/// Reference y = A·x for a MACKO matrix with quantized values, each value `scale · q` exact;
/// zero values (padding, and codes or scales of 0) contribute nothing, as in MACKO-16-4.
pub fn spmv_macko_quant(a: &QuantMackoMatrix, x: &[f16]) -> Result<Reference> {
    check_x(a.cols(), x)?;
    let mut out = Reference::with_rows(a.rows());
    for r in 0..a.rows() {
        for (c, v) in a.row_entries(r).filter(|(_, v)| *v != 0.0) {
            accumulate_quant(&mut out, r, v, x[c]);
        }
    }
    Ok(out)
}

/// Reference y = A·x for a dense matrix with quantized values, IEEE like [`spmv_dense`].
pub fn spmv_dense_quant(a: &QuantDenseMatrix, x: &[f16]) -> Result<Reference> {
    check_x(a.cols(), x)?;
    let mut out = Reference::with_rows(a.rows());
    for r in 0..a.rows() {
        for (c, &xc) in x.iter().enumerate() {
            accumulate_quant(&mut out, r, a.value(r, c), xc);
        }
    }
    Ok(out)
}

/// Reference y = A·x for a matrix in any format, with each format's semantics (see
/// [`spmv_macko`], [`spmv_csr`], [`spmv_csr_homogeneous`], [`spmv_dense`], [`spmv_sparse24`]).
pub fn spmv(a: crate::MatrixRef<'_>, x: &[f16]) -> Result<Reference> {
    match a {
        crate::MatrixRef::Macko(m) => spmv_macko(m, x),
        crate::MatrixRef::Csr(m) => spmv_csr(m, x),
        crate::MatrixRef::Dense(m) => spmv_dense(m, x),
        crate::MatrixRef::MackoQuant(m) => spmv_macko_quant(m, x),
        crate::MatrixRef::DenseQuant(m) => spmv_dense_quant(m, x),
        crate::MatrixRef::Sparse24(m) => spmv_sparse24(m, x),
        crate::MatrixRef::HomogeneousCsr(m) => spmv_csr_homogeneous(m, x),
    }
}

/// Reference Y = A·X for `batch` vectors at once: `x` holds the vectors one after another
/// (row-major `[batch][cols]`, the layout of a batch of tokens), and the result's rows are
/// `[batch][rows]` in the same way (row `b · rows + r` is row `r` of vector `b`). Each vector's
/// product is exactly [`spmv`]'s.
pub fn spmm(a: crate::MatrixRef<'_>, x: &[f16], batch: usize) -> Result<Reference> {
    let cols = a.cols();
    match cols.checked_mul(batch) {
        Some(n) if batch > 0 && n == x.len() => {}
        _ => {
            return Err(FormatError::VectorLength {
                what: "x must hold batch × cols elements, batch ≥ 1 (row-major [batch][cols])",
                expected: cols.saturating_mul(batch.max(1)),
                found: x.len(),
            })
        }
    }
    let mut out = Reference::with_rows(0);
    for b in 0..batch {
        let r = spmv(a, &x[b * cols..(b + 1) * cols])?;
        out.y.extend(r.y);
        out.abs_sum.extend(r.abs_sum);
        out.terms.extend(r.terms);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Products with a sparse input (docs/FORMAT.md, "Sparse vectors"): y = A·x with x a
// `SparseVector`, and the transposed product y = Aᵀ·x, x dense or sparse, for every format.
//
// An element of x that is ±0, stored or not, contributes nothing, even where the matrix holds
// NaN or ±∞ there: x's zeros are a sparse operand's zeros, as a sparse matrix's stored zeros
// are, and that is what lets a product skip them. The matrix keeps its format's semantics: in
// the sparse formats a zero value contributes nothing even where x holds NaN or ±∞; dense
// (binary16 or quantized) is IEEE, a stored zero times ∞ is NaN. Aᵀ·x has one output per
// column of A: y[c] = Σᵢ A[i, c]·x[i] over the rows i where x is non-zero, so a product need
// read only those rows.
// ---------------------------------------------------------------------------------------------

/// Calls `f(column, value, terms)` for every term row `r` of `a` contributes under its format's
/// semantics: the sparse formats skip zero values, dense ones give every column. `terms` is
/// what the term counts for the tolerance: 1, or 2 for a quantized value (`scale · q · x` may
/// round once more in f32, as in [`spmv_macko_quant`]).
fn row_terms(a: MatrixRef<'_>, r: usize, mut f: impl FnMut(usize, f64, usize)) {
    let mut sparse = |c: usize, v: f16| {
        if !is_zero(v) {
            f(c, v.to_f64(), 1);
        }
    };
    match a {
        MatrixRef::Macko(m) => m.row_entries(r).for_each(|(c, v)| sparse(c, v)),
        MatrixRef::Csr(m) => m
            .row_range(r)
            .for_each(|i| sparse(m.col_idx()[i] as usize, m.values()[i])),
        MatrixRef::HomogeneousCsr(m) => m.row_columns(r).for_each(|c| sparse(c, m.weight())),
        MatrixRef::Sparse24(m) => m.row_entries(r).for_each(|(c, v)| sparse(c, v)),
        MatrixRef::Dense(m) => m
            .row(r)
            .iter()
            .enumerate()
            .for_each(|(c, v)| f(c, v.to_f64(), 1)),
        MatrixRef::MackoQuant(m) => m
            .row_entries(r)
            .filter(|(_, v)| *v != 0.0)
            .for_each(|(c, v)| f(c, v, U_TERMS_QUANT)),
        MatrixRef::DenseQuant(m) => {
            (0..m.cols()).for_each(|c| f(c, m.value(r, c), U_TERMS_QUANT));
        }
    }
}

/// Adds the term `a · x` to output `o`, counted as `terms` terms.
#[inline]
fn add(out: &mut Reference, o: usize, a: f64, x: f64, terms: usize) {
    let term = a * x;
    out.y[o] += term;
    out.abs_sum[o] += term.abs();
    out.terms[o] += terms;
}

fn check_len(what: &'static str, expected: usize, found: usize) -> Result<()> {
    if expected != found {
        return Err(FormatError::VectorLength {
            what,
            expected,
            found,
        });
    }
    Ok(())
}

/// Reference y = A·x with a sparse x (`x.len()` = columns): only x's non-zero elements
/// contribute, so a column of A where x is zero adds nothing, even a NaN or ±∞ of the matrix.
/// Otherwise the format's semantics, as in [`spmv`].
pub fn spmv_sparse_x(a: MatrixRef<'_>, x: &SparseVector) -> Result<Reference> {
    check_len(
        "a sparse x must have one element per column",
        a.cols(),
        x.len(),
    )?;
    let mut dense: Vec<Option<f64>> = vec![None; a.cols()];
    for (i, v) in x.entries().filter(|(_, v)| !is_zero(*v)) {
        dense[i] = Some(v.to_f64());
    }
    let mut out = Reference::with_rows(a.rows());
    for r in 0..a.rows() {
        row_terms(a, r, |c, v, terms| {
            if let Some(xc) = dense[c] {
                add(&mut out, r, v, xc, terms);
            }
        });
    }
    Ok(out)
}

/// Reference y = Aᵀ·x for a dense x of one element per row of A; y has one element per
/// column. Rows where x is ±0 contribute nothing (they need not be read); in the others the
/// format's semantics hold (a sparse format's zero values add nothing even where x is NaN or
/// ±∞, dense is IEEE).
pub fn spmv_transposed(a: MatrixRef<'_>, x: &[f16]) -> Result<Reference> {
    check_len(
        "x of a transposed product must have one element per row",
        a.rows(),
        x.len(),
    )?;
    Ok(transposed(a, x.iter().copied().enumerate()))
}

/// Reference y = Aᵀ·x for a sparse x (`x.len()` = rows of A): [`spmv_transposed`] of its dense
/// form, each stored non-zero selecting one row of A.
pub fn spmv_transposed_sparse_x(a: MatrixRef<'_>, x: &SparseVector) -> Result<Reference> {
    check_len(
        "a sparse x of a transposed product must have one element per row",
        a.rows(),
        x.len(),
    )?;
    Ok(transposed(a, x.entries()))
}

/// Σ over the non-zero `(row, value)` pairs of `x` of value · A\[row, :\].
fn transposed(a: MatrixRef<'_>, x: impl Iterator<Item = (usize, f16)>) -> Reference {
    let mut out = Reference::with_rows(a.cols());
    for (i, xi) in x.filter(|(_, v)| !is_zero(*v)) {
        let xi = xi.to_f64();
        row_terms(a, i, |c, v, terms| add(&mut out, c, v, xi, terms));
    }
    out
}

//! Storage accounting from the formulas of docs/FORMAT.md ("Storage", "Quantized values"): what a
//! density costs in MACKO-16-4, in MACKO with quantized values and in CSR, relative to dense
//! binary16; and what a 2:4 matrix costs, which depends on its shape only.

use crate::quant::{QuantBits, ScaleLayout};
use crate::sparse24::{groups_per_row, KEPT24};

/// Effective density (bytes over dense binary16 bytes) of MACKO-16-4 at density `d` when no
/// padding entry is needed: 1.25·d (row pointers neglected).
pub fn macko_best(d: f64) -> f64 {
    1.25 * d
}

/// Effective density at worst: every run of 16 zeros needs a padding entry,
/// 1.25·(d + (1 − d)/16).
pub fn macko_worst(d: f64) -> f64 {
    1.25 * (d + (1.0 - d) / 16.0)
}

/// Expected effective density for uniformly random sparsity: 1.25·d·(1 + z/(1 − z)),
/// z = (1 − d)¹⁶ (the chance that a gap needs a padding entry, compounded).
pub fn macko_expected(d: f64) -> f64 {
    let z = (1.0 - d).powi(16);
    if z >= 1.0 {
        return 0.0;
    }
    1.25 * d * (1.0 + z / (1.0 - z))
}

/// Effective density of CSR with 32-bit indices: 3·d.
pub fn csr(d: f64) -> f64 {
    3.0 * d
}

/// Bytes per stored value of a quantized layout: 1 (int8) or 0.5 (int4).
fn value_bytes(bits: QuantBits) -> f64 {
    f64::from(bits.bits()) / 8.0
}

/// Expected effective density of MACKO with quantized values at density `d` for uniformly
/// random sparsity: the entries of [`macko_expected`], each `value + 0.5` bytes (1.5 for int8,
/// 1 for int4) instead of 2.5, plus 2 bytes per scale group of G entries. Per-row scales and
/// row pointers are neglected, as in [`macko_expected`] (they cost 2 and 4 bytes per row).
pub fn macko_quant_expected(d: f64, bits: QuantBits, scales: ScaleLayout) -> f64 {
    let per_entry = value_bytes(bits) + 0.5 + scale_bytes_per_value(scales);
    macko_expected(d) * per_entry / 2.5
}

/// Effective density of a dense matrix with quantized values: `value / 2` plus the scales
/// (per-row scales neglected).
pub fn dense_quant(bits: QuantBits, scales: ScaleLayout) -> f64 {
    (value_bytes(bits) + scale_bytes_per_value(scales)) / 2.0
}

/// Bytes of scales per stored value: 2 / G per group of G, 0 per row (neglected).
fn scale_bytes_per_value(scales: ScaleLayout) -> f64 {
    match scales {
        ScaleLayout::PerRow => 0.0,
        ScaleLayout::PerGroup(g) => 2.0 / f64::from(g.max(1)),
    }
}

/// Effective density of 2:4 structured sparsity when `cols` is a multiple of 4 (and the number
/// of groups even): two binary16 values and a 4-bit nibble per group of four, 4.5 / 8 = 0.5625,
/// whatever the density of the source (every group stores two values, zeros included).
pub const SPARSE24: f64 = 0.5625;

/// Bytes of a `rows × cols` 2:4 matrix (what
/// [`Sparse24Matrix::storage_bytes`](crate::Sparse24Matrix::storage_bytes) gives for any such
/// matrix): 4 per group of four columns (a row's last group padded), plus a byte per two groups.
/// `None` if the count overflows u64, so a caller sizing a buffer from a header cannot be fooled
/// by a wrapped product.
pub fn sparse24_bytes(rows: usize, cols: usize) -> Option<u64> {
    let groups = u64::try_from(rows)
        .ok()?
        .checked_mul(u64::try_from(groups_per_row(cols)).ok()?)?;
    groups
        .checked_mul(2 * KEPT24 as u64)?
        .checked_add(groups.div_ceil(2))
}

//! Storage accounting from the formulas of docs/FORMAT.md ("Storage"): what a density costs in
//! MACKO-16-4 and in CSR, relative to dense binary16.

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

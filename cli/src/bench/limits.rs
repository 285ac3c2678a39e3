//! What `bench`'s arguments may ask for, checked before any matrix is built: a shape must be one
//! the format can hold and whose copies fit in a machine's memory, and a measurement needs at
//! least one timed product.

use thiserror::Error;

/// The most elements a `--shapes` case may have: 2^31, 3.6× the largest shape of the MACKO
/// paper (49152×12288). A case holds the matrix as dense f16, MACKO and CSR (about 10 bytes an
/// element at density 1, with the f64 reference's inputs), so this already asks for some 20 GiB
/// of host memory; beyond it a typo (`1x1099511627776`) would abort on allocation instead.
pub const MAX_BENCH_ELEMENTS: u64 = 1 << 31;

/// An argument of `bench` that cannot be measured, naming the value and the rule.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BenchLimit {
    /// `--iters 0`: no product would be timed, and the median of none is NaN.
    #[error(
        "--iters 0: each measurement is the median of the timed products, so at least one is \
         needed"
    )]
    NoIterations,
    /// A dimension of 0, or one past u32::MAX (the format's 32-bit offsets and indices).
    #[error(
        "--shapes {rows}x{cols}: {dim} must be from 1 to {max} (a MACKO matrix's offsets and \
         indices are 32-bit)",
        max = u32::MAX
    )]
    Dimension {
        /// Rows asked for.
        rows: usize,
        /// Columns asked for.
        cols: usize,
        /// `rows` or `columns`.
        dim: &'static str,
    },
    /// More elements than [`MAX_BENCH_ELEMENTS`].
    #[error(
        "--shapes {rows}x{cols}: {elements} elements would need about {gib} GiB of host memory \
         for the case's dense, MACKO and CSR copies; at most {MAX_BENCH_ELEMENTS} elements",
        gib = elements.saturating_mul(10) >> 30
    )]
    TooManyElements {
        /// Rows asked for.
        rows: usize,
        /// Columns asked for.
        cols: usize,
        /// rows × cols (saturated).
        elements: u64,
    },
}

/// Checks `--iters`.
pub fn check_iters(iters: usize) -> Result<(), BenchLimit> {
    if iters == 0 {
        Err(BenchLimit::NoIterations)
    } else {
        Ok(())
    }
}

/// Checks one `--shapes` case, its product computed without overflow (saturating).
pub fn check_shape(rows: usize, cols: usize) -> Result<(), BenchLimit> {
    for (dim, value) in [("rows", rows), ("columns", cols)] {
        if value == 0 || u32::try_from(value).is_err() {
            return Err(BenchLimit::Dimension { rows, cols, dim });
        }
    }
    let elements = (rows as u64).saturating_mul(cols as u64);
    if elements > MAX_BENCH_ELEMENTS {
        return Err(BenchLimit::TooManyElements {
            rows,
            cols,
            elements,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_past_the_format_or_memory_are_refused() {
        assert!(check_shape(49152, 12288).is_ok());
        assert!(check_shape(1, 1).is_ok());
        for (r, c, says) in [
            (0, 5, "rows must be from 1"),
            (1, 1 << 40, "columns must be from 1 to 4294967295"),
            (1 << 20, 1 << 20, "1099511627776 elements"),
            (u32::MAX as usize, u32::MAX as usize, "at most 2147483648"),
        ] {
            let e = check_shape(r, c).expect_err("refused").to_string();
            assert!(e.contains(says), "{r}x{c}: {e}");
        }
        assert!(check_iters(0).is_err());
        assert!(check_iters(1).is_ok());
    }
}

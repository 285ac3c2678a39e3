//! The row-aligned layout of a MACKO matrix: the device layout GPU backends upload by default
//! (macko's CUDA and wgpu backends; kernels/README.md and shaders/README.md, "Rows aligned to
//! groups").
//!
//! In the interchange format (docs/FORMAT.md) a row may start anywhere inside a group of 8 entries,
//! so a GPU kernel that reads whole groups must mask the entries of the neighbouring rows in a
//! row's first and last group: at low density, where a row is one or two steps of a subgroup,
//! that masking is a large part of the row's instructions. Here every row starts at a multiple
//! of [`GROUP`] and its last group is completed with padding entries (value +0.0, gap code 0):
//! a kernel then never meets another row's entries inside a group.
//!
//! What the padding changes, and why it is harmless:
//! - a padding entry follows the row's last entry, one column further each (gap 0), so it may
//!   name a column up to 7 past `cols - 1`: the kernels that read this layout keep such gathers
//!   inside their staged x (its zero slack) and their value is zero, which adds nothing where x
//!   is finite and is selected away where it is not (the kernels' guard for explicit zeros);
//! - a row grows by at most 7 entries (2.5 bytes each), so the matrix by at most 17.5 bytes per
//!   row: 0.1–0.7 % of the bytes of the benchmark's shapes at d = 0.1, less above;
//! - one more group of zeros follows the last row ([`RowAligned::zero_group`]), for the kernels
//!   to read in place of groups past a row's end (a load of it needs no mask either).
//!
//! This layout is not a valid [`MackoMatrix`] of the same shape (its padding may name columns
//! past the last one); it exists only to be uploaded.
//!
//! ```
//! use half::f16;
//! use macko_format::{aligned, MackoMatrix};
//!
//! // Rows of 3 and 9 entries: aligned, they start at entries 0 and 8 and end at 24.
//! let mut dense = vec![f16::ZERO; 2 * 16];
//! for c in [0, 5, 9] {
//!     dense[c] = f16::ONE;
//! }
//! for c in 0..9 {
//!     dense[16 + c] = f16::ONE;
//! }
//! let m = MackoMatrix::from_dense_f16(2, 16, &dense)?;
//! let a = aligned::align_rows(&m, 0..2)?;
//! assert_eq!(a.row_ptr, vec![0, 8, 24]);
//! assert_eq!(a.zero_group(), 3);
//! assert_eq!(a.values.len(), 32); // 24 entries and the group of zeros
//! # Ok::<(), macko_format::FormatError>(())
//! ```

use std::ops::Range;

use half::f16;

use crate::error::{FormatError, Result};
use crate::macko::{MackoMatrix, GROUP};

/// Rows of a MACKO matrix with each row starting at a multiple of [`GROUP`] entries and padded to
/// whole groups, rebased so that the first row starts at 0, and one group of zeros after the
/// last row.
#[derive(Debug, Clone, PartialEq)]
pub struct RowAligned {
    /// `rows.len() + 1` entry offsets, each a multiple of [`GROUP`], starting at 0.
    pub row_ptr: Vec<u32>,
    /// `row_ptr[last] + GROUP` values: the rows' entries, +0.0 where padded.
    pub values: Vec<f16>,
    /// The gap codes of the same entries, two per byte (low nibble first), 0 where padded.
    pub codes: Vec<u8>,
}

impl RowAligned {
    /// The group of zeros after the last row (its index in groups of [`GROUP`] entries).
    pub fn zero_group(&self) -> u32 {
        self.row_ptr.last().copied().unwrap_or(0) / GROUP as u32
    }
}

/// Checks that `rows` lies within the `m`'s rows.
fn check_rows(m: &MackoMatrix, rows: &Range<usize>) -> Result<()> {
    if rows.start > rows.end || rows.end > m.rows() {
        return Err(FormatError::RowRange {
            start: rows.start,
            end: rows.end,
            rows: m.rows(),
        });
    }
    Ok(())
}

/// The row pointers of rows `rows` of `m` aligned (each row's entries rounded up to whole
/// groups), from 0. Errors: [`FormatError::RowRange`] where `rows` is not within the matrix,
/// [`FormatError::AlignedTooLarge`] where the rows, with the zero group after them, would not fit
/// 32-bit offsets (a caller may then keep the matrix's own layout).
pub fn aligned_row_ptr(m: &MackoMatrix, rows: Range<usize>) -> Result<Vec<u32>> {
    check_rows(m, &rows)?;
    let too_large = FormatError::AlignedTooLarge {
        start: rows.start,
        end: rows.end,
    };
    let row_ptr = m.row_ptr();
    let mut out = Vec::with_capacity(rows.len() + 1);
    let mut at = 0u32;
    out.push(0);
    for r in rows {
        at = next_row_start(at, row_ptr[r + 1] - row_ptr[r]).ok_or_else(|| too_large.clone())?;
        out.push(at);
    }
    Ok(out)
}

/// Where the row after one starting at `at` with `len` entries starts once rows are aligned;
/// `None` where that, with the zero group after it, passes `u32::MAX`.
pub fn next_row_start(at: u32, len: u32) -> Option<u32> {
    let next = u64::from(at) + u64::from(len).div_ceil(GROUP as u64) * GROUP as u64;
    if next + GROUP as u64 > u64::from(u32::MAX) {
        return None;
    }
    Some(next as u32)
}

/// Rows `rows` of `m` in the row-aligned layout. Errors as [`aligned_row_ptr`].
pub fn align_rows(m: &MackoMatrix, rows: Range<usize>) -> Result<RowAligned> {
    let row_ptr = aligned_row_ptr(m, rows.clone())?;
    let stored = row_ptr.last().copied().unwrap_or(0) as usize + GROUP;
    let mut values = vec![f16::ZERO; stored];
    let mut codes = vec![0u8; stored / 2];
    let (src_values, src_codes, src_ptr) = (m.values(), m.codes(), m.row_ptr());
    for (k, r) in rows.enumerate() {
        let (s, e) = (src_ptr[r] as usize, src_ptr[r + 1] as usize);
        let d = row_ptr[k] as usize;
        values[d..d + (e - s)].copy_from_slice(&src_values[s..e]);
        copy_codes(src_codes, s, e - s, &mut codes[d / 2..])?;
    }
    Ok(RowAligned {
        row_ptr,
        values,
        codes,
    })
}

/// Writes the `n` gap codes of entries `s..s + n` of `src` (two per byte, low nibble first) to
/// the start of `dst`, whose first entry is even (byte-aligned); the high nibble of the last
/// byte stays as it is where `n` is odd. [`FormatError::CodeRange`] where `src` does not hold
/// those entries or `dst` has no room for them.
pub fn copy_codes(src: &[u8], s: usize, n: usize, dst: &mut [u8]) -> Result<()> {
    let fits = s
        .checked_add(n)
        .is_some_and(|end| end <= 2 * src.len() && n <= 2 * dst.len());
    if !fits {
        return Err(FormatError::CodeRange {
            start: s,
            count: n,
            source_entries: 2 * src.len(),
            room: 2 * dst.len(),
        });
    }
    if s % 2 == 0 {
        dst[..n / 2].copy_from_slice(&src[s / 2..s / 2 + n / 2]);
    } else {
        // Entry s is the high nibble of byte s / 2: each output byte joins two source bytes
        // (byte s / 2 + j + 1 holds entry s + 2j + 1 < s + n, so it lies inside `src`).
        for (j, out) in dst[..n / 2].iter_mut().enumerate() {
            let b = s / 2 + j;
            *out = (src[b] >> 4) | (src[b + 1] << 4);
        }
    }
    if n % 2 == 1 {
        let i = s + n - 1;
        dst[n / 2] = (src[i / 2] >> ((i & 1) * 4)) & 0x0f;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::macko::code_at;
    use crate::DenseMatrix;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};

    /// A random matrix of about `density` nonzeros (rows of random lengths, some empty at low
    /// density), through the format's own encoder.
    fn matrix(rows: usize, cols: usize, density: f64, seed: u64) -> MackoMatrix {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let values = (0..rows * cols)
            .map(|_| {
                if rng.random_bool(density) {
                    f16::from_f32(rng.random_range(0.5f32..2.0))
                } else {
                    f16::ZERO
                }
            })
            .collect();
        let dense = DenseMatrix::new(rows, cols, values).expect("a valid shape");
        MackoMatrix::from_dense(&dense).expect("encodes")
    }

    /// The (value bits, code) of row r's entries in the original layout.
    fn original(m: &MackoMatrix, r: usize) -> Vec<(u16, u8)> {
        m.row_range(r)
            .map(|i| (m.values()[i].to_bits(), code_at(m.codes(), i)))
            .collect()
    }

    proptest! {
        #[test]
        fn aligned_rows_hold_each_row_then_zero_padding(
            rows in 1usize..40,
            cols in 1usize..300,
            density in 0.0f64..1.0,
            seed in any::<u64>(),
            first in 0usize..40,
        ) {
            let m = matrix(rows, cols, density, seed);
            let start = first.min(rows);
            let a = align_rows(&m, start..rows).expect("small matrices fit");
            prop_assert_eq!(a.row_ptr.len(), rows - start + 1);
            prop_assert_eq!(a.row_ptr[0], 0);
            prop_assert_eq!(a.values.len(), a.row_ptr[rows - start] as usize + GROUP);
            prop_assert_eq!(a.codes.len() * 2, a.values.len());
            for (k, r) in (start..rows).enumerate() {
                let (d, d1) = (a.row_ptr[k] as usize, a.row_ptr[k + 1] as usize);
                prop_assert_eq!(d % GROUP, 0);
                let want = original(&m, r);
                // Whole groups, and no more of them than the row needs.
                prop_assert_eq!(d1 - d, want.len().div_ceil(GROUP) * GROUP);
                for (j, i) in (d..d1).enumerate() {
                    let got = (a.values[i].to_bits(), code_at(&a.codes, i));
                    prop_assert_eq!(got, want.get(j).copied().unwrap_or((0, 0)));
                }
            }
            let z = a.zero_group() as usize * GROUP;
            prop_assert_eq!(z, a.row_ptr[rows - start] as usize);
            for i in z..z + GROUP {
                prop_assert_eq!((a.values[i].to_bits(), code_at(&a.codes, i)), (0, 0));
            }
        }

        #[test]
        fn copied_codes_are_the_source_entries(
            src in proptest::collection::vec(any::<u8>(), 0..40),
            s in 0usize..90,
            n in 0usize..90,
        ) {
            let mut dst = vec![0u8; 45];
            let fits = s + n <= 2 * src.len() && n <= 2 * dst.len();
            prop_assert_eq!(copy_codes(&src, s, n, &mut dst).is_ok(), fits);
            if fits {
                for k in 0..n {
                    prop_assert_eq!(code_at(&dst, k), code_at(&src, s + k));
                }
            }
        }
    }

    #[test]
    fn rows_starting_at_odd_entries_keep_their_codes() {
        // Row lengths 3, 5, 1, 0, 9, 7: starts at 0, 3, 8, 9, 9, 18 (odd and even entries).
        let cols = 64;
        let mut dense = vec![f16::ZERO; 6 * cols];
        for (r, &n) in [3usize, 5, 1, 0, 9, 7].iter().enumerate() {
            for j in 0..n {
                dense[r * cols + 3 * j + 1] = f16::from_f32(1.0 + (r * 10 + j) as f32);
            }
        }
        let m = MackoMatrix::from_dense_f16(6, cols, &dense).expect("encodes");
        let a = align_rows(&m, 0..6).expect("fits");
        assert_eq!(a.row_ptr, vec![0, 8, 16, 24, 24, 40, 48]);
        for r in 0..6 {
            let got: Vec<(u16, u8)> = (a.row_ptr[r] as usize..a.row_ptr[r + 1] as usize)
                .map(|i| (a.values[i].to_bits(), code_at(&a.codes, i)))
                .collect();
            let mut want = original(&m, r);
            want.resize(got.len(), (0, 0));
            assert_eq!(got, want, "row {r}");
        }
    }

    #[test]
    // 3..2 is reversed on purpose: a range that ends before it starts is one of the errors.
    #[allow(clippy::reversed_empty_ranges)]
    fn rows_outside_the_matrix_are_an_error() {
        let m = matrix(4, 16, 0.5, 7);
        for rows in [0..5, 5..5, 3..2] {
            assert_eq!(
                align_rows(&m, rows.clone()),
                Err(FormatError::RowRange {
                    start: rows.start,
                    end: rows.end,
                    rows: 4
                })
            );
        }
        assert!(align_rows(&m, 4..4).is_ok(), "no rows, at the end");
    }

    #[test]
    fn offsets_past_32_bits_keep_the_original_layout() {
        let top = u32::MAX - 20;
        // 5 entries take one group: the next row at top + 8, the zero group below u32::MAX.
        assert_eq!(next_row_start(top, 5), Some(top + 8));
        // 13 take two: the zero group would end past u32::MAX.
        assert_eq!(next_row_start(top, 13), None);
        assert_eq!(next_row_start(0, 0), Some(0));
        assert_eq!(next_row_start(8, 9), Some(24));
    }
}

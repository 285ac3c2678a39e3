//! Flat ranges for the CUDA MACKO kernel (`macko_flat_*` in kernels/macko.cu): the stored
//! entries cut into one contiguous range per resident warp, whatever the rows look like.
//!
//! Why: a warp per row (or per segment of a row) leaves the warps' work quantised by the rows,
//! and short rows pay per-row costs (bounds, a dependent first load, a reduction) every few
//! hundred entries. A warp that streams one range of entries moves exactly its share of the
//! bytes, keeps its next batch in flight all the way through, and pays only where a row ends.
//!
//! A cut falls on a row's start where one lies within `snap` × the mean range length of the even
//! cut (no row is then shared by two ranges), else on a multiple of 8 entries inside a row. A
//! range whose start cuts a row needs that row's column at its first entry (the gap codes only
//! give columns relative to the previous entry): `col0`, summed here from the codes. The kernel
//! writes rows wholly inside a range to y; the part of a row cut by a range's start to
//! `partials[2w]` (the head), by its end to `partials[2w + 1]` (the tail; 0 when the same row is
//! also the head); a second launch (`macko_combine_rows`) adds each cut row's partials in range
//! order, so y does not depend on which warp finished first.
//!
//! The kernel handles at most one row start among a lane's 8 entries, and at most 29 in a chunk
//! of 256: it is used only when every row holds at least [`MIN_ROW_ENTRIES`] entries.
//!
//! Everything here runs on the host, once per upload; it makes no CUDA call.

use rayon::prelude::*;

use crate::backend::BackendKind;
use crate::error::{Error, Result};

/// Fewest entries per row the flat kernel takes (see the module documentation).
pub(crate) const MIN_ROW_ENTRIES: u32 = 9;

/// The ranges of a MACKO matrix, as the kernels read them (arrays of u32).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FlatTable {
    /// `ranges + 1` descriptors of 4 u32: the range's first entry, the row holding it, that
    /// row's column after its entries before the range (0 when the row starts there), and that
    /// row's first entry. The last one holds (stored entries N, 0, 0, 0) and closes the last range.
    pub desc: Vec<u32>,
    /// The rows cut by a range boundary, 4 u32 each: the row, and the partial sums that hold its
    /// parts, `first .. end` (indices into the kernel's `2 × ranges` partials), then 0.
    pub cut: Vec<u32>,
}

impl FlatTable {
    /// Number of ranges.
    pub fn ranges(&self) -> usize {
        self.desc.len() / 4 - 1
    }
    /// Number of rows cut by a range boundary.
    pub fn cut_rows(&self) -> usize {
        self.cut.len() / 4
    }
}

/// An argument or array that `flat_ranges` refuses, as the CUDA backend's error.
fn invalid(message: String) -> Error {
    Error::Backend {
        backend: BackendKind::Cuda,
        message: format!("cutting MACKO entries into flat ranges: {message}"),
    }
}

/// Whether every row of `row_ptr` holds at least [`MIN_ROW_ENTRIES`] entries (and there is at
/// least one row).
pub(crate) fn rows_long_enough(row_ptr: &[u32]) -> bool {
    row_ptr.len() >= 2
        && row_ptr
            .windows(2)
            .all(|w| w[1].checked_sub(w[0]).is_some_and(|n| n >= MIN_ROW_ENTRIES))
}

/// The row holding entry `e` (< N): the last row starting at or before it.
fn row_of(row_ptr: &[u32], e: u32) -> usize {
    row_ptr[..row_ptr.len() - 1].partition_point(|&s| s <= e) - 1
}

/// Gap code of stored entry `e` (two per byte, the even entry in the low nibble).
fn code(codes: &[u8], e: usize) -> u32 {
    u32::from(codes[e / 2] >> (4 * (e & 1))) & 0xf
}

/// Cuts the entries of a MACKO matrix (`row_ptr`, `codes`) into at most `ranges` ranges of about
/// equal length (see the module documentation for `snap`). Refuses rows of fewer than
/// [`MIN_ROW_ENTRIES`] entries, a matrix without entries, `ranges` = 0 and arrays that disagree.
pub(crate) fn flat_ranges(
    row_ptr: &[u32],
    codes: &[u8],
    ranges: usize,
    snap: f64,
) -> Result<FlatTable> {
    if !rows_long_enough(row_ptr) {
        return Err(invalid(format!(
            "every row must hold at least {MIN_ROW_ENTRIES} entries"
        )));
    }
    let n = row_ptr[row_ptr.len() - 1];
    if u64::from(n).div_ceil(2) > codes.len() as u64 {
        return Err(invalid(format!(
            "{n} entries need {} code bytes, the array has {}",
            u64::from(n).div_ceil(2),
            codes.len()
        )));
    }
    if ranges == 0 {
        return Err(invalid("at least one range is needed".to_string()));
    }
    // Ranges of at least 8 entries.
    let ranges = ranges.min((n / 8).max(1) as usize);
    let mean = f64::from(n) / ranges as f64;
    let mut starts: Vec<u32> = Vec::with_capacity(ranges);
    starts.push(0);
    for w in 1..ranges {
        let ideal = (((w as f64) * mean) as u32) / 8 * 8;
        let r = row_of(row_ptr, ideal);
        let (before, after) = (row_ptr[r], row_ptr[r + 1]);
        let nearest = if ideal - before <= after - ideal {
            before
        } else {
            after
        };
        let cut = if f64::from(nearest.abs_diff(ideal)) <= snap * mean {
            nearest
        } else {
            ideal
        };
        let prev = starts[starts.len() - 1];
        if cut > prev && cut < n {
            starts.push(cut);
        }
    }
    let desc: Vec<[u32; 4]> = starts
        .par_iter()
        .map(|&a| {
            let h = row_of(row_ptr, a);
            let head_start = row_ptr[h];
            let col0: u32 = (head_start as usize..a as usize)
                .map(|e| code(codes, e) + 1)
                .sum();
            [a, h as u32, col0, head_start]
        })
        .collect();
    // Rows cut by a range start, each once: from the range holding its first entry (its tail
    // partial) to the range holding its last (its head partial).
    let range_of = |e: u32| starts.partition_point(|&a| a <= e) - 1;
    let mut cut: Vec<u32> = Vec::new();
    let mut last_row = None;
    for d in &desc {
        let (a, h, head_start) = (d[0], d[1], d[3]);
        if head_start < a && last_row != Some(h) {
            last_row = Some(h);
            let hr = h as usize;
            let first = range_of(row_ptr[hr]);
            let last = range_of(row_ptr[hr + 1] - 1);
            cut.extend_from_slice(&[h, 2 * first as u32 + 1, 2 * last as u32 + 1, 0]);
        }
    }
    let mut flat: Vec<u32> = desc.into_iter().flatten().collect();
    flat.extend_from_slice(&[n, 0, 0, 0]);
    Ok(FlatTable { desc: flat, cut })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Rows of the given lengths; codes from a simple pattern.
    fn matrix(lengths: &[u32]) -> (Vec<u32>, Vec<u8>) {
        let mut row_ptr = vec![0u32];
        for &l in lengths {
            row_ptr.push(row_ptr[row_ptr.len() - 1] + l);
        }
        let n = row_ptr[row_ptr.len() - 1] as usize;
        let codes = (0..n.div_ceil(8) * 4)
            .map(|i| (i * 37 % 251) as u8)
            .collect();
        (row_ptr, codes)
    }

    /// Emulates what the kernel does with a table: each range's entries go to their rows (whole
    /// rows to y, cut parts to partials), then the combine; checks that every row gets exactly
    /// its own entries, once, and that each range's col0 is its head row's column there.
    fn check(row_ptr: &[u32], codes: &[u8], t: &FlatTable) {
        let rows = row_ptr.len() - 1;
        let ranges = t.ranges();
        let d = |w: usize| &t.desc[4 * w..4 * w + 4];
        assert_eq!(d(0)[0], 0);
        assert_eq!(d(ranges)[0], row_ptr[rows]);
        // Per row, the entries it collected (as counts) and where they were written.
        let mut y: Vec<Option<u64>> = vec![None; rows];
        let mut partials = vec![None::<u64>; 2 * ranges];
        for w in 0..ranges {
            let (a, b) = (d(w)[0], d(w + 1)[0]);
            assert!(a < b, "range {w} is empty");
            let (h, col0, hs) = (d(w)[1] as usize, d(w)[2], d(w)[3]);
            assert_eq!(hs, row_ptr[h]);
            assert!(row_ptr[h] <= a && a < row_ptr[h + 1]);
            let col: u32 = (hs..a).map(|e| code(codes, e as usize) + 1).sum();
            assert_eq!(col, col0);
            let head_cut = hs < a;
            let mut r = h;
            while r < rows && row_ptr[r] < b {
                let (s, e) = (row_ptr[r].max(a), row_ptr[r + 1].min(b));
                let part = u64::from(e - s);
                let ends_here = row_ptr[r + 1] <= b;
                if ends_here {
                    if head_cut && r == h {
                        assert!(partials[2 * w].replace(part).is_none());
                    } else {
                        assert!(y[r].replace(part).is_none(), "row {r} written twice");
                    }
                } else if head_cut && r == h {
                    assert!(partials[2 * w].replace(part).is_none());
                    assert!(partials[2 * w + 1].replace(0).is_none());
                } else {
                    assert!(partials[2 * w + 1].replace(part).is_none());
                }
                r += 1;
            }
        }
        for c in t.cut.chunks(4) {
            let (r, first, end) = (c[0] as usize, c[1] as usize, c[2] as usize);
            assert!(y[r].is_none(), "cut row {r} also written whole");
            let sum = (first..end)
                .map(|i| partials[i].unwrap_or_else(|| panic!("partial {i} of row {r} unwritten")))
                .sum();
            y[r] = Some(sum);
        }
        for r in 0..rows {
            assert_eq!(
                y[r],
                Some(u64::from(row_ptr[r + 1] - row_ptr[r])),
                "row {r}"
            );
        }
    }

    #[test]
    fn short_rows_are_refused() {
        let (rp, codes) = matrix(&[20, 8, 30]);
        assert!(flat_ranges(&rp, &codes, 4, 0.1).is_err());
        assert!(!rows_long_enough(&rp));
        assert!(!rows_long_enough(&[0]));
    }

    #[test]
    fn snapped_cuts_cut_no_row() {
        let (rp, codes) = matrix(&[100; 64]);
        let t = flat_ranges(&rp, &codes, 8, 0.5).expect("table");
        assert_eq!(t.ranges(), 8);
        assert_eq!(t.cut_rows(), 0);
        check(&rp, &codes, &t);
    }

    #[test]
    fn long_rows_are_cut_inside() {
        let (rp, codes) = matrix(&[5000, 9, 3000, 12000]);
        let t = flat_ranges(&rp, &codes, 16, 0.05).expect("table");
        assert!(t.cut_rows() >= 2);
        check(&rp, &codes, &t);
    }

    proptest! {
        #[test]
        fn every_row_is_summed_once(lengths in proptest::collection::vec(9u32..700, 1..60),
                                    ranges in 1usize..70, snap in 0.0f64..0.6) {
            let (rp, codes) = matrix(&lengths);
            let t = flat_ranges(&rp, &codes, ranges, snap).expect("table");
            prop_assert!(t.ranges() >= 1 && t.ranges() <= ranges);
            check(&rp, &codes, &t);
        }
    }
}

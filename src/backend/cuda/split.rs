//! Row splitting for the CUDA MACKO kernel: cuts every row into contiguous *items* (segments of
//! stored entries) so that parts of one long row go to different warps.
//!
//! Why: with one warp per row, a matrix whose rows are few or of very different lengths leaves
//! most resident warps idle while a few walk long rows. Items of at most `seg + 7` entries give the
//! kernel units of nearly equal work that it can deal out evenly over the resident warps,
//! whatever the rows look like. Each item produces one partial sum; the partial sums of a row are
//! combined in item order (`row_item[r] .. row_item[r + 1]`), so y does not depend on which warp
//! finished first: the result is deterministic from run to run.
//!
//! A warp starting in the middle of a row must know the column of its first entry without
//! walking the row from its start: `item_col` carries it (the gap codes only give columns
//! relative to the previous entry). Interior cuts fall on multiples of 8 entries, the kernel's
//! load granularity (8 values in 16 bytes, their 8 codes in 4 bytes), so no group of 8 entries is
//! shared by two items of one row except at the row's own start and end, where the kernel
//! already masks entries of the neighbouring rows.
//!
//! Everything here runs on the host, once per upload; it makes no CUDA call.

use rayon::prelude::*;

use crate::backend::BackendKind;
use crate::error::{Error, Result};

/// Items filled per rayon task: large enough to amortise the row look-up, small enough to
/// balance a matrix of a few long rows over every thread.
const ITEMS_PER_TASK: usize = 1024;

/// The items of a MACKO matrix's rows, as the kernel reads them (4 arrays of u32).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SplitTable {
    /// n_items + 1 entry indices; item i covers stored entries [item_ptr[i], item_ptr[i+1]).
    pub item_ptr: Vec<u32>,
    /// n_items: the column right after the row's previous entry, i.e. the sum of (gap + 1) over the
    /// row's stored entries before item_ptr[i] (0 for a row's first item).
    pub item_col: Vec<u32>,
    /// n_items: the row of item i.
    pub item_row: Vec<u32>,
    /// rows + 1: row r's items are row_item[r] .. row_item[r+1] (at least one per row, also for empty rows).
    pub row_item: Vec<u32>,
}

impl SplitTable {
    /// Number of items (at least the number of rows: every row has one, empty rows included).
    pub fn items(&self) -> usize {
        self.item_row.len()
    }
}

/// An argument or array that `split_rows` refuses, as the CUDA backend's error.
fn invalid(message: String) -> Error {
    Error::Backend {
        backend: BackendKind::Cuda,
        message: format!("splitting MACKO rows: {message}"),
    }
}

/// Where row `[s, e)` is cut: items start at `s`, then at `first + j·seg` for j = 1, 2, … while
/// that is below `e`, where `first = ⌈s/8⌉·8` (so `s + j·seg` rounded up to a multiple of 8,
/// since `seg` is one). Lengths are in entries, as u64 (no overflow near u32::MAX).
#[derive(Clone, Copy)]
struct RowCuts {
    start: u64,
    end: u64,
    first: u64,
    items: u64,
}

impl RowCuts {
    /// The cuts of row `r` of `row_ptr`: every `seg` entries.
    fn of_row(row_ptr: &[u32], r: usize, seg: u64) -> Self {
        Self::new(row_ptr[r], row_ptr[r + 1], seg)
    }

    fn new(start: u32, end: u32, seg: u64) -> Self {
        let (start, end) = (u64::from(start), u64::from(end));
        let first = start.div_ceil(8) * 8;
        // Cuts first + j·seg < end for j ≥ 1; each is > start because seg ≥ 8.
        let cuts = if end > first + seg {
            (end - first - 1) / seg
        } else {
            0
        };
        Self {
            start,
            end,
            first,
            items: 1 + cuts,
        }
    }

    /// Entry range of the row's item `j` (j < items).
    fn item(&self, j: u64, seg: u64) -> (u64, u64) {
        let start = if j == 0 {
            self.start
        } else {
            self.first + j * seg
        };
        let end = if j + 1 < self.items {
            self.first + (j + 1) * seg
        } else {
            self.end
        };
        (start, end)
    }
}

/// Cuts every row [s, e) of `row_ptr` at s + j*seg rounded UP to a multiple of 8 (global entry
/// index), j = 1, 2, ..., keeping only boundaries strictly inside (s, e): segments are non-empty
/// except the single item of an empty row, interior boundaries are multiples of 8 (so GPU groups
/// of 8 entries are never shared by two segments of one row except at the row's own start/end).
/// Every item of a cut row therefore holds at most `seg + 7` entries (the first item of a row
/// starting mid-group), and the items partition the entries `[0, N)`, N = `row_ptr[rows]`, in order
/// (the tail padding `N..P` belongs to no row and to no item).
///
/// `codes` are the packed gap codes of docs/FORMAT.md, "Arrays" (entry i's code in byte i/2, low
/// nibble for even i); `item_col` is computed from them, in parallel over items (rayon), so one
/// long row costs no more wall time than many short ones.
///
/// Errors (never panics, whatever the input): `seg` not a multiple of 8 or below 8; `row_ptr`
/// empty (a valid one has rows + 1 ≥ 1 entries, so an empty one is refused, not taken as zero
/// rows: rows = 0 is `row_ptr = [0]`); `row_ptr[0] != 0`; `row_ptr` decreasing; more entries
/// than `codes` holds codes; more than u32::MAX rows or items; a column that does not fit u32.
pub(crate) fn split_rows(row_ptr: &[u32], codes: &[u8], seg: u32) -> Result<SplitTable> {
    if seg < 8 || seg % 8 != 0 {
        return Err(invalid(format!(
            "the segment length must be a multiple of 8 and at least 8, not {seg}"
        )));
    }
    let seg = u64::from(seg);
    let (&first, &entries) = match (row_ptr.first(), row_ptr.last()) {
        (Some(first), Some(last)) => (first, last),
        _ => {
            return Err(invalid(
                "row_ptr is empty (it must hold rows + 1 entries)".into(),
            ))
        }
    };
    if first != 0 {
        return Err(invalid(format!("row_ptr[0] is {first}, not 0")));
    }
    let rows = row_ptr.len() - 1;
    if u32::try_from(rows).is_err() {
        return Err(invalid(format!("{rows} rows exceed u32::MAX")));
    }
    if let Some(r) = row_ptr.windows(2).position(|w| w[1] < w[0]) {
        return Err(invalid(format!(
            "row_ptr decreases at row {r}: {} then {}",
            row_ptr[r],
            row_ptr[r + 1]
        )));
    }
    let available = 2 * codes.len() as u64;
    if u64::from(entries) > available {
        return Err(invalid(format!(
            "row_ptr ends at {entries} entries but the codes hold only {available}"
        )));
    }

    // Items per row, prefix-summed: O(rows), cheap next to the nibble sums.
    let mut row_item = Vec::with_capacity(row_ptr.len());
    let mut total = 0u64;
    row_item.push(0u32);
    for r in 0..rows {
        total += RowCuts::of_row(row_ptr, r, seg).items;
        let t =
            u32::try_from(total).map_err(|_| invalid(format!("more than {} items", u32::MAX)))?;
        row_item.push(t);
    }
    let n = total as usize;

    // Every item independently: its start, its row and (but for a row's last item, whose width
    // nobody needs) its width in columns, Σ (gap + 1) over its entries. Parallel over items,
    // not rows, so a few very long rows still spread over all threads.
    let mut item_ptr = vec![0u32; n + 1];
    let mut item_row = vec![0u32; n];
    let mut item_col = vec![0u32; n];
    item_ptr[..n]
        .par_chunks_mut(ITEMS_PER_TASK)
        .zip(item_row.par_chunks_mut(ITEMS_PER_TASK))
        .zip(item_col.par_chunks_mut(ITEMS_PER_TASK))
        .enumerate()
        .try_for_each(|(task, ((ptrs, rows_out), widths))| -> Result<()> {
            let first_item = task * ITEMS_PER_TASK;
            // The row holding first_item: the last r with row_item[r] ≤ first_item.
            let mut r = row_item
                .partition_point(|&x| x as usize <= first_item)
                .saturating_sub(1);
            let mut cuts = RowCuts::of_row(row_ptr, r, seg);
            for (k, ((p, row_out), width)) in ptrs
                .iter_mut()
                .zip(rows_out.iter_mut())
                .zip(widths.iter_mut())
                .enumerate()
            {
                let i = first_item + k;
                while row_item[r + 1] as usize <= i {
                    r += 1;
                    cuts = RowCuts::of_row(row_ptr, r, seg);
                }
                let j = (i - row_item[r] as usize) as u64;
                let (start, end) = cuts.item(j, seg);
                // start < end ≤ row_ptr[rows] (or start = end for an empty row): fits u32.
                *p = start as u32;
                *row_out = r as u32;
                *width = if j + 1 < cuts.items {
                    let w = (end - start) + nibble_sum(codes, start as usize, end as usize);
                    u32::try_from(w).map_err(|_| column_overflow(r))?
                } else {
                    0
                };
            }
            Ok(())
        })?;
    item_ptr[n] = entries;

    // Widths → columns: an exclusive prefix sum within each row, rows in parallel. The work is
    // per item (not per entry), so row lengths barely matter here.
    let mut per_row: Vec<(usize, &mut [u32])> = Vec::with_capacity(rows);
    let mut rest = item_col.as_mut_slice();
    for (r, w) in row_item.windows(2).enumerate() {
        let (row, tail) = std::mem::take(&mut rest).split_at_mut((w[1] - w[0]) as usize);
        per_row.push((r, row));
        rest = tail;
    }
    per_row
        .into_par_iter()
        .try_for_each(|(r, row)| -> Result<()> {
            let mut column = 0u32;
            for c in row.iter_mut() {
                let width = *c;
                *c = column;
                column = column
                    .checked_add(width)
                    .ok_or_else(|| column_overflow(r))?;
            }
            Ok(())
        })?;

    Ok(SplitTable {
        item_ptr,
        item_col,
        item_row,
        row_item,
    })
}

fn column_overflow(row: usize) -> Error {
    invalid(format!("a column of row {row} exceeds u32::MAX"))
}

/// Σ gap over the codes of entries `[a, b)` (a ≤ b ≤ 2·codes.len(), checked by the caller).
/// Whole bytes at a time between an odd first and an odd last nibble.
fn nibble_sum(codes: &[u8], a: usize, b: usize) -> u64 {
    if a >= b {
        return 0;
    }
    let mut sum = 0u64;
    let mut lo = a / 2;
    if a % 2 == 1 {
        sum += u64::from(codes[lo] >> 4);
        lo += 1;
    }
    let hi = b / 2;
    if lo < hi {
        sum += byte_nibble_sum(&codes[lo..hi]);
    }
    if b % 2 == 1 && hi >= lo {
        sum += u64::from(codes[hi] & 0x0f);
    }
    sum
}

/// Σ of both nibbles of every byte. In blocks of 2048 bytes summed in u16 (2048 · 30 < 65536),
/// which the compiler turns into wide SIMD adds.
fn byte_nibble_sum(bytes: &[u8]) -> u64 {
    bytes
        .chunks(2048)
        .map(|block| {
            let s = block.iter().fold(0u16, |acc, &x| {
                acc + u16::from(x & 0x0f) + u16::from(x >> 4)
            });
            u64::from(s)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;
    use macko_format::{code_at, MackoMatrix};
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Every property of the table that the kernel relies on, checked against an independent
    /// decoding of the columns (`code_at` sums over the whole row, entry by entry).
    fn check(row_ptr: &[u32], codes: &[u8], seg: u32, t: &SplitTable) {
        let rows = row_ptr.len() - 1;
        let n = t.items();
        assert_eq!(t.item_ptr.len(), n + 1);
        assert_eq!(t.item_col.len(), n);
        assert_eq!(t.row_item.len(), rows + 1);
        // Partition of [0, N), in order.
        assert_eq!(t.item_ptr[0], 0);
        assert_eq!(t.item_ptr[n], row_ptr[rows]);
        assert!(t.item_ptr.windows(2).all(|w| w[0] <= w[1]));
        // row_item: starts at 0, ends at n, at least one item per row, consistent with item_row.
        assert_eq!(t.row_item[0], 0);
        assert_eq!(t.row_item[rows] as usize, n);
        for r in 0..rows {
            let (s, e) = (row_ptr[r], row_ptr[r + 1]);
            let items = t.row_item[r] as usize..t.row_item[r + 1] as usize;
            assert!(!items.is_empty(), "row {r} has no item");
            if s == e {
                assert_eq!(items.len(), 1, "row {r} must have exactly one item");
            }
            // The row's items cover exactly [s, e).
            assert_eq!(t.item_ptr[items.start], s);
            assert_eq!(t.item_ptr[items.end], e);
            let mut column = 0u64;
            let mut entry = s as usize;
            for i in items.clone() {
                assert_eq!(t.item_row[i] as usize, r);
                let (a, b) = (t.item_ptr[i], t.item_ptr[i + 1]);
                assert!(s <= a && b <= e, "item {i} leaves row {r}");
                if s < e {
                    assert!(a < b, "item {i} of row {r} is empty");
                }
                assert!(b - a <= seg + 7, "item {i} has {} entries", b - a);
                if i > items.start {
                    assert_eq!(a % 8, 0, "interior boundary {a} of row {r}");
                }
                // Independent decoding: the column right after entry a − 1 of the row.
                while entry < a as usize {
                    column += u64::from(code_at(codes, entry)) + 1;
                    entry += 1;
                }
                assert_eq!(u64::from(t.item_col[i]), column, "item_col of item {i}");
            }
            // Maximal cutting: the cut count is exactly the number of s + j·seg (rounded up to
            // 8) strictly inside (s, e), computed here by enumeration.
            let expected = (1u64..)
                .map(|j| (u64::from(s) + j * u64::from(seg)).div_ceil(8) * 8)
                .take_while(|&b| b < u64::from(e))
                .collect::<Vec<_>>();
            let got: Vec<u64> = items.skip(1).map(|i| u64::from(t.item_ptr[i])).collect();
            assert_eq!(got, expected, "cuts of row {r}");
        }
    }

    /// A random dense matrix: density d, with long zero runs when d is low (padding entries).
    fn random_macko(rows: usize, cols: usize, density: f64, seed: u64) -> MackoMatrix {
        let mut rng = StdRng::seed_from_u64(seed);
        let values: Vec<f16> = (0..rows * cols)
            .map(|_| {
                if rng.random::<f64>() < density {
                    f16::from_f32(rng.random_range(0.25..2.0))
                } else {
                    f16::ZERO
                }
            })
            .collect();
        MackoMatrix::from_dense_f16(rows, cols, &values).expect("encodable")
    }

    /// Raw (possibly non-canonical) arrays: random row lengths, random codes, tail padding.
    fn random_arrays(lengths: &[u32], seed: u64) -> (Vec<u32>, Vec<u8>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut row_ptr = vec![0u32];
        for &l in lengths {
            row_ptr.push(row_ptr.last().unwrap() + l);
        }
        let n = *row_ptr.last().unwrap() as usize;
        let padded = n.div_ceil(8) * 8;
        let codes = (0..padded / 2).map(|_| rng.random::<u8>()).collect();
        (row_ptr, codes)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Encoded matrices: item_col equals the column of the item's first entry as decoded by
        /// `MackoMatrix::row_entries` (or the row's column count past its last entry).
        #[test]
        fn encoded_matrices_split_correctly(
            rows in 0usize..24,
            cols in 0usize..700,
            density in prop_oneof![Just(1.0), Just(0.0), 0.01f64..1.0],
            seg_groups in 1u32..40,
            seed in any::<u64>(),
        ) {
            let seg = 8 * seg_groups;
            let m = random_macko(rows, cols, density, seed);
            let t = split_rows(m.row_ptr(), m.codes(), seg).unwrap();
            check(m.row_ptr(), m.codes(), seg, &t);
            for r in 0..rows {
                let columns: Vec<usize> = m.row_entries(r).map(|(c, _)| c).collect();
                let s = m.row_range(r).start;
                for i in t.row_item[r] as usize..t.row_item[r + 1] as usize {
                    let k = t.item_ptr[i] as usize - s;
                    let expected = if k == 0 { 0 } else { columns[k - 1] + 1 };
                    prop_assert_eq!(t.item_col[i] as usize, expected);
                }
            }
        }

        /// Arbitrary row lengths (long rows, empty rows, rows starting at any nibble) and random
        /// codes, including 15s, with small and large segments.
        #[test]
        fn raw_arrays_split_correctly(
            lengths in prop::collection::vec(
                prop_oneof![Just(0u32), 0u32..20, 0u32..3000],
                0..40,
            ),
            seg_groups in prop_oneof![1u32..4, 1u32..600],
            seed in any::<u64>(),
        ) {
            let seg = 8 * seg_groups;
            let (row_ptr, codes) = random_arrays(&lengths, seed);
            let t = split_rows(&row_ptr, &codes, seg).unwrap();
            check(&row_ptr, &codes, seg, &t);
        }

        /// The nibble sum agrees with code_at, for every alignment of both ends.
        #[test]
        fn nibble_sum_matches_code_at(
            bytes in prop::collection::vec(any::<u8>(), 0..5000),
            a in any::<prop::sample::Index>(),
            b in any::<prop::sample::Index>(),
        ) {
            let n = 2 * bytes.len();
            let (a, b) = if n == 0 { (0, 0) } else { (a.index(n + 1), b.index(n + 1)) };
            let (a, b) = (a.min(b), a.max(b));
            let expected: u64 = (a..b).map(|i| u64::from(code_at(&bytes, i))).sum();
            prop_assert_eq!(nibble_sum(&bytes, a, b), expected);
        }
    }

    #[test]
    fn zero_rows_give_no_items() {
        let t = split_rows(&[0], &[], 8).unwrap();
        assert_eq!(t.items(), 0);
        assert_eq!(t.item_ptr, vec![0]);
        assert_eq!(t.row_item, vec![0]);
    }

    #[test]
    fn empty_rows_get_one_empty_item_each() {
        // rows: empty, 3 entries, empty, empty at the end.
        let row_ptr = [0, 0, 3, 3, 3];
        let codes = [0x21, 0x03, 0, 0];
        let t = split_rows(&row_ptr, &codes, 8).unwrap();
        check(&row_ptr, &codes, 8, &t);
        assert_eq!(t.item_ptr, vec![0, 0, 3, 3, 3]);
        assert_eq!(t.item_row, vec![0, 1, 2, 3]);
        assert_eq!(t.row_item, vec![0, 1, 2, 3, 4]);
        assert_eq!(t.item_col, vec![0, 0, 0, 0]);
    }

    #[test]
    fn a_row_shorter_than_seg_is_one_item() {
        let (row_ptr, codes) = random_arrays(&[5, 30, 2], 1);
        let t = split_rows(&row_ptr, &codes, 64).unwrap();
        check(&row_ptr, &codes, 64, &t);
        assert_eq!(t.row_item, vec![0, 1, 2, 3]);
    }

    #[test]
    fn a_row_of_exactly_seg_is_one_item_aligned_or_not() {
        // Aligned: [0, 16); then mid-group: [16, 19) and [19, 35) (19 + 16 = 35 → no cut inside).
        let (row_ptr, codes) = random_arrays(&[16, 3, 16], 2);
        let t = split_rows(&row_ptr, &codes, 16).unwrap();
        check(&row_ptr, &codes, 16, &t);
        assert_eq!(t.item_ptr, vec![0, 16, 19, 35]);
        // One more entry gives one cut, at ⌈(19 + 16)/8⌉·8 = 40 only if it is inside: 36 < 40.
        let (row_ptr, codes) = random_arrays(&[16, 3, 17], 2);
        let t = split_rows(&row_ptr, &codes, 16).unwrap();
        assert_eq!(t.item_ptr, vec![0, 16, 19, 36]);
        let (row_ptr, codes) = random_arrays(&[16, 3, 22], 2);
        let t = split_rows(&row_ptr, &codes, 16).unwrap();
        check(&row_ptr, &codes, 16, &t);
        assert_eq!(t.item_ptr, vec![0, 16, 19, 40, 41]);
    }

    #[test]
    fn a_row_starting_mid_group_is_cut_on_multiples_of_8() {
        // Row 1 is [3, 30): cuts at ⌈11/8⌉·8 = 16 and 24; its first item has 13 = seg + 5 entries.
        let row_ptr = [0, 3, 30];
        let codes: Vec<u8> = (0..16u8).map(|i| i.wrapping_mul(37)).collect();
        let t = split_rows(&row_ptr, &codes, 8).unwrap();
        check(&row_ptr, &codes, 8, &t);
        assert_eq!(t.item_ptr, vec![0, 3, 16, 24, 30]);
        assert_eq!(t.item_row, vec![0, 1, 1, 1]);
        assert_eq!(t.row_item, vec![0, 1, 4]);
        let col = |from: usize, to: usize| -> u32 {
            (from..to).map(|i| u32::from(code_at(&codes, i)) + 1).sum()
        };
        assert_eq!(t.item_col, vec![0, 0, col(3, 16), col(3, 24)]);
    }

    #[test]
    fn bad_segment_lengths_are_refused_by_value() {
        for seg in [0u32, 4, 7, 12, 9, 1001, u32::MAX] {
            let e = split_rows(&[0, 8], &[0; 4], seg).unwrap_err().to_string();
            assert!(e.contains(&seg.to_string()), "{e}");
        }
        assert!(split_rows(&[0, 8], &[0; 4], u32::MAX - 7).is_ok());
    }

    #[test]
    fn bad_row_pointers_are_refused() {
        let e = |row_ptr: &[u32], codes: &[u8]| split_rows(row_ptr, codes, 8).unwrap_err();
        assert!(e(&[], &[]).to_string().contains("empty"));
        assert!(e(&[1, 2], &[0; 4]).to_string().contains("row_ptr[0]"));
        let dec = e(&[0, 5, 3], &[0; 4]).to_string();
        assert!(dec.contains("decreases at row 1"), "{dec}");
        let past = e(&[0, 9], &[0; 4]).to_string();
        assert!(past.contains('9') && past.contains('8'), "{past}");
        assert!(matches!(
            e(&[0, u32::MAX], &[]),
            Error::Backend {
                backend: BackendKind::Cuda,
                ..
            }
        ));
    }

    #[test]
    fn huge_segments_and_indices_near_u32_max_do_not_overflow() {
        // The cut arithmetic is in u64: a row ending near u32::MAX with a huge seg is one item.
        let c = RowCuts::new(u32::MAX - 20, u32::MAX, u64::from(u32::MAX - 7));
        assert_eq!(c.items, 1);
        let c = RowCuts::new(u32::MAX - 100, u32::MAX, 8);
        assert!(c.items > 1);
        let (a, b) = c.item(c.items - 1, 8);
        assert!(a < b && b == u64::from(u32::MAX) && a % 8 == 0);
    }

    /// Timing on a 12288×12288 matrix of density 0.5 (run with
    /// `cargo test --release --lib split -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn time_split_rows_12288_square_half_dense() {
        let d = crate::synthetic::pruned_matrix(12288, 12288, 0.5, 7).unwrap();
        let m = MackoMatrix::from_dense(&d).unwrap();
        for seg in [8u32, 256, 1024, 4096] {
            let mut best = f64::INFINITY;
            let mut items = 0;
            for _ in 0..5 {
                let t0 = std::time::Instant::now();
                let t = split_rows(m.row_ptr(), m.codes(), seg).unwrap();
                best = best.min(t0.elapsed().as_secs_f64());
                items = t.items();
            }
            println!(
                "seg {seg}: {items} items, best of 5 {:.2} ms ({} entries, {} threads)",
                best * 1e3,
                m.entries(),
                rayon::current_num_threads()
            );
        }
        let t = split_rows(m.row_ptr(), m.codes(), 256).unwrap();
        check(m.row_ptr(), m.codes(), 256, &t);
    }
}

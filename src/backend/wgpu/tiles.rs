//! Column tiles of x for the MACKO subgroup kernel: where x is too wide for workgroup memory
//! (NVIDIA's Vulkan driver offers 48 KiB, about 24 000 f16 columns), every workgroup stages it
//! one tile of columns at a time and works through each of its rows' parts in that tile
//! (`X_TILED` in shaders/macko.wgsl and macko_sg.wgsl).
//!
//! Why a table: a MACKO row gives an entry's column only relative to the entry before it (4-bit
//! gap codes), so where a row's entries cross into the next tile, and the column count at that
//! point, are known only by walking the row. The table walks every row once, at upload, and
//! holds for each row and tile the index of the row's first entry in the tile and the column
//! count before it (rebased to the tile's first column, so the kernel computes slots of the
//! staged tile directly). The kernel reads it in place of the row pointers.
//!
//! Everything here runs on the host, once per upload; it makes no wgpu call.

use std::ops::Range;

use macko_format::{code_at, MackoMatrix, GROUP};

use macko_format::aligned::{copy_codes, next_row_start};
use rayon::prelude::*;

/// Columns of a tile are a multiple of this: whole 16-byte words of x (8 columns) for the copy,
/// and whole runs of 64 columns for the padded f16 layout (one pad word per 64 columns, see
/// macko_x_f16.wgsl), so a tile's slots are laid out as if it were a whole x.
pub(super) const TILE_COLS_GRANULE: usize = 64;

/// How x is cut into column tiles: `tiles` tiles of `cols` columns each (the last may hold
/// fewer, never none).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TilePlan {
    pub tiles: u32,
    pub cols: u32,
}

/// The tiles for x of `cols` columns where a tile may stage at most `max_cols` (rounded down to
/// the granule): `None` where x fits whole (no tiles needed) or `max_cols` is below one granule
/// (no tile fits). The fewest tiles, all of about the same width: `max_cols` = 24 000 cuts 28 672
/// columns into 2 tiles of 14 336, not 23 936 + 4 736.
pub(super) fn plan_tiles(cols: usize, max_cols: usize) -> Option<TilePlan> {
    let max = max_cols / TILE_COLS_GRANULE * TILE_COLS_GRANULE;
    if cols <= max_cols || max == 0 {
        return None;
    }
    let tiles = cols.div_ceil(max);
    let width = cols.div_ceil(tiles).div_ceil(TILE_COLS_GRANULE) * TILE_COLS_GRANULE;
    // width <= max (max is a multiple of the granule and at least cols / tiles), so tiles of
    // `width` cover x in at most `tiles` tiles; the count is recomputed so none is empty.
    Some(TilePlan {
        tiles: u32::try_from(cols.div_ceil(width)).ok()?,
        cols: u32::try_from(width).ok()?,
    })
}

/// Rows filled per rayon task.
const ROWS_PER_TASK: usize = 256;

/// The table of the rows `rows` of `m` (one row block) for `plan`, as the kernel reads it:
/// `plan.tiles + 1` planes of `rows.len()` pairs of u32. Pair (t, r) of plane t < tiles is the
/// index, less `base` (the block's first stored entry), of row r's first entry whose column is
/// in tile t or after it (the row's end if none), and the row's column count before that entry
/// (one past the previous entry's column, 0 at the row's start) less tile t's first column,
/// modulo 2^32. Plane `tiles` holds the rows' ends and 0. So row r's part in tile t is entries
/// from pair (t, r) to pair (t + 1, r), and none of them lies outside tile t.
pub(super) fn tile_table(
    m: &MackoMatrix,
    rows: Range<usize>,
    base: usize,
    plan: TilePlan,
) -> Vec<u32> {
    let planes = plan.tiles as usize + 1;
    let n = rows.len();
    // Row-major first (each row's pairs together, filled in parallel), then planes.
    let mut by_row = vec![0u32; 2 * planes * n];
    by_row
        .par_chunks_mut(2 * planes * ROWS_PER_TASK)
        .enumerate()
        .for_each(|(task, chunk)| {
            for (i, pairs) in chunk.chunks_exact_mut(2 * planes).enumerate() {
                row_parts(m, rows.start + task * ROWS_PER_TASK + i, base, plan, pairs);
            }
        });
    let mut table = vec![0u32; 2 * planes * n];
    for r in 0..n {
        for t in 0..planes {
            let from = 2 * (r * planes + t);
            let to = 2 * (t * n + r);
            table[to] = by_row[from];
            table[to + 1] = by_row[from + 1];
        }
    }
    table
}

/// A tiled block uploaded row-aligned (`aligned_tiles`): the tile table and the arrays it
/// indexes.
pub(super) struct AlignedTiles {
    /// As `tile_table`'s, of these arrays: every part starts at a multiple of 8 entries, and a
    /// part ends where the row's part in the next tile starts (its padding included).
    pub table: Vec<u32>,
    /// Each row's parts, each padded with zero entries (value +0.0, gap code 0) to whole
    /// groups, then one group of zeros (`zero_group`).
    pub values: Vec<half::f16>,
    pub codes: Vec<u8>,
    pub zero_group: u32,
}

/// The entries a row-aligned tiled layout gives row k of `table` (`tile_table`'s for some rows
/// with base 0, `n` rows): its parts, each rounded up to whole groups.
fn aligned_row_len(table: &[u32], n: usize, k: usize, tiles: usize) -> u64 {
    (0..tiles)
        .map(|t| {
            let (a, b) = (table[2 * (t * n + k)], table[2 * ((t + 1) * n + k)]);
            u64::from(b - a).div_ceil(GROUP as u64) * GROUP as u64
        })
        .sum()
}

/// The aligned entry counts of the rows of `table` (`tile_table(m, 0..n, 0, plan)`), as row
/// pointers from 0; `None` where they and a zero group pass 32 bits.
pub(super) fn aligned_tile_row_ptr(table: &[u32], n: usize, plan: TilePlan) -> Option<Vec<u32>> {
    let mut out = Vec::with_capacity(n + 1);
    let mut at = 0u32;
    out.push(0);
    for k in 0..n {
        // Whole groups already: the row-aligned layout's own bound (a zero group after it).
        let len = u32::try_from(aligned_row_len(table, n, k, plan.tiles as usize)).ok()?;
        at = next_row_start(at, len)?;
        out.push(at);
    }
    Some(out)
}

/// Rows `rows` of `m` with x in tiles as `plan` cuts it, each row's part in each tile starting
/// at a whole group (the MACKO subgroup kernel's `ALIGNED_ROWS` with `X_TILED`: no step then
/// masks another part's entries). `full` is `tile_table(m, 0..m.rows(), 0, plan)`. A part's
/// padding entries follow its last entry (one column further each, so up to 7 columns past the
/// tile, into the staged tile's zero slack); its column count before its first entry is
/// unchanged. `None` where the block's offsets would pass 32 bits.
pub(super) fn aligned_tiles(
    m: &MackoMatrix,
    rows: Range<usize>,
    full: &[u32],
    plan: TilePlan,
) -> Option<AlignedTiles> {
    let tiles = plan.tiles as usize;
    let total = m.rows();
    let n = rows.len();
    let mut table = vec![0u32; 2 * (tiles + 1) * n];
    let mut at = 0u64;
    for (k, r) in rows.clone().enumerate() {
        for t in 0..tiles {
            let (a, b) = (full[2 * (t * total + r)], full[2 * ((t + 1) * total + r)]);
            table[2 * (t * n + k)] = u32::try_from(at).ok()?;
            table[2 * (t * n + k) + 1] = full[2 * (t * total + r) + 1];
            at += u64::from(b - a).div_ceil(GROUP as u64) * GROUP as u64;
        }
        table[2 * (tiles * n + k)] = u32::try_from(at).ok()?;
    }
    let stored = usize::try_from(at).ok()? + GROUP;
    u32::try_from(stored).ok()?;
    let mut values = vec![half::f16::ZERO; stored];
    let mut codes = vec![0u8; stored / 2];
    for (k, r) in rows.enumerate() {
        for t in 0..tiles {
            let (a, b) = (
                full[2 * (t * total + r)] as usize,
                full[2 * ((t + 1) * total + r)] as usize,
            );
            let d = table[2 * (t * n + k)] as usize;
            values[d..d + (b - a)].copy_from_slice(&m.values()[a..b]);
            copy_codes(m.codes(), a, b - a, &mut codes[d / 2..]).ok()?;
        }
    }
    Some(AlignedTiles {
        table,
        values,
        codes,
        zero_group: (at / GROUP as u64) as u32,
    })
}

/// Row `r`'s pairs (see `tile_table`) into `pairs`, 2 · (tiles + 1) words.
fn row_parts(m: &MackoMatrix, r: usize, base: usize, plan: TilePlan, pairs: &mut [u32]) {
    let range = m.row_range(r);
    let width = plan.cols as usize;
    let mut set = |t: usize, entry: usize, count: usize| {
        pairs[2 * t] = (entry - base) as u32;
        pairs[2 * t + 1] = (count as u32).wrapping_sub((t * width) as u32);
    };
    set(0, range.start, 0);
    // The next tile whose first entry is still to be found, and the column count so far.
    let mut t = 1;
    let mut count = 0usize;
    for i in range.clone() {
        let column = count + code_at(m.codes(), i) as usize;
        while t < plan.tiles as usize && column >= t * width {
            set(t, i, count);
            t += 1;
        }
        count = column + 1;
    }
    while t < plan.tiles as usize {
        set(t, range.end, count);
        t += 1;
    }
    let last = plan.tiles as usize;
    pairs[2 * last] = (range.end - base) as u32;
    pairs[2 * last + 1] = 0;
}

#[cfg(test)]
mod tests {
    use super::*;
    use macko_format::DenseMatrix;
    use proptest::prelude::*;

    #[test]
    fn tiles_only_where_x_does_not_fit_and_of_even_widths() {
        assert_eq!(plan_tiles(24_000, 24_000), None);
        assert_eq!(plan_tiles(100, 63), None);
        assert_eq!(
            plan_tiles(28_672, 24_000),
            Some(TilePlan {
                tiles: 2,
                cols: 14_336
            })
        );
        assert_eq!(
            plan_tiles(49_152, 24_000),
            Some(TilePlan {
                tiles: 3,
                cols: 16_384
            })
        );
        // Rounding up to the granule may leave fewer tiles than the first count.
        assert_eq!(plan_tiles(130, 64), Some(TilePlan { tiles: 3, cols: 64 }));
        assert_eq!(plan_tiles(129, 100), Some(TilePlan { tiles: 3, cols: 64 }));
    }

    proptest! {
        /// Every plan covers x with tiles no wider than allowed, none of them empty.
        #[test]
        fn plans_cover_x_within_the_limit(cols in 1usize..200_000, max in 64usize..30_000) {
            if let Some(p) = plan_tiles(cols, max) {
                let (tiles, width) = (p.tiles as usize, p.cols as usize);
                prop_assert!(width % TILE_COLS_GRANULE == 0 && width <= max);
                prop_assert!(tiles >= 2);
                prop_assert!(tiles * width >= cols && (tiles - 1) * width < cols);
            } else {
                prop_assert!(cols <= max);
            }
        }

        /// Each row's part in tile t is exactly its entries whose columns lie in tile t, and
        /// the column count before the part (rebased) is one past the previous entry's column,
        /// checked against the decoded rows on random matrices (with padding entries: long gaps
        /// at low density), for blocks starting at any row.
        #[test]
        fn parts_are_the_entries_of_each_tile(
            rows in 1usize..12,
            cols in 1usize..700,
            density in 0.02f64..1.0,
            width_granules in 1usize..4,
            first in 0usize..12,
            seed in any::<u64>(),
        ) {
            let dense = crate::synthetic::pruned_matrix(rows, cols, density, seed).unwrap();
            let m = MackoMatrix::from_dense(&dense).unwrap();
            let max = width_granules * TILE_COLS_GRANULE;
            let Some(plan) = plan_tiles(cols, max) else {
                return Ok(());
            };
            let first = first.min(rows - 1);
            let base = m.row_ptr()[first] as usize / 8 * 8;
            let table = tile_table(&m, first..rows, base, plan);
            let n = rows - first;
            let width = plan.cols as usize;
            for (k, r) in (first..rows).enumerate() {
                let entries: Vec<(usize, usize)> = m
                    .row_entries(r)
                    .enumerate()
                    .map(|(j, (c, _))| (m.row_range(r).start + j, c))
                    .collect();
                for t in 0..plan.tiles as usize {
                    let pair = |t: usize| {
                        let at = 2 * (t * n + k);
                        (table[at] as usize + base, table[at + 1])
                    };
                    let (s, c0) = pair(t);
                    let (e, _) = pair(t + 1);
                    let inside: Vec<usize> = entries
                        .iter()
                        .filter(|&&(_, c)| c / width == t)
                        .map(|&(i, _)| i)
                        .collect();
                    prop_assert_eq!(inside, (s..e).collect::<Vec<_>>());
                    let before = entries
                        .iter()
                        .rfind(|&&(i, _)| i < s)
                        .map_or(0, |&(_, c)| c + 1);
                    prop_assert_eq!(c0, (before as u32).wrapping_sub((t * width) as u32));
                }
                let end = 2 * (plan.tiles as usize * n + k);
                prop_assert_eq!(table[end] as usize + base, m.row_range(r).end);
                prop_assert_eq!(table[end + 1], 0);
            }
        }
    }

    proptest! {
        /// The row-aligned tiled layout holds each row's part in each tile as `tile_table`
        /// finds it, from a multiple of 8 entries, with the same column count before it, then
        /// zero padding up to the next part; a zero group follows; the row pointers count the
        /// same aligned entries.
        #[test]
        fn aligned_parts_are_the_parts_then_zeros(
            rows in 1usize..12,
            cols in 1usize..700,
            density in 0.02f64..1.0,
            width_granules in 1usize..4,
            first in 0usize..12,
            seed in any::<u64>(),
        ) {
            let dense = crate::synthetic::pruned_matrix(rows, cols, density, seed).unwrap();
            let m = MackoMatrix::from_dense(&dense).unwrap();
            let Some(plan) = plan_tiles(cols, width_granules * TILE_COLS_GRANULE) else {
                return Ok(());
            };
            let first = first.min(rows - 1);
            let full = tile_table(&m, 0..rows, 0, plan);
            let ptr = aligned_tile_row_ptr(&full, rows, plan).unwrap();
            let a = aligned_tiles(&m, first..rows, &full, plan).unwrap();
            let (n, tiles) = (rows - first, plan.tiles as usize);
            let entry = |v: &[half::f16], c: &[u8], i: usize| (v[i].to_bits(), code_at(c, i));
            for (k, r) in (first..rows).enumerate() {
                let row_start = a.table[2 * k] as usize;
                let row_end = a.table[2 * (tiles * n + k)] as usize;
                prop_assert_eq!(
                    row_end - row_start,
                    (ptr[r + 1] - ptr[r]) as usize
                );
                for t in 0..tiles {
                    let (s, e) = (full[2 * (t * rows + r)] as usize, full[2 * ((t + 1) * rows + r)] as usize);
                    let d = a.table[2 * (t * n + k)] as usize;
                    let d1 = a.table[2 * ((t + 1) * n + k)] as usize;
                    prop_assert_eq!(d % 8, 0);
                    prop_assert_eq!(d1 - d, (e - s).div_ceil(8) * 8);
                    prop_assert_eq!(a.table[2 * (t * n + k) + 1], full[2 * (t * rows + r) + 1]);
                    for j in 0..d1 - d {
                        let want = if j < e - s {
                            entry(m.values(), m.codes(), s + j)
                        } else {
                            (0, 0)
                        };
                        prop_assert_eq!(entry(&a.values, &a.codes, d + j), want);
                    }
                }
            }
            let z = a.zero_group as usize * 8;
            prop_assert_eq!(z, a.table[2 * (tiles * n + n - 1)] as usize);
            prop_assert_eq!(a.values.len(), z + 8);
            for i in z..z + 8 {
                prop_assert_eq!(entry(&a.values, &a.codes, i), (0, 0));
            }
        }
    }

    /// A row whose entries all lie before its last tile, and an empty row: their parts in the
    /// tiles they do not reach are empty and start at the row's end.
    #[test]
    fn rows_empty_in_some_tiles() {
        let cols = 256;
        let mut values = vec![half::f16::ZERO; 2 * cols];
        values[190] = half::f16::ONE;
        let dense = DenseMatrix::new(2, cols, values).unwrap();
        let m = MackoMatrix::from_dense(&dense).unwrap();
        let plan = plan_tiles(cols, 64).unwrap();
        assert_eq!(plan, TilePlan { tiles: 4, cols: 64 });
        let table = tile_table(&m, 0..2, 0, plan);
        let end0 = m.row_ptr()[1];
        // Row 0 (pairs at 2 (2t)): tile 3 (columns 192..256) holds none of its entries.
        assert_eq!(table[2 * (3 * 2)], end0);
        assert_eq!(table[2 * (4 * 2)], end0);
        // Row 1 (pairs at 2 (2t + 1)): empty in every tile.
        for t in 0..=4 {
            assert_eq!(table[2 * (t * 2 + 1)], end0, "row 1, plane {t}");
        }
    }
}

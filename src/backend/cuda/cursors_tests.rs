use super::*;
use half::f16;
use macko_format::aligned::align_rows;
use macko_format::MackoMatrix;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A random matrix of density d (long zero runs, so padding entries, when d is low), with its
/// dense values.
fn random_macko(rows: usize, cols: usize, density: f64, seed: u64) -> (MackoMatrix, Vec<f16>) {
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
    let m = MackoMatrix::from_dense_f16(rows, cols, &values).expect("encodable");
    (m, values)
}

/// Every entry's column in row `[start, end)`.
fn columns(codes: &[u8], start: u32, end: u32) -> Vec<u64> {
    let mut next = 0u64;
    (start..end)
        .map(|e| {
            let col = next + u64::from(code(codes, e as usize).expect("code"));
            next = col + 1;
            col
        })
        .collect()
}

#[test]
fn split_widths_are_whole_mma_steps_covering_the_columns() {
    for cols in [0u32, 1, 31, 32, 33, 512, 777, 8192, 28672] {
        let w = split_width(cols);
        assert_eq!(w % 32, 0, "{cols}");
        assert!(w >= 32);
        assert!(u64::from(w) * SPLITS as u64 >= u64::from(cols), "{cols}");
        // No wider than needed: one step less would not cover the columns.
        assert!(
            u64::from(w - 32) * (SPLITS as u64) < u64::from(cols).max(1),
            "{cols}"
        );
    }
    assert_eq!(split_width(8192), 512);
}

#[test]
fn each_cursor_is_the_group_of_the_first_entry_at_or_after_its_split() {
    for (rows, cols, d, seed) in [(40, 777, 0.3, 1), (17, 8192, 0.05, 2), (9, 33, 1.0, 3)] {
        let (m, _) = random_macko(rows, cols, d, seed);
        let (rp, codes) = (m.row_ptr(), m.codes());
        let cur = mma_cursors(rp, codes, cols as u32).expect("cursors");
        let w = u64::from(split_width(cols as u32));
        for r in 0..rows {
            let cs = columns(codes, rp[r], rp[r + 1]);
            for s in 0..SPLITS {
                let (group, next) = (cur[(r * SPLITS + s) * 2], cur[(r * SPLITS + s) * 2 + 1]);
                match cs.iter().position(|&c| c >= s as u64 * w) {
                    None => assert_eq!(group, rp[r + 1].div_ceil(8), "row {r} split {s}"),
                    Some(i) => {
                        let e = rp[r] + i as u32;
                        assert_eq!(group, e / 8, "row {r} split {s}");
                        let first = group * 8;
                        let expected = if first > rp[r] {
                            cs[(first - 1 - rp[r]) as usize] + 1
                        } else {
                            0
                        };
                        assert_eq!(u64::from(next), expected, "row {r} split {s}");
                    }
                }
            }
        }
    }
}

/// The kernel's decoding of one row (`mma_decode_row` of kernels/batch_mma.cu) for one window,
/// modelled lane by lane: the row's entries stored in `tile` (window-relative columns), the
/// cursor advanced as the kernel advances it.
struct RowModel<'a> {
    values: &'a [u16],
    codes: &'a [u8],
    start: u32,
    end: u32,
    lanes: u32,
}

impl RowModel<'_> {
    fn window(&self, group: &mut u32, next: &mut u32, k0: u32, kw: u32, tile: &mut [u16]) {
        let w_end = self.end.div_ceil(8);
        let kend = u64::from(k0) + u64::from(kw);
        while *group < w_end {
            // Per lane: the group's entries of the row (lo..hi) and its column advance.
            let mut advs = Vec::new();
            for tl in 0..self.lanes {
                let w = *group + tl;
                let first = w * 8;
                let lo = self.start.saturating_sub(first).min(8);
                let hi = if w < w_end {
                    self.end.saturating_sub(first).min(8)
                } else {
                    0
                };
                let mut adv = 0u32;
                for i in lo..hi {
                    adv += code(self.codes, (first + i) as usize).expect("code") + 1;
                }
                advs.push((w, lo, hi, adv));
            }
            let mut base = *next;
            let mut stop = None;
            for &(w, lo, hi, adv) in &advs {
                // All 8 entries, as the kernel stores them: entries outside the row masked to
                // value 0 and gap 0, columns in wrapping u32 arithmetic from base - 1 - lo.
                let mut col = base.wrapping_sub(1).wrapping_sub(lo);
                for i in 0..8u32 {
                    let e = (w * 8 + i) as usize;
                    let in_row = i >= lo && i < hi;
                    let (h, gap) = if in_row {
                        (self.values[e], code(self.codes, e).expect("code"))
                    } else {
                        (0, 0)
                    };
                    col = col.wrapping_add(gap + 1);
                    if col.wrapping_sub(k0) < kw {
                        tile[col.wrapping_sub(k0) as usize] = h;
                    }
                }
                if adv != 0 && u64::from(base) + u64::from(adv) > kend && stop.is_none() {
                    stop = Some((w, base));
                }
                base += adv;
            }
            match stop {
                Some((w, b)) => {
                    *group = w;
                    *next = b;
                    return;
                }
                None => {
                    *group += self.lanes;
                    *next = base;
                }
            }
        }
    }
}

/// Rebuilds every row from its splits and windows as the kernel walks them, and compares with
/// the dense values (the row-aligned layout of whole-row uploads too).
fn windows_rebuild_the_rows(
    rows: usize,
    cols: usize,
    d: f64,
    window: u32,
    lanes: u32,
    aligned: bool,
) {
    let (m, dense) = random_macko(rows, cols, d, 7 + rows as u64);
    let a = align_rows(&m, 0..rows).expect("aligned");
    let (rp, values, codes): (&[u32], Vec<u16>, &[u8]) = if aligned {
        (
            &a.row_ptr,
            a.values.iter().map(|v| v.to_bits()).collect(),
            &a.codes,
        )
    } else {
        (
            m.row_ptr(),
            m.values().iter().map(|v| v.to_bits()).collect(),
            m.codes(),
        )
    };
    let cur = mma_cursors(rp, codes, cols as u32).expect("cursors");
    let width = split_width(cols as u32);
    for r in 0..rows {
        let mut rebuilt = vec![0u16; cols];
        let model = RowModel {
            values: &values,
            codes,
            start: rp[r],
            end: rp[r + 1],
            lanes,
        };
        for s in 0..SPLITS as u32 {
            let lo = s * width;
            let hi = (lo + width).min(cols as u32);
            let (mut group, mut next) = (
                cur[(r * SPLITS + s as usize) * 2],
                cur[(r * SPLITS + s as usize) * 2 + 1],
            );
            let mut k0 = lo;
            while k0 < hi {
                let kw = window.min(hi - k0);
                let mut tile = vec![0u16; window as usize];
                model.window(&mut group, &mut next, k0, kw, &mut tile);
                rebuilt[k0 as usize..(k0 + kw) as usize].copy_from_slice(&tile[..kw as usize]);
                k0 += window;
            }
        }
        let want: Vec<u16> = dense[r * cols..(r + 1) * cols]
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(
            rebuilt, want,
            "row {r} ({rows}×{cols} d={d} K={window} L={lanes})"
        );
    }
}

#[test]
fn the_kernels_windows_rebuild_every_row_from_the_cursors() {
    for aligned in [false, true] {
        for (window, lanes) in [(32, 4), (128, 8), (128, 16), (512, 32), (64, 4)] {
            windows_rebuild_the_rows(37, 777, 0.3, window, lanes, aligned);
            windows_rebuild_the_rows(20, 4096, 0.05, window, lanes, aligned);
            windows_rebuild_the_rows(16, 64, 1.0, window, lanes, aligned);
            windows_rebuild_the_rows(5, 2000, 0.0, window, lanes, aligned);
        }
    }
}

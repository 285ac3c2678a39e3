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

/// A packed cursor's group (absolute) and `next` for window `w` of a row starting at `start`.
fn unpack(c: u32, start: u32, w: usize) -> (u32, u64) {
    let group = start / 8 + (c & 0xff_ffff);
    let next = (w as u64 * u64::from(WINDOW)).wrapping_sub(u64::from(c >> 24));
    (group, next)
}

#[test]
fn windows_cover_the_columns() {
    for (cols, n) in [
        (0u32, 0u32),
        (1, 1),
        (128, 1),
        (129, 2),
        (8192, 64),
        (28672, 224),
    ] {
        assert_eq!(windows(cols), n, "{cols}");
    }
}

#[test]
fn each_cursor_is_the_group_of_the_first_entry_at_or_after_its_window() {
    for (rows, cols, d, seed) in [(40, 777, 0.3, 1), (17, 8192, 0.05, 2), (9, 300, 1.0, 3)] {
        let (m, _) = random_macko(rows, cols, d, seed);
        let (rp, codes) = (m.row_ptr(), m.codes());
        let cur = window_cursors(rp, codes, cols as u32).expect("cursors");
        let nwin = windows(cols as u32) as usize;
        assert_eq!(cur.len(), rows * nwin);
        for r in 0..rows {
            let cs = columns(codes, rp[r], rp[r + 1]);
            for w in 0..nwin {
                let k0 = w as u64 * u64::from(WINDOW);
                let (group, next) = unpack(cur[r * nwin + w], rp[r], w);
                match cs.iter().position(|&c| c >= k0) {
                    None => assert_eq!(group, rp[r + 1].div_ceil(8), "row {r} window {w}"),
                    Some(i) => {
                        let e = rp[r] + i as u32;
                        assert_eq!(group, e / 8, "row {r} window {w}");
                        let first = group * 8;
                        let expected = if first > rp[r] {
                            cs[(first - 1 - rp[r]) as usize] + 1
                        } else {
                            0
                        };
                        assert_eq!(next, expected, "row {r} window {w}");
                    }
                }
            }
        }
    }
}

/// The kernel's decoding of one row's window (`mma_describe` and `mma_decode` of
/// kernels/batch_mma.cu), modelled entry by entry: the groups the cursors bound, every entry's
/// column in wrapping u32 arithmetic as the kernel computes it, entries outside the row masked
/// to value 0 and gap 0; those inside the window stored in `tile`.
fn decode_window(
    values: &[u16],
    codes: &[u8],
    (start, end): (u32, u32),
    (cur, cur_next): (u32, Option<u32>),
    w: usize,
    tile: &mut [u16],
) {
    let (g0, next) = unpack(cur, start, w);
    let n = window_groups(start, end, cur, cur_next);
    let k0 = (w as u64 * u64::from(WINDOW)) as u32;
    let mut base = next as u32;
    for g in g0..g0 + n {
        let first = g * 8;
        let lo = start.saturating_sub(first).min(8);
        let hi = end.saturating_sub(first).min(8);
        let mut col = base.wrapping_sub(1).wrapping_sub(lo);
        let mut adv = 0u32;
        for i in 0..8u32 {
            let e = (first + i) as usize;
            let in_row = i >= lo && i < hi;
            let (h, gap) = if in_row {
                (values[e], code(codes, e).expect("code"))
            } else {
                (0, 0)
            };
            col = col.wrapping_add(gap + 1);
            if in_row {
                adv += gap + 1;
            }
            if col.wrapping_sub(k0) < WINDOW {
                tile[col.wrapping_sub(k0) as usize] = h;
            }
        }
        base = base.wrapping_add(adv);
    }
}

/// Rebuilds every row from its windows as the kernel decodes them, and compares with the dense
/// values (the row-aligned layout of whole-row uploads too); checks that the stage holds every
/// band's windows.
fn windows_rebuild_the_rows(rows: usize, cols: usize, d: f64, aligned: bool) {
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
    let cur = window_cursors(rp, codes, cols as u32).expect("cursors");
    let nwin = windows(cols as u32) as usize;
    let stage = stage_groups(rp, &cur, cols as u32);
    let mut most = 0u32;
    for band in 0..rows.div_ceil(BAND) {
        for w in 0..nwin {
            let mut groups = 0u32;
            for r in band * BAND..((band + 1) * BAND).min(rows) {
                let c = &cur[r * nwin..(r + 1) * nwin];
                groups += window_groups(rp[r], rp[r + 1], c[w], c.get(w + 1).copied());
            }
            most = most.max(groups);
        }
    }
    assert_eq!(stage, most, "{rows}×{cols} d={d}");
    for r in 0..rows {
        let mut rebuilt = vec![0u16; nwin * WINDOW as usize];
        let c = &cur[r * nwin..(r + 1) * nwin];
        for w in 0..nwin {
            let tile = &mut rebuilt[w * WINDOW as usize..(w + 1) * WINDOW as usize];
            let bounds = (c[w], c.get(w + 1).copied());
            decode_window(&values, codes, (rp[r], rp[r + 1]), bounds, w, tile);
        }
        let want: Vec<u16> = dense[r * cols..(r + 1) * cols]
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(&rebuilt[..cols], &want[..], "row {r} ({rows}×{cols} d={d})");
        assert!(
            rebuilt[cols..].iter().all(|&h| h == 0),
            "row {r}: past the columns"
        );
    }
}

#[test]
fn the_kernels_windows_rebuild_every_row_from_the_cursors() {
    for aligned in [false, true] {
        windows_rebuild_the_rows(37, 777, 0.3, aligned);
        windows_rebuild_the_rows(20, 4096, 0.05, aligned);
        windows_rebuild_the_rows(16, 64, 1.0, aligned);
        windows_rebuild_the_rows(33, 1000, 0.9, aligned);
        windows_rebuild_the_rows(5, 2000, 0.0, aligned);
    }
}

#[test]
fn a_dense_window_fills_the_largest_stage() {
    // Every row dense: each window holds 128 entries (16 groups) plus the group after it.
    let (m, _) = random_macko(16, 512, 1.0, 4);
    let cur = window_cursors(m.row_ptr(), m.codes(), 512).expect("cursors");
    let stage = stage_groups(m.row_ptr(), &cur, 512);
    assert!(stage <= 16 * (WINDOW / 8 + 2), "{stage}");
    assert!(stage >= 16 * (WINDOW / 8), "{stage}");
}

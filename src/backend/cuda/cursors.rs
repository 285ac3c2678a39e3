//! Window cursors for the tensor-core MACKO kernel (kernels/batch_mma.cu, `macko_batch_mma_*`):
//! the kernel cuts every band of 16 rows into windows of [`WINDOW`] columns and copies each
//! window's groups into shared memory before decoding any of them, so it must know, for every
//! row and window, where the row's entries of that window begin without decoding the row from
//! its start (the gap codes give columns only relative to the previous entry). The upload
//! computes that, and how many groups the largest window of a band holds (the stage the kernel
//! copies into).
//!
//! Everything here runs on the host, once per upload; it makes no CUDA call.

use rayon::prelude::*;

use crate::backend::BackendKind;
use crate::error::{Error, Result};

/// Columns per window: `MACKO_MMA_K` of kernels/batch_mma.cu.
pub const WINDOW: u32 = 128;

/// Rows per band: one m16 tile.
pub const BAND: usize = 16;

/// Bits of a packed cursor holding the group (relative to the row's first, `start / 8`); the
/// 8 bits above hold the window's first column minus [`Cursor::next`] (at most 128: the group
/// holds the first entry at or after the window's start, at most 8 entries of at most 16
/// columns each after `next`).
const GROUP_BITS: u32 = 24;

/// Rows per rayon task.
const ROWS_PER_TASK: usize = 256;

/// Windows of a row of `cols` columns (window w covers `[w · WINDOW, (w + 1) · WINDOW)`).
pub fn windows(cols: u32) -> u32 {
    cols.div_ceil(WINDOW)
}

/// A cursor: where the kernel starts decoding a row for one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// The aligned group of 8 entries holding the row's first entry at or after the window's
    /// first column; `⌈end / 8⌉` (no group left) when the row has none there.
    pub group: u32,
    /// The column after the row's entry just before that group (0 when the group begins at or
    /// before the row's start: the kernel masks the entries of the row before).
    pub next: u32,
}

fn invalid(message: String) -> Error {
    Error::Backend {
        backend: BackendKind::Cuda,
        message: format!("computing the tensor-core cursors: {message}"),
    }
}

/// Code of entry `e` (two per byte, low nibble first).
fn code(codes: &[u8], e: usize) -> Option<u32> {
    codes
        .get(e / 2)
        .map(|b| u32::from((b >> (4 * (e % 2))) & 0xf))
}

/// The cursors of one row `[start, end)`, one per window, into `out`.
fn row_cursors(codes: &[u8], start: u32, end: u32, out: &mut [Cursor]) -> Result<()> {
    let done = Cursor {
        group: end.div_ceil(8),
        next: 0,
    };
    out.fill(done);
    let n = out.len();
    let mut s = 0usize;
    let mut next = 0u64; // the column after the previous entry
    let mut group_next = 0u64; // `next` at the start of the current entry's group
    for e in start..end {
        if e % 8 == 0 {
            group_next = next;
        }
        let gap = code(codes, e as usize)
            .ok_or_else(|| invalid(format!("entry {e} has no code byte")))?;
        let col = next + u64::from(gap);
        while s < n && col >= s as u64 * u64::from(WINDOW) {
            // The group begins at or before the row's start: the kernel starts it with next = 0.
            let gn = if e / 8 * 8 > start { group_next } else { 0 };
            out[s] = Cursor {
                group: e / 8,
                next: u32::try_from(gn).map_err(|_| invalid(format!("entry {e}: column")))?,
            };
            s += 1;
        }
        next = col + 1;
    }
    Ok(())
}

/// Packs a cursor of window `w` of the row of entries `[start, end)` (see [`GROUP_BITS`]).
fn pack(c: Cursor, (start, end): (u32, u32), w: usize) -> Result<u32> {
    let rel = c.group.saturating_sub(start / 8);
    let k0 = w as u64 * u64::from(WINDOW);
    // A row with no entry at or after the window (its cursor past the row's last group) has no
    // `next` to keep: 0 stands in.
    let back = if c.group >= end.div_ceil(8) {
        0
    } else {
        k0.checked_sub(u64::from(c.next))
            .ok_or_else(|| invalid(format!("window {w}: next column {} past it", c.next)))?
    };
    if rel >> GROUP_BITS != 0 || back > 0xff {
        return Err(invalid(format!(
            "window {w}: group {rel} or column offset {back} does not fit a packed cursor"
        )));
    }
    Ok(rel | (back as u32) << GROUP_BITS)
}

/// Every row's window cursors, row-major, packed as the kernel reads them: `rows × windows`
/// u32.
pub(crate) fn window_cursors(row_ptr: &[u32], codes: &[u8], cols: u32) -> Result<Vec<u32>> {
    let rows = row_ptr.len().saturating_sub(1);
    let nwin = windows(cols) as usize;
    let mut out = vec![0u32; rows * nwin];
    if nwin == 0 {
        return Ok(out);
    }
    out.par_chunks_mut(ROWS_PER_TASK * nwin)
        .enumerate()
        .try_for_each(|(task, chunk)| -> Result<()> {
            let mut cursors = vec![Cursor { group: 0, next: 0 }; nwin];
            for (i, row_out) in chunk.chunks_exact_mut(nwin).enumerate() {
                let r = task * ROWS_PER_TASK + i;
                let (start, end) = (row_ptr[r], row_ptr[r + 1]);
                if end < start {
                    return Err(invalid(format!("row {r} ends before it starts")));
                }
                row_cursors(codes, start, end, &mut cursors)?;
                for (w, (slot, c)) in row_out.iter_mut().zip(&cursors).enumerate() {
                    *slot = pack(*c, (start, end), w)?;
                }
            }
            Ok(())
        })?;
    Ok(out)
}

/// Groups of a row's window as the kernel copies them (`mma_describe`): from the window's
/// cursor group through the next window's (which may hold this window's last entries), or to
/// the row's last group.
fn window_groups(start: u32, end: u32, cur: u32, cur_next: Option<u32>) -> u32 {
    let base = start / 8;
    let w_end = end.div_ceil(8);
    let g0 = base + (cur & ((1 << GROUP_BITS) - 1));
    let last = match cur_next {
        Some(c) => (base + (c & ((1 << GROUP_BITS) - 1)) + 1).min(w_end),
        None => w_end,
    };
    last.saturating_sub(g0)
}

/// The stage the kernel needs: the most groups any window of any band of 16 rows copies.
pub(crate) fn stage_groups(row_ptr: &[u32], cursors: &[u32], cols: u32) -> u32 {
    let rows = row_ptr.len().saturating_sub(1);
    let nwin = windows(cols) as usize;
    if nwin == 0 {
        return 0;
    }
    (0..rows.div_ceil(BAND))
        .into_par_iter()
        .map(|band| {
            let rs = band * BAND..((band + 1) * BAND).min(rows);
            (0..nwin)
                .map(|w| {
                    rs.clone()
                        .map(|r| {
                            let c = &cursors[r * nwin..(r + 1) * nwin];
                            let next = c.get(w + 1).copied();
                            window_groups(row_ptr[r], row_ptr[r + 1], c[w], next)
                        })
                        .sum::<u32>()
                })
                .max()
                .unwrap_or(0)
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
#[path = "cursors_tests.rs"]
mod tests;

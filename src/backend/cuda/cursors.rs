//! Column cursors for the tensor-core MACKO kernel (kernels/batch_mma.cu, `macko_batch_mma_*`):
//! each warp of a block multiplies one column split of a band of 16 rows, so it must start every
//! row at the split's first column without decoding the row from its start (the gap codes give
//! columns only relative to the previous entry). The upload computes, for every row and split,
//! where that is.
//!
//! Everything here runs on the host, once per upload; it makes no CUDA call.

use rayon::prelude::*;

use crate::backend::BackendKind;
use crate::error::{Error, Result};

/// Column splits per row: the warps of the kernel's 512-thread block (`MMA_WARPS`).
pub const SPLITS: usize = 16;

/// Rows per rayon task.
const ROWS_PER_TASK: usize = 256;

/// Columns of each split: `⌈cols / 16⌉` rounded up to a multiple of 32 (the kernel's pair of
/// mma steps), at least 32. Split s covers `[s · width, min((s + 1) · width, cols))`.
pub fn split_width(cols: u32) -> u32 {
    let per = u64::from(cols).div_ceil(SPLITS as u64).max(1);
    u32::try_from(per.div_ceil(32) * 32).unwrap_or(!31)
}

/// A cursor: where the kernel starts decoding a row for one split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// The aligned group of 8 entries holding the row's first entry at or after the split's
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

/// The cursors of one row `[start, end)` for splits of `width` columns.
fn row_cursors(codes: &[u8], start: u32, end: u32, width: u32) -> Result<[Cursor; SPLITS]> {
    let done = Cursor {
        group: end.div_ceil(8),
        next: 0,
    };
    let mut out = [done; SPLITS];
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
        while s < SPLITS && col >= s as u64 * u64::from(width) {
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
    Ok(out)
}

/// Every row's cursors, row-major, as the kernel reads them: `rows × SPLITS` pairs of u32
/// (group, next).
pub(crate) fn mma_cursors(row_ptr: &[u32], codes: &[u8], cols: u32) -> Result<Vec<u32>> {
    let rows = row_ptr.len().saturating_sub(1);
    let width = split_width(cols);
    let mut out = vec![0u32; rows * SPLITS * 2];
    out.par_chunks_mut(ROWS_PER_TASK * SPLITS * 2)
        .enumerate()
        .try_for_each(|(task, chunk)| -> Result<()> {
            for (i, row_out) in chunk.chunks_exact_mut(SPLITS * 2).enumerate() {
                let r = task * ROWS_PER_TASK + i;
                let (start, end) = (row_ptr[r], row_ptr[r + 1]);
                if end < start {
                    return Err(invalid(format!("row {r} ends before it starts")));
                }
                for (pair, c) in row_out
                    .chunks_exact_mut(2)
                    .zip(row_cursors(codes, start, end, width)?)
                {
                    pair[0] = c.group;
                    pair[1] = c.next;
                }
            }
            Ok(())
        })?;
    Ok(out)
}

#[cfg(test)]
#[path = "cursors_tests.rs"]
mod tests;

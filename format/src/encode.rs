//! Encoders into MACKO-16-4: from dense rows (parallel over rows), from CSR, from COO triplets.
//!
//! All three share one rule (docs/FORMAT.md, "Canonical encoding of a dense row"): a non-zero at
//! column c, with `next` the column after the previous entry of its row, skips `g = c − next`
//! zeros; it is preceded by ⌊g/16⌋ padding entries (+0.0, code 15, each covering 16 columns) and
//! stored with code `g mod 16`. Zeros after the last non-zero of a row produce nothing.

use half::f16;
use rayon::prelude::*;

use crate::csr::CsrMatrix;
use crate::dense::{is_zero, DenseMatrix};
use crate::error::{FormatError, Result};
use crate::macko::{padded_len, MackoMatrix, MAX_CODE};

/// Rows handed to one parallel task: big enough to amortise scheduling, small enough to balance.
const ROWS_PER_TASK: usize = 16;

/// Entries (padding included) that a row with these non-zero columns needs.
#[inline]
fn count_entries(nonzero_columns: impl Iterator<Item = usize>) -> u64 {
    let mut next = 0usize;
    let mut count = 0u64;
    for c in nonzero_columns {
        count += 1 + ((c - next) / 16) as u64;
        next = c + 1;
    }
    count
}

/// Writes a row's entries into `values`/`codes` (one code per byte, packed later); returns how
/// many were written. The slices must hold exactly [`count_entries`] of the same columns.
#[inline]
fn write_entries(
    nonzeros: impl Iterator<Item = (usize, f16)>,
    values: &mut [f16],
    codes: &mut [u8],
) -> usize {
    let mut next = 0usize;
    let mut k = 0usize;
    for (c, v) in nonzeros {
        let mut gap = c - next;
        while gap >= 16 {
            values[k] = f16::ZERO;
            codes[k] = MAX_CODE;
            k += 1;
            gap -= 16;
        }
        values[k] = v;
        codes[k] = gap as u8;
        k += 1;
        next = c + 1;
    }
    k
}

// Dense rows are scanned 64 elements at a time. A per-element filter (`if !is_zero(v)`)
// mispredicts about half the time at density 0.5, which alone held the first encoder to about
// 0.4 GB/s. Instead each block of 64 elements becomes a bit mask of its non-zeros with
// branch-free code that the compiler vectorises, and only the set bits are visited
// (`trailing_zeros`). The per-non-zero work is then branch-free for counting and has one
// well-predicted branch (a gap of 16 or more) for writing.

/// Elements per mask: one bit each in a u64.
const BLOCK: usize = 64;

/// Bit i set where `block[i]` is not zero (±0.0 are zero, NaN is not; see [`is_zero`]).
#[inline]
fn nonzero_mask(block: &[f16; BLOCK]) -> u64 {
    // One byte (0 or 1) per element: a plain compare loop, which vectorises.
    let mut flags = [0u8; BLOCK];
    for (flag, v) in flags.iter_mut().zip(block) {
        *flag = u8::from(v.to_bits() & 0x7fff != 0);
    }
    // Eight bytes to eight bits: multiplying by Σ 2^(7j+7) moves byte i's low bit to bit 56 + i
    // with no carries from the other partial products (their exponents are distinct and < 56).
    let mut mask = 0u64;
    for (j, group) in flags.chunks_exact(8).enumerate() {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(group);
        let gathered = u64::from_le_bytes(bytes).wrapping_mul(0x0102_0408_1020_4080) >> 56;
        mask |= gathered << (8 * j);
    }
    mask
}

/// The non-zero masks of a dense row, block by block, as `(column of bit 0, mask)`; the last
/// partial block is read through a zero-padded copy (zeros produce nothing).
struct Masks<'a> {
    blocks: std::slice::ChunksExact<'a, f16>,
    tail: &'a [f16],
    base: usize,
}

fn masks(row: &[f16]) -> Masks<'_> {
    let blocks = row.chunks_exact(BLOCK);
    Masks {
        tail: blocks.remainder(),
        blocks,
        base: 0,
    }
}

impl Iterator for Masks<'_> {
    type Item = (usize, u64);

    #[inline]
    fn next(&mut self) -> Option<(usize, u64)> {
        let base = self.base;
        self.base += BLOCK;
        if let Some(block) = self.blocks.next() {
            let block = <&[f16; BLOCK]>::try_from(block).ok()?;
            return Some((base, nonzero_mask(block)));
        }
        if self.tail.is_empty() {
            return None;
        }
        let mut block = [f16::ZERO; BLOCK];
        block[..self.tail.len()].copy_from_slice(self.tail);
        self.tail = &[];
        Some((base, nonzero_mask(&block)))
    }
}

/// Whether a block may need padding entries: a gap of 16 or more zeros before one of its
/// non-zeros, either before its first one (counting from `next`, the column after the row's
/// previous entry) or between two of its own.
#[inline]
fn block_needs_padding(base: usize, mask: u64, next: usize) -> bool {
    let first = base + mask.trailing_zeros() as usize;
    // Bit i of `run` is set when the block's bits i to i + 15 are all zero. A run reaching the
    // top of the block is cut there (the shifts bring in ones of `mask`, i.e. zeros of
    // `zeros`): it only matters if a later block has a non-zero, where `first - next` sees it.
    let zeros = !mask;
    let mut run = zeros & (zeros >> 1);
    run &= run >> 2;
    run &= run >> 4;
    run &= run >> 8;
    first - next >= 16 || run != 0 && run.trailing_zeros() < 63 - mask.leading_zeros()
}

/// Entries (padding included) that the canonical encoding of a dense row produces: each
/// non-zero after a gap of g zeros costs 1 + ⌊g/16⌋. Blocks without long gaps cost one
/// popcount.
#[inline]
fn count_dense_row(row: &[f16]) -> u64 {
    let mut next = 0usize;
    let mut count = 0u64;
    for (base, mut mask) in masks(row) {
        if mask == 0 {
            continue;
        }
        if !block_needs_padding(base, mask, next) {
            count += u64::from(mask.count_ones());
            next = base + BLOCK - mask.leading_zeros() as usize;
            continue;
        }
        while mask != 0 {
            let c = base + mask.trailing_zeros() as usize;
            mask &= mask - 1;
            count += 1 + ((c - next) / 16) as u64;
            next = c + 1;
        }
    }
    count
}

/// Writes the canonical entries of a dense row (one code per byte, packed later); returns how
/// many were written. The slices must hold [`count_dense_row`] entries.
#[inline]
fn write_dense_row(row: &[f16], values: &mut [f16], codes: &mut [u8]) -> usize {
    let mut next = 0usize;
    let mut k = 0usize;
    for (base, mut mask) in masks(row) {
        while mask != 0 {
            let c = base + mask.trailing_zeros() as usize;
            mask &= mask - 1;
            let mut gap = c - next;
            while gap >= 16 {
                values[k] = f16::ZERO;
                codes[k] = MAX_CODE;
                k += 1;
                gap -= 16;
            }
            values[k] = row[c];
            codes[k] = gap as u8;
            k += 1;
            next = c + 1;
        }
    }
    k
}

/// Row pointers from per-row entry counts, refusing a total whose padding exceeds u32.
fn row_ptr_from_counts(counts: &[u64]) -> Result<Vec<u32>> {
    let mut row_ptr = Vec::with_capacity(counts.len() + 1);
    let mut total = 0u64;
    row_ptr.push(0u32);
    for &n in counts {
        total += n;
        padded_len(total)?;
        row_ptr.push(total as u32);
    }
    Ok(row_ptr)
}

/// Packs one code per byte into two per byte (low nibble first), in parallel.
fn pack_codes(unpacked: &[u8]) -> Vec<u8> {
    let mut packed = vec![0u8; unpacked.len() / 2];
    packed
        .par_chunks_mut(1 << 14)
        .zip(unpacked.par_chunks(1 << 15))
        .for_each(|(out, inp)| {
            for (o, pair) in out.iter_mut().zip(inp.chunks_exact(2)) {
                *o = pair[0] | (pair[1] << 4);
            }
        });
    packed
}

/// One parallel task of [`MackoMatrix::from_dense`]: its first row, and the parts of the output
/// that only it writes.
struct Task<'a> {
    first_row: usize,
    /// Global index of the task's first entry.
    start: usize,
    /// Its entries' values.
    values: &'a mut [f16],
    /// The packed code bytes that hold only its codes: bytes ⌈start/2⌉ .. ⌈end/2⌉. When `start`
    /// is odd, its first code shares byte ⌊start/2⌋ with the previous task's last code and is
    /// returned to the caller instead (see [`pack_into`]).
    codes: &'a mut [u8],
}

/// Splits the output arrays into one [`Task`] per [`ROWS_PER_TASK`] rows.
fn split_by_tasks<'a>(
    row_ptr: &[u32],
    mut values: &'a mut [f16],
    mut codes: &'a mut [u8],
) -> Vec<Task<'a>> {
    let rows = row_ptr.len() - 1;
    let mut tasks = Vec::with_capacity(rows.div_ceil(ROWS_PER_TASK));
    for first_row in (0..rows).step_by(ROWS_PER_TASK) {
        let last = (first_row + ROWS_PER_TASK).min(rows);
        let (start, end) = (row_ptr[first_row] as usize, row_ptr[last] as usize);
        let (v, v_rest) = std::mem::take(&mut values).split_at_mut(end - start);
        let code_bytes = end.div_ceil(2) - start.div_ceil(2);
        let (c, c_rest) = std::mem::take(&mut codes).split_at_mut(code_bytes);
        values = v_rest;
        codes = c_rest;
        tasks.push(Task {
            first_row,
            start,
            values: v,
            codes: c,
        });
    }
    tasks
}

/// Packs a task's codes (one per byte, for global entries `start..`) into its bytes; returns
/// the code that belongs in the high nibble of byte `start / 2` when `start` is odd.
fn pack_into(start: usize, unpacked: &[u8], packed: &mut [u8]) -> Option<(usize, u8)> {
    let (orphan, rest) = match (start % 2, unpacked.split_first()) {
        (1, Some((&first, rest))) => (Some((start / 2, first)), rest),
        _ => (None, unpacked),
    };
    // Eight codes (one per byte, each < 16) to four bytes at a time: OR-ing each byte with the
    // next one's low nibble shifted up leaves the pairs in the even bytes, which two
    // shift-and-mask steps then gather.
    let mut out = packed.chunks_exact_mut(4);
    let mut codes = rest.chunks_exact(8);
    for (four, eight) in out.by_ref().zip(codes.by_ref()) {
        let mut word = [0u8; 8];
        word.copy_from_slice(eight);
        let x = u64::from_le_bytes(word);
        let pairs = (x | (x >> 4)) & 0x00ff_00ff_00ff_00ff;
        let halves = (pairs | (pairs >> 8)) & 0x0000_ffff_0000_ffff;
        let gathered = (halves | (halves >> 16)) as u32;
        four.copy_from_slice(&gathered.to_le_bytes());
    }
    // The last fewer than eight codes, a pair at a time.
    let done = rest.len() - codes.remainder().len();
    let tail_bytes = packed.get_mut(done / 2..).unwrap_or_default();
    for (byte, pair) in tail_bytes.iter_mut().zip(codes.remainder().chunks_exact(2)) {
        *byte = pair[0] | (pair[1] << 4);
    }
    if rest.len() % 2 == 1 {
        // An odd count leaves a last code alone in the low nibble of the task's last byte.
        if let (Some(byte), Some(&code)) = (packed.get_mut(rest.len() / 2), rest.last()) {
            *byte = code;
        }
    }
    orphan
}

impl MackoMatrix {
    /// Canonical encoding of a dense matrix, in parallel over rows. Bit-compatible with the
    /// reference encoder.
    ///
    /// ```
    /// use half::f16;
    /// use macko_format::{DenseMatrix, MackoMatrix};
    /// let x = |v: f32| f16::from_f32(v);
    /// let dense = DenseMatrix::new(2, 3, vec![x(1.0), x(0.0), x(2.0), x(0.0), x(0.0), x(0.0)])?;
    /// let m = MackoMatrix::from_dense(&dense)?;
    /// assert_eq!(m.row_ptr(), &[0, 2, 2]);
    /// assert_eq!(m.to_dense()?, dense);
    /// # Ok::<(), macko_format::FormatError>(())
    /// ```
    pub fn from_dense(dense: &DenseMatrix) -> Result<Self> {
        let (rows, cols) = (dense.rows(), dense.cols());
        let row = |r: usize| &dense.values()[r * cols..(r + 1) * cols];
        let counts: Vec<u64> = (0..rows)
            .into_par_iter()
            .with_min_len(ROWS_PER_TASK)
            .map(|r| count_dense_row(row(r)))
            .collect();
        let row_ptr = row_ptr_from_counts(&counts)?;
        let entries = row_ptr[rows] as u64;
        let padded = padded_len(entries)?;
        let mut values = vec![f16::ZERO; padded];
        let mut codes = vec![0u8; padded / 2];
        // Codes are written one per byte into a small per-task buffer (it stays in cache) and
        // packed straight into `codes`: no matrix-sized unpacked array, no separate pass.
        let orphans: Vec<Option<(usize, u8)>> = split_by_tasks(&row_ptr, &mut values, &mut codes)
            .into_par_iter()
            .map_init(Vec::new, |unpacked: &mut Vec<u8>, task| {
                let last = (task.first_row + ROWS_PER_TASK).min(rows);
                unpacked.clear();
                unpacked.resize(task.values.len(), 0);
                let (mut v, mut c) = (task.values, unpacked.as_mut_slice());
                for r in task.first_row..last {
                    let n = write_dense_row(row(r), v, c);
                    v = &mut std::mem::take(&mut v)[n..];
                    c = &mut std::mem::take(&mut c)[n..];
                }
                pack_into(task.start, unpacked, task.codes)
            })
            .collect();
        for (byte, code) in orphans.into_iter().flatten() {
            codes[byte] |= code << 4;
        }
        Ok(Self::from_trusted(rows, cols, row_ptr, values, codes))
    }

    /// Canonical encoding of a dense row-major slice (see [`MackoMatrix::from_dense`]).
    pub fn from_dense_f16(rows: usize, cols: usize, values: &[f16]) -> Result<Self> {
        Self::from_dense(&DenseMatrix::new(rows, cols, values.to_vec())?)
    }

    /// Canonical encoding of a CSR matrix. Stored zeros of the CSR are treated as zeros (not
    /// kept), so the result equals `from_dense(csr.to_dense())`.
    pub fn from_csr(csr: &CsrMatrix) -> Result<Self> {
        let rows = csr.rows();
        let row_nonzeros = |r: usize| {
            csr.row_range(r)
                .map(|i| (csr.col_idx()[i] as usize, csr.values()[i]))
                .filter(|(_, v)| !is_zero(*v))
        };
        let counts: Vec<u64> = (0..rows)
            .map(|r| count_entries(row_nonzeros(r).map(|(c, _)| c)))
            .collect();
        let row_ptr = row_ptr_from_counts(&counts)?;
        let padded = padded_len(row_ptr[rows] as u64)?;
        let mut values = vec![f16::ZERO; padded];
        let mut unpacked = vec![0u8; padded];
        for r in 0..rows {
            let range = row_ptr[r] as usize..row_ptr[r + 1] as usize;
            write_entries(
                row_nonzeros(r),
                &mut values[range.clone()],
                &mut unpacked[range],
            );
        }
        let codes = pack_codes(&unpacked);
        Ok(Self::from_trusted(rows, csr.cols(), row_ptr, values, codes))
    }

    /// Canonical encoding of unsorted `(row, col, value)` triplets. A coordinate outside the
    /// shape or given twice is an error naming it.
    pub fn from_coo(rows: usize, cols: usize, triplets: &[(u32, u32, f16)]) -> Result<Self> {
        Self::from_csr(&CsrMatrix::from_coo(rows, cols, triplets)?)
    }
}

impl CsrMatrix {
    /// CSR from unsorted `(row, col, value)` triplets; zeros are kept as given. A coordinate
    /// outside the shape or given twice is an error naming it.
    pub fn from_coo(rows: usize, cols: usize, triplets: &[(u32, u32, f16)]) -> Result<Self> {
        if triplets.len() > u32::MAX as usize {
            return Err(FormatError::TooManyEntries {
                entries: triplets.len() as u64,
                padded: triplets.len() as u64,
            });
        }
        if let Some(&(row, col, _)) = triplets
            .iter()
            .find(|(r, c, _)| *r as usize >= rows || *c as usize >= cols)
        {
            return Err(FormatError::CoordinateOutOfRange {
                row,
                col,
                rows,
                cols,
            });
        }
        let mut sorted = triplets.to_vec();
        sorted.par_sort_unstable_by_key(|&(r, c, _)| (r, c));
        if let Some(w) = sorted
            .windows(2)
            .find(|w| (w[0].0, w[0].1) == (w[1].0, w[1].1))
        {
            return Err(FormatError::DuplicateCoordinate {
                row: w[0].0,
                col: w[0].1,
            });
        }
        // `rows + 1` checked: a caller may pass any `rows` (usize::MAX would wrap to an empty
        // row_ptr and then index out of bounds).
        let row_ptr_len = rows.checked_add(1).ok_or(FormatError::ShapeTooLarge {
            rows,
            cols,
            what: "rows + 1 overflows usize",
        })?;
        let mut row_ptr = vec![0u32; row_ptr_len];
        for &(r, _, _) in &sorted {
            row_ptr[r as usize + 1] += 1;
        }
        for r in 0..rows {
            row_ptr[r + 1] += row_ptr[r];
        }
        let col_idx = sorted.iter().map(|t| t.1).collect();
        let values = sorted.iter().map(|t| t.2).collect();
        Ok(Self::from_trusted(rows, cols, row_ptr, col_idx, values))
    }
}

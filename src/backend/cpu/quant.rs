//! Products of the quantized layouts on the CPU (MACKO and dense with int8/int4 values and
//! binary16 scales; docs/FORMAT.md, "Quantized values"): Y = A·X for `batch` vectors at once,
//! so that each stored value is decoded once and feeds every vector's sum.
//!
//! Each entry's value is formed in f32 as `scale · q`, which is exact (11 + 8 significant bits),
//! and multiplied into each vector's sum: one rounding more per term than the binary16 formats,
//! which the quantized reference allows for by counting every term twice. Forming the value
//! first also makes MACKO's rule direct: an entry whose value is zero (a code of 0, a scale of
//! 0, padding) is the entry whose f32 value is zero, so one comparison masks it.
//!
//! X is transposed once per product into `xt` (`batch` lanes per column, widened to f32), so
//! the `batch` values one entry multiplies are adjacent. Rows run in parallel tasks of
//! [`ROWS_PER_TASK`]; a row's entries rotate through [`SETS`] independent sets of `batch` sums,
//! so consecutive multiply-adds do not wait on each other's results. The row loops are generic
//! over the width W (see `width!`): 1 to 4 and 8 vectors are compiled with constant-length
//! loops, other counts run the same code with `batch` read at run time.
//!
//! Measured (portable build, 2-core AVX2 VM, 4096², d = 0.5, int8 per row; ms per product,
//! best of three, against this backend's portable binary16 loops in the same run; the shared VM
//! varies by up to 2× between runs): MACKO 6.9 / 10.5 / 10.6 / 10.8 / 15.7 at B = 1 / 2 / 4 /
//! 8 / 16 (binary16: 3.8 / 8.9 / 9.1 / 22.9 / 28.3); dense 11.7 / 13.0 / 19.2 / 16.8 / 24.7
//! (binary16: 3.7 / 12.9 / 26.1 / 44.2 / 49.8). From 8 vectors the smaller matrix wins. At one
//! vector, where the plan's `avx2` is true, whole groups take quant_avx2.rs (figures there).

use half::f16;
use macko_format::quant::{q_at, QuantValues, ScaleLayout};
use macko_format::{code_at, QuantBits, QuantDenseMatrix, QuantMackoMatrix, GROUP};
use rayon::prelude::*;

use super::decode::{column_steps, widen1};
#[cfg(target_arch = "x86_64")]
use super::quant_avx2;
use super::storage::ROWS_PER_TASK;

/// Independent sets of sums a row's entries rotate through (entry i adds into set i mod SETS):
/// one set's sums are a chain of dependent additions, and four chains keep enough of them in
/// flight that the adder's latency does not bound a row, even at `batch == 1`.
const SETS: usize = 4;

/// Evaluates `$row` (a call naming the const `W`) with W = `batch` where that width is
/// compiled: the per-vector loops then have a constant length and unroll, and the row's sums
/// are a local array (see [`sums`]). Other widths take W = 0: loops of `batch` iterations over
/// a scratch buffer.
macro_rules! width {
    ($batch:expr, $row:expr) => {
        width!(@ $batch, $row, 1 2 3 4 8)
    };
    (@ $batch:expr, $row:expr, $($w:literal)+) => {
        match $batch {
            $($w => {
                const W: usize = $w;
                $row
            })+
            _ => {
                const W: usize = 0;
                $row
            }
        }
    };
}

/// Y = A·X for `batch` vectors: x is row-major [batch][cols] (f16), out is [batch][rows] f32 sums.
/// `avx2` is the plan's (`CpuPlan::avx2`: AVX2 and FMA detected, `cols < i32::MAX`): at one
/// vector, whole groups then take [`quant_avx2::macko_groups`].
///
/// MACKO semantics: an entry whose value is zero (padding, a code of 0, a scale of 0) adds
/// nothing, even where X holds NaN or ±∞.
pub(crate) fn spmm_macko_quant(
    a: &QuantMackoMatrix,
    x: &[f16],
    batch: usize,
    avx2: bool,
    out: &mut [f32],
) {
    debug_assert_eq!(x.len(), batch * a.cols(), "x must be [batch][cols]");
    debug_assert_eq!(out.len(), batch * a.rows(), "out must be [batch][rows]");
    let xt = transpose(x, a.cols(), batch);
    // Whether X is finite is known only now. With every x finite, a zero value times x is ±0,
    // which adds nothing to a sum that starts at +0, so the mask (a branch per entry) is only
    // paid for where it changes the result.
    let finite = xt.iter().all(|v| v.is_finite());
    by_rows(a.rows(), batch, out, |r, scratch, y| {
        if finite {
            width!(batch, macko_row::<false, W>(a, r, (&xt, avx2), scratch, y))
        } else {
            width!(batch, macko_row::<true, W>(a, r, (&xt, avx2), scratch, y))
        }
    });
}

/// Y = A·X for `batch` vectors: x is row-major [batch][cols] (f16), out is [batch][rows] f32 sums.
/// `avx2` is the plan's: at one vector, whole groups then take [`quant_avx2::dense_groups`].
///
/// IEEE semantics, like any dense product: a stored zero times ±∞ is NaN.
pub(crate) fn spmm_dense_quant(
    a: &QuantDenseMatrix,
    x: &[f16],
    batch: usize,
    avx2: bool,
    out: &mut [f32],
) {
    debug_assert_eq!(x.len(), batch * a.cols(), "x must be [batch][cols]");
    debug_assert_eq!(out.len(), batch * a.rows(), "out must be [batch][rows]");
    let xt = transpose(x, a.cols(), batch);
    by_rows(a.rows(), batch, out, |r, scratch, y| {
        width!(batch, dense_row::<W>(a, r, (&xt, avx2), scratch, y))
    });
}

/// `xt[c · batch + b]` = x of vector `b` at column `c`, widened: the values one entry multiplies
/// are then one contiguous slice.
fn transpose(x: &[f16], cols: usize, batch: usize) -> Vec<f32> {
    let mut xt = vec![0.0f32; cols * batch];
    for (b, v) in x.chunks_exact(cols.max(1)).take(batch).enumerate() {
        for (c, &e) in v.iter().enumerate() {
            xt[c * batch + b] = widen1(e);
        }
    }
    xt
}

/// Runs `row(r, scratch, y)` for every row in parallel tasks of [`ROWS_PER_TASK`] rows, `y` the
/// row's `batch` sums and `scratch` [`SETS`]·`batch` floats for its sets of sums where the width
/// is not compiled (see `width!`; one allocation per task, not per row), then writes the sums
/// into `out` ([batch][rows]). One vector's sums are already in `out`'s order and go there
/// directly; several are gathered row by row (each row's `batch` sums adjacent) and transposed
/// after, so that each task writes one contiguous block.
fn by_rows<F>(rows: usize, batch: usize, out: &mut [f32], row: F)
where
    F: Fn(usize, &mut [f32], &mut [f32]) + Sync,
{
    if batch == 0 {
        return;
    }
    let task = |(t, sums): (usize, &mut [f32])| {
        let mut scratch = vec![0.0f32; SETS * batch];
        for (k, y) in sums.chunks_exact_mut(batch).enumerate() {
            row(t * ROWS_PER_TASK + k, &mut scratch, y);
        }
    };
    if batch == 1 {
        out.par_chunks_mut(ROWS_PER_TASK).enumerate().for_each(task);
        return;
    }
    let mut sums = vec![0.0f32; rows * batch];
    sums.par_chunks_mut(ROWS_PER_TASK * batch)
        .enumerate()
        .for_each(task);
    out.par_chunks_mut(rows.max(1))
        .enumerate()
        .for_each(|(b, y)| {
            for (r, o) in y.iter_mut().enumerate() {
                *o = sums[r * batch + b];
            }
        });
}

/// Where a row finds its values' scales: the current scale and the first value past its group,
/// so a row looks a scale up once per scale group rather than dividing by G for every entry.
struct Scales<'a> {
    values: &'a QuantValues,
    row: usize,
    scale: f32,
    /// The first stored value the current scale does not cover (0 before the first look-up).
    end: usize,
}

impl<'a> Scales<'a> {
    fn new(values: &'a QuantValues, row: usize) -> Self {
        Self {
            values,
            row,
            scale: 0.0,
            end: 0,
        }
    }

    /// The scale of stored value `i`, widened; `i` must not decrease from one call to the next.
    #[inline(always)]
    fn at(&mut self, i: usize) -> f32 {
        if i >= self.end {
            self.scale = widen1(self.values.scale(i, self.row));
            self.end = match self.values.layout() {
                ScaleLayout::PerRow => usize::MAX,
                ScaleLayout::PerGroup(g) => (i / g as usize + 1) * g as usize,
            };
        }
        self.scale
    }
}

/// The codes of stored values `i..i + 8`, `i` a multiple of 8 (so an int4 group is one aligned
/// 4-byte word): decoded together rather than one `q_at` per value.
#[inline(always)]
fn codes8(bits: QuantBits, packed: &[u8], i: usize) -> [i8; GROUP] {
    match bits {
        QuantBits::Int8 => {
            let b = &packed[i..i + GROUP];
            std::array::from_fn(|j| b[j] as i8)
        }
        QuantBits::Int4 => {
            let k = i / 2;
            let w = u32::from_le_bytes([packed[k], packed[k + 1], packed[k + 2], packed[k + 3]]);
            // Nibble j moved to the top and shifted back arithmetically: sign-extended.
            std::array::from_fn(|j| (((w >> (4 * j)) << 28) as i32 >> 28) as i8)
        }
    }
}

/// The 8 values `scale · q` of a group, exact in f32 (11 + 8 significant bits), computed
/// together before the per-vector loops: 8 independent conversions and products, a shape the
/// compiler may vectorise.
#[inline(always)]
fn values8(scale: f32, q: [i8; GROUP]) -> [f32; GROUP] {
    q.map(|q| scale * f32::from(q))
}

/// `set[b] += v · xs[b]` for every vector. With `MASK`, a zero value adds nothing even where
/// X holds NaN or ±∞ (MACKO's padding); without it, IEEE (0 · ∞ = NaN).
#[inline(always)]
fn add<const MASK: bool>(set: &mut [f32], v: f32, xs: &[f32]) {
    if MASK && v == 0.0 {
        return;
    }
    for (s, &x) in set.iter_mut().zip(xs) {
        *s += v * x;
    }
}

/// A row's [`SETS`] sets of sums, zeroed: at a compiled width W, the caller's local array, of
/// constant size at constant offsets, which the compiler can keep in registers (at one vector,
/// 4096², d = 0.5, int8 per row: MACKO 9.1 → 7.8 ms, dense 19.2 → 14.0 ms against the scratch);
/// at W = 0, the task's scratch of `SETS · batch` floats.
#[inline(always)]
fn sums<'s, const W: usize>(
    local: &'s mut [[f32; W]; SETS],
    scratch: &'s mut [f32],
) -> &'s mut [f32] {
    let sets = if W == 0 {
        scratch
    } else {
        local.as_flattened_mut()
    };
    sets.fill(0.0);
    sets
}

/// The row's sums: its sets added vector by vector. Sets start at +0.0, so a row with no terms
/// (or only zero ones) sums to +0.0.
#[inline(always)]
fn total(sets: &[f32], y: &mut [f32]) {
    let batch = y.len();
    y.copy_from_slice(&sets[..batch]);
    for set in sets[batch..].chunks_exact(batch) {
        for (o, s) in y.iter_mut().zip(set) {
            *o += s;
        }
    }
}

/// Row `r` of a quantized MACKO matrix into `y` (its `batch` sums): entries one at a time up to
/// the first aligned group of 8, then whole groups (one word of gap codes decoded to 8 columns
/// with one multiplication; the 8 values share a scale, since scale groups are multiples of 8
/// in storage order), then one at a time to the row's end.
fn macko_row<const MASK: bool, const W: usize>(
    a: &QuantMackoMatrix,
    r: usize,
    (xt, avx2): (&[f32], bool),
    scratch: &mut [f32],
    y: &mut [f32],
) {
    let batch = if W == 0 { y.len() } else { W };
    let (codes, values) = (a.codes(), a.values());
    let (bits, packed) = (values.bits(), values.packed());
    let mut scales = Scales::new(values, r);
    let range = a.row_range(r);
    let (mut i, end) = (range.start, range.end);
    let mut next = 0usize; // the column after the previous entry
    let mut local = [[0.0f32; W]; SETS];
    let sets = sums::<W>(&mut local, scratch);
    let single = |i: usize, next: &mut usize, scales: &mut Scales, sets: &mut [f32]| {
        let c = *next + code_at(codes, i) as usize;
        *next = c + 1;
        let v = scales.at(i) * f32::from(q_at(bits, packed, i));
        let set = &mut sets[(i % SETS) * batch..][..batch];
        add::<MASK>(set, v, &xt[c * batch..][..batch]);
    };
    while i < end && i % GROUP != 0 {
        single(i, &mut next, &mut scales, sets);
        i += 1;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = avx2;
    #[cfg(target_arch = "x86_64")]
    if avx2 && batch == 1 {
        let (i, next, scales) = (&mut i, &mut next, &mut scales);
        // SAFETY: `avx2` is the plan's: AVX2 and FMA detected, and at one vector
        // xt.len() == cols < i32::MAX.
        sets[0] += unsafe {
            quant_avx2::macko_groups::<MASK>(codes, (bits, packed), (i, end), next, xt, |i| {
                scales.at(i)
            })
        };
    }
    while i + GROUP <= end {
        let k = i / 2;
        let w = u32::from_le_bytes([codes[k], codes[k + 1], codes[k + 2], codes[k + 3]]);
        let steps = column_steps(w);
        let (q, scale) = (codes8(bits, packed, i), scales.at(i));
        // The group's last column bounds all 8: one check instead of one per entry.
        let last = next + (steps >> 56) as usize - 1;
        let window = &xt[next * batch..(last + 1) * batch];
        let v = values8(scale, q);
        for (j, &vj) in v.iter().enumerate() {
            let c = ((steps >> (8 * j)) & 0xff) as usize - 1;
            let set = &mut sets[(j % SETS) * batch..][..batch];
            add::<MASK>(set, vj, &window[c * batch..][..batch]);
        }
        next += (steps >> 56) as usize;
        i += GROUP;
    }
    while i < end {
        single(i, &mut next, &mut scales, sets);
        i += 1;
    }
    total(sets, y);
}

/// Row `r` of a quantized dense matrix into `y`, IEEE: values one at a time up to the first
/// stored value at a multiple of 8 (a row may start anywhere in storage order, and mid-byte
/// in int4 when `cols` is odd), then groups of 8 sharing one scale, then one at a time.
fn dense_row<const W: usize>(
    a: &QuantDenseMatrix,
    r: usize,
    (xt, avx2): (&[f32], bool),
    scratch: &mut [f32],
    y: &mut [f32],
) {
    let batch = if W == 0 { y.len() } else { W };
    let cols = a.cols();
    let values = a.values();
    let (bits, packed) = (values.bits(), values.packed());
    let mut scales = Scales::new(values, r);
    let start = r * cols; // in range: rows · cols values are stored
    let mut c = 0usize;
    let mut local = [[0.0f32; W]; SETS];
    let sets = sums::<W>(&mut local, scratch);
    let single = |c: usize, scales: &mut Scales, sets: &mut [f32]| {
        let i = start + c;
        let v = scales.at(i) * f32::from(q_at(bits, packed, i));
        let set = &mut sets[(i % SETS) * batch..][..batch];
        add::<false>(set, v, &xt[c * batch..][..batch]);
    };
    while c < cols && (start + c) % GROUP != 0 {
        single(c, &mut scales, sets);
        c += 1;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = avx2;
    #[cfg(target_arch = "x86_64")]
    if avx2 && batch == 1 {
        let scales = &mut scales;
        // SAFETY: `avx2` is the plan's: AVX2 and FMA detected; `start + c` is a multiple of 8.
        sets[0] += unsafe {
            quant_avx2::dense_groups((bits, packed), start, (&mut c, cols), xt, |i| scales.at(i))
        };
    }
    while c + GROUP <= cols {
        let i = start + c;
        let (q, scale) = (codes8(bits, packed, i), scales.at(i));
        let window = &xt[c * batch..(c + GROUP) * batch];
        let v = values8(scale, q);
        for (j, &vj) in v.iter().enumerate() {
            let set = &mut sets[(j % SETS) * batch..][..batch];
            add::<false>(set, vj, &window[j * batch..][..batch]);
        }
        c += GROUP;
    }
    while c < cols {
        single(c, &mut scales, sets);
        c += 1;
    }
    total(sets, y);
}

#[cfg(test)]
mod tests {
    use super::super::avx2;
    use super::*;
    use macko_format::reference::{spmv_dense_quant, spmv_macko_quant, Reference};
    use macko_format::{DenseMatrix, MackoMatrix, OutputPrecision, Quantization};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Every width compiled with constant-length loops (1–4, 8) and two that are not.
    const BATCHES: [usize; 7] = [1, 2, 3, 4, 5, 8, 17];

    fn quantizations() -> Vec<Quantization> {
        let mut out = Vec::new();
        for bits in [QuantBits::Int8, QuantBits::Int4] {
            for scales in [
                ScaleLayout::PerRow,
                ScaleLayout::PerGroup(8),
                ScaleLayout::PerGroup(64),
            ] {
                out.push(Quantization { bits, scales });
            }
        }
        out
    }

    /// A random `rows × cols` matrix of density `density`, values of both signs spread over
    /// several binades (so scales matter and int4 rounds many of them to 0), with every fifth
    /// row empty.
    fn random_dense(rows: usize, cols: usize, density: f64, rng: &mut StdRng) -> DenseMatrix {
        let values = (0..rows * cols)
            .map(|k| {
                if (k / cols) % 5 == 3 || rng.random::<f64>() >= density {
                    return f16::ZERO;
                }
                let v: f32 = rng.random_range(0.01..4.0);
                f16::from_f32(if rng.random::<bool>() { v } else { -v })
            })
            .collect();
        DenseMatrix::new(rows, cols, values).unwrap()
    }

    /// `batch` random vectors of `cols` elements, row-major.
    fn random_x(cols: usize, batch: usize, rng: &mut StdRng) -> Vec<f16> {
        (0..cols * batch)
            .map(|_| f16::from_f32(rng.random_range(-3.0..3.0)))
            .collect()
    }

    /// Checks every output of `out` ([batch][rows]) against the reference of its vector.
    fn check(
        name: &str,
        rows: usize,
        cols: usize,
        x: &[f16],
        batch: usize,
        out: &[f32],
        reference: impl Fn(&[f16]) -> Reference,
    ) {
        for b in 0..batch {
            let want = reference(&x[b * cols..(b + 1) * cols]);
            for r in 0..rows {
                let got = out[b * rows + r];
                assert!(
                    want.agrees(r, got as f64, OutputPrecision::F32),
                    "{name}, vector {b} of {batch}, row {r}: got {got}, expected {} ± {}",
                    want.y[r],
                    want.tolerance(r, OutputPrecision::F32)
                );
            }
        }
    }

    /// The plan's `avx2` for a matrix of `cols` columns on this CPU, as `CpuBackend::plan`
    /// makes it: the tests take the backend's path (AVX2 at one vector where the CPU has it).
    fn plan_avx2(cols: usize) -> bool {
        avx2::supported() && cols < i32::MAX as usize
    }

    fn run_macko(a: &QuantMackoMatrix, x: &[f16], batch: usize) -> Vec<f32> {
        run_macko_with(a, x, batch, plan_avx2(a.cols()))
    }

    fn run_dense(a: &QuantDenseMatrix, x: &[f16], batch: usize) -> Vec<f32> {
        run_dense_with(a, x, batch, plan_avx2(a.cols()))
    }

    fn run_macko_with(a: &QuantMackoMatrix, x: &[f16], batch: usize, simd: bool) -> Vec<f32> {
        let mut out = vec![f32::NAN; batch * a.rows()];
        spmm_macko_quant(a, x, batch, simd, &mut out);
        out
    }

    fn run_dense_with(a: &QuantDenseMatrix, x: &[f16], batch: usize, simd: bool) -> Vec<f32> {
        let mut out = vec![f32::NAN; batch * a.rows()];
        spmm_dense_quant(a, x, batch, simd, &mut out);
        out
    }

    /// Every non-zero code of `values` replaced by a random non-zero code of the full range
    /// (−8..7 for int4, −128..127 for int8), zeros (padding, tail) kept: packed codes a
    /// quantizer (symmetric, −7..7) never writes.
    fn full_range_codes(values: &QuantValues, rng: &mut StdRng) -> Vec<u8> {
        let mut packed = values.packed().to_vec();
        for i in 0..values.len() {
            if values.q(i) == 0 {
                continue;
            }
            match values.bits() {
                QuantBits::Int8 => {
                    let q = loop {
                        let q: i8 = rng.random();
                        if q != 0 {
                            break q;
                        }
                    };
                    packed[i] = q as u8;
                }
                QuantBits::Int4 => {
                    let q = loop {
                        let q: i8 = rng.random_range(-8..8);
                        if q != 0 {
                            break q;
                        }
                    };
                    let shift = (i & 1) * 4;
                    let byte = &mut packed[i / 2];
                    *byte = (*byte & !(0x0f << shift)) | (((q as u8) & 0x0f) << shift);
                }
            }
        }
        packed
    }

    /// The AVX2 group loops (one vector) against the portable ones and the reference: odd row
    /// lengths (odd and prime column counts; MACKO rows of every length), rows starting
    /// mid-group (MACKO rows start anywhere in storage order, dense ones wherever r · cols
    /// falls), empty rows (every fifth), full-range codes (int4 −8..7), scales per row and
    /// per 8, 16 and 64 values, and X with NaN and ±∞ (the masked MACKO path; dense NaN).
    #[test]
    fn avx2_rows_agree_with_the_portable_rows() {
        if !avx2::supported() {
            eprintln!("no AVX2 + FMA + F16C on this CPU: nothing to compare");
            return;
        }
        let mut rng = StdRng::seed_from_u64(23);
        for (rows, cols) in [(37, 203), (50, 77), (9, 8), (21, 1031)] {
            for density in [0.05, 0.4, 0.9, 1.0] {
                let dense = random_dense(rows, cols, density, &mut rng);
                let macko = MackoMatrix::from_dense(&dense).unwrap();
                for bits in [QuantBits::Int8, QuantBits::Int4] {
                    for scales in [
                        ScaleLayout::PerRow,
                        ScaleLayout::PerGroup(8),
                        ScaleLayout::PerGroup(16),
                        ScaleLayout::PerGroup(64),
                    ] {
                        let quant = Quantization { bits, scales };
                        let qm = QuantMackoMatrix::quantize(&macko, quant).unwrap();
                        let (row_ptr, codes, values) = qm.into_parts();
                        let packed = full_range_codes(&values, &mut rng);
                        let (_, s) = values.into_parts();
                        let qm = QuantMackoMatrix::from_parts(
                            quant, rows, cols, row_ptr, codes, packed, s,
                        )
                        .unwrap();
                        let qd = QuantDenseMatrix::quantize(&dense, quant).unwrap();
                        let packed = full_range_codes(qd.values(), &mut rng);
                        let (_, s) = qd.into_values().into_parts();
                        let qd =
                            QuantDenseMatrix::from_parts(quant, rows, cols, packed, s).unwrap();
                        for non_finite in [false, true] {
                            let mut x = random_x(cols, 1, &mut rng);
                            if non_finite {
                                for v in x.iter_mut() {
                                    match rng.random_range(0..30) {
                                        0 => *v = f16::NAN,
                                        1 => *v = f16::INFINITY,
                                        2 => *v = f16::NEG_INFINITY,
                                        _ => {}
                                    }
                                }
                            }
                            let name = format!("{rows}×{cols}, d = {density}, {quant:?}");
                            let name = format!("{name}, non-finite x: {non_finite}");
                            for simd in [true, false] {
                                let out = run_macko_with(&qm, &x, 1, simd);
                                let what = format!("MACKO {name}, AVX2: {simd}");
                                check(&what, rows, cols, &x, 1, &out, |x| {
                                    spmv_macko_quant(&qm, x).unwrap()
                                });
                                let out = run_dense_with(&qd, &x, 1, simd);
                                let what = format!("dense {name}, AVX2: {simd}");
                                check(&what, rows, cols, &x, 1, &out, |x| {
                                    spmv_dense_quant(&qd, x).unwrap()
                                });
                            }
                        }
                    }
                }
            }
        }
    }

    /// Both layouts, every width and scale layout, sparse (many padding entries) to nearly
    /// full, against the f64 reference of each vector. 70 rows: two full tasks and a partial
    /// one; 203 columns: odd, so int4 dense rows start mid-byte and G = 64 groups span rows.
    #[test]
    fn random_products_agree_with_the_reference() {
        let (rows, cols) = (70, 203);
        let mut rng = StdRng::seed_from_u64(7);
        for density in [0.03, 0.3, 0.95] {
            let dense = random_dense(rows, cols, density, &mut rng);
            let macko = MackoMatrix::from_dense(&dense).unwrap();
            for quant in quantizations() {
                let qm = QuantMackoMatrix::quantize(&macko, quant).unwrap();
                let qd = QuantDenseMatrix::quantize(&dense, quant).unwrap();
                for batch in BATCHES {
                    let x = random_x(cols, batch, &mut rng);
                    let name = format!("d = {density}, {quant:?}");
                    let out = run_macko(&qm, &x, batch);
                    check(&format!("MACKO {name}"), rows, cols, &x, batch, &out, |x| {
                        spmv_macko_quant(&qm, x).unwrap()
                    });
                    let out = run_dense(&qd, &x, batch);
                    check(&format!("dense {name}"), rows, cols, &x, batch, &out, |x| {
                        spmv_dense_quant(&qd, x).unwrap()
                    });
                }
            }
        }
    }

    /// NaN and ±∞ sprinkled through X: MACKO's padding and zero codes mask them (the
    /// reference says where a NaN or ∞ must appear), dense propagates them.
    #[test]
    fn non_finite_x_follows_each_layouts_semantics() {
        let (rows, cols) = (45, 150);
        let mut rng = StdRng::seed_from_u64(11);
        for density in [0.03, 0.2] {
            let dense = random_dense(rows, cols, density, &mut rng);
            let macko = MackoMatrix::from_dense(&dense).unwrap();
            for quant in quantizations() {
                let qm = QuantMackoMatrix::quantize(&macko, quant).unwrap();
                let qd = QuantDenseMatrix::quantize(&dense, quant).unwrap();
                for batch in BATCHES {
                    let mut x = random_x(cols, batch, &mut rng);
                    for v in x.iter_mut() {
                        match rng.random_range(0..40) {
                            0 => *v = f16::NAN,
                            1 => *v = f16::INFINITY,
                            2 => *v = f16::NEG_INFINITY,
                            _ => {}
                        }
                    }
                    let out = run_macko(&qm, &x, batch);
                    check("MACKO", rows, cols, &x, batch, &out, |x| {
                        spmv_macko_quant(&qm, x).unwrap()
                    });
                    let out = run_dense(&qd, &x, batch);
                    check("dense", rows, cols, &x, batch, &out, |x| {
                        spmv_dense_quant(&qd, x).unwrap()
                    });
                }
            }
        }
    }

    /// One row with a single entry at column 40: its gap (40) needs padding entries at columns
    /// 15 and 31. NaN and ∞ there must not reach MACKO's y; dense, which multiplies the stored
    /// zeros, gives NaN.
    #[test]
    fn padding_masks_nan_and_infinity_but_dense_does_not() {
        let cols = 48;
        let mut values = vec![f16::ZERO; cols];
        values[40] = f16::from_f32(1.5);
        let dense = DenseMatrix::new(1, cols, values).unwrap();
        let macko = MackoMatrix::from_dense(&dense).unwrap();
        let padding: Vec<usize> = macko
            .row_entries(0)
            .filter(|(_, v)| *v == f16::ZERO)
            .map(|(c, _)| c)
            .collect();
        assert_eq!(
            padding,
            [15, 31],
            "the matrix must have the padding this test is about"
        );
        for quant in quantizations() {
            let qm = QuantMackoMatrix::quantize(&macko, quant).unwrap();
            let qd = QuantDenseMatrix::quantize(&dense, quant).unwrap();
            for batch in BATCHES {
                let mut x = vec![f16::ONE; cols * batch];
                for b in 0..batch {
                    x[b * cols + 15] = f16::NAN;
                    x[b * cols + 31] = if b % 2 == 0 {
                        f16::INFINITY
                    } else {
                        f16::NEG_INFINITY
                    };
                    x[b * cols + 40] = f16::from_f32(b as f32 - 2.0);
                }
                // The one term, `scale · q · x`, rounded once to f32.
                let stored = qm.values().value(2, 0);
                let out = run_macko(&qm, &x, batch);
                for (b, &y) in out.iter().enumerate() {
                    let want = (stored * (b as f64 - 2.0)) as f32;
                    assert_eq!(y, want, "MACKO {quant:?}, vector {b}");
                }
                let out = run_dense(&qd, &x, batch);
                assert!(out.iter().all(|y| y.is_nan()), "dense {quant:?}: {out:?}");
            }
        }
    }

    /// Empty rows (and a matrix with no columns) sum to +0.0, not −0.0 or the buffer's old
    /// contents.
    #[test]
    fn empty_rows_give_positive_zero() {
        let (rows, cols) = (6, 37);
        let mut values = vec![f16::ZERO; rows * cols];
        values[2 * cols + 5] = f16::from_f32(-2.0);
        let dense = DenseMatrix::new(rows, cols, values).unwrap();
        let macko = MackoMatrix::from_dense(&dense).unwrap();
        for quant in quantizations() {
            let qm = QuantMackoMatrix::quantize(&macko, quant).unwrap();
            let qd = QuantDenseMatrix::quantize(&dense, quant).unwrap();
            // Row 2's one term, `scale · q · (−1)`, exact in f32.
            let stored = -qd.value(2, 5) as f32;
            for batch in BATCHES {
                // Negative x: a dense zero times it is −0.0, which must not survive the sum.
                let x = vec![f16::from_f32(-1.0); cols * batch];
                for (layout, out) in [
                    ("MACKO", run_macko(&qm, &x, batch)),
                    ("dense", run_dense(&qd, &x, batch)),
                ] {
                    for (k, &y) in out.iter().enumerate() {
                        let want = if k % rows == 2 { stored } else { 0.0 };
                        assert_eq!(y.to_bits(), want.to_bits(), "{layout} {quant:?} [{k}]");
                    }
                }
            }
            let empty = QuantMackoMatrix::quantize(
                &MackoMatrix::from_dense(&DenseMatrix::zeros(3, 0).unwrap()).unwrap(),
                quant,
            )
            .unwrap();
            let out = run_macko(&empty, &[], 2);
            assert!(out.iter().all(|y| y.to_bits() == 0), "{quant:?}: {out:?}");
            let empty =
                QuantDenseMatrix::quantize(&DenseMatrix::zeros(3, 0).unwrap(), quant).unwrap();
            let out = run_dense(&empty, &[], 2);
            assert!(out.iter().all(|y| y.to_bits() == 0), "{quant:?}: {out:?}");
        }
    }

    /// A scale of 0 (valid in a file, even over non-zero codes) makes its values zero: MACKO
    /// skips them even where x is ∞, dense multiplies them (0 · ∞ = NaN).
    #[test]
    fn a_zero_scale_masks_its_values_in_macko() {
        let (rows, cols) = (3, 24);
        let dense = DenseMatrix::new(
            rows,
            cols,
            (0..rows * cols)
                .map(|k| f16::from_f32((k % 7) as f32 + 1.0))
                .collect(),
        )
        .unwrap();
        let macko = MackoMatrix::from_dense(&dense).unwrap();
        for bits in [QuantBits::Int8, QuantBits::Int4] {
            let quant = Quantization {
                bits,
                scales: ScaleLayout::PerRow,
            };
            let qm = QuantMackoMatrix::quantize(&macko, quant).unwrap();
            let (row_ptr, codes, values) = qm.into_parts();
            let (q, mut scales) = values.into_parts();
            scales[1] = f16::ZERO;
            let qm =
                QuantMackoMatrix::from_parts(quant, rows, cols, row_ptr, codes, q, scales.clone())
                    .unwrap();
            let qd = QuantDenseMatrix::quantize(&dense, quant).unwrap();
            let (q, _) = qd.into_values().into_parts();
            let qd = QuantDenseMatrix::from_parts(quant, rows, cols, q, scales).unwrap();
            for batch in BATCHES {
                let mut x = random_x(cols, batch, &mut StdRng::seed_from_u64(batch as u64));
                x[cols * (batch - 1) + 9] = f16::INFINITY;
                let out = run_macko(&qm, &x, batch);
                check("MACKO", rows, cols, &x, batch, &out, |x| {
                    spmv_macko_quant(&qm, x).unwrap()
                });
                for b in 0..batch {
                    assert_eq!(out[b * rows + 1].to_bits(), 0, "MACKO {bits:?} vector {b}");
                }
                let out = run_dense(&qd, &x, batch);
                check("dense", rows, cols, &x, batch, &out, |x| {
                    spmv_dense_quant(&qd, x).unwrap()
                });
                assert!(out[(batch - 1) * rows + 1].is_nan(), "dense {bits:?}");
            }
        }
    }
}

//! The CPU backend: the same products as the GPUs, multi-threaded over rows with rayon, f32
//! accumulation. MACKO codes are decoded a 32-bit word (8 codes) at a time: the 8 nibbles are
//! spread into bytes and prefix-summed with one multiplication, so the 8 columns of a group are
//! known at once instead of through a chain of dependent additions.
//!
//! A binary16 MACKO matrix dense enough that a bitmap per 8 columns is smaller than its codes
//! is stored in that layout instead (bitmap.rs, [`CpuLayout`]): x is then read densely, never
//! gathered, which is what bounded the MACKO loops here.

use half::f16;
use half::slice::HalfFloatSliceExt;
use macko_format::{code_at, CsrMatrix, MackoMatrix, SparseVector, GROUP};
use rayon::prelude::*;

use super::{Backend, BackendKind, DeviceInfo, HostVector, MatrixRef, Precision, SparseInput};
use crate::error::Result;

mod avx2;
mod batch;
mod batch_avx2;
mod bitmap;
mod bitmap_avx2;
#[cfg(test)]
mod bitmap_tests;
mod decode;
mod quant;
mod quant_avx2;
mod sparse24;
#[cfg(target_arch = "x86_64")]
mod sparse24_avx2;
mod sparse_inputs;
mod storage;

use bitmap::{BitmapMatrix, BLOCK};
use decode::{column_steps, term, widen1, widen8};
use storage::{CpuData, CpuQuant, CpuStored, ROWS_PER_TASK};
pub(crate) use storage::{CpuSparseVector, CpuVector};

/// How the CPU multiplies one matrix, chosen once at upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuPlan {
    /// The AVX2 group loop (gathers with 32-bit offsets, so only below 2³¹ columns), bitmap
    /// row and dense row, else the portable loops.
    pub avx2: bool,
    /// What the CPU stores for the matrix (see [`CpuLayout::for_macko`]).
    pub layout: CpuLayout,
}

/// What the CPU stores for a matrix: a copy of its arrays, or, for a binary16 MACKO matrix, a
/// bitmap layout derived from them at upload and stored instead of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuLayout {
    /// The uploaded arrays as they are (every format; MACKO below the bitmap's density).
    AsUploaded,
    /// Per row, a mask byte per 8 columns and the non-zero values packed in column order
    /// (`src/backend/cpu/bitmap.rs`): x is read densely, never gathered.
    Bitmap,
}

impl CpuLayout {
    /// The layout of a binary16 MACKO matrix of `cols` columns and stored density `density`
    /// (its entries, padding included, over rows × cols): the bitmap wherever it is at most
    /// [`BITMAP_SIZE_SLACK`] larger than the MACKO arrays it replaces, whatever the rows hold,
    /// and MACKO's arrays elsewhere.
    ///
    /// Per column, MACKO stores 2.5·d bytes (a value and a code per entry) and the bitmap at
    /// most m + 2·d (m = ⌈cols / 8⌉ / cols mask bytes, the kept values at most the entries):
    /// m + 2·d ≤ (1 + s)·2.5·d from d = m / (2.5·(1 + s) − 2), 0.2 when cols is a multiple of 8
    /// (0.25 with no slack). The bound is a worst case: padding is not kept, so at a nominal
    /// d = 0.2 the bitmap is 2 % larger, not 5 %.
    ///
    /// Measured on the 2-core AMD EPYC VM (11008×4096, BENCHMARKS.md "CPU products at a
    /// realistic size", `layout_timings` in bitmap_tests.rs): for one vector the bitmap is
    /// 2–5× faster than MACKO's gather loop from d = 0.25 to 0.7, and as fast as the dense
    /// product or faster up to d = 0.5. At d = 0.2 it is 1.8–1.9× faster than the gather loop,
    /// which there is no faster than the dense product (0.98× its time one day, 1.34× another):
    /// worth 2 % of memory. At d = 0.1 the bitmap would be 6 % larger and the gather loop
    /// already beats dense (0.64–0.91× its time), so memory decides there. What the bitmap
    /// costs is few-token speed: at B = 4 its rows are 1.1–1.6× slower than MACKO's
    /// hand-vectorised ones (still faster than dense), at B = 8 about as fast from d = 0.3.
    pub fn for_macko(density: f64, cols: usize) -> Self {
        let mask_bytes = cols.div_ceil(BLOCK) as f64 / cols.max(1) as f64;
        let threshold = mask_bytes / (2.5 * (1.0 + BITMAP_SIZE_SLACK) - 2.0);
        if cols > 0 && density >= threshold {
            CpuLayout::Bitmap
        } else {
            CpuLayout::AsUploaded
        }
    }
}

/// How much larger than a MACKO matrix's arrays its bitmap layout may be and still be chosen
/// ([`CpuLayout::for_macko`]): 5 %, which moves the threshold from a stored density of 0.25 to
/// 0.2, where the bitmap is 1.8× faster for one vector.
pub const BITMAP_SIZE_SLACK: f64 = 0.05;

/// A matrix "on" the CPU: a copy of the validated host arrays, and its plan.
pub(crate) struct CpuMatrix {
    data: CpuStored,
    plan: CpuPlan,
}

/// The CPU backend (always available).
#[derive(Debug)]
pub struct CpuBackend {
    /// Whether the AVX2/FMA/F16C group loop can run here (detected once).
    avx2: bool,
    /// The layout of every binary16 MACKO matrix instead of [`CpuLayout::for_macko`]'s: the
    /// unit tests run both layouts on the same matrices.
    forced_layout: Option<CpuLayout>,
}

impl Default for CpuBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl CpuBackend {
    /// The CPU backend, using rayon's global thread pool and the widest group loop this CPU
    /// supports.
    pub fn new() -> Self {
        Self {
            avx2: avx2::supported(),
            forced_layout: None,
        }
    }
}

impl CpuBackend {
    /// The plan of a matrix: a pure function of its kind, shape and stored density, and of
    /// the CPU.
    pub fn plan_for(&self, m: MatrixRef<'_>) -> CpuPlan {
        let (rows, cols) = m.shape();
        let layout = match m {
            MatrixRef::Macko(m) => self.forced_layout.unwrap_or_else(|| {
                let cells = (rows as f64 * cols as f64).max(1.0);
                CpuLayout::for_macko(m.entries() as f64 / cells, cols)
            }),
            _ => CpuLayout::AsUploaded,
        };
        CpuPlan {
            avx2: self.avx2 && cols < i32::MAX as usize,
            layout,
        }
    }
}

impl Backend for CpuBackend {
    type Matrix = CpuMatrix;
    type Vector = CpuVector;
    type Plan = CpuPlan;
    type SparseVector = CpuSparseVector;

    fn info(&self) -> DeviceInfo {
        let threads = rayon::current_num_threads();
        let features = cpu_features();
        DeviceInfo {
            backend: BackendKind::Cpu,
            name: format!("{} ({threads} threads)", std::env::consts::ARCH),
            properties: vec![
                ("threads".into(), threads.to_string()),
                ("f16 conversion".into(), features),
                (
                    "MACKO layout".into(),
                    "bitmap per 8 columns from a stored density of 0.2, else gap codes".into(),
                ),
                (
                    "MACKO group loop".into(),
                    if self.avx2 {
                        "AVX2 gather + FMA"
                    } else {
                        "portable"
                    }
                    .into(),
                ),
            ],
        }
    }

    fn upload_matrix(&self, m: MatrixRef<'_>) -> Result<CpuMatrix> {
        let plan = self.plan_for(m);
        let data = match m {
            MatrixRef::Macko(m) if plan.layout == CpuLayout::Bitmap => {
                CpuStored::Plain(CpuData::Bitmap(BitmapMatrix::from_macko(m)))
            }
            MatrixRef::Macko(m) => CpuStored::Plain(CpuData::Macko(m.clone())),
            MatrixRef::Csr(m) => CpuStored::Plain(CpuData::Csr(m.clone())),
            MatrixRef::Dense(m) => CpuStored::Plain(CpuData::Dense(m.clone())),
            MatrixRef::MackoQuant(m) => CpuStored::Quant(CpuQuant::Macko(m.clone())),
            MatrixRef::DenseQuant(m) => CpuStored::Quant(CpuQuant::Dense(m.clone())),
            MatrixRef::Sparse24(m) => CpuStored::Sparse24(m.clone()),
            MatrixRef::HomogeneousCsr(m) => CpuStored::HomogeneousCsr(m.clone()),
        };
        Ok(CpuMatrix { data, plan })
    }

    fn upload_vector(&self, x: &[f16]) -> Result<CpuVector> {
        Ok(CpuVector::F16(x.to_vec()))
    }

    fn alloc_vector(&self, len: usize, precision: Precision) -> Result<CpuVector> {
        Ok(match precision {
            Precision::F16 => CpuVector::F16(vec![f16::ZERO; len]),
            Precision::F32 => CpuVector::F32(vec![0.0; len]),
        })
    }

    fn multiply(
        &self,
        a: &CpuMatrix,
        x: &CpuVector,
        y: &mut CpuVector,
        batch: usize,
    ) -> Result<()> {
        match &a.data {
            CpuStored::Plain(data) if batch == 1 => return spmv(data, a.plan, x, y),
            CpuStored::Plain(data) => {
                let x = f16_elements(x)?;
                for chunk in super::chunks(batch) {
                    batch::multiply_chunk(data, a.plan.avx2, data.shape(), x, chunk, y);
                }
            }
            CpuStored::Quant(q) => {
                let x = f16_elements(x)?;
                quant_product(q, a.data.shape().0, x, (batch, a.plan.avx2), y)
            }
            CpuStored::Sparse24(m) => {
                let x = f16_elements(x)?;
                let mut sums = vec![0.0f32; m.rows() * batch];
                sparse24::spmm_sparse24(m, x, batch, a.plan.avx2, &mut sums);
                store_sums(&sums, y);
            }
            CpuStored::HomogeneousCsr(m) => {
                let x = f16_elements(x)?;
                store_sums(&sparse_inputs::spmm_homogeneous(m, x, batch), y);
            }
        }
        Ok(())
    }

    fn upload_sparse_vector(&self, x: &SparseVector) -> Result<CpuSparseVector> {
        Ok(CpuSparseVector {
            len: x.len(),
            entries: x
                .entries()
                .filter(|(_, v)| !macko_format::is_zero(*v))
                .map(|(i, v)| (i, decode::widen1(v)))
                .collect(),
        })
    }

    fn multiply_sparse_x(
        &self,
        a: &CpuMatrix,
        x: &CpuSparseVector,
        y: &mut CpuVector,
    ) -> Result<()> {
        debug_assert_eq!(x.len, a.data.shape().1, "checked by Device");
        store_sums(&sparse_inputs::sparse_x(&a.data, x), y);
        Ok(())
    }

    fn multiply_transposed(
        &self,
        a: &CpuMatrix,
        x: SparseInput<'_, CpuVector, CpuSparseVector>,
        y: &mut CpuVector,
    ) -> Result<()> {
        let sums = match x {
            SparseInput::Dense(x) => {
                let selected = sparse_inputs::selected_rows(f16_elements(x)?);
                sparse_inputs::transposed(&a.data, &selected)
            }
            SparseInput::Sparse(x) => sparse_inputs::transposed(&a.data, &x.entries),
        };
        store_sums(&sums, y);
        Ok(())
    }

    fn plan(&self, a: &CpuMatrix) -> Result<CpuPlan> {
        Ok(a.plan)
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    fn download(&self, v: &CpuVector) -> Result<HostVector> {
        Ok(match v {
            CpuVector::F16(v) => HostVector::F16(v.clone()),
            CpuVector::F32(v) => HostVector::F32(v.clone()),
        })
    }

    fn stream_read(&self, bytes: u64, warmup: usize, iters: usize) -> Result<Option<Vec<f64>>> {
        stream_read(bytes, warmup, iters).map(Some)
    }
}

/// The elements of a product's x, which `Device` keeps binary16.
fn f16_elements(x: &CpuVector) -> Result<&[f16]> {
    match x {
        CpuVector::F16(x) => Ok(x),
        CpuVector::F32(_) => Err(crate::Error::Backend {
            backend: BackendKind::Cpu,
            message: "internal: a product's x must be f16".into(),
        }),
    }
}

/// Y = A·X for a matrix with quantized values, all `batch` vectors in one pass (`quant.rs`),
/// the f32 sums then stored in y's precision.
fn quant_product(
    q: &CpuQuant,
    rows: usize,
    x: &[f16],
    (batch, avx2): (usize, bool),
    y: &mut CpuVector,
) {
    let mut sums = vec![0.0f32; rows * batch];
    match q {
        CpuQuant::Macko(m) => quant::spmm_macko_quant(m, x, batch, avx2, &mut sums),
        CpuQuant::Dense(m) => quant::spmm_dense_quant(m, x, batch, avx2, &mut sums),
    }
    store_sums(&sums, y);
}

/// The f32 sums of a one-pass product ([batch][rows]) stored in y's precision, rounded once.
fn store_sums(sums: &[f32], y: &mut CpuVector) {
    match y {
        CpuVector::F16(y) => y
            .par_iter_mut()
            .zip(sums.par_iter())
            .with_min_len(ROWS_PER_TASK)
            .for_each(|(out, s)| *out = f16::from_f32(*s)),
        CpuVector::F32(y) => y.copy_from_slice(sums),
    }
}

/// y = A·x for one vector, row by row.
fn spmv(data: &CpuData, plan: CpuPlan, x: &CpuVector, y: &mut CpuVector) -> Result<()> {
    let mut x = match x {
        CpuVector::F16(x) => widen(x),
        CpuVector::F32(x) => x.clone(),
    };
    if let CpuData::Bitmap(m) = data {
        // The bitmap row loads x 8 columns at a time: whole blocks, the last one padded.
        x.resize(m.blocks() * BLOCK, 0.0);
    }
    // Whether x is finite is known only now: a product with NaN/∞ in x masks padding.
    let finite = x.iter().all(|v| v.is_finite());
    let avx2 = plan.avx2;
    let row = |r: usize| match (data, finite) {
        (CpuData::Macko(m), true) => macko_row::<false>(m, r, &x, avx2),
        (CpuData::Macko(m), false) => macko_row::<true>(m, r, &x, avx2),
        (CpuData::Bitmap(m), _) => bitmap_row(m, r, &x, avx2, finite),
        (CpuData::Csr(m), true) => csr_row::<false>(m, r, &x),
        (CpuData::Csr(m), false) => csr_row::<true>(m, r, &x),
        (CpuData::Dense(m), _) => {
            #[cfg(target_arch = "x86_64")]
            if avx2 {
                // SAFETY: the plan's `avx2` is `avx2::supported()`; row and x both have `cols`
                // elements (checked by `Device::spmv`).
                return unsafe { avx2::dense_row(m.row(r), &x) };
            }
            dense_row(m.row(r), &x)
        }
    };
    match y {
        CpuVector::F16(y) => y
            .par_iter_mut()
            .enumerate()
            .with_min_len(ROWS_PER_TASK)
            .for_each(|(r, out)| *out = f16::from_f32(row(r))),
        CpuVector::F32(y) => y
            .par_iter_mut()
            .enumerate()
            .with_min_len(ROWS_PER_TASK)
            .for_each(|(r, out)| *out = row(r)),
    }
    Ok(())
}

/// Copies of the streamed buffer are rotated until they total this much, like the benchmark's
/// matrices, so the ceiling and the products read from the same level of the memory hierarchy.
const STREAM_ROTATION_BYTES: u64 = 256 << 20;

/// Words one rayon task of the streaming read sums: 128 KiB, tasks as fine as the products'
/// (32 rows, 64 KiB of a 1024-column dense matrix), so that when another process takes a core
/// mid-pass the other thread steals the rest, as it does in a product.
const STREAM_TASK_WORDS: usize = 1 << 14;

/// Independent running sums of one task (four AVX2 registers of four u64): with a single sum
/// each add waits for the previous one, and one core then summed ~19 GB/s, below what the
/// dense product reads; with 16 the loop is bound by loads, as a ceiling must be.
const STREAM_LANES: usize = 16;

/// The CPU's ceiling: seconds per pass of a multi-threaded sum over `bytes` bytes (as u64
/// words), cycling through copies like the benchmark cycles through matrices. The sum is kept
/// (`black_box`) so the reads cannot be optimised away.
fn stream_read(bytes: u64, warmup: usize, iters: usize) -> Result<Vec<f64>> {
    let words = bytes.div_ceil(8).max(1);
    let copies = STREAM_ROTATION_BYTES.div_ceil(words * 8).clamp(1, 8);
    let buffer = stream_buffer(bytes, words, copies)?;
    let words = words as usize;
    let mut times = Vec::with_capacity(iters);
    for i in 0..warmup + iters {
        let copy = &buffer[(i % copies as usize) * words..][..words];
        let start = std::time::Instant::now();
        let sum = copy
            .par_chunks(STREAM_TASK_WORDS)
            .map(sum_words)
            .reduce(|| 0, u64::wrapping_add);
        std::hint::black_box(sum);
        if i >= warmup {
            times.push(start.elapsed().as_secs_f64());
        }
    }
    Ok(times)
}

/// `copies` copies of `words` u64 words, back to back, filled with distinct values.
fn stream_buffer(bytes: u64, words: u64, copies: u64) -> Result<Vec<u64>> {
    let total = words
        .checked_mul(copies)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or(crate::Error::TooLarge {
            backend: BackendKind::Cpu,
            what: "streaming-read buffer".into(),
            needed: bytes.saturating_mul(copies),
            limit: usize::MAX as u64,
        })?;
    let mut buffer: Vec<u64> = Vec::new();
    buffer
        .try_reserve_exact(total)
        .map_err(|_| crate::Error::OutOfMemory {
            backend: BackendKind::Cpu,
            bytes: total as u64 * 8,
            what: "streaming-read buffer".into(),
        })?;
    buffer.extend((0..total as u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)));
    Ok(buffer)
}

/// The wrapping sum of `words` in [`STREAM_LANES`] independent lanes (vectorised by the
/// compiler), the tail added to the first.
fn sum_words(words: &[u64]) -> u64 {
    let mut lanes = [0u64; STREAM_LANES];
    let mut blocks = words.chunks_exact(STREAM_LANES);
    for block in &mut blocks {
        for (lane, w) in lanes.iter_mut().zip(block) {
            *lane = lane.wrapping_add(*w);
        }
    }
    let tail = blocks
        .remainder()
        .iter()
        .fold(0u64, |a, &w| a.wrapping_add(w));
    lanes.iter().fold(tail, |a, &l| a.wrapping_add(l))
}

fn cpu_features() -> String {
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    {
        if std::arch::is_x86_feature_detected!("f16c") {
            return "F16C".into();
        }
    }
    "software".into()
}

/// x widened once per product, so the inner loops gather f32.
fn widen(x: &[f16]) -> Vec<f32> {
    let mut out = vec![0.0f32; x.len()];
    x.convert_to_f32_slice(&mut out);
    out
}

/// Row `r` of a MACKO product: scalar head and tail where the row starts or ends inside a group
/// of 8, whole groups (one u32 of codes, 8 values) in between.
fn macko_row<const MASK: bool>(m: &MackoMatrix, r: usize, x: &[f32], avx2: bool) -> f32 {
    let (values, codes) = (m.values(), m.codes());
    let range = m.row_range(r);
    let (mut i, end) = (range.start, range.end);
    let mut next = 0usize; // the column after the previous entry
    let mut acc = 0.0f32;
    let scalar = |i: usize, next: &mut usize, acc: &mut f32| {
        let c = *next + code_at(codes, i) as usize;
        *acc += term::<MASK>(widen1(values[i]), x[c]);
        *next = c + 1;
    };
    while i < end && i % GROUP != 0 {
        scalar(i, &mut next, &mut acc);
        i += 1;
    }
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        // SAFETY: `avx2` is `avx2::supported()`; the matrix is validated and spmv checked
        // x.len() == cols < i32::MAX.
        acc += unsafe { avx2::groups::<MASK>(values, codes, &mut i, end, &mut next, x) };
    }
    let mut lanes = [0.0f32; GROUP];
    while i + GROUP <= end {
        let w = u32::from_le_bytes([
            codes[i / 2],
            codes[i / 2 + 1],
            codes[i / 2 + 2],
            codes[i / 2 + 3],
        ]);
        let steps = column_steps(w);
        let mut xs = [0.0f32; GROUP];
        for (j, xj) in xs.iter_mut().enumerate() {
            *xj = x[next + ((steps >> (8 * j)) & 0xff) as usize - 1];
        }
        let v = widen8(&values[i..i + GROUP]);
        for j in 0..GROUP {
            lanes[j] += term::<MASK>(v[j], xs[j]);
        }
        next += (steps >> 56) as usize;
        i += GROUP;
    }
    while i < end {
        scalar(i, &mut next, &mut acc);
        i += 1;
    }
    acc + lanes.iter().sum::<f32>()
}

/// Row `r` of a bitmap product; `x` padded to whole blocks. With NaN/∞ in x (`!finite`), the
/// AVX2 loop masks the products of lanes without a kept entry; the portable loop multiplies
/// kept entries only, so it needs no mask.
fn bitmap_row(m: &BitmapMatrix, r: usize, x: &[f32], avx2: bool, finite: bool) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        // SAFETY: the plan's `avx2` is `avx2::supported()` (AVX2, FMA, F16C and POPCNT).
        return unsafe {
            if finite {
                bitmap_avx2::row::<false>(m, r, x)
            } else {
                bitmap_avx2::row::<true>(m, r, x)
            }
        };
    }
    let _ = finite;
    bitmap::row_portable(m, r, x)
}

fn csr_row<const MASK: bool>(m: &CsrMatrix, r: usize, x: &[f32]) -> f32 {
    m.row_range(r)
        .map(|i| term::<MASK>(widen1(m.values()[i]), x[m.col_idx()[i] as usize]))
        .sum()
}

/// Dense dot product with IEEE semantics, widened 256 elements at a time and summed in 8
/// independent lanes so the compiler vectorises it.
fn dense_row(a: &[f16], x: &[f32]) -> f32 {
    const CHUNK: usize = 256;
    let mut lanes = [0.0f32; 8];
    let mut buf = [0.0f32; CHUNK];
    for (a, x) in a.chunks(CHUNK).zip(x.chunks(CHUNK)) {
        let buf = &mut buf[..a.len()];
        a.convert_to_f32_slice(buf);
        let mut pa = buf.chunks_exact(8);
        let mut px = x.chunks_exact(8);
        for (a8, x8) in (&mut pa).zip(&mut px) {
            for j in 0..8 {
                lanes[j] += a8[j] * x8[j];
            }
        }
        for (a, x) in pa.remainder().iter().zip(px.remainder()) {
            lanes[0] += a * x;
        }
    }
    lanes.iter().sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widen8_is_exact_for_every_f16() {
        for hi in 0..=u16::MAX / 8 {
            let h: Vec<f16> = (0..8).map(|k| f16::from_bits(hi * 8 + k)).collect();
            let w = widen8(&h);
            for (a, b) in h.iter().zip(w) {
                let want = a.to_f32();
                assert!(
                    want.to_bits() == b.to_bits() || (want.is_nan() && b.is_nan()),
                    "{:#06x}: {want} vs {b}",
                    a.to_bits()
                );
            }
        }
    }

    #[test]
    fn stream_sum_is_the_wrapping_sum_of_every_word() {
        for n in [0usize, 1, 15, 16, 17, 100, 1000] {
            let words: Vec<u64> = (0..n as u64)
                .map(|i| i.wrapping_mul(u64::MAX / 3))
                .collect();
            let want = words.iter().fold(0u64, |a, &w| a.wrapping_add(w));
            assert_eq!(sum_words(&words), want, "{n} words");
        }
    }

    #[test]
    fn column_steps_are_prefix_sums_of_gaps_plus_one() {
        let gaps = [0u32, 15, 3, 0, 7, 15, 15, 1];
        let w = gaps
            .iter()
            .enumerate()
            .fold(0u32, |w, (j, g)| w | (g << (4 * j)));
        let steps = column_steps(w);
        let mut sum = 0u64;
        for (j, g) in gaps.iter().enumerate() {
            sum += *g as u64 + 1;
            assert_eq!((steps >> (8 * j)) & 0xff, sum, "byte {j}");
        }
    }
}

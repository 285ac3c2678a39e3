//! 2:4 structured sparsity on CUDA (kernels/sparse24.cu, kernels/sparse24_mma.cu;
//! kernels/README.md, "2:4 structured sparsity"): the upload, either into the row-aligned layout
//! both GPU backends read (`backend::sparse24_rows`, CUDA-core kernels) or into tiles for the
//! sparse tensor cores (`sparse24_tiles`, `mma.sp`), the kernels (compiled and loaded on the
//! first 2:4 upload, so that opening the backend pays nothing for them) and their launches. One
//! vector or chunks of up to 16 (`backend::chunks`), X read as it is ([batch][cols]), so a
//! few-token product needs no XT.

use std::sync::{Arc, Mutex};

use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use macko_format::Sparse24Matrix;

use super::caps::{Width, BLOCK};

/// Threads per block of the tensor-core kernels (`S24M_BLOCK` in kernels/sparse24_mma.cu).
const S24M_BLOCK: u32 = 256;
/// Tiles of 16 rows per band of a block of the tensor-core kernels (`S24M_MT`).
const S24M_TILES: u32 = 2;
use super::errors::{cuda_error, internal};
use super::kernels::{allow_large_smem, load_module, ByOutput};
use super::launch::Output;
use super::memory::{dim, DeviceArray};
use super::nvrtc;
use super::sparse24_tiles::{quads, sparse24_tiles, tiles};
use super::tuning::{CudaTuning, XPlace};
use crate::backend::sparse24_rows::{sparse24_rows, sparse24_words, WORD_GROUPS};
use crate::error::Result;

/// How a kernel reads x: 16-byte words (`xv`: every vector starts on a 16-byte boundary), one
/// half per live entry (`xh`), or (single vector) 16-byte words of a copy in shared memory
/// (`xs`), in the order of [`Sparse24Kernels::spmv`]'s inner arrays.
const X_PLACES: [&str; 3] = ["xv", "xh", "xs"];

/// Index of `xs` in [`X_PLACES`].
const X_STAGED: usize = 2;

/// The kernels of kernels/sparse24.cu, both output precisions of each.
pub(crate) struct Sparse24Kernels {
    /// `sparse24_spmv_{xv,xh,xs}_*`, by [`X_PLACES`].
    spmv: [ByOutput; 3],
    /// `sparse24_batch_{xv,xh}_w{2,4,8,16}_*`, by x place and [`Width::index`].
    batch: [[ByOutput; 4]; 2],
    /// Dynamic shared memory the `xs` kernels may use (bytes).
    smem_limit: u32,
    /// `sparse24_mma_n{1,2}_{p,h}_*` by [n-tiles − 1][x in pairs: 0, in halves: 1]; `None`
    /// where the GPU has no sparse tensor cores.
    mma: Option<[[ByOutput; 2]; 2]>,
}

impl Sparse24Kernels {
    /// Compiles (once per process, or loaded from the on-disk kernel cache) and loads
    /// kernels/sparse24.cu for `arch` into `ctx`, letting the `xs` kernels use up to
    /// `smem_optin` bytes of dynamic shared memory, and kernels/sparse24_mma.cu where the GPU
    /// has `tensor_cores`.
    pub fn load(
        ctx: &Arc<CudaContext>,
        arch: &str,
        smem_optin: u32,
        tensor_cores: bool,
    ) -> Result<Self> {
        let module = load_module(ctx, &nvrtc::SPARSE24, arch)?;
        let pair = |stem: String| by_output(&module, &stem);
        let mma = if tensor_cores {
            let module = load_module(ctx, &nvrtc::SPARSE24_MMA, arch)?;
            let pair = |nt: u32, x: &str| by_output(&module, &format!("sparse24_mma_n{nt}_{x}"));
            let by_x = |nt| -> Result<[ByOutput; 2]> { Ok([pair(nt, "p")?, pair(nt, "h")?]) };
            Some([by_x(1)?, by_x(2)?])
        } else {
            None
        };
        let spmv = |x: &str| pair(format!("sparse24_spmv_{x}"));
        let batch = |x: &str| -> Result<[ByOutput; 4]> {
            let w = |w: Width| pair(format!("sparse24_batch_{x}_w{}", w.lanes()));
            Ok([w(Width::W2)?, w(Width::W4)?, w(Width::W8)?, w(Width::W16)?])
        };
        let spmv = [
            spmv(X_PLACES[0])?,
            spmv(X_PLACES[1])?,
            spmv(X_PLACES[X_STAGED])?,
        ];
        let smem_limit = allow_large_smem(&spmv[X_STAGED], smem_optin)?;
        Ok(Self {
            spmv,
            batch: [batch(X_PLACES[0])?, batch(X_PLACES[1])?],
            smem_limit,
            mma,
        })
    }
}

/// Kernels `{stem}_f16` and `{stem}_f32` of `module`.
fn by_output(module: &Arc<CudaModule>, stem: &str) -> Result<ByOutput> {
    let function = |name: String| -> Result<CudaFunction> {
        module
            .load_function(&name)
            .map_err(|e| cuda_error(&format!("finding kernel {name}"), e))
    };
    Ok(ByOutput {
        f16: function(format!("{stem}_f16"))?,
        f32: function(format!("{stem}_f32"))?,
    })
}

/// The kernels once loaded (`CudaBackend::sparse24_kernels`).
#[derive(Default)]
pub(crate) struct Sparse24Cache(Mutex<Option<Arc<Sparse24Kernels>>>);

impl Sparse24Cache {
    /// The kernels, loading them (`load`) the first time.
    pub fn get(
        &self,
        load: impl FnOnce() -> Result<Sparse24Kernels>,
    ) -> Result<Arc<Sparse24Kernels>> {
        let mut slot = self
            .0
            .lock()
            .map_err(|_| internal("the 2:4 kernel lock is poisoned"))?;
        if let Some(k) = slot.as_ref() {
            return Ok(k.clone());
        }
        let k = Arc::new(load()?);
        *slot = Some(k.clone());
        Ok(k)
    }
}

/// A 2:4 matrix on the device.
pub(crate) struct Sparse24Dev {
    pub rows: u32,
    pub cols: u32,
    storage: Storage,
    kernels: Arc<Sparse24Kernels>,
}

/// The two device layouts of a 2:4 matrix.
enum Storage {
    /// Rows for the CUDA-core kernels (kernels/sparse24.cu).
    Rows(RowsDev),
    /// Tiles for the sparse tensor cores (kernels/sparse24_mma.cu).
    Tiles(TilesDev),
}

/// A 2:4 matrix in the layout of `backend::sparse24_rows`.
struct RowsDev {
    /// Words of 8 groups per stored row.
    words: u32,
    /// log2 of the lanes a row takes: the smallest power of two covering its words, at most 32.
    lanes_log2: u32,
    /// Blocks of `BLOCK` threads of the single-vector kernel: those that fit the GPU at once,
    /// rows by stride (measured: 69 → 73 % of the ceiling on an H200 against every row at
    /// once, which left a partial last wave), at most every row at once.
    grid: u32,
    /// Blocks of the few-token kernels: every row at once.
    batch_grid: u32,
    /// Bytes of x the single-vector kernel stages in shared memory (0: it reads x from global
    /// memory).
    x_smem: u32,
    /// Every vector of x starts on a 16-byte boundary (cols % 8 == 0: the allocation is
    /// aligned, and `interop::CudaPointers` requires 16-byte aligned pointers), so the `xv`
    /// kernels may read it in 16-byte words.
    x_words: bool,
    /// Two 16-byte words of values per word of groups, as u32 (binary16 pairs).
    values: DeviceArray<u32>,
    /// One u32 of positions per word of groups.
    positions: DeviceArray<u32>,
}

/// A 2:4 matrix in the layout of `sparse24_tiles`.
struct TilesDev {
    /// Tiles of 16 rows (even).
    tiles: u32,
    /// Quads of 128 columns per tile.
    quads: u32,
    values: DeviceArray<u32>,
    meta: DeviceArray<u32>,
}

/// Uploads `m` as tiles for the sparse tensor cores where the GPU has them (unless the tuning
/// forces the CUDA cores), as rows otherwise. Measured on an H200 (2026-11-29, kernels/README.md,
/// "2:4 on the sparse tensor cores"): 74.7 → 91.8 % of the ceiling for one vector (31 shapes),
/// 3.7–9.7× faster for 4–16 vectors.
pub(crate) fn upload(
    stream: &Arc<CudaStream>,
    m: &Sparse24Matrix,
    kernels: Arc<Sparse24Kernels>,
    tuning: &CudaTuning,
    sm_count: u32,
) -> Result<Sparse24Dev> {
    let (rows, cols) = (dim(m.rows(), "rows")?, dim(m.cols(), "columns")?);
    let storage = if kernels.mma.is_some() && tuning.s24_mma != Some(false) {
        Storage::Tiles(upload_tiles(stream, m)?)
    } else {
        Storage::Rows(upload_rows(stream, m, &kernels, tuning, sm_count)?)
    };
    Ok(Sparse24Dev {
        rows,
        cols,
        storage,
        kernels,
    })
}

/// Uploads `m` in the layout of `sparse24_tiles`.
fn upload_tiles(stream: &Arc<CudaStream>, m: &Sparse24Matrix) -> Result<TilesDev> {
    let (values, meta) = sparse24_tiles(m);
    let count = |n: usize, what: &str| {
        u32::try_from(n).map_err(|_| internal(&format!("2:4 {what} past 32 bits")))
    };
    Ok(TilesDev {
        tiles: count(tiles(m.rows()), "tiles")?,
        quads: count(quads(m.cols()), "quads")?,
        values: DeviceArray::upload(stream, &values, "2:4 tile values")?,
        meta: DeviceArray::upload(stream, &meta, "2:4 tile metadata")?,
    })
}

/// Uploads `m` in the layout of `backend::sparse24_rows`.
fn upload_rows(
    stream: &Arc<CudaStream>,
    m: &Sparse24Matrix,
    kernels: &Sparse24Kernels,
    tuning: &CudaTuning,
    sm_count: u32,
) -> Result<RowsDev> {
    let (rows, cols) = (dim(m.rows(), "rows")?, dim(m.cols(), "columns")?);
    let words = sparse24_words(m.cols());
    // The kernel indexes values by 2 · (row · words + k) in 64 bits; the words of a row must
    // fit u32 (they do: cols fits 31 bits).
    let words = u32::try_from(words).map_err(|_| internal("2:4 words per row past 32 bits"))?;
    let lanes = words.clamp(1, 32).next_power_of_two();
    let rows_per_block = (BLOCK / 32) * (32 / lanes);
    let (values, mut positions) = sparse24_rows(m, 0..m.rows());
    debug_assert_eq!(values.len(), m.rows() * words as usize * WORD_GROUPS);
    for p in &mut positions {
        *p = selector_word(*p);
    }
    let x_words = cols % 8 == 0;
    let x_bytes = cols.saturating_mul(2);
    let stage = x_words
        && x_bytes > 0
        && x_bytes <= kernels.smem_limit
        && tuning.s24_x != Some(XPlace::Global);
    let x_smem = if stage { x_bytes } else { 0 };
    let place = if stage {
        X_STAGED
    } else {
        usize::from(!x_words)
    };
    let mut per_sm = u32::MAX;
    for f in [&kernels.spmv[place].f16, &kernels.spmv[place].f32] {
        let blocks = f
            .occupancy_max_active_blocks_per_multiprocessor(BLOCK, x_smem as usize, None)
            .map_err(|e| cuda_error("asking the 2:4 kernel's occupancy", e))?;
        per_sm = per_sm.min(blocks);
    }
    let batch_grid = rows.div_ceil(rows_per_block).max(1);
    let grid = batch_grid.min(per_sm.max(1).saturating_mul(sm_count.max(1)));
    Ok(RowsDev {
        words,
        lanes_log2: lanes.trailing_zeros(),
        grid,
        batch_grid,
        x_smem,
        x_words,
        values: DeviceArray::upload(stream, &values, "2:4 values")?,
        positions: DeviceArray::upload(stream, &positions, "2:4 positions")?,
    })
}

/// Queues Y = A·X for vectors `first .. first + count` of `x` (`[batch][cols]`) into the same
/// vectors of `y` (`[batch][rows]`), `count` ≤ 16.
pub(crate) fn launch<T: Output>(
    stream: &CudaStream,
    m: &Sparse24Dev,
    x: &DeviceArray<u16>,
    y: &mut CudaSlice<T>,
    (first, count): (u32, u32),
) -> Result<()> {
    if m.rows == 0 || count == 0 {
        return Ok(());
    }
    let end = u64::from(first) + u64::from(count);
    if (x.len() as u64) < end * u64::from(m.cols) || (y.len() as u64) < end * u64::from(m.rows) {
        return Err(internal("a 2:4 chunk past its vectors"));
    }
    if count > 16 {
        return Err(internal("a 2:4 chunk wider than 16 vectors"));
    }
    match &m.storage {
        Storage::Rows(r) => launch_rows(stream, m, r, x, y, (first, count)),
        Storage::Tiles(t) => launch_tiles(stream, m, t, x, y, (first, count)),
    }
}

/// Queues a chunk on the sparse tensor cores (`launch`'s checks done).
fn launch_tiles<T: Output>(
    stream: &CudaStream,
    m: &Sparse24Dev,
    t: &TilesDev,
    x: &DeviceArray<u16>,
    y: &mut CudaSlice<T>,
    (first, count): (u32, u32),
) -> Result<()> {
    let kernels = m
        .kernels
        .mma
        .as_ref()
        .ok_or_else(|| internal("2:4 tiles without tensor-core kernels"))?;
    let nt = count.div_ceil(8);
    let pairs = usize::from(m.cols % 2 != 0);
    let f = kernels[nt as usize - 1][pairs].pick(T::PRECISION);
    let mut args = stream.launch_builder(f);
    args.arg(t.values.buf())
        .arg(t.meta.buf())
        .arg(x.buf())
        .arg(y)
        .arg(&m.rows)
        .arg(&m.cols)
        .arg(&t.tiles)
        .arg(&t.quads)
        .arg(&first)
        .arg(&count);
    let cfg = LaunchConfig {
        grid_dim: ((t.tiles / S24M_TILES).max(1), 1, 1),
        block_dim: (S24M_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the arguments match `sparse24_mma_*` of kernels/sparse24_mma.cu in order and type
    // (vals, meta, x, y, rows, cols, tiles, quads, first, count). values holds tiles · quads ·
    // 512 u32 and meta tiles · quads · 64 (`sparse24_tiles`, allocations 256-byte aligned, so
    // the kernel's 16-byte loads are aligned); tiles is even, so the bands of two tiles the
    // kernel walks (tiles / 2 of them) lie inside. x holds at least (first + count) · cols
    // halves and y (first + count) · rows elements (checked by `launch`); the kernel reads
    // vectors first .. first + count of x at columns < cols only (4-byte pairs only where cols
    // is even: the `_p` kernels) and writes rows < rows of the same vectors of y.
    unsafe { args.launch(cfg) }
        .map(|_| ())
        .map_err(|e| cuda_error("launching a 2:4 tensor-core kernel", e))
}

/// Queues a chunk on the CUDA-core kernels (`launch`'s checks done): the single-vector kernel
/// for `count == 1` (`first` 0), the few-token kernel of the chunk's width otherwise.
fn launch_rows<T: Output>(
    stream: &CudaStream,
    m: &Sparse24Dev,
    r: &RowsDev,
    x: &DeviceArray<u16>,
    y: &mut CudaSlice<T>,
    (first, count): (u32, u32),
) -> Result<()> {
    let place = usize::from(!r.x_words);
    let single = count == 1 && first == 0;
    let f = if single {
        let place = if r.x_smem > 0 { X_STAGED } else { place };
        m.kernels.spmv[place].pick(T::PRECISION)
    } else {
        let width = Width::for_count(count as usize)
            .ok_or_else(|| internal("a 2:4 chunk wider than 16 vectors"))?;
        m.kernels.batch[place][width.index()].pick(T::PRECISION)
    };
    let mut args = stream.launch_builder(f);
    args.arg(r.values.buf())
        .arg(r.positions.buf())
        .arg(x.buf())
        .arg(y)
        .arg(&m.rows)
        .arg(&m.cols)
        .arg(&r.words)
        .arg(&r.lanes_log2)
        .arg(&first)
        .arg(&count);
    let cfg = LaunchConfig {
        grid_dim: (if single { r.grid } else { r.batch_grid }, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: if single { r.x_smem } else { 0 },
    };
    // SAFETY: the arguments match `sparse24_*` of kernels/sparse24.cu in order and type (vals,
    // pos, x, y, rows, cols, words, lanes_log2, first, count). values holds rows · words · 8
    // u32 (two 16-byte words per word of groups, the allocation 256-byte aligned) and positions
    // rows · words, as `sparse24_rows` made them; the kernel reads words k < words of rows
    // < rows only. x holds at least (first + count) · cols halves and y (first + count) · rows
    // elements of the kernel's output type (checked above); the kernel reads vectors first ..
    // first + count of x at columns < cols only (16-byte words only where they start below
    // cols, with cols % 8 == 0 and 16-byte aligned vectors: `x_words`) and writes rows < rows
    // of the same vectors of y. The `xs` kernel (single vector, x_smem > 0 only where
    // x_words) copies x's cols / 8 16-byte words into x_smem = 2 · cols bytes of dynamic shared
    // memory, within the limit `allow_large_smem` set for it.
    unsafe { args.launch(cfg) }
        .map(|_| ())
        .map_err(|e| cuda_error("launching a 2:4 kernel", e))
}

/// A word's positions as the kernels read them: the format's nibble of group g (bits 4g..4g + 3,
/// the first position in the low two bits) moved so that bits 8q + 2j, 8q + 2j + 1 hold field q
/// of groups 2j and 2j + 1 (q = 0, 1 the first and second positions of group 2j, 2 and 3 those
/// of group 2j + 1): one shift and one mask then give two groups' positions one per byte, the
/// `prmt` selectors' raw material (kernels/sparse24.cu, `s24_selectors`).
fn selector_word(nibbles: u32) -> u32 {
    let mut out = 0;
    for g in 0..WORD_GROUPS as u32 {
        let (j, half) = (g / 2, g % 2);
        for p in 0..2 {
            let field = (nibbles >> (4 * g + 2 * p)) & 3;
            let q = 2 * half + p;
            out |= field << (8 * q + 2 * j);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's selector arithmetic applied to `selector_word`'s output finds every group's
    /// two positions where the format put them.
    #[test]
    fn selector_words_give_each_groups_positions() {
        let mut seed = 0x9e37_79b9_u32;
        for _ in 0..1000 {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let nibbles = seed;
            let m = selector_word(nibbles);
            for g in 0..8u32 {
                let (j, half) = (g / 2, g % 2);
                // s24_selectors, then the group's 16 bits.
                let s = ((m >> (2 * j)) & 0x0303_0303).wrapping_mul(0x22) + 0x1010_1010;
                let sel = (s >> (16 * half)) & 0xffff;
                let n = (nibbles >> (4 * g)) & 15;
                let (p0, p1) = (n & 3, n >> 2);
                assert_eq!(
                    sel & 0xff,
                    (2 * p0) | ((2 * p0 + 1) << 4),
                    "{nibbles:#x} g {g}"
                );
                assert_eq!(
                    sel >> 8,
                    (2 * p1) | ((2 * p1 + 1) << 4),
                    "{nibbles:#x} g {g}"
                );
            }
        }
    }
}

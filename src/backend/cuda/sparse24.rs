//! 2:4 structured sparsity on CUDA (kernels/sparse24.cu; kernels/README.md, "2:4 structured
//! sparsity"): the upload into the row-aligned layout both GPU backends read
//! (`backend::sparse24_rows`), the kernels (compiled and loaded on the first 2:4 upload, so that
//! opening the backend pays nothing for them) and their launches. One kernel shape for one
//! vector and for chunks of up to 16 (`backend::chunks`), X read as it is ([batch][cols]), so a
//! few-token product needs no XT.

use std::sync::{Arc, Mutex};

use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use macko_format::Sparse24Matrix;

use super::caps::{Width, BLOCK};
use super::errors::{cuda_error, internal};
use super::kernels::{load_module, ByOutput};
use super::launch::Output;
use super::memory::{dim, DeviceArray};
use super::nvrtc;
use crate::backend::sparse24_rows::{sparse24_rows, sparse24_words, WORD_GROUPS};
use crate::error::Result;

/// How a kernel reads x: 16-byte words (`xv`: every vector starts on a 16-byte boundary) or
/// one half per live entry (`xh`).
const X_PLACES: [&str; 2] = ["xv", "xh"];

/// The kernels of kernels/sparse24.cu, both output precisions of each.
pub(crate) struct Sparse24Kernels {
    /// `sparse24_spmv_{xv,xh}_*`, by x place.
    spmv: [ByOutput; 2],
    /// `sparse24_batch_{xv,xh}_w{2,4,8,16}_*`, by x place and [`Width::index`].
    batch: [[ByOutput; 4]; 2],
}

impl Sparse24Kernels {
    /// Compiles (once per process, or loaded from the on-disk kernel cache) and loads kernels/sparse24.cu for `arch` into `ctx`.
    pub fn load(ctx: &Arc<CudaContext>, arch: &str) -> Result<Self> {
        let module = load_module(ctx, &nvrtc::SPARSE24, arch)?;
        let function = |name: String| -> Result<CudaFunction> {
            module
                .load_function(&name)
                .map_err(|e| cuda_error(&format!("finding kernel {name}"), e))
        };
        let pair = |stem: String| -> Result<ByOutput> {
            Ok(ByOutput {
                f16: function(format!("{stem}_f16"))?,
                f32: function(format!("{stem}_f32"))?,
            })
        };
        let spmv = |x: &str| pair(format!("sparse24_spmv_{x}"));
        let batch = |x: &str| -> Result<[ByOutput; 4]> {
            let w = |w: Width| pair(format!("sparse24_batch_{x}_w{}", w.lanes()));
            Ok([w(Width::W2)?, w(Width::W4)?, w(Width::W8)?, w(Width::W16)?])
        };
        Ok(Self {
            spmv: [spmv(X_PLACES[0])?, spmv(X_PLACES[1])?],
            batch: [batch(X_PLACES[0])?, batch(X_PLACES[1])?],
        })
    }
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
    /// Words of 8 groups per stored row.
    words: u32,
    /// log2 of the lanes a row takes: the smallest power of two covering its words, at most 32.
    lanes_log2: u32,
    /// Blocks of `BLOCK` threads: every row of the matrix at once.
    grid: u32,
    /// Every vector of x starts on a 16-byte boundary (cols % 8 == 0: the allocation is
    /// aligned, and `interop::CudaPointers` requires 16-byte aligned pointers), so the `xv`
    /// kernels may read it in 16-byte words.
    x_words: bool,
    /// Two 16-byte words of values per word of groups, as u32 (binary16 pairs).
    values: DeviceArray<u32>,
    /// One u32 of positions per word of groups.
    positions: DeviceArray<u32>,
    kernels: Arc<Sparse24Kernels>,
}

/// Uploads `m` in the layout of `backend::sparse24_rows`.
pub(crate) fn upload(
    stream: &Arc<CudaStream>,
    m: &Sparse24Matrix,
    kernels: Arc<Sparse24Kernels>,
) -> Result<Sparse24Dev> {
    let (rows, cols) = (dim(m.rows(), "rows")?, dim(m.cols(), "columns")?);
    let words = sparse24_words(m.cols());
    // The kernel indexes values by 2 · (row · words + k) in 64 bits; the words of a row must
    // fit u32 (they do: cols fits 31 bits).
    let words = u32::try_from(words).map_err(|_| internal("2:4 words per row past 32 bits"))?;
    let lanes = words.clamp(1, 32).next_power_of_two();
    let rows_per_block = (BLOCK / 32) * (32 / lanes);
    let (values, positions) = sparse24_rows(m, 0..m.rows());
    debug_assert_eq!(values.len(), m.rows() * words as usize * WORD_GROUPS);
    Ok(Sparse24Dev {
        rows,
        cols,
        words,
        lanes_log2: lanes.trailing_zeros(),
        grid: rows.div_ceil(rows_per_block).max(1),
        x_words: cols % 8 == 0,
        values: DeviceArray::upload(stream, &values, "2:4 values")?,
        positions: DeviceArray::upload(stream, &positions, "2:4 positions")?,
        kernels,
    })
}

/// Queues Y = A·X for vectors `first .. first + count` of `x` (`[batch][cols]`) into the same
/// vectors of `y` (`[batch][rows]`): the single-vector kernel for `count == 1` (`first` 0), the
/// few-token kernel of the chunk's width otherwise (`count` ≤ 16).
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
    let place = usize::from(!m.x_words);
    let f = if count == 1 && first == 0 {
        m.kernels.spmv[place].pick(T::PRECISION)
    } else {
        let width = Width::for_count(count as usize)
            .ok_or_else(|| internal("a 2:4 chunk wider than 16 vectors"))?;
        m.kernels.batch[place][width.index()].pick(T::PRECISION)
    };
    let end = u64::from(first) + u64::from(count);
    if (x.len() as u64) < end * u64::from(m.cols) || (y.len() as u64) < end * u64::from(m.rows) {
        return Err(internal("a 2:4 chunk past its vectors"));
    }
    let mut args = stream.launch_builder(f);
    args.arg(m.values.buf())
        .arg(m.positions.buf())
        .arg(x.buf())
        .arg(y)
        .arg(&m.rows)
        .arg(&m.cols)
        .arg(&m.words)
        .arg(&m.lanes_log2)
        .arg(&first)
        .arg(&count);
    let cfg = LaunchConfig {
        grid_dim: (m.grid, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the arguments match `sparse24_*` of kernels/sparse24.cu in order and type (vals,
    // pos, x, y, rows, cols, words, lanes_log2, first, count). values holds rows · words · 8
    // u32 (two 16-byte words per word of groups, the allocation 256-byte aligned) and positions
    // rows · words, as `sparse24_rows` made them; the kernel reads words k < words of rows
    // < rows only. x holds at least (first + count) · cols halves and y (first + count) · rows
    // elements of the kernel's output type (checked above); the kernel reads vectors first ..
    // first + count of x at columns < cols only (16-byte words only where they start below
    // cols, with cols % 8 == 0 and 16-byte aligned vectors: `x_words`) and writes rows < rows
    // of the same vectors of y.
    unsafe { args.launch(cfg) }
        .map(|_| ())
        .map_err(|e| cuda_error("launching a 2:4 kernel", e))
}

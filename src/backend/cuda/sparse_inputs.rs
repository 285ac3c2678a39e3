//! Products with a sparse input on CUDA (kernels/transposed.cu; kernels/README.md, "Products
//! with a sparse input"), for CSR, homogeneous CSR and MACKO matrices with binary16 values: the
//! sparse vector on the device, homogeneous CSR matrices (row pointers, columns and one weight)
//! with their ordinary product, y = Aᵀ·x with x sparse or dense, and y = A·x with x sparse. The
//! kernels are compiled and loaded on first use (a sparse vector's product or a homogeneous
//! upload), so opening the backend pays nothing for them. Dense, 2:4 and quantized matrices are
//! refused with `Error::Unsupported`.
//!
//! With a dense x, y = Aᵀ·x runs a team per row of A that reads x's element and skips the row
//! where it is ±0, rather than compacting x's non-zeros on the device first: one launch instead
//! of a count, a prefix sum and a compaction, and the same rows of A read; what it costs over a
//! compacted x is x itself (2 bytes per row of A, against the row's 6 bytes per entry) and one
//! idle warp step per zero.
//!
//! y = A·x with x sparse scatters x into a dense f32 copy of `cols` floats (O(nnz(x)) after
//! clearing it) and runs a CSR product over it that skips x's zeros; every row of A is read (the
//! formats are row-major), so what it saves over a dense x is the semantics (a NaN or ±∞ of A
//! under a zero of x adds nothing), not bytes. A MACKO matrix whose values are all finite, where
//! those semantics change nothing, runs its own kernels over a dense binary16 copy instead
//! (`SparseInputs::dense_f16`).
//!
//! MACKO's rows are decoded by a warp each (`macko_walk_row`: its lanes' groups of 8 codes
//! scanned across the warp), in both products.
//!
//! y = Aᵀ·x is two launches: a team of threads per selected row atomically adds its terms into
//! one of a few replicas of y's f32 sums, then a finish adds the replicas, writes y and sets them
//! back to zero (kernels/README.md, "Products with a sparse input", for the measurements).
//!
//! Everything is queued on one stream in order; the f32 scratches (the transposed sums, the
//! scattered x) are shared by every product, which is safe for the reason the few-token XT is
//! (`mod.rs`): a product's last launch has read them before the next product's first one writes
//! them.

use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};

use super::errors::{cuda_error, internal};
use super::kernels::{load_module, ByOutput};
use super::launch::{Launcher, Output, Product};
use super::memory::{CudaVector, DeviceArray, MackoDev, VectorData};
use super::nvrtc;
use super::sparse_views::{CudaSparseVector, HomogeneousCsrDev, RowsView, Values};
use crate::backend::{BackendKind, SparseInput};
use crate::error::{Error, Result};

/// Threads per block of every kernel of transposed.cu (`TRANSPOSED_BLOCK`).
const BLOCK: u32 = 256;
/// Warps per block.
const WARPS: u32 = BLOCK / 32;
/// Blocks per SM the grids are capped at (2048 resident threads per SM on sm_80 and sm_90):
/// every loop of the kernels is grid-stride, so a larger problem only loops more.
const BLOCKS_PER_SM: u32 = 2048 / BLOCK;

/// The kernels of kernels/transposed.cu.
pub(crate) struct SparseInputKernels {
    zero: CudaFunction,
    /// `sparse_x_scatter_f16`.
    scatter_f16: CudaFunction,
    /// `transposed_finish_*`.
    finish: ByOutput,
    scatter: CudaFunction,
    /// `csr_transposed_sparse_x`, `csr_h_transposed_sparse_x`: by [`Values::index`].
    transposed_sparse: [CudaFunction; 2],
    /// `csr_transposed_dense_x`, `csr_h_transposed_dense_x`.
    transposed_dense: [CudaFunction; 2],
    /// `csr_sparse_x_*`, `csr_h_sparse_x_*`.
    sparse_x: [ByOutput; 2],
    /// `csr_h_spmv_*`.
    h_spmv: ByOutput,
    /// `macko_transposed_sparse_x`, `macko_transposed_dense_x`.
    macko_transposed: [CudaFunction; 2],
    /// `macko_sparse_x_*`.
    macko_sparse_x: ByOutput,
}

impl SparseInputKernels {
    /// Compiles (once per process, or loaded from the on-disk kernel cache) and loads kernels/transposed.cu for `arch` into `ctx`.
    pub fn load(ctx: &Arc<CudaContext>, arch: &str) -> Result<Self> {
        let module = load_module(ctx, &nvrtc::TRANSPOSED, arch)?;
        let function = |name: &str| -> Result<CudaFunction> {
            module
                .load_function(name)
                .map_err(|e| cuda_error(&format!("finding kernel {name}"), e))
        };
        let pair = |stem: &str| -> Result<ByOutput> {
            Ok(ByOutput {
                f16: function(&format!("{stem}_f16"))?,
                f32: function(&format!("{stem}_f32"))?,
            })
        };
        Ok(Self {
            zero: function("transposed_zero")?,
            scatter_f16: function("sparse_x_scatter_f16")?,
            finish: pair("transposed_finish")?,
            scatter: function("sparse_x_scatter")?,
            transposed_sparse: [
                function("csr_transposed_sparse_x")?,
                function("csr_h_transposed_sparse_x")?,
            ],
            transposed_dense: [
                function("csr_transposed_dense_x")?,
                function("csr_h_transposed_dense_x")?,
            ],
            sparse_x: [pair("csr_sparse_x")?, pair("csr_h_sparse_x")?],
            h_spmv: pair("csr_h_spmv")?,
            macko_transposed: [
                function("macko_transposed_sparse_x")?,
                function("macko_transposed_dense_x")?,
            ],
            macko_sparse_x: pair("macko_sparse_x")?,
        })
    }
}

/// The kernels once loaded, and the f32 scratches the products share.
#[derive(Default)]
pub(crate) struct SparseInputCache {
    kernels: Mutex<Option<Arc<SparseInputKernels>>>,
    /// The scattered x of y = A·x with x sparse (cleared by each product before its scatter).
    scratch: Mutex<Option<DeviceArray<f32>>>,
    /// The replicated sums of y = Aᵀ·x: all zeros whenever no product is queued on it (zeroed
    /// at allocation, set back to zero by each product's finish). A product takes it out of the
    /// slot and returns it only once its finish is queued, so a product that fails half-way
    /// leaves the slot empty and the next one allocates fresh zeros.
    sums: Mutex<Option<DeviceArray<f32>>>,
    /// x's dense binary16 copy for MACKO matrices with finite values (`SparseInputs::dense_f16`).
    dense_x16: Mutex<Option<DeviceArray<u16>>>,
}

impl SparseInputCache {
    /// The kernels, loading them (`load`) the first time.
    pub fn get(
        &self,
        load: impl FnOnce() -> Result<SparseInputKernels>,
    ) -> Result<Arc<SparseInputKernels>> {
        let mut slot = self
            .kernels
            .lock()
            .map_err(|_| internal("the sparse-input kernel lock is poisoned"))?;
        if let Some(k) = slot.as_ref() {
            return Ok(k.clone());
        }
        let k = Arc::new(load()?);
        *slot = Some(k.clone());
        Ok(k)
    }
}

/// A launch of `items` threads' worth of work (grid-stride loops), capped at the resident
/// blocks of `sms` SMs; at least one block.
fn config(items: u32, per_block: u32, sms: u32) -> LaunchConfig {
    let cap = sms.max(1).saturating_mul(BLOCKS_PER_SM);
    LaunchConfig {
        grid_dim: (items.div_ceil(per_block).clamp(1, cap), 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Entries of a mean row per thread of a CSR team: about two. Measured on an H100
/// (kernels/README.md, "Products with a sparse input"): mean rows of 500–5 504 entries ran
/// fastest with teams of 256 in the sweep that set the rule (rows of 2 048 varied from run to
/// run, teams of 128 as fast or faster), rows of 100 within 5 % at any team size, and a warp per
/// row (the rule before) was 1.3–4.0× slower on rows of ≥ 500.
const CSR_PER_THREAD: usize = 2;
/// Entries of a mean row per thread of a MACKO team: one aligned group of 8 (the whole row in
/// flight in one step where it fits); the entries counted are the padded entry arrays.
const MACKO_PER_THREAD: usize = 8;

/// Threads per team of the transposed products, as a shift: a team per selected row of A,
/// `per_thread` entries of a mean row (`entries` over `rows`) per thread, rounded up to a power
/// of two from a warp (32) to the block (256).
fn team_shift(rows: u32, entries: usize, per_thread: usize) -> u32 {
    let mean = entries.div_ceil(rows.max(1) as usize);
    let team = mean
        .div_ceil(per_thread)
        .next_power_of_two()
        .clamp(32, BLOCK as usize);
    team.trailing_zeros()
}

/// Copies of the transposed sums: 4, spreading the atomics on y's hot L2 lines over four times
/// as many (1.1–2.1× faster than one copy on the H100's measured cases from 1 M selected
/// entries up, at most 8 % slower below), or 1 past 2²⁴ columns, where the copies' memory
/// (16 bytes a column) would outgrow what they save.
fn replicas(cols: u32) -> u32 {
    if cols <= 1 << 24 {
        4
    } else {
        1
    }
}

/// The f32 scratch, grown to at least `len` floats (zeros where newly allocated).
fn scratch<'a>(
    stream: &Arc<CudaStream>,
    slot: &'a mut Option<DeviceArray<f32>>,
    len: usize,
) -> Result<&'a mut DeviceArray<f32>> {
    if slot.as_ref().is_none_or(|a| a.len() < len) {
        *slot = None;
        *slot = Some(DeviceArray::zeros(
            stream,
            len,
            "the sparse-input f32 scratch",
        )?);
    }
    slot.as_mut()
        .ok_or_else(|| internal("sparse-input scratch missing"))
}

/// Maps a launch failure.
fn launched(r: std::result::Result<(), cudarc::driver::DriverError>, what: &str) -> Result<()> {
    r.map_err(|e| cuda_error(&format!("launching {what}"), e))
}

/// What the products with a sparse input launch with: the stream, the GPU's SM count (for the
/// grids), the kernels and the backend's cache (for its scratch).
pub(crate) struct SparseInputs<'a> {
    pub stream: &'a Arc<CudaStream>,
    pub sms: u32,
    pub kernels: Arc<SparseInputKernels>,
    pub cache: &'a SparseInputCache,
}

impl SparseInputs<'_> {
    /// Queues Y = A·X for a homogeneous CSR matrix and `batch` ≥ 1 vectors on `stream` (one
    /// launch: a warp per vector and row).
    pub fn homogeneous_product(
        &self,
        m: &HomogeneousCsrDev,
        x: &DeviceArray<u16>,
        y: &mut VectorData,
        batch: usize,
    ) -> Result<()> {
        let batch = u32::try_from(batch).map_err(|_| Error::Backend {
            backend: BackendKind::Cuda,
            message: format!(
                "the CUDA homogeneous CSR kernel indexes vectors with 32-bit integers: {batch} \
                 vectors exceed the limit of {}",
                u32::MAX
            ),
        })?;
        let items = u64::from(m.rows) * u64::from(batch);
        if items == 0 {
            return Ok(());
        }
        let (stream, k) = (self.stream, &*self.kernels);
        let cfg = config(u32::try_from(items).unwrap_or(u32::MAX), WARPS, self.sms);
        fn go<T: Output>(
            stream: &CudaStream,
            k: &SparseInputKernels,
            m: &HomogeneousCsrDev,
            x: &DeviceArray<u16>,
            y: &mut DeviceArray<T>,
            batch: u32,
            cfg: LaunchConfig,
        ) -> Result<()> {
            if (x.len() as u64) < u64::from(batch) * u64::from(m.cols)
                || (y.len() as u64) < u64::from(batch) * u64::from(m.rows)
            {
                return Err(internal("homogeneous CSR vectors shorter than the batch"));
            }
            let mut args = stream.launch_builder(k.h_spmv.pick(T::PRECISION));
            args.arg(m.row_ptr.buf())
                .arg(m.col_idx.buf())
                .arg(&m.weight)
                .arg(x.buf())
                .arg(y.buf_mut())
                .arg(&m.rows)
                .arg(&m.cols)
                .arg(&batch);
            // SAFETY: the arguments match `csr_h_spmv_*` of kernels/transposed.cu in order and
            // type (row_ptr, col_idx, weight, x, y, rows, cols, batch). row_ptr holds rows + 1
            // u32 and col_idx nnz, with every row's entries inside col_idx and every column
            // below cols (validated by the format); x holds batch · cols halves and y batch ·
            // rows elements of the kernel's output type (checked above). The kernel reads rows
            // < rows of vectors < batch only.
            launched(
                unsafe { args.launch(cfg) }.map(|_| ()),
                "the homogeneous CSR product",
            )
        }
        match y {
            VectorData::F16(y) => go(stream, k, m, x, y, batch, cfg),
            VectorData::F32(y) => go(stream, k, m, x, y, batch, cfg),
        }
    }

    /// Queues y = Aᵀ·x for a CSR, homogeneous CSR or MACKO `v` (shapes checked by the device
    /// layer).
    pub fn transposed(
        &self,
        v: RowsView<'_>,
        x: SparseInput<'_, CudaVector, CudaSparseVector>,
        y: &mut CudaVector,
    ) -> Result<()> {
        let x_len = match &x {
            SparseInput::Dense(x) => x.len(),
            SparseInput::Sparse(x) => x.len as usize,
        };
        let (rows, cols) = (v.rows(), v.cols());
        if x_len != rows as usize || y.len() != cols as usize {
            return Err(internal(
                "transposed vector lengths reached the backend unchecked",
            ));
        }
        if cols == 0 {
            return Ok(());
        }
        let (stream, sms, k) = (self.stream, self.sms, &*self.kernels);
        let replicas = replicas(cols);
        let mut slot = self
            .cache
            .sums
            .lock()
            .map_err(|_| internal("the transposed sums lock is poisoned"))?;
        let len = replicas as usize * cols as usize;
        scratch(stream, &mut slot, len)?;
        // Out of the slot until its finish is queued (see `SparseInputCache::sums`).
        let mut sums_array = slot
            .take()
            .ok_or_else(|| internal("transposed sums missing"))?;
        let sums = sums_array.buf_mut();

        // 1. The selected rows scattered.
        self.scatter(&v, &x, sums, replicas)?;

        // 2. y from the sums, which are left at zero.
        fn finish<T: Output>(
            stream: &CudaStream,
            f: &ByOutput,
            sums: &mut CudaSlice<f32>,
            y: &mut DeviceArray<T>,
            cols: u32,
            replicas: u32,
            cfg: LaunchConfig,
        ) -> Result<()> {
            let mut args = stream.launch_builder(f.pick(T::PRECISION));
            args.arg(sums).arg(y.buf_mut()).arg(&cols).arg(&replicas);
            // SAFETY: `transposed_finish_*(sums, y, cols, replicas)`: sums holds replicas · cols
            // floats and y cols elements of the kernel's output type (checked above).
            launched(
                unsafe { args.launch(cfg) }.map(|_| ()),
                "the rounding of the transposed sums",
            )
        }
        let cfg = config(cols, BLOCK, sms);
        match &mut y.data {
            VectorData::F16(y) => finish(stream, &k.finish, sums, y, cols, replicas, cfg)?,
            VectorData::F32(y) => finish(stream, &k.finish, sums, y, cols, replicas, cfg)?,
        }
        *slot = Some(sums_array);
        Ok(())
    }

    /// The scatter of y = Aᵀ·x into `sums` (`replicas` · cols floats); not launched for an x
    /// without non-zeros, a matrix without rows, or a zero weight (its entries are all stored
    /// zeros).
    fn scatter(
        &self,
        v: &RowsView<'_>,
        x: &SparseInput<'_, CudaVector, CudaSparseVector>,
        sums: &mut CudaSlice<f32>,
        replicas: u32,
    ) -> Result<()> {
        let (stream, sms, k) = (self.stream, self.sms, &*self.kernels);
        let (rows, cols) = (v.rows(), v.cols());
        let zero_weight =
            matches!(v, RowsView::Csr(c) if matches!(c.values, Values::Weight(w) if w == 0.0));
        let (work, sparse) = match x {
            SparseInput::Sparse(x) => (x.nnz, 0),
            SparseInput::Dense(_) => (rows, 1),
        };
        if work == 0 || rows == 0 || zero_weight {
            return Ok(());
        }
        let (f, per_block, shift) = match v {
            RowsView::Csr(c) => {
                let shift = team_shift(rows, c.nnz, CSR_PER_THREAD);
                let f = match x {
                    SparseInput::Sparse(_) => &k.transposed_sparse[c.values.index()],
                    SparseInput::Dense(_) => &k.transposed_dense[c.values.index()],
                };
                (f, BLOCK >> shift, shift)
            }
            RowsView::Macko(m) => {
                let shift = team_shift(rows, m.values.len(), MACKO_PER_THREAD);
                (&k.macko_transposed[sparse], BLOCK >> shift, shift)
            }
        };
        let mut args = stream.launch_builder(f);
        v.push_args(&mut args);
        match x {
            SparseInput::Sparse(x) => {
                args.arg(x.index.buf()).arg(x.value.buf()).arg(&x.nnz);
            }
            SparseInput::Dense(x) => {
                args.arg(x.as_input()?.buf()).arg(&rows);
            }
        }
        args.arg(&mut *sums).arg(&cols).arg(&replicas).arg(&shift);
        // SAFETY: the arguments match `csr[_h]_transposed_{sparse,dense}_x` (row_ptr, col_idx,
        // values or weight, x, sums, cols, replicas, shift) or `macko_transposed_{sparse,
        // dense}_x` (row_ptr, values, codes, x, sums, cols, replicas, shift) of
        // kernels/transposed.cu in order and type, x being x_index, x_value, nnz (sparse) or
        // x, rows (dense). A sparse x's nnz indices are below its length, which equals rows
        // (checked by the device layer), and a dense x holds rows halves (checked by the
        // caller); row_ptr holds rows + 1 u32 and every row's entries lie inside the entry
        // arrays (MACKO's padded to whole 16-byte value and 4-byte code words) with every
        // column below cols (validated by the format); sums holds replicas · cols floats
        // (grown by the caller); 5 ≤ shift ≤ 8, so teams are whole warps that divide the
        // block (MACKO's named barriers 1 to 8).
        launched(
            unsafe { args.launch(config(work, per_block, sms)) }.map(|_| ()),
            "the transposed scatter",
        )
    }

    /// Queues x's dense binary16 copy (`cols` elements, zero but for x's entries) in the
    /// backend's scratch and returns it, locked until the product that reads it is queued: the
    /// x of a MACKO matrix's own kernels where its values are all finite (`MackoDev::finite`),
    /// which there keep the semantics of a sparse x (a zero of x times a finite value adds 0;
    /// a zero value adds nothing whatever x holds) at the speed of the ordinary product.
    pub fn dense_f16(
        &self,
        x: &CudaSparseVector,
        cols: u32,
    ) -> Result<MutexGuard<'_, Option<DeviceArray<u16>>>> {
        if x.len != cols {
            return Err(internal(
                "sparse-x vector length reached the backend unchecked",
            ));
        }
        let (stream, sms, k) = (self.stream, self.sms, &*self.kernels);
        let mut slot = self
            .cache
            .dense_x16
            .lock()
            .map_err(|_| internal("the sparse-x binary16 copy's lock is poisoned"))?;
        // Exactly cols elements: the product reads x's length as the matrix's columns.
        if slot.as_ref().is_none_or(|a| a.len() != cols as usize) {
            *slot = None;
            *slot = Some(DeviceArray::zeros(
                stream,
                cols as usize,
                "the sparse-x binary16 copy",
            )?);
        }
        let dense = slot
            .as_mut()
            .ok_or_else(|| internal("sparse-x binary16 copy missing"))?;
        stream
            .memset_zeros(dense.buf_mut())
            .map_err(|e| cuda_error("clearing the sparse-x binary16 copy", e))?;
        if x.nnz > 0 {
            let mut args = stream.launch_builder(&k.scatter_f16);
            args.arg(x.index.buf())
                .arg(x.value.buf())
                .arg(&x.nnz)
                .arg(dense.buf_mut());
            // SAFETY: `sparse_x_scatter_f16(x_index, x_value, nnz, dense)`: nnz entries, each
            // index below x's length, which equals cols (checked above); dense holds cols
            // halves.
            launched(
                unsafe { args.launch(config(x.nnz, BLOCK, sms)) }.map(|_| ()),
                "the scatter of a sparse x into binary16",
            )?;
        }
        Ok(slot)
    }

    /// Queues y = A·x with x sparse for a MACKO matrix whose values are all finite
    /// (`MackoDev::finite`): the matrix's own kernels over x's dense copy (`dense_f16`).
    pub fn macko_own_kernels(
        &self,
        launcher: Launcher<'_>,
        m: &MackoDev,
        x: &CudaSparseVector,
        y: &mut CudaVector,
    ) -> Result<()> {
        if y.len() != m.rows as usize {
            return Err(internal("sparse-x y length reached the backend unchecked"));
        }
        let dense = self.dense_f16(x, m.cols)?;
        let x16 = dense
            .as_ref()
            .ok_or_else(|| internal("sparse-x binary16 copy missing"))?;
        launcher.product(Product::Macko(m), x16, &mut y.data)
    }

    /// Queues y = A·x for a sparse x and a CSR, homogeneous CSR or MACKO `v` (shapes checked
    /// by the device layer): x scattered into the f32 scratch, then a warp per row of A.
    pub fn sparse_x(
        &self,
        v: RowsView<'_>,
        x: &CudaSparseVector,
        y: &mut CudaVector,
    ) -> Result<()> {
        let (rows, cols) = (v.rows(), v.cols());
        if x.len != cols || y.len() != rows as usize {
            return Err(internal(
                "sparse-x vector lengths reached the backend unchecked",
            ));
        }
        if rows == 0 {
            return Ok(());
        }
        let (stream, sms, k) = (self.stream, self.sms, &*self.kernels);
        let mut slot = self
            .cache
            .scratch
            .lock()
            .map_err(|_| internal("the sparse-input scratch lock is poisoned"))?;
        let xs = scratch(stream, &mut slot, cols as usize)?.buf_mut();

        if cols > 0 {
            let mut args = stream.launch_builder(&k.zero);
            args.arg(&mut *xs).arg(&cols);
            // SAFETY: `transposed_zero(sums, cols)`: the scratch holds at least cols floats.
            launched(
                unsafe { args.launch(config(cols, BLOCK, sms)) }.map(|_| ()),
                "the clearing of the scattered x",
            )?;
        }
        if x.nnz > 0 {
            let mut args = stream.launch_builder(&k.scatter);
            args.arg(x.index.buf())
                .arg(x.value.buf())
                .arg(&x.nnz)
                .arg(&mut *xs);
            // SAFETY: `sparse_x_scatter(x_index, x_value, nnz, dense)`: nnz entries, each index
            // below x's length, which equals cols (checked by the device layer); the scratch
            // holds at least cols floats.
            launched(
                unsafe { args.launch(config(x.nnz, BLOCK, sms)) }.map(|_| ()),
                "the scatter of a sparse x",
            )?;
        }

        fn go<T: Output>(
            stream: &CudaStream,
            k: &SparseInputKernels,
            v: &RowsView<'_>,
            xs: &CudaSlice<f32>,
            y: &mut DeviceArray<T>,
            cfg: LaunchConfig,
        ) -> Result<()> {
            let f = match v {
                RowsView::Csr(c) => &k.sparse_x[c.values.index()],
                RowsView::Macko(_) => &k.macko_sparse_x,
            };
            let mut args = stream.launch_builder(f.pick(T::PRECISION));
            v.push_args(&mut args);
            let rows = v.rows();
            args.arg(xs).arg(y.buf_mut()).arg(&rows);
            // SAFETY: the arguments match `csr[_h]_sparse_x_*` (row_ptr, col_idx, values or
            // weight, xs, y, rows) or `macko_sparse_x_*` (row_ptr, values, codes, xs, y, rows)
            // of kernels/transposed.cu in order and type. row_ptr holds rows + 1 u32, every
            // row's entries lie inside the entry arrays (MACKO's padded to whole words) and
            // every column below cols (validated by the format), xs holds at least cols floats
            // and y rows elements of the kernel's output type (checked by the caller).
            launched(
                unsafe { args.launch(cfg) }.map(|_| ()),
                "the product with a sparse x",
            )
        }
        let cfg = config(rows, WARPS, sms);
        match &mut y.data {
            VectorData::F16(y) => go(stream, k, &v, xs, y, cfg),
            VectorData::F32(y) => go(stream, k, &v, xs, y, cfg),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block the launches are sized with is the kernels' `__launch_bounds__`.
    #[test]
    fn the_block_matches_the_kernels() {
        let cu = include_str!("../../../kernels/transposed.cu");
        assert!(cu.contains(&format!("#define TRANSPOSED_BLOCK {BLOCK}\n")));
        assert_eq!(BLOCK % 32, 0);
    }

    /// Grids are never empty, never past the resident blocks, and cover the work in one pass
    /// where it fits (every loop is grid-stride, so a capped grid only loops more).
    #[test]
    fn grids_cover_the_work_within_the_cap() {
        for sms in [0u32, 1, 132] {
            let cap = sms.max(1) * BLOCKS_PER_SM;
            for items in [0u32, 1, 7, 8, 9, 255, 256, 257, 10_000, u32::MAX] {
                for per_block in [WARPS, BLOCK] {
                    let g = config(items, per_block, sms).grid_dim.0;
                    assert!((1..=cap).contains(&g), "{items} items, {sms} SMs: {g}");
                    let needed = items.div_ceil(per_block).max(1);
                    assert!(g == needed || g == cap, "{items} items, {sms} SMs: {g}");
                }
            }
        }
    }

    /// Teams hold about two entries of a mean row per thread, from a warp to the block, and
    /// always divide the block; an empty matrix gets a warp.
    #[test]
    fn teams_follow_the_mean_row_within_the_block() {
        for (rows, nnz, team) in [
            (0u32, 0usize, 32u32),
            (10, 0, 32),
            (10_000, 1_000_000, 64),
            (10_000, 5_000_000, 256),
            (11_008, 22_544_384, 256),
            (4, 100, 32),
            (1, 300, 256),
            (1, usize::MAX / 2, 256),
        ] {
            let shift = team_shift(rows, nnz, CSR_PER_THREAD);
            assert_eq!(1u32 << shift, team, "{rows} rows, {nnz} entries");
            assert!((5..=8).contains(&shift));
            assert_eq!(BLOCK % (1 << shift), 0);
        }
    }

    /// MACKO's teams hold about one group of 8 entries of a mean row per thread, from a warp to
    /// the block.
    #[test]
    fn macko_teams_follow_the_mean_row_in_groups() {
        for (rows, entries, team) in [
            (0u32, 0usize, 32u32),
            (10, 80, 32),
            (10_000, 10_000 * 1_000, 128),
            (11_008, 11_008 * 2_048, 256),
            (4_096, 4_096 * 5_504, 256),
            (1, usize::MAX / 2, 256),
        ] {
            let shift = team_shift(rows, entries, MACKO_PER_THREAD);
            assert_eq!(1u32 << shift, team, "{rows} rows, {entries} entries");
            assert!((5..=8).contains(&shift));
        }
    }

    /// Four copies of the sums up to 2²⁴ columns, one past it.
    #[test]
    fn replicas_stay_small() {
        assert_eq!(replicas(0), 4);
        assert_eq!(replicas(10_000), 4);
        assert_eq!(replicas(1 << 24), 4);
        assert_eq!(replicas((1 << 24) + 1), 1);
        assert_eq!(replicas(u32::MAX >> 1), 1);
    }
}

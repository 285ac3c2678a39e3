//! The CUDA backend: CUDA C kernels from `kernels/`, compiled at run time by NVRTC for the GPU's
//! own architecture and launched through cudarc, which loads the driver and the libraries at run
//! time. A binary built without any CUDA installed runs everywhere: where the driver, a GPU and
//! NVRTC are present this backend opens, elsewhere `open` says which is missing and
//! `Device::auto()` moves on.
//!
//! One file per concern; each imports only those above it in this list:
//! - `errors`: the backend's error values;
//! - [`nvrtc`]: kernel sources, compilation and the process-wide cache of compiled kernels;
//! - `probe`: libraries, device, context, properties;
//! - `caps`: what the planner knows of the GPU and the kernels ([`caps::CudaCaps`]);
//! - `tuning`: the typed tuning that forces plan choices ([`tuning::CudaTuning`]);
//! - `batch_plan`: the pure planner of few-token chunks ([`batch_plan::BatchPlan`]);
//! - `rules`, `plan`: the measured rules and the pure planner ([`plan::CudaPlan`]);
//! - `split`, `flat`, `cursors`: the layouts of split rows, flat ranges and the tensor-core
//!   kernel's column cursors;
//! - `kernels`: the compiled kernels loaded into a context;
//! - `memory`: device arrays, matrices, vectors;
//! - `upload`: planning and laying out a matrix at upload;
//! - `quant`: int8 / int4 matrices: their uploads, kernels and few-token products;
//! - `launch`: binding and dispatch of a stored plan;
//! - `sparse_inputs`: sparse vectors, homogeneous CSR matrices, y = Aᵀ·x and y = A·x with x
//!   sparse (kernels/transposed.cu);
//! - `vendor`: the cuBLAS and cuSPARSE baselines;
//! - `timing`: CUDA events around queued products, the streaming-read ceiling;
//! - this file: the `Backend` adapter.
//!
//! Everything is queued on one stream, in order: products return once queued, and
//! `synchronize`/`download` wait.

#[doc(hidden)]
pub mod batch_plan;
#[doc(hidden)]
pub mod caps;
mod cursors;
mod errors;
mod external;
mod flat;
mod kernel_cache;
mod kernels;
mod launch;
mod memory;
pub mod nvrtc;
#[doc(hidden)]
pub mod plan;
mod probe;
mod quant;
mod rules;
mod sparse24;
mod sparse24_tiles;
mod sparse_inputs;
mod sparse_views;
mod split;
mod timing;
#[doc(hidden)]
pub mod tuning;
mod upload;
mod vendor;

use std::sync::{Arc, Mutex};

use cudarc::driver::CudaStream;

use half::f16;

use self::caps::{CudaCaps, Kernel, Width, BLOCK};
use self::errors::{cuda_error, internal};
use self::kernels::Kernels;
use self::launch::{BatchChunk, Launcher, Product};
pub(crate) use self::memory::CudaVector;
use self::memory::DenseQuantDev;
use self::memory::{CsrDev, DenseDev, DeviceArray, MackoDev, VectorData};
use self::plan::CudaPlan;
use self::probe::{human_bytes, Gpu};
use self::quant::QuantCache;
use self::sparse24::{Sparse24Cache, Sparse24Dev};
use self::sparse_inputs::{SparseInputCache, SparseInputs};
pub(crate) use self::sparse_views::CudaSparseVector;
use self::sparse_views::{CsrView, HomogeneousCsrDev, MackoView, RowsView};
use self::tuning::CudaTuning;
use self::upload::Uploader;
use self::vendor::{CusparseCsr, SpmvOp, Vendor, VendorMatrix};

use super::{
    chunks, Backend, BackendKind, DeviceInfo, HostVector, MatrixRef, Precision, SparseInput,
    VendorBaseline, UNSUPPORTED_SPARSE_X, UNSUPPORTED_TRANSPOSED,
};
use crate::error::{Error, Result};

/// How to open the CUDA backend.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct CudaConfig {
    /// Ordinal of the GPU to use.
    pub ordinal: usize,
    /// Plan choices forced for experiments and tests (`Default`: the plan rules decide).
    pub tuning: CudaTuning,
    /// The folder of kernels compiled by earlier processes (`None`: compile every kernel).
    pub kernel_cache: Option<std::path::PathBuf>,
}

/// Opens the CUDA GPU `config.ordinal`: probes the driver, the GPU and NVRTC, creates the
/// context and stream, and compiles (once per process, or loaded from the on-disk kernel cache) and loads every kernel.
pub(crate) fn open(config: &CudaConfig) -> Result<CudaBackend> {
    CudaBackend::open(config)
}

/// A matrix of this backend: the variant says which implementation multiplies it.
pub(crate) enum CudaMatrix {
    /// macko's MACKO kernels.
    Macko(Box<MackoDev>),
    /// macko's CSR kernel.
    Csr(CsrDev),
    /// CSR with one weight for every entry (`sparse_inputs.rs`: no plan, one kernel shape).
    HomogeneousCsr(HomogeneousCsrDev),
    /// macko's dense GEMV.
    Dense(DenseDev, CudaPlan),
    /// macko's dense int8 / int4 GEMV.
    DenseQuant(DenseQuantDev, CudaPlan),
    /// macko's 2:4 kernels (`sparse24.rs`: no plan, the launch follows from the shape).
    Sparse24(Sparse24Dev),
    /// cuBLAS `cublasGemmEx` (baseline).
    Cublas(DenseDev),
    /// cuSPARSE `cusparseSpMV` (baseline).
    Cusparse(CusparseCsr),
}

impl CudaMatrix {
    /// `(rows, cols)`.
    fn shape(&self) -> (u32, u32) {
        match self {
            CudaMatrix::Macko(m) => (m.rows, m.cols),
            CudaMatrix::Csr(m) => (m.rows, m.cols),
            CudaMatrix::HomogeneousCsr(m) => (m.rows, m.cols),
            CudaMatrix::Dense(m, _) | CudaMatrix::Cublas(m) => (m.rows, m.cols),
            CudaMatrix::DenseQuant(m, _) => (m.rows, m.cols),
            CudaMatrix::Sparse24(m) => (m.rows, m.cols),
            CudaMatrix::Cusparse(m) => (m.rows, m.cols),
        }
    }

    /// What the products with a sparse input read of it (CSR, homogeneous CSR and MACKO with
    /// binary16 values), or `Error::Unsupported` with `what`.
    fn rows_view(&self, what: &'static str) -> Result<RowsView<'_>> {
        let view = match self {
            CudaMatrix::Csr(m) => Some(RowsView::Csr(CsrView::csr(m))),
            CudaMatrix::HomogeneousCsr(m) => Some(RowsView::Csr(CsrView::homogeneous(m))),
            CudaMatrix::Macko(m) => MackoView::of(m).map(RowsView::Macko),
            _ => None,
        };
        let backend = BackendKind::Cuda;
        view.ok_or(Error::Unsupported { backend, what })
    }

    /// The plan macko's kernels launch it with (`None` for the vendor baselines, 2:4 and
    /// homogeneous CSR, whose one kernel shape takes its launch from the shape).
    #[allow(dead_code)]
    fn plan(&self) -> Option<&CudaPlan> {
        match self {
            CudaMatrix::Macko(m) => Some(&m.plan),
            CudaMatrix::Csr(m) => Some(&m.plan),
            CudaMatrix::Dense(_, plan) | CudaMatrix::DenseQuant(_, plan) => Some(plan),
            CudaMatrix::Sparse24(_)
            | CudaMatrix::HomogeneousCsr(_)
            | CudaMatrix::Cublas(_)
            | CudaMatrix::Cusparse(_) => None,
        }
    }
}

/// One CUDA GPU.
pub(crate) struct CudaBackend {
    gpu: Gpu,
    kernels: Kernels,
    caps: CudaCaps,
    tuning: CudaTuning,
    vendor: Vendor,
    info: DeviceInfo,
    /// XT, the transposed chunk of X the few-token kernels read (`batch_plan.rs`), grown on
    /// demand and reused by every chunk: everything runs on one stream, so a chunk's transpose
    /// is queued only after the previous chunk's product has read XT.
    xt: Mutex<Option<DeviceArray<u32>>>,
    /// The int8 / int4 kernels, compiled on the first upload of a matrix of their width.
    quant: QuantCache,
    /// The 2:4 kernels, compiled on the first upload of a 2:4 matrix.
    sparse24: Sparse24Cache,
    /// The kernels of products with sparse inputs and of homogeneous CSR, compiled on first
    /// use, and their f32 scratch.
    sparse_inputs: SparseInputCache,
}

impl CudaBackend {
    fn open(config: &CudaConfig) -> Result<Self> {
        nvrtc::use_kernel_cache(config.kernel_cache.clone());
        let gpu = probe::open_gpu(config.ordinal)?;
        let p = &gpu.props;
        let loaded = Kernels::load(&gpu.ctx, &p.arch(), p.smem_per_block_optin)?;
        let caps = CudaCaps {
            sm_count: p.sms,
            max_threads_per_sm: p.sm_limits.max_threads,
            max_blocks_per_sm: p.sm_limits.max_blocks,
            regs_per_sm: p.sm_limits.regs,
            regs_per_block: p.sm_limits.regs_per_block,
            smem_per_sm: p.sm_limits.smem,
            smem_reserved_per_block: p.sm_limits.smem_reserved_per_block,
            smem_limit: loaded.smem_limit,
            l2_bytes: p.l2_bytes,
            dram_bytes_per_sm_cycle: p.dram_bytes_per_sm_cycle,
            tensor_cores: p.compute_capability.0 >= 8,
            kernels: loaded.uses,
        };
        let vendor = Vendor::new(gpu.ctx.clone(), gpu.stream.clone());
        let info = describe(&gpu, &config.tuning);
        Ok(Self {
            gpu,
            kernels: loaded.kernels,
            caps,
            tuning: config.tuning.clone(),
            vendor,
            info,
            xt: Mutex::new(None),
            quant: QuantCache::default(),
            sparse24: Sparse24Cache::default(),
            sparse_inputs: SparseInputCache::default(),
        })
    }

    fn stream(&self) -> &Arc<cudarc::driver::CudaStream> {
        &self.gpu.stream
    }

    fn uploader<'a>(&'a self, tuning: &'a CudaTuning) -> Uploader<'a> {
        Uploader {
            stream: self.stream(),
            caps: &self.caps,
            tuning,
        }
    }

    /// Uploads `m` planned with `tuning`'s choices instead of the device's own (the plan
    /// cache's tuned plan, or a candidate the tuner times).
    pub(crate) fn upload_matrix_tuned(
        &self,
        m: MatrixRef<'_>,
        tuning: &CudaTuning,
    ) -> Result<CudaMatrix> {
        let up = self.uploader(tuning);
        let matrix = match m {
            MatrixRef::Macko(m) => CudaMatrix::Macko(Box::new(up.macko(m)?)),
            MatrixRef::Csr(m) => CudaMatrix::Csr(up.csr(m)?),
            MatrixRef::Dense(m) => {
                let (m, plan) = up.dense(m)?;
                CudaMatrix::Dense(m, plan)
            }
            MatrixRef::MackoQuant(q) => {
                let kernels = self.quant_kernels(q.quantization().bits)?;
                CudaMatrix::Macko(Box::new(up.macko_quant(q, kernels)?))
            }
            MatrixRef::DenseQuant(q) => {
                let kernels = self.quant_kernels(q.quantization().bits)?;
                let (m, plan) = up.dense_quant(q, kernels)?;
                CudaMatrix::DenseQuant(m, plan)
            }
            MatrixRef::Sparse24(s) => {
                let kernels = self.sparse24_kernels()?;
                CudaMatrix::Sparse24(sparse24::upload(
                    self.stream(),
                    s,
                    kernels,
                    tuning,
                    self.caps.sm_count,
                )?)
            }
            MatrixRef::HomogeneousCsr(h) => {
                // Compiled now, so that a missing kernel fails the upload, not a product.
                self.sparse_inputs(self.stream())?;
                CudaMatrix::HomogeneousCsr(sparse_views::upload_homogeneous(self.stream(), h)?)
            }
        };
        Ok(matrix)
    }

    /// Launches on `stream`: the backend's own, or a framework's (`external.rs`).
    fn launcher<'a>(&'a self, stream: &'a Arc<CudaStream>) -> Launcher<'a> {
        Launcher {
            kernels: &self.kernels,
            stream,
            sms: self.caps.sm_count,
        }
    }

    /// Queues y = A·x on `stream` with the implementation the matrix was uploaded for.
    fn product(
        &self,
        stream: &Arc<CudaStream>,
        a: &CudaMatrix,
        x: &CudaVector,
        y: &mut CudaVector,
    ) -> Result<()> {
        let (rows, cols) = a.shape();
        if x.len() != cols as usize || y.len() != rows as usize {
            return Err(internal("vector lengths reached the backend unchecked"));
        }
        let x = x.as_input()?;
        let launcher = self.launcher(stream);
        match a {
            CudaMatrix::Macko(m) => launcher.product(Product::Macko(m), x, &mut y.data),
            CudaMatrix::Csr(m) => launcher.product(Product::Csr(m), x, &mut y.data),
            CudaMatrix::HomogeneousCsr(m) => {
                self.sparse_inputs(stream)?
                    .homogeneous_product(m, x, &mut y.data, 1)
            }
            CudaMatrix::Dense(m, plan) => launcher.product(Product::Dense(m, plan), x, &mut y.data),
            CudaMatrix::DenseQuant(m, plan) => {
                launcher.product(Product::DenseQuant(m, plan), x, &mut y.data)
            }
            CudaMatrix::Sparse24(m) => match &mut y.data {
                VectorData::F16(y) => sparse24::launch(stream, m, x, y.buf_mut(), (0, 1)),
                VectorData::F32(y) => sparse24::launch(stream, m, x, y.buf_mut(), (0, 1)),
            },
            CudaMatrix::Cublas(m) => self.vendor.cublas_gemm(m, x, &mut y.data, 1),
            CudaMatrix::Cusparse(m) => self.vendor.cusparse_spmv(m, x, &mut y.data, SpmvOp::Plain),
        }
    }
}

impl CudaBackend {
    /// Queues Y = A·X for `batch` vectors (`batch` ≥ 2) on `stream`: the vendor baselines in
    /// one call with n = batch, macko's kernels chunk by chunk (`backend::chunks`), each chunk
    /// at the plan of its width stored with the matrix.
    fn product_batch(
        &self,
        stream: &Arc<CudaStream>,
        a: &CudaMatrix,
        x: &CudaVector,
        y: &mut CudaVector,
        batch: usize,
    ) -> Result<()> {
        let (rows, cols) = a.shape();
        if x.len() != batch * cols as usize || y.len() != batch * rows as usize {
            return Err(internal("batch lengths reached the backend unchecked"));
        }
        let quantized = match a {
            CudaMatrix::Macko(m) => m.quant.is_some(),
            CudaMatrix::DenseQuant(..) => true,
            _ => false,
        };
        if quantized {
            return self.product_batch_looped(stream, a, x, y, batch);
        }
        let x = x.as_input()?;
        if let CudaMatrix::HomogeneousCsr(m) = a {
            // One launch for the whole batch: a warp per vector and row.
            return self
                .sparse_inputs(stream)?
                .homogeneous_product(m, x, &mut y.data, batch);
        }
        if let CudaMatrix::Sparse24(m) = a {
            // X read as it is: no XT, one launch per chunk.
            for chunk in chunks(batch) {
                let chunk = (
                    u32::try_from(chunk.first).map_err(|_| too_many(batch))?,
                    u32::try_from(chunk.count).map_err(|_| too_many(batch))?,
                );
                match &mut y.data {
                    VectorData::F16(y) => sparse24::launch(stream, m, x, y.buf_mut(), chunk)?,
                    VectorData::F32(y) => sparse24::launch(stream, m, x, y.buf_mut(), chunk)?,
                }
            }
            return Ok(());
        }
        let product = match a {
            CudaMatrix::DenseQuant(..)
            | CudaMatrix::Sparse24(_)
            | CudaMatrix::HomogeneousCsr(_) => {
                return Err(internal(
                    "dense int8/4, 2:4 or homogeneous CSR reached a batch plan",
                ))
            }
            CudaMatrix::Cublas(m) => return self.vendor.cublas_gemm(m, x, &mut y.data, batch),
            CudaMatrix::Cusparse(m) => return self.vendor.cusparse_spmm(m, x, &mut y.data, batch),
            CudaMatrix::Macko(m) => Product::Macko(m),
            CudaMatrix::Csr(m) => Product::Csr(m),
            CudaMatrix::Dense(m, plan) => Product::Dense(m, plan),
        };
        let plans = a
            .plan()
            .and_then(|p| p.batch)
            .ok_or_else(|| internal("a matrix without few-token plans"))?;
        let launcher = self.launcher(stream);
        let mut xt = self
            .xt
            .lock()
            .map_err(|_| internal("the XT scratch lock is poisoned"))?;
        for chunk in chunks(batch) {
            let width = Width::for_count(chunk.count)
                .ok_or_else(|| internal("a chunk wider than 16 vectors"))?;
            let plan = plans.get(width);
            let xt = scratch(stream, &mut xt, plan.xt_len().div_ceil(2))?;
            let chunk = BatchChunk {
                first: u32::try_from(chunk.first).map_err(|_| too_many(batch))?,
                count: u32::try_from(chunk.count).map_err(|_| too_many(batch))?,
            };
            launcher.batch(product, plan, chunk, x, xt, &mut y.data)?;
        }
        Ok(())
    }
}

impl CudaBackend {
    /// The products with a sparse input on `stream`, their kernels compiled and loaded the
    /// first time.
    fn sparse_inputs<'a>(&'a self, stream: &'a Arc<CudaStream>) -> Result<SparseInputs<'a>> {
        let arch = self.gpu.props.arch();
        let kernels = self
            .sparse_inputs
            .get(|| sparse_inputs::SparseInputKernels::load(&self.gpu.ctx, &arch))?;
        Ok(SparseInputs {
            stream,
            sms: self.caps.sm_count,
            kernels,
            cache: &self.sparse_inputs,
        })
    }

    /// The 2:4 kernels, compiled and loaded the first time.
    fn sparse24_kernels(&self) -> Result<Arc<sparse24::Sparse24Kernels>> {
        let p = &self.gpu.props;
        self.sparse24.get(|| {
            sparse24::Sparse24Kernels::load(
                &self.gpu.ctx,
                &p.arch(),
                p.smem_per_block_optin,
                self.caps.tensor_cores,
            )
        })
    }

    /// The int8 / int4 kernels of `bits`, compiled and loaded the first time.
    fn quant_kernels(&self, bits: macko_format::QuantBits) -> Result<Arc<kernels::QuantKernels>> {
        let p = &self.gpu.props;
        self.quant.get(bits, || {
            kernels::QuantKernels::load(&self.gpu.ctx, &p.arch(), p.smem_per_block_optin, bits)
        })
    }

    /// Y = A·X one vector at a time (`quant.rs`: the interim few-token product of quantized
    /// matrices): each vector of X copied into a scratch vector, multiplied, and its product
    /// copied into Y, all queued on the stream.
    fn product_batch_looped(
        &self,
        stream: &Arc<CudaStream>,
        a: &CudaMatrix,
        x: &CudaVector,
        y: &mut CudaVector,
        batch: usize,
    ) -> Result<()> {
        let (rows, cols) = (a.shape().0 as usize, a.shape().1 as usize);
        let x = x.as_input()?;
        let mut xs = CudaVector {
            data: VectorData::F16(DeviceArray::zeros(stream, cols, "a vector")?),
        };
        let mut ys = match &y.data {
            VectorData::F16(_) => VectorData::F16(DeviceArray::zeros(stream, rows, "a vector")?),
            VectorData::F32(_) => VectorData::F32(DeviceArray::zeros(stream, rows, "a vector")?),
        };
        for b in 0..batch {
            if let VectorData::F16(xs) = &mut xs.data {
                quant::copy_within(stream, x, b * cols, xs, 0, cols)?;
            }
            let mut out = CudaVector { data: ys };
            self.product(stream, a, &xs, &mut out)?;
            ys = out.data;
            match (&ys, &mut y.data) {
                (VectorData::F16(s), VectorData::F16(d)) => {
                    quant::copy_within(stream, s, 0, d, b * rows, rows)?
                }
                (VectorData::F32(s), VectorData::F32(d)) => {
                    quant::copy_within(stream, s, 0, d, b * rows, rows)?
                }
                _ => return Err(internal("scratch and output precisions differ")),
            }
        }
        Ok(())
    }
}

impl CudaBackend {
    /// Times `iters` runs of `run(i)` after `warmup` untimed ones, each between CUDA events on
    /// the backend's stream, held by a spin kernel while they are queued (timing.rs).
    fn time_runs(
        &self,
        warmup: usize,
        iters: usize,
        run: impl FnMut(usize) -> Result<()>,
    ) -> Result<Vec<f64>> {
        let hold = |ns| self.launcher(self.stream()).spin_wait(ns);
        timing::time_queued(&self.gpu.ctx, self.stream(), warmup, iters, hold, run)
    }
}

/// The XT scratch buffer, grown to at least `words` 32-bit words (an allocation failure is
/// `Error::OutOfMemory` naming it).
fn scratch<'a>(
    stream: &Arc<cudarc::driver::CudaStream>,
    xt: &'a mut Option<DeviceArray<u32>>,
    words: usize,
) -> Result<&'a mut DeviceArray<u32>> {
    if xt.as_ref().is_none_or(|a| a.len() < words) {
        *xt = None;
        *xt = Some(DeviceArray::zeros(
            stream,
            words,
            "the few-token XT scratch",
        )?);
    }
    xt.as_mut().ok_or_else(|| internal("XT scratch missing"))
}

/// A batch whose vector indices pass the kernels' 32 bits.
fn too_many(batch: usize) -> Error {
    Error::Backend {
        backend: BackendKind::Cuda,
        message: format!(
            "the CUDA few-token kernels index vectors with 32-bit integers: {batch} vectors \
             exceed the limit of {}",
            u32::MAX
        ),
    }
}

/// `info()` of a GPU: name with architecture, then the properties that explain its figures, and
/// the plan choices a tuning forces, if any.
fn describe(gpu: &Gpu, tuning: &CudaTuning) -> DeviceInfo {
    let p = &gpu.props;
    let mut properties = vec![
        ("compute capability".into(), p.arch()),
        (
            "driver".into(),
            format!("CUDA {}.{}", p.driver_version.0, p.driver_version.1),
        ),
        (
            "NVRTC".into(),
            format!("{}.{}", p.nvrtc_version.0, p.nvrtc_version.1),
        ),
        ("memory".into(), human_bytes(p.total_memory)),
        ("SMs".into(), p.sms.to_string()),
        ("L2 cache".into(), human_bytes(p.l2_bytes)),
        (
            "shared memory per block".into(),
            human_bytes(u64::from(p.smem_per_block_optin)),
        ),
        (
            "DRAM bytes per SM cycle".into(),
            p.dram_bytes_per_sm_cycle
                .map_or("unknown (no clocks reported)".into(), |b| format!("{b:.1}")),
        ),
        (
            "plan rules it decides".into(),
            rules::gpu_dependent_rules(p.dram_bytes_per_sm_cycle),
        ),
        ("ordinal".into(), gpu.ctx.ordinal().to_string()),
    ];
    if *tuning != CudaTuning::default() {
        properties.push(("forced plan choices".into(), format!("{tuning:?}")));
    }
    DeviceInfo {
        backend: BackendKind::Cuda,
        name: format!("{} ({})", p.name, p.arch()),
        properties,
    }
}

impl Backend for CudaBackend {
    type Matrix = CudaMatrix;
    type Vector = CudaVector;
    // Products with sparse inputs for CSR and homogeneous CSR (`sparse_inputs.rs`); the other
    // formats are refused when the product is queued.
    type SparseVector = CudaSparseVector;
    type Plan = CudaPlan;

    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn upload_matrix(&self, m: MatrixRef<'_>) -> Result<CudaMatrix> {
        self.upload_matrix_tuned(m, &self.tuning)
    }

    fn upload_vector(&self, x: &[f16]) -> Result<CudaVector> {
        let bits: &[u16] = bytemuck::cast_slice(x);
        Ok(CudaVector {
            data: VectorData::F16(DeviceArray::upload(self.stream(), bits, "a vector")?),
        })
    }

    fn alloc_vector(&self, len: usize, precision: Precision) -> Result<CudaVector> {
        let data = match precision {
            Precision::F16 => VectorData::F16(DeviceArray::zeros(self.stream(), len, "a vector")?),
            Precision::F32 => VectorData::F32(DeviceArray::zeros(self.stream(), len, "a vector")?),
        };
        Ok(CudaVector { data })
    }

    fn multiply(
        &self,
        a: &CudaMatrix,
        x: &CudaVector,
        y: &mut CudaVector,
        batch: usize,
    ) -> Result<()> {
        match batch {
            0 => Ok(()),
            1 => self.product(self.stream(), a, x, y),
            _ => self.product_batch(self.stream(), a, x, y, batch),
        }
    }

    fn upload_sparse_vector(&self, x: &macko_format::SparseVector) -> Result<CudaSparseVector> {
        sparse_views::upload_vector(self.stream(), x)
    }

    fn multiply_sparse_x(
        &self,
        a: &CudaMatrix,
        x: &CudaSparseVector,
        y: &mut CudaVector,
    ) -> Result<()> {
        let stream = self.stream();
        let inputs = self.sparse_inputs(stream)?;
        match a {
            CudaMatrix::Macko(m) if m.finite && m.quant.is_none() && m.cols > 0 => {
                inputs.macko_own_kernels(self.launcher(stream), m, x, y)
            }
            _ => inputs.sparse_x(a.rows_view(UNSUPPORTED_SPARSE_X)?, x, y),
        }
    }

    fn multiply_transposed(
        &self,
        a: &CudaMatrix,
        x: SparseInput<'_, CudaVector, CudaSparseVector>,
        y: &mut CudaVector,
    ) -> Result<()> {
        if let (CudaMatrix::Cusparse(m), SparseInput::Dense(x)) = (a, x) {
            // The transposed products' baseline: cuSPARSE reads all of A whatever x holds.
            let op = SpmvOp::Transposed;
            return self.vendor.cusparse_spmv(m, x.as_input()?, &mut y.data, op);
        }
        let v = a.rows_view(UNSUPPORTED_TRANSPOSED)?;
        self.sparse_inputs(self.stream())?.transposed(v, x, y)
    }

    fn plan(&self, a: &CudaMatrix) -> Result<CudaPlan> {
        a.plan().copied().ok_or_else(|| Error::Backend {
            backend: BackendKind::Cuda,
            message: match a {
                CudaMatrix::Sparse24(_) => "a 2:4 matrix has no plan on CUDA (one kernel shape, \
                                            launched by its shape)"
                    .into(),
                CudaMatrix::HomogeneousCsr(_) => "a homogeneous CSR matrix has no plan on CUDA \
                                                  (one kernel shape, launched by its shape)"
                    .into(),
                _ => "a vendor baseline's matrix has no macko plan".into(),
            },
        })
    }

    fn synchronize(&self) -> Result<()> {
        self.stream()
            .synchronize()
            .map_err(|e| cuda_error("waiting for queued products", e))
    }

    fn download(&self, v: &CudaVector) -> Result<HostVector> {
        Ok(match &v.data {
            VectorData::F16(a) => HostVector::F16(
                a.download(self.stream(), "a vector")?
                    .into_iter()
                    .map(f16::from_bits)
                    .collect(),
            ),
            VectorData::F32(a) => HostVector::F32(a.download(self.stream(), "a vector")?),
        })
    }

    fn timer(&self) -> &'static str {
        "cuda events"
    }

    fn time_multiply(
        &self,
        a: &[&CudaMatrix],
        x: &CudaVector,
        y: &mut CudaVector,
        batch: usize,
        warmup: usize,
        iters: usize,
    ) -> Result<Vec<f64>> {
        let matrices = a;
        if matrices.is_empty() {
            return Ok(Vec::new());
        }
        self.time_runs(warmup, iters, |i| {
            self.multiply(matrices[i % matrices.len()], x, y, batch)
        })
    }

    fn time_sparse_input(
        &self,
        a: &[&CudaMatrix],
        x: SparseInput<'_, CudaVector, CudaSparseVector>,
        transposed: bool,
        y: &mut CudaVector,
        warmup: usize,
        iters: usize,
    ) -> Result<Vec<f64>> {
        if a.is_empty() {
            return Ok(Vec::new());
        }
        self.time_runs(warmup, iters, |i| {
            self.multiply_sparse_input(a[i % a.len()], x, transposed, y)
        })
    }

    fn sparse_input_timer(&self) -> &'static str {
        "cuda events"
    }

    fn stream_read(&self, bytes: u64, warmup: usize, iters: usize) -> Result<Option<Vec<f64>>> {
        let grid = self
            .caps
            .grid(Kernel::StreamRead, BLOCK, 0, u32::MAX)
            .ok_or_else(|| internal("the streaming-read kernel cannot be resident"))?;
        let copies = timing::stream_copies(bytes, self.gpu.props.l2_bytes);
        let mut bufs = timing::StreamBuffers::new(self.stream(), bytes, copies, grid)?;
        let words = bufs.words;
        let times = self.time_runs(warmup, iters, |i| {
            let n = bufs.copies.len();
            let (copies, out) = (&bufs.copies, &mut bufs.out);
            let copy = copies[i % n].buf();
            self.launcher(self.stream())
                .stream_read(copy, words, out.buf_mut(), grid)
        })?;
        Ok(Some(times))
    }

    fn upload_vendor(&self, m: MatrixRef<'_>, vendor: VendorBaseline) -> Result<CudaMatrix> {
        Ok(match self.vendor.upload(m, vendor)? {
            VendorMatrix::Cublas(d) => CudaMatrix::Cublas(d),
            VendorMatrix::Cusparse(c) => CudaMatrix::Cusparse(*c),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a driver (CI, this repository's build machine) opening must fail with a reason,
    /// never panic; with one it must succeed or say why not.
    #[test]
    fn open_never_panics_and_explains_itself() {
        match open(&CudaConfig::default()) {
            Ok(b) => assert!(b.info().name.contains("sm_")),
            Err(Error::Unavailable { reason, .. }) => assert!(!reason.is_empty()),
            Err(other) => panic!("unexpected error kind: {other}"),
        }
    }

    /// Where a GPU is present: the planner's occupancy (caps.rs) is the driver's, for every
    /// kernel at every shared-memory size a plan may ask for.
    #[test]
    fn occupancy_from_the_capabilities_is_the_drivers() {
        let Ok(b) = CudaBackend::open(&CudaConfig::default()) else {
            return;
        };
        b.gpu.ctx.bind_to_thread().expect("binding the context");
        for kernel in Kernel::ALL {
            let f = b.kernels.get(kernel).pick(Precision::F32);
            let big = matches!(kernel, Kernel::BigPadded | Kernel::BigPlain);
            for block in [if big { caps::BIG_BLOCK } else { BLOCK }] {
                let sizes: Vec<u32> = if kernel.stages_x() {
                    (0..=64).map(|i| b.caps.smem_limit / 64 * i).collect()
                } else {
                    vec![0]
                };
                for smem in sizes {
                    let driver = f
                        .occupancy_max_active_blocks_per_multiprocessor(block, smem as usize, None)
                        .unwrap_or(0);
                    assert_eq!(
                        b.caps.blocks_per_sm(kernel, block, smem),
                        driver,
                        "{kernel:?}, {block} threads, {smem} bytes"
                    );
                }
            }
        }
    }
}

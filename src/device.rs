//! `Device`: run-time choice of a backend, and the opaque handles of matrices and vectors that
//! live on it. Every check that does not depend on the backend (handle ownership, shapes,
//! element types) happens here, once, so backends only compute.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use half::f16;

use crate::backend::{
    self, BackendKind, DeviceInfo, HostVector, MatrixKind, MatrixRef, Precision, VendorBaseline,
};
use crate::dispatch::{AnyBackend, AnyMatrix, AnyVector, Plan};
use crate::error::{Error, Result};
use crate::options::{self, DeviceOptions, Tuning};
use crate::tune::class::MatrixClass;
use crate::tune::loaded::{PlanCacheStatus, TunedPlans};

/// Whether one backend can be used here, and if not, why.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendStatus {
    /// The backend.
    pub backend: BackendKind,
    /// The device it would use, or what is missing.
    pub device: std::result::Result<DeviceInfo, String>,
}

pub(crate) mod sparse_inputs;

static NEXT_DEVICE_ID: AtomicU64 = AtomicU64::new(1);

/// A device, its matrices and its vectors can be shared by threads; this fails to compile if a
/// change to a backend makes one of them lose `Send` or `Sync`.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Device>();
    send_sync::<DeviceMatrix>();
    send_sync::<DeviceVector>();
};

/// A device that multiplies matrices by vectors: a CUDA GPU, a wgpu adapter or the CPU.
///
/// `Device` is `Send + Sync` and cheap to clone (clones share the device): any number of
/// threads may upload, queue products, synchronize and download on it at once, and each gets
/// the results it would get alone (tests/concurrency.rs checks this on every backend). On wgpu,
/// uploads of large matrices and downloads go one at a time through the device's staging
/// buffers, and a download also waits for the work other threads queued before it.
///
/// ```
/// use macko::{Device, MackoMatrix, Precision};
/// use half::f16;
///
/// let dev = Device::auto()?;
/// let w: Vec<f16> = (0..64 * 48).map(|i| f16::from_f32(if i % 2 == 0 { 0.5 } else { 0.0 })).collect();
/// let a = dev.upload(&MackoMatrix::from_dense_f16(64, 48, &w)?)?;
/// let x = dev.upload_vector(&vec![f16::ONE; 48])?;
/// let mut y = dev.zeros(64, Precision::F32)?;
/// dev.spmv(&a, &x, &mut y)?;
/// assert_eq!(dev.download(&y)?.to_f32(), vec![12.0; 64]);
/// # Ok::<(), macko::Error>(())
/// ```
#[derive(Clone)]
pub struct Device {
    backend: Arc<AnyBackend>,
    info: DeviceInfo,
    id: u64,
    /// The plan cache's tuned plans for this device (`crate::tune`), applied at upload.
    tuned: Arc<TunedPlans>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("id", &self.id)
            .field("info", &self.info)
            .finish()
    }
}

/// A matrix on a device. Made by [`Device::upload`]; usable only with that device.
pub struct DeviceMatrix {
    device: u64,
    rows: usize,
    cols: usize,
    format: MatrixKind,
    bytes: u64,
    storage: AnyMatrix,
}

impl DeviceMatrix {
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// The format it is stored in.
    pub fn format(&self) -> MatrixKind {
        self.format
    }
    /// Bytes of the stored arrays (what one product reads, vectors aside).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// A vector on a device, or a batch of vectors of one length (the X or Y of a few-token
/// product, [`Device::spmm`]), stored one after another: row-major `[batch][len]`, the layout of
/// a batch of tokens. Inputs are f16; outputs are f16 or f32.
pub struct DeviceVector {
    device: u64,
    len: usize,
    batch: usize,
    precision: Precision,
    storage: AnyVector,
}

impl DeviceVector {
    /// Number of elements of each vector (the matrix's columns for an x, rows for a y).
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether its vectors have no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Number of vectors: 1 for one made by [`Device::upload_vector`] or [`Device::zeros`].
    pub fn batch(&self) -> usize {
        self.batch
    }
    /// Element type.
    pub fn precision(&self) -> Precision {
        self.precision
    }
}

fn precision_name(p: Precision) -> &'static str {
    match p {
        Precision::F16 => "f16",
        Precision::F32 => "f32",
    }
}

/// Opens one backend, or says why it cannot be opened. `tuning` is the one `opts` resolves to
/// ([`options::resolve_tuning`]).
fn open_backend(
    kind: BackendKind,
    opts: &DeviceOptions,
    tuning: &options::Tuning,
) -> Result<AnyBackend> {
    let _ = tuning;
    match kind {
        BackendKind::Cpu => Ok(AnyBackend::Cpu(backend::cpu::CpuBackend::new())),
        #[cfg(feature = "wgpu")]
        BackendKind::Wgpu => backend::wgpu::open(&backend::wgpu::WgpuConfig {
            allow_software_adapter: opts.allow_software_adapter,
            subgroups: opts.wgpu_subgroups,
            max_binding_bytes: opts.max_binding_bytes,
            tuning: tuning.wgpu.clone(),
        })
        .map(AnyBackend::Wgpu),
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => backend::cuda::open(&backend::cuda::CudaConfig {
            ordinal: opts.cuda_ordinal,
            tuning: tuning.cuda.clone(),
            kernel_cache: crate::options::resolve_kernel_cache(),
        })
        .map(AnyBackend::Cuda),
        #[allow(unreachable_patterns)]
        other => {
            let _ = opts;
            Err(Error::Unavailable {
                backend: other,
                reason: format!("not compiled in (cargo feature `{other}` is off)"),
            })
        }
    }
}

impl Device {
    /// The best device here: a CUDA GPU, else a hardware wgpu adapter, else the CPU. Never
    /// fails for want of a GPU; use [`Device::available`] to see why one was passed over.
    pub fn auto() -> Result<Self> {
        Self::with_options(&DeviceOptions::default())
    }

    /// The device `MACKO_BACKEND` names (an error saying why, if it is unavailable), else
    /// [`Device::auto`]. `MACKO_WGPU_SUBGROUPS=0` turns off wgpu's subgroup kernels.
    pub fn from_env() -> Result<Self> {
        Self::with_options(&DeviceOptions::from_env()?)
    }

    /// A device of one backend, asked for by name (software wgpu adapters allowed).
    pub fn new(kind: BackendKind) -> Result<Self> {
        Self::with_options(&DeviceOptions::for_backend(kind))
    }

    /// A device chosen by `opts`. Where `opts` carries no tuning of its own (`None`, the
    /// default), `MACKO_TUNING` applies (see [`DeviceOptions::tuning`]), so the sweep scripts
    /// reach every device a program or test opens; a bad item is an error naming it.
    pub fn with_options(opts: &DeviceOptions) -> Result<Self> {
        let tuning = options::resolve_tuning(opts)?;
        let backend = match opts.backend {
            Some(kind) => open_backend(kind, opts, &tuning)?,
            None => BackendKind::ALL
                .iter()
                .find_map(|&kind| open_backend(kind, opts, &tuning).ok())
                .ok_or(Error::Unavailable {
                    backend: BackendKind::Cpu,
                    reason: "no backend could be opened".into(),
                })?,
        };
        let info = backend.info();
        let tuned = match options::resolve_plan_cache(opts) {
            Ok(path) => TunedPlans::load(path, &info),
            Err(why) => TunedPlans::none(why),
        };
        Ok(Self {
            backend: Arc::new(backend),
            info,
            id: NEXT_DEVICE_ID.fetch_add(1, Ordering::Relaxed),
            tuned: Arc::new(tuned),
        })
    }

    /// Every backend, with the device it would use or the reason it is unavailable.
    /// Software wgpu adapters are listed too (they are usable when asked for by name).
    /// Each is opened as [`Device::with_options`] would open it, `MACKO_TUNING` included.
    pub fn available() -> Vec<BackendStatus> {
        BackendKind::ALL
            .iter()
            .map(|&kind| BackendStatus {
                backend: kind,
                device: options::resolve_tuning(&DeviceOptions::for_backend(kind))
                    .and_then(|t| open_backend(kind, &DeviceOptions::for_backend(kind), &t))
                    .map(|b| b.info())
                    .map_err(|e| match e {
                        Error::Unavailable { reason, .. } => reason,
                        other => other.to_string(),
                    }),
            })
            .collect()
    }

    /// The backend of this device.
    pub fn kind(&self) -> BackendKind {
        self.info.backend
    }

    /// Name and properties.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// One line: "cuda: NVIDIA H100 80GB HBM3 (sm_90)".
    pub fn describe(&self) -> String {
        format!("{}: {}", self.info.backend, self.info.name)
    }

    /// The CUDA backend and `a`'s CUDA storage, for [`crate::interop`].
    #[cfg(feature = "cuda")]
    pub(crate) fn cuda_handles<'a>(
        &'a self,
        a: &'a DeviceMatrix,
    ) -> Result<(
        &'a crate::backend::cuda::CudaBackend,
        &'a crate::backend::cuda::CudaMatrix,
    )> {
        self.check_owner("matrix", a.device)?;
        match (&*self.backend, &a.storage) {
            (AnyBackend::Cuda(b), AnyMatrix::Cuda(m)) => Ok((b, m)),
            _ => Err(Error::Backend {
                backend: self.kind(),
                message: "products on framework (CUDA) pointers need a cuda device".into(),
            }),
        }
    }

    fn check_owner(&self, what: &'static str, handle_device: u64) -> Result<()> {
        if handle_device != self.id {
            return Err(Error::WrongDevice {
                what,
                handle_device,
                device: self.id,
            });
        }
        Ok(())
    }

    /// Copies a matrix of any format to the device (every backend takes every format).
    ///
    /// Where the plan cache ([`crate::tune`]) has a tuned plan for the matrix's class on this
    /// device, the matrix is planned with it; should the device refuse that plan (a cache
    /// written for a matrix it no longer fits), with the rules' own.
    pub fn upload<'a>(&self, m: impl Into<MatrixRef<'a>>) -> Result<DeviceMatrix> {
        let m = m.into();
        if let Some(tuning) = self.tuned.get(&MatrixClass::of(m)) {
            if let Ok(storage) = self.backend.upload_matrix_tuned(m, tuning) {
                return self.wrap_matrix(m, storage);
            }
        }
        self.wrap_matrix(m, self.backend.upload_matrix(m)?)
    }

    /// Uploads `m` planned with `tuning`'s choices instead of the device's own (the tuner's
    /// candidates).
    pub(crate) fn upload_tuned(&self, m: MatrixRef<'_>, tuning: &Tuning) -> Result<DeviceMatrix> {
        self.wrap_matrix(m, self.backend.upload_matrix_tuned(m, tuning)?)
    }

    /// What this device made of the plan cache when it opened: the file and how many tuned
    /// classes apply here, or why none do.
    pub fn plan_cache(&self) -> &PlanCacheStatus {
        self.tuned.status()
    }

    /// A handle for storage the backend made from `m`.
    fn wrap_matrix(&self, m: MatrixRef<'_>, storage: AnyMatrix) -> Result<DeviceMatrix> {
        let (rows, cols) = m.shape();
        Ok(DeviceMatrix {
            device: self.id,
            rows,
            cols,
            format: m.kind(),
            bytes: m.bytes(),
            storage,
        })
    }

    /// Copies an f16 vector (an x) to the device.
    pub fn upload_vector(&self, x: &[f16]) -> Result<DeviceVector> {
        self.upload_batch(x, 1)
    }

    /// Copies `batch` f16 vectors (the X of [`Device::spmm`]) to the device: `x` holds them one
    /// after another, row-major `[batch][cols]`, as a batch of token activations is laid out.
    /// An error if `batch` is 0 or does not divide `x.len()`.
    pub fn upload_batch(&self, x: &[f16], batch: usize) -> Result<DeviceVector> {
        if batch == 0 || x.len() % batch != 0 {
            return Err(Error::BadBatch {
                batch,
                elements: x.len(),
            });
        }
        Ok(DeviceVector {
            device: self.id,
            len: x.len() / batch,
            batch,
            precision: Precision::F16,
            storage: self.backend.upload_vector(x)?,
        })
    }

    /// A zero-filled vector (a y) of `len` elements of the given precision.
    pub fn zeros(&self, len: usize, precision: Precision) -> Result<DeviceVector> {
        self.zeros_batch(len, 1, precision)
    }

    /// `batch` zero-filled vectors of `len` elements (the Y of [`Device::spmm`]), stored
    /// row-major `[batch][len]`. An error if `batch` is 0 or the total overflows.
    pub fn zeros_batch(
        &self,
        len: usize,
        batch: usize,
        precision: Precision,
    ) -> Result<DeviceVector> {
        let total = len
            .checked_mul(batch)
            .filter(|_| batch > 0)
            .ok_or(Error::BadBatch {
                batch,
                elements: len.saturating_mul(batch),
            })?;
        Ok(DeviceVector {
            device: self.id,
            len,
            batch,
            precision,
            storage: self.backend.alloc_vector(total, precision)?,
        })
    }

    /// Enqueues y = A·x (accumulated in f32, stored in y's precision). Returns once the product
    /// is queued: many can be queued before one [`Device::synchronize`] or download. `x` and `y`
    /// are single vectors; [`Device::spmm`] multiplies a batch.
    pub fn spmv(&self, a: &DeviceMatrix, x: &DeviceVector, y: &mut DeviceVector) -> Result<()> {
        if x.batch != 1 || y.batch != 1 {
            return Err(Error::ShapeMismatch {
                what: "vectors in x and y (spmv multiplies one vector; spmm a batch)",
                expected: 1,
                found: x.batch.max(y.batch),
            });
        }
        self.spmm(a, x, y)
    }

    /// Enqueues the few-token product Y = A·X: each of X's vectors ([`Device::upload_batch`],
    /// row-major `[batch][cols]`) times A into the same vector of Y ([`Device::zeros_batch`],
    /// `[batch][rows]`), accumulated in f32 and stored in Y's precision. The matrix is read once
    /// for up to [`crate::backend::MAX_CHUNK`] vectors (a larger batch takes one pass per chunk
    /// of at most that many); a batch of one is exactly [`Device::spmv`]. Queued like `spmv`.
    ///
    /// ```
    /// use macko::{Device, MackoMatrix, Precision};
    /// use macko::half::f16;
    ///
    /// let dev = Device::auto()?;
    /// let w: Vec<f16> = (0..4 * 6).map(|i| f16::from_f32(if i % 3 == 0 { 1.0 } else { 0.0 })).collect();
    /// let a = dev.upload(&MackoMatrix::from_dense_f16(4, 6, &w)?)?;
    /// // Three tokens of 6 features each, one after another.
    /// let x: Vec<f16> = (0..3 * 6).map(|i| f16::from_f32((i / 6) as f32)).collect();
    /// let x = dev.upload_batch(&x, 3)?;
    /// let mut y = dev.zeros_batch(4, 3, Precision::F32)?;
    /// dev.spmm(&a, &x, &mut y)?;
    /// // Rows hold 2 ones each: token t gives 2·t in every row.
    /// assert_eq!(dev.download(&y)?.to_f32(), [[0.0; 4], [2.0; 4], [4.0; 4]].concat());
    /// # Ok::<(), macko::Error>(())
    /// ```
    pub fn spmm(&self, a: &DeviceMatrix, x: &DeviceVector, y: &mut DeviceVector) -> Result<()> {
        self.check_product(a, x, y)?;
        self.backend
            .multiply(&a.storage, &x.storage, &mut y.storage, x.batch)
    }

    /// The checks every product makes: owners, lengths, batches, x's element type.
    fn check_product(&self, a: &DeviceMatrix, x: &DeviceVector, y: &DeviceVector) -> Result<()> {
        self.check_owner("matrix", a.device)?;
        self.check_owner("x", x.device)?;
        self.check_owner("y", y.device)?;
        if x.len != a.cols {
            return Err(Error::ShapeMismatch {
                what: "x length (matrix columns)",
                expected: a.cols,
                found: x.len,
            });
        }
        if y.len != a.rows {
            return Err(Error::ShapeMismatch {
                what: "y length (matrix rows)",
                expected: a.rows,
                found: y.len,
            });
        }
        if y.batch != x.batch {
            return Err(Error::ShapeMismatch {
                what: "y vectors (one per vector of x)",
                expected: x.batch,
                found: y.batch,
            });
        }
        if x.precision != Precision::F16 {
            return Err(Error::WrongElementType {
                what: "x",
                expected: "f16",
                found: precision_name(x.precision),
            });
        }
        Ok(())
    }

    /// The plan `a` is multiplied with, computed once when it was uploaded (which kernel, grid,
    /// layout): for tests, `macko info` and measurements. An error for a matrix uploaded for a
    /// vendor baseline.
    #[doc(hidden)]
    pub fn plan(&self, a: &DeviceMatrix) -> Result<Plan> {
        self.check_owner("matrix", a.device)?;
        self.backend.plan(&a.storage)
    }

    /// Waits until every queued product is done.
    pub fn synchronize(&self) -> Result<()> {
        self.backend.synchronize()
    }

    /// Waits for queued work, then copies a vector back to the host.
    pub fn download(&self, v: &DeviceVector) -> Result<HostVector> {
        self.check_owner("vector", v.device)?;
        self.backend.download(&v.storage)
    }

    /// Uploads a matrix for a vendor library's product (cuBLAS, cuSPARSE), for benchmarks.
    pub fn upload_vendor<'a>(
        &self,
        m: impl Into<MatrixRef<'a>>,
        vendor: VendorBaseline,
    ) -> Result<DeviceMatrix> {
        let m = m.into();
        self.wrap_matrix(m, self.backend.upload_vendor(m, vendor)?)
    }

    /// Times products Y = A·X ([`Device::spmm`]; y = A·x for single vectors) with the device's
    /// own timer ([`Device::timer`] says which), cycling through `a` (copies of one matrix).
    /// Returns seconds per product.
    pub fn time_spmv(
        &self,
        a: &[&DeviceMatrix],
        x: &DeviceVector,
        y: &mut DeviceVector,
        warmup: usize,
        iters: usize,
    ) -> Result<Vec<f64>> {
        let Some(first) = self.rotated_copies(a)? else {
            return Ok(Vec::new());
        };
        self.check_product(first, x, y)?;
        let storages: Vec<&AnyMatrix> = a.iter().map(|m| &m.storage).collect();
        self.backend.time_multiply(
            &storages,
            &x.storage,
            &mut y.storage,
            x.batch,
            warmup,
            iters,
        )
    }

    /// The first of `a`, copies of one matrix that a timing cycles through, after checking
    /// that they share its shape and belong to this device; `None` for no copy.
    fn rotated_copies<'a>(&self, a: &[&'a DeviceMatrix]) -> Result<Option<&'a DeviceMatrix>> {
        let Some(first) = a.first() else {
            return Ok(None);
        };
        for m in a {
            for (what, expected, found) in [
                ("rows of rotated copies", first.rows, m.rows),
                ("columns of rotated copies", first.cols, m.cols),
            ] {
                if expected != found {
                    return Err(Error::ShapeMismatch {
                        what,
                        expected,
                        found,
                    });
                }
            }
            self.check_owner("matrix", m.device)?;
        }
        Ok(Some(first))
    }

    /// How [`Device::time_spmv`] measures: "cuda events", "wgpu timestamp queries", or "wall
    /// clock" (where the device has no timer of its own).
    pub fn timer(&self) -> &'static str {
        self.backend.timer()
    }

    /// The device's ceiling: seconds per pass of a streaming-read kernel over `bytes` bytes,
    /// `iters` timed passes after `warmup`; `None` where the backend has no such kernel.
    pub fn stream_read(&self, bytes: u64, warmup: usize, iters: usize) -> Result<Option<Vec<f64>>> {
        self.backend.stream_read(bytes, warmup, iters)
    }
}

//! The backend trait and what every backend shares. One module per backend: `cpu` (always),
//! `wgpu` (feature `wgpu`), `cuda` (feature `cuda`). A backend receives only validated matrices
//! from `macko-format` and shapes already checked by [`crate::Device`]; it owns its storage,
//! which callers see only as opaque handles.

use std::str::FromStr;

use half::f16;
use macko_format::{OutputPrecision, SparseVector};

use crate::error::{Error, Result};

pub use kind::BackendKind;
pub use tuning::ForcedPlan;

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub(crate) mod kind;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub(crate) mod sparse24_rows;
mod tuning;
#[cfg(feature = "wgpu")]
pub mod wgpu;

impl FromStr for BackendKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(BackendKind::Cpu),
            "wgpu" => Ok(BackendKind::Wgpu),
            "cuda" => Ok(BackendKind::Cuda),
            _ => Err(Error::UnknownBackend { name: s.into() }),
        }
    }
}

/// A host matrix in any format, and which format a device matrix is stored in: the format
/// crate's own types, so a matrix loaded from a file goes to a device unchanged.
pub use macko_format::{MatrixKind, MatrixRef};

/// Element type of a device vector: inputs are f16, outputs f16 or f32.
pub type Precision = OutputPrecision;

/// A vector brought back to the host.
#[derive(Debug, Clone, PartialEq)]
pub enum HostVector {
    /// binary16 elements.
    F16(Vec<f16>),
    /// binary32 elements.
    F32(Vec<f32>),
}

impl HostVector {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            HostVector::F16(v) => v.len(),
            HostVector::F32(v) => v.len(),
        }
    }
    /// Whether it has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The elements widened to f64 (exact).
    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            HostVector::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
            HostVector::F32(v) => v.iter().map(|&x| x as f64).collect(),
        }
    }
    /// The elements as f32 (exact for both types).
    pub fn to_f32(&self) -> Vec<f32> {
        match self {
            HostVector::F16(v) => v.iter().map(|x| x.to_f32()).collect(),
            HostVector::F32(v) => v.clone(),
        }
    }
    /// The precision of the elements.
    pub fn precision(&self) -> Precision {
        match self {
            HostVector::F16(_) => Precision::F16,
            HostVector::F32(_) => Precision::F32,
        }
    }
}

/// What a device reports about itself, for `macko info` and [`crate::Device::describe`].
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceInfo {
    /// The backend.
    pub backend: BackendKind,
    /// Human-readable device name, with the graphics API where there is a choice of one
    /// ("NVIDIA H100 80GB HBM3", "llvmpipe (LLVM 15.0.6, 256 bits) via Vulkan").
    pub name: String,
    /// Key properties as `(name, value)` pairs, in display order.
    pub properties: Vec<(String, String)>,
}

/// One implementation of the products on one device, with its own types of matrices, vectors
/// and plans. Methods receive handles this backend made ([`crate::Device`] keeps each backend's
/// handles apart and checks the device id of every handle first) and shapes that fit. The
/// device layer holds the backends compiled in as an enum, so there is no dynamic dispatch and
/// no downcast between a handle and its backend.
pub(crate) trait Backend: Send + Sync {
    /// A matrix on this device.
    type Matrix: Send + Sync;
    /// A vector on this device.
    type Vector: Send + Sync;
    /// How a matrix is multiplied, computed once at upload (see [`crate::Plan`]).
    type Plan;

    /// A sparse vector on this device (every backend has one; a backend without products on
    /// sparse inputs would refuse them in [`Backend::upload_sparse_vector`], the default).
    type SparseVector: Send + Sync;

    /// Name, backend and key properties.
    fn info(&self) -> DeviceInfo;
    /// Copies a validated host matrix to the device.
    fn upload_matrix(&self, m: MatrixRef<'_>) -> Result<Self::Matrix>;
    /// Copies an f16 vector to the device.
    fn upload_vector(&self, x: &[f16]) -> Result<Self::Vector>;
    /// Allocates a zero-filled vector of `len` elements.
    fn alloc_vector(&self, len: usize, precision: Precision) -> Result<Self::Vector>;
    /// Enqueues Y = A·X for `batch` vectors: `x` holds `batch × cols` elements (row-major
    /// `[batch][cols]`), `y` holds `batch × rows` (`[batch][rows]`); `batch` ≥ 1, any size (a
    /// backend works through it in [`chunks`]). `batch == 1` is the single-vector product,
    /// y = A·x. May return before the product is done; later calls on the same device see its
    /// result (products run in order).
    fn multiply(
        &self,
        a: &Self::Matrix,
        x: &Self::Vector,
        y: &mut Self::Vector,
        batch: usize,
    ) -> Result<()>;
    /// Copies a validated sparse vector to the device. Unsupported by default: a backend
    /// without products on sparse inputs refuses it here, before any product is queued.
    fn upload_sparse_vector(&self, x: &SparseVector) -> Result<Self::SparseVector> {
        let _ = x;
        Err(Error::Unsupported {
            backend: self.info().backend,
            what: UNSUPPORTED_SPARSE_X,
        })
    }
    /// Enqueues y = A·x for a sparse x (`x` has `cols` elements, `y` `rows`): only x's
    /// non-zeros contribute (`reference::spmv_sparse_x`). Unsupported by default.
    fn multiply_sparse_x(
        &self,
        a: &Self::Matrix,
        x: &Self::SparseVector,
        y: &mut Self::Vector,
    ) -> Result<()> {
        let _ = (a, x, y);
        Err(Error::Unsupported {
            backend: self.info().backend,
            what: UNSUPPORTED_SPARSE_X,
        })
    }
    /// Enqueues y = Aᵀ·x (`x` has `rows` elements, dense or sparse, `y` `cols`), reading only
    /// the rows of A where x is non-zero (`reference::spmv_transposed`). Unsupported by
    /// default.
    fn multiply_transposed(
        &self,
        a: &Self::Matrix,
        x: SparseInput<'_, Self::Vector, Self::SparseVector>,
        y: &mut Self::Vector,
    ) -> Result<()> {
        let _ = (a, x, y);
        Err(Error::Unsupported {
            backend: self.info().backend,
            what: UNSUPPORTED_TRANSPOSED,
        })
    }
    /// The plan `a` was uploaded with (an error for a vendor baseline's matrix, which has none).
    fn plan(&self, a: &Self::Matrix) -> Result<Self::Plan>;
    /// Waits until every enqueued product is done.
    fn synchronize(&self) -> Result<()>;
    /// Waits for pending work, then copies a vector back.
    fn download(&self, v: &Self::Vector) -> Result<HostVector>;

    /// How [`Backend::time_multiply`] measures: "cuda events", "wgpu timestamp queries", or
    /// "wall clock" (the default, and the only choice where the device has no timer).
    fn timer(&self) -> &'static str {
        "wall clock"
    }

    /// Runs `warmup` untimed products of `batch` vectors ([`Backend::multiply`]), then `iters`
    /// timed ones, cycling through the matrices of `a` (copies of one matrix, so that inputs
    /// larger than the cache are rotated). Returns the seconds of each timed product. The
    /// default times on the host clock around a synchronisation; GPU backends override it with
    /// device timers.
    fn time_multiply(
        &self,
        a: &[&Self::Matrix],
        x: &Self::Vector,
        y: &mut Self::Vector,
        batch: usize,
        warmup: usize,
        iters: usize,
    ) -> Result<Vec<f64>> {
        if a.is_empty() {
            return Ok(Vec::new());
        }
        let mut times = Vec::with_capacity(iters);
        for i in 0..warmup + iters {
            let m = a[i % a.len()];
            let start = std::time::Instant::now();
            self.multiply(m, x, y, batch)?;
            self.synchronize()?;
            if i >= warmup {
                times.push(start.elapsed().as_secs_f64());
            }
        }
        Ok(times)
    }

    /// Enqueues one product with a sparse input: y = Aᵀ·x when `transposed` (x dense or
    /// sparse, [`Backend::multiply_transposed`]), else y = A·x with x sparse
    /// ([`Backend::multiply_sparse_x`]; a dense x there is an ordinary product, refused).
    fn multiply_sparse_input(
        &self,
        a: &Self::Matrix,
        x: SparseInput<'_, Self::Vector, Self::SparseVector>,
        transposed: bool,
        y: &mut Self::Vector,
    ) -> Result<()> {
        match (transposed, x) {
            (true, x) => self.multiply_transposed(a, x, y),
            (false, SparseInput::Sparse(x)) => self.multiply_sparse_x(a, x, y),
            (false, SparseInput::Dense(_)) => Err(Error::Backend {
                backend: self.info().backend,
                message: "internal: a sparse-input product of a dense x that is not transposed"
                    .into(),
            }),
        }
    }

    /// [`Backend::time_multiply`] for a product with a sparse input
    /// ([`Backend::multiply_sparse_input`]): `warmup` untimed, then `iters` timed, cycling
    /// through `a`. The default times on the host clock around a synchronisation
    /// ([`Backend::sparse_input_timer`] says which timer a backend uses).
    fn time_sparse_input(
        &self,
        a: &[&Self::Matrix],
        x: SparseInput<'_, Self::Vector, Self::SparseVector>,
        transposed: bool,
        y: &mut Self::Vector,
        warmup: usize,
        iters: usize,
    ) -> Result<Vec<f64>> {
        let mut times = Vec::with_capacity(iters);
        for i in 0..(warmup + iters) * usize::from(!a.is_empty()) {
            let m = a[i % a.len()];
            let start = std::time::Instant::now();
            self.multiply_sparse_input(m, x, transposed, y)?;
            self.synchronize()?;
            if i >= warmup {
                times.push(start.elapsed().as_secs_f64());
            }
        }
        Ok(times)
    }

    /// How [`Backend::time_sparse_input`] measures (see [`Backend::timer`]).
    fn sparse_input_timer(&self) -> &'static str {
        "wall clock"
    }

    /// The device's ceiling: seconds per pass of a streaming-read kernel over `bytes` bytes
    /// (reduced so nothing is optimised away), `iters` timed passes after `warmup`. `None` where
    /// the backend has no such kernel.
    fn stream_read(&self, bytes: u64, warmup: usize, iters: usize) -> Result<Option<Vec<f64>>> {
        let _ = (bytes, warmup, iters);
        Ok(None)
    }

    /// Uploads `m` for a vendor library's product instead of macko's own kernel (benchmarks
    /// only). Unavailable by default.
    fn upload_vendor(&self, m: MatrixRef<'_>, vendor: VendorBaseline) -> Result<Self::Matrix> {
        let _ = m;
        Err(Error::Unavailable {
            backend: self.info().backend,
            reason: format!("{} is not a baseline of this backend", vendor.name()),
        })
    }
}

/// The x of a product with a sparse input: a dense vector whose zeros are skipped, or a sparse
/// vector (its stored indices and values).
pub(crate) enum SparseInput<'a, V, S> {
    /// A dense vector on the device.
    Dense(&'a V),
    /// A sparse vector on the device.
    Sparse(&'a S),
}

// By hand: a derive would ask V and S to be Copy, where only the references are copied.
impl<V, S> Clone for SparseInput<'_, V, S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<V, S> Copy for SparseInput<'_, V, S> {}

/// [`Error::Unsupported`]'s `what` for a product with a sparse x (or its upload) on a backend
/// without such kernels: "cannot multiply sparse vectors (SparseVector) by matrices yet".
pub const UNSUPPORTED_SPARSE_X: &str = "sparse vectors (SparseVector) by";

/// [`Error::Unsupported`]'s `what` for a transposed product on a backend without such
/// kernels: "cannot multiply transposed (y = Aᵀ·x) matrices yet".
pub const UNSUPPORTED_TRANSPOSED: &str = "transposed (y = Aᵀ·x)";

/// Most vectors one pass over the matrix multiplies: a larger batch is worked through in
/// chunks (`backend::chunks`) of at most this many. Sixteen f32 sums per row still fit a GPU
/// lane's registers, and two n = 8 tiles of a tensor-core product.
pub const MAX_CHUNK: usize = 16;

/// Vectors `first .. first + count` of a batch: what one pass over the matrix multiplies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Chunk {
    /// The first vector.
    pub first: usize,
    /// How many vectors (1 to [`MAX_CHUNK`]).
    pub count: usize,
}

/// A batch of `batch` vectors cut into the fewest chunks of at most [`MAX_CHUNK`], as even as
/// possible (17 vectors are 9 + 8, not 16 + 1), so that a batch above one never has a chunk of
/// one vector and every chunk reads the matrix for as many vectors as it can.
pub(crate) fn chunks(batch: usize) -> impl Iterator<Item = Chunk> {
    let n = batch.div_ceil(MAX_CHUNK).max(1);
    let (base, extra) = (batch / n, batch % n);
    (0..n)
        .scan(0usize, move |first, k| {
            let count = base + usize::from(k < extra);
            let chunk = Chunk {
                first: *first,
                count,
            };
            *first += count;
            Some(chunk)
        })
        .filter(|c| c.count > 0)
}

/// A vendor library's product, measured beside macko's kernels as the baseline users would
/// otherwise pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VendorBaseline {
    /// Dense f16 GEMV through cuBLAS (`cublasGemmEx`, f16 in, f32 compute).
    CublasDense,
    /// CSR SpMV through cuSPARSE (`cusparseSpMV`, f16 values, 32-bit indices, f32 compute).
    CusparseCsr,
}

impl VendorBaseline {
    /// Short name ("cublas", "cusparse").
    pub fn name(self) -> &'static str {
        match self {
            VendorBaseline::CublasDense => "cublas",
            VendorBaseline::CusparseCsr => "cusparse",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_batch_evenly_in_few_passes() {
        assert_eq!(chunks(0).count(), 0);
        for batch in 1..=200usize {
            let cs: Vec<Chunk> = chunks(batch).collect();
            assert_eq!(cs.len(), batch.div_ceil(MAX_CHUNK), "batch {batch}");
            let mut next = 0;
            for c in &cs {
                assert_eq!(c.first, next, "batch {batch}: chunks are contiguous");
                assert!((1..=MAX_CHUNK).contains(&c.count), "batch {batch}: {c:?}");
                assert!(batch == 1 || c.count > 1, "batch {batch}: a chunk of one");
                next += c.count;
            }
            assert_eq!(next, batch);
            let (lo, hi) = (
                cs.iter().map(|c| c.count).min(),
                cs.iter().map(|c| c.count).max(),
            );
            assert!(
                hi.unwrap_or(0) - lo.unwrap_or(0) <= 1,
                "batch {batch}: uneven {cs:?}"
            );
        }
    }
}

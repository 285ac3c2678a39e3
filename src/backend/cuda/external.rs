//! Products on memory another framework owns: x and y are raw device pointers (a PyTorch
//! tensor's `data_ptr()`), and the kernels are queued on that framework's stream, so they are
//! ordered with its work (and captured into its CUDA graphs) without any host synchronization
//! or copy. The pointers are wrapped for the duration of the call and never freed here.
//!
//! The context is the device's primary context, the one the CUDA runtime (and so PyTorch)
//! uses: pointers and streams of one are valid in the other.

use std::mem::ManuallyDrop;
use std::sync::Arc;

use cudarc::driver::{sys, CudaStream};

use super::memory::{CudaVector, DeviceArray, VectorData};
use super::{CudaBackend, CudaMatrix};
use crate::backend::{BackendKind, Precision};
use crate::error::{Error, Result};
use crate::interop::CudaPointers;

/// A vector over memory this backend does not own: leaked, not freed, when dropped.
struct Borrowed(ManuallyDrop<CudaVector>);

impl Drop for Borrowed {
    fn drop(&mut self) {
        // SAFETY: taken once, here, and never used again.
        let v = unsafe { ManuallyDrop::take(&mut self.0) };
        match v.data {
            VectorData::F16(a) => drop(a.into_leaked()),
            VectorData::F32(a) => drop(a.into_leaked()),
        }
    }
}

impl Borrowed {
    /// # Safety
    /// `ptr` must address `len` elements of the precision's type on this device, alive and
    /// unaliased by other writes for as long as the queued work runs.
    unsafe fn new(stream: &Arc<CudaStream>, ptr: u64, len: usize, precision: Precision) -> Self {
        let data = match precision {
            Precision::F16 => VectorData::F16(DeviceArray::borrowed(stream, ptr, len)),
            Precision::F32 => VectorData::F32(DeviceArray::borrowed(stream, ptr, len)),
        };
        Self(ManuallyDrop::new(CudaVector { data }))
    }
}

impl CudaBackend {
    /// Queues Y = A·X on the framework's stream, X and Y given by pointers (see
    /// [`crate::Device::spmm_cuda_pointers`] for the contract the caller keeps).
    ///
    /// # Safety
    /// As [`crate::Device::spmm_cuda_pointers`].
    pub(crate) unsafe fn product_external(&self, a: &CudaMatrix, p: &CudaPointers) -> Result<()> {
        if matches!(a, CudaMatrix::Cublas(_) | CudaMatrix::Cusparse(_)) {
            return Err(Error::Backend {
                backend: BackendKind::Cuda,
                message: "a matrix uploaded for a vendor baseline (cuBLAS, cuSPARSE) is \
                          multiplied only through Device::spmv/spmm"
                    .into(),
            });
        }
        let (rows, cols) = (a.shape().0 as usize, a.shape().1 as usize);
        if p.batch == 0 {
            return Ok(());
        }
        let stream = self
            .gpu
            .ctx
            .wrap_borrowed_stream(p.stream as usize as sys::CUstream);
        let (Some(x_len), Some(y_len)) = (p.batch.checked_mul(cols), p.batch.checked_mul(rows))
        else {
            return Err(Error::BadBatch {
                batch: p.batch,
                elements: p.batch.saturating_mul(cols.max(rows)),
            });
        };
        let x = Borrowed::new(&stream, p.x, x_len, Precision::F16);
        let mut y = Borrowed::new(&stream, p.y, y_len, p.y_precision);
        if p.batch == 1 {
            self.product(&stream, a, &x.0, &mut y.0)
        } else {
            self.product_batch(&stream, a, &x.0, &mut y.0, p.batch)
        }
    }
}

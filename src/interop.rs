//! Products on device memory another framework owns, for bindings such as the Python
//! package's PyTorch support (`python/macko/torch.py`): x and y are the framework's buffers,
//! given as raw pointers, and the product is queued on the framework's stream.
//!
//! Only the CUDA backend has this: CUDA pointers and streams of the CUDA runtime (PyTorch's)
//! are valid for macko's kernels because both use the device's primary context.

use crate::backend::Precision;
#[cfg(feature = "cuda")]
use crate::{
    backend::BackendKind,
    device::{Device, DeviceMatrix},
    error::{Error, Result},
};

/// Where a product on a framework's CUDA memory reads, writes and queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CudaPointers {
    /// X: `batch × cols` binary16 elements, row-major `[batch][cols]`, 16-byte aligned.
    pub x: u64,
    /// Y: `batch × rows` elements of `y_precision`, row-major `[batch][rows]`, 16-byte aligned.
    pub y: u64,
    /// Vectors in X and Y (0 queues nothing).
    pub batch: usize,
    /// Y's element type.
    pub y_precision: Precision,
    /// The `CUstream` to queue on (0: the legacy default stream).
    pub stream: u64,
}

/// The alignment [`CudaPointers`] asks of x and y: the kernels read x in 16-byte words.
pub const CUDA_POINTER_ALIGN: u64 = 16;

#[cfg(feature = "cuda")]
impl Device {
    /// Queues Y = A·X (y = A·x for `batch` = 1) on a framework's CUDA stream, with X and Y in
    /// its memory: no copy, no host synchronization. Errors: a device of another backend
    /// (`Unsupported`), a matrix of another device (`WrongDevice`), a misaligned pointer
    /// (`Backend`), a launch failure.
    ///
    /// # Safety
    /// The caller guarantees what the library cannot check:
    /// - `x` and `y` address at least `batch × cols` binary16 and `batch × rows` elements of
    ///   `y_precision` on this device (`a`'s shape), and Y does not overlap X;
    /// - `stream` is a live stream of this device's primary context;
    /// - the buffers, and `a`, stay alive until the queued work is done (the framework's
    ///   stream order, not the host call, says when);
    /// - `a` was uploaded and then [`Device::synchronize`]d before its first product here (its
    ///   upload was queued on the device's own stream);
    /// - one matrix is not multiplied on two streams at once (its scratch buffers are shared).
    pub unsafe fn spmm_cuda_pointers(&self, a: &DeviceMatrix, p: &CudaPointers) -> Result<()> {
        for (what, ptr) in [("x", p.x), ("y", p.y)] {
            if ptr % CUDA_POINTER_ALIGN != 0 {
                return Err(Error::Backend {
                    backend: BackendKind::Cuda,
                    message: format!(
                        "{what} at {ptr:#x} is not {CUDA_POINTER_ALIGN}-byte aligned; \
                         pass a buffer of its own (a copy of the view)"
                    ),
                });
            }
        }
        let (backend, matrix) = self.cuda_handles(a)?;
        backend.product_external(matrix, p)
    }
}

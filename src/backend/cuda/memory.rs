//! Device storage of the CUDA backend: arrays, matrices in each format, vectors.
//!
//! Every buffer lives on the backend's one stream (allocated, filled, read and freed there in
//! order), so a buffer dropped while a queued product still reads it is freed only after that
//! product: cudarc frees with `cuMemFreeAsync` on the same stream.

use std::sync::Arc;

use cudarc::driver::{sys, CudaSlice, CudaStream, DeviceRepr, DriverError, ValidAsZeroBits};

use super::errors::{cuda_error, internal};
use super::kernels::{DenseQuantLayout, QuantKernels};
use super::plan::CudaPlan;
use super::split::SplitTable;
use crate::backend::BackendKind;
use crate::error::{Error, Result};

/// Largest row or column count the kernels accept: they index with 32-bit unsigned integers and
/// step rows by the grid's warp count, which must not overflow.
pub(crate) const MAX_DIM: usize = i32::MAX as usize;

/// A device array of `len` elements. CUDA refuses zero-byte allocations on some paths, so an
/// empty array still holds one (zeroed, never read) element.
pub(crate) struct DeviceArray<T> {
    buf: CudaSlice<T>,
    len: usize,
}

/// Maps an allocation failure to [`Error::OutOfMemory`], anything else to [`Error::Backend`].
fn alloc_error(e: DriverError, bytes: u64, what: &str) -> Error {
    if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        Error::OutOfMemory {
            backend: BackendKind::Cuda,
            bytes,
            what: what.into(),
        }
    } else {
        cuda_error(&format!("allocating {bytes} bytes for {what}"), e)
    }
}

impl<T: DeviceRepr + ValidAsZeroBits + Copy + Default> DeviceArray<T> {
    /// A zero-filled array.
    pub fn zeros(stream: &Arc<CudaStream>, len: usize, what: &str) -> Result<Self> {
        let bytes = (len.max(1) as u64).saturating_mul(std::mem::size_of::<T>() as u64);
        let buf = stream
            .alloc_zeros::<T>(len.max(1))
            .map_err(|e| alloc_error(e, bytes, what))?;
        Ok(Self { buf, len })
    }

    /// A copy of `data` on the device (queued; `data` may be dropped on return).
    pub fn upload(stream: &Arc<CudaStream>, data: &[T], what: &str) -> Result<Self> {
        let mut array = Self::zeros(stream, data.len(), what)?;
        if !data.is_empty() {
            stream
                .memcpy_htod(data, &mut array.buf)
                .map_err(|e| cuda_error(&format!("copying {what} to the device"), e))?;
        }
        Ok(array)
    }

    /// Waits for queued work on the stream, then copies the array back.
    pub fn download(&self, stream: &Arc<CudaStream>, what: &str) -> Result<Vec<T>> {
        if self.len == 0 {
            return Ok(Vec::new());
        }
        let mut out = vec![T::default(); self.len];
        stream
            .memcpy_dtoh(&self.buf.slice(0..self.len), &mut out)
            .map_err(|e| cuda_error(&format!("copying {what} to the host"), e))?;
        stream
            .synchronize()
            .map_err(|e| cuda_error(&format!("waiting for {what}"), e))?;
        Ok(out)
    }

    /// Sets every element to zero (queued).
    pub fn clear(&mut self, stream: &Arc<CudaStream>) -> Result<()> {
        stream
            .memset_zeros(&mut self.buf)
            .map_err(|e| cuda_error("clearing a vector", e))
    }
}

impl<T> DeviceArray<T> {
    /// An array over `len` elements at `ptr`, memory this backend does not own; it must be
    /// released with [`DeviceArray::into_leaked`], never dropped (a drop would free it).
    ///
    /// # Safety
    /// `ptr` must address `len` elements of `T` in this context, alive while work using the
    /// array is queued.
    pub unsafe fn borrowed(stream: &Arc<CudaStream>, ptr: u64, len: usize) -> Self {
        Self {
            buf: stream.upgrade_device_ptr(ptr as sys::CUdeviceptr, len.max(1)),
            len,
        }
    }

    /// Gives up the buffer without freeing it (the end of a [`DeviceArray::borrowed`]).
    pub fn into_leaked(self) -> u64 {
        self.buf.leak()
    }

    /// The number of elements (0 for an empty array, whose buffer still has one).
    pub fn len(&self) -> usize {
        self.len
    }
    /// The buffer, for kernel arguments.
    pub fn buf(&self) -> &CudaSlice<T> {
        &self.buf
    }
    /// The buffer, for kernel arguments that are written.
    pub fn buf_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.buf
    }
}

/// A MACKO-16-4 matrix on the device, with the plan computed for it at upload.
pub(crate) struct MackoDev {
    pub rows: u32,
    pub cols: u32,
    pub row_ptr: DeviceArray<u32>,
    /// binary16 bits, P of them (a multiple of 8: read as 16-byte words).
    pub values: DeviceArray<u16>,
    /// 4-bit codes, two per byte, P / 2 bytes (read as 32-bit words).
    pub codes: DeviceArray<u8>,
    pub plan: CudaPlan,
    /// The rows cut into segments, when the plan splits them.
    pub split: Option<SplitDev>,
    /// The entries cut into one range per warp, when the plan runs the flat kernel.
    pub flat: Option<Box<FlatDev>>,
    /// The tensor-core kernel's column cursors (`cursors.rs`: rows × 16 pairs of u32), when a
    /// few-token plan runs it.
    pub cursors: Option<DeviceArray<u32>>,
    /// For int8 / int4 values (then `values` holds their packed codes, 8 or 4 bytes per group
    /// of 8 entries): the scales and the kernels that read them.
    pub quant: Option<QuantScales>,
    /// Whether every value is a finite binary16: then a zero of x times any value adds 0, so
    /// y = A·x with x sparse may run this matrix's own kernels over x's dense copy
    /// (`sparse_inputs.rs`) and keep its semantics.
    pub finite: bool,
}

/// The scales of a quantized matrix on the device, with the kernels of its width (see
/// kernels/macko.cuh, `MackoScales`).
pub(crate) struct QuantScales {
    pub kernels: Arc<QuantKernels>,
    /// binary16 bits: one per row, or one per `group` values in storage order.
    pub scales: DeviceArray<u16>,
    /// Values per scale (per-group scales), or None (per row).
    pub group: Option<u32>,
    /// The quotient by `group / 8` of an aligned group index w < 2^29: (w · mul) >> shift.
    pub mul: u32,
    pub shift: u32,
}

impl QuantScales {
    /// The kernels' flags bit for per-group scales (bit 5).
    pub fn flags(&self) -> u32 {
        u32::from(self.group.is_some()) << 5
    }

    /// The last scale's index (the kernels cap computed indices there).
    pub fn last(&self) -> u32 {
        u32::try_from(self.scales.len().saturating_sub(1)).unwrap_or(u32::MAX)
    }
}

/// A dense int8 / int4 matrix on the device (kernels/dense_quant.cu).
pub(crate) struct DenseQuantDev {
    pub rows: u32,
    pub cols: u32,
    /// Packed codes, row-major, padded with zeros to a whole 16-byte word.
    pub q: DeviceArray<u8>,
    pub scales: QuantScales,
    /// Which entry runs: rows on 16-byte boundaries with every scale group inside a row (x
    /// staged in shared memory where it fits), else any shape.
    pub layout: DenseQuantLayout,
}

/// The ranges of a MACKO matrix run by the flat kernel (src/backend/cuda/flat.rs), as the kernels
/// read them.
pub(crate) struct FlatDev {
    /// `ranges + 1` descriptors of 4 u32 (see `FlatTable::desc`).
    pub desc: DeviceArray<u32>,
    /// 4 u32 per row cut by a range boundary (see `FlatTable::cut`); one unused entry when none.
    pub cut: DeviceArray<u32>,
    /// Two f32 partial sums per range.
    pub partials: DeviceArray<f32>,
    /// Number of ranges (warps with work).
    pub ranges: u32,
    /// Number of cut rows: the combine launch runs only when there are any.
    pub cut_rows: u32,
}

/// The work items of a MACKO matrix whose rows are cut into segments (src/backend/cuda/split.rs),
/// as the kernels read them.
pub(crate) struct SplitDev {
    /// `items + 1` pairs of u32: first entry, and the column after the row's previous entry;
    /// the last pair holds only P.
    pub desc: DeviceArray<u32>,
    /// `rows + 1`: row r's items are `row_item[r] .. row_item[r + 1]`.
    pub row_item: DeviceArray<u32>,
    /// One f32 partial sum per item, written by the product, added up per row by the combine.
    pub partials: DeviceArray<f32>,
    /// Number of items.
    pub items: u32,
}

/// The product kernel's descriptors of a split table (see [`SplitDev::desc`]), or `None` when
/// the arrays disagree in length (they cannot, from `split_rows`).
pub(crate) fn kernel_descriptors(t: &SplitTable) -> Option<Vec<u32>> {
    let items = t.items();
    if t.item_ptr.len() != items + 1 || t.item_col.len() != items {
        return None;
    }
    let mut desc = Vec::with_capacity(2 * (items + 1));
    for (start, col) in t.item_ptr.iter().zip(&t.item_col) {
        desc.extend_from_slice(&[*start, *col]);
    }
    desc.extend_from_slice(&[t.item_ptr[items], 0]);
    Some(desc)
}

/// A CSR matrix on the device.
pub(crate) struct CsrDev {
    pub rows: u32,
    pub cols: u32,
    pub row_ptr: DeviceArray<u32>,
    pub col_idx: DeviceArray<u32>,
    pub values: DeviceArray<u16>,
    pub plan: CudaPlan,
}

/// A dense row-major binary16 matrix on the device (macko's GEMV or cuBLAS multiplies it).
pub(crate) struct DenseDev {
    pub rows: u32,
    pub cols: u32,
    pub values: DeviceArray<u16>,
}

/// The elements of a vector on the device.
pub(crate) enum VectorData {
    /// binary16 bits.
    F16(DeviceArray<u16>),
    /// binary32.
    F32(DeviceArray<f32>),
}

/// A vector of this backend.
pub(crate) struct CudaVector {
    pub data: VectorData,
}

impl CudaVector {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match &self.data {
            VectorData::F16(a) => a.len(),
            VectorData::F32(a) => a.len(),
        }
    }
    /// The f16 elements of an input vector (x is always f16; the device checked it).
    pub fn as_input(&self) -> Result<&DeviceArray<u16>> {
        match &self.data {
            VectorData::F16(a) => Ok(a),
            VectorData::F32(_) => Err(internal("x reached the backend as f32")),
        }
    }
}

/// A row or column count as the kernels' u32, or an error naming the limit.
pub(crate) fn dim(value: usize, what: &str) -> Result<u32> {
    if value > MAX_DIM {
        return Err(Error::Backend {
            backend: BackendKind::Cuda,
            message: format!(
                "the CUDA kernels index {what} with 31-bit integers: {value} {what} exceed the \
                 limit of {MAX_DIM}"
            ),
        });
    }
    u32::try_from(value).map_err(|_| internal("dimension check"))
}

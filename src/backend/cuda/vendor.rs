//! The vendor baselines, for benchmarks only: dense f16 GEMV through cuBLAS (`cublasGemmEx`,
//! f16 operands, f32 compute, as the MACKO paper measured it) and CSR SpMV through cuSPARSE
//! (`cusparseSpMV`, f16 values, 32-bit indices, f32 compute), for y = A·x and, as the baseline of
//! the transposed products with a sparse input, y = Aᵀ·x. They are reached through the same
//! `spmv`/`time_spmv` (and `time_sparse_input`) path as macko's kernels: the matrix's storage
//! says which runs.
//!
//! Each library is probed with `is_culib_present` before its first call (cudarc panics on a
//! missing library) and gets one handle per backend, created on first use, bound to the
//! backend's stream and used under a lock (a handle must not be used by two threads at once).

use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::cublas::{result as blas_result, sys as blas};
use cudarc::cusparse::{result as sparse_result, sys as sparse};
use cudarc::driver::{CudaContext, CudaStream, DevicePtr, DevicePtrMut, SyncOnDrop};
use macko_format::{CsrMatrix, DenseMatrix};

use super::errors::{cuda_error, internal, unavailable};
use super::memory::{dim, DenseDev, DeviceArray, VectorData};
use crate::backend::{BackendKind, MatrixRef, VendorBaseline};
use crate::error::{Error, Result};

/// A cuBLAS handle bound to the backend's stream.
struct CublasHandle(blas::cublasHandle_t);

// SAFETY: a cuBLAS handle may be used from any thread as long as two threads never use it at
// once; it only lives inside a Mutex.
unsafe impl Send for CublasHandle {}

impl Drop for CublasHandle {
    fn drop(&mut self) {
        // SAFETY: the handle was created by cublasCreate and is destroyed once, here. A failure
        // only leaks the handle.
        let _ = unsafe { blas_result::destroy_handle(self.0) };
    }
}

/// A cuSPARSE handle bound to the backend's stream.
struct CusparseHandle(sparse::cusparseHandle_t);

// SAFETY: as for CublasHandle: used by one thread at a time, behind a Mutex.
unsafe impl Send for CusparseHandle {}

impl Drop for CusparseHandle {
    fn drop(&mut self) {
        // SAFETY: created by cusparseCreate, destroyed once.
        let _ = unsafe { sparse_result::destroy(self.0) };
    }
}

/// The library handles of one backend.
pub(crate) struct Vendor {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    cublas: Mutex<Option<CublasHandle>>,
    cusparse: Mutex<Option<CusparseHandle>>,
    /// The cuSPARSE SpMM workspace (its size depends on the batch), grown on demand.
    spmm_workspace: Mutex<Option<DeviceArray<u8>>>,
}

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| internal("a vendor library lock is poisoned"))
}

impl Vendor {
    pub fn new(ctx: Arc<CudaContext>, stream: Arc<CudaStream>) -> Self {
        Self {
            ctx,
            stream,
            cublas: Mutex::new(None),
            cusparse: Mutex::new(None),
            spmm_workspace: Mutex::new(None),
        }
    }

    fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| cuda_error("binding the CUDA context", e))
    }

    /// The cuBLAS handle, created on first use.
    fn cublas(&self) -> Result<MutexGuard<'_, Option<CublasHandle>>> {
        let mut guard = lock(&self.cublas)?;
        if guard.is_none() {
            // SAFETY: only tries to dlopen libcublas (and, through it, libcublasLt).
            if !unsafe { blas::is_culib_present() } {
                return Err(unavailable(
                    "cuBLAS (libcublas.so.13) was not found: the cuBLAS baseline needs the \
                     CUDA toolkit's libraries on the library path",
                ));
            }
            self.bind()?;
            let handle = CublasHandle(
                blas_result::create_handle().map_err(|e| cuda_error("cublasCreate", e))?,
            );
            // SAFETY: the handle is live; the stream belongs to the bound context.
            unsafe { blas_result::set_stream(handle.0, self.stream.cu_stream() as _) }
                .map_err(|e| cuda_error("cublasSetStream", e))?;
            *guard = Some(handle);
        }
        Ok(guard)
    }

    /// The cuSPARSE handle, created on first use.
    fn cusparse(&self) -> Result<MutexGuard<'_, Option<CusparseHandle>>> {
        let mut guard = lock(&self.cusparse)?;
        if guard.is_none() {
            // SAFETY: only tries to dlopen libcusparse.
            if !unsafe { sparse::is_culib_present() } {
                return Err(unavailable(
                    "cuSPARSE (libcusparse.so.12/13) was not found: the cuSPARSE baseline needs \
                     the CUDA toolkit's libraries on the library path",
                ));
            }
            self.bind()?;
            let handle = CusparseHandle(
                sparse_result::create().map_err(|e| cuda_error("cusparseCreate", e))?,
            );
            // SAFETY: the handle is live; the stream belongs to the bound context.
            unsafe { sparse::cusparseSetStream(handle.0, self.stream.cu_stream() as _) }
                .result()
                .map_err(|e| cuda_error("cusparseSetStream", e))?;
            *guard = Some(handle);
        }
        Ok(guard)
    }

    /// Uploads a dense matrix for cuBLAS (probing cuBLAS first, so a missing library is an
    /// error here rather than at the first product).
    pub fn upload_cublas(&self, m: &DenseMatrix) -> Result<DenseDev> {
        drop(self.cublas()?);
        let values: &[u16] = bytemuck::cast_slice(m.values());
        Ok(DenseDev {
            rows: dim(m.rows(), "rows")?,
            cols: dim(m.cols(), "columns")?,
            values: DeviceArray::upload(&self.stream, values, "the dense matrix (cuBLAS)")?,
        })
    }

    /// Queues Y = A·X for `batch` vectors through `cublasGemmEx`: A is row-major rows × cols,
    /// which column-major cuBLAS sees as the cols × rows matrix Aᵀ, so Y = op(Aᵀ)·X with op =
    /// transpose, m = rows, n = batch, k = cols; X row-major `[batch][cols]` is exactly the
    /// column-major cols × batch matrix (ldb = cols), Y `[batch][rows]` the rows × batch one
    /// (ldc = rows). A batch of one is the GEMV the paper measured.
    pub fn cublas_gemm(
        &self,
        a: &DenseDev,
        x: &DeviceArray<u16>,
        y: &mut VectorData,
        batch: usize,
    ) -> Result<()> {
        if a.rows == 0 {
            return Ok(());
        }
        if a.cols == 0 {
            return clear(y, &self.stream);
        }
        let guard = self.cublas()?;
        let handle = guard
            .as_ref()
            .ok_or_else(|| internal("cuBLAS handle missing"))?;
        self.bind()?;
        let (m, k) = (a.rows as i32, a.cols as i32);
        let n = i32::try_from(batch).map_err(|_| Error::Backend {
            backend: BackendKind::Cuda,
            message: format!(
                "cuBLAS takes at most {} vectors at once, not {batch}",
                i32::MAX
            ),
        })?;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (a_ptr, _a_sync) = a.values.buf().device_ptr(&self.stream);
        let (x_ptr, _x_sync) = x.buf().device_ptr(&self.stream);
        let (y_ptr, y_type, _y_sync) = output_ptr(y, &self.stream);
        // SAFETY: A holds rows·cols halves (lda = cols ≥ k), x holds batch·cols halves (ldb =
        // cols), y holds batch·rows elements of y_type (ldc = rows ≥ m), as the backend checked;
        // alpha and beta are f32, as CUBLAS_COMPUTE_32F requires; the handle is bound to this
        // stream and used under its lock.
        unsafe {
            blas_result::gemm_ex(
                handle.0,
                blas::cublasOperation_t::CUBLAS_OP_T,
                blas::cublasOperation_t::CUBLAS_OP_N,
                m,
                n,
                k,
                (&alpha as *const f32).cast::<c_void>(),
                a_ptr as *const c_void,
                blas::cudaDataType::CUDA_R_16F,
                k,
                x_ptr as *const c_void,
                blas::cudaDataType::CUDA_R_16F,
                k,
                (&beta as *const f32).cast::<c_void>(),
                y_ptr as *mut c_void,
                y_type.blas(),
                m,
                blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| cuda_error("cublasGemmEx", e))
    }

    /// Uploads a CSR matrix for cuSPARSE: its descriptor and the SpMV workspace (sized for
    /// either output precision) are made here, so a product only queues `cusparseSpMV`.
    pub fn upload_cusparse(&self, m: &CsrMatrix) -> Result<CusparseCsr> {
        let rows = dim(m.rows(), "rows")?;
        let cols = dim(m.cols(), "columns")?;
        if m.nnz() > i32::MAX as usize {
            return Err(Error::Backend {
                backend: BackendKind::Cuda,
                message: format!(
                    "cuSPARSE with 32-bit indices takes at most {} entries, not {}",
                    i32::MAX,
                    m.nnz()
                ),
            });
        }
        let guard = self.cusparse()?;
        let handle = guard
            .as_ref()
            .ok_or_else(|| internal("cuSPARSE handle missing"))?;
        let values: &[u16] = bytemuck::cast_slice(m.values());
        let mut csr = CusparseCsr {
            rows,
            cols,
            accepts: [Accepts::ALL; 2],
            descr: None,
            workspace: DeviceArray::zeros(&self.stream, 0, "the cuSPARSE workspace")?,
            values: DeviceArray::upload(&self.stream, values, "CSR values (cuSPARSE)")?,
            col_idx: DeviceArray::upload(&self.stream, m.col_idx(), "CSR indices (cuSPARSE)")?,
            row_ptr: DeviceArray::upload(&self.stream, m.row_ptr(), "CSR rows (cuSPARSE)")?,
        };
        if rows == 0 || cols == 0 || m.nnz() == 0 {
            return Ok(csr);
        }
        self.bind()?;
        csr.descr = Some(SpMat::csr(&mut csr, &self.stream, m.nnz() as i64)?);
        let (bytes, accepts) = self.spmv_buffer_size(handle, &csr)?;
        csr.workspace = DeviceArray::zeros(&self.stream, bytes, "the cuSPARSE workspace")?;
        csr.accepts = accepts;
        Ok(csr)
    }

    /// The largest workspace cusparseSpMV asks for, over both products and both precisions of
    /// y, and which of them this cuSPARSE takes with f16 values (`CUSPARSE_STATUS_NOT_SUPPORTED`
    /// marks one it does not; any other error is returned).
    fn spmv_buffer_size(
        &self,
        handle: &CusparseHandle,
        csr: &CusparseCsr,
    ) -> Result<(usize, [Accepts; 2])> {
        let descr = csr
            .descr
            .as_ref()
            .ok_or_else(|| internal("cuSPARSE descriptor missing"))?;
        let longest = csr.rows.max(csr.cols) as usize;
        let x = DeviceArray::<u16>::zeros(&self.stream, longest, "cuSPARSE probe x")?;
        let what = "cuSPARSE probe y";
        let mut outputs = [
            VectorData::F16(DeviceArray::zeros(&self.stream, longest, what)?),
            VectorData::F32(DeviceArray::zeros(&self.stream, longest, what)?),
        ];
        let mut most = 0usize;
        let mut accepts = [Accepts::NONE; 2];
        for op in SpmvOp::ALL {
            let (x_len, y_len) = op.lengths(csr);
            for y in outputs.iter_mut() {
                let (x_ptr, _x_sync) = x.buf().device_ptr(&self.stream);
                let (y_ptr, y_type, _y_sync) = output_ptr(y, &self.stream);
                let vx = DnVec::new(x_len, x_ptr, OutputType::F16)?;
                let vy = DnVec::new(y_len, y_ptr, y_type)?;
                let (alpha, beta) = (1.0f32, 0.0f32);
                let mut size = 0usize;
                // SAFETY: handle, descriptors and pointers are live (x and y hold at least
                // x_len and y_len elements); alpha/beta are f32 for the CUDA_R_32F compute
                // type; `size` is valid for writes.
                let status = unsafe {
                    sparse::cusparseSpMV_bufferSize(
                        handle.0,
                        op.operation(),
                        (&alpha as *const f32).cast::<c_void>(),
                        descr.0,
                        vx.0,
                        (&beta as *const f32).cast::<c_void>(),
                        vy.0,
                        sparse::cudaDataType::CUDA_R_32F,
                        sparse::cusparseSpMVAlg_t::CUSPARSE_SPMV_ALG_DEFAULT,
                        &mut size,
                    )
                };
                match status.result() {
                    Ok(()) => {
                        most = most.max(size);
                        accepts[op as usize].set(y_type);
                    }
                    Err(e) if e.0 == sparse::cusparseStatus_t::CUSPARSE_STATUS_NOT_SUPPORTED => {}
                    Err(e) => return Err(cuda_error("cusparseSpMV_bufferSize", e)),
                }
            }
        }
        Ok((most, accepts))
    }

    /// Queues y = A·x (`SpmvOp::Plain`, x of `cols` elements) or y = Aᵀ·x
    /// (`SpmvOp::Transposed`, x of `rows`) through `cusparseSpMV`.
    pub fn cusparse_spmv(
        &self,
        a: &CusparseCsr,
        x: &DeviceArray<u16>,
        y: &mut VectorData,
        op: SpmvOp,
    ) -> Result<()> {
        let Some(descr) = a.descr.as_ref() else {
            // No entries, rows or columns: y is all zeros (or empty).
            return clear(y, &self.stream);
        };
        let guard = self.cusparse()?;
        let handle = guard
            .as_ref()
            .ok_or_else(|| internal("cuSPARSE handle missing"))?;
        self.bind()?;
        let (x_ptr, _x_sync) = x.buf().device_ptr(&self.stream);
        let (y_ptr, y_type, _y_sync) = output_ptr(y, &self.stream);
        if !a.accepts[op as usize].takes(y_type) {
            return Err(Error::Backend {
                backend: BackendKind::Cuda,
                message: format!(
                    "this cuSPARSE does not compute {} with f16 values into a {y_type:?} y \
                     (cusparseSpMV_bufferSize: CUSPARSE_STATUS_NOT_SUPPORTED)",
                    op.name()
                ),
            });
        }
        let (x_len, y_len) = op.lengths(a);
        let vx = DnVec::new(x_len, x_ptr, OutputType::F16)?;
        let vy = DnVec::new(y_len, y_ptr, y_type)?;
        let (w_ptr, _w_sync) = a.workspace.buf().device_ptr(&self.stream);
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: handle, descriptors, workspace (sized at upload for both output types) and
        // vectors are live and on this stream; alpha/beta are f32 for CUDA_R_32F compute.
        unsafe {
            sparse::cusparseSpMV(
                handle.0,
                op.operation(),
                (&alpha as *const f32).cast::<c_void>(),
                descr.0,
                vx.0,
                (&beta as *const f32).cast::<c_void>(),
                vy.0,
                sparse::cudaDataType::CUDA_R_32F,
                sparse::cusparseSpMVAlg_t::CUSPARSE_SPMV_ALG_DEFAULT,
                w_ptr as *mut c_void,
            )
        }
        .result()
        .map_err(|e| cuda_error("cusparseSpMV", e))
    }
}

/// A matrix uploaded for a vendor's product (boxed: it only passes through, into `CudaMatrix`).
pub(crate) enum VendorMatrix {
    Cublas(DenseDev),
    Cusparse(Box<CusparseCsr>),
}

impl Vendor {
    /// Uploads `m` for `vendor`'s product: cuBLAS takes dense matrices, cuSPARSE CSR ones.
    pub fn upload(&self, m: MatrixRef<'_>, vendor: VendorBaseline) -> Result<VendorMatrix> {
        Ok(match (vendor, m) {
            (VendorBaseline::CublasDense, MatrixRef::Dense(d)) => {
                VendorMatrix::Cublas(self.upload_cublas(d)?)
            }
            (VendorBaseline::CusparseCsr, MatrixRef::Csr(c)) => {
                VendorMatrix::Cusparse(Box::new(self.upload_cusparse(c)?))
            }
            (VendorBaseline::CublasDense, other) => {
                return Err(wrong_format(vendor, "dense", other))
            }
            (VendorBaseline::CusparseCsr, other) => return Err(wrong_format(vendor, "CSR", other)),
        })
    }
}

/// A baseline asked for a format it does not take.
fn wrong_format(vendor: VendorBaseline, wants: &str, got: MatrixRef<'_>) -> Error {
    Error::Backend {
        backend: BackendKind::Cuda,
        message: format!(
            "the {} baseline multiplies {wants} matrices, not {}",
            vendor.name(),
            got.kind().as_str()
        ),
    }
}

/// cuSPARSE SpMM (few-token baseline).
impl Vendor {
    /// Queues Y = A·X for `batch` vectors through `cusparseSpMM`: X row-major `[batch][cols]` is
    /// the column-major dense cols × batch matrix (ld = cols), Y `[batch][rows]` the rows ×
    /// batch one (ld = rows); f16 values and X, f32 compute. The workspace, which depends on the
    /// batch, is the vendor's own, grown on demand (one stream: reuse in order is safe).
    pub fn cusparse_spmm(
        &self,
        a: &CusparseCsr,
        x: &DeviceArray<u16>,
        y: &mut VectorData,
        batch: usize,
    ) -> Result<()> {
        let Some(descr) = a.descr.as_ref() else {
            return clear(y, &self.stream);
        };
        let n = i64::try_from(batch).map_err(|_| internal("batch size"))?;
        let guard = self.cusparse()?;
        let handle = guard
            .as_ref()
            .ok_or_else(|| internal("cuSPARSE handle missing"))?;
        self.bind()?;
        let (x_ptr, _x_sync) = x.buf().device_ptr(&self.stream);
        let (y_ptr, y_type, _y_sync) = output_ptr(y, &self.stream);
        let mx = DnMat::new(i64::from(a.cols), n, x_ptr, OutputType::F16)?;
        let my = DnMat::new(i64::from(a.rows), n, y_ptr, y_type)?;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let op = sparse::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;
        // CSR_ALG3: measured on an H100 (2026-11-26, 8192², f16 values, X and Y), the default
        // algorithm and CSR_ALG1 took 42–46 ms for every B from 2 to 16 at d = 0.5 and broke the
        // f32-accumulation tolerance on sampled rows (as if summing in f16); CSR_ALG3 took
        // 0.24–0.85 ms and agreed with the f64 reference.
        let alg = sparse::cusparseSpMMAlg_t::CUSPARSE_SPMM_CSR_ALG3;
        let mut size = 0usize;
        // SAFETY: handle, descriptors and pointers are live; alpha/beta are f32 for the
        // CUDA_R_32F compute type; `size` is valid for writes.
        let status = unsafe {
            sparse::cusparseSpMM_bufferSize(
                handle.0,
                op,
                op,
                (&alpha as *const f32).cast::<c_void>(),
                descr.0,
                mx.0,
                (&beta as *const f32).cast::<c_void>(),
                my.0,
                sparse::cudaDataType::CUDA_R_32F,
                alg,
                &mut size,
            )
        };
        match status.result() {
            Ok(()) => {}
            Err(e) if e.0 == sparse::cusparseStatus_t::CUSPARSE_STATUS_NOT_SUPPORTED => {
                return Err(Error::Backend {
                    backend: BackendKind::Cuda,
                    message: format!(
                        "this cuSPARSE does not multiply f16 values and X into a {y_type:?} Y \
                         (cusparseSpMM: CUSPARSE_STATUS_NOT_SUPPORTED)"
                    ),
                })
            }
            Err(e) => return Err(cuda_error("cusparseSpMM_bufferSize", e)),
        }
        let mut workspace = lock(&self.spmm_workspace)?;
        if workspace.as_ref().is_none_or(|w| w.len() < size) {
            *workspace = Some(DeviceArray::zeros(
                &self.stream,
                size,
                "the cuSPARSE SpMM workspace",
            )?);
        }
        let w = workspace
            .as_ref()
            .ok_or_else(|| internal("SpMM workspace missing"))?;
        let (w_ptr, _w_sync) = w.buf().device_ptr(&self.stream);
        // SAFETY: as above, with a workspace of at least `size` bytes on this stream.
        unsafe {
            sparse::cusparseSpMM(
                handle.0,
                op,
                op,
                (&alpha as *const f32).cast::<c_void>(),
                descr.0,
                mx.0,
                (&beta as *const f32).cast::<c_void>(),
                my.0,
                sparse::cudaDataType::CUDA_R_32F,
                alg,
                w_ptr as *mut c_void,
            )
        }
        .result()
        .map_err(|e| cuda_error("cusparseSpMM", e))
    }
}

/// A cuSPARSE dense-matrix descriptor (column-major), destroyed when dropped.
struct DnMat(sparse::cusparseDnMatDescr_t);

impl DnMat {
    fn new(rows: i64, cols: i64, ptr: u64, t: OutputType) -> Result<Self> {
        let mut d: sparse::cusparseDnMatDescr_t = std::ptr::null_mut();
        // SAFETY: `ptr` is a live device allocation of rows × cols elements of type `t`,
        // column-major with leading dimension `rows`.
        unsafe {
            sparse::cusparseCreateDnMat(
                &mut d,
                rows,
                cols,
                rows.max(1),
                ptr as *mut c_void,
                t.sparse(),
                sparse::cusparseOrder_t::CUSPARSE_ORDER_COL,
            )
        }
        .result()
        .map_err(|e| cuda_error("cusparseCreateDnMat", e))?;
        Ok(Self(d))
    }
}

impl Drop for DnMat {
    fn drop(&mut self) {
        // SAFETY: created by cusparseCreateDnMat, destroyed once.
        let _ = unsafe { sparse::cusparseDestroyDnMat(self.0) };
    }
}

/// Zeros y (a product with no terms).
fn clear(y: &mut VectorData, stream: &Arc<CudaStream>) -> Result<()> {
    match y {
        VectorData::F16(a) => a.clear(stream),
        VectorData::F32(a) => a.clear(stream),
    }
}

/// Element type of a vector as the libraries name it.
#[derive(Debug, Clone, Copy)]
enum OutputType {
    F16,
    F32,
}

impl OutputType {
    fn blas(self) -> blas::cudaDataType {
        match self {
            OutputType::F16 => blas::cudaDataType::CUDA_R_16F,
            OutputType::F32 => blas::cudaDataType::CUDA_R_32F,
        }
    }
    fn sparse(self) -> sparse::cudaDataType {
        match self {
            OutputType::F16 => sparse::cudaDataType::CUDA_R_16F,
            OutputType::F32 => sparse::cudaDataType::CUDA_R_32F,
        }
    }
}

/// Device pointer and type of an output vector.
fn output_ptr<'s>(
    y: &'s mut VectorData,
    stream: &'s CudaStream,
) -> (u64, OutputType, SyncOnDrop<'s>) {
    match y {
        VectorData::F16(a) => {
            let (p, s) = a.buf_mut().device_ptr_mut(stream);
            (p, OutputType::F16, s)
        }
        VectorData::F32(a) => {
            let (p, s) = a.buf_mut().device_ptr_mut(stream);
            (p, OutputType::F32, s)
        }
    }
}

/// A cuSPARSE dense-vector descriptor, destroyed when dropped (descriptors are host objects:
/// creating one per product costs no device work).
struct DnVec(sparse::cusparseDnVecDescr_t);

impl DnVec {
    fn new(len: i64, ptr: u64, t: OutputType) -> Result<Self> {
        let mut d: sparse::cusparseDnVecDescr_t = std::ptr::null_mut();
        // SAFETY: `ptr` is a live device allocation of `len` elements of type `t`.
        unsafe { sparse::cusparseCreateDnVec(&mut d, len, ptr as *mut c_void, t.sparse()) }
            .result()
            .map_err(|e| cuda_error("cusparseCreateDnVec", e))?;
        Ok(Self(d))
    }
}

impl Drop for DnVec {
    fn drop(&mut self) {
        // SAFETY: created by cusparseCreateDnVec, destroyed once.
        let _ = unsafe { sparse::cusparseDestroyDnVec(self.0) };
    }
}

/// A cuSPARSE sparse-matrix descriptor, destroyed when dropped.
struct SpMat(sparse::cusparseSpMatDescr_t);

impl SpMat {
    fn csr(m: &mut CusparseCsr, stream: &CudaStream, nnz: i64) -> Result<Self> {
        let (rp, _s1) = m.row_ptr.buf_mut().device_ptr_mut(stream);
        let (ci, _s2) = m.col_idx.buf_mut().device_ptr_mut(stream);
        let (va, _s3) = m.values.buf_mut().device_ptr_mut(stream);
        let mut d: sparse::cusparseSpMatDescr_t = std::ptr::null_mut();
        // SAFETY: the three arrays are live device allocations of rows + 1, nnz and nnz
        // elements, owned by the same CusparseCsr as the descriptor, which drops the
        // descriptor before them.
        unsafe {
            sparse::cusparseCreateCsr(
                &mut d,
                i64::from(m.rows),
                i64::from(m.cols),
                nnz,
                rp as *mut c_void,
                ci as *mut c_void,
                va as *mut c_void,
                sparse::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                sparse::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                sparse::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
                sparse::cudaDataType::CUDA_R_16F,
            )
        }
        .result()
        .map_err(|e| cuda_error("cusparseCreateCsr", e))?;
        Ok(Self(d))
    }
}

impl Drop for SpMat {
    fn drop(&mut self) {
        // SAFETY: created by cusparseCreateCsr, destroyed once, before the arrays it points to
        // (it is the first field of CusparseCsr).
        let _ = unsafe { sparse::cusparseDestroySpMat(self.0) };
    }
}

/// A CSR matrix uploaded for cuSPARSE. Field order matters: the descriptor is dropped before
/// the arrays it points to.
pub(crate) struct CusparseCsr {
    pub rows: u32,
    pub cols: u32,
    /// Which outputs cuSPARSE accepted for each product (`SpmvOp as usize`), probed at upload
    /// (see `spmv_buffer_size`).
    accepts: [Accepts; 2],
    descr: Option<SpMat>,
    workspace: DeviceArray<u8>,
    values: DeviceArray<u16>,
    col_idx: DeviceArray<u32>,
    row_ptr: DeviceArray<u32>,
}

// SAFETY: the descriptor is a host object that cuSPARSE only reads during cusparseSpMV, which
// runs under the handle's lock; the arrays are ordinary device allocations.
unsafe impl Send for CusparseCsr {}
// SAFETY: as above: shared references only pass the descriptor to calls serialised by the lock.
unsafe impl Sync for CusparseCsr {}

/// Which product `cusparseSpMV` computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SpmvOp {
    /// y = A·x.
    Plain = 0,
    /// y = Aᵀ·x: the baseline of the transposed products with a sparse input.
    Transposed = 1,
}

impl SpmvOp {
    const ALL: [SpmvOp; 2] = [SpmvOp::Plain, SpmvOp::Transposed];

    fn operation(self) -> sparse::cusparseOperation_t {
        match self {
            SpmvOp::Plain => sparse::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE,
            SpmvOp::Transposed => sparse::cusparseOperation_t::CUSPARSE_OPERATION_TRANSPOSE,
        }
    }

    fn name(self) -> &'static str {
        match self {
            SpmvOp::Plain => "y = A·x",
            SpmvOp::Transposed => "y = Aᵀ·x",
        }
    }

    /// The lengths of x and y for `a`.
    fn lengths(self, a: &CusparseCsr) -> (i64, i64) {
        let (rows, cols) = (i64::from(a.rows), i64::from(a.cols));
        match self {
            SpmvOp::Plain => (cols, rows),
            SpmvOp::Transposed => (rows, cols),
        }
    }
}

/// The precisions of y cuSPARSE takes for one product of one matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Accepts {
    f16: bool,
    f32: bool,
}

impl Accepts {
    const NONE: Accepts = Accepts {
        f16: false,
        f32: false,
    };
    /// Before probing (a matrix without entries never calls cuSPARSE).
    const ALL: Accepts = Accepts {
        f16: true,
        f32: true,
    };

    fn set(&mut self, y: OutputType) {
        match y {
            OutputType::F16 => self.f16 = true,
            OutputType::F32 => self.f32 = true,
        }
    }

    fn takes(self, y: OutputType) -> bool {
        match y {
            OutputType::F16 => self.f16,
            OutputType::F32 => self.f32,
        }
    }
}

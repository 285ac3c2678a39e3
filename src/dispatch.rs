//! The device layer's view of the backends compiled in: one enum of backends, one of their
//! matrices, one of their vectors and one of their plans, and the match that sends each call to
//! the backend that made its handles. Backends know nothing of this file (they implement
//! [`Backend`] with their own types); a handle that reaches another backend is a typed internal
//! error, never a downcast.

use half::f16;
use macko_format::SparseVector;

use crate::backend::cpu::{CpuBackend, CpuMatrix, CpuPlan, CpuVector};
#[cfg(feature = "cuda")]
use crate::backend::cuda::{plan::CudaPlan, CudaBackend, CudaMatrix, CudaSparseVector, CudaVector};
#[cfg(feature = "wgpu")]
use crate::backend::wgpu::{GpuMatrix, GpuVector, WgpuBackend, WgpuPlan};
use crate::backend::{
    Backend, BackendKind, DeviceInfo, HostVector, MatrixRef, Precision, SparseInput, VendorBaseline,
};
use crate::error::{Error, Result};
use crate::options::Tuning;

/// How a device multiplies one uploaded matrix: the plan its backend computed once, at upload,
/// from the shape, the matrix's statistics, the device's capabilities and the tuning. Plans are
/// data, so tests and `macko info` can say which kernel runs without timing anything.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Plan {
    /// The CPU's.
    Cpu(CpuPlan),
    /// The wgpu backend's.
    #[cfg(feature = "wgpu")]
    Wgpu(WgpuPlan),
    /// The CUDA backend's.
    #[cfg(feature = "cuda")]
    Cuda(CudaPlan),
}

/// One backend compiled in, opened. (A device holds one, behind an `Arc`; boxing the large
/// variants would only add an indirection.)
#[allow(clippy::large_enum_variant)]
pub(crate) enum AnyBackend {
    Cpu(CpuBackend),
    #[cfg(feature = "wgpu")]
    Wgpu(WgpuBackend),
    #[cfg(feature = "cuda")]
    Cuda(CudaBackend),
}

/// A matrix of one backend. (Variants differ in size; a handle holds one matrix, so boxing
/// would only add an indirection.)
#[allow(clippy::large_enum_variant)]
pub(crate) enum AnyMatrix {
    Cpu(CpuMatrix),
    #[cfg(feature = "wgpu")]
    Wgpu(GpuMatrix),
    #[cfg(feature = "cuda")]
    Cuda(CudaMatrix),
}

/// A vector of one backend.
pub(crate) enum AnyVector {
    Cpu(CpuVector),
    #[cfg(feature = "wgpu")]
    Wgpu(GpuVector),
    #[cfg(feature = "cuda")]
    Cuda(CudaVector),
}

/// A sparse vector of one backend.
pub(crate) enum AnySparseVector {
    Cpu(crate::backend::cpu::CpuSparseVector),
    #[cfg(feature = "wgpu")]
    Wgpu(crate::backend::wgpu::GpuSparseVector),
    #[cfg(feature = "cuda")]
    Cuda(CudaSparseVector),
}

/// An x of a product with a sparse input, as the device layer holds it.
pub(crate) enum AnySparseInput<'a> {
    Dense(&'a AnyVector),
    Sparse(&'a AnySparseVector),
}

/// The error for a handle of another backend: a bug in macko (the device checks ownership
/// first), reported rather than panicking.
fn foreign(backend: BackendKind, what: &str) -> Error {
    Error::Backend {
        backend,
        message: format!("internal: the {what} is not a handle of this backend"),
    }
}

/// Typed access to one backend's handles inside the enums.
macro_rules! handles_of {
    ($variant:ident, $kind:expr, $matrix:ty, $vector:ty, $sparse:ty, $get:ident, $get_v:ident, $get_v_mut:ident, $get_s:ident, $get_in:ident) => {
        impl AnySparseVector {
            #[allow(unreachable_patterns)]
            fn $get_s(&self) -> Result<&$sparse> {
                match self {
                    AnySparseVector::$variant(v) => Ok(v),
                    _ => Err(foreign($kind, "sparse vector")),
                }
            }
        }
        impl AnySparseInput<'_> {
            /// The x of `multiply_transposed`, unwrapped for this backend.
            #[allow(unreachable_patterns)]
            fn $get_in(&self) -> Result<SparseInput<'_, $vector, $sparse>> {
                match self {
                    AnySparseInput::Dense(v) => v.$get_v().map(SparseInput::Dense),
                    AnySparseInput::Sparse(v) => v.$get_s().map(SparseInput::Sparse),
                }
            }
        }
        impl AnyMatrix {
            #[allow(unreachable_patterns)]
            fn $get(&self) -> Result<&$matrix> {
                match self {
                    AnyMatrix::$variant(m) => Ok(m),
                    _ => Err(foreign($kind, "matrix")),
                }
            }
        }
        impl AnyVector {
            #[allow(unreachable_patterns)]
            fn $get_v(&self) -> Result<&$vector> {
                match self {
                    AnyVector::$variant(v) => Ok(v),
                    _ => Err(foreign($kind, "vector")),
                }
            }
            #[allow(unreachable_patterns)]
            fn $get_v_mut(&mut self) -> Result<&mut $vector> {
                match self {
                    AnyVector::$variant(v) => Ok(v),
                    _ => Err(foreign($kind, "vector")),
                }
            }
        }
    };
}

handles_of!(
    Cpu,
    BackendKind::Cpu,
    CpuMatrix,
    CpuVector,
    crate::backend::cpu::CpuSparseVector,
    cpu,
    cpu_v,
    cpu_v_mut,
    cpu_s,
    cpu_in
);
#[cfg(feature = "wgpu")]
handles_of!(
    Wgpu,
    BackendKind::Wgpu,
    GpuMatrix,
    GpuVector,
    crate::backend::wgpu::GpuSparseVector,
    wgpu,
    wgpu_v,
    wgpu_v_mut,
    wgpu_s,
    wgpu_in
);
#[cfg(feature = "cuda")]
handles_of!(
    Cuda,
    BackendKind::Cuda,
    CudaMatrix,
    CudaVector,
    CudaSparseVector,
    cuda,
    cuda_v,
    cuda_v_mut,
    cuda_s,
    cuda_in
);

/// Every call of [`crate::Device`], sent to its backend with the handles unwrapped.
macro_rules! dispatch_all {
    ($($variant:ident => $get:ident, $get_v:ident, $get_v_mut:ident, $get_s:ident, $get_in:ident, $cfg:meta;)+) => {
        impl AnyBackend {
            pub(crate) fn info(&self) -> DeviceInfo {
                match self { $( #[$cfg] AnyBackend::$variant(b) => b.info(), )+ }
            }
            pub(crate) fn timer(&self) -> &'static str {
                match self { $( #[$cfg] AnyBackend::$variant(b) => b.timer(), )+ }
            }
            pub(crate) fn upload_matrix(&self, m: MatrixRef<'_>) -> Result<AnyMatrix> {
                match self { $( #[$cfg] AnyBackend::$variant(b) => b.upload_matrix(m).map(AnyMatrix::$variant), )+ }
            }
            pub(crate) fn upload_vendor(&self, m: MatrixRef<'_>, vendor: VendorBaseline) -> Result<AnyMatrix> {
                match self { $( #[$cfg] AnyBackend::$variant(b) => b.upload_vendor(m, vendor).map(AnyMatrix::$variant), )+ }
            }
            pub(crate) fn upload_vector(&self, x: &[f16]) -> Result<AnyVector> {
                match self { $( #[$cfg] AnyBackend::$variant(b) => b.upload_vector(x).map(AnyVector::$variant), )+ }
            }
            pub(crate) fn alloc_vector(&self, len: usize, precision: Precision) -> Result<AnyVector> {
                match self { $( #[$cfg] AnyBackend::$variant(b) => b.alloc_vector(len, precision).map(AnyVector::$variant), )+ }
            }
            pub(crate) fn multiply(&self, a: &AnyMatrix, x: &AnyVector, y: &mut AnyVector, batch: usize) -> Result<()> {
                match self { $( #[$cfg] AnyBackend::$variant(b) => b.multiply(a.$get()?, x.$get_v()?, y.$get_v_mut()?, batch), )+ }
            }
            pub(crate) fn upload_sparse_vector(&self, x: &SparseVector) -> Result<AnySparseVector> {
                match self { $( #[$cfg] AnyBackend::$variant(b) => b.upload_sparse_vector(x).map(AnySparseVector::$variant), )+ }
            }
            pub(crate) fn multiply_sparse_x(&self, a: &AnyMatrix, x: &AnySparseVector, y: &mut AnyVector) -> Result<()> {
                match self { $( #[$cfg] AnyBackend::$variant(b) => b.multiply_sparse_x(a.$get()?, x.$get_s()?, y.$get_v_mut()?), )+ }
            }
            pub(crate) fn multiply_transposed(&self, a: &AnyMatrix, x: AnySparseInput<'_>, y: &mut AnyVector) -> Result<()> {
                match self { $( #[$cfg] AnyBackend::$variant(b) => b.multiply_transposed(a.$get()?, x.$get_in()?, y.$get_v_mut()?), )+ }
            }
            pub(crate) fn plan(&self, a: &AnyMatrix) -> Result<Plan> {
                match self { $( #[$cfg] AnyBackend::$variant(b) => Backend::plan(b, a.$get()?).map(Plan::$variant), )+ }
            }
            pub(crate) fn synchronize(&self) -> Result<()> {
                match self { $( #[$cfg] AnyBackend::$variant(b) => b.synchronize(), )+ }
            }
            pub(crate) fn download(&self, v: &AnyVector) -> Result<HostVector> {
                match self { $( #[$cfg] AnyBackend::$variant(b) => b.download(v.$get_v()?), )+ }
            }
            pub(crate) fn time_multiply(
                &self,
                a: &[&AnyMatrix],
                x: &AnyVector,
                y: &mut AnyVector,
                batch: usize,
                warmup: usize,
                iters: usize,
            ) -> Result<Vec<f64>> {
                match self {
                    $( #[$cfg] AnyBackend::$variant(b) => {
                        let a = a.iter().map(|m| m.$get()).collect::<Result<Vec<_>>>()?;
                        b.time_multiply(&a, x.$get_v()?, y.$get_v_mut()?, batch, warmup, iters)
                    } )+
                }
            }
            pub(crate) fn stream_read(&self, bytes: u64, warmup: usize, iters: usize) -> Result<Option<Vec<f64>>> {
                match self { $( #[$cfg] AnyBackend::$variant(b) => b.stream_read(bytes, warmup, iters), )+ }
            }
            #[allow(clippy::too_many_arguments)]
            pub(crate) fn time_sparse_input(
                &self,
                a: &[&AnyMatrix],
                x: AnySparseInput<'_>,
                transposed: bool,
                y: &mut AnyVector,
                warmup: usize,
                iters: usize,
            ) -> Result<Vec<f64>> {
                match self {
                    $( #[$cfg] AnyBackend::$variant(b) => {
                        let a = a.iter().map(|m| m.$get()).collect::<Result<Vec<_>>>()?;
                        b.time_sparse_input(&a, x.$get_in()?, transposed, y.$get_v_mut()?, warmup, iters)
                    } )+
                }
            }
            pub(crate) fn sparse_input_timer(&self) -> &'static str {
                match self { $( #[$cfg] AnyBackend::$variant(b) => b.sparse_input_timer(), )+ }
            }
        }
    };
}

impl AnyBackend {
    /// Uploads `m` planned with the choices `tuning` forces for its backend instead of the
    /// device's own (a tuned plan from the plan cache, or a candidate being timed). The CPU has
    /// no plan choices.
    #[cfg_attr(not(any(feature = "cuda", feature = "wgpu")), allow(unused_variables))]
    pub(crate) fn upload_matrix_tuned(
        &self,
        m: MatrixRef<'_>,
        tuning: &Tuning,
    ) -> Result<AnyMatrix> {
        match self {
            AnyBackend::Cpu(b) => b.upload_matrix(m).map(AnyMatrix::Cpu),
            #[cfg(feature = "wgpu")]
            AnyBackend::Wgpu(b) => b.upload_matrix_tuned(m, &tuning.wgpu).map(AnyMatrix::Wgpu),
            #[cfg(feature = "cuda")]
            AnyBackend::Cuda(b) => b.upload_matrix_tuned(m, &tuning.cuda).map(AnyMatrix::Cuda),
        }
    }
}

dispatch_all! {
    Cpu => cpu, cpu_v, cpu_v_mut, cpu_s, cpu_in, cfg(all());
    Wgpu => wgpu, wgpu_v, wgpu_v_mut, wgpu_s, wgpu_in, cfg(feature = "wgpu");
    Cuda => cuda, cuda_v, cuda_v_mut, cuda_s, cuda_in, cfg(feature = "cuda");
}

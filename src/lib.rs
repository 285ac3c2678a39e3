//! # macko
//!
//! Sparse matrix–vector products for pruned neural-network weights, in the MACKO-16-4 format,
//! on whatever hardware is present: CUDA GPUs (kernels compiled at run time by NVRTC), any GPU
//! wgpu reaches (Vulkan, Metal, DX12), or the CPU. The format itself lives in
//! [`macko_format`], re-exported here.
//!
//! ```
//! use macko::{Device, MackoMatrix, Precision, reference};
//! use macko::half::f16;
//!
//! let (rows, cols) = (256, 512);
//! // A 50%-pruned matrix: every other weight is zero.
//! let w: Vec<f16> = (0..rows * cols)
//!     .map(|i| if i % 2 == 0 { f16::from_f32(((i % 7) as f32 - 3.0) / 8.0) } else { f16::ZERO })
//!     .collect();
//! let a = MackoMatrix::from_dense_f16(rows, cols, &w)?;
//! let x: Vec<f16> = (0..cols).map(|i| f16::from_f32((i % 5) as f32 / 4.0)).collect();
//!
//! let dev = Device::auto()?;                 // CUDA, else a GPU through wgpu, else the CPU
//! let a_dev = dev.upload(&a)?;
//! let x_dev = dev.upload_vector(&x)?;
//! let mut y_dev = dev.zeros(rows, Precision::F16)?;
//! dev.spmv(&a_dev, &x_dev, &mut y_dev)?;     // y = A·x
//! let y = dev.download(&y_dev)?.to_f64();
//!
//! let r = reference::spmv_macko(&a, &x)?;    // the f64 reference
//! assert!((0..rows).all(|i| r.agrees(i, y[i], Precision::F16)));
//! # Ok::<(), macko::Error>(())
//! ```

#![deny(missing_docs)]
// Doc tests, the README's among them, are code users paste: no warning may hide in them.
#![doc(test(attr(deny(warnings))))]

/// The README's code blocks, compiled and run as doc tests, so that every block a user pastes
/// into a new crate builds and runs as written.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub mod backend;
pub mod checkpoint;
mod device;
mod dispatch;
mod error;
pub mod interop;
mod options;
pub mod prune;
pub mod synthetic;
pub mod tune;

pub use backend::{
    BackendKind, DeviceInfo, ForcedPlan, HostVector, MatrixKind, MatrixRef, Precision,
    VendorBaseline,
};
pub use device::sparse_inputs::{DeviceSparseVector, SparseInputProduct};
pub use device::{BackendStatus, Device, DeviceMatrix, DeviceVector};
pub use dispatch::Plan;
pub use error::{Error, Result};
pub use half;
pub use macko_format::{
    self as format, reference, storage, AnyMatrix, CsrMatrix, DenseMatrix, FormatError,
    HomogeneousCsrMatrix, MackoMatrix, OutputPrecision, QuantBits, QuantDenseMatrix,
    QuantMackoMatrix, Quantization, ScaleLayout, Sparse24Matrix, SparseVector,
};
#[doc(hidden)]
pub use options::Tuning;
pub use options::{
    default_kernel_cache_dir, DeviceOptions, PlanCache, ENV_BACKEND, ENV_KERNEL_CACHE,
    ENV_PLAN_CACHE, ENV_TUNING, ENV_WGPU_SUBGROUPS,
};

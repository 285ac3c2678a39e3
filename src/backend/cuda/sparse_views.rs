//! What the products with a sparse input read on CUDA (`sparse_inputs.rs` launches them): a
//! sparse vector on the device, homogeneous CSR matrices, and the views of the matrices whose
//! rows the kernels of kernels/transposed.cu walk (CSR, homogeneous CSR, MACKO with binary16
//! values), with the uploads of the first two.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, LaunchArgs, PushKernelArg};
use macko_format::{HomogeneousCsrMatrix, SparseVector};

use super::errors::internal;
use super::memory::{dim, CsrDev, DeviceArray, MackoDev};
use crate::backend::BackendKind;
use crate::error::{Error, Result};

/// A sparse vector on the device: its non-zero entries (the ±0 ones dropped at upload, as on the
/// CPU and wgpu), indices increasing (validated by [`SparseVector`]) and values widened to f32
/// once, the type the kernels multiply in.
pub(crate) struct CudaSparseVector {
    /// Elements, stored or not.
    pub(super) len: u32,
    /// Stored non-zero entries.
    pub(super) nnz: u32,
    pub(super) index: DeviceArray<u32>,
    pub(super) value: DeviceArray<f32>,
}

/// A homogeneous CSR matrix on the device: CSR's row pointers and columns, and its one weight
/// widened to f32 (exact) for the kernels.
pub(crate) struct HomogeneousCsrDev {
    pub rows: u32,
    pub cols: u32,
    pub(super) row_ptr: DeviceArray<u32>,
    pub(super) col_idx: DeviceArray<u32>,
    pub(super) weight: f32,
}

/// Where a CSR-like matrix keeps its values.
#[derive(Clone, Copy)]
pub(crate) enum Values<'a> {
    /// One binary16 per entry.
    Stored(&'a CudaSlice<u16>),
    /// One weight for every entry.
    Weight(f32),
}

impl Values<'_> {
    /// Index of the kernel variant in the pairs of [`SparseInputKernels`].
    pub(super) fn index(self) -> usize {
        match self {
            Values::Stored(_) => 0,
            Values::Weight(_) => 1,
        }
    }
}

/// A CSR or homogeneous CSR matrix as the kernels read it.
pub(crate) struct CsrView<'a> {
    pub(super) rows: u32,
    pub(super) cols: u32,
    /// Stored entries.
    pub(super) nnz: usize,
    pub(super) row_ptr: &'a CudaSlice<u32>,
    pub(super) col_idx: &'a CudaSlice<u32>,
    pub(super) values: Values<'a>,
}

impl<'a> CsrView<'a> {
    /// A CSR matrix's view.
    pub fn csr(m: &'a CsrDev) -> Self {
        Self {
            rows: m.rows,
            cols: m.cols,
            nnz: m.col_idx.len(),
            row_ptr: m.row_ptr.buf(),
            col_idx: m.col_idx.buf(),
            values: Values::Stored(m.values.buf()),
        }
    }

    /// A homogeneous CSR matrix's view.
    pub fn homogeneous(m: &'a HomogeneousCsrDev) -> Self {
        Self {
            rows: m.rows,
            cols: m.cols,
            nnz: m.col_idx.len(),
            row_ptr: m.row_ptr.buf(),
            col_idx: m.col_idx.buf(),
            values: Values::Weight(m.weight),
        }
    }
}

/// A MACKO matrix with binary16 values as the kernels read it (the values as 16-byte words of 8,
/// the codes as 32-bit words of 8: docs/FORMAT.md's padded arrays).
pub(crate) struct MackoView<'a> {
    pub(super) rows: u32,
    pub(super) cols: u32,
    pub(super) row_ptr: &'a CudaSlice<u32>,
    pub(super) values: &'a CudaSlice<u16>,
    pub(super) codes: &'a CudaSlice<u8>,
}

impl<'a> MackoView<'a> {
    /// A MACKO matrix's view, or None for quantized values (their codes are not binary16).
    pub fn of(m: &'a MackoDev) -> Option<Self> {
        m.quant.is_none().then(|| Self {
            rows: m.rows,
            cols: m.cols,
            row_ptr: m.row_ptr.buf(),
            values: m.values.buf(),
            codes: m.codes.buf(),
        })
    }
}

/// A matrix the products with a sparse input take.
pub(crate) enum RowsView<'a> {
    Csr(CsrView<'a>),
    Macko(MackoView<'a>),
}

impl<'a> RowsView<'a> {
    /// Pushes the matrix's arrays as every kernel of kernels/transposed.cu that walks its rows
    /// takes them first: row_ptr, col_idx, then values or the weight (CSR), or row_ptr, values,
    /// codes (MACKO).
    pub(super) fn push_args<'b>(&'b self, args: &mut LaunchArgs<'b>)
    where
        'a: 'b,
    {
        match self {
            RowsView::Csr(c) => {
                args.arg(c.row_ptr).arg(c.col_idx);
                match &c.values {
                    Values::Stored(values) => args.arg(*values),
                    Values::Weight(w) => args.arg(w),
                };
            }
            RowsView::Macko(m) => {
                args.arg(m.row_ptr).arg(m.values).arg(m.codes);
            }
        }
    }

    pub(super) fn rows(&self) -> u32 {
        match self {
            RowsView::Csr(v) => v.rows,
            RowsView::Macko(v) => v.rows,
        }
    }
    pub(super) fn cols(&self) -> u32 {
        match self {
            RowsView::Csr(v) => v.cols,
            RowsView::Macko(v) => v.cols,
        }
    }
}

/// Copies `x` to the device, its non-zero entries only.
pub(crate) fn upload_vector(
    stream: &Arc<CudaStream>,
    x: &SparseVector,
) -> Result<CudaSparseVector> {
    // A longer x matches no matrix (rows and columns fit 31 bits); keeping it there lets the
    // kernels' grid-stride loops over its entries stay inside u32.
    let len = dim(x.len(), "elements of a sparse vector")?;
    let (mut index, mut value) = (Vec::new(), Vec::new());
    for (i, v) in x.entries().filter(|(_, v)| !macko_format::is_zero(*v)) {
        // i < len ≤ 2³¹ − 1.
        index.push(i as u32);
        value.push(v.to_f32());
    }
    Ok(CudaSparseVector {
        len,
        nnz: u32::try_from(index.len()).map_err(|_| internal("sparse entries past 32 bits"))?,
        index: DeviceArray::upload(stream, &index, "sparse x indices")?,
        value: DeviceArray::upload(stream, &value, "sparse x values")?,
    })
}

/// Uploads a homogeneous CSR matrix (CSR's limits: the kernels step entry indices by 32 from
/// below nnz).
pub(crate) fn upload_homogeneous(
    stream: &Arc<CudaStream>,
    m: &HomogeneousCsrMatrix,
) -> Result<HomogeneousCsrDev> {
    let (rows, cols) = (dim(m.rows(), "rows")?, dim(m.cols(), "columns")?);
    if m.nnz() > (u32::MAX - 1024) as usize {
        return Err(Error::Backend {
            backend: BackendKind::Cuda,
            message: format!(
                "the CUDA homogeneous CSR kernels take at most {} entries, not {}",
                u32::MAX - 1024,
                m.nnz()
            ),
        });
    }
    Ok(HomogeneousCsrDev {
        rows,
        cols,
        row_ptr: DeviceArray::upload(stream, m.row_ptr(), "homogeneous CSR row pointers")?,
        col_idx: DeviceArray::upload(stream, m.col_idx(), "homogeneous CSR column indices")?,
        weight: m.weight().to_f32(),
    })
}

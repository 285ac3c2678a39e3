//! y = A·x with x sparse (`Device::spmv_sparse_x`) for CSR, homogeneous CSR and MACKO with
//! binary16 values: the matrix's ordinary single-vector kernel (the one its plan picked at
//! upload: subgroup or workgroup path, MACKO's x staging, row-aligned upload and tiles as they
//! are) over the sparse vector's dense copy (made at its upload), specialized with `SPARSE_X` so
//! that an entry under a zero of x adds nothing, even a NaN or ±∞ of A there, by a select of
//! the term, never a product with 0 (shaders/csr.wgsl, shaders/macko.wgsl and macko_sg.wgsl;
//! shaders/README.md, "Products with a sparse x"). Reusing the ordinary kernels keeps one code
//! path per format, and the constant is pruned from the ordinary product's pipelines. The rows
//! are row-major, so every column index (MACKO: every gap code) is still read: the bytes saved
//! are the values under x's zeros at most. Quantized MACKO and the other formats are refused
//! with `Error::Unsupported` (`UNSUPPORTED_SPARSE_X`).

use crate::backend::{BackendKind, Precision, UNSUPPORTED_SPARSE_X};
use crate::error::{Error, Result};

use super::backend::WgpuBackend;
use super::gpu::{backend_error, lock};
use super::kernel::Kernel;
use super::memory::{GpuMatrix, GpuVector};
use super::transposed::GpuSparseVector;

impl WgpuBackend {
    /// Queues y = A·x for a sparse x (shapes checked by the device layer).
    pub(super) fn sparse_x_impl(
        &self,
        a: &GpuMatrix,
        x: &GpuSparseVector,
        y: &GpuVector,
    ) -> Result<()> {
        self.gpu.check()?;
        let x = self.sparse_x_dense(a, x)?;
        if a.rows == 0 {
            return Ok(());
        }
        let mut pending = lock(&self.pending);
        self.record_sparse_x(pending.pass(&self.gpu), a, x, y)?;
        self.count_product(&mut pending)
    }

    /// Times y = A·x for a sparse x (`time_recorded`), cycling through `a`.
    pub(super) fn time_sparse_x(
        &self,
        a: &[&GpuMatrix],
        x: &GpuSparseVector,
        y: &GpuVector,
        warmup: usize,
        iters: usize,
    ) -> Result<Vec<f64>> {
        if a.is_empty() {
            return Ok(Vec::new());
        }
        for m in a {
            self.sparse_x_dense(m, x)?;
        }
        let dense = self.sparse_x_dense(a[0], x)?;
        let record = |pass: &mut wgpu::ComputePass<'_>, i: usize| {
            let m = a[i % a.len()];
            if m.rows == 0 {
                return Ok(());
            }
            self.record_sparse_x(pass, m, dense, y)
        };
        self.time_recorded(
            warmup,
            iters,
            |i| self.sparse_x_impl(a[i % a.len()], x, y),
            Some(record),
        )
    }

    /// The dense copy of `x` for a product with `a`: an error where `a` has no such kernel or
    /// x was too long to copy.
    fn sparse_x_dense<'a>(&self, a: &GpuMatrix, x: &'a GpuSparseVector) -> Result<&'a GpuVector> {
        // Quantized MACKO runs kernels of its own (QuantMacko*), not built with SPARSE_X.
        let built = matches!(
            a.plan.kernel,
            Kernel::CsrSubgroup
                | Kernel::CsrWorkgroup
                | Kernel::MackoSubgroup
                | Kernel::MackoWorkgroup
        );
        if !built || a.plan.quant.is_some() {
            return Err(Error::Unsupported {
                backend: BackendKind::Wgpu,
                what: UNSUPPORTED_SPARSE_X,
            });
        }
        match &x.dense {
            Some(d) => Ok(d),
            None => Err(self
                .check_vector_len(x.len)
                .err()
                .unwrap_or_else(|| backend_error("internal: a sparse x without its dense copy"))),
        }
    }

    /// Records y = A·x with the `SPARSE_X` variant of `a`'s plan's pipeline.
    fn record_sparse_x(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        a: &GpuMatrix,
        x: &GpuVector,
        y: &GpuVector,
    ) -> Result<()> {
        let mut key = a.plan.pipeline_key(y.precision == Precision::F16);
        key.sparse_x = true;
        self.record_rows(pass, a, x, y, key)
    }
}

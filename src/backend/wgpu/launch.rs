//! The recording and queueing of products: a product binds its matrix's row blocks, x and y,
//! and dispatches what the matrix's plan (made at upload) says. The output precision picks one
//! of the plan's two pipelines; nothing else is decided here.

use crate::backend::Precision;
use crate::error::Result;

use super::backend::WgpuBackend;
use super::gpu::{backend_error, lock, Pending};
use super::memory::{GpuMatrix, GpuVector};

/// Products recorded into one command encoder before it is submitted without waiting (a later
/// `synchronize` or download submits the rest and waits once).
pub(super) const MAX_PENDING_PRODUCTS: usize = 256;

impl WgpuBackend {
    /// Records y = A·x into `pass`: one dispatch per row block. Nothing is cleared between
    /// products, so products can follow each other in one pass.
    pub(super) fn record_product(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        a: &GpuMatrix,
        x: &GpuVector,
        y: &GpuVector,
    ) -> Result<()> {
        let key = a.plan.pipeline_key(y.precision == Precision::F16);
        let pipeline = self.pipelines.get(&self.gpu, key)?;
        let x_group = x
            .as_x
            .as_ref()
            .ok_or_else(|| backend_error("internal: x is not an f16 vector"))?;
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(1, x_group, &[]);
        pass.set_bind_group(2, &y.as_y, &[]);
        for block in &a.blocks {
            pass.set_bind_group(0, &block.bind_group, &[]);
            pass.dispatch_workgroups(block.dispatch.0, block.dispatch.1, 1);
        }
        Ok(())
    }

    /// Queues y = A·x in the pending pass; submits (without waiting) once
    /// `MAX_PENDING_PRODUCTS` are queued.
    pub(super) fn spmv_impl(&self, a: &GpuMatrix, x: &GpuVector, y: &GpuVector) -> Result<()> {
        self.gpu.check()?;
        if a.rows == 0 {
            return Ok(());
        }
        let mut pending = lock(&self.pending);
        self.record_product(pending.pass(&self.gpu), a, x, y)?;
        pending.products += 1;
        if pending.products >= MAX_PENDING_PRODUCTS {
            self.flush(&mut pending)?;
        }
        Ok(())
    }

    /// Submits the pending products, if any, without waiting.
    pub(super) fn flush(&self, pending: &mut Pending) -> Result<()> {
        match pending.take() {
            Some(encoder) => self.gpu.submit(encoder, "queued products"),
            None => Ok(()),
        }
    }

    pub(super) fn synchronize_impl(&self) -> Result<()> {
        self.flush(&mut lock(&self.pending))?;
        self.gpu.wait()
    }
}

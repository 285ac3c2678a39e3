//! The recording and queueing of products: a product binds its matrix's row blocks, x and y,
//! and dispatches what the matrix's plan (made at upload) says. The output precision picks one
//! of the plan's two pipelines; nothing else is decided here.

use crate::backend::{chunks, Chunk, Precision};
use crate::error::Result;

use super::backend::WgpuBackend;
use super::gpu::{backend_error, lock, Pending};
use super::kernel::Kernel;
use super::memory::{GpuMatrix, GpuVector};
use super::pipelines::PipelineKey;
use super::plan::{batch_width, width_index};

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
        self.record_rows(pass, a, x, y, key)
    }

    /// Records `key`'s pipeline (a variant of the plan's single-vector one) over `a`'s row
    /// blocks with x and y bound.
    pub(super) fn record_rows(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        a: &GpuMatrix,
        x: &GpuVector,
        y: &GpuVector,
        key: PipelineKey,
    ) -> Result<()> {
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

    /// Records Y = A·X for the vectors of `chunk` (few-token product, shaders/README.md,
    /// "Few-token products") into `pass`: the transposition of the chunk's x into the matrix's
    /// XT, then one dispatch per row block of the plan of the chunk's width.
    pub(super) fn record_chunk(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        a: &GpuMatrix,
        x: &GpuVector,
        y: &GpuVector,
        chunk: Chunk,
    ) -> Result<()> {
        let width = batch_width(chunk.count);
        let index = width_index(width);
        let plan = a
            .plan
            .batch
            .get(index)
            .ok_or_else(|| backend_error("internal: a matrix without few-token plans"))?;
        let x_group = x
            .as_x
            .as_ref()
            .ok_or_else(|| backend_error("internal: x is not an f16 vector"))?;
        let to_u32 = |n: usize| {
            u32::try_from(n).map_err(|_| backend_error("internal: a chunk past 32 bits"))
        };
        let binding = a.batch.chunk(
            &self.gpu,
            &self.pipelines,
            self.vector_limit,
            (to_u32(chunk.first)?, to_u32(chunk.count)?, width),
        )?;
        let transpose = PipelineKey::batch(Kernel::BatchTranspose, false, width, 0, false);
        pass.set_pipeline(&self.pipelines.get(&self.gpu, transpose)?);
        pass.set_bind_group(0, &binding.write, &[]);
        pass.set_bind_group(1, x_group, &[]);
        let (tx, ty) = a.batch.transpose_dispatch;
        pass.dispatch_workgroups(tx, ty, 1);
        let key = plan.pipeline_key(y.precision == Precision::F16);
        pass.set_pipeline(&self.pipelines.get(&self.gpu, key)?);
        pass.set_bind_group(1, x_group, &[]);
        pass.set_bind_group(2, &y.as_y, &[]);
        pass.set_bind_group(3, &binding.read, &[]);
        for block in &a.blocks {
            let (gx, gy) = block.batch_dispatch.get(index).copied().unwrap_or((0, 0));
            pass.set_bind_group(0, &block.bind_group, &[]);
            pass.dispatch_workgroups(gx, gy, 1);
        }
        Ok(())
    }

    /// Records Y = A·X for `batch` vectors: the single-vector product for one, else one
    /// transposition and one pass over the matrix per chunk.
    pub(super) fn record_batch(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        a: &GpuMatrix,
        x: &GpuVector,
        y: &GpuVector,
        batch: usize,
    ) -> Result<()> {
        if batch == 1 {
            return self.record_product(pass, a, x, y);
        }
        for chunk in chunks(batch) {
            self.record_chunk(pass, a, x, y, chunk)?;
        }
        Ok(())
    }

    /// Queues Y = A·X for `batch` vectors in the pending pass; submits (without waiting) once
    /// `MAX_PENDING_PRODUCTS` are queued.
    pub(super) fn spmv_impl(
        &self,
        a: &GpuMatrix,
        x: &GpuVector,
        y: &GpuVector,
        batch: usize,
    ) -> Result<()> {
        self.gpu.check()?;
        if a.rows == 0 {
            return Ok(());
        }
        let mut pending = lock(&self.pending);
        self.record_batch(pending.pass(&self.gpu), a, x, y, batch)?;
        self.count_product(&mut pending)
    }

    /// Counts one more product recorded into the pending pass, and submits the pending
    /// products (without waiting) once there are `MAX_PENDING_PRODUCTS`.
    pub(super) fn count_product(&self, pending: &mut Pending) -> Result<()> {
        pending.products += 1;
        if pending.products >= MAX_PENDING_PRODUCTS {
            self.flush(pending)?;
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

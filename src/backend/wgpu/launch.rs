//! The recording and queueing of products: a product binds its matrix's row blocks, x and y,
//! and dispatches what the matrix's plan (made at upload) says. The output precision picks one
//! of the plan's two pipelines; nothing else is decided here.

use crate::backend::Precision;
use crate::error::Result;

use super::gpu::{backend_error, lock};
use super::memory::{GpuMatrix, GpuVector};
use super::WgpuBackend;

/// Products recorded into one command encoder before it is submitted without waiting (a later
/// `synchronize` or download submits the rest and waits once).
pub(super) const MAX_PENDING_PRODUCTS: usize = 256;

/// Pending work: the encoder products are recorded into, the one compute pass they share, and
/// how many it holds.
///
/// Queued products share one pass because every pass costs wgpu two more command buffers and
/// its own tracking when the encoder is finished (about 3 µs per product of host time on a 2-core
/// VM, most of it in `finish`). Within a pass wgpu-core still tracks usage per dispatch and puts
/// a barrier before each dispatch whose buffers a previous one wrote (y, the partial sums), so
/// products stay ordered: a y read as the next product's x included.
#[derive(Default)]
pub(super) struct Pending {
    /// Declared before `encoder`: a pass must end before its encoder is finished.
    pass: Option<wgpu::ComputePass<'static>>,
    encoder: Option<wgpu::CommandEncoder>,
    products: usize,
}

impl Pending {
    /// The pass the next product is recorded into, begun (with its encoder) if none is open.
    fn pass(&mut self, gpu: &super::gpu::Gpu) -> &mut wgpu::ComputePass<'static> {
        let encoder = &mut self.encoder;
        self.pass.get_or_insert_with(|| {
            encoder
                .get_or_insert_with(|| gpu.encoder("products"))
                .begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("queued products"),
                    timestamp_writes: None,
                })
                // The pass locks the encoder until it is dropped (in `take`).
                .forget_lifetime()
        })
    }

    /// Ends the pass and hands over the encoder, if any products were recorded.
    fn take(&mut self) -> Option<wgpu::CommandEncoder> {
        self.pass = None;
        self.products = 0;
        self.encoder.take()
    }
}

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

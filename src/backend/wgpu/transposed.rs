//! Transposed products y = Aᵀ·x, x sparse or dense (shaders/csr_transposed_wg.wgsl and
//! shaders/macko_transposed_wg.wgsl; shaders/README.md, "Transposed products with a sparse x"):
//! the sparse vector on the device and the recording of the products. CSR, homogeneous CSR and
//! MACKO with binary16 values (whatever layout its upload chose: row-aligned or the format's,
//! row pointers or a tile table); quantized MACKO and the other formats are refused with
//! `Error::Unsupported` (`UNSUPPORTED_TRANSPOSED`): they have no kernel for it.

use bytemuck::{Pod, Zeroable};
use macko_format::SparseVector;

use crate::backend::{BackendKind, Precision, SparseInput, UNSUPPORTED_TRANSPOSED};
use crate::error::{Error, Result};

use super::backend::WgpuBackend;
use super::gpu::{backend_error, lock};
use super::kernel::Kernel;
use super::memory::{to_u32, Block, GpuMatrix, GpuVector};
use super::pipelines::PipelineKey;

/// Columns of y one workgroup of the transposed kernels owns (TILE in csr_transposed_wg.wgsl and
/// macko_transposed_wg.wgsl).
const TILE: u32 = 256;

/// What the transposed kernel reads about a sparse x (SparseXParams in csr_transposed_wg.wgsl).
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct SparseXParams {
    nnz: u32,
    unused: [u32; 3],
}

/// A sparse vector on the device: its non-zero entries (the ±0 ones dropped at upload, as on
/// the CPU), indices increasing and values widened to f32 once, bound as group 1 of the
/// transposed kernel (the buffers live in the bind group); and, where a vector of its length
/// fits a binding, its dense copy (zeros where it stores nothing), the x of y = A·x with x
/// sparse (sparse_x.rs).
pub(crate) struct GpuSparseVector {
    group: wgpu::BindGroup,
    pub(super) len: usize,
    pub(super) dense: Option<GpuVector>,
}

impl WgpuBackend {
    pub(super) fn upload_sparse_vector_impl(&self, x: &SparseVector) -> Result<GpuSparseVector> {
        self.gpu.check()?;
        to_u32(x.len(), "length of a sparse vector")?;
        let (mut index, mut value) = (Vec::new(), Vec::new());
        for (i, v) in x.entries().filter(|(_, v)| !macko_format::is_zero(*v)) {
            // i < len, which fits u32.
            index.push(i as u32);
            value.push(v.to_f32());
        }
        let params = SparseXParams {
            nnz: to_u32(index.len(), "entries of a sparse vector")?,
            unused: [0; 3],
        };
        let params = self.gpu.upload(
            bytemuck::bytes_of(&params),
            wgpu::BufferUsages::UNIFORM,
            "sparse x parameters",
        )?;
        let index = self.storage(bytemuck::cast_slice(&index), "sparse x indices")?;
        let value = self.storage(bytemuck::cast_slice(&value), "sparse x values")?;
        let group = self.bind_group(
            &self.pipelines.sparse_x,
            &[(2, &params), (3, &index), (4, &value)],
            "sparse x",
        )?;
        // The dense copy only where a vector that long can be bound: the transposed products
        // need none, and y = A·x says why it cannot run without one (sparse_x.rs).
        let dense = match self.check_vector_len(x.len()) {
            Ok(()) => Some(self.upload_vector_impl(&x.to_dense())?),
            Err(_) => None,
        };
        Ok(GpuSparseVector {
            group,
            len: x.len(),
            dense,
        })
    }

    /// Queues y = Aᵀ·x for a CSR, homogeneous CSR or MACKO `a` and a sparse or dense (f16) `x`
    /// (shapes checked by the device layer): one dispatch per row block, in order, each over
    /// every column tile of y.
    pub(super) fn transposed_impl(
        &self,
        a: &GpuMatrix,
        x: SparseInput<'_, GpuVector, GpuSparseVector>,
        y: &GpuVector,
    ) -> Result<()> {
        self.gpu.check()?;
        let dispatch = self.transposed_dispatch(a, x, y)?;
        let mut pending = lock(&self.pending);
        let Some(dispatch) = dispatch else {
            // No rows: y = 0, written after whatever is queued before it.
            self.flush(&mut pending)?;
            let zeros = vec![0u8; y.buffer.size() as usize];
            self.gpu.write(&y.buffer, &zeros, "zero y")?;
            if let Some(wide) = &y.wide {
                let zeros = vec![0u8; wide.size() as usize];
                self.gpu.write(wide, &zeros, "zero y (f32 copy)")?;
            }
            return Ok(());
        };
        dispatch.record(pending.pass(&self.gpu));
        self.count_product(&mut pending)
    }

    /// Times transposed products ([`WgpuBackend::transposed_impl`]): `warmup` queued, then
    /// `iters` each in a pass of its own between two timestamps, cycling through `a`
    /// (`time_recorded`; on the host clock where a matrix has no rows).
    pub(super) fn time_transposed(
        &self,
        a: &[&GpuMatrix],
        x: SparseInput<'_, GpuVector, GpuSparseVector>,
        y: &GpuVector,
        warmup: usize,
        iters: usize,
    ) -> Result<Vec<f64>> {
        if a.is_empty() {
            return Ok(Vec::new());
        }
        let dispatches = a
            .iter()
            .map(|m| self.transposed_dispatch(m, x, y))
            .collect::<Result<Option<Vec<_>>>>()?;
        self.time_recorded(
            warmup,
            iters,
            |i| self.transposed_impl(a[i % a.len()], x, y),
            dispatches.map(|d| {
                move |pass: &mut wgpu::ComputePass<'_>, i: usize| {
                    d[i % d.len()].record(pass);
                    Ok(())
                }
            }),
        )
    }

    /// The dispatches of y = Aᵀ·x, checked and with their pipeline built, ready to be recorded
    /// into the queued products' pass or a timed one; `None` where A has no rows (y = 0).
    fn transposed_dispatch<'a>(
        &self,
        a: &'a GpuMatrix,
        x: SparseInput<'a, GpuVector, GpuSparseVector>,
        y: &'a GpuVector,
    ) -> Result<Option<TransposedDispatch<'a>>> {
        // The kernel pair by the matrix's own kernel: quantized MACKO runs QuantMacko*, so
        // only binary16 MACKO reaches the MACKO pair.
        let (sparse, dense) = match a.plan.kernel {
            Kernel::CsrSubgroup | Kernel::CsrWorkgroup => {
                (Kernel::CsrTransposed, Kernel::CsrTransposedDense)
            }
            Kernel::MackoSubgroup | Kernel::MackoWorkgroup => {
                (Kernel::MackoTransposed, Kernel::MackoTransposedDense)
            }
            _ => {
                return Err(Error::Unsupported {
                    backend: BackendKind::Wgpu,
                    what: UNSUPPORTED_TRANSPOSED,
                })
            }
        };
        if a.blocks.is_empty() {
            return Ok(None);
        }
        let tiles = to_u32(y.len.div_ceil(TILE as usize), "column tiles of y")?;
        let max_dim = self.caps.max_workgroups_per_dim.max(1);
        let gx = tiles.clamp(1, max_dim);
        let gy = tiles.div_ceil(gx);
        if gy > max_dim {
            return Err(Error::TooLarge {
                backend: BackendKind::Wgpu,
                what: format!("column tiles of a transposed product ({} columns)", y.len),
                needed: u64::from(tiles),
                limit: u64::from(max_dim) * u64::from(max_dim),
            });
        }
        let (kernel, x_group) = match x {
            SparseInput::Sparse(x) => (sparse, &x.group),
            SparseInput::Dense(x) => (
                dense,
                x.as_x
                    .as_ref()
                    .ok_or_else(|| backend_error("internal: x is not an f16 vector"))?,
            ),
        };
        let key = PipelineKey {
            homogeneous: a.plan.homogeneous,
            ..PipelineKey::plain(kernel, y.precision == Precision::F16)
        };
        Ok(Some(TransposedDispatch {
            pipeline: self.pipelines.get(&self.gpu, key)?,
            x_group,
            y_group: &y.as_y,
            blocks: &a.blocks,
            grid: (gx, gy),
        }))
    }
}

/// One transposed product's dispatches ([`WgpuBackend::transposed_dispatch`]).
struct TransposedDispatch<'a> {
    pipeline: wgpu::ComputePipeline,
    x_group: &'a wgpu::BindGroup,
    y_group: &'a wgpu::BindGroup,
    blocks: &'a [Block],
    grid: (u32, u32),
}

impl TransposedDispatch<'_> {
    /// Records the dispatches into `pass`: one per row block, each over every column tile.
    fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(1, self.x_group, &[]);
        pass.set_bind_group(2, self.y_group, &[]);
        for block in self.blocks {
            pass.set_bind_group(0, &block.bind_group, &[]);
            pass.dispatch_workgroups(self.grid.0, self.grid.1, 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Kernel, TILE};

    /// The tile and workgroup the dispatch is sized with are the kernels'.
    #[test]
    fn the_tile_and_workgroup_match_the_shaders() {
        for (wgsl, kernel) in [
            (
                include_str!("../../../shaders/csr_transposed_wg.wgsl"),
                Kernel::CsrTransposed,
            ),
            (
                include_str!("../../../shaders/macko_transposed_wg.wgsl"),
                Kernel::MackoTransposed,
            ),
        ] {
            assert!(wgsl.contains(&format!("const TILE: u32 = {TILE}u;")));
            let wg = kernel.workgroup_size();
            assert!(wgsl.contains(&format!("const WORKGROUP: u32 = {wg}u;")));
        }
        assert_eq!(TILE % 2, 0, "an f16 word of y must not straddle two tiles");
    }
}

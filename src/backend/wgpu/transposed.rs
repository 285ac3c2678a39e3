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

use super::backend::{Partials, WgpuBackend};
use super::gpu::{backend_error, lock};
use super::kernel::Kernel;
use super::memory::{to_u32, Block, GpuMatrix, GpuVector};
use super::pipelines::PipelineKey;

/// Columns of y one workgroup of the transposed kernels owns (TILE in transposed.wgsl).
const TILE: u32 = 256;

/// Workgroups a transposed product's grid aims at (tiles of y × chunks of x): enough to fill a
/// large GPU many times over (an H100 runs 132 × 32 workgroups of 64 at once). With y's 40
/// tiles of the CSR report's 10 000 columns and one chunk, the products ran at 0.2–3 % of the
/// streaming-read ceiling on an H100 (2026-11-28), each workgroup walking every row of x in
/// turn with a barrier after each.
const TARGET_WORKGROUPS: u32 = 4096;

/// Fewest entries of x a chunk takes: a chunk's partial sums cost a write and a read of its
/// tile, more than a few rows of work.
const MIN_CHUNK: u32 = 8;

/// Where x has too few entries for chunks of MIN_CHUNK to bring the grid to SHORT_TARGET
/// workgroups, chunks as short as SHORT_CHUNK entries, as many as reach it. Measured on an H100
/// (2026-11-28, `macko bench --sparse-inputs`, wgpu): on the CSR report's case with x 1 %
/// (100 entries, 40 tiles) chunks of 2 (2 000 workgroups) against 8 (480) took MACKO Aᵀ·x with x
/// sparse from 9.8–12.3 % to 16.1 % of the ceiling (medians over the six cases); on Llama-2-7B's
/// MLP shapes with x 10 % chunks of 8 (137 and 51 chunks, 2 192 workgroups at most) beat
/// chunks of ~4 filling 4 096 workgroups: CSR 10.8–13.2 % against 7.3–10.5 %, MACKO 6.7–7.1 %
/// against 4.6 %. So short chunks only up to about half the default target.
const SHORT_CHUNK: u32 = 2;
/// The workgroups short chunks may bring the grid to (see SHORT_CHUNK).
const SHORT_TARGET: u32 = 2048;

/// Words before the partial sums in their buffer (PARTIALS_AT in transposed.wgsl).
const PARTIALS_AT: u64 = 4;

/// Invocations of the combine pass (WORKGROUP in transposed.wgsl, that of every transposed
/// kernel).
const COMBINE_WORKGROUP: u32 = 64;

/// How a transposed product cuts x into chunks: the workgroups its grid aims at and the fewest
/// entries of x a chunk takes (TARGET_WORKGROUPS and MIN_CHUNK unless tuned).
#[derive(Debug, Clone, Copy)]
struct ChunkRule {
    target: u32,
    min_chunk: u32,
    /// The shortest chunk that may bring the grid up to SHORT_TARGET workgroups (SHORT_CHUNK;
    /// a tuned `min_chunk` sets it too, so that the tuning is the shortest chunk there is).
    short_chunk: u32,
}

impl Default for ChunkRule {
    fn default() -> Self {
        Self {
            target: TARGET_WORKGROUPS,
            min_chunk: MIN_CHUNK,
            short_chunk: SHORT_CHUNK,
        }
    }
}

/// Chunks x's `count` entries (stored entries, or a dense x's rows) are cut into for a product
/// with `tiles` column tiles of y and `cols` columns: as many as bring the grid to the rule's
/// target, each of at least its `min_chunk` entries (or of its `short_chunk`, where that brings
/// the grid no further than SHORT_TARGET), no more than a grid dimension takes and than fit in
/// `max_bytes` of partial sums (at least one).
fn chunks(rule: ChunkRule, count: u32, tiles: u32, cols: u32, max_dim: u32, max_bytes: u64) -> u32 {
    let by_grid = rule.target.div_ceil(tiles.max(1));
    // Chunks of min_chunk, or more and shorter (down to short_chunk) up to SHORT_TARGET.
    let short = (count / rule.short_chunk.max(1)).min(SHORT_TARGET.div_ceil(tiles.max(1)));
    let by_work = (count / rule.min_chunk.max(1)).max(short);
    let by_memory = (max_bytes / 4).saturating_sub(PARTIALS_AT) / u64::from(cols.max(1));
    let by_memory = u32::try_from(by_memory).unwrap_or(u32::MAX);
    by_work.min(by_grid).min(max_dim).min(by_memory).max(1)
}

/// Bytes of the partial sums of `chunks` chunks over `cols` columns, with their header.
fn partials_bytes(chunks: u32, cols: u32) -> u64 {
    4 * (PARTIALS_AT + u64::from(chunks) * u64::from(cols))
}

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
    /// Stored entries (the ±0 ones dropped).
    nnz: u32,
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
        let nnz = to_u32(index.len(), "entries of a sparse vector")?;
        let params = SparseXParams {
            nnz,
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
            nnz,
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
        let (kernel, x_group, count) = match x {
            SparseInput::Sparse(x) => (sparse, &x.group, x.nnz),
            SparseInput::Dense(x) => (
                dense,
                x.as_x
                    .as_ref()
                    .ok_or_else(|| backend_error("internal: x is not an f16 vector"))?,
                to_u32(x.len, "rows of a transposed product")?,
            ),
        };
        let cols = to_u32(y.len, "columns of a transposed product")?;
        let rule = ChunkRule {
            target: self
                .tuning
                .transposed_workgroups
                .unwrap_or(TARGET_WORKGROUPS),
            min_chunk: self.tuning.transposed_min_chunk.unwrap_or(MIN_CHUNK),
            short_chunk: self.tuning.transposed_min_chunk.unwrap_or(SHORT_CHUNK),
        };
        let chunks = chunks(rule, count, tiles, cols, max_dim, self.vector_limit);
        // One word of y per invocation of the combine pass (two columns of an f16 y).
        let y_f16 = y.precision == Precision::F16;
        let words = if y_f16 { cols.div_ceil(2) } else { cols };
        let combine_groups = words.div_ceil(COMBINE_WORKGROUP).max(1);
        let cx = combine_groups.clamp(1, max_dim);
        // The matrix kernels read no y, so one pipeline serves both precisions.
        let key = PipelineKey {
            homogeneous: a.plan.homogeneous,
            ..PipelineKey::plain(kernel, false)
        };
        let combine = PipelineKey::plain(Kernel::TransposedCombine, y_f16);
        Ok(Some(TransposedDispatch {
            pipeline: self.pipelines.get(&self.gpu, key)?,
            combine: self.pipelines.get(&self.gpu, combine)?,
            x_group,
            y_group: &y.as_y,
            partials: self.partials_group(partials_bytes(chunks, cols))?,
            empty_group: self.pipelines.empty_group.clone(),
            blocks: &a.blocks,
            grid: (gx, gy, chunks),
            combine_grid: (cx, combine_groups.div_ceil(cx)),
        }))
    }

    /// The bind group of a partial sums buffer of at least `bytes`, grown (to a power of two)
    /// where the current one is smaller.
    fn partials_group(&self, bytes: u64) -> Result<wgpu::BindGroup> {
        if bytes > self.vector_limit {
            return Err(Error::TooLarge {
                backend: BackendKind::Wgpu,
                what: "the partial sums of a transposed product (one row of y in f32, and a \
                       header)"
                    .into(),
                needed: bytes,
                limit: self.vector_limit,
            });
        }
        let mut current = lock(&self.transposed_partials);
        if let Some(p) = current.as_ref().filter(|p| p.bytes >= bytes) {
            return Ok(p.group.clone());
        }
        let bytes = bytes.next_power_of_two().min(self.vector_limit).max(bytes);
        let buffer = self.gpu.create_buffer(
            bytes,
            wgpu::BufferUsages::STORAGE,
            "partial sums of transposed products",
        )?;
        let group = self.bind_group(
            &self.pipelines.partials,
            &[(0, &buffer)],
            "partial sums of transposed products",
        )?;
        *current = Some(Partials {
            bytes,
            group: group.clone(),
        });
        Ok(group)
    }
}

/// One transposed product's dispatches ([`WgpuBackend::transposed_dispatch`]).
struct TransposedDispatch<'a> {
    pipeline: wgpu::ComputePipeline,
    combine: wgpu::ComputePipeline,
    x_group: &'a wgpu::BindGroup,
    y_group: &'a wgpu::BindGroup,
    partials: wgpu::BindGroup,
    empty_group: wgpu::BindGroup,
    blocks: &'a [Block],
    /// Column tiles of y (x and y of the grid) and chunks of x (z).
    grid: (u32, u32, u32),
    combine_grid: (u32, u32),
}

impl TransposedDispatch<'_> {
    /// Records the dispatches into `pass`: one per row block, each over every column tile and
    /// chunk of x, then the combine pass into y (wgpu orders dispatches that share a writable
    /// buffer).
    fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(1, self.x_group, &[]);
        pass.set_bind_group(2, self.y_group, &[]);
        pass.set_bind_group(3, &self.partials, &[]);
        for block in self.blocks {
            pass.set_bind_group(0, &block.bind_group, &[]);
            pass.dispatch_workgroups(self.grid.0, self.grid.1, self.grid.2);
        }
        pass.set_pipeline(&self.combine);
        pass.set_bind_group(1, &self.empty_group, &[]);
        pass.dispatch_workgroups(self.combine_grid.0, self.combine_grid.1, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::PARTIALS_AT;
    use super::{
        chunks, partials_bytes, ChunkRule, Kernel, COMBINE_WORKGROUP, MIN_CHUNK, SHORT_CHUNK,
        SHORT_TARGET,
    };
    use super::{TARGET_WORKGROUPS, TILE};

    /// The tile, workgroups and partial sums' header the dispatches are sized with are the
    /// shaders' (transposed.wgsl, shared by every transposed kernel).
    #[test]
    fn the_tile_and_workgroup_match_the_shaders() {
        let wgsl = include_str!("../../../shaders/transposed.wgsl");
        assert!(wgsl.contains(&format!("const TILE: u32 = {TILE}u;")));
        assert!(wgsl.contains(&format!("const PARTIALS_AT: u32 = {PARTIALS_AT}u;")));
        assert!(wgsl.contains(&format!("const WORKGROUP: u32 = {COMBINE_WORKGROUP}u;")));
        for kernel in [
            Kernel::CsrTransposed,
            Kernel::CsrTransposedDense,
            Kernel::MackoTransposed,
            Kernel::MackoTransposedDense,
            Kernel::TransposedCombine,
        ] {
            assert_eq!(kernel.workgroup_size(), COMBINE_WORKGROUP, "{kernel:?}");
        }
        assert_eq!(TILE % 2, 0, "an f16 word of y must not straddle two tiles");
    }

    /// The chunks fill the grid without making chunks of fewer than MIN_CHUNK entries (SHORT_CHUNK
    /// up to SHORT_TARGET workgroups), and stay within the grid's dimension and the partial sums'
    /// memory, at least one.
    #[test]
    fn chunks_fill_the_grid_within_their_limits() {
        let r = ChunkRule::default();
        // The CSR report's 10 000 columns (40 tiles), x 10 % of 10 000 rows: 103 chunks of 9
        // or 10 entries.
        assert_eq!(chunks(r, 1000, 40, 10_000, 65_535, 1 << 30), 103);
        // x 1 % (100 entries): 50 chunks of 2 (2 000 workgroups, below SHORT_TARGET). Llama's
        // 11008×4096 at x 10 % (1 100 entries, 16 tiles): 137 chunks of 8, more than
        // SHORT_TARGET's 128 short ones. Few entries: no chunk shorter than SHORT_CHUNK.
        assert_eq!(chunks(r, 100, 40, 10_000, 65_535, 1 << 30), 50);
        assert_eq!(chunks(r, 1100, 16, 4096, 65_535, 1 << 30), 137);
        assert_eq!(chunks(r, 21, 40, 10_000, 65_535, 1 << 30), 10);
        // Empty x, one tile, a grid dimension of 1, memory for one chunk only: one chunk.
        assert_eq!(chunks(r, 0, 40, 10_000, 65_535, 1 << 30), 1);
        assert_eq!(chunks(r, 1 << 20, 1, 256, 1, 1 << 30), 1);
        assert_eq!(
            chunks(r, 1 << 20, 1, 256, 65_535, partials_bytes(1, 256)),
            1
        );
        assert_eq!(chunks(r, 1 << 20, 1, 256, 65_535, 0), 1);
        for (count, tiles, cols) in [(1u32 << 20, 1u32, 256u32), (5000, 8, 2000), (9, 3, 700)] {
            let k = chunks(r, count, tiles, cols, 65_535, 1 << 30);
            assert!(u64::from(k) * u64::from(tiles) < u64::from(TARGET_WORKGROUPS + tiles));
            assert!(k == 1 || count / k >= SHORT_CHUNK, "{count} {tiles} {k}");
            assert!(
                count / k >= MIN_CHUNK || k * tiles <= SHORT_TARGET + tiles,
                "{count} {tiles} {k}"
            );
            assert!(partials_bytes(k, cols) <= 1 << 30);
        }
        // A tuned rule: chunks of 2 entries, a grid of 16 384 workgroups.
        let tuned = ChunkRule {
            target: 16_384,
            min_chunk: 2,
            short_chunk: 2,
        };
        assert_eq!(chunks(tuned, 1000, 40, 10_000, 65_535, 1 << 30), 410);
        // A tuned shortest chunk of 16 holds for few entries too: 100 entries, 6 chunks.
        let long = ChunkRule {
            min_chunk: 16,
            short_chunk: 16,
            ..ChunkRule::default()
        };
        assert_eq!(chunks(long, 100, 40, 10_000, 65_535, 1 << 30), 6);
    }
}

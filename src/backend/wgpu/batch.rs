//! What a matrix keeps for its few-token products (shaders/README.md, "Few-token products"):
//! the scratch buffer XT that each chunk's x is transposed into (made on the first few-token
//! product, so single-vector users never pay for it), and one uniform and two bind groups per
//! chunk (first vector, count, width) met, made on first use and reused by every later product
//! (a product then only binds and dispatches).

use std::collections::HashMap;
use std::sync::Mutex;

use bytemuck::{Pod, Zeroable};

use crate::backend::BackendKind;
use crate::error::{Error, Result};

use super::gpu::{lock, Gpu};
use super::pipelines::Pipelines;

/// Lanes of XT per column: the widest chunk.
const XT_LANES: u64 = 16;
/// Invocations per workgroup of the transposition (WORKGROUP in batch_xt.wgsl).
const TRANSPOSE_WORKGROUP: u32 = 64;

/// ChunkParams of common.wgsl.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct ChunkParams {
    first: u32,
    count: u32,
    rows: u32,
    cols: u32,
    xt_cols: u32,
    zero_col: u32,
    unused: [u32; 2],
}

/// The bind groups of one chunk: as the product kernels read it (group 3) and as the
/// transposition writes it (group 0).
#[derive(Clone)]
pub(super) struct ChunkBinding {
    pub read: wgpu::BindGroup,
    pub write: wgpu::BindGroup,
}

/// A matrix's few-token state (see the module's documentation).
pub(super) struct BatchState {
    rows: u32,
    cols: u32,
    /// Columns of XT: `cols` rounded up to 8, then 8 zero columns (one of them `zero_col`).
    xt_cols: u32,
    /// Workgroups of the transposition, (x, y): one invocation per column of XT.
    pub transpose_dispatch: (u32, u32),
    xt: Mutex<Option<wgpu::Buffer>>,
    chunks: Mutex<HashMap<(u32, u32, u32), ChunkBinding>>,
}

impl BatchState {
    /// The state of a `rows` × `cols` matrix on a device dispatching at most `max_dim`
    /// workgroups per dimension.
    pub fn new(rows: u32, cols: u32, max_dim: u32) -> Self {
        let xt_cols = cols.div_ceil(8).saturating_mul(8).saturating_add(8);
        let n = xt_cols.div_ceil(TRANSPOSE_WORKGROUP);
        let x = n.clamp(1, max_dim.max(1));
        Self {
            rows,
            cols,
            xt_cols,
            transpose_dispatch: (x, n.div_ceil(x).max(1)),
            xt: Mutex::new(None),
            chunks: Mutex::new(HashMap::new()),
        }
    }

    /// XT, made on first use; `TooLarge` where it would not fit one binding (`limit` bytes).
    fn xt(&self, gpu: &Gpu, limit: u64) -> Result<wgpu::Buffer> {
        let mut xt = lock(&self.xt);
        if let Some(b) = xt.as_ref() {
            return Ok(b.clone());
        }
        let bytes = u64::from(self.xt_cols) * XT_LANES * 2;
        if bytes > limit {
            return Err(Error::TooLarge {
                backend: BackendKind::Wgpu,
                what: format!(
                    "the transposed x of a few-token product ({} columns × {XT_LANES} vectors)",
                    self.cols
                ),
                needed: bytes,
                limit,
            });
        }
        let buffer = gpu.create_buffer(bytes, wgpu::BufferUsages::STORAGE, "transposed x")?;
        *xt = Some(buffer.clone());
        Ok(buffer)
    }

    /// The bind groups of the chunk of `count` vectors from `first` in passes of `width`.
    pub fn chunk(
        &self,
        gpu: &Gpu,
        pipelines: &Pipelines,
        limit: u64,
        (first, count, width): (u32, u32, u32),
    ) -> Result<ChunkBinding> {
        let key = (first, count, width);
        if let Some(c) = lock(&self.chunks).get(&key) {
            return Ok(c.clone());
        }
        let xt = self.xt(gpu, limit)?;
        let params = ChunkParams {
            first,
            count,
            rows: self.rows,
            cols: self.cols,
            xt_cols: self.xt_cols,
            zero_col: self.xt_cols - 8,
            unused: [0; 2],
        };
        let uniform = gpu.upload(
            bytemuck::bytes_of(&params),
            wgpu::BufferUsages::UNIFORM,
            "chunk parameters",
        )?;
        let group = |layout: &wgpu::BindGroupLayout, entries: &[(u32, &wgpu::Buffer)], what| {
            let entries: Vec<wgpu::BindGroupEntry> = entries
                .iter()
                .map(|&(binding, buffer)| wgpu::BindGroupEntry {
                    binding,
                    resource: buffer.as_entire_binding(),
                })
                .collect();
            gpu.scoped(what, 0, || {
                gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some(what),
                    layout,
                    entries: &entries,
                })
            })
        };
        let binding = ChunkBinding {
            read: group(
                &pipelines.batch_read,
                &[(0, &uniform), (1, &xt), (2, &xt), (3, &xt)],
                "chunk (read)",
            )?,
            write: group(
                &pipelines.batch_write,
                &[(0, &uniform), (1, &xt)],
                "chunk (write)",
            )?,
        };
        lock(&self.chunks).insert(key, binding.clone());
        Ok(binding)
    }
}

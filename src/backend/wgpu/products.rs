//! Matrices and vectors on the device, and the recording of products.
//!
//! A matrix is a list of row blocks, each with its own buffers, uniform parameters and bind
//! group, made at upload. A matrix whose arrays all fit one binding is one block; a larger one
//! is split into consecutive row ranges whose arrays each fit `matrix_limit` (the adapter's
//! binding and buffer limits, or the artificial cap of `DeviceOptions::max_binding_bytes`). All
//! blocks write into one y at their own row offset; y words shared by two f16 rows of different
//! blocks are written with atomics (see common.wgsl), so blocks may start at any row.
//!
//! A vector is one buffer (a vector too long for one binding is `Error::TooLarge`) with its bind
//! groups as x (if f16) and as y, made at allocation, so a product creates no bind group. An f16
//! vector also has an f32 copy ("wide"), written by its upload and by every product storing
//! into it, from which the sparse kernels gather x (a single 4-byte load per entry).

use std::ops::Range;

use bytemuck::{Pod, Zeroable};
use half::f16;
use macko_format::{CsrMatrix, DenseMatrix, MackoMatrix, GROUP};

use crate::backend::{BackendKind, HostVector, MatrixKind, MatrixRef, Precision};
use crate::error::{Error, Result};

use super::gpu::{backend_error, buffer_size, lock, round_up};
use macko_format::aligned::{align_rows, aligned_row_ptr};

use super::pipelines::{Kernel, KernelPath, PipelineKey, XForm, DENSE_ROWS_PER_WORKGROUP};
use super::tiles::{
    aligned_tile_row_ptr, aligned_tiles, plan_tiles, tile_table, TilePlan, TILE_COLS_GRANULE,
};
use super::WgpuBackend;

/// Products recorded into one command encoder before it is submitted without waiting (a later
/// `synchronize` or download submits the rest and waits once).
const MAX_PENDING_PRODUCTS: usize = 256;

/// Words of the counter buffer per row block (the MACKO subgroup kernel's row counter and its
/// count of finished workgroups; see macko_sg.wgsl).
const COUNTER_WORDS_PER_BLOCK: u64 = 2;

/// Bytes of workgroup memory the MACKO subgroup kernel declares besides the staged x (`x_nonfinite`
/// and `x_finite_copy` in macko.wgsl: 8), with room to spare for small additions.
pub(super) const MACKO_OTHER_WORKGROUP_BYTES: u32 = 64;

/// Stored entries per row over columns (explicit zeros included) from which the MACKO subgroup
/// kernel stages x padded (`XForm::F16Padded`): the lanes of a nearly dense row gather columns
/// about 8 apart, which the plain f16 layout puts 4 to a bank; below it the columns are spread at
/// random and the padding would only cost its instructions. The CUDA kernel's rule
/// (`PAD_MIN_FILL` in src/backend/cuda/launch.rs).
pub(super) const X_PAD_MIN_FILL: f64 = 0.85;

/// What every matrix kernel reads from its uniform (MatrixParams in common.wgsl).
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct MatrixParams {
    rows: u32,
    cols: u32,
    row_offset: u32,
    slot: u32,
    stride: u32,
    /// MACKO with x in column tiles only (0 otherwise): tiles, columns per tile, and the word of
    /// the counter buffer where the block's partial row sums start.
    tiles: u32,
    tile_cols: u32,
    partials: u32,
    /// A row-aligned MACKO block only (0 otherwise): its group of zeros after the last row
    /// (`RowAligned::zero_group`). Then 3 unused words: `masks` starts at a multiple of 16
    /// bytes, as in WGSL's uniform layout.
    zero_group: u32,
    unused: [u32; 3],
    /// The MACKO subgroup kernel's value masks by kept range (`MASK_TABLE`): `mask_table`.
    masks: [[u32; 4]; 96],
}

/// Entry 9 lo + hi keeps the binary16 values of a group's entries lo <= j < hi (lo, hi in
/// 0..=8; entry 2k in the low half of word k, 2k + 1 in the high half); the rest zero.
fn mask_table() -> [[u32; 4]; 96] {
    let mut t = [[0u32; 4]; 96];
    for lo in 0..=8usize {
        for hi in 0..=8usize {
            for (k, word) in t[9 * lo + hi].iter_mut().enumerate() {
                let kept = |j: usize| lo <= j && j < hi;
                *word = if kept(2 * k) { 0xffff } else { 0 }
                    | if kept(2 * k + 1) { 0xffff_0000 } else { 0 };
            }
        }
    }
    t
}

impl MatrixParams {
    /// A block of `rows` rows of a matrix of `cols` columns starting at row `row_offset`, with
    /// every other field 0.
    fn block(rows: u32, cols: u32, row_offset: u32) -> Self {
        Self {
            rows,
            cols,
            row_offset,
            slot: 0,
            stride: 0,
            tiles: 0,
            tile_cols: 0,
            partials: 0,
            zero_group: 0,
            unused: [0; 3],
            masks: mask_table(),
        }
    }
}

/// One row block of a matrix.
pub(super) struct Block {
    /// Rows of the block.
    pub rows: u32,
    /// Group 0 of the kernel: parameters and arrays.
    pub bind_group: wgpu::BindGroup,
}

/// A matrix on the device.
pub(crate) struct GpuMatrix {
    pub(super) format: MatrixKind,
    /// MACKO: stored entries (explicit zeros included) over rows × columns; 0 for the other
    /// formats. Decides the staged x's padding (`X_PAD_MIN_FILL`).
    pub(super) fill: f64,
    /// MACKO whose x is staged in column tiles (too wide for workgroup memory): how it is cut.
    /// The blocks' row pointers are then the tile tables (tiles.rs).
    pub(super) tiles: Option<TilePlan>,
    /// MACKO uploaded row-aligned (`RowAligned`, or with tiles `AlignedTiles`): the subgroup
    /// kernel's pipelined loop may then skip its masks (`ALIGNED_ROWS`).
    pub(super) aligned_rows: bool,
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) blocks: Vec<Block>,
    /// Sparse formats: per block, the MACKO subgroup kernel's row counter and its count of
    /// finished workgroups. Zero-filled at creation and set back to zero by the last workgroup
    /// of every product, so no product clears them (a clear is a transfer between compute
    /// dispatches: two more barriers and command buffers per product). With column tiles, one
    /// word per row after them: each row's partial sum over the tiles done (written before it
    /// is read in every product). Bound in the blocks' bind groups, which keep the buffer
    /// alive; held here too so that is not implicit.
    pub(super) _counters: Option<wgpu::Buffer>,
}

/// A vector on the device.
pub(crate) struct GpuVector {
    pub(super) buffer: wgpu::Buffer,
    /// The f32 copy of an f16 vector (kept alive here; bound in both groups).
    _wide: Option<wgpu::Buffer>,
    pub(super) len: usize,
    pub(super) precision: Precision,
    /// Bind group as x (f16 vectors only).
    pub(super) as_x: Option<wgpu::BindGroup>,
    /// Bind group as y.
    pub(super) as_y: wgpu::BindGroup,
}

/// Pending work: the encoder products are recorded into, the one compute pass they share, and
/// how many it holds.
///
/// Queued products share one pass because every pass costs wgpu two more command buffers and
/// its own tracking when the encoder is finished (about 3 µs per product of host time on a 2-core
/// VM, most of it in `finish`). Within a pass wgpu-core still tracks usage per dispatch and puts
/// a barrier before each dispatch whose buffers a previous one wrote (y, the counters), so
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

fn element_bytes(p: Precision) -> u64 {
    match p {
        Precision::F16 => 2,
        Precision::F32 => 4,
    }
}

/// `n` as u32, or a `TooLarge` naming `what`.
fn to_u32(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::TooLarge {
        backend: BackendKind::Wgpu,
        what: format!("{what} ({n})"),
        needed: n as u64,
        limit: u32::MAX as u64,
    })
}

/// Splits the rows of a sparse matrix (row pointers `row_ptr`) into consecutive blocks whose
/// arrays each fit `limit` bytes. A block's entries start at a multiple of `align` (the width
/// of one aligned load: 8 entries for MACKO, 2 for CSR's packed f16) and end at one, every
/// entry costs at most `entry_bytes` in its largest array, and every row `row_bytes` in the
/// row pointers' array (4, or a tile table's pairs). Greedy: each block takes as many rows as
/// fit.
pub(super) fn plan_sparse_blocks(
    row_ptr: &[u32],
    align: u64,
    entry_bytes: u64,
    row_bytes: u64,
    limit: u64,
    format: &str,
) -> Result<Vec<Range<usize>>> {
    let rows = row_ptr.len().saturating_sub(1);
    let bytes = |r0: usize, r1: usize| -> u64 {
        let base = row_ptr[r0] as u64 / align * align;
        let end = round_up(row_ptr[r1] as u64, align);
        (row_bytes * (r1 - r0 + 1) as u64).max((end - base) * entry_bytes)
    };
    let mut blocks = Vec::new();
    let mut r0 = 0;
    while r0 < rows {
        let mut r1 = r0;
        while r1 < rows && bytes(r0, r1 + 1) <= limit {
            r1 += 1;
        }
        if r1 == r0 {
            return Err(Error::TooLarge {
                backend: BackendKind::Wgpu,
                what: format!("row {r0} of a {format} matrix, alone in one binding"),
                needed: bytes(r0, r0 + 1),
                limit,
            });
        }
        blocks.push(r0..r1);
        r0 = r1;
    }
    Ok(blocks)
}

/// Rows per block of a dense matrix whose stored rows take `row_bytes` each.
pub(super) fn plan_dense_blocks(rows: usize, row_bytes: u64, limit: u64) -> Result<usize> {
    if row_bytes == 0 {
        return Ok(rows.max(1));
    }
    match limit / row_bytes {
        0 => Err(Error::TooLarge {
            backend: BackendKind::Wgpu,
            what: "one row of a dense matrix, alone in one binding".into(),
            needed: row_bytes,
            limit,
        }),
        n => Ok(n as usize),
    }
}

impl WgpuBackend {
    fn uniform(&self, params: MatrixParams) -> Result<wgpu::Buffer> {
        self.gpu.upload(
            bytemuck::bytes_of(&params),
            wgpu::BufferUsages::UNIFORM,
            "matrix parameters",
        )
    }

    fn storage(&self, data: &[u8], what: &str) -> Result<wgpu::Buffer> {
        self.gpu.upload(data, wgpu::BufferUsages::STORAGE, what)
    }

    fn bind_group(
        &self,
        layout: &wgpu::BindGroupLayout,
        entries: &[(u32, &wgpu::Buffer)],
        what: &str,
    ) -> Result<wgpu::BindGroup> {
        let entries: Vec<wgpu::BindGroupEntry> = entries
            .iter()
            .map(|&(binding, buffer)| wgpu::BindGroupEntry {
                binding,
                resource: buffer.as_entire_binding(),
            })
            .collect();
        self.gpu.scoped(what, 0, || {
            self.gpu
                .device
                .create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some(what),
                    layout,
                    entries: &entries,
                })
        })
    }

    /// The counters of `blocks` row blocks and `partials` more words (see
    /// `GpuMatrix::_counters`), zero-filled by wgpu. `COPY_SRC` only so the tests can read them
    /// back.
    fn counters(&self, blocks: usize, partials: usize) -> Result<wgpu::Buffer> {
        self.gpu.create_buffer(
            buffer_size(4 * (COUNTER_WORDS_PER_BLOCK * blocks as u64 + partials as u64)),
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            "row counters",
        )
    }

    /// One block of a sparse matrix: parameters, rebased row pointers and the two entry arrays.
    /// `params` as `MatrixParams::block` makes them, with the slot (and tiles) set.
    #[allow(clippy::too_many_arguments)]
    fn sparse_block(
        &self,
        params: MatrixParams,
        row_ptr: &[u32],
        values: &[u8],
        indices: &[u8],
        counters: &wgpu::Buffer,
        format: &str,
    ) -> Result<Block> {
        let n = params.rows;
        let params = self.uniform(params)?;
        let row_ptr = self.storage(bytemuck::cast_slice(row_ptr), &format!("{format} row_ptr"))?;
        let values = self.storage(values, &format!("{format} values"))?;
        let indices = self.storage(indices, &format!("{format} codes or columns"))?;
        let bind_group = self.bind_group(
            &self.pipelines.sparse,
            &[
                (0, &params),
                (1, &row_ptr),
                (2, &values),
                (3, &indices),
                (4, counters),
            ],
            &format!("{format} block"),
        )?;
        Ok(Block {
            rows: n,
            bind_group,
        })
    }

    pub(super) fn upload_matrix_impl(&self, m: MatrixRef<'_>) -> Result<GpuMatrix> {
        self.gpu.check()?;
        let (rows, cols) = m.shape();
        to_u32(rows, "rows")?;
        to_u32(cols, "columns")?;
        match m {
            MatrixRef::Macko(m) => self.upload_macko(m),
            MatrixRef::Csr(m) => self.upload_csr(m),
            MatrixRef::Dense(m) => self.upload_dense(m),
        }
    }

    fn upload_macko(&self, m: &MackoMatrix) -> Result<GpuMatrix> {
        let row_ptr = m.row_ptr();
        let stored = row_ptr.last().copied().unwrap_or(0) as f64;
        let fill = stored / (m.rows() as f64 * m.cols() as f64).max(1.0);
        let tiles = self.x_tiles(m.cols(), fill >= X_PAD_MIN_FILL);
        // A tile table takes 8 bytes per row and plane (tiles + 1 planes).
        let row_bytes = tiles.map_or(4, |t| 8 * (u64::from(t.tiles) + 1));
        // Row-aligned (macko_format::aligned; with tiles, each row's part in each tile:
        // tiles.rs) where the subgroup kernel's pipelined loop reads it (the pipeline key's
        // conditions for ALIGNED_ROWS), so its steps mask nothing; blocks are then planned on the
        // aligned rows, each with room for its group of zeros. A row that fits a binding only
        // unpadded keeps the format's layout.
        let t = &self.tuning;
        let aligned = self.path == KernelPath::Subgroup
            && t.aligned_rows
            && t.lane_builtins
            && t.late_decode
            && t.depth <= 1
            && t.pipeline;
        // With tiles: the whole matrix's tile table (entries from 0), cut into blocks below.
        let full_table = match tiles {
            Some(plan) if aligned => Some(tile_table(m, 0..m.rows(), 0, plan)),
            _ => None,
        };
        let aligned_ptr = match (tiles, &full_table) {
            (Some(plan), Some(full)) => aligned_tile_row_ptr(full, m.rows(), plan),
            // All rows, so the one possible error is offsets past 32 bits: the format's layout.
            (None, _) if aligned => aligned_row_ptr(m, 0..m.rows()).ok(),
            _ => None,
        };
        let aligned_plan = aligned_ptr.and_then(|p| {
            let limit = self.matrix_limit.saturating_sub(2 * GROUP as u64);
            plan_sparse_blocks(&p, GROUP as u64, 2, row_bytes, limit, "MACKO").ok()
        });
        let aligned_rows = aligned_plan.is_some();
        let plan = match aligned_plan {
            Some(plan) => plan,
            None => plan_sparse_blocks(
                row_ptr,
                GROUP as u64,
                2,
                row_bytes,
                self.matrix_limit,
                "MACKO",
            )?,
        };
        let partials = if tiles.is_some() { m.rows() } else { 0 };
        // The counter buffer is bound whole in every block: with tiles it holds a word per row.
        let counter_bytes = 4 * (COUNTER_WORDS_PER_BLOCK * plan.len() as u64 + partials as u64);
        if counter_bytes > self.matrix_limit {
            return Err(Error::TooLarge {
                backend: BackendKind::Wgpu,
                what: format!(
                    "the partial row sums of a {}×{} MACKO matrix with x in column tiles",
                    m.rows(),
                    m.cols()
                ),
                needed: counter_bytes,
                limit: self.matrix_limit,
            });
        }
        let counters = self.counters(plan.len(), partials)?;
        let partials_start = COUNTER_WORDS_PER_BLOCK as usize * plan.len();
        let values: &[u8] = bytemuck::cast_slice(m.values());
        let mut blocks = Vec::with_capacity(plan.len());
        for (slot, rows) in plan.into_iter().enumerate() {
            let mut params = MatrixParams::block(
                to_u32(rows.len(), "rows of a block")?,
                m.cols() as u32,
                to_u32(rows.start, "first row of a block")?,
            );
            params.slot = to_u32(slot, "block index")?;
            if let Some(t) = tiles {
                params.tiles = t.tiles;
                params.tile_cols = t.cols;
                params.partials = to_u32(partials_start + rows.start, "partial sums")?;
            }
            // A block's offsets are at most the whole matrix's, which fit.
            let past = || backend_error("internal: a row-aligned block past 32-bit offsets");
            match (aligned_rows, tiles, &full_table) {
                (true, Some(plan), Some(full)) => {
                    let a = aligned_tiles(m, rows.clone(), full, plan).ok_or_else(past)?;
                    params.zero_group = a.zero_group;
                    let values = bytemuck::cast_slice(&a.values);
                    blocks.push(
                        self.sparse_block(params, &a.table, values, &a.codes, &counters, "MACKO")?,
                    );
                    continue;
                }
                (true, None, _) => {
                    let a = align_rows(m, rows.clone()).map_err(|_| past())?;
                    params.zero_group = a.zero_group();
                    let values = bytemuck::cast_slice(&a.values);
                    blocks.push(
                        self.sparse_block(
                            params, &a.row_ptr, values, &a.codes, &counters, "MACKO",
                        )?,
                    );
                    continue;
                }
                _ => {}
            }
            // Entries of the block, widened to whole groups of 8 (16-byte value words).
            let base = row_ptr[rows.start] as usize / GROUP * GROUP;
            let end = (row_ptr[rows.end] as usize).div_ceil(GROUP) * GROUP;
            let table = match tiles {
                Some(t) => tile_table(m, rows.clone(), base, t),
                None => row_ptr[rows.start..=rows.end]
                    .iter()
                    .map(|&p| p - base as u32)
                    .collect(),
            };
            blocks.push(self.sparse_block(
                params,
                &table,
                &values[2 * base..2 * end],
                &m.codes()[base / 2..end / 2],
                &counters,
                "MACKO",
            )?);
        }
        Ok(GpuMatrix {
            aligned_rows,
            format: MatrixKind::Macko,
            fill,
            tiles,
            rows: m.rows(),
            cols: m.cols(),
            blocks,
            _counters: Some(counters),
        })
    }

    fn upload_csr(&self, m: &CsrMatrix) -> Result<GpuMatrix> {
        let row_ptr = m.row_ptr();
        let plan = plan_sparse_blocks(row_ptr, 2, 4, 4, self.matrix_limit, "CSR")?;
        let counters = self.counters(plan.len(), 0)?;
        let values: &[u8] = bytemuck::cast_slice(m.values());
        let cols: &[u8] = bytemuck::cast_slice(m.col_idx());
        let mut blocks = Vec::with_capacity(plan.len());
        for (slot, rows) in plan.into_iter().enumerate() {
            // Entries of the block from an even one, so f16 pairs keep their u32 words.
            let base = row_ptr[rows.start] as usize & !1;
            let end = row_ptr[rows.end] as usize;
            let rebased: Vec<u32> = row_ptr[rows.start..=rows.end]
                .iter()
                .map(|&p| p - base as u32)
                .collect();
            let mut params = MatrixParams::block(
                to_u32(rows.len(), "rows of a block")?,
                m.cols() as u32,
                to_u32(rows.start, "first row of a block")?,
            );
            params.slot = to_u32(slot, "block index")?;
            blocks.push(self.sparse_block(
                params,
                &rebased,
                &values[2 * base..2 * end],
                &cols[4 * base..4 * end],
                &counters,
                "CSR",
            )?);
        }
        Ok(GpuMatrix {
            aligned_rows: false,
            fill: 0.0,
            tiles: None,
            format: MatrixKind::Csr,
            rows: m.rows(),
            cols: m.cols(),
            blocks,
            _counters: Some(counters),
        })
    }

    fn upload_dense(&self, m: &DenseMatrix) -> Result<GpuMatrix> {
        let (rows, cols) = (m.rows(), m.cols());
        // Rows are stored padded with zeros to whole 16-byte words so every load is aligned.
        let stride = cols.div_ceil(8);
        let per_block = plan_dense_blocks(rows, 16 * stride as u64, self.matrix_limit)?;
        let mut blocks = Vec::new();
        let mut r0 = 0;
        while r0 < rows {
            let r1 = (r0 + per_block).min(rows);
            let padded: Vec<f16>;
            let data: &[f16] = if cols % 8 == 0 {
                &m.values()[r0 * cols..r1 * cols]
            } else {
                let mut v = vec![f16::ZERO; (r1 - r0) * stride * 8];
                for (r, out) in (r0..r1).zip(v.chunks_exact_mut(stride * 8)) {
                    out[..cols].copy_from_slice(m.row(r));
                }
                padded = v;
                &padded
            };
            let mut params =
                MatrixParams::block(to_u32(r1 - r0, "rows of a block")?, cols as u32, r0 as u32);
            params.stride = to_u32(stride, "16-byte words per row")?;
            let params = self.uniform(params)?;
            let values = self.storage(bytemuck::cast_slice(data), "dense values")?;
            let bind_group = self.bind_group(
                &self.pipelines.dense,
                &[(0, &params), (2, &values)],
                "dense block",
            )?;
            blocks.push(Block {
                rows: (r1 - r0) as u32,
                bind_group,
            });
            r0 = r1;
        }
        Ok(GpuMatrix {
            aligned_rows: false,
            fill: 0.0,
            tiles: None,
            format: MatrixKind::Dense,
            rows,
            cols,
            blocks,
            _counters: None,
        })
    }

    /// Refuses a vector whose buffers would not fit one binding of the adapter; returns the
    /// size of its main buffer.
    fn check_vector(&self, len: usize, precision: Precision) -> Result<u64> {
        let size = buffer_size(len as u64 * element_bytes(precision));
        // f16 vectors also have their f32 copy.
        let largest = buffer_size(len as u64 * 4);
        if largest > self.vector_limit {
            return Err(Error::TooLarge {
                backend: BackendKind::Wgpu,
                what: format!(
                    "a vector of {len} {} elements (vectors are bound whole, with an f32 copy)",
                    match precision {
                        Precision::F16 => "f16",
                        Precision::F32 => "f32",
                    }
                ),
                needed: largest,
                limit: self.vector_limit,
            });
        }
        Ok(size)
    }

    /// Bind groups of a vector: as x (f16 only: its words and its f32 copy) and as y (f32 y
    /// binds a placeholder where the f32 copy would be; the f32-output kernels never write it).
    fn vector(
        &self,
        buffer: wgpu::Buffer,
        wide: Option<wgpu::Buffer>,
        len: usize,
        precision: Precision,
    ) -> Result<GpuVector> {
        let as_x = match &wide {
            Some(w) => Some(self.bind_group(&self.pipelines.x, &[(0, &buffer), (1, w)], "x")?),
            None => None,
        };
        let second = wide.as_ref().unwrap_or(&self.no_wide_copy);
        let as_y = self.bind_group(&self.pipelines.y, &[(0, &buffer), (1, second)], "y")?;
        Ok(GpuVector {
            buffer,
            _wide: wide,
            len,
            precision,
            as_x,
            as_y,
        })
    }

    const VECTOR_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
        .union(wgpu::BufferUsages::COPY_SRC)
        .union(wgpu::BufferUsages::COPY_DST);

    pub(super) fn upload_vector_impl(&self, x: &[f16]) -> Result<GpuVector> {
        self.check_vector(x.len(), Precision::F16)?;
        let buffer = self
            .gpu
            .upload(bytemuck::cast_slice(x), Self::VECTOR_USAGE, "vector")?;
        let widened: Vec<f32> = x.iter().map(|v| v.to_f32()).collect();
        let wide = self.gpu.upload(
            bytemuck::cast_slice(&widened),
            Self::VECTOR_USAGE,
            "vector (f32 copy)",
        )?;
        self.vector(buffer, Some(wide), x.len(), Precision::F16)
    }

    pub(super) fn alloc_vector_impl(&self, len: usize, precision: Precision) -> Result<GpuVector> {
        let size = self.check_vector(len, precision)?;
        let buffer = self.gpu.create_buffer(size, Self::VECTOR_USAGE, "vector")?;
        let wide = match precision {
            Precision::F16 => Some(self.gpu.create_buffer(
                buffer_size(len as u64 * 4),
                Self::VECTOR_USAGE,
                "vector (f32 copy)",
            )?),
            Precision::F32 => None,
        };
        self.vector(buffer, wide, len, precision)
    }

    pub(super) fn download_impl(&self, v: &GpuVector) -> Result<HostVector> {
        self.synchronize_impl()?;
        let bytes = self.gpu.read(
            &v.buffer,
            v.len as u64 * element_bytes(v.precision),
            "download",
        )?;
        Ok(match v.precision {
            Precision::F16 => HostVector::F16(
                bytes
                    .chunks_exact(2)
                    .map(|b| f16::from_le_bytes([b[0], b[1]]))
                    .collect(),
            ),
            Precision::F32 => HostVector::F32(
                bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
            ),
        })
    }

    /// How the MACKO subgroup kernel holds x for `cols` columns: the words of workgroup memory
    /// it stages x in (0 where x does not fit, or staging is turned off: x is then gathered
    /// from memory), and in which form: f32 where asked for and it fits, else f16 scalars where
    /// asked for and the adapter has `SHADER_F16` (padded for `nearly_dense` rows, where the
    /// tuning allows and it fits), else f16 pairs.
    fn x_staging(&self, kernel: Kernel, cols: usize, nearly_dense: bool) -> (u32, XForm) {
        if kernel != Kernel::MackoSubgroup || !self.x_in_workgroup {
            return (0, XForm::Pairs);
        }
        // The kernel's other workgroup variables (the finite-x flag and its copy) take some of
        // the limit too: a pipeline over it is not rejected by every driver (on an H200, f32 x
        // of 12288 columns, exactly 48 KiB, plus the 8 bytes of flags hung the product).
        let budget = (self
            .gpu
            .limits
            .max_compute_workgroup_storage_size
            .saturating_sub(MACKO_OTHER_WORKGROUP_BYTES)
            / 4) as u64;
        // The granule is a multiple of 8: the f32 and f16 stagings write 8 columns per word of x.
        let granule = self.tuning.x_words_granule as u64;
        let words = |form: XForm| round_up(form.words(cols as u64), granule);
        let half = if self.tuning.x_f16 && self.gpu.features.contains(wgpu::Features::SHADER_F16) {
            XForm::F16
        } else {
            XForm::Pairs
        };
        let padded = half == XForm::F16 && self.tuning.x_pad.unwrap_or(nearly_dense);
        if self.tuning.x_f32 && words(XForm::F32) <= budget {
            (words(XForm::F32) as u32, XForm::F32)
        } else if padded && words(XForm::F16Padded) <= budget {
            (words(XForm::F16Padded) as u32, XForm::F16Padded)
        } else if words(half) <= budget {
            (words(half) as u32, half)
        } else {
            (0, XForm::Pairs)
        }
    }

    /// How the MACKO subgroup kernel cuts x of `cols` columns into column tiles: where x does
    /// not fit workgroup memory whole (`x_staging` stages nothing) but tiles of at least one
    /// granule do, with rows by stride (each subgroup must meet the same rows in every tile, for
    /// their partial sums) and tiles not turned off (`MackoTuning::x_tiles`); `None` otherwise,
    /// x then staged whole or gathered from memory. `MackoTuning::x_tile_cols` caps a tile's
    /// columns (tests tile narrow matrices with it).
    fn x_tiles(&self, cols: usize, nearly_dense: bool) -> Option<TilePlan> {
        let kernel = Kernel::MackoSubgroup;
        if self.path != KernelPath::Subgroup || !self.tuning.static_rows || !self.tuning.x_tiles {
            return None;
        }
        let fits = |c: usize| self.x_staging(kernel, c, nearly_dense).0 > 0;
        let cap = self.tuning.x_tile_cols.unwrap_or(usize::MAX);
        if fits(cols) && cols <= cap {
            return None;
        }
        // The widest tile (a multiple of the granule) that fits: staging fits every width below
        // one that fits, so a binary search over granules.
        let (mut lo, mut hi) = (0usize, cols.min(cap) / TILE_COLS_GRANULE);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if fits(mid * TILE_COLS_GRANULE) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        plan_tiles(cols, lo * TILE_COLS_GRANULE)
    }

    /// Workgroups to dispatch for a block of `rows` rows, as (x, y).
    /// `workgroup` is the MACKO subgroup kernel's workgroup size for this matrix, `x_words` the
    /// words it stages x (or a tile of it) in.
    fn grid(&self, kernel: Kernel, rows: u32, x_words: u32, workgroup: u32) -> (u32, u32) {
        let max = self.gpu.limits.max_compute_workgroups_per_dimension.max(1);
        let grid_2d = |n: u32| {
            let x = n.clamp(1, max);
            (x, n.div_ceil(x).max(1))
        };
        match kernel {
            // With x staged in workgroup memory, each workgroup pays for copying x, so a
            // bounded number of them (about what a large GPU keeps resident: no second wave
            // staging x again) work through the rows.
            Kernel::MackoSubgroup if x_words > 0 => (
                rows.div_ceil(self.tuning.rows_per_staged_workgroup).clamp(
                    1,
                    self.tuning
                        .staged_workgroup_cap(
                            workgroup,
                            x_words.saturating_mul(4) + MACKO_OTHER_WORKGROUP_BYTES,
                        )
                        .clamp(1, max),
                ),
                1,
            ),
            // Staging nothing: enough subgroups for every row to start at once if the GPU can
            // hold them (the rows' stride or the counter deals them) (assuming the smallest subgroups, so the most of
            // them), capped by the dispatch limit; subgroups loop over rows beyond that.
            Kernel::MackoSubgroup | Kernel::CsrSubgroup => {
                let size = if kernel == Kernel::MackoSubgroup {
                    workgroup
                } else {
                    kernel.workgroup_size()
                };
                let per_workgroup = (size / self.gpu.adapter.subgroup_min_size.max(1)).max(1);
                (rows.div_ceil(per_workgroup).clamp(1, max), 1)
            }
            Kernel::MackoWorkgroup | Kernel::CsrWorkgroup => grid_2d(rows),
            Kernel::DenseSubgroup | Kernel::DenseWorkgroup => {
                grid_2d(rows.div_ceil(DENSE_ROWS_PER_WORKGROUP))
            }
            Kernel::Stream => grid_2d(rows),
        }
    }

    /// Records y = A·x into `pass`: one dispatch per row block. Nothing is cleared between
    /// products (the kernels that count rows reset their counters themselves), so products can
    /// follow each other in one pass.
    pub(super) fn record_product(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        a: &GpuMatrix,
        x: &GpuVector,
        y: &GpuVector,
    ) -> Result<()> {
        let kernel = Kernel::for_product(a.format, self.path);
        // With tiles, a tile's columns are what is staged (x_tiles made sure they fit).
        let staged_cols = a.tiles.map_or(a.cols, |t| t.cols as usize);
        let (x_words, x_form) = self.x_staging(kernel, staged_cols, a.fill >= X_PAD_MIN_FILL);
        let workgroup = self.tuning.workgroup_for(a.rows, a.cols, x_words > 0);
        let x_tiled = a.tiles.is_some() && x_words > 0;
        // A tiled matrix's blocks bind tile tables where row pointers would be: only the tiled
        // kernel, with rows by stride, may read them (x_tiles made sure of both at upload, with
        // the same tuning).
        if a.tiles.is_some() && (!x_tiled || !self.tuning.static_rows) {
            return Err(backend_error(
                "internal: a matrix uploaded with x in column tiles needs x staged and rows by stride",
            ));
        }
        let pipeline = self.pipelines.get(
            &self.gpu,
            PipelineKey {
                kernel,
                y_f16: y.precision == Precision::F16,
                x_words,
                x_form,
                workgroup,
                depth: self.tuning.depth,
                x_swizzle: self.tuning.x_swizzle,
                fast_finite: self.tuning.fast_finite,
                loop_bounds: self.tuning.loop_bounds,
                late_decode: self.tuning.late_decode,
                row_ahead: self.tuning.row_ahead,
                lane_builtins: self.tuning.lane_builtins,
                static_rows: self.tuning.static_rows,
                interleaved_rows: self.tuning.interleaved_rows,
                shuffle_scan: self.tuning.shuffle_scan,
                pipeline: self.tuning.pipeline,
                late_mask: self.tuning.late_mask,
                x_tiled,
                held_sums: self.tuning.held_sums,
                butterfly_sum: self.tuning.butterfly_sum,
                bounded_gathers: self.tuning.bounded_gathers,
                gather_probe: self.tuning.gather_probe,
                // Not for nearly dense rows, whose steps are seldom masked: there the table
                // gained ≤ 1 % and once lost 4 % (shaders/NOTES.md, "Session 8").
                mask_table: self.tuning.mask_table && a.fill < X_PAD_MIN_FILL,
                aligned_rows: a.aligned_rows,
                half_rows: a.aligned_rows && self.tuning.half_rows_for(a.fill),
            },
        )?;
        let x_group = x
            .as_x
            .as_ref()
            .ok_or_else(|| backend_error("internal: x is not an f16 vector"))?;
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(1, x_group, &[]);
        pass.set_bind_group(2, &y.as_y, &[]);
        for block in &a.blocks {
            let (gx, gy) = self.grid(kernel, block.rows, x_words, workgroup);
            pass.set_bind_group(0, &block.bind_group, &[]);
            pass.dispatch_workgroups(gx, gy, 1);
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

#[cfg(test)]
mod tests {
    #[test]
    fn the_mask_table_keeps_exactly_the_kept_range() {
        let t = super::mask_table();
        assert_eq!(t[8], [u32::MAX; 4]);
        // Entries 3 and 4: the high half of word 1, the low half of word 2.
        assert_eq!(t[9 * 3 + 5], [0, 0xffff_0000, 0xffff, 0]);
        // (lo, hi) = (1, 8) and (0, 7).
        assert_eq!(t[9 + 8], [0xffff_0000, u32::MAX, u32::MAX, u32::MAX]);
        assert_eq!(t[7], [u32::MAX, u32::MAX, u32::MAX, 0xffff]);
        // Empty ranges, and the unused tail of the table.
        assert_eq!(t[9 * 5 + 2], [0; 4]);
        assert_eq!(t[9 * 8 + 8], [0; 4]);
        assert!(t[81..].iter().all(|w| *w == [0; 4]));
    }

    use super::*;

    #[test]
    fn sparse_plan_keeps_whole_rows_within_the_limit() {
        // 6 rows of 10 entries: a block of r rows spans at most 10r + 7 entries in whole groups.
        let row_ptr: Vec<u32> = (0..=6).map(|r| 10 * r).collect();
        let plan = plan_sparse_blocks(&row_ptr, 8, 2, 4, 64, "MACKO").unwrap();
        assert!(plan.len() >= 2);
        assert_eq!(plan.first().unwrap().start, 0);
        assert_eq!(plan.last().unwrap().end, 6);
        for w in plan.windows(2) {
            assert_eq!(w[0].end, w[1].start);
        }
        for r in &plan {
            let base = row_ptr[r.start] / 8 * 8;
            let end = row_ptr[r.end].div_ceil(8) * 8;
            assert!(2 * (end - base) <= 64, "{r:?}");
        }
    }

    #[test]
    fn a_row_too_long_for_the_limit_is_too_large() {
        let row_ptr = [0u32, 8, 200];
        assert!(matches!(
            plan_sparse_blocks(&row_ptr, 8, 2, 4, 64, "MACKO"),
            Err(Error::TooLarge { .. })
        ));
    }

    #[test]
    fn empty_matrices_have_no_blocks() {
        assert!(plan_sparse_blocks(&[0], 8, 2, 4, 64, "MACKO")
            .unwrap()
            .is_empty());
        assert_eq!(plan_dense_blocks(0, 0, 64).unwrap(), 1);
        assert_eq!(plan_dense_blocks(10, 32, 64).unwrap(), 2);
        assert!(plan_dense_blocks(10, 128, 64).is_err());
    }

    /// Nearly dense matrices get the padded f16 x and sparser ones the plain one: the fill
    /// (stored entries, explicit zeros included, over rows × columns) is on the right side of
    /// `X_PAD_MIN_FILL` for d = 1 and d = 0.5, and `x_staging` follows it where the adapter
    /// stages f16 scalars.
    #[test]
    fn fill_decides_the_padded_x() {
        use crate::backend::BackendKind;
        use crate::device::DeviceOptions;
        let b = match WgpuBackend::open(&DeviceOptions::for_backend(BackendKind::Wgpu)) {
            Ok(b) => b,
            Err(e) => {
                println!("skipping: {e}");
                return;
            }
        };
        let fill = |d: f64| {
            let dense = crate::synthetic::pruned_matrix(64, 512, d, 5).unwrap();
            let m = MackoMatrix::from_dense(&dense).unwrap();
            b.upload_matrix_impl(MatrixRef::Macko(&m)).unwrap().fill
        };
        let (full, half) = (fill(1.0), fill(0.5));
        assert!(full >= X_PAD_MIN_FILL, "fill {full} at d = 1");
        assert!(
            half < X_PAD_MIN_FILL && half > 0.4,
            "fill {half} at d = 0.5"
        );
        let (_, dense_form) = b.x_staging(Kernel::MackoSubgroup, 512, full >= X_PAD_MIN_FILL);
        let (_, sparse_form) = b.x_staging(Kernel::MackoSubgroup, 512, half >= X_PAD_MIN_FILL);
        if b.tuning.x_f16 && b.gpu.features.contains(wgpu::Features::SHADER_F16) {
            assert_eq!(dense_form, XForm::F16Padded);
            assert_eq!(sparse_form, XForm::F16);
        } else {
            println!("skipping the forms: x is not staged as f16 scalars here");
        }
    }

    /// The backend on lavapipe or any adapter with bindings capped at `bytes` (matrices split
    /// into row blocks), or `None` (printed) where wgpu has none.
    fn capped_backend(bytes: u64) -> Option<WgpuBackend> {
        use crate::backend::BackendKind;
        use crate::device::DeviceOptions;
        let opts = DeviceOptions {
            max_binding_bytes: Some(bytes),
            ..DeviceOptions::for_backend(BackendKind::Wgpu)
        };
        match WgpuBackend::open(&opts) {
            Ok(b) => Some(b),
            Err(e) => {
                println!("skipping: {e}");
                None
            }
        }
    }

    /// x in column tiles (`X_TILED`), forced on narrow matrices by capping a tile at 128
    /// columns: the matrices are tiled (checked, so a path that silently stopped tiling fails
    /// here), split into row blocks (each with its partial sums at its own offset), and every
    /// product agrees with the f64 reference in f16 and f32 y, repeated (the partials of one
    /// product never leak into the next), with x ±∞ or NaN over columns that hold only padding
    /// in one tile and finite in the others (each tile decides its zero select alone), and
    /// with a row whose entries all lie in the last tile.
    #[test]
    fn tiled_x_agrees_with_the_reference() {
        use macko_format::reference::{self, OutputPrecision};
        let Some(mut b) = capped_backend(8 << 10) else {
            return;
        };
        if b.path != KernelPath::Subgroup || !b.x_in_workgroup {
            println!(
                "skipping: {} (tiles are the subgroup kernel's)",
                b.path_reason
            );
            return;
        }
        b.tuning.x_tile_cols = Some(128);
        b.tuning.max_staged_workgroups = 3;
        let check = |m: &MackoMatrix, x: &[f16], what: &str| {
            let a = b.upload_matrix_impl(MatrixRef::Macko(m)).unwrap();
            let plan = a.tiles.unwrap_or_else(|| panic!("{what}: not tiled"));
            assert_eq!(plan.cols, 128, "{what}");
            assert_eq!(plan.tiles as usize, m.cols().div_ceil(128), "{what}");
            let r = reference::spmv_macko(m, x).unwrap();
            let xv = b.upload_vector_impl(x).unwrap();
            for p in [Precision::F16, Precision::F32] {
                let y = b.alloc_vector_impl(m.rows(), p).unwrap();
                for _ in 0..3 {
                    b.spmv_impl(&a, &xv, &y).unwrap();
                }
                let got = b.download_impl(&y).unwrap();
                let out: OutputPrecision = got.precision();
                if let Some(bad) = r.first_disagreement(&got.to_f64(), out) {
                    panic!("{what} ({p:?} y): row, got, want, tolerance {bad:?}");
                }
            }
            a.blocks.len()
        };
        for (i, &(rows, cols, d)) in [(37, 1001, 0.3), (90, 700, 1.0), (64, 530, 0.05)]
            .iter()
            .enumerate()
        {
            let dense = crate::synthetic::pruned_matrix(rows, cols, d, 40 + i as u64).unwrap();
            let m = MackoMatrix::from_dense(&dense).unwrap();
            let x = crate::synthetic::activations(cols, 40 + i as u64);
            let blocks = check(&m, &x, &format!("{rows}×{cols} d = {d}"));
            if d == 1.0 {
                assert!(blocks > 1, "{blocks} block");
            }
        }
        // Rows 0..4 hold entries only at columns 300.., row 4 only at column 399; x is NaN or
        // ±∞ over columns 128..256 (tile 1), where the stored entries are all padding.
        let cols = 400;
        let mut values = vec![f16::ZERO; 5 * cols];
        for r in 0..4 {
            for c in (300 + r..cols).step_by(7) {
                values[r * cols + c] = f16::from_f32(0.25 * (c % 5) as f32 - 0.5);
            }
            values[r * cols + r] = f16::ONE;
        }
        values[4 * cols + 399] = f16::from_f32(3.0);
        let m = MackoMatrix::from_dense(&DenseMatrix::new(5, cols, values).unwrap()).unwrap();
        assert!(m.values().iter().any(|v| v.to_bits() == 0));
        let mut x = crate::synthetic::activations(cols, 7);
        for (c, xc) in x.iter_mut().enumerate().take(256).skip(128) {
            *xc = [f16::NAN, f16::INFINITY, f16::NEG_INFINITY][c % 3];
        }
        check(&m, &x, "NaN/∞ over padding in tile 1");
    }

    /// The MACKO subgroup kernel's counters are back at zero after every product (nothing
    /// else clears them): after hundreds of queued products over several submissions, on a
    /// matrix split into row blocks, every word of the counter buffer reads zero.
    #[test]
    fn row_counters_are_zero_after_queued_products() {
        let Some(mut b) = capped_backend(16 << 10) else {
            return;
        };
        // The counters deal the rows only where they are not dealt by stride (the default).
        b.tuning.static_rows = false;
        let dense = crate::synthetic::pruned_matrix(300, 200, 0.5, 3).unwrap();
        let m = MackoMatrix::from_dense(&dense).unwrap();
        if b.path != super::super::pipelines::KernelPath::Subgroup {
            println!(
                "skipping: {} (the counters are the subgroup kernel's)",
                b.path_reason
            );
            return;
        }
        let a = b.upload_matrix_impl(MatrixRef::Macko(&m)).unwrap();
        assert!(a.blocks.len() > 1, "{} blocks", a.blocks.len());
        let x = b
            .upload_vector_impl(&crate::synthetic::activations(200, 3))
            .unwrap();
        let y = b.alloc_vector_impl(300, Precision::F16).unwrap();
        for _ in 0..2 * MAX_PENDING_PRODUCTS + 7 {
            b.spmv_impl(&a, &x, &y).unwrap();
        }
        b.synchronize_impl().unwrap();
        let counters = a._counters.as_ref().unwrap();
        let words = COUNTER_WORDS_PER_BLOCK as usize * a.blocks.len();
        let bytes = b.gpu.read(counters, 4 * words as u64, "counters").unwrap();
        assert!(bytes.iter().all(|&v| v == 0), "{bytes:?}");
    }
}

//! Matrices and vectors on the device: buffers, uploads and downloads.
//!
//! A matrix is its plan (plan.rs, made here at upload) and a list of row blocks, each with its
//! own buffers, uniform parameters, bind group and dispatch size. A matrix whose arrays all fit
//! one binding is one block; a larger one is split into consecutive row ranges whose arrays
//! each fit `matrix_limit` (the adapter's binding and buffer limits, or the artificial cap of
//! `WgpuConfig::max_binding_bytes`). All blocks write into one y at their own row offset; y
//! words shared by two f16 rows of different blocks are written with atomics (see
//! common.wgsl), so blocks may start at any row.
//!
//! A vector is one buffer (a vector too long for one binding is `Error::TooLarge`) with its bind
//! groups as x (if f16) and as y, made at allocation, so a product creates no bind group. An f16
//! vector also has an f32 copy ("wide"), written by its upload and by every product storing
//! into it, from which the sparse kernels gather x (a single 4-byte load per entry).

use std::ops::Range;

use bytemuck::{Pod, Zeroable};
use half::f16;
use macko_format::aligned::{align_rows, aligned_row_ptr};
use macko_format::{DenseMatrix, MackoMatrix, Sparse24Matrix, GROUP};

use crate::backend::sparse24_rows::{sparse24_rows, sparse24_words};
use crate::backend::{BackendKind, HostVector, MatrixKind, MatrixRef, Precision};
use crate::error::{Error, Result};

use super::backend::WgpuBackend;
use super::batch::BatchState;
use super::gpu::{backend_error, buffer_size, round_up};
use super::plan::{plan, MatrixStats, WgpuPlan, XStaging};
use super::tiles::{aligned_tile_row_ptr, aligned_tiles, tile_table, TilePlan};
use super::tuning::WgpuTuning;

/// What every matrix kernel reads from its uniform (MatrixParams in common.wgsl).
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub(super) struct MatrixParams {
    pub rows: u32,
    cols: u32,
    row_offset: u32,
    /// The block's index in its matrix (the transposed kernels start their sums at zero in
    /// block 0; the products do not read it).
    pub slot: u32,
    /// Dense: 16-byte words (binary16) or chunks of 8 codes (quantized) per stored row. 2:4:
    /// words of 8 groups per stored row (`sparse24_rows`). CSR, homogeneous CSR and MACKO: the
    /// rows of the whole matrix (the transposed kernels cut a dense x's rows into chunks by
    /// it).
    pub stride: u32,
    /// MACKO with x in column tiles only (0 otherwise): tiles, columns per tile, and the word of
    /// the partial sums buffer where the block's partial row sums start.
    tiles: u32,
    tile_cols: u32,
    partials: u32,
    /// A row-aligned MACKO block only (0 otherwise): its group of zeros after the last row
    /// (`RowAligned::zero_group`).
    zero_group: u32,
    /// Quantized matrices only (0 otherwise; quant_upload.rs, `ScaleSlice`): units per scale,
    /// its log2 where a power of two, and the phase of the block's first unit. With
    /// `zero_group` they start `masks` at a multiple of 16 bytes, as in WGSL's uniform layout.
    pub scale_unit: u32,
    pub scale_shift: u32,
    pub scale_phase: u32,
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
    pub(super) fn block(rows: u32, cols: u32, row_offset: u32) -> Self {
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
            scale_unit: 0,
            scale_shift: 0,
            scale_phase: 0,
            masks: mask_table(),
        }
    }
}

/// One row block of a matrix.
pub(super) struct Block {
    /// Group 0 of the kernel: parameters and arrays.
    pub bind_group: wgpu::BindGroup,
    /// Workgroups the block dispatches, (x, y): the plan's grid for its rows.
    pub dispatch: (u32, u32),
    /// The same for the few-token kernels, one per chunk width (`WgpuPlan::batch`).
    pub batch_dispatch: Vec<(u32, u32)>,
}

/// The dispatches of a block of `rows` rows for each few-token plan of `plan`.
pub(super) fn batch_dispatch(plan: &WgpuPlan, rows: u32) -> Vec<(u32, u32)> {
    plan.batch.iter().map(|b| b.grid.dispatch(rows)).collect()
}

/// A matrix on the device.
pub(crate) struct GpuMatrix {
    /// How its products run (with the layout the upload chose: `WgpuPlan::aligned_rows`).
    pub(super) plan: WgpuPlan,
    pub(super) rows: usize,
    pub(super) blocks: Vec<Block>,
    /// MACKO with x in column tiles: each row's partial sum over the tiles done (written
    /// before it is read in every product); a placeholder word otherwise, bound as binding 4 of
    /// the sparse layout. Bound in the blocks' bind groups, which keep the buffer alive; held
    /// here too so that is not implicit.
    pub(super) _partials: Option<wgpu::Buffer>,
    /// XT and the chunks' bind groups of its few-token products (batch.rs).
    pub(super) batch: BatchState,
}

/// How a MACKO matrix is laid out on the device (`WgpuBackend::macko_blocks`).
struct MackoLayout {
    /// Row-aligned (else the format's layout).
    aligned: bool,
    /// The rows of each block.
    blocks: Vec<Range<usize>>,
    /// Row-aligned with tiles: the whole matrix's tile table, cut into the blocks' tables.
    full_table: Option<Vec<u32>>,
}

/// A vector on the device.
pub(crate) struct GpuVector {
    pub(super) buffer: wgpu::Buffer,
    /// The f32 copy of an f16 vector (kept alive here; bound in both groups).
    pub(super) wide: Option<wgpu::Buffer>,
    pub(super) len: usize,
    pub(super) precision: Precision,
    /// Bind group as x (f16 vectors only).
    pub(super) as_x: Option<wgpu::BindGroup>,
    /// Bind group as y.
    pub(super) as_y: wgpu::BindGroup,
}

fn element_bytes(p: Precision) -> u64 {
    match p {
        Precision::F16 => 2,
        Precision::F32 => 4,
    }
}

/// `n` as u32, or a `TooLarge` naming `what`.
pub(super) fn to_u32(n: usize, what: &str) -> Result<u32> {
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
    pub(super) fn uniform(&self, params: MatrixParams) -> Result<wgpu::Buffer> {
        self.gpu.upload(
            bytemuck::bytes_of(&params),
            wgpu::BufferUsages::UNIFORM,
            "matrix parameters",
        )
    }

    pub(super) fn storage(&self, data: &[u8], what: &str) -> Result<wgpu::Buffer> {
        self.gpu.upload(data, wgpu::BufferUsages::STORAGE, what)
    }

    pub(super) fn bind_group(
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

    /// The partial row sums of `rows` rows (see `GpuMatrix::_partials`; at least one word),
    /// zero-filled by wgpu.
    pub(super) fn partials(&self, rows: usize) -> Result<wgpu::Buffer> {
        self.gpu.create_buffer(
            buffer_size(4 * rows.max(1) as u64),
            wgpu::BufferUsages::STORAGE,
            "partial row sums",
        )
    }

    /// One block of a sparse matrix: parameters, rebased row pointers and the two entry arrays,
    /// dispatched as `plan` says for its rows. `params` as `MatrixParams::block` makes them,
    /// with the slot (and tiles) set.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn sparse_block(
        &self,
        plan: &WgpuPlan,
        params: MatrixParams,
        row_ptr: &[u32],
        values: &[u8],
        indices: &[u8],
        partials: &wgpu::Buffer,
        format: &str,
    ) -> Result<Block> {
        let dispatch = plan.grid.dispatch(params.rows);
        let batch_dispatch = batch_dispatch(plan, params.rows);
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
                (4, partials),
            ],
            &format!("{format} block"),
        )?;
        Ok(Block {
            bind_group,
            dispatch,
            batch_dispatch,
        })
    }

    /// The plan of a matrix of `format`, `rows` × `cols`, `stored` entries (see
    /// `MatrixStats::fill`).
    pub(super) fn plan_for(
        &self,
        format: MatrixKind,
        rows: usize,
        cols: usize,
        stored: u64,
    ) -> WgpuPlan {
        self.plan_with(format, rows, cols, stored, &self.tuning)
    }

    /// [`Self::plan_for`] with `tuning`'s choices instead of the device's own.
    fn plan_with(
        &self,
        format: MatrixKind,
        rows: usize,
        cols: usize,
        stored: u64,
        tuning: &WgpuTuning,
    ) -> WgpuPlan {
        let fill = match format {
            MatrixKind::Macko => stored as f64 / (rows as f64 * cols as f64).max(1.0),
            _ => 0.0,
        };
        let stats = MatrixStats {
            format,
            rows,
            cols,
            fill,
        };
        plan(&stats, &self.caps, tuning)
    }

    /// The few-token state of a `rows` × `cols` matrix (both checked to fit u32 at upload).
    pub(super) fn batch_state(&self, rows: usize, cols: usize) -> BatchState {
        BatchState::new(rows as u32, cols as u32, self.caps.max_workgroups_per_dim)
    }

    /// Uploads `m` planned with `tuning`'s choices instead of the device's own (the plan
    /// cache's tuned plan, or a candidate the tuner times). Only MACKO matrices with binary16
    /// values have tuned plans; other formats upload with the device's own.
    pub(crate) fn upload_matrix_tuned(
        &self,
        m: MatrixRef<'_>,
        tuning: &WgpuTuning,
    ) -> Result<GpuMatrix> {
        match m {
            MatrixRef::Macko(a) => {
                self.gpu.check()?;
                to_u32(a.rows(), "rows")?;
                to_u32(a.cols(), "columns")?;
                self.upload_macko(a, tuning)
            }
            _ => self.upload_matrix_impl(m),
        }
    }

    pub(super) fn upload_matrix_impl(&self, m: MatrixRef<'_>) -> Result<GpuMatrix> {
        self.gpu.check()?;
        let (rows, cols) = m.shape();
        to_u32(rows, "rows")?;
        to_u32(cols, "columns")?;
        match m {
            MatrixRef::Macko(m) => self.upload_macko(m, &self.tuning),
            MatrixRef::Csr(m) => self.upload_csr(m),
            MatrixRef::Dense(m) => self.upload_dense(m),
            // quant_upload.rs
            MatrixRef::MackoQuant(m) => self.upload_macko_quant(m),
            MatrixRef::DenseQuant(m) => self.upload_dense_quant(m),
            MatrixRef::Sparse24(m) => self.upload_sparse24(m),
            MatrixRef::HomogeneousCsr(m) => self.upload_homogeneous_csr(m),
        }
    }

    /// How the MACKO matrix `m` is laid out and cut into row blocks: row-aligned where
    /// `aligned` asks for it and the aligned rows fit a binding, else in the format's layout.
    fn macko_blocks(
        &self,
        m: &MackoMatrix,
        tiles: Option<TilePlan>,
        aligned: bool,
    ) -> Result<MackoLayout> {
        // A tile table takes 8 bytes per row and plane (tiles + 1 planes).
        let row_bytes = tiles.map_or(4, |t| 8 * (u64::from(t.tiles) + 1));
        // With tiles: the whole matrix's tile table (entries from 0), cut into blocks by the
        // caller.
        let full_table = match tiles {
            Some(t) if aligned => Some(tile_table(m, 0..m.rows(), 0, t)),
            _ => None,
        };
        let aligned_ptr = match (tiles, &full_table) {
            (Some(t), Some(full)) => aligned_tile_row_ptr(full, m.rows(), t),
            // All rows, so the one possible error is offsets past 32 bits: the format's layout.
            (None, _) if aligned => aligned_row_ptr(m, 0..m.rows()).ok(),
            _ => None,
        };
        // Blocks of aligned rows, each with room for its group of zeros.
        let aligned_blocks = aligned_ptr.and_then(|p| {
            let limit = self.matrix_limit.saturating_sub(2 * GROUP as u64);
            plan_sparse_blocks(&p, GROUP as u64, 2, row_bytes, limit, "MACKO").ok()
        });
        Ok(match aligned_blocks {
            Some(blocks) => MackoLayout {
                aligned: true,
                blocks,
                full_table,
            },
            None => {
                let limit = self.matrix_limit;
                let blocks =
                    plan_sparse_blocks(m.row_ptr(), GROUP as u64, 2, row_bytes, limit, "MACKO")?;
                MackoLayout {
                    aligned: false,
                    blocks,
                    full_table: None,
                }
            }
        })
    }

    fn upload_macko(&self, m: &MackoMatrix, tuning: &WgpuTuning) -> Result<GpuMatrix> {
        let row_ptr = m.row_ptr();
        let stored = row_ptr.last().copied().unwrap_or(0);
        let mut plan = self.plan_with(
            MatrixKind::Macko,
            m.rows(),
            m.cols(),
            u64::from(stored),
            tuning,
        );
        let tiles = match plan.x {
            XStaging::Tiles(t) => Some(t),
            _ => None,
        };
        // Row-aligned (macko_format::aligned; with tiles, each row's part in each tile:
        // tiles.rs) where the plan asks for it; a row that fits a binding only unpadded keeps
        // the format's layout, and the plan says so.
        let MackoLayout {
            aligned: aligned_rows,
            blocks: blocks_rows,
            full_table,
        } = self.macko_blocks(m, tiles, plan.aligned_rows)?;
        if !aligned_rows {
            plan = plan.in_format_layout();
        }
        // The partial sums are bound whole in every block: a word per row.
        let partial_rows = if tiles.is_some() { m.rows() } else { 0 };
        if 4 * partial_rows as u64 > self.matrix_limit {
            return Err(Error::TooLarge {
                backend: BackendKind::Wgpu,
                what: format!(
                    "the partial row sums of a {}×{} MACKO matrix with x in column tiles",
                    m.rows(),
                    m.cols()
                ),
                needed: 4 * partial_rows as u64,
                limit: self.matrix_limit,
            });
        }
        let partials = self.partials(partial_rows)?;
        let values: &[u8] = bytemuck::cast_slice(m.values());
        let mut blocks = Vec::with_capacity(blocks_rows.len());
        for (slot, rows) in blocks_rows.into_iter().enumerate() {
            let mut params = MatrixParams::block(
                to_u32(rows.len(), "rows of a block")?,
                m.cols() as u32,
                to_u32(rows.start, "first row of a block")?,
            );
            params.slot = to_u32(slot, "block index")?;
            // The whole matrix's rows, which the transposed kernels cut a dense x's rows by
            // (transposed.wgsl); no MACKO product kernel reads the field.
            params.stride = to_u32(m.rows(), "rows")?;
            if let Some(t) = tiles {
                params.tiles = t.tiles;
                params.tile_cols = t.cols;
                params.partials = to_u32(rows.start, "partial sums")?;
            }
            // A block's offsets are at most the whole matrix's, which fit.
            let past = || backend_error("internal: a row-aligned block past 32-bit offsets");
            let block = match (aligned_rows, tiles, &full_table) {
                (true, Some(t), Some(full)) => {
                    let a = aligned_tiles(m, rows.clone(), full, t).ok_or_else(past)?;
                    params.zero_group = a.zero_group;
                    let values = bytemuck::cast_slice(&a.values);
                    self.sparse_block(
                        &plan, params, &a.table, values, &a.codes, &partials, "MACKO",
                    )?
                }
                (true, None, _) => {
                    let a = align_rows(m, rows.clone()).map_err(|_| past())?;
                    params.zero_group = a.zero_group();
                    let values = bytemuck::cast_slice(&a.values);
                    self.sparse_block(
                        &plan, params, &a.row_ptr, values, &a.codes, &partials, "MACKO",
                    )?
                }
                _ => {
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
                    self.sparse_block(
                        &plan,
                        params,
                        &table,
                        &values[2 * base..2 * end],
                        &m.codes()[base / 2..end / 2],
                        &partials,
                        "MACKO",
                    )?
                }
            };
            blocks.push(block);
        }
        Ok(GpuMatrix {
            plan,
            rows: m.rows(),
            blocks,
            _partials: Some(partials),
            batch: self.batch_state(m.rows(), m.cols()),
        })
    }

    fn upload_dense(&self, m: &DenseMatrix) -> Result<GpuMatrix> {
        let (rows, cols) = (m.rows(), m.cols());
        let plan = self.plan_for(MatrixKind::Dense, rows, cols, 0);
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
            let dispatch = plan.grid.dispatch(params.rows);
            let batch_dispatch = batch_dispatch(&plan, params.rows);
            let params = self.uniform(params)?;
            let values = self.storage(bytemuck::cast_slice(data), "dense values")?;
            let bind_group = self.bind_group(
                &self.pipelines.dense,
                &[(0, &params), (2, &values)],
                "dense block",
            )?;
            blocks.push(Block {
                bind_group,
                dispatch,
                batch_dispatch,
            });
            r0 = r1;
        }
        Ok(GpuMatrix {
            plan,
            rows,
            blocks,
            _partials: None,
            batch: self.batch_state(rows, cols),
        })
    }

    /// A 2:4 matrix in row blocks of whole rows, each laid out by `sparse24_rows` (the layout
    /// shaders/sparse24.wgsl reads).
    fn upload_sparse24(&self, m: &Sparse24Matrix) -> Result<GpuMatrix> {
        let (rows, cols) = (m.rows(), m.cols());
        let plan = self.plan_for(MatrixKind::Sparse24, rows, cols, 0);
        let words = sparse24_words(cols);
        // A row's largest array is its values: 32 bytes per word.
        let per_block = plan_dense_blocks(rows, 32 * words as u64, self.matrix_limit)?;
        let mut blocks = Vec::new();
        let mut r0 = 0;
        while r0 < rows {
            let r1 = (r0 + per_block).min(rows);
            let (values, positions) = sparse24_rows(m, r0..r1);
            let mut params =
                MatrixParams::block(to_u32(r1 - r0, "rows of a block")?, cols as u32, r0 as u32);
            params.stride = to_u32(words, "words of 8 groups per row")?;
            let dispatch = plan.grid.dispatch(params.rows);
            let batch_dispatch = batch_dispatch(&plan, params.rows);
            let params = self.uniform(params)?;
            let values = self.storage(bytemuck::cast_slice(&values), "2:4 values")?;
            let positions = self.storage(bytemuck::cast_slice(&positions), "2:4 positions")?;
            let bind_group = self.bind_group(
                &self.pipelines.sparse24,
                &[(0, &params), (2, &values), (3, &positions)],
                "2:4 block",
            )?;
            blocks.push(Block {
                bind_group,
                dispatch,
                batch_dispatch,
            });
            r0 = r1;
        }
        Ok(GpuMatrix {
            plan,
            rows,
            blocks,
            _partials: None,
            batch: self.batch_state(rows, cols),
        })
    }

    /// Refuses a vector whose buffers would not fit one binding of the adapter; returns the
    /// size of its main buffer.
    /// Whether an f16 vector of `len` elements (and its f32 copy) can be bound: the error
    /// [`WgpuBackend::upload_vector_impl`] would give, without allocating.
    pub(super) fn check_vector_len(&self, len: usize) -> Result<()> {
        self.check_vector(len, Precision::F16).map(|_| ())
    }

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
            wide,
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
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;

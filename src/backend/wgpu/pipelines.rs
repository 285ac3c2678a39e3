//! The WGSL kernels, their bind group layouts (made once, at open) and their compute pipelines
//! (compiled once, on first use, then reused by every product: a device that only lists its
//! adapter, or only ever multiplies dense matrices, never compiles the other kernels).
//!
//! Every kernel is `shaders/common.wgsl`, then its family's prelude if any (`macko.wgsl`), then
//! its own file; the output precision is the pipeline constant `Y_F16`, so each product kernel
//! yields two pipelines. Every kernel is specialized here before wgpu sees it (specialize.rs:
//! its constants set, the branches they rule out removed), so the driver builds only the
//! variant a pipeline runs (on lavapipe, 1–2 s per MACKO subgroup pipeline instead of 11–17 s).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Mutex;

use crate::error::Result;

use super::gpu::{backend_error, lock, Gpu};
use super::kernel::{Kernel, MatrixLayout, QuantKey};
use super::specialize::{specialize, SpecializeError};

/// How the MACKO subgroup kernel holds a staged x in workgroup memory (the file composed after
/// macko.wgsl).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum XForm {
    /// Binary16 pairs in 32-bit words (macko_x_words.wgsl): every adapter.
    Pairs,
    /// One f16 per column (macko_x_f16.wgsl): adapters with `SHADER_F16`; the space of pairs,
    /// three instructions fewer per gathered entry.
    F16,
    /// As `F16`, with one unused 32-bit word after every 32 (`X_PAD`): for nearly dense rows,
    /// whose lanes gather columns 8 apart (see macko_x_f16.wgsl).
    F16Padded,
}

impl XForm {
    /// Words of workgroup memory x of `cols` columns takes in this form, before rounding.
    pub fn words(self, cols: u64) -> u64 {
        // The f16 forms stage column c at slot X_FRONT + c (before any pad) and keep X_TAIL
        // zero slots after the columns, rounded up to 8 (the copy writes whole words of x):
        // the slack that BOUNDED_GATHERS relies on (macko_x_f16.wgsl, row_dot_piped).
        let shifted = X_FRONT_SLOTS + cols.div_ceil(8) * 8 + X_TAIL_SLOTS;
        match self {
            XForm::Pairs => cols.div_ceil(2).max(1),
            XForm::F16 => shifted.div_ceil(2),
            // A pad word per 32, and one more word of margin: the last slot, where a clamp
            // puts indices past x, then always lies in the zeroed tail.
            XForm::F16Padded => shifted / 2 + shifted.div_ceil(64) + 1,
        }
    }

    /// Whether this form is composed from macko_x_f16.wgsl.
    pub fn is_f16(self) -> bool {
        matches!(self, XForm::F16 | XForm::F16Padded)
    }

    fn text(self) -> &'static str {
        match self {
            XForm::Pairs => "f16 pairs",
            XForm::F16 => "f16 scalars",
            XForm::F16Padded => "padded f16 scalars",
        }
    }
}

fn storage(binding: u32, read_only: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

fn uniform(binding: u32) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

/// What distinguishes two pipelines of one kernel: the fields of the plan (plan.rs) its code
/// depends on, and the output precision. Only the MACKO subgroup kernel has any but `kernel`
/// and `y_f16` (the others keep them 0 or false), besides the chunk width of the few-token
/// kernels and the `quant` of the quantized ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct PipelineKey {
    pub kernel: Kernel,
    pub y_f16: bool,
    /// Words of workgroup memory x is staged in (0: gathered from memory), and in which form.
    pub x_words: u32,
    pub x_form: XForm,
    /// Invocations per workgroup (0: the kernel's own).
    pub workgroup: u32,
    /// x staged in column tiles, the blocks' row pointers being tile tables (`X_TILED`).
    pub x_tiled: bool,
    /// Compiled without naga's per-access clamps, its gathers bounded by construction
    /// (`BOUNDED_GATHERS`: see `create_module`).
    pub bounded_gathers: bool,
    /// The test hook `GATHER_PROBE` (x staged as f16 scalars only).
    pub gather_probe: bool,
    /// Value masks from the table in the uniform (`MASK_TABLE`).
    pub mask_table: bool,
    /// The matrix was uploaded row-aligned (`ALIGNED_ROWS`); must be false for a matrix in the
    /// format's own layout.
    pub aligned_rows: bool,
    /// Two rows per exact subgroup (`HALF_ROWS`).
    pub half_rows: bool,
    /// Few-token kernels: vectors per pass (`W`: 2, 4, 8 or 16; 0 for the others).
    pub width: u32,
    /// Quantized kernels: the width of the codes and the scale layout (`None` for the others).
    pub quant: Option<QuantKey>,
    /// CSR kernels of a homogeneous CSR matrix (`HOMOGENEOUS`, shaders/csr.wgsl).
    pub homogeneous: bool,
    /// CSR and MACKO (binary16) single-vector kernels multiplying a sparse x's dense copy,
    /// x's zeros masked (`SPARSE_X`, shaders/csr.wgsl and shaders/macko.wgsl).
    pub sparse_x: bool,
}

impl PipelineKey {
    /// A kernel with no constant but the output precision.
    pub fn plain(kernel: Kernel, y_f16: bool) -> Self {
        Self {
            kernel,
            y_f16: y_f16 && kernel.writes_y(),
            x_words: 0,
            x_form: XForm::Pairs,
            workgroup: 0,
            x_tiled: false,
            bounded_gathers: false,
            gather_probe: false,
            mask_table: false,
            aligned_rows: false,
            half_rows: false,
            width: 0,
            quant: None,
            homogeneous: false,
            sparse_x: false,
        }
    }

    /// A few-token kernel (or the transposition) for chunks of `width` vectors:
    /// `workgroup` its invocations (0: the kernel's own), `x_tiled` the matrix's row pointers
    /// are tile tables (MACKO).
    pub fn batch(kernel: Kernel, y_f16: bool, width: u32, workgroup: u32, x_tiled: bool) -> Self {
        Self {
            workgroup,
            x_tiled,
            width,
            ..Self::plain(kernel, y_f16)
        }
    }

    /// The pipeline constants the key sets.
    pub(super) fn constants(&self) -> Vec<(&'static str, f64)> {
        let flag = |on: bool| if on { 1.0 } else { 0.0 };
        let mut c = Vec::new();
        if self.kernel.writes_y() {
            c.push(("Y_F16", flag(self.y_f16)));
        }
        if self.homogeneous {
            c.push(("HOMOGENEOUS", 1.0));
        }
        if self.sparse_x {
            c.push(("SPARSE_X", 1.0));
        }
        if matches!(
            self.kernel,
            Kernel::CsrTransposedDense | Kernel::MackoTransposedDense
        ) {
            c.push(("DENSE_X", 1.0));
        }
        if let Some(q) = self.quant {
            c.push(("PER_GROUP", flag(q.per_group)));
            c.push(("SCALE_POW2", flag(q.pow2)));
        }
        if self.width > 0 {
            c.push(("W", f64::from(self.width)));
            if self.kernel.batch_workgroup_constant() && self.workgroup > 0 {
                c.push(("WORKGROUP", f64::from(self.workgroup)));
            }
            if matches!(
                self.kernel,
                Kernel::MackoBatchSubgroup | Kernel::MackoBatchWorkgroup
            ) {
                c.push(("X_TILED", flag(self.x_tiled)));
            }
            return c;
        }
        if !matches!(
            self.kernel,
            Kernel::MackoSubgroup | Kernel::MackoWorkgroup | Kernel::QuantMackoSubgroup
        ) {
            return c;
        }
        c.push(("X_SHARED", flag(self.x_words > 0)));
        if self.x_words > 0 {
            if self.x_form.is_f16() {
                c.push(("X_HALVES", 2.0 * f64::from(self.x_words)));
                c.push(("X_PAD", flag(self.x_form == XForm::F16Padded)));
            } else {
                c.push(("X_WORDS", f64::from(self.x_words)));
            }
        }
        if self.kernel == Kernel::QuantMackoSubgroup {
            // x staged whole or gathered (no tiles), in the format's layout, with naga's clamps.
            if self.workgroup > 0 {
                c.push(("WORKGROUP", f64::from(self.workgroup)));
            }
            return c;
        }
        if self.kernel == Kernel::MackoSubgroup {
            c.push(("X_TILED", flag(self.x_tiled)));
            c.push(("WORKGROUP", f64::from(self.workgroup)));
            c.push(("BOUNDED_GATHERS", flag(self.bounded_gathers)));
            if self.x_form.is_f16() {
                c.push(("GATHER_PROBE", flag(self.gather_probe)));
            }
            c.push(("MASK_TABLE", flag(self.mask_table)));
            c.push(("ALIGNED_ROWS", flag(self.aligned_rows)));
            c.push(("HALF_ROWS", flag(self.half_rows)));
        }
        c
    }

    /// What is compiled, for error messages.
    fn describe(&self) -> String {
        let mut what = format!("compiling kernel {}", self.kernel.name());
        if self.width > 0 {
            what += &format!(" ({} vectors per pass)", self.width);
        }
        if self.y_f16 {
            what += " (f16 y)";
        }
        if self.homogeneous {
            what += " (homogeneous CSR)";
        }
        if self.sparse_x {
            what += " (x sparse)";
        }
        if self.x_words > 0 {
            what += &format!(
                " (x as {} in {} words of workgroup memory{})",
                self.x_form.text(),
                self.x_words,
                if self.x_tiled {
                    ", in column tiles"
                } else {
                    ""
                }
            );
        }
        if self.workgroup > 0 {
            what += &format!(" ({} invocations per workgroup)", self.workgroup);
        }
        if let Some(q) = self.quant {
            what += if q.int4 { " (int4" } else { " (int8" };
            what += match (q.per_group, q.pow2) {
                (false, _) => ", scales per row)",
                (true, true) => ", scales per group, shifted)",
                (true, false) => ", scales per group, divided)",
            };
        }
        let flags = [
            (self.bounded_gathers, "gathers bounded"),
            (self.gather_probe, "gathers probed"),
            (self.mask_table, "mask table"),
            (self.aligned_rows, "rows aligned"),
            (self.half_rows, "two rows per subgroup"),
        ];
        for (on, text) in flags {
            if on {
                what += &format!(", {text}");
            }
        }
        what
    }
}

/// The slack around an x staged as f16 scalars: `X_FRONT` and `X_TAIL` of macko_x_f16.wgsl.
pub(super) const X_FRONT_SLOTS: u64 = 32;
pub(super) const X_TAIL_SLOTS: u64 = 128;

/// Bind group layouts and pipeline layouts, made at open; pipelines, made on first use.
pub(super) struct Pipelines {
    pub sparse: wgpu::BindGroupLayout,
    pub dense: wgpu::BindGroupLayout,
    /// 2:4 blocks (MatrixLayout::Sparse24).
    pub sparse24: wgpu::BindGroupLayout,
    /// Quantized MACKO and dense blocks (MatrixLayout::QuantSparse, QuantDense).
    pub quant_sparse: wgpu::BindGroupLayout,
    pub quant_dense: wgpu::BindGroupLayout,
    pub stream: wgpu::BindGroupLayout,
    pub x: wgpu::BindGroupLayout,
    pub y: wgpu::BindGroupLayout,
    /// A chunk of a few-token product as the kernels read it (uniform, XT three times) and
    /// as the transposition writes it (uniform, XT).
    pub batch_read: wgpu::BindGroupLayout,
    pub batch_write: wgpu::BindGroupLayout,
    /// A sparse x (kernels of transposed products): uniform, indices, f32 values at bindings
    /// 2..4 of group 1, clear of the dense x's bindings in common.wgsl.
    pub sparse_x: wgpu::BindGroupLayout,
    /// The partial sums of the transposed products (group 3; shaders/transposed.wgsl).
    pub partials: wgpu::BindGroupLayout,
    /// Bound as group 1 of the transposed products' combine pass, which reads no x.
    pub empty_group: wgpu::BindGroup,
    sparse_transposed_layout: wgpu::PipelineLayout,
    dense_x_transposed_layout: wgpu::PipelineLayout,
    transposed_combine_layout: wgpu::PipelineLayout,
    sparse_layout: wgpu::PipelineLayout,
    dense_layout: wgpu::PipelineLayout,
    stream_layout: wgpu::PipelineLayout,
    sparse_batch_layout: wgpu::PipelineLayout,
    dense_batch_layout: wgpu::PipelineLayout,
    sparse24_layout: wgpu::PipelineLayout,
    sparse24_batch_layout: wgpu::PipelineLayout,
    transpose_layout: wgpu::PipelineLayout,
    quant_sparse_layout: wgpu::PipelineLayout,
    quant_dense_layout: wgpu::PipelineLayout,
    quant_sparse_batch_layout: wgpu::PipelineLayout,
    quant_dense_batch_layout: wgpu::PipelineLayout,
    built: Mutex<HashMap<PipelineKey, wgpu::ComputePipeline>>,
}

impl Pipelines {
    pub fn new(gpu: &Gpu) -> Result<Self> {
        gpu.scoped("bind group layouts", 0, || {
            let d = &gpu.device;
            let bgl = |label: &str, entries: &[wgpu::BindGroupLayoutEntry]| {
                d.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                    label: Some(label),
                    entries,
                })
            };
            let sparse = bgl(
                "sparse matrix",
                &[
                    uniform(0),
                    storage(1, true),
                    storage(2, true),
                    storage(3, true),
                    storage(4, false),
                ],
            );
            let dense = bgl("dense matrix", &[uniform(0), storage(2, true)]);
            let sparse24 = bgl(
                "2:4 matrix",
                &[uniform(0), storage(2, true), storage(3, true)],
            );
            let quant_sparse = bgl(
                "quantized MACKO matrix",
                &[
                    uniform(0),
                    storage(1, true),
                    storage(2, true),
                    storage(3, true),
                    storage(4, true),
                ],
            );
            let quant_dense = bgl(
                "quantized dense matrix",
                &[uniform(0), storage(2, true), storage(4, true)],
            );
            let stream = bgl("stream", &[uniform(0), storage(1, true), storage(2, false)]);
            // Each vector binds its f16 words and its f32 copy (see common.wgsl).
            let x = bgl("x", &[storage(0, true), storage(1, true)]);
            let y = bgl("y", &[storage(0, false), storage(1, false)]);
            let batch_read = bgl(
                "chunk (read)",
                &[
                    uniform(0),
                    storage(1, true),
                    storage(2, true),
                    storage(3, true),
                ],
            );
            let batch_write = bgl("chunk (write)", &[uniform(0), storage(1, false)]);
            let sparse_x = bgl(
                "sparse x",
                &[uniform(2), storage(3, true), storage(4, true)],
            );
            let partials = bgl("transposed partial sums", &[storage(0, false)]);
            let empty = bgl("empty", &[]);
            let empty_group = d.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("empty"),
                layout: &empty,
                entries: &[],
            });
            let layout = |label: &str, groups: &[Option<&wgpu::BindGroupLayout>]| {
                d.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                    label: Some(label),
                    bind_group_layouts: groups,
                    immediate_size: 0,
                })
            };
            let sparse_layout = layout("sparse product", &[Some(&sparse), Some(&x), Some(&y)]);
            let sparse_transposed_layout = layout(
                "transposed sparse product",
                &[Some(&sparse), Some(&sparse_x), Some(&y), Some(&partials)],
            );
            let dense_x_transposed_layout = layout(
                "transposed sparse product, x dense",
                &[Some(&sparse), Some(&x), Some(&y), Some(&partials)],
            );
            let transposed_combine_layout = layout(
                "transposed products' combine pass",
                &[Some(&sparse), Some(&empty), Some(&y), Some(&partials)],
            );
            let dense_layout = layout("dense product", &[Some(&dense), Some(&x), Some(&y)]);
            let stream_layout = layout("stream", &[Some(&stream)]);
            let sparse_batch_layout = layout(
                "sparse few-token product",
                &[Some(&sparse), Some(&x), Some(&y), Some(&batch_read)],
            );
            let dense_batch_layout = layout(
                "dense few-token product",
                &[Some(&dense), Some(&x), Some(&y), Some(&batch_read)],
            );
            let sparse24_layout = layout("2:4 product", &[Some(&sparse24), Some(&x), Some(&y)]);
            let sparse24_batch_layout = layout(
                "2:4 few-token product",
                &[Some(&sparse24), Some(&x), Some(&y), Some(&batch_read)],
            );
            let transpose_layout = layout("transposition", &[Some(&batch_write), Some(&x)]);
            let quant = |label: &str, matrix: &wgpu::BindGroupLayout| {
                (
                    layout(label, &[Some(matrix), Some(&x), Some(&y)]),
                    layout(
                        label,
                        &[Some(matrix), Some(&x), Some(&y), Some(&batch_read)],
                    ),
                )
            };
            let (quant_sparse_layout, quant_sparse_batch_layout) =
                quant("quantized MACKO product", &quant_sparse);
            let (quant_dense_layout, quant_dense_batch_layout) =
                quant("quantized dense product", &quant_dense);
            Self {
                sparse,
                dense,
                sparse24,
                quant_sparse,
                quant_dense,
                stream,
                x,
                y,
                batch_read,
                batch_write,
                sparse_x,
                partials,
                empty_group,
                sparse_transposed_layout,
                dense_x_transposed_layout,
                transposed_combine_layout,
                sparse_layout,
                dense_layout,
                stream_layout,
                sparse_batch_layout,
                dense_batch_layout,
                sparse24_layout,
                sparse24_batch_layout,
                transpose_layout,
                quant_sparse_layout,
                quant_dense_layout,
                quant_sparse_batch_layout,
                quant_dense_batch_layout,
                built: Mutex::new(HashMap::new()),
            }
        })
    }

    /// The pipeline of `key`, compiled on first use.
    pub fn get(&self, gpu: &Gpu, key: PipelineKey) -> Result<wgpu::ComputePipeline> {
        let mut built = lock(&self.built);
        if let Some(p) = built.get(&key) {
            return Ok(p.clone());
        }
        let kernel = key.kernel;
        let layout = match kernel.layout() {
            MatrixLayout::Sparse => &self.sparse_layout,
            MatrixLayout::Dense => &self.dense_layout,
            MatrixLayout::Stream => &self.stream_layout,
            MatrixLayout::SparseBatch => &self.sparse_batch_layout,
            MatrixLayout::DenseBatch => &self.dense_batch_layout,
            MatrixLayout::Sparse24 => &self.sparse24_layout,
            MatrixLayout::Sparse24Batch => &self.sparse24_batch_layout,
            MatrixLayout::Transpose => &self.transpose_layout,
            MatrixLayout::QuantSparse => &self.quant_sparse_layout,
            MatrixLayout::QuantDense => &self.quant_dense_layout,
            MatrixLayout::QuantSparseBatch => &self.quant_sparse_batch_layout,
            MatrixLayout::QuantDenseBatch => &self.quant_dense_batch_layout,
            MatrixLayout::SparseTransposed => &self.sparse_transposed_layout,
            MatrixLayout::DenseXTransposed => &self.dense_x_transposed_layout,
            MatrixLayout::TransposedCombine => &self.transposed_combine_layout,
        };
        let int4 = key.quant.is_some_and(|q| q.int4);
        let source = kernel.source(key.x_form.is_f16(), int4);
        let module = specialize(kernel.name(), source, &key.constants())
            .map_err(|SpecializeError(e)| backend_error(e))?;
        let pipeline = gpu.scoped(&key.describe(), 0, || {
            let module = create_module(gpu, &key, module);
            gpu.device
                .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(kernel.name()),
                    layout: Some(layout),
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: wgpu::PipelineCompilationOptions {
                        constants: &[],
                        zero_initialize_workgroup_memory: kernel.needs_zeroed_workgroup_memory(),
                    },
                    cache: None,
                })
        })?;
        built.insert(key, pipeline.clone());
        Ok(pipeline)
    }
}

/// The shader module of a specialized kernel. The MACKO subgroup kernel is compiled without
/// naga's loop bounding and integer-division checks, and with `BOUNDED_GATHERS` without its
/// per-access clamps; every other kernel with all of naga's checks.
///
/// Loop bounding: wgpu adds to every loop a 64-bit iteration counter decremented and tested
/// each iteration (so that a driver never meets an infinite loop): on an H200, 4–5 registers
/// more per invocation and instructions in the kernel's hottest loops. The kernel needs
/// neither that nor the division checks:
/// - `stage_x` (macko.wgsl) and `copy_x`: loops `i = t; i < bound; i += invocations`, with
///   `invocations` = the workgroup size (>= 32) and every bound at most `X_WORDS`, `X_HALVES`
///   or `cols / 4` (< 2³⁰), so `i` never wraps and each loop ends;
/// - `row_dot` (macko_sg.wgsl): `g0` starts at `s / 8` and grows by `4 · lanes >= 4`
///   (lanes >= 1: counted at entry, when every invocation is active) while `g0 < gend <= 2²⁹`,
///   so it never wraps; `row_dot_piped` likewise by `2 · lanes >= 2`;
/// - `exact_scan1`: the shift doubles up to the subgroup size (<= 128);
///   `lane_sum`: it halves from half the subgroup size down to 0; `half_scan` and `half_sum`
///   likewise up to and down from half of it;
/// - `row_pair_piped`: `g0` grows by `2 · (size / 2) >= 2` while some half's next step starts
///   below its `gend <= 2²⁹`; `rows_loop_pairs`: every iteration adds the row stride (twice
///   the dispatch's subgroups) to rows below `params.rows` < 2³¹ and the loop leaves once both
///   halves' rows are past it;
/// - `main` with column tiles: the tile counts up by 1 to `params.tiles`;
/// - `rows_loop`: every iteration adds the dispatch's subgroup count (>= 1) to a row below
///   `params.rows` < 2³¹, so the row grows without wrapping and the loop leaves within
///   `params.rows` iterations.
///
/// The only divisors that are not constants are the lane count (>= 1, as above) and, with
/// `HALF_ROWS`, half the builtin subgroup size (taken only where the size is >= 2); every
/// other division is by a nonzero constant and all are unsigned (no `MIN / -1`).
///
/// Bounded gathers (x staged as f16 scalars): a gather of x is then one workgroup load instead
/// of a clamp and a load. Sound because every index the kernel computes is in range by
/// construction, not by the clamp:
/// - gathers of x in the pipelined loops (row_dot_piped says why: slack of 32 zero slots before
///   x and 128 after it, group starts clamped to the tile's width); the unpipelined loop clamps
///   its gathers itself (x_at);
/// - the copy of x writes slots below `X_HALVES` (`XForm::words` counts the slack) and reads
///   words of x below its padded length;
/// - values and codes are read at groups below a row's end group (`min(g, gend - 1)` in masked
///   steps, whole steps only where they lie inside the row), or, with row-aligned uploads, at
///   the block's zero group past it (the last group of the block's arrays:
///   `RowAligned::zero_group`), and rows' bounds and tile tables at rows below `params.rows`
///   (the format's rule 4 keeps a row's columns below `cols`, so a tile part's columns lie in
///   its tile);
/// - y, its f32 copy and the partial sums at rows below `params.rows` of blocks the backend
///   sized.
///
/// On Vulkan with robustBufferAccess2 the driver bounds storage-buffer accesses as well (wgpu
/// then never clamps them); on Metal and DX12, and for workgroup memory everywhere, nothing
/// does, hence the argument above, which covers every buffer. The test hook `GATHER_PROBE`
/// (`WgpuTuning::gather_probe`) turns a gather outside the staged slots into a NaN product.
///
/// `batch_loops_end`: the few-token kernels are built without naga's
/// loop bounding. Sound because each of their loops ends: rows step by the dispatch's subgroups
/// or workgroups (>= 1) from below `params.rows` < 2³¹; row parts count up to `params.tiles`;
/// a row's steps grow by `4 · lanes` or `2 · lanes` (>= 2, lanes counted at entry or the
/// builtin size) towards the row's end group <= 2²⁹; the 2:4 kernels' words by the lane count
/// (>= 1) or 64 up to the row's words (`params.stride` < 2²⁹); scans double up to the subgroup size and
/// butterflies halve down to 0; stores step by the invocation count (>= 1) up to the chunk's
/// count; the dense kernels' words step by the workgroup or subgroup size up to the row stride;
/// the workgroup trees halve down to 0; the quantized few-token kernels' row steps grow by
/// 2 · 64 towards the row's end group, their dense chunks by 64 up to the row stride, and
/// their loops over a group's or a chunk's 8 entries count to 8.
///
/// `quant_loops_end`: the quantized MACKO subgroup kernel (quant_macko_sg.wgsl) is built
/// without naga's loop bounding too, for the reason the MACKO subgroup kernel is (registers
/// and the pipelining of its row loop), keeping the bounds and division checks. Each of its
/// loops ends: `copy_x` as above; `row_dot_piped`'s `g0` grows by `2 · lanes >= 2` (lanes
/// counted at entry or the builtin size) towards `gend <= 2²⁹`; `rows_loop` adds the
/// dispatch's subgroup count (>= 1) to rows below `params.rows` < 2³¹; `exact_scan1` doubles up
/// to the subgroup size (<= 128) and `lane_sum` halves down to 0; the prelude's loop over a
/// group's 8 entries (unused there) counts to 8.
fn create_module(gpu: &Gpu, key: &PipelineKey, module: naga::Module) -> wgpu::ShaderModule {
    let desc = wgpu::ShaderModuleDescriptor {
        label: Some(key.kernel.name()),
        source: wgpu::ShaderSource::Naga(Cow::Owned(module)),
    };
    if key.kernel.is_batch() {
        // The few-token kernels keep naga's bounds and division checks; only its loop
        // bounding goes, whose extra counter in every loop keeps the driver from unrolling and
        // pipelining the entry loops (`batch_loops_end` above says why every loop ends).
        let mut checks = wgpu::ShaderRuntimeChecks::checked();
        checks.force_loop_bounding = false;
        // SAFETY: every loop of the few-token kernels ends (`batch_loops_end`).
        return unsafe { gpu.device.create_shader_module_trusted(desc, checks) };
    }
    if key.kernel == Kernel::QuantMackoSubgroup {
        let mut checks = wgpu::ShaderRuntimeChecks::checked();
        checks.force_loop_bounding = false;
        // SAFETY: every loop of the quantized MACKO subgroup kernel ends (`quant_loops_end`).
        return unsafe { gpu.device.create_shader_module_trusted(desc, checks) };
    }
    if key.kernel != Kernel::MackoSubgroup {
        return gpu.device.create_shader_module(desc);
    }
    let mut checks = wgpu::ShaderRuntimeChecks::checked();
    checks.force_loop_bounding = false;
    checks.int_div_checks = false;
    checks.bounds_checks = !key.bounded_gathers;
    // SAFETY: the MACKO subgroup kernel's loops all end and its divisors are never zero, and
    // with BOUNDED_GATHERS every index of the kernel is in range by construction (above).
    unsafe { gpu.device.create_shader_module_trusted(desc, checks) }
}

#[cfg(test)]
mod tests {
    use super::{XForm, X_FRONT_SLOTS, X_TAIL_SLOTS};

    /// The slack `XForm::words` counts is the one macko_x_f16.wgsl lays x out with: without
    /// naga's clamps (BOUNDED_GATHERS) a mismatch would be a read outside workgroup memory.
    #[test]
    fn the_f16_slack_matches_the_shader() {
        let wgsl = include_str!("../../../shaders/macko_x_f16.wgsl");
        assert!(wgsl.contains(&format!("const X_FRONT: u32 = {X_FRONT_SLOTS}u;")));
        assert!(wgsl.contains(&format!("const X_TAIL: u32 = {X_TAIL_SLOTS}u;")));
    }

    /// For every width and granule, the staged slots reach past the highest gather the
    /// pipelined loop may make: x_slot(X_FRONT + width rounded up to 8 + X_TAIL - 1).
    #[test]
    fn staged_slots_cover_the_slack_for_every_width() {
        let pad = |k: u64| k + 2 * (k >> 6);
        for granule in [8u64, 256, 1024] {
            for cols in (1..70_000u64)
                .step_by(7)
                .chain([1, 8, 63, 64, 4096, 11008, 24576])
            {
                let top = X_FRONT_SLOTS + cols.div_ceil(8) * 8 + X_TAIL_SLOTS - 1;
                for (form, slot) in [(XForm::F16, top), (XForm::F16Padded, pad(top))] {
                    let halves = 2 * form.words(cols).div_ceil(granule) * granule;
                    assert!(halves > slot, "{form:?}, {cols} columns, granule {granule}");
                }
            }
        }
    }
}

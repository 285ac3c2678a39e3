//! The WGSL kernels, their bind group layouts (made once, at open) and their compute pipelines
//! (compiled once, on first use, then reused by every product: a device that only lists its
//! adapter, or only ever multiplies dense matrices, never compiles the other kernels).
//!
//! Every kernel is `shaders/common.wgsl`, then its family's prelude if any (`macko.wgsl`), then
//! its own file; the output precision is the pipeline constant `Y_F16`, so each product kernel
//! yields two pipelines.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Mutex;

use crate::backend::MatrixKind;
use crate::error::Result;

use super::gpu::{backend_error, lock, Gpu};
use super::specialize::{specialize, SpecializeError};

/// A kernel's full source: common.wgsl, then the given preludes and the kernel file; with
/// `enable: "..."` that directive line first (WGSL wants it before every declaration).
macro_rules! kernel_source {
    ($($file:literal),+) => {
        kernel_source!(enable: ""; $($file),+)
    };
    (enable: $directive:literal; $($file:literal),+) => {
        concat!(
            $directive,
            include_str!("../../../shaders/common.wgsl"),
            $("\n", include_str!(concat!("../../../shaders/", $file))),+
        )
    };
}

/// How the MACKO subgroup kernel holds a staged x in workgroup memory (the file composed after
/// macko.wgsl).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum XForm {
    /// Binary16 pairs in 32-bit words (macko_x_words.wgsl): every adapter.
    Pairs,
    /// One f32 word per column (macko_x_words.wgsl with `X_F32`): twice the space.
    F32,
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
            XForm::F32 => cols.max(1),
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
            XForm::F32 => "f32",
            XForm::F16 => "f16 scalars",
            XForm::F16Padded => "padded f16 scalars",
        }
    }
}

/// Which family of kernels runs the products.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KernelPath {
    /// Subgroup operations (scan, sum, broadcast).
    Subgroup,
    /// Workgroup memory and barriers only.
    Workgroup,
}

/// One compute kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Kernel {
    MackoSubgroup,
    MackoWorkgroup,
    CsrSubgroup,
    CsrWorkgroup,
    DenseSubgroup,
    DenseWorkgroup,
    Stream,
}

/// Which bind group layout a kernel's group 0 uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MatrixLayout {
    /// Params, row_ptr, values, codes or col_idx, and the counters of the MACKO subgroup
    /// kernel (two words per block; the other sparse kernels leave them alone).
    Sparse,
    /// Params, values.
    Dense,
    /// Stream params, data, per-workgroup sums.
    Stream,
}

/// Rows computed by one workgroup of the dense kernels (ROWS in dense_*.wgsl).
pub(super) const DENSE_ROWS_PER_WORKGROUP: u32 = 4;
/// Invocations of a stream workgroup, and words each reads per step (stream.wgsl).
pub(super) const STREAM_WORKGROUP: u32 = 256;
pub(super) const STREAM_UNROLL: u32 = 4;

impl Kernel {
    /// The kernel multiplying `format` on `path`.
    pub fn for_product(format: MatrixKind, path: KernelPath) -> Self {
        match (format, path) {
            (MatrixKind::Macko, KernelPath::Subgroup) => Kernel::MackoSubgroup,
            (MatrixKind::Macko, KernelPath::Workgroup) => Kernel::MackoWorkgroup,
            (MatrixKind::Csr, KernelPath::Subgroup) => Kernel::CsrSubgroup,
            (MatrixKind::Csr, KernelPath::Workgroup) => Kernel::CsrWorkgroup,
            (MatrixKind::Dense, KernelPath::Subgroup) => Kernel::DenseSubgroup,
            (MatrixKind::Dense, KernelPath::Workgroup) => Kernel::DenseWorkgroup,
        }
    }

    /// The kernel's WGSL; `x_f16`: the MACKO subgroup kernel with x staged as f16 scalars.
    fn source(self, x_f16: bool) -> &'static str {
        match self {
            Kernel::MackoSubgroup if x_f16 => kernel_source!(
                enable: "enable f16;\n";
                "macko.wgsl", "macko_x_f16.wgsl", "macko_sg.wgsl"
            ),
            Kernel::MackoSubgroup => {
                kernel_source!("macko.wgsl", "macko_x_words.wgsl", "macko_sg.wgsl")
            }
            Kernel::MackoWorkgroup => {
                kernel_source!("macko.wgsl", "macko_x_words.wgsl", "macko_wg.wgsl")
            }
            Kernel::CsrSubgroup => kernel_source!("csr_sg.wgsl"),
            Kernel::CsrWorkgroup => kernel_source!("csr_wg.wgsl"),
            Kernel::DenseSubgroup => kernel_source!("dense_sg.wgsl"),
            Kernel::DenseWorkgroup => kernel_source!("dense_wg.wgsl"),
            Kernel::Stream => kernel_source!("stream.wgsl"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kernel::MackoSubgroup => "macko_sg",
            Kernel::MackoWorkgroup => "macko_wg",
            Kernel::CsrSubgroup => "csr_sg",
            Kernel::CsrWorkgroup => "csr_wg",
            Kernel::DenseSubgroup => "dense_sg",
            Kernel::DenseWorkgroup => "dense_wg",
            Kernel::Stream => "stream",
        }
    }

    /// Invocations per workgroup (WORKGROUP in the shader).
    pub fn workgroup_size(self) -> u32 {
        match self {
            Kernel::MackoSubgroup | Kernel::CsrSubgroup => 128,
            Kernel::MackoWorkgroup | Kernel::CsrWorkgroup => 64,
            Kernel::DenseSubgroup | Kernel::DenseWorkgroup | Kernel::Stream => 256,
        }
    }

    pub fn layout(self) -> MatrixLayout {
        match self {
            Kernel::MackoSubgroup
            | Kernel::MackoWorkgroup
            | Kernel::CsrSubgroup
            | Kernel::CsrWorkgroup => MatrixLayout::Sparse,
            Kernel::DenseSubgroup | Kernel::DenseWorkgroup => MatrixLayout::Dense,
            Kernel::Stream => MatrixLayout::Stream,
        }
    }

    /// Whether the kernel relies on workgroup memory starting at zero (the streaming read's
    /// atomic sum). The others write every word before reading it, and the staged x of the
    /// MACKO subgroup kernel (up to 48 KiB) would otherwise be zeroed by every workgroup for
    /// nothing; the small scan and sum arrays keep wgpu's zeroing.
    fn needs_zeroed_workgroup_memory(self) -> bool {
        self != Kernel::MackoSubgroup
    }

    /// Whether the kernel writes y (and so has the `Y_F16` constant).
    fn writes_y(self) -> bool {
        self != Kernel::Stream
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

/// What distinguishes two pipelines of one kernel: f16 or f32 y, and for the MACKO subgroup
/// kernel the words of workgroup memory x is staged in (0: gathered from memory), in which form,
/// and the workgroup size (0: the kernel's default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct PipelineKey {
    pub kernel: Kernel,
    pub y_f16: bool,
    pub x_words: u32,
    pub x_form: XForm,
    pub workgroup: u32,
    /// MACKO subgroup kernel: sets of 4 groups per lane per step (0: the default), and whether
    /// the staged x is swizzled.
    pub depth: u32,
    pub x_swizzle: bool,
    /// MACKO subgroup kernel with x staged: skip the zero select where x is finite.
    pub fast_finite: bool,
    /// MACKO subgroup kernel: naga's loop bounding and division checks kept (see
    /// `MackoTuning::loop_bounds`); always true for the other kernels.
    pub loop_bounds: bool,
    /// MACKO subgroup kernel: the register-trimming variants (`MackoTuning`): codes decoded
    /// late, rows in flight per subgroup (0: the kernel's default), builtin lane ids.
    pub late_decode: bool,
    pub row_ahead: u32,
    pub lane_builtins: bool,
    /// MACKO subgroup kernel: rows dealt out by a fixed stride instead of the atomic counter
    /// (`STATIC_ROWS`).
    pub static_rows: bool,
    /// MACKO subgroup kernel, with `static_rows`: subgroups numbered across workgroups first
    /// (`INTERLEAVED_ROWS`).
    pub interleaved_rows: bool,
    /// MACKO subgroup kernel: exact subgroups scan by shuffles (`SHUFFLE_SCAN`).
    pub shuffle_scan: bool,
    /// MACKO subgroup kernel: pipelined steps of 2 groups (`PIPELINE`).
    pub pipeline: bool,
    /// MACKO subgroup kernel: pipelined steps masked when computed, not when loaded
    /// (`LATE_MASK`; only with `pipeline`).
    pub late_mask: bool,
    /// MACKO subgroup kernel: x staged in column tiles, the blocks' row pointers being tile
    /// tables (`X_TILED`; only with x staged).
    pub x_tiled: bool,
    /// MACKO subgroup kernel: row sums held in lanes and stored together (`HELD_SUMS`; only
    /// with `static_rows`).
    pub held_sums: bool,
    /// MACKO subgroup kernel: exact subgroups sum a row by shuffles xor (`BUTTERFLY_SUM`; only
    /// with `lane_builtins`).
    pub butterfly_sum: bool,
    /// MACKO subgroup kernel compiled without naga's per-access clamps, its gathers bounded by
    /// construction (`BOUNDED_GATHERS`; only with x staged as f16 scalars, pipelined steps and
    /// loops not bounded by naga: see `MackoTuning::bounded_gathers`).
    pub bounded_gathers: bool,
    /// MACKO subgroup kernel with x staged as f16 scalars: the test hook `GATHER_PROBE`.
    pub gather_probe: bool,
    /// MACKO subgroup kernel: value masks from the table in the uniform (`MASK_TABLE`).
    pub mask_table: bool,
    /// MACKO subgroup kernel: the matrix was uploaded row-aligned (with x in column tiles,
    /// each row's part in each tile), and the pipelined loop masks nothing (`ALIGNED_ROWS`;
    /// only with pipelined steps). Must be false for a matrix in the format's own layout.
    pub aligned_rows: bool,
    /// MACKO subgroup kernel: two rows per exact subgroup (`HALF_ROWS`; only with
    /// `aligned_rows`, rows by stride and x staged whole).
    pub half_rows: bool,
}

/// Words of workgroup memory x is staged in are rounded up to this by default
/// (`MackoTuning::x_words_granule`), so matrices of similar widths share one pipeline. 256
/// since session 8 (1024 before): with the slack of the f16 forms, 4096 columns took 3072 words
/// at 1024 (12 KB), and four workgroups of 256 no longer fit an SM's ~48 KB of workgroup memory
/// on an H200 (shaders/NOTES.md, "Session 7"): 11008×4096 was 1.11–1.27× slower than at 256.
pub(super) const X_WORDS_GRANULE: u32 = 256;

/// The slack around an x staged as f16 scalars: `X_FRONT` and `X_TAIL` of macko_x_f16.wgsl.
pub(super) const X_FRONT_SLOTS: u64 = 32;
pub(super) const X_TAIL_SLOTS: u64 = 128;

/// Bind group layouts and pipeline layouts, made at open; pipelines, made on first use.
pub(super) struct Pipelines {
    pub sparse: wgpu::BindGroupLayout,
    pub dense: wgpu::BindGroupLayout,
    pub stream: wgpu::BindGroupLayout,
    pub x: wgpu::BindGroupLayout,
    pub y: wgpu::BindGroupLayout,
    sparse_layout: wgpu::PipelineLayout,
    dense_layout: wgpu::PipelineLayout,
    stream_layout: wgpu::PipelineLayout,
    built: Mutex<HashMap<PipelineKey, wgpu::ComputePipeline>>,
    /// Whether kernels are specialized here before wgpu sees them (specialize.rs), as by
    /// default, or handed over as WGSL with their constants (`MACKO_WGPU_SPECIALIZE=0`).
    specialize: bool,
}

impl Pipelines {
    pub fn new(gpu: &Gpu, specialize: bool) -> Result<Self> {
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
            let stream = bgl("stream", &[uniform(0), storage(1, true), storage(2, false)]);
            // Each vector binds its f16 words and its f32 copy (see common.wgsl).
            let x = bgl("x", &[storage(0, true), storage(1, true)]);
            let y = bgl("y", &[storage(0, false), storage(1, false)]);
            let layout = |label: &str, groups: &[Option<&wgpu::BindGroupLayout>]| {
                d.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                    label: Some(label),
                    bind_group_layouts: groups,
                    immediate_size: 0,
                })
            };
            let sparse_layout = layout("sparse product", &[Some(&sparse), Some(&x), Some(&y)]);
            let dense_layout = layout("dense product", &[Some(&dense), Some(&x), Some(&y)]);
            let stream_layout = layout("stream", &[Some(&stream)]);
            Self {
                sparse,
                dense,
                stream,
                x,
                y,
                sparse_layout,
                dense_layout,
                stream_layout,
                built: Mutex::new(HashMap::new()),
                specialize,
            }
        })
    }

    /// Whether kernels are specialized here before wgpu sees them (`MACKO_WGPU_SPECIALIZE`).
    pub fn specialized(&self) -> bool {
        self.specialize
    }

    /// The pipeline of `key`, compiled on first use.
    pub fn get(&self, gpu: &Gpu, key: PipelineKey) -> Result<wgpu::ComputePipeline> {
        let key = PipelineKey {
            y_f16: key.y_f16 && key.kernel.writes_y(),
            x_words: if key.kernel == Kernel::MackoSubgroup {
                key.x_words
            } else {
                0
            },
            x_form: if key.kernel == Kernel::MackoSubgroup && key.x_words > 0 {
                key.x_form
            } else {
                XForm::Pairs
            },
            workgroup: if key.kernel == Kernel::MackoSubgroup {
                key.workgroup
            } else {
                0
            },
            depth: if key.kernel == Kernel::MackoSubgroup {
                key.depth
            } else {
                0
            },
            x_swizzle: key.kernel == Kernel::MackoSubgroup
                && key.x_words > 0
                && !key.x_form.is_f16()
                && key.x_swizzle,
            fast_finite: key.kernel == Kernel::MackoSubgroup && key.x_words > 0 && key.fast_finite,
            loop_bounds: key.kernel != Kernel::MackoSubgroup || key.loop_bounds,
            late_decode: key.kernel == Kernel::MackoSubgroup && key.late_decode,
            row_ahead: if key.kernel == Kernel::MackoSubgroup {
                key.row_ahead
            } else {
                0
            },
            lane_builtins: key.kernel == Kernel::MackoSubgroup && key.lane_builtins,
            static_rows: key.kernel == Kernel::MackoSubgroup && key.static_rows,
            interleaved_rows: key.kernel == Kernel::MackoSubgroup
                && key.static_rows
                && key.interleaved_rows,
            shuffle_scan: key.kernel == Kernel::MackoSubgroup
                && key.lane_builtins
                && key.shuffle_scan,
            pipeline: key.kernel == Kernel::MackoSubgroup
                && key.lane_builtins
                && key.late_decode
                && key.depth <= 1
                && key.pipeline,
            late_mask: key.kernel == Kernel::MackoSubgroup
                && key.lane_builtins
                && key.late_decode
                && key.depth <= 1
                && key.pipeline
                && key.late_mask,
            x_tiled: key.kernel == Kernel::MackoSubgroup && key.x_words > 0 && key.x_tiled,
            held_sums: key.kernel == Kernel::MackoSubgroup
                && key.static_rows
                && !(key.x_words > 0 && key.x_tiled)
                && key.held_sums,
            butterfly_sum: key.kernel == Kernel::MackoSubgroup
                && key.lane_builtins
                && key.butterfly_sum,
            bounded_gathers: key.kernel == Kernel::MackoSubgroup
                && key.x_words > 0
                && key.x_form.is_f16()
                && key.lane_builtins
                && key.late_decode
                && key.depth <= 1
                && key.pipeline
                && !key.loop_bounds
                && key.bounded_gathers,
            gather_probe: key.kernel == Kernel::MackoSubgroup
                && key.x_words > 0
                && key.x_form.is_f16()
                && key.gather_probe,
            mask_table: key.kernel == Kernel::MackoSubgroup && key.mask_table,
            aligned_rows: key.kernel == Kernel::MackoSubgroup
                && key.lane_builtins
                && key.late_decode
                && key.depth <= 1
                && key.pipeline
                && key.aligned_rows,
            half_rows: key.kernel == Kernel::MackoSubgroup
                && key.lane_builtins
                && key.late_decode
                && key.depth <= 1
                && key.pipeline
                && key.static_rows
                && key.x_words > 0
                && !key.x_tiled
                && key.aligned_rows
                && key.half_rows,
            ..key
        };
        let mut built = lock(&self.built);
        if let Some(p) = built.get(&key) {
            return Ok(p.clone());
        }
        let kernel = key.kernel;
        let layout = match kernel.layout() {
            MatrixLayout::Sparse => &self.sparse_layout,
            MatrixLayout::Dense => &self.dense_layout,
            MatrixLayout::Stream => &self.stream_layout,
        };
        let what = format!(
            "compiling kernel {}{}{}{}",
            kernel.name(),
            if key.y_f16 { " (f16 y)" } else { "" },
            if key.x_words > 0 {
                format!(
                    " (x as {} in {} words of workgroup memory{})",
                    key.x_form.text(),
                    key.x_words,
                    if key.x_tiled { ", in column tiles" } else { "" }
                )
            } else {
                String::new()
            },
            if key.workgroup > 0 {
                format!(
                    " ({} invocations per workgroup, {} x 4 groups per step{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{})",
                    key.workgroup,
                    key.depth.max(1),
                    if key.x_swizzle { ", swizzled x" } else { "" },
                    if key.fast_finite {
                        ", finite-x fast path"
                    } else {
                        ""
                    },
                    if key.loop_bounds {
                        ", loops bounded"
                    } else {
                        ""
                    },
                    if key.late_decode { ", late decode" } else { "" },
                    if key.row_ahead == 1 {
                        ", one row ahead"
                    } else {
                        ""
                    },
                    if key.lane_builtins {
                        ", builtin lane ids"
                    } else {
                        ""
                    },
                    match (key.static_rows, key.interleaved_rows) {
                        (true, true) => ", rows by stride (subgroups across workgroups)",
                        (true, false) => ", rows by stride",
                        (false, _) => "",
                    },
                    if key.shuffle_scan {
                        ", scans by shuffles"
                    } else {
                        ""
                    },
                    if key.pipeline {
                        ", pipelined steps"
                    } else {
                        ""
                    },
                    if key.late_mask { ", masked late" } else { "" },
                    if key.held_sums { ", sums held" } else { "" },
                    if key.butterfly_sum {
                        ", sums by shuffles"
                    } else {
                        ""
                    },
                    if key.bounded_gathers {
                        ", gathers bounded"
                    } else {
                        ""
                    },
                    if key.mask_table { ", mask table" } else { "" },
                    if key.aligned_rows {
                        ", rows aligned"
                    } else {
                        ""
                    },
                    if key.half_rows {
                        ", two rows per subgroup"
                    } else {
                        ""
                    }
                )
            } else {
                String::new()
            }
        );
        let mut constants: Vec<(&str, f64)> = Vec::new();
        if kernel.writes_y() {
            constants.push(("Y_F16", if key.y_f16 { 1.0 } else { 0.0 }));
        }
        if matches!(kernel, Kernel::MackoSubgroup | Kernel::MackoWorkgroup) {
            constants.push(("X_SHARED", if key.x_words > 0 { 1.0 } else { 0.0 }));
            if key.x_words > 0 {
                if key.x_form.is_f16() {
                    constants.push(("X_HALVES", 2.0 * key.x_words as f64));
                    let pad = key.x_form == XForm::F16Padded;
                    constants.push(("X_PAD", if pad { 1.0 } else { 0.0 }));
                } else {
                    constants.push(("X_WORDS", key.x_words as f64));
                    constants.push(("X_F32", if key.x_form == XForm::F32 { 1.0 } else { 0.0 }));
                    constants.push(("X_SWIZZLE", if key.x_swizzle { 1.0 } else { 0.0 }));
                }
                constants.push(("FAST_FINITE", if key.fast_finite { 1.0 } else { 0.0 }));
            }
            if kernel == Kernel::MackoSubgroup {
                constants.push(("X_TILED", if key.x_tiled { 1.0 } else { 0.0 }));
            }
        }
        if key.workgroup > 0 {
            constants.push(("WORKGROUP", key.workgroup as f64));
        }
        if key.depth > 0 {
            constants.push(("DEPTH", key.depth as f64));
        }
        if kernel == Kernel::MackoSubgroup {
            constants.push(("LATE_DECODE", if key.late_decode { 1.0 } else { 0.0 }));
            if key.row_ahead > 0 {
                constants.push(("ROW_AHEAD", key.row_ahead as f64));
            }
            constants.push(("LANE_BUILTINS", if key.lane_builtins { 1.0 } else { 0.0 }));
            constants.push(("STATIC_ROWS", if key.static_rows { 1.0 } else { 0.0 }));
            constants.push((
                "INTERLEAVED_ROWS",
                if key.interleaved_rows { 1.0 } else { 0.0 },
            ));
            constants.push(("SHUFFLE_SCAN", if key.shuffle_scan { 1.0 } else { 0.0 }));
            constants.push(("PIPELINE", if key.pipeline { 1.0 } else { 0.0 }));
            constants.push(("LATE_MASK", if key.late_mask { 1.0 } else { 0.0 }));
            constants.push(("HELD_SUMS", if key.held_sums { 1.0 } else { 0.0 }));
            constants.push(("BUTTERFLY_SUM", if key.butterfly_sum { 1.0 } else { 0.0 }));
            constants.push((
                "BOUNDED_GATHERS",
                if key.bounded_gathers { 1.0 } else { 0.0 },
            ));
            if key.x_form.is_f16() {
                constants.push(("GATHER_PROBE", if key.gather_probe { 1.0 } else { 0.0 }));
            }
            constants.push(("MASK_TABLE", if key.mask_table { 1.0 } else { 0.0 }));
            constants.push(("ALIGNED_ROWS", if key.aligned_rows { 1.0 } else { 0.0 }));
            constants.push(("HALF_ROWS", if key.half_rows { 1.0 } else { 0.0 }));
        }
        let source = kernel.source(key.x_form.is_f16());
        // The module as wgpu gets it: specialized here (the constants set, the branches they
        // rule out gone: specialize.rs), or with MACKO_WGPU_SPECIALIZE=0 the WGSL and its
        // constants for wgpu to set.
        let (source, constants) = if self.specialize {
            let module = specialize(kernel.name(), source, &constants)
                .map_err(|SpecializeError(e)| backend_error(e))?;
            (wgpu::ShaderSource::Naga(Cow::Owned(module)), Vec::new())
        } else {
            (wgpu::ShaderSource::Wgsl(Cow::Borrowed(source)), constants)
        };
        let pipeline = gpu.scoped(&what, 0, || {
            let desc = wgpu::ShaderModuleDescriptor {
                label: Some(kernel.name()),
                source,
            };
            let module = if key.loop_bounds {
                gpu.device.create_shader_module(desc)
            } else {
                let mut checks = wgpu::ShaderRuntimeChecks::checked();
                checks.force_loop_bounding = false;
                checks.int_div_checks = false;
                checks.bounds_checks = !key.bounded_gathers;
                // SAFETY: only the MACKO subgroup kernel comes here, whose loops all end and
                // whose divisors are never zero (MackoTuning::loop_bounds); bounds checks stay,
                // except with BOUNDED_GATHERS, where every index of the kernel is in range by
                // construction (MackoTuning::bounded_gathers).
                unsafe { gpu.device.create_shader_module_trusted(desc, checks) }
            };
            gpu.device
                .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(kernel.name()),
                    layout: Some(layout),
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: wgpu::PipelineCompilationOptions {
                        constants: &constants,
                        zero_initialize_workgroup_memory: kernel.needs_zeroed_workgroup_memory(),
                    },
                    cache: None,
                })
        })?;
        built.insert(key, pipeline.clone());
        Ok(pipeline)
    }
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

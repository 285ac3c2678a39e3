//! The compiled kernels loaded into a context: one module per kernel file (its CUBIN compiled
//! once per process by `nvrtc.rs`), each [`Kernel`]'s two output variants, and what each takes
//! of an SM, for the planner's capabilities.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute_enum;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;

use super::caps::{Kernel, KernelUse};
use super::errors::{cuda_error, internal};
use super::nvrtc::{self, KernelSource};
use crate::backend::Precision;
use crate::error::Result;
use macko_format::QuantBits;

/// A kernel compiled for both output precisions.
pub(crate) struct ByOutput {
    pub(super) f16: CudaFunction,
    pub(super) f32: CudaFunction,
}

impl ByOutput {
    /// The variant that writes y in `p`.
    pub fn pick(&self, p: Precision) -> &CudaFunction {
        match p {
            Precision::F16 => &self.f16,
            Precision::F32 => &self.f32,
        }
    }
}

/// Every kernel of the backend, loaded into its context.
pub(crate) struct Kernels {
    /// Indexed by [`Kernel::index`].
    by_kernel: Vec<ByOutput>,
    /// The one-thread kernel that holds the stream during timing.
    spin_wait: CudaFunction,
}

/// The kernel file that defines `kernel`.
fn source_of(kernel: Kernel) -> &'static KernelSource {
    match kernel {
        Kernel::CsrStaged | Kernel::CsrGlobal => &nvrtc::CSR,
        Kernel::DenseAligned | Kernel::DenseAny => &nvrtc::DENSE,
        Kernel::StreamRead => &nvrtc::STREAM,
        Kernel::Batch(b) if b.format.tensor_cores() => &nvrtc::BATCH_MMA,
        Kernel::Batch(_) | Kernel::BatchTranspose => &nvrtc::BATCH,
        _ => &nvrtc::MACKO,
    }
}

/// Loads one kernel file's CUBIN (compiled once per process, or loaded from the on-disk kernel
/// cache) into `ctx`.
pub(super) fn load_module(
    ctx: &Arc<CudaContext>,
    kernel: &KernelSource,
    arch: &str,
) -> Result<Arc<CudaModule>> {
    let cubin = nvrtc::cubin_cached(kernel, arch)?;
    ctx.load_module(Ptx::from_binary(cubin.as_ref().clone()))
        .map_err(|e| cuda_error(&format!("loading kernels/{} ({arch})", kernel.label()), e))
}

/// Shared memory a block may use without asking (every CUDA GPU since Kepler).
const DEFAULT_SMEM: u32 = 48 << 10;

/// Lets a kernel that stages x use all the dynamic shared memory a block may opt in to (above
/// 48 KiB a kernel must ask), minus what it declares statically. Returns the limit in force for
/// both output variants: the opt-in one, or 48 KiB if the driver refused (x then goes to global
/// memory for wider matrices instead of the launch failing).
pub(crate) fn allow_large_smem(k: &ByOutput, optin: u32) -> Result<u32> {
    let mut limit = optin;
    for f in [&k.f16, &k.f32] {
        let fixed = f
            .shared_size_bytes()
            .map_err(|e| cuda_error("reading a kernel's static shared memory", e))?;
        let dynamic = optin.saturating_sub(u32::try_from(fixed).unwrap_or(0));
        let raised = f.set_attribute(
            CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            i32::try_from(dynamic).unwrap_or(i32::MAX),
        );
        limit = limit.min(if raised.is_ok() {
            dynamic
        } else {
            DEFAULT_SMEM
        });
    }
    Ok(limit)
}

/// What a loaded kernel takes of an SM (its f32 variant's registers and static shared memory).
fn kernel_use(k: &ByOutput) -> Result<KernelUse> {
    let registers = k
        .f32
        .num_regs()
        .map_err(|e| cuda_error("reading a kernel's registers", e))?;
    let static_smem = k
        .f32
        .shared_size_bytes()
        .map_err(|e| cuda_error("reading a kernel's static shared memory", e))?;
    Ok(KernelUse {
        registers: u32::try_from(registers).unwrap_or(0),
        static_smem: u32::try_from(static_smem).unwrap_or(0),
    })
}

/// The loaded kernels, what each takes of an SM, and the dynamic shared memory every kernel
/// that stages x may use per block.
pub(crate) struct Loaded {
    pub kernels: Kernels,
    pub uses: [KernelUse; Kernel::COUNT],
    pub smem_limit: u32,
}

impl Kernels {
    /// Compiles (once per process, or loaded from the on-disk kernel cache) and loads every kernel for `arch` (`sm_90`) into `ctx`, and
    /// lets those that stage x use up to `smem_optin` bytes of dynamic shared memory.
    pub fn load(ctx: &Arc<CudaContext>, arch: &str, smem_optin: u32) -> Result<Loaded> {
        let mut modules: HashMap<&'static str, Arc<CudaModule>> = HashMap::new();
        for source in nvrtc::KERNELS {
            modules.insert(source.file, load_module(ctx, &source, arch)?);
        }
        let function = |source: &KernelSource, name: &str| -> Result<CudaFunction> {
            modules
                .get(source.file)
                .ok_or_else(|| internal(&format!("kernels/{} is not loaded", source.file)))?
                .load_function(name)
                .map_err(|e| cuda_error(&format!("finding kernel {name}"), e))
        };
        let mut by_kernel = Vec::with_capacity(Kernel::COUNT);
        let mut uses = [KernelUse::default(); Kernel::COUNT];
        let mut smem_limit = smem_optin;
        for kernel in Kernel::ALL {
            let source = source_of(kernel);
            let (f16, f32) = kernel.entries();
            let pair = ByOutput {
                f16: function(source, f16)?,
                f32: function(source, f32)?,
            };
            if kernel.stages_x() {
                smem_limit = smem_limit.min(allow_large_smem(&pair, smem_optin)?);
            }
            uses[kernel.index()] = kernel_use(&pair)?;
            by_kernel.push(pair);
        }
        let spin_wait = function(&nvrtc::STREAM, "spin_wait")?;
        Ok(Loaded {
            kernels: Kernels {
                by_kernel,
                spin_wait,
            },
            uses,
            smem_limit,
        })
    }

    /// The two output variants of `kernel`.
    pub fn get(&self, kernel: Kernel) -> &ByOutput {
        &self.by_kernel[kernel.index()]
    }

    /// The spin that holds the stream (kernels/stream.cu, `spin_wait`).
    pub fn spin_wait(&self) -> &CudaFunction {
        &self.spin_wait
    }
}

/// How a dense int8 / int4 GEMV runs (kernels/dense_quant.cu).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DenseQuantLayout {
    /// `dense_q_a16_*`: rows on 16-byte boundaries, every scale group inside a row, x read
    /// from global memory.
    Aligned,
    /// `dense_q_xs_*`: the same with x staged in shared memory as f32 (where it fits).
    Staged,
    /// `dense_q_any_*`: any shape, one code at a time.
    Any,
    /// `dense_q_tc_*` (int4 only): aligned rows on tensor cores (sm_80+), a block of `warps`
    /// warps per band of 16 rows; scale groups of one or two 16-byte chunks or of whole 64-byte
    /// windows ([`tensor_core_groups`]).
    TensorCore {
        /// Warps per block, splitting each band's row (1 to 16).
        warps: u32,
    },
}

/// Whether scale groups of `group` codes (`None`: per row) fit the tensor-core dense entries of
/// a width with `per_word` codes per 16-byte word: a group of one, two or a multiple of four
/// words (the window of a lane quad), so that no mma sums codes of two groups.
pub(crate) fn tensor_core_groups(group: Option<u32>, per_word: u32) -> bool {
    group.is_none_or(|g| g == per_word || g == 2 * per_word || g % (4 * per_word) == 0)
}

/// The MACKO kernels that have int8 / int4 entries in kernels/macko_quant.cu (every one the
/// MACKO plan can name except the flat kernel and its combine, which quantized plans never use).
const QUANT_ROW_KERNELS: [Kernel; 9] = [
    Kernel::RowPadded,
    Kernel::RowGlobal,
    Kernel::RowPlain,
    Kernel::RowHalf,
    Kernel::BigPadded,
    Kernel::BigPlain,
    Kernel::Lean,
    Kernel::LeanHalf,
    Kernel::Combine,
];

/// The entry of macko_quant.cu that does for quantized values what `entry` (of macko.cu) does.
fn quant_entry(entry: &str) -> String {
    entry.replacen("macko_", "macko_q_", 1)
}

/// The kernels of quantized products of one width (kernels/macko_quant.cu and dense_quant.cu),
/// compiled and loaded on the first upload of a quantized matrix of that width, so that opening
/// the backend pays nothing for them.
pub(crate) struct QuantKernels {
    /// Indexed by [`Kernel::index`]; `None` for kernels without a quantized entry.
    row: Vec<Option<ByOutput>>,
    dense_aligned: ByOutput,
    dense_staged: ByOutput,
    dense_any: ByOutput,
    /// int4 only.
    dense_tc: Option<ByOutput>,
}

impl QuantKernels {
    /// Compiles (once per process, or loaded from the on-disk kernel cache) and loads the kernels of `bits` into `ctx`, letting those that
    /// stage x use up to `smem_optin` bytes of dynamic shared memory (as [`Kernels::load`]).
    pub fn load(
        ctx: &Arc<CudaContext>,
        arch: &str,
        smem_optin: u32,
        bits: QuantBits,
    ) -> Result<Self> {
        let (macko, dense) = match bits {
            QuantBits::Int8 => (&nvrtc::MACKO_Q8, &nvrtc::DENSE_Q8),
            QuantBits::Int4 => (&nvrtc::MACKO_Q4, &nvrtc::DENSE_Q4),
        };
        let macko_module = load_module(ctx, macko, arch)?;
        let dense_module = load_module(ctx, dense, arch)?;
        let pair = |module: &Arc<CudaModule>, f16: &str, f32: &str| -> Result<ByOutput> {
            let function = |name: &str| {
                module
                    .load_function(name)
                    .map_err(|e| cuda_error(&format!("finding kernel {name}"), e))
            };
            Ok(ByOutput {
                f16: function(f16)?,
                f32: function(f32)?,
            })
        };
        let mut row: Vec<Option<ByOutput>> = (0..Kernel::COUNT).map(|_| None).collect();
        for kernel in QUANT_ROW_KERNELS {
            let (f16, f32) = kernel.entries();
            let p = pair(&macko_module, &quant_entry(f16), &quant_entry(f32))?;
            if kernel.stages_x() {
                allow_large_smem(&p, smem_optin)?;
            }
            row[kernel.index()] = Some(p);
        }
        let dense_staged = pair(&dense_module, "dense_q_xs_f16", "dense_q_xs_f32")?;
        allow_large_smem(&dense_staged, smem_optin)?;
        Ok(Self {
            row,
            dense_staged,
            dense_aligned: pair(&dense_module, "dense_q_a16_f16", "dense_q_a16_f32")?,
            dense_any: pair(&dense_module, "dense_q_any_f16", "dense_q_any_f32")?,
            dense_tc: match bits {
                QuantBits::Int4 => Some(pair(&dense_module, "dense_q_tc_f16", "dense_q_tc_f32")?),
                QuantBits::Int8 => None,
            },
        })
    }

    /// The quantized entry of the MACKO kernel a plan names.
    pub fn row(&self, kernel: Kernel) -> Result<&ByOutput> {
        self.row
            .get(kernel.index())
            .and_then(Option::as_ref)
            .ok_or_else(|| internal(&format!("{kernel:?} has no quantized entry")))
    }

    /// The dense GEMV of a layout.
    pub fn dense(&self, layout: DenseQuantLayout) -> Result<&ByOutput> {
        Ok(match layout {
            DenseQuantLayout::Aligned => &self.dense_aligned,
            DenseQuantLayout::Staged => &self.dense_staged,
            DenseQuantLayout::Any => &self.dense_any,
            DenseQuantLayout::TensorCore { .. } => self
                .dense_tc
                .as_ref()
                .ok_or_else(|| internal("int8 has no tensor-core dense entries"))?,
        })
    }
}

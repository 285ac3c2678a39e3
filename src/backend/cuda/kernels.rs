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

/// A kernel compiled for both output precisions.
pub(crate) struct ByOutput {
    f16: CudaFunction,
    f32: CudaFunction,
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

/// Loads one kernel file's CUBIN (compiled once per process) into `ctx`.
fn load_module(
    ctx: &Arc<CudaContext>,
    kernel: &KernelSource,
    arch: &str,
) -> Result<Arc<CudaModule>> {
    let cubin = nvrtc::cubin_cached(kernel, arch)?;
    ctx.load_module(Ptx::from_binary(cubin.as_ref().clone()))
        .map_err(|e| cuda_error(&format!("loading kernels/{} ({arch})", kernel.file), e))
}

/// Shared memory a block may use without asking (every CUDA GPU since Kepler).
const DEFAULT_SMEM: u32 = 48 << 10;

/// Lets a kernel that stages x use all the dynamic shared memory a block may opt in to (above
/// 48 KiB a kernel must ask), minus what it declares statically. Returns the limit in force for
/// both output variants: the opt-in one, or 48 KiB if the driver refused (x then goes to global
/// memory for wider matrices instead of the launch failing).
fn allow_large_smem(k: &ByOutput, optin: u32) -> Result<u32> {
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
    /// Compiles (once per process) and loads every kernel for `arch` (`sm_90`) into `ctx`, and
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

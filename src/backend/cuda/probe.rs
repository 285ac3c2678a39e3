//! Finding a usable GPU: the driver library, a device, NVRTC, then a context and one stream.
//!
//! cudarc loads the CUDA libraries at run time and panics on the first call into one that is
//! missing, so every library is probed with `is_culib_present` before anything calls into it,
//! and each way of failing becomes an [`Error::Unavailable`] that says what is missing. The
//! whole probe also runs under `catch_unwind`, so that a driver too old for a symbol cudarc
//! expects is reported the same way instead of aborting `Device::auto()`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use cudarc::driver::{result as drv, sys, CudaContext, CudaStream};

use super::errors::{cuda_error, unavailable};
use super::nvrtc;
use crate::error::Result;

/// What the kernels and the report need to know about the GPU.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DeviceProps {
    /// The GPU's name ("NVIDIA H100 80GB HBM3").
    pub name: String,
    /// Compute capability `(major, minor)`.
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors.
    pub sms: u32,
    /// L2 cache size in bytes.
    pub l2_bytes: u64,
    /// Largest dynamic shared memory one block may opt in to, in bytes.
    pub smem_per_block_optin: u32,
    /// The SM's limits the occupancy of a kernel depends on (see `caps.rs`).
    pub sm_limits: SmLimits,
    /// Device memory in bytes.
    pub total_memory: u64,
    /// Driver's CUDA version `(major, minor)`.
    pub driver_version: (i32, i32),
    /// NVRTC's version `(major, minor)`.
    pub nvrtc_version: (i32, i32),
    /// Peak DRAM bytes per SM clock cycle over all SMs (2 · memory clock · bus width / (SMs ·
    /// SM clock)): how much SM-side work each byte may cost before the SMs, not the memory,
    /// set the pace. H100 SXM ~12.8, H200 ~18.8. `None` where the driver does not report the
    /// clocks (the plan rules that use it then keep their conservative choice).
    pub dram_bytes_per_sm_cycle: Option<f64>,
}

/// An SM's limits on resident threads, blocks, registers and shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SmLimits {
    pub max_threads: u32,
    pub max_blocks: u32,
    pub regs: u32,
    pub regs_per_block: u32,
    pub smem: u32,
    pub smem_reserved_per_block: u32,
}

impl DeviceProps {
    /// The architecture NVRTC compiles for: `sm_90` for compute capability 9.0.
    pub fn arch(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability.0, self.compute_capability.1
        )
    }
}

/// An open GPU: its context, the one stream every product is queued on, and its properties.
pub(crate) struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub props: DeviceProps,
}

/// Opens GPU `ordinal`, or says exactly why CUDA cannot be used here.
pub(crate) fn open_gpu(ordinal: usize) -> Result<Gpu> {
    match catch_unwind(AssertUnwindSafe(|| open_gpu_unguarded(ordinal))) {
        Ok(result) => result,
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown panic");
            Err(unavailable(format!(
                "the CUDA libraries could not be used ({what}): the driver may be older than \
                 CUDA 13.0, which this build of macko expects"
            )))
        }
    }
}

fn open_gpu_unguarded(ordinal: usize) -> Result<Gpu> {
    check_driver_present()?;
    let count = device_count()?;
    if ordinal >= count {
        return Err(unavailable(format!(
            "CUDA device {ordinal} does not exist: the driver reports {count} GPU(s)"
        )));
    }
    let nvrtc_version = nvrtc::version()?;
    let ctx = CudaContext::new(ordinal).map_err(|e| {
        unavailable(format!(
            "could not create a context on CUDA device {ordinal}: {e}"
        ))
    })?;
    // SAFETY: every allocation, copy, launch and library call of this backend goes to the one
    // stream created below, in submission order, so cudarc's per-buffer events (which order
    // work across several streams) are not needed; without them each launch costs two fewer
    // driver calls per buffer.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx
        .new_stream()
        .map_err(|e| cuda_error("creating a stream", e))?;
    let props = read_props(&ctx, nvrtc_version)?;
    check_arch_supported(&props)?;
    Ok(Gpu { ctx, stream, props })
}

fn check_driver_present() -> Result<()> {
    // SAFETY: only tries to dlopen the candidate names of the driver library.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        Err(unavailable(
            "the CUDA driver library (libcuda.so.1) was not found: no NVIDIA driver is \
             installed here, or it is not on the library path",
        ))
    }
}

fn device_count() -> Result<usize> {
    if let Err(e) = drv::init() {
        return Err(unavailable(if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE {
            "the NVIDIA driver is installed but reports no CUDA GPU (cuInit: \
             CUDA_ERROR_NO_DEVICE)"
                .to_string()
        } else {
            format!("the CUDA driver failed to initialise (cuInit: {e})")
        }));
    }
    let count = drv::device::get_count()
        .map_err(|e| unavailable(format!("could not count CUDA devices: {e}")))?;
    if count <= 0 {
        return Err(unavailable(
            "the CUDA driver reports no GPU (device count 0)",
        ));
    }
    Ok(usize::try_from(count).unwrap_or(0))
}

fn attribute(ctx: &CudaContext, attr: sys::CUdevice_attribute, name: &str) -> Result<i32> {
    ctx.attribute(attr)
        .map_err(|e| cuda_error(&format!("reading device attribute {name}"), e))
}

fn non_negative(v: i32) -> u32 {
    u32::try_from(v).unwrap_or(0)
}

fn driver_version() -> Result<(i32, i32)> {
    let mut v: std::ffi::c_int = 0;
    // SAFETY: the driver library is present and initialised; `v` is valid for writes.
    unsafe { sys::cuDriverGetVersion(&mut v) }
        .result()
        .map_err(|e| cuda_error("cuDriverGetVersion", e))?;
    Ok((v / 1000, (v % 1000) / 10))
}

fn read_props(ctx: &CudaContext, nvrtc_version: (i32, i32)) -> Result<DeviceProps> {
    use sys::CUdevice_attribute as A;
    let name = ctx
        .name()
        .map_err(|e| cuda_error("reading the device name", e))?;
    let compute_capability = ctx
        .compute_capability()
        .map_err(|e| cuda_error("reading the compute capability", e))?;
    let total_memory = ctx
        .total_mem()
        .map_err(|e| cuda_error("reading the memory size", e))? as u64;
    Ok(DeviceProps {
        name,
        compute_capability,
        sms: non_negative(attribute(
            ctx,
            A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            "MULTIPROCESSOR_COUNT",
        )?)
        .max(1),
        l2_bytes: u64::from(non_negative(attribute(
            ctx,
            A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE,
            "L2_CACHE_SIZE",
        )?)),
        smem_per_block_optin: non_negative(attribute(
            ctx,
            A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
        )?),
        sm_limits: read_sm_limits(ctx)?,
        total_memory,
        driver_version: driver_version()?,
        nvrtc_version,
        dram_bytes_per_sm_cycle: dram_bytes_per_sm_cycle(ctx),
    })
}

/// The SM's limits, as the driver reports them.
fn read_sm_limits(ctx: &CudaContext) -> Result<SmLimits> {
    use sys::CUdevice_attribute as A;
    let get = |a, name| attribute(ctx, a, name).map(non_negative);
    Ok(SmLimits {
        max_threads: get(
            A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
            "MAX_THREADS_PER_MULTIPROCESSOR",
        )?,
        max_blocks: get(
            A::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR,
            "MAX_BLOCKS_PER_MULTIPROCESSOR",
        )?,
        regs: get(
            A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
            "MAX_REGISTERS_PER_MULTIPROCESSOR",
        )?,
        regs_per_block: get(
            A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK,
            "MAX_REGISTERS_PER_BLOCK",
        )?,
        smem: get(
            A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
            "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",
        )?,
        smem_reserved_per_block: get(
            A::CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK,
            "RESERVED_SHARED_MEMORY_PER_BLOCK",
        )?,
    })
}

/// See [`DeviceProps::dram_bytes_per_sm_cycle`]: from the memory clock (kHz, data rate twice
/// that), the bus width (bits), the SM clock (kHz) and the SM count, any of which a driver may
/// leave out (CUDA deprecates the clock attributes): `None` then.
fn dram_bytes_per_sm_cycle(ctx: &CudaContext) -> Option<f64> {
    use sys::CUdevice_attribute as A;
    let get = |a| ctx.attribute(a).ok().filter(|&v| v > 0).map(f64::from);
    let mem_khz = get(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?;
    let bus_bits = get(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?;
    let sm_khz = get(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?;
    let sms = get(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    Some(dram_bytes_per_cycle(mem_khz, bus_bits, sm_khz, sms))
}

/// 2 · memory clock · bus bytes over SMs · SM clock (clocks in the same unit).
fn dram_bytes_per_cycle(mem_clock: f64, bus_bits: f64, sm_clock: f64, sms: f64) -> f64 {
    2.0 * mem_clock * (bus_bits / 8.0) / (sms * sm_clock)
}

/// NVRTC compiles machine code only for the architectures it knows; a GPU newer than the NVRTC
/// found is reported here rather than at the first product.
fn check_arch_supported(props: &DeviceProps) -> Result<()> {
    let (major, minor) = props.compute_capability;
    let wanted = u32::try_from(major * 10 + minor).unwrap_or(0);
    let archs = nvrtc::supported_archs()?;
    if archs.contains(&wanted) {
        return Ok(());
    }
    let list: Vec<String> = archs.iter().map(|a| format!("sm_{a}")).collect();
    Err(unavailable(format!(
        "NVRTC {}.{} cannot compile for this GPU's {} (it knows {}): install a newer NVRTC",
        props.nvrtc_version.0,
        props.nvrtc_version.1,
        props.arch(),
        list.join(", ")
    )))
}

/// Bytes as "79.6 GiB", "50 MiB".
pub(crate) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_read_like_a_datasheet() {
        assert_eq!(human_bytes(50 << 20), "50 MiB");
        assert_eq!(human_bytes(227 << 10), "227 KiB");
        assert_eq!(human_bytes(85_520_809_984), "79.6 GiB");
        assert_eq!(human_bytes(0), "0 B");
    }

    #[test]
    fn arch_is_sm_major_minor() {
        let props = DeviceProps {
            name: "test".into(),
            compute_capability: (9, 0),
            sms: 132,
            l2_bytes: 50 << 20,
            smem_per_block_optin: 227 << 10,
            sm_limits: SmLimits {
                max_threads: 2048,
                max_blocks: 32,
                regs: 65536,
                regs_per_block: 65536,
                smem: 228 << 10,
                smem_reserved_per_block: 1024,
            },
            total_memory: 80 << 30,
            driver_version: (13, 0),
            nvrtc_version: (13, 0),
            dram_bytes_per_sm_cycle: None,
        };
        assert_eq!(props.arch(), "sm_90");
    }

    #[test]
    fn dram_bytes_per_sm_cycle_of_the_hopper_parts() {
        // H100 SXM: HBM3 at 2 619 MHz on 5 120 bits (3.35 TB/s); H200: HBM3e at 3 201 MHz on
        // 6 144 bits (4.92 TB/s); both 132 SMs at 1 980 MHz.
        let h100 = dram_bytes_per_cycle(2_619_000.0, 5120.0, 1_980_000.0, 132.0);
        let h200 = dram_bytes_per_cycle(3_201_000.0, 6144.0, 1_980_000.0, 132.0);
        assert!((h100 - 12.83).abs() < 0.01, "{h100}");
        assert!((h200 - 18.81).abs() < 0.01, "{h200}");
    }
}

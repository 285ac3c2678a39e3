//! The wgpu backend: the products as WGSL compute shaders (shaders/, see shaders/README.md)
//! on any adapter wgpu can open — Vulkan, Metal, DX12, GL — chosen at run time.
//!
//! - `adapter`: the instance, the choice of adapter and the device request.
//! - `gpu`: the device with error capture (no wgpu panic reaches the caller), waiting, buffers,
//!   staging uploads and downloads.
//! - `tuning`: the typed tuning (`WgpuTuning`): the plan choices a sweep or a test may force.
//! - `plan`: the pure planner: kernel, workgroup size, grid, x staging, layout of a matrix, from
//!   its shape and fill, the device's capabilities (`WgpuCaps`) and the tuning.
//! - `pipelines`: kernel sources, bind group layouts, pipelines compiled once on first use,
//!   each kernel specialized first (`specialize`).
//! - `memory`: matrices (planned at upload, split into row blocks), vectors, uploads.
//! - `launch`: the recording and queueing of products.
//! - `tiles`: x too wide for workgroup memory, cut into column tiles, and the table of where
//!   each row's entries cross from one tile into the next.
//! - `timing`: timestamp-query timing of products and the streaming-read ceiling.
//!
//! Two kernel paths: with subgroup operations where the adapter has `SUBGROUP` (and
//! `WgpuConfig::subgroups` is on), else workgroup memory only.

mod adapter;
mod gpu;
mod launch;
mod memory;
mod pipelines;
mod plan;
mod specialize;
mod tiles;
mod timing;
mod tuning;

use std::sync::{Arc, Mutex};

use half::f16;

use super::{
    downcast, downcast_mut, Backend, BackendKind, DeviceInfo, HostVector, MatrixRef, Precision,
    Storage,
};
use crate::error::Result;

use gpu::Gpu;
use launch::Pending;
use memory::{GpuMatrix, GpuVector};
use pipelines::Pipelines;

#[doc(hidden)]
pub use pipelines::{Kernel, KernelPath, XForm};
#[doc(hidden)]
pub use plan::{plan, Grid, MatrixStats, WgpuCaps, WgpuPlan, XStaging};
#[doc(hidden)]
pub use tiles::TilePlan;
#[doc(hidden)]
pub use tuning::{ForcedPlan, WgpuTuning};

/// What opening a wgpu device needs: the options that concern it and its tuning.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WgpuConfig {
    /// Accept a software adapter (lavapipe, llvmpipe, WARP).
    pub allow_software_adapter: bool,
    /// Use subgroup operations where the adapter has them.
    pub subgroups: bool,
    /// An artificial cap on the bytes of one buffer binding, below the adapter's own (tests
    /// split small matrices into row blocks with it).
    pub max_binding_bytes: Option<u64>,
    pub tuning: WgpuTuning,
}

impl Default for WgpuConfig {
    fn default() -> Self {
        Self {
            allow_software_adapter: false,
            subgroups: true,
            max_binding_bytes: None,
            tuning: WgpuTuning::default(),
        }
    }
}

/// Opens the wgpu device `config` asks for.
pub(crate) fn open(config: &WgpuConfig) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(WgpuBackend::open(config)?))
}

/// The plan of a matrix uploaded by the wgpu backend (`storage` from its `upload_matrix`).
#[doc(hidden)]
pub fn plan_of_storage(storage: &Storage) -> Result<WgpuPlan> {
    Ok(downcast::<GpuMatrix>(storage, BackendKind::Wgpu, "matrix")?
        .plan
        .clone())
}

/// The products on one wgpu device.
pub(crate) struct WgpuBackend {
    gpu: Gpu,
    pipelines: Pipelines,
    /// What the planner knows of the device.
    caps: WgpuCaps,
    tuning: WgpuTuning,
    /// Which kernels run the products, and why.
    path_reason: String,
    /// Bytes one matrix array may bind: the adapter's binding and buffer limits, or the
    /// artificial cap of the config if smaller. Larger matrices are split into row blocks.
    matrix_limit: u64,
    /// Bytes one vector may bind (the adapter's limits; vectors are not split).
    vector_limit: u64,
    /// The artificial cap, for `info`.
    binding_cap: Option<u64>,
    /// Bound as the f32 copy of y when y is f32 (which has none): 16 bytes never written.
    no_wide_copy: wgpu::Buffer,
    pending: Mutex<Pending>,
}

/// "2 GiB", "64 KiB", "1000 B".
fn bytes_text(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if v.fract() == 0.0 {
        format!("{v} {}", UNITS[unit])
    } else {
        format!("{v:.2} {} ({n} B)", UNITS[unit])
    }
}

/// The planner's view of an opened device.
fn caps_of(gpu: &Gpu) -> WgpuCaps {
    let (a, l) = (&gpu.adapter, &gpu.limits);
    WgpuCaps {
        subgroups: gpu.features.contains(wgpu::Features::SUBGROUP),
        subgroup_min: a.subgroup_min_size.max(1),
        subgroup_max: a.subgroup_max_size.max(1),
        has_f16: gpu.features.contains(wgpu::Features::SHADER_F16),
        workgroup_storage: l.max_compute_workgroup_storage_size,
        max_invocations: l
            .max_compute_invocations_per_workgroup
            .min(l.max_compute_workgroup_size_x),
        max_workgroups_per_dim: l.max_compute_workgroups_per_dimension,
    }
}

impl WgpuBackend {
    fn open(config: &WgpuConfig) -> Result<Self> {
        let gpu = Gpu::new(adapter::open_device(config)?);
        let pipelines = Pipelines::new(&gpu)?;
        // Subgroups are not requested where the config turns them off (adapter.rs).
        let caps = caps_of(&gpu);
        let path_reason = if !config.subgroups {
            "workgroup memory (subgroups turned off: option or MACKO_WGPU_SUBGROUPS=0)".to_string()
        } else if caps.subgroups {
            "subgroup operations".to_string()
        } else {
            "workgroup memory (the adapter lacks SUBGROUP)".to_string()
        };
        let adapter_limit = gpu
            .limits
            .max_storage_buffer_binding_size
            .min(gpu.limits.max_buffer_size);
        let cap = config.max_binding_bytes.unwrap_or(u64::MAX);
        let no_wide_copy = gpu.create_buffer(
            16,
            wgpu::BufferUsages::STORAGE,
            "placeholder for the f32 copy of an f32 y",
        )?;
        Ok(Self {
            caps,
            tuning: config.tuning.clone(),
            no_wide_copy,
            matrix_limit: adapter_limit.min(cap) / 16 * 16,
            vector_limit: adapter_limit / 16 * 16,
            binding_cap: config.max_binding_bytes,
            gpu,
            pipelines,
            path_reason,
            pending: Mutex::new(Pending::default()),
        })
    }

    /// The plan of a matrix this backend uploaded (`Device::plan` calls it once the storage
    /// is an enum; until then `Device::wgpu_plan` reads the plan from the storage alone).
    #[allow(dead_code)]
    pub(crate) fn plan_of(&self, a: &Storage) -> Result<WgpuPlan> {
        plan_of_storage(a)
    }

    fn properties(&self) -> Vec<(String, String)> {
        let a = &self.gpu.adapter;
        let l = &self.gpu.limits;
        let mut p = vec![
            ("API".to_string(), format!("{:?}", a.backend)),
            ("device type".to_string(), format!("{:?}", a.device_type)),
            (
                "driver".to_string(),
                format!("{} {}", a.driver, a.driver_info).trim().to_string(),
            ),
            (
                "vendor:device".to_string(),
                format!("{:04x}:{:04x}", a.vendor, a.device),
            ),
            (
                "subgroup size".to_string(),
                if a.subgroup_min_size == a.subgroup_max_size {
                    a.subgroup_min_size.to_string()
                } else {
                    format!("{}–{}", a.subgroup_min_size, a.subgroup_max_size)
                },
            ),
            (
                "max_storage_buffer_binding_size".to_string(),
                bytes_text(l.max_storage_buffer_binding_size),
            ),
            ("max_buffer_size".to_string(), bytes_text(l.max_buffer_size)),
            (
                "workgroup memory".to_string(),
                bytes_text(l.max_compute_workgroup_storage_size as u64),
            ),
        ];
        if let Some(cap) = self.binding_cap {
            p.push((
                "binding cap (option)".to_string(),
                format!("{} (matrices split into row blocks)", bytes_text(cap)),
            ));
        }
        let features: Vec<String> = self
            .gpu
            .features
            .iter_names()
            .map(|(name, _)| name.to_string())
            .collect();
        p.push((
            "features".to_string(),
            if features.is_empty() {
                "none".to_string()
            } else {
                features.join(", ")
            },
        ));
        let mut kernels = self.path_reason.clone();
        let tuning = self.tuning.describe();
        if !tuning.is_empty() {
            kernels += &format!("; tuning {}", tuning.join(" "));
        }
        p.push(("kernels".to_string(), kernels));
        p.push(("timer".to_string(), self.timer().to_string()));
        p
    }
}

impl Backend for WgpuBackend {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            backend: BackendKind::Wgpu,
            name: self.gpu.adapter.name.clone(),
            properties: self.properties(),
        }
    }

    fn upload_matrix(&self, m: MatrixRef<'_>) -> Result<Storage> {
        Ok(Box::new(self.upload_matrix_impl(m)?))
    }

    fn upload_vector(&self, x: &[f16]) -> Result<Storage> {
        Ok(Box::new(self.upload_vector_impl(x)?))
    }

    fn alloc_vector(&self, len: usize, precision: Precision) -> Result<Storage> {
        Ok(Box::new(self.alloc_vector_impl(len, precision)?))
    }

    fn spmv(&self, a: &Storage, x: &Storage, y: &mut Storage) -> Result<()> {
        let a = downcast::<GpuMatrix>(a, BackendKind::Wgpu, "matrix")?;
        let x = downcast::<GpuVector>(x, BackendKind::Wgpu, "x")?;
        let y = downcast_mut::<GpuVector>(y, BackendKind::Wgpu, "y")?;
        self.spmv_impl(a, x, y)
    }

    fn synchronize(&self) -> Result<()> {
        self.synchronize_impl()
    }

    fn download(&self, v: &Storage) -> Result<HostVector> {
        self.download_impl(downcast::<GpuVector>(v, BackendKind::Wgpu, "vector")?)
    }

    fn timer(&self) -> &'static str {
        if self.has_timestamps() {
            "wgpu timestamp queries"
        } else {
            "wall clock (the adapter lacks TIMESTAMP_QUERY)"
        }
    }

    fn time_spmv(
        &self,
        a: &[&Storage],
        x: &Storage,
        y: &mut Storage,
        warmup: usize,
        iters: usize,
    ) -> Result<Vec<f64>> {
        let a = a
            .iter()
            .map(|m| downcast::<GpuMatrix>(m, BackendKind::Wgpu, "matrix"))
            .collect::<Result<Vec<_>>>()?;
        let x = downcast::<GpuVector>(x, BackendKind::Wgpu, "x")?;
        let y = downcast_mut::<GpuVector>(y, BackendKind::Wgpu, "y")?;
        self.time_products(&a, x, y, warmup, iters)
    }

    fn stream_read(&self, bytes: u64, warmup: usize, iters: usize) -> Result<Option<Vec<f64>>> {
        self.stream_read_impl(bytes, warmup, iters).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The backend on lavapipe or any adapter, or `None` (printed) where wgpu has none.
    fn backend() -> Option<WgpuBackend> {
        let config = WgpuConfig {
            allow_software_adapter: true,
            ..WgpuConfig::default()
        };
        match WgpuBackend::open(&config) {
            Ok(b) => Some(b),
            Err(e) => {
                println!("skipping: {e}");
                None
            }
        }
    }

    #[test]
    fn a_lost_device_turns_every_later_call_into_an_error() {
        let Some(b) = backend() else { return };
        let x = b.upload_vector(&[f16::ONE; 8]).unwrap();
        b.gpu.device.destroy();
        let after: [(&str, Result<()>); 4] = [
            ("synchronize", b.synchronize()),
            ("download", b.download(&x).map(|_| ())),
            ("upload", b.upload_vector(&[f16::ONE; 8]).map(|_| ())),
            ("alloc", b.alloc_vector(8, Precision::F32).map(|_| ())),
        ];
        for (what, r) in after {
            match r {
                Err(e) => println!("{what}: {e}"),
                Ok(()) => panic!("{what} succeeded on a destroyed device"),
            }
        }
    }
}

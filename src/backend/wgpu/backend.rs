//! The state of one wgpu device: the opened device, its pipelines, what the planner knows of
//! it, the tuning, the binding limits and the products waiting to be submitted.

use std::sync::Mutex;

use crate::error::Result;

use super::adapter;
use super::config::WgpuConfig;
use super::gpu::{Gpu, Pending};
use super::pipelines::Pipelines;
use super::plan::WgpuCaps;
use super::tuning::WgpuTuning;

/// The products on one wgpu device.
pub(crate) struct WgpuBackend {
    pub(super) gpu: Gpu,
    pub(super) pipelines: Pipelines,
    /// What the planner knows of the device.
    pub(super) caps: WgpuCaps,
    pub(super) tuning: WgpuTuning,
    /// Which kernels run the products, and why.
    pub(super) path_reason: String,
    /// Bytes one matrix array may bind: the adapter's binding and buffer limits, or the
    /// artificial cap of the config if smaller. Larger matrices are split into row blocks.
    pub(super) matrix_limit: u64,
    /// Bytes one vector may bind (the adapter's limits; vectors are not split).
    pub(super) vector_limit: u64,
    /// The artificial cap, for `info`.
    pub(super) binding_cap: Option<u64>,
    /// Bound as the f32 copy of y when y is f32 (which has none): 16 bytes never written.
    pub(super) no_wide_copy: wgpu::Buffer,
    /// The transposed products' partial sums (transposed.rs), grown to the largest product
    /// queued so far; a queued product keeps the buffer it was recorded with alive.
    pub(super) transposed_partials: Mutex<Option<Partials>>,
    pub(super) pending: Mutex<Pending>,
}

/// A partial sums buffer of the transposed products and its bind group (group 3).
pub(super) struct Partials {
    pub bytes: u64,
    pub group: wgpu::BindGroup,
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
    pub(super) fn open(config: &WgpuConfig) -> Result<Self> {
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
            transposed_partials: Mutex::new(None),
            pending: Mutex::new(Pending::default()),
        })
    }
}

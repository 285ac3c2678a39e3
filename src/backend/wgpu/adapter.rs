//! Finding an adapter and opening a device on it: a headless instance over every API wgpu
//! was built with, the best adapter by kind (discrete > integrated > virtual > other > CPU, and
//! Vulkan/Metal/DX12 before GL for the same kind), a software adapter only where the options
//! allow it, the adapter's own limits and only the optional features it has.

use crate::backend::BackendKind;
use crate::error::{Error, Result};

use super::config::WgpuConfig;

/// Optional features macko uses where the adapter has them: subgroup operations for the fast
/// kernels, timestamp queries for the device timer, f16 shader arithmetic (not needed by the
/// kernels, which unpack f16 themselves, but reported and requested for completeness).
const WANTED_FEATURES: wgpu::Features = wgpu::Features::SUBGROUP
    .union(wgpu::Features::SHADER_F16)
    .union(wgpu::Features::TIMESTAMP_QUERY);

/// Downlevel capabilities every kernel needs: compute shaders, and `unpack2x16float` /
/// `pack2x16float` (binary16 stored in u32 pairs).
const REQUIRED_DOWNLEVEL: wgpu::DownlevelFlags =
    wgpu::DownlevelFlags::COMPUTE_SHADERS.union(wgpu::DownlevelFlags::SHADER_F16_IN_F32);

/// A device opened on the chosen adapter.
pub(super) struct Opened {
    pub adapter: wgpu::AdapterInfo,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub limits: wgpu::Limits,
    pub features: wgpu::Features,
}

fn unavailable(reason: String) -> Error {
    Error::Unavailable {
        backend: BackendKind::Wgpu,
        reason,
    }
}

/// A headless instance over `backends` (`WGPU_BACKEND` overrides them, and `WGPU_*` debugging
/// flags apply; validation layers stay off unless asked for, since they slow every call and
/// need not be installed).
fn instance(backends: wgpu::Backends) -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backends.with_env();
    desc.flags = wgpu::InstanceFlags::empty().with_env();
    wgpu::Instance::new(desc)
}

/// The adapters of some APIs.
fn enumerate(backends: wgpu::Backends) -> Vec<wgpu::Adapter> {
    pollster::block_on(instance(backends).enumerate_adapters(wgpu::Backends::all()))
}

/// Lower is better: the kind of device first, then the API (GL lacks subgroups and is slower).
fn rank(info: &wgpu::AdapterInfo) -> (u8, u8) {
    let kind = match info.device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    };
    let api = match info.backend {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 0,
        _ => 1,
    };
    (kind, api)
}

/// "llvmpipe (LLVM 15.0.6, 256 bits) (vulkan)".
fn describe(info: &wgpu::AdapterInfo) -> String {
    format!("{} ({})", info.name, info.backend)
}

/// The best usable adapter: of Vulkan, Metal or DX12 if one is usable, else of GL (which lacks
/// subgroups, and whose headless probing wakes up display libraries for nothing). When none is
/// usable, the reasons found among the first APIs' adapters.
fn choose_adapter(config: &WgpuConfig) -> Result<wgpu::Adapter> {
    let primary = pick(enumerate(wgpu::Backends::PRIMARY), config);
    match primary {
        Ok(adapter) => Ok(adapter),
        Err(first) => pick(enumerate(wgpu::Backends::SECONDARY), config).map_err(|second| {
            match (&first, &second) {
                (Choice::NoAdapter, _) => second.into_error(),
                _ => first.into_error(),
            }
        }),
    }
}

/// Why no adapter of a set was chosen.
enum Choice {
    NoAdapter,
    Unusable(String),
}

impl Choice {
    fn into_error(self) -> Error {
        unavailable(match self {
            Choice::NoAdapter => {
                "no wgpu adapter found (no Vulkan, Metal, DX12 or GL driver answered)".into()
            }
            Choice::Unusable(reason) => reason,
        })
    }
}

/// The best usable adapter of `adapters`, by [`rank`].
fn pick(
    adapters: Vec<wgpu::Adapter>,
    config: &WgpuConfig,
) -> std::result::Result<wgpu::Adapter, Choice> {
    if adapters.is_empty() {
        return Err(Choice::NoAdapter);
    }
    let mut software_skipped = Vec::new();
    let mut incapable = Vec::new();
    let mut usable: Vec<(wgpu::Adapter, wgpu::AdapterInfo)> = Vec::new();
    for adapter in adapters {
        let info = adapter.get_info();
        let missing = REQUIRED_DOWNLEVEL - adapter.get_downlevel_capabilities().flags;
        if !missing.is_empty() {
            incapable.push(format!("{} lacks {missing:?}", describe(&info)));
        } else if info.device_type == wgpu::DeviceType::Cpu && !config.allow_software_adapter {
            software_skipped.push(describe(&info));
        } else {
            usable.push((adapter, info));
        }
    }
    usable.sort_by_key(|(_, info)| rank(info));
    if let Some((adapter, _)) = usable.into_iter().next() {
        return Ok(adapter);
    }
    let mut reasons = Vec::new();
    if !software_skipped.is_empty() {
        reasons.push(format!(
            "only a software adapter was found ({}); software adapters are used only when wgpu \
             is asked for by name (MACKO_BACKEND=wgpu, or DeviceOptions::allow_software_adapter)",
            software_skipped.join(", ")
        ));
    }
    if !incapable.is_empty() {
        reasons.push(format!(
            "adapters without what the kernels need: {}",
            incapable.join("; ")
        ));
    }
    Err(Choice::Unusable(reasons.join("; ")))
}

/// Opens the device `config` asks for on the best adapter. Subgroups are not even requested
/// when `config.subgroups` is off, so the workgroup kernels run exactly as on an adapter without
/// them.
pub(super) fn open_device(config: &WgpuConfig) -> Result<Opened> {
    let adapter = choose_adapter(config)?;
    let info = adapter.get_info();
    let mut wanted = WANTED_FEATURES;
    if !config.subgroups {
        wanted.remove(wgpu::Features::SUBGROUP);
    }
    let features = adapter.features() & wanted;
    let limits = adapter.limits();
    let desc = wgpu::DeviceDescriptor {
        label: Some("macko"),
        required_features: features,
        required_limits: limits.clone(),
        ..Default::default()
    };
    let (device, queue) = pollster::block_on(adapter.request_device(&desc)).map_err(|e| {
        unavailable(format!(
            "{} refused a device with features {features:?} and its own limits: {e}",
            describe(&info)
        ))
    })?;
    Ok(Opened {
        adapter: info,
        device,
        queue,
        limits,
        features,
    })
}

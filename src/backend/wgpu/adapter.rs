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

/// The adapters of some APIs (`WGPU_BACKEND` narrows them). Where Vulkan has window-system
/// extensions that probe a display server, its instance is made without them ([`headless`]).
fn enumerate(backends: wgpu::Backends) -> Vec<wgpu::Adapter> {
    #[allow(unused_mut)] // only the platforms with display-server probing take Vulkan out
    let mut backends = backends.with_env();
    let mut adapters = Vec::new();
    #[cfg(any(target_os = "linux", target_os = "freebsd"))]
    if backends.contains(wgpu::Backends::VULKAN) {
        backends.remove(wgpu::Backends::VULKAN);
        if let Some(vulkan) = headless::vulkan_instance() {
            adapters.extend(pollster::block_on(
                vulkan.enumerate_adapters(wgpu::Backends::VULKAN),
            ));
        }
    }
    if !backends.is_empty() {
        adapters.extend(pollster::block_on(
            instance(backends).enumerate_adapters(wgpu::Backends::all()),
        ));
    }
    adapters
}

/// A Vulkan instance without window-system extensions, on the platforms where they make
/// instance creation talk to a display server.
///
/// wgpu enables every surface extension the loader offers. With `VK_KHR_wayland_surface`
/// enabled, Mesa's implicit `VK_LAYER_MESA_device_select` layer (installed with every Mesa
/// Vulkan driver, lavapipe included) connects to a Wayland compositor while the physical
/// devices are enumerated, to find the default GPU, and libwayland prints `error:
/// XDG_RUNTIME_DIR is invalid or not set in the environment.` on any machine without a
/// session (a server, a container, CI) — once per device opened. macko only computes, never
/// presents, so it needs none of them. Measured on lavapipe (Mesa 22.3): an instance with
/// `VK_KHR_wayland_surface` prints the line at enumeration, one with only the X11 extensions or
/// none does not; the device-selection layer still runs and still orders the GPUs.
#[cfg(any(target_os = "linux", target_os = "freebsd"))]
mod headless {
    use std::ffi::CStr;
    use wgpu::hal::vulkan::CreateInstanceCallbackArgs;

    /// Surface extensions of the window systems on these platforms.
    const WINDOW_SYSTEM_EXTENSIONS: [&CStr; 3] = [
        c"VK_KHR_wayland_surface",
        c"VK_KHR_xcb_surface",
        c"VK_KHR_xlib_surface",
    ];

    /// The process's one instance, or `None` where Vulkan cannot be loaded (no loader or
    /// driver: the machine has no Vulkan adapter to offer, as wgpu's own instance would
    /// find).
    ///
    /// Made once and never destroyed. With an instance per device, tests opening and dropping
    /// devices on parallel threads died on an H100 (2026-11-27, 2 of 4 runs of
    /// tests/sparse_inputs.rs; each test passed alone) with SIGSEGV on an instruction fetch
    /// from an unmapped page: code of a library the loader had unloaded when another thread's
    /// instance went. One instance keeps the driver loaded for the process's life.
    pub(super) fn vulkan_instance() -> Option<wgpu::Instance> {
        static SHARED: std::sync::OnceLock<Option<wgpu::Instance>> = std::sync::OnceLock::new();
        SHARED.get_or_init(new_vulkan_instance).clone()
    }

    /// A new instance without the window-system extensions.
    fn new_vulkan_instance() -> Option<wgpu::Instance> {
        let flags = wgpu::InstanceFlags::empty().with_env();
        let desc = wgpu::InstanceDescriptor::new_without_display_handle();
        let hal_desc = wgpu::hal::InstanceDescriptor {
            name: "macko",
            flags,
            memory_budget_thresholds: desc.memory_budget_thresholds,
            backend_options: desc.backend_options.with_env(),
            telemetry: None,
            display: None,
        };
        let without_window_systems = Box::new(|args: CreateInstanceCallbackArgs| {
            args.extensions
                .retain(|name| !WINDOW_SYSTEM_EXTENSIONS.contains(name));
        });
        // SAFETY: the descriptor is fully initialised, and the callback only removes surface
        // extensions, which nothing in macko uses (it creates no surface: wgpu-hal refuses to
        // make one whose extension was not enabled, rather than using it).
        let hal = unsafe {
            wgpu::hal::vulkan::Instance::init_with_callback(&hal_desc, Some(without_window_systems))
        };
        match hal {
            // SAFETY: `hal` is a live Vulkan instance made just above, handed over whole.
            Ok(hal) => Some(unsafe { wgpu::Instance::from_hal::<wgpu::hal::api::Vulkan>(hal) }),
            Err(_) => None,
        }
    }
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

/// The graphics API an adapter runs on, as users know it: "Vulkan", "Metal", "DX12", "GL".
pub(super) fn api_name(backend: wgpu::Backend) -> &'static str {
    match backend {
        wgpu::Backend::Vulkan => "Vulkan",
        wgpu::Backend::Metal => "Metal",
        wgpu::Backend::Dx12 => "DX12",
        wgpu::Backend::Gl => "GL",
        wgpu::Backend::BrowserWebGpu => "WebGPU",
        wgpu::Backend::Noop => "no API",
    }
}

/// The adapter and the API it runs on: "llvmpipe (LLVM 15.0.6, 256 bits) via Vulkan". The same
/// software rasterizer runs 2.6× slower through GL than through Vulkan, so a label without
/// the API does not say what was measured.
pub(super) fn describe(info: &wgpu::AdapterInfo) -> String {
    format!("{} via {}", info.name, api_name(info.backend))
}

/// Whether wgpu was asked for GL alone (`WGPU_BACKEND=gl`): the one way to ask for a GL
/// software adapter by name.
fn gl_asked_for() -> bool {
    wgpu::Backends::from_env() == Some(wgpu::Backends::GL)
}

/// What [`pick`] makes of one adapter.
#[derive(Debug, PartialEq)]
enum Verdict {
    Usable,
    /// It lacks downlevel capabilities the kernels need (named).
    Incapable(String),
    /// A software adapter, and software adapters were not allowed.
    SoftwareSkipped,
    /// A software rasterizer behind GL (Mesa's llvmpipe), which is not used unless GL is asked
    /// for by name, even where software adapters are allowed: it is what wgpu finds on a Linux
    /// machine without a Vulkan driver, and it would run every product 2.6× slower than
    /// lavapipe, Mesa's Vulkan driver of the same rasterizer, without saying so.
    GlSoftwareSkipped,
}

fn verdict(
    info: &wgpu::AdapterInfo,
    missing: wgpu::DownlevelFlags,
    config: &WgpuConfig,
    gl_asked: bool,
) -> Verdict {
    let software = info.device_type == wgpu::DeviceType::Cpu;
    if !missing.is_empty() {
        Verdict::Incapable(format!("{} lacks {missing:?}", describe(info)))
    } else if software && !config.allow_software_adapter {
        Verdict::SoftwareSkipped
    } else if software && info.backend == wgpu::Backend::Gl && !gl_asked {
        Verdict::GlSoftwareSkipped
    } else {
        Verdict::Usable
    }
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
    let gl_asked = gl_asked_for();
    let mut software_skipped = Vec::new();
    let mut gl_software_skipped = Vec::new();
    let mut incapable = Vec::new();
    let mut usable: Vec<(wgpu::Adapter, wgpu::AdapterInfo)> = Vec::new();
    for adapter in adapters {
        let info = adapter.get_info();
        let missing = REQUIRED_DOWNLEVEL - adapter.get_downlevel_capabilities().flags;
        match verdict(&info, missing, config, gl_asked) {
            Verdict::Usable if info.backend == wgpu::Backend::Gl => {
                match compiles_a_storage_kernel(&adapter) {
                    Ok(()) => usable.push((adapter, info)),
                    Err(why) => incapable.push(format!("{}: {why}", describe(&info))),
                }
            }
            Verdict::Usable => usable.push((adapter, info)),
            Verdict::Incapable(why) => incapable.push(why),
            Verdict::SoftwareSkipped => software_skipped.push(describe(&info)),
            Verdict::GlSoftwareSkipped => gl_software_skipped.push(describe(&info)),
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
    if !gl_software_skipped.is_empty() {
        reasons.push(format!(
            "only a GL software rasterizer was found ({}), 2.6× slower than the same rasterizer \
             through Vulkan; install a Vulkan driver (without a GPU, Mesa's lavapipe: \
             `apt-get install mesa-vulkan-drivers`), or ask for GL by name (WGPU_BACKEND=gl)",
            gl_software_skipped.join(", ")
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

/// The smallest kernel with what every macko kernel uses: a compute entry point over a
/// runtime-sized read-write storage array.
const PROBE_WGSL: &str = "@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&data) { data[id.x] = data[id.x] + 1u; }
}";

/// Whether a GL adapter really compiles compute kernels over storage buffers. A GL adapter can
/// report `COMPUTE_SHADERS` and still translate kernels for a GLSL version without them: on an
/// H100 machine with its Vulkan driver hidden (2026-11-27), wgpu's hardware GL adapter refused
/// every pipeline ("The selected version doesn't support BUFFER_STORAGE | COMPUTE_SHADER |
/// DYNAMIC_ARRAY_SIZE"). Such an adapter is refused here, with that reason, instead of being
/// chosen and failing at the first product. Vulkan, Metal and DX12 adapters are not probed.
fn compiles_a_storage_kernel(adapter: &wgpu::Adapter) -> std::result::Result<(), String> {
    compiles(adapter, PROBE_WGSL)
}

/// Whether `adapter` compiles the compute kernel `wgsl` (entry point `main`) into a pipeline.
fn compiles(adapter: &wgpu::Adapter, wgsl: &str) -> std::result::Result<(), String> {
    let desc = wgpu::DeviceDescriptor {
        label: Some("macko GL probe"),
        required_limits: adapter.limits(),
        ..Default::default()
    };
    let (device, _queue) = pollster::block_on(adapter.request_device(&desc))
        .map_err(|e| format!("refused a device: {e}"))?;
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let internal = device.push_error_scope(wgpu::ErrorFilter::Internal);
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("macko GL probe"),
        source: wgpu::ShaderSource::Wgsl(wgsl.into()),
    });
    let _pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("macko GL probe"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let internal = pollster::block_on(internal.pop());
    let validation = pollster::block_on(validation.pop());
    match validation.or(internal) {
        None => Ok(()),
        Some(e) => Err(format!(
            "cannot compile a compute kernel over storage buffers ({e})"
        )),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn info(backend: wgpu::Backend, device_type: wgpu::DeviceType) -> wgpu::AdapterInfo {
        wgpu::AdapterInfo {
            name: "llvmpipe (LLVM 15.0.6, 256 bits)".into(),
            vendor: 0x10005,
            device: 0,
            device_type,
            device_pci_bus_id: String::new(),
            driver: "llvmpipe".into(),
            driver_info: "Mesa 22.3.6".into(),
            backend,
            subgroup_min_size: 8,
            subgroup_max_size: 8,
            transient_saves_memory: None,
            limit_bucket: None,
        }
    }

    fn software_allowed() -> WgpuConfig {
        WgpuConfig {
            allow_software_adapter: true,
            ..WgpuConfig::default()
        }
    }

    /// The probe accepts a kernel the adapter compiles and refuses one it cannot, on the first
    /// adapter of this machine (lavapipe in CI; skipped where there is none).
    #[test]
    fn the_gl_probe_tells_a_compiling_adapter_from_a_failing_kernel() {
        let Some(adapter) = enumerate(wgpu::Backends::all()).into_iter().next() else {
            println!("skipped: no wgpu adapter here");
            return;
        };
        assert_eq!(compiles_a_storage_kernel(&adapter), Ok(()));
        // Writing through a read-only binding fails validation, as an unsupported GLSL
        // version fails translation: both reach the probe's error scopes.
        let broken = PROBE_WGSL.replace("read_write", "read");
        let refusal = compiles(&adapter, &broken);
        assert!(
            matches!(&refusal, Err(why) if why.contains("cannot compile")),
            "{refusal:?}"
        );
    }

    #[test]
    fn labels_name_the_api() {
        let gl = info(wgpu::Backend::Gl, wgpu::DeviceType::Cpu);
        assert_eq!(describe(&gl), "llvmpipe (LLVM 15.0.6, 256 bits) via GL");
        let vk = info(wgpu::Backend::Vulkan, wgpu::DeviceType::Cpu);
        assert_eq!(describe(&vk), "llvmpipe (LLVM 15.0.6, 256 bits) via Vulkan");
        assert_eq!(api_name(wgpu::Backend::Dx12), "DX12");
        assert_eq!(api_name(wgpu::Backend::Metal), "Metal");
    }

    #[test]
    fn a_gl_software_rasterizer_is_used_only_when_gl_is_asked_for() {
        let none = wgpu::DownlevelFlags::empty();
        let gl = info(wgpu::Backend::Gl, wgpu::DeviceType::Cpu);
        let allowed = software_allowed();
        assert_eq!(
            verdict(&gl, none, &allowed, false),
            Verdict::GlSoftwareSkipped
        );
        assert_eq!(verdict(&gl, none, &allowed, true), Verdict::Usable);
        // Software adapters not allowed at all: skipped as any software adapter.
        let strict = WgpuConfig::default();
        assert_eq!(verdict(&gl, none, &strict, true), Verdict::SoftwareSkipped);
        // lavapipe (Vulkan) where software adapters are allowed, and a GL hardware adapter.
        let lavapipe = info(wgpu::Backend::Vulkan, wgpu::DeviceType::Cpu);
        assert_eq!(verdict(&lavapipe, none, &allowed, false), Verdict::Usable);
        let gl_gpu = info(wgpu::Backend::Gl, wgpu::DeviceType::IntegratedGpu);
        assert_eq!(verdict(&gl_gpu, none, &strict, false), Verdict::Usable);
    }

    #[test]
    fn missing_capabilities_are_named_first() {
        let gl = info(wgpu::Backend::Gl, wgpu::DeviceType::Cpu);
        let missing = wgpu::DownlevelFlags::COMPUTE_SHADERS;
        match verdict(&gl, missing, &software_allowed(), true) {
            Verdict::Incapable(why) => assert!(why.contains("COMPUTE_SHADERS"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}

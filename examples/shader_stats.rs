//! What the Vulkan driver made of our WGSL kernels: registers per invocation and the other
//! statistics the driver reports through `VK_KHR_pipeline_executable_properties` (NVIDIA reports
//! the register count, which decides how many subgroups a compute unit holds), for each pipeline
//! constant setting the wgpu backend uses.
//!
//! wgpu cannot ask for these statistics, so this example compiles the kernels itself the way
//! wgpu 30 does on Vulkan: the WGSL of shaders/ composed like src/backend/wgpu/pipelines.rs
//! (common.wgsl, the family prelude, the kernel), pipeline constants resolved by naga and, as
//! as the backend does, the branches they rule out removed (src/backend/wgpu/specialize.rs,
//! compiled in here), SPIR-V written by naga with wgpu's
//! options (index clamping, no buffer checks under
//! `robustBufferAccess2`, loops bounded and integer divisions checked unless told otherwise),
//! then a compute pipeline created with `CAPTURE_STATISTICS` on the first Vulkan device that has
//! the extension. The shaders are read from disk at run time, so edited copies can be compared
//! without rebuilding (`--shaders DIR`).
//!
//! ```sh
//! cargo run --release --example shader_stats                         # the built-in settings
//! cargo run --release --example shader_stats -- --checks trusted \
//!     'macko_sg:X_SHARED=1,X_WORDS=6144,WORKGROUP=512'                # one setting, loops unbounded
//! ```
//!
//! A setting is `KERNEL[:NAME=VALUE,...]`; KERNEL is a file stem of shaders/ (`macko_sg`,
//! `dense_sg`, ...). `--checks` is `wgpu` (the default: what `create_shader_module` gives),
//! `trusted` (loops not bounded, divisions unchecked, indices still clamped: what the backend
//! builds the MACKO subgroup kernel with) or `both`. A
//! setting with `BOUNDED_GATHERS=1` drops the index clamps, as the backend does (which never
//! combines it with bounded loops).

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::path::{Path, PathBuf};

use ash::vk;
use wgpu::naga;

type Error = Box<dyn std::error::Error>;

/// Which of naga's runtime checks the SPIR-V carries.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Checks {
    /// `Device::create_shader_module`: loops bounded, integer divisions checked.
    Wgpu,
    /// `create_shader_module_trusted` with only `force_loop_bounding` and `int_div_checks` off.
    Trusted,
}

/// One kernel with its pipeline constants.
struct Setting {
    kernel: String,
    constants: BTreeMap<String, f64>,
}

impl Setting {
    fn parse(spec: &str) -> Result<Self, Error> {
        let (kernel, rest) = spec.split_once(':').unwrap_or((spec, ""));
        let mut constants = BTreeMap::new();
        for kv in rest.split(',').filter(|s| !s.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("{spec:?}: {kv:?} is not NAME=VALUE"))?;
            let v: f64 = v
                .parse()
                .map_err(|e| format!("{spec:?}: value of {k}: {e}"))?;
            constants.insert(k.to_string(), v);
        }
        Ok(Self {
            kernel: kernel.to_string(),
            constants,
        })
    }

    fn label(&self) -> String {
        let c: Vec<String> = self
            .constants
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("{} {}", self.kernel, c.join(","))
    }
}

/// The pipelines the backend's default plans build (src/backend/wgpu/plan.rs): the MACKO
/// subgroup kernel with x staged whole as f16 scalars (12288 columns in 6272 words; padded for
/// nearly dense rows; two rows per subgroup for sparse ones), in column tiles, as f16 pairs
/// (adapters without SHADER_F16) and from memory, value masks from the table or built, in its
/// two workgroup sizes; and the other kernels.
fn default_settings() -> Vec<String> {
    let mut v = Vec::new();
    for wg in [256, 512] {
        let base = format!("macko_sg:Y_F16=0,WORKGROUP={wg},ALIGNED_ROWS=1");
        for (x, extra) in [
            (
                "X_SHARED=1,X_HALVES=12544,X_PAD=0,BOUNDED_GATHERS=1",
                "MASK_TABLE=1,HALF_ROWS=0",
            ),
            (
                "X_SHARED=1,X_HALVES=12544,X_PAD=0,BOUNDED_GATHERS=1",
                "MASK_TABLE=1,HALF_ROWS=1",
            ),
            (
                "X_SHARED=1,X_HALVES=13312,X_PAD=1,BOUNDED_GATHERS=1",
                "MASK_TABLE=0,HALF_ROWS=0",
            ),
            (
                "X_SHARED=1,X_HALVES=15360,X_PAD=0,BOUNDED_GATHERS=1,X_TILED=1",
                "MASK_TABLE=1,HALF_ROWS=0",
            ),
            ("X_SHARED=1,X_WORDS=6144", "MASK_TABLE=1,HALF_ROWS=0"),
            ("X_SHARED=0", "MASK_TABLE=1,HALF_ROWS=0"),
        ] {
            v.push(format!("{base},{x},{extra}"));
        }
    }
    v.push("macko_wg:Y_F16=0,X_SHARED=0".into());
    v.push("dense_sg:Y_F16=0".into());
    v.push("csr_sg:Y_F16=0".into());
    v.push("stream".into());
    v
}

/// The WGSL of `kernel` as the backend composes it: common.wgsl, the family's preludes (for
/// MACKO, macko.wgsl and an x layout: f16 scalars after `enable f16;` where `x_f16`, else
/// 32-bit words), the kernel.
fn source(dir: &Path, kernel: &str, x_f16: bool) -> Result<String, Error> {
    let read = |name: &str| -> Result<String, Error> {
        std::fs::read_to_string(dir.join(name)).map_err(|e| format!("{name}: {e}").into())
    };
    let mut s = read("common.wgsl")?;
    if x_f16 {
        s = format!("enable f16;\n{s}");
    }
    if let Some((family, _)) = kernel.split_once('_') {
        let layout = if x_f16 { "x_f16" } else { "x_words" };
        for prelude in [format!("{family}.wgsl"), format!("{family}_{layout}.wgsl")] {
            if dir.join(&prelude).exists() {
                s = format!("{s}\n{}", read(&prelude)?);
            }
        }
    }
    Ok(format!("{s}\n{}", read(&format!("{kernel}.wgsl"))?))
}

/// The backend's specialization of a kernel to its constants, compiled into this example from
/// the library's own file (it is not public API).
#[path = "../src/backend/wgpu/specialize.rs"]
mod specialize;

/// SPIR-V of a setting, with the options wgpu-hal 30 uses on Vulkan 1.3 (see its adapter.rs).
fn spirv(dir: &Path, setting: &Setting, checks: Checks) -> Result<(Vec<u32>, Layout), Error> {
    use naga::back::spv;
    use naga::valid::{Capabilities, ValidationFlags, Validator};
    // X_HALVES is the f16 layout's constant (macko_x_f16.wgsl).
    let src = source(
        dir,
        &setting.kernel,
        setting.constants.contains_key("X_HALVES"),
    )?;
    // Parsed and validated here first for errors that point into the source.
    let module = naga::front::wgsl::parse_str(&src)
        .map_err(|e| format!("{}: {}", setting.kernel, e.emit_to_string(&src)))?;
    let caps = Capabilities::SHADER_FLOAT16_IN_FLOAT32
        | Capabilities::SUBGROUP
        | Capabilities::SHADER_FLOAT16;
    Validator::new(ValidationFlags::all(), caps)
        .subgroup_stages(naga::valid::ShaderStages::COMPUTE)
        .subgroup_operations(naga::valid::SubgroupOperationSet::all())
        .validate(&module)
        .map_err(|e| format!("{}: {}", setting.kernel, e.emit_to_string(&src)))?;
    // As the backend: constants set and the branches they rule out removed before the driver
    // sees the module (src/backend/wgpu/specialize.rs, the same file).
    let values: Vec<(&str, f64)> = setting
        .constants
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    let module = specialize::specialize(&setting.label(), &src, &values)
        .map_err(|specialize::SpecializeError(e)| e)?;
    let info = Validator::new(ValidationFlags::all(), caps)
        .subgroup_stages(naga::valid::ShaderStages::COMPUTE)
        .subgroup_operations(naga::valid::SubgroupOperationSet::all())
        .validate(&module)
        .map_err(|e| format!("{}: specialized: {e}", setting.label()))?;
    let layout = Layout::of(&module);
    let mut options = spv::Options {
        lang_version: (1, 6),
        bounds_check_policies: naga::proc::BoundsCheckPolicies {
            // As the backend: a kernel with BOUNDED_GATHERS is compiled without index clamps.
            index: if setting.constants.get("BOUNDED_GATHERS") == Some(&1.0) {
                naga::proc::BoundsCheckPolicy::Unchecked
            } else {
                naga::proc::BoundsCheckPolicy::Restrict
            },
            buffer: naga::proc::BoundsCheckPolicy::Unchecked,
            image_load: naga::proc::BoundsCheckPolicy::Unchecked,
            binding_array: naga::proc::BoundsCheckPolicy::Unchecked,
        },
        force_loop_bounding: checks == Checks::Wgpu,
        emit_int_div_checks: checks == Checks::Wgpu,
        ..spv::Options::default()
    };
    // The backend turns wgpu's zeroing of workgroup memory off for the MACKO subgroup kernel only
    // (pipelines.rs, `needs_zeroed_workgroup_memory`); elsewhere the driver zeroes it natively.
    options.zero_initialize_workgroup_memory = if setting.kernel == "macko_sg" {
        spv::ZeroInitializeWorkgroupMemoryMode::None
    } else {
        spv::ZeroInitializeWorkgroupMemoryMode::Native
    };
    let pipeline_options = spv::PipelineOptions {
        shader_stage: naga::ShaderStage::Compute,
        entry_point: "main".to_string(),
    };
    let words = spv::write_vec(&module, &info, &options, Some(&pipeline_options))
        .map_err(|e| format!("{}: SPIR-V: {e}", setting.label()))?;
    Ok((words, layout))
}

/// Descriptor bindings of a module: group → (binding → uniform or storage).
struct Layout(BTreeMap<u32, BTreeMap<u32, vk::DescriptorType>>);

impl Layout {
    fn of(module: &naga::Module) -> Self {
        let mut groups: BTreeMap<u32, BTreeMap<u32, vk::DescriptorType>> = BTreeMap::new();
        for (_, var) in module.global_variables.iter() {
            if let Some(b) = &var.binding {
                let ty = match var.space {
                    naga::AddressSpace::Uniform => vk::DescriptorType::UNIFORM_BUFFER,
                    _ => vk::DescriptorType::STORAGE_BUFFER,
                };
                groups.entry(b.group).or_default().insert(b.binding, ty);
            }
        }
        Self(groups)
    }
}

/// A Vulkan device with the statistics extension and what it needs to build pipelines.
struct Vulkan {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    stats: ash::khr::pipeline_executable_properties::Device,
    name: String,
}

impl Vulkan {
    fn open() -> Result<Self, Error> {
        // SAFETY: loads the system's Vulkan loader; no Vulkan call is made before it succeeds.
        let entry = unsafe { ash::Entry::load() }.map_err(|e| format!("no Vulkan loader: {e}"))?;
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
        let ci = vk::InstanceCreateInfo::default().application_info(&app);
        // SAFETY: valid create info; the instance is destroyed in Drop.
        let instance = unsafe { entry.create_instance(&ci, None) }?;
        let ext = ash::khr::pipeline_executable_properties::NAME;
        // SAFETY: `instance` is live.
        let devices = unsafe { instance.enumerate_physical_devices() }?;
        let mut found = None;
        for pd in devices {
            // SAFETY: `pd` comes from `instance`.
            let exts = unsafe { instance.enumerate_device_extension_properties(pd) }?;
            if exts.iter().any(|e| e.extension_name_as_c_str() == Ok(ext)) {
                found = Some(pd);
                break;
            }
        }
        let Some(pd) = found else {
            // SAFETY: nothing else was created from `instance`.
            unsafe { instance.destroy_instance(None) };
            return Err(format!("no Vulkan device has {}", ext.to_string_lossy()).into());
        };
        // SAFETY: `pd` comes from `instance`.
        let props = unsafe { instance.get_physical_device_properties(pd) };
        let name = props
            .device_name_as_c_str()
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default();
        // SAFETY: as above.
        let families = unsafe { instance.get_physical_device_queue_family_properties(pd) };
        let family = families
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .ok_or("no compute queue")? as u32;
        let priorities = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities)];
        let ext_names = [ext.as_ptr()];
        let mut feature = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default()
            .pipeline_executable_info(true);
        // shaderFloat16 where the device has it (Vulkan 1.2 core), as wgpu asks for SHADER_F16:
        // the f16 layout of x (macko_x_f16.wgsl) declares the Float16 capability.
        let mut has12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut query = vk::PhysicalDeviceFeatures2::default().push_next(&mut has12);
        // SAFETY: `pd` is a physical device of `instance`; the chain outlives the call.
        unsafe { instance.get_physical_device_features2(pd, &mut query) };
        let f16 = has12.shader_float16 == vk::TRUE;
        let mut want12 = vk::PhysicalDeviceVulkan12Features::default().shader_float16(f16);
        let dci = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_extension_names(&ext_names)
            .push_next(&mut feature)
            .push_next(&mut want12);
        // SAFETY: the extension is supported (checked above); the device is destroyed in Drop.
        let device = unsafe { instance.create_device(pd, &dci, None) }?;
        let stats = ash::khr::pipeline_executable_properties::Device::new(&instance, &device);
        Ok(Self {
            _entry: entry,
            instance,
            device,
            stats,
            name,
        })
    }

    /// The driver's statistics of each executable of a compute pipeline built from `words`.
    fn statistics(&self, words: &[u32], layout: &Layout) -> Result<Vec<(String, String)>, Error> {
        let d = &self.device;
        let mut set_layouts = Vec::new();
        let max_group = layout.0.keys().next_back().copied().unwrap_or(0);
        let result = (|| -> Result<Vec<(String, String)>, Error> {
            for g in 0..=max_group {
                let bindings: Vec<vk::DescriptorSetLayoutBinding> = layout
                    .0
                    .get(&g)
                    .map(|m| {
                        m.iter()
                            .map(|(&b, &ty)| {
                                vk::DescriptorSetLayoutBinding::default()
                                    .binding(b)
                                    .descriptor_type(ty)
                                    .descriptor_count(1)
                                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let ci = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
                // SAFETY: valid create info; destroyed below.
                set_layouts.push(unsafe { d.create_descriptor_set_layout(&ci, None) }?);
            }
            let pl_ci = vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts);
            // SAFETY: the set layouts are live.
            let pipeline_layout = unsafe { d.create_pipeline_layout(&pl_ci, None) }?;
            let sm_ci = vk::ShaderModuleCreateInfo::default().code(words);
            // SAFETY: `words` is SPIR-V written by naga.
            let module = unsafe { d.create_shader_module(&sm_ci, None) };
            let out = module.map_err(Error::from).and_then(|module| {
                let r = self.pipeline_statistics(module, pipeline_layout);
                // SAFETY: the module is no longer used once the pipeline exists (or failed).
                unsafe { d.destroy_shader_module(module, None) };
                r
            });
            // SAFETY: no pipeline built from it is alive any more.
            unsafe { d.destroy_pipeline_layout(pipeline_layout, None) };
            out
        })();
        for l in set_layouts {
            // SAFETY: the pipeline layout using them is destroyed.
            unsafe { d.destroy_descriptor_set_layout(l, None) };
        }
        result
    }

    fn pipeline_statistics(
        &self,
        module: vk::ShaderModule,
        layout: vk::PipelineLayout,
    ) -> Result<Vec<(String, String)>, Error> {
        let d = &self.device;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"main");
        let ci = vk::ComputePipelineCreateInfo::default()
            .flags(vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR)
            .stage(stage)
            .layout(layout);
        // SAFETY: module and layout are live and match (the layout comes from the module).
        let pipelines =
            unsafe { d.create_compute_pipelines(vk::PipelineCache::null(), &[ci], None) }
                .map_err(|(_, e)| format!("pipeline: {e}"))?;
        let pipeline = pipelines.first().copied().ok_or("no pipeline")?;
        let result = (|| -> Result<Vec<(String, String)>, Error> {
            let info = vk::PipelineInfoKHR::default().pipeline(pipeline);
            // SAFETY: the pipeline was created with CAPTURE_STATISTICS.
            let executables = unsafe { self.stats.get_pipeline_executable_properties(&info) }?;
            let mut out = Vec::new();
            for i in 0..executables.len() as u32 {
                let ei = vk::PipelineExecutableInfoKHR::default()
                    .pipeline(pipeline)
                    .executable_index(i);
                // SAFETY: as above; `i` is below the executable count.
                for s in unsafe { self.stats.get_pipeline_executable_statistics(&ei) }? {
                    let name = s
                        .name_as_c_str()
                        .map(CStr::to_string_lossy)
                        .unwrap_or_default()
                        .into_owned();
                    // SAFETY: the union member read is the one `format` names.
                    let value = unsafe {
                        match s.format {
                            vk::PipelineExecutableStatisticFormatKHR::BOOL32 => {
                                (s.value.b32 != 0).to_string()
                            }
                            vk::PipelineExecutableStatisticFormatKHR::INT64 => {
                                s.value.i64.to_string()
                            }
                            vk::PipelineExecutableStatisticFormatKHR::UINT64 => {
                                s.value.u64.to_string()
                            }
                            vk::PipelineExecutableStatisticFormatKHR::FLOAT64 => {
                                format!("{:.3}", s.value.f64)
                            }
                            _ => "?".to_string(),
                        }
                    };
                    out.push((name, value));
                }
            }
            Ok(out)
        })();
        // SAFETY: never bound to a command buffer.
        unsafe { d.destroy_pipeline(pipeline, None) };
        result
    }
}

impl Drop for Vulkan {
    fn drop(&mut self) {
        // SAFETY: every object made from the device was destroyed where it was made.
        unsafe {
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Error> {
    let mut dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("shaders");
    let mut checks = vec![Checks::Wgpu];
    let mut specs = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--shaders" => dir = PathBuf::from(args.next().ok_or("--shaders needs a folder")?),
            "--checks" => {
                checks = match args.next().as_deref() {
                    Some("wgpu") => vec![Checks::Wgpu],
                    Some("trusted") => vec![Checks::Trusted],
                    Some("both") => vec![Checks::Wgpu, Checks::Trusted],
                    other => {
                        return Err(format!("--checks wgpu|trusted|both, not {other:?}").into())
                    }
                }
            }
            _ => specs.push(a),
        }
    }
    if specs.is_empty() {
        specs = default_settings();
    }
    let settings = specs
        .iter()
        .map(|s| Setting::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    // SPIR-V first: its errors show on any machine, with or without a capable driver.
    let mut built = Vec::new();
    for s in &settings {
        for &c in &checks {
            built.push((s.label(), c, spirv(&dir, s, c)));
        }
    }
    let vk = match Vulkan::open() {
        Ok(vk) => vk,
        Err(e) => {
            for (label, c, r) in &built {
                match r {
                    Ok((words, _)) => println!("{label} [{c:?}]: {} SPIR-V words", words.len()),
                    Err(e) => println!("{label} [{c:?}]: error: {e}"),
                }
            }
            return Err(e);
        }
    };
    println!("device: {} (shaders from {})", vk.name, dir.display());
    for (label, c, r) in built {
        let stats = r.and_then(|(words, layout)| vk.statistics(&words, &layout));
        match stats {
            Ok(stats) => {
                let stats: Vec<String> = stats.iter().map(|(k, v)| format!("{k}={v}")).collect();
                println!("{label} [{c:?}]: {}", stats.join("; "));
            }
            Err(e) => println!("{label} [{c:?}]: error: {e}"),
        }
    }
    Ok(())
}

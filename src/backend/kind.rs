//! The names of the backends: a leaf module, so that the crate's error type can name a backend
//! without importing the backends.

use std::fmt;

/// The backends macko knows, in the order [`crate::Device::auto`] tries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BackendKind {
    /// CUDA C kernels compiled at run time by NVRTC, through cudarc (NVIDIA GPUs).
    Cuda,
    /// WGSL compute shaders through wgpu (Vulkan, Metal, DX12: any vendor).
    Wgpu,
    /// Multi-threaded Rust on the host; always available.
    Cpu,
}

impl BackendKind {
    /// Every backend, in the order `Device::auto` tries them.
    pub const ALL: [BackendKind; 3] = [BackendKind::Cuda, BackendKind::Wgpu, BackendKind::Cpu];

    /// The name used by `MACKO_BACKEND` and the CLI.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Wgpu => "wgpu",
            BackendKind::Cuda => "cuda",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

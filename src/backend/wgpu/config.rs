//! What opening a wgpu device needs: the plain options of `DeviceOptions` that concern the
//! backend, and its tuning (built by the one reader of the options, never by the backend).

use super::tuning::WgpuTuning;

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

//! The wgpu backend (being written).

use std::sync::Arc;

use super::{Backend, BackendKind};
use crate::device::DeviceOptions;
use crate::error::{Error, Result};

/// Opens the wgpu device `opts` asks for.
pub(crate) fn open(_opts: &DeviceOptions) -> Result<Arc<dyn Backend>> {
    Err(Error::Unavailable {
        backend: BackendKind::Wgpu,
        reason: "not implemented yet".into(),
    })
}

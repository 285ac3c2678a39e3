//! The cuda backend (being written).

use std::sync::Arc;

use super::{Backend, BackendKind};
use crate::device::DeviceOptions;
use crate::error::{Error, Result};

/// Opens the cuda device `opts` asks for.
pub(crate) fn open(_opts: &DeviceOptions) -> Result<Arc<dyn Backend>> {
    Err(Error::Unavailable {
        backend: BackendKind::Cuda,
        reason: "not implemented yet".into(),
    })
}

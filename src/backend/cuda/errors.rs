//! The CUDA backend's errors, in one place so that every file can build them without importing
//! the file that opens the GPU.

use std::fmt::Debug;

use crate::backend::BackendKind;
use crate::error::Error;

/// An error reported by the driver or a CUDA library, with what macko was doing. The libraries'
/// error types print their status name (and the driver's its description) through `Debug`.
pub(crate) fn cuda_error(what: &str, e: impl Debug) -> Error {
    Error::Backend {
        backend: BackendKind::Cuda,
        message: format!("{what}: {e:?}"),
    }
}

/// An internal inconsistency (a bug in macko), as an error rather than a panic.
pub(crate) fn internal(what: &str) -> Error {
    Error::Backend {
        backend: BackendKind::Cuda,
        message: format!("internal: {what}"),
    }
}

/// This backend cannot be used here, and why.
pub(crate) fn unavailable(reason: impl Into<String>) -> Error {
    Error::Unavailable {
        backend: BackendKind::Cuda,
        reason: reason.into(),
    }
}

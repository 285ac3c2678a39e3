//! Errors of the `macko` crate: the format's own errors, plus everything a device can refuse.

use thiserror::Error;

use crate::backend::kind::BackendKind;

/// Everything that can go wrong when choosing a device or running a product on it.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// A matrix or vector broke a rule of the format (see [`macko_format::FormatError`]).
    #[error(transparent)]
    Format(#[from] macko_format::FormatError),
    /// The backend asked for cannot be used here; `reason` says what is missing.
    #[error("backend {backend} is unavailable: {reason}")]
    Unavailable {
        /// The backend asked for.
        backend: BackendKind,
        /// What is missing (no driver, no adapter, feature not compiled in, …).
        reason: String,
    },
    /// `MACKO_BACKEND` (or a parsed name) names no backend.
    #[error("unknown backend {name:?}: expected one of cpu, wgpu, cuda")]
    UnknownBackend {
        /// The name given.
        name: String,
    },
    /// An environment variable read by [`crate::DeviceOptions::from_env`] holds a value it does
    /// not take.
    #[error("{name}={value:?}: expected {expected}")]
    BadVariable {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What it takes.
        expected: &'static str,
    },
    /// An item of `MACKO_TUNING` (or of [`crate::DeviceOptions`]'s tuning) broke a rule.
    #[error("MACKO_TUNING item {item:?}: {reason}")]
    Tuning {
        /// The `backend.key=value` item.
        item: String,
        /// The rule it broke.
        reason: String,
    },
    /// A handle made by one device was passed to another.
    #[error("{what} belongs to device #{handle_device}, not to this device #{device}")]
    WrongDevice {
        /// Which handle.
        what: &'static str,
        /// The device that made the handle.
        handle_device: u64,
        /// The device it was passed to.
        device: u64,
    },
    /// Shapes of a product do not fit together.
    #[error("shape mismatch: {what}: expected {expected}, found {found}")]
    ShapeMismatch {
        /// Which operand.
        what: &'static str,
        /// Length the matrix requires.
        expected: usize,
        /// Length given.
        found: usize,
    },
    /// A batch of vectors that cannot be one: no vector, or elements that do not split into
    /// `batch` vectors of one length.
    #[error("a batch of {batch} vectors cannot hold {elements} elements: a batch has at least one vector, all of one length")]
    BadBatch {
        /// Vectors asked for.
        batch: usize,
        /// Elements given (or asked for).
        elements: usize,
    },
    /// A vector of the wrong element type was used (x must be f16; y is f16 or f32).
    #[error("{what}: expected a vector of {expected}, found {found}")]
    WrongElementType {
        /// Which operand.
        what: &'static str,
        /// Element type required.
        expected: &'static str,
        /// Element type given.
        found: &'static str,
    },
    /// The device could not hold the data.
    #[error("{backend}: out of device memory allocating {bytes} bytes for {what}")]
    OutOfMemory {
        /// Backend that refused.
        backend: BackendKind,
        /// Size asked for.
        bytes: u64,
        /// What it was for.
        what: String,
    },
    /// An array is too large for a limit of the device that cannot be worked around.
    #[error("{backend}: {what} needs {needed} bytes, but the device allows at most {limit}")]
    TooLarge {
        /// Backend that refused.
        backend: BackendKind,
        /// What is too large.
        what: String,
        /// Bytes needed.
        needed: u64,
        /// The device's limit.
        limit: u64,
    },
    /// The backend has no kernel for this kind of matrix yet (2:4 and homogeneous CSR on a
    /// GPU), or for this product (a sparse x, a transposed product, on a GPU); the CPU backend
    /// multiplies every format, in every product.
    #[error("{backend}: cannot multiply {what} matrices yet; upload them to the cpu device")]
    Unsupported {
        /// Backend that refused.
        backend: BackendKind,
        /// The format, as stored in files (`sparse24`, `csr-homogeneous`), or the product
        /// ([`crate::backend::UNSUPPORTED_SPARSE_X`], [`crate::backend::UNSUPPORTED_TRANSPOSED`]).
        what: &'static str,
    },
    /// The plan cache file ([`crate::tune`]) could not be written.
    #[error("plan cache {path}: {reason}")]
    PlanCache {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The backend's API reported an error (driver, compiler, validation); the message is its own.
    #[error("{backend}: {message}")]
    Backend {
        /// Backend that failed.
        backend: BackendKind,
        /// What it said.
        message: String,
    },
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

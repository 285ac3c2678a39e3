//! Errors as Python exceptions. The classes live in `macko/errors.py`, where they can inherit
//! from both `MackoError` and the built-in class a Python caller would catch (`ValueError` for
//! a bad matrix, `MemoryError` for a full device, ...); each carries the Rust error's message,
//! which names the bad value and the rule it broke.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// The Python class for a library error.
fn class_of(e: &macko::Error) -> &'static str {
    use macko::Error as E;
    match e {
        E::Format(_) => "FormatError",
        E::ShapeMismatch { .. } | E::BadBatch { .. } | E::WrongDevice { .. } => "ShapeError",
        E::WrongElementType { .. } => "DtypeError",
        E::UnknownBackend { .. } | E::BadVariable { .. } | E::Tuning { .. } => "ConfigError",
        E::Unavailable { .. } => "UnavailableError",
        E::OutOfMemory { .. } | E::TooLarge { .. } => "OutOfMemoryError",
        E::Unsupported { .. } => "UnsupportedError",
        E::Backend { .. } => "DeviceError",
        _ => "MackoError",
    }
}

/// An instance of `macko.errors.<class>` with `message`; a `RuntimeError` saying so if that
/// module cannot be imported (the package is broken, which must not hide the error itself).
pub fn raise(class: &str, message: String) -> PyErr {
    Python::attach(|py| {
        let found = py
            .import("macko.errors")
            .and_then(|m| m.getattr(class))
            .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from));
        match found {
            Ok(ty) => PyErr::from_type(ty, message),
            Err(e) => PyRuntimeError::new_err(format!(
                "{message} (and macko.errors.{class} could not be loaded: {e})"
            )),
        }
    })
}

/// A library error as its Python exception.
pub fn to_py(e: macko::Error) -> PyErr {
    raise(class_of(&e), e.to_string())
}

/// A format-crate error as `FormatError`.
pub fn format_to_py(e: macko::FormatError) -> PyErr {
    to_py(macko::Error::Format(e))
}

/// A wrong argument type or dtype, as `DtypeError` (a `TypeError`).
pub fn dtype(message: String) -> PyErr {
    raise("DtypeError", message)
}

/// A wrong shape, as `ShapeError` (a `ValueError`).
pub fn shape(message: String) -> PyErr {
    raise("ShapeError", message)
}

/// A bad option value, as `ConfigError` (a `ValueError`).
pub fn config(message: String) -> PyErr {
    raise("ConfigError", message)
}

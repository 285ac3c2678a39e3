//! The Rust half of the `macko` Python package: the module `macko._native`, which the Python
//! sources in `macko/` re-export. It holds no logic of its own beyond turning NumPy arrays and
//! Python arguments into the library's types and the library's errors into Python exceptions:
//! - `errors`: each `macko::Error` as one of the exception classes of `macko/errors.py`;
//! - `arrays`: NumPy arrays in (dtype and shape checked) and out;
//! - `matrix`: `Matrix`, a host matrix of any format (encode, prune, quantize, load, save);
//! - `device`: `Device` and `DeviceMatrix`, products with the GIL released.
//!
//! Built by maturin (`pip install ./python`) into `macko/_native.abi3.so`; `cargo test` builds
//! the same library for python/tests/python_suite.rs.

mod arrays;
mod device;
mod errors;
mod matrix;

use pyo3::prelude::*;

/// The module `macko._native` (the library is `macko_py`; Python finds it by this name).
#[pymodule]
#[pyo3(name = "_native")]
fn macko_py(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<matrix::Matrix>()?;
    m.add_class::<device::Device>()?;
    m.add_class::<device::DeviceMatrix>()?;
    m.add_function(wrap_pyfunction!(matrix::load, m)?)?;
    m.add_function(wrap_pyfunction!(matrix::save, m)?)?;
    Ok(())
}

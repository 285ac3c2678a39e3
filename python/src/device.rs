//! `Device` and `DeviceMatrix`: a device chosen as in Rust (`auto`, `cpu`, `wgpu`, `cuda`, or
//! `MACKO_BACKEND`), matrices uploaded to it, and products with NumPy vectors in and out. The
//! GIL is released while the device works, so other Python threads run (the library's
//! `Device` is shared by threads safely).

use macko::{BackendKind, DeviceOptions, Precision};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::matrix::Matrix;
use crate::{arrays, errors};

/// A device: a CUDA GPU, a wgpu adapter or the CPU.
#[pyclass(module = "macko", frozen)]
pub struct Device {
    inner: macko::Device,
    /// The GPU's index (torch's `cuda:N`) for a CUDA device, 0 for the others.
    ordinal: usize,
}

/// A matrix on a device, ready to multiply (`a @ x`, `a.multiply(x)`).
#[pyclass(module = "macko", frozen)]
pub struct DeviceMatrix {
    device: macko::Device,
    inner: macko::DeviceMatrix,
    /// Its device's `ordinal`: torch's checks compare it with a tensor's `cuda:N`.
    ordinal: usize,
}

/// `out_dtype` as the library's output precision.
fn precision(out_dtype: &str) -> PyResult<Precision> {
    match out_dtype {
        "float32" => Ok(Precision::F32),
        "float16" => Ok(Precision::F16),
        other => Err(errors::config(format!(
            "out_dtype={other:?}: expected 'float32' or 'float16'"
        ))),
    }
}

/// A property list as a Python dict.
fn properties<'py>(py: Python<'py>, info: &macko::DeviceInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in &info.properties {
        d.set_item(k, v)?;
    }
    Ok(d)
}

/// Imports triton first when torch is loaded and triton is not yet: a guard against two LLVMs.
///
/// Without a Vulkan driver, wgpu probes OpenGL, and Mesa's GL drivers (llvmpipe, radeonsi)
/// load their own LLVM into the process's global symbol scope. triton (torch.compile's GPU
/// compiler, installed with torch on Linux) exports the LLVM symbols of another version, and
/// importing it afterwards binds its LLVM calls to Mesa's copy and crashes the process with
/// SIGSEGV (seen here: `Device.available()` then `import triton`, torch 2.15, Mesa 22 with
/// LLVM 15; the same family of clash as triton-lang/triton#1236). Imported first, triton's own
/// symbols bind first and both work. Failure to import triton is ignored: it only matters where
/// triton exists.
fn import_triton_before_mesa(py: Python<'_>) {
    let Ok(modules) = py.import("sys").and_then(|sys| sys.getattr("modules")) else {
        return;
    };
    let loaded = |name: &str| modules.contains(name).unwrap_or(false);
    if loaded("torch") && !loaded("triton") {
        let _ = py.import("triton");
    }
}

#[pymethods]
impl Device {
    /// `kind`: "auto" (CUDA, else a hardware wgpu adapter, else the CPU), "cpu", "wgpu" or
    /// "cuda" (an error saying why, if it is missing), or None for `MACKO_BACKEND` if set, else
    /// "auto".
    /// `ordinal` picks the GPU of a CUDA device (0 is the first).
    #[new]
    #[pyo3(signature = (kind = None, *, ordinal = 0))]
    fn new(py: Python<'_>, kind: Option<&str>, ordinal: usize) -> PyResult<Self> {
        let mut opts = match kind {
            None => DeviceOptions::from_env().map_err(errors::to_py)?,
            Some("auto") => DeviceOptions::default(),
            Some(name) => {
                let backend: BackendKind = name.parse().map_err(errors::to_py)?;
                DeviceOptions::for_backend(backend)
            }
        };
        opts.cuda_ordinal = ordinal;
        if opts.backend != Some(BackendKind::Cpu) && opts.backend != Some(BackendKind::Cuda) {
            import_triton_before_mesa(py);
        }
        // Opening a GPU compiles nothing yet but may take a second (driver start-up).
        let inner = py
            .detach(|| macko::Device::with_options(&opts))
            .map_err(errors::to_py)?;
        let ordinal = if inner.kind() == BackendKind::Cuda {
            ordinal
        } else {
            0
        };
        Ok(Self { inner, ordinal })
    }

    /// Every backend with the device it would use or why it is unavailable, as a list of
    /// dicts: `backend`, `available`, and `name` or `reason`.
    #[staticmethod]
    fn available<'py>(py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        import_triton_before_mesa(py);
        let statuses = py.detach(macko::Device::available);
        statuses
            .into_iter()
            .map(|s| {
                let d = PyDict::new(py);
                d.set_item("backend", s.backend.name())?;
                d.set_item("available", s.device.is_ok())?;
                match s.device {
                    Ok(info) => d.set_item("name", info.name)?,
                    Err(reason) => d.set_item("reason", reason)?,
                }
                Ok(d)
            })
            .collect()
    }

    /// The backend: "cpu", "wgpu" or "cuda".
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind().name()
    }

    /// The GPU's index for a CUDA device (torch's `cuda:N`), 0 for the others.
    #[getter]
    fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The device's name ("NVIDIA H100 80GB HBM3 (sm_90)", "llvmpipe ... via Vulkan").
    #[getter]
    fn name(&self) -> String {
        self.inner.info().name.clone()
    }

    /// The device's properties (driver, memory, kernels, ...), as shown by `macko info`.
    #[getter]
    fn properties<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        properties(py, self.inner.info())
    }

    /// What the device made of the plan cache (`macko tune` fills it): the file and how many
    /// tuned matrix classes apply to this device, or why none are read.
    #[getter]
    fn plan_cache(&self) -> String {
        self.inner.plan_cache().to_string()
    }

    /// Copies a `Matrix` (or a 2-D array, as a dense matrix) to the device.
    fn upload(&self, py: Python<'_>, matrix: &Bound<'_, PyAny>) -> PyResult<DeviceMatrix> {
        let dense;
        let m: macko::MatrixRef<'_> = if let Ok(m) = matrix.cast::<Matrix>() {
            let m = m.get();
            (&m.inner).into()
        } else {
            dense = arrays::dense_matrix(matrix)?;
            (&dense).into()
        };
        let inner = py.detach(|| self.inner.upload(m)).map_err(errors::to_py)?;
        Ok(DeviceMatrix {
            device: self.inner.clone(),
            inner,
            ordinal: self.ordinal,
        })
    }

    /// Waits for every queued product.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.synchronize())
            .map_err(errors::to_py)
    }

    fn __repr__(&self) -> String {
        format!(
            "Device({:?}: {})",
            self.inner.kind().name(),
            self.inner.info().name
        )
    }
}

#[pymethods]
impl DeviceMatrix {
    /// Rows.
    #[getter]
    fn rows(&self) -> usize {
        self.inner.rows()
    }

    /// Columns.
    #[getter]
    fn cols(&self) -> usize {
        self.inner.cols()
    }

    /// `(rows, cols)`.
    #[getter]
    fn shape(&self) -> (usize, usize) {
        (self.inner.rows(), self.inner.cols())
    }

    /// The format's name, as `Matrix.format`.
    #[getter]
    fn format(&self) -> &'static str {
        self.inner.format().as_str()
    }

    /// The backend of the device it is on: "cpu", "wgpu" or "cuda".
    #[getter]
    fn device_kind(&self) -> &'static str {
        self.device.kind().name()
    }

    /// The GPU's index of the device it is on, for CUDA (torch's `cuda:N`); 0 for the others.
    #[getter]
    fn device_ordinal(&self) -> usize {
        self.ordinal
    }

    /// Bytes the matrix takes on the device.
    #[getter]
    fn nbytes(&self) -> u64 {
        self.inner.bytes()
    }

    /// y = A·x for a 1-D x of `cols` elements, or Y = A·X for a 2-D X of B vectors (`[B][cols]`,
    /// one vector per row, as a batch of tokens is) into Y `[B][rows]`: float16 or float32 x
    /// (float32 rounded to binary16), f32 accumulation, `out_dtype` "float32" or "float16".
    #[pyo3(signature = (x, *, out_dtype = "float32"))]
    fn multiply<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        out_dtype: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let precision = precision(out_dtype)?;
        let v = arrays::vectors(x, self.inner.cols())?;
        let rows = self.inner.rows();
        let dev = &self.device;
        let a = &self.inner;
        let y = py
            .detach(|| -> macko::Result<macko::HostVector> {
                match v.batch {
                    None => {
                        let x = dev.upload_vector(&v.values)?;
                        let mut y = dev.zeros(rows, precision)?;
                        dev.spmv(a, &x, &mut y)?;
                        dev.download(&y)
                    }
                    Some(b) => {
                        let x = dev.upload_batch(&v.values, b)?;
                        let mut y = dev.zeros_batch(rows, b, precision)?;
                        dev.spmm(a, &x, &mut y)?;
                        dev.download(&y)
                    }
                }
            })
            .map_err(errors::to_py)?;
        arrays::y_array(py, y, v.batch, rows)
    }

    /// Queues Y = A·X on CUDA memory another framework owns (PyTorch tensors: pass
    /// `data_ptr()`s and `torch.cuda.current_stream().cuda_stream`): X is `batch × cols`
    /// float16, Y `batch × rows` of `out_dtype`, both contiguous and 16-byte aligned, on this
    /// CUDA device. Nothing is copied and nothing waits; the caller keeps X, Y and this matrix
    /// alive until the stream has run the product. For macko.torch, which checks every tensor
    /// first; not for direct use.
    #[pyo3(signature = (x_ptr, y_ptr, batch, out_dtype, stream))]
    fn _multiply_cuda_pointers(
        &self,
        py: Python<'_>,
        x_ptr: u64,
        y_ptr: u64,
        batch: usize,
        out_dtype: &str,
        stream: u64,
    ) -> PyResult<()> {
        let p = macko::interop::CudaPointers {
            x: x_ptr,
            y: y_ptr,
            batch,
            y_precision: precision(out_dtype)?,
            stream,
        };
        // SAFETY: macko.torch passes the pointers of contiguous CUDA tensors of the checked
        // shapes and dtypes on this device, keeps them referenced until the stream runs, and
        // synchronizes the device after upload (see `Device::spmm_cuda_pointers`).
        py.detach(|| unsafe { self.device.spmm_cuda_pointers(&self.inner, &p) })
            .map_err(errors::to_py)
    }

    fn __matmul__<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.multiply(py, x, "float32")
    }

    fn __repr__(&self) -> String {
        format!(
            "DeviceMatrix(format={:?}, shape=({}, {}), device={:?})",
            self.inner.format().as_str(),
            self.inner.rows(),
            self.inner.cols(),
            self.device.info().name
        )
    }
}

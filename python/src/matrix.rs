//! `Matrix`: a validated host matrix of any format, made from a NumPy array (pruned,
//! encoded and quantized on the way) or loaded from a safetensors file, and saved back; its
//! arrays out as NumPy arrays, and its f64 reference product for checking a device's.

use std::collections::BTreeMap;
use std::path::PathBuf;

use half::f16;
use macko::format::container;
use macko::{
    prune, reference, AnyMatrix, CsrMatrix, MackoMatrix, MatrixRef, QuantBits, QuantDenseMatrix,
    QuantMackoMatrix, Quantization, ScaleLayout, Sparse24Matrix,
};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use crate::{arrays, errors};

/// A matrix on the host: MACKO-16-4, CSR or dense binary16, or MACKO/dense with int8/int4
/// values. Immutable; equality is bit for bit.
#[pyclass(module = "macko", frozen, eq)]
#[derive(PartialEq)]
pub struct Matrix {
    pub inner: AnyMatrix,
}

/// The quantization `quantize` and `group` ask for, as `macko convert` reads them.
fn quantization(quantize: Option<&str>, group: Option<u32>) -> PyResult<Option<Quantization>> {
    let bits = match quantize {
        None => {
            return match group {
                None => Ok(None),
                Some(g) => Err(errors::config(format!(
                    "group={g} needs quantize='int8' or 'int4': scale groups apply only to \
                     quantized values"
                ))),
            }
        }
        Some("int8") => QuantBits::Int8,
        Some("int4") => QuantBits::Int4,
        Some(other) => {
            return Err(errors::config(format!(
                "quantize={other:?} is not a quantized width; expected 'int8' or 'int4'"
            )))
        }
    };
    let scales = group.map_or(ScaleLayout::PerRow, ScaleLayout::PerGroup);
    scales
        .check()
        .map_err(|e| errors::config(format!("group={}: {e}", group.unwrap_or_default())))?;
    Ok(Some(Quantization { bits, scales }))
}

/// A f16 array as a NumPy array with `shape`.
fn f16_array<'py>(py: Python<'py>, v: &[f16], shape: &[usize]) -> PyResult<Bound<'py, PyAny>> {
    PyArray1::from_slice(py, v)
        .into_any()
        .call_method1("reshape", (shape.to_vec(),))
}

#[pymethods]
impl Matrix {
    /// Encodes a 2-D float16/float32/float64 array (float32 and float64 are rounded to
    /// binary16). `density` first prunes each row to that fraction by magnitude; `format` is
    /// "macko", "csr", "dense" or "sparse24" (2:4: each group of four columns keeps its two
    /// largest magnitudes, so a matrix already 2:4 is stored unchanged; no `density` or
    /// `quantize` with it); `quantize` ("int8" or "int4", MACKO and dense only) stores values
    /// with one binary16 scale per row, or per `group` stored values.
    #[staticmethod]
    #[pyo3(signature = (array, *, format = "macko", density = None, quantize = None, group = None))]
    fn from_dense(
        py: Python<'_>,
        array: &Bound<'_, PyAny>,
        format: &str,
        density: Option<f64>,
        quantize: Option<&str>,
        group: Option<u32>,
    ) -> PyResult<Self> {
        let quant = quantization(quantize, group)?;
        if format == "sparse24" && (density.is_some() || quant.is_some()) {
            return Err(errors::config(
                "format='sparse24' prunes to 2:4 itself and stores binary16 values: give it no \
                 density and no quantize"
                    .into(),
            ));
        }
        let mut dense = arrays::dense_matrix(array)?;
        let encode = move || -> PyResult<AnyMatrix> {
            if let Some(d) = density {
                dense = prune::magnitude_per_row(&dense, d)
                    .map_err(|e| errors::config(e.to_string()))?;
            }
            let fmt = errors::format_to_py;
            Ok(match (format, quant) {
                ("macko", None) => MackoMatrix::from_dense(&dense).map_err(fmt)?.into(),
                ("csr", None) => CsrMatrix::from_dense(&dense).map_err(fmt)?.into(),
                ("dense", None) => dense.into(),
                ("sparse24", _) => Sparse24Matrix::prune_from_dense(&dense)
                    .map_err(fmt)?
                    .into(),
                ("macko", Some(q)) => {
                    let m = MackoMatrix::from_dense(&dense).map_err(fmt)?;
                    QuantMackoMatrix::quantize(&m, q).map_err(fmt)?.into()
                }
                ("dense", Some(q)) => QuantDenseMatrix::quantize(&dense, q).map_err(fmt)?.into(),
                ("csr", Some(_)) => {
                    return Err(errors::config(
                        "quantize applies to format='macko' or 'dense', not 'csr'".into(),
                    ))
                }
                (other, _) => {
                    return Err(errors::config(format!(
                        "format={other:?} is not a format; expected 'macko', 'csr', 'dense' or \
                         'sparse24'"
                    )))
                }
            })
        };
        // Pruning and encoding take seconds on LLM-sized weights: other Python threads run.
        let inner = py.detach(encode)?;
        Ok(Self { inner })
    }

    /// A MACKO-16-4 matrix from its three arrays (row_ptr uint32 of rows + 1, values float16
    /// padded to a multiple of 8, codes uint8 with two 4-bit codes a byte, low nibble first),
    /// checked against every rule of the format.
    #[staticmethod]
    fn from_macko_parts(
        rows: usize,
        cols: usize,
        row_ptr: PyReadonlyArray1<'_, u32>,
        values: PyReadonlyArray1<'_, f16>,
        codes: PyReadonlyArray1<'_, u8>,
    ) -> PyResult<Self> {
        let m = MackoMatrix::from_parts(
            rows,
            cols,
            row_ptr.as_array().to_vec(),
            values.as_array().to_vec(),
            codes.as_array().to_vec(),
        )
        .map_err(errors::format_to_py)?;
        Ok(Self { inner: m.into() })
    }

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

    /// The format's name: "macko", "csr", "dense", "sparse24", "macko-quant" or "dense-quant".
    #[getter]
    fn format(&self) -> &'static str {
        self.inner.kind().as_str()
    }

    /// Bytes of the stored arrays: what a product reads, vectors aside.
    #[getter]
    fn nbytes(&self) -> u64 {
        self.inner.as_ref().bytes()
    }

    /// The matrix as a dense float16 array (quantized values dequantized).
    fn to_dense<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let dense = match &self.inner {
            AnyMatrix::Macko(m) => m.to_dense(),
            AnyMatrix::Csr(m) => m.to_dense(),
            AnyMatrix::Dense(m) => Ok(m.clone()),
            AnyMatrix::MackoQuant(m) => m.dequantize(),
            AnyMatrix::DenseQuant(m) => m.dequantize(),
            AnyMatrix::Sparse24(m) => m.to_dense(),
            AnyMatrix::HomogeneousCsr(m) => m.to_dense(),
        }
        .map_err(errors::format_to_py)?;
        f16_array(py, dense.values(), &[dense.rows(), dense.cols()])
    }

    /// The stored arrays by name, as NumPy arrays: MACKO `row_ptr`, `values`, `codes`; CSR
    /// `row_ptr`, `col_idx`, `values`; dense `values` (2-D); 2:4 `values`, `meta`. Quantized
    /// matrices have none yet.
    fn parts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        match &self.inner {
            AnyMatrix::Macko(m) => {
                d.set_item("row_ptr", PyArray1::from_slice(py, m.row_ptr()))?;
                d.set_item("values", PyArray1::from_slice(py, m.values()))?;
                d.set_item("codes", PyArray1::from_slice(py, m.codes()))?;
            }
            AnyMatrix::Csr(m) => {
                d.set_item("row_ptr", PyArray1::from_slice(py, m.row_ptr()))?;
                d.set_item("col_idx", PyArray1::from_slice(py, m.col_idx()))?;
                d.set_item("values", PyArray1::from_slice(py, m.values()))?;
            }
            AnyMatrix::Dense(m) => {
                d.set_item("values", f16_array(py, m.values(), &[m.rows(), m.cols()])?)?;
            }
            AnyMatrix::Sparse24(m) => {
                d.set_item("values", PyArray1::from_slice(py, m.values()))?;
                d.set_item("meta", PyArray1::from_slice(py, m.meta()))?;
            }
            other => {
                return Err(errors::raise(
                    "UnsupportedError",
                    format!(
                        "parts() of {} matrices is not available yet",
                        other.kind().as_str()
                    ),
                ))
            }
        }
        Ok(d)
    }

    /// The exact product with `x` (1-D, or 2-D `[B][cols]`), summed in float64 on the host:
    /// what a device's product is checked against.
    fn reference<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let v = arrays::vectors(x, self.inner.cols())?;
        let m: MatrixRef<'_> = (&self.inner).into();
        let r = match v.batch {
            None => reference::spmv(m, &v.values),
            Some(b) => reference::spmm(m, &v.values, b),
        }
        .map_err(errors::format_to_py)?;
        let y = PyArray1::from_vec(py, r.y).into_any();
        match v.batch {
            None => Ok(y),
            Some(b) => y.call_method1("reshape", ((b, self.inner.rows()),)),
        }
    }

    /// Saves this matrix alone to a safetensors file, under `name`.
    #[pyo3(signature = (path, name = "weight"))]
    fn save(&self, py: Python<'_>, path: PathBuf, name: &str) -> PyResult<()> {
        let m: MatrixRef<'_> = (&self.inner).into();
        py.detach(|| container::save(&path, &[(name, m)]))
            .map_err(errors::format_to_py)
    }

    /// The matrix as the bytes of a safetensors file (what `save` writes, under "weight"),
    /// with its checksums: for pickling, a state dict, or sending it elsewhere.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let m: MatrixRef<'_> = (&self.inner).into();
        let bytes = py
            .detach(|| container::to_bytes(&[("weight", m)]))
            .map_err(errors::format_to_py)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The one matrix of a safetensors file's bytes (`to_bytes`' output, or a file `save`
    /// wrote with one matrix), validated and checksum-checked.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        let bytes = data.to_vec();
        let mut matrices = py
            .detach(|| container::MatrixFile::from_bytes("<bytes>", bytes)?.matrices())
            .map_err(errors::format_to_py)?;
        if matrices.len() != 1 {
            return Err(errors::raise(
                "FormatError",
                format!(
                    "the bytes hold {} matrices; from_bytes takes exactly one (use macko.load \
                     for a file of several)",
                    matrices.len()
                ),
            ));
        }
        let (_, inner) = matrices.remove(0);
        Ok(Self { inner })
    }

    /// Pickling: the matrix travels as `to_bytes()` and comes back through `from_bytes`.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let rebuild = py.get_type::<Self>().getattr("from_bytes")?;
        let bytes = slf.borrow().to_bytes(py)?;
        PyTuple::new(
            py,
            [rebuild.into_any(), PyTuple::new(py, [bytes])?.into_any()],
        )
    }

    fn __repr__(&self) -> String {
        format!(
            "Matrix(format={:?}, shape=({}, {}), nbytes={})",
            self.inner.kind().as_str(),
            self.inner.rows(),
            self.inner.cols(),
            self.inner.as_ref().bytes()
        )
    }
}

/// Every matrix of a safetensors file written by macko (`macko convert`, `save`), by name,
/// validated and checksum-checked.
#[pyfunction]
pub fn load(py: Python<'_>, path: PathBuf) -> PyResult<BTreeMap<String, Matrix>> {
    let matrices = py
        .detach(|| container::load(&path))
        .map_err(errors::format_to_py)?;
    Ok(matrices
        .into_iter()
        .map(|(name, inner)| (name, Matrix { inner }))
        .collect())
}

/// Saves matrices (a dict of name → Matrix) to one safetensors file.
#[pyfunction]
pub fn save(
    py: Python<'_>,
    path: PathBuf,
    matrices: BTreeMap<String, PyRef<'_, Matrix>>,
) -> PyResult<()> {
    let named: Vec<(&str, MatrixRef<'_>)> = matrices
        .iter()
        .map(|(name, m)| (name.as_str(), MatrixRef::from(&m.inner)))
        .collect();
    py.detach(|| container::save(&path, &named))
        .map_err(errors::format_to_py)
}

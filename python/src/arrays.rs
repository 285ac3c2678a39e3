//! NumPy arrays in and out. Matrices come in as 2-D float16, float32 or float64 arrays of any
//! layout (float32 and float64 are rounded to binary16, and a finite value beyond binary16's
//! range is an error naming it, as `macko convert` does); vectors come in as float16 or float32
//! arrays, 1-D for one vector or 2-D `[B][cols]` for B. Results go out as new arrays owned by
//! Python.

use half::f16;
use macko::{DenseMatrix, HostVector};
use numpy::ndarray::{ArrayView1, ArrayView2, Axis};
use numpy::{PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::errors;

/// `obj`'s NumPy dtype and number of dimensions, or a `DtypeError` if it is not an array.
fn describe(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<(String, usize)> {
    let array = obj.cast::<PyUntypedArray>().map_err(|_| {
        errors::dtype(format!(
            "{what} must be a NumPy array, not {}",
            obj.get_type()
                .name()
                .map_or_else(|_| "an unknown type".into(), |n| n.to_string())
        ))
    })?;
    let dtype = array
        .dtype()
        .str()
        .map_or_else(|_| "?".into(), |s| s.to_string());
    Ok((dtype, array.ndim()))
}

/// A refusal naming `what`'s dtype and the dtypes accepted.
fn wrong_dtype(obj: &Bound<'_, PyAny>, what: &str, accepted: &str) -> PyErr {
    match describe(obj, what) {
        Ok((dtype, _)) => errors::dtype(format!("{what} has dtype {dtype}; expected {accepted}")),
        Err(e) => e,
    }
}

/// Rounds one element to binary16, refusing a finite value binary16 cannot hold.
fn to_f16(v: f64, at: impl FnOnce() -> String) -> PyResult<f16> {
    let h = f16::from_f64(v);
    if v.is_finite() && !h.is_finite() {
        return Err(errors::raise(
            "FormatError",
            format!(
                "{} = {v} is beyond binary16's range (±65504); scale the weights first",
                at()
            ),
        ));
    }
    Ok(h)
}

/// A 2-D view's elements in row-major order as binary16.
fn dense_values<T: Copy>(view: ArrayView2<'_, T>, f: impl Fn(T) -> f64) -> PyResult<Vec<f16>> {
    let mut out = Vec::with_capacity(view.len());
    for (r, row) in view.axis_iter(Axis(0)).enumerate() {
        for (c, &v) in row.iter().enumerate() {
            out.push(to_f16(f(v), || format!("element [{r}, {c}]"))?);
        }
    }
    Ok(out)
}

/// A 2-D array as a dense binary16 matrix.
pub fn dense_matrix(obj: &Bound<'_, PyAny>) -> PyResult<DenseMatrix> {
    let (_, ndim) = describe(obj, "the matrix")?;
    if ndim != 2 {
        return Err(errors::shape(format!(
            "the matrix must be a 2-D array (rows × columns), not {ndim}-D"
        )));
    }
    let (rows, cols, values) = if let Ok(a) = obj.extract::<PyReadonlyArray2<'_, f16>>() {
        let v = a.as_array();
        (v.nrows(), v.ncols(), v.iter().copied().collect())
    } else if let Ok(a) = obj.extract::<PyReadonlyArray2<'_, f32>>() {
        let v = a.as_array();
        (v.nrows(), v.ncols(), dense_values(v, f64::from)?)
    } else if let Ok(a) = obj.extract::<PyReadonlyArray2<'_, f64>>() {
        let v = a.as_array();
        (v.nrows(), v.ncols(), dense_values(v, |x| x)?)
    } else {
        return Err(wrong_dtype(
            obj,
            "the matrix",
            "float16, float32 or float64",
        ));
    };
    DenseMatrix::new(rows, cols, values).map_err(errors::format_to_py)
}

/// Vectors to multiply: their binary16 elements, `[batch][cols]`, and `Some(batch)` when they
/// came as a 2-D array (`None` for one 1-D vector).
pub struct Vectors {
    pub values: Vec<f16>,
    pub batch: Option<usize>,
}

fn from_1d<T: Copy>(v: ArrayView1<'_, T>, f: impl Fn(T) -> f16) -> Vec<f16> {
    v.iter().map(|&x| f(x)).collect()
}

fn from_2d<T: Copy>(v: ArrayView2<'_, T>, f: impl Fn(T) -> f16) -> Vec<f16> {
    v.iter().map(|&x| f(x)).collect()
}

/// A 1-D array of `cols` elements, or a 2-D array of `[batch][cols]`, as binary16 vectors
/// (float32 rounded to nearest, out-of-range values becoming ±∞ as in any f16 cast).
pub fn vectors(obj: &Bound<'_, PyAny>, cols: usize) -> PyResult<Vectors> {
    let (_, ndim) = describe(obj, "x")?;
    let (values, batch, len) = match ndim {
        1 => {
            let values = if let Ok(a) = obj.extract::<PyReadonlyArray1<'_, f16>>() {
                from_1d(a.as_array(), |x| x)
            } else if let Ok(a) = obj.extract::<PyReadonlyArray1<'_, f32>>() {
                from_1d(a.as_array(), f16::from_f32)
            } else {
                return Err(wrong_dtype(obj, "x", "float16 or float32"));
            };
            let len = values.len();
            (values, None, len)
        }
        2 => {
            let (values, b, c) = if let Ok(a) = obj.extract::<PyReadonlyArray2<'_, f16>>() {
                let v = a.as_array();
                (from_2d(v, |x| x), v.nrows(), v.ncols())
            } else if let Ok(a) = obj.extract::<PyReadonlyArray2<'_, f32>>() {
                let v = a.as_array();
                (from_2d(v, f16::from_f32), v.nrows(), v.ncols())
            } else {
                return Err(wrong_dtype(obj, "x", "float16 or float32"));
            };
            if b == 0 {
                return Err(errors::shape(format!(
                    "x has shape (0, {c}): a batch needs at least one vector"
                )));
            }
            (values, Some(b), c)
        }
        n => {
            return Err(errors::shape(format!(
                "x must be 1-D (one vector) or 2-D (a batch of vectors, one per row), not {n}-D"
            )))
        }
    };
    if len != cols {
        return Err(errors::shape(format!(
            "x has {len} elements per vector, but the matrix has {cols} columns"
        )));
    }
    Ok(Vectors { values, batch })
}

/// A downloaded y as a NumPy array: 1-D of `rows`, or `[batch][rows]`.
pub fn y_array<'py>(
    py: Python<'py>,
    y: HostVector,
    batch: Option<usize>,
    rows: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let flat = match y {
        HostVector::F32(v) => PyArray1::from_vec(py, v).into_any(),
        HostVector::F16(v) => PyArray1::from_vec(py, v).into_any(),
    };
    match batch {
        None => Ok(flat),
        Some(b) => flat.call_method1("reshape", ((b, rows),)),
    }
}

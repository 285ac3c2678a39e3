//! `verify`: every matrix of a converted file validated against the rules of docs/FORMAT.md, and
//! optionally compared with the dense source it was converted from.

use std::collections::BTreeSet;

use macko_format::container::{self, AnyMatrix, MatrixFile, MatrixKind};
use macko_format::{is_zero, DenseMatrix};

use super::convert::CONVERT_METADATA_PREFIX;
use super::file::{Checkpoint, CheckpointError, Result};
use crate::prune;

/// The outcome of checking one matrix of a file.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixCheck {
    /// The matrix's name.
    pub name: String,
    /// Its format (`macko`, `csr`, `dense`).
    pub kind: &'static str,
    /// Rows, as the metadata states them.
    pub rows: usize,
    /// Columns, as the metadata states them.
    pub cols: usize,
    /// Stored entries (MACKO: N, padding included; CSR: non-zeros; dense: elements), when the
    /// arrays are valid.
    pub entries: Option<usize>,
    /// Whether a valid MACKO matrix is canonically encoded (`None` for other kinds, or when
    /// invalid).
    pub canonical: Option<bool>,
    /// The pruning density re-applied to the source before comparing, if the conversion record
    /// names one.
    pub prune_to: Option<f64>,
    /// Whether the matrix was compared with a source.
    pub compared: bool,
    /// Every problem found, each naming the rule broken; empty when the matrix passed.
    pub problems: Vec<String>,
}

/// The outcome of [`verify()`].
#[derive(Debug, Clone, PartialEq)]
pub struct VerifyReport {
    /// The file checked.
    pub file: String,
    /// The source compared with, if any.
    pub against: Option<String>,
    /// One entry per matrix, by name.
    pub matrices: Vec<MatrixCheck>,
    /// With a source: how many of the file's other tensors (not arrays of a matrix) were
    /// compared with the source's tensor of the same name.
    pub other_tensors_compared: usize,
    /// With a source: every other tensor whose dtype, shape or bytes differ from the source's
    /// (`convert` copies them unchanged), each naming the tensor.
    pub other_tensor_problems: Vec<String>,
}

impl VerifyReport {
    /// The matrices with at least one problem.
    pub fn failures(&self) -> impl Iterator<Item = &MatrixCheck> {
        self.matrices.iter().filter(|m| !m.problems.is_empty())
    }

    /// Whether every matrix passed and every other tensor equals the source's.
    pub fn passed(&self) -> bool {
        self.failures().next().is_none() && self.other_tensor_problems.is_empty()
    }
}

/// The tensors that hold matrix `name` of kind `kind` in the container's layout.
fn array_names(name: &str, kind: &str) -> Vec<String> {
    match MatrixKind::parse(kind) {
        Some(kind) => container::tensor_names(kind, name),
        None => vec![name.to_string()],
    }
}

/// The pruning density recorded for matrix `name` by `macko convert`, if any.
fn recorded_prune(file: &MatrixFile, name: &str) -> std::result::Result<Option<f64>, String> {
    let key = format!("{CONVERT_METADATA_PREFIX}{name}");
    let Some(value) = file.metadata().and_then(|m| m.get(&key)) else {
        return Ok(None);
    };
    let json: serde_json::Value = serde_json::from_str(value)
        .map_err(|e| format!("conversion record `{key}` is not JSON: {e}"))?;
    match json.get("prune_to") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(d) => prune::check_density(d)
                .map(Some)
                .map_err(|e| format!("conversion record `{key}`: prune_to: {e}")),
            None => Err(format!(
                "conversion record `{key}`: prune_to is {v}, expected a number or null"
            )),
        },
    }
}

/// The first element where `stored` and `expected` differ, as the rule-naming message. Equal
/// means equal bits, except that ±0.0 are one value: the format does not preserve −0.0.
fn first_difference(stored: &DenseMatrix, expected: &DenseMatrix, what: &str) -> Option<String> {
    if (stored.rows(), stored.cols()) != (expected.rows(), expected.cols()) {
        return Some(format!(
            "source check: the source{what} is {}×{}, the stored matrix {}×{}",
            expected.rows(),
            expected.cols(),
            stored.rows(),
            stored.cols()
        ));
    }
    let cols = stored.cols().max(1);
    let (s, e) = (stored.values(), expected.values());
    let differs = |i: usize| s[i].to_bits() != e[i].to_bits() && !(is_zero(s[i]) && is_zero(e[i]));
    let first = (0..s.len()).find(|&i| differs(i))?;
    let count = (first..s.len()).filter(|&i| differs(i)).count();
    Some(format!(
        "source check (decoded equals the f16 source{what}, bit for bit): element ({}, {}) is \
         {} (0x{:04x}) but the source has {} (0x{:04x}); {count} element(s) differ",
        first / cols,
        first % cols,
        s[first],
        s[first].to_bits(),
        e[first],
        e[first].to_bits()
    ))
}

/// Checks every matrix the file's metadata describes.
///
/// Each is loaded through `from_parts`, which checks every validity rule of docs/FORMAT.md; a
/// matrix that breaks one gets a problem naming the rule (`rule 3 (tail padding): …`). With
/// `against`, each matrix is also decoded to dense and compared with the tensor of the same
/// name in the source, converted to binary16 as `convert` does and, where the conversion record
/// (`macko-convert.NAME`) names a pruning density, pruned the same way: the two must be equal
/// bit for bit (±0.0 count as one value, since the format stores −0.0 as +0.0).
///
/// With `against`, the file's other tensors (those that are not arrays of a matrix) that the
/// source also holds must be identical to the source's: same dtype, shape and bytes.
///
/// File-level problems (missing or corrupt file, unreadable metadata, a file that holds no
/// matrix) are errors; per-matrix problems are collected in the report, so one run names them
/// all.
pub fn verify(file: &std::path::Path, against: Option<&std::path::Path>) -> Result<VerifyReport> {
    let label = file.display().to_string();
    let f = MatrixFile::open(file)?;
    let infos = f.matrix_infos()?;
    if infos.is_empty() {
        return Err(CheckpointError::Selection {
            file: label,
            message: "holds no MACKO, CSR or dense matrix (no `macko.*` metadata): is it a \
                      file that `macko convert` wrote?"
                .into(),
        });
    }
    let source = against.map(Checkpoint::open).transpose()?;
    let mut matrices = Vec::with_capacity(infos.len());
    for info in infos {
        let mut check = MatrixCheck {
            name: info.name.clone(),
            kind: info.kind.as_str(),
            rows: info.rows,
            cols: info.cols,
            entries: None,
            canonical: None,
            prune_to: None,
            compared: false,
            problems: Vec::new(),
        };
        let matrix = match f.matrix(&info.name) {
            Ok(m) => m,
            Err(e) => {
                check.problems.push(e.to_string());
                matrices.push(check);
                continue;
            }
        };
        let decoded = match &matrix {
            AnyMatrix::Macko(m) => {
                check.entries = Some(m.entries());
                check.canonical = Some(m.is_canonical());
                m.to_dense()
            }
            AnyMatrix::Csr(m) => {
                check.entries = Some(m.nnz());
                m.to_dense()
            }
            AnyMatrix::Dense(m) => {
                check.entries = Some(m.values().len());
                Ok(m.clone())
            }
            AnyMatrix::MackoQuant(m) => {
                check.entries = Some(m.entries());
                m.dequantize()
            }
            AnyMatrix::DenseQuant(m) => {
                check.entries = Some(m.rows() * m.cols());
                m.dequantize()
            }
        };
        // Quantized values are not the source's: what `convert --quantize` promises (an error
        // bound) is not recorded yet, so they are not compared rather than reported equal.
        let quantized = matches!(matrix, AnyMatrix::MackoQuant(_) | AnyMatrix::DenseQuant(_));
        if quantized && source.is_some() {
            check.problems.push(
                "quantized values: comparing them with the source is not supported yet".into(),
            );
        }
        if let Some(src) = source.as_ref().filter(|_| !quantized) {
            check.compared = true;
            let result = (|| -> std::result::Result<Option<String>, String> {
                let prune_to = recorded_prune(&f, &info.name)?;
                check.prune_to = prune_to;
                let decoded = decoded.map_err(|e| format!("decoding: {e}"))?;
                let mut expected = src.dense(&info.name).map_err(|e| e.to_string())?;
                let mut what = String::new();
                if let Some(d) = prune_to {
                    expected = prune::magnitude_per_row(&expected, d).map_err(|e| e.to_string())?;
                    what = format!(" pruned to density {d}");
                }
                Ok(first_difference(&decoded, &expected, &what))
            })();
            match result {
                Ok(None) => {}
                Ok(Some(problem)) | Err(problem) => check.problems.push(problem),
            }
        }
        matrices.push(check);
    }
    let (mut other_tensors_compared, mut other_tensor_problems) = (0, Vec::new());
    if let Some(src) = &source {
        let converted = Checkpoint::open(file)?;
        let arrays: BTreeSet<String> = matrices
            .iter()
            .flat_map(|m| array_names(&m.name, m.kind))
            .collect();
        for t in converted.tensors() {
            let Some(s) = src.tensor(&t.name).filter(|_| !arrays.contains(&t.name)) else {
                continue;
            };
            other_tensors_compared += 1;
            if (&t.dtype, &t.shape) != (&s.dtype, &s.shape) {
                other_tensor_problems.push(format!(
                    "tensor `{}`: copy check (copied unchanged): {} {} here, {} {} in the source",
                    t.name,
                    t.dtype,
                    t.shape_text(),
                    s.dtype,
                    s.shape_text()
                ));
            } else if converted.raw_bytes(t)? != src.raw_bytes(s)? {
                other_tensor_problems.push(format!(
                    "tensor `{}`: copy check (copied unchanged): the bytes differ from the source's",
                    t.name
                ));
            }
        }
    }
    Ok(VerifyReport {
        file: label,
        against: against.map(|p| p.display().to_string()),
        matrices,
        other_tensors_compared,
        other_tensor_problems,
    })
}

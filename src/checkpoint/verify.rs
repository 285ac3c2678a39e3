//! `verify`: every matrix of a converted file validated against the rules of docs/FORMAT.md, and
//! optionally compared with the dense source it was converted from: bit for bit for f16 values,
//! by the relative error `convert` recorded for quantized ones.

use std::collections::BTreeSet;

use half::f16;
use macko_format::container::{self, AnyMatrix, MatrixFile, MatrixKind};
use macko_format::{is_zero, DenseMatrix, QuantBits, Quantization, ScaleLayout, Sparse24Matrix};

use super::accuracy::relative_error;
use super::convert::{describe_quantization, CONVERT_METADATA_PREFIX};
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
    /// Whether the conversion record names 2:4 pruning, re-applied to the source before
    /// comparing.
    pub prune_24: bool,
    /// Whether the matrix was compared with a source.
    pub compared: bool,
    /// The stored values' quantization (`None` for f16 values).
    pub quantization: Option<Quantization>,
    /// For a quantized matrix compared with a source: the relative error of its products
    /// recomputed against the (pruned) f16 source ([`super::relative_error`]).
    pub rel_error: Option<f64>,
    /// For a quantized matrix: the relative error its conversion record promises.
    pub recorded_rel_error: Option<f64>,
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

/// How much a recomputed relative error may exceed the recorded one, relative to it: the
/// computation is deterministic, so only the f64 → JSON → f64 round trip of the record (which
/// serde_json's fast float parser may miss by an ulp) needs room; anything larger is a real
/// difference in the stored values, the source or the record.
pub const REL_ERROR_SLACK: f64 = 1e-9;

/// Matrix `name`'s conversion record (`macko-convert.NAME`): its key and parsed JSON, or `None`
/// when the file has none (written by the container directly, or by an older `convert`).
fn conversion_record(
    file: &MatrixFile,
    name: &str,
) -> std::result::Result<Option<(String, serde_json::Value)>, String> {
    let key = format!("{CONVERT_METADATA_PREFIX}{name}");
    let Some(value) = file.metadata().and_then(|m| m.get(&key)) else {
        return Ok(None);
    };
    let json = serde_json::from_str(value)
        .map_err(|e| format!("conversion record `{key}` is not JSON: {e}"))?;
    Ok(Some((key, json)))
}

/// The pruning a conversion record names.
#[derive(Debug, Clone, Copy, PartialEq)]
enum RecordedPrune {
    /// None: the weights were stored as they are.
    Kept,
    /// Every row to this density.
    Density(f64),
    /// Every group of four columns to its two largest |w| (`"2:4"`).
    TwoOfFour,
}

/// The pruning a conversion record names (`prune_to`: a density, `"2:4"`, or null/absent).
fn recorded_prune(
    record: Option<&(String, serde_json::Value)>,
) -> std::result::Result<RecordedPrune, String> {
    let Some((key, json)) = record else {
        return Ok(RecordedPrune::Kept);
    };
    match json.get("prune_to") {
        None | Some(serde_json::Value::Null) => Ok(RecordedPrune::Kept),
        Some(v) if v.as_str() == Some("2:4") => Ok(RecordedPrune::TwoOfFour),
        Some(v) => match v.as_f64() {
            Some(d) => prune::check_density(d)
                .map(RecordedPrune::Density)
                .map_err(|e| format!("conversion record `{key}`: prune_to: {e}")),
            None => Err(format!(
                "conversion record `{key}`: prune_to is {v}, expected a number, \"2:4\" or null"
            )),
        },
    }
}

/// The source as the conversion left it: pruned as recorded, with the words that say so in a
/// problem (" pruned to density 0.5").
fn pruned_source(
    expected: DenseMatrix,
    prune_to: RecordedPrune,
) -> std::result::Result<(DenseMatrix, String), String> {
    match prune_to {
        RecordedPrune::Kept => Ok((expected, String::new())),
        RecordedPrune::Density(d) => prune::magnitude_per_row(&expected, d)
            .map(|m| (m, format!(" pruned to density {d}")))
            .map_err(|e| e.to_string()),
        RecordedPrune::TwoOfFour => Sparse24Matrix::prune_from_dense(&expected)
            .and_then(|s| s.to_dense())
            .map(|m| (m, " pruned to 2:4".to_string()))
            .map_err(|e| e.to_string()),
    }
}

/// What a conversion record says about quantization: the quantization (`None`: f16 values; an
/// absent `quantize` field means the same, as unquantized conversions do not write it) and the
/// promised relative error, if recorded. A field of the wrong type or out of range is an error
/// naming the key, the field and the rule.
fn recorded_quant(
    key: &str,
    json: &serde_json::Value,
) -> std::result::Result<(Option<Quantization>, Option<f64>), String> {
    let bad = |field: &str, v: &serde_json::Value, rule: &str| {
        format!("conversion record `{key}`: {field} is {v}, expected {rule}")
    };
    let null = serde_json::Value::Null;
    let bits = match json.get("quantize").unwrap_or(&null) {
        serde_json::Value::Null => None,
        v => Some(
            v.as_str()
                .and_then(QuantBits::parse)
                .ok_or_else(|| bad("quantize", v, "\"int8\", \"int4\" or null"))?,
        ),
    };
    let group = match json.get("group").unwrap_or(&null) {
        serde_json::Value::Null => None,
        v => {
            let g = v
                .as_u64()
                .and_then(|g| u32::try_from(g).ok())
                .ok_or_else(|| bad("group", v, "a group size or null"))?;
            ScaleLayout::PerGroup(g)
                .check()
                .map_err(|e| format!("conversion record `{key}`: group: {e}"))?;
            Some(g)
        }
    };
    let quantization = match (bits, group) {
        (Some(bits), g) => Some(Quantization {
            bits,
            scales: g.map_or(ScaleLayout::PerRow, ScaleLayout::PerGroup),
        }),
        (None, None) => None,
        (None, Some(g)) => {
            return Err(format!(
                "conversion record `{key}`: group is {g} but quantize is null; a scale group \
                 only exists for quantized values"
            ))
        }
    };
    let rel_error = match json.get("rel_error").unwrap_or(&null) {
        serde_json::Value::Null => None,
        v => Some(
            v.as_f64()
                .filter(|e| e.is_finite() && *e >= 0.0)
                .ok_or_else(|| bad("rel_error", v, "a finite number ≥ 0 or null"))?,
        ),
    };
    Ok((quantization, rel_error))
}

/// Writes row `r` of a matrix of f16 values into `row` (its `cols` elements, zeros where
/// nothing is stored), for the bit-for-bit comparison with the source. One row at a time, so
/// that checking a matrix costs one row of memory beyond the source, whatever shape the file
/// claims. Quantized matrices are never decoded (they are held to their recorded error), so they
/// have no row here.
fn decode_row(m: &AnyMatrix, r: usize, row: &mut [f16]) -> bool {
    row.fill(f16::ZERO);
    match m {
        AnyMatrix::Macko(m) => m.row_entries(r).for_each(|(c, v)| row[c] = v),
        AnyMatrix::Csr(m) => m
            .row_range(r)
            .for_each(|i| row[m.col_idx()[i] as usize] = m.values()[i]),
        AnyMatrix::Dense(m) => row.copy_from_slice(m.row(r)),
        AnyMatrix::HomogeneousCsr(m) => m.row_columns(r).for_each(|c| row[c] = m.weight()),
        // Padding positions (columns past the last) hold zeros and have no place in the row.
        AnyMatrix::Sparse24(m) => m.row_entries(r).for_each(|(c, v)| {
            if let Some(slot) = row.get_mut(c) {
                *slot = v;
            }
        }),
        AnyMatrix::MackoQuant(_) | AnyMatrix::DenseQuant(_) => return false,
    }
    true
}

/// `int8 per row`, or `f16 values` for none: a quantization as a problem names it.
fn describe(q: Option<Quantization>) -> String {
    q.map_or_else(|| "f16 values".to_string(), describe_quantization)
}

/// The first element where `stored` and `expected` differ, as the rule-naming message. Equal
/// means equal bits, except that ±0.0 are one value: the format does not preserve −0.0.
///
/// The shapes are compared before anything is decoded, and then one row at a time: a file that
/// claims a huge shape costs nothing beyond the source it is compared with.
fn first_difference(stored: &AnyMatrix, expected: &DenseMatrix, what: &str) -> Option<String> {
    let (rows, cols) = (expected.rows(), expected.cols());
    if (stored.rows(), stored.cols()) != (rows, cols) {
        return Some(format!(
            "source check: the source{what} is {rows}×{cols}, the stored matrix {}×{}",
            stored.rows(),
            stored.cols()
        ));
    }
    let differs = |s: f16, e: f16| s.to_bits() != e.to_bits() && !(is_zero(s) && is_zero(e));
    // A row's worth is justified by the source only when it has a row.
    let mut row = vec![f16::ZERO; if rows == 0 { 0 } else { cols }];
    let (mut first, mut count) = (None, 0usize);
    for r in 0..rows {
        if !decode_row(stored, r, &mut row) {
            return Some(format!(
                "source check: a {} matrix has no f16 values to compare bit for bit",
                stored.kind().as_str()
            ));
        }
        for (c, (&s, &e)) in row.iter().zip(expected.row(r)).enumerate() {
            if differs(s, e) {
                first = first.or(Some((r, c, s, e)));
                count += 1;
            }
        }
    }
    let (r, c, s, e) = first?;
    Some(format!(
        "source check (decoded equals the f16 source{what}, bit for bit): element ({r}, {c}) is \
         {s} (0x{:04x}) but the source has {e} (0x{:04x}); {count} element(s) differ",
        s.to_bits(),
        e.to_bits()
    ))
}

/// The source check's first question, asked before the source is decoded or pruned: does the
/// source's tensor of the same name have the stored matrix's shape? (Neither side's work may
/// depend on a shape the other does not share.) `None` when they agree or the source has no
/// such tensor (its decoding then names the problem).
fn shape_difference(src: &Checkpoint, name: &str, stored: &AnyMatrix) -> Option<String> {
    let entry = src.tensor(name)?;
    let shape = [stored.rows(), stored.cols()];
    (entry.shape != shape).then(|| {
        format!(
            "source check: the source is {}, the stored matrix {}×{}",
            entry.shape_text(),
            shape[0],
            shape[1]
        )
    })
}

/// Checks every matrix the file's metadata describes.
///
/// Each is loaded through `from_parts`, which checks every validity rule of docs/FORMAT.md; a
/// matrix that breaks one gets a problem naming the rule (`rule 3 (tail padding): …`). With
/// `against`, each matrix is also compared with the tensor of the same name in the source,
/// converted to binary16 as `convert` does and, where the conversion record
/// (`macko-convert.NAME`) names a pruning density, pruned the same way. A matrix of f16 values
/// must have the source's shape (checked first, from the headers) and equal it bit for bit,
/// decoded one row at a time (±0.0 count as one value, since the format stores −0.0 as +0.0).
/// Without `against` nothing is decoded: the arrays' rules are checked where they lie, so a
/// file claiming a huge shape costs no more than its bytes. A quantized matrix must be quantized as its record says (`quantize`,
/// `group`), and the relative error of its products against the source's, recomputed with the
/// same seeded vectors ([`super::relative_error`]), must not exceed the recorded `rel_error` by
/// more than [`REL_ERROR_SLACK`]: that is exactly what `convert` promised.
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
            prune_24: false,
            compared: false,
            quantization: info.quant,
            rel_error: None,
            recorded_rel_error: None,
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
        let stored_quant = match &matrix {
            AnyMatrix::Macko(m) => {
                check.entries = Some(m.entries());
                check.canonical = Some(m.is_canonical());
                None
            }
            AnyMatrix::Csr(m) => {
                check.entries = Some(m.nnz());
                None
            }
            AnyMatrix::Dense(m) => {
                check.entries = Some(m.values().len());
                None
            }
            AnyMatrix::MackoQuant(m) => {
                check.entries = Some(m.entries());
                Some(m.quantization())
            }
            AnyMatrix::DenseQuant(m) => {
                check.entries = Some(m.rows() * m.cols());
                Some(m.quantization())
            }
            AnyMatrix::Sparse24(m) => {
                check.entries = Some(m.values().len());
                None
            }
            AnyMatrix::HomogeneousCsr(m) => {
                check.entries = Some(m.nnz());
                None
            }
        };
        check.quantization = stored_quant;
        if let Some(src) = &source {
            check.compared = true;
            let result = (|| -> std::result::Result<Vec<String>, String> {
                let record = conversion_record(&f, &info.name)?;
                let prune_to = recorded_prune(record.as_ref())?;
                if let RecordedPrune::Density(d) = prune_to {
                    check.prune_to = Some(d);
                }
                check.prune_24 = prune_to == RecordedPrune::TwoOfFour;
                if let Some(problem) = shape_difference(src, &info.name, &matrix) {
                    return Ok(vec![problem]);
                }
                let source = src.dense(&info.name).map_err(|e| e.to_string())?;
                let (expected, what) = pruned_source(source, prune_to)?;
                let (recorded, promised) = match &record {
                    Some((key, json)) => recorded_quant(key, json)?,
                    None => (None, None),
                };
                let mut problems = Vec::new();
                if recorded != stored_quant && (record.is_some() || stored_quant.is_none()) {
                    let key = format!("{CONVERT_METADATA_PREFIX}{}", info.name);
                    problems.push(format!(
                        "quantization check (the values are stored as the conversion record \
                         says): the matrix holds {} but `{key}` records {}",
                        describe(stored_quant),
                        describe(recorded)
                    ));
                }
                if stored_quant.is_none() {
                    problems.extend(first_difference(&matrix, &expected, &what));
                    return Ok(problems);
                }
                // Quantized values are not the source's: what `convert` promised is that W·x
                // stays within the recorded relative error of the (pruned) f16 weights'.
                check.recorded_rel_error = promised;
                let Some(promised) = promised else {
                    let missing = match &record {
                        Some((key, _)) => format!("`{key}` records no rel_error"),
                        None => format!(
                            "there is no conversion record `{CONVERT_METADATA_PREFIX}{}`",
                            info.name
                        ),
                    };
                    problems.push(format!(
                        "error check: the values are quantized but {missing}, so there is no \
                         bound to hold them to against the source"
                    ));
                    return Ok(problems);
                };
                let e = relative_error(matrix.as_ref(), &expected).map_err(|e| e.to_string())?;
                check.rel_error = Some(e);
                if e > promised + promised * REL_ERROR_SLACK {
                    problems.push(format!(
                        "error check (relative error of W·x against the f16 source{what} ≤ \
                         the recorded rel_error, with {REL_ERROR_SLACK:e} relative slack): \
                         recomputed {e:.6e}, the conversion record promises {promised:.6e}"
                    ));
                }
                Ok(problems)
            })();
            match result {
                Ok(problems) => check.problems.extend(problems),
                Err(problem) => check.problems.push(problem),
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

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;
    use macko_format::{MackoMatrix, QuantMackoMatrix};

    fn record(
        json: serde_json::Value,
    ) -> std::result::Result<(Option<Quantization>, Option<f64>), String> {
        recorded_quant("macko-convert.w", &json)
    }

    #[test]
    fn records_read_back_what_convert_writes_and_name_bad_fields() {
        let q = Quantization::int4_per_group(64);
        assert_eq!(
            record(serde_json::json!({"quantize": "int4", "group": 64, "rel_error": 0.1})),
            Ok((Some(q), Some(0.1)))
        );
        assert_eq!(
            record(serde_json::json!({"quantize": "int8", "group": null})),
            Ok((Some(Quantization::int8_per_row()), None))
        );
        // An unquantized conversion writes none of the fields.
        assert_eq!(
            record(serde_json::json!({"prune_to": 0.5})),
            Ok((None, None))
        );
        for (json, says) in [
            (
                serde_json::json!({"quantize": "int2"}),
                "quantize is \"int2\"",
            ),
            (
                serde_json::json!({"quantize": "int4", "group": 12}),
                "multiple of 8",
            ),
            (serde_json::json!({"group": 64}), "quantize is null"),
            (
                serde_json::json!({"quantize": "int8", "rel_error": -1.0}),
                "rel_error is -1.0",
            ),
        ] {
            let e = record(json.clone()).expect_err("refused");
            assert!(
                e.contains("macko-convert.w") && e.contains(says),
                "{json}: {e}"
            );
        }
    }

    #[test]
    fn recorded_pruning_reads_densities_2_4_and_nothing() {
        let prune = |json: serde_json::Value| recorded_prune(Some(&("k".to_string(), json)));
        assert_eq!(prune(serde_json::json!({})), Ok(RecordedPrune::Kept));
        assert_eq!(
            prune(serde_json::json!({"prune_to": null})),
            Ok(RecordedPrune::Kept)
        );
        assert_eq!(
            prune(serde_json::json!({"prune_to": 0.25})),
            Ok(RecordedPrune::Density(0.25))
        );
        assert_eq!(
            prune(serde_json::json!({"prune_to": "2:4"})),
            Ok(RecordedPrune::TwoOfFour)
        );
        let e = prune(serde_json::json!({"prune_to": "1:4"})).expect_err("refused");
        assert!(e.contains("prune_to is \"1:4\""), "{e}");
    }

    #[test]
    fn a_quantized_matrix_without_a_record_has_no_bound_to_check() {
        let dir = std::env::temp_dir().join(format!("macko-verify-q-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let (src, out) = (dir.join("src.safetensors"), dir.join("q.safetensors"));
        let values = (0..4 * 16)
            .map(|i| f16::from_f32(i as f32 / 8.0 - 4.0))
            .collect();
        let w = DenseMatrix::new(4, 16, values).expect("dense");
        let m = MackoMatrix::from_dense(&w).expect("encode");
        let q = QuantMackoMatrix::quantize(&m, Quantization::int8_per_row()).expect("quantize");
        container::save(&src, &[("w", (&w).into())]).expect("save source");
        container::save(&out, &[("w", (&q).into())]).expect("save quantized");
        let report = verify(&out, Some(&src)).expect("verify");
        let check = &report.matrices[0];
        assert_eq!(check.quantization, Some(Quantization::int8_per_row()));
        assert_eq!(check.rel_error, None);
        assert_eq!(check.problems.len(), 1, "{:?}", check.problems);
        assert!(
            check.problems[0].contains("no conversion record `macko-convert.w`"),
            "{:?}",
            check.problems
        );
        // Without a source there is nothing to compare: the matrix's rules alone pass.
        assert!(verify(&out, None).expect("verify").passed());
        std::fs::remove_dir_all(&dir).ok();
    }
}

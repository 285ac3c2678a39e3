//! `convert`: every selected 2-D floating tensor of a checkpoint encoded as MACKO-16-4 (or, with
//! [`ConvertOptions::quantize`], MACKO with int8/int4 values; with [`ConvertOptions::prune_24`],
//! pruned to 2:4 and stored as a 2:4 matrix) through the container, every other tensor copied
//! byte for byte, written atomically.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use macko_format::container::{self, MatrixRef, OutTensor};
use macko_format::{
    DenseMatrix, MackoMatrix, QuantMackoMatrix, Quantization, ScaleLayout, Sparse24Matrix,
    FORMAT_NAME, FORMAT_VERSION,
};
use rayon::prelude::*;
use safetensors::SafeTensors;

use super::accuracy::relative_error;
use super::file::{Checkpoint, CheckpointError, Result, TensorEntry};
use super::limits;
use super::output::{write_safetensors, TempOutput};
use super::pattern::Pattern;
use crate::prune;

/// Metadata key of the file-wide conversion record: a JSON object with the tool, its version,
/// the format name and version, the pruning (`prune_to`: a density, `"2:4"`, or null) and the
/// source file's name; with
/// quantization also `quantize` (`"int8"`/`"int4"`) and `group` (G, or null for per-row scales).
pub const CONVERT_METADATA_KEY: &str = "macko-convert";

/// Prefix of the per-matrix conversion record: matrix `w` is described by `macko-convert.w`, a
/// JSON object with `source_dtype`, `source_shape`, `density` (kept non-zeros over elements),
/// `prune_to` (the pruning density, `"2:4"` for 2:4 pruning, or null) and the format name and
/// version. `macko verify
/// --against` reads `prune_to` to prune the source the same way before comparing.
///
/// A quantized matrix's record adds `quantize` (`"int8"` or `"int4"`), `group` (the scale group
/// G, or null for one scale per row) and `rel_error`, the relative error of its products against
/// the (pruned) f16 weights ([`super::relative_error`]): what `verify --against` recomputes and
/// holds it to. Unquantized records leave these fields out, so a conversion without
/// quantization writes exactly the bytes it always did.
///
/// (Not `macko.`: that prefix belongs to the container's matrix descriptions.)
pub const CONVERT_METADATA_PREFIX: &str = "macko-convert.";

/// What to convert and how.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConvertOptions {
    /// Convert only the 2-D floating tensors matching one of these patterns (all of them when
    /// empty). A literal name must exist and be a 2-D F16/BF16/F32 tensor; a wildcard pattern
    /// must match at least one tensor.
    pub include: Vec<Pattern>,
    /// Leave the tensors matching one of these patterns unconverted (copied). Each pattern must
    /// match at least one tensor.
    pub exclude: Vec<Pattern>,
    /// Prune each row to this density first ([`prune::magnitude_per_row`]); `None` keeps the
    /// weights as they are (an already-pruned checkpoint).
    pub prune_to: Option<f64>,
    /// Leave matrices of fewer elements than this unconverted; tensors named literally by
    /// `include` are converted whatever their size.
    pub min_size: u64,
    /// Quantize each converted matrix's values after pruning and encoding
    /// ([`QuantMackoMatrix::quantize`]), and measure what that costs ([`super::relative_error`]);
    /// `None` stores f16 values, exactly as before quantization existed.
    pub quantize: Option<Quantization>,
    /// Prune each matrix to 2:4 (each group of four columns keeps its two largest |w|,
    /// [`Sparse24Matrix::prune_from_dense`]) and store it as a 2:4 matrix instead of MACKO.
    /// Excludes `prune_to` and `quantize` ([`CheckpointError::Conflict`]).
    pub prune_24: bool,
}

/// Where a conversion is, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress<'a> {
    /// The selection is made: this many tensors will be converted.
    Planned {
        /// Tensors to convert.
        tensors: usize,
    },
    /// A tensor is about to be converted.
    Converting {
        /// Its position in the plan, from 0.
        index: usize,
        /// Its name.
        name: &'a str,
    },
    /// Every tensor is converted; the output is being written.
    Writing,
}

/// What happened to one converted tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorReport {
    /// The tensor's name (also the matrix's name in the output).
    pub name: String,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// The source dtype (`F32`, `BF16`, `F16`).
    pub source_dtype: String,
    /// Non-zero weights stored (after pruning).
    pub nonzeros: u64,
    /// Bytes as dense binary16: 2·rows·cols.
    pub dense_f16_bytes: u64,
    /// Bytes as CSR with u32 indices: 4·(rows + 1) + 6·nonzeros.
    pub csr_bytes: u64,
    /// Bytes of the stored matrix: 2.5·P + 4·(rows + 1) for MACKO-16-4; with quantized values
    /// 1.5·P (int8) or P (int4), plus 2 per scale, + 4·(rows + 1); pruned to 2:4, 4.5 per group
    /// of four columns (two values, a nibble).
    pub macko_bytes: u64,
    /// The quantization applied, if any.
    pub quantization: Option<Quantization>,
    /// With quantization: ‖W_q·x − W·x‖ / ‖W·x‖ over the seeded activation vectors
    /// ([`super::relative_error`]), W the f16 weights after pruning, so it is quantization's
    /// cost alone (pruning's is not in it). `None` without quantization (the error is 0: MACKO
    /// stores the f16 weights exactly).
    pub rel_error: Option<f64>,
}

impl TensorReport {
    /// Non-zeros over elements.
    pub fn density(&self) -> f64 {
        ratio(self.nonzeros, self.rows as u64 * self.cols as u64)
    }

    /// MACKO bytes over dense binary16 bytes.
    pub fn effective_density(&self) -> f64 {
        ratio(self.macko_bytes, self.dense_f16_bytes)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// A tensor copied unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopiedTensor {
    /// Its name.
    pub name: String,
    /// Its dtype.
    pub dtype: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its bytes.
    pub bytes: u64,
}

/// The outcome of [`convert()`].
#[derive(Debug, Clone, PartialEq)]
pub struct ConvertReport {
    /// The converted tensors, in name order.
    pub converted: Vec<TensorReport>,
    /// The tensors copied unchanged, in name order.
    pub copied: Vec<CopiedTensor>,
    /// The pruning density applied, if any.
    pub prune_to: Option<f64>,
    /// Whether every converted matrix was pruned to 2:4 and stored as such.
    pub prune_24: bool,
    /// The quantization applied, if any.
    pub quantize: Option<Quantization>,
    /// Size of the input file.
    pub input_bytes: u64,
    /// Size of the file written.
    pub output_bytes: u64,
}

impl ConvertReport {
    /// Total non-zeros of the converted tensors.
    pub fn nonzeros(&self) -> u64 {
        self.converted.iter().map(|t| t.nonzeros).sum()
    }
    /// Total elements of the converted tensors.
    pub fn elements(&self) -> u64 {
        self.converted
            .iter()
            .map(|t| t.rows as u64 * t.cols as u64)
            .sum()
    }
    /// Total dense binary16 bytes of the converted tensors.
    pub fn dense_f16_bytes(&self) -> u64 {
        self.converted.iter().map(|t| t.dense_f16_bytes).sum()
    }
    /// Total CSR bytes of the converted tensors.
    pub fn csr_bytes(&self) -> u64 {
        self.converted.iter().map(|t| t.csr_bytes).sum()
    }
    /// Total MACKO bytes of the converted tensors.
    pub fn macko_bytes(&self) -> u64 {
        self.converted.iter().map(|t| t.macko_bytes).sum()
    }
}

/// The `quantize` and `group` fields of a conversion record: `("int8", null)` for per-row
/// scales, `("int4", 64)` for groups of 64 (`verify`'s `recorded_quant` reads them back).
fn quant_fields(q: Quantization) -> (&'static str, Option<u32>) {
    let group = match q.scales {
        ScaleLayout::PerRow => None,
        ScaleLayout::PerGroup(g) => Some(g),
    };
    (q.bits.as_str(), group)
}

/// The options' own rules, checked before any file is opened: a valid density and scale
/// layout, and 2:4 pruning alone (it is a pruning of its own, and stores f16 values).
fn check_options(opts: &ConvertOptions) -> Result<()> {
    if let Some(d) = opts.prune_to {
        prune::check_density(d)?;
    }
    if let Some(q) = opts.quantize {
        q.scales.check()?;
    }
    if opts.prune_24 && opts.quantize.is_some() {
        return Err(CheckpointError::Conflict {
            first: "--prune-to 2:4",
            second: "--quantize",
            why: "2:4 matrices store f16 values (there is no quantized 2:4 format yet)",
        });
    }
    if opts.prune_24 && opts.prune_to.is_some() {
        return Err(CheckpointError::Conflict {
            first: "--prune-to 2:4",
            second: "a pruning density",
            why: "a matrix is pruned one way",
        });
    }
    Ok(())
}

/// The `prune_to` field of the conversion records: the density, `"2:4"`, or null.
fn prune_record(opts: &ConvertOptions) -> serde_json::Value {
    if opts.prune_24 {
        "2:4".into()
    } else {
        opts.prune_to.into()
    }
}

/// One converted matrix, as it is stored.
enum Encoded {
    Macko(MackoMatrix),
    /// With its relative error against the f16 weights.
    Quant(QuantMackoMatrix, f64),
    Sparse24(Sparse24Matrix),
}

impl Encoded {
    fn as_ref(&self) -> MatrixRef<'_> {
        match self {
            Encoded::Macko(m) => MatrixRef::Macko(m),
            Encoded::Quant(qm, _) => MatrixRef::MackoQuant(qm),
            Encoded::Sparse24(s) => MatrixRef::Sparse24(s),
        }
    }

    fn rel_error(&self) -> Option<f64> {
        match self {
            Encoded::Quant(_, e) => Some(*e),
            _ => None,
        }
    }

    /// Non-zero values stored (padding and the zero fill of 2:4 groups not counted).
    fn nonzeros(&self, dense: &DenseMatrix) -> u64 {
        let values = match self {
            Encoded::Sparse24(s) => s.values(),
            _ => dense.values(),
        };
        values
            .par_iter()
            .filter(|v| !macko_format::is_zero(**v))
            .count() as u64
    }
}

/// Encodes one (already density-pruned) matrix as `opts` asks; `context` names it in errors.
fn encode(dense: &DenseMatrix, opts: &ConvertOptions, context: &str) -> Result<Encoded> {
    if opts.prune_24 {
        return Ok(Encoded::Sparse24(Sparse24Matrix::prune_from_dense(dense)?));
    }
    let m = MackoMatrix::from_dense(dense)?;
    let Some(q) = opts.quantize else {
        return Ok(Encoded::Macko(m));
    };
    let qm =
        QuantMackoMatrix::quantize(&m, q).map_err(|e| macko_format::FormatError::Container {
            context: context.to_string(),
            message: format!("quantizing to {}: {e}", describe_quantization(q)),
        })?;
    let rel_error = relative_error((&qm).into(), dense)?;
    Ok(Encoded::Quant(qm, rel_error))
}

/// Chooses the tensors to convert, refusing patterns and names that cannot be honoured.
fn select(ckpt: &Checkpoint, opts: &ConvertOptions) -> Result<Vec<String>> {
    let file = ckpt.path().display().to_string();
    let selection = |message: String| CheckpointError::Selection {
        file: file.clone(),
        message,
    };
    let tensors = ckpt.tensors();
    for (flag, patterns) in [("--include", &opts.include), ("--exclude", &opts.exclude)] {
        for p in patterns {
            if p.is_literal() {
                let Some(entry) = ckpt.tensor(p.as_str()) else {
                    return Err(selection(format!(
                        "{flag} {p}: no tensor named `{p}`; the file holds {} tensors{}",
                        tensors.len(),
                        similar_names(tensors, p.as_str())
                    )));
                };
                if flag == "--include" && !entry.is_float_matrix() {
                    return Err(selection(format!(
                        "{flag} {p}: tensor `{p}` is {} with shape {}; only 2-D F16, BF16 or \
                         F32 tensors can be encoded as matrices",
                        entry.dtype,
                        entry.shape_text()
                    )));
                }
            } else if !tensors.iter().any(|t| p.matches(&t.name)) {
                return Err(selection(format!(
                    "{flag} {p}: the pattern matches none of the {} tensors",
                    tensors.len()
                )));
            }
        }
    }
    let selected: Vec<String> = tensors
        .iter()
        .filter(|t| t.is_float_matrix())
        .filter(|t| {
            let literal = opts
                .include
                .iter()
                .any(|p| p.is_literal() && p.as_str() == t.name);
            let included =
                opts.include.is_empty() || opts.include.iter().any(|p| p.matches(&t.name));
            let excluded = opts.exclude.iter().any(|p| p.matches(&t.name));
            included && !excluded && (literal || t.elements() >= opts.min_size)
        })
        .map(|t| t.name.clone())
        .collect();
    if selected.is_empty() {
        return Err(selection(format!(
            "no tensor selected for conversion ({} tensors, {} of them 2-D F16/BF16/F32; \
             check --include, --exclude and --min-size)",
            tensors.len(),
            tensors.iter().filter(|t| t.is_float_matrix()).count()
        )));
    }
    Ok(selected)
}

/// The bounds of [`super::limits`] on every selected tensor, before the output is created or
/// anything is decoded: a header can claim any shape, and only these checks keep a tiny file
/// from asking for terabytes.
fn check_limits(ckpt: &Checkpoint, selected: &[String], prune_to: Option<f64>) -> Result<()> {
    let limit = |error| CheckpointError::Limit {
        file: ckpt.path().display().to_string(),
        error,
    };
    let matrices: Vec<(&str, &[usize])> = selected
        .iter()
        .filter_map(|n| ckpt.tensor(n))
        .map(|e| (e.name.as_str(), e.shape.as_slice()))
        .collect();
    for &(name, shape) in &matrices {
        limits::check_encodable(name, shape).map_err(limit)?;
    }
    if let Some(d) = prune_to {
        limits::check_pruning(matrices.iter().copied(), d).map_err(limit)?;
    }
    let converted: BTreeSet<&str> = selected.iter().map(String::as_str).collect();
    let copied = ckpt
        .tensors()
        .iter()
        .map(|t| t.name.as_str())
        .filter(|n| !converted.contains(n));
    let metadata_bytes: u64 = ckpt.file().metadata().map_or(0, |m| {
        m.iter().map(|(k, v)| (k.len() + v.len() + 6) as u64).sum()
    });
    limits::check_header(converted.iter().copied(), copied, metadata_bytes).map_err(limit)?;
    Ok(())
}

/// The input's matrix descriptions (`macko.<name>`) of names left unconverted are copied into
/// the output, so each must load here: one that loads nothing (stale, hand-edited, another
/// tool's) would make an output that every reader refuses, `verify` included. Checked before
/// the output is created; the descriptions of converted names are replaced and need not load.
fn check_kept_descriptions(ckpt: &Checkpoint, selected: &[String]) -> Result<()> {
    let Some(metadata) = ckpt.file().metadata() else {
        return Ok(());
    };
    let mut kept: Vec<&str> = metadata
        .keys()
        .filter_map(|k| k.strip_prefix(container::METADATA_PREFIX))
        .filter(|n| !selected.iter().any(|s| s == n))
        .collect();
    kept.sort_unstable();
    for name in kept {
        if let Err(e) = ckpt.file().matrix(name) {
            return Err(CheckpointError::Selection {
                file: ckpt.path().display().to_string(),
                message: format!(
                    "the matrix description `{}{name}` does not load, and the output would \
                     keep it (remove the entry, or convert `{name}` too): {e}",
                    container::METADATA_PREFIX
                ),
            });
        }
    }
    Ok(())
}

/// ", e.g. a, b" listing names that share the longest prefix with `name`, to spot a typo.
fn similar_names(tensors: &[TensorEntry], name: &str) -> String {
    let common = |t: &TensorEntry| {
        t.name
            .chars()
            .zip(name.chars())
            .take_while(|(a, b)| a == b)
            .count()
    };
    let best = tensors.iter().map(common).max().unwrap_or(0);
    let names: Vec<&str> = tensors
        .iter()
        .filter(|t| common(t) == best)
        .take(4)
        .map(|t| t.name.as_str())
        .collect();
    if names.is_empty() {
        String::new()
    } else {
        format!(", e.g. {}", names.join(", "))
    }
}

/// Converts a checkpoint: every selected tensor (by default, every 2-D F16/BF16/F32 tensor) is
/// rounded to binary16 (a finite value beyond binary16's range is an error naming the tensor,
/// element and value), pruned per row if `opts.prune_to` says so (or to 2:4 and stored as such
/// if `opts.prune_24` does), encoded as MACKO-16-4,
/// quantized if `opts.quantize` says so (its relative error measured against the pruned f16
/// weights) and stored through the container's layout; every other tensor is copied unchanged;
/// the input's metadata is kept and the conversion is recorded under [`CONVERT_METADATA_KEY`]
/// and [`CONVERT_METADATA_PREFIX`].
///
/// The output is written to a temporary file beside it and renamed into place only when
/// complete: on any error (bad input, a full disk) nothing is left behind and an existing
/// output is untouched. `progress` is told where the conversion is.
pub fn convert(
    input: &Path,
    output: &Path,
    opts: &ConvertOptions,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<ConvertReport> {
    check_options(opts)?;
    let ckpt = Checkpoint::open(input)?;
    let selected = select(&ckpt, opts)?;
    check_limits(&ckpt, &selected, opts.prune_to)?;
    check_kept_descriptions(&ckpt, &selected)?;
    // Created now, so an unwritable output fails before the work rather than after it.
    let temp = TempOutput::create(output)?;
    progress(Progress::Planned {
        tensors: selected.len(),
    });

    // Each matrix is serialised by the container as soon as it is encoded (its own small
    // safetensors image), so only the stored bytes are held, not the matrix and a copy.
    let mut encoded: Vec<Vec<u8>> = Vec::with_capacity(selected.len());
    let mut converted = Vec::with_capacity(selected.len());
    for (index, name) in selected.iter().enumerate() {
        progress(Progress::Converting { index, name });
        let entry = ckpt
            .tensor(name)
            .ok_or_else(|| CheckpointError::Selection {
                file: input.display().to_string(),
                message: format!("tensor `{name}` vanished from the table"),
            })?;
        let mut dense = ckpt.dense(name)?;
        if let Some(d) = opts.prune_to {
            dense = prune::magnitude_per_row(&dense, d)?;
        }
        let context = format!("{}, tensor `{name}`", input.display());
        let stored = encode(&dense, opts, &context)?;
        let nonzeros = stored.nonzeros(&dense);
        let (rows, cols) = (dense.rows(), dense.cols());
        converted.push(TensorReport {
            name: name.clone(),
            rows,
            cols,
            source_dtype: entry.dtype.clone(),
            nonzeros,
            dense_f16_bytes: dense.bytes(),
            csr_bytes: 4 * (rows as u64 + 1) + 6 * nonzeros,
            macko_bytes: stored.as_ref().bytes(),
            quantization: opts.quantize,
            rel_error: stored.rel_error(),
        });
        let stored = stored.as_ref();
        encoded.push(container::to_bytes(&[(name.as_str(), stored)])?);
    }
    progress(Progress::Writing);

    let selected_set: BTreeSet<&str> = selected.iter().map(String::as_str).collect();
    let copied_entries: Vec<&TensorEntry> = ckpt
        .tensors()
        .iter()
        .filter(|t| !selected_set.contains(t.name.as_str()))
        .collect();
    let mut copied_data = Vec::with_capacity(copied_entries.len());
    for entry in &copied_entries {
        copied_data.push(ckpt.raw_bytes(entry)?);
    }

    let internal = |e: safetensors::SafeTensorError| CheckpointError::Write {
        path: output.display().to_string(),
        message: format!("internal: the container's own bytes do not parse: {e}"),
    };
    let clash = |name: &str| CheckpointError::Selection {
        file: input.display().to_string(),
        message: format!(
            "tensor `{name}` would be written twice: it clashes with an array of a converted \
             matrix (a matrix `w` is stored as `w.row_ptr`, `w.values`, `w.codes`, or as \
             `w.values`, `w.meta` in 2:4); exclude one of them"
        ),
    };

    // Tensors: the container's arrays, then the copies; no name may appear twice. Metadata:
    // the input's (minus stale descriptions of the converted names), the container's matrix
    // descriptions, and the conversion record.
    let mut metadata: HashMap<String, String> = HashMap::new();
    if let Some(m) = ckpt.file().metadata() {
        for (k, v) in m {
            let stale = k == CONVERT_METADATA_KEY
                || k.strip_prefix(CONVERT_METADATA_PREFIX)
                    .is_some_and(|n| selected_set.contains(n))
                || k.strip_prefix(container::METADATA_PREFIX)
                    .is_some_and(|n| selected_set.contains(n));
            if !stale {
                metadata.insert(k.clone(), v.clone());
            }
        }
    }
    let mut names = BTreeSet::new();
    let mut tensors: Vec<(String, OutTensor<'_>)> = Vec::new();
    for bytes in &encoded {
        let (_, meta) = SafeTensors::read_metadata(bytes).map_err(internal)?;
        if let Some(m) = meta.metadata() {
            metadata.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        for (name, view) in SafeTensors::deserialize(bytes).map_err(internal)?.tensors() {
            if !names.insert(name.clone()) {
                return Err(clash(&name));
            }
            tensors.push((
                name,
                OutTensor {
                    dtype: view.dtype(),
                    shape: view.shape().to_vec(),
                    data: Cow::Borrowed(view.data()),
                },
            ));
        }
    }
    for (entry, data) in copied_entries.iter().zip(copied_data) {
        if !names.insert(entry.name.clone()) {
            return Err(clash(&entry.name));
        }
        tensors.push((
            entry.name.clone(),
            OutTensor {
                dtype: entry.dtype_raw,
                shape: entry.shape.clone(),
                data: Cow::Owned(data),
            },
        ));
    }
    let mut run = serde_json::json!({
        "tool": "macko convert",
        "macko_version": env!("CARGO_PKG_VERSION"),
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "prune_to": prune_record(opts),
        "source": input.file_name().map(|n| n.to_string_lossy().into_owned()),
    });
    if let (Some(q), Some(obj)) = (opts.quantize, run.as_object_mut()) {
        let (bits, group) = quant_fields(q);
        obj.insert("quantize".into(), bits.into());
        obj.insert("group".into(), group.into());
    }
    metadata.insert(CONVERT_METADATA_KEY.to_string(), run.to_string());
    for t in &converted {
        let mut record = serde_json::json!({
            "source_dtype": t.source_dtype,
            "source_shape": [t.rows, t.cols],
            "density": t.density(),
            "prune_to": prune_record(opts),
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
        });
        if let (Some(q), Some(obj)) = (t.quantization, record.as_object_mut()) {
            let (bits, group) = quant_fields(q);
            obj.insert("quantize".into(), bits.into());
            obj.insert("group".into(), group.into());
            obj.insert("rel_error".into(), t.rel_error.into());
        }
        metadata.insert(
            format!("{CONVERT_METADATA_PREFIX}{}", t.name),
            record.to_string(),
        );
    }

    // Checksums of every tensor written, converted or copied (replacing the partial records of
    // the container's images and any of the input's): a file cut short by a crash is refused
    // when loaded, by `verify` and every reader of the container.
    metadata.insert(
        container::CHECKSUMS_KEY.to_string(),
        container::checksum_record(tensors.iter().map(|(n, t)| (n.as_str(), t.data.as_ref()))),
    );
    let label = output.display().to_string();
    write_safetensors(temp.path(), tensors, metadata)?;
    let output_bytes = std::fs::metadata(temp.path())
        .map(|m| m.len())
        .map_err(|e| CheckpointError::Write {
            path: label.clone(),
            message: e.to_string(),
        })?;
    temp.persist()?;

    let input_bytes = std::fs::metadata(input).map(|m| m.len()).unwrap_or(0);
    Ok(ConvertReport {
        converted,
        copied: copied_entries
            .iter()
            .map(|e| CopiedTensor {
                name: e.name.clone(),
                dtype: e.dtype.clone(),
                shape: e.shape.clone(),
                bytes: e.bytes,
            })
            .collect(),
        prune_to: opts.prune_to,
        prune_24: opts.prune_24,
        quantize: opts.quantize,
        input_bytes,
        output_bytes,
    })
}

/// `int8 per row` or `int4 per group of 64`: a quantization as reports and messages put it.
pub fn describe_quantization(q: Quantization) -> String {
    match q.scales {
        ScaleLayout::PerRow => format!("{} per row", q.bits.as_str()),
        ScaleLayout::PerGroup(g) => format!("{} per group of {g}", q.bits.as_str()),
    }
}

//! The safetensors container: MACKO, CSR, homogeneous CSR, dense and 2:4 matrices stored as
//! named tensors in one `.safetensors` file, and plain 2-D weight tensors read from any
//! checkpoint.
//!
//! # Layout
//!
//! A matrix named `w` is stored as
//!
//! | kind | tensors |
//! | --- | --- |
//! | MACKO | `w.row_ptr` (U32, rows + 1), `w.values` (F16, P), `w.codes` (U8, P / 2) |
//! | CSR | `w.row_ptr` (U32, rows + 1), `w.col_idx` (U32, nnz), `w.values` (F16, nnz) |
//! | dense | `w` (F16, shape `[rows, cols]`) |
//! | MACKO, quantized | `w.row_ptr` (U32), `w.codes` (U8), `w.q` (I8, P; int4: U8, P / 2), `w.scales` (F16) |
//! | dense, quantized | `w.q` (I8, rows·cols; int4: U8, ⌈rows·cols / 2⌉), `w.scales` (F16) |
//! | homogeneous CSR (`csr-homogeneous`) | `w.row_ptr` (U32, rows + 1), `w.col_idx` (U32, nnz), `w.weight` (F16, 1) |
//! | 2:4 (`sparse24`) | `w.values` (F16, 2 per group of 4 columns), `w.meta` (U8, ⌈groups / 2⌉) |
//!
//! and described by the metadata entry `macko.w`, a JSON object such as
//! `{"format":"MACKO-16-4","version":1,"kind":"macko","rows":4096,"cols":11008}`; a quantized
//! matrix adds `"bits":"int8"` or `"int4"` and `"scales":"row"` or the group size (a number). The arrays
//! are exactly those of docs/FORMAT.md, little-endian, so a GPU backend can upload them unchanged.
//! `cols` lives in the metadata because MACKO arrays do not determine it. On loading, row
//! pointers and column indices stored as I32 (the reference implementation's dtype) are
//! accepted too, and refused if any is negative.
//!
//! # Trust
//!
//! A file is untrusted input. Loading reads it into memory once (`std::fs::read`, so every
//! size below is bounded by the file's real length), parses the header with explicit bounds,
//! checks that the tensors cover exactly the data that the file holds, checks every tensor's
//! dtype and rank, and builds matrices only through `from_parts`, which checks every validity
//! rule of docs/FORMAT.md. Nothing on this path panics or allocates more than the file's size.
//! Where the file records checksums of its tensors ([`CHECKSUMS_KEY`]; this crate's writer
//! and `macko convert` do), each is checked on loading, so a file that was not completely
//! written is an error rather than a valid matrix of zeros.
//!
//! ```
//! use half::f16;
//! use macko_format::container::{self, AnyMatrix};
//! use macko_format::{DenseMatrix, MackoMatrix};
//!
//! let mut values = vec![f16::ZERO; 3 * 40];
//! values[5] = f16::from_f32(1.5);
//! values[70] = f16::from_f32(-2.0);
//! let dense = DenseMatrix::new(3, 40, values)?;
//! let m = MackoMatrix::from_dense(&dense)?;
//!
//! let path = std::env::temp_dir().join(format!("macko-doc-{}.safetensors", std::process::id()));
//! container::save(&path, &[("layer0", (&m).into()), ("layer0.dense", (&dense).into())])?;
//! let back = container::load_matrix(&path, "layer0")?;
//! assert_eq!(back, AnyMatrix::Macko(m));
//! assert_eq!(container::load(&path)?.len(), 2);
//! # std::fs::remove_file(&path).ok();
//! # Ok::<(), macko_format::FormatError>(())
//! ```

use std::collections::HashMap;
use std::path::Path;

use half::{bf16, f16};
use rayon::prelude::*;
use safetensors::tensor::{Metadata, TensorInfo};
use safetensors::Dtype;

use crate::csr::CsrMatrix;
use crate::csr_homogeneous::HomogeneousCsrMatrix;
use crate::dense::DenseMatrix;
use crate::dense_quant::QuantDenseMatrix;
use crate::error::{FormatError, Result};
use crate::macko::{MackoMatrix, FORMAT_NAME, FORMAT_VERSION};
use crate::macko_quant::QuantMackoMatrix;
pub use crate::matrix::{AnyMatrix, MatrixKind, MatrixRef};
use crate::sparse24::Sparse24Matrix;
pub use checksum::{record as checksum_record, CHECKSUMS_KEY};
use layout::q_dtype;
pub use layout::{tensor_names, METADATA_PREFIX};
pub use save::{save, to_bytes, OutTensor};

mod checksum;
mod layout;
mod save;
mod unique_keys;
use crate::quant::{QuantBits, Quantization, ScaleLayout};

/// Largest header accepted, as in the safetensors crate: a header is JSON text describing the
/// tensors, and a bound keeps a corrupt length from asking for an absurd read.
pub const MAX_HEADER_BYTES: u64 = 100_000_000;

/// At most this many names are listed when a name is not found.
const NAMES_IN_ERRORS: usize = 8;

/// What the metadata says about one stored matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatrixInfo {
    /// The matrix's name (the metadata key without [`METADATA_PREFIX`]).
    pub name: String,
    /// Its format.
    pub kind: MatrixKind,
    /// Rows, as the metadata states them.
    pub rows: usize,
    /// Columns, as the metadata states them.
    pub cols: usize,
    /// Width and scale layout of a quantized matrix (`None` for the binary16 formats).
    pub quant: Option<Quantization>,
}

// ---------------------------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------------------------

/// Every matrix that the file's metadata describes, validated, sorted by name. A file without
/// MACKO metadata (a plain checkpoint) gives an empty list; read its tensors with
/// [`load_dense_tensor`].
pub fn load(path: impl AsRef<Path>) -> Result<Vec<(String, AnyMatrix)>> {
    MatrixFile::open(path)?.matrices()
}

/// The matrix `name` of the file, validated.
pub fn load_matrix(path: impl AsRef<Path>, name: &str) -> Result<AnyMatrix> {
    MatrixFile::open(path)?.matrix(name)
}

/// A 2-D F16, BF16 or F32 tensor of any safetensors file (a checkpoint, say) as a dense binary16
/// matrix; see [`MatrixFile::dense_tensor`].
///
/// ```
/// use macko_format::{container, MackoMatrix};
/// # let path = std::env::temp_dir().join(format!("macko-doc2-{}.safetensors", std::process::id()));
/// # let d = macko_format::DenseMatrix::zeros(4, 8)?;
/// # container::save(&path, &[("model.layers.0.mlp.up_proj.weight", (&d).into())])?;
/// let w = container::load_dense_tensor(&path, "model.layers.0.mlp.up_proj.weight")?;
/// let m = MackoMatrix::from_dense(&w)?;
/// assert_eq!((m.rows(), m.cols()), (4, 8));
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), macko_format::FormatError>(())
/// ```
pub fn load_dense_tensor(path: impl AsRef<Path>, name: &str) -> Result<DenseMatrix> {
    MatrixFile::open(path)?.dense_tensor(name)
}

/// A `.safetensors` file read into memory with its header parsed and checked: the place to
/// read several matrices or tensors from one file without reading it again.
///
/// ```
/// use macko_format::container::{self, MatrixFile, MatrixKind};
/// use macko_format::DenseMatrix;
///
/// let d = DenseMatrix::zeros(2, 3)?;
/// let bytes = container::to_bytes(&[("d", (&d).into())])?;
/// let file = MatrixFile::from_bytes("in-memory", bytes)?;
/// let info = file.matrix_infos()?;
/// assert_eq!((info[0].kind, info[0].rows, info[0].cols), (MatrixKind::Dense, 2, 3));
/// assert_eq!(file.dense_tensor("d")?, d);
/// # Ok::<(), macko_format::FormatError>(())
/// ```
#[derive(Debug, Clone)]
pub struct MatrixFile {
    label: String,
    bytes: Vec<u8>,
    /// Where the tensor data begins: 8 + header length.
    data_start: usize,
    metadata: Metadata,
}

impl MatrixFile {
    /// Reads and checks a file. A missing or unreadable file is [`FormatError::Io`] with its
    /// path; a corrupt header is [`FormatError::Container`] saying what is wrong.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let label = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| FormatError::Io {
            path: label.clone(),
            kind: e.kind(),
            message: e.to_string(),
        })?;
        Self::from_bytes(label, bytes)
    }

    /// Checks the bytes of a file; `label` names it in errors.
    ///
    /// The header is parsed here rather than by `SafeTensors::deserialize`, because the latter
    /// (in safetensors 0.8) adds the declared data length to the header length unchecked: a
    /// crafted header whose tensor sizes sum close to `usize::MAX` makes that addition overflow,
    /// which panics wherever overflow checks are on (debug builds, our tests). Here the sums are
    /// compared without adding.
    pub fn from_bytes(label: impl Into<String>, bytes: Vec<u8>) -> Result<Self> {
        let label = label.into();
        let corrupt = |message: String| FormatError::Container {
            context: label.clone(),
            message: format!("not a valid safetensors file: {message}"),
        };
        let Some(length) = bytes.get(..8) else {
            return Err(corrupt(format!(
                "{} bytes, shorter than the 8-byte header length",
                bytes.len()
            )));
        };
        let mut length_bytes = [0u8; 8];
        length_bytes.copy_from_slice(length);
        let header_len = u64::from_le_bytes(length_bytes);
        if header_len > MAX_HEADER_BYTES {
            return Err(corrupt(format!(
                "header length {header_len} exceeds the limit of {MAX_HEADER_BYTES} bytes"
            )));
        }
        // header_len ≤ 10⁸, so this neither truncates nor overflows.
        let data_start = 8 + header_len as usize;
        let Some(header) = bytes.get(8..data_start) else {
            return Err(corrupt(format!(
                "header length {header_len} runs past the end of the {}-byte file",
                bytes.len()
            )));
        };
        serde_json::from_slice::<unique_keys::UniqueKeys>(header)
            .map_err(|e| corrupt(format!("header: {e}")))?;
        let metadata: Metadata = serde_json::from_slice(header)
            .map_err(|e| corrupt(format!("header is not a valid tensor table: {e}")))?;
        // `Metadata` has checked that the tensors are contiguous from 0 and that each one's
        // byte length equals its shape × dtype (with checked products); so the data section is
        // exactly [0, data_len) and it must be what follows the header.
        let data_len = metadata.data_len();
        let available = bytes.len() - data_start;
        if data_len != available {
            return Err(corrupt(format!(
                "the header describes {data_len} bytes of tensor data, the file holds \
                 {available} after the header"
            )));
        }
        let file = Self {
            label,
            bytes,
            data_start,
            metadata,
        };
        checksum::check(&file.label, file.metadata(), |name| {
            file.tensor(name).ok().map(|(_, data)| data)
        })?;
        Ok(file)
    }

    /// The label errors name the file by (its path, for [`MatrixFile::open`]).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Every tensor name in the file, sorted.
    pub fn tensor_names(&self) -> Vec<String> {
        let mut names = self.metadata.offset_keys();
        names.sort();
        names
    }

    /// The file's metadata key/value pairs (`__metadata__` of safetensors), if any.
    pub fn metadata(&self) -> Option<&HashMap<String, String>> {
        self.metadata.metadata().as_ref()
    }

    /// The names and shapes of the matrices the metadata describes, sorted by name. An entry
    /// that cannot be understood (wrong format name, newer version, bad JSON) is an error, not
    /// skipped: a file that claims to hold a matrix must deliver it.
    pub fn matrix_infos(&self) -> Result<Vec<MatrixInfo>> {
        let mut infos = Vec::new();
        if let Some(metadata) = self.metadata() {
            for (key, value) in metadata {
                if let Some(name) = key.strip_prefix(METADATA_PREFIX) {
                    infos.push(self.parse_info(name, value)?);
                }
            }
        }
        infos.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(infos)
    }

    /// Every matrix the metadata describes, validated, sorted by name.
    pub fn matrices(&self) -> Result<Vec<(String, AnyMatrix)>> {
        self.matrix_infos()?
            .into_iter()
            .map(|info| Ok((info.name.clone(), self.load_info(&info)?)))
            .collect()
    }

    /// The matrix `name`, validated through `from_parts`. A name the metadata does not describe
    /// is [`FormatError::NotFound`] listing some that it does; arrays that break a rule are
    /// [`FormatError::InContainer`] wrapping the rule's error.
    pub fn matrix(&self, name: &str) -> Result<AnyMatrix> {
        let key = format!("{METADATA_PREFIX}{name}");
        let Some(value) = self.metadata().and_then(|m| m.get(&key)) else {
            let names: Vec<String> = self
                .metadata()
                .map(|m| {
                    m.keys()
                        .filter_map(|k| k.strip_prefix(METADATA_PREFIX))
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            return Err(self.not_found("matrix", name, names));
        };
        let info = self.parse_info(name, value)?;
        self.load_info(&info)
    }

    /// A 2-D tensor of dtype F16, BF16 or F32 as a dense binary16 matrix: the way in for the
    /// weights of a real checkpoint, which the encoders then compress.
    ///
    /// BF16 and F32 are rounded to the nearest binary16 (ties to even). A value that is finite
    /// in the source but too large for binary16 (|v| ≥ 65520, which rounds to ±∞) is refused
    /// with [`FormatError::F16Overflow`] naming the tensor, the element and the value, since
    /// silently turning weights into infinities would poison every product. Values too small for
    /// binary16 round to a subnormal or to zero, as round-to-nearest defines; NaN and ±∞ already
    /// in the source are kept.
    ///
    /// Other dtypes, and tensors that are not 2-D, are [`FormatError::Container`] errors; a
    /// missing name is [`FormatError::NotFound`].
    pub fn dense_tensor(&self, name: &str) -> Result<DenseMatrix> {
        let (info, data) = self.tensor(name)?;
        let context = self.tensor_context(name);
        let [rows, cols] = info.shape[..] else {
            return Err(FormatError::Container {
                context,
                message: format!(
                    "is {}-D with shape {:?}, a matrix must be 2-D",
                    info.shape.len(),
                    info.shape
                ),
            });
        };
        let values = match info.dtype {
            Dtype::F16 => decode_par(data, |b: &[u8; 2]| f16::from_bits(u16::from_le_bytes(*b))),
            Dtype::BF16 => narrow(data, cols, &context, |b: &[u8; 2]| {
                bf16::from_bits(u16::from_le_bytes(*b)).to_f32()
            })?,
            Dtype::F32 => narrow(data, cols, &context, |b: &[u8; 4]| f32::from_le_bytes(*b))?,
            other => {
                return Err(FormatError::Container {
                    context,
                    message: format!(
                        "has dtype {other:?}; a weight matrix must be F16, BF16 or F32"
                    ),
                })
            }
        };
        DenseMatrix::new(rows, cols, values).map_err(|e| in_container(context, e))
    }

    // -- internals ----------------------------------------------------------------------------

    fn tensor_context(&self, tensor: &str) -> String {
        format!("{}, tensor `{tensor}`", self.label)
    }

    fn not_found(&self, what: &'static str, name: &str, mut names: Vec<String>) -> FormatError {
        names.sort();
        let total = names.len();
        names.truncate(NAMES_IN_ERRORS);
        FormatError::NotFound {
            context: self.label.clone(),
            what,
            name: name.to_string(),
            available: names,
            total,
        }
    }

    /// The tensor's header entry and its bytes.
    fn tensor(&self, name: &str) -> Result<(&TensorInfo, &[u8])> {
        let Some(info) = self.metadata.info(name) else {
            return Err(self.not_found("tensor", name, self.metadata.offset_keys()));
        };
        let (start, end) = info.data_offsets;
        // Checked in `from_bytes`; `get` keeps a broken invariant an error rather than a panic.
        let data = start
            .checked_add(self.data_start)
            .zip(end.checked_add(self.data_start))
            .and_then(|(s, e)| self.bytes.get(s..e))
            .ok_or_else(|| FormatError::Container {
                context: self.tensor_context(name),
                message: format!("data offsets {start}..{end} lie outside the file"),
            })?;
        Ok((info, data))
    }

    fn parse_info(&self, name: &str, value: &str) -> Result<MatrixInfo> {
        let context = format!("{}, metadata `{METADATA_PREFIX}{name}`", self.label);
        let bad = |message: String| FormatError::Container {
            context: context.clone(),
            message,
        };
        let json: serde_json::Value = serde_json::from_str(value)
            .map_err(|e| bad(format!("is not JSON ({e}): {value:.200}")))?;
        let field = |key: &str| {
            json.get(key)
                .ok_or_else(|| bad(format!("has no field `{key}`")))
        };
        let format = field("format")?;
        if format.as_str() != Some(FORMAT_NAME) {
            return Err(bad(format!(
                "format is {format}, this library reads \"{FORMAT_NAME}\""
            )));
        }
        let version = field("version")?;
        if version.as_u64() != Some(u64::from(FORMAT_VERSION)) {
            return Err(bad(format!(
                "format version is {version}, this library reads version {FORMAT_VERSION}"
            )));
        }
        let kind = field("kind")?;
        let kind = kind.as_str().and_then(MatrixKind::parse).ok_or_else(|| {
            bad(format!(
                "kind is {kind}, expected \"macko\", \"csr\", \"dense\", \"macko-quant\", \
                 \"dense-quant\", \"sparse24\" or \"csr-homogeneous\""
            ))
        })?;
        let quant =
            match kind {
                MatrixKind::MackoQuant | MatrixKind::DenseQuant => {
                    let bits = field("bits")?;
                    let bits = bits.as_str().and_then(QuantBits::parse).ok_or_else(|| {
                        bad(format!("bits is {bits}, expected \"int8\" or \"int4\""))
                    })?;
                    let scales = field("scales")?;
                    let scales = match (scales.as_str(), scales.as_u64()) {
                        (Some("row"), _) => ScaleLayout::PerRow,
                        (_, Some(g)) => ScaleLayout::PerGroup(u32::try_from(g).map_err(|_| {
                            bad(format!("scales is {g}, a group size must fit u32"))
                        })?),
                        _ => {
                            return Err(bad(format!(
                                "scales is {scales}, expected \"row\" or a group size"
                            )))
                        }
                    };
                    Some(Quantization { bits, scales })
                }
                _ => None,
            };
        let size = |key: &str| -> Result<usize> {
            let v = field(key)?;
            v.as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| {
                    bad(format!(
                        "{key} is {v}, expected an integer ≥ 0 that fits usize"
                    ))
                })
        };
        Ok(MatrixInfo {
            name: name.to_string(),
            kind,
            rows: size("rows")?,
            cols: size("cols")?,
            quant,
        })
    }

    fn load_info(&self, info: &MatrixInfo) -> Result<AnyMatrix> {
        let (name, rows, cols) = (info.name.as_str(), info.rows, info.cols);
        let context = format!(
            "{}, {} matrix `{name}` ({rows}×{cols})",
            self.label,
            info.kind.as_str()
        );
        match info.kind {
            MatrixKind::Macko => {
                let row_ptr = self.read_u32(&format!("{name}.row_ptr"))?;
                let values = self.read_f16(&format!("{name}.values"))?;
                let codes = self.read_u8(&format!("{name}.codes"))?;
                MackoMatrix::from_parts(rows, cols, row_ptr, values, codes)
                    .map(AnyMatrix::Macko)
                    .map_err(|e| in_container(context, e))
            }
            MatrixKind::Csr => {
                let row_ptr = self.read_u32(&format!("{name}.row_ptr"))?;
                let col_idx = self.read_u32(&format!("{name}.col_idx"))?;
                let values = self.read_f16(&format!("{name}.values"))?;
                CsrMatrix::from_parts(rows, cols, row_ptr, col_idx, values)
                    .map(AnyMatrix::Csr)
                    .map_err(|e| in_container(context, e))
            }
            MatrixKind::Dense => {
                let (tensor, data) = self.tensor(name)?;
                if tensor.dtype != Dtype::F16 || tensor.shape != [rows, cols] {
                    return Err(FormatError::Container {
                        context: self.tensor_context(name),
                        message: format!(
                            "is {:?} with shape {:?}; the metadata promises F16 [{rows}, {cols}]",
                            tensor.dtype, tensor.shape
                        ),
                    });
                }
                let values = decode_par(data, |b: &[u8; 2]| f16::from_bits(u16::from_le_bytes(*b)));
                DenseMatrix::new(rows, cols, values)
                    .map(AnyMatrix::Dense)
                    .map_err(|e| in_container(context, e))
            }
            MatrixKind::MackoQuant => {
                let quant = self.quant_of(info)?;
                let row_ptr = self.read_u32(&format!("{name}.row_ptr"))?;
                let codes = self.read_u8(&format!("{name}.codes"))?;
                let q = self.read_q(&format!("{name}.q"), quant.bits)?;
                let scales = self.read_f16(&format!("{name}.scales"))?;
                QuantMackoMatrix::from_parts(quant, rows, cols, row_ptr, codes, q, scales)
                    .map(AnyMatrix::MackoQuant)
                    .map_err(|e| in_container(context, e))
            }
            MatrixKind::DenseQuant => {
                let quant = self.quant_of(info)?;
                let q = self.read_q(&format!("{name}.q"), quant.bits)?;
                let scales = self.read_f16(&format!("{name}.scales"))?;
                QuantDenseMatrix::from_parts(quant, rows, cols, q, scales)
                    .map(AnyMatrix::DenseQuant)
                    .map_err(|e| in_container(context, e))
            }
            MatrixKind::HomogeneousCsr => {
                let row_ptr = self.read_u32(&format!("{name}.row_ptr"))?;
                let col_idx = self.read_u32(&format!("{name}.col_idx"))?;
                let weight_name = format!("{name}.weight");
                let weight = match self.read_f16(&weight_name)?[..] {
                    [w] => w,
                    ref other => {
                        return Err(FormatError::Container {
                            context: self.tensor_context(&weight_name),
                            message: format!(
                                "holds {} values; a homogeneous CSR weight is one F16 value",
                                other.len()
                            ),
                        })
                    }
                };
                HomogeneousCsrMatrix::from_parts(rows, cols, row_ptr, col_idx, weight)
                    .map(AnyMatrix::HomogeneousCsr)
                    .map_err(|e| in_container(context, e))
            }
            MatrixKind::Sparse24 => {
                let values = self.read_f16(&format!("{name}.values"))?;
                let meta = self.read_u8(&format!("{name}.meta"))?;
                Sparse24Matrix::from_parts(rows, cols, values, meta)
                    .map(AnyMatrix::Sparse24)
                    .map_err(|e| in_container(context, e))
            }
        }
    }

    /// The quantization a quantized matrix's metadata states (parse_info always sets it for
    /// those kinds; an error rather than a panic if that ever changes).
    fn quant_of(&self, info: &MatrixInfo) -> Result<Quantization> {
        info.quant.ok_or_else(|| FormatError::Container {
            context: format!("{}, metadata `{METADATA_PREFIX}{}`", self.label, info.name),
            message: "a quantized matrix needs `bits` and `scales`".into(),
        })
    }

    /// Packed quantized codes: I8 for int8, U8 for int4 (two per byte).
    fn read_q(&self, name: &str, bits: QuantBits) -> Result<Vec<u8>> {
        let (_, data) = self.array(name, &[q_dtype(bits)])?;
        Ok(data.to_vec())
    }

    /// A 1-D tensor's bytes, after checking its dtype against `allowed`.
    fn array(&self, name: &str, allowed: &[Dtype]) -> Result<(Dtype, &[u8])> {
        let (info, data) = self.tensor(name)?;
        if !allowed.contains(&info.dtype) || info.shape.len() != 1 {
            return Err(FormatError::Container {
                context: self.tensor_context(name),
                message: format!(
                    "is {:?} with shape {:?}; expected a 1-D array of {}",
                    info.dtype,
                    info.shape,
                    allowed
                        .iter()
                        .map(|d| format!("{d:?}"))
                        .collect::<Vec<_>>()
                        .join(" or ")
                ),
            });
        }
        Ok((info.dtype, data))
    }

    /// A U32 array; I32 is accepted too (the reference implementation's dtype for row
    /// pointers) as long as no element is negative.
    fn read_u32(&self, name: &str) -> Result<Vec<u32>> {
        let (dtype, data) = self.array(name, &[Dtype::U32, Dtype::I32])?;
        let values = decode_par(data, |b: &[u8; 4]| u32::from_le_bytes(*b));
        if dtype == Dtype::I32 {
            if let Some(index) = values.iter().position(|&v| v > i32::MAX as u32) {
                return Err(FormatError::Container {
                    context: self.tensor_context(name),
                    message: format!(
                        "element {index} is {}, an index cannot be negative",
                        values[index] as i32
                    ),
                });
            }
        }
        Ok(values)
    }

    fn read_f16(&self, name: &str) -> Result<Vec<f16>> {
        let (_, data) = self.array(name, &[Dtype::F16])?;
        Ok(decode_par(data, |b: &[u8; 2]| {
            f16::from_bits(u16::from_le_bytes(*b))
        }))
    }

    fn read_u8(&self, name: &str) -> Result<Vec<u8>> {
        let (_, data) = self.array(name, &[Dtype::U8])?;
        Ok(data.to_vec())
    }
}

fn in_container(context: String, e: FormatError) -> FormatError {
    FormatError::InContainer {
        context,
        source: Box::new(e),
    }
}

/// Elements of `N` little-endian bytes decoded in parallel. `data.len()` is a multiple of `N`
/// for any tensor the header check accepted; a ragged end would be ignored, never read past.
fn decode_par<T: Send, const N: usize>(
    data: &[u8],
    decode: impl Fn(&[u8; N]) -> T + Sync,
) -> Vec<T> {
    data.par_chunks_exact(N)
        .map(|b| {
            let mut a = [0u8; N];
            a.copy_from_slice(b);
            decode(&a)
        })
        .collect()
}

/// Rounds wider floats to binary16, refusing the first finite value that overflows.
fn narrow<const N: usize>(
    data: &[u8],
    cols: usize,
    context: &str,
    to_f32: impl Fn(&[u8; N]) -> f32 + Sync,
) -> Result<Vec<f16>> {
    let source = |b: &[u8]| {
        let mut a = [0u8; N];
        a.copy_from_slice(b);
        to_f32(&a)
    };
    let overflows = |b: &[u8]| {
        let v = source(b);
        v.is_finite() && f16::from_f32(v).is_infinite()
    };
    if let Some(index) = data.par_chunks_exact(N).position_first(overflows) {
        // An element exists, so cols > 0; `max(1)` only keeps the division total.
        let cols = cols.max(1);
        let value = data
            .chunks_exact(N)
            .nth(index)
            .map_or(f64::NAN, |b| f64::from(source(b)));
        return Err(FormatError::F16Overflow {
            context: context.to_string(),
            row: index / cols,
            col: index % cols,
            value,
        });
    }
    Ok(data
        .par_chunks_exact(N)
        .map(|b| f16::from_f32(source(b)))
        .collect())
}

//! A `.safetensors` checkpoint as this module reads it: its tensors, their entries and the
//! errors of reading, converting and verifying one. A leaf of the module: `convert`, `verify`
//! and `products` build on it, and `mod.rs` only declares and re-exports.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use macko_format::container::MatrixFile;
use macko_format::{DenseMatrix, FormatError};
use safetensors::tensor::Metadata;
use safetensors::Dtype;
use thiserror::Error;

use crate::prune::DensityOutOfRange;

/// Largest header read, the same bound as the container's: a corrupt length must not ask for
/// an absurd allocation.
const MAX_HEADER_BYTES: u64 = 100_000_000;

/// Everything that can go wrong on the way from a checkpoint to a converted, verified file.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// A file could not be read, is not a valid safetensors file, or holds a tensor or matrix
    /// that cannot be used (the error names the file, tensor and rule).
    #[error(transparent)]
    Format(#[from] FormatError),
    /// A device refused (no backend, out of memory, device error).
    #[error(transparent)]
    Device(#[from] crate::Error),
    /// A pruning density outside (0, 1].
    #[error("{0}")]
    Density(#[from] DensityOutOfRange),
    /// The tensors asked for cannot be converted: a name that does not exist, a tensor that is
    /// not a 2-D floating matrix, a pattern that matches nothing, a name clash in the output.
    #[error("{file}: {message}")]
    Selection {
        /// The checkpoint.
        file: String,
        /// What is wrong, naming the tensor or pattern.
        message: String,
    },
    /// A selected tensor's shape, or the pruning asked for, breaks one of the bounds `convert`
    /// checks before any work ([`LimitError`](super::LimitError)).
    #[error("{file}, {error}")]
    Limit {
        /// The checkpoint.
        file: String,
        /// The tensor, the value and the rule.
        #[source]
        error: super::limits::LimitError,
    },
    /// Two options that cannot be honoured together (2:4 pruning and quantization: 2:4
    /// matrices store binary16 values), named as the command line spells them.
    #[error("{first} cannot be combined with {second}: {why}")]
    Conflict {
        /// The first option.
        first: &'static str,
        /// The option it excludes.
        second: &'static str,
        /// Why.
        why: &'static str,
    },
    /// The output could not be written (nothing is left behind).
    #[error("writing {path}: {message}")]
    Write {
        /// The output file.
        path: String,
        /// What went wrong.
        message: String,
    },
}

/// Shorthand for results of this module.
pub type Result<T, E = CheckpointError> = std::result::Result<T, E>;

/// One tensor of a checkpoint, as its header describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorEntry {
    /// The tensor's name.
    pub name: String,
    /// Its dtype as safetensors spells it (`F32`, `BF16`, `I64`, …).
    pub dtype: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Bytes of its data.
    pub bytes: u64,
    /// Start of its data, relative to the data section.
    offset: u64,
    pub(super) dtype_raw: Dtype,
}

impl TensorEntry {
    /// Whether this is a matrix the converter can encode: 2-D, of dtype F16, BF16 or F32.
    pub fn is_float_matrix(&self) -> bool {
        self.shape.len() == 2 && matches!(self.dtype_raw, Dtype::F16 | Dtype::BF16 | Dtype::F32)
    }

    /// Number of elements (the product of the shape; 1 for a scalar).
    pub fn elements(&self) -> u64 {
        self.shape
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64))
            .unwrap_or(u64::MAX)
    }

    /// Whether this looks like the weight of a linear layer: a 2-D floating matrix whose name
    /// ends in `weight` and is not an embedding table (`embed` in the name), which is looked up
    /// by row rather than multiplied by a vector.
    pub fn is_linear_weight(&self) -> bool {
        self.is_float_matrix()
            && self.name.ends_with("weight")
            && !self.name.to_ascii_lowercase().contains("embed")
    }

    /// `384×1536`, `[1, 512]` for other ranks.
    pub fn shape_text(&self) -> String {
        shape_text(&self.shape)
    }
}

/// `rows×cols` for a matrix, the bracketed list for other ranks.
pub(crate) fn shape_text(shape: &[usize]) -> String {
    match shape {
        [r, c] => format!("{r}×{c}"),
        other => format!("{other:?}"),
    }
}

/// A `.safetensors` checkpoint opened for conversion: validated as a whole by the container's
/// [`MatrixFile`] (so the header and every tensor's extent are checked before anything else
/// happens), with the tensor table kept for listing and copying tensors of any dtype.
#[derive(Debug)]
pub struct Checkpoint {
    path: PathBuf,
    file: MatrixFile,
    entries: Vec<TensorEntry>,
    data_start: u64,
}

impl Checkpoint {
    /// Opens and checks a checkpoint. A missing file is an I/O error naming it; a corrupt header
    /// is a container error saying what is wrong.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = MatrixFile::open(&path)?;
        let (data_start, metadata) = read_header(&path)?;
        let mut entries: Vec<TensorEntry> = metadata
            .tensors()
            .into_iter()
            .map(|(name, info)| TensorEntry {
                name,
                dtype: format!("{:?}", info.dtype),
                shape: info.shape.clone(),
                bytes: (info.data_offsets.1 - info.data_offsets.0) as u64,
                offset: info.data_offsets.0 as u64,
                dtype_raw: info.dtype,
            })
            .collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Self {
            path,
            file,
            entries,
            data_start,
        })
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file as the container reads it (matrices, metadata, dense tensors).
    pub fn file(&self) -> &MatrixFile {
        &self.file
    }

    /// Every tensor, sorted by name.
    pub fn tensors(&self) -> &[TensorEntry] {
        &self.entries
    }

    /// The tensor called `name`, if there is one.
    pub fn tensor(&self, name: &str) -> Option<&TensorEntry> {
        self.entries
            .binary_search_by(|e| e.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.entries[i])
    }

    /// The linear-layer weights ([`TensorEntry::is_linear_weight`]), sorted by name.
    pub fn linear_weights(&self) -> Vec<&TensorEntry> {
        self.entries
            .iter()
            .filter(|e| e.is_linear_weight())
            .collect()
    }

    /// A 2-D F16/BF16/F32 tensor as binary16, through the container's conversion (values that
    /// overflow binary16 are an error naming the tensor, element and value).
    pub fn dense(&self, name: &str) -> Result<DenseMatrix> {
        Ok(self.file.dense_tensor(name)?)
    }

    /// The stored bytes of any tensor, unchanged.
    pub fn raw_bytes(&self, entry: &TensorEntry) -> Result<Vec<u8>> {
        let label = self.path.display().to_string();
        let io = |e: std::io::Error| FormatError::Io {
            path: label.clone(),
            kind: e.kind(),
            message: format!("reading tensor `{}`: {e}", entry.name),
        };
        let len = usize::try_from(entry.bytes).map_err(|_| FormatError::Container {
            context: format!("{label}, tensor `{}`", entry.name),
            message: format!("{} bytes do not fit in memory here", entry.bytes),
        })?;
        let mut f = std::fs::File::open(&self.path).map_err(io)?;
        f.seek(SeekFrom::Start(
            self.data_start.saturating_add(entry.offset),
        ))
        .map_err(io)?;
        let mut data = vec![0u8; len];
        f.read_exact(&mut data).map_err(io)?;
        Ok(data)
    }
}

/// The header of a safetensors file: where the data section begins, and the tensor table.
fn read_header(path: &Path) -> Result<(u64, Metadata)> {
    let label = path.display().to_string();
    let io = |e: std::io::Error| FormatError::Io {
        path: label.clone(),
        kind: e.kind(),
        message: e.to_string(),
    };
    let corrupt = |message: String| FormatError::Container {
        context: label.clone(),
        message: format!("not a valid safetensors file: {message}"),
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mut len = [0u8; 8];
    f.read_exact(&mut len).map_err(io)?;
    let n = u64::from_le_bytes(len);
    if n > MAX_HEADER_BYTES {
        return Err(corrupt(format!("header length {n} exceeds {MAX_HEADER_BYTES}")).into());
    }
    let mut header = vec![0u8; n as usize];
    f.read_exact(&mut header).map_err(io)?;
    let metadata: Metadata = serde_json::from_slice(&header)
        .map_err(|e| corrupt(format!("header is not a valid tensor table: {e}")))?;
    Ok((8 + n, metadata))
}

/// Bytes as a short human figure: `512 B`, `1.5 KiB`, `22.7 MiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

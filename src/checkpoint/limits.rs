//! What a checkpoint's header may ask `convert` to do, checked before any work: every
//! allocation the conversion makes must be justified by the bytes the input holds, or a small
//! constant beyond them. A tensor's shape is the only thing a tiny file can make large, so the
//! rules are on shapes:
//!
//! - rows and columns each fit in u32: the format's row offsets, column indices and the
//!   kernels' indices are 32-bit, so a larger matrix could never be stored or multiplied;
//! - a matrix has at most [`MAX_ROWS_BEYOND_ELEMENTS`] more rows than elements: encoding costs a
//!   4-byte row offset (and a task) per row whatever the row holds, so a `[2^40, 0]` tensor of 0
//!   data bytes would otherwise ask for 4 TiB;
//! - pruning keeps at least one weight in each row of every converted matrix: a density so low
//!   that ⌊d·cols⌋ = 0 would silently empty every row;
//! - the output's header fits the container's limit ([`MAX_HEADER_BYTES`]): every converted
//!   matrix adds three or four tensors and three metadata entries, so a file of many tiny
//!   tensors could otherwise be converted for seconds and gigabytes, then fail at writing.

use thiserror::Error;

use crate::prune;

pub use macko_format::container::MAX_HEADER_BYTES;

/// How many more rows than elements a converted matrix may have: rows with no data still cost
/// a 4-byte row offset each, and this bounds that cost (256 KiB) for a tensor of no data.
pub const MAX_ROWS_BEYOND_ELEMENTS: u64 = 65_536;

/// A selected tensor `convert` refuses before doing any work, naming the tensor, the value and
/// the rule it breaks.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum LimitError {
    /// A dimension does not fit in u32.
    #[error(
        "tensor `{tensor}`: {dim} {value} exceed {max}, the most a MACKO matrix can have \
         (its offsets and indices are 32-bit)",
        max = u32::MAX
    )]
    Dimension {
        /// The tensor.
        tensor: String,
        /// `rows` or `columns`.
        dim: &'static str,
        /// The dimension's value.
        value: usize,
    },
    /// Far more rows than the tensor has elements: its encoding would cost memory no byte of
    /// the input accounts for.
    #[error(
        "tensor `{tensor}`: shape {rows}×{cols} holds {elements} elements, but encoding needs a \
         4-byte row offset for each of its {rows} rows; a matrix may have at most \
         {MAX_ROWS_BEYOND_ELEMENTS} more rows than elements"
    )]
    RowsWithoutData {
        /// The tensor.
        tensor: String,
        /// Rows.
        rows: usize,
        /// Columns.
        cols: usize,
        /// rows × cols.
        elements: u64,
    },
    /// The output's header would exceed the container's limit.
    #[error(
        "the output would hold {tensors} tensors whose header takes at least {bytes} bytes, \
         over the limit of {MAX_HEADER_BYTES} that readers of safetensors files accept; \
         convert part of the tensors (--include / --exclude) into each of several files"
    )]
    HeaderTooLarge {
        /// Tensors converted or copied.
        tensors: u64,
        /// The header's size, at least.
        bytes: u64,
    },
    /// Pruning to `density` keeps no weight of a row.
    #[error(
        "tensor `{tensor}`: pruning to density {density:?} keeps ⌊density·{cols}⌋ = 0 of the \
         {cols} weights of each row, so every row would be empty; the smallest density that \
         keeps one weight a row is 1/{cols} ≈ {min:.3e}",
        min = 1.0 / *cols as f64
    )]
    PrunesEveryWeight {
        /// The tensor with the fewest columns.
        tensor: String,
        /// The density asked for.
        density: f64,
        /// Its columns.
        cols: usize,
    },
}

/// Header bytes every converted matrix adds at least, beyond 8 times its name: three tensor
/// entries (`"w.values":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},`, about 55 bytes each
/// beyond the name), its container description (`"macko.w":"{\"format\":…}"`, about 90), its
/// conversion record (about 150) and three checksums (about 14 each beyond the name).
const HEADER_BYTES_PER_MATRIX: u64 = 3 * 55 + 90 + 150 + 3 * 14;

/// The same for a copied tensor: its entry and its checksum, beyond twice its name.
const HEADER_BYTES_PER_COPY: u64 = 55 + 14;

/// Checks, before any work, that the output's header cannot exceed [`MAX_HEADER_BYTES`]: a lower
/// bound of its size from the names converted and copied and the input's metadata bytes.
pub fn check_header<'a>(
    converted: impl IntoIterator<Item = &'a str>,
    copied: impl IntoIterator<Item = &'a str>,
    metadata_bytes: u64,
) -> Result<(), LimitError> {
    let (mut tensors, mut bytes) = (0u64, metadata_bytes);
    for name in converted {
        tensors += 1;
        bytes = bytes.saturating_add(8 * name.len() as u64 + HEADER_BYTES_PER_MATRIX);
    }
    for name in copied {
        tensors += 1;
        bytes = bytes.saturating_add(2 * name.len() as u64 + HEADER_BYTES_PER_COPY);
    }
    if bytes > MAX_HEADER_BYTES {
        return Err(LimitError::HeaderTooLarge { tensors, bytes });
    }
    Ok(())
}

/// Checks that tensor `name` of `shape` (selected for conversion) can be encoded within the
/// bounds above; shapes of another rank are not matrices and pass. (Names and shapes rather
/// than a `TensorEntry`, so that this leaf imports nothing of the module.) The shape's product saturates rather than wraps (it cannot overflow at all once both
/// dimensions fit in u32).
pub fn check_encodable(name: &str, shape: &[usize]) -> Result<(), LimitError> {
    let [rows, cols] = shape[..] else {
        return Ok(());
    };
    for (dim, value) in [("rows", rows), ("columns", cols)] {
        if u32::try_from(value).is_err() {
            return Err(LimitError::Dimension {
                tensor: name.to_string(),
                dim,
                value,
            });
        }
    }
    let elements = (rows as u64).saturating_mul(cols as u64);
    if rows as u64 > elements.saturating_add(MAX_ROWS_BEYOND_ELEMENTS) {
        return Err(LimitError::RowsWithoutData {
            tensor: name.to_string(),
            rows,
            cols,
            elements,
        });
    }
    Ok(())
}

/// Checks that pruning to `density` keeps at least one weight in each row of every selected
/// matrix, given as `(name, shape)` (those of no column have nothing to keep), naming the one
/// with the fewest columns.
pub fn check_pruning<'a>(
    matrices: impl IntoIterator<Item = (&'a str, &'a [usize])>,
    density: f64,
) -> Result<(), LimitError> {
    let narrowest = matrices
        .into_iter()
        .filter_map(|(name, shape)| match shape[..] {
            [_, cols] if cols > 0 => Some((cols, name)),
            _ => None,
        })
        .min_by_key(|(cols, _)| *cols);
    match narrowest {
        Some((cols, name)) if prune::keep_count(cols, density) == 0 => {
            Err(LimitError::PrunesEveryWeight {
                tensor: name.to_string(),
                density,
                cols,
            })
        }
        _ => Ok(()),
    }
}

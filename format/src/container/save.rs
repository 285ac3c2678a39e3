//! Writing matrices into a safetensors container (the layout is in the parent module's
//! documentation).

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use half::f16;
use safetensors::{Dtype, SafeTensorError, View};

use super::checksum::{self, CHECKSUMS_KEY};
use super::layout::{q_dtype, tensor_names, METADATA_PREFIX};
use crate::error::{FormatError, Result};
use crate::macko::{FORMAT_NAME, FORMAT_VERSION};
use crate::matrix::MatrixRef;
use crate::quant::ScaleLayout;

/// One tensor to write, as safetensors stores it: dtype, shape and little-endian bytes
/// (borrowed where the host is little-endian). Also used by `macko convert` to copy tensors of
/// any dtype unchanged.
#[derive(Debug, Clone)]
pub struct OutTensor<'a> {
    /// Element type.
    pub dtype: Dtype,
    /// Dimensions.
    pub shape: Vec<usize>,
    /// The elements' bytes, little-endian.
    pub data: Cow<'a, [u8]>,
}

impl View for OutTensor<'_> {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self.data.as_ref())
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

fn u32_bytes(v: &[u32]) -> Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        Cow::Borrowed(bytemuck::cast_slice(v))
    } else {
        Cow::Owned(v.iter().flat_map(|x| x.to_le_bytes()).collect())
    }
}

fn f16_bytes(v: &[f16]) -> Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        Cow::Borrowed(bytemuck::cast_slice(v))
    } else {
        Cow::Owned(v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect())
    }
}

fn metadata_json(matrix: MatrixRef<'_>) -> String {
    let mut json = serde_json::json!({
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "kind": matrix.kind().as_str(),
        "rows": matrix.rows(),
        "cols": matrix.cols(),
    });
    let quant = match matrix {
        MatrixRef::MackoQuant(m) => Some(m.quantization()),
        MatrixRef::DenseQuant(m) => Some(m.quantization()),
        _ => None,
    };
    if let (Some(q), Some(obj)) = (quant, json.as_object_mut()) {
        obj.insert("bits".into(), q.bits.as_str().into());
        let scales = match q.scales {
            ScaleLayout::PerRow => serde_json::Value::from("row"),
            ScaleLayout::PerGroup(g) => serde_json::Value::from(g),
        };
        obj.insert("scales".into(), scales);
    }
    json.to_string()
}

/// The tensors and metadata of a set of matrices, with every name checked for clashes.
#[allow(clippy::type_complexity)]
fn prepare<'a>(
    matrices: &[(&str, MatrixRef<'a>)],
) -> Result<(Vec<(String, OutTensor<'a>)>, HashMap<String, String>)> {
    let mut tensors = Vec::new();
    let mut metadata = HashMap::new();
    let mut names = BTreeSet::new();
    for &(name, matrix) in matrices {
        let context = format!("matrix `{name}`");
        if name.is_empty() || name == "__metadata__" {
            return Err(FormatError::Container {
                context,
                message: "a matrix name must be non-empty and not `__metadata__` (reserved by \
                          safetensors for the metadata)"
                    .into(),
            });
        }
        let key = format!("{METADATA_PREFIX}{name}");
        if metadata.insert(key, metadata_json(matrix)).is_some() {
            return Err(FormatError::Container {
                context,
                message: "the name is given twice; each matrix needs its own name".into(),
            });
        }
        let parts: Vec<(Dtype, Vec<usize>, Cow<'a, [u8]>)> = match matrix {
            MatrixRef::Macko(m) => vec![
                (Dtype::U32, vec![m.row_ptr().len()], u32_bytes(m.row_ptr())),
                (Dtype::F16, vec![m.values().len()], f16_bytes(m.values())),
                (Dtype::U8, vec![m.codes().len()], Cow::Borrowed(m.codes())),
            ],
            MatrixRef::Csr(m) => vec![
                (Dtype::U32, vec![m.row_ptr().len()], u32_bytes(m.row_ptr())),
                (Dtype::U32, vec![m.col_idx().len()], u32_bytes(m.col_idx())),
                (Dtype::F16, vec![m.values().len()], f16_bytes(m.values())),
            ],
            MatrixRef::Dense(m) => {
                vec![(Dtype::F16, vec![m.rows(), m.cols()], f16_bytes(m.values()))]
            }
            MatrixRef::MackoQuant(m) => {
                let v = m.values();
                vec![
                    (Dtype::U32, vec![m.row_ptr().len()], u32_bytes(m.row_ptr())),
                    (Dtype::U8, vec![m.codes().len()], Cow::Borrowed(m.codes())),
                    (
                        q_dtype(v.bits()),
                        vec![v.packed().len()],
                        Cow::Borrowed(v.packed()),
                    ),
                    (Dtype::F16, vec![v.scales().len()], f16_bytes(v.scales())),
                ]
            }
            MatrixRef::DenseQuant(m) => {
                let v = m.values();
                vec![
                    (
                        q_dtype(v.bits()),
                        vec![v.packed().len()],
                        Cow::Borrowed(v.packed()),
                    ),
                    (Dtype::F16, vec![v.scales().len()], f16_bytes(v.scales())),
                ]
            }
            // The weight as a one-element tensor, so the file's checksum record covers it.
            MatrixRef::HomogeneousCsr(m) => vec![
                (Dtype::U32, vec![m.row_ptr().len()], u32_bytes(m.row_ptr())),
                (Dtype::U32, vec![m.col_idx().len()], u32_bytes(m.col_idx())),
                (
                    Dtype::F16,
                    vec![1],
                    Cow::Owned(m.weight().to_bits().to_le_bytes().to_vec()),
                ),
            ],
            MatrixRef::Sparse24(m) => vec![
                (Dtype::F16, vec![m.values().len()], f16_bytes(m.values())),
                (Dtype::U8, vec![m.meta().len()], Cow::Borrowed(m.meta())),
            ],
        };
        for (tensor_name, (dtype, shape, data)) in
            tensor_names(matrix.kind(), name).into_iter().zip(parts)
        {
            if !names.insert(tensor_name.clone()) {
                return Err(FormatError::Container {
                    context,
                    message: format!(
                        "its tensor `{tensor_name}` clashes with a tensor of another matrix; \
                         rename one of them"
                    ),
                });
            }
            tensors.push((tensor_name, OutTensor { dtype, shape, data }));
        }
    }
    metadata.insert(
        CHECKSUMS_KEY.to_string(),
        checksum::record(tensors.iter().map(|(n, t)| (n.as_str(), t.data.as_ref()))),
    );
    Ok((tensors, metadata))
}

fn write_error(path: &str, e: SafeTensorError) -> FormatError {
    match e {
        SafeTensorError::IoError(io) => FormatError::Io {
            path: path.to_string(),
            kind: io.kind(),
            message: io.to_string(),
        },
        other => FormatError::Container {
            context: path.to_string(),
            message: format!("cannot write safetensors: {other}"),
        },
    }
}

/// Writes matrices, each under its name, into one `.safetensors` file (replacing the file).
///
/// Names must be distinct, non-empty, and must not make tensor names clash (a dense matrix
/// `w.values` beside a MACKO matrix `w` would). See the [module documentation](crate::container) for the
/// layout and an example.
pub fn save(path: impl AsRef<Path>, matrices: &[(&str, MatrixRef<'_>)]) -> Result<()> {
    let path = path.as_ref();
    let label = path.display().to_string();
    let (tensors, metadata) = prepare(matrices)?;
    safetensors::serialize_to_file(tensors, Some(metadata), path)
        .map_err(|e| write_error(&label, e))
}

/// The bytes of the `.safetensors` file that [`save`] would write.
pub fn to_bytes(matrices: &[(&str, MatrixRef<'_>)]) -> Result<Vec<u8>> {
    let (tensors, metadata) = prepare(matrices)?;
    safetensors::serialize(tensors, Some(metadata)).map_err(|e| write_error("<memory>", e))
}

//! Names and dtypes of the container's layout, shared by saving and loading (a leaf module).

use safetensors::Dtype;

use crate::matrix::MatrixKind;
use crate::quant::QuantBits;

/// Prefix of the metadata key that describes a matrix: matrix `w` is described by `macko.w`.
pub const METADATA_PREFIX: &str = "macko.";

/// The tensor names that hold a matrix of `kind` called `name`.
pub fn tensor_names(kind: MatrixKind, name: &str) -> Vec<String> {
    match kind {
        MatrixKind::Macko => ["row_ptr", "values", "codes"]
            .iter()
            .map(|part| format!("{name}.{part}"))
            .collect(),
        MatrixKind::Csr => ["row_ptr", "col_idx", "values"]
            .iter()
            .map(|part| format!("{name}.{part}"))
            .collect(),
        MatrixKind::Dense => vec![name.to_string()],
        MatrixKind::MackoQuant => ["row_ptr", "codes", "q", "scales"]
            .iter()
            .map(|part| format!("{name}.{part}"))
            .collect(),
        MatrixKind::DenseQuant => ["q", "scales"]
            .iter()
            .map(|part| format!("{name}.{part}"))
            .collect(),
        MatrixKind::HomogeneousCsr => ["row_ptr", "col_idx", "weight"]
            .iter()
            .map(|part| format!("{name}.{part}"))
            .collect(),
        MatrixKind::Sparse24 => ["values", "meta"]
            .iter()
            .map(|part| format!("{name}.{part}"))
            .collect(),
    }
}

/// The safetensors dtype of packed quantized codes: I8 for int8, U8 for two int4 per byte.
pub(super) fn q_dtype(bits: QuantBits) -> Dtype {
    match bits {
        QuantBits::Int8 => Dtype::I8,
        QuantBits::Int4 => Dtype::U8,
    }
}

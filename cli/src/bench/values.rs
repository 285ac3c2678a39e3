//! The value types of `macko bench --values` and their scale groups (`--group`): what a
//! quantized kernel is called and how its matrix is quantized. A leaf module: the bench's
//! driver (mod.rs) and its report (report.rs) both read it.

use macko::{FormatError, QuantBits, Quantization, ScaleLayout};

/// The scale group of int4 values without `--group`: 64 values share a scale, the usual
/// group-wise int4 scheme (int8 keeps one scale per row: its error is small enough without
/// groups, and per-row scales cost the fewest bytes).
pub const DEFAULT_INT4_GROUP: u32 = 64;

/// A value type of `--values`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ValueType {
    /// binary16 values: MACKO, dense and CSR (and cuBLAS/cuSPARSE on CUDA), as always.
    F16,
    /// int8 codes with binary16 scales: `macko-int8` and `dense-int8`.
    Int8,
    /// int4 codes with binary16 scales: `macko-int4` and `dense-int4`.
    Int4,
}

impl ValueType {
    /// The quantized width, or `None` for f16.
    pub(super) fn bits(self) -> Option<QuantBits> {
        match self {
            ValueType::F16 => None,
            ValueType::Int8 => Some(QuantBits::Int8),
            ValueType::Int4 => Some(QuantBits::Int4),
        }
    }
}

/// The kernel names of one quantized width: the MACKO matrix quantized, then the dense one.
/// They are record names (`kernel` of results.csv/json), so they never change.
pub fn quant_kernels(bits: QuantBits) -> [&'static str; 2] {
    match bits {
        QuantBits::Int8 => ["macko-int8", "dense-int8"],
        QuantBits::Int4 => ["macko-int4", "dense-int4"],
    }
}

/// A `--group` value that is not a scale group.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    /// Not a whole number.
    #[error("group {text:?} is not a whole number of values ({reason})")]
    NotANumber {
        /// The value given.
        text: String,
        /// What the number parser said.
        reason: std::num::ParseIntError,
    },
    /// A number the format refuses as a scale group (the rule is in the message).
    #[error(transparent)]
    Rule(#[from] FormatError),
}

/// Parses `--group`, refusing what `ScaleLayout::check` refuses, so that a bad group fails
/// before any device is opened or any matrix built, with the format's own rule.
pub(super) fn parse_group(s: &str) -> Result<u32, GroupError> {
    let group = s
        .trim()
        .parse::<u32>()
        .map_err(|reason| GroupError::NotANumber {
            text: s.into(),
            reason,
        })?;
    ScaleLayout::PerGroup(group).check()?;
    Ok(group)
}

/// How a width is quantized in this run: `--group G` for both widths if given, else int8 per
/// row and int4 in groups of [`DEFAULT_INT4_GROUP`].
pub(super) fn quantization(bits: QuantBits, group: Option<u32>) -> Quantization {
    let scales = match (group, bits) {
        (Some(g), _) => ScaleLayout::PerGroup(g),
        (None, QuantBits::Int8) => ScaleLayout::PerRow,
        (None, QuantBits::Int4) => ScaleLayout::PerGroup(DEFAULT_INT4_GROUP),
    };
    Quantization { bits, scales }
}

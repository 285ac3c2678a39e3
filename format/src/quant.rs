//! Quantized values: int8 or int4 codes with binary16 scales, shared by the quantized MACKO and
//! dense layouts (docs/FORMAT.md, "Quantized values").
//!
//! A stored value is `scale · q`, with `q` a signed integer of 8 or 4 bits (two's complement;
//! int4 packed two per byte, the even value in bits 0–3, like the gap codes) and `scale` a
//! finite binary16. Where a value finds its scale is the [`ScaleLayout`]: one scale per row, or
//! one per `G` consecutive stored values in storage order, so a GPU lane reads it at index
//! `row` or `i / G` without a search. Quantization is symmetric round-to-nearest with absmax
//! scales (`scale = absmax / qmax`, `q = round(w / scale)`, ties away from zero), and a zero
//! stays exactly zero (`q = 0`), so padding entries remain padding.

use half::f16;

use crate::error::{FormatError, Result};

/// Width of a quantized value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuantBits {
    /// 8-bit two's complement, one byte per value.
    Int8,
    /// 4-bit two's complement, two values per byte (even value in the low nibble).
    Int4,
}

impl QuantBits {
    /// Largest |q| the quantizer produces: 127 or 7 (symmetric; −128 and −8 are valid codes
    /// that it never writes).
    pub fn qmax(self) -> i32 {
        match self {
            QuantBits::Int8 => 127,
            QuantBits::Int4 => 7,
        }
    }

    /// Bits per value.
    pub fn bits(self) -> u32 {
        match self {
            QuantBits::Int8 => 8,
            QuantBits::Int4 => 4,
        }
    }

    /// Bytes that hold `n` values (int4: ⌈n/2⌉).
    pub fn bytes_for(self, n: usize) -> usize {
        match self {
            QuantBits::Int8 => n,
            QuantBits::Int4 => n.div_ceil(2),
        }
    }

    /// The name used in files and on the command line: `int8` or `int4`.
    pub fn as_str(self) -> &'static str {
        match self {
            QuantBits::Int8 => "int8",
            QuantBits::Int4 => "int4",
        }
    }

    /// The width named by [`QuantBits::as_str`], if any.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "int8" => Some(QuantBits::Int8),
            "int4" => Some(QuantBits::Int4),
            _ => None,
        }
    }
}

/// Smallest scale group (one aligned MACKO group of 8 entries: a lane's load).
pub const MIN_SCALE_GROUP: u32 = 8;
/// Largest scale group (2²⁴ values).
pub const MAX_SCALE_GROUP: u32 = 1 << 24;

/// Where a stored value finds its scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScaleLayout {
    /// One scale per row (`rows` scales): value of row r uses `scales[r]`.
    PerRow,
    /// One scale per `G` consecutive stored values in storage order (`⌈len / G⌉` scales):
    /// value i uses `scales[i / G]`. G is a multiple of 8 from 8 to 2²⁴, so the 8 entries of
    /// an aligned MACKO group share one scale. In a MACKO matrix a group may hold the end of
    /// one row and the start of the next; in a dense matrix whose `cols` is a multiple of G,
    /// every group lies in one row (the usual group-wise scheme along the input dimension).
    PerGroup(u32),
}

impl ScaleLayout {
    /// Checks the group size (a typed error naming the rule).
    pub fn check(self) -> Result<()> {
        if let ScaleLayout::PerGroup(g) = self {
            if !(MIN_SCALE_GROUP..=MAX_SCALE_GROUP).contains(&g) || g % MIN_SCALE_GROUP != 0 {
                return Err(FormatError::ScaleGroup { group: g as u64 });
            }
        }
        Ok(())
    }

    /// Number of scales for `len` stored values in `rows` rows.
    pub fn scale_count(self, rows: usize, len: usize) -> usize {
        match self {
            ScaleLayout::PerRow => rows,
            ScaleLayout::PerGroup(g) => len.div_ceil(g as usize),
        }
    }

    /// `row` or `G<g>`: how the layout is written in files and messages.
    pub fn describe(self) -> String {
        match self {
            ScaleLayout::PerRow => "row".to_string(),
            ScaleLayout::PerGroup(g) => format!("G{g}"),
        }
    }
}

/// How to quantize: the width and the scale layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quantization {
    /// Width of each value.
    pub bits: QuantBits,
    /// Where each value finds its scale.
    pub scales: ScaleLayout,
}

impl Quantization {
    /// int8 with one scale per row.
    pub fn int8_per_row() -> Self {
        Self {
            bits: QuantBits::Int8,
            scales: ScaleLayout::PerRow,
        }
    }

    /// int4 with one scale per `group` stored values.
    pub fn int4_per_group(group: u32) -> Self {
        Self {
            bits: QuantBits::Int4,
            scales: ScaleLayout::PerGroup(group),
        }
    }
}

/// Quantized values in storage order with their scales: the `values` array of a quantized
/// layout. `len` values; `q` holds them packed ([`QuantBits::bytes_for`]).
#[derive(Debug, Clone)]
pub struct QuantValues {
    bits: QuantBits,
    layout: ScaleLayout,
    len: usize,
    q: Vec<u8>,
    scales: Vec<f16>,
}

/// Equal when every field is the same, the scales bit for bit (a stored NaN scale equals
/// itself).
impl PartialEq for QuantValues {
    fn eq(&self, other: &Self) -> bool {
        self.bits == other.bits
            && self.layout == other.layout
            && self.len == other.len
            && self.q == other.q
            && crate::dense::same_bits(&self.scales, &other.scales)
    }
}

impl Eq for QuantValues {}

/// Code `i` of packed values (sign-extended).
#[inline(always)]
pub fn q_at(bits: QuantBits, q: &[u8], i: usize) -> i8 {
    match bits {
        QuantBits::Int8 => q[i] as i8,
        QuantBits::Int4 => (((q[i / 2] >> ((i & 1) * 4)) << 4) as i8) >> 4,
    }
}

impl QuantValues {
    /// Checks untrusted packed values and scales for `len` values in `rows` rows, of which the
    /// values from `live` on are tail padding that must be 0: the group size, the lengths of
    /// `q` and `scales`, finite scales, a zero tail (for int4 with odd `len`, the unused high
    /// nibble too).
    pub fn from_parts(
        quant: Quantization,
        rows: usize,
        len: usize,
        live: usize,
        q: Vec<u8>,
        scales: Vec<f16>,
    ) -> Result<Self> {
        quant.scales.check()?;
        let expected = quant.bits.bytes_for(len);
        if q.len() != expected {
            return Err(FormatError::QuantValuesLength {
                bits: quant.bits.as_str(),
                values: len,
                expected,
                found: q.len(),
            });
        }
        let expected = quant.scales.scale_count(rows, len);
        if scales.len() != expected {
            return Err(FormatError::ScalesLength {
                layout: quant.scales.describe(),
                expected,
                found: scales.len(),
            });
        }
        if let Some((index, s)) = scales.iter().enumerate().find(|(_, s)| !s.is_finite()) {
            return Err(FormatError::ScaleNotFinite {
                index,
                bits: s.to_bits(),
            });
        }
        let stored = expected_slots(quant.bits, len);
        if let Some(index) = (live..stored).find(|&i| q_at(quant.bits, &q, i) != 0) {
            return Err(FormatError::TailQuantNotZero {
                index,
                q: q_at(quant.bits, &q, index),
            });
        }
        Ok(Self {
            bits: quant.bits,
            layout: quant.scales,
            len,
            q,
            scales,
        })
    }

    /// Quantizes `values` (storage order, `rows` rows whose values are `row_ranges`; the values
    /// outside every row, such as MACKO's tail padding, must be zero) with absmax scales.
    /// Refuses NaN and ±∞ (they have no quantized form).
    pub(crate) fn quantize(
        quant: Quantization,
        values: &[f16],
        row_ranges: impl Iterator<Item = std::ops::Range<usize>>,
    ) -> Result<Self> {
        quant.scales.check()?;
        if let Some((index, v)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(FormatError::NotFiniteWeight {
                index,
                bits: v.to_bits(),
            });
        }
        let len = values.len();
        let mut q = vec![0u8; quant.bits.bytes_for(len)];
        let mut scales = Vec::new();
        let mut put = |range: std::ops::Range<usize>, scales: &mut Vec<f16>| {
            let scale = absmax_scale(quant.bits, &values[range.clone()]);
            for i in range {
                let code = quantize_one(quant.bits, values[i], scale);
                store(quant.bits, &mut q, i, code);
            }
            scales.push(scale);
        };
        match quant.scales {
            ScaleLayout::PerRow => {
                for range in row_ranges {
                    put(range, &mut scales);
                }
            }
            ScaleLayout::PerGroup(g) => {
                let g = g as usize;
                for start in (0..len).step_by(g) {
                    put(start..(start + g).min(len), &mut scales);
                }
            }
        }
        Ok(Self {
            bits: quant.bits,
            layout: quant.scales,
            len,
            q,
            scales,
        })
    }

    /// The width.
    pub fn bits(&self) -> QuantBits {
        self.bits
    }
    /// The scale layout.
    pub fn layout(&self) -> ScaleLayout {
        self.layout
    }
    /// The width and layout together.
    pub fn quantization(&self) -> Quantization {
        Quantization {
            bits: self.bits,
            scales: self.layout,
        }
    }
    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The packed codes.
    pub fn packed(&self) -> &[u8] {
        &self.q
    }
    /// The scales.
    pub fn scales(&self) -> &[f16] {
        &self.scales
    }
    /// Code of value `i`.
    #[inline]
    pub fn q(&self, i: usize) -> i8 {
        q_at(self.bits, &self.q, i)
    }
    /// Scale of value `i`, which lies in row `row`.
    #[inline]
    pub fn scale(&self, i: usize, row: usize) -> f16 {
        match self.layout {
            ScaleLayout::PerRow => self.scales[row],
            ScaleLayout::PerGroup(g) => self.scales[i / g as usize],
        }
    }
    /// Value `i` (in row `row`) exactly: `scale · q` in f64.
    #[inline]
    pub fn value(&self, i: usize, row: usize) -> f64 {
        self.scale(i, row).to_f64() * self.q(i) as f64
    }
    /// Bytes of codes and scales.
    pub fn bytes(&self) -> u64 {
        self.q.len() as u64 + 2 * self.scales.len() as u64
    }
    /// Consumes the values, returning `(packed codes, scales)`.
    pub fn into_parts(self) -> (Vec<u8>, Vec<f16>) {
        (self.q, self.scales)
    }
}

/// Slots the packed bytes hold for `len` values (int4 with odd `len`: one more, which must be
/// zero).
fn expected_slots(bits: QuantBits, len: usize) -> usize {
    match bits {
        QuantBits::Int8 => len,
        QuantBits::Int4 => 2 * len.div_ceil(2),
    }
}

/// The absmax scale of `values` as binary16: `absmax / qmax` rounded to nearest; an all-zero
/// group gets +0; a scale that underflows to 0 for a non-zero group becomes the smallest
/// subnormal (its codes then clamp). A scale that rounded up so far that `qmax · scale` would
/// exceed binary16's largest value is stepped down until it does not, so every stored value
/// `q · scale` is a finite binary16 (int4 with 65504 in a group: 65504 / 7 rounds to 9360, and
/// 7 · 9360 = 65520 is beyond binary16; 9352 is used, and that code clamps to 7).
fn absmax_scale(bits: QuantBits, values: &[f16]) -> f16 {
    let absmax = values.iter().fold(0.0f64, |m, v| m.max(v.to_f64().abs()));
    if absmax == 0.0 {
        return f16::ZERO;
    }
    let qmax = bits.qmax() as f64;
    let mut scale = f16::from_f64(absmax / qmax);
    while scale.to_f64() * qmax > f16::MAX.to_f64() {
        scale = f16::from_bits(scale.to_bits() - 1);
    }
    if scale.to_bits() == 0 {
        f16::from_bits(1)
    } else {
        scale
    }
}

/// `round(w / scale)` (ties away from zero), clamped to ±qmax; 0 for a zero scale.
fn quantize_one(bits: QuantBits, w: f16, scale: f16) -> i8 {
    let s = scale.to_f64();
    if s == 0.0 {
        return 0;
    }
    let qmax = bits.qmax() as f64;
    (w.to_f64() / s).round().clamp(-qmax, qmax) as i8
}

fn store(bits: QuantBits, q: &mut [u8], i: usize, code: i8) {
    match bits {
        QuantBits::Int8 => q[i] = code as u8,
        QuantBits::Int4 => {
            let shift = (i & 1) * 4;
            q[i / 2] = (q[i / 2] & !(0x0f << shift)) | (((code as u8) & 0x0f) << shift);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int4_codes_sign_extend_and_round_trip() {
        let mut q = vec![0u8; 8];
        for (i, code) in (-8i8..8).enumerate() {
            store(QuantBits::Int4, &mut q, i, code);
        }
        let back: Vec<i8> = (0..16).map(|i| q_at(QuantBits::Int4, &q, i)).collect();
        assert_eq!(back, (-8i8..8).collect::<Vec<_>>());
        assert_eq!(q[0], 0x09 << 4 | 0x08, "even value in the low nibble");
    }

    #[test]
    fn absmax_maps_the_largest_magnitude_to_qmax() {
        let values: Vec<f16> = [0.5f32, -2.0, 1.0, 0.0]
            .iter()
            .map(|&v| f16::from_f32(v))
            .collect();
        for bits in [QuantBits::Int8, QuantBits::Int4] {
            let scale = absmax_scale(bits, &values);
            assert_eq!(quantize_one(bits, values[1], scale) as i32, -bits.qmax());
            assert_eq!(quantize_one(bits, values[3], scale), 0);
        }
    }

    #[test]
    fn stored_values_stay_within_binary16_at_the_largest_weights() {
        for bits in [QuantBits::Int8, QuantBits::Int4] {
            for w in [f16::MAX, -f16::MAX, f16::from_f32(65000.0)] {
                let scale = absmax_scale(bits, &[w, f16::ONE]);
                let q = quantize_one(bits, w, scale);
                let value = f64::from(q) * scale.to_f64();
                assert!(
                    value.abs() <= f16::MAX.to_f64(),
                    "{bits:?}: {w} stored as {q} × {scale} = {value}"
                );
                assert_eq!(
                    q.unsigned_abs() as i32,
                    bits.qmax(),
                    "{bits:?}: {w} must map to ±qmax"
                );
            }
        }
    }

    #[test]
    fn group_sizes_outside_the_rule_are_refused() {
        for g in [0, 4, 12, MAX_SCALE_GROUP + 8] {
            assert_eq!(
                ScaleLayout::PerGroup(g).check(),
                Err(FormatError::ScaleGroup { group: g as u64 })
            );
        }
        assert!(ScaleLayout::PerGroup(8).check().is_ok());
        assert!(ScaleLayout::PerGroup(MAX_SCALE_GROUP).check().is_ok());
    }
}

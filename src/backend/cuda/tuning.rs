//! Typed tuning of the CUDA backend: each field forces one choice that the plan rules
//! (`plan.rs`, `rules.rs`) otherwise make per matrix. `Default` is production behaviour (every
//! field `None`: the rules decide). Experiments and the sweep scripts set the fields through
//! `MACKO_TUNING="cuda.split=3 cuda.lanes=16"`, read in one place (src/options.rs), which calls
//! [`CudaTuning::set`] for each `cuda.` item; the cross-backend suite forces each non-default
//! plan through `CudaTuning::forced_plans` (in plan.rs, beside the plan it predicates on).

use super::rules::MAX_SPLIT;
use crate::backend::tuning::switch;

/// Where the sparse kernels read x from, when forced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XPlace {
    /// Staged in shared memory (an error where the copy does not fit; for `s24_x`, the 2:4
    /// kernel reads x from global memory instead).
    Shared,
    /// Read from global memory through the read-only cache.
    Global,
}

/// Rows cut into segments, when forced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitPolicy {
    /// Whole rows.
    Off,
    /// Every row cut into this many segments (1 to 8).
    Segments(u32),
}

/// The CUDA plan choices a tuning may force. `None` everywhere: the plan rules decide.
#[doc(hidden)]
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CudaTuning {
    /// `x`: where the sparse kernels read x (`smem` or `global`).
    pub x: Option<XPlace>,
    /// `xpad`: x staged in the padded layout (one unused word after every 32) or plain.
    pub xpad: Option<bool>,
    /// `xhalf`: x staged as binary16 (`macko_*_xh_*`) wherever it is staged plain, and where
    /// only binary16 fits.
    pub xhalf: Option<bool>,
    /// `lanes`: lanes per row of the MACKO row kernel, 16 (a half-warp) or 32.
    pub lanes: Option<u32>,
    /// `chunks`: batches of `MACKO_CHUNKS_SHORT` chunks (`short`, true) or `MACKO_CHUNKS`
    /// (`long`, false).
    pub short_chunks: Option<bool>,
    /// `block`: threads per block of the MACKO kernel with x staged, 512 or 1024.
    pub block: Option<u32>,
    /// `split`: rows cut into segments (`off` or a count 1 to 8).
    pub split: Option<SplitPolicy>,
    /// `pipe`: two-chunk warp batches software-pipelined.
    pub pipe: Option<bool>,
    /// `flat`: the flat kernel (one range of entries per warp).
    pub flat: Option<bool>,
    /// `flat_snap`: how far from the even cut (a fraction of the mean range, 0 to 0.5) a flat
    /// range may start at a row's start instead of inside a row; 0 cuts every range inside a
    /// row (the setting that tests the combine of cut rows).
    pub flat_snap: Option<f64>,
    /// `lean`: the lean row kernel (`macko_lean_*`).
    pub lean: Option<bool>,
    /// `spread`: a row kernel's grid grown to every resident block where its items are fewer
    /// than their warps.
    pub spread: Option<bool>,
    /// `batch_x`: where the few-token kernels read XT (the transposed chunk of X): `smem`
    /// (staged wherever it fits) or `global`; by default staged where that costs no resident
    /// blocks (`batch_plan.rs`).
    pub batch_x: Option<XPlace>,
    /// `batch_mma`: the few-token kernels on tensor cores (kernels/batch_mma.cu) at every chunk
    /// width (`on`) or none (`off`); by default at widths 8 and 16 where the GPU has them and
    /// the matrix qualifies (`batch_plan.rs`).
    pub batch_mma: Option<bool>,
    /// `dense_quant_mma`: dense int4 GEMV on tensor cores (`dense_q_tc_*`) where the GPU has
    /// them and the shape qualifies (`on`, the default) or the f32 entries (`off`).
    pub dense_quant_mma: Option<bool>,
    /// `dense_quant_warps`: warps per block (1, 2, 4, 8 or 16) of the tensor-core dense int4
    /// GEMV, each band of 16 rows split among them.
    pub dense_quant_warps: Option<u32>,
    /// `s24_x`: where the 2:4 single-vector kernel reads x: `smem` (staged where it fits, the
    /// default) or `global`.
    pub s24_x: Option<XPlace>,
    /// `s24_mma`: 2:4 matrices uploaded as tiles for the sparse tensor cores and multiplied
    /// with `mma.sp` (kernels/sparse24_mma.cu; `on`, the default where the GPU has them) or as
    /// rows for the CUDA-core kernels (kernels/sparse24.cu; `off`, the path of GPUs older than
    /// compute capability 8.0).
    pub s24_mma: Option<bool>,
}

/// One of `choices` (name, value), `None` for `auto` or empty.
fn one_of<T: Copy>(value: &str, choices: &[(&str, T)], rule: &str) -> Result<Option<T>, String> {
    if value.is_empty() || value == "auto" {
        return Ok(None);
    }
    choices
        .iter()
        .find(|(name, _)| *name == value)
        .map(|&(_, v)| Some(v))
        .ok_or_else(|| rule.to_string())
}

impl CudaTuning {
    /// Every key [`CudaTuning::set`] accepts, for error messages.
    pub const KEYS: &'static [&'static str] = &[
        "x",
        "xpad",
        "xhalf",
        "lanes",
        "chunks",
        "block",
        "split",
        "pipe",
        "flat",
        "flat_snap",
        "lean",
        "spread",
        "batch_x",
        "batch_mma",
        "dense_quant_mma",
        "dense_quant_warps",
        "s24_x",
        "s24_mma",
    ];

    /// One `key=value` of the `MACKO_TUNING` variable (prefix `cuda.` already removed), e.g.
    /// `set("split", "3")`. The value is trimmed and compared in lower case; `auto` hands the
    /// choice back to the rules. `Err`: the rule the value broke, e.g. "expected on, off or
    /// auto", or the keys there are.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let v = value.trim().to_ascii_lowercase();
        let v = v.as_str();
        match key {
            "x" => self.x = x_place(v)?,
            "xpad" => self.xpad = switch(v)?,
            "xhalf" => self.xhalf = switch(v)?,
            "lanes" => {
                self.lanes = one_of(v, &[("16", 16), ("32", 32)], "expected 16, 32 or auto")?
            }
            "chunks" => {
                self.short_chunks = one_of(
                    v,
                    &[("short", true), ("long", false)],
                    "expected short, long or auto",
                )?
            }
            "block" => {
                self.block = one_of(
                    v,
                    &[("512", 512), ("1024", 1024)],
                    "expected 512, 1024 or auto",
                )?
            }
            "split" => self.split = split_policy(v)?,
            "pipe" => self.pipe = switch(v)?,
            "flat" => self.flat = switch(v)?,
            "flat_snap" => {
                self.flat_snap = match v {
                    "" | "auto" => None,
                    f => Some(
                        f.parse::<f64>()
                            .ok()
                            .filter(|f| (0.0..=0.5).contains(f))
                            .ok_or("expected a fraction in [0, 0.5] or auto")?,
                    ),
                }
            }
            "lean" => self.lean = switch(v)?,
            "spread" => self.spread = switch(v)?,
            "batch_x" => self.batch_x = x_place(v)?,
            "batch_mma" => self.batch_mma = switch(v)?,
            "dense_quant_mma" => self.dense_quant_mma = switch(v)?,
            "dense_quant_warps" => {
                self.dense_quant_warps = one_of(
                    v,
                    &[("1", 1), ("2", 2), ("4", 4), ("8", 8), ("16", 16)],
                    "expected 1, 2, 4, 8, 16 or auto",
                )?
            }
            "s24_x" => self.s24_x = x_place(v)?,
            "s24_mma" => self.s24_mma = switch(v)?,
            other => {
                return Err(format!(
                    "unknown key {other:?}: expected one of {}",
                    Self::KEYS.join(", ")
                ))
            }
        }
        Ok(())
    }
}

/// An `x` or `batch_x` value: `smem` (or `shared`), `global` or `auto`.
fn x_place(v: &str) -> Result<Option<XPlace>, String> {
    one_of(
        v,
        &[
            ("smem", XPlace::Shared),
            ("shared", XPlace::Shared),
            ("global", XPlace::Global),
        ],
        "expected smem, global or auto",
    )
}

/// A `split` value: `off`/`0`, a segment count 1 to [`MAX_SPLIT`], or `auto`.
fn split_policy(v: &str) -> Result<Option<SplitPolicy>, String> {
    match v {
        "" | "auto" => Ok(None),
        "off" | "0" => Ok(Some(SplitPolicy::Off)),
        n => match n.parse::<u32>() {
            Ok(k @ 1..=MAX_SPLIT) => Ok(Some(SplitPolicy::Segments(k))),
            _ => Err(format!(
                "expected off, a segment count 1..={MAX_SPLIT} or auto"
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_accepted_with_auto() {
        let mut t = CudaTuning::default();
        for key in CudaTuning::KEYS {
            t.set(key, "auto").unwrap_or_else(|e| panic!("{key}: {e}"));
        }
        assert_eq!(t, CudaTuning::default());
    }

    #[test]
    fn values_parse_into_the_typed_fields() {
        let mut t = CudaTuning::default();
        for (k, v) in [
            ("x", "global"),
            ("xpad", "ON"),
            ("xhalf", "0"),
            ("lanes", "16"),
            ("chunks", "long"),
            ("block", "1024"),
            ("split", "3"),
            ("pipe", "off"),
            ("flat", "on"),
            ("flat_snap", "0"),
            ("lean", "off"),
            ("spread", "1"),
            ("batch_x", "global"),
            ("batch_mma", "on"),
            ("dense_quant_mma", "off"),
            ("dense_quant_warps", "8"),
            ("s24_x", "global"),
            ("s24_mma", "off"),
        ] {
            t.set(k, v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
        }
        assert_eq!(
            t,
            CudaTuning {
                x: Some(XPlace::Global),
                xpad: Some(true),
                xhalf: Some(false),
                lanes: Some(16),
                short_chunks: Some(false),
                block: Some(1024),
                split: Some(SplitPolicy::Segments(3)),
                pipe: Some(false),
                flat: Some(true),
                flat_snap: Some(0.0),
                lean: Some(false),
                spread: Some(true),
                batch_x: Some(XPlace::Global),
                batch_mma: Some(true),
                dense_quant_mma: Some(false),
                dense_quant_warps: Some(8),
                s24_x: Some(XPlace::Global),
                s24_mma: Some(false),
            }
        );
        t.set("split", "off").expect("off");
        assert_eq!(t.split, Some(SplitPolicy::Off));
    }

    #[test]
    fn bad_values_and_keys_say_the_rule() {
        let mut t = CudaTuning::default();
        assert_eq!(
            t.set("lean", "maybe"),
            Err("expected on, off or auto".to_string())
        );
        assert!(t.set("split", "9").is_err_and(|e| e.contains("1..=8")));
        assert!(t.set("lanes", "8").is_err());
        assert!(t.set("flat_snap", "0.6").is_err());
        assert!(t.set("tail", "0.5:3").is_err_and(|e| e.contains("split")));
        assert_eq!(t, CudaTuning::default());
    }

    #[test]
    fn forced_plans_have_distinct_names_and_non_default_tunings() {
        let plans = CudaTuning::forced_plans();
        for (i, p) in plans.iter().enumerate() {
            assert_ne!(p.tuning, CudaTuning::default(), "{}", p.name);
            assert!(plans[..i].iter().all(|q| q.name != p.name), "{}", p.name);
        }
    }
}

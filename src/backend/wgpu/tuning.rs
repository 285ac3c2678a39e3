//! The typed tuning of the wgpu backend: every choice the plan rules make (plan.rs) that a
//! benchmark sweep or a test may force. `Default` is production behaviour: every field `None`
//! (or off) leaves the choice to the rules. Sweeps set it through the `MACKO_TUNING` variable
//! (`wgpu.KEY=VALUE` items, parsed by [`WgpuTuning::set`]; the environment is read in one place,
//! outside the backend).
//!
//! Variants that were measured and settled are constants of the kernel, their other paths
//! deleted; refuted variants are deleted (shaders/README.md says which and why). What is left
//! here are the rule-driven choices.

use crate::backend::tuning::{number, switch};

/// Tuning of the wgpu backend (see the module's documentation). Fields are `None` where the
/// plan rules decide.
#[doc(hidden)]
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WgpuTuning {
    /// `x_in_workgroup`: stage x in workgroup memory where it fits (`None`: on). Off gathers x
    /// from memory, to compare with that path.
    pub x_in_workgroup: Option<bool>,
    /// `x_tiles`: stage an x too wide for workgroup memory in column tiles (`None`: on). Off
    /// gathers such an x from memory.
    pub x_tiles: Option<bool>,
    /// `x_tile_cols`: the most columns staged at a time (rounded down to a multiple of 64, at
    /// least 64): a wider x is cut into column tiles even where it would fit whole.
    pub x_tile_cols: Option<u32>,
    /// `x_f16`: stage x as one f16 per column (`None`: where the adapter has `SHADER_F16`);
    /// off stages f16 pairs in 32-bit words, the layout of every other adapter.
    pub x_f16: Option<bool>,
    /// `x_pad`: pad an x staged as f16 scalars (`None`: for nearly dense matrices,
    /// `plan::X_PAD_MIN_FILL`).
    pub x_pad: Option<bool>,
    /// `x_words_granule`: words the staged x is rounded up to (a multiple of 8; `None`:
    /// `plan::X_WORDS_GRANULE`). Tests use 8, the tightest, so that a gather past the slack
    /// meets no rounding.
    pub x_words_granule: Option<u32>,
    /// `macko_workgroup`: invocations per workgroup of the MACKO subgroup kernel for every
    /// matrix (a power of two, 32..=1024, within the adapter's limit; `None`: by rows and
    /// columns, `plan::LARGE_ROWS` and `plan::WIDE_COLS`).
    pub macko_workgroup: Option<u32>,
    /// `macko_workgroups`: the most workgroups dispatched when x is staged (`None`:
    /// `plan::DEFAULT_MAX_STAGED_WORKGROUPS`).
    pub macko_workgroups: Option<u32>,
    /// `macko_invocations`: the most invocations dispatched in all when a workgroup's staged x
    /// takes at most `plan::WIDE_WORKGROUP_BYTES` (`Some(0)`: no such cap; `None`:
    /// `plan::DEFAULT_MAX_STAGED_INVOCATIONS`).
    pub macko_invocations: Option<u32>,
    /// `macko_wide_invocations`: the same above `plan::WIDE_WORKGROUP_BYTES` (`None`:
    /// `plan::DEFAULT_MAX_WIDE_INVOCATIONS`).
    pub macko_wide_invocations: Option<u32>,
    /// `macko_rows_per_workgroup`: rows per workgroup aimed at when x is staged, before the
    /// caps (`None`: `plan::DEFAULT_ROWS_PER_STAGED_WORKGROUP`).
    pub macko_rows_per_workgroup: Option<u32>,
    /// `mask_table`: read the value masks of a row's end steps from a table in the uniform
    /// (`None`: below `plan::X_PAD_MIN_FILL`).
    pub mask_table: Option<bool>,
    /// `aligned_rows`: upload MACKO matrices row-aligned, so that pipelined steps mask nothing
    /// (`None`: on, where the aligned rows fit a binding). Off keeps the format's layout.
    pub aligned_rows: Option<bool>,
    /// `half_rows`: two rows per exact subgroup, one per half (`None`: below
    /// `plan::HALF_ROWS_MAX_FILL`; only for row-aligned matrices with x staged whole).
    pub half_rows: Option<bool>,
    /// `gather_probe`: a test hook of the kernel with x staged as f16 scalars: a gather of the
    /// pipelined loop outside the staged slots reads NaN instead of a clamped slot, so a product
    /// shows any gather the bounded-gathers argument (pipelines.rs) rules out. Never in
    /// production.
    pub gather_probe: bool,
    /// `batch_workgroup`: invocations per workgroup of the subgroup few-token kernels (a power
    /// of two, 32..=1024, within the adapter's limit; `None`: `batch_plan::BATCH_WORKGROUP`).
    pub batch_workgroup: Option<u32>,
    /// `batch_workgroups`: the most workgroups the subgroup few-token kernels dispatch (rows
    /// by stride, so a capped grid is persistent; `None`: the dispatch limit).
    pub batch_workgroups: Option<u32>,
    /// `transposed_workgroups`: the workgroups (tiles of y × chunks of x) a transposed
    /// product's grid aims at (`None`: `transposed::TARGET_WORKGROUPS`).
    pub transposed_workgroups: Option<u32>,
    /// `transposed_min_chunk`: the fewest entries of x a chunk of a transposed product takes,
    /// however few entries x has (`None`: `transposed::MIN_CHUNK`, or `SHORT_CHUNK` where x has
    /// too few entries to fill `SHORT_TARGET` workgroups).
    pub transposed_min_chunk: Option<u32>,
}

impl WgpuTuning {
    /// Every key `set` accepts, for error messages.
    pub const KEYS: &'static [&'static str] = &[
        "x_in_workgroup",
        "x_tiles",
        "x_tile_cols",
        "x_f16",
        "x_pad",
        "x_words_granule",
        "macko_workgroup",
        "macko_workgroups",
        "macko_invocations",
        "macko_wide_invocations",
        "macko_rows_per_workgroup",
        "mask_table",
        "aligned_rows",
        "half_rows",
        "gather_probe",
        "batch_workgroup",
        "batch_workgroups",
        "transposed_workgroups",
        "transposed_min_chunk",
    ];

    /// One `key=value` of the `MACKO_TUNING` variable (prefix `wgpu.` already removed), e.g.
    /// `set("x_tile_cols", "128")`. `Err` says the rule the value broke (an unknown key: which
    /// keys there are).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let value = value.trim();
        match key {
            "x_in_workgroup" => self.x_in_workgroup = switch(value)?,
            "x_tiles" => self.x_tiles = switch(value)?,
            "x_tile_cols" => self.x_tile_cols = Some(number(value, 64..=u32::MAX)?),
            "x_f16" => self.x_f16 = switch(value)?,
            "x_pad" => self.x_pad = switch(value)?,
            "x_words_granule" => {
                let n = number(value, 8..=1 << 20)?;
                if n % 8 != 0 {
                    return Err("expected a multiple of 8".into());
                }
                self.x_words_granule = Some(n);
            }
            "macko_workgroup" => self.macko_workgroup = Some(workgroup_size(value)?),
            "batch_workgroup" => self.batch_workgroup = Some(workgroup_size(value)?),
            "batch_workgroups" => self.batch_workgroups = Some(number(value, 1..=u32::MAX)?),
            "macko_workgroups" => self.macko_workgroups = Some(number(value, 1..=u32::MAX)?),
            "macko_invocations" => self.macko_invocations = Some(number(value, 0..=u32::MAX)?),
            "macko_wide_invocations" => {
                self.macko_wide_invocations = Some(number(value, 0..=u32::MAX)?)
            }
            "macko_rows_per_workgroup" => {
                self.macko_rows_per_workgroup = Some(number(value, 1..=u32::MAX)?)
            }
            "transposed_workgroups" => {
                self.transposed_workgroups = Some(number(value, 1..=u32::MAX)?)
            }
            "transposed_min_chunk" => {
                self.transposed_min_chunk = Some(number(value, 1..=u32::MAX)?)
            }
            "mask_table" => self.mask_table = switch(value)?,
            "aligned_rows" => self.aligned_rows = switch(value)?,
            "half_rows" => self.half_rows = switch(value)?,
            "gather_probe" => self.gather_probe = switch(value)?.unwrap_or(false),
            _ => {
                return Err(format!(
                    "unknown key (expected one of {})",
                    Self::KEYS.join(", ")
                ))
            }
        }
        Ok(())
    }

    /// The items of this tuning that differ from the default, as `MACKO_TUNING` would set them
    /// (without the `wgpu.` prefix), for the device's description.
    pub fn describe(&self) -> Vec<String> {
        let mut items = Vec::new();
        let mut switch = |key: &str, v: Option<bool>| {
            if let Some(on) = v {
                items.push(format!("{key}={}", if on { "on" } else { "off" }));
            }
        };
        switch("x_in_workgroup", self.x_in_workgroup);
        switch("x_tiles", self.x_tiles);
        switch("x_f16", self.x_f16);
        switch("x_pad", self.x_pad);
        switch("mask_table", self.mask_table);
        switch("aligned_rows", self.aligned_rows);
        switch("half_rows", self.half_rows);
        if self.gather_probe {
            items.push("gather_probe=on".into());
        }
        let numbers = [
            ("x_tile_cols", self.x_tile_cols),
            ("x_words_granule", self.x_words_granule),
            ("macko_workgroup", self.macko_workgroup),
            ("macko_workgroups", self.macko_workgroups),
            ("macko_invocations", self.macko_invocations),
            ("macko_wide_invocations", self.macko_wide_invocations),
            ("macko_rows_per_workgroup", self.macko_rows_per_workgroup),
            ("batch_workgroup", self.batch_workgroup),
            ("batch_workgroups", self.batch_workgroups),
            ("transposed_workgroups", self.transposed_workgroups),
            ("transposed_min_chunk", self.transposed_min_chunk),
        ];
        for (key, v) in numbers {
            if let Some(n) = v {
                items.push(format!("{key}={n}"));
            }
        }
        items
    }
}

/// A workgroup size: a power of two from 32 to 1024.
fn workgroup_size(value: &str) -> Result<u32, String> {
    let n = number(value, 32..=1024)?;
    if !n.is_power_of_two() {
        return Err("expected a power of two from 32 to 1024".into());
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_accepted_and_described_back() {
        for &key in WgpuTuning::KEYS {
            let mut t = WgpuTuning::default();
            let value = match key {
                "x_tile_cols" | "macko_workgroup" | "batch_workgroup" => "128",
                "x_words_granule" => "8",
                k if k.starts_with("macko_")
                    || k.starts_with("transposed_")
                    || k == "batch_workgroups" =>
                {
                    "3"
                }
                _ => "on",
            };
            t.set(key, value).unwrap_or_else(|e| panic!("{key}: {e}"));
            assert_ne!(t, WgpuTuning::default(), "{key}");
            assert_eq!(t.describe(), vec![format!("{key}={value}")], "{key}");
            // `auto` (or `off` for the hook) goes back to the default for the switches.
            if !value.chars().all(|c| c.is_ascii_digit()) {
                t.set(key, if key == "gather_probe" { "off" } else { "auto" })
                    .unwrap();
                assert_eq!(t, WgpuTuning::default(), "{key}");
            }
        }
    }

    #[test]
    fn bad_values_name_the_rule() {
        let mut t = WgpuTuning::default();
        assert_eq!(
            t.set("x_pad", "maybe"),
            Err("expected on, off or auto".into())
        );
        assert!(t
            .set("macko_workgroup", "100")
            .unwrap_err()
            .contains("power of two"));
        assert!(t
            .set("x_words_granule", "12")
            .unwrap_err()
            .contains("multiple of 8"));
        assert!(t.set("x_tile_cols", "32").unwrap_err().contains("from 64"));
        assert!(t.set("depth", "2").unwrap_err().contains("x_in_workgroup"));
        assert_eq!(t, WgpuTuning::default());
    }
}

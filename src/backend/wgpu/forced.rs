//! The named tunings that force each non-default plan (`WgpuTuning::forced_plans`), for the
//! cross-backend agreement suite and tests/plans/wgpu.rs: apart from tuning.rs, which the
//! planner reads, so that neither file imports the other's reader.

use super::pipelines::XForm;
use super::plan::{WgpuPlan, XStaging};
use super::tuning::WgpuTuning;
use crate::backend::tuning::ForcedPlan;

impl WgpuTuning {
    /// Named tunings that each force one non-default plan of the MACKO subgroup kernel, with a
    /// test on the plan of a MACKO matrix that says it was taken. They apply on a device with
    /// subgroups; the `x_tiles*` ones to matrices of more than 128 columns; `x_padded` and
    /// `gather_probe*` to adapters with `SHADER_F16`; `half_rows` and
    /// `gather_probe_half_rows` to matrices whose x fits whole. Each also caps the grid at 3
    /// workgroups, so that every subgroup works through many rows.
    pub fn forced_plans() -> Vec<ForcedPlan<WgpuTuning, WgpuPlan>> {
        let few = Self {
            macko_workgroups: Some(3),
            ..Self::default()
        };
        let probe = Self {
            gather_probe: true,
            x_words_granule: Some(8),
            ..few.clone()
        };
        let forced = |name, tuning, taken: fn(&WgpuPlan) -> bool| ForcedPlan {
            name,
            tuning,
            taken,
        };
        vec![
            forced("few_workgroups", few.clone(), |p| {
                p.x == XStaging::Whole && p.max_staged_workgroups() == 3
            }),
            forced(
                "x_from_memory",
                Self {
                    x_in_workgroup: Some(false),
                    ..few.clone()
                },
                |p| p.x == XStaging::Memory,
            ),
            forced(
                "x_tiles",
                Self {
                    x_tile_cols: Some(128),
                    ..few.clone()
                },
                |p| matches!(p.x, XStaging::Tiles(t) if t.cols == 128),
            ),
            forced(
                "x_tiles_format_layout",
                Self {
                    x_tile_cols: Some(128),
                    aligned_rows: Some(false),
                    ..few.clone()
                },
                |p| matches!(p.x, XStaging::Tiles(_)) && !p.aligned_rows,
            ),
            forced(
                "x_tiles_pairs",
                Self {
                    x_tile_cols: Some(128),
                    x_f16: Some(false),
                    ..few.clone()
                },
                |p| matches!(p.x, XStaging::Tiles(_)) && p.x_form == XForm::Pairs,
            ),
            forced(
                "x_pairs",
                Self {
                    x_f16: Some(false),
                    ..few.clone()
                },
                |p| p.x == XStaging::Whole && p.x_form == XForm::Pairs,
            ),
            forced(
                "x_padded",
                Self {
                    x_pad: Some(true),
                    ..few.clone()
                },
                |p| p.x_form == XForm::F16Padded,
            ),
            forced(
                "half_rows",
                Self {
                    half_rows: Some(true),
                    ..few.clone()
                },
                |p| p.half_rows,
            ),
            forced(
                "format_layout",
                Self {
                    aligned_rows: Some(false),
                    half_rows: Some(false),
                    ..few.clone()
                },
                |p| !p.aligned_rows,
            ),
            forced(
                "format_layout_masks_built",
                Self {
                    aligned_rows: Some(false),
                    mask_table: Some(false),
                    ..few.clone()
                },
                |p| !p.aligned_rows && !p.mask_table,
            ),
            forced(
                "format_layout_mask_table",
                Self {
                    aligned_rows: Some(false),
                    mask_table: Some(true),
                    ..few.clone()
                },
                |p| !p.aligned_rows && p.mask_table,
            ),
            forced(
                "workgroup_128",
                Self {
                    macko_workgroup: Some(128),
                    ..few.clone()
                },
                |p| p.workgroup == 128,
            ),
            forced("gather_probe", probe.clone(), |p| {
                p.gather_probe && p.bounded_gathers()
            }),
            forced(
                "gather_probe_tiles",
                Self {
                    x_tile_cols: Some(128),
                    ..probe.clone()
                },
                |p| p.gather_probe && matches!(p.x, XStaging::Tiles(_)),
            ),
            forced(
                "gather_probe_padded",
                Self {
                    x_pad: Some(true),
                    ..probe.clone()
                },
                |p| p.gather_probe && p.x_form == XForm::F16Padded,
            ),
            forced(
                "gather_probe_half_rows",
                Self {
                    half_rows: Some(true),
                    ..probe.clone()
                },
                |p| p.gather_probe && p.half_rows,
            ),
            forced(
                "gather_probe_format_layout",
                Self {
                    aligned_rows: Some(false),
                    ..probe
                },
                |p| p.gather_probe && p.bounded_gathers() && !p.aligned_rows,
            ),
            forced(
                "batch_workgroup_64",
                Self {
                    batch_workgroup: Some(64),
                    ..Self::default()
                },
                |p| p.batch.iter().all(|b| b.workgroup == 64),
            ),
            forced(
                "batch_few_workgroups",
                Self {
                    batch_workgroups: Some(3),
                    ..Self::default()
                },
                |p| p.batch.iter().all(|b| b.grid.dispatch(u32::MAX).0 == 3),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forced_plans_have_distinct_names_and_tunings() {
        let plans = WgpuTuning::forced_plans();
        for (i, a) in plans.iter().enumerate() {
            assert_ne!(a.tuning, WgpuTuning::default(), "{}", a.name);
            for b in &plans[i + 1..] {
                assert_ne!(a.name, b.name);
                assert_ne!(a.tuning, b.tuning, "{} and {}", a.name, b.name);
            }
        }
    }
}

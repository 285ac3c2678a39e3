//! `speedup_<backend>.svg`: speedup of MACKO over the backend's dense baseline by density.
//! Where `--values` measured quantized kernels, their medians are extra lines over the same
//! f16 baseline (MACKO-V solid, dense-V dotted, one colour per value type).

use std::collections::BTreeSet;

use plotters::prelude::*;

use super::chart::{
    chart_on, draw_hline, draw_summary, layout, ratio_top, spread, x_range, Area, DrawResult,
};
use super::data::{by_density, valid_density, Grouping, Summary};
use super::labels::title_suffix;
use super::legend::{draw_legend, Entry};
use super::style::{Marker, SeriesStyle, Stroke, GREY, GROUP_MARKERS, LIGHT_GREY, PALETTE};
use crate::bench::record::Record;

/// The data of one backend's speedup plot.
struct SpeedupPlot {
    /// The grouping of shapes.
    grouping: Grouping,
    /// Per group in use: (group index, number of shapes, summary by density).
    groups: Vec<(usize, usize, Vec<Summary>)>,
    /// Medians (and ranges) of the other kernels, in [`OTHER_KERNELS`] order: (kernel,
    /// summary by density).
    others: Vec<(&'static str, Vec<Summary>)>,
    /// Name of the dense baseline.
    baseline: &'static str,
}

impl SpeedupPlot {
    /// Gathers the plot's data from one backend's records; `None` if MACKO has no finite
    /// speedup.
    fn new(recs: &[&Record]) -> Option<SpeedupPlot> {
        let has_speedup = |r: &&&Record| {
            r.kernel == "macko"
                && valid_density(r.density)
                && r.speedup_over_dense.is_some_and(f64::is_finite)
        };
        let shapes: BTreeSet<(usize, usize)> = recs
            .iter()
            .filter(has_speedup)
            .map(|r| (r.rows, r.cols))
            .collect();
        if shapes.is_empty() {
            return None;
        }
        let grouping = Grouping::choose(&shapes);
        let mut groups = Vec::new();
        for g in 0..grouping.names().len() {
            let n = shapes
                .iter()
                .filter(|&&(r, c)| grouping.group(r, c) == g)
                .count();
            if n == 0 {
                continue;
            }
            let series = by_density(
                recs.iter()
                    .copied()
                    .filter(|r| r.kernel == "macko" && grouping.group(r.rows, r.cols) == g),
                |r| r.speedup_over_dense,
            );
            if !series.is_empty() {
                groups.push((g, n, series));
            }
        }
        let others = OTHER_KERNELS
            .into_iter()
            .map(|k| {
                let s = by_density(recs.iter().copied().filter(|r| r.kernel == k), |r| {
                    r.speedup_over_dense
                });
                (k, s)
            })
            .filter(|(_, s)| !s.is_empty())
            .collect();
        let baseline = if recs.iter().any(|r| r.kernel == "cublas") {
            "cuBLAS"
        } else {
            "ours"
        };
        Some(SpeedupPlot {
            grouping,
            groups,
            others,
            baseline,
        })
    }
}

/// The kernels drawn beside MACKO's shape groups: the other sparse kernels, then the quantized
/// ones (`--values`), each in its own style ([`other_style`]).
const OTHER_KERNELS: [&str; 6] = [
    "csr",
    "cusparse",
    "dense-int8",
    "dense-int4",
    "macko-int8",
    "macko-int4",
];

/// How one of [`OTHER_KERNELS`] is drawn, and its legend name. The sparse baselines are grey
/// and dotted, behind MACKO; a quantized type takes a colour the shape groups do not use
/// (they take the first three), MACKO-V a solid line and dense-V a dotted one.
fn other_style(kernel: &str) -> (SeriesStyle, &'static str) {
    let (color, width, stroke, marker, name) = match kernel {
        "cusparse" => (
            LIGHT_GREY,
            2,
            Stroke::Dotted,
            Marker::Cross,
            "cuSPARSE (CSR)",
        ),
        "dense-int8" => (
            PALETTE[3],
            2,
            Stroke::Dotted,
            Marker::Ring,
            "dense int8 (ours)",
        ),
        "dense-int4" => (
            PALETTE[4],
            2,
            Stroke::Dotted,
            Marker::Ring,
            "dense int4 (ours)",
        ),
        "macko-int8" => (PALETTE[3], 3, Stroke::Solid, Marker::Diamond, "MACKO int8"),
        "macko-int4" => (PALETTE[4], 3, Stroke::Solid, Marker::Diamond, "MACKO int4"),
        _ => (GREY, 2, Stroke::Dotted, Marker::Square, "CSR (ours)"),
    };
    let style = SeriesStyle {
        color,
        width,
        stroke,
        marker,
    };
    (style, name)
}

/// Whether MACKO has a finite speedup among one backend's records (else the plot is skipped).
pub(super) fn has_speedup(recs: &[&Record]) -> bool {
    SpeedupPlot::new(recs).is_some()
}

/// The number of distinct shapes among the records of `kernel`.
fn shape_count(recs: &[&Record], kernel: &str) -> usize {
    recs.iter()
        .filter(|r| r.kernel == kernel)
        .map(|r| (r.rows, r.cols))
        .collect::<BTreeSet<_>>()
        .len()
}

/// Draws `speedup_<backend>.svg`.
pub(super) fn draw_speedup(root: &Area<'_>, backend: &str, recs: &[&Record]) -> DrawResult {
    let Some(data) = SpeedupPlot::new(recs) else {
        return Ok(());
    };
    let title = format!(
        "MACKO speedup over dense ({}) — {}",
        data.baseline,
        title_suffix(backend, recs)
    );
    let (chart_area, legend_area) = layout(root, &title)?;

    let all = data
        .groups
        .iter()
        .flat_map(|(_, _, s)| s.iter())
        .chain(data.others.iter().flat_map(|(_, s)| s.iter()));
    let densities: Vec<f64> = all.clone().map(|s| s.d).collect();
    let Some(x) = x_range(densities.iter().copied()) else {
        return Ok(());
    };
    let y_max = ratio_top(all);
    let chart = chart_on(
        &chart_area,
        x.clone(),
        0.0..y_max,
        "speedup over dense  (dense time ÷ kernel time, ×)",
    )?;
    let plot = chart.plotting_area();

    // Break-even with dense.
    draw_hline(plot, &x, 1.0, BLACK, 2, Stroke::Dashed)?;
    let mut legend = vec![Entry::line(
        BLACK,
        2,
        Stroke::Dashed,
        format!("dense baseline ({}) = 1×", data.baseline),
    )];

    // The other kernels, behind MACKO.
    for (k, series) in &data.others {
        let (style, name) = other_style(k);
        draw_summary(plot, series, 0.0, style)?;
        legend.push(Entry::median(style, name, shape_count(recs, k)));
    }

    // MACKO by shape group, shifted apart a little so that the bars stay legible.
    for (i, (g, count, series)) in data.groups.iter().enumerate() {
        let style = SeriesStyle::main(i, &PALETTE, &GROUP_MARKERS);
        draw_summary(plot, series, spread(i, data.groups.len(), &x), style)?;
        let name = data.grouping.names().get(*g).copied().unwrap_or("shapes");
        legend.push(Entry::median(style, &format!("MACKO, {name}"), *count));
    }
    legend.push(Entry::min_max_bars(
        "thin bars: min–max over\nthe shapes of a line",
    ));
    draw_legend(&legend_area, 20, &legend)
}

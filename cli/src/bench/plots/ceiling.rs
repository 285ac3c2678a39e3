//! `ceiling_<backend>.svg`: the fraction of the streaming-read ceiling that MACKO and the dense
//! kernels reach, and, where `--values` measured them, the quantized kernels (each over its own
//! bytes).

use std::collections::BTreeSet;

use plotters::prelude::*;

use super::chart::{
    chart_on, draw_hline, draw_summary, layout, ratio_top, spread, x_range, Area, DrawResult,
};
use super::data::{by_density, valid_density, Summary};
use super::labels::title_suffix;
use super::legend::{draw_legend, Entry};
use super::style::{Marker, SeriesStyle, Stroke, GREY, LIGHT_GREY, PALETTE};
use crate::bench::record::Record;

/// The fraction of the streaming-read ceiling that the kernels aim for.
const CEILING_GOAL: f64 = 0.85;

/// The kernels of the ceiling plot: (kernel, legend name, colour, marker). Each kernel keeps
/// its style whichever others are present; the quantized ones take colours of their own
/// (MACKO-V circles, dense-V squares, as MACKO and dense).
const CEILING_KERNELS: [(&str, &str, RGBColor, Marker); 7] = [
    ("macko", "MACKO", PALETTE[0], Marker::Circle),
    ("dense", "dense (ours)", GREY, Marker::Square),
    ("cublas", "cuBLAS", LIGHT_GREY, Marker::Cross),
    ("macko-int8", "MACKO int8", PALETTE[3], Marker::Circle),
    (
        "dense-int8",
        "dense int8 (ours)",
        PALETTE[3],
        Marker::Square,
    ),
    ("macko-int4", "MACKO int4", PALETTE[4], Marker::Circle),
    (
        "dense-int4",
        "dense int4 (ours)",
        PALETTE[4],
        Marker::Square,
    ),
];

/// Whether one of the ceiling plot's kernels has a finite fraction of the ceiling.
pub(super) fn has_ceiling(recs: &[&Record]) -> bool {
    recs.iter().any(|r| {
        CEILING_KERNELS.iter().any(|(k, ..)| r.kernel == *k)
            && valid_density(r.density)
            && r.fraction_of_ceiling.is_some_and(f64::is_finite)
    })
}

/// Draws `ceiling_<backend>.svg`.
pub(super) fn draw_ceiling(root: &Area<'_>, backend: &str, recs: &[&Record]) -> DrawResult {
    let series: Vec<(&str, SeriesStyle, usize, Vec<Summary>)> = CEILING_KERNELS
        .iter()
        .map(|&(k, name, color, marker)| {
            let mine: Vec<&Record> = recs.iter().copied().filter(|r| r.kernel == k).collect();
            let s = by_density(mine.iter().copied(), |r| r.fraction_of_ceiling);
            let shapes: BTreeSet<(usize, usize)> = mine.iter().map(|r| (r.rows, r.cols)).collect();
            let style = SeriesStyle::main(0, &[color], &[marker]);
            (name, style, shapes.len(), s)
        })
        .filter(|(.., s)| !s.is_empty())
        .collect();
    let Some(x) = x_range(series.iter().flat_map(|(.., s)| s.iter().map(|s| s.d))) else {
        return Ok(());
    };
    let title = format!(
        "Fraction of the streaming-read ceiling — {}",
        title_suffix(backend, recs)
    );
    let (chart_area, legend_area) = layout(root, &title)?;
    let y_max = ratio_top(series.iter().flat_map(|(.., s)| s.iter()));
    let chart = chart_on(
        &chart_area,
        x.clone(),
        0.0..y_max,
        "fraction of ceiling  (GB/s ÷ streaming-read GB/s)",
    )?;
    let plot = chart.plotting_area();

    let green = PALETTE[2];
    draw_hline(plot, &x, 1.0, BLACK, 1, Stroke::Solid)?;
    draw_hline(plot, &x, CEILING_GOAL, green, 2, Stroke::Dashed)?;
    let mut legend = vec![
        Entry::line(BLACK, 1, Stroke::Solid, "streaming-read ceiling = 1"),
        Entry::line(
            green,
            2,
            Stroke::Dashed,
            format!("goal: {:.0} % of the ceiling", CEILING_GOAL * 100.0),
        ),
    ];
    for (i, (name, style, count, s)) in series.iter().enumerate() {
        let style = *style;
        draw_summary(plot, s, spread(i, series.len(), &x), style)?;
        legend.push(Entry::median(style, name, *count));
    }
    legend.push(Entry::min_max_bars("thin bars: min–max\nover shapes"));
    draw_legend(&legend_area, 20, &legend)
}

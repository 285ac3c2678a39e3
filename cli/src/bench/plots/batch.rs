//! `speedup_by_batch_<backend>.svg`: MACKO's speedup over the backend's dense baseline by
//! density, one line per batch size B (each against the dense baseline with the same B), so
//! that one plot shows how the advantage of reading fewer bytes holds as the vectors multiply.

use std::collections::{BTreeMap, BTreeSet};

use plotters::prelude::*;

use super::chart::{
    chart_on, draw_hline, draw_summary, layout, ratio_top, spread, x_range, Area, DrawResult,
};
use super::data::{by_density, valid_density, Summary};
use super::labels::title_suffix;
use super::legend::{draw_legend, Entry};
use super::style::{SeriesStyle, Stroke, GROUP_MARKERS, PALETTE};
use crate::bench::record::Record;

/// Per batch size with a finite MACKO speedup: (B, number of shapes, summary by density).
fn lines(recs: &[&Record]) -> Vec<(usize, usize, Vec<Summary>)> {
    let mut by_batch: BTreeMap<usize, Vec<&Record>> = BTreeMap::new();
    for r in recs.iter().copied().filter(|r| {
        r.kernel == "macko"
            && valid_density(r.density)
            && r.speedup_over_dense.is_some_and(f64::is_finite)
    }) {
        by_batch.entry(r.batch).or_default().push(r);
    }
    by_batch
        .into_iter()
        .map(|(b, rs)| {
            let shapes: BTreeSet<(usize, usize)> = rs.iter().map(|r| (r.rows, r.cols)).collect();
            (
                b,
                shapes.len(),
                by_density(rs.iter().copied(), |r| r.speedup_over_dense),
            )
        })
        .collect()
}

/// Whether one backend's records hold MACKO speedups of at least two batch sizes (with one,
/// the per-batch speedup plot already says everything).
pub(super) fn has_batch_lines(recs: &[&Record]) -> bool {
    lines(recs).len() >= 2
}

/// Draws `speedup_by_batch_<backend>.svg`.
pub(super) fn draw_batch_speedup(root: &Area<'_>, backend: &str, recs: &[&Record]) -> DrawResult {
    let series = lines(recs);
    let Some(x) = x_range(series.iter().flat_map(|(_, _, s)| s.iter().map(|s| s.d))) else {
        return Ok(());
    };
    let baseline = if recs.iter().any(|r| r.kernel == "cublas") {
        "cuBLAS"
    } else {
        "ours"
    };
    let title = format!(
        "MACKO speedup over dense ({baseline}) by batch size B — {}",
        title_suffix(backend, recs)
    );
    let (chart_area, legend_area) = layout(root, &title)?;
    let y_max = ratio_top(series.iter().flat_map(|(_, _, s)| s.iter()));
    let chart = chart_on(
        &chart_area,
        x.clone(),
        0.0..y_max,
        "speedup over dense with the same B  (×)",
    )?;
    let plot = chart.plotting_area();
    draw_hline(plot, &x, 1.0, BLACK, 2, Stroke::Dashed)?;
    let mut legend = vec![Entry::line(
        BLACK,
        2,
        Stroke::Dashed,
        format!("dense baseline ({baseline}) = 1×"),
    )];
    for (i, (batch, count, s)) in series.iter().enumerate() {
        let style = SeriesStyle::main(i, &PALETTE, &GROUP_MARKERS);
        draw_summary(plot, s, spread(i, series.len(), &x), style)?;
        let name = if *batch == 1 {
            "MACKO, B = 1 (one vector)".to_string()
        } else {
            format!("MACKO, B = {batch} vectors")
        };
        legend.push(Entry::median(style, &name, *count));
    }
    legend.push(Entry::min_max_bars(
        "thin bars: min–max over\nthe shapes of a line",
    ));
    draw_legend(&legend_area, 20, &legend)
}

//! `effective_density.svg`: MACKO's measured effective density against the storage formulas.

use std::collections::{BTreeMap, BTreeSet};

use macko::storage;
use plotters::prelude::*;

use super::chart::{
    chart_on, draw_hline, draw_line, draw_marker, layout, x_range, Area, DrawResult,
};
use super::data::{density_key, key_density, valid_density};
use super::labels::fmt_density;
use super::legend::{draw_legend, Entry};
use super::style::{Marker, Stroke, GREY, LIGHT_GREY, PALETTE};
use crate::bench::record::Record;

/// Whether any MACKO record has a finite effective density.
pub(super) fn has_effective_density(records: &[Record]) -> bool {
    records
        .iter()
        .any(|r| r.kernel == "macko" && valid_density(r.density) && r.effective_density.is_finite())
}

/// One measured effective density.
#[derive(Debug, Clone, Copy)]
struct Measured {
    /// Rows and columns of the matrix.
    shape: (usize, usize),
    /// Density.
    d: f64,
    /// Effective density.
    value: f64,
}

/// The measured effective densities of one kernel, one point per matrix (shape and density;
/// the same matrix measured on several backends counts once).
fn measured_points(records: &[Record], kernel: &str) -> Vec<Measured> {
    let mut seen: BTreeMap<(usize, usize, i64), f64> = BTreeMap::new();
    for r in records {
        if r.kernel == kernel && valid_density(r.density) && r.effective_density.is_finite() {
            seen.entry((r.rows, r.cols, density_key(r.density)))
                .or_insert(r.effective_density);
        }
    }
    seen.into_iter()
        .map(|((rows, cols, k), v)| Measured {
            shape: (rows, cols),
            d: key_density(k),
            value: v,
        })
        .collect()
}

/// "N shapes × M densities" when the points cover every pair, else "N matrices".
fn count_matrices(points: &[Measured]) -> String {
    let shapes: BTreeSet<(usize, usize)> = points.iter().map(|p| p.shape).collect();
    let densities: BTreeSet<i64> = points.iter().map(|p| density_key(p.d)).collect();
    let n = points.len();
    if n > 1 && n == shapes.len() * densities.len() {
        format!("{} shapes × {} densities", shapes.len(), densities.len())
    } else if n == 1 {
        "1 matrix".to_string()
    } else {
        format!("{n} matrices")
    }
}

/// The density above which CSR's 3·d leaves a chart of height `y_max`, if it does below
/// `d_hi`.
fn storage_csr_exit(y_max: f64, d_hi: f64) -> Option<f64> {
    let d = y_max / storage::csr(1.0);
    (d < d_hi).then_some(d)
}

/// Splits a polyline into the parts at or below `y_max`, cutting segments where they cross.
fn clip_top(points: &[(f64, f64)], y_max: f64) -> Vec<Vec<(f64, f64)>> {
    let mut parts = Vec::new();
    let mut current: Vec<(f64, f64)> = Vec::new();
    let mut prev: Option<(f64, f64)> = None;
    for &(x, y) in points {
        if let Some((px, py)) = prev {
            let crossing = |(x0, y0): (f64, f64), (x1, y1): (f64, f64)| {
                let t = (y_max - y0) / (y1 - y0);
                (x0 + t * (x1 - x0), y_max)
            };
            if py <= y_max && y > y_max {
                current.push(crossing((px, py), (x, y)));
                parts.push(std::mem::take(&mut current));
            } else if py > y_max && y <= y_max {
                current.push(crossing((px, py), (x, y)));
            }
        }
        if y <= y_max {
            current.push((x, y));
        }
        prev = Some((x, y));
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

/// Draws `effective_density.svg`.
pub(super) fn draw_effective_density(root: &Area<'_>, records: &[Record]) -> DrawResult {
    let macko_pts = measured_points(records, "macko");
    let csr_pts = measured_points(records, "csr");
    let Some(x) = x_range(macko_pts.iter().chain(&csr_pts).map(|p| p.d)) else {
        return Ok(());
    };
    let (layout_chart, legend_area) = layout(
        root,
        "Storage: MACKO effective density vs density (bytes ÷ dense f16 bytes)",
    )?;

    // The formulas, sampled finely over the plotted densities.
    let (d_lo, d_hi) = ((1.0 - x.end).max(0.0), (1.0 - x.start).min(1.0));
    let grid: Vec<f64> = (0..=200)
        .map(|i| d_lo + (d_hi - d_lo) * i as f64 / 200.0)
        .collect();
    let curve =
        |f: fn(f64) -> f64| -> Vec<(f64, f64)> { grid.iter().map(|&d| (1.0 - d, f(d))).collect() };
    let expected = curve(storage::macko_expected);
    let best = curve(storage::macko_best);
    let worst = curve(storage::macko_worst);
    let csr = curve(storage::csr);

    // Zoomed on MACKO and dense: CSR, at three times the density, leaves through the top.
    let y_max = macko_pts
        .iter()
        .map(|p| p.value)
        .chain(worst.iter().map(|p| p.1))
        .filter(|v| v.is_finite())
        .fold(1.0_f64, f64::max)
        * 1.12;
    let chart = chart_on(
        &layout_chart,
        x.clone(),
        0.0..y_max,
        "effective density  (stored bytes ÷ dense f16 bytes)",
    )?;
    let plot = chart.plotting_area();

    let blue = PALETTE[0];
    let band: Vec<(f64, f64)> = best.iter().chain(worst.iter().rev()).copied().collect();
    plot.draw(&Polygon::new(band, blue.mix(0.15).filled()))?;
    draw_line(plot, best.clone(), blue, 1, Stroke::Dotted)?;
    draw_line(plot, worst.clone(), blue, 1, Stroke::Dashed)?;
    for part in clip_top(&csr, y_max) {
        draw_line(plot, part, GREY, 2, Stroke::Solid)?;
    }
    draw_hline(plot, &x, 1.0, BLACK, 2, Stroke::Dashed)?;
    draw_line(plot, expected, blue, 3, Stroke::Solid)?;
    for p in csr_pts.iter().filter(|p| p.value <= y_max) {
        draw_marker(plot, (1.0 - p.d, p.value), Marker::Cross, 3, LIGHT_GREY)?;
    }
    let orange = PALETTE[1];
    for p in &macko_pts {
        draw_marker(plot, (1.0 - p.d, p.value), Marker::Ring, 4, orange)?;
    }

    let csr_label = match storage_csr_exit(y_max, d_hi) {
        Some(d) => format!(
            "CSR, 32-bit indices: 3·d\n  (above the top for d > {})",
            fmt_density(d)
        ),
        None => "CSR, 32-bit indices: 3·d".to_string(),
    };
    let mut legend = vec![
        Entry::point(
            orange,
            Marker::Ring,
            format!("MACKO measured\n  ({})", count_matrices(&macko_pts)),
        ),
        Entry::line(
            blue,
            3,
            Stroke::Solid,
            "MACKO expected, random:\n  1.25·d·(1 + z/(1 − z)),\n  z = (1 − d)¹⁶",
        ),
        Entry::line(blue, 1, Stroke::Dotted, "MACKO best: 1.25·d"),
        Entry::line(
            blue,
            1,
            Stroke::Dashed,
            "MACKO worst:\n  1.25·(d + (1 − d)/16)",
        ),
        Entry::band(blue, "MACKO best–worst range"),
        Entry::line(GREY, 2, Stroke::Solid, csr_label),
    ];
    if !csr_pts.is_empty() {
        legend.push(Entry::point(
            LIGHT_GREY,
            Marker::Cross,
            format!("CSR measured\n  ({})", count_matrices(&csr_pts)),
        ));
    }
    legend.push(Entry::line(BLACK, 2, Stroke::Dashed, "dense f16: 1"));
    draw_legend(&legend_area, 20, &legend)
}

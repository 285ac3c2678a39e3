//! The chart scaffolding shared by every plot: sizes, the title / chart / legend layout, the
//! axes with density falling left to right, and the marks drawn on a chart.

use std::ops::Range;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::data::{series_max, valid_density, Summary};
use super::labels::{fmt_density, fmt_value};
use super::style::{Marker, SeriesStyle, Stroke};

/// Width of every plot, px (chart and legend panel together).
pub(super) const WIDTH: u32 = 1000;
/// Height of every plot, px.
pub(super) const HEIGHT: u32 = 600;
/// Width of the legend panel on the right of each plot, px.
pub(super) const LEGEND_WIDTH: u32 = 300;
/// Font family of all text (the SVG viewer picks its sans-serif face).
pub(super) const FONT: &str = "sans-serif";

/// What the drawing helpers return: plotters' errors, boxed.
pub(super) type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// The drawing area of one whole plot.
pub(super) type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// The chart coordinates: x is sparsity 1 − d (so that density falls left to right), y linear.
pub(super) type Coords = Cartesian2d<RangedCoordf64, RangedCoordf64>;

/// The plotting area of a chart, in chart coordinates.
pub(super) type PlotArea<'a> = DrawingArea<SVGBackend<'a>, Coords>;

/// Draws `marker` of radius `size` px at `at` on any drawing area.
pub(super) fn draw_marker<CT: CoordTranslate>(
    area: &DrawingArea<SVGBackend<'_>, CT>,
    at: CT::From,
    marker: Marker,
    size: i32,
    color: RGBColor,
) -> DrawResult
where
    CT::From: Clone,
{
    let fill = color.filled();
    let line = color.stroke_width(2);
    match marker {
        Marker::Circle => area.draw(&(EmptyElement::at(at) + Circle::new((0, 0), size, fill)))?,
        Marker::Ring => area.draw(&(EmptyElement::at(at) + Circle::new((0, 0), size, line)))?,
        Marker::Triangle => {
            let s = size + 1;
            let pts = vec![(0, -s), (s, s * 3 / 4), (-s, s * 3 / 4)];
            area.draw(&(EmptyElement::at(at) + Polygon::new(pts, fill)))?
        }
        Marker::Square => {
            let s = size - 1;
            area.draw(&(EmptyElement::at(at) + Rectangle::new([(-s, -s), (s, s)], fill)))?
        }
        Marker::Diamond => {
            let s = size + 1;
            let pts = vec![(0, -s), (s, 0), (0, s), (-s, 0)];
            area.draw(&(EmptyElement::at(at) + Polygon::new(pts, fill)))?
        }
        Marker::Cross => {
            let s = size;
            area.draw(
                &(EmptyElement::at(at.clone()) + PathElement::new(vec![(-s, -s), (s, s)], line)),
            )?;
            area.draw(&(EmptyElement::at(at) + PathElement::new(vec![(-s, s), (s, -s)], line)))?
        }
    }
    Ok(())
}

/// Draws a polyline with the given stroke on any drawing area.
pub(super) fn draw_line<CT: CoordTranslate>(
    area: &DrawingArea<SVGBackend<'_>, CT>,
    points: Vec<CT::From>,
    color: RGBColor,
    width: u32,
    stroke: Stroke,
) -> DrawResult
where
    CT::From: Clone,
{
    if points.len() < 2 {
        return Ok(());
    }
    let style = color.stroke_width(width);
    match stroke {
        Stroke::Solid => area.draw(&PathElement::new(points, style))?,
        Stroke::Dashed => area.draw(&DashedPathElement::new(points, 10, 6, style))?,
        Stroke::Dotted => area.draw(&DashedPathElement::new(points, 3, 4, style))?,
    }
    Ok(())
}

/// Splits a whole plot into its title strip, chart area and legend panel; returns the latter
/// two.
pub(super) fn layout<'a>(
    root: &Area<'a>,
    title: &str,
) -> Result<(Area<'a>, Area<'a>), Box<dyn std::error::Error>> {
    root.fill(&WHITE)?;
    // Long titles (several device names) shrink rather than run off the sides.
    let chars = title.chars().count().max(1) as f64;
    let size = (22.0 * (95.0 / chars).min(1.0)).max(12.0);
    let body = root.titled(title, (FONT, size).into_font().color(&BLACK))?;
    let (chart, legend) = body.split_horizontally(WIDTH - LEGEND_WIDTH);
    Ok((chart, legend))
}

/// The x range (sparsity 1 − d) covering the densities `ds`, padded.
pub(super) fn x_range(ds: impl IntoIterator<Item = f64>) -> Option<Range<f64>> {
    let (lo, hi) =
        ds.into_iter()
            .filter(|d| valid_density(*d))
            .fold(None, |acc: Option<(f64, f64)>, d| match acc {
                None => Some((d, d)),
                Some((lo, hi)) => Some((lo.min(d), hi.max(d))),
            })?;
    let (s_lo, s_hi) = (1.0 - hi, 1.0 - lo);
    let pad = ((s_hi - s_lo) * 0.04).max(0.02);
    Some((s_lo - pad)..(s_hi + pad))
}

/// Builds the chart on `area` with density falling left to right, the given y range and axis
/// texts, and draws its grid and axes.
pub(super) fn chart_on<'a>(
    area: &Area<'a>,
    x: Range<f64>,
    y: Range<f64>,
    y_desc: &str,
) -> Result<ChartContext<'a, SVGBackend<'a>, Coords>, Box<dyn std::error::Error>> {
    let mut chart = ChartBuilder::on(area)
        .margin_top(12)
        .margin_left(12)
        .margin_right(20)
        .margin_bottom(8)
        .x_label_area_size(56)
        .y_label_area_size(72)
        .build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .x_labels(11)
        .y_labels(10)
        .x_label_formatter(&|s| fmt_density(1.0 - s))
        .y_label_formatter(&|v| fmt_value(*v))
        .x_desc("density d  (fraction of weights kept; sparser →)")
        .y_desc(y_desc)
        .axis_desc_style((FONT, 17))
        .label_style((FONT, 14))
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(220, 220, 220))
        .draw()?;
    Ok(chart)
}

/// Draws a summary series: median line with markers, and min–max bars unless every group has
/// one value. `dx` shifts the series along x (sparsity units) so that bars of several series
/// do not sit on each other (see [`spread`]).
pub(super) fn draw_summary(
    plot: &PlotArea<'_>,
    series: &[Summary],
    dx: f64,
    style: SeriesStyle,
) -> DrawResult {
    let SeriesStyle {
        color,
        width,
        stroke,
        marker,
    } = style;
    for s in series.iter().filter(|s| s.max > s.min) {
        let x = 1.0 - s.d + dx;
        let bar = color.mix(0.7).stroke_width(1);
        plot.draw(&PathElement::new(vec![(x, s.min), (x, s.max)], bar))?;
        for v in [s.min, s.max] {
            plot.draw(&(EmptyElement::at((x, v)) + PathElement::new(vec![(-3, 0), (3, 0)], bar)))?;
        }
    }
    let pts: Vec<(f64, f64)> = series.iter().map(|s| (1.0 - s.d + dx, s.median)).collect();
    draw_line(plot, pts.clone(), color, width, stroke)?;
    for p in pts {
        draw_marker(plot, p, marker, 4, color)?;
    }
    Ok(())
}

/// The x shift of series `i` of `n` drawn side by side on the x range `x`: centred on zero,
/// 1.2 % of the range apart, so that their min–max bars stay legible.
pub(super) fn spread(i: usize, n: usize, x: &Range<f64>) -> f64 {
    let span = x.end - x.start;
    (i as f64 - (n as f64 - 1.0) / 2.0) * span * 0.012
}

/// Draws a horizontal reference line at `y` across the x range `x`.
pub(super) fn draw_hline(
    plot: &PlotArea<'_>,
    x: &Range<f64>,
    y: f64,
    color: RGBColor,
    width: u32,
    stroke: Stroke,
) -> DrawResult {
    draw_line(plot, vec![(x.start, y), (x.end, y)], color, width, stroke)
}

/// The top of a chart of ratios whose reference line is 1: the largest value of the series,
/// at least 1, with 8 % headroom.
pub(super) fn ratio_top<'s>(series: impl IntoIterator<Item = &'s Summary>) -> f64 {
    series_max(series).unwrap_or(1.0).max(1.0) * 1.08
}

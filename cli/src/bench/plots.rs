//! SVG plots of `macko bench` results, drawn with plotters:
//!
//! - `speedup_<backend>.svg`: speedup of MACKO over the backend's dense baseline by density,
//!   one line per shape group (median over the group's shapes, min–max as thin bars), with
//!   the dense break-even line and the CSR / cuSPARSE medians for contrast;
//! - `effective_density.svg`: MACKO's measured effective density against the storage formulas
//!   of FORMAT.md (expected, best, worst), CSR and dense;
//! - `ceiling_<backend>.svg`: the fraction of the streaming-read ceiling that MACKO and the
//!   dense kernels reach, with the 85 % goal marked.
//!
//! Density runs from dense on the left to sparse on the right on every plot, so "more pruning"
//! reads left to right. Only finite figures are drawn (NaN, infinities and missing optional
//! figures are left out), and a plot whose data is absent is skipped, not drawn empty.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use macko::storage;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::record::Record;

/// Width of every plot, px (chart and legend panel together).
const WIDTH: u32 = 1000;
/// Height of every plot, px.
const HEIGHT: u32 = 600;
/// Width of the legend panel on the right of each plot, px.
const LEGEND_WIDTH: u32 = 300;
/// Font family of all text (the SVG viewer picks its sans-serif face).
const FONT: &str = "sans-serif";
/// The fraction of the streaming-read ceiling that the kernels aim for.
const CEILING_GOAL: f64 = 0.85;
/// Shapes with fewer weights than this are "small" (the size bands of the shape groups).
const SMALL_BELOW: usize = 32_000_000;
/// Shapes with at least this many weights are "large".
const LARGE_FROM: usize = 200_000_000;

/// Why a plot could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The output directory could not be created.
    #[error("cannot create the plot directory {path}: {source}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// Drawing or writing one SVG file failed.
    #[error("cannot draw {path}: {message}")]
    Draw {
        /// The SVG file.
        path: PathBuf,
        /// What plotters said.
        message: String,
    },
}

/// What the drawing helpers return: plotters' errors, boxed.
type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// The drawing area of one whole plot.
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// The chart coordinates: x is sparsity 1 − d (so that density falls left to right), y linear.
type Coords = Cartesian2d<RangedCoordf64, RangedCoordf64>;

/// The plotting area of a chart, in chart coordinates.
type PlotArea<'a> = DrawingArea<SVGBackend<'a>, Coords>;

/// Writes every plot that the records have data for into `dir` (created if missing) and
/// returns the paths written, in order: per backend (sorted by name) the speedup plot, then
/// the effective-density plot, then per backend the ceiling plot. Empty input writes nothing.
pub fn write_plots(records: &[Record], dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let backends: BTreeSet<&str> = records.iter().map(|r| r.backend.as_str()).collect();
    let mut jobs: Vec<(PathBuf, Job<'_>)> = Vec::new();
    for backend in &backends {
        let recs: Vec<&Record> = records.iter().filter(|r| r.backend == *backend).collect();
        if SpeedupPlot::new(&recs).is_some() {
            let name = format!("speedup_{}.svg", file_stem(backend));
            jobs.push((dir.join(name), Job::Speedup(backend, recs)));
        }
    }
    if has_effective_density(records) {
        jobs.push((dir.join("effective_density.svg"), Job::EffectiveDensity));
    }
    for backend in &backends {
        let recs: Vec<&Record> = records.iter().filter(|r| r.backend == *backend).collect();
        if has_ceiling(&recs) {
            let name = format!("ceiling_{}.svg", file_stem(backend));
            jobs.push((dir.join(name), Job::Ceiling(backend, recs)));
        }
    }
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    std::fs::create_dir_all(dir).map_err(|source| PlotError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;

    let mut written = Vec::with_capacity(jobs.len());
    for (path, job) in jobs {
        let result = {
            let root = SVGBackend::new(&path, (WIDTH, HEIGHT)).into_drawing_area();
            let drawn = match &job {
                Job::Speedup(backend, recs) => draw_speedup(&root, backend, recs),
                Job::EffectiveDensity => draw_effective_density(&root, records),
                Job::Ceiling(backend, recs) => draw_ceiling(&root, backend, recs),
            };
            drawn.and_then(|()| root.present().map_err(Into::into))
        };
        result.map_err(|e| PlotError::Draw {
            path: path.clone(),
            message: e.to_string(),
        })?;
        written.push(path);
    }
    Ok(written)
}

/// One plot to draw.
enum Job<'r> {
    /// Speedup over dense for one backend, with that backend's records.
    Speedup(&'r str, Vec<&'r Record>),
    /// Effective density over all records.
    EffectiveDensity,
    /// Fraction of the ceiling for one backend, with that backend's records.
    Ceiling(&'r str, Vec<&'r Record>),
}

// ---------------------------------------------------------------------------------------------
// Data: grouping, keys, medians.

/// A density as a map key, in parts per million, so that 0.9 and 0.900000001 meet.
fn density_key(d: f64) -> i64 {
    (d * 1e6).round() as i64
}

/// The density of a key.
fn key_density(k: i64) -> f64 {
    k as f64 / 1e6
}

/// A usable density: finite and within [0, 1].
fn valid_density(d: f64) -> bool {
    d.is_finite() && (0.0..=1.0).contains(&d)
}

/// Median, minimum and maximum of the values at one density.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Summary {
    /// Density.
    d: f64,
    /// Median of the values.
    median: f64,
    /// Smallest value.
    min: f64,
    /// Largest value.
    max: f64,
}

/// Summarises `value` over `records` by density, leaving out non-finite figures; sorted by
/// density, densest first.
fn by_density<'r>(
    records: impl IntoIterator<Item = &'r Record>,
    value: impl Fn(&Record) -> Option<f64>,
) -> Vec<Summary> {
    let mut groups: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
    for r in records {
        if !valid_density(r.density) {
            continue;
        }
        if let Some(v) = value(r).filter(|v| v.is_finite()) {
            groups.entry(density_key(r.density)).or_default().push(v);
        }
    }
    groups
        .into_iter()
        .rev()
        .filter_map(|(k, mut v)| {
            v.sort_by(f64::total_cmp);
            let (min, max) = (*v.first()?, *v.last()?);
            let mid = v.len() / 2;
            let median = if v.len() % 2 == 1 {
                v[mid]
            } else {
                (v[mid - 1] + v[mid]) / 2.0
            };
            Some(Summary {
                d: key_density(k),
                median,
                min,
                max,
            })
        })
        .collect()
}

/// How the shapes of one backend are grouped into lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grouping {
    /// By number of weights (rows · cols): small, medium, large.
    Size,
    /// By aspect: square, tall, wide.
    Aspect,
    /// One group of all shapes.
    All,
}

impl Grouping {
    /// The group of a shape, an index into [`Grouping::names`].
    fn group(self, rows: usize, cols: usize) -> usize {
        match self {
            Grouping::Size => {
                let n = rows.saturating_mul(cols);
                if n < SMALL_BELOW {
                    0
                } else if n < LARGE_FROM {
                    1
                } else {
                    2
                }
            }
            Grouping::Aspect => match rows.cmp(&cols) {
                std::cmp::Ordering::Equal => 0,
                std::cmp::Ordering::Greater => 1,
                std::cmp::Ordering::Less => 2,
            },
            Grouping::All => 0,
        }
    }

    /// Legend names of the groups.
    fn names(self) -> &'static [&'static str] {
        match self {
            Grouping::Size => &["< 32M weights", "32M–200M weights", "≥ 200M weights"],
            Grouping::Aspect => &[
                "square (rows = cols)",
                "tall (rows > cols)",
                "wide (rows < cols)",
            ],
            Grouping::All => &["all shapes"],
        }
    }

    /// The grouping that splits `shapes` best: by size if that gives two groups or more, else
    /// by aspect if that does, else all in one.
    fn choose(shapes: &BTreeSet<(usize, usize)>) -> Grouping {
        for g in [Grouping::Size, Grouping::Aspect] {
            let used: BTreeSet<usize> = shapes.iter().map(|&(r, c)| g.group(r, c)).collect();
            if used.len() >= 2 {
                return g;
            }
        }
        Grouping::All
    }
}

/// A file-name-safe form of a backend name.
fn file_stem(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "unnamed".to_string()
    } else {
        s
    }
}

/// How a backend is named in titles.
fn backend_title(backend: &str) -> String {
    match backend {
        "cuda" => "CUDA".to_string(),
        "wgpu" => "wgpu (WGSL)".to_string(),
        "cpu" => "CPU".to_string(),
        other => other.to_string(),
    }
}

/// The distinct device names of the records, joined.
fn devices(records: &[&Record]) -> String {
    let names: BTreeSet<&str> = records
        .iter()
        .map(|r| r.device.trim())
        .filter(|d| !d.is_empty())
        .collect();
    if names.is_empty() {
        "unknown device".to_string()
    } else {
        names.into_iter().collect::<Vec<_>>().join(", ")
    }
}

/// "backend · device" for titles.
fn title_suffix(backend: &str, records: &[&Record]) -> String {
    format!("{} · {}", backend_title(backend), devices(records))
}

/// Formats a density tick: at most two decimals, no trailing zeros beyond the first.
fn fmt_density(d: f64) -> String {
    let d = if d.abs() < 1e-9 { 0.0 } else { d };
    let s = format!("{d:.2}");
    match s.strip_suffix('0') {
        Some(t) if !t.ends_with('.') => t.to_string(),
        _ => s,
    }
}

/// Formats a y tick with as many decimals as the step needs.
fn fmt_value(v: f64) -> String {
    let v = if v.abs() < 1e-9 { 0.0 } else { v };
    let s = format!("{v:.2}");
    let t = s.trim_end_matches('0');
    match t.strip_suffix('.') {
        Some(int) => int.to_string(),
        None => t.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// Styles and the legend panel.

/// Okabe–Ito colours, distinguishable with colour-blindness: blue, vermillion, green, purple,
/// orange, sky blue.
const PALETTE: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
];
/// Dark grey of the CSR line.
const GREY: RGBColor = RGBColor(90, 90, 90);
/// Light grey of the cuSPARSE line and of secondary marks.
const LIGHT_GREY: RGBColor = RGBColor(150, 150, 150);

/// A point marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    /// Filled circle.
    Circle,
    /// Filled triangle.
    Triangle,
    /// Filled square.
    Square,
    /// Filled diamond.
    Diamond,
    /// Diagonal cross.
    Cross,
    /// Hollow circle.
    Ring,
}

/// Markers for the groups, in order, so that lines differ by more than colour.
const GROUP_MARKERS: [Marker; 6] = [
    Marker::Circle,
    Marker::Triangle,
    Marker::Square,
    Marker::Diamond,
    Marker::Circle,
    Marker::Triangle,
];

/// How a line is stroked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stroke {
    /// Continuous.
    Solid,
    /// Long dashes.
    Dashed,
    /// Short dashes.
    Dotted,
}

/// What a legend entry shows next to its text.
#[derive(Debug, Clone, Copy)]
enum Sample {
    /// A line, optionally with a marker on it.
    Line {
        /// Colour.
        color: RGBColor,
        /// Width, px.
        width: u32,
        /// Stroke.
        stroke: Stroke,
        /// Marker in the middle, if any.
        marker: Option<Marker>,
    },
    /// A marker alone.
    Point {
        /// Colour.
        color: RGBColor,
        /// Marker.
        marker: Marker,
    },
    /// A thin vertical bar with caps (a min–max range).
    Range {
        /// Colour.
        color: RGBColor,
    },
    /// A light filled box (a band).
    Band {
        /// Colour.
        color: RGBColor,
    },
}

/// One legend entry: a sample and its text (lines separated by '\n').
struct Entry {
    /// What is drawn.
    sample: Sample,
    /// The text.
    label: String,
}

/// Draws `marker` of radius `size` px at `at` on any drawing area.
fn draw_marker<CT: CoordTranslate>(
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
fn draw_line<CT: CoordTranslate>(
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

/// Draws the legend panel: entries top to bottom from `top` px, each a 44 px sample and text.
fn draw_legend(area: &Area<'_>, top: i32, entries: &[Entry]) -> DrawResult {
    let text = (FONT, 15).into_font().color(&BLACK);
    let line_height = 18;
    let (x0, x1, tx) = (14, 54, 64);
    let mut y = top;
    for e in entries {
        let lines: Vec<&str> = e.label.split('\n').collect();
        let cy = y + 8;
        match e.sample {
            Sample::Line {
                color,
                width,
                stroke,
                marker,
            } => {
                draw_line(area, vec![(x0, cy), (x1, cy)], color, width, stroke)?;
                if let Some(m) = marker {
                    draw_marker(area, ((x0 + x1) / 2, cy), m, 5, color)?;
                }
            }
            Sample::Point { color, marker } => {
                draw_marker(area, ((x0 + x1) / 2, cy), marker, 4, color)?
            }
            Sample::Range { color } => {
                let cx = (x0 + x1) / 2;
                let style = color.stroke_width(1);
                area.draw(&PathElement::new(vec![(cx, cy - 9), (cx, cy + 9)], style))?;
                area.draw(&PathElement::new(
                    vec![(cx - 4, cy - 9), (cx + 4, cy - 9)],
                    style,
                ))?;
                area.draw(&PathElement::new(
                    vec![(cx - 4, cy + 9), (cx + 4, cy + 9)],
                    style,
                ))?;
            }
            Sample::Band { color } => {
                area.draw(&Rectangle::new(
                    [(x0, cy - 7), (x1, cy + 7)],
                    color.mix(0.25).filled(),
                ))?;
            }
        }
        for (i, l) in lines.iter().enumerate() {
            let ty = y + i as i32 * line_height;
            area.draw(&Text::new(l.to_string(), (tx, ty), text.clone()))?;
        }
        y += lines.len() as i32 * line_height + 12;
    }
    Ok(())
}

/// Splits a whole plot into its title strip, chart area and legend panel; returns the latter
/// two.
fn layout<'a>(
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
fn x_range(ds: impl IntoIterator<Item = f64>) -> Option<std::ops::Range<f64>> {
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
fn chart_on<'a>(
    area: &Area<'a>,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
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
/// do not sit on each other.
fn draw_summary(
    plot: &PlotArea<'_>,
    series: &[Summary],
    dx: f64,
    color: RGBColor,
    width: u32,
    stroke: Stroke,
    marker: Marker,
) -> DrawResult {
    for s in series.iter().filter(|s| s.max > s.min) {
        let x = 1.0 - s.d + dx;
        let style = color.mix(0.7).stroke_width(1);
        plot.draw(&PathElement::new(vec![(x, s.min), (x, s.max)], style))?;
        for v in [s.min, s.max] {
            plot.draw(
                &(EmptyElement::at((x, v)) + PathElement::new(vec![(-3, 0), (3, 0)], style)),
            )?;
        }
    }
    let pts: Vec<(f64, f64)> = series.iter().map(|s| (1.0 - s.d + dx, s.median)).collect();
    draw_line(plot, pts.clone(), color, width, stroke)?;
    for p in pts {
        draw_marker(plot, p, marker, 4, color)?;
    }
    Ok(())
}

/// The largest finite value of the series (maxima included), if any.
fn series_max<'s>(series: impl IntoIterator<Item = &'s Summary>) -> Option<f64> {
    series
        .into_iter()
        .map(|s| s.max)
        .filter(|v| v.is_finite())
        .fold(None, |acc: Option<f64>, v| {
            Some(acc.map_or(v, |a| a.max(v)))
        })
}

// ---------------------------------------------------------------------------------------------
// Speedup over dense.

/// The data of one backend's speedup plot.
struct SpeedupPlot {
    /// The grouping of shapes.
    grouping: Grouping,
    /// Per group in use: (group index, number of shapes, summary by density).
    groups: Vec<(usize, usize, Vec<Summary>)>,
    /// Medians (and ranges) of the other sparse kernels: (kernel, summary by density).
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
        let others = ["csr", "cusparse"]
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

/// The number of distinct shapes among the records of `kernel`.
fn shape_count(recs: &[&Record], kernel: &str) -> usize {
    recs.iter()
        .filter(|r| r.kernel == kernel)
        .map(|r| (r.rows, r.cols))
        .collect::<BTreeSet<_>>()
        .len()
}

/// Draws `speedup_<backend>.svg`.
fn draw_speedup(root: &Area<'_>, backend: &str, recs: &[&Record]) -> DrawResult {
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
    let y_max = series_max(all).unwrap_or(1.0).max(1.0) * 1.08;
    let chart = chart_on(
        &chart_area,
        x.clone(),
        0.0..y_max,
        "speedup over dense  (dense time ÷ kernel time, ×)",
    )?;
    let plot = chart.plotting_area();

    // Break-even with dense.
    draw_line(
        plot,
        vec![(x.start, 1.0), (x.end, 1.0)],
        BLACK,
        2,
        Stroke::Dashed,
    )?;

    let mut legend = vec![Entry {
        sample: Sample::Line {
            color: BLACK,
            width: 2,
            stroke: Stroke::Dashed,
            marker: None,
        },
        label: format!("dense baseline ({}) = 1×", data.baseline),
    }];

    // The other sparse kernels, behind MACKO.
    for (k, series) in &data.others {
        let (color, marker, name) = match *k {
            "cusparse" => (LIGHT_GREY, Marker::Cross, "cuSPARSE (CSR)"),
            _ => (GREY, Marker::Square, "CSR (ours)"),
        };
        draw_summary(plot, series, 0.0, color, 2, Stroke::Dotted, marker)?;
        legend.push(Entry {
            sample: Sample::Line {
                color,
                width: 2,
                stroke: Stroke::Dotted,
                marker: Some(marker),
            },
            label: format!("{name}\n  median of {} shapes", shape_count(recs, k)),
        });
    }

    // MACKO by shape group, shifted apart a little so that the bars stay legible.
    let span = x.end - x.start;
    let n = data.groups.len();
    for (i, (g, count, series)) in data.groups.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let marker = GROUP_MARKERS[i % GROUP_MARKERS.len()];
        let dx = (i as f64 - (n as f64 - 1.0) / 2.0) * span * 0.012;
        draw_summary(plot, series, dx, color, 3, Stroke::Solid, marker)?;
        let name = data.grouping.names().get(*g).copied().unwrap_or("shapes");
        let plural = if *count == 1 { "shape" } else { "shapes" };
        legend.push(Entry {
            sample: Sample::Line {
                color,
                width: 3,
                stroke: Stroke::Solid,
                marker: Some(marker),
            },
            label: format!("MACKO, {name}\n  median of {count} {plural}"),
        });
    }
    legend.push(Entry {
        sample: Sample::Range { color: GREY },
        label: "thin bars: min–max over\nthe shapes of a line".to_string(),
    });
    draw_legend(&legend_area, 20, &legend)
}

// ---------------------------------------------------------------------------------------------
// Effective density.

/// Whether any MACKO record has a finite effective density.
fn has_effective_density(records: &[Record]) -> bool {
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
fn draw_effective_density(root: &Area<'_>, records: &[Record]) -> DrawResult {
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
    draw_line(
        plot,
        vec![(x.start, 1.0), (x.end, 1.0)],
        BLACK,
        2,
        Stroke::Dashed,
    )?;
    draw_line(plot, expected, blue, 3, Stroke::Solid)?;
    for p in csr_pts.iter().filter(|p| p.value <= y_max) {
        draw_marker(plot, (1.0 - p.d, p.value), Marker::Cross, 3, LIGHT_GREY)?;
    }
    let orange = PALETTE[1];
    for p in &macko_pts {
        draw_marker(plot, (1.0 - p.d, p.value), Marker::Ring, 4, orange)?;
    }

    let mut legend = vec![
        Entry {
            sample: Sample::Point {
                color: orange,
                marker: Marker::Ring,
            },
            label: format!("MACKO measured\n  ({})", count_matrices(&macko_pts)),
        },
        Entry {
            sample: Sample::Line {
                color: blue,
                width: 3,
                stroke: Stroke::Solid,
                marker: None,
            },
            label: "MACKO expected, random:\n  1.25·d·(1 + z/(1 − z)),\n  z = (1 − d)¹⁶"
                .to_string(),
        },
        Entry {
            sample: Sample::Line {
                color: blue,
                width: 1,
                stroke: Stroke::Dotted,
                marker: None,
            },
            label: "MACKO best: 1.25·d".to_string(),
        },
        Entry {
            sample: Sample::Line {
                color: blue,
                width: 1,
                stroke: Stroke::Dashed,
                marker: None,
            },
            label: "MACKO worst:\n  1.25·(d + (1 − d)/16)".to_string(),
        },
        Entry {
            sample: Sample::Band { color: blue },
            label: "MACKO best–worst range".to_string(),
        },
        Entry {
            sample: Sample::Line {
                color: GREY,
                width: 2,
                stroke: Stroke::Solid,
                marker: None,
            },
            label: match storage_csr_exit(y_max, d_hi) {
                Some(d) => format!(
                    "CSR, 32-bit indices: 3·d\n  (above the top for d > {})",
                    fmt_density(d)
                ),
                None => "CSR, 32-bit indices: 3·d".to_string(),
            },
        },
    ];
    if !csr_pts.is_empty() {
        legend.push(Entry {
            sample: Sample::Point {
                color: LIGHT_GREY,
                marker: Marker::Cross,
            },
            label: format!("CSR measured\n  ({})", count_matrices(&csr_pts)),
        });
    }
    legend.push(Entry {
        sample: Sample::Line {
            color: BLACK,
            width: 2,
            stroke: Stroke::Dashed,
            marker: None,
        },
        label: "dense f16: 1".to_string(),
    });
    draw_legend(&legend_area, 20, &legend)
}

// ---------------------------------------------------------------------------------------------
// Fraction of the streaming-read ceiling.

/// The kernels of the ceiling plot: (kernel, legend name).
const CEILING_KERNELS: [(&str, &str); 3] = [
    ("macko", "MACKO"),
    ("dense", "dense (ours)"),
    ("cublas", "cuBLAS"),
];

/// Whether one of the ceiling plot's kernels has a finite fraction of the ceiling.
fn has_ceiling(recs: &[&Record]) -> bool {
    recs.iter().any(|r| {
        CEILING_KERNELS.iter().any(|(k, _)| r.kernel == *k)
            && valid_density(r.density)
            && r.fraction_of_ceiling.is_some_and(f64::is_finite)
    })
}

/// Draws `ceiling_<backend>.svg`.
fn draw_ceiling(root: &Area<'_>, backend: &str, recs: &[&Record]) -> DrawResult {
    let series: Vec<(&str, usize, Vec<Summary>)> = CEILING_KERNELS
        .iter()
        .map(|&(k, name)| {
            let mine: Vec<&Record> = recs.iter().copied().filter(|r| r.kernel == k).collect();
            let s = by_density(mine.iter().copied(), |r| r.fraction_of_ceiling);
            let shapes: BTreeSet<(usize, usize)> = mine.iter().map(|r| (r.rows, r.cols)).collect();
            (name, shapes.len(), s)
        })
        .filter(|(_, _, s)| !s.is_empty())
        .collect();
    let Some(x) = x_range(series.iter().flat_map(|(_, _, s)| s.iter().map(|s| s.d))) else {
        return Ok(());
    };
    let title = format!(
        "Fraction of the streaming-read ceiling — {}",
        title_suffix(backend, recs)
    );
    let (chart_area, legend_area) = layout(root, &title)?;
    let y_max = series_max(series.iter().flat_map(|(_, _, s)| s.iter()))
        .unwrap_or(1.0)
        .max(1.0)
        * 1.08;
    let chart = chart_on(
        &chart_area,
        x.clone(),
        0.0..y_max,
        "fraction of ceiling  (GB/s ÷ streaming-read GB/s)",
    )?;
    let plot = chart.plotting_area();

    let green = PALETTE[2];
    draw_line(
        plot,
        vec![(x.start, 1.0), (x.end, 1.0)],
        BLACK,
        1,
        Stroke::Solid,
    )?;
    draw_line(
        plot,
        vec![(x.start, CEILING_GOAL), (x.end, CEILING_GOAL)],
        green,
        2,
        Stroke::Dashed,
    )?;
    let mut legend = vec![
        Entry {
            sample: Sample::Line {
                color: BLACK,
                width: 1,
                stroke: Stroke::Solid,
                marker: None,
            },
            label: "streaming-read ceiling = 1".to_string(),
        },
        Entry {
            sample: Sample::Line {
                color: green,
                width: 2,
                stroke: Stroke::Dashed,
                marker: None,
            },
            label: format!("goal: {:.0} % of the ceiling", CEILING_GOAL * 100.0),
        },
    ];
    let colors = [PALETTE[0], GREY, LIGHT_GREY];
    let markers = [Marker::Circle, Marker::Square, Marker::Cross];
    let span = x.end - x.start;
    let n = series.len();
    for (i, (name, count, s)) in series.iter().enumerate() {
        let color = colors[i % colors.len()];
        let marker = markers[i % markers.len()];
        let dx = (i as f64 - (n as f64 - 1.0) / 2.0) * span * 0.012;
        draw_summary(plot, s, dx, color, 3, Stroke::Solid, marker)?;
        let plural = if *count == 1 { "shape" } else { "shapes" };
        legend.push(Entry {
            sample: Sample::Line {
                color,
                width: 3,
                stroke: Stroke::Solid,
                marker: Some(marker),
            },
            label: format!("{name}\n  median of {count} {plural}"),
        });
    }
    legend.push(Entry {
        sample: Sample::Range { color: GREY },
        label: "thin bars: min–max\nover shapes".to_string(),
    });
    draw_legend(&legend_area, 20, &legend)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plausible record: `eff` bytes relative to dense, reaching `frac` of a 1000 GB/s
    /// ceiling; `base_us` is the dense baseline's time.
    fn record(
        backend: &str,
        shape: (usize, usize),
        d: f64,
        kernel: &str,
        eff: f64,
        frac: f64,
    ) -> Record {
        let dense_bytes = (shape.0 * shape.1 * 2) as f64;
        let bytes = dense_bytes * eff;
        let gbps = 1000.0 * frac;
        let us = bytes / gbps / 1e3;
        let base_us = dense_bytes / 900.0 / 1e3;
        Record {
            backend: backend.to_string(),
            device: format!("{backend} test device"),
            rows: shape.0,
            cols: shape.1,
            density: d,
            kernel: kernel.to_string(),
            bytes: bytes as u64,
            effective_density: eff,
            median_us: us,
            min_us: us * 0.97,
            p10_us: us * 0.98,
            p90_us: us * 1.05,
            gbps,
            fraction_of_ceiling: Some(frac),
            speedup_over_dense: Some(base_us / us),
            timer: "wall clock".to_string(),
            iters: 10,
        }
    }

    /// Fake results over several shapes, densities 1.0 … 0.05, two backends, every kernel,
    /// with a NaN and missing figures mixed in.
    fn fake_records() -> Vec<Record> {
        let shapes = [(4096, 4096), (8192, 8192), (32000, 8192), (4096, 11008)];
        let densities = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05];
        let mut out = Vec::new();
        for backend in ["cuda", "cpu"] {
            for (i, &shape) in shapes.iter().enumerate() {
                for &d in &densities {
                    let wiggle = 1.0 - 0.03 * i as f64;
                    let mut push = |kernel: &str, eff: f64, frac: f64| {
                        out.push(record(backend, shape, d, kernel, eff, frac * wiggle));
                    };
                    push("macko", storage::macko_expected(d), 0.8);
                    push("csr", storage::csr(d), 0.5);
                    push("dense", 1.0, 0.85);
                    push("stream", storage::macko_expected(d), 1.0);
                    if backend == "cuda" {
                        push("cublas", 1.0, 0.9);
                        push("cusparse", storage::csr(d), 0.55);
                    }
                }
            }
        }
        if let Some(r) = out.first_mut() {
            r.speedup_over_dense = Some(f64::NAN);
            r.fraction_of_ceiling = None;
        }
        out
    }

    /// A fresh directory under the system's temp dir.
    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("macko-plots-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn writes_every_plot_as_svg() {
        let dir = temp_dir("all");
        let written = write_plots(&fake_records(), &dir).expect("plots are written");
        let names: Vec<String> = written
            .iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        assert_eq!(
            names,
            [
                "speedup_cpu.svg",
                "speedup_cuda.svg",
                "effective_density.svg",
                "ceiling_cpu.svg",
                "ceiling_cuda.svg"
            ]
        );
        for p in &written {
            let svg = std::fs::read_to_string(p).expect("the plot is readable");
            assert!(svg.contains("<svg"), "{} is not an SVG", p.display());
            assert!(svg.contains("MACKO"), "{} has no MACKO text", p.display());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn empty_or_unusable_input_writes_nothing() {
        let dir = temp_dir("empty");
        assert!(write_plots(&[], &dir).expect("no error").is_empty());
        let mut r = record("cpu", (64, 64), f64::NAN, "macko", f64::NAN, 0.5);
        r.speedup_over_dense = Some(f64::INFINITY);
        r.fraction_of_ceiling = None;
        assert!(write_plots(&[r], &dir).expect("no error").is_empty());
        assert!(!dir.exists());
    }

    #[test]
    fn absent_ceiling_skips_only_the_ceiling_plot() {
        let dir = temp_dir("noceiling");
        let mut recs = fake_records();
        recs.retain(|r| r.backend == "cpu");
        for r in &mut recs {
            r.fraction_of_ceiling = None;
        }
        let written = write_plots(&recs, &dir).expect("plots are written");
        assert_eq!(written.len(), 2);
        assert!(written.iter().all(|p| p.exists()));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn helpers() {
        assert_eq!(fmt_density(1.0), "1.0");
        assert_eq!(fmt_density(0.9), "0.9");
        assert_eq!(fmt_density(0.05), "0.05");
        assert_eq!(fmt_density(-1e-12), "0.0");
        assert_eq!(fmt_value(2.5), "2.5");
        assert_eq!(fmt_value(3.0), "3");
        assert_eq!(file_stem("cu da/1"), "cu_da_1");
        let small: BTreeSet<_> = [(64, 64), (128, 64)].into_iter().collect();
        assert_eq!(Grouping::choose(&small), Grouping::Aspect);
        let sized: BTreeSet<_> = [(4096, 4096), (32000, 8192)].into_iter().collect();
        assert_eq!(Grouping::choose(&sized), Grouping::Size);
    }
}

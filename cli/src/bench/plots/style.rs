//! Colours, markers and strokes shared by every plot.

use plotters::prelude::*;

/// Okabe–Ito colours, distinguishable with colour-blindness: blue, vermillion, green, purple,
/// orange, sky blue.
pub(super) const PALETTE: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
];
/// Dark grey of the CSR line.
pub(super) const GREY: RGBColor = RGBColor(90, 90, 90);
/// Light grey of the cuSPARSE line and of secondary marks.
pub(super) const LIGHT_GREY: RGBColor = RGBColor(150, 150, 150);

/// A point marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Marker {
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
pub(super) const GROUP_MARKERS: [Marker; 6] = [
    Marker::Circle,
    Marker::Triangle,
    Marker::Square,
    Marker::Diamond,
    Marker::Circle,
    Marker::Triangle,
];

/// How a line is stroked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stroke {
    /// Continuous.
    Solid,
    /// Long dashes.
    Dashed,
    /// Short dashes.
    Dotted,
}

/// How a median series is drawn: its line and the marker on each median (the min–max bars
/// take the colour, lightened).
#[derive(Debug, Clone, Copy)]
pub(super) struct SeriesStyle {
    /// Colour.
    pub(super) color: RGBColor,
    /// Line width, px.
    pub(super) width: u32,
    /// Stroke of the line.
    pub(super) stroke: Stroke,
    /// Marker on each median.
    pub(super) marker: Marker,
}

impl SeriesStyle {
    /// The `i`-th main series of a plot: a bold solid line, with colour and marker taken in
    /// turn from `colors` and `markers` (black circles if either is empty).
    pub(super) fn main(i: usize, colors: &[RGBColor], markers: &[Marker]) -> SeriesStyle {
        SeriesStyle {
            color: colors.iter().copied().cycle().nth(i).unwrap_or(BLACK),
            width: 3,
            stroke: Stroke::Solid,
            marker: markers
                .iter()
                .copied()
                .cycle()
                .nth(i)
                .unwrap_or(Marker::Circle),
        }
    }
}

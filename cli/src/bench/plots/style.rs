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

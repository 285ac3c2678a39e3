//! The legend panel on the right of each plot.

use plotters::prelude::*;

use super::chart::{draw_line, draw_marker, Area, DrawResult, FONT};
use super::style::{Marker, Stroke};

/// What a legend entry shows next to its text.
#[derive(Debug, Clone, Copy)]
pub(super) enum Sample {
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
pub(super) struct Entry {
    /// What is drawn.
    pub(super) sample: Sample,
    /// The text.
    pub(super) label: String,
}

/// Draws the legend panel: entries top to bottom from `top` px, each a 44 px sample and text.
pub(super) fn draw_legend(area: &Area<'_>, top: i32, entries: &[Entry]) -> DrawResult {
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

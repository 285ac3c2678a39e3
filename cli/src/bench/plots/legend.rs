//! The legend panel on the right of each plot.

use plotters::prelude::*;

use super::chart::{draw_line, draw_marker, Area, DrawResult, FONT};
use super::style::{Marker, SeriesStyle, Stroke, GREY};

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
pub(super) struct Entry {
    /// What is drawn.
    sample: Sample,
    /// The text.
    label: String,
}

impl Entry {
    /// An entry of any sample.
    fn new(sample: Sample, label: impl Into<String>) -> Entry {
        Entry {
            sample,
            label: label.into(),
        }
    }

    /// A plain line (a reference line or a formula).
    pub(super) fn line(
        color: RGBColor,
        width: u32,
        stroke: Stroke,
        label: impl Into<String>,
    ) -> Entry {
        Entry::new(
            Sample::Line {
                color,
                width,
                stroke,
                marker: None,
            },
            label,
        )
    }

    /// Markers alone (measured points).
    pub(super) fn point(color: RGBColor, marker: Marker, label: impl Into<String>) -> Entry {
        Entry::new(Sample::Point { color, marker }, label)
    }

    /// A light filled box (a band between two curves).
    pub(super) fn band(color: RGBColor, label: impl Into<String>) -> Entry {
        Entry::new(Sample::Band { color }, label)
    }

    /// A median series drawn in `style`: "`name`, median of N shape(s)" on two lines.
    pub(super) fn median(style: SeriesStyle, name: &str, shapes: usize) -> Entry {
        let plural = if shapes == 1 { "shape" } else { "shapes" };
        let sample = Sample::Line {
            color: style.color,
            width: style.width,
            stroke: style.stroke,
            marker: Some(style.marker),
        };
        Entry::new(sample, format!("{name}\n  median of {shapes} {plural}"))
    }

    /// The min–max bars of the median series (grey: they are the same mark for every series).
    pub(super) fn min_max_bars(label: impl Into<String>) -> Entry {
        Entry::new(Sample::Range { color: GREY }, label)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_entries_count_shapes_in_the_singular_too() {
        let style = SeriesStyle::main(0, &[], &[]);
        let one = Entry::median(style, "CSR (ours)", 1);
        assert_eq!(one.label, "CSR (ours)\n  median of 1 shape");
        let four = Entry::median(style, "MACKO, all shapes", 4);
        assert_eq!(four.label, "MACKO, all shapes\n  median of 4 shapes");
        assert!(matches!(
            four.sample,
            Sample::Line {
                width: 3,
                stroke: Stroke::Solid,
                marker: Some(Marker::Circle),
                ..
            }
        ));
    }
}

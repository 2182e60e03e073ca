//! The words around a plot's data: the legend panel to its right (a
//! swatch and a name per row), the two-column key under it (what each
//! shaded band is), and the category names under bars, turned upwards
//! when they do not fit their slot.

use super::super::palette::Style;
use super::canvas::{font, text_width};
use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One row of a legend panel.
pub(super) struct LegendEntry {
    pub(super) text: String,
    pub(super) color: RGBColor,
    pub(super) swatch: Swatch,
}

pub(super) enum Swatch {
    /// A short line, for a line series.
    Line,
    /// A short dashed line, for a dashed series.
    DashedLine,
    /// A filled square, for bars.
    Square,
}

const LEGEND_FONT: u32 = 13;
const LEGEND_ROW: u32 = 18;
/// Where the legend's first row sits: level with the top of the data, below
/// the caption.
const LEGEND_TOP: u32 = 44;
pub(super) const KEY_FONT: u32 = 12;
pub(super) const KEY_ROW: u32 = 16;
/// Fault labels longer than this are cut, so that two columns fit.
pub(super) const KEY_LABEL_CHARS: usize = 60;

pub(super) fn legend_width(entries: &[LegendEntry]) -> u32 {
    let widest = entries
        .iter()
        .map(|e| text_width(&e.text, LEGEND_FONT))
        .max()
        .unwrap_or(0);
    widest + 48
}

pub(super) fn legend_height(entries: usize) -> u32 {
    LEGEND_TOP + entries as u32 * LEGEND_ROW + 16
}

/// Draws `entries` in `panel`, one per row from the top.
fn draw_legend<DB: DrawingBackend>(
    panel: &DrawingArea<DB, Shift>,
    entries: &[LegendEntry],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    for (row, entry) in entries.iter().enumerate() {
        let y = (LEGEND_TOP + row as u32 * LEGEND_ROW + LEGEND_ROW / 2) as i32;
        match entry.swatch {
            Swatch::Line => panel.draw(&PathElement::new(
                vec![(8, y), (30, y)],
                entry.color.stroke_width(2),
            ))?,
            Swatch::DashedLine => {
                for from in [8, 17, 26] {
                    panel.draw(&PathElement::new(
                        vec![(from, y), (from + 5, y)],
                        entry.color.stroke_width(2),
                    ))?
                }
            }
            Swatch::Square => panel.draw(&Rectangle::new(
                [(12, y - 6), (24, y + 6)],
                entry.color.filled(),
            ))?,
        }
        panel.draw(&Text::new(
            entry.text.as_str(),
            (36, y),
            font(LEGEND_FONT)
                .color(&BLACK)
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
    }
    Ok(())
}

/// Splits a legend panel for `entries` off the right of `root`, draws the
/// legend there and returns what is left for the data.
pub(super) fn beside_legend<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    entries: &[LegendEntry],
) -> Result<DrawingArea<DB, Shift>>
where
    DB::ErrorType: 'static,
{
    let width = root.dim_in_pixel().0;
    let (data, panel) = root.split_horizontally(width.saturating_sub(legend_width(entries)));
    draw_legend(&panel, entries)?;
    Ok(data)
}

/// Rows of the key: two columns.
fn key_rows(lines: usize) -> u32 {
    lines.div_ceil(2) as u32
}

pub(super) fn key_height(lines: usize) -> u32 {
    if lines == 0 {
        0
    } else {
        key_rows(lines) * KEY_ROW + 12
    }
}

/// The key under a plot: column-major in two columns.
pub(super) fn draw_key<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    lines: &[String],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let rows = key_rows(lines.len()).max(1) as usize;
    let column = area.dim_in_pixel().0 as i32 / 2;
    for (i, line) in lines.iter().enumerate() {
        let (col, row) = (i / rows, i % rows);
        area.draw(&Text::new(
            line.as_str(),
            (
                16 + col as i32 * column,
                (row as u32 * KEY_ROW + KEY_ROW / 2) as i32,
            ),
            font(KEY_FONT)
                .color(&BLACK)
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
    }
    Ok(())
}

/// The legend row of a strategy's line.
pub(super) fn line_entry(name: &str, style: Style) -> LegendEntry {
    LegendEntry {
        text: name.to_string(),
        color: style.color,
        swatch: if style.dashed {
            Swatch::DashedLine
        } else {
            Swatch::Line
        },
    }
}

/// Category names under bars: level when they fit their slot, else turned
/// to read upwards.
pub(super) struct CategoryLabels {
    pub(super) turned: bool,
    /// Height of the label area under the axis.
    pub(super) area: u32,
}

pub(super) const CATEGORY_FONT: u32 = 11;

impl CategoryLabels {
    pub(super) fn new(names: impl Iterator<Item = String>, slots: usize, plot_width: u32) -> Self {
        let widest = names
            .map(|n| text_width(&n, CATEGORY_FONT))
            .max()
            .unwrap_or(0);
        let slot = plot_width / slots.max(1) as u32;
        if widest + 4 <= slot {
            CategoryLabels {
                turned: false,
                area: 36,
            }
        } else {
            CategoryLabels {
                turned: true,
                area: widest + 14,
            }
        }
    }

    /// Draws `name` under the axis point `(x, y)` of `root`.
    pub(super) fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        name: &str,
        (x, y): (i32, i32),
    ) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let style = if self.turned {
            // Turned a quarter left, the text's end at the axis.
            font(CATEGORY_FONT)
                .transform(FontTransform::Rotate270)
                .color(&BLACK)
                .pos(Pos::new(HPos::Right, VPos::Center))
        } else {
            font(CATEGORY_FONT)
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Top))
        };
        root.draw(&Text::new(name, (x, y + 6), style))?;
        Ok(())
    }
}

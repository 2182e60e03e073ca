//! Lateness lines on a log axis, the CDF on a percentile ("nines") axis
//! and the slowest cancel per second over time: the lines, the shaded
//! bands (warm-up, faults, deaths) under them and their key, and reading
//! `lateness.hgrm` into the CDF's points.

use super::super::palette::Style;
use super::canvas::{draw_line, font, log_range, text_width, FLOOR_MS};
use super::legend::{
    beside_legend, draw_key, key_height, line_entry, LegendEntry, KEY_FONT, KEY_LABEL_CHARS,
    KEY_ROW,
};
use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::ops::Range;

/// One strategy's line: `(x, lateness in ms)` points, drawn in its
/// strategy's style ([`palette::style`]).
#[derive(Debug, Clone)]
pub struct Line {
    pub name: String,
    pub style: Style,
    pub points: Vec<(f64, f64)>,
}

/// A shaded stretch of the x axis: `tag` is printed at its top and `label`,
/// if any, in the key under the plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Band {
    pub from: f64,
    pub to: f64,
    pub kind: BandKind,
    pub tag: String,
    pub label: Option<String>,
}

/// What a band marks, which sets its shade.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BandKind {
    /// The warm-up, whose orders are not measured.
    WarmUp,
    /// A fault in effect.
    Fault,
    /// A worker that died from outside the run's faults.
    Death,
}

impl BandKind {
    fn shade(self) -> RGBAColor {
        match self {
            BandKind::WarmUp => BLACK.mix(0.08),
            BandKind::Fault => RGBColor(214, 39, 40).mix(0.16),
            BandKind::Death => BLACK.mix(0.4),
        }
    }
}

/// Lateness lines on a log axis, with shaded bands under them.
#[derive(Debug, Clone)]
pub struct LineChart {
    pub(super) caption: &'static str,
    pub(super) x_desc: &'static str,
    pub(super) x: Range<f64>,
    pub(super) x_labels: usize,
    pub(super) x_label: fn(&f64) -> String,
    pub(super) lines: Vec<Line>,
    pub(super) bands: Vec<Band>,
}

/// Position of quantile `q` on a percentile ("nines") axis:
/// 0 = p0, 1 = p90, 2 = p99, 3 = p99.9. Undefined at q = 1, so callers cap q.
pub fn nines(q: f64) -> f64 {
    debug_assert!((0.0..1.0).contains(&q), "quantile {q} has no nines");
    -(1.0 - q).log10()
}

/// `p90`, `p99`, `p99.9` for a position on the nines axis.
pub(super) fn percentile_label(x: &f64) -> String {
    let percent = 100.0 * (1.0 - 10f64.powf(-x));
    let text = format!("{percent:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("p{text}")
}

pub(super) fn lines_range(lines: &[Line]) -> Range<f64> {
    log_range(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)))
}

/// The key lines under a plot with bands: `tag label` of each band that
/// has a label, cut to fit a column.
pub(super) fn key_lines(bands: &[Band]) -> Vec<String> {
    bands
        .iter()
        .filter_map(|b| {
            let label = b.label.as_ref()?;
            let text = format!("{} {label}", b.tag);
            Some(if text.chars().count() > KEY_LABEL_CHARS {
                let cut: String = text.chars().take(KEY_LABEL_CHARS - 1).collect();
                format!("{cut}…")
            } else {
                text
            })
        })
        .collect()
}

pub(super) fn line_legend(lines: &[Line]) -> Vec<LegendEntry> {
    lines.iter().map(|l| line_entry(&l.name, l.style)).collect()
}

impl LineChart {
    pub(super) fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let keys = key_lines(&self.bands);
        let height = root.dim_in_pixel().1;
        let (upper, key) = root.split_vertically(height - key_height(keys.len()));
        draw_key(&key, &keys)?;
        let data = beside_legend(&upper, &line_legend(&self.lines))?;
        let y = lines_range(&self.lines);
        let (y_lo, y_hi) = (y.start, y.end);
        let mut chart = ChartBuilder::on(&data)
            .caption(self.caption, font(18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(self.x.clone(), y.log_scale())?;
        chart
            .configure_mesh()
            .x_desc(self.x_desc)
            .x_labels(self.x_labels)
            .y_desc("lateness (ms)")
            .x_label_formatter(&self.x_label)
            .y_label_formatter(&|v| format!("{v}"))
            .label_style(font(12))
            .axis_desc_style(font(14))
            .draw()?;
        // An instant (a killed session, a death) is still a visible stripe.
        let thinnest = (self.x.end - self.x.start) / 250.0;
        chart.draw_series(self.bands.iter().map(|b| {
            let to = b.to.max(b.from + thinnest);
            Rectangle::new([(b.from, y_lo), (to, y_hi)], b.kind.shade().filled())
        }))?;
        // Tags at the top, a row lower when the previous one would overlap.
        let mut last_end = (i32::MIN, i32::MIN);
        for band in &self.bands {
            let (x, top) = chart.backend_coord(&(band.from, y_hi));
            let width = text_width(&band.tag, KEY_FONT) as i32;
            let row = if x < last_end.0 + 4 { 1 } else { 0 };
            let y = top + 2 + row * KEY_ROW as i32;
            if row == 0 {
                last_end.0 = x + 2 + width;
            } else {
                last_end.1 = x + 2 + width;
            }
            data.draw(&Text::new(
                band.tag.as_str(),
                (x + 2, y),
                font(KEY_FONT)
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Left, VPos::Top)),
            ))?;
        }
        for line in &self.lines {
            let points = line.points.iter().map(|&(x, y)| (x, y.max(FLOOR_MS)));
            draw_line(&mut chart, points.collect(), line.style, 2)?;
        }
        Ok(())
    }
}

/// Reads HdrHistogram percentile-distribution text (`lateness.hgrm`) into
/// `(quantile, value)` pairs, values in the file's unit (ms here).
pub fn parse_hgrm(text: &str) -> Vec<(f64, f64)> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let mut cols = l.split_ascii_whitespace();
            let value = cols.next()?.parse::<f64>().ok()?;
            let quantile = cols.next()?.parse::<f64>().ok()?;
            cols.next()?.parse::<u64>().ok()?;
            Some((quantile, value))
        })
        .collect()
}

//! A plot ready to draw: the [`Chart`] kinds, one constructor per plot a
//! report shows, its pixel size (data, legend to the right, key or turned
//! names below), and drawing it as SVG text or a PNG file: the same
//! drawing on either plotters backend.

use super::super::palette::Style;
use super::bars::{Bar, BarChart};
use super::canvas::{BAR_HEIGHT, BAR_WIDTH, HEIGHT, WIDTH};
use super::legend::{key_height, legend_height, legend_width};
use super::lines::{key_lines, line_legend, percentile_label, Band, Line, LineChart};
use super::sweep::{sweep_legend, SweepChart};
use super::timeout::{timeout_legend, ClassLateness, TimeoutChart};
use anyhow::{Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// A plot, ready to draw on any backend.
#[derive(Debug, Clone)]
pub enum Chart {
    Lines(LineChart),
    Sweep(SweepChart),
    Bars(BarChart),
    ByTimeout(TimeoutChart),
}

/// Lateness CDF on a percentile axis: each line's points are
/// `(nines(q), lateness ms)`; `max_nines` ends the axis.
pub fn lateness_cdf(lines: Vec<Line>, max_nines: f64) -> Chart {
    // Whole nines only, so the axis reads p0, p90, p99, p99.9, ...
    let end = max_nines.max(1.0).ceil();
    Chart::Lines(LineChart {
        caption: "Lateness by percentile (log scale)",
        x_desc: "percentile of cancelled orders",
        x: 0f64..end,
        x_labels: end as usize + 1,
        x_label: percentile_label,
        lines,
        bands: Vec::new(),
    })
}

/// The slowest cancel of the orders whose deadline fell in each second of
/// the run, over shaded `bands` (warm-up, faults); a band reaching past
/// the last point ends with the axis. The max, not a percentile: a second
/// holds tens to hundreds of deadlines, too few for a p99 (it would read
/// as the max anyway).
pub fn lateness_over_time(lines: Vec<Line>, bands: Vec<Band>) -> Chart {
    let last = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .chain(bands.iter().map(|b| b.from))
        .fold(1f64, f64::max);
    let end = last + 1.0;
    let bands = bands
        .into_iter()
        .map(|b| Band {
            to: b.to.min(end),
            ..b
        })
        .collect();
    Chart::Lines(LineChart {
        caption: "Slowest cancel per second of deadline (log scale)",
        x_desc: "seconds since the run started",
        x: 0f64..end,
        x_labels: 12,
        x_label: |x| format!("{x:.0}"),
        lines,
        bands,
    })
}

/// One bar per strategy; missing values are left out by the caller.
pub fn bars(caption: &'static str, unit: &'static str, bars: Vec<Bar>) -> Chart {
    Chart::Bars(BarChart {
        caption,
        unit,
        bars,
    })
}

/// Lateness by timeout class: each strategy's name, style and classes.
pub fn lateness_by_timeout(strategies: Vec<(String, Style, Vec<ClassLateness>)>) -> Chart {
    let mut timeouts_ms: Vec<u64> = strategies
        .iter()
        .flat_map(|(_, _, classes)| classes.iter().map(|c| c.timeout_ms))
        .collect();
    timeouts_ms.sort_unstable();
    timeouts_ms.dedup();
    Chart::ByTimeout(TimeoutChart {
        timeouts_ms,
        strategies,
    })
}

impl Chart {
    /// Each strategy's name and style, as the chart draws them (for tests
    /// that check what a figure shows).
    #[cfg(test)]
    pub fn strategy_styles(&self) -> Vec<(String, Style)> {
        match self {
            Chart::Lines(c) => c.lines.iter().map(|l| (l.name.clone(), l.style)).collect(),
            Chart::Sweep(c) => c.lines.iter().map(|l| (l.name.clone(), l.style)).collect(),
            Chart::Bars(c) => c.bars.iter().map(|b| (b.name.clone(), b.style)).collect(),
            Chart::ByTimeout(c) => c.strategies.iter().map(|s| (s.0.clone(), s.1)).collect(),
        }
    }

    /// A bar chart's bars (none for other charts).
    #[cfg(test)]
    pub fn bar_list(&self) -> &[Bar] {
        match self {
            Chart::Bars(c) => &c.bars,
            _ => &[],
        }
    }

    /// Pixel size: the data with its axes, the legend to its right, the
    /// key or the turned category names below.
    pub fn size(&self) -> (u32, u32) {
        match self {
            Chart::Lines(c) => {
                let legend = line_legend(&c.lines);
                (
                    WIDTH + legend_width(&legend),
                    HEIGHT.max(legend_height(legend.len())) + key_height(key_lines(&c.bands).len()),
                )
            }
            Chart::Sweep(c) => {
                let legend = sweep_legend(&c.lines);
                (
                    WIDTH + legend_width(&legend),
                    HEIGHT.max(legend_height(legend.len())),
                )
            }
            Chart::Bars(c) => (BAR_WIDTH, BAR_HEIGHT - 36 + c.labels().area),
            Chart::ByTimeout(c) => {
                let legend = timeout_legend(c);
                (WIDTH + legend_width(&legend), HEIGHT - 40 + c.labels().area)
            }
        }
    }

    /// The chart as SVG text.
    pub fn svg(&self) -> Result<String> {
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, self.size()).into_drawing_area();
            self.draw(&root)?;
            root.present()?;
        }
        Ok(svg)
    }

    /// Writes the chart as a PNG file at `path`.
    pub fn write_png(&self, path: &Path) -> Result<()> {
        let root = BitMapBackend::new(path, self.size()).into_drawing_area();
        self.draw(&root)?;
        root.present()
            .with_context(|| format!("writing {}", path.display()))
    }

    /// Draws the chart on `root`, whatever the backend: SVG and PNG are
    /// the same drawing.
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE)?;
        match self {
            Chart::Lines(c) => c.draw(root),
            Chart::Sweep(c) => c.draw(root),
            Chart::Bars(c) => c.draw(root),
            Chart::ByTimeout(c) => c.draw(root),
        }
    }
}

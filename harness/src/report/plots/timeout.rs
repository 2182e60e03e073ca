//! Lateness by configured timeout: per strategy a group of bars, one per
//! timeout class (shades of one hue, keyed in the legend), each to the
//! class's slowest cancel with a p50 tick, over a strip of the strategy's
//! own colour.

use super::super::palette::Style;
use super::canvas::{font, log_range, FLOOR_MS, WIDTH};
use super::legend::{beside_legend, CategoryLabels, LegendEntry, Swatch};
use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Lateness of each timeout class, grouped by strategy: per class a bar
/// to its slowest cancel with a p50 tick, in ms (a class holds too few
/// orders for a p99).
#[derive(Debug, Clone)]
pub struct TimeoutChart {
    /// Every class any strategy had, shortest first.
    pub(super) timeouts_ms: Vec<u64>,
    /// Each strategy's name, style and classes.
    pub(super) strategies: Vec<(String, Style, Vec<ClassLateness>)>,
}

/// The lateness of one strategy's orders of one timeout class.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClassLateness {
    pub timeout_ms: u64,
    pub p50_ms: f64,
    pub max_ms: f64,
}

/// The colour of timeout class `index`: shades of one hue, so they do not
/// read as strategies.
fn timeout_color(index: usize, classes: usize) -> RGBColor {
    let darkest = (8.0, 48.0, 107.0);
    let lightest = (158.0, 202.0, 225.0);
    let k = if classes > 1 {
        index as f64 / (classes - 1) as f64
    } else {
        0.0
    };
    let mix = |a: f64, b: f64| (a + (b - a) * k) as u8;
    RGBColor(
        mix(lightest.0, darkest.0),
        mix(lightest.1, darkest.1),
        mix(lightest.2, darkest.2),
    )
}

pub(super) fn timeout_legend(chart: &TimeoutChart) -> Vec<LegendEntry> {
    let classes = chart.timeouts_ms.len();
    chart
        .timeouts_ms
        .iter()
        .enumerate()
        .map(|(i, t)| LegendEntry {
            text: format!("timeout {t} ms"),
            color: timeout_color(i, classes),
            swatch: Swatch::Square,
        })
        .collect()
}

/// Width of the data (axes included) of a timeout chart.
const TIMEOUT_Y_AREA: u32 = 70;

impl TimeoutChart {
    pub(super) fn labels(&self) -> CategoryLabels {
        CategoryLabels::new(
            self.strategies.iter().map(|s| s.0.clone()),
            self.strategies.len(),
            WIDTH - TIMEOUT_Y_AREA - 24,
        )
    }
}

impl TimeoutChart {
    pub(super) fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let data = beside_legend(root, &timeout_legend(self))?;
        let labels = self.labels();
        let y = log_range(
            self.strategies
                .iter()
                .flat_map(|s| s.2.iter().flat_map(|c| [c.p50_ms, c.max_ms])),
        );
        let y_lo = y.start;
        let mut chart = ChartBuilder::on(&data)
            .caption(
                "Lateness by configured timeout: max bar, p50 tick (log scale)",
                font(18),
            )
            .margin(12)
            .x_label_area_size(labels.area)
            .y_label_area_size(TIMEOUT_Y_AREA)
            .build_cartesian_2d(0f64..self.strategies.len().max(1) as f64, y.log_scale())?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc("lateness (ms)")
            .y_label_formatter(&|v| format!("{v}"))
            .label_style(font(12))
            .axis_desc_style(font(14))
            .draw()?;
        // Strategy i spans [i, i + 1]; its classes share the middle 80%.
        let classes_count = self.timeouts_ms.len().max(1);
        let width = 0.8 / classes_count as f64;
        let slot = |i: usize, class: usize| {
            let from = i as f64 + 0.1 + class as f64 * width;
            (from, from + width * 0.9)
        };
        for (i, (name, style, classes)) in self.strategies.iter().enumerate() {
            for c in classes {
                let class = self
                    .timeouts_ms
                    .iter()
                    .position(|t| *t == c.timeout_ms)
                    .unwrap_or(0);
                let (p50, top) = (c.p50_ms.max(FLOOR_MS), c.max_ms.max(FLOOR_MS));
                let (from, to) = slot(i, class);
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(from, y_lo), (to, top)],
                    timeout_color(class, classes_count).filled(),
                )))?;
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(from, p50), (to, p50)],
                    BLACK.stroke_width(2),
                )))?;
            }
            // The bars are coloured by timeout class; a strip of the
            // strategy's own colour under its group ties it to the other plots.
            let (left, axis) = chart.backend_coord(&(i as f64 + 0.1, y_lo));
            let (right, _) = chart.backend_coord(&(i as f64 + 0.9, y_lo));
            data.draw(&Rectangle::new(
                [(left, axis + 1), (right, axis + 5)],
                style.color.filled(),
            ))?;
            labels.draw(&data, name, (left + (right - left) / 2, axis))?;
        }
        Ok(())
    }
}

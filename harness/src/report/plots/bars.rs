//! The cost charts: one bar per strategy with its value over it and, over
//! repetitions, its min–max as a whisker; the names under the bars.

use super::super::palette::Style;
use super::canvas::{font, BAR_WIDTH};
use super::legend::{CategoryLabels, CATEGORY_FONT};
use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One bar per strategy.
#[derive(Debug, Clone)]
pub struct BarChart {
    pub(super) caption: &'static str,
    pub(super) unit: &'static str,
    pub(super) bars: Vec<Bar>,
}

/// One strategy's bar: the figure the tables print beside the chart, and
/// over repetitions its min–max, drawn as an error bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub name: String,
    pub style: Style,
    pub value: f64,
    pub spread: Option<(f64, f64)>,
}

/// Pixels left and right of the data in a bar chart: the y labels and
/// margins.
const BAR_Y_AREA: u32 = 60;
const BAR_MARGIN: u32 = 10;

impl BarChart {
    pub(super) fn labels(&self) -> CategoryLabels {
        CategoryLabels::new(
            self.bars.iter().map(|b| b.name.clone()),
            self.bars.len(),
            BAR_WIDTH - BAR_Y_AREA - 2 * BAR_MARGIN,
        )
    }
}

impl BarChart {
    pub(super) fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let labels = self.labels();
        // The value is printed over the error bar's top, so that one counts.
        let top_of = |b: &Bar| b.spread.map_or(b.value, |(_, max)| max.max(b.value));
        let top = self.bars.iter().map(top_of).fold(0f64, f64::max);
        // Headroom for the values over the bars; turned ones need more.
        let headroom = if labels.turned { 1.35 } else { 1.2 };
        let top = if top > 0.0 { top * headroom } else { 1.0 };
        let mut chart = ChartBuilder::on(root)
            .caption(self.caption, font(16))
            .margin(BAR_MARGIN)
            .x_label_area_size(labels.area)
            .y_label_area_size(BAR_Y_AREA)
            .build_cartesian_2d(0f64..self.bars.len().max(1) as f64, 0f64..top)?;
        // Bar i spans [i, i + 1]; names go under the bars, drawn on the root
        // area because a numeric axis cannot label categories.
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc(self.unit)
            .label_style(font(12))
            .axis_desc_style(font(13))
            .draw()?;
        chart.draw_series(self.bars.iter().enumerate().map(|(i, bar)| {
            let x = i as f64;
            Rectangle::new(
                [(x + 0.15, 0.0), (x + 0.85, bar.value)],
                bar.style.color.filled(),
            )
        }))?;
        // The repetitions' min–max: a whisker with caps over each bar that
        // has a spread.
        for (i, (min, max)) in self
            .bars
            .iter()
            .enumerate()
            .filter_map(|(i, b)| b.spread.filter(|(lo, hi)| lo < hi).map(|s| (i, s)))
        {
            let mid = i as f64 + 0.5;
            let whisker = BLACK.stroke_width(1);
            chart.draw_series([
                PathElement::new(vec![(mid, min), (mid, max)], whisker),
                PathElement::new(vec![(mid - 0.12, min), (mid + 0.12, min)], whisker),
                PathElement::new(vec![(mid - 0.12, max), (mid + 0.12, max)], whisker),
            ])?;
        }
        // Values over the bars, turned upwards like the names when the bars
        // are too narrow for them.
        let value_style = if labels.turned {
            font(CATEGORY_FONT)
                .transform(FontTransform::Rotate270)
                .color(&BLACK)
                .pos(Pos::new(HPos::Left, VPos::Center))
        } else {
            font(12)
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Bottom))
        };
        // A few pixels clear of the bar, or of its whisker's cap.
        chart.draw_series(self.bars.iter().enumerate().map(|(i, bar)| {
            EmptyElement::at((i as f64 + 0.5, top_of(bar)))
                + Text::new(format_value(bar.value), (0, -3), value_style.clone())
        }))?;
        for (i, bar) in self.bars.iter().enumerate() {
            labels.draw(root, &bar.name, chart.backend_coord(&(i as f64 + 0.5, 0.0)))?;
        }
        Ok(())
    }
}

/// Three significant figures, no exponent.
fn format_value(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

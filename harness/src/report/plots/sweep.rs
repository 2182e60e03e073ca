//! The sweep chart: lateness (p50 thin, p99 solid) against offered rate
//! or backlog, both axes log, with the bound dashed and a cross for a step
//! that did not hold; its x ticks are the densest log series whose labels
//! do not collide.

use super::super::palette::Style;
use super::canvas::{draw_line, font, log_range, text_width, FLOOR_MS};
use super::legend::{beside_legend, line_entry, LegendEntry};
use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::ops::Range;

/// One strategy's sweep: `(x, low, high, held)` per step, e.g. offered
/// rate with p50 and p99 lateness.
#[derive(Debug, Clone)]
pub struct RateLine {
    pub name: String,
    pub style: Style,
    pub points: Vec<(f64, f64, f64, bool)>,
}

/// A sweep chart: `high` solid, `low` thin, a dashed horizontal line at
/// `bound` if given; both axes log, and x values of 0 are drawn at 1 and
/// labelled 0 (a backlog of none). A step that did not hold is a cross.
#[derive(Debug, Clone)]
pub struct SweepChart {
    pub caption: &'static str,
    pub x_desc: &'static str,
    pub y_desc: &'static str,
    pub bound: Option<(f64, String)>,
    pub lines: Vec<RateLine>,
}

pub(super) fn sweep_legend(lines: &[RateLine]) -> Vec<LegendEntry> {
    lines.iter().map(|l| line_entry(&l.name, l.style)).collect()
}

/// Margin around a sweep chart's data, and the width of its y labels.
const SWEEP_MARGIN: u32 = 12;
const SWEEP_Y_AREA: u32 = 70;
/// Size of axis tick labels.
const TICK_FONT: u32 = 12;
/// Least room between two neighbouring x labels, in pixels.
const TICK_GAP: u32 = 8;

/// A count on a sweep's x axis (orders/s, pending orders), short enough to
/// sit under a tick: `900`, `1k`, `20k`, `1M`; at most 1, `0`, since a
/// backlog of none is drawn at 1 on the log axis.
fn count_label(v: f64) -> String {
    let short = |v: f64, unit: &str| {
        let text = format!("{v:.1}");
        format!("{}{unit}", text.trim_end_matches(".0"))
    };
    if v <= 1.0 {
        "0".into()
    } else if v >= 1e6 {
        short(v / 1e6, "M")
    } else if v >= 1e3 {
        short(v / 1e3, "k")
    } else {
        format!("{v:.0}")
    }
}

/// Where on a log axis over `range`, `axis_px` pixels long, value `v` sits.
fn log_position(v: f64, range: &Range<f64>, axis_px: u32) -> f64 {
    axis_px as f64 * (v / range.start).ln() / (range.end / range.start).ln()
}

/// Whether the labels of `ticks` (ascending), centred under their ticks,
/// leave at least [`TICK_GAP`] pixels between neighbours.
fn labels_leave_room(ticks: &[f64], range: &Range<f64>, axis_px: u32) -> bool {
    let extent = |v: f64| {
        let centre = log_position(v, range, axis_px);
        let half = text_width(&count_label(v), TICK_FONT) as f64 / 2.0;
        (centre - half, centre + half)
    };
    ticks
        .windows(2)
        .all(|w| extent(w[0]).1 + TICK_GAP as f64 <= extent(w[1]).0)
}

/// The x ticks of a sweep chart: the densest of the usual log series
/// (1–9 per decade, then 1-2-5, 1-2, 1-3, 1, then one decade in 2, 3, ...)
/// whose labels do not collide at the axis' width, so the labels read
/// `100 200 500 1k 2k` where plotters' own choice printed `900` and `1000`
/// on top of each other. Only values from 1 up: the axis counts things.
fn log_ticks(range: &Range<f64>, axis_px: u32) -> Vec<f64> {
    let in_range = |v: &f64| *v >= range.start.max(1.0) && *v <= range.end;
    let first = range.start.max(1.0).log10().floor() as i32;
    let last = range.end.log10().ceil() as i32;
    let series = |multiples: &[f64], every: i32| -> Vec<f64> {
        (first..=last)
            .filter(|k| k.rem_euclid(every) == 0)
            .flat_map(|k| multiples.iter().map(move |m| m * 10f64.powi(k)))
            .filter(in_range)
            .collect()
    };
    let mut candidates = vec![
        series(&[1., 2., 3., 4., 5., 6., 7., 8., 9.], 1),
        series(&[1., 2., 5.], 1),
        series(&[1., 2.], 1),
        series(&[1., 3.], 1),
    ];
    candidates.extend((1..=last - first + 1).map(|every| series(&[1.], every)));
    candidates
        .into_iter()
        .filter(|ticks| !ticks.is_empty())
        .find(|ticks| labels_leave_room(ticks, range, axis_px))
        // A range narrower than one decade holds none of the series' values
        // but its ends' neighbours; its lower end alone always fits.
        .unwrap_or_else(|| vec![range.start.max(1.0)])
}

impl SweepChart {
    pub(super) fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let data = beside_legend(root, &sweep_legend(&self.lines))?;
        // A backlog of none sits at 1 on the log axis.
        let at_least_one = |x: f64| x.max(1.0);
        let y = log_range(
            self.lines
                .iter()
                .flat_map(|l| l.points.iter().flat_map(|p| [p.1, p.2]))
                .chain(self.bound.as_ref().map(|b| b.0)),
        );
        let xs = self
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| at_least_one(p.0)));
        let (lo, hi) = xs.fold((f64::MAX, 1f64), |(lo, hi), r| (lo.min(r), hi.max(r)));
        let x = (lo.min(hi) / 1.5).max(0.1)..hi * 1.5;
        let axis_px = data.dim_in_pixel().0 - 2 * SWEEP_MARGIN - SWEEP_Y_AREA;
        let ticks = log_ticks(&x, axis_px);
        let mut chart = ChartBuilder::on(&data)
            .caption(self.caption, font(18))
            .margin(SWEEP_MARGIN)
            .x_label_area_size(40)
            .y_label_area_size(SWEEP_Y_AREA)
            .build_cartesian_2d(
                x.clone().log_scale().with_key_points(ticks),
                y.clone().log_scale(),
            )?;
        chart
            .configure_mesh()
            .x_desc(self.x_desc)
            .y_desc(self.y_desc)
            .x_label_formatter(&|v| count_label(*v))
            .y_label_formatter(&|v| format!("{v}"))
            .label_style(font(TICK_FONT))
            .axis_desc_style(font(14))
            .draw()?;
        if let Some((bound, label)) = &self.bound {
            let dashes = (0..60).map(|i| {
                let f = |k: f64| x.start * (x.end / x.start).powf(k / 60.0);
                PathElement::new(
                    vec![(f(i as f64), *bound), (f(i as f64 + 0.5), *bound)],
                    BLACK,
                )
            });
            chart.draw_series(dashes)?;
            chart.draw_series(std::iter::once(Text::new(
                label.clone(),
                (x.end, *bound),
                font(12)
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Right, VPos::Bottom)),
            )))?;
        }
        for line in &self.lines {
            let c = line.style.color;
            let at = |x: f64, y: f64| (at_least_one(x), y.max(FLOOR_MS));
            let high = line.points.iter().map(|p| at(p.0, p.2));
            let low = line.points.iter().map(|p| at(p.0, p.1));
            draw_line(&mut chart, high.collect(), line.style, 2)?;
            draw_line(&mut chart, low.collect(), line.style, 1)?;
            chart.draw_series(
                line.points
                    .iter()
                    .filter(|p| p.3)
                    .map(|p| Circle::new(at(p.0, p.2), 3, c.filled())),
            )?;
            chart.draw_series(
                line.points
                    .iter()
                    .filter(|p| !p.3)
                    .map(|p| Cross::new(at(p.0, p.2), 5, c.stroke_width(2))),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::palette::style_of as style;
    use super::super::canvas::{text_width, WIDTH};
    use super::super::chart::Chart;
    use super::*;

    /// A rate sweep like results/reference/20261130-134123-sweep: steps
    /// from 100 to 3 200 orders/s, where plotters' own ticks put `900`
    /// and `1000` on top of each other.
    fn rate_sweep() -> Chart {
        let rates = [
            100., 200., 400., 600., 700., 800., 900., 1000., 1600., 3200.,
        ];
        Chart::Sweep(SweepChart {
            caption: "sweep",
            x_desc: "offered orders/s",
            y_desc: "lateness (ms)",
            bound: Some((500.0, "bound 500 ms".into())),
            lines: vec![RateLine {
                name: "db-scan".into(),
                style: style("db-scan"),
                points: rates.iter().map(|r| (*r, 1.0, 2.0, true)).collect(),
            }],
        })
    }

    /// The x-axis labels of a drawn sweep chart: `(x, text)` of every
    /// centred text that reads as a count.
    fn x_labels(svg: &str) -> Vec<(f64, String)> {
        svg.split("<text")
            .skip(1)
            .filter_map(|element| {
                let element = &element[..element.find("</text>")?];
                let (attributes, content) = element.split_once('>')?;
                let content = content.trim();
                let count = content.trim_end_matches(['k', 'M']);
                let centred = attributes.contains("text-anchor=\"middle\"");
                (centred && !count.is_empty() && count.parse::<f64>().is_ok()).then_some(())?;
                let x = &attributes[attributes.find("x=\"")? + 3..];
                Some((x[..x.find('"')?].parse().ok()?, content.to_string()))
            })
            .collect()
    }

    #[test]
    fn sweep_tick_labels_leave_room_between_neighbours() {
        let svg = rate_sweep().svg().unwrap();
        let labels = x_labels(&svg);
        let texts: Vec<&str> = labels.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["100", "200", "500", "1k", "2k"], "{svg}");
        for pair in labels.windows(2) {
            let [(x0, t0), (x1, t1)] = pair else {
                unreachable!()
            };
            let right = x0 + text_width(t0, TICK_FONT) as f64 / 2.0;
            let left = x1 - text_width(t1, TICK_FONT) as f64 / 2.0;
            assert!(
                right + TICK_GAP as f64 <= left,
                "{t0} at {x0} and {t1} at {x1} collide"
            );
        }
    }

    #[test]
    fn log_ticks_pick_the_densest_series_whose_labels_fit() {
        let axis = WIDTH - 2 * SWEEP_MARGIN - SWEEP_Y_AREA;
        // The reference sweep's axis: every integer multiple would collide.
        let sweep = 66.7..4800.0;
        let dense: Vec<f64> = [100., 200., 300., 400., 500., 600., 700., 800., 900., 1000.].into();
        assert!(!labels_leave_room(&dense, &sweep, axis));
        for (range, width) in [
            (sweep.clone(), axis),
            (0.67..1.5e6, axis),   // a backlog sweep, from none to a million
            (300.0..700.0, axis),  // less than a decade
            (1.0..1e9, axis),      // many decades
            (20.0..30_000.0, 300), // a narrow plot
            (2.0..3.0, axis),      // no value of any series inside
        ] {
            let ticks = log_ticks(&range, width);
            assert!(!ticks.is_empty(), "{range:?}");
            assert!(ticks.windows(2).all(|w| w[0] < w[1]), "{ticks:?}");
            assert!(
                ticks.iter().all(|t| (range.start..=range.end).contains(t)),
                "{range:?}: {ticks:?}"
            );
            assert!(
                labels_leave_room(&ticks, &range, width),
                "{range:?}: {ticks:?}"
            );
        }
        // Room for more than a tick per decade where the axis is long.
        assert!(log_ticks(&(0.67..1.5e6), axis).len() > 7);
    }

    #[test]
    fn counts_are_labelled_short() {
        let labels: Vec<String> = [0.5, 1.0, 900.0, 1000.0, 1500.0, 20_000.0, 1e6]
            .into_iter()
            .map(count_label)
            .collect();
        assert_eq!(labels, ["0", "0", "900", "1k", "1.5k", "20k", "1M"]);
    }
}

//! The report's plots, drawn with plotters into SVG text that `report.html`
//! embeds: lateness CDF on a percentile axis, lateness over time, and cost
//! per cancelled order. Every plot gives each strategy the same colour.

use anyhow::Result;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

const WIDTH: u32 = 900;
const HEIGHT: u32 = 420;
const FONT: &str = "sans-serif";

/// Colour of the strategy at `index` in the run's order (Tableau 10).
pub fn color(index: usize) -> RGBColor {
    const PALETTE: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    PALETTE[index % PALETTE.len()]
}

/// One strategy's line: `(x, lateness in ms)` points and its colour index.
#[derive(Debug, Clone)]
pub struct Line {
    pub name: String,
    pub color: usize,
    pub points: Vec<(f64, f64)>,
}

/// The smallest lateness a log axis shows; 0 ms is drawn here.
const FLOOR_MS: f64 = 0.01;

/// Position of quantile `q` on a percentile ("nines") axis:
/// 0 = p0, 1 = p90, 2 = p99, 3 = p99.9. Undefined at q = 1, so callers cap q.
pub fn nines(q: f64) -> f64 {
    debug_assert!((0.0..1.0).contains(&q), "quantile {q} has no nines");
    -(1.0 - q).log10()
}

/// `p90`, `p99`, `p99.9` for a position on the nines axis.
fn percentile_label(x: &f64) -> String {
    let percent = 100.0 * (1.0 - 10f64.powf(-x));
    let text = format!("{percent:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("p{text}")
}

/// A log range in ms, widened to whole decades, covering every point.
fn log_range(lines: &[Line]) -> std::ops::Range<f64> {
    let values = lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
    let (lo, hi) = values.fold((f64::MAX, 0f64), |(lo, hi), v| {
        let v = v.max(FLOOR_MS);
        (lo.min(v), hi.max(v))
    });
    if hi <= 0.0 {
        return FLOOR_MS..1.0;
    }
    let lo = 10f64.powf(lo.log10().floor());
    let hi = 10f64.powf(hi.log10().ceil()).max(lo * 10.0);
    lo..hi
}

/// Lateness CDF on a percentile axis: each line's points are
/// `(nines(q), lateness ms)`; `max_nines` ends the axis.
pub fn lateness_cdf(lines: &[Line], max_nines: f64) -> Result<String> {
    let y = log_range(lines);
    // Whole nines only, so the axis reads p0, p90, p99, p99.9, ...
    let end = max_nines.max(1.0).ceil();
    line_chart(
        "Lateness by percentile (log scale)",
        "percentile of cancelled orders",
        (0f64..end, end as usize + 1),
        &percentile_label,
        y,
        lines,
        &[],
    )
}

/// p99 lateness of the orders whose deadline fell in each second of the
/// run, with a dashed vertical line and a label at each `(second, event)`
/// marker (faults).
pub fn lateness_over_time(lines: &[Line], markers: &[(f64, String)]) -> Result<String> {
    let y = log_range(lines);
    let end = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .fold(1f64, f64::max);
    line_chart(
        "p99 lateness per second of deadline (log scale)",
        "seconds since the run started",
        (0f64..end + 1.0, 12),
        &|x: &f64| format!("{x:.0}"),
        y,
        lines,
        markers,
    )
}

fn line_chart(
    caption: &str,
    x_desc: &str,
    (x, x_labels): (std::ops::Range<f64>, usize),
    x_label: &dyn Fn(&f64) -> String,
    y: std::ops::Range<f64>,
    lines: &[Line],
    markers: &[(f64, String)],
) -> Result<String> {
    let (y_lo, y_hi) = (y.start, y.end);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(x, y.log_scale())?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .x_labels(x_labels)
            .y_desc("lateness (ms)")
            .x_label_formatter(x_label)
            .y_label_formatter(&|v| format!("{v}"))
            .draw()?;
        for (x, label) in markers {
            let dashes = (0..40).map(|i| {
                let f = |k: f64| y_lo * (y_hi / y_lo).powf(k / 40.0);
                PathElement::new(vec![(*x, f(i as f64)), (*x, f(i as f64 + 0.5))], BLACK)
            });
            chart.draw_series(dashes)?;
            chart.draw_series(std::iter::once(Text::new(
                label.clone(),
                (*x, y_hi),
                (FONT, 12)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Left, VPos::Top)),
            )))?;
        }
        for line in lines {
            let style = color(line.color).stroke_width(2);
            let points = line.points.iter().map(|&(x, y)| (x, y.max(FLOOR_MS)));
            chart
                .draw_series(LineSeries::new(points, style))?
                .label(line.name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font((FONT, 13))
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}

/// One strategy's sweep: `(x, low, high, held)` per step, e.g. offered
/// rate with p50 and p99 lateness.
#[derive(Debug, Clone)]
pub struct RateLine {
    pub name: String,
    pub color: usize,
    pub points: Vec<(f64, f64, f64, bool)>,
}

/// What a sweep chart shows: `high` solid, `low` thin, a dashed
/// horizontal line at `bound` if given; x values of 0 are drawn at 1 and
/// labelled 0 (a backlog of none).
#[derive(Debug, Clone)]
pub struct SweepChart<'a> {
    pub caption: &'a str,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    pub bound: Option<(f64, String)>,
}

/// Both axes log; a step that did not hold is drawn as a cross.
pub fn sweep_chart(chart_spec: &SweepChart, lines: &[RateLine]) -> Result<String> {
    let lines: Vec<RateLine> = lines
        .iter()
        .map(|l| RateLine {
            points: l
                .points
                .iter()
                .map(|p| (p.0.max(1.0), p.1, p.2, p.3))
                .collect(),
            ..l.clone()
        })
        .collect();
    let lines = &lines[..];
    let as_lines: Vec<Line> = lines
        .iter()
        .map(|l| Line {
            name: l.name.clone(),
            color: l.color,
            points: l
                .points
                .iter()
                .flat_map(|p| [(p.0, p.1), (p.0, p.2)])
                .chain(chart_spec.bound.as_ref().map(|b| (1.0, b.0)))
                .collect(),
        })
        .collect();
    let y = log_range(&as_lines);
    let rates = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
    let (lo, hi) = rates.fold((f64::MAX, 1f64), |(lo, hi), r| (lo.min(r), hi.max(r)));
    let x = (lo.min(hi) / 1.5).max(0.1)..hi * 1.5;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(chart_spec.caption, (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(x.clone().log_scale(), y.clone().log_scale())?;
        chart
            .configure_mesh()
            .x_desc(chart_spec.x_desc)
            .y_desc(chart_spec.y_desc)
            .x_label_formatter(&|v| {
                if *v <= 1.0 {
                    "0".to_string()
                } else {
                    format!("{v:.0}")
                }
            })
            .y_label_formatter(&|v| format!("{v}"))
            .draw()?;
        if let Some((bound, label)) = &chart_spec.bound {
            let dashes = (0..60).map(|i| {
                let f = |k: f64| x.start * (x.end / x.start).powf(k / 60.0);
                PathElement::new(
                    vec![(f(i as f64), *bound), (f(i as f64 + 0.5), *bound)],
                    BLACK,
                )
            });
            chart.draw_series(dashes)?;
            // At the right end: the legend sits at the upper left.
            chart.draw_series(std::iter::once(Text::new(
                label.clone(),
                (x.end, *bound),
                (FONT, 12)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Right, VPos::Bottom)),
            )))?;
        }
        for line in lines {
            let c = color(line.color);
            let p99 = line.points.iter().map(|p| (p.0, p.2.max(FLOOR_MS)));
            let p50 = line.points.iter().map(|p| (p.0, p.1.max(FLOOR_MS)));
            chart
                .draw_series(LineSeries::new(p99, c.stroke_width(2)))?
                .label(line.name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
            chart.draw_series(LineSeries::new(p50, c.stroke_width(1)))?;
            chart.draw_series(line.points.iter().map(|p| {
                let at = (p.0, p.2.max(FLOOR_MS));
                if p.3 {
                    EmptyElement::at(at) + Circle::new((0, 0), 3, c.filled())
                } else {
                    EmptyElement::at(at) + Circle::new((0, 0), 0, c.filled())
                }
            }))?;
            chart.draw_series(
                line.points
                    .iter()
                    .filter(|p| !p.3)
                    .map(|p| Cross::new((p.0, p.2.max(FLOOR_MS)), 5, c.stroke_width(2))),
            )?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font((FONT, 13))
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}

/// One bar per strategy: `(name, colour index, value)`; missing values are
/// left out by the caller.
pub fn bars(caption: &str, unit: &str, bars: &[(String, usize, f64)]) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH / 2, 320)).into_drawing_area();
        root.fill(&WHITE)?;
        let top = bars.iter().map(|b| b.2).fold(0f64, f64::max);
        let top = if top > 0.0 { top * 1.2 } else { 1.0 };
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, (FONT, 16))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..bars.len().max(1) as f64, 0f64..top)?;
        // Bar i spans [i, i + 1]; names go under the bars, drawn on the root
        // area because a numeric axis cannot label categories.
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc(unit)
            .draw()?;
        chart.draw_series(bars.iter().enumerate().map(|(i, (_, c, v))| {
            let x = i as f64;
            Rectangle::new([(x + 0.15, 0.0), (x + 0.85, *v)], color(*c).filled())
        }))?;
        chart.draw_series(bars.iter().enumerate().map(|(i, (_, _, v))| {
            Text::new(
                format_value(*v),
                (i as f64 + 0.5, *v),
                (FONT, 12)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Bottom)),
            )
        }))?;
        for (i, (name, _, _)) in bars.iter().enumerate() {
            let (x, y) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
            root.draw(&Text::new(
                name.as_str(),
                (x, y + 6),
                (FONT, 11)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Top)),
            ))?;
        }
        root.present()?;
    }
    Ok(svg)
}

/// Three significant figures, no exponent.
pub fn format_value(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nines_axis_places_the_usual_percentiles_on_whole_numbers() {
        assert_eq!(nines(0.0), 0.0);
        assert!((nines(0.9) - 1.0).abs() < 1e-9);
        assert!((nines(0.999) - 3.0).abs() < 1e-9);
        assert_eq!(percentile_label(&0.0), "p0");
        assert_eq!(percentile_label(&1.0), "p90");
        assert_eq!(percentile_label(&2.0), "p99");
        assert_eq!(percentile_label(&3.0), "p99.9");
    }

    #[test]
    fn hgrm_text_round_trips_through_the_parser() {
        let mut h = crate::model::summary::new_histogram();
        for v in [1_000u64, 2_000, 3_000, 250_000] {
            h.record(v).unwrap();
        }
        let points = parse_hgrm(&crate::model::summary::hgrm(&h));
        assert!(points.len() >= 4, "{points:?}");
        assert_eq!(points.first().unwrap().0, 0.0);
        let (q, v) = *points.last().unwrap();
        assert_eq!(q, 1.0);
        assert!((v - 250.0).abs() < 0.5, "max {v} ms");
        assert!(points
            .windows(2)
            .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
    }

    #[test]
    fn log_range_covers_every_point_in_whole_decades() {
        let line = Line {
            name: "x".into(),
            color: 0,
            points: vec![(0.0, 0.0), (1.0, 3.2), (2.0, 240.0)],
        };
        assert_eq!(log_range(&[line]), FLOOR_MS..1000.0);
        assert_eq!(log_range(&[]), FLOOR_MS..1.0);
    }

    #[test]
    fn charts_render_one_path_per_strategy_and_every_label() {
        let lines = vec![
            Line {
                name: "db-scan".into(),
                color: 0,
                points: vec![(0.0, 1.0), (1.0, 200.0), (2.0, 240.0)],
            },
            Line {
                name: "timing-wheel".into(),
                color: 1,
                points: vec![(0.0, 0.5), (1.0, 2.0), (2.0, 4.0)],
            },
        ];
        let svg = lateness_cdf(&lines, 3.0).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
        for text in ["db-scan", "timing-wheel", "p99", "p99.9", "lateness (ms)"] {
            assert!(svg.contains(text), "CDF lacks {text}");
        }
        let svg = bars(
            "statements",
            "per cancel",
            &[("db-scan".into(), 0, 5.1), ("timing-wheel".into(), 1, 3.0)],
        )
        .unwrap();
        assert!(svg.contains("db-scan") && svg.contains("5.10"), "{svg}");
        let one = bars("one", "unit", &[("redis-zset".into(), 4, 25.4)]).unwrap();
        assert!(one.contains("redis-zset") && one.contains("25.4"), "{one}");
    }
}

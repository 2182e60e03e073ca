//! The report's plots, drawn with plotters. Each plot is a [`Chart`], its
//! data and how to draw it, drawn by one generic function on any plotters
//! backend: the SVG that `report.html` embeds and `plots/<name>.svg` hold,
//! and the PNG in `plots/<name>.png` (bitmap backend, with a font embedded
//! in the binary so that no system font is needed). Every plot gives each
//! strategy the same colour and keeps its legend beside the data, never
//! over it.

use super::palette::Style;
use anyhow::{anyhow, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::ops::Range;
use std::path::Path;

/// Width and height of a plot's data area with its axes; a legend panel
/// and a key below add to them.
const WIDTH: u32 = 900;
const HEIGHT: u32 = 420;
/// Size of a cost chart (two of them side by side on the page).
const BAR_WIDTH: u32 = 450;
const BAR_HEIGHT: u32 = 320;

/// The family every text is drawn in. The bitmap backend (and plotters'
/// text layout, SVG's included) finds the embedded DejaVu Sans under this
/// name; SVG writes it as the `font-family` list, so a viewer without
/// DejaVu Sans falls back to its own sans-serif.
const FONT: &str = "DejaVu Sans, sans-serif";

/// DejaVu Sans; its license is next to it in `harness/assets/fonts/`.
static DEJAVU_SANS: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// Registers the embedded font, once per process, before any text is laid
/// out: without it plotters has no font to measure or draw text with.
fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The bytes are part of the binary: failing here is a build error
        // that the tests catch, not a condition to report at run time.
        if plotters::style::register_font(FONT, FontStyle::Normal, DEJAVU_SANS).is_err() {
            panic!("the embedded DejaVu Sans does not parse as a font");
        }
    });
}

fn font(size: u32) -> FontDesc<'static> {
    register_font();
    FontDesc::new(FontFamily::from(FONT), size as f64, FontStyle::Normal)
}

/// Width in pixels of `text` drawn at `size`.
fn text_width(text: &str, size: u32) -> u32 {
    font(size)
        .box_size(text)
        .map(|(w, _)| w)
        .unwrap_or(text.chars().count() as u32 * size / 2)
}

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

/// A plot, ready to draw on any backend.
#[derive(Debug, Clone)]
pub enum Chart {
    Lines(LineChart),
    Sweep(SweepChart),
    Bars(BarChart),
    ByTimeout(TimeoutChart),
}

/// Lateness lines on a log axis, with shaded bands under them.
#[derive(Debug, Clone)]
pub struct LineChart {
    caption: &'static str,
    x_desc: &'static str,
    x: Range<f64>,
    x_labels: usize,
    x_label: fn(&f64) -> String,
    lines: Vec<Line>,
    bands: Vec<Band>,
}

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

/// One bar per strategy.
#[derive(Debug, Clone)]
pub struct BarChart {
    caption: &'static str,
    unit: &'static str,
    bars: Vec<Bar>,
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

/// Lateness of each timeout class, grouped by strategy: per class a bar
/// to its slowest cancel with a p50 tick, in ms (a class holds too few
/// orders for a p99).
#[derive(Debug, Clone)]
pub struct TimeoutChart {
    /// Every class any strategy had, shortest first.
    timeouts_ms: Vec<u64>,
    /// Each strategy's name, style and classes.
    strategies: Vec<(String, Style, Vec<ClassLateness>)>,
}

/// The lateness of one strategy's orders of one timeout class.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClassLateness {
    pub timeout_ms: u64,
    pub p50_ms: f64,
    pub max_ms: f64,
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

/// A log range in ms, widened to whole decades, covering every value.
fn log_range(values: impl Iterator<Item = f64>) -> Range<f64> {
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

fn lines_range(lines: &[Line]) -> Range<f64> {
    log_range(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)))
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

/// One row of a legend panel.
struct LegendEntry {
    text: String,
    color: RGBColor,
    swatch: Swatch,
}

enum Swatch {
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
const KEY_FONT: u32 = 12;
const KEY_ROW: u32 = 16;
/// Fault labels longer than this are cut, so that two columns fit.
const KEY_LABEL_CHARS: usize = 60;

fn legend_width(entries: &[LegendEntry]) -> u32 {
    let widest = entries
        .iter()
        .map(|e| text_width(&e.text, LEGEND_FONT))
        .max()
        .unwrap_or(0);
    widest + 48
}

fn legend_height(entries: usize) -> u32 {
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
fn beside_legend<DB: DrawingBackend>(
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

/// The key lines under a plot with bands: `tag label` of each band that
/// has a label, cut to fit a column.
fn key_lines(bands: &[Band]) -> Vec<String> {
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

/// Rows of the key: two columns.
fn key_rows(lines: usize) -> u32 {
    lines.div_ceil(2) as u32
}

fn key_height(lines: usize) -> u32 {
    if lines == 0 {
        0
    } else {
        key_rows(lines) * KEY_ROW + 12
    }
}

/// The key under a plot: column-major in two columns.
fn draw_key<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, lines: &[String]) -> Result<()>
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
fn line_entry(name: &str, style: Style) -> LegendEntry {
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

fn line_legend(lines: &[Line]) -> Vec<LegendEntry> {
    lines.iter().map(|l| line_entry(&l.name, l.style)).collect()
}

fn sweep_legend(lines: &[RateLine]) -> Vec<LegendEntry> {
    lines.iter().map(|l| line_entry(&l.name, l.style)).collect()
}

/// Draws `points` as one strategy's line on `chart`, dashed if its style is.
fn draw_line<DB, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    points: Vec<(X::ValueType, Y::ValueType)>,
    style: Style,
    width: u32,
) -> Result<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    X: Ranged,
    Y: Ranged,
    X::ValueType: Clone + 'static,
    Y::ValueType: Clone + 'static,
{
    let stroke = style.color.stroke_width(width);
    if style.dashed {
        chart.draw_series(DashedLineSeries::new(points, 6, 4, stroke))?;
    } else {
        chart.draw_series(LineSeries::new(points, stroke))?;
    }
    Ok(())
}

fn timeout_legend(chart: &TimeoutChart) -> Vec<LegendEntry> {
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

/// Category names under bars: level when they fit their slot, else turned
/// to read upwards.
struct CategoryLabels {
    turned: bool,
    /// Height of the label area under the axis.
    area: u32,
}

const CATEGORY_FONT: u32 = 11;

impl CategoryLabels {
    fn new(names: impl Iterator<Item = String>, slots: usize, plot_width: u32) -> Self {
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
    fn draw<DB: DrawingBackend>(
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

/// Pixels left and right of the data in a bar chart: the y labels and
/// margins.
const BAR_Y_AREA: u32 = 60;
const BAR_MARGIN: u32 = 10;

impl BarChart {
    fn labels(&self) -> CategoryLabels {
        CategoryLabels::new(
            self.bars.iter().map(|b| b.name.clone()),
            self.bars.len(),
            BAR_WIDTH - BAR_Y_AREA - 2 * BAR_MARGIN,
        )
    }
}

/// Width of the data (axes included) of a timeout chart.
const TIMEOUT_Y_AREA: u32 = 70;

impl TimeoutChart {
    fn labels(&self) -> CategoryLabels {
        CategoryLabels::new(
            self.strategies.iter().map(|s| s.0.clone()),
            self.strategies.len(),
            WIDTH - TIMEOUT_Y_AREA - 24,
        )
    }
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

impl LineChart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
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
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
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

impl BarChart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
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

impl TimeoutChart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
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

/// A plot of a report: its chart and where it goes.
#[derive(Debug, Clone)]
pub struct Figure {
    /// The file name under `plots/`, without `.svg` or `.png`.
    pub name: &'static str,
    /// What it shows, in a few words (alt text and link).
    pub title: String,
    /// The report section it belongs under.
    pub section: Section,
    pub chart: Chart,
}

/// The report sections plots go under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// Lateness, every strategy together.
    Lateness,
    /// What each cancel cost.
    Cost,
    /// A sweep's result.
    Sweep,
}

/// The folder of a run's plot files.
pub const PLOTS_DIR: &str = "plots";

impl Figure {
    pub fn svg_path(&self) -> String {
        format!("{PLOTS_DIR}/{}.svg", self.name)
    }

    pub fn png_path(&self) -> String {
        format!("{PLOTS_DIR}/{}.png", self.name)
    }
}

/// Markdown paragraphs showing every figure of `section`, the PNG inline
/// and the SVG linked next to it, each ending in one newline; empty when
/// the section has none.
pub fn markdown_links(figures: &[Figure], section: Section) -> String {
    figures
        .iter()
        .filter(|f| f.section == section)
        .map(|f| {
            format!(
                "![{}]({}) ([SVG]({}))\n",
                f.title,
                f.png_path(),
                f.svg_path()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A figure drawn, with its SVG text for the page to embed.
#[derive(Debug)]
pub struct DrawnFigure<'a> {
    pub figure: &'a Figure,
    pub svg: String,
}

/// Writes every figure to `plots/<name>.svg` and `plots/<name>.png` in
/// `run_dir` and returns them drawn, in order.
/// Image files there that no figure wrote any more (a chart the data no
/// longer has) are removed, so the folder shows only what the report links.
pub fn write_files<'a>(run_dir: &Path, figures: &'a [Figure]) -> Result<Vec<DrawnFigure<'a>>> {
    let dir = run_dir.join(PLOTS_DIR);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut drawn = Vec::new();
    for figure in figures {
        let svg = figure
            .chart
            .svg()
            .with_context(|| format!("drawing {}", figure.title))?;
        let path = run_dir.join(figure.svg_path());
        std::fs::write(&path, &svg).with_context(|| format!("writing {}", path.display()))?;
        figure.chart.write_png(&run_dir.join(figure.png_path()))?;
        drawn.push(DrawnFigure { figure, svg });
    }
    let written: Vec<String> = figures
        .iter()
        .flat_map(|f| [format!("{}.svg", f.name), format!("{}.png", f.name)])
        .collect();
    for entry in std::fs::read_dir(&dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let image = name.ends_with(".svg") || name.ends_with(".png");
        if image && !written.contains(&name) {
            std::fs::remove_file(entry.path())
                .map_err(|e| anyhow!("removing stale {}: {e}", entry.path().display()))?;
        }
    }
    Ok(drawn)
}

#[cfg(test)]
mod tests {
    use super::super::palette::style;
    use super::*;

    fn bar(name: &str, value: f64, spread: Option<(f64, f64)>) -> Bar {
        Bar {
            name: name.into(),
            style: style(name),
            value,
            spread,
        }
    }

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
        let mut h = crate::model::lateness::new_histogram();
        for v in [1_000u64, 2_000, 3_000, 250_000] {
            h.record(v).unwrap();
        }
        let points = parse_hgrm(&crate::model::lateness::hgrm(&h));
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
            style: style("x"),
            points: vec![(0.0, 0.0), (1.0, 3.2), (2.0, 240.0)],
        };
        assert_eq!(lines_range(&[line]), FLOOR_MS..1000.0);
        assert_eq!(lines_range(&[]), FLOOR_MS..1.0);
    }

    fn two_lines() -> Vec<Line> {
        vec![
            Line {
                name: "db-scan".into(),
                style: style("db-scan"),
                points: vec![(0.0, 1.0), (1.0, 200.0), (2.0, 240.0)],
            },
            Line {
                name: "timing-wheel".into(),
                style: style("timing-wheel"),
                points: vec![(0.0, 0.5), (1.0, 2.0), (2.0, 4.0)],
            },
        ]
    }

    #[test]
    fn charts_render_one_path_per_strategy_and_every_label() {
        let svg = lateness_cdf(two_lines(), 3.0).svg().unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
        for text in ["db-scan", "timing-wheel", "p99", "p99.9", "lateness (ms)"] {
            assert!(svg.contains(text), "CDF lacks {text}");
        }
        assert!(svg.contains(&format!("font-family=\"{FONT}\"")), "{svg}");
        let svg = bars(
            "statements",
            "per cancel",
            vec![bar("db-scan", 5.1, None), bar("timing-wheel", 3.0, None)],
        )
        .svg()
        .unwrap();
        assert!(svg.contains("db-scan") && svg.contains("5.10"), "{svg}");
        let one = bars("one", "unit", vec![bar("redis-zset", 25.4, None)])
            .svg()
            .unwrap();
        assert!(one.contains("redis-zset") && one.contains("25.4"), "{one}");
    }

    #[test]
    fn a_spread_is_drawn_as_a_whisker_with_caps() {
        let paths = |spread| {
            // The taller bar fixes the axis, so the grid is the same in both.
            let chart = bars(
                "cpu",
                "µs",
                vec![
                    bar("db-scan", 1619.0, spread),
                    bar("redis-zset", 3000.0, None),
                ],
            );
            chart.svg().unwrap().matches("<polyline").count()
        };
        assert_eq!(paths(Some((1537.0, 1951.0))), paths(None) + 3);
        // Repetitions that agree have no spread to draw.
        assert_eq!(paths(Some((1619.0, 1619.0))), paths(None));
    }

    #[test]
    fn a_dashed_strategy_is_dashed_in_its_line_and_its_legend() {
        let line = |name: &str| Line {
            name: name.into(),
            style: style(name),
            points: vec![(0.0, 1.0), (1.0, 200.0), (2.0, 240.0)],
        };
        let paths = |name: &str| {
            let svg = lateness_cdf(vec![line(name)], 3.0).svg().unwrap();
            svg.matches("<polyline").count()
        };
        // A dash is a path of its own: many more than one line's.
        assert!(paths("redis-zset+fallback") > paths("redis-zset") + 10);
    }

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

    /// The x of every SVG `<text>` element whose text is `text`.
    fn text_x(svg: &str, text: &str) -> Vec<u32> {
        svg.split("<text")
            .skip(1)
            .filter_map(|element| {
                let element = &element[..element.find("</text>")?];
                let (attributes, content) = element.split_once('>')?;
                (content.trim() == text).then_some(())?;
                let x = &attributes[attributes.find("x=\"")? + 3..];
                x[..x.find('"')?].parse().ok()
            })
            .collect()
    }

    #[test]
    fn the_legend_sits_right_of_the_data() {
        let chart = lateness_cdf(two_lines(), 3.0);
        let svg = chart.svg().unwrap();
        // The legend's text starts past the data area's right edge.
        let legend_x = text_x(&svg, "db-scan");
        assert!(
            !legend_x.is_empty() && legend_x.iter().all(|x| *x > WIDTH),
            "{svg}"
        );
        assert!(chart.size().0 > WIDTH);
    }

    #[test]
    fn bands_are_shaded_and_their_labels_keyed_under_the_plot() {
        let bands = vec![
            Band {
                from: 0.0,
                to: 0.5,
                kind: BandKind::WarmUp,
                tag: "warm-up".into(),
                label: None,
            },
            Band {
                from: 1.0,
                to: 99.0,
                kind: BandKind::Fault,
                tag: "#1".into(),
                label: Some("kill instance 0 at 1s, no restart".into()),
            },
        ];
        let chart = lateness_over_time(two_lines(), bands);
        let svg = chart.svg().unwrap();
        for text in ["warm-up", "#1 kill instance 0 at 1s, no restart"] {
            assert!(svg.contains(text), "lacks {text}: {svg}");
        }
        // The fault band ends with the axis, not at 99 s.
        let Chart::Lines(lines) = &chart else {
            panic!()
        };
        assert_eq!(lines.bands[1].to, 3.0);
        assert!(chart.size().1 > HEIGHT);
    }

    fn class(timeout_ms: u64, p50_ms: f64, max_ms: f64) -> ClassLateness {
        ClassLateness {
            timeout_ms,
            p50_ms,
            max_ms,
        }
    }

    #[test]
    fn png_files_are_drawn_with_the_embedded_font() {
        let dir = tempfile::tempdir().unwrap();
        let figure = Figure {
            name: "lateness-by-timeout",
            title: "Lateness by timeout".into(),
            section: Section::Lateness,
            chart: lateness_by_timeout(vec![
                (
                    "db-scan".into(),
                    style("db-scan"),
                    vec![class(500, 20.0, 48.0), class(1000, 21.0, 49.0)],
                ),
                (
                    "timing-wheel".into(),
                    style("timing-wheel"),
                    vec![class(500, 1.0, 2.0)],
                ),
            ]),
        };
        let drawn = write_files(dir.path(), std::slice::from_ref(&figure)).unwrap();
        let svg = &drawn[0].svg;
        assert!(svg.contains("timeout 1000 ms"), "{svg}");
        let png = std::fs::read(dir.path().join(figure.png_path())).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 1000);
        assert_eq!(
            &std::fs::read_to_string(dir.path().join(figure.svg_path())).unwrap(),
            svg
        );
        // A stale plot goes when the report is written again.
        std::fs::write(dir.path().join("plots/old.png"), b"x").unwrap();
        write_files(dir.path(), &[figure]).unwrap();
        assert!(!dir.path().join("plots/old.png").exists());
    }
}

//! What every plot shares: the pixel sizes of the plots, the DejaVu Sans
//! embedded in the binary that every text is drawn and measured in, the
//! log lateness axis (its floor for 0 ms and its whole-decade range), and
//! drawing one strategy's line in its style.

use super::super::palette::Style;
use anyhow::Result;
use plotters::prelude::*;
use std::ops::Range;

/// Width and height of a plot's data area with its axes; a legend panel
/// and a key below add to them.
pub(super) const WIDTH: u32 = 900;
pub(super) const HEIGHT: u32 = 420;
/// Size of a cost chart (two of them side by side on the page).
pub(super) const BAR_WIDTH: u32 = 450;
pub(super) const BAR_HEIGHT: u32 = 320;

/// The family every text is drawn in. The bitmap backend (and plotters'
/// text layout, SVG's included) finds the embedded DejaVu Sans under this
/// name; SVG writes it as the `font-family` list, so a viewer without
/// DejaVu Sans falls back to its own sans-serif.
pub(super) const FONT: &str = "DejaVu Sans, sans-serif";

/// DejaVu Sans; its license is next to it in `harness/assets/fonts/`.
static DEJAVU_SANS: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");

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

pub(super) fn font(size: u32) -> FontDesc<'static> {
    register_font();
    FontDesc::new(FontFamily::from(FONT), size as f64, FontStyle::Normal)
}

/// Width in pixels of `text` drawn at `size`.
pub(super) fn text_width(text: &str, size: u32) -> u32 {
    font(size)
        .box_size(text)
        .map(|(w, _)| w)
        .unwrap_or(text.chars().count() as u32 * size / 2)
}

/// The smallest lateness a log axis shows; 0 ms is drawn here.
pub(super) const FLOOR_MS: f64 = 0.01;

/// A log range in ms, widened to whole decades, covering every value.
pub(super) fn log_range(values: impl Iterator<Item = f64>) -> Range<f64> {
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

/// Draws `points` as one strategy's line on `chart`, dashed if its style is.
pub(super) fn draw_line<DB, X, Y>(
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

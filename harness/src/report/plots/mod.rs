//! The report's plots, drawn with plotters. Each plot is a [`Chart`], its
//! data and how to draw it, drawn by one generic function on any plotters
//! backend: the SVG that `report.html` embeds and `plots/<name>.svg` hold,
//! and the PNG in `plots/<name>.png` (bitmap backend, with a font embedded
//! in the binary so that no system font is needed). Every plot gives each
//! strategy the same colour and keeps its legend beside the data, never
//! over it.
//!
//! The rooms: `chart` (the kinds, their constructors, size and backends),
//! one per kind (`lines`: CDF and over time, `sweep`, `bars`: cost,
//! `timeout`), `legend` (legend, key, category names), `canvas` (sizes,
//! font, log axis, a strategy's line) and `figure` (the files).

mod bars;
mod canvas;
mod chart;
mod figure;
mod legend;
mod lines;
mod sweep;
mod timeout;

pub use bars::Bar;
pub use chart::{bars, lateness_by_timeout, lateness_cdf, lateness_over_time, Chart};
pub use figure::{markdown_links, write_files, DrawnFigure, Figure, Section};
pub use lines::{nines, parse_hgrm, Band, BandKind, Line};
pub use sweep::{RateLine, SweepChart};
pub use timeout::ClassLateness;

#[cfg(test)]
mod tests;

//! A report's plots as files: each [`Figure`] (a chart, its file name and
//! the section it goes under), its Markdown links, and writing every
//! figure to `plots/<name>.svg` and `.png`, removing stale ones.

use super::chart::Chart;
use anyhow::{anyhow, Context, Result};
use std::path::Path;

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

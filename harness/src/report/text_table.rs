//! The tables printed on the terminal, laid out by `comfy-table`: a
//! column whose cells are all figures is right-aligned so digits line up,
//! text stays left-aligned.

use comfy_table::{presets, CellAlignment, Table, TableComponent};

/// `header` and `rows` as an aligned plain-text table (no colour, no
/// terminal-width wrapping: the output is the same on a terminal, in a
/// pipe and in CI logs).
pub fn render(header: &[String], rows: &[Vec<String>]) -> String {
    let mut table = Table::new();
    // No borders; one rule under the header.
    table.load_preset(presets::NOTHING);
    table.set_style(TableComponent::HeaderLines, '─');
    table.set_style(TableComponent::MiddleHeaderIntersections, '─');
    table.set_header(header.to_vec());
    for row in rows {
        table.add_row(row.clone());
    }
    for (i, column) in table.column_iter_mut().enumerate() {
        let cells = || rows.iter().filter_map(|r| r.get(i));
        if cells().all(|c| is_figure(c)) && cells().any(|c| starts_with_digit(c)) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut out = table.trim_fmt();
    out.push('\n');
    out
}

fn starts_with_digit(cell: &str) -> bool {
    cell.starts_with(|c: char| c.is_ascii_digit())
}

/// A figure, or the marks the tables print in place of one.
fn is_figure(cell: &str) -> bool {
    starts_with_digit(cell) || matches!(cell, "" | "-" | "?" | "none")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figure_columns_are_right_aligned_and_text_left() {
        let header = vec!["strategy".to_string(), "p99 ms".to_string()];
        let rows = vec![
            vec!["db-scan".to_string(), "251.3".to_string()],
            vec!["timing-wheel".to_string(), "4.1".to_string()],
            vec!["redis-zset".to_string(), "-".to_string()],
        ];
        let text = render(&header, &rows);
        let line = |name: &str| text.lines().find(|l| l.contains(name)).unwrap();
        let names = ["db-scan", "timing-wheel", "redis-zset"];
        // Figures end in one column, names start in one column.
        let ends: Vec<usize> = names
            .iter()
            .map(|n| line(n).trim_end().chars().count())
            .collect();
        let starts: Vec<usize> = names.iter().map(|n| line(n).find(n).unwrap()).collect();
        assert!(ends.windows(2).all(|w| w[0] == w[1]), "{text}");
        assert!(starts.windows(2).all(|w| w[0] == w[1]), "{text}");
        assert!(line("db-scan").ends_with("251.3"), "{text}");
    }
}

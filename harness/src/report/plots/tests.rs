//! The plots drawn whole: every kind renders its strategies and labels,
//! legends sit beside the data, bands are keyed, files are written.

use super::super::palette::style_of as style;
use super::bars::Bar;
use super::canvas::{FLOOR_MS, FONT, HEIGHT, WIDTH};
use super::chart::{bars, lateness_by_timeout, lateness_cdf, lateness_over_time, Chart};
use super::figure::{write_files, Figure, Section};
use super::lines::{lines_range, nines, parse_hgrm, percentile_label, Band, BandKind, Line};
use super::timeout::ClassLateness;

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
        name: "db-scan".into(),
        style: style("db-scan"),
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

//! The one place a strategy's colour is decided. Every plot of every run
//! (lateness CDF, over time, by timeout, cost bars, sweep and backlog
//! plots) draws a strategy in [`style`] of its name, so `db-scan` is the
//! same blue wherever it appears, whichever strategies ran beside it and
//! in whatever order.
//!
//! Each registry entry has its own hue ([`BASE_COLORS`]); the remedies keep
//! their base's hue, so a strategy and its remedied forms read as one
//! family: `+fallback` lighter and drawn dashed, `+outbox` darker, both
//! remedies darker still and dashed.

use plotters::style::RGBColor;
use strategies::registry::Variant;

/// How a strategy is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub color: RGBColor,
    /// Lines drawn dashed: the `+fallback` forms, so that they stay apart
    /// from their base on a line plot even where shades are hard to tell.
    pub dashed: bool,
}

/// The colour of every registry entry (`strategies::registry::STRATEGIES`),
/// by name. The six strategies and the ceiling take the clearest hues; the
/// teaching variants take the others (their names carry a `✖` in plots).
/// A test checks that every entry has a row here and that no two styles
/// of the registry's names, remedies included, look alike.
pub const BASE_COLORS: &[(&str, RGBColor)] = &[
    ("db-scan", RGBColor(31, 119, 180)),
    ("db-timer", RGBColor(23, 190, 207)),
    ("timing-wheel", RGBColor(44, 160, 44)),
    ("rabbit-ttl", RGBColor(255, 127, 14)),
    ("rabbit-delayed", RGBColor(214, 39, 40)),
    ("redis-zset", RGBColor(148, 103, 189)),
    ("ceiling", RGBColor(0, 0, 0)),
    ("db-scan-noindex", RGBColor(140, 86, 75)),
    ("timing-wheel-unconditional", RGBColor(0, 90, 50)),
    ("timing-wheel-release-first", RGBColor(180, 0, 90)),
    ("rabbit-ttl-single-queue", RGBColor(255, 187, 0)),
    ("rabbit-ttl-per-delivery", RGBColor(128, 128, 0)),
    ("redis-keyspace-expiry", RGBColor(0, 0, 128)),
    ("redis-zset-nonatomic", RGBColor(255, 0, 255)),
    ("redis-zset-publish-first", RGBColor(200, 160, 120)),
];

/// For an entry without a row above (a test keeps every entry in the
/// table): grey-free, so that it never reads as the ceiling.
const UNLISTED: RGBColor = RGBColor(188, 189, 34);

/// The style of a strategy with its remedies (`redis-zset+outbox+fallback`
/// is a shade of redis-zset's colour, dashed).
pub fn style(variant: Variant) -> Style {
    let base = BASE_COLORS
        .iter()
        .find(|(n, _)| *n == variant.info.name)
        .map(|(_, c)| *c)
        .unwrap_or(UNLISTED);
    let color = match (variant.outbox, variant.fallback) {
        (false, false) => base,
        (false, true) => mix(base, (255, 255, 255), 0.45),
        (true, false) => mix(base, (0, 0, 0), 0.35),
        (true, true) => mix(base, (0, 0, 0), 0.6),
    };
    Style {
        color,
        dashed: variant.fallback,
    }
}

/// `c` moved a share `k` of the way to `towards` (white: a tint, black: a shade).
fn mix(c: RGBColor, towards: (u8, u8, u8), k: f64) -> RGBColor {
    let step = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * k).round() as u8;
    RGBColor(
        step(c.0, towards.0),
        step(c.1, towards.1),
        step(c.2, towards.2),
    )
}

/// The style of the strategy named `name`, for tests that name one.
#[cfg(test)]
pub fn style_of(name: &str) -> Style {
    style(Variant::parse(name).expect("a registry name"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use strategies::registry::STRATEGIES;

    /// Every name `--strategies` accepts: each registry entry with each
    /// remedy combination the registry allows for it.
    fn every_name() -> Vec<String> {
        let mut names = Vec::new();
        for s in STRATEGIES {
            for suffix in ["", "+fallback", "+outbox", "+outbox+fallback"] {
                let name = format!("{}{suffix}", s.name);
                if Variant::parse(&name).is_ok() {
                    names.push(name);
                }
            }
        }
        names
    }

    #[test]
    fn every_registry_entry_has_exactly_one_colour_row() {
        for s in STRATEGIES {
            let rows = BASE_COLORS.iter().filter(|(n, _)| *n == s.name).count();
            assert_eq!(rows, 1, "{} has {rows} rows in BASE_COLORS", s.name);
        }
        for (name, _) in BASE_COLORS {
            assert!(
                STRATEGIES.iter().any(|s| s.name == *name),
                "BASE_COLORS names {name}, which the registry does not have"
            );
        }
    }

    #[test]
    fn no_two_strategies_of_the_registry_look_alike() {
        let names = every_name();
        // The remedies exist: the families below are not vacuous.
        assert!(names.contains(&"redis-zset+outbox+fallback".to_string()));
        assert!(names.len() > STRATEGIES.len());
        // Euclidean distance in RGB; 20 keeps even the closest pair (a
        // teaching variant's remedy next to another's) visibly apart,
        // while a copied row or a remedy shade landing on another
        // strategy's colour fails.
        let distance = |a: RGBColor, b: RGBColor| {
            let d = |x: u8, y: u8| (x as f64 - y as f64).powi(2);
            (d(a.0, b.0) + d(a.1, b.1) + d(a.2, b.2)).sqrt()
        };
        for (i, a) in names.iter().enumerate() {
            for b in &names[i + 1..] {
                let (sa, sb) = (style_of(a), style_of(b));
                assert!(
                    distance(sa.color, sb.color) >= 20.0,
                    "{a} {:?} and {b} {:?} look alike",
                    sa.color,
                    sb.color
                );
            }
        }
    }

    #[test]
    fn remedies_keep_their_base_hue_and_fallbacks_are_dashed() {
        let base = style_of("redis-zset");
        let remedied: Vec<Style> = ["+fallback", "+outbox", "+outbox+fallback"]
            .iter()
            .map(|s| style_of(&format!("redis-zset{s}")))
            .collect();
        // The same hue: the channels keep their order (blue > red > green).
        let order = |c: RGBColor| {
            let mut channels = [(c.0, 'r'), (c.1, 'g'), (c.2, 'b')];
            channels.sort();
            channels.map(|(_, n)| n)
        };
        for r in &remedied {
            assert_eq!(order(r.color), order(base.color), "{r:?} vs {base:?}");
        }
        assert!(!base.dashed && !remedied[1].dashed);
        assert!(remedied[0].dashed && remedied[2].dashed);
        // Suffix order does not matter: the canonical variant decides.
        assert_eq!(
            style_of("redis-zset+fallback+outbox"),
            style_of("redis-zset+outbox+fallback")
        );
    }
}

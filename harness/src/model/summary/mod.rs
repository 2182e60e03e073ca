//! `summary.json`, the source of truth for one strategy's run (its
//! lateness statistics are in [`super::lateness`]). Reports are rendered
//! from these files.
//!
//! [`result`] holds the summary itself, [`cost`] what the run cost,
//! [`spread`] and [`aggregate`] the repetitions folded into one, and
//! [`warnings`] what makes a figure mean less than it reads.

mod aggregate;
mod cost;
mod cpu_spread;
mod result;
mod spread;
mod warnings;

pub use aggregate::{aggregate, figures};
pub use cost::{canceller_rows_method, server_rows_source, Cost, MeasurementCost};
pub use result::{twin_folder, DatabaseInfo, Status, Summary};
pub use spread::{chance_one_in, Spread, MIN_REPETITIONS};
// Code outside builds a summary's repetitions only in tests.
#[cfg(test)]
pub use spread::Repeats;
pub use warnings::warnings;

#[cfg(test)]
mod tests;

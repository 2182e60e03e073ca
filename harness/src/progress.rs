//! Progress that a log can follow as well as a terminal: a plain line as
//! each strategy (or sweep strategy) starts, saying which of how many, the
//! time so far and an estimate of the time left, and, where no progress
//! bar is drawn (CI, output redirected to a file), a line every few
//! seconds while the load runs ([`ticker`]). All on stderr, so stdout stays
//! the tables and the run folder's line for scripts.

use std::time::Duration;
use tokio::time::Instant;

/// How often a log gets a line while the load runs: 10 s, or
/// `DELAYBENCH_PROGRESS_EVERY` (a humantime duration, e.g. `2s`).
pub fn every() -> Duration {
    std::env::var("DELAYBENCH_PROGRESS_EVERY")
        .ok()
        .and_then(|v| humantime::parse_duration(&v).ok())
        .filter(|d| !d.is_zero())
        .unwrap_or(Duration::from_secs(10))
}

/// The stages of one command (the strategies of a run, with their
/// repetitions and twins), counted as they start.
#[derive(Debug)]
pub struct Stages {
    total: usize,
    begun: usize,
    started: Instant,
    /// What one stage should take by the scenario, until one has finished
    /// (`None`: not known before, as a sweep's steps are found as it goes).
    nominal: Option<Duration>,
    /// When the current stage began, and how long the finished ones took.
    current: Option<Instant>,
    finished: Vec<Duration>,
}

impl Stages {
    pub fn new(total: usize, nominal: Option<Duration>) -> Stages {
        Stages {
            total,
            begun: 0,
            started: Instant::now(),
            nominal,
            current: None,
            finished: Vec::new(),
        }
    }

    /// Ends the stage under way (if any) and prints the line of the next.
    pub fn begin(&mut self, what: &str) {
        self.end();
        self.begun += 1;
        self.current = Some(Instant::now());
        eprintln!("delaybench: {}", self.line(what));
    }

    /// Ends the stage under way; its time feeds the estimate.
    pub fn end(&mut self) {
        if let Some(at) = self.current.take() {
            self.finished.push(at.elapsed());
        }
    }

    /// `[2/6] timing-wheel: started; 1m 5s so far, about 3m 15s left`.
    fn line(&self, what: &str) -> String {
        let (per_stage, by) = if self.finished.is_empty() {
            (self.nominal, " (by the scenario's times)")
        } else {
            let mean = self.finished.iter().sum::<Duration>() / self.finished.len() as u32;
            (Some(mean), "")
        };
        let stages_left = (self.total + 1).saturating_sub(self.begun) as u32;
        let left = match per_stage {
            Some(each) => format!("about {} left{by}", short(each * stages_left)),
            None => "time left known once one has finished".into(),
        };
        format!(
            "[{}/{}] {what}: started; {} so far, {left}",
            self.begun,
            self.total,
            short(self.started.elapsed()),
        )
    }
}

/// A duration to the second: `3m 15s`, `42s`.
pub fn short(d: Duration) -> String {
    let secs = d.as_secs();
    match (secs / 3600, secs / 60 % 60, secs % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m {s}s"),
        (h, m, _) => format!("{h}h {m}m"),
    }
}

/// The task printing a load's log lines, stopped when dropped: when the
/// load finishes, and when it ends in an error and is dropped unfinished
/// (a task left running would go on printing through the next strategy).
#[derive(Debug)]
pub struct Ticker(tokio::task::JoinHandle<()>);

impl Drop for Ticker {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Prints `label: pos/len events, elapsed, message` every [`every`] while
/// `bar` (hidden: no terminal) advances, until the [`Ticker`] is dropped.
pub fn ticker(bar: indicatif::ProgressBar, label: String) -> Ticker {
    Ticker(tokio::spawn(async move {
        let period = every();
        let mut tick = tokio::time::interval_at(Instant::now() + period, period);
        loop {
            tick.tick().await;
            let message = bar.message();
            eprintln!(
                "delaybench: {label}: {}/{} events, {}{}",
                bar.position(),
                bar.length().unwrap_or(0),
                short(bar.elapsed()),
                if message.is_empty() {
                    String::new()
                } else {
                    format!(", {message}")
                }
            );
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_uses_the_scenario_then_what_stages_took() {
        let mut stages = Stages::new(3, Some(Duration::from_secs(20)));
        stages.begun = 1;
        let line = stages.line("db-scan");
        assert!(
            line.starts_with("[1/3] db-scan: started; 0s so far"),
            "{line}"
        );
        assert!(
            line.contains("about 1m 0s left (by the scenario's times)"),
            "{line}"
        );
        stages.finished.push(Duration::from_secs(30));
        stages.begun = 2;
        let line = stages.line("db-timer");
        assert!(line.contains("about 1m 0s left"), "{line}");
        assert!(!line.contains("scenario's times"), "{line}");
        assert_eq!(short(Duration::from_secs(3725)), "1h 2m");
        let mut sweep = Stages::new(2, None);
        sweep.begun = 1;
        assert!(sweep
            .line("x")
            .ends_with("time left known once one has finished"));
    }
}

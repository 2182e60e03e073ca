//! `delaybench`: drives one order/payment workload against every delay
//! strategy and reports lateness, cost and invariant violations.

mod backlog;
mod db_stats;
mod driver;
mod faults;
mod instance;
mod model;
mod proxy;
mod redis_stats;
mod report;
mod resources;
mod run;
mod scenario;
mod sweep;
mod workload;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "delaybench",
    version,
    about = "Compare ways of cancelling unpaid orders at their deadline"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the comparison and write results/<run-id>/ with report.md and report.html.
    Run {
        /// Scenario TOML file (default: the bundled quick scenario, scenarios/quick.toml).
        #[arg(long)]
        scenario: Option<PathBuf>,
        /// Comma-separated strategies (default: those needing only the database; the others are listed as skipped, teaching variants are left out).
        #[arg(long)]
        strategies: Option<String>,
        /// Order database: sqlite:// (embedded, default), postgres://user@host/db or mysql://user@host/db.
        #[arg(long, default_value = "sqlite://")]
        db: String,
        /// Folder that receives <run-id>/.
        #[arg(long, default_value = "results")]
        out: PathBuf,
        /// Exit 0 even when a strategy that is not a teaching variant shows an anomaly
        /// (a fault scenario that is meant to break some).
        #[arg(long)]
        allow_anomalies: bool,
        /// Run each strategy N times, interleaved (A B C A B C); reports show the median
        /// and min–max of every figure.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
        repeat: u32,
    },
    /// Find each strategy's highest sustainable order rate, and the ceiling's, in one run.
    Sweep {
        /// Scenario TOML file with a [sweep] table (default: the bundled scenarios/sweep.toml).
        #[arg(long)]
        scenario: Option<PathBuf>,
        /// Comma-separated strategies (default: every strategy that is not a teaching
        /// variant; those whose service is down are reported as skipped). The ceiling always runs first.
        #[arg(long)]
        strategies: Option<String>,
        /// Order database: sqlite:// (embedded, default), postgres://user@host/db or mysql://user@host/db.
        #[arg(long, default_value = "sqlite://")]
        db: String,
        /// Folder that receives <run-id>/.
        #[arg(long, default_value = "results")]
        out: PathBuf,
        /// Run every step N times back to back: a step holds only if all N held, and
        /// the report shows the spread of p99.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
        repeat: u32,
    },
    /// Regenerate report.md and report.html of a run folder from its JSON.
    Report {
        /// A run folder, e.g. results/20261129-201500-quick.
        dir: PathBuf,
    },
    /// Compare two run folders strategy by strategy (markdown on stdout).
    Compare {
        /// The base run, e.g. results/reference/20261130-101701-quick.
        base: PathBuf,
        /// The run compared with it.
        other: PathBuf,
    },
    /// List the strategies and whether each can run.
    List,
    /// Internal: one canceller instance, started by `run`.
    #[command(hide = true)]
    Worker,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run {
                scenario,
                strategies,
                db,
                out,
                allow_anomalies,
                repeat,
            } => {
                let run_dir = run::run(&run::RunArgs {
                    scenario,
                    strategies,
                    db,
                    out,
                    repeat,
                })
                .await?;
                // For scripts: the last line of stdout.
                println!("DELAYBENCH_RUN_DIR={}", run_dir.display());
                let (_, summaries) = report::load(&run_dir)?;
                let problems = run::problems(&summaries, allow_anomalies);
                if problems.is_empty() {
                    Ok(())
                } else {
                    Err(anyhow::anyhow!(
                        "the run is written, but {}; results in {}",
                        problems.join("; "),
                        run_dir.display()
                    ))
                }
            }
            Command::Sweep {
                scenario,
                strategies,
                db,
                out,
                repeat,
            } => {
                let run_dir = sweep::sweep(&sweep::SweepArgs {
                    scenario,
                    strategies,
                    db,
                    out,
                    repeat,
                })
                .await?;
                println!("DELAYBENCH_RUN_DIR={}", run_dir.display());
                let problems = model::sweep::SweepResult::read(&run_dir)?.problems();
                if problems.is_empty() {
                    Ok(())
                } else {
                    Err(anyhow::anyhow!(
                        "the sweep is written, but {}; results in {}",
                        problems.join("; "),
                        run_dir.display()
                    ))
                }
            }
            Command::Report { dir } => {
                report::write(&dir)?;
                if dir.join("sweep.json").exists() {
                    let result = model::sweep::SweepResult::read(&dir)?;
                    println!("{}", report::sweep::terminal_table(&result));
                    println!("report: {}", dir.join("report.md").display());
                    return Ok(());
                }
                let (_, summaries) = report::load(&dir)?;
                println!("{}", report::terminal_table(&summaries));
                println!(
                    "report: {} (plots: {})",
                    dir.join("report.md").display(),
                    dir.join("report.html").display()
                );
                Ok(())
            }
            Command::Compare { base, other } => {
                let comparison = report::compare(&base, &other)?;
                print!("{}", comparison.text);
                if comparison.new_anomalies.is_empty() {
                    Ok(())
                } else {
                    Err(anyhow::anyhow!(
                        "new anomalies in {}",
                        comparison.new_anomalies.join(", ")
                    ))
                }
            }
            Command::List => {
                for s in strategies::registry::STRATEGIES {
                    let needs: Vec<&str> = s.requires.iter().map(|r| r.name()).collect();
                    let needs = if needs.is_empty() {
                        "database".to_string()
                    } else {
                        needs.join(", ")
                    };
                    println!("{:<24} needs {:<10} {}", s.name, needs, s.summary);
                }
                Ok(())
            }
            Command::Worker => instance::worker_main().await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

//! `delaybench`: drives one order/payment workload against every delay
//! strategy and reports lateness, cost and invariant violations.

mod adr;
mod agent;
mod backlog;
mod child;
mod clean;
mod db_stats;
mod doctor;
mod driver;
mod exit;
mod faults;
mod hook;
mod instance;
mod model;
mod presets;
mod probe;
mod progress;
mod proxy;
mod redis_stats;
mod reference;
mod report;
mod resources;
mod run;
mod scenario;
mod scenario_reference;
mod service_args;
mod session;
mod shard;
mod storm;
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
enum ScenarioAction {
    /// The bundled presets, one line each.
    List,
    /// Print a bundled preset, comments included (`show chaos > my-chaos.toml` to edit one).
    Show {
        /// Preset name, e.g. busy.
        name: String,
    },
    /// Write a starting scenario file with every field, its default and what it does.
    Init {
        /// The file to write; it must not exist yet.
        file: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the comparison and write results/<run-id>/ with report.md and report.html.
    Run {
        #[command(flatten)]
        common: run::CommonArgs,
        /// Exit 0 even when a strategy that is not a teaching variant shows an anomaly
        /// (a fault scenario that is meant to break some).
        #[arg(long)]
        allow_anomalies: bool,
        /// Run each strategy N times, interleaved (A B C A B C); lateness percentiles pool
        /// every repetition's samples, and reports show each figure's min–max over them.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
        repeat: u32,
        /// Every column in the terminal table (the report files always have them all).
        #[arg(long)]
        wide: bool,
        #[command(flatten)]
        export: report::export::ExportArgs,
    },
    /// Find each strategy's highest sustainable order rate, and the ceiling's, in one run
    /// (or, with a [backlog] scenario, what each costs holding a big backlog).
    Sweep {
        #[command(flatten)]
        common: run::CommonArgs,
        /// Run every step N times back to back: a step holds only if all N held, and
        /// the report shows the spread of p99.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
        repeat: u32,
        #[command(flatten)]
        export: report::export::ExportArgs,
    },
    /// The bundled scenarios: list them, print one, or write a commented starting file.
    Scenario {
        #[command(subcommand)]
        action: ScenarioAction,
    },
    /// Regenerate report.md and report.html of a run folder from its JSON.
    Report {
        /// A run folder, e.g. results/20261129-201500-quick.
        dir: PathBuf,
        /// Write the reports into this folder instead, leaving DIR as it is: it gets a
        /// copy of DIR's JSON, histograms and scenario (not its SQLite files), then the
        /// reports, so every link in them works.
        #[arg(short = 'o', long, value_name = "FOLDER")]
        out: Option<PathBuf>,
        /// Every column in the terminal table.
        #[arg(long)]
        wide: bool,
        #[command(flatten)]
        export: report::export::ExportArgs,
    },
    /// Write DIR/index.html over the run folders in DIR: a row per run with links to its
    /// reports and each strategy's headline, and the headlines across the runs as plots.
    Index {
        /// A folder of run folders, e.g. results or results/reference.
        #[arg(default_value = "results")]
        dir: PathBuf,
    },
    /// Draft an architecture decision record from run folders and a service-level objective.
    Adr {
        /// Run folders: runs without faults, fault runs (chaos), cluster runs, rate sweeps,
        /// backlog sweeps; any subset, e.g. results/reference/*/.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// The objective and the priority from a TOML file: `objective = "<terms as in
        /// --sla>"`, `prefer = ["services", "lateness", ...]`; --sla and --prefer override it.
        #[arg(long)]
        slo: Option<PathBuf>,
        /// The objective, comma-separated terms: p50|p90|p99|p999|max <= duration,
        /// missed / anomalies = count, paid-after-deadline <= share (1%), max-rate >= orders/s,
        /// recovery <= duration; in sections by condition after `;` (normal:, faults:,
        /// cluster:, capacity:, backlog:; `none`: not judged), the unlabelled section being
        /// the default of every condition without its own. Without it (or --slo), the tool's
        /// example, said so in the draft.
        #[arg(long)]
        sla: Option<String>,
        /// Which of the options that meet the objective to pick, criterion by criterion
        /// (services, lateness, capacity, cpu, faults, recovery), each deciding only on a
        /// difference separated beyond its repetitions' spread; e.g. "services,lateness".
        /// Without it (or --slo), the tool's example.
        #[arg(long)]
        prefer: Option<String>,
        /// The Markdown file to write, MADR-shaped, or a folder to write adr-draft.md in
        /// (as `run -o` takes one); its evidence goes beside it (`<name>-evidence.md`).
        /// Links to the figures are relative to it.
        #[arg(short = 'o', long, default_value = "adr-draft.md")]
        out: PathBuf,
    },
    /// Compare two run folders strategy by strategy (markdown on stdout).
    ///
    /// Exit status: 0; 1 on an error; 2 on folders of different kinds; 4 when OTHER
    /// shows an anomaly BASE had not; 3 with --fail-on-regression when a figure got
    /// worse beyond the spread.
    Compare {
        /// The base run, e.g. a quick run of results/reference/.
        base: PathBuf,
        /// The run compared with it.
        other: PathBuf,
        /// Exit 3 when a figure got worse beyond the spread (up: lateness p50, p90, p99,
        /// p99.9, max and p99 at commit, anomalies, and per cancel the DB statements, attempts,
        /// rows read, broker messages, Redis commands and CPU): with repetitions on both
        /// sides, when the min–max ranges do not overlap; else when it grew by more than
        /// --single-run-threshold.
        #[arg(long)]
        fail_on_regression: bool,
        /// Where a run was not repeated: the rise, in percent of the base's value, beyond
        /// which a figure counts as worse.
        #[arg(long, default_value = "25", value_name = "PERCENT", value_parser = percent)]
        single_run_threshold: f64,
        /// Each strategy's figures side by side with their ratios (other / base).
        #[command(flatten)]
        export: report::export::ExportArgs,
    },
    /// List the strategies, probe the services they need, and say which can run now.
    List {
        #[command(flatten)]
        services: service_args::ServiceArgs,
    },
    /// Check that the services the selected strategies need answer, with the right
    /// version, plugin, privileges and TLS: one line per check, each failure with its fix.
    ///
    /// Exit status: 0 when every selected strategy can run, 1 when one cannot.
    Doctor {
        #[command(flatten)]
        args: doctor::DoctorArgs,
    },
    /// List what earlier runs and tests left on the services (database namespaces,
    /// dlb.* queues and exchanges, dlb:* Redis keys); remove them with --yes.
    Clean {
        #[command(flatten)]
        args: clean::CleanArgs,
    },
    /// Run the reference set at this commit into results/reference (quick, busy,
    /// probe-cost, mixed-timeouts, chaos, the rate sweep, the 1M backlog and the 100k storm; --clusters
    /// adds the cluster presets), then write the READMEs' generated sections and the
    /// draft decision record from it. Resumes a set cut short at the same commit.
    /// `delaybench reference readme` only regenerates the text (`--check`: fail where
    /// the committed text differs).
    Reference {
        #[command(flatten)]
        args: reference::ReferenceArgs,
        #[command(subcommand)]
        then: Option<ReferenceCommand>,
    },
    /// Serve a harness on another host: start canceller instances here when it asks
    /// (the scenario's `[hosts] agents`). The shared secret is read from
    /// DELAYBENCH_AGENT_TOKEN; the connection is plain TCP, so keep it on a private
    /// network or an SSH tunnel.
    Agent {
        /// Address to listen on, e.g. 0.0.0.0:7710.
        #[arg(long, value_name = "ADDR")]
        listen: String,
        /// Tests only: pretend this host's clock is off by this many µs (signed).
        #[arg(long, hide = true, default_value = "0", allow_hyphen_values = true)]
        clock_skew_us: i64,
    },
    /// Internal: forward TCP connections on ADDR to TO (services on loopback reached
    /// from agents on other hosts, as the multi-host test does).
    #[command(hide = true)]
    Forward {
        #[arg(long, value_name = "ADDR")]
        listen: String,
        #[arg(long, value_name = "ADDR")]
        to: String,
    },
    /// Internal: one canceller instance, started by `run`.
    #[command(hide = true)]
    Worker,
    /// Internal: one generator shard, started by an agent.
    #[command(hide = true)]
    Generate,
}

#[derive(Debug, Subcommand)]
enum ReferenceCommand {
    /// Write README.md's answer section, results/reference/README.md and the draft
    /// decision record from the committed set (no run).
    Readme {
        /// Write nothing; fail, naming the file and line, where the committed text
        /// differs from what the folders give (a test runs this).
        #[arg(long)]
        check: bool,
    },
}

fn main() -> ExitCode {
    child::name_this_process();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // lapin logs every refused login or lost connection at ERROR
                // on its own; the commands say it once, with the fix.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,lapin=off")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal: a redirected log stays plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_start(proxy::precise_timers)
        .build()
        .expect("tokio runtime");
    proxy::precise_timers();
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run {
                common,
                allow_anomalies,
                repeat,
                wide,
                export,
            } => {
                let run_dir = interruptible(run::run(&run::RunArgs {
                    common,
                    repeat,
                    wide,
                }))
                .await?;
                // For scripts: the last line of stdout.
                println!("DELAYBENCH_RUN_DIR={}", run_dir.display());
                let (info, summaries) = report::load(&run_dir)?;
                let mut problems = run::problems(&summaries, allow_anomalies);
                // A failed export joins the problems: it must not hide an
                // anomaly's exit code.
                let table = report::export::run_table(&info.run_id, &summaries);
                if let Err(e) = export_table(&export, &table) {
                    problems.failures.push(format!("{e:#}"));
                }
                problems.into_result("run", &run_dir)
            }
            Command::Sweep {
                common,
                repeat,
                export,
            } => {
                let run_dir =
                    interruptible(sweep::sweep(&sweep::SweepArgs { common, repeat })).await?;
                println!("DELAYBENCH_RUN_DIR={}", run_dir.display());
                let result = model::sweep::SweepResult::read(&run_dir)?;
                let mut problems = result.problems();
                if let Err(e) = export_table(&export, &report::export::sweep_table(&result)) {
                    problems.failures.push(format!("{e:#}"));
                }
                problems.into_result("sweep", &run_dir)
            }
            Command::Report {
                dir,
                out,
                wide,
                export,
            } => {
                let dir = match out {
                    Some(out) => {
                        report::copy_folder(&dir, &out)?;
                        out
                    }
                    None => dir,
                };
                report::write(&dir)?;
                if dir.join("sweep.json").exists() {
                    let result = model::sweep::SweepResult::read(&dir)?;
                    println!("{}", report::sweep::terminal_table(&result));
                    println!("{}", report::written_to(&dir));
                    return export_table(&export, &report::export::sweep_table(&result));
                }
                let (info, summaries) = report::load(&dir)?;
                export_table(
                    &export,
                    &report::export::run_table(&info.run_id, &summaries),
                )?;
                println!("{}", report::terminal_table(&summaries, wide));
                println!("{}", report::written_to(&dir));
                Ok(())
            }
            Command::Index { dir } => {
                println!("{}", report::index::write(&dir)?.display());
                Ok(())
            }
            Command::Adr {
                dirs,
                slo,
                sla,
                prefer,
                out,
            } => {
                // A folder (existing, or written with a trailing slash) gets
                // the default file name, as `run -o FOLDER` does.
                let out = if out.is_dir() || out.to_string_lossy().ends_with('/') {
                    std::fs::create_dir_all(&out)?;
                    out.join("adr-draft.md")
                } else {
                    out
                };
                adr::write(&adr::AdrArgs {
                    dirs,
                    slo,
                    sla,
                    prefer,
                    out: out.clone(),
                })?;
                println!(
                    "draft decision record: {} (evidence: {})",
                    out.display(),
                    adr::evidence_path(&out).display()
                );
                Ok(())
            }
            Command::Compare {
                base,
                other,
                fail_on_regression,
                single_run_threshold,
                export,
            } => {
                let options = report::CompareOptions {
                    single_run_threshold: single_run_threshold / 100.0,
                };
                let comparison = report::compare(&base, &other, options)?;
                print!("{}", comparison.text);
                let ((base_info, base_runs), (other_info, other_runs)) =
                    (report::load(&base)?, report::load(&other)?);
                let exported = export_table(
                    &export,
                    &report::export::compare_table(
                        (&base_info.run_id, &base_runs),
                        (&other_info.run_id, &other_runs),
                    ),
                );
                // New anomalies first: a failed export must not hide them.
                if !comparison.new_anomalies.is_empty() {
                    let also = exported
                        .err()
                        .map(|e| format!("; also {e:#}"))
                        .unwrap_or_default();
                    return Err(exit::Anomalous(format!(
                        "new anomalies in {}{also}",
                        comparison.new_anomalies.join(", ")
                    ))
                    .into());
                }
                exported?;
                if fail_on_regression && !comparison.regressions.is_empty() {
                    let listed = report::Regressed(comparison.regressions).to_string();
                    return Err(exit::Regressed(listed).into());
                }
                Ok(())
            }
            Command::Scenario { action } => scenario_command(action),
            Command::List { services } => {
                print!("{}", probe::list(&services).await?);
                Ok(())
            }
            Command::Doctor { args } => {
                let diagnosis = doctor::diagnose(&args).await?;
                print!("{}", diagnosis.text);
                anyhow::ensure!(
                    diagnosis.blocked.is_empty(),
                    "{} selected strategies cannot run here: {} (fixes above)",
                    diagnosis.blocked.len(),
                    diagnosis.blocked.join(", ")
                );
                Ok(())
            }
            Command::Clean { args } => {
                print!("{}", clean::clean(&args).await?);
                Ok(())
            }
            Command::Reference { args, then } => match then {
                Some(ReferenceCommand::Readme { check: true }) => {
                    reference::readme::check_all(&args.out, &args.readme)?;
                    println!(
                        "{} and {} match the reference set",
                        args.readme.display(),
                        args.out.join("README.md").display()
                    );
                    Ok(())
                }
                Some(ReferenceCommand::Readme { check: false }) => {
                    reference::readme::write_all(&args.out, &args.readme)?;
                    println!(
                        "wrote {}, {} and the draft decision record from the reference set",
                        args.readme.display(),
                        args.out.join("README.md").display()
                    );
                    Ok(())
                }
                None => interruptible(reference::reference(&args)).await,
            },
            Command::Agent {
                listen,
                clock_skew_us,
            } => agent::agent_main(&listen, clock_skew_us).await,
            Command::Forward { listen, to } => agent::forward_main(&listen, &to).await,
            Command::Worker => instance::worker_main().await,
            Command::Generate => shard::generate_main().await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            exit::code_of(&e)
        }
    }
}

/// Writes the `--export-*` files asked for, and says where (stderr: stdout
/// ends with the run folder's line for scripts).
fn export_table(
    args: &report::export::ExportArgs,
    table: &report::export::ExportTable,
) -> anyhow::Result<()> {
    for path in report::export::write(args, table)? {
        eprintln!("delaybench: exported {}", path.display());
    }
    Ok(())
}

/// A percentage for `--single-run-threshold`: `25` or `25%`, not negative.
fn percent(text: &str) -> Result<f64, String> {
    let number = text.trim().trim_end_matches('%');
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "`{text}` is not a percentage (a number from 0 up, e.g. 25 or 25%)"
        )),
    }
}

/// Runs `work` until it ends or the process is asked to stop (Ctrl-C,
/// SIGTERM): then `work` is dropped, so the strategy under way tears down
/// (its queues and Redis keys go; see `strategies::leftovers::TeardownGuard`)
/// and its workers are killed, before the error is returned.
async fn interruptible<T>(
    work: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    let stop = async {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            match signal(SignalKind::terminate()) {
                Ok(mut term) => tokio::select! {
                    _ = tokio::signal::ctrl_c() => "interrupted",
                    _ = term.recv() => "terminated",
                },
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    "interrupted"
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "interrupted"
        }
    };
    tokio::select! {
        done = work => done,
        why = stop => {
            eprintln!("delaybench: {why}; tearing down the strategy under way");
            Err(anyhow::anyhow!(
                "{why}: the run folder holds what finished; `delaybench clean` lists anything left"
            ))
        }
    }
}

/// `delaybench scenario list | show | init`.
fn scenario_command(action: ScenarioAction) -> anyhow::Result<()> {
    match action {
        ScenarioAction::List => {
            let width = presets::PRESETS
                .iter()
                .map(|p| p.name.len())
                .max()
                .unwrap_or(0);
            for preset in presets::PRESETS {
                let (s, _) = scenario::Scenario::load(Some(preset.name), preset.name)?;
                println!("{:<width$}  {}", preset.name, s.description);
            }
            println!("\n`delaybench scenario show NAME` prints one; `--scenario NAME` runs it from any folder.");
            Ok(())
        }
        ScenarioAction::Show { name } => {
            let preset = presets::find(&name).ok_or_else(|| {
                anyhow::anyhow!("no preset {name}; presets: {}", presets::names())
            })?;
            print!("{}", preset.text);
            Ok(())
        }
        ScenarioAction::Init { file } => {
            use std::io::Write;
            let mut out = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&file)
                .map_err(|e| {
                    anyhow::anyhow!(
                        "cannot create {}: {e} (init never overwrites a file)",
                        file.display()
                    )
                })?;
            out.write_all(scenario_reference::starting_file().as_bytes())?;
            println!(
                "wrote {}; run it with `delaybench run --scenario {}`",
                file.display(),
                file.display()
            );
            Ok(())
        }
    }
}

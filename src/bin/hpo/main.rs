//! `hpo`: look at studies, plot them, export them.
//!
//! Every subcommand reads a study through a storage URL (`sqlite:study.db`,
//! the same URL the study was created with) and works on studies written by
//! hpo and by Optuna alike. Nothing here writes to the database it reads:
//! all opening goes through [`open::open_read_only`]; only `hpo copy` writes,
//! and only to its destination.
//!
//! Errors are one line on stderr (exit status 1; 2 for a command line clap
//! rejects), never show a password from a URL, and study data (names,
//! parameters, attributes) is treated as untrusted: escaped for the terminal
//! and for HTML.

mod copy;
mod error;
mod importance;
mod open;
mod plot;
mod report;
mod show;
mod study;
mod watch;

use crate::error::{CliError, Result};
use crate::show::Format;
use clap::{Parser, Subcommand};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Look at hpo and Optuna studies: list, inspect, watch, plot, export.
#[derive(Debug, Parser)]
#[command(name = "hpo", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Every study: name, directions, trials by state, best value, last activity.
    Studies {
        /// Storage URL, e.g. `sqlite:study.db` or `sqlite:////abs/study.db`.
        url: String,
    },
    /// The trials of a study: params, values, duration, OOM retries, peak memory, failure.
    Trials {
        /// Storage URL.
        url: String,
        /// Study name.
        study: String,
        /// Only trials in this state (complete, pruned, fail, running, waiting).
        #[arg(long)]
        state: Option<String>,
        /// Sort order.
        #[arg(long, value_enum, default_value = "number")]
        sort: SortKey,
        /// Show at most N trials.
        #[arg(long)]
        limit: Option<usize>,
        /// Output format.
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
    /// The best trial (the Pareto front for several objectives), params as JSON.
    Best {
        /// Storage URL.
        url: String,
        /// Study name.
        study: String,
    },
    /// A live view of a study, refreshed until interrupted (read-only).
    Watch {
        /// Storage URL.
        url: String,
        /// Study name.
        study: String,
        /// Seconds between refreshes.
        #[arg(long, default_value_t = 2.0)]
        interval: f64,
        /// Print one view and exit (for scripts and tests).
        #[arg(long)]
        once: bool,
    },
    /// Every trial with all its data, as CSV or JSON on stdout.
    Export {
        /// Storage URL.
        url: String,
        /// Study name.
        study: String,
        /// Output format.
        #[arg(long, value_enum, default_value = "json")]
        format: ExportFormat,
    },
    /// Copies a study (every trial, attribute and intermediate value) to another storage,
    /// with its artifacts (the files its trials stored).
    ///
    /// The artifacts go from the folder beside SRC's SQLite file
    /// (`study.db.artifacts`) to the folder beside DST's; a PostgreSQL storage
    /// has no such folder, so name it with `--artifacts-from` / `--artifacts-to`.
    /// Without a source store the study is copied alone.
    Copy {
        /// Storage URL to read from.
        src: String,
        /// Storage URL to write to (the study must not exist there).
        dst: String,
        /// Study name.
        study: String,
        /// Artifact store to copy the files from (a folder or `file://` URL).
        #[arg(long, value_name = "PATH")]
        artifacts_from: Option<String>,
        /// Artifact store to copy the files to (a folder or `file://` URL).
        #[arg(long, value_name = "PATH")]
        artifacts_to: Option<String>,
    },
    /// Draws one plot of a study as SVG.
    Plot {
        /// Storage URL.
        url: String,
        /// Study name.
        study: String,
        /// Which plot.
        #[arg(value_enum)]
        kind: plot::Kind,
        /// SVG file to write.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Parameter importance (PED-ANOVA, as Optuna's `PedAnovaImportanceEvaluator`).
    Importance {
        /// Storage URL.
        url: String,
        /// Study name.
        study: String,
        /// Output format (`table` or `json`; `csv` gives `param,importance` rows).
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
    /// One self-contained HTML page: summary, best trial, every plot.
    Report {
        /// Storage URL.
        url: String,
        /// Study name.
        study: String,
        /// HTML file to write.
        #[arg(short, long)]
        output: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum SortKey {
    /// By trial number.
    Number,
    /// Best value first.
    Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ExportFormat {
    /// Comma-separated values.
    Csv,
    /// JSON with the study and every trial.
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let line = study::clean(&e.to_string());
            let _ = writeln!(std::io::stderr(), "error: {line}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Studies { url } => {
            let storage = open::open_read_only(&url)?;
            print(&show::studies(storage.as_ref(), &url)?)
        }
        Command::Trials {
            url,
            study,
            state,
            sort,
            limit,
            format,
        } => {
            let state = state
                .map(|s| {
                    study::parse_state(&s).ok_or_else(|| {
                        CliError::Usage(format!(
                            "unknown trial state `{s}`; use complete, pruned, fail, running or waiting"
                        ))
                    })
                })
                .transpose()?;
            let storage = open::open_read_only(&url)?;
            let data = open::load_study(storage.as_ref(), &url, &study)?;
            let q = show::TrialsQuery {
                state,
                by_value: sort == SortKey::Value,
                limit,
                format,
            };
            print(&show::trials(&data, &q))
        }
        Command::Best { url, study } => {
            let storage = open::open_read_only(&url)?;
            let data = open::load_study(storage.as_ref(), &url, &study)?;
            match show::best(&data) {
                Some(s) => print(&s),
                None => Err(CliError::Usage(format!(
                    "study `{}` has no complete trial yet",
                    data.name
                ))),
            }
        }
        Command::Watch {
            url,
            study,
            interval,
            once,
        } => watch::run(&url, &study, interval, once),
        Command::Export { url, study, format } => {
            let storage = open::open_read_only(&url)?;
            let data = open::load_study(storage.as_ref(), &url, &study)?;
            let format = match format {
                ExportFormat::Csv => Format::Csv,
                ExportFormat::Json => Format::Json,
            };
            print(&show::export(&data, format))
        }
        Command::Copy {
            src,
            dst,
            study,
            artifacts_from,
            artifacts_to,
        } => {
            let places = copy::ArtifactPlaces {
                from: artifacts_from,
                to: artifacts_to,
            };
            let copied = copy::copy(&src, &dst, &study, &places)?;
            print(&format!(
                "copied study `{}` ({} trials) to {}; {}\n",
                study::clean(&study),
                copied.trials,
                open::redact(&dst),
                copied.artifacts
            ))
        }
        Command::Plot {
            url,
            study,
            kind,
            output,
        } => {
            let storage = open::open_read_only(&url)?;
            let data = open::load_study(storage.as_ref(), &url, &study)?;
            let svg = plot::draw(&data, kind)?;
            write_file(&output, svg.as_bytes())
        }
        Command::Importance { url, study, format } => {
            let storage = open::open_read_only(&url)?;
            let data = open::load_study(storage.as_ref(), &url, &study)?;
            let top = importance::top_count(&data);
            if top < 5 {
                let _ = writeln!(
                    std::io::stderr(),
                    "note: only {top} complete trial(s) in the top 10%; the ranking is unstable below 5"
                );
            }
            print(&importance::render(&importance::importances(&data), format))
        }
        Command::Report { url, study, output } => {
            let storage = open::open_read_only(&url)?;
            let data = open::load_study(storage.as_ref(), &url, &study)?;
            let html = report::render(&data)?;
            write_file(&output, html.as_bytes())
        }
    }
}

fn print(s: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        // `hpo trials ... | head` closes the pipe early: not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(source) => Err(CliError::Write {
            path: PathBuf::from("-"),
            source,
        }),
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a
/// failed write never leaves half a file.
fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let err = |source| CliError::Write {
        path: path.to_owned(),
        source,
    };
    // A temporary file of its own in the same folder, renamed over the
    // target: readers never see half a file, and two commands writing at
    // once do not share a temporary name.
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".hpo-write-")
        .tempfile_in(dir)
        .map_err(err)?;
    std::io::Write::write_all(&mut tmp, bytes).map_err(err)?;
    tmp.persist(path).map_err(|e| err(e.error))?;
    Ok(())
}

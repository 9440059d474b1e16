//! The command's one error type: every failure is one line on stderr.

use std::path::PathBuf;

/// What went wrong, worded for the person at the terminal.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The URL names a SQLite file that does not exist.
    #[error("no study database at `{0}`: the file does not exist (check the path in the URL)")]
    MissingFile(PathBuf),
    /// The file exists but holds no study database.
    #[error("`{path}` is not a study database: {reason}")]
    NotAStudyDatabase {
        /// The file.
        path: PathBuf,
        /// What it is instead.
        reason: String,
    },
    /// No study of that name; the names that exist are listed.
    #[error("no study named `{name}` in {url}; {}", existing_names(.existing))]
    StudyNotFound {
        /// The name asked for.
        name: String,
        /// The URL, password removed.
        url: String,
        /// The studies that do exist.
        existing: Vec<String>,
    },
    /// A command-line value that cannot be used.
    #[error("{0}")]
    Usage(String),
    /// The storage failed (message already has its password removed).
    #[error("{0}")]
    Storage(String),
    /// Writing an output file or the terminal failed.
    #[error("cannot write `{path}`: {source}")]
    Write {
        /// The file (or `-` for stdout).
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Drawing a plot failed.
    #[error("cannot draw the {kind} plot: {reason}")]
    Plot {
        /// Which plot.
        kind: String,
        /// Why.
        reason: String,
    },
}

fn existing_names(names: &[String]) -> String {
    if names.is_empty() {
        "the database holds no study".to_owned()
    } else {
        let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
        format!("studies there: {}", quoted.join(", "))
    }
}

/// The command's result type.
pub type Result<T, E = CliError> = std::result::Result<T, E>;

//! The data flags of a text-classification experiment, as a clap argument
//! group the experiment flattens into its own, and the [`Splits`] they load.

use super::splits::Splits;
use crate::data::TsvSpec;
use crate::error::Result;
use std::path::{Path, PathBuf};

/// `--data`, `--positive`, `--validation`, `--test` and `--train-limit`:
/// which labelled texts a study trains, validates and tests on.
///
/// ```
/// use clap::Parser;
/// use hpo_burn::experiment::DataArgs;
///
/// #[derive(Parser)]
/// struct Args {
///     #[command(flatten)]
///     data: DataArgs,
/// }
/// let args = Args::try_parse_from(["x", "--data", "news.tsv", "--test", "0.2"]).unwrap();
/// assert_eq!(args.data.test, 0.2);
/// ```
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct DataArgs {
    /// A TSV with columns `text`, `label` and optionally `criterion`
    /// [default: the experiment's shipped data].
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// The label that means "matches the criterion", every other label
    /// being the other class [default: the shipped data's; with `--data`,
    /// every label is a class of its own].
    #[arg(long)]
    pub positive: Option<String>,
    /// Fraction of the data held out for validation (stratified); trials
    /// are scored on it.
    #[arg(long, default_value_t = 0.1)]
    pub validation: f64,
    /// Fraction of the data held out as a test split (stratified, split off
    /// first); no trial sees it, only the best trial is scored on it.
    #[arg(long, default_value_t = 0.1)]
    pub test: f64,
    /// Train on at most this many examples (0 = all) [default: the
    /// experiment's].
    #[arg(long)]
    pub train_limit: Option<usize>,
}

impl DataArgs {
    /// The splits these flags ask for, deterministic in `seed`: `--data`
    /// read with [`TsvSpec::auto`], or else the experiment's `shipped` file
    /// read with `spec`; `--positive` applies to either. The training split
    /// is capped at `--train-limit`, or `train_limit` when it is not given.
    /// The coordinator says what it loaded (worker processes load the same
    /// data silently).
    pub fn load(
        &self,
        shipped: &Path,
        spec: TsvSpec,
        train_limit: usize,
        seed: u64,
    ) -> Result<Splits> {
        let (path, spec) = match &self.data {
            Some(path) => (path.as_path(), TsvSpec::auto()),
            None => (shipped, spec),
        };
        let spec = match &self.positive {
            Some(label) => spec.with_positive(label),
            None => spec,
        };
        let limit = self.train_limit.unwrap_or(train_limit);
        let splits = Splits::load(path, &spec, self.test, self.validation, limit, seed)?;
        if !hpo_core::executor::is_worker() {
            println!("data: {} ({})", path.display(), splits.describe());
        }
        Ok(splits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Args {
        #[command(flatten)]
        data: DataArgs,
    }

    fn tsv(tag: &str, rows: &[(&str, &str)]) -> PathBuf {
        let path =
            std::env::temp_dir().join(format!("hpo-data-args-{tag}-{}.tsv", std::process::id()));
        let mut text = String::from("text\tlabel\n");
        for (t, l) in rows {
            text.push_str(&format!("{t}\t{l}\n"));
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    fn rows() -> Vec<(String, &'static str)> {
        (0..60)
            .map(|i| (format!("text number {i}"), ["neg", "pos", "neu"][i % 3]))
            .collect()
    }

    #[test]
    fn the_shipped_file_with_its_positive_label_unless_flags_say_otherwise() {
        let rows = rows();
        let rows: Vec<(&str, &str)> = rows.iter().map(|(t, l)| (t.as_str(), *l)).collect();
        let shipped = tsv("shipped", &rows);
        let spec = || TsvSpec::single("text", "label").with_positive("neg");
        let parse = |argv: &[&str]| Args::try_parse_from(["x"].iter().chain(argv)).unwrap().data;
        let default = parse(&[]).load(&shipped, spec(), 30, 7).unwrap();
        assert_eq!(default.train.classes.len(), 2, "neg against the rest");
        assert_eq!(default.train.examples.len(), 30, "the experiment's limit");
        assert_eq!(default.test.examples.len(), 6);
        let other = parse(&["--positive", "pos", "--train-limit", "0", "--test", "0.2"])
            .load(&shipped, spec(), 30, 7)
            .unwrap();
        assert_eq!(other.train.classes.len(), 2);
        assert_eq!(other.test.examples.len(), 12);
        assert!(other.train.examples.len() > 30, "no limit");
        // --data: every label a class of its own.
        let path = shipped.to_str().unwrap();
        let all = parse(&["--data", path]).load(Path::new("/nowhere"), spec(), 0, 7);
        assert_eq!(all.unwrap().train.classes.len(), 3);
        let bad = parse(&["--test", "0.95"]).load(&shipped, spec(), 0, 7);
        assert!(bad.unwrap_err().to_string().contains("must be fractions"));
        let missing = parse(&["--data", "/no/such.tsv"]).load(&shipped, spec(), 0, 7);
        assert!(missing.unwrap_err().to_string().contains("/no/such.tsv"));
        let _ = std::fs::remove_file(&shipped);
    }
}

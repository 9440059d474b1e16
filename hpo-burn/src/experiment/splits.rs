//! An experiment's data, split once by seed: a test split no trial sees,
//! a validation split that scores trials, and the training split (capped,
//! to keep a CPU study within minutes).

use crate::data::{load_tsv, Dataset, Text, TsvSpec};
use crate::error::{Error, Result};
use std::path::Path;

/// The three splits of one experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct Splits {
    /// What trials train on.
    pub train: Dataset,
    /// What trials are scored on.
    pub valid: Dataset,
    /// Held out: no trial sees it; the best trial is scored on it after the
    /// study.
    pub test: Dataset,
}

impl Splits {
    /// Loads `path` with `spec` and splits it, stratified by class and
    /// deterministic in `seed`: `test` of it first, then `validation` of
    /// the whole from the rest; the training split is then subsampled
    /// (stratified) to at most `train_limit` examples (0: no limit).
    pub fn load(
        path: &Path,
        spec: &TsvSpec,
        test: f64,
        validation: f64,
        train_limit: usize,
        seed: u64,
    ) -> Result<Splits> {
        Splits::of(load_tsv(path, spec)?, test, validation, train_limit, seed)
    }

    /// [`Splits::load`] on data already loaded.
    pub fn of(
        data: Dataset,
        test: f64,
        validation: f64,
        train_limit: usize,
        seed: u64,
    ) -> Result<Splits> {
        if !(0.0..1.0).contains(&(test + validation)) || test <= 0.0 || validation <= 0.0 {
            return Err(Error::Data(format!(
                "test ({test}) and validation ({validation}) must be fractions above 0 \
                 that leave data to train on"
            )));
        }
        let (rest, test_split) = data.split_stratified(test, seed)?;
        let (mut train, valid) = rest.split_stratified(validation / (1.0 - test), seed)?;
        if train_limit > 0 && train.examples.len() > train_limit {
            let frac = 1.0 - train_limit as f64 / train.examples.len() as f64;
            train = train.split_stratified(frac, seed)?.0;
        }
        Ok(Splits {
            train,
            valid,
            test: test_split,
        })
    }

    /// One line for people: sizes and classes.
    pub fn describe(&self) -> String {
        format!(
            "{} train, {} validation, {} test; classes {:?}",
            self.train.examples.len(),
            self.valid.examples.len(),
            self.test.examples.len(),
            self.train.classes
        )
    }

    /// Writes the splits to `dir/{train,validation,test}.tsv` (columns
    /// `text`, `label`, and `criterion` first for sentence pairs), each to a
    /// temporary file renamed into place, so a reader never sees half a
    /// split: the exact data, to give another tool.
    pub fn write_tsv(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        for (name, data) in [
            ("train", &self.train),
            ("validation", &self.valid),
            ("test", &self.test),
        ] {
            let pairs = data
                .examples
                .iter()
                .any(|e| matches!(e.text, Text::Pair { .. }));
            let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
            let mut tsv = String::from(if pairs {
                "criterion\ttext\tlabel\n"
            } else {
                "text\tlabel\n"
            });
            for e in &data.examples {
                let label = data.classes.get(e.label).ok_or_else(|| {
                    Error::Data(format!("{name}: label {} has no class name", e.label))
                })?;
                tsv.push_str(&match &e.text {
                    Text::Single(text) if pairs => format!("\t{}\t{label}\n", clean(text)),
                    Text::Single(text) => format!("{}\t{label}\n", clean(text)),
                    Text::Pair { criterion, text } => {
                        format!("{}\t{}\t{label}\n", clean(criterion), clean(text))
                    }
                });
            }
            let path = dir.join(format!("{name}.tsv"));
            let part = dir.join(format!(".{name}.tsv.part"));
            std::fs::write(&part, tsv).map_err(|e| Error::io(&part, e))?;
            std::fs::rename(&part, &path).map_err(|e| Error::io(&path, e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::data::Example;

    fn data(n: usize) -> Dataset {
        Dataset {
            examples: (0..n)
                .map(|i| Example {
                    text: Text::Single(format!("text {i}")),
                    label: i % 2,
                })
                .collect(),
            classes: vec!["a".into(), "b".into()],
        }
    }

    #[test]
    fn splits_are_disjoint_stratified_and_capped() {
        let s = Splits::of(data(200), 0.1, 0.1, 50, 3).unwrap();
        assert_eq!(s.test.examples.len(), 20);
        assert_eq!(s.valid.examples.len(), 20);
        assert_eq!(s.train.examples.len(), 50);
        let texts = |d: &Dataset| -> Vec<String> {
            d.examples
                .iter()
                .map(|e| match &e.text {
                    Text::Single(t) => t.clone(),
                    Text::Pair { text, .. } => text.clone(),
                })
                .collect()
        };
        let test = texts(&s.test);
        assert!(texts(&s.train).iter().all(|t| !test.contains(t)));
        assert!(texts(&s.valid).iter().all(|t| !test.contains(t)));
        assert_eq!(
            Splits::of(data(200), 0.1, 0.1, 50, 3).unwrap(),
            s,
            "deterministic"
        );
        assert!(s.describe().starts_with("50 train, 20 validation, 20 test"));
    }

    #[test]
    fn fractions_that_leave_nothing_to_train_on_are_refused() {
        for (test, valid) in [(0.0, 0.1), (0.5, 0.5), (0.1, -0.1)] {
            let e = Splits::of(data(100), test, valid, 0, 1)
                .unwrap_err()
                .to_string();
            assert!(e.contains("must be fractions above 0"), "{e}");
        }
    }
}

//! Labelled text data: a TSV loader and a stratified train/validation split.
//!
//! A data file is tab-separated with a header naming its columns. Each row is
//! either a single text or a (criterion, text) pair, with a string label.
//! Labels map to class indices either in sorted order or, with a positive
//! label, as a binary "matches / does not match" task. Every malformed row
//! is reported with its line number and what was wrong; nothing is skipped
//! silently.

use crate::error::{Error, Result};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeSet;
use std::path::Path;

/// The input of one example.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Text {
    /// A single text (segment 0).
    Single(String),
    /// A (criterion, text) pair: criterion in segment 0, text in segment 1.
    Pair {
        /// The criterion or question.
        criterion: String,
        /// The text judged against it.
        text: String,
    },
}

/// One labelled example.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    /// Its input.
    pub text: Text,
    /// Class index into [`Dataset::classes`].
    pub label: usize,
}

/// Labelled examples and the names of their classes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dataset {
    /// The examples, in file order.
    pub examples: Vec<Example>,
    /// Class names; `label` indexes this.
    pub classes: Vec<String>,
}

/// Which columns of a TSV file to read and how to map labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TsvSpec {
    /// Column holding the text.
    pub text: String,
    /// Column holding the criterion of a pair, if any.
    pub criterion: Option<String>,
    /// Whether a missing criterion column is an error (`false`: the file is
    /// read as single texts when it has no such column).
    pub criterion_required: bool,
    /// Column holding the label.
    pub label: String,
    /// If set, a binary task: this label is class 1, every other label class 0.
    pub positive: Option<String>,
}

impl TsvSpec {
    /// Single texts from `text` with labels from `label`.
    pub fn single(text: &str, label: &str) -> Self {
        TsvSpec {
            text: text.into(),
            criterion: None,
            criterion_required: false,
            label: label.into(),
            positive: None,
        }
    }

    /// (criterion, text) pairs.
    pub fn pair(criterion: &str, text: &str, label: &str) -> Self {
        TsvSpec {
            criterion: Some(criterion.into()),
            criterion_required: true,
            ..TsvSpec::single(text, label)
        }
    }

    /// Columns `text` and `label`, plus `criterion` when the file has one:
    /// what `--data FILE.tsv` reads.
    pub fn auto() -> Self {
        TsvSpec {
            criterion: Some("criterion".into()),
            criterion_required: false,
            ..TsvSpec::single("text", "label")
        }
    }

    /// Makes the task binary with `label` as the positive class.
    pub fn with_positive(mut self, label: &str) -> Self {
        self.positive = Some(label.into());
        self
    }
}

/// Reads a TSV file as described by `spec`.
pub fn load_tsv(path: impl AsRef<Path>, spec: &TsvSpec) -> Result<Dataset> {
    let path = path.as_ref();
    let content = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    parse_tsv(&content, spec, path)
}

/// Parses TSV content (see [`load_tsv`]); `path` is only used in messages.
pub fn parse_tsv(content: &str, spec: &TsvSpec, path: &Path) -> Result<Dataset> {
    let err = |line: usize, message: String| Error::Tsv {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut lines = content.lines().enumerate();
    let header: Vec<&str> = match lines.next() {
        Some((_, h)) => h.trim_end_matches('\r').split('\t').collect(),
        None => return Err(err(1, "empty file: expected a header line".into())),
    };
    let column = |name: &str| header.iter().position(|c| c.trim() == name);
    let missing = |name: &str| {
        err(
            1,
            format!(
                "header has no column {name:?} (columns: {})",
                header.join(", ")
            ),
        )
    };
    let text_col = column(&spec.text).ok_or_else(|| missing(&spec.text))?;
    let label_col = column(&spec.label).ok_or_else(|| missing(&spec.label))?;
    let criterion_col = match &spec.criterion {
        Some(name) => match column(name) {
            Some(i) => Some(i),
            None if spec.criterion_required => return Err(missing(name)),
            None => None,
        },
        None => None,
    };

    let mut rows = Vec::new();
    for (i, raw) in lines {
        let line_no = i + 1;
        let line = raw.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() != header.len() {
            return Err(err(
                line_no,
                format!(
                    "expected {} tab-separated fields as in the header, found {}",
                    header.len(),
                    fields.len()
                ),
            ));
        }
        let text = fields[text_col].trim();
        if text.is_empty() {
            return Err(err(line_no, format!("empty {:?}", spec.text)));
        }
        let label = fields[label_col].trim();
        if label.is_empty() {
            return Err(err(line_no, format!("empty label column {:?}", spec.label)));
        }
        let text = match criterion_col {
            Some(c) => {
                let criterion = fields[c].trim();
                if criterion.is_empty() {
                    return Err(err(line_no, "empty criterion".into()));
                }
                Text::Pair {
                    criterion: criterion.into(),
                    text: text.into(),
                }
            }
            None => Text::Single(text.into()),
        };
        rows.push((text, label.to_string()));
    }
    if rows.is_empty() {
        return Err(err(1, "no data rows after the header".into()));
    }

    let classes: Vec<String> = match &spec.positive {
        Some(pos) => {
            if !rows.iter().any(|(_, l)| l == pos) {
                return Err(Error::Data(format!(
                    "{}: no row has the positive label {pos:?}",
                    path.display()
                )));
            }
            vec![format!("not {pos}"), pos.clone()]
        }
        None => rows
            .iter()
            .map(|(_, l)| l.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
    };
    if classes.len() < 2 {
        return Err(Error::Data(format!(
            "{}: only one label ({:?}); a classifier needs at least two",
            path.display(),
            classes.first().map(String::as_str).unwrap_or("")
        )));
    }
    let examples = rows
        .into_iter()
        .map(|(text, l)| {
            let label = match &spec.positive {
                Some(pos) => usize::from(&l == pos),
                None => classes.iter().position(|c| *c == l).unwrap_or(0),
            };
            Example { text, label }
        })
        .collect();
    Ok(Dataset { examples, classes })
}

impl Dataset {
    /// Number of examples per class.
    pub fn class_counts(&self) -> Vec<usize> {
        let mut counts = vec![0; self.classes.len()];
        for e in &self.examples {
            counts[e.label] += 1;
        }
        counts
    }

    /// Splits into (train, validation), stratified by class and deterministic
    /// in `seed`: each class contributes `round(n * validation_fraction)`
    /// examples (at least one when it has two or more) to validation. Both
    /// parts keep file order.
    pub fn split_stratified(&self, validation_fraction: f64, seed: u64) -> Result<(Self, Self)> {
        if !(validation_fraction > 0.0 && validation_fraction < 1.0) {
            return Err(Error::Data(format!(
                "validation fraction {validation_fraction} must be in (0, 1)"
            )));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut in_validation = vec![false; self.examples.len()];
        for class in 0..self.classes.len() {
            let mut idx: Vec<usize> = (0..self.examples.len())
                .filter(|&i| self.examples[i].label == class)
                .collect();
            idx.shuffle(&mut rng);
            let mut k = (idx.len() as f64 * validation_fraction).round() as usize;
            if idx.len() >= 2 {
                k = k.clamp(1, idx.len() - 1);
            } else {
                k = 0;
            }
            for &i in &idx[..k] {
                in_validation[i] = true;
            }
        }
        let pick = |want: bool| Dataset {
            examples: self
                .examples
                .iter()
                .zip(&in_validation)
                .filter(|(_, v)| **v == want)
                .map(|(e, _)| e.clone())
                .collect(),
            classes: self.classes.clone(),
        };
        let (train, valid) = (pick(false), pick(true));
        if train.examples.is_empty() || valid.examples.is_empty() {
            return Err(Error::Data(format!(
                "{} examples are too few to split into train and validation",
                self.examples.len()
            )));
        }
        Ok((train, valid))
    }

    /// The first `n` examples of each class in file order (for quick runs).
    pub fn take_per_class(&self, n: usize) -> Self {
        let mut seen = vec![0usize; self.classes.len()];
        let examples = self
            .examples
            .iter()
            .filter(|e| {
                seen[e.label] += 1;
                seen[e.label] <= n
            })
            .cloned()
            .collect();
        Dataset {
            examples,
            classes: self.classes.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str, spec: &TsvSpec) -> Result<Dataset> {
        parse_tsv(s, spec, Path::new("x.tsv"))
    }

    #[test]
    fn single_texts_with_sorted_classes() {
        let d = parse(
            "id\tlabel\ttext\n1\tpos\tgood\n2\tneg\tbad\n3\tneu\tmeh\n",
            &TsvSpec::auto(),
        )
        .unwrap();
        assert_eq!(d.classes, ["neg", "neu", "pos"]);
        assert_eq!(d.examples[0].label, 2);
        assert_eq!(d.examples[1].text, Text::Single("bad".into()));
    }

    #[test]
    fn binary_with_positive_label_and_pairs() {
        let d = parse(
            "criterion\ttext\tlabel\nsad?\tI cry\tneg\nsad?\tyay\tpos\n",
            &TsvSpec::auto().with_positive("neg"),
        )
        .unwrap();
        assert_eq!(d.classes, ["not neg", "neg"]);
        assert_eq!(d.examples[0].label, 1);
        assert!(matches!(d.examples[1].text, Text::Pair { .. }));
    }

    #[test]
    fn errors_name_line_and_problem() {
        let spec = TsvSpec::auto();
        let e = parse("text\tlabel\nok\tpos\nbroken line\n", &spec)
            .unwrap_err()
            .to_string();
        assert!(e.contains("x.tsv:3") && e.contains("found 1"), "{e}");
        let e = parse("text\tlabel\nok\tpos\n\tneg\n", &spec)
            .unwrap_err()
            .to_string();
        assert!(e.contains(":3") && e.contains("empty \"text\""), "{e}");
        let e = parse("txt\tlabel\n", &spec).unwrap_err().to_string();
        assert!(e.contains(":1") && e.contains("no column \"text\""), "{e}");
        let e = parse("text\tlabel\na\tpos\nb\tpos\n", &spec)
            .unwrap_err()
            .to_string();
        assert!(e.contains("only one label"), "{e}");
        let e = parse(
            "text\tlabel\na\tpos\n",
            &TsvSpec::pair("criterion", "text", "label"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("no column \"criterion\""), "{e}");
    }

    #[test]
    fn stratified_split_is_deterministic_and_balanced() {
        let mut s = String::from("text\tlabel\n");
        for i in 0..100 {
            s.push_str(&format!(
                "t{i}\t{}\n",
                if i % 4 == 0 { "neg" } else { "pos" }
            ));
        }
        let d = parse(&s, &TsvSpec::auto()).unwrap();
        let (t1, v1) = d.split_stratified(0.2, 7).unwrap();
        let (t2, v2) = d.split_stratified(0.2, 7).unwrap();
        let (_, v3) = d.split_stratified(0.2, 8).unwrap();
        assert_eq!((t1.clone(), v1.clone()), (t2, v2));
        assert_ne!(v1, v3);
        assert_eq!(v1.class_counts(), vec![5, 15]);
        assert_eq!(t1.examples.len() + v1.examples.len(), 100);
    }
}

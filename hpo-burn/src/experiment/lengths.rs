//! Sequence lengths sized from the data: token lengths at percentiles of the
//! training texts, so that a space's length choices mean the same thing on
//! tweets and on news articles.

use crate::error::{Error, Result};
use crate::task::TextTask;

fn config(message: String) -> Error {
    Error::Core(hpo_core::Error::InvalidConfig(message))
}

/// The cap of a task without a checkpoint: BERT's positions.
const FROM_SCRATCH_CAP: usize = 512;

/// Lengths are rounded up to a multiple of this (fewer distinct shapes for
/// the device's kernels, no length that ends mid-word by a token or two).
const ROUND_TO: usize = 8;

/// Token lengths at percentiles of a task's training texts (special tokens
/// included), each rounded up to a multiple of 8 and capped by what the
/// model can take.
///
/// ```
/// use hpo_burn::experiment::Lengths;
/// let l = Lengths::from_counts(&[10, 12, 30, 31, 70], &[50, 99], 64).unwrap();
/// assert_eq!(l.tokens(50), Some(32));
/// assert_eq!(l.tokens(99), Some(64)); // 70 tokens, capped at 64
/// assert_eq!(l.tokens(90), None);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Lengths {
    /// `(percentile, tokens)`, in the order asked for.
    pub at: Vec<(u32, usize)>,
    /// The cap: the model's longest sequence.
    pub cap: usize,
    /// How many training texts they were measured on.
    pub texts: usize,
    /// The longest training text in tokens, before the cap.
    pub longest: usize,
}

impl Lengths {
    /// The lengths at `percentiles` (each in 1..=100) of `task`'s training
    /// texts as its tokenizer counts them, capped at `cap` tokens.
    pub fn of(task: &TextTask, percentiles: &[u32], cap: usize) -> Result<Self> {
        Self::from_counts(task.train_token_lengths()?, percentiles, cap)
    }

    /// [`Lengths::of`] capped by what the task's model can take: its
    /// checkpoint's positions, or BERT's 512 for a model made from scratch.
    pub fn for_task(task: &TextTask, percentiles: &[u32]) -> Result<Self> {
        let cap = task
            .checkpoint
            .as_ref()
            .map_or(FROM_SCRATCH_CAP, |c| c.max_len());
        Self::of(task, percentiles, cap)
    }

    /// The same from token counts already made (nearest-rank percentiles).
    pub fn from_counts(counts: &[usize], percentiles: &[u32], cap: usize) -> Result<Self> {
        if counts.is_empty() {
            return Err(Error::Data("no training texts to size lengths from".into()));
        }
        if cap == 0 {
            return Err(config("the length cap must be at least one token".into()));
        }
        let mut sorted = counts.to_vec();
        sorted.sort_unstable();
        let mut at = Vec::with_capacity(percentiles.len());
        for &p in percentiles {
            if !(1..=100).contains(&p) {
                return Err(config(format!("length percentile {p}: expected 1..=100")));
            }
            // Nearest rank: the smallest count at or above p% of the texts.
            let rank = (p as usize * sorted.len()).div_ceil(100).max(1);
            let raw = sorted[rank - 1].max(1);
            at.push((p, raw.div_ceil(ROUND_TO).saturating_mul(ROUND_TO).min(cap)));
        }
        Ok(Self {
            at,
            cap,
            texts: sorted.len(),
            longest: sorted[sorted.len() - 1],
        })
    }

    /// The length at percentile `p`, if it was asked for.
    pub fn tokens(&self, p: u32) -> Option<usize> {
        self.at.iter().find(|(q, _)| *q == p).map(|&(_, n)| n)
    }

    /// One line for a study's start-up and its recorded space, such as
    /// `length_pct 50 -> 24 tokens, 90 -> 40, 99 -> 56 (percentiles of 1200
    /// training texts' token lengths, longest 71, capped at 512)`.
    pub fn describe(&self, name: &str) -> String {
        let list: Vec<String> = self
            .at
            .iter()
            .enumerate()
            .map(|(i, (p, n))| {
                if i == 0 {
                    format!("{p} -> {n} tokens")
                } else {
                    format!("{p} -> {n}")
                }
            })
            .collect();
        format!(
            "{name} {} (percentiles of {} training texts' token lengths, rounded up to a \
             multiple of {ROUND_TO}, longest {}, capped at {})",
            list.join(", "),
            self.texts,
            self.longest,
            self.cap
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank_rounded_up_and_capped() {
        let counts: Vec<usize> = (1..=100).collect();
        let l = Lengths::from_counts(&counts, &[50, 90, 99, 100], 96).unwrap();
        assert_eq!(l.at, vec![(50, 56), (90, 96), (99, 96), (100, 96)]);
        assert_eq!((l.texts, l.longest, l.cap), (100, 100, 96));
        let one = Lengths::from_counts(&[3], &[1, 100], 512).unwrap();
        assert_eq!(one.at, vec![(1, 8), (100, 8)]);
        // Unsorted input, a text of zero tokens still gets a length.
        let l = Lengths::from_counts(&[0, 40, 9], &[1, 50], 512).unwrap();
        assert_eq!(l.at, vec![(1, 8), (50, 16)]);
    }

    #[test]
    fn bad_input_is_refused_by_name() {
        let e = Lengths::from_counts(&[], &[50], 64)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no training texts"), "{e}");
        let e = Lengths::from_counts(&[5], &[0], 64)
            .unwrap_err()
            .to_string();
        assert!(e.contains("percentile 0"), "{e}");
        let e = Lengths::from_counts(&[5], &[101], 64)
            .unwrap_err()
            .to_string();
        assert!(e.contains("percentile 101"), "{e}");
        let e = Lengths::from_counts(&[5], &[50], 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cap"), "{e}");
    }

    #[test]
    fn the_line_says_what_was_chosen_and_why() {
        let l = Lengths::from_counts(&[10, 20, 30, 40, 700], &[50, 90], 512).unwrap();
        assert_eq!(
            l.describe("length_pct"),
            "length_pct 50 -> 32 tokens, 90 -> 512 (percentiles of 5 training texts' token \
             lengths, rounded up to a multiple of 8, longest 700, capped at 512)"
        );
    }
}

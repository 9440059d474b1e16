//! A progress bar for [`Study::optimize_with`](crate::Study::optimize_with)
//! (feature `progress`, on by default).
//!
//! Opt-in: pass [`bar`] as a callback. It shows trials done, the best value
//! so far and, with a trial budget, an ETA; under a timeout, the time left.
//! When stdout is not a terminal (CI logs, pipes) it draws nothing.
//!
//! ```
//! use hpo::{Direction, Optimize, Study};
//! use std::time::Duration;
//!
//! # fn main() -> hpo::Result<()> {
//! let study = Study::builder().direction(Direction::Minimize).build()?;
//! let opts = Optimize::new()
//!     .trials(20)
//!     .timeout(Duration::from_secs(60))
//!     .callback(hpo::progress::bar(Some(20), Some(Duration::from_secs(60))));
//! study.optimize_with(opts, |trial| {
//!     let x = trial.suggest_float("x", -10.0, 10.0)?;
//!     Ok((x - 2.0).powi(2))
//! })?;
//! # Ok(())
//! # }
//! ```

use crate::{Direction, FrozenTrial, Study, TrialState};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A callback for [`Optimize::callback`](crate::Optimize::callback) that
/// draws a progress bar on stderr while stdout is a terminal.
///
/// `trials` is the trial budget (for the bar and the ETA), `timeout` the
/// time budget (shown as time left); give the values passed to
/// [`Optimize`](crate::Optimize). To leave the bar cleanly when a study is
/// interrupted, keep a [`Bar`] instead.
pub fn bar(
    trials: Option<u64>,
    timeout: Option<Duration>,
) -> impl Fn(&Study, &FrozenTrial) + Send + Sync + 'static {
    Bar::new(trials, timeout).callback()
}

/// The progress bar of [`bar`], kept by its owner: its [`Bar::callback`]
/// advances it, and [`Bar::abandon`] leaves it where it stands when a
/// signal stops the study (a terminal has echoed `^C` into its line), so
/// that what is printed next starts on a line of its own.
#[derive(Clone)]
pub struct Bar {
    pb: ProgressBar,
    trials: Option<u64>,
    timeout: Option<Duration>,
    state: Arc<Mutex<Progress>>,
}

impl Bar {
    /// A bar for `trials` trials (the ETA) and a `timeout` (time left), as
    /// [`bar`] takes them.
    pub fn new(trials: Option<u64>, timeout: Option<Duration>) -> Bar {
        let target = if std::io::stdout().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let pb = match trials {
            Some(n) => ProgressBar::with_draw_target(Some(n), target),
            None => ProgressBar::with_draw_target(None, target),
        };
        let template = if trials.is_some() {
            "{bar:30} {pos}/{len} trials  eta {eta}  {msg}"
        } else {
            "{spinner} {pos} trials  {elapsed}  {msg}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            pb.set_style(style);
        }
        Bar {
            pb,
            trials,
            timeout,
            state: Arc::new(Mutex::new(Progress {
                best: None,
                started: Instant::now(),
            })),
        }
    }

    /// The callback that advances the bar after each finished trial.
    pub fn callback(&self) -> impl Fn(&Study, &FrozenTrial) + Send + Sync + 'static {
        let bar = self.clone();
        move |study: &Study, trial: &FrozenTrial| bar.advance(study, trial)
    }

    /// Leaves the bar as it stands and moves below it.
    pub fn abandon(&self) {
        self.pb.abandon();
    }

    fn advance(&self, study: &Study, trial: &FrozenTrial) {
        self.pb.inc(1);
        let Ok(mut s) = self.state.lock() else { return };
        if trial.state == TrialState::Complete {
            if let (Some(v), Some(dir)) = (trial.value(), study.directions().first()) {
                let better = match (s.best, dir) {
                    (None, _) => true,
                    (Some(b), Direction::Minimize) => v < b,
                    (Some(b), Direction::Maximize) => v > b,
                };
                if better && !v.is_nan() {
                    s.best = Some(v);
                }
            }
        }
        self.pb
            .set_message(message(s.best, self.timeout, s.started.elapsed()));
        if self.trials.is_some_and(|n| self.pb.position() >= n) {
            self.pb.finish();
        }
    }
}

struct Progress {
    best: Option<f64>,
    started: Instant,
}

fn message(best: Option<f64>, timeout: Option<Duration>, elapsed: Duration) -> String {
    let mut m = match best {
        Some(b) => format!("best {b:.6}"),
        None => "no complete trial yet".to_owned(),
    };
    if let Some(t) = timeout {
        let left = t.saturating_sub(elapsed).as_secs();
        m.push_str(&format!("  {}m{:02}s left", left / 60, left % 60));
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_shows_best_and_time_left() {
        assert_eq!(message(None, None, Duration::ZERO), "no complete trial yet");
        assert_eq!(
            message(
                Some(0.5),
                Some(Duration::from_secs(125)),
                Duration::from_secs(3)
            ),
            "best 0.500000  2m02s left"
        );
    }
}

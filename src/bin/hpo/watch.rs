//! `hpo watch URL STUDY`: a live view of a study.
//!
//! Each refresh is a read of the storage (the same reads a sampler does
//! before each trial); nothing is written and no transaction is held between
//! refreshes, so watching never blocks or slows the workers.

use crate::error::Result;
use crate::open::{load_study, open_read_only, StudyData};
use crate::show::count;
use crate::study::{self, clean, STATES};
use chrono::{DateTime, Utc};
use hpo::TrialState;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::time::Duration;

/// Runs the view until interrupted (or once).
pub fn run(url: &str, name: &str, interval: f64, once: bool) -> Result<()> {
    let storage = open_read_only(url)?;
    let pause = Duration::from_secs_f64(interval.clamp(0.2, 3600.0));
    let tty = std::io::stdout().is_terminal();
    loop {
        let data = load_study(storage.as_ref(), url, name)?;
        let view = render(&data, Utc::now());
        let mut out = std::io::stdout().lock();
        // Clear the screen and go home on a terminal; plain frames otherwise.
        let frame = if tty && !once {
            format!("\x1b[2J\x1b[H{view}")
        } else {
            view
        };
        if out
            .write_all(frame.as_bytes())
            .and_then(|()| out.flush())
            .is_err()
        {
            return Ok(());
        }
        if once {
            return Ok(());
        }
        drop(out);
        std::thread::sleep(pause);
    }
}

/// One frame of the view.
pub fn render(data: &StudyData, now: DateTime<Utc>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "study {}  ({} trials)  {}",
        clean(&data.name),
        data.trials.len(),
        now.format("%Y-%m-%d %H:%M:%S UTC")
    );
    let states: Vec<String> = STATES
        .iter()
        .map(|st| format!("{} {}", st.as_str().to_lowercase(), count(data, *st)))
        .collect();
    let _ = writeln!(s, "trials: {}", states.join("  "));
    match study::best_trial(data).filter(|_| data.directions.len() == 1) {
        Some(b) => {
            let _ = writeln!(
                s,
                "best: {} (trial {})",
                b.value().map(study::short).unwrap_or_default(),
                b.number
            );
        }
        None if data.directions.len() > 1 => {
            let _ = writeln!(s, "pareto front: {} trials", study::best_trials(data).len());
        }
        None => {
            let _ = writeln!(s, "best: - (no complete trial yet)");
        }
    }
    let _ = writeln!(s, "throughput: {}", throughput(data, now));
    let running: Vec<_> = data
        .trials
        .iter()
        .filter(|t| t.state == TrialState::Running)
        .collect();
    let _ = writeln!(s, "running ({}):", running.len());
    for t in running {
        let elapsed = t
            .datetime_start
            .map(|d| study::span((now - d).num_milliseconds() as f64 / 1000.0))
            .unwrap_or_else(|| "?".into());
        let step = t
            .last_intermediate()
            .map(|(st, v)| format!("step {st}: {}", study::short(v)))
            .unwrap_or_else(|| "no step reported".into());
        let _ = writeln!(s, "  trial {}  {elapsed}  {step}", t.number);
    }
    let failures: Vec<_> = data
        .trials
        .iter()
        .filter(|t| t.state == TrialState::Fail)
        .rev()
        .take(5)
        .collect();
    let _ = writeln!(
        s,
        "recent failures ({} in all):",
        count(data, TrialState::Fail)
    );
    for t in failures {
        let _ = writeln!(
            s,
            "  trial {}  {}",
            t.number,
            clean(&study::failure(t).unwrap_or_default())
        );
    }
    let _ = writeln!(s, "device memory: {}", device_memory());
    s
}

/// Finished trials per hour over the last hour (or since the first start,
/// if the study is younger).
fn throughput(data: &StudyData, now: DateTime<Utc>) -> String {
    let Some(first) = data.trials.iter().filter_map(|t| t.datetime_start).min() else {
        return "-".into();
    };
    let window_start = first.max(now - chrono::Duration::hours(1));
    let hours = (now - window_start).num_milliseconds() as f64 / 3_600_000.0;
    let done = data
        .trials
        .iter()
        .filter(|t| t.state.is_finished())
        .filter(|t| t.datetime_complete.is_some_and(|c| c >= window_start))
        .count();
    if hours <= 0.0 {
        return "-".into();
    }
    format!("{:.1} trials/hour", done as f64 / hours)
}

#[cfg(feature = "cuda")]
fn device_memory() -> String {
    match hpo::burn::memory::device_memory(0) {
        Ok(m) => format!(
            "GPU 0: {} used of {}",
            study::bytes(m.used as f64),
            study::bytes(m.total as f64)
        ),
        Err(e) => format!("unavailable ({e})"),
    }
}

#[cfg(not(feature = "cuda"))]
fn device_memory() -> String {
    "not shown (this build has no NVML; install with `--features cuda`)".into()
}

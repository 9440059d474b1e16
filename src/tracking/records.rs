//! What MLflow receives: a trial as a run, a study's counts as the parent
//! run's metrics. Pure functions of the stored records.

use super::rest::{Batch, Metric};
use crate::cli::{state_label, Summary};
use crate::executor::{
    ACCUMULATION_ATTR, DEVICE_ATTR, ESTIMATE_BYTES_ATTR, MICRO_BATCH_ATTR, OOM_RETRIES_ATTR,
    PEAK_BYTES_ATTR, PEAK_RSS_ATTR, PREDICTED_BYTES_ATTR, RESERVED_BYTES_ATTR,
};
use crate::{FrozenTrial, TrialState};
use std::sync::Arc;

/// The metric holding every intermediate value, at its step.
pub(crate) const INTERMEDIATE: &str = "intermediate_value";

/// MLflow's limits on a param's and a tag's value, in characters (6000
/// and 8000 on MLflow 3); longer text is cut to fit, with a mark.
const PARAM_MAX: usize = 6000;
const TAG_MAX: usize = 5000;

/// Milliseconds since the epoch, now.
pub(crate) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// `key` with what MLflow refuses in keys (anything but letters, digits,
/// `_ - . / ` and space) replaced by `_`.
pub(crate) fn key(key: &str) -> String {
    key.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_-./ ".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max - 3).collect();
    out.push_str("...");
    out
}

/// The run's status for a trial's state.
pub(crate) fn status(t: &FrozenTrial) -> &'static str {
    match t.state {
        TrialState::Complete => "FINISHED",
        TrialState::Pruned => "KILLED",
        TrialState::Fail => "FAILED",
        _ => "RUNNING",
    }
}

/// The tags a trial's run is created with.
pub(crate) fn trial_tags(study: &str, t: &FrozenTrial, parent: &str) -> Vec<(String, String)> {
    let mut tags = vec![
        ("mlflow.parentRunId".to_owned(), parent.to_owned()),
        ("hpo.study".to_owned(), study.to_owned()),
        ("hpo.trial_number".to_owned(), t.number.to_string()),
    ];
    tags.push(("hpo.state".to_owned(), state_label(t).to_owned()));
    if let Some(kind) = t.failure() {
        tags.push(("hpo.failure".to_owned(), kind.as_str().to_owned()));
    }
    if let Some(reason) = t.fail_reason() {
        tags.push(("hpo.fail_reason".to_owned(), cut(reason, TAG_MAX)));
    }
    if let Some(device) = t.system_attrs.get(DEVICE_ATTR) {
        tags.push(("hpo.device".to_owned(), device.to_string()));
    }
    tags
}

/// Everything logged on a trial's run besides its tags: parameters,
/// intermediate values at their steps, final values and the executor's
/// figures.
pub(crate) fn trial_batch(t: &FrozenTrial) -> Batch {
    let end = t
        .datetime_complete
        .map_or_else(now_ms, |d| d.timestamp_millis());
    let params = t
        .params()
        .iter()
        .map(|(k, v)| (key(k), cut(&v.to_string(), PARAM_MAX)))
        .collect();
    let point = |k: &str, value: f64, step: u64| Metric {
        key: k.to_owned(),
        value,
        timestamp: end,
        step,
    };
    // JSON has no NaN or infinity: such points are left out.
    let mut metrics: Vec<Metric> = t
        .intermediate_values
        .iter()
        .filter(|(_, v)| v.is_finite())
        .map(|(s, v)| point(INTERMEDIATE, *v, *s))
        .collect();
    match t.values.as_deref() {
        Some([v]) => metrics.push(point("value", *v, 0)),
        Some(vs) => {
            for (i, v) in vs.iter().enumerate() {
                metrics.push(point(&format!("value_{i}"), *v, 0));
            }
        }
        None => {}
    }
    if let Some(d) = t.duration() {
        metrics.push(point("duration_s", d.as_secs_f64(), 0));
    }
    for (attr, name) in [
        (MICRO_BATCH_ATTR, "micro_batch"),
        (ACCUMULATION_ATTR, "accumulation"),
        (OOM_RETRIES_ATTR, "oom_retries"),
        (PEAK_BYTES_ATTR, "peak_bytes"),
        (PEAK_RSS_ATTR, "peak_rss_bytes"),
        (ESTIMATE_BYTES_ATTR, "estimate_bytes"),
        (RESERVED_BYTES_ATTR, "reserved_bytes"),
        (PREDICTED_BYTES_ATTR, "predicted_bytes"),
    ] {
        if let Some(v) = t.system_attrs.get(attr).and_then(|v| v.as_f64()) {
            metrics.push(point(name, v, 0));
        }
    }
    // Numeric user attributes (accuracy, F1, ...), under their own names.
    for (k, v) in &t.user_attrs {
        if let Some(x) = v.as_f64().filter(|x| x.is_finite()) {
            metrics.push(point(&format!("user_attrs.{}", key(k)), x, 0));
        }
    }
    metrics.retain(|m| m.value.is_finite());
    Batch {
        metrics,
        params,
        tags: Vec::new(),
    }
}

/// The parent run's metrics after `trials`: counts by kind of end, OOM
/// relaunches and the best value, at the step of the number ended.
pub(crate) fn study_metrics(
    trials: &[Arc<FrozenTrial>],
    single: Option<crate::Direction>,
) -> Vec<Metric> {
    let summary = Summary::of(trials, false);
    let count = |label: &str| summary.states.get(label).copied().unwrap_or(0);
    let ended = trials.iter().filter(|t| t.state.is_finished()).count();
    let fails = trials
        .iter()
        .filter(|t| t.state == TrialState::Fail)
        .count();
    let (oom, infeasible) = (count("oom"), count("infeasible"));
    let now = now_ms();
    let point = |k: &str, value: f64| Metric {
        key: k.to_owned(),
        value,
        timestamp: now,
        step: ended as u64,
    };
    let mut out = vec![
        point("trials_ended", ended as f64),
        point("complete", count("complete") as f64),
        point("pruned", count("pruned") as f64),
        point("failed", (fails - oom - infeasible) as f64),
        point("oom", oom as f64),
        point("infeasible", infeasible as f64),
        point("oom_relaunches", summary.oom_relaunches as f64),
    ];
    if let Some(dir) = single {
        let best = trials
            .iter()
            .filter(|t| t.state == TrialState::Complete)
            .filter_map(|t| t.value())
            .reduce(|a, b| if dir.is_better(b, a) { b } else { a });
        if let Some(b) = best {
            out.push(point("best_value", b));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Direction, FailureKind, FloatDistribution};
    use serde_json::Value;

    fn trial(number: u64, state: TrialState) -> FrozenTrial {
        let mut t = FrozenTrial::new(number, number, state);
        let start = chrono::Utc::now();
        t.datetime_start = Some(start);
        t.datetime_complete = Some(start + chrono::Duration::milliseconds(1500));
        t
    }

    #[test]
    fn a_trial_run_has_every_intermediate_value_at_its_step() {
        let mut t = trial(3, TrialState::Complete);
        t.values = Some(vec![0.25]);
        t.internal_params.insert("lr rate(%)".into(), 0.5);
        t.distributions.insert(
            "lr rate(%)".into(),
            FloatDistribution::new(0.0, 1.0).unwrap().into(),
        );
        for (s, v) in [(0, 0.9), (1, 0.5), (2, f64::NAN), (7, 0.25)] {
            t.intermediate_values.insert(s, v);
        }
        t.system_attrs
            .insert(MICRO_BATCH_ATTR.into(), Value::from(8));
        t.system_attrs
            .insert(ACCUMULATION_ATTR.into(), Value::from(4));
        t.system_attrs
            .insert(PEAK_BYTES_ATTR.into(), Value::from(1u64 << 30));
        t.user_attrs.insert("f1".into(), Value::from(0.75));
        t.user_attrs.insert("note".into(), Value::from("text"));
        let b = trial_batch(&t);
        assert_eq!(b.params, vec![("lr rate___".to_owned(), "0.5".to_owned())]);
        let steps: Vec<(u64, f64)> = b
            .metrics
            .iter()
            .filter(|m| m.key == INTERMEDIATE)
            .map(|m| (m.step, m.value))
            .collect();
        assert_eq!(steps, vec![(0, 0.9), (1, 0.5), (7, 0.25)], "NaN left out");
        let get = |k: &str| b.metrics.iter().find(|m| m.key == k).map(|m| m.value);
        assert_eq!(get("value"), Some(0.25));
        assert_eq!(get("micro_batch"), Some(8.0));
        assert_eq!(get("accumulation"), Some(4.0));
        assert_eq!(get("peak_bytes"), Some((1u64 << 30) as f64));
        assert_eq!(get("duration_s"), Some(1.5));
        assert_eq!(get("user_attrs.f1"), Some(0.75));
        assert_eq!(get("user_attrs.note"), None);
        assert_eq!(status(&t), "FINISHED");
    }

    #[test]
    fn a_failed_trial_carries_its_reason_cut_to_fit() {
        let mut t = trial(5, TrialState::Fail);
        let long = "x".repeat(20_000);
        for (k, v) in FailureKind::Oom.attrs(long) {
            t.system_attrs.insert(k, v);
        }
        let tags = trial_tags("s", &t, "parent");
        let get = |k: &str| {
            tags.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(get("mlflow.parentRunId").as_deref(), Some("parent"));
        assert_eq!(get("hpo.trial_number").as_deref(), Some("5"));
        assert_eq!(get("hpo.state").as_deref(), Some("oom"));
        assert_eq!(get("hpo.failure").as_deref(), Some("oom"));
        let reason = get("hpo.fail_reason").unwrap();
        assert_eq!(reason.chars().count(), TAG_MAX);
        assert!(reason.ends_with("..."));
        assert_eq!(status(&t), "FAILED");
        assert!(trial_batch(&t).metrics.iter().all(|m| m.key != "value"));
    }

    #[test]
    fn the_parent_counts_each_kind_of_end_and_the_best_value() {
        let mut ts = Vec::new();
        for (i, v) in [(0, 3.0), (1, 1.0), (2, 2.0)] {
            let mut t = trial(i, TrialState::Complete);
            t.values = Some(vec![v]);
            ts.push(t);
        }
        ts.push(trial(3, TrialState::Pruned));
        let mut oom = trial(4, TrialState::Fail);
        oom.system_attrs
            .extend(FailureKind::Oom.attrs("out of memory"));
        ts.push(oom);
        let mut relaunched = trial(5, TrialState::Fail);
        relaunched
            .system_attrs
            .extend(FailureKind::Infeasible.attrs("too big"));
        relaunched
            .system_attrs
            .insert(OOM_RETRIES_ATTR.into(), Value::from(1));
        ts.push(relaunched);
        let mut err = trial(6, TrialState::Fail);
        err.system_attrs.extend(FailureKind::Error.attrs("bad"));
        ts.push(err);
        ts.push(trial(7, TrialState::Running));
        let ts: Vec<_> = ts.into_iter().map(Arc::new).collect();
        let m = study_metrics(&ts, Some(Direction::Minimize));
        let get = |k: &str| m.iter().find(|p| p.key == k).map(|p| p.value);
        assert_eq!(get("trials_ended"), Some(7.0));
        assert_eq!(get("complete"), Some(3.0));
        assert_eq!(get("pruned"), Some(1.0));
        assert_eq!(get("oom"), Some(1.0));
        assert_eq!(get("infeasible"), Some(1.0));
        assert_eq!(get("failed"), Some(1.0));
        assert_eq!(get("oom_relaunches"), Some(1.0));
        assert_eq!(get("best_value"), Some(1.0));
        assert!(m.iter().all(|p| p.step == 7));
        let max = study_metrics(&ts, Some(Direction::Maximize));
        assert_eq!(
            max.iter().find(|p| p.key == "best_value").map(|p| p.value),
            Some(3.0)
        );
        assert!(study_metrics(&ts, None)
            .iter()
            .all(|p| p.key != "best_value"));
    }
}

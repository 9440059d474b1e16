//! Facts derived from a loaded study: best trials, columns, formatted cells.

use crate::open::StudyData;
use hpo::{Direction, FrozenTrial, ParamValue, TrialState};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The states in display order.
pub const STATES: [TrialState; 5] = [
    TrialState::Complete,
    TrialState::Pruned,
    TrialState::Fail,
    TrialState::Running,
    TrialState::Waiting,
];

/// Parses a state name as typed on the command line (any case).
pub fn parse_state(s: &str) -> Option<TrialState> {
    s.to_ascii_uppercase().parse().ok()
}

/// Whether `a` is a better value than `b` under `dir`.
pub fn better(dir: Direction, a: f64, b: f64) -> bool {
    match dir {
        Direction::Minimize => a < b,
        Direction::Maximize => a > b,
    }
}

/// The best complete trial of a single-objective study.
pub fn best_trial(study: &StudyData) -> Option<Arc<FrozenTrial>> {
    let dir = *study.directions.first()?;
    let mut best: Option<(f64, &Arc<FrozenTrial>)> = None;
    for t in complete(study) {
        let Some(v) = t.values.as_ref().and_then(|v| v.first().copied()) else {
            continue;
        };
        if v.is_nan() {
            continue;
        }
        if best.is_none_or(|(b, _)| better(dir, v, b)) {
            best = Some((v, t));
        }
    }
    best.map(|(_, t)| Arc::clone(t))
}

/// The Pareto front of the complete trials (one trial per best value for a
/// single objective), by trial number.
pub fn best_trials(study: &StudyData) -> Vec<Arc<FrozenTrial>> {
    if study.directions.len() <= 1 {
        return best_trial(study).into_iter().collect();
    }
    let dirs = &study.directions;
    let pts: Vec<(&Arc<FrozenTrial>, &Vec<f64>)> = complete(study)
        .filter_map(|t| Some((t, t.values.as_ref().filter(|v| v.len() == dirs.len())?)))
        .collect();
    let dominates = |a: &[f64], b: &[f64]| {
        let mut strictly = false;
        for ((x, y), d) in a.iter().zip(b).zip(dirs) {
            if better(*d, *y, *x) {
                return false;
            }
            strictly |= better(*d, *x, *y);
        }
        strictly
    };
    pts.iter()
        .filter(|(_, v)| !pts.iter().any(|(_, w)| dominates(w, v)))
        .map(|(t, _)| Arc::clone(t))
        .collect()
}

/// The complete trials.
pub fn complete(study: &StudyData) -> impl Iterator<Item = &Arc<FrozenTrial>> {
    study
        .trials
        .iter()
        .filter(|t| t.state == TrialState::Complete)
}

/// Every parameter name used by any trial, sorted.
pub fn param_names(study: &StudyData) -> Vec<String> {
    let names: BTreeSet<&String> = study
        .trials
        .iter()
        .flat_map(|t| t.distributions.keys())
        .collect();
    names.into_iter().cloned().collect()
}

/// A number of bytes in binary units.
pub fn bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = b;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < UNITS.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{x:.0} {}", UNITS[u])
    } else {
        format!("{x:.1} {}", UNITS[u])
    }
}

/// A number as Python would print it (shortest round-trip form).
pub fn num(x: f64) -> String {
    hpo::distribution::python_float_repr(x)
}

/// A number for people: 4 significant digits (`0.004865`), as criteria's
/// trial lines print them; [`num`] keeps every digit for machines.
pub fn short(x: f64) -> String {
    hpo::distribution::significant(x, hpo::distribution::PEOPLE_DIGITS)
}

/// A user attribute as a number, if it is one.
pub fn attr_f64(t: &FrozenTrial, key: &str) -> Option<f64> {
    t.user_attrs.get(key).and_then(Value::as_f64)
}

/// The measured peak memory of a trial, and which figure it is: the device
/// allocator's peak (`peak_device_bytes`, hpo-burn on a GPU), else the peak
/// resident memory of the trial's process (`peak_rss_bytes`, the CPU), else
/// (records from before measured device peaks) NVML's whole-device usage at
/// the trial's end (`device_used_bytes`).
pub fn measured_peak_with_source(t: &FrozenTrial) -> Option<(f64, &'static str)> {
    attr_f64(t, "peak_device_bytes")
        .map(|b| (b, "device"))
        .or_else(|| attr_f64(t, "peak_rss_bytes").map(|b| (b, "RSS")))
        .or_else(|| attr_f64(t, "device_used_bytes").map(|b| (b, "device in use at end")))
}

/// The measured peak memory of a trial ([`measured_peak_with_source`]).
pub fn measured_peak(t: &FrozenTrial) -> Option<f64> {
    measured_peak_with_source(t).map(|(b, _)| b)
}

/// The estimated peak memory recorded for a trial.
pub fn estimated_peak(t: &FrozenTrial) -> Option<f64> {
    attr_f64(t, "estimated_peak_bytes")
}

/// OOM retries of a trial: the recorded count, else the length of its retry
/// history.
pub fn oom_retries(t: &FrozenTrial) -> Option<u64> {
    t.user_attrs
        .get("oom_retries")
        .and_then(Value::as_u64)
        .or_else(|| {
            t.system_attrs
                .get(hpo::trial::RETRY_HISTORY_ATTR)
                .and_then(Value::as_array)
                .map(|a| a.len() as u64)
        })
}

/// Why a failed trial failed: `kind: reason`.
pub fn failure(t: &FrozenTrial) -> Option<String> {
    if t.state != TrialState::Fail {
        return None;
    }
    match (t.failure(), t.fail_reason()) {
        (Some(k), Some(r)) => Some(format!("{k}: {r}")),
        (Some(k), None) => Some(k.to_string()),
        (None, Some(r)) => Some(r.to_owned()),
        (None, None) => Some("unknown".to_owned()),
    }
}

/// A parameter value for a table cell: strings bare (no quotes), numbers
/// and other choices as printed.
pub fn param_cell(v: &ParamValue) -> String {
    match v.as_choice().and_then(|c| c.as_str()) {
        Some(s) => s.to_owned(),
        None => v.to_string(),
    }
}

/// A trial's objective values, `, `-separated, each written by `format`
/// ([`num`] for machines, [`short`] for people); empty when it has none.
pub fn values_text(t: &FrozenTrial, format: fn(f64) -> String) -> String {
    t.values
        .iter()
        .flatten()
        .map(|v| format(*v))
        .collect::<Vec<_>>()
        .join(", ")
}

/// [`param_cell`] for people: floats to 4 significant digits.
pub fn param_short(v: &ParamValue) -> String {
    match v.as_choice().and_then(|c| c.as_str()) {
        Some(s) => s.to_owned(),
        None => v.to_short_string(),
    }
}

/// A duration in seconds, short: `42s`, `3m05s`, `28h10m`.
pub fn span(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// A parameter value as JSON.
pub fn param_json(v: &ParamValue) -> Value {
    v.to_json_value()
}

/// One trial as a JSON object with everything the storage holds.
pub fn trial_json(t: &FrozenTrial) -> Value {
    let params: Map<String, Value> = t
        .params()
        .iter()
        .map(|(k, v)| (k.clone(), param_json(v)))
        .collect();
    let intermediate: Map<String, Value> = t
        .intermediate_values
        .iter()
        .map(|(s, v)| (s.to_string(), finite_json(*v)))
        .collect();
    json!({
        "number": t.number,
        "state": t.state.as_str(),
        "values": t.values.as_ref().map(|v| v.iter().map(|x| finite_json(*x)).collect::<Vec<_>>()),
        "params": params,
        "datetime_start": t.datetime_start.map(|d| d.to_rfc3339()),
        "datetime_complete": t.datetime_complete.map(|d| d.to_rfc3339()),
        "duration_s": t.duration().map(|d| d.as_secs_f64()),
        "oom_retries": oom_retries(t),
        "peak_memory_bytes": measured_peak(t),
        "peak_memory_source": measured_peak_with_source(t).map(|(_, s)| s),
        "failure": failure(t),
        "intermediate_values": intermediate,
        "user_attrs": t.user_attrs,
    })
}

/// A float as JSON: non-finite values as strings (`"inf"`, `"nan"`), since
/// JSON has no such numbers.
pub fn finite_json(x: f64) -> Value {
    serde_json::Number::from_f64(x)
        .map(Value::Number)
        .unwrap_or_else(|| Value::String(num(x)))
}

/// A string made safe for one terminal line: control characters escaped.
pub fn clean(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn trial(number: u64, values: &[f64]) -> Arc<FrozenTrial> {
        let mut t = FrozenTrial::new(number, number, TrialState::Complete);
        t.values = Some(values.to_vec());
        Arc::new(t)
    }

    fn study(directions: Vec<Direction>, trials: Vec<Arc<FrozenTrial>>) -> StudyData {
        StudyData {
            name: "s".into(),
            directions,
            user_attrs: BTreeMap::new(),
            trials,
        }
    }

    #[test]
    fn best_follows_the_direction() {
        let ts = vec![trial(0, &[3.0]), trial(1, &[1.0]), trial(2, &[2.0])];
        let min = study(vec![Direction::Minimize], ts.clone());
        assert_eq!(best_trial(&min).unwrap().number, 1);
        let max = study(vec![Direction::Maximize], ts);
        assert_eq!(best_trial(&max).unwrap().number, 0);
    }

    #[test]
    fn pareto_front_drops_dominated_trials() {
        let ts = vec![
            trial(0, &[1.0, 5.0]),
            trial(1, &[2.0, 2.0]),
            trial(2, &[3.0, 3.0]),
            trial(3, &[5.0, 1.0]),
        ];
        let s = study(vec![Direction::Minimize, Direction::Minimize], ts);
        let front: Vec<u64> = best_trials(&s).iter().map(|t| t.number).collect();
        assert_eq!(front, vec![0, 1, 3]);
    }

    #[test]
    fn units_and_cleaning() {
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(span(42.4), "42s");
        assert_eq!(span(185.0), "3m05s");
        assert_eq!(span(101_426.0), "28h10m");
        let s = ParamValue::Choice(hpo::Choice::Str("relu".into()));
        assert_eq!(param_cell(&s), "relu");
        assert_eq!(param_cell(&ParamValue::Int(3)), "3");
        assert_eq!(bytes(3.0 * 1024.0 * 1024.0 * 1024.0), "3.0 GiB");
        assert_eq!(clean("a\nb\x1b[31m"), "a\\nb\\u{1b}[31m");
    }
}

//! `hpo studies`, `hpo trials`, `hpo best`, `hpo export`: tables, CSV, JSON.

use crate::error::Result;
use crate::open::{load_study, storage_error, StudyData};
use crate::study::{self, clean, num, STATES};
use hpo::{FrozenTrial, Storage, TrialState};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::sync::Arc;

/// Output formats of `hpo trials` and `hpo export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns for the terminal.
    Table,
    /// Comma-separated values with a header row.
    Csv,
    /// A JSON array (one object per trial).
    Json,
}

/// Lays out rows as aligned columns (first row is the header).
pub fn table(rows: &[Vec<String>]) -> String {
    let ncol = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut width = vec![0; ncol];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            let pad = width[i] - c.chars().count();
            line.push_str(c);
            if i + 1 < r.len() {
                line.push_str(&" ".repeat(pad + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// One CSV field, quoted when needed.
///
/// Study data is untrusted and CSV files get opened in spreadsheets: a text
/// field that starts like a formula (`=`, `+`, `-`, `@`, tab, carriage
/// return) gets a leading `'` so that it shows as text instead of running
/// (OWASP's advice on CSV injection). Numbers are left as they are.
pub fn csv_field(s: &str) -> String {
    let s = if s.starts_with(['=', '+', '-', '@', '\t', '\r']) && s.parse::<f64>().is_err() {
        format!("'{s}")
    } else {
        s.to_owned()
    };
    let s = s.as_str();
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

fn csv(rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    for r in rows {
        let fields: Vec<String> = r.iter().map(|f| csv_field(f)).collect();
        out.push_str(&fields.join(","));
        out.push('\n');
    }
    out
}

/// `hpo studies URL`.
pub fn studies(storage: &dyn Storage, url: &str) -> Result<String> {
    let list = storage.studies().map_err(|e| storage_error(&e, url))?;
    if list.is_empty() {
        return Ok("no studies\n".to_owned());
    }
    let mut rows = vec![vec![
        "study".to_owned(),
        "direction".to_owned(),
        "trials".to_owned(),
        "complete".to_owned(),
        "pruned".to_owned(),
        "fail".to_owned(),
        "running".to_owned(),
        "waiting".to_owned(),
        "best".to_owned(),
        "last activity (UTC)".to_owned(),
    ]];
    for s in list {
        let data = load_study(storage, url, &s.name)?;
        let mut row = vec![
            clean(&data.name),
            directions(&data),
            data.trials.len().to_string(),
        ];
        for st in STATES {
            row.push(count(&data, st).to_string());
        }
        row.push(best_cell(&data));
        row.push(last_activity(&data));
        rows.push(row);
    }
    Ok(table(&rows))
}

fn directions(data: &StudyData) -> String {
    let d: Vec<String> = data
        .directions
        .iter()
        .map(|d| format!("{d:?}").to_lowercase())
        .collect();
    d.join(",")
}

/// Trials of `data` in state `st`.
pub fn count(data: &StudyData, st: TrialState) -> usize {
    data.trials.iter().filter(|t| t.state == st).count()
}

fn best_cell(data: &StudyData) -> String {
    if data.directions.len() > 1 {
        let n = study::best_trials(data).len();
        return if n == 0 {
            "-".into()
        } else {
            format!("{n} on front")
        };
    }
    study::best_trial(data)
        .and_then(|t| t.value())
        .map(study::short)
        .unwrap_or_else(|| "-".into())
}

fn last_activity(data: &StudyData) -> String {
    data.trials
        .iter()
        .filter_map(|t| t.datetime_complete.or(t.datetime_start))
        .max()
        .map(|d| d.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|| "-".into())
}

/// Options of `hpo trials`.
#[derive(Debug, Clone)]
pub struct TrialsQuery {
    /// Only trials in this state.
    pub state: Option<TrialState>,
    /// Sort best value first (instead of by number).
    pub by_value: bool,
    /// At most this many rows.
    pub limit: Option<usize>,
    /// Output format.
    pub format: Format,
}

/// `hpo trials URL STUDY ...`.
pub fn trials(data: &StudyData, q: &TrialsQuery) -> String {
    let mut ts: Vec<&Arc<FrozenTrial>> = data
        .trials
        .iter()
        .filter(|t| q.state.is_none_or(|s| t.state == s))
        .collect();
    if q.by_value {
        let dir = data
            .directions
            .first()
            .copied()
            .unwrap_or(hpo::Direction::Minimize);
        ts.sort_by(|a, b| {
            let key = |t: &FrozenTrial| t.values.as_ref().and_then(|v| v.first().copied());
            match (key(a), key(b)) {
                (Some(x), Some(y)) if study::better(dir, x, y) => std::cmp::Ordering::Less,
                (Some(x), Some(y)) if study::better(dir, y, x) => std::cmp::Ordering::Greater,
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                _ => a.number.cmp(&b.number),
            }
        });
    }
    if let Some(n) = q.limit {
        ts.truncate(n);
    }
    match q.format {
        Format::Json => json_lines(&ts),
        Format::Csv => csv(&rows(data, &ts, false)),
        Format::Table => table(&rows(data, &ts, true)),
    }
}

fn json_lines(ts: &[&Arc<FrozenTrial>]) -> String {
    let arr: Vec<Value> = ts.iter().map(|t| study::trial_json(t)).collect();
    let mut s = serde_json::to_string_pretty(&Value::Array(arr)).unwrap_or_default();
    s.push('\n');
    s
}

fn rows(data: &StudyData, ts: &[&Arc<FrozenTrial>], terminal: bool) -> Vec<Vec<String>> {
    let names = study::param_names(data);
    let nobj = data.directions.len().max(1);
    let mut header = vec!["number".to_owned(), "state".to_owned()];
    if nobj == 1 {
        header.push("value".into());
    } else {
        header.extend((0..nobj).map(|i| format!("value_{i}")));
    }
    header.push("duration_s".into());
    header.extend(names.iter().map(|n| {
        let n = format!("param_{n}");
        if terminal {
            clean(&n)
        } else {
            n
        }
    }));
    header.extend(["oom_retries", "peak_memory", "failure"].map(String::from));
    let mut rows = vec![header];
    for t in ts {
        let mut r = vec![t.number.to_string(), t.state.as_str().to_owned()];
        for i in 0..nobj {
            r.push(
                t.values
                    .as_ref()
                    .and_then(|v| v.get(i))
                    .map(|x| if terminal { study::short(*x) } else { num(*x) })
                    .unwrap_or_default(),
            );
        }
        r.push(
            t.duration()
                .map(|d| format!("{:.3}", d.as_secs_f64()))
                .unwrap_or_default(),
        );
        for n in &names {
            r.push(
                t.param(n)
                    .map(|v| {
                        if terminal {
                            study::param_short(&v)
                        } else {
                            study::param_cell(&v)
                        }
                    })
                    .unwrap_or_default(),
            );
        }
        r.push(
            study::oom_retries(t)
                .map(|n| n.to_string())
                .unwrap_or_default(),
        );
        // Which figure: the device allocator's, or the process's resident memory.
        r.push(
            study::measured_peak_with_source(t)
                .map(|(b, source)| {
                    if terminal {
                        format!("{} ({source})", study::bytes(b))
                    } else {
                        num(b)
                    }
                })
                .unwrap_or_default(),
        );
        r.push(study::failure(t).unwrap_or_default());
        if terminal {
            r = r.iter().map(|c| clean(c)).collect();
        }
        rows.push(r);
    }
    rows
}

/// `hpo best URL STUDY`: the best trial (or the Pareto front), params ready
/// to paste.
pub fn best(data: &StudyData) -> Option<String> {
    let front = study::best_trials(data);
    if front.is_empty() {
        return None;
    }
    let mut out = String::new();
    for t in &front {
        let _ = writeln!(
            out,
            "trial {}  value {}",
            t.number,
            study::values_text(t, num)
        );
        let params: serde_json::Map<String, Value> = t
            .params()
            .iter()
            .map(|(k, v)| (k.clone(), study::param_json(v)))
            .collect();
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string(&Value::Object(params)).unwrap_or_default()
        );
    }
    Some(out)
}

/// `hpo export URL STUDY --format csv|json`: everything, machine-readable.
pub fn export(data: &StudyData, format: Format) -> String {
    let all: Vec<&Arc<FrozenTrial>> = data.trials.iter().collect();
    match format {
        Format::Json => {
            let doc = json!({
                "study": data.name,
                "directions": data.directions.iter().map(|d| format!("{d:?}").to_lowercase()).collect::<Vec<_>>(),
                "user_attrs": data.user_attrs,
                "trials": all.iter().map(|t| study::trial_json(t)).collect::<Vec<_>>(),
            });
            let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
            s.push('\n');
            s
        }
        Format::Csv | Format::Table => csv(&rows(data, &all, false)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_what_needs_quoting() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        // Formulas are defused; negative numbers are not.
        assert_eq!(csv_field("=HYPERLINK(1)"), "'=HYPERLINK(1)");
        assert_eq!(csv_field("-1.5e-3"), "-1.5e-3");
        assert_eq!(csv_field("-inf"), "-inf");
    }

    #[test]
    fn table_aligns_columns() {
        let t = table(&[
            vec!["a".into(), "bb".into()],
            vec!["ccc".into(), "d".into()],
        ]);
        assert_eq!(t, "a    bb\nccc  d\n");
    }
}

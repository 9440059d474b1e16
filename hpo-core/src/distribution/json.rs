//! Optuna's `distribution_json`: the exact text Python's `json.dumps` writes,
//! key order included, so `trial_params` rows written by hpo are byte-identical
//! to Optuna's.

use super::{CategoricalDistribution, Choice, Distribution, FloatDistribution, IntDistribution};
use crate::error::{Error, Result};
use std::fmt::Write;

/// Formats a float exactly as Python's `repr(float)` does (`1e-05`, `10.0`, `0.1`).
///
/// Non-finite values give `NaN`, `Infinity` and `-Infinity`, as `json.dumps` writes them.
pub fn python_float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "1.2345e-5", "1e0", "-3.5e16".
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        // Fixed notation.
        let n = digits.len() as i32;
        let mut out = String::from(sign);
        if exp < 0 {
            out.push_str("0.");
            for _ in 0..(-exp - 1) {
                out.push('0');
            }
            out.push_str(&digits);
        } else if exp + 1 >= n {
            out.push_str(&digits);
            for _ in 0..(exp + 1 - n) {
                out.push('0');
            }
            out.push_str(".0");
        } else {
            let split = (exp + 1) as usize;
            out.push_str(&digits[..split]);
            out.push('.');
            out.push_str(&digits[split..]);
        }
        out
    } else {
        let mut out = String::from(sign);
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
        out
    }
}

/// A JSON string literal as Python's `json.dumps` writes it (`ensure_ascii=True`).
pub(crate) fn python_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write_choice(c: &Choice, out: &mut String) {
    match c {
        Choice::Null => out.push_str("null"),
        Choice::Bool(true) => out.push_str("true"),
        Choice::Bool(false) => out.push_str("false"),
        Choice::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Choice::Float(x) => out.push_str(&python_float_repr(*x)),
        Choice::Str(s) => python_json_string(s, out),
    }
}

impl Distribution {
    /// The Optuna `distribution_json` text, byte-identical to Optuna 5.0's.
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(96);
        match self {
            Distribution::Float(d) => {
                out.push_str(r#"{"name": "FloatDistribution", "attributes": {"step": "#);
                match d.step {
                    Some(s) => out.push_str(&python_float_repr(s)),
                    None => out.push_str("null"),
                }
                let _ = write!(
                    out,
                    r#", "low": {}, "high": {}, "log": {}}}}}"#,
                    python_float_repr(d.low),
                    python_float_repr(d.high),
                    d.log
                );
            }
            Distribution::Int(d) => {
                let _ = write!(
                    out,
                    r#"{{"name": "IntDistribution", "attributes": {{"log": {}, "step": {}, "low": {}, "high": {}}}}}"#,
                    d.log, d.step, d.low, d.high
                );
            }
            Distribution::Categorical(d) => {
                out.push_str(r#"{"name": "CategoricalDistribution", "attributes": {"choices": ["#);
                for (i, c) in d.choices.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_choice(c, &mut out);
                }
                out.push_str("]}}");
            }
        }
        out
    }

    /// Parses Optuna's `distribution_json`, including the pre-3.0 names
    /// (`UniformDistribution`, `LogUniformDistribution`, `DiscreteUniformDistribution`,
    /// `IntUniformDistribution`, `IntLogUniformDistribution`) that old studies contain.
    pub fn from_json(text: &str) -> Result<Distribution> {
        let err = |reason: String| Error::Parse {
            what: format!("distribution_json `{text}`"),
            reason,
            source: None,
        };
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| Error::Parse {
            what: format!("distribution_json `{text}`"),
            reason: "it is not JSON".into(),
            source: Some(Box::new(e)),
        })?;
        let name = v
            .get("name")
            .and_then(|n| n.as_str())
            .ok_or_else(|| err("missing \"name\"".into()))?;
        let attrs = v
            .get("attributes")
            .and_then(|a| a.as_object())
            .ok_or_else(|| err("missing \"attributes\" object".into()))?;
        let f = |k: &str| -> Result<f64> {
            attrs
                .get(k)
                .and_then(|x| x.as_f64())
                .ok_or_else(|| err(format!("attribute \"{k}\" missing or not a number")))
        };
        let i = |k: &str| -> Result<i64> {
            let x = attrs
                .get(k)
                .ok_or_else(|| err(format!("attribute \"{k}\" missing")))?;
            x.as_i64()
                .or_else(|| x.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
                .ok_or_else(|| err(format!("attribute \"{k}\" is not an integer")))
        };
        let flag = |k: &str| attrs.get(k).and_then(|x| x.as_bool()).unwrap_or(false);
        let d = match name {
            "FloatDistribution" => {
                let step = match attrs.get("step") {
                    None | Some(serde_json::Value::Null) => None,
                    Some(s) => Some(
                        s.as_f64()
                            .ok_or_else(|| err("step is not a number".into()))?,
                    ),
                };
                Distribution::Float(FloatDistribution::with(
                    f("low")?,
                    f("high")?,
                    flag("log"),
                    step,
                )?)
            }
            "UniformDistribution" => {
                Distribution::Float(FloatDistribution::new(f("low")?, f("high")?)?)
            }
            "LogUniformDistribution" => {
                Distribution::Float(FloatDistribution::log(f("low")?, f("high")?)?)
            }
            "DiscreteUniformDistribution" => {
                Distribution::Float(FloatDistribution::stepped(f("low")?, f("high")?, f("q")?)?)
            }
            "IntDistribution" => {
                let step = if attrs.contains_key("step") {
                    i("step")?
                } else {
                    1
                };
                Distribution::Int(IntDistribution::with(
                    i("low")?,
                    i("high")?,
                    flag("log"),
                    step,
                )?)
            }
            "IntUniformDistribution" => {
                let step = if attrs.contains_key("step") {
                    i("step")?
                } else {
                    1
                };
                Distribution::Int(IntDistribution::stepped(i("low")?, i("high")?, step)?)
            }
            "IntLogUniformDistribution" => {
                Distribution::Int(IntDistribution::log(i("low")?, i("high")?)?)
            }
            "CategoricalDistribution" => {
                let choices = attrs
                    .get("choices")
                    .and_then(|c| c.as_array())
                    .ok_or_else(|| err("\"choices\" missing or not an array".into()))?;
                let choices = choices
                    .iter()
                    .map(|c| {
                        Choice::from_json_value(c)
                            .ok_or_else(|| err(format!("choice {c} is not a JSON scalar")))
                    })
                    .collect::<Result<Vec<_>>>()?;
                Distribution::Categorical(CategoricalDistribution::new(choices)?)
            }
            other => return Err(err(format!("unknown distribution name `{other}`"))),
        };
        Ok(d)
    }
}

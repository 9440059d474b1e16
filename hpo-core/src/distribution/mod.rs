//! Parameter distributions, their values and their Optuna-compatible JSON form.
//!
//! A distribution is what a parameter is drawn from: [`FloatDistribution`],
//! [`IntDistribution`] or [`CategoricalDistribution`]. As in Optuna, every
//! parameter value also has an *internal* representation as `f64` (the value
//! itself for floats and ints, the choice index for categoricals); that is what
//! storages persist and samplers model.
//!
//! A search-space constraint can narrow a parameter's support at sampling time
//! ([`Support`]) while the declared distribution stays the one that is stored,
//! so observations made under one condition still inform the sampler under
//! another.

mod choice;
mod json;
mod support;
mod text;

pub use self::choice::{Choice, ParamValue};
pub use self::json::python_float_repr;
pub(crate) use self::json::python_json_string;
pub use self::support::Support;
pub use self::text::{significant, PEOPLE_DIGITS};

use crate::error::{Error, Result};

/// Tolerance used when checking that a value lies on a step grid.
const GRID_EPS: f64 = 1e-8;

/// A float range, optionally log-scaled or discretised by a step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FloatDistribution {
    low: f64,
    high: f64,
    log: bool,
    step: Option<f64>,
}

impl FloatDistribution {
    /// A uniform float range `[low, high]`.
    pub fn new(low: f64, high: f64) -> Result<Self> {
        Self::with(low, high, false, None)
    }

    /// A log-uniform float range `[low, high]`; `low` must be positive.
    pub fn log(low: f64, high: f64) -> Result<Self> {
        Self::with(low, high, true, None)
    }

    /// A float range discretised to `low + k * step`; `step` must divide `high - low`.
    pub fn stepped(low: f64, high: f64, step: f64) -> Result<Self> {
        Self::with(low, high, false, Some(step))
    }

    /// The general constructor, validating every combination.
    pub fn with(low: f64, high: f64, log: bool, step: Option<f64>) -> Result<Self> {
        let bad = |m: String| Err(Error::InvalidDistribution(m));
        if !low.is_finite() || !high.is_finite() {
            return bad(format!(
                "float bounds must be finite, got low={low}, high={high}"
            ));
        }
        if low > high {
            return bad(format!("float low ({low}) must not exceed high ({high})"));
        }
        if log && step.is_some() {
            return bad("a float distribution cannot be both log-scaled and stepped".into());
        }
        if log && low <= 0.0 {
            return bad(format!("a log-scaled float needs low > 0, got low={low}"));
        }
        if let Some(s) = step {
            if !(s.is_finite() && s > 0.0) {
                return bad(format!("float step must be positive, got {s}"));
            }
            let k = (high - low) / s;
            if (k - k.round()).abs() > GRID_EPS * k.abs().max(1.0) {
                return bad(format!(
                    "float step {s} does not divide the range [{low}, {high}] (width {}); \
                     choose a step that divides it or adjust high",
                    high - low
                ));
            }
        }
        Ok(FloatDistribution {
            low,
            high,
            log,
            step,
        })
    }

    /// Lower bound (inclusive).
    pub fn low(&self) -> f64 {
        self.low
    }
    /// Upper bound (inclusive).
    pub fn high(&self) -> f64 {
        self.high
    }
    /// Whether the range is log-scaled.
    pub fn is_log(&self) -> bool {
        self.log
    }
    /// The discretisation step, if any.
    pub fn step(&self) -> Option<f64> {
        self.step
    }
}

/// An integer range, optionally log-scaled or with a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IntDistribution {
    low: i64,
    high: i64,
    log: bool,
    step: i64,
}

impl IntDistribution {
    /// A uniform integer range `[low, high]`.
    pub fn new(low: i64, high: i64) -> Result<Self> {
        Self::with(low, high, false, 1)
    }

    /// A log-uniform integer range `[low, high]`; `low` must be at least 1.
    pub fn log(low: i64, high: i64) -> Result<Self> {
        Self::with(low, high, true, 1)
    }

    /// An integer range `low, low + step, ..., high`; `step` must divide `high - low`.
    pub fn stepped(low: i64, high: i64, step: i64) -> Result<Self> {
        Self::with(low, high, false, step)
    }

    /// The general constructor, validating every combination.
    pub fn with(low: i64, high: i64, log: bool, step: i64) -> Result<Self> {
        let bad = |m: String| Err(Error::InvalidDistribution(m));
        if low > high {
            return bad(format!("int low ({low}) must not exceed high ({high})"));
        }
        if step < 1 {
            return bad(format!("int step must be at least 1, got {step}"));
        }
        if log && step != 1 {
            return bad(format!(
                "a log-scaled int must have step 1, got step {step}"
            ));
        }
        if log && low < 1 {
            return bad(format!("a log-scaled int needs low >= 1, got low={low}"));
        }
        let width = i128::from(high) - i128::from(low);
        if width % i128::from(step) != 0 {
            return bad(format!(
                "int step {step} does not divide the range [{low}, {high}] (width {width}); \
                 choose a step that divides it or adjust high"
            ));
        }
        Ok(IntDistribution {
            low,
            high,
            log,
            step,
        })
    }

    /// Lower bound (inclusive).
    pub fn low(&self) -> i64 {
        self.low
    }
    /// Upper bound (inclusive).
    pub fn high(&self) -> i64 {
        self.high
    }
    /// Whether the range is log-scaled.
    pub fn is_log(&self) -> bool {
        self.log
    }
    /// The step (1 unless set).
    pub fn step(&self) -> i64 {
        self.step
    }
}

/// A finite set of choices; the internal value is the index of the choice.
#[derive(Debug, Clone, PartialEq)]
pub struct CategoricalDistribution {
    choices: Vec<Choice>,
}

impl CategoricalDistribution {
    /// A categorical over `choices`, which must be non-empty and free of duplicates.
    pub fn new<C: Into<Choice>>(choices: impl IntoIterator<Item = C>) -> Result<Self> {
        let choices: Vec<Choice> = choices.into_iter().map(Into::into).collect();
        if choices.is_empty() {
            return Err(Error::InvalidDistribution(
                "a categorical distribution needs at least one choice".into(),
            ));
        }
        for (i, c) in choices.iter().enumerate() {
            if choices[..i].iter().any(|d| d.same_as(c)) {
                return Err(Error::InvalidDistribution(format!(
                    "categorical choice {c} appears more than once"
                )));
            }
        }
        Ok(CategoricalDistribution { choices })
    }

    /// The choices, in declaration order.
    pub fn choices(&self) -> &[Choice] {
        &self.choices
    }

    /// Index of `choice`, if present.
    pub fn index_of(&self, choice: &Choice) -> Option<usize> {
        self.choices.iter().position(|c| c.same_as(choice))
    }
}

/// Any of the three distribution kinds.
#[derive(Debug, Clone, PartialEq)]
pub enum Distribution {
    /// A float range.
    Float(FloatDistribution),
    /// An integer range.
    Int(IntDistribution),
    /// A set of choices.
    Categorical(CategoricalDistribution),
}

impl From<FloatDistribution> for Distribution {
    fn from(d: FloatDistribution) -> Self {
        Distribution::Float(d)
    }
}
impl From<IntDistribution> for Distribution {
    fn from(d: IntDistribution) -> Self {
        Distribution::Int(d)
    }
}
impl From<CategoricalDistribution> for Distribution {
    fn from(d: CategoricalDistribution) -> Self {
        Distribution::Categorical(d)
    }
}

impl Distribution {
    /// Whether `internal` (the f64 representation) is a valid value of this distribution.
    pub fn contains(&self, internal: f64) -> bool {
        if !internal.is_finite() {
            return false;
        }
        match self {
            Distribution::Float(d) => {
                if internal < d.low || internal > d.high {
                    return false;
                }
                match d.step {
                    None => true,
                    Some(s) => {
                        let k = (internal - d.low) / s;
                        (k - k.round()).abs() < GRID_EPS * k.abs().max(1.0)
                    }
                }
            }
            Distribution::Int(d) => {
                if internal.fract() != 0.0 || internal < d.low as f64 || internal > d.high as f64 {
                    return false;
                }
                (internal as i64 - d.low) % d.step == 0
            }
            Distribution::Categorical(d) => {
                internal.fract() == 0.0 && internal >= 0.0 && (internal as usize) < d.choices.len()
            }
        }
    }

    /// Whether the distribution has exactly one value (samplers need not model it).
    pub fn is_single(&self) -> bool {
        match self {
            Distribution::Float(d) => d.low == d.high || d.step.is_some_and(|s| d.low + s > d.high),
            Distribution::Int(d) => d.low == d.high || d.low + d.step > d.high,
            Distribution::Categorical(d) => d.choices.len() == 1,
        }
    }

    /// Converts an internal value to its typed external form.
    pub fn to_external(&self, internal: f64) -> Result<ParamValue> {
        if !self.contains(internal) {
            return Err(self.out_of(internal));
        }
        Ok(match self {
            Distribution::Float(_) => ParamValue::Float(internal),
            Distribution::Int(_) => ParamValue::Int(internal as i64),
            Distribution::Categorical(d) => {
                ParamValue::Choice(d.choices[internal as usize].clone())
            }
        })
    }

    /// Converts a typed external value to the internal f64 form, checking membership.
    pub fn to_internal(&self, value: &ParamValue) -> Result<f64> {
        let internal = match (self, value) {
            (Distribution::Float(_), ParamValue::Float(v)) => Some(*v),
            (Distribution::Float(_), ParamValue::Int(v)) => Some(*v as f64),
            (Distribution::Int(_), ParamValue::Int(v)) => Some(*v as f64),
            (Distribution::Int(_), ParamValue::Float(v)) if v.fract() == 0.0 => Some(*v),
            (Distribution::Categorical(d), v) => {
                let c = v.to_choice();
                d.index_of(&c).map(|i| i as f64)
            }
            _ => None,
        };
        match internal {
            Some(x) if self.contains(x) => Ok(x),
            _ => Err(Error::OutOfDistribution {
                value: value.to_string(),
                distribution: self.to_json(),
            }),
        }
    }

    /// The canonical internal value nearest to `x` inside this distribution
    /// (snapped to the step grid, rounded for ints, clamped to the bounds).
    pub fn snap(&self, x: f64) -> f64 {
        match self {
            Distribution::Float(d) => match d.step {
                None => x.clamp(d.low, d.high),
                Some(s) => {
                    let k = ((x - d.low) / s).round();
                    (d.low + k * s).clamp(d.low, d.high)
                }
            },
            Distribution::Int(d) => {
                let k = ((x - d.low as f64) / d.step as f64).round();
                (d.low as f64 + k * d.step as f64).clamp(d.low as f64, d.high as f64)
            }
            Distribution::Categorical(d) => x.round().clamp(0.0, (d.choices.len() - 1) as f64),
        }
    }

    /// The kind of distribution, for messages ("float", "int", "categorical").
    pub fn kind(&self) -> &'static str {
        match self {
            Distribution::Float(_) => "float",
            Distribution::Int(_) => "int",
            Distribution::Categorical(_) => "categorical",
        }
    }

    fn out_of(&self, internal: f64) -> Error {
        Error::OutOfDistribution {
            value: internal.to_string(),
            distribution: self.to_json(),
        }
    }
}

impl std::fmt::Display for Distribution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Distribution::Float(d) => {
                write!(f, "float[{}, {}]", d.low, d.high)?;
                if d.log {
                    write!(f, " log")?;
                }
                if let Some(s) = d.step {
                    write!(f, " step {s}")?;
                }
                Ok(())
            }
            Distribution::Int(d) => {
                write!(f, "int[{}, {}]", d.low, d.high)?;
                if d.log {
                    write!(f, " log")?;
                }
                if d.step != 1 {
                    write!(f, " step {}", d.step)?;
                }
                Ok(())
            }
            Distribution::Categorical(d) => {
                write!(f, "choice(")?;
                for (i, c) in d.choices.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{c}")?;
                }
                write!(f, ")")
            }
        }
    }
}

#[cfg(test)]
mod tests;

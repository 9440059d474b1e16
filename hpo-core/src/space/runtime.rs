//! Support code for `#[hpo::search_space]`. Not public API.
//!
//! The macro keeps its generated code short by calling these helpers: one
//! call per field to sample it, one to rebuild it from stored parameters, one
//! to turn it back into a parameter value. Constraints accumulate in a
//! [`Narrow`] per field, which becomes the [`Support`] handed to
//! [`Trial::suggest_within`] and, when nothing is left, an Infeasible trial
//! whose message names the constraints. The start-up contradiction check
//! proposes values for float and wide integer fields from a [`Region`].

use crate::distribution::{
    CategoricalDistribution, Choice, Distribution, FloatDistribution, IntDistribution, ParamValue,
    Support,
};
use crate::error::{Error, Result};
use crate::study::Trial;
use crate::trial::TrialError;
use std::collections::BTreeMap;

pub use super::region::{Bound, Region};

/// The narrowing constraints place on one field in one trial.
#[derive(Debug, Clone)]
pub struct Narrow {
    low: f64,
    high: f64,
    keep: Option<Vec<bool>>,
    by: Vec<&'static str>,
}

impl Default for Narrow {
    fn default() -> Self {
        Narrow {
            low: f64::NEG_INFINITY,
            high: f64::INFINITY,
            keep: None,
            by: Vec::new(),
        }
    }
}

impl Narrow {
    /// No narrowing yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn note(&mut self, by: &'static str) {
        if !self.by.contains(&by) {
            self.by.push(by);
        }
    }

    /// Caps the value at `v` (constraint `by`).
    pub fn at_most(&mut self, v: f64, by: &'static str) {
        self.high = self.high.min(v);
        self.note(by);
    }

    /// Floors the value at `v` (constraint `by`).
    pub fn at_least(&mut self, v: f64, by: &'static str) {
        self.low = self.low.max(v);
        self.note(by);
    }

    /// Keeps only the choices for which `pred` holds (constraint `by`).
    pub fn keep<T>(&mut self, choices: &[T], pred: impl Fn(&T) -> bool, by: &'static str) {
        let keep = self.keep.get_or_insert_with(|| vec![true; choices.len()]);
        for (k, c) in keep.iter_mut().zip(choices) {
            *k = *k && pred(c);
        }
        self.note(by);
    }

    fn range_support(&self) -> Support {
        if self.low == f64::NEG_INFINITY && self.high == f64::INFINITY {
            Support::Full
        } else {
            Support::range(self.low, self.high)
        }
    }

    fn choice_support(&self) -> Support {
        match &self.keep {
            None => Support::Full,
            Some(keep) => {
                Support::choices(keep.iter().enumerate().filter(|(_, k)| **k).map(|(i, _)| i))
            }
        }
    }

    /// Turns a suggestion error into the trial's outcome, naming the
    /// constraints that narrowed this field when its support is empty.
    fn outcome(&self, e: Error) -> TrialError {
        match e {
            Error::EmptySupport { .. } => {
                let by: Vec<String> = self.by.iter().map(|c| format!("`{c}`")).collect();
                TrialError::Infeasible(format!("{e} (narrowed by constraint {})", by.join(" and ")))
            }
            other => TrialError::from(other),
        }
    }
}

/// Samples a float field.
pub fn float<T: FloatValue>(
    trial: &mut Trial,
    name: &str,
    dist: Result<FloatDistribution>,
    narrow: &Narrow,
) -> Result<T, TrialError> {
    let v = trial
        .suggest_within(name, dist?, &narrow.range_support())
        .map_err(|e| narrow.outcome(e))?;
    v.as_f64()
        .map(T::from_f64)
        .ok_or_else(|| TrialError::Failed(format!("`{name}` is not a float: {v}")))
}

/// Samples an integer field.
pub fn int<T: IntValue>(
    trial: &mut Trial,
    name: &str,
    dist: Result<IntDistribution>,
    narrow: &Narrow,
) -> Result<T, TrialError> {
    let v = trial
        .suggest_within(name, dist?, &narrow.range_support())
        .map_err(|e| narrow.outcome(e))?;
    v.as_i64()
        .and_then(T::from_i64)
        .ok_or_else(|| TrialError::Failed(format!("`{name}` does not fit its field: {v}")))
}

fn index(
    trial: &mut Trial,
    name: &str,
    labels: Vec<Choice>,
    narrow: &Narrow,
) -> Result<usize, TrialError> {
    let dist = CategoricalDistribution::new(labels)?;
    let v = trial
        .suggest_within(name, dist.clone(), &narrow.choice_support())
        .map_err(|e| narrow.outcome(e))?;
    v.as_choice()
        .and_then(|c| dist.index_of(c))
        .ok_or_else(|| TrialError::Failed(format!("`{name}` is not one of its choices: {v}")))
}

/// Samples a field with literal choices (or a bool).
pub fn choose<T: Clone + Into<Choice>>(
    trial: &mut Trial,
    name: &str,
    choices: &[T],
    narrow: &Narrow,
) -> Result<T, TrialError> {
    let i = index(trial, name, labels(choices), narrow)?;
    choices
        .get(i)
        .cloned()
        .ok_or_else(|| TrialError::Failed(format!("`{name}`: choice {i} out of range")))
}

/// The variants of a [`super::ChoiceEnum`], captured once per field so a
/// missing derive is reported once, not at every use.
pub struct Variants<T: 'static> {
    /// Every variant, in declaration order.
    pub all: &'static [T],
    names: &'static [&'static str],
    index: fn(&T) -> usize,
    from_index: fn(usize) -> Option<T>,
}

impl<T> Clone for Variants<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Variants<T> {}

/// The variants of `T`.
pub fn variants<T: super::ChoiceEnum>() -> Variants<T> {
    Variants {
        all: T::ALL,
        names: T::NAMES,
        index: T::index,
        from_index: T::from_index,
    }
}

/// Every variant, in declaration order (for the start-up contradiction check).
pub fn variants_all<T>(variants: Variants<T>) -> impl Iterator<Item = T> {
    (0..variants.all.len()).filter_map(variants.from_index)
}

/// Samples an enum field.
pub fn choose_enum<T>(
    trial: &mut Trial,
    name: &str,
    variants: Variants<T>,
    narrow: &Narrow,
) -> Result<T, TrialError> {
    let i = index(trial, name, enum_labels(variants), narrow)?;
    (variants.from_index)(i)
        .ok_or_else(|| TrialError::Failed(format!("`{name}`: variant {i} out of range")))
}

/// The categorical distribution over `labels`.
pub fn categorical(labels: Vec<Choice>) -> Result<Distribution> {
    Ok(CategoricalDistribution::new(labels)?.into())
}

/// The labels of a field's literal choices.
pub fn labels<T: Clone + Into<Choice>>(choices: &[T]) -> Vec<Choice> {
    choices.iter().cloned().map(Into::into).collect()
}

/// The labels of an enum's variants (their names).
pub fn enum_labels<T>(variants: Variants<T>) -> Vec<Choice> {
    variants
        .names
        .iter()
        .map(|n| Choice::Str((*n).to_owned()))
        .collect()
}

fn bad(ty: &str, name: &str, reason: String) -> Error {
    Error::Parse {
        what: format!("parameter `{name}` of `{ty}`"),
        reason,
        source: None,
    }
}

fn get<'a>(
    params: &'a BTreeMap<String, ParamValue>,
    ty: &str,
    name: &str,
) -> Result<&'a ParamValue> {
    params
        .get(name)
        .ok_or_else(|| bad(ty, name, "it is missing from the parameters".into()))
}

/// Reads a float field from stored parameters.
pub fn get_float<T: FloatValue>(
    params: &BTreeMap<String, ParamValue>,
    ty: &str,
    name: &str,
) -> Result<T> {
    let v = get(params, ty, name)?;
    v.as_f64()
        .map(T::from_f64)
        .ok_or_else(|| bad(ty, name, format!("expected a number, found {v}")))
}

/// Reads an integer field from stored parameters.
pub fn get_int<T: IntValue>(
    params: &BTreeMap<String, ParamValue>,
    ty: &str,
    name: &str,
) -> Result<T> {
    let v = get(params, ty, name)?;
    let i = match v {
        ParamValue::Float(x) if x.fract() == 0.0 && x.abs() < 9.0e15 => Some(*x as i64),
        other => other.as_i64(),
    };
    let i = i.ok_or_else(|| bad(ty, name, format!("expected an integer, found {v}")))?;
    T::from_i64(i).ok_or_else(|| bad(ty, name, format!("{i} does not fit the field's type")))
}

fn get_index(
    params: &BTreeMap<String, ParamValue>,
    ty: &str,
    name: &str,
    labels: &[Choice],
) -> Result<usize> {
    let v = get(params, ty, name)?;
    let c = v.to_choice();
    labels.iter().position(|l| l.same_as(&c)).ok_or_else(|| {
        let all: Vec<String> = labels.iter().map(ToString::to_string).collect();
        bad(
            ty,
            name,
            format!("{v} is not one of its choices ({})", all.join(", ")),
        )
    })
}

/// Reads a literal-choice (or bool) field from stored parameters.
pub fn get_choice<T: Clone + Into<Choice>>(
    params: &BTreeMap<String, ParamValue>,
    ty: &str,
    name: &str,
    choices: &[T],
) -> Result<T> {
    let i = get_index(params, ty, name, &labels(choices))?;
    choices
        .get(i)
        .cloned()
        .ok_or_else(|| bad(ty, name, format!("choice {i} out of range")))
}

/// Reads an enum field from stored parameters (by variant name).
pub fn get_enum<T>(
    params: &BTreeMap<String, ParamValue>,
    ty: &str,
    name: &str,
    variants: Variants<T>,
) -> Result<T> {
    let i = get_index(params, ty, name, &enum_labels(variants))?;
    (variants.from_index)(i).ok_or_else(|| bad(ty, name, format!("variant {i} out of range")))
}

/// The stored value of a float field.
pub fn float_param<T: FloatValue>(v: &T) -> ParamValue {
    ParamValue::Float(v.to_f64())
}

/// The stored value of an integer field.
pub fn int_param<T: IntValue>(v: &T) -> ParamValue {
    ParamValue::Int(v.to_i64())
}

/// The stored value of a literal-choice field.
pub fn choice_param<T: Clone + Into<Choice>>(v: &T) -> ParamValue {
    ParamValue::Choice(v.clone().into())
}

/// The stored value of an enum field.
pub fn enum_param<T>(v: &T, variants: Variants<T>) -> ParamValue {
    let name = variants
        .names
        .get((variants.index)(v))
        .copied()
        .unwrap_or_default();
    ParamValue::Choice(Choice::Str(name.to_owned()))
}

/// A field type that can hold a float parameter.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot hold a `float` parameter",
    label = "`float(..)` needs an `f32` or `f64` field"
)]
pub trait FloatValue: Sized {
    /// The largest finite value, as f64 (the macro asserts at compile time
    /// that a declared range fits, also for types reached through an alias).
    const MAX: f64;
    /// Widens to f64.
    fn to_f64(&self) -> f64;
    /// Narrows from f64 (to the nearest representable value).
    fn from_f64(v: f64) -> Self;
}

impl FloatValue for f64 {
    const MAX: f64 = f64::MAX;
    fn to_f64(&self) -> f64 {
        *self
    }
    fn from_f64(v: f64) -> Self {
        v
    }
}

impl FloatValue for f32 {
    const MAX: f64 = f32::MAX as f64;
    fn to_f64(&self) -> f64 {
        // Through the shortest decimal form, so 0.1f32 is stored as 0.1.
        self.to_string().parse().unwrap_or(f64::from(*self))
    }
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

/// A field type that can hold an integer parameter.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot hold an `int` parameter",
    label = "`int(..)` needs an integer field such as `usize` or `i64`"
)]
pub trait IntValue: Sized {
    /// The smallest value (the macro asserts at compile time that a declared
    /// range fits, also for types reached through an alias).
    const MIN: i128;
    /// The largest value, saturated to `i128::MAX`.
    const MAX: i128;
    /// Converts to i64, saturating.
    fn to_i64(&self) -> i64;
    /// Converts from i64, if it fits.
    fn from_i64(v: i64) -> Option<Self>;
}

macro_rules! int_value {
    ($($t:ty),*) => {$(
        impl IntValue for $t {
            const MIN: i128 = <$t>::MIN as i128;
            const MAX: i128 = if (<$t>::MAX as u128) > (i128::MAX as u128) {
                i128::MAX
            } else {
                <$t>::MAX as i128
            };
            fn to_i64(&self) -> i64 {
                i64::try_from(*self).unwrap_or(if *self > 0 as $t { i64::MAX } else { i64::MIN })
            }
            fn from_i64(v: i64) -> Option<Self> {
                <$t>::try_from(v).ok()
            }
        }
    )*};
}
int_value!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize);

/// The float distribution of a field (checked at compile time by the macro).
pub fn float_dist(low: f64, high: f64, log: bool, step: Option<f64>) -> Result<FloatDistribution> {
    FloatDistribution::with(low, high, log, step)
}

/// The integer distribution of a field (checked at compile time by the macro).
pub fn int_dist(low: i64, high: i64, log: bool, step: i64) -> Result<IntDistribution> {
    IntDistribution::with(low, high, log, step)
}

/// The distribution of a field as a [`Distribution`], for descriptions.
pub fn any<D: Into<Distribution>>(d: Result<D>) -> Result<Distribution> {
    d.map(Into::into)
}

/// The integer field value of a start-up check's point (see [`Region`]):
/// `None` when the internal value is not an integer that fits `T`.
pub fn int_at<T: IntValue>(internal: f64) -> Option<T> {
    if internal.fract() != 0.0 || !(i64::MIN as f64..i64::MAX as f64).contains(&internal) {
        return None;
    }
    T::from_i64(internal as i64)
}

/// Reports a space's [`SpaceDescription::problems`](super::SpaceDescription)
/// (constraints that contradict under conditions the macro could not rule out
/// at compile time) once, when the first trial samples the space: as a
/// `tracing` warning, or on standard error when no `tracing` subscriber is
/// installed, so the message is seen before any trial runs into it. Called by
/// the code `#[search_space]` generates; [`super::SearchSpace::check`] turns
/// the same problems into an error for callers who want to stop instead.
pub fn report_problems(description: &super::SpaceDescription) {
    let listened =
        tracing::dispatcher::get_default(|d| !d.is::<tracing::subscriber::NoSubscriber>());
    for problem in &description.problems {
        if listened {
            tracing::warn!(space = %description.name, "search space `{}`: {problem}", description.name);
        } else {
            eprintln!("warning: search space `{}`: {problem}", description.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_keeps_the_intersection_and_names_each_constraint_once() {
        let mut n = Narrow::new();
        n.keep(&[8, 16, 32], |v| *v <= 16, "a");
        n.keep(&[8, 16, 32], |v| *v >= 16, "b");
        n.keep(&[8, 16, 32], |v| *v >= 16, "b");
        assert_eq!(n.choice_support(), Support::Choices(vec![1]));
        assert_eq!(n.by, vec!["a", "b"]);
        let e = n.outcome(Error::EmptySupport {
            name: "x".into(),
            reason: "none".into(),
        });
        assert!(
            matches!(&e, TrialError::Infeasible(m) if m.contains("`a` and `b`")),
            "{e:?}"
        );
    }

    #[test]
    fn an_untouched_narrow_is_the_full_support() {
        let n = Narrow::new();
        assert_eq!(n.range_support(), Support::Full);
        assert_eq!(n.choice_support(), Support::Full);
        let mut m = Narrow::new();
        m.at_most(4.0, "c");
        assert_eq!(m.range_support(), Support::range(f64::NEG_INFINITY, 4.0));
    }

    #[test]
    fn ints_convert_only_when_they_fit() {
        assert_eq!(u8::from_i64(300), None);
        assert_eq!(u8::from_i64(3), Some(3));
        assert_eq!(u64::MAX.to_i64(), i64::MAX);
        assert_eq!(i128::MIN.to_i64(), i64::MIN);
        assert_eq!(FloatValue::to_f64(&0.1f32), 0.1);
    }

    #[test]
    fn a_points_integer_value_converts_only_when_it_fits() {
        assert_eq!(int_at::<u8>(200.0), Some(200));
        assert_eq!(int_at::<u8>(300.0), None);
        assert_eq!(int_at::<i32>(2.5), None);
        assert_eq!(int_at::<i64>(f64::NAN), None);
        assert_eq!(int_at::<i64>(1e300), None);
    }

    #[test]
    fn type_limits_for_the_compile_time_range_checks() {
        assert_eq!(<u8 as IntValue>::MAX, 255);
        assert_eq!(<i8 as IntValue>::MIN, -128);
        assert_eq!(<u128 as IntValue>::MAX, i128::MAX);
        assert_eq!(<i128 as IntValue>::MIN, i128::MIN);
        assert_eq!(<f32 as FloatValue>::MAX, f64::from(f32::MAX));
        assert_eq!(<f64 as FloatValue>::MAX, f64::MAX);
    }
}

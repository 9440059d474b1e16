//! Typed parameter values and categorical choices.

use std::fmt;

/// One categorical choice: the JSON scalars Optuna allows (`None`, bool, int, float, str).
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    /// Python's `None` / JSON `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
}

impl Choice {
    /// Identity used for duplicate detection and lookup: kinds must match
    /// (`3` and `3.0` are different choices, as they are in Optuna's JSON).
    pub fn same_as(&self, other: &Choice) -> bool {
        match (self, other) {
            (Choice::Float(a), Choice::Float(b)) => a == b || (a.is_nan() && b.is_nan()),
            _ => self == other,
        }
    }

    /// The JSON value of this choice.
    pub fn to_json_value(&self) -> serde_json::Value {
        match self {
            Choice::Null => serde_json::Value::Null,
            Choice::Bool(b) => (*b).into(),
            Choice::Int(i) => (*i).into(),
            Choice::Float(x) => serde_json::Number::from_f64(*x)
                .map(serde_json::Value::Number)
                .unwrap_or(serde_json::Value::Null),
            Choice::Str(s) => s.clone().into(),
        }
    }

    /// Reads a choice from a JSON scalar; arrays and objects are rejected.
    pub fn from_json_value(v: &serde_json::Value) -> Option<Choice> {
        Some(match v {
            serde_json::Value::Null => Choice::Null,
            serde_json::Value::Bool(b) => Choice::Bool(*b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) if !n.is_f64() => Choice::Int(i),
                _ => Choice::Float(n.as_f64()?),
            },
            serde_json::Value::String(s) => Choice::Str(s.clone()),
            _ => return None,
        })
    }

    /// The string, if this choice is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Choice::Str(s) => Some(s),
            _ => None,
        }
    }
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Choice::Null => write!(f, "null"),
            Choice::Bool(b) => write!(f, "{b}"),
            Choice::Int(i) => write!(f, "{i}"),
            Choice::Float(x) => write!(f, "{}", super::python_float_repr(*x)),
            Choice::Str(s) => write!(f, "{s:?}"),
        }
    }
}

macro_rules! choice_from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Choice {
            fn from(v: $t) -> Self {
                Choice::Int(v as i64)
            }
        }
    )*};
}
choice_from_int!(i8, i16, i32, i64, u8, u16, u32, isize);

impl From<usize> for Choice {
    fn from(v: usize) -> Self {
        Choice::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<u64> for Choice {
    fn from(v: u64) -> Self {
        Choice::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<f64> for Choice {
    fn from(v: f64) -> Self {
        Choice::Float(v)
    }
}
impl From<f32> for Choice {
    fn from(v: f32) -> Self {
        // Through the shortest decimal form, so 0.1f32 becomes 0.1, not 0.10000000149.
        Choice::Float(v.to_string().parse().unwrap_or(f64::from(v)))
    }
}
impl From<bool> for Choice {
    fn from(v: bool) -> Self {
        Choice::Bool(v)
    }
}
impl From<&str> for Choice {
    fn from(v: &str) -> Self {
        Choice::Str(v.to_owned())
    }
}
impl From<String> for Choice {
    fn from(v: String) -> Self {
        Choice::Str(v)
    }
}
impl From<&String> for Choice {
    fn from(v: &String) -> Self {
        Choice::Str(v.clone())
    }
}
impl<T: Into<Choice>> From<Option<T>> for Choice {
    fn from(v: Option<T>) -> Self {
        v.map_or(Choice::Null, Into::into)
    }
}

/// A parameter value in its external (typed) form.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    /// Value of a float distribution.
    Float(f64),
    /// Value of an int distribution.
    Int(i64),
    /// Value of a categorical distribution.
    Choice(Choice),
}

impl ParamValue {
    /// The value as f64 if it is a float or an int (ints widen).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            ParamValue::Float(x) => Some(*x),
            ParamValue::Int(i) => Some(*i as f64),
            ParamValue::Choice(Choice::Float(x)) => Some(*x),
            ParamValue::Choice(Choice::Int(i)) => Some(*i as f64),
            ParamValue::Choice(_) => None,
        }
    }

    /// The value as i64 if it is an int (or an int choice).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            ParamValue::Int(i) | ParamValue::Choice(Choice::Int(i)) => Some(*i),
            _ => None,
        }
    }

    /// The choice, if this is a categorical value.
    pub fn as_choice(&self) -> Option<&Choice> {
        match self {
            ParamValue::Choice(c) => Some(c),
            _ => None,
        }
    }

    /// The value viewed as a categorical choice (numbers become numeric choices).
    pub fn to_choice(&self) -> Choice {
        match self {
            ParamValue::Float(x) => Choice::Float(*x),
            ParamValue::Int(i) => Choice::Int(*i),
            ParamValue::Choice(c) => c.clone(),
        }
    }

    /// JSON value as Optuna writes it in `fixed_params` and `best_params`.
    pub fn to_json_value(&self) -> serde_json::Value {
        match self {
            ParamValue::Float(x) => Choice::Float(*x).to_json_value(),
            ParamValue::Int(i) => (*i).into(),
            ParamValue::Choice(c) => c.to_json_value(),
        }
    }

    /// Reads a value from JSON; numbers become Int or Float, the rest choices.
    pub fn from_json_value(v: &serde_json::Value) -> Option<ParamValue> {
        Some(match Choice::from_json_value(v)? {
            Choice::Int(i) => ParamValue::Int(i),
            Choice::Float(x) => ParamValue::Float(x),
            c => ParamValue::Choice(c),
        })
    }
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Float(x) => write!(f, "{x}"),
            ParamValue::Int(i) => write!(f, "{i}"),
            ParamValue::Choice(c) => write!(f, "{c}"),
        }
    }
}

impl From<f64> for ParamValue {
    fn from(v: f64) -> Self {
        ParamValue::Float(v)
    }
}
impl From<i64> for ParamValue {
    fn from(v: i64) -> Self {
        ParamValue::Int(v)
    }
}
impl From<Choice> for ParamValue {
    fn from(v: Choice) -> Self {
        ParamValue::Choice(v)
    }
}
impl From<&str> for ParamValue {
    fn from(v: &str) -> Self {
        ParamValue::Choice(Choice::Str(v.to_owned()))
    }
}
impl From<bool> for ParamValue {
    fn from(v: bool) -> Self {
        ParamValue::Choice(Choice::Bool(v))
    }
}

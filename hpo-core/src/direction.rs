//! Optimisation directions.

use std::fmt;
use std::str::FromStr;

/// Whether an objective is minimised or maximised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Direction {
    /// Smaller is better.
    #[default]
    Minimize,
    /// Larger is better.
    Maximize,
}

impl Direction {
    /// Optuna's member name (`"MINIMIZE"`), as stored in `study_directions`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Minimize => "MINIMIZE",
            Direction::Maximize => "MAXIMIZE",
        }
    }

    /// Whether `a` is strictly better than `b` in this direction (NaN is never better).
    pub fn is_better(self, a: f64, b: f64) -> bool {
        match self {
            Direction::Minimize => a < b,
            Direction::Maximize => a > b,
        }
    }

    /// `value` turned into a loss (smaller is better) for this direction.
    pub fn to_loss(self, value: f64) -> f64 {
        match self {
            Direction::Minimize => value,
            Direction::Maximize => -value,
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Direction {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_uppercase().as_str() {
            "MINIMIZE" => Ok(Direction::Minimize),
            "MAXIMIZE" => Ok(Direction::Maximize),
            _ => Err(crate::Error::Parse {
                what: "study direction".into(),
                reason: format!("`{s}` is neither MINIMIZE nor MAXIMIZE"),
                source: None,
            }),
        }
    }
}

//! A human-readable description of a search space.

use crate::distribution::Distribution;
use crate::error::Error;
use std::fmt;

/// What one field of a search space is.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ParamKind {
    /// A searched parameter drawn from `distribution`.
    Searched {
        /// The declared distribution (what is stored).
        distribution: Distribution,
        /// The condition under which the parameter exists, as written
        /// (`head_layers > 0`); `None` when it always exists.
        active_if: Option<String>,
    },
    /// A field that is not searched, with its value as written.
    Fixed {
        /// The expression, as written (`100`).
        value: String,
    },
}

/// One field of a search space.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamDescription {
    /// The parameter name (the field name).
    pub name: String,
    /// Whether it is searched, and how.
    pub kind: ParamKind,
}

/// The parameters and constraints of a [`super::SearchSpace`].
///
/// `Display` renders one line per field and one per constraint:
///
/// ```text
/// Criteria
///   lr            float[0.000001, 0.0005] log
///   head_hidden   int[64, 1024] log  (only if head_layers > 0)
///   epochs        fixed = 100
/// constraints
///   if model.is_heavy() { batch_size <= 16 }
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SpaceDescription {
    /// The name of the configuration type.
    pub name: String,
    /// Every field, in declaration (and sampling) order.
    pub params: Vec<ParamDescription>,
    /// The struct's constraints, as written.
    pub constraints: Vec<String>,
    /// What makes the space unusable: distributions that could not be built
    /// (the macro checks them at compile time, so only in a space written by
    /// hand), and constraints that contradict each other when their
    /// conditions can hold together (found by the macro's start-up search).
    /// [`SpaceDescription::check`] turns them into an error.
    pub problems: Vec<String>,
}

impl SpaceDescription {
    /// An empty description of the type `name`.
    pub fn new(name: impl Into<String>) -> Self {
        SpaceDescription {
            name: name.into(),
            ..Self::default()
        }
    }

    /// Adds a searched parameter; a distribution that failed to build is
    /// recorded in [`SpaceDescription::problems`] instead.
    pub fn searched(
        mut self,
        name: &str,
        distribution: crate::Result<Distribution>,
        active_if: Option<&str>,
    ) -> Self {
        match distribution {
            Ok(distribution) => self.params.push(ParamDescription {
                name: name.to_owned(),
                kind: ParamKind::Searched {
                    distribution,
                    active_if: active_if.map(str::to_owned),
                },
            }),
            Err(e) => self.problems.push(format!("`{name}`: {e}")),
        }
        self
    }

    /// Adds a fixed field.
    pub fn fixed(mut self, name: &str, value: &str) -> Self {
        self.params.push(ParamDescription {
            name: name.to_owned(),
            kind: ParamKind::Fixed {
                value: value.to_owned(),
            },
        });
        self
    }

    /// Adds a constraint.
    pub fn constraint(mut self, text: &str) -> Self {
        self.constraints.push(text.to_owned());
        self
    }

    /// Records a problem that makes the space unusable.
    pub fn problem(mut self, message: &str) -> Self {
        self.problems.push(message.to_owned());
        self
    }

    /// `Ok` when the space has no [`SpaceDescription::problems`]; otherwise an
    /// [`Error::InvalidConfig`] naming every problem (for example both
    /// constraints of a contradiction), to report before the first trial.
    pub fn check(&self) -> crate::Result<()> {
        if self.problems.is_empty() {
            return Ok(());
        }
        Err(Error::InvalidConfig(format!(
            "search space `{}`: {}",
            self.name,
            self.problems.join("; ")
        )))
    }

    /// The description of the parameter `name`, if there is one.
    pub fn param(&self, name: &str) -> Option<&ParamDescription> {
        self.params.iter().find(|p| p.name == name)
    }

    /// The declared distribution of the searched parameter `name`.
    pub fn distribution(&self, name: &str) -> Option<&Distribution> {
        match &self.param(name)?.kind {
            ParamKind::Searched { distribution, .. } => Some(distribution),
            ParamKind::Fixed { .. } => None,
        }
    }
}

impl fmt::Display for SpaceDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.name)?;
        let width = self.params.iter().map(|p| p.name.len()).max().unwrap_or(0);
        for p in &self.params {
            match &p.kind {
                ParamKind::Searched {
                    distribution,
                    active_if,
                } => {
                    write!(f, "  {:width$}  {distribution}", p.name)?;
                    if let Some(c) = active_if {
                        write!(f, "  (only if {c})")?;
                    }
                    writeln!(f)?;
                }
                ParamKind::Fixed { value } => writeln!(f, "  {:width$}  fixed = {value}", p.name)?,
            }
        }
        if !self.constraints.is_empty() {
            writeln!(f, "constraints")?;
            for c in &self.constraints {
                writeln!(f, "  {c}")?;
            }
        }
        for p in &self.problems {
            writeln!(f, "invalid: {p}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_fails_naming_every_problem_and_passes_without_one() {
        let ok = SpaceDescription::new("S").constraint("if a { x <= 1 }");
        assert!(ok.check().is_ok());
        let bad = ok.problem("first").problem("second");
        let err = bad.check().unwrap_err();
        assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
        assert_eq!(
            err.to_string(),
            "invalid configuration: search space `S`: first; second"
        );
        assert!(bad.to_string().contains("invalid: first\ninvalid: second"));
    }
}

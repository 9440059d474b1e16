//! Attribute and key names, in one place so parser and messages agree.

/// Field attribute: `#[param(...)]`.
pub const PARAM: &str = "param";
/// Struct attribute: `#[constraint(if cond { rules })]`.
pub const CONSTRAINT: &str = "constraint";
/// Derive helper of `Choice`: `#[choice(crate = "...")]`.
pub const CHOICE_ATTR: &str = "choice";

/// Kind: a float range.
pub const FLOAT: &str = "float";
/// Kind: an integer range.
pub const INT: &str = "int";
/// Kind: a boolean.
pub const BOOL: &str = "bool";
/// Kind: categorical, enum variants or literals.
pub const CHOICE: &str = "choice";
/// Kind: not searched, set to an expression.
pub const FIXED: &str = "fixed";
/// Kind: not searched, set to `Default::default()`.
pub const DEFAULT: &str = "default";
/// Activation condition of an `Option` field.
pub const ACTIVE_IF: &str = "active_if";
/// Range option: log scale.
pub const LOG: &str = "log";
/// Range option: discretisation step.
pub const STEP: &str = "step";
/// Macro argument: path of the facade crate.
pub const CRATE: &str = "crate";

/// Every key accepted inside `#[param(...)]`, for "expected one of" messages.
pub const PARAM_KEYS: &str = "`float(..)`, `int(..)`, `bool`, `choice`, `choice(..)`, `fixed = ..`, `default`, `active_if = ..`";

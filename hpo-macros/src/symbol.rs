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

/// The macro's own attribute, to spot it applied twice.
pub const SEARCH_SPACE: &str = "search_space";

/// Whether the attribute name `name` looks like a misspelling of `target`
/// (`parm`, `params`, `pram`, `Param`, `constraints`): equal but for case, or
/// one edit apart (two for long names), counting a swap of neighbours as one
/// edit. Such an attribute gets one "did you mean" error and is removed,
/// instead of a "missing #[param]" error and rustc's own. The bound is tight
/// so that other crates' helper attributes (`parse`, `serde`) are left alone.
pub fn is_typo_of(name: &str, target: &str) -> bool {
    if name == target || name.len() < 3 {
        return false;
    }
    if name.eq_ignore_ascii_case(target) {
        return true;
    }
    let max = if target.len() <= 5 { 1 } else { 2 };
    edit_distance(name, target) <= max
}

/// Edit distance over chars with adjacent swaps (optimal string alignment).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // d[i][j]: distance between the first i chars of a and the first j of b.
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    if let Some(first) = d.first_mut() {
        for (j, cell) in first.iter_mut().enumerate() {
            *cell = j;
        }
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_misses_of_param_and_constraint_are_typos_and_others_are_not() {
        for typo in ["parm", "params", "Param", "pram", "paran", "parma"] {
            assert!(is_typo_of(typo, PARAM), "{typo}");
        }
        for typo in [
            "constraints",
            "constrant",
            "Constraint",
            "contraint",
            "constriant",
        ] {
            assert!(is_typo_of(typo, CONSTRAINT), "{typo}");
        }
        for other in [
            "param", "serde", "doc", "arg", "allow", "name", "form", "cfg",
        ] {
            assert!(!is_typo_of(other, PARAM), "{other}");
        }
        for other in ["constraint", "derive", "serde", "repr"] {
            assert!(!is_typo_of(other, CONSTRAINT), "{other}");
        }
    }
}

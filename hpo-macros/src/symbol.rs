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
/// (`parm`, `params`, `Param`, `constraints`): at most two edits apart, or
/// equal but for case. Such an attribute gets one "did you mean" error and
/// is removed, instead of a "missing #[param]" error and rustc's own.
pub fn is_typo_of(name: &str, target: &str) -> bool {
    if name == target || name.len() < 3 {
        return false;
    }
    if name.eq_ignore_ascii_case(target) {
        return true;
    }
    edit_distance(name, target) <= 2
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_misses_of_param_and_constraint_are_typos_and_others_are_not() {
        for typo in ["parm", "params", "Param", "pram", "paran"] {
            assert!(is_typo_of(typo, PARAM), "{typo}");
        }
        for typo in ["constraints", "constrant", "Constraint", "contraint"] {
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

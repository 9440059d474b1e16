//! What a condition says about range fields, as bounds the start-up search
//! can reason with.
//!
//! The start-up search (`startup.rs`) enumerates fields with few values; a
//! float field or a wide integer range cannot be enumerated, so what the
//! conditions say about it must be read from their syntax. A condition is
//! *decided* when every part of it that reads such a field is built from:
//!
//! * a comparison `field < lit`, `<=`, `>`, `>=`, `==` or `!=` of the field
//!   itself (not optional) with a number literal (possibly negated), either
//!   side first;
//! * `&&`, `||`, `!` and parentheses over such comparisons and over any
//!   expression that reads no such field (`small`, `model.is_heavy()`).
//!
//! [`dnf`] rewrites a decided condition, or its negation, in disjunctive
//! normal form over [`Bound`]s: a list of alternatives, each a conjunction.
//! Parts that read no range field become no bound at all: the generated
//! search evaluates them, like everything else, as compiled code. Anything
//! else that reads a range field (arithmetic, a method call, a constant, an
//! `Option` field) is not decided, and the search leaves the pair of
//! constraints to run time.

use crate::ast::{Input, Kind};
use crate::attr::{lit_value, Op, Rule};
use crate::valid::read_fields;
use std::collections::BTreeSet;
use syn::{BinOp, Expr, UnOp};

/// The most alternatives one rewritten condition may have.
const MAX_ALTERNATIVES: usize = 64;

/// A comparison operator, with the field on the left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
}

/// `field <cmp> value`, the field an index into `input.fields`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bound {
    pub field: usize,
    pub cmp: Cmp,
    pub value: f64,
}

/// Alternatives of which at least one holds, each a conjunction of bounds.
pub type Dnf = Vec<Vec<Bound>>;

/// The fields a condition may bound: float and integer ranges that are not
/// optional.
pub fn is_range(input: &Input, i: usize) -> bool {
    input
        .fields
        .get(i)
        .is_some_and(|f| !f.optional && matches!(f.kind, Some(Kind::Float(_) | Kind::Int(_))))
}

/// Where `e` holds (or, with `holds == false`, where it does not), over the
/// fields in `ranges`; `None` when `e` is not decided (see the module docs)
/// or has too many alternatives.
pub fn dnf(input: &Input, ranges: &BTreeSet<usize>, e: &Expr, holds: bool) -> Option<Dnf> {
    if !read_fields(input, e).iter().any(|i| ranges.contains(i)) {
        return Some(vec![Vec::new()]);
    }
    let out = match e {
        Expr::Paren(p) => dnf(input, ranges, &p.expr, holds)?,
        Expr::Group(g) => dnf(input, ranges, &g.expr, holds)?,
        Expr::Unary(u) if matches!(u.op, UnOp::Not(_)) => dnf(input, ranges, &u.expr, !holds)?,
        Expr::Binary(b) => match b.op {
            BinOp::And(_) | BinOp::Or(_) => {
                let left = dnf(input, ranges, &b.left, holds)?;
                let right = dnf(input, ranges, &b.right, holds)?;
                // `a && b` holds, or `a || b` fails (`!a && !b`): both sides.
                if matches!(b.op, BinOp::And(_)) == holds {
                    let mut out = Vec::new();
                    for l in &left {
                        for r in &right {
                            out.push(l.iter().chain(r).copied().collect());
                            if out.len() > MAX_ALTERNATIVES {
                                return None;
                            }
                        }
                    }
                    out
                } else {
                    left.into_iter().chain(right).collect()
                }
            }
            _ => compare(input, ranges, b, holds)?,
        },
        _ => return None,
    };
    (out.len() <= MAX_ALTERNATIVES).then_some(out)
}

/// A comparison of a range field with a number literal.
fn compare(
    input: &Input,
    ranges: &BTreeSet<usize>,
    b: &syn::ExprBinary,
    holds: bool,
) -> Option<Dnf> {
    let op = match b.op {
        BinOp::Lt(_) => Cmp::Lt,
        BinOp::Le(_) => Cmp::Le,
        BinOp::Gt(_) => Cmp::Gt,
        BinOp::Ge(_) => Cmp::Ge,
        BinOp::Eq(_) | BinOp::Ne(_) => Cmp::Eq,
        _ => return None,
    };
    let equal = !matches!(b.op, BinOp::Ne(_));
    let (field, value, op) = match (field_of(input, ranges, &b.left), number(&b.right)) {
        (Some(f), Some(v)) => (f, v, op),
        _ => {
            let f = field_of(input, ranges, &b.right)?;
            let v = number(&b.left)?;
            // `lit < field` is `field > lit`.
            let flipped = match op {
                Cmp::Lt => Cmp::Gt,
                Cmp::Le => Cmp::Ge,
                Cmp::Gt => Cmp::Lt,
                Cmp::Ge => Cmp::Le,
                Cmp::Eq => Cmp::Eq,
            };
            (f, v, flipped)
        }
    };
    let bound = |cmp| Bound { field, cmp, value };
    // Fields are never NaN, so `!(x < v)` is `x >= v`.
    Some(match (op, holds == equal) {
        (Cmp::Lt, true) | (Cmp::Ge, false) => vec![vec![bound(Cmp::Lt)]],
        (Cmp::Le, true) | (Cmp::Gt, false) => vec![vec![bound(Cmp::Le)]],
        (Cmp::Gt, true) | (Cmp::Le, false) => vec![vec![bound(Cmp::Gt)]],
        (Cmp::Ge, true) | (Cmp::Lt, false) => vec![vec![bound(Cmp::Ge)]],
        (Cmp::Eq, true) => vec![vec![bound(Cmp::Eq)]],
        (Cmp::Eq, false) => vec![vec![bound(Cmp::Lt)], vec![bound(Cmp::Gt)]],
    })
}

/// The range field `e` names (bare, or in parentheses).
fn field_of(input: &Input, ranges: &BTreeSet<usize>, e: &Expr) -> Option<usize> {
    match e {
        Expr::Paren(p) => field_of(input, ranges, &p.expr),
        Expr::Group(g) => field_of(input, ranges, &g.expr),
        Expr::Path(p) if p.qself.is_none() => {
            let (i, _) = input.field(p.path.get_ident()?)?;
            ranges.contains(&i).then_some(i)
        }
        _ => None,
    }
}

/// The value of a number literal (possibly negated or in parentheses).
fn number(e: &Expr) -> Option<f64> {
    lit_value(e)?.as_f64()
}

/// The bounds a narrowing of a range field places on it (`width <= 64` is
/// `width <= 64`); `None` when its value is not a number literal.
pub fn rule_bounds(input: &Input, rule: &Rule) -> Option<Vec<Bound>> {
    let (field, _) = input.field(&rule.field)?;
    let value = number(rule.values.first()?)?;
    let bound = |cmp| Bound { field, cmp, value };
    Some(match rule.op.value {
        Op::Le => vec![bound(Cmp::Le)],
        Op::Ge => vec![bound(Cmp::Ge)],
        Op::Eq => vec![bound(Cmp::Eq)],
        Op::In => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctxt::Ctxt;
    use syn::parse_quote;

    fn space() -> syn::ItemStruct {
        parse_quote! {
            struct S {
                #[param(float(1e-5..=1e-1, log))]
                lr: f64,
                #[param(int(1..=100000))]
                steps: u32,
                #[param(bool)]
                small: bool,
                #[param(float(0.0..=1.0), active_if = small)]
                drop: Option<f64>,
            }
        }
    }

    /// The rewritten condition, as `(field, cmp, value)` per alternative.
    fn rewrite(cond: Expr, holds: bool) -> Option<Vec<Vec<(String, Cmp, f64)>>> {
        let item = space();
        let cx = Ctxt::new();
        let input = Input::from_syn(&cx, &item, None);
        assert!(cx.check().is_ok());
        let ranges: BTreeSet<usize> = (0..input.fields.len())
            .filter(|&i| is_range(&input, i))
            .collect();
        let out = dnf(&input, &ranges, &cond, holds)?;
        Some(
            out.into_iter()
                .map(|alt| {
                    alt.into_iter()
                        .map(|b| (input.fields[b.field].name(), b.cmp, b.value))
                        .collect()
                })
                .collect(),
        )
    }

    fn b(name: &str, cmp: Cmp, value: f64) -> (String, Cmp, f64) {
        (name.to_owned(), cmp, value)
    }

    #[test]
    fn comparisons_with_literals_become_bounds_either_side_first() {
        assert_eq!(
            rewrite(parse_quote!(lr > 1e-3), true),
            Some(vec![vec![b("lr", Cmp::Gt, 1e-3)]])
        );
        assert_eq!(
            rewrite(parse_quote!(1e-3 >= lr), true),
            Some(vec![vec![b("lr", Cmp::Le, 1e-3)]])
        );
        assert_eq!(
            rewrite(parse_quote!((steps) == 5_000), true),
            Some(vec![vec![b("steps", Cmp::Eq, 5000.0)]])
        );
        assert_eq!(
            rewrite(parse_quote!(lr > -(1.5)), true),
            Some(vec![vec![b("lr", Cmp::Gt, -1.5)]])
        );
    }

    #[test]
    fn negation_flips_strictness_and_splits_equality() {
        assert_eq!(
            rewrite(parse_quote!(lr < 1e-3), false),
            Some(vec![vec![b("lr", Cmp::Ge, 1e-3)]])
        );
        assert_eq!(
            rewrite(parse_quote!(!(lr <= 1e-3)), true),
            Some(vec![vec![b("lr", Cmp::Gt, 1e-3)]])
        );
        assert_eq!(
            rewrite(parse_quote!(steps != 10), true),
            Some(vec![
                vec![b("steps", Cmp::Lt, 10.0)],
                vec![b("steps", Cmp::Gt, 10.0)]
            ])
        );
        assert_eq!(
            rewrite(parse_quote!(steps == 10), false),
            rewrite(parse_quote!(steps != 10), true)
        );
    }

    #[test]
    fn and_or_not_distribute_and_other_fields_add_no_bound() {
        // `small` is enumerated: it is evaluated as code, not bounded.
        assert_eq!(
            rewrite(parse_quote!(small && lr > 1e-3 && lr <= 1e-2), true),
            Some(vec![vec![b("lr", Cmp::Gt, 1e-3), b("lr", Cmp::Le, 1e-2)]])
        );
        assert_eq!(
            rewrite(parse_quote!(small && lr > 1e-3), false),
            Some(vec![vec![], vec![b("lr", Cmp::Le, 1e-3)]])
        );
        assert_eq!(
            rewrite(parse_quote!(lr > 1e-2 || steps < 10), true),
            Some(vec![
                vec![b("lr", Cmp::Gt, 1e-2)],
                vec![b("steps", Cmp::Lt, 10.0)]
            ])
        );
        // De Morgan: `!(a || b)` is `!a && !b`.
        assert_eq!(
            rewrite(parse_quote!(!(lr > 1e-2 || steps < 10)), true),
            Some(vec![vec![
                b("lr", Cmp::Le, 1e-2),
                b("steps", Cmp::Ge, 10.0)
            ]])
        );
        assert_eq!(rewrite(parse_quote!(small), true), Some(vec![vec![]]));
    }

    #[test]
    fn forms_that_are_not_decided_give_up() {
        let undecided: [Expr; 6] = [
            parse_quote!(lr * 2.0 > 1e-3),
            parse_quote!(lr > steps as f64),
            parse_quote!(lr.ln() > -3.0),
            parse_quote!(lr > MIN_LR),
            parse_quote!(small && lr + 1.0 > 2.0),
            parse_quote!(if small { lr > 1e-3 } else { true }),
        ];
        for cond in undecided {
            let text = quote::ToTokens::to_token_stream(&cond).to_string();
            assert_eq!(rewrite(cond, true), None, "{text}");
        }
        // `drop` is optional, so not a range field: its condition is
        // evaluated as code and adds no bound.
        assert_eq!(
            rewrite(parse_quote!(drop == Some(0.5)), true),
            Some(vec![vec![]])
        );
    }

    #[test]
    fn too_many_alternatives_give_up() {
        // Each `!=` is two alternatives; seven of them under `&&` are 128.
        let cond: Expr = parse_quote!(
            steps != 1
                && steps != 2
                && steps != 3
                && steps != 4
                && steps != 5
                && steps != 6
                && steps != 7
        );
        assert_eq!(rewrite(cond, true), None);
    }
}

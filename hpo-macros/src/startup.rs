//! The start-up check for contradictions the macro cannot decide alone.
//!
//! Two constraints with different conditions may narrow one field to nothing
//! (`if small { width <= 64 }`, `if tight { width >= 128 }`): every trial in
//! which both conditions hold is infeasible. Whether they can hold together
//! depends on the user's condition code, so the macro generates a search, run
//! by `describe()` (and so by `SearchSpace::check()` before the first trial),
//! over every combination of the fields the two conditions read: each bound
//! as `sample` would bind it, skipping combinations that an `active_if` or
//! another constraint rules out. A reachable combination where both hold is
//! recorded as a problem of the description naming both constraints.
//!
//! Fields with few values are enumerated (bools, choices, enums, integer
//! ranges of up to 4,096 values, fixed fields). Float fields and wider
//! integer ranges are bounded instead: `bounds.rs` reads what the two
//! conditions, the constraints narrowing a field involved and the
//! `active_if`s there say about them as alternatives of bounds, and
//! hpo-core's `Region` turns those into one point per box that the bounds
//! allow (`lr > 1e-2` and `lr > 1e-3` overlap above 1e-2; `lr < 1e-4` and
//! `lr > 1e-3` not at all). Each point is bound like an enumerated value and
//! checked by the same compiled conditions and narrowings, so a point found
//! is a trial `sample` can reach: a report is never a false alarm. When a
//! condition reads a float (or a wide range) in a form `bounds.rs` does not
//! decide, or there are too many combinations, the pair is left to run time,
//! where the Infeasible trial's message names both constraints as well.

use crate::ast::{Field, Input, Kind};
use crate::attr::{lit_value, Op, Rule};
use crate::bounds::{dnf, is_range, rule_bounds, Cmp, Dnf};
use crate::expand::{
    choices_decl, choices_var, default_value, float_dist, float_lit, int_dist, typed_lit,
    variants_fn,
};
use crate::ty::Prim;
use crate::valid::{contradictions, read_fields, same_condition};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use std::collections::BTreeSet;
use syn::ext::IdentExt;

/// The most combinations one check may visit (enumerated values times the
/// boxes of bounded fields).
const MAX_STATES: u128 = 100_000;
/// The most values of an integer range that is enumerated.
const MAX_INT_VALUES: u128 = 4_096;

/// Statements that add a problem to the description `__hpo_d` for each pair
/// of contradicting constraints whose conditions can hold together.
pub fn checks(input: &Input, p: &TokenStream) -> TokenStream {
    let mut out = TokenStream::new();
    let mut seen = BTreeSet::new();
    for c in contradictions(input) {
        if same_condition(input, &c) || !seen.insert((c.first, c.second)) {
            continue;
        }
        let (Some(first), Some(second)) = (
            input.constraints.get(c.first),
            input.constraints.get(c.second),
        ) else {
            continue;
        };
        let Some(search) = search(input, p, [c.first, c.second]) else {
            continue;
        };
        let msg = format!(
            "constraints `{}` and `{}` contradict: when both conditions hold, `{}` and `{}` leave \
             `{}` no value, so every such trial is infeasible; make the conditions exclusive or \
             the narrowings compatible",
            first.text, second.text, c.rule_a.text, c.rule_b.text, c.rule_a.field
        );
        out.extend(quote! {
            if #search {
                __hpo_d = __hpo_d.problem(#msg);
            }
        });
    }
    out
}

/// A block evaluating to `true` when some reachable combination makes the
/// conditions of both constraints in `pair` hold; `None` when the fields
/// involved cannot be enumerated nor bounded.
fn search(input: &Input, p: &TokenStream, pair: [usize; 2]) -> Option<TokenStream> {
    let conds = pair
        .iter()
        .map(|&c| input.constraints.get(c).map(|c| &c.cond))
        .collect::<Option<Vec<&syn::Expr>>>()?;
    let fields = closure(input, &conds);
    let mut states: u128 = 1;
    let mut loops: Vec<(TokenStream, TokenStream)> = Vec::new();
    let mut decls = TokenStream::new();
    let mut ranges: Vec<usize> = Vec::new();
    for &i in &fields {
        let f = input.fields.get(i)?;
        let ident = f.ident;
        let Some((domain, n)) = domain(f, p) else {
            if !is_range(input, i) {
                return None;
            }
            ranges.push(i);
            continue;
        };
        decls.extend(choices_decl(f));
        states = states.saturating_mul(n);
        if states > MAX_STATES {
            return None;
        }
        loops.push((quote!(#ident), domain));
    }
    let groups = if ranges.is_empty() {
        Vec::new()
    } else {
        groups(input, &ranges, &fields, pair)?
    };
    let boxes = groups
        .iter()
        .fold(1u128, |n, g| n.saturating_mul(g.len() as u128));
    if states.saturating_mul(boxes) > MAX_STATES {
        return None;
    }
    // Combinations that `sample` could not produce are skipped.
    let mut checks = TokenStream::new();
    for &i in &fields {
        let f = input.fields.get(i)?;
        if let (true, Some(cond)) = (f.optional, &f.active_if) {
            let ident = f.ident;
            let cond = &cond.value;
            checks.extend(quote! {
                __hpo_ok = __hpo_ok && ((#cond) == #ident.is_some());
            });
        }
    }
    let in_set: BTreeSet<usize> = fields.iter().copied().collect();
    for c in &input.constraints {
        let rules: Vec<TokenStream> = c
            .rules
            .iter()
            .filter_map(|r| {
                let (i, f) = input.field(&r.field)?;
                if !in_set.contains(&i) {
                    return None;
                }
                if ranges.contains(&i) {
                    // What the narrowing checks: the stored (internal) value.
                    holds_internal(f, r)
                } else {
                    holds(f, r)
                }
            })
            .collect();
        if rules.is_empty() {
            continue;
        }
        let cond = &c.cond;
        checks.extend(quote! {
            if __hpo_ok && (#cond) {
                __hpo_ok = #(#rules)&&*;
            }
        });
    }
    let conds = conds.iter();
    let ok = if checks.is_empty() {
        quote!(let __hpo_ok = true;)
    } else {
        quote!(let mut __hpo_ok = true;)
    };
    let mut body = quote! {
        #ok
        #checks
        if __hpo_ok #(&& (#conds))* {
            break '__hpo_search true;
        }
    };
    for (ident, domain) in loops.into_iter().rev() {
        body = quote! {
            for #ident in #domain {
                let _ = &#ident;
                #body
            }
        };
    }
    if !ranges.is_empty() {
        body = region_loop(input, p, &ranges, &groups, body)?;
    }
    Some(quote! {
        '__hpo_search: {
            #decls
            #body
            false
        }
    })
}

/// What must hold, over the range fields, for both conditions of `pair` to
/// hold in a reachable trial: one group per condition, per constraint that
/// narrows a field of `fields`, and per `active_if` there, each a list of
/// alternatives (see hpo-core's `Region`). `None` when one of them is not
/// decided (see `bounds.rs`).
///
/// A constraint holds where its rules hold or where its condition fails; an
/// `active_if` holds or fails (its field is `Some` or `None`). Parts that
/// read only enumerated fields add no bound: the search evaluates them on
/// each combination, so every point a group allows is checked by the
/// compiled conditions before it counts.
fn groups(input: &Input, ranges: &[usize], fields: &[usize], pair: [usize; 2]) -> Option<Vec<Dnf>> {
    let ranges: BTreeSet<usize> = ranges.iter().copied().collect();
    let in_set: BTreeSet<usize> = fields.iter().copied().collect();
    let mut out: Vec<Dnf> = Vec::new();
    let mut push = |group: Dnf| {
        if !group.iter().all(Vec::is_empty) || group.is_empty() {
            out.push(group);
        }
    };
    for &c in &pair {
        push(dnf(input, &ranges, &input.constraints.get(c)?.cond, true)?);
    }
    for (ci, c) in input.constraints.iter().enumerate() {
        let mut narrows = false;
        let mut rules_hold = Vec::new();
        for r in &c.rules {
            let Some((i, _)) = input.field(&r.field) else {
                continue;
            };
            if !in_set.contains(&i) {
                continue;
            }
            narrows = true;
            // A value that reads a range field (`x <= max_x`) ties two
            // fields together, which boxes cannot say.
            if r.values
                .iter()
                .any(|v| read_fields(input, v).iter().any(|j| ranges.contains(j)))
            {
                return None;
            }
            if ranges.contains(&i) {
                rules_hold.extend(rule_bounds(input, r)?);
            }
        }
        if !narrows {
            continue;
        }
        let mut group = vec![rules_hold];
        if !pair.contains(&ci) {
            group.extend(dnf(input, &ranges, &c.cond, false)?);
        }
        push(group);
    }
    for &i in fields {
        let Some(f) = input.fields.get(i) else {
            continue;
        };
        if let (true, Some(cond)) = (f.optional, &f.active_if) {
            let mut group = dnf(input, &ranges, &cond.value, true)?;
            group.extend(dnf(input, &ranges, &cond.value, false)?);
            push(group);
        }
    }
    Some(out)
}

/// `body` run once for each point of the region the groups describe, with
/// the range fields bound to the point's values.
fn region_loop(
    input: &Input,
    p: &TokenStream,
    ranges: &[usize],
    groups: &[Dnf],
    body: TokenStream,
) -> Option<TokenStream> {
    let slot = |field: usize| ranges.iter().position(|&r| r == field);
    let mut dists = Vec::new();
    let mut binds = TokenStream::new();
    for (k, &i) in ranges.iter().enumerate() {
        let f = input.fields.get(i)?;
        let ident = f.ident;
        let inner = f.inner;
        let x = internal_var(f);
        binds.extend(quote! {
            let #p::Option::Some(#x) = __hpo_point.get(#k).copied() else {
                continue;
            };
        });
        match f.kind.as_ref()? {
            Kind::Float(spec) => {
                let d = float_dist(p, spec);
                dists.push(quote!(#p::runtime::any(#d)));
                binds.extend(quote! {
                    let #ident: #inner = <#inner as #p::runtime::FloatValue>::from_f64(#x);
                });
            }
            Kind::Int(spec) => {
                let d = int_dist(p, spec);
                dists.push(quote!(#p::runtime::any(#d)));
                binds.extend(quote! {
                    let #p::Option::Some(#ident) = #p::runtime::int_at::<#inner>(#x) else {
                        continue;
                    };
                });
            }
            _ => return None,
        }
        binds.extend(quote!(let _ = (&#ident, &#x);));
    }
    let mut region = quote!(#p::runtime::Region::new(#p::Vec::from([#(#dists),*])));
    for group in groups {
        let mut alternatives = Vec::new();
        for alt in group {
            let mut bounds = Vec::new();
            for b in alt {
                let k = slot(b.field)?;
                let v = float_lit(b.value);
                let op = match b.cmp {
                    Cmp::Lt => quote!(Lt),
                    Cmp::Le => quote!(Le),
                    Cmp::Gt => quote!(Gt),
                    Cmp::Ge => quote!(Ge),
                    Cmp::Eq => quote!(Eq),
                };
                bounds.push(quote!((#k, #p::runtime::Bound::#op(#v))));
            }
            alternatives.push(quote!(&[#(#bounds),*]));
        }
        region = quote!(#region.any_of(&[#(#alternatives),*]));
    }
    Some(quote! {
        let __hpo_region = #region;
        for __hpo_point in __hpo_region.points() {
            #binds
            #body
        }
    })
}

/// The local holding a range field's stored (internal) value in the search.
fn internal_var(f: &Field) -> syn::Ident {
    format_ident!("__hpo_x_{}", f.ident.unraw())
}

/// The fields whose values decide whether `conds` can hold together: those
/// they read, and (repeatedly) those read by the `active_if` of an optional
/// one and by the conditions and values of constraints narrowing one.
/// Sorted, which is declaration (and binding) order.
fn closure(input: &Input, conds: &[&syn::Expr]) -> Vec<usize> {
    let mut set: BTreeSet<usize> = conds.iter().flat_map(|c| read_fields(input, c)).collect();
    loop {
        let mut next = set.clone();
        for &i in &set {
            let Some(f) = input.fields.get(i) else {
                continue;
            };
            if let Some(cond) = &f.active_if {
                next.extend(read_fields(input, &cond.value));
            }
            for c in &input.constraints {
                let mut narrows = false;
                for r in c.rules.iter().filter(|r| r.field == *f.ident) {
                    narrows = true;
                    // A narrowing value may read fields too (`width <= max_width`).
                    for v in &r.values {
                        next.extend(read_fields(input, v));
                    }
                }
                if narrows {
                    next.extend(read_fields(input, &c.cond));
                }
            }
        }
        if next == set {
            return set.into_iter().collect();
        }
        set = next;
    }
}

/// Every value a field can take, as an iterator expression of its declared
/// type, and how many; `None` when there are too many to enumerate.
fn domain(f: &Field, p: &TokenStream) -> Option<(TokenStream, u128)> {
    let inner = f.inner;
    let (values, n) = match f.kind.as_ref()? {
        Kind::Bool | Kind::Lits(_) => {
            let cv = choices_var(f);
            let n = match f.kind.as_ref()? {
                Kind::Lits(l) => l.len() as u128,
                _ => 2,
            };
            (quote!(#cv.iter().cloned()), n)
        }
        Kind::Enum => {
            // The variant count is known only to the compiler; estimate it.
            let v = variants_fn(f);
            (quote!(#p::runtime::variants_all(Self::#v())), 16)
        }
        Kind::Int(spec) => {
            let (lo, hi) = (spec.low.int?, spec.high.int?);
            let step = spec.step.as_ref().and_then(|s| s.int).unwrap_or(1);
            let n = u128::try_from((hi - lo) / step.max(1) + 1).ok()?;
            if n > MAX_INT_VALUES || i64::try_from(lo).is_err() || i64::try_from(hi).is_err() {
                return None;
            }
            let (lo, hi) = (lo as i64, hi as i64);
            let step = step.max(1) as usize;
            (
                quote! {
                    (#lo..=#hi)
                        .step_by(#step)
                        .filter_map(<#inner as #p::runtime::IntValue>::from_i64)
                },
                n,
            )
        }
        Kind::Fixed(e) => {
            let ty = f.ty;
            return Some((quote!(::core::iter::once::<#ty>(#e)), 1));
        }
        Kind::Default => {
            let ty = f.ty;
            let d = default_value(f);
            return Some((quote!(::core::iter::once::<#ty>(#d)), 1));
        }
        Kind::Float(_) => return None,
    };
    if f.optional {
        Some((
            quote!(::core::iter::once(#p::Option::None).chain((#values).map(#p::Option::Some))),
            n + 1,
        ))
    } else {
        Some((values, n))
    }
}

/// Whether the stored value of range field `f` in the search satisfies
/// `rule`, as the narrowing's support checks it (`groups` has made sure the
/// value is a number literal).
fn holds_internal(f: &Field, rule: &Rule) -> Option<TokenStream> {
    let x = internal_var(f);
    let v = float_lit(lit_value(rule.values.first()?)?.as_f64()?);
    Some(match rule.op.value {
        Op::Le => quote!((#x <= #v)),
        Op::Ge => quote!((#x >= #v)),
        Op::Eq => quote!((#x == #v)),
        Op::In => return None,
    })
}

/// Whether the bound value of `f` satisfies `rule` (an inactive optional
/// field is never narrowed).
fn holds(f: &Field, rule: &Rule) -> Option<TokenStream> {
    let ident = f.ident;
    let inner = f.inner;
    let pred = match f.kind.as_ref()? {
        Kind::Float(_) | Kind::Int(_) => {
            let v = rule.values.first()?;
            let v = match lit_value(v).and_then(|l| l.as_f64()) {
                Some(x) => float_lit(x),
                None => quote!(((#v) as f64)),
            };
            match rule.op.value {
                Op::Le => quote!((*__hpo_v as f64) <= #v),
                Op::Ge => quote!((*__hpo_v as f64) >= #v),
                Op::Eq => quote!((*__hpo_v as f64) == #v),
                Op::In => return None,
            }
        }
        Kind::Bool | Kind::Lits(_) | Kind::Enum => {
            let prim = if f.prim == Prim::String {
                Prim::Str
            } else {
                f.prim
            };
            let vals: Vec<TokenStream> = rule.values.iter().map(|e| typed_lit(prim, e)).collect();
            match rule.op.value {
                Op::Le => quote!(*__hpo_v <= #(#vals)*),
                Op::Ge => quote!(*__hpo_v >= #(#vals)*),
                Op::Eq | Op::In => quote!(#(*__hpo_v == #vals)||*),
            }
        }
        Kind::Fixed(_) | Kind::Default => return None,
    };
    let check = quote!((|__hpo_v: &#inner| -> bool { #pred }));
    Some(if f.optional {
        quote!(#ident.as_ref().is_none_or(#check))
    } else {
        quote!(#check(&#ident))
    })
}

//! Rules between fields: what conditions may read and what constraints may narrow.
//!
//! Fields are sampled in declaration order, so a condition may read only
//! fields declared before every field it affects, and a narrowing must leave
//! at least one value of the declared distribution.

use crate::ast::{Field, Input, Kind};
use crate::attr::{lit_value, Op, Rule};
use crate::ctxt::Ctxt;
use proc_macro2::TokenTree;
use quote::ToTokens;
use std::collections::BTreeSet;
use syn::visit::Visit;
use syn::{Expr, Ident};

pub fn check(cx: &Ctxt, input: &Input) {
    for (i, f) in input.fields.iter().enumerate() {
        if let Some(cond) = &f.active_if {
            check_reads(
                cx,
                input,
                &cond.value,
                i,
                &format!("`{}`", f.ident),
                "its `active_if`",
            );
        }
    }
    for c in &input.constraints {
        let mut targets: Vec<(usize, &Rule)> = Vec::new();
        for rule in &c.rules {
            let Some((i, f)) = input.field(&rule.field) else {
                cx.error_spanned_by(
                    &rule.field,
                    format!("unknown field `{}` in constraint", rule.field),
                );
                continue;
            };
            let Some(kind) = &f.kind else { continue };
            if !kind.is_searched() {
                cx.error_spanned_by(
                    &rule.field,
                    format!(
                        "`{}` is not searched (it is fixed), so a constraint cannot narrow it",
                        f.ident
                    ),
                );
                continue;
            }
            check_rule(cx, f, kind, rule);
            targets.push((i, rule));
        }
        if let Some(&(first, rule)) = targets.iter().min_by_key(|(i, _)| *i) {
            check_reads(
                cx,
                input,
                &c.cond,
                first,
                &format!("`{}`", rule.field),
                "this constraint",
            );
        }
    }
}

/// Every field a condition reads must come before `before` (the field it affects).
fn check_reads(cx: &Ctxt, input: &Input, cond: &Expr, before: usize, affected: &str, what: &str) {
    let mut reads = Reads::default();
    reads.visit_expr(cond);
    let known: BTreeSet<String> = input.fields.iter().map(Field::name).collect();
    for id in &reads.idents {
        let name = id.to_string();
        if reads.bound.contains(&name) {
            continue;
        }
        match input.field(id) {
            Some((j, f)) if j >= before => {
                let msg = if j == before {
                    format!("a condition cannot read {affected} itself: it is sampled after the condition is checked")
                } else {
                    format!(
                        "`{}` is sampled after {affected}, which {what} affects; conditions read only earlier \
                         fields: declare `{}` before {affected}",
                        f.ident, f.ident
                    )
                };
                cx.error_spanned_by(id, msg);
            }
            Some(_) => {}
            None if reads.in_macro.contains(&name) => {}
            None if name.starts_with(|c: char| c.is_lowercase() || c == '_') => {
                let list: Vec<&str> = known.iter().map(String::as_str).collect();
                cx.error_spanned_by(
                    id,
                    format!(
                        "unknown field `{name}` in condition; the fields are: {}",
                        list.join(", ")
                    ),
                );
            }
            None => {}
        }
    }
}

/// The plain identifiers an expression reads (`x` in `x > 0`, not `f` in `f(x)`).
#[derive(Default)]
struct Reads {
    idents: Vec<Ident>,
    /// Identifiers seen only inside macro calls (not checked for being unknown).
    in_macro: BTreeSet<String>,
    /// Names bound inside the expression (closure parameters, `let`).
    bound: BTreeSet<String>,
}

impl<'ast> Visit<'ast> for Reads {
    fn visit_expr_path(&mut self, p: &'ast syn::ExprPath) {
        if p.qself.is_none() {
            if let Some(id) = p.path.get_ident() {
                self.idents.push(id.clone());
            }
        }
    }
    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        if !matches!(&*c.func, Expr::Path(_)) {
            self.visit_expr(&c.func);
        }
        for a in &c.args {
            self.visit_expr(a);
        }
    }
    fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
        self.bound.insert(p.ident.to_string());
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        // Macro arguments are opaque; read the identifiers followed by no `(`
        // or `::`, which catches `matches!(later_field, ..)`.
        let tokens: Vec<TokenTree> = flatten(m.tokens.clone());
        for (k, tt) in tokens.iter().enumerate() {
            if let TokenTree::Ident(id) = tt {
                let next_is_path_or_call = matches!(tokens.get(k + 1), Some(TokenTree::Punct(p)) if p.as_char() == ':')
                    || matches!(tokens.get(k + 1), Some(TokenTree::Group(g)) if g.delimiter() == proc_macro2::Delimiter::Parenthesis);
                let prev_is_path = matches!(k.checked_sub(1).and_then(|j| tokens.get(j)), Some(TokenTree::Punct(p)) if p.as_char() == ':' || p.as_char() == '.');
                if !next_is_path_or_call && !prev_is_path {
                    self.in_macro.insert(id.to_string());
                    self.idents.push(id.clone());
                }
            }
        }
    }
}

fn flatten(ts: proc_macro2::TokenStream) -> Vec<TokenTree> {
    let mut out = Vec::new();
    for tt in ts {
        match tt {
            TokenTree::Group(g) if g.delimiter() != proc_macro2::Delimiter::Parenthesis => {
                out.extend(flatten(g.stream()))
            }
            TokenTree::Group(g) => {
                out.push(TokenTree::Group(g.clone()));
                out.extend(flatten(g.stream()));
            }
            other => out.push(other),
        }
    }
    out
}

/// A narrowing must fit the target's kind and leave at least one value.
fn check_rule(cx: &Ctxt, f: &Field, kind: &Kind, rule: &Rule) {
    let name = f.ident;
    let never = |e: &dyn ToTokens, why: String| {
        cx.error_spanned_by(e, format!("`{}` can never hold: {why}", rule.text));
    };
    match kind {
        Kind::Float(spec) | Kind::Int(spec) => {
            if rule.op.value == Op::In {
                cx.error_at(
                    rule.op.span,
                    format!("`in [..]` narrows a choice; `{name}` is a range: use `<=` and `>=`"),
                );
                return;
            }
            let Some(v) = rule.values.first() else { return };
            let Some(x) = lit_value(v).and_then(|l| l.as_f64()) else {
                if lit_value(v).is_some() {
                    cx.error_spanned_by(
                        v,
                        format!("`{name}` is a number; compare it with a number"),
                    );
                }
                return;
            };
            if matches!(kind, Kind::Int(_)) && x.fract() != 0.0 {
                cx.error_spanned_by(
                    v,
                    format!("`{name}` is an integer; compare it with an integer"),
                );
                return;
            }
            let (low, high) = (spec.low.float, spec.high.float);
            let declared = format!(
                "`{name}` is declared as {}..={}",
                spec.low.expr.to_token_stream(),
                spec.high.expr.to_token_stream()
            );
            match rule.op.value {
                Op::Le if x < low => never(v, declared),
                Op::Ge if x > high => never(v, declared),
                Op::Eq if x < low || x > high => never(v, declared),
                _ => {}
            }
        }
        Kind::Lits(_) | Kind::Bool => {
            let values: Vec<_> = match kind {
                Kind::Lits(c) => c.iter().map(|c| c.value.clone()).collect(),
                _ => vec![
                    crate::attr::LitValue::Bool(false),
                    crate::attr::LitValue::Bool(true),
                ],
            };
            let listed: Vec<String> = values.iter().map(show).collect();
            let all = listed.join(", ");
            match rule.op.value {
                Op::In | Op::Eq => {
                    for v in &rule.values {
                        let Some(lit) = lit_value(v) else { continue };
                        if !values.iter().any(|c| same(c, &lit)) {
                            cx.error_spanned_by(
                                v,
                                format!("{} is not one of `{name}`'s choices ({all})", show(&lit)),
                            );
                        }
                    }
                }
                Op::Le | Op::Ge => {
                    let Some(v) = rule.values.first() else { return };
                    let Some(x) = lit_value(v).and_then(|l| l.as_f64()) else {
                        return;
                    };
                    let nums: Vec<f64> = values.iter().filter_map(|c| c.as_f64()).collect();
                    if nums.is_empty() {
                        cx.error_at(
                            rule.op.span,
                            format!("`{name}` has no numeric choices; use `==` or `in [..]`"),
                        );
                        return;
                    }
                    let keeps = nums.iter().any(|c| {
                        if rule.op.value == Op::Le {
                            *c <= x
                        } else {
                            *c >= x
                        }
                    });
                    if !keeps {
                        never(v, format!("no choice of `{name}` ({all}) satisfies it"));
                    }
                }
            }
        }
        _ => {}
    }
}

fn same(a: &crate::attr::LitValue, b: &crate::attr::LitValue) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

fn show(v: &crate::attr::LitValue) -> String {
    use crate::attr::LitValue::*;
    match v {
        Int(i) => i.to_string(),
        Float(x) => format!("{x:?}"),
        Str(s) => format!("{s:?}"),
        Bool(b) => b.to_string(),
    }
}

/// Indices of the fields an expression reads, for placing its evaluation.
pub fn read_fields(input: &Input, cond: &Expr) -> Vec<usize> {
    let mut reads = Reads::default();
    reads.visit_expr(cond);
    reads
        .idents
        .iter()
        .filter(|id| !reads.bound.contains(&id.to_string()))
        .filter_map(|id| input.field(id).map(|(i, _)| i))
        .collect()
}

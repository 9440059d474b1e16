//! Rules between fields: what conditions may read and what constraints may narrow.
//!
//! Fields are sampled in declaration order, so a condition (or a narrowing's
//! value) may read only fields declared before every field it affects; when
//! two fields read each other no order works, and the error names the cycle
//! rather than suggesting an order. A narrowing must leave at least one value
//! of the declared distribution, and two narrowings of one field under the
//! same condition must leave one together; pairs under different conditions
//! are left to the start-up search (`startup.rs`).

use crate::ast::{Field, Input, Kind};
use crate::attr::{lit_value, Op, Rule};
use crate::ctxt::Ctxt;
use proc_macro2::TokenTree;
use quote::ToTokens;
use std::collections::BTreeSet;
use syn::visit::Visit;
use syn::{Expr, Ident};

/// "`from` reads `to` through `how`": the field `from` (or its existence,
/// or its support) depends on the value of `to`.
struct Edge {
    from: usize,
    to: usize,
    how: &'static str,
}

/// Every dependency between fields: an `active_if` makes its field depend on
/// what it reads, a constraint makes each field it narrows depend on what its
/// condition and the rule's values read.
fn edges(input: &Input) -> Vec<Edge> {
    let mut out = Vec::new();
    for (i, f) in input.fields.iter().enumerate() {
        if let Some(cond) = &f.active_if {
            for j in read_fields(input, &cond.value) {
                out.push(Edge {
                    from: i,
                    to: j,
                    how: "its `active_if`",
                });
            }
        }
    }
    for c in &input.constraints {
        let reads = read_fields(input, &c.cond);
        for rule in &c.rules {
            let Some((i, _)) = input.field(&rule.field) else {
                continue;
            };
            for &j in &reads {
                out.push(Edge {
                    from: i,
                    to: j,
                    how: "a constraint",
                });
            }
            for v in &rule.values {
                for j in read_fields(input, v) {
                    out.push(Edge {
                        from: i,
                        to: j,
                        how: "a narrowing",
                    });
                }
            }
        }
    }
    out
}

/// A path of edges from `start` back to `goal`, if any (breadth-first, so
/// the shortest).
fn path(edges: &[Edge], start: usize, goal: usize) -> Option<Vec<&Edge>> {
    let mut seen = BTreeSet::from([start]);
    let mut queue: std::collections::VecDeque<(usize, Vec<&Edge>)> =
        std::collections::VecDeque::from([(start, Vec::new())]);
    while let Some((node, trail)) = queue.pop_front() {
        for e in edges.iter().filter(|e| e.from == node) {
            let mut next = trail.clone();
            next.push(e);
            if e.to == goal {
                return Some(next);
            }
            if seen.insert(e.to) {
                queue.push_back((e.to, next));
            }
        }
    }
    None
}

/// Cycles already reported (by their sorted fields), so each is named once.
#[derive(Default)]
struct Cycles {
    edges: Vec<Edge>,
    reported: std::cell::RefCell<BTreeSet<Vec<usize>>>,
}

impl Cycles {
    /// If `later` depends back on `earlier`, the message naming that cycle
    /// (`None` when this cycle was already reported).
    fn message(
        &self,
        input: &Input,
        earlier: usize,
        later: usize,
        how: &str,
    ) -> Option<Option<String>> {
        let back = path(&self.edges, later, earlier)?;
        let mut nodes: Vec<usize> = back.iter().map(|e| e.from).chain([earlier]).collect();
        nodes.sort_unstable();
        nodes.dedup();
        if !self.reported.borrow_mut().insert(nodes) {
            return Some(None);
        }
        let name = |i: usize| {
            input
                .fields
                .get(i)
                .map(|f| f.ident.to_string())
                .unwrap_or_default()
        };
        let mut steps = vec![format!(
            "`{}` reads `{}` ({how})",
            name(earlier),
            name(later)
        )];
        steps.extend(
            back.iter()
                .map(|e| format!("`{}` reads `{}` ({})", name(e.from), name(e.to), e.how)),
        );
        let mut order: Vec<String> =
            vec![format!("`{}`", name(earlier)), format!("`{}`", name(later))];
        order.extend(back.iter().map(|e| format!("`{}`", name(e.to))));
        Some(Some(format!(
            "these fields read each other in a cycle ({}): {}; no declaration order samples each \
             after what it reads, so remove one of these conditions",
            order.join(" -> "),
            steps.join(", ")
        )))
    }
}

pub fn check(cx: &Ctxt, input: &Input) {
    let cycles = Cycles {
        edges: edges(input),
        ..Cycles::default()
    };
    for (i, f) in input.fields.iter().enumerate() {
        if let Some(cond) = &f.active_if {
            check_reads(
                cx,
                input,
                &cycles,
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
            // A value may read fields too (`width <= max_width`): earlier ones.
            for v in &rule.values {
                check_reads(
                    cx,
                    input,
                    &cycles,
                    v,
                    i,
                    &format!("`{}`", rule.field),
                    "this narrowing",
                );
            }
            targets.push((i, rule));
        }
        if let Some(&(first, rule)) = targets.iter().min_by_key(|(i, _)| *i) {
            check_reads(
                cx,
                input,
                &cycles,
                &c.cond,
                first,
                &format!("`{}`", rule.field),
                "this constraint",
            );
        }
    }
    check_contradictions(cx, input);
}

/// Every field a condition reads must come before `before` (the field it affects).
fn check_reads(
    cx: &Ctxt,
    input: &Input,
    cycles: &Cycles,
    cond: &Expr,
    before: usize,
    affected: &str,
    what: &str,
) {
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
                let how = match what {
                    "this constraint" => "a constraint",
                    "this narrowing" => "a narrowing",
                    other => other,
                };
                let msg = if j == before {
                    format!("a condition cannot read {affected} itself: it is sampled after the condition is checked")
                } else if let Some(cycle) = cycles.message(input, before, j, how) {
                    match cycle {
                        Some(msg) => msg,
                        None => continue,
                    }
                } else {
                    let reader = if what == "this narrowing" {
                        "narrowing values"
                    } else {
                        "conditions"
                    };
                    format!(
                        "`{}` is sampled after {affected}, which {what} affects; {reader} read only earlier \
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

/// What one narrowing rule leaves of its field, when the macro can tell.
#[derive(Debug, PartialEq)]
enum Allowed {
    /// A range rule with a literal value: `low..=high`, either side open.
    Interval(f64, f64),
    /// A choice rule: the choices it keeps (as written), or enum variant names.
    Set(BTreeSet<String>),
}

fn allowed(f: &Field, rule: &Rule) -> Option<Allowed> {
    match f.kind.as_ref()? {
        Kind::Float(_) | Kind::Int(_) => {
            let x = lit_value(rule.values.first()?)?.as_f64()?;
            Some(match rule.op.value {
                Op::Le => Allowed::Interval(f64::NEG_INFINITY, x),
                Op::Ge => Allowed::Interval(x, f64::INFINITY),
                Op::Eq => Allowed::Interval(x, x),
                Op::In => return None,
            })
        }
        kind @ (Kind::Lits(_) | Kind::Bool) => {
            let values: Vec<crate::attr::LitValue> = match kind {
                Kind::Lits(c) => c.iter().map(|c| c.value.clone()).collect(),
                _ => vec![
                    crate::attr::LitValue::Bool(false),
                    crate::attr::LitValue::Bool(true),
                ],
            };
            let keep = |c: &crate::attr::LitValue| -> Option<bool> {
                Some(match rule.op.value {
                    Op::Eq | Op::In => {
                        let mut any = false;
                        for v in &rule.values {
                            any |= same(c, &lit_value(v)?);
                        }
                        any
                    }
                    Op::Le | Op::Ge => {
                        let x = lit_value(rule.values.first()?)?.as_f64()?;
                        let c = c.as_f64()?;
                        if rule.op.value == Op::Le {
                            c <= x
                        } else {
                            c >= x
                        }
                    }
                })
            };
            let mut set = BTreeSet::new();
            for c in &values {
                if keep(c)? {
                    set.insert(show(c));
                }
            }
            Some(Allowed::Set(set))
        }
        Kind::Enum => {
            if !matches!(rule.op.value, Op::Eq | Op::In) {
                return None;
            }
            let mut set = BTreeSet::new();
            for v in &rule.values {
                let Expr::Path(p) = v else { return None };
                set.insert(p.path.segments.last()?.ident.to_string());
            }
            Some(Allowed::Set(set))
        }
        Kind::Fixed(_) | Kind::Default => None,
    }
}

/// Whether two rules on one field leave nothing between them.
fn disjoint(a: &Allowed, b: &Allowed) -> bool {
    match (a, b) {
        (Allowed::Interval(l1, h1), Allowed::Interval(l2, h2)) => l1.max(*l2) > h1.min(*h2),
        (Allowed::Set(x), Allowed::Set(y)) => x.is_disjoint(y),
        _ => false,
    }
}

/// Two narrowings of one field that no value satisfies together.
pub struct Contradiction<'r> {
    /// Indices into `input.constraints`; `first < second`, or equal when
    /// both rules are in one constraint.
    pub first: usize,
    pub second: usize,
    pub rule_a: &'r Rule,
    pub rule_b: &'r Rule,
}

/// Every pair of literal narrowings of the same field that contradict.
pub fn contradictions<'a>(input: &'a Input) -> Vec<Contradiction<'a>> {
    let mut rules: Vec<(usize, &Rule, Allowed)> = Vec::new();
    for (ci, c) in input.constraints.iter().enumerate() {
        for rule in &c.rules {
            let Some((_, f)) = input.field(&rule.field) else {
                continue;
            };
            if let Some(a) = allowed(f, rule) {
                rules.push((ci, rule, a));
            }
        }
    }
    let mut out = Vec::new();
    for (k, (c1, r1, a1)) in rules.iter().enumerate() {
        for (c2, r2, a2) in &rules[k + 1..] {
            if r1.field == r2.field && disjoint(a1, a2) {
                out.push(Contradiction {
                    first: *c1,
                    second: *c2,
                    rule_a: r1,
                    rule_b: r2,
                });
            }
        }
    }
    out
}

/// The condition of constraint `i`, as tokens, to compare conditions.
fn cond_key(input: &Input, i: usize) -> String {
    input
        .constraints
        .get(i)
        .map(|c| c.cond.to_token_stream().to_string())
        .unwrap_or_default()
}

/// Whether both constraints of a contradiction apply under one condition
/// (the same constraint, or two with the same condition): then the macro
/// knows every trial meeting it is infeasible.
pub fn same_condition(input: &Input, c: &Contradiction) -> bool {
    c.first == c.second || cond_key(input, c.first) == cond_key(input, c.second)
}

/// Contradictions the macro can see are compile errors at the second rule.
fn check_contradictions(cx: &Ctxt, input: &Input) {
    for c in contradictions(input) {
        if !same_condition(input, &c) {
            continue;
        }
        let cond = input
            .constraints
            .get(c.first)
            .map(|k| crate::text::pretty(&k.cond.to_token_stream()))
            .unwrap_or_default();
        let (a, b) = (&c.rule_a.text, &c.rule_b.text);
        let field = &c.rule_a.field;
        let msg = if c.first == c.second {
            format!(
                "`{b}` contradicts `{a}` in the same constraint: no value of `{field}` satisfies both, \
                 so every trial where `{cond}` holds would be infeasible"
            )
        } else {
            let other = input
                .constraints
                .get(c.first)
                .map(|k| k.text.clone())
                .unwrap_or_default();
            format!(
                "`{b}` contradicts `{a}` of the constraint `{other}`: both apply when `{cond}` holds \
                 and no value of `{field}` satisfies both, so every such trial would be infeasible"
            )
        };
        let span_at: Vec<&Expr> = c.rule_b.values.iter().collect();
        match span_at.as_slice() {
            [one] => cx.error_spanned_by(one, msg),
            _ => cx.error_at(c.rule_b.op.span, msg),
        }
    }
}

//! The typed model of a `#[search_space]` struct, borrowing from syn.
//!
//! Building it checks everything that concerns one field alone: the kind
//! against the field's type, the range, the choices, `active_if` against
//! `Option`. Rules between fields live in `valid.rs`.

use crate::attr::{self, ConstraintAttr, KindAttr, LitChoice, LitValue, RangeSpec, Sp};
use crate::ctxt::Ctxt;
use crate::symbol::*;
use crate::ty::{float_max, option_inner, Prim};
use quote::ToTokens;
use syn::{Expr, Fields, Ident, ItemStruct, Type};

/// Tolerance for a float step dividing its range (the same as hpo-core's).
const GRID_EPS: f64 = 1e-8;

pub struct Input<'a> {
    pub item: &'a ItemStruct,
    pub krate: syn::Path,
    pub fields: Vec<Field<'a>>,
    pub constraints: Vec<ConstraintAttr>,
}

pub struct Field<'a> {
    pub ident: &'a Ident,
    /// The declared type.
    pub ty: &'a Type,
    /// `T` of `Option<T>` for optional parameters, else the declared type.
    pub inner: &'a Type,
    /// Whether the field is an `Option` sampled only when `active_if` holds.
    pub optional: bool,
    pub prim: Prim,
    /// `None` when the attribute was invalid (an error is already recorded).
    pub kind: Option<Kind>,
    pub active_if: Option<Sp<Expr>>,
}

#[derive(Clone)]
pub enum Kind {
    Float(RangeSpec),
    Int(RangeSpec),
    Bool,
    Enum,
    Lits(Vec<LitChoice>),
    Fixed(Expr),
    Default,
}

impl Kind {
    pub fn is_searched(&self) -> bool {
        !matches!(self, Kind::Fixed(_) | Kind::Default)
    }
}

impl<'a> Field<'a> {
    pub fn name(&self) -> String {
        self.ident.to_string()
    }
}

impl<'a> Input<'a> {
    pub fn from_syn(cx: &Ctxt, item: &'a ItemStruct, krate: Option<syn::Path>) -> Input<'a> {
        let krate = krate.unwrap_or_else(|| syn::parse_quote!(::hpo));
        if !item.generics.params.is_empty() || item.generics.where_clause.is_some() {
            cx.error_spanned_by(
                &item.generics,
                "#[search_space] does not support generic structs: a search space is one concrete configuration type",
            );
        }
        let mut constraints = Vec::new();
        for a in &item.attrs {
            if a.path().is_ident(CONSTRAINT) {
                constraints.extend(attr::parse_constraint(cx, a));
            } else if is_search_space(a) {
                cx.error_spanned_by(
                    a,
                    format!("duplicate #[{SEARCH_SPACE}]: the struct is already a search space; remove this one"),
                );
            } else if let Some(name) = typo_of(a, CONSTRAINT) {
                cx.error_spanned_by(
                    a.path(),
                    format!("unknown attribute `{name}`; did you mean `#[{CONSTRAINT}(if <condition> {{ .. }})]`?"),
                );
            }
        }
        let fields = match &item.fields {
            Fields::Named(named) => named
                .named
                .iter()
                .filter_map(|f| Field::from_syn(cx, f))
                .collect(),
            Fields::Unnamed(u) => {
                cx.error_spanned_by(
                    u,
                    "#[search_space] needs named fields: parameters are stored under their field names",
                );
                Vec::new()
            }
            Fields::Unit => {
                cx.error_spanned_by(
                    &item.ident,
                    "#[search_space] needs a struct with named fields",
                );
                Vec::new()
            }
        };
        Input {
            item,
            krate,
            fields,
            constraints,
        }
    }

    pub fn field(&self, name: &Ident) -> Option<(usize, &Field<'a>)> {
        self.fields
            .iter()
            .enumerate()
            .find(|(_, f)| f.ident == name)
    }
}

impl<'a> Field<'a> {
    fn from_syn(cx: &Ctxt, f: &'a syn::Field) -> Option<Field<'a>> {
        let ident = f.ident.as_ref()?;
        let params: Vec<_> = f
            .attrs
            .iter()
            .filter(|a| a.path().is_ident(PARAM))
            .collect();
        // A misspelt `#[param]` is the field's one error: reported here,
        // removed from the output (so rustc does not report it again), and no
        // "has no #[param]" on top.
        let mut misspelt = false;
        for a in &f.attrs {
            if let Some(name) = typo_of(a, PARAM) {
                cx.error_spanned_by(
                    a.path(),
                    format!("unknown attribute `{name}`; did you mean `#[{PARAM}(..)]`?"),
                );
                misspelt = true;
            }
        }
        for dup in params.iter().skip(1) {
            cx.error_spanned_by(
                dup,
                format!("duplicate #[{PARAM}] on `{ident}`: merge them into one"),
            );
        }
        let (inner, opt_inner) = match option_inner(&f.ty) {
            Some(t) => (t, true),
            None => (&f.ty, false),
        };
        let mut field = Field {
            ident,
            ty: &f.ty,
            inner,
            optional: false,
            prim: Prim::of(inner),
            kind: None,
            active_if: None,
        };
        if params.len() > 1 {
            // The split attribute is the problem; what either half says alone
            // (a kind without its `active_if`) would only mislead.
            return Some(field);
        }
        let Some(attr) = params.first() else {
            if misspelt {
                return Some(field);
            }
            cx.error_spanned_by(
                ident,
                format!(
                    "field `{ident}` has no #[{PARAM}(..)]; every field is a parameter: add \
                     `#[param(int(..))]`, `#[param(fixed = <value>)]` or `#[param(default)]`"
                ),
            );
            return Some(field);
        };
        let parsed = attr::parse_param(cx, attr);
        field.active_if = parsed.active_if;
        let kind = match parsed.kind {
            Some(k) => k,
            None if field.prim == Prim::Bool => Sp::new(KindAttr::Bool, ident.span()),
            None => {
                if parsed.clean {
                    cx.error_spanned_by(
                        &parsed.tokens,
                        format!("#[{PARAM}] on `{ident}` needs a kind: one of {PARAM_KEYS}"),
                    );
                }
                return Some(field);
            }
        };
        let searched = !matches!(kind.value, KindAttr::Fixed(_) | KindAttr::Default);
        match (&field.active_if, opt_inner, searched) {
            (Some(a), false, _) => {
                cx.error_at(
                    a.span,
                    format!(
                        "`active_if` needs an `Option` field (None when the condition is false); \
                         change the type of `{ident}` to `Option<{}>`",
                        f.ty.to_token_stream()
                    ),
                );
            }
            (Some(a), true, false) => {
                cx.error_at(
                    a.span,
                    "a fixed field is never sampled, so it cannot have `active_if`",
                );
            }
            // A misspelt `active_if` key is already reported; say nothing more.
            (None, true, true) if parsed.clean => {
                cx.error_spanned_by(
                    &f.ty,
                    format!(
                        "`{ident}` is an `Option`: say when it is sampled with `active_if = <condition \
                         over earlier fields>`, or make it a plain `{}`",
                        inner.to_token_stream()
                    ),
                );
            }
            _ => {}
        }
        field.optional = opt_inner && searched;
        if !field.optional {
            field.inner = &f.ty;
            field.prim = Prim::of(&f.ty);
        }
        field.kind = check_kind(cx, &field, kind);
        Some(field)
    }
}

/// The attribute's name, when it is a near miss of `target`.
pub fn typo_of(a: &syn::Attribute, target: &str) -> Option<String> {
    let id = a.path().get_ident()?.to_string();
    is_typo_of(&id, target).then_some(id)
}

/// Whether `a` is `#[search_space]` or `#[some::path::search_space]`.
pub fn is_search_space(a: &syn::Attribute) -> bool {
    a.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == SEARCH_SPACE)
}

/// Checks a kind against the field's type and its own parameters.
fn check_kind(cx: &Ctxt, f: &Field, kind: Sp<KindAttr>) -> Option<Kind> {
    let ty = f.inner.to_token_stream().to_string().replace(' ', "");
    let name = f.ident;
    let wrong = |what: &str, hint: &str| {
        cx.error_at(
            kind.span,
            format!("`{what}` does not fit `{name}: {ty}`; {hint}"),
        );
    };
    let hint = match f.prim {
        Prim::Float => "use `float(low..=high)` or `choice(..)` for a float field",
        Prim::Int { .. } => "use `int(low..=high)` or `choice(..)` for an integer field",
        Prim::Bool => "use `bool` (or leave the kind out) for a bool field",
        Prim::String | Prim::Str => "use `choice(\"a\", \"b\")` for a string field",
        Prim::Other => "use a bare `choice` for an enum deriving `hpo::Choice`",
    };
    match kind.value {
        KindAttr::Float(spec) => {
            if !matches!(f.prim, Prim::Float | Prim::Other) {
                wrong(FLOAT, hint);
                return None;
            }
            check_float(cx, f, &spec).then_some(Kind::Float(spec))
        }
        KindAttr::Int(spec) => {
            if !matches!(f.prim, Prim::Int { .. } | Prim::Other) {
                wrong(INT, hint);
                return None;
            }
            check_int(cx, f, &spec).then_some(Kind::Int(spec))
        }
        KindAttr::Bool => {
            if f.prim != Prim::Bool {
                wrong(BOOL, hint);
                return None;
            }
            Some(Kind::Bool)
        }
        KindAttr::ChoiceEnum => {
            if f.prim != Prim::Other {
                cx.error_at(
                    kind.span,
                    format!(
                        "a bare `choice` takes the variants of an enum deriving `hpo::Choice`, \
                         but `{name}` is `{ty}`; list the choices instead: `choice(..)`"
                    ),
                );
                return None;
            }
            Some(Kind::Enum)
        }
        KindAttr::ChoiceLits(lits) => {
            let mut ok = !lits.is_empty();
            for c in &lits {
                let fits = match (&c.value, f.prim) {
                    (LitValue::Int(i), Prim::Int { min, max }) => {
                        if *i < min || *i > max {
                            cx.error_spanned_by(
                                &c.expr,
                                format!("choice {i} does not fit in `{ty}`"),
                            );
                            ok = false;
                        }
                        true
                    }
                    (LitValue::Int(_) | LitValue::Float(_), Prim::Float) => true,
                    (LitValue::Str(_), Prim::String | Prim::Str) => true,
                    (LitValue::Bool(_), Prim::Bool) => true,
                    (_, Prim::Other) => true,
                    _ => false,
                };
                if !fits {
                    cx.error_spanned_by(
                        &c.expr,
                        format!(
                            "this choice is {} but `{name}` is `{ty}`",
                            c.value.describe()
                        ),
                    );
                    ok = false;
                }
            }
            if f.prim == Prim::Float {
                for (i, c) in lits.iter().enumerate() {
                    let x = c.value.as_f64();
                    if lits[..i].iter().any(|d| d.value.as_f64() == x) {
                        cx.error_spanned_by(
                            &c.expr,
                            "duplicate choice (equal as a float to an earlier one)",
                        );
                        ok = false;
                    }
                }
            }
            ok.then_some(Kind::Lits(lits))
        }
        KindAttr::Fixed(e) => Some(Kind::Fixed(e)),
        KindAttr::Default => Some(Kind::Default),
    }
}

fn check_float(cx: &Ctxt, f: &Field, s: &RangeSpec) -> bool {
    let (low, high) = (s.low.float, s.high.float);
    let mut ok = true;
    if !(low.is_finite() && high.is_finite()) {
        cx.error_spanned_by(&s.range, "float bounds must be finite");
        return false;
    }
    if let Some(max) = float_max(f.inner) {
        let ty = f.inner.to_token_stream();
        let shown = if max == f64::from(f32::MAX) {
            format!("{:e}", f32::MAX)
        } else {
            format!("{max:e}")
        };
        for n in [&s.low, &s.high] {
            if n.float.abs() > max {
                let v = n.expr.to_token_stream().to_string().replace(' ', "");
                cx.error_spanned_by(
                    &n.expr,
                    format!(
                        "{v} does not fit in `{ty}` (largest finite value {shown}): the field would \
                         read infinity while the study stores {v}; use `f64` or a bound within range"
                    ),
                );
                ok = false;
            }
        }
    }
    if low >= high {
        cx.error_spanned_by(
            &s.range,
            format!("empty range: low ({low}) must be less than high ({high}); for a constant use `fixed = {low}`"),
        );
        ok = false;
    }
    if let Some(log) = s.log {
        if low <= 0.0 {
            cx.error_spanned_by(&s.low.expr, format!("a `log` range needs low > 0, got {low}; start at a small positive value such as 1e-6"));
            ok = false;
        }
        if s.step.is_some() {
            cx.error_at(
                log,
                "`log` and `step` cannot be combined: a log scale has no even grid",
            );
            ok = false;
        }
    }
    if let Some(step) = &s.step {
        let st = step.float;
        if !(st.is_finite() && st > 0.0) {
            cx.error_spanned_by(&step.expr, format!("`step` must be positive, got {st}"));
            ok = false;
        } else if low < high {
            let k = (high - low) / st;
            if (k - k.round()).abs() > GRID_EPS * k.abs().max(1.0) {
                cx.error_spanned_by(
                    &step.expr,
                    format!(
                        "step {st} does not divide the range {low}..={high} (width {}); choose a step that \
                         divides it or change high to {}",
                        high - low,
                        low + k.floor() * st
                    ),
                );
                ok = false;
            }
        }
    }
    ok
}

fn check_int(cx: &Ctxt, f: &Field, s: &RangeSpec) -> bool {
    let mut ok = true;
    let int = |n: &attr::Num| -> Option<i128> {
        if n.int.is_none() {
            cx.error_spanned_by(&n.expr, "an `int` range needs integer bounds");
        }
        n.int
    };
    let (Some(low), Some(high)) = (int(&s.low), int(&s.high)) else {
        return false;
    };
    if let Prim::Int { min, max } = f.prim {
        for (v, n) in [(low, &s.low), (high, &s.high)] {
            if v < min || v > max {
                let ty = f.inner.to_token_stream();
                cx.error_spanned_by(
                    &n.expr,
                    format!("{v} does not fit in `{ty}` ({min}..={max})"),
                );
                ok = false;
            }
        }
    }
    for (v, n) in [(low, &s.low), (high, &s.high)] {
        if i64::try_from(v).is_err() {
            cx.error_spanned_by(
                &n.expr,
                format!("{v} is outside the i64 range parameters are stored in"),
            );
            ok = false;
        }
    }
    if low >= high {
        cx.error_spanned_by(
            &s.range,
            format!("empty range: low ({low}) must be less than high ({high}); for a constant use `fixed = {low}`"),
        );
        ok = false;
    }
    if let Some(log) = s.log {
        if low <= 0 {
            cx.error_spanned_by(
                &s.low.expr,
                format!("a `log` range needs low >= 1, got {low}"),
            );
            ok = false;
        }
        if s.step.is_some() {
            cx.error_at(
                log,
                "`log` and `step` cannot be combined: a log scale has no even grid",
            );
            ok = false;
        }
    }
    if let Some(step) = &s.step {
        match step.int {
            None => {
                cx.error_spanned_by(&step.expr, "an `int` step must be an integer");
                ok = false;
            }
            Some(st) if st < 1 => {
                cx.error_spanned_by(&step.expr, format!("`step` must be at least 1, got {st}"));
                ok = false;
            }
            Some(st) if low < high && (high - low) % st != 0 => {
                cx.error_spanned_by(
                    &step.expr,
                    format!(
                        "step {st} does not divide the range {low}..={high} (width {}); choose a step that \
                         divides it or change high to {}",
                        high - low,
                        high - (high - low) % st
                    ),
                );
                ok = false;
            }
            Some(_) => {}
        }
    }
    ok
}

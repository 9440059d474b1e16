//! Parsing of `#[param(..)]`, `#[constraint(..)]` and `#[search_space(..)]`.
//!
//! Each parser records every mistake it can recover from in the [`Ctxt`] and
//! keeps going, so one compile reports all unknown and duplicate keys; only a
//! syntax error inside an attribute abandons the rest of that attribute.

use crate::ctxt::Ctxt;
use crate::symbol::*;
use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprLit, ExprUnary, Ident, Lit, LitStr, Token, UnOp};

/// A value with the span of the tokens it came from (after clap_derive's `Sp`).
#[derive(Clone)]
pub struct Sp<T> {
    pub value: T,
    pub span: Span,
}

impl<T> Sp<T> {
    pub fn new(value: T, span: Span) -> Self {
        Sp { value, span }
    }
}

/// A numeric literal bound or step, as written.
#[derive(Clone)]
pub struct Num {
    /// The value as a float (exact for integers up to 2^53).
    pub float: f64,
    /// The value when the literal is an integer.
    pub int: Option<i128>,
    /// The literal expression (for spans).
    pub expr: Expr,
}

/// `low..=high` with its options.
#[derive(Clone)]
pub struct RangeSpec {
    pub low: Num,
    pub high: Num,
    /// The whole range expression.
    pub range: Expr,
    pub log: Option<Span>,
    pub step: Option<Num>,
}

/// A literal choice.
#[derive(Clone)]
pub struct LitChoice {
    pub value: LitValue,
    pub expr: Expr,
}

/// The value of a literal choice.
#[derive(Clone, PartialEq, Debug)]
pub enum LitValue {
    Int(i128),
    Float(f64),
    Str(String),
    Bool(bool),
}

impl LitValue {
    pub fn describe(&self) -> &'static str {
        match self {
            LitValue::Int(_) => "an integer",
            LitValue::Float(_) => "a float",
            LitValue::Str(_) => "a string",
            LitValue::Bool(_) => "a bool",
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            LitValue::Int(i) => Some(*i as f64),
            LitValue::Float(x) => Some(*x),
            _ => None,
        }
    }
}

/// What `#[param(..)]` says a field is.
#[derive(Clone)]
pub enum KindAttr {
    Float(RangeSpec),
    Int(RangeSpec),
    Bool,
    /// A bare `choice`: the variants of an enum deriving `Choice`.
    ChoiceEnum,
    ChoiceLits(Vec<LitChoice>),
    Fixed(Expr),
    Default,
}

/// A parsed `#[param(..)]`.
pub struct ParamAttr {
    /// The whole attribute, for spans.
    pub tokens: TokenStream,
    /// The kind, spanned at its key.
    pub kind: Option<Sp<KindAttr>>,
    /// `active_if = <expr>`, spanned at the key.
    pub active_if: Option<Sp<Expr>>,
    /// Whether the attribute parsed without any error.
    pub clean: bool,
}

/// Parses one `#[param(..)]` attribute.
pub fn parse_param(cx: &Ctxt, attr: &Attribute) -> ParamAttr {
    let before = cx.len();
    let mut out = ParamAttr {
        tokens: attr.to_token_stream(),
        kind: None,
        active_if: None,
        clean: true,
    };
    match &attr.meta {
        syn::Meta::Path(_) => return out,
        syn::Meta::NameValue(nv) => {
            cx.error_spanned_by(
                nv.eq_token,
                format!("write `#[{PARAM}(..)]` with one of {PARAM_KEYS}"),
            );
            return out;
        }
        syn::Meta::List(_) => {}
    }
    let parser = |input: ParseStream| -> syn::Result<()> {
        while !input.is_empty() {
            let key: Ident = input.call(Ident::parse_any)?;
            let name = key.to_string();
            let mut set_kind = |kind: KindAttr| {
                if out.kind.is_some() {
                    cx.error_at(
                        key.span(),
                        format!("duplicate kind `{name}`: a field has exactly one kind"),
                    );
                } else {
                    out.kind = Some(Sp::new(kind, key.span()));
                }
            };
            match name.as_str() {
                FLOAT | INT => {
                    if !input.peek(syn::token::Paren) {
                        cx.error_at(
                            key.span(),
                            format!("`{name}` needs a range: `{name}(low..=high)`"),
                        );
                        skip_value(input)?;
                    } else {
                        let content;
                        syn::parenthesized!(content in input);
                        if let Some(spec) = parse_range(cx, &key, &content)? {
                            set_kind(if name == FLOAT {
                                KindAttr::Float(spec)
                            } else {
                                KindAttr::Int(spec)
                            });
                        }
                    }
                }
                BOOL | DEFAULT => {
                    if input.peek(syn::token::Paren) || input.peek(Token![=]) {
                        let extra: TokenStream = take_value(input)?;
                        cx.error_spanned_by(extra, format!("`{name}` takes no options"));
                    }
                    set_kind(if name == BOOL {
                        KindAttr::Bool
                    } else {
                        KindAttr::Default
                    });
                }
                CHOICE => {
                    if input.peek(syn::token::Paren) {
                        let content;
                        let paren = syn::parenthesized!(content in input);
                        let list = content.parse_terminated(Expr::parse, Token![,])?;
                        let choices =
                            parse_choices(cx, paren.span.join(), list.into_iter().collect());
                        set_kind(KindAttr::ChoiceLits(choices));
                    } else if input.peek(Token![=]) {
                        let extra = take_value(input)?;
                        cx.error_spanned_by(
                            extra,
                            "list choices in parentheses: `choice(8, 16, 32)`",
                        );
                    } else {
                        set_kind(KindAttr::ChoiceEnum);
                    }
                }
                FIXED => {
                    if input.peek(Token![=]) {
                        input.parse::<Token![=]>()?;
                        let e: Expr = input.parse()?;
                        set_kind(KindAttr::Fixed(e));
                    } else {
                        skip_value(input)?;
                        cx.error_at(
                            key.span(),
                            "`fixed` needs a value: `fixed = <expr>`, or use `default` for `Default::default()`",
                        );
                    }
                }
                ACTIVE_IF => {
                    if input.peek(Token![=]) {
                        input.parse::<Token![=]>()?;
                        let e: Expr = input.parse()?;
                        if out.active_if.is_some() {
                            cx.error_at(
                                key.span(),
                                format!(
                                    "duplicate `{ACTIVE_IF}`: combine the conditions with `&&`"
                                ),
                            );
                        } else {
                            out.active_if = Some(Sp::new(e, key.span()));
                        }
                    } else {
                        skip_value(input)?;
                        cx.error_at(
                            key.span(),
                            "`active_if` needs a condition: `active_if = <bool expr>`",
                        );
                    }
                }
                LOG | STEP => {
                    skip_value(input)?;
                    let example = if name == LOG {
                        "float(1e-5..=1e-1, log)"
                    } else {
                        "int(128..=512, step = 32)"
                    };
                    cx.error_at(
                        key.span(),
                        format!("`{name}` goes inside the range's parentheses: `{example}`"),
                    );
                }
                _ => {
                    skip_value(input)?;
                    cx.error_at(
                        key.span(),
                        format!("unknown key `{name}` in #[{PARAM}]; expected one of {PARAM_KEYS}"),
                    );
                }
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(())
    };
    if let Err(e) = attr.parse_args_with(parser) {
        cx.syn_error(e);
    }
    out.clean = cx.len() == before;
    out
}

use syn::parse::Parse;

/// Skips `(..)` or `= expr` after an unknown or misplaced key.
fn skip_value(input: ParseStream) -> syn::Result<()> {
    take_value(input).map(drop)
}

fn take_value(input: ParseStream) -> syn::Result<TokenStream> {
    if input.peek(syn::token::Paren) {
        let tt: proc_macro2::TokenTree = input.parse()?;
        return Ok(tt.into_token_stream());
    }
    if input.peek(Token![=]) {
        let eq: Token![=] = input.parse()?;
        let e: Expr = input.parse()?;
        let mut ts = eq.into_token_stream();
        e.to_tokens(&mut ts);
        return Ok(ts);
    }
    Ok(TokenStream::new())
}

fn parse_range(cx: &Ctxt, key: &Ident, input: ParseStream) -> syn::Result<Option<RangeSpec>> {
    let kind = key.to_string();
    let range: Expr = input.parse()?;
    let mut log = None;
    let mut step: Option<Num> = None;
    while !input.is_empty() {
        input.parse::<Token![,]>()?;
        if input.is_empty() {
            break;
        }
        let opt: Ident = input.call(Ident::parse_any)?;
        match opt.to_string().as_str() {
            LOG => {
                if input.peek(Token![=]) || input.peek(syn::token::Paren) {
                    let extra = take_value(input)?;
                    cx.error_spanned_by(extra, "`log` is a flag: write just `log`");
                }
                if log.is_some() {
                    cx.error_at(opt.span(), "duplicate `log`");
                }
                log = Some(opt.span());
            }
            STEP => {
                if !input.peek(Token![=]) {
                    skip_value(input)?;
                    cx.error_at(opt.span(), "`step` needs a value: `step = 32`");
                    continue;
                }
                input.parse::<Token![=]>()?;
                let e: Expr = input.parse()?;
                let num = number(cx, &e);
                if step.is_some() {
                    cx.error_at(opt.span(), "duplicate `step`");
                } else if let Some(n) = num {
                    step = Some(n);
                }
            }
            other => {
                skip_value(input)?;
                cx.error_at(
                    opt.span(),
                    format!("unknown key `{other}` in `{kind}(..)`; expected `log` or `step = ..`"),
                );
            }
        }
    }
    let Expr::Range(r) = &range else {
        cx.error_spanned_by(
            &range,
            format!("expected an inclusive range: `{kind}(low..=high)`"),
        );
        return Ok(None);
    };
    if let syn::RangeLimits::HalfOpen(dots) = r.limits {
        cx.error_spanned_by(
            dots,
            "use an inclusive range `low..=high`: both bounds can be sampled",
        );
        return Ok(None);
    }
    let (Some(lo), Some(hi)) = (&r.start, &r.end) else {
        cx.error_spanned_by(
            &range,
            format!("a `{kind}` range needs both bounds: `{kind}(low..=high)`"),
        );
        return Ok(None);
    };
    let (low, high) = (number(cx, lo), number(cx, hi));
    match (low, high) {
        (Some(low), Some(high)) => Ok(Some(RangeSpec {
            low,
            high,
            range: range.clone(),
            log,
            step,
        })),
        _ => Ok(None),
    }
}

/// A numeric literal, possibly negated.
pub fn number(cx: &Ctxt, e: &Expr) -> Option<Num> {
    match lit_value(e) {
        Some(LitValue::Int(i)) => Some(Num {
            float: i as f64,
            int: Some(i),
            expr: e.clone(),
        }),
        Some(LitValue::Float(x)) => Some(Num {
            float: x,
            int: None,
            expr: e.clone(),
        }),
        _ => {
            cx.error_spanned_by(
                e,
                "expected a number literal such as `16`, `-1.5` or `1e-4`",
            );
            None
        }
    }
}

/// The value of a literal expression (numbers may be negated).
pub fn lit_value(e: &Expr) -> Option<LitValue> {
    match e {
        Expr::Lit(ExprLit { lit, .. }) => match lit {
            Lit::Int(i) => i.base10_parse::<i128>().ok().map(LitValue::Int),
            Lit::Float(f) => f.base10_parse::<f64>().ok().map(LitValue::Float),
            Lit::Str(s) => Some(LitValue::Str(s.value())),
            Lit::Bool(b) => Some(LitValue::Bool(b.value)),
            _ => None,
        },
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_),
            expr,
            ..
        }) => match lit_value(expr)? {
            LitValue::Int(i) => Some(LitValue::Int(-i)),
            LitValue::Float(x) => Some(LitValue::Float(-x)),
            _ => None,
        },
        Expr::Paren(p) => lit_value(&p.expr),
        Expr::Group(g) => lit_value(&g.expr),
        _ => None,
    }
}

fn parse_choices(cx: &Ctxt, span: Span, list: Vec<Expr>) -> Vec<LitChoice> {
    if list.is_empty() {
        cx.error_at(
            span,
            "`choice()` is empty: list at least two choices, e.g. `choice(8, 16, 32)`",
        );
    }
    let mut out: Vec<LitChoice> = Vec::new();
    for e in list {
        let Some(value) = lit_value(&e) else {
            cx.error_spanned_by(
                &e,
                "choices must be literals (numbers, strings, booleans); for an enum write a bare `choice` \
                 and derive `hpo::Choice` on it",
            );
            continue;
        };
        if out.iter().any(|c| c.value == value) {
            cx.error_spanned_by(&e, format!("duplicate choice `{}`", e.to_token_stream()));
            continue;
        }
        out.push(LitChoice { value, expr: e });
    }
    out
}

/// A narrowing operator.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Op {
    Le,
    Ge,
    Eq,
    In,
}

/// One `field <op> value` inside a constraint.
pub struct Rule {
    pub field: Ident,
    pub op: Sp<Op>,
    /// One value, or the list of `in [..]`.
    pub values: Vec<Expr>,
    /// The rule as written, for messages.
    pub text: String,
}

/// A parsed `#[constraint(if cond { rules })]`.
pub struct ConstraintAttr {
    pub cond: Expr,
    pub rules: Vec<Rule>,
    /// The whole constraint as written, for descriptions and messages.
    pub text: String,
}

/// Parses one `#[constraint(..)]`.
pub fn parse_constraint(cx: &Ctxt, attr: &Attribute) -> Option<ConstraintAttr> {
    let syn::Meta::List(list) = &attr.meta else {
        cx.error_spanned_by(
            attr,
            "write `#[constraint(if <condition> { field <= value, .. })]`",
        );
        return None;
    };
    let text = crate::text::pretty(&list.tokens);
    let parser = |input: ParseStream| -> syn::Result<ConstraintAttr> {
        if !input.peek(Token![if]) {
            return Err(input.error("a constraint reads `if <condition> { field <= value, .. }`"));
        }
        input.parse::<Token![if]>()?;
        let cond = Expr::parse_without_eager_brace(input)?;
        let content;
        syn::braced!(content in input);
        let mut rules = Vec::new();
        while !content.is_empty() {
            let start = content.fork();
            let field: Ident = content.parse()?;
            let op = if content.peek(Token![<=]) {
                Sp::new(Op::Le, content.parse::<Token![<=]>()?.span())
            } else if content.peek(Token![>=]) {
                Sp::new(Op::Ge, content.parse::<Token![>=]>()?.span())
            } else if content.peek(Token![==]) {
                Sp::new(Op::Eq, content.parse::<Token![==]>()?.span())
            } else if content.peek(Token![in]) {
                Sp::new(Op::In, content.parse::<Token![in]>()?.span())
            } else if content.peek(Token![<]) || content.peek(Token![>]) || content.peek(Token![!=])
            {
                let tt: proc_macro2::TokenTree = content.parse()?;
                return Err(syn::Error::new(
                    tt.span(),
                    "a narrowing uses `<=`, `>=`, `==` or `in [..]`; strict comparisons and `!=` are not supported",
                ));
            } else {
                return Err(
                    content.error("expected `<=`, `>=`, `==` or `in [..]` after the field name")
                );
            };
            let values = if op.value == Op::In {
                let arr: syn::ExprArray = content.parse()?;
                if arr.elems.is_empty() {
                    cx.error_spanned_by(&arr, "`in []` allows nothing; list the allowed values");
                }
                arr.elems.into_iter().collect()
            } else {
                vec![content.parse::<Expr>()?]
            };
            let consumed = rule_tokens(&start, &content);
            rules.push(Rule {
                field,
                op,
                values,
                text: crate::text::pretty(&consumed),
            });
            if content.is_empty() {
                break;
            }
            content.parse::<Token![,]>()?;
        }
        if rules.is_empty() {
            cx.error_spanned_by(
                &cond,
                "this constraint narrows nothing: add rules like `{ batch_size <= 16 }`",
            );
        }
        if !input.is_empty() {
            return Err(input.error("unexpected tokens after the constraint's `{ .. }`"));
        }
        Ok(ConstraintAttr {
            cond,
            rules,
            text: text.clone(),
        })
    };
    match attr.parse_args_with(parser) {
        Ok(c) => Some(c),
        Err(e) => {
            cx.syn_error(e);
            None
        }
    }
}

/// The tokens between two positions of a parse stream.
fn rule_tokens(start: &syn::parse::ParseBuffer, end: &syn::parse::ParseBuffer) -> TokenStream {
    let mut out = TokenStream::new();
    let mut cursor = start.cursor();
    while cursor != end.cursor() {
        let Some((tt, next)) = cursor.token_tree() else {
            break;
        };
        out.extend([tt]);
        cursor = next;
    }
    out
}

/// Parses `#[search_space(crate = "path")]` arguments.
pub fn parse_macro_args(cx: &Ctxt, args: TokenStream) -> Option<syn::Path> {
    let mut krate: Option<syn::Path> = None;
    let parser = |input: ParseStream| -> syn::Result<()> {
        while !input.is_empty() {
            let key: Ident = input.call(Ident::parse_any)?;
            if key == CRATE {
                input.parse::<Token![=]>()?;
                let s: LitStr = input.parse()?;
                if krate.is_some() {
                    cx.error_at(key.span(), "duplicate `crate`");
                } else {
                    krate = Some(s.parse()?);
                }
            } else {
                skip_value(input)?;
                cx.error_at(
                    key.span(),
                    format!("unknown key `{key}`; #[search_space] accepts only `crate = \"path\"`"),
                );
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(())
    };
    if let Err(e) = parser.parse2(args) {
        cx.syn_error(e);
    }
    krate
}

/// Parses the `Choice` derive's `#[choice(crate = "path")]`.
pub fn parse_choice_attr(cx: &Ctxt, attr: &Attribute) -> Option<syn::Path> {
    match &attr.meta {
        syn::Meta::List(l) => parse_macro_args(cx, l.tokens.clone()),
        _ => {
            cx.error_spanned_by(attr, format!("write `#[{CHOICE_ATTR}(crate = \"path\")]`"));
            None
        }
    }
}

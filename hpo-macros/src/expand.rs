//! Code generation: `impl SearchSpace` for a validated [`Input`].
//!
//! All four methods bind the fields as locals named like the fields, in
//! declaration order, so user conditions (`model.is_heavy()`) are pasted in
//! unchanged and read exactly the values sampled before them. Every path goes
//! through `<crate>::__private`.

use crate::ast::{Field, Input, Kind};
use crate::attr::{lit_value, LitValue, Op, Rule};
use crate::ty::Prim;
use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::Expr;

pub fn expand(input: &Input) -> TokenStream {
    let item = stripped(input.item);
    let p = private(input);
    let ident = &input.item.ident;
    let ty_name = ident.unraw().to_string();
    let sample = sample_body(input, &p);
    let from = from_params_body(input, &p, &ty_name);
    let to = to_params_body(input, &p);
    let describe = describe_body(input, &p, &ty_name);
    let variants = input
        .fields
        .iter()
        .filter(|f| matches!(f.kind, Some(Kind::Enum)))
        .map(|f| {
            let name = variants_fn(f);
            let inner = f.inner;
            quote! {
                #[doc(hidden)]
                fn #name() -> #p::runtime::Variants<#inner> {
                    #p::runtime::variants::<#inner>()
                }
            }
        });
    let asserts = input.fields.iter().map(|f| range_asserts(f, &p));
    quote! {
        #item

        #(#asserts)*

        #[automatically_derived]
        impl #ident {
            #(#variants)*
        }

        #[automatically_derived]
        // The user's conditions and narrowing values are pasted in with their
        // own spans; these lints would fire on the shapes we generate around
        // them (`*v == false`, `v == a || v == b`), not on what they wrote.
        #[allow(
            clippy::nonminimal_bool,
            clippy::bool_comparison,
            clippy::cmp_owned,
            clippy::unnecessary_cast,
            clippy::float_cmp
        )]
        impl #p::SearchSpace for #ident {
            fn sample(__hpo_trial: &mut #p::Trial) -> #p::Result<Self, #p::TrialError> {
                #sample
            }

            fn describe() -> #p::SpaceDescription {
                #describe
            }

            fn to_params(&self) -> #p::Vec<(#p::String, #p::ParamValue)> {
                #to
            }

            fn from_params(
                __hpo_params: &#p::BTreeMap<#p::String, #p::ParamValue>,
            ) -> #p::Result<Self, #p::Error> {
                #from
            }
        }
    }
}

/// The struct as the user wrote it, minus `#[constraint]` and `#[param]`
/// (and their misspellings, or a second `#[search_space]`, which are
/// reported by the macro already).
pub fn stripped(item: &syn::ItemStruct) -> syn::ItemStruct {
    use crate::ast::{is_search_space, typo_of};
    use crate::symbol::{CONSTRAINT, PARAM};
    let mut item = item.clone();
    item.attrs.retain(|a| {
        !a.path().is_ident(CONSTRAINT) && !is_search_space(a) && typo_of(a, CONSTRAINT).is_none()
    });
    for f in item.fields.iter_mut() {
        f.attrs
            .retain(|a| !a.path().is_ident(PARAM) && typo_of(a, PARAM).is_none());
    }
    item
}

pub fn private(input: &Input) -> TokenStream {
    let krate = &input.krate;
    quote!(#krate::__private)
}

fn param_name(f: &Field) -> String {
    f.ident.unraw().to_string()
}

fn narrow_var(f: &Field) -> syn::Ident {
    format_ident!("__hpo_narrow_{}", f.ident.unraw())
}

/// The hidden associated function that captures an enum field's variants.
pub fn variants_fn(f: &Field) -> syn::Ident {
    format_ident!("__hpo_variants_{}", f.ident.unraw())
}

pub fn choices_var(f: &Field) -> syn::Ident {
    format_ident!("__hpo_choices_{}", f.ident.unraw())
}

/// Which fields some constraint narrows.
fn is_target(input: &Input, f: &Field) -> bool {
    input
        .constraints
        .iter()
        .any(|c| c.rules.iter().any(|r| r.field == *f.ident))
}

/// `-x` as a minus token and a positive literal (robust in every compiler).
pub fn float_lit(x: f64) -> TokenStream {
    let lit = Literal::f64_suffixed(x.abs());
    if x.is_sign_negative() {
        quote!(-#lit)
    } else {
        lit.into_token_stream()
    }
}

fn int_lit(x: i128) -> TokenStream {
    let lit = Literal::i64_suffixed(x.unsigned_abs() as i64);
    if x < 0 {
        if x == i64::MIN as i128 {
            return quote!(i64::MIN);
        }
        quote!(-#lit)
    } else {
        lit.into_token_stream()
    }
}

/// A literal rendered for a field of type `prim` (integers become floats for float fields).
pub fn typed_lit(prim: Prim, e: &Expr) -> TokenStream {
    match (prim, lit_value(e)) {
        (Prim::Float, Some(LitValue::Int(i))) => {
            let lit = Literal::f64_unsuffixed((i as f64).abs());
            let lit = quote_spanned!(e.span()=> #lit);
            if i < 0 {
                quote_spanned!(e.span()=> -#lit)
            } else {
                lit
            }
        }
        (Prim::String, Some(LitValue::Str(_))) => {
            quote_spanned!(e.span()=> ::std::string::String::from(#e))
        }
        _ => e.to_token_stream(),
    }
}

/// `let __hpo_choices_x: [T; N] = [..];` for literal and bool fields.
pub fn choices_decl(f: &Field) -> TokenStream {
    let var = choices_var(f);
    let inner = f.inner;
    match &f.kind {
        Some(Kind::Lits(lits)) => {
            let n = lits.len();
            let items = lits.iter().map(|c| typed_lit(f.prim, &c.expr));
            quote!(let #var: [#inner; #n] = [#(#items),*];)
        }
        Some(Kind::Bool) => quote!(let #var: [#inner; 2] = [false, true];),
        _ => TokenStream::new(),
    }
}

pub fn float_dist(p: &TokenStream, spec: &crate::attr::RangeSpec) -> TokenStream {
    let (lo, hi) = (float_lit(spec.low.float), float_lit(spec.high.float));
    let log = spec.log.is_some();
    let step = match &spec.step {
        Some(s) => {
            let s = float_lit(s.float);
            quote!(#p::Option::Some(#s))
        }
        None => quote!(#p::Option::None),
    };
    quote!(#p::runtime::float_dist(#lo, #hi, #log, #step))
}

pub fn int_dist(p: &TokenStream, spec: &crate::attr::RangeSpec) -> TokenStream {
    let lo = int_lit(spec.low.int.unwrap_or_default());
    let hi = int_lit(spec.high.int.unwrap_or_default());
    let log = spec.log.is_some();
    let step = int_lit(spec.step.as_ref().and_then(|s| s.int).unwrap_or(1));
    quote!(#p::runtime::int_dist(#lo, #hi, #log, #step))
}

/// For a range field whose type the macro cannot see (an alias), `const`
/// assertions that the bounds fit the type, each at the bound's tokens, so
/// what compiles never fails at run time with "does not fit its field".
fn range_asserts(f: &Field, p: &TokenStream) -> TokenStream {
    if f.prim != Prim::Other {
        return TokenStream::new();
    }
    let inner = f.inner;
    let ty = inner.to_token_stream().to_string().replace(' ', "");
    let name = f.ident.unraw().to_string();
    let mut out = TokenStream::new();
    match &f.kind {
        Some(Kind::Float(spec)) => {
            for n in [&spec.low, &spec.high] {
                let v = float_lit(n.float.abs());
                let shown = n.expr.to_token_stream().to_string().replace(' ', "");
                let msg = format!(
                    "the bound {shown} of `{name}` does not fit its type `{ty}`: the field would read \
                     infinity while the study stores {shown}; use `f64` or a bound within range"
                );
                out.extend(quote_spanned! {n.expr.span()=>
                    const _: () = ::core::assert!(
                        #v <= <#inner as #p::runtime::FloatValue>::MAX,
                        #msg
                    );
                });
            }
        }
        Some(Kind::Int(spec)) => {
            for (n, low) in [(&spec.low, true), (&spec.high, false)] {
                let Some(i) = n.int else { continue };
                let v = Literal::i128_suffixed(i);
                let shown = n.expr.to_token_stream().to_string().replace(' ', "");
                let msg = format!(
                    "the bound {shown} of `{name}` does not fit its type `{ty}`: every trial \
                     sampling it would fail; change the range or the type"
                );
                let cond = if low {
                    quote_spanned!(n.expr.span()=> <#inner as #p::runtime::IntValue>::MIN <= #v)
                } else {
                    quote_spanned!(n.expr.span()=> #v <= <#inner as #p::runtime::IntValue>::MAX)
                };
                out.extend(quote_spanned! {n.expr.span()=>
                    const _: () = ::core::assert!(#cond, #msg);
                });
            }
        }
        _ => {}
    }
    out
}

fn sample_body(input: &Input, p: &TokenStream) -> TokenStream {
    let mut body = TokenStream::new();
    // Contradictions only a search over the conditions can find are reported
    // once per process, when the first trial samples the space.
    if !crate::startup::checks(input, p).is_empty() {
        body.extend(quote! {
            static __HPO_CHECKED: ::std::sync::Once = ::std::sync::Once::new();
            __HPO_CHECKED.call_once(|| {
                #p::runtime::report_problems(&<Self as #p::SearchSpace>::describe());
            });
        });
    }
    for f in &input.fields {
        body.extend(choices_decl(f));
        if is_target(input, f) {
            let n = narrow_var(f);
            body.extend(quote!(let mut #n = #p::runtime::Narrow::new();));
        }
    }
    // A constraint is evaluated as soon as every field its condition and its
    // narrowing values (`width <= max_width`) read is bound.
    let ready: Vec<usize> = input
        .constraints
        .iter()
        .map(|c| {
            let values = c.rules.iter().flat_map(|r| &r.values);
            std::iter::once(&c.cond)
                .chain(values)
                .flat_map(|e| crate::valid::read_fields(input, e))
                .map(|i| i + 1)
                .max()
                .unwrap_or(0)
        })
        .collect();
    for slot in 0..=input.fields.len() {
        for (c, _) in input
            .constraints
            .iter()
            .zip(&ready)
            .filter(|(_, r)| **r == slot)
        {
            let cond = &c.cond;
            let text = &c.text;
            let rules = c.rules.iter().filter_map(|r| rule_code(input, r, text));
            body.extend(quote! {
                if #cond {
                    #(#rules)*
                }
            });
        }
        let Some(f) = input.fields.get(slot) else {
            break;
        };
        let ident = f.ident;
        let ty = f.ty;
        let name = param_name(f);
        let narrow = if is_target(input, f) {
            let n = narrow_var(f);
            quote!(&#n)
        } else {
            quote!(&#p::runtime::Narrow::new())
        };
        let inner = f.inner;
        let value = match &f.kind {
            Some(Kind::Float(spec)) => {
                let d = float_dist(p, spec);
                quote!(#p::runtime::float::<#inner>(__hpo_trial, #name, #d, #narrow)?)
            }
            Some(Kind::Int(spec)) => {
                let d = int_dist(p, spec);
                quote!(#p::runtime::int::<#inner>(__hpo_trial, #name, #d, #narrow)?)
            }
            Some(Kind::Bool | Kind::Lits(_)) => {
                let cv = choices_var(f);
                quote!(#p::runtime::choose(__hpo_trial, #name, &#cv, #narrow)?)
            }
            Some(Kind::Enum) => {
                let v = variants_fn(f);
                quote!(#p::runtime::choose_enum(__hpo_trial, #name, Self::#v(), #narrow)?)
            }
            Some(Kind::Fixed(e)) => e.to_token_stream(),
            Some(Kind::Default) => default_value(f),
            None => quote!(::core::unreachable!()),
        };
        let value = optional(f, value, p);
        body.extend(quote!(let #ident: #ty = #value;));
    }
    let idents = input.fields.iter().map(|f| f.ident);
    body.extend(quote!(#p::Result::Ok(Self { #(#idents),* })));
    body
}

/// `Default::default()` spanned at the field's type, so a type without
/// `Default` is reported at the field, not at the macro.
pub fn default_value(f: &Field) -> TokenStream {
    let ty = f.ty;
    quote_spanned!(ty.span()=> <#ty as ::core::default::Default>::default())
}

fn optional(f: &Field, value: TokenStream, p: &TokenStream) -> TokenStream {
    match (&f.active_if, f.optional) {
        (Some(cond), true) => {
            let cond = &cond.value;
            quote!(if #cond { #p::Option::Some(#value) } else { #p::Option::None })
        }
        _ => value,
    }
}

/// The narrowing one rule applies to its field's accumulator.
fn rule_code(input: &Input, rule: &Rule, text: &str) -> Option<TokenStream> {
    let (_, f) = input.field(&rule.field)?;
    let n = narrow_var(f);
    let inner = f.inner;
    let span = rule.op.span;
    match f.kind.as_ref()? {
        Kind::Float(_) | Kind::Int(_) => {
            let v = rule.values.first()?;
            let v = match lit_value(v).and_then(|l| l.as_f64()) {
                Some(x) => float_lit(x),
                None => quote_spanned!(v.span()=> ((#v) as f64)),
            };
            Some(match rule.op.value {
                Op::Le => quote_spanned!(span=> #n.at_most(#v, #text);),
                Op::Ge => quote_spanned!(span=> #n.at_least(#v, #text);),
                Op::Eq => quote_spanned!(span=> #n.at_least(#v, #text); #n.at_most(#v, #text);),
                Op::In => return None,
            })
        }
        kind @ (Kind::Bool | Kind::Lits(_) | Kind::Enum) => {
            let set = match kind {
                Kind::Enum => {
                    let v = variants_fn(f);
                    quote!(Self::#v().all)
                }
                _ => {
                    let cv = choices_var(f);
                    quote!(&#cv)
                }
            };
            // Strings compare as `String == &str`, without allocating.
            let prim = if f.prim == Prim::String {
                Prim::Str
            } else {
                f.prim
            };
            let vals: Vec<TokenStream> = rule.values.iter().map(|e| typed_lit(prim, e)).collect();
            let pred = match rule.op.value {
                Op::Le => quote_spanned!(span=> *__hpo_v <= #(#vals)*),
                Op::Ge => quote_spanned!(span=> *__hpo_v >= #(#vals)*),
                Op::Eq | Op::In => quote_spanned!(span=> #(*__hpo_v == #vals)||*),
            };
            Some(quote!(#n.keep(#set, |__hpo_v: &#inner| #pred, #text);))
        }
        Kind::Fixed(_) | Kind::Default => None,
    }
}

fn to_params_body(input: &Input, p: &TokenStream) -> TokenStream {
    let pushes = input.fields.iter().filter_map(|f| {
        let conv = |v: TokenStream| -> Option<TokenStream> {
            Some(match f.kind.as_ref()? {
                Kind::Float(_) => quote!(#p::runtime::float_param(#v)),
                Kind::Int(_) => quote!(#p::runtime::int_param(#v)),
                Kind::Bool | Kind::Lits(_) => quote!(#p::runtime::choice_param(#v)),
                Kind::Enum => {
                    let vf = variants_fn(f);
                    quote!(#p::runtime::enum_param(#v, Self::#vf()))
                }
                Kind::Fixed(_) | Kind::Default => return None,
            })
        };
        let ident = f.ident;
        let name = param_name(f);
        Some(if f.optional {
            let value = conv(quote!(__hpo_v))?;
            quote! {
                if let #p::Option::Some(__hpo_v) = &self.#ident {
                    __hpo_out.push((#p::String::from(#name), #value));
                }
            }
        } else {
            let value = conv(quote!(&self.#ident))?;
            quote!(__hpo_out.push((#p::String::from(#name), #value));)
        })
    });
    quote! {
        let mut __hpo_out = #p::Vec::new();
        #(#pushes)*
        __hpo_out
    }
}

fn from_params_body(input: &Input, p: &TokenStream, ty_name: &str) -> TokenStream {
    let mut body = TokenStream::new();
    for f in &input.fields {
        body.extend(choices_decl(f));
    }
    for f in &input.fields {
        let ident = f.ident;
        let ty = f.ty;
        let inner = f.inner;
        let name = param_name(f);
        let value = match &f.kind {
            Some(Kind::Float(_)) => {
                quote!(#p::runtime::get_float::<#inner>(__hpo_params, #ty_name, #name)?)
            }
            Some(Kind::Int(_)) => {
                quote!(#p::runtime::get_int::<#inner>(__hpo_params, #ty_name, #name)?)
            }
            Some(Kind::Bool | Kind::Lits(_)) => {
                let cv = choices_var(f);
                quote!(#p::runtime::get_choice(__hpo_params, #ty_name, #name, &#cv)?)
            }
            Some(Kind::Enum) => {
                let v = variants_fn(f);
                quote!(#p::runtime::get_enum(__hpo_params, #ty_name, #name, Self::#v())?)
            }
            Some(Kind::Fixed(e)) => e.to_token_stream(),
            Some(Kind::Default) => default_value(f),
            None => quote!(::core::unreachable!()),
        };
        let value = optional(f, value, p);
        body.extend(quote!(let #ident: #ty = #value;));
    }
    let idents = input.fields.iter().map(|f| f.ident);
    body.extend(quote!(#p::Result::Ok(Self { #(#idents),* })));
    body
}

fn describe_body(input: &Input, p: &TokenStream, ty_name: &str) -> TokenStream {
    let mut chain = quote!(#p::SpaceDescription::new(#ty_name));
    for f in &input.fields {
        let name = param_name(f);
        let active = match (&f.active_if, f.optional) {
            (Some(c), true) => {
                let t = crate::text::pretty(&c.value.to_token_stream());
                quote!(#p::Option::Some(#t))
            }
            _ => quote!(#p::Option::None),
        };
        let dist = match &f.kind {
            Some(Kind::Float(spec)) => {
                let d = float_dist(p, spec);
                quote!(#p::runtime::any(#d))
            }
            Some(Kind::Int(spec)) => {
                let d = int_dist(p, spec);
                quote!(#p::runtime::any(#d))
            }
            Some(Kind::Bool | Kind::Lits(_)) => {
                let decl = choices_decl(f);
                let cv = choices_var(f);
                quote!({ #decl #p::runtime::categorical(#p::runtime::labels(&#cv)) })
            }
            Some(Kind::Enum) => {
                let v = variants_fn(f);
                quote!(#p::runtime::categorical(#p::runtime::enum_labels(Self::#v())))
            }
            Some(Kind::Fixed(e)) => {
                let t = crate::text::pretty(&e.to_token_stream());
                chain = quote!(#chain.fixed(#name, #t));
                continue;
            }
            Some(Kind::Default) => {
                chain = quote!(#chain.fixed(#name, "Default::default()"));
                continue;
            }
            None => continue,
        };
        chain = quote!(#chain.searched(#name, #dist, #active));
    }
    for c in &input.constraints {
        let t = &c.text;
        chain = quote!(#chain.constraint(#t));
    }
    let checks = crate::startup::checks(input, p);
    if checks.is_empty() {
        return chain;
    }
    quote! {
        let mut __hpo_d = #chain;
        #checks
        __hpo_d
    }
}

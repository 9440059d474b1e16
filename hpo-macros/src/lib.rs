//! # hpo-macros: typed search spaces
//!
//! `#[search_space]` turns a plain struct into an `hpo::SearchSpace`;
//! `#[derive(Choice)]` makes an enum's unit variants the choices of a
//! parameter. Use them through the `hpo` facade (`#[hpo::search_space]`,
//! `#[derive(hpo::Choice)]`); the generated code names only
//! `::hpo::__private::..` (override with `#[search_space(crate = "path")]`).
//!
//! ## Design
//!
//! The attribute is a pipeline, after thiserror's implementation:
//!
//! * `attr.rs` parses `#[param(..)]`, `#[constraint(..)]` and the macro's own
//!   arguments into values that keep their spans;
//! * `ast.rs` builds a typed model of the struct that borrows from syn and
//!   checks everything about one field alone (kind against type, ranges,
//!   choices, `active_if` against `Option`);
//! * `valid.rs` holds only the rules between fields (conditions read earlier
//!   fields; narrowings can hold);
//! * `expand.rs` generates the impl, and `startup.rs` the start-up search
//!   for contradictions that depend on the user's condition code (with
//!   `bounds.rs`, which reads what conditions say about float and wide
//!   integer fields as bounds);
//!   `fallback.rs` is what is emitted beside the errors, so the user sees our
//!   errors and not a cascade.
//!
//! Every mistake is collected in a `Ctxt` and reported in one compile, each at
//! the tokens the user must change. The struct itself is emitted unchanged
//! except for the helper attributes, so derives, serde attributes, docs and
//! visibility are the user's.

mod ast;
mod attr;
mod bounds;
mod choice;
mod ctxt;
mod expand;
mod fallback;
mod startup;
mod symbol;
mod text;
mod ty;
mod valid;

use proc_macro::TokenStream;

/// Turns a struct into a typed search space (`impl hpo::SearchSpace`).
///
/// See the book chapter "Search spaces" for every field kind and constraint
/// form. In short:
///
/// ```ignore
/// #[hpo::search_space]
/// #[constraint(if model.is_heavy() { batch_size <= 16, max_len <= 384 })]
/// #[derive(Debug, Clone)]
/// struct Criteria {
///     #[param(choice)]                             model: Backbone,
///     #[param(float(1e-6..=5e-4, log))]            lr: f64,
///     #[param(choice(8, 16, 32, 64))]              batch_size: usize,
///     #[param(int(128..=512, step = 32))]          max_len: usize,
///     #[param(int(0..=3))]                         head_layers: usize,
///     #[param(int(64..=1024, log), active_if = head_layers > 0)]
///     head_hidden: Option<usize>,
///     #[param(fixed = 100)]                        epochs: usize,
/// }
/// ```
#[proc_macro_attribute]
pub fn search_space(args: TokenStream, input: TokenStream) -> TokenStream {
    expand_search_space(args.into(), input.into()).into()
}

fn expand_search_space(
    args: proc_macro2::TokenStream,
    input: proc_macro2::TokenStream,
) -> proc_macro2::TokenStream {
    let item: syn::ItemStruct = match syn::parse2(input.clone()) {
        Ok(item) => item,
        Err(_) => {
            let err = syn::Error::new(
                proc_macro2::Span::call_site(),
                "#[search_space] applies to a struct with named fields",
            );
            let mut out = err.to_compile_error();
            out.extend(input);
            return out;
        }
    };
    let cx = ctxt::Ctxt::new();
    let krate = attr::parse_macro_args(&cx, args);
    let input = ast::Input::from_syn(&cx, &item, krate);
    valid::check(&cx, &input);
    match cx.check() {
        Ok(()) => expand::expand(&input),
        Err(e) => {
            let mut out = e.to_compile_error();
            out.extend(fallback::fallback(&input));
            out
        }
    }
}

/// Makes an enum of unit variants usable as `#[param(choice)]`.
///
/// Each variant is a choice, stored under its name (`"BertBase"`).
/// `#[choice(crate = "path")]` overrides the path of the `hpo` facade.
#[proc_macro_derive(Choice, attributes(choice))]
pub fn derive_choice(input: TokenStream) -> TokenStream {
    match syn::parse::<syn::DeriveInput>(input) {
        Ok(input) => choice::derive(&input).into(),
        Err(e) => e.to_compile_error().into(),
    }
}

#[cfg(test)]
mod tests {
    use super::expand_search_space;
    use quote::quote;

    fn criteria() -> proc_macro2::TokenStream {
        quote! {
            #[constraint(if model.is_heavy() { batch_size <= 16 })]
            #[derive(Debug)]
            pub struct Criteria {
                #[param(choice)] model: Backbone,
                #[param(choice(8, 16, 32))] batch_size: usize,
                #[param(int(0..=3))] layers: u8,
                #[param(int(8..=64), active_if = layers > 0)] width: Option<u32>,
                #[param(fixed = 100)] epochs: usize,
            }
        }
    }

    #[test]
    fn generated_code_names_hpo_only_under_private() {
        let out = expand_search_space(quote!(), criteria()).to_string();
        assert!(!out.contains("compile_error"), "{out}");
        let hpo_paths = out.matches(":: hpo ::").count();
        assert!(hpo_paths > 10);
        assert_eq!(
            out.matches(":: hpo :: __private").count(),
            hpo_paths,
            "{out}"
        );
        // The user's struct keeps its derive and visibility, without helper attributes.
        assert!(
            out.contains("# [derive (Debug)] pub struct Criteria"),
            "{out}"
        );
        assert!(
            !out.contains("# [param") && !out.contains("# [constraint"),
            "{out}"
        );
    }

    #[test]
    fn the_crate_override_replaces_every_path() {
        let out = expand_search_space(quote!(crate = "my::engine"), criteria()).to_string();
        assert!(!out.contains(":: hpo ::"), "{out}");
        assert!(
            out.contains("my :: engine :: __private :: SearchSpace"),
            "{out}"
        );
    }

    #[test]
    fn a_start_up_search_is_generated_only_for_constraints_under_different_conditions() {
        let apart = quote! {
            #[constraint(if small { width <= 64 })]
            #[constraint(if tight { width >= 128 })]
            struct S {
                #[param(bool)] small: bool,
                #[param(bool)] tight: bool,
                #[param(int(8..=256))] width: u32,
            }
        };
        let out = expand_search_space(quote!(), apart).to_string();
        assert!(!out.contains("compile_error"), "{out}");
        assert_eq!(out.matches("'__hpo_search :").count(), 1, "{out}");
        assert!(out.contains("problem"), "{out}");
        assert_eq!(
            out.matches(":: hpo :: __private").count(),
            out.matches(":: hpo ::").count(),
            "{out}"
        );
        // Compatible narrowings need no search.
        let compatible = quote! {
            #[constraint(if small { width <= 64 })]
            #[constraint(if tight { width >= 32 })]
            struct S {
                #[param(bool)] small: bool,
                #[param(bool)] tight: bool,
                #[param(int(8..=256))] width: u32,
            }
        };
        let out = expand_search_space(quote!(), compatible).to_string();
        assert!(!out.contains("__hpo_search"), "{out}");
        // A float compared with a literal is bounded by a region; arithmetic
        // on it is not decided, so that pair is left to run time.
        let float = |cond: proc_macro2::TokenStream| {
            quote! {
                #[constraint(if #cond { width <= 64 })]
                #[constraint(if tight { width >= 128 })]
                struct S {
                    #[param(float(0.001..=0.1))] lr: f64,
                    #[param(bool)] tight: bool,
                    #[param(int(8..=256))] width: u32,
                }
            }
        };
        let out = expand_search_space(quote!(), float(quote!(lr > 0.01))).to_string();
        assert!(!out.contains("compile_error"), "{out}");
        assert_eq!(out.matches("'__hpo_search :").count(), 1, "{out}");
        assert!(
            out.contains("runtime :: Region :: new") && out.contains("Bound :: Gt (0.01f64)"),
            "{out}"
        );
        let out = expand_search_space(quote!(), float(quote!(lr * 2.0 > 0.01))).to_string();
        assert!(
            !out.contains("compile_error") && !out.contains("__hpo_search"),
            "{out}"
        );
    }

    /// The messages of the compile errors an expansion reports.
    fn errors(input: proc_macro2::TokenStream) -> Vec<String> {
        use proc_macro2::TokenTree;
        let out: Vec<TokenTree> = expand_search_space(quote!(), input).into_iter().collect();
        out.windows(3)
            .filter_map(|w| match w {
                [TokenTree::Ident(id), TokenTree::Punct(_), TokenTree::Group(g)]
                    if id == "compile_error" =>
                {
                    syn::parse2::<syn::LitStr>(g.stream())
                        .ok()
                        .map(|l| l.value())
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn contradictions_under_one_condition_are_errors_for_every_kind() {
        let space = |rules: proc_macro2::TokenStream| {
            quote! {
                #[constraint(if heavy { #rules })]
                struct S {
                    #[param(bool)] heavy: bool,
                    #[param(choice)] model: Backbone,
                    #[param(float(1e-5..=1e-1, log))] lr: f64,
                    #[param(choice("a", "b", "c"))] name: String,
                }
            }
        };
        for rules in [
            quote!(model == Backbone::A, model in [Backbone::B, Backbone::C]),
            quote!(lr <= 0.001, lr >= 0.01),
            quote!(name in ["a", "b"], name == "c"),
        ] {
            let errs = errors(space(rules.clone()));
            assert_eq!(errs.len(), 1, "{rules}: {errs:?}");
            assert!(errs[0].contains("contradicts"), "{errs:?}");
        }
        for rules in [
            quote!(model in [Backbone::A, Backbone::B], model == Backbone::B),
            quote!(lr <= 0.01, lr >= 0.01),
            quote!(name in ["a", "b"], name == "b"),
        ] {
            let errs = errors(space(rules.clone()));
            assert!(errs.is_empty(), "{rules}: {errs:?}");
        }
    }

    #[test]
    fn a_cycle_through_a_constraint_is_named_as_one() {
        let errs = errors(quote! {
            #[constraint(if hidden.is_some() { wide == true })]
            struct S {
                #[param(bool)] wide: bool,
                #[param(int(1..=4), active_if = wide)] hidden: Option<u32>,
            }
        });
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].contains("cycle (`wide` -> `hidden` -> `wide`)")
                && errs[0].contains("(a constraint)")
                && errs[0].contains("(its `active_if`)"),
            "{errs:?}"
        );
    }

    #[test]
    fn every_mistake_is_reported_in_one_expansion_beside_a_fallback() {
        let input = quote! {
            struct S {
                #[param(flaot(0.0..=1.0))] a: f64,
                #[param(int(5..=1))] b: u32,
                #[param(choice())] c: usize,
                d: u32,
            }
        };
        let out = expand_search_space(quote!(), input).to_string();
        assert_eq!(out.matches("compile_error").count(), 4, "{out}");
        // The fallback still defines the struct and an impl, so user code type-checks.
        assert!(out.contains("struct S"), "{out}");
        assert!(out.contains("unreachable"), "{out}");
    }
}

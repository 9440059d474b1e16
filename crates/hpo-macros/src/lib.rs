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
//! * `expand.rs` generates the impl; `fallback.rs` is what is emitted beside
//!   the errors, so the user sees our errors and not a cascade.
//!
//! Every mistake is collected in a `Ctxt` and reported in one compile, each at
//! the tokens the user must change. The struct itself is emitted unchanged
//! except for the helper attributes, so derives, serde attributes, docs and
//! visibility are the user's.

mod ast;
mod attr;
mod choice;
mod ctxt;
mod expand;
mod fallback;
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

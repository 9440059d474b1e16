//! What to emit when the attributes are wrong (after thiserror's `fallback.rs`).

use crate::ast::Input;
use crate::expand::{private, stripped};
use proc_macro2::TokenStream;
use quote::{quote, ToTokens};

/// The struct without helper attributes and an `impl SearchSpace` whose bodies are
/// unreachable: emitted beside the errors so the user's other code still
/// type-checks and the compiler reports our errors, not twenty follow-ups.
pub fn fallback(input: &Input) -> TokenStream {
    let item = stripped(input.item);
    let p = private(input);
    let ident = &input.item.ident;
    if !input.item.generics.params.is_empty() {
        return item.into_token_stream();
    }
    quote! {
        #item

        #[automatically_derived]
        impl #p::SearchSpace for #ident {
            fn sample(_: &mut #p::Trial) -> #p::Result<Self, #p::TrialError> {
                ::core::unreachable!()
            }
            fn describe() -> #p::SpaceDescription {
                ::core::unreachable!()
            }
            fn to_params(&self) -> #p::Vec<(#p::String, #p::ParamValue)> {
                ::core::unreachable!()
            }
            fn from_params(
                _: &#p::BTreeMap<#p::String, #p::ParamValue>,
            ) -> #p::Result<Self, #p::Error> {
                ::core::unreachable!()
            }
        }
    }
}

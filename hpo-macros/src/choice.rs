//! `#[derive(Choice)]`: an enum's unit variants as the choices of a parameter.

use crate::attr::parse_choice_attr;
use crate::ctxt::Ctxt;
use crate::symbol::CHOICE_ATTR;
use proc_macro2::TokenStream;
use quote::quote;
use syn::ext::IdentExt;
use syn::{Data, DeriveInput, Fields};

pub fn derive(input: &DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let mut krate: Option<syn::Path> = None;
    for a in input
        .attrs
        .iter()
        .filter(|a| a.path().is_ident(CHOICE_ATTR))
    {
        if let Some(k) = parse_choice_attr(&cx, a) {
            krate = Some(k);
        }
    }
    let krate = krate.unwrap_or_else(|| syn::parse_quote!(::hpo));
    let ident = &input.ident;
    if !input.generics.params.is_empty() {
        cx.error_spanned_by(
            &input.generics,
            "`Choice` cannot be derived for a generic enum",
        );
    }
    let variants: Vec<&syn::Ident> = match &input.data {
        Data::Enum(e) => {
            if e.variants.is_empty() {
                cx.error_spanned_by(ident, "`Choice` needs at least one variant to choose from");
            }
            e.variants
                .iter()
                .filter(|v| {
                    if matches!(v.fields, Fields::Unit) {
                        true
                    } else {
                        cx.error_spanned_by(
                            &v.fields,
                            format!(
                                "`Choice` variants must be unit variants (`{}`), since a choice is stored by name",
                                v.ident
                            ),
                        );
                        false
                    }
                })
                .map(|v| &v.ident)
                .collect()
        }
        _ => {
            cx.error_spanned_by(
                ident,
                "`Choice` can only be derived for an enum of unit variants",
            );
            Vec::new()
        }
    };
    if let Err(e) = cx.check() {
        return e.to_compile_error();
    }
    let names: Vec<String> = variants.iter().map(|v| v.unraw().to_string()).collect();
    let index = 0..variants.len();
    let index2 = 0..variants.len();
    quote! {
        #[automatically_derived]
        impl #krate::__private::ChoiceEnum for #ident {
            const ALL: &'static [Self] = &[#(Self::#variants),*];
            const NAMES: &'static [&'static str] = &[#(#names),*];

            fn index(&self) -> usize {
                match self {
                    #(Self::#variants => #index,)*
                }
            }

            fn from_index(index: usize) -> ::core::option::Option<Self> {
                match index {
                    #(#index2 => ::core::option::Option::Some(Self::#variants),)*
                    _ => ::core::option::Option::None,
                }
            }
        }
    }
}

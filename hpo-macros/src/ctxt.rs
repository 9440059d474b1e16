//! Error collection: every mistake in one compile (after serde_derive's `Ctxt`).

use std::cell::RefCell;
use std::fmt::Display;

/// Collects errors while parsing and validating; `check` combines them.
#[derive(Default)]
pub struct Ctxt {
    errors: RefCell<Vec<syn::Error>>,
}

impl Ctxt {
    pub fn new() -> Self {
        Ctxt::default()
    }

    /// Records an error spanned at `tokens`.
    pub fn error_spanned_by<T: quote::ToTokens, M: Display>(&self, tokens: T, message: M) {
        self.errors
            .borrow_mut()
            .push(syn::Error::new_spanned(tokens.into_token_stream(), message));
    }

    /// Records an error at `span`.
    pub fn error_at<M: Display>(&self, span: proc_macro2::Span, message: M) {
        self.errors
            .borrow_mut()
            .push(syn::Error::new(span, message));
    }

    /// Records a syn error (from a failed parse).
    pub fn syn_error(&self, err: syn::Error) {
        self.errors.borrow_mut().push(err);
    }

    /// How many errors were recorded so far.
    pub fn len(&self) -> usize {
        self.errors.borrow().len()
    }

    /// All recorded errors combined into one, or `Ok` if there were none.
    pub fn check(self) -> syn::Result<()> {
        let mut errors = self.errors.into_inner().into_iter();
        let Some(mut combined) = errors.next() else {
            return Ok(());
        };
        for rest in errors {
            combined.combine(rest);
        }
        Err(combined)
    }
}

//! The storage conformance suite: one set of tests every `Storage` must pass.

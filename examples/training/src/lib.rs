//! Nothing here but the examples of the README and of the error reference
//! (`core/src/errors.md`), run as this crate's doctests (`cargo test --workspace` runs them):
//! the README is rendered on registry and repository pages, where rustdoc's hidden lines would
//! show, so its examples are whole programs against the crates a user would have; the error
//! reference is rendered by rustdoc (`burn_route_core::errors`), whose own crate has no Burn.
#![cfg_attr(doctest, doc = include_str!("../../../README.md"))]

/// The error reference's examples.
#[cfg(doctest)]
#[doc = include_str!("../../../core/src/errors.md")]
pub struct ErrorReference;

//! Nothing here but the README's code, run as this crate's doctests (`cargo test --workspace`
//! runs them): the README is rendered on registry and repository pages, where rustdoc's hidden
//! lines would show, so its examples are whole programs against the crates a user would have.
#![cfg_attr(doctest, doc = include_str!("../../../README.md"))]

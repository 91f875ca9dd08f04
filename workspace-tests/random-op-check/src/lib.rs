//! Random manifests whose kernels are their compositions, and their generated op checks.
//!
//! `build.rs` draws manifests from a seed (`BURN_ROUTE_RANDOM_OP_CHECK_SEED`, default 45):
//! ops whose compositions come from a small library of forward passes with known derivatives,
//! with random policies (backward formulas, `checkpoint = "recompute"`, the composition on
//! `Autodiff<B, C>`, `composite`, `detach`, `reject`), ranks (a generic, another generic, fixed),
//! shape contracts, `dtypes`/`other_dtypes` and `[op.check]` keys. Every manifest must be
//! accepted (a refusal fails the build), and every op's generated check runs under
//! `cargo test`: values on Flex, the policy, gradients against finite differences, the kernels
//! (here the compositions, the trait's default bodies) against the compositions, the dtypes.
//! So "accepted, compiles, panics when called" cannot pass.
//!
//! Each manifest is a module `mK` (`ops`, `dispatch`, `tensor`, its compositions in `comp`,
//! its op check in `check`); `OUT_DIR/manifests/mK.toml` holds the manifest the build drew.

pub mod library;

include!(concat!(env!("OUT_DIR"), "/modules.rs"));

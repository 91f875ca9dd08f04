//! Hand-written kernels for the ops in `ops.toml`: the generated traits declare them, these
//! implement them.
//!
//! - [`flex`]: `impl RoutedOps for Flex` (and the Flex-only `RoutedOpsFlex`), forward kernels on
//!   the primitive's storage.
//! - [`composed`]: every op written with backend primitives; the kernels of `Cube` and `Remote`.
//! - `autodiff`: `impl RoutedOpsAutodiff for Autodiff<B, C>`, forward on `B` plus the backward
//!   pass of each differentiable op.
//! - `backward`: the gradient computations those backward passes call on `B`, fused on Flex
//!   (`BackwardKernels`).
//!
//! Composite ops (`composite = ...` in the manifest) need no kernel here: see
//! [`crate::composite`].

#[cfg(feature = "autodiff")]
mod autodiff;
#[cfg(feature = "autodiff")]
pub mod backward;
pub mod composed;
#[cfg(feature = "cube")]
pub mod cube;
#[cfg(feature = "cube")]
mod cube_routed;
pub mod flex;
pub mod fused;
pub mod meta;

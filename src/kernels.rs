//! Hand-written kernels for the ops in `ops.toml`: the generated traits declare them, these
//! implement them.
//!
//! - [`flex`]: `impl RoutedOps for Flex`, forward kernels on the primitive's storage.
//! - `autodiff`: `impl RoutedOpsAutodiff for Autodiff<B, C>`, forward on `B` plus the backward
//!   pass of each differentiable op.

#[cfg(feature = "autodiff")]
mod autodiff;
pub mod flex;

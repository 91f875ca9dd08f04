//! Routed custom ops for Burn's `Dispatch` backend, generated from the `ops.toml` manifest.
//!
//! - [`ops`]: the extension traits, implemented by hand in [`kernels`] for `Flex` and, for
//!   differentiable ops, for `Autodiff<B, C>`.
//! - [`dispatch`]: the generated `impl RoutedOps for Dispatch` and a `try_` function per op.
//! - [`tensor`]: the generated `Tensor<D>`-level functions most code calls.
//! - [`rt`]: the runtime support generated code (here and in downstream crates) names.
//!
//! The generated modules are also checked in under `generated/` for review.

pub mod composite;
pub mod kernels;
pub mod rt;

/// The extension traits generated from `ops.toml`.
pub mod ops {
    include!(concat!(env!("OUT_DIR"), "/routed_ops.rs"));
}

/// `impl RoutedOps for Dispatch` and every op's `try_` function (both route through a private
/// `route_` function), generated from `ops.toml`.
pub mod dispatch {
    include!(concat!(env!("OUT_DIR"), "/routed_dispatch.rs"));
}

/// `Tensor<D>`-level functions, generated from `ops.toml`.
pub mod tensor {
    include!(concat!(env!("OUT_DIR"), "/routed_tensor.rs"));
}

pub use ops::*;
pub use tensor::*;

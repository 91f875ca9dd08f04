//! Routed custom ops for Burn's `Dispatch` backend, generated from the `ops.toml` manifest.
//!
//! Start with [the guide](guide): using the ops, writing your own, GPU, Remote, the manifest
//! reference, the command line, errors and benchmarks.
//!
//! - [`ops`]: the extension traits, implemented by hand in [`kernels`] for `Flex` and, for
//!   differentiable ops, for `Autodiff<B, C>`.
//! - [`dispatch`]: the generated `impl RoutedOps for Dispatch` and a `try_` function per op.
//! - [`tensor`]: the generated `Tensor<D>`-level functions most code calls.
//! - [`rt`], [`check`], [`flex`]: the runtime (`burn-route-runtime`, re-exported), which the
//!   generated code here and in every crate with its own ops names.
//! - [`errors`]: the error reference every message links.
//! - [`flex`]: the machinery of the fused Flex kernels, for a crate's own kernels: any row
//!   stride, in place when the buffer is uniquely owned, on every core when Flex runs on rayon.
//!
//! The generated modules are also checked in under `generated/` for review.

#![warn(missing_docs)]

pub mod composite;
pub mod guide;
pub mod kernels;

/// Op checks (values across backends, autodiff policy, gradients against finite differences),
/// like PyTorch's `opcheck` and `gradcheck`: the runtime of generated op-check tests, from
/// `burn-route-runtime`.
pub use burn_route_runtime::check;
/// The error reference: one section per runtime error and manifest diagnostic, each linked by
/// its message (from `burn-route-core`, through `burn-route-runtime`).
pub use burn_route_runtime::errors;
/// The runtime support generated code names, from `burn-route-runtime` (which a crate with its
/// own ops depends on instead of this crate).
pub use burn_route_runtime::rt;

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

/// Writing a Flex kernel the way this crate's fused kernels are written: [`flex::Rows`] reads an
/// `f32` tensor of any row stride, [`flex::update_rows`] writes the output over a uniquely owned
/// input's buffer (else into a fresh one, never zero-filled) and splits large tensors across
/// rayon's threads when Flex itself runs on rayon ([`flex::PARALLEL`]: burn-flex's `rayon`
/// feature, however the application turned it on). See the guide's "Your own ops", step 5.
pub use burn_route_runtime::flex;
pub use kernels::linear_ce::{CrossEntropyOptions, Reduction};
pub use ops::*;
pub use tensor::*;

//! Hand-written kernels for the ops in `ops.toml`: the generated traits declare them, these
//! implement them.
//!
//! - [`arith`]: the arithmetic of the fused Flex kernels on plain values and rows, defined once
//!   (the kernels and the roofline bench use it).
//! - [`flex`]: `impl RoutedOps for Flex` (and the Flex-only `RoutedOpsFlex`), forward kernels on
//!   the primitive's storage.
//! - [`composed`]: every op written with backend primitives; the kernels of `Cube` and `Remote`.
//! - [`fused_linear`]: a norm or gate fused with the projection after it, which keeps less for
//!   the backward pass than the two apart.
//! - [`fused_mlp`]: a pre-norm SwiGLU MLP as one op, whose backward pass keeps only its input
//!   and rebuilds the rest a chunk of rows at a time.
//! - [`attention`]: multi-head self-attention with its projections as one op, whose backward
//!   pass keeps its inputs alone under gradient checkpointing and rebuilds the rest a chunk of
//!   sequences at a time.
//! - `autodiff`: `RoutedOpsAutodiff`, the hand-written `Autodiff<B, C>` kernels
//!   (`linear_cross_entropy`, `self_attention`).
//! - `gemm`: matrix products on `f32` buffers in place, for the Flex kernels that multiply
//!   chunks of rows (`linear_cross_entropy`, `rms_norm_swiglu_mlp`).
//! - [`backward`]: the fused backward kernels that `ops.toml`'s function-form backward passes
//!   name (`BackwardKernels`, fused on Flex and Cube). The `Autodiff<B, C>` implementations
//!   themselves are generated from the manifest's `backward` keys (formulas or these
//!   functions), and for the ops over declared types (no `backward`) from their compositions.
//!
//! Composite ops (`composite = ...` in the manifest) need no kernel here: see
//! [`crate::composite`].

pub mod arith;
pub mod attention;
#[cfg(feature = "autodiff")]
mod autodiff;
pub mod backward;
pub mod composed;
#[cfg(feature = "cube")]
pub mod cube;
#[cfg(feature = "cube")]
mod cube_routed;
pub mod flex;
pub mod fused_linear;
pub mod fused_mlp;
mod gemm;
mod half;
pub mod linear_ce;
pub mod meta;

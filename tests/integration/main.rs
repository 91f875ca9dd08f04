//! burn-route's integration tests, in one binary: each build configuration CI tests links the
//! library and Burn's backends once, not once per file (a test binary with the wgpu and remote
//! stacks is hundreds of megabytes). One module per area; run one with a filter, e.g.
//! `cargo test --features wgpu --test integration cube::`.
//!
//! Kept apart, as binaries of their own: `tests/generated.rs` (the snapshot check),
//! `tests/op_check.rs` (the generated op check, as a downstream crate includes it) and
//! `workspace-tests/tests/compile_random_manifests.rs` (builds scratch crates).

#[cfg(feature = "wgpu")]
#[path = "../support/adapter.rs"]
mod adapter;
mod common;
#[cfg(feature = "remote")]
#[path = "../support/loopback.rs"]
mod loopback;
#[cfg(any(feature = "wgpu", feature = "remote"))]
mod parity;

mod async_ops;
mod attention;
mod autodiff;
mod check_runtime;
mod cube;
mod cube_fusion;
mod declared;
mod declared_ops;
mod dtypes;
mod eager_forms;
mod error_reference;
mod formulas;
mod forward;
mod fused_forward;
mod fused_gradients;
mod fused_linear;
mod fused_mlp;
mod gradient_shapes;
mod half_precision;
mod lazy_forms;
mod linear_ce;
mod properties;
mod remote;
mod remote_forms;
mod remote_process;
mod route_errors;
mod shape_contracts;
mod signatures;
mod views;

//! The generated op check of `ops.toml` (`Builder::op_check`, rendered by `tests/generated.rs` into `generated/routed_check.rs`): for every op, its
//! values on each compiled backend, its autodiff policy, its gradients against finite
//! differences, its kernels against its `composition` and its declared output shapes
//! (`burn_route::check`).

include!("../generated/routed_check.rs");

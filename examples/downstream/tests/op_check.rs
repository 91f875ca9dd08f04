//! The generated op check of this crate's `ops.toml` (`Builder::op_check` in `build.rs`): for every op, its
//! values on each compiled backend, its autodiff policy, its gradients against finite
//! differences, its kernels against its `composition` and its declared output shapes
//! (`burn_route_runtime::check`).

include!(concat!(env!("OUT_DIR"), "/routed_check.rs"));

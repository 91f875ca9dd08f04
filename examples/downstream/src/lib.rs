//! A crate with its own routed ops: `ops.toml` → `build.rs` (burn-route-codegen) → the modules
//! below, with the kernels in [`kernels`]. It depends on `burn-route-runtime` alone at run time.

pub mod kernels;

/// The extension traits generated from `ops.toml`.
pub mod ops {
    include!(concat!(env!("OUT_DIR"), "/routed_ops.rs"));
}

/// `impl MyOps for Dispatch` and the `try_` functions.
pub mod dispatch {
    include!(concat!(env!("OUT_DIR"), "/routed_dispatch.rs"));
}

/// `Tensor<D>`-level functions.
pub mod tensor {
    include!(concat!(env!("OUT_DIR"), "/routed_tensor.rs"));
}

pub use tensor::*;

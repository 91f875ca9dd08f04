//! `leaky_relu` on Flex and, with the `wgpu` feature, on Cube (the GPU) with a CubeCL kernel:
//! the quickstart's crate, grown as the guide's walkthrough says.

/// The `MyOps` trait: one method per op, implemented by each backend.
pub mod ops {
    include!(concat!(env!("OUT_DIR"), "/routed_ops.rs"));
}

/// `impl MyOps for Dispatch`, and the fallible `try_` functions.
pub mod dispatch {
    include!(concat!(env!("OUT_DIR"), "/routed_dispatch.rs"));
}

/// The functions on `Tensor<D>`: `leaky_relu` and `try_leaky_relu`.
pub mod tensor {
    include!(concat!(env!("OUT_DIR"), "/routed_tensor.rs"));
}

mod kernels;

pub use tensor::*;

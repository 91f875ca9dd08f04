//! The kernels of `leaky_relu`: Flex here, Cube in `kernels/gpu.rs`. The backward pass is
//! generated from `ops.toml`.

use burn_route_runtime::flex::{Work, update_rows};
use burn_route_runtime::rt::backend::Scalar;
use burn_route_runtime::rt::{Backend, Flex, FloatTensor};

use crate::ops::MyOps;

#[cfg(feature = "wgpu")]
mod gpu;

impl MyOps for Flex {
    fn leaky_relu(x: FloatTensor<Self>, slope: f32) -> FloatTensor<Self> {
        // One pass over the `f32` values, in place when nobody else holds `x`.
        update_rows(x, Work::Light, |_first_row, values| {
            for v in values {
                if *v < 0.0 {
                    *v *= slope;
                }
            }
        })
        // Another dtype, or a strided last dimension: Burn's primitives.
        .unwrap_or_else(|x| composed::<Self>(x, slope))
    }
}

/// `relu(x) - slope * relu(-x)`, on any backend.
fn composed<B: Backend>(x: FloatTensor<B>, slope: f32) -> FloatTensor<B> {
    let negative = B::relu(B::float_neg(x.clone()));
    B::float_sub(
        B::relu(x),
        B::float_mul_scalar(negative, Scalar::from(slope)),
    )
}

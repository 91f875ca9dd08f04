//! Kernels for this crate's ops.

use burn_route_runtime::flex::{Work, update_rows};
use burn_route_runtime::rt::backend::{Scalar, Shape, TensorMetadata, get_or_init_device_settings};
use burn_route_runtime::rt::{Backend, DeviceOf, Flex, FloatTensor, IntTensor};

#[cfg(feature = "wgpu")]
mod gpu;

use crate::ops::MyOps;

/// `x * x`: the body of the composite `gpu_square`.
pub fn square<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_mul(x.clone(), x)
}

/// Clamps to `[lo, hi]` and counts the elements outside, with backend primitives: the op's
/// `composition`, which every backend runs (Flex included: it has no kernel of its own).
pub fn clamp_count<B: Backend>(
    x: FloatTensor<B>,
    lo: f32,
    hi: f32,
) -> (FloatTensor<B>, IntTensor<B>) {
    let settings = get_or_init_device_settings::<B>(&x.device());
    let below = B::float_lower_elem(x.clone(), Scalar::from(lo), settings.bool_dtype);
    let above = B::float_greater_elem(x.clone(), Scalar::from(hi), settings.bool_dtype);
    let count = B::int_add(
        B::int_sum(B::bool_into_int(below, settings.int_dtype)),
        B::int_sum(B::bool_into_int(above, settings.int_dtype)),
    );
    let clamped = B::float_clamp(x, Scalar::from(lo), Scalar::from(hi));
    (clamped, B::int_reshape(count, Shape::new([1])))
}

/// A tensor shaped like `x` filled with `value` on `device`, in the device's float dtype (the
/// op's `composition`).
pub fn fill_like<B: Backend>(
    x: &FloatTensor<B>,
    value: f32,
    device: &DeviceOf<B>,
) -> FloatTensor<B> {
    let dtype = get_or_init_device_settings::<B>(device).float_dtype;
    B::float_full(x.shape(), Scalar::from(value), device, dtype)
}

/// `x + bias` over the last dimension (the op's `composition`). The shape contract guarantees
/// `bias` is `[features]`.
pub fn add_bias<B: Backend>(x: FloatTensor<B>, bias: FloatTensor<B>) -> FloatTensor<B> {
    let mut dims = vec![1; x.shape().num_dims()];
    *dims.last_mut().expect("a tensor has a dimension") = bias.shape().num_elements();
    B::float_add(x, B::float_reshape(bias, Shape::from(dims)))
}

/// `x * p.weight + p.bias` over the last dimension (the op's `composition`, which its generated
/// `Autodiff<B, C>` kernel runs on `Autodiff<B, C>` too).
pub fn scale_shift<B: Backend>(
    x: FloatTensor<B>,
    p: crate::ops::ScaleShiftPrimitive<B>,
) -> FloatTensor<B> {
    let mut dims = vec![1; x.shape().num_dims()];
    *dims.last_mut().expect("a tensor has a dimension") = p.weight.shape().num_elements();
    let (weight, bias) = (
        B::float_reshape(p.weight, Shape::from(dims.clone())),
        B::float_reshape(p.bias, Shape::from(dims)),
    );
    B::float_add(B::float_mul(x, weight), bias)
}

/// The smallest and the largest element of `x` (the op's `composition`): a declared struct
/// output.
pub fn extent<B: Backend>(x: FloatTensor<B>) -> crate::ops::ExtentPrimitive<B> {
    let flat = B::float_reshape(x.clone(), Shape::new([x.shape().num_elements()]));
    crate::ops::ExtentPrimitive {
        min: B::float_min(flat.clone()),
        max: B::float_max(flat),
    }
}

/// `sum(x)` and `sum(x * x)` over the last dimension, with Burn's primitives on any backend.
pub fn power_sums<B: Backend>(x: FloatTensor<B>) -> crate::ops::PowerSumsPrimitive<B> {
    let last = x.shape().num_dims() - 1;
    crate::ops::PowerSumsPrimitive {
        first: B::float_sum_dim(x.clone(), last),
        second: B::float_sum_dim(B::float_mul(x.clone(), x), last),
    }
}

/// The shape of `extent`'s fields, from `x`'s spec: one element each.
pub fn one_element(_x: &burn_route_runtime::rt::TensorSpec) -> Shape {
    Shape::new([1])
}

/// `x * x * x` with backend primitives: for dtypes and layouts the fused Flex loop does not take.
fn cube_pow<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let squared = square::<B>(x.clone());
    mul::<B>(squared, x)
}

impl MyOps for Flex {
    fn cube_pow(x: FloatTensor<Self>) -> FloatTensor<Self> {
        // One pass over `f32` rows of any stride: over `x`'s own buffer when nobody else holds
        // it, split across threads when Flex runs on rayon and the tensor is large.
        update_rows(x, Work::Light, |_, values| {
            values.iter_mut().for_each(|v| *v = *v * *v * *v);
        })
        .unwrap_or_else(cube_pow::<Self>)
    }
    // `clamp_count`, `fill_like` and `add_bias` run their `composition` (the trait's default).
}

fn mul<B: Backend>(a: FloatTensor<B>, b: FloatTensor<B>) -> FloatTensor<B> {
    B::float_mul(a, b)
}

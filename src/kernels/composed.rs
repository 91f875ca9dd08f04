//! Every op of `RoutedOps` written once with backend primitives, generic over `B: Backend`.
//!
//! `Cube` and `Remote` use these as their kernels (on Remote each primitive runs on the server's
//! backend); the Flex kernels fall back to them for dtypes, layouts or broadcasts their fused
//! loops do not cover.

use burn_backend::tensor::{BoolTensor, FloatTensor, IntTensor, QuantizedTensor};
use burn_backend::{
    Backend, FloatDType, Scalar, Shape, TensorMetadata, get_or_init_device_settings,
};

pub fn add_relu<B: Backend>(lhs: FloatTensor<B>, rhs: FloatTensor<B>) -> FloatTensor<B> {
    B::relu(B::float_add(lhs, rhs))
}

pub fn scale<B: Backend>(x: FloatTensor<B>, alpha: f32) -> FloatTensor<B> {
    B::float_mul_scalar(x, Scalar::from(alpha))
}

pub fn argmax_last<B: Backend>(x: &FloatTensor<B>) -> IntTensor<B> {
    let last = x.shape().num_dims() - 1;
    let int_dtype = get_or_init_device_settings::<B>(&x.device()).int_dtype;
    B::float_argmax(x.clone(), last, int_dtype)
}

/// Burn's `float_round` rounds half to even.
pub fn round_half_even<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_round(x)
}

pub fn axpby<B: Backend>(
    x: FloatTensor<B>,
    y: Option<FloatTensor<B>>,
    alpha: f32,
    beta: f32,
) -> FloatTensor<B> {
    let ax = B::float_mul_scalar(x, Scalar::from(alpha));
    match y {
        Some(y) => B::float_add(ax, B::float_mul_scalar(y, Scalar::from(beta))),
        None => ax,
    }
}

pub fn masked_fill_count<B: Backend>(
    x: FloatTensor<B>,
    mask: &BoolTensor<B>,
    value: f32,
) -> (FloatTensor<B>, IntTensor<B>) {
    let int_dtype = get_or_init_device_settings::<B>(&x.device()).int_dtype;
    let filled = B::float_mask_fill(x, mask.clone(), Scalar::from(value));
    let count = B::int_sum(B::bool_into_int(mask.clone(), int_dtype));
    (filled, B::int_reshape(count, Shape::new([1])))
}

pub fn nan_to_num<B: Backend>(
    x: FloatTensor<B>,
    value: f32,
    with_mask: bool,
) -> (FloatTensor<B>, Option<BoolTensor<B>>) {
    let bool_dtype = get_or_init_device_settings::<B>(&x.device()).bool_dtype;
    let mask = B::float_is_nan(x.clone(), bool_dtype);
    let filled = B::float_mask_fill(x, mask.clone(), Scalar::from(value));
    (filled, with_mask.then_some(mask))
}

pub fn dequantize_relu<B: Backend>(x: QuantizedTensor<B>) -> FloatTensor<B> {
    B::relu(B::dequantize(x, FloatDType::F32))
}

/// `impl RoutedOps for $backend` with the composed kernels.
#[cfg(any(feature = "cube", feature = "remote"))]
macro_rules! composed_routed_ops {
    ($backend:ty) => {
        impl $crate::ops::RoutedOps for $backend {
            fn add_relu(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
                $crate::kernels::composed::add_relu::<Self>(lhs, rhs)
            }
            fn scale(x: FloatTensor<Self>, alpha: f32) -> FloatTensor<Self> {
                $crate::kernels::composed::scale::<Self>(x, alpha)
            }
            fn argmax_last(x: &FloatTensor<Self>) -> IntTensor<Self> {
                $crate::kernels::composed::argmax_last::<Self>(x)
            }
            fn round_half_even(x: FloatTensor<Self>) -> FloatTensor<Self> {
                $crate::kernels::composed::round_half_even::<Self>(x)
            }
            fn axpby(
                x: FloatTensor<Self>,
                y: Option<FloatTensor<Self>>,
                alpha: f32,
                beta: f32,
            ) -> FloatTensor<Self> {
                $crate::kernels::composed::axpby::<Self>(x, y, alpha, beta)
            }
            fn masked_fill_count(
                x: FloatTensor<Self>,
                mask: &BoolTensor<Self>,
                value: f32,
            ) -> (FloatTensor<Self>, IntTensor<Self>) {
                $crate::kernels::composed::masked_fill_count::<Self>(x, mask, value)
            }
            fn nan_to_num(
                x: FloatTensor<Self>,
                value: f32,
                with_mask: bool,
            ) -> (FloatTensor<Self>, Option<BoolTensor<Self>>) {
                $crate::kernels::composed::nan_to_num::<Self>(x, value, with_mask)
            }
            fn dequantize_relu(x: QuantizedTensor<Self>) -> FloatTensor<Self> {
                $crate::kernels::composed::dequantize_relu::<Self>(x)
            }
        }
    };
}

#[cfg(feature = "cube")]
composed_routed_ops!(burn_dispatch::backends::Cube);
#[cfg(feature = "remote")]
composed_routed_ops!(burn_dispatch::backends::Remote);

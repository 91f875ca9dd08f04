//! The forward passes random ops compose from: each with backward formulas that are its
//! derivative (`build.rs`'s `LIBRARY` writes them), so the op check's gradients against finite
//! differences hold whichever way the op gets its backward pass.

use burn_route_runtime::rt::backend::{Scalar, TensorMetadata};
use burn_route_runtime::rt::{Backend, FloatTensor, Shape};

fn scalar(value: impl Into<f64>) -> Scalar {
    Scalar::from(value.into())
}

fn last<B: Backend>(x: &FloatTensor<B>) -> usize {
    x.shape().num_dims() - 1
}

/// `x * s + y`.
pub fn scale_add<B: Backend>(x: FloatTensor<B>, y: FloatTensor<B>, s: f32) -> FloatTensor<B> {
    B::float_add(B::float_mul_scalar(x, scalar(s)), y)
}

/// `x * y`.
pub fn mul<B: Backend>(x: FloatTensor<B>, y: FloatTensor<B>) -> FloatTensor<B> {
    B::float_mul(x, y)
}

/// `log(1 + exp(x))`.
pub fn softplus<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_log(B::float_add_scalar(B::float_exp(x), scalar(1.0)))
}

/// `x * x`.
pub fn square<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_mul(x.clone(), x)
}

/// `x` minus its mean over the last dimension.
pub fn center<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let last = last::<B>(&x);
    B::float_sub(x.clone(), B::float_mean_dim(x, last))
}

/// `x` divided by the size of its last dimension.
pub fn by_width<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let width = x.shape()[last::<B>(&x)];
    #[allow(clippy::cast_precision_loss)]
    B::float_div_scalar(x, scalar(width as f64))
}

/// `tanh(x) * s`.
pub fn tanh_scaled<B: Backend>(x: FloatTensor<B>, s: f32) -> FloatTensor<B> {
    B::float_mul_scalar(B::float_tanh(x), scalar(s))
}

/// `exp(x) * s + y`.
pub fn exp_axpy<B: Backend>(x: FloatTensor<B>, y: FloatTensor<B>, s: f32) -> FloatTensor<B> {
    B::float_add(B::float_mul_scalar(B::float_exp(x), scalar(s)), y)
}

/// `x * w`, `w` a per-feature weight of `x`'s last dimension (`[features]`).
pub fn weighted<B: Backend>(x: FloatTensor<B>, w: FloatTensor<B>) -> FloatTensor<B> {
    let mut dims = vec![1; x.shape().num_dims()];
    let last = dims.len() - 1;
    dims[last] = w.shape()[0];
    B::float_mul(x, B::float_reshape(w, Shape::from(dims)))
}

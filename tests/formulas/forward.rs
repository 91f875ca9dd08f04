//! The forward passes the manifest names (`composition = "crate::formulas::forward::..."`), from backend
//! primitives.
//!
//! Shared by the integration tests (`tests/integration/formulas.rs`) and the formula benches
//! (`benches/formulas.rs`), which include the same generated code.

use std::sync::atomic::{AtomicUsize, Ordering};

use burn_route::rt::backend::{Scalar, TensorMetadata, get_or_init_device_settings};
use burn_route::rt::{Backend, FloatTensor, IntTensor};

/// How often `counted_exp` ran.
pub static RECOMPUTED_RUNS: AtomicUsize = AtomicUsize::new(0);
/// How often `counted_exp_kept` ran.
pub static KEPT_RUNS: AtomicUsize = AtomicUsize::new(0);
/// How often `counted_square` ran.
pub static SQUARE_RUNS: AtomicUsize = AtomicUsize::new(0);

fn s(value: f64) -> Scalar {
    Scalar::from(value)
}

fn last<B: Backend>(x: &FloatTensor<B>) -> usize {
    x.shape().num_dims() - 1
}

pub fn first<B: Backend>(x: FloatTensor<B>, _w: FloatTensor<B>) -> FloatTensor<B> {
    x
}

pub fn identity<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    x
}

pub fn recomputed_with_args<B: Backend>(
    x: FloatTensor<B>,
    _targets: burn_route::rt::IntTensor<B>,
    _flag: bool,
    _k: f32,
    _unused: f64,
) -> FloatTensor<B> {
    x
}

pub fn mul<B: Backend>(x: FloatTensor<B>, y: FloatTensor<B>) -> FloatTensor<B> {
    B::float_mul(x, y)
}

pub fn exp<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_exp(x)
}

pub fn log<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_log(x)
}

pub fn xlogx<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_mul(x.clone(), B::float_log(x))
}

pub fn sqrt<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_sqrt(x)
}

pub fn tanh<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_tanh(x)
}

pub fn logistic<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::sigmoid(x)
}

pub fn abs<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_abs(x)
}

pub fn sin<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_sin(x)
}

pub fn cos<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_cos(x)
}

pub fn recip<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_recip(x)
}

pub fn erf<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_erf(x)
}

pub fn pow_scalar<B: Backend>(x: FloatTensor<B>, p: f32) -> FloatTensor<B> {
    B::float_powf_scalar(x, Scalar::from(p))
}

/// `x^y` as `e^(y ln x)`, broadcasting as `float_mul` does.
pub fn pow<B: Backend>(x: FloatTensor<B>, y: FloatTensor<B>) -> FloatTensor<B> {
    B::float_exp(B::float_mul(B::float_log(x), y))
}

pub fn base_pow<B: Backend>(x: FloatTensor<B>, base: f64) -> FloatTensor<B> {
    B::float_exp(B::float_mul_scalar(x, s(base.ln())))
}

pub fn relu<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::relu(x)
}

pub fn relu_scale<B: Backend>(x: FloatTensor<B>, s: FloatTensor<B>) -> FloatTensor<B> {
    B::float_mul(x, B::relu(s))
}

pub fn leaky_relu<B: Backend>(x: FloatTensor<B>, slope: f64) -> FloatTensor<B> {
    B::leaky_relu(x, s(slope))
}

pub fn soft_shrink<B: Backend>(x: FloatTensor<B>, lambda: f32) -> FloatTensor<B> {
    let lambda = f64::from(lambda);
    B::float_sub(x.clone(), B::float_clamp(x, s(-lambda), s(lambda)))
}

/// `(x + y + |x - y|) / 2`, broadcasting.
pub fn maximum<B: Backend>(x: FloatTensor<B>, y: FloatTensor<B>) -> FloatTensor<B> {
    let gap = B::float_abs(B::float_sub(x.clone(), y.clone()));
    B::float_mul_scalar(B::float_add(B::float_add(x, y), gap), s(0.5))
}

pub fn hardtanh<B: Backend>(x: FloatTensor<B>, lo: f32, hi: f32) -> FloatTensor<B> {
    B::float_clamp(x, Scalar::from(lo), Scalar::from(hi))
}

pub fn clamp_square<B: Backend>(x: FloatTensor<B>, lo: f64, hi: f64) -> FloatTensor<B> {
    let c = B::float_clamp(x, s(lo), s(hi));
    B::float_mul(c.clone(), c)
}

pub fn softmax<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let d = last::<B>(&x);
    let shifted = B::float_sub(x.clone(), B::float_max_dim(x, d));
    let e = B::float_exp(shifted);
    B::float_div(e.clone(), B::float_sum_dim(e, d))
}

pub fn center<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let d = last::<B>(&x);
    B::float_sub(x.clone(), B::float_mean_dim(x, d))
}

pub fn center_first<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_sub(x.clone(), B::float_mean_dim(x, 0))
}

pub fn mix<B: Backend>(
    x: FloatTensor<B>,
    alpha: f32,
    beta: f64,
    k: i32,
    n: usize,
) -> FloatTensor<B> {
    #[allow(clippy::cast_precision_loss)]
    let factor = (f64::from(alpha) * 2.0 - beta) * f64::from(k) / n as f64;
    B::float_mul_scalar(x, s(factor))
}

/// The number the gradient formula of `number_functions` computes, written in Rust.
pub fn number_functions_factor(a: f64) -> f64 {
    let step = |b: bool| if b { 1.0 } else { 0.0 };
    a.exp()
        + a.ln()
        + a.sqrt()
        + a.tanh()
        + 1.0 / (1.0 + (-a).exp())
        + a.abs()
        + a.sin()
        + a.cos()
        + 1.0 / a
        + a.powf(a - 1.0)
        + step(a > 1.0)
        + step(a >= 1.0)
        + step(a < 1.0)
        + step(a <= 1.0)
        - a / 2.0
}

pub fn number_functions<B: Backend>(x: FloatTensor<B>, a: f64) -> FloatTensor<B> {
    B::float_mul_scalar(x, s(number_functions_factor(a)))
}

pub fn stop_scale<B: Backend>(x: FloatTensor<B>, s: FloatTensor<B>) -> FloatTensor<B> {
    B::float_mul(x, s)
}

pub fn fma<B: Backend>(
    x: FloatTensor<B>,
    w: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
) -> FloatTensor<B> {
    let product = B::float_mul(x, w);
    match bias {
        Some(bias) => B::float_add(product, bias),
        None => product,
    }
}

pub fn borrowed_mul<B: Backend>(x: FloatTensor<B>, w: &FloatTensor<B>) -> FloatTensor<B> {
    B::float_add(B::float_mul(x, w.clone()), w.clone())
}

fn argmax_last<B: Backend>(x: FloatTensor<B>) -> IntTensor<B> {
    let d = last::<B>(&x);
    let dtype = get_or_init_device_settings::<B>(&x.device()).int_dtype;
    B::float_argmax(x, d, dtype)
}

pub fn exp_argmax<B: Backend>(x: FloatTensor<B>) -> (FloatTensor<B>, IntTensor<B>) {
    (B::float_exp(x.clone()), argmax_last::<B>(x))
}

pub fn exp_argmax_recomputed<B: Backend>(x: FloatTensor<B>) -> (IntTensor<B>, FloatTensor<B>) {
    (argmax_last::<B>(x.clone()), B::float_exp(x))
}

pub fn scaled_softmax<B: Backend>(x: FloatTensor<B>, t: f32) -> FloatTensor<B> {
    softmax::<B>(B::float_mul_scalar(x, Scalar::from(t)))
}

pub fn counted_square<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    SQUARE_RUNS.fetch_add(1, Ordering::SeqCst);
    B::float_mul(x.clone(), x)
}

pub fn counted_exp<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    RECOMPUTED_RUNS.fetch_add(1, Ordering::SeqCst);
    B::float_exp(x)
}

pub fn counted_exp_kept<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    KEPT_RUNS.fetch_add(1, Ordering::SeqCst);
    B::float_exp(x)
}

pub fn sin_cos<B: Backend>(x: FloatTensor<B>) -> crate::formulas::routed::ops::SinCosPrimitive<B> {
    crate::formulas::routed::ops::SinCosPrimitive {
        sin: B::float_sin(x.clone()),
        cos: B::float_cos(x),
    }
}

pub fn nested_output<B: Backend>(
    x: FloatTensor<B>,
) -> crate::formulas::routed::ops::NestedPrimitive<B> {
    crate::formulas::routed::ops::NestedPrimitive {
        double: B::float_mul_scalar(x.clone(), s(2.0)),
        trig: sin_cos::<B>(x),
    }
}

pub fn row_sums<B: Backend>(
    x: FloatTensor<B>,
    scale: f32,
) -> crate::formulas::routed::ops::RowSumsPrimitive<B> {
    let rows = x.shape()[0];
    let dim = last::<B>(&x);
    crate::formulas::routed::ops::RowSumsPrimitive {
        total: B::float_mul_scalar(B::float_sum_dim(x.clone(), dim), s(f64::from(scale))),
        squares: B::float_mul(x.clone(), x),
        rows,
    }
}

/// `2 x` in the device's default float dtype.
pub fn double_to_default<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let dtype = get_or_init_device_settings::<B>(&x.device()).float_dtype;
    B::float_cast(B::float_mul_scalar(x, s(2.0)), dtype)
}

/// `x² / 2` in the device's default float dtype.
pub fn half_square_to_default<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let dtype = get_or_init_device_settings::<B>(&x.device()).float_dtype;
    let square = B::float_mul(x.clone(), x);
    B::float_cast(B::float_mul_scalar(square, s(0.5)), dtype)
}

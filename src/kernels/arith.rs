//! The arithmetic of each fused Flex kernel on plain `f32` values and rows, defined once: the
//! kernels ([`super::flex`], [`super::backward`]) call it on their rows, and the roofline of
//! `benches/ops.rs` runs it over a buffer that stays in L1 (the op's compute floor).
//!
//! Every function is straight-line code over [`math`], so a loop over it vectorises. The loops
//! are `for` loops and every function is `#[inline(always)]`: a kernel compiled per instruction
//! set (`flex::simd_fn!`) gets all of it inlined, compiled for its instruction set. (A closure
//! written here, passed to `for_each`, would be one function shared by every caller, which the
//! inliner may leave out of line, compiled for the baseline.)

use crate::flex::{keep_if, math, max_of, sum_by, sum_by3};

/// `relu(a + b)`.
#[inline(always)]
pub fn add_relu(a: f32, b: f32) -> f32 {
    (a + b).max(0.0)
}

/// `alpha * x + beta * y`.
#[inline(always)]
pub fn axpby(x: f32, y: f32, alpha: f32, beta: f32) -> f32 {
    alpha * x + beta * y
}

/// Exact (erf) GELU.
#[inline(always)]
pub fn gelu(z: f32) -> f32 {
    0.5 * z * (1.0 + math::erf(z * std::f32::consts::FRAC_1_SQRT_2))
}

/// `gelu(x + bias)` over one row, in place.
#[inline(always)]
pub fn bias_gelu_row(row: &mut [f32], bias: &[f32]) {
    for (v, b) in row.iter_mut().zip(bias) {
        *v = gelu(*v + b);
    }
}

/// `silu(gate) * up`.
#[inline(always)]
pub fn swiglu(gate: f32, up: f32) -> f32 {
    gate * math::sigmoid(gate) * up
}

/// Both gradients of `swiglu` at one element for the incoming gradient `grad`: `[dgate, dup]`.
#[inline(always)]
pub fn swiglu_grads(gate: f32, up: f32, grad: f32) -> [f32; 2] {
    let s = math::sigmoid(gate);
    let silu = gate * s;
    [grad * (up * (s + silu * (1.0 - s))), grad * silu]
}

/// `row` normalised to mean square 1 and scaled by `weight`, in place.
#[inline(always)]
pub fn rms_norm_row(row: &mut [f32], weight: &[f32], eps: f32) {
    let mean_square = sum_by(row, |v| v * v) / row.len() as f32;
    let inverse = 1.0 / (mean_square + eps).sqrt();
    for (v, g) in row.iter_mut().zip(weight) {
        *v *= inverse * g;
    }
}

/// The backward pass of [`rms_norm_row`] over one row `x`: `grad`, the incoming gradient,
/// becomes the gradient of `x` in place, and `weight_grad`, when given, gets the row's share of
/// the weight's gradient added.
#[inline(always)]
pub fn rms_norm_grad_row(
    grad: &mut [f32],
    x: &[f32],
    weight: &[f32],
    eps: f32,
    weight_grad: Option<&mut [f32]>,
) {
    let n = x.len() as f32;
    let inverse = 1.0 / (sum_by(x, |v| v * v) / n + eps).sqrt();
    // mean(g x^) with g = grad * weight and x^ = x r.
    let projection = inverse * sum_by3(grad, x, weight, |d, x, w| d * w * x) / n;
    if let Some(sums) = weight_grad {
        for ((s, d), x) in sums.iter_mut().zip(grad.iter()).zip(x) {
            *s += d * x * inverse;
        }
    }
    for ((d, x), w) in grad.iter_mut().zip(x).zip(weight) {
        *d = inverse * (*d * w - x * inverse * projection);
    }
}

/// `row` standardised, scaled by `gamma` and shifted by `beta`, in place.
#[inline(always)]
pub fn layer_norm_row(row: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let n = row.len() as f32;
    let mean = sum_by(row, |v| v) / n;
    let var = sum_by(row, |v| (v - mean) * (v - mean)) / n;
    let inverse = 1.0 / (var + eps).sqrt();
    for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
        *v = (*v - mean) * inverse * g + b;
    }
}

/// `row`'s softmax, in place (the maximum is subtracted first).
#[inline(always)]
pub fn softmax_row(row: &mut [f32]) {
    let max = max_of(row);
    for v in row.iter_mut() {
        *v = math::exp(*v - max);
    }
    let inverse = 1.0 / sum_by(row, |v| v);
    for v in row.iter_mut() {
        *v *= inverse;
    }
}

/// The cross-entropy of one row of logits whose target is `class`: `logsumexp(row) -
/// row[class]`.
#[inline(always)]
pub fn cross_entropy_row(row: &[f32], class: usize) -> f64 {
    let max = max_of(row);
    let sum = sum_by(row, |v| math::exp(v - max));
    f64::from(max + math::ln(sum) - row[class])
}

/// Dropout's pass over `values` with their keep decisions: kept values scaled, the others 0.
#[inline(always)]
pub fn dropout_apply(values: &mut [f32], keep: &[bool], scale: f32) {
    for (v, keep) in values.iter_mut().zip(keep) {
        *v = keep_if(*v * scale, *keep);
    }
}

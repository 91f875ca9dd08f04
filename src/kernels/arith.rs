//! The arithmetic of each fused Flex kernel on plain `f32` values and rows, defined once: the
//! kernels ([`super::flex`], [`super::backward`]) call it on their rows, and the roofline of
//! `benches/ops.rs` runs it over a buffer that stays in L1 (the op's compute floor).
//!
//! Every function is straight-line code over [`math`], so a loop over it vectorises.

use crate::flex::{keep_if, math, max_of, sum_by};

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

/// `erf` for the GELU kernels: Abramowitz and Stegun 7.1.26, absolute error below 1.5e-7.
///
/// GELU only ever uses `1 + erf(z)`, so an absolute error under the `f32` spacing near 1
/// (1.2e-7) is as good as a correctly rounded `erf` there, at a fraction of libm's cost (one
/// `exp` and a division): the fused `bias_gelu` is otherwise bound by `erff`.
#[inline(always)]
pub fn gelu_erf(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [
        0.254_829_6,
        -0.284_496_74,
        1.421_413_7,
        -1.453_152_1,
        1.061_405_4,
    ];
    let a = x.abs();
    let t = 1.0 / (1.0 + P * a);
    let poly = t * (A[0] + t * (A[1] + t * (A[2] + t * (A[3] + t * A[4]))));
    let y = 1.0 - poly * math::exp(-a * a);
    y.copysign(x)
}

/// Exact (erf) GELU.
#[inline(always)]
pub fn gelu(z: f32) -> f32 {
    0.5 * z * (1.0 + gelu_erf(z * std::f32::consts::FRAC_1_SQRT_2))
}

/// `gelu(x + bias)` over one row, in place.
#[inline(always)]
pub fn bias_gelu_row(row: &mut [f32], bias: &[f32]) {
    row.iter_mut()
        .zip(bias)
        .for_each(|(v, b)| *v = gelu(*v + b));
}

/// `silu(gate) * up`.
#[inline(always)]
pub fn swiglu(gate: f32, up: f32) -> f32 {
    gate * math::sigmoid(gate) * up
}

/// `row` normalised to mean square 1 and scaled by `weight`, in place.
#[inline(always)]
pub fn rms_norm_row(row: &mut [f32], weight: &[f32], eps: f32) {
    let mean_square = sum_by(row, |v| v * v) / row.len() as f32;
    let inverse = 1.0 / (mean_square + eps).sqrt();
    row.iter_mut()
        .zip(weight)
        .for_each(|(v, g)| *v *= inverse * g);
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
    row.iter_mut().for_each(|v| *v = math::exp(*v - max));
    let inverse = 1.0 / sum_by(row, |v| v);
    row.iter_mut().for_each(|v| *v *= inverse);
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

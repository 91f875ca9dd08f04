//! The gradient computations of the fused layers, called by their `Autodiff<B, C>` backward
//! passes on the inner backend `B`.
//!
//! Each default body composes backend primitives, so every backend has them (`Cube`, `Remote`).
//! `Flex` overrides them with one pass over contiguous `f32` rows, as its forward kernels do, and
//! uses the defaults for other layouts and dtypes. Each takes the parents' wanted flags and
//! returns a gradient only for the tracked ones.

use burn_backend::tensor::{FloatTensor, IntTensor};
use burn_backend::{Backend, Scalar, Shape, TensorData, TensorMetadata};
use burn_dispatch::backends::Flex;
use burn_dispatch::backends::flex::FlexTensor;

use super::composed::{broadcast_row, one_hot, rms_inverse, standardize, sum_to_row};

/// The mean over the last dimension, kept with size 1.
fn mean_last<B: Backend>(t: FloatTensor<B>) -> FloatTensor<B> {
    let last = t.shape().num_dims() - 1;
    B::float_mean_dim(t, last)
}

/// Gradients of the fused layers (see the module docs).
pub trait BackwardKernels: Backend {
    /// `[dx, dbias]` of `gelu(x + bias)`.
    fn bias_gelu_backward(
        x: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        wanted: [bool; 2],
    ) -> [Option<FloatTensor<Self>>; 2] {
        generic::bias_gelu_backward::<Self>(x, bias, grad, wanted)
    }

    /// `[dgate, dup]` of `silu(gate) * up`: `silu'(g) = s + silu (1 - s)` with `s = sigmoid(g)`.
    fn swiglu_backward(
        gate: FloatTensor<Self>,
        up: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        wanted: [bool; 2],
    ) -> [Option<FloatTensor<Self>>; 2] {
        generic::swiglu_backward::<Self>(gate, up, grad, wanted)
    }

    /// `[dx, dweight]` of RMS normalisation. With `r = 1 / sqrt(mean(x^2) + eps)`, `x^ = x r` and
    /// `g = grad * weight`: `dx = r (g - x^ mean(g x^))`, `dweight = sum(grad x^)` over rows.
    fn rms_norm_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        eps: f32,
        grad: FloatTensor<Self>,
        wanted: [bool; 2],
    ) -> [Option<FloatTensor<Self>>; 2] {
        generic::rms_norm_backward::<Self>(x, weight, eps, grad, wanted)
    }

    /// `[dx, dgamma, dbeta]` of layer normalisation. With `r = 1 / sqrt(var + eps)`,
    /// `x^ = (x - mean) r` and `g = grad * gamma`: `dx = r (g - mean(g) - x^ mean(g x^))`,
    /// `dgamma = sum(grad x^)`, `dbeta = sum(grad)` over rows.
    fn layer_norm_backward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        eps: f32,
        grad: FloatTensor<Self>,
        wanted: [bool; 3],
    ) -> [Option<FloatTensor<Self>>; 3] {
        generic::layer_norm_backward::<Self>(x, gamma, eps, grad, wanted)
    }

    /// `dx` of the last-dimension softmax with output `y`: `y (grad - sum(grad y))`.
    fn softmax_last_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        generic::softmax_last_backward::<Self>(y, grad)
    }

    /// `dlogits` of the mean cross-entropy: `(softmax(logits) - one_hot(targets)) * grad / batch`
    /// (`grad` has one element).
    fn cross_entropy_backward(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        generic::cross_entropy_backward::<Self>(logits, targets, grad)
    }
}

/// The contiguous `f32` elements of `t`, or `None`.
fn f32s(t: &FlexTensor) -> Option<&[f32]> {
    t.as_slice::<f32>()
}

/// `t` with a contiguous layout. The incoming gradient is often a broadcast view (the gradient
/// of a `sum` is a scalar expanded to the output's shape); one copy lets the fused loop take it
/// instead of falling back to the composed pass.
fn dense(t: FlexTensor) -> FlexTensor {
    if t.is_contiguous() && t.layout().start_offset() == 0 {
        t
    } else {
        t.to_contiguous()
    }
}

/// The rows of `x` and `grad` (same shape, both contiguous `f32`) and the per-feature parameter
/// `param` (contiguous `f32` of the row width): what every fused row-wise backward needs.
fn rows_and_param<'a>(
    x: &'a FlexTensor,
    grad: &'a FlexTensor,
    param: &'a FlexTensor,
) -> Option<(&'a [f32], &'a [f32], &'a [f32])> {
    let shape = x.shape();
    let width = shape[shape.num_dims() - 1];
    if width == 0 || grad.shape() != shape {
        return None;
    }
    let p = f32s(param).filter(|p| p.len() == width)?;
    Some((f32s(x)?, f32s(grad)?, p))
}

fn flex_tensor(values: Vec<f32>, shape: Shape) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, shape))
}

fn gelu_derivative(z: f32) -> f32 {
    let cdf = 0.5 * (1.0 + super::flex::gelu_erf(z * std::f32::consts::FRAC_1_SQRT_2));
    let pdf = (-0.5 * z * z).exp() * 0.398_942_3; // 1 / sqrt(2 pi)
    cdf + z * pdf
}

impl BackwardKernels for Flex {
    fn bias_gelu_backward(
        x: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        wanted: [bool; 2],
    ) -> [Option<FloatTensor<Self>>; 2] {
        let grad = dense(grad);
        let Some((xs, gs, b)) = rows_and_param(&x, &grad, &bias) else {
            return generic::bias_gelu_backward::<Self>(x, bias, grad, wanted);
        };
        let width = b.len();
        let mut dx = Vec::with_capacity(xs.len());
        let mut db = vec![0.0_f32; width];
        for (row, grow) in xs.chunks_exact(width).zip(gs.chunks_exact(width)) {
            for (j, ((x, g), b)) in row.iter().zip(grow).zip(b).enumerate() {
                let d = g * gelu_derivative(x + b);
                dx.push(d);
                db[j] += d;
            }
        }
        let [_, want_bias] = wanted;
        [
            Some(flex_tensor(dx, x.shape())),
            want_bias.then(|| flex_tensor(db, Shape::new([width]))),
        ]
    }

    fn swiglu_backward(
        gate: FloatTensor<Self>,
        up: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        wanted: [bool; 2],
    ) -> [Option<FloatTensor<Self>>; 2] {
        let grad = dense(grad);
        let shape = gate.shape();
        let (Some(g), Some(u), Some(d)) = (f32s(&gate), f32s(&up), f32s(&grad)) else {
            return generic::swiglu_backward::<Self>(gate, up, grad, wanted);
        };
        if up.shape() != shape || grad.shape() != shape {
            return generic::swiglu_backward::<Self>(gate, up, grad, wanted);
        }
        let [want_gate, want_up] = wanted;
        let mut d_gate = Vec::with_capacity(if want_gate { g.len() } else { 0 });
        let mut d_up = Vec::with_capacity(if want_up { g.len() } else { 0 });
        for ((g, u), d) in g.iter().zip(u).zip(d) {
            let s = 1.0 / (1.0 + (-g).exp());
            let silu = g * s;
            if want_up {
                d_up.push(d * silu);
            }
            if want_gate {
                d_gate.push(d * u * (s + silu * (1.0 - s)));
            }
        }
        [
            want_gate.then(|| flex_tensor(d_gate, shape.clone())),
            want_up.then(|| flex_tensor(d_up, shape)),
        ]
    }

    fn rms_norm_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        eps: f32,
        grad: FloatTensor<Self>,
        wanted: [bool; 2],
    ) -> [Option<FloatTensor<Self>>; 2] {
        let grad = dense(grad);
        let Some((xs, gs, w)) = rows_and_param(&x, &grad, &weight) else {
            return generic::rms_norm_backward::<Self>(x, weight, eps, grad, wanted);
        };
        let width = w.len();
        let n = width as f32;
        let mut dx = Vec::with_capacity(xs.len());
        let mut dw = vec![0.0_f32; width];
        for (row, grow) in xs.chunks_exact(width).zip(gs.chunks_exact(width)) {
            let inverse = 1.0 / (row.iter().map(|v| v * v).sum::<f32>() / n + eps).sqrt();
            // mean(g x^) with g = grad * weight and x^ = x r.
            let projection = row
                .iter()
                .zip(grow)
                .zip(w)
                .map(|((x, d), w)| d * w * x * inverse)
                .sum::<f32>()
                / n;
            for (j, (x, d)) in row.iter().zip(grow).enumerate() {
                let normalized = x * inverse;
                dw[j] += d * normalized;
                dx.push(inverse * (d * w[j] - normalized * projection));
            }
        }
        let [_, want_weight] = wanted;
        [
            Some(flex_tensor(dx, x.shape())),
            want_weight.then(|| flex_tensor(dw, Shape::new([width]))),
        ]
    }

    fn layer_norm_backward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        eps: f32,
        grad: FloatTensor<Self>,
        wanted: [bool; 3],
    ) -> [Option<FloatTensor<Self>>; 3] {
        let grad = dense(grad);
        let Some((xs, gs, gm)) = rows_and_param(&x, &grad, &gamma) else {
            return generic::layer_norm_backward::<Self>(x, gamma, eps, grad, wanted);
        };
        let width = gm.len();
        let n = width as f32;
        let mut dx = Vec::with_capacity(xs.len());
        let mut d_gamma = vec![0.0_f32; width];
        let mut d_beta = vec![0.0_f32; width];
        let mut normalized = vec![0.0_f32; width];
        for (row, grow) in xs.chunks_exact(width).zip(gs.chunks_exact(width)) {
            let mean = row.iter().sum::<f32>() / n;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
            let inverse = 1.0 / (var + eps).sqrt();
            let (mut mean_g, mut projection) = (0.0_f32, 0.0_f32);
            for (j, (x, d)) in row.iter().zip(grow).enumerate() {
                normalized[j] = (x - mean) * inverse;
                let g = d * gm[j];
                mean_g += g;
                projection += g * normalized[j];
                d_gamma[j] += d * normalized[j];
                d_beta[j] += d;
            }
            mean_g /= n;
            projection /= n;
            for (j, d) in grow.iter().enumerate() {
                dx.push(inverse * (d * gm[j] - mean_g - normalized[j] * projection));
            }
        }
        let [_, want_gamma, want_beta] = wanted;
        [
            Some(flex_tensor(dx, x.shape())),
            want_gamma.then(|| flex_tensor(d_gamma, Shape::new([width]))),
            want_beta.then(|| flex_tensor(d_beta, Shape::new([width]))),
        ]
    }

    fn softmax_last_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        let grad = dense(grad);
        let shape = y.shape();
        let width = shape[shape.num_dims() - 1];
        let (Some(ys), Some(gs)) = (f32s(&y), f32s(&grad)) else {
            return generic::softmax_last_backward::<Self>(y, grad);
        };
        if width == 0 || grad.shape() != shape {
            return generic::softmax_last_backward::<Self>(y, grad);
        }
        let mut dx = Vec::with_capacity(ys.len());
        for (row, grow) in ys.chunks_exact(width).zip(gs.chunks_exact(width)) {
            let dot: f32 = row.iter().zip(grow).map(|(y, g)| y * g).sum();
            dx.extend(row.iter().zip(grow).map(|(y, g)| y * (g - dot)));
        }
        flex_tensor(dx, shape)
    }

    fn cross_entropy_backward(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let grad = dense(grad);
        let shape = logits.shape();
        let (batch, classes) = (shape[0], shape[1]);
        let scale = f32s(&grad).and_then(|g| g.first().copied());
        let (Some(xs), Some(scale)) = (f32s(&logits), scale) else {
            return generic::cross_entropy_backward::<Self>(logits, targets, grad);
        };
        if classes == 0 {
            return generic::cross_entropy_backward::<Self>(logits, targets, grad);
        }
        // The forward pass checked the targets; this reads the already-validated classes.
        let class_of_row = super::composed::target_classes::<Self>(&targets, batch, classes);
        let per_row = scale / batch as f32;
        let mut dx = Vec::with_capacity(xs.len());
        for (row, class) in xs.chunks_exact(classes).zip(class_of_row) {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            // One `exp` per element: the row's exponentials go into `dx`, then get scaled.
            let start = dx.len();
            dx.extend(row.iter().map(|v| (v - max).exp()));
            let out = &mut dx[start..];
            let scale = per_row / out.iter().sum::<f32>();
            out.iter_mut().for_each(|e| *e *= scale);
            out[class] -= per_row;
        }
        flex_tensor(dx, shape)
    }
}

/// The composed gradients, generic over the backend (each documented on its `BackwardKernels`
/// method): the trait's default bodies, and what Flex
/// falls back to.
mod generic {
    use super::*;

    pub(crate) fn bias_gelu_backward<B: Backend>(
        x: FloatTensor<B>,
        bias: FloatTensor<B>,
        grad: FloatTensor<B>,
        [_, want_bias]: [bool; 2],
    ) -> [Option<FloatTensor<B>>; 2] {
        let rank = x.shape().num_dims();
        let z = B::float_add(x, broadcast_row::<B>(bias, rank));
        let dz = B::gelu_backward(z, grad);
        let d_bias = want_bias.then(|| sum_to_row::<B>(dz.clone()));
        [Some(dz), d_bias]
    }

    pub(crate) fn swiglu_backward<B: Backend>(
        gate: FloatTensor<B>,
        up: FloatTensor<B>,
        grad: FloatTensor<B>,
        [want_gate, want_up]: [bool; 2],
    ) -> [Option<FloatTensor<B>>; 2] {
        let s = B::sigmoid(gate.clone());
        let silu = B::float_mul(gate, s.clone());
        let d_up = want_up.then(|| B::float_mul(grad.clone(), silu.clone()));
        let d_gate = want_gate.then(|| {
            let one_minus_s = B::float_add_scalar(B::float_neg(s.clone()), Scalar::from(1.0));
            let d_silu = B::float_add(s, B::float_mul(silu, one_minus_s));
            B::float_mul(B::float_mul(grad, up), d_silu)
        });
        [d_gate, d_up]
    }

    pub(crate) fn rms_norm_backward<B: Backend>(
        x: FloatTensor<B>,
        weight: FloatTensor<B>,
        eps: f32,
        grad: FloatTensor<B>,
        [want_x, want_weight]: [bool; 2],
    ) -> [Option<FloatTensor<B>>; 2] {
        let rank = x.shape().num_dims();
        let inverse = rms_inverse::<B>(x.clone(), eps);
        let normalized = B::float_mul(x, inverse.clone());
        let d_weight =
            want_weight.then(|| sum_to_row::<B>(B::float_mul(grad.clone(), normalized.clone())));
        let d_x = want_x.then(|| {
            let g = B::float_mul(grad, broadcast_row::<B>(weight, rank));
            let projection = mean_last::<B>(B::float_mul(g.clone(), normalized.clone()));
            B::float_mul(
                inverse,
                B::float_sub(g, B::float_mul(normalized, projection)),
            )
        });
        [d_x, d_weight]
    }

    pub(crate) fn layer_norm_backward<B: Backend>(
        x: FloatTensor<B>,
        gamma: FloatTensor<B>,
        eps: f32,
        grad: FloatTensor<B>,
        [want_x, want_gamma, want_beta]: [bool; 3],
    ) -> [Option<FloatTensor<B>>; 3] {
        let rank = x.shape().num_dims();
        let (normalized, inverse) = standardize::<B>(x, eps);
        let d_beta = want_beta.then(|| sum_to_row::<B>(grad.clone()));
        let d_gamma =
            want_gamma.then(|| sum_to_row::<B>(B::float_mul(grad.clone(), normalized.clone())));
        let d_x = want_x.then(|| {
            let g = B::float_mul(grad, broadcast_row::<B>(gamma, rank));
            let mean_g = mean_last::<B>(g.clone());
            let projection = mean_last::<B>(B::float_mul(g.clone(), normalized.clone()));
            let centered = B::float_sub(
                B::float_sub(g, mean_g),
                B::float_mul(normalized, projection),
            );
            B::float_mul(inverse, centered)
        });
        [d_x, d_gamma, d_beta]
    }

    pub(crate) fn softmax_last_backward<B: Backend>(
        y: FloatTensor<B>,
        grad: FloatTensor<B>,
    ) -> FloatTensor<B> {
        let last = y.shape().num_dims() - 1;
        let dot = B::float_sum_dim(B::float_mul(grad.clone(), y.clone()), last);
        B::float_mul(y, B::float_sub(grad, dot))
    }

    pub(crate) fn cross_entropy_backward<B: Backend>(
        logits: FloatTensor<B>,
        targets: IntTensor<B>,
        grad: FloatTensor<B>,
    ) -> FloatTensor<B> {
        let shape = logits.shape();
        let (batch, classes) = (shape[0], shape[1]);
        let hot = one_hot::<B>(targets, classes, &logits);
        let diff = B::float_sub(B::softmax(logits, 1), hot);
        let per_row = B::float_div_scalar(
            B::float_reshape(grad, Shape::new([1, 1])),
            Scalar::from(batch as f32),
        );
        B::float_mul(diff, per_row)
    }
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
impl BackwardKernels for burn_dispatch::backends::Cube {}
#[cfg(feature = "remote")]
impl BackwardKernels for burn_dispatch::backends::Remote {}

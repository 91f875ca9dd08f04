//! The gradient computations of the fused layers, called by their `Autodiff<B, C>` backward
//! passes on the inner backend `B`.
//!
//! Each default body composes backend primitives, so every backend has them (`Cube`, `Remote`).
//! `Flex` overrides them with one pass over contiguous `f32` rows, as its forward kernels do
//! (`f16` and `bf16` inputs widened to `f32` first, the gradients rounded back once), and
//! uses the defaults for other layouts and dtypes. Each takes the parents' wanted flags and
//! returns a gradient only for the tracked ones.

use burn_backend::tensor::{FloatTensor, IntTensor};
use burn_backend::{Backend, DType, Scalar, Shape, TensorMetadata};
use burn_dispatch::backends::Flex;
use burn_dispatch::backends::flex::FlexTensor;

use super::composed::{broadcast_row, one_hot, rms_inverse, standardize, sum_to_row};
use super::fused_linear::{self, Chunks};
use super::fused_mlp;
use super::half::{grads_in_f32, in_f32};
use crate::flex::math::sigmoid;
use crate::flex::{
    Rows, Work, is_writable, keep_if, max_of, simd_fn, sum_by, sum_by2, sum_by3, tensor,
    update_many, update_rows, update_rows_with,
};

/// The mean over the last dimension, kept with size 1.
fn mean_last<B: Backend>(t: FloatTensor<B>) -> FloatTensor<B> {
    let last = t.shape().num_dims() - 1;
    B::float_mean_dim(t, last)
}

/// Gradients of the fused layers (see the module docs).
pub trait BackwardKernels: Backend + crate::ops::RoutedOps {
    /// How many rows of its input a fused projection's weight gradient takes at a time
    /// (`rms_norm_linear` and the like): all of them by default, one matmul as Burn's `linear`
    /// backward; `Flex` takes small chunks, so that neither the recomputed input nor the matmul's
    /// packed copy of it exists whole.
    const PROJECTION_CHUNKS: Chunks = Chunks::Whole;

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

    /// `[dx, dnorm_weight, dweight, dbias]` of `rms_norm(x, norm_weight, eps) @ weight + bias`:
    /// the normalised tensor is recomputed with `Self`'s `rms_norm` for the weight gradient and
    /// dropped, then `rms_norm_backward` takes the projection's input gradient (Flex recomputes
    /// it a chunk of rows at a time).
    fn rms_norm_linear_backward(
        x: FloatTensor<Self>,
        norm_weight: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        _bias: Option<FloatTensor<Self>>,
        eps: f32,
        grad: FloatTensor<Self>,
        wanted: [bool; 4],
    ) -> [Option<FloatTensor<Self>>; 4] {
        fused_linear::rms_norm_linear_backward::<Self>(
            x,
            norm_weight,
            weight,
            eps,
            grad,
            wanted,
            Self::PROJECTION_CHUNKS,
            Self::rms_norm_backward,
        )
    }

    /// `[dx, dgamma, dbeta, dweight, dbias]` of `layer_norm(x, gamma, beta, eps) @ weight + bias`,
    /// as `rms_norm_linear_backward`.
    // The generated calling convention: the op's five tensor inputs, `eps`, the gradient and the
    // wanted flags.
    #[allow(clippy::too_many_arguments)]
    fn layer_norm_linear_backward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        _bias: Option<FloatTensor<Self>>,
        eps: f32,
        grad: FloatTensor<Self>,
        wanted: [bool; 5],
    ) -> [Option<FloatTensor<Self>>; 5] {
        fused_linear::layer_norm_linear_backward::<Self>(
            x,
            gamma,
            beta,
            weight,
            eps,
            grad,
            wanted,
            Self::PROJECTION_CHUNKS,
            Self::layer_norm_backward,
        )
    }

    /// `[dgate, dup, dweight, dbias]` of `swiglu(gate, up) @ weight + bias`: the product is
    /// recomputed with `Self`'s `swiglu` for the weight gradient and dropped, then
    /// `swiglu_backward` takes the projection's input gradient.
    fn swiglu_linear_backward(
        gate: FloatTensor<Self>,
        up: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        _bias: Option<FloatTensor<Self>>,
        grad: FloatTensor<Self>,
        wanted: [bool; 4],
    ) -> [Option<FloatTensor<Self>>; 4] {
        fused_linear::swiglu_linear_backward::<Self>(
            gate,
            up,
            weight,
            grad,
            wanted,
            Self::PROJECTION_CHUNKS,
            Self::swiglu_backward,
        )
    }

    /// `[dx, dnorm_weight, dgate_weight, dup_weight, ddown_weight]` of
    /// `rms_norm_swiglu_mlp`: the norm, both projections and their product are rebuilt from `x`
    /// a chunk of rows at a time (`PROJECTION_CHUNKS`), each chunk's gradients formed with
    /// `rms_norm_backward` and `swiglu_backward`.
    // The generated calling convention: the op's five tensor inputs, `eps`, the gradient and the
    // wanted flags.
    #[allow(clippy::too_many_arguments)]
    fn rms_norm_swiglu_mlp_backward(
        x: FloatTensor<Self>,
        norm_weight: FloatTensor<Self>,
        gate_weight: FloatTensor<Self>,
        up_weight: FloatTensor<Self>,
        down_weight: FloatTensor<Self>,
        eps: f32,
        grad: FloatTensor<Self>,
        wanted: [bool; 5],
    ) -> [Option<FloatTensor<Self>>; 5] {
        fused_mlp::rms_norm_swiglu_mlp_backward::<Self, _, _>(
            x,
            norm_weight,
            [gate_weight, up_weight, down_weight],
            eps,
            grad,
            wanted,
            Self::PROJECTION_CHUNKS,
            fused_mlp::Kernels {
                norm: Self::rms_norm_backward,
                gate: Self::swiglu_backward,
            },
        )
    }

    /// `dx` of the last-dimension softmax with output `y`: `y (grad - sum(grad y))`.
    fn softmax_last_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        generic::softmax_last_backward::<Self>(y, grad)
    }

    /// The incoming gradient where `relu(lhs + rhs)` (its `output`) is positive, zero elsewhere:
    /// the gradient of both inputs (each is summed back to its shape by the caller).
    fn add_relu_backward(
        output: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        tracked: [bool; 2],
    ) -> [Option<FloatTensor<Self>>; 2] {
        shared::<Self>(Self::relu_backward(output, grad), tracked)
    }

    /// The incoming gradient through dropout's keep mask, times `1 / (1 - p)`: dropout of the
    /// gradient itself with the same `p` and `seed`, which draw the same mask (it depends on
    /// the seed and each element's index only), so the forward pass keeps no mask for it. Each
    /// backend's own `dropout` kernel runs (its mask is freed when it returns).
    fn dropout_backward(p: f32, seed: u64, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        <Self as crate::ops::RoutedOps>::dropout(grad, p, seed).0
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

/// One gradient for each tracked input of a two-input op (a copy of the handle for the first
/// when both are tracked).
fn shared<B: Backend>(
    grad: FloatTensor<B>,
    [first, second]: [bool; 2],
) -> [Option<FloatTensor<B>>; 2] {
    match (first, second) {
        (true, true) => [Some(grad.clone()), Some(grad)],
        (true, false) => [Some(grad), None],
        (false, true) => [None, Some(grad)],
        (false, false) => [None, None],
    }
}

/// `t` readable row by row. The incoming gradient is often a broadcast view (the gradient of a
/// `sum` is a scalar expanded to the output's shape, whose last dimension has stride 0); one
/// copy lets the fused loop take it instead of falling back to the composed pass.
fn readable(t: FlexTensor) -> FlexTensor {
    if Rows::of(&t).is_some() {
        t
    } else if let Some(value) = broadcast_scalar(&t) {
        // One fill, not an element-by-element strided copy.
        let shape = t.shape();
        tensor(vec![value; shape.num_elements()], shape)
    } else {
        t.to_contiguous()
    }
}

/// The value of `t` when it is one `f32` element broadcast to its whole shape (every stride 0):
/// the gradient of a `sum`, expanded.
fn broadcast_scalar(t: &FlexTensor) -> Option<f32> {
    let layout = t.layout();
    (t.dtype() == DType::F32 && layout.strides().iter().all(|s| *s == 0))
        .then(|| t.storage::<f32>()[layout.start_offset()])
}

/// Adds the per-piece partial sums of a per-feature gradient, in row order (the same sums in
/// the same order with or without threads).
fn total(partials: Vec<Vec<f32>>, width: usize) -> FlexTensor {
    let mut sum = vec![0.0_f32; width];
    for partial in partials {
        sum.iter_mut().zip(partial).for_each(|(s, p)| *s += p);
    }
    tensor(sum, Shape::new([width]))
}

/// The rows of `x` and of the incoming gradient (same shape) and the per-feature parameter
/// `param` (one row of `x`'s width): what every fused row-wise backward reads.
fn row_inputs<'a>(
    x: &'a FlexTensor,
    grad: &FlexTensor,
    param: &'a FlexTensor,
) -> Option<(Rows<'a>, &'a [f32])> {
    let rows = Rows::of(x)?;
    let p = Rows::of(param)?;
    (grad.shape() == x.shape()
        && Rows::of(grad).is_some()
        && p.count() == 1
        && p.width() == rows.width())
    .then(|| (rows, p.row(0)))
}

#[inline(always)]
fn gelu_derivative(z: f32) -> f32 {
    let cdf = 0.5 * (1.0 + crate::flex::math::erf(z * std::f32::consts::FRAC_1_SQRT_2));
    let pdf = crate::flex::math::exp(-0.5 * z * z) * 0.398_942_3; // 1 / sqrt(2 pi)
    cdf + z * pdf
}

impl BackwardKernels for Flex {
    const PROJECTION_CHUNKS: Chunks = Chunks::Small;

    fn swiglu_linear_backward(
        gate: FloatTensor<Self>,
        up: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        _bias: Option<FloatTensor<Self>>,
        grad: FloatTensor<Self>,
        wanted: [bool; 4],
    ) -> [Option<FloatTensor<Self>>; 4] {
        fused_linear::swiglu_linear_backward_on_flex(
            gate,
            up,
            weight,
            grad,
            wanted,
            Self::PROJECTION_CHUNKS,
            Self::swiglu_backward,
        )
    }

    fn bias_gelu_backward(
        x: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        wanted: [bool; 2],
    ) -> [Option<FloatTensor<Self>>; 2] {
        let [x, bias, grad] = match grads_in_f32([x, bias, grad], |[x, b, g]| {
            Self::bias_gelu_backward(x, b, g, wanted)
        }) {
            Ok(grads) => return grads,
            Err(inputs) => inputs,
        };
        let grad = readable(grad);
        let Some((xs, b)) = row_inputs(&x, &grad, &bias) else {
            return generic::bias_gelu_backward::<Self>(x, bias, grad, wanted);
        };
        let (w, [_, want_bias]) = (b.len(), wanted);
        // `dx` over the incoming gradient's buffer when it is ours.
        let (dx, partials) = bias_gelu_grads(grad, &xs, b, want_bias);
        [Some(dx), want_bias.then(|| total(partials, w))]
    }

    fn swiglu_backward(
        gate: FloatTensor<Self>,
        up: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        wanted: [bool; 2],
    ) -> [Option<FloatTensor<Self>>; 2] {
        let [gate, up, grad] = match grads_in_f32([gate, up, grad], |[g, u, d]| {
            Self::swiglu_backward(g, u, d, wanted)
        }) {
            Ok(grads) => return grads,
            Err(inputs) => inputs,
        };
        let grad = readable(grad);
        let shape = gate.shape();
        if up.shape() != shape || grad.shape() != shape {
            return generic::swiglu_backward::<Self>(gate, up, grad, wanted);
        }
        let (Some(_), Some(up_rows)) = (Rows::of(&gate), Rows::of(&up)) else {
            return generic::swiglu_backward::<Self>(gate, up, grad, wanted);
        };
        match wanted {
            // Both in one pass: `dgate` over the gradient's buffer and `dup` over `gate`'s,
            // each when it is ours.
            [true, true] => {
                let [d_gate, d_up] = swiglu_grads(grad, gate, &up_rows);
                [Some(d_gate), Some(d_up)]
            }
            [want_gate, _] => {
                let gate_rows = Rows::of(&gate).expect("checked above");
                let d = swiglu_grad(grad, &gate_rows, &up_rows, want_gate);
                if want_gate {
                    [Some(d), None]
                } else {
                    [None, Some(d)]
                }
            }
        }
    }

    fn rms_norm_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        eps: f32,
        grad: FloatTensor<Self>,
        wanted: [bool; 2],
    ) -> [Option<FloatTensor<Self>>; 2] {
        let [x, weight, grad] = match grads_in_f32([x, weight, grad], |[x, w, g]| {
            Self::rms_norm_backward(x, w, eps, g, wanted)
        }) {
            Ok(grads) => return grads,
            Err(inputs) => inputs,
        };
        let grad = readable(grad);
        let Some((xs, wt)) = row_inputs(&x, &grad, &weight) else {
            return generic::rms_norm_backward::<Self>(x, weight, eps, grad, wanted);
        };
        let (width, [_, want_weight]) = (wt.len(), wanted);
        let n = width as f32;
        let (dx, partials) = update_rows_with(
            grad,
            Work::Moderate,
            || vec![0.0_f32; if want_weight { width } else { 0 }],
            |dw, first, rows| {
                xs.zip(first, rows, |d, xs| {
                    for (d, x) in d.chunks_exact_mut(width).zip(xs.chunks_exact(width)) {
                        let inverse = 1.0 / (sum_by(x, |v| v * v) / n + eps).sqrt();
                        // mean(g x^) with g = grad * weight and x^ = x r.
                        let projection = inverse * sum_by3(d, x, wt, |d, x, w| d * w * x) / n;
                        if want_weight {
                            dw.iter_mut()
                                .zip(d.iter())
                                .zip(x)
                                .for_each(|((s, d), x)| *s += d * x * inverse);
                        }
                        for ((d, x), w) in d.iter_mut().zip(x).zip(wt) {
                            *d = inverse * (*d * w - x * inverse * projection);
                        }
                    }
                });
            },
        )
        .unwrap_or_else(|_| unreachable!("the gradient has rows"));
        [Some(dx), want_weight.then(|| total(partials, width))]
    }

    fn layer_norm_backward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        eps: f32,
        grad: FloatTensor<Self>,
        wanted: [bool; 3],
    ) -> [Option<FloatTensor<Self>>; 3] {
        let [x, gamma, grad] = match grads_in_f32([x, gamma, grad], |[x, g, d]| {
            Self::layer_norm_backward(x, g, eps, d, wanted)
        }) {
            Ok(grads) => return grads,
            Err(inputs) => inputs,
        };
        let grad = readable(grad);
        let Some((xs, gm)) = row_inputs(&x, &grad, &gamma) else {
            return generic::layer_norm_backward::<Self>(x, gamma, eps, grad, wanted);
        };
        let (width, [_, want_gamma, want_beta]) = (gm.len(), wanted);
        let n = width as f32;
        // Per piece: the partial `dgamma` and `dbeta`, and a row of `x^`.
        let (dx, partials) = update_rows_with(
            grad,
            Work::Moderate,
            || {
                (
                    vec![0.0_f32; width],
                    vec![0.0_f32; width],
                    vec![0.0_f32; width],
                )
            },
            |(d_gamma, d_beta, normalized), first, rows| {
                xs.zip(first, rows, |d, xs| {
                    for (d, x) in d.chunks_exact_mut(width).zip(xs.chunks_exact(width)) {
                        let mean = sum_by(x, |v| v) / n;
                        let var = sum_by(x, |v| (v - mean) * (v - mean)) / n;
                        let inverse = 1.0 / (var + eps).sqrt();
                        normalized
                            .iter_mut()
                            .zip(x)
                            .for_each(|(h, x)| *h = (x - mean) * inverse);
                        let mean_g = sum_by2(d, gm, |d, g| d * g) / n;
                        let projection = sum_by3(d, gm, normalized, |d, g, h| d * g * h) / n;
                        if want_gamma {
                            d_gamma
                                .iter_mut()
                                .zip(d.iter())
                                .zip(normalized.iter())
                                .for_each(|((s, d), h)| *s += d * h);
                        }
                        if want_beta {
                            d_beta.iter_mut().zip(d.iter()).for_each(|(s, d)| *s += d);
                        }
                        for ((d, g), x) in d.iter_mut().zip(gm).zip(normalized.iter()) {
                            *d = inverse * (*d * g - mean_g - x * projection);
                        }
                    }
                });
            },
        )
        .unwrap_or_else(|_| unreachable!("the gradient has rows"));
        let (gammas, betas): (Vec<_>, Vec<_>) =
            partials.into_iter().map(|(g, b, _)| (g, b)).unzip();
        [
            Some(dx),
            want_gamma.then(|| total(gammas, width)),
            want_beta.then(|| total(betas, width)),
        ]
    }

    fn softmax_last_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        let [y, grad] = match in_f32([y, grad], |[y, g]| Self::softmax_last_backward(y, g)) {
            Ok(dx) => return dx,
            Err(inputs) => inputs,
        };
        let grad = readable(grad);
        let (Some(ys), true) = (Rows::of(&y), grad.shape() == y.shape()) else {
            return generic::softmax_last_backward::<Self>(y, grad);
        };
        softmax_grad(grad, &ys)
    }

    fn add_relu_backward(
        output: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        tracked: [bool; 2],
    ) -> [Option<FloatTensor<Self>>; 2] {
        let grad = readable(grad);
        // Over the saved output when nothing else holds it, as Burn's `relu_backward` does:
        // every element is stored. Updated in place, the gradient would keep its value where the
        // output is positive, and the compiler makes that a masked store of the zeros, which
        // runs at half the speed of a plain store on AMD's Zen with AVX2.
        if is_writable(&output)
            && grad.shape() == output.shape()
            && let Some(g) = Rows::of(&grad)
        {
            let dx = update_rows(output, Work::Light, |first, rows| {
                g.zip(first, rows, |o, g| {
                    o.iter_mut()
                        .zip(g)
                        .for_each(|(o, g)| *o = keep_if(*g, *o > 0.0));
                });
            })
            .unwrap_or_else(|_| unreachable!("a writable tensor has rows"));
            return shared::<Self>(dx, tracked);
        }
        let grad = match Rows::of(&output) {
            Some(out) if grad.shape() == output.shape() => {
                update_rows(grad, Work::Light, |first, rows| {
                    out.zip(first, rows, |d, o| {
                        d.iter_mut()
                            .zip(o)
                            .for_each(|(d, o)| *d = keep_if(*d, *o > 0.0));
                    });
                })
                .unwrap_or_else(|_| unreachable!("the gradient has rows"))
            }
            _ => <Self as burn_backend::ops::ActivationOps<Self>>::relu_backward(output, grad),
        };
        shared::<Self>(grad, tracked)
    }

    fn cross_entropy_backward(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let [logits, grad] = match in_f32([logits, grad], |[l, g]| {
            Self::cross_entropy_backward(l, targets.clone(), g)
        }) {
            Ok(dx) => return dx,
            Err(inputs) => inputs,
        };
        let grad = readable(grad);
        let shape = logits.shape();
        let (batch, classes) = (shape[0], shape[1]);
        let scale = Rows::of(&grad).map(|g| g.row(0)[0]);
        let (Some(scale), Some(_)) = (scale, Rows::of(&logits)) else {
            return generic::cross_entropy_backward::<Self>(logits, targets, grad);
        };
        // The forward pass checked the targets; this reads the already-validated classes.
        let class_of_row = super::composed::target_classes::<Self>(&targets, batch, classes);
        let per_row = scale / batch as f32;
        // Over the logits' own buffer when it is ours (the saved logits are not needed after).
        cross_entropy_grad(logits, &class_of_row, per_row)
            .unwrap_or_else(|logits| generic::cross_entropy_backward::<Self>(logits, targets, grad))
    }
}

// The loops of the transcendental kernels above, each compiled per instruction set (see
// `simd_fn!`).

simd_fn! {
    /// `grad * gelu'(x + b)` over the gradient's buffer when it is ours, and per piece of rows
    /// the partial sums of that product over the rows (the bias gradient) when `want_bias`.
    fn bias_gelu_grads(
        grad: FlexTensor,
        xs: &Rows<'_>,
        b: &[f32],
        want_bias: bool,
    ) -> (FlexTensor, Vec<Vec<f32>>) {
        let w = b.len();
        update_rows_with(
            grad,
            Work::Heavy,
            || vec![0.0_f32; if want_bias { w } else { 0 }],
            |db, first, rows| {
                xs.zip(first, rows, |d, xs| {
                    for (d, x) in d.chunks_exact_mut(w).zip(xs.chunks_exact(w)) {
                        d.iter_mut()
                            .zip(x)
                            .zip(b)
                            .for_each(|((d, x), b)| *d *= gelu_derivative(x + b));
                        if want_bias {
                            db.iter_mut().zip(d.iter()).for_each(|(s, d)| *s += d);
                        }
                    }
                });
            },
        )
        .unwrap_or_else(|_| unreachable!("the gradient has rows"))
    }
}

simd_fn! {
    /// Both gradients of `swiglu` in one pass: `dgate` over the gradient's buffer and `dup` over
    /// `gate`'s, each when it is ours.
    fn swiglu_grads(grad: FlexTensor, gate: FlexTensor, up_rows: &Rows<'_>) -> [FlexTensor; 2] {
        let ([d_gate, d_up], _) = update_many(
            [grad, gate],
            Work::Heavy,
            || (),
            |(), first, [d, g]| {
                up_rows.stretches(first, d.len(), |offset, u| {
                    let (d, g) = (
                        &mut d[offset..offset + u.len()],
                        &mut g[offset..offset + u.len()],
                    );
                    for ((d, g), u) in d.iter_mut().zip(g.iter_mut()).zip(u) {
                        let s = sigmoid(*g);
                        let silu = *g * s;
                        *g = *d * silu;
                        *d *= u * (s + silu * (1.0 - s));
                    }
                });
            },
        )
        .unwrap_or_else(|_| unreachable!("the caller checked the shapes and rows"));
        [d_gate, d_up]
    }
}

simd_fn! {
    /// One gradient of `swiglu`: `dgate` when `want_gate`, else `dup`.
    fn swiglu_grad(
        grad: FlexTensor,
        gate_rows: &Rows<'_>,
        up_rows: &Rows<'_>,
        want_gate: bool,
    ) -> FlexTensor {
        update_rows(grad, Work::Heavy, |first, d| {
            gate_rows.stretches2(up_rows, first, d.len(), |offset, g, u| {
                let d = &mut d[offset..offset + g.len()];
                for ((d, g), u) in d.iter_mut().zip(g).zip(u) {
                    let s = sigmoid(*g);
                    let silu = g * s;
                    *d *= if want_gate {
                        u * (s + silu * (1.0 - s))
                    } else {
                        silu
                    };
                }
            });
        })
        .unwrap_or_else(|_| unreachable!("the gradient has rows"))
    }
}

simd_fn! {
    /// `y * (grad - sum(y * grad))` per row, over the gradient's buffer when it is ours.
    fn softmax_grad(grad: FlexTensor, ys: &Rows<'_>) -> FlexTensor {
        let width = ys.width();
        update_rows(grad, Work::Moderate, |first, rows| {
            ys.zip(first, rows, |d, ys| {
                for (d, y) in d.chunks_exact_mut(width).zip(ys.chunks_exact(width)) {
                    let dot = sum_by2(y, d, |y, g| y * g);
                    d.iter_mut().zip(y).for_each(|(d, y)| *d = y * (*d - dot));
                }
            });
        })
        .unwrap_or_else(|_| unreachable!("the gradient has rows"))
    }
}

simd_fn! {
    /// `(softmax(row) - one_hot(class)) * per_row` for each row of `logits`, over its buffer
    /// when it is ours.
    fn cross_entropy_grad(
        logits: FlexTensor,
        class_of_row: &[usize],
        per_row: f32,
    ) -> Result<FlexTensor, FlexTensor> {
        let classes = logits.shape()[1];
        update_rows(logits, Work::Heavy, |first, rows| {
            for (k, row) in rows.chunks_exact_mut(classes).enumerate() {
                let max = max_of(row);
                // One `exp` per element, then the row's scale (two loops: each vectorises).
                row.iter_mut()
                    .for_each(|v| *v = crate::flex::math::exp(*v - max));
                let scale = per_row / sum_by(row, |e| e);
                row.iter_mut().for_each(|e| *e *= scale);
                row[class_of_row[first + k]] -= per_row;
            }
        })
    }
}

/// The composed gradients, generic over the backend (each documented on its `BackwardKernels`
/// method): the trait's default bodies, and what Flex
/// falls back to.
pub(crate) mod generic {
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

// `Fusion<B>`'s and `Remote`'s implementations are generated (the ops and dispatch modules):
// the backward kernel of an op that runs there as one operation is one operation too, running
// the inner backend's (or the server's) kernel; the others keep these default bodies.

//! `BackwardKernels` on Flex: one pass over contiguous `f32` rows for each fused layer's
//! gradients (`f16` and `bf16` widened to `f32` first, the gradients rounded back once), over
//! the incoming gradient's or a saved input's own buffer when nothing else holds it; the
//! generic bodies for other layouts and dtypes.

use burn_backend::tensor::{FloatTensor, IntTensor};
use burn_backend::{DType, Shape, TensorMetadata};
use burn_dispatch::backends::Flex;
use burn_dispatch::backends::flex::FlexTensor;

use super::{BackwardKernels, generic, shared};
use crate::flex::{
    Rows, Work, is_writable, keep_if, max_of, simd_fn, sum_by, sum_by2, sum_by3, tensor,
    update_many, update_rows, update_rows_with, writable,
};
use crate::kernels::arith::{self, rms_norm_grad_row};
use crate::kernels::fused_linear::{self, Chunks};
use crate::kernels::half::{grads_in_f32, half_dtype, in_f32, narrow, widen};
use crate::kernels::{fused_mlp, gemm};

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

    fn matmul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        match gemm::batched(&lhs, &rhs) {
            Some(product) => product,
            None => {
                <Self as burn_backend::backend::ops::FloatTensorOps<Self>>::float_matmul(lhs, rhs)
            }
        }
    }

    fn rms_norm_swiglu_mlp_keeping(
        x: FloatTensor<Self>,
        norm_weight: FloatTensor<Self>,
        weights: [FloatTensor<Self>; 3],
        eps: f32,
    ) -> Option<(FloatTensor<Self>, fused_mlp::Projections<Self>)> {
        match fused_mlp::flex::on_flex(x, norm_weight, weights, eps, true) {
            (out, Some(kept)) => Some((out, kept)),
            (_, None) => None,
        }
    }

    fn rms_norm_swiglu_mlp_backward(
        x: FloatTensor<Self>,
        norm_weight: FloatTensor<Self>,
        [gate_weight, up_weight, down_weight]: [FloatTensor<Self>; 3],
        eps: f32,
        grad: FloatTensor<Self>,
        wanted: [bool; 5],
        kept: Option<fused_mlp::Projections<Self>>,
    ) -> [Option<FloatTensor<Self>>; 5] {
        // Half dtypes run the `f32` kernel on widened copies: the weights' gradients are summed
        // over the chunks in `f32`, and rounded once (the kept projections are `f32` already).
        let inputs = [x, norm_weight, gate_weight, up_weight, down_weight, grad];
        if let Some(dtype) = half_dtype(&inputs.each_ref()) {
            let [x, n, g, u, d, dy] = inputs.map(widen);
            let grads = Self::rms_norm_swiglu_mlp_backward(x, n, [g, u, d], eps, dy, wanted, kept);
            return grads.map(|g| g.map(|g| narrow(g, dtype)));
        }
        let [x, norm_weight, gate_weight, up_weight, down_weight, grad] = inputs;
        // Contiguous, so that the kernel below takes every gradient whenever it took the forward
        // pass: with and without checkpointing the same products form the gradients.
        let grad = match gemm::dense(&grad) {
            Some(_) => grad,
            None => readable(grad).to_contiguous(),
        };
        let weights = [&gate_weight, &up_weight, &down_weight];
        let mut kept = kept;
        if let Some(inputs) = fused_mlp::flex::Inputs::of(&x, &norm_weight, weights, eps) {
            // The kept projections are overwritten with their gradients when nothing else
            // holds them (else rebuilt, as under checkpointing).
            let buffers = kept.as_mut().and_then(|k| {
                let [gate, up] = [&mut k.gate, &mut k.up];
                Some([writable(gate)?, writable(up)?])
            });
            if let Some(grads) = inputs.backward(&grad, wanted, buffers) {
                return grads;
            }
        }
        let weights = [gate_weight, up_weight, down_weight];
        super::mlp_by_chunks::<Self>(x, norm_weight, weights, eps, grad, wanted, kept)
    }

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
        let (dx, partials) = update_rows_with(
            grad,
            Work::Moderate,
            || vec![0.0_f32; if want_weight { width } else { 0 }],
            |dw, first, rows| {
                xs.zip(first, rows, |d, xs| {
                    for (d, x) in d.chunks_exact_mut(width).zip(xs.chunks_exact(width)) {
                        let sums = want_weight.then_some(dw.as_mut_slice());
                        rms_norm_grad_row(d, x, wt, eps, sums);
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
        let class_of_row =
            crate::kernels::composed::target_classes::<Self>(&targets, batch, classes);
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
                        [*d, *g] = arith::swiglu_grads(*g, *u, *d);
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
                    let [d_gate, d_up] = arith::swiglu_grads(*g, *u, *d);
                    *d = if want_gate { d_gate } else { d_up };
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

//! A pre-norm SwiGLU MLP as one op (`rms_norm_swiglu_mlp`): `rms_norm`, the gate and up
//! projections, the SwiGLU gate and the down projection, a chunk of rows at a time. On Flex a
//! chunk is about 32 KiB of hidden-width `f32` values (and at least 64 rows)
//! ([`BackwardKernels::PROJECTION_CHUNKS`](super::backward::BackwardKernels::PROJECTION_CHUNKS));
//! a GPU takes every row at once.
//!
//! What the backward pass keeps follows the checkpointing strategy (the `Autodiff<B, C>`
//! kernel, `autodiff`, is hand-written): without gradient checkpointing `x`, the weights and,
//! on Flex and Cube, the gate and up projections ([`Projections`]), the rest rebuilt; under it only
//! the inputs, the normalised tensor, both projections and their product rebuilt from `x` a
//! chunk at a time, each chunk's gradients formed and the chunk dropped before the next, so no
//! `[rows, hidden]` tensor exists in the backward pass. Burn's ops (and the `*_linear` ops of
//! [`fused_linear`](super::fused_linear)) keep or rebuild those tensors whole.
//!
//! The forward function is generic over the ops' trait (each backend's own norm and gate
//! kernels, Burn's `linear` between them); the composition is the same with Burn's primitives.

use std::ops::Range;

use burn_backend::tensor::FloatTensor;
use burn_backend::{Backend, Shape, Slice, TensorMetadata};

#[cfg(feature = "autodiff")]
pub(crate) mod autodiff;
pub(crate) mod flex;

use super::composed;
use super::fused_linear::{Chunks, GateBackward, RmsNormBackward, check_weight, rows_of, zeros};
use crate::ops::RoutedOps;

/// The op's name, in its panics.
const OP: &str = "rms_norm_swiglu_mlp";

/// Panics unless the three weights chain: `gate_weight` `[width, hidden]` for `x`'s width
/// (`up_weight` has its shape: the manifest checks that), and `down_weight` `[hidden, outputs]`.
pub(crate) fn check_weights(
    x: &impl TensorMetadata,
    gate_weight: &impl TensorMetadata,
    down_weight: &impl TensorMetadata,
) {
    check_weight(OP, ["x", "gate_weight"], x, gate_weight);
    let (gate, down) = (gate_weight.shape(), down_weight.shape());
    let hidden = gate.get(1).copied().unwrap_or(0);
    assert!(
        down.first() == Some(&hidden),
        "{OP}: `down_weight` has shape {:?}, but its rows must be the hidden width {hidden} \
         (`gate_weight` has shape {:?}); pass it as `[{hidden}, outputs]`, as Burn's `Linear` \
         keeps it",
        down.as_slice(),
        gate.as_slice(),
    );
}

/// The MLP with `norm` and `gate` as the RMS norm and the SwiGLU gate, Burn's `linear` between,
/// `chunks` rows at a time: with more than one chunk, each chunk's output is written into the
/// rows it came from, so the `[rows, hidden]` tensors between never exist whole. With `keep`, the
/// gate and up projections are returned too, `[rows, hidden]` (each chunk's written into its
/// rows), for a backward pass that reads them instead of rebuilding them.
fn mlp<B: Backend>(
    x: FloatTensor<B>,
    [gate_weight, up_weight, down_weight]: [FloatTensor<B>; 3],
    chunks: Chunks,
    norm: impl Fn(FloatTensor<B>) -> FloatTensor<B>,
    gate: impl Fn(FloatTensor<B>, FloatTensor<B>) -> FloatTensor<B>,
    keep: bool,
) -> (FloatTensor<B>, Option<Projections<B>>) {
    check_weights(&x, &gate_weight, &down_weight);
    let run = |x: FloatTensor<B>| {
        let h = norm(x);
        let up = B::linear(h.clone(), up_weight.clone(), None);
        let projection = B::linear(h, gate_weight.clone(), None);
        let kept = keep.then(|| Projections {
            gate: projection.clone(),
            up: up.clone(),
        });
        let product = gate(projection, up);
        (B::linear(product, down_weight.clone(), None), kept)
    };
    let shape = x.shape();
    let last = shape.num_dims() - 1;
    let (rows, width) = (shape[..last].iter().product::<usize>(), shape[last]);
    let (hidden, outputs) = (gate_weight.shape()[1], down_weight.shape()[1]);
    let step = chunks.rows(rows, hidden.max(width).max(1));
    let mut out_shape = shape;
    out_shape[last] = outputs;
    // Always as `[rows, width]`: the products, and the projections kept, are then those that
    // the backward pass rebuilds from `x`'s rows (a 3-d `x` would take Burn's batched matmul).
    let x = B::float_reshape(x, Shape::new([rows, width]));
    if step >= rows {
        let (out, kept) = run(x);
        return (B::float_reshape(out, out_shape), kept);
    }
    // The output's buffer is made before the first chunk runs (made after it, the forward
    // pass's peak measured 32 KiB higher at 64K values).
    let mut all = rows_buffer::<B>(rows, outputs, &x);
    let mut kept = keep.then(|| Projections {
        gate: rows_buffer::<B>(rows, hidden, &x),
        up: rows_buffer::<B>(rows, hidden, &x),
    });
    for first in (0..rows).step_by(step) {
        let range = first..(first + step).min(rows);
        let (out, chunk) = run(rows_of::<B>(&x, range.clone()));
        all = write_rows::<B>(Some(all), rows, range.clone(), out);
        kept = kept.zip(chunk).map(|(all, chunk)| Projections {
            gate: write_rows::<B>(Some(all.gate), rows, range.clone(), chunk.gate),
            up: write_rows::<B>(Some(all.up), rows, range.clone(), chunk.up),
        });
    }
    (B::float_reshape(all, out_shape), kept)
}

/// The gate and up projections of every row, `[rows, hidden]`, that the forward pass keeps for
/// the backward pass without gradient checkpointing
/// ([`BackwardKernels::rms_norm_swiglu_mlp_keeping`](super::backward::BackwardKernels::rms_norm_swiglu_mlp_keeping)).
#[derive(Clone, Debug)]
pub struct Projections<B: Backend> {
    /// `rms_norm(x) @ gate_weight`.
    pub gate: FloatTensor<B>,
    /// `rms_norm(x) @ up_weight`.
    pub up: FloatTensor<B>,
}

/// `value`, a chunk's `[rows in range, width]` result, written over the rows in `range` of
/// `all`, the `[rows, width]` result being assembled (made, zeroed, at the first chunk); `value`
/// itself when the chunk is every row.
fn write_rows<B: Backend>(
    all: Option<FloatTensor<B>>,
    rows: usize,
    range: Range<usize>,
    value: FloatTensor<B>,
) -> FloatTensor<B> {
    if range.len() == rows {
        return value;
    }
    let all = all.unwrap_or_else(|| rows_buffer::<B>(rows, value.shape()[1], &value));
    B::float_slice_assign(all, &[Slice::from(range)], value)
}

/// A zeroed `[rows, width]` tensor on `like`'s device, in its dtype.
fn rows_buffer<B: Backend>(rows: usize, width: usize, like: &FloatTensor<B>) -> FloatTensor<B> {
    zeros::<B>(Shape::new([rows, width]), like)
}

/// `rms_norm_swiglu_mlp` with `B`'s own `rms_norm` and `swiglu` kernels, `chunks` rows at a time.
pub(crate) fn rms_norm_swiglu_mlp_on<B: RoutedOps>(
    x: FloatTensor<B>,
    norm_weight: FloatTensor<B>,
    weights: [FloatTensor<B>; 3],
    eps: f32,
    chunks: Chunks,
) -> FloatTensor<B> {
    let norm = |x| B::rms_norm(x, norm_weight.clone(), eps);
    mlp::<B>(x, weights, chunks, norm, B::swiglu, false).0
}

/// [`rms_norm_swiglu_mlp_on`] that also returns the gate and up projections (see [`mlp`]).
pub(crate) fn rms_norm_swiglu_mlp_keeping_on<B: RoutedOps>(
    x: FloatTensor<B>,
    norm_weight: FloatTensor<B>,
    weights: [FloatTensor<B>; 3],
    eps: f32,
    chunks: Chunks,
) -> (FloatTensor<B>, Projections<B>) {
    let norm = |x| B::rms_norm(x, norm_weight.clone(), eps);
    let (out, kept) = mlp::<B>(x, weights, chunks, norm, B::swiglu, true);
    (
        out,
        kept.expect("`mlp` returns the projections it is asked to keep"),
    )
}

/// [`rms_norm_swiglu_mlp`](crate::tensor::rms_norm_swiglu_mlp) written with `B`'s primitives.
pub fn rms_norm_swiglu_mlp<B: Backend>(
    x: FloatTensor<B>,
    norm_weight: FloatTensor<B>,
    gate_weight: FloatTensor<B>,
    up_weight: FloatTensor<B>,
    down_weight: FloatTensor<B>,
    eps: f32,
) -> FloatTensor<B> {
    let norm = |x| composed::rms_norm::<B>(x, norm_weight.clone(), eps);
    let weights = [gate_weight, up_weight, down_weight];
    mlp::<B>(
        x,
        weights,
        Chunks::Whole,
        norm,
        composed::swiglu::<B>,
        false,
    )
    .0
}

/// The backward kernels a chunk's gradients are formed with: the RMS norm's
/// (`[dx, dnorm_weight]`) and the SwiGLU gate's (`[dgate, dup]`), as
/// [`BackwardKernels`](super::backward::BackwardKernels) has them.
pub(crate) struct Kernels<N, G> {
    pub norm: N,
    pub gate: G,
}

/// `acc + value`, or `value` for the first chunk.
fn accumulate<B: Backend>(acc: &mut Option<FloatTensor<B>>, value: FloatTensor<B>) {
    *acc = Some(match acc.take() {
        Some(sum) => B::float_add(sum, value),
        None => value,
    });
}

/// `[dx, dnorm_weight, dgate_weight, dup_weight, ddown_weight]` of `rms_norm_swiglu_mlp`, for the
/// wanted ones: per chunk of rows, the norm, both projections and their product are rebuilt from
/// `x` (the projections read from `kept` when the forward pass kept them), the weight gradients
/// summed, and the chunk's `dx` written into the rows it came from.
#[allow(clippy::too_many_arguments)] // The op's inputs, its gradient, what is wanted and how.
pub(crate) fn rms_norm_swiglu_mlp_backward<B: RoutedOps, N, G>(
    x: FloatTensor<B>,
    norm_weight: FloatTensor<B>,
    [gate_weight, up_weight, down_weight]: [FloatTensor<B>; 3],
    eps: f32,
    grad: FloatTensor<B>,
    [want_x, want_norm, want_gate, want_up, want_down]: [bool; 5],
    kept: Option<Projections<B>>,
    chunks: Chunks,
    kernels: Kernels<N, G>,
) -> [Option<FloatTensor<B>>; 5]
where
    N: RmsNormBackward<B>,
    G: GateBackward<B>,
{
    let shape = x.shape();
    let width = shape.last().copied().unwrap_or(1).max(1);
    let rows = shape.num_elements() / width;
    let hidden = gate_weight.shape()[1];
    let want_input = want_x || want_norm;
    let [mut d_x, mut d_norm, mut d_gate, mut d_up, mut d_down] = [const { None }; 5];
    let step = chunks.rows(rows, hidden.max(width));
    // (No rows: one empty chunk, whose products are the zero gradients.)
    for first in (0..rows.max(1)).step_by(step) {
        let range = first..(first + step).min(rows);
        let x_rows = rows_of::<B>(&x, range.clone());
        let grad_rows = rows_of::<B>(&grad, range.clone());
        // The normalised rows: for the projections when they were not kept, and for their
        // weights' gradients.
        let norm = || B::rms_norm(x_rows.clone(), norm_weight.clone(), eps);
        let (h, gate, up) = match &kept {
            Some(kept) => (
                (want_gate || want_up).then(norm),
                rows_of::<B>(&kept.gate, range.clone()),
                rows_of::<B>(&kept.up, range.clone()),
            ),
            None => {
                let h = norm();
                let gate = B::linear(h.clone(), gate_weight.clone(), None);
                let up = B::linear(h.clone(), up_weight.clone(), None);
                (Some(h), gate, up)
            }
        };
        if want_down {
            let product = B::swiglu(gate.clone(), up.clone());
            accumulate::<B>(
                &mut d_down,
                B::linear_weight_backward(product, grad_rows.clone()),
            );
        }
        if !(want_input || want_gate || want_up) {
            continue;
        }
        let d_product = B::linear_x_backward(down_weight.clone(), grad_rows);
        let [dg, du] = (kernels.gate)(
            gate,
            up,
            d_product,
            [want_input || want_gate, want_input || want_up],
        );
        if let (true, Some(dg), Some(h)) = (want_gate, &dg, &h) {
            accumulate::<B>(
                &mut d_gate,
                B::linear_weight_backward(h.clone(), dg.clone()),
            );
        }
        if let (true, Some(du), Some(h)) = (want_up, &du, &h) {
            accumulate::<B>(&mut d_up, B::linear_weight_backward(h.clone(), du.clone()));
        }
        drop(h);
        let (Some(dg), Some(du), true) = (dg, du, want_input) else {
            continue;
        };
        let d_h = B::float_add(
            B::linear_x_backward(gate_weight.clone(), dg),
            B::linear_x_backward(up_weight.clone(), du),
        );
        let [dx, dn] = (kernels.norm)(x_rows, norm_weight.clone(), eps, d_h, [want_x, want_norm]);
        if let Some(dn) = dn {
            accumulate::<B>(&mut d_norm, dn);
        }
        if let Some(dx) = dx {
            d_x = Some(write_rows::<B>(d_x, rows, range, dx));
        }
    }
    let d_x = d_x.map(|dx| B::float_reshape(dx, shape));
    [d_x, d_norm, d_gate, d_up, d_down]
}

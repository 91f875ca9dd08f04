//! A norm or a gate fused with the projection after it (`rms_norm_linear`, `layer_norm_linear`,
//! `swiglu_linear`): the tensor between the two, which Burn's `module::linear` would keep for
//! its weight gradient, is never kept. The forward pass forms it, projects it and drops it; the
//! backward pass recomputes it from the inputs it keeps (`x`, or `gate` and `up`), forms the
//! weight gradient from it, and drops it before forming the gradient of what it was made of.
//!
//! The forward functions are generic over the ops' trait: each backend's own norm or gate
//! kernel runs, then Burn's `linear` on that backend (`Flex` and `Cube` call them from their
//! `RoutedOps` impls). The compositions are the same with Burn's primitives for the norm or gate.
//! On Flex, `swiglu_linear`'s backward pass also writes its input gradients over `gate`'s and
//! `up`'s own buffers when nothing else holds them (`swiglu_linear_backward_on_flex`).

use std::ops::Range;

use burn_backend::backend::ops::FloatTensorOps;
use burn_backend::tensor::FloatTensor;
use burn_backend::{Backend, DType, Shape, TensorData, TensorMetadata};
use burn_dispatch::backends::Flex;
use burn_dispatch::backends::flex::FlexTensor;

use super::composed;
use crate::flex::math::sigmoid;
use crate::flex::{Rows, is_writable, simd_fn, writable};
use crate::ops::RoutedOps;

/// Panics unless `weight` (named `weight_name`) is `[width, outputs]` for an input whose last
/// dimension is `width`: Burn's matmul would otherwise fail inside with shapes the caller never
/// wrote.
pub(crate) fn check_weight(
    op: &str,
    [input, weight_name]: [&str; 2],
    x: &impl TensorMetadata,
    weight: &impl TensorMetadata,
) {
    let (x, weight) = (x.shape(), weight.shape());
    let width = x.last().copied().unwrap_or(0);
    assert!(
        weight.first() == Some(&width),
        "{op}: `{weight_name}` has shape {:?}, but its rows must be `{input}`'s width {width} \
         (`{input}` has shape {:?}); pass it as `[{width}, outputs]`, as Burn's `Linear` keeps \
         it (transpose a `[outputs, {width}]` one)",
        weight.as_slice(),
        x.as_slice(),
    );
}

/// `made @ weight + bias` with Burn's own `linear` on `B`, where `made` (the norm or gate) is
/// `make(input)`: `weight`'s rows are checked against `input`'s width first.
fn linear_after<B: Backend>(
    op: &str,
    name: &str,
    input: FloatTensor<B>,
    make: impl FnOnce(FloatTensor<B>) -> FloatTensor<B>,
    weight: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
) -> FloatTensor<B> {
    check_weight(op, [name, "weight"], &input, &weight);
    B::linear(make(input), weight, bias)
}

/// A zeroed tensor of `shape` on `like`'s device, in its dtype, for chunks of rows to be written
/// into. Made from data rather than with `float_zeros`: Flex's makes a byte vector and copies it
/// into an aligned buffer, so the tensor briefly took twice its size (an extra 4 MiB in
/// `self_attention`'s forward pass at 1M values); `TensorData`'s typed zeros are taken as they
/// are. (On a GPU the chunks are every row, and such a tensor is made only for a call without
/// rows.)
pub(crate) fn zeros<B: Backend>(shape: Shape, like: &FloatTensor<B>) -> FloatTensor<B> {
    // `f32` from zeroed memory (`full_dtype` pushes the values one by one).
    let data = match like.dtype() {
        DType::F32 => TensorData::new(vec![0.0_f32; shape.num_elements()], shape),
        dtype => TensorData::full_dtype(shape, 0.0, dtype),
    };
    B::float_from_data(data, &like.device())
}

/// `t`'s rows (every dimension but the last, flattened) in `range`, as `[rows, width]`.
pub(crate) fn rows_of<B: Backend>(t: &FloatTensor<B>, range: Range<usize>) -> FloatTensor<B> {
    let shape = t.shape();
    let width = shape.last().copied().unwrap_or(1);
    let all = B::float_reshape(
        t.clone(),
        Shape::new([shape.num_elements() / width.max(1), width]),
    );
    B::float_slice(all, &[range.into()])
}

/// How many rows of the projection's input the weight gradient takes at a time: every row
/// (`Whole`, one matmul, as Burn's own `linear` backward), or chunks of about 32 KiB of `f32`
/// input, so that neither the recomputed input nor the matmul's packed copy of it exists whole
/// (Flex, where each is heap the step holds at its peak; a GPU prefers one launch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chunks {
    /// Every row at once.
    Whole,
    /// About 32 KiB of `f32` input a chunk, and at least 64 rows.
    Small,
}

impl Chunks {
    pub(crate) fn rows(self, rows: usize, width: usize) -> usize {
        match self {
            Self::Whole => rows.max(1),
            // (At least 64 rows: a product of fewer rows runs far below `gemm`'s speed.)
            Self::Small => (8 * 1024 / width.max(1)).max(64).min(rows.max(1)),
        }
    }
}

/// `[d_input, d_weight, d_bias]` of `input @ weight + bias` for the wanted ones. `input` is not
/// kept: `recompute(range)` makes its rows in `range` (as `[rows, width]`), only when the
/// weight's gradient is wanted, `chunks` at a time, each dropped before the next and all of them
/// before the input's gradient is formed.
pub(crate) fn projection_grads<B: Backend>(
    recompute: impl Fn(Range<usize>) -> FloatTensor<B>,
    chunks: Chunks,
    weight: FloatTensor<B>,
    grad: FloatTensor<B>,
    [want_input, want_weight, want_bias]: [bool; 3],
) -> [Option<FloatTensor<B>>; 3] {
    let d_weight = want_weight.then(|| {
        let width = weight.shape()[0];
        let rows = grad.shape().num_elements() / weight.shape()[1].max(1);
        let step = chunks.rows(rows, width);
        // (No rows: one empty chunk, whose product is the zero gradient.)
        (0..rows.max(1))
            .step_by(step)
            .map(|first| {
                let range = first..(first + step).min(rows);
                B::linear_weight_backward(recompute(range.clone()), rows_of::<B>(&grad, range))
            })
            .reduce(B::float_add)
            .expect("one chunk at least")
    });
    let d_bias = want_bias.then(|| B::linear_bias_backward(grad.clone()));
    let d_input = want_input.then(|| B::linear_x_backward(weight, grad));
    [d_input, d_weight, d_bias]
}

/// `[dx, dnorm_weight, dweight, dbias]` of `rms_norm_linear` (see
/// [`BackwardKernels::rms_norm_linear_backward`](super::backward::BackwardKernels::rms_norm_linear_backward)),
/// with `norm_backward` the norm's own backward kernel (`rms_norm_backward`'s arguments).
#[allow(clippy::too_many_arguments)] // The op's inputs, its gradient, what is wanted and how.
pub(crate) fn rms_norm_linear_backward<B: RoutedOps>(
    x: FloatTensor<B>,
    norm_weight: FloatTensor<B>,
    weight: FloatTensor<B>,
    eps: f32,
    grad: FloatTensor<B>,
    [want_x, want_norm, want_weight, want_bias]: [bool; 4],
    chunks: Chunks,
    norm_backward: impl RmsNormBackward<B>,
) -> [Option<FloatTensor<B>>; 4] {
    let [d_normalized, d_weight, d_bias] = projection_grads::<B>(
        |rows| B::rms_norm(rows_of::<B>(&x, rows), norm_weight.clone(), eps),
        chunks,
        weight,
        grad,
        [want_x || want_norm, want_weight, want_bias],
    );
    let [d_x, d_norm] = d_normalized.map_or([None, None], |d| {
        norm_backward(x, norm_weight, eps, d, [want_x, want_norm])
    });
    [d_x, d_norm, d_weight, d_bias]
}

/// `[dx, dgamma, dbeta, dweight, dbias]` of `layer_norm_linear`, with `norm_backward` the norm's
/// own backward kernel (`layer_norm_backward`'s arguments).
#[allow(clippy::too_many_arguments)] // The op's inputs, its gradient, what is wanted and how.
pub(crate) fn layer_norm_linear_backward<B: RoutedOps>(
    x: FloatTensor<B>,
    gamma: FloatTensor<B>,
    beta: FloatTensor<B>,
    weight: FloatTensor<B>,
    eps: f32,
    grad: FloatTensor<B>,
    [want_x, want_gamma, want_beta, want_weight, want_bias]: [bool; 5],
    chunks: Chunks,
    norm_backward: impl FnOnce(
        FloatTensor<B>,
        FloatTensor<B>,
        f32,
        FloatTensor<B>,
        [bool; 3],
    ) -> [Option<FloatTensor<B>>; 3],
) -> [Option<FloatTensor<B>>; 5] {
    let [d_normalized, d_weight, d_bias] = projection_grads::<B>(
        |rows| {
            <B as RoutedOps>::layer_norm(rows_of::<B>(&x, rows), gamma.clone(), beta.clone(), eps)
        },
        chunks,
        weight,
        grad,
        [want_x || want_gamma || want_beta, want_weight, want_bias],
    );
    let [d_x, d_gamma, d_beta] = d_normalized.map_or([None, None, None], |d| {
        norm_backward(x, gamma, eps, d, [want_x, want_gamma, want_beta])
    });
    [d_x, d_gamma, d_beta, d_weight, d_bias]
}

/// `[d_product, d_weight, d_bias]` of `swiglu_linear`'s projection, the product recomputed from
/// `gate` and `up` for the weight gradient.
pub(crate) fn swiglu_projection_grads<B: RoutedOps>(
    gate: &FloatTensor<B>,
    up: &FloatTensor<B>,
    weight: FloatTensor<B>,
    grad: FloatTensor<B>,
    wanted: [bool; 3],
    chunks: Chunks,
) -> [Option<FloatTensor<B>>; 3] {
    projection_grads::<B>(
        |rows| B::swiglu(rows_of::<B>(gate, rows.clone()), rows_of::<B>(up, rows)),
        chunks,
        weight,
        grad,
        wanted,
    )
}

/// The backward kernel of the SwiGLU gate: `[dgate, dup]` from `gate`, `up`, the product's
/// gradient and the wanted flags (`swiglu_backward`'s arguments). `Fn`: a chunked pass calls it
/// once per chunk.
pub(crate) trait GateBackward<B: Backend>:
    Fn(FloatTensor<B>, FloatTensor<B>, FloatTensor<B>, [bool; 2]) -> [Option<FloatTensor<B>>; 2]
{
}

impl<B: Backend, F> GateBackward<B> for F where
    F: Fn(FloatTensor<B>, FloatTensor<B>, FloatTensor<B>, [bool; 2]) -> [Option<FloatTensor<B>>; 2]
{
}

/// The backward kernel of RMS normalisation: `[dx, dweight]` from `x`, the weight, `eps`, the
/// normalised tensor's gradient and the wanted flags (`rms_norm_backward`'s arguments).
pub(crate) trait RmsNormBackward<B: Backend>:
    Fn(FloatTensor<B>, FloatTensor<B>, f32, FloatTensor<B>, [bool; 2]) -> [Option<FloatTensor<B>>; 2]
{
}

impl<B: Backend, F> RmsNormBackward<B> for F where
    F: Fn(
        FloatTensor<B>,
        FloatTensor<B>,
        f32,
        FloatTensor<B>,
        [bool; 2],
    ) -> [Option<FloatTensor<B>>; 2]
{
}

/// `[dgate, dup, dweight, dbias]` of `swiglu_linear`, with `gate_backward` the gate's own
/// backward kernel.
pub(crate) fn swiglu_linear_backward<B: RoutedOps>(
    gate: FloatTensor<B>,
    up: FloatTensor<B>,
    weight: FloatTensor<B>,
    grad: FloatTensor<B>,
    [want_gate, want_up, want_weight, want_bias]: [bool; 4],
    chunks: Chunks,
    gate_backward: impl GateBackward<B>,
) -> [Option<FloatTensor<B>>; 4] {
    let [d_product, d_weight, d_bias] = swiglu_projection_grads::<B>(
        &gate,
        &up,
        weight,
        grad,
        [want_gate || want_up, want_weight, want_bias],
        chunks,
    );
    let [d_gate, d_up] = d_product.map_or([None, None], |d| {
        gate_backward(gate, up, d, [want_gate, want_up])
    });
    [d_gate, d_up, d_weight, d_bias]
}

/// `rms_norm_linear` with `B`'s own `rms_norm` kernel.
pub(crate) fn rms_norm_linear_on<B: RoutedOps>(
    x: FloatTensor<B>,
    norm_weight: FloatTensor<B>,
    weight: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
    eps: f32,
) -> FloatTensor<B> {
    let norm = |x| B::rms_norm(x, norm_weight, eps);
    linear_after::<B>("rms_norm_linear", "x", x, norm, weight, bias)
}

/// `layer_norm_linear` with `B`'s own `layer_norm` kernel.
pub(crate) fn layer_norm_linear_on<B: RoutedOps>(
    x: FloatTensor<B>,
    gamma: FloatTensor<B>,
    beta: FloatTensor<B>,
    weight: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
    eps: f32,
) -> FloatTensor<B> {
    let norm = |x| <B as RoutedOps>::layer_norm(x, gamma, beta, eps);
    linear_after::<B>("layer_norm_linear", "x", x, norm, weight, bias)
}

/// `swiglu_linear` with `B`'s own `swiglu` kernel.
pub(crate) fn swiglu_linear_on<B: RoutedOps>(
    gate: FloatTensor<B>,
    up: FloatTensor<B>,
    weight: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
) -> FloatTensor<B> {
    let product = |gate| B::swiglu(gate, up);
    linear_after::<B>("swiglu_linear", "gate", gate, product, weight, bias)
}

/// [`rms_norm_linear`](crate::tensor::rms_norm_linear) written with `B`'s primitives.
pub fn rms_norm_linear<B: Backend>(
    x: FloatTensor<B>,
    norm_weight: FloatTensor<B>,
    weight: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
    eps: f32,
) -> FloatTensor<B> {
    let norm = |x| composed::rms_norm::<B>(x, norm_weight, eps);
    linear_after::<B>("rms_norm_linear", "x", x, norm, weight, bias)
}

/// [`layer_norm_linear`](crate::tensor::layer_norm_linear) written with `B`'s primitives.
pub fn layer_norm_linear<B: Backend>(
    x: FloatTensor<B>,
    gamma: FloatTensor<B>,
    beta: FloatTensor<B>,
    weight: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
    eps: f32,
) -> FloatTensor<B> {
    let norm = |x| composed::layer_norm::<B>(x, gamma, beta, eps);
    linear_after::<B>("layer_norm_linear", "x", x, norm, weight, bias)
}

/// [`swiglu_linear`](crate::tensor::swiglu_linear) written with `B`'s primitives.
pub fn swiglu_linear<B: Backend>(
    gate: FloatTensor<B>,
    up: FloatTensor<B>,
    weight: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
) -> FloatTensor<B> {
    let product = |gate| composed::swiglu::<B>(gate, up);
    linear_after::<B>("swiglu_linear", "gate", gate, product, weight, bias)
}

/// `swiglu_linear`'s backward pass on Flex: when `gate` and `up` are ours (dense `f32` of one
/// shape, held by nothing else) and an input gradient is wanted, the weight and bias gradients
/// first (they read `gate` and `up`), then both input gradients over their buffers; otherwise
/// the generic pass.
pub(crate) fn swiglu_linear_backward_on_flex(
    gate: FlexTensor,
    up: FlexTensor,
    weight: FlexTensor,
    grad: FlexTensor,
    wanted: [bool; 4],
    chunks: Chunks,
    gate_backward: impl GateBackward<Flex>,
) -> [Option<FlexTensor>; 4] {
    let [want_gate, want_up, want_weight, want_bias] = wanted;
    let ours = is_writable(&gate) && is_writable(&up) && gate.shape() == up.shape();
    if !(want_gate || want_up) || !ours || grad.dtype() != DType::F32 {
        return swiglu_linear_backward::<Flex>(
            gate,
            up,
            weight,
            grad,
            wanted,
            chunks,
            gate_backward,
        );
    }
    let [_, d_weight, d_bias] = swiglu_projection_grads::<Flex>(
        &gate,
        &up,
        weight.clone(),
        grad.clone(),
        [false, want_weight, want_bias],
        chunks,
    );
    let [d_gate, d_up] = swiglu_input_grads_in_place(gate, up, weight, grad, chunks);
    [
        want_gate.then_some(d_gate),
        want_up.then_some(d_up),
        d_weight,
        d_bias,
    ]
}

/// `[dgate, dup]` of `swiglu(gate, up) @ weight` over `gate`'s and `up`'s own buffers (the caller
/// checked they are ours, dense `f32` of one shape, and `grad` `f32`): the product's gradient `grad @ weight^T` is formed a chunk of rows
/// at a time, and each chunk's input gradients are written over the rows they come from, so no
/// `[rows, hidden]` tensor is allocated.
fn swiglu_input_grads_in_place(
    mut gate: FlexTensor,
    mut up: FlexTensor,
    weight: FlexTensor,
    grad: FlexTensor,
    chunks: Chunks,
) -> [FlexTensor; 2] {
    let shape = gate.shape();
    let hidden = shape.last().copied().unwrap_or(1).max(1);
    let rows = shape.num_elements() / hidden;
    let outputs = weight.shape()[1];
    let grad = Flex::float_reshape(grad, Shape::new([rows, outputs]));
    let weight_t = Flex::float_swap_dims(weight, 0, 1).to_contiguous();
    let step = chunks.rows(rows, hidden);
    for first in (0..rows).step_by(step) {
        let n = step.min(rows - first);
        let chunk = Flex::float_slice(grad.clone(), &[(first..first + n).into()]);
        let d = Flex::float_matmul(chunk, weight_t.clone());
        let d = Rows::of(&d).expect("a matmul's output has dense rows");
        let span = first * hidden..(first + n) * hidden;
        let g = &mut writable(&mut gate).expect("checked by the caller")[span.clone()];
        let u = &mut writable(&mut up).expect("checked by the caller")[span];
        d.stretches(0, n * hidden, |offset, d| {
            let end = offset + d.len();
            swiglu_grads_over(d, &mut g[offset..end], &mut u[offset..end]);
        });
    }
    [gate, up]
}

simd_fn! {
    /// `dgate` over `g` and `dup` over `u`, from the product's gradient `d`.
    fn swiglu_grads_over(d: &[f32], g: &mut [f32], u: &mut [f32]) {
        for ((d, g), u) in d.iter().zip(g.iter_mut()).zip(u.iter_mut()) {
            let s = sigmoid(*g);
            let silu = *g * s;
            let d_up = d * silu;
            *g = d * *u * (s + silu * (1.0 - s));
            *u = d_up;
        }
    }
}

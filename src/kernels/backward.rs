//! The gradient computations of the fused layers, called by their `Autodiff<B, C>` backward
//! passes on the inner backend `B`.
//!
//! Each default body composes backend primitives, so every backend has them (`Cube`, `Remote`).
//! `Flex` overrides them (its impl is the `flex` submodule) with one pass over contiguous `f32`
//! rows, as its forward kernels do (`f16` and `bf16` inputs widened to `f32` first, the
//! gradients rounded back once), and uses the defaults for other layouts and dtypes. Each takes
//! the parents' wanted flags and returns a gradient only for the tracked ones.

use burn_backend::tensor::{FloatTensor, IntTensor};
use burn_backend::{Backend, Scalar, Shape, TensorMetadata};

use super::composed::{broadcast_row, one_hot, rms_inverse, standardize, sum_to_row};
use super::fused_linear::{self, Chunks};
use super::fused_mlp;

mod flex;

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

    /// `rms_norm_swiglu_mlp`'s output with its gate and up projections, `[rows, hidden]`, for
    /// [`rms_norm_swiglu_mlp_backward`](Self::rms_norm_swiglu_mlp_backward) to read instead of
    /// rebuilding them: the op's `Autodiff<B, C>` kernel without gradient checkpointing. The
    /// output has the bits of `RoutedOps::rms_norm_swiglu_mlp` (the same chunks, the same
    /// kernels). `None` by default: the op's own kernel runs, and the backward pass rebuilds the
    /// projections (on Remote that kernel is one operation on the server, where the projections
    /// would be several; `Fusion<B>` runs its composition either way). Flex and Cube keep them.
    fn rms_norm_swiglu_mlp_keeping(
        x: FloatTensor<Self>,
        norm_weight: FloatTensor<Self>,
        weights: [FloatTensor<Self>; 3],
        eps: f32,
    ) -> Option<(FloatTensor<Self>, fused_mlp::Projections<Self>)> {
        let _ = (x, norm_weight, weights, eps);
        None
    }

    /// `rms_norm_swiglu_mlp`: the norm, both projections and their product are rebuilt from `x`
    /// a chunk of rows at a time (`PROJECTION_CHUNKS`), each chunk's gradients formed with
    /// `rms_norm_backward` and `swiglu_backward`; the projections are read from `kept` when the
    /// forward pass kept them ([`rms_norm_swiglu_mlp_keeping`](Self::rms_norm_swiglu_mlp_keeping)).
    /// The gradients have the same bits either way: the kept projections are the ones the
    /// rebuilding forms (the same chunks of `x`'s rows, the same kernels).
    fn rms_norm_swiglu_mlp_backward(
        x: FloatTensor<Self>,
        norm_weight: FloatTensor<Self>,
        weights: [FloatTensor<Self>; 3],
        eps: f32,
        grad: FloatTensor<Self>,
        wanted: [bool; 5],
        kept: Option<fused_mlp::Projections<Self>>,
    ) -> [Option<FloatTensor<Self>>; 5] {
        mlp_by_chunks::<Self>(x, norm_weight, weights, eps, grad, wanted, kept)
    }

    /// `lhs @ rhs`, batched over the leading dimensions: the products of `self_attention`'s
    /// kernels. Flex writes them with `gemm` into a fresh buffer (its `float_matmul` makes its
    /// output twice: a zeroed byte vector, copied into an aligned buffer).
    fn matmul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        Self::float_matmul(lhs, rhs)
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

/// `rms_norm_swiglu_mlp`'s backward pass in `B`'s chunks (`PROJECTION_CHUNKS`) with `B`'s
/// `rms_norm_backward` and `swiglu_backward`: the trait's default, and Flex's pass where its
/// `f32` kernel does not apply.
fn mlp_by_chunks<B: BackwardKernels>(
    x: FloatTensor<B>,
    norm_weight: FloatTensor<B>,
    weights: [FloatTensor<B>; 3],
    eps: f32,
    grad: FloatTensor<B>,
    wanted: [bool; 5],
    kept: Option<fused_mlp::Projections<B>>,
) -> [Option<FloatTensor<B>>; 5] {
    fused_mlp::rms_norm_swiglu_mlp_backward::<B, _, _>(
        x,
        norm_weight,
        weights,
        eps,
        grad,
        wanted,
        kept,
        B::PROJECTION_CHUNKS,
        fused_mlp::Kernels {
            norm: B::rms_norm_backward,
            gate: B::swiglu_backward,
        },
    )
}

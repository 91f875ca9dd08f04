//! `impl RoutedOps for CubeBackend` and its backward kernels: the CubeCL kernels of
//! [`super::cube`]. `Cube` runs them directly when fusion is off, and inside each deferred
//! operation of the generated `Fusion<B>` impl when it is on. The ops with a `composition` in
//! `ops.toml` run the trait's default body (the composition) instead, but for `clamp_ste`,
//! whose kernel runs here while `Fusion<B>` runs its one-primitive composition, which Burn's
//! fuser handles as fast (BENCHMARKS.md).

use burn_cubecl::CubeBackend;

use super::cube;
use crate::ops::RoutedOps;
use crate::rt::{BoolTensor, FloatTensor, IntTensor};

impl RoutedOps for CubeBackend {
    fn add_relu(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        cube::add_relu(lhs, rhs)
    }
    fn bias_gelu(x: FloatTensor<Self>, bias: FloatTensor<Self>) -> FloatTensor<Self> {
        cube::bias_gelu(x, bias)
    }
    fn swiglu(gate: FloatTensor<Self>, up: FloatTensor<Self>) -> FloatTensor<Self> {
        cube::swiglu(gate, up)
    }
    fn rms_norm(x: FloatTensor<Self>, weight: FloatTensor<Self>, eps: f32) -> FloatTensor<Self> {
        cube::rms_norm(x, weight, eps)
    }
    fn layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        eps: f32,
    ) -> FloatTensor<Self> {
        cube::layer_norm(x, gamma, beta, eps)
    }
    fn rms_norm_linear(
        x: FloatTensor<Self>,
        norm_weight: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        eps: f32,
    ) -> FloatTensor<Self> {
        super::fused_linear::rms_norm_linear_on::<Self>(x, norm_weight, weight, bias, eps)
    }

    fn layer_norm_linear(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        eps: f32,
    ) -> FloatTensor<Self> {
        super::fused_linear::layer_norm_linear_on::<Self>(x, gamma, beta, weight, bias, eps)
    }

    fn swiglu_linear(
        gate: FloatTensor<Self>,
        up: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
    ) -> FloatTensor<Self> {
        super::fused_linear::swiglu_linear_on::<Self>(gate, up, weight, bias)
    }

    fn rms_norm_swiglu_mlp(
        x: FloatTensor<Self>,
        norm_weight: FloatTensor<Self>,
        gate_weight: FloatTensor<Self>,
        up_weight: FloatTensor<Self>,
        down_weight: FloatTensor<Self>,
        eps: f32,
    ) -> FloatTensor<Self> {
        let weights = [gate_weight, up_weight, down_weight];
        super::fused_mlp::rms_norm_swiglu_mlp_on::<Self>(
            x,
            norm_weight,
            weights,
            eps,
            super::fused_linear::Chunks::Whole,
        )
    }

    fn softmax_last(x: FloatTensor<Self>) -> FloatTensor<Self> {
        cube::softmax_last(x)
    }
    fn cross_entropy_logits(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        cube::cross_entropy_logits(logits, targets)
    }
    fn dropout(x: FloatTensor<Self>, p: f32, seed: u64) -> (FloatTensor<Self>, BoolTensor<Self>) {
        cube::dropout(x, p, seed)
    }
    fn clamp_ste(x: FloatTensor<Self>, lo: f32, hi: f32) -> FloatTensor<Self> {
        cube::clamp_ste(x, lo, hi)
    }
}

impl super::backward::BackwardKernels for CubeBackend {
    fn rms_norm_swiglu_mlp_keeping(
        x: FloatTensor<Self>,
        norm_weight: FloatTensor<Self>,
        weights: [FloatTensor<Self>; 3],
        eps: f32,
    ) -> Option<(FloatTensor<Self>, super::fused_mlp::Projections<Self>)> {
        // Its forward kernel's composition (every row at once), keeping the projections.
        Some(super::fused_mlp::rms_norm_swiglu_mlp_keeping_on::<Self>(
            x,
            norm_weight,
            weights,
            eps,
            super::fused_linear::Chunks::Whole,
        ))
    }
    fn bias_gelu_backward(
        x: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        wanted: [bool; 2],
    ) -> [Option<FloatTensor<Self>>; 2] {
        cube::bias_gelu_backward(x, bias, grad, wanted)
    }
    fn swiglu_backward(
        gate: FloatTensor<Self>,
        up: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        wanted: [bool; 2],
    ) -> [Option<FloatTensor<Self>>; 2] {
        cube::swiglu_backward(gate, up, grad, wanted)
    }
    fn rms_norm_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        eps: f32,
        grad: FloatTensor<Self>,
        wanted: [bool; 2],
    ) -> [Option<FloatTensor<Self>>; 2] {
        cube::rms_norm_backward(x, weight, eps, grad, wanted)
    }
    fn layer_norm_backward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        eps: f32,
        grad: FloatTensor<Self>,
        wanted: [bool; 3],
    ) -> [Option<FloatTensor<Self>>; 3] {
        cube::layer_norm_backward(x, gamma, eps, grad, wanted)
    }
    fn softmax_last_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        cube::softmax_last_backward(y, grad)
    }
}

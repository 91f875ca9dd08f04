//! `RoutedOpsAutodiff` for `Autodiff<B, C>`: the ops whose `Autodiff<B, C>` kernel is written by
//! hand (`backward = "hand-written"` in `ops.toml`), each in its op's module.
//!
//! - `linear_cross_entropy` forms its gradients in the forward pass, which the backward pass
//!   only scales.
//! - `self_attention` and `rms_norm_swiglu_mlp` keep what their backward passes read without
//!   gradient checkpointing and only their inputs under it, which the generated backward passes
//!   cannot express.

use burn_backend::tensor::{FloatTensor, IntTensor};

use super::backward::BackwardKernels;
use super::linear_ce::{self, CrossEntropyOptions, LinearCrossEntropyPass};
use super::{attention, fused_mlp};
use crate::ops::RoutedOpsAutodiff;
use crate::rt::CheckpointStrategy;
use crate::rt::autodiff::Autodiff;

impl<B, C> RoutedOpsAutodiff for Autodiff<B, C>
where
    B: BackwardKernels + LinearCrossEntropyPass,
    C: CheckpointStrategy,
{
    fn linear_cross_entropy(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        targets: IntTensor<Self>,
        options: CrossEntropyOptions,
    ) -> FloatTensor<Self> {
        linear_ce::autodiff::linear_cross_entropy::<B, C>(x, weight, bias, targets, options)
    }

    fn rms_norm_swiglu_mlp(
        x: FloatTensor<Self>,
        norm_weight: FloatTensor<Self>,
        gate_weight: FloatTensor<Self>,
        up_weight: FloatTensor<Self>,
        down_weight: FloatTensor<Self>,
        eps: f32,
    ) -> FloatTensor<Self> {
        let inputs = [x, norm_weight, gate_weight, up_weight, down_weight];
        fused_mlp::autodiff::rms_norm_swiglu_mlp::<B, C>(inputs, eps)
    }

    fn self_attention(
        x: FloatTensor<Self>,
        q_weight: FloatTensor<Self>,
        k_weight: FloatTensor<Self>,
        v_weight: FloatTensor<Self>,
        out_weight: FloatTensor<Self>,
        heads: usize,
        causal: bool,
    ) -> FloatTensor<Self> {
        let inputs = [x, q_weight, k_weight, v_weight, out_weight];
        attention::autodiff::self_attention::<B, C>(inputs, heads, causal)
    }
}

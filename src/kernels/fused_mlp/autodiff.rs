//! The `Autodiff<B, C>` kernel. Without gradient checkpointing the backward pass keeps `x`,
//! the weights and the gate and up projections (`[rows, hidden]`, 2 of the MLP's 11
//! matrix products that it then does not redo; on Flex and Cube, see
//! [`BackwardKernels::rms_norm_swiglu_mlp_keeping`]), and rebuilds only the normalised rows;
//! under `gradient_checkpointing()` it keeps only the inputs, through the checkpointer, and
//! rebuilds the rest a chunk of rows at a time. The gradients have the same bits either way:
//! the same chunks and kernels form them, only the projections' source differs.

use burn_backend::tensor::FloatTensor;

use super::Projections;
use crate::kernels::backward::BackwardKernels;
use crate::rt::__private::grad::{checkpoints, register_formed};
use crate::rt::autodiff::checkpoint::base::Checkpointer;
use crate::rt::autodiff::grads::Gradients;
use crate::rt::autodiff::ops::{Backward, Ops, OpsKind};
use crate::rt::autodiff::{Autodiff, NodeId};
use crate::rt::{Backend, CheckpointStrategy};

/// What the backward pass keeps: the inputs and the projections (where the backend forms
/// them, [`BackwardKernels::rms_norm_swiglu_mlp_keeping`]), or (under gradient
/// checkpointing) the inputs' node ids.
#[derive(Clone, Debug)]
enum Kept<B: Backend> {
    Tensors {
        inputs: [FloatTensor<B>; 5],
        projections: Option<Projections<B>>,
    },
    Checkpointed([NodeId; 5]),
}

#[derive(Clone, Debug)]
struct State<B: Backend> {
    kept: Kept<B>,
    eps: f32,
}

#[derive(Debug)]
struct RmsNormSwigluMlpBackward;

impl<B: BackwardKernels> Backward<B, 5> for RmsNormSwigluMlpBackward {
    type State = State<B>;

    fn backward(
        self,
        ops: Ops<Self::State, 5>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let grad = grads.consume::<B>(&ops.node);
        let wanted = ops.parents.each_ref().map(Option::is_some);
        let State { kept, eps } = ops.state;
        let (inputs, projections) = match kept {
            Kept::Tensors {
                inputs,
                projections,
            } => (inputs, projections),
            Kept::Checkpointed(ids) => (
                ids.map(|id| checkpointer.retrieve_node_output::<FloatTensor<B>>(id)),
                None,
            ),
        };
        let [x, norm_weight, weights @ ..] = inputs;
        let formed = B::rms_norm_swiglu_mlp_backward(
            x,
            norm_weight,
            weights,
            eps,
            grad,
            wanted,
            projections,
        );
        let parents = ops.parents.map(|p| p.map(|p| p.id));
        register_formed::<B, 5>(parents, formed, grads);
    }
}

/// The kernel: see the module.
pub(crate) fn rms_norm_swiglu_mlp<B: BackwardKernels, C: CheckpointStrategy>(
    inputs: [FloatTensor<Autodiff<B, C>>; 5],
    eps: f32,
) -> FloatTensor<Autodiff<B, C>> {
    let parents = inputs.each_ref().map(|t| t.node());
    match RmsNormSwigluMlpBackward
        .prepare::<C>(parents)
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(mut prep) if checkpoints::<C>() => {
            let ids = inputs.each_ref().map(|t| prep.checkpoint(t));
            let [x, n, g, u, d] = inputs.map(|t| t.into_primitive());
            let output = B::rms_norm_swiglu_mlp(x, n, g, u, d, eps);
            let kept = Kept::Checkpointed(ids);
            prep.finish(State { kept, eps }, output)
        }
        OpsKind::Tracked(prep) => {
            let inputs = inputs.map(|t| t.into_primitive());
            let [x, n, weights @ ..] = inputs.clone();
            let (output, projections) = match B::rms_norm_swiglu_mlp_keeping(x, n, weights, eps) {
                Some((output, projections)) => (output, Some(projections)),
                None => {
                    let [x, n, g, u, d] = inputs.clone();
                    (B::rms_norm_swiglu_mlp(x, n, g, u, d, eps), None)
                }
            };
            let kept = Kept::Tensors {
                inputs,
                projections,
            };
            prep.finish(State { kept, eps }, output)
        }
        OpsKind::UnTracked(prep) => {
            let [x, n, g, u, d] = inputs.map(|t| t.into_primitive());
            prep.finish(B::rms_norm_swiglu_mlp(x, n, g, u, d, eps))
        }
    }
}

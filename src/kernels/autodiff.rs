//! `Autodiff<B, C>` kernels: forward on the inner backend `B`, plus a backward pass.

use burn_autodiff::Autodiff;
use burn_autodiff::checkpoint::base::Checkpointer;
use burn_autodiff::checkpoint::strategy::CheckpointStrategy;
use burn_autodiff::grads::Gradients;
use burn_autodiff::ops::{Backward, Ops, OpsKind, broadcast_shape, unary};
use burn_backend::tensor::{BoolTensor, FloatTensor, IntTensor};
use burn_backend::{Backend, Scalar, Shape, TensorMetadata};

use super::backward::BackwardKernels;
use crate::ops::{RoutedOps, RoutedOpsAutodiff};

/// The incoming gradient of `ops`' output, and a way to hand each tracked parent its gradient:
/// for ops with more than one output gradient to compute from shared intermediates. Each
/// gradient is summed back to its parent's shape (`shapes`), over the dimensions the forward
/// pass broadcast: a parameter's gradient always has the parameter's shape.
///
/// Callers move the saved state out of `Ops` first, so that a kernel may overwrite a saved
/// tensor nobody else holds.
fn distribute<B: Backend, const N: usize>(
    Ops { parents, node, .. }: Ops<(), N>,
    grads: &mut Gradients,
    shapes: [Shape; N],
    parent_grads: impl FnOnce(FloatTensor<B>, [bool; N]) -> [Option<FloatTensor<B>>; N],
) {
    let grad = grads.consume::<B>(&node);
    let wanted = parents.each_ref().map(Option::is_some);
    let computed = parent_grads(grad, wanted);
    for ((parent, grad), shape) in parents.into_iter().zip(computed).zip(shapes) {
        if let (Some(node), Some(grad)) = (parent, grad) {
            grads.register::<B>(node.id, broadcast_shape::<B>(grad, &shape));
        }
    }
}

/// Backward of `gelu(x + bias)`: `gelu'(x + bias)` times the incoming gradient for `x`, summed
/// over the leading dimensions for `bias`.
#[derive(Debug)]
struct BiasGeluBackward;

impl<B: BackwardKernels> Backward<B, 2> for BiasGeluBackward {
    /// The inputs.
    type State = (FloatTensor<B>, FloatTensor<B>);

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let Ops {
            parents,
            node,
            state: (x, bias),
        } = ops;
        let shapes = [x.shape(), bias.shape()];
        distribute::<B, 2>(
            Ops {
                parents,
                node,
                state: (),
            },
            grads,
            shapes,
            |grad, wanted| B::bias_gelu_backward(x, bias, grad, wanted),
        );
    }
}

/// Backward of `silu(gate) * up`: `up * silu'(gate)` for `gate` and `silu(gate)` for `up`,
/// times the incoming gradient, with `silu'(g) = s + g s (1 - s)` and `s = sigmoid(g)`.
#[derive(Debug)]
struct SwigluBackward;

impl<B: BackwardKernels> Backward<B, 2> for SwigluBackward {
    /// The inputs.
    type State = (FloatTensor<B>, FloatTensor<B>);

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let Ops {
            parents,
            node,
            state: (gate, up),
        } = ops;
        let shapes = [gate.shape(), up.shape()];
        distribute::<B, 2>(
            Ops {
                parents,
                node,
                state: (),
            },
            grads,
            shapes,
            |grad, wanted| B::swiglu_backward(gate, up, grad, wanted),
        );
    }
}

/// Backward of RMS normalisation. With `r = 1 / sqrt(mean(x^2) + eps)`, `x^ = x r` and
/// `g = grad * weight`: `dx = r (g - x^ mean(g x^))`, `dweight = sum(grad x^)` over the rows.
#[derive(Debug)]
struct RmsNormBackward;

impl<B: BackwardKernels> Backward<B, 2> for RmsNormBackward {
    /// The inputs and `eps`.
    type State = (FloatTensor<B>, FloatTensor<B>, f32);

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let Ops {
            parents,
            node,
            state: (x, weight, eps),
        } = ops;
        let shapes = [x.shape(), weight.shape()];
        distribute::<B, 2>(
            Ops {
                parents,
                node,
                state: (),
            },
            grads,
            shapes,
            |grad, wanted| B::rms_norm_backward(x, weight, eps, grad, wanted),
        );
    }
}

/// Backward of layer normalisation. With `r = 1 / sqrt(var + eps)`, `x^ = (x - mean) r` and
/// `g = grad * gamma`: `dx = r (g - mean(g) - x^ mean(g x^))`, `dgamma = sum(grad x^)` and
/// `dbeta = sum(grad)` over the rows.
#[derive(Debug)]
struct LayerNormBackward;

impl<B: BackwardKernels> Backward<B, 3> for LayerNormBackward {
    /// `x`, `gamma`, `eps` and `beta`'s shape (`beta` itself does not enter the gradients).
    type State = (FloatTensor<B>, FloatTensor<B>, f32, Shape);

    fn backward(
        self,
        ops: Ops<Self::State, 3>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let Ops {
            parents,
            node,
            state: (x, gamma, eps, beta_shape),
        } = ops;
        let shapes = [x.shape(), gamma.shape(), beta_shape];
        distribute::<B, 3>(
            Ops {
                parents,
                node,
                state: (),
            },
            grads,
            shapes,
            |grad, wanted| B::layer_norm_backward(x, gamma, eps, grad, wanted),
        );
    }
}

/// Backward of the last-dimension softmax: `y (grad - sum(grad y))` with `y` the output.
#[derive(Debug)]
struct SoftmaxBackward;

impl<B: BackwardKernels> Backward<B, 1> for SoftmaxBackward {
    /// The forward output.
    type State = FloatTensor<B>;

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let Ops {
            parents,
            node,
            state: output,
        } = ops;
        unary::<B, _>(parents, node, grads, |grad| {
            B::softmax_last_backward(output, grad)
        });
    }
}

/// Backward of the mean cross-entropy: `(softmax(logits) - one_hot(targets)) * grad / batch`.
#[derive(Debug)]
struct CrossEntropyBackward;

impl<B: BackwardKernels> Backward<B, 1> for CrossEntropyBackward {
    /// The logits and the targets.
    type State = (FloatTensor<B>, IntTensor<B>);

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let Ops {
            parents,
            node,
            state: (logits, targets),
        } = ops;
        unary::<B, _>(parents, node, grads, |grad| {
            B::cross_entropy_backward(logits, targets, grad)
        });
    }
}

/// Backward of dropout: the incoming gradient through the keep mask, times `1 / (1 - p)`.
#[derive(Debug)]
struct DropoutBackward;

impl<B: BackwardKernels> Backward<B, 1> for DropoutBackward {
    /// The keep mask and the scale.
    type State = (BoolTensor<B>, f32);

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let Ops {
            parents,
            node,
            state: (mask, scale),
        } = ops;
        unary::<B, _>(parents, node, grads, |grad| {
            B::dropout_backward(mask, scale, grad)
        });
    }
}

/// The straight-through backward of `clamp_ste`: the incoming gradient, unchanged.
#[derive(Debug)]
struct StraightThroughBackward;

impl<B: Backend> Backward<B, 1> for StraightThroughBackward {
    type State = ();

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        unary::<B, _>(ops.parents, ops.node, grads, |grad| grad);
    }
}

/// Backward of `relu(lhs + rhs)`: the incoming gradient where the output is positive, zero
/// elsewhere, summed back over any broadcast dimension of each input.
#[derive(Debug)]
struct AddReluBackward;

impl<B: BackwardKernels> Backward<B, 2> for AddReluBackward {
    /// The forward output and the two input shapes.
    type State = (FloatTensor<B>, Shape, Shape);

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let Ops {
            parents,
            node,
            state: (output, lhs_shape, rhs_shape),
        } = ops;
        // Through the relu once, then to each input's shape.
        let grad = B::add_relu_backward(output, grads.consume::<B>(&node));
        let [lhs, rhs] = parents;
        match (lhs, rhs) {
            (Some(lhs), Some(rhs)) => {
                grads.register::<B>(lhs.id, broadcast_shape::<B>(grad.clone(), &lhs_shape));
                grads.register::<B>(rhs.id, broadcast_shape::<B>(grad, &rhs_shape));
            }
            (Some(only), None) => {
                grads.register::<B>(only.id, broadcast_shape::<B>(grad, &lhs_shape))
            }
            (None, Some(only)) => {
                grads.register::<B>(only.id, broadcast_shape::<B>(grad, &rhs_shape))
            }
            (None, None) => {}
        }
    }
}

/// Backward of `x * alpha`: the incoming gradient times `alpha`.
#[derive(Debug)]
struct ScaleBackward;

impl<B: Backend> Backward<B, 1> for ScaleBackward {
    type State = f32;

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let alpha = ops.state;
        unary::<B, _>(ops.parents, ops.node, grads, |grad| {
            B::float_mul_scalar(grad, Scalar::from(alpha))
        });
    }
}

/// Backward of `alpha * x + beta * y`: the incoming gradient times `alpha` for `x` and `beta`
/// for `y`, summed back over broadcast dimensions.
#[derive(Debug)]
struct AxpbyBackward;

impl<B: Backend> Backward<B, 2> for AxpbyBackward {
    /// `alpha`, `beta` and the two input shapes.
    type State = (f32, f32, Shape, Shape);

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let Ops {
            parents: [x, y],
            node,
            state: (alpha, beta, x_shape, y_shape),
        } = ops;
        let grad = grads.consume::<B>(&node);
        let scaled = |grad, factor: f32, shape: &Shape| {
            broadcast_shape::<B>(B::float_mul_scalar(grad, Scalar::from(factor)), shape)
        };
        // `y`'s gradient from a shared handle first, then `x`'s from the gradient's own buffer,
        // which is uniquely owned again by then (Flex scales it in place).
        if let Some(y) = y {
            let dy = match &x {
                Some(_) => scaled(grad.clone(), beta, &y_shape),
                None => {
                    grads.register::<B>(y.id, scaled(grad, beta, &y_shape));
                    return;
                }
            };
            grads.register::<B>(y.id, dy);
        }
        if let Some(x) = x {
            grads.register::<B>(x.id, scaled(grad, alpha, &x_shape));
        }
    }
}

impl<B: RoutedOps + BackwardKernels, C: CheckpointStrategy> RoutedOpsAutodiff for Autodiff<B, C> {
    fn axpby(
        x: FloatTensor<Self>,
        y: Option<FloatTensor<Self>>,
        alpha: f32,
        beta: f32,
    ) -> FloatTensor<Self> {
        // Without `y` the op is `scale`, backward included.
        let Some(y) = y else {
            return Self::scale(x, alpha);
        };
        let (x_shape, y_shape) = (x.shape(), y.shape());
        let (x, x_node) = x.into_parts();
        let (y, y_node) = y.into_parts();
        match AxpbyBackward
            .prepare::<C>([x_node, y_node])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(
                (alpha, beta, x_shape, y_shape),
                B::axpby(x, Some(y), alpha, beta),
            ),
            OpsKind::UnTracked(prep) => prep.finish(B::axpby(x, Some(y), alpha, beta)),
        }
    }

    fn add_relu(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        let (lhs_shape, rhs_shape) = (lhs.shape(), rhs.shape());
        let (lhs, lhs_node) = lhs.into_parts();
        let (rhs, rhs_node) = rhs.into_parts();
        match AddReluBackward
            .prepare::<C>([lhs_node, rhs_node])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let output = B::add_relu(lhs, rhs);
                prep.finish((output.clone(), lhs_shape, rhs_shape), output)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::add_relu(lhs, rhs)),
        }
    }

    fn bias_gelu(x: FloatTensor<Self>, bias: FloatTensor<Self>) -> FloatTensor<Self> {
        let (x, x_node) = x.into_parts();
        let (bias, bias_node) = bias.into_parts();
        match BiasGeluBackward
            .prepare::<C>([x_node, bias_node])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((x.clone(), bias.clone()), B::bias_gelu(x, bias)),
            OpsKind::UnTracked(prep) => prep.finish(B::bias_gelu(x, bias)),
        }
    }

    fn swiglu(gate: FloatTensor<Self>, up: FloatTensor<Self>) -> FloatTensor<Self> {
        let (gate, gate_node) = gate.into_parts();
        let (up, up_node) = up.into_parts();
        match SwigluBackward
            .prepare::<C>([gate_node, up_node])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((gate.clone(), up.clone()), B::swiglu(gate, up)),
            OpsKind::UnTracked(prep) => prep.finish(B::swiglu(gate, up)),
        }
    }

    fn rms_norm(x: FloatTensor<Self>, weight: FloatTensor<Self>, eps: f32) -> FloatTensor<Self> {
        let (x, x_node) = x.into_parts();
        let (weight, weight_node) = weight.into_parts();
        match RmsNormBackward
            .prepare::<C>([x_node, weight_node])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(
                (x.clone(), weight.clone(), eps),
                B::rms_norm(x, weight, eps),
            ),
            OpsKind::UnTracked(prep) => prep.finish(B::rms_norm(x, weight, eps)),
        }
    }

    fn layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        eps: f32,
    ) -> FloatTensor<Self> {
        let (x, x_node) = x.into_parts();
        let (gamma, gamma_node) = gamma.into_parts();
        let (beta, beta_node) = beta.into_parts();
        match LayerNormBackward
            .prepare::<C>([x_node, gamma_node, beta_node])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(
                (x.clone(), gamma.clone(), eps, beta.shape()),
                <B as RoutedOps>::layer_norm(x, gamma, beta, eps),
            ),
            OpsKind::UnTracked(prep) => {
                prep.finish(<B as RoutedOps>::layer_norm(x, gamma, beta, eps))
            }
        }
    }

    fn softmax_last(x: FloatTensor<Self>) -> FloatTensor<Self> {
        let (x, node) = x.into_parts();
        match SoftmaxBackward
            .prepare::<C>([node])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let output = B::softmax_last(x);
                prep.finish(output.clone(), output)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::softmax_last(x)),
        }
    }

    fn cross_entropy_logits(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        let (logits, node) = logits.into_parts();
        match CrossEntropyBackward
            .prepare::<C>([node])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(
                (logits.clone(), targets.clone()),
                B::cross_entropy_logits(logits, targets),
            ),
            OpsKind::UnTracked(prep) => prep.finish(B::cross_entropy_logits(logits, targets)),
        }
    }

    fn dropout(x: FloatTensor<Self>, p: f32, seed: u64) -> (FloatTensor<Self>, BoolTensor<Self>) {
        let (x, node) = x.into_parts();
        let scale = super::composed::dropout_scale(p);
        let (out, mask) = B::dropout(x, p, seed);
        let out = match DropoutBackward
            .prepare::<C>([node])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((mask.clone(), scale), out),
            OpsKind::UnTracked(prep) => prep.finish(out),
        };
        (out, mask)
    }

    fn clamp_ste(x: FloatTensor<Self>, lo: f32, hi: f32) -> FloatTensor<Self> {
        let (x, node) = x.into_parts();
        match StraightThroughBackward
            .prepare::<C>([node])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((), B::clamp_ste(x, lo, hi)),
            OpsKind::UnTracked(prep) => prep.finish(B::clamp_ste(x, lo, hi)),
        }
    }

    fn scale(x: FloatTensor<Self>, alpha: f32) -> FloatTensor<Self> {
        let (x, node) = x.into_parts();
        match ScaleBackward
            .prepare::<C>([node])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(alpha, B::scale(x, alpha)),
            OpsKind::UnTracked(prep) => prep.finish(B::scale(x, alpha)),
        }
    }
}

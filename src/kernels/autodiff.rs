//! `Autodiff<B, C>` kernels: forward on the inner backend `B`, plus a backward pass.

use burn_autodiff::Autodiff;
use burn_autodiff::checkpoint::base::Checkpointer;
use burn_autodiff::checkpoint::strategy::CheckpointStrategy;
use burn_autodiff::grads::Gradients;
use burn_autodiff::ops::{Backward, Ops, OpsKind, binary, broadcast_shape, unary};
use burn_backend::tensor::FloatTensor;
use burn_backend::{Backend, Scalar, Shape, TensorMetadata};

use crate::ops::{RoutedOps, RoutedOpsAutodiff};

/// Backward of `relu(lhs + rhs)`: the incoming gradient where the output is positive, zero
/// elsewhere, summed back over any broadcast dimension of each input.
#[derive(Debug)]
struct AddReluBackward;

impl<B: Backend> Backward<B, 2> for AddReluBackward {
    /// The forward output and the two input shapes.
    type State = (FloatTensor<B>, Shape, Shape);

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let (output, lhs_shape, rhs_shape) = ops.state;
        let grad_out = |grad| B::relu_backward(output.clone(), grad);
        binary::<B, _, _>(
            ops.parents,
            ops.node,
            grads,
            |grad| broadcast_shape::<B>(grad_out(grad), &lhs_shape),
            |grad| broadcast_shape::<B>(grad_out(grad), &rhs_shape),
        );
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
        let (alpha, beta, x_shape, y_shape) = ops.state;
        binary::<B, _, _>(
            ops.parents,
            ops.node,
            grads,
            |grad| broadcast_shape::<B>(B::float_mul_scalar(grad, Scalar::from(alpha)), &x_shape),
            |grad| broadcast_shape::<B>(B::float_mul_scalar(grad, Scalar::from(beta)), &y_shape),
        );
    }
}

impl<B: RoutedOps, C: CheckpointStrategy> RoutedOpsAutodiff for Autodiff<B, C> {
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

//! The same `identity` op declared with Burn's `#[backend_extension]` proc-macro, and the
//! `Tensor<D>` wrapper Burn's documentation asks extension authors to write.
//!
//! The macro's expansion names `burn::backend::...`, so this crate depends on the `burn` facade
//! crate (feature `extension`) rather than only on `burn-tensor`.

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, Dispatch, Flex, backend_extension};
use burn::tensor::Tensor;

/// `identity`, routed by Burn's proc-macro.
#[backend_extension(Flex, Autodiff: cfg(feature = "autodiff"))]
pub trait BurnOps: Backend {
    /// Returns `x` unchanged.
    fn identity(x: FloatTensor<Self>) -> FloatTensor<Self>;
}

impl BurnOps for Flex {
    fn identity(x: FloatTensor<Self>) -> FloatTensor<Self> {
        x
    }
}

#[cfg(feature = "autodiff")]
impl<B: BurnOps, C: burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy> BurnOps
    for burn::backend::Autodiff<B, C>
{
    fn identity(x: FloatTensor<Self>) -> FloatTensor<Self> {
        use burn::backend::autodiff::ops::Backward;

        let (x, node) = x.into_parts();
        crate::backward::IdentityBackward
            .prepare::<C>([node])
            .compute_bound()
            .stateless(B::identity(x))
    }
}

/// `identity` at the `Tensor<D>` level, through Burn's route: the wrapper Burn's documentation
/// describes (`Tensor::into_dispatch`, the generated `Dispatch` impl, `Tensor::from_dispatch`).
#[must_use]
pub fn identity<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    Tensor::from_dispatch(<Dispatch as BurnOps>::identity(x.into_dispatch()))
}

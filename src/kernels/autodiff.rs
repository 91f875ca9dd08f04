//! The hand-written `Autodiff<B, C>` kernels: the ops over declared types, whose backward
//! passes the manifest cannot declare (yet). Each runs its composition on `Autodiff<B, C>`
//! itself, so Burn's own backward passes of the primitives it is made of give the gradients,
//! through the declared types' tensor fields in both directions.

use burn_autodiff::Autodiff;
use burn_autodiff::checkpoint::strategy::CheckpointStrategy;
use burn_backend::Backend;
use burn_backend::tensor::{BoolTensor, FloatTensor};

use super::composed;
use crate::ops::{AffinePrimitive, FillPrimitive, MomentsPrimitive, RoutedOpsAutodiff};

impl<B: Backend, C: CheckpointStrategy> RoutedOpsAutodiff for Autodiff<B, C> {
    fn affine(x: FloatTensor<Self>, p: AffinePrimitive<Self>) -> FloatTensor<Self> {
        composed::affine::<Self>(x, p)
    }

    fn moments(x: FloatTensor<Self>) -> MomentsPrimitive<Self> {
        composed::moments::<Self>(x)
    }

    fn fill_where(
        x: FloatTensor<Self>,
        mask: &BoolTensor<Self>,
        fill: FillPrimitive<Self>,
    ) -> FloatTensor<Self> {
        composed::fill_where::<Self>(x, mask, fill)
    }
}

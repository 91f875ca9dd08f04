//! Conversions between `Tensor<D, K>` containers and their dispatch tensors, for the generated
//! `Tensor`-level functions (so they call one function per input instead of a method chain).

use burn_dispatch::DispatchTensor;
use burn_tensor::Tensor;
use burn_tensor::kind::Basic;

/// `Vec<Tensor>` into dispatch tensors.
#[inline]
pub fn into_dispatch_vec<const D: usize, K: Basic>(
    tensors: Vec<Tensor<D, K>>,
) -> Vec<DispatchTensor> {
    tensors.into_iter().map(Tensor::into_dispatch).collect()
}

/// `Option<Tensor>` into a dispatch tensor.
#[inline]
pub fn into_dispatch_opt<const D: usize, K: Basic>(
    tensor: Option<Tensor<D, K>>,
) -> Option<DispatchTensor> {
    tensor.map(Tensor::into_dispatch)
}

/// `Option<&Tensor>` into an owned dispatch tensor (a clone, as the borrowed single tensor is).
#[inline]
pub fn into_dispatch_ref_opt<const D: usize, K: Basic>(
    tensor: Option<&Tensor<D, K>>,
) -> Option<DispatchTensor> {
    tensor.map(|t| t.clone().into_dispatch())
}

/// Dispatch tensors back into `Vec<Tensor>`.
#[inline]
pub fn from_dispatch_vec<const D: usize, K: Basic>(
    tensors: Vec<DispatchTensor>,
) -> Vec<Tensor<D, K>> {
    tensors.into_iter().map(Tensor::from_dispatch).collect()
}

/// An optional dispatch tensor back into `Option<Tensor>`.
#[inline]
pub fn from_dispatch_opt<const D: usize, K: Basic>(
    tensor: Option<DispatchTensor>,
) -> Option<Tensor<D, K>> {
    tensor.map(Tensor::from_dispatch)
}

//! Half precision through `f32` kernels: inputs that are all `f16` or all `bf16` are widened
//! to `f32`, the kernel runs as on `f32`, and its output is rounded once back. Shared by the
//! Flex kernels ([`super::flex`]) and the chunked linear cross-entropy ([`super::linear_ce`]).

use burn_backend::backend::ops::FloatTensorOps;
use burn_backend::{DType, FloatDType};
use burn_dispatch::backends::Flex;
use burn_dispatch::backends::flex::FlexTensor;

/// The half-precision dtype (`f16` or `bf16`) that every one of `inputs` has, if they share
/// one.
pub(crate) fn half_dtype(inputs: &[&FlexTensor]) -> Option<FloatDType> {
    let dtype = match inputs.first()?.dtype() {
        DType::F16 => FloatDType::F16,
        DType::BF16 => FloatDType::BF16,
        _ => return None,
    };
    inputs
        .iter()
        .all(|t| t.dtype() == DType::from(dtype))
        .then_some(dtype)
}

/// `t` (any float dtype) in `f32`.
pub(crate) fn widen(t: FlexTensor) -> FlexTensor {
    Flex::float_cast(t, FloatDType::F32)
}

/// A kernel's `f32` output rounded once to `dtype`.
pub(crate) fn narrow(t: FlexTensor, dtype: FloatDType) -> FlexTensor {
    Flex::float_cast(t, dtype)
}

/// `kernel` on half-precision inputs: when every one of `inputs` is `f16`, or every one
/// `bf16`, they are widened to `f32` (one pass each), `kernel` runs on them as on `f32`
/// tensors (its arithmetic and reductions in `f32`), and its float output is rounded once back
/// to their dtype, the dtype the composition gives. Gives the inputs back otherwise.
///
/// The two conversions are passes of their own over memory: the arithmetic is `f32`, the
/// traffic that of an `f32` kernel plus the conversions (BENCHMARKS.md measures it against the
/// composition in the same dtype).
pub(crate) fn in_f32<const K: usize>(
    inputs: [FlexTensor; K],
    kernel: impl FnOnce([FlexTensor; K]) -> FlexTensor,
) -> Result<FlexTensor, [FlexTensor; K]> {
    match half_dtype(&inputs.each_ref()) {
        Some(dtype) => Ok(narrow(kernel(inputs.map(widen)), dtype)),
        None => Err(inputs),
    }
}

/// [`in_f32`] for a gradient kernel: every gradient it returns rounded once to the inputs'
/// dtype.
pub(crate) fn grads_in_f32<const K: usize, const M: usize>(
    inputs: [FlexTensor; K],
    kernel: impl FnOnce([FlexTensor; K]) -> [Option<FlexTensor>; M],
) -> Result<[Option<FlexTensor>; M], [FlexTensor; K]> {
    match half_dtype(&inputs.each_ref()) {
        Some(dtype) => Ok(kernel(inputs.map(widen)).map(|g| g.map(|g| narrow(g, dtype)))),
        None => Err(inputs),
    }
}

//! Shape contracts: how an input's shape must relate to another input's, declared per input in
//! the manifest (`shape = { same_as = "gate" }`) and checked by the generated routing before any
//! kernel runs.

use burn_backend::TensorMetadata;
use burn_dispatch::DispatchTensor;

use super::ShapeRule;
use super::error::RouteError;
use super::op::{InputName, OpInfo};
use super::route::describe;

/// One input's shape contract at a call: the rule, where the manifest declares it, and the two
/// inputs (`None` for an absent `Option`).
#[derive(Clone, Copy, Debug)]
pub struct ShapeCheck<'a> {
    rule: ShapeRule,
    location: &'static str,
    input: (&'static str, Option<&'a DispatchTensor>),
    reference: (&'static str, Option<&'a DispatchTensor>),
}

impl<'a> ShapeCheck<'a> {
    /// `input` against `reference` under `rule`, declared at `location` (`manifest:LINE`).
    #[inline]
    pub fn new(
        rule: ShapeRule,
        location: &'static str,
        input: (&'static str, Option<&'a DispatchTensor>),
        reference: (&'static str, Option<&'a DispatchTensor>),
    ) -> Self {
        Self {
            rule,
            location,
            input,
            reference,
        }
    }

    /// The check. An absent input on either side meets every contract.
    fn run(self, op: &'static OpInfo) -> Result<(), RouteError> {
        let ((input, Some(tensor)), (reference, Some(reference_tensor))) =
            (self.input, self.reference)
        else {
            return Ok(());
        };
        let shape = tensor.shape();
        let reference_shape = reference_tensor.shape();
        let (shape, reference_shape) = (shape.as_slice(), reference_shape.as_slice());
        if self.rule.holds(shape, reference_shape) {
            return Ok(());
        }
        Err(RouteError::ShapeContract {
            op: op.name,
            input: InputName::new(input),
            shape: shape.into(),
            rule: self.rule,
            reference,
            reference_shape: reference_shape.into(),
            backend: describe(&tensor.kind).backend,
            location: self.location,
        })
    }
}

/// Runs an op's shape-contract checks in manifest order.
///
/// # Errors
///
/// [`RouteError::ShapeContract`] for the first contract that fails, naming the op, the input,
/// both shapes and the contract's manifest line.
#[inline]
pub fn check_shapes<const N: usize>(
    op: &'static OpInfo,
    checks: [ShapeCheck<'_>; N],
) -> Result<(), RouteError> {
    checks.into_iter().try_for_each(|check| check.run(op))
}

#[cfg(test)]
mod tests {
    /// clippy's `result_large_err` flags `Result<_, E>` with an `E` over 128 bytes, in every
    /// generated `try_` function of a downstream crate.
    #[test]
    fn route_errors_stay_small() {
        assert!(size_of::<super::RouteError>() <= 128);
    }
}

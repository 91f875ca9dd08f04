//! Shape contracts: how an input's shape must relate to another input's, declared per input in
//! the manifest (`shape = { same_as = "gate" }`) and checked by the generated routing before any
//! kernel runs.

use core::fmt;

use burn_backend::TensorMetadata;
use burn_dispatch::DispatchTensor;

use super::error::RouteError;
use super::op::{InputName, OpInfo};
use super::route::describe;

/// One kind of shape contract, as the manifest's `shape` table names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShapeRule {
    /// `same_as`: exactly the other input's shape.
    SameAs,
    /// `broadcast_to`: the other input's rank, each dimension equal to the other's or 1.
    BroadcastTo,
    /// `broadcast_with`: the other input's rank, each pair of dimensions equal or one of them 1
    /// (Burn's broadcasting for binary ops).
    BroadcastWith,
    /// `last_dim_of`: one dimension, the size of the other input's last dimension (a
    /// per-feature parameter).
    LastDimOf,
    /// `leading_dims_of`: the other input's shape without its last dimension (one entry per
    /// row, such as class targets).
    LeadingDimsOf,
}

impl ShapeRule {
    /// The manifest key that declares the rule.
    pub fn key(self) -> &'static str {
        match self {
            Self::SameAs => "same_as",
            Self::BroadcastTo => "broadcast_to",
            Self::BroadcastWith => "broadcast_with",
            Self::LastDimOf => "last_dim_of",
            Self::LeadingDimsOf => "leading_dims_of",
        }
    }

    /// Whether `shape` meets the rule against `reference`.
    pub fn holds(self, shape: &[usize], reference: &[usize]) -> bool {
        let same_rank = shape.len() == reference.len();
        match self {
            Self::SameAs => shape == reference,
            Self::BroadcastTo => {
                same_rank && shape.iter().zip(reference).all(|(&d, &r)| d == r || d == 1)
            }
            Self::BroadcastWith => {
                same_rank
                    && shape
                        .iter()
                        .zip(reference)
                        .all(|(&d, &r)| d == r || d == 1 || r == 1)
            }
            Self::LastDimOf => reference.last().is_some_and(|&last| shape == [last]),
            Self::LeadingDimsOf => reference
                .split_last()
                .is_some_and(|(_, leading)| shape == leading),
        }
    }

    /// The shape the rule expects, when it is one shape.
    fn expected(self, reference: &[usize]) -> Option<Vec<usize>> {
        match self {
            Self::SameAs => Some(reference.to_vec()),
            Self::LastDimOf => reference.last().map(|&last| vec![last]),
            Self::LeadingDimsOf => reference.split_last().map(|(_, leading)| leading.to_vec()),
            Self::BroadcastTo | Self::BroadcastWith => None,
        }
    }
}

impl fmt::Display for ShapeRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// A shape as Burn prints dimensions: `[2, 4]`.
pub(crate) struct Dims<'a>(pub &'a [usize]);

impl fmt::Display for Dims<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// What the rule asks of `input`, in words: the expected shape and where it comes from.
pub(crate) fn describe_rule(rule: ShapeRule, reference: &str, reference_shape: &[usize]) -> String {
    let of = Dims(reference_shape);
    match (rule, rule.expected(reference_shape)) {
        (ShapeRule::SameAs, Some(expected)) => {
            format!("{}, the shape of `{reference}`", Dims(&expected))
        }
        (ShapeRule::LastDimOf, Some(expected)) => format!(
            "{}, the last dimension of `{reference}` (shape {of})",
            Dims(&expected)
        ),
        (ShapeRule::LeadingDimsOf, Some(expected)) => format!(
            "{}, the shape of `{reference}` ({of}) without its last dimension",
            Dims(&expected)
        ),
        (ShapeRule::BroadcastTo, _) => format!(
            "a shape that broadcasts to `{reference}`'s {of}: rank {}, each dimension equal to \
             `{reference}`'s or 1",
            reference_shape.len()
        ),
        (ShapeRule::BroadcastWith, _) => format!(
            "a shape that broadcasts with `{reference}`'s {of}: rank {}, each dimension equal to \
             `{reference}`'s, or 1 on either side",
            reference_shape.len()
        ),
        // A rule with one expected shape whose reference has no dimension (a scalar).
        (_, _) => format!(
            "a shape related by `{}` to `{reference}`'s {of}, which has no last dimension",
            rule.key()
        ),
    }
}

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
    use super::ShapeRule::*;

    /// clippy's `result_large_err` flags `Result<_, E>` with an `E` over 128 bytes, in every
    /// generated `try_` function of a downstream crate.
    #[test]
    fn route_errors_stay_small() {
        assert!(size_of::<super::RouteError>() <= 128);
    }

    #[test]
    fn rules_accept_exactly_their_shapes() {
        assert!(SameAs.holds(&[2, 4], &[2, 4]));
        assert!(!SameAs.holds(&[1, 4], &[2, 4]));
        assert!(BroadcastTo.holds(&[1, 4], &[2, 4]));
        assert!(!BroadcastTo.holds(&[2, 4], &[1, 4]));
        assert!(!BroadcastTo.holds(&[4], &[2, 4]));
        assert!(BroadcastWith.holds(&[2, 1], &[1, 4]));
        assert!(!BroadcastWith.holds(&[2, 3], &[2, 4]));
        assert!(LastDimOf.holds(&[4], &[2, 3, 4]));
        assert!(!LastDimOf.holds(&[1], &[2, 4]));
        assert!(!LastDimOf.holds(&[4], &[]));
        assert!(LeadingDimsOf.holds(&[2, 3], &[2, 3, 4]));
        assert!(!LeadingDimsOf.holds(&[3], &[2, 4]));
    }
}

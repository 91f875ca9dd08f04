//! How messages write shapes and shape contracts: `[2, 4]`, and what a rule asks of an input
//! in words. A leaf: the errors and the shape checks both use it.

use core::fmt;

use super::ShapeRule;

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
    // Core's rule gives the one shape it expects, where it fixes one.
    match (rule, rule.implied(reference_shape)) {
        (ShapeRule::SameAs, Some(expected)) => {
            format!("{}, the shape of `{reference}`", Dims(expected))
        }
        (ShapeRule::LastDimOf, Some(expected)) => format!(
            "{}, the last dimension of `{reference}` (shape {of})",
            Dims(expected)
        ),
        (ShapeRule::LeadingDimsOf, Some(expected)) => format!(
            "{}, the shape of `{reference}` ({of}) without its last dimension",
            Dims(expected)
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

//! Output metadata functions named in `ops.toml` (`shape = "crate::kernels::meta::..."`): the
//! shapes of outputs that are not an input's, computed from the input specs before any kernel
//! runs. The lazy `Fusion<B>` implementation declares its outputs with them, and in debug builds
//! checks the kernel against them.

use crate::rt::{Shape, TensorSpec};

/// The shape of `lhs` and `rhs` broadcast together (same rank; each pair of dimensions equal or
/// one of them 1), as the shape contract `broadcast_with` guarantees.
pub fn broadcast(lhs: &TensorSpec, rhs: &TensorSpec) -> Shape {
    let dims: Vec<usize> = lhs
        .shape
        .iter()
        .zip(rhs.shape.iter())
        .map(|(&a, &b)| if a == 1 { b } else { a })
        .collect();
    Shape::from(dims)
}

/// `[1]`: a loss reduced to one element.
pub fn one_element(_logits: &TensorSpec, _targets: &TensorSpec) -> Shape {
    Shape::new([1])
}

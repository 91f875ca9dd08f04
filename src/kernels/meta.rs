//! Output metadata functions named in `ops.toml` (`shape = "crate::kernels::meta::..."`): the
//! shapes of outputs that are not an input's, computed from the input specs before any kernel
//! runs. The lazy `Fusion<B>` implementation declares its outputs with them, and in debug builds
//! checks the kernel against them.

use crate::rt::{Shape, TensorSpec};

/// `input`'s shape with `weight`'s columns as its last dimension: a projection's output.
fn projected(input: &TensorSpec, weight: &TensorSpec) -> Shape {
    let mut shape = input.shape.clone();
    if let (Some(last), Some(&outputs)) = (shape.last_mut(), weight.shape.get(1)) {
        *last = outputs;
    }
    shape
}

/// `rms_norm_linear`'s output: `x`'s shape, `weight`'s columns last.
pub fn rms_norm_linear(
    x: &TensorSpec,
    _norm_weight: &TensorSpec,
    weight: &TensorSpec,
    _bias: Option<&TensorSpec>,
    _eps: &f32,
) -> Shape {
    projected(x, weight)
}

/// `layer_norm_linear`'s output: `x`'s shape, `weight`'s columns last.
pub fn layer_norm_linear(
    x: &TensorSpec,
    _gamma: &TensorSpec,
    _beta: &TensorSpec,
    weight: &TensorSpec,
    _bias: Option<&TensorSpec>,
    _eps: &f32,
) -> Shape {
    projected(x, weight)
}

/// `swiglu_linear`'s output: `gate`'s shape, `weight`'s columns last.
pub fn swiglu_linear(
    gate: &TensorSpec,
    _up: &TensorSpec,
    weight: &TensorSpec,
    _bias: Option<&TensorSpec>,
) -> Shape {
    projected(gate, weight)
}

/// `rms_norm_swiglu_mlp`'s output: `x`'s shape, `down_weight`'s columns last.
pub fn rms_norm_swiglu_mlp(
    x: &TensorSpec,
    _norm_weight: &TensorSpec,
    _gate_weight: &TensorSpec,
    _up_weight: &TensorSpec,
    down_weight: &TensorSpec,
    _eps: &f32,
) -> Shape {
    projected(x, down_weight)
}

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

//! What an op declares about its outputs without computing them: shapes and dtypes.

use core::fmt;

use burn_backend::{DType, Shape};

/// The shape and dtype of a tensor, without its data.
///
/// The output metadata functions an `ops.toml` names (`shape = "path::to::fn"`) take the specs
/// of the op's tensor inputs, and the lazy `Fusion` implementation of the op declares its outputs
/// with them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// The dimensions.
    pub shape: Shape,
    /// The element type.
    pub dtype: DType,
}

impl TensorSpec {
    /// A spec of `shape` and `dtype`.
    pub fn new(shape: Shape, dtype: DType) -> Self {
        Self { shape, dtype }
    }
}

impl fmt::Display for TensorSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "shape {:?} and dtype {:?}",
            self.shape.as_slice(),
            self.dtype
        )
    }
}

/// An output of an op as the manifest spells it: `output`, `output[1]`, `output[0][2]`, and for
/// an element of a `vec` output, which one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputName {
    path: &'static str,
    element: Option<usize>,
}

impl OutputName {
    /// The output at `path` in the manifest (`output`, `output[1]`, ...).
    pub const fn new(path: &'static str) -> Self {
        Self {
            path,
            element: None,
        }
    }

    /// Element `index` of this (`vec`) output.
    #[must_use]
    pub const fn element(self, index: usize) -> Self {
        Self {
            path: self.path,
            element: Some(index),
        }
    }
}

impl fmt::Display for OutputName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.element {
            None => f.write_str(self.path),
            Some(index) => write!(f, "{} (element {index})", self.path),
        }
    }
}

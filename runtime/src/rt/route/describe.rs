//! What a dispatch tensor is, as routing and its errors see it: its backend, whether it is
//! wrapped in `Autodiff` (or twice), and its primitive kind. Read on every call, so the common
//! levels inline and the unnamed kinds are cold.

use burn_backend::{Backend, TensorMetadata};
use burn_dispatch::{BackendTensor, DispatchAutodiffContext, DispatchTensorKind};

use super::super::device::describe_device;
use super::super::op::BackendId;

/// What a dispatch tensor holds, as far as routing cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Primitive {
    Float,
    Int,
    Bool,
    Quantized,
    /// A float with an autodiff node; `tracked` when it requires grad or depends on one that does.
    /// (Only built when autodiff is compiled in.)
    #[cfg_attr(not(feature = "autodiff"), allow(dead_code))]
    Autodiff {
        tracked: bool,
    },
    /// A kind this build cannot look into.
    Unknown,
}

impl Primitive {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Float => "Float",
            Self::Int => "Int",
            Self::Bool => "Bool",
            Self::Quantized => "Quantized",
            Self::Autodiff { .. } => "Autodiff",
            Self::Unknown => "unknown",
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Described {
    pub(crate) backend: BackendId,
    /// Wrapped in `DispatchTensorKind::Autodiff`.
    pub(crate) wrapped: bool,
    /// `Autodiff` nested inside `Autodiff`.
    pub(crate) nested: bool,
    pub(crate) primitive: Primitive,
}

// Which `BackendTensor` and `DispatchTensorKind` variants exist depends on the features Burn is
// built with across the whole dependency graph, not only on ours; the wildcard arms cover the
// ones this build does not route and are unreachable in builds without them.
#[allow(unreachable_patterns)]
#[inline]
fn primitive_of<B: Backend>(tensor: &BackendTensor<B>) -> Primitive {
    match tensor {
        BackendTensor::Float(_) => Primitive::Float,
        BackendTensor::Int(_) => Primitive::Int,
        BackendTensor::Bool(_) => Primitive::Bool,
        BackendTensor::Quantized(_) => Primitive::Quantized,
        #[cfg(feature = "autodiff")]
        BackendTensor::Autodiff(t) => Primitive::Autodiff {
            tracked: t.is_tracked(),
        },
        _ => Primitive::Unknown,
    }
}

#[inline]
fn concrete(backend: BackendId, primitive: Primitive) -> Described {
    Described {
        backend,
        wrapped: false,
        nested: false,
        primitive,
    }
}

#[inline]
pub(crate) fn describe(kind: &DispatchTensorKind) -> Described {
    // A loop rather than recursion, so that it inlines. Without the `autodiff` feature a wrapper
    // (which Burn's feature unification may still compile in) is not looked into: it reads as an
    // unknown backend, as before.
    #[cfg_attr(not(feature = "autodiff"), allow(unused_mut))]
    let mut level = kind;
    #[cfg_attr(not(feature = "autodiff"), allow(unused_mut))]
    let mut wrappers = 0;
    #[cfg(feature = "autodiff")]
    while let DispatchTensorKind::Autodiff(inner) = level {
        level = inner;
        wrappers += 1;
    }
    Described {
        wrapped: wrappers > 0,
        nested: wrappers > 1,
        ..describe_level(level)
    }
}

/// One level of `describe`: an `Autodiff` wrapper is reported as wrapped, without looking in.
#[allow(unreachable_patterns)]
#[inline]
pub(super) fn describe_level(kind: &DispatchTensorKind) -> Described {
    match kind {
        DispatchTensorKind::Flex(t) => concrete(BackendId::Flex, primitive_of(t)),
        #[cfg(any(feature = "wgpu", feature = "cuda"))]
        DispatchTensorKind::Cube(t) => concrete(BackendId::Cube, primitive_of(t)),
        #[cfg(feature = "remote")]
        DispatchTensorKind::Remote(t) => concrete(BackendId::Remote, primitive_of(t)),
        #[cfg(feature = "autodiff")]
        DispatchTensorKind::Autodiff(_) => Described {
            wrapped: true,
            ..concrete(BackendId::Other, Primitive::Unknown)
        },
        _ => describe_unnamed(kind),
    }
}

/// A tensor kind this build cannot name: a backend burn-route was built without, or (without
/// the `autodiff` feature) an `Autodiff` wrapper that Burn's feature unification compiled in.
/// The wrapper is recognised from its device, so that the error names the backend underneath
/// and the missing feature rather than an unsupported backend.
#[cold]
#[inline(never)]
fn describe_unnamed(kind: &DispatchTensorKind) -> Described {
    let (backend, context) = describe_device(&kind.device());
    Described {
        wrapped: context != DispatchAutodiffContext::Disabled,
        ..concrete(backend, Primitive::Unknown)
    }
}

//! Route planning: which backend and which implementation (concrete or `Autodiff<B, C>`) an op
//! call goes to, decided once from all tensor inputs before any of them is consumed.

use core::fmt;

use burn_backend::Backend;
use burn_dispatch::{BackendTensor, DispatchAutodiffContext, DispatchTensor, DispatchTensorKind};

use super::Checkpointing;
use super::error::{Malformed, RouteError};

/// A backend selector, as the manifest names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendId {
    /// Burn's pure-Rust CPU backend.
    Flex,
    /// The cubecl backend.
    Cube,
    /// Burn's remote backend.
    Remote,
    /// A backend this build of `burn-route` does not route to.
    Other,
}

impl fmt::Display for BackendId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Flex => "Flex",
            Self::Cube => "Cube",
            Self::Remote => "Remote",
            Self::Other => "an unsupported backend",
        })
    }
}

/// An op's autodiff policy, as declared in the manifest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Tracked floats route to the `Autodiff<B, C>` kernel.
    Differentiable,
    /// Tracked floats are detached; the op runs concretely.
    Detach,
    /// A tracked float input is an error.
    Reject,
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Differentiable => "differentiable",
            Self::Detach => "detach",
            Self::Reject => "reject",
        })
    }
}

/// Static facts about a routed op, for planning and for error messages.
#[derive(Debug)]
pub struct OpInfo {
    /// The op's name.
    pub name: &'static str,
    /// Its autodiff policy.
    pub policy: Policy,
    /// `manifest:LINE` of the line that declares the policy.
    pub location: &'static str,
}

impl OpInfo {
    /// Creates the facts for one op.
    pub const fn new(name: &'static str, policy: Policy, location: &'static str) -> Self {
        Self {
            name,
            policy,
            location,
        }
    }
}

/// The tensor kind an input is declared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorKind {
    /// Floating point.
    Float,
    /// Integer.
    Int,
    /// Boolean.
    Bool,
}

impl fmt::Display for TensorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Float => "float",
            Self::Int => "int",
            Self::Bool => "bool",
        })
    }
}

/// One tensor input of an op call, seen by the planner.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    name: &'static str,
    kind: TensorKind,
    tensor: &'a DispatchTensor,
}

impl<'a> Input<'a> {
    /// A float input.
    pub fn float(name: &'static str, tensor: &'a DispatchTensor) -> Self {
        Self {
            name,
            kind: TensorKind::Float,
            tensor,
        }
    }
    /// An int input.
    pub fn int(name: &'static str, tensor: &'a DispatchTensor) -> Self {
        Self {
            name,
            kind: TensorKind::Int,
            tensor,
        }
    }
    /// A bool input.
    pub fn bool(name: &'static str, tensor: &'a DispatchTensor) -> Self {
        Self {
            name,
            kind: TensorKind::Bool,
            tensor,
        }
    }
}

/// Which implementation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The concrete backend's kernel.
    Concrete,
    /// The `Autodiff<B, C>` kernel, with `C` given by the checkpointing strategy.
    Autodiff(Checkpointing),
}

/// A planned op call: the op, its backend, the implementation, and the autodiff context the
/// outputs are wrapped in.
#[derive(Debug)]
pub struct Route {
    op: &'static OpInfo,
    backend: BackendId,
    mode: Mode,
    context: DispatchAutodiffContext,
}

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

// Which `BackendTensor` variants and `DispatchTensorKind` variants exist depends on the features
// Burn is built with across the whole dependency graph, not only on ours; the wildcard arms cover
// the ones this build does not route and are unreachable in builds without them.
#[allow(unreachable_patterns)]
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

#[allow(unreachable_patterns)]
pub(crate) fn describe(kind: &DispatchTensorKind) -> Described {
    match kind {
        DispatchTensorKind::Flex(t) => Described {
            backend: BackendId::Flex,
            wrapped: false,
            nested: false,
            primitive: primitive_of(t),
        },
        #[cfg(feature = "autodiff")]
        DispatchTensorKind::Autodiff(inner) => {
            let inner = describe(inner);
            Described {
                wrapped: true,
                nested: inner.wrapped,
                ..inner
            }
        }
        _ => Described {
            backend: BackendId::Other,
            wrapped: false,
            nested: false,
            primitive: Primitive::Unknown,
        },
    }
}

impl Route {
    /// Plans a call from its tensor inputs (at least one).
    ///
    /// The routing tensor is the first float input, else the first tensor input: it picks the
    /// backend, and every other input must be on the same one. The inputs' autodiff contexts are
    /// merged (a disabled context is a constant next to an enabled one; two enabled contexts
    /// must agree on the checkpointing strategy). Then the op's policy decides:
    /// `differentiable` runs the `Autodiff<B, C>` kernel under an enabled context; `detach` and
    /// `reject` run the concrete kernel, `reject` only if no float input is tracked.
    ///
    /// # Errors
    ///
    /// The first contract violation found, as a [`RouteError`].
    pub fn plan(op: &'static OpInfo, inputs: &[Input<'_>]) -> Result<Self, RouteError> {
        let Some(router) = inputs
            .iter()
            .find(|i| i.kind == TensorKind::Float)
            .or(inputs.first())
        else {
            return Err(RouteError::NoRoutingTensor { op: op.name });
        };
        let routed = describe(&router.tensor.kind);
        let mut context = DispatchAutodiffContext::Disabled;
        let mut context_from: Option<&'static str> = None;
        let mut tracked: Option<&'static str> = None;

        for input in inputs {
            let found = describe(&input.tensor.kind);
            check_input(op, input, found)?;
            if found.backend != routed.backend {
                return Err(RouteError::BackendMismatch {
                    op: op.name,
                    input: input.name,
                    backend: found.backend,
                    routing_input: router.name,
                    routing_backend: routed.backend,
                });
            }
            if let DispatchAutodiffContext::Enabled(strategy) = input.tensor.autodiff {
                match (context, context_from) {
                    (DispatchAutodiffContext::Enabled(first), Some(first_input))
                        if first != strategy =>
                    {
                        return Err(RouteError::CheckpointingMismatch {
                            op: op.name,
                            input: input.name,
                            strategy,
                            first_input,
                            first_strategy: first,
                        });
                    }
                    _ => {
                        if context_from.is_none() {
                            context_from = Some(input.name);
                        }
                        context = DispatchAutodiffContext::Enabled(strategy);
                    }
                }
            }
            if matches!(found.primitive, Primitive::Autodiff { tracked: true }) && tracked.is_none()
            {
                tracked = Some(input.name);
            }
        }

        let mode = match (op.policy, context) {
            (Policy::Reject, _) => {
                if let Some(input) = tracked {
                    return Err(RouteError::TrackedInput {
                        op: op.name,
                        input,
                        backend: routed.backend,
                        location: op.location,
                    });
                }
                Mode::Concrete
            }
            (Policy::Differentiable, DispatchAutodiffContext::Enabled(strategy)) => {
                Mode::Autodiff(strategy)
            }
            _ => Mode::Concrete,
        };
        Ok(Self {
            op,
            backend: routed.backend,
            mode,
            context,
        })
    }

    /// A route for an op without tensor inputs: the manifest lists exactly one backend for it.
    pub fn fixed(op: &'static OpInfo, backend: BackendId) -> Self {
        Self {
            op,
            backend,
            mode: Mode::Concrete,
            context: DispatchAutodiffContext::Disabled,
        }
    }

    /// The backend and the implementation to call.
    pub fn target(&self) -> (BackendId, Mode) {
        (self.backend, self.mode)
    }

    /// The op being routed.
    pub fn op(&self) -> &'static OpInfo {
        self.op
    }

    /// The merged autodiff context that outputs are wrapped in.
    pub fn context(&self) -> DispatchAutodiffContext {
        self.context
    }

    /// The error for a target the generated code has no arm for: a backend the op does not list
    /// (or that is not compiled in), or autodiff routing in a build without autodiff.
    pub fn unserved(&self) -> RouteError {
        match self.mode {
            Mode::Autodiff(_) => RouteError::AutodiffFeatureOff { op: self.op.name },
            Mode::Concrete => RouteError::UnlistedBackend {
                op: self.op.name,
                backend: self.backend,
                location: self.op.location,
            },
        }
    }

    /// The error for an input whose primitive does not fit the planned route. Planning checks
    /// every input first, so generated code reaches this only through a bug.
    pub(crate) fn mismatch(
        &self,
        input: &'static str,
        expected: &'static str,
        found: Described,
    ) -> RouteError {
        RouteError::Malformed {
            op: self.op.name,
            input,
            backend: found.backend,
            problem: Malformed::UnexpectedPrimitive {
                expected,
                found: found.primitive.name(),
            },
        }
    }
}

fn check_input(op: &'static OpInfo, input: &Input<'_>, found: Described) -> Result<(), RouteError> {
    let malformed = |problem| RouteError::Malformed {
        op: op.name,
        input: input.name,
        backend: found.backend,
        problem,
    };
    let enabled = matches!(input.tensor.autodiff, DispatchAutodiffContext::Enabled(_));
    if (enabled || found.wrapped) && !cfg!(feature = "autodiff") {
        return Err(RouteError::AutodiffFeatureOff { op: op.name });
    }
    if found.backend == BackendId::Other {
        return Err(RouteError::UnlistedBackend {
            op: op.name,
            backend: BackendId::Other,
            location: op.location,
        });
    }
    if found.nested {
        return Err(malformed(Malformed::NestedAutodiff));
    }
    match (found.wrapped, found.primitive) {
        (true, Primitive::Autodiff { .. }) if !enabled => {
            return Err(malformed(Malformed::AutodiffWithDisabledContext));
        }
        (true, Primitive::Autodiff { .. }) => {}
        (true, _) => return Err(malformed(Malformed::NonFloatAutodiff)),
        (false, Primitive::Autodiff { .. }) => return Err(malformed(Malformed::UnwrappedAutodiff)),
        (false, Primitive::Float) if enabled => {
            return Err(malformed(Malformed::EnabledFloatNotAutodiff));
        }
        _ => {}
    }
    let kind_fits = match input.kind {
        TensorKind::Float => matches!(
            found.primitive,
            Primitive::Float | Primitive::Autodiff { .. }
        ),
        TensorKind::Int => found.primitive == Primitive::Int,
        TensorKind::Bool => found.primitive == Primitive::Bool,
    };
    if !kind_fits {
        return Err(malformed(Malformed::WrongKind {
            expected: input.kind,
            found: found.primitive.name(),
        }));
    }
    Ok(())
}

//! Route planning: which backend and which implementation (concrete or `Autodiff<B, C>`) an op
//! call goes to, decided once from all tensor inputs before any of them is consumed.

use burn_backend::{DType, TensorMetadata};
use burn_dispatch::{DispatchAutodiffContext, DispatchDevice, DispatchTensor};

use super::Checkpointing;
use super::device::describe_device;
use super::error::{Malformed, RouteError};
use super::op::{BackendId, InputName, OpInfo, OtherDtypes, Policy, TensorKind};

mod describe;
mod inputs;

use describe::describe_level;
pub(crate) use describe::{Described, Primitive, describe};
pub use inputs::{Group, Input};

/// Which implementation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The concrete backend's kernel.
    Concrete,
    /// The `Autodiff<B, C>` kernel, with `C` given by the checkpointing strategy.
    Autodiff(Checkpointing),
    /// The op's composition on the concrete backend, its fallback: the float inputs have one
    /// dtype, which the op's kernels do not take (`dtypes`), and the op declares
    /// `other_dtypes = "composition"`.
    Fallback,
    /// The op's composition on `Autodiff<B, C>` (a `differentiable` op's call under an enabled
    /// autodiff context, with a dtype its kernels do not take): Burn's autodiff differentiates
    /// it.
    AutodiffFallback(Checkpointing),
}

/// A planned op call: the op, its backend, the implementation, and the autodiff context the
/// outputs are wrapped in. Small enough (16 bytes) to travel in registers.
#[derive(Clone, Copy, Debug)]
pub struct Route {
    op: &'static OpInfo,
    backend: BackendId,
    mode: Mode,
    context: DispatchAutodiffContext,
}

impl Route {
    /// The common call, recognised without building any error context: every input is a plain
    /// (unwrapped) primitive of its declared kind, all on one backend the op is routed to, with
    /// autodiff disabled. Its route is the concrete kernel under a disabled context, whatever
    /// the policy. A call whose float inputs have two dtypes never takes it (the planner refuses
    /// it).
    ///
    /// For an op that does not declare the float dtypes its kernels take; an op that declares
    /// them (`dtypes`) never takes this path, but [`Route::fast_dtyped`]. The two are apart so
    /// that this one hands no input to a function out of line: an inlined call then reads the
    /// caller's `DispatchTensor` where it is, instead of a copy.
    ///
    /// Generated code tries this first and calls its kernels straight from the answer. `None`
    /// (also for a call without any tensor input) sends the call to the full planner
    /// ([`Route::plan`], or [`Route::plan_with_device`] and [`Route::plan_by_device`] for the
    /// device variants below), which reaches the same route for every call this accepts and
    /// names the contract violation, if any, of the others.
    #[inline]
    pub fn fast<'a>(
        op: &'static OpInfo,
        inputs: impl IntoIterator<Item = Input<'a>>,
    ) -> Option<Self> {
        if op.dtypes != 0 {
            return None;
        }
        Self::plain(op, inputs)
    }

    /// [`Route::fast`] for an op that declares the float dtypes its kernels take (`dtypes`): the
    /// call also takes this path only when every float input has one of them.
    #[inline]
    pub fn fast_dtyped<'a, I>(op: &'static OpInfo, inputs: I) -> Option<Self>
    where
        I: IntoIterator<Item = Input<'a>>,
        I::IntoIter: Clone,
    {
        let inputs = inputs.into_iter();
        let route = Self::plain(op, inputs.clone())?;
        // A dtype the kernels do not take is the full planner's to route or refuse.
        Self::takes_all(op, inputs).then_some(route)
    }

    /// The fast paths' common part: one backend the op is routed to, every input a plain
    /// primitive of its declared kind, one float dtype.
    #[inline]
    fn plain<'a>(op: &'static OpInfo, inputs: impl IntoIterator<Item = Input<'a>>) -> Option<Self> {
        let mut backend = None;
        let mut first_float = None;
        for input in inputs {
            if input.tensor.autodiff != DispatchAutodiffContext::Disabled {
                return None;
            }
            let found = describe_level(&input.tensor.kind);
            let kind = match (found.wrapped, found.primitive) {
                (false, Primitive::Float) => TensorKind::Float,
                (false, Primitive::Int) => TensorKind::Int,
                (false, Primitive::Bool) => TensorKind::Bool,
                (false, Primitive::Quantized) => TensorKind::Quantized,
                _ => return None,
            };
            if kind != input.kind || *backend.get_or_insert(found.backend) != found.backend {
                return None;
            }
            // Float inputs of two dtypes are the full planner's to refuse (or to send to the
            // composition); a single float input's dtype is not read here.
            if kind == TensorKind::Float {
                match first_float {
                    None => first_float = Some(input.tensor),
                    Some(first) if !Self::same_dtype(first, input.tensor) => return None,
                    Some(_) => {}
                }
            }
        }
        let backend = backend?;
        (op.is_routed(backend) && !op.asks_server(backend))
            .then_some(Self::plain_route(op, backend))
    }

    /// Whether two float inputs have one dtype (read only when a call has several).
    #[inline(never)]
    fn same_dtype(a: &DispatchTensor, b: &DispatchTensor) -> bool {
        a.dtype() == b.dtype()
    }

    /// Whether the op's kernels take the dtype of every float input (read only for an op that
    /// declares its dtypes, out of the common loop).
    #[inline(never)]
    fn takes_all<'a>(op: &'static OpInfo, mut inputs: impl Iterator<Item = Input<'a>>) -> bool {
        inputs.all(|input| input.kind != TensorKind::Float || op.takes(|| input.tensor.dtype()))
    }

    /// [`Route::fast`] for an op that also takes a device: the device must be a plain
    /// (non-autodiff) device of the inputs' backend.
    #[inline]
    pub fn fast_with_device<'a>(
        op: &'static OpInfo,
        inputs: impl IntoIterator<Item = Input<'a>>,
        device: &DispatchDevice,
    ) -> Option<Self> {
        Self::fast(op, inputs).filter(|route| route.on_plain_device(device))
    }

    /// [`Route::fast_dtyped`] for an op that also takes a device, as [`Route::fast_with_device`].
    #[inline]
    pub fn fast_dtyped_with_device<'a, I>(
        op: &'static OpInfo,
        inputs: I,
        device: &DispatchDevice,
    ) -> Option<Self>
    where
        I: IntoIterator<Item = Input<'a>>,
        I::IntoIter: Clone,
    {
        Self::fast_dtyped(op, inputs).filter(|route| route.on_plain_device(device))
    }

    /// Whether `device` is a plain (non-autodiff) device of the route's backend.
    #[inline]
    fn on_plain_device(&self, device: &DispatchDevice) -> bool {
        describe_device(device) == (self.backend, DispatchAutodiffContext::Disabled)
    }

    /// [`Route::fast`] for an op whose only routing argument is a device: a plain
    /// (non-autodiff) device of a backend the op is routed to.
    #[inline]
    pub fn fast_by_device(op: &'static OpInfo, device: &DispatchDevice) -> Option<Self> {
        match describe_device(device) {
            (backend, DispatchAutodiffContext::Disabled)
                if op.is_routed(backend) && !op.asks_server(backend) =>
            {
                Some(Self::plain_route(op, backend))
            }
            _ => None,
        }
    }

    /// The route of every plain call: `backend`'s concrete kernel, autodiff disabled.
    #[inline]
    const fn plain_route(op: &'static OpInfo, backend: BackendId) -> Self {
        Self {
            op,
            backend,
            mode: Mode::Concrete,
            context: DispatchAutodiffContext::Disabled,
        }
    }

    /// Plans a call from its tensor inputs (absent `Option`s and empty `Vec`s contribute none),
    /// checking the whole routing contract.
    ///
    /// The routing tensor is the first float input, else the first tensor input: it picks the
    /// backend, and every other input must be on the same one. The inputs' autodiff contexts are
    /// merged (a disabled context is a constant next to an enabled one; two enabled contexts
    /// must agree on the checkpointing strategy). Then the op's policy decides:
    /// `differentiable` runs the `Autodiff<B, C>` kernel under an enabled context; `detach` and
    /// `reject` run the concrete kernel, `reject` only if no float input is tracked. Last, a
    /// float input of a dtype the op's kernels do not take (`dtypes`) turns the route into the
    /// op's composition ([`Mode::Fallback`], [`Mode::AutodiffFallback`]), or into
    /// [`RouteError::UnsupportedDtype`], as the op declares (`other_dtypes`); float inputs of
    /// two dtypes are [`RouteError::MixedDtypes`].
    ///
    /// # Errors
    ///
    /// The first contract violation found, as a [`RouteError`].
    pub fn plan<'a, I>(op: &'static OpInfo, inputs: I) -> Result<Self, RouteError>
    where
        I: IntoIterator<Item = Input<'a>>,
        I::IntoIter: Clone,
    {
        Self::plan_checked(op, inputs, None)
    }

    /// [`Route::plan`] for an op that also takes a device: the device must be on the routing
    /// tensor's backend, and an autodiff device enables autodiff for the call like an input
    /// with an enabled context would.
    ///
    /// # Errors
    ///
    /// As [`Route::plan`]; [`RouteError::BackendMismatch`] for a device on another backend.
    pub fn plan_with_device<'a, I>(
        op: &'static OpInfo,
        inputs: I,
        device_input: &'static str,
        device: &DispatchDevice,
    ) -> Result<Self, RouteError>
    where
        I: IntoIterator<Item = Input<'a>>,
        I::IntoIter: Clone,
    {
        Self::plan_checked(op, inputs, Some((device_input, device)))
    }

    fn plan_checked<'a, I>(
        op: &'static OpInfo,
        inputs: I,
        device: Option<(&'static str, &DispatchDevice)>,
    ) -> Result<Self, RouteError>
    where
        I: IntoIterator<Item = Input<'a>>,
        I::IntoIter: Clone,
    {
        let inputs = inputs.into_iter();
        let Some(router) = inputs
            .clone()
            .find(|i| i.kind == TensorKind::Float)
            .or_else(|| inputs.clone().next())
        else {
            // Every tensor input is an absent `Option` or an empty `Vec`: the device, if the op
            // takes one, still says where to run.
            return match device {
                Some((name, device)) => Self::plan_by_device(op, name, device),
                None => Err(RouteError::NoRoutingTensor { op: op.name }),
            };
        };
        let routed = describe(&router.tensor.kind);
        let mut context = DispatchAutodiffContext::Disabled;
        let mut context_from: Option<InputName> = None;
        let mut tracked: Option<InputName> = None;

        let inputs_again = inputs.clone();
        for input in inputs {
            let found = describe(&input.tensor.kind);
            check_input(op, &input, found)?;
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
                            backend: routed.backend,
                        });
                    }
                    _ => {
                        context_from.get_or_insert(input.name);
                        context = DispatchAutodiffContext::Enabled(strategy);
                    }
                }
            }
            if input.kind == TensorKind::Float
                && matches!(found.primitive, Primitive::Autodiff { tracked: true })
            {
                tracked.get_or_insert(input.name);
            }
        }

        if let Some((name, device)) = device {
            let name = InputName::new(name);
            let (backend, device_context) = describe_device(device);
            if backend != routed.backend {
                return Err(RouteError::BackendMismatch {
                    op: op.name,
                    input: name,
                    backend,
                    routing_input: router.name,
                    routing_backend: routed.backend,
                });
            }
            match (context, device_context) {
                (_, DispatchAutodiffContext::Disabled) => {}
                (
                    DispatchAutodiffContext::Enabled(first),
                    DispatchAutodiffContext::Enabled(strategy),
                ) if first != strategy => {
                    return Err(RouteError::CheckpointingMismatch {
                        op: op.name,
                        input: name,
                        strategy,
                        first_input: context_from.unwrap_or(router.name),
                        first_strategy: first,
                        backend,
                    });
                }
                (_, enabled) => {
                    if !cfg!(feature = "autodiff") {
                        return Err(RouteError::AutodiffFeatureOff {
                            op: op.name,
                            input: name,
                            backend,
                        });
                    }
                    context = enabled;
                }
            }
        }

        // The backend before the policy (the guide's "Policies and routing"): a tracked input of a
        // `reject` op on a backend the op has no route to is an unrouted backend first.
        Self::check_backend(op, router.name, routed.backend)?;
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
        let mode = Self::by_dtype(op, inputs_again, routed.backend, mode)?;
        let route = Self::routed(op, router.name, routed.backend, mode, context)?;
        // (The fallback is the composition, primitive by primitive: nothing for the server to
        // serve.)
        let fallback = matches!(mode, Mode::Fallback | Mode::AutodiffFallback(_));
        if op.asks_server(routed.backend) && !fallback {
            check_served(op, &router.tensor.kind.device())?;
        }
        Ok(route)
    }

    /// `mode`, or its composition when a float input has a dtype the op's kernels do not take
    /// and the op runs its composition for other dtypes.
    ///
    /// # Errors
    ///
    /// [`RouteError::UnsupportedDtype`] for such an input of an op that refuses other dtypes;
    /// else [`RouteError::MixedDtypes`] for float inputs of two dtypes, whatever the op
    /// declares.
    fn by_dtype<'a>(
        op: &'static OpInfo,
        inputs: impl Iterator<Item = Input<'a>>,
        backend: BackendId,
        mode: Mode,
    ) -> Result<Mode, RouteError> {
        let mut first: Option<(InputName, DType)> = None;
        let mut unsupported = None;
        let mut mixed = None;
        for input in inputs.filter(|input| input.kind == TensorKind::Float) {
            let dtype = input.tensor.dtype();
            if unsupported.is_none() && !op.takes(|| dtype) {
                unsupported = Some((input.name, dtype));
            }
            match first {
                None => first = Some((input.name, dtype)),
                Some((first_input, first_dtype)) if first_dtype != dtype && mixed.is_none() => {
                    mixed = Some(RouteError::MixedDtypes {
                        op: op.name,
                        input: input.name,
                        dtype,
                        first: Box::new((first_input, first_dtype)),
                        backend,
                    });
                }
                Some(_) => {}
            }
        }
        // An op that refuses other dtypes names the input of an unlisted one first (its
        // declaration says which it takes); then float inputs of two dtypes are refused whatever
        // the op declares (its composition, Burn's ops, would not take them either); then an
        // unlisted dtype runs the composition, or is refused.
        match (unsupported, mixed, op.other_dtypes) {
            (Some((input, dtype)), _, OtherDtypes::Error) => Err(RouteError::UnsupportedDtype {
                op: op.name,
                input,
                dtype,
                backend,
                declared: op.declared_dtypes,
                location: op.dtypes_location,
            }),
            (_, Some(mixed), _) => Err(mixed),
            (None, None, _) => Ok(mode),
            (Some(_), None, OtherDtypes::Composition) => Ok(match mode {
                Mode::Autodiff(strategy) => Mode::AutodiffFallback(strategy),
                _ => Mode::Fallback,
            }),
        }
    }

    /// The route, if the op has a compiled arm for it.
    fn routed(
        op: &'static OpInfo,
        router: InputName,
        backend: BackendId,
        mode: Mode,
        context: DispatchAutodiffContext,
    ) -> Result<Self, RouteError> {
        Self::check_backend(op, router, backend)?;
        if matches!(mode, Mode::Autodiff(_) | Mode::AutodiffFallback(_)) && !op.autodiff {
            return Err(RouteError::AutodiffCompiledOut {
                op: op.name,
                input: router,
                backend,
                cfg: op.autodiff_cfg,
                krate: op.krate,
            });
        }
        Ok(Self {
            op,
            backend,
            mode,
            context,
        })
    }

    /// Whether the op has a compiled routing arm for `backend` (which `router` picked).
    fn check_backend(
        op: &'static OpInfo,
        router: InputName,
        backend: BackendId,
    ) -> Result<(), RouteError> {
        if let Some(cfg) = op.compiled_out(backend) {
            return Err(RouteError::BackendCompiledOut {
                op: op.name,
                input: router,
                backend,
                cfg,
                krate: op.krate,
            });
        }
        if !op.is_routed(backend) {
            return Err(RouteError::UnlistedBackend {
                op: op.name,
                input: router,
                backend,
                location: op.backends_location,
            });
        }
        Ok(())
    }

    /// Plans a call of an op without tensor inputs from its device argument: the device picks
    /// the backend, and an autodiff device makes float outputs untracked autodiff tensors.
    ///
    /// # Errors
    ///
    /// [`RouteError::AutodiffFeatureOff`] for an autodiff device in a build without autodiff;
    /// [`RouteError::UnlistedBackend`] for a device on a backend the op is not routed to.
    pub fn plan_by_device(
        op: &'static OpInfo,
        input: &'static str,
        device: &DispatchDevice,
    ) -> Result<Self, RouteError> {
        let (backend, context) = describe_device(device);
        let input = InputName::new(input);
        if context != DispatchAutodiffContext::Disabled && !cfg!(feature = "autodiff") {
            return Err(RouteError::AutodiffFeatureOff {
                op: op.name,
                input,
                backend,
            });
        }
        let route = Self::routed(op, input, backend, Mode::Concrete, context)?;
        if op.asks_server(backend) {
            check_served(op, device)?;
        }
        Ok(route)
    }

    /// A route for an op without tensor or device inputs: the manifest lists exactly one
    /// backend for it.
    ///
    /// # Errors
    ///
    /// [`RouteError::UnlistedBackend`] when that backend's routing arm is not compiled.
    pub fn fixed(op: &'static OpInfo, backend: BackendId) -> Result<Self, RouteError> {
        let router = InputName::new(op.name);
        Self::routed(
            op,
            router,
            backend,
            Mode::Concrete,
            DispatchAutodiffContext::Disabled,
        )
    }

    /// The backend the call runs on.
    #[inline]
    pub fn backend(&self) -> BackendId {
        self.backend
    }

    /// The backend and the implementation to call.
    #[inline]
    pub fn target(&self) -> (BackendId, Mode) {
        (self.backend, self.mode)
    }

    /// The op being routed.
    pub fn op(&self) -> &'static OpInfo {
        self.op
    }

    /// The merged autodiff context that outputs are wrapped in.
    #[inline]
    pub fn context(&self) -> DispatchAutodiffContext {
        self.context
    }

    /// For the generated `match` on [`Route::target`]: a route its arms do not cover.
    /// Planning only returns routes the op's [`OpInfo`] says are compiled, so this is a bug in
    /// burn-route (or an `OpInfo` written by hand that disagrees with its arms).
    ///
    /// # Panics
    /// Always.
    #[cold]
    #[inline(never)]
    pub fn unrouted(&self) -> ! {
        panic!(
            "{}: no routing arm for {} ({:?}), which planning accepted (a burn-route bug: \
             please report it)",
            self.op.name, self.backend, self.mode
        )
    }

    /// For a device argument that planning accepted but that is on another backend than the
    /// route: a burn-route bug.
    #[cold]
    #[inline(never)]
    pub(crate) fn device_unplanned(&self, input: &'static str, device: &DispatchDevice) -> ! {
        panic!(
            "{}: device `{input}` is on {}, but the call was routed to {} (a burn-route bug: \
             please report it)",
            self.op.name,
            describe_device(device).0,
            self.backend
        )
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
            input: InputName::new(input),
            backend: found.backend,
            problem: Malformed::UnexpectedPrimitive {
                expected,
                found: found.primitive.name(),
            },
        }
    }
}

/// Panics for an input that planning accepted but its unwrapping refused: a bug in burn-route.
#[cold]
#[inline(never)]
pub(crate) fn planned_out(err: RouteError) -> ! {
    panic!("{err} (a burn-route bug: the route was planned with this input; please report it)")
}

#[inline]
fn check_input(op: &'static OpInfo, input: &Input<'_>, found: Described) -> Result<(), RouteError> {
    let malformed = |problem| RouteError::Malformed {
        op: op.name,
        input: input.name,
        backend: found.backend,
        problem,
    };
    let enabled = matches!(input.tensor.autodiff, DispatchAutodiffContext::Enabled(_));
    if (enabled || found.wrapped) && !cfg!(feature = "autodiff") {
        return Err(RouteError::AutodiffFeatureOff {
            op: op.name,
            input: input.name,
            backend: found.backend,
        });
    }
    if found.backend == BackendId::Other {
        return Err(RouteError::UnlistedBackend {
            op: op.name,
            input: input.name,
            backend: BackendId::Other,
            location: op.backends_location,
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
        TensorKind::Quantized => found.primitive == Primitive::Quantized,
    };
    if !kind_fits {
        return Err(malformed(Malformed::WrongKind {
            expected: input.kind,
            found: found.primitive.name(),
        }));
    }
    Ok(())
}

#[cfg(test)]
mod tests;

/// Whether the Remote server of `device` serves the op (one that runs there as one operation).
#[cfg(feature = "remote")]
#[cold]
fn check_served(op: &'static OpInfo, device: &DispatchDevice) -> Result<(), RouteError> {
    let (Some(remote), DispatchDevice::Remote(device)) = (op.remote, device.clone().inner()) else {
        return Ok(());
    };
    super::remote::ready(op, remote, &device)
}

#[cfg(not(feature = "remote"))]
fn check_served(_: &'static OpInfo, _: &DispatchDevice) -> Result<(), RouteError> {
    Ok(())
}

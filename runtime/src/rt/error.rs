//! Routing errors: one variant per way a call can break the routing contract.

use core::fmt;

use burn_backend::{DType, FloatDType};

use super::Checkpointing;
use super::ShapeRule;
use super::op::{BackendId, InputName, TensorKind, dtype_name};
use super::spec::{OutputName, TensorSpec};
use super::words::{Dims, describe_rule};

/// Why a routed op call could not run. Every variant names the op, and the input and backend
/// involved where there is one (`NoRoutingTensor` has no input to name; the output errors name
/// the output); the `Display` text also says how to fix it and links its section of the error
/// reference ([`errors`](crate::errors), for this version on docs.rs).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RouteError {
    /// A float input tracked by autodiff reached an op declared `reject`.
    TrackedInput {
        /// The op.
        op: &'static str,
        /// The tracked input.
        input: InputName,
        /// The backend the call was routed to.
        backend: BackendId,
        /// `manifest:LINE` of the op's policy.
        location: &'static str,
    },
    /// The routing tensor is on a backend the op is not routed to (or not compiled for).
    UnlistedBackend {
        /// The op.
        op: &'static str,
        /// The input that picked the backend (the routing tensor, or the device).
        input: InputName,
        /// The backend of the routing tensor.
        backend: BackendId,
        /// `manifest:LINE` of the op.
        location: &'static str,
    },
    /// Two inputs live on different backends.
    BackendMismatch {
        /// The op.
        op: &'static str,
        /// The input on another backend.
        input: InputName,
        /// Its backend.
        backend: BackendId,
        /// The input that picked the backend.
        routing_input: InputName,
        /// The backend it picked.
        routing_backend: BackendId,
    },
    /// Two inputs carry enabled autodiff contexts with different checkpointing strategies.
    CheckpointingMismatch {
        /// The op.
        op: &'static str,
        /// The input whose strategy differs.
        input: InputName,
        /// Its strategy.
        strategy: Checkpointing,
        /// The first input with an enabled context.
        first_input: InputName,
        /// The backend the call was routed to.
        backend: BackendId,
        /// That input's strategy.
        first_strategy: Checkpointing,
    },
    /// A dispatch tensor whose parts contradict each other.
    Malformed {
        /// The op.
        op: &'static str,
        /// The malformed input.
        input: InputName,
        /// Its backend.
        backend: BackendId,
        /// What is wrong with it.
        problem: Malformed,
    },
    /// No input carries a tensor, so nothing says which backend to use (and there is no input
    /// or backend to name).
    NoRoutingTensor {
        /// The op.
        op: &'static str,
    },
    /// The manifest routes the op to the backend, but the crate that generated the op compiled
    /// that backend's routes out (its cfg is off in this build).
    BackendCompiledOut {
        /// The op.
        op: &'static str,
        /// The input that picked the backend.
        input: InputName,
        /// The backend.
        backend: BackendId,
        /// The cfg predicate that is off.
        cfg: &'static str,
        /// The crate that generated the op.
        krate: &'static str,
    },
    /// A tracked float reached a `differentiable` op whose autodiff routes the crate that
    /// generated the op compiled out (its autodiff cfg is off in this build).
    AutodiffCompiledOut {
        /// The op.
        op: &'static str,
        /// The input with the enabled autodiff context.
        input: InputName,
        /// Its backend.
        backend: BackendId,
        /// The cfg predicate that is off.
        cfg: &'static str,
        /// The crate that generated the op.
        krate: &'static str,
    },
    /// An input's shape breaks its shape contract in the manifest (checked before any kernel
    /// runs).
    ShapeContract {
        /// The op.
        op: &'static str,
        /// The input whose shape is wrong.
        input: InputName,
        /// Its shape.
        shape: Box<[usize]>,
        /// The contract.
        rule: ShapeRule,
        /// The input the contract relates it to (a single or optional tensor input).
        reference: &'static str,
        /// That input's shape.
        reference_shape: Box<[usize]>,
        /// The backend of the wrong input.
        backend: BackendId,
        /// `manifest:LINE` of the contract.
        location: &'static str,
    },
    /// A kernel returned an output whose shape or dtype differs from what the manifest declares
    /// for it (`shape` and `dtype` on the output). Checked in debug builds when a deferred
    /// operation runs on `Fusion<B>`; reads of the op's outputs return this text.
    OutputMetadata {
        /// The op.
        op: &'static str,
        /// The output.
        output: OutputName,
        /// What the manifest declares, and what the kernel returned.
        declared: Box<(TensorSpec, TensorSpec)>,
        /// `manifest:LINE` of the op.
        location: &'static str,
    },
    /// A kernel left out an output its metadata declares (an `option` output that is `None`, a
    /// `vec` output with fewer elements), or returned one it does not declare. Checked whenever
    /// a deferred operation runs on `Fusion<B>`.
    OutputPresence {
        /// The op.
        op: &'static str,
        /// The output.
        output: OutputName,
        /// `manifest:LINE` of the op.
        location: &'static str,
    },
    /// The op runs on the Remote server as one custom operation, and the server of the routing
    /// tensor's device does not serve it: it serves none of the crate's ops, not this one, or
    /// another declaration of it (a server built from another version of the manifest).
    /// Asked once per device and op, at the first call.
    RemoteNotServed {
        /// The op.
        op: &'static str,
        /// Its custom operation's id (`burn-route/MODULE/OP/HASH`).
        id: Box<str>,
        /// The crate that generated the op.
        krate: &'static str,
        /// The function the server binary must call to serve the crate's ops.
        serve: &'static str,
        /// What the server answered.
        problem: RemoteProblem,
    },
    /// A float input has a dtype the op's kernels do not take (`dtypes` in the manifest), and
    /// the op declares `other_dtypes = "error"` (the default).
    UnsupportedDtype {
        /// The op.
        op: &'static str,
        /// The first float input of an undeclared dtype.
        input: InputName,
        /// Its dtype.
        dtype: DType,
        /// Its backend.
        backend: BackendId,
        /// The dtypes the op's kernels take.
        declared: &'static [FloatDType],
        /// `manifest:LINE` of `dtypes`.
        location: &'static str,
    },
    /// Two float inputs of one call have different dtypes (an `f16` input beside an `f32`
    /// one), which neither an op's kernels nor its composition take: Burn's ops on Flex panic
    /// on such a pair and CubeBackend's read one input as the other's dtype, as would a kernel
    /// running the call as one operation.
    MixedDtypes {
        /// The op.
        op: &'static str,
        /// The first float input whose dtype differs from the first float input's.
        input: InputName,
        /// Its dtype.
        dtype: DType,
        /// The first float input and its dtype (boxed: a `RouteError` stays small).
        first: Box<(InputName, DType)>,
        /// Their backend.
        backend: BackendId,
    },
    /// An enabled autodiff context reached routing in a build without the `autodiff` feature.
    AutodiffFeatureOff {
        /// The op.
        op: &'static str,
        /// The input with the enabled context.
        input: InputName,
        /// Its backend.
        backend: BackendId,
    },
}

/// Why a Remote server does not run an op ([`RouteError::RemoteNotServed`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RemoteProblem {
    /// The server serves none of the crate's ops: its handshake failed, with this cause.
    NotServed(Box<str>),
    /// The server serves the crate's ops, but not this one.
    Missing,
    /// The server serves another declaration of the op.
    OtherVersion,
}

/// How a dispatch tensor is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Malformed {
    /// An int, bool or quantized primitive wrapped as autodiff.
    NonFloatAutodiff,
    /// A plain float primitive under an enabled autodiff context.
    EnabledFloatNotAutodiff,
    /// An autodiff primitive under a disabled context.
    AutodiffWithDisabledContext,
    /// An autodiff primitive not wrapped in `DispatchTensorKind::Autodiff`.
    UnwrappedAutodiff,
    /// `DispatchTensorKind::Autodiff` inside another one.
    NestedAutodiff,
    /// The primitive's kind is not the declared one.
    WrongKind {
        /// The declared kind.
        expected: TensorKind,
        /// The primitive found.
        found: &'static str,
    },
    /// A primitive that does not fit the planned route.
    UnexpectedPrimitive {
        /// What the route needed.
        expected: &'static str,
        /// The primitive found.
        found: &'static str,
    },
}

impl Malformed {
    /// The section of the error reference ([`crate::errors`]) that explains this problem.
    pub fn anchor(&self) -> &'static str {
        match self {
            Self::NonFloatAutodiff => "only-float-autodiff",
            Self::EnabledFloatNotAutodiff => "enabled-float-not-autodiff",
            Self::AutodiffWithDisabledContext => "autodiff-disabled-context",
            Self::UnwrappedAutodiff | Self::NestedAutodiff | Self::UnexpectedPrimitive { .. } => {
                "malformed-dispatch-tensor"
            }
            Self::WrongKind { .. } => "wrong-kind",
        }
    }
}

impl Malformed {
    /// How to fix it, as a clause.
    pub fn fix(&self) -> String {
        match self {
            Self::WrongKind {
                expected: TensorKind::Quantized,
                ..
            } => "pass a quantized tensor here (quantize it first, e.g. with \
                  `.quantize_dynamic(&scheme)`)"
                .to_owned(),
            Self::WrongKind { expected, .. } => format!(
                "pass a `{expected}` tensor here (convert with `.float()`, `.int()` or `.bool()` first)"
            ),
            _ => "build tensors through Burn's API (`Tensor::from_data`, `.require_grad()`, \
                  `Tensor::into_dispatch`) rather than assembling `DispatchTensor` by hand"
                .to_owned(),
        }
    }
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NonFloatAutodiff => {
                f.write_str("only float tensors may use an autodiff primitive")
            }
            Self::EnabledFloatNotAutodiff => {
                f.write_str("an enabled float tensor must use an autodiff primitive")
            }
            Self::AutodiffWithDisabledContext => {
                f.write_str("an autodiff float primitive must have an enabled autodiff context")
            }
            Self::UnwrappedAutodiff => f.write_str(
                "an autodiff float primitive must be wrapped in `DispatchTensorKind::Autodiff`",
            ),
            Self::NestedAutodiff => {
                f.write_str("an autodiff tensor must not wrap another autodiff tensor")
            }
            Self::WrongKind { expected, found } => {
                let article = if found.starts_with(['A', 'E', 'I', 'O', 'U']) {
                    "an"
                } else {
                    "a"
                };
                write!(
                    f,
                    "the input is declared `{expected}` but holds {article} {found} primitive"
                )
            }
            Self::UnexpectedPrimitive { expected, found } => {
                write!(
                    f,
                    "the route needs a {expected} primitive but found {found}"
                )
            }
        }
    }
}

impl RouteError {
    /// The section of the error reference ([`crate::errors`]) that explains this error; its
    /// `Display` text ends with the link.
    pub fn anchor(&self) -> &'static str {
        match self {
            Self::TrackedInput { .. } => "tracked-input",
            Self::UnlistedBackend { .. } => "unlisted-backend",
            Self::BackendMismatch { .. } => "backend-mismatch",
            Self::CheckpointingMismatch { .. } => "checkpointing-mismatch",
            Self::Malformed { problem, .. } => problem.anchor(),
            Self::NoRoutingTensor { .. } => "no-routing-tensor",
            Self::BackendCompiledOut { .. } => "backend-compiled-out",
            Self::AutodiffCompiledOut { .. } => "autodiff-compiled-out",
            Self::ShapeContract { .. } => "shape-contract",
            Self::OutputMetadata { .. } | Self::OutputPresence { .. } => "output-metadata",
            Self::AutodiffFeatureOff { .. } => "autodiff-feature-off",
            Self::UnsupportedDtype { .. } => "unsupported-dtype",
            Self::MixedDtypes { .. } => "mixed-dtypes",
            Self::RemoteNotServed { problem, .. } => match problem {
                RemoteProblem::NotServed(_) => "remote-not-served",
                RemoteProblem::Missing => "remote-op-missing",
                RemoteProblem::OtherVersion => "remote-op-version",
            },
        }
    }
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.message(f)?;
        write!(f, "See {}", burn_route_core::errors::link(self.anchor()))
    }
}

impl RouteError {
    /// The message up to its link: what happened, and the fix (ending in `". "`).
    fn message(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TrackedInput {
                op,
                input,
                backend,
                location,
            } => {
                // An input inside a declared type is named by its path (`p.x`, `op.Dense.0`),
                // which is no expression to call a method on; and an op over declared types
                // takes no manifest `backward`: its `Autodiff<B, C>` kernel is its composition
                // run on `Autodiff<B, C>`, or written by hand.
                let (detach, differentiable) = if input.name.contains('.') {
                    (
                        format!(
                            "detach the tensor at `{input}` before the call (`.without_autodiff()` \
                             on it, or `.detach()` on an intermediate result)"
                        ),
                        "(its `composition` then runs on `Autodiff<B, C>`, or write its \
                         `Autodiff<B, C>` kernel by hand: an op over declared types takes no \
                         `backward` formula)",
                    )
                } else {
                    (
                        format!(
                            "detach the input before the call (`{input}.without_autodiff()`, or \
                             `{input}.detach()` on an intermediate result)"
                        ),
                        "(and declare its `backward` there)",
                    )
                };
                write!(
                    f,
                    "autodiff float input reached concrete dispatch: op `{op}` got a tracked float \
                     input `{input}` on backend {backend}, but {location} declares the op `reject` \
                     (the default), which would silently drop its gradient. Fix: {detach}, or \
                     declare the op `autodiff = \"detach\"` (runs without gradient) or \
                     `autodiff = \"differentiable\"` {differentiable} in {location}. \
                     "
                )
            }
            Self::UnlistedBackend {
                op,
                input,
                backend,
                location,
            } => write!(
                f,
                "op `{op}` is not routed to backend {backend}: input `{input}` (which picks the backend) \
                 is on {backend}, but {location} does not list {backend} for the op (or this build does \
                 not compile that backend in). Fix: add \
                 {backend} to the op's backends in the manifest and implement its kernel, enable the \
                 feature that compiles {backend} in, or move the inputs to a listed backend. \
                 "
            ),
            Self::BackendMismatch {
                op,
                input,
                backend,
                routing_input,
                routing_backend,
            } => write!(
                f,
                "op `{op}` got inputs on different backends: `{routing_input}` is on {routing_backend} \
                 (it picks the backend) but `{input}` is on {backend}. Fix: put `{input}` on \
                 {routing_backend} too (`.to_device(..)` for a tensor, a {routing_backend} device for \
                 a device argument). "
            ),
            Self::CheckpointingMismatch {
                op,
                input,
                strategy,
                first_input,
                first_strategy,
                backend,
            } => write!(
                f,
                "gradient checkpointing strategy mismatch in op `{op}` (backend {backend}): input `{first_input}` uses \
                 {first_strategy:?} but `{input}` uses {strategy:?}. Tensors in one operation must share a \
                 strategy. Fix: create both on autodiff devices with the same checkpointing setting. \
                 "
            ),
            Self::Malformed {
                op,
                input,
                backend,
                problem,
            } => write!(
                f,
                "{problem}: input `{input}` of op `{op}` (backend {backend}) is a malformed dispatch \
                 tensor. Fix: {}. ",
                problem.fix()
            ),
            Self::NoRoutingTensor { op } => write!(
                f,
                "op `{op}` has no tensor to route by: every tensor input is empty or absent (a declared \
                 type's tensor-less variant counts as absent). Fix: pass at least one tensor. "
            ),
            Self::BackendCompiledOut {
                op,
                input,
                backend,
                cfg,
                krate,
            } => write!(
                f,
                "backend {backend} is compiled out of op `{op}`: input `{input}` (which picks the backend) \
                 is on {backend}, and the manifest routes the op there, but crate `{krate}` was built \
                 with `cfg({cfg})` off, so it has no {backend} route. Fix: {}, or move the inputs to a \
                 compiled backend. ",
                cfg_fix(cfg, krate)
            ),
            Self::AutodiffCompiledOut {
                op,
                input,
                backend,
                cfg,
                krate,
            } => write!(
                f,
                "autodiff routing of op `{op}` is compiled out: input `{input}` (backend {backend}) \
                 carries an enabled autodiff context, but crate `{krate}` was built with `cfg({cfg})` off, so the op has no \
                 `Autodiff` route. Fix: {}, or pass the input without autodiff \
                 (`.without_autodiff()`). ",
                cfg_fix(cfg, krate)
            ),
            Self::ShapeContract {
                op,
                input,
                shape,
                rule,
                reference,
                reference_shape,
                backend,
                location,
            } => write!(
                f,
                "op `{op}` got a shape its contract refuses: input `{input}` (backend {backend}) has \
                 shape {}, but its contract `{rule}` ({location}) expects {}. Fix: pass `{input}` \
                 with that shape (reshape, slice or expand it first), or change the contract in the \
                 manifest if the op supports it. ",
                Dims(shape),
                describe_rule(*rule, reference, reference_shape)
            ),
            Self::OutputMetadata {
                op,
                output,
                declared,
                location,
            } => {
                write!(
                    f,
                    "op `{op}` returned an output its metadata does not declare: `{output}` is \
                     declared ({location}) with {}, but the kernel returned {}. ",
                    declared.0, declared.1
                )?;
                let text = output.to_string();
                let shapes_differ = declared.0.shape != declared.1.shape;
                match text.strip_prefix(burn_route_core::GRADIENT_OF) {
                    // A backward kernel's gradient of another shape: declared from what the
                    // kernel receives.
                    Some(input) if shapes_differ => write!(
                        f,
                        "Fix: a backward kernel that runs as one operation returns each gradient \
                         in the shape it is declared with: its input's shape when the kernel \
                         receives the input (or a shape contract fixes it), else the incoming \
                         gradient's, which the autodiff pass then sums back to the input's shape. \
                         Return `{input}`'s gradient in that shape, or list `{input}` in the op's \
                         `save` so that the kernel receives it and may return its own shape. "
                    ),
                    // Of another dtype: a gradient has its input's dtype.
                    Some(input) => write!(
                        f,
                        "Fix: return `{input}`'s gradient in `{input}`'s dtype, {:?}. ",
                        declared.0.dtype
                    ),
                    None => f.write_str(
                        "Fix: correct the output's `shape` or `dtype` in the manifest (or the \
                         function it names), or the kernel. ",
                    ),
                }
            }
            Self::OutputPresence {
                op,
                output,
                location,
            } => write!(
                f,
                "op `{op}` returned different outputs than its metadata declares: {output} is \
                 present on one side only (declared at {location}). Fix: make the output's \
                 `shape` function return `None` (an `option` output) or as many shapes (a `vec` \
                 output) as the kernel returns tensors. "
            ),
            Self::RemoteNotServed {
                op,
                id,
                krate,
                serve,
                problem,
            } => match problem {
                RemoteProblem::NotServed(cause) => write!(
                    f,
                    "the Remote server does not serve the ops of crate `{krate}`: op `{op}` runs on \
                     the server as one operation (`{id}`), and the server did not answer the \
                     crate's handshake ({cause}). Burn's server closes a session at an operation \
                     it has no handler for, and at one that fails: either the server does not \
                     register the crate's ops, or an earlier operation of this session failed on \
                     the server (its log names it). Fix: in the server binary, register the \
                     crate's ops with `{serve}(server, &devices)` before serving, with the same \
                     version of crate `{krate}`; after a failed operation, fix its cause; then \
                     reconnect. "
                ),
                RemoteProblem::Missing => write!(
                    f,
                    "the Remote server does not serve op `{op}`: it serves the ops of crate \
                     `{krate}`, but not op `{op}` (`{id}`): the server runs an op with its own \
                     backend's kernel, so either the op is not routed to the server's backend \
                     (its `backends` in the manifest), or the server's build of the crate has no \
                     such op. Fix: route the op to the backend the server runs, or rebuild the \
                     server binary with the client's version of crate `{krate}` (it calls \
                     `{serve}`). "
                ),
                RemoteProblem::OtherVersion => write!(
                    f,
                    "the Remote server serves another version of op `{op}`: its build of crate \
                     `{krate}` declares the op differently (the client's is `{id}`), so neither \
                     side could read the other's arguments and outputs. Fix: build the server \
                     binary and the client from the same manifest (the same version of crate \
                     `{krate}`, whose `{serve}` the server calls). "
                ),
            },
            Self::UnsupportedDtype {
                op,
                input,
                dtype,
                backend,
                declared,
                location,
            } => {
                let names: Vec<String> = declared
                    .iter()
                    .map(|d| dtype_name(DType::from(*d)))
                    .collect();
                // (Flex stores no `flex32`: casting to it there panics.)
                let castable = declared
                    .iter()
                    .find(|d| !(*backend == BackendId::Flex && **d == FloatDType::Flex32));
                let cast = match castable {
                    Some(first) => format!(
                        "cast `{input}` to a dtype the kernels take first (`.cast(FloatDType::{first:?})` \
                         on the tensor)"
                    ),
                    None => format!("cast `{input}` first"),
                };
                write!(
                    f,
                    "op `{op}` does not take {} inputs: input `{input}` (backend {backend}) is {}, \
                     but {location} declares the op's kernels for {} only, and no fallback for \
                     other dtypes (`other_dtypes = \"error\"`). Fix: {cast}, or declare \
                     `other_dtypes = \"composition\"` in {location} (with a `composition`) to \
                     run the op's composition for other dtypes, or add \"{}\" to `dtypes` once \
                     its kernels take it. ",
                    dtype_name(*dtype),
                    dtype_name(*dtype),
                    names.join(", "),
                    dtype_name(*dtype),
                )
            }
            Self::MixedDtypes {
                op,
                input,
                dtype,
                first,
                backend,
            } => {
                let (first_input, first_dtype) = &**first;
                write!(
                    f,
                    "op `{op}` got float inputs of different dtypes: input `{input}` (backend \
                 {backend}) is {}, but input `{first_input}` is {}; one call's float inputs \
                 share one dtype. Fix: cast `{input}` to {} first (`.cast(FloatDType::{first_dtype:?})` \
                 on the tensor), or `{first_input}` to {}. ",
                    dtype_name(*dtype),
                    dtype_name(*first_dtype),
                    dtype_name(*first_dtype),
                    dtype_name(*dtype),
                )
            }
            Self::AutodiffFeatureOff { op, input, backend } => write!(
                f,
                "autodiff context requires the `autodiff` feature: input `{input}` of op `{op}` (backend \
                 {backend}) carries an enabled autodiff context, but burn-route was built without its `autodiff` feature. \
                 Fix: enable burn-route's `autodiff` feature (crates that generate ops follow it), or \
                 use a device without `.autodiff()`. "
            ),
        }
    }
}

impl std::error::Error for RouteError {}

/// How to turn a cfg on: burn-route's own cfgs follow its features (the generator's build
/// script sets them); any other is the crate's.
fn cfg_fix(cfg: &str, krate: &str) -> String {
    let feature = burn_route_core::route_cfg::feature(cfg);
    match feature {
        Some(feature) => format!(
            "enable burn-route's `{feature}` feature (crate `{krate}`'s build script sets `{cfg}` from it; \
             the build script must call `burn_route_codegen::Builder::build_script`)"
        ),
        None => format!("turn `{cfg}` on in crate `{krate}` (e.g. enable the feature it names)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unsupported(backend: BackendId) -> String {
        RouteError::UnsupportedDtype {
            op: "f",
            input: InputName::new("x"),
            dtype: DType::F64,
            backend,
            declared: &[FloatDType::Flex32, FloatDType::F32],
            location: "ops.toml:9",
        }
        .to_string()
    }

    #[test]
    fn an_unsupported_dtype_on_flex_is_never_told_to_cast_to_flex32() {
        // Flex stores no `flex32` (its cast panics): the first dtype it stores.
        let flex = unsupported(BackendId::Flex);
        assert!(flex.contains("`.cast(FloatDType::F32)`"), "{flex}");
        // Cube's tensors may be `flex32`.
        let cube = unsupported(BackendId::Cube);
        assert!(cube.contains("`.cast(FloatDType::Flex32)`"), "{cube}");
    }
}

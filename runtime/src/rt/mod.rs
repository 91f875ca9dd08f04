//! Runtime support for generated routing code.
//!
//! Generated modules name everything they need through this one path (`burn_route_runtime::rt`,
//! or `burn_route::rt`, its re-export, in the crate of the shipped ops), so a crate with its own
//! ops depends on `burn-route-runtime` alone for the Burn types its generated code uses.
//!
//! What user code meets of it is mostly [`RouteError`], which every generated `try_` function
//! returns: each variant names the op and what broke its contract, and its text ends with the
//! link to its section of the error reference ([`errors`]):
//!
//! ```
//! use burn_route_runtime::rt::{RouteError, errors};
//!
//! let err = RouteError::NoRoutingTensor { op: "sum_all" };
//! assert_eq!(err.anchor(), "no-routing-tensor");
//! assert!(err.to_string().starts_with("op `sum_all` has no tensor to route by"));
//! assert!(err.to_string().ends_with(&errors::link("no-routing-tensor").to_string()));
//! assert!(errors::section(err.anchor()).is_some());
//! ```

mod convert;
mod device;
mod error;
#[cfg(test)]
mod error_samples;
#[cfg(feature = "autodiff")]
#[doc(hidden)]
pub mod grad;
mod lane;
mod op;
#[cfg(any(feature = "cube", feature = "remote"))]
mod outputs;
mod pending;
#[cfg(any(feature = "cube", feature = "remote"))]
pub mod record;
mod route;
mod shape;
mod spec;
mod words;

// Documented by its own inner doc (an outer doc here would make rustdoc resolve the inner doc's
// links from this module).
#[cfg(feature = "remote")]
pub mod remote;

/// The lazy implementation of ops on `Fusion<B>` (what `Cube` is when fusion is on).
#[cfg(feature = "cube")]
pub mod fusion;

pub use burn_route_core::ShapeRule;
/// The error reference every [`RouteError`] links (also at `burn_route_runtime::errors`), which
/// generated docs name.
pub use burn_route_core::errors;
pub use error::{Malformed, RemoteProblem, RouteError};
pub(crate) use op::dtype_name;
pub use op::{BackendId, InputName, OtherDtypes, Policy, TensorKind};
pub use pending::{Async, Pending, PendingResult, Planned};
pub use spec::{OutputName, TensorSpec};

/// The machinery only generated code uses: route planning, unwrapping inputs for the planned
/// implementation, the panic-or-`Result` strategy and each op's static facts. Not part of the
/// documented API (generated code names it as `__rt`); it may change with the generator.
#[doc(hidden)]
pub mod __private {
    pub use super::convert::*;
    #[cfg(feature = "cube")]
    pub use super::fusion::cloned;
    #[cfg(feature = "autodiff")]
    pub use super::grad;
    pub use super::lane::{Concrete, Held, Target};
    pub use super::op::{OpInfo, RemoteOp};
    #[cfg(any(feature = "cube", feature = "remote"))]
    pub use super::record::implied;
    pub use super::route::{Group, Input, Mode, Route};
    pub use super::shape::{ShapeCheck, check_shapes};
    pub use super::{Fallible, OnError, Panic};
}

/// Burn's autodiff decorator (`Backward`, `OpsKind`, gradients), for writing backward passes.
#[cfg(feature = "autodiff")]
pub use burn_autodiff as autodiff;
/// Burn's backend API (tensor primitive ops, `TensorData`, ...), for writing kernels.
pub use burn_backend as backend;
pub use burn_backend::tensor::{
    BoolTensor, Device as DeviceOf, FloatTensor, IntTensor, QuantizedTensor,
};
pub use burn_backend::{Backend, DType, FloatDType, Shape};
/// burn-cubecl, for writing `CubeBackend` kernels: its tensor helpers (`ops::numeric`,
/// `kernel::into_contiguous`) and the `cubecl` it is built with.
#[cfg(feature = "cube")]
pub use burn_cubecl as cube;
/// The cubecl backend itself, whichever runtime a device names: implement an op trait for it
/// (not for [`Cube`], which is `Fusion<CubeBackend>` when fusion is on; the generated
/// `Fusion<B>` implementation covers that).
#[cfg(feature = "cube")]
pub use burn_cubecl::CubeBackend;
/// cubecl's tensor, the primitive of every tensor kind on [`CubeBackend`].
#[cfg(feature = "cube")]
pub use burn_cubecl::tensor::CubeTensor;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub use burn_dispatch::backends::Cube;
pub use burn_dispatch::backends::Flex;
#[cfg(feature = "remote")]
pub use burn_dispatch::backends::Remote;
pub use burn_dispatch::{
    BackendTensor, Dispatch, DispatchAutodiffContext, DispatchDevice, DispatchTensor,
    DispatchTensorKind, GradientCheckpointingStrategy as Checkpointing,
};
/// What `Tensor::backward` returns: the gradients of every tracked tensor (`x.grad(&grads)`).
/// (Backward passes of `Autodiff<B, C>` kernels use the backend-level
/// [`autodiff::grads::Gradients`] instead.)
#[cfg(feature = "autodiff")]
pub use burn_tensor::Gradients;
pub use burn_tensor::{Bool, Device, DeviceKind, Float, Int, Tensor};

#[cfg(feature = "autodiff")]
pub use burn_autodiff::Autodiff;
#[cfg(feature = "autodiff")]
pub use burn_autodiff::checkpoint::strategy::{
    BalancedCheckpointing, CheckpointStrategy, NoCheckpointing,
};

/// Unwraps a routing result, panicking with the error's message (its `Display` text).
///
/// This is what the panicking form of every routed op does with a routing error.
#[track_caller]
pub fn expect<T>(result: Result<T, RouteError>) -> T {
    match result {
        Ok(value) => value,
        Err(err) => panic!("{err}"),
    }
}

/// How a routed op reports a routing error: [`Panic`] for the `Dispatch` trait methods and the
/// panicking `Tensor` functions, [`Fallible`] for the `try_` functions. (Used by generated code.)
///
/// Each op's routing is generated once, generic over this, so that the panicking form returns
/// its outputs directly: unwrapping a `Result` after an inlined call left the compiler building
/// the `Result` and then copying the outputs out of it, on every call.
#[doc(hidden)]
pub trait OnError {
    /// What the op returns for outputs of type `T`.
    type Out<T>;
    /// The outputs of a routed call.
    fn ok<T>(value: T) -> Self::Out<T>;
    /// The outcome of a call that may have failed to route.
    fn result<T>(result: Result<T, RouteError>) -> Self::Out<T>;
}

/// Panics with the routing error's message ([`expect`]).
#[doc(hidden)]
#[derive(Debug)]
pub enum Panic {}

impl OnError for Panic {
    type Out<T> = T;
    #[inline(always)]
    fn ok<T>(value: T) -> T {
        value
    }
    #[inline(always)]
    #[track_caller]
    fn result<T>(result: Result<T, RouteError>) -> T {
        expect(result)
    }
}

/// Returns the routing error.
#[doc(hidden)]
#[derive(Debug)]
pub enum Fallible {}

impl OnError for Fallible {
    type Out<T> = Result<T, RouteError>;
    #[inline(always)]
    fn ok<T>(value: T) -> Result<T, RouteError> {
        Ok(value)
    }
    #[inline(always)]
    fn result<T>(result: Result<T, RouteError>) -> Result<T, RouteError> {
        result
    }
}

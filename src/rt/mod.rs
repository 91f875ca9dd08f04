//! Runtime support for generated routing code.
//!
//! Generated modules name everything they need through this one path (`burn_route::rt`, or
//! `crate::rt` inside this crate), so a downstream crate depends on `burn-route` alone for the
//! Burn types its generated code uses.

mod error;
mod lane;
mod route;

pub use error::{Malformed, RouteError};
pub use lane::{Concrete, Held, Lane};
pub use route::{BackendId, Input, InputName, Mode, OpInfo, Policy, Route, TensorKind};

/// Burn's autodiff decorator (`Backward`, `OpsKind`, gradients), for writing backward passes.
#[cfg(feature = "autodiff")]
pub use burn_autodiff as autodiff;
/// Burn's backend API (tensor primitive ops, `TensorData`, ...), for writing kernels.
pub use burn_backend as backend;
pub use burn_backend::Backend;
pub use burn_backend::tensor::{
    BoolTensor, Device as DeviceOf, FloatTensor, IntTensor, QuantizedTensor,
};
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub use burn_dispatch::backends::Cube;
pub use burn_dispatch::backends::Flex;
#[cfg(feature = "remote")]
pub use burn_dispatch::backends::Remote;
pub use burn_dispatch::{
    BackendTensor, Dispatch, DispatchAutodiffContext, DispatchDevice, DispatchTensor,
    DispatchTensorKind, GradientCheckpointingStrategy as Checkpointing,
};
pub use burn_tensor::{Bool, Device, DeviceKind, Float, Int, Tensor};

#[cfg(feature = "autodiff")]
pub use burn_autodiff::Autodiff;
#[cfg(feature = "autodiff")]
pub use burn_autodiff::checkpoint::strategy::{
    BalancedCheckpointing, CheckpointStrategy, NoCheckpointing,
};

/// Unwraps a routing result, panicking with the error's message (its `Display` text).
///
/// This is what the panicking form of every routed op does with its `try_` twin's result.
#[track_caller]
pub fn expect<T>(result: Result<T, RouteError>) -> T {
    match result {
        Ok(value) => value,
        Err(err) => panic!("{err}"),
    }
}

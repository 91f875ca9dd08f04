//! The runtime of an op check: [`run`] exercises one routed op at the `Dispatch` primitive level
//! the way PyTorch's `torch.library.opcheck` and `gradcheck` do, and panics with what failed and
//! how to fix it.
//!
//! An [`Op`] declares the op's tensor inputs ([`Input`]: kind, container, shape, value range) and
//! its autodiff [`Policy`]; the check closure calls the op's `try_` function with the inputs
//! [`Args`] hands it and returns the op's outputs as [`Value`]s:
//!
//! ```no_run
//! use burn_route_runtime::check;
//! # mod dispatch {
//! #     use burn_route_runtime::rt::backend::ops::{ActivationOps, FloatTensorOps};
//! #     use burn_route_runtime::rt::{Dispatch, DispatchTensor, RouteError};
//! #     pub fn try_add_relu(a: DispatchTensor, b: DispatchTensor) -> Result<DispatchTensor, RouteError> {
//! #         Ok(Dispatch::relu(Dispatch::float_add(a, b)))
//! #     }
//! # }
//! // `dispatch` is the crate's generated module, with the op's `try_` function.
//! let op = check::Op::new("add_relu", check::Policy::Differentiable)
//!     .input(check::Input::float("lhs", &[2, 3]))
//!     .input(check::Input::float("rhs", &[2, 3]))
//!     .output_shape(0, &[2, 3]);
//! check::run(&op, |args: &mut check::Args| {
//!     let out = dispatch::try_add_relu(args.float(0), args.float(1))?;
//!     Ok(vec![check::Value::float(out)])
//! });
//! ```
//!
//! [`run`] checks, in this order:
//!
//! 1. **Values on Flex.** The inputs are drawn deterministically in their ranges (a xorshift
//!    generator seeded from the op's name) and the closure must return `Ok` on `Device::flex()`:
//!    once with every input present, and once more for each optional input with that input
//!    absent. Each [`Op::output_shape`] is checked against the output leaf it names.
//! 2. **Values on the other backends**, against Flex's: `Cube` when this crate is built with
//!    `wgpu` (`Device::wgpu(kind)`, on the adapter that
//!    [`WGPU_ADAPTER_ENV`](crate::check::WGPU_ADAPTER_ENV) names: a CPU adapter unless it says
//!    otherwise) or `cuda` (`Device::cuda(0)`); a remote device
//!    when built with `remote` and the environment variable [`REMOTE_ENV`] holds a server's
//!    address (`ws://host:port`); and every device passed to [`run_on`]. Float leaves must agree
//!    within [`Op::value_tolerance`], int and bool leaves exactly.
//! 3. **The autodiff policy** (with this crate's `autodiff` feature; skipped without it), with
//!    every float input (single, optional and each element of a `Vec`) tracked on
//!    `Device::flex().autodiff()`:
//!    - [`Policy::Differentiable`]: the closure succeeds and gives Flex's values. With
//!      [`Op::gradients`] on (the default), the loss `sum over float output leaves of
//!      sum(out * w)` (fixed random weights `w`, the same for every evaluation) is
//!      backpropagated, and every tracked input's gradient must have the input's shape and
//!      match central finite differences of that loss (see [`Op::tolerance`]). An input marked
//!      [`Input::no_gradient`] must get no gradient, or zeros.
//!    - [`Policy::Detach`]: the closure succeeds, gives Flex's values, every float output is
//!      untracked, and a backward pass gives the inputs no gradient.
//!    - [`Policy::Reject`]: untracked inputs on the autodiff device run (and give Flex's values),
//!      and tracked inputs make the closure return [`RouteError::TrackedInput`] naming the op.
//! 4. **Dtypes** (an op with [`Op::dtypes`], on Flex): the closure with every float input in each
//!    declared dtype Flex stores gives the values of step 1 within [`dtype_tolerance`], and a
//!    call in an undeclared dtype returns [`RouteError::UnsupportedDtype`] when the op declares
//!    no fallback. (Step 1 runs in `f32`, or, for an op whose kernels take no `f32`, in the
//!    first of `f64`, `f16`, `bf16` it declares.)
//!
//! A failure panics with `op check failed: op `NAME`, CHECK: WHAT. Fix: HOW. See LINK`, naming the input or
//! output leaf and, for a value or gradient mismatch, the worst element (flat index and index,
//! got, expected, difference, allowed difference). A panic inside the closure is reported the
//! same way, with the check it happened in.
//!
//! [`compare`] is the same leaf-by-leaf comparison on its own, for checks such as a fused kernel
//! against its composition.
//!
//! [`run`]: crate::check::run
//! [`Op::dtypes`]: crate::check::Op::dtypes
//! [`dtype_tolerance`]: crate::check::dtype_tolerance
//! [`RouteError::UnsupportedDtype`]: crate::rt::RouteError::UnsupportedDtype
//! [`run_on`]: crate::check::run_on
//! [`compare`]: crate::check::compare
//! [`Op`]: crate::check::Op
//! [`Input`]: crate::check::Input
//! [`Args`]: crate::check::Args
//! [`Value`]: crate::check::Value
//! [`Policy`]: crate::check::Policy
//! [`REMOTE_ENV`]: crate::check::REMOTE_ENV
//! [`Op::output_shape`]: crate::check::Op::output_shape
//! [`Op::value_tolerance`]: crate::check::Op::value_tolerance
//! [`Op::tolerance`]: crate::check::Op::tolerance
//! [`Op::gradients`]: crate::check::Op::gradients
//! [`Input::no_gradient`]: crate::check::Input::no_gradient
//! [`Policy::Differentiable`]: crate::check::Policy::Differentiable
//! [`Policy::Detach`]: crate::check::Policy::Detach
//! [`Policy::Reject`]: crate::check::Policy::Reject
//! [`RouteError::TrackedInput`]: crate::rt::RouteError::TrackedInput

#![warn(missing_docs)]

use core::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use burn_backend::ops::{BoolTensorOps, FloatTensorOps, IntTensorOps};
use burn_backend::{
    BoolStore, DType, TensorData, TensorMetadata, get_or_init_device_settings, read_sync,
};

pub use crate::rt::{BackendId, FloatDType, OtherDtypes, Policy, TensorKind};
use crate::rt::{Device, Dispatch, DispatchTensor, RouteError, TensorSpec};

/// The environment variable that names a burn-remote server (`ws://host:port`) to check every op
/// on as well, in a build with the `remote` feature. Unset or empty: no remote device.
pub const REMOTE_ENV: &str = "BURN_ROUTE_CHECK_REMOTE";

/// The environment variable that names the wgpu adapter of the check's `Cube` device, in a
/// build with `wgpu` (read by [`wgpu_adapter`]): `cpu` (the default: a CPU adapter, lavapipe
/// where there is no GPU, as in CI), `gpu` (the first discrete GPU), `integrated` (the first
/// integrated GPU) or `default` (wgpu's own choice, which `CUBECL_WGPU_DEFAULT_DEVICE`
/// overrides). On a machine with a GPU and no CPU adapter, set it to `gpu`: the CPU adapter
/// fails there ("No CPU device found"). burn-route's own Cube tests and benches read it too.
pub const WGPU_ADAPTER_ENV: &str = "BURN_ROUTE_WGPU_ADAPTER";

/// The wgpu adapter [`WGPU_ADAPTER_ENV`] names, as `Device::wgpu` takes it.
///
/// # Panics
///
/// On a value it does not know, naming the variable and its values: a misspelt adapter must
/// not quietly check a CPU adapter instead of the GPU.
pub fn wgpu_adapter() -> crate::rt::DeviceKind {
    use crate::rt::DeviceKind;
    match std::env::var(WGPU_ADAPTER_ENV).as_deref() {
        Err(_) | Ok("" | "cpu") => DeviceKind::Cpu,
        Ok("gpu") => DeviceKind::DiscreteGpu(0),
        Ok("integrated") => DeviceKind::IntegratedGpu(0),
        Ok("default") => DeviceKind::DefaultDevice,
        Ok(other) => panic!(
            "{WGPU_ADAPTER_ENV}={other:?}: expected `cpu` (the default), `gpu`, `integrated` or \
             `default`"
        ),
    }
}

/// The default [`Op::tolerance`] of the gradient check: `|autodiff - fd| <= tol * (1 + |fd|)`.
///
/// The forward passes run in `f32`, so the loss (a sum of a few dozen products of order 1) is
/// off by about `1e-6`; divided by the step `2h` (`h = 1e-3 * max(1, |x|)`) that is a noise of
/// about `1e-3` in each finite difference, plus the central difference's own `O(h^2)` error. A
/// relative `1e-2` stays clear of both, while a wrong gradient (a missing term, a wrong sign, a
/// gradient routed to the wrong input) is off by far more.
pub const DEFAULT_TOLERANCE: f64 = 1e-2;

/// The default [`Op::value_tolerance`]: `|actual - expected| <= tol * (1 + |expected|)` for
/// float outputs compared across backends, and between a tracked forward pass and a plain one.
pub const DEFAULT_VALUE_TOLERANCE: f64 = 1e-4;

/// The value tolerance of a check in `dtype` (see [`Op::dtypes`]), at least
/// [`Op::value_tolerance`]: the inputs are rounded to the dtype once, and a kernel that rounds
/// its output once meets a composition that rounds after each primitive within a few units in
/// the last place of the dtype: `1e-2` for `f16` (10 mantissa bits, a unit of about `1e-3`)
/// and `5e-2` for `bf16` (7 bits, about `8e-3`); `f64`, `f32` and `flex32` keep the op's.
pub fn dtype_tolerance(dtype: FloatDType) -> f64 {
    match dtype {
        FloatDType::F16 => 1e-2,
        FloatDType::BF16 => 5e-2,
        FloatDType::F64 | FloatDType::F32 | FloatDType::Flex32 => 0.0,
    }
}

/// Where an output's dtype comes from (the manifest's output `dtype`), for
/// [`Op::output_dtype`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputDtype {
    /// The dtype of this input in the same call (`dtype = "x"`).
    Input(&'static str),
    /// The device's default dtype of the output's kind (`dtype = "default"`).
    Default,
}

/// How the manifest spells a dtype.
fn dtype_label(dtype: FloatDType) -> String {
    crate::rt::dtype_name(DType::from(dtype))
}

/// The dtypes a check tries beyond the declared ones: those Flex stores.
const CHECKED_DTYPES: [FloatDType; 4] = [
    FloatDType::F32,
    FloatDType::F64,
    FloatDType::F16,
    FloatDType::BF16,
];

/// The default range of a float input: values uniform in `[-2, 2)`.
pub const DEFAULT_FLOAT_RANGE: (f64, f64) = (-2.0, 2.0);

/// The default range of an int input: the integers in `[0, 4)`.
pub const DEFAULT_INT_RANGE: (f64, f64) = (0.0, 4.0);

/// How an input holds its tensors (the type of the op's parameter): one `DispatchTensor`, an
/// `Option` (checked present, and absent once, values only) or a `Vec` (one shape per element).
pub use burn_route_core::Container;

/// Drives the future of an async op to completion on the calling thread: what the check
/// closure of an async op (`async = true`) does with its `try_` function's future. (Burn's own
/// blocking reader, as `Tensor::into_data` uses.)
pub fn block_on<F: core::future::Future>(future: F) -> F::Output {
    burn_tensor::read_sync(future)
}

/// Runs every check of `op` (see the [module docs](self)) with `f` calling the op, on Flex and
/// on the backends this build has (`Cube`; a remote device named by [`REMOTE_ENV`]).
///
/// # Panics
///
/// When a check fails, with the op, the check, the input or output and the worst element.
#[track_caller]
pub fn run<F>(op: &Op, f: F)
where
    F: FnMut(&mut Args) -> Result<Vec<Value>, RouteError>,
{
    run_on(op, &[], f);
}

/// [`run`], with the values also compared on each of `devices` (a `Remote` device a test
/// serves itself, a second GPU, ...) after the backends [`run`] compares on.
///
/// # Panics
///
/// When a check fails, with the op, the check, the input or output and the worst element.
#[track_caller]
pub fn run_on<F>(op: &Op, devices: &[Device], mut f: F)
where
    F: FnMut(&mut Args) -> Result<Vec<Value>, RouteError>,
{
    let mut routed = devices_of(op);
    if routed.is_empty() {
        eprintln!(
            "op check: op `{}` skipped: this build has none of its backends ({:?})",
            op.name,
            op.backends.as_deref().unwrap_or_default()
        );
        return;
    }
    let reference = routed.remove(0);
    // An op whose kernels take neither `f32` nor `f64` is checked in the half dtype it takes;
    // finite differences in half precision are noise, so its gradients are not checked.
    let baseline = op.baseline_dtype();
    let half = matches!(baseline, Some(FloatDType::F16 | FloatDType::BF16));
    let relaxed;
    let op = if half && op.gradients {
        eprintln!(
            "op check: op `{}`: its kernels take no `f32` or `f64`, so its values are checked in \
             {} and its gradients are not checked against finite differences",
            op.name,
            dtype_label(baseline.unwrap_or(FloatDType::F32))
        );
        relaxed = op.clone().gradients(false);
        &relaxed
    } else {
        op
    };
    let checker = Checker::new(op, reference.clone()).in_dtype(baseline);

    // 1. Values on the reference device: every input present, then each optional input absent
    //    once.
    let variants = checker.variants();
    let baselines: Vec<Vec<HostLeaf>> = variants
        .iter()
        .map(|&absent| {
            let check =
                checker.variant_check(&format!("values on {}", checker.reference_name()), absent);
            checker.values(&check, &reference, absent, &mut f)
        })
        .collect();
    checker.check_output_shapes(&baselines[0]);

    // 2. The same values on every other backend.
    let mut others = routed;
    others.extend(devices.iter().cloned());
    for device in &others {
        for (&absent, expected) in variants.iter().zip(&baselines) {
            let check = checker.variant_check(
                &format!("values on {device:?} against {}", checker.reference_name()),
                absent,
            );
            let actual = checker.values(&check, device, absent, &mut f);
            if let Err(mismatch) = compare_leaves(&actual, expected, op.value_tolerance) {
                let fix = mismatch.fix(
                    "the op's implementation on this device disagrees with its kernel on the \
                     reference device: fix whichever is wrong (run both on these inputs)",
                    "the value tolerance (`Op::value_tolerance`)",
                    op.value_tolerance,
                );
                fail(op.name, &check, &mismatch.detail, &fix)
            }
        }
    }

    // 3. The autodiff policy.
    #[cfg(feature = "autodiff")]
    checker.policy(&baselines[0], &mut f);

    // 4. The declared dtypes, and what another dtype does (on Flex, which stores them all).
    if checker.reference == Device::flex() {
        checker.dtypes(&baselines[0], &mut f);
    }
}

/// Runs `kernel` and `reference` (the op's composition, called with the same arguments) on the
/// same Flex inputs (every input present, then each optional input absent once) and compares
/// their outputs within the value tolerance: the op's kernels against its `composition`.
///
/// # Panics
///
/// When a closure fails or the outputs differ, naming the op, `what`, the output and the worst
/// element.
#[track_caller]
pub fn compare_with<F, G>(op: &Op, what: &str, mut kernel: F, mut reference: G)
where
    F: FnMut(&mut Args) -> Result<Vec<Value>, RouteError>,
    G: FnMut(&mut Args) -> Result<Vec<Value>, RouteError>,
{
    let Some(device) = devices_of(op).into_iter().next() else {
        return;
    };
    // The device's default dtype; on Flex, each declared dtype and, when another dtype runs the
    // composition, one of those too.
    let baseline = op.baseline_dtype();
    let mut dtypes = vec![baseline];
    if device == Device::flex() {
        dtypes.extend(
            op.checked_dtypes()
                .into_iter()
                .filter(|d| Some(*d) != baseline)
                .map(Some),
        );
        if op.other_dtypes == OtherDtypes::Composition {
            dtypes.extend(op.undeclared_dtype().map(Some));
        }
    }
    for dtype in dtypes {
        let checker = Checker::new(op, device.clone()).in_dtype(dtype);
        let tol = dtype.map_or(op.value_tolerance, |d| {
            op.value_tolerance.max(dtype_tolerance(d))
        });
        let in_dtype = match dtype {
            Some(d) if !op.dtypes.contains(&d) => {
                format!(" in {} (its fallback)", dtype_label(d))
            }
            Some(d) => format!(" in {}", dtype_label(d)),
            None => String::new(),
        };
        for absent in checker.variants() {
            let check = checker.variant_check(
                &format!(
                    "kernel against its {what}{in_dtype} on {}",
                    checker.reference_name()
                ),
                absent,
            );
            let actual = checker.values(&check, &device, absent, &mut kernel);
            let expected = checker.values(&check, &device, absent, &mut reference);
            if let Err(mismatch) = compare_leaves(&actual, &expected, tol) {
                let fix = mismatch.fix(
                    &format!(
                        "the op's Flex kernel disagrees with its {what}: fix whichever is wrong \
                         (run both on these inputs)"
                    ),
                    "the value tolerance (`Op::value_tolerance`)",
                    tol,
                );
                fail(op.name, &check, &mismatch.detail, &fix)
            }
        }
    }
}

/// The spec (shape and the default dtype of `kind`: `F32`, `I64` or native `Bool`) of a tensor
/// input of `shape`, for the output metadata functions a check evaluates.
pub fn spec(kind: TensorKind, shape: &[usize]) -> TensorSpec {
    let dtype = match kind {
        TensorKind::Float => burn_backend::DType::F32,
        TensorKind::Int => burn_backend::DType::I64,
        TensorKind::Bool => burn_backend::DType::Bool(burn_backend::BoolStore::Native),
        TensorKind::Quantized => panic!(
            "op check: a quantized input has no default spec (its dtype names a quantization \
             scheme). Fix: check the op by hand, as the generated check does for quantized ops"
        ),
    };
    TensorSpec::new(crate::rt::Shape::from(shape.to_vec()), dtype)
}

/// This build's Cube device: wgpu on the adapter [`WGPU_ADAPTER_ENV`] names (a CPU adapter,
/// lavapipe in CI, by default) or CUDA device 0.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn cube_device() -> Device {
    #[cfg(feature = "wgpu")]
    return Device::wgpu(wgpu_adapter());
    #[cfg(all(feature = "cuda", not(feature = "wgpu")))]
    return Device::cuda(0);
}

/// The devices of `op`'s backends this build has, the reference first (Flex when listed).
fn devices_of(op: &Op) -> Vec<Device> {
    let mut devices = Vec::new();
    if op.routed(BackendId::Flex) {
        devices.push(Device::flex());
    }
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    if op.routed(BackendId::Cube) {
        devices.push(cube_device());
    }
    if op.routed(BackendId::Remote) {
        devices.extend(remote_from_env());
    }
    devices
}

/// The remote device [`REMOTE_ENV`] names, if any.
fn remote_from_env() -> Option<Device> {
    let remote = std::env::var(REMOTE_ENV)
        .ok()
        .filter(|a| !a.trim().is_empty());
    let address = remote?;
    #[cfg(feature = "remote")]
    return Some(remote_device(address.trim()));
    #[cfg(not(feature = "remote"))]
    {
        eprintln!(
            "op check: {REMOTE_ENV}={address} is ignored: this build of burn-route has no \
             `remote` feature. Fix: build with `--features remote`, or unset {REMOTE_ENV}"
        );
        None
    }
}

/// A client device on the burn-remote server at `address` (`ws://` is added when missing).
#[cfg(feature = "remote")]
fn remote_device(address: &str) -> Device {
    use burn_tensor::remote::RemoteHost;
    let url = if address.contains("://") {
        address.to_owned()
    } else {
        format!("ws://{address}")
    };
    Device::remote_options(&RemoteHost::websocket(&url))
        .init()
        .unwrap_or_else(|err| {
            panic!(
                "op check: cannot connect to the remote device {url} named by {REMOTE_ENV}: \
                 {err} Fix: start a burn-remote server there, or unset {REMOTE_ENV}"
            )
        })
}

/// Compares two sets of outputs leaf by leaf (see [`Op::output_shape`] for the leaves): the same
/// number of leaves, the same kinds, presence and shapes; float elements within `tol`
/// (`|actual - expected| <= tol * (1 + |expected|)`, NaN equal only to NaN), int and bool
/// elements exactly. For checks such as a fused kernel (`actual`) against its composition
/// (`expected`); `what` names the comparison in the message.
///
/// # Panics
///
/// On a difference, naming `op_name`, `what`, the output leaf and its worst element (flat index
/// and index, got, expected, difference).
#[track_caller]
pub fn compare(op_name: &str, what: &str, actual: &[Value], expected: &[Value], tol: f64) {
    let read_all = |values: &[Value], side: &str| -> Vec<HostLeaf> {
        flatten(values.to_vec())
            .into_iter()
            .map(|leaf| {
                read_leaf(leaf).unwrap_or_else(|detail| {
                    fail(
                        op_name,
                        what,
                        &format!("reading the {side} outputs: {detail}"),
                        "wrap each output in the `Value` constructor of its kind",
                    )
                })
            })
            .collect()
    };
    let actual = read_all(actual, "actual");
    let expected = read_all(expected, "expected");
    if let Err(mismatch) = compare_leaves(&actual, &expected, tol) {
        let fix = mismatch.fix(
            "the actual outputs must match the expected ones: fix the computation that gives the \
             actual values",
            "the tolerance",
            tol,
        );
        fail(op_name, what, &mismatch.detail, &fix);
    }
}

/// Panics with the check's message.
#[track_caller]
fn fail(op: &str, check: &str, detail: &str, fix: &str) -> ! {
    let stop = if detail.ends_with(['.', '?', '!']) {
        ""
    } else {
        "."
    };
    let end = if fix.ends_with(['.', '?', '!']) {
        ""
    } else {
        "."
    };
    panic!(
        "op check failed: op `{op}`, {check}: {detail}{stop} Fix: {fix}{end} See {}",
        burn_route_core::errors::link("op-check-failed")
    )
}

/// The text a panic carried.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else {
        "(a panic without a message)".to_owned()
    }
}

mod args;
#[cfg(feature = "autodiff")]
mod autodiff;
mod checker;
mod draw;
mod host;
mod op;

use args::Slot;
pub use args::{Args, Value};
use checker::*;
use draw::*;
use host::*;
pub use op::{Input, Op};

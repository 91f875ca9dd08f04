#![cfg(feature = "remote")]
//! Every op through `Remote`: a burn-remote server on loopback serves a Flex device, and this
//! process, its client, runs every op and a backward pass there. Values and gradients must equal
//! local Flex. The server listens on 127.0.0.1 over WebSocket only, and each test stops its own
//! server before it returns: bounded in time, its thread joined and its port free again.

use crate::loopback;
use crate::parity;

use crate::common::values;
use burn_route::rt::{BackendId, InputName, RemoteProblem, RouteError, remote};
use burn_route::{add_relu, ramp, try_add_relu, try_iota};
use burn_tensor::server::RemoteServer;
use burn_tensor::{Device, Tensor};
use loopback::LoopbackServer;

#[test]
fn every_op_gives_the_flex_values_through_remote() {
    let server = LoopbackServer::start();
    parity::every_op_gives_the_flex_values(&server.device());
}

/// The autodiff graph is the client's: the server runs the forward and backward primitives.
#[cfg(feature = "autodiff")]
#[test]
fn gradients_through_remote_match_flex() {
    let server = LoopbackServer::start();
    let device = server.device().autodiff();
    parity::gradients_match_flex(&device);

    // And the routing keeps a tracked remote tensor on Remote, tracked.
    let x = Tensor::<1>::from_data([1.0, -2.0, 3.0], &device).require_grad();
    let y = Tensor::<1>::from_data([0.5, 0.5, -4.0], &device);
    let out = add_relu(x.clone(), y);
    assert!(out.is_tracked(), "the output is tracked");
    assert_eq!(
        out.device(),
        device,
        "the output stays on the remote device"
    );
    let g = out.sum().backward();
    assert_eq!(values(&x.grad(&g).expect("grad")), [1.0, 0.0, 0.0]);
}

#[test]
fn remote_and_local_inputs_are_a_backend_mismatch() {
    let server = LoopbackServer::start();
    let remote = server.device();
    let local = Tensor::<1>::from_data([1.0, 2.0], &Device::flex());
    let far = Tensor::<1>::from_data([1.0, 2.0], &remote);
    assert_eq!(
        try_add_relu(far, local).unwrap_err(),
        RouteError::BackendMismatch {
            op: "add_relu",
            input: InputName::new("rhs"),
            backend: BackendId::Flex,
            routing_input: InputName::new("lhs"),
            routing_backend: BackendId::Remote,
        }
    );
    // `iota` lists only Flex in ops.toml, so a remote device is refused by name.
    let err = try_iota(4, &remote).unwrap_err();
    assert!(
        matches!(
            err,
            RouteError::UnlistedBackend {
                op: "iota",
                backend: BackendId::Remote,
                ..
            }
        ),
        "{err:?}"
    );
}

/// An op without tensor inputs is routed by its device alone: a remote device runs `ramp` on
/// the server, a local one on Flex.
#[test]
fn a_device_only_op_runs_on_the_backend_of_its_device() {
    let server = LoopbackServer::start();
    let remote = server.device();
    let far = ramp(4, &remote);
    assert_eq!(
        far.device(),
        remote,
        "the output stays on the remote device"
    );
    assert_eq!(values(&far), [0.0, 1.0, 2.0, 3.0]);
    let near = ramp(2, &Device::flex());
    assert_eq!(near.device(), Device::flex());
    assert_eq!(values(&near), [0.0, 1.0]);
}

/// A server that registered nothing: an op that runs on the server as one operation is refused
/// at its first call, with the call the server binary must make (the handshake closed the
/// session Burn opened for it; the server keeps serving), while an op that runs its composition
/// there still works.
#[test]
fn a_server_without_the_ops_refuses_each_call_with_the_registration_to_make() {
    let server = LoopbackServer::serving(|server, _| server);
    let device = server.device();
    let x = Tensor::<1>::from_data([1.0, -2.0], &device);
    let err = try_add_relu(x.clone(), x.clone()).unwrap_err();
    let RouteError::RemoteNotServed {
        problem: RemoteProblem::NotServed(cause),
        ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(
        err,
        RouteError::RemoteNotServed {
            op: "add_relu",
            id: format!(
                "burn-route/burn_route::dispatch/add_relu/{:016x}",
                add_relu_hash()
            )
            .into(),
            krate: "burn-route",
            serve: "burn_route::dispatch::serve_remote_ops",
            problem: RemoteProblem::NotServed(cause.clone()),
        }
    );
    assert_eq!(
        err.to_string(),
        format!(
            "the Remote server does not serve the ops of crate `burn-route`: op `add_relu` runs on \
             the server as one operation (`burn-route/burn_route::dispatch/add_relu/{:016x}`), and \
             the server did not answer the crate's handshake ({cause}). Burn's server closes a \
             session at an operation it has no handler for, and at one that fails: either the \
             server does not register the crate's ops, or an earlier operation of this session \
             failed on the server (its log names it). Fix: in the server binary, register the \
             crate's ops with `burn_route::dispatch::serve_remote_ops(server, &devices)` before \
             serving, with the same version of crate `burn-route`; after a failed operation, fix \
             its cause; then reconnect. See \
             https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#remote-not-served",
            add_relu_hash()
        )
    );
    // Asked once: the second call gets the same answer without asking again.
    assert_eq!(try_add_relu(x.clone(), x).unwrap_err(), err);
    // The panicking form panics with the same text.
    let y = Tensor::<1>::from_data([1.0, -2.0], &device);
    let panicked = std::panic::catch_unwind(|| add_relu(y.clone(), y)).unwrap_err();
    assert_eq!(
        panicked.downcast_ref::<String>().map(String::as_str),
        Some(err.to_string().as_str())
    );
    // The server still serves: a new session runs an op built from primitives (`scale`, its
    // composition on Remote).
    let fresh = server.device();
    let z = Tensor::<1>::from_data([1.0, -2.0], &fresh);
    assert_eq!(values(&burn_route::scale(z, 3.0)), [3.0, -6.0]);
}

/// The hash of `add_relu`'s declaration, as generated (the id in `generated/routed_dispatch.rs`).
fn add_relu_hash() -> u64 {
    op_hash("ADD_RELU")
}

/// The hash of an op's declaration (its `__REMOTE_` static's name), as generated.
fn op_hash(upper: &str) -> u64 {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/generated/routed_dispatch.rs"
    ))
    .expect("the checked-in dispatch file");
    let start = text
        .find(&format!("static __REMOTE_{upper}:"))
        .expect("the op's operation");
    let line = text[start..]
        .lines()
        .find(|l| l.trim_start().starts_with("hash: 0x"))
        .expect("its hash");
    let digits: String = line
        .trim()
        .trim_start_matches("hash: 0x")
        .trim_end_matches(',')
        .replace('_', "");
    u64::from_str_radix(&digits, 16).expect("hex")
}

/// What a server built from another version of `ops.toml` registers: `add_relu` with another
/// declaration, and no `bias_gelu`.
pub(crate) fn serve_another_version(server: RemoteServer, _: &[Device]) -> RemoteServer {
    static OTHER_ADD_RELU: burn_route::rt::__private::RemoteOp =
        burn_route::rt::__private::RemoteOp {
            op: "add_relu",
            hash: 1,
            krate: "burn-route",
            module: "burn_route::dispatch",
            serve: "burn_route::dispatch::serve_remote_ops",
        };
    fn never(_: &mut remote::Args<'_, burn_route::rt::Flex>) -> Result<(), String> {
        Err("not this declaration".to_owned())
    }
    remote::Serve::<burn_route::rt::Flex>::new(server, "burn_route::dispatch")
        .op(&OTHER_ADD_RELU, never)
        .finish()
}

/// A server built from another manifest: an op it declares differently, and an op it does not
/// have, are refused at the call with what the server has; nothing runs the other's op.
#[test]
fn a_server_of_another_manifest_refuses_its_differing_and_missing_ops() {
    let server = LoopbackServer::serving(serve_another_version);
    let device = server.device();
    let x = Tensor::<2>::from_data([[1.0, -2.0], [0.5, 3.0]], &device);
    let id = format!(
        "burn-route/burn_route::dispatch/add_relu/{:016x}",
        add_relu_hash()
    );
    let err = try_add_relu(x.clone(), x.clone()).unwrap_err();
    assert_eq!(err.to_string(), other_version_text(&id));
    crate::error_reference::assert_sample(&err.to_string());
    let bias = Tensor::<1>::from_data([1.0, 2.0], &device);
    let err = burn_route::try_bias_gelu(x, bias).unwrap_err();
    let RouteError::RemoteNotServed { problem, id, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(problem, &RemoteProblem::Missing);
    assert_eq!(err.to_string(), missing_text(id));
    crate::error_reference::assert_sample(&err.to_string());
}

/// The client's declaration of op `op` (`upper`: its static's name), for a server's handler.
fn declared(op: &'static str, upper: &str) -> &'static burn_route::rt::__private::RemoteOp {
    Box::leak(Box::new(burn_route::rt::__private::RemoteOp {
        op,
        hash: op_hash(upper),
        krate: "burn-route",
        module: "burn_route::dispatch",
        serve: "burn_route::dispatch::serve_remote_ops",
    }))
}

/// A server whose `add_relu` (the client's declaration) returns an error, and whose `bias_gelu`
/// panics.
fn serve_failing_ops(server: RemoteServer, _: &[Device]) -> RemoteServer {
    fn fails(_: &mut remote::Args<'_, burn_route::rt::Flex>) -> Result<(), String> {
        Err("the kernel refused its inputs".to_owned())
    }
    fn panics(_: &mut remote::Args<'_, burn_route::rt::Flex>) -> Result<(), String> {
        panic!("a kernel bug")
    }
    remote::Serve::<burn_route::rt::Flex>::new(server, "burn_route::dispatch")
        .op(declared("add_relu", "ADD_RELU"), fails)
        .op(declared("bias_gelu", "BIAS_GELU"), panics)
        .finish()
}

/// An op that fails on the server (its handler's error, or a kernel panic) fails the client's
/// read of its outputs instead of hanging: Burn's server ends that session, logging the op, the
/// crate and the cause; the server goes on serving new sessions.
#[test]
fn an_op_that_fails_on_the_server_fails_the_read_of_its_outputs() {
    let server = LoopbackServer::serving(serve_failing_ops);
    let device = server.device();
    let x = Tensor::<1>::from_data([1.0, -2.0], &device);
    let out = try_add_relu(x.clone(), x).expect("the server has the op");
    assert!(out.try_into_data().is_err());

    let fresh = server.device();
    let x = Tensor::<1>::from_data([1.0, -2.0], &fresh);
    let out = burn_route::try_bias_gelu(x.clone(), x).expect("the server has the op");
    assert!(out.try_into_data().is_err());

    let fresh = server.device();
    let z = Tensor::<1>::from_data([1.0, -2.0], &fresh);
    assert_eq!(values(&burn_route::scale(z, 3.0)), [3.0, -6.0]);
}

/// The exact text of the error for `add_relu` on a server with another declaration of it
/// (`id`: the client's operation id).
pub(crate) fn other_version_text(id: &str) -> String {
    format!(
        "the Remote server serves another version of op `add_relu`: its build of crate \
         `burn-route` declares the op differently (the client's is `{id}`), so neither side \
         could read the other's arguments and outputs. Fix: build the server binary and the \
         client from the same manifest (the same version of crate `burn-route`, whose \
         `burn_route::dispatch::serve_remote_ops` the server calls). See \
         https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#remote-op-version"
    )
}

/// The exact text of the error for `bias_gelu` on a server whose manifest lacks it.
pub(crate) fn missing_text(id: &str) -> String {
    format!(
        "the Remote server does not serve op `bias_gelu`: it serves the ops of crate \
         `burn-route`, but not op `bias_gelu` (`{id}`): the server runs an op with its own \
         backend's kernel, so either the op is not routed to the server's backend (its \
         `backends` in the manifest), or the server's build of the crate has no such op. Fix: \
         route the op to the backend the server runs, or rebuild the server binary with the \
         client's version of crate `burn-route` (it calls \
         `burn_route::dispatch::serve_remote_ops`). See \
         https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#remote-op-missing"
    )
}

/// Tracked, without gradient checkpointing, `rms_norm_swiglu_mlp` still runs on Remote as one
/// operation (Remote's backend keeps no projections: `BackwardKernels::rms_norm_swiglu_mlp_keeping`
/// is `None` there, where its composition would be several): a server that registered nothing
/// refuses the call, naming the op.
#[cfg(feature = "autodiff")]
#[test]
fn a_tracked_mlp_still_runs_on_the_server_as_one_operation() {
    use burn_route::rms_norm_swiglu_mlp;
    let server = LoopbackServer::serving(|server, _| server);
    let device = server.device().autodiff();
    let x = Tensor::<2>::ones([2, 3], &device).require_grad();
    let norm = Tensor::<1>::ones([3], &device);
    let [gate, up] = [0; 2].map(|_| Tensor::<2>::ones([3, 4], &device).require_grad());
    let down = Tensor::<2>::ones([4, 3], &device);
    let message = crate::common::panic_message(|| {
        let _ = rms_norm_swiglu_mlp(x, norm, gate, up, down, 1e-5);
    });
    assert!(
        message.contains("op `rms_norm_swiglu_mlp` runs on the server as one operation"),
        "{message}"
    );
}

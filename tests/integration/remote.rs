#![cfg(feature = "remote")]
//! Every op through `Remote`: a burn-remote server on loopback serves a Flex device, and this
//! process, its client, runs every op and a backward pass there. Values and gradients must equal
//! local Flex. The server listens on 127.0.0.1 over WebSocket only, and each test stops its own
//! server before it returns: bounded in time, its thread joined and its port free again.

use crate::loopback;
use crate::parity;

use crate::common::values;
use burn_route::rt::{BackendId, InputName, RouteError};
use burn_route::{add_relu, ramp, try_add_relu, try_iota};
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

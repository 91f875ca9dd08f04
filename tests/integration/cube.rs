#![cfg(feature = "wgpu")]
//! Every op on `Cube` (cubecl's wgpu runtime) against the same op on Flex, values and gradients,
//! in one binary with both backends compiled in. On a machine without a GPU, wgpu runs on
//! lavapipe (Vulkan, Debian's `mesa-vulkan-drivers`) or llvmpipe (GL); `.ci/run` installs the
//! former.

use crate::parity;

use crate::common::values;
use burn_route::rt::{BackendId, InputName, RouteError};
use burn_route::{add_relu, ramp, try_add_relu, try_iota};
use burn_tensor::{Device, Tensor};

fn gpu() -> Device {
    Device::wgpu(crate::adapter::device_kind())
}

#[test]
fn every_op_gives_the_flex_values_on_cube() {
    parity::every_op_gives_the_flex_values(&gpu());
}

/// Gradients of every differentiable op on `Autodiff<Cube>` against `Autodiff<Flex>`.
#[cfg(feature = "autodiff")]
#[test]
fn gradients_on_cube_match_flex() {
    parity::gradients_match_flex(&gpu().autodiff());
}

/// With Flex and Cube in one binary, a tracked tensor is routed inside the `Autodiff` kind to
/// its own backend: the output stays on the input's device, tracked.
#[cfg(feature = "autodiff")]
#[test]
fn tracked_tensors_are_routed_to_their_own_backend() {
    for device in [Device::flex().autodiff(), gpu().autodiff()] {
        let x = Tensor::<1>::from_data([1.0, -2.0, 3.0], &device).require_grad();
        let y = Tensor::<1>::from_data([0.5, 0.5, -4.0], &device);
        let out = add_relu(x.clone(), y);
        assert!(out.is_tracked(), "{device:?}: output is tracked");
        assert_eq!(out.device(), device, "output stays on {device:?}");
        let g = out.sum().backward();
        assert_eq!(values(&x.grad(&g).expect("grad")), [1.0, 0.0, 0.0]);
    }
}

#[test]
fn inputs_on_flex_and_cube_are_a_backend_mismatch() {
    let flex = Tensor::<1>::from_data([1.0, 2.0], &Device::flex());
    let cube = Tensor::<1>::from_data([1.0, 2.0], &gpu());
    let err = try_add_relu(flex, cube).unwrap_err();
    assert_eq!(
        err,
        RouteError::BackendMismatch {
            op: "add_relu",
            input: InputName::new("rhs"),
            backend: BackendId::Cube,
            routing_input: InputName::new("lhs"),
            routing_backend: BackendId::Flex,
        }
    );
}

/// Tracked inputs on two backends are a mismatch too: neither is routed to the other's
/// `Autodiff` kernel.
#[cfg(feature = "autodiff")]
#[test]
fn tracked_inputs_on_flex_and_cube_are_a_backend_mismatch() {
    let cube = Tensor::<1>::from_data([1.0, 2.0], &gpu().autodiff()).require_grad();
    let flex = Tensor::<1>::from_data([1.0, 2.0], &Device::flex().autodiff()).require_grad();
    assert_eq!(
        try_add_relu(cube, flex).unwrap_err(),
        RouteError::BackendMismatch {
            op: "add_relu",
            input: InputName::new("rhs"),
            backend: BackendId::Flex,
            routing_input: InputName::new("lhs"),
            routing_backend: BackendId::Cube,
        }
    );
}

#[test]
fn a_flex_only_op_refuses_a_cube_device_by_name() {
    let err = try_iota(4, &gpu()).unwrap_err();
    assert!(
        matches!(
            err,
            RouteError::UnlistedBackend {
                op: "iota",
                backend: BackendId::Cube,
                ..
            }
        ),
        "{err:?}"
    );
}

/// An op without tensor inputs is routed by its device alone, to each backend the manifest
/// lists: a Cube device runs `ramp` on Cube, next to Flex in the same binary.
#[test]
fn a_device_only_op_runs_on_the_backend_of_its_device() {
    let on_gpu = ramp(5, &gpu());
    assert_eq!(on_gpu.device(), gpu());
    assert_eq!(values(&on_gpu), [0.0, 1.0, 2.0, 3.0, 4.0]);
    let on_cpu = ramp(2, &Device::flex());
    assert_eq!(on_cpu.device(), Device::flex());
    assert_eq!(values(&on_cpu), [0.0, 1.0]);
    // And under autodiff on Cube: an untracked autodiff float on the Cube device.
    let tracked_device = gpu().autodiff();
    let out = ramp(3, &tracked_device);
    assert!(out.is_autodiff());
    assert_eq!(values(&out), [0.0, 1.0, 2.0]);
}

/// The ops with CubeCL kernels take `f16` on Cube (lavapipe stores it; `bf16` where the device
/// does, else a skip says so): see [`crate::half_precision`]. Run with fusion off and on in CI.
#[test]
fn kernel_ops_take_half_precision_on_cube() {
    crate::half_precision::kernel_ops_match_f32(&gpu());
}

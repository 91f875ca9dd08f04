//! The error reference's runtime samples (`burn_route::errors`) that name one of this crate's
//! ops are what a real call says today: its manifest lines, input names and Remote ids. (The
//! runtime's own test, `rt::error_samples`, checks that every runtime sample is a `RouteError`'s
//! text word for word; this one checks the facts in them.)

use crate::common::panic_message;
use burn_route::rt::{Checkpointing, DispatchAutodiffContext, DispatchTensor};
use burn_route::{dispatch, try_dequantize_relu, try_rms_norm, try_sum_all};
use burn_tensor::{Device, Tensor};

/// Panics unless `message` is one of the reference's samples, word for word.
#[track_caller]
pub(crate) fn assert_sample(message: &str) {
    assert!(
        burn_route::errors::runtime_samples().any(|s| s == message),
        "the error reference (core/src/errors.md) has no sample with this call's message; \
         update the sample to:\n{message}"
    );
}

fn flex_float() -> DispatchTensor {
    Tensor::<1>::from_data([1.0, 2.0], &Device::flex()).into_dispatch()
}

#[cfg(feature = "autodiff")]
#[test]
fn a_tracked_input_of_a_reject_op() {
    let x = Tensor::<1>::from_data([0.5, 1.5], &Device::flex().autodiff()).require_grad();
    let err = burn_route::try_round_half_even(x).unwrap_err();
    assert_sample(&err.to_string());
}

#[cfg(feature = "autodiff")]
#[test]
fn malformed_dispatch_tensors() {
    use burn_route::rt::DispatchTensorKind;
    let tracked = || {
        Tensor::<1>::from_data([1.0, 2.0], &Device::flex().autodiff())
            .require_grad()
            .into_dispatch()
    };
    // A plain float primitive under an enabled context.
    let mut enabled = flex_float();
    enabled.autodiff = DispatchAutodiffContext::Enabled(Checkpointing::Disabled);
    // An autodiff primitive under a disabled context.
    let mut disabled = tracked();
    disabled.autodiff = DispatchAutodiffContext::Disabled;
    // An int primitive wrapped as autodiff.
    let DispatchTensorKind::Flex(int) =
        Tensor::<1, burn_tensor::Int>::from_data([1, 2], &Device::flex())
            .into_dispatch()
            .kind
    else {
        panic!("a Flex tensor")
    };
    let wrapped_int = DispatchTensor {
        kind: DispatchTensorKind::Autodiff(Box::new(DispatchTensorKind::Flex(int))),
        autodiff: DispatchAutodiffContext::Enabled(Checkpointing::Disabled),
    };
    // An autodiff primitive outside the autodiff kind, and one wrapped twice.
    let DispatchTensorKind::Autodiff(inner) = tracked().kind else {
        panic!("an autodiff tensor")
    };
    let unwrapped = DispatchTensor {
        kind: *inner,
        autodiff: DispatchAutodiffContext::Enabled(Checkpointing::Disabled),
    };
    let t = tracked();
    let nested = DispatchTensor {
        kind: DispatchTensorKind::Autodiff(Box::new(t.kind)),
        autodiff: t.autodiff,
    };
    for (lhs, rhs) in [
        (wrapped_int, flex_float()),
        (enabled, flex_float()),
        (flex_float(), disabled),
        (unwrapped, flex_float()),
        (nested, flex_float()),
    ] {
        let err = dispatch::try_add_relu(lhs, rhs).unwrap_err();
        assert_sample(&err.to_string());
    }
}

#[cfg(not(feature = "autodiff"))]
#[test]
fn an_enabled_context_without_the_autodiff_feature() {
    let mut rhs = flex_float();
    rhs.autodiff = DispatchAutodiffContext::Enabled(Checkpointing::Disabled);
    let err = dispatch::try_add_relu(flex_float(), rhs).unwrap_err();
    assert_sample(&err.to_string());
}

#[cfg(feature = "autodiff")]
#[test]
fn inputs_with_different_checkpointing() {
    let plain = Device::flex().autodiff();
    let balanced = Device::flex().autodiff().gradient_checkpointing();
    let a = Tensor::<1>::from_data([1.0], &plain).require_grad();
    let b = Tensor::<1>::from_data([1.0], &balanced).require_grad();
    let err = burn_route::try_add_relu(a, b).unwrap_err();
    assert_sample(&err.to_string());
}

#[test]
fn a_float_where_a_quantized_tensor_is_declared() {
    let x = Tensor::<1>::from_data([1.0, 2.0], &Device::flex());
    assert_sample(&try_dequantize_relu(x).unwrap_err().to_string());
}

#[test]
fn no_tensor_to_route_by() {
    let err = try_sum_all::<1>(Vec::new()).unwrap_err();
    assert_sample(&err.to_string());
}

#[test]
fn a_shape_its_contract_refuses() {
    let device = Device::flex();
    let x = Tensor::<2>::ones([2, 4], &device);
    let err = try_rms_norm(x, Tensor::<1>::ones([1], &device), 1e-5).unwrap_err();
    assert_sample(&err.to_string());
}

/// `iota` on Cube (listed for Flex only), and `add_relu` across Flex and Cube.
#[cfg(feature = "wgpu")]
#[test]
fn backends_the_op_does_not_take() {
    let cube = Device::wgpu(crate::adapter::device_kind());
    assert_sample(&burn_route::try_iota(3, &cube).unwrap_err().to_string());
    let lhs = Tensor::<1>::from_data([1.0], &Device::flex());
    let rhs = Tensor::<1>::from_data([1.0], &cube);
    assert_sample(&burn_route::try_add_relu(lhs, rhs).unwrap_err().to_string());
}

/// The panicking forms say the same.
#[test]
fn the_panics_carry_the_sample() {
    let message = panic_message(|| drop(burn_route::sum_all::<1>(Vec::new())));
    assert_sample(&message);
}

/// The prose's line of `routing.backends` in this crate's manifest is that line.
#[test]
fn the_routing_backends_line_is_the_manifests() {
    let manifest = include_str!("../../ops.toml");
    let line = 1 + manifest
        .lines()
        .position(|l| l.starts_with("backends = "))
        .expect("routing.backends");
    let cited = format!("`routing.backends` (`ops.toml:{line}`)");
    assert!(
        burn_route::errors::TEXT.contains(&cited),
        "the error reference should cite {cited}"
    );
}

//! Burn's autodiff compiled in (a downstream crate's feature unification does that) while
//! burn-route's `autodiff` feature is off: burn-route cannot name the `Autodiff` variants, yet an
//! autodiff input or device must still be recognised, and the error name its backend and the
//! missing feature. Run by CI as
//! `cargo test -p burn-route-workspace-tests --features burn-autodiff-only --test autodiff_feature_off`.
#![cfg(feature = "burn-autodiff-only")]

use std::panic::{AssertUnwindSafe, catch_unwind};

use burn_route::rt::{BackendId, Dispatch, DispatchTensor, InputName, RouteError};
use burn_route::{dispatch, ops::RoutedOps};
use burn_tensor::{Device, Tensor};

fn panic_message(f: impl FnOnce()) -> String {
    let payload = catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else {
        panic!("panic payload is not a string")
    }
}

/// Runs `add_relu` on dispatch tensors both ways and returns the error and the panic text.
fn add_relu_error(lhs: DispatchTensor, rhs: DispatchTensor) -> (RouteError, String) {
    let err = dispatch::try_add_relu(lhs.clone(), rhs.clone()).expect_err("must be refused");
    let message = panic_message(|| drop(<Dispatch as RoutedOps>::add_relu(lhs, rhs)));
    assert_eq!(
        message,
        err.to_string(),
        "the panic carries the error's text"
    );
    (err, message)
}

fn flex_float(values: [f32; 2]) -> DispatchTensor {
    Tensor::<1>::from_data(values, &Device::flex()).into_dispatch()
}

fn feature_off(op: &'static str, input: &'static str) -> RouteError {
    RouteError::AutodiffFeatureOff {
        op,
        input: InputName::new(input),
        backend: BackendId::Flex,
    }
}

#[test]
fn a_tracked_input_names_its_backend_and_the_feature() {
    let tracked = Tensor::<1>::from_data([1.0, 2.0], &Device::flex().autodiff())
        .require_grad()
        .into_dispatch();
    let (err, message) = add_relu_error(flex_float([1.0, 2.0]), tracked);
    assert_eq!(err, feature_off("add_relu", "rhs"));
    assert!(
        message.starts_with(
            "autodiff context requires the `autodiff` feature: input `rhs` of op `add_relu` \
             (backend Flex) carries an enabled autodiff context"
        ),
        "{message}"
    );
}

#[test]
fn an_untracked_autodiff_input_is_refused_the_same_way() {
    let untracked = Tensor::<1>::from_data([1.0, 2.0], &Device::flex().autodiff()).into_dispatch();
    let (err, _) = add_relu_error(untracked, flex_float([1.0, 2.0]));
    assert_eq!(err, feature_off("add_relu", "lhs"));
}

#[test]
fn an_autodiff_device_names_its_backend_and_the_feature() {
    let device = Device::flex().autodiff();
    let err = dispatch::try_iota(3, device.as_dispatch()).expect_err("must be refused");
    assert_eq!(err, feature_off("iota", "device"));
    let err = dispatch::try_ramp(3, device.as_dispatch()).expect_err("must be refused");
    assert_eq!(err, feature_off("ramp", "device"));
}

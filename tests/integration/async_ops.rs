//! Async ops (`async = true` in ops.toml): `count_nonfinite`, driven on the calling thread by
//! `burn_route::check::block_on` (Burn's own blocking reader, a current-thread executor).
//!
//! Routing happens at the call: the panicking forms panic there, before any poll; the `try_`
//! forms hand the error to their future (and `Planned::error` has it at once); the future owns
//! what it needs, so it is `Send + 'static` and outlives the input tensor.

use crate::common::panic_message;
use burn_route::check::block_on;
use burn_route::rt::{BackendId, Dispatch, InputName, Malformed, RouteError, TensorKind};
use burn_route::{count_nonfinite, dispatch, ops::RoutedOps, try_count_nonfinite};
use burn_tensor::{Device, Int, Tensor};

fn with_nonfinite(device: &Device) -> Tensor<2> {
    Tensor::from_data(
        [
            [1.0, f32::NAN, 3.0],
            [f32::INFINITY, -2.0, f32::NEG_INFINITY],
        ],
        device,
    )
}

#[test]
fn counts_nan_and_both_infinities() {
    let device = Device::flex();
    assert_eq!(block_on(count_nonfinite(&with_nonfinite(&device))), 3);
    assert_eq!(
        block_on(try_count_nonfinite(&with_nonfinite(&device))),
        Ok(3)
    );
    let finite = Tensor::<1>::from_data([1.0, 2.0, 3.0], &device);
    assert_eq!(block_on(count_nonfinite(&finite)), 0);
}

/// On tokio's current-thread runtime, as an async application drives it: several calls in
/// flight at once, awaited together.
#[test]
fn runs_on_a_current_thread_tokio_runtime() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime");
    let device = Device::flex();
    let x = with_nonfinite(&device);
    let finite = Tensor::<1>::from_data([1.0, 2.0], &device);
    let counts = runtime.block_on(async {
        let (a, b) = tokio::join!(count_nonfinite(&x), try_count_nonfinite(&finite));
        (a, b)
    });
    assert_eq!(counts, (3, Ok(0)));
}

#[test]
fn the_dispatch_method_and_try_function_agree() {
    let x = with_nonfinite(&Device::flex()).into_dispatch();
    assert_eq!(block_on(<Dispatch as RoutedOps>::count_nonfinite(&x)), 3);
    assert_eq!(block_on(dispatch::try_count_nonfinite(&x)), Ok(3));
}

#[test]
fn the_future_owns_its_inputs_and_is_send() {
    let x = with_nonfinite(&Device::flex());
    let future = count_nonfinite(&x);
    // Routed already: the input can go, and the future can move to another thread.
    drop(x);
    let count = std::thread::spawn(move || block_on(future))
        .join()
        .expect("the future runs on another thread");
    assert_eq!(count, 3);
}

/// The error a float input holding ints gives: a planning error, known at the call.
fn wrong_kind() -> RouteError {
    RouteError::Malformed {
        op: "count_nonfinite",
        input: InputName::new("x"),
        backend: BackendId::Flex,
        problem: Malformed::WrongKind {
            expected: TensorKind::Float,
            found: "Int",
        },
    }
}

#[test]
fn a_planning_error_is_known_at_the_call() {
    let ints = Tensor::<1, Int>::from_data([1, 2], &Device::flex()).into_dispatch();
    let planned = dispatch::try_count_nonfinite(&ints);
    assert_eq!(planned.error(), Some(&wrong_kind()));
    assert_eq!(block_on(planned), Err(wrong_kind()));
}

#[test]
fn the_panicking_forms_panic_at_the_call_not_at_the_poll() {
    let ints = Tensor::<1, Int>::from_data([1, 2], &Device::flex()).into_dispatch();
    // The future is never polled: the panic comes from the call itself.
    let message = panic_message(|| drop(<Dispatch as RoutedOps>::count_nonfinite(&ints)));
    assert_eq!(message, wrong_kind().to_string());
    assert_eq!(
        message,
        "the input is declared `float` but holds an Int primitive: input `x` of op \
`count_nonfinite` (backend Flex) is a malformed dispatch tensor. Fix: pass a `float` tensor here \
(convert with `.float()`, `.int()` or `.bool()` first). See https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#wrong-kind"
    );
}

#[cfg(feature = "autodiff")]
#[test]
fn a_tracked_input_is_detached() {
    let x = with_nonfinite(&Device::flex().autodiff()).require_grad();
    assert_eq!(block_on(count_nonfinite(&x)), 3);
    assert_eq!(block_on(try_count_nonfinite(&x)), Ok(3));
}

#[cfg(feature = "wgpu")]
#[test]
fn counts_on_cube() {
    let gpu = Device::wgpu(crate::adapter::device_kind());
    assert_eq!(block_on(count_nonfinite(&with_nonfinite(&gpu))), 3);
    assert_eq!(block_on(try_count_nonfinite(&with_nonfinite(&gpu))), Ok(3));
}

#[cfg(feature = "remote")]
use crate::loopback;

#[cfg(feature = "remote")]
#[test]
fn counts_through_remote() {
    let server = loopback::LoopbackServer::start();
    let remote = server.device();
    assert_eq!(block_on(count_nonfinite(&with_nonfinite(&remote))), 3);
}

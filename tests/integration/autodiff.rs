#![cfg(feature = "autodiff")]
//! The three autodiff policies through the generated `Dispatch` route: gradients of the
//! differentiable ops against central finite differences, detach, reject, and mixed inputs.

use crate::common;

use crate::common::{Rng, assert_close, finite_difference, panic_message, tensor, values};
use burn_route::dispatch::{try_add_relu, try_round_half_even};
use burn_route::rt::{BackendId, InputName, RouteError};
use burn_route::{add_relu, argmax_last, round_half_even, scale};
use burn_tensor::{Device, Tensor};

const SHAPES: [[usize; 2]; 3] = [[1, 1], [2, 3], [7, 5]];

/// Random values away from the kink of relu(a + b) so finite differences are exact enough.
fn away_from_kink(rng: &mut Rng, lhs: &[f32]) -> Vec<f32> {
    lhs.iter()
        .map(|a| {
            loop {
                let b = rng.uniform(-2.0, 2.0);
                if (a + b).abs() > 0.1 {
                    break b;
                }
            }
        })
        .collect()
}

#[test]
fn add_relu_gradients_match_finite_differences() {
    let plain = Device::flex();
    let device = Device::flex().autodiff();
    let mut rng = Rng::new(11);
    for shape in SHAPES {
        let n = shape[0] * shape[1];
        let a = rng.vec(n, -2.0, 2.0);
        let b = away_from_kink(&mut rng, &a);
        let w = rng.vec(n, -1.0, 1.0);
        // loss = sum(w * add_relu(a, b)), so every element's gradient differs.
        let loss = |a: &[f32], b: &[f32]| -> f64 {
            let out = add_relu(tensor(a, shape, &plain), tensor(b, shape, &plain));
            values(&out)
                .iter()
                .zip(&w)
                .map(|(o, w)| f64::from(*o) * f64::from(*w))
                .sum()
        };
        let lhs = tensor(&a, shape, &device).require_grad();
        let rhs = tensor(&b, shape, &device).require_grad();
        let out = add_relu(lhs.clone(), rhs.clone());
        assert!(out.is_tracked(), "differentiable output must be tracked");
        // The Flex backward pass writes over the saved output when nothing else holds it, and
        // updates the incoming gradient when something does (here `held`): the same values.
        let held = add_relu(lhs.clone(), rhs.clone());
        let grads_held = (held.clone() * tensor(&w, shape, &device)).sum().backward();
        let grads = (out * tensor(&w, shape, &device)).sum().backward();
        assert_eq!(
            values(&lhs.grad(&grads_held).expect("lhs grad")),
            values(&lhs.grad(&grads).expect("lhs grad")),
            "a held output changes nothing"
        );
        drop(held);
        let fd_lhs = finite_difference(|x| loss(x, &b), &a, 1e-2);
        let fd_rhs = finite_difference(|x| loss(&a, x), &b, 1e-2);
        assert_close(
            &values(&lhs.grad(&grads).expect("lhs grad")),
            &fd_lhs,
            1e-3,
            "d/d lhs",
        );
        assert_close(
            &values(&rhs.grad(&grads).expect("rhs grad")),
            &fd_rhs,
            1e-3,
            "d/d rhs",
        );
    }
}

#[test]
fn add_relu_broadcast_gradient_is_summed() {
    let device = Device::flex().autodiff();
    let lhs =
        Tensor::<2>::from_data([[1.0, -2.0], [3.0, -4.0], [0.5, 0.5]], &device).require_grad();
    let row = Tensor::<2>::from_data([[1.0, 1.0]], &device).require_grad();
    let grads = add_relu(lhs.clone(), row.clone()).sum().backward();
    assert_eq!(
        values(&lhs.grad(&grads).unwrap()),
        [1.0, 0.0, 1.0, 0.0, 1.0, 1.0]
    );
    // The row's gradient sums over the three broadcast rows where the output is positive.
    assert_eq!(values(&row.grad(&grads).unwrap()), [3.0, 1.0]);
}

#[test]
fn scale_gradient_matches_finite_differences() {
    let plain = Device::flex();
    let device = Device::flex().autodiff();
    let mut rng = Rng::new(12);
    for shape in SHAPES {
        let n = shape[0] * shape[1];
        let x = rng.vec(n, -2.0, 2.0);
        let w = rng.vec(n, -1.0, 1.0);
        for alpha in [-1.5f32, 0.25, 3.0] {
            let loss = |x: &[f32]| -> f64 {
                let out = scale(tensor(x, shape, &plain), alpha);
                values(&out)
                    .iter()
                    .zip(&w)
                    .map(|(o, w)| f64::from(*o) * f64::from(*w))
                    .sum()
            };
            let input = tensor(&x, shape, &device).require_grad();
            let grads = (scale(input.clone(), alpha) * tensor(&w, shape, &device))
                .sum()
                .backward();
            let fd = finite_difference(loss, &x, 1e-2);
            assert_close(
                &values(&input.grad(&grads).unwrap()),
                &fd,
                1e-3,
                "d/dx scale",
            );
        }
    }
}

#[test]
fn chained_differentiable_ops_compose_gradients() {
    let device = Device::flex().autodiff();
    let x = Tensor::<1>::from_data([1.0, -1.0, 2.0], &device).require_grad();
    let y = Tensor::<1>::from_data([0.5, 0.5, -3.0], &device).require_grad();
    // d/dx sum(scale(add_relu(x, y), 3)) = 3 where x + y > 0.
    let grads = scale(add_relu(x.clone(), y.clone()), 3.0).sum().backward();
    assert_eq!(values(&x.grad(&grads).unwrap()), [3.0, 0.0, 0.0]);
    assert_eq!(values(&y.grad(&grads).unwrap()), [3.0, 0.0, 0.0]);
}

#[test]
fn balanced_checkpointing_routes_to_the_autodiff_kernel_too() {
    let device = Device::flex().autodiff().gradient_checkpointing();
    let x = Tensor::<1>::from_data([1.0, -1.0, 2.0], &device).require_grad();
    let y = Tensor::<1>::from_data([0.5, 0.5, -3.0], &device);
    let out = scale(add_relu(x.clone(), y), 2.0);
    assert!(out.is_tracked());
    let grads = out.sum().backward();
    assert_eq!(values(&x.grad(&grads).unwrap()), [2.0, 0.0, 0.0]);
}

#[test]
fn untracked_inputs_are_constants_next_to_tracked_ones() {
    let device = Device::flex().autodiff();
    let x = Tensor::<1>::from_data([1.0, -1.0, 2.0], &device).require_grad();
    // Same autodiff device, not requiring grad.
    let constant = Tensor::<1>::from_data([0.5, 0.5, -3.0], &device);
    let grads = add_relu(x.clone(), constant.clone()).sum().backward();
    assert_eq!(values(&x.grad(&grads).unwrap()), [1.0, 0.0, 0.0]);
    assert!(constant.grad(&grads).is_none());
    // A tensor from a device without autodiff, mixed in as the first input.
    let plain = Tensor::<1>::from_data([0.5, 0.5, -3.0], &Device::flex());
    let out = add_relu(plain, x.clone());
    assert!(out.is_tracked());
    let grads = out.sum().backward();
    assert_eq!(values(&x.grad(&grads).unwrap()), [1.0, 0.0, 0.0]);
}

#[test]
fn differentiable_op_on_untracked_autodiff_input_gives_an_untracked_autodiff_output() {
    let device = Device::flex().autodiff();
    let x = Tensor::<1>::from_data([1.0, -2.0], &device);
    let out = scale(x, 2.0);
    assert!(out.is_autodiff());
    assert!(!out.is_tracked());
    assert_eq!(values(&out), [2.0, -4.0]);
}

#[test]
fn detach_op_runs_on_tracked_input_and_adds_no_gradient() {
    let device = Device::flex().autodiff();
    let x = Tensor::<2>::from_data([[1.0, 3.0, 2.0], [9.0, -1.0, 0.0]], &device).require_grad();
    let idx = argmax_last(&x);
    assert_eq!(common::ints(&idx), [1, 0]);
    // The output stays in the caller's autodiff context but carries no gradient: a loss that
    // uses it gives `x` exactly the gradient of the other term.
    assert!(idx.is_autodiff());
    let as_float = idx.float();
    assert!(!as_float.is_tracked());
    let loss = x.clone().sum() + as_float.sum();
    let grads = loss.backward();
    assert_eq!(values(&x.grad(&grads).unwrap()), [1.0; 6]);
}

const TRACKED_MESSAGE: &str = "autodiff float input reached concrete dispatch: op `round_half_even` \
got a tracked float input `x` on backend Flex, but ops.toml:68 declares the op `reject` (the \
default), which would silently drop its gradient. Fix: detach the input before the call \
(`x.without_autodiff()`, or `x.detach()` on an intermediate result), or declare the op \
`autodiff = \"detach\"` (runs without gradient) or `autodiff = \"differentiable\"` (and declare \
its `backward` there) in ops.toml:68. See https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#tracked-input";

#[test]
fn reject_op_refuses_a_tracked_input_with_the_exact_message() {
    let device = Device::flex().autodiff();
    let x = Tensor::<1>::from_data([0.5, 1.5], &device).require_grad();
    let err =
        try_round_half_even(x.clone().into_dispatch()).expect_err("tracked input must be refused");
    assert_eq!(
        err,
        RouteError::TrackedInput {
            op: "round_half_even",
            input: InputName::new("x"),
            backend: BackendId::Flex,
            location: "ops.toml:68"
        }
    );
    assert_eq!(err.to_string(), TRACKED_MESSAGE);
    assert_eq!(
        panic_message(|| drop(round_half_even(x.clone()))),
        TRACKED_MESSAGE
    );
    // An intermediate that depends on a tracked leaf is tracked too.
    let derived = x.clone() * 2.0;
    assert_eq!(
        panic_message(|| drop(round_half_even(derived))),
        TRACKED_MESSAGE
    );
    // The remedy in the message works.
    assert_eq!(values(&round_half_even(x.without_autodiff())), [0.0, 2.0]);
}

#[test]
fn reject_op_runs_untracked_autodiff_inputs() {
    let device = Device::flex().autodiff();
    let x = Tensor::<1>::from_data([0.5, 1.5, 2.5], &device);
    let out = round_half_even(x);
    assert_eq!(values(&out), [0.0, 2.0, 2.0]);
    // Output: an untracked float in the caller's autodiff context.
    assert!(out.is_autodiff());
    assert!(!out.is_tracked());
    // Usable in further autodiff math next to tracked tensors.
    let w = Tensor::<1>::from_data([1.0, 2.0, 3.0], &device).require_grad();
    let grads = (w.clone() * out).sum().backward();
    assert_eq!(values(&w.grad(&grads).unwrap()), [0.0, 2.0, 2.0]);
}

#[test]
fn mismatched_checkpointing_strategies_fail_clearly() {
    let plain = Device::flex().autodiff();
    let balanced = Device::flex().autodiff().gradient_checkpointing();
    let a = Tensor::<1>::from_data([1.0], &plain).require_grad();
    let b = Tensor::<1>::from_data([1.0], &balanced).require_grad();
    let message = "gradient checkpointing strategy mismatch in op `add_relu` (backend Flex): input `lhs` uses Disabled \
but `rhs` uses Balanced. Tensors in one operation must share a strategy. Fix: create both on autodiff \
devices with the same checkpointing setting. See https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#checkpointing-mismatch";
    let err = try_add_relu(a.clone().into_dispatch(), b.clone().into_dispatch()).unwrap_err();
    assert_eq!(err.to_string(), message);
    assert_eq!(panic_message(|| drop(add_relu(a, b))), message);
}

/// The guide's "Using the ops": how a parameter joins a checkpointing device.
/// Made on that device it just works, with the gradient of the run without checkpointing; made
/// with `.autodiff()` (checkpointing disabled) it is the checkpointing-mismatch error, which
/// `to_device` does not change (it keeps the tensor's own autodiff context) but
/// `with_gradient_checkpointing_strategy` does.
#[test]
fn parameters_join_a_checkpointing_device() {
    use burn_route::rt::RouteError;
    use burn_tensor::GradientCheckpointingStrategy;

    let checkpointing = Device::flex().autodiff().gradient_checkpointing();
    let x_values = [[1.0_f32, -2.0, 3.0, 0.5], [0.25, 2.0, -1.0, 4.0]];
    let w_values = [0.5_f32, 1.0, 1.5, 2.0];
    let gradient = |device: &Device, weight: Tensor<1>| {
        let x = Tensor::<2>::from_data(x_values, device);
        let grads = burn_route::rms_norm(x, weight.clone(), 1e-5)
            .sum()
            .backward();
        values(&weight.grad(&grads).expect("the weight's gradient"))
    };

    // The right way: the parameter is made on the checkpointing device.
    let weight = Tensor::<1>::from_data(w_values, &checkpointing).require_grad();
    let plain = Device::flex().autodiff();
    let expected = gradient(
        &plain,
        Tensor::<1>::from_data(w_values, &plain).require_grad(),
    );
    assert_eq!(gradient(&checkpointing, weight), expected);

    // A leaf made with `.autodiff()` has checkpointing disabled: refused with the fix.
    let leaf = Tensor::<1>::from_data(w_values, &Device::flex())
        .autodiff()
        .require_grad();
    let x = Tensor::<2>::from_data(x_values, &checkpointing);
    let refused = |weight: Tensor<1>| {
        matches!(
            burn_route::try_rms_norm(x.clone(), weight, 1e-5),
            Err(RouteError::CheckpointingMismatch { .. })
        )
    };
    assert!(refused(leaf.clone()));
    // `to_device` keeps the tensor's own autodiff context.
    assert!(refused(leaf.clone().to_device(&checkpointing)));
    // Setting the strategy joins it.
    let joined = leaf.with_gradient_checkpointing_strategy(GradientCheckpointingStrategy::Balanced);
    assert!(!refused(joined.clone()));
    assert_eq!(gradient(&checkpointing, joined), expected);
}

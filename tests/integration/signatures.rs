//! The ops that exercise every signature shape: `Option` and `Vec` inputs and outputs, borrowed
//! and int/bool/quantized tensors, tuples, a device-routed factory, and composite ops.
#![cfg(feature = "autodiff")]

use crate::common::{Rng, assert_close, finite_difference, ints, panic_message, tensor, values};
use burn_route::rt::{InputName, RouteError};
use burn_route::{
    axpby, dequantize_relu, iota, masked_fill_count, nan_to_num, ramp, softplus, split_last,
    sum_all, try_sum_all,
};
use burn_tensor::quantization::QuantScheme;
use burn_tensor::{Bool, Device, Tensor};

fn weighted(out: &[f32], w: &[f32]) -> f64 {
    out.iter()
        .zip(w)
        .map(|(o, w)| f64::from(*o) * f64::from(*w))
        .sum()
}

#[test]
fn axpby_with_and_without_the_optional_input() {
    let device = Device::flex();
    let x = Tensor::<1>::from_data([1.0, -2.0, 3.0], &device);
    let y = Tensor::<1>::from_data([0.5, 0.5, 0.5], &device);
    assert_eq!(
        values(&axpby(x.clone(), Some(y.clone()), 2.0, -4.0)),
        [0.0, -6.0, 4.0]
    );
    assert_eq!(values(&axpby(x.clone(), None, 2.0, -4.0)), [2.0, -4.0, 6.0]);
    // Strided `x` and a broadcast `y` take the composed path.
    let m = Tensor::<2>::from_data([[1.0, 2.0], [3.0, 4.0]], &device);
    let row = Tensor::<2>::from_data([[10.0, 20.0]], &device);
    let expected = m.clone().transpose().mul_scalar(2.0) + row.clone().mul_scalar(0.5);
    assert_eq!(
        values(&axpby(m.transpose(), Some(row), 2.0, 0.5)),
        values(&expected)
    );
}

#[test]
fn axpby_gradients_match_finite_differences() {
    let plain = Device::flex();
    let device = Device::flex().autodiff();
    let mut rng = Rng::new(21);
    let (a, b, w) = (
        rng.vec(6, -1.0, 1.0),
        rng.vec(6, -1.0, 1.0),
        rng.vec(6, -1.0, 1.0),
    );
    let (alpha, beta) = (1.5, -0.75);
    let f = |a: &[f32], b: &[f32]| {
        let out = axpby(
            tensor(a, [2, 3], &plain),
            Some(tensor(b, [2, 3], &plain)),
            alpha,
            beta,
        );
        weighted(&values(&out), &w)
    };
    let x = tensor(&a, [2, 3], &device).require_grad();
    let y = tensor(&b, [2, 3], &device).require_grad();
    let out = axpby(x.clone(), Some(y.clone()), alpha, beta);
    let grads = (out * tensor(&w, [2, 3], &device)).sum().backward();
    assert_close(
        &values(&x.grad(&grads).unwrap()),
        &finite_difference(|v| f(v, &b), &a, 1e-2),
        1e-3,
        "d/dx",
    );
    assert_close(
        &values(&y.grad(&grads).unwrap()),
        &finite_difference(|v| f(&a, v), &b, 1e-2),
        1e-3,
        "d/dy",
    );
    // Absent `y`: the gradient of `alpha * x`.
    let grads = axpby(x.clone(), None, alpha, beta).sum().backward();
    assert_eq!(values(&x.grad(&grads).unwrap()), [alpha; 6]);
    // Untracked `y` from a device without autodiff is a constant.
    let grads = axpby(x.clone(), Some(tensor(&b, [2, 3], &plain)), alpha, beta)
        .sum()
        .backward();
    assert_eq!(values(&x.grad(&grads).unwrap()), [alpha; 6]);
}

#[test]
fn sum_all_is_composite_and_differentiable() {
    let device = Device::flex().autodiff();
    let xs: Vec<Tensor<2>> = (0..3)
        .map(|i| {
            Tensor::<2>::from_data([[1.0, 2.0], [3.0, 4.0]], &device)
                .mul_scalar(i as f32 + 1.0)
                .detach()
                .require_grad()
        })
        .collect();
    let out = sum_all(xs.clone());
    assert!(out.is_tracked());
    assert_eq!(values(&out), [6.0, 12.0, 18.0, 24.0]);
    let w = Tensor::<2>::from_data([[1.0, -1.0], [2.0, 0.5]], &device);
    let grads = (out * w).sum().backward();
    for x in &xs {
        assert_eq!(values(&x.grad(&grads).unwrap()), [1.0, -1.0, 2.0, 0.5]);
    }
}

#[test]
fn an_empty_vec_has_no_routing_tensor() {
    let err = try_sum_all::<2>(Vec::new()).unwrap_err();
    assert_eq!(err, RouteError::NoRoutingTensor { op: "sum_all" });
    let message = "op `sum_all` has no tensor to route by: every tensor input is empty or absent \
(a declared type's tensor-less variant counts as absent). Fix: pass at least one tensor. See \
https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#no-routing-tensor";
    assert_eq!(err.to_string(), message);
    assert_eq!(panic_message(|| drop(sum_all::<2>(Vec::new()))), message);
}

#[test]
fn split_last_returns_a_vec_and_its_gradient_flows_back() {
    let plain = Device::flex();
    let device = Device::flex().autodiff();
    let data = [[1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0]];
    let parts = split_last(Tensor::<2>::from_data(data, &plain), vec![2, 3]);
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0].dims(), [2, 2]);
    assert_eq!(values(&parts[0]), [1.0, 2.0, 6.0, 7.0]);
    assert_eq!(values(&parts[1]), [3.0, 4.0, 5.0, 8.0, 9.0, 10.0]);
    let x = Tensor::<2>::from_data(data, &device).require_grad();
    let parts = split_last(x.clone(), vec![2, 3]);
    assert!(parts.iter().all(Tensor::is_tracked));
    let loss = parts[0].clone().sum().mul_scalar(2.0) + parts[1].clone().sum().mul_scalar(-1.0);
    let grads = loss.backward();
    assert_eq!(
        values(&x.grad(&grads).unwrap()),
        [2.0, 2.0, -1.0, -1.0, -1.0, 2.0, 2.0, -1.0, -1.0, -1.0]
    );
    let message =
        panic_message(|| drop(split_last(Tensor::<2>::from_data(data, &plain), vec![2, 2])));
    assert_eq!(
        message,
        "split_last: sizes [2, 2] add up to 4, but the last dimension is 5"
    );
}

#[test]
fn softplus_values_are_stable_and_gradients_match_finite_differences() {
    let plain = Device::flex();
    let device = Device::flex().autodiff();
    let x = Tensor::<1>::from_data([-100.0, -1.0, 0.5, 3.0, 100.0], &plain);
    let expected: Vec<f32> = [-100.0f64, -1.0, 0.5, 3.0, 100.0]
        .iter()
        .map(|v: &f64| ((2.0 * v).exp().ln_1p() / 2.0) as f32)
        .collect();
    assert_close(&values(&softplus(x, 2.0)), &expected, 1e-5, "softplus");
    let mut rng = Rng::new(22);
    let a: Vec<f32> = rng
        .vec(8, -3.0, 3.0)
        .into_iter()
        .map(|v| if v.abs() < 0.05 { 0.5 } else { v })
        .collect();
    let w = rng.vec(8, -1.0, 1.0);
    let f = |v: &[f32]| weighted(&values(&softplus(tensor(v, [8], &plain), 1.5)), &w);
    let t = tensor(&a, [8], &device).require_grad();
    let grads = (softplus(t.clone(), 1.5) * tensor(&w, [8], &device))
        .sum()
        .backward();
    assert_close(
        &values(&t.grad(&grads).unwrap()),
        &finite_difference(f, &a, 1e-2),
        2e-3,
        "d softplus",
    );
}

#[test]
fn masked_fill_count_takes_a_borrowed_bool_and_returns_a_tuple() {
    let device = Device::flex().autodiff();
    let x = Tensor::<2>::from_data([[1.0, 2.0], [3.0, 4.0]], &device).require_grad();
    let mask = Tensor::<2, Bool>::from_data([[true, false], [false, true]], &device);
    let (filled, count) = masked_fill_count(x.clone(), &mask, -9.0);
    assert_eq!(values(&filled), [-9.0, 2.0, 3.0, -9.0]);
    assert_eq!(ints(&count), [2]);
    // `detach`: a tracked input runs, the outputs carry no gradient.
    assert!(!filled.is_tracked());
    assert!(filled.is_autodiff() && count.is_autodiff());
    // The mask was only borrowed.
    assert_eq!(
        mask.into_data().try_to_vec::<bool>().unwrap(),
        [true, false, false, true]
    );
}

#[test]
fn nan_to_num_returns_the_mask_only_when_asked() {
    let device = Device::flex();
    let x = Tensor::<1>::from_data([1.0, f32::NAN, 3.0, f32::NAN], &device);
    let (clean, mask) = nan_to_num(x.clone(), 0.0, false);
    assert_eq!(values(&clean), [1.0, 0.0, 3.0, 0.0]);
    assert!(mask.is_none());
    let (clean, mask) = nan_to_num(x, -1.0, true);
    assert_eq!(values(&clean), [1.0, -1.0, 3.0, -1.0]);
    assert_eq!(
        mask.expect("mask")
            .into_data()
            .try_to_vec::<bool>()
            .unwrap(),
        [false, true, false, true]
    );
}

#[test]
fn dequantize_relu_takes_a_quantized_tensor() {
    let device = Device::flex();
    let x = Tensor::<1>::from_data([-2.0, -0.5, 0.0, 0.75, 2.0], &device);
    let q = x.quantize_dynamic(&QuantScheme::default());
    let expected = burn_tensor::activation::relu(q.clone().dequantize());
    assert_close(
        &values(&dequantize_relu(q)),
        &values(&expected),
        0.0,
        "dequantize_relu",
    );
}

#[test]
fn iota_is_routed_by_its_device() {
    assert_eq!(ints(&iota(5, &Device::flex())), [0, 1, 2, 3, 4]);
    // An autodiff device: the int output carries the autodiff context.
    let out = iota(3, &Device::flex().autodiff());
    assert!(out.is_autodiff());
    assert_eq!(ints(&out), [0, 1, 2]);
}

#[test]
fn ramp_is_routed_by_its_device_alone() {
    // Routed to every default backend by the device; here Flex (Cube and Remote: tests/integration/cube.rs
    // and tests/integration/remote.rs).
    assert_eq!(values(&ramp(4, &Device::flex())), [0.0, 1.0, 2.0, 3.0]);
    // An autodiff device: the float output is an untracked autodiff tensor.
    let out = ramp(3, &Device::flex().autodiff());
    assert!(out.is_autodiff());
    assert!(!out.is_require_grad());
    assert_eq!(values(&out), [0.0, 1.0, 2.0]);
}

#[test]
fn vec_inputs_are_named_with_their_index_in_errors() {
    let a = Device::flex().autodiff();
    let b = Device::flex().autodiff().gradient_checkpointing();
    let xs = vec![
        Tensor::<1>::from_data([1.0], &a).require_grad(),
        Tensor::<1>::from_data([1.0], &b).require_grad(),
    ];
    match try_sum_all(xs).unwrap_err() {
        RouteError::CheckpointingMismatch {
            input, first_input, ..
        } => {
            assert_eq!(input, InputName::at("xs", 1));
            assert_eq!(first_input, InputName::at("xs", 0));
            assert_eq!(input.to_string(), "xs[1]");
        }
        other => panic!("unexpected {other:?}"),
    }
}

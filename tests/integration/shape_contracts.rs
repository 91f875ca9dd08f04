//! Shape contracts (`shape = { ... }` on an input in `ops.toml`): broadcasting ops reduce each
//! gradient to its input's shape; ops with a fixed contract refuse other shapes with
//! `RouteError::ShapeContract`, as the `try_` result and as the panic, before any kernel runs.

use crate::common::{assert_close, panic_message, tensor, values};
use burn_route::rt::{BackendId, InputName, RouteError, ShapeRule};
use burn_tensor::{Bool, Device, Int, Tensor, TensorData, activation};

/// The error of a `try_` call and the panic of its panicking twin, which must carry its text.
fn refused<T: std::fmt::Debug>(
    attempt: Result<T, RouteError>,
    panicking: impl FnOnce() -> T,
) -> (RouteError, String) {
    let err = attempt.expect_err("the contract refuses these shapes");
    let message = panic_message(|| drop(panicking()));
    assert_eq!(
        message,
        err.to_string(),
        "the panic carries the error's text"
    );
    (err, message)
}

fn contract(
    op: &'static str,
    input: &'static str,
    shape: &[usize],
    rule: ShapeRule,
    reference: &'static str,
    reference_shape: &[usize],
    location: &'static str,
) -> RouteError {
    RouteError::ShapeContract {
        op,
        input: InputName::new(input),
        shape: shape.into(),
        rule,
        reference,
        reference_shape: reference_shape.into(),
        backend: BackendId::Flex,
        location,
    }
}

const GATE: [f32; 8] = [0.5, -1., 2., 1., 1., 0., -0.5, 3.];
const ROW: [f32; 4] = [0.5, -1., 2., 1.];

/// The reproduction: a `[1, 4]` `up` broadcast over a `[2, 4]` `gate` gets a `[1, 4]`
/// gradient, equal to Burn's own composition's.
#[cfg(feature = "autodiff")]
#[test]
fn swiglu_broadcast_gradient_has_the_input_shape() {
    let ad = Device::flex().autodiff();
    let gate = tensor(&GATE, [2, 4], &ad).require_grad();
    let up = tensor(&ROW, [1, 4], &ad).require_grad();
    let out = burn_route::swiglu(gate.clone(), up.clone());
    let g = out.clone().sum().backward();
    let (d_gate, d_up) = (gate.grad(&g).unwrap(), up.grad(&g).unwrap());
    assert_eq!(d_up.dims(), [1, 4]);
    assert_eq!(d_gate.dims(), [2, 4]);

    let gate_b = tensor(&GATE, [2, 4], &ad).require_grad();
    let up_b = tensor(&ROW, [1, 4], &ad).require_grad();
    let burn = activation::silu(gate_b.clone()) * up_b.clone();
    assert_close(&values(&out), &values(&burn), 1e-6, "forward");
    let gb = burn.sum().backward();
    assert_close(
        &values(&d_up),
        &values(&up_b.grad(&gb).unwrap()),
        1e-5,
        "d_up",
    );
    assert_close(
        &values(&d_gate),
        &values(&gate_b.grad(&gb).unwrap()),
        1e-5,
        "d_gate",
    );
}

/// Broadcasting the other way round (`gate` is the smaller one) reduces `gate`'s gradient.
#[cfg(feature = "autodiff")]
#[test]
fn swiglu_broadcast_gate_gradient_has_the_gate_shape() {
    let ad = Device::flex().autodiff();
    let gate = tensor(&ROW, [1, 4], &ad).require_grad();
    let up = tensor(&GATE, [2, 4], &ad).require_grad();
    let g = burn_route::swiglu(gate.clone(), up.clone())
        .sum()
        .backward();
    assert_eq!(gate.grad(&g).unwrap().dims(), [1, 4]);
    assert_eq!(up.grad(&g).unwrap().dims(), [2, 4]);
}

#[test]
fn swiglu_refuses_shapes_that_do_not_broadcast() {
    let flex = Device::flex();
    let gate = tensor(&GATE, [2, 4], &flex);
    let up = tensor(&[1., 2., 3., 4., 5., 6.], [2, 3], &flex);
    let (err, message) = refused(burn_route::try_swiglu(gate.clone(), up.clone()), || {
        burn_route::swiglu(gate, up)
    });
    assert_eq!(
        err,
        contract(
            "swiglu",
            "up",
            &[2, 3],
            ShapeRule::BroadcastWith,
            "gate",
            &[2, 4],
            "ops.toml:225"
        )
    );
    assert_eq!(
        message,
        "op `swiglu` got a shape its contract refuses: input `up` (backend Flex) has shape [2, 3], \
but its contract `broadcast_with` (ops.toml:225) expects a shape that broadcasts with `gate`'s \
[2, 4]: rank 2, each dimension equal to `gate`'s, or 1 on either side. Fix: pass `up` with that \
shape (reshape, slice or expand it first), or change the contract in the manifest if the op \
supports it. See https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#shape-contract"
    );
}

#[test]
fn rms_norm_refuses_a_weight_of_one_element() {
    let flex = Device::flex();
    let x = tensor(&GATE, [2, 4], &flex);
    let weight = tensor(&[2.0], [1], &flex);
    let (err, message) = refused(
        burn_route::try_rms_norm(x.clone(), weight.clone(), 1e-5),
        || burn_route::rms_norm(x, weight, 1e-5),
    );
    assert_eq!(
        err,
        contract(
            "rms_norm",
            "weight",
            &[1],
            ShapeRule::LastDimOf,
            "x",
            &[2, 4],
            "ops.toml:246"
        )
    );
    assert_eq!(
        message,
        "op `rms_norm` got a shape its contract refuses: input `weight` (backend Flex) has shape \
[1], but its contract `last_dim_of` (ops.toml:246) expects [4], the last dimension of `x` (shape \
[2, 4]). Fix: pass `weight` with that shape (reshape, slice or expand it first), or change the \
contract in the manifest if the op supports it. See https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#shape-contract"
    );
}

#[test]
fn layer_norm_refuses_per_feature_parameters_of_another_width() {
    let flex = Device::flex();
    let x = tensor(&GATE, [2, 4], &flex);
    let good = tensor(&ROW, [4], &flex);
    let bad = tensor(&[1.0], [1], &flex);
    let (err, _) = refused(
        burn_route::try_layer_norm(x.clone(), bad.clone(), good.clone(), 1e-5),
        || burn_route::layer_norm(x.clone(), bad.clone(), good.clone(), 1e-5),
    );
    assert!(
        matches!(&err, RouteError::ShapeContract { input, .. } if input.name == "gamma"),
        "{err}"
    );
    let (err, _) = refused(
        burn_route::try_layer_norm(x.clone(), good.clone(), bad.clone(), 1e-5),
        || burn_route::layer_norm(x, good, bad, 1e-5),
    );
    assert!(
        matches!(&err, RouteError::ShapeContract { input, .. } if input.name == "beta"),
        "{err}"
    );
}

#[test]
fn bias_gelu_refuses_a_bias_of_one_element() {
    let flex = Device::flex();
    let x = tensor(&GATE, [2, 4], &flex);
    let bias = tensor(&[1.0], [1], &flex);
    let (err, _) = refused(burn_route::try_bias_gelu(x.clone(), bias.clone()), || {
        burn_route::bias_gelu(x, bias)
    });
    assert_eq!(
        err,
        contract(
            "bias_gelu",
            "bias",
            &[1],
            ShapeRule::LastDimOf,
            "x",
            &[2, 4],
            "ops.toml:204"
        )
    );
}

#[test]
fn cross_entropy_refuses_targets_of_another_batch() {
    let flex = Device::flex();
    let logits = tensor(&GATE, [2, 4], &flex);
    let targets = Tensor::<1, Int>::from_data([1, 0, 3], &flex);
    let (err, message) = refused(
        burn_route::try_cross_entropy_logits(logits.clone(), targets.clone()),
        || burn_route::cross_entropy_logits(logits, targets),
    );
    assert_eq!(
        err,
        contract(
            "cross_entropy_logits",
            "targets",
            &[3],
            ShapeRule::LeadingDimsOf,
            "logits",
            &[2, 4],
            "ops.toml:299"
        )
    );
    assert!(
        message.contains("expects [2], the shape of `logits` ([2, 4]) without its last dimension"),
        "{message}"
    );
}

#[test]
fn masked_fill_count_refuses_a_mask_of_another_shape() {
    let flex = Device::flex();
    let x = tensor(&GATE, [2, 4], &flex);
    let mask = Tensor::<2, Bool>::from_data(TensorData::from([[true, false, true, false]]), &flex);
    let (err, message) = refused(
        burn_route::try_masked_fill_count(x.clone(), &mask, 0.0),
        || burn_route::masked_fill_count(x, &mask, 0.0),
    );
    assert!(
        matches!(&err, RouteError::ShapeContract { input, rule: ShapeRule::SameAs, .. } if input.name == "mask"),
        "{err}"
    );
    assert!(
        message.contains("expects [2, 4], the shape of `x`"),
        "{message}"
    );
}

/// An absent optional input meets its contract; a present one is checked.
#[test]
fn axpby_checks_y_only_when_present() {
    let flex = Device::flex();
    let x = tensor(&GATE, [2, 4], &flex);
    let scaled = burn_route::try_axpby(x.clone(), None, 2.0, 3.0).expect("no y, no contract");
    assert_close(&values(&scaled), &GATE.map(|v| 2.0 * v), 0.0, "alpha * x");
    let y = tensor(&[1., 2., 3.], [1, 3], &flex);
    let (err, _) = refused(
        burn_route::try_axpby(x.clone(), Some(y.clone()), 2.0, 3.0),
        || burn_route::axpby(x, Some(y), 2.0, 3.0),
    );
    assert!(
        matches!(&err, RouteError::ShapeContract { input, .. } if input.name == "y"),
        "{err}"
    );
}

/// Broadcasting both ways: `[2, 1]` with `[1, 4]`, values as Burn's composition.
#[test]
fn add_relu_broadcasts_both_inputs() {
    let flex = Device::flex();
    let lhs = tensor(&[1., -2.], [2, 1], &flex);
    let rhs = tensor(&ROW, [1, 4], &flex);
    let out = burn_route::try_add_relu(lhs.clone(), rhs.clone()).expect("broadcastable");
    let burn = activation::relu(lhs + rhs);
    assert_eq!(out.dims(), [2, 4]);
    assert_close(&values(&out), &values(&burn), 0.0, "add_relu");
}

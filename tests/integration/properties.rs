//! Property tests: for random values, shapes and mixes of tracked, untracked and non-autodiff
//! inputs, every policy gives the same values as Burn's own `Tensor` API, and gradients flow
//! exactly where the policy says (compared with the gradients Burn computes for the same
//! composition).
#![cfg(feature = "autodiff")]

use crate::common::{assert_close, ints, values};
use burn_route::rt::RouteError;
use burn_route::{add_relu, argmax_last, axpby, scale, try_round_half_even};
use burn_tensor::activation::relu;
use burn_tensor::{Device, Tensor, TensorData};
use proptest::prelude::*;

/// How an input is created.
#[derive(Clone, Copy, Debug)]
enum Origin {
    /// On a device without autodiff.
    Plain,
    /// On an autodiff device, not requiring grad.
    Untracked,
    /// On an autodiff device, requiring grad.
    Tracked,
}

fn origin() -> impl Strategy<Value = Origin> {
    prop_oneof![
        Just(Origin::Plain),
        Just(Origin::Untracked),
        Just(Origin::Tracked)
    ]
}

fn make(values: &[f32], shape: [usize; 2], origin: Origin) -> Tensor<2> {
    let data = TensorData::new(values.to_vec(), shape);
    match origin {
        Origin::Plain => Tensor::from_data(data, &Device::flex()),
        Origin::Untracked => Tensor::from_data(data, &Device::flex().autodiff()),
        Origin::Tracked => Tensor::from_data(data, &Device::flex().autodiff()).require_grad(),
    }
}

fn case() -> impl Strategy<Value = ([usize; 2], Vec<f32>, Vec<f32>)> {
    (1usize..5, 1usize..6).prop_flat_map(|(r, c)| {
        let n = r * c;
        (
            Just([r, c]),
            prop::collection::vec(-3.0f32..3.0, n),
            prop::collection::vec(-3.0f32..3.0, n),
        )
    })
}

/// Gradients of `ours` and `reference` (the same function written with Burn's API) for `inputs`.
fn compare_grads(inputs: &[(Tensor<2>, Origin)], ours: &Tensor<2>, reference: &Tensor<2>) {
    let any_tracked = inputs.iter().any(|(_, o)| matches!(o, Origin::Tracked));
    assert_eq!(ours.is_tracked(), any_tracked, "output tracking");
    if !any_tracked {
        return;
    }
    let g_ours = ours.clone().sum().backward();
    let g_ref = reference.clone().sum().backward();
    for (t, origin) in inputs {
        match origin {
            Origin::Tracked => assert_close(
                &values(&t.grad(&g_ours).expect("tracked input gets a gradient")),
                &values(&t.grad(&g_ref).expect("reference gradient")),
                1e-6,
                "gradient",
            ),
            _ => assert!(t.grad(&g_ours).is_none(), "untracked input got a gradient"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn differentiable_add_relu((shape, a, b) in case(), oa in origin(), ob in origin()) {
        let (lhs, rhs) = (make(&a, shape, oa), make(&b, shape, ob));
        let ours = add_relu(lhs.clone(), rhs.clone());
        let reference = relu(lhs.clone() + rhs.clone());
        assert_close(&values(&ours), &values(&reference), 0.0, "add_relu");
        compare_grads(&[(lhs, oa), (rhs, ob)], &ours, &reference);
    }

    #[test]
    fn differentiable_axpby_with_optional_input(
        (shape, a, b) in case(), oa in origin(), ob in origin(), with_y: bool,
        alpha in -2.0f32..2.0, beta in -2.0f32..2.0,
    ) {
        let (x, y) = (make(&a, shape, oa), make(&b, shape, ob));
        let ours = axpby(x.clone(), with_y.then(|| y.clone()), alpha, beta);
        let reference = if with_y {
            x.clone().mul_scalar(alpha) + y.clone().mul_scalar(beta)
        } else {
            x.clone().mul_scalar(alpha)
        };
        assert_close(&values(&ours), &values(&reference), 1e-6, "axpby");
        let inputs = if with_y { vec![(x, oa), (y, ob)] } else { vec![(x, oa)] };
        compare_grads(&inputs, &ours, &reference);
    }

    #[test]
    fn differentiable_scale((shape, a, _b) in case(), oa in origin(), alpha in -2.0f32..2.0) {
        let x = make(&a, shape, oa);
        let ours = scale(x.clone(), alpha);
        let reference = x.clone().mul_scalar(alpha);
        assert_close(&values(&ours), &values(&reference), 1e-6, "scale");
        compare_grads(&[(x, oa)], &ours, &reference);
    }

    #[test]
    fn reject_refuses_exactly_the_tracked_inputs((shape, a, _b) in case(), oa in origin()) {
        let x = make(&a, shape, oa);
        match (try_round_half_even(x.clone()), oa) {
            (Err(RouteError::TrackedInput { .. }), Origin::Tracked) => {}
            (Ok(out), Origin::Plain | Origin::Untracked) => {
                assert_eq!(values(&out), values(&x.clone().round()));
                assert!(!out.is_tracked());
                assert_eq!(out.is_autodiff(), x.is_autodiff());
            }
            (other, origin) => panic!("{origin:?} input gave {other:?}"),
        }
    }

    #[test]
    fn detach_runs_everything_and_adds_no_gradient((shape, a, _b) in case(), oa in origin()) {
        let x = make(&a, shape, oa);
        let idx = argmax_last(&x);
        assert_eq!(ints(&idx), ints(&x.clone().argmax(1)));
        assert_eq!(idx.is_autodiff(), x.is_autodiff());
        if matches!(oa, Origin::Tracked) {
            let grads = (x.clone().sum() + idx.float().sum()).backward();
            assert_eq!(values(&x.grad(&grads).unwrap()), vec![1.0; a.len()]);
        }
    }
}

//! Gradient shapes and values of every differentiable op, over random shapes its contract
//! allows (broadcast ones included where the contract broadcasts): every tracked input's
//! gradient has that input's shape and matches central finite differences of the op's own
//! forward pass. Shapes the contract refuses give `RouteError::ShapeContract`, never a result.
#![cfg(feature = "autodiff")]

use crate::common;

use crate::common::{Rng, finite_difference};
use burn_route::rt::RouteError;
use burn_tensor::{Device, Gradients, Int, Tensor, TensorData};
use proptest::prelude::*;

/// An input: its values and shape.
#[derive(Clone, Debug)]
struct Input {
    values: Vec<f32>,
    shape: Vec<usize>,
}

impl Input {
    fn random(shape: &[usize], rng: &mut Rng, lo: f32, hi: f32) -> Self {
        let n = shape.iter().product();
        Self {
            values: rng.vec(n, lo, hi),
            shape: shape.to_vec(),
        }
    }
}

/// A tensor of rank `D` from `input`, on `device`, tracked when asked.
fn tensor<const D: usize>(input: &Input, device: &Device, track: bool) -> Tensor<D> {
    let shape: [usize; D] = input.shape.clone().try_into().expect("rank");
    let t = Tensor::from_data(TensorData::new(input.values.clone(), shape), device);
    if track { t.require_grad() } else { t }
}

/// The weights of the scalar loss `sum(out * w)`: fixed, uneven, some negative, so that every
/// output element matters differently.
fn weights(n: usize) -> Vec<f32> {
    #[allow(clippy::cast_precision_loss)]
    (0..n).map(|i| ((i * 7) % 11) as f32 / 11.0 - 0.4).collect()
}

/// Accumulates `sum(out * w)`: as a tensor (for the backward pass) and on the host in `f64`
/// (for finite differences).
#[derive(Default)]
struct Loss {
    tensor: Option<Tensor<1>>,
    host: f64,
}

impl Loss {
    fn add<const D: usize>(&mut self, out: Tensor<D>) {
        let shape = out.dims();
        let values = common::values(&out);
        let w = weights(values.len());
        self.host += values
            .iter()
            .zip(&w)
            .map(|(v, w)| f64::from(*v) * f64::from(*w))
            .sum::<f64>();
        let w = Tensor::<D>::from_data(TensorData::new(w, shape), &out.device());
        let term = (out * w).sum();
        self.tensor = Some(match self.tensor.take() {
            Some(total) => total + term,
            None => term,
        });
    }
}

/// A gradient: its shape and values.
type Grad = (Vec<usize>, Vec<f32>);

/// What a run gives: the loss, and with tracking one gradient per input (`None` for inputs
/// that are not tracked).
type Outcome = (Loss, Vec<Option<Grad>>);

/// The gradient of `t` (its shape and values), if it has one.
fn grad<const D: usize>(t: &Tensor<D>, grads: &Gradients) -> Option<Grad> {
    t.grad(grads)
        .map(|g| (g.dims().to_vec(), common::values(&g)))
}

/// One differentiable op under test: how to run it on inputs (tracked ones on an autodiff
/// device) and which inputs are differentiable.
struct Case {
    name: &'static str,
    inputs: Vec<Input>,
    /// Indices of the float inputs whose gradients are checked.
    tracked: Vec<usize>,
    /// Runs the op; with `track`, the tracked inputs require grad and the gradients come back
    /// (one per input, `None` for the untracked ones).
    run: fn(&[Input], &Device, bool) -> Outcome,
    /// For finite differences: the function whose derivative the op's backward pass computes
    /// (`None`: the op itself). Only `clamp_ste` differs: its backward pass is straight-through.
    surrogate: Option<fn(&[Input]) -> f64>,
}

/// Backward on `loss` and the gradients of `tracked` (rank `D` each).
fn backward<const D: usize>(loss: &Loss, tracked: &[Option<Tensor<D>>]) -> Vec<Option<Grad>> {
    let grads = loss.tensor.as_ref().expect("a loss").backward();
    tracked
        .iter()
        .map(|t| t.as_ref().and_then(|t| grad(t, &grads)))
        .collect()
}

/// Runs `case` and checks every tracked input's gradient: its shape, and its values against
/// finite differences.
fn check(case: &Case) {
    let ad = Device::flex().autodiff();
    let (_, grads) = (case.run)(&case.inputs, &ad, true);
    for &i in &case.tracked {
        let input = &case.inputs[i];
        let (shape, values) = grads[i]
            .clone()
            .unwrap_or_else(|| panic!("{}: input {i} got no gradient", case.name));
        assert_eq!(
            shape, input.shape,
            "{}: the gradient of input {i} has the output's shape, not the input's",
            case.name
        );
        let loss_at = |at: &[f32]| {
            let mut inputs = case.inputs.clone();
            inputs[i].values = at.to_vec();
            match case.surrogate {
                Some(f) => f(&inputs),
                None => (case.run)(&inputs, &Device::flex(), false).0.host,
            }
        };
        let expected = finite_difference(loss_at, &input.values, 1e-2);
        for (k, (g, e)) in values.iter().zip(&expected).enumerate() {
            assert!(
                (g - e).abs() <= 2e-2 * (1.0 + e.abs()),
                "{}: input {i}, element {k}: gradient {g}, finite difference {e}\n  inputs: {:?}",
                case.name,
                case.inputs
            );
        }
    }
}

/// A shape of rank 3 with dimensions in `1..=4`.
fn shape3() -> impl Strategy<Value = [usize; 3]> {
    [1usize..=4, 1usize..=4, 1usize..=4]
}

/// `shape` with the dimensions `mask` selects set to 1: a shape that broadcasts to it.
fn squeezed(shape: [usize; 3], mask: [bool; 3]) -> Vec<usize> {
    shape
        .iter()
        .zip(mask)
        .map(|(&d, m)| if m { 1 } else { d })
        .collect()
}

fn unary(
    name: &'static str,
    shape: [usize; 3],
    seed: u64,
    run: fn(&[Input], &Device, bool) -> Outcome,
) -> Case {
    let mut rng = Rng::new(seed);
    Case {
        name,
        inputs: vec![Input::random(&shape, &mut rng, -2.0, 2.0)],
        tracked: vec![0],
        run,
        surrogate: None,
    }
}

/// Runs a one-input op of rank 3.
fn one(
    inputs: &[Input],
    device: &Device,
    track: bool,
    op: impl Fn(Tensor<3>) -> Tensor<3>,
) -> Outcome {
    let x = tensor::<3>(&inputs[0], device, track);
    let mut loss = Loss::default();
    loss.add(op(x.clone()));
    let grads = if track {
        backward(&loss, &[Some(x)])
    } else {
        Vec::new()
    };
    (loss, grads)
}

/// Runs a two-input op of rank 3 whose inputs broadcast with each other.
fn two(
    inputs: &[Input],
    device: &Device,
    track: bool,
    op: impl Fn(Tensor<3>, Tensor<3>) -> Tensor<3>,
) -> Outcome {
    let a = tensor::<3>(&inputs[0], device, track);
    let b = tensor::<3>(&inputs[1], device, track);
    let mut loss = Loss::default();
    loss.add(op(a.clone(), b.clone()));
    let grads = if track {
        backward(&loss, &[Some(a), Some(b)])
    } else {
        Vec::new()
    };
    (loss, grads)
}

/// Runs a row op of rank 3 with per-feature parameters (`[features]` each).
fn with_params(
    inputs: &[Input],
    device: &Device,
    track: bool,
    op: impl Fn(Tensor<3>, Vec<Tensor<1>>) -> Tensor<3>,
) -> Outcome {
    let x = tensor::<3>(&inputs[0], device, track);
    let params: Vec<Tensor<1>> = inputs[1..]
        .iter()
        .map(|p| tensor::<1>(p, device, track))
        .collect();
    let mut loss = Loss::default();
    loss.add(op(x.clone(), params.clone()));
    let mut grads = Vec::new();
    if track {
        let all = loss.tensor.as_ref().expect("a loss").backward();
        grads.push(grad(&x, &all));
        grads.extend(params.iter().map(|p| grad(p, &all)));
    }
    (loss, grads)
}

/// A broadcasting pair: `a` and `b` are `shape` with some dimensions squeezed to 1 each, so
/// that they broadcast with each other (mutually, as Burn's `a + b`) to at most `shape`.
fn pair(shape: [usize; 3], masks: ([bool; 3], [bool; 3]), seed: u64) -> (Input, Input) {
    let mut rng = Rng::new(seed);
    // Never squeeze a dimension on both sides: the output keeps `shape`'s extent there.
    let b_mask = [0, 1, 2].map(|i| masks.1[i] && !masks.0[i]);
    (
        Input::random(&squeezed(shape, masks.0), &mut rng, -2.0, 2.0),
        Input::random(&squeezed(shape, b_mask), &mut rng, -2.0, 2.0),
    )
}

/// Values away from relu's kink: `lhs` in ±[0.5, 2], `rhs` in [-0.2, 0.2], so `lhs + rhs` stays
/// at least 0.3 from 0 and finite differences do not cross it.
fn away_from_kink(mut lhs: Input, mut rhs: Input) -> (Input, Input) {
    for v in &mut lhs.values {
        *v = v.signum() * (0.5 + v.abs() * 0.75);
    }
    for v in &mut rhs.values {
        *v *= 0.1;
    }
    (lhs, rhs)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn add_relu_gradients(shape in shape3(), masks in any::<([bool; 3], [bool; 3])>(), seed in any::<u64>()) {
        let (a, b) = pair(shape, masks, seed);
        let (a, b) = away_from_kink(a, b);
        check(&Case {
            name: "add_relu",
            inputs: vec![a, b],
            tracked: vec![0, 1],
            run: |i, d, t| two(i, d, t, burn_route::add_relu),
            surrogate: None,
        });
    }

    #[test]
    fn axpby_gradients(shape in shape3(), masks in any::<([bool; 3], [bool; 3])>(), seed in any::<u64>()) {
        let (a, b) = pair(shape, masks, seed);
        check(&Case {
            name: "axpby",
            inputs: vec![a, b],
            tracked: vec![0, 1],
            run: |i, d, t| two(i, d, t, |x, y| burn_route::axpby(x, Some(y), 1.5, -0.5)),
            surrogate: None,
        });
    }

    #[test]
    fn swiglu_gradients(shape in shape3(), masks in any::<([bool; 3], [bool; 3])>(), seed in any::<u64>()) {
        let (a, b) = pair(shape, masks, seed);
        check(&Case {
            name: "swiglu",
            inputs: vec![a, b],
            tracked: vec![0, 1],
            run: |i, d, t| two(i, d, t, burn_route::swiglu),
            surrogate: None,
        });
    }

    #[test]
    fn sum_all_gradients(shape in shape3(), seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        check(&Case {
            name: "sum_all",
            inputs: vec![Input::random(&shape, &mut rng, -2.0, 2.0), Input::random(&shape, &mut rng, -2.0, 2.0)],
            tracked: vec![0, 1],
            run: |i, d, t| two(i, d, t, |a, b| burn_route::sum_all(vec![a, b])),
            surrogate: None,
        });
    }

    #[test]
    fn scale_softplus_softmax_dropout_gradients(shape in shape3(), seed in any::<u64>()) {
        check(&unary("scale", shape, seed, |i, d, t| one(i, d, t, |x| burn_route::scale(x, -1.5))));
        check(&unary("softplus", shape, seed, |i, d, t| one(i, d, t, |x| burn_route::softplus(x, 2.0))));
        check(&unary("softmax_last", shape, seed, |i, d, t| one(i, d, t, burn_route::softmax_last)));
        check(&unary("dropout", shape, seed, |i, d, t| one(i, d, t, |x| burn_route::dropout(x, 0.3, 7).0)));
    }

    #[test]
    fn clamp_ste_gradient_is_straight_through(shape in shape3(), seed in any::<u64>()) {
        let mut case = unary("clamp_ste", shape, seed, |i, d, t| one(i, d, t, |x| burn_route::clamp_ste(x, -0.5, 0.5)));
        // The straight-through gradient is the identity's.
        case.surrogate = Some(|inputs| {
            let w = weights(inputs[0].values.len());
            inputs[0].values.iter().zip(&w).map(|(v, w)| f64::from(*v) * f64::from(*w)).sum()
        });
        check(&case);
    }

    #[test]
    fn split_last_gradients(shape in shape3(), cut in any::<prop::sample::Index>(), seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let first = cut.index(shape[2] + 1);
        // The sizes are carried in the input list: the second "input" is unused by the loss.
        let sizes = Input { values: vec![], shape: vec![first, shape[2] - first] };
        check(&Case {
            name: "split_last",
            inputs: vec![Input::random(&shape, &mut rng, -2.0, 2.0), sizes],
            tracked: vec![0],
            run: |inputs, device, track| {
                let x = tensor::<3>(&inputs[0], device, track);
                let mut loss = Loss::default();
                for piece in burn_route::split_last(x.clone(), inputs[1].shape.clone()) {
                    loss.add(piece);
                }
                let grads = if track { backward(&loss, &[Some(x)]) } else { Vec::new() };
                (loss, grads)
            },
            surrogate: None,
        });
    }

    #[test]
    fn row_op_gradients(shape in shape3(), seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let x = Input::random(&shape, &mut rng, -2.0, 2.0);
        let param = || Input::random(&[shape[2]], &mut Rng::new(seed ^ 0x5eed), 0.5, 1.5);
        check(&Case {
            name: "bias_gelu",
            inputs: vec![x.clone(), param()],
            tracked: vec![0, 1],
            run: |i, d, t| with_params(i, d, t, |x, p| burn_route::bias_gelu(x, p[0].clone())),
            surrogate: None,
        });
        check(&Case {
            name: "rms_norm",
            inputs: vec![x.clone(), param()],
            tracked: vec![0, 1],
            run: |i, d, t| with_params(i, d, t, |x, p| burn_route::rms_norm(x, p[0].clone(), 0.1)),
            surrogate: None,
        });
        check(&Case {
            name: "layer_norm",
            inputs: vec![x, param(), param()],
            tracked: vec![0, 1, 2],
            run: |i, d, t| with_params(i, d, t, |x, p| burn_route::layer_norm(x, p[0].clone(), p[1].clone(), 0.1)),
            surrogate: None,
        });
    }

    #[test]
    fn cross_entropy_gradients(batch in 1usize..=4, classes in 1usize..=5, seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let logits = Input::random(&[batch, classes], &mut rng, -2.0, 2.0);
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
        let targets = Input {
            values: (0..batch).map(|_| rng.uniform(0.0, classes as f32).floor().min((classes - 1) as f32)).collect(),
            shape: vec![batch],
        };
        check(&Case {
            name: "cross_entropy_logits",
            inputs: vec![logits, targets],
            tracked: vec![0],
            run: |inputs, device, track| {
                let logits = tensor::<2>(&inputs[0], device, track);
                #[allow(clippy::cast_possible_truncation)]
                let classes: Vec<i64> = inputs[1].values.iter().map(|v| *v as i64).collect();
                let targets = Tensor::<1, Int>::from_data(TensorData::new(classes, [inputs[1].shape[0]]), device);
                let mut loss = Loss::default();
                loss.add(burn_route::cross_entropy_logits(logits.clone(), targets));
                let grads = if track { backward(&loss, &[Some(logits)]) } else { Vec::new() };
                (loss, grads)
            },
            surrogate: None,
        });
    }

    /// Shapes outside a contract are refused before any kernel runs, tracked or not.
    #[test]
    fn refused_shapes_give_the_contract_error(shape in shape3(), wrong in 1usize..=3, seed in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let ad = Device::flex().autodiff();
        // A last dimension of 1 would broadcast with any other.
        let shape = [shape[0], shape[1], shape[2].max(2)];
        let x = tensor::<3>(&Input::random(&shape, &mut rng, -2.0, 2.0), &ad, true);
        // A last dimension that neither equals `x`'s nor is 1: no broadcast.
        let other = shape[2] + wrong;
        let odd = [shape[0], shape[1], other];
        let y = tensor::<3>(&Input::random(&odd, &mut rng, -2.0, 2.0), &ad, true);
        let p = tensor::<1>(&Input::random(&[other], &mut rng, 0.5, 1.5), &ad, true);
        let is_contract = |r: Result<Tensor<3>, RouteError>| matches!(r, Err(RouteError::ShapeContract { .. }));
        prop_assert!(is_contract(burn_route::try_add_relu(x.clone(), y.clone())));
        prop_assert!(is_contract(burn_route::try_axpby(x.clone(), Some(y.clone()), 1.0, 1.0)));
        prop_assert!(is_contract(burn_route::try_swiglu(x.clone(), y)));
        prop_assert!(is_contract(burn_route::try_bias_gelu(x.clone(), p.clone())));
        prop_assert!(is_contract(burn_route::try_rms_norm(x.clone(), p.clone(), 0.1)));
        let good = tensor::<1>(&Input::random(&[shape[2]], &mut rng, 0.5, 1.5), &ad, true);
        prop_assert!(is_contract(burn_route::try_layer_norm(x.clone(), p.clone(), good.clone(), 0.1)));
        prop_assert!(is_contract(burn_route::try_layer_norm(x, good, p, 0.1)));
        let logits = tensor::<2>(&Input::random(&[shape[0], shape[2]], &mut rng, -1.0, 1.0), &ad, true);
        let targets = Tensor::<1, Int>::from_data(TensorData::new(vec![0_i64; shape[0] + wrong], [shape[0] + wrong]), &ad);
        let refused = matches!(
            burn_route::try_cross_entropy_logits(logits, targets),
            Err(RouteError::ShapeContract { .. })
        );
        prop_assert!(refused);
    }
}

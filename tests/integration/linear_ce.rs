//! `linear_cross_entropy` against a reference written here in `f64` on the host: the loss with
//! every option, the gradients of `x`, `weight` and `bias` against central finite differences
//! of that reference, chunks that do not divide the rows, the half dtypes, and the errors.

use crate::common::{Rng, assert_close, finite_difference, panic_message, tensor, values};
use burn_route::kernels::linear_ce::chunk_rows;
use burn_route::{CrossEntropyOptions, Reduction, linear_cross_entropy};
use burn_tensor::{DType, Device, Int, Tensor, TensorData};

/// The loss of `x @ weight^T + bias` against `targets`, in `f64`, one row at a time.
fn reference(
    (x, weight, bias): (&[f32], &[f32], Option<&[f32]>),
    (rows, features, classes): (usize, usize, usize),
    targets: &[i64],
    o: &CrossEntropyOptions,
) -> f64 {
    let (eps, lambda) = (f64::from(o.label_smoothing), f64::from(o.z_loss));
    let mut total = 0.0;
    let mut counted = 0;
    for r in 0..rows {
        if Some(targets[r]) == o.ignore_index {
            continue;
        }
        counted += 1;
        let z: Vec<f64> = (0..classes)
            .map(|c| {
                let dot: f64 = (0..features)
                    .map(|k| f64::from(x[r * features + k]) * f64::from(weight[c * features + k]))
                    .sum();
                dot + bias.map_or(0.0, |b| f64::from(b[c]))
            })
            .collect();
        let max = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let lse = max + z.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
        let mean = z.iter().sum::<f64>() / classes as f64;
        let t = usize::try_from(targets[r]).unwrap();
        total += (1.0 - eps) * (lse - z[t]) + eps * (lse - mean) + lambda * lse * lse;
    }
    match o.reduction {
        Reduction::Sum => total,
        Reduction::Mean if counted == 0 => 0.0,
        Reduction::Mean => total / f64::from(counted),
    }
}

struct Case {
    rows: usize,
    features: usize,
    classes: usize,
    x: Vec<f32>,
    weight: Vec<f32>,
    bias: Vec<f32>,
    targets: Vec<i64>,
}

impl Case {
    fn new(rows: usize, features: usize, classes: usize, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let classes_i = i64::try_from(classes).unwrap();
        Self {
            rows,
            features,
            classes,
            x: rng.vec(rows * features, -1.0, 1.0),
            weight: rng.vec(classes * features, -1.0, 1.0),
            bias: rng.vec(classes, -0.5, 0.5),
            targets: (0..rows)
                .map(|r| (i64::try_from(r).unwrap() * 7 + 3) % classes_i)
                .collect(),
        }
    }

    fn dims(&self) -> (usize, usize, usize) {
        (self.rows, self.features, self.classes)
    }

    fn targets(&self, device: &Device) -> Tensor<1, Int> {
        Tensor::from_data(TensorData::new(self.targets.clone(), [self.rows]), device)
    }

    fn expected(&self, bias: bool, o: &CrossEntropyOptions) -> f64 {
        let b = bias.then_some(self.bias.as_slice());
        reference((&self.x, &self.weight, b), self.dims(), &self.targets, o)
    }

    /// The routed op's loss on `device` (untracked).
    fn loss(&self, device: &Device, bias: bool, o: CrossEntropyOptions) -> f32 {
        let out = linear_cross_entropy(
            tensor(&self.x, [self.rows, self.features], device),
            tensor(&self.weight, [self.classes, self.features], device),
            bias.then(|| tensor(&self.bias, [self.classes], device)),
            self.targets(device),
            o,
        );
        assert_eq!(out.dims(), [1]);
        values(&out)[0]
    }
}

fn options() -> Vec<(&'static str, CrossEntropyOptions)> {
    let base = CrossEntropyOptions::default();
    vec![
        ("mean", base),
        (
            "sum",
            CrossEntropyOptions {
                reduction: Reduction::Sum,
                ..base
            },
        ),
        (
            "ignore 3",
            CrossEntropyOptions {
                ignore_index: Some(3),
                ..base
            },
        ),
        (
            "smoothing 0.1",
            CrossEntropyOptions {
                label_smoothing: 0.1,
                ..base
            },
        ),
        (
            "z-loss 1e-2",
            CrossEntropyOptions {
                z_loss: 1e-2,
                ..base
            },
        ),
        (
            "all",
            CrossEntropyOptions {
                reduction: Reduction::Sum,
                ignore_index: Some(0),
                label_smoothing: 0.2,
                z_loss: 1e-3,
            },
        ),
    ]
}

#[test]
fn the_loss_is_the_reference_with_every_option() {
    let device = Device::flex();
    let case = Case::new(9, 5, 7, 1);
    for (what, o) in options() {
        for bias in [true, false] {
            let expected = case.expected(bias, &o);
            let got = f64::from(case.loss(&device, bias, o));
            assert!(
                (got - expected).abs() <= 1e-5 * expected.abs().max(1.0),
                "{what}, bias {bias}: {got} against {expected}"
            );
        }
    }
}

#[test]
fn a_transposed_weight_is_read_in_place_with_the_same_loss() {
    // Burn's `Linear` keeps its weight as `[features, classes]`: its transpose is the weight.
    let device = Device::flex();
    let case = Case::new(9, 5, 7, 9);
    let mut stored = vec![0.0; 35];
    for c in 0..7 {
        for k in 0..5 {
            stored[k * 7 + c] = case.weight[c * 5 + k];
        }
    }
    let weight = tensor(&stored, [5, 7], &device).transpose();
    let out = linear_cross_entropy(
        tensor(&case.x, [9, 5], &device),
        weight,
        None,
        case.targets(&device),
        CrossEntropyOptions::default(),
    );
    let expected = case.expected(false, &CrossEntropyOptions::default());
    let got = f64::from(values(&out)[0]);
    assert!(
        (got - expected).abs() <= 1e-5 * expected.abs(),
        "{got} against {expected}"
    );
}

#[test]
fn chunks_that_do_not_divide_the_rows_give_the_same_loss() {
    // 150 rows in chunks of 64: 64, 64 and 22 rows; 37 classes.
    let case = Case::new(150, 8, 37, 2);
    assert_eq!(chunk_rows(150, 8, 37), 64);
    let o = CrossEntropyOptions {
        label_smoothing: 0.05,
        ..Default::default()
    };
    let expected = case.expected(true, &o);
    let got = f64::from(case.loss(&Device::flex(), true, o));
    assert!(
        (got - expected).abs() <= 1e-5 * expected.abs(),
        "{got} against {expected}"
    );
}

#[cfg(feature = "autodiff")]
/// The gradients of `x`, `weight` and `bias` against central finite differences of the
/// reference, with the loss's incoming gradient 3 (the backward pass scales what the forward
/// pass formed).
fn check_gradients(case: &Case, o: CrossEntropyOptions) {
    let device = Device::flex().autodiff();
    let (rows, features, classes) = case.dims();
    let x = tensor(&case.x, [rows, features], &device).require_grad();
    let weight = tensor(&case.weight, [classes, features], &device).require_grad();
    let bias = tensor(&case.bias, [classes], &device).require_grad();
    let loss = linear_cross_entropy(
        x.clone(),
        weight.clone(),
        Some(bias.clone()),
        case.targets(&device),
        o,
    );
    assert!(loss.is_tracked());
    let grads = (loss * 3.0).backward();
    let f = |x: &[f32], w: &[f32], b: &[f32]| {
        3.0 * reference((x, w, Some(b)), case.dims(), &case.targets, &o)
    };
    let fd_x = finite_difference(|v| f(v, &case.weight, &case.bias), &case.x, 1e-2);
    let fd_w = finite_difference(|v| f(&case.x, v, &case.bias), &case.weight, 1e-2);
    let fd_b = finite_difference(|v| f(&case.x, &case.weight, v), &case.bias, 1e-2);
    assert_close(
        &values(&x.grad(&grads).expect("x grad")),
        &fd_x,
        1e-3,
        "d/dx",
    );
    assert_close(
        &values(&weight.grad(&grads).expect("weight grad")),
        &fd_w,
        1e-3,
        "d/dweight",
    );
    assert_close(
        &values(&bias.grad(&grads).expect("bias grad")),
        &fd_b,
        1e-3,
        "d/dbias",
    );
}

#[cfg(feature = "autodiff")]
#[test]
fn gradients_match_finite_differences_with_every_option() {
    let case = Case::new(6, 4, 5, 3);
    for (_, o) in options() {
        check_gradients(&case, o);
    }
}

#[cfg(feature = "autodiff")]
#[test]
fn gradients_over_several_chunks_match_finite_differences() {
    // 70 rows: chunks of 64 and 6.
    check_gradients(&Case::new(70, 3, 11, 4), CrossEntropyOptions::default());
}

#[cfg(feature = "autodiff")]
#[test]
fn an_x_nothing_else_holds_gets_the_same_gradients_in_its_own_buffer() {
    // An `x` made by an op and moved into the call is the call's alone: the Flex pass writes
    // x's gradient over it. The values must be those of a leaf `x` the caller keeps (whose
    // gradient gets a buffer of its own), bit for bit, over several chunks (70 rows: 64 and 6),
    // in f32 and the half dtypes.
    let device = Device::flex().autodiff();
    let case = Case::new(70, 3, 11, 8);
    let (rows, features, classes) = case.dims();
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let run = |owned: bool| {
            let x = tensor(&case.x, [rows, features], &device)
                .cast(dtype)
                .require_grad();
            let weight = tensor(&case.weight, [classes, features], &device)
                .cast(dtype)
                .require_grad();
            let bias = tensor(&case.bias, [classes], &device)
                .cast(dtype)
                .require_grad();
            // `x * 1` is a fresh tensor nothing else holds; its gradient is x's, times 1.
            let input = if owned { x.clone() * 1.0 } else { x.clone() };
            let loss = linear_cross_entropy(
                input,
                weight.clone(),
                Some(bias.clone()),
                case.targets(&device),
                CrossEntropyOptions::default(),
            );
            let grads = (loss.clone() * 3.0).backward();
            let read = |t: Tensor<2>| values(&t.cast(DType::F32));
            (
                values(&loss.cast(DType::F32)),
                read(x.grad(&grads).expect("x grad")),
                read(weight.grad(&grads).expect("weight grad")),
                values(&bias.grad(&grads).expect("bias grad").cast(DType::F32)),
            )
        };
        let (kept, owned) = (run(false), run(true));
        assert_eq!(kept.0, owned.0, "{dtype:?} loss");
        assert_eq!(kept.1, owned.1, "{dtype:?} d/dx");
        assert_eq!(kept.2, owned.2, "{dtype:?} d/dweight");
        assert_eq!(kept.3, owned.3, "{dtype:?} d/dbias");
        if dtype == DType::F32 {
            let f = |x: &[f32]| {
                3.0 * reference(
                    (x, &case.weight, Some(&case.bias)),
                    case.dims(),
                    &case.targets,
                    &CrossEntropyOptions::default(),
                )
            };
            assert_close(&owned.1, &finite_difference(f, &case.x, 1e-2), 1e-3, "d/dx");
        }
    }
}

#[cfg(feature = "autodiff")]
#[test]
fn only_tracked_inputs_get_gradients_and_no_bias_is_fine() {
    let device = Device::flex().autodiff();
    let case = Case::new(5, 3, 4, 5);
    let x = tensor(&case.x, [5, 3], &device);
    let weight = tensor(&case.weight, [4, 3], &device).require_grad();
    let loss = linear_cross_entropy(
        x.clone(),
        weight.clone(),
        None,
        case.targets(&device),
        Default::default(),
    );
    let grads = loss.backward();
    assert!(x.grad(&grads).is_none());
    let fd = finite_difference(
        |w| {
            reference(
                (&case.x, w, None),
                case.dims(),
                &case.targets,
                &Default::default(),
            )
        },
        &case.weight,
        1e-2,
    );
    assert_close(
        &values(&weight.grad(&grads).expect("weight grad")),
        &fd,
        1e-3,
        "d/dweight",
    );
}

#[cfg(feature = "autodiff")]
#[test]
fn a_mean_over_ignored_rows_only_is_zero_with_zero_gradients() {
    let device = Device::flex().autodiff();
    let case = Case::new(3, 2, 3, 6);
    let x = tensor(&case.x, [3, 2], &device).require_grad();
    let targets = Tensor::<1, Int>::from_data(TensorData::new(vec![-100_i64; 3], [3]), &device);
    let o = CrossEntropyOptions {
        ignore_index: Some(-100),
        ..Default::default()
    };
    let loss = linear_cross_entropy(
        x.clone(),
        tensor(&case.weight, [3, 2], &device),
        None,
        targets,
        o,
    );
    assert_eq!(values(&loss), [0.0]);
    let grads = loss.backward();
    assert_eq!(values(&x.grad(&grads).expect("x grad")), [0.0; 6]);
}

/// No rows, every input tracked, with and without a bias, both reductions: the loss is 0 (a
/// mean over no counted row, as documented) and each gradient the zeros of its input's shape.
#[cfg(feature = "autodiff")]
#[test]
fn no_rows_give_a_zero_loss_and_zero_gradients_of_the_inputs_shapes() {
    let device = Device::flex().autodiff();
    for reduction in [Reduction::Mean, Reduction::Sum] {
        for with_bias in [false, true] {
            let what = format!("{reduction:?}, bias {with_bias}");
            let x = Tensor::<2>::zeros([0, 8], &device).require_grad();
            let weight = tensor(&Rng::new(3).vec(4 * 8, -1.0, 1.0), [4, 8], &device).require_grad();
            let bias = Tensor::<1>::zeros([4], &device).require_grad();
            let targets =
                Tensor::<1, Int>::from_data(TensorData::new(Vec::<i64>::new(), [0]), &device);
            let o = CrossEntropyOptions {
                reduction,
                ..Default::default()
            };
            let loss = linear_cross_entropy(
                x.clone(),
                weight.clone(),
                with_bias.then(|| bias.clone()),
                targets,
                o,
            );
            assert_eq!(values(&loss), [0.0], "{what}");
            let grads = loss.backward();
            let dx = x.grad(&grads).expect("x grad");
            assert_eq!(dx.dims(), [0, 8], "{what}");
            assert_eq!(
                values(&weight.grad(&grads).expect("weight grad")),
                [0.0; 32],
                "{what}"
            );
            if with_bias {
                assert_eq!(
                    values(&bias.grad(&grads).expect("bias grad")),
                    [0.0; 4],
                    "{what}"
                );
            }
        }
    }
}

#[test]
fn half_dtypes_give_the_f32_loss_within_their_precision() {
    let device = Device::flex();
    let case = Case::new(8, 6, 10, 7);
    let expected = case.loss(&device, true, CrossEntropyOptions::default());
    for dtype in [DType::F16, DType::BF16] {
        let out = linear_cross_entropy(
            tensor(&case.x, [8, 6], &device).cast(dtype),
            tensor(&case.weight, [10, 6], &device).cast(dtype),
            Some(tensor(&case.bias, [10], &device).cast(dtype)),
            case.targets(&device),
            CrossEntropyOptions::default(),
        );
        assert_eq!(out.dtype(), dtype);
        let got = values(&out.cast(DType::F32))[0];
        assert!(
            (got - expected).abs() <= 2e-2 * expected.abs(),
            "{dtype:?}: {got} against {expected}"
        );
    }
}

#[test]
fn a_target_outside_the_classes_and_a_weight_of_another_width_panic_with_what_is_wrong() {
    let device = Device::flex();
    let case = Case::new(2, 3, 4, 8);
    let bad = Tensor::<1, Int>::from_data(TensorData::new(vec![1_i64, 4], [2]), &device);
    let message = panic_message(|| {
        let _ = linear_cross_entropy(
            tensor(&case.x, [2, 3], &device),
            tensor(&case.weight, [4, 3], &device),
            None,
            bad,
            Default::default(),
        );
    });
    assert!(
        message.contains(
            "linear_cross_entropy: target 4 of row 1 is outside 0..4 (and is not `ignore_index`)"
        ),
        "{message}"
    );
    let message = panic_message(|| {
        let _ = linear_cross_entropy(
            tensor(&case.x, [2, 3], &device),
            tensor(&case.weight[..8], [4, 2], &device),
            None,
            case.targets(&device),
            Default::default(),
        );
    });
    assert!(
        message.contains("linear_cross_entropy: weight has shape [4, 2], but x is [2, 3]"),
        "{message}"
    );
    // Options out of their ranges, as the guide's table says.
    for (options, expected) in [
        (
            CrossEntropyOptions {
                label_smoothing: 1.5,
                ..Default::default()
            },
            "linear_cross_entropy: label_smoothing 1.5 is outside [0, 1]",
        ),
        (
            CrossEntropyOptions {
                z_loss: -0.5,
                ..Default::default()
            },
            "linear_cross_entropy: z_loss -0.5 must be finite and at least 0",
        ),
    ] {
        let x = || tensor(&case.x, [2, 3], &device);
        let weight = || tensor(&case.weight, [4, 3], &device);
        let message = panic_message(|| {
            let _ = linear_cross_entropy(x(), weight(), None, case.targets(&device), options);
        });
        assert_eq!(message, expected);
        // The `try_` twin returns routing's errors; these are the kernel's, and panic there too.
        let message = panic_message(|| {
            let _ = burn_route::try_linear_cross_entropy(
                x(),
                weight(),
                None,
                case.targets(&device),
                options,
            );
        });
        assert_eq!(message, expected);
    }
}

/// Large enough that each product is split across rayon's threads when Flex runs on rayon
/// (`.ci/run` runs this module so): loss and gradients against Burn's own autodiff of
/// `linear` and the cross-entropy of its logits.
#[cfg(feature = "autodiff")]
#[test]
fn a_large_case_matches_burns_linear_and_cross_entropy() {
    use burn_tensor::activation::log_softmax;
    let device = Device::flex().autodiff();
    let case = Case::new(100, 16, 300, 10);
    let (rows, features, classes) = case.dims();
    let leaves = || {
        (
            tensor(&case.x, [rows, features], &device).require_grad(),
            tensor(&case.weight, [classes, features], &device).require_grad(),
            tensor(&case.bias, [classes], &device).require_grad(),
        )
    };
    let (x, w, b) = leaves();
    let ours = linear_cross_entropy(
        x.clone(),
        w.clone(),
        Some(b.clone()),
        case.targets(&device),
        CrossEntropyOptions::default(),
    );
    let ours_grads = ours.clone().backward();
    let (x2, w2, b2) = leaves();
    let logits = burn_tensor::module::linear(x2.clone(), w2.clone().transpose(), Some(b2.clone()));
    let burn = -log_softmax(logits, 1)
        .gather(1, case.targets(&device).unsqueeze_dim::<2>(1))
        .mean();
    let burn_grads = burn.clone().backward();
    assert_close(&values(&ours), &values(&burn), 1e-5, "loss");
    for (ours, burn, what) in [
        (x.grad(&ours_grads), x2.grad(&burn_grads), "d/dx"),
        (
            w.grad(&ours_grads).map(|g| g.reshape([-1, 1])),
            w2.grad(&burn_grads).map(|g| g.reshape([-1, 1])),
            "d/dweight",
        ),
    ] {
        assert_close(
            &values(&ours.expect(what)),
            &values(&burn.expect(what)),
            1e-4,
            what,
        );
    }
    assert_close(
        &values(&b.grad(&ours_grads).expect("bias grad")),
        &values(&b2.grad(&burn_grads).expect("bias grad")),
        1e-4,
        "d/dbias",
    );
}

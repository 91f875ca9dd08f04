//! The CubeCL kernels against their compositions on wgpu (lavapipe in CI).

use super::*;
use burn_backend::TensorData;
use burn_backend::ops::{BoolTensorOps, FloatTensorOps, IntTensorOps};
use burn_backend::{FloatDType, IntDType};
use burn_cubecl::CubeDevice;
use burn_cubecl::cubecl::wgpu::WgpuDevice;
use burn_cubecl::ops::into_data_sync;

type B = CubeBackend;

#[path = "../../../tests/support/adapter.rs"]
mod adapter;

/// wgpu on the adapter `BURN_ROUTE_WGPU_ADAPTER` names (a CPU adapter by default: lavapipe
/// where there is no GPU), as tests/integration/cube.rs uses.
fn device() -> CubeDevice {
    CubeDevice::from(WgpuDevice::new(adapter::wgpu_device_kind()))
}

/// Deterministic values in about [-3, 3] (a small LCG).
fn ramp(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 6.0 - 3.0
        })
        .collect()
}

fn tensor(values: Vec<f32>, shape: &[usize]) -> CubeTensor {
    B::float_from_data(TensorData::new(values, shape.to_vec()), &device())
}

fn random(shape: &[usize], seed: u64) -> CubeTensor {
    tensor(ramp(shape.iter().product(), seed), shape)
}

fn values(t: CubeTensor) -> Vec<f32> {
    into_data_sync(t)
        .convert::<f32>()
        .try_to_vec::<f32>()
        .unwrap()
}

/// A strided view of a fresh tensor: `shape` with its first two dimensions swapped in
/// memory (the values of `random(shape)` transposed and transposed back).
fn strided(shape: &[usize], seed: u64) -> CubeTensor {
    let mut swapped = shape.to_vec();
    swapped.swap(0, 1);
    let t = random(&swapped, seed);
    let view = B::float_swap_dims(t, 0, 1);
    assert!(!view.is_contiguous(), "the test wants a strided view");
    view
}

#[track_caller]
fn assert_close(actual: CubeTensor, expected: CubeTensor, tol: f32) {
    assert_eq!(actual.shape(), expected.shape(), "shapes differ");
    let (a, e) = (values(actual), values(expected));
    assert_eq!(a.len(), e.len());
    for (i, (a, e)) in a.iter().zip(&e).enumerate() {
        let bound = tol * e.abs().max(1.0);
        assert!(
            (a - e).abs() <= bound,
            "element {i}: {a} vs expected {e} (tolerance {bound})"
        );
    }
}

const TOL: f32 = 1e-5;

/// The shapes every kernel is checked on: small, 3-d, rows longer than a cube, one long
/// odd row, widths not a multiple of the vector size.
const SHAPES: &[&[usize]] = &[
    &[3, 5],
    &[2, 3, 8],
    &[4, 1000],
    &[1, 4097],
    &[5, 6],
    &[7, 3],
    &[2, 2, 130],
    &[1, 1],
];

#[test]
fn add_relu_matches_composed() {
    for (k, shape) in SHAPES.iter().enumerate() {
        let (a, b) = (random(shape, k as u64), random(shape, 100 + k as u64));
        let expected = composed::add_relu::<B>(a.clone(), b.clone());
        assert_close(add_relu(a, b), expected, TOL);
    }
    // Strided operands.
    let (a, b) = (strided(&[4, 6, 3], 1), strided(&[4, 6, 3], 2));
    let expected = composed::add_relu::<B>(a.clone(), b.clone());
    assert_close(add_relu(a, b), expected, TOL);
    // Broadcasting: the composition.
    let (a, b) = (random(&[3, 5], 3), random(&[1, 5], 4));
    let expected = composed::add_relu::<B>(a.clone(), b.clone());
    assert_close(add_relu(a, b), expected, TOL);
}

/// Which buffer a tensor lives in.
fn memory(t: &CubeTensor) -> String {
    format!("{:?}", t.handle.memory.descriptor().id)
}

/// `op` on a fresh (unshared) tensor of `values` writes over its buffer, and gives the
/// same values as `reference` on a copy.
#[track_caller]
fn assert_in_place(
    values: &[f32],
    shape: &[usize],
    op: impl FnOnce(CubeTensor) -> CubeTensor,
    reference: impl FnOnce(CubeTensor) -> CubeTensor,
) {
    let expected = reference(tensor(values.to_vec(), shape));
    let input = tensor(values.to_vec(), shape);
    assert!(input.can_mut());
    let buffer = memory(&input);
    let out = op(input);
    assert_eq!(memory(&out), buffer, "not written in place");
    assert_close(out, expected, 1e-4);
}

#[test]
fn outputs_reuse_unshared_inputs() {
    let (shape, n) = (&[5, 8][..], 40);
    let (a, b) = (ramp(n, 1), ramp(n, 2));
    let row = ramp(8, 3);
    let other = || tensor(b.clone(), shape);
    let param = || tensor(row.clone(), &[8]);
    assert_in_place(
        &a,
        shape,
        |x| add_relu(x, other()),
        |x| composed::add_relu::<B>(x, other()),
    );
    // Only the second operand unshared: written over it.
    let shared = other();
    let keep = shared.clone();
    let out = add_relu(shared, tensor(a.clone(), shape));
    assert_ne!(memory(&out), memory(&keep));
    assert_in_place(
        &a,
        shape,
        |x| add_relu(keep.clone(), x),
        |x| composed::add_relu::<B>(keep.clone(), x),
    );
    assert_in_place(
        &a,
        shape,
        |x| swiglu(x, other()),
        |x| composed::swiglu::<B>(x, other()),
    );
    assert_in_place(
        &a,
        shape,
        |x| bias_gelu(x, param()),
        |x| composed::bias_gelu::<B>(x, param()),
    );
    assert_in_place(
        &a,
        shape,
        |x| rms_norm(x, param(), 1e-5),
        |x| composed::rms_norm::<B>(x, param(), 1e-5),
    );
    assert_in_place(
        &a,
        shape,
        |x| layer_norm(x, param(), param(), 1e-5),
        |x| composed::layer_norm::<B>(x, param(), param(), 1e-5),
    );
    assert_in_place(&a, shape, softmax_last, composed::softmax_last::<B>);
    assert_in_place(
        &a,
        shape,
        |x| clamp_ste(x, -0.5, 0.5),
        |x| composed::clamp_ste::<B>(x, -0.5, 0.5),
    );
    assert_in_place(
        &a,
        shape,
        |x| dropout(x, 0.3, 5).0,
        |x| composed::dropout::<B>(x, 0.3, 5).0,
    );
}

#[cfg(feature = "autodiff")]
#[test]
fn gradients_reuse_unshared_gradients() {
    let (shape, n) = (&[5, 8][..], 40);
    let (a, b) = (ramp(n, 1), ramp(n, 2));
    let row = ramp(8, 3);
    let other = || tensor(b.clone(), shape);
    let param = || tensor(row.clone(), &[8]);
    let x = || tensor(b.clone(), shape);
    assert_in_place(
        &a,
        shape,
        |d| softmax_last_backward(x(), d),
        |d| crate::kernels::backward::generic::softmax_last_backward::<B>(x(), d),
    );
    assert_in_place(
        &a,
        shape,
        |d| {
            rms_norm_backward(x(), param(), 1e-5, d, [true, true])[0]
                .take()
                .unwrap()
        },
        |d| {
            crate::kernels::backward::generic::rms_norm_backward::<B>(
                x(),
                param(),
                1e-5,
                d,
                [true, true],
            )[0]
            .take()
            .unwrap()
        },
    );
    assert_in_place(
        &a,
        shape,
        |d| {
            layer_norm_backward(x(), param(), 1e-5, d, [true; 3])[0]
                .take()
                .unwrap()
        },
        |d| {
            crate::kernels::backward::generic::layer_norm_backward::<B>(
                x(),
                param(),
                1e-5,
                d,
                [true; 3],
            )[0]
            .take()
            .unwrap()
        },
    );
    assert_in_place(
        &a,
        shape,
        |d| {
            bias_gelu_backward(x(), param(), d, [true, true])[0]
                .take()
                .unwrap()
        },
        |d| {
            crate::kernels::backward::generic::bias_gelu_backward::<B>(
                x(),
                param(),
                d,
                [true, true],
            )[0]
            .take()
            .unwrap()
        },
    );
    assert_in_place(
        &a,
        shape,
        |d| {
            swiglu_backward(x(), other(), d, [true, true])[0]
                .take()
                .unwrap()
        },
        |d| {
            crate::kernels::backward::generic::swiglu_backward::<B>(x(), other(), d, [true, true])
                [0]
            .take()
            .unwrap()
        },
    );
}

#[test]
fn swiglu_matches_composed() {
    for (k, shape) in SHAPES.iter().enumerate() {
        let (g, u) = (random(shape, k as u64), random(shape, 50 + k as u64));
        let expected = composed::swiglu::<B>(g.clone(), u.clone());
        assert_close(swiglu(g, u), expected, TOL);
    }
    let (g, u) = (strided(&[5, 3], 7), random(&[5, 3], 8));
    let expected = composed::swiglu::<B>(g.clone(), u.clone());
    assert_close(swiglu(g, u), expected, TOL);
    let (g, u) = (random(&[4, 1], 9), random(&[4, 6], 10));
    let expected = composed::swiglu::<B>(g.clone(), u.clone());
    assert_close(swiglu(g, u), expected, TOL);
}

#[test]
fn bias_gelu_matches_composed() {
    for (k, shape) in SHAPES.iter().enumerate() {
        let x = random(shape, k as u64);
        let bias = random(&[*shape.last().unwrap()], 70 + k as u64);
        let expected = composed::bias_gelu::<B>(x.clone(), bias.clone());
        assert_close(bias_gelu(x, bias), expected, TOL);
    }
    let (x, bias) = (strided(&[6, 4, 5], 11), random(&[5], 12));
    let expected = composed::bias_gelu::<B>(x.clone(), bias.clone());
    assert_close(bias_gelu(x, bias), expected, TOL);
    // Far into both tails (the erf approximation saturates) and near 0.
    let wide: Vec<f32> = ramp(4 * 64, 15).into_iter().map(|v| v * 15.0).collect();
    let small: Vec<f32> = ramp(64, 16).into_iter().map(|v| v * 1e-3).collect();
    let (x, bias) = (tensor(wide, &[4, 64]), tensor(small, &[64]));
    let expected = composed::bias_gelu::<B>(x.clone(), bias.clone());
    assert_close(bias_gelu(x, bias), expected, TOL);
    let (x, bias) = (
        tensor(
            ramp(64, 17).into_iter().map(|v| v * 1e-3).collect(),
            &[1, 64],
        ),
        tensor(vec![0.0; 64], &[64]),
    );
    let expected = composed::bias_gelu::<B>(x.clone(), bias.clone());
    assert_close(bias_gelu(x, bias), expected, TOL);
    // In place over an unshared `x`.
    let (xv, bv) = (ramp(24, 13), ramp(8, 14));
    let expected = composed::bias_gelu::<B>(tensor(xv.clone(), &[3, 8]), tensor(bv.clone(), &[8]));
    assert_close(
        bias_gelu(tensor(xv, &[3, 8]), tensor(bv, &[8])),
        expected,
        TOL,
    );
}

#[test]
fn rms_norm_matches_composed() {
    for (k, shape) in SHAPES.iter().enumerate() {
        let x = random(shape, k as u64);
        let w = random(&[*shape.last().unwrap()], 30 + k as u64);
        let expected = composed::rms_norm::<B>(x.clone(), w.clone(), 1e-5);
        assert_close(rms_norm(x, w, 1e-5), expected, TOL);
    }
    let (x, w) = (strided(&[3, 4, 9], 15), random(&[9], 16));
    let expected = composed::rms_norm::<B>(x.clone(), w.clone(), 1e-6);
    assert_close(rms_norm(x, w, 1e-6), expected, TOL);
    let (xv, wv) = (ramp(3 * 1000, 17), ramp(1000, 18));
    let expected = composed::rms_norm::<B>(
        tensor(xv.clone(), &[3, 1000]),
        tensor(wv.clone(), &[1000]),
        1e-5,
    );
    assert_close(
        rms_norm(tensor(xv, &[3, 1000]), tensor(wv, &[1000]), 1e-5),
        expected,
        TOL,
    );
}

#[test]
fn layer_norm_matches_composed() {
    for (k, shape) in SHAPES.iter().enumerate() {
        let width = *shape.last().unwrap();
        let x = random(shape, k as u64);
        let (g, b) = (
            random(&[width], 40 + k as u64),
            random(&[width], 60 + k as u64),
        );
        let expected = composed::layer_norm::<B>(x.clone(), g.clone(), b.clone(), 1e-5);
        // A one-element row normalises to 0: the absolute error is what is left of it.
        assert_close(layer_norm(x, g, b, 1e-5), expected, 2e-5);
    }
    let (x, g, b) = (
        strided(&[7, 2, 33], 19),
        random(&[33], 20),
        random(&[33], 21),
    );
    let expected = composed::layer_norm::<B>(x.clone(), g.clone(), b.clone(), 1e-5);
    assert_close(layer_norm(x, g, b, 1e-5), expected, 2e-5);
}

#[test]
fn softmax_last_matches_composed() {
    for (k, shape) in SHAPES.iter().enumerate() {
        let x = random(shape, k as u64);
        let expected = composed::softmax_last::<B>(x.clone());
        assert_close(softmax_last(x), expected, TOL);
    }
    let x = strided(&[6, 5, 7], 22);
    let expected = composed::softmax_last::<B>(x.clone());
    assert_close(softmax_last(x), expected, TOL);
    // Large logits: the maximum is subtracted.
    let big: Vec<f32> = ramp(2 * 9, 23).into_iter().map(|v| v * 40.0).collect();
    let expected = composed::softmax_last::<B>(tensor(big.clone(), &[2, 9]));
    let out = softmax_last(tensor(big, &[2, 9]));
    assert!(values(out.clone()).iter().all(|v| v.is_finite()));
    assert_close(out, expected, TOL);
}

fn targets(classes: &[i64]) -> CubeTensor {
    let int_dtype = get_or_init_device_settings::<B>(&device()).int_dtype;
    let t = B::int_from_data(
        TensorData::new(classes.to_vec(), [classes.len()]),
        &device(),
    );
    if IntDType::from(t.dtype) == int_dtype {
        t
    } else {
        B::int_cast(t, int_dtype)
    }
}

#[test]
fn cross_entropy_matches_composed() {
    for (rows, classes) in [(3, 5), (4, 1000), (1, 4097), (5, 6), (2, 1), (300, 7)] {
        let logits = random(&[rows, classes], (rows * classes) as u64);
        let picked: Vec<i64> = (0..rows).map(|r| ((r * 7 + 3) % classes) as i64).collect();
        let expected = composed::cross_entropy_logits::<B>(logits.clone(), targets(&picked));
        let out = cross_entropy_logits(logits, targets(&picked));
        assert_eq!(out.shape(), Shape::new([1]));
        assert_close(out, expected, TOL);
    }
    let logits = strided(&[6, 4], 24);
    let expected =
        composed::cross_entropy_logits::<B>(logits.clone(), targets(&[0, 1, 2, 3, 0, 1]));
    assert_close(
        cross_entropy_logits(logits, targets(&[0, 1, 2, 3, 0, 1])),
        expected,
        TOL,
    );
}

#[test]
#[should_panic(expected = "outside 0..5")]
fn cross_entropy_checks_targets() {
    cross_entropy_logits(random(&[2, 5], 1), targets(&[0, 5]));
}

/// The mask as `bool`s, from whichever bool store the device uses.
fn mask_values(mask: CubeTensor) -> Vec<bool> {
    let int_dtype = get_or_init_device_settings::<B>(&device()).int_dtype;
    let ints = B::bool_into_int(mask, int_dtype);
    into_data_sync(ints)
        .convert::<i64>()
        .try_to_vec::<i64>()
        .unwrap()
        .into_iter()
        .map(|v| v != 0)
        .collect()
}

#[test]
fn dropout_mask_is_bit_identical() {
    let sizes: &[&[usize]] = &[
        &[1],
        &[3],
        &[5],
        &[7, 3],
        &[2, 3, 11],
        &[4, 1001],
        &[1, 4097],
    ];
    for (k, shape) in sizes.iter().enumerate() {
        for (seed, p) in [
            (0u64, 0.5f32),
            (42, 0.1),
            (0xDEAD_BEEF_CAFE_F00D, 0.9),
            (u64::MAX, 0.3),
            (7 + k as u64, 0.0),
            (9, 1.0),
            (1 << 33, 0.25),
        ] {
            let n: usize = shape.iter().product();
            let xv = ramp(n, seed.wrapping_add(k as u64));
            let x = tensor(xv.clone(), shape);
            let (out, mask) = dropout(x.clone(), p, seed);
            assert_eq!(
                mask.dtype,
                DType::from(get_or_init_device_settings::<B>(&device()).bool_dtype)
            );
            assert_eq!(mask.shape(), Shape::from(shape.to_vec()));
            let keep = composed::dropout_keep(n, p, seed);
            assert_eq!(
                mask_values(mask.clone()),
                keep,
                "seed {seed} p {p} shape {shape:?}"
            );
            // The same bytes as the composed mask.
            let (c_out, c_mask) = composed::dropout::<B>(x, p, seed);
            let (m, cm) = (into_data_sync(mask), into_data_sync(c_mask));
            assert_eq!(m.dtype(), cm.dtype());
            assert_eq!(m.as_bytes(), cm.as_bytes());
            let scale = composed::dropout_scale(p);
            let got = values(out.clone());
            for (i, ((g, x), k)) in got.iter().zip(&xv).zip(&keep).enumerate() {
                let want = if *k { x * scale } else { 0.0 };
                assert_eq!(*g, want, "element {i}");
            }
            assert_close(out, c_out, 0.0);
        }
    }
    // Strided input.
    let x = strided(&[5, 3], 3);
    let (out, mask) = dropout(x.clone(), 0.4, 77);
    let (c_out, c_mask) = composed::dropout::<B>(x, 0.4, 77);
    assert_eq!(mask_values(mask), mask_values(c_mask));
    assert_close(out, c_out, 0.0);
}

#[test]
#[should_panic(expected = "must be a probability")]
fn dropout_checks_p() {
    dropout(random(&[3], 1), 1.5, 0);
}

#[test]
fn clamp_ste_matches_composed() {
    for (k, shape) in SHAPES.iter().enumerate() {
        let x = random(shape, k as u64);
        let expected = composed::clamp_ste::<B>(x.clone(), -1.0, 0.5);
        assert_close(clamp_ste(x, -1.0, 0.5), expected, 0.0);
    }
    let x = strided(&[3, 7], 5);
    let expected = composed::clamp_ste::<B>(x.clone(), 0.0, 0.0);
    assert_close(clamp_ste(x, 0.0, 0.0), expected, 0.0);
}

#[test]
#[should_panic(expected = "must not exceed")]
fn clamp_ste_checks_bounds() {
    clamp_ste(random(&[3], 1), 1.0, 0.0);
}

#[cfg(feature = "autodiff")]
fn assert_grads<const K: usize>(
    actual: [Option<CubeTensor>; K],
    expected: [Option<CubeTensor>; K],
    tol: f32,
) {
    for (i, (a, e)) in actual.into_iter().zip(expected).enumerate() {
        match (a, e) {
            (Some(a), Some(e)) => assert_close(a, e, tol),
            (None, None) => {}
            (a, e) => panic!("gradient {i}: {:?} vs {:?}", a.is_some(), e.is_some()),
        }
    }
}

#[cfg(feature = "autodiff")]
#[test]
fn bias_gelu_backward_matches_composed() {
    for (k, shape) in SHAPES.iter().enumerate() {
        let width = *shape.last().unwrap();
        let (x, bias, grad) = (
            random(shape, k as u64),
            random(&[width], 3 + k as u64),
            random(shape, 9 + k as u64),
        );
        for wanted in [[true, true], [true, false]] {
            let expected = crate::kernels::backward::generic::bias_gelu_backward::<B>(
                x.clone(),
                bias.clone(),
                grad.clone(),
                wanted,
            );
            let actual = bias_gelu_backward(x.clone(), bias.clone(), grad.clone(), wanted);
            assert_grads(actual, expected, 1e-4);
        }
    }
    let (x, bias, grad) = (
        strided(&[4, 3, 6], 1),
        random(&[6], 2),
        strided(&[4, 3, 6], 3),
    );
    let expected = crate::kernels::backward::generic::bias_gelu_backward::<B>(
        x.clone(),
        bias.clone(),
        grad.clone(),
        [true, true],
    );
    assert_grads(
        bias_gelu_backward(x, bias, grad, [true, true]),
        expected,
        1e-4,
    );
}

#[cfg(feature = "autodiff")]
#[test]
fn swiglu_backward_matches_composed() {
    for (k, shape) in SHAPES.iter().enumerate() {
        let (g, u, d) = (
            random(shape, k as u64),
            random(shape, 5 + k as u64),
            random(shape, 11 + k as u64),
        );
        for wanted in [[true, true], [true, false], [false, true], [false, false]] {
            let expected = crate::kernels::backward::generic::swiglu_backward::<B>(
                g.clone(),
                u.clone(),
                d.clone(),
                wanted,
            );
            let actual = swiglu_backward(g.clone(), u.clone(), d.clone(), wanted);
            assert_grads(actual, expected, TOL);
        }
    }
    // A broadcast gradient (stride 0), as the gradient of a sum is.
    let (g, u) = (random(&[3, 4], 1), strided(&[3, 4], 2));
    let d = B::float_expand(random(&[1, 1], 3), Shape::new([3, 4]));
    let expected = crate::kernels::backward::generic::swiglu_backward::<B>(
        g.clone(),
        u.clone(),
        d.clone(),
        [true, true],
    );
    assert_grads(swiglu_backward(g, u, d, [true, true]), expected, TOL);
}

#[cfg(feature = "autodiff")]
#[test]
fn rms_norm_backward_matches_composed() {
    for (k, shape) in SHAPES.iter().enumerate() {
        let width = *shape.last().unwrap();
        let (x, w, d) = (
            random(shape, k as u64),
            random(&[width], 4 + k as u64),
            random(shape, 8 + k as u64),
        );
        for wanted in [[true, true], [true, false], [false, true]] {
            let expected = crate::kernels::backward::generic::rms_norm_backward::<B>(
                x.clone(),
                w.clone(),
                1e-5,
                d.clone(),
                wanted,
            );
            let actual = rms_norm_backward(x.clone(), w.clone(), 1e-5, d.clone(), wanted);
            assert_grads(actual, expected, 1e-4);
        }
    }
    let (x, w) = (strided(&[5, 2, 12], 1), random(&[12], 2));
    let d = B::float_expand(random(&[1, 1, 1], 3), Shape::new([5, 2, 12]));
    let expected = crate::kernels::backward::generic::rms_norm_backward::<B>(
        x.clone(),
        w.clone(),
        1e-5,
        d.clone(),
        [true, true],
    );
    assert_grads(
        rms_norm_backward(x, w, 1e-5, d, [true, true]),
        expected,
        1e-4,
    );
}

#[cfg(feature = "autodiff")]
#[test]
fn layer_norm_backward_matches_composed() {
    for (k, shape) in SHAPES.iter().enumerate() {
        let width = *shape.last().unwrap();
        if width == 1 {
            // A one-element row has a zero variance: both sides are rounding noise.
            continue;
        }
        let (x, g, d) = (
            random(shape, k as u64),
            random(&[width], 4 + k as u64),
            random(shape, 8 + k as u64),
        );
        for wanted in [
            [true, true, true],
            [true, false, false],
            [false, true, false],
            [false, false, true],
        ] {
            let expected = crate::kernels::backward::generic::layer_norm_backward::<B>(
                x.clone(),
                g.clone(),
                1e-5,
                d.clone(),
                wanted,
            );
            let actual = layer_norm_backward(x.clone(), g.clone(), 1e-5, d.clone(), wanted);
            assert_grads(actual, expected, 1e-4);
        }
    }
    let (x, g, d) = (
        strided(&[3, 5, 10], 1),
        random(&[10], 2),
        strided(&[3, 5, 10], 3),
    );
    let expected = crate::kernels::backward::generic::layer_norm_backward::<B>(
        x.clone(),
        g.clone(),
        1e-5,
        d.clone(),
        [true, true, true],
    );
    assert_grads(
        layer_norm_backward(x, g, 1e-5, d, [true, true, true]),
        expected,
        1e-4,
    );
}

#[cfg(feature = "autodiff")]
#[test]
fn softmax_last_backward_matches_composed() {
    for (k, shape) in SHAPES.iter().enumerate() {
        let y = composed::softmax_last::<B>(random(shape, k as u64));
        let d = random(shape, 20 + k as u64);
        let expected =
            crate::kernels::backward::generic::softmax_last_backward::<B>(y.clone(), d.clone());
        assert_close(softmax_last_backward(y, d), expected, TOL);
    }
    let y = composed::softmax_last::<B>(strided(&[4, 3, 5], 1));
    let d = strided(&[4, 3, 5], 2);
    let expected =
        crate::kernels::backward::generic::softmax_last_backward::<B>(y.clone(), d.clone());
    assert_close(softmax_last_backward(y, d), expected, TOL);
}

/// More rows than one dimension of a launch grid holds (65535 cubes on wgpu).
#[test]
fn many_rows() {
    let shape = [70_001, 3];
    let x = random(&shape, 1);
    let w = random(&[3], 2);
    let expected = composed::rms_norm::<B>(x.clone(), w.clone(), 1e-5);
    assert_close(rms_norm(x.clone(), w, 1e-5), expected, TOL);
    let expected = composed::softmax_last::<B>(x.clone());
    assert_close(softmax_last(x.clone()), expected.clone(), TOL);
    #[cfg(feature = "autodiff")]
    {
        let d = random(&shape, 3);
        let reference = crate::kernels::backward::generic::softmax_last_backward::<B>(
            expected.clone(),
            d.clone(),
        );
        assert_close(softmax_last_backward(expected, d), reference, TOL);
    }
    // Against the loss computed on the host in f64: the composition is no reference
    // here, as Burn's `float_sum_dim` / `float_mean_dim` on Cube (wgpu on lavapipe) come
    // out wrong over more than 65535 elements (the sum of 70001 ones is 65533).
    let picked: Vec<i64> = (0..shape[0]).map(|r| (r % 3) as i64).collect();
    let rows = values(x.clone());
    let total: f64 = rows
        .chunks(3)
        .zip(&picked)
        .map(|(row, &t)| {
            let max = f64::from(row.iter().copied().fold(f32::MIN, f32::max));
            let sum: f64 = row.iter().map(|&e| (f64::from(e) - max).exp()).sum();
            max + sum.ln() - f64::from(row[t as usize])
        })
        .sum();
    let loss = values(cross_entropy_logits(x, targets(&picked)))[0];
    let want = total / picked.len() as f64;
    assert!(
        (f64::from(loss) - want).abs() < 1e-5 * want.abs(),
        "{loss} vs {want}"
    );
}

/// The kernels read whole vectors where the runtime offers them and the sizes allow.
#[test]
fn vector_sizes() {
    let t = random(&[4, 1000], 1);
    let widest = t.client.io_optimized_vector_sizes(4).max().unwrap_or(1);
    eprintln!("f32 vector sizes offered: {widest} at most");
    assert_eq!(vector_size(&[&t], 1000), widest.min(8));
    assert_eq!(vector_size(&[&t], 4097), 1);
    assert!(vector_size(&[&t], 6) <= 2);
}

/// Another float dtype takes the composition (when the device has one).
/// `f64` is not a kernel dtype: the composition, in `f64`.
#[test]
fn other_dtypes_fall_back() {
    let dev = device();
    let dtype = FloatDType::F64;
    if !<B as burn_backend::Backend>::supports_dtype(&dev, DType::from(dtype)) {
        eprintln!("skipped: this device does not store f64, so nothing falls back");
        return;
    }
    let x = B::float_cast(random(&[3, 5], 1), dtype);
    let w = B::float_cast(random(&[5], 2), dtype);
    let out = rms_norm(x.clone(), w.clone(), 1e-5);
    assert_eq!(out.dtype, DType::from(dtype));
    assert_close(
        B::float_cast(out, FloatDType::F32),
        B::float_cast(composed::rms_norm::<B>(x.clone(), w, 1e-5), FloatDType::F32),
        1e-5,
    );
    let out = softmax_last(x.clone());
    assert_eq!(out.dtype, DType::from(dtype));
    let out = add_relu(x.clone(), x);
    assert_eq!(out.dtype, DType::from(dtype));
}

/// The tolerance of a half-precision kernel against the `f32` kernel on the same (rounded)
/// inputs, relative to `max(|expected|, 1)`: two units in the last place of the storage
/// dtype (the kernels compute in `f32` and round each output once; a stored intermediate,
/// softmax's exponential or a gradient summed into a parameter's, rounds once more).
fn half_tolerance(dtype: FloatDType) -> f32 {
    match dtype {
        FloatDType::F16 => 2.0 * 2f32.powi(-10),
        FloatDType::BF16 => 2.0 * 2f32.powi(-7),
        _ => unreachable!("not a half dtype"),
    }
}

/// `t` in `dtype`, and the same rounded values in `f32` (the reference's input).
fn rounded(t: CubeTensor, dtype: FloatDType) -> (CubeTensor, CubeTensor) {
    let half = B::float_cast(t, dtype);
    let back = B::float_cast(half.clone(), FloatDType::F32);
    (half, back)
}

/// `actual` is of `dtype` and within `terms` times [`half_tolerance`] of `expected` (`f32`):
/// `terms` is 1 but for a sum of rounded terms.
#[track_caller]
fn assert_half(
    actual: CubeTensor,
    expected: CubeTensor,
    dtype: FloatDType,
    terms: usize,
    what: &str,
) {
    assert_eq!(actual.dtype, DType::from(dtype), "{what}: output dtype");
    let actual = B::float_cast(actual, FloatDType::F32);
    assert_eq!(actual.shape(), expected.shape(), "{what}: shapes differ");
    let tol = half_tolerance(dtype) * terms as f32;
    let (a, e) = (values(actual), values(expected));
    for (i, (a, e)) in a.iter().zip(&e).enumerate() {
        let bound = tol * e.abs().max(1.0);
        assert!(
            (a - e).abs() <= bound,
            "{what} in {dtype:?}, element {i}: {a} vs {e} from f32 (tolerance {bound})"
        );
    }
}

/// Every kernel, forward and backward, takes `f16` and `bf16` storage (where the device has
/// it; a skip says why): the same values as the `f32` kernel on the rounded inputs, to
/// [`half_tolerance`], in the input's dtype.
#[test]
fn half_precision_kernels_match_f32() {
    let dev = device();
    let mut ran = 0;
    for dtype in [FloatDType::F16, FloatDType::BF16] {
        if !<B as burn_backend::Backend>::supports_dtype(&dev, DType::from(dtype)) {
            eprintln!("{dtype:?}: skipped, this device does not store it");
            continue;
        }
        ran += 1;
        for (k, shape) in [&[4, 64][..], &[3, 130], &[2, 3, 8], &[1, 4097]]
            .iter()
            .enumerate()
        {
            let seed = 10 * k as u64;
            let width = *shape.last().unwrap();
            let (x, x32) = rounded(random(shape, seed), dtype);
            let (y, y32) = rounded(random(shape, seed + 1), dtype);
            let (g, g32) = rounded(random(shape, seed + 2), dtype);
            let (w, w32) = rounded(random(&[width], seed + 3), dtype);
            let (b, b32) = rounded(random(&[width], seed + 4), dtype);
            let check = |what: &str, half: CubeTensor, full: CubeTensor| {
                assert_half(half, full, dtype, 1, &format!("{what} {shape:?}"));
            };
            let rows = shape.iter().product::<usize>() / width;
            check(
                "add_relu",
                add_relu(x.clone(), y.clone()),
                add_relu(x32.clone(), y32.clone()),
            );
            check(
                "swiglu",
                swiglu(x.clone(), y.clone()),
                swiglu(x32.clone(), y32.clone()),
            );
            check(
                "bias_gelu",
                bias_gelu(x.clone(), b.clone()),
                bias_gelu(x32.clone(), b32.clone()),
            );
            check(
                "rms_norm",
                rms_norm(x.clone(), w.clone(), 1e-5),
                rms_norm(x32.clone(), w32.clone(), 1e-5),
            );
            check(
                "layer_norm",
                layer_norm(x.clone(), w.clone(), b.clone(), 1e-5),
                layer_norm(x32.clone(), w32.clone(), b32.clone(), 1e-5),
            );
            check(
                "softmax_last",
                softmax_last(x.clone()),
                softmax_last(x32.clone()),
            );
            check(
                "clamp_ste",
                clamp_ste(x.clone(), -1.0, 0.5),
                clamp_ste(x32.clone(), -1.0, 0.5),
            );
            let (out, keep) = dropout(x.clone(), 0.3, 7);
            let (out32, keep32) = dropout(x32.clone(), 0.3, 7);
            assert_eq!(
                mask_values(keep),
                mask_values(keep32),
                "dropout's mask in {dtype:?}"
            );
            check("dropout", out, out32);
            if shape.len() == 2 {
                let classes: Vec<i64> = (0..shape[0] as i64)
                    .map(|r| (r * 7) % width as i64)
                    .collect();
                check(
                    "cross_entropy_logits",
                    cross_entropy_logits(x.clone(), targets(&classes)),
                    cross_entropy_logits(x32.clone(), targets(&classes)),
                );
            }
            #[cfg(feature = "autodiff")]
            {
                // bias_gelu's bias gradient sums `rows` stored (rounded) terms of `dx`; every
                // other parameter gradient sums f32 terms and is rounded once.
                let grads =
                    |what: &str, half: Vec<Option<CubeTensor>>, full: Vec<Option<CubeTensor>>| {
                        for (i, (h, f)) in half.into_iter().zip(full).enumerate() {
                            let terms = if what == "bias_gelu" && i == 1 {
                                rows
                            } else {
                                1
                            };
                            let what = format!("{what} gradient {i} {shape:?}");
                            assert_half(h.unwrap(), f.unwrap(), dtype, terms, &what);
                        }
                    };
                grads(
                    "bias_gelu",
                    bias_gelu_backward(x.clone(), b.clone(), g.clone(), [true; 2]).into(),
                    bias_gelu_backward(x32.clone(), b32.clone(), g32.clone(), [true; 2]).into(),
                );
                grads(
                    "swiglu",
                    swiglu_backward(x.clone(), y.clone(), g.clone(), [true; 2]).into(),
                    swiglu_backward(x32.clone(), y32.clone(), g32.clone(), [true; 2]).into(),
                );
                grads(
                    "rms_norm",
                    rms_norm_backward(x.clone(), w.clone(), 1e-5, g.clone(), [true; 2]).into(),
                    rms_norm_backward(x32.clone(), w32.clone(), 1e-5, g32.clone(), [true; 2])
                        .into(),
                );
                grads(
                    "layer_norm",
                    layer_norm_backward(x.clone(), w.clone(), 1e-5, g.clone(), [true; 3]).into(),
                    layer_norm_backward(x32.clone(), w32.clone(), 1e-5, g32.clone(), [true; 3])
                        .into(),
                );
                let (s, s32) = rounded(softmax_last(x32.clone()), dtype);
                check(
                    "softmax_last gradient",
                    softmax_last_backward(s, g.clone()),
                    softmax_last_backward(s32, g32.clone()),
                );
            }
        }
    }
    eprintln!("half-precision kernels checked in {ran} dtype(s)");
}

/// Empty tensors take the composition and keep their shape.
#[test]
fn empty_tensors() {
    let x = tensor(vec![], &[0, 4]);
    assert_eq!(softmax_last(x.clone()).shape(), Shape::new([0, 4]));
    assert_eq!(add_relu(x.clone(), x.clone()).shape(), Shape::new([0, 4]));
    assert_eq!(clamp_ste(x.clone(), 0.0, 1.0).shape(), Shape::new([0, 4]));
    let w = tensor(vec![0.5; 4], &[4]);
    assert_eq!(
        rms_norm(x.clone(), w.clone(), 1e-5).shape(),
        Shape::new([0, 4])
    );
    assert_eq!(
        layer_norm(x.clone(), w.clone(), w.clone(), 1e-5).shape(),
        Shape::new([0, 4])
    );
    assert_eq!(bias_gelu(x.clone(), w.clone()).shape(), Shape::new([0, 4]));
    #[cfg(feature = "autodiff")]
    {
        let [dx, dw] = rms_norm_backward(x.clone(), w.clone(), 1e-5, x.clone(), [true, true]);
        assert_eq!(dx.unwrap().shape(), Shape::new([0, 4]));
        assert_eq!(values(dw.unwrap()), vec![0.0; 4]);
        let [_, dg, db] = layer_norm_backward(x.clone(), w.clone(), 1e-5, x.clone(), [true; 3]);
        assert_eq!(values(dg.unwrap()), vec![0.0; 4]);
        assert_eq!(values(db.unwrap()), vec![0.0; 4]);
        let [_, db] = bias_gelu_backward(x.clone(), w.clone(), x.clone(), [true, true]);
        assert_eq!(values(db.unwrap()), vec![0.0; 4]);
        assert_eq!(
            softmax_last_backward(x.clone(), x.clone()).shape(),
            Shape::new([0, 4])
        );
    }
    let (out, mask) = dropout(x, 0.5, 1);
    assert_eq!(
        (out.shape(), mask.shape()),
        (Shape::new([0, 4]), Shape::new([0, 4]))
    );
}

/// Rows on both sides of `MAX_UNIT_ROW`: one unit per row up to it and one cube per row
/// past it (on a device without plane operations, as lavapipe), forward and backward.
#[test]
fn row_kernels_narrow_and_wide_rows() {
    let client = random(&[1], 0).client;
    eprintln!(
        "one unit per row up to {MAX_UNIT_ROW} elements: {}",
        unit_per_row(&client, MAX_UNIT_ROW)
    );
    assert!(!unit_per_row(&client, MAX_UNIT_ROW + 1));
    let shapes: &[&[usize]] = &[
        &[64, 256],
        &[3, MAX_UNIT_ROW],
        &[3, MAX_UNIT_ROW + 1],
        &[2, 3000],
        &[9, 2, 17],
    ];
    for (k, shape) in shapes.iter().enumerate() {
        let width = *shape.last().unwrap();
        let seed = 200 + 10 * k as u64;
        let x = random(shape, seed);
        let (w, b) = (random(&[width], seed + 1), random(&[width], seed + 2));
        assert_close(
            rms_norm(x.clone(), w.clone(), 1e-5),
            composed::rms_norm::<B>(x.clone(), w.clone(), 1e-5),
            TOL,
        );
        assert_close(
            layer_norm(x.clone(), w.clone(), b.clone(), 1e-5),
            composed::layer_norm::<B>(x.clone(), w.clone(), b.clone(), 1e-5),
            2e-5,
        );
        assert_close(
            softmax_last(x.clone()),
            composed::softmax_last::<B>(x.clone()),
            TOL,
        );
        assert_close(
            bias_gelu(x.clone(), b.clone()),
            composed::bias_gelu::<B>(x.clone(), b.clone()),
            TOL,
        );
        if shape.len() == 2 {
            let picked: Vec<i64> = (0..shape[0])
                .map(|r| ((r * 13 + 5) % width) as i64)
                .collect();
            assert_close(
                cross_entropy_logits(x.clone(), targets(&picked)),
                composed::cross_entropy_logits::<B>(x.clone(), targets(&picked)),
                TOL,
            );
        }
        #[cfg(feature = "autodiff")]
        {
            use crate::kernels::backward::generic;
            let d = random(shape, seed + 3);
            assert_grads(
                rms_norm_backward(x.clone(), w.clone(), 1e-5, d.clone(), [true, true]),
                generic::rms_norm_backward::<B>(
                    x.clone(),
                    w.clone(),
                    1e-5,
                    d.clone(),
                    [true, true],
                ),
                1e-4,
            );
            assert_grads(
                layer_norm_backward(x.clone(), w.clone(), 1e-5, d.clone(), [true; 3]),
                generic::layer_norm_backward::<B>(x.clone(), w.clone(), 1e-5, d.clone(), [true; 3]),
                1e-4,
            );
            let y = composed::softmax_last::<B>(x.clone());
            assert_close(
                softmax_last_backward(y.clone(), d.clone()),
                generic::softmax_last_backward::<B>(y, d),
                TOL,
            );
        }
    }
}

/// The targets checked on the device (the device's int dtype) and on the host (another
/// int dtype) give the same loss.
#[test]
fn cross_entropy_target_dtypes() {
    let picked = [4i64, 0, 2];
    let logits = random(&[3, 5], 7);
    let expected = composed::cross_entropy_logits::<B>(logits.clone(), targets(&picked));
    for dtype in [IntDType::I32, IntDType::U32, IntDType::I64] {
        if !<B as burn_backend::Backend>::supports_dtype(&device(), DType::from(dtype)) {
            continue;
        }
        let t = B::int_cast(targets(&picked), dtype);
        assert_close(
            cross_entropy_logits(logits.clone(), t),
            expected.clone(),
            TOL,
        );
    }
}

#[test]
#[should_panic(expected = "target -1 of row 1 is outside 0..5")]
fn cross_entropy_checks_negative_targets() {
    cross_entropy_logits(random(&[3, 5], 1), targets(&[0, -1, 9]));
}

/// A bad target in rows of one cube each (wider than `MAX_UNIT_ROW`).
#[test]
#[should_panic(expected = "target 1500 of row 2 is outside 0..1500")]
fn cross_entropy_checks_targets_of_wide_rows() {
    cross_entropy_logits(random(&[3, 1500], 1), targets(&[0, 1499, 1500]));
}

/// The targets' count is checked before any launch.
#[test]
#[should_panic(expected = "2 targets for 3 rows")]
fn cross_entropy_checks_target_count() {
    cross_entropy_logits(random(&[3, 5], 1), targets(&[0, 1]));
}

/// Dropout reads and writes 4-lane vectors when the element count is a multiple of 4.
#[test]
fn dropout_vector_path() {
    let x = random(&[4, 1001], 1);
    let bool_dtype = DType::from(get_or_init_device_settings::<B>(&device()).bool_dtype);
    let keep = empty(&x, x.shape(), bool_dtype);
    eprintln!(
        "bool dtype {bool_dtype:?}: 4-lane dropout {}",
        dropout_vectorized(&x, &keep, 4004)
    );
    assert!(!dropout_vectorized(&x, &keep, 4003));
}

/// Tensors large enough that each unit of an element-wise kernel loops over many vectors
/// (`ITEMS_PER_UNIT`), vectorized and not.
#[test]
fn elementwise_units_loop() {
    for (k, shape) in [[300usize, 1000], [301, 999]].iter().enumerate() {
        let n = shape[0] * shape[1];
        let seed = 300 + 10 * k as u64;
        let (a, b) = (random(shape, seed), random(shape, seed + 1));
        let bias = random(&[shape[1]], seed + 2);
        assert_close(
            add_relu(a.clone(), b.clone()),
            composed::add_relu::<B>(a.clone(), b.clone()),
            TOL,
        );
        assert_close(
            swiglu(a.clone(), b.clone()),
            composed::swiglu::<B>(a.clone(), b.clone()),
            TOL,
        );
        assert_close(
            clamp_ste(a.clone(), -0.5, 1.0),
            composed::clamp_ste::<B>(a.clone(), -0.5, 1.0),
            0.0,
        );
        assert_close(
            bias_gelu(a.clone(), bias.clone()),
            composed::bias_gelu::<B>(a.clone(), bias.clone()),
            TOL,
        );
        let (out, mask) = dropout(a.clone(), 0.3, 11);
        let (c_out, c_mask) = composed::dropout::<B>(a.clone(), 0.3, 11);
        assert_eq!(mask_values(mask), composed::dropout_keep(n, 0.3, 11));
        assert_eq!(
            into_data_sync(c_mask).as_bytes(),
            into_data_sync(dropout(a.clone(), 0.3, 11).1).as_bytes()
        );
        assert_close(out, c_out, 0.0);
        #[cfg(feature = "autodiff")]
        {
            use crate::kernels::backward::generic;
            let d = random(shape, seed + 3);
            assert_grads(
                bias_gelu_backward(a.clone(), bias.clone(), d.clone(), [true, true]),
                generic::bias_gelu_backward::<B>(a.clone(), bias.clone(), d.clone(), [true, true]),
                1e-4,
            );
            assert_grads(
                swiglu_backward(a.clone(), b.clone(), d.clone(), [true, true]),
                generic::swiglu_backward::<B>(a.clone(), b.clone(), d.clone(), [true, true]),
                TOL,
            );
        }
    }
}

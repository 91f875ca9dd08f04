//! Dtypes the kernels do not take: the shipped fused ops declare `dtypes = ["f32", "f16",
//! "bf16"]` and `other_dtypes = "composition"`, so an `f64` call runs their composition, forward
//! and, for a tracked input, backward through Burn's autodiff of the composition.

use burn_route::{add_relu, bias_gelu, layer_norm, rms_norm, softmax_last, swiglu};
use burn_tensor::{DType, Device, FloatDType, Tensor, TensorData};

use crate::common::{Rng, assert_close, values};

fn input(rng: &mut Rng, shape: [usize; 2], device: &Device) -> Tensor<2> {
    let data = rng.vec(shape[0] * shape[1], -2.0, 2.0);
    Tensor::<2>::from_data(TensorData::new(data, shape.to_vec()), device)
}

/// Each op's `f64` output keeps `f64` and has the `f32` kernel's values.
#[test]
fn f64_calls_run_the_composition_with_the_kernels_values() {
    let device = Device::flex();
    let mut rng = Rng::new(30);
    let (x, y) = (
        input(&mut rng, [3, 8], &device),
        input(&mut rng, [3, 8], &device),
    );
    let w = input(&mut rng, [1, 8], &device).reshape([8]);
    let wide = |t: &Tensor<2>| t.clone().cast(FloatDType::F64);
    let cases: Vec<(&str, Tensor<2>, Tensor<2>)> = vec![
        (
            "add_relu",
            add_relu(x.clone(), y.clone()),
            add_relu(wide(&x), wide(&y)),
        ),
        (
            "swiglu",
            swiglu(x.clone(), y.clone()),
            swiglu(wide(&x), wide(&y)),
        ),
        (
            "softmax_last",
            softmax_last(x.clone()),
            softmax_last(wide(&x)),
        ),
        (
            "bias_gelu",
            bias_gelu(x.clone(), w.clone()),
            bias_gelu(wide(&x), w.clone().cast(FloatDType::F64)),
        ),
        (
            "rms_norm",
            rms_norm(x.clone(), w.clone(), 1e-5),
            rms_norm(wide(&x), w.clone().cast(FloatDType::F64), 1e-5),
        ),
        (
            "layer_norm",
            layer_norm(x.clone(), w.clone(), w.clone(), 1e-5),
            layer_norm(
                wide(&x),
                w.clone().cast(FloatDType::F64),
                w.clone().cast(FloatDType::F64),
                1e-5,
            ),
        ),
    ];
    for (op, f32_out, f64_out) in cases {
        assert_eq!(f64_out.dtype(), DType::F64, "{op}: output dtype");
        assert_close(&values(&f64_out), &values(&f32_out), 1e-5, op);
    }
}

/// A tracked `f64` input of `rms_norm` runs the composition on `Autodiff<Flex>`: its gradients
/// are `f64` and match central finite differences in `f64`.
#[cfg(feature = "autodiff")]
#[test]
fn f64_gradients_come_from_the_composition() {
    let mut rng = Rng::new(31);
    let x0: Vec<f32> = rng.vec(2 * 5, -2.0, 2.0);
    let w0: Vec<f32> = rng.vec(5, 0.5, 1.5);
    let k0: Vec<f32> = rng.vec(2 * 5, -1.0, 1.0);
    let f64_tensor = |data: &[f32], shape: Vec<usize>, device: &Device| {
        Tensor::<2>::from_data(TensorData::new(data.to_vec(), shape), device).cast(FloatDType::F64)
    };
    // sum(rms_norm(x, w) * k): a loss that weighs every output differently.
    let loss = |x: Tensor<2>, w: Tensor<1>, device: &Device| {
        let out = rms_norm(x, w, 1e-5);
        assert_eq!(out.dtype(), DType::F64, "output dtype");
        (out * f64_tensor(&k0, vec![2, 5], device)).sum()
    };
    let device = Device::flex().autodiff();
    let x = f64_tensor(&x0, vec![2, 5], &device).require_grad();
    let w = f64_tensor(&w0, vec![1, 5], &device)
        .reshape([5])
        .require_grad();
    let grads = loss(x.clone(), w.clone(), &device).backward();
    let (gx, gw) = (x.grad(&grads).unwrap(), w.grad(&grads).unwrap());
    assert_eq!((gx.dtype(), gw.dtype()), (DType::F64, DType::F64));

    let flex = Device::flex();
    let value = |x: &[f32], w: &[f32]| -> f64 {
        let x = f64_tensor(x, vec![2, 5], &flex);
        let w = f64_tensor(w, vec![1, 5], &flex).reshape([5]);
        loss(x, w, &flex)
            .into_data()
            .convert::<f64>()
            .try_to_vec::<f64>()
            .unwrap()[0]
    };
    let fd_x = crate::common::finite_difference(|x| value(x, &w0), &x0, 1e-3);
    let fd_w = crate::common::finite_difference(|w| value(&x0, w), &w0, 1e-3);
    assert_close(&values(&gx), &fd_x, 1e-3, "d loss / d x");
    assert_close(
        &values(&gw.reshape([1, 5])),
        &fd_w,
        1e-3,
        "d loss / d weight",
    );
}

/// `clamp_ste` declares no `dtypes`: its straight-through gradient (`grad`, even outside the
/// bounds) is not its composition's (`clamp`'s, zero there), so no dtype may fall back to the
/// composition under autodiff. In f16 and f64 the gradient stays straight-through.
#[cfg(feature = "autodiff")]
#[test]
fn clamp_ste_keeps_its_straight_through_gradient_in_every_dtype() {
    let device = Device::flex().autodiff();
    for dtype in [FloatDType::F16, FloatDType::F32, FloatDType::F64] {
        let x = Tensor::<2>::from_data([[-3.0, 0.5, 4.0]], &device)
            .cast(dtype)
            .require_grad();
        let out = burn_route::clamp_ste(x.clone(), -1.0, 1.0);
        assert_eq!(values(&out), [-1.0, 0.5, 1.0], "{dtype:?}");
        let grads = out.sum().backward();
        let grad = x.grad(&grads).unwrap();
        assert_eq!(
            values(&grad),
            [1.0, 1.0, 1.0],
            "{dtype:?}: straight through"
        );
    }
}

#![cfg(feature = "wgpu")]
//! Every op on `Cube` (cubecl's wgpu runtime) against the same op on Flex, values and gradients,
//! in one binary with both backends compiled in. On a machine without a GPU, wgpu runs on
//! lavapipe (Vulkan, Debian's `mesa-vulkan-drivers`) or llvmpipe (GL); `.ci/run` installs the
//! former.

use crate::parity;

use crate::common::{assert_close, values};
use burn_route::rt::{BackendId, InputName, RouteError};
use burn_route::{add_relu, ramp, try_add_relu, try_iota};
use burn_tensor::{Device, Tensor};

fn gpu() -> Device {
    Device::wgpu(crate::adapter::device_kind())
}

#[test]
fn every_op_gives_the_flex_values_on_cube() {
    parity::every_op_gives_the_flex_values(&gpu());
}

/// Gradients of every differentiable op on `Autodiff<Cube>` against `Autodiff<Flex>`.
#[cfg(feature = "autodiff")]
#[test]
fn gradients_on_cube_match_flex() {
    parity::gradients_match_flex(&gpu().autodiff());
}

/// With Flex and Cube in one binary, a tracked tensor is routed inside the `Autodiff` kind to
/// its own backend: the output stays on the input's device, tracked.
#[cfg(feature = "autodiff")]
#[test]
fn tracked_tensors_are_routed_to_their_own_backend() {
    for device in [Device::flex().autodiff(), gpu().autodiff()] {
        let x = Tensor::<1>::from_data([1.0, -2.0, 3.0], &device).require_grad();
        let y = Tensor::<1>::from_data([0.5, 0.5, -4.0], &device);
        let out = add_relu(x.clone(), y);
        assert!(out.is_tracked(), "{device:?}: output is tracked");
        assert_eq!(out.device(), device, "output stays on {device:?}");
        let g = out.sum().backward();
        assert_eq!(values(&x.grad(&g).expect("grad")), [1.0, 0.0, 0.0]);
    }
}

#[test]
fn inputs_on_flex_and_cube_are_a_backend_mismatch() {
    let flex = Tensor::<1>::from_data([1.0, 2.0], &Device::flex());
    let cube = Tensor::<1>::from_data([1.0, 2.0], &gpu());
    let err = try_add_relu(flex, cube).unwrap_err();
    assert_eq!(
        err,
        RouteError::BackendMismatch {
            op: "add_relu",
            input: InputName::new("rhs"),
            backend: BackendId::Cube,
            routing_input: InputName::new("lhs"),
            routing_backend: BackendId::Flex,
        }
    );
}

/// Tracked inputs on two backends are a mismatch too: neither is routed to the other's
/// `Autodiff` kernel.
#[cfg(feature = "autodiff")]
#[test]
fn tracked_inputs_on_flex_and_cube_are_a_backend_mismatch() {
    let cube = Tensor::<1>::from_data([1.0, 2.0], &gpu().autodiff()).require_grad();
    let flex = Tensor::<1>::from_data([1.0, 2.0], &Device::flex().autodiff()).require_grad();
    assert_eq!(
        try_add_relu(cube, flex).unwrap_err(),
        RouteError::BackendMismatch {
            op: "add_relu",
            input: InputName::new("rhs"),
            backend: BackendId::Flex,
            routing_input: InputName::new("lhs"),
            routing_backend: BackendId::Cube,
        }
    );
}

#[test]
fn a_flex_only_op_refuses_a_cube_device_by_name() {
    let err = try_iota(4, &gpu()).unwrap_err();
    assert!(
        matches!(
            err,
            RouteError::UnlistedBackend {
                op: "iota",
                backend: BackendId::Cube,
                ..
            }
        ),
        "{err:?}"
    );
}

/// An op without tensor inputs is routed by its device alone, to each backend the manifest
/// lists: a Cube device runs `ramp` on Cube, next to Flex in the same binary.
#[test]
fn a_device_only_op_runs_on_the_backend_of_its_device() {
    let on_gpu = ramp(5, &gpu());
    assert_eq!(on_gpu.device(), gpu());
    assert_eq!(values(&on_gpu), [0.0, 1.0, 2.0, 3.0, 4.0]);
    let on_cpu = ramp(2, &Device::flex());
    assert_eq!(on_cpu.device(), Device::flex());
    assert_eq!(values(&on_cpu), [0.0, 1.0]);
    // And under autodiff on Cube: an untracked autodiff float on the Cube device.
    let tracked_device = gpu().autodiff();
    let out = ramp(3, &tracked_device);
    assert!(out.is_autodiff());
    assert_eq!(values(&out), [0.0, 1.0, 2.0]);
}

/// The ops with CubeCL kernels take `f16` on Cube (lavapipe stores it; `bf16` where the device
/// does, else a skip says so): the output and the gradients keep the input's dtype, and the
/// values are Flex's `f32` values on the same rounded inputs, within two units in the last
/// place of the dtype (the kernels compute in `f32`). Run with fusion off and on in CI.
#[test]
fn kernel_ops_take_half_precision_on_cube() {
    use burn_route::{
        bias_gelu, clamp_ste, cross_entropy_logits, dropout, layer_norm, rms_norm, softmax_last,
        swiglu,
    };
    use burn_tensor::{DType, FloatDType, Int, TensorData};
    let device = gpu();
    let mut rng = crate::common::Rng::new(29);
    let (rows, width) = (5, 48);
    let a = rng.vec(rows * width, -3.0, 3.0);
    let b = rng.vec(rows * width, -3.0, 3.0);
    let w = rng.vec(width, 0.5, 1.5);
    let classes: Vec<i64> = (0..rows as i64).map(|r| (r * 11) % width as i64).collect();
    for (dtype, ulp) in [
        (FloatDType::F16, 2f32.powi(-10)),
        (FloatDType::BF16, 2f32.powi(-7)),
    ] {
        if !device.supports_dtype(dtype) {
            eprintln!("{dtype:?}: skipped, this device does not store it");
            continue;
        }
        // The inputs in `dtype` on Cube, and the same rounded values in f32 on Flex.
        let both = |data: &[f32], shape: Vec<usize>| {
            let t =
                Tensor::<2>::from_data(TensorData::new(data.to_vec(), shape), &device).cast(dtype);
            let flex =
                Tensor::<2>::from_data(t.clone().into_data().convert::<f32>(), &Device::flex());
            (t, flex)
        };
        let (x, fx) = both(&a, vec![rows, width]);
        let (y, fy) = both(&b, vec![rows, width]);
        let (p, fp) = both(&w, vec![1, width]);
        let (p, fp) = (p.reshape([width]), fp.reshape([width]));
        let targets = |d: &Device| Tensor::<1, Int>::from_data(classes.as_slice(), d);
        let check = |what: &str, half: Vec<Tensor<2>>, full: Vec<Tensor<2>>| {
            for (h, f) in half.iter().zip(&full) {
                assert_eq!(h.dtype(), DType::from(dtype), "{what}: dtype");
                assert_close(
                    &values(h),
                    &values(f),
                    2.0 * ulp,
                    &format!("{what} in {dtype:?}"),
                );
            }
        };
        check(
            "add_relu",
            vec![add_relu(x.clone(), y.clone())],
            vec![add_relu(fx.clone(), fy.clone())],
        );
        check(
            "swiglu",
            vec![swiglu(x.clone(), y.clone())],
            vec![swiglu(fx.clone(), fy.clone())],
        );
        check(
            "bias_gelu",
            vec![bias_gelu(x.clone(), p.clone())],
            vec![bias_gelu(fx.clone(), fp.clone())],
        );
        check(
            "rms_norm",
            vec![rms_norm(x.clone(), p.clone(), 1e-5)],
            vec![rms_norm(fx.clone(), fp.clone(), 1e-5)],
        );
        check(
            "layer_norm",
            vec![layer_norm(x.clone(), p.clone(), p.clone() - 1.0, 1e-5)],
            vec![layer_norm(fx.clone(), fp.clone(), fp.clone() - 1.0, 1e-5)],
        );
        check(
            "softmax_last",
            vec![softmax_last(x.clone())],
            vec![softmax_last(fx.clone())],
        );
        check(
            "clamp_ste",
            vec![clamp_ste(x.clone(), -1.0, 1.0)],
            vec![clamp_ste(fx.clone(), -1.0, 1.0)],
        );
        check(
            "dropout",
            vec![dropout(x.clone(), 0.25, 3).0],
            vec![dropout(fx.clone(), 0.25, 3).0],
        );
        let loss = cross_entropy_logits(x.clone(), targets(&device));
        assert_eq!(
            loss.dtype(),
            DType::from(dtype),
            "cross_entropy_logits: dtype"
        );
        assert_close(
            &values(&loss),
            &values(&cross_entropy_logits(fx.clone(), targets(&Device::flex()))),
            2.0 * ulp,
            &format!("cross_entropy_logits in {dtype:?}"),
        );
        #[cfg(feature = "autodiff")]
        {
            // The backward kernels: gradients in the input's dtype, values as Flex's.
            let grads = |d: &Device, x: Tensor<2>, p: Tensor<1>| {
                let (xt, pt) = (x.dtype(), p.dtype());
                let d = d.clone().autodiff();
                let x = Tensor::<2>::from_data(x.into_data(), &d)
                    .cast(xt)
                    .require_grad();
                let p = Tensor::<1>::from_data(p.into_data(), &d)
                    .cast(pt)
                    .require_grad();
                let out = rms_norm(x.clone(), p.clone(), 1e-5)
                    + layer_norm(x.clone(), p.clone(), p.clone(), 1e-5)
                    + softmax_last(x.clone())
                    + bias_gelu(x.clone(), p.clone())
                    + swiglu(x.clone(), x.clone());
                let g = (out * x.clone().detach()).sum().backward();
                let dx = x.grad(&g).expect("x's gradient");
                let dp = p.grad(&g).expect("p's gradient");
                (dx, dp.reshape([1, width]))
            };
            let (dx, dp) = grads(&device, x.clone(), p.clone());
            let (fdx, fdp) = grads(&Device::flex(), fx.clone(), fp.clone());
            // (Parameter gradients sum `rows` rounded terms; the sums of several ops' terms
            // round once each.)
            check("gradient of x", vec![dx], vec![fdx]);
            assert_eq!(dp.dtype(), DType::from(dtype), "gradient of p: dtype");
            assert_close(
                &values(&dp),
                &values(&fdp),
                8.0 * rows as f32 * ulp,
                &format!("gradient of p in {dtype:?}"),
            );
        }
    }
}

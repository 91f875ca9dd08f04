//! Half precision: the fused ops in `f16` and `bf16` against the same ops in `f32`, on Flex
//! (here) and on Cube (`tests/integration/cube.rs`).

use burn_route::{
    add_relu, bias_gelu, clamp_ste, cross_entropy_logits, dropout, layer_norm, rms_norm,
    softmax_last, swiglu,
};
use burn_tensor::{DType, Device, FloatDType, Int, Tensor, TensorData};

use crate::common::{assert_close, values};

#[test]
fn kernel_ops_take_half_precision_on_flex() {
    kernel_ops_match_f32(&Device::flex());
}

/// The fused ops on `device` in `f16` and `bf16` (each where the device stores it, else a skip
/// says so): the output and the gradients keep the input's dtype, and the values are Flex's
/// `f32` values on the same rounded inputs, within two units in the last place of the dtype
/// (the kernels compute in `f32` and round each output once; a parameter's gradient sums
/// rounded terms, so its tolerance grows with the rows).
pub fn kernel_ops_match_f32(device: &Device) {
    let device = device.clone();
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
        // The inputs in `dtype` on `device`, and the same rounded values in f32 on Flex.
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

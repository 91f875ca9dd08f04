//! The downstream crate's ops, routed by the code its own build script generated.

use burn_route_downstream::{
    Extent, add_bias, clamp_count, cube_pow, extent, fill_like, try_add_bias,
};
#[cfg(feature = "autodiff")]
use burn_route_downstream::{PowerSums, ScaleShift, power_sums, scale_shift};
use burn_route_runtime::rt::{Device, Int, Tensor};

fn values<const D: usize>(t: &Tensor<D>) -> Vec<f32> {
    t.clone().into_data().try_to_vec::<f32>().unwrap()
}

#[cfg(feature = "autodiff")]
#[test]
fn cube_pow_values_and_gradient() {
    let x = Tensor::<1>::from_data([-2.0, 0.5, 3.0], &Device::flex());
    assert_eq!(values(&cube_pow(x)), [-8.0, 0.125, 27.0]);

    let x = Tensor::<1>::from_data([-2.0, 0.5, 3.0], &Device::flex().autodiff()).require_grad();
    let grads = cube_pow(x.clone()).sum().backward();
    // d/dx x^3 = 3 x^2, and central differences agree.
    assert_eq!(values(&x.grad(&grads).unwrap()), [12.0, 0.75, 27.0]);
    let eps = 1e-2f32;
    for (i, v) in [-2.0f32, 0.5, 3.0].into_iter().enumerate() {
        let fd = ((v + eps).powi(3) - (v - eps).powi(3)) / (2.0 * eps);
        assert!(
            (fd - values(&x.grad(&grads).unwrap())[i]).abs() < 1e-2,
            "fd {fd}"
        );
    }
}

/// A tracked input of a `detach` op (with autodiff; a plain one without).
#[test]
fn clamp_count_returns_the_clamped_tensor_and_the_count() {
    #[cfg(feature = "autodiff")]
    let x = Tensor::<2>::from_data([[-5.0, 0.0], [2.0, 9.0]], &Device::flex().autodiff())
        .require_grad();
    #[cfg(not(feature = "autodiff"))]
    let x = Tensor::<2>::from_data([[-5.0, 0.0], [2.0, 9.0]], &Device::flex());
    let (clamped, count): (Tensor<2>, Tensor<1, Int>) = clamp_count(x, -1.0, 3.0);
    assert_eq!(values(&clamped), [-1.0, 0.0, 2.0, 3.0]);
    assert_eq!(
        count
            .into_data()
            .convert::<i64>()
            .try_to_vec::<i64>()
            .unwrap(),
        [2]
    );
    #[cfg(feature = "autodiff")]
    assert!(
        !clamped.is_tracked(),
        "detach: no gradient through the output"
    );
}

/// `gpu_square` is routed to Cube only: on Flex it fails with the op, the backend and the line.
#[cfg(not(feature = "wgpu"))]
#[test]
fn an_op_not_routed_to_flex_names_the_backend_and_the_manifest_line() {
    use std::panic::{AssertUnwindSafe, catch_unwind};

    use burn_route_downstream::{gpu_square, try_gpu_square};
    use burn_route_runtime::rt::{BackendId, InputName, RouteError};

    let x = Tensor::<1>::from_data([1.0, 2.0], &Device::flex());
    let err = try_gpu_square(x.clone()).unwrap_err();
    assert_eq!(
        err,
        RouteError::UnlistedBackend {
            op: "gpu_square",
            input: InputName::new("x"),
            backend: BackendId::Flex,
            location: "ops.toml:43",
        }
    );
    let message = "op `gpu_square` is not routed to backend Flex: input `x` (which picks the backend) \
is on Flex, but ops.toml:43 does not list Flex for the op (or this build does not compile that \
backend in). Fix: add Flex to the op's backends in the manifest and implement its kernel, enable the \
feature that compiles Flex in, or move the inputs to a listed backend. See https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#unlisted-backend";
    assert_eq!(err.to_string(), message);
    let panic = catch_unwind(AssertUnwindSafe(|| drop(gpu_square(x)))).unwrap_err();
    assert_eq!(panic.downcast_ref::<String>().unwrap(), message);
    // From an autodiff device (tracked or not) it is the same error, not an autodiff one.
    #[cfg(feature = "autodiff")]
    let tracked = Tensor::<1>::from_data([1.0, 2.0], &Device::flex().autodiff()).require_grad();
    #[cfg(feature = "autodiff")]
    assert_eq!(try_gpu_square(tracked).unwrap_err().to_string(), message);
}

#[test]
fn fill_like_runs_on_the_device_of_its_tensor() {
    let device = Device::flex();
    let x = Tensor::<2>::from_data([[1.0, 2.0, 3.0]], &device);
    let out = fill_like(&x, 7.5, &device);
    assert_eq!(out.dims(), [1, 3]);
    assert_eq!(values(&out), [7.5, 7.5, 7.5]);
    // An autodiff device: the output is an untracked autodiff tensor.
    #[cfg(feature = "autodiff")]
    {
        let out = fill_like(&x, 1.0, &Device::flex().autodiff());
        assert!(out.is_autodiff() && !out.is_tracked());
    }
}

/// A device on another backend than the routing tensor: `RouteError::BackendMismatch`, produced
/// for real (a wgpu device value needs no GPU until a tensor is allocated on it).
#[cfg(feature = "wgpu")]
#[test]
fn a_device_on_another_backend_is_a_backend_mismatch() {
    use burn_route_downstream::try_fill_like;
    use burn_route_runtime::rt::{BackendId, DeviceKind, InputName, RouteError};

    let x = Tensor::<1>::from_data([1.0, 2.0], &Device::flex());
    let gpu = Device::wgpu(DeviceKind::Cpu);
    let err = try_fill_like(&x, 0.0, &gpu).unwrap_err();
    assert_eq!(
        err,
        RouteError::BackendMismatch {
            op: "fill_like",
            input: InputName::new("device"),
            backend: BackendId::Cube,
            routing_input: InputName::new("x"),
            routing_backend: BackendId::Flex,
        }
    );
    let message = "op `fill_like` got inputs on different backends: `x` is on Flex (it picks the \
backend) but `device` is on Cube. Fix: put `device` on Flex too (`.to_device(..)` for a tensor, a \
Flex device for a device argument). See https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#backend-mismatch";
    assert_eq!(err.to_string(), message);
    let panic = std::panic::catch_unwind(|| drop(fill_like(&x, 0.0, &gpu))).unwrap_err();
    assert_eq!(panic.downcast_ref::<String>().unwrap(), message);
}

#[test]
fn add_bias_checks_its_shape_contract() {
    let device = Device::flex();
    let x = Tensor::<2>::from_data([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], &device);
    let bias = Tensor::<1>::from_data([10.0, 20.0, 30.0], &device);
    assert_eq!(
        values(&add_bias(x.clone(), bias)),
        [11.0, 22.0, 33.0, 14.0, 25.0, 36.0]
    );
    let err = try_add_bias(x, Tensor::<1>::from_data([1.0, 2.0], &device)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "op `add_bias` got a shape its contract refuses: input `bias` (backend Flex) has shape [2], \
but its contract `last_dim_of` (ops.toml:68) expects [3], the last dimension of `x` (shape [2, 3]). \
Fix: pass `bias` with that shape (reshape, slice or expand it first), or change the contract in \
the manifest if the op supports it. See https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#shape-contract"
    );
}

/// The fused Flex kernel takes any row stride, and leaves a shared input untouched.
#[test]
fn cube_pow_on_a_view_and_on_a_shared_input() {
    let device = Device::flex();
    let wide = Tensor::<2>::from_data([[1.0, 2.0, -1.0], [3.0, -2.0, 0.5]], &device);
    // The last two columns: a view with a row stride of 3.
    let view = wide.clone().narrow(1, 1, 2);
    assert_eq!(values(&cube_pow(view)), [8.0, -1.0, -8.0, 0.125]);
    // `wide` is still held here, so the kernel writes a fresh buffer.
    assert_eq!(
        values(&cube_pow(wide.clone())),
        [1.0, 8.0, -1.0, 27.0, -8.0, 0.125]
    );
    assert_eq!(values(&wide), [1.0, 2.0, -1.0, 3.0, -2.0, 0.5]);
}

/// `cube_pow`'s CubeCL kernel on Cube (lavapipe without a GPU), values and gradient, against
/// Flex: whichever `Cube` this build has (`CubeBackend`, or `Fusion<CubeBackend>` when fusion is
/// on and the generated lazy implementation queues the kernel).
#[cfg(feature = "wgpu")]
#[test]
fn cube_pow_runs_its_kernel_on_cube() {
    use burn_route_runtime::rt::DeviceKind;

    let gpu = Device::wgpu(DeviceKind::Cpu);
    let data = [[1.5f32, -2.0, 0.5], [3.0, -0.25, 0.0]];
    let on_gpu = cube_pow(Tensor::<2>::from_data(data, &gpu));
    let on_flex = cube_pow(Tensor::<2>::from_data(data, &Device::flex()));
    assert_eq!(on_gpu.dims(), [2, 3]);
    assert_eq!(values(&on_gpu), values(&on_flex));
    // A strided view takes the composition, with the same values.
    let t = Tensor::<2>::from_data(data, &gpu).swap_dims(0, 1);
    let expected: Vec<f32> = values(&Tensor::<2>::from_data(data, &Device::flex()).swap_dims(0, 1))
        .iter()
        .map(|v| v * v * v)
        .collect();
    assert_eq!(values(&cube_pow(t)), expected);
}

#[cfg(all(feature = "wgpu", feature = "autodiff"))]
#[test]
fn cube_pow_gradient_on_cube() {
    use burn_route_runtime::rt::DeviceKind;

    let gpu = Device::wgpu(DeviceKind::Cpu).autodiff();
    let x = Tensor::<1>::from_data([1.5f32, -2.0, 0.5], &gpu).require_grad();
    let grads = cube_pow(x.clone()).sum().backward();
    let grad = values(&x.grad(&grads).expect("a gradient"));
    assert_eq!(grad, [6.75, 12.0, 0.75]);
}

/// A declared struct output: both fields, on Flex and (with `wgpu`) on Cube, where it runs as
/// one deferred operation declared from the fields' metadata when fusion is on.
#[test]
fn extent_returns_a_struct_of_tensors() {
    let run = |device: &Device| {
        let x = Tensor::<2>::from_data([[3.0, -1.5], [7.25, 0.0]], device);
        let Extent { min, max } = extent(x);
        (values(&min), values(&max))
    };
    assert_eq!(run(&Device::flex()), (vec![-1.5], vec![7.25]));
    #[cfg(feature = "wgpu")]
    assert_eq!(
        run(&Device::wgpu(burn_route_runtime::rt::DeviceKind::Cpu)),
        (vec![-1.5], vec![7.25])
    );
}

/// `scale_shift` declares no `backward` and this crate writes no `Autodiff<B, C>` kernel: the
/// generated one runs the composition on `Autodiff<B, C>`, and every tensor gets its gradient,
/// the declared type's fields included.
#[cfg(feature = "autodiff")]
#[test]
fn scale_shift_gradients_reach_the_fields_of_its_struct() {
    let device = Device::flex().autodiff();
    let x = Tensor::<2>::from_data([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], &device).require_grad();
    let weight = Tensor::<1>::from_data([0.5, -1.0, 2.0], &device).require_grad();
    let bias = Tensor::<1>::from_data([1.0, 0.0, -1.0], &device).require_grad();
    let p = ScaleShift {
        weight: weight.clone(),
        bias: bias.clone(),
    };
    let out = scale_shift(x.clone(), p);
    assert_eq!(values(&out), [1.5, -2.0, 5.0, 3.0, -5.0, 11.0]);
    // loss = sum(out): d/dx = weight per row, d/dweight = the column sums of x, d/dbias = rows.
    let grads = out.sum().backward();
    assert_eq!(
        values(&x.grad(&grads).unwrap()),
        [0.5, -1.0, 2.0, 0.5, -1.0, 2.0]
    );
    assert_eq!(values(&weight.grad(&grads).unwrap()), [5.0, 7.0, 9.0]);
    assert_eq!(values(&bias.grad(&grads).unwrap()), [2.0, 2.0, 2.0]);
}

/// `cube_pow` declares `dtypes = ["f32"]` and no fallback: an `f64` call is refused before its
/// kernel runs, naming the op, the input, the dtype and the line of `dtypes`.
#[test]
fn cube_pow_refuses_a_dtype_its_kernels_do_not_take() {
    use burn_route_downstream::try_cube_pow;
    use burn_route_runtime::rt::{FloatDType, RouteError};
    let x = Tensor::<1>::from_data([1.0, 2.0], &Device::flex()).cast(FloatDType::F64);
    let err = try_cube_pow(x.clone()).unwrap_err();
    assert!(
        matches!(err, RouteError::UnsupportedDtype { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "op `cube_pow` does not take f64 inputs: input `x` (backend Flex) is f64, but ops.toml:21 \
         declares the op's kernels for f32 only, and no fallback for other dtypes \
         (`other_dtypes = \"error\"`). Fix: cast `x` to a dtype the kernels take first \
         (`.cast(FloatDType::F32)` on the tensor), or declare `other_dtypes = \"composition\"` in \
         ops.toml:21 (with a `composition`) to run the op's composition for other dtypes, or add \
         \"f64\" to `dtypes` once its kernels take it. See \
         https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#unsupported-dtype"
    );
    // Cast to a declared dtype, it runs.
    let out = try_cube_pow(x.cast(FloatDType::F32)).unwrap();
    assert_eq!(values(&out), [1.0, 8.0]);
}

/// `power_sums` returns a struct: its backward formula names each field's incoming gradient
/// (`grad.first`, `grad.second`), and each field is a node of its own, so a loss over one field
/// or both gets the right gradient.
#[cfg(feature = "autodiff")]
#[test]
fn power_sums_gradients_come_from_each_field() {
    let device = Device::flex().autodiff();
    let data = [[1.0, -2.0, 3.0], [0.5, 0.0, -1.5]];
    let x = Tensor::<2>::from_data(data, &device).require_grad();
    let PowerSums { first, second } = power_sums(x.clone());
    assert_eq!(values(&first), [2.0, -1.0]);
    assert_eq!(values(&second), [14.0, 2.5]);
    // loss = 3 * first + second: d/dx = 3 + 2 x.
    let grads = (first * 3.0 + second).sum().backward();
    assert_eq!(
        values(&x.grad(&grads).unwrap()),
        [5.0, -1.0, 9.0, 4.0, 3.0, 0.0]
    );
    // One field alone: d(sum of second)/dx = 2 x, and `first`'s node adds nothing.
    let x = Tensor::<2>::from_data(data, &device).require_grad();
    let grads = power_sums(x.clone()).second.sum().backward();
    assert_eq!(
        values(&x.grad(&grads).unwrap()),
        [2.0, -4.0, 6.0, 1.0, 0.0, -3.0]
    );
}

#![cfg(feature = "remote")]
//! The forms of `tests/remote/ops.toml` (rendered into `tests/remote/generated/`) through a
//! loopback Remote server that serves them beside burn-route's own ops: each call is one
//! operation the server runs with the op's kernel on Flex, and its outputs must be what local
//! Flex computes. Borrowed, `option` and `vec` inputs, plain arguments of every encoding, nested
//! tuples with `option` and `vec` outputs, metadata from inputs, functions and the device
//! default, an op routed by its device, and an op that runs its composition on Remote.

use burn_tensor::server::RemoteServer;
use burn_tensor::{Bool, Device, Int, Tensor};

use crate::common::{ints, values};
use crate::loopback::LoopbackServer;

/// The generated modules, as a crate of your own includes them. (Most `try_` twins are not
/// called here: the panicking forms cover the routing.)
#[allow(dead_code)]
pub mod routed {
    pub mod ops {
        include!("../remote/generated/routed_ops.rs");
    }
    pub mod dispatch {
        include!("../remote/generated/routed_dispatch.rs");
    }
    pub mod tensor {
        include!("../remote/generated/routed_tensor.rs");
    }
}

/// The output metadata functions the manifest names.
pub mod meta {
    use burn_route::rt::{Shape, TensorSpec};

    #[allow(clippy::too_many_arguments)]
    pub fn k_zeros(
        _x: &TensorSpec,
        _b: &TensorSpec,
        _opt: Option<&TensorSpec>,
        _xs: &[TensorSpec],
        _mask: &TensorSpec,
        k: &usize,
        _sizes: &[usize],
        _scale: &Option<f64>,
        _shift: &(i32, [f32; 2]),
        _with_mask: &bool,
    ) -> Shape {
        Shape::new([*k])
    }

    #[allow(clippy::too_many_arguments)]
    pub fn mask_if(
        _x: &TensorSpec,
        _b: &TensorSpec,
        _opt: Option<&TensorSpec>,
        _xs: &[TensorSpec],
        mask: &TensorSpec,
        _k: &usize,
        _sizes: &[usize],
        _scale: &Option<f64>,
        _shift: &(i32, [f32; 2]),
        with_mask: &bool,
    ) -> Option<Shape> {
        with_mask.then(|| mask.shape.clone())
    }

    #[allow(clippy::too_many_arguments)]
    pub fn split(
        x: &TensorSpec,
        _b: &TensorSpec,
        _opt: Option<&TensorSpec>,
        _xs: &[TensorSpec],
        _mask: &TensorSpec,
        _k: &usize,
        sizes: &[usize],
        _scale: &Option<f64>,
        _shift: &(i32, [f32; 2]),
        _with_mask: &bool,
    ) -> Vec<Shape> {
        let last = x.shape.num_dims() - 1;
        sizes
            .iter()
            .map(|&size| {
                let mut dims = x.shape.clone();
                dims[last] = size;
                dims
            })
            .collect()
    }

    pub fn length(n: &u64, _value: &f32) -> Shape {
        Shape::new([usize::try_from(*n).expect("a length")])
    }
}

/// The compositions: the kernels on every backend (the server runs them on its Flex device).
pub mod kernels {
    use burn_route::rt::backend::{Scalar, Shape, TensorMetadata, get_or_init_device_settings};
    use burn_route::rt::{Backend, BoolTensor, DeviceOf, FloatTensor, IntTensor};

    use super::routed::ops::BlendPrimitive;

    #[allow(clippy::type_complexity, clippy::too_many_arguments)]
    pub fn forms<B: Backend>(
        x: FloatTensor<B>,
        b: &FloatTensor<B>,
        opt: Option<FloatTensor<B>>,
        xs: Vec<FloatTensor<B>>,
        mask: &BoolTensor<B>,
        k: usize,
        sizes: Vec<usize>,
        scale: Option<f64>,
        shift: (i32, [f32; 2]),
        with_mask: bool,
    ) -> (
        FloatTensor<B>,
        (IntTensor<B>, Option<BoolTensor<B>>),
        Vec<FloatTensor<B>>,
    ) {
        let device = x.device();
        let pieces = burn_route::composite::split_last::<B>(x.clone(), sizes);
        let mut sum = B::float_add(x, b.clone());
        for t in opt.into_iter().chain(xs) {
            sum = B::float_add(sum, t);
        }
        let sum = B::float_mul_scalar(sum, Scalar::from(scale.unwrap_or(1.0)));
        let sum = B::float_add_scalar(
            sum,
            Scalar::from(f64::from(shift.0) * f64::from(shift.1[0] - shift.1[1])),
        );
        let int_dtype = get_or_init_device_settings::<B>(&device).int_dtype;
        let zeros = B::int_zeros(Shape::new([k]), &device, int_dtype);
        (sum, (zeros, with_mask.then(|| mask.clone())), pieces)
    }

    pub fn filled<B: Backend>(n: u64, value: f32, device: &DeviceOf<B>) -> FloatTensor<B> {
        let dtype = get_or_init_device_settings::<B>(device).float_dtype;
        let n = usize::try_from(n).expect("a length");
        B::float_full(Shape::new([n]), Scalar::from(value), device, dtype)
    }

    pub fn blend<B: Backend>(x: FloatTensor<B>, how: &BlendPrimitive<B>) -> FloatTensor<B> {
        match how {
            BlendPrimitive::Keep => x,
            BlendPrimitive::Scale(by, negate) => {
                B::float_mul_scalar(x, Scalar::from(if *negate { -by } else { *by }))
            }
            BlendPrimitive::Windowed { window, extra } => {
                let out = B::float_mul(x, window.weights.clone());
                let mut out = B::float_add_scalar(out, Scalar::from(window.offset.unwrap_or(0.0)));
                for e in extra {
                    out = B::float_add(out, e.clone());
                }
                out
            }
        }
    }

    pub fn doubled<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
        B::float_mul_scalar(x, Scalar::from(2.0f32))
    }

    pub fn weighted<B: Backend>(
        x: FloatTensor<B>,
        w: FloatTensor<B>,
        b: FloatTensor<B>,
        y: Option<FloatTensor<B>>,
        _labels: IntTensor<B>,
        scale: f64,
    ) -> FloatTensor<B> {
        let mut sum = B::float_add(B::float_add(x, w), b);
        if let Some(y) = y {
            sum = B::float_add(sum, y);
        }
        B::float_mul_scalar(sum, Scalar::from(scale))
    }

    /// `weighted`'s backward kernel: each tracked input's gradient is `grad * scale`, at the
    /// incoming gradient's shape (the caller sums `w`'s and `b`'s back). It checks that the
    /// tensors it receives are the forward pass's.
    pub trait WeightedBackward: Backend {
        fn weighted_backward(
            w: FloatTensor<Self>,
            y: Option<FloatTensor<Self>>,
            labels: IntTensor<Self>,
            scale: f64,
            grad: FloatTensor<Self>,
            tracked: [bool; 4],
        ) -> [Option<FloatTensor<Self>>; 4] {
            let rows = grad.shape().as_slice()[..grad.shape().num_dims() - 1].to_vec();
            assert_eq!(labels.shape().as_slice(), rows, "labels: one per row");
            assert_eq!(w.shape().num_dims(), grad.shape().num_dims(), "w");
            assert_eq!(y.is_some(), tracked[3], "y is tracked when present");
            let each = Self::float_mul_scalar(grad, Scalar::from(scale));
            tracked.map(|t| t.then(|| each.clone()))
        }
    }

    impl WeightedBackward for burn_route::rt::Flex {}
}

// Every op has a `composition`: the trait's default bodies are the kernels on Flex (the
// `Remote` impl is generated: each op with output metadata one operation the server runs).
impl routed::ops::RemoteForms for burn_route::rt::Flex {}

/// A server of burn-route's ops and of this manifest's: each registration adds its own.
pub(crate) fn both(server: RemoteServer, devices: &[Device]) -> RemoteServer {
    let server = burn_route::dispatch::serve_remote_ops(server, devices);
    routed::dispatch::serve_remote_ops(server, devices)
}

type Forms = (
    Tensor<2>,
    (Tensor<1, Int>, Option<Tensor<2, Bool>>),
    Vec<Tensor<2>>,
);

fn forms_on(device: &Device, with_opt: bool, with_mask: bool, scale: Option<f64>) -> Forms {
    let x = Tensor::<2>::from_data([[1.0, -2.0, 0.5], [3.0, 0.5, -1.0]], device);
    let b = Tensor::<2>::from_data([[0.25, 0.5, 1.0], [-1.0, 2.0, 0.0]], device);
    let opt = with_opt.then(|| Tensor::<2>::from_data([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]], device));
    let xs = vec![
        Tensor::<2>::from_data([[0.5, 0.0, 0.0], [0.0, 0.5, 0.0]], device),
        Tensor::<2>::from_data([[0.0, 0.0, 4.0], [0.0, 0.0, 8.0]], device),
    ];
    let mask = Tensor::<2, Bool>::from_data([[true, false, true], [false, true, false]], device);
    routed::tensor::forms(
        x,
        &b,
        opt,
        xs,
        &mask,
        4,
        vec![1, 2],
        scale,
        (-3, [0.5, 0.25]),
        with_mask,
    )
}

fn assert_same(far: Forms, near: Forms) {
    let (far_sum, (far_zeros, far_mask), far_pieces) = far;
    let (near_sum, (near_zeros, near_mask), near_pieces) = near;
    assert_eq!(values(&far_sum), values(&near_sum));
    assert_eq!(ints(&far_zeros), ints(&near_zeros));
    assert_eq!(far_mask.is_some(), near_mask.is_some(), "the option output");
    if let (Some(far), Some(near)) = (far_mask, near_mask) {
        assert_eq!(far.into_data(), near.into_data());
    }
    assert_eq!(far_pieces.len(), near_pieces.len(), "the vec output");
    for (far, near) in far_pieces.iter().zip(&near_pieces) {
        assert_eq!(far.dims(), near.dims());
        assert_eq!(values(far), values(near));
    }
}

#[test]
fn every_form_runs_as_one_operation_on_the_server_and_gives_the_flex_values() {
    let server = LoopbackServer::serving(both);
    let remote = server.device();
    let local = Device::flex();
    for (with_opt, with_mask, scale) in [
        (true, true, Some(0.1)),
        (false, false, None),
        (true, false, Some(-2.5)),
    ] {
        let far = forms_on(&remote, with_opt, with_mask, scale);
        assert_eq!(
            far.0.device(),
            remote,
            "the output stays on the remote device"
        );
        assert_same(far, forms_on(&local, with_opt, with_mask, scale));
    }
    // Routed by its device alone.
    let far = routed::tensor::filled(3, 1.5, &remote);
    assert_eq!(far.device(), remote);
    assert_eq!(values(&far), [1.5, 1.5, 1.5]);
    // An op that runs its composition on Remote needs nothing from the server's registration.
    let x = Tensor::<2>::from_data([[1.0, -2.0], [0.5, 3.0]], &remote);
    assert_eq!(values(&routed::tensor::doubled(x)), [2.0, -4.0, 1.0, 6.0]);
    // burn-route's own ops, served by the same server.
    let logits = [[1.0, -2.0, 0.5], [3.0, 0.5, -1.0]];
    assert_eq!(
        values(&burn_route::softmax_last(Tensor::<2>::from_data(
            logits, &remote
        ))),
        values(&burn_route::softmax_last(Tensor::<2>::from_data(
            logits, &local
        )))
    );
}

/// A declared enum and the struct inside it travel to the server exactly: each variant, plain
/// fields, an absent `Option` and a `vec` of tensors, the value borrowed.
#[test]
fn declared_types_run_as_one_operation_on_the_server() {
    use routed::tensor::{Blend, Window};
    let server = LoopbackServer::serving(both);
    let remote = server.device();
    let local = Device::flex();
    let x = [[1.0, -2.0, 0.5], [3.0, 0.5, -1.0]];
    let blends = |d: &Device| -> Vec<Blend<2>> {
        let weights = Tensor::<2>::from_data([[2.0, 0.5, -1.0], [1.0, 1.0, 4.0]], d);
        let extra = vec![
            Tensor::<2>::from_data([[0.25, 0.0, 0.0], [0.0, 0.0, 1.0]], d),
            Tensor::<2>::from_data([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]], d),
        ];
        vec![
            Blend::Keep,
            Blend::Scale(1.5, false),
            Blend::Scale(0.5, true),
            Blend::Windowed {
                window: Window {
                    offset: Some(-0.75),
                    weights: weights.clone(),
                },
                extra,
            },
            Blend::Windowed {
                window: Window {
                    offset: None,
                    weights,
                },
                extra: Vec::new(),
            },
        ]
    };
    let far: Vec<Vec<f32>> = blends(&remote)
        .iter()
        .map(|how| {
            let out = routed::tensor::blend(Tensor::<2>::from_data(x, &remote), how);
            assert_eq!(
                out.device(),
                remote,
                "the output stays on the remote device"
            );
            values(&out)
        })
        .collect();
    let near: Vec<Vec<f32>> = blends(&local)
        .iter()
        .map(|how| {
            values(&routed::tensor::blend(
                Tensor::<2>::from_data(x, &local),
                how,
            ))
        })
        .collect();
    assert_eq!(far, near);
    assert_eq!(far[2], [-0.5, 1.0, -0.25, -1.5, -0.25, 0.5]);
    assert_eq!(far[3], [2.5, -0.75, -0.25, 4.25, 1.75, -1.75]);
}

/// The gradients of `weighted` through the server, where its backward kernel runs as one
/// operation (the generated `WeightedBackward` for `Remote`), equal local Flex's: `w` and `b`
/// summed back to their broadcast shape on the server, `x` and `y` at the incoming gradient's.
#[cfg(feature = "autodiff")]
#[test]
fn a_backward_kernel_runs_on_the_server_as_one_operation() {
    let server = LoopbackServer::serving(both);
    let remote = server.device().autodiff();
    let local = Device::flex().autodiff();
    let grads = |device: &Device, with_y: bool| {
        let x = Tensor::<2>::from_data([[1.0, -2.0, 0.5], [3.0, 0.5, -1.0]], device).require_grad();
        let w = Tensor::<2>::from_data([[0.5, 1.0, -1.0]], device).require_grad();
        let b = Tensor::<2>::from_data([[2.0, 0.0, 1.0]], device).require_grad();
        let y = with_y.then(|| {
            Tensor::<2>::from_data([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device).require_grad()
        });
        let labels = Tensor::<1, Int>::from_data([1, 0], device);
        let weights = Tensor::<2>::from_data([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.25]], device);
        let out = routed::tensor::weighted(x.clone(), w.clone(), b.clone(), y.clone(), labels, 1.5);
        assert_eq!(out.device(), *device, "the output stays on its device");
        let g = (out * weights).sum().backward();
        let mut all = vec![
            values(&x.grad(&g).expect("x")),
            values(&w.grad(&g).expect("w")),
            values(&b.grad(&g).expect("b")),
        ];
        if let Some(y) = y {
            all.push(values(&y.grad(&g).expect("y")));
        }
        all
    };
    for with_y in [true, false] {
        let far = grads(&remote, with_y);
        assert_eq!(far, grads(&local, with_y), "with_y = {with_y}");
        // dw = sum over rows of 1.5 * weights.
        assert_eq!(far[1], [0.0, 3.75, 4.875]);
    }
}

/// A server of burn-route's ops only: this manifest's op is refused at the call, naming its
/// own registration function (each manifest has its own handshake).
#[test]
fn a_server_of_another_crates_ops_only_refuses_this_manifests_ops() {
    let server = LoopbackServer::start();
    let remote = server.device();
    let err = routed::tensor::try_filled(2, 1.0, &remote).unwrap_err();
    let burn_route::rt::RouteError::RemoteNotServed { serve, problem, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(
        *serve,
        "integration::remote_forms::routed::dispatch::serve_remote_ops"
    );
    assert!(
        matches!(problem, burn_route::rt::RemoteProblem::NotServed(_)),
        "{problem:?}"
    );
}

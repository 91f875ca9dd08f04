#![cfg(feature = "wgpu")]
//! `Cube` as this build compiles it: `CubeBackend`, or `Fusion<CubeBackend>` when burn-cubecl's
//! `fusion` feature is on (`.ci/run` builds this file both ways, the second time through the
//! application-side `burn-tensor/fusion` feature only, and says which through
//! `BURN_ROUTE_EXPECT_FUSION`). Lazy ordering with ordinary Burn ops around the routed ones, and
//! the check of a deliberately wrong output declaration when a deferred kernel runs.

use crate::common::{assert_close, tensor, values};
use burn_backend::ops::FloatTensorOps;
use burn_backend::{Backend, ExecutionError, TensorData};
use burn_cubecl::CubeDevice;
use burn_cubecl::cubecl::wgpu::WgpuDevice;
use burn_route::rt::fusion::{Fusion, FusionBackend, Lazy};
use burn_route::rt::{CubeBackend, TensorKind};
use burn_route::{add_relu, layer_norm, softmax_last, swiglu};
use burn_tensor::Device;

fn gpu() -> Device {
    Device::wgpu(crate::adapter::device_kind())
}

fn cube_is_fusion() -> bool {
    std::any::type_name::<burn_route::rt::Cube>().contains("Fusion")
}

/// The build is the one CI asked for: fusion exactly when `BURN_ROUTE_EXPECT_FUSION=1`.
#[test]
fn cube_is_fusion_exactly_when_expected() {
    let fusion = cube_is_fusion();
    match std::env::var("BURN_ROUTE_EXPECT_FUSION").as_deref() {
        Ok("1") => assert!(
            fusion,
            "Cube is {}",
            std::any::type_name::<burn_route::rt::Cube>()
        ),
        Ok("0") => assert!(
            !fusion,
            "Cube is {}",
            std::any::type_name::<burn_route::rt::Cube>()
        ),
        _ => eprintln!("Cube is {}", std::any::type_name::<burn_route::rt::Cube>()),
    }
}

/// Routed ops between ordinary Burn ops, their outputs read only after later ops were queued:
/// the same values as on Flex.
#[test]
fn routed_ops_interleave_with_burn_ops_in_order() {
    let run = |device: &Device| -> (Vec<f32>, Vec<f32>) {
        let a = tensor(&[0.5, -1.0, 2.0, -3.0, 1.5, 0.25], [2, 3], device);
        let b = tensor(&[-0.25, 0.75, -2.5, 4.0, -1.0, 0.5], [2, 3], device);
        let gamma = tensor(&[1.0, 0.5, 2.0], [3], device);
        let beta = tensor(&[0.0, 0.1, -0.2], [3], device);
        let before = a.clone() * 2.0 - 0.5;
        let mixed = add_relu(before, b.clone());
        let after = mixed.clone() + b.clone().exp();
        let gated = swiglu(after.clone(), mixed.clone());
        let normed = layer_norm(gated * 0.5, gamma, beta, 1e-5);
        let probs = softmax_last(normed + 1.0);
        // `mixed` was queued first and is read last.
        let tail = (probs.clone() * 3.0).sum();
        (values(&probs), [values(&mixed), values(&tail)].concat())
    };
    let (flex_probs, flex_rest) = run(&Device::flex());
    let (gpu_probs, gpu_rest) = run(&gpu());
    assert_close(&gpu_probs, &flex_probs, 1e-4, "softmax after the chain");
    assert_close(
        &gpu_rest,
        &flex_rest,
        1e-4,
        "add_relu output read after later ops",
    );
}

/// The check that compares a deferred kernel's outputs with their declaration; on
/// `CubeBackend` (fusion off) there is nothing deferred to check.
trait DeclarationCheck: Backend {
    fn wrong_declaration(device: &Self::Device) -> Option<Result<TensorData, ExecutionError>>;
    fn wrong_gradient(device: &Self::Device) -> Option<Result<TensorData, ExecutionError>>;
}

impl DeclarationCheck for CubeBackend {
    fn wrong_declaration(_: &Self::Device) -> Option<Result<TensorData, ExecutionError>> {
        None
    }
    fn wrong_gradient(_: &Self::Device) -> Option<Result<TensorData, ExecutionError>> {
        None
    }
}

impl<B: FusionBackend + burn_route::ops::RoutedOps> DeclarationCheck for Fusion<B> {
    fn wrong_declaration(device: &Self::Device) -> Option<Result<TensorData, ExecutionError>> {
        let data = TensorData::new(vec![1.0f32, -2.0, 3.0, -4.0, 5.0, -6.0], [2, 3]);
        let lhs = Self::float_from_data(data.clone(), device);
        let rhs = Self::float_from_data(data, device);
        // `add_relu` declared with the transposed shape: wrong on purpose.
        let mut lazy = Lazy::<B>::new("add_relu", "ops.toml:32");
        let lhs = lazy.input(lhs);
        let rhs = lazy.input(rhs);
        let dtype = lazy.spec(&lhs).dtype;
        let out = lazy.output(TensorKind::Float, "output", [3, 2].into(), dtype);
        let mut outputs = lazy.register(move |handles| {
            let result = B::add_relu(handles.float(&lhs), handles.float(&rhs));
            handles.check(&out, &result)?;
            handles.publish_float(&out, result);
            Ok(())
        });
        Some(burn_cubecl::cubecl::future::block_on(
            Self::float_into_data(outputs.one()),
        ))
    }

    /// A backward kernel's gradient of an input it does not receive, declared (as the
    /// generated impl declares it) with the incoming gradient's shape, `[2, 3]`, while the kernel
    /// returns the input's own `[1, 3]`.
    fn wrong_gradient(device: &Self::Device) -> Option<Result<TensorData, ExecutionError>> {
        let data = TensorData::new(vec![1.0f32, -2.0, 3.0, -4.0, 5.0, -6.0], [2, 3]);
        let grad = Self::float_from_data(data, device);
        let mut lazy = Lazy::<B>::new("add_row", "ops.toml:7");
        let grad = lazy.input(grad);
        let like = lazy.spec(&grad);
        let out = lazy
            .gradient("gradient of row", true, Some(&like))
            .expect("declared");
        let mut outputs = lazy.register(move |handles| {
            let result = B::float_sum_dim(handles.float(&grad), 0);
            handles.check(&out, &result)?;
            handles.publish_float(&out, result);
            Ok(())
        });
        Some(burn_cubecl::cubecl::future::block_on(
            Self::float_into_data(outputs.option().expect("declared")),
        ))
    }
}

/// A backward kernel's gradient in another shape than its declaration: the message says how a
/// gradient's shape is declared, and the two ways out (found by an adversarial run, which was
/// told to correct a `shape` the manifest does not have).
#[test]
fn a_wrong_gradient_shape_names_the_fix_for_a_gradient() {
    let device = CubeDevice::from(WgpuDevice::new(crate::adapter::wgpu_device_kind()));
    let Some(result) = <burn_route::rt::Cube as DeclarationCheck>::wrong_gradient(&device) else {
        assert!(!cube_is_fusion());
        return;
    };
    if !cfg!(debug_assertions) {
        assert!(result.is_ok());
        return;
    }
    let error = result.expect_err("the declared shape is wrong").to_string();
    assert!(
        error.contains(
            "op `add_row` returned an output its metadata does not declare: `gradient of row` is \
             declared (ops.toml:7) with shape [2, 3] and dtype F32, but the kernel returned shape \
             [1, 3] and dtype F32. Fix: a backward kernel that runs as one operation returns each \
             gradient in the shape it is declared with: its input's shape when the kernel \
             receives the input (or a shape contract fixes it), else the incoming gradient's, \
             which the autodiff pass then sums back to the input's shape. Return `row`'s \
             gradient in that shape, or list `row` in the op's `save` so that the kernel receives \
             it and may return its own shape. See \
             https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#output-metadata"
        ),
        "{error}"
    );
}

#[test]
fn a_wrong_output_declaration_fails_when_the_kernel_runs() {
    let device = CubeDevice::from(WgpuDevice::new(crate::adapter::wgpu_device_kind()));
    let Some(result) = <burn_route::rt::Cube as DeclarationCheck>::wrong_declaration(&device)
    else {
        assert!(!cube_is_fusion());
        eprintln!("Cube is CubeBackend: nothing is deferred");
        return;
    };
    if !cfg!(debug_assertions) {
        // Release builds do not compare shapes and dtypes.
        assert!(result.is_ok());
        return;
    }
    let error = result.expect_err("the declared shape is wrong").to_string();
    {
        assert!(
            error.contains(
                "op `add_relu` returned an output its metadata does not declare: `output` is \
                 declared (ops.toml:32) with shape [3, 2] and dtype F32, but the kernel returned \
                 shape [2, 3] and dtype F32. Fix: correct the output's `shape` or `dtype` in the \
                 manifest (or the function it names), or the kernel. See https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#output-metadata"
            ),
            "{error}"
        );
    }
}

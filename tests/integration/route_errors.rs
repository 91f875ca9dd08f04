//! Each `RouteError` variant produced through the public API (hand-crafting a malformed
//! `DispatchTensor` where that is the only way), checked as the `try_` result and as the panic.

use crate::common::panic_message;
use burn_route::rt::{
    BackendId, Checkpointing, DispatchAutodiffContext, DispatchTensor, InputName, Malformed,
    RouteError, TensorKind,
};
use burn_route::{dispatch, ops::RoutedOps, rt::Dispatch};
use burn_tensor::{Device, Int, Tensor};

/// Runs `add_relu` on dispatch tensors both ways and returns the error and the panic text.
fn add_relu_error(lhs: DispatchTensor, rhs: DispatchTensor) -> (RouteError, String) {
    let err = dispatch::try_add_relu(lhs.clone(), rhs.clone()).expect_err("must be refused");
    let message = panic_message(|| drop(<Dispatch as RoutedOps>::add_relu(lhs, rhs)));
    assert_eq!(
        message,
        err.to_string(),
        "the panic carries the error's text"
    );
    (err, message)
}

fn flex_float(values: [f32; 2]) -> DispatchTensor {
    Tensor::<1>::from_data(values, &Device::flex()).into_dispatch()
}

fn malformed(input: &'static str, problem: Malformed) -> RouteError {
    RouteError::Malformed {
        op: "add_relu",
        input: InputName::new(input),
        backend: BackendId::Flex,
        problem,
    }
}

#[test]
fn a_declared_float_holding_an_int_is_malformed() {
    let ints = Tensor::<1, Int>::from_data([1, 2], &Device::flex()).into_dispatch();
    let (err, message) = add_relu_error(flex_float([1.0, 2.0]), ints);
    assert_eq!(
        err,
        malformed(
            "rhs",
            Malformed::WrongKind {
                expected: TensorKind::Float,
                found: "Int"
            }
        )
    );
    assert_eq!(
        message,
        "the input is declared `float` but holds an Int primitive: input `rhs` of op `add_relu` \
(backend Flex) is a malformed dispatch tensor. Fix: pass a `float` tensor here (convert with \
`.float()`, `.int()` or `.bool()` first). See https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#wrong-kind"
    );
}

#[cfg(feature = "autodiff")]
mod with_autodiff {
    use super::*;
    use burn_route::rt::{BackendTensor, DispatchTensorKind};

    fn tracked() -> DispatchTensor {
        Tensor::<1>::from_data([1.0, 2.0], &Device::flex().autodiff())
            .require_grad()
            .into_dispatch()
    }

    #[test]
    fn an_enabled_float_must_use_an_autodiff_primitive() {
        let mut t = flex_float([1.0, 2.0]);
        t.autodiff = DispatchAutodiffContext::Enabled(Checkpointing::Disabled);
        let (err, message) = add_relu_error(t, flex_float([1.0, 2.0]));
        assert_eq!(err, malformed("lhs", Malformed::EnabledFloatNotAutodiff));
        assert!(
            message
                .starts_with("an enabled float tensor must use an autodiff primitive: input `lhs`"),
            "{message}"
        );
    }

    #[test]
    fn an_autodiff_primitive_must_have_an_enabled_context() {
        let mut t = tracked();
        t.autodiff = DispatchAutodiffContext::Disabled;
        let (err, message) = add_relu_error(flex_float([1.0, 2.0]), t);
        assert_eq!(
            err,
            malformed("rhs", Malformed::AutodiffWithDisabledContext)
        );
        assert!(
            message.starts_with(
                "an autodiff float primitive must have an enabled autodiff context: input `rhs`"
            ),
            "{message}"
        );
    }

    #[test]
    fn only_float_tensors_may_use_an_autodiff_primitive() {
        let ints = Tensor::<1, Int>::from_data([1, 2], &Device::flex()).into_dispatch();
        let DispatchTensorKind::Flex(int) = ints.kind else {
            panic!("a Flex tensor")
        };
        let wrapped = DispatchTensor {
            kind: DispatchTensorKind::Autodiff(Box::new(DispatchTensorKind::Flex(int))),
            autodiff: DispatchAutodiffContext::Enabled(Checkpointing::Disabled),
        };
        let (err, message) = add_relu_error(wrapped, flex_float([1.0, 2.0]));
        assert_eq!(err, malformed("lhs", Malformed::NonFloatAutodiff));
        assert!(
            message.starts_with("only float tensors may use an autodiff primitive: input `lhs`"),
            "{message}"
        );
    }

    #[test]
    fn an_autodiff_primitive_outside_the_autodiff_kind_is_malformed() {
        let DispatchTensorKind::Autodiff(inner) = tracked().kind else {
            panic!("an autodiff tensor")
        };
        let unwrapped = DispatchTensor {
            kind: *inner,
            autodiff: DispatchAutodiffContext::Enabled(Checkpointing::Disabled),
        };
        assert!(matches!(
            &unwrapped.kind,
            DispatchTensorKind::Flex(BackendTensor::Autodiff(_))
        ));
        let (err, _) = add_relu_error(unwrapped, flex_float([1.0, 2.0]));
        assert_eq!(err, malformed("lhs", Malformed::UnwrappedAutodiff));
    }

    #[test]
    fn nested_autodiff_is_malformed() {
        let t = tracked();
        let nested = DispatchTensor {
            kind: DispatchTensorKind::Autodiff(Box::new(t.kind)),
            autodiff: t.autodiff,
        };
        let (err, message) = add_relu_error(nested, flex_float([1.0, 2.0]));
        assert_eq!(err, malformed("lhs", Malformed::NestedAutodiff));
        assert!(
            message.starts_with("an autodiff tensor must not wrap another autodiff tensor"),
            "{message}"
        );
    }
}

#[cfg(not(feature = "autodiff"))]
#[test]
fn an_enabled_context_without_the_autodiff_feature_is_refused() {
    let mut t = flex_float([1.0, 2.0]);
    t.autodiff = DispatchAutodiffContext::Enabled(Checkpointing::Disabled);
    let (err, message) = add_relu_error(flex_float([1.0, 2.0]), t);
    assert_eq!(
        err,
        RouteError::AutodiffFeatureOff {
            op: "add_relu",
            input: InputName::new("rhs"),
            backend: BackendId::Flex,
        }
    );
    assert_eq!(
        message,
        "autodiff context requires the `autodiff` feature: input `rhs` of op `add_relu` (backend Flex) \
carries an enabled autodiff context, but burn-route was built without its `autodiff` feature. Fix: enable \
burn-route's `autodiff` feature (crates that generate ops follow it), or use a device without \
`.autodiff()`. See https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#autodiff-feature-off"
    );
}

/// The variants that need a second backend compiled in (`UnlistedBackend`, `BackendMismatch`)
/// are produced by the Cube and Remote tests; here their messages are checked for content.
#[test]
fn backend_messages_name_the_op_the_input_the_backend_and_the_manifest_line() {
    let unlisted = RouteError::UnlistedBackend {
        op: "iota",
        input: InputName::new("device"),
        backend: BackendId::Cube,
        location: "ops.toml:164",
    };
    assert_eq!(
        unlisted.to_string(),
        "op `iota` is not routed to backend Cube: input `device` (which picks the backend) is on Cube, \
but ops.toml:164 does not list Cube for the op (or this build does not compile that backend in). \
Fix: add Cube to the op's backends in the manifest and implement its kernel, enable the feature \
that compiles Cube in, or move the inputs to a listed backend. See https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#unlisted-backend"
    );
    let mismatch = RouteError::BackendMismatch {
        op: "add_relu",
        input: InputName::new("rhs"),
        backend: BackendId::Cube,
        routing_input: InputName::new("lhs"),
        routing_backend: BackendId::Flex,
    };
    assert_eq!(
        mismatch.to_string(),
        "op `add_relu` got inputs on different backends: `lhs` is on Flex (it picks the backend) \
but `rhs` is on Cube. Fix: put `rhs` on Flex too (`.to_device(..)` for a tensor, a Flex device \
for a device argument). See https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#backend-mismatch"
    );
}

/// Float inputs of two dtypes (here `x` in f16 and the fields of `p` in f32) are refused before
/// any kernel runs, on every backend: `affine` declares no `dtypes`, so no composition takes
/// them. On `Fusion<CubeBackend>` the deferred operation read one input as the other's dtype and
/// gave wrong values without an error (found by an adversarial run).
#[test]
fn float_inputs_of_two_dtypes_are_refused_on_every_backend() {
    use burn_route::rt::FloatDType;
    use burn_route::{Affine, affine, try_affine};

    let devices = [
        Some(Device::flex()),
        #[cfg(feature = "wgpu")]
        Some(Device::wgpu(crate::adapter::device_kind())),
    ];
    for device in devices.into_iter().flatten() {
        let x = Tensor::<2>::from_data([[1.0, 2.0, 3.0]], &device).cast(FloatDType::F16);
        let p = || Affine {
            scale: Tensor::<2>::from_data([[2.0, 2.0, 2.0]], &device),
            shift: None,
        };
        let err = try_affine(x.clone(), p()).expect_err("mixed dtypes");
        let backend = if device == Device::flex() {
            BackendId::Flex
        } else {
            BackendId::Cube
        };
        assert!(
            matches!(
                &err,
                RouteError::MixedDtypes { op: "affine", input, first, backend: b, .. }
                    if input.to_string() == "p.scale" && first.0.to_string() == "x" && *b == backend
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "op `affine` got float inputs of different dtypes: input `p.scale` (backend \
                 {backend}) is f32, but input `x` is f16; one call's float inputs share one \
                 dtype. Fix: cast `p.scale` to f16 first (`.cast(FloatDType::F16)` on the \
                 tensor), or `x` to f32. See \
                 https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#mixed-dtypes"
            )
        );
        assert_eq!(
            panic_message(|| drop(affine(x.clone(), p()))),
            err.to_string()
        );
        // One dtype runs.
        let same = affine(
            x.clone(),
            Affine {
                scale: p().scale.cast(FloatDType::F16),
                shift: None,
            },
        );
        assert_eq!(same.dtype(), burn_tensor::DType::F16);
        // An op with a composition for other dtypes (`add_relu`: its kernels take f32, f16 and
        // bf16) refuses them too: its composition is Burn's ops, which take one dtype.
        let lhs = Tensor::<2>::from_data([[1.0, -2.0, 3.0]], &device).cast(FloatDType::F16);
        let rhs = Tensor::<2>::from_data([[0.5, 0.5, 0.5]], &device);
        let err = burn_route::try_add_relu(lhs.clone(), rhs.clone()).expect_err("mixed dtypes");
        assert!(
            matches!(&err, RouteError::MixedDtypes { op: "add_relu", .. }),
            "{err:?}"
        );
        let out = burn_route::add_relu(lhs, rhs.cast(FloatDType::F16));
        assert_eq!(out.dtype(), burn_tensor::DType::F16);
    }
}

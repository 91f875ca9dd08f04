//! Route planning against every kind of input: tracked, untracked, malformed, on each backend.

use burn_dispatch::DispatchTensor;
use burn_tensor::quantization::QuantScheme;
use burn_tensor::{Bool, Device, Int, Tensor};

use super::*;
use crate::rt::{FloatDType, OtherDtypes};

/// Every dispatch tensor shape the planner distinguishes on Flex, with a label.
fn tensors() -> Vec<(&'static str, DispatchTensor)> {
    let flex = Device::flex();
    let float = || Tensor::<1>::from_data([1.0, -2.0], &flex);
    let mut all = vec![
        ("float", float().into_dispatch()),
        (
            "f16 float",
            float().cast(burn_backend::DType::F16).into_dispatch(),
        ),
        (
            "int",
            Tensor::<1, Int>::from_data([1, 2], &flex).into_dispatch(),
        ),
        (
            "bool",
            Tensor::<1, Bool>::from_data([true, false], &flex).into_dispatch(),
        ),
        (
            "quantized",
            float()
                .quantize_dynamic(&QuantScheme::default())
                .into_dispatch(),
        ),
    ];
    let mut enabled_plain = float().into_dispatch();
    enabled_plain.autodiff = DispatchAutodiffContext::Enabled(Checkpointing::Disabled);
    all.push(("enabled plain float", enabled_plain));
    #[cfg(feature = "autodiff")]
    {
        let ad = flex.clone().autodiff();
        let tracked = Tensor::<1>::from_data([1.0, -2.0], &ad).require_grad();
        all.push(("tracked", tracked.into_dispatch()));
        let untracked = Tensor::<1>::from_data([1.0, -2.0], &ad);
        all.push(("untracked autodiff", untracked.into_dispatch()));
        let int = Tensor::<1, Int>::from_data([1, 2], &ad);
        all.push(("int under autodiff", int.into_dispatch()));
    }
    all
}

/// An op listing Flex alone, `routed` or not (its cfg off), with the autodiff arms compiled
/// or not.
fn op_info(policy: Policy, routed: bool, autodiff: bool) -> &'static OpInfo {
    Box::leak(Box::new(OpInfo::new(
        "op",
        policy,
        "ops.toml:1",
        "ops.toml:2",
        Box::leak(Box::new([(BackendId::Flex, routed, "feature = \"flex\"")])),
        autodiff,
        "feature = \"autodiff\"",
        "test",
        None,
    )))
}

fn input<'a>(kind: TensorKind, name: &'static str, tensor: &'a DispatchTensor) -> Input<'a> {
    Input::new(name, kind, tensor)
}

/// The backend is checked before the policy: a tracked input of a `reject` op on a backend
/// the op is not routed to (or whose arm is compiled out) is refused for the backend, as for
/// any other policy, not as a tracked input (detaching it would not help).
#[cfg(feature = "autodiff")]
#[test]
fn an_unrouted_backend_is_reported_before_the_policy() {
    let tracked = Tensor::<1>::from_data([1.0, 2.0], &Device::flex().autodiff())
        .require_grad()
        .into_dispatch();
    let unlisted = |policy| {
        let op: &'static OpInfo = Box::leak(Box::new(OpInfo::new(
            "op",
            policy,
            "ops.toml:1",
            "ops.toml:2",
            &[],
            true,
            "feature = \"autodiff\"",
            "test",
            None,
        )));
        Route::plan(op, [input(TensorKind::Float, "x", &tracked)]).unwrap_err()
    };
    for policy in [Policy::Reject, Policy::Detach, Policy::Differentiable] {
        assert_eq!(
            unlisted(policy),
            RouteError::UnlistedBackend {
                op: "op",
                input: InputName::new("x"),
                backend: BackendId::Flex,
                location: "ops.toml:2",
            },
            "{policy:?}"
        );
        assert!(matches!(
            Route::plan(
                op_info(policy, false, true),
                [input(TensorKind::Float, "x", &tracked)]
            ),
            Err(RouteError::BackendCompiledOut { .. })
        ));
    }
}

/// A route the consuming crate compiled out is refused with the crate and the cfg, not
/// blamed on burn-route: the backend's cfg off, or (with autodiff) the autodiff cfg off.
#[test]
fn compiled_out_routes_name_the_crate_and_the_cfg() {
    let x = Tensor::<1>::from_data([1.0, 2.0], &Device::flex()).into_dispatch();
    let err = Route::plan(
        op_info(Policy::Reject, false, false),
        [input(TensorKind::Float, "x", &x)],
    )
    .unwrap_err();
    assert_eq!(
        err,
        RouteError::BackendCompiledOut {
            op: "op",
            input: InputName::new("x"),
            backend: BackendId::Flex,
            cfg: "feature = \"flex\"",
            krate: "test",
        }
    );
    assert_eq!(
        err.to_string(),
        "backend Flex is compiled out of op `op`: input `x` (which picks the backend) is on \
         Flex, and the manifest routes the op there, but crate `test` was built with \
         `cfg(feature = \"flex\")` off, so it has no Flex route. Fix: turn `feature = \"flex\"` \
         on in crate `test` (e.g. enable the feature it names), or move the inputs to a \
         compiled backend. See https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#backend-compiled-out"
    );
    #[cfg(feature = "autodiff")]
    {
        let tracked = Tensor::<1>::from_data([1.0, 2.0], &Device::flex().autodiff())
            .require_grad()
            .into_dispatch();
        let err = Route::plan(
            op_info(Policy::Differentiable, true, false),
            [input(TensorKind::Float, "x", &tracked)],
        )
        .unwrap_err();
        assert_eq!(
            err,
            RouteError::AutodiffCompiledOut {
                op: "op",
                input: InputName::new("x"),
                backend: BackendId::Flex,
                cfg: "feature = \"autodiff\"",
                krate: "test",
            }
        );
        assert_eq!(
            err.to_string(),
            "autodiff routing of op `op` is compiled out: input `x` (backend Flex) carries an \
             enabled autodiff context, but crate `test` was built with `cfg(feature = \"autodiff\")` off, so the op has \
             no `Autodiff` route. Fix: turn `feature = \"autodiff\"` on in crate `test` (e.g. \
             enable the feature it names), or pass the input without autodiff \
             (`.without_autodiff()`). See https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#autodiff-compiled-out"
        );
    }
}

/// The fast path never disagrees with the full planner: whenever it returns a route, the
/// full planner returns the same one; and it does take every call it is meant for.
#[test]
fn the_fast_path_agrees_with_the_full_planner() {
    let tensors = tensors();
    let kinds = [
        TensorKind::Float,
        TensorKind::Int,
        TensorKind::Bool,
        TensorKind::Quantized,
    ];
    let mut fast_routes = 0;
    for policy in [Policy::Differentiable, Policy::Detach, Policy::Reject] {
        for routed in [true, false] {
            for autodiff in [true, false] {
                let op = op_info(policy, routed, autodiff);
                for (a_label, a) in &tensors {
                    for (b_label, b) in &tensors {
                        for a_kind in kinds {
                            for b_kind in kinds {
                                let inputs = [input(a_kind, "a", a), input(b_kind, "b", b)];
                                let case = format!(
                                    "{policy} routed={routed} autodiff={autodiff}: a {a_label} \
                                     as {a_kind}, b {b_label} as {b_kind}"
                                );
                                let fast = Route::fast(op, inputs);
                                let full = Route::plan_checked(op, inputs, None);
                                let plain = |label: &str, kind: TensorKind| {
                                    label == kind.to_string()
                                        || (label == "f16 float" && kind == TensorKind::Float)
                                };
                                // Two float inputs of two dtypes are the planner's to refuse.
                                let mixed = a_kind == TensorKind::Float
                                    && b_kind == TensorKind::Float
                                    && a_label != b_label;
                                let expected_fast = routed
                                    && plain(a_label, a_kind)
                                    && plain(b_label, b_kind)
                                    && !mixed;
                                assert_eq!(fast.is_some(), expected_fast, "{case}");
                                if let Some(fast) = fast {
                                    fast_routes += 1;
                                    assert_same(&case, fast, full);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(fast_routes > 0);
}

/// A fast route must be exactly the full planner's.
fn assert_same(case: &str, fast: Route, full: Result<Route, RouteError>) {
    let full = full.unwrap_or_else(|e| panic!("{case}: fast path accepted, planner: {e}"));
    assert_eq!(fast.target(), full.target(), "{case}");
    assert_eq!(fast.context(), full.context(), "{case}");
    assert!(core::ptr::eq(fast.op(), full.op()), "{case}");
}

/// The same for the device variants: `fast_by_device` against `plan_by_device`, and
/// `fast_with_device` against `plan_with_device`, with a plain and (with autodiff) an
/// autodiff device; and a call without any input never takes the fast path.
#[test]
fn the_device_fast_paths_agree_with_the_full_planner() {
    let flex = Device::flex();
    #[cfg_attr(not(feature = "autodiff"), allow(unused_mut))]
    let mut devices = vec![("plain", flex.as_dispatch().clone())];
    #[cfg(feature = "autodiff")]
    devices.push(("autodiff", flex.clone().autodiff().as_dispatch().clone()));
    let tensors = tensors();
    let mut fast_routes = 0;
    for policy in [Policy::Differentiable, Policy::Detach, Policy::Reject] {
        for routed in [true, false] {
            let op = op_info(policy, routed, true);
            assert!(Route::fast(op, []).is_none(), "no inputs");
            for (d_label, device) in &devices {
                let case = format!("{policy} routed={routed}: {d_label} device");
                let fast = Route::fast_by_device(op, device);
                assert_eq!(fast.is_some(), routed && *d_label == "plain", "{case}");
                if let Some(fast) = fast {
                    fast_routes += 1;
                    assert_same(&case, fast, Route::plan_by_device(op, "device", device));
                }
                for (t_label, t) in &tensors {
                    for kind in [TensorKind::Float, TensorKind::Int] {
                        let case = format!("{case}, x {t_label} as {kind}");
                        let inputs = [input(kind, "x", t)];
                        let fast = Route::fast_with_device(op, inputs, device);
                        let plain = *t_label == kind.to_string().as_str()
                            || (*t_label == "f16 float" && kind == TensorKind::Float);
                        let expected = routed && *d_label == "plain" && plain;
                        assert_eq!(fast.is_some(), expected, "{case}");
                        if let Some(fast) = fast {
                            fast_routes += 1;
                            let full = Route::plan_with_device(op, inputs, "device", device);
                            assert_same(&case, fast, full);
                        }
                    }
                }
            }
        }
    }
    assert!(fast_routes > 0);
}

/// An op listing Flex whose kernels take `f32` and `f16` only, with `other` for the rest.
fn f32_op(policy: Policy, other: OtherDtypes) -> &'static OpInfo {
    let op = OpInfo::new(
        "my_norm",
        policy,
        "ops.toml:1",
        "ops.toml:2",
        &[(BackendId::Flex, true, "")],
        true,
        "burn_route_autodiff",
        "test",
        None,
    )
    .with_dtypes(&[FloatDType::F32, FloatDType::F16], other, "ops.toml:9");
    Box::leak(Box::new(op))
}

fn float_in(dtype: burn_backend::DType, device: &Device) -> DispatchTensor {
    Tensor::<1>::from_data([1.0, -2.0], device)
        .cast(dtype)
        .into_dispatch()
}

/// A declared dtype takes the fast path to the kernel; an undeclared one leaves it, and the
/// planner sends the call to the composition or refuses it, as the op declares.
#[test]
fn dtypes_route_to_the_kernel_the_composition_or_an_error() {
    use burn_backend::DType;
    let flex = Device::flex();
    let composed = f32_op(Policy::Reject, OtherDtypes::Composition);
    let refused = f32_op(Policy::Reject, OtherDtypes::Error);
    for dtype in [DType::F32, DType::F16] {
        let x = float_in(dtype, &flex);
        for op in [composed, refused] {
            let route = Route::fast_dtyped(op, [input(TensorKind::Float, "x", &x)]).expect("fast");
            // `Route::fast` is for the ops that declare no dtypes: it leaves this one to the
            // planner.
            assert!(Route::fast(op, [input(TensorKind::Float, "x", &x)]).is_none());
            assert_eq!(route.target(), (BackendId::Flex, Mode::Concrete));
            // The same with a device input: a plain device of the inputs' backend.
            let device = flex.as_dispatch();
            let with_device =
                Route::fast_dtyped_with_device(op, [input(TensorKind::Float, "x", &x)], device)
                    .expect("fast, with a device");
            assert_eq!(with_device.target(), route.target());
            assert!(
                Route::fast_with_device(op, [input(TensorKind::Float, "x", &x)], device).is_none()
            );
            let planned = Route::plan(op, [input(TensorKind::Float, "x", &x)]).unwrap();
            assert_eq!(planned.target(), (BackendId::Flex, Mode::Concrete));
        }
    }
    let f32 = float_in(DType::F32, &flex);
    for dtype in [DType::F64, DType::BF16] {
        let x = float_in(dtype, &flex);
        // The first float input of an undeclared dtype decides, whichever position it has.
        let inputs = || {
            [
                input(TensorKind::Float, "y", &f32),
                input(TensorKind::Float, "x", &x),
            ]
        };
        assert!(Route::fast_dtyped(composed, inputs()).is_none());
        assert!(Route::fast_dtyped(refused, inputs()).is_none());
        assert!(Route::fast_dtyped_with_device(refused, inputs(), flex.as_dispatch()).is_none());
        // An op with a fallback runs it when the float inputs share the unlisted dtype; beside
        // a listed one, they are of two dtypes, which no composition takes.
        let both = [
            input(TensorKind::Float, "y", &x),
            input(TensorKind::Float, "x", &x),
        ];
        let route = Route::plan(composed, both).unwrap();
        assert_eq!(route.target(), (BackendId::Flex, Mode::Fallback));
        assert!(matches!(
            Route::plan(composed, inputs()),
            Err(RouteError::MixedDtypes { .. })
        ));
        let err = Route::plan(refused, inputs()).unwrap_err();
        assert_eq!(
            err,
            RouteError::UnsupportedDtype {
                op: "my_norm",
                input: InputName::new("x"),
                dtype,
                backend: BackendId::Flex,
                declared: &[FloatDType::F32, FloatDType::F16],
                location: "ops.toml:9",
            }
        );
    }
    let x = float_in(DType::F64, &flex);
    assert_eq!(
        Route::plan(refused, [input(TensorKind::Float, "x", &x)])
            .unwrap_err()
            .to_string(),
        "op `my_norm` does not take f64 inputs: input `x` (backend Flex) is f64, but ops.toml:9 \
         declares the op's kernels for f32, f16 only, and no fallback for other dtypes \
         (`other_dtypes = \"error\"`). Fix: cast `x` to a dtype the kernels take first \
         (`.cast(FloatDType::F32)` on the tensor), or declare `other_dtypes = \"composition\"` in \
         ops.toml:9 (with a `composition`) to run the op's composition for other dtypes, or add \
         \"f64\" to `dtypes` once its kernels take it. See \
         https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#unsupported-dtype"
    );
    // Int inputs have no float dtype to check.
    let ints = Tensor::<1, Int>::from_data([1, 2], &flex).into_dispatch();
    let route = Route::fast_dtyped(
        refused,
        [
            input(TensorKind::Float, "x", &f32),
            input(TensorKind::Int, "i", &ints),
        ],
    );
    assert!(route.is_some());
}

/// Float inputs of two dtypes, each one the kernels take, are `MixedDtypes` whatever the op
/// declares (its composition would not take them either); the fast path leaves such a call to
/// the planner, and still takes one dtype twice.
#[test]
fn float_inputs_of_two_dtypes_are_refused_by_every_op() {
    use burn_backend::DType;
    let flex = Device::flex();
    let (f16, f32) = (float_in(DType::F16, &flex), float_in(DType::F32, &flex));
    let inputs = |a, b| {
        [
            input(TensorKind::Float, "x", a),
            input(TensorKind::Float, "y", b),
        ]
    };
    let composed = f32_op(Policy::Reject, OtherDtypes::Composition);
    let refused = f32_op(Policy::Reject, OtherDtypes::Error);
    let plain = op_info(Policy::Reject, true, false);
    // The fast path generated code takes for the op: the dtyped one where it declares dtypes.
    let fast = |op: &'static OpInfo, inputs| {
        if op.dtypes == 0 {
            Route::fast(op, inputs)
        } else {
            Route::fast_dtyped(op, inputs)
        }
    };
    for op in [composed, refused, plain] {
        assert!(fast(op, inputs(&f16, &f32)).is_none());
        let same = fast(op, inputs(&f16, &f16)).expect("one dtype: the fast path");
        assert_eq!(same.target(), (BackendId::Flex, Mode::Concrete));
    }
    for op in [composed, refused, plain] {
        let err = Route::plan(op, inputs(&f16, &f32)).unwrap_err();
        assert_eq!(
            err,
            RouteError::MixedDtypes {
                op: op.name,
                input: InputName::new("y"),
                dtype: DType::F32,
                first: Box::new((InputName::new("x"), DType::F16)),
                backend: BackendId::Flex,
            }
        );
    }
    assert_eq!(
        Route::plan(refused, inputs(&f32, &f16))
            .unwrap_err()
            .to_string(),
        "op `my_norm` got float inputs of different dtypes: input `y` (backend Flex) is f16, but \
         input `x` is f32; one call's float inputs share one dtype. Fix: cast `y` to f32 first \
         (`.cast(FloatDType::F32)` on the tensor), or `x` to f16. See \
         https://docs.rs/burn-route-core/0.1.0/burn_route_core/errors/index.html#mixed-dtypes"
    );
}

/// A tracked call of a `differentiable` op in an undeclared dtype runs the composition on
/// `Autodiff<B, C>`, with the caller's checkpointing; a `detach` op's runs it concretely.
#[cfg(feature = "autodiff")]
#[test]
fn an_undeclared_dtype_under_autodiff_runs_the_composition_there() {
    use burn_backend::DType;
    let ad = Device::flex().autodiff();
    let x = Tensor::<1>::from_data([1.0, -2.0], &ad)
        .cast(DType::F64)
        .require_grad()
        .into_dispatch();
    let differentiable = f32_op(Policy::Differentiable, OtherDtypes::Composition);
    let route = Route::plan(differentiable, [input(TensorKind::Float, "x", &x)]).unwrap();
    assert_eq!(
        route.target(),
        (
            BackendId::Flex,
            Mode::AutodiffFallback(Checkpointing::Disabled)
        )
    );
    let detach = f32_op(Policy::Detach, OtherDtypes::Composition);
    let route = Route::plan(detach, [input(TensorKind::Float, "x", &x)]).unwrap();
    assert_eq!(route.target(), (BackendId::Flex, Mode::Fallback));
}

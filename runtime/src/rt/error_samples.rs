//! The error reference's sample messages (`burn_route_core::errors`, part "Runtime routing
//! errors") are this crate's `Display` texts, word for word: each sample line of the part is the
//! text of one error built here, and each error built here is a sample. The samples that name an
//! op of burn-route's own manifest (with its manifest line or Remote id) are also produced by real
//! calls in burn-route's integration tests (`tests/integration/error_reference.rs`), so their
//! lines and ids are the current ones too.

use std::collections::BTreeSet;

use burn_backend::{DType, FloatDType, Shape};

use super::{
    BackendId, Checkpointing, InputName, Malformed, OutputName, RemoteProblem, RouteError,
    ShapeRule, TensorKind, TensorSpec,
};

/// The samples that are not a [`RouteError`]: the server's side of a failed Remote op, and two
/// panics (a backward pass's gradient shape, an op check), checked where they are produced.
fn produced_elsewhere(sample: &str) -> bool {
    sample.starts_with("In the server's log")
        || sample.starts_with("the backward pass of op ")
        || sample.starts_with("op check failed: ")
        || sample.contains("failed on the Remote server")
}

fn malformed(op: &'static str, input: &'static str, problem: Malformed) -> RouteError {
    RouteError::Malformed {
        op,
        input: InputName::new(input),
        backend: BackendId::Flex,
        problem,
    }
}

/// One error per runtime sample, with the fields the sample shows.
fn errors() -> Vec<RouteError> {
    let add_relu = "add_relu";
    vec![
        RouteError::TrackedInput {
            op: "round_half_even",
            input: InputName::new("x"),
            backend: BackendId::Flex,
            location: "ops.toml:68",
        },
        malformed(add_relu, "lhs", Malformed::NonFloatAutodiff),
        malformed(add_relu, "lhs", Malformed::EnabledFloatNotAutodiff),
        malformed(add_relu, "rhs", Malformed::AutodiffWithDisabledContext),
        RouteError::AutodiffFeatureOff {
            op: add_relu,
            input: InputName::new("rhs"),
            backend: BackendId::Flex,
        },
        RouteError::AutodiffCompiledOut {
            op: "cube_pow",
            input: InputName::new("x"),
            backend: BackendId::Flex,
            cfg: "burn_route_autodiff",
            krate: "my-ops",
        },
        RouteError::BackendCompiledOut {
            op: "gpu_square",
            input: InputName::new("x"),
            backend: BackendId::Cube,
            cfg: "feature = \"wgpu\"",
            krate: "burn-route-downstream",
        },
        RouteError::UnlistedBackend {
            op: "iota",
            input: InputName::new("device"),
            backend: BackendId::Cube,
            location: "ops.toml:174",
        },
        RouteError::BackendMismatch {
            op: add_relu,
            input: InputName::new("rhs"),
            backend: BackendId::Cube,
            routing_input: InputName::new("lhs"),
            routing_backend: BackendId::Flex,
        },
        RouteError::CheckpointingMismatch {
            op: add_relu,
            input: InputName::new("rhs"),
            strategy: Checkpointing::Balanced,
            first_input: InputName::new("lhs"),
            backend: BackendId::Flex,
            first_strategy: Checkpointing::Disabled,
        },
        malformed(
            "dequantize_relu",
            "x",
            Malformed::WrongKind {
                expected: TensorKind::Quantized,
                found: "Float",
            },
        ),
        malformed(add_relu, "lhs", Malformed::UnwrappedAutodiff),
        malformed(add_relu, "lhs", Malformed::NestedAutodiff),
        malformed(
            "round_half_even",
            "x",
            Malformed::UnexpectedPrimitive {
                expected: "float",
                found: "Int",
            },
        ),
        RouteError::NoRoutingTensor { op: "sum_all" },
        RouteError::ShapeContract {
            op: "rms_norm",
            input: InputName::new("weight"),
            shape: [1].into(),
            rule: ShapeRule::LastDimOf,
            reference: "x",
            reference_shape: [2, 4].into(),
            backend: BackendId::Flex,
            location: "ops.toml:246",
        },
        RouteError::UnsupportedDtype {
            op: "my_norm",
            input: InputName::new("x"),
            dtype: DType::F64,
            backend: BackendId::Flex,
            declared: &[FloatDType::F32, FloatDType::F16, FloatDType::BF16],
            location: "ops.toml:12",
        },
        RouteError::MixedDtypes {
            op: "add_relu",
            input: InputName::new("y"),
            dtype: DType::F32,
            first: Box::new((InputName::new("x"), DType::F16)),
            backend: BackendId::Flex,
        },
        RouteError::OutputMetadata {
            op: "cube_pow",
            output: OutputName::new("output"),
            declared: Box::new((
                TensorSpec::new(Shape::new([2, 3]), DType::F32),
                TensorSpec::new(Shape::new([3, 2]), DType::F32),
            )),
            location: "ops.toml:12",
        },
        RouteError::OutputMetadata {
            op: "add_row",
            output: OutputName::new("gradient of row"),
            declared: Box::new((
                TensorSpec::new(Shape::new([2, 3]), DType::F32),
                TensorSpec::new(Shape::new([1, 3]), DType::F32),
            )),
            location: "ops.toml:7",
        },
        RouteError::RemoteNotServed {
            op: "leaky_relu",
            id: "burn-route/my_ops::dispatch/leaky_relu/6f2c0d1e9a8b7c45".into(),
            krate: "my-ops",
            serve: "my_ops::dispatch::serve_remote_ops",
            problem: RemoteProblem::NotServed("the session ended".into()),
        },
        RouteError::RemoteNotServed {
            op: "bias_gelu",
            id: "burn-route/burn_route::dispatch/bias_gelu/bf822aad31e438a4".into(),
            krate: "burn-route",
            serve: "burn_route::dispatch::serve_remote_ops",
            problem: RemoteProblem::Missing,
        },
        RouteError::RemoteNotServed {
            op: add_relu,
            id: "burn-route/burn_route::dispatch/add_relu/9316bd31257b8ece".into(),
            krate: "burn-route",
            serve: "burn_route::dispatch::serve_remote_ops",
            problem: RemoteProblem::OtherVersion,
        },
    ]
}

#[test]
fn every_runtime_sample_is_the_text_of_a_route_error() {
    let samples: BTreeSet<&str> = burn_route_core::errors::runtime_samples()
        .filter(|s| !produced_elsewhere(s))
        .collect();
    let texts: BTreeSet<String> = errors().iter().map(ToString::to_string).collect();
    let texts: BTreeSet<&str> = texts.iter().map(String::as_str).collect();
    let stale: Vec<_> = samples.difference(&texts).collect();
    let missing: Vec<_> = texts.difference(&samples).collect();
    assert!(
        stale.is_empty() && missing.is_empty(),
        "the error reference's runtime samples and the messages differ.\n\nsamples no error \
         says:\n{stale:#?}\n\nmessages no sample shows:\n{missing:#?}"
    );
}

#[cfg(feature = "autodiff")]
#[test]
fn the_gradient_shape_sample_is_the_panic() {
    let panic = std::panic::catch_unwind(|| {
        super::grad::gradient_shape_panic(
            "wrong_gradient_shape",
            "x",
            &Shape::new([4, 3]),
            &Shape::new([2, 3]),
        )
    })
    .expect_err("it panics");
    let text = panic.downcast_ref::<String>().expect("a formatted panic");
    assert!(
        burn_route_core::errors::runtime_samples().any(|s| s == text),
        "the error reference's sample of the gradient-shape panic is stale; the panic says:\n{text}"
    );
}

//! Every input and output shape the manifest can express renders to the expected signatures.

use burn_route_codegen::Builder;

const SHAPES: &str = r#"[routing]
trait = "ShapeOps"
backends = ["Flex"]

[[op]]
name = "mixed"
doc = "Int and bool inputs, owned and borrowed, a scalar, and a nested tuple output."
autodiff = "detach"
inputs = [
    { name = "x", tensor = "float", borrowed = true },
    { name = "ids", tensor = "int" },
    { name = "mask", tensor = "bool", borrowed = true, dims = 2 },
    { name = "k", type = "usize" },
]
output = [{ tensor = "float" }, [{ tensor = "int", dims = "E" }, { type = "u64" }]]

[[op]]
name = "count"
inputs = [{ name = "mask", tensor = "bool" }]
output = { type = "usize" }

[[op]]
name = "fill"
inputs = [{ name = "value", type = "f32" }]

[[op]]
name = "touch"
inputs = [{ name = "x", tensor = "float" }]
"#;

fn render() -> Vec<(String, String)> {
    Builder::new("shapes.toml")
        .render_str(SHAPES)
        .expect("valid")
        .into_iter()
        .map(|f| (f.name.to_owned(), f.contents))
        .collect()
}

fn file(name: &str) -> String {
    render()
        .into_iter()
        .find(|(n, _)| n == name)
        .expect("file")
        .1
}

/// The code on one line, as it reads when every list fits: line breaks, the trailing commas of
/// broken lists and the padding inside brackets are layout, not content.
fn flat(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(" .", ".")
        .replace(", )", ")")
        .replace(",)", ")")
        .replace(", ]", "]")
        .replace("( ", "(")
        .replace("[ ", "[")
}

#[test]
fn trait_signatures() {
    let ops = flat(&file("routed_ops.rs"));
    assert!(ops.contains("pub trait ShapeOps: rt::Backend {"), "{ops}");
    assert!(ops.contains(
        "fn mixed(x: &rt::FloatTensor<Self>, ids: rt::IntTensor<Self>, mask: &rt::BoolTensor<Self>, k: usize) -> (rt::FloatTensor<Self>, (rt::IntTensor<Self>, u64));"
    ), "{ops}");
    assert!(
        ops.contains("fn count(mask: rt::BoolTensor<Self>) -> usize;"),
        "{ops}"
    );
    assert!(ops.contains("fn fill(value: f32);"), "{ops}");
    // No differentiable op: no autodiff trait.
    assert!(!ops.contains("ShapeOpsAutodiff"), "{ops}");
}

#[test]
fn dispatch_unwraps_and_rewraps_every_shape() {
    let dispatch = flat(&file("routed_dispatch.rs"));
    for expected in [
        "let x = B::float_ref(__route, \"x\", x);",
        "let ids = B::int(__route, \"ids\", ids);",
        "let mask = B::bool_ref(__route, \"mask\", mask);",
        "let __out = __kernel(&x, ids, &mask, k);",
        "(B::float_out(__route, __out.0), (B::int_out(__route, __out.1.0), __out.1.1)) }",
        // Planning checked every input: `run` cannot fail, and the `match` is wrapped once.
        "Ok(match __route.target() { (rt::BackendId::Flex, __rt::Mode::Concrete) => { __run::<rt::Flex>(&__route, <rt::Flex as ShapeOps>::mixed, x, ids, mask, k) }",
        "__rt::Input::float(\"x\", x), __rt::Input::int(\"ids\", &ids), __rt::Input::bool(\"mask\", mask)",
        // The common call takes the fast planner and matches the backend only; every other
        // call goes to `planned`, out of line, which checks the whole contract.
        // Both error strategies share one routing function: `try_` returns the error, the
        // trait method panics with it.
        "#[inline] pub fn try_mixed(x: &rt::DispatchTensor, ids: rt::DispatchTensor, mask: &rt::DispatchTensor, k: usize) -> Result<(rt::DispatchTensor, (rt::DispatchTensor, u64)), rt::RouteError> { self::route_mixed::<__rt::Fallible>(x, ids, mask, k) }",
        "#[inline] fn mixed(x: &rt::FloatTensor<Self>, ids: rt::IntTensor<Self>, mask: &rt::BoolTensor<Self>, k: usize) -> (rt::FloatTensor<Self>, (rt::IntTensor<Self>, u64)) { self::route_mixed::<__rt::Panic>(x, ids, mask, k) }",
        "#[inline] fn route_mixed<F: __rt::OnError>(x: &rt::DispatchTensor, ids: rt::DispatchTensor, mask: &rt::DispatchTensor, k: usize) -> F::Out<(rt::DispatchTensor, (rt::DispatchTensor, u64))> {",
        "match __rt::Route::fast(&__OP, [__rt::Input::float(\"x\", x), __rt::Input::int(\"ids\", &ids), __rt::Input::bool(\"mask\", mask)]) { Some(__route) => F::ok(match __route.backend() { rt::BackendId::Flex => { __run::<rt::Flex>(&__route, <rt::Flex as ShapeOps>::mixed, x, ids, mask, k) } _ => __route.unrouted(), }), None => F::result(__plan_and_run(x, ids, mask, k)), }",
        // A unit op's `run` returns the `Result` itself.
        "Some(__route) => F::result(match __route.backend() {",
        "#[inline(never)] fn __plan_and_run(x: &rt::DispatchTensor, ids: rt::DispatchTensor, mask: &rt::DispatchTensor, k: usize) -> Result<(rt::DispatchTensor, (rt::DispatchTensor, u64)), rt::RouteError> { let __route = __rt::Route::plan(&__OP, [",
        // A tensor-less op is routed to its only backend.
        "let __route = __rt::Route::fixed(&__OP, rt::BackendId::Flex)?;",
        // `detach`: no autodiff arms, so `OP` says none are compiled.
        "rt::Policy::Detach, \"shapes.toml:8\", \"shapes.toml:3\", &[(rt::BackendId::Flex, true, \"\")], false, \"burn_route_autodiff\", env!(\"CARGO_PKG_NAME\"), None);",
        // Planning refuses what the arms do not cover, so the last arm is a bug check.
        "_ => __route.unrouted(),",
        // ... and, with no tensor or device in its signature, needs no backend parameter.
        "fn __run_fill(__route: &__rt::Route, __kernel: fn(f32), value: f32) -> Result<(), rt::RouteError> { __kernel(value); Ok(()) }",
        "(rt::BackendId::Flex, __rt::Mode::Concrete) => { __run(&__route, <rt::Flex as ShapeOps>::fill, value) }",
    ] {
        assert!(
            dispatch.contains(expected),
            "missing `{expected}` in\n{dispatch}"
        );
    }
}

#[test]
fn tensor_api_signatures() {
    let tensor = flat(&file("routed_tensor.rs"));
    for expected in [
        "pub fn mixed<const D: usize, const E: usize>(x: &rt::Tensor<D>, ids: rt::Tensor<D, rt::Int>, mask: &rt::Tensor<2, rt::Bool>, k: usize) -> (rt::Tensor<D>, (rt::Tensor<E, rt::Int>, u64))",
        "let __out = dispatch::try_mixed(&x.clone().into_dispatch(), ids.into_dispatch(), &mask.clone().into_dispatch(), k)?;",
        "Ok((rt::Tensor::from_dispatch(__out.0), (rt::Tensor::from_dispatch(__out.1.0), __out.1.1)))",
        "pub fn try_mixed<const D: usize, const E: usize>(",
        // The panicking form calls the panicking trait method: no `Result` to unwrap.
        "let __out = <rt::Dispatch as ShapeOps>::mixed(&x.clone().into_dispatch(), ids.into_dispatch(), &mask.clone().into_dispatch(), k);",
        "(rt::Tensor::from_dispatch(__out.0), (rt::Tensor::from_dispatch(__out.1.0), __out.1.1)) }",
        "pub fn count<const D: usize>(mask: rt::Tensor<D, rt::Bool>) -> usize",
        "pub fn fill(value: f32) {",
    ] {
        assert!(
            tensor.contains(expected),
            "missing `{expected}` in\n{tensor}"
        );
    }
}

const CONTAINERS: &str = r#"[routing]
trait = "Co"
backends = ["Flex", { name = "Cube", cfg = 'feature = "cube"' }]

[[op]]
name = "pick"
autodiff = "differentiable"
inputs = [
    { name = "xs", tensor = "float", container = "vec" },
    { name = "bias", tensor = "float", container = "option", borrowed = true },
    { name = "q", tensor = "quantized" },
]
output = [
    { tensor = "float", container = "vec", shape = "crate::meta::pick_shapes", dtype = "default" },
    { tensor = "int", container = "option", shape = "crate::meta::pick_index", dtype = "crate::meta::index_dtype" },
]

[[op]]
name = "make"
backends = ["Flex"]
inputs = [{ name = "n", type = "usize" }, { name = "device", device = true }]
output = { tensor = "float" }

[[op]]
name = "soft"
autodiff = "differentiable"
composite = "crate::soft"
inputs = [{ name = "x", tensor = "float" }]
output = { tensor = "float" }
"#;

fn render_containers(name: &str) -> String {
    let files = Builder::new("ops.toml")
        .render_str(CONTAINERS)
        .expect("valid");
    flat(
        &files
            .into_iter()
            .find(|f| f.name == name)
            .expect("file")
            .contents,
    )
}

#[test]
fn option_vec_quantized_and_device_shapes() {
    let ops = render_containers("routed_ops.rs");
    assert!(ops.contains(
        "fn pick(xs: Vec<rt::FloatTensor<Self>>, bias: Option<&rt::FloatTensor<Self>>, q: rt::QuantizedTensor<Self>) -> (Vec<rt::FloatTensor<Self>>, Option<rt::IntTensor<Self>>);"
    ), "{ops}");
    assert!(
        ops.contains("fn make(n: usize, device: &rt::DeviceOf<Self>) -> rt::FloatTensor<Self>;"),
        "{ops}"
    );
    // `Cube` with fusion on: one deferred operation, its outputs declared by the metadata.
    for expected in [
        "#[cfg(all(feature = \"cube\", burn_route_cube))] impl<B: rt::fusion::FusionBackend + Co> Co for rt::fusion::Fusion<B> {",
        "let mut __lazy = rt::fusion::Lazy::<B>::new(\"pick\", \"ops.toml:13\");",
        "let __in_xs = __lazy.inputs(xs);",
        "let __in_bias = __lazy.input_option(bias.cloned());",
        "let __spec_bias = __lazy.spec_option(__in_bias.as_ref());",
        "let __out_0 = __lazy.output_vec(rt::TensorKind::Float, \"output[0]\", crate::meta::pick_shapes(&__spec_xs, __spec_bias.as_ref(), &__spec_q), __lazy.default_dtype(rt::TensorKind::Float));",
        "let __out_1 = __lazy.output_option(rt::TensorKind::Int, \"output[1]\", crate::meta::pick_index(&__spec_xs, __spec_bias.as_ref(), &__spec_q), crate::meta::index_dtype(&__spec_xs, __spec_bias.as_ref(), &__spec_q));",
        "let __result = <B as Co>::pick(__handles.float(&__in_xs), __handles.float(&__in_bias).as_ref(), __handles.quantized(&__in_q));",
        "__handles.check(&__out_0, &__result.0)?; __handles.check(&__out_1, &__result.1)?; __handles.publish_float(&__out_0, __result.0); __handles.publish_int(&__out_1, __result.1); Ok(()) });",
        "(__outputs.vec(), __outputs.option())",
        // Where Cube is not compiled, the metadata functions are still used.
        "#[cfg(not(all(feature = \"cube\", burn_route_cube)))] const _: () = { let _ = crate::meta::pick_shapes;",
    ] {
        assert!(
            flat(&ops).contains(expected),
            "missing `{expected}` in\n{ops}"
        );
    }
    let dispatch = render_containers("routed_dispatch.rs");
    for expected in [
        "let xs = B::float_vec(__route, \"xs\", xs);",
        "let bias = B::float_ref_opt(__route, \"bias\", bias);",
        "let q = B::quantized(__route, \"q\", q);",
        "__kernel(xs, bias.as_deref(), q)",
        "B::float_out_vec(__route, __out.0)",
        "B::int_out_opt(__route, __out.1)",
        // An `Option` or `Vec` input: planning takes the groups of every input.
        "__rt::Group::all([__rt::Group::float_vec(\"xs\", &xs), __rt::Group::float_opt(\"bias\", bias), __rt::Group::quantized(\"q\", &q)])",
        "let __route = __rt::Route::plan_by_device(&__OP, \"device\", device)?;",
        "match __rt::Route::fast_by_device(&__OP, device) {",
        "let device = B::device(__route, \"device\", device);",
        // Per-op backends: `make` is in its own trait, implemented by Flex only.
        "impl CoFlex for rt::Dispatch",
        "__run::<rt::Flex>(&__route, <rt::Flex as CoFlex>::make, n, device)",
        // `__OP` names the arms each build compiles: Cube behind its cfg, autodiff behind its
        // own (the generator's `burn_route_autodiff`, set by the build script), and the crate.
        "(rt::BackendId::Cube, cfg!(all(feature = \"cube\", burn_route_cube)), \"all(feature = \\\"cube\\\", burn_route_cube)\")],",
        "cfg!(burn_route_autodiff), \"burn_route_autodiff\", env!(\"CARGO_PKG_NAME\"), None);",
    ] {
        assert!(
            dispatch.contains(expected),
            "missing `{expected}` in\n{dispatch}"
        );
    }
    let tensor = render_containers("routed_tensor.rs");
    for expected in [
        "pub fn pick<const D: usize>(xs: Vec<rt::Tensor<D>>, bias: Option<&rt::Tensor<D>>, q: rt::Tensor<D>) -> (Vec<rt::Tensor<D>>, Option<rt::Tensor<D, rt::Int>>)",
        "__rt::into_dispatch_vec(xs), __rt::into_dispatch_ref_opt(bias).as_ref(), q.into_dispatch())?",
        "pub fn make<const D: usize>(n: usize, device: &rt::Device) -> rt::Tensor<D>",
        "dispatch::try_make(n, device.as_dispatch())?",
    ] {
        assert!(
            tensor.contains(expected),
            "missing `{expected}` in\n{tensor}"
        );
    }
}

#[test]
fn composite_ops_get_default_bodies_and_generated_impls() {
    let ops = render_containers("routed_ops.rs");
    for expected in [
        "pub trait CoComposite: rt::Backend {",
        "fn soft(x: rt::FloatTensor<Self>) -> rt::FloatTensor<Self> { crate::soft::<Self>(x) }",
        "impl CoComposite for rt::Flex {}",
        "#[cfg(all(feature = \"cube\", burn_route_cube))] impl CoComposite for rt::Cube {}",
        "#[cfg(burn_route_autodiff)] impl<B: rt::Backend, C: rt::CheckpointStrategy> CoComposite for rt::Autodiff<B, C> {}",
    ] {
        assert!(ops.contains(expected), "missing `{expected}` in\n{ops}");
    }
    // The autodiff __route calls the composite through `Autodiff<B, C>`: no hand-written kernel.
    let dispatch = render_containers("routed_dispatch.rs");
    assert!(
        dispatch
            .contains("__run::<AutodiffFlex>(&__route, <AutodiffFlex as CoComposite>::soft, x)"),
        "{dispatch}"
    );
    assert!(
        dispatch.contains("type AutodiffFlex = rt::Autodiff<rt::Flex>;"),
        "{dispatch}"
    );
    assert!(!dispatch.contains("CoCompositeAutodiff"), "{dispatch}");
    // With the autodiff cfg off, planning (not an arm) answers autodiff routing.
    assert!(!dispatch.contains("autodiff_off"), "{dispatch}");
}

#[test]
fn builder_overrides_the_trait_name_and_selects_modules() {
    let files = Builder::new("ops.toml")
        .trait_name("Renamed")
        .modules(&[burn_route_codegen::Module::Ops])
        .render_str(CONTAINERS)
        .expect("valid");
    assert_eq!(files.len(), 1);
    let ops = flat(&files[0].contents);
    for expected in [
        "pub trait Renamed: rt::Backend",
        "pub trait RenamedAutodiff: rt::Backend",
        "pub trait RenamedFlex: rt::Backend",
        "pub trait RenamedComposite: rt::Backend",
    ] {
        assert!(ops.contains(expected), "missing `{expected}` in\n{ops}");
    }
    assert!(!ops.contains("pub trait Co:"), "{ops}");
}

/// With the `snapshot` feature (the workspace's build turns it on).
#[cfg(feature = "snapshot")]
#[test]
fn check_snapshot_reports_and_blesses() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("ops.toml");
    std::fs::write(&manifest, CONTAINERS).unwrap();
    let snapshots = dir.path().join("generated");
    let builder = Builder::new(&manifest)
        .manifest_name("ops.toml")
        .snapshot_dir(&snapshots);
    let report = builder
        .check_snapshot(false, "BLESS=1 cargo test")
        .unwrap_err();
    assert!(report.contains("+pub trait Co: rt::Backend {"), "{report}");
    assert!(
        report.ends_with(
            "Re-run with `BLESS=1 cargo test` to rewrite them, then review and commit the result."
        ),
        "{report}"
    );
    builder.check_snapshot(true, "").expect("bless writes");
    builder
        .check_snapshot(false, "")
        .expect("fresh after bless");
    // A manifest with errors is never blessed.
    std::fs::write(&manifest, CONTAINERS.replace("\"float\"", "\"flaot\"")).unwrap();
    let err = builder.check_snapshot(true, "").unwrap_err();
    assert!(err.contains("unknown tensor kind `flaot`"), "{err}");
    // ... and checking it fails with the manifest's errors.
    assert!(
        builder
            .check_snapshot(false, "")
            .unwrap_err()
            .contains("unknown tensor kind")
    );
}

/// Ops whose kernel calls are the same code (inputs, their names, output) share one `__run`,
/// named for the first of them: a crate of many ops of one signature compiles one body per
/// backend. Another input name or type gets a body of its own.
#[test]
fn ops_of_one_signature_share_their_kernel_call() {
    let manifest = r#"[routing]
trait = "Same"
backends = ["Flex"]

[[op]]
name = "first"
inputs = [{ name = "lhs", tensor = "float" }, { name = "rhs", tensor = "float" }]
output = { tensor = "float" }

[[op]]
name = "second"
inputs = [{ name = "lhs", tensor = "float" }, { name = "rhs", tensor = "float" }]
output = { tensor = "float" }

[[op]]
name = "renamed"
inputs = [{ name = "a", tensor = "float" }, { name = "rhs", tensor = "float" }]
output = { tensor = "float" }

[[op]]
name = "retyped"
inputs = [{ name = "lhs", tensor = "float" }, { name = "rhs", tensor = "int" }]
output = { tensor = "float" }
"#;
    let files = Builder::new("same.toml")
        .render_str(manifest)
        .expect("valid");
    let raw = files
        .into_iter()
        .find(|f| f.name == "routed_dispatch.rs")
        .expect("dispatch")
        .contents;
    let dispatch = flat(&raw);
    let defined: Vec<&str> = dispatch
        .split("fn __run_")
        .skip(1)
        .map(|rest| rest.split('<').next().unwrap_or_default())
        .collect();
    assert_eq!(defined, ["first", "renamed", "retyped"], "{dispatch}");
    // The docs, each paragraph on one line.
    let docs = raw
        .lines()
        .filter_map(|line| line.trim().strip_prefix("/// "))
        .collect::<Vec<_>>()
        .join(" ");
    let shared = "The kernel call of [`try_first`](fn@try_first): unwraps the inputs for backend \
                  `B`, calls the kernel, wraps the outputs. Shared by the op with the same inputs \
                  and output: `second`.";
    assert!(docs.contains(shared), "missing `{shared}` in\n{docs}");
    for expected in [
        "fn __run_first<B: __rt::Target>(__route: &__rt::Route, __kernel: fn(rt::FloatTensor<B>, \
         rt::FloatTensor<B>) -> rt::FloatTensor<B>, lhs: rt::DispatchTensor, rhs: \
         rt::DispatchTensor) -> rt::DispatchTensor {",
        "__run::<rt::Flex>(&__route, <rt::Flex as Same>::second, lhs, rhs)",
        "__run::<rt::Flex>(&__route, <rt::Flex as Same>::renamed, a, rhs)",
        "__run::<rt::Flex>(&__route, <rt::Flex as Same>::retyped, lhs, rhs)",
    ] {
        assert!(
            dispatch.contains(&flat(expected)),
            "missing `{expected}` in\n{dispatch}"
        );
    }
}

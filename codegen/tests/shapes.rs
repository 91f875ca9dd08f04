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

fn flat(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn trait_signatures() {
    let ops = flat(&file("routed_ops.rs"));
    assert!(ops.contains("pub trait ShapeOps: rt::Backend {"), "{ops}");
    assert!(ops.contains(
        "fn mixed( x: &rt::FloatTensor<Self>, ids: rt::IntTensor<Self>, mask: &rt::BoolTensor<Self>, k: usize, ) -> (rt::FloatTensor<Self>, (rt::IntTensor<Self>, u64));"
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
        "let x = B::float_ref(route, \"x\", x)?;",
        "let ids = B::int(route, \"ids\", ids)?;",
        "let mask = B::bool_ref(route, \"mask\", mask)?;",
        "let (out_0, (out_1_0, out_1_1)) = kernel(&x, ids, &mask, k);",
        "Ok((B::float_out(route, out_0), (B::int_out(route, out_1_0), out_1_1)))",
        "rt::Input::float(\"x\", x), rt::Input::int(\"ids\", &ids), rt::Input::bool(\"mask\", mask)",
        // A tensor-less op is routed to its only backend.
        "let route = rt::Route::fixed(&OP, rt::BackendId::Flex);",
        "fn run<B: rt::Lane>( _route: &rt::Route, kernel: impl FnOnce(f32), value: f32, ) -> Result<(), rt::RouteError> { kernel(value); Ok(()) }",
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
        "pub fn mixed<const D: usize, const E: usize>( x: &rt::Tensor<D>, ids: rt::Tensor<D, rt::Int>, mask: &rt::Tensor<2, rt::Bool>, k: usize, ) -> (rt::Tensor<D>, (rt::Tensor<E, rt::Int>, u64))",
        "let (out_0, (out_1_0, out_1_1)) = <rt::Dispatch as ShapeOps>::mixed( &x.clone().into_dispatch(), ids.into_dispatch(), &mask.clone().into_dispatch(), k, );",
        "(rt::Tensor::from_dispatch(out_0), (rt::Tensor::from_dispatch(out_1_0), out_1_1))",
        "pub fn count<const D: usize>(mask: rt::Tensor<D, rt::Bool>) -> usize",
        "pub fn fill(value: f32) {",
    ] {
        assert!(
            tensor.contains(expected),
            "missing `{expected}` in\n{tensor}"
        );
    }
}

//! The JSON Schema against real and bad manifests.

#[test]
fn every_key_of_the_key_table_is_a_property_with_its_doc_line() {
    use crate::keys::Table;
    let schema = super::json_schema();
    for &table in Table::ALL {
        let path = match table {
            Table::Top => "/properties".to_owned(),
            Table::Output => "/definitions/output/oneOf/0/properties".to_owned(),
            Table::Backend => "/definitions/backend/oneOf/1/properties".to_owned(),
            other => format!("/definitions/{}/properties", other.id()),
        };
        let properties = schema
            .pointer(&path)
            .and_then(|v| v.as_object())
            .expect(&path);
        assert_eq!(properties.len(), table.keys().len(), "{path}");
        for key in table.keys() {
            assert_eq!(
                properties[key.name]["description"], key.doc,
                "{path} {}",
                key.name
            );
        }
    }
}

const MANIFEST: &str = r#"
[routing]
trait = "MyOps"
backends = ["Flex"]
backward_bounds = ["crate::kernels::MyBackward"]

[[op]]
name = "swish"
autodiff = "differentiable"
inputs = [{ name = "x", tensor = "float" }, { name = "beta", type = "f32" }]
output = { tensor = "float" }
backward = { x = "grad * (sigmoid(beta * x) + beta * output * (1 - sigmoid(beta * x)))" }
checkpoint = "keep"

[op.check]
shapes = { x = [2, 3] }
ranges = { x = [-2.0, 2.0] }
args = { beta = "0.5" }
tolerance = 1e-2
gradients = true

[[op]]
name = "pick"
autodiff = "differentiable"
inputs = [
{ name = "xs", tensor = "int", container = "vec" },
{ name = "x", tensor = "float" },
{ name = "y", tensor = "float", container = "option" },
{ name = "k", type = "usize" },
]
output = [{ tensor = "float" }, { tensor = "bool" }]
backward = "crate::kernels::MyBackward::pick_backward"
save = ["x", "y", "k", "output.1"]

[op.check]
shapes = { xs = [[2], [2]], x = [2], y = [2] }
ranges = { xs = [0, 3] }
gradients = false
"#;

fn errors(source: &str) -> Vec<String> {
    let schema = super::json_schema();
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let value: toml::Value = toml::from_str(source).expect("TOML");
    let json = serde_json::to_value(value).expect("JSON");
    validator
        .iter_errors(&json)
        .map(|e| e.to_string())
        .collect()
}

fn renders(source: &str) -> bool {
    crate::Builder::new("ops.toml").render_str(source).is_ok()
}

#[test]
fn the_backward_keys_validate() {
    assert!(renders(MANIFEST), "the fixture is a valid manifest");
    assert_eq!(errors(MANIFEST), Vec::<String>::new());
}

#[test]
fn every_checkpoint_mode_the_schema_lists_is_accepted() {
    for mode in crate::keys::CHECKPOINT {
        let source = MANIFEST.replace("checkpoint = \"keep\"", &format!("checkpoint = \"{mode}\""));
        assert!(
            renders(&source),
            "checkpoint = \"{mode}\" is refused by the generator"
        );
        assert_eq!(errors(&source), Vec::<String>::new());
    }
    let unknown = MANIFEST.replace("checkpoint = \"keep\"", "checkpoint = \"recomptue\"");
    assert!(!renders(&unknown) && !errors(&unknown).is_empty());
}

#[test]
fn every_numeric_type_the_schema_lists_is_read_as_a_number() {
    for ty in burn_route_core::primitive::NUMBERS {
        let source = MANIFEST.replace("type = \"f32\"", &format!("type = \"{ty}\""));
        // The op check's value of `beta` is a literal of its type.
        let source = if burn_route_core::primitive::is_integer(ty) {
            source.replace("args = { beta = \"0.5\" }", "args = { beta = \"1\" }")
        } else {
            source
        };
        assert!(renders(&source), "a formula cannot read a `{ty}`");
    }
    let source = MANIFEST.replace("type = \"f32\"", "type = \"bool\"");
    assert!(!renders(&source), "a formula read a `bool`");
}

#[test]
fn the_formula_description_lists_every_function() {
    let text = super::formula_description();
    for f in crate::formula::FUNCTIONS {
        assert!(text.contains(&format!("{}(", f.name)), "{}", f.name);
    }
    assert!(text.contains("clamp(x: tensor, lo: number, hi: number): x clamped to [lo, hi]"));
    assert!(text.contains("where(cond: tensor, a: tensor or number, b: tensor or number)"));
    assert!(text.contains("sum_dim(x: tensor, dim: integer literal)"));
}

#[test]
fn bad_backward_keys_are_rejected() {
    for (what, from, to) in [
        (
            "formula not a string",
            "x = \"grad * (sigmoid",
            "x = 3, z = \"grad * (sigmoid",
        ),
        (
            "backward not a path",
            "\"crate::kernels::MyBackward::pick_backward\"",
            "\"pick_backward\"",
        ),
        (
            "backward a number",
            "\"crate::kernels::MyBackward::pick_backward\"",
            "3",
        ),
        (
            "empty formula table",
            "backward = { x = \"grad * (sigmoid(beta * x) + beta * output * (1 - sigmoid(beta * x)))\" }",
            "backward = {}",
        ),
        ("save not names", "save = [\"x\",", "save = [\"x y\","),
        ("save twice", "save = [\"x\",", "save = [\"x\", \"x\","),
        (
            "save a string",
            "save = [\"x\", \"y\", \"k\", \"output.1\"]",
            "save = \"x\"",
        ),
        ("unknown checkpoint mode", "\"keep\"", "\"never\""),
        ("unknown check key", "gradients = true", "gradient = true"),
        ("negative size", "x = [2, 3]", "x = [2, -3]"),
        ("empty shape", "x = [2, 3]", "x = []"),
        ("range of three", "[-2.0, 2.0]", "[-2.0, 0.0, 2.0]"),
        ("arg not a string", "beta = \"0.5\"", "beta = 0.5"),
        ("zero tolerance", "1e-2", "0"),
        (
            "gradients not a bool",
            "gradients = true",
            "gradients = \"no\"",
        ),
        (
            "bound not a path",
            "\"crate::kernels::MyBackward\"]",
            "\"MyBackward\"]",
        ),
    ] {
        assert!(MANIFEST.contains(from), "{what}: fixture");
        let bad = MANIFEST.replacen(from, to, 1);
        assert!(
            !errors(&bad).is_empty(),
            "the schema accepted a manifest with: {what}"
        );
        assert!(
            !renders(&bad),
            "the generator accepted a manifest with: {what}"
        );
    }
}

/// A declared struct input's fields in `backward` and `no_gradient`, in each spelling TOML has.
const FIELDS_MANIFEST: &str = r#"
[routing]
trait = "MyOps"
backends = ["Flex"]

[[type]]
name = "Pair"
fields = [{ name = "scale", tensor = "float" }, { name = "shift", tensor = "float" }]

[[op]]
name = "affine"
autodiff = "differentiable"
inputs = [{ name = "x", tensor = "float" }, { name = "p", type = "Pair" }]
output = { tensor = "float" }
backward = { x = "grad * p.scale", "p.scale" = "grad * x", "p.shift" = "grad" }

[[op]]
name = "affine_fn"
autodiff = "differentiable"
inputs = [{ name = "x", tensor = "float" }, { name = "p", type = "Pair" }]
output = { tensor = "float" }
backward = "crate::kernels::affine_backward"
no_gradient = ["p.shift"]
"#;

#[test]
fn declared_field_paths_validate_in_every_spelling() {
    let dotted = FIELDS_MANIFEST
        .replace("\"p.scale\" =", "p.scale =")
        .replace("\"p.shift\" =", "p.shift =");
    let table = FIELDS_MANIFEST.replace(
        "\"p.scale\" = \"grad * x\", \"p.shift\" = \"grad\"",
        "p = { scale = \"grad * x\", shift = \"grad\" }",
    );
    assert_ne!(table, FIELDS_MANIFEST);
    for source in [FIELDS_MANIFEST, &dotted, &table] {
        assert!(renders(source), "the generator refuses:\n{source}");
        assert_eq!(errors(source), Vec::<String>::new(), "{source}");
    }
    for (from, to) in [
        ("\"p.scale\" =", "\"p.Scale\" ="),
        ("\"p.scale\" =", "\"p..scale\" ="),
        ("\"p.shift\" = \"grad\"", "\"p.shift\" = 1"),
        ("[\"p.shift\"]", "[\"p.\"]"),
    ] {
        let bad = FIELDS_MANIFEST.replace(from, to);
        assert_ne!(bad, FIELDS_MANIFEST, "{from}");
        assert!(!errors(&bad).is_empty(), "the schema accepts {to}");
    }
}

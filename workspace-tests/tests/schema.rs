//! `ops.schema.json` is fresh, accepts the real manifest and rejects bad ones.
//!
//! Bless after changing the manifest format: `BLESS=1 cargo test -p burn-route-workspace-tests --test schema`.

use burn_route_codegen::schema::{json_schema, json_schema_text};

const SCHEMA_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../ops.schema.json");
const OPS_TOML: &str = include_str!("../../ops.toml");
const DOWNSTREAM_OPS_TOML: &str = include_str!("../../examples/downstream/ops.toml");
const DECLARED_OPS_TOML: &str = include_str!("../../tests/declared/ops.toml");

#[test]
fn the_checked_in_schema_is_fresh() {
    let fresh = json_schema_text();
    if burn_route_codegen::bless_requested() {
        std::fs::write(SCHEMA_FILE, &fresh).unwrap();
    }
    let checked_in = std::fs::read_to_string(SCHEMA_FILE).unwrap_or_default();
    assert!(
        checked_in == fresh,
        "ops.schema.json is stale; re-run with `BLESS=1 cargo test -p burn-route-workspace-tests --test schema`"
    );
}

fn as_json(source: &str) -> serde_json::Value {
    let value: toml::Value = toml::from_str(source).expect("TOML");
    serde_json::to_value(value).expect("JSON")
}

fn errors(source: &str) -> Vec<String> {
    let validator = jsonschema::validator_for(&json_schema()).expect("a valid schema");
    validator
        .iter_errors(&as_json(source))
        .map(|e| e.to_string())
        .collect()
}

#[test]
fn the_manifests_in_the_repository_validate() {
    assert_eq!(errors(OPS_TOML), Vec::<String>::new());
    assert_eq!(errors(DOWNSTREAM_OPS_TOML), Vec::<String>::new());
    assert_eq!(errors(DECLARED_OPS_TOML), Vec::<String>::new());
    assert!(OPS_TOML.starts_with("#:schema ./ops.schema.json\n"));
}

#[test]
fn bad_manifests_are_rejected() {
    let valid = "[routing]\ntrait = \"MyOps\"\nbackends = [\"Flex\"]\n\n[[op]]\nname = \"add\"\nautodiff = \"differentiable\"\ninputs = [\n    { name = \"lhs\", tensor = \"float\" },\n    { name = \"rhs\", tensor = \"float\" },\n]\noutput = { tensor = \"float\" }\n";
    assert_eq!(errors(valid), Vec::<String>::new());
    for (what, from, to) in [
        ("unknown key", "output =", "outptu ="),
        (
            "unknown tensor kind",
            "tensor = \"float\" },\n    { name = \"rhs\"",
            "tensor = \"flaot\" },\n    { name = \"rhs\"",
        ),
        ("unknown backend", "[\"Flex\"]", "[\"Flx\"]"),
        ("empty backend list", "[\"Flex\"]", "[]"),
        ("unknown policy", "\"differentiable\"", "\"diferentiable\""),
        (
            "name not an identifier",
            "name = \"add\"",
            "name = \"add-relu\"",
        ),
        ("wrong type", "name = \"add\"", "name = 3"),
        ("missing inputs", "inputs = [", "inptus = ["),
        (
            "tensor and type",
            "{ name = \"lhs\", tensor = \"float\" }",
            "{ name = \"lhs\", tensor = \"float\", type = \"f32\" }",
        ),
        (
            "unknown container",
            "{ name = \"lhs\", tensor = \"float\" }",
            "{ name = \"lhs\", tensor = \"float\", container = \"list\" }",
        ),
        (
            "missing routing",
            "[routing]\ntrait = \"MyOps\"\nbackends = [\"Flex\"]\n",
            "",
        ),
        (
            "rank out of range",
            "{ name = \"lhs\", tensor = \"float\" }",
            "{ name = \"lhs\", tensor = \"float\", dims = 0 }",
        ),
    ] {
        assert!(valid.contains(from), "{what}: fixture");
        let bad = valid.replacen(from, to, 1);
        assert!(
            !errors(&bad).is_empty(),
            "the schema accepted a manifest with: {what}"
        );
    }
}

#[test]
fn bad_declared_types_are_rejected() {
    let valid = "[routing]\ntrait = \"MyOps\"\nbackends = [\"Flex\"]\n\n[[type]]\nname = \"Pair\"\ndoc = \"Two tensors.\"\nfields = [{ name = \"x\", tensor = \"float\", dims = \"D\" }, { name = \"n\", type = \"f32\" }]\n\n[[type]]\nname = \"Choice\"\nvariants = [{ name = \"Dense\", fields = [{ tensor = \"float\", container = \"option\" }] }, { name = \"Named\", fields = [{ name = \"pair\", type = \"Pair\" }] }, { name = \"Empty\", doc = \"None.\" }]\n\n[[op]]\nname = \"pick\"\ninputs = [{ name = \"c\", type = \"&Choice\" }]\noutput = [{ type = \"Pair\" }, { tensor = \"float\" }]\n";
    assert_eq!(errors(valid), Vec::<String>::new());
    assert!(
        burn_route_codegen::Builder::new("ops.toml")
            .render_str(valid)
            .is_ok(),
        "the fixture is a valid manifest"
    );
    for (what, from, to) in [
        (
            "unknown type key",
            "doc = \"Two tensors.\"",
            "docs = \"Two tensors.\"",
        ),
        ("type without a name", "name = \"Pair\"\n", ""),
        (
            "type name not UpperCamelCase",
            "name = \"Pair\"",
            "name = \"pair\"",
        ),
        (
            "fields and variants",
            "name = \"Pair\"\n",
            "name = \"Pair\"\nvariants = [{ name = \"A\" }, { name = \"B\" }]\n",
        ),
        (
            "neither fields nor variants",
            "variants = [",
            "variantz = [",
        ),
        (
            "one variant",
            ", { name = \"Named\", fields = [{ name = \"pair\", type = \"Pair\" }] }, { name = \"Empty\", doc = \"None.\" }]",
            "]",
        ),
        (
            "empty fields",
            "fields = [{ name = \"x\", tensor = \"float\", dims = \"D\" }, { name = \"n\", type = \"f32\" }]",
            "fields = []",
        ),
        (
            "field with tensor and type",
            "{ name = \"n\", type = \"f32\" }",
            "{ name = \"n\", type = \"f32\", tensor = \"int\" }",
        ),
        (
            "field with neither",
            "{ name = \"n\", type = \"f32\" }",
            "{ name = \"n\" }",
        ),
        (
            "unknown field key",
            "{ name = \"n\", type = \"f32\" }",
            "{ name = \"n\", type = \"f32\", borrowed = true }",
        ),
        (
            "field name not snake_case",
            "{ name = \"n\",",
            "{ name = \"N\",",
        ),
        (
            "unknown field container",
            "container = \"option\"",
            "container = \"list\"",
        ),
        (
            "unknown variant key",
            "{ name = \"Empty\", doc",
            "{ name = \"Empty\", tensor = \"float\", doc",
        ),
        (
            "variant name not UpperCamelCase",
            "{ name = \"Empty\"",
            "{ name = \"empty\"",
        ),
    ] {
        assert!(valid.contains(from), "{what}: fixture");
        let bad = valid.replacen(from, to, 1);
        assert!(
            !errors(&bad).is_empty(),
            "the schema accepted a manifest with: {what}"
        );
    }
}

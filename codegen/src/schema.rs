//! The JSON Schema of the manifest, for editors (taplo reads the `#:schema` line of ops.toml).
//!
//! Built from the parser's own key lists ([`crate::parse`]) and the validator's value sets, so a
//! key the parser accepts always has a schema entry and the schema allows nothing else (a unit
//! test checks that every listed key is described).

use serde_json::{Value, json};

use crate::ir::{BackendName, TensorKind};
use crate::parse::{
    BACKEND_KEYS, INPUT_KEYS, OP_KEYS, OUTPUT_KEYS, ROUTING_KEYS, SHAPE_KEYS, TOP_KEYS,
};

/// The names `crate::names` accepts (keywords aside): `UpperCamelCase` traits, `snake_case`
/// ops and inputs (ops do not start with `_`), `UPPER_CASE` ranks; no `__` anywhere.
const TRAIT_NAME: &str = "^[A-Z][A-Za-z0-9]*$";
const OP_NAME: &str = "^[a-z][a-z0-9]*(_[a-z0-9]+)*_?$";
const INPUT_NAME: &str = "^_?[a-z][a-z0-9]*(_[a-z0-9]+)*_?$";
const RANK_NAME: &str = "^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*_?$";

fn backend_names() -> Vec<&'static str> {
    BackendName::ALL.iter().map(|b| b.as_str()).collect()
}

fn kinds() -> Vec<&'static str> {
    TensorKind::ALL.iter().map(|k| k.as_str()).collect()
}

/// The schema of one key, by table.
fn property(table: &str, key: &str) -> Value {
    match (table, key) {
        ("top", "routing") => json!({ "$ref": "#/definitions/routing" }),
        ("top", "op") => json!({
            "description": "The routed ops, in order.",
            "type": "array",
            "items": { "$ref": "#/definitions/op" }
        }),
        ("routing", "trait") => json!({
            "description": "Name of the generated extension trait that every concrete backend implements.",
            "type": "string", "pattern": TRAIT_NAME
        }),
        ("routing", "autodiff_trait") => json!({
            "description": "Name of the trait with the Autodiff<B, C> kernels of differentiable ops (default: `trait` + \"Autodiff\").",
            "type": "string", "pattern": TRAIT_NAME
        }),
        ("routing" | "op", "backends") => json!({
            "description": "Backends the ops are routed to (on an op: replaces routing.backends).",
            "type": "array", "minItems": 1,
            "items": { "$ref": "#/definitions/backend" }
        }),
        ("routing", "autodiff_cfg") => json!({
            "description": "cfg predicate (in the crate including the generated code) that compiles autodiff routing in, combined with burn_route_autodiff. Default: burn_route_autodiff, which the build script sets when burn-route has its autodiff feature.",
            "type": "string"
        }),
        ("backend", "name") => {
            json!({ "description": "The backend selector.", "enum": backend_names() })
        }
        ("backend", "cfg") => json!({
            "description": "cfg predicate that compiles this backend's routing in, e.g. 'feature = \"wgpu\"' (combined with burn_route_cube / burn_route_remote, which alone are the default).",
            "type": "string"
        }),
        ("op", "name") => json!({
            "description": "The op's name: snake_case ASCII, not a keyword, not starting with `__`, unique in the manifest.",
            "type": "string", "pattern": OP_NAME
        }),
        ("op", "doc") => {
            json!({ "description": "Documentation of every generated item for the op.", "type": "string" })
        }
        ("op", "autodiff") => json!({
            "description": "What a tracked float input does: run the Autodiff<B, C> implementation (differentiable), run detached (detach), or fail (reject, the default).",
            "enum": ["differentiable", "detach", "reject"]
        }),
        ("op", "inputs") => json!({
            "description": "The op's parameters, in order.",
            "type": "array",
            "items": { "$ref": "#/definitions/input" }
        }),
        ("op", "output") => json!({
            "description": "A tensor or plain type, or an array of outputs for a tuple. Absent: ().",
            "$ref": "#/definitions/output"
        }),
        ("op", "composite") => json!({
            "description": "Path of a function generic over B: Backend implementing the op from backend primitives.",
            "type": "string"
        }),
        ("op", "composition") => json!({
            "description": "Path of a function generic over B: Backend writing the op with backend primitives: the default body of its trait method (backends without a kernel of their own run it) and, when the outputs declare no shape and dtype, what it runs on Fusion<B>, which Burn fuses.",
            "type": "string"
        }),
        ("input", "name") => {
            json!({ "description": "Parameter name: snake_case ASCII, not a keyword, not starting with `__`.", "type": "string", "pattern": INPUT_NAME })
        }
        ("input" | "output", "tensor") => json!({ "description": "Tensor kind.", "enum": kinds() }),
        ("input" | "output", "type") => {
            json!({ "description": "A plain Rust type, passed through unchanged.", "type": "string" })
        }
        ("input", "device") => json!({ "description": "The device argument.", "const": true }),
        ("input", "borrowed") => {
            json!({ "description": "Pass the tensor by reference.", "type": "boolean" })
        }
        ("input" | "output", "dims") => json!({
            "description": "Rank at the Tensor<D> level: an UPPER_CASE const-generic name or a number.",
            "oneOf": [
                { "type": "string", "pattern": RANK_NAME },
                { "type": "integer", "minimum": 1, "maximum": 16 }
            ]
        }),
        ("input" | "output", "container") => json!({
            "description": "Option<tensor> or Vec<tensor>.",
            "enum": ["option", "vec"]
        }),
        ("output", "shape") => json!({
            "description": "The output's shape, declared before its kernel runs (the lazy Fusion implementation needs it): an input's name (the same shape), or the path of a function taking the op's input specs (&TensorSpec, Option<&TensorSpec>, &[TensorSpec]) and plain arguments (by reference) and returning Shape (Option<Shape> or Vec<Shape> for option and vec outputs).",
            "type": "string",
            "anyOf": [
                { "pattern": INPUT_NAME },
                { "pattern": "::" }
            ]
        }),
        ("output", "dtype") => json!({
            "description": "The output's dtype, declared before its kernel runs: an input's name (the same dtype; an input of the output's kind), \"default\" (the device's default dtype for the output's kind), or the path of a function taking what a shape function takes and returning DType.",
            "type": "string",
            "anyOf": [
                { "const": "default" },
                { "pattern": INPUT_NAME },
                { "pattern": "::" }
            ]
        }),
        ("input", "shape") => json!({
            "description": "The input's shape contract, checked before any kernel runs: exactly one rule naming another single (or optional) tensor input of the op.",
            "$ref": "#/definitions/shape"
        }),
        ("shape", "same_as") => {
            json!({ "description": "The same shape as the named input.", "type": "string", "pattern": INPUT_NAME })
        }
        ("shape", "broadcast_to") => {
            json!({ "description": "Broadcasts to the named input's shape: same rank, each dimension equal to its or 1.", "type": "string", "pattern": INPUT_NAME })
        }
        ("shape", "broadcast_with") => {
            json!({ "description": "Broadcasts with the named input (Burn's binary-op broadcasting): same rank, each pair of dimensions equal or one of them 1.", "type": "string", "pattern": INPUT_NAME })
        }
        ("shape", "last_dim_of") => {
            json!({ "description": "Shape [n], n the named input's last dimension (a per-feature parameter; needs dims = 1).", "type": "string", "pattern": INPUT_NAME })
        }
        ("shape", "leading_dims_of") => {
            json!({ "description": "The named input's shape without its last dimension (one entry per row).", "type": "string", "pattern": INPUT_NAME })
        }
        (table, key) => panic!("no schema for key `{key}` of `{table}`: describe it in schema.rs"),
    }
}

fn table(name: &str, keys: &[&str], required: &[&str], description: &str) -> Value {
    let properties: serde_json::Map<String, Value> = keys
        .iter()
        .map(|key| ((*key).to_owned(), property(name, key)))
        .collect();
    json!({
        "description": description,
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

/// One of `tensor` / `type` / `device`, exactly.
fn exactly_one(keys: &[&str]) -> Value {
    let options: Vec<Value> = keys
        .iter()
        .map(|k| {
            let others: Vec<Value> = keys
                .iter()
                .filter(|o| *o != k)
                .map(|o| json!({ "required": [o] }))
                .collect();
            json!({ "required": [k], "not": { "anyOf": others } })
        })
        .collect();
    json!({ "oneOf": options })
}

/// The JSON Schema (draft-07) of a manifest.
pub fn json_schema() -> Value {
    let mut input = table(
        "input",
        INPUT_KEYS,
        &["name"],
        "One parameter: a tensor, a plain Rust value, or the device.",
    );
    input["allOf"] = json!([exactly_one(&["tensor", "type", "device"])]);
    let mut output_table = table(
        "output",
        OUTPUT_KEYS,
        &[],
        "A tensor or a plain Rust value.",
    );
    output_table["allOf"] = json!([exactly_one(&["tensor", "type"])]);
    let mut root = table(
        "top",
        TOP_KEYS,
        &["routing"],
        "A burn-route manifest (ops.toml).",
    );
    root["$schema"] = json!("http://json-schema.org/draft-07/schema#");
    root["title"] = json!("burn-route manifest");
    root["definitions"] = json!({
        "routing": table("routing", ROUTING_KEYS, &["trait", "backends"], "The generated trait and the default backends."),
        "backend": {
            "oneOf": [
                { "description": "A backend, always compiled.", "enum": backend_names() },
                table("backend", BACKEND_KEYS, &["name"], "A backend and the cfg that compiles its routing in.")
            ]
        },
        "op": table("op", OP_KEYS, &["name", "inputs"], "One routed op."),
        "input": input,
        "shape": {
            "description": "One shape contract: a rule and the input it relates to.",
            "type": "object",
            "properties": SHAPE_KEYS.iter().map(|key| ((*key).to_owned(), property("shape", key))).collect::<serde_json::Map<String, Value>>(),
            "additionalProperties": false,
            "minProperties": 1,
            "maxProperties": 1
        },
        "output": {
            "oneOf": [
                output_table,
                { "description": "A tuple of outputs.", "type": "array", "minItems": 1, "items": { "$ref": "#/definitions/output" } }
            ]
        }
    });
    root
}

/// The schema as the checked-in `ops.schema.json` holds it.
pub fn json_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&json_schema()).expect("a JSON value serializes");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_key_the_parser_accepts_is_described() {
        // `property` panics for an undescribed key.
        let schema = super::json_schema();
        for (path, count) in [
            ("/properties", super::TOP_KEYS.len()),
            ("/definitions/routing/properties", super::ROUTING_KEYS.len()),
            ("/definitions/op/properties", super::OP_KEYS.len()),
            ("/definitions/input/properties", super::INPUT_KEYS.len()),
            ("/definitions/shape/properties", super::SHAPE_KEYS.len()),
            (
                "/definitions/output/oneOf/0/properties",
                super::OUTPUT_KEYS.len(),
            ),
            (
                "/definitions/backend/oneOf/1/properties",
                super::BACKEND_KEYS.len(),
            ),
        ] {
            let properties = schema
                .pointer(path)
                .and_then(|v| v.as_object())
                .expect(path);
            assert_eq!(properties.len(), count, "{path}");
        }
    }
}

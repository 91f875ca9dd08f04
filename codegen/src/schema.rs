//! The JSON Schema of the manifest, for editors (taplo reads the `#:schema` line of ops.toml).
//!
//! Built from the key table ([`crate::keys`]): every key the parser accepts has a property, with
//! its doc line as the description and its value as the table gives it, and the schema allows
//! nothing else.

use serde_json::{Value as Json, json};

use crate::formula::{FUNCTIONS, Function, GRAD, NONE, OUTPUT, Param};
use crate::keys::{
    CHECK_KEY, CheckMap, HAND_WRITTEN, INPUT_NAME, INPUT_PATH, Key, Need, RANK_NAME, Table, Value,
};
use burn_route_core::primitive;

/// `clamp(x: tensor, lo: number, hi: number): x clamped to [lo, hi]`: a function of the
/// formula language, as the descriptions list it.
fn function_entry(f: &Function) -> String {
    let names: &[&str] = match f.params {
        [_] => &["x"],
        [_, Param::Dim] => &["x", "dim"],
        [_, _] => &["x", "y"],
        [Param::Tensor, Param::Number, Param::Number] => &["x", "lo", "hi"],
        [_, _, _] => &["cond", "a", "b"],
        _ => &[],
    };
    let params: Vec<String> = f
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let kind = match p {
                Param::Tensor => "tensor",
                Param::Number => "number",
                Param::Either => "tensor or number",
                Param::Dim => "integer literal",
            };
            match names.get(i) {
                Some(name) => format!("{name}: {kind}"),
                None => kind.to_owned(),
            }
        })
        .collect();
    format!("{}({}): {}", f.name, params.join(", "), f.doc)
}

/// The description of a formula: its grammar, names and functions.
fn formula_description() -> String {
    let functions: Vec<String> = FUNCTIONS.iter().map(function_entry).collect();
    format!(
        "The input's gradient, as a formula (or \"{NONE}\": no gradient flows to it). Names: `{GRAD}` (the incoming gradient of the op's float output), `{OUTPUT}` (the op's float output), the op's single (not optional) float tensor inputs, and its plain inputs of a numeric type ({}), read as numbers; the fields of a declared struct input taken by value, by path (`p.scale`: a float tensor field, or a numeric one read as a number). Number literals (`2`, `0.5`, `1e-3`), `+ - * /` (a tensor with a number: elementwise), unary `-` and parentheses. Functions: {}. The formula must evaluate to a tensor: of the output's shape or the input's, or one that broadcasts between them (it is summed back to the input's shape, or expanded over dimensions a reduction kept at 1).",
        primitive::NUMBERS.join(", "),
        functions.join("; ")
    )
}

/// The schema of a key's value, by the key table's [`Value`].
fn value_schema(value: Value) -> Json {
    let rank = json!({
        "oneOf": [
            { "type": "string", "pattern": RANK_NAME },
            { "type": "integer", "minimum": 1, "maximum": 16 }
        ]
    });
    let name_or_path = json!([{ "pattern": INPUT_NAME }, { "pattern": "::" }]);
    let input_map = |values: Json| {
        json!({
            "type": "object",
            "propertyNames": { "pattern": CHECK_KEY },
            "additionalProperties": values
        })
    };
    match value {
        Value::Doc | Value::Cfg | Value::RustType => json!({ "type": "string" }),
        Value::Name(pattern) => json!({ "type": "string", "pattern": pattern }),
        Value::Path => json!({ "type": "string", "pattern": "::" }),
        Value::OneOf(values) => json!({ "enum": values }),
        Value::Bool => json!({ "type": "boolean" }),
        Value::True => json!({ "const": true }),
        Value::PositiveNumber => json!({ "type": "number", "exclusiveMinimum": 0 }),
        Value::Rank => rank,
        Value::SetOf(values) => json!({
            "type": "array",
            "items": { "enum": values },
            "minItems": 1,
            "uniqueItems": true
        }),
        Value::ListOf(pattern) => json!({
            "type": "array",
            "items": { "type": "string", "pattern": pattern },
            "uniqueItems": true
        }),
        Value::Paths => json!({ "type": "array", "items": { "type": "string", "pattern": "::" } }),
        Value::Backends => json!({
            "type": "array", "minItems": 1,
            "items": { "$ref": "#/definitions/backend" }
        }),
        Value::Table(table) => json!({ "$ref": format!("#/definitions/{}", table.id()) }),
        Value::Tables(table, min) => {
            let mut schema = json!({
                "type": "array",
                "items": { "$ref": format!("#/definitions/{}", table.id()) }
            });
            if min > 0 {
                schema["minItems"] = json!(min);
            }
            schema
        }
        Value::Output => json!({ "$ref": "#/definitions/output" }),
        Value::Backward => json!({
            "oneOf": [
                {
                    "description": "Hand-written: the op's Autodiff<B, C> kernel is a method of the companion `...Autodiff` trait, implemented by hand.",
                    "const": HAND_WRITTEN
                },
                {
                    "description": "Function form: the full path of a function generic over the backend (`crate::m::f`), or of a trait method (`crate::m::MyTrait::f`), called with what `save` lists, then `grad`.",
                    "type": "string",
                    "pattern": "::"
                },
                {
                    "description": "Formula form: one formula per single or optional float input (all of them), \"none\" for an input that gets no gradient; a declared struct input by field path.",
                    "$ref": "#/definitions/formulas"
                }
            ]
        }),
        Value::Shape => json!({ "type": "string", "anyOf": name_or_path }),
        Value::Dtype => json!({
            "type": "string",
            "anyOf": [{ "const": "default" }, { "pattern": INPUT_NAME }, { "pattern": "::" }]
        }),
        Value::CheckMap(CheckMap::Shapes) => input_map(json!({
            "oneOf": [
                { "$ref": "#/definitions/check_shape" },
                { "type": "array", "minItems": 1, "items": { "$ref": "#/definitions/check_shape" } }
            ]
        })),
        Value::CheckMap(CheckMap::Ranges) => input_map(json!({
            "type": "array",
            "items": { "type": "number" },
            "minItems": 2,
            "maxItems": 2
        })),
        Value::CheckMap(CheckMap::Args) => input_map(json!({ "type": "string", "minLength": 1 })),
    }
}

/// The schema of one key: its value's, described by its doc line.
fn property(key: &Key) -> Json {
    let mut schema = value_schema(key.value);
    schema["description"] = json!(key.doc);
    schema
}

/// A table's schema: its keys' properties, the required ones, nothing else, and exactly one
/// of each `Need::OneOf` group.
fn table(keys: Table, description: &str) -> Json {
    let properties: serde_json::Map<String, Json> = keys
        .keys()
        .iter()
        .map(|key| (key.name.to_owned(), property(key)))
        .collect();
    let required: Vec<&str> = keys
        .keys()
        .iter()
        .filter(|k| k.need == Need::Yes)
        .map(|k| k.name)
        .collect();
    let mut schema = json!({
        "description": description,
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    });
    if let Some(group) = keys.keys().iter().find_map(|k| match k.need {
        Need::OneOf(group) => Some(group),
        _ => None,
    }) {
        schema["allOf"] = json!([exactly_one(group)]);
    }
    schema
}

/// One of `tensor` / `type` / `device`, exactly.
fn exactly_one(keys: &[&str]) -> Json {
    let options: Vec<Json> = keys
        .iter()
        .map(|k| {
            let others: Vec<Json> = keys
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
pub fn json_schema() -> Json {
    let mut root = table(Table::Top, "A burn-route manifest (ops.toml).");
    let mut shape = table(
        Table::Shape,
        "One shape contract: a rule and the input it relates to.",
    );
    shape["minProperties"] = json!(1);
    shape["maxProperties"] = json!(1);
    root["$schema"] = json!("http://json-schema.org/draft-07/schema#");
    root["title"] = json!("burn-route manifest");
    root["definitions"] = json!({
        "formulas": {
            "type": "object",
            "propertyNames": { "pattern": INPUT_PATH },
            "additionalProperties": {
                "oneOf": [
                    {
                        "description": formula_description(),
                        "type": "string",
                        "minLength": 1
                    },
                    {
                        "description": "The formulas of a declared struct input's fields (or of a nested struct's), keyed by field name.",
                        "$ref": "#/definitions/formulas"
                    }
                ]
            },
            "minProperties": 1
        },
        "routing": table(Table::Routing, "The generated trait and the default backends."),
        "backend": {
            "oneOf": [
                { "description": "A backend, always compiled.", "enum": Table::Backend.key("name").values() },
                table(Table::Backend, "A backend and the cfg that compiles its routing in.")
            ]
        },
        "op": table(Table::Op, "One routed op."),
        "check": table(Table::Check, "The op's entry in the generated op check: the inputs it is called with and what is compared."),
        "check_shape": {
            "description": "A tensor's shape: its sizes, one per dimension.",
            "type": "array",
            "minItems": 1,
            "items": { "type": "integer", "minimum": 0 }
        },
        "input": table(Table::Input, "One parameter: a tensor, a plain Rust value, or the device."),
        "type": table(Table::Type, "A declared type: a struct (`fields`) or an enum (`variants`)."),
        "variant": table(Table::Variant, "One variant of a declared enum: a unit, tuple or struct variant."),
        "field": table(Table::Field, "One field of a declared type or variant: a tensor, a plain Rust value, or another declared type."),
        "shape": shape,
        "output": {
            "oneOf": [
                table(Table::Output, "A tensor or a plain Rust value."),
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
mod tests;

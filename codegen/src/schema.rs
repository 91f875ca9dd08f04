//! The JSON Schema of the manifest, for editors (taplo reads the `#:schema` line of ops.toml).
//!
//! Built from the parser's own key lists ([`crate::parse`]) and the validator's value sets, so a
//! key the parser accepts always has a schema entry and the schema allows nothing else (a unit
//! test checks that every listed key is described).

use serde_json::{Value, json};

use crate::formula::{FUNCTIONS, Function, GRAD, NONE, OUTPUT, Param};
use crate::ir::{BackendName, Policy, TensorKind};
use crate::parse::{
    BACKEND_KEYS, CHECK_KEYS, FIELD_KEYS, HAND_WRITTEN, INPUT_KEYS, OP_KEYS, OUTPUT_KEYS,
    ROUTING_KEYS, SHAPE_KEYS, TOP_KEYS, TYPE_KEYS, VARIANT_KEYS,
};

/// The names `crate::names` accepts (keywords aside): `UpperCamelCase` traits, `snake_case`
/// ops and inputs (ops do not start with `_`), `UPPER_CASE` ranks; no `__` anywhere.
const TRAIT_NAME: &str = "^[A-Z][A-Za-z0-9]*$";
const OP_NAME: &str = "^[a-z][a-z0-9]*(_[a-z0-9]+)*_?$";
const INPUT_NAME: &str = "^_?[a-z][a-z0-9]*(_[a-z0-9]+)*_?$";
/// An `[op.check]` key: an input name, or a path into a declared-type input (`p.scale`,
/// `fill.From.0`).
const CHECK_KEY: &str = "^_?[a-z][a-z0-9]*(_[a-z0-9]+)*_?(\\.([A-Za-z_][A-Za-z0-9_]*|[0-9]+))*$";
const RANK_NAME: &str = "^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*_?$";
/// Declared type and variant names: `UpperCamelCase`.
const TYPE_NAME: &str = "^[A-Z][A-Za-z0-9]*$";
/// Field names: `snake_case`, as inputs.
const FIELD_NAME: &str = INPUT_NAME;
/// A float input, or the path of a field of a declared struct input (`p.scale`, `s.bias.b`): a
/// key of `backward`'s formula table (quoted, `"p.scale"`, or TOML's dotted key) and an entry of
/// `no_gradient`.
const INPUT_PATH: &str = "^_?[a-z][a-z0-9]*(_[a-z0-9]+)*_?(\\._?[a-z][a-z0-9]*(_[a-z0-9]+)*_?)*$";
/// An entry of `save`: an input's name or a path into a declared struct input (`p.scale`),
/// `output`, or `output.N` (`output.N.M` in nested tuples).
const SAVED_VALUE: &str =
    "^(output(\\.[0-9]+)*|_?[a-z][a-z0-9]*(_[a-z0-9]+)*_?(\\._?[a-z][a-z0-9]*(_[a-z0-9]+)*_?)*)$";
use crate::validate::{
    CHECKPOINT_VALUES, FUSION_VALUES, NUMBER_TYPES, OTHER_DTYPES_VALUES, REMOTE_VALUES,
};

fn backend_names() -> Vec<&'static str> {
    BackendName::ALL.iter().map(|b| b.key()).collect()
}

fn kinds() -> Vec<&'static str> {
    TensorKind::ALL.iter().map(|k| k.key()).collect()
}

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
        NUMBER_TYPES.join(", "),
        functions.join("; ")
    )
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
        ("top", "type") => json!({
            "description": "Declared types: structs and enums holding tensors, which op inputs (`type = \"Name\"`, or `\"&Name\"` borrowed) and outputs (`type = \"Name\"`) use. Each generates `NamePrimitive<B>` (backend level) and `Name<D>` (Tensor level).",
            "type": "array",
            "items": { "$ref": "#/definitions/type" }
        }),
        ("type", "name") => json!({
            "description": "The type's name: UpperCamelCase ASCII, not a name of Rust's prelude, not B, C or F, unique among declared types. `NamePrimitive` is generated too.",
            "type": "string", "pattern": TYPE_NAME
        }),
        ("type", "doc") => {
            json!({ "description": "Documentation of the generated types.", "type": "string" })
        }
        ("type", "fields") => json!({
            "description": "A struct: its fields, in order, each with a `name`.",
            "type": "array", "minItems": 1,
            "items": { "$ref": "#/definitions/field" }
        }),
        ("type", "variants") => json!({
            "description": "An enum: its variants (two or more), in order.",
            "type": "array", "minItems": 2,
            "items": { "$ref": "#/definitions/variant" }
        }),
        ("variant", "name") => json!({
            "description": "The variant's name: UpperCamelCase ASCII, unique within the enum.",
            "type": "string", "pattern": TYPE_NAME
        }),
        ("variant", "doc") => {
            json!({ "description": "Documentation of the variant.", "type": "string" })
        }
        ("variant", "fields") => json!({
            "description": "The variant's fields: all named (a struct variant) or none (a tuple variant). Absent: a unit variant, which holds no tensor (routing falls through it like an absent Option).",
            "type": "array", "minItems": 1,
            "items": { "$ref": "#/definitions/field" }
        }),
        ("field", "name") => json!({
            "description": "The field's name: snake_case ASCII, not a keyword, not starting with `__`, unique within its struct or variant. Required in a struct, absent in a tuple variant.",
            "type": "string", "pattern": FIELD_NAME
        }),
        ("field", "doc") => {
            json!({ "description": "Documentation of the field.", "type": "string" })
        }
        ("field", "tensor") => {
            json!({ "description": "Tensor kind: the field is a tensor.", "enum": kinds() })
        }
        ("field", "type") => json!({
            "description": "A plain Rust type (owned; it must implement Clone and Debug), or another declared type's name (by value, not inside another type).",
            "type": "string"
        }),
        ("field", "dims") => json!({
            "description": "Rank of a tensor field at the Tensor<D> level: an UPPER_CASE const-generic name (a generic parameter of the generated `Name<D>`) or a number.",
            "oneOf": [
                { "type": "string", "pattern": RANK_NAME },
                { "type": "integer", "minimum": 1, "maximum": 16 }
            ]
        }),
        ("field", "shape") => json!({
            "description": "A tensor field of a struct (not of an enum variant), in an op's output: its shape, declared before the kernel runs (what the lazy Fusion implementation needs), as an output's `shape`: an input's name or a function path.",
            "type": "string",
            "anyOf": [
                { "pattern": INPUT_NAME },
                { "pattern": "::" }
            ]
        }),
        ("field", "dtype") => json!({
            "description": "A tensor field of a struct (not of an enum variant), in an op's output: its dtype, declared before the kernel runs, as an output's `dtype`: an input's name, \"default\", or a function path.",
            "type": "string",
            "anyOf": [
                { "const": "default" },
                { "pattern": INPUT_NAME },
                { "pattern": "::" }
            ]
        }),
        ("field", "container") => json!({
            "description": "A tensor field as Option<tensor> or Vec<tensor>.",
            "enum": ["option", "vec"]
        }),
        ("routing", "trait") => json!({
            "description": "Name of the generated extension trait that every concrete backend implements.",
            "type": "string", "pattern": TRAIT_NAME
        }),
        ("routing", "autodiff_trait") => json!({
            "description": "Name of the trait with the hand-written Autodiff<B, C> kernels: of the differentiable ops with `backward = \"hand-written\"`, and of those that declare no `backward` and have no `composition` (or are async) (default: `trait` + \"Autodiff\"). Generated only when such an op exists.",
            "type": "string", "pattern": TRAIT_NAME
        }),
        ("routing", "backward_bounds") => json!({
            "description": "Full paths of extra traits the backend of every generated Autodiff<B, C> implementation must implement: what the free functions named by function-form `backward` keys need (a trait-method path adds its trait by itself), e.g. \"crate::kernels::MyBackwardKernels\".",
            "type": "array",
            "items": { "type": "string", "pattern": "::" }
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
            "description": "What a tracked float input does: run the Autodiff<B, C> implementation (differentiable: generated from `backward`, from `composite`, or from `composition` run on Autodiff<B, C>; else, or with `backward = \"hand-written\"`, written by hand), run detached (detach), or fail (reject, the default).",
            "enum": Policy::ALL.iter().map(|p| p.key()).collect::<Vec<_>>()
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
        ("op", "async") => json!({
            "description": "true: an async op. Its trait method returns `impl Future<Output = T> + Send` (kernels may be `async fn`), its composition is an async fn generic over B: Backend, and its routed functions return futures; each call is routed (planned, shape-checked, inputs unwrapped) at the call, and the future borrows nothing from the caller. Not with `backward` or `composite`; routed to Cube it needs a `composition`; plain inputs must be owned types.",
            "type": "boolean"
        }),
        ("op", "fusion") => json!({
            "description": "How the op runs on Fusion<B> (what Cube is when burn-cubecl's `fusion` feature is on). kernel (the default when every output is a tensor with `shape` and `dtype` declared): one deferred operation around the op's Cube kernel. composition (the default without output metadata; needs a `composition`): the op's composition on Fusion<B>, which Burn's fuser fuses with its neighbours; for element-wise ops that beats their own kernel on a GPU. An op with neither metadata nor a composition runs its kernel eagerly on Fusion<B> (a build warning). Only for an op routed to Cube that is not composite.",
            "enum": FUSION_VALUES
        }),
        ("op", "dtypes") => json!({
            "description": "The float dtypes the op's kernels take. A call with a float input of another dtype runs what `other_dtypes` says. Absent: the kernels take every dtype. Only for an op with a float tensor input that is not composite or async.",
            "type": "array",
            "items": { "enum": crate::ir::FloatDtype::ALL.iter().map(|(name, _)| *name).collect::<Vec<_>>() },
            "minItems": 1,
            "uniqueItems": true
        }),
        ("op", "other_dtypes") => json!({
            "description": "What a call with a float input of a dtype `dtypes` does not list runs. error (the default): nothing; the call fails with a routing error (RouteError::UnsupportedDtype) naming the op, the input and the dtype. composition (needs a `composition`): the op's composition on the inputs' backend, and on Autodiff<B, C> for a differentiable op under an enabled autodiff context (gradients from the composition, not from `backward`). Only with `dtypes`.",
            "enum": OTHER_DTYPES_VALUES
        }),
        ("op", "remote") => json!({
            "description": "How the op runs on Remote. kernel (the default when every output is a tensor with `shape` and `dtype` declared): one custom operation, which the server runs with the op's kernel on its backend (the server registers the crate's ops with the generated `serve_remote_ops`); its plain arguments travel exactly as numbers (up to 64 bits), bool, char, and Option, Vec and tuples of them. composition (the default without output metadata): the op's `composition`, each primitive an operation on the server.",
            "enum": REMOTE_VALUES
        }),
        ("op", "backward") => json!({
            "description": "The op's backward pass, from which its Autodiff<B, C> implementation is generated: a table of gradient formulas keyed by float input, or the path of a Rust function; or \"hand-written\". Formulas and functions only for a differentiable op that is not composite, returns no declared type, takes declared types only as structs by value, has exactly one float tensor output (other outputs int, bool or plain) and no `vec` float input. Without `backward`, a differentiable op with a `composition` runs it on Autodiff<B, C> (Burn's autodiff of its primitives gives the gradients).",
            "oneOf": [
                {
                    "description": "Hand-written: the op's Autodiff<B, C> kernel is a method of the companion `...Autodiff` trait, implemented by hand (instead of its composition run on Autodiff<B, C>). Not with `save`, `checkpoint` or `no_gradient`.",
                    "const": HAND_WRITTEN
                },
                {
                    "description": "Function form: the full path of a function generic over the backend (`crate::m::f`, called `crate::m::f::<B>(...)`), or of a trait method (`crate::m::MyTrait::f`, called `<B as crate::m::MyTrait>::f(...)`; the trait joins the backend's bounds). It receives the `save` values (default: every input but the device, in order: float inputs as FloatTensor<B>, Option for optional ones; int/bool tensors; plain values), then `grad: FloatTensor<B>` (the incoming gradient of the float output), then, with more than one float input, `tracked: [bool; N]`; it returns the gradient FloatTensor<B> (one float input) or [Option<FloatTensor<B>>; N]. Gradients are summed back to each input's shape.",
                    "type": "string",
                    "pattern": "::"
                },
                {
                    "description": "Formula form: one formula per single or optional float input (all of them), \"none\" for an input that gets no gradient. A declared struct input taken by value gets one formula per float field, keyed by its path: `\"p.scale\" = \"grad * x\"`, TOML's dotted key `p.scale = \"grad * x\"`, or a table `p = { scale = \"grad * x\" }`.",
                    "$ref": "#/definitions/formulas"
                }
            ]
        }),
        ("op", "save") => json!({
            "description": "What the backward pass keeps from the forward pass, in order: input names, `output` (the float output) and `output.N` (element N, from 0, of a tuple output; `output.N.M` in a nested one). With formulas: inferred, and when given it must list exactly what they read. With a function: what the function receives, in this order (default: every input but the device).",
            "type": "array",
            "items": { "type": "string", "pattern": SAVED_VALUE },
            "uniqueItems": true
        }),
        ("op", "checkpoint") => json!({
            "description": "keep (the default): the backward pass keeps what it reads. recompute: a memory-bound op; under gradient checkpointing its output is recomputed instead of kept, and its backward pass gets its inputs from the checkpointer (every non-float argument must then be an owned type).",
            "enum": CHECKPOINT_VALUES
        }),
        ("op", "no_gradient") => json!({
            "description": "With a backward function: the float inputs it does not differentiate (they get no gradient even when tracked, and the function is told they are untracked), by name or by field path (`p.scale`). With formulas, write `x = \"none\"` instead.",
            "type": "array",
            "items": { "type": "string", "pattern": INPUT_PATH },
            "uniqueItems": true
        }),
        ("op", "check") => json!({
            "description": "How the generated op check (Builder::op_check) calls the op.",
            "$ref": "#/definitions/check"
        }),
        ("check", "shapes") => json!({
            "description": "Input name (or a declared input's member path, \"p.scale\") -> the shape the check gives that tensor, e.g. `[2, 3]`; for a `vec` input, an array of shapes (one per element). Default: sizes 2, 3, 4, ... adjusted to the shape contracts; two elements for a `vec` input.",
            "type": "object",
            "propertyNames": { "pattern": CHECK_KEY },
            "additionalProperties": {
                "oneOf": [
                    { "$ref": "#/definitions/check_shape" },
                    { "type": "array", "minItems": 1, "items": { "$ref": "#/definitions/check_shape" } }
                ]
            }
        }),
        ("check", "ranges") => json!({
            "description": "Input name or member path -> `[lo, hi]`: the values of that float or int tensor are drawn uniformly in [lo, hi). Default: [-2, 2) for floats, [0, 4) for ints.",
            "type": "object",
            "propertyNames": { "pattern": CHECK_KEY },
            "additionalProperties": {
                "type": "array",
                "items": { "type": "number" },
                "minItems": 2,
                "maxItems": 2
            }
        }),
        ("check", "args") => json!({
            "description": "Plain input name or member path -> a Rust expression for its value, e.g. \"0.5\" or \"vec![1, 2]\" (default: 0.5 for floats, 1 for integers, false for bool, Default::default() otherwise).",
            "type": "object",
            "propertyNames": { "pattern": CHECK_KEY },
            "additionalProperties": { "type": "string", "minLength": 1 }
        }),
        ("check", "gradients") => json!({
            "description": "Whether the gradients of a differentiable op are checked against central finite differences (default true; false for a straight-through estimator, say).",
            "type": "boolean"
        }),
        ("check", "tolerance") => json!({
            "description": "Relative tolerance of the gradient check: |gradient - finite difference| <= tolerance * (1 + |finite difference|). Default 1e-2.",
            "type": "number",
            "exclusiveMinimum": 0
        }),
        ("check", "composition") => json!({
            "description": "Whether the kernels are compared with the op's `composition` (default: true when the op has one).",
            "type": "boolean"
        }),
        ("input", "name") => {
            json!({ "description": "Parameter name: snake_case ASCII, not a keyword, not starting with `__`.", "type": "string", "pattern": INPUT_NAME })
        }
        ("input" | "output", "tensor") => json!({ "description": "Tensor kind.", "enum": kinds() }),
        ("input", "type") => json!({
            "description": "A plain Rust type, passed through unchanged; or a declared type's name (`[[type]]`), `&Name` to borrow it.",
            "type": "string"
        }),
        ("output", "type") => json!({
            "description": "A plain Rust type, passed through unchanged; or a declared type's name (`[[type]]`).",
            "type": "string"
        }),
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
    let mut field = table(
        "field",
        FIELD_KEYS,
        &[],
        "One field of a declared type or variant: a tensor, a plain Rust value, or another declared type.",
    );
    field["allOf"] = json!([exactly_one(&["tensor", "type"])]);
    let mut declared = table(
        "type",
        TYPE_KEYS,
        &["name"],
        "A declared type: a struct (`fields`) or an enum (`variants`).",
    );
    declared["allOf"] = json!([exactly_one(&["fields", "variants"])]);
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
        "routing": table("routing", ROUTING_KEYS, &["trait", "backends"], "The generated trait and the default backends."),
        "backend": {
            "oneOf": [
                { "description": "A backend, always compiled.", "enum": backend_names() },
                table("backend", BACKEND_KEYS, &["name"], "A backend and the cfg that compiles its routing in.")
            ]
        },
        "op": table("op", OP_KEYS, &["name", "inputs"], "One routed op."),
        "check": table("check", CHECK_KEYS, &[], "The op's entry in the generated op check: the inputs it is called with and what is compared."),
        "check_shape": {
            "description": "A tensor's shape: its sizes, one per dimension.",
            "type": "array",
            "minItems": 1,
            "items": { "type": "integer", "minimum": 0 }
        },
        "input": input,
        "type": declared,
        "variant": table("variant", VARIANT_KEYS, &["name"], "One variant of a declared enum: a unit, tuple or struct variant."),
        "field": field,
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
mod tests;

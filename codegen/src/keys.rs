//! The manifest's keys, each declared once: its table, name, whether it is required, its value
//! and its doc line.
//!
//! The parser takes its known keys from here and reads each key as its [`Value`] says (its
//! accessors check the key and its [`Reads`] against this table); the JSON Schema (`schema`, a
//! feature) its properties, descriptions and value sets, the manifest reference its key tables
//! ([`reference_table`], compared by a test), the error reference and the tests their lists of
//! known keys, and the random-manifest generators the keys they must cover. Adding a key is a
//! row here, the rule that checks it, the emitter that reads it and a UI fixture.

use std::collections::BTreeSet;

use burn_route_core::{BackendId, FloatDtype, Policy, ShapeRule, TensorKind};
use toml::de::{DeTable, DeValue};

/// A table of the manifest: where a key may stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Table {
    /// The top level of the manifest.
    Top,
    /// `[routing]`.
    Routing,
    /// A backend given as a table in a `backends` list.
    Backend,
    /// An `[[op]]` entry.
    Op,
    /// An op's `[op.check]` table.
    Check,
    /// An entry of an op's `inputs`.
    Input,
    /// An input's `shape` table: the shape contracts, of which exactly one is given.
    Shape,
    /// An op's `output` (a table, or each table of a tuple).
    Output,
    /// A `[[type]]` entry.
    Type,
    /// An entry of an enum type's `variants`.
    Variant,
    /// An entry of a type's or a variant's `fields`.
    Field,
}

/// Whether a table needs a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Always.
    Yes,
    /// No.
    No,
    /// Exactly one of these keys (this one among them).
    OneOf(&'static [&'static str]),
}

/// What a key's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    /// Documentation text (Markdown).
    Doc,
    /// A cfg predicate, what goes inside `#[cfg(...)]`.
    Cfg,
    /// A name matching a pattern (a regular expression, for the schema).
    Name(&'static str),
    /// The full path of a Rust item (two segments or more).
    Path,
    /// A Rust type, or a declared type's name.
    RustType,
    /// One of these strings.
    OneOf(&'static [&'static str]),
    /// `true` or `false`.
    Bool,
    /// `true` only.
    True,
    /// A number above zero.
    PositiveNumber,
    /// A rank: an `UPPER_CASE` const-generic name or a number from 1 to 16.
    Rank,
    /// A list of distinct strings, each one of these (at least one).
    SetOf(&'static [&'static str]),
    /// A list of distinct strings matching a pattern.
    ListOf(&'static str),
    /// A list of full trait paths.
    Paths,
    /// A non-empty list of backends: selectors, or [`Table::Backend`] tables.
    Backends,
    /// A table of its own.
    Table(Table),
    /// An array of tables, at least this many.
    Tables(Table, u8),
    /// An [`Table::Output`] table, or an array of outputs (a tuple).
    Output,
    /// Gradient formulas keyed by input, a function path, or `"hand-written"`.
    Backward,
    /// An output's (or a struct field's) shape: an input's name or a function path.
    Shape,
    /// An output's (or a struct field's) dtype: an input's name, `"default"` or a function path.
    Dtype,
    /// An `[op.check]` table keyed by input name or member path.
    CheckMap(CheckMap),
}

/// The values of an `[op.check]` table keyed by input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckMap {
    /// `[sizes]`, or `[[sizes], ...]` for a `vec` input.
    Shapes,
    /// `[lo, hi]`.
    Ranges,
    /// A Rust expression.
    Args,
}

/// One manifest key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    /// Where the key stands.
    pub table: Table,
    /// The key as the manifest writes it.
    pub name: &'static str,
    /// Whether the table needs it.
    pub need: Need,
    /// Its value.
    pub value: Value,
    /// What it does, in one line: the schema's description and the manifest reference's cell.
    pub doc: &'static str,
}

/// `autodiff`'s default.
pub const AUTODIFF_DEFAULT: Policy = Policy::Reject;
/// The values of `fusion`.
pub const FUSION: &[&str] = &["kernel", "composition"];
/// The values of `remote`.
pub const REMOTE: &[&str] = &["kernel", "composition"];
/// The values of `other_dtypes`.
pub const OTHER_DTYPES: &[&str] = &["error", "composition"];
/// The values of `checkpoint`.
pub const CHECKPOINT: &[&str] = &["keep", "recompute"];
/// The values of `container`.
pub const CONTAINER: &[&str] = burn_route_core::Container::KEYS;
/// The float dtypes `dtypes` may list.
pub const FLOAT_DTYPES: &[&str] = FloatDtype::KEYS;
/// The `backward` value of an op whose `Autodiff<B, C>` kernel is written by hand.
pub const HAND_WRITTEN: &str = "hand-written";

/// The names the generator's `names` module accepts, as patterns (keywords aside): `UpperCamelCase` traits,
/// `snake_case` ops and inputs (ops do not start with `_`), `UPPER_CASE` ranks; no `__`.
pub const TRAIT_NAME: &str = "^[A-Z][A-Za-z0-9]*$";
/// An op's name.
pub const OP_NAME: &str = "^[a-z][a-z0-9]*(_[a-z0-9]+)*_?$";
/// An input's (or a field's) name.
pub const INPUT_NAME: &str = "^_?[a-z][a-z0-9]*(_[a-z0-9]+)*_?$";
/// A rank generic's name.
pub const RANK_NAME: &str = "^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*_?$";
/// A declared type's or variant's name.
pub const TYPE_NAME: &str = "^[A-Z][A-Za-z0-9]*$";
/// A float input, or the path of a field of a declared struct input (`p.scale`): a key of
/// `backward`'s formula table and an entry of `no_gradient`.
pub const INPUT_PATH: &str =
    "^_?[a-z][a-z0-9]*(_[a-z0-9]+)*_?(\\._?[a-z][a-z0-9]*(_[a-z0-9]+)*_?)*$";
/// An entry of `save`: an input's name or path, `output`, or `output.N` (`output.N.M`).
pub const SAVED_VALUE: &str =
    "^(output(\\.[0-9]+)*|_?[a-z][a-z0-9]*(_[a-z0-9]+)*_?(\\._?[a-z][a-z0-9]*(_[a-z0-9]+)*_?)*)$";
/// An `[op.check]` key: an input name, or a path into a declared-type input (`p.scale`,
/// `fill.From.0`).
pub const CHECK_KEY: &str =
    "^_?[a-z][a-z0-9]*(_[a-z0-9]+)*_?(\\.([A-Za-z_][A-Za-z0-9_]*|[0-9]+))*$";

const fn key(table: Table, name: &'static str, need: Need, value: Value, doc: &'static str) -> Key {
    Key {
        table,
        name,
        need,
        value,
        doc,
    }
}

use Need::{No, Yes};

#[rustfmt::skip] // One row per key, as a table reads.
const TOP: &[Key] = &[
    key(Table::Top, "routing", Yes, Value::Table(Table::Routing), "The generated trait and the backends ops are routed to."),
    key(Table::Top, "op", No, Value::Tables(Table::Op, 0), "The routed ops, in order."),
    key(Table::Top, "type", No, Value::Tables(Table::Type, 0), "Declared types: structs and enums holding tensors, for op inputs and outputs."),
];

#[rustfmt::skip] // One row per key, as a table reads.
const ROUTING: &[Key] = &[
    key(Table::Routing, "trait", Yes, Value::Name(TRAIT_NAME), "Name of the generated extension trait that every routed backend implements."),
    key(Table::Routing, "autodiff_trait", No, Value::Name(TRAIT_NAME), "Name of the trait of hand-written `Autodiff<B, C>` kernels (default: `trait` + `Autodiff`)."),
    key(Table::Routing, "backends", Yes, Value::Backends, "The backends ops are routed to, each with the cfg that compiles its routing in."),
    key(Table::Routing, "autodiff_cfg", No, Value::Cfg, "cfg predicate that compiles autodiff routing in (combined with `burn_route_autodiff`)."),
    key(Table::Routing, "backward_bounds", No, Value::Paths, "Traits the backend must implement in the `Autodiff<B, C>` implementation of every op with a `backward`."),
];

#[rustfmt::skip] // One row per key, as a table reads.
const BACKEND: &[Key] = &[
    key(Table::Backend, "name", Yes, Value::OneOf(BackendId::KEYS), "The backend selector."),
    key(Table::Backend, "cfg", No, Value::Cfg, "cfg predicate that compiles this backend's routing in (combined with the generator's own)."),
];

#[rustfmt::skip] // One row per key, as a table reads.
const OP: &[Key] = &[
    key(Table::Op, "name", Yes, Value::Name(OP_NAME), "The op's name: the trait method and the functions `name` and `try_name`."),
    key(Table::Op, "doc", No, Value::Doc, "Documentation of every generated item for the op, written once."),
    key(Table::Op, "deprecated", No, Value::Doc, "Marks the op's functions `#[deprecated]`, with this note (what to use instead)."),
    key(Table::Op, "autodiff", No, Value::OneOf(Policy::KEYS), "What a tracked float input does (default `reject`)."),
    key(Table::Op, "inputs", Yes, Value::Tables(Table::Input, 0), "The op's parameters, in order."),
    key(Table::Op, "output", No, Value::Output, "What the op returns: a tensor, a plain or declared type, or a tuple (absent: `()`)."),
    key(Table::Op, "backends", No, Value::Backends, "This op's own backends, replacing `routing.backends`."),
    key(Table::Op, "composite", No, Value::Path, "A function generic over `B: Backend` that is the op on every backend, with no kernel of its own."),
    key(Table::Op, "composition", No, Value::Path, "A function generic over `B: Backend` for backends without a kernel of the op, and for Burn's fusion."),
    key(Table::Op, "async", No, Value::Bool, "`true`: the op and its routed functions return futures."),
    key(Table::Op, "fusion", No, Value::OneOf(FUSION), "How the op and its backward kernel run on `Fusion<B>`: one deferred kernel, or compositions."),
    key(Table::Op, "dtypes", No, Value::SetOf(FLOAT_DTYPES), "The float dtypes the op's kernels take (absent: all)."),
    key(Table::Op, "other_dtypes", No, Value::OneOf(OTHER_DTYPES), "What a call in a dtype `dtypes` does not list runs (default `error`)."),
    key(Table::Op, "remote", No, Value::OneOf(REMOTE), "How the op and its backward kernel run on `Remote`: one operation on the server, or compositions."),
    key(Table::Op, "backward", No, Value::Backward, "The backward pass: gradient formulas, a function's path, or `\"hand-written\"`."),
    key(Table::Op, "save", No, Value::ListOf(SAVED_VALUE), "What the backward pass keeps from the forward pass, in order."),
    key(Table::Op, "checkpoint", No, Value::OneOf(CHECKPOINT), "Under gradient checkpointing: keep what the backward pass reads, or recompute it."),
    key(Table::Op, "no_gradient", No, Value::ListOf(INPUT_PATH), "With a backward function: the float inputs it does not differentiate."),
    key(Table::Op, "check", No, Value::Table(Table::Check), "How the generated op check calls the op."),
];

#[rustfmt::skip] // One row per key, as a table reads.
const CHECK: &[Key] = &[
    key(Table::Check, "shapes", No, Value::CheckMap(CheckMap::Shapes), "The shapes the check gives tensor inputs."),
    key(Table::Check, "ranges", No, Value::CheckMap(CheckMap::Ranges), "The range `[lo, hi)` the values of a float or int input are drawn from."),
    key(Table::Check, "args", No, Value::CheckMap(CheckMap::Args), "Plain inputs: a Rust expression for the value."),
    key(Table::Check, "gradients", No, Value::Bool, "Whether gradients are checked against finite differences (default `true`)."),
    key(Table::Check, "tolerance", No, Value::PositiveNumber, "Relative tolerance of the gradient check (default `1e-2`)."),
    key(Table::Check, "value_tolerance", No, Value::PositiveNumber, "Relative tolerance of float values compared across backends and with the `composition` (default `1e-4`)."),
    key(Table::Check, "composition", No, Value::Bool, "Whether the kernels are compared with the op's `composition` (default `true`)."),
];

const ARG_KINDS: &[&str] = &["tensor", "type", "device"];
const MEMBER_KINDS: &[&str] = &["tensor", "type"];

#[rustfmt::skip] // One row per key, as a table reads.
const INPUT: &[Key] = &[
    key(Table::Input, "name", Yes, Value::Name(INPUT_NAME), "Parameter name, unique within the op."),
    key(Table::Input, "tensor", Need::OneOf(ARG_KINDS), Value::OneOf(TensorKind::KEYS), "A tensor of this kind."),
    key(Table::Input, "type", Need::OneOf(ARG_KINDS), Value::RustType, "A plain Rust type, or a declared type's name (`&Name` borrowed)."),
    key(Table::Input, "device", Need::OneOf(ARG_KINDS), Value::True, "The device (`&Device<B>`); it routes an op without tensor inputs."),
    key(Table::Input, "borrowed", No, Value::Bool, "Pass the tensor by reference."),
    key(Table::Input, "dims", No, Value::Rank, "Rank at the `Tensor<D>` level (default `\"D\"`)."),
    key(Table::Input, "container", No, Value::OneOf(CONTAINER), "`Option<tensor>` or `Vec<tensor>`."),
    key(Table::Input, "shape", No, Value::Table(Table::Shape), "The tensor's shape contract, checked before any kernel runs."),
];

const SHAPE: &[Key] = &{
    let mut keys = [key(Table::Shape, "", No, Value::Name(INPUT_NAME), ""); ShapeRule::ALL.len()];
    let mut i = 0;
    while i < keys.len() {
        keys[i].name = ShapeRule::ALL[i].key();
        keys[i].doc = match ShapeRule::ALL[i] {
            ShapeRule::SameAs => "Exactly the named input's shape.",
            ShapeRule::BroadcastTo => "The named input's rank, each dimension equal to its or 1.",
            ShapeRule::BroadcastWith => {
                "The named input's rank, each pair of dimensions equal or one of them 1."
            }
            ShapeRule::LastDimOf => "`[n]`, `n` the named input's last dimension.",
            ShapeRule::LeadingDimsOf => "The named input's shape without its last dimension.",
        };
        i += 1;
    }
    keys
};

#[rustfmt::skip] // One row per key, as a table reads.
const OUTPUT: &[Key] = &[
    key(Table::Output, "tensor", Need::OneOf(MEMBER_KINDS), Value::OneOf(TensorKind::KEYS), "A tensor of this kind."),
    key(Table::Output, "type", Need::OneOf(MEMBER_KINDS), Value::RustType, "A plain Rust type, or a declared type's name."),
    key(Table::Output, "dims", No, Value::Rank, "Rank at the `Tensor<D>` level (default `\"D\"`)."),
    key(Table::Output, "container", No, Value::OneOf(CONTAINER), "`Option<tensor>` or `Vec<tensor>`."),
    key(Table::Output, "shape", No, Value::Shape, "The output's shape, known before its kernel runs."),
    key(Table::Output, "dtype", No, Value::Dtype, "The output's dtype, known before its kernel runs (with `shape`)."),
];

#[rustfmt::skip] // One row per key, as a table reads.
const TYPE: &[Key] = &[
    key(Table::Type, "name", Yes, Value::Name(TYPE_NAME), "The type's name; `NamePrimitive` is generated too."),
    key(Table::Type, "doc", No, Value::Doc, "Documentation of both generated forms."),
    key(Table::Type, "fields", Need::OneOf(&["fields", "variants"]), Value::Tables(Table::Field, 1), "A struct: its fields, in order."),
    key(Table::Type, "variants", Need::OneOf(&["fields", "variants"]), Value::Tables(Table::Variant, 2), "An enum: its variants (two or more), in order."),
];

#[rustfmt::skip] // One row per key, as a table reads.
const VARIANT: &[Key] = &[
    key(Table::Variant, "name", Yes, Value::Name(TYPE_NAME), "The variant's name, unique within the enum."),
    key(Table::Variant, "doc", No, Value::Doc, "Documentation of the variant."),
    key(Table::Variant, "fields", No, Value::Tables(Table::Field, 1), "Its fields: all named (a struct variant) or none (a tuple variant)."),
];

#[rustfmt::skip] // One row per key, as a table reads.
const FIELD: &[Key] = &[
    key(Table::Field, "name", No, Value::Name(INPUT_NAME), "The field's name: required in a struct, absent in a tuple variant."),
    key(Table::Field, "doc", No, Value::Doc, "Documentation of the field."),
    key(Table::Field, "tensor", Need::OneOf(MEMBER_KINDS), Value::OneOf(TensorKind::KEYS), "A tensor of this kind."),
    key(Table::Field, "type", Need::OneOf(MEMBER_KINDS), Value::RustType, "A plain Rust type (owned), or another declared type's name."),
    key(Table::Field, "dims", No, Value::Rank, "With `tensor`: its rank at the `Tensor<D>` level."),
    key(Table::Field, "container", No, Value::OneOf(CONTAINER), "With `tensor`: `Option<tensor>` or `Vec<tensor>`."),
    key(Table::Field, "shape", No, Value::Shape, "With `tensor`, in a struct an op returns: its shape, as an output declares it."),
    key(Table::Field, "dtype", No, Value::Dtype, "With `tensor`, in a struct an op returns: its dtype, as an output declares it."),
];

impl Table {
    /// Every table, in the order the references list them.
    pub const ALL: &'static [Table] = &[
        Table::Top,
        Table::Routing,
        Table::Backend,
        Table::Op,
        Table::Check,
        Table::Input,
        Table::Shape,
        Table::Output,
        Table::Type,
        Table::Variant,
        Table::Field,
    ];

    /// The table's keys, in the order the references list them.
    pub const fn keys(self) -> &'static [Key] {
        match self {
            Table::Top => TOP,
            Table::Routing => ROUTING,
            Table::Backend => BACKEND,
            Table::Op => OP,
            Table::Check => CHECK,
            Table::Input => INPUT,
            Table::Shape => SHAPE,
            Table::Output => OUTPUT,
            Table::Type => TYPE,
            Table::Variant => VARIANT,
            Table::Field => FIELD,
        }
    }

    /// The names of the table's keys.
    pub fn names(self) -> Vec<&'static str> {
        self.keys().iter().map(|k| k.name).collect()
    }

    /// The key `name` of this table.
    ///
    /// # Panics
    ///
    /// When the table has no such key: a typo in the generator's own code.
    pub fn key(self, name: &str) -> &'static Key {
        self.keys()
            .iter()
            .find(|k| k.name == name)
            .unwrap_or_else(|| panic!("{self:?} has no key `{name}`"))
    }

    /// The table's identifier: its JSON Schema definition and its manifest reference marker.
    pub const fn id(self) -> &'static str {
        match self {
            Table::Top => "top",
            Table::Routing => "routing",
            Table::Backend => "backend",
            Table::Op => "op",
            Table::Check => "check",
            Table::Input => "input",
            Table::Shape => "shape",
            Table::Output => "output",
            Table::Type => "type",
            Table::Variant => "variant",
            Table::Field => "field",
        }
    }

    /// How the error reference and messages name the table.
    pub const fn title(self) -> &'static str {
        match self {
            Table::Top => "top level",
            Table::Routing => "`[routing]`",
            Table::Backend => "backend tables",
            Table::Op => "`[[op]]`",
            Table::Check => "`[op.check]`",
            Table::Input => "inputs",
            Table::Shape => "an input's `shape` table",
            Table::Output => "outputs",
            Table::Type => "`[[type]]`",
            Table::Variant => "variants",
            Table::Field => "fields",
        }
    }

    /// The keys of a table nested in this one, by the key that holds it.
    fn nested(self, name: &str) -> Option<Table> {
        match self.keys().iter().find(|k| k.name == name)?.value {
            Value::Table(t) | Value::Tables(t, _) => Some(t),
            Value::Output => Some(Table::Output),
            Value::Backends => Some(Table::Backend),
            _ => None,
        }
    }
}

impl Key {
    /// The values a key allows when it lists them (`autodiff`, `fusion`, `dtypes`' entries, ...),
    /// else none.
    pub const fn values(&self) -> &'static [&'static str] {
        match self.value {
            Value::OneOf(values) | Value::SetOf(values) => values,
            _ => &[],
        }
    }
}

/// Every key, table by table.
pub fn all() -> impl Iterator<Item = &'static Key> {
    Table::ALL.iter().flat_map(|t| t.keys())
}

/// The TOML value the parser reads for a key, by its [`Value`]: the parser's accessors check
/// each key they read against it, so a key is read as the table declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reads {
    /// A string.
    String,
    /// `true` or `false`.
    Bool,
    /// An integer or a float.
    Number,
    /// An array of strings.
    Strings,
    /// A table keyed by input (`[op.check]`'s maps).
    Map,
    /// A form of its own, read by a function of the parser for that key (tables, arrays of
    /// tables, backends, outputs, `backward`, ranks).
    Own,
}

impl Value {
    /// How the parser reads the value.
    pub const fn reads(self) -> Reads {
        match self {
            Value::Doc
            | Value::Cfg
            | Value::Name(_)
            | Value::Path
            | Value::RustType
            | Value::OneOf(_)
            | Value::Shape
            | Value::Dtype => Reads::String,
            Value::Bool | Value::True => Reads::Bool,
            Value::PositiveNumber => Reads::Number,
            Value::SetOf(_) | Value::ListOf(_) | Value::Paths => Reads::Strings,
            Value::CheckMap(_) => Reads::Map,
            Value::Rank
            | Value::Backends
            | Value::Table(_)
            | Value::Tables(..)
            | Value::Output
            | Value::Backward => Reads::Own,
        }
    }

    /// The value in words, as the manifest reference's tables give it.
    pub fn words(self) -> String {
        fn list(values: &[&str]) -> String {
            let quoted: Vec<String> = values.iter().map(|v| format!("`\"{v}\"`")).collect();
            match quoted.split_last() {
                Some((last, [])) => last.clone(),
                Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                None => String::new(),
            }
        }
        match self {
            Value::Doc => "text".into(),
            Value::Cfg => "cfg predicate".into(),
            Value::Name(_) => "name".into(),
            Value::Path => "Rust path".into(),
            Value::RustType => "Rust type or declared type".into(),
            Value::OneOf(values) => list(values),
            Value::Bool => "`true` or `false`".into(),
            Value::True => "`true`".into(),
            Value::PositiveNumber => "number > 0".into(),
            Value::Rank => "rank name or 1-16".into(),
            Value::SetOf(values) => format!("list of {}", list(values)),
            Value::ListOf(_) => "list of names".into(),
            Value::Paths => "list of trait paths".into(),
            Value::Backends => "list of backends".into(),
            Value::Table(_) => "table".into(),
            Value::Tables(..) => "array of tables".into(),
            Value::Output => "table or array".into(),
            Value::Backward => "formula table or path".into(),
            Value::Shape => "input name or function path".into(),
            Value::Dtype => "input name, `\"default\"` or function path".into(),
            Value::CheckMap(CheckMap::Shapes) => "input → sizes".into(),
            Value::CheckMap(CheckMap::Ranges) => "input → `[lo, hi]`".into(),
            Value::CheckMap(CheckMap::Args) => "input → Rust expression".into(),
        }
    }
}

/// The manifest reference's table of `table`'s keys (Markdown): key, required, value, meaning.
pub fn reference_table(table: Table) -> String {
    let mut out = String::from("| key | required | value | meaning |\n|---|---|---|---|\n");
    for k in table.keys() {
        let need = match k.need {
            Need::Yes => "yes".to_owned(),
            Need::No => "no".to_owned(),
            Need::OneOf(group) => {
                let others: Vec<String> = group.iter().map(|g| format!("`{g}`")).collect();
                format!("one of {}", others.join(", "))
            }
        };
        out.push_str(&format!(
            "| `{}` | {need} | {} | {} |\n",
            k.name,
            k.value.words(),
            k.doc
        ));
    }
    out
}

/// Every `(table, key)` a manifest's text uses, found by walking its tables as the parser
/// does (as far as the TOML parses); what the random-manifest generators are checked against.
pub fn used_in(source: &str) -> BTreeSet<(Table, String)> {
    let (root, _) = DeTable::parse_recoverable(source);
    let mut used = BTreeSet::new();
    walk(Table::Top, root.get_ref(), &mut used);
    used
}

/// The keys of the key table that none of `sources` uses, as `table.key` (for the tests that
/// require a set of manifests to use every key).
pub fn unused_by<'a>(sources: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let used: BTreeSet<(Table, String)> = sources.into_iter().flat_map(used_in).collect();
    all()
        .filter(|k| !used.contains(&(k.table, k.name.to_owned())))
        .map(|k| format!("{}.{}", k.table.id(), k.name))
        .collect()
}

fn walk(table: Table, value: &DeTable<'_>, used: &mut BTreeSet<(Table, String)>) {
    for (name, item) in value {
        let name: &str = name.get_ref();
        used.insert((table, name.to_owned()));
        if let Some(inner) = table.nested(name) {
            visit(inner, item.get_ref(), used);
        }
    }
}

fn visit(table: Table, item: &DeValue<'_>, used: &mut BTreeSet<(Table, String)>) {
    match item {
        DeValue::Table(t) => walk(table, t, used),
        // Arrays of tables, and nested tuples of outputs.
        DeValue::Array(items) => {
            for item in items.iter() {
                visit(table, item.get_ref(), used);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique_in_their_table_and_documented_in_one_line() {
        for &table in Table::ALL {
            let mut names = table.names();
            names.sort_unstable();
            let before = names.len();
            names.dedup();
            assert_eq!(names.len(), before, "a key twice in {table:?}");
            for k in table.keys() {
                assert_eq!(k.table, table);
                assert!(
                    !k.doc.is_empty() && !k.doc.contains('\n') && k.doc.len() <= 110,
                    "{k:?}"
                );
                if let Need::OneOf(group) = k.need {
                    assert!(group.contains(&k.name), "{k:?}");
                }
            }
        }
    }

    #[test]
    fn a_walk_finds_keys_in_nested_tables() {
        let used = used_in(
            r#"[routing]
trait = "T"
backends = [{ name = "Cube", cfg = "x" }]
[[op]]
name = "a"
inputs = [{ name = "x", tensor = "float", shape = { same_as = "y" } }]
output = [{ tensor = "float" }, [{ type = "u8" }]]
check = { gradients = false }
[[type]]
name = "E"
variants = [{ name = "V", fields = [{ tensor = "int" }] }]
"#,
        );
        for (table, name) in [
            (Table::Backend, "cfg"),
            (Table::Shape, "same_as"),
            (Table::Output, "type"),
            (Table::Check, "gradients"),
            (Table::Variant, "fields"),
            (Table::Field, "tensor"),
        ] {
            assert!(used.contains(&(table, name.to_owned())), "{table:?}.{name}");
        }
        assert!(!used.contains(&(Table::Op, "cfg".to_owned())));
    }
}

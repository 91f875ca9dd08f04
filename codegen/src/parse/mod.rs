//! TOML text → [`Manifest`]: syntax, unknown keys, missing keys and value types.
//!
//! The walk never stops at the first problem: every table is checked and every problem becomes a
//! [`Diagnostic`] with the span of the key or value at fault.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeArray, DeTable, DeValue};

use crate::diag::{Diagnostic, Diagnostics, Stage, did_you_mean, page};
use crate::keys::{Need, Reads, Table};
mod args;
mod syntax;

use syntax::syntax_diagnostic;

use crate::model::{
    ArgSpec, BackendSpec, BackwardSpec, CheckSpec, Dims, InputSpec, Manifest, MemberSpec, MetaSpec,
    OpSpec, OutputSpec, Routing, ShapeSpec, Sp, TensorSpec, TypeSpec, VariantSpec,
};

/// The `backward` value of an op whose `Autodiff<B, C>` kernel is written by hand.
pub use crate::keys::HAND_WRITTEN;

/// The keys that say what an input is, of which an entry has exactly one (an output has no
/// `device`, the last).
const ARG_KINDS: &[&str] = &["tensor", "type", "device"];

/// Parses manifest text into the model (as complete as the text allows), pushing every problem
/// found on the way into `diags`; the model is only meaningful when it has none.
pub fn parse(source: &str, diags: &mut Diagnostics) -> Manifest {
    diags.enter(Stage::Parse);
    let (root, syntax) = DeTable::parse_recoverable(source);
    let mut p = Parser { diags };
    for err in syntax {
        let span = err.span().unwrap_or(0..0);
        p.diags.push(syntax_diagnostic(source, span, err.message()));
    }
    let root_span = root.span();
    let root = root.into_inner();
    p.unknown_keys(&root, "", Table::Top);
    let root = Keyed {
        toml: &root,
        of: Table::Top,
    };

    let routing = match root.own("routing") {
        Some(value) => p.routing(value),
        None => {
            p.diags.push(
                Diagnostic::new(0..0, "routing", "missing `[routing]` table")
                    .page(page::MISSING_ROUTING)
                    .help("add `[routing]` with `trait = \"MyOps\"` and `backends = [\"Flex\"]`"),
            );
            Routing {
                span: root_span,
                trait_name: None,
                autodiff_trait: None,
                backends: None,
                autodiff_cfg: None,
                backward_bounds: None,
            }
        }
    };

    let mut ops = Vec::new();
    if let Some(value) = root.own("op")
        && let Some((array, _)) = p.as_array(value, "op", "an array of `[[op]]` tables")
    {
        for (index, item) in array.iter().enumerate() {
            if let Some(op) = p.op(item, index) {
                ops.push(op);
            }
        }
    }

    let mut types = Vec::new();
    if let Some(value) = root.own("type")
        && let Some((array, _)) = p.as_array(value, "type", "an array of `[[type]]` tables")
    {
        for (index, item) in array.iter().enumerate() {
            if let Some(ty) = p.type_spec(item, index) {
                types.push(ty);
            }
        }
    }

    Manifest {
        routing,
        ops,
        types,
    }
}

struct Parser<'d> {
    diags: &'d mut Diagnostics,
}

/// A table of the manifest as the parser reads it: its TOML and which table of the key table
/// it is, so that every key the parser reads is one [`crate::keys`] declares there, read as the
/// value it declares (a generator bug otherwise, which the tests' parse of the manifest
/// reference's every-key manifest finds).
#[derive(Clone, Copy)]
struct Keyed<'a, 'i> {
    toml: &'a DeTable<'i>,
    of: Table,
}

impl<'a, 'i> Keyed<'a, 'i> {
    /// The value of key `key` of this table, if given, which the parser reads as `reads`.
    ///
    /// # Panics
    ///
    /// When the key table has no such key, or declares another value for it.
    fn read(&self, key: &str, reads: Reads) -> Option<&'a Spanned<DeValue<'i>>> {
        let declared = self.of.key(key);
        assert_eq!(
            declared.value.reads(),
            reads,
            "the parser reads `{key}` of {:?} unlike the key table declares it",
            self.of
        );
        self.toml.get(key)
    }

    /// The value of key `key`, which has a form of its own (a table, an array of tables, ...)
    /// that the caller reads.
    fn own(&self, key: &str) -> Option<&'a Spanned<DeValue<'i>>> {
        self.read(key, Reads::Own)
    }
}

/// A TOML integer or float as `f64` (`inf` and `nan` included, for the rules to refuse).
fn number_value(value: &DeValue<'_>) -> Option<f64> {
    match value {
        DeValue::Integer(i) => i.as_str().parse::<f64>().ok(),
        DeValue::Float(f) => f.as_str().parse::<f64>().ok(),
        _ => None,
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

impl Parser<'_> {
    fn unknown_keys(&mut self, table: &DeTable<'_>, path: &str, keys: Table) {
        let known = keys.names();
        for (key, _) in table.iter() {
            let name: &str = key.get_ref();
            if known.contains(&name) {
                continue;
            }
            let where_ = if path.is_empty() {
                "at the top level".to_owned()
            } else {
                format!("in `{path}`")
            };
            // A key the table already has, or one of a set the table already has one of
            // (`tensor`/`type`/`device`), is not what was meant: renaming to it would clash.
            let has = |k: &str| table.iter().any(|(other, _)| other.get_ref() == k);
            let present = |k: &str| {
                has(k)
                    || matches!(keys.key(k).need, Need::OneOf(group) if group.iter().any(|g| has(g)))
            };
            let candidates: Vec<&str> = known.iter().copied().filter(|k| !present(k)).collect();
            let help = match did_you_mean(name, &candidates) {
                Some(close) => format!("did you mean `{close}`? known keys: {}", known.join(", ")),
                None => format!("remove it; known keys: {}", known.join(", ")),
            };
            self.diags.push(
                Diagnostic::new(
                    key.span(),
                    join(path, name),
                    format!("unknown key `{name}` {where_}"),
                )
                .page(page::UNKNOWN_KEY)
                .help(help),
            );
        }
    }

    fn wrong_type(&mut self, value: &Spanned<DeValue<'_>>, path: &str, expected: &str) {
        self.diags.push(
            Diagnostic::new(
                value.span(),
                path,
                format!(
                    "`{path}` must be {expected}, found {}",
                    value.get_ref().type_str()
                ),
            )
            .page(page::WRONG_TYPE)
            .help(wrong_type_help(value, path, expected)),
        );
    }

    fn as_table<'a, 'i>(
        &mut self,
        value: &'a Spanned<DeValue<'i>>,
        path: &str,
        known: Table,
    ) -> Option<Keyed<'a, 'i>> {
        match value.get_ref() {
            DeValue::Table(table) => {
                self.unknown_keys(table, path, known);
                Some(Keyed {
                    toml: table,
                    of: known,
                })
            }
            _ => {
                self.wrong_type(value, path, "a table");
                None
            }
        }
    }

    fn as_array<'a, 'i>(
        &mut self,
        value: &'a Spanned<DeValue<'i>>,
        path: &str,
        expected: &str,
    ) -> Option<(&'a DeArray<'i>, Range<usize>)> {
        match value.get_ref() {
            DeValue::Array(array) => Some((array, value.span())),
            _ => {
                self.wrong_type(value, path, expected);
                None
            }
        }
    }

    fn string(&mut self, table: Keyed<'_, '_>, path: &str, key: &str) -> Option<Sp<String>> {
        let value = table.read(key, Reads::String)?;
        let path = join(path, key);
        match value.get_ref() {
            DeValue::String(s) => Some(Sp::new(s.to_string(), value.span())),
            _ => {
                self.wrong_type(value, &path, "a string");
                None
            }
        }
    }

    fn boolean(&mut self, table: Keyed<'_, '_>, path: &str, key: &str) -> Option<Sp<bool>> {
        let value = table.read(key, Reads::Bool)?;
        match value.get_ref() {
            DeValue::Boolean(b) => Some(Sp::new(*b, value.span())),
            _ => {
                self.wrong_type(value, &join(path, key), "`true` or `false`");
                None
            }
        }
    }

    /// A number (an integer or a float; `inf` and `nan` too, for the rules to refuse).
    fn number(
        &mut self,
        table: Keyed<'_, '_>,
        path: &str,
        key: &str,
        example: &str,
    ) -> Option<Sp<f64>> {
        let value = table.read(key, Reads::Number)?;
        let parsed = number_value(value.get_ref());
        if parsed.is_none() {
            self.wrong_type(
                value,
                &join(path, key),
                &format!("a number such as {example}"),
            );
        }
        parsed.map(|n| Sp::new(n, value.span()))
    }

    fn required<T>(
        &mut self,
        found: Option<T>,
        table: Keyed<'_, '_>,
        span: Range<usize>,
        path: &str,
        key: &str,
        example: &str,
    ) -> Option<T> {
        assert_eq!(
            table.of.key(key).need,
            Need::Yes,
            "the parser requires `{key}` of {:?}, which the key table does not",
            table.of
        );
        if found.is_none() && table.toml.get(key).is_none() {
            self.diags.push(
                Diagnostic::new(
                    span,
                    join(path, key),
                    format!("missing key `{key}` in `{path}`"),
                )
                .page(page::MISSING_KEY)
                .help(format!("add `{key} = {example}`")),
            );
        }
        found
    }

    fn routing(&mut self, value: &Spanned<DeValue<'_>>) -> Routing {
        let path = "routing";
        let mut routing = Routing {
            span: value.span(),
            trait_name: None,
            autodiff_trait: None,
            backends: None,
            autodiff_cfg: None,
            backward_bounds: None,
        };
        let Some(table) = self.as_table(value, path, Table::Routing) else {
            return routing;
        };
        let name = self.string(table, path, "trait");
        routing.trait_name = self.required(name, table, value.span(), path, "trait", "\"MyOps\"");
        routing.autodiff_trait = self.string(table, path, "autodiff_trait");
        routing.autodiff_cfg = self.string(table, path, "autodiff_cfg");
        routing.backward_bounds = self.strings(table, path, "backward_bounds", "trait paths");
        let backends = table
            .own("backends")
            .and_then(|v| self.backends(v, "routing.backends"));
        routing.backends = self.required(
            backends,
            table,
            value.span(),
            path,
            "backends",
            "[\"Flex\"]",
        );
        routing
    }

    fn backends(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        path: &str,
    ) -> Option<Sp<Vec<BackendSpec>>> {
        let (array, span) = self.as_array(value, path, "an array of backends")?;
        let mut out = Vec::new();
        for (i, item) in array.iter().enumerate() {
            let item_path = format!("{path}[{i}]");
            match item.get_ref() {
                DeValue::String(s) => out.push(BackendSpec {
                    span: item.span(),
                    name: Sp::new(s.to_string(), item.span()),
                    cfg: None,
                }),
                DeValue::Table(_) => {
                    let Some(table) = self.as_table(item, &item_path, Table::Backend) else {
                        continue;
                    };
                    let name = self.string(table, &item_path, "name");
                    let name = self.required(name, table, item.span(), &item_path, "name", "\"Cube\"");
                    let cfg = self.string(table, &item_path, "cfg");
                    if let Some(name) = name {
                        out.push(BackendSpec { span: item.span(), name, cfg });
                    }
                }
                _ => self.wrong_type(
                    item,
                    &item_path,
                    "a backend name such as \"Flex\" or a table `{ name = \"Cube\", cfg = 'feature = \"cube\"' }`",
                ),
            }
        }
        Some(Sp::new(out, span))
    }

    fn op(&mut self, value: &Spanned<DeValue<'_>>, index: usize) -> Option<OpSpec> {
        let path = format!("op[{index}]");
        let table = self.as_table(value, &path, Table::Op)?;
        let name = self.string(table, &path, "name");
        let name = self.required(name, table, value.span(), &path, "name", "\"my_op\"");
        let doc = self.string(table, &path, "doc");
        let deprecated = self.string(table, &path, "deprecated");
        let autodiff = self.string(table, &path, "autodiff");
        let inputs = table.own("inputs").and_then(|v| {
            let inputs_path = join(&path, "inputs");
            let (array, span) = self.as_array(v, &inputs_path, "an array of inputs")?;
            let items = array
                .iter()
                .enumerate()
                .filter_map(|(i, item)| self.input(item, &format!("{inputs_path}[{i}]")))
                .collect();
            Some(Sp::new(items, span))
        });
        let inputs = self.required(
            inputs,
            table,
            value.span(),
            &path,
            "inputs",
            "[{ name = \"x\", tensor = \"float\" }]",
        );
        let output = table
            .own("output")
            .and_then(|v| self.output(v, &join(&path, "output")));
        let backends = table
            .own("backends")
            .and_then(|v| self.backends(v, &join(&path, "backends")));
        let composite = self.string(table, &path, "composite");
        let composition = self.string(table, &path, "composition");
        let asynchronous = self.boolean(table, &path, "async");
        let fusion = self.string(table, &path, "fusion");
        let dtypes = self.strings(table, &path, "dtypes", "float dtype names");
        let other_dtypes = self.string(table, &path, "other_dtypes");
        let remote = self.string(table, &path, "remote");
        let backward = table
            .own("backward")
            .and_then(|v| self.backward(v, &join(&path, "backward")));
        let save = self.strings(table, &path, "save", "names");
        let checkpoint = self.string(table, &path, "checkpoint");
        let no_gradient = self.strings(table, &path, "no_gradient", "float input names");
        let check = table
            .own("check")
            .and_then(|v| self.check(v, &join(&path, "check")));
        Some(OpSpec {
            index,
            span: value.span(),
            name,
            doc,
            deprecated,
            autodiff,
            inputs,
            output,
            backends,
            composite,
            composition,
            asynchronous,
            fusion,
            dtypes,
            other_dtypes,
            remote,
            backward,
            save,
            checkpoint,
            no_gradient,
            check,
        })
    }

    /// `[op.check]`.
    fn check(&mut self, value: &Spanned<DeValue<'_>>, path: &str) -> Option<CheckSpec> {
        let table = self.as_table(value, path, Table::Check)?;
        let mut spec = CheckSpec {
            span: value.span(),
            ..CheckSpec::default()
        };
        for (key, sub) in self.entries(table, path, "shapes") {
            let key_path = format!("{path}.shapes.{}", key.value);
            let dims = |v: &DeValue<'_>| -> Option<Vec<i64>> {
                match v {
                    DeValue::Array(a) => a
                        .iter()
                        .map(|d| match d.get_ref() {
                            DeValue::Integer(i) => i.as_str().parse::<i64>().ok(),
                            _ => None,
                        })
                        .collect(),
                    _ => None,
                }
            };
            let parsed = match sub.get_ref() {
                DeValue::Array(a)
                    if a.iter().all(|d| matches!(d.get_ref(), DeValue::Array(_)))
                        && !a.is_empty() =>
                {
                    a.iter()
                        .map(|d| dims(d.get_ref()))
                        .collect::<Option<Vec<_>>>()
                }
                other => dims(other).map(|d| vec![d]),
            };
            match parsed {
                Some(shapes) => spec.shapes.push((key, Sp::new(shapes, sub.span()))),
                None => self.wrong_type(sub, &key_path, "a shape: an array of integers such as `[2, 3]` (for a `vec` input, an array of shapes)"),
            }
        }
        for (key, sub) in self.entries(table, path, "ranges") {
            let key_path = format!("{path}.ranges.{}", key.value);
            let parsed = match sub.get_ref() {
                DeValue::Array(a) => a
                    .iter()
                    .map(|d| number_value(d.get_ref()))
                    .collect::<Option<Vec<_>>>(),
                _ => None,
            };
            match parsed {
                Some(r) if r.len() == 2 => spec.ranges.push((key, Sp::new(r, sub.span()))),
                _ => self.wrong_type(sub, &key_path, "a range `[lo, hi]` of two numbers"),
            }
        }
        for (key, sub) in self.entries(table, path, "args") {
            match sub.get_ref() {
                DeValue::String(s) => spec.args.push((key, Sp::new(s.to_string(), sub.span()))),
                _ => self.wrong_type(
                    sub,
                    &format!("{path}.args.{}", key.value),
                    "a Rust expression in a string, such as \"0.5\" or \"vec![1, 2]\"",
                ),
            }
        }
        spec.gradients = self.boolean(table, path, "gradients");
        spec.composition = self.boolean(table, path, "composition");
        spec.tolerance = self.number(table, path, "tolerance", "`1e-2`");
        spec.value_tolerance = self.number(table, path, "value_tolerance", "`1e-3`");
        Some(spec)
    }

    /// The entries of sub-table `key` of `table` (keyed by input name).
    fn entries<'a, 'i>(
        &mut self,
        table: Keyed<'a, 'i>,
        path: &str,
        key: &str,
    ) -> Vec<(Sp<String>, &'a Spanned<DeValue<'i>>)> {
        let Some(value) = table.read(key, Reads::Map) else {
            return Vec::new();
        };
        match value.get_ref() {
            DeValue::Table(sub) => sub
                .iter()
                .map(|(k, v)| (Sp::new(k.get_ref().to_string(), k.span()), v))
                .collect(),
            _ => {
                self.wrong_type(value, &join(path, key), "a table keyed by input name");
                Vec::new()
            }
        }
    }

    /// An array of strings, e.g. `save = ["x", "output"]`.
    fn strings(
        &mut self,
        table: Keyed<'_, '_>,
        path: &str,
        key: &str,
        what: &str,
    ) -> Option<Sp<Vec<Sp<String>>>> {
        let value = table.read(key, Reads::Strings)?;
        let path = join(path, key);
        let (array, span) =
            self.as_array(value, &path, &format!("an array of {what} (strings)"))?;
        let mut items = Vec::new();
        for (i, item) in array.iter().enumerate() {
            match item.get_ref() {
                DeValue::String(s) => items.push(Sp::new(s.to_string(), item.span())),
                _ => self.wrong_type(item, &format!("{path}[{i}]"), "a string"),
            }
        }
        Some(Sp::new(items, span))
    }

    /// `backward`: a function path, `"hand-written"`, or a table of formulas keyed by input.
    fn backward(&mut self, value: &Spanned<DeValue<'_>>, path: &str) -> Option<BackwardSpec> {
        match value.get_ref() {
            DeValue::String(s) if s.as_ref() == HAND_WRITTEN => {
                Some(BackwardSpec::HandWritten(value.span()))
            }
            DeValue::String(s) => {
                Some(BackwardSpec::Function(Sp::new(s.to_string(), value.span())))
            }
            DeValue::Table(table) => {
                let mut entries = Vec::new();
                self.formula_entries(table, "", path, &mut entries);
                Some(BackwardSpec::Formulas {
                    span: value.span(),
                    entries,
                })
            }
            _ => {
                self.wrong_type(
                    value,
                    path,
                    "a table of formulas (`{ x = \"grad * y\" }`) or a function path (a string)",
                );
                None
            }
        }
    }

    /// The formulas of a `backward` table, keyed by input; a nested table (TOML's dotted key
    /// `p.scale = "..."`) keys the fields of a declared struct input, as `"p.scale"` does.
    fn formula_entries(
        &mut self,
        table: &toml::de::DeTable<'_>,
        prefix: &str,
        path: &str,
        entries: &mut Vec<(Sp<String>, Sp<String>)>,
    ) {
        for (key, item) in table.iter() {
            let name = format!("{prefix}{}", key.get_ref());
            match item.get_ref() {
                DeValue::String(s) => {
                    entries.push((
                        Sp::new(name, key.span()),
                        Sp::new(s.to_string(), item.span()),
                    ));
                }
                DeValue::Table(inner) => {
                    self.formula_entries(inner, &format!("{name}."), path, entries);
                }
                _ => self.wrong_type(
                    item,
                    &join(path, &name),
                    "a formula (a string such as \"grad * y\", or \"none\")",
                ),
            }
        }
    }
}

/// The help for a value of the wrong type: for a string, the value it holds quoted (a number or
/// a boolean), or the one string inside a one-entry table or array, which is what the key
/// takes (`shape = { same_as = "x" }` on an output becomes `shape = "x"`).
fn wrong_type_help(value: &Spanned<DeValue<'_>>, path: &str, expected: &str) -> String {
    let key = path.rsplit('.').next().unwrap_or(path);
    let key = key.split('[').next().unwrap_or(key);
    let quoted = |text: &str| format!("write `{key} = \"{text}\"`");
    if expected == "a string" {
        match value.get_ref() {
            DeValue::Integer(i) => return quoted(i.as_str()),
            DeValue::Float(f) => return quoted(f.as_str()),
            DeValue::Boolean(b) => return quoted(&b.to_string()),
            DeValue::Table(table) if table.len() == 1 => {
                if let Some((_, inner)) = table.iter().next()
                    && let DeValue::String(text) = inner.get_ref()
                {
                    return quoted(text);
                }
            }
            DeValue::Array(array) if array.len() == 1 => {
                if let DeValue::String(text) = array[0].get_ref() {
                    return quoted(text);
                }
            }
            _ => {}
        }
    }
    // An input's `shape` naming another input: the contract that says "the same shape".
    if expected.contains("one contract")
        && let DeValue::String(text) = value.get_ref()
    {
        return format!("write `{key} = {{ same_as = \"{text}\" }}`");
    }
    format!("write `{path}` as {expected}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every table of the key table reached once: each accessor the parser calls checks the key
    /// it reads against the key table (a key the table lacks, or read as another value, panics),
    /// whether or not the manifest gives it.
    #[test]
    fn the_parser_reads_each_key_as_the_key_table_declares_it() {
        let mut diags = Diagnostics::new();
        let manifest = parse(
            r#"[routing]
trait = "T"
backends = ["Flex", { name = "Cube", cfg = 'feature = "x"' }]

[[op]]
name = "a"
inputs = [
    { name = "x", tensor = "float", borrowed = true, shape = { same_as = "y" } },
    { name = "y", tensor = "float" },
    { name = "d", device = true },
]
output = [{ tensor = "float", shape = "x", dtype = "x" }, { type = "u8" }]
backward = { x = "grad", y = "grad" }
save = ["x"]
check = { shapes = { x = [2] }, ranges = { x = [0, 1] }, args = {}, tolerance = 0.1 }

[[type]]
name = "E"
variants = [{ name = "V", fields = [{ tensor = "int" }] }, { name = "W" }]
"#,
            &mut diags,
        );
        assert!(!diags.has_errors(), "{:?}", diags.errors());
        assert_eq!(manifest.ops.len(), 1);
        assert_eq!(manifest.types.len(), 1);
    }
}

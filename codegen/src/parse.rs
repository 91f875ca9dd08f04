//! TOML text → [`Manifest`]: syntax, unknown keys, missing keys and value types.
//!
//! The walk never stops at the first problem: every table is checked and every problem becomes a
//! [`Diagnostic`] with the span of the key or value at fault.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeArray, DeTable, DeValue};

use crate::diag::{Diagnostic, did_you_mean, page};
use crate::keys::{Need, Table};
use crate::model::{
    ArgSpec, BackendSpec, BackwardSpec, CheckSpec, Dims, InputSpec, Manifest, MemberSpec, MetaSpec,
    OpSpec, OutputSpec, Routing, ShapeSpec, Sp, TensorSpec, TypeSpec, VariantSpec,
};

/// The `backward` value of an op whose `Autodiff<B, C>` kernel is written by hand.
pub use crate::keys::HAND_WRITTEN;

/// The keys that say what an input is, of which an entry has exactly one (an output has no
/// `device`, the last).
const ARG_KINDS: &[&str] = &["tensor", "type", "device"];

/// Parses manifest text. Returns the model (as complete as the text allows) and every problem
/// found on the way; the model is only meaningful when the list is empty.
pub fn parse(source: &str) -> (Manifest, Vec<Diagnostic>) {
    let (root, syntax) = DeTable::parse_recoverable(source);
    let mut p = Parser { diags: Vec::new() };
    for err in syntax {
        let span = err.span().unwrap_or(0..0);
        p.diags.push(syntax_diagnostic(source, span, err.message()));
    }
    let root_span = root.span();
    let root = root.into_inner();
    p.unknown_keys(&root, "", Table::Top);

    let routing = match root.get("routing") {
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
    if let Some(value) = root.get("op")
        && let Some((array, _)) = p.as_array(value, "op", "an array of `[[op]]` tables")
    {
        for (index, item) in array.iter().enumerate() {
            if let Some(op) = p.op(item, index) {
                ops.push(op);
            }
        }
    }

    let mut types = Vec::new();
    if let Some(value) = root.get("type")
        && let Some((array, _)) = p.as_array(value, "type", "an array of `[[type]]` tables")
    {
        for (index, item) in array.iter().enumerate() {
            if let Some(ty) = p.type_spec(item, index) {
                types.push(ty);
            }
        }
    }

    p.diags.sort_by(|a, b| {
        (a.span.start, a.span.end, &a.key).cmp(&(b.span.start, b.span.end, &b.key))
    });
    p.diags.dedup();
    (
        Manifest {
            routing,
            ops,
            types,
        },
        p.diags,
    )
}

/// The key of every TOML syntax diagnostic; they sort before every other problem, which may
/// only follow from them.
pub const SYNTAX_KEY: &str = "<syntax>";

/// A TOML syntax error as a diagnostic. An unterminated string points at its opening quote
/// (the parser stops at the end of the line or file); a duplicate key names where the key was
/// first defined.
fn syntax_diagnostic(source: &str, span: Range<usize>, message: &str) -> Diagnostic {
    let line_of = |at: usize| source[..at.min(source.len())].matches('\n').count() + 1;
    if message.starts_with("invalid") && message.contains("string, expected") {
        let multi = message.contains("multi-line");
        let open = if multi {
            let quote = if message.contains("literal") {
                "'''"
            } else {
                "\"\"\""
            };
            source[..span.start.min(source.len())].rfind(quote)
        } else {
            open_quote_on_line(source, span.start)
        };
        if let Some(open) = open {
            let close = if multi {
                if message.contains("literal") {
                    "'''"
                } else {
                    "\"\"\""
                }
            } else if message.contains("literal") {
                "'"
            } else {
                "\""
            };
            let help = if multi {
                format!("close it with `{close}`")
            } else {
                format!(
                    "close it with `{close}` on the same line (use `\"\"\"` for a string of several lines)"
                )
            };
            return Diagnostic::new(
                open..open + close.len(),
                SYNTAX_KEY,
                "TOML syntax error: unterminated string (it starts here)",
            )
            .page(page::SYNTAX)
            .help(help);
        }
    }
    if message == "duplicate key" {
        let key = source.get(span.clone()).unwrap_or_default().trim();
        let first = first_definition(source, span.start, key);
        let message = match first {
            Some(at) => format!(
                "TOML syntax error: duplicate key `{key}` (first defined on line {})",
                line_of(at)
            ),
            None => format!("TOML syntax error: duplicate key `{key}`"),
        };
        return Diagnostic::new(span, SYNTAX_KEY, message)
            .page(page::SYNTAX)
            .help("keep one of the two: a key may appear once in a table");
    }
    Diagnostic::new(span, SYNTAX_KEY, format!("TOML syntax error: {message}"))
        .page(page::SYNTAX)
        .help(format!(
            "write what TOML expects at this position ({message}; see https://toml.io)"
        ))
}

/// The opening quote of the string still open at the end of the line holding `at`.
fn open_quote_on_line(source: &str, at: usize) -> Option<usize> {
    let at = at.min(source.len());
    let start = source[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = source[at..].find('\n').map_or(source.len(), |i| at + i);
    let mut open: Option<(usize, char)> = None;
    let mut escaped = false;
    for (i, c) in source[start..end].char_indices() {
        match open {
            None if c == '#' => break,
            None if c == '"' || c == '\'' => open = Some((start + i, c)),
            None => {}
            Some((_, '"')) if escaped => escaped = false,
            Some((_, '"')) if c == '\\' => escaped = true,
            Some((_, q)) if c == q => open = None,
            Some(_) => {}
        }
    }
    open.map(|(i, _)| i)
}

/// Where `key` was defined before `at`: the same table header, or the same key in the same
/// table (the same inline table when `at` is inside one).
fn first_definition(source: &str, at: usize, key: &str) -> Option<usize> {
    if key.is_empty() {
        return None;
    }
    let before = &source[..at.min(source.len())];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = &before[line_start..];
    // A table header: `[key]` on an earlier line.
    if line.trim_start().starts_with('[') {
        let mut offset = 0;
        for l in before[..line_start].split_inclusive('\n') {
            let t = l.trim();
            if t.starts_with('[') && t.trim_start_matches('[').trim_end_matches(']').trim() == key {
                return Some(offset + l.find(key).unwrap_or(0));
            }
            offset += l.len();
        }
        return None;
    }
    // Inside an inline table: search back to its `{` on this line.
    let (scope_start, scope) = match line.rfind('{') {
        Some(brace) => (line_start + brace, &line[brace..]),
        None => {
            // The enclosing table starts at the last header line before this one.
            let mut start = 0;
            let mut offset = 0;
            for l in before[..line_start].split_inclusive('\n') {
                if l.trim_start().starts_with('[') {
                    start = offset;
                }
                offset += l.len();
            }
            (start, &before[start..line_start])
        }
    };
    let mut from = 0;
    while let Some(i) = scope[from..].find(key) {
        let pos = from + i;
        let boundary_before = scope[..pos]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '-'));
        let rest = scope[pos + key.len()..].trim_start_matches([' ', '\t']);
        if boundary_before && rest.starts_with('=') {
            return Some(scope_start + pos);
        }
        from = pos + key.len();
    }
    None
}

struct Parser {
    diags: Vec<Diagnostic>,
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

impl Parser {
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
    ) -> Option<&'a DeTable<'i>> {
        match value.get_ref() {
            DeValue::Table(table) => {
                self.unknown_keys(table, path, known);
                Some(table)
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

    fn string(&mut self, table: &DeTable<'_>, path: &str, key: &str) -> Option<Sp<String>> {
        let value = table.get(key)?;
        let path = join(path, key);
        match value.get_ref() {
            DeValue::String(s) => Some(Sp::new(s.to_string(), value.span())),
            _ => {
                self.wrong_type(value, &path, "a string");
                None
            }
        }
    }

    fn boolean(&mut self, table: &DeTable<'_>, path: &str, key: &str) -> Option<Sp<bool>> {
        let value = table.get(key)?;
        match value.get_ref() {
            DeValue::Boolean(b) => Some(Sp::new(*b, value.span())),
            _ => {
                self.wrong_type(value, &join(path, key), "`true` or `false`");
                None
            }
        }
    }

    fn required<T>(
        &mut self,
        found: Option<T>,
        table: &DeTable<'_>,
        span: Range<usize>,
        path: &str,
        key: &str,
        example: &str,
    ) -> Option<T> {
        if found.is_none() && table.get(key).is_none() {
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
            .get("backends")
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
        let inputs = table.get("inputs").and_then(|v| {
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
            .get("output")
            .and_then(|v| self.output(v, &join(&path, "output")));
        let backends = table
            .get("backends")
            .and_then(|v| self.backends(v, &join(&path, "backends")));
        let composite = self.string(table, &path, "composite");
        let composition = self.string(table, &path, "composition");
        let asynchronous = self.boolean(table, &path, "async");
        let fusion = self.string(table, &path, "fusion");
        let dtypes = self.strings(table, &path, "dtypes", "float dtype names");
        let other_dtypes = self.string(table, &path, "other_dtypes");
        let remote = self.string(table, &path, "remote");
        let backward = table
            .get("backward")
            .and_then(|v| self.backward(v, &join(&path, "backward")));
        let save = self.strings(table, &path, "save", "names");
        let checkpoint = self.string(table, &path, "checkpoint");
        let no_gradient = self.strings(table, &path, "no_gradient", "float input names");
        let check = table
            .get("check")
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
        let number = |v: &DeValue<'_>| match v {
            DeValue::Integer(i) => i.as_str().parse::<f64>().ok(),
            DeValue::Float(f) => f.as_str().parse::<f64>().ok(),
            _ => None,
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
                    .map(|d| number(d.get_ref()))
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
        if let Some(v) = table.get("tolerance") {
            match number(v.get_ref()) {
                Some(t) => spec.tolerance = Some(Sp::new(t, v.span())),
                None => self.wrong_type(v, &join(path, "tolerance"), "a number such as `1e-2`"),
            }
        }
        Some(spec)
    }

    /// The entries of sub-table `key` of `table` (keyed by input name).
    fn entries<'a, 'i>(
        &mut self,
        table: &'a DeTable<'i>,
        path: &str,
        key: &str,
    ) -> Vec<(Sp<String>, &'a Spanned<DeValue<'i>>)> {
        let Some(value) = table.get(key) else {
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
        table: &DeTable<'_>,
        path: &str,
        key: &str,
        what: &str,
    ) -> Option<Sp<Vec<Sp<String>>>> {
        let value = table.get(key)?;
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

    /// A `[[type]]` entry: `fields` (a struct) or `variants` (an enum); which one, and whether
    /// both, is validation's call.
    fn type_spec(&mut self, value: &Spanned<DeValue<'_>>, index: usize) -> Option<TypeSpec> {
        let path = format!("type[{index}]");
        let reported_before = self.diags.len();
        let table = self.as_table(value, &path, Table::Type)?;
        let name = self.string(table, &path, "name");
        let name = self.required(name, table, value.span(), &path, "name", "\"Detections\"");
        let doc = self.string(table, &path, "doc");
        let fields = table
            .get("fields")
            .and_then(|v| self.members(v, &join(&path, "fields")));
        let variants = table.get("variants").and_then(|v| {
            let variants_path = join(&path, "variants");
            let (array, span) = self.as_array(
                v,
                &variants_path,
                "an array of variants such as `[{ name = \"Dense\", fields = [{ tensor = \"float\" }] }, { name = \"Empty\" }]`",
            )?;
            // The names the variants already have, so that a name suggested for one that
            // lacks it is free.
            let taken: Vec<String> = array
                .iter()
                .filter_map(|item| match item.get_ref() {
                    DeValue::Table(t) => match t.get("name").map(Spanned::get_ref) {
                        Some(DeValue::String(s)) => Some(s.to_string()),
                        _ => None,
                    },
                    _ => None,
                })
                .collect();
            let items = array
                .iter()
                .enumerate()
                .filter_map(|(i, item)| {
                    self.variant(item, &format!("{variants_path}[{i}]"), &taken)
                })
                .collect();
            Some(Sp::new(items, span))
        });
        Some(TypeSpec {
            index,
            span: value.span(),
            name,
            doc,
            fields,
            variants,
            reported: self.diags.len() > reported_before,
        })
    }

    fn variant(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        path: &str,
        taken: &[String],
    ) -> Option<VariantSpec> {
        let table = self.as_table(value, path, Table::Variant)?;
        let name = self.string(table, path, "name");
        let example = ["Dense", "Sparse", "Empty", "Other"]
            .into_iter()
            .find(|n| !taken.iter().any(|t| t == n))
            .unwrap_or("Variant");
        let name = self.required(
            name,
            table,
            value.span(),
            path,
            "name",
            &format!("\"{example}\""),
        );
        let doc = self.string(table, path, "doc");
        let fields = table
            .get("fields")
            .and_then(|v| self.members(v, &join(path, "fields")));
        Some(VariantSpec {
            span: value.span(),
            name,
            doc,
            fields,
        })
    }

    /// A `fields` array of a type or a variant.
    fn members(&mut self, value: &Spanned<DeValue<'_>>, path: &str) -> Option<Sp<Vec<MemberSpec>>> {
        let (array, span) = self.as_array(
            value,
            path,
            "an array of fields such as `{ name = \"boxes\", tensor = \"float\" }`",
        )?;
        let items = array
            .iter()
            .enumerate()
            .filter_map(|(i, item)| {
                let item_path = format!("{path}[{i}]");
                let table = self.as_table(item, &item_path, Table::Field)?;
                let name = self.string(table, &item_path, "name");
                let doc = self.string(table, &item_path, "doc");
                let ty = self.arg(table, item.span(), &item_path, false);
                Some(MemberSpec {
                    span: item.span(),
                    name,
                    doc,
                    ty,
                })
            })
            .collect();
        Some(Sp::new(items, span))
    }

    fn input(&mut self, value: &Spanned<DeValue<'_>>, path: &str) -> Option<InputSpec> {
        let table = self.as_table(value, path, Table::Input)?;
        let name = self.string(table, path, "name");
        let name = self.required(name, table, value.span(), path, "name", "\"x\"");
        let ty = self.arg(table, value.span(), path, true);
        Some(InputSpec {
            span: value.span(),
            name,
            ty,
        })
    }

    fn output(&mut self, value: &Spanned<DeValue<'_>>, path: &str) -> Option<OutputSpec> {
        match value.get_ref() {
            DeValue::Array(array) => {
                let items = array
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| self.output(item, &format!("{path}[{i}]")))
                    .collect();
                Some(OutputSpec::Tuple {
                    span: value.span(),
                    items,
                })
            }
            DeValue::Table(_) => {
                let table = self.as_table(value, path, Table::Output)?;
                let ty = self.arg(table, value.span(), path, false)?;
                Some(OutputSpec::Single {
                    span: value.span(),
                    ty,
                })
            }
            _ => {
                self.wrong_type(
                    value,
                    path,
                    "a table such as `{ tensor = \"float\" }` or `{ type = \"usize\" }`, or an array of them for a tuple",
                );
                None
            }
        }
    }

    /// Reads `tensor` / `type` / `device` (and the tensor-only keys) from an input or output
    /// table. Exactly one of the three must be present.
    fn arg(
        &mut self,
        table: &DeTable<'_>,
        span: Range<usize>,
        path: &str,
        is_input: bool,
    ) -> Option<ArgSpec> {
        let tensor = self.string(table, path, "tensor");
        let plain = self.string(table, path, "type");
        let device = if is_input {
            self.boolean(table, path, "device")
        } else {
            None
        };
        let borrowed = if is_input {
            self.boolean(table, path, "borrowed")
        } else {
            None
        };
        let dims = table
            .get("dims")
            .and_then(|v| self.dims(v, &join(path, "dims")));
        let container = self.string(table, path, "container");
        let shape = if is_input {
            table
                .get("shape")
                .and_then(|v| self.shape(v, &join(path, "shape")))
                .map(Box::new)
        } else {
            None
        };
        let meta = if is_input {
            None
        } else {
            let meta = MetaSpec {
                shape: self.string(table, path, "shape"),
                dtype: self.string(table, path, "dtype"),
            };
            (meta.shape.is_some() || meta.dtype.is_some()).then(|| Box::new(meta))
        };
        // `device` outside an input is an unknown key, reported as such.
        let kinds: &[&str] = if is_input { ARG_KINDS } else { &ARG_KINDS[..2] };
        let present: Vec<&str> = kinds
            .iter()
            .copied()
            .filter(|k| table.get(*k).is_some())
            .collect();
        if present.len() > 1 {
            let (key, _) = table.get_key_value(present[1]).expect("present");
            let help = if is_input {
                "give exactly one of `tensor` (a tensor), `type` (a plain Rust value) or `device = true` (the device)"
            } else {
                "give exactly one of `tensor` (a tensor) or `type` (a plain Rust value)"
            };
            self.diags.push(
                Diagnostic::new(
                    key.span(),
                    join(path, present[1]),
                    format!("`{path}` has both `{}` and `{}`", present[0], present[1]),
                )
                .page(page::CONFLICTING_ARG_KINDS)
                .help(help),
            );
            return None;
        }
        if present.is_empty() {
            let what = if is_input {
                "`tensor`, `type` or `device = true`"
            } else {
                "`tensor` or `type`"
            };
            self.diags.push(
                Diagnostic::new(span, path, format!("`{path}` needs {what}"))
                    .page(page::MISSING_ARG_KIND)
                    .help("add `tensor = \"float\"` (or \"int\", \"bool\", \"quantized\") or `type = \"f32\"`"),
            );
            return None;
        }
        if tensor.is_none() {
            let output_only: &[&str] = if is_input { &[] } else { &["dtype"] };
            for key in ["borrowed", "dims", "container", "shape"]
                .iter()
                .chain(output_only)
                .copied()
            {
                if let Some((k, _)) = table.get_key_value(key) {
                    self.diags.push(
                        Diagnostic::new(
                            k.span(),
                            join(path, key),
                            format!(
                                "`{key}` only applies to tensors, but `{path}` is not a tensor"
                            ),
                        )
                        .page(page::TENSOR_ONLY_KEY)
                        .help(format!(
                            "remove `{key}`, or make the entry a tensor with `tensor = \"float\"`"
                        )),
                    );
                }
            }
        }
        if let Some(kind) = tensor {
            return Some(ArgSpec::Tensor(TensorSpec {
                kind,
                borrowed,
                dims,
                container,
                shape,
                meta,
            }));
        }
        if let Some(ty) = plain {
            return Some(ArgSpec::Plain(ty));
        }
        let device = device?;
        if !device.value {
            self.diags.push(
                Diagnostic::new(
                    device.span.clone(),
                    join(path, "device"),
                    "`device = false` declares nothing",
                )
                .page(page::DEVICE_FALSE)
                .help("write `device = true` for the device argument, or remove the entry"),
            );
            return None;
        }
        Some(ArgSpec::Device(device))
    }

    /// An input's `shape` table: exactly one contract key, naming another input.
    fn shape(&mut self, value: &Spanned<DeValue<'_>>, path: &str) -> Option<Sp<ShapeSpec>> {
        const EXAMPLE: &str = "a table with one contract such as `{ same_as = \"x\" }`";
        let DeValue::Table(table) = value.get_ref() else {
            self.wrong_type(value, path, EXAMPLE);
            return None;
        };
        self.unknown_keys(table, path, Table::Shape);
        let rules = Table::Shape.names();
        let given: Vec<&str> = rules
            .iter()
            .copied()
            .filter(|k| table.get(*k).is_some())
            .collect();
        match given.as_slice() {
            [] => {
                // An unknown key was reported above; an empty table gets its own message.
                if table.is_empty() {
                    self.diags.push(
                        Diagnostic::new(value.span(), path, format!("`{path}` is empty"))
                            .help(format!(
                                "give one contract: {} (each names another input), or remove `shape`",
                                rules.join(", ")
                            )),
                    );
                }
                None
            }
            [rule] => {
                let (key, _) = table.get_key_value(*rule).expect("present");
                let of = self.string(table, path, rule)?;
                Some(Sp::new(
                    ShapeSpec {
                        rule: Sp::new((*rule).to_owned(), key.span()),
                        of,
                    },
                    value.span(),
                ))
            }
            [first, second, ..] => {
                let (key, _) = table.get_key_value(*second).expect("present");
                self.diags.push(
                    Diagnostic::new(
                        key.span(),
                        join(path, second),
                        format!("`{path}` has both `{first}` and `{second}`"),
                    )
                    .help(format!("keep one contract (e.g. remove `{second}`); to relate another input too, give that input a `shape` of its own")),
                );
                None
            }
        }
    }

    fn dims(&mut self, value: &Spanned<DeValue<'_>>, path: &str) -> Option<Sp<Dims>> {
        match value.get_ref() {
            DeValue::String(s) => Some(Sp::new(Dims::Generic(s.to_string()), value.span())),
            DeValue::Integer(i) => match i64::from_str_radix(i.as_str(), i.radix()) {
                Ok(n) => Some(Sp::new(Dims::Fixed(n), value.span())),
                Err(_) => {
                    self.diags.push(
                        Diagnostic::new(
                            value.span(),
                            path,
                            format!("rank {} is out of range", i.as_str()),
                        )
                        .page(page::RANK_RANGE)
                        .help("use a rank from 1 to 16, or a const-generic name such as \"D\""),
                    );
                    None
                }
            },
            _ => {
                self.wrong_type(
                    value,
                    path,
                    "a const-generic name such as \"D\" or a rank such as 2",
                );
                None
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

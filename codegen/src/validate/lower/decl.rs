//! Lowering of declared types (`[[type]]`): structs and enums holding tensors, which op inputs
//! and outputs name with `type = "Name"` (`"&Name"` for a borrowed input).
//!
//! Each type is lowered on its own first (names, fields, variants); then the rules that relate
//! types to each other: every named type exists, no type contains itself, every type holds a
//! tensor somewhere. A type no op uses is a warning, reported by [`unused`].

use std::collections::{BTreeMap, BTreeSet};

use super::types::Position;
use super::{Lowerer, shown};
use crate::diag::{Diagnostic, LineIndex, did_you_mean};
use crate::ir::{Member, MemberType, Rank, TypeBody, TypeDef, Variant, VariantKind};
use crate::model::{ArgSpec, Manifest, MemberSpec, Sp, TypeSpec};
use crate::names::NameKind;

/// The declared types of a manifest as ops see them while they are lowered.
#[derive(Clone, Debug, Default)]
pub(in crate::validate) struct Declared {
    /// Every lowered type.
    pub defs: Vec<TypeDef>,
    /// Every declared name (lowered or not), so that a use of a broken type is not reported
    /// again as an unknown type.
    pub names: BTreeSet<String>,
}

impl Declared {
    /// The lowered type `name`.
    pub fn get(&self, name: &str) -> Option<&TypeDef> {
        self.defs.iter().find(|d| d.name == name)
    }

    /// `name` or `&name` when `name` is declared: the type's name and whether it is borrowed.
    pub fn resolve<'t>(&self, text: &'t str) -> Option<(&'t str, bool)> {
        let text = text.trim();
        let (name, borrowed) = match text.strip_prefix('&') {
            Some(rest) => (rest.trim(), true),
            None => (text, false),
        };
        self.names.contains(name).then_some((name, borrowed))
    }

    /// The first declared name that `text` (a plain Rust type) mentions as a path segment.
    /// A declared name that is no valid type name (`Option`, refused where it is declared) is
    /// not looked for: `Option<Pair>` mentions `Pair`.
    pub fn mentioned_in(&self, text: &str) -> Option<&str> {
        text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|word| crate::names::problem(word, NameKind::Type).is_none())
            .find_map(|word| self.names.get(word).map(String::as_str))
    }
}

impl Lowerer<'_, '_> {
    /// Lowers every `[[type]]`, then checks the rules between them.
    pub(super) fn types(&mut self, manifest: &Manifest, lines: &LineIndex, file: &str) -> Declared {
        let mut declared = Declared::default();
        let mut first: BTreeMap<String, usize> = BTreeMap::new();
        for spec in &manifest.types {
            let Some(name) = &spec.name else { continue };
            if let Some(previous) = first.get(&name.value) {
                self.push(
                    Diagnostic::new(
                        name.span.clone(),
                        format!("type[{}].name", spec.index),
                        format!(
                            "type `{}` is declared twice (first as `type[{previous}]`)",
                            shown(&name.value)
                        ),
                    )
                    .help("give every declared type a distinct name, or remove one of them"),
                );
                continue;
            }
            first.insert(name.value.clone(), spec.index);
            declared.names.insert(name.value.clone());
        }
        let mut seen = BTreeSet::new();
        for spec in &manifest.types {
            // A duplicate was reported above; lowering it again would only repeat that.
            if let Some(name) = &spec.name
                && !seen.insert(name.value.clone())
            {
                continue;
            }
            if let Some(def) = self.type_def(spec, &declared, lines, file) {
                declared.defs.push(def);
            }
        }
        self.recursive_types(manifest, &declared);
        self.tensorless_types(manifest, &mut declared);
        fill_ranks(&mut declared.defs);
        declared
    }

    fn type_def(
        &mut self,
        spec: &TypeSpec,
        declared: &Declared,
        lines: &LineIndex,
        file: &str,
    ) -> Option<TypeDef> {
        let path = format!("type[{}]", spec.index);
        let name = spec
            .name
            .as_ref()
            .and_then(|n| self.name(n, NameKind::Type, &format!("{path}.name")));
        let doc = self.doc(spec.doc.as_ref(), &format!("{path}.doc"));
        let body = match (&spec.fields, &spec.variants) {
            (Some(fields), None) => {
                let members = self.members(fields, &format!("{path}.fields"), declared, true);
                if members.as_ref().is_some_and(Vec::is_empty) {
                    self.push(
                        Diagnostic::new(
                            fields.span.clone(),
                            format!("{path}.fields"),
                            "a declared struct without fields holds no tensor",
                        )
                        .help("add fields such as `{ name = \"x\", tensor = \"float\" }`"),
                    );
                    return None;
                }
                members.map(TypeBody::Struct)
            }
            (None, Some(variants)) => {
                if variants.value.is_empty() {
                    self.push(
                        Diagnostic::new(
                            variants.span.clone(),
                            format!("{path}.variants"),
                            "a declared enum without variants has no value",
                        )
                        .help("add variants such as `{ name = \"Dense\", fields = [{ tensor = \"float\" }] }, { name = \"Empty\" }` (one variant would be a struct)"),
                    );
                    return None;
                }
                if variants.value.len() == 1 {
                    self.push(
                        Diagnostic::new(
                            variants.span.clone(),
                            format!("{path}.variants"),
                            "a declared enum with one variant is a struct",
                        )
                        .help("declare a struct with `fields`, or add the other variants (a tensor-less one such as `{ name = \"Empty\" }` routes like an absent `Option`)"),
                    );
                    return None;
                }
                self.variants(&variants.value, &path, declared)
                    .map(TypeBody::Enum)
            }
            (Some(_), Some(variants)) => {
                self.push(
                    Diagnostic::new(
                        variants.span.clone(),
                        format!("{path}.variants"),
                        "a declared type has both `fields` (a struct) and `variants` (an enum)",
                    )
                    .help("keep `fields` for a struct or `variants` for an enum; a variant has `fields` of its own"),
                );
                None
            }
            // (Already reported by the parser: a misspelt or mistyped `fields` or `variants`,
            // whose fix would clash with adding it.)
            (None, None) if spec.reported => None,
            (None, None) => {
                self.push(
                    Diagnostic::new(
                        spec.span.clone(),
                        path,
                        "a declared type needs `fields` (a struct) or `variants` (an enum)",
                    )
                    .help("add `fields = [{ name = \"x\", tensor = \"float\" }]`, or `variants = [{ name = \"Empty\" }, ...]`"),
                );
                None
            }
        };
        let location = format!("{file}:{}", lines.line(spec.span.start));
        Some(TypeDef {
            name: name?,
            doc: doc?,
            body: body?,
            ranks: Vec::new(),
            location,
        })
    }

    fn doc(&mut self, doc: Option<&Sp<String>>, key: &str) -> Option<Vec<String>> {
        match doc {
            None => Some(Vec::new()),
            Some(doc) => match super::text::doc_lines(doc, self.source, key) {
                Ok(lines) => Some(lines),
                Err(d) => {
                    self.push(d);
                    None
                }
            },
        }
    }

    fn variants(
        &mut self,
        specs: &[crate::model::VariantSpec],
        path: &str,
        declared: &Declared,
    ) -> Option<Vec<Variant>> {
        let mut out = Vec::new();
        let mut ok = true;
        let mut seen = BTreeSet::new();
        for (i, spec) in specs.iter().enumerate() {
            let key = format!("{path}.variants[{i}]");
            let name = spec
                .name
                .as_ref()
                .and_then(|n| self.name(n, NameKind::Variant, &format!("{key}.name")));
            if let (Some(n), Some(sp)) = (&name, &spec.name) {
                ok &= self.distinct(
                    &mut seen,
                    n,
                    sp,
                    &key,
                    "variant",
                    "every variant of an enum",
                );
            }
            let doc = self.doc(spec.doc.as_ref(), &format!("{key}.doc"));
            let (kind, fields) = match &spec.fields {
                None => (Some(VariantKind::Unit), Some(Vec::new())),
                Some(fields) if fields.value.is_empty() => {
                    self.push(
                        Diagnostic::new(
                            fields.span.clone(),
                            format!("{key}.fields"),
                            "empty `fields`: a variant without fields is a unit variant",
                        )
                        .help("remove `fields` for a unit variant such as `Empty`"),
                    );
                    (None, None)
                }
                Some(fields) => {
                    let named = fields.value[0].name.is_some();
                    let kind = if named {
                        VariantKind::Struct
                    } else {
                        VariantKind::Tuple
                    };
                    (
                        Some(kind),
                        self.members(fields, &format!("{key}.fields"), declared, named),
                    )
                }
            };
            match (name, doc, kind, fields) {
                (Some(name), Some(doc), Some(kind), Some(fields)) => out.push(Variant {
                    name,
                    doc,
                    kind,
                    fields,
                }),
                _ => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// Records `name` (of the entry at `key`) in `seen`; a second use of it is an error.
    fn distinct(
        &mut self,
        seen: &mut BTreeSet<String>,
        name: &str,
        at: &Sp<String>,
        key: &str,
        what: &str,
        among: &str,
    ) -> bool {
        if seen.insert(name.to_owned()) {
            return true;
        }
        self.push(
            Diagnostic::new(
                at.span.clone(),
                format!("{key}.name"),
                format!("duplicate {what} `{name}`"),
            )
            .help(format!("give {among} a distinct name")),
        );
        false
    }

    /// A `fields` list: all named (a struct, a struct variant) or none (a tuple variant).
    fn members(
        &mut self,
        fields: &Sp<Vec<MemberSpec>>,
        path: &str,
        declared: &Declared,
        named: bool,
    ) -> Option<Vec<Member>> {
        let mut out = Vec::new();
        let mut ok = true;
        let mut seen = BTreeSet::new();
        let struct_type = !path.contains(".variants[");
        for (i, spec) in fields.value.iter().enumerate() {
            let key = format!("{path}[{i}]");
            let name = match (&spec.name, named) {
                (Some(n), true) => {
                    let name = self.name(n, NameKind::Field, &format!("{key}.name"));
                    if let Some(name) = &name {
                        ok &= self.distinct(&mut seen, name, n, &key, "field", "every field");
                    }
                    name.map(Some)
                }
                (None, true) => {
                    let help = if struct_type {
                        "name every field of a struct: `{ name = \"x\", tensor = \"float\" }`"
                    } else {
                        "name every field of the variant (a struct variant), or none of them (a tuple variant)"
                    };
                    self.push(
                        Diagnostic::new(spec.span.clone(), key.clone(), "field without a `name`")
                            .help(help),
                    );
                    None
                }
                (Some(n), false) => {
                    self.push(
                        Diagnostic::new(
                            n.span.clone(),
                            format!("{key}.name"),
                            "named field in a tuple variant (its first field has no `name`)",
                        )
                        .help("name every field of the variant (a struct variant), or none of them (a tuple variant)"),
                    );
                    None
                }
                (None, false) => Some(None),
            };
            let doc = self.doc(spec.doc.as_ref(), &format!("{key}.doc"));
            let ty = spec
                .ty
                .as_ref()
                .and_then(|ty| self.member_type(ty, &key, declared));
            match (name, doc, ty) {
                (Some(name), Some(doc), Some(ty)) => out.push(Member { name, doc, ty }),
                _ => ok = false,
            }
        }
        ok.then_some(out)
    }

    fn member_type(
        &mut self,
        spec: &ArgSpec,
        key: &str,
        declared: &Declared,
    ) -> Option<MemberType> {
        let in_variant = key.contains(".variants[");
        match spec {
            ArgSpec::Tensor(t) => {
                if let Some(b) = &t.borrowed {
                    // Parsing reads `borrowed` from inputs only; kept for completeness.
                    self.push(
                        Diagnostic::new(
                            b.span.clone(),
                            format!("{key}.borrowed"),
                            "a field owns its tensor",
                        )
                        .help("remove `borrowed`; borrow the whole value instead (`type = \"&Name\"` in the op's input)"),
                    );
                    return None;
                }
                let meta = match &t.meta {
                    Some(meta) if in_variant => {
                        let span = meta
                            .shape
                            .as_ref()
                            .or(meta.dtype.as_ref())
                            .map_or(0..0, |m| m.span.clone());
                        self.push(
                            Diagnostic::new(
                                span,
                                format!("{key}.shape"),
                                "`shape` and `dtype` on a field of an enum variant: a deferred operation on `Fusion<B>` cannot know an enum output's variant before it runs",
                            )
                            .help("remove them; an op returning this enum runs its `composition` on Cube"),
                        );
                        return None;
                    }
                    meta => self.output_meta(meta.as_deref(), key)?,
                };
                let tensor = self.tensor(t, key)?;
                Some(MemberType::Tensor(crate::ir::TensorArg { meta, ..tensor }))
            }
            ArgSpec::Plain(ty) => {
                let key = format!("{key}.type");
                if let Some((name, borrowed)) = declared.resolve(&ty.value) {
                    if borrowed {
                        self.push(
                            Diagnostic::new(
                                ty.span.clone(),
                                key,
                                format!("field borrows declared type `{name}`"),
                            )
                            .help(format!("a field owns its value: write `type = \"{name}\"`")),
                        );
                        return None;
                    }
                    return Some(MemberType::Declared(name.to_owned()));
                }
                if let Some(name) = declared.mentioned_in(&ty.value) {
                    self.push(nested_use(ty, &key, name));
                    return None;
                }
                if let Some(d) = misspelled(declared, ty, &key) {
                    self.push(d);
                    return None;
                }
                let plain = self.plain(ty, &key)?;
                self.plain_type(ty, &key, Position::Field, &[])
                    .then_some(MemberType::Plain(plain))
            }
            // Parsing reads `device` from op inputs only.
            ArgSpec::Device(_) => None,
        }
    }

    /// A type that contains itself (through any chain of fields) has no finite size.
    fn recursive_types(&mut self, manifest: &Manifest, declared: &Declared) {
        for def in &declared.defs {
            let mut chain = vec![def.name.clone()];
            if let Some(cycle) = cycle_from(&def.name, declared, &mut chain) {
                let Some(spec) = manifest
                    .types
                    .iter()
                    .find(|s| s.name.as_ref().is_some_and(|n| n.value == def.name))
                else {
                    continue;
                };
                let span = spec.name_span();
                self.push(
                    Diagnostic::new(
                        span,
                        format!("type[{}]", spec.index),
                        format!(
                            "type `{}` contains itself ({}), so it would have no finite size",
                            def.name,
                            cycle.join(" → ")
                        ),
                    )
                    .help("declared types hold their fields by value: break the cycle, e.g. by passing the inner value as a separate input"),
                );
            }
        }
    }

    /// Every type must hold a tensor somewhere: a type of plain values only is an ordinary
    /// Rust type, passed as a plain `type`. Such a type is dropped from `declared`.
    fn tensorless_types(&mut self, manifest: &Manifest, declared: &mut Declared) {
        let tensorless: Vec<String> = declared
            .defs
            .iter()
            .filter(|d| !holds_tensor(&d.name, declared, &mut Vec::new()))
            .map(|d| d.name.clone())
            .collect();
        for name in &tensorless {
            let Some(spec) = manifest
                .types
                .iter()
                .find(|s| s.name.as_ref().is_some_and(|n| &n.value == name))
            else {
                continue;
            };
            let span = spec.name_span();
            self.push(
                Diagnostic::new(
                    span,
                    format!("type[{}]", spec.index),
                    format!("type `{name}` holds no tensor in any field or variant"),
                )
                .help("a type of plain values is an ordinary Rust type: define it in your crate and pass it as `type = \"crate::path::Name\"`"),
            );
        }
        declared.defs.retain(|d| !tensorless.contains(&d.name));
    }
}

/// The error for a declared type written inside another type (`Option<Name>`).
pub(super) fn nested_use(ty: &Sp<String>, key: &str, name: &str) -> Diagnostic {
    Diagnostic::new(
        ty.span.clone(),
        key,
        format!(
            "`{}` uses declared type `{name}` inside another type",
            shown(ty.value.trim())
        ),
    )
    .page(crate::diag::page::DECLARED_TYPE)
    .help(format!(
        "a declared type is passed as itself: `type = \"{name}\"` (or `\"&{name}\"` for a borrowed input); put an optional or repeated tensor inside the type (`container = \"option\"`)"
    ))
}

/// For `type = "Name"` (or `"&Name"`), a single name that is no declared type but close to
/// one: the error that names the declared type it likely meant.
pub(super) fn misspelled(declared: &Declared, ty: &Sp<String>, key: &str) -> Option<Diagnostic> {
    let text = ty.value.trim().trim_start_matches('&').trim();
    if text.is_empty() || !text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let candidates: Vec<&str> = declared.names.iter().map(String::as_str).collect();
    let close = did_you_mean(text, &candidates)?;
    Some(
        Diagnostic::new(
            ty.span.clone(),
            key,
            format!("unknown type `{}`", shown(text)),
        )
        .page(crate::diag::page::DECLARED_TYPE)
        .help(format!("did you mean declared type `{close}`?")),
    )
}

/// The members of `def`, every variant's included.
fn members(def: &TypeDef) -> impl Iterator<Item = &Member> {
    let (fields, variants): (&[Member], &[Variant]) = match &def.body {
        TypeBody::Struct(fields) => (fields, &[]),
        TypeBody::Enum(variants) => (&[], variants),
    };
    fields
        .iter()
        .chain(variants.iter().flat_map(|v| v.fields.iter()))
}

/// A chain of type names from `name` back to the start of `chain`, if there is one.
fn cycle_from(name: &str, declared: &Declared, chain: &mut Vec<String>) -> Option<Vec<String>> {
    let def = declared.get(name)?;
    for m in members(def) {
        let MemberType::Declared(inner) = &m.ty else {
            continue;
        };
        if *inner == chain[0] {
            let mut cycle = chain.clone();
            cycle.push(inner.clone());
            return Some(cycle);
        }
        if chain.contains(inner) || chain.len() > declared.defs.len() {
            continue;
        }
        chain.push(inner.clone());
        if let Some(cycle) = cycle_from(inner, declared, chain) {
            return Some(cycle);
        }
        chain.pop();
    }
    None
}

fn holds_tensor(name: &str, declared: &Declared, visiting: &mut Vec<String>) -> bool {
    if visiting.iter().any(|v| v == name) {
        return false;
    }
    let Some(def) = declared.get(name) else {
        return false;
    };
    visiting.push(name.to_owned());
    let found = members(def).any(|m| match &m.ty {
        MemberType::Tensor(_) => true,
        MemberType::Declared(inner) => holds_tensor(inner, declared, visiting),
        MemberType::Plain(_) => false,
    });
    visiting.pop();
    found
}

/// Each type's rank generics: its tensors' and its nested types', in order of first use.
fn fill_ranks(defs: &mut [TypeDef]) {
    fn ranks_of(name: &str, defs: &[TypeDef], depth: usize, acc: &mut Vec<String>) {
        let Some(def) = defs.iter().find(|d| d.name == name) else {
            return;
        };
        if depth > defs.len() {
            return;
        }
        for m in members(def) {
            match &m.ty {
                MemberType::Tensor(t) => {
                    if let Rank::Generic(g) = &t.rank
                        && !acc.contains(g)
                    {
                        acc.push(g.clone());
                    }
                }
                MemberType::Declared(inner) => ranks_of(inner, defs, depth + 1, acc),
                MemberType::Plain(_) => {}
            }
        }
    }
    let all: Vec<Vec<String>> = defs
        .iter()
        .map(|d| {
            let mut acc = Vec::new();
            ranks_of(&d.name, defs, 0, &mut acc);
            acc
        })
        .collect();
    for (def, ranks) in defs.iter_mut().zip(all) {
        def.ranks = ranks;
    }
}

/// The warning for every declared type that no op uses, directly or through another type.
pub(in crate::validate) fn unused(
    manifest: &Manifest,
    declared: &Declared,
    used: &BTreeSet<String>,
) -> Vec<Diagnostic> {
    // Close `used` over nesting.
    let mut reached: BTreeSet<String> = BTreeSet::new();
    let mut stack: Vec<String> = used.iter().cloned().collect();
    while let Some(name) = stack.pop() {
        if !reached.insert(name.clone()) {
            continue;
        }
        if let Some(def) = declared.get(&name) {
            for m in members(def) {
                if let MemberType::Declared(inner) = &m.ty {
                    stack.push(inner.clone());
                }
            }
        }
    }
    manifest
        .types
        .iter()
        .filter_map(|spec| {
            let name = spec.name.as_ref()?;
            if reached.contains(&name.value) || declared.get(&name.value).is_none() {
                return None;
            }
            Some(
                Diagnostic::new(
                    name.span.clone(),
                    format!("type[{}]", spec.index),
                    format!("type `{}` is used by no op", name.value),
                )
                .help(format!(
                    "use it in an op's `inputs` or `output` (`type = \"{}\"`), or remove it",
                    name.value
                ))
                .warning(),
            )
        })
        .collect()
}

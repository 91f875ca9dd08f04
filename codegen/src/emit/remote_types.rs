//! Declared types (`[[type]]`) on Remote: how a value of one travels in an op's custom
//! operation. The client's `__send` records its tensors as the operation's inputs and its plain
//! fields (an enum's variant first, as a `u32`) as scalars, in declaration order; the server's
//! `__receive` reads them back in the same order and rebuilds the value on its backend.

use std::collections::BTreeSet;

use super::code::{Doc, Writer, call, cat};
use super::{kind_fn, string_literal};
use crate::ir::{Arg, Container, Ir, Member, MemberType, Op, TypeBody, TypeDef, VariantKind};
use crate::names::{self, ARGS, CALL, RECEIVE, SEND};

/// The form of declared type `name` that client and server must agree on (part of an op's
/// declaration, whose hash is in its operation's id): every member's name and form, nested
/// types spelled out.
pub(super) fn declaration(ir: &Ir, name: &str) -> String {
    let def = ir.type_def(name);
    let member = |m: &Member| -> String {
        let form = match &m.ty {
            MemberType::Tensor(t) => format!("{}{}", t.kind.key(), container_mark(t.container)),
            MemberType::Plain(ty) => format!("={ty}"),
            MemberType::Declared(inner) => declaration(ir, inner),
        };
        match &m.name {
            Some(field) => format!("{field}:{form}"),
            None => form,
        }
    };
    let body = match &def.body {
        TypeBody::Struct(fields) => fields.iter().map(member).collect::<Vec<_>>().join(","),
        TypeBody::Enum(variants) => variants
            .iter()
            .map(|v| {
                let fields: Vec<String> = v.fields.iter().map(member).collect();
                match v.kind {
                    VariantKind::Unit => v.name.clone(),
                    VariantKind::Tuple => format!("{}({})", v.name, fields.join(",")),
                    VariantKind::Struct => format!("{}{{{}}}", v.name, fields.join(",")),
                }
            })
            .collect::<Vec<_>>()
            .join("|"),
    };
    format!("{name}{{{body}}}")
}

/// The declared types that ops running on Remote as one operation take (nested ones
/// included), each with the cfgs of the ops that take it, in manifest order.
fn sent_types<'a>(ir: &'a Ir, kernels: &[&Op]) -> Vec<(&'a TypeDef, Vec<Option<String>>)> {
    let mut out: Vec<(&TypeDef, Vec<Option<String>>)> = Vec::new();
    for def in &ir.types {
        let cfgs: Vec<Option<String>> = kernels
            .iter()
            .filter(|op| {
                op.inputs.iter().any(|i| match &i.arg {
                    Arg::Declared { name, .. } => reaches(ir, name, &def.name),
                    _ => false,
                })
            })
            .map(|op| {
                op.backends
                    .iter()
                    .find(|b| b.name == crate::ir::BackendId::Remote)
                    .and_then(|b| b.cfg.clone())
            })
            .collect();
        if !cfgs.is_empty() {
            out.push((def, cfgs));
        }
    }
    out
}

/// Whether declared type `from` is `to` or holds it, through nesting.
fn reaches(ir: &Ir, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from.to_owned()];
    while let Some(name) = stack.pop() {
        if name == to {
            return true;
        }
        if !seen.insert(name.clone()) {
            continue;
        }
        let def = ir.type_def(&name);
        let members: Vec<&Member> = match &def.body {
            TypeBody::Struct(fields) => fields.iter().collect(),
            TypeBody::Enum(variants) => variants.iter().flat_map(|v| &v.fields).collect(),
        };
        for m in members {
            if let MemberType::Declared(inner) = &m.ty {
                stack.push(inner.clone());
            }
        }
    }
    false
}

/// `__send` (client) and `__receive` (server) for every declared type an op that runs on
/// Remote as one operation takes.
pub(super) fn emit(ir: &Ir, kernels: &[&Op], w: &mut Writer) {
    for (def, cfgs) in sent_types(ir, kernels) {
        let cfg = super::any_distinct(cfgs);
        let primitive = names::primitive_type(&def.name);
        w.blank();
        w.cfg(cfg.as_deref());
        w.open(format!("impl {primitive}<rt::Remote> {{"));
        w.doc(&[
            "Records this value in an op's operation on Remote: its tensors as inputs, its plain"
                .to_owned(),
            "fields (an enum's variant first) as scalars, in declaration order.".to_owned(),
        ]);
        w.open(format!("fn {SEND}(self, {CALL}: &mut rt::remote::Call) {{"));
        send_body(def, &primitive, w);
        w.close("}");
        w.close("}");

        w.blank();
        w.cfg(cfg.as_deref());
        w.open(format!("impl<B: rt::remote::BackendIr> {primitive}<B> {{"));
        w.doc(&[format!(
            "Reads a value that the client's `{SEND}` recorded, on a Remote server's backend `B`."
        )]);
        w.open(format!(
            "fn {RECEIVE}({ARGS}: &mut rt::remote::Args<'_, B>) -> Result<Self, String> {{"
        ));
        receive_body(def, &primitive, w);
        w.close("}");
        w.close("}");
    }
}

/// The statement that records member `m`, whose value is `value`.
fn send(m: &Member, value: &str) -> String {
    match &m.ty {
        MemberType::Tensor(t) => {
            let method = match t.container {
                Container::One => "input",
                Container::Option => "input_option",
                Container::Vec => "inputs",
            };
            format!("{CALL}.{method}({value});")
        }
        MemberType::Plain(_) => format!("{CALL}.arg(&{value});"),
        MemberType::Declared(_) => format!("{value}.{SEND}({CALL});"),
    }
}

fn send_body(def: &TypeDef, primitive: &str, w: &mut Writer) {
    match &def.body {
        TypeBody::Struct(fields) => {
            for m in fields {
                let name = m.name.as_deref().expect("named fields");
                w.line(send(m, &format!("self.{name}")));
            }
        }
        TypeBody::Enum(variants) => {
            w.open("match self {");
            for (tag, v) in variants.iter().enumerate() {
                let tag_line = format!("{CALL}.arg(&{tag}u32)");
                let bindings: Vec<String> = match v.kind {
                    VariantKind::Unit => Vec::new(),
                    VariantKind::Tuple => (0..v.fields.len()).map(names::tuple_binding).collect(),
                    VariantKind::Struct => v
                        .fields
                        .iter()
                        .map(|m| m.name.clone().expect("named fields"))
                        .collect(),
                };
                let pattern = match v.kind {
                    VariantKind::Unit => format!("{primitive}::{}", v.name),
                    VariantKind::Tuple => {
                        format!("{primitive}::{}({})", v.name, bindings.join(", "))
                    }
                    VariantKind::Struct => {
                        format!("{primitive}::{} {{ {} }}", v.name, bindings.join(", "))
                    }
                };
                if v.fields.is_empty() {
                    w.line(format!("{pattern} => {tag_line},"));
                    continue;
                }
                // rustfmt keeps a struct pattern on one line when its fields fit in
                // `struct_lit_width`, and puts one per line otherwise.
                let flat = bindings.join(", ");
                if v.kind == VariantKind::Struct && flat.len() > super::types::STRUCT_LIT_WIDTH {
                    w.open(format!("{primitive}::{} {{", v.name));
                    for b in &bindings {
                        w.line(format!("{b},"));
                    }
                    w.dedent();
                    w.line("} => {");
                    w.indent();
                } else {
                    w.open(format!("{pattern} => {{"));
                }
                w.line(format!("{tag_line};"));
                for (m, b) in v.fields.iter().zip(&bindings) {
                    w.line(send(m, b));
                }
                w.close("}");
            }
            w.close("}");
        }
    }
}

/// The expression that reads member `m` (`what` names it in the server's errors).
fn receive(m: &Member, what: &str) -> Doc {
    match &m.ty {
        MemberType::Tensor(t) => {
            let suffix = match t.container {
                Container::One => "",
                Container::Option => "_option",
                Container::Vec => "_vec",
            };
            format!("{ARGS}.{}{suffix}()?", kind_fn(t.kind)).into()
        }
        MemberType::Plain(_) => cat([
            call(format!("{ARGS}.arg"), [string_literal(what)]),
            "?".into(),
        ]),
        MemberType::Declared(inner) => cat([
            call(
                format!("{}::<B>::{RECEIVE}", names::primitive_type(inner)),
                [ARGS],
            ),
            "?".into(),
        ]),
    }
}

fn receive_body(def: &TypeDef, primitive: &str, w: &mut Writer) {
    match &def.body {
        TypeBody::Struct(fields) => {
            w.open(format!("Ok({primitive} {{"));
            for m in fields {
                let name = m.name.as_deref().expect("named fields");
                let what = format!("{}.{name}", def.name);
                w.line(cat([
                    format!("{name}: ").into(),
                    receive(m, &what),
                    ",".into(),
                ]));
            }
            w.close("})");
        }
        TypeBody::Enum(variants) => {
            w.line(format!(
                "let {}: u32 = {ARGS}.arg({})?;",
                names::VARIANT_TAG,
                string_literal(&def.name)
            ));
            w.open(format!("match {} {{", names::VARIANT_TAG));
            for (tag, v) in variants.iter().enumerate() {
                let path = format!("{primitive}::{}", v.name);
                match v.kind {
                    VariantKind::Unit => w.line(format!("{tag} => Ok({path}),")),
                    VariantKind::Tuple => {
                        let values: Vec<Doc> = v
                            .fields
                            .iter()
                            .enumerate()
                            .map(|(i, m)| receive(m, &format!("{}.{}.{i}", def.name, v.name)))
                            .collect();
                        w.arm(&tag.to_string(), call("Ok", [call(path, values)]));
                    }
                    VariantKind::Struct => {
                        w.open(format!("{tag} => Ok({path} {{"));
                        for m in &v.fields {
                            let name = m.name.as_deref().expect("named fields");
                            let what = format!("{}.{}.{name}", def.name, v.name);
                            w.line(cat([
                                format!("{name}: ").into(),
                                receive(m, &what),
                                ",".into(),
                            ]));
                        }
                        w.close("}),");
                    }
                }
            }
            w.line(format!(
                "{0} => Err(format!(\"`{1}` has no variant {{{0}}}\")),",
                names::OTHER_TAG,
                def.name
            ));
            w.close("}");
        }
    }
}

/// How a container reads in a declaration's text: `?` for an option, `[]` for a vec.
pub(super) fn container_mark(container: Container) -> &'static str {
    match container {
        Container::One => "",
        Container::Option => "?",
        Container::Vec => "[]",
    }
}

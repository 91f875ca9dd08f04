//! The `Autodiff<B, C>` implementations of ops that declare their backward pass: per op, a
//! derivative value with the gradient math (from the formulas, or a call of the backward
//! function) and the op's function on `Autodiff<B, C>`. The plumbing (nodes, saved tensors,
//! checkpointing, summing gradients back to each input's shape) is the runtime's `Tape`.

use super::code::{Doc, INDENT, Writer, call};
use super::{allow_complex_output, allow_many_arguments, primitive, signature};
use crate::formula::BinOp;
use crate::ir::{
    Arg, Backward, BackwardForm, Container, FieldSource, Ir, Op, Output, SavedValue, TensorArg,
    Term, TermNode,
};
use crate::names::{self, GRAD_RUNTIME as G};

mod body;
mod derivative;
mod formula;

use body::*;
use derivative::derivative_items;
use formula::*;

/// The generated `autodiff` module of the ops file, when any op declares a backward pass.
pub(super) fn module(ir: &Ir, w: &mut Writer) {
    if !ir.has_derived_autodiff() {
        return;
    }
    w.blank();
    w.doc(&[
        format!(
            "`Autodiff<B, C>` implementations of the ops whose backward pass `{}` declares,",
            ir.manifest_name
        ),
        "written from it: the generated `Dispatch` routing calls them for tracked inputs."
            .to_owned(),
    ]);
    w.cfg(Some(&ir.autodiff_cfg));
    w.open(format!("pub mod {} {{", names::AUTODIFF_MODULE));
    let composed: Vec<&Op> = ir.ops.iter().filter(|op| op.composed_autodiff()).collect();
    let mut declared: Vec<String> = Vec::new();
    for op in ir
        .ops
        .iter()
        .filter(|op| op.composed_autodiff() || op.backward.is_some())
    {
        declared_names(op, &mut declared);
    }
    // A declared backward pass rebuilds its struct inputs on `B`, and splits its struct outputs
    // into a node per float field, nested structs included.
    let mut rebuilt: Vec<String> = Vec::new();
    for op in ir.ops.iter().filter(|op| op.backward.is_some()) {
        for input in &op.inputs {
            if let Arg::Declared { name, .. } = &input.arg {
                rebuilt.push(name.clone());
            }
        }
        let mut outputs = Vec::new();
        declared_outputs(&op.output, &mut outputs);
        rebuilt.extend(outputs);
    }
    while let Some(ty) = rebuilt.pop() {
        if let crate::ir::TypeBody::Struct(members) = &ir.type_def(&ty).body {
            for m in members {
                if let crate::ir::MemberType::Declared(inner) = &m.ty
                    && !declared.contains(inner)
                {
                    declared.push(inner.clone());
                    rebuilt.push(inner.clone());
                }
            }
        }
    }
    let mut imports = vec![super::Use::new(format!("super::{}", names::RUNTIME))];
    imports.extend(
        declared
            .iter()
            .map(|name| super::Use::new(format!("super::{}", names::primitive_type(name)))),
    );
    super::uses(imports, w);
    if ir.ops.iter().any(|op| op.backward.is_some()) {
        w.line(format!(
            "use {}::{}::grad as {G};",
            names::RUNTIME,
            names::PRIVATE
        ));
    }
    let derived: Vec<(usize, &Op)> = ir
        .ops
        .iter()
        .enumerate()
        .filter(|(_, op)| op.backward.is_some())
        .collect();
    let types = names::derivative_structs(derived.iter().map(|(i, op)| (*i, op.name.as_str())));
    for ((_, op), ty) in derived.iter().zip(types) {
        let group = &ir.groups[op.group].name;
        op_items(ir, op, group, &ty, w);
    }
    for op in composed {
        composed_fn(op, &ir.groups[op.group].name, w);
    }
    w.close("}");
}

/// The declared types an output is or holds (a tuple's elements; not nested ones).
fn declared_outputs(out: &Output, acc: &mut Vec<String>) {
    match out {
        Output::Declared { name, .. } => acc.push(name.clone()),
        Output::Tuple(items) => items.iter().for_each(|o| declared_outputs(o, acc)),
        _ => {}
    }
}

/// The declared types op `op` takes or returns (not nested ones), in first-use order.
fn declared_names(op: &Op, acc: &mut Vec<String>) {
    let mut outputs = Vec::new();
    declared_outputs(&op.output, &mut outputs);
    let inputs = op.inputs.iter().filter_map(|input| match &input.arg {
        Arg::Declared { name, .. } => Some(name.clone()),
        _ => None,
    });
    for name in inputs.chain(outputs) {
        if !acc.contains(&name) {
            acc.push(name);
        }
    }
}

/// The `Autodiff<B, C>` kernel of a differentiable op with a `composition` and no `backward`:
/// the composition itself, run on `Autodiff<B, C>`, whose primitives record their own backward
/// passes (through the tensor fields of declared types too).
fn composed_fn(op: &Op, group: &str, w: &mut Writer) {
    let path = op
        .composition
        .as_deref()
        .expect("a composed op has a composition");
    w.blank();
    w.doc(&[
        format!(
            "[`{group}::{op}`](super::{group}::{op}) on `Autodiff<B, C>`: its composition run on \
             `Autodiff<B, C>`, whose primitives give the gradients.",
            op = op.name
        ),
        String::new(),
        "(The op declares no `backward`; `backward = \"hand-written\"` would make this kernel the"
            .to_owned(),
        "companion `...Autodiff` trait's.)".to_owned(),
    ]);
    allow_complex_output(op, w);
    allow_many_arguments(op.inputs.len(), w);
    let autodiff = "rt::Autodiff<B, C>";
    let params = super::params(op, autodiff);
    let head = format!("pub fn {}<B, C>", op.name);
    let predicates = [
        "B: rt::Backend".to_owned(),
        "C: rt::CheckpointStrategy".to_owned(),
    ];
    let sig = signature(
        head.clone(),
        params.clone(),
        super::primitive_returns(&op.output, autodiff, ""),
    );
    if matches!(op.output, Output::Unit) && !w.fits(&sig) {
        // Nothing returned and the parameters one per line: rustfmt writes `) where`.
        w.line(signature(head, params, " where"));
        where_predicates(&predicates, w);
    } else {
        w.line(sig);
        where_clause(&predicates, w);
    }
    w.line(super::forward_call(
        &format!("{}::<{autodiff}>", nested(path)),
        op,
    ));
    w.close("}");
}

/// `B: super::Trait + bounds...`.
fn bounds(group: &str, backward: &Backward) -> String {
    let mut b = format!("super::{group}");
    for bound in &backward.bounds {
        b.push_str(" + ");
        b.push_str(&nested(bound));
    }
    b
}

/// A manifest path (written as seen from the ops module) as seen from the `autodiff` module
/// inside it.
fn nested(path: &str) -> String {
    if let Some(rest) = path.strip_prefix("self::") {
        format!("super::{rest}")
    } else if path.starts_with("super::") || path == "super" {
        format!("super::{path}")
    } else {
        path.to_owned()
    }
}

/// The type of a field at the backend level (owned).
pub(super) fn field_type(op: &Op, source: &FieldSource) -> String {
    field_type_on(op, source, "B")
}

/// The type of a field on backend `backend` (`B`, `Self`), owned.
pub(super) fn field_type_on(op: &Op, source: &FieldSource, backend: &str) -> String {
    match source {
        FieldSource::Input(name) => {
            let input = op
                .inputs
                .iter()
                .find(|i| &i.name == name)
                .expect("a field's input");
            match &input.arg {
                Arg::Tensor(t) => owned_contained(t, &primitive(t.kind, backend)),
                Arg::Plain(ty) => ty.clone(),
                Arg::Device => format!("rt::DeviceOf<{backend}>"),
                Arg::Declared { .. } => {
                    unreachable!("validation: no declared backward pass with declared types")
                }
            }
        }
        FieldSource::Member { ty, .. } => ty.clone(),
        FieldSource::OutputMember(_) => format!("rt::FloatTensor<{backend}>"),
        FieldSource::Output(path) => match op.output.leaf_at(path) {
            Some(Output::Tensor(t)) => owned_contained(t, &primitive(t.kind, backend)),
            Some(Output::Plain(ty)) => ty.clone(),
            Some(other) => super::output_type(other, backend),
            None => unreachable!("a field's output element exists"),
        },
    }
}

fn owned_contained(t: &TensorArg, one: &str) -> String {
    match t.container {
        Container::One => one.to_owned(),
        Container::Option => format!("Option<{one}>"),
        Container::Vec => format!("Vec<{one}>"),
    }
}

fn uses_backend(op: &Op, backward: &Backward) -> bool {
    backward
        .fields
        .iter()
        .any(|f| field_type(op, &f.source).contains("<B>"))
}

fn op_items(ir: &Ir, op: &Op, group: &str, ty: &str, w: &mut Writer) {
    let backward = op.backward.as_ref().expect("an op with a backward pass");
    let ty = ty.to_owned();
    let bound = bounds(group, backward);
    if backward.member.is_empty() {
        derivative_items(op, group, backward, &ty, &bound, w);
    } else {
        // One node per float field of the declared output, each with its own derivative.
        for node in backward.nodes() {
            derivative_items(
                op,
                group,
                node,
                &names::member_derivative(&ty, &node.member),
                &bound,
                w,
            );
        }
    }

    // The op on `Autodiff<B, C>`.
    w.blank();
    let passes = if backward.member.is_empty() {
        format!("[`{ty}`] as its backward pass")
    } else {
        let list: Vec<String> = backward
            .nodes()
            .map(|n| format!("[`{}`]", names::member_derivative(&ty, &n.member)))
            .collect();
        format!(
            "{} as its backward passes, one node per float field",
            list.join(", ")
        )
    };
    let mut doc = vec![format!(
        "[`{group}::{op}`](super::{group}::{op}) on `Autodiff<B, C>`: the forward pass on `B`, and \
         {passes}.",
        op = op.name
    )];
    if backward.recompute {
        doc.push(String::new());
        doc.push(
            "Memory-bound (`checkpoint = \"recompute\"`): with gradient checkpointing, its output is"
                .to_owned(),
        );
        doc.push("recomputed when the backward pass needs it instead of being kept.".to_owned());
    }
    w.doc(&doc);
    allow_complex_output(op, w);
    allow_many_arguments(op.inputs.len(), w);
    let autodiff = "rt::Autodiff<B, C>";
    let params = super::params(op, autodiff);
    w.line(signature(
        format!("pub fn {}<B, C>", op.name),
        params,
        super::primitive_returns(&op.output, autodiff, ""),
    ));
    where_clause(
        &[
            format!("B: {bound}"),
            "C: rt::CheckpointStrategy".to_owned(),
        ],
        w,
    );
    autodiff_body(ir, op, group, backward, &ty, w);
    w.close("}");
}

/// `impl<B> Trait for Ty where B: bound {`, as rustfmt lays it out.
fn impl_head(tr: &str, ty: &str, bound: &str, w: &mut Writer) {
    w.line(format!("impl<B> {tr} for {ty}"));
    where_clause(&[format!("B: {bound}")], w);
}

/// `where` and its predicates, one per line, then the opening brace. A predicate too long for
/// its line puts each further bound on a line of its own, as rustfmt does.
pub(super) fn where_clause(predicates: &[String], w: &mut Writer) {
    w.line("where");
    where_predicates(predicates, w);
}

/// The predicates of a `where` clause, one per line, and the opening brace of the body.
fn where_predicates(predicates: &[String], w: &mut Writer) {
    w.indent();
    for p in predicates {
        let line = format!("{p},");
        if w.fits(&Doc::Text(line.clone())) || !p.contains(" + ") {
            w.line(line);
            continue;
        }
        let mut bounds = p.split(" + ");
        w.line(bounds.next().unwrap_or_default());
        w.indent();
        let rest: Vec<&str> = bounds.collect();
        for (i, bound) in rest.iter().enumerate() {
            let end = if i + 1 == rest.len() { "," } else { "" };
            w.line(format!("+ {bound}{end}"));
        }
        w.dedent();
    }
    w.dedent();
    w.open("{");
}

/// `callee` as written at the current depth, or, when `callee(` would not fit on its line,
/// an alias brought in by a `use` first (rustfmt would break the path's generics).
fn short_callee(callee: &str, path: &str, alias: &str, w: &mut Writer) -> String {
    if w.fits(&Doc::Text(format!("{INDENT}{INDENT}{callee}("))) {
        return callee.to_owned();
    }
    w.line(format!("use {path} as {alias};"));
    callee.replacen(path, alias, 1)
}

fn is_slot(t: &TensorArg) -> bool {
    t.kind == crate::ir::TensorKind::Float && t.container != Container::Vec
}

/// A taken slot as the kernel's argument: borrowed where the kernel borrows.
fn borrow_taken(t: &TensorArg, taken: String) -> String {
    match (t.borrowed, t.container) {
        (false, _) => taken,
        (true, Container::Option) => format!("{taken}.as_ref()"),
        (true, _) => format!("&{taken}"),
    }
}

/// The local of output element `path`.
fn out_name(path: &[usize]) -> String {
    let mut name = names::OUT.to_owned();
    for i in path {
        name.push_str(&format!("_{i}"));
    }
    name
}

/// A destructuring pattern of `out`; with `only`, every element but the one at `keep` is `_`.
fn pattern(out: &Output, path: &mut Vec<usize>, keep: &[usize], only: bool) -> String {
    match out {
        Output::Tuple(items) => {
            let parts: Vec<String> = items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    path.push(i);
                    let p = pattern(item, path, keep, only);
                    path.pop();
                    p
                })
                .collect();
            super::tuple_text(&parts)
        }
        _ if only && path.as_slice() != keep => "_".to_owned(),
        _ => out_name(path),
    }
}

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
    // A declared backward pass rebuilds its struct inputs on `B`, nested structs included.
    let mut rebuilt: Vec<String> = Vec::new();
    for op in ir.ops.iter().filter(|op| op.backward.is_some()) {
        for input in &op.inputs {
            if let Arg::Declared { name, .. } = &input.arg {
                rebuilt.push(name.clone());
            }
        }
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
        w.line(format!("use {}::__private::grad as {G};", names::RUNTIME));
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

/// The declared types op `op` takes or returns (not nested ones), in first-use order.
fn declared_names(op: &Op, acc: &mut Vec<String>) {
    fn output(out: &Output, acc: &mut Vec<String>) {
        match out {
            Output::Declared { name, .. } if !acc.contains(name) => acc.push(name.clone()),
            Output::Tuple(items) => items.iter().for_each(|o| output(o, acc)),
            _ => {}
        }
    }
    for input in &op.inputs {
        if let Arg::Declared { name, .. } = &input.arg
            && !acc.contains(name)
        {
            acc.push(name.clone());
        }
    }
    output(&op.output, acc);
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

/// The derivative value of `backward` (named `ty`) and its `Derivative` (and `Recompute`)
/// implementation: the whole backward pass, or one node's of an op returning a declared struct.
fn derivative_items(
    op: &Op,
    group: &str,
    backward: &Backward,
    ty: &str,
    bound: &str,
    w: &mut Writer,
) {
    let n = backward.reads.len();
    let ty = ty.to_owned();
    let generic = uses_backend(op, backward);
    let ty_b = if generic {
        format!("{ty}<B>")
    } else {
        ty.clone()
    };

    // The derivative value.
    w.blank();
    let how = match &backward.form {
        BackwardForm::Formulas(_) => "formulas",
        BackwardForm::Function { .. } => "function",
    };
    let mut doc = vec![format!(
        "The backward pass of [`{group}::{op}`](super::{group}::{op}), from its {how} ({}).",
        backward.location,
        op = op.name
    )];
    if !backward.member.is_empty() {
        let field = backward.member.join(".");
        doc.push(String::new());
        doc.push(format!(
            "The node of `output.{field}`: the part of each formula that reads `grad.{field}`."
        ));
    }
    if let BackwardForm::Formulas(formulas) = &backward.form {
        doc.push(String::new());
        for (slot, f) in op.float_slots().zip(formulas) {
            let text = f.as_ref().map_or("none", |f| f.text.as_str());
            doc.push(format!("- `{}`: `{text}`", slot.name));
        }
    }
    w.doc(&doc);
    w.line("#[derive(Clone, Debug)]");
    if backward.fields.is_empty() {
        w.line(format!("pub struct {ty};"));
    } else {
        let head = if generic {
            format!("pub struct {ty}<B: rt::Backend> {{")
        } else {
            format!("pub struct {ty} {{")
        };
        w.open(head);
        for field in &backward.fields {
            w.line(format!(
                "{}: {},",
                crate::names::formula_local(&field.name),
                field_type(op, &field.source)
            ));
        }
        w.close("}");
    }

    // `Derivative`.
    w.blank();
    // Formulas only call `B`'s primitives: bound by `Backend` alone, so that no op of the
    // user's trait shadows one (an op named `sigmoid`).
    let derivative_bound = match backward.form {
        BackwardForm::Formulas(_) => "rt::Backend".to_owned(),
        BackwardForm::Function { .. } => bound.to_owned(),
    };
    impl_head(
        &format!("{G}::Derivative<B, {n}>"),
        &ty_b,
        &derivative_bound,
        w,
    );
    w.line(format!(
        "const OP: &'static str = {};",
        super::string_literal(&op.name)
    ));
    let inputs: Vec<Doc> = op
        .float_slots()
        .map(|slot| super::string_literal(&slot.name).into())
        .collect();
    w.assign(
        format!("const INPUTS: [&'static str; {n}] = "),
        super::code::args("[", inputs, "]"),
        ";",
    );
    let gradients: Vec<Doc> = backward
        .gradients
        .iter()
        .map(|g| g.to_string().into())
        .collect();
    w.assign(
        format!("const GRADIENTS: [bool; {n}] = "),
        super::code::args("[", gradients, "]"),
        ";",
    );
    w.line(format!("const OUTPUT: bool = {};", backward.reads_output));
    w.blank();
    derivative_backward(op, backward, n, w);
    w.close("}");

    if backward.recompute {
        w.blank();
        impl_head(&format!("{G}::Recompute<B, {n}>"), &ty_b, bound, w);
        recompute_forward(op, group, n, w);
        w.close("}");
    }
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

/// `Derivative::backward`: the formulas, or a call of the backward function.
fn derivative_backward(op: &Op, backward: &Backward, n: usize, w: &mut Writer) {
    let float = "rt::FloatTensor<B>";
    let ret = format!(" -> [Option<{float}>; {n}] {{");
    let (saved_used, grad_used, tracked_used) = match &backward.form {
        BackwardForm::Function { args, .. } => (
            args.iter()
                .any(|a| matches!(a, SavedValue::Float(_) | SavedValue::Output)),
            true,
            n > 1,
        ),
        BackwardForm::Formulas(formulas) => {
            let any = formulas.iter().any(Option::is_some);
            let grad = formulas.iter().flatten().any(|f| term_uses_grad(&f.expr));
            (
                backward.reads.iter().any(|r| *r) || backward.reads_output,
                grad,
                any,
            )
        }
    };
    let saved = if saved_used {
        format!("mut {}: {G}::Saved<B, {n}>", names::SAVED)
    } else {
        format!("_: {G}::Saved<B, {n}>")
    };
    let grad = if grad_used {
        format!("{}: {float}", names::GRAD_LOCAL)
    } else {
        format!("_: {float}")
    };
    let tracked = if tracked_used {
        format!("{}: [bool; {n}]", names::TRACKED)
    } else {
        format!("_: [bool; {n}]")
    };
    if let BackwardForm::Formulas(formulas) = &backward.form
        && formulas.iter().flatten().any(|f| term_has_literal(&f.expr))
    {
        // The literals are the manifest's (`3.14159...` is the author's choice).
        w.line("#[allow(clippy::approx_constant)]");
    }
    w.open(signature(
        "fn backward",
        vec!["self".into(), saved.into(), grad.into(), tracked.into()],
        ret,
    ));
    match &backward.form {
        BackwardForm::Function {
            path,
            method_of,
            args,
        } => {
            let mut items: Vec<Doc> = args
                .iter()
                .map(|a| match a {
                    SavedValue::Float(i) => saved_input(op, *i),
                    SavedValue::Output => format!("{}.output()", names::SAVED).into(),
                    SavedValue::Field(name) => {
                        format!("self.{}", names::formula_local(name)).into()
                    }
                })
                .collect();
            items.push(names::GRAD_LOCAL.into());
            let callee = match method_of {
                Some(tr) => {
                    let tr = nested(tr);
                    let method = &path[path.len() - path.rsplit("::").next().unwrap_or("").len()..];
                    let callee = format!("<B as {tr}>::{method}");
                    short_callee(&callee, &tr, names::BACKWARD_TRAIT, w)
                }
                None => {
                    let path = nested(path);
                    short_callee(&format!("{path}::<B>"), &path, names::BACKWARD_FN, w)
                }
            };
            // One float input: the function returns its gradient; several: it is told which
            // are tracked and returns one `Option` each.
            if n > 1 {
                items.push(names::TRACKED.into());
                w.line(call(callee, items));
            } else {
                w.assign(
                    format!("let {} = ", names::GRADIENT),
                    call(callee, items),
                    ";",
                );
                w.line(format!("[Some({})]", names::GRADIENT));
            }
        }
        BackwardForm::Formulas(formulas) => {
            let mut read = Vec::new();
            for f in formulas.iter().flatten() {
                term_inputs(&f.expr, &mut read);
            }
            for (i, slot) in op.float_slots().enumerate() {
                if read.contains(&slot.name.as_str()) {
                    w.line(format!(
                        "let {} = {}.input({i});",
                        crate::names::slot_local(&slot.input.name, &slot.fields),
                        names::SAVED
                    ));
                }
            }
            if backward.reads_output {
                w.line(format!("let output = {}.output();", names::SAVED));
            }
            // The declared output's other float fields the formulas read, kept in the value.
            for field in &backward.fields {
                if matches!(field.source, FieldSource::OutputMember(_)) {
                    w.line(format!(
                        "let {0} = self.{0};",
                        crate::names::formula_local(&field.name)
                    ));
                }
            }
            // The numbers the formulas read (a recomputed op's value holds every argument).
            let mut scalars = Vec::new();
            for f in formulas.iter().flatten() {
                term_scalars(&f.expr, &mut scalars);
            }
            for field in backward
                .fields
                .iter()
                .filter(|f| scalars.contains(&f.name.as_str()))
            {
                w.line(format!(
                    "let {} = {G}::number(&self.{});",
                    names::formula_local(&field.name),
                    crate::names::formula_local(&field.name)
                ));
            }
            // Each tensor local is moved into its last read, so the last primitive that reads
            // it can work in place; a local read by several formulas is a `Reused`, which
            // moves into its last read in the last formula that runs.
            // A tensor subexpression a formula has twice (`tanh(x) * tanh(x)`) is computed
            // once, into a local that is then read like the others.
            let shared: Vec<Vec<Shared<'_>>> = formulas
                .iter()
                .map(|f| {
                    f.as_ref()
                        .map(|f| shared_subterms(&f.expr))
                        .unwrap_or_default()
                })
                .collect();
            let reads: Vec<Vec<&str>> = formulas
                .iter()
                .zip(&shared)
                .map(|(f, shared)| {
                    let mut acc = Vec::new();
                    if let Some(f) = f {
                        for local in shared {
                            tensor_reads(local.term, shared, true, &mut acc);
                        }
                        tensor_reads(&f.expr, shared, false, &mut acc);
                    }
                    acc
                })
                .collect();
            let mut reused: Vec<&str> = Vec::new();
            for (i, names_i) in reads.iter().enumerate() {
                // (A shared subterm's local lives in its formula's block.)
                let outer = names_i
                    .iter()
                    .filter(|n| !shared[i].iter().any(|s| s.name == **n));
                for name in outer {
                    if !reused.contains(name) && reads[i + 1..].iter().any(|r| r.contains(name)) {
                        reused.push(name);
                    }
                }
            }
            for name in &reused {
                let local = names::formula_local(name);
                w.line(format!("let mut {local} = {G}::Reused::new({local});"));
            }
            if !tracked_used {
                w.line(format!("[{}]", vec!["None"; n].join(", ")));
            } else {
                w.line(format!(
                    "let mut {} = [{}];",
                    names::GRADS,
                    vec!["None"; n].join(", ")
                ));
                for (i, f) in formulas.iter().enumerate() {
                    let Some(f) = f else { continue };
                    let mut bindings = Vec::new();
                    let input = op
                        .float_slots()
                        .nth(i)
                        .map_or(String::new(), |slot| slot.name);
                    let context = format!("op `{}`, input `{input}`: `{}`", op.name, f.text);
                    let mut left: Vec<(&str, usize)> = Vec::new();
                    for name in &reads[i] {
                        match left.iter_mut().find(|(n, _)| n == name) {
                            Some((_, count)) => *count += 1,
                            None => left.push((name, 1)),
                        }
                    }
                    let later: Vec<(&str, Vec<usize>)> = reused
                        .iter()
                        .map(|name| {
                            let users = (i + 1..reads.len())
                                .filter(|j| reads[*j].contains(name))
                                .collect();
                            (*name, users)
                        })
                        .collect();
                    let mut cx = Cx {
                        formula: &context,
                        bindings: &mut bindings,
                        left,
                        later: &later,
                        shared: &shared[i],
                    };
                    let locals: Vec<(String, Doc)> = shared[i]
                        .iter()
                        .map(|local| (local.name.clone(), term_inner(local.term, &mut cx).doc))
                        .collect();
                    let expr = term(&f.expr, &mut cx).doc;
                    w.open(format!("if {}[{i}] {{", names::TRACKED));
                    for (name, value) in bindings {
                        w.assign(format!("let {name} = "), value, ";");
                    }
                    for (name, value) in locals {
                        w.assign(format!("let {name} = "), value, ";");
                    }
                    w.assign(
                        format!("{}[{i}] = ", names::GRADS),
                        call("Some", [expr]),
                        ";",
                    );
                    w.close("}");
                }
                w.line(names::GRADS);
            }
        }
    }
    w.close("}");
}

/// `__saved.input(i)` (or `.optional(i)`) for float slot `i`.
fn saved_input(op: &Op, slot: usize) -> Doc {
    let t = op.float_slots().nth(slot).expect("a slot").tensor;
    let method = if t.container == Container::Option {
        "optional"
    } else {
        "input"
    };
    format!("{}.{method}({slot})", names::SAVED).into()
}

/// `Recompute::forward`: the op's kernel on `B`, from the float inputs and the fields.
fn recompute_forward(op: &Op, group: &str, n: usize, w: &mut Writer) {
    w.open(signature(
        "fn forward",
        vec![
            "&self".into(),
            format!("mut {}: {G}::Saved<B, {n}>", names::INPUTS).into(),
        ],
        " -> rt::FloatTensor<B> {",
    ));
    let mut slot = 0;
    let args: Vec<Doc> = op
        .inputs
        .iter()
        .map(|input| match &input.arg {
            Arg::Tensor(t) if is_slot(t) => {
                let taken = if t.container == Container::Option {
                    format!("{}.optional({slot})", names::INPUTS)
                } else {
                    format!("{}.input({slot})", names::INPUTS)
                };
                slot += 1;
                borrow_taken(t, taken).into()
            }
            Arg::Tensor(t) if t.borrowed => match t.container {
                Container::One | Container::Vec => format!("&self.{}", input.name).into(),
                Container::Option => format!("self.{}.as_ref()", input.name).into(),
            },
            Arg::Device => format!("&self.{}", input.name).into(),
            _ => format!("{G}::keep(&self.{})", input.name).into(),
        })
        .collect();
    let callee = short_callee(
        &format!("<B as super::{group}>::{}", op.name),
        &format!("super::{group}"),
        names::OPS_TRAIT,
        w,
    );
    let kernel = call(callee, args);
    let backward = op.backward.as_ref().expect("a backward pass");
    if backward.output_path.is_empty() {
        w.line(kernel);
    } else {
        let pattern = pattern(&op.output, &mut Vec::new(), &backward.output_path, true);
        w.assign(format!("let {pattern} = "), kernel, ";");
        w.line(out_name(&backward.output_path));
    }
    w.close("}");
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

/// The body of the op's function on `Autodiff<B, C>`.
fn autodiff_body(ir: &Ir, op: &Op, group: &str, backward: &Backward, ty: &str, w: &mut Writer) {
    let slots: Vec<Doc> = op
        .float_slots()
        .map(|slot| {
            let t = slot.tensor;
            let mut name = slot.input.name.clone();
            for field in &slot.fields {
                name.push('.');
                name.push_str(field);
            }
            match (t.borrowed, t.container) {
                (false, Container::Option) => name.clone(),
                (false, _) => format!("Some({name})"),
                (true, Container::Option) => format!("{name}.cloned()"),
                (true, _) => format!("Some({name}.clone())"),
            }
            .into()
        })
        .collect();
    // A recomputed op that reads its output needs every input to recompute it; the nodes of a
    // declared output keep what any of them reads.
    let reads: Vec<Doc> = (0..backward.reads.len())
        .map(|i| {
            (backward.nodes().any(|b| b.reads[i]) || (backward.recompute && backward.reads_output))
                .to_string()
                .into()
        })
        .collect();
    let nodes = backward.nodes().count();
    let (ctor, mut tape_args) = if backward.recompute {
        ("recomputed::<C>", Vec::new())
    } else if backward.member.is_empty() {
        ("new", Vec::new())
    } else {
        ("split", vec![Doc::from(nodes.to_string())])
    };
    let mut all_args = vec![
        super::code::args("[", slots, "]"),
        super::code::args("[", reads, "]"),
    ];
    all_args.append(&mut tape_args);
    w.assign(
        format!("let mut {} = ", names::TAPE),
        call(format!("{G}::Tape::{ctor}"), all_args),
        ";",
    );
    let field_names: Vec<&str> = backward
        .fields
        .iter()
        .filter(|f| matches!(f.source, FieldSource::Input(_)))
        .map(|f| f.name.as_str())
        .collect();
    // The plain struct fields the derivative keeps, copied before the struct moves.
    for field in &backward.fields {
        if let FieldSource::Member { input, fields, .. } = &field.source {
            w.line(format!(
                "let {} = {G}::keep(&{input}.{});",
                crate::names::formula_local(&field.name),
                fields.join(".")
            ));
        }
    }
    let mut slot = 0;
    let mut args: Vec<Doc> = Vec::new();
    for input in &op.inputs {
        match &input.arg {
            Arg::Declared { name: ty, .. } => {
                // The struct again on `B`: its float fields from the tape, the rest moved.
                let value = rebuild(ir, ty, &input.name, &mut slot);
                w.assign(format!("let {} = ", input.name), value, ";");
                args.push(input.name.clone().into());
            }
            Arg::Tensor(t) if is_slot(t) => {
                let method = if t.container == Container::Option {
                    "optional"
                } else {
                    "input"
                };
                w.line(format!(
                    "let {} = {}.{method}({slot});",
                    input.name,
                    names::TAPE
                ));
                slot += 1;
                args.push(borrow_local(t, &input.name).into());
            }
            // A kept argument the kernel takes by value: a copy for the kernel.
            Arg::Tensor(TensorArg {
                borrowed: false, ..
            })
            | Arg::Plain(_)
                if field_names.contains(&input.name.as_str()) && !is_reference(&input.arg) =>
            {
                args.push(format!("{G}::keep(&{})", input.name).into());
            }
            _ => args.push(input.name.clone().into()),
        }
    }
    let callee = short_callee(
        &format!("<B as super::{group}>::{}", op.name),
        &format!("super::{group}"),
        names::OPS_TRAIT,
        w,
    );
    let kernel = call(callee, args);
    if !backward.member.is_empty() {
        w.assign(format!("let {} = ", names::OUTPUT_LOCAL), kernel, ";");
        member_nodes(ir, op, backward, ty, w);
        return;
    }
    let single = backward.output_path.is_empty();
    if single {
        w.assign(format!("let {} = ", names::OUTPUT_LOCAL), kernel, ";");
    } else {
        let pattern = pattern(&op.output, &mut Vec::new(), &[], false);
        w.assign(format!("let {pattern} = "), kernel, ";");
    }
    // The derivative value: the kept arguments (moved now) and output elements.
    let value: Doc = if backward.fields.is_empty() {
        ty.to_owned().into()
    } else {
        let items: Vec<Doc> = backward
            .fields
            .iter()
            .map(|f| match &f.source {
                FieldSource::Input(name) => {
                    let input = op.inputs.iter().find(|i| &i.name == name).expect("input");
                    match &input.arg {
                        Arg::Tensor(t) if t.borrowed => match t.container {
                            Container::One => format!("{name}: {G}::keep({name})"),
                            Container::Option => format!("{name}: {name}.cloned()"),
                            Container::Vec => format!("{name}: {name}.to_vec()"),
                        },
                        Arg::Device => format!("{name}: {G}::keep({name})"),
                        _ => name.clone(),
                    }
                    .into()
                }
                FieldSource::Output(path) => {
                    format!("{}: {G}::keep(&{})", f.name, out_name(path)).into()
                }
                FieldSource::Member { .. } => crate::names::formula_local(&f.name).into(),
                FieldSource::OutputMember(_) => {
                    unreachable!("validation: only a declared output's nodes keep its fields")
                }
            })
            .collect();
        super::code::cat([format!("{ty} ").into(), super::code::struct_literal(items)])
    };
    w.assign(format!("let {} = ", names::DERIVATIVE), value, ";");
    let finish = if backward.recompute {
        "finish_recomputed"
    } else {
        "finish"
    };
    let float = if single {
        names::OUTPUT_LOCAL.to_owned()
    } else {
        out_name(&backward.output_path)
    };
    let finished = call(
        format!("{}.{finish}::<C, _>", names::TAPE),
        [names::DERIVATIVE.to_owned(), float],
    );
    if single {
        w.line(finished);
    } else {
        w.assign(
            format!("let {} = ", out_name(&backward.output_path)),
            finished,
            ";",
        );
        let whole = pattern(&op.output, &mut Vec::new(), &[], false);
        w.line(whole);
    }
}

/// The nodes of an op returning a declared struct (after its kernel's `__output`): each float
/// field's derivative value (the kept arguments and the other fields it reads, copied before any
/// field moves), each field registered as a node of its own, and the struct again on
/// `Autodiff<B, C>`, its other fields moved.
fn member_nodes(ir: &Ir, op: &Op, backward: &Backward, ty: &str, w: &mut Writer) {
    let output = names::OUTPUT_LOCAL;
    for node in backward.nodes() {
        let node_ty = names::member_derivative(ty, &node.member);
        let value: Doc = if node.fields.is_empty() {
            node_ty.clone().into()
        } else {
            let items: Vec<Doc> = node
                .fields
                .iter()
                .map(|f| match &f.source {
                    FieldSource::Input(name) => {
                        let input = op.inputs.iter().find(|i| &i.name == name).expect("input");
                        let value = if is_reference(&input.arg) {
                            name.clone()
                        } else {
                            format!("&{name}")
                        };
                        format!("{name}: {G}::keep({value})").into()
                    }
                    FieldSource::OutputMember(path) => format!(
                        "{}: {G}::keep(&{output}.{})",
                        crate::names::formula_local(&f.name),
                        path.join(".")
                    )
                    .into(),
                    FieldSource::Member { .. } => crate::names::formula_local(&f.name).into(),
                    FieldSource::Output(_) => {
                        unreachable!("validation: a declared output has no tuple elements")
                    }
                })
                .collect();
            super::code::cat([
                format!("{node_ty} ").into(),
                super::code::struct_literal(items),
            ])
        };
        w.assign(
            format!("let {} = ", names::member_derivative_local(&node.member)),
            value,
            ";",
        );
    }
    for node in backward.nodes() {
        w.assign(
            format!("let {} = ", names::member_output_local(&node.member)),
            call(
                format!("{}.finish_part::<C, _>", names::TAPE),
                [
                    names::member_derivative_local(&node.member),
                    format!("{output}.{}", node.member.join(".")),
                ],
            ),
            ";",
        );
    }
    let crate::ir::Output::Declared { name, .. } = &op.output else {
        unreachable!("validation: nodes belong to a declared struct output")
    };
    w.line(rebuild_output(ir, name, output, &mut Vec::new(), backward));
}

/// Declared struct `ty` on `Autodiff<B, C>`, from `value` (the kernel's struct on `B`): each float
/// field the node registered (its local), every other field moved.
fn rebuild_output(
    ir: &Ir,
    ty: &str,
    value: &str,
    path: &mut Vec<String>,
    backward: &Backward,
) -> Doc {
    let def = ir.type_def(ty);
    let crate::ir::TypeBody::Struct(members) = &def.body else {
        unreachable!("validation: a declared backward pass differentiates structs only")
    };
    let items: Vec<Doc> = members
        .iter()
        .map(|m| {
            let field = m.name.as_deref().expect("a struct's fields are named");
            path.push(field.to_owned());
            let item = match &m.ty {
                crate::ir::MemberType::Declared(inner) => super::code::cat([
                    format!("{field}: ").into(),
                    rebuild_output(ir, inner, value, path, backward),
                ]),
                _ if backward.nodes().any(|n| n.member == *path) => {
                    format!("{field}: {}", names::member_output_local(path)).into()
                }
                _ => format!("{field}: {value}.{}", path.join(".")).into(),
            };
            path.pop();
            item
        })
        .collect();
    super::code::cat([
        format!("{} ", names::primitive_type(ty)).into(),
        super::code::struct_literal(items),
    ])
}

/// Declared struct `ty` on `B`, rebuilt from `value` (the struct on `Autodiff<B, C>`): each
/// float field (a slot, counted by `slot`) taken from the tape, every other field moved (an int
/// or bool primitive of `Autodiff<B, C>` is `B`'s).
fn rebuild(ir: &Ir, ty: &str, value: &str, slot: &mut usize) -> Doc {
    let def = ir.type_def(ty);
    let crate::ir::TypeBody::Struct(members) = &def.body else {
        unreachable!("validation: a declared backward pass takes declared structs only")
    };
    let items: Vec<Doc> = members
        .iter()
        .map(|m| {
            let field = m.name.as_deref().expect("a struct's fields are named");
            let path = format!("{value}.{field}");
            match &m.ty {
                crate::ir::MemberType::Tensor(t) if is_slot(t) => {
                    let method = if t.container == Container::Option {
                        "optional"
                    } else {
                        "input"
                    };
                    let taken = format!("{field}: {}.{method}({})", names::TAPE, *slot);
                    *slot += 1;
                    taken.into()
                }
                crate::ir::MemberType::Declared(inner) => {
                    super::code::cat([format!("{field}: ").into(), rebuild(ir, inner, &path, slot)])
                }
                _ => format!("{field}: {path}").into(),
            }
        })
        .collect();
    super::code::cat([
        format!("{} ", names::primitive_type(ty)).into(),
        super::code::struct_literal(items),
    ])
}

fn is_reference(arg: &Arg) -> bool {
    match arg {
        Arg::Plain(ty) => ty.starts_with('&'),
        Arg::Tensor(t) => t.borrowed,
        Arg::Device => true,
        Arg::Declared { borrowed, .. } => *borrowed,
    }
}

fn borrow_local(t: &TensorArg, name: &str) -> String {
    borrow_taken(t, name.to_owned())
}

/// A formula term as Rust: a tensor expression over `B`'s primitives, or an `f64` one.
struct Emitted {
    doc: Doc,
    /// Binding strength of an `f64` expression (3: atomic, 2: product or negation, 1: sum).
    prec: u8,
}

fn text(s: impl Into<String>, prec: u8) -> Emitted {
    Emitted {
        doc: Doc::Text(s.into()),
        prec,
    }
}

fn flat(doc: &Doc) -> String {
    let mut s = String::new();
    doc.write_flat_into(&mut s);
    s
}

fn wrap(e: Emitted, at_least: u8) -> String {
    let s = flat(&e.doc);
    if e.prec >= at_least {
        s
    } else {
        format!("({s})")
    }
}

/// [`wrap`] as a doc: a number expression that holds a call (`dim_size(x, 0)`, which carries
/// its formula's text) stays breakable, so that rustfmt's layout of calls applies inside it.
fn wrap_doc(e: Emitted, at_least: u8) -> Doc {
    match e.doc {
        doc if e.prec >= at_least => doc,
        doc if !doc.breakable() => Doc::Text(format!("({})", flat(&doc))),
        doc => Doc::Cat(vec![Doc::Text("(".into()), doc, Doc::Text(")".into())]),
    }
}

fn prim(name: &str, args: Vec<Doc>) -> Emitted {
    Emitted {
        doc: call(format!("B::{name}"), args),
        prec: 3,
    }
}

fn helper(name: &str, args: Vec<Doc>) -> Emitted {
    Emitted {
        doc: call(format!("{G}::{name}::<B>"), args),
        prec: 3,
    }
}

fn scalar(e: Emitted) -> Doc {
    call(format!("{G}::scalar"), [e.doc])
}

/// An `f64` literal (typed, so that a method such as `2.0_f64.sqrt()` resolves).
fn number_literal(v: f64) -> String {
    format!("{v:?}_f64")
}

/// Whether `t` has a number literal.
fn term_has_literal(t: &Term) -> bool {
    match &t.node {
        TermNode::Number(_) => true,
        TermNode::Neg(i) => term_has_literal(i),
        TermNode::Binary(_, a, b) => term_has_literal(a) || term_has_literal(b),
        TermNode::Call(_, args) => args.iter().any(term_has_literal),
        _ => false,
    }
}

/// The numeric plain inputs `t` reads.
fn term_scalars<'t>(t: &'t Term, acc: &mut Vec<&'t str>) {
    match &t.node {
        TermNode::Scalar(name) => acc.push(name),
        TermNode::Neg(i) => term_scalars(i, acc),
        TermNode::Binary(_, a, b) => {
            term_scalars(a, acc);
            term_scalars(b, acc);
        }
        TermNode::Call(_, args) => args.iter().for_each(|a| term_scalars(a, acc)),
        _ => {}
    }
}

/// The float inputs `t` reads.
fn term_inputs<'t>(t: &'t Term, acc: &mut Vec<&'t str>) {
    match &t.node {
        TermNode::Input(name) => acc.push(name),
        TermNode::Neg(i) => term_inputs(i, acc),
        TermNode::Binary(_, a, b) => {
            term_inputs(a, acc);
            term_inputs(b, acc);
        }
        TermNode::Call(_, args) => args.iter().for_each(|a| term_inputs(a, acc)),
        _ => {}
    }
}

fn term_uses_grad(t: &Term) -> bool {
    match &t.node {
        TermNode::Grad => true,
        TermNode::Neg(i) => term_uses_grad(i),
        TermNode::Binary(_, a, b) => term_uses_grad(a) || term_uses_grad(b),
        TermNode::Call(_, args) => args.iter().any(term_uses_grad),
        _ => false,
    }
}

/// A formula being emitted: its text (for runtime messages), the number subexpressions
/// bound to locals so that no line grows past rustfmt's width, and how its tensor locals are
/// read.
struct Cx<'a> {
    formula: &'a str,
    bindings: &'a mut Vec<(String, Doc)>,
    /// The reads of each tensor local this formula has still to emit.
    left: Vec<(&'a str, usize)>,
    /// Each `Reused` local (read by several formulas) and the later formulas that read it.
    later: &'a [(&'a str, Vec<usize>)],
    /// The tensor subexpressions this formula computes once, into locals.
    shared: &'a [Shared<'a>],
}

/// A tensor subexpression a formula has more than once: computed once into local `name`.
struct Shared<'t> {
    term: &'t Term,
    /// The term's structure (`Debug`), what equal subexpressions share.
    key: String,
    name: String,
}

/// The shared subterm `t` is, if any (its local is read instead of computing `t` again).
fn shared_of<'s, 't>(t: &Term, shared: &'s [Shared<'t>]) -> Option<&'s Shared<'t>> {
    if !compound(t) {
        return None;
    }
    let key = format!("{t:?}");
    shared.iter().find(|s| s.key == key)
}

/// Whether `t` is a compound tensor term worth a local of its own (not a plain read).
fn compound(t: &Term) -> bool {
    t.tensor
        && matches!(
            t.node,
            TermNode::Neg(_) | TermNode::Binary(..) | TermNode::Call(..)
        )
}

/// Every compound tensor subterm of `t` (with `t`), once per occurrence.
fn subterms<'t>(t: &'t Term, acc: &mut Vec<&'t Term>) {
    if compound(t) {
        acc.push(t);
    }
    match &t.node {
        TermNode::Neg(i) => subterms(i, acc),
        TermNode::Binary(_, a, b) => {
            subterms(a, acc);
            subterms(b, acc);
        }
        TermNode::Call(_, args) => args.iter().for_each(|a| subterms(a, acc)),
        _ => {}
    }
}

/// How often a term of structure `key` occurs in `t`, not looking inside the terms `atomic`
/// already names.
fn occurrences(t: &Term, key: &str, atomic: &[String]) -> usize {
    let own = format!("{t:?}");
    if own == key {
        return 1;
    }
    if atomic.contains(&own) {
        return 0;
    }
    match &t.node {
        TermNode::Neg(i) => occurrences(i, key, atomic),
        TermNode::Binary(_, a, b) => occurrences(a, key, atomic) + occurrences(b, key, atomic),
        TermNode::Call(_, args) => args.iter().map(|a| occurrences(a, key, atomic)).sum(),
        _ => 0,
    }
}

/// The compound tensor subterms `t` has more than once, largest first chosen (a repeated
/// subterm of a repeated one counts once), in the order their locals are computed: smallest
/// first, so that a larger one can read a smaller one's local.
fn shared_subterms(t: &Term) -> Vec<Shared<'_>> {
    let mut candidates = Vec::new();
    subterms(t, &mut candidates);
    let mut keyed: Vec<(String, &Term)> =
        candidates.iter().map(|c| (format!("{c:?}"), *c)).collect();
    keyed.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
    keyed.dedup_by(|a, b| a.0 == b.0);
    let mut chosen: Vec<(String, &Term)> = Vec::new();
    for (key, term) in keyed {
        let atomic: Vec<String> = chosen.iter().map(|(k, _)| k.clone()).collect();
        // (The whole formula is never shared with itself.)
        if occurrences(t, &key, &atomic) >= 2 {
            chosen.push((key, term));
        }
    }
    chosen.reverse();
    chosen
        .into_iter()
        .enumerate()
        .map(|(k, (key, term))| Shared {
            term,
            key,
            name: names::shared_local(k),
        })
        .collect()
}

impl Cx<'_> {
    /// A read of tensor local `name`: a clone while another read may follow, the local itself
    /// at the last.
    fn read(&mut self, name: &str) -> String {
        let local = names::formula_local(name);
        let left = self
            .left
            .iter_mut()
            .find(|(n, _)| *n == name)
            .map(|(_, count)| {
                *count -= 1;
                *count
            })
            .expect("every read was counted");
        match self.later.iter().find(|(n, _)| *n == name) {
            None if left > 0 => format!("{local}.clone()"),
            None => local,
            Some(_) if left > 0 => format!("{local}.get()"),
            Some((_, users)) if users.is_empty() => format!("{local}.give(false)"),
            Some((_, users)) => {
                let more: Vec<String> = users
                    .iter()
                    .map(|j| format!("{}[{j}]", names::TRACKED))
                    .collect();
                format!("{local}.give({})", more.join(" || "))
            }
        }
    }
}

/// The tensor locals `t` reads (the incoming gradient, the output, float inputs, the locals
/// of `shared` subterms), once per read, in the order the emitted expression reads them; `top`:
/// `t` is a shared subterm's own definition, not a read of its local.
fn tensor_reads<'t>(t: &'t Term, shared: &'t [Shared<'t>], top: bool, acc: &mut Vec<&'t str>) {
    if !top && let Some(local) = shared_of(t, shared) {
        acc.push(&local.name);
        return;
    }
    match &t.node {
        TermNode::Grad => acc.push(names::GRAD_LOCAL),
        TermNode::Output => acc.push("output"),
        TermNode::Input(name) | TermNode::Kept(name) => acc.push(name),
        TermNode::Neg(i) => tensor_reads(i, shared, false, acc),
        TermNode::Binary(_, a, b) => {
            tensor_reads(a, shared, false, acc);
            tensor_reads(b, shared, false, acc);
        }
        TermNode::Call(_, args) => args
            .iter()
            .for_each(|a| tensor_reads(a, shared, false, acc)),
        _ => {}
    }
}

/// `term` as Rust; a long number-valued part is bound to a local (`let __n0 = ...;`) first,
/// and a shared tensor subterm reads its local.
fn term(t: &Term, cx: &mut Cx<'_>) -> Emitted {
    if let Some(name) = shared_of(t, cx.shared).map(|s| s.name.clone()) {
        return text(cx.read(&name), 3);
    }
    let e = term_inner(t, cx);
    // (A number that reads a tensor, `dim_size(x, -1)`, stays in place: a binding would run
    // before the reads to its left, which may move the tensor it reads.)
    if t.tensor || flat(&e.doc).len() <= 40 || term_reads_tensor(t) {
        return e;
    }
    let local = names::number_local(cx.bindings.len());
    cx.bindings.push((local.clone(), e.doc));
    text(local, 3)
}

/// Whether `t` reads a tensor local (the incoming gradient, the output, a float input).
fn term_reads_tensor(t: &Term) -> bool {
    match &t.node {
        TermNode::Grad | TermNode::Output | TermNode::Input(_) => true,
        TermNode::Neg(i) => term_reads_tensor(i),
        TermNode::Binary(_, a, b) => term_reads_tensor(a) || term_reads_tensor(b),
        TermNode::Call(_, args) => args.iter().any(term_reads_tensor),
        _ => false,
    }
}

fn term_inner(t: &Term, cx: &mut Cx<'_>) -> Emitted {
    let formula = cx.formula;
    match &t.node {
        TermNode::Number(v) => text(number_literal(*v), 3),
        TermNode::Dim(d) => text(d.to_string(), 3),
        TermNode::Grad => text(cx.read(names::GRAD_LOCAL), 3),
        TermNode::Output => text(cx.read("output"), 3),
        TermNode::Input(name) | TermNode::Kept(name) => text(cx.read(name), 3),
        TermNode::Scalar(name) => text(names::formula_local(name), 3),
        TermNode::Neg(inner) => {
            let tensor = inner.tensor;
            let inner = term(inner, cx);
            if tensor {
                prim("float_neg", vec![inner.doc])
            } else {
                Emitted {
                    doc: match wrap_doc(inner, 3) {
                        Doc::Text(t) => Doc::Text(format!("-{t}")),
                        doc => Doc::Cat(vec![Doc::Text("-".into()), doc]),
                    },
                    prec: 2,
                }
            }
        }
        TermNode::Binary(op, a, b) => binary(*op, a, b, cx),
        TermNode::Call(name, args) => function(name, args, cx, formula),
    }
}

fn binary(op: BinOp, a: &Term, b: &Term, cx: &mut Cx<'_>) -> Emitted {
    let (ta, tb) = (a.tensor, b.tensor);
    let (ea, eb) = (term(a, cx), term(b, cx));
    let stem = match op {
        BinOp::Add => "add",
        BinOp::Sub => "sub",
        BinOp::Mul => "mul",
        BinOp::Div => "div",
    };
    match (ta, tb) {
        (true, true) => prim(&format!("float_{stem}"), vec![ea.doc, eb.doc]),
        (true, false) => prim(&format!("float_{stem}_scalar"), vec![ea.doc, scalar(eb)]),
        (false, true) => match op {
            BinOp::Add | BinOp::Mul => {
                prim(&format!("float_{stem}_scalar"), vec![eb.doc, scalar(ea)])
            }
            BinOp::Sub => helper("rsub", vec![ea.doc, eb.doc]),
            BinOp::Div => helper("rdiv", vec![ea.doc, eb.doc]),
        },
        (false, false) => {
            let prec = match op {
                BinOp::Add | BinOp::Sub => 1,
                BinOp::Mul | BinOp::Div => 2,
            };
            // Left-associative: the right operand binds tighter to keep the written grouping.
            let lhs = wrap_doc(ea, prec);
            let rhs = wrap_doc(eb, prec + 1);
            Emitted {
                doc: super::code::infix(lhs, op.symbol(), rhs),
                prec,
            }
        }
    }
}

fn function(name: &str, args: &[Term], cx: &mut Cx<'_>, formula: &str) -> Emitted {
    let kinds: Vec<bool> = args.iter().map(|a| a.tensor).collect();
    let mut e: Vec<Emitted> = args.iter().map(|a| term(a, cx)).collect();
    let unary_tensor = |stem: &str, e: Emitted| prim(stem, vec![e.doc]);
    // A method of `f64`; on an operand that may break (it holds a call), called as a function
    // (`f64::exp(..)`), which breaks as calls do.
    let method = |m: &str, e: Emitted| {
        if e.doc.breakable() {
            Emitted {
                doc: call(format!("f64::{m}"), [e.doc]),
                prec: 3,
            }
        } else {
            text(format!("{}.{m}()", wrap(e, 3)), 3)
        }
    };
    match (name, kinds.as_slice()) {
        ("sigmoid", [true]) => unary_tensor("sigmoid", e.remove(0)),
        ("sigmoid", [false]) => match e.remove(0) {
            x if !x.doc.breakable() => text(format!("1.0 / (1.0 + (-{}).exp())", wrap(x, 3)), 2),
            // An operand that may break: the same expression, with `f64::exp` called as a function.
            x => {
                let negated = Doc::Cat(vec![Doc::Text("-".into()), wrap_doc(x, 3)]);
                let sum =
                    super::code::infix(Doc::Text("1.0".into()), "+", call("f64::exp", [negated]));
                Emitted {
                    doc: super::code::infix(
                        Doc::Text("1.0".into()),
                        "/",
                        Doc::Cat(vec![Doc::Text("(".into()), sum, Doc::Text(")".into())]),
                    ),
                    prec: 2,
                }
            }
        },
        ("log", [false]) => method("ln", e.remove(0)),
        (
            "exp" | "log" | "sqrt" | "tanh" | "abs" | "sin" | "cos" | "recip" | "sign" | "erf",
            [true],
        ) => unary_tensor(&format!("float_{name}"), e.remove(0)),
        (_, [false]) => method(name, e.remove(0)),
        ("powf", [true, false]) => {
            let (a, b) = (e.remove(0), e.remove(0));
            prim("float_powf_scalar", vec![a.doc, scalar(b)])
        }
        ("powf", [true, true]) => {
            let (a, b) = (e.remove(0), e.remove(0));
            prim("float_powf", vec![a.doc, b.doc])
        }
        ("powf", [false, true]) => {
            let (a, b) = (e.remove(0), e.remove(0));
            helper("rpow", vec![a.doc, b.doc])
        }
        ("powf", [false, false]) => {
            let (a, b) = (e.remove(0), e.remove(0));
            if a.doc.breakable() || b.doc.breakable() {
                Emitted {
                    doc: call("f64::powf", [a.doc, b.doc]),
                    prec: 3,
                }
            } else {
                text(format!("{}.powf({})", wrap(a, 3), flat(&b.doc)), 3)
            }
        }
        ("relu_mask", _) => helper("relu_mask", vec![e.remove(0).doc]),
        (crate::formula::RELU_GATE, _) => {
            let (mask, value) = (e.remove(0), e.remove(0));
            helper(crate::formula::RELU_GATE, vec![mask.doc, value.doc])
        }
        ("gt" | "ge" | "lt" | "le", _) => {
            let (a, b) = (e.remove(0), e.remove(0));
            compare(name, kinds[0], kinds[1], a, b)
        }
        ("where", _) => {
            let operand = |tensor: bool, e: Emitted| -> Doc {
                let variant = if tensor { "Tensor" } else { "Number" };
                call(format!("{G}::Operand::{variant}"), [e.doc])
            };
            let (c, a, b) = (e.remove(0), e.remove(0), e.remove(0));
            let a = operand(kinds[1], a);
            let b = operand(kinds[2], b);
            helper("select", vec![c.doc, a, b])
        }
        ("clamp", _) => {
            let (x, lo, hi) = (e.remove(0), e.remove(0), e.remove(0));
            prim("float_clamp", vec![x.doc, scalar(lo), scalar(hi)])
        }
        ("dim_size", _) => {
            let (x, d) = (e.remove(0), e.remove(0));
            helper(
                name,
                vec![x.doc, d.doc, super::string_literal(formula).into()],
            )
        }
        ("sum_dim" | "mean_dim", _) => {
            let (x, d) = (e.remove(0), e.remove(0));
            helper(
                name,
                vec![x.doc, d.doc, super::string_literal(formula).into()],
            )
        }
        _ => unreachable!("validation checked `{name}`'s arguments"),
    }
}

fn compare(name: &str, ta: bool, tb: bool, a: Emitted, b: Emitted) -> Emitted {
    let (flipped, variant) = match name {
        "gt" => ("lt", "Greater"),
        "ge" => ("le", "GreaterEqual"),
        "lt" => ("gt", "Lower"),
        _ => ("ge", "LowerEqual"),
    };
    let how = |v: &str| Doc::Text(format!("{G}::Compare::{v}"));
    let flipped_variant = match flipped {
        "gt" => "Greater",
        "ge" => "GreaterEqual",
        "lt" => "Lower",
        _ => "LowerEqual",
    };
    match (ta, tb) {
        (true, true) => helper("compare_tensors", vec![a.doc, b.doc, how(variant)]),
        (true, false) => helper("compare", vec![a.doc, b.doc, how(variant)]),
        (false, true) => helper("compare", vec![b.doc, a.doc, how(flipped_variant)]),
        (false, false) => {
            let op = match name {
                "gt" => ">",
                "ge" => ">=",
                "lt" => "<",
                _ => "<=",
            };
            text(
                format!(
                    "if {} {op} {} {{ 1.0_f64 }} else {{ 0.0_f64 }}",
                    wrap(a, 1),
                    wrap(b, 1)
                ),
                0,
            )
        }
    }
}

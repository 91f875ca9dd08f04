//! The derivative value of an op's backward pass and its `Derivative` (and `Recompute`)
//! implementation: the gradient math from the formulas or a call of the backward function, the
//! saved tensors it reads, and for a recomputed op the forward pass run again.

use super::*;

/// The derivative value of `backward` (named `ty`) and its `Derivative` (and `Recompute`)
/// implementation: the whole backward pass, or one node's of an op returning a declared struct.
pub(super) fn derivative_items(
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
        crate::emit::string_literal(&op.name)
    ));
    let inputs: Vec<Doc> = op
        .float_slots()
        .map(|slot| crate::emit::string_literal(&slot.name).into())
        .collect();
    w.assign(
        format!("const INPUTS: [&'static str; {n}] = "),
        crate::emit::code::args("[", inputs, "]"),
        ";",
    );
    let gradients: Vec<Doc> = backward
        .gradients
        .iter()
        .map(|g| g.to_string().into())
        .collect();
    w.assign(
        format!("const GRADIENTS: [bool; {n}] = "),
        crate::emit::code::args("[", gradients, "]"),
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

//! The op's function on `Autodiff<B, C>`: its float inputs onto the runtime's `Tape`, the
//! forward pass on `B`, the derivative value built from what the pass keeps, and the output
//! (a declared struct's float fields each a node of its own) rebuilt around the nodes.

use super::*;

/// The body of the op's function on `Autodiff<B, C>`.
pub(super) fn autodiff_body(
    ir: &Ir,
    op: &Op,
    group: &str,
    backward: &Backward,
    ty: &str,
    w: &mut Writer,
) {
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
        super::super::code::args("[", slots, "]"),
        super::super::code::args("[", reads, "]"),
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
        super::super::code::cat([
            format!("{ty} ").into(),
            super::super::code::struct_literal(items),
        ])
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
pub(super) fn member_nodes(ir: &Ir, op: &Op, backward: &Backward, ty: &str, w: &mut Writer) {
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
            super::super::code::cat([
                format!("{node_ty} ").into(),
                super::super::code::struct_literal(items),
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
pub(super) fn rebuild_output(
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
                crate::ir::MemberType::Declared(inner) => super::super::code::cat([
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
    super::super::code::cat([
        format!("{} ", names::primitive_type(ty)).into(),
        super::super::code::struct_literal(items),
    ])
}

/// Declared struct `ty` on `B`, rebuilt from `value` (the struct on `Autodiff<B, C>`): each
/// float field (a slot, counted by `slot`) taken from the tape, every other field moved (an int
/// or bool primitive of `Autodiff<B, C>` is `B`'s).
pub(super) fn rebuild(ir: &Ir, ty: &str, value: &str, slot: &mut usize) -> Doc {
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
                crate::ir::MemberType::Declared(inner) => super::super::code::cat([
                    format!("{field}: ").into(),
                    rebuild(ir, inner, &path, slot),
                ]),
                _ => format!("{field}: {path}").into(),
            }
        })
        .collect();
    super::super::code::cat([
        format!("{} ", names::primitive_type(ty)).into(),
        super::super::code::struct_literal(items),
    ])
}

pub(super) fn is_reference(arg: &Arg) -> bool {
    match arg {
        Arg::Plain(ty) => ty.starts_with('&'),
        Arg::Tensor(t) => t.borrowed,
        Arg::Device => true,
        Arg::Declared { borrowed, .. } => *borrowed,
    }
}

pub(super) fn borrow_local(t: &TensorArg, name: &str) -> String {
    borrow_taken(t, name.to_owned())
}

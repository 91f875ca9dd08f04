//! What the op check reads back: the op's outputs as the check closure returns them, leaf by
//! leaf ([`OutLeaf`]), declared values holding an enum walked at run time.

use super::*;

/// One value the check closure returns.
pub(super) enum OutLeaf {
    /// A tensor leaf and how to reach it.
    Tensor { tensor: TensorArg, expr: String },
    /// A plain output.
    Plain,
    /// A declared value holding an enum: its leaves are known only at run time ([`walk`]).
    Walk { ty: String, expr: String },
}

/// The pattern that binds the op's output, pushing each leaf (in the order the runtime numbers
/// them) to `acc`: a tensor as `__out_N`, a declared value whole as `__out_N` and, when it holds
/// no enum, its tensors as its fields.
pub(super) fn output_leaves(ir: &Ir, out: &Output, acc: &mut Vec<OutLeaf>) -> String {
    match out {
        Output::Unit => "()".to_owned(),
        Output::Plain(_) => {
            acc.push(OutLeaf::Plain);
            "_".to_owned()
        }
        Output::Tensor(t) => {
            let name = names::check_output(acc.len());
            acc.push(OutLeaf::Tensor {
                tensor: t.clone(),
                expr: name.clone(),
            });
            name
        }
        Output::Tuple(items) => {
            let parts: Vec<String> = items.iter().map(|i| output_leaves(ir, i, acc)).collect();
            crate::emit::tuple_text(&parts)
        }
        Output::Declared {
            name: ty, leaves, ..
        } => {
            let name = names::check_output(acc.len());
            if has_enum(ir, ty) {
                enum_leaves(ir, ty, &name, acc);
            } else {
                for leaf in leaves {
                    acc.push(OutLeaf::Tensor {
                        tensor: leaf.tensor.clone(),
                        expr: format!("{name}.{}", leaf.label()),
                    });
                }
            }
            name
        }
    }
}

/// The leaves of declared value `expr` of type `ty`, which holds an enum: a struct's members in
/// order (its tensors as leaves of their own), each enum a [`OutLeaf::Walk`]. (So a struct's
/// tensors before its first enum start the list the closure returns, which clippy wants
/// written as `vec![..]` rather than pushed.)
fn enum_leaves(ir: &Ir, ty: &str, expr: &str, acc: &mut Vec<OutLeaf>) {
    let TypeBody::Struct(fields) = &ir.type_def(ty).body else {
        acc.push(OutLeaf::Walk {
            ty: ty.to_owned(),
            expr: expr.to_owned(),
        });
        return;
    };
    for m in fields {
        let field = m.name.as_deref().expect("struct fields are named");
        let at = format!("{expr}.{field}");
        match &m.ty {
            MemberType::Tensor(t) => acc.push(OutLeaf::Tensor {
                tensor: t.clone(),
                expr: at,
            }),
            MemberType::Declared(inner) => enum_leaves(ir, inner, &at, acc),
            MemberType::Plain(_) => {}
        }
    }
}

pub(super) fn value_doc(leaf: &OutLeaf) -> Doc {
    let (t, expr) = match leaf {
        OutLeaf::Tensor { tensor, expr } => (tensor, expr),
        OutLeaf::Plain => return Doc::Text("check::Value::plain()".to_owned()),
        OutLeaf::Walk { .. } => unreachable!("an enum's values are pushed by `walk`"),
    };
    tensor_value(t, expr)
}

/// `check::Value::...(expr)` of a tensor leaf.
pub(super) fn tensor_value(t: &TensorArg, expr: &str) -> Doc {
    // A quantized output is compared as the float it dequantizes to.
    let kind = match t.kind {
        TensorKind::Quantized => TensorKind::Float,
        kind => kind,
    };
    let ctor = kind.check_name(t.container).expect("not quantized");
    Doc::Text(format!("check::Value::{ctor}({expr})"))
}

/// `__leaves.push(value);`.
pub(super) fn push_value(w: &mut Writer, value: Doc) {
    w.line(crate::emit::code::cat([
        call(format!("{}.push", names::CHECK_LEAVES), [value]),
        ";".into(),
    ]));
}

/// Pushes the leaves of declared value `expr` (of type `ty`): a struct's tensors in order, an
/// enum's variant (`check::Value::variant`) and then its tensors, by a `match`.
pub(super) fn walk(
    w: &mut Writer,
    ir: &Ir,
    config: &CheckConfig,
    ty: &str,
    expr: &str,
    bindings: &mut usize,
) {
    let def = ir.type_def(ty);
    match &def.body {
        TypeBody::Struct(fields) => {
            for m in fields {
                let field = m.name.as_deref().expect("struct fields are named");
                member(w, ir, config, m, &format!("{expr}.{field}"), bindings);
            }
        }
        TypeBody::Enum(variants) => {
            let path = format!("{}::{}", config.ops, names::primitive_type(&def.name));
            w.open(format!("match {expr} {{"));
            for v in variants {
                // Each field that holds a tensor is bound; plain ones are left out.
                let bound: Vec<Option<String>> = v
                    .fields
                    .iter()
                    .map(|m| {
                        matches!(m.ty, MemberType::Tensor(_) | MemberType::Declared(_)).then(|| {
                            *bindings += 1;
                            names::tuple_binding(*bindings - 1)
                        })
                    })
                    .collect();
                let head = format!("{path}::{}", v.name);
                match v.kind {
                    VariantKind::Unit => w.open(format!("{head} => {{")),
                    VariantKind::Tuple => {
                        let parts: Vec<Doc> = bound
                            .iter()
                            .map(|b| b.clone().unwrap_or_else(|| "_".to_owned()).into())
                            .collect();
                        // A pattern's fields break one per line, never filling lines as
                        // short call arguments do (rustfmt's mixed layout is for expressions).
                        w.open(crate::emit::code::cat([
                            head.into(),
                            crate::emit::code::list("(", parts, ")"),
                            " => {".into(),
                        ]));
                    }
                    VariantKind::Struct => {
                        // Every field is named (`field: _` when plain): rustfmt lays out a rest
                        // pattern (`..`) by rules of its own.
                        let parts: Vec<String> = v
                            .fields
                            .iter()
                            .zip(&bound)
                            .map(|(m, b)| {
                                let name = m.name.as_deref().expect("named fields");
                                format!("{name}: {}", b.as_deref().unwrap_or("_"))
                            })
                            .collect();
                        // rustfmt keeps a struct pattern on one line when its fields fit in
                        // `struct_lit_width` (18); otherwise one per line.
                        let flat = parts.join(", ");
                        if flat.len() <= 18 {
                            w.open(format!("{head} {{ {flat} }} => {{"));
                        } else {
                            w.open(format!("{head} {{"));
                            for p in &parts {
                                w.line(format!("{p},"));
                            }
                            w.dedent();
                            w.line("} => {");
                            w.indent();
                        }
                    }
                }
                push_value(
                    w,
                    call(
                        "check::Value::variant",
                        [crate::emit::string_literal(&v.name)],
                    ),
                );
                for (m, b) in v.fields.iter().zip(&bound) {
                    if let Some(b) = b {
                        member(w, ir, config, m, b, bindings);
                    }
                }
                w.close("}");
            }
            w.close("}");
        }
    }
}

/// Pushes the leaves of one member of a declared value, at `expr`.
pub(super) fn member(
    w: &mut Writer,
    ir: &Ir,
    config: &CheckConfig,
    m: &crate::ir::Member,
    expr: &str,
    bindings: &mut usize,
) {
    match &m.ty {
        MemberType::Tensor(t) => push_value(w, tensor_value(t, expr)),
        MemberType::Declared(inner) => walk(w, ir, config, inner, expr, bindings),
        MemberType::Plain(_) => {}
    }
}

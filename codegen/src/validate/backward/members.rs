//! The members of declared types a backward pass reads: a struct output's float fields (one
//! node each), a struct input's fields by path (`p.scale`), what the function form gets.

use super::*;

impl<'a> Check<'a, '_> {
    /// The float fields of a declared struct output, each a node of the backward pass (empty
    /// when the output is not a declared type).
    pub(super) fn output_members(
        &mut self,
        at: &Range<usize>,
        backward: &BackwardSpec,
    ) -> Option<Vec<Vec<String>>> {
        let op = self.op;
        let Output::Declared {
            name: ty, leaves, ..
        } = &op.output
        else {
            if op.output.has_declared() {
                self.push(
                    Diagnostic::new(at.clone(), self.key("backward"), format!("op `{}` returns a tuple holding a declared type, which a declared backward pass cannot differentiate", op.name))
                        .help(format!("return the declared struct alone (its float fields are then `grad.field` and `output.field` in formulas), or remove `backward`: with a `composition`, the generated `Autodiff<B, C>` kernel runs it on `Autodiff<B, C>`; or set `backward = \"hand-written\"` and implement `{}` for `Autodiff<B, C>` by hand", op.name)),
                );
                return None;
            }
            return Some(Vec::new());
        };
        let fallback = "remove `backward`: with a `composition`, the generated `Autodiff<B, C>` kernel runs it on `Autodiff<B, C>` and gradients flow through the declared type's tensor fields; or set `backward = \"hand-written\"`";
        let problem = if let Some(enum_ty) = self.enum_within(ty) {
            let what = if enum_ty == *ty {
                format!("declared enum `{ty}`")
            } else {
                format!("declared type `{ty}`, which holds enum `{enum_ty}`")
            };
            Some(format!(
                "op `{}` returns {what}; a declared backward pass differentiates the float fields of a struct",
                op.name
            ))
        } else if let Some(leaf) = leaves
            .iter()
            .find(|l| l.tensor.kind == TensorKind::Float && l.tensor.container != Container::One)
        {
            Some(format!(
                "field `output.{}` of op `{}` is {}; a declared backward pass differentiates single float tensor fields",
                leaf.label(),
                op.name,
                if leaf.tensor.container == Container::Option {
                    "an optional float tensor"
                } else {
                    "a `vec` of float tensors"
                }
            ))
        } else if matches!(backward, BackwardSpec::Function(_)) {
            Some(format!(
                "op `{}` returns declared type `{ty}`, whose float fields a backward function cannot be given the gradients of yet",
                op.name
            ))
        } else {
            None
        };
        if let Some(message) = problem {
            let help = if matches!(backward, BackwardSpec::Function(_))
                && self.enum_within(ty).is_none()
            {
                "write the backward pass as formulas, which name each field's incoming gradient and value (`grad.mean`, `output.mean`), or remove `backward` (with a `composition`, the generated `Autodiff<B, C>` kernel runs it)"
            } else {
                fallback
            };
            self.push(Diagnostic::new(at.clone(), self.key("backward"), message).help(help));
            return None;
        }
        let members: Vec<Vec<String>> = leaves
            .iter()
            .filter(|l| l.tensor.kind == TensorKind::Float)
            .map(|l| {
                l.path
                    .iter()
                    .map(|step| match step {
                        crate::ir::Step::Field { field, .. }
                        | crate::ir::Step::Variant { field, .. } => field.clone(),
                    })
                    .collect()
            })
            .collect();
        if members.is_empty() {
            self.push(
                Diagnostic::new(at.clone(), self.key("backward"), format!("op `{}` declares a backward pass but its declared output `{ty}` has no float tensor field to differentiate", op.name))
                    .help("remove `backward`: an op without a float output has no gradient to propagate (and write `autodiff = \"detach\"`, which is what it does)"),
            );
            return None;
        }
        // Each field's generated local (`__output_mean`) must be its own.
        let locals: Vec<String> = members.iter().map(|m| m.join("_")).collect();
        for (i, local) in locals.iter().enumerate() {
            if let Some(j) = locals[..i].iter().position(|l| l == local) {
                self.push(
                    Diagnostic::new(at.clone(), self.key("backward"), format!("fields `output.{}` and `output.{}` of op `{}` would share the generated local `{}{local}`", members[j].join("."), members[i].join("."), op.name, crate::names::OUTPUT_FIELD))
                        .help("rename one of the fields"),
                );
                return None;
            }
        }
        Some(members)
    }

    /// A declared backward pass reaches into declared struct inputs taken by value: their float
    /// fields are slots of their own (`p.scale`), their plain fields numbers (`p.eps`).
    pub(super) fn declared_inputs(&mut self, at: &Range<usize>) -> Option<()> {
        let op = self.op;
        let mut ok = true;
        for input in &op.inputs {
            let Arg::Declared {
                name: ty,
                borrowed,
                leaves,
                ..
            } = &input.arg
            else {
                continue;
            };
            let problem = if *borrowed {
                Some((
                    format!(
                        "input `{}` of op `{}` borrows declared type `{ty}`; a declared backward pass takes declared types by value",
                        input.name, op.name
                    ),
                    format!(
                        "take `{}` by value (`type = \"{ty}\"`, without `&` or `borrowed`), or remove `backward` (with a `composition`, the generated `Autodiff<B, C>` kernel runs it)",
                        input.name
                    ),
                ))
            } else if let Some(enum_ty) = self.enum_within(ty) {
                let what = if enum_ty == *ty {
                    format!("declared enum `{ty}`")
                } else {
                    format!("declared type `{ty}`, which holds enum `{enum_ty}`")
                };
                Some((
                    format!("input `{}` of op `{}` is {what}; a declared backward pass reaches struct fields only", input.name, op.name),
                    "remove `backward`: with a `composition`, the generated `Autodiff<B, C>` kernel runs it on `Autodiff<B, C>` and gradients flow through the enum's tensors; or set `backward = \"hand-written\"`".to_owned(),
                ))
            } else {
                leaves
                    .iter()
                    .find(|l| l.tensor.kind == TensorKind::Float && l.tensor.container == Container::Vec)
                    .map(|leaf| (
                        format!("field `{}.{}` of op `{}` is a `vec` of float tensors; a declared backward pass takes single and optional float tensors", input.name, leaf.label(), op.name),
                        "remove `backward` (with a `composition`, the generated `Autodiff<B, C>` kernel runs it), or set `backward = \"hand-written\"`".to_owned(),
                    ))
            };
            if let Some((message, help)) = problem {
                self.push(Diagnostic::new(at.clone(), self.key("backward"), message).help(help));
                ok = false;
            }
        }
        // Each field's generated local (`__p_scale`) must be its own.
        let slots: Vec<(String, String)> = op
            .float_slots()
            .filter(|s| !s.fields.is_empty())
            .map(|s| (crate::names::slot_local(&s.input.name, &s.fields), s.name))
            .collect();
        for (i, (local, name)) in slots.iter().enumerate() {
            if let Some((_, other)) = slots[..i].iter().find(|(l, _)| l == local) {
                self.push(
                    Diagnostic::new(at.clone(), self.key("backward"), format!("fields `{other}` and `{name}` of op `{}` would share the generated local `{local}`", op.name))
                        .help("rename one of the fields"),
                );
                ok = false;
            }
        }
        ok.then_some(())
    }

    /// The first enum in declared type `ty` (itself, or a field's type, nested).
    pub(super) fn enum_within(&self, ty: &str) -> Option<String> {
        let def = self.types.iter().find(|d| d.name == ty)?;
        match &def.body {
            TypeBody::Enum(_) => Some(ty.to_owned()),
            TypeBody::Struct(members) => members.iter().find_map(|m| match &m.ty {
                MemberType::Declared(inner) => self.enum_within(inner),
                _ => None,
            }),
        }
    }

    /// What dotted name `path` (`p.scale`) reaches, when its first part is a declared struct
    /// input: `Err` with the problem when a part is not a field.
    pub(super) fn member(&self, path: &str) -> Option<Result<Member<'a>, String>> {
        let (head, _) = path.split_once('.')?;
        let parts = path.split('.').skip(1);
        let input = self.op.inputs.iter().find(|i| i.name == head)?;
        let Arg::Declared { name: ty, .. } = &input.arg else {
            return Some(Err(format!(
                "`{head}` is not a declared struct: it has no fields"
            )));
        };
        let mut ty: &'a str = ty;
        let mut walked = head.to_owned();
        let mut rest: Vec<&str> = parts.collect();
        loop {
            let Some(def) = self.types.iter().find(|d| d.name == ty) else {
                return Some(Err(format!("`{walked}` has no fields")));
            };
            let TypeBody::Struct(members) = &def.body else {
                return Some(Err(format!(
                    "`{walked}` is enum `{ty}`: formulas and `save` reach struct fields only"
                )));
            };
            let field = rest.remove(0);
            let Some(member) = members.iter().find(|m| m.name.as_deref() == Some(field)) else {
                let names: Vec<&str> = members.iter().filter_map(|m| m.name.as_deref()).collect();
                let hint = match did_you_mean(field, &names) {
                    Some(s) => format!("did you mean `{walked}.{s}`?"),
                    None => format!("its fields: {}", names.join(", ")),
                };
                return Some(Err(format!(
                    "`{walked}` (declared struct `{ty}`) has no field `{field}`; {hint}"
                )));
            };
            walked = format!("{walked}.{field}");
            match (&member.ty, rest.is_empty()) {
                (MemberType::Declared(inner), false) => ty = inner,
                (_, false) => {
                    return Some(Err(format!(
                        "`{walked}` is not a declared struct: it has no fields"
                    )));
                }
                (MemberType::Tensor(t), true) if t.slot() => {
                    return Some(Ok(Member::Slot(
                        Backward::slot(self.op, path).expect("a float field is a slot"),
                    )));
                }
                (MemberType::Tensor(t), true) => {
                    return Some(Ok(Member::Other(format!(
                        "`{walked}` is {}",
                        if t.kind == TensorKind::Float {
                            "a `vec` of float tensors".to_owned()
                        } else {
                            format!("{} tensor", article(t.kind.key()))
                        }
                    ))));
                }
                (MemberType::Plain(ty), true) => return Some(Ok(Member::Plain(ty))),
                (MemberType::Declared(inner), true) => {
                    return Some(Ok(Member::Other(format!(
                        "`{walked}` is declared type `{inner}`, not one value: name one of its fields"
                    ))));
                }
            }
        }
    }

    /// The dotted names a formula reads, in declaration order: the single float tensor fields
    /// and the number fields of the declared struct inputs, to any depth.
    pub(super) fn readable_members(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack: Vec<(String, &str)> = self
            .op
            .inputs
            .iter()
            .rev()
            .filter_map(|i| match &i.arg {
                Arg::Declared { name, .. } => Some((i.name.clone(), name.as_str())),
                _ => None,
            })
            .collect();
        while let Some((path, ty)) = stack.pop() {
            let Some(TypeBody::Struct(members)) =
                self.types.iter().find(|d| d.name == ty).map(|d| &d.body)
            else {
                continue;
            };
            let mut nested = Vec::new();
            for m in members {
                let Some(field) = m.name.as_deref() else {
                    continue;
                };
                let at = format!("{path}.{field}");
                match &m.ty {
                    MemberType::Declared(inner) => nested.push((at, inner.as_str())),
                    _ => match self.member(&at) {
                        Some(Ok(Member::Slot(i)))
                            if self
                                .op
                                .float_slots()
                                .nth(i)
                                .is_some_and(|s| s.tensor.container == Container::One) =>
                        {
                            out.push(at);
                        }
                        Some(Ok(Member::Plain(ty))) if primitive::is_number(ty) => out.push(at),
                        _ => {}
                    },
                }
            }
            stack.extend(nested.into_iter().rev());
        }
        out
    }

    /// The float fields (slots) and plain fields of declared struct input `input`, in
    /// declaration order, as a function-form pass gets them without `save`.
    pub(super) fn declared_saves(&self, input: &str, ty: &str, acc: &mut Vec<SavedValue>) {
        let Some(def) = self.types.iter().find(|d| d.name == ty) else {
            return;
        };
        let TypeBody::Struct(members) = &def.body else {
            return;
        };
        for m in members {
            let Some(field) = m.name.as_deref() else {
                continue;
            };
            let path = format!("{input}.{field}");
            match &m.ty {
                MemberType::Tensor(t) if t.slot() => {
                    acc.extend(Backward::slot(self.op, &path).map(SavedValue::Float));
                }
                MemberType::Tensor(_) => {}
                MemberType::Plain(_) => acc.push(SavedValue::Field(path)),
                MemberType::Declared(inner) => self.declared_saves(&path, inner, acc),
            }
        }
    }

    pub(super) fn float_inputs_are_slots(&mut self, at: &Range<usize>) -> Option<()> {
        let vec = self
            .op
            .tensor_inputs()
            .find(|(_, t)| t.kind == TensorKind::Float && t.container == Container::Vec);
        if let Some((input, _)) = vec {
            self.push(
                Diagnostic::new(at.clone(), self.key("backward"), format!("input `{}` of op `{}` is a `vec` of float tensors; a declared backward pass takes single and optional float inputs", input.name, self.op.name))
                    .help("write the op's `Autodiff<B, C>` implementation by hand (remove `backward`), or make the op `composite`"),
            );
            return None;
        }
        Some(())
    }
}

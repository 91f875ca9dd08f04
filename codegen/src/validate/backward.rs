//! An op's declared backward pass (`backward`, `save`, `checkpoint`) → [`Backward`]: formulas
//! parsed, their names resolved and every node typed, what the pass keeps worked out.

use std::ops::Range;

use crate::diag::{Diagnostic, did_you_mean};
use crate::formula::{self, Expr, ExprKind, Param};
use crate::ir::{
    Arg, Backward, BackwardForm, Container, Field, FieldSource, Formula, MemberType, Op, Output,
    Policy, SavedValue, TensorKind, Term, TermNode, TypeBody, TypeDef,
};
use crate::model::{BackwardSpec, OpSpec, Sp};
use crate::parse::HAND_WRITTEN;

/// The plain types a formula may read as numbers.
pub(crate) const NUMBER_TYPES: &[&str] = &[
    "f32", "f64", "i8", "i16", "i32", "i64", "isize", "u8", "u16", "u32", "u64", "usize",
];

/// What lowering a backward pass needs besides the op.
pub(super) struct Cx<'a> {
    pub source: &'a str,
    pub location: String,
    pub bounds: &'a [String],
    pub types: &'a [TypeDef],
}

struct Check<'a> {
    spec: &'a OpSpec,
    op: &'a Op,
    path: String,
    diags: Vec<Diagnostic>,
    source: &'a str,
    types: &'a [TypeDef],
    /// The float fields of the op's declared output (field names down to each), one node of
    /// the backward pass each; empty when the output is not a declared struct.
    members: Vec<Vec<String>>,
    /// Typing one node's formula (the other outputs' gradients already set to zero): `grad` and
    /// `output` are the node's own, and a diagnostic would repeat one already given.
    node_pass: bool,
}

/// What a dotted name (`p.scale`, `p.inner.eps`) reaches in a declared struct input.
enum Member<'a> {
    /// A member that is a float tensor slot.
    Slot(usize),
    /// A plain field of this type.
    Plain(&'a str),
    /// A field of another kind: what it is, for the message.
    Other(String),
}

/// Lowers `spec`'s backward pass for `op` (already lowered otherwise). `Ok(None)` when the op
/// declares none.
///
/// # Errors
///
/// Every problem found.
pub(super) fn lower(
    spec: &OpSpec,
    op: &Op,
    cx: &Cx<'_>,
) -> Result<Option<Backward>, Vec<Diagnostic>> {
    let mut c = Check {
        spec,
        op,
        path: format!("op[{}]", spec.index),
        diags: Vec::new(),
        source: cx.source,
        types: cx.types,
        members: Vec::new(),
        node_pass: false,
    };
    let result = c.backward(cx);
    if c.diags.is_empty() {
        Ok(result)
    } else {
        Err(c.diags)
    }
}

impl<'a> Check<'a> {
    fn push(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    fn key(&self, key: &str) -> String {
        format!("{}.{key}", self.path)
    }

    /// `save`, `checkpoint` and `no_gradient` belong to a declared backward pass: each one
    /// present is reported with `why` (how the op has none) and `help`.
    fn stray_keys(&mut self, why: &str, help: &str) {
        let spec = self.spec;
        for (key, span) in [
            ("save", spec.save.as_ref().map(|s| s.span.clone())),
            (
                "checkpoint",
                spec.checkpoint.as_ref().map(|s| s.span.clone()),
            ),
            (
                "no_gradient",
                spec.no_gradient.as_ref().map(|s| s.span.clone()),
            ),
        ] {
            if let Some(span) = span {
                self.push(
                    Diagnostic::new(
                        span,
                        self.key(key),
                        format!(
                            "`{key}` of op `{}` belongs to a declared backward pass, {why}",
                            self.op.name
                        ),
                    )
                    .help(if key == "no_gradient" && help.starts_with("add `backward`") {
                        "add `backward = \"path::to::fn\"` (a function computing the gradients; formulas say `x = \"none\"` instead), or remove this key"
                    } else {
                        help
                    }),
                );
            }
        }
    }

    fn backward(&mut self, cx: &Cx<'_>) -> Option<Backward> {
        let spec = self.spec;
        let op = self.op;
        let Some(backward) = &spec.backward else {
            // Advice that leads out: `backward` is only an option where the op may declare one.
            let help = if op.composite.is_some() {
                "remove this key: a composite op's gradient comes from its composition"
            } else if op.policy != Policy::Differentiable {
                "remove this key: only a `differentiable` op has a backward pass"
            } else if op.asynchronous {
                "remove this key: an async op's backward pass is its `Autodiff<B, C>` kernel, written by hand"
            } else {
                "add `backward` (formulas or a function path), or remove this key"
            };
            self.stray_keys("and the op declares none", help);
            return None;
        };
        let backward_span = match backward {
            BackwardSpec::Function(f) => f.span.clone(),
            BackwardSpec::Formulas { span, .. } => span.clone(),
            BackwardSpec::HandWritten(span) => span.clone(),
        };
        if op.composite.is_some() {
            self.push(
                Diagnostic::new(
                    backward_span,
                    self.key("backward"),
                    format!("op `{}` is composite: its gradient comes from its composition, so it takes no `backward`", op.name),
                )
                .help("remove `backward` (the composite function's own gradient is used), or make it the op's `composition` (the default body of its kernels) instead of `composite` and keep `backward`"),
            );
            return None;
        }
        if op.policy != Policy::Differentiable {
            self.push(
                Diagnostic::new(
                    backward_span,
                    self.key("backward"),
                    format!(
                        "op `{}` declares a backward pass, but its autodiff policy is `{}`: tracked inputs never reach it",
                        op.name,
                        op.policy.key()
                    ),
                )
                .help("set `autodiff = \"differentiable\"`, or remove `backward`"),
            );
            return None;
        }
        if let BackwardSpec::HandWritten(_) = backward {
            self.stray_keys(
                &format!("and op `{}` writes its `Autodiff<B, C>` kernel by hand (`backward = \"hand-written\"`)", op.name),
                "remove this key: the hand-written kernel registers its own backward pass",
            );
            return None;
        }
        self.declared_inputs(&backward_span)?;
        self.members = self.output_members(&backward_span, backward)?;
        let output_path = if self.members.is_empty() {
            self.float_output(&backward_span)?
        } else {
            Vec::new()
        };
        self.float_inputs_are_slots(&backward_span)?;
        // (An unknown mode is reported; the rest is still checked.)
        let recompute = self.checkpoint().unwrap_or(false);
        if recompute
            && op
                .inputs
                .iter()
                .any(|i| matches!(i.arg, Arg::Declared { .. }))
        {
            let span = self
                .spec
                .checkpoint
                .as_ref()
                .map_or(backward_span.clone(), |c| c.span.clone());
            self.push(
                Diagnostic::new(span, self.key("checkpoint"), format!("op `{}` takes a declared type, and `checkpoint = \"recompute\"` does not keep one to run the op again yet", op.name))
                    .help("remove `checkpoint` (the backward pass keeps what it reads), or pass the struct's fields as inputs of their own"),
            );
            return None;
        }
        if recompute && !self.members.is_empty() {
            let span = self
                .spec
                .checkpoint
                .as_ref()
                .map_or(backward_span.clone(), |c| c.span.clone());
            self.push(
                Diagnostic::new(span, self.key("checkpoint"), format!("op `{}` returns a declared type, and `checkpoint = \"recompute\"` does not run an op again for one of its fields yet", op.name))
                    .help("remove `checkpoint` (the backward pass keeps what it reads)"),
            );
            return None;
        }
        let save = self.save(&output_path);
        let mut reads = vec![false; op.float_slots().count()];
        let mut reads_output = false;
        let mut fields: Vec<Field> = Vec::new();
        let mut bounds = cx.bounds.to_vec();
        let mut gradients = vec![true; reads.len()];
        let mut member: Vec<String> = Vec::new();
        let mut siblings: Vec<Backward> = Vec::new();
        let form = match backward {
            BackwardSpec::Function(path) => {
                let path = self.function_path(path)?;
                // `crate::m::Trait::method`: the segment before the function names a type.
                let method_of = path.rsplit_once("::").and_then(|(prefix, _)| {
                    let owner = prefix.rsplit("::").next().unwrap_or(prefix);
                    owner
                        .starts_with(|c: char| c.is_ascii_uppercase())
                        .then(|| prefix.to_owned())
                });
                if let Some(tr) = &method_of
                    && !bounds.contains(tr)
                {
                    bounds.push(tr.clone());
                }
                let args = match save? {
                    Some(args) => args,
                    None => self.default_save(),
                };
                for arg in &args {
                    match arg {
                        SavedValue::Float(i) => reads[*i] = true,
                        SavedValue::Output => reads_output = true,
                        SavedValue::Field(name) => {
                            fields.push(self.field(name, &output_path));
                        }
                    }
                }
                gradients = self.no_gradient(&gradients)?;
                BackwardForm::Function {
                    path,
                    method_of,
                    args,
                }
            }
            BackwardSpec::HandWritten(_) => unreachable!("a hand-written kernel returned above"),
            BackwardSpec::Formulas { span, entries } => {
                let save = save?;
                let (nodes, read_names) = self.formulas(span, entries)?;
                if let Some(save) = save {
                    self.save_matches_reads(&save, &read_names)?;
                }
                if let Some(list) = &spec.no_gradient {
                    self.push(
                        Diagnostic::new(list.span.clone(), self.key("no_gradient"), format!("op `{}` declares its backward pass as formulas: an input without a gradient is written there", op.name))
                            .help(format!(
                                "write {} in `backward`, and remove `no_gradient`",
                                list.value
                                    .iter()
                                    .map(|n| format!("`{} = \"none\"`", formula_key(&n.value)))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )),
                    );
                    return None;
                }
                // One node per float output: the first is this pass, the others its siblings.
                let mut passes = Vec::new();
                for (k, formulas) in nodes.into_iter().enumerate() {
                    let mut node_reads = vec![false; reads.len()];
                    let mut node_output = false;
                    let mut node_fields: Vec<Field> = Vec::new();
                    let mut names: Vec<String> = Vec::new();
                    for f in formulas.iter().flatten() {
                        term_names(&f.expr, &mut names);
                    }
                    for name in &names {
                        if name == formula::OUTPUT {
                            node_output = true;
                        } else if let Some(i) = Backward::slot(op, name) {
                            node_reads[i] = true;
                        } else {
                            node_fields.push(self.field(name, &output_path));
                        }
                    }
                    let node_gradients = formulas.iter().map(Option::is_some).collect();
                    passes.push(Backward {
                        form: BackwardForm::Formulas(formulas),
                        recompute: false,
                        reads: node_reads,
                        reads_output: node_output,
                        gradients: node_gradients,
                        fields: node_fields,
                        output_path: Vec::new(),
                        member: self.members.get(k).cloned().unwrap_or_default(),
                        siblings: Vec::new(),
                        bounds: Vec::new(),
                        location: String::new(),
                    });
                }
                let mut passes = passes.into_iter();
                let first = passes.next().expect("a backward pass has a node");
                reads = first.reads;
                reads_output = first.reads_output;
                fields = first.fields;
                gradients = first.gradients;
                member = first.member;
                siblings = passes
                    .map(|b| Backward {
                        bounds: bounds.clone(),
                        location: cx.location.clone(),
                        ..b
                    })
                    .collect();
                first.form
            }
        };
        if recompute {
            // The recomputation runs the kernel: it needs every argument.
            for input in &op.inputs {
                let float = matches!(&input.arg, Arg::Tensor(t) if t.kind == TensorKind::Float);
                if !float && !fields.iter().any(|f| f.name == input.name) {
                    fields.push(Field {
                        name: input.name.clone(),
                        source: FieldSource::Input(input.name.clone()),
                    });
                }
            }
        }
        let mut all_fields = fields.clone();
        for f in siblings.iter().flat_map(|s| &s.fields) {
            if !all_fields.contains(f) {
                all_fields.push(f.clone());
            }
        }
        self.fields_are_owned(&all_fields, recompute)?;
        Some(Backward {
            form,
            recompute,
            reads,
            reads_output,
            gradients,
            fields,
            output_path,
            member,
            siblings,
            bounds,
            location: cx.location.clone(),
        })
    }

    /// `no_gradient`: the float inputs a backward function gives no gradient.
    fn no_gradient(&mut self, all: &[bool]) -> Option<Vec<bool>> {
        let mut gradients = all.to_vec();
        let Some(list) = &self.spec.no_gradient else {
            return Some(gradients);
        };
        let slots: Vec<String> = self.op.float_slots().map(|slot| slot.name).collect();
        let names: Vec<&str> = slots.iter().map(String::as_str).collect();
        let mut ok = true;
        for (i, entry) in list.value.iter().enumerate() {
            let key = format!("{}.no_gradient[{i}]", self.path);
            match slots.iter().position(|s| *s == entry.value) {
                Some(slot) if !gradients[slot] => {
                    self.push(
                        Diagnostic::new(
                            entry.span.clone(),
                            key,
                            format!("`no_gradient` lists `{}` twice", entry.value),
                        )
                        .help("list each input once"),
                    );
                    ok = false;
                }
                Some(slot) => gradients[slot] = false,
                None => {
                    let help = match did_you_mean(&entry.value, &names) {
                        Some(s) => format!(
                            "did you mean `{s}`? `no_gradient` lists float inputs: {}",
                            names.join(", ")
                        ),
                        None => format!("`no_gradient` lists float inputs: {}", names.join(", ")),
                    };
                    self.push(
                        Diagnostic::new(
                            entry.span.clone(),
                            key,
                            format!(
                                "`{}` is not a float input of op `{}`",
                                entry.value, self.op.name
                            ),
                        )
                        .help(help),
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(gradients)
    }

    /// The path of the one float output.
    fn float_output(&mut self, at: &Range<usize>) -> Option<Vec<usize>> {
        let mut found = Vec::new();
        float_leaves(&self.op.output, &mut Vec::new(), &mut found);
        match found.as_slice() {
            [(path, Container::One)] => Some(path.clone()),
            [] => {
                self.push(
                    Diagnostic::new(at.clone(), self.key("backward"), format!("op `{}` declares a backward pass but returns no float tensor to differentiate", self.op.name))
                        .help("remove `backward`: an op without a float output has no gradient to propagate"),
                );
                None
            }
            _ => {
                let what = if found.len() == 1 {
                    "an `option` or `vec` of float tensors".to_owned()
                } else {
                    format!("{} float outputs", found.len())
                };
                self.push(
                    Diagnostic::new(at.clone(), self.key("backward"), format!("op `{}` returns {what}; a declared backward pass differentiates exactly one float tensor output", self.op.name))
                        .help("write the op's `Autodiff<B, C>` implementation by hand (remove `backward`), or return one float tensor (other outputs may be int, bool or plain)"),
                );
                None
            }
        }
    }

    /// The float fields of a declared struct output, each a node of the backward pass (empty
    /// when the output is not a declared type).
    fn output_members(
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
                    .help("remove `backward`: an op without a float output has no gradient to propagate"),
            );
            return None;
        }
        // Each field's generated local (`__output_mean`) must be its own.
        let locals: Vec<String> = members.iter().map(|m| m.join("_")).collect();
        for (i, local) in locals.iter().enumerate() {
            if let Some(j) = locals[..i].iter().position(|l| l == local) {
                self.push(
                    Diagnostic::new(at.clone(), self.key("backward"), format!("fields `output.{}` and `output.{}` of op `{}` would share the generated local `__output_{local}`", members[j].join("."), members[i].join("."), op.name))
                        .help("rename one of the fields"),
                );
                return None;
            }
        }
        Some(members)
    }

    /// A declared backward pass reaches into declared struct inputs taken by value: their float
    /// fields are slots of their own (`p.scale`), their plain fields numbers (`p.eps`).
    fn declared_inputs(&mut self, at: &Range<usize>) -> Option<()> {
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
    fn enum_within(&self, ty: &str) -> Option<String> {
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
    fn member(&self, path: &str) -> Option<Result<Member<'a>, String>> {
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
    fn readable_members(&self) -> Vec<String> {
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
                        Some(Ok(Member::Plain(ty))) if NUMBER_TYPES.contains(&ty) => out.push(at),
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
    fn declared_saves(&self, input: &str, ty: &str, acc: &mut Vec<SavedValue>) {
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

    fn float_inputs_are_slots(&mut self, at: &Range<usize>) -> Option<()> {
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

    fn checkpoint(&mut self) -> Option<bool> {
        let Some(c) = &self.spec.checkpoint else {
            return Some(false);
        };
        match c.value.as_str() {
            "keep" => Some(false),
            "recompute" => Some(true),
            other => {
                let help = match did_you_mean(other, crate::keys::CHECKPOINT) {
                    Some(s) => format!("did you mean \"{s}\"? write \"keep\" (the default: the backward pass keeps what it reads) or \"recompute\" (memory-bound: under gradient checkpointing the output is recomputed)"),
                    None => "write \"keep\" (the default: the backward pass keeps what it reads) or \"recompute\" (memory-bound: under gradient checkpointing the output is recomputed)".to_owned(),
                };
                self.push(
                    Diagnostic::new(
                        c.span.clone(),
                        self.key("checkpoint"),
                        format!("unknown checkpoint mode \"{other}\""),
                    )
                    .help(help),
                );
                None
            }
        }
    }

    /// `save`, resolved: `Ok(None)` when absent.
    fn save(&mut self, output_path: &[usize]) -> Option<Option<Vec<SavedValue>>> {
        let Some(save) = &self.spec.save else {
            return Some(None);
        };
        let mut out = Vec::new();
        let mut ok = true;
        for (i, entry) in save.value.iter().enumerate() {
            let key = format!("{}.save[{i}]", self.path);
            let text = entry.value.trim();
            let value = if text == formula::OUTPUT {
                Some(SavedValue::Output)
            } else if let Some(rest) = text.strip_prefix("output.") {
                self.output_entry(entry, &key, rest, output_path)
            } else if let Some(member) = self.member(text) {
                match member {
                    Ok(Member::Slot(i)) => Some(SavedValue::Float(i)),
                    Ok(Member::Plain(_)) => Some(SavedValue::Field(text.to_owned())),
                    Ok(Member::Other(what)) => {
                        self.push(
                            Diagnostic::new(entry.span.clone(), key, format!("`save` lists `{text}`: {what}, which a backward pass cannot keep"))
                                .help("save float tensor fields and plain fields of a declared struct"),
                        );
                        None
                    }
                    Err(problem) => {
                        self.push(
                            Diagnostic::new(entry.span.clone(), key, format!("`save` lists `{text}`: {problem}"))
                                .help("a dotted entry names a field of a declared struct input, `p.scale`"),
                        );
                        None
                    }
                }
            } else if let Some(input) = self.op.inputs.iter().find(|i| i.name == text) {
                match &input.arg {
                    Arg::Device => {
                        self.push(
                            Diagnostic::new(
                                entry.span.clone(),
                                key,
                                format!("`save` lists the device input `{text}`"),
                            )
                            .help("remove it: the backward pass gets the device from its tensors"),
                        );
                        None
                    }
                    Arg::Tensor(t)
                        if t.kind == TensorKind::Float && t.container != Container::Vec =>
                    {
                        Backward::slot(self.op, text).map(SavedValue::Float)
                    }
                    Arg::Declared { .. } => {
                        self.push(
                            Diagnostic::new(entry.span.clone(), key, format!("`save` lists `{text}`, a declared struct: a backward pass keeps its fields one by one"))
                                .help(format!("list the fields the backward function needs, e.g. \"{text}.field\"")),
                        );
                        None
                    }
                    _ => Some(SavedValue::Field(text.to_owned())),
                }
            } else {
                let mut names: Vec<&str> = self.op.inputs.iter().map(|i| i.name.as_str()).collect();
                names.push(formula::OUTPUT);
                let help = match did_you_mean(text, &names) {
                    Some(s) => format!(
                        "did you mean `{s}`? `save` lists the op's inputs, `output` and `output.N` (an element of a tuple output)"
                    ),
                    None => format!(
                        "`save` lists the op's inputs ({}), `output` and `output.N` (an element of a tuple output)",
                        names[..names.len() - 1].join(", ")
                    ),
                };
                self.push(
                    Diagnostic::new(entry.span.clone(), key, format!("`save` names `{text}`, which is neither an input of op `{}` nor its output", self.op.name))
                        .help(help),
                );
                None
            };
            match value {
                Some(v) if out.contains(&v) => {
                    self.push(
                        Diagnostic::new(
                            entry.span.clone(),
                            format!("{}.save[{i}]", self.path),
                            format!("`save` lists `{text}` twice"),
                        )
                        .help("list each value once"),
                    );
                    ok = false;
                }
                Some(v) => out.push(v),
                None => ok = false,
            }
        }
        ok.then_some(Some(out))
    }

    /// `output.1.0`: an element of a tuple output.
    fn output_entry(
        &mut self,
        entry: &Sp<String>,
        key: &str,
        rest: &str,
        output_path: &[usize],
    ) -> Option<SavedValue> {
        if !self.members.is_empty() {
            if self.members.iter().any(|m| m.join(".") == rest) {
                return Some(SavedValue::Field(entry.value.trim().to_owned()));
            }
            let fields: Vec<String> = self
                .members
                .iter()
                .map(|m| format!("`output.{}`", m.join(".")))
                .collect();
            self.push(
                Diagnostic::new(
                    entry.span.clone(),
                    key,
                    format!(
                        "`{}` is not a float tensor field of op `{}`'s output",
                        entry.value.trim(),
                        self.op.name
                    ),
                )
                .help(format!(
                    "list the float fields of the output the formulas read, by path ({})",
                    fields.join(", ")
                )),
            );
            return None;
        }
        let path: Option<Vec<usize>> = rest.split('.').map(|p| p.parse().ok()).collect();
        let leaf = path.as_ref().and_then(|p| leaf_at(&self.op.output, p));
        match (path, leaf) {
            (Some(_), Some(Output::Tuple(_))) => {
                self.push(
                    Diagnostic::new(
                        entry.span.clone(),
                        key,
                        format!(
                            "`{}` of op `{}` is a tuple, not one value",
                            entry.value.trim(),
                            self.op.name
                        ),
                    )
                    .help("save its elements one by one: `output.N.0`, `output.N.1`, ..."),
                );
                None
            }
            (Some(path), Some(_)) if path == output_path => Some(SavedValue::Output),
            (Some(path), Some(_)) => Some(SavedValue::Field(output_field(&path))),
            _ => {
                self.push(
                    Diagnostic::new(entry.span.clone(), key, format!("`{}` is not an element of op `{}`'s output", entry.value.trim(), self.op.name))
                        .help("write `output` for the float output, or `output.N` for element N (from 0) of a tuple output, `output.N.M` inside a nested one"),
                );
                None
            }
        }
    }

    /// With formulas, `save` lists exactly what they read.
    fn save_matches_reads(&mut self, save: &[SavedValue], reads: &[String]) -> Option<()> {
        let named = |v: &SavedValue| match v {
            SavedValue::Float(i) => self.op.float_slots().nth(*i).map(|slot| slot.name),
            SavedValue::Output => Some(formula::OUTPUT.to_owned()),
            SavedValue::Field(f) => Some(f.clone()),
        };
        let saved: Vec<String> = save.iter().filter_map(named).collect();
        let spec_save = self.spec.save.as_ref()?;
        let mut ok = true;
        for read in reads {
            if !saved.contains(read) {
                self.push(
                    Diagnostic::new(spec_save.span.clone(), self.key("save"), format!("the formulas of op `{}` read `{read}`, which `save` does not list", self.op.name))
                        .help(format!("add \"{read}\" to `save`, or remove `save` (it is inferred from the formulas)")),
                );
                ok = false;
            }
        }
        for (i, s) in saved.iter().enumerate() {
            if !reads.contains(s) {
                let span = spec_save
                    .value
                    .get(i)
                    .map_or(spec_save.span.clone(), |e| e.span.clone());
                self.push(
                    Diagnostic::new(span, format!("{}.save[{i}]", self.path), format!("`save` lists `{s}`, which no formula of op `{}` reads", self.op.name))
                        .help("remove it: keeping it would hold its memory until the backward pass for nothing"),
                );
                ok = false;
            }
        }
        ok.then_some(())
    }

    /// What a function-form pass gets without `save`: every input but the device, in order.
    fn default_save(&self) -> Vec<SavedValue> {
        let mut out = Vec::new();
        for input in &self.op.inputs {
            match &input.arg {
                Arg::Device => {}
                Arg::Tensor(t) if t.kind == TensorKind::Float => {
                    out.extend(Backward::slot(self.op, &input.name).map(SavedValue::Float));
                }
                Arg::Declared { name: ty, .. } => self.declared_saves(&input.name, ty, &mut out),
                _ => out.push(SavedValue::Field(input.name.clone())),
            }
        }
        out
    }

    fn field(&self, name: &str, _output_path: &[usize]) -> Field {
        if !self.members.is_empty()
            && let Some(rest) = name.strip_prefix("output.")
        {
            return Field {
                name: name.to_owned(),
                source: FieldSource::OutputMember(rest.split('.').map(str::to_owned).collect()),
            };
        }
        if let Some(Ok(Member::Plain(ty))) = self.member(name) {
            let mut parts = name.split('.');
            let input = parts.next().unwrap_or_default().to_owned();
            return Field {
                name: name.to_owned(),
                source: FieldSource::Member {
                    input,
                    fields: parts.map(str::to_owned).collect(),
                    ty: ty.to_owned(),
                },
            };
        }
        match name.strip_prefix(OUTPUT_FIELD) {
            Some(rest) if !self.op.inputs.iter().any(|i| i.name == name) => Field {
                name: name.to_owned(),
                source: FieldSource::Output(
                    rest.split('_').filter_map(|p| p.parse().ok()).collect(),
                ),
            },
            _ => Field {
                name: name.to_owned(),
                source: FieldSource::Input(name.to_owned()),
            },
        }
    }

    fn fields_are_owned(&mut self, fields: &[Field], recompute: bool) -> Option<()> {
        let mut ok = true;
        for field in fields {
            let FieldSource::Input(name) = &field.source else {
                continue;
            };
            let Some((i, input)) = self
                .op
                .inputs
                .iter()
                .enumerate()
                .find(|(_, i)| &i.name == name)
            else {
                continue;
            };
            let Arg::Plain(ty) = &input.arg else { continue };
            if !(ty.contains('&') || ty.replace("'static", "").contains('\'')) {
                continue;
            }
            let span = self
                .spec
                .inputs
                .as_ref()
                .and_then(|l| l.value.get(i))
                .map_or(self.spec.span.clone(), |s| s.span.clone());
            let why = if recompute {
                "the op is `checkpoint = \"recompute\"`, whose backward pass keeps every argument to run the op again"
            } else {
                "the backward pass keeps it until it runs"
            };
            self.push(
                Diagnostic::new(
                    span,
                    format!("{}.inputs[{i}].type", self.path),
                    format!(
                        "`{name}` of op `{}` borrows (`{ty}`), but {why}",
                        self.op.name
                    ),
                )
                .help("pass an owned type (e.g. `Vec<usize>` for `&[usize]`)"),
            );
            ok = false;
        }
        ok.then_some(())
    }

    fn function_path(&mut self, path: &Sp<String>) -> Option<String> {
        let problem = match syn::parse_str::<syn::Path>(path.value.trim()) {
            Err(err) => format!("is not a Rust path: {err}"),
            Ok(p) if p.segments.len() < 2 => "is not a path with `::`".to_owned(),
            Ok(p) => match super::types::function_path_problem(&p) {
                None => return Some(crate::canon::path_text(&p)),
                Some(problem) => problem,
            },
        };
        // A misspelt `"hand-written"` (`"Hand-Written"`, `"hand_written"`) is no path either.
        let help = match crate::diag::did_you_mean(&path.value, &[HAND_WRITTEN]) {
            Some(close) => format!("did you mean `backward = \"{close}\"` (the op's `Autodiff<B, C>` kernel written by hand)? Else name a function generic over the backend by its full path, e.g. \"crate::kernels::my_op_backward\""),
            None => "name a function generic over the backend by its full path, e.g. \"crate::kernels::my_op_backward\"; or write formulas: `backward = { x = \"grad * y\" }`".to_owned(),
        };
        self.push(
            Diagnostic::new(
                path.span.clone(),
                self.key("backward"),
                format!("backward function `{}` {problem}", path.value),
            )
            .help(help),
        );
        None
    }

    /// Each float input's formula, per node (one per float field of a declared output, else
    /// one), and every name the formulas read as written (for `save`).
    #[allow(clippy::type_complexity)] // (private, and used once)
    fn formulas(
        &mut self,
        span: &Range<usize>,
        entries: &[(Sp<String>, Sp<String>)],
    ) -> Option<(Vec<Vec<Option<Formula>>>, Vec<String>)> {
        let op = self.op;
        let slots: Vec<String> = op.float_slots().map(|slot| slot.name).collect();
        let mut out: Vec<Vec<Option<Formula>>> =
            vec![vec![None; slots.len()]; self.members.len().max(1)];
        let mut read_names: Vec<String> = Vec::new();
        let mut given = vec![false; slots.len()];
        let mut ok = true;
        for clash in op
            .inputs
            .iter()
            .filter(|i| i.name == formula::GRAD || i.name == formula::OUTPUT)
        {
            self.push(
                Diagnostic::new(span.clone(), self.key("backward"), format!("input `{}` of op `{}` has the name of a formula variable", clash.name, op.name))
                    .help(format!("rename the input: in formulas `{}` is the incoming gradient and `{}` the op's float output", formula::GRAD, formula::OUTPUT)),
            );
            ok = false;
        }
        for (key, text) in entries {
            let key_path = format!("{}.backward.{}", self.path, key.value);
            let Some(slot) = slots.iter().position(|name| *name == key.value) else {
                let other = op.inputs.iter().find(|i| i.name == key.value);
                let slot_names: Vec<&str> = slots.iter().map(String::as_str).collect();
                let member = self.member(&key.value);
                let (message, help) = match (other, member) {
                    (Some(input), _) if matches!(input.arg, Arg::Declared { .. }) => {
                        let fields: Vec<&str> = slot_names
                            .iter()
                            .copied()
                            .filter(|n| {
                                n.strip_prefix(input.name.as_str())
                                    .is_some_and(|r| r.starts_with('.'))
                            })
                            .collect();
                        (
                            format!(
                                "input `{}` of op `{}` is a declared struct: its float fields get gradients, one formula each",
                                key.value, op.name
                            ),
                            if fields.is_empty() {
                                "remove this formula: the struct has no float tensor fields"
                                    .to_owned()
                            } else {
                                format!(
                                    "key the formulas by field: {}",
                                    fields
                                        .iter()
                                        .map(|f| format!("`\"{f}\" = \"...\"`"))
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                )
                            },
                        )
                    }
                    (_, Some(Ok(_))) => (
                        format!(
                            "field `{}` of op `{}` gets no gradient: only single and optional float tensor fields do",
                            key.value, op.name
                        ),
                        "remove this formula".to_owned(),
                    ),
                    (_, Some(Err(problem))) => (
                        format!(
                            "`backward` gives a formula for `{}`, which op `{}` does not have: {problem}",
                            key.value, op.name
                        ),
                        format!(
                            "formulas are keyed by float input: {}",
                            slot_names.join(", ")
                        ),
                    ),
                    (Some(_), None) => (
                        format!(
                            "input `{}` of op `{}` gets no gradient: only single and optional float tensor inputs do",
                            key.value, op.name
                        ),
                        "remove this formula".to_owned(),
                    ),
                    (None, None) => (
                        format!(
                            "`backward` gives a formula for `{}`, which is not an input of op `{}`",
                            key.value, op.name
                        ),
                        match did_you_mean(
                            &key.value,
                            &slot_names
                                .iter()
                                .copied()
                                .filter(|n| entries.iter().all(|(k, _)| k.value != *n))
                                .collect::<Vec<_>>(),
                        ) {
                            Some(s) => format!(
                                "did you mean `{s}`? formulas are keyed by float input: {}",
                                slot_names.join(", ")
                            ),
                            None => format!(
                                "formulas are keyed by float input: {}",
                                slot_names.join(", ")
                            ),
                        },
                    ),
                };
                self.push(Diagnostic::new(key.span.clone(), key_path, message).help(help));
                ok = false;
                continue;
            };
            given[slot] = true;
            let trimmed = text.value.trim();
            if trimmed == formula::NONE {
                continue;
            }
            if trimmed.contains("::") {
                self.push(
                    Diagnostic::new(text.span.clone(), key_path, format!("formula for `{}` is a path: a backward function is not a formula", key.value))
                        .help(format!("name the function for the whole op: `backward = \"{trimmed}\"` (a string, not a table), with `no_gradient = [...]` for inputs it does not differentiate")),
                );
                ok = false;
                continue;
            }
            match formula::parse(&text.value) {
                Err(err) => {
                    self.push(
                        Diagnostic::new(
                            self.at(text, &err.span),
                            key_path,
                            format!("formula for `{}`: {}", key.value, err.message),
                        )
                        .help(err.help),
                    );
                    ok = false;
                }
                Ok(expr) => match self.term(&expr, text, &key_path) {
                    Some(term)
                        if term.tensor && !self.ranks_agree(slot, &term, text, &key_path) =>
                    {
                        ok = false;
                    }
                    Some(term) if term.tensor => {
                        if let Err(e) = super::linear::check(&expr, self.members.len() > 1) {
                            let grads: Vec<String> = if self.members.len() > 1 {
                                self.members
                                    .iter()
                                    .map(|m| format!("`grad.{}`", m.join(".")))
                                    .collect()
                            } else {
                                vec![format!("`{}`", crate::formula::GRAD)]
                            };
                            let example = match grads.as_slice() {
                                [one] => format!("{} * {}", one.trim_matches('`'), key.value),
                                [first, second, ..] => format!(
                                    "{} * 2 + {} * {}",
                                    first.trim_matches('`'),
                                    second.trim_matches('`'),
                                    key.value
                                ),
                                [] => unreachable!("one incoming gradient at least"),
                            };
                            self.push(
                                Diagnostic::new(self.at(text, &e.span), key_path, format!("the formula for `{}` {}, but a gradient is linear in the incoming gradients ({})", key.value, e.problem, grads.join(", ")))
                                    .help(format!("write a sum of terms that each multiply exactly one incoming gradient, e.g. \"{example}\"")),
                            );
                            ok = false;
                            continue;
                        }
                        term_names(&term, &mut read_names);
                        match self.node_formulas(&expr, term, text, &key_path) {
                            Some(per_node) => {
                                for (node, f) in out.iter_mut().zip(per_node) {
                                    node[slot] = f;
                                }
                            }
                            None => ok = false,
                        }
                    }
                    Some(_) => {
                        self.push(
                            Diagnostic::new(text.span.clone(), key_path, format!("the formula for `{}` is a number, but a gradient is a tensor", key.value))
                                .help("the formula is the input's whole gradient: multiply by `grad`, e.g. \"grad * alpha\""),
                        );
                        ok = false;
                    }
                    None => ok = false,
                },
            }
        }
        for (slot, name) in slots.iter().enumerate() {
            if !given[slot] {
                // A field's key is quoted (`"p.scale" = ...`): unquoted, TOML nests it.
                let key = if name.contains('.') {
                    format!("\"{name}\"")
                } else {
                    name.clone()
                };
                self.push(
                    Diagnostic::new(span.clone(), self.key("backward"), format!("`backward` of op `{}` has no formula for float input `{name}`", op.name))
                        .help(format!("add `{key} = \"...\"` (its gradient), or `{key} = \"none\"` if no gradient flows to it")),
                );
                ok = false;
            }
        }
        ok.then_some((out, read_names))
    }

    /// A checked formula (`term`, from `expr`) as each node's: the whole formula for an op with
    /// one float output; for a declared struct output, one per float field, the other fields'
    /// incoming gradients set to zero (`None` where nothing is left).
    fn node_formulas(
        &mut self,
        expr: &Expr,
        term: Term,
        text: &Sp<String>,
        key: &str,
    ) -> Option<Vec<Option<Formula>>> {
        let formula = |expr| Formula {
            text: text.value.trim().to_owned(),
            expr,
        };
        if self.members.is_empty() {
            return Some(vec![Some(formula(term))]);
        }
        let mut out = Vec::new();
        for member in self.members.clone() {
            let own = super::linear::node_formula(expr, &member.join("."));
            if matches!(own.kind, ExprKind::Number(v) if v == 0.0) {
                out.push(None);
                continue;
            }
            // (Every name was resolved, and reported, with the whole formula.)
            self.node_pass = true;
            let before = self.diags.len();
            let typed = self.term(&own, text, key);
            self.diags.truncate(before);
            self.node_pass = false;
            let Some(typed) = typed.filter(|t| t.tensor) else {
                self.push(
                    Diagnostic::new(text.span.clone(), key, format!("the formula for field `output.{}` could not be split out of `{}`", member.join("."), text.value.trim()))
                        .help("this is a burn-route bug: please report it with the formula; meanwhile, remove `backward` (with a `composition`, the generated kernel runs it)"),
                );
                return None;
            };
            out.push(Some(formula(typed)));
        }
        Some(out)
    }

    /// The span of `rel` (bytes of the formula text) in the manifest: exact when the string is
    /// written without escapes, else the whole string.
    fn at(&self, text: &Sp<String>, rel: &Range<usize>) -> Range<usize> {
        let raw = self.source.get(text.span.clone()).unwrap_or_default();
        let quoted = raw.len() == text.value.len() + 2
            && (raw.starts_with('"') || raw.starts_with('\''))
            && raw[1..raw.len() - 1] == text.value;
        if quoted {
            let start = text.span.start + 1;
            start + rel.start..start + rel.end.max(rel.start)
        } else {
            text.span.clone()
        }
    }

    fn term(&mut self, expr: &Expr, text: &Sp<String>, key: &str) -> Option<Term> {
        let number = |node| {
            Some(Term {
                tensor: false,
                node,
            })
        };
        match &expr.kind {
            ExprKind::Number(v) => number(TermNode::Number(*v)),
            ExprKind::Name(name) => self.name(name, &expr.span, text, key),
            ExprKind::Neg(inner) => {
                let inner = self.term(inner, text, key)?;
                Some(Term {
                    tensor: inner.tensor,
                    node: TermNode::Neg(Box::new(inner)),
                })
            }
            ExprKind::Binary(op, a, b) => {
                let a = self.term(a, text, key);
                let b = self.term(b, text, key);
                let (a, b) = (a?, b?);
                Some(gate_or_binary(*op, a, b))
            }
            ExprKind::Call {
                name,
                name_span,
                args,
            } => {
                let Some(f) = formula::function(name) else {
                    let known: Vec<&str> = formula::FUNCTIONS.iter().map(|f| f.name).collect();
                    let help = match did_you_mean(name, &known) {
                        Some(s) => format!("did you mean `{s}`? functions: {}", known.join(", ")),
                        None => format!("functions: {}", known.join(", ")),
                    };
                    self.push(
                        Diagnostic::new(
                            self.at(text, name_span),
                            key,
                            format!("unknown function `{name}`"),
                        )
                        .help(help),
                    );
                    return None;
                };
                if args.len() != f.params.len() {
                    self.push(
                        Diagnostic::new(
                            self.at(text, &expr.span),
                            key,
                            format!(
                                "`{name}` takes {} argument{}, found {}",
                                f.params.len(),
                                if f.params.len() == 1 { "" } else { "s" },
                                args.len()
                            ),
                        )
                        .help(format!("call it as {}", signature(f))),
                    );
                    return None;
                }
                let mut terms = Vec::new();
                let mut ok = true;
                for (arg, param) in args.iter().zip(f.params) {
                    if *param == Param::Dim {
                        match dim_literal(arg) {
                            Some(d) => terms.push(Term {
                                tensor: false,
                                node: TermNode::Dim(d),
                            }),
                            None => {
                                self.push(
                                    Diagnostic::new(self.at(text, &arg.span), key, format!("the dimension of `{name}` must be an integer literal"))
                                        .help(format!("write a number such as `-1` (the last dimension) or `0`: {}", signature(f))),
                                );
                                ok = false;
                            }
                        }
                        continue;
                    }
                    let Some(term) = self.term(arg, text, key) else {
                        ok = false;
                        continue;
                    };
                    let fits = match param {
                        Param::Tensor => term.tensor,
                        Param::Number => !term.tensor,
                        Param::Either | Param::Dim => true,
                    };
                    if !fits {
                        let (want, found) = if *param == Param::Tensor {
                            ("a tensor", "a number")
                        } else {
                            ("a number", "a tensor")
                        };
                        self.push(
                            Diagnostic::new(
                                self.at(text, &arg.span),
                                key,
                                format!("`{name}` takes {want} here, found {found}"),
                            )
                            .help(format!("call it as {}", signature(f))),
                        );
                        ok = false;
                    }
                    terms.push(term);
                }
                if !ok {
                    return None;
                }
                if let Some((message, help)) =
                    super::ranks::dim_problem(self.op, name, &terms, || {
                        let tensor = self.source.get(self.at(text, &args[0].span));
                        crate::diag::cut(tensor.unwrap_or("its tensor"))
                    })
                {
                    self.push(
                        Diagnostic::new(self.at(text, &args[1].span), key, message).help(help),
                    );
                    return None;
                }
                // `where` is a tensor through its condition; the others through any argument,
                // but for `dim_size`, a number.
                let tensor = !f.returns_number() && terms.iter().any(|t| t.tensor);
                Some(Term {
                    tensor,
                    node: TermNode::Call(f.name, terms),
                })
            }
        }
    }

    /// [`super::ranks::rank_problem`] for the formula of float input `slot`, pushed at the
    /// formula. Returns whether the ranks agree.
    fn ranks_agree(&mut self, slot: usize, term: &Term, text: &Sp<String>, key: &str) -> bool {
        match super::ranks::rank_problem(self.op, slot, term) {
            None => true,
            Some((message, help)) => {
                self.push(Diagnostic::new(text.span.clone(), key, message).help(help));
                false
            }
        }
    }

    /// `grad`, `output` and their fields in a formula of an op returning a declared struct:
    /// `None` when `name` is none of them.
    fn output_name(
        &mut self,
        name: &str,
        span: &Range<usize>,
        text: &Sp<String>,
        key: &str,
    ) -> Option<Option<Term>> {
        let tensor = |node| Some(Some(Term { tensor: true, node }));
        let op = self.op;
        let ty = match &op.output {
            Output::Declared { name, .. } => name.as_str(),
            _ => "",
        };
        let (head, rest) = match name.split_once('.') {
            Some((head, rest)) => (head, Some(rest)),
            None => (name, None),
        };
        if head != formula::GRAD && head != formula::OUTPUT {
            return None;
        }
        if self.node_pass {
            // Only the other fields' values are left dotted.
            return match rest {
                Some(_) => tensor(TermNode::Kept(name.to_owned())),
                None if head == formula::GRAD => tensor(TermNode::Grad),
                None => tensor(TermNode::Output),
            };
        }
        let fields: Vec<String> = self.members.iter().map(|m| m.join(".")).collect();
        let listed = |head: &str| {
            fields
                .iter()
                .map(|f| format!("`{head}.{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (message, help) = match rest {
            Some(rest) if fields.iter().any(|f| f == rest) => {
                return if head == formula::GRAD {
                    tensor(TermNode::Grad)
                } else {
                    tensor(TermNode::Kept(name.to_owned()))
                };
            }
            // One float field: `grad` is its incoming gradient.
            None if head == formula::GRAD && fields.len() == 1 => return tensor(TermNode::Grad),
            None if head == formula::GRAD => (
                format!(
                    "op `{}` returns declared struct `{ty}`, whose float fields each have an incoming gradient: `grad` alone names none of them",
                    op.name
                ),
                format!("write {}", listed(head)),
            ),
            None => (
                format!(
                    "`output` of op `{}` is declared struct `{ty}`, not one tensor",
                    op.name
                ),
                format!("read a float field: {}", listed(head)),
            ),
            Some(rest) => {
                let hint = match did_you_mean(
                    rest,
                    &fields.iter().map(String::as_str).collect::<Vec<_>>(),
                ) {
                    Some(s) => format!("did you mean `{head}.{s}`? "),
                    None => String::new(),
                };
                (
                    format!(
                        "`{name}` is not a float tensor field of the output of op `{}` (declared struct `{ty}`)",
                        op.name
                    ),
                    format!(
                        "{hint}formulas read the output's float fields: {}",
                        listed(head)
                    ),
                )
            }
        };
        self.push(Diagnostic::new(self.at(text, span), key, message).help(help));
        Some(None)
    }

    fn name(
        &mut self,
        name: &str,
        span: &Range<usize>,
        text: &Sp<String>,
        key: &str,
    ) -> Option<Term> {
        let tensor = |node| Some(Term { tensor: true, node });
        if !self.members.is_empty()
            && let Some(found) = self.output_name(name, span, text, key)
        {
            return found;
        }
        if name == formula::GRAD {
            return tensor(TermNode::Grad);
        }
        if name == formula::OUTPUT {
            return tensor(TermNode::Output);
        }
        if name == formula::NONE {
            self.push(
                Diagnostic::new(self.at(text, span), key, "`none` is a whole formula, not a value")
                    .help("write `\"none\"` alone for an input without a gradient; a zero gradient inside a formula is `0`"),
            );
            return None;
        }
        let op = self.op;
        if name.contains('.') {
            let problem = match self.member(name) {
                Some(Ok(Member::Slot(i))) => {
                    let slot = op.float_slots().nth(i).expect("a slot");
                    if slot.tensor.container == Container::One {
                        return tensor(TermNode::Input(name.to_owned()));
                    }
                    format!(
                        "`{name}` is optional (`container = \"option\"`: it may be absent), which a formula cannot read"
                    )
                }
                Some(Ok(Member::Plain(ty))) if NUMBER_TYPES.contains(&ty) => {
                    return Some(Term {
                        tensor: false,
                        node: TermNode::Scalar(name.to_owned()),
                    });
                }
                Some(Ok(Member::Plain(ty))) => format!(
                    "`{name}` is a `{ty}`; formulas read numbers of the types {}",
                    NUMBER_TYPES.join(", ")
                ),
                Some(Ok(Member::Other(what))) => {
                    format!("{what}; formulas read float tensors and numbers")
                }
                Some(Err(problem)) => problem,
                None if name.split('.').next() == Some(formula::OUTPUT) => format!(
                    "`{name}`: the output of op `{}` is not a declared struct, so `output` has no fields",
                    op.name
                ),
                None => {
                    let head = name.split('.').next().unwrap_or_default();
                    format!("unknown name `{head}` in a formula of op `{}`", op.name)
                }
            };
            let readable = self.readable_members();
            let help = if readable.is_empty() {
                format!(
                    "a dotted name reads a float tensor or number field of a declared struct input, and op `{}` has none: write the formula with its inputs",
                    op.name
                )
            } else {
                format!(
                    "a dotted name reads a float tensor or number field of a declared struct input; op `{}` has {}",
                    op.name,
                    readable
                        .iter()
                        .map(|r| format!("`{r}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            self.push(Diagnostic::new(self.at(text, span), key, problem).help(help));
            return None;
        }
        let Some(input) = op.inputs.iter().find(|i| i.name == name) else {
            let mut names: Vec<&str> = vec![formula::GRAD, formula::OUTPUT];
            names.extend(op.inputs.iter().map(|i| i.name.as_str()));
            let function_like = formula::function(name).is_some();
            let help = if function_like {
                format!("`{name}` is a function: call it, as in `{name}(x)`")
            } else {
                match did_you_mean(name, &names) {
                    Some(s) => format!(
                        "did you mean `{s}`? formulas read `grad`, `output` and the op's inputs"
                    ),
                    None => format!(
                        "formulas read `grad`, `output` and the op's inputs: {}",
                        names[2..].join(", ")
                    ),
                }
            };
            self.push(
                Diagnostic::new(
                    self.at(text, span),
                    key,
                    format!("unknown name `{name}` in a formula of op `{}`", op.name),
                )
                .help(help),
            );
            return None;
        };
        let problem = match &input.arg {
            Arg::Tensor(t) if t.kind == TensorKind::Float && t.container == Container::One => {
                return tensor(TermNode::Input(name.to_owned()));
            }
            Arg::Tensor(t) if t.kind == TensorKind::Float => format!(
                "`{name}` is {}, which a formula cannot read",
                if t.container == Container::Option {
                    "optional (`container = \"option\"`: it may be absent)"
                } else {
                    "a `vec` of tensors"
                }
            ),
            Arg::Tensor(t) => format!(
                "`{name}` is {} tensor; formulas read float tensors and numbers",
                article(t.kind.key())
            ),
            Arg::Plain(ty) if NUMBER_TYPES.contains(&ty.as_str()) => {
                return Some(Term {
                    tensor: false,
                    node: TermNode::Scalar(name.to_owned()),
                });
            }
            Arg::Plain(ty) => format!(
                "`{name}` is a `{ty}`; formulas read numbers of the types {}",
                NUMBER_TYPES.join(", ")
            ),
            Arg::Device => format!("`{name}` is the device, not a value"),
            Arg::Declared { name: ty, .. } => format!(
                "`{name}` is declared type `{ty}`, not one value: a formula reads its fields (`{name}.field`)"
            ),
        };
        self.push(
            Diagnostic::new(self.at(text, span), key, problem)
                .help("use the function form for this op: `backward = \"crate::path::to_fn\"` gets every saved value"),
        );
        None
    }
}

fn article(kind: &str) -> String {
    if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
        format!("an {kind}")
    } else {
        format!("a {kind}")
    }
}

/// The field name of output element `path` (a non-float output the backward pass keeps).
pub(crate) const OUTPUT_FIELD: &str = "__output_";

fn output_field(path: &[usize]) -> String {
    let parts: Vec<String> = path.iter().map(ToString::to_string).collect();
    format!("{OUTPUT_FIELD}{}", parts.join("_"))
}

fn signature(f: &formula::Function) -> String {
    let params: Vec<&str> = f
        .params
        .iter()
        .map(|p| match p {
            Param::Tensor => "tensor",
            Param::Number => "number",
            Param::Either => "tensor or number",
            Param::Dim => "dim",
        })
        .collect();
    format!("`{}({})`", f.name, params.join(", "))
}

fn dim_literal(expr: &Expr) -> Option<i64> {
    match &expr.kind {
        ExprKind::Number(v) if v.fract() == 0.0 && v.abs() < 1e9 => Some(*v as i64),
        ExprKind::Neg(inner) => dim_literal(inner).map(|d| -d),
        _ => None,
    }
}

fn term_names(term: &Term, acc: &mut Vec<String>) {
    let mut push = |n: &str| {
        if !acc.iter().any(|a| a == n) {
            acc.push(n.to_owned());
        }
    };
    match &term.node {
        TermNode::Output => push(formula::OUTPUT),
        TermNode::Input(n) | TermNode::Scalar(n) | TermNode::Kept(n) => push(n),
        TermNode::Number(_) | TermNode::Dim(_) | TermNode::Grad => {}
        TermNode::Neg(inner) => term_names(inner, acc),
        TermNode::Binary(_, a, b) => {
            term_names(a, acc);
            term_names(b, acc);
        }
        TermNode::Call(_, args) => args.iter().for_each(|a| term_names(a, acc)),
    }
}

/// Every float tensor leaf of `out`: its tuple path and container.
fn float_leaves(out: &Output, path: &mut Vec<usize>, acc: &mut Vec<(Vec<usize>, Container)>) {
    match out {
        Output::Tensor(t) if t.kind == TensorKind::Float => acc.push((path.clone(), t.container)),
        Output::Tuple(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(i);
                float_leaves(item, path, acc);
                path.pop();
            }
        }
        _ => {}
    }
}

/// The output element at `path`.
pub(crate) fn leaf_at<'a>(out: &'a Output, path: &[usize]) -> Option<&'a Output> {
    match path.split_first() {
        None => Some(out),
        Some((i, rest)) => match out {
            Output::Tuple(items) => items.get(*i).and_then(|o| leaf_at(o, rest)),
            _ => None,
        },
    }
}

/// `a op b`, except a tensor times `relu_mask(m)` (either order), which becomes the internal
/// call `relu_gate(m, tensor)`: Burn's `relu_backward`, one masked pass where the product would
/// be a comparison, its cast to floats and a multiplication (`rt::grad::relu_gate`).
fn gate_or_binary(op: formula::BinOp, a: Term, b: Term) -> Term {
    let is_mask = |t: &Term| matches!(&t.node, TermNode::Call("relu_mask", _));
    if op == formula::BinOp::Mul && a.tensor && b.tensor && (is_mask(&a) || is_mask(&b)) {
        let (mask, value) = if is_mask(&b) { (b, a) } else { (a, b) };
        let TermNode::Call(_, mut args) = mask.node else {
            unreachable!("checked to be a relu_mask call")
        };
        return Term {
            tensor: true,
            node: TermNode::Call(formula::RELU_GATE, vec![args.remove(0), value]),
        };
    }
    Term {
        tensor: a.tensor || b.tensor,
        node: TermNode::Binary(op, Box::new(a), Box::new(b)),
    }
}

/// How a formula table keys `name`: bare, or quoted when dotted (`"p.scale"`).
fn formula_key(name: &str) -> String {
    if name.contains('.') {
        format!("\"{name}\"")
    } else {
        name.to_owned()
    }
}

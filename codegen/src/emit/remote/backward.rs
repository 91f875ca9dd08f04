//! The backward kernels on Remote: each function-form `backward` that is a method of a trait
//! of the crate's (`BackwardKernels::f`) runs on the server as one custom operation, like the
//! ops' forward kernels: the client's `impl Trait for Remote` and the server's call.

use super::*;

/// A backward kernel that runs on Remote as one operation: a trait method named by the
/// `backward` of an op that runs there as one operation (the first such op, when several name
/// the method: they share its signature).
pub(super) struct BackwardKernel<'a> {
    pub(super) op: &'a Op,
    /// The trait's path, as the manifest writes it.
    pub(super) trait_path: &'a str,
    /// The method's name.
    pub(super) method: &'a str,
    /// What it receives before the incoming gradient.
    pub(super) args: &'a [SavedValue],
    /// The number of float inputs: one gradient each (`N > 1`: told which are tracked).
    pub(super) n: usize,
}

impl BackwardKernel<'_> {
    /// The trait's last segment.
    pub(super) fn trait_name(&self) -> &str {
        self.trait_path
            .rsplit("::")
            .next()
            .unwrap_or(self.trait_path)
    }

    /// Its operation's name in ids and messages: `Trait::method`.
    pub(super) fn op_name(&self) -> String {
        format!("{}::{}", self.trait_name(), self.method)
    }

    /// The params it receives before the gradient, with their types on `Self`, and for each
    /// float input saved as itself, the param (so its gradient takes its shape).
    pub(super) fn params(&self) -> Vec<(String, String, SavedKind)> {
        let backward = self.op.backward.as_ref().expect("a backward kernel's op");
        let slots: Vec<_> = self.op.float_slots().collect();
        self.args
            .iter()
            .map(|arg| match arg {
                SavedValue::Float(i) => {
                    let slot = &slots[*i];
                    let (ty, kind) = if slot.tensor.container == Container::Option {
                        ("Option<rt::FloatTensor<Self>>", SavedKind::FloatOption(*i))
                    } else {
                        ("rt::FloatTensor<Self>", SavedKind::Float(*i))
                    };
                    (
                        crate::names::slot_local(&slot.input.name, &slot.fields),
                        ty.to_owned(),
                        kind,
                    )
                }
                SavedValue::Output => (
                    names::SAVED_OUTPUT.to_owned(),
                    "rt::FloatTensor<Self>".to_owned(),
                    SavedKind::Tensor(TensorKind::Float, Container::One),
                ),
                SavedValue::Field(field) => {
                    let source = backward
                        .fields
                        .iter()
                        .find(|f| &f.name == field)
                        .map(|f| f.source.clone())
                        .unwrap_or(FieldSource::Input(field.clone()));
                    let ty = super::super::autodiff::field_type_on(self.op, &source, "Self");
                    let kind = match field_tensor(self.op, &source) {
                        Some(t) => SavedKind::Tensor(t.kind, t.container),
                        None => SavedKind::Plain,
                    };
                    (names::formula_local(field), ty, kind)
                }
            })
            .collect()
    }
}

/// What one saved value is on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SavedKind {
    /// Float input `slot`, itself.
    Float(usize),
    /// Optional float input `slot`, itself.
    FloatOption(usize),
    /// Another tensor (the output, an int or bool input, an output element).
    Tensor(TensorKind, Container),
    /// A plain value: scalars.
    Plain,
}

/// The tensor a field holds, if it is one.
pub(super) fn field_tensor<'a>(op: &'a Op, source: &FieldSource) -> Option<&'a TensorArg> {
    match source {
        FieldSource::Input(name) => match &op.inputs.iter().find(|i| &i.name == name)?.arg {
            Arg::Tensor(t) => Some(t),
            _ => None,
        },
        FieldSource::Member { .. } | FieldSource::OutputMember(_) => None,
        FieldSource::Output(path) => match op.output.leaf_at(path)? {
            Output::Tensor(t) => Some(t),
            _ => None,
        },
    }
}

/// The backward kernels that run on Remote as one operation, in op order, each method once.
pub(super) fn backward_kernels(ir: &Ir) -> Vec<BackwardKernel<'_>> {
    let mut out: Vec<BackwardKernel<'_>> = Vec::new();
    for op in ir.ops.iter().filter(|op| remote_backend(op).is_some()) {
        let Some(Backward {
            form:
                BackwardForm::Function {
                    path,
                    method_of: Some(trait_path),
                    args,
                },
            reads,
            ..
        }) = &op.backward
        else {
            continue;
        };
        let method = path.rsplit("::").next().unwrap_or(path);
        if out
            .iter()
            .any(|k| k.trait_path == trait_path && k.method == method)
        {
            continue;
        }
        out.push(BackwardKernel {
            op,
            trait_path,
            method,
            args,
            n: reads.len(),
        });
    }
    out
}

/// The traits of trait-method backward passes of ops routed to Remote, each with the cfgs of
/// those ops' Remote: `Remote` implements each (its methods' default bodies, or one operation).
pub(super) fn backward_traits(ir: &Ir) -> Vec<(&str, Vec<Option<String>>)> {
    let mut out: Vec<(&str, Vec<Option<String>>)> = Vec::new();
    for op in &ir.ops {
        if op.composite.is_some() {
            continue;
        }
        let Some(remote) = op.backends.iter().find(|b| b.name == BackendName::Remote) else {
            continue;
        };
        let Some(Backward {
            form:
                BackwardForm::Function {
                    method_of: Some(trait_path),
                    ..
                },
            ..
        }) = &op.backward
        else {
            continue;
        };
        match out.iter_mut().find(|(t, _)| *t == trait_path) {
            Some((_, cfgs)) => cfgs.push(remote.cfg.clone()),
            None => out.push((trait_path, vec![remote.cfg.clone()])),
        }
    }
    // A trait that an op with a hand-written Remote implementation names is the crate's to
    // implement for Remote too.
    out.retain(|(trait_path, _)| {
        !ir.ops.iter().any(|op| {
            op.remote == RemoteImpl::HandWritten
                && matches!(
                    &op.backward,
                    Some(Backward {
                        form: BackwardForm::Function { method_of: Some(t), .. },
                        ..
                    }) if t == trait_path
                )
        })
    });
    out
}

/// The text a client and a server must agree on for a backward kernel: its op's declaration,
/// the method and what it receives.
pub(super) fn backward_declaration(ir: &Ir, kernel: &BackwardKernel<'_>) -> String {
    let params: Vec<String> = kernel
        .params()
        .into_iter()
        .map(|(name, ty, _)| format!("{name}:{ty}"))
        .collect();
    format!(
        "{} backward {}({}) n={}",
        declaration(ir, kernel.op),
        kernel.op_name(),
        params.join(","),
        kernel.n
    )
}

/// One `static` per backward kernel that runs on Remote as one operation.
pub(super) fn backward_statics(ir: &Ir, kernels: &[BackwardKernel<'_>], w: &mut Writer) {
    for kernel in kernels {
        w.blank();
        w.doc(&[format!(
            "`{}`, the backward kernel of `{}`, as one operation on Remote.",
            kernel.op_name(),
            kernel.op.name
        )]);
        remote_static(
            &names::remote_backward_op(kernel.trait_name(), kernel.method),
            &kernel.op_name(),
            &backward_declaration(ir, kernel),
            w,
        );
    }
}

/// `impl Trait for Remote` for each backward trait of ops routed to Remote: the kernels of ops
/// that run there as one operation are one operation too; the other methods keep their
/// default bodies (primitives, each an operation on the server).
pub(super) fn backward_impls(ir: &Ir, kernels: &[BackwardKernel<'_>], w: &mut Writer) {
    for (trait_path, cfgs) in backward_traits(ir) {
        let cfg = super::super::any_distinct(cfgs);
        let methods: Vec<&BackwardKernel<'_>> = kernels
            .iter()
            .filter(|k| k.trait_path == trait_path)
            .collect();
        w.blank();
        w.doc(&[format!(
            "`{trait_path}` on `Remote`: the backward kernel of each op that runs on the server as one operation is one operation too (registered by [`{SERVE_REMOTE}`]); the other methods keep their default bodies."
        )]);
        w.cfg(cfg.as_deref());
        w.impl_block(
            &format!("impl {trait_path}"),
            "rt::Remote",
            methods.is_empty(),
        );
        if methods.is_empty() {
            continue;
        }
        for (i, kernel) in methods.iter().enumerate() {
            if i > 0 {
                w.blank();
            }
            let own = remote_backend(kernel.op).and_then(|b| b.cfg.as_deref());
            w.cfg(inner_cfg(cfg.as_deref(), own));
            backward_client_method(kernel, w);
        }
        w.close("}");
    }
}

pub(super) fn backward_client_method(kernel: &BackwardKernel<'_>, w: &mut Writer) {
    let n = kernel.n;
    let params = kernel.params();
    let mut sig: Vec<Doc> = params
        .iter()
        .map(|(name, ty, _)| super::super::param(name, ty))
        .collect();
    sig.push(super::super::param(
        names::SAVED_GRAD,
        "rt::FloatTensor<Self>",
    ));
    let ret = if n > 1 {
        sig.push(super::super::param(names::TRACKED, &format!("[bool; {n}]")));
        format!(" -> [Option<rt::FloatTensor<Self>>; {n}] {{")
    } else {
        " -> rt::FloatTensor<Self> {".to_owned()
    };
    super::super::allow_many_arguments(sig.len(), w);
    w.open(signature(format!("fn {}", kernel.method), sig, ret));
    w.assign(
        format!("let mut {CALL} = "),
        call(
            "rt::remote::Call::new",
            [format!(
                "&{}",
                names::remote_backward_op(kernel.trait_name(), kernel.method)
            )],
        ),
        ";",
    );
    // The float inputs saved as themselves give their gradient its shape.
    let like = saved_like(kernel);
    for (name, _, kind) in &params {
        let value = match kind {
            SavedKind::Float(_) => {
                w.line(format!(
                    "let {} = {CALL}.input({name});",
                    names::lazy_spec(name)
                ));
                continue;
            }
            SavedKind::FloatOption(_) => {
                w.line(format!(
                    "let {} = {CALL}.input_option({name});",
                    names::lazy_spec(name)
                ));
                continue;
            }
            SavedKind::Tensor(_, Container::One) => format!("{CALL}.input({name});"),
            SavedKind::Tensor(_, Container::Option) => format!("{CALL}.input_option({name});"),
            SavedKind::Tensor(_, Container::Vec) => format!("{CALL}.inputs({name});"),
            SavedKind::Plain => format!("{CALL}.arg(&{name});"),
        };
        w.line(value);
    }
    let grad_spec = names::GRAD_SPEC.to_owned();
    w.line(format!(
        "let {grad_spec} = {CALL}.input({});",
        names::SAVED_GRAD
    ));
    if n > 1 {
        w.line(format!("{CALL}.arg(&{});", names::TRACKED));
        for (i, own) in like.iter().enumerate() {
            let spec = match own {
                Some((spec, false)) => format!("Some(&{spec})"),
                Some((spec, true)) => format!("{spec}.as_ref()"),
                None => match implied_by(kernel, i, &like) {
                    Some((rule, spec)) => {
                        format!("rt::remote::implied(rt::ShapeRule::{rule}, &{spec}).as_ref()")
                    }
                    None => format!("Some(&{grad_spec})"),
                },
            };
            w.line(super::super::code::cat([
                call(
                    format!("{CALL}.gradient"),
                    [format!("{}[{i}]", names::TRACKED), spec],
                ),
                ";".into(),
            ]));
        }
        w.line(format!("{CALL}.send().gradients()"));
    } else {
        let spec = match &like[0] {
            Some((spec, false)) => spec.clone(),
            _ => grad_spec,
        };
        w.line(super::super::code::cat([
            call(
                format!("{CALL}.output"),
                [
                    "rt::TensorKind::Float".to_owned(),
                    format!("{spec}.shape.clone()"),
                    format!("{spec}.dtype"),
                ],
            ),
            ";".into(),
        ]));
        w.line(format!("{CALL}.send().one()"));
    }
    w.close("}");
}

/// For each float input the kernel receives as itself: its spec's local on the client, and
/// whether it is optional.
pub(super) fn saved_like(kernel: &BackwardKernel<'_>) -> Vec<Option<(String, bool)>> {
    let mut like = vec![None; kernel.n];
    for (name, _, kind) in kernel.params() {
        match kind {
            SavedKind::Float(slot) => like[slot] = Some((names::lazy_spec(&name), false)),
            SavedKind::FloatOption(slot) => like[slot] = Some((names::lazy_spec(&name), true)),
            _ => {}
        }
    }
    like
}

/// For float input `slot`, which the kernel does not receive: the shape-contract rule and the
/// spec of the saved input that fix its shape, when they do.
pub(super) fn implied_by(
    kernel: &BackwardKernel<'_>,
    slot: usize,
    like: &[Option<(String, bool)>],
) -> Option<(&'static str, String)> {
    let slots: Vec<_> = kernel.op.float_slots().collect();
    let contract = slots.get(slot)?.shape()?;
    if !matches!(
        contract.rule,
        ShapeRule::SameAs | ShapeRule::LastDimOf | ShapeRule::LeadingDimsOf
    ) {
        return None;
    }
    let of = slots.iter().position(|s| s.name == contract.of)?;
    match &like[of] {
        Some((spec, false)) => Some((contract.rule.variant(), spec.clone())),
        _ => None,
    }
}

/// A backward kernel's call on the server's backend `B`: its saved values, the incoming
/// gradient and the tracked flags read as the client recorded them, the wanted gradients
/// registered (a saved input's summed back to its shape).
pub(super) fn backward_server_call(kernel: &BackwardKernel<'_>, w: &mut Writer) {
    let cfg = remote_backend(kernel.op).and_then(|b| b.cfg.as_deref());
    let n = kernel.n;
    let params = kernel.params();
    w.blank();
    w.doc(&[format!(
        "`{}` on a Remote server's backend `B`: reads the saved values, the incoming gradient and which inputs want one, runs the kernel, registers the gradients.",
        kernel.op_name()
    )]);
    w.cfg(cfg);
    w.line(signature(
        format!(
            "fn {}<B>",
            names::serve_backward(kernel.trait_name(), kernel.method),
        ),
        vec![super::super::param(ARGS, "&mut rt::remote::Args<'_, B>")],
        " -> Result<(), String>",
    ));
    super::super::autodiff::where_clause(
        &[format!("B: rt::remote::BackendIr + {}", kernel.trait_path)],
        w,
    );
    let mut summed = vec![false; n];
    let mut args: Vec<Doc> = Vec::new();
    for (name, ty, kind) in &params {
        let read = match kind {
            SavedKind::Float(slot) => {
                summed[*slot] = true;
                read(TensorKind::Float)
            }
            SavedKind::FloatOption(slot) => {
                summed[*slot] = true;
                format!("{ARGS}.float_option()?")
            }
            SavedKind::Tensor(kind, container) => {
                let kind = *kind;
                match container {
                    Container::One => read(kind),
                    Container::Option => format!("{ARGS}.{}_option()?", kind_fn(kind)),
                    Container::Vec => format!("{ARGS}.{}_vec()?", kind_fn(kind)),
                }
            }
            SavedKind::Plain => {
                let ty = ty.replace("Self", "B");
                w.line(format!(
                    "let {name}: {ty} = {ARGS}.arg({})?;",
                    string_literal(name)
                ));
                args.push(name.clone().into());
                continue;
            }
        };
        w.line(format!("let {name} = {read};"));
        args.push(name.clone().into());
    }
    // A gradient declared with its input's shape (the input saved, or its shape fixed by its
    // contract against a saved input) is summed back to it here.
    let like = saved_like(kernel);
    for (slot, s) in summed.iter_mut().enumerate() {
        if !*s {
            *s = implied_by(kernel, slot, &like).is_some();
        }
    }
    w.line(format!(
        "let {} = {};",
        names::SAVED_GRAD,
        read(TensorKind::Float)
    ));
    args.push(names::SAVED_GRAD.into());
    if n > 1 {
        w.line(format!(
            "let {}: [bool; {n}] = {ARGS}.arg(\"tracked\")?;",
            names::TRACKED
        ));
        args.push(names::TRACKED.into());
    }
    w.assign(
        format!("let {RESULT} = "),
        call(
            format!("<B as {}>::{}", kernel.trait_path, kernel.method),
            args,
        ),
        ";",
    );
    if n > 1 {
        let summed: Vec<&str> = summed
            .iter()
            .map(|s| if *s { "true" } else { "false" })
            .collect();
        w.line(format!(
            "{ARGS}.gradients_out({RESULT}, {}, [{}])",
            names::TRACKED,
            summed.join(", ")
        ));
    } else {
        w.line(format!("{ARGS}.gradient_out({RESULT}, {})", summed[0]));
    }
    w.close("}");
}

//! Ops on `Remote`, at the end of the dispatch file: the client's `impl Trait for Remote`,
//! where an op with output metadata is one custom operation (its inputs, its outputs declared
//! from the metadata, its plain arguments as scalars), and the server's side, the generated
//! `serve_remote_ops` that registers each such op's kernel call on a `RemoteServer`.
//!
//! An op's operation id names the crate, the op and a hash of its declaration, so client and
//! server agree on the encoding or refuse the call ([`crate::ir::RemoteImpl`]).

use super::code::{Doc, Writer, call, cat};
use super::fusion::{
    LazyOutput, kind_variant, metadata_args, output_tensors, outputs_with_paths, return_expr,
};
use super::{allow_complex_output, kind_fn, params, primitive_returns, signature, string_literal};
use crate::ir::{
    Arg, Backend, BackendName, Backward, BackwardForm, Container, FieldSource, Ir, MetaSource, Op,
    Output, RemoteImpl, SavedValue, ShapeRule, TensorArg, TensorKind,
};
use crate::names::{self, ARGS, CALL, OUTPUTS, RESULT, SERVE, SERVE_REMOTE, TENSOR};

/// The Remote backend of `op`, when it runs there as one operation.
fn remote_backend(op: &Op) -> Option<&Backend> {
    if op.remote != RemoteImpl::Kernel {
        return None;
    }
    op.backends.iter().find(|b| b.name == BackendName::Remote)
}

/// The text a client and a server must agree on for one op: its name, each input's name and
/// form, and its output's form. Its hash is part of the operation's id.
fn declaration(ir: &Ir, op: &Op) -> String {
    let inputs: Vec<String> = op
        .inputs
        .iter()
        .map(|input| {
            let form = match &input.arg {
                Arg::Tensor(t) => format!(
                    "{}{}{}",
                    t.kind.key(),
                    super::remote_types::container_mark(t.container),
                    if t.borrowed { "&" } else { "" }
                ),
                Arg::Plain(ty) => format!("={ty}"),
                Arg::Device => "device".to_owned(),
                Arg::Declared { name, borrowed, .. } => format!(
                    "type {}{}",
                    super::remote_types::declaration(ir, name),
                    if *borrowed { "&" } else { "" }
                ),
            };
            format!("{}:{form}", input.name)
        })
        .collect();
    fn output(out: &Output) -> String {
        match out {
            Output::Unit => "()".to_owned(),
            Output::Plain(ty) => format!("={ty}"),
            Output::Tensor(t) => format!(
                "{}{}",
                t.kind.key(),
                super::remote_types::container_mark(t.container)
            ),
            Output::Declared { name, .. } => format!("type {name}"),
            Output::Tuple(items) => {
                let items: Vec<String> = items.iter().map(output).collect();
                format!("({})", items.join(","))
            }
        }
    }
    format!("{}({}){}", op.name, inputs.join(","), output(&op.output))
}

/// Everything Remote in the dispatch file: the ops' operation facts, the client impls, the
/// server's kernel calls and `serve_remote_ops`. Nothing when no op runs on Remote as one
/// operation and no trait is routed there.
pub(super) fn emit(ir: &Ir, w: &mut Writer) {
    let kernels: Vec<&Op> = ir
        .ops
        .iter()
        .filter(|op| remote_backend(op).is_some())
        .collect();
    let backward = backward_kernels(ir);
    statics(ir, &kernels, w);
    backward_statics(ir, &backward, w);
    super::remote_types::emit(ir, &kernels, w);
    for (index, group) in ir.groups.iter().enumerate() {
        if group.composite {
            continue;
        }
        let Some(remote) = group
            .backends
            .iter()
            .find(|b| b.name == BackendName::Remote)
        else {
            continue;
        };
        // The crate writes this trait's Remote implementation itself.
        if ir
            .ops_of(index)
            .any(|op| op.remote == RemoteImpl::HandWritten)
        {
            continue;
        }
        client_impl(ir, index, remote, w);
    }
    backward_impls(ir, &backward, w);
    for op in &kernels {
        server_call(ir, op, w);
    }
    for kernel in &backward {
        backward_server_call(kernel, w);
    }
    serve(ir, &kernels, &backward, w);
}

/// A backward kernel that runs on Remote as one operation: a trait method named by the
/// `backward` of an op that runs there as one operation (the first such op, when several name
/// the method: they share its signature).
struct BackwardKernel<'a> {
    op: &'a Op,
    /// The trait's path, as the manifest writes it.
    trait_path: &'a str,
    /// The method's name.
    method: &'a str,
    /// What it receives before the incoming gradient.
    args: &'a [SavedValue],
    /// The number of float inputs: one gradient each (`N > 1`: told which are tracked).
    n: usize,
}

impl BackwardKernel<'_> {
    /// The trait's last segment.
    fn trait_name(&self) -> &str {
        self.trait_path
            .rsplit("::")
            .next()
            .unwrap_or(self.trait_path)
    }

    /// Its operation's name in ids and messages: `Trait::method`.
    fn op_name(&self) -> String {
        format!("{}::{}", self.trait_name(), self.method)
    }

    /// The params it receives before the gradient, with their types on `Self`, and for each
    /// float input saved as itself, the param (so its gradient takes its shape).
    fn params(&self) -> Vec<(String, String, SavedKind)> {
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
                    let ty = super::autodiff::field_type_on(self.op, &source, "Self");
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
enum SavedKind {
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
fn field_tensor<'a>(op: &'a Op, source: &FieldSource) -> Option<&'a TensorArg> {
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
fn backward_kernels(ir: &Ir) -> Vec<BackwardKernel<'_>> {
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
fn backward_traits(ir: &Ir) -> Vec<(&str, Vec<Option<String>>)> {
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
fn backward_declaration(ir: &Ir, kernel: &BackwardKernel<'_>) -> String {
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
fn backward_statics(ir: &Ir, kernels: &[BackwardKernel<'_>], w: &mut Writer) {
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

/// `static NAME: RemoteOp = RemoteOp { .. }` for operation `op`, its hash over `declaration`
/// (in groups of four digits); the value on a line of its own when the head is too long, as
/// rustfmt lays it out.
fn remote_static(name: &str, op: &str, declaration: &str, w: &mut Writer) {
    const TY: &str = "rt::__private::RemoteOp";
    let head = format!("static {name}: {TY} = {TY} {{");
    let long = !w.fits(&Doc::Text(head.clone()));
    if long {
        w.line(format!("static {name}: {TY} ="));
        w.indent();
        w.open(format!("{TY} {{"));
    } else {
        w.open(head);
    }
    w.line(format!("op: {},", string_literal(op)));
    let digits = format!("{:016x}", burn_route_core::hash(declaration));
    let grouped: Vec<&str> = (0..4).map(|i| &digits[i * 4..i * 4 + 4]).collect();
    w.line(format!("hash: 0x{},", grouped.join("_")));
    w.line("krate: env!(\"CARGO_PKG_NAME\"),");
    w.line("module: module_path!(),");
    w.line(format!(
        "serve: concat!(module_path!(), \"::{SERVE_REMOTE}\"),"
    ));
    w.close("};");
    if long {
        w.dedent();
    }
}

/// `impl Trait for Remote` for each backward trait of ops routed to Remote: the kernels of ops
/// that run there as one operation are one operation too; the other methods keep their
/// default bodies (primitives, each an operation on the server).
fn backward_impls(ir: &Ir, kernels: &[BackwardKernel<'_>], w: &mut Writer) {
    for (trait_path, cfgs) in backward_traits(ir) {
        let cfg = super::any_distinct(cfgs);
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

fn backward_client_method(kernel: &BackwardKernel<'_>, w: &mut Writer) {
    let n = kernel.n;
    let params = kernel.params();
    let mut sig: Vec<Doc> = params
        .iter()
        .map(|(name, ty, _)| super::param(name, ty))
        .collect();
    sig.push(super::param(names::SAVED_GRAD, "rt::FloatTensor<Self>"));
    let ret = if n > 1 {
        sig.push(super::param(names::TRACKED, &format!("[bool; {n}]")));
        format!(" -> [Option<rt::FloatTensor<Self>>; {n}] {{")
    } else {
        " -> rt::FloatTensor<Self> {".to_owned()
    };
    super::allow_many_arguments(sig.len(), w);
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
            w.line(super::code::cat([
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
        w.line(super::code::cat([
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
fn saved_like(kernel: &BackwardKernel<'_>) -> Vec<Option<(String, bool)>> {
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
fn implied_by(
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
fn backward_server_call(kernel: &BackwardKernel<'_>, w: &mut Writer) {
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
        vec![super::param(ARGS, "&mut rt::remote::Args<'_, B>")],
        " -> Result<(), String>",
    ));
    super::autodiff::where_clause(
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

/// One `static` per op that runs on Remote as one operation (used by its routing's `OpInfo`,
/// so always compiled).
fn statics(ir: &Ir, kernels: &[&Op], w: &mut Writer) {
    for op in kernels {
        w.blank();
        w.doc(&[
            format!(
                "`{}` as one operation on Remote: its id is this module, the op and the hash of",
                op.name
            ),
            "its declaration.".to_owned(),
        ]);
        remote_static(
            &names::remote_op(&op.name),
            &op.name,
            &declaration(ir, op),
            w,
        );
    }
}

/// `impl Trait for Remote`: each op with output metadata one custom operation; the others
/// keep the trait's default body, their composition.
fn client_impl(ir: &Ir, index: usize, remote: &Backend, w: &mut Writer) {
    let group = &ir.groups[index];
    let ops: Vec<&Op> = ir
        .ops_of(index)
        .filter(|op| op.remote == RemoteImpl::Kernel)
        .collect();
    w.blank();
    w.doc(&[
        format!(
            "[`{}`] on `Remote`: each op with output metadata is one operation that the",
            group.name
        ),
        format!(
            "server runs with its kernel (registered by [`{SERVE_REMOTE}`]); the others run their"
        ),
        "composition, each primitive an operation on the server.".to_owned(),
    ]);
    w.cfg(remote.cfg.as_deref());
    w.impl_block(
        &format!("impl {}", group.name),
        "rt::Remote",
        ops.is_empty(),
    );
    if ops.is_empty() {
        return;
    }
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            w.blank();
        }
        client_method(op, w);
    }
    w.close("}");
}

fn client_method(op: &Op, w: &mut Writer) {
    allow_complex_output(op, w);
    super::allow_many_arguments(op.inputs.len(), w);
    w.open(signature(
        format!("fn {}", op.name),
        params(op, "Self"),
        primitive_returns(&op.output, "Self", " {"),
    ));
    let facts = format!("&{}", names::remote_op(&op.name));
    match op.device_input() {
        Some(device) => w.assign(
            format!("let mut {CALL} = "),
            call("rt::remote::Call::on_device", [facts, device.name.clone()]),
            ";",
        ),
        None => w.assign(
            format!("let mut {CALL} = "),
            call("rt::remote::Call::new", [facts]),
            ";",
        ),
    }
    let tensors = output_tensors(&op.output);
    let sources = || {
        tensors
            .iter()
            .flat_map(|t| [&t.meta.shape, &t.meta.dtype])
            .flatten()
    };
    let all = sources().any(|s| matches!(s, MetaSource::Function(_)));
    for input in &op.inputs {
        match &input.arg {
            Arg::Tensor(t) => {
                let value = match (t.container, t.borrowed) {
                    (Container::One, false) => call(format!("{CALL}.input"), [input.name.as_str()]),
                    (Container::One, true) => {
                        call(format!("{CALL}.input"), [format!("{}.clone()", input.name)])
                    }
                    (Container::Option, false) => {
                        call(format!("{CALL}.input_option"), [input.name.as_str()])
                    }
                    (Container::Option, true) => call(
                        format!("{CALL}.input_option"),
                        [format!("{}.cloned()", input.name)],
                    ),
                    (Container::Vec, _) => call(format!("{CALL}.inputs"), [input.name.as_str()]),
                };
                let named =
                    sources().any(|s| matches!(s, MetaSource::Input(n) if *n == input.name));
                if all || named {
                    w.assign(
                        format!("let {} = ", names::lazy_spec(&input.name)),
                        value,
                        ";",
                    );
                } else {
                    w.line(super::code::cat([value, ";".into()]));
                }
            }
            Arg::Plain(_) => w.line(format!("{CALL}.arg(&{});", input.name)),
            Arg::Device => {}
            Arg::Declared { borrowed, .. } => w.line(format!(
                "{}{}.{}(&mut {CALL});",
                input.name,
                if *borrowed { ".clone()" } else { "" },
                names::SEND
            )),
        }
    }
    let mut outputs = Vec::new();
    outputs_with_paths(
        &op.output,
        "output".to_owned(),
        String::new(),
        String::new(),
        &mut outputs,
    );
    // (Only a metadata function takes them; an op with a declared-type input has none.)
    let metadata = if all { metadata_args(op) } else { Vec::new() };
    for LazyOutput { tensor: t, .. } in &outputs {
        let shape = match t.meta.shape.as_ref().expect("validated: remote kernel") {
            MetaSource::Input(name) => {
                Doc::from(format!("{}.shape.clone()", names::lazy_spec(name)))
            }
            MetaSource::Function(f) => call(f.as_str(), metadata.clone()),
            MetaSource::Default => unreachable!("validated: no default shape"),
        };
        let dtype = match t.meta.dtype.as_ref().expect("validated: remote kernel") {
            MetaSource::Input(name) => Doc::from(format!("{}.dtype", names::lazy_spec(name))),
            MetaSource::Function(f) => call(f.as_str(), metadata.clone()),
            MetaSource::Default => call(format!("{CALL}.default_dtype"), [kind_variant(t.kind)]),
        };
        let declare = match t.container {
            Container::One => "output",
            Container::Option => "output_option",
            Container::Vec => "output_vec",
        };
        w.line(super::code::cat([
            call(
                format!("{CALL}.{declare}"),
                [Doc::from(kind_variant(t.kind)), shape, dtype],
            ),
            ";".into(),
        ]));
    }
    w.line(format!("let mut {OUTPUTS} = {CALL}.send();"));
    w.line(return_expr(&op.output));
    w.close("}");
}

/// The reader of the next input of kind `kind` on the server.
fn read(kind: TensorKind) -> String {
    format!("{ARGS}.{}()?", kind_fn(kind))
}

/// An op's kernel call on the server's backend `B`: its inputs and arguments read in the order
/// the client recorded them, its outputs registered in the order it declared them.
fn server_call(ir: &Ir, op: &Op, w: &mut Writer) {
    let group = &ir.groups[op.group];
    let cfg = remote_backend(op).and_then(|b| b.cfg.as_deref());
    w.blank();
    w.doc(&[format!(
        "`{}` on a Remote server's backend `B`: reads the operation's inputs and arguments, runs the kernel, registers its outputs.",
        op.name
    )]);
    w.cfg(cfg);
    w.line(signature(
        format!("fn {}<B>", names::serve_op(&op.name)),
        vec![super::param(ARGS, "&mut rt::remote::Args<'_, B>")],
        " -> Result<(), String>",
    ));
    super::autodiff::where_clause(&[format!("B: rt::remote::BackendIr + {}", group.name)], w);
    for input in &op.inputs {
        let name = &input.name;
        match &input.arg {
            Arg::Tensor(t) => match t.container {
                Container::One => w.line(format!("let {name} = {};", read(t.kind))),
                Container::Option => w.line(format!(
                    "let {name} = {ARGS}.{}_option()?;",
                    kind_fn(t.kind)
                )),
                Container::Vec => {
                    w.line(format!("let {name} = {ARGS}.{}_vec()?;", kind_fn(t.kind)))
                }
            },
            Arg::Plain(ty) => w.line(format!(
                "let {name}: {ty} = {ARGS}.arg({})?;",
                string_literal(name)
            )),
            Arg::Device => w.line(format!("let {name} = {ARGS}.device();")),
            Arg::Declared { name: ty, .. } => w.assign(
                format!("let {name} = "),
                cat([
                    call(
                        format!("{}::<B>::{}", names::primitive_type(ty), names::RECEIVE),
                        [ARGS],
                    ),
                    "?".into(),
                ]),
                ";",
            ),
        }
    }
    let kernel_args: Vec<Doc> = op
        .inputs
        .iter()
        .map(|input| match &input.arg {
            Arg::Tensor(t) => match (t.container, t.borrowed) {
                (Container::One, true) => format!("&{}", input.name),
                (Container::Option, true) => format!("{}.as_ref()", input.name),
                _ => input.name.clone(),
            }
            .into(),
            Arg::Device | Arg::Declared { borrowed: true, .. } => format!("&{}", input.name).into(),
            _ => input.name.clone().into(),
        })
        .collect();
    w.assign(
        format!("let {RESULT} = "),
        call(format!("<B as {}>::{}", group.name, op.name), kernel_args),
        ";",
    );
    let mut outputs = Vec::new();
    outputs_with_paths(
        &op.output,
        "output".to_owned(),
        String::new(),
        String::new(),
        &mut outputs,
    );
    for LazyOutput {
        access, tensor: t, ..
    } in &outputs
    {
        let value = format!("{RESULT}{access}");
        let out = format!("{ARGS}.{}_out", kind_fn(t.kind));
        match t.container {
            Container::One => w.line(format!("{out}({value})?;")),
            Container::Option => {
                w.open(format!("if let Some({TENSOR}) = {value} {{"));
                w.line(format!("{out}({TENSOR})?;"));
                w.close("}");
            }
            Container::Vec => {
                w.open(format!("for {TENSOR} in {value} {{"));
                w.line(format!("{out}({TENSOR})?;"));
                w.close("}");
            }
        }
    }
    w.line("Ok(())");
    w.close("}");
}

/// `all(a, b)` of two optional cfgs (`None`: always).
fn all_cfg(a: Option<&str>, b: Option<&str>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) if a != b => Some(format!("all({a}, {b})")),
        (Some(a), _) => Some(a.to_owned()),
        (None, b) => b.map(str::to_owned),
    }
}

/// One operation a server backend registers: its static, its handler, its cfg.
type Registration = (String, String, Option<String>);

/// `serve_remote_ops`, and one registration function per server backend: every manifest routed
/// to Remote has it (only the handshake when no op runs there as one operation), so a server
/// binary calls it without knowing which ops do.
fn serve(ir: &Ir, kernels: &[&Op], backward: &[BackwardKernel<'_>], w: &mut Writer) {
    // Where `Remote` is compiled in: any trait routed there.
    let remotes: Vec<&Backend> = ir
        .groups
        .iter()
        .filter_map(|g| g.backends.iter().find(|b| b.name == BackendName::Remote))
        .collect();
    if remotes.is_empty() {
        return;
    }
    let serve_cfg = super::any_distinct(remotes.iter().map(|b| b.cfg.clone()).collect());
    // The ops a server backend runs, each with the cfg its registration needs (its Remote's
    // and that backend's), and where the backend's registration is compiled in.
    // Each registration: the operation's static, its handler, its cfg.
    let on = |backend: BackendName| -> (Vec<Registration>, Option<String>) {
        let cfg_on = |op: &Op| {
            let there = ir.groups[op.group]
                .backends
                .iter()
                .find(|b| b.name == backend)?;
            let remote = remote_backend(op)?;
            Some(all_cfg(remote.cfg.as_deref(), there.cfg.as_deref()))
        };
        let ops = kernels
            .iter()
            .filter_map(|op| {
                Some((
                    names::remote_op(&op.name),
                    names::serve_op(&op.name),
                    cfg_on(op)?,
                ))
            })
            .chain(backward.iter().filter_map(|k| {
                Some((
                    names::remote_backward_op(k.trait_name(), k.method),
                    names::serve_backward(k.trait_name(), k.method),
                    cfg_on(k.op)?,
                ))
            }))
            .collect();
        let cfgs: Vec<Option<String>> = ir
            .groups
            .iter()
            .filter_map(|g| {
                let remote = g.backends.iter().find(|b| b.name == BackendName::Remote)?;
                let there = g.backends.iter().find(|b| b.name == backend)?;
                Some(all_cfg(remote.cfg.as_deref(), there.cfg.as_deref()))
            })
            .collect();
        let cfg = if backend == BackendName::Flex {
            // A Flex server gets the handshake whatever the traits list.
            serve_cfg.clone()
        } else if cfgs.is_empty() {
            // No trait is routed to both: a server of that backend answers the handshake
            // alone, where Remote and the backend are both compiled in.
            let anywhere = super::any_distinct(
                ir.groups
                    .iter()
                    .filter_map(|g| g.backends.iter().find(|b| b.name == backend))
                    .map(|b| b.cfg.clone())
                    .collect(),
            );
            all_cfg(serve_cfg.as_deref(), anywhere.as_deref())
        } else {
            super::any_distinct(cfgs)
        };
        (ops, cfg)
    };
    let (flex, flex_cfg) = on(BackendName::Flex);
    let (cube, cube_cfg) = on(BackendName::Cube);
    let serve_cube = !cube.is_empty()
        || ir
            .groups
            .iter()
            .any(|g| g.backends.iter().any(|b| b.name == BackendName::Cube));
    w.blank();
    w.doc(&[
        format!(
            "Registers every op of `{}` that runs on the Remote server as one operation on `server`,",
            ir.manifest_name
        ),
        "for the backend of `devices` (the server's devices: Flex, or Cube when this build has it),"
            .to_owned(),
        "and the handshake a client asks before its first call of each op. A server binary calls"
            .to_owned(),
        "it once per crate of ops it serves, before serving:".to_owned(),
        String::new(),
        "```ignore".to_owned(),
        "let devices = [Device::flex()];".to_owned(),
        format!("let server = {SERVE_REMOTE}(RemoteServer::new(devices.clone()), &devices);"),
        "```".to_owned(),
        String::new(),
        "A client whose server does not call it gets [`rt::RouteError::RemoteNotServed`] at its"
            .to_owned(),
        "first call of an op on that server, naming the op and this function.".to_owned(),
    ]);
    w.cfg(serve_cfg.as_deref());
    w.open(signature(
        format!("pub fn {SERVE_REMOTE}"),
        vec![
            super::param("server", "rt::remote::RemoteServer"),
            super::param("devices", "&[rt::Device]"),
        ],
        " -> rt::remote::RemoteServer {",
    ));
    w.open("match rt::remote::backend_of(devices) {");
    w.cfg(inner_cfg(serve_cfg.as_deref(), flex_cfg.as_deref()));
    w.line(format!(
        "Some(rt::BackendId::Flex) => {}(server),",
        names::serve_on(BackendName::Flex)
    ));
    if serve_cube {
        w.cfg(inner_cfg(serve_cfg.as_deref(), cube_cfg.as_deref()));
        w.line(format!(
            "Some(rt::BackendId::Cube) => {}(server),",
            names::serve_on(BackendName::Cube)
        ));
    }
    w.line("_ => server,");
    w.close("}");
    w.close("}");
    for (backend, ops, cfg) in [
        (BackendName::Flex, &flex, flex_cfg.clone()),
        (BackendName::Cube, &cube, cube_cfg.clone()),
    ] {
        if backend == BackendName::Cube && !serve_cube {
            continue;
        }
        w.blank();
        w.doc(&[format!(
            "The ops a {} server runs, and the handshake.",
            backend.key()
        )]);
        w.cfg(cfg.as_deref());
        w.open(signature(
            format!("fn {}", names::serve_on(backend)),
            vec![super::param("server", "rt::remote::RemoteServer")],
            " -> rt::remote::RemoteServer {",
        ));
        w.assign(
            format!("let {SERVE} = "),
            call(
                format!("rt::remote::Serve::<rt::{}>::new", backend.key()),
                ["server", "module_path!()"],
            ),
            ";",
        );
        for (facts, handler, op_cfg) in ops.iter() {
            w.cfg(inner_cfg(cfg.as_deref(), op_cfg.as_deref()));
            w.assign(
                format!("let {SERVE} = "),
                call(
                    format!("{SERVE}.op"),
                    // (`B` is inferred from the handler type `Serve::<B>::op` takes.)
                    [format!("&{facts}"), handler.clone()],
                ),
                ";",
            );
        }
        w.line(format!("{SERVE}.finish()"));
        w.close("}");
    }
}

/// The cfg an item inside code compiled under `outer` needs for `inner`: none when they are
/// the same.
fn inner_cfg<'a>(outer: Option<&str>, inner: Option<&'a str>) -> Option<&'a str> {
    if outer == inner { None } else { inner }
}

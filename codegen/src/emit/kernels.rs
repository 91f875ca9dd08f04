//! Backward kernels: the trait methods that function-form `backward` keys name
//! (`backward = "crate::kernels::BackwardKernels::f"`), and their implementations on the two
//! targets that run an op as one custom operation. Where an op runs as one operation (on
//! `Fusion<B>`, `fusion = "kernel"`, the default; on Remote, `remote = "kernel"`), its backward
//! kernel does too: the generated `impl Trait for Fusion<B>` defers it to `B`'s kernel, and
//! `impl Trait for Remote` sends it to the server's. The other methods keep the trait's default
//! bodies (their primitives, which Burn fuses on `Fusion<B>`). Both impls are written here,
//! recorded by [`record`](super::record); the server's side is [`remote`](super::remote)'s.

use super::code::{Doc, Writer, call, cat};
use super::record::{Target, input_call, kind_variant, spec_call};
use super::{any_distinct, inner_cfg, signature, string_literal};
use crate::ir::{
    Arg, Backend, BackendId, Backward, BackwardForm, Container, FieldSource, Ir, Op, Output,
    RemoteImpl, SavedValue, ShapeRule, TensorArg, TensorKind,
};
use crate::names::{self, HANDLES, OUTPUTS, RESULT};

impl Target {
    /// The backend through which `op` runs on this target as one operation, if it does.
    pub(super) fn kernel_backend(self, op: &Op) -> Option<&Backend> {
        let name = self.backend();
        let runs = op.one_operation_on(name) == Some(true);
        op.backends.iter().find(|b| runs && b.name == name)
    }

    /// The selector the target stands behind.
    fn backend(self) -> BackendId {
        match self {
            Target::Fusion => BackendId::Cube,
            Target::Remote => BackendId::Remote,
        }
    }

    /// Whether `op`'s backward trait is implemented for this target: `op` is routed there (and
    /// not composite).
    fn implements(self, op: &Op) -> bool {
        op.one_operation_on(self.backend()).is_some()
    }
}

/// A backward kernel that runs on a target as one operation: a trait method named by the
/// `backward` of an op that runs there as one operation (the first such op, when several name
/// the method: they share its signature).
pub(crate) struct BackwardKernel<'a> {
    pub(crate) op: &'a Op,
    /// The trait's path, as the manifest writes it.
    pub(crate) trait_path: &'a str,
    /// The method's name.
    pub(crate) method: &'a str,
    /// What it receives before the incoming gradient.
    pub(crate) args: &'a [SavedValue],
    /// The number of float inputs: one gradient each (`N > 1`: told which are tracked).
    pub(crate) n: usize,
}

impl BackwardKernel<'_> {
    /// The trait's last segment.
    pub(crate) fn trait_name(&self) -> &str {
        self.trait_path
            .rsplit("::")
            .next()
            .unwrap_or(self.trait_path)
    }

    /// Its operation's name in ids and messages: `Trait::method`.
    pub(crate) fn op_name(&self) -> String {
        format!("{}::{}", self.trait_name(), self.method)
    }

    /// The params it receives before the gradient, with their types on `Self`, and for each
    /// float input saved as itself, the param (so its gradient takes its shape).
    pub(crate) fn params(&self) -> Vec<(String, String, SavedKind)> {
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
pub(crate) enum SavedKind {
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
pub(crate) fn field_tensor<'a>(op: &'a Op, source: &FieldSource) -> Option<&'a TensorArg> {
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

/// The backward kernels that run on `target` as one operation, in op order, each method once.
pub(super) fn kernels(ir: &Ir, target: Target) -> Vec<BackwardKernel<'_>> {
    let mut out: Vec<BackwardKernel<'_>> = Vec::new();
    for op in ir
        .ops
        .iter()
        .filter(|op| target.kernel_backend(op).is_some())
    {
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

/// The trait of `op`'s trait-method backward pass, if it has one.
fn backward_trait(op: &Op) -> Option<&str> {
    match &op.backward {
        Some(Backward {
            form:
                BackwardForm::Function {
                    method_of: Some(trait_path),
                    ..
                },
            ..
        }) => Some(trait_path),
        _ => None,
    }
}

/// The traits of trait-method backward passes of ops routed to `target`, each with the cfgs of
/// those ops' backend there: the target implements each (its methods' default bodies, or one
/// operation). On Remote, a trait that an op with a hand-written Remote implementation names
/// is the crate's to implement.
fn traits(ir: &Ir, target: Target) -> Vec<(&str, Vec<Option<String>>)> {
    let mut out: Vec<(&str, Vec<Option<String>>)> = Vec::new();
    for op in ir.ops.iter().filter(|op| target.implements(op)) {
        let (Some(trait_path), Some(backend)) = (
            backward_trait(op),
            op.backends.iter().find(|b| b.name == target.backend()),
        ) else {
            continue;
        };
        match out.iter_mut().find(|(t, _)| *t == trait_path) {
            Some((_, cfgs)) => cfgs.push(backend.cfg.clone()),
            None => out.push((trait_path, vec![backend.cfg.clone()])),
        }
    }
    out.retain(|(trait_path, _)| {
        !ir.ops.iter().any(|op| {
            op.remote == RemoteImpl::HandWritten
                && target == Target::Remote
                && backward_trait(op) == Some(trait_path)
        })
    });
    out
}

/// `impl Trait for Fusion<B>` or `impl Trait for Remote` for each backward trait of ops routed
/// to `target`: the kernels of ops that run there as one operation are one operation too; the
/// other methods keep their default bodies. Compiled where the target's routing is, autodiff
/// or not: a Remote server serves the backward kernels without autodiff of its own.
pub(super) fn impls(ir: &Ir, target: Target, kernels: &[BackwardKernel<'_>], w: &mut Writer) {
    for (trait_path, cfgs) in traits(ir, target) {
        let cfg = any_distinct(cfgs);
        let methods: Vec<&BackwardKernel<'_>> = kernels
            .iter()
            .filter(|k| k.trait_path == trait_path)
            .collect();
        w.blank();
        let doc = match target {
            Target::Fusion => format!(
                "`{trait_path}` on `Fusion<B>`: the backward kernel of each op that runs there as one deferred operation is one deferred operation too, running `B`'s kernel; the other methods keep their default bodies (primitives, which Burn fuses)."
            ),
            Target::Remote => format!(
                "`{trait_path}` on `Remote`: the backward kernel of each op that runs on the server as one operation is one operation too (registered by [`{}`]); the other methods keep their default bodies.",
                names::SERVE_REMOTE
            ),
        };
        w.doc(&[doc]);
        w.cfg(cfg.as_deref());
        match target {
            // The bound in a `where` clause, which rustfmt breaks like any other.
            Target::Fusion => {
                let head = format!("impl<B> {trait_path} for rt::fusion::Fusion<B>");
                if w.fits(&Doc::from(head.clone())) {
                    w.line(head);
                } else {
                    w.line(format!("impl<B> {trait_path}"));
                    w.indent();
                    w.line("for rt::fusion::Fusion<B>");
                    w.dedent();
                }
                super::autodiff::where_clause(
                    &[format!("B: rt::fusion::FusionBackend + {trait_path}")],
                    w,
                );
                if methods.is_empty() {
                    w.close("}");
                    continue;
                }
            }
            Target::Remote => {
                w.impl_block(
                    &format!("impl {trait_path}"),
                    "rt::Remote",
                    methods.is_empty(),
                );
            }
        }
        if methods.is_empty() {
            continue;
        }
        for (i, kernel) in methods.iter().enumerate() {
            if i > 0 {
                w.blank();
            }
            let own = target
                .kernel_backend(kernel.op)
                .and_then(|b| b.cfg.as_deref());
            w.cfg(inner_cfg(cfg.as_deref(), own));
            method(target, kernel, w);
        }
        w.close("}");
    }
}

/// One backward kernel's method on `target`: its saved values and the incoming gradient
/// recorded, each wanted gradient declared with its input's shape and dtype (or the incoming
/// gradient's), then on Remote the call sent, on `Fusion<B>` the operation queued with a
/// closure that runs `B`'s kernel and publishes the gradients (a broadcast input's summed back
/// to its shape).
fn method(target: Target, kernel: &BackwardKernel<'_>, w: &mut Writer) {
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
    let facts = match target {
        Target::Fusion => {
            let backward = kernel.op.backward.as_ref().expect("a backward kernel's op");
            vec![string_literal(&backward.location)]
        }
        Target::Remote => vec![format!(
            "&{}",
            names::remote_backward_op(kernel.trait_name(), kernel.method)
        )],
    };
    target.start(&kernel.op_name(), &facts, None, w);
    let local = target.local();
    // The float inputs saved as themselves give their gradient its shape.
    let like = saved_like(kernel);
    let grad_in = names::lazy_input(names::SAVED_GRAD);
    for (name, ty, kind) in &params {
        let container = match kind {
            SavedKind::Float(_) => Container::One,
            SavedKind::FloatOption(_) => Container::Option,
            SavedKind::Tensor(_, container) => *container,
            SavedKind::Plain => {
                target.plain(name, ty, w);
                continue;
            }
        };
        let value = input_call(target, container, name.as_str().into());
        let float = matches!(kind, SavedKind::Float(_) | SavedKind::FloatOption(_));
        if float || target.keeps_inputs() {
            w.assign(format!("let {} = ", names::lazy_input(name)), value, ";");
        } else {
            w.line(cat([value, ";".into()]));
        }
    }
    w.assign(
        format!("let {grad_in} = "),
        input_call(target, Container::One, names::SAVED_GRAD.into()),
        ";",
    );
    if n > 1 {
        target.plain(names::TRACKED, &format!("[bool; {n}]"), w);
    }
    for (name, _, kind) in &params {
        let container = match kind {
            SavedKind::Float(_) => Container::One,
            SavedKind::FloatOption(_) => Container::Option,
            _ => continue,
        };
        w.assign(
            format!("let {} = ", names::lazy_spec(name)),
            spec_call(target, container, &names::lazy_input(name)),
            ";",
        );
    }
    // The incoming gradient's spec, for the gradients not declared with their input's.
    let grad_spec = names::GRAD_SPEC;
    if own_shape(kernel).contains(&false) {
        w.assign(
            format!("let {grad_spec} = "),
            spec_call(target, Container::One, &grad_in),
            ";",
        );
    }
    let slots: Vec<_> = kernel.op.float_slots().collect();
    let keep = |value: Doc, w: &mut Writer| {
        if target.keeps_outputs() {
            w.assign(format!("let {} = ", names::OUT), value, ";");
        } else {
            w.line(cat([value, ";".into()]));
        }
    };
    if n > 1 {
        let declared: Vec<Doc> = like
            .iter()
            .enumerate()
            .map(|(i, own)| {
                let spec = match own {
                    Some((spec, false)) => format!("Some(&{spec})"),
                    Some((spec, true)) => format!("{spec}.as_ref()"),
                    None => match implied_by(kernel, i, &like) {
                        Some((rule, spec)) => format!(
                            "{rt}::{private}::implied({rt}::ShapeRule::{rule}, &{spec}).as_ref()",
                            rt = names::RUNTIME,
                            private = names::PRIVATE,
                        ),
                        None => format!("Some(&{grad_spec})"),
                    },
                };
                call(
                    format!("{local}.gradient"),
                    [
                        gradient_path(&slots[i].name),
                        format!("{}[{i}]", names::TRACKED),
                        spec,
                    ],
                )
            })
            .collect();
        if target.keeps_outputs() {
            keep(super::code::args("[", declared, "]"), w);
        } else {
            for value in declared {
                w.line(cat([value, ";".into()]));
            }
        }
    } else {
        let spec = match &like[0] {
            Some((spec, false)) => spec.clone(),
            _ => grad_spec.to_owned(),
        };
        keep(
            call(
                format!("{local}.output"),
                [
                    kind_variant(TensorKind::Float).to_owned(),
                    gradient_path(&slots[0].name),
                    format!("{spec}.shape.clone()"),
                    format!("{spec}.dtype"),
                ],
            ),
            w,
        );
    }
    let take = if n > 1 { "gradients()" } else { "one()" };
    match target {
        Target::Remote => w.line(format!("{local}.send().{take}")),
        Target::Fusion => {
            fusion_run(kernel, &params, w);
            w.line(format!("{OUTPUTS}.{take}"));
        }
    }
    w.close("}");
}

/// The path a gradient's declaration names in messages: `gradient of x` (core's
/// `GRADIENT_OF`, which the runtime's error reads).
fn gradient_path(slot: &str) -> String {
    string_literal(&format!("{}{slot}", burn_route_core::GRADIENT_OF))
}

/// `let mut __outputs = __lazy.register(move |__handles| { ... });`: `B`'s kernel on the
/// recorded values, its gradients checked and published.
fn fusion_run(kernel: &BackwardKernel<'_>, params: &[(String, String, SavedKind)], w: &mut Writer) {
    let lazy = Target::Fusion.local();
    w.open(format!(
        "let mut {OUTPUTS} = {lazy}.register(move |{HANDLES}| {{"
    ));
    let mut args: Vec<Doc> = params
        .iter()
        .map(|(name, _, kind)| {
            let kind = match kind {
                SavedKind::Float(_) | SavedKind::FloatOption(_) => TensorKind::Float,
                SavedKind::Tensor(kind, _) => *kind,
                SavedKind::Plain => {
                    return format!("{}::{}::cloned(&{name})", names::RUNTIME, names::PRIVATE)
                        .into();
                }
            };
            format!(
                "{HANDLES}.{}(&{})",
                super::kind_fn(kind),
                names::lazy_input(name)
            )
            .into()
        })
        .collect();
    args.push(format!("{HANDLES}.float(&{})", names::lazy_input(names::SAVED_GRAD)).into());
    if kernel.n > 1 {
        args.push(names::TRACKED.into());
    }
    kernel_call(kernel, args, w);
    let publish = if kernel.n > 1 {
        "publish_gradients"
    } else {
        "publish_gradient"
    };
    w.line(format!(
        "{HANDLES}.{publish}(&{}, {RESULT}, {})?;",
        names::OUT,
        summed_flags(kernel)
    ));
    w.line("Ok(())");
    w.close("});");
}

/// For each float input: whether its gradient is declared with its own shape (else with the
/// incoming gradient's). One input: when the kernel receives it, and it is not optional (the
/// method declares its gradient as its one output); several: when the kernel receives it, or
/// a contract against an input it receives fixes its shape.
fn own_shape(kernel: &BackwardKernel<'_>) -> Vec<bool> {
    let like = saved_like(kernel);
    if kernel.n == 1 {
        return vec![matches!(like[0], Some((_, false)))];
    }
    (0..kernel.n)
        .map(|slot| like[slot].is_some() || implied_by(kernel, slot, &like).is_some())
        .collect()
}

/// `let __result = <B as Trait>::method(args);`: the kernel on the running side's backend.
pub(crate) fn kernel_call(kernel: &BackwardKernel<'_>, args: Vec<Doc>, w: &mut Writer) {
    w.assign(
        format!("let {RESULT} = "),
        call(
            format!("<B as {}>::{}", kernel.trait_path, kernel.method),
            args,
        ),
        ";",
    );
}

/// For each float input: whether its gradient is declared with its own shape (the input saved
/// as itself, or its shape fixed by its contract against a saved input), so that what the
/// kernel gives is summed back to it where the input was broadcast; as the running side's
/// argument, `[true, false]` (one input: `true`).
pub(crate) fn summed_flags(kernel: &BackwardKernel<'_>) -> String {
    let flags: Vec<&str> = own_shape(kernel)
        .into_iter()
        .map(|s| if s { "true" } else { "false" })
        .collect();
    match flags.as_slice() {
        [one] => (*one).to_owned(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// For each float input the kernel receives as itself: its spec's local on the client, and
/// whether it is optional.
pub(crate) fn saved_like(kernel: &BackwardKernel<'_>) -> Vec<Option<(String, bool)>> {
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
pub(crate) fn implied_by(
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

//! `impl Trait for Dispatch`, and every op's `try_` function and the `route_` function behind
//! both.

use super::code::{Doc, INDENT, WIDTH, Writer, args, call, cat, parens, predicate_in_code};
use super::{
    EmitConfig, Level, Use, allow_complex_output, any_cfg, autodiff_backend_cfg, contained,
    forward_call, generic_type, input_type, kind_fn, output_doc, output_expr, params,
    primitive_returns, result_returns, returns_doc, signature, string_literal, uses,
};
use crate::ir::{
    Arg, Backend, Container, Input, Ir, Leaf, Op, Output, Policy, RouteBy, Step, TensorArg,
};
use crate::names::{
    self, ERROR, KERNEL, OP_INFO, OUT, PLANNED, PRIVATE_RUNTIME as RT, ROUTE, RUN, SHAPES,
};

mod arms;
mod asynchronous;
mod runs;

use arms::*;
use asynchronous::*;
use runs::*;

pub(super) fn emit(ir: &Ir, config: &EmitConfig, w: &mut Writer) {
    let module = &config.trait_module;
    let mut imports = vec![
        Use::runtime(config),
        Use::new(format!("{}::{} as {RT}", config.runtime, names::PRIVATE)),
    ];
    for (index, group) in ir.groups.iter().enumerate() {
        imports.push(Use::new(format!("{module}::{}", group.name)));
        if ir.needs_autodiff_trait(index) {
            // Used by the autodiff arms, which need one of the group's backends compiled too.
            let cfg = match any_cfg(group.backends.iter().map(|b| b.cfg.as_deref())) {
                Some(backends) => format!("all({}, {backends})", ir.autodiff_cfg),
                None => ir.autodiff_cfg.clone(),
            };
            imports.push(Use::new(format!("{module}::{}", group.autodiff_name)).cfg(cfg));
        }
    }
    if ir.has_derived_autodiff() {
        // Used by the autodiff arms of the ops with a generated `Autodiff<B, C>` kernel.
        let backends = ir
            .ops
            .iter()
            .filter(|op| op.generated_autodiff())
            .flat_map(|op| op.backends.iter().map(|b| b.cfg.as_deref()));
        let cfg = match any_cfg(backends) {
            Some(backends) => format!("all({}, {backends})", ir.autodiff_cfg),
            None => ir.autodiff_cfg.clone(),
        };
        imports.push(Use::new(format!("{module}::{}", names::AUTODIFF_MODULE)).cfg(cfg));
    }
    // The declared types the ops take or return (nested ones included): the others (a type no
    // op uses, a warning) appear nowhere in this module.
    let routed: std::collections::BTreeSet<&str> = super::types::input_types(ir)
        .into_iter()
        .chain(super::types::output_types(ir))
        .map(|def| def.name.as_str())
        .collect();
    for def in ir
        .types
        .iter()
        .filter(|def| routed.contains(def.name.as_str()))
    {
        imports.push(Use::new(format!(
            "{module}::{}",
            names::primitive_type(&def.name)
        )));
    }
    uses(imports, w);
    aliases(ir, w);
    for (index, group) in ir.groups.iter().enumerate() {
        w.blank();
        w.open(format!("impl {} for rt::Dispatch {{", group.name));
        for op in ir.ops_of(index) {
            dispatch_method(op, w);
        }
        w.close("}");
    }
    let runs = Runs::new(ir);
    for index in 0..ir.ops.len() {
        if let Some(text) = runs.defined_before(index) {
            w.blank();
            w.append(text);
        }
        w.blank();
        routing_fns(ir, index, &runs, w);
    }
    super::types::conversions(ir, w);
    super::remote::emit(ir, w);
}

/// Short names for the two `Autodiff<B, C>` implementations of each backend that serves a
/// differentiable op, so the routing arms read `__run::<AutodiffFlex>(...)`.
fn aliases(ir: &Ir, w: &mut Writer) {
    let mut aliased: Vec<&Backend> = Vec::new();
    for op in ir
        .ops
        .iter()
        .filter(|op| op.policy == Policy::Differentiable)
    {
        for backend in &op.backends {
            if !aliased.iter().any(|b| b.name == backend.name) {
                aliased.push(backend);
            }
        }
    }
    for backend in aliased {
        let cfg = autodiff_backend_cfg(ir, backend);
        let name = backend.name.key();
        w.blank();
        w.doc(&[format!(
            "`Autodiff<{name}>`: the route for tracked {name} tensors."
        )]);
        w.cfg(Some(&cfg));
        w.line(format!(
            "type {} = rt::Autodiff<rt::{name}>;",
            names::autodiff_alias(backend.name)
        ));
        w.blank();
        w.doc(&[format!(
            "`Autodiff<{name}>` with balanced gradient checkpointing."
        )]);
        w.cfg(Some(&cfg));
        w.line(format!(
            "type {} = rt::Autodiff<rt::{name}, rt::BalancedCheckpointing>;",
            names::balanced_alias(backend.name)
        ));
    }
}

fn dispatch_method(op: &Op, w: &mut Writer) {
    let try_name = names::try_fn(&op.name);
    if op.asynchronous {
        w.doc(&[format!(
            "Routes like [`{try_name}`](fn@{try_name}), at the call, and panics there with its \
             error; the future runs the kernel."
        )]);
        // (It calls the op's `try_` function, deprecated with the op.)
        if op.deprecated.is_some() {
            w.line("#[allow(deprecated)]");
        }
        w.line("#[inline]");
        w.open(signature(
            format!("fn {}", op.name),
            params(op, "Self"),
            super::op_returns(op, "Self", " {"),
        ));
        super::bind_then(
            w,
            names::PLANNED_CALL,
            forward_call(&format!("self::{try_name}"), op),
            "",
            ".or_panic()",
            "",
        );
        w.close("}");
        return;
    }
    w.doc(&[format!(
        "Routes like [`{try_name}`](fn@{try_name}), and panics with its error."
    )]);
    w.line("#[inline]");
    w.open(signature(
        format!("fn {}", op.name),
        params(op, "Self"),
        primitive_returns(&op.output, "Self", " {"),
    ));
    w.line(forward_call(
        &format!("self::{}::<{RT}::Panic>", names::route_fn(&op.name)),
        op,
    ));
    w.close("}");
}

/// A parameter's type at the `Dispatch` level.
fn dispatch_input(arg: &Arg) -> String {
    match arg {
        Arg::Tensor(t) => contained(t, "rt::DispatchTensor"),
        Arg::Plain(ty) => ty.clone(),
        Arg::Device => "&rt::DispatchDevice".to_owned(),
        Arg::Declared { name, borrowed, .. } => {
            let ty = Level::Dispatch.declared(name, &[]);
            if *borrowed { format!("&{ty}") } else { ty }
        }
    }
}

/// Unwraps a declared-type input inside `__run::<B>`: each of its tensors, named by its path
/// (`boxes.scores`) for the messages of a routing bug. A borrowed value is cloned (its tensors
/// are reference-counted handles) and lent to the kernel.
fn unwrap_declared(op: &Op, input: &Input, borrowed: bool, route: &str, w: &mut Writer) {
    let id = &input.name;
    let leaf_names: Vec<Doc> = op
        .routing_tensors()
        .into_iter()
        .filter(|(_, i, _, _)| i.name == *id)
        .map(|(name, _, _, _)| string_literal(&name).into())
        .collect();
    // Cloned in a statement of its own: `id.clone().__unwrap::<B>(..)` would be a method chain,
    // which rustfmt breaks past `chain_width`, one call per line.
    if borrowed {
        w.line(format!("let {id} = {id}.clone();"));
    }
    let unwrap = call(
        format!("{id}.{}::<B>", names::UNWRAP),
        [
            Doc::from(route),
            cat(["&".into(), args("[", leaf_names, "]")]),
        ],
    );
    w.assign(format!("let {id} = "), unwrap, ";");
}

/// Unwraps one input inside the generic `__run::<B>` body. Planning has checked every input, so
/// unwrapping cannot fail (a failure would be a runtime bug, and panics): `__run` has no error
/// paths, which keeps the per-op, per-backend code that the compiler generates small.
fn unwrap_input(name: &str, t: &TensorArg, w: &mut Writer) {
    let suffix = match (t.container, t.borrowed) {
        (Container::One, false) => "",
        (Container::One, true) => "_ref",
        (Container::Option, false) => "_opt",
        (Container::Option, true) => "_ref_opt",
        (Container::Vec, _) => "_vec",
    };
    let unwrap = call(
        format!("B::{}{suffix}", kind_fn(t.kind)),
        [ROUTE.to_owned(), string_literal(name), name.to_owned()],
    );
    w.assign(format!("let {name} = "), unwrap, ";");
}

/// How the kernel receives an unwrapped input.
fn kernel_arg(name: &str, arg: &Arg) -> Doc {
    match arg {
        Arg::Tensor(t) if t.borrowed && t.container == Container::Option => {
            format!("{name}.as_deref()").into()
        }
        Arg::Tensor(t) if t.borrowed => format!("&{name}").into(),
        Arg::Device => format!("&{name}").into(),
        Arg::Declared { borrowed: true, .. } => format!("&{name}").into(),
        Arg::Tensor(_) | Arg::Plain(_) | Arg::Declared { .. } => name.into(),
    }
}

/// The planner's view of the tensor inputs: an array of `__rt::Input`s, or, when an input is an
/// `Option` or a `Vec`, `__rt::Group::all` of their groups.
fn plan_inputs(op: &Op) -> Doc {
    let tensors = op.routing_tensors();
    let simple = tensors
        .iter()
        .all(|(_, _, t, leaf)| t.container == Container::One && leaf.is_none());
    let items: Vec<Doc> = tensors
        .iter()
        .enumerate()
        .map(|(k, (label, input, t, leaf))| {
            let id = &input.name;
            let kind = kind_fn(t.kind);
            if let Some(leaf) = leaf {
                // Its index among the input's tensors.
                let index = tensors[..k]
                    .iter()
                    .filter(|(_, i, _, _)| i.name == *id)
                    .count();
                return leaf_group(id, label, kind, t, leaf, index);
            }
            let label = string_literal(id);
            let (suffix, value) = match (t.container, t.borrowed) {
                (Container::One, true) => ("", id.clone()),
                (Container::One, false) => ("", format!("&{id}")),
                (Container::Option, true) => ("_opt", id.clone()),
                (Container::Option, false) => ("_opt", format!("{id}.as_ref()")),
                (Container::Vec, _) => ("_vec", format!("&{id}")),
            };
            let ctor = if simple { "Input" } else { "Group" };
            call(format!("{RT}::{ctor}::{kind}{suffix}"), [label, value])
        })
        .collect();
    let array = args("[", items, "]");
    if simple {
        array
    } else {
        call(format!("{RT}::Group::all"), [array])
    }
}

/// The planner's group of one tensor of a declared-type input `id`: read in place when every
/// step to it is a struct field; else matched out of its enum variant, an absent tensor (like
/// an absent `Option`) when the value is another variant.
fn leaf_group(id: &str, label: &str, kind: &str, t: &TensorArg, leaf: &Leaf, index: usize) -> Doc {
    let label = string_literal(label);
    if !leaf.refutable() {
        let mut place = id.to_owned();
        for step in &leaf.path {
            if let Step::Field { field, .. } = step {
                place.push('.');
                place.push_str(field);
            }
        }
        let (suffix, value) = match t.container {
            Container::One => ("", format!("&{place}")),
            Container::Option => ("_opt", format!("{place}.as_ref()")),
            Container::Vec => ("_vec", format!("&{place}")),
        };
        return call(format!("{RT}::Group::{kind}{suffix}"), [label, value]);
    }
    // Inside an enum variant: the type's accessor for it.
    let suffix = match t.container {
        Container::One | Container::Option => "_opt",
        Container::Vec => "_vec",
    };
    let value = format!("{id}.{}()", names::leaf_accessor(index));
    call(format!("{RT}::Group::{kind}{suffix}"), [label, value])
}

/// Wraps one kernel output (the expression `value`) for the `Dispatch` level.
fn wrap_output(t: &TensorArg, value: Doc) -> Doc {
    let suffix = match t.container {
        Container::One => "",
        Container::Option => "_opt",
        Container::Vec => "_vec",
    };
    call(
        format!("B::{}_out{suffix}", kind_fn(t.kind)),
        [Doc::from(ROUTE), value],
    )
}

/// An op's public `try_` function and the private `route_` function behind it and the
/// panicking `Dispatch` method, with its nested `__run` (the generic kernel call) and
/// `__plan_and_run` (the full planner, then the routing arms).
fn routing_fns(ir: &Ir, index: usize, runs: &Runs, w: &mut Writer) {
    let op = &ir.ops[index];
    if op.asynchronous {
        async_routing_fns(ir, op, w);
        return;
    }
    let try_name = names::try_fn(&op.name);
    let route_name = names::route_fn(&op.name);
    let group = &ir.groups[op.group];
    w.doc(&[
        format!(
            "[`{}::{}`] for `Dispatch` primitives, returning the routing error instead of",
            group.name, op.name
        ),
        "panicking.".to_owned(),
        String::new(),
        "# Errors".to_owned(),
        String::new(),
        "A [`rt::RouteError`] when the call breaks the routing contract (see [`rt::errors`])."
            .to_owned(),
    ]);
    let dispatch_params: Vec<Doc> = op
        .inputs
        .iter()
        .map(|i| super::param(&i.name, &dispatch_input(&i.arg)))
        .collect();
    let dispatch_tensor = Level::Dispatch;
    let result = |end: &str| result_returns(&op.output, dispatch_tensor, end);
    super::deprecated(op, false, w);
    allow_complex_output(op, w);
    super::allow_many_arguments(op.inputs.len(), w);
    w.line("#[inline]");
    w.open(signature(
        format!("pub fn {try_name}"),
        dispatch_params.clone(),
        result(" {"),
    ));
    w.line(forward_call(
        &format!("self::{route_name}::<{RT}::Fallible>"),
        op,
    ));
    w.close("}");

    w.blank();
    let planning = planning(op);
    // One paragraph; the writer wraps it at the line width.
    let mut doc = format!(
        "The routing of [`{try_name}`](fn@{try_name}) and of the panicking `Dispatch` method \
         (`F` says how an error is reported)."
    );
    if planning.is_some() {
        doc.push_str(&format!(
            " Inlined into both, the common call writes its outputs straight into theirs; the \
             rest of the routing is `{PLANNED}`, out of line."
        ));
    }
    w.doc(&[doc]);
    allow_complex_output(op, w);
    super::allow_many_arguments(op.inputs.len(), w);
    // When every backend of the op is behind a cfg, a build with none of them has no arm that
    // calls `__run`: the `match` only diverges, and wrapping it in `F::ok` or `Ok` is
    // unreachable.
    let some_backend = any_cfg(op.backends.iter().map(|b| b.cfg.as_deref()));
    if let Some(cfg) = &some_backend {
        w.cfg_attr_allow(cfg, "unreachable_code");
    }
    w.line("#[inline]");
    w.open(signature(
        cat([
            format!("fn {route_name}").into(),
            super::code::type_list("<", vec![format!("F: {RT}::OnError").into()], ">"),
        ]),
        dispatch_params.clone(),
        cat([
            " -> ".into(),
            generic_type("F::Out", vec![output_doc(&op.output, dispatch_tensor)]),
            " {".into(),
        ]),
    ));
    op_info(ir, op, w);

    // The op's `__run` (see [`Runs`]), shared with the ops of the same signature, under its
    // local name (the arms read the same whichever op's body it is); and whether it is generic
    // over the backend.
    if let Some(cfg) = &some_backend {
        w.cfg_attr_allow(cfg, "unused_imports");
    }
    w.line(format!("use self::{} as {RUN};", runs.name(index)));
    let generic = run_generic(op);
    let unit = matches!(op.output, Output::Unit);

    // The kernel is named through its trait: an op may share its name with a method of Burn's
    // own backend traits (`layer_norm`, `gelu`, ...), which a plain `Target::op` would make
    // ambiguous.
    // `kernel`: the function the arm runs (`<lane as Trait>::op`, or a generated
    // `Autodiff<B, C>` implementation).
    let run_call = |lane: &str, kernel: &str| {
        call(
            if generic {
                format!("{RUN}::<{lane}>")
            } else {
                RUN.to_owned()
            },
            [format!("&{ROUTE}"), kernel.to_owned()]
                .into_iter()
                .chain(op.inputs.iter().map(|i| i.name.clone())),
        )
    };
    // In `__plan_and_run`, a unit `__run` returns the `Result` itself (see above); any other
    // `__run` returns its outputs, and the whole `match` is wrapped in `Ok` once.
    let (open_match, close_match) = if unit { ("", "}") } else { ("Ok(", "})") };

    if planning.is_some() {
        w.doc(&[
            "Every call the fast path below does not take (autodiff, primitives to convert,"
                .to_owned(),
            "contract violations): planned with the whole routing contract checked.".to_owned(),
        ]);
        w.line("#[inline(never)]");
    } else {
        w.doc(&[
            "No tensor and no device: the op's one backend, if this build compiles its arm."
                .to_owned(),
        ]);
    }
    super::allow_many_arguments(op.inputs.len(), w);
    // Planning reads the tensors and the device, but plain inputs only reach the kernels: in a
    // build where every backend's arm is compiled out, they are unused.
    if let Some(cfg) = &some_backend
        && op.inputs.iter().any(|i| matches!(i.arg, Arg::Plain(_)))
    {
        w.cfg_attr_allow(cfg, "unused_variables");
        // And clippy's `ptr_arg` sees a `&mut Vec<T>` (or `String`, `PathBuf`) parameter that
        // reaches nothing, so a slice would do.
        if op
            .inputs
            .iter()
            .any(|i| matches!(&i.arg, Arg::Plain(ty) if mutably_borrows_owned(ty)))
        {
            w.cfg_attr_allow(cfg, "clippy::ptr_arg");
        }
    }
    w.open(signature(
        format!("fn {PLANNED}"),
        dispatch_params,
        result(" {"),
    ));
    let plan = route_plan(op, planning.as_ref().map(|(_, plan)| plan.clone()));
    w.assign(format!("let {ROUTE} = "), cat([plan, "?".into()]), ";");
    w.open(format!("{open_match}match {ROUTE}.target() {{"));
    full_arms(ir, op, w, &run_call);
    w.close(close_match);
    w.close("}");

    shape_checks(op, "F::result(Err({}))", w);
    let Some((fast, _)) = planning else {
        w.line(call("F::result", [forward_call(PLANNED, op)]));
        w.close("}");
        return;
    };
    // The common call: plain primitives on one routed backend, autodiff disabled. Its route is
    // the concrete kernel's, so only the backend is matched.
    w.open_match(fast);
    // A unit `__run` returns the `Result` itself.
    w.open(format!(
        "Some({ROUTE}) => F::{}(match {ROUTE}.backend() {{",
        if unit { "result" } else { "ok" }
    ));
    for backend in &op.backends {
        concrete_arm(&group.name, op, backend, w, &run_call, "rt::BackendId::{}");
    }
    w.line(format!("_ => {ROUTE}.unrouted(),"));
    w.close("}),");
    w.arm("None", call("F::result", [forward_call(PLANNED, op)]));
    w.close("}");
    w.close("}");
}

/// The op's shape contracts, checked before either planner runs: the first one that fails is
/// the call's error.
/// `fail` is the returned expression, with `{}` for the error.
fn shape_checks(op: &Op, fail: &str, w: &mut Writer) {
    let value = |name: &str| {
        let input = op
            .inputs
            .iter()
            .find(|i| i.name == name)
            .expect("validation resolved the contract's input");
        match &input.arg {
            Arg::Tensor(t) => match (t.container, t.borrowed) {
                (Container::Option, true) => name.to_owned(),
                (Container::Option, false) => format!("{name}.as_ref()"),
                (_, true) => format!("Some({name})"),
                (_, false) => format!("Some(&{name})"),
            },
            Arg::Plain(_) | Arg::Device | Arg::Declared { .. } => {
                unreachable!("validation: contracts relate tensors")
            }
        }
    };
    let checks: Vec<Doc> = op
        .inputs
        .iter()
        .filter_map(|input| {
            let contract = input.shape.as_ref()?;
            let side = |name: &str| {
                args(
                    "(",
                    vec![string_literal(name).into(), value(name).into()],
                    ")",
                )
            };
            Some(call(
                format!("{RT}::ShapeCheck::new"),
                [
                    Doc::from(format!("rt::ShapeRule::{}", contract.rule.variant())),
                    string_literal(&contract.location).into(),
                    side(&input.name),
                    side(&contract.of),
                ],
            ))
        })
        .collect();
    if checks.is_empty() {
        return;
    }
    w.assign(
        format!("let {SHAPES} = "),
        call(
            format!("{RT}::check_shapes"),
            [Doc::from(format!("&{OP_INFO}")), args("[", checks, "]")],
        ),
        ";",
    );
    w.open(format!("if let Err({ERROR}) = {SHAPES} {{"));
    w.line(format!("return {};", fail.replace("{}", ERROR)));
    w.close("}");
}

/// The expression that plans the route: the op's planner (`planning`), or the fixed route of
/// an op that names its backend.
fn route_plan(op: &Op, planner: Option<Doc>) -> Doc {
    planner.unwrap_or_else(|| {
        let RouteBy::Fixed(backend) = op.route_by else {
            unreachable!("only a fixed route has no planner")
        };
        call(
            format!("{RT}::Route::fixed"),
            [
                format!("&{OP_INFO}"),
                format!("rt::BackendId::{}", backend.key()),
            ],
        )
    })
}

/// The fast planner's call and the full planner's, for an op routed by a tensor or device
/// input (`None` for an op with a fixed backend).
fn planning(op: &Op) -> Option<(Doc, Doc)> {
    let info = format!("&{OP_INFO}");
    let device = || {
        op.device_input()
            .map(|d| d.name.as_str())
            .unwrap_or_default()
    };
    // An op that declares its dtypes has a fast path of its own that reads them; the other
    // hands no input to a function out of line (`Route::fast`'s documentation says why).
    let dtyped = if op.dtypes.is_some() { "_dtyped" } else { "" };
    match op.route_by {
        RouteBy::Tensors => {
            let inputs = plan_inputs(op);
            Some((
                call(
                    format!("{RT}::Route::fast{dtyped}"),
                    [Doc::from(info.as_str()), inputs.clone()],
                ),
                call(
                    format!("{RT}::Route::plan"),
                    [Doc::from(info.as_str()), inputs],
                ),
            ))
        }
        RouteBy::TensorsAndDevice => {
            let inputs = plan_inputs(op);
            Some((
                call(
                    format!("{RT}::Route::fast{dtyped}_with_device"),
                    [Doc::from(info.as_str()), inputs.clone(), device().into()],
                ),
                call(
                    format!("{RT}::Route::plan_with_device"),
                    [
                        Doc::from(info.as_str()),
                        inputs,
                        string_literal(device()).into(),
                        device().into(),
                    ],
                ),
            ))
        }
        RouteBy::Device => Some((
            call(
                format!("{RT}::Route::fast_by_device"),
                [info.clone(), device().to_owned()],
            ),
            call(
                format!("{RT}::Route::plan_by_device"),
                [info, string_literal(device()), device().to_owned()],
            ),
        )),
        RouteBy::Fixed(_) => None,
    }
}

fn contains_tensor(out: &Output) -> bool {
    match out {
        Output::Tensor(_) | Output::Declared { .. } => true,
        Output::Tuple(items) => items.iter().any(contains_tensor),
        Output::Unit | Output::Plain(_) => false,
    }
}

/// The op's static facts (`static __OP: __rt::OpInfo`), the first item of its routing function.
fn op_info(ir: &Ir, op: &Op, w: &mut Writer) {
    let policy = format!("rt::Policy::{}", op.policy.variant());
    // Which routing arms below are compiled, for planning to refuse the others by itself.
    let backends = op
        .backends
        .iter()
        .map(|b| {
            let (compiled, text) = match &b.cfg {
                Some(meta) => (
                    cat(["cfg!".into(), parens([predicate_in_code(meta)])]),
                    string_literal(meta),
                ),
                None => ("true".into(), "\"\"".to_owned()),
            };
            args(
                "(",
                vec![
                    format!("rt::BackendId::{}", b.name.key()).into(),
                    compiled,
                    text.into(),
                ],
                ")",
            )
        })
        .collect();
    let autodiff = if op.policy == Policy::Differentiable {
        cat(["cfg!".into(), parens([predicate_in_code(&ir.autodiff_cfg)])])
    } else {
        "false".into()
    };
    let chained = op.dtypes.is_some();
    w.assign(
        format!("static {OP_INFO}: {RT}::OpInfo = "),
        call(
            format!("{RT}::OpInfo::new"),
            [
                string_literal(&op.name).into(),
                Doc::from(policy),
                string_literal(&op.location).into(),
                string_literal(&op.backends_location).into(),
                cat(["&".into(), args("[", backends, "]")]),
                autodiff,
                string_literal(&ir.autodiff_cfg).into(),
                "env!(\"CARGO_PKG_NAME\")".into(),
                if op.remote == crate::ir::RemoteImpl::Kernel {
                    format!("Some(&{})", names::remote_op(&op.name)).into()
                } else {
                    "None".into()
                },
            ],
        ),
        if chained { "" } else { ";" },
    );
    // The float dtypes its kernels take, and what runs for the others.
    if let Some(dtypes) = &op.dtypes {
        let (list, other) = super::dtype_args(dtypes, "rt");
        w.line(cat([
            ".with_dtypes".into(),
            args(
                "(",
                vec![list, other, string_literal(&dtypes.location).into()],
                ")",
            ),
            ";".into(),
        ]));
    }
}

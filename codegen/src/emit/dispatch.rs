//! `impl Trait for Dispatch`, and every op's `try_` function and the `route_` function behind
//! both.

use super::code::{Doc, Writer, cat, list, parens};
use super::{
    EmitConfig, allow_complex_output, any_cfg, autodiff_backend_cfg, contained, convert_output,
    forward_call, input_type, kind_fn, map_output_type, op_docs, output_type, params, returns,
    signature, string_literal, use_runtime,
};
use crate::ir::{Arg, Backend, Container, Ir, Op, Output, Policy, RouteBy, TensorArg};
use crate::names::{self, KERNEL, OP_INFO, OUT, PLANNED, ROUTE, RUN};

pub(super) fn emit(ir: &Ir, config: &EmitConfig, w: &mut Writer) {
    w.line(use_runtime(config));
    w.line(format!(
        "use {}::__private as {};",
        config.runtime,
        names::PRIVATE_RUNTIME
    ));
    let module = &config.trait_module;
    for (index, group) in ir.groups.iter().enumerate() {
        w.line(format!("use {module}::{};", group.name));
        if ir.needs_autodiff_trait(index) {
            // Used by the autodiff arms, which need one of the group's backends compiled too.
            let cfg = match any_cfg(group.backends.iter().map(|b| b.cfg.as_deref())) {
                Some(backends) => format!("all({}, {backends})", ir.autodiff_cfg),
                None => ir.autodiff_cfg.clone(),
            };
            w.cfg(Some(&cfg));
            w.line(format!("use {module}::{};", group.autodiff_name));
        }
    }
    aliases(ir, w);
    for (index, group) in ir.groups.iter().enumerate() {
        w.blank();
        w.open(format!("impl {} for rt::Dispatch {{", group.name));
        for op in ir.ops_of(index) {
            dispatch_method(op, w);
        }
        w.close("}");
    }
    for op in &ir.ops {
        w.blank();
        routing_fns(ir, op, w);
    }
}

/// Short names for the two `Autodiff<B, C>` implementations of each backend that serves a
/// differentiable op, so the routing arms read `run::<AutodiffFlex>(...)`.
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
        let name = backend.name.as_str();
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
    w.doc(&[format!(
        "Routes like [`{try_name}`], and panics with its error."
    )]);
    w.line("#[inline]");
    w.open(signature(
        format!("fn {}", op.name),
        params(op, "Self"),
        format!(
            "{} {{",
            returns(&op.output, &output_type(&op.output, "Self"))
        ),
    ));
    w.line(forward_call(
        &format!("self::{}::<__rt::Panic>", names::route_fn(&op.name)),
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
    }
}

/// Unwraps one input inside the generic `run::<B>` body. Planning has checked every input, so
/// unwrapping cannot fail (a failure would be a runtime bug, and panics): `run` has no error
/// paths, which keeps the per-op, per-backend code that the compiler generates small.
fn unwrap_input(name: &str, t: &TensorArg, w: &mut Writer) {
    let func = if t.borrowed {
        format!("{}_ref", kind_fn(t.kind))
    } else {
        kind_fn(t.kind).to_owned()
    };
    let label = string_literal(name);
    match t.container {
        Container::One => w.line(format!("let {name} = B::{func}({ROUTE}, {label}, {name});")),
        Container::Option => w.line(format!(
            "let {name} = {name}.map(|t| B::{func}({ROUTE}, {label}, t));"
        )),
        Container::Vec => {
            w.line(format!("let {name} = {name}"));
            w.indent();
            w.line(".into_iter()");
            w.line(format!(".map(|t| B::{func}({ROUTE}, {label}, t))"));
            w.line(".collect::<Vec<_>>();");
            w.dedent();
        }
    }
}

/// How the kernel receives an unwrapped input.
fn kernel_arg(name: &str, arg: &Arg) -> Doc {
    match arg {
        Arg::Tensor(t) if t.borrowed && t.container == Container::Option => {
            format!("{name}.as_deref()").into()
        }
        Arg::Tensor(t) if t.borrowed => format!("&{name}").into(),
        Arg::Device => format!("&{name}").into(),
        Arg::Tensor(_) | Arg::Plain(_) => name.into(),
    }
}

/// The planner's view of the tensor inputs: an iterator of `__rt::Input`s.
fn plan_inputs(op: &Op) -> Doc {
    // Each segment, and whether it is already an iterator (else an array or an `Option`).
    let mut segments: Vec<(Doc, bool)> = Vec::new();
    let mut singles: Vec<Doc> = Vec::new();
    let flush = |singles: &mut Vec<Doc>, segments: &mut Vec<(Doc, bool)>| {
        if !singles.is_empty() {
            segments.push((list("[", std::mem::take(singles), "]"), false));
        }
    };
    for (input, t) in op.tensor_inputs() {
        let id = &input.name;
        let label = string_literal(id);
        let ctor = kind_fn(t.kind);
        match t.container {
            Container::One if t.borrowed => {
                singles.push(format!("__rt::Input::{ctor}({label}, {id})").into());
            }
            Container::One => singles.push(format!("__rt::Input::{ctor}({label}, &{id})").into()),
            Container::Option => {
                flush(&mut singles, &mut segments);
                let source = if t.borrowed {
                    id.clone()
                } else {
                    format!("{id}.as_ref()")
                };
                segments.push((
                    format!("{source}.map(|t| __rt::Input::{ctor}({label}, t))").into(),
                    false,
                ));
            }
            Container::Vec => {
                flush(&mut singles, &mut segments);
                segments.push((
                    format!(
                        "{id}.iter().enumerate().map(|(i, t)| __rt::Input::{ctor}({label}, t).at(i))"
                    )
                    .into(),
                    true,
                ));
            }
        }
    }
    flush(&mut singles, &mut segments);
    let mut segments = segments.into_iter();
    let (first, first_is_iterator) = segments.next().expect("an op with tensor inputs");
    let mut parts = vec![first];
    let rest: Vec<Doc> = segments.map(|(segment, _)| segment).collect();
    if !rest.is_empty() {
        if !first_is_iterator {
            parts.push(".into_iter()".into());
        }
        for segment in rest {
            parts.push(cat([".chain".into(), list("(", vec![segment], ")")]));
        }
    }
    Doc::Cat(parts)
}

/// Wraps one kernel output for the `Dispatch` level.
fn wrap_output(t: &TensorArg, value: Doc) -> Doc {
    let f = format!("B::{}_out", kind_fn(t.kind));
    match t.container {
        Container::One => cat([f.into(), parens([Doc::from(ROUTE), value])]),
        Container::Option => cat([value, format!(".map(|t| {f}({ROUTE}, t))").into()]),
        Container::Vec => cat([
            value,
            format!(".into_iter().map(|t| {f}({ROUTE}, t)).collect()").into(),
        ]),
    }
}

/// An op's public `try_` function and the private `route_` function behind it and the
/// panicking `Dispatch` method, with its nested `__run` (the generic kernel call) and `__planned`
/// (the full planner's path).
fn routing_fns(ir: &Ir, op: &Op, w: &mut Writer) {
    let try_name = names::try_fn(&op.name);
    let route_name = names::route_fn(&op.name);
    let policy = match op.policy {
        Policy::Differentiable => "rt::Policy::Differentiable",
        Policy::Detach => "rt::Policy::Detach",
        Policy::Reject => "rt::Policy::Reject",
    };
    w.doc(&op_docs(
        op,
        &[
            String::new(),
            "# Errors".to_owned(),
            String::new(),
            "A [`rt::RouteError`] when the inputs break the routing contract: a tracked input to"
                .to_owned(),
            "a `reject` op, a backend the op is not routed to, inputs on different backends or"
                .to_owned(),
            "with different checkpointing, a malformed dispatch tensor (see `ERRORS.md`)."
                .to_owned(),
        ],
    ));
    let dispatch_params: Vec<Doc> = op
        .inputs
        .iter()
        .map(|i| format!("{}: {}", i.name, dispatch_input(&i.arg)).into())
        .collect();
    let dispatch_out = map_output_type(&op.output, &|t| contained(t, "rt::DispatchTensor"));
    let result = format!("Result<{dispatch_out}, rt::RouteError>");
    allow_complex_output(&op.output, w);
    w.line("#[inline]");
    w.open(signature(
        format!("pub fn {try_name}"),
        dispatch_params.clone(),
        format!(" -> {result} {{"),
    ));
    w.line(forward_call(
        &format!("self::{route_name}::<__rt::Fallible>"),
        op,
    ));
    w.close("}");

    w.blank();
    let planning = planning(op);
    let mut doc = vec![
        format!("The routing of [`{try_name}`] and of the panicking `Dispatch` method (`F` says"),
        "how an error is reported).".to_owned(),
    ];
    if planning.is_some() {
        doc[1].push_str(" Inlined into both, the common call writes its outputs straight into");
        doc.push(format!(
            "theirs; the rest of the routing is `{PLANNED}`, out of line."
        ));
    }
    w.doc(&doc);
    allow_complex_output(&op.output, w);
    // When every backend of the op is behind a cfg, a build with none of them has no arm that
    // calls `run`: the `match` only diverges, and wrapping it in `F::ok` or `Ok` is unreachable.
    let some_backend = any_cfg(op.backends.iter().map(|b| b.cfg.as_deref()));
    if let Some(cfg) = &some_backend {
        w.line(format!("#[cfg_attr(not({cfg}), allow(unreachable_code))]"));
    }
    w.line("#[inline]");
    w.open(signature(
        format!("fn {route_name}<F: __rt::OnError>"),
        dispatch_params.clone(),
        format!(" -> F::Out<{dispatch_out}> {{"),
    ));
    // Which routing arms below are compiled, for planning to refuse the others by itself.
    let backends = op
        .backends
        .iter()
        .map(|b| {
            let (compiled, text) = match &b.cfg {
                Some(meta) => (format!("cfg!({meta})"), string_literal(meta)),
                None => ("true".to_owned(), "\"\"".to_owned()),
            };
            parens([
                format!("rt::BackendId::{}", b.name.as_str()),
                compiled,
                text,
            ])
        })
        .collect();
    let autodiff = if op.policy == Policy::Differentiable {
        format!("cfg!({})", ir.autodiff_cfg)
    } else {
        "false".to_owned()
    };
    w.line(cat([
        format!("static {OP_INFO}: __rt::OpInfo = __rt::OpInfo::new").into(),
        parens([
            string_literal(&op.name).into(),
            Doc::from(policy),
            string_literal(&op.location).into(),
            string_literal(&op.backends_location).into(),
            cat(["&".into(), list("[", backends, "]")]),
            autodiff.into(),
            string_literal(&ir.autodiff_cfg).into(),
            "env!(\"CARGO_PKG_NAME\")".into(),
        ]),
        ";".into(),
    ]));

    // The generic body: unwrap every input for backend `B`, call, re-wrap.
    let uses_route = op.tensor_inputs().next().is_some()
        || op.device_input().is_some()
        || contains_tensor(&op.output);
    // And `run` is dead code there.
    if let Some(cfg) = &some_backend {
        w.line(format!("#[cfg_attr(not({cfg}), allow(dead_code))]"));
    }
    let kernel_params: Vec<Doc> = op
        .inputs
        .iter()
        .map(|i| input_type(&i.arg, "B").into())
        .collect();
    let kernel_type = cat([
        format!("{KERNEL}: impl FnOnce").into(),
        list("(", kernel_params, ")"),
        returns(&op.output, &output_type(&op.output, "B")).into(),
    ]);
    // (`__route` is unused when nothing is unwrapped; its `_` prefix says so.)
    let _ = uses_route;
    let mut run_params = vec![Doc::from(format!("{ROUTE}: &__rt::Route")), kernel_type];
    run_params.extend(dispatch_params.iter().cloned());
    // An op with no tensor and no device in its signature runs the same on every backend: its
    // `run` needs no backend parameter.
    let generic = uses_route;
    allow_complex_output(&op.output, w);
    // A unit-returning `run` would make each arm `Ok(run(...))`, a unit argument; it returns the
    // `Result` itself instead.
    let unit = matches!(op.output, Output::Unit);
    let run_returns = if unit {
        format!(" -> {result} {{")
    } else {
        format!(" -> {dispatch_out} {{")
    };
    w.open(signature(
        if generic {
            format!("fn {RUN}<B: __rt::Target>")
        } else {
            format!("fn {RUN}")
        },
        run_params,
        run_returns,
    ));
    for (input, t) in op.tensor_inputs() {
        unwrap_input(&input.name, t, w);
    }
    if let Some(device) = op.device_input() {
        let id = &device.name;
        w.line(format!(
            "let {id} = B::device({ROUTE}, {}, {id});",
            string_literal(id)
        ));
    }
    let call = cat([
        KERNEL.into(),
        list(
            "(",
            op.inputs
                .iter()
                .map(|i| kernel_arg(&i.name, &i.arg))
                .collect(),
            ")",
        ),
    ]);
    match &op.output {
        Output::Unit => {
            w.line(cat([call, ";".into()]));
            w.line("Ok(())");
        }
        Output::Plain(_) => w.line(call),
        Output::Tensor(t) => w.line(wrap_output(t, call)),
        Output::Tuple(_) => {
            let (pat, wrapped) = convert_output(&op.output, OUT, &wrap_output);
            w.line(cat(["let ".into(), pat, " = ".into(), call, ";".into()]));
            w.line(wrapped);
        }
    }
    w.close("}");

    // The kernel is named through its trait: an op may share its name with a method of Burn's
    // own backend traits (`layer_norm`, `gelu`, ...), which a plain `Lane::op` would make
    // ambiguous.
    let group = &ir.groups[op.group];
    let run_call = |lane: &str, trait_name: &str| {
        cat([
            if generic {
                format!("{RUN}::<{lane}>")
            } else {
                RUN.to_owned()
            }
            .into(),
            parens(
                [
                    format!("&{ROUTE}"),
                    format!("<{lane} as {trait_name}>::{}", op.name),
                ]
                .into_iter()
                .chain(op.inputs.iter().map(|i| i.name.clone())),
            ),
        ])
    };
    // In `planned`, a unit `run` returns the `Result` itself (see above); any other `run`
    // returns its outputs, and the whole `match` is wrapped in `Ok` once.
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
    w.open(signature(
        format!("fn {PLANNED}"),
        dispatch_params,
        format!(" -> {result} {{"),
    ));
    let plan = match &planning {
        Some((_, plan)) => plan.clone(),
        None => {
            let RouteBy::Fixed(backend) = op.route_by else {
                unreachable!("only a fixed route has no planner")
            };
            format!(
                "__rt::Route::fixed(&{OP_INFO}, rt::BackendId::{})",
                backend.as_str()
            )
            .into()
        }
    };
    w.line(cat([format!("let {ROUTE} = ").into(), plan, "?;".into()]));
    w.open(format!("{open_match}match {ROUTE}.target() {{"));
    full_arms(ir, op, w, &run_call);
    w.close(close_match);
    w.close("}");

    let Some((plain, _)) = planning else {
        w.line(cat([
            "F::result".into(),
            parens([forward_call(PLANNED, op)]),
        ]));
        w.close("}");
        return;
    };
    // The common call: plain primitives on one routed backend, autodiff disabled. Its route is
    // the concrete kernel's, so only the backend is matched.
    w.open(cat(["match ".into(), plain, " {".into()]));
    // A unit `run` returns the `Result` itself.
    w.open(format!(
        "Some({ROUTE}) => F::{}(match {ROUTE}.backend() {{",
        if unit { "result" } else { "ok" }
    ));
    for backend in &op.backends {
        concrete_arm(&group.name, backend, w, &run_call, "rt::BackendId::{}");
    }
    w.line(format!("_ => {ROUTE}.unrouted(),"));
    w.close("}),");
    w.line(cat([
        "None => F::result".into(),
        parens([forward_call(PLANNED, op)]),
        ",".into(),
    ]));
    w.close("}");
    w.close("}");
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
    match op.route_by {
        RouteBy::Tensors => {
            let inputs = plan_inputs(op);
            Some((
                cat([
                    "__rt::Route::fast".into(),
                    parens([Doc::from(info.as_str()), inputs.clone()]),
                ]),
                cat([
                    "__rt::Route::plan".into(),
                    parens([Doc::from(info.as_str()), inputs]),
                ]),
            ))
        }
        RouteBy::TensorsAndDevice => {
            let inputs = plan_inputs(op);
            Some((
                cat([
                    "__rt::Route::fast_with_device".into(),
                    parens([Doc::from(info.as_str()), inputs.clone(), device().into()]),
                ]),
                cat([
                    "__rt::Route::plan_with_device".into(),
                    parens([
                        Doc::from(info.as_str()),
                        inputs,
                        string_literal(device()).into(),
                        device().into(),
                    ]),
                ]),
            ))
        }
        RouteBy::Device => Some((
            format!("__rt::Route::fast_by_device({info}, {})", device()).into(),
            format!(
                "__rt::Route::plan_by_device({info}, {}, {})",
                string_literal(device()),
                device()
            )
            .into(),
        )),
        RouteBy::Fixed(_) => None,
    }
}

/// Every routing arm of an op, one per compiled backend and implementation, and the fallback.
fn full_arms(ir: &Ir, op: &Op, w: &mut Writer, run_call: &dyn Fn(&str, &str) -> Doc) {
    let group = &ir.groups[op.group];
    for backend in &op.backends {
        let name = backend.name.as_str();
        concrete_arm(
            &group.name,
            backend,
            w,
            run_call,
            "(rt::BackendId::{}, __rt::Mode::Concrete)",
        );
        if op.policy == Policy::Differentiable {
            let cfg = autodiff_backend_cfg(ir, backend);
            // Composite ops have no autodiff trait: their `Autodiff<B, C>` impl is the main
            // trait's default body.
            let autodiff_trait = if group.composite {
                &group.name
            } else {
                &group.autodiff_name
            };
            for (strategy, lane) in [
                ("Disabled", format!("Autodiff{name}")),
                ("Balanced", format!("Balanced{name}")),
            ] {
                w.cfg(Some(&cfg));
                arm(
                    w,
                    format!(
                        "(rt::BackendId::{name}, __rt::Mode::Autodiff(rt::Checkpointing::{strategy}))"
                    ),
                    run_call(&lane, autodiff_trait),
                );
            }
        }
    }
    // Planning refuses every other backend and mode with the error that names the routing
    // input (`__OP` lists the compiled arms).
    w.line(format!("_ => {ROUTE}.unrouted(),"));
}

/// The arm that calls `backend`'s concrete kernel, under the backend's cfg; `pattern` names the
/// backend at its `{}`.
fn concrete_arm(
    group: &str,
    backend: &Backend,
    w: &mut Writer,
    run_call: &dyn Fn(&str, &str) -> Doc,
    pattern: &str,
) {
    let name = backend.name.as_str();
    w.cfg(backend.cfg.as_deref());
    arm(
        w,
        pattern.replace("{}", name),
        run_call(&format!("rt::{name}"), group),
    );
}

/// `pattern => expr,` on one line, or with the expression in a block when that is too long.
fn arm(w: &mut Writer, pattern: String, expr: Doc) {
    let one_line = cat([
        pattern.as_str().into(),
        " => ".into(),
        expr.clone(),
        ",".into(),
    ]);
    if w.fits(&one_line) {
        w.line(one_line);
    } else {
        w.open(format!("{pattern} => {{"));
        w.line(expr);
        w.close("}");
    }
}

fn contains_tensor(out: &Output) -> bool {
    match out {
        Output::Tensor(_) => true,
        Output::Tuple(items) => items.iter().any(contains_tensor),
        Output::Unit | Output::Plain(_) => false,
    }
}

//! The routing of async ops: each routed function resolves its backend at the call and returns
//! a future that owns what it needs (the inputs unwrapped, the kernel's future, the outputs
//! wrapped when it completes).

use super::*;

/// An async op's public `try_` function, behind the panicking `Dispatch` method too. Routing
/// happens at the call: it checks the shape contracts, plans, and unwraps every input for the
/// planned implementation (an owned value each: a borrowed input is cloned, which shares its
/// storage), then returns the kernel's future (`rt::Planned::routed`, a boxed `rt::Pending`),
/// which owns what it needs. So a routing error never waits for a poll, and the future borrows
/// nothing from the caller. There is no fast path: planning costs nothing next to the work an
/// async op waits for.
pub(super) fn async_routing_fns(ir: &Ir, op: &Op, w: &mut Writer) {
    let try_name = names::try_fn(&op.name);
    let group = &ir.groups[op.group];
    let out = output_doc(&op.output, Level::Dispatch);
    let dispatch_params: Vec<Doc> = op
        .inputs
        .iter()
        .map(|i| super::super::param(&i.name, &dispatch_input(&i.arg)))
        .collect();
    w.doc(&[
        format!(
            "[`{}::{}`] for `Dispatch` primitives, returning the routing error instead of",
            group.name, op.name
        ),
        "panicking.".to_owned(),
        String::new(),
        "The call is routed here, before the future exists: planning, shape contracts and \
         unwrapping the inputs; the future runs the kernel and borrows nothing from the caller."
            .to_owned(),
        String::new(),
        "# Errors".to_owned(),
        String::new(),
        "The future resolves to a [`rt::RouteError`] when the call breaks the routing contract \
         (see [`rt::errors`]); [`rt::Planned::error`] has it at once."
            .to_owned(),
    ]);
    super::super::deprecated(op, false, w);
    allow_complex_output(op, w);
    super::super::allow_many_arguments(op.inputs.len(), w);
    // When every backend of the op is behind a cfg, a build with none of them has no arm that
    // calls `__run`: the `match` only diverges, and plain inputs only reach the kernels.
    let some_backend = any_cfg(op.backends.iter().map(|b| b.cfg.as_deref()));
    if let Some(cfg) = &some_backend {
        w.cfg_attr_allow(cfg, "unreachable_code");
        if op.inputs.iter().any(|i| matches!(i.arg, Arg::Plain(_))) {
            w.cfg_attr_allow(cfg, "unused_variables");
        }
    }
    w.open(signature(
        format!("pub fn {try_name}"),
        dispatch_params.clone(),
        cat([
            " -> ".into(),
            generic_type("rt::Planned", vec![out.clone()]),
            " {".into(),
        ]),
    ));
    op_info(ir, op, w);

    // The generic bodies: unwrap every input for backend `B` (owned), then a future that calls
    // the kernel and re-wraps its outputs. The concrete kernel is the group trait's; a
    // differentiable op's `Autodiff<B, C>` kernel is its autodiff trait's (async ops have no
    // generated backward pass and are not composite: validation).
    let mut bodies = vec![(RUN, group.name.as_str())];
    if op.policy == Policy::Differentiable {
        bodies.push((names::RUN_AUTODIFF, group.autodiff_name.as_str()));
    }
    for (run, kernel_trait) in bodies {
        if run == names::RUN_AUTODIFF {
            // Compiled with the autodiff trait's import (see `emit`).
            let cfg = match any_cfg(group.backends.iter().map(|b| b.cfg.as_deref())) {
                Some(backends) => format!("all({}, {backends})", ir.autodiff_cfg),
                None => ir.autodiff_cfg.clone(),
            };
            w.cfg(Some(&cfg));
        }
        if let Some(cfg) = &some_backend {
            w.cfg_attr_allow(cfg, "dead_code");
        }
        allow_complex_output(op, w);
        super::super::allow_many_arguments(op.inputs.len() + 1, w);
        let mut run_params = vec![Doc::from(format!("{ROUTE}: {RT}::Route"))];
        run_params.extend(dispatch_params.iter().cloned());
        w.open(signature(
            cat([
                format!("fn {run}").into(),
                super::super::code::type_list(
                    "<",
                    vec![format!("B: {RT}::Target + {kernel_trait}").into()],
                    ">",
                ),
            ]),
            run_params,
            cat([
                " -> ".into(),
                generic_type("rt::Pending", vec![out.clone()]),
                " {".into(),
            ]),
        ));
        for input in &op.inputs {
            match &input.arg {
                Arg::Tensor(t) => async_unwrap_input(&input.name, t, w),
                Arg::Declared { borrowed, .. } => {
                    unwrap_declared(op, input, *borrowed, &format!("&{ROUTE}"), w);
                }
                Arg::Plain(_) | Arg::Device => {}
            }
        }
        if let Some(device) = op.device_input() {
            let id = &device.name;
            w.assign(
                format!("let {id} = "),
                cat([
                    call(
                        "B::device",
                        [format!("&{ROUTE}"), string_literal(id), id.clone()],
                    ),
                    ".into_owned()".into(),
                ]),
                ";",
            );
        }
        let kernel_call = call(
            format!("<B as {kernel_trait}>::{}", op.name),
            op.inputs
                .iter()
                .map(|i| async_kernel_arg(&i.name, &i.arg))
                .collect::<Vec<_>>(),
        );
        let borrows = op.inputs.iter().any(|i| match &i.arg {
            Arg::Tensor(t) => t.borrowed,
            Arg::Device => true,
            Arg::Declared { borrowed, .. } => *borrowed,
            Arg::Plain(_) => false,
        });
        match &op.output {
            // Nothing borrowed and nothing to wrap: the kernel's future is the future.
            Output::Unit | Output::Plain(_) if !borrows => {
                w.line(call("Box::pin", [kernel_call.clone()]));
            }
            Output::Unit | Output::Plain(_) => {
                // rustfmt keeps a block of one expression on one line when it fits there.
                let one_line = cat([
                    "Box::pin(async move { ".into(),
                    kernel_call.clone(),
                    ".await })".into(),
                ]);
                if w.fits(&one_line) && one_line.flat_ok() {
                    w.line(one_line);
                } else {
                    w.open("Box::pin(async move {");
                    super::super::bind_then(w, KERNEL, kernel_call.clone(), "", ".await", "");
                    w.close("})");
                }
            }
            Output::Tensor(_) | Output::Tuple(_) | Output::Declared { .. } => {
                w.open("Box::pin(async move {");
                // (Awaited in a statement of its own when `let __out = kernel(..).await;` does
                // not fit on one line.)
                let flat = cat([
                    format!("let {OUT} = ").into(),
                    kernel_call.clone(),
                    ".await;".into(),
                ]);
                if w.fits(&flat) && flat.flat_ok() {
                    w.line(flat);
                } else {
                    super::super::bind_then(
                        w,
                        KERNEL,
                        kernel_call.clone(),
                        &format!("let {OUT} = "),
                        ".await",
                        ";",
                    );
                }
                w.line(output_expr(
                    &op.output,
                    OUT,
                    &async_wrap_output,
                    &|_, value| call(format!("{value}.{}", names::WRAP), [format!("&{ROUTE}")]),
                ));
                w.close("})");
            }
        }
        w.close("}");
    }

    shape_checks(op, "rt::Planned::failed({})", w);
    let plan = route_plan(op, planning(op).map(|(_, plan)| plan));
    w.assign(format!("let {ROUTE} = "), plan, ";");
    w.open(format!("let {ROUTE} = match {ROUTE} {{"));
    w.line(format!("Ok({ROUTE}) => {ROUTE},"));
    w.line(format!(
        "Err({ERROR}) => return rt::Planned::failed({ERROR}),"
    ));
    w.close("};");
    let run_call = |run: &str, lane: &str| {
        call(
            format!("{run}::<{lane}>"),
            std::iter::once(ROUTE.to_owned()).chain(op.inputs.iter().map(|i| i.name.clone())),
        )
    };
    w.open(format!("rt::Planned::routed(match {ROUTE}.target() {{"));
    for backend in &op.backends {
        let name = backend.name.key();
        w.cfg(backend.cfg.as_deref());
        w.arm(
            &format!("(rt::BackendId::{name}, {RT}::Mode::Concrete)"),
            run_call(RUN, &format!("rt::{name}")),
        );
        if op.policy == Policy::Differentiable {
            let cfg = autodiff_backend_cfg(ir, backend);
            for (strategy, lane) in [
                ("Disabled", names::autodiff_alias(backend.name)),
                ("Balanced", names::balanced_alias(backend.name)),
            ] {
                w.cfg(Some(&cfg));
                w.arm(
                    &format!(
                        "(rt::BackendId::{name}, {RT}::Mode::Autodiff(rt::Checkpointing::{strategy}))"
                    ),
                    run_call(names::RUN_AUTODIFF, &lane),
                );
            }
        }
    }
    w.line(format!("_ => {ROUTE}.unrouted(),"));
    w.close("})");
    w.close("}");
}

/// Unwraps one input of an async op inside its generic body, as an owned value the future
/// keeps.
pub(super) fn async_unwrap_input(name: &str, t: &TensorArg, w: &mut Writer) {
    let (suffix, owned) = match (t.container, t.borrowed) {
        (Container::One, false) => ("", ""),
        (Container::One, true) => ("_ref", ".into_owned()"),
        (Container::Option, false) => ("_opt", ""),
        (Container::Option, true) => ("_ref_opt", ""),
        (Container::Vec, _) => ("_vec", ""),
    };
    let owned = if t.borrowed && t.container == Container::Option {
        format!(".map({RT}::Held::into_owned)")
    } else {
        owned.to_owned()
    };
    let unwrap = call(
        format!("B::{}{suffix}", kind_fn(t.kind)),
        [format!("&{ROUTE}"), string_literal(name), name.to_owned()],
    );
    w.assign(format!("let {name} = "), cat([unwrap, owned.into()]), ";");
}

/// How an async op's kernel receives an unwrapped (owned) input.
pub(super) fn async_kernel_arg(name: &str, arg: &Arg) -> Doc {
    match arg {
        Arg::Tensor(t) if t.borrowed && t.container == Container::Option => {
            format!("{name}.as_ref()").into()
        }
        Arg::Tensor(t) if t.borrowed => format!("&{name}").into(),
        Arg::Device => format!("&{name}").into(),
        Arg::Declared { borrowed: true, .. } => format!("&{name}").into(),
        Arg::Tensor(_) | Arg::Plain(_) | Arg::Declared { .. } => name.into(),
    }
}

/// Wraps one output of an async op's kernel (the expression `value`) for the `Dispatch` level,
/// with the route the future owns.
pub(super) fn async_wrap_output(t: &TensorArg, value: Doc) -> Doc {
    let suffix = match t.container {
        Container::One => "",
        Container::Option => "_opt",
        Container::Vec => "_vec",
    };
    call(
        format!("B::{}_out{suffix}", kind_fn(t.kind)),
        [Doc::from(format!("&{ROUTE}")), value],
    )
}

/// Whether a plain type is `&mut` of an owned container clippy's `ptr_arg` knows (`Vec`,
/// `String`, `PathBuf`).
pub(super) fn mutably_borrows_owned(ty: &str) -> bool {
    [
        "&mut Vec<",
        "&mut String",
        "&mut PathBuf",
        "&mut std::path::PathBuf",
    ]
    .iter()
    .any(|p| ty.starts_with(p))
}

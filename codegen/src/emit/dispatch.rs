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

pub(super) fn emit(ir: &Ir, config: &EmitConfig, w: &mut Writer) {
    let module = &config.trait_module;
    let mut imports = vec![
        Use::runtime(config),
        Use::new(format!("{}::__private as {RT}", config.runtime)),
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

/// Every op's `__run`: the generic body that unwraps the inputs for backend `B`, calls the
/// kernel (a function pointer) and wraps the outputs.
///
/// Ops whose bodies are the same text (the same inputs, names included, and the same output)
/// share one function, named for the first of them: a crate of many ops with one signature
/// compiles one body per backend instead of one per op and backend, which is most of what
/// the routing costs to compile. Async ops have bodies of their own (`async_routing_fns`).
struct Runs {
    /// Per op (in `Ir::ops` order): the index of its body in `bodies`, or `None` (async).
    of_op: Vec<Option<usize>>,
    /// The shared bodies, in the order of their first op.
    bodies: Vec<RunBody>,
}

struct RunBody {
    /// `__run_<first op>`.
    name: String,
    /// The first op that uses it: the function is written just before that op's `try_`.
    first: usize,
    /// The function's text, doc and attributes included.
    text: String,
}

impl Runs {
    fn new(ir: &Ir) -> Self {
        let mut of_op = Vec::with_capacity(ir.ops.len());
        let mut bodies: Vec<RunBody> = Vec::new();
        // The ops of each body, and the cfg under which some backend of each is compiled
        // (`None`: one always is).
        let mut users: Vec<Vec<(usize, Option<String>)>> = Vec::new();
        let mut by_text: std::collections::HashMap<String, usize> = Default::default();
        for (index, op) in ir.ops.iter().enumerate() {
            if op.asynchronous {
                of_op.push(None);
                continue;
            }
            // The body without its name and attributes is the key.
            let mut key = Writer::default();
            run_fn(op, names::RUN, &mut key);
            let key = key.finish();
            let body = *by_text.entry(key).or_insert_with(|| {
                bodies.push(RunBody {
                    name: names::run_fn(&op.name),
                    first: index,
                    text: String::new(),
                });
                users.push(Vec::new());
                bodies.len() - 1
            });
            let some_backend = any_cfg(op.backends.iter().map(|b| b.cfg.as_deref()));
            users[body].push((index, some_backend));
            of_op.push(Some(body));
        }
        for (body, users) in bodies.iter_mut().zip(&users) {
            let first = &ir.ops[body.first];
            let mut w = Writer::default();
            let others: Vec<String> = users[1..]
                .iter()
                .map(|(index, _)| format!("`{}`", ir.ops[*index].name))
                .collect();
            let mut doc = format!(
                "The kernel call of [`{try_name}`](fn@{try_name}): unwraps the inputs{}, calls \
                 the kernel, wraps {}.",
                if run_generic(first) {
                    " for backend `B`"
                } else {
                    ""
                },
                match first.output {
                    Output::Unit | Output::Plain(_) => "nothing (its output is plain)",
                    _ => "the outputs",
                },
                try_name = names::try_fn(&first.name),
            );
            if !others.is_empty() {
                doc.push_str(&format!(
                    " Shared by the {} with the same inputs and output: {}.",
                    if others.len() == 1 { "op" } else { "ops" },
                    name_list(&others)
                ));
            }
            w.doc(&[doc]);
            // A build that compiles no backend of any op it serves calls it nowhere.
            if let Some(cfg) = any_cfg(users.iter().map(|(_, cfg)| cfg.as_deref())) {
                w.cfg_attr_allow(&cfg, "dead_code");
            }
            run_fn(first, &body.name, &mut w);
            body.text = w.finish();
        }
        Runs { of_op, bodies }
    }

    /// The name of op `index`'s `__run` (`Ir::ops` order).
    fn name(&self, index: usize) -> &str {
        let body = self.of_op[index].expect("a synchronous op has a `__run`");
        &self.bodies[body].name
    }

    /// The text of the shared `__run` to write before op `index`'s functions, when it is the
    /// first op to use it.
    fn defined_before(&self, index: usize) -> Option<&str> {
        let body = &self.bodies[self.of_op[index]?];
        (body.first == index).then_some(body.text.as_str())
    }
}

/// `` `a`, `b`, `c` and 7 more ``: at most five names of a list.
fn name_list(names: &[String]) -> String {
    const SHOWN: usize = 5;
    match names {
        [one] => one.clone(),
        _ if names.len() <= SHOWN => format!(
            "{} and {}",
            names[..names.len() - 1].join(", "),
            names[names.len() - 1]
        ),
        _ => format!(
            "{} and {} more",
            names[..SHOWN].join(", "),
            names.len() - SHOWN
        ),
    }
}

/// Whether an op's `__run` is generic over the backend: an op with no tensor and no device in
/// its signature runs the same on every backend.
fn run_generic(op: &Op) -> bool {
    !op.routing_tensors().is_empty() || op.device_input().is_some() || contains_tensor(&op.output)
}

/// The `__run` function named `name` for `op`'s signature, at module level.
fn run_fn(op: &Op, name: &str, w: &mut Writer) {
    let dispatch_params: Vec<Doc> = op
        .inputs
        .iter()
        .map(|i| super::param(&i.name, &dispatch_input(&i.arg)))
        .collect();
    let kernel_params: Vec<Doc> = op
        .inputs
        .iter()
        .map(|i| super::type_doc(&input_type(&i.arg, "B")))
        .collect();
    // A function pointer, not `impl FnOnce`: one instance per backend, whichever op's kernel
    // it calls. rustfmt keeps the type on one line when it fits there (a parameter at depth 1,
    // and its comma); else the parameters go one per line, and the return type follows `) -> `,
    // broken in turn if it must be.
    let kernel_ret = match &op.output {
        Output::Unit => Doc::from(""),
        out => cat([" -> ".into(), output_doc(out, Level::Primitive("B"))]),
    };
    let flat = cat([
        format!("{KERNEL}: fn").into(),
        super::code::type_list("(", kernel_params.clone(), ")"),
        kernel_ret.clone(),
    ]);
    // (`<`: the comma takes the last column.)
    let kernel_type = if flat.flat_ok() && INDENT.len() + flat.width() < WIDTH {
        flat
    } else {
        cat([
            format!("{KERNEL}: fn").into(),
            super::code::vertical("(", kernel_params, ")"),
            kernel_ret,
        ])
    };
    let mut run_params = vec![Doc::from(format!("{ROUTE}: &{RT}::Route")), kernel_type];
    run_params.extend(dispatch_params);
    // The kernel's pointer type spells the op's whole signature, which clippy counts as one
    // type; an alias per op would only move it.
    w.line("#[allow(clippy::type_complexity)]");
    super::allow_large_error(op, w);
    super::allow_many_arguments(op.inputs.len() + 2, w);
    // A unit-returning `__run` would make each arm `Ok(__run(...))`, a unit argument; it returns
    // the `Result` itself instead.
    let run_returns = if matches!(op.output, Output::Unit) {
        result_returns(&op.output, Level::Dispatch, " {")
    } else {
        returns_doc(&op.output, Level::Dispatch, " {")
    };
    w.open(signature(
        if run_generic(op) {
            cat([
                format!("fn {name}").into(),
                super::code::type_list("<", vec![format!("B: {RT}::Target").into()], ">"),
            ])
        } else {
            format!("fn {name}").into()
        },
        run_params,
        run_returns,
    ));
    for input in &op.inputs {
        match &input.arg {
            Arg::Tensor(t) => unwrap_input(&input.name, t, w),
            Arg::Declared { borrowed, .. } => unwrap_declared(op, input, *borrowed, ROUTE, w),
            Arg::Plain(_) | Arg::Device => {}
        }
    }
    if let Some(device) = op.device_input() {
        let id = &device.name;
        w.assign(
            format!("let {id} = "),
            call(
                "B::device",
                [ROUTE.to_owned(), string_literal(id), id.clone()],
            ),
            ";",
        );
    }
    let kernel_call = call(
        KERNEL,
        op.inputs
            .iter()
            .map(|i| kernel_arg(&i.name, &i.arg))
            .collect::<Vec<_>>(),
    );
    match &op.output {
        Output::Unit => {
            w.line(cat([kernel_call, ";".into()]));
            w.line("Ok(())");
        }
        Output::Plain(_) => w.line(kernel_call),
        Output::Tensor(_) | Output::Tuple(_) | Output::Declared { .. } => {
            w.assign(format!("let {OUT} = "), kernel_call, ";");
            w.line(output_expr(&op.output, OUT, &wrap_output, &|_, value| {
                call(format!("{value}.{}", names::WRAP), [ROUTE])
            }));
        }
    }
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
    match op.route_by {
        RouteBy::Tensors => {
            let inputs = plan_inputs(op);
            Some((
                call(
                    format!("{RT}::Route::fast"),
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
                    format!("{RT}::Route::fast_with_device"),
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

/// Every routing arm of an op, one per compiled backend and implementation, and the fallback.
fn full_arms(ir: &Ir, op: &Op, w: &mut Writer, run_call: &dyn Fn(&str, &str) -> Doc) {
    let group = &ir.groups[op.group];
    for backend in &op.backends {
        concrete_arm(
            &group.name,
            op,
            backend,
            w,
            run_call,
            &format!("(rt::BackendId::{{}}, {RT}::Mode::Concrete)"),
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
            for (strategy, lane, checkpointing) in [
                (
                    "Disabled",
                    names::autodiff_alias(backend.name),
                    "NoCheckpointing",
                ),
                (
                    "Balanced",
                    names::balanced_alias(backend.name),
                    "BalancedCheckpointing",
                ),
            ] {
                // A generated `Autodiff<B, C>` kernel (from `backward` or the composition);
                // else the trait's.
                let kernel = if op.generated_autodiff() {
                    format!(
                        "{}::{}::<rt::{}, rt::{checkpointing}>",
                        names::AUTODIFF_MODULE,
                        op.name,
                        backend.name.key()
                    )
                } else {
                    format!("<{lane} as {autodiff_trait}>::{}", op.name)
                };
                w.cfg(Some(&cfg));
                let pattern = format!(
                    "(rt::BackendId::{}, {RT}::Mode::Autodiff(rt::Checkpointing::{strategy}))",
                    backend.name.key()
                );
                if op.generated_autodiff() {
                    bound_arm(
                        w,
                        &pattern,
                        &kernel,
                        (
                            &format!("{}::{}", names::AUTODIFF_MODULE, op.name),
                            names::DERIVED,
                            &format!("<rt::{}, rt::{checkpointing}>", backend.name.key()),
                        ),
                        &|kernel| run_call(&lane, kernel),
                    );
                } else {
                    // (A trait method's path has no `use` form to shorten it by.)
                    w.arm(&pattern, run_call(&lane, &kernel));
                }
            }
        }
        composition_arms(ir, op, backend, w, run_call);
    }
    // Planning refuses every other backend and mode with the error that names the routing
    // input (`__OP` lists the compiled arms).
    w.line(format!("_ => {ROUTE}.unrouted(),"));
}

/// `pattern => run(kernel)`, where `kernel` is `path` with `generics` (`(path, alias,
/// generics)`); a kernel too long for its line in the call is brought in by `use path as
/// alias` first, in a block (rustfmt would break the path's generics).
fn bound_arm(
    w: &mut Writer,
    pattern: &str,
    kernel: &str,
    (path, alias, generics): (&str, &str, &str),
    run: &dyn Fn(&str) -> Doc,
) {
    if w.fits(&Doc::Text(format!("        {kernel},"))) {
        w.arm(pattern, run(kernel));
    } else {
        w.open(format!("{pattern} => {{"));
        w.line(format!("use {path} as {alias};"));
        w.line(run(&format!("{alias}::{generics}")));
        w.close("}");
    }
}

/// The arms that run the op's composition on `backend` for a dtype its kernels do not take
/// (`other_dtypes = "composition"`): on the concrete backend, and for a `differentiable` op on
/// `Autodiff<B, C>` too, where Burn's autodiff differentiates the composition.
fn composition_arms(
    ir: &Ir,
    op: &Op,
    backend: &Backend,
    w: &mut Writer,
    run_call: &dyn Fn(&str, &str) -> Doc,
) {
    let (Some(dtypes), Some(composition)) = (&op.dtypes, &op.composition) else {
        return;
    };
    if !dtypes.composition {
        return;
    }
    let name = backend.name.key();
    let mut lanes = vec![(
        backend.cfg.clone(),
        format!("(rt::BackendId::{name}, {RT}::Mode::Fallback)"),
        format!("rt::{name}"),
    )];
    if op.policy == Policy::Differentiable {
        let cfg = autodiff_backend_cfg(ir, backend);
        for (strategy, lane) in [
            ("Disabled", names::autodiff_alias(backend.name)),
            ("Balanced", names::balanced_alias(backend.name)),
        ] {
            lanes.push((
                Some(cfg.clone()),
                format!(
                    "(rt::BackendId::{name}, {RT}::Mode::AutodiffFallback(rt::Checkpointing::{strategy}))"
                ),
                lane,
            ));
        }
    }
    for (cfg, pattern, lane) in lanes {
        w.cfg(cfg.as_deref());
        bound_arm(
            w,
            &pattern,
            &format!("{composition}::<{lane}>"),
            (composition, names::COMPOSITION, &format!("<{lane}>")),
            &|kernel| run_call(&lane, kernel),
        );
    }
}

/// The arm that calls `backend`'s concrete kernel, under the backend's cfg; `pattern` names the
/// backend at its `{}`.
fn concrete_arm(
    group: &str,
    op: &Op,
    backend: &Backend,
    w: &mut Writer,
    run_call: &dyn Fn(&str, &str) -> Doc,
    pattern: &str,
) {
    let name = backend.name.key();
    w.cfg(backend.cfg.as_deref());
    w.arm(
        &pattern.replace("{}", name),
        run_call(
            &format!("rt::{name}"),
            &format!("<rt::{name} as {group}>::{}", op.name),
        ),
    );
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

/// An async op's public `try_` function, behind the panicking `Dispatch` method too. Routing
/// happens at the call: it checks the shape contracts, plans, and unwraps every input for the
/// planned implementation (an owned value each: a borrowed input is cloned, which shares its
/// storage), then returns the kernel's future (`rt::Planned::routed`, a boxed `rt::Pending`),
/// which owns what it needs. So a routing error never waits for a poll, and the future borrows
/// nothing from the caller. There is no fast path: planning costs nothing next to the work an
/// async op waits for.
fn async_routing_fns(ir: &Ir, op: &Op, w: &mut Writer) {
    let try_name = names::try_fn(&op.name);
    let group = &ir.groups[op.group];
    let out = output_doc(&op.output, Level::Dispatch);
    let dispatch_params: Vec<Doc> = op
        .inputs
        .iter()
        .map(|i| super::param(&i.name, &dispatch_input(&i.arg)))
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
    super::deprecated(op, false, w);
    allow_complex_output(op, w);
    super::allow_many_arguments(op.inputs.len(), w);
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
        super::allow_many_arguments(op.inputs.len() + 1, w);
        let mut run_params = vec![Doc::from(format!("{ROUTE}: {RT}::Route"))];
        run_params.extend(dispatch_params.iter().cloned());
        w.open(signature(
            cat([
                format!("fn {run}").into(),
                super::code::type_list(
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
                    super::bind_then(w, KERNEL, kernel_call.clone(), "", ".await", "");
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
                    super::bind_then(
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
fn async_unwrap_input(name: &str, t: &TensorArg, w: &mut Writer) {
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
fn async_kernel_arg(name: &str, arg: &Arg) -> Doc {
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
fn async_wrap_output(t: &TensorArg, value: Doc) -> Doc {
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
fn mutably_borrows_owned(ty: &str) -> bool {
    [
        "&mut Vec<",
        "&mut String",
        "&mut PathBuf",
        "&mut std::path::PathBuf",
    ]
    .iter()
    .any(|p| ty.starts_with(p))
}

//! The `run_` functions: one per signature shape shared by the ops that have it, each taking
//! the kernel as a function pointer, so that ops of one shape share one routing body.

use super::*;

/// Every op's `__run`: the generic body that unwraps the inputs for backend `B`, calls the
/// kernel (a function pointer) and wraps the outputs.
///
/// Ops whose bodies are the same text (the same inputs, names included, and the same output)
/// share one function, named for the first of them: a crate of many ops with one signature
/// compiles one body per backend instead of one per op and backend, which is most of what
/// the routing costs to compile. Async ops have bodies of their own (`async_routing_fns`).
pub(super) struct Runs {
    /// Per op (in `Ir::ops` order): the index of its body in `bodies`, or `None` (async).
    pub(super) of_op: Vec<Option<usize>>,
    /// The shared bodies, in the order of their first op.
    pub(super) bodies: Vec<RunBody>,
}

pub(super) struct RunBody {
    /// `__run_<first op>`.
    pub(super) name: String,
    /// The first op that uses it: the function is written just before that op's `try_`.
    pub(super) first: usize,
    /// The function's text, doc and attributes included.
    pub(super) text: String,
}

impl Runs {
    pub(super) fn new(ir: &Ir) -> Self {
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
    pub(super) fn name(&self, index: usize) -> &str {
        let body = self.of_op[index].expect("a synchronous op has a `__run`");
        &self.bodies[body].name
    }

    /// The text of the shared `__run` to write before op `index`'s functions, when it is the
    /// first op to use it.
    pub(super) fn defined_before(&self, index: usize) -> Option<&str> {
        let body = &self.bodies[self.of_op[index]?];
        (body.first == index).then_some(body.text.as_str())
    }
}

/// `` `a`, `b`, `c` and 7 more ``: at most five names of a list.
pub(super) fn name_list(names: &[String]) -> String {
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
pub(super) fn run_generic(op: &Op) -> bool {
    !op.routing_tensors().is_empty() || op.device_input().is_some() || contains_tensor(&op.output)
}

/// The `__run` function named `name` for `op`'s signature, at module level.
pub(super) fn run_fn(op: &Op, name: &str, w: &mut Writer) {
    let dispatch_params: Vec<Doc> = op
        .inputs
        .iter()
        .map(|i| super::super::param(&i.name, &dispatch_input(&i.arg)))
        .collect();
    let kernel_params: Vec<Doc> = op
        .inputs
        .iter()
        .map(|i| super::super::type_doc(&input_type(&i.arg, "B")))
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
        super::super::code::type_list("(", kernel_params.clone(), ")"),
        kernel_ret.clone(),
    ]);
    // (`<`: the comma takes the last column.)
    let kernel_type = if flat.flat_ok() && INDENT.len() + flat.width() < WIDTH {
        flat
    } else {
        cat([
            format!("{KERNEL}: fn").into(),
            super::super::code::vertical("(", kernel_params, ")"),
            kernel_ret,
        ])
    };
    let mut run_params = vec![Doc::from(format!("{ROUTE}: &{RT}::Route")), kernel_type];
    run_params.extend(dispatch_params);
    // The kernel's pointer type spells the op's whole signature, which clippy counts as one
    // type; an alias per op would only move it.
    w.line("#[allow(clippy::type_complexity)]");
    super::super::allow_large_error(op, w);
    super::super::allow_many_arguments(op.inputs.len() + 2, w);
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
                super::super::code::type_list("<", vec![format!("B: {RT}::Target").into()], ">"),
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

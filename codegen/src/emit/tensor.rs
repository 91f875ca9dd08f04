//! `Tensor<D>`-level functions, and their `try_` twins: the API most users call.

use super::code::{Doc, Writer, call, cat};
use super::{
    EmitConfig, Level, Use, allow_complex_output, const_generics, contained, output_expr,
    result_returns, returns_doc, signature, tensor_type, uses,
};
use crate::ir::{Arg, Container, Ir, Op, Output, TensorArg};
use crate::names::{self, DISPATCH_MODULE, OUT, PENDING, PRIVATE_RUNTIME as RT};

pub(super) fn emit(ir: &Ir, config: &EmitConfig, w: &mut Writer) {
    let dispatch = &config.dispatch_module;
    let mut imports = vec![Use::runtime(config)];
    // The conversions of `Option` and `Vec` tensors live in the runtime's private module.
    if ir.ops.iter().any(has_container) || super::types::has_container(ir) {
        imports.push(Use::new(format!(
            "{}::{} as {RT}",
            config.runtime,
            names::PRIVATE
        )));
    }
    // The module alone (`::{self}`: its type namespace), so an op named like it (whose
    // function the crate may re-export beside the module) does not clash with the import.
    if dispatch == DISPATCH_MODULE || dispatch.ends_with(&format!("::{DISPATCH_MODULE}")) {
        imports.push(Use::new(format!("{dispatch}::{{self}}")));
    } else {
        imports.push(Use::new(format!(
            "{dispatch}::{{self as {DISPATCH_MODULE}}}"
        )));
    }
    // The panicking functions call the `Dispatch` trait methods.
    let module = &config.trait_module;
    // (Async ops go through the `Dispatch`-level `try_` function instead.)
    for (index, group) in ir.groups.iter().enumerate() {
        if ir.ops_of(index).any(|op| !op.asynchronous) {
            imports.push(Use::new(format!("{module}::{}", group.name)));
        }
    }
    for def in &ir.types {
        imports.push(Use::new(format!(
            "{module}::{}",
            names::primitive_type(&def.name)
        )));
    }
    uses(imports, w);
    super::types::tensor_types(ir, w);
    for op in &ir.ops {
        tensor_fns(ir, op, w);
    }
}

/// Whether an op has an `Option` or `Vec` of tensors among its inputs or outputs.
fn has_container(op: &Op) -> bool {
    fn output(out: &Output) -> bool {
        match out {
            Output::Tensor(t) => t.container != Container::One,
            Output::Tuple(items) => items.iter().any(output),
            Output::Unit | Output::Plain(_) | Output::Declared { .. } => false,
        }
    }
    op.tensor_inputs()
        .any(|(_, t)| t.container != Container::One)
        || output(&op.output)
}

fn tensor_fns(ir: &Ir, op: &Op, w: &mut Writer) {
    let name = &op.name;
    let try_name = names::try_fn(name);
    let trait_name = &ir.groups[op.group].name;
    let generics: Vec<Doc> = const_generics(op)
        .into_iter()
        .map(|g| format!("const {g}: usize").into())
        .collect();
    // rustfmt breaks the parameters first; the generics only when they alone overflow.
    let head = |name: &str| -> Doc {
        let flat = super::code::list("<", generics.clone(), ">");
        if generics.is_empty() {
            format!("pub fn {name}").into()
        } else if cat([format!("pub fn {name}").into(), flat.clone(), "(".into()]).width() + 3
            <= super::code::WIDTH
        {
            // rustfmt keeps `pub fn name<generics>(` on one line up to 97 columns (measured
            // against rustfmt 1.9), not 100.
            let mut text = format!("pub fn {name}");
            text.push('<');
            let names: Vec<String> = generics.iter().map(Doc::flat_text).collect();
            text.push_str(&names.join(", "));
            text.push('>');
            text.into()
        } else if cat([format!("pub fn {name}").into(), flat.clone(), "(".into()]).width()
            <= super::code::WIDTH
        {
            // 98 to 100 columns: it would fit, but rustfmt breaks the generics anyway.
            cat([
                format!("pub fn {name}").into(),
                super::code::vertical("<", generics.clone(), ">"),
            ])
        } else {
            cat([format!("pub fn {name}").into(), flat])
        }
    };
    let params: Vec<Doc> = op
        .inputs
        .iter()
        .map(|i| {
            let ty = match &i.arg {
                Arg::Tensor(t) => contained(t, &tensor_type(t)),
                Arg::Plain(ty) => ty.clone(),
                Arg::Device => "&rt::Device".to_owned(),
                Arg::Declared {
                    name,
                    borrowed,
                    ranks,
                    ..
                } => {
                    let ty = Level::Tensor.declared(name, ranks);
                    if *borrowed { format!("&{ty}") } else { ty }
                }
            };
            super::param(&i.name, &ty)
        })
        .collect();

    if op.asynchronous {
        async_tensor_fns(ir, op, &head, params, w);
        return;
    }
    w.blank();
    // The op's prose is on its trait method; this links to it.
    w.doc(&[
        format!("[`{trait_name}::{name}`] on `Tensor`s, routed to the backend of its inputs."),
        String::new(),
        "# Panics".to_owned(),
        String::new(),
        "When the inputs break the routing contract; the message names the input and the fix"
            .to_owned(),
        format!("(see [`rt::errors`]). [`{try_name}`](fn@{try_name}) returns the error instead."),
    ]);
    // The value is the point of calling a non-unit op.
    if super::must_use(&op.output) {
        w.line("#[must_use]");
    }
    super::deprecated(op, false, w);
    allow_complex_output(op, w);
    super::allow_many_arguments(op.inputs.len(), w);
    w.open(signature(
        head(name),
        params.clone(),
        returns_doc(&op.output, Level::Tensor, " {"),
    ));
    // The panicking `Dispatch` method returns its outputs directly, with no `Result` to move
    // them through on every call.
    let method = dispatch_call(op, &format!("<rt::Dispatch as {trait_name}>::{name}"));
    match &op.output {
        Output::Unit => w.line(cat([method, ";".into()])),
        Output::Plain(_) => w.line(method),
        Output::Tensor(_) | Output::Tuple(_) | Output::Declared { .. } => {
            w.assign(format!("let {OUT} = "), method, ";");
            w.line(output_expr(
                &op.output,
                OUT,
                &from_dispatch,
                &from_primitive,
            ));
        }
    }
    w.close("}");

    w.blank();
    try_doc(name, false, w);
    super::deprecated(op, true, w);
    allow_complex_output(op, w);
    super::allow_many_arguments(op.inputs.len(), w);
    w.open(signature(
        head(&try_name),
        params,
        result_returns(&op.output, Level::Tensor, " {"),
    ));
    let fallible = dispatch_call(op, &format!("{DISPATCH_MODULE}::{try_name}"));
    match &op.output {
        // A unit or plain result crosses unchanged: the dispatch result is the result.
        Output::Unit | Output::Plain(_) => w.line(fallible),
        Output::Tensor(_) | Output::Tuple(_) | Output::Declared { .. } => {
            w.assign(format!("let {OUT} = "), cat([fallible, "?".into()]), ";");
            w.line(call(
                "Ok",
                [output_expr(
                    &op.output,
                    OUT,
                    &from_dispatch,
                    &from_primitive,
                )],
            ));
        }
    }
    w.close("}");
}

/// The doc of the `try_` twin of `name`; an async op's future resolves to the error.
fn try_doc(name: &str, asynchronous: bool, w: &mut Writer) {
    let errors: &[&str] = if asynchronous {
        &[
            "The future resolves to the [`rt::RouteError`] for inputs that break the routing contract",
            "(see [`rt::errors`]).",
        ]
    } else {
        &["The [`rt::RouteError`] for inputs that break the routing contract (see [`rt::errors`])."]
    };
    let mut doc = vec![
        // `fn@`: an op may be named like a macro (`panic`, `vec`, ...).
        format!("[`{name}`](fn@{name}), returning the routing error instead of panicking."),
        String::new(),
        "# Errors".to_owned(),
        String::new(),
    ];
    doc.extend(errors.iter().map(|line| (*line).to_owned()));
    w.doc(&doc);
}

/// A call of the dispatch-level `callee` with the inputs converted for it.
fn dispatch_call(op: &Op, callee: &str) -> Doc {
    let args: Vec<Doc> = op
        .inputs
        .iter()
        .map(|i| match &i.arg {
            Arg::Tensor(t) => into_dispatch(t, &i.name),
            Arg::Plain(_) => i.name.as_str().into(),
            Arg::Device => format!("{}.as_dispatch()", i.name).into(),
            Arg::Declared {
                borrowed: false, ..
            } => format!("{}.{}()", i.name, names::INTO_PRIMITIVE).into(),
            // Its tensors are reference-counted handles: the clone is cheap.
            Arg::Declared { borrowed: true, .. } => {
                format!("&{}.clone().{}()", i.name, names::INTO_PRIMITIVE).into()
            }
        })
        .collect();
    call(callee, args)
}

/// Converts a dispatch-level declared-type output back to its `Tensor<D>` level.
fn from_primitive(name: &str, value: &str) -> Doc {
    call(format!("{name}::{}", names::FROM_PRIMITIVE), [value])
}

/// Converts one dispatch-level output tensor (in its container) back to `Tensor<D>`.
fn from_dispatch(t: &TensorArg, value: Doc) -> Doc {
    let function = match t.container {
        Container::One => "rt::Tensor::from_dispatch".to_owned(),
        Container::Option => format!("{RT}::from_dispatch_opt"),
        Container::Vec => format!("{RT}::from_dispatch_vec"),
    };
    call(function, [value])
}

/// Converts a `Tensor<D>`-level argument for the `Dispatch` level.
fn into_dispatch(t: &TensorArg, name: &str) -> Doc {
    match (t.container, t.borrowed) {
        (Container::One, false) => format!("{name}.into_dispatch()"),
        (Container::One, true) => format!("&{name}.clone().into_dispatch()"),
        (Container::Option, false) => format!("{RT}::into_dispatch_opt({name})"),
        (Container::Option, true) => format!("{RT}::into_dispatch_ref_opt({name}).as_ref()"),
        (Container::Vec, _) => format!("{RT}::into_dispatch_vec({name})"),
    }
    .into()
}

/// An async op's `Tensor<D>`-level functions: routed at the call through the `Dispatch`-level
/// `try_` function (which returns `rt::Planned`); they return boxed futures (`rt::Pending`,
/// `rt::PendingResult`) that borrow nothing from the caller.
fn async_tensor_fns(
    ir: &Ir,
    op: &Op,
    head: &dyn Fn(&str) -> Doc,
    params: Vec<Doc>,
    w: &mut Writer,
) {
    let name = &op.name;
    let try_name = names::try_fn(name);
    let trait_name = &ir.groups[op.group].name;
    let out = super::output_doc(&op.output, Level::Tensor);
    let returns = |ty: &str| {
        cat([
            " -> ".into(),
            super::generic_type(ty, vec![out.clone()]),
            " {".into(),
        ])
    };
    let routed = dispatch_call(op, &format!("{DISPATCH_MODULE}::{try_name}"));
    let tensors_out = matches!(
        op.output,
        Output::Tensor(_) | Output::Tuple(_) | Output::Declared { .. }
    );
    w.blank();
    w.doc(&[
        format!("[`{trait_name}::{name}`] on `Tensor`s, routed to the backend of its inputs."),
        String::new(),
        "The call is routed at once; the future runs the kernel and borrows nothing from the"
            .to_owned(),
        "caller.".to_owned(),
        String::new(),
        "# Panics".to_owned(),
        String::new(),
        "At the call, when the inputs break the routing contract; the message names the input"
            .to_owned(),
        format!(
            "and the fix (see [`rt::errors`]). [`{try_name}`](fn@{try_name}) returns the error instead."
        ),
    ]);
    super::deprecated(op, true, w);
    allow_complex_output(op, w);
    super::allow_many_arguments(op.inputs.len(), w);
    w.open(signature(
        head(name),
        params.clone(),
        returns("rt::Pending"),
    ));
    if tensors_out {
        super::bind_then(
            w,
            names::PLANNED_CALL,
            routed.clone(),
            &format!("let {PENDING} = "),
            ".or_panic()",
            ";",
        );
        w.open("Box::pin(async move {");
        w.line(format!("let {OUT} = {PENDING}.await;"));
        w.line(output_expr(
            &op.output,
            OUT,
            &from_dispatch,
            &from_primitive,
        ));
        w.close("})");
    } else {
        // Nothing to convert: the kernel's future is the future.
        super::bind_then(
            w,
            names::PLANNED_CALL,
            routed.clone(),
            "",
            ".or_panic()",
            "",
        );
    }
    w.close("}");

    w.blank();
    try_doc(name, true, w);
    super::deprecated(op, true, w);
    allow_complex_output(op, w);
    super::allow_many_arguments(op.inputs.len(), w);
    w.open(signature(
        head(&try_name),
        params,
        returns("rt::PendingResult"),
    ));
    if tensors_out {
        w.assign(format!("let {PENDING} = "), routed, ";");
        w.open("Box::pin(async move {");
        w.line(format!("let {OUT} = {PENDING}.await?;"));
        w.line(call(
            "Ok",
            [output_expr(
                &op.output,
                OUT,
                &from_dispatch,
                &from_primitive,
            )],
        ));
        w.close("})");
    } else {
        w.line(call("Box::pin", [routed]));
    }
    w.close("}");
}

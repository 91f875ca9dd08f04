//! `Tensor<D>`-level functions, and their `try_` twins: the API most users call.

use super::code::{Doc, Writer, cat, list};
use super::{
    EmitConfig, allow_complex_output, const_generics, contained, convert_output, map_output_type,
    op_docs, returns, signature, through_container, use_runtime,
};
use crate::ir::{Arg, Container, Ir, Op, Output, Rank, TensorArg, TensorKind};
use crate::names::{self, DISPATCH_MODULE, OUT};

pub(super) fn emit(ir: &Ir, config: &EmitConfig, w: &mut Writer) {
    w.line(use_runtime(config));
    let dispatch = &config.dispatch_module;
    if dispatch == DISPATCH_MODULE || dispatch.ends_with(&format!("::{DISPATCH_MODULE}")) {
        w.line(format!("use {dispatch};"));
    } else {
        w.line(format!("use {dispatch} as {DISPATCH_MODULE};"));
    }
    // The panicking functions call the `Dispatch` trait methods.
    let module = &config.trait_module;
    for group in &ir.groups {
        w.line(format!("use {module}::{};", group.name));
    }
    for op in &ir.ops {
        tensor_fns(ir, op, w);
    }
}

fn tensor_fns(ir: &Ir, op: &Op, w: &mut Writer) {
    let name = &op.name;
    let try_name = names::try_fn(name);
    let generics: Vec<String> = const_generics(op)
        .into_iter()
        .map(|g| format!("const {g}: usize"))
        .collect();
    let generics = if generics.is_empty() {
        String::new()
    } else {
        format!("<{}>", generics.join(", "))
    };
    let params: Vec<Doc> = op
        .inputs
        .iter()
        .map(|i| {
            let ty = match &i.arg {
                Arg::Tensor(t) => contained(t, &tensor_type(t)),
                Arg::Plain(ty) => ty.clone(),
                Arg::Device => "&rt::Device".to_owned(),
            };
            format!("{}: {ty}", i.name).into()
        })
        .collect();
    let out_ty = map_output_type(&op.output, &|t| contained(t, &tensor_type(t)));

    w.blank();
    w.doc(&op_docs(
        op,
        &[
            String::new(),
            "# Panics".to_owned(),
            String::new(),
            "When the inputs break the routing contract; the message names the input and the fix"
                .to_owned(),
            format!("(see `ERRORS.md`). [`{try_name}`] returns the error instead."),
        ],
    ));
    // The value is the point of calling a non-unit op.
    if !matches!(op.output, Output::Unit) {
        w.line("#[must_use]");
    }
    allow_complex_output(&op.output, w);
    w.open(signature(
        format!("pub fn {name}{generics}"),
        params.clone(),
        format!("{} {{", returns(&op.output, &out_ty)),
    ));
    // The panicking `Dispatch` method returns its outputs directly, with no `Result` to move
    // them through on every call.
    let method = format!("<rt::Dispatch as {}>::{name}", ir.groups[op.group].name);
    convert_outputs(op, dispatch_call(op, &method), false, w);
    w.close("}");

    w.blank();
    w.doc(&[
        format!("[`{name}`], returning the routing error instead of panicking."),
        String::new(),
        "# Errors".to_owned(),
        String::new(),
        "The [`rt::RouteError`] for inputs that break the routing contract (see `ERRORS.md`)."
            .to_owned(),
    ]);
    allow_complex_output(&op.output, w);
    w.open(signature(
        format!("pub fn {try_name}{generics}"),
        params,
        format!(" -> Result<{out_ty}, rt::RouteError> {{"),
    ));
    let call = dispatch_call(op, &format!("{DISPATCH_MODULE}::{try_name}"));
    if matches!(op.output, Output::Plain(_)) {
        // A plain value crosses unchanged: the dispatch result is the result.
        w.line(call);
    } else {
        convert_outputs(op, cat([call, "?".into()]), true, w);
    }
    w.close("}");
}

/// The body that turns the unwrapped dispatch-level result `value` into the `Tensor<D>`-level
/// outputs, returned in `Ok` when `ok`.
fn convert_outputs(op: &Op, value: Doc, ok: bool, w: &mut Writer) {
    let finish = |out: Doc| {
        if ok {
            cat(["Ok".into(), list("(", vec![out], ")")])
        } else {
            out
        }
    };
    match &op.output {
        Output::Unit => {
            w.line(cat([value, ";".into()]));
            if ok {
                w.line("Ok(())");
            }
        }
        Output::Plain(_) => w.line(finish(value)),
        Output::Tensor(t) => w.line(finish(from_dispatch(t, value))),
        Output::Tuple(_) => {
            let (pat, expr) = convert_output(&op.output, OUT, &from_dispatch);
            w.line(cat(["let ".into(), pat, " = ".into(), value, ";".into()]));
            w.line(finish(expr));
        }
    }
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
        })
        .collect();
    cat([callee.into(), list("(", args, ")")])
}

/// Converts one dispatch-level output tensor (in its container) back to `Tensor<D>`.
fn from_dispatch(t: &TensorArg, value: Doc) -> Doc {
    through_container(t, value, "rt::Tensor::from_dispatch")
}

/// The `Tensor<D>`-level type of one tensor.
fn tensor_type(t: &TensorArg) -> String {
    let rank = match &t.rank {
        Rank::Generic(g) => g.clone(),
        Rank::Fixed(n) => n.to_string(),
    };
    match t.kind {
        TensorKind::Float | TensorKind::Quantized => format!("rt::Tensor<{rank}>"),
        TensorKind::Int => format!("rt::Tensor<{rank}, rt::Int>"),
        TensorKind::Bool => format!("rt::Tensor<{rank}, rt::Bool>"),
    }
}

/// Converts a `Tensor<D>`-level argument for the `Dispatch` level.
fn into_dispatch(t: &TensorArg, name: &str) -> Doc {
    match (t.container, t.borrowed) {
        (Container::One, false) => format!("{name}.into_dispatch()"),
        (Container::One, true) => format!("&{name}.clone().into_dispatch()"),
        (Container::Option, false) => format!("{name}.map(rt::Tensor::into_dispatch)"),
        (Container::Option, true) => format!("{name}.map(|t| t.clone().into_dispatch()).as_ref()"),
        (Container::Vec, _) => {
            format!("{name}.into_iter().map(rt::Tensor::into_dispatch).collect()")
        }
    }
    .into()
}

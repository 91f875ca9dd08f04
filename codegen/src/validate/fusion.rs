//! The rules of `fusion`: how an op routed to Cube runs on `Fusion<B>` (what `Cube` is when
//! burn-cubecl's `fusion` feature is on).
//!
//! By default an op whose outputs declare their metadata is one deferred operation around its
//! Cube kernel (`"kernel"`), and any other op with a `composition` runs it on `Fusion<B>`.
//! `fusion = "composition"` runs the composition there even when the outputs declare their
//! metadata (which Remote still reads): Burn's fuser then fuses it with its neighbours, which an
//! element-wise op gains more from than from its own kernel.

use super::context::{Context, ManifestRule, unknown_modes};
use super::contracts::first_undeclared;
use super::lower::lazy_outputs;
use crate::diag::{Diagnostic, page};
use crate::ir::{Arg, BackendId, Backward, BackwardForm, FusionImpl, Output};
use crate::model::{BackwardSpec, OpSpec};

/// The rules about `fusion`, checked with the other manifest rules.
pub(super) const MANIFEST_RULES: &[ManifestRule] = &[
    fusion_value_known,
    fusion_key_applies,
    shared_backward_kernel_runs_one_way,
];

fn key(spec: &OpSpec) -> String {
    format!("op[{}].fusion", spec.index)
}

/// `fusion` is `"kernel"` or `"composition"`.
fn fusion_value_known(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    unknown_modes(
        cx,
        "fusion",
        |spec| spec.fusion.as_ref(),
        crate::keys::FUSION,
        "write \"kernel\" (one deferred operation around the op's Cube kernel) or \"composition\" (the op's composition on `Fusion<B>`, fused by Burn)",
        page::CUBE_METADATA,
    )
}

/// `fusion` chooses between two forms the op has: it is routed to Cube, not composite, and has
/// the form it names (a `composition`, or output metadata for the deferred kernel).
fn fusion_key_applies(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (spec, op) in cx.ops {
        let Some(value) = spec.fusion.as_ref() else {
            continue;
        };
        let diagnostic = |message: String, help: &str| {
            Diagnostic::new(value.span.clone(), key(spec), message)
                .page(page::CUBE_METADATA)
                .help(help)
        };
        if op.composite.is_some() {
            out.push(diagnostic(
                format!("op `{}` is composite: its composition runs on every backend, `Fusion<B>` included, so `fusion` has nothing to choose", op.name),
                "remove `fusion`",
            ));
        } else if !op.backends.iter().any(|b| b.name == BackendId::Cube) {
            out.push(diagnostic(
                format!(
                    "op `{}` is not routed to Cube, so `fusion` has nothing to choose",
                    op.name
                ),
                // Routed to Cube, would the op have the form `fusion` names? Else adding Cube
                // only leads to the next error about `fusion`.
                if (value.value == "composition"
                    && op.composition.is_some()
                    && no_kernel_form(op).is_none())
                    || (value.value == "kernel"
                        && !op.asynchronous
                        && lazy_outputs(&op.output)
                        && !op.inputs.iter().any(|i| matches!(i.arg, Arg::Declared { .. })))
                {
                    "add \"Cube\" to the op's `backends` (or `routing.backends`), or remove `fusion`"
                } else {
                    "remove `fusion` (it chooses how the op runs on Cube)"
                },
            ));
        } else if value.value == "composition" && op.composition.is_none() {
            out.push(diagnostic(
                format!("op `{}` says it runs its composition on `Fusion<B>`, but has no `composition`", op.name),
                "add `composition = \"path::to::fn\"` (the op written with backend primitives), or remove `fusion` to run the op's kernel as one deferred operation",
            ));
        } else if value.value == "composition"
            && let Some(why) = no_kernel_form(op)
        {
            out.push(diagnostic(
                format!("op `{}` {why}, so it runs its composition on `Fusion<B>` already: `fusion = \"composition\"` has nothing to choose", op.name),
                "remove `fusion`",
            ));
        } else if value.value == "kernel"
            && let Some(input) = op
                .inputs
                .iter()
                .find(|i| matches!(i.arg, Arg::Declared { .. }))
        {
            out.push(diagnostic(
                format!(
                    "op `{}` says it runs its kernel as one deferred operation on `Fusion<B>`, but its input `{}` is a declared type, which has no lazy form on `Fusion<B>` yet{}",
                    op.name,
                    input.name,
                    if op.composition.is_some() {
                        ": its `composition` would run there instead"
                    } else {
                        ""
                    }
                ),
                "remove `fusion` (the op then runs its `composition` on `Fusion<B>`, which Burn fuses; output `shape` and `dtype` stay for Remote)",
            ));
        } else if value.value == "kernel" && (op.asynchronous || !lazy_outputs(&op.output)) {
            let (why, help) = if op.asynchronous {
                (
                    "is async, and the fusion stream cannot await a kernel".to_owned(),
                    "remove `fusion`: an async op runs its composition on `Fusion<B>`".to_owned(),
                )
            } else if let Some(value) = not_a_tensor(&op.output) {
                (
                    format!(
                        "returns {value}, which a deferred operation cannot return before its kernel runs"
                    ),
                    "return tensors only, or remove `fusion` (the op then runs its `composition` on `Fusion<B>`, or without one its kernel eagerly)".to_owned(),
                )
            } else {
                let base = format!("op[{}].output", spec.index);
                let why = first_undeclared(&op.output, base).map_or_else(
                    || "an output declares no `shape` or `dtype`".to_owned(),
                    |(_, why)| why,
                );
                (
                    format!(
                        "{why}, and a deferred operation needs every output's `shape` and `dtype` before its kernel runs"
                    ),
                    format!(
                        "declare `shape` and `dtype` there{}, or remove `fusion` (the op then runs its `composition` on `Fusion<B>`, or without one its kernel eagerly)",
                        if matches!(op.output, Output::Declared { .. }) {
                            " (in the `[[type]]` entry's field)"
                        } else {
                            ""
                        }
                    ),
                )
            };
            out.push(diagnostic(
                format!("op `{}` says it runs its kernel as one deferred operation on `Fusion<B>`, but {why}", op.name),
                &help,
            ));
        }
    }
    out
}

/// Why `op` has no deferred kernel form on `Fusion<B>`, if it has none: async, a declared-type
/// input, or outputs whose metadata a deferred operation cannot declare.
fn no_kernel_form(op: &crate::ir::Op) -> Option<String> {
    if op.asynchronous {
        Some("is async (the fusion stream cannot await a kernel)".to_owned())
    } else if let Some(input) = op
        .inputs
        .iter()
        .find(|i| matches!(i.arg, Arg::Declared { .. }))
    {
        Some(format!(
            "has a declared-type input (`{}`), which has no lazy form yet",
            input.name
        ))
    } else if !lazy_outputs(&op.output) {
        Some(
            "does not declare every output's `shape` and `dtype`, which a deferred kernel needs"
                .to_owned(),
        )
    } else {
        None
    }
}

/// A warning for each op that runs eagerly on `Fusion<B>` (routed to Cube with a kernel of its
/// own, and neither output metadata nor a `composition`): it works, but each call waits for the
/// fusion stream and fuses with nothing. It names the keys that would make it one deferred
/// operation.
pub(super) fn eager_warnings(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    cx.ops
        .iter()
        .filter(|(_, op)| op.fusion == FusionImpl::Eager)
        .map(|(spec, op)| {
            let mut keys = Vec::new();
            missing_metadata(&op.output, format!("op[{}].output", spec.index), &mut keys);
            let keys = keys
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ");
            let help = match not_a_tensor(&op.output) {
                Some(value) if keys.is_empty() => format!(
                    "the op returns {value}, which a deferred operation cannot return, so it stays eager; give it `composition = \"path::to::fn\"` to run its composition on `Fusion<B>` instead"
                ),
                None => format!(
                    "declare {keys} (an input's name, e.g. `shape = \"{x}\", dtype = \"{x}\"`, or a function path{other}) to make each call one deferred operation, or give the op `composition = \"path::to::fn\"` to run its composition there, which Burn fuses",
                    x = super::context::example_input(op),
                    other = if non_float_output(&op.output) {
                        "; `dtype = \"default\"` for an int or bool output"
                    } else {
                        ""
                    }
                ),
                Some(value) => format!(
                    "the op returns {value}, which a deferred operation cannot return before its kernel runs: return tensors only and declare {keys} to make each call one deferred operation, or give the op `composition = \"path::to::fn\"`"
                ),
            };
            Diagnostic::new(
                spec.output
                    .as_ref()
                    .map_or_else(|| spec.name_span(), crate::model::OutputSpec::span),
                key(spec).replace(".fusion", ".output"),
                format!(
                    "op `{}` runs eagerly on `Fusion<B>` (what `Cube` is when fusion is on): each call waits for the fusion stream to compute its inputs, runs its Cube kernel at once and fuses with nothing around it",
                    op.name
                ),
            )
            .page(page::CUBE_METADATA)
            .help(help)
            .warning()
        })
        .collect()
}

/// The metadata keys `output` lacks, under `path` (`op[2].output[1].shape`).
fn missing_metadata(output: &Output, path: String, keys: &mut Vec<String>) {
    match output {
        Output::Tensor(t) => {
            if t.meta.shape.is_none() {
                keys.push(format!("{path}.shape"));
            }
            if t.meta.dtype.is_none() {
                keys.push(format!("{path}.dtype"));
            }
        }
        Output::Tuple(items) => {
            for (i, item) in items.iter().enumerate() {
                missing_metadata(item, format!("{path}[{i}]"), keys);
            }
        }
        Output::Unit | Output::Plain(_) | Output::Declared { .. } => {}
    }
}

/// What in `output` is not a tensor a deferred operation can declare: a plain value, `()`, or a
/// declared type inside a tuple or with plain fields.
fn not_a_tensor(output: &Output) -> Option<String> {
    match output {
        Output::Unit => Some("`()`".to_owned()),
        Output::Plain(ty) => Some(format!("a plain `{ty}`")),
        Output::Tensor(_) => None,
        Output::Declared {
            name, tensors_only, ..
        } => (!tensors_only).then(|| format!("declared type `{name}`, which holds plain fields")),
        Output::Tuple(items) => items.iter().find_map(|item| match item {
            Output::Declared { name, .. } => Some(format!("declared type `{name}` inside a tuple")),
            other => not_a_tensor(other),
        }),
    }
}

/// Whether `output` has an int or bool tensor, whose dtype no float input gives.
fn non_float_output(output: &Output) -> bool {
    match output {
        Output::Tensor(t) => t.kind != crate::ir::TensorKind::Float,
        Output::Tuple(items) => items.iter().any(non_float_output),
        Output::Unit | Output::Plain(_) | Output::Declared { .. } => false,
    }
}

/// Two ops whose backward pass is the same trait method (`backward = "crate::m::Trait::f"`)
/// agree on how it runs on `Fusion<B>` and on Remote: the generated impl of the trait for each
/// has one body per method, one deferred operation (or one operation on the server) when the
/// op runs there as one, else the default body. An op that said otherwise (`fusion` or
/// `remote` = `"composition"` beside one that runs its kernel) would be ignored for its
/// backward pass; the later op is the error, at its `backward`.
fn shared_backward_kernel_runs_one_way(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let targets = [
        (BackendId::Cube, "fusion", page::CUBE_METADATA),
        (BackendId::Remote, "remote", page::REMOTE),
    ];
    let method = |op: &crate::ir::Op| match &op.backward {
        Some(Backward {
            form:
                BackwardForm::Function {
                    path,
                    method_of: Some(_),
                    ..
                },
            ..
        }) => Some(path.clone()),
        _ => None,
    };
    let mut out = Vec::new();
    for (i, (spec, op)) in cx.ops.iter().enumerate() {
        let Some(path) = method(op) else { continue };
        let Some((_, first)) = cx.ops[..i]
            .iter()
            .find(|(_, other)| method(other).as_deref() == Some(path.as_str()))
        else {
            continue;
        };
        let Some(BackwardSpec::Function(at)) = spec.backward.as_ref() else {
            continue;
        };
        for (target, key, page) in targets {
            let (Some(kernel), Some(first_kernel)) =
                (op.one_operation_on(target), first.one_operation_on(target))
            else {
                continue;
            };
            if kernel == first_kernel {
                continue;
            }
            let way = |k: bool| if k { "\"kernel\"" } else { "\"composition\"" };
            out.push(
                Diagnostic::new(
                    at.span.clone(),
                    format!("op[{}].backward", spec.index),
                    format!(
                        "op `{}` shares its backward kernel `{path}` with op `{}`, which runs it the other way: its `{key}` is {} and `{}`'s is {}, but the kernel has one implementation on that backend",
                        op.name,
                        first.name,
                        way(kernel),
                        first.name,
                        way(first_kernel)
                    ),
                )
                .page(page)
                .help(format!(
                    "give both ops the same `{key}`, or give `{}` a backward method of its own",
                    op.name
                )),
            );
        }
    }
    out
}

//! The rules that relate manifest values to each other, one named function each. Lowering
//! ([`super::lower`]) has already turned each value into its IR form; these look at the whole.

use super::context::{Context, ManifestRule};
use crate::diag::{Diagnostic, page};
use crate::ir::{Arg, FusionImpl, Op, Output, Policy, RouteBy};
use crate::model::OpSpec;

/// Every manifest-wide rule of this module, in the order they are checked (the async rules
/// follow, [`super::asynchrony::MANIFEST_RULES`]).
pub(super) const MANIFEST_RULES: &[ManifestRule] = &[
    policy_needs_float_input,
    op_is_routable,
    lazy_arguments_are_owned,
    composition_is_not_composite,
    declared_inputs_have_no_metadata,
    declared_inputs_call_no_field_functions,
];

/// The declared types ops name directly (inputs and outputs, tuples included).
pub(super) fn declared_uses(ops: &[(&OpSpec, Op)]) -> std::collections::BTreeSet<String> {
    fn output(out: &Output, acc: &mut std::collections::BTreeSet<String>) {
        match out {
            Output::Declared { name, .. } => {
                acc.insert(name.clone());
            }
            Output::Tuple(items) => items.iter().for_each(|o| output(o, acc)),
            Output::Unit | Output::Tensor(_) | Output::Plain(_) => {}
        }
    }
    let mut acc = std::collections::BTreeSet::new();
    for (_, op) in ops {
        for input in &op.inputs {
            if let Arg::Declared { name, .. } = &input.arg {
                acc.insert(name.clone());
            }
        }
        output(&op.output, &mut acc);
    }
    acc
}

/// `differentiable` and `detach` act on tracked floats: an op without a float input never sees
/// one.
fn policy_needs_float_input(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    each_op(cx, policy_of_one_op)
}

fn policy_of_one_op(spec: &OpSpec, op: &Op) -> Option<Diagnostic> {
    if op.policy == Policy::Reject || op.has_float_input() {
        return None;
    }
    let p = spec.autodiff.as_ref()?;
    Some(
        Diagnostic::new(
            p.span.clone(),
            format!("op[{}].autodiff", spec.index),
            format!(
                "op `{}` is `{}` but has no float tensor input, so autodiff never reaches it",
                op.name,
                op.policy.key()
            ),
        )
        .page(page::POLICY_NEEDS_FLOAT)
        .help(
            "remove `autodiff` (the default `reject` is exact here), or add a float tensor input",
        ),
    )
}

/// Something must pick the backend: a tensor, the device, or a single backend.
fn op_is_routable(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    each_op(cx, one_op_is_routable)
}

/// A rule about each op on its own, applied to every op.
fn each_op(cx: &Context<'_, '_>, rule: fn(&OpSpec, &Op) -> Option<Diagnostic>) -> Vec<Diagnostic> {
    cx.ops
        .iter()
        .filter_map(|(spec, op)| rule(spec, op))
        .collect()
}

fn one_op_is_routable(spec: &OpSpec, op: &Op) -> Option<Diagnostic> {
    // (An empty backend list is reported on its own.)
    if !matches!(op.route_by, RouteBy::Fixed(_)) || op.backends.len() <= 1 {
        return None;
    }
    let span = spec
        .inputs
        .as_ref()
        .map_or(spec.span.clone(), |i| i.span.clone());
    Some(
        Diagnostic::new(
            span,
            format!("op[{}].inputs", spec.index),
            format!(
                "op `{}` has no tensor and no device input, so nothing tells which of the {} backends to run it on",
                op.name,
                op.backends.len()
            ),
        )
        .page(page::NO_TENSOR_INPUT)
        .help(
            "add a tensor input or a `device = true` input to route by, or list exactly one backend (in the op's `backends` or in `routing.backends`)",
        ),
    )
}

/// A lazy op keeps its plain arguments until the fusion stream runs its kernel: they must be
/// owned.
fn lazy_arguments_are_owned(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (spec, op) in cx.ops {
        if op.fusion != FusionImpl::Lazy {
            continue;
        }
        for (i, input) in op.inputs.iter().enumerate() {
            let Arg::Plain(ty) = &input.arg else { continue };
            let borrows = ty.contains('&') || ty.replace("'static", "").contains('\'');
            if !borrows {
                continue;
            }
            let span = spec.input_type_span(i);
            out.push(
                Diagnostic::new(
                    span,
                    format!("op[{}].inputs[{i}].type", spec.index),
                    format!(
                        "`{}` of op `{}` borrows (`{ty}`), but the op runs lazily on `Fusion<B>`, which keeps its arguments until the fusion stream runs the kernel",
                        input.name, op.name
                    ),
                )
                .page(page::CUBE_METADATA)
                .help("pass an owned type (e.g. `Vec<usize>` for `&[usize]`), or give the op a `composition` and no output metadata"),
            );
        }
    }
    out
}

/// A composite op is its composition on every backend already.
fn composition_is_not_composite(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    cx.ops
        .iter()
        .filter(|(_, op)| op.composite.is_some())
        .filter_map(|(spec, _)| {
            let c = spec.composition.as_ref()?;
            Some(
                Diagnostic::new(
                    c.span.clone(),
                    format!("op[{}].composition", spec.index),
                    "a composite op has no kernels, so `composition` has nothing to stand in for",
                )
                .page(crate::diag::page::BAD_COMPOSITE)
                .help("remove `composition` (the `composite` function runs everywhere), or remove `composite` to write kernels that fall back to the composition"),
            )
        })
        .collect()
}

/// Whether the op's own outputs (not a declared type's fields) declare `shape` or `dtype`.
pub(super) fn has_meta(out: &Output) -> bool {
    match out {
        Output::Tensor(t) => t.meta.shape.is_some() || t.meta.dtype.is_some(),
        Output::Tuple(items) => items.iter().any(has_meta),
        Output::Unit | Output::Plain(_) | Output::Declared { .. } => false,
    }
}

/// The declared struct fields an output holds whose `shape` or `dtype` is a function, with the
/// field's label and the key.
fn field_functions(out: &Output, acc: &mut Vec<(String, &'static str)>) {
    match out {
        Output::Declared { leaves, .. } => {
            for leaf in leaves {
                let meta = &leaf.tensor.meta;
                for (which, source) in [("shape", &meta.shape), ("dtype", &meta.dtype)] {
                    if matches!(source, Some(crate::ir::MetaSource::Function(_))) {
                        acc.push((leaf.label(), which));
                    }
                }
            }
        }
        Output::Tuple(items) => items.iter().for_each(|o| field_functions(o, acc)),
        Output::Unit | Output::Plain(_) | Output::Tensor(_) => {}
    }
}

/// A metadata function gets the specs of the op's tensor inputs, which an op with a
/// declared-type input cannot give it (its tensors are inside the value), and that op has no
/// lazy form yet: a function on a field of the struct it returns would never be called.
fn declared_inputs_call_no_field_functions(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    cx.ops
        .iter()
        .filter_map(|(spec, op)| {
            let input = op
                .inputs
                .iter()
                .find(|i| matches!(i.arg, Arg::Declared { .. }))?;
            let mut found = Vec::new();
            field_functions(&op.output, &mut found);
            let (field, which) = found.into_iter().next()?;
            // (One error per op: the help covers every field.)
            let span = spec.output.as_ref()?.span();
            Some(
                Diagnostic::new(
                    span,
                    format!("op[{}].output", spec.index),
                    format!(
                        "op `{}` returns a struct whose field `{field}` has a `{which}` function, but the op takes a declared-type input (`{}`): a metadata function gets the specs of tensor inputs only, and an op with a declared-type input has no lazy form that would call it",
                        op.name, input.name
                    ),
                )
                .page(crate::diag::page::DECLARED_TYPE)
                .help(format!(
                    "in the type's `[[type]]` entry, remove the field's `shape` and `dtype`, or name an input of the op there (e.g. `shape = \"{x}\", dtype = \"{x}\"`, an input of the field's rank)",
                    x = super::context::example_input(op)
                )),
            )
        })
        .collect()
}

/// Output metadata is what the lazy `Fusion<B>` form and the one operation on Remote read; an
/// op with a declared-type input has no lazy form yet, so unless it runs on Remote as one
/// operation, metadata there would be silently unused.
fn declared_inputs_have_no_metadata(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    cx.ops
        .iter()
        .filter_map(|(spec, op)| {
            let input = op
                .inputs
                .iter()
                .find(|i| matches!(i.arg, Arg::Declared { .. }))?;
            if !has_meta(&op.output) || op.remote == crate::ir::RemoteImpl::Kernel {
                return None;
            }
            let span = spec.output.as_ref()?.span();
            Some(
                Diagnostic::new(
                    span,
                    format!("op[{}].output", spec.index),
                    format!(
                        "op `{}` declares output metadata, which only its lazy `Fusion<B>` form and its one operation on Remote read, but an op with a declared-type input (`{}`) has no lazy form yet, and this one does not run on Remote as one operation ({})",
                        op.name,
                        input.name,
                        if !op.backends.iter().any(|b| b.name == crate::ir::BackendId::Remote) {
                            "its `backends` do not include Remote"
                        } else if op.asynchronous {
                            "it is `async`"
                        } else if spec.remote.as_ref().is_some_and(|r| r.value == "composition") {
                            "`remote = \"composition\"`"
                        } else {
                            "see `remote`"
                        }
                    ),
                )
                .page(crate::diag::page::DECLARED_TYPE)
                .help("remove `shape` and `dtype` from the output (give the op a `composition` to run on Cube with fusion on); or route it to Remote, with metadata that names inputs rather than a function"),
            )
        })
        .collect()
}

//! A `differentiable` op through which no gradient can flow: a declared backward pass that gives
//! no float input a gradient (every formula `"none"`, or every float input in `no_gradient`),
//! or no float tensor output at all. The op is `differentiable` in name only, which is almost
//! always a slip. Warnings, not errors: the op builds and runs as declared.

use super::check::float_output;
use super::context::Context;
use crate::diag::{Diagnostic, page};
use crate::ir::Policy;
use crate::model::BackwardSpec;

/// A warning for each op whose declared backward pass differentiates none of its float inputs.
pub(super) fn no_gradient_warnings(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (spec, op) in cx.ops {
        let Some(backward) = &op.backward else {
            continue;
        };
        let slots = op.float_slots().count();
        if slots == 0 || (0..slots).any(|slot| backward.gives_gradient(slot)) {
            continue;
        }
        let (span, key, how, keys) = match &spec.backward {
            Some(BackwardSpec::Formulas { span, .. }) => (
                span.clone(),
                "backward",
                "every formula is \"none\"",
                "`backward`",
            ),
            _ => match &spec.no_gradient {
                Some(list) => (
                    list.span.clone(),
                    "no_gradient",
                    "`no_gradient` lists every float input",
                    "`backward` and `no_gradient`",
                ),
                None => continue,
            },
        };
        out.push(
            Diagnostic::new(
                span,
                format!("op[{}].{key}", spec.index),
                format!(
                    "op `{}` is `differentiable`, but its backward pass gives no float input a gradient ({how}): no gradient ever flows through it",
                    op.name
                ),
            )
            .page(page::BACKWARD)
            .help(format!("write `autodiff = \"detach\"` and remove {keys} (what the op does now: its output carries no gradient back), or give the inputs that have a gradient one"))
            .warning(),
        );
    }
    out
}

/// A warning for each `differentiable` op with a float input but no float tensor output (int,
/// bool or plain values only): nothing it returns carries a gradient back. (With `backward`,
/// the backward pass's own rule refuses it.)
pub(super) fn no_float_output_warnings(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (spec, op) in cx.ops {
        let Some(policy) = &spec.autodiff else {
            continue;
        };
        if op.policy != Policy::Differentiable
            || op.backward.is_some()
            || !op.has_float_input()
            || float_output(&op.output, cx.types)
        {
            continue;
        }
        out.push(
            Diagnostic::new(
                policy.span.clone(),
                format!("op[{}].autodiff", spec.index),
                format!(
                    "op `{}` is `differentiable`, but returns no float tensor: nothing it returns carries a gradient back",
                    op.name
                ),
            )
            .page(page::BACKWARD)
            .help("write `autodiff = \"detach\"` (what the op does now: a tracked input is read, and no gradient flows back through the op), or return a float tensor")
            .warning(),
        );
    }
    out
}

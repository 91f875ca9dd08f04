//! A declared backward pass that gives no float input a gradient (every formula `"none"`, or
//! every float input in `no_gradient`): the op is `differentiable` in name only, which is almost
//! always a slip. A warning, not an error: the op builds and runs as declared.

use super::context::Context;
use crate::diag::{Diagnostic, page};
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

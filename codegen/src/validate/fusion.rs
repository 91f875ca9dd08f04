//! The rules of `fusion`: how an op routed to Cube runs on `Fusion<B>` (what `Cube` is when
//! burn-cubecl's `fusion` feature is on).
//!
//! By default an op whose outputs declare their metadata is one deferred operation around its
//! Cube kernel (`"kernel"`), and any other op with a `composition` runs it on `Fusion<B>`.
//! `fusion = "composition"` runs the composition there even when the outputs declare their
//! metadata (which Remote still reads): Burn's fuser then fuses it with its neighbours, which an
//! element-wise op gains more from than from its own kernel.

use super::context::{Context, ManifestRule, unknown_modes};
use super::lower::lazy_outputs;
use crate::diag::{Diagnostic, page};
use crate::ir::{BackendName, Output};
use crate::model::OpSpec;

/// The values of `fusion`.
pub(crate) const FUSION_VALUES: &[&str] = &["kernel", "composition"];

/// The rules about `fusion`, checked with the other manifest rules.
pub(super) const MANIFEST_RULES: &[ManifestRule] = &[fusion_value_known, fusion_key_applies];

fn key(spec: &OpSpec) -> String {
    format!("op[{}].fusion", spec.index)
}

/// `fusion` is `"kernel"` or `"composition"`.
fn fusion_value_known(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    unknown_modes(
        cx,
        "fusion",
        |spec| spec.fusion.as_ref(),
        FUSION_VALUES,
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
        } else if !op.backends.iter().any(|b| b.name == BackendName::Cube) {
            out.push(diagnostic(
                format!(
                    "op `{}` is not routed to Cube, so `fusion` has nothing to choose",
                    op.name
                ),
                "add \"Cube\" to the op's `backends` (or `routing.backends`), or remove `fusion`",
            ));
        } else if value.value == "composition" && op.composition.is_none() {
            out.push(diagnostic(
                format!("op `{}` says it runs its composition on `Fusion<B>`, but has no `composition`", op.name),
                "add `composition = \"path::to::fn\"` (the op written with backend primitives), or remove `fusion` to run the op's kernel as one deferred operation",
            ));
        } else if value.value == "kernel" && (op.asynchronous || !lazy_outputs(&op.output)) {
            let (why, help) = if op.asynchronous {
                (
                    "is async, and the fusion stream cannot await a kernel".to_owned(),
                    "remove `fusion`: an async op runs its composition on `Fusion<B>`",
                )
            } else if let Some(value) = not_a_tensor(&op.output) {
                (
                    format!(
                        "returns {value}, which a deferred operation cannot return before its kernel runs"
                    ),
                    "return tensors only, or remove `fusion` (with a `composition`, the op runs it on `Fusion<B>`)",
                )
            } else {
                (
                    "does not declare its outputs' `shape` and `dtype`, which a deferred operation needs before its kernel runs".to_owned(),
                    "declare `shape` and `dtype` on each output, or remove `fusion` (with a `composition`, the op runs it on `Fusion<B>`)",
                )
            };
            out.push(diagnostic(
                format!("op `{}` says it runs its kernel as one deferred operation on `Fusion<B>`, but {why}", op.name),
                help,
            ));
        }
    }
    out
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

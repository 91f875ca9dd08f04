//! The rules of async ops (`async = true`): what the generated async routing cannot do.
//!
//! An async op's kernels, composition and routed functions return futures. Routing happens at
//! the call and the future owns what it needs, so the generated code stays free of lifetimes;
//! the rules below refuse what would need more: a generated (synchronous) backward pass, a
//! composite op (whose `Autodiff<B, C>` implementation is the synchronous trait default), a lazy
//! `Fusion<B>` operation (the fusion stream runs kernels synchronously) and borrowed plain
//! arguments (the future would borrow from the caller).

use super::context::{Context, ManifestRule};
use crate::diag::{Diagnostic, page};
use crate::ir::{Arg, BackendId, Op, RouteBy};
use crate::model::{BackwardSpec, OpSpec};

/// The async rules, checked after [`super::rules::MANIFEST_RULES`].
pub(super) const MANIFEST_RULES: &[ManifestRule] = &[async_ops];

/// Every rule about async ops, as one manifest rule.
fn async_ops(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (spec, op) in cx.ops {
        let Some(flag) = spec.asynchronous.as_ref().filter(|a| a.value) else {
            continue;
        };
        let at = flag.span.clone();
        let key = format!("op[{}].async", spec.index);
        if spec
            .backward
            .as_ref()
            .is_some_and(|b| !matches!(b, BackwardSpec::HandWritten(_)))
        {
            out.push(
                Diagnostic::new(
                    at.clone(),
                    key.clone(),
                    format!(
                        "op `{}` is async, but the backward pass generated from `backward` is synchronous",
                        op.name
                    ),
                )
                .page(page::ASYNC)
                .help("remove `backward` (and `save`, `checkpoint`, `no_gradient`) and write the op's `Autodiff<B, C>` kernel by hand, an async method of the `...Autodiff` trait; or remove `async`"),
            );
        }
        if op.composite.is_some() {
            out.push(
                Diagnostic::new(
                    at.clone(),
                    key.clone(),
                    format!(
                        "op `{}` is async, but a composite op's generated implementations (`Autodiff<B, C>` included) are synchronous",
                        op.name
                    ),
                )
                .page(page::ASYNC)
                .help("make the function the op's `composition` instead of `composite` (the default body of its async kernels; a `differentiable` op then needs its `Autodiff<B, C>` kernel written by hand), or remove `async`"),
            );
        }
        out.extend(runs_on_fusion(op, &at, &key));
        out.extend(owned_arguments(spec, op));
    }
    out
}

/// On `Fusion<B>` (what `Cube` is when fusion is on) an op with its own kernel is one deferred
/// operation that the fusion stream runs synchronously: an async op runs its composition there.
fn runs_on_fusion(op: &Op, at: &std::ops::Range<usize>, key: &str) -> Option<Diagnostic> {
    let on_cube = op.backends.iter().any(|b| b.name == BackendId::Cube);
    // An op nothing can route is reported as that.
    let unroutable = matches!(op.route_by, RouteBy::Fixed(_)) && op.backends.len() > 1;
    if !on_cube || unroutable || op.composite.is_some() || op.composition.is_some() {
        return None;
    }
    Some(
        Diagnostic::new(
            at.clone(),
            key.to_owned(),
            format!(
                "op `{}` is async and routed to Cube, but has no `composition`: on `Fusion<B>` (what `Cube` is when fusion is on) a kernel of its own would be a deferred operation, which the fusion stream runs synchronously",
                op.name
            ),
        )
        .page(page::ASYNC)
        .help("give the op a `composition = \"path::to::async_fn\"` (an async fn generic over `B: Backend`; it runs on `Fusion<B>` directly), or leave `Cube` out of its `backends`"),
    )
}

/// The future of an async op owns its arguments: a plain input may not borrow.
fn owned_arguments(spec: &OpSpec, op: &Op) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (i, input) in op.inputs.iter().enumerate() {
        let Arg::Plain(ty) = &input.arg else { continue };
        // `&'static T` is owned as far as the future cares.
        let borrows = ty
            .replace("&'static ", "")
            .replace("'static", "")
            .contains(['&', '\'']);
        let not_send = (!borrows).then(|| super::plain::not_send(ty)).flatten();
        if !borrows && not_send.is_none() {
            continue;
        }
        let span = spec.input_type_span(i);
        let key = format!("op[{}].inputs[{i}].type", spec.index);
        let diagnostic = match not_send {
            None => Diagnostic::new(
                span,
                key,
                format!(
                    "`{}` of async op `{}` borrows (`{ty}`), but the op's future owns its arguments: routing happens at the call, and the future outlives it",
                    input.name, op.name
                ),
            )
            .page(page::ASYNC)
            .help("pass an owned type (e.g. `Vec<usize>` for `&[usize]`, `String` for `&str`)"),
            Some(why) => Diagnostic::new(
                span,
                key,
                format!(
                    "`{}` of async op `{}` is not `Send` (`{ty}`: {why}), but the op's future, which owns its arguments, must be `Send`",
                    input.name, op.name
                ),
            )
            .page(page::ASYNC)
            .help("pass a `Send` type: add `+ Send` to a trait object (`Box<dyn Fn(f32) -> f32 + Send>`), use `Arc` for `Rc`, an index or an owned value for a raw pointer"),
        };
        out.push(diagnostic);
    }
    out
}

//! What the manifest-wide rules see ([`Context`]) and their type: shared by [`super::rules`] and
//! [`super::asynchrony`], which depend on this module and not on each other.

use std::ops::Range;

use super::lower::Routing;
use crate::diag::{Diagnostic, LineIndex, did_you_mean};
use crate::ir::Op;
use crate::model::{Manifest, OpSpec, Sp};

/// What manifest-wide rules see.
pub(super) struct Context<'a, 'm> {
    pub manifest: &'a Manifest,
    pub ops: &'a [(&'m OpSpec, Op)],
    pub lines: &'a LineIndex,
    pub routing: Option<&'a Routing>,
    /// Span and key of the main trait's name.
    pub trait_key: &'a (Range<usize>, String),
    /// The declared types that lowered.
    pub types: &'a [crate::ir::TypeDef],
    /// Whether the build writes the op check (`Builder::op_check`), whose rules apply then.
    pub op_check: bool,
}

/// A rule about the whole manifest.
pub(super) type ManifestRule = fn(&Context<'_, '_>) -> Vec<Diagnostic>;

/// An op key that names a mode (`remote`, `fusion`): the ops whose `key` (read by `value`) is
/// none of `values`, each an "unknown `what` mode" error at the value, with a did-you-mean,
/// `hint` (what each mode means) and the error page `page`.
pub(super) fn unknown_modes(
    cx: &Context<'_, '_>,
    key: &str,
    value: fn(&OpSpec) -> Option<&Sp<String>>,
    values: &[&str],
    hint: &str,
    page: &'static str,
) -> Vec<Diagnostic> {
    cx.ops
        .iter()
        .filter_map(|(spec, _)| {
            let mode = value(spec)?;
            if values.contains(&mode.value.as_str()) {
                return None;
            }
            let help = match did_you_mean(&mode.value, values) {
                Some(s) => format!("did you mean \"{s}\"? {hint}"),
                None => hint.to_owned(),
            };
            Some(
                Diagnostic::new(
                    mode.span.clone(),
                    format!("op[{}].{key}", spec.index),
                    format!("unknown {key} mode \"{}\"", mode.value),
                )
                .page(page)
                .help(help),
            )
        })
        .collect()
}

/// The name a help's example gives a metadata key (`shape = "x"`): the op's first single float
/// tensor input (else its first single tensor input), so that the example is one the user can paste; `x` when it has none.
pub(super) fn example_input(op: &Op) -> &str {
    let single = |float: bool| {
        op.inputs.iter().find(|i| {
            matches!(&i.arg, crate::ir::Arg::Tensor(t)
                if t.container == crate::ir::Container::One
                    && (!float || t.kind == crate::ir::TensorKind::Float))
        })
    };
    // A float one first: the output it is an example for is most often a float tensor.
    single(true)
        .or_else(|| single(false))
        .map_or("x", |i| i.name.as_str())
}

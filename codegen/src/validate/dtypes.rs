//! The rules of `dtypes` and `other_dtypes`: the float dtypes an op's kernels take, and what a
//! call with a float input of another dtype runs instead (the op's `composition`, or nothing:
//! a routing error).

use super::context::{Context, ManifestRule, unknown_modes};
use crate::diag::{Diagnostic, did_you_mean, page};
use crate::ir::{FloatDtype, Op};

/// The rules about `dtypes` and `other_dtypes`, checked with the other manifest rules.
pub(super) const MANIFEST_RULES: &[ManifestRule] = &[
    dtype_names_known,
    other_dtypes_value_known,
    dtypes_keys_apply,
    flex_kernels_take_a_flex_dtype,
];

/// Every name in `dtypes` spells a float dtype, once, and the list is not empty.
fn dtype_names_known(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let names = FloatDtype::KEYS;
    let known = names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let mut out = Vec::new();
    for (spec, _) in cx.ops {
        let Some(list) = spec.dtypes.as_ref() else {
            continue;
        };
        let key = format!("op[{}].dtypes", spec.index);
        if list.value.is_empty() {
            out.push(
                Diagnostic::new(
                    list.span.clone(),
                    key.clone(),
                    "`dtypes` is empty: the op's kernels would take no dtype".to_owned(),
                )
                .page(page::DTYPES)
                .help(format!(
                    "list the float dtypes the op's kernels take ({known}), or remove `dtypes` (its kernels then take every dtype)"
                )),
            );
            continue;
        }
        for (i, name) in list.value.iter().enumerate() {
            let item_key = format!("{key}[{i}]");
            if FloatDtype::from_key(&name.value).is_none() {
                let help = match did_you_mean(&name.value, names) {
                    Some(s) => format!("did you mean \"{s}\"? The float dtypes are {known}"),
                    None => format!("the float dtypes are {known}"),
                };
                out.push(
                    Diagnostic::new(
                        name.span.clone(),
                        item_key,
                        format!("unknown float dtype \"{}\"", name.value),
                    )
                    .page(page::DTYPES)
                    .help(help),
                );
            } else if list.value[..i].iter().any(|n| n.value == name.value) {
                out.push(
                    Diagnostic::new(
                        name.span.clone(),
                        item_key,
                        format!("dtype \"{}\" is listed twice in `dtypes`", name.value),
                    )
                    .page(page::DTYPES)
                    .help("remove the second one"),
                );
            }
        }
    }
    out
}

/// `other_dtypes` is `"error"` or `"composition"`.
fn other_dtypes_value_known(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    unknown_modes(
        cx,
        "other_dtypes",
        |spec| spec.other_dtypes.as_ref(),
        crate::keys::OTHER_DTYPES,
        "write \"error\" (a call with another float dtype fails with a routing error naming the op, the input and the dtype) or \"composition\" (it runs the op's composition)",
        page::DTYPES,
    )
}

/// `dtypes` chooses between the op's kernels and what runs for other dtypes: it needs a float
/// input to read the dtype of, kernels of the op's own (not a composite op), a sync op, and the
/// fallback `other_dtypes` names.
fn dtypes_keys_apply(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (spec, op) in cx.ops {
        let diagnostic = |span: std::ops::Range<usize>, key: &str, message: String, help: &str| {
            Diagnostic::new(span, format!("op[{}].{key}", spec.index), message)
                .page(page::DTYPES)
                .help(help)
        };
        let why = why_no_dtypes(op);
        let Some(list) = spec.dtypes.as_ref() else {
            if let Some(other) = spec.other_dtypes.as_ref() {
                let help = match &why {
                    Some((why, _, _)) => format!("remove `other_dtypes`: the op {why}, so it takes no `dtypes` either"),
                    None => "declare the dtypes the op's kernels take (`dtypes = [\"f32\", \"f16\", \"bf16\"]`), or remove `other_dtypes`".to_owned(),
                };
                out.push(diagnostic(
                    other.span.clone(),
                    "other_dtypes",
                    format!(
                        "op `{}` has `other_dtypes` but no `dtypes`: its kernels take every dtype, so there is no other dtype",
                        op.name
                    ),
                    &help,
                ));
            }
            continue;
        };
        // The fix for `dtypes` on such an op also removes `other_dtypes`, which needs `dtypes`.
        let remove = if spec.other_dtypes.is_some() {
            "remove `dtypes` and `other_dtypes`"
        } else {
            "remove `dtypes`"
        };
        if let Some((_, message, more)) = why {
            let help = format!("{remove}{more}");
            out.push(diagnostic(list.span.clone(), "dtypes", message, &help));
        } else if let Some(other) = spec.other_dtypes.as_ref()
            && other.value == "composition"
            && op.composition.is_none()
        {
            out.push(diagnostic(
                other.span.clone(),
                "other_dtypes",
                format!(
                    "op `{}` runs its composition for other dtypes, but has no `composition`",
                    op.name
                ),
                "add `composition = \"path::to::fn\"` (the op written with backend primitives), or write `other_dtypes = \"error\"` to refuse other dtypes with a routing error",
            ));
        }
    }
    out
}

/// Why `op` can take no `dtypes`, if it cannot: what it is (a clause of `other_dtypes`' help),
/// the error on its `dtypes`, and what the help to remove them adds.
fn why_no_dtypes(op: &Op) -> Option<(&'static str, String, &'static str)> {
    let name = &op.name;
    if op.composite.is_some() {
        Some((
            "is composite (its composition runs in every dtype)",
            format!(
                "op `{name}` is composite: its composition runs on every backend in every dtype, so `dtypes` has no kernel to describe"
            ),
            "",
        ))
    } else if !op.has_float_input() {
        Some((
            "has no float tensor input to route by",
            format!(
                "op `{name}` has no float tensor input, so no call has a float dtype for `dtypes` to route by"
            ),
            "",
        ))
    } else if op.asynchronous {
        Some((
            "is async (routing by dtype is not supported for async ops)",
            format!(
                "op `{name}` is async, and routing by dtype is not supported for async ops yet"
            ),
            ", and have the op's kernels handle (or convert) every dtype they are given",
        ))
    } else {
        None
    }
}

/// Flex stores no `flex32`: an op routed to Flex whose `dtypes` list no other dtype would
/// never run its Flex kernel (and its op check could call it in no dtype).
fn flex_kernels_take_a_flex_dtype(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (spec, op) in cx.ops {
        let Some(list) = spec.dtypes.as_ref() else {
            continue;
        };
        let on_flex = op
            .backends
            .iter()
            .any(|b| b.name == crate::ir::BackendId::Flex);
        let only_flex32 = !list.value.is_empty()
            && list
                .value
                .iter()
                .all(|n| FloatDtype::from_key(&n.value) == Some(FloatDtype::Flex32));
        if on_flex && only_flex32 && op.composite.is_none() {
            out.push(
                Diagnostic::new(
                    list.span.clone(),
                    format!("op[{}].dtypes", spec.index),
                    format!(
                        "op `{}` is routed to Flex, whose tensors are never `flex32`, and its kernels take `flex32` only: its Flex kernel would never run",
                        op.name
                    ),
                )
                .page(page::DTYPES)
                .help("add a dtype Flex stores to `dtypes` (e.g. `dtypes = [\"f32\", \"flex32\"]`), or route the op to `Cube` only (`backends = [\"Cube\"]`)"),
            );
        }
    }
    out
}

//! Output metadata that nothing reads: `dtype` without `shape` (the deferred `Fusion<B>`
//! operation and the Remote operation read both), and `shape`/`dtype` on a field of a type no
//! op returns (only an op's outputs declare their metadata). Each is refused at the key, so no
//! key is accepted without effect.

use super::context::{Context, ManifestRule, example_input};
use crate::diag::{Diagnostic, page};
use crate::ir::{FusionImpl, Output, RemoteImpl};
use crate::model::{ArgSpec, MemberSpec, OutputSpec, TensorSpec};

/// The rules about metadata keys without effect, checked with the other manifest rules.
pub(super) const MANIFEST_RULES: &[ManifestRule] = &[
    dtype_needs_shape,
    field_metadata_returned,
    dtype_function_read,
];

/// Every tensor spec of `output`, with its key.
fn output_tensors<'a>(
    output: &'a OutputSpec,
    key: String,
    acc: &mut Vec<(String, &'a TensorSpec)>,
) {
    match output {
        OutputSpec::Single {
            ty: ArgSpec::Tensor(t),
            ..
        } => acc.push((key, t)),
        OutputSpec::Single { .. } => {}
        OutputSpec::Tuple { items, .. } => {
            for (i, item) in items.iter().enumerate() {
                output_tensors(item, format!("{key}[{i}]"), acc);
            }
        }
    }
}

/// Every member of a `[[type]]` (struct fields and variant fields), with its key.
fn type_members<'a>(cx: &Context<'a, '_>) -> Vec<(String, Option<&'a str>, &'a MemberSpec)> {
    let mut out = Vec::new();
    for ty in &cx.manifest.types {
        let name = ty.name.as_ref().map(|n| n.value.as_str());
        for (i, m) in ty.fields.iter().flat_map(|f| f.value.iter()).enumerate() {
            out.push((format!("type[{}].fields[{i}]", ty.index), name, m));
        }
        for (v, variant) in ty.variants.iter().flat_map(|v| v.value.iter()).enumerate() {
            for (i, m) in variant
                .fields
                .iter()
                .flat_map(|f| f.value.iter())
                .enumerate()
            {
                out.push((
                    format!("type[{}].variants[{v}].fields[{i}]", ty.index),
                    name,
                    m,
                ));
            }
        }
    }
    out
}

/// An output's (or a field's) `dtype` comes with its `shape`: what reads one reads both.
fn dtype_needs_shape(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    // Each tensor with the input name its help's example uses.
    let mut tensors: Vec<(String, &TensorSpec, &str)> = Vec::new();
    for (spec, op) in cx.ops {
        // An op with a declared-type input that does not run on Remote as one operation is
        // told to remove its output metadata altogether (`declared_inputs_have_no_metadata`):
        // "add `shape`" here would contradict it.
        let declared_input = op
            .inputs
            .iter()
            .any(|i| matches!(i.arg, crate::ir::Arg::Declared { .. }));
        if declared_input && op.remote != RemoteImpl::Kernel {
            continue;
        }
        if let Some(output) = &spec.output {
            let mut found = Vec::new();
            output_tensors(output, format!("op[{}].output", spec.index), &mut found);
            tensors.extend(found.into_iter().map(|(k, t)| (k, t, example_input(op))));
        }
    }
    // (A field of a type no op returns gets `field_metadata_returned`'s error instead.)
    let returned = returned_types(cx);
    for (key, ty, member) in type_members(cx) {
        // (Metadata in an enum variant has an error of its own.)
        if let Some(ArgSpec::Tensor(t)) = &member.ty
            && !key.contains(".variants[")
            && let Some(ty) = ty.filter(|ty| returned.iter().any(|r| r == ty))
        {
            let returning = cx
                .ops
                .iter()
                .find(|(_, op)| matches!(&op.output, Output::Declared { name, .. } if name == ty));
            tensors.push((key, t, returning.map_or("x", |(_, op)| example_input(op))));
        }
    }
    tensors
        .into_iter()
        .filter_map(|(key, t, x)| {
            let meta = t.meta.as_ref()?;
            let dtype = meta.dtype.as_ref().filter(|_| meta.shape.is_none())?;
            Some(
                Diagnostic::new(
                    dtype.span.clone(),
                    format!("{key}.dtype"),
                    "`dtype` without `shape` changes nothing: the deferred `Fusion<B>` operation and the Remote operation that read output metadata need both",
                )
                .page(page::OUTPUT_METADATA)
                .help(format!("add `shape` beside it (an input's name, e.g. `shape = \"{x}\"`, or a function path), or remove `dtype`")),
            )
        })
        .collect()
}

/// The names of the declared types some op's `output` names (whether or not the op lowered),
/// nested ones included.
fn returned_types(cx: &Context<'_, '_>) -> Vec<String> {
    fn named<'a>(output: &'a OutputSpec, acc: &mut Vec<&'a str>) {
        match output {
            OutputSpec::Single {
                ty: ArgSpec::Plain(name),
                ..
            } => acc.push(name.value.trim()),
            OutputSpec::Single { .. } => {}
            OutputSpec::Tuple { items, .. } => items.iter().for_each(|o| named(o, acc)),
        }
    }
    let mut names = Vec::new();
    for spec in &cx.manifest.ops {
        if let Some(output) = &spec.output {
            named(output, &mut names);
        }
    }
    let mut returned: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    // Types inside returned types, to any depth.
    let mut i = 0;
    while i < returned.len() {
        let current = returned[i].clone();
        for ty in &cx.manifest.types {
            if ty.name.as_ref().is_none_or(|n| n.value != current) {
                continue;
            }
            let fields = ty.fields.iter().flat_map(|f| f.value.iter());
            let variant_fields = ty
                .variants
                .iter()
                .flat_map(|v| v.value.iter())
                .flat_map(|v| v.fields.iter().flat_map(|f| f.value.iter()));
            for m in fields.chain(variant_fields) {
                if let Some(ArgSpec::Plain(inner)) = &m.ty
                    && !returned.iter().any(|r| r == inner.value.trim())
                {
                    returned.push(inner.value.trim().to_owned());
                }
            }
        }
        i += 1;
    }
    returned
}

/// A field's `shape` and `dtype` are what an op returning its type declares: on a type no op
/// returns, nothing reads them.
fn field_metadata_returned(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let returned = returned_types(cx);
    let mut out = Vec::new();
    for (key, ty, member) in type_members(cx) {
        let Some(ty) = ty else { continue };
        if returned.iter().any(|r| r == ty) {
            continue;
        }
        let Some(ArgSpec::Tensor(t)) = &member.ty else {
            continue;
        };
        let Some(meta) = &t.meta else { continue };
        for (which, value) in [("shape", &meta.shape), ("dtype", &meta.dtype)] {
            let Some(value) = value else { continue };
            out.push(
                Diagnostic::new(
                    value.span.clone(),
                    format!("{key}.{which}"),
                    format!("no op returns `{ty}`, and a field's `{which}` is what an op returning its type declares about its output: here it changes nothing"),
                )
                .page(page::DECLARED_TYPE)
                .help(if which == "shape" {
                    "remove `shape` (an input's shape is checked by a shape contract on the op's input instead)".to_owned()
                } else {
                    "remove `dtype`".to_owned()
                }),
            );
        }
    }
    out
}

/// A `dtype` function is called by the deferred `Fusion<B>` operation and the Remote operation
/// only (the op check verifies an input's dtype or the default, but cannot call a function
/// with each call's dtypes): on an op that runs as neither, nothing calls it.
fn dtype_function_read(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (spec, op) in cx.ops {
        if op.fusion == FusionImpl::Lazy || op.remote == RemoteImpl::Kernel {
            continue;
        }
        let Some(output) = &spec.output else { continue };
        let mut found = Vec::new();
        output_tensors(output, format!("op[{}].output", spec.index), &mut found);
        for (key, t) in found {
            // (Without `shape`, `dtype_needs_shape` refuses it.)
            let Some(dtype) = t
                .meta
                .as_ref()
                .filter(|m| m.shape.is_some())
                .and_then(|m| m.dtype.as_ref())
            else {
                continue;
            };
            if !dtype.value.contains("::") {
                continue;
            }
            let x = example_input(op);
            out.push(
                Diagnostic::new(
                    dtype.span.clone(),
                    format!("{key}.dtype"),
                    format!(
                        "op `{}` runs neither as one deferred operation on `Fusion<B>` nor as one operation on Remote, the only callers of a `dtype` function: this one is never called",
                        op.name
                    ),
                )
                .page(page::OUTPUT_METADATA)
                .help(format!(
                    "name the input whose dtype the output has (e.g. `dtype = \"{x}\"`), which the op check verifies, or remove `dtype`"
                )),
            );
        }
    }
    out
}

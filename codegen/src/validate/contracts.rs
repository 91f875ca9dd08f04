//! The rules about shapes: shape contracts that name inputs which exist and can hold together,
//! output metadata (`shape`, `dtype`) that resolves, and the outputs an op with a kernel of
//! its own on Cube must declare to run lazily on `Fusion<B>`.

use super::context::{Context, ManifestRule};
use crate::diag::did_you_mean;
use crate::diag::{Diagnostic, page};
use crate::ir::{
    Arg, BackendId, Container, FusionImpl, Input, MetaSource, Op, Output, Rank, RemoteImpl,
    RouteBy, ShapeRule, TensorArg, TensorKind,
};
use crate::model::{ArgSpec, Manifest, MetaSpec, OpSpec, OutputSpec, ShapeSpec, Sp};

/// The rules of this module, in the order they are checked (after
/// [`super::generated_names`]'s).
pub(super) const MANIFEST_RULES: &[ManifestRule] = &[
    shape_contracts_resolve,
    shape_contracts_can_hold,
    output_metadata_resolves,
    cube_kernels_declare_outputs,
];

/// The `shape` table of input `i` of `spec`, with its spans.
fn shape_spec(spec: &OpSpec, i: usize) -> Option<&Sp<ShapeSpec>> {
    match &spec.inputs.as_ref()?.value.get(i)?.ty {
        Some(ArgSpec::Tensor(t)) => t.shape.as_deref(),
        _ => None,
    }
}

/// The tensor an input carries, when it is a single tensor or an `Option` (what a shape
/// contract can relate).
fn contract_tensor(input: &Input) -> Option<&TensorArg> {
    match &input.arg {
        Arg::Tensor(t) if t.container != Container::Vec => Some(t),
        _ => None,
    }
}

/// A shape contract relates a single (or optional) tensor input to another one of the same op.
fn shape_contracts_resolve(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (spec, op) in cx.ops {
        for (i, input) in op.inputs.iter().enumerate() {
            let (Some(contract), Some(sp)) = (&input.shape, shape_spec(spec, i)) else {
                continue;
            };
            let key = format!(
                "op[{}].inputs[{i}].shape.{}",
                spec.index,
                contract.rule.key()
            );
            let others: Vec<&str> = op
                .inputs
                .iter()
                .filter(|o| o.name != input.name && contract_tensor(o).is_some())
                .map(|o| o.name.as_str())
                .collect();
            let name_another = || match others.as_slice() {
                [] => format!(
                    "op `{}` has no other single tensor input for `{}` to relate to: remove `shape`",
                    op.name, input.name
                ),
                _ => format!("name another tensor input: {}", others.join(", ")),
            };
            if contract_tensor(input).is_none() {
                out.push(
                    Diagnostic::new(
                        sp.value.rule.span.clone(),
                        key,
                        format!(
                            "a shape contract cannot apply to `{}`, a `vec` of tensors",
                            input.name
                        ),
                    )
                    .help("a contract relates one tensor (or an `Option`) to another: remove `shape` and check the elements in the kernel"),
                );
                continue;
            }
            let of = &sp.value.of;
            let (message, help) = match op.inputs.iter().find(|o| o.name == contract.of) {
                None if contract.of.is_empty() => (
                    format!(
                        "the shape contract of `{}` names no input (an empty name)",
                        input.name
                    ),
                    name_another(),
                ),
                None => (
                    format!("`{}` is not an input of op `{}`", contract.of, op.name),
                    match did_you_mean(&contract.of, &others) {
                        Some(close) => format!(
                            "did you mean `{close}`? tensor inputs: {}",
                            others.join(", ")
                        ),
                        None => name_another(),
                    },
                ),
                Some(o) if o.name == input.name => (
                    format!(
                        "the shape contract of `{}` names `{}` itself",
                        input.name, o.name
                    ),
                    name_another(),
                ),
                Some(o) if !matches!(o.arg, Arg::Tensor(_)) => (
                    format!("`{}` is not a tensor input, so it has no shape", o.name),
                    name_another(),
                ),
                Some(o) if contract_tensor(o).is_none() => (
                    format!(
                        "`{}` is a `vec` of tensors; a shape contract relates to one tensor or an `Option`",
                        o.name
                    ),
                    name_another(),
                ),
                Some(_) => continue,
            };
            out.push(Diagnostic::new(of.span.clone(), key, message).help(help));
        }
    }
    out
}

/// A rank as the manifest declares it, for messages.
fn rank_text(rank: &Rank) -> String {
    match rank {
        Rank::Fixed(n) => format!("`dims = {n}`"),
        Rank::Generic(g) => format!("rank `{g}`"),
    }
}

/// A shape contract must be able to hold for the ranks the inputs declare: generated code that
/// refuses every call is a manifest mistake.
fn shape_contracts_can_hold(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (spec, op) in cx.ops {
        for (i, input) in op.inputs.iter().enumerate() {
            let (Some(contract), Some(sp)) = (&input.shape, shape_spec(spec, i)) else {
                continue;
            };
            let Some(this) = contract_tensor(input) else {
                continue;
            };
            let Some(other) = op
                .inputs
                .iter()
                .find(|o| o.name == contract.of && o.name != input.name)
                .and_then(contract_tensor)
            else {
                continue;
            };
            let (name, of) = (&input.name, &contract.of);
            let key = format!(
                "op[{}].inputs[{i}].shape.{}",
                spec.index,
                contract.rule.key()
            );
            let problem = match (contract.rule, &this.rank, &other.rank) {
                (
                    ShapeRule::SameAs | ShapeRule::BroadcastTo | ShapeRule::BroadcastWith,
                    Rank::Fixed(a),
                    Rank::Fixed(b),
                ) if a != b => Some((
                    format!(
                        "`{}` needs `{name}` and `{of}` to have one rank, but `{name}` has `dims = {a}` and `{of}` `dims = {b}`",
                        contract.rule.key()
                    ),
                    "give both the same `dims` (or a shared rank name such as \"D\")".to_owned(),
                )),
                (ShapeRule::LastDimOf, rank, _) if *rank != Rank::Fixed(1) => Some((
                    format!(
                        "`last_dim_of` gives `{name}` one dimension, but it is declared with {}",
                        rank_text(rank)
                    ),
                    format!("declare `dims = 1` on `{name}`"),
                )),
                (ShapeRule::LeadingDimsOf, _, Rank::Fixed(1)) => Some((
                    format!(
                        "`leading_dims_of` takes the dimensions of `{of}` without its last one, but `{of}` has `dims = 1`, which leaves none"
                    ),
                    format!("relate `{name}` to an input of rank 2 or more, or use `same_as`"),
                )),
                (ShapeRule::LeadingDimsOf, Rank::Fixed(a), Rank::Fixed(b)) if a + 1 != *b => {
                    Some((
                        format!(
                            "`leading_dims_of` needs `{name}` to have one dimension fewer than `{of}`, but `{name}` has `dims = {a}` and `{of}` `dims = {b}`"
                        ),
                        format!("declare `dims = {}` on `{name}`", b - 1),
                    ))
                }
                (ShapeRule::LeadingDimsOf, Rank::Generic(a), Rank::Generic(b)) if a == b => Some((
                    format!(
                        "`leading_dims_of` needs `{name}` to have one dimension fewer than `{of}`, but both have rank `{a}`"
                    ),
                    format!(
                        "give `{name}` a rank generic of its own (`dims = \"{other}\"`; each call then checks it is one less than `{of}`'s), or fixed ranks (`dims = 2` on `{of}`, `dims = 1` on `{name}`)",
                        other = if a.as_str() == "E" { "F" } else { "E" }
                    ),
                )),
                _ => None,
            };
            if let Some((message, help)) = problem {
                out.push(Diagnostic::new(sp.value.rule.span.clone(), key, message).help(help));
            }
        }
    }
    out
}

/// Every tensor output of an op with its manifest key (`op[2].output[1]`) and the metadata as
/// written, in output order.
fn tensor_outputs<'a>(
    out: &'a Output,
    spec: Option<&'a OutputSpec>,
    key: String,
    acc: &mut Vec<(String, &'a TensorArg, Option<&'a MetaSpec>)>,
) {
    match (out, spec) {
        (Output::Tensor(t), spec) => {
            let meta = match spec {
                Some(OutputSpec::Single {
                    ty: ArgSpec::Tensor(ts),
                    ..
                }) => ts.meta.as_deref(),
                _ => None,
            };
            acc.push((key, t, meta));
        }
        (Output::Tuple(items), spec) => {
            for (i, item) in items.iter().enumerate() {
                let item_spec = match spec {
                    Some(OutputSpec::Tuple { items, .. }) => items.get(i),
                    _ => None,
                };
                tensor_outputs(item, item_spec, format!("{key}[{i}]"), acc);
            }
        }
        _ => {}
    }
}

/// The tensor fields of the declared types in `out` (struct fields only: an enum's cannot
/// declare metadata), each with its key in the manifest and the metadata written there.
fn declared_outputs<'a>(
    manifest: &'a Manifest,
    out: &'a Output,
    acc: &mut Vec<(String, &'a TensorArg, Option<&'a MetaSpec>)>,
) {
    match out {
        Output::Declared { leaves, .. } => {
            for leaf in leaves.iter().filter(|l| !l.refutable()) {
                let Some(crate::ir::Step::Field { ty, field }) = leaf.path.last() else {
                    continue;
                };
                let found = manifest.types.iter().find_map(|t| {
                    (t.name.as_ref()?.value == *ty).then_some(())?;
                    let fields = t.fields.as_ref()?;
                    fields.value.iter().enumerate().find_map(|(i, f)| {
                        (f.name.as_ref()?.value == *field).then_some(())?;
                        let ArgSpec::Tensor(ts) = f.ty.as_ref()? else {
                            return None;
                        };
                        Some((format!("type[{}].fields[{i}]", t.index), ts.meta.as_deref()))
                    })
                });
                if let Some((key, meta)) = found {
                    acc.push((key, &leaf.tensor, meta));
                }
            }
        }
        Output::Tuple(items) => items
            .iter()
            .for_each(|o| declared_outputs(manifest, o, acc)),
        Output::Unit | Output::Tensor(_) | Output::Plain(_) => {}
    }
}

/// The first output that is not a tensor with its shape and dtype declared: its key and why.
pub(super) fn first_undeclared(out: &Output, key: String) -> Option<(String, String)> {
    match out {
        Output::Unit => Some((key, "it returns nothing".to_owned())),
        Output::Plain(ty) => Some((
            key.clone(),
            format!(
                "`{key}` is a plain `{ty}`, which a deferred operation cannot return before it runs"
            ),
        )),
        Output::Tensor(t) => match (&t.meta.shape, &t.meta.dtype) {
            (Some(_), Some(_)) => None,
            (None, Some(_)) => Some((key.clone(), format!("`{key}` declares no `shape`"))),
            (Some(_), None) => Some((key.clone(), format!("`{key}` declares no `dtype`"))),
            (None, None) => Some((
                key.clone(),
                format!("`{key}` declares neither `shape` nor `dtype`"),
            )),
        },
        Output::Declared {
            name,
            leaves,
            tensors_only,
            ..
        } => {
            if !tensors_only && !leaves.iter().any(|l| l.refutable()) {
                return Some((
                    key.clone(),
                    format!(
                        "`{key}` is declared type `{name}`, which has a plain field, and a deferred operation cannot return a plain value before it runs"
                    ),
                ));
            }
            if let Some(leaf) = leaves.iter().find(|l| l.refutable()) {
                return Some((
                    key.clone(),
                    format!(
                        "`{key}` is declared type `{name}`, whose tensor `{}` is inside an enum variant, which a deferred operation cannot know before it runs",
                        leaf.label()
                    ),
                ));
            }
            let leaf = leaves.iter().find(|l| !l.tensor.meta.complete())?;
            let missing = match (&leaf.tensor.meta.shape, &leaf.tensor.meta.dtype) {
                (None, Some(_)) => "no `shape`",
                (Some(_), None) => "no `dtype`",
                _ => "neither `shape` nor `dtype`",
            };
            Some((
                key.clone(),
                format!(
                    "`{key}` is declared type `{name}`, whose field `{}` declares {missing}",
                    leaf.label()
                ),
            ))
        }
        Output::Tuple(items) => items.iter().enumerate().find_map(|(i, item)| {
            let key = format!("{key}[{i}]");
            match item {
                // (`lower::implementation::lazy_outputs`: a declared struct only on its own.)
                Output::Declared { name, .. } => Some((
                    key.clone(),
                    format!(
                        "`{key}` is declared type `{name}` inside a tuple, which has no lazy form on `Fusion<B>` yet"
                    ),
                )),
                _ => first_undeclared(item, key),
            }
        }),
    }
}

/// An output's `shape` or `dtype` naming an input names a single tensor input of the op, of
/// the output's kind for `dtype`; an `option` or `vec` output's shape comes from a function
/// (which decides how many there are).
fn output_metadata_resolves(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (spec, op) in cx.ops {
        let mut outputs = Vec::new();
        tensor_outputs(
            &op.output,
            spec.output.as_ref(),
            format!("op[{}].output", spec.index),
            &mut outputs,
        );
        // A declared struct's fields declare their metadata in the type: each op returning it
        // must resolve them.
        declared_outputs(cx.manifest, &op.output, &mut outputs);
        let singles: Vec<&str> = op
            .tensor_inputs()
            .filter(|(_, t)| t.container == Container::One)
            .map(|(i, _)| i.name.as_str())
            .collect();
        for (key, tensor, written) in outputs {
            let Some(written) = written else { continue };
            let fields = [
                ("shape", &tensor.meta.shape, &written.shape),
                ("dtype", &tensor.meta.dtype, &written.dtype),
            ];
            for (field, source, text) in fields {
                let (Some(source), Some(text)) = (source, text) else {
                    continue;
                };
                let key = format!("{key}.{field}");
                let diag = |message: String, help: String| {
                    Diagnostic::new(text.span.clone(), key.clone(), message)
                        .page(page::OUTPUT_METADATA)
                        .help(help)
                };
                match source {
                    MetaSource::Input(name) => {
                        if field == "shape" && tensor.container != Container::One {
                            out.push(diag(
                                format!(
                                    "the shape of {} `{}` output cannot be an input's: a function decides how many tensors there are",
                                    if tensor.container == Container::Option { "an" } else { "a" },
                                    container_name(tensor.container)
                                ),
                                format!(
                                    "name a function returning `{}`, e.g. \"crate::meta::{}_shapes\"",
                                    shape_return(tensor.container),
                                    op.name
                                ),
                            ));
                            continue;
                        }
                        let Some(input) = op.inputs.iter().find(|i| i.name == *name) else {
                            let help = match did_you_mean(name, &singles) {
                                Some(close) => format!(
                                    "did you mean `{close}`? single tensor inputs: {}",
                                    singles.join(", ")
                                ),
                                None if singles.is_empty() => format!(
                                    "op `{}` has no single tensor input: name a function path instead",
                                    op.name
                                ),
                                None => format!(
                                    "name a single tensor input ({}) or a function path",
                                    singles.join(", ")
                                ),
                            };
                            out.push(diag(
                                format!("`{name}` is not an input of op `{}`", op.name),
                                help,
                            ));
                            continue;
                        };
                        let Arg::Tensor(t) = &input.arg else {
                            out.push(diag(
                                format!("`{name}` is not a tensor input, so it has no {field}"),
                                "name a tensor input, or a function that computes it from the arguments".to_owned(),
                            ));
                            continue;
                        };
                        if t.container != Container::One {
                            out.push(diag(
                                format!(
                                    "`{name}` is {} `{}` of tensors; only a single tensor input has one {field}",
                                    if t.container == Container::Option { "an" } else { "a" },
                                    container_name(t.container)
                                ),
                                container_help(op, &singles, field),
                            ));
                        } else if field == "shape" && t.rank != tensor.rank {
                            let shown = super::ranks::shown;
                            let dims = match &t.rank {
                                Rank::Fixed(r) => format!("`dims = {r}`"),
                                Rank::Generic(g) => format!("`dims = \"{g}\"`"),
                            };
                            // A declared type's field, or the op's own output.
                            let subject = if key.starts_with("type[") {
                                "the field"
                            } else {
                                "the output"
                            };
                            out.push(diag(
                                format!(
                                    "`{name}` has {}, but {subject} has {}, so it cannot have `{name}`'s shape",
                                    shown(&t.rank),
                                    shown(&tensor.rank)
                                ),
                                format!(
                                    "give {subject} {dims}, as `{name}` has, or name a function that computes its shape, e.g. \"crate::meta::{}_shape\"",
                                    op.name
                                ),
                            ));
                        } else if field == "dtype" && t.kind != tensor.kind {
                            out.push(diag(
                                format!(
                                    "`{name}` is {} {} tensor, but the output is {}, so it cannot have `{name}`'s dtype",
                                    if t.kind == TensorKind::Int { "an" } else { "a" },
                                    t.kind.key(),
                                    tensor.kind.key()
                                ),
                                "write `dtype = \"default\"` (the device's default dtype for the output's kind), name an input of that kind, or a function".to_owned(),
                            ));
                        }
                    }
                    MetaSource::Default if tensor.kind == TensorKind::Quantized => {
                        out.push(diag(
                            "a quantized output has no default dtype (its scheme is its own)"
                                .to_owned(),
                            "name a quantized input whose dtype it has, or a function".to_owned(),
                        ));
                    }
                    MetaSource::Default | MetaSource::Function(_) => {}
                }
            }
        }
    }
    out
}

/// The help when an output's `field` names an `option` or `vec` input: a function, where one is
/// called (by the deferred `Fusion<B>` operation and the Remote operation); else a single
/// tensor input, or no metadata.
fn container_help(op: &Op, singles: &[&str], field: &str) -> String {
    if field != "dtype" || op.fusion == FusionImpl::Lazy || op.remote == RemoteImpl::Kernel {
        return "name a function that computes it from the input specs".to_owned();
    }
    let inputs = if singles.is_empty() {
        String::new()
    } else {
        format!("a single tensor input ({}), ", singles.join(", "))
    };
    format!(
        "name {inputs}or write `dtype = \"default\"`: op `{}` runs neither as one deferred operation on `Fusion<B>` nor as one operation on Remote, the only callers of a `dtype` function",
        op.name
    )
}

fn container_name(container: Container) -> &'static str {
    match container {
        Container::One => "single",
        Container::Option => "option",
        Container::Vec => "vec",
    }
}

/// What a `shape` function returns for an output in `container`.
fn shape_return(container: Container) -> &'static str {
    match container {
        Container::One => "Shape",
        Container::Option => "Option<Shape>",
        Container::Vec => "Vec<Shape>",
    }
}

/// An op routed to `Cube` with its own kernel runs lazily on `Fusion<B>` (what `Cube` is when
/// fusion is on) when every output declares its shape and dtype, and eagerly otherwise; an op
/// whose Cube kernel is its composition says so instead. This reports the ops that can do
/// neither: a declared type among the inputs or outputs, a quantized tensor, no stream.
fn cube_kernels_declare_outputs(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (spec, op) in cx.ops {
        let on_cube = op.backends.iter().any(|b| b.name == BackendId::Cube);
        // An op nothing can route is reported as that.
        let unroutable = matches!(op.route_by, RouteBy::Fixed(_)) && op.backends.len() > 1;
        // (An async op never runs lazily: `super::asynchrony` reports one without a composition.)
        // (An op that runs eagerly there gets a warning instead: `super::fusion`.)
        if !on_cube
            || unroutable
            || op.composite.is_some()
            || op.composition.is_some()
            || op.asynchronous
            || op.fusion == FusionImpl::Eager
        {
            continue;
        }
        let base = format!("op[{}].output", spec.index);
        let declared_input = op
            .inputs
            .iter()
            .enumerate()
            .find_map(|(i, input)| match &input.arg {
                Arg::Declared { name, .. } => Some((i, name)),
                _ => None,
            });
        if let Some((i, name)) = declared_input {
            // Output metadata would not help: only a composition runs such an op on Cube.
            let at = spec
                .inputs
                .as_ref()
                .and_then(|inputs| inputs.value.get(i))
                .map(|input| input.span.clone());
            out.push(declared_on_cube(
                spec,
                op,
                at,
                format!("op[{}].inputs[{i}]", spec.index),
                format!(
                    "input `{}` is declared type `{name}`, which has no lazy form on `Fusion<B>` yet",
                    op.inputs[i].name
                ),
            ));
            continue;
        }
        let problem = first_undeclared(&op.output, base.clone());
        if let Some((key, why)) = &problem
            && let Some((at, true)) = spec
                .output
                .as_ref()
                .and_then(|o| output_element(o, &op.output, &key[base.len()..]))
        {
            out.push(declared_on_cube(
                spec,
                op,
                Some(at),
                key.clone(),
                why.clone(),
            ));
            continue;
        }
        let stream = matches!(op.route_by, RouteBy::Fixed(_));
        let (key, why) = match (problem, stream) {
            (Some(problem), _) => problem,
            (None, true) => (
                format!("op[{}].inputs", spec.index),
                "it has neither a tensor nor a device input to name the fusion stream".to_owned(),
            ),
            (None, false) => continue,
        };
        // At the output (or the inputs, for the stream), else the op's name.
        let at = if key.ends_with("inputs") {
            spec.inputs.as_ref().map(|i| i.span.clone())
        } else {
            spec.output.as_ref().map(OutputSpec::span)
        };
        let span = at.unwrap_or_else(|| spec.name_span());
        let help = if key.ends_with("inputs") {
            "add a `{ name = \"device\", device = true }` input (the device names the stream), or `composition = \"path::to::fn\"` when the op's Cube kernel is its composition".to_owned()
        } else {
            format!(
                "give every tensor output `shape` and `dtype` (an input's name, e.g. `shape = \"{x}\", dtype = \"{x}\"`, or a function path; `dtype = \"default\"` for the device's default), or `composition = \"path::to::fn\"` when the op's Cube kernel is its composition",
                x = super::context::example_input(op)
            )
        };
        out.push(
            Diagnostic::new(
                span,
                key,
                format!(
                    "op `{}` is routed to Cube with a kernel of its own, but cannot run lazily on `Fusion<B>` (what `Cube` is when fusion is on): {why}",
                    op.name
                ),
            )
            .page(page::CUBE_METADATA)
            .help(help),
        );
    }
    out
}

/// The error for an op routed to Cube with a kernel of its own and a declared type among its
/// inputs or outputs that has no lazy form: it needs a `composition`, or (a struct of tensors
/// only, as an output) metadata on the type's fields.
fn declared_on_cube(
    spec: &OpSpec,
    op: &Op,
    at: Option<std::ops::Range<usize>>,
    key: String,
    why: String,
) -> Diagnostic {
    let span = at.unwrap_or_else(|| spec.name_span());
    Diagnostic::new(
        span,
        key,
        format!(
            "op `{}` is routed to Cube with a kernel of its own, but cannot run lazily on `Fusion<B>` (what `Cube` is when fusion is on): {why}",
            op.name
        ),
    )
    .page(page::CUBE_METADATA)
    .help(if why.contains("declares") {
        // A struct of tensors only has a lazy form once its fields declare their metadata.
        format!(
            "give every tensor field of the type `shape` and `dtype` (in its `[[type]]` entry, e.g. `shape = \"{x}\", dtype = \"{x}\"`), or give the op `composition = \"path::to::{}\"`",
            op.name,
            x = super::context::example_input(op)
        )
    } else {
        format!(
            "give the op `composition = \"path::to::{}\"` (its Cube kernel is then its composition, which Burn fuses), or remove `Cube` from its `backends`",
            op.name
        )
    })
}

/// The span of the output element at `path` (`[1][0]`, empty for the whole output), and
/// whether it is a declared type.
fn output_element(
    spec: &OutputSpec,
    out: &Output,
    path: &str,
) -> Option<(std::ops::Range<usize>, bool)> {
    let Some(rest) = path.strip_prefix('[') else {
        return Some((spec.span(), matches!(out, Output::Declared { .. })));
    };
    let (index, rest) = rest.split_once(']')?;
    let index: usize = index.parse().ok()?;
    match (spec, out) {
        (OutputSpec::Tuple { items, .. }, Output::Tuple(outs)) => {
            output_element(items.get(index)?, outs.get(index)?, rest)
        }
        _ => None,
    }
}

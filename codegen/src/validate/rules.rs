//! The rules that relate manifest values to each other, one named function each. Lowering
//! ([`super::lower`]) has already turned each value into its IR form; these look at the whole.

use std::collections::BTreeMap;
use std::ops::Range;

use super::lower::{Routing, assign_groups};
use crate::diag::did_you_mean;
use crate::diag::{Diagnostic, LineIndex};
use crate::ir::{
    Arg, Backend, Container, Input, Op, Output, Policy, Rank, RouteBy, ShapeRule, TensorArg,
    TensorKind, TraitGroup,
};
use crate::model::{ArgSpec, Manifest, OpSpec, ShapeSpec, Sp};
use crate::names;

/// A rule about one op.
pub(super) type OpRule = fn(&OpSpec, &Op, &[Backend]) -> Option<Diagnostic>;

/// Every rule about one op, in the order they are checked.
pub(super) const OP_RULES: &[OpRule] = &[policy_needs_float_input, op_is_routable];

/// What manifest-wide rules see.
pub(super) struct Context<'a, 'm> {
    pub manifest: &'a Manifest,
    pub ops: &'a [(&'m OpSpec, Op)],
    pub lines: &'a LineIndex,
    pub routing: Option<&'a Routing>,
    /// Span and key of the main trait's name.
    pub trait_key: &'a (Range<usize>, String),
}

/// A rule about the whole manifest.
pub(super) type ManifestRule = fn(&Context<'_, '_>) -> Vec<Diagnostic>;

/// Every manifest-wide rule, in the order they are checked.
pub(super) const MANIFEST_RULES: &[ManifestRule] = &[
    op_names_unique,
    try_names_free,
    autodiff_trait_differs,
    generated_names_distinct,
    ranks_are_not_traits,
    shape_contracts_resolve,
    shape_contracts_can_hold,
];

/// `differentiable` and `detach` act on tracked floats: an op without a float input never sees
/// one.
fn policy_needs_float_input(spec: &OpSpec, op: &Op, _: &[Backend]) -> Option<Diagnostic> {
    let has_float = op.tensor_inputs().any(|(_, t)| t.kind == TensorKind::Float);
    if op.policy == Policy::Reject || has_float {
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
                op.policy.as_str()
            ),
        )
        .help(
            "remove `autodiff` (the default `reject` is exact here), or add a float tensor input",
        ),
    )
}

/// Something must pick the backend: a tensor, the device, or a single backend.
fn op_is_routable(spec: &OpSpec, op: &Op, _: &[Backend]) -> Option<Diagnostic> {
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
        .help(
            "add a tensor input or a `device = true` input to route by, or list exactly one backend (in the op's `backends` or in `routing.backends`)",
        ),
    )
}

/// Op names become trait methods and functions of one module.
fn op_names_unique(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let mut seen: BTreeMap<&str, &Range<usize>> = BTreeMap::new();
    let mut out = Vec::new();
    for spec in &cx.manifest.ops {
        let Some(name) = &spec.name else { continue };
        if let Some(first) = seen.get(name.value.as_str()) {
            let line = cx.lines.line(first.start);
            out.push(
                Diagnostic::new(
                    name.span.clone(),
                    format!("op[{}].name", spec.index),
                    format!(
                        "duplicate op name `{}` (first declared on line {line})",
                        name.value
                    ),
                )
                .help("rename one of the ops; op names become trait methods and must be unique"),
            );
        } else {
            seen.insert(&name.value, &name.span);
        }
    }
    out
}

/// Each op `x` also defines `try_x`: an op of that name would collide with it.
fn try_names_free(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let ops: std::collections::BTreeSet<&str> =
        cx.ops.iter().map(|(_, op)| op.name.as_str()).collect();
    cx.ops
        .iter()
        .filter_map(|(spec, op)| {
            let base = op
                .name
                .strip_prefix("try_")
                .and_then(|base| ops.get(base))?;
            let span = spec
                .name
                .as_ref()
                .map_or(spec.span.clone(), |n| n.span.clone());
            Some(
                Diagnostic::new(
                    span,
                    format!("op[{}].name", spec.index),
                    format!(
                        "op name `{}` collides with the generated `{}` of op `{base}`",
                        op.name,
                        names::try_fn(base)
                    ),
                )
                .help("choose a name that is not `try_` followed by another op's name"),
            )
        })
        .collect()
}

/// The autodiff trait is a second trait: it cannot share the main trait's name.
fn autodiff_trait_differs(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let (Some(routing), Some(a)) = (cx.routing, &cx.manifest.routing.autodiff_trait) else {
        return Vec::new();
    };
    if routing.trait_name != a.value {
        return Vec::new();
    }
    vec![
        Diagnostic::new(
            a.span.clone(),
            "routing.autodiff_trait",
            "`autodiff_trait` must differ from `trait`",
        )
        .help(format!(
            "rename it, e.g. `autodiff_trait = \"{}\"`, or remove the key to use that default",
            names::autodiff_trait(&routing.trait_name)
        )),
    ]
}

/// The ops, each in its trait group, as the IR will have them (`None` without a valid
/// `[routing]`).
fn grouped(cx: &Context<'_, '_>) -> Option<(Vec<Op>, Vec<TraitGroup>)> {
    let routing = cx.routing?;
    let mut ops: Vec<Op> = cx.ops.iter().map(|(_, op)| op.clone()).collect();
    let groups = assign_groups(
        &mut ops,
        &routing.backends,
        &routing.trait_name,
        &routing.autodiff_trait,
    );
    Some((ops, groups))
}

/// The traits (named after `trait`, per backend list and composite) and the `Autodiff<Backend>`
/// aliases share the dispatch module's type namespace: no name twice, and none of the prelude.
fn generated_names_distinct(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let Some((ops, groups)) = grouped(cx) else {
        return Vec::new();
    };
    let mut defined: Vec<String> = Vec::new();
    for (index, group) in groups.iter().enumerate() {
        defined.push(group.name.clone());
        let hand_written = !group.composite
            && ops
                .iter()
                .any(|op| op.group == index && op.policy == Policy::Differentiable);
        if hand_written {
            defined.push(group.autodiff_name.clone());
        }
    }
    // One pair of aliases per backend that serves a differentiable op.
    let mut aliases: Vec<String> = Vec::new();
    for op in ops.iter().filter(|op| op.policy == Policy::Differentiable) {
        for backend in &op.backends {
            for alias in [
                names::autodiff_alias(backend.name),
                names::balanced_alias(backend.name),
            ] {
                if !aliases.contains(&alias) {
                    aliases.push(alias);
                }
            }
        }
    }
    defined.extend(aliases);
    let mut seen = std::collections::BTreeSet::new();
    let Some(clash) = defined.iter().find(|n| !seen.insert(n.as_str())) else {
        return Vec::new();
    };
    // Point at the name the user wrote that produced the clash: `autodiff_trait` when it is
    // the clashing name, else the main trait (every other generated name derives from it).
    let (span, key) = match &cx.manifest.routing.autodiff_trait {
        Some(a) if a.value == *clash => (a.span.clone(), "routing.autodiff_trait".to_owned()),
        _ => cx.trait_key.clone(),
    };
    vec![
        Diagnostic::new(
            span,
            key,
            format!("the generated code would define `{clash}` twice"),
        )
        .help("rename `trait` or `autodiff_trait` so the traits named after them (`...Autodiff`, `...Composite`, `...<Backends>`) and the `Autodiff<Backend>`/`Balanced<Backend>` aliases stay distinct"),
    ]
}

/// A rank generic named like a trait would read as that trait in `Tensor<D>`.
fn ranks_are_not_traits(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let Some((_, groups)) = grouped(cx) else {
        return Vec::new();
    };
    let traits: Vec<&str> = groups
        .iter()
        .flat_map(|g| [g.name.as_str(), g.autodiff_name.as_str()])
        .collect();
    let mut out = Vec::new();
    for (spec, op) in cx.ops {
        let mut ranks: Vec<(String, String, Range<usize>)> = Vec::new();
        for (i, input) in op.inputs.iter().enumerate() {
            if let Arg::Tensor(TensorArg {
                rank: Rank::Generic(g),
                ..
            }) = &input.arg
            {
                // The `dims` value, or the input entry when the rank is the default.
                let span = spec
                    .inputs
                    .as_ref()
                    .and_then(|l| l.value.get(i))
                    .map(|input| match &input.ty {
                        Some(crate::model::ArgSpec::Tensor(t)) => t
                            .dims
                            .as_ref()
                            .map_or(input.span.clone(), |d| d.span.clone()),
                        _ => input.span.clone(),
                    })
                    .unwrap_or(spec.span.clone());
                ranks.push((
                    g.clone(),
                    format!("op[{}].inputs[{i}].dims", spec.index),
                    span,
                ));
            }
        }
        let output_span = spec.output.as_ref().map_or(spec.span.clone(), |o| o.span());
        output_ranks(
            &op.output,
            &format!("op[{}].output", spec.index),
            &mut |g, key| {
                ranks.push((g, key, output_span.clone()));
            },
        );
        for (rank, key, span) in ranks {
            if traits.contains(&rank.as_str()) {
                out.push(
                    Diagnostic::new(
                        span,
                        key,
                        format!("rank name `{rank}` is also the name of a generated trait"),
                    )
                    .help("rename the rank (e.g. `D`, `E`) or the trait"),
                );
            }
        }
    }
    out
}

fn output_ranks(out: &Output, key: &str, acc: &mut dyn FnMut(String, String)) {
    match out {
        Output::Tensor(TensorArg {
            rank: Rank::Generic(g),
            ..
        }) => acc(g.clone(), format!("{key}.dims")),
        Output::Tuple(items) => {
            for (i, o) in items.iter().enumerate() {
                output_ranks(o, &format!("{key}[{i}]"), acc);
            }
        }
        _ => {}
    }
}

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
                    format!("declare `{name}`'s rank with `dims` (one less than `{of}`'s)"),
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

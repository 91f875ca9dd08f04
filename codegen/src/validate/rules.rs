//! The rules that relate manifest values to each other, one named function each. Lowering
//! ([`super::lower`]) has already turned each value into its IR form; these look at the whole.

use std::collections::BTreeMap;
use std::ops::Range;

use super::context::{Context, ManifestRule};
use super::lower::assign_groups;
use crate::diag::did_you_mean;
use crate::diag::{Diagnostic, page};
use crate::ir::{
    Arg, BackendName, Container, FusionImpl, Input, MetaSource, Op, Output, Policy, Rank, RouteBy,
    ShapeRule, TensorArg, TensorKind, TraitGroup,
};
use crate::model::{ArgSpec, Manifest, MetaSpec, OpSpec, OutputSpec, ShapeSpec, Sp};
use crate::names;

/// Every manifest-wide rule of this module, in the order they are checked (the async rules
/// follow, [`super::asynchrony::MANIFEST_RULES`]).
pub(super) const MANIFEST_RULES: &[ManifestRule] = &[
    policy_needs_float_input,
    op_is_routable,
    op_names_unique,
    try_names_free,
    autodiff_trait_differs,
    autodiff_trait_is_generated,
    backward_bounds_are_used,
    generated_names_distinct,
    ranks_are_not_traits,
    shape_contracts_resolve,
    shape_contracts_can_hold,
    output_metadata_resolves,
    cube_kernels_declare_outputs,
    lazy_arguments_are_owned,
    composition_is_not_composite,
    declared_inputs_have_no_metadata,
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
                .page(page::DUPLICATE_OP)
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
            let span = spec.name_span();
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
                .page(page::TRY_COLLISION)
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
        .page(page::AUTODIFF_TRAIT_SAME)
        .help(format!(
            "rename it, e.g. `autodiff_trait = \"{}\"`, or remove the key to use that default",
            names::autodiff_trait(&routing.trait_name)
        )),
    ]
}

/// `autodiff_trait` names the main trait's companion, which holds the hand-written
/// `Autodiff<B, C>` kernels of its differentiable ops: where it has none, the trait is not
/// generated and the key would change nothing.
fn autodiff_trait_is_generated(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let Some(a) = &cx.manifest.routing.autodiff_trait else {
        return Vec::new();
    };
    // Equal to `trait`: `autodiff_trait_differs` says so.
    if cx.routing.is_none_or(|r| r.trait_name == a.value) {
        return Vec::new();
    }
    // With an op that failed to lower, the groups are not known.
    let Some((ops, groups)) = grouped(cx).filter(|_| cx.ops.len() == cx.manifest.ops.len()) else {
        return Vec::new();
    };
    let generated = groups.iter().enumerate().any(|(index, group)| {
        group.autodiff_name == a.value
            && group.needs_autodiff_trait(ops.iter().filter(|op| op.group == index))
    });
    if generated {
        return Vec::new();
    }
    vec![
        Diagnostic::new(
            a.span.clone(),
            "routing.autodiff_trait",
            format!(
                "`autodiff_trait` names a trait that is not generated: no differentiable op on \
                 the default backends has hand-written `Autodiff<B, C>` kernels, so `{}` would \
                 not exist",
                a.value
            ),
        )
        .page(page::ROUTING_KEY_UNUSED)
        .help(
            "remove the key: the trait exists only when a differentiable op on \
             `routing.backends` has hand-written `Autodiff<B, C>` kernels \
             (`backward = \"hand-written\"`, or none of `backward`, `composition`, `composite`)",
        ),
    ]
}

/// `backward_bounds` bounds the backend of the generated `Autodiff<B, C>` implementations of the
/// ops with a declared backward pass: without one, the key would change nothing.
fn backward_bounds_are_used(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let Some(bounds) = &cx.manifest.routing.backward_bounds else {
        return Vec::new();
    };
    if cx.ops.len() < cx.manifest.ops.len() || cx.ops.iter().any(|(_, op)| op.backward.is_some()) {
        return Vec::new();
    }
    vec![
        Diagnostic::new(
            bounds.span.clone(),
            "routing.backward_bounds",
            "`backward_bounds` bounds nothing: no op declares a `backward` pass (formulas or a \
             function), the only generated code these traits bound",
        )
        .page(page::ROUTING_KEY_UNUSED)
        .help(
            "remove the key; list a trait here when a function named by an op's `backward` \
             needs it from the backend",
        ),
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
        if group.needs_autodiff_trait(ops.iter().filter(|op| op.group == index)) {
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
        return declared_names_distinct(cx, &defined);
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
        .page(page::NAME_CLASH)
        .help("rename `trait` or `autodiff_trait` so the traits named after them (`...Autodiff`, `...Composite`, `...<Backends>`) and the `Autodiff<Backend>`/`Balanced<Backend>` aliases stay distinct"),
    ]
}

/// A declared type's names (`Name`, `NamePrimitive`) clash with nothing else generated: the
/// traits, the aliases, the other types' names, the runtime alias.
fn declared_names_distinct(cx: &Context<'_, '_>, defined: &[String]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut taken: Vec<(String, String)> = defined
        .iter()
        .map(|n| (n.clone(), "a generated trait or alias".to_owned()))
        .collect();
    for spec in &cx.manifest.types {
        let Some(name) = &spec.name else { continue };
        let primitive = names::primitive_type(&name.value);
        // A type declared twice is its own error (`type[N].name`), not a clash.
        if taken
            .iter()
            .any(|(n, owner)| *n == name.value && *owner == format!("type `{}`", name.value))
        {
            continue;
        }
        for (generated, what) in [
            (name.value.clone(), format!("type `{}`", name.value)),
            (
                primitive.clone(),
                format!("the primitive of type `{}`", name.value),
            ),
        ] {
            if let Some((_, owner)) = taken.iter().find(|(n, _)| *n == generated) {
                out.push(
                    Diagnostic::new(
                        name.span.clone(),
                        format!("type[{}].name", spec.index),
                        format!("the generated code would define `{generated}` twice: as {what} and as {owner}"),
                    )
                    .help(format!("rename the type; each declared type `Name` also defines `{}`", names::primitive_type("Name"))),
                );
                break;
            }
        }
        taken.push((name.value.clone(), format!("type `{}`", name.value)));
        taken.push((primitive, format!("the primitive of type `{}`", name.value)));
    }
    out
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
                    .page(page::INPUT_NAME_SCOPE)
                    .help(format!(
                        "rename the rank (e.g. `{}`) or the trait",
                        ["D", "E", "F", "R"]
                            .into_iter()
                            .find(|r| !traits.contains(r) && *r != rank)
                            .unwrap_or("R2")
                    )),
                );
            }
        }
    }
    // A declared type's rank generics are the const parameters of its `Tensor<D>`-level form,
    // defined in the module that names the traits (the default rank `D` included).
    for ty in cx.types {
        let Some(spec) = cx
            .manifest
            .types
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.value == ty.name))
        else {
            continue;
        };
        for rank in &ty.ranks {
            if traits.contains(&rank.as_str()) {
                out.push(
                    Diagnostic::new(
                        spec.name.as_ref().map_or(spec.span.clone(), |n| n.span.clone()),
                        format!("type[{}]", spec.index),
                        format!(
                            "rank name `{rank}` of type `{}` is also the name of a generated trait",
                            ty.name
                        ),
                    )
                    .page(page::INPUT_NAME_SCOPE)
                    .help(format!(
                        "rename the trait, or give the type's tensors another rank (`dims = \"{}\"`)",
                        ["E", "F", "R", "D"]
                            .into_iter()
                            .find(|r| !traits.contains(r) && r != rank)
                            .unwrap_or("R2")
                    )),
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
        Output::Tuple(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| first_undeclared(item, format!("{key}[{i}]"))),
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
                                    "`{name}` is a `{}` of tensors; only a single tensor input has one {field}",
                                    container_name(t.container)
                                ),
                                "name a function that computes it from the input specs".to_owned(),
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
        let on_cube = op.backends.iter().any(|b| b.name == BackendName::Cube);
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

/// Output metadata is what the lazy `Fusion<B>` form and the one operation on Remote read; an
/// op with a declared-type input has no lazy form yet, so unless it runs on Remote as one
/// operation, metadata there would be silently unused.
fn declared_inputs_have_no_metadata(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    fn has_meta(out: &Output) -> bool {
        match out {
            Output::Tensor(t) => t.meta.shape.is_some() || t.meta.dtype.is_some(),
            Output::Tuple(items) => items.iter().any(has_meta),
            Output::Unit | Output::Plain(_) | Output::Declared { .. } => false,
        }
    }
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
                        if !op.backends.iter().any(|b| b.name == crate::ir::BackendName::Remote) {
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

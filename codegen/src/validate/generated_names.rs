//! The rules about the names the generated code introduces: op names unique, `try_` twins
//! free, the traits (named after `trait` and `autodiff_trait`, per backend list) and the aliases
//! distinct from each other, from the declared types and from the rank generics; and the
//! routing keys that name or bound generated code only where it is generated.

use std::collections::BTreeMap;
use std::ops::Range;

use super::context::{Context, ManifestRule};
use super::lower::assign_groups;
use crate::diag::{Diagnostic, page};
use crate::ir::{Arg, Op, Output, Policy, Rank, TensorArg, TraitGroup};
use crate::names;

/// The rules of this module, in the order they are checked (after [`super::rules`]'s).
pub(super) const MANIFEST_RULES: &[ManifestRule] = &[
    op_names_unique,
    try_names_free,
    autodiff_trait_differs,
    autodiff_trait_is_generated,
    backward_bounds_are_used,
    generated_names_distinct,
    ranks_are_not_traits,
    types_are_not_ranks,
];

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
    // (`autodiff_trait` equal to `trait` is its own error, `autodiff_trait_differs`.)
    let same_traits = cx
        .routing
        .zip(cx.manifest.routing.autodiff_trait.as_ref())
        .is_some_and(|(routing, a)| routing.trait_name == a.value);
    if same_traits {
        return Vec::new();
    }
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
    for (rank, key, span) in op_ranks(cx) {
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
                    free_rank(cx, &traits)
                )),
            );
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
                        free_rank(cx, &traits)
                    )),
                );
            }
        }
    }
    out
}

/// Every rank generic an op's tensors use (the default `D` of tensors without `dims`
/// included): the rank, the key that gives it, and where.
fn op_ranks(cx: &Context<'_, '_>) -> Vec<(String, String, Range<usize>)> {
    let mut ranks: Vec<(String, String, Range<usize>)> = Vec::new();
    for (spec, op) in cx.ops {
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
    }
    ranks
}

/// Every rank generic of the manifest: the ops' and the declared types'.
fn manifest_ranks(cx: &Context<'_, '_>) -> Vec<String> {
    let mut ranks: Vec<String> = op_ranks(cx).into_iter().map(|(rank, ..)| rank).collect();
    ranks.extend(cx.types.iter().flat_map(|ty| ty.ranks.iter().cloned()));
    ranks
}

/// A rank name to suggest: one no tensor, declared type or name in `avoid` (the generated
/// traits) uses yet.
fn free_rank(cx: &Context<'_, '_>, avoid: &[&str]) -> String {
    let ranks = manifest_ranks(cx);
    ["D", "E", "R", "N", "M", "K"]
        .into_iter()
        .find(|r| {
            !ranks.iter().any(|used| used == r)
                && !avoid.contains(r)
                && !cx.types.iter().any(|ty| ty.name == *r)
        })
        .unwrap_or("R2")
        .to_owned()
}

/// A declared type named like a rank generic (`D`, or any `dims` name of the manifest) is
/// shadowed by that const parameter wherever the rank is in scope: in its own `Tensor<D>`-level
/// form and in every `Tensor<D>` function (`p: D<D>`). (A type's primitive, `NamePrimitive`,
/// cannot clash: rank names are upper case.)
fn types_are_not_ranks(cx: &Context<'_, '_>) -> Vec<Diagnostic> {
    let ranks = manifest_ranks(cx);
    let mut out = Vec::new();
    for spec in &cx.manifest.types {
        let Some(name) = &spec.name else { continue };
        if !ranks.contains(&name.value) {
            continue;
        }
        let rank = &name.value;
        let help = if rank == names::DEFAULT_RANK {
            format!(
                "rename the type: rank generics are in scope across the generated tensor module, and `{rank}` is also the rank of every tensor without `dims`"
            )
        } else {
            format!(
                "rename the type, or the rank (e.g. `dims = \"{}\"`)",
                free_rank(cx, &[])
            )
        };
        out.push(
            Diagnostic::new(
                name.span.clone(),
                format!("type[{}].name", spec.index),
                format!(
                    "type `{rank}` is named like the rank generic `{rank}` of the manifest's tensors, which would shadow it"
                ),
            )
            .page(page::INPUT_NAME_SCOPE)
            .help(help),
        );
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

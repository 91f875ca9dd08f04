//! An op's `[op.check]` table → [`Check`]: what the generated op check passes the op.

use burn_route_core::ShapeRule;

use crate::diag::{Diagnostic, did_you_mean};
use crate::ir::{
    Arg, Check, Container, MemberType, Op, Output, Policy, Rank, Step, TensorArg, TensorKind,
    TypeDef,
};
use crate::model::OpSpec;

/// What a `[op.check]` key names: an input of the op, or a member of a declared-type input by
/// its path (`p.scale`, `fill.From.0`), as routing errors name it.
enum Target<'a> {
    Tensor(&'a TensorArg),
    /// A plain input, and its type as the manifest writes it.
    Plain(&'a str),
    /// The device, or a declared-type input as a whole.
    Other,
    /// A member inside a variant the check does not build: `(enum, variant, built variant)`.
    Unbuilt(String, String, &'a str),
}

/// Every name a `[op.check]` key may use, in input order (a declared input's members after it).
fn targets<'a>(op: &'a Op, types: &'a [TypeDef]) -> Vec<(String, Target<'a>)> {
    let mut out = Vec::new();
    for input in &op.inputs {
        match &input.arg {
            Arg::Tensor(t) => out.push((input.name.clone(), Target::Tensor(t))),
            Arg::Plain(ty) => out.push((input.name.clone(), Target::Plain(ty))),
            Arg::Device => out.push((input.name.clone(), Target::Other)),
            Arg::Declared { name, .. } => {
                out.push((input.name.clone(), Target::Other));
                for (path, member) in crate::ir::members(types, name) {
                    // The check builds one variant of each enum on the way.
                    let unbuilt = path.iter().find_map(|step| match step {
                        Step::Variant { ty, variant, .. } => {
                            let built = crate::ir::checked_variant(types, ty)?;
                            (built.name != *variant)
                                .then(|| (ty.clone(), variant.clone(), built.name.as_str()))
                        }
                        Step::Field { .. } => None,
                    });
                    let target = match (unbuilt, member) {
                        (Some((ty, variant, built)), _) => Target::Unbuilt(ty, variant, built),
                        (None, MemberType::Tensor(t)) => Target::Tensor(t),
                        (None, MemberType::Plain(ty)) => Target::Plain(ty),
                        (None, MemberType::Declared(_)) => Target::Other,
                    };
                    let label = crate::ir::label(&path);
                    out.push((format!("{}.{label}", input.name), target));
                }
            }
        }
    }
    out
}

/// Lowers `spec`'s `check` table for `op` (whose declared types are among `types`).
///
/// # Errors
///
/// Every problem found.
pub(super) fn lower(spec: &OpSpec, op: &Op, types: &[TypeDef]) -> Result<Check, Vec<Diagnostic>> {
    let mut check = Check {
        gradients: true,
        composition: op.composition.is_some() && op.composite.is_none(),
        ..Check::default()
    };
    let Some(table) = &spec.check else {
        check.input_shapes = input_shapes(op, &[]);
        return Ok(check);
    };
    let path = format!("op[{}].check", spec.index);
    if let Some(why) = op.unchecked() {
        return Err(vec![
            Diagnostic::new(
                table.span.clone(),
                path,
                format!(
                    "op `{}` takes a quantized tensor, and {why}: the op check skips the op, so \
                     `check` changes nothing",
                    op.name
                ),
            )
            .help("remove `check`, and test the op by hand"),
        ]);
    }
    let mut diags = Vec::new();
    let targets = targets(op, types);
    // The span of each `shapes` entry that lowered, by name.
    let mut given: Vec<(String, std::ops::Range<usize>)> = Vec::new();
    let find = |key: &str| targets.iter().find(|(n, _)| n == key).map(|(_, t)| t);
    let names: Vec<&str> = targets.iter().map(|(n, _)| n.as_str()).collect();
    // A suggestion is a name of the right kind that the table does not key already (renaming
    // to one it keys would clash).
    let unknown = |key: &crate::model::Sp<String>,
                   sub: &str,
                   what: &str,
                   fits: &dyn Fn(&Target<'_>) -> bool,
                   keyed: &[&str]| {
        let candidates: Vec<&str> = targets
            .iter()
            .filter(|(n, t)| fits(t) && !keyed.contains(&n.as_str()))
            .map(|(n, _)| n.as_str())
            .collect();
        let help = match did_you_mean(&key.value, &candidates) {
            Some(s) => format!("did you mean `{s}`? `{sub}` is keyed by {what}"),
            None => format!("`{sub}` is keyed by {what}: {}", names.join(", ")),
        };
        Diagnostic::new(
            key.span.clone(),
            format!("{path}.{sub}.{}", key.value),
            format!("`{}` is not an input of op `{}`", key.value, op.name),
        )
        .help(help)
    };
    // A key inside a variant the check does not build would be silently unused.
    let unbuilt = |key: &crate::model::Sp<String>, sub: &str, target: &Target<'_>| {
        let Target::Unbuilt(ty, variant, built) = target else {
            return None;
        };
        Some(
            Diagnostic::new(
                key.span.clone(),
                format!("{path}.{sub}.{}", key.value),
                format!(
                    "`{}` is in variant `{variant}` of `{ty}`, which the op check does not build",
                    key.value
                ),
            )
            .help(format!(
                "the op check builds `{ty}::{built}`, its first variant that holds a tensor: name members of that variant, and test `{variant}` by hand"
            )),
        )
    };
    for (key, shapes) in &table.shapes {
        let Some(target) = find(&key.value) else {
            let keyed: Vec<&str> = table.shapes.iter().map(|(k, _)| k.value.as_str()).collect();
            diags.push(unknown(
                key,
                "shapes",
                "tensor input",
                &|t| matches!(t, Target::Tensor(_)),
                &keyed,
            ));
            continue;
        };
        if let Some(d) = unbuilt(key, "shapes", target) {
            diags.push(d);
            continue;
        }
        let key_path = format!("{path}.shapes.{}", key.value);
        let Target::Tensor(t) = target else {
            diags.push(
                Diagnostic::new(
                    key.span.clone(),
                    key_path,
                    format!("`{}` is not a tensor input, so it has no shape", key.value),
                )
                .help("give shapes of tensor inputs; a plain input's value goes in `args`"),
            );
            continue;
        };
        let vec = t.container == Container::Vec;
        if !vec && shapes.value.len() != 1 {
            diags.push(
                Diagnostic::new(
                    shapes.span.clone(),
                    key_path,
                    format!(
                        "`{}` is one tensor: give one shape, such as `[2, 3]`",
                        key.value
                    ),
                )
                .help("keep one shape (an array of shapes is for a `vec` input)"),
            );
            continue;
        }
        let mut ok = true;
        for shape in &shapes.value {
            if shape.iter().any(|d| *d < 0) || shape.is_empty() {
                ok = false;
            }
            if let Rank::Fixed(rank) = t.rank
                && shape.len() != rank
            {
                diags.push(
                    Diagnostic::new(
                        shapes.span.clone(),
                        key_path.clone(),
                        format!(
                            "`{}` has `dims = {rank}`, but this shape has {} dimensions",
                            key.value,
                            shape.len()
                        ),
                    )
                    .help(format!("give a shape of {rank} dimensions")),
                );
                ok = false;
                break;
            }
        }
        if !ok {
            if !diags.iter().any(|d| d.key == key_path) {
                diags.push(
                    Diagnostic::new(
                        shapes.span.clone(),
                        key_path,
                        "a shape is a non-empty array of sizes of 0 or more",
                    )
                    .help("write it like `[2, 3]`"),
                );
            }
            continue;
        }
        given.push((key.value.clone(), shapes.span.clone()));
        check.shapes.push((
            key.value.clone(),
            shapes
                .value
                .iter()
                .map(|s| s.iter().map(|d| usize::try_from(*d).unwrap_or(0)).collect())
                .collect(),
        ));
    }
    if diags.is_empty() {
        diags.extend(shapes_agree(op, &check.shapes, &given, &path));
    }
    for (key, range) in &table.ranges {
        let Some(target) = find(&key.value) else {
            let keyed: Vec<&str> = table.ranges.iter().map(|(k, _)| k.value.as_str()).collect();
            diags.push(unknown(
                key,
                "ranges",
                "float or int tensor input",
                &|t| {
                    matches!(t, Target::Tensor(t) if matches!(t.kind, TensorKind::Float | TensorKind::Int))
                },
                &keyed,
            ));
            continue;
        };
        if let Some(d) = unbuilt(key, "ranges", target) {
            diags.push(d);
            continue;
        }
        let key_path = format!("{path}.ranges.{}", key.value);
        if !matches!(target, Target::Tensor(t) if matches!(t.kind, TensorKind::Float | TensorKind::Int))
        {
            diags.push(
                Diagnostic::new(
                    key.span.clone(),
                    key_path,
                    format!(
                        "`{}` is not a float or int tensor input, so it has no value range",
                        key.value
                    ),
                )
                .help("give ranges of float and int tensor inputs"),
            );
            continue;
        }
        let (lo, hi) = (range.value[0], range.value[1]);
        let int = matches!(target, Target::Tensor(t) if t.kind == TensorKind::Int);
        if let Some((message, help)) = range_problem(&key.value, lo, hi, int) {
            diags.push(Diagnostic::new(range.span.clone(), key_path, message).help(help));
            continue;
        }
        check.ranges.push((key.value.clone(), (lo, hi)));
    }
    for (key, expr) in &table.args {
        let Some(target) = find(&key.value) else {
            let keyed: Vec<&str> = table.args.iter().map(|(k, _)| k.value.as_str()).collect();
            diags.push(unknown(
                key,
                "args",
                "plain input",
                &|t| matches!(t, Target::Plain(_)),
                &keyed,
            ));
            continue;
        };
        if let Some(d) = unbuilt(key, "args", target) {
            diags.push(d);
            continue;
        }
        let key_path = format!("{path}.args.{}", key.value);
        let Target::Plain(ty) = target else {
            diags.push(
                Diagnostic::new(key.span.clone(), key_path, format!("`{}` is not a plain input", key.value))
                    .help("`args` gives values of plain (`type = ...`) inputs; tensors are drawn from `shapes` and `ranges`"),
            );
            continue;
        };
        match syn::parse_str::<syn::Expr>(&expr.value) {
            Ok(parsed) => match super::literal::mismatch(&parsed, ty) {
                Some((message, help)) => diags.push(
                    Diagnostic::new(
                        expr.span.clone(),
                        key_path,
                        format!(
                            "`{}` has type `{ty}`, and its value `{}` {message}",
                            key.value,
                            expr.value.trim()
                        ),
                    )
                    .help(help),
                ),
                None => check
                    .args
                    .push((key.value.clone(), expr.value.trim().to_owned())),
            },
            Err(err) => diags.push(
                Diagnostic::new(
                    expr.span.clone(),
                    key_path,
                    format!("`{}` is not a Rust expression: {err}", expr.value),
                )
                .help("write the argument's value as Rust, e.g. \"0.5\", \"2\" or \"vec![1, 2]\""),
            ),
        }
    }
    // Why the op check compares no gradients of the op, whatever `gradients` says.
    let no_gradients = if op.policy != Policy::Differentiable {
        Some(format!(
            "op `{}` is `{}`, not `differentiable`: the op check compares no gradients of it",
            op.name, op.policy
        ))
    } else if !float_output(&op.output, types) {
        Some(format!(
            "op `{}` returns no float tensor: the op check has no gradient of it to compare",
            op.name
        ))
    } else {
        None
    };
    if let Some(g) = &table.gradients {
        match &no_gradients {
            Some(why) => diags.push(
                Diagnostic::new(
                    g.span.clone(),
                    format!("{path}.gradients"),
                    format!("{why}, so `gradients` changes nothing"),
                )
                .help("remove `gradients` from `check`"),
            ),
            None => check.gradients = g.value,
        }
    }
    if let Some(c) = &table.composition {
        if op.composition.is_none() || op.composite.is_some() {
            diags.push(
                Diagnostic::new(c.span.clone(), format!("{path}.composition"), format!("op `{}` has no `composition` (besides its kernels) to compare its kernels with", op.name))
                    .help(if c.value { "remove `composition` from `check`, or give the op a `composition`" } else { "remove `composition` from `check`: without a `composition` the op check compares nothing with it already" }),
            );
        }
        check.composition &= c.value;
    }
    if let Some(t) = &table.tolerance {
        let why = no_gradients.clone().or_else(|| {
            (!check.gradients)
                .then(|| "`gradients = false` turns the gradient check off".to_owned())
        });
        if let Some(why) = why {
            diags.push(
                Diagnostic::new(
                    t.span.clone(),
                    format!("{path}.tolerance"),
                    format!(
                        "{why}, and `tolerance` is the gradient check's, so it changes nothing"
                    ),
                )
                .help(if float_output(&op.output, types) {
                    "remove `tolerance` (the float outputs' values are compared within `value_tolerance`)"
                } else {
                    "remove `tolerance`"
                }),
            );
        } else if t.value.is_finite() && t.value > 0.0 {
            check.tolerance = Some(t.value);
        } else {
            diags.push(
                Diagnostic::new(
                    t.span.clone(),
                    format!("{path}.tolerance"),
                    format!("tolerance {} is not a positive number", t.value),
                )
                .help("write a relative tolerance such as `1e-2` (the gradient check's: with `gradients = false`, remove `tolerance` instead)"),
            );
        }
    }
    if let Some(t) = &table.value_tolerance {
        value_tolerance(op, types, t, &path, &mut check, &mut diags);
    }
    if diags.is_empty() {
        check.input_shapes = input_shapes(op, &check.shapes);
        Ok(check)
    } else {
        Err(diags)
    }
}

/// The shape each tensor input of the op check gets (one per element for a `vec` input):
/// `[op.check] shapes`, else one its shape contract allows against the other input's, else that
/// of the first input of the same rank (generic or fixed) whose shape is given, else
/// `[2, 3, ..]` of its rank (a generic rank is 2).
pub(crate) fn input_shapes(
    op: &Op,
    given: &[(String, Vec<Vec<usize>>)],
) -> Vec<Option<Vec<Vec<usize>>>> {
    let base = |rank: usize| -> Vec<usize> { (0..rank).map(|i| i + 2).collect() };
    let mut out: Vec<Option<Vec<Vec<usize>>>> = vec![None; op.inputs.len()];
    for (i, input) in op.inputs.iter().enumerate() {
        if let Some((_, s)) = given.iter().find(|(n, _)| n == &input.name) {
            out[i] = Some(s.clone());
        }
    }
    // The shape of the first input of the same rank (the same generic, or the same fixed rank)
    // whose shape is given: inputs without a contract between them are most often combined
    // element by element.
    let same_rank_shape = |rank: &Rank| -> Option<Vec<usize>> {
        op.inputs.iter().find_map(|input| match &input.arg {
            Arg::Tensor(t) if t.rank == *rank => given
                .iter()
                .find(|(n, _)| n == &input.name)
                .and_then(|(_, s)| s.first().cloned()),
            _ => None,
        })
    };
    // Contracts refer to other inputs: resolve in rounds. Contracts that refer to each other
    // in a cycle (`a` the same as `b`, `b` the same as `a`) resolve none of their inputs: the
    // cycle's first input then gets the shape of an input without a contract, and the others
    // follow it.
    let mut stuck = false;
    for _ in 0..=2 * op.inputs.len() {
        // A round after one that resolved nothing starts the first cycle left.
        let mut cycle_start = std::mem::take(&mut stuck);
        let mut progressed = false;
        for (i, input) in op.inputs.iter().enumerate() {
            if out[i].is_some() {
                continue;
            }
            let Arg::Tensor(t) = &input.arg else { continue };
            let rank = match t.rank {
                Rank::Fixed(r) => r,
                Rank::Generic(_) => 2,
            };
            let unconstrained = || Some(same_rank_shape(&t.rank).unwrap_or_else(|| base(rank)));
            let shape = match &input.shape {
                None => unconstrained(),
                Some(_) if std::mem::take(&mut cycle_start) => unconstrained(),
                Some(c) => {
                    let other = op.inputs.iter().position(|o| o.name == c.of);
                    other
                        .and_then(|o| out[o].as_ref())
                        .and_then(|s| s.first())
                        .map(|of| match c.rule {
                            ShapeRule::SameAs
                            | ShapeRule::BroadcastTo
                            | ShapeRule::BroadcastWith => of.clone(),
                            ShapeRule::LastDimOf => vec![*of.last().unwrap_or(&1)],
                            ShapeRule::LeadingDimsOf => of[..of.len().saturating_sub(1)].to_vec(),
                        })
                }
            };
            if let Some(shape) = shape {
                let n = if t.container == Container::Vec { 2 } else { 1 };
                out[i] = Some(vec![shape; n]);
                progressed = true;
            }
        }
        stuck = !progressed;
    }
    out
}

fn shown(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// `[op.check] shapes` describe a call the routing accepts: the shapes the check gives its tensor
/// inputs meet every shape contract, and tensors sharing a rank generic (the elements of a `vec`
/// input included) have the same rank. A check that breaks them would test a call that cannot
/// happen (the routing refuses it, or it does not type-check).
fn shapes_agree(
    op: &Op,
    shapes: &[(String, Vec<Vec<usize>>)],
    given: &[(String, std::ops::Range<usize>)],
    path: &str,
) -> Vec<Diagnostic> {
    let mut diags = Vec::new();
    let span_of = |name: &str| {
        given
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s.clone())
    };
    let resolved = input_shapes(op, shapes);
    let shape_of = |name: &str| {
        op.inputs
            .iter()
            .position(|i| i.name == name)
            .and_then(|i| resolved[i].as_ref())
            .and_then(|s| s.first())
    };
    // Rank generics: every tensor naming one, in input order (declared members by path too).
    let mut ranks: Vec<(&str, &str, usize)> = Vec::new();
    let position = |name: &str| {
        op.inputs.iter().position(|i| {
            name == i.name
                || name
                    .strip_prefix(i.name.as_str())
                    .is_some_and(|r| r.starts_with('.'))
        })
    };
    let mut ordered: Vec<&(String, Vec<Vec<usize>>)> = shapes.iter().collect();
    ordered.sort_by_key(|(name, _)| position(name));
    for (name, list) in ordered {
        let Some(t) = tensor_named(op, name) else {
            continue;
        };
        let Rank::Generic(g) = &t.rank else { continue };
        for shape in list {
            if let Some((first, _, rank)) = ranks.iter().find(|(_, gg, _)| gg == g)
                && *rank != shape.len()
            {
                let span = span_of(name).unwrap_or_default();
                let same = if first == name {
                    format!(
                        "the elements of `{name}` share rank `{g}`, but its shapes have {rank} and {} dimensions",
                        shape.len()
                    )
                } else {
                    format!(
                        "`{first}` and `{name}` share rank `{g}`, but their shapes have {rank} and {} dimensions",
                        shape.len()
                    )
                };
                diags.push(
                    Diagnostic::new(
                        span,
                        format!("{path}.shapes.{name}"),
                        format!("{same}: no call of `{}` can take them", op.name),
                    )
                    .help(format!(
                        "give `{name}` a shape of {rank} dimensions, as `{first}`'s"
                    )),
                );
                break;
            }
            ranks.push((name.as_str(), g.as_str(), shape.len()));
        }
    }
    if !diags.is_empty() {
        return diags;
    }
    for input in &op.inputs {
        let Some(contract) = &input.shape else {
            continue;
        };
        let (Some(shape), Some(of)) = (shape_of(&input.name), shape_of(&contract.of)) else {
            continue;
        };
        if contract.rule.holds(shape, of) {
            continue;
        }
        // A contract the declared ranks make impossible has an error of its own (at the
        // contract); a shape here could not meet it.
        let fixed = |name: &str| match tensor_named(op, name).map(|t| &t.rank) {
            Some(Rank::Fixed(r)) => Some(*r),
            _ => None,
        };
        let same_rank = matches!(
            contract.rule,
            ShapeRule::SameAs | ShapeRule::BroadcastTo | ShapeRule::BroadcastWith
        );
        if let (Some(a), Some(b)) = (fixed(&input.name), fixed(&contract.of))
            && ((same_rank && a != b) || (contract.rule == ShapeRule::LastDimOf && a != 1))
        {
            continue;
        }
        // Point at the constrained input's entry when it is given, else at the other's.
        let (key, span) = match span_of(&input.name) {
            Some(span) => (input.name.as_str(), span),
            None => (
                contract.of.as_str(),
                span_of(&contract.of).unwrap_or_default(),
            ),
        };
        // The broadcast rules allow several shapes: the given one with each dimension that
        // breaks the rule set to 1 (or the other's shape, at another rank).
        let broadcast = || -> Vec<usize> {
            if shape.len() != of.len() {
                return of.clone();
            }
            shape
                .iter()
                .zip(of)
                .map(|(&d, &o)| {
                    if d == o || d == 1 || (contract.rule == ShapeRule::BroadcastWith && o == 1) {
                        d
                    } else {
                        1
                    }
                })
                .collect()
        };
        let fix = match contract.rule.implied(of) {
            Some(implied) if key == input.name => format!(
                "give `{}` the shape {} (or remove it from `shapes`: the check then derives it from `{}`'s)",
                input.name,
                shown(implied),
                contract.of
            ),
            None if key == input.name => format!(
                "give `{}` a shape that meets `{} = \"{}\"`, such as {} (or remove it from `shapes`: the check then derives it from `{}`'s)",
                input.name,
                contract.rule,
                contract.of,
                shown(&broadcast()),
                contract.of
            ),
            _ => format!(
                "give `{}` and `{}` shapes that meet `{} = \"{}\"`",
                input.name, contract.of, contract.rule, contract.of
            ),
        };
        diags.push(
            Diagnostic::new(
                span,
                format!("{path}.shapes.{key}"),
                format!(
                    "the op check would call `{}` with `{}` of shape {} and `{}` of shape {}, which breaks `{}`'s shape contract `{} = \"{}\"`: the routing refuses that call",
                    op.name,
                    input.name,
                    shown(shape),
                    contract.of,
                    shown(of),
                    input.name,
                    contract.rule,
                    contract.of
                ),
            )
            .help(fix),
        );
    }
    diags
}

/// The tensor input (or tensor member of a declared input, by path) `name` names, as routing
/// names them ([`Op::routing_tensors`]).
fn tensor_named<'a>(op: &'a Op, name: &str) -> Option<&'a TensorArg> {
    op.routing_tensors()
        .into_iter()
        .find_map(|(n, _, t, _)| (n == name).then_some(t))
}

/// What is wrong with the range `[lo, hi]` of input `name` (values are drawn in `[lo, hi)`):
/// each way a range can fail has its own message, and its own fix.
fn range_problem(name: &str, lo: f64, hi: f64, int: bool) -> Option<(String, String)> {
    let bound = |v: f64| {
        if v.is_nan() {
            "NaN".to_owned()
        } else if v.is_finite() && v.abs() >= 1e16 {
            format!("{v:e}")
        } else {
            format!("{v}")
        }
    };
    let shown = format!("[{}, {}]", bound(lo), bound(hi));
    let problem = if lo.is_nan() || hi.is_nan() {
        (
            format!("the range of `{name}` has a NaN bound: {shown}"),
            "give both bounds as finite numbers, such as `[-1, 1]`".to_owned(),
        )
    } else if lo.is_infinite() || hi.is_infinite() {
        (
            format!(
                "the range of `{name}` has an infinite bound: {shown}; the op check draws values uniformly, which needs finite bounds"
            ),
            "give both bounds as finite numbers, such as `[-1e6, 1e6]` for a wide range".to_owned(),
        )
    } else if !int && lo.abs().max(hi.abs()) > f64::from(f32::MAX) {
        (
            format!(
                "the range of `{name}` goes beyond what an `f32` holds: {shown}; the op check draws its values as `f32`, where such a bound is infinite"
            ),
            "keep both bounds within ±3.4e38, such as `[-1e6, 1e6]` for a wide range".to_owned(),
        )
    } else if int && (lo < f64::from(i32::MIN) || hi > f64::from(i32::MAX) + 1.0) {
        (
            format!(
                "the range of int input `{name}` goes beyond what an `i32` holds: {shown}; the op check's ints must fit every backend's int dtype"
            ),
            "keep both bounds within [-2147483648, 2147483648] (ints are drawn below the high bound)"
                .to_owned(),
        )
    } else if lo > hi {
        (
            format!(
                "the range of `{name}` is reversed: {shown}, its low bound is above its high bound"
            ),
            format!("swap the bounds: `[{}, {}]`", bound(hi), bound(lo)),
        )
    } else if lo == hi {
        (
            format!(
                "the range of `{name}` is empty: {shown} (values are drawn in [lo, hi), which holds nothing when lo = hi)"
            ),
            format!(
                "give a high bound above the low one, such as `[{}, {}]`",
                bound(lo),
                bound(above(lo))
            ),
        )
    } else if int && lo.ceil() >= hi {
        (
            format!("the range of int input `{name}` holds no integer: [{lo}, {hi})"),
            format!(
                "write `[lo, hi]` with an integer lo < hi (ints are drawn in [lo, hi)), such as `[{}, {}]`",
                lo.ceil(),
                lo.ceil() + 1.0
            ),
        )
    } else {
        return None;
    };
    Some(problem)
}

/// Whether `output` holds a float tensor (in a tuple, or a field of a declared type).
/// `value_tolerance`: a positive number, on an op with a float output (int and bool leaves are
/// compared exactly, so for an op without one it would change nothing).
fn value_tolerance(
    op: &Op,
    types: &[TypeDef],
    t: &crate::model::Sp<f64>,
    path: &str,
    check: &mut Check,
    diags: &mut Vec<Diagnostic>,
) {
    let key = format!("{path}.value_tolerance");
    if !float_output(&op.output, types) {
        diags.push(
            Diagnostic::new(
                t.span.clone(),
                key,
                format!(
                    "op `{}` returns no float tensor (the op check compares int and bool \
                     tensors exactly, and plain values not at all), so `value_tolerance` \
                     changes nothing",
                    op.name
                ),
            )
            .help("remove `value_tolerance` from `check`"),
        );
    } else if t.value.is_finite() && t.value > 0.0 {
        check.value_tolerance = Some(t.value);
    } else {
        diags.push(
            Diagnostic::new(
                t.span.clone(),
                key,
                format!("value_tolerance {} is not a positive number", t.value),
            )
            .help("write a relative tolerance such as `1e-3` (the default is `1e-4`)"),
        );
    }
}

/// Whether `output` holds a float tensor (a tuple's element, a declared struct's field).
pub(super) fn float_output(output: &Output, types: &[TypeDef]) -> bool {
    match output {
        Output::Tensor(t) => t.kind == TensorKind::Float,
        Output::Tuple(items) => items.iter().any(|o| float_output(o, types)),
        Output::Declared { name, .. } => crate::ir::leaves(types, name)
            .iter()
            .any(|l| l.tensor.kind == TensorKind::Float),
        Output::Unit | Output::Plain(_) => false,
    }
}

/// A number above `v` that `f64` tells apart from it: `v + 1`, or where that rounds back to `v`,
/// twice `v` (positive) or 0 (negative).
fn above(v: f64) -> f64 {
    if v + 1.0 > v {
        v + 1.0
    } else if v > 0.0 {
        v * 2.0
    } else {
        0.0
    }
}

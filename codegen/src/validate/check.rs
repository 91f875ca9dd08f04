//! An op's `[op.check]` table → [`Check`]: what the generated op check passes the op.

use crate::diag::{Diagnostic, did_you_mean};
use crate::ir::{
    Arg, Check, Container, MemberType, Op, Rank, Step, TensorArg, TensorKind, TypeDef,
};
use crate::model::OpSpec;

/// What a `[op.check]` key names: an input of the op, or a member of a declared-type input by
/// its path (`p.scale`, `fill.From.0`), as routing errors name it.
enum Target<'a> {
    Tensor(&'a TensorArg),
    Plain,
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
            Arg::Plain(_) => out.push((input.name.clone(), Target::Plain)),
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
                        (None, MemberType::Plain(_)) => Target::Plain,
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
        return Ok(check);
    };
    let path = format!("op[{}].check", spec.index);
    let mut diags = Vec::new();
    let targets = targets(op, types);
    let find = |key: &str| targets.iter().find(|(n, _)| n == key).map(|(_, t)| t);
    let names: Vec<&str> = targets.iter().map(|(n, _)| n.as_str()).collect();
    let unknown = |key: &crate::model::Sp<String>, sub: &str, what: &str| {
        let help = match did_you_mean(&key.value, &names) {
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
            diags.push(unknown(key, "shapes", "tensor input"));
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
                .help("an array of shapes is for a `vec` input"),
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
        check.shapes.push((
            key.value.clone(),
            shapes
                .value
                .iter()
                .map(|s| s.iter().map(|d| usize::try_from(*d).unwrap_or(0)).collect())
                .collect(),
        ));
    }
    for (key, range) in &table.ranges {
        let Some(target) = find(&key.value) else {
            diags.push(unknown(key, "ranges", "float or int tensor input"));
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
        if int && lo.is_finite() && hi.is_finite() && lo.ceil() >= hi {
            diags.push(
                Diagnostic::new(
                    range.span.clone(),
                    key_path,
                    format!(
                        "the range of int input `{}` holds no integer: [{lo}, {hi})",
                        key.value
                    ),
                )
                .help("write `[lo, hi]` with an integer lo < hi (ints are drawn in [lo, hi))"),
            );
            continue;
        }
        if !(lo.is_finite() && hi.is_finite() && lo < hi) {
            diags.push(
                Diagnostic::new(
                    range.span.clone(),
                    key_path,
                    format!("the range of `{}` is empty: [{lo}, {hi}]", key.value),
                )
                .help("write `[lo, hi]` with lo < hi (values are drawn in [lo, hi))"),
            );
            continue;
        }
        check.ranges.push((key.value.clone(), (lo, hi)));
    }
    for (key, expr) in &table.args {
        let Some(target) = find(&key.value) else {
            diags.push(unknown(key, "args", "plain input"));
            continue;
        };
        if let Some(d) = unbuilt(key, "args", target) {
            diags.push(d);
            continue;
        }
        let key_path = format!("{path}.args.{}", key.value);
        if !matches!(target, Target::Plain) {
            diags.push(
                Diagnostic::new(key.span.clone(), key_path, format!("`{}` is not a plain input", key.value))
                    .help("`args` gives values of plain (`type = ...`) inputs; tensors are drawn from `shapes` and `ranges`"),
            );
            continue;
        }
        match syn::parse_str::<syn::Expr>(&expr.value) {
            Ok(_) => check
                .args
                .push((key.value.clone(), expr.value.trim().to_owned())),
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
    if let Some(g) = &table.gradients {
        check.gradients = g.value;
    }
    if let Some(c) = &table.composition {
        if c.value && check.composition != c.value {
            diags.push(
                Diagnostic::new(c.span.clone(), format!("{path}.composition"), format!("op `{}` has no `composition` (besides its kernels) to compare its kernels with", op.name))
                    .help("remove `composition` from `check`, or give the op a `composition`"),
            );
        }
        check.composition &= c.value;
    }
    if let Some(t) = &table.tolerance {
        if t.value.is_finite() && t.value > 0.0 {
            check.tolerance = Some(t.value);
        } else {
            diags.push(
                Diagnostic::new(
                    t.span.clone(),
                    format!("{path}.tolerance"),
                    format!("tolerance {} is not a positive number", t.value),
                )
                .help("write a relative tolerance such as `1e-2`"),
            );
        }
    }
    if diags.is_empty() {
        Ok(check)
    } else {
        Err(diags)
    }
}

//! An op's `[op.check]` table → [`Check`]: what the generated op check passes the op.

use crate::diag::{Diagnostic, did_you_mean};
use crate::ir::{Arg, Check, Container, Op, Rank, TensorKind};
use crate::model::OpSpec;

/// Lowers `spec`'s `check` table for `op`.
///
/// # Errors
///
/// Every problem found.
pub(super) fn lower(spec: &OpSpec, op: &Op) -> Result<Check, Vec<Diagnostic>> {
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
    let names: Vec<&str> = op.inputs.iter().map(|i| i.name.as_str()).collect();
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
    for (key, shapes) in &table.shapes {
        let Some(input) = op.inputs.iter().find(|i| i.name == key.value) else {
            diags.push(unknown(key, "shapes", "tensor input"));
            continue;
        };
        let key_path = format!("{path}.shapes.{}", key.value);
        let Arg::Tensor(t) = &input.arg else {
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
        let Some(input) = op.inputs.iter().find(|i| i.name == key.value) else {
            diags.push(unknown(key, "ranges", "float or int tensor input"));
            continue;
        };
        let key_path = format!("{path}.ranges.{}", key.value);
        if !matches!(&input.arg, Arg::Tensor(t) if matches!(t.kind, TensorKind::Float | TensorKind::Int))
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
        let int = matches!(&input.arg, Arg::Tensor(t) if t.kind == TensorKind::Int);
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
        let Some(input) = op.inputs.iter().find(|i| i.name == key.value) else {
            diags.push(unknown(key, "args", "plain input"));
            continue;
        };
        let key_path = format!("{path}.args.{}", key.value);
        if !matches!(input.arg, Arg::Plain(_)) {
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

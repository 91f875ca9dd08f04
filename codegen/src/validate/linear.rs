//! Formulas of an op with several float outputs (the float fields of a declared struct it
//! returns, `grad.mean` and `grad.var`): each output is a node of its own in Burn's graph, so
//! each input's formula is split into one formula per output, by setting the other outputs'
//! incoming gradients to zero. That is exact for a formula linear in the incoming gradients,
//! which a gradient always is, and which [`check`] makes sure of: every term multiplies exactly
//! one incoming gradient.

use std::ops::Range;

use crate::formula::{BinOp, Expr, ExprKind, GRAD, OUTPUT};

/// How a subexpression depends on the incoming gradients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Degree {
    /// The literal `0` (homogeneous of every degree).
    Zero,
    /// Not at all.
    Constant,
    /// Linearly.
    Linear,
}

/// Why a formula is not linear in the incoming gradients: where, and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct NotLinear {
    /// The subexpression, in the formula text's bytes.
    pub span: Range<usize>,
    /// What it does wrong.
    pub problem: String,
}

/// Whether `name` is an incoming gradient: `grad` or `grad.field`.
fn is_grad(name: &str) -> bool {
    name == GRAD || name.strip_prefix(GRAD).is_some_and(|r| r.starts_with('.'))
}

/// Checks that `expr` is linear in the incoming gradients.
///
/// # Errors
///
/// The first subexpression that is not.
/// With `split` (an op with several float outputs), a size of an incoming gradient
/// (`dim_size(grad.mean, 0)`) counts as reading it: splitting sets it to `0`, a tensor of no
/// size. With one output, it is a number like any other.
pub(super) fn check(expr: &Expr, split: bool) -> Result<(), NotLinear> {
    match degree(expr, split)? {
        Degree::Zero | Degree::Linear => Ok(()),
        Degree::Constant => Err(NotLinear {
            span: expr.span.clone(),
            problem: "reads no incoming gradient".to_owned(),
        }),
    }
}

fn degree(expr: &Expr, split: bool) -> Result<Degree, NotLinear> {
    let degree = |e: &Expr| degree(e, split);
    let fail = |e: &Expr, problem: &str| {
        Err(NotLinear {
            span: e.span.clone(),
            problem: problem.to_owned(),
        })
    };
    match &expr.kind {
        ExprKind::Number(v) if *v == 0.0 => Ok(Degree::Zero),
        ExprKind::Number(_) => Ok(Degree::Constant),
        ExprKind::Name(name) if is_grad(name) => Ok(Degree::Linear),
        ExprKind::Name(_) => Ok(Degree::Constant),
        ExprKind::Neg(inner) => degree(inner),
        ExprKind::Binary(op, a, b) => {
            let (da, db) = (degree(a)?, degree(b)?);
            match op {
                BinOp::Add | BinOp::Sub => sum(expr, da, db),
                BinOp::Mul => match (da, db) {
                    (Degree::Zero, _) | (_, Degree::Zero) => Ok(Degree::Zero),
                    (Degree::Linear, Degree::Linear) => {
                        fail(expr, "multiplies two incoming gradients")
                    }
                    (Degree::Linear, _) | (_, Degree::Linear) => Ok(Degree::Linear),
                    _ => Ok(Degree::Constant),
                },
                BinOp::Div if db == Degree::Linear => fail(b, "divides by an incoming gradient"),
                BinOp::Div => Ok(da),
            }
        }
        ExprKind::Call { name, args, .. } => {
            let degrees = args.iter().map(degree).collect::<Result<Vec<_>, _>>()?;
            match (name.as_str(), degrees.as_slice()) {
                // Linear in their tensor argument.
                ("sum_dim" | "mean_dim", [d, _]) => Ok(*d),
                // A size: no gradient is passed through.
                ("dim_size", [Degree::Constant, _]) => Ok(Degree::Constant),
                ("dim_size", [_, _]) if !split => Ok(Degree::Constant),
                ("where", [c, a, b]) if *c != Degree::Linear => sum(expr, *a, *b),
                _ => match args
                    .iter()
                    .zip(&degrees)
                    .find(|(_, d)| **d == Degree::Linear)
                {
                    Some((arg, _)) => fail(
                        arg,
                        &format!(
                            "passes an incoming gradient through `{name}`, which is not linear"
                        ),
                    ),
                    None => Ok(Degree::Constant),
                },
            }
        }
    }
}

/// The degree of `a + b` (or `a - b`, or a `where` choosing between them).
fn sum(expr: &Expr, a: Degree, b: Degree) -> Result<Degree, NotLinear> {
    match (a, b) {
        (Degree::Zero, d) | (d, Degree::Zero) => Ok(d),
        (x, y) if x == y => Ok(x),
        _ => Err(NotLinear {
            span: expr.span.clone(),
            problem: "adds a term that reads no incoming gradient to one that does".to_owned(),
        }),
    }
}

/// `expr` as the formula of the node of output field `own` (`mean`): `grad.own` becomes
/// `grad`, `output.own` becomes `output`, every other incoming gradient `0`, and the zeros are
/// simplified away (the result is `0` when the node gives no gradient).
pub(super) fn node_formula(expr: &Expr, own: &str) -> Expr {
    let span = expr.span.clone();
    let zero = || Expr {
        kind: ExprKind::Number(0.0),
        span: span.clone(),
    };
    let is_zero = |e: &Expr| matches!(e.kind, ExprKind::Number(v) if v == 0.0);
    let kind = match &expr.kind {
        ExprKind::Name(name) if is_grad(name) => {
            // A bare `grad` is the one float field's (validation refuses it beside others).
            if name == GRAD
                || name.strip_prefix(GRAD).and_then(|r| r.strip_prefix('.')) == Some(own)
            {
                ExprKind::Name(GRAD.to_owned())
            } else {
                return zero();
            }
        }
        ExprKind::Name(name)
            if name.strip_prefix(OUTPUT).and_then(|r| r.strip_prefix('.')) == Some(own) =>
        {
            ExprKind::Name(OUTPUT.to_owned())
        }
        ExprKind::Number(_) | ExprKind::Name(_) => expr.kind.clone(),
        ExprKind::Neg(inner) => {
            let inner = node_formula(inner, own);
            if is_zero(&inner) {
                return zero();
            }
            ExprKind::Neg(Box::new(inner))
        }
        ExprKind::Binary(op, a, b) => {
            let (a, b) = (node_formula(a, own), node_formula(b, own));
            match (op, is_zero(&a), is_zero(&b)) {
                (BinOp::Add, true, _) => return b,
                (BinOp::Add | BinOp::Sub, _, true) => return a,
                (BinOp::Sub, true, _) => ExprKind::Neg(Box::new(b)),
                (BinOp::Mul, true, _) | (BinOp::Mul, _, true) | (BinOp::Div, true, _) => {
                    return zero();
                }
                _ => ExprKind::Binary(*op, Box::new(a), Box::new(b)),
            }
        }
        ExprKind::Call {
            name,
            name_span,
            args,
        } => {
            let args: Vec<Expr> = args.iter().map(|a| node_formula(a, own)).collect();
            let vanishes = match name.as_str() {
                "sum_dim" | "mean_dim" => is_zero(&args[0]),
                "where" => is_zero(&args[1]) && is_zero(&args[2]),
                _ => false,
            };
            if vanishes {
                return zero();
            }
            ExprKind::Call {
                name: name.clone(),
                name_span: name_span.clone(),
                args,
            }
        }
    };
    Expr { kind, span }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formula::parse;

    fn show(e: &Expr) -> String {
        match &e.kind {
            ExprKind::Number(v) => format!("{v}"),
            ExprKind::Name(n) => n.clone(),
            ExprKind::Neg(i) => format!("(-{})", show(i)),
            ExprKind::Binary(op, a, b) => format!("({} {} {})", show(a), op.symbol(), show(b)),
            ExprKind::Call { name, args, .. } => {
                let args: Vec<String> = args.iter().map(show).collect();
                format!("{name}({})", args.join(", "))
            }
        }
    }

    fn split(text: &str, own: &str) -> String {
        show(&node_formula(&parse(text).expect("parses"), own))
    }

    fn problem(text: &str) -> String {
        check(&parse(text).expect("parses"), true)
            .expect_err("not linear")
            .problem
    }

    #[test]
    fn each_node_keeps_its_own_gradient() {
        let f = "grad.mean / 4 + grad.var * 2 * (x - output.mean) / 4";
        assert_eq!(split(f, "mean"), "(grad / 4)");
        assert_eq!(split(f, "var"), "(((grad * 2) * (x - output.mean)) / 4)");
        assert_eq!(split("-grad.var", "mean"), "0");
        assert_eq!(split("0 - grad.var", "var"), "(-grad)");
        assert_eq!(split("where(m, grad.a, grad.b)", "a"), "where(m, grad, 0)");
        assert_eq!(split("sum_dim(grad.b, -1) * x", "a"), "0");
    }

    #[test]
    fn linear_formulas_pass() {
        for f in [
            "grad.mean / 4 + grad.var * 2 * (x - output.mean) / 4",
            "where(gt(x, 0), grad.a, 0)",
            "sum_dim(grad.a * x, -1) - grad.b",
            "0",
            "-(grad.a + grad.b) / sqrt(x)",
        ] {
            check(&parse(f).expect("parses"), true).expect(f);
        }
    }

    #[test]
    fn one_output_reads_its_gradients_size_as_a_number() {
        let one = |f: &str| check(&parse(f).expect("parses"), false);
        one("grad / dim_size(grad, 0)").expect("a size is a number");
        assert!(
            check(
                &parse("grad.a / dim_size(grad.a, 0)").expect("parses"),
                true
            )
            .is_err()
        );
        assert_eq!(
            one("exp(grad) * x").expect_err("not linear").problem,
            "passes an incoming gradient through `exp`, which is not linear"
        );
        assert_eq!(
            one("w").expect_err("not linear").problem,
            "reads no incoming gradient"
        );
    }

    #[test]
    fn nonlinear_formulas_are_named() {
        assert_eq!(
            problem("grad.a * grad.b"),
            "multiplies two incoming gradients"
        );
        assert_eq!(problem("x / grad.a"), "divides by an incoming gradient");
        assert_eq!(
            problem("exp(grad.a)"),
            "passes an incoming gradient through `exp`, which is not linear"
        );
        assert_eq!(
            problem("grad.a + 1"),
            "adds a term that reads no incoming gradient to one that does"
        );
        assert_eq!(problem("x * 2"), "reads no incoming gradient");
    }
}

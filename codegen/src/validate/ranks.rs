//! What the declared ranks (`dims`) decide about backward formulas, checked at build time
//! rather than panicking in every backward pass: a dimension a function names must exist, and
//! formulas work on tensors of the output's rank.

use burn_route_core::ShapeRule;

use crate::ir::{BackendId, Op, Output, Rank, TensorArg, Term, TermNode};

fn fixed(t: &TensorArg) -> Option<usize> {
    match t.rank {
        Rank::Fixed(r) => Some(r),
        Rank::Generic(_) => None,
    }
}

/// The rank of `term` when the manifest fixes it (`dims = 2` on the inputs and output it
/// reads); `None` for a number, or when a rank generic decides it.
fn fixed_rank(op: &Op, term: &Term) -> Option<usize> {
    match &term.node {
        TermNode::Input(name) => op
            .float_slots()
            .find(|slot| &slot.name == name)
            .and_then(|slot| fixed(slot.tensor)),
        TermNode::Output | TermNode::Grad => output_rank(&op.output),
        // `output.var`: a float field of the declared struct output.
        TermNode::Kept(name) => match (&op.output, name.split_once('.')) {
            (Output::Declared { leaves, .. }, Some((_, field))) => leaves
                .iter()
                .find(|leaf| leaf.label() == field)
                .and_then(|leaf| fixed(&leaf.tensor)),
            _ => None,
        },
        TermNode::Neg(inner) => fixed_rank(op, inner),
        TermNode::Binary(_, a, b) => fixed_rank(op, a).max(fixed_rank(op, b)),
        TermNode::Call(name, args) => match *name {
            "dim_size" => None,
            "sum_dim" | "mean_dim" => args.first().and_then(|a| fixed_rank(op, a)),
            _ => args.iter().filter_map(|a| fixed_rank(op, a)).max(),
        },
        TermNode::Number(_) | TermNode::Dim(_) | TermNode::Scalar(_) => None,
    }
}

/// The fixed rank of the float output a formula's `grad` and `output` stand for: the tensor, the
/// one float tensor of a tuple, or the float fields of a declared struct when they all have the
/// same one (`grad.mean` is resolved to `grad` before this is asked).
fn output_rank(output: &Output) -> Option<usize> {
    fn floats<'a>(output: &'a Output, acc: &mut Vec<&'a TensorArg>) {
        match output {
            Output::Tensor(t) if t.kind == crate::ir::TensorKind::Float => acc.push(t),
            Output::Tuple(items) => items.iter().for_each(|i| floats(i, acc)),
            Output::Declared { leaves, .. } => acc.extend(
                leaves
                    .iter()
                    .filter(|l| l.tensor.kind == crate::ir::TensorKind::Float)
                    .map(|l| &l.tensor),
            ),
            Output::Tensor(_) | Output::Unit | Output::Plain(_) => {}
        }
    }
    let mut acc = Vec::new();
    floats(output, &mut acc);
    let ranks: Vec<Option<usize>> = acc.iter().map(|t| fixed(t)).collect();
    match ranks.first() {
        Some(Some(r)) if ranks.iter().all(|x| *x == Some(*r)) => Some(*r),
        _ => None,
    }
}

/// The message and help when function `name` (`dim_size`, `sum_dim`, `mean_dim`), called with
/// `args`, names a dimension its tensor cannot have at the rank the manifest fixes; `tensor`
/// gives the tensor argument's text.
pub(super) fn dim_problem(
    op: &Op,
    name: &str,
    args: &[Term],
    tensor: impl FnOnce() -> String,
) -> Option<(String, String)> {
    let (Some(TermNode::Dim(d)), Some(rank)) = (
        args.get(1).map(|t| &t.node),
        args.first().and_then(|t| fixed_rank(op, t)),
    ) else {
        return None;
    };
    let rank = i64::try_from(rank).ok()?;
    if (-rank..rank).contains(d) {
        return None;
    }
    Some((
        format!(
            "`{name}` names dimension {d} of `{}`, which has rank {rank} as the manifest declares it: every backward pass would panic",
            tensor()
        ),
        format!(
            "name a dimension in {}..{rank}: 0 to {} from the front, -1 to -{rank} from the end",
            -rank,
            rank - 1
        ),
    ))
}

/// The names of the tensors `term` computes with: what it reads, but for the arguments of
/// `dim_size`, which only give a number.
fn tensor_operands(term: &Term, acc: &mut Vec<String>) {
    let mut push = |n: &str| {
        if !acc.iter().any(|a| a == n) {
            acc.push(n.to_owned());
        }
    };
    match &term.node {
        TermNode::Call("dim_size", _) => {}
        TermNode::Call(_, args) => args.iter().for_each(|a| tensor_operands(a, acc)),
        TermNode::Neg(inner) => tensor_operands(inner, acc),
        TermNode::Binary(_, a, b) => {
            tensor_operands(a, acc);
            tensor_operands(b, acc);
        }
        TermNode::Output => push(crate::formula::OUTPUT),
        TermNode::Input(n) | TermNode::Kept(n) => push(n),
        TermNode::Number(_) | TermNode::Dim(_) | TermNode::Grad | TermNode::Scalar(_) => {}
    }
}

/// A declared rank as messages show it: "rank 2 (`dims = 2`)", "rank `D`".
pub(super) fn shown(rank: &Rank) -> String {
    match rank {
        Rank::Fixed(r) => format!("rank {r} (`dims = {r}`)"),
        Rank::Generic(g) => format!("rank `{g}`"),
    }
}

/// Formulas work on tensors of the output's rank: a gradient is reduced to its input's shape
/// dimension by dimension, at the output's rank, on every backend; and Cube's primitives
/// compute with tensors of one rank (Flex's broadcast missing leading dimensions). The message
/// and help when the formula `term` of float input `slot` gives a gradient to, or (where the op
/// may run on Cube) computes with, an input whose declared rank is not the output's: another
/// fixed rank, a fixed rank against a generic, or another generic (only calls that make them
/// equal could run).
pub(super) fn rank_problem(op: &Op, slot: usize, term: &Term) -> Option<(String, String)> {
    let Output::Tensor(out) = &op.output else {
        return None;
    };
    let slots: Vec<(String, Rank)> = op
        .float_slots()
        .map(|s| (s.name.clone(), s.tensor.rank.clone()))
        .collect();
    let own = slots.get(slot)?.0.clone();
    let mut operands = Vec::new();
    if op.backends.iter().any(|b| b.name != BackendId::Flex) {
        tensor_operands(term, &mut operands);
    }
    let (name, rank) = std::iter::once(own.clone())
        .chain(operands)
        .find_map(|name| {
            let (_, rank) = slots.iter().find(|(n, _)| *n == name)?;
            (rank != &out.rank).then(|| (name, rank.clone()))
        })?;
    let (which, why) = if name == own {
        (
            format!("the formula for `{name}` gives a gradient to an input"),
            "a gradient is reduced to its input's shape dimension by dimension, at the output's rank",
        )
    } else {
        (
            format!("the formula for `{own}` reads `{name}`, an input"),
            "the op may run on Cube, whose primitives compute with tensors of one rank",
        )
    };
    let message = format!(
        "{which} of {}, but the output of op `{}` has {}: {why}, so a backward pass at another rank would panic",
        shown(&rank),
        op.name,
        shown(&out.rank)
    );
    let function = format!(
        "write the backward pass as a function (`backward = \"path::to::{}_backward\"`), which reduces `{name}`'s gradient to its shape itself",
        op.name
    );
    // A contract that fixes the input's rank (`last_dim_of`, `leading_dims_of`) leaves only the
    // function form.
    let contracted = op.inputs.iter().any(|i| {
        i.name == name
            && i.shape
                .as_ref()
                .is_some_and(|c| matches!(c.rule, ShapeRule::LastDimOf | ShapeRule::LeadingDimsOf))
    });
    let help = if contracted {
        function
    } else {
        format!("give `{name}` and the output the same `dims`, or {function}")
    };
    Some((message, help))
}

/// The message and help when the formula of float input `slot` gives it a gradient through
/// float field `member` (its index among the float fields) of the op's declared struct output,
/// and the field's declared rank is not the input's: that field's node reduces the gradient to
/// the input's shape at the field's rank, as [`rank_problem`] says of a tensor output, and a
/// backward function, the way out there, cannot be given a struct's gradients yet.
pub(super) fn field_rank_problem(op: &Op, slot: usize, member: usize) -> Option<(String, String)> {
    let Output::Declared {
        name: ty, leaves, ..
    } = &op.output
    else {
        return None;
    };
    let input = op.float_slots().nth(slot)?;
    let field = leaves
        .iter()
        .filter(|l| l.tensor.kind == burn_route_core::TensorKind::Float)
        .nth(member)?;
    if field.tensor.rank == input.tensor.rank {
        return None;
    }
    let message = format!(
        "the formula for `{}` gives it a gradient through field `output.{}` of op `{}`, which has {}, but `{}` has {}: each field's gradient is reduced to its input's shape dimension by dimension, at the field's rank, so a backward pass at another rank would panic",
        input.name,
        field.label(),
        op.name,
        shown(&field.tensor.rank),
        input.name,
        shown(&input.tensor.rank),
    );
    let floats = leaves
        .iter()
        .filter(|l| l.tensor.kind == burn_route_core::TensorKind::Float)
        .count();
    let key = if input.name.contains('.') {
        format!("\"{}\"", input.name)
    } else {
        input.name.clone()
    };
    let other = if floats > 1 {
        format!(
            "leave `grad.{}` out of the formula for `{}`",
            field.label(),
            input.name
        )
    } else {
        format!(
            "write `{key} = \"none\"` if no gradient flows to `{}`",
            input.name
        )
    };
    let help = format!(
        "give field `{}` of `{ty}` and `{}` the same `dims`, or {other} (a backward function cannot be given a declared struct's gradients yet)",
        field.label(),
        input.name,
    );
    Some((message, help))
}

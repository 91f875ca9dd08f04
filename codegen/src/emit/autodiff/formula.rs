//! The formula compiler of the generated backward passes: a typed [`Term`] as Rust over `B`'s
//! primitives (tensor terms) or `f64` arithmetic (number terms), its repeated tensor
//! subexpressions computed once into locals, and each tensor local moved at its last read.

use super::*;

/// A formula term as Rust: a tensor expression over `B`'s primitives, or an `f64` one.
pub(super) struct Emitted {
    pub(super) doc: Doc,
    /// Binding strength of an `f64` expression (3: atomic, 2: product or negation, 1: sum).
    pub(super) prec: u8,
}

pub(super) fn text(s: impl Into<String>, prec: u8) -> Emitted {
    Emitted {
        doc: Doc::Text(s.into()),
        prec,
    }
}

pub(super) fn flat(doc: &Doc) -> String {
    let mut s = String::new();
    doc.write_flat_into(&mut s);
    s
}

pub(super) fn wrap(e: Emitted, at_least: u8) -> String {
    let s = flat(&e.doc);
    if e.prec >= at_least {
        s
    } else {
        format!("({s})")
    }
}

/// [`wrap`] as a doc: a number expression that holds a call (`dim_size(x, 0)`, which carries
/// its formula's text) stays breakable, so that rustfmt's layout of calls applies inside it.
pub(super) fn wrap_doc(e: Emitted, at_least: u8) -> Doc {
    match e.doc {
        doc if e.prec >= at_least => doc,
        doc if !doc.breakable() => Doc::Text(format!("({})", flat(&doc))),
        doc => Doc::Cat(vec![Doc::Text("(".into()), doc, Doc::Text(")".into())]),
    }
}

pub(super) fn prim(name: &str, args: Vec<Doc>) -> Emitted {
    Emitted {
        doc: call(format!("B::{name}"), args),
        prec: 3,
    }
}

pub(super) fn helper(name: &str, args: Vec<Doc>) -> Emitted {
    Emitted {
        doc: call(format!("{G}::{name}::<B>"), args),
        prec: 3,
    }
}

pub(super) fn scalar(e: Emitted) -> Doc {
    call(format!("{G}::scalar"), [e.doc])
}

/// An `f64` literal (typed, so that a method such as `2.0_f64.sqrt()` resolves).
pub(super) fn number_literal(v: f64) -> String {
    format!("{v:?}_f64")
}

/// Whether `t` has a number literal.
pub(super) fn term_has_literal(t: &Term) -> bool {
    match &t.node {
        TermNode::Number(_) => true,
        TermNode::Neg(i) => term_has_literal(i),
        TermNode::Binary(_, a, b) => term_has_literal(a) || term_has_literal(b),
        TermNode::Call(_, args) => args.iter().any(term_has_literal),
        _ => false,
    }
}

/// The numeric plain inputs `t` reads.
pub(super) fn term_scalars<'t>(t: &'t Term, acc: &mut Vec<&'t str>) {
    match &t.node {
        TermNode::Scalar(name) => acc.push(name),
        TermNode::Neg(i) => term_scalars(i, acc),
        TermNode::Binary(_, a, b) => {
            term_scalars(a, acc);
            term_scalars(b, acc);
        }
        TermNode::Call(_, args) => args.iter().for_each(|a| term_scalars(a, acc)),
        _ => {}
    }
}

/// The float inputs `t` reads.
pub(super) fn term_inputs<'t>(t: &'t Term, acc: &mut Vec<&'t str>) {
    match &t.node {
        TermNode::Input(name) => acc.push(name),
        TermNode::Neg(i) => term_inputs(i, acc),
        TermNode::Binary(_, a, b) => {
            term_inputs(a, acc);
            term_inputs(b, acc);
        }
        TermNode::Call(_, args) => args.iter().for_each(|a| term_inputs(a, acc)),
        _ => {}
    }
}

pub(super) fn term_uses_grad(t: &Term) -> bool {
    match &t.node {
        TermNode::Grad => true,
        TermNode::Neg(i) => term_uses_grad(i),
        TermNode::Binary(_, a, b) => term_uses_grad(a) || term_uses_grad(b),
        TermNode::Call(_, args) => args.iter().any(term_uses_grad),
        _ => false,
    }
}

/// A formula being emitted: its text (for runtime messages), the number subexpressions
/// bound to locals so that no line grows past rustfmt's width, and how its tensor locals are
/// read.
pub(super) struct Cx<'a> {
    pub(super) formula: &'a str,
    pub(super) bindings: &'a mut Vec<(String, Doc)>,
    /// The reads of each tensor local this formula has still to emit.
    pub(super) left: Vec<(&'a str, usize)>,
    /// Each `Reused` local (read by several formulas) and the later formulas that read it.
    pub(super) later: &'a [(&'a str, Vec<usize>)],
    /// The tensor subexpressions this formula computes once, into locals.
    pub(super) shared: &'a [Shared<'a>],
}

/// A tensor subexpression a formula has more than once: computed once into local `name`.
pub(super) struct Shared<'t> {
    pub(super) term: &'t Term,
    /// The term's structure (`Debug`), what equal subexpressions share.
    pub(super) key: String,
    pub(super) name: String,
}

/// The shared subterm `t` is, if any (its local is read instead of computing `t` again).
pub(super) fn shared_of<'s, 't>(t: &Term, shared: &'s [Shared<'t>]) -> Option<&'s Shared<'t>> {
    if !compound(t) {
        return None;
    }
    let key = format!("{t:?}");
    shared.iter().find(|s| s.key == key)
}

/// Whether `t` is a compound tensor term worth a local of its own (not a plain read).
pub(super) fn compound(t: &Term) -> bool {
    t.tensor
        && matches!(
            t.node,
            TermNode::Neg(_) | TermNode::Binary(..) | TermNode::Call(..)
        )
}

/// Every compound tensor subterm of `t` (with `t`), once per occurrence.
pub(super) fn subterms<'t>(t: &'t Term, acc: &mut Vec<&'t Term>) {
    if compound(t) {
        acc.push(t);
    }
    match &t.node {
        TermNode::Neg(i) => subterms(i, acc),
        TermNode::Binary(_, a, b) => {
            subterms(a, acc);
            subterms(b, acc);
        }
        TermNode::Call(_, args) => args.iter().for_each(|a| subterms(a, acc)),
        _ => {}
    }
}

/// How often a term of structure `key` occurs in `t`, not looking inside the terms `atomic`
/// already names.
pub(super) fn occurrences(t: &Term, key: &str, atomic: &[String]) -> usize {
    let own = format!("{t:?}");
    if own == key {
        return 1;
    }
    if atomic.contains(&own) {
        return 0;
    }
    match &t.node {
        TermNode::Neg(i) => occurrences(i, key, atomic),
        TermNode::Binary(_, a, b) => occurrences(a, key, atomic) + occurrences(b, key, atomic),
        TermNode::Call(_, args) => args.iter().map(|a| occurrences(a, key, atomic)).sum(),
        _ => 0,
    }
}

/// The compound tensor subterms `t` has more than once, largest first chosen (a repeated
/// subterm of a repeated one counts once), in the order their locals are computed: smallest
/// first, so that a larger one can read a smaller one's local.
pub(super) fn shared_subterms(t: &Term) -> Vec<Shared<'_>> {
    let mut candidates = Vec::new();
    subterms(t, &mut candidates);
    let mut keyed: Vec<(String, &Term)> =
        candidates.iter().map(|c| (format!("{c:?}"), *c)).collect();
    keyed.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
    keyed.dedup_by(|a, b| a.0 == b.0);
    let mut chosen: Vec<(String, &Term)> = Vec::new();
    for (key, term) in keyed {
        let atomic: Vec<String> = chosen.iter().map(|(k, _)| k.clone()).collect();
        // (The whole formula is never shared with itself.)
        if occurrences(t, &key, &atomic) >= 2 {
            chosen.push((key, term));
        }
    }
    chosen.reverse();
    chosen
        .into_iter()
        .enumerate()
        .map(|(k, (key, term))| Shared {
            term,
            key,
            name: names::shared_local(k),
        })
        .collect()
}

impl Cx<'_> {
    /// A read of tensor local `name`: a clone while another read may follow, the local itself
    /// at the last.
    fn read(&mut self, name: &str) -> String {
        let local = names::formula_local(name);
        let left = self
            .left
            .iter_mut()
            .find(|(n, _)| *n == name)
            .map(|(_, count)| {
                *count -= 1;
                *count
            })
            .expect("every read was counted");
        match self.later.iter().find(|(n, _)| *n == name) {
            None if left > 0 => format!("{local}.clone()"),
            None => local,
            Some(_) if left > 0 => format!("{local}.get()"),
            Some((_, users)) if users.is_empty() => format!("{local}.give(false)"),
            Some((_, users)) => {
                let more: Vec<String> = users
                    .iter()
                    .map(|j| format!("{}[{j}]", names::TRACKED))
                    .collect();
                format!("{local}.give({})", more.join(" || "))
            }
        }
    }
}

/// The tensor locals `t` reads (the incoming gradient, the output, float inputs, the locals
/// of `shared` subterms), once per read, in the order the emitted expression reads them; `top`:
/// `t` is a shared subterm's own definition, not a read of its local.
pub(super) fn tensor_reads<'t>(
    t: &'t Term,
    shared: &'t [Shared<'t>],
    top: bool,
    acc: &mut Vec<&'t str>,
) {
    if !top && let Some(local) = shared_of(t, shared) {
        acc.push(&local.name);
        return;
    }
    match &t.node {
        TermNode::Grad => acc.push(names::GRAD_LOCAL),
        TermNode::Output => acc.push("output"),
        TermNode::Input(name) | TermNode::Kept(name) => acc.push(name),
        TermNode::Neg(i) => tensor_reads(i, shared, false, acc),
        TermNode::Binary(_, a, b) => {
            tensor_reads(a, shared, false, acc);
            tensor_reads(b, shared, false, acc);
        }
        TermNode::Call(_, args) => args
            .iter()
            .for_each(|a| tensor_reads(a, shared, false, acc)),
        _ => {}
    }
}

/// `term` as Rust; a long number-valued part is bound to a local (`let __n0 = ...;`) first,
/// and a shared tensor subterm reads its local.
pub(super) fn term(t: &Term, cx: &mut Cx<'_>) -> Emitted {
    if let Some(name) = shared_of(t, cx.shared).map(|s| s.name.clone()) {
        return text(cx.read(&name), 3);
    }
    let e = term_inner(t, cx);
    // (A number that reads a tensor, `dim_size(x, -1)`, stays in place: a binding would run
    // before the reads to its left, which may move the tensor it reads.)
    if t.tensor || flat(&e.doc).len() <= 40 || term_reads_tensor(t) {
        return e;
    }
    let local = names::number_local(cx.bindings.len());
    cx.bindings.push((local.clone(), e.doc));
    text(local, 3)
}

/// Whether `t` reads a tensor local (the incoming gradient, the output, a float input).
pub(super) fn term_reads_tensor(t: &Term) -> bool {
    match &t.node {
        TermNode::Grad | TermNode::Output | TermNode::Input(_) => true,
        TermNode::Neg(i) => term_reads_tensor(i),
        TermNode::Binary(_, a, b) => term_reads_tensor(a) || term_reads_tensor(b),
        TermNode::Call(_, args) => args.iter().any(term_reads_tensor),
        _ => false,
    }
}

pub(super) fn term_inner(t: &Term, cx: &mut Cx<'_>) -> Emitted {
    let formula = cx.formula;
    match &t.node {
        TermNode::Number(v) => text(number_literal(*v), 3),
        TermNode::Dim(d) => text(d.to_string(), 3),
        TermNode::Grad => text(cx.read(names::GRAD_LOCAL), 3),
        TermNode::Output => text(cx.read("output"), 3),
        TermNode::Input(name) | TermNode::Kept(name) => text(cx.read(name), 3),
        TermNode::Scalar(name) => text(names::formula_local(name), 3),
        TermNode::Neg(inner) => {
            let tensor = inner.tensor;
            let inner = term(inner, cx);
            if tensor {
                prim("float_neg", vec![inner.doc])
            } else {
                Emitted {
                    doc: match wrap_doc(inner, 3) {
                        Doc::Text(t) => Doc::Text(format!("-{t}")),
                        doc => Doc::Cat(vec![Doc::Text("-".into()), doc]),
                    },
                    prec: 2,
                }
            }
        }
        TermNode::Binary(op, a, b) => binary(*op, a, b, cx),
        TermNode::Call(name, args) => function(name, args, cx, formula),
    }
}

pub(super) fn binary(op: BinOp, a: &Term, b: &Term, cx: &mut Cx<'_>) -> Emitted {
    let (ta, tb) = (a.tensor, b.tensor);
    let (ea, eb) = (term(a, cx), term(b, cx));
    let stem = match op {
        BinOp::Add => "add",
        BinOp::Sub => "sub",
        BinOp::Mul => "mul",
        BinOp::Div => "div",
    };
    match (ta, tb) {
        (true, true) => prim(&format!("float_{stem}"), vec![ea.doc, eb.doc]),
        (true, false) => prim(&format!("float_{stem}_scalar"), vec![ea.doc, scalar(eb)]),
        (false, true) => match op {
            BinOp::Add | BinOp::Mul => {
                prim(&format!("float_{stem}_scalar"), vec![eb.doc, scalar(ea)])
            }
            BinOp::Sub => helper("rsub", vec![ea.doc, eb.doc]),
            BinOp::Div => helper("rdiv", vec![ea.doc, eb.doc]),
        },
        (false, false) => {
            let prec = match op {
                BinOp::Add | BinOp::Sub => 1,
                BinOp::Mul | BinOp::Div => 2,
            };
            // Left-associative: the right operand binds tighter to keep the written grouping.
            let lhs = wrap_doc(ea, prec);
            let rhs = wrap_doc(eb, prec + 1);
            Emitted {
                doc: super::super::code::infix(lhs, op.symbol(), rhs),
                prec,
            }
        }
    }
}

pub(super) fn function(name: &str, args: &[Term], cx: &mut Cx<'_>, formula: &str) -> Emitted {
    let kinds: Vec<bool> = args.iter().map(|a| a.tensor).collect();
    let mut e: Vec<Emitted> = args.iter().map(|a| term(a, cx)).collect();
    let unary_tensor = |stem: &str, e: Emitted| prim(stem, vec![e.doc]);
    // A method of `f64`; on an operand that may break (it holds a call), called as a function
    // (`f64::exp(..)`), which breaks as calls do.
    let method = |m: &str, e: Emitted| {
        if e.doc.breakable() {
            Emitted {
                doc: call(format!("f64::{m}"), [e.doc]),
                prec: 3,
            }
        } else {
            text(format!("{}.{m}()", wrap(e, 3)), 3)
        }
    };
    match (name, kinds.as_slice()) {
        ("sigmoid", [true]) => unary_tensor("sigmoid", e.remove(0)),
        ("sigmoid", [false]) => match e.remove(0) {
            x if !x.doc.breakable() => text(format!("1.0 / (1.0 + (-{}).exp())", wrap(x, 3)), 2),
            // An operand that may break: the same expression, with `f64::exp` called as a function.
            x => {
                let negated = Doc::Cat(vec![Doc::Text("-".into()), wrap_doc(x, 3)]);
                let sum = super::super::code::infix(
                    Doc::Text("1.0".into()),
                    "+",
                    call("f64::exp", [negated]),
                );
                Emitted {
                    doc: super::super::code::infix(
                        Doc::Text("1.0".into()),
                        "/",
                        Doc::Cat(vec![Doc::Text("(".into()), sum, Doc::Text(")".into())]),
                    ),
                    prec: 2,
                }
            }
        },
        ("log", [false]) => method("ln", e.remove(0)),
        (
            "exp" | "log" | "sqrt" | "tanh" | "abs" | "sin" | "cos" | "recip" | "sign" | "erf",
            [true],
        ) => unary_tensor(&format!("float_{name}"), e.remove(0)),
        (_, [false]) => method(name, e.remove(0)),
        ("powf", [true, false]) => {
            let (a, b) = (e.remove(0), e.remove(0));
            prim("float_powf_scalar", vec![a.doc, scalar(b)])
        }
        ("powf", [true, true]) => {
            let (a, b) = (e.remove(0), e.remove(0));
            prim("float_powf", vec![a.doc, b.doc])
        }
        ("powf", [false, true]) => {
            let (a, b) = (e.remove(0), e.remove(0));
            helper("rpow", vec![a.doc, b.doc])
        }
        ("powf", [false, false]) => {
            let (a, b) = (e.remove(0), e.remove(0));
            if a.doc.breakable() || b.doc.breakable() {
                Emitted {
                    doc: call("f64::powf", [a.doc, b.doc]),
                    prec: 3,
                }
            } else {
                text(format!("{}.powf({})", wrap(a, 3), flat(&b.doc)), 3)
            }
        }
        ("relu_mask", _) => helper("relu_mask", vec![e.remove(0).doc]),
        (crate::formula::RELU_GATE, _) => {
            let (mask, value) = (e.remove(0), e.remove(0));
            helper(crate::formula::RELU_GATE, vec![mask.doc, value.doc])
        }
        ("gt" | "ge" | "lt" | "le", _) => {
            let (a, b) = (e.remove(0), e.remove(0));
            compare(name, kinds[0], kinds[1], a, b)
        }
        ("where", _) => {
            let operand = |tensor: bool, e: Emitted| -> Doc {
                let variant = if tensor { "Tensor" } else { "Number" };
                call(format!("{G}::Operand::{variant}"), [e.doc])
            };
            let (c, a, b) = (e.remove(0), e.remove(0), e.remove(0));
            let a = operand(kinds[1], a);
            let b = operand(kinds[2], b);
            helper("select", vec![c.doc, a, b])
        }
        ("clamp", _) => {
            let (x, lo, hi) = (e.remove(0), e.remove(0), e.remove(0));
            prim("float_clamp", vec![x.doc, scalar(lo), scalar(hi)])
        }
        ("dim_size", _) => {
            let (x, d) = (e.remove(0), e.remove(0));
            helper(
                name,
                vec![x.doc, d.doc, super::super::string_literal(formula).into()],
            )
        }
        ("sum_dim" | "mean_dim", _) => {
            let (x, d) = (e.remove(0), e.remove(0));
            helper(
                name,
                vec![x.doc, d.doc, super::super::string_literal(formula).into()],
            )
        }
        _ => unreachable!("validation checked `{name}`'s arguments"),
    }
}

pub(super) fn compare(name: &str, ta: bool, tb: bool, a: Emitted, b: Emitted) -> Emitted {
    let (flipped, variant) = match name {
        "gt" => ("lt", "Greater"),
        "ge" => ("le", "GreaterEqual"),
        "lt" => ("gt", "Lower"),
        _ => ("ge", "LowerEqual"),
    };
    let how = |v: &str| Doc::Text(format!("{G}::Compare::{v}"));
    let flipped_variant = match flipped {
        "gt" => "Greater",
        "ge" => "GreaterEqual",
        "lt" => "Lower",
        _ => "LowerEqual",
    };
    match (ta, tb) {
        (true, true) => helper("compare_tensors", vec![a.doc, b.doc, how(variant)]),
        (true, false) => helper("compare", vec![a.doc, b.doc, how(variant)]),
        (false, true) => helper("compare", vec![b.doc, a.doc, how(flipped_variant)]),
        (false, false) => {
            let op = match name {
                "gt" => ">",
                "ge" => ">=",
                "lt" => "<",
                _ => "<=",
            };
            text(
                format!(
                    "if {} {op} {} {{ 1.0_f64 }} else {{ 0.0_f64 }}",
                    wrap(a, 1),
                    wrap(b, 1)
                ),
                0,
            )
        }
    }
}

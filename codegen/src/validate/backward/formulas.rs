//! Gradient formulas: each parsed expression resolved against the op's inputs and typed, node
//! by node, into [`Term`]s.

use super::*;

impl<'a> Check<'a, '_> {
    /// Each float input's formula, per node (one per float field of a declared output, else
    /// one), and every name the formulas read as written (for `save`).
    #[allow(clippy::type_complexity)] // (private, and used once)
    pub(super) fn formulas(
        &mut self,
        span: &Range<usize>,
        entries: &[(Sp<String>, Sp<String>)],
    ) -> Option<(Vec<Vec<Option<Formula>>>, Vec<String>)> {
        let op = self.op;
        let slots: Vec<String> = op.float_slots().map(|slot| slot.name).collect();
        let mut out: Vec<Vec<Option<Formula>>> =
            vec![vec![None; slots.len()]; self.members.len().max(1)];
        let mut read_names: Vec<String> = Vec::new();
        let mut given = vec![false; slots.len()];
        let mut ok = true;
        for clash in op
            .inputs
            .iter()
            .filter(|i| i.name == formula::GRAD || i.name == formula::OUTPUT)
        {
            self.push(
                Diagnostic::new(span.clone(), self.key("backward"), format!("input `{}` of op `{}` has the name of a formula variable", clash.name, op.name))
                    .help(format!("rename the input: in formulas `{}` is the incoming gradient and `{}` the op's float output", formula::GRAD, formula::OUTPUT)),
            );
            ok = false;
        }
        for (key, text) in entries {
            let key_path = format!("{}.backward.{}", self.path, key.value);
            let Some(slot) = slots.iter().position(|name| *name == key.value) else {
                let other = op.inputs.iter().find(|i| i.name == key.value);
                let slot_names: Vec<&str> = slots.iter().map(String::as_str).collect();
                let member = self.member(&key.value);
                let (message, help) = match (other, member) {
                    (Some(input), _) if matches!(input.arg, Arg::Declared { .. }) => {
                        let fields: Vec<&str> = slot_names
                            .iter()
                            .copied()
                            .filter(|n| {
                                n.strip_prefix(input.name.as_str())
                                    .is_some_and(|r| r.starts_with('.'))
                            })
                            .collect();
                        (
                            format!(
                                "input `{}` of op `{}` is a declared struct: its float fields get gradients, one formula each",
                                key.value, op.name
                            ),
                            if fields.is_empty() {
                                "remove this formula: the struct has no float tensor fields"
                                    .to_owned()
                            } else {
                                format!(
                                    "key the formulas by field: {}",
                                    fields
                                        .iter()
                                        .map(|f| format!("`\"{f}\" = \"...\"`"))
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                )
                            },
                        )
                    }
                    (_, Some(Ok(_))) => (
                        format!(
                            "field `{}` of op `{}` gets no gradient: only single and optional float tensor fields do",
                            key.value, op.name
                        ),
                        "remove this formula".to_owned(),
                    ),
                    (_, Some(Err(problem))) => (
                        format!(
                            "`backward` gives a formula for `{}`, which op `{}` does not have: {problem}",
                            key.value, op.name
                        ),
                        format!(
                            "formulas are keyed by float input: {}",
                            slot_names.join(", ")
                        ),
                    ),
                    (Some(_), None) => (
                        format!(
                            "input `{}` of op `{}` gets no gradient: only single and optional float tensor inputs do",
                            key.value, op.name
                        ),
                        "remove this formula".to_owned(),
                    ),
                    (None, None) => (
                        format!(
                            "`backward` gives a formula for `{}`, which is not an input of op `{}`",
                            key.value, op.name
                        ),
                        match did_you_mean(
                            &key.value,
                            &slot_names
                                .iter()
                                .copied()
                                .filter(|n| entries.iter().all(|(k, _)| k.value != *n))
                                .collect::<Vec<_>>(),
                        ) {
                            Some(s) => format!(
                                "did you mean `{s}`? formulas are keyed by float input: {}",
                                slot_names.join(", ")
                            ),
                            None => format!(
                                "formulas are keyed by float input: {}",
                                slot_names.join(", ")
                            ),
                        },
                    ),
                };
                self.push(Diagnostic::new(key.span.clone(), key_path, message).help(help));
                ok = false;
                continue;
            };
            given[slot] = true;
            let trimmed = text.value.trim();
            if trimmed == formula::NONE {
                continue;
            }
            if trimmed.contains("::") {
                self.push(
                    Diagnostic::new(text.span.clone(), key_path, format!("formula for `{}` is a path: a backward function is not a formula", key.value))
                        .help(format!("name the function for the whole op: `backward = \"{trimmed}\"` (a string, not a table), with `no_gradient = [...]` for inputs it does not differentiate")),
                );
                ok = false;
                continue;
            }
            match formula::parse(&text.value) {
                Err(err) => {
                    self.push(
                        Diagnostic::new(
                            self.at(text, &err.span),
                            key_path,
                            format!("formula for `{}`: {}", key.value, err.message),
                        )
                        .help(err.help),
                    );
                    ok = false;
                }
                Ok(expr) => match self.term(&expr, text, &key_path) {
                    Some(term)
                        if term.tensor && !self.ranks_agree(slot, &term, text, &key_path) =>
                    {
                        ok = false;
                    }
                    Some(term) if term.tensor => {
                        if let Err(e) = super::super::linear::check(&expr, self.members.len() > 1) {
                            let grads: Vec<String> = if self.members.len() > 1 {
                                self.members
                                    .iter()
                                    .map(|m| format!("`grad.{}`", m.join(".")))
                                    .collect()
                            } else {
                                vec![format!("`{}`", crate::formula::GRAD)]
                            };
                            let example = match grads.as_slice() {
                                [one] => format!("{} * {}", one.trim_matches('`'), key.value),
                                [first, second, ..] => format!(
                                    "{} * 2 + {} * {}",
                                    first.trim_matches('`'),
                                    second.trim_matches('`'),
                                    key.value
                                ),
                                [] => unreachable!("one incoming gradient at least"),
                            };
                            self.push(
                                Diagnostic::new(self.at(text, &e.span), key_path, format!("the formula for `{}` {}, but a gradient is linear in the incoming gradients ({})", key.value, e.problem, grads.join(", ")))
                                    .help(format!("write a sum of terms that each multiply exactly one incoming gradient, e.g. \"{example}\"")),
                            );
                            ok = false;
                            continue;
                        }
                        term_names(&term, &mut read_names);
                        match self.node_formulas(&expr, term, text, &key_path, slot) {
                            Some(per_node) => {
                                for (node, f) in out.iter_mut().zip(per_node) {
                                    node[slot] = f;
                                }
                            }
                            None => ok = false,
                        }
                    }
                    Some(_) => {
                        self.push(
                            Diagnostic::new(text.span.clone(), key_path, format!("the formula for `{}` is a number, but a gradient is a tensor", key.value))
                                .help("the formula is the input's whole gradient: multiply by `grad`, e.g. \"grad * alpha\""),
                        );
                        ok = false;
                    }
                    None => ok = false,
                },
            }
        }
        for (slot, name) in slots.iter().enumerate() {
            if !given[slot] {
                // A field's key is quoted (`"p.scale" = ...`): unquoted, TOML nests it.
                let key = if name.contains('.') {
                    format!("\"{name}\"")
                } else {
                    name.clone()
                };
                self.push(
                    Diagnostic::new(span.clone(), self.key("backward"), format!("`backward` of op `{}` has no formula for float input `{name}`", op.name))
                        .help(format!("add `{key} = \"...\"` (its gradient), or `{key} = \"none\"` if no gradient flows to it")),
                );
                ok = false;
            }
        }
        ok.then_some((out, read_names))
    }

    /// A checked formula (`term`, from `expr`) as each node's: the whole formula for an op with
    /// one float output; for a declared struct output, one per float field, the other fields'
    /// incoming gradients set to zero (`None` where nothing is left).
    pub(super) fn node_formulas(
        &mut self,
        expr: &Expr,
        term: Term,
        text: &Sp<String>,
        key: &str,
        slot: usize,
    ) -> Option<Vec<Option<Formula>>> {
        let formula = |expr| Formula {
            text: text.value.trim().to_owned(),
            expr,
        };
        if self.members.is_empty() {
            return Some(vec![Some(formula(term))]);
        }
        let mut out = Vec::new();
        for (k, member) in self.members.clone().into_iter().enumerate() {
            let own = super::super::linear::node_formula(expr, &member.join("."));
            if matches!(own.kind, ExprKind::Number(v) if v == 0.0) {
                out.push(None);
                continue;
            }
            if let Some((message, help)) = super::super::ranks::field_rank_problem(self.op, slot, k)
            {
                self.push(Diagnostic::new(text.span.clone(), key, message).help(help));
                return None;
            }
            // (Every name was resolved, and reported, with the whole formula: `push` drops
            // what this pass finds.)
            self.node_pass = true;
            let typed = self.term(&own, text, key);
            self.node_pass = false;
            let Some(typed) = typed.filter(|t| t.tensor) else {
                self.push(
                    Diagnostic::new(text.span.clone(), key, format!("the formula for field `output.{}` could not be split out of `{}`", member.join("."), text.value.trim()))
                        .help("this is a burn-route bug: please report it with the formula; meanwhile, remove `backward` (with a `composition`, the generated kernel runs it)"),
                );
                return None;
            };
            out.push(Some(formula(typed)));
        }
        Some(out)
    }

    /// The span of `rel` (bytes of the formula text) in the manifest: exact when the string is
    /// written without escapes, else the whole string.
    pub(super) fn at(&self, text: &Sp<String>, rel: &Range<usize>) -> Range<usize> {
        let raw = self.source.get(text.span.clone()).unwrap_or_default();
        let quoted = raw.len() == text.value.len() + 2
            && (raw.starts_with('"') || raw.starts_with('\''))
            && raw[1..raw.len() - 1] == text.value;
        if quoted {
            let start = text.span.start + 1;
            start + rel.start..start + rel.end.max(rel.start)
        } else {
            text.span.clone()
        }
    }

    pub(super) fn term(&mut self, expr: &Expr, text: &Sp<String>, key: &str) -> Option<Term> {
        let number = |node| {
            Some(Term {
                tensor: false,
                node,
            })
        };
        match &expr.kind {
            ExprKind::Number(v) => number(TermNode::Number(*v)),
            ExprKind::Name(name) => self.name(name, &expr.span, text, key),
            ExprKind::Neg(inner) => {
                let inner = self.term(inner, text, key)?;
                Some(Term {
                    tensor: inner.tensor,
                    node: TermNode::Neg(Box::new(inner)),
                })
            }
            ExprKind::Binary(op, a, b) => {
                let a = self.term(a, text, key);
                let b = self.term(b, text, key);
                let (a, b) = (a?, b?);
                Some(gate_or_binary(*op, a, b))
            }
            ExprKind::Call {
                name,
                name_span,
                args,
            } => {
                let Some(f) = formula::function(name) else {
                    let known: Vec<&str> = formula::FUNCTIONS.iter().map(|f| f.name).collect();
                    let help = match did_you_mean(name, &known) {
                        Some(s) => format!("did you mean `{s}`? functions: {}", known.join(", ")),
                        None => format!("functions: {}", known.join(", ")),
                    };
                    self.push(
                        Diagnostic::new(
                            self.at(text, name_span),
                            key,
                            format!("unknown function `{name}`"),
                        )
                        .help(help),
                    );
                    return None;
                };
                if args.len() != f.params.len() {
                    self.push(
                        Diagnostic::new(
                            self.at(text, &expr.span),
                            key,
                            format!(
                                "`{name}` takes {} argument{}, found {}",
                                f.params.len(),
                                if f.params.len() == 1 { "" } else { "s" },
                                args.len()
                            ),
                        )
                        .help(format!("call it as {}", signature(f))),
                    );
                    return None;
                }
                let mut terms = Vec::new();
                let mut ok = true;
                for (arg, param) in args.iter().zip(f.params) {
                    if *param == Param::Dim {
                        match dim_literal(arg) {
                            Some(d) => terms.push(Term {
                                tensor: false,
                                node: TermNode::Dim(d),
                            }),
                            None => {
                                self.push(
                                    Diagnostic::new(self.at(text, &arg.span), key, format!("the dimension of `{name}` must be an integer literal"))
                                        .help(format!("write a number such as `-1` (the last dimension) or `0`: {}", signature(f))),
                                );
                                ok = false;
                            }
                        }
                        continue;
                    }
                    let Some(term) = self.term(arg, text, key) else {
                        ok = false;
                        continue;
                    };
                    let fits = match param {
                        Param::Tensor => term.tensor,
                        Param::Number => !term.tensor,
                        Param::Either | Param::Dim => true,
                    };
                    if !fits {
                        let (want, found) = if *param == Param::Tensor {
                            ("a tensor", "a number")
                        } else {
                            ("a number", "a tensor")
                        };
                        self.push(
                            Diagnostic::new(
                                self.at(text, &arg.span),
                                key,
                                format!("`{name}` takes {want} here, found {found}"),
                            )
                            .help(format!("call it as {}", signature(f))),
                        );
                        ok = false;
                    }
                    terms.push(term);
                }
                if !ok {
                    return None;
                }
                if let Some((message, help)) =
                    super::super::ranks::dim_problem(self.op, name, &terms, || {
                        let tensor = self.source.get(self.at(text, &args[0].span));
                        crate::diag::cut(tensor.unwrap_or("its tensor"))
                    })
                {
                    self.push(
                        Diagnostic::new(self.at(text, &args[1].span), key, message).help(help),
                    );
                    return None;
                }
                // `where` is a tensor through its condition; the others through any argument,
                // but for `dim_size`, a number.
                let tensor = !f.returns_number() && terms.iter().any(|t| t.tensor);
                Some(Term {
                    tensor,
                    node: TermNode::Call(f.name, terms),
                })
            }
        }
    }

    /// [`super::super::ranks::rank_problem`] for the formula of float input `slot`, pushed at the
    /// formula. Returns whether the ranks agree.
    pub(super) fn ranks_agree(
        &mut self,
        slot: usize,
        term: &Term,
        text: &Sp<String>,
        key: &str,
    ) -> bool {
        match super::super::ranks::rank_problem(self.op, slot, term) {
            None => true,
            Some((message, help)) => {
                self.push(Diagnostic::new(text.span.clone(), key, message).help(help));
                false
            }
        }
    }

    /// `grad`, `output` and their fields in a formula of an op returning a declared struct:
    /// `None` when `name` is none of them.
    pub(super) fn output_name(
        &mut self,
        name: &str,
        span: &Range<usize>,
        text: &Sp<String>,
        key: &str,
    ) -> Option<Option<Term>> {
        let tensor = |node| Some(Some(Term { tensor: true, node }));
        let op = self.op;
        let ty = match &op.output {
            Output::Declared { name, .. } => name.as_str(),
            _ => "",
        };
        let (head, rest) = match name.split_once('.') {
            Some((head, rest)) => (head, Some(rest)),
            None => (name, None),
        };
        if head != formula::GRAD && head != formula::OUTPUT {
            return None;
        }
        if self.node_pass {
            // Only the other fields' values are left dotted.
            return match rest {
                Some(_) => tensor(TermNode::Kept(name.to_owned())),
                None if head == formula::GRAD => tensor(TermNode::Grad),
                None => tensor(TermNode::Output),
            };
        }
        let fields: Vec<String> = self.members.iter().map(|m| m.join(".")).collect();
        let listed = |head: &str| {
            fields
                .iter()
                .map(|f| format!("`{head}.{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (message, help) = match rest {
            Some(rest) if fields.iter().any(|f| f == rest) => {
                return if head == formula::GRAD {
                    tensor(TermNode::Grad)
                } else {
                    tensor(TermNode::Kept(name.to_owned()))
                };
            }
            // One float field: `grad` is its incoming gradient.
            None if head == formula::GRAD && fields.len() == 1 => return tensor(TermNode::Grad),
            None if head == formula::GRAD => (
                format!(
                    "op `{}` returns declared struct `{ty}`, whose float fields each have an incoming gradient: `grad` alone names none of them",
                    op.name
                ),
                format!("write {}", listed(head)),
            ),
            None => (
                format!(
                    "`output` of op `{}` is declared struct `{ty}`, not one tensor",
                    op.name
                ),
                format!("read a float field: {}", listed(head)),
            ),
            Some(rest) => {
                let hint = match did_you_mean(
                    rest,
                    &fields.iter().map(String::as_str).collect::<Vec<_>>(),
                ) {
                    Some(s) => format!("did you mean `{head}.{s}`? "),
                    None => String::new(),
                };
                (
                    format!(
                        "`{name}` is not a float tensor field of the output of op `{}` (declared struct `{ty}`)",
                        op.name
                    ),
                    format!(
                        "{hint}formulas read the output's float fields: {}",
                        listed(head)
                    ),
                )
            }
        };
        self.push(Diagnostic::new(self.at(text, span), key, message).help(help));
        Some(None)
    }

    pub(super) fn name(
        &mut self,
        name: &str,
        span: &Range<usize>,
        text: &Sp<String>,
        key: &str,
    ) -> Option<Term> {
        let tensor = |node| Some(Term { tensor: true, node });
        if !self.members.is_empty()
            && let Some(found) = self.output_name(name, span, text, key)
        {
            return found;
        }
        if name == formula::GRAD {
            return tensor(TermNode::Grad);
        }
        if name == formula::OUTPUT {
            return tensor(TermNode::Output);
        }
        if name == formula::NONE {
            self.push(
                Diagnostic::new(self.at(text, span), key, "`none` is a whole formula, not a value")
                    .help("write `\"none\"` alone for an input without a gradient; a zero gradient inside a formula is `0`"),
            );
            return None;
        }
        let op = self.op;
        if name.contains('.') {
            let problem = match self.member(name) {
                Some(Ok(Member::Slot(i))) => {
                    let slot = op.float_slots().nth(i).expect("a slot");
                    if slot.tensor.container == Container::One {
                        return tensor(TermNode::Input(name.to_owned()));
                    }
                    format!(
                        "`{name}` is optional (`container = \"option\"`: it may be absent), which a formula cannot read"
                    )
                }
                Some(Ok(Member::Plain(ty))) if primitive::is_number(ty) => {
                    return Some(Term {
                        tensor: false,
                        node: TermNode::Scalar(name.to_owned()),
                    });
                }
                Some(Ok(Member::Plain(ty))) => format!(
                    "`{name}` is a `{ty}`; formulas read numbers of the types {}",
                    primitive::NUMBERS.join(", ")
                ),
                Some(Ok(Member::Other(what))) => {
                    format!("{what}; formulas read float tensors and numbers")
                }
                Some(Err(problem)) => problem,
                None if name.split('.').next() == Some(formula::OUTPUT) => format!(
                    "`{name}`: the output of op `{}` is not a declared struct, so `output` has no fields",
                    op.name
                ),
                None => {
                    let head = name.split('.').next().unwrap_or_default();
                    format!("unknown name `{head}` in a formula of op `{}`", op.name)
                }
            };
            let readable = self.readable_members();
            let help = if readable.is_empty() {
                format!(
                    "a dotted name reads a float tensor or number field of a declared struct input, and op `{}` has none: write the formula with its inputs",
                    op.name
                )
            } else {
                format!(
                    "a dotted name reads a float tensor or number field of a declared struct input; op `{}` has {}",
                    op.name,
                    readable
                        .iter()
                        .map(|r| format!("`{r}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            self.push(Diagnostic::new(self.at(text, span), key, problem).help(help));
            return None;
        }
        let Some(input) = op.inputs.iter().find(|i| i.name == name) else {
            let mut names: Vec<&str> = vec![formula::GRAD, formula::OUTPUT];
            names.extend(op.inputs.iter().map(|i| i.name.as_str()));
            let function_like = formula::function(name).is_some();
            let help = if function_like {
                format!("`{name}` is a function: call it, as in `{name}(x)`")
            } else {
                match did_you_mean(name, &names) {
                    Some(s) => format!(
                        "did you mean `{s}`? formulas read `grad`, `output` and the op's inputs"
                    ),
                    None => format!(
                        "formulas read `grad`, `output` and the op's inputs: {}",
                        names[2..].join(", ")
                    ),
                }
            };
            self.push(
                Diagnostic::new(
                    self.at(text, span),
                    key,
                    format!("unknown name `{name}` in a formula of op `{}`", op.name),
                )
                .help(help),
            );
            return None;
        };
        let problem = match &input.arg {
            Arg::Tensor(t) if t.kind == TensorKind::Float && t.container == Container::One => {
                return tensor(TermNode::Input(name.to_owned()));
            }
            Arg::Tensor(t) if t.kind == TensorKind::Float => format!(
                "`{name}` is {}, which a formula cannot read",
                if t.container == Container::Option {
                    "optional (`container = \"option\"`: it may be absent)"
                } else {
                    "a `vec` of tensors"
                }
            ),
            Arg::Tensor(t) => format!(
                "`{name}` is {} tensor; formulas read float tensors and numbers",
                article(t.kind.key())
            ),
            Arg::Plain(ty) if primitive::is_number(ty) => {
                return Some(Term {
                    tensor: false,
                    node: TermNode::Scalar(name.to_owned()),
                });
            }
            Arg::Plain(ty) => format!(
                "`{name}` is a `{ty}`; formulas read numbers of the types {}",
                primitive::NUMBERS.join(", ")
            ),
            Arg::Device => format!("`{name}` is the device, not a value"),
            Arg::Declared { name: ty, .. } => format!(
                "`{name}` is declared type `{ty}`, not one value: a formula reads its fields (`{name}.field`)"
            ),
        };
        self.push(
            Diagnostic::new(self.at(text, span), key, problem)
                .help("use the function form for this op: `backward = \"crate::path::to_fn\"` gets every saved value"),
        );
        None
    }
}

pub(super) fn signature(f: &formula::Function) -> String {
    let params: Vec<&str> = f
        .params
        .iter()
        .map(|p| match p {
            Param::Tensor => "tensor",
            Param::Number => "number",
            Param::Either => "tensor or number",
            Param::Dim => "dim",
        })
        .collect();
    format!("`{}({})`", f.name, params.join(", "))
}

pub(super) fn dim_literal(expr: &Expr) -> Option<i64> {
    match &expr.kind {
        ExprKind::Number(v) if v.fract() == 0.0 && v.abs() < 1e9 => Some(*v as i64),
        ExprKind::Neg(inner) => dim_literal(inner).map(|d| -d),
        _ => None,
    }
}

pub(super) fn term_names(term: &Term, acc: &mut Vec<String>) {
    let mut push = |n: &str| {
        if !acc.iter().any(|a| a == n) {
            acc.push(n.to_owned());
        }
    };
    match &term.node {
        TermNode::Output => push(formula::OUTPUT),
        TermNode::Input(n) | TermNode::Scalar(n) | TermNode::Kept(n) => push(n),
        TermNode::Number(_) | TermNode::Dim(_) | TermNode::Grad => {}
        TermNode::Neg(inner) => term_names(inner, acc),
        TermNode::Binary(_, a, b) => {
            term_names(a, acc);
            term_names(b, acc);
        }
        TermNode::Call(_, args) => args.iter().for_each(|a| term_names(a, acc)),
    }
}

/// `a op b`, except a tensor times `relu_mask(m)` (either order), which becomes the internal
/// call `relu_gate(m, tensor)`: Burn's `relu_backward`, one masked pass where the product would
/// be a comparison, its cast to floats and a multiplication (`rt::grad::relu_gate`).
pub(super) fn gate_or_binary(op: formula::BinOp, a: Term, b: Term) -> Term {
    let is_mask = |t: &Term| matches!(&t.node, TermNode::Call("relu_mask", _));
    if op == formula::BinOp::Mul && a.tensor && b.tensor && (is_mask(&a) || is_mask(&b)) {
        let (mask, value) = if is_mask(&b) { (b, a) } else { (a, b) };
        let TermNode::Call(_, mut args) = mask.node else {
            unreachable!("checked to be a relu_mask call")
        };
        return Term {
            tensor: true,
            node: TermNode::Call(formula::RELU_GATE, vec![args.remove(0), value]),
        };
    }
    Term {
        tensor: a.tensor || b.tensor,
        node: TermNode::Binary(op, Box::new(a), Box::new(b)),
    }
}

/// How a formula table keys `name`: bare, or quoted when dotted (`"p.scale"`).
pub(super) fn formula_key(name: &str) -> String {
    if name.contains('.') {
        format!("\"{name}\"")
    } else {
        name.to_owned()
    }
}

//! An op's declared backward pass (`backward`, `save`, `checkpoint`) → [`Backward`]: formulas
//! parsed, their names resolved and every node typed, what the pass keeps worked out.

use std::ops::Range;

use crate::diag::{Diagnostic, Diagnostics, Reported, did_you_mean};
use crate::formula::{self, Expr, ExprKind, Param};
use crate::ir::{
    Arg, Backward, BackwardForm, Container, Field, FieldSource, Formula, MemberType, Op, Output,
    Policy, SavedValue, TensorKind, Term, TermNode, TypeBody, TypeDef,
};
use crate::keys::HAND_WRITTEN;
use crate::model::{BackwardSpec, OpSpec, Sp};

mod formulas;
mod members;
mod save;

use formulas::{formula_key, term_names};

// The plain types a formula may read as numbers: core's `primitive::NUMBERS`.
use burn_route_core::primitive;

/// What lowering a backward pass needs besides the op.
pub(super) struct Cx<'a> {
    pub source: &'a str,
    pub location: String,
    pub bounds: &'a [String],
    pub types: &'a [TypeDef],
}

struct Check<'a, 'd> {
    spec: &'a OpSpec,
    op: &'a Op,
    path: String,
    /// The run's diagnostics.
    diags: &'d mut Diagnostics,
    source: &'a str,
    types: &'a [TypeDef],
    /// The float fields of the op's declared output (field names down to each), one node of
    /// the backward pass each; empty when the output is not a declared struct.
    members: Vec<Vec<String>>,
    /// Typing one node's formula (the other outputs' gradients already set to zero): `grad` and
    /// `output` are the node's own, and a diagnostic would repeat one already given, so none is
    /// pushed.
    node_pass: bool,
}

/// What a dotted name (`p.scale`, `p.inner.eps`) reaches in a declared struct input.
enum Member<'a> {
    /// A member that is a float tensor slot.
    Slot(usize),
    /// A plain field of this type.
    Plain(&'a str),
    /// A field of another kind: what it is, for the message.
    Other(String),
}

/// Lowers `spec`'s backward pass for `op` (already lowered otherwise). `Ok(None)` when the op
/// declares none.
///
/// # Errors
///
/// When it found a problem, each pushed into `diags`.
pub(super) fn lower(
    spec: &OpSpec,
    op: &Op,
    cx: &Cx<'_>,
    diags: &mut Diagnostics,
) -> Result<Option<Backward>, Reported> {
    let before = diags.error_count();
    let mut c = Check {
        spec,
        op,
        path: format!("op[{}]", spec.index),
        diags,
        source: cx.source,
        types: cx.types,
        members: Vec::new(),
        node_pass: false,
    };
    let result = c.backward(cx);
    if c.diags.error_count() == before {
        Ok(result)
    } else {
        Err(Reported)
    }
}

impl<'a> Check<'a, '_> {
    fn push(&mut self, d: Diagnostic) {
        if !self.node_pass {
            self.diags.push(d);
        }
    }

    fn key(&self, key: &str) -> String {
        format!("{}.{key}", self.path)
    }

    /// `save`, `checkpoint` and `no_gradient` belong to a declared backward pass: each one
    /// present is reported with `why` (how the op has none) and `help`.
    fn stray_keys(&mut self, why: &str, help: &str) {
        let spec = self.spec;
        for (key, span) in [
            ("save", spec.save.as_ref().map(|s| s.span.clone())),
            (
                "checkpoint",
                spec.checkpoint.as_ref().map(|s| s.span.clone()),
            ),
            (
                "no_gradient",
                spec.no_gradient.as_ref().map(|s| s.span.clone()),
            ),
        ] {
            if let Some(span) = span {
                self.push(
                    Diagnostic::new(
                        span,
                        self.key(key),
                        format!(
                            "`{key}` of op `{}` belongs to a declared backward pass, {why}",
                            self.op.name
                        ),
                    )
                    .help(if key == "no_gradient" && help.starts_with("add `backward`") {
                        "add `backward = \"path::to::fn\"` (a function computing the gradients; formulas say `x = \"none\"` instead), or remove this key"
                    } else {
                        help
                    }),
                );
            }
        }
    }

    fn backward(&mut self, cx: &Cx<'_>) -> Option<Backward> {
        let spec = self.spec;
        let op = self.op;
        let Some(backward) = &spec.backward else {
            // Advice that leads out: `backward` is only an option where the op may declare one.
            let help = if op.composite.is_some() {
                "remove this key: a composite op's gradient comes from its composition"
            } else if op.policy != Policy::Differentiable {
                "remove this key: only a `differentiable` op has a backward pass"
            } else if op.asynchronous {
                "remove this key: an async op's backward pass is its `Autodiff<B, C>` kernel, written by hand"
            } else {
                "add `backward` (formulas or a function path), or remove this key"
            };
            self.stray_keys("and the op declares none", help);
            return None;
        };
        let backward_span = match backward {
            BackwardSpec::Function(f) => f.span.clone(),
            BackwardSpec::Formulas { span, .. } => span.clone(),
            BackwardSpec::HandWritten(span) => span.clone(),
        };
        if op.composite.is_some() {
            self.push(
                Diagnostic::new(
                    backward_span,
                    self.key("backward"),
                    format!("op `{}` is composite: its gradient comes from its composition, so it takes no `backward`", op.name),
                )
                .help("remove `backward` (the composite function's own gradient is used), or make it the op's `composition` (the default body of its kernels) instead of `composite` and keep `backward`"),
            );
            return None;
        }
        if op.policy != Policy::Differentiable {
            self.push(
                Diagnostic::new(
                    backward_span,
                    self.key("backward"),
                    format!(
                        "op `{}` declares a backward pass, but its autodiff policy is `{}`: tracked inputs never reach it",
                        op.name,
                        op.policy.key()
                    ),
                )
                .help("set `autodiff = \"differentiable\"`, or remove `backward`"),
            );
            return None;
        }
        if let BackwardSpec::HandWritten(_) = backward {
            self.stray_keys(
                &format!("and op `{}` writes its `Autodiff<B, C>` kernel by hand (`backward = \"hand-written\"`)", op.name),
                "remove this key: the hand-written kernel registers its own backward pass",
            );
            return None;
        }
        self.declared_inputs(&backward_span)?;
        self.members = self.output_members(&backward_span, backward)?;
        let output_path = if self.members.is_empty() {
            self.float_output(&backward_span)?
        } else {
            Vec::new()
        };
        self.float_inputs_are_slots(&backward_span)?;
        // (An unknown mode is reported; the rest is still checked.)
        let asked = self.checkpoint().unwrap_or(false);
        // A refused `checkpoint` is reported, and the rest of the pass is still checked (as
        // without it), so that every error of the op shows in one run.
        let mut refused = false;
        if asked
            && op
                .inputs
                .iter()
                .any(|i| matches!(i.arg, Arg::Declared { .. }))
        {
            let span = self
                .spec
                .checkpoint
                .as_ref()
                .map_or(backward_span.clone(), |c| c.span.clone());
            self.push(
                Diagnostic::new(span, self.key("checkpoint"), format!("op `{}` takes a declared type, and `checkpoint = \"recompute\"` does not keep one to run the op again yet", op.name))
                    .help("remove `checkpoint` (the backward pass keeps what it reads), or pass the struct's fields as inputs of their own"),
            );
            refused = true;
        }
        if asked && !self.members.is_empty() {
            let span = self
                .spec
                .checkpoint
                .as_ref()
                .map_or(backward_span.clone(), |c| c.span.clone());
            self.push(
                Diagnostic::new(span, self.key("checkpoint"), format!("op `{}` returns a declared type, and `checkpoint = \"recompute\"` does not run an op again for one of its fields yet", op.name))
                    .help("remove `checkpoint` (the backward pass keeps what it reads)"),
            );
            refused = true;
        }
        let recompute = asked && !refused;
        let save = self.save(&output_path);
        let mut reads = vec![false; op.float_slots().count()];
        let mut reads_output = false;
        let mut fields: Vec<Field> = Vec::new();
        let mut bounds = cx.bounds.to_vec();
        let mut gradients = vec![true; reads.len()];
        let mut member: Vec<String> = Vec::new();
        let mut siblings: Vec<Backward> = Vec::new();
        let form = match backward {
            BackwardSpec::Function(path) => {
                let path = self.function_path(path)?;
                // `crate::m::Trait::method`: the segment before the function names a type.
                let method_of = path.rsplit_once("::").and_then(|(prefix, _)| {
                    let owner = prefix.rsplit("::").next().unwrap_or(prefix);
                    owner
                        .starts_with(|c: char| c.is_ascii_uppercase())
                        .then(|| prefix.to_owned())
                });
                if let Some(tr) = &method_of
                    && !bounds.contains(tr)
                {
                    bounds.push(tr.clone());
                }
                let args = match save? {
                    Some(args) => args,
                    None => self.default_save(),
                };
                for arg in &args {
                    match arg {
                        SavedValue::Float(i) => reads[*i] = true,
                        SavedValue::Output => reads_output = true,
                        SavedValue::Field(name) => {
                            fields.push(self.field(name, &output_path));
                        }
                    }
                }
                gradients = self.no_gradient(&gradients)?;
                BackwardForm::Function {
                    path,
                    method_of,
                    args,
                }
            }
            BackwardSpec::HandWritten(_) => unreachable!("a hand-written kernel returned above"),
            BackwardSpec::Formulas { span, entries } => {
                let save = save?;
                let (nodes, read_names) = self.formulas(span, entries)?;
                if let Some(save) = save {
                    self.save_matches_reads(&save, &read_names)?;
                }
                if let Some(list) = &spec.no_gradient {
                    self.push(
                        Diagnostic::new(list.span.clone(), self.key("no_gradient"), format!("op `{}` declares its backward pass as formulas: an input without a gradient is written there", op.name))
                            .help(format!(
                                "write {} in `backward`, and remove `no_gradient`",
                                list.value
                                    .iter()
                                    .map(|n| format!("`{} = \"none\"`", formula_key(&n.value)))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )),
                    );
                    return None;
                }
                // One node per float output: the first is this pass, the others its siblings.
                let mut passes = Vec::new();
                for (k, formulas) in nodes.into_iter().enumerate() {
                    let mut node_reads = vec![false; reads.len()];
                    let mut node_output = false;
                    let mut node_fields: Vec<Field> = Vec::new();
                    let mut names: Vec<String> = Vec::new();
                    for f in formulas.iter().flatten() {
                        term_names(&f.expr, &mut names);
                    }
                    for name in &names {
                        if name == formula::OUTPUT {
                            node_output = true;
                        } else if let Some(i) = Backward::slot(op, name) {
                            node_reads[i] = true;
                        } else {
                            node_fields.push(self.field(name, &output_path));
                        }
                    }
                    let node_gradients = formulas.iter().map(Option::is_some).collect();
                    passes.push(Backward {
                        form: BackwardForm::Formulas(formulas),
                        recompute: false,
                        reads: node_reads,
                        reads_output: node_output,
                        gradients: node_gradients,
                        fields: node_fields,
                        output_path: Vec::new(),
                        member: self.members.get(k).cloned().unwrap_or_default(),
                        siblings: Vec::new(),
                        bounds: Vec::new(),
                        location: String::new(),
                    });
                }
                let mut passes = passes.into_iter();
                let first = passes.next().expect("a backward pass has a node");
                reads = first.reads;
                reads_output = first.reads_output;
                fields = first.fields;
                gradients = first.gradients;
                member = first.member;
                siblings = passes
                    .map(|b| Backward {
                        bounds: bounds.clone(),
                        location: cx.location.clone(),
                        ..b
                    })
                    .collect();
                first.form
            }
        };
        if recompute {
            // The recomputation runs the kernel: it needs every argument.
            for input in &op.inputs {
                let float = matches!(&input.arg, Arg::Tensor(t) if t.kind == TensorKind::Float);
                if !float && !fields.iter().any(|f| f.name == input.name) {
                    fields.push(Field {
                        name: input.name.clone(),
                        source: FieldSource::Input(input.name.clone()),
                    });
                }
            }
        }
        let mut all_fields = fields.clone();
        for f in siblings.iter().flat_map(|s| &s.fields) {
            if !all_fields.contains(f) {
                all_fields.push(f.clone());
            }
        }
        self.fields_are_owned(&all_fields, recompute)?;
        if refused {
            return None;
        }
        Some(Backward {
            form,
            recompute,
            reads,
            reads_output,
            gradients,
            fields,
            output_path,
            member,
            siblings,
            bounds,
            location: cx.location.clone(),
        })
    }

    /// `no_gradient`: the float inputs a backward function gives no gradient.
    fn no_gradient(&mut self, all: &[bool]) -> Option<Vec<bool>> {
        let mut gradients = all.to_vec();
        let Some(list) = &self.spec.no_gradient else {
            return Some(gradients);
        };
        let slots: Vec<String> = self.op.float_slots().map(|slot| slot.name).collect();
        let names: Vec<&str> = slots.iter().map(String::as_str).collect();
        let mut ok = true;
        for (i, entry) in list.value.iter().enumerate() {
            let key = format!("{}.no_gradient[{i}]", self.path);
            match slots.iter().position(|s| *s == entry.value) {
                Some(slot) if !gradients[slot] => {
                    self.push(
                        Diagnostic::new(
                            entry.span.clone(),
                            key,
                            format!("`no_gradient` lists `{}` twice", entry.value),
                        )
                        .help("list each input once"),
                    );
                    ok = false;
                }
                Some(slot) => gradients[slot] = false,
                None => {
                    let help = match did_you_mean(&entry.value, &names) {
                        Some(s) => format!(
                            "did you mean `{s}`? `no_gradient` lists float inputs: {}",
                            names.join(", ")
                        ),
                        None => format!("`no_gradient` lists float inputs: {}", names.join(", ")),
                    };
                    self.push(
                        Diagnostic::new(
                            entry.span.clone(),
                            key,
                            format!(
                                "`{}` is not a float input of op `{}`",
                                entry.value, self.op.name
                            ),
                        )
                        .help(help),
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(gradients)
    }

    /// The path of the one float output.
    fn float_output(&mut self, at: &Range<usize>) -> Option<Vec<usize>> {
        let mut found = Vec::new();
        float_leaves(&self.op.output, &mut Vec::new(), &mut found);
        match found.as_slice() {
            [(path, Container::One)] => Some(path.clone()),
            [] => {
                self.push(
                    Diagnostic::new(at.clone(), self.key("backward"), format!("op `{}` declares a backward pass but returns no float tensor to differentiate", self.op.name))
                        .help("remove `backward`: an op without a float output has no gradient to propagate (and write `autodiff = \"detach\"`, which is what it does)"),
                );
                None
            }
            _ => {
                let what = if found.len() == 1 {
                    "an `option` or `vec` of float tensors".to_owned()
                } else {
                    format!("{} float outputs", found.len())
                };
                self.push(
                    Diagnostic::new(at.clone(), self.key("backward"), format!("op `{}` returns {what}; a declared backward pass differentiates exactly one float tensor output", self.op.name))
                        .help("write the op's `Autodiff<B, C>` implementation by hand (remove `backward`), or return one float tensor (other outputs may be int, bool or plain)"),
                );
                None
            }
        }
    }

    fn function_path(&mut self, path: &Sp<String>) -> Option<String> {
        let problem = match syn::parse_str::<syn::Path>(path.value.trim()) {
            Err(err) => format!("is not a Rust path: {err}"),
            Ok(p) if p.segments.len() < 2 => "is not a path with `::`".to_owned(),
            Ok(p) => match super::types::function_path_problem(&p) {
                None => return Some(crate::canon::path_text(&p)),
                Some(problem) => problem,
            },
        };
        // A misspelt `"hand-written"` (`"Hand-Written"`, `"hand_written"`) is no path either.
        let help = match crate::diag::did_you_mean(&path.value, &[HAND_WRITTEN]) {
            Some(close) => format!("did you mean `backward = \"{close}\"` (the op's `Autodiff<B, C>` kernel written by hand)? Else name a function generic over the backend by its full path, e.g. \"crate::kernels::my_op_backward\""),
            None => "name a function generic over the backend by its full path, e.g. \"crate::kernels::my_op_backward\"; or write formulas: `backward = { x = \"grad * y\" }`".to_owned(),
        };
        self.push(
            Diagnostic::new(
                path.span.clone(),
                self.key("backward"),
                format!("backward function `{}` {problem}", path.value),
            )
            .help(help),
        );
        None
    }
}

fn article(kind: &str) -> String {
    if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
        format!("an {kind}")
    } else {
        format!("a {kind}")
    }
}

/// Every float tensor leaf of `out`: its tuple path and container.
fn float_leaves(out: &Output, path: &mut Vec<usize>, acc: &mut Vec<(Vec<usize>, Container)>) {
    match out {
        Output::Tensor(t) if t.kind == TensorKind::Float => acc.push((path.clone(), t.container)),
        Output::Tuple(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(i);
                float_leaves(item, path, acc);
                path.pop();
            }
        }
        _ => {}
    }
}

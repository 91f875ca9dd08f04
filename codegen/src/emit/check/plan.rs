//! How the op check calls an op: the tensors it draws, the declared values it builds from them,
//! and the op's arguments ([`CallPlan`]).

use super::*;

/// One tensor the check generates (a `check::Input`), in the order `check::Args` counts them.
pub(super) struct CheckInput {
    /// As routing errors name it: `x`, or a path into a declared input (`p.scale`,
    /// `fill.From.0`).
    pub(super) name: String,
    pub(super) tensor: TensorArg,
    pub(super) shape: Vec<Vec<usize>>,
}

/// How the check calls the op: the tensors it generates, the `let`s that build declared values
/// from them (inner values first), and the op's arguments.
pub(super) struct CallPlan {
    pub(super) inputs: Vec<CheckInput>,
    pub(super) lets: Vec<(String, Doc)>,
    pub(super) args: Vec<Doc>,
}

/// What planning a call reads: the op, its manifest, its tensor inputs' shapes, the paths.
pub(super) struct PlanCx<'a> {
    pub(super) ir: &'a Ir,
    pub(super) op: &'a Op,
    pub(super) shapes: &'a [Option<Vec<Vec<usize>>>],
    pub(super) config: &'a CheckConfig,
}

impl CallPlan {
    pub(super) fn new(
        ir: &Ir,
        op: &Op,
        shapes: &[Option<Vec<Vec<usize>>>],
        config: &CheckConfig,
    ) -> Self {
        let cx = PlanCx {
            ir,
            op,
            shapes,
            config,
        };
        let mut plan = CallPlan {
            inputs: Vec::new(),
            lets: Vec::new(),
            args: Vec::new(),
        };
        for (i, input) in op.inputs.iter().enumerate() {
            let arg: Doc = match &input.arg {
                Arg::Tensor(t) => {
                    let shape = shapes[i].clone().unwrap_or_else(|| vec![vec![2, 3]]);
                    plan.tensor(&input.name, t, shape).into()
                }
                Arg::Plain(ty) => plain_value(op, &input.name, ty, config),
                Arg::Device => "args.device().as_dispatch()".into(),
                Arg::Declared { name, borrowed, .. } => {
                    let binding = names::check_arg(i, 0);
                    let mut count = 1;
                    let value = plan.declared(&cx, name, &input.name, i, &mut count);
                    plan.lets.push((binding.clone(), value));
                    if *borrowed {
                        format!("&{binding}").into()
                    } else {
                        binding.into()
                    }
                }
            };
            plan.args.push(arg);
        }
        plan
    }

    /// Registers tensor `name` and returns the expression that reads it from `check::Args`.
    pub(super) fn tensor(&mut self, name: &str, t: &TensorArg, shape: Vec<Vec<usize>>) -> String {
        let index = self.inputs.len();
        self.inputs.push(CheckInput {
            name: name.to_owned(),
            tensor: t.clone(),
            shape,
        });
        let method = t
            .kind
            .check_name(t.container)
            .expect("quantized inputs are not checked");
        let taken = format!("args.{method}({index})");
        match (t.borrowed, t.container) {
            (false, _) => taken,
            (true, Container::Option) => format!("{taken}.as_ref()"),
            (true, _) => format!("&{taken}"),
        }
    }

    /// The value of declared type `ty` at `path` (inside op input `input`): a struct literal,
    /// or the first variant of an enum that holds a tensor (the one that routes the call).
    /// Nested declared values are bound first (`names::check_arg`).
    pub(super) fn declared(
        &mut self,
        cx: &PlanCx<'_>,
        ty: &str,
        path: &str,
        input: usize,
        count: &mut usize,
    ) -> Doc {
        let PlanCx {
            ir,
            op,
            shapes,
            config,
        } = *cx;
        let def = ir.type_def(ty);
        let head = format!(
            "{}::{}::<Dispatch>",
            config.ops,
            names::primitive_type(&def.name)
        );
        let (head, path, members, kind) = match &def.body {
            TypeBody::Struct(fields) => (head, path.to_owned(), fields, VariantKind::Struct),
            TypeBody::Enum(_) => {
                let v = crate::ir::checked_variant(&ir.types, ty)
                    .expect("validation refuses a declared type without tensors");
                (
                    format!("{head}::{}", v.name),
                    format!("{path}.{}", v.name),
                    &v.fields,
                    v.kind,
                )
            }
        };
        let mut values = Vec::new();
        for (k, m) in members.iter().enumerate() {
            let label = m.name.clone().unwrap_or_else(|| k.to_string());
            let at = format!("{path}.{label}");
            let value: Doc = match &m.ty {
                MemberType::Tensor(t) => {
                    let shape = match op.check.shapes.iter().find(|(n, _)| n == &at) {
                        Some((_, shape)) => shape.clone(),
                        None => leaf_shape(op, shapes, t),
                    };
                    self.tensor(&at, t, shape).into()
                }
                MemberType::Plain(ty) => plain_value(op, &at, ty, config),
                MemberType::Declared(inner) => {
                    let binding = names::check_arg(input, *count);
                    *count += 1;
                    let value = self.declared(cx, inner, &at, input, count);
                    self.lets.push((binding.clone(), value));
                    binding.into()
                }
            };
            values.push(match &m.name {
                Some(name) => crate::emit::code::cat([format!("{name}: ").into(), value]),
                None => value,
            });
        }
        match kind {
            VariantKind::Struct => crate::emit::code::cat([
                format!("{head} ").into(),
                crate::emit::code::struct_literal(values),
            ]),
            VariantKind::Tuple => call(head, values),
            VariantKind::Unit => head.into(),
        }
    }
}

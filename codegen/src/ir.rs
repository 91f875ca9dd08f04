//! The validated, resolved form of a manifest that the emitters read.
//!
//! Everything here has been checked: names are identifiers, kinds and policies are enums, Rust
//! types, paths and cfg predicates were parsed and are kept as canonical source text
//! (`Vec<usize>`, `feature = "cube"`). Emitters only print this.

/// The words the manifest and the runtime share, defined once in `burn-route-core`.
pub use burn_route_core::{
    BackendId as BackendName, Container, FloatDtype, Policy, ShapeRule, TensorKind,
};

/// A validated manifest.
#[derive(Clone, Debug)]
pub struct Ir {
    /// Display name of the manifest file, used in generated docs and runtime messages.
    pub manifest_name: String,
    /// The main extension trait.
    pub trait_name: String,
    /// The trait with the `Autodiff<B, C>` kernels of the main trait's differentiable ops.
    pub autodiff_trait: String,
    /// cfg predicate (in the consuming crate) that gates autodiff routing.
    pub autodiff_cfg: String,
    /// Default backends, in manifest order.
    pub backends: Vec<Backend>,
    /// The ops, in manifest order.
    pub ops: Vec<Op>,
    /// The traits, in order of first use by an op.
    pub groups: Vec<TraitGroup>,
    /// The declared types (`[[type]]`), in manifest order.
    pub types: Vec<TypeDef>,
    /// What validation warns about (a declared type no op uses): reported, not fatal.
    pub warnings: Vec<crate::diag::Diagnostic>,
}

impl Ir {
    /// The ops of group `group`, in manifest order.
    pub fn ops_of(&self, group: usize) -> impl Iterator<Item = &Op> {
        self.ops.iter().filter(move |op| op.group == group)
    }

    /// Every cfg predicate the generated code is compiled under: autodiff's and each backend's.
    pub fn cfgs(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.autodiff_cfg.as_str()).chain(
            self.ops
                .iter()
                .flat_map(|op| op.backends.iter())
                .chain(&self.backends)
                .filter_map(|b| b.cfg.as_deref()),
        )
    }

    /// Whether group `group` has differentiable ops whose `Autodiff<B, C>` kernels are written
    /// by hand (and so needs its companion autodiff trait).
    pub fn needs_autodiff_trait(&self, group: usize) -> bool {
        self.groups[group].needs_autodiff_trait(self.ops_of(group))
    }

    /// Whether any op gets a generated `Autodiff<B, C>` implementation (from its `backward`
    /// or its composition), in the generated `autodiff` module.
    pub fn has_derived_autodiff(&self) -> bool {
        self.ops.iter().any(Op::generated_autodiff)
    }
}

impl Ir {
    /// The declared type `name` (validation resolved every use).
    pub fn type_def(&self, name: &str) -> &TypeDef {
        self.types
            .iter()
            .find(|t| t.name == name)
            .expect("validation resolves every declared type")
    }
}

/// Whether declared type `name` is a struct whose every field is a tensor or such a struct.
pub fn tensors_only(types: &[TypeDef], name: &str) -> bool {
    fn visit(types: &[TypeDef], name: &str, depth: usize) -> bool {
        let Some(def) = types.iter().find(|t| t.name == name) else {
            return false;
        };
        match &def.body {
            TypeBody::Enum(_) => false,
            TypeBody::Struct(fields) => fields.iter().all(|m| match &m.ty {
                MemberType::Tensor(_) => true,
                MemberType::Plain(_) => false,
                MemberType::Declared(inner) => {
                    depth < types.len() && visit(types, inner, depth + 1)
                }
            }),
        }
    }
    visit(types, name, 0)
}

/// The tensors of declared type `name` among `types`, in declaration order (a nested type's in
/// place, every variant's in turn): what routing looks through and names in errors.
pub fn leaves(types: &[TypeDef], name: &str) -> Vec<Leaf> {
    members(types, name)
        .into_iter()
        .filter_map(|(path, m)| match m {
            MemberType::Tensor(t) => Some(Leaf {
                path,
                tensor: t.clone(),
            }),
            MemberType::Plain(_) | MemberType::Declared(_) => None,
        })
        .collect()
}

/// The tensor and plain members of declared type `name` among `types` with their paths, in
/// declaration order (a nested type's members in place of it, every variant's in turn).
pub fn members<'a>(types: &'a [TypeDef], name: &str) -> Vec<(Vec<Step>, &'a MemberType)> {
    let mut out = Vec::new();
    collect_members(types, name, &mut Vec::new(), &mut out);
    out
}

fn collect_members<'a>(
    types: &'a [TypeDef],
    name: &str,
    path: &mut Vec<Step>,
    out: &mut Vec<(Vec<Step>, &'a MemberType)>,
) {
    // Validation refuses recursive types; the depth bound only keeps a bug from looping.
    let Some(def) = types.iter().find(|t| t.name == name) else {
        return;
    };
    if path.len() > types.len() {
        return;
    }
    let mut member = |step: Step, m: &'a Member, path: &mut Vec<Step>| {
        path.push(step);
        match &m.ty {
            MemberType::Declared(inner) => collect_members(types, inner, path, out),
            ty => out.push((path.clone(), ty)),
        }
        path.pop();
    };
    match &def.body {
        TypeBody::Struct(fields) => {
            for m in fields {
                let field = m.name.clone().unwrap_or_default();
                let step = Step::Field {
                    ty: def.name.clone(),
                    field,
                };
                member(step, m, path);
            }
        }
        TypeBody::Enum(variants) => {
            for v in variants {
                for (i, m) in v.fields.iter().enumerate() {
                    let step = Step::Variant {
                        ty: def.name.clone(),
                        variant: v.name.clone(),
                        field: m.name.clone().unwrap_or_else(|| i.to_string()),
                        index: i,
                        named: v.kind == VariantKind::Struct,
                    };
                    member(step, m, path);
                }
            }
        }
    }
}

/// The variant of enum `name` that the generated op check builds: the first that holds a tensor
/// (through nested types), the one that routes the call. `None` if `name` is not an enum.
pub fn checked_variant<'a>(types: &'a [TypeDef], name: &str) -> Option<&'a Variant> {
    let def = types.iter().find(|t| t.name == name)?;
    let TypeBody::Enum(variants) = &def.body else {
        return None;
    };
    variants.iter().find(|v| {
        v.fields.iter().any(|m| match &m.ty {
            MemberType::Tensor(_) => true,
            MemberType::Declared(inner) => !leaves(types, inner).is_empty(),
            MemberType::Plain(_) => false,
        })
    })
}

/// A member's name below its input, as errors show it: `scores`, `pair.left`, `Dense.0`.
pub fn label(path: &[Step]) -> String {
    path.iter()
        .map(|step| match step {
            Step::Field { field, .. } => field.clone(),
            Step::Variant { variant, field, .. } => format!("{variant}.{field}"),
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// A `[[type]]`: a struct or an enum holding tensors, generated at the backend level
/// (`NamePrimitive<B>`, which `Dispatch` instantiates) and at the `Tensor<D>` level (`Name`).
#[derive(Clone, Debug)]
pub struct TypeDef {
    /// The `Tensor<D>`-level name, as declared.
    pub name: String,
    /// Doc lines from the manifest.
    pub doc: Vec<String>,
    /// Fields or variants.
    pub body: TypeBody,
    /// The rank generics of its tensors (nested types' included), in order of first use: the
    /// `Tensor<D>`-level type's const parameters.
    pub ranks: Vec<String>,
    /// `manifest:LINE` of the declaration, for docs.
    pub location: String,
}

/// What a declared type is made of.
#[derive(Clone, Debug)]
pub enum TypeBody {
    /// A struct's named fields.
    Struct(Vec<Member>),
    /// An enum's variants.
    Enum(Vec<Variant>),
}

/// One variant of a declared enum.
#[derive(Clone, Debug)]
pub struct Variant {
    /// Its name.
    pub name: String,
    /// Doc lines.
    pub doc: Vec<String>,
    /// Unit, tuple or struct.
    pub kind: VariantKind,
    /// Its fields (named for a struct variant).
    pub fields: Vec<Member>,
}

/// The shape of an enum variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VariantKind {
    /// `Empty`.
    Unit,
    /// `Dense(..)`.
    Tuple,
    /// `Masked { .. }`.
    Struct,
}

/// A field of a declared struct or variant.
#[derive(Clone, Debug)]
pub struct Member {
    /// Its name; `None` in a tuple variant.
    pub name: Option<String>,
    /// Doc lines.
    pub doc: Vec<String>,
    /// What it holds.
    pub ty: MemberType,
}

/// What a field holds.
#[derive(Clone, Debug)]
pub enum MemberType {
    /// A tensor (or an `Option`/`Vec` of them).
    Tensor(TensorArg),
    /// A plain Rust type.
    Plain(String),
    /// Another declared type, by name.
    Declared(String),
}

/// One tensor of a declared type: where it sits, and what it is.
#[derive(Clone, Debug)]
pub struct Leaf {
    /// The steps from the value down to it.
    pub path: Vec<Step>,
    /// The tensor (its container included).
    pub tensor: TensorArg,
}

impl Leaf {
    /// Its name below the input, as errors show it: `scores`, `pair.left`, `Dense.0`.
    pub fn label(&self) -> String {
        label(&self.path)
    }

    /// Whether it exists only in some variant of an enum.
    pub fn refutable(&self) -> bool {
        self.path.iter().any(|s| matches!(s, Step::Variant { .. }))
    }
}

/// One step down a declared type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A struct's field.
    Field {
        /// The struct.
        ty: String,
        /// The field.
        field: String,
    },
    /// A field of an enum variant.
    Variant {
        /// The enum.
        ty: String,
        /// The variant.
        variant: String,
        /// The field's name, or its index in a tuple variant.
        field: String,
        /// Its index.
        index: usize,
        /// Whether the variant is a struct variant (fields by name).
        named: bool,
    },
}

/// One generated extension trait: the ops that share a backend list and a kind of body.
///
/// Ops routed to the manifest's default backends with hand-written kernels form the main trait
/// (`routing.trait`). An op with its own `backends` list goes to a trait named after them
/// (`RoutedOpsCube`) so only those backends implement it; composite ops go to a `...Composite`
/// trait whose methods have default bodies.
#[derive(Clone, Debug)]
pub struct TraitGroup {
    /// Trait name.
    pub name: String,
    /// Name of the companion trait with the hand-written `Autodiff<B, C>` kernels.
    pub autodiff_name: String,
    /// Backends that implement the trait.
    pub backends: Vec<Backend>,
    /// Methods have default bodies calling a composite function.
    pub composite: bool,
}

impl TraitGroup {
    /// Whether the group, whose ops are `ops`, has differentiable ops with hand-written
    /// `Autodiff<B, C>` kernels, and so a companion trait (named `autodiff_name`).
    pub fn needs_autodiff_trait<'a>(&self, mut ops: impl Iterator<Item = &'a Op>) -> bool {
        !self.composite && ops.any(Op::hand_written_autodiff)
    }
}

/// A backend selector and the cfg that compiles it in.
#[derive(Clone, Debug)]
pub struct Backend {
    /// Selector name, as `DispatchTensorKind` and the runtime's `BackendId` spell it.
    pub name: BackendName,
    /// The consuming crate's cfg predicate; `None` = always compiled.
    pub cfg: Option<String>,
}

/// One routed op.
#[derive(Clone, Debug)]
pub struct Op {
    /// The op's name: the trait method and the function names.
    pub name: String,
    /// Doc lines from the manifest.
    pub doc: Vec<String>,
    /// `deprecated`: the note of the `#[deprecated]` on the op's public functions.
    pub deprecated: Option<String>,
    /// Autodiff policy.
    pub policy: Policy,
    /// `manifest:LINE` of the line to edit to change the policy, for runtime messages.
    pub location: String,
    /// Inputs, in manifest order.
    pub inputs: Vec<Input>,
    /// The output.
    pub output: Output,
    /// Backends this op is routed to.
    pub backends: Vec<Backend>,
    /// `manifest:LINE` of the backend list that routes this op, for runtime messages.
    pub backends_location: String,
    /// Index of the op's trait in [`Ir::groups`].
    pub group: usize,
    /// The composite function implementing the op on every backend, if any.
    pub composite: Option<String>,
    /// The op written with backend primitives (`composition`): the default body of its trait
    /// method.
    pub composition: Option<String>,
    /// `async = true`: the kernels, the composition and every routed function return futures;
    /// routing (planning, shape checks, unwrapping) happens at the call, before the future.
    pub asynchronous: bool,
    /// How the op runs on `Fusion<B>` (what `Cube` is when fusion is on).
    pub fusion: FusionImpl,
    /// How the op runs on `Remote`.
    pub remote: RemoteImpl,
    /// The float dtypes its kernels take, when it declares them (`dtypes`).
    pub dtypes: Option<Dtypes>,
    /// `manifest:LINE` of the op's `output`, for the output-metadata check's messages.
    pub output_location: String,
    /// What picks the backend of a call.
    pub route_by: RouteBy,
    /// Whether a plain type of the op is complex enough for clippy's `type_complexity`.
    pub complex_types: bool,
    /// The backward pass declared in the manifest: the generator writes the op's
    /// `Autodiff<B, C>` implementation from it.
    pub backward: Option<Backward>,
    /// `backward = "hand-written"`: the op's `Autodiff<B, C>` kernel is the companion trait's,
    /// written by hand, even with a `composition`.
    pub hand_written: bool,
    /// How the generated op check calls the op (`[op.check]`, with defaults).
    pub check: Check,
}

/// What the generated op check passes an op (`[op.check]`).
#[derive(Clone, Debug, Default)]
pub struct Check {
    /// Input name → its shape (one per element for a `vec` input).
    pub shapes: Vec<(String, Vec<Vec<usize>>)>,
    /// Input name → the range its values are drawn from.
    pub ranges: Vec<(String, (f64, f64))>,
    /// Plain input name → a Rust expression for its value.
    pub args: Vec<(String, String)>,
    /// Whether gradients are checked against finite differences.
    pub gradients: bool,
    /// The relative tolerance, when not the runtime's default.
    pub tolerance: Option<f64>,
    /// Whether the kernels are compared with the op's composition.
    pub composition: bool,
    /// The shape each input gets, by input index (tensor inputs only; one per element for a
    /// `vec` input): `shapes`, else one its contract or rank generic implies.
    pub input_shapes: Vec<Option<Vec<Vec<usize>>>>,
}

/// A backward pass declared in the manifest (`backward`, `save`, `checkpoint`).
#[derive(Clone, Debug)]
pub struct Backward {
    /// Formulas or a function.
    pub form: BackwardForm,
    /// `checkpoint = "recompute"`: memory-bound, with a retro-forward.
    pub recompute: bool,
    /// For each float input (a slot each, in input order): whether the backward pass reads it
    /// (a recomputed op's backward pass also reads them all when it reads the output).
    pub reads: Vec<bool>,
    /// Whether the backward pass reads the float output.
    pub reads_output: bool,
    /// For each float input (slot): whether it gets a gradient (not `"none"`, not in
    /// `no_gradient`).
    pub gradients: Vec<bool>,
    /// What the generated derivative value holds besides float tensors, in order.
    pub fields: Vec<Field>,
    /// Path (tuple indices) of the float output within the op's output.
    pub output_path: Vec<usize>,
    /// For an op returning a declared struct: the field names down to the float field this
    /// pass differentiates (`mean`, `stats.mean`); empty otherwise.
    pub member: Vec<String>,
    /// The passes of the declared output's other float fields, one node each in Burn's graph
    /// (empty but for the first field's pass).
    pub siblings: Vec<Backward>,
    /// Traits the backend must implement (`routing.backward_bounds`).
    pub bounds: Vec<String>,
    /// `manifest:LINE` of `backward`, for docs.
    pub location: String,
}

impl Backward {
    /// The slot of float input `name` of `op`.
    pub fn slot(op: &Op, name: &str) -> Option<usize> {
        op.float_slots().position(|slot| slot.name == name)
    }

    /// This pass and its siblings: one per float output node.
    pub fn nodes(&self) -> impl Iterator<Item = &Backward> {
        std::iter::once(self).chain(&self.siblings)
    }

    /// Whether float input (slot) `slot` gets a gradient from any node.
    pub fn gives_gradient(&self, slot: usize) -> bool {
        self.nodes().any(|b| b.gradients[slot])
    }
}

/// How gradients are computed.
#[derive(Clone, Debug)]
pub enum BackwardForm {
    /// One formula per float slot; `None` is `"none"` (no gradient).
    Formulas(Vec<Option<Formula>>),
    /// A function called with the saved values, the incoming gradient and the tracked flags.
    Function {
        /// Its path: a function generic over the backend, called `path::<B>(...)`, or (when
        /// `method_of` is set) a method of a trait the backend implements.
        path: String,
        /// The trait of a trait method (`crate::k::Trait::f` → `crate::k::Trait`), called
        /// `<B as Trait>::f(...)`.
        method_of: Option<String>,
        /// What it is passed before the gradient, in `save` order.
        args: Vec<SavedValue>,
    },
}

/// One checked formula.
#[derive(Clone, Debug)]
pub struct Formula {
    /// The text as written (for docs and runtime messages).
    pub text: String,
    /// The typed expression.
    pub expr: Term,
}

/// A typed formula node: every node knows whether it is a tensor or a number.
#[derive(Clone, Debug)]
pub struct Term {
    /// Whether it evaluates to a tensor.
    pub tensor: bool,
    /// What it is.
    pub node: TermNode,
}

/// The kinds of typed formula nodes.
#[derive(Clone, Debug)]
pub enum TermNode {
    /// A number literal.
    Number(f64),
    /// An integer literal passed as a dimension.
    Dim(i64),
    /// The incoming gradient.
    Grad,
    /// The float output.
    Output,
    /// A float input, by name.
    Input(String),
    /// A numeric plain input (a field of the derivative value), by name.
    Scalar(String),
    /// A float tensor the derivative value holds, by name: another float field of the op's
    /// declared output (`output.var`, read by the backward pass of `output.mean`).
    Kept(String),
    /// `-x`.
    Neg(Box<Term>),
    /// `a op b`.
    Binary(crate::formula::BinOp, Box<Term>, Box<Term>),
    /// `f(args)`.
    Call(&'static str, Vec<Term>),
}

/// A value a function-form backward pass is passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SavedValue {
    /// A float input (slot).
    Float(usize),
    /// The float output.
    Output,
    /// A field of the derivative value, by name.
    Field(String),
}

/// A value the derivative holds besides float tensors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// The field's name: the input's name, or a generated one for an output.
    pub name: String,
    /// Where it comes from.
    pub source: FieldSource,
}

/// Where a field's value comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldSource {
    /// Input `name` (not a float tensor).
    Input(String),
    /// A plain field of a declared struct input: the input, the field names down to it, and
    /// its Rust type.
    Member {
        /// The input.
        input: String,
        /// The field names from the input down to it.
        fields: Vec<String>,
        /// Its type (a plain Rust type).
        ty: String,
    },
    /// The output leaf at this tuple path (not the float output).
    Output(Vec<usize>),
    /// A float field of the declared output (not the pass's own), by the field names down to it.
    OutputMember(Vec<String>),
}

/// How an op runs on `Fusion<B>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FusionImpl {
    /// Not at all: the op is not routed to `Cube`, or is composite (its composition runs on
    /// `Fusion<B>` like on any backend).
    None,
    /// One deferred operation running the inner backend's kernel, its outputs declared by
    /// their metadata.
    Lazy,
    /// Its composition, on `Fusion<B>` directly, so that Burn fuses it.
    Composition,
    /// At the call: its inputs resolved from the fusion stream, the inner backend's kernel run
    /// at once, its outputs handed back to the stream (an op without output metadata or
    /// composition, which cannot be deferred).
    Eager,
}

/// The float dtypes an op's kernels take, and what runs for the others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dtypes {
    /// In the manifest's order.
    pub list: Vec<FloatDtype>,
    /// `other_dtypes = "composition"`: another dtype runs the op's composition (else the call
    /// fails with the runtime's `UnsupportedDtype`).
    pub composition: bool,
    /// `manifest:LINE` of `dtypes`, for runtime messages.
    pub location: String,
}

/// How an op runs on `Remote`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemoteImpl {
    /// Not at all: the op is not routed to `Remote`, or is composite (its composition runs on
    /// `Remote` like on any backend).
    None,
    /// One custom operation, which the server runs with the op's kernel on its backend; its
    /// outputs declared by their metadata, its plain arguments encoded as scalars.
    Kernel,
    /// Its composition, each primitive an operation on the server (`remote = "composition"`, or
    /// an op without output metadata).
    Composition,
    /// What the crate's own `impl Trait for Remote` does: the op can run neither as one
    /// operation (no output metadata, a declared type, an argument the scalars cannot carry)
    /// nor through a composition, so the generator leaves its trait's Remote implementation to
    /// the crate, for every op of that trait.
    HandWritten,
}

/// What picks the backend of an op's call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteBy {
    /// The tensor inputs (the first float, else the first tensor present).
    Tensors,
    /// The tensor inputs, and the device input must be on their backend.
    TensorsAndDevice,
    /// The device input alone (an op without tensor inputs, e.g. a factory).
    Device,
    /// Nothing: the op has one backend.
    Fixed(BackendName),
}

impl Op {
    /// The tensor inputs, in order.
    pub fn tensor_inputs(&self) -> impl Iterator<Item = (&Input, &TensorArg)> {
        self.inputs.iter().filter_map(|input| match &input.arg {
            Arg::Tensor(t) => Some((input, t)),
            Arg::Plain(_) | Arg::Device | Arg::Declared { .. } => None,
        })
    }

    /// Every tensor the routing looks at, in order: tensor inputs, and the tensors of
    /// declared-type inputs (with the leaf), each with the name errors give it (`x`,
    /// `boxes.scores`).
    pub fn routing_tensors(&self) -> Vec<(String, &Input, &TensorArg, Option<&Leaf>)> {
        let mut out = Vec::new();
        for input in &self.inputs {
            match &input.arg {
                Arg::Tensor(t) => out.push((input.name.clone(), input, t, None)),
                Arg::Declared { leaves, .. } => {
                    for leaf in leaves {
                        let name = format!("{}.{}", input.name, leaf.label());
                        out.push((name, input, &leaf.tensor, Some(leaf)));
                    }
                }
                Arg::Plain(_) | Arg::Device => {}
            }
        }
        out
    }

    /// Whether any input is a float tensor or holds one (in a declared type).
    pub fn has_float_input(&self) -> bool {
        self.routing_tensors()
            .iter()
            .any(|(_, _, t, _)| t.kind == TensorKind::Float)
    }

    /// Whether an input or the output is a declared type.
    pub fn uses_declared(&self) -> bool {
        self.inputs
            .iter()
            .any(|i| matches!(i.arg, Arg::Declared { .. }))
            || self.output.has_declared()
    }

    /// Whether the op's `Autodiff<B, C>` kernel is written by hand: a differentiable op that is
    /// not composite and declares no backward pass.
    pub fn hand_written_autodiff(&self) -> bool {
        self.without_declared_autodiff() && !self.composed_autodiff()
    }

    /// Whether the op's `Autodiff<B, C>` kernel is generated from its `composition`: a
    /// synchronous differentiable op with a composition and no `backward`. The composition
    /// runs on `Autodiff<B, C>` itself, whose primitives record their own backward passes.
    pub fn composed_autodiff(&self) -> bool {
        self.without_declared_autodiff()
            && self.composition.is_some()
            && !self.hand_written
            && !self.asynchronous
    }

    /// Whether the op's `Autodiff<B, C>` kernel is generated (from `backward`, or from its
    /// composition).
    pub fn generated_autodiff(&self) -> bool {
        self.backward.is_some() || self.composed_autodiff()
    }

    /// A differentiable op that is not composite and declares no backward pass.
    fn without_declared_autodiff(&self) -> bool {
        self.policy == Policy::Differentiable && self.composite.is_none() && self.backward.is_none()
    }

    /// The slots of a declared backward pass, in order: each float tensor input of one tensor
    /// or an `Option`, and each such field of a declared struct input (reached through struct
    /// fields only, never an enum variant), in declaration order.
    pub fn float_slots(&self) -> impl Iterator<Item = Slot<'_>> {
        self.inputs.iter().flat_map(|input| {
            let slots: Vec<Slot<'_>> = match &input.arg {
                Arg::Tensor(t) if t.slot() => vec![Slot {
                    name: input.name.clone(),
                    input,
                    fields: Vec::new(),
                    tensor: t,
                }],
                Arg::Declared { leaves, .. } => leaves
                    .iter()
                    .filter(|leaf| leaf.tensor.slot() && !leaf.refutable())
                    .map(|leaf| Slot {
                        name: format!("{}.{}", input.name, leaf.label()),
                        input,
                        fields: leaf
                            .path
                            .iter()
                            .map(|step| match step {
                                Step::Field { field, .. } | Step::Variant { field, .. } => {
                                    field.as_str()
                                }
                            })
                            .collect(),
                        tensor: &leaf.tensor,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            slots
        })
    }

    /// The device input, if any.
    pub fn device_input(&self) -> Option<&Input> {
        self.inputs.iter().find(|i| matches!(i.arg, Arg::Device))
    }
}

/// One input.
#[derive(Clone, Debug)]
pub struct Input {
    /// Parameter name.
    pub name: String,
    /// What it carries.
    pub arg: Arg,
    /// Its shape contract (tensor inputs only).
    pub shape: Option<ShapeContract>,
}

/// One float tensor a declared backward pass gives a gradient (see [`Op::float_slots`]).
#[derive(Clone, Debug)]
pub struct Slot<'a> {
    /// Its name in formulas, `backward` keys and messages: `x`, or `p.scale` for a field of a
    /// declared struct input.
    pub name: String,
    /// The input it is, or is a field of.
    pub input: &'a Input,
    /// The field names from the input down to it; empty for a tensor input.
    pub fields: Vec<&'a str>,
    /// The tensor (one, or an `Option`).
    pub tensor: &'a TensorArg,
}

impl Slot<'_> {
    /// Its shape contract: a tensor input's own (a field has none).
    pub fn shape(&self) -> Option<&ShapeContract> {
        if self.fields.is_empty() {
            self.input.shape.as_ref()
        } else {
            None
        }
    }
}

/// How an input's shape must relate to another input's, checked before any kernel runs.
#[derive(Clone, Debug)]
pub struct ShapeContract {
    /// The relation.
    pub rule: ShapeRule,
    /// The other input (a tensor input of the same op, checked by validation).
    pub of: String,
    /// `manifest:LINE` of the contract, for runtime messages.
    pub location: String,
}

/// Rank of a tensor at the `Tensor<D>` level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rank {
    /// A const generic parameter.
    Generic(String),
    /// A fixed rank.
    Fixed(usize),
}

/// A tensor argument or output.
#[derive(Clone, Debug)]
pub struct TensorArg {
    /// Its kind.
    pub kind: TensorKind,
    /// Passed by reference (inputs only).
    pub borrowed: bool,
    /// Rank at the `Tensor<D>` level.
    pub rank: Rank,
    /// One tensor, an `Option` or a `Vec`.
    pub container: Container,
    /// What an output declares about its shape and dtype (outputs only).
    pub meta: OutputMeta,
}

impl TensorArg {
    /// Whether it can be a slot of a declared backward pass: a float tensor, one or optional.
    pub fn slot(&self) -> bool {
        self.kind == TensorKind::Float && self.container != Container::Vec
    }
}

/// An output's declared shape and dtype.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OutputMeta {
    /// `shape`.
    pub shape: Option<MetaSource>,
    /// `dtype`.
    pub dtype: Option<MetaSource>,
}

impl Output {
    /// The output element at tuple path `path` (itself for an empty path).
    pub fn leaf_at(&self, path: &[usize]) -> Option<&Output> {
        match path.split_first() {
            None => Some(self),
            Some((i, rest)) => match self {
                Output::Tuple(items) => items.get(*i).and_then(|o| o.leaf_at(rest)),
                _ => None,
            },
        }
    }

    /// Whether it is a declared type, or a tuple holding one at any depth.
    pub fn has_declared(&self) -> bool {
        match self {
            Output::Declared { .. } => true,
            Output::Tuple(items) => items.iter().any(Output::has_declared),
            Output::Unit | Output::Tensor(_) | Output::Plain(_) => false,
        }
    }
}

impl OutputMeta {
    /// Whether both are declared.
    pub fn complete(&self) -> bool {
        self.shape.is_some() && self.dtype.is_some()
    }
}

/// Where an output's shape or dtype comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetaSource {
    /// The same as this tensor input's.
    Input(String),
    /// What this function returns, given the op's input specs and plain arguments.
    Function(String),
    /// `dtype = "default"`: the device's default dtype for the output's kind.
    Default,
}

/// What an input carries.
#[derive(Clone, Debug)]
pub enum Arg {
    /// A tensor (or an `Option`/`Vec` of them).
    Tensor(TensorArg),
    /// A declared type (`[[type]]`), by name; `borrowed` for `&Name`.
    Declared {
        /// The type's name.
        name: String,
        /// Passed by reference.
        borrowed: bool,
        /// The type's rank generics (its `Tensor<D>`-level parameters).
        ranks: Vec<String>,
        /// Its tensors, in routing order.
        leaves: Vec<Leaf>,
    },
    /// A plain Rust value, passed through unchanged.
    Plain(String),
    /// The device (`&Device<B>`): routes ops without tensor inputs.
    Device,
}

/// What an op returns.
#[derive(Clone, Debug)]
pub enum Output {
    /// Nothing: `()`.
    Unit,
    /// A tensor (or an `Option`/`Vec` of them).
    Tensor(TensorArg),
    /// A plain Rust value.
    Plain(String),
    /// A declared type (`[[type]]`), by name.
    Declared {
        /// The type's name.
        name: String,
        /// The type's rank generics (its `Tensor<D>`-level parameters).
        ranks: Vec<String>,
        /// Its tensors, in declaration order.
        leaves: Vec<Leaf>,
        /// Whether it is a struct of tensors only (through nested structs): what a deferred
        /// operation on `Fusion<B>` can declare before its kernel runs.
        tensors_only: bool,
    },
    /// A tuple (possibly nested).
    Tuple(Vec<Output>),
}

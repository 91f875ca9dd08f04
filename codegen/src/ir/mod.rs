//! The validated, resolved form of a manifest that the emitters read.
//!
//! Everything here has been checked: names are identifiers, kinds and policies are enums, Rust
//! types, paths and cfg predicates were parsed and are kept as canonical source text
//! (`Vec<usize>`, `feature = "cube"`). Emitters only print this.

/// The words the manifest and the runtime share, defined once in `burn-route-core`.
pub use burn_route_core::{BackendId, Container, FloatDtype, Policy, ShapeRule, TensorKind};

mod backward;
mod types;

pub use backward::*;
pub use types::*;

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
    pub name: BackendId,
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
    /// The relative tolerance of the gradient check, when not the runtime's default.
    pub tolerance: Option<f64>,
    /// The relative tolerance of value comparisons, when not the runtime's default.
    pub value_tolerance: Option<f64>,
    /// Whether the kernels are compared with the op's composition.
    pub composition: bool,
    /// The shape each input gets, by input index (tensor inputs only; one per element for a
    /// `vec` input): `shapes`, else one its contract or rank generic implies.
    pub input_shapes: Vec<Option<Vec<Vec<usize>>>>,
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
    Fixed(BackendId),
}

impl Op {
    /// Why the generated op check cannot check the op yet, if it cannot (it draws no quantized
    /// inputs): the test is then `#[ignore]`d with it, and validation refuses a `check` table.
    pub fn unchecked(&self) -> Option<&'static str> {
        let declared_quantized = self.inputs.iter().any(|i| match &i.arg {
            Arg::Declared { leaves, .. } => leaves
                .iter()
                .any(|l| l.tensor.kind == TensorKind::Quantized),
            _ => false,
        });
        let quantized = self
            .tensor_inputs()
            .any(|(_, t)| t.kind == TensorKind::Quantized);
        (quantized || declared_quantized)
            .then_some("the op check does not generate quantized inputs")
    }

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

    /// How the op runs behind `target` (`Cube`, read as `Fusion<B>`; `Remote`): `None` when it
    /// is not routed there (or is composite), else whether it runs there as one operation (a
    /// deferred one on `Fusion<B>`, one on the server), which its backward kernel follows.
    /// Flex is never a recording target: `None`.
    pub fn one_operation_on(&self, target: BackendId) -> Option<bool> {
        match target {
            BackendId::Cube => (self.fusion != FusionImpl::None)
                .then_some(matches!(self.fusion, FusionImpl::Lazy | FusionImpl::Eager)),
            BackendId::Remote => (self.composite.is_none()
                && self.backends.iter().any(|b| b.name == target))
            .then_some(self.remote == RemoteImpl::Kernel),
            _ => None,
        }
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

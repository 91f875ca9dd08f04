//! The validated, resolved form of a manifest that the emitters read.
//!
//! Everything here has been checked: names are identifiers, kinds and policies are enums, Rust
//! types, paths and cfg predicates were parsed and are kept as canonical source text
//! (`Vec<usize>`, `feature = "cube"`). Emitters only print this.

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
        !self.groups[group].composite
            && self
                .ops_of(group)
                .any(|op| op.policy == Policy::Differentiable)
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

/// A backend selector and the cfg that compiles it in.
#[derive(Clone, Debug)]
pub struct Backend {
    /// Selector name, as `DispatchTensorKind` and the runtime's `BackendId` spell it.
    pub name: BackendName,
    /// The consuming crate's cfg predicate; `None` = always compiled.
    pub cfg: Option<String>,
}

/// The backends a manifest may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum BackendName {
    /// Burn's pure-Rust CPU backend.
    Flex,
    /// The cubecl backend (wgpu, CUDA, ROCm, Metal, Vulkan, ...).
    Cube,
    /// Burn's remote backend.
    Remote,
}

impl BackendName {
    /// Every selector, in the order the manifest reference lists them.
    pub const ALL: [Self; 3] = [Self::Flex, Self::Cube, Self::Remote];

    /// The selector as written in the manifest and in Rust paths.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Flex => "Flex",
            Self::Cube => "Cube",
            Self::Remote => "Remote",
        }
    }
}

/// What happens when a float input is tracked by autodiff.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Tracked floats route to the op's `Autodiff<B, C>` kernel.
    Differentiable,
    /// Tracked floats are unwrapped; the op runs concretely; outputs are untracked.
    Detach,
    /// A tracked float is an error.
    Reject,
}

impl Policy {
    /// The policy as written in the manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Differentiable => "differentiable",
            Self::Detach => "detach",
            Self::Reject => "reject",
        }
    }
}

/// One routed op.
#[derive(Clone, Debug)]
pub struct Op {
    /// The op's name: the trait method and the function names.
    pub name: String,
    /// Doc lines from the manifest.
    pub doc: Vec<String>,
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
    /// How the op runs on `Fusion<B>` (what `Cube` is when fusion is on).
    pub fusion: FusionImpl,
    /// `manifest:LINE` of the op's `output`, for the output-metadata check's messages.
    pub output_location: String,
    /// What picks the backend of a call.
    pub route_by: RouteBy,
    /// Whether a plain type of the op is complex enough for clippy's `type_complexity`.
    pub complex_types: bool,
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
            Arg::Plain(_) | Arg::Device => None,
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

/// A shape relation, as the manifest's `shape` table and the runtime's `ShapeRule` name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapeRule {
    /// `same_as`: the same shape.
    SameAs,
    /// `broadcast_to`: same rank, each dimension equal to the other's or 1.
    BroadcastTo,
    /// `broadcast_with`: same rank, each pair of dimensions equal or one of them 1.
    BroadcastWith,
    /// `last_dim_of`: `[n]` with `n` the other's last dimension.
    LastDimOf,
    /// `leading_dims_of`: the other's shape without its last dimension.
    LeadingDimsOf,
}

impl ShapeRule {
    /// Every rule, in manifest-reference order.
    pub const ALL: [Self; 5] = [
        Self::SameAs,
        Self::BroadcastTo,
        Self::BroadcastWith,
        Self::LastDimOf,
        Self::LeadingDimsOf,
    ];

    /// The rule's key in the manifest.
    pub fn key(self) -> &'static str {
        match self {
            Self::SameAs => "same_as",
            Self::BroadcastTo => "broadcast_to",
            Self::BroadcastWith => "broadcast_with",
            Self::LastDimOf => "last_dim_of",
            Self::LeadingDimsOf => "leading_dims_of",
        }
    }

    /// The runtime's variant (`rt::ShapeRule::...`).
    pub fn variant(self) -> &'static str {
        match self {
            Self::SameAs => "SameAs",
            Self::BroadcastTo => "BroadcastTo",
            Self::BroadcastWith => "BroadcastWith",
            Self::LastDimOf => "LastDimOf",
            Self::LeadingDimsOf => "LeadingDimsOf",
        }
    }
}

/// A tensor kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorKind {
    /// Floating point.
    Float,
    /// Integer.
    Int,
    /// Boolean.
    Bool,
    /// Quantized float.
    Quantized,
}

impl TensorKind {
    /// Every kind, in manifest-reference order.
    pub const ALL: [Self; 4] = [Self::Float, Self::Int, Self::Bool, Self::Quantized];

    /// The kind as written in the manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Float => "float",
            Self::Int => "int",
            Self::Bool => "bool",
            Self::Quantized => "quantized",
        }
    }
}

/// What holds the tensor(s) of an argument or output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    /// Exactly one tensor.
    One,
    /// `Option<tensor>`.
    Option,
    /// `Vec<tensor>`.
    Vec,
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

/// An output's declared shape and dtype.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OutputMeta {
    /// `shape`.
    pub shape: Option<MetaSource>,
    /// `dtype`.
    pub dtype: Option<MetaSource>,
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
    /// A tuple (possibly nested).
    Tuple(Vec<Output>),
}

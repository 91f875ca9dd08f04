//! The validated, resolved form of a manifest that the emitters read.
//!
//! Everything here has been checked: names are identifiers, kinds and policies are enums, Rust
//! types and cfg predicates are parsed. Emitters only turn this into tokens.

/// A validated manifest.
#[derive(Clone, Debug)]
pub struct Ir {
    /// Display name of the manifest file, used in generated docs and runtime messages.
    pub manifest_name: String,
    /// The extension trait every listed backend implements.
    pub trait_name: String,
    /// The trait with the `Autodiff<B, C>` kernels of differentiable ops.
    pub autodiff_trait: String,
    /// cfg predicate (in the consuming crate) that gates autodiff routing.
    pub autodiff_cfg: syn::Meta,
    /// Default backends, in manifest order.
    pub backends: Vec<Backend>,
    /// The ops, in manifest order.
    pub ops: Vec<Op>,
}

impl Ir {
    /// Whether any op routes tracked floats to an `Autodiff<B, C>` kernel.
    pub fn has_differentiable(&self) -> bool {
        self.ops
            .iter()
            .any(|op| op.policy == Policy::Differentiable)
    }
}

/// A backend selector and the cfg that compiles it in.
#[derive(Clone, Debug)]
pub struct Backend {
    /// Selector name, as `DispatchTensorKind` and the runtime's `BackendId` spell it.
    pub name: BackendName,
    /// The consuming crate's cfg predicate; `None` = always compiled.
    pub cfg: Option<syn::Meta>,
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
    /// `ops.toml:LINE` of the line to edit to change the policy, for runtime messages.
    pub location: String,
    /// Inputs, in manifest order.
    pub inputs: Vec<Input>,
    /// The output.
    pub output: Output,
    /// Backends this op is routed to.
    pub backends: Vec<Backend>,
}

impl Op {
    /// The tensor inputs, in order.
    pub fn tensor_inputs(&self) -> impl Iterator<Item = (&Input, &TensorArg)> {
        self.inputs.iter().filter_map(|input| match &input.arg {
            Arg::Tensor(t) => Some((input, t)),
            Arg::Plain(_) => None,
        })
    }
}

/// One input.
#[derive(Clone, Debug)]
pub struct Input {
    /// Parameter name.
    pub name: String,
    /// What it carries.
    pub arg: Arg,
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
}

impl TensorKind {
    /// Every kind, in manifest-reference order.
    pub const ALL: [Self; 3] = [Self::Float, Self::Int, Self::Bool];

    /// The kind as written in the manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Float => "float",
            Self::Int => "int",
            Self::Bool => "bool",
        }
    }
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
}

/// What an input carries.
#[derive(Clone, Debug)]
pub enum Arg {
    /// A tensor.
    Tensor(TensorArg),
    /// A plain Rust value, passed through unchanged.
    Plain(syn::Type),
}

/// What an op returns.
#[derive(Clone, Debug)]
pub enum Output {
    /// Nothing: `()`.
    Unit,
    /// A tensor.
    Tensor(TensorArg),
    /// A plain Rust value.
    Plain(syn::Type),
    /// A tuple (possibly nested).
    Tuple(Vec<Output>),
}

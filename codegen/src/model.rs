//! The manifest model: what `ops.toml` says, as plain data with the byte span of every value.
//!
//! This layer knows TOML shapes, not Rust: strings stay strings here. Checking that a name is an
//! identifier or that a type parses is validation's job ([`crate::validate`]).

use std::ops::Range;

/// A value and the byte range of the manifest text it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sp<T> {
    /// The value.
    pub value: T,
    /// Where it is written in the manifest.
    pub span: Range<usize>,
}

impl<T> Sp<T> {
    /// Wraps `value` with its span.
    pub fn new(value: T, span: Range<usize>) -> Self {
        Self { value, span }
    }
}

/// The whole manifest.
#[derive(Clone, Debug)]
pub struct Manifest {
    /// The `[routing]` table.
    pub routing: Routing,
    /// The `[[op]]` entries, in manifest order.
    pub ops: Vec<OpSpec>,
    /// The `[[type]]` entries (structs and enums holding tensors), in manifest order.
    pub types: Vec<TypeSpec>,
}

/// One `[[type]]` entry: a struct (`fields`) or an enum (`variants`) that op inputs and outputs
/// may use by name.
#[derive(Clone, Debug)]
pub struct TypeSpec {
    /// Position of the entry in the `type` array.
    pub index: usize,
    /// The whole entry.
    pub span: Range<usize>,
    /// `name`.
    pub name: Option<Sp<String>>,
    /// `doc`.
    pub doc: Option<Sp<String>>,
    /// `fields`: a struct's fields.
    pub fields: Option<Sp<Vec<MemberSpec>>>,
    /// `variants`: an enum's variants.
    pub variants: Option<Sp<Vec<VariantSpec>>>,
    /// Whether the parser reported a problem in the entry (an unknown key such as `feilds`,
    /// `fields` of the wrong type), which a missing `fields` may only be the consequence of.
    pub reported: bool,
}

/// One variant of an enum `[[type]]`.
#[derive(Clone, Debug)]
pub struct VariantSpec {
    /// The whole entry.
    pub span: Range<usize>,
    /// `name`.
    pub name: Option<Sp<String>>,
    /// `doc`.
    pub doc: Option<Sp<String>>,
    /// `fields`: absent for a unit variant; named for a struct variant, unnamed for a tuple
    /// variant.
    pub fields: Option<Sp<Vec<MemberSpec>>>,
}

/// A field of a struct or of an enum variant.
#[derive(Clone, Debug)]
pub struct MemberSpec {
    /// The whole entry.
    pub span: Range<usize>,
    /// `name` (absent in a tuple variant).
    pub name: Option<Sp<String>>,
    /// `doc`.
    pub doc: Option<Sp<String>>,
    /// `tensor` or `type` (a plain Rust type, or another declared type by name).
    pub ty: Option<ArgSpec>,
}

/// The `[routing]` table.
#[derive(Clone, Debug)]
pub struct Routing {
    /// Span of the table header (or the whole document when the table is missing).
    pub span: Range<usize>,
    /// `trait`: name of the generated extension trait.
    pub trait_name: Option<Sp<String>>,
    /// `autodiff_trait`: name of the trait with the `Autodiff<B, C>` kernels.
    pub autodiff_trait: Option<Sp<String>>,
    /// `backends`: the backends every op is routed to unless it lists its own.
    pub backends: Option<Sp<Vec<BackendSpec>>>,
    /// `autodiff_cfg`: the cfg predicate (in the consuming crate) that gates autodiff routing.
    pub autodiff_cfg: Option<Sp<String>>,
    /// `backward_bounds`: traits the backend of a generated `Autodiff<B, C>` implementation
    /// must implement (what function-form backward passes call).
    pub backward_bounds: Option<Sp<Vec<Sp<String>>>>,
}

/// One entry of `backends`: `"Flex"` or `{ name = "Cube", cfg = 'feature = "cube"' }`.
#[derive(Clone, Debug)]
pub struct BackendSpec {
    /// The whole entry.
    pub span: Range<usize>,
    /// The backend selector.
    pub name: Sp<String>,
    /// The cfg predicate that must hold for the backend to be compiled in.
    pub cfg: Option<Sp<String>>,
}

/// One `[[op]]` entry.
#[derive(Clone, Debug)]
pub struct OpSpec {
    /// Position of the entry in the `op` array.
    pub index: usize,
    /// The whole entry.
    pub span: Range<usize>,
    /// `name`.
    pub name: Option<Sp<String>>,
    /// `doc`.
    pub doc: Option<Sp<String>>,
    /// `deprecated`: the note of the op's functions' `#[deprecated]`.
    pub deprecated: Option<Sp<String>>,
    /// `autodiff`: the policy name as written.
    pub autodiff: Option<Sp<String>>,
    /// `inputs`.
    pub inputs: Option<Sp<Vec<InputSpec>>>,
    /// `output`; absent means `()`.
    pub output: Option<OutputSpec>,
    /// `backends`: this op's own backend list, replacing `routing.backends`.
    pub backends: Option<Sp<Vec<BackendSpec>>>,
    /// `composite`: path of a function generic over `B: Backend` that implements the op.
    pub composite: Option<Sp<String>>,
    /// `composition`: path of a function generic over `B: Backend` written with backend
    /// primitives: the default body of the op's trait method, and its implementation on
    /// `Fusion<B>` when its outputs declare no metadata.
    pub composition: Option<Sp<String>>,
    /// `async`: the op's kernels return futures (`async = true`).
    pub asynchronous: Option<Sp<bool>>,
    /// `fusion`: how the op runs on `Fusion<B>` (what `Cube` is with fusion on): `"kernel"` (one
    /// deferred operation around its Cube kernel; the default when its outputs declare their
    /// metadata) or `"composition"` (its composition on `Fusion<B>`, which Burn fuses).
    pub fusion: Option<Sp<String>>,
    /// `dtypes`: the float dtypes the op's kernels take (`"f32"`, `"f16"`, ...); absent: every
    /// dtype.
    pub dtypes: Option<Sp<Vec<Sp<String>>>>,
    /// `other_dtypes`: what a float input of another dtype runs: `"error"` (the default) or
    /// `"composition"`.
    pub other_dtypes: Option<Sp<String>>,
    /// `remote`: how the op runs on Remote: `"kernel"` (one custom operation that the server
    /// runs with its kernel; the default when its outputs declare their metadata) or
    /// `"composition"` (its composition, primitive by primitive).
    pub remote: Option<Sp<String>>,
    /// `backward`: the op's backward pass, as formulas or a function path.
    pub backward: Option<BackwardSpec>,
    /// `save`: what the backward pass keeps (inputs, `output`, `output.N`).
    pub save: Option<Sp<Vec<Sp<String>>>>,
    /// `checkpoint`: `"keep"` or `"recompute"`.
    pub checkpoint: Option<Sp<String>>,
    /// `no_gradient`: float inputs a function-form backward pass gives no gradient.
    pub no_gradient: Option<Sp<Vec<Sp<String>>>>,
    /// `[op.check]`: how the generated op check calls the op.
    pub check: Option<CheckSpec>,
}

/// The shapes of one input in a `check` table (one per element of a `vec` input).
pub type Shapes = Vec<Vec<i64>>;

/// An op's `check` table.
#[derive(Clone, Debug, Default)]
pub struct CheckSpec {
    /// The whole table.
    pub span: Range<usize>,
    /// `shapes`: input name → its shape (a `vec` input: one shape per element).
    pub shapes: Vec<(Sp<String>, Sp<Shapes>)>,
    /// `ranges`: input name → `[lo, hi]`.
    pub ranges: Vec<(Sp<String>, Sp<Vec<f64>>)>,
    /// `args`: plain input name → a Rust expression.
    pub args: Vec<(Sp<String>, Sp<String>)>,
    /// `gradients`: whether the gradient check runs.
    pub gradients: Option<Sp<bool>>,
    /// `tolerance`: the relative tolerance of the gradient check.
    pub tolerance: Option<Sp<f64>>,
    /// `value_tolerance`: the relative tolerance of value comparisons.
    pub value_tolerance: Option<Sp<f64>>,
    /// `composition`: whether the kernel is compared with the op's composition.
    pub composition: Option<Sp<bool>>,
}

impl TypeSpec {
    /// Where an error about the type as a whole points: its `name`, or the entry.
    pub fn name_span(&self) -> Range<usize> {
        self.name
            .as_ref()
            .map_or(self.span.clone(), |n| n.span.clone())
    }
}

impl OpSpec {
    /// Where an error about the op as a whole points: its `name`, or the entry.
    pub fn name_span(&self) -> Range<usize> {
        self.name
            .as_ref()
            .map_or(self.span.clone(), |n| n.span.clone())
    }

    /// Where an error about input `i`'s plain type points: its `type`, or the input, or the
    /// entry.
    pub fn input_type_span(&self, i: usize) -> Range<usize> {
        match self.inputs.as_ref().and_then(|l| l.value.get(i)) {
            Some(s) => match &s.ty {
                Some(ArgSpec::Plain(t)) => t.span.clone(),
                _ => s.span.clone(),
            },
            None => self.span.clone(),
        }
    }
}

/// An op's `backward`.
#[derive(Clone, Debug)]
pub enum BackwardSpec {
    /// `backward = "crate::path"`: a function computing the gradients.
    Function(Sp<String>),
    /// `backward = "hand-written"`: the op's `Autodiff<B, C>` kernel is written by hand (the
    /// companion `...Autodiff` trait), even though it has a `composition`.
    HandWritten(Range<usize>),
    /// `backward = { x = "grad * y" }`: a formula per float input.
    Formulas {
        /// The whole table.
        span: Range<usize>,
        /// Each input's key and formula, in manifest order.
        entries: Vec<(Sp<String>, Sp<String>)>,
    },
}

/// One entry of an op's `inputs`.
#[derive(Clone, Debug)]
pub struct InputSpec {
    /// The whole entry.
    pub span: Range<usize>,
    /// `name`.
    pub name: Option<Sp<String>>,
    /// `tensor` or `type`.
    pub ty: Option<ArgSpec>,
}

/// What an input or output carries.
#[derive(Clone, Debug)]
pub enum ArgSpec {
    /// `tensor = "float"` (with optional `borrowed`, `dims` and `container`).
    Tensor(TensorSpec),
    /// `type = "f32"`: a plain Rust type, passed through unchanged.
    Plain(Sp<String>),
    /// `device = true`: the backend device, which routes ops without tensor inputs.
    Device(Sp<bool>),
}

/// A tensor argument.
#[derive(Clone, Debug)]
pub struct TensorSpec {
    /// `tensor`: the kind name as written.
    pub kind: Sp<String>,
    /// `borrowed = true`: passed as `&Tensor`.
    pub borrowed: Option<Sp<bool>>,
    /// `dims`: rank at the `Tensor<D>` level, a const-generic name or a number.
    pub dims: Option<Sp<Dims>>,
    /// `container`: `"option"` or `"vec"` around the tensor.
    pub container: Option<Sp<String>>,
    /// `shape`: the input's shape contract (inputs only; boxed, as outputs never have one).
    pub shape: Option<Box<Sp<ShapeSpec>>>,
    /// `shape` and `dtype` of an output: an input's name, a function path, or (`dtype`)
    /// `"default"` (outputs only).
    pub meta: Option<Box<MetaSpec>>,
}

/// An output's metadata as written: what its lazy `Fusion` implementation declares.
#[derive(Clone, Debug, Default)]
pub struct MetaSpec {
    /// `shape`.
    pub shape: Option<Sp<String>>,
    /// `dtype`.
    pub dtype: Option<Sp<String>>,
}

/// An input's `shape = { RULE = "other_input" }`: how its shape relates to another input's.
#[derive(Clone, Debug)]
pub struct ShapeSpec {
    /// The rule key as written (one of [`crate::keys::Table::Shape`]).
    pub rule: Sp<String>,
    /// The input it relates to, as written.
    pub of: Sp<String>,
}

/// Rank of a tensor at the `Tensor<D>` level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dims {
    /// A const generic parameter shared by every tensor naming it, e.g. `"D"`.
    Generic(String),
    /// A fixed rank.
    Fixed(i64),
}

/// An op's `output`.
#[derive(Clone, Debug)]
pub enum OutputSpec {
    /// A tensor or a plain type.
    Single {
        /// The whole value.
        span: Range<usize>,
        /// What it carries.
        ty: ArgSpec,
    },
    /// An array of outputs: a tuple.
    Tuple {
        /// The whole array.
        span: Range<usize>,
        /// The elements.
        items: Vec<OutputSpec>,
    },
}

impl OutputSpec {
    /// Span of the whole output value.
    pub fn span(&self) -> Range<usize> {
        match self {
            Self::Single { span, .. } | Self::Tuple { span, .. } => span.clone(),
        }
    }
}

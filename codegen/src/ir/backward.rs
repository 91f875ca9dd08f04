//! A backward pass in the IR: its form (formulas or a function), what it keeps, and how each
//! kept value is read.

use super::*;

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

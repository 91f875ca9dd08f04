//! What the check closure gets and returns: the inputs of one call ([`Args`]) and the op's
//! outputs ([`Value`]).

use super::*;

/// One output of the op, as the check closure returns it. [`run`] and [`compare`] flatten the
/// outputs into leaves (see [`Op::output_shape`]).
#[derive(Clone, Debug)]
pub enum Value {
    /// One tensor.
    Tensor(TensorKind, DispatchTensor),
    /// An optional tensor.
    Optional(TensorKind, Option<DispatchTensor>),
    /// A `Vec` of tensors.
    Tensors(TensorKind, Vec<DispatchTensor>),
    /// An output that is not a tensor: not checked.
    Plain,
    /// The variant of an enum output (its name), compared exactly; the variant's tensors follow
    /// it as values of their own.
    Variant(&'static str),
}

impl Value {
    /// A float tensor.
    pub fn float(tensor: DispatchTensor) -> Self {
        Self::Tensor(TensorKind::Float, tensor)
    }

    /// An int tensor.
    pub fn int(tensor: DispatchTensor) -> Self {
        Self::Tensor(TensorKind::Int, tensor)
    }

    /// A bool tensor.
    pub fn bool(tensor: DispatchTensor) -> Self {
        Self::Tensor(TensorKind::Bool, tensor)
    }

    /// An optional float tensor.
    pub fn optional_float(tensor: Option<DispatchTensor>) -> Self {
        Self::Optional(TensorKind::Float, tensor)
    }

    /// An optional int tensor.
    pub fn optional_int(tensor: Option<DispatchTensor>) -> Self {
        Self::Optional(TensorKind::Int, tensor)
    }

    /// An optional bool tensor.
    pub fn optional_bool(tensor: Option<DispatchTensor>) -> Self {
        Self::Optional(TensorKind::Bool, tensor)
    }

    /// A `Vec` of float tensors.
    pub fn floats(tensors: Vec<DispatchTensor>) -> Self {
        Self::Tensors(TensorKind::Float, tensors)
    }

    /// A `Vec` of int tensors.
    pub fn ints(tensors: Vec<DispatchTensor>) -> Self {
        Self::Tensors(TensorKind::Int, tensors)
    }

    /// A `Vec` of bool tensors.
    pub fn bools(tensors: Vec<DispatchTensor>) -> Self {
        Self::Tensors(TensorKind::Bool, tensors)
    }

    /// An output that is not a tensor (ignored).
    pub fn plain() -> Self {
        Self::Plain
    }

    /// The variant of an enum output, named (`Value::variant("Dense")`): the outputs of two runs
    /// must have the same one. Return it before the variant's tensors.
    pub fn variant(name: &'static str) -> Self {
        Self::Variant(name)
    }
}

/// The inputs of one call of the check closure, on the device of the check it runs for. Each
/// accessor takes the input's position among those given to [`Op::input`] and returns a fresh
/// clone (tracked in the autodiff checks); it panics when the input was declared with another
/// kind or container, naming the accessor to call instead.
#[derive(Debug)]
pub struct Args {
    pub(super) op: &'static str,
    pub(super) device: Device,
    pub(super) slots: Vec<Slot>,
}

/// One input's tensors in an [`Args`].
#[derive(Debug)]
pub(super) struct Slot {
    pub(super) name: &'static str,
    pub(super) kind: TensorKind,
    pub(super) container: Container,
    pub(super) constructor: &'static str,
    pub(super) tensors: Vec<DispatchTensor>,
    /// False for an optional input in the call that checks it absent.
    pub(super) present: bool,
}

impl Args {
    #[track_caller]
    pub(super) fn slot(
        &self,
        index: usize,
        kind: TensorKind,
        container: Container,
        accessor: &str,
    ) -> &Slot {
        let Some(slot) = self.slots.get(index) else {
            panic!(
                "op check failed: op `{}`: the check closure called `Args::{accessor}({index})`, \
                 but the op declares {} inputs. Fix: count every `.input(...)` from 0, in order. See {}",
                self.op,
                self.slots.len(),
                burn_route_core::errors::link("op-check-failed")
            );
        };
        if slot.kind != kind || slot.container != container {
            panic!(
                "op check failed: op `{}`: the check closure called `Args::{accessor}({index})`, \
                 but input {index} (`{}`) is declared with `Input::{}`. Fix: read it with \
                 `Args::{}({index})`, or declare it as the op's signature has it. See {}",
                self.op,
                slot.name,
                slot.constructor,
                slot.constructor,
                burn_route_core::errors::link("op-check-failed")
            );
        }
        slot
    }

    #[track_caller]
    pub(super) fn one(&self, index: usize, kind: TensorKind, accessor: &str) -> DispatchTensor {
        self.slot(index, kind, Container::One, accessor).tensors[0].clone()
    }

    #[track_caller]
    pub(super) fn optional(
        &self,
        index: usize,
        kind: TensorKind,
        accessor: &str,
    ) -> Option<DispatchTensor> {
        let slot = self.slot(index, kind, Container::Option, accessor);
        slot.present.then(|| slot.tensors[0].clone())
    }

    #[track_caller]
    pub(super) fn many(
        &self,
        index: usize,
        kind: TensorKind,
        accessor: &str,
    ) -> Vec<DispatchTensor> {
        self.slot(index, kind, Container::Vec, accessor)
            .tensors
            .clone()
    }

    /// Input `index`, declared [`Input::float`].
    #[track_caller]
    pub fn float(&self, index: usize) -> DispatchTensor {
        self.one(index, TensorKind::Float, "float")
    }

    /// Input `index`, declared [`Input::optional_float`] (`None` in the check that leaves it out).
    #[track_caller]
    pub fn optional_float(&self, index: usize) -> Option<DispatchTensor> {
        self.optional(index, TensorKind::Float, "optional_float")
    }

    /// Input `index`, declared [`Input::floats`].
    #[track_caller]
    pub fn floats(&self, index: usize) -> Vec<DispatchTensor> {
        self.many(index, TensorKind::Float, "floats")
    }

    /// Input `index`, declared [`Input::int`].
    #[track_caller]
    pub fn int(&self, index: usize) -> DispatchTensor {
        self.one(index, TensorKind::Int, "int")
    }

    /// Input `index`, declared [`Input::optional_int`].
    #[track_caller]
    pub fn optional_int(&self, index: usize) -> Option<DispatchTensor> {
        self.optional(index, TensorKind::Int, "optional_int")
    }

    /// Input `index`, declared [`Input::ints`].
    #[track_caller]
    pub fn ints(&self, index: usize) -> Vec<DispatchTensor> {
        self.many(index, TensorKind::Int, "ints")
    }

    /// Input `index`, declared [`Input::bool`].
    #[track_caller]
    pub fn bool(&self, index: usize) -> DispatchTensor {
        self.one(index, TensorKind::Bool, "bool")
    }

    /// Input `index`, declared [`Input::optional_bool`].
    #[track_caller]
    pub fn optional_bool(&self, index: usize) -> Option<DispatchTensor> {
        self.optional(index, TensorKind::Bool, "optional_bool")
    }

    /// Input `index`, declared [`Input::bools`].
    #[track_caller]
    pub fn bools(&self, index: usize) -> Vec<DispatchTensor> {
        self.many(index, TensorKind::Bool, "bools")
    }

    /// The device of this call (for an op's device parameter).
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The shape and dtype of input `index`, a single or optional tensor (an absent optional
    /// input's spec is the one it would have).
    ///
    /// # Panics
    ///
    /// For an index past the inputs, and for a `Vec` input (use [`specs`](Self::specs)).
    #[track_caller]
    pub fn spec(&self, index: usize) -> TensorSpec {
        let slot = self.spec_slot(index, "spec");
        if slot.container == Container::Vec {
            panic!(
                "op check failed: op `{}`: the check closure called `Args::spec({index})`, but \
                 input {index} (`{}`) is a `Vec`. Fix: call `Args::specs({index})`. See {}",
                self.op,
                slot.name,
                burn_route_core::errors::link("op-check-failed")
            );
        }
        let t = &slot.tensors[0];
        TensorSpec::new(t.shape(), t.dtype())
    }

    /// The shape and dtype of every tensor of input `index`: one for a single or optional
    /// input (present or not), one per element of a `Vec`.
    ///
    /// # Panics
    ///
    /// For an index past the inputs.
    #[track_caller]
    pub fn specs(&self, index: usize) -> Vec<TensorSpec> {
        self.spec_slot(index, "specs")
            .tensors
            .iter()
            .map(|t| TensorSpec::new(t.shape(), t.dtype()))
            .collect()
    }

    #[track_caller]
    pub(super) fn spec_slot(&self, index: usize, accessor: &str) -> &Slot {
        self.slots.get(index).unwrap_or_else(|| {
            panic!(
                "op check failed: op `{}`: the check closure called `Args::{accessor}({index})`, \
                 but the op declares {} inputs. Fix: count every `.input(...)` from 0, in order. See {}",
                self.op,
                self.slots.len(),
                burn_route_core::errors::link("op-check-failed")
            )
        })
    }
}

//! A route's inputs: each tensor of an op call with its name, expected kind and policy, one at a
//! time or grouped by parameter (`Option` and `Vec` inputs).

use burn_dispatch::DispatchTensor;

use super::super::op::{InputName, TensorKind};

/// The tensors of one parameter as planning sees them: one, an optional one, or a `Vec`.
/// Generated code passes an op's groups to [`Group::all`] when it has `Option` or `Vec` inputs
/// (plain arrays of [`Input`]s otherwise).
#[derive(Clone, Copy, Debug)]
pub enum Group<'a> {
    /// A single tensor, or a present `Option`.
    One(Input<'a>),
    /// An absent `Option`.
    Absent,
    /// The elements of a `Vec` parameter, named `name[i]` in errors.
    Many {
        /// The parameter.
        name: &'static str,
        /// Its declared kind.
        kind: TensorKind,
        /// The elements.
        tensors: &'a [DispatchTensor],
    },
}

/// Declares `Group`'s constructors for one tensor kind.
macro_rules! group_kind_fns {
    ($($one:ident, $opt:ident, $vec:ident, $kind:ident;)*) => {$(
        #[doc = concat!("A ", stringify!($one), " tensor.")]
        #[inline]
        pub fn $one(name: &'static str, tensor: &'a DispatchTensor) -> Self {
            Self::One(Input::new(name, TensorKind::$kind, tensor))
        }
        #[doc = concat!("An optional ", stringify!($one), " tensor.")]
        #[inline]
        pub fn $opt(name: &'static str, tensor: Option<&'a DispatchTensor>) -> Self {
            tensor.map_or(Self::Absent, |t| Self::$one(name, t))
        }
        #[doc = concat!("A `Vec` of ", stringify!($one), " tensors.")]
        #[inline]
        pub fn $vec(name: &'static str, tensors: &'a [DispatchTensor]) -> Self {
            Self::Many { name, kind: TensorKind::$kind, tensors }
        }
    )*};
}

impl<'a> Group<'a> {
    group_kind_fns! {
        float, float_opt, float_vec, Float;
        int, int_opt, int_vec, Int;
        bool, bool_opt, bool_vec, Bool;
        quantized, quantized_opt, quantized_vec, Quantized;
    }

    /// Every input of `groups`, in order: what [`Route::plan`] and [`Route::fast`] take.
    #[inline]
    pub fn all<const N: usize>(groups: [Self; N]) -> impl Iterator<Item = Input<'a>> + Clone {
        groups.into_iter().flat_map(Group::inputs)
    }

    /// This group's inputs.
    fn inputs(self) -> GroupInputs<'a> {
        GroupInputs {
            group: self,
            next: 0,
        }
    }
}

/// The inputs of one [`Group`].
#[derive(Clone, Debug)]
struct GroupInputs<'a> {
    group: Group<'a>,
    next: usize,
}

impl<'a> Iterator for GroupInputs<'a> {
    type Item = Input<'a>;

    #[inline]
    fn next(&mut self) -> Option<Input<'a>> {
        let index = self.next;
        self.next += 1;
        match self.group {
            Group::One(input) => (index == 0).then_some(input),
            Group::Absent => None,
            Group::Many {
                name,
                kind,
                tensors,
            } => tensors
                .get(index)
                .map(|t| Input::new(name, kind, t).at(index)),
        }
    }
}

/// One tensor input of an op call, seen by the planner.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    pub(super) name: InputName,
    pub(super) kind: TensorKind,
    pub(super) tensor: &'a DispatchTensor,
}

impl<'a> Input<'a> {
    #[inline]
    pub(crate) fn new(name: &'static str, kind: TensorKind, tensor: &'a DispatchTensor) -> Self {
        Self {
            name: InputName::new(name),
            kind,
            tensor,
        }
    }
    /// A float input.
    #[inline]
    pub fn float(name: &'static str, tensor: &'a DispatchTensor) -> Self {
        Self::new(name, TensorKind::Float, tensor)
    }
    /// An int input.
    #[inline]
    pub fn int(name: &'static str, tensor: &'a DispatchTensor) -> Self {
        Self::new(name, TensorKind::Int, tensor)
    }
    /// A bool input.
    #[inline]
    pub fn bool(name: &'static str, tensor: &'a DispatchTensor) -> Self {
        Self::new(name, TensorKind::Bool, tensor)
    }
    /// A quantized input.
    #[inline]
    pub fn quantized(name: &'static str, tensor: &'a DispatchTensor) -> Self {
        Self::new(name, TensorKind::Quantized, tensor)
    }
    /// This input as element `index` of a `Vec` parameter.
    #[must_use]
    #[inline]
    pub fn at(self, index: usize) -> Self {
        Self {
            name: InputName::at(self.name.name, index),
            ..self
        }
    }
}

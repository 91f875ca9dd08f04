//! What an op check checks: the op's inputs ([`Input`]) and the op itself ([`Op`]: its
//! policy, output shapes and dtypes, tolerances).

use super::*;

/// One tensor input of a checked op: its name (as the op's parameter, for messages), kind,
/// container, shape(s) and the range its values are drawn in.
#[derive(Clone, Debug)]
pub struct Input {
    pub(super) name: &'static str,
    pub(super) kind: TensorKind,
    pub(super) container: Container,
    pub(super) shapes: Vec<Vec<usize>>,
    pub(super) range: Option<(f64, f64)>,
    pub(super) gradient: bool,
}

impl Input {
    pub(super) fn new(
        name: &'static str,
        kind: TensorKind,
        container: Container,
        shapes: Vec<Vec<usize>>,
    ) -> Self {
        Self {
            name,
            kind,
            container,
            shapes,
            range: None,
            gradient: true,
        }
    }

    /// A float tensor of `shape`, values uniform in `[-2, 2)` unless [`range`](Self::range) says
    /// otherwise.
    pub fn float(name: &'static str, shape: &[usize]) -> Self {
        Self::new(
            name,
            TensorKind::Float,
            Container::One,
            vec![shape.to_vec()],
        )
    }

    /// An `Option` of a float tensor of `shape`.
    pub fn optional_float(name: &'static str, shape: &[usize]) -> Self {
        Self::new(
            name,
            TensorKind::Float,
            Container::Option,
            vec![shape.to_vec()],
        )
    }

    /// A `Vec` of float tensors, one per shape.
    pub fn floats(name: &'static str, shapes: &[&[usize]]) -> Self {
        let shapes = shapes.iter().map(|s| s.to_vec()).collect();
        Self::new(name, TensorKind::Float, Container::Vec, shapes)
    }

    /// An int tensor of `shape`, values the integers in `[0, 4)` unless
    /// [`range`](Self::range) says otherwise.
    pub fn int(name: &'static str, shape: &[usize]) -> Self {
        Self::new(name, TensorKind::Int, Container::One, vec![shape.to_vec()])
    }

    /// An `Option` of an int tensor of `shape`.
    pub fn optional_int(name: &'static str, shape: &[usize]) -> Self {
        Self::new(
            name,
            TensorKind::Int,
            Container::Option,
            vec![shape.to_vec()],
        )
    }

    /// A `Vec` of int tensors, one per shape.
    pub fn ints(name: &'static str, shapes: &[&[usize]]) -> Self {
        let shapes = shapes.iter().map(|s| s.to_vec()).collect();
        Self::new(name, TensorKind::Int, Container::Vec, shapes)
    }

    /// A bool tensor of `shape`, each element true with probability 1/2.
    pub fn bool(name: &'static str, shape: &[usize]) -> Self {
        Self::new(name, TensorKind::Bool, Container::One, vec![shape.to_vec()])
    }

    /// An `Option` of a bool tensor of `shape`.
    pub fn optional_bool(name: &'static str, shape: &[usize]) -> Self {
        Self::new(
            name,
            TensorKind::Bool,
            Container::Option,
            vec![shape.to_vec()],
        )
    }

    /// A `Vec` of bool tensors, one per shape.
    pub fn bools(name: &'static str, shapes: &[&[usize]]) -> Self {
        let shapes = shapes.iter().map(|s| s.to_vec()).collect();
        Self::new(name, TensorKind::Bool, Container::Vec, shapes)
    }

    /// Draws the values in `[lo, hi)`: uniformly for a float input, the integers in it for an
    /// int input.
    ///
    /// # Panics
    ///
    /// For a bool input, for a bound that is not finite, for `lo > hi`, and for an int range
    /// that holds no integer.
    #[must_use]
    #[track_caller]
    pub fn range(mut self, lo: f64, hi: f64) -> Self {
        let name = self.name;
        assert!(
            self.kind != TensorKind::Bool,
            "op check: input `{name}` is a bool tensor, which has no value range. Fix: remove \
             `.range({lo}, {hi})` from it"
        );
        assert!(
            lo.is_finite() && hi.is_finite() && lo <= hi,
            "op check: input `{name}` has the range [{lo}, {hi}), which is empty or not finite. \
             Fix: pass finite bounds with lo <= hi"
        );
        assert!(
            self.kind != TensorKind::Int || hi.ceil() > lo.ceil(),
            "op check: int input `{name}` has the range [{lo}, {hi}), which holds no integer. \
             Fix: widen it (the integers n with lo <= n < hi are drawn)"
        );
        self.range = Some((lo, hi));
        self
    }

    /// Marks a float input the op legitimately gives no gradient (a `differentiable` op whose
    /// backward pass leaves it out): the gradient check then requires its gradient to be absent
    /// or zero instead of comparing it with finite differences.
    ///
    /// # Panics
    ///
    /// For an int or bool input (those are never tracked).
    #[must_use]
    #[track_caller]
    pub fn no_gradient(mut self) -> Self {
        assert!(
            self.kind == TensorKind::Float,
            "op check: input `{}` is a {} tensor, which never gets a gradient. Fix: remove \
             `.no_gradient()` from it",
            self.name,
            self.kind
        );
        self.gradient = false;
        self
    }

    /// The name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The element kind.
    pub fn kind(&self) -> TensorKind {
        self.kind
    }

    /// The container.
    pub fn container(&self) -> Container {
        self.container
    }

    /// The shape of each tensor (one for a single or optional input).
    pub fn shapes(&self) -> &[Vec<usize>] {
        &self.shapes
    }

    /// The range the values are drawn in, defaults applied; `None` for a bool input.
    pub fn value_range(&self) -> Option<(f64, f64)> {
        match self.kind {
            TensorKind::Float => Some(self.range.unwrap_or(DEFAULT_FLOAT_RANGE)),
            TensorKind::Int => Some(self.range.unwrap_or(DEFAULT_INT_RANGE)),
            // No constructor makes a quantized input (the check draws none).
            TensorKind::Bool | TensorKind::Quantized => None,
        }
    }

    /// Whether the gradient check compares this input's gradient (false after
    /// [`no_gradient`](Self::no_gradient), and for int and bool inputs).
    pub fn has_gradient(&self) -> bool {
        self.kind == TensorKind::Float && self.gradient
    }

    /// How the op's signature spells this input's type, for messages.
    pub(super) fn constructor(&self) -> &'static str {
        self.kind
            .check_name(self.container)
            .unwrap_or("quantized (not built by the op check)")
    }

    /// The name of element `index`, for messages: `x`, or `xs[1]` for a `Vec` input.
    #[cfg_attr(not(feature = "autodiff"), allow(dead_code))]
    pub(super) fn element_name(&self, index: usize) -> String {
        match self.container {
            Container::Vec => format!("{}[{index}]", self.name),
            _ => self.name.to_owned(),
        }
    }
}

/// One op under check: its name (as routing errors name it), autodiff policy, inputs in the
/// order the check closure reads them, and what to check.
#[derive(Clone, Debug)]
pub struct Op {
    pub(super) name: &'static str,
    pub(super) policy: Policy,
    /// The backends the op is routed to (`None`: every backend).
    pub(super) backends: Option<Vec<BackendId>>,
    pub(super) inputs: Vec<Input>,
    pub(super) output_shapes: Vec<(usize, Vec<usize>)>,
    pub(super) output_dtypes: Vec<(usize, OutputDtype)>,
    pub(super) tolerance: f64,
    pub(super) value_tolerance: f64,
    pub(super) gradients: bool,
    /// The float dtypes the op's kernels take (empty: every dtype), and what the others run.
    pub(super) dtypes: Vec<FloatDType>,
    pub(super) other_dtypes: OtherDtypes,
}

impl Op {
    /// An op with no inputs yet, the default tolerances, and the gradient check on.
    pub fn new(name: &'static str, policy: Policy) -> Self {
        Self {
            name,
            policy,
            backends: None,
            inputs: Vec::new(),
            output_shapes: Vec::new(),
            output_dtypes: Vec::new(),
            tolerance: DEFAULT_TOLERANCE,
            value_tolerance: DEFAULT_VALUE_TOLERANCE,
            gradients: true,
            dtypes: Vec::new(),
            other_dtypes: OtherDtypes::Error,
        }
    }

    /// The float dtypes the op's kernels take and what a call in another dtype runs (the
    /// manifest's `dtypes` and `other_dtypes`). On Flex, [`run`] then also calls the op with
    /// every float input in each declared dtype and compares with its values in the device's
    /// default dtype (within [`dtype_tolerance`]), and checks that a call in an undeclared
    /// dtype fails with [`RouteError::UnsupportedDtype`] when `other` is
    /// [`OtherDtypes::Error`]; [`compare_with`] compares the kernel with the composition in
    /// each declared dtype, and in an undeclared one when `other` is
    /// [`OtherDtypes::Composition`].
    #[must_use]
    pub fn dtypes(mut self, dtypes: &[FloatDType], other: OtherDtypes) -> Self {
        self.dtypes = dtypes.to_vec();
        self.other_dtypes = other;
        self
    }

    /// The declared dtypes Flex stores (not `flex32`), which the dtype checks run in.
    pub(super) fn checked_dtypes(&self) -> Vec<FloatDType> {
        self.dtypes
            .iter()
            .copied()
            .filter(|d| CHECKED_DTYPES.contains(d))
            .collect()
    }

    /// The dtype of the float inputs of the main checks: the device's default (`None`) unless
    /// the op declares dtypes without `f32`; then the first it declares of `f64`, `f16` and
    /// `bf16`, in that order.
    pub(super) fn baseline_dtype(&self) -> Option<FloatDType> {
        if self.dtypes.is_empty() || self.dtypes.contains(&FloatDType::F32) {
            return None;
        }
        [FloatDType::F64, FloatDType::F16, FloatDType::BF16]
            .into_iter()
            .find(|d| self.dtypes.contains(d))
    }

    /// The first dtype Flex stores that the op's kernels do not take, if it declares its
    /// dtypes.
    pub(super) fn undeclared_dtype(&self) -> Option<FloatDType> {
        if self.dtypes.is_empty() {
            return None;
        }
        CHECKED_DTYPES
            .into_iter()
            .find(|d| !self.dtypes.contains(d))
    }

    /// The backends the op is routed to: the check runs on the first of them this build has
    /// (its reference: values, policy and gradients) and compares the others with it. Default:
    /// Flex, then every other backend compiled in.
    #[must_use]
    pub fn backends(mut self, backends: &[BackendId]) -> Self {
        self.backends = Some(backends.to_vec());
        self
    }

    /// [`Input::range`] of the input added last.
    ///
    /// # Panics
    ///
    /// Before any input, and as [`Input::range`].
    #[must_use]
    #[track_caller]
    pub fn range(mut self, lo: f64, hi: f64) -> Self {
        let last = self
            .inputs
            .pop()
            .expect("op check: `Op::range` follows the `Op::input` it applies to");
        self.inputs.push(last.range(lo, hi));
        self
    }

    /// [`Input::no_gradient`] of the input added last.
    ///
    /// # Panics
    ///
    /// Before any input, and as [`Input::no_gradient`].
    #[must_use]
    #[track_caller]
    pub fn no_gradient(mut self) -> Self {
        let last = self
            .inputs
            .pop()
            .expect("op check: `Op::no_gradient` follows the `Op::input` it applies to");
        self.inputs.push(last.no_gradient());
        self
    }

    /// Adds `backend` to the op's backends when `routed` (the generated check passes
    /// `cfg!(...)` of the backend's cfg); see [`Op::backends`].
    #[must_use]
    pub fn backend(mut self, backend: BackendId, routed: bool) -> Self {
        let list = self.backends.get_or_insert_with(Vec::new);
        if routed {
            list.push(backend);
        }
        self
    }

    pub(super) fn routed(&self, backend: BackendId) -> bool {
        self.backends.as_ref().is_none_or(|b| b.contains(&backend))
    }

    /// `Op::new(name, Policy::Differentiable)`.
    pub fn differentiable(name: &'static str) -> Self {
        Self::new(name, Policy::Differentiable)
    }

    /// `Op::new(name, Policy::Detach)`.
    pub fn detach(name: &'static str) -> Self {
        Self::new(name, Policy::Detach)
    }

    /// `Op::new(name, Policy::Reject)`.
    pub fn reject(name: &'static str) -> Self {
        Self::new(name, Policy::Reject)
    }

    /// Adds the next input; [`Args`] reads it by its position among the inputs added.
    ///
    /// # Panics
    ///
    /// When another input already has its name.
    #[must_use]
    #[track_caller]
    pub fn input(mut self, input: Input) -> Self {
        assert!(
            self.inputs.iter().all(|i| i.name != input.name),
            "op check of `{}`: two inputs are named `{}`. Fix: give each input the name of its \
             parameter",
            self.name,
            input.name
        );
        self.inputs.push(input);
        self
    }

    /// Declares the shape of output leaf `leaf`, checked against the shape the op returns on
    /// Flex. The leaves are the returned [`Value`]s flattened in order: one per tensor or
    /// optional tensor (present or not), one per element of a `Vec`, none for
    /// [`Value::plain`].
    #[must_use]
    pub fn output_shape(mut self, leaf: usize, shape: &[usize]) -> Self {
        self.output_shapes.retain(|(l, _)| *l != leaf);
        self.output_shapes.push((leaf, shape.to_vec()));
        self
    }

    /// Declares the dtype of output leaf `leaf` (numbered as for [`Op::output_shape`]), checked
    /// against the dtype the op returns in every call of the values checks: on every backend,
    /// and in each dtype of [`Op::dtypes`].
    #[must_use]
    pub fn output_dtype(mut self, leaf: usize, dtype: OutputDtype) -> Self {
        self.output_dtypes.retain(|(l, _)| *l != leaf);
        self.output_dtypes.push((leaf, dtype));
        self
    }

    /// The tolerance of the gradient check (default [`DEFAULT_TOLERANCE`], which explains the
    /// value): an autodiff gradient passes when `|auto - fd| <= tol * (1 + |fd|)`.
    ///
    /// # Panics
    ///
    /// For a negative or NaN tolerance.
    #[must_use]
    #[track_caller]
    pub fn tolerance(mut self, tol: f64) -> Self {
        assert!(
            tol >= 0.0,
            "op check of `{}`: tolerance {tol} is negative or NaN",
            self.name
        );
        self.tolerance = tol;
        self
    }

    /// The tolerance of the value comparisons (default [`DEFAULT_VALUE_TOLERANCE`]): a float
    /// element passes when `|actual - expected| <= tol * (1 + |expected|)`.
    ///
    /// # Panics
    ///
    /// For a negative or NaN tolerance.
    #[must_use]
    #[track_caller]
    pub fn value_tolerance(mut self, tol: f64) -> Self {
        assert!(
            tol >= 0.0,
            "op check of `{}`: value tolerance {tol} is negative or NaN",
            self.name
        );
        self.value_tolerance = tol;
        self
    }

    /// Whether a `differentiable` op's gradients are checked against finite differences (the
    /// default). Off, its tracked forward pass is still checked. On, the check calls the op
    /// twice per element of each float input: keep the declared shapes small.
    #[must_use]
    pub fn gradients(mut self, on: bool) -> Self {
        self.gradients = on;
        self
    }

    /// The op's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Its autodiff policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Its inputs, in order.
    pub fn inputs(&self) -> &[Input] {
        &self.inputs
    }
}

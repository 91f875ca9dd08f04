//! The one recorder of an op's call as a custom operation: a deferred operation on `Fusion<B>`
//! ([`super::fusion::Lazy`]) and an operation sent to a Remote server ([`super::remote::Call`])
//! are both a [`Recorder`], built the same way: tensor inputs recorded in order (an `option`
//! input's presence and a `vec` input's length with them), plain arguments as scalars, and the
//! outputs declared one group at a time (one tensor, an `option`, a `vec`, a backward kernel's
//! gradient) with their shapes and dtypes. Only what starts a call and what ends it differ,
//! and the [`Target`] they record for: `Lazy` queues the operation with the closure that runs
//! the inner backend's kernel, `Call` sends it to the server, which runs its own.

use burn_backend::{DType, Shape};
use burn_ir::{ScalarIr, TensorId, TensorIr};

use super::outputs::Group;
use super::{OutputName, TensorKind, TensorSpec};

/// Where a recorded call goes: the tensors it takes and the client that names its device.
pub trait Target {
    /// The tensor primitive an input is recorded from.
    type Tensor;
    /// What knows the device and creates the outputs' handles.
    type Client;
    /// What the target knows of the op beside its name (where its metadata is declared, its
    /// operation's id).
    type Facts: Copy;

    /// The client of `tensor`'s device.
    fn client_of(tensor: &Self::Tensor) -> Self::Client;
    /// The tensor's description: its id, shape and dtype.
    fn into_ir(tensor: Self::Tensor) -> TensorIr;
    /// A new handle for an output.
    fn empty_handle(client: &Self::Client) -> TensorId;
    /// The device's default dtype for tensors of `kind`.
    fn default_dtype(client: &Self::Client, kind: TensorKind) -> DType;
}

/// A recorded input: where its handle is found when the operation runs.
#[derive(Clone, Debug)]
pub struct In(pub(crate) TensorIr);

impl In {
    /// The input's shape and dtype.
    pub fn spec(&self) -> TensorSpec {
        TensorSpec::new(self.0.shape.clone(), self.0.dtype)
    }
}

/// A declared output: its id, its name in messages and what was declared for it (what a
/// deferred operation publishes and checks; a Remote call's outputs come back in order, so
/// without `cube` nothing reads them).
#[derive(Clone, Debug)]
#[cfg_attr(not(feature = "cube"), allow(dead_code))]
pub struct Out {
    pub(crate) id: TensorId,
    pub(crate) name: OutputName,
    pub(crate) declared: TensorSpec,
}

/// One call of an op as a custom operation, built input by input and output by output (see
/// the module docs; [`super::fusion::Lazy`] and [`super::remote::Call`] show a whole call).
pub struct Recorder<T: Target> {
    pub(crate) op: &'static str,
    pub(crate) facts: T::Facts,
    pub(crate) client: Option<T::Client>,
    pub(crate) inputs: Vec<TensorIr>,
    pub(crate) outputs: Vec<TensorIr>,
    pub(crate) scalars: Vec<ScalarIr>,
    pub(crate) groups: Vec<Group>,
}

impl<T: Target> Recorder<T> {
    /// A call of `op`; its first tensor input (or the client given later) names the device.
    pub(crate) fn start(op: &'static str, facts: T::Facts, client: Option<T::Client>) -> Self {
        Self {
            op,
            facts,
            client,
            inputs: Vec::new(),
            outputs: Vec::new(),
            scalars: Vec::new(),
            groups: Vec::new(),
        }
    }

    fn client(&self) -> &T::Client {
        self.client
            .as_ref()
            .expect("an input or a device names the call's device")
    }

    /// Adds a tensor input (any kind). Its handle is read when the operation runs.
    pub fn input(&mut self, tensor: T::Tensor) -> In {
        if self.client.is_none() {
            self.client = Some(T::client_of(&tensor));
        }
        let ir = T::into_ir(tensor);
        self.inputs.push(ir.clone());
        In(ir)
    }

    /// Adds an `option` input; its presence is recorded, so the operation knows which inputs
    /// it is given.
    pub fn input_option(&mut self, tensor: Option<T::Tensor>) -> Option<In> {
        self.scalars.push(ScalarIr::Bool(tensor.is_some()));
        tensor.map(|t| self.input(t))
    }

    /// Adds the inputs of a `vec` input; its length is recorded.
    pub fn inputs(&mut self, tensors: Vec<T::Tensor>) -> Vec<In> {
        self.scalars.push(ScalarIr::UInt(tensors.len() as u64));
        tensors.into_iter().map(|t| self.input(t)).collect()
    }

    /// The shape and dtype of an input, for computing the outputs'.
    pub fn spec(&self, input: &In) -> TensorSpec {
        input.spec()
    }

    /// The spec of an `option` input, when it is present.
    pub fn spec_option(&self, input: Option<&In>) -> Option<TensorSpec> {
        input.map(In::spec)
    }

    /// The specs of a `vec` input.
    pub fn specs(&self, inputs: &[In]) -> Vec<TensorSpec> {
        inputs.iter().map(In::spec).collect()
    }

    /// The device's default dtype for tensors of `kind` (a `dtype = "default"` output).
    ///
    /// # Panics
    /// Before any input was added to a call started without a device.
    pub fn default_dtype(&self, kind: TensorKind) -> DType {
        T::default_dtype(self.client(), kind)
    }

    /// Declares the output at `path` (`output`, `output[1]`, ...) of `kind`.
    ///
    /// # Panics
    /// Before any input was added to a call started without a device, or (debug builds) when
    /// `dtype` is not of `kind` (a metadata function's bug).
    pub fn output(
        &mut self,
        kind: TensorKind,
        path: &'static str,
        shape: Shape,
        dtype: DType,
    ) -> Out {
        self.groups.push(Group::One);
        self.declare(kind, OutputName::new(path), shape, dtype)
    }

    /// Declares an `option` output: present when `shape` is.
    pub fn output_option(
        &mut self,
        kind: TensorKind,
        path: &'static str,
        shape: Option<Shape>,
        dtype: DType,
    ) -> Option<Out> {
        self.groups.push(Group::Option(shape.is_some()));
        shape.map(|shape| self.declare(kind, OutputName::new(path), shape, dtype))
    }

    /// Declares a `vec` output: one element per shape.
    pub fn output_vec(
        &mut self,
        kind: TensorKind,
        path: &'static str,
        shapes: Vec<Shape>,
        dtype: DType,
    ) -> Vec<Out> {
        self.groups.push(Group::Vec(shapes.len()));
        shapes
            .into_iter()
            .enumerate()
            .map(|(i, shape)| self.declare(kind, OutputName::new(path).element(i), shape, dtype))
            .collect()
    }

    /// Declares the gradient of one float input of a backward kernel (`path` names it in
    /// messages), when `wanted`: with the shape and dtype of `like` (the input itself when the
    /// backward pass receives it, else the incoming gradient; `None`, an absent optional input,
    /// declares nothing).
    pub fn gradient(
        &mut self,
        path: &'static str,
        wanted: bool,
        like: Option<&TensorSpec>,
    ) -> Option<Out> {
        let like = like.filter(|_| wanted);
        self.groups.push(Group::Option(like.is_some()));
        like.map(|like| {
            self.declare(
                TensorKind::Float,
                OutputName::new(path),
                like.shape.clone(),
                like.dtype,
            )
        })
    }

    fn declare(&mut self, kind: TensorKind, name: OutputName, shape: Shape, dtype: DType) -> Out {
        debug_assert!(
            of_kind(kind, dtype),
            "op `{}`: output `{name}` is a {kind} tensor but its declared dtype is {dtype:?}",
            self.op
        );
        let id = T::empty_handle(self.client());
        self.outputs
            .push(TensorIr::uninit(id, shape.clone(), dtype));
        Out {
            id,
            name,
            declared: TensorSpec::new(shape, dtype),
        }
    }
}

/// The default dtype of `kind` tensors on `device` of backend `B` (what a target's
/// [`Target::default_dtype`] answers for its device).
pub(crate) fn device_default<B: burn_backend::Backend>(
    device: &B::Device,
    kind: TensorKind,
) -> DType {
    let settings = burn_backend::get_or_init_device_settings::<B>(device);
    match kind {
        TensorKind::Float | TensorKind::Quantized => settings.float_dtype.into(),
        TensorKind::Int => settings.int_dtype.into(),
        TensorKind::Bool => settings.bool_dtype.into(),
    }
}

/// Whether `dtype` is a dtype of `kind` tensors.
fn of_kind(kind: TensorKind, dtype: DType) -> bool {
    match kind {
        TensorKind::Float => dtype.is_float(),
        TensorKind::Int => dtype.is_int() || dtype.is_uint(),
        TensorKind::Bool => dtype.is_bool(),
        TensorKind::Quantized => matches!(dtype, DType::QFloat(_)),
    }
}

/// `gradient` at `shape`, as the generated `Autodiff<B, C>` backward pass brings a gradient to
/// its input's shape: summed over the dimensions where `shape` has 1 and it does not (those
/// its input was broadcast along), expanded over those where it has 1 and `shape` does not. How
/// the running side of a backward kernel's call (a deferred operation, or the server) brings a
/// gradient to its input's declared shape.
///
/// # Errors
/// When the ranks differ or a dimension is neither equal nor 1 on one side.
pub(crate) fn summed_to<B: burn_backend::Backend>(
    gradient: burn_backend::tensor::FloatTensor<B>,
    shape: &Shape,
) -> Result<burn_backend::tensor::FloatTensor<B>, String> {
    let have = burn_backend::TensorMetadata::shape(&gradient);
    let fits = have.num_dims() == shape.num_dims()
        && (0..have.num_dims()).all(|d| have[d] == shape[d] || have[d] == 1 || shape[d] == 1);
    if !fits {
        return Err(format!(
            "the backward kernel gave a gradient of shape {:?} for an input of shape {:?}",
            have.as_slice(),
            shape.as_slice()
        ));
    }
    let mut gradient = gradient;
    for d in 0..shape.num_dims() {
        if shape[d] == 1 && have[d] != 1 {
            gradient = B::float_sum_dim(gradient, d);
        }
    }
    if burn_backend::TensorMetadata::shape(&gradient) != *shape {
        gradient = B::float_expand(gradient, shape.clone());
    }
    Ok(gradient)
}

/// The spec an input with shape contract `rule` against `reference` has, when the rule fixes
/// its shape (`same_as`, `last_dim_of`, `leading_dims_of`): how a backward kernel's call
/// declares the gradient of an input it does not receive. Its dtype is `reference`'s.
pub fn implied(rule: super::ShapeRule, reference: &TensorSpec) -> Option<TensorSpec> {
    let dims = rule.implied(reference.shape.as_slice())?;
    Some(TensorSpec::new(Shape::from(dims.to_vec()), reference.dtype))
}

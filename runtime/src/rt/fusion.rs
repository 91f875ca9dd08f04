//! Ops on `Fusion<B>`: one opaque, deferred operation per call, whose kernel is `B`'s.
//!
//! `Cube` is `Fusion<CubeBackend>` whenever burn-cubecl's `fusion` feature is on, which a
//! default `burn`/`burn-tensor` dependency with `wgpu` turns on through feature unification.
//! The generator writes `impl<B: FusionBackend + Trait> Trait for Fusion<B>` from each op's
//! output metadata (`shape` and `dtype` in `ops.toml`) with `Lazy`: the call computes its
//! outputs' shapes and dtypes, queues the operation in the fusion stream and returns lazy
//! tensors at once; when the stream executes, `B`'s kernel runs on the inputs' handles. In debug
//! builds the kernel's actual outputs are compared with the declared ones first, and a mismatch
//! fails the operation with `RouteError::OutputMetadata`'s
//! text (a read of any output returns it), never a silently wrong shape downstream.
//!
//! The generator lowers the backward kernels of the ops that run so (trait methods a `backward`
//! key names) the same way, each wanted gradient declared with its input's shape and dtype
//! when the kernel receives the input (else the incoming gradient's).
//! `Lazy` is public so that a trait of your own can lower its methods the same way by hand:
//! see its docs.

use burn_backend::{DType, ExecutionError, TensorMetadata};
use burn_fusion::custom::{
    CustomOpIr, HandleContainer, OperationFn, OperationIr, ScalarIr, StreamId, TensorId, TensorIr,
};

use super::record::{Recorder, Target};
use burn_fusion::{FusionRuntime, FusionTensor};

pub use burn_fusion::{Fusion, FusionBackend};

use super::{OutputName, RouteError, TensorKind, TensorSpec};

/// The handle container of `B`'s fusion runtime, as a deferred operation sees it.
type Container<B> =
    HandleContainer<<<B as FusionBackend>::FusionRuntime as FusionRuntime>::FusionHandle>;
/// A lazy tensor of `Fusion<B>`.
type Lazily<B> = FusionTensor<<B as FusionBackend>::FusionRuntime>;

pub use super::record::{In, Out};

/// What a [`Lazy`] call records for: `Fusion<B>`'s stream, where the operation is queued and
/// later runs `B`'s kernel.
pub struct OnFusion<B>(core::marker::PhantomData<fn() -> B>);

impl<B: FusionBackend> Target for OnFusion<B> {
    type Tensor = Lazily<B>;
    type Client = burn_fusion::Client<B::FusionRuntime>;
    /// Where the op's output metadata is declared (`ops.toml:LINE`), for the check's messages.
    type Facts = &'static str;

    fn client_of(tensor: &Lazily<B>) -> Self::Client {
        tensor.client.clone()
    }

    fn into_ir(tensor: Lazily<B>) -> TensorIr {
        tensor.into_ir()
    }

    fn empty_handle(client: &Self::Client) -> TensorId {
        client.create_empty_handle()
    }

    fn default_dtype(client: &Self::Client, kind: TensorKind) -> DType {
        super::record::device_default::<Fusion<B>>(client.device(), kind)
    }
}

/// One deferred call of an op on `Fusion<B>`, built input by input and output by output: the
/// shared [`Recorder`], started with [`Lazy::new`] and ended with [`Lazy::register`].
///
/// ```ignore
/// // fn my_op(x: FloatTensor<Self>, alpha: f32) -> FloatTensor<Self>, on Fusion<B>:
/// let mut lazy = Lazy::<B>::new("my_op", "ops.toml:12");
/// let x = lazy.input(x);
/// let spec = lazy.spec(&x);
/// let out = lazy.output(TensorKind::Float, "output", spec.shape, spec.dtype);
/// let mut outputs = lazy.register(move |handles| {
///     let result = B::my_op(handles.float(&x), alpha);
///     handles.check(&out, &result)?;
///     handles.publish_float(&out, result);
///     Ok(())
/// });
/// outputs.one()
/// ```
pub type Lazy<B> = Recorder<OnFusion<B>>;

impl<B: FusionBackend> Recorder<OnFusion<B>> {
    /// A call of `op`, whose output metadata is declared at `location` (`ops.toml:LINE`).
    pub fn new(op: &'static str, location: &'static str) -> Self {
        Self::start(op, location, None)
    }

    /// A call of `op` that has no tensor input: its device names the fusion stream.
    pub fn on_device(op: &'static str, location: &'static str, device: &B::Device) -> Self {
        Self::start(op, location, Some(burn_fusion::get_client::<B>(device)))
    }

    /// Records a numeric (or `bool`) argument in the operation's description, as Burn's own
    /// operations do: fusion relativizes it, so a cached plan replays with the new value.
    pub fn scalar(&mut self, value: impl Into<burn_backend::Scalar>) {
        self.scalars.push(ScalarIr::from(value.into()));
    }

    /// Queues the operation; `run` executes it with the inputs' handles and publishes every
    /// output. Returns the lazy outputs in the order they were declared.
    ///
    /// # Panics
    /// When nothing named the stream: an op without tensor inputs needs [`Lazy::on_device`].
    pub fn register<F>(self, run: F) -> Outputs<B>
    where
        F: Fn(&mut Handles<'_, B>) -> Result<(), ExecutionError> + Send + Sync + 'static,
    {
        let Self {
            op,
            facts: location,
            client,
            inputs,
            outputs,
            scalars,
            groups,
        } = self;
        let client = client.expect("an input or a device names the stream");
        let description = CustomOpIr {
            id: format!("burn-route::{op}"),
            inputs,
            outputs,
            scalars,
        };
        let operation = OperationFn(move |handles: &mut Container<B>| {
            run(&mut Handles {
                handles,
                op,
                location,
            })
        });
        let tensors = client.register(
            StreamId::current(),
            OperationIr::Custom(description),
            operation,
        );
        Outputs::<B>::new(tensors, groups)
    }
}

/// The lazy outputs of a registered operation, taken in the order they were declared.
pub type Outputs<B> = super::outputs::Outputs<Lazily<B>>;

/// An input — one, an `option` or a `vec` — as recorded by [`Lazy`].
pub trait Recorded {
    /// The same container of `T`.
    type Of<T>;
    /// Reads each input with `read`.
    fn read<T>(&self, read: &mut dyn FnMut(&TensorIr) -> T) -> Self::Of<T>;
}

impl Recorded for In {
    type Of<T> = T;
    fn read<T>(&self, read: &mut dyn FnMut(&TensorIr) -> T) -> T {
        read(&self.0)
    }
}

impl Recorded for Option<In> {
    type Of<T> = Option<T>;
    fn read<T>(&self, read: &mut dyn FnMut(&TensorIr) -> T) -> Option<T> {
        self.as_ref().map(|input| read(&input.0))
    }
}

impl Recorded for Vec<In> {
    type Of<T> = Vec<T>;
    fn read<T>(&self, read: &mut dyn FnMut(&TensorIr) -> T) -> Vec<T> {
        self.iter().map(|input| read(&input.0)).collect()
    }
}

/// Declared outputs — one, an `option` or a `vec` — and what a kernel returned for them.
pub trait Declared<P> {
    /// The tensor primitive.
    type Item;
    /// Each declared output and what the kernel returned for it, or the name of an output the
    /// kernel left out (or added).
    ///
    /// # Errors
    /// The first output present on one side only.
    fn pair<'a>(&'a self, actual: &'a P) -> Result<Vec<(&'a Out, &'a Self::Item)>, OutputName>;
    /// Hands each returned tensor to `publish` with its declaration (after [`Declared::pair`]
    /// succeeded).
    fn publish(&self, actual: P, publish: &mut dyn FnMut(&Out, Self::Item));
}

impl<T> Declared<T> for Out {
    type Item = T;
    fn pair<'a>(&'a self, actual: &'a T) -> Result<Vec<(&'a Out, &'a T)>, OutputName> {
        Ok(vec![(self, actual)])
    }
    fn publish(&self, actual: T, publish: &mut dyn FnMut(&Out, T)) {
        publish(self, actual);
    }
}

impl<T> Declared<Option<T>> for Option<Out> {
    type Item = T;
    fn pair<'a>(&'a self, actual: &'a Option<T>) -> Result<Vec<(&'a Out, &'a T)>, OutputName> {
        match (self, actual) {
            (Some(out), Some(value)) => Ok(vec![(out, value)]),
            (None, None) => Ok(Vec::new()),
            (Some(out), None) => Err(out.name),
            (None, Some(_)) => Err(OutputName::new("an undeclared `option` output")),
        }
    }
    fn publish(&self, actual: Option<T>, publish: &mut dyn FnMut(&Out, T)) {
        if let (Some(out), Some(value)) = (self, actual) {
            publish(out, value);
        }
    }
}

impl<T> Declared<Vec<T>> for Vec<Out> {
    type Item = T;
    fn pair<'a>(&'a self, actual: &'a Vec<T>) -> Result<Vec<(&'a Out, &'a T)>, OutputName> {
        if self.len() != actual.len() {
            let missing = self.len().min(actual.len());
            return Err(self
                .get(missing)
                .map_or(OutputName::new("an undeclared `vec` element"), |o| o.name));
        }
        Ok(self.iter().zip(actual).collect())
    }
    fn publish(&self, actual: Vec<T>, publish: &mut dyn FnMut(&Out, T)) {
        self.iter()
            .zip(actual)
            .for_each(|(out, value)| publish(out, value));
    }
}

/// The handles of a running deferred operation: read the inputs, check and publish the outputs.
pub struct Handles<'a, B: FusionBackend> {
    handles: &'a mut Container<B>,
    op: &'static str,
    location: &'static str,
}

impl<B: FusionBackend> Handles<'_, B> {
    /// Float inputs (one, an `option` or a `vec`, as recorded).
    pub fn float<I: Recorded>(&mut self, input: &I) -> I::Of<B::FloatTensorPrimitive> {
        input.read(&mut |ir| self.handles.get_float_tensor::<B>(ir))
    }

    /// Int inputs.
    pub fn int<I: Recorded>(&mut self, input: &I) -> I::Of<B::IntTensorPrimitive> {
        input.read(&mut |ir| self.handles.get_int_tensor::<B>(ir))
    }

    /// Bool inputs.
    pub fn bool<I: Recorded>(&mut self, input: &I) -> I::Of<B::BoolTensorPrimitive> {
        input.read(&mut |ir| self.handles.get_bool_tensor::<B>(ir))
    }

    /// Quantized inputs.
    pub fn quantized<I: Recorded>(&mut self, input: &I) -> I::Of<B::QuantizedTensorPrimitive> {
        input.read(&mut |ir| self.handles.get_quantized_tensor::<B>(ir))
    }

    /// Compares what the kernel returned for `declared` with the declaration: in debug builds
    /// shapes and dtypes, always whether each declared output is there (an output that is
    /// never published would leave its readers waiting). A mismatch is the operation's error,
    /// which a read of any output returns. Check every output before publishing any.
    ///
    /// # Errors
    /// The [`RouteError::OutputMetadata`] text, as an execution error.
    pub fn check<P, D>(&self, declared: &D, actual: &P) -> Result<(), ExecutionError>
    where
        D: Declared<P>,
        D::Item: TensorMetadata,
    {
        let pairs = declared.pair(actual).map_err(|name| {
            self.error(RouteError::OutputPresence {
                op: self.op,
                output: name,
                location: self.location,
            })
        })?;
        if cfg!(debug_assertions) {
            for (out, value) in pairs {
                let (shape, dtype) = (value.shape(), value.dtype());
                if shape != out.declared.shape || dtype != out.declared.dtype {
                    return Err(self.error(RouteError::OutputMetadata {
                        op: self.op,
                        output: out.name,
                        declared: Box::new((out.declared.clone(), TensorSpec::new(shape, dtype))),
                        location: self.location,
                    }));
                }
            }
        }
        Ok(())
    }

    fn error(&self, error: RouteError) -> ExecutionError {
        ExecutionError::with_context(error.to_string())
    }

    /// Publishes float outputs under their ids.
    pub fn publish_float<P, D>(&mut self, declared: &D, actual: P)
    where
        D: Declared<P, Item = B::FloatTensorPrimitive>,
    {
        declared.publish(actual, &mut |out, t| {
            self.handles.register_float_tensor::<B>(&out.id, t);
        });
    }

    /// Publishes int outputs under their ids.
    pub fn publish_int<P, D>(&mut self, declared: &D, actual: P)
    where
        D: Declared<P, Item = B::IntTensorPrimitive>,
    {
        declared.publish(actual, &mut |out, t| {
            self.handles.register_int_tensor::<B>(&out.id, t);
        });
    }

    /// Publishes bool outputs under their ids.
    pub fn publish_bool<P, D>(&mut self, declared: &D, actual: P)
    where
        D: Declared<P, Item = B::BoolTensorPrimitive>,
    {
        declared.publish(actual, &mut |out, t| {
            self.handles.register_bool_tensor::<B>(&out.id, t);
        });
    }

    /// Checks and publishes what a backward kernel returned for the gradients declared with
    /// [`Recorder::gradient`] (`None` where not wanted: a gradient nobody asked for is dropped,
    /// not checked). A gradient with `summed[i]` is first summed back to its declaration's
    /// shape (its input was broadcast in the forward pass), as the server does on Remote.
    ///
    /// # Errors
    /// As [`Handles::check`], or a gradient that is not of its input's shape nor broadcast to it.
    pub fn publish_gradients<const N: usize>(
        &mut self,
        declared: &[Option<Out>; N],
        gradients: [Option<B::FloatTensorPrimitive>; N],
        summed: [bool; N],
    ) -> Result<(), ExecutionError> {
        let mut kept: [Option<B::FloatTensorPrimitive>; N] = std::array::from_fn(|_| None);
        for (i, gradient) in gradients.into_iter().enumerate() {
            if let Some(out) = &declared[i] {
                kept[i] = gradient
                    .map(|g| self.summed(out, g, summed[i]))
                    .transpose()?;
            }
        }
        for (out, gradient) in declared.iter().zip(&kept) {
            self.check(out, gradient)?;
        }
        for (out, gradient) in declared.iter().zip(kept) {
            self.publish_float(out, gradient);
        }
        Ok(())
    }

    /// [`Handles::publish_gradients`] for a backward kernel of one float input, whose gradient
    /// is declared as an output.
    ///
    /// # Errors
    /// As [`Handles::publish_gradients`].
    pub fn publish_gradient(
        &mut self,
        declared: &Out,
        gradient: B::FloatTensorPrimitive,
        summed: bool,
    ) -> Result<(), ExecutionError> {
        let gradient = self.summed(declared, gradient, summed)?;
        self.check(declared, &gradient)?;
        self.publish_float(declared, gradient);
        Ok(())
    }

    fn summed(
        &self,
        out: &Out,
        gradient: B::FloatTensorPrimitive,
        summed: bool,
    ) -> Result<B::FloatTensorPrimitive, ExecutionError> {
        if !summed {
            return Ok(gradient);
        }
        super::record::summed_to::<B>(gradient, &out.declared.shape).map_err(|message| {
            ExecutionError::with_context(format!(
                "op `{}` ({}), {}: {message}",
                self.op, self.location, out.name
            ))
        })
    }

    /// Publishes quantized outputs under their ids.
    pub fn publish_quantized<P, D>(&mut self, declared: &D, actual: P)
    where
        D: Declared<P, Item = B::QuantizedTensorPrimitive>,
    {
        declared.publish(actual, &mut |out, t| {
            self.handles.register_quantized_tensor::<B>(&out.id, t);
        });
    }
}

/// One eager call of an op on `Fusion<B>`: an op routed to Cube with a kernel of its own and no
/// output metadata, which therefore cannot be deferred. Each input is resolved from the fusion
/// stream (the operations queued before it run first, as a read does), `B`'s kernel runs at
/// once on the resolved primitives, and each output is handed back to the stream as a fusion
/// tensor, so Burn ops before and after the call see its values in order. Fusion cannot cross
/// the call: declare the outputs' `shape` and `dtype` to make it one deferred operation.
///
/// ```ignore
/// // fn my_op(x: FloatTensor<Self>, mask: &BoolTensor<Self>) -> FloatTensor<Self>, on Fusion<B>:
/// let eager = Eager::<B>::new("my_op");
/// let result = B::my_op(eager.float(x), &eager.bool_ref(mask));
/// eager.float_out(result)
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Eager<B: FusionBackend> {
    op: &'static str,
    backend: core::marker::PhantomData<fn() -> B>,
}

impl<B: FusionBackend> Eager<B> {
    /// An eager call of `op`.
    pub fn new(op: &'static str) -> Self {
        Self {
            op,
            backend: core::marker::PhantomData,
        }
    }

    /// Panics for an input the stream could not produce (an operation before it failed).
    fn resolved<T>(&self, kind: &str, resolved: Result<T, ExecutionError>) -> T {
        resolved.unwrap_or_else(|err| {
            panic!(
                "op `{}` runs eagerly on `Fusion<B>`, and a {kind} input could not be read \
                 from the fusion stream: {err:?}",
                self.op
            )
        })
    }

    /// A float input, resolved.
    pub fn float(&self, tensor: Lazily<B>) -> B::FloatTensorPrimitive {
        let client = tensor.client.clone();
        self.resolved("float", client.resolve_tensor_float::<B>(tensor))
    }

    /// An int input, resolved.
    pub fn int(&self, tensor: Lazily<B>) -> B::IntTensorPrimitive {
        let client = tensor.client.clone();
        self.resolved("int", client.resolve_tensor_int::<B>(tensor))
    }

    /// A bool input, resolved.
    pub fn bool(&self, tensor: Lazily<B>) -> B::BoolTensorPrimitive {
        let client = tensor.client.clone();
        self.resolved("bool", client.resolve_tensor_bool::<B>(tensor))
    }

    /// A borrowed float input, resolved from a clone (which shares its storage).
    pub fn float_ref(&self, tensor: &Lazily<B>) -> B::FloatTensorPrimitive {
        self.float(tensor.clone())
    }

    /// A borrowed int input.
    pub fn int_ref(&self, tensor: &Lazily<B>) -> B::IntTensorPrimitive {
        self.int(tensor.clone())
    }

    /// A borrowed bool input.
    pub fn bool_ref(&self, tensor: &Lazily<B>) -> B::BoolTensorPrimitive {
        self.bool(tensor.clone())
    }

    /// An `option` float input.
    pub fn float_option(&self, tensor: Option<Lazily<B>>) -> Option<B::FloatTensorPrimitive> {
        tensor.map(|t| self.float(t))
    }

    /// An `option` int input.
    pub fn int_option(&self, tensor: Option<Lazily<B>>) -> Option<B::IntTensorPrimitive> {
        tensor.map(|t| self.int(t))
    }

    /// An `option` bool input.
    pub fn bool_option(&self, tensor: Option<Lazily<B>>) -> Option<B::BoolTensorPrimitive> {
        tensor.map(|t| self.bool(t))
    }

    /// A borrowed `option` float input.
    pub fn float_option_ref(&self, tensor: Option<&Lazily<B>>) -> Option<B::FloatTensorPrimitive> {
        tensor.map(|t| self.float_ref(t))
    }

    /// A borrowed `option` int input.
    pub fn int_option_ref(&self, tensor: Option<&Lazily<B>>) -> Option<B::IntTensorPrimitive> {
        tensor.map(|t| self.int_ref(t))
    }

    /// A borrowed `option` bool input.
    pub fn bool_option_ref(&self, tensor: Option<&Lazily<B>>) -> Option<B::BoolTensorPrimitive> {
        tensor.map(|t| self.bool_ref(t))
    }

    /// A `vec` float input.
    pub fn float_vec(&self, tensors: Vec<Lazily<B>>) -> Vec<B::FloatTensorPrimitive> {
        tensors.into_iter().map(|t| self.float(t)).collect()
    }

    /// A `vec` int input.
    pub fn int_vec(&self, tensors: Vec<Lazily<B>>) -> Vec<B::IntTensorPrimitive> {
        tensors.into_iter().map(|t| self.int(t)).collect()
    }

    /// A `vec` bool input.
    pub fn bool_vec(&self, tensors: Vec<Lazily<B>>) -> Vec<B::BoolTensorPrimitive> {
        tensors.into_iter().map(|t| self.bool(t)).collect()
    }

    /// Hands a computed primitive to the fusion stream of its device: one operation, without
    /// inputs, that publishes it under the new tensor's id when the stream runs it.
    fn output<P, F>(&self, primitive: P, publish: F) -> Lazily<B>
    where
        P: TensorMetadata<Device = B::Device> + Send + 'static,
        F: Fn(&mut Container<B>, &TensorId, P) + Send + Sync + 'static,
    {
        let client = burn_fusion::get_client::<B>(&primitive.device());
        let id = client.create_empty_handle();
        let description = CustomOpIr {
            id: format!("burn-route::{}::eager", self.op),
            inputs: Vec::new(),
            outputs: vec![TensorIr::uninit(id, primitive.shape(), primitive.dtype())],
            scalars: Vec::new(),
        };
        // The stream runs an operation once; `Fn` is what it takes.
        let held = std::sync::Mutex::new(Some(primitive));
        let op = self.op;
        let operation = OperationFn(move |handles: &mut Container<B>| {
            let primitive = held
                .lock()
                .map_err(|_| ExecutionError::with_context(format!("op `{op}`: a poisoned output")))?
                .take()
                .ok_or_else(|| {
                    ExecutionError::with_context(format!("op `{op}`: its eager output ran twice"))
                })?;
            publish(handles, &id, primitive);
            Ok(())
        });
        client
            .register(
                StreamId::current(),
                OperationIr::Custom(description),
                operation,
            )
            .into_iter()
            .next()
            .expect("one output")
    }

    /// A float output, as a tensor of the fusion stream.
    pub fn float_out(&self, primitive: B::FloatTensorPrimitive) -> Lazily<B> {
        self.output(primitive, |handles, id, p| {
            handles.register_float_tensor::<B>(id, p);
        })
    }

    /// An int output.
    pub fn int_out(&self, primitive: B::IntTensorPrimitive) -> Lazily<B> {
        self.output(primitive, |handles, id, p| {
            handles.register_int_tensor::<B>(id, p);
        })
    }

    /// A bool output.
    pub fn bool_out(&self, primitive: B::BoolTensorPrimitive) -> Lazily<B> {
        self.output(primitive, |handles, id, p| {
            handles.register_bool_tensor::<B>(id, p);
        })
    }

    /// An `option` float output.
    pub fn float_out_option(
        &self,
        primitive: Option<B::FloatTensorPrimitive>,
    ) -> Option<Lazily<B>> {
        primitive.map(|p| self.float_out(p))
    }

    /// An `option` int output.
    pub fn int_out_option(&self, primitive: Option<B::IntTensorPrimitive>) -> Option<Lazily<B>> {
        primitive.map(|p| self.int_out(p))
    }

    /// An `option` bool output.
    pub fn bool_out_option(&self, primitive: Option<B::BoolTensorPrimitive>) -> Option<Lazily<B>> {
        primitive.map(|p| self.bool_out(p))
    }

    /// A `vec` float output.
    pub fn float_out_vec(&self, primitives: Vec<B::FloatTensorPrimitive>) -> Vec<Lazily<B>> {
        primitives.into_iter().map(|p| self.float_out(p)).collect()
    }

    /// A `vec` int output.
    pub fn int_out_vec(&self, primitives: Vec<B::IntTensorPrimitive>) -> Vec<Lazily<B>> {
        primitives.into_iter().map(|p| self.int_out(p)).collect()
    }

    /// A `vec` bool output.
    pub fn bool_out_vec(&self, primitives: Vec<B::BoolTensorPrimitive>) -> Vec<Lazily<B>> {
        primitives.into_iter().map(|p| self.bool_out(p)).collect()
    }
}

/// A clone of a plain argument for each run of a deferred kernel (which may not move it out).
pub fn cloned<T: Clone>(value: &T) -> T {
    value.clone()
}

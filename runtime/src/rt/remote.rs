//! Ops on `Remote`: each call is one custom operation, which the server runs with the op's own
//! kernel on its backend.
//!
//! The client side is [`Call`]: generated `impl Trait for Remote` methods record the inputs, the
//! plain arguments ([`Arg`], encoded exactly) and the outputs the manifest's `shape` and `dtype`
//! declare, then [`Call::send`] ships one `OperationIr::Custom` and returns the outputs at once.
//! The server side is [`Serve`]: the generated `serve_remote_ops` function registers one handler
//! per op on a `RemoteServer` for the backend of its devices, and a handshake handler per crate
//! that answers which ops, of which declaration, the server has.
//!
//! An op's id names the module that includes its manifest's dispatch code, the op and a hash of its
//! declaration (`burn-route/MODULE/OP/HASH`, [`RemoteOp::id`]), so a client and a server built from
//! different manifests never run each other's op: before a device's first call of an op, routing
//! asks the server through the crate's handshake ([`ready`]) and refuses the call with a
//! [`RouteError`] when the server does not serve it, or serves another declaration of it.

use super::outputs::Group;
use std::sync::Mutex;

use burn_backend::ops::FloatTensorOps;
use burn_backend::tensor::{Device as DeviceOf, FloatTensor};
use burn_backend::{DType, ExecutionError, Shape, TensorData, get_or_init_device_settings};
use burn_dispatch::backends::Remote;
pub use burn_ir::BackendIr;
use burn_ir::{CustomOpIr, HandleContainer, ScalarIr, TensorError, TensorIr};
use burn_tensor::remote::CustomOpClient;
pub use burn_tensor::server::RemoteServer;

use super::op::OpInfo;
pub use super::op::RemoteOp;
use super::{BackendId, RouteError, TensorKind, TensorSpec};

/// A device of the Remote backend.
pub type RemoteDevice = DeviceOf<Remote>;

/// What every tensor kind is on `Remote`: one primitive type (burn-router's, or burn-fusion's
/// when burn-remote's `fusion` is on).
type Primitive = FloatTensor<Remote>;

// --- Plain arguments ---

/// A plain argument as the scalars of a custom operation, losslessly: `f64` and `u64` exact,
/// an `Option` as its presence and then its value, a `Vec` as its length and then its items.
pub trait Arg: Sized {
    /// Appends the value's scalars.
    fn encode(&self, out: &mut Vec<ScalarIr>);
    /// Reads a value back, or `None` when the scalars are not one.
    fn decode(scalars: &mut Scalars<'_>) -> Option<Self>;
}

/// The scalars of a custom operation, read in the order they were written.
#[derive(Debug)]
pub struct Scalars<'a> {
    rest: core::slice::Iter<'a, ScalarIr>,
}

impl<'a> Scalars<'a> {
    /// Reads `scalars` from the start.
    pub fn new(scalars: &'a [ScalarIr]) -> Self {
        Self {
            rest: scalars.iter(),
        }
    }

    fn next(&mut self) -> Option<&'a ScalarIr> {
        self.rest.next()
    }

    /// Whether every scalar was read.
    pub fn is_empty(&self) -> bool {
        self.rest.len() == 0
    }
}

macro_rules! float_arg {
    ($($t:ty),*) => {$(
        impl Arg for $t {
            fn encode(&self, out: &mut Vec<ScalarIr>) {
                out.push(ScalarIr::Float(f64::from(*self)));
            }
            #[allow(clippy::cast_possible_truncation)]
            fn decode(scalars: &mut Scalars<'_>) -> Option<Self> {
                // Exact: the value was widened from this type.
                match scalars.next()? {
                    ScalarIr::Float(x) => Some(*x as $t),
                    _ => None,
                }
            }
        }
    )*};
}
float_arg!(f32, f64);

macro_rules! int_arg {
    ($variant:ident, $wide:ty: $($t:ty),*) => {$(
        impl Arg for $t {
            fn encode(&self, out: &mut Vec<ScalarIr>) {
                #[allow(clippy::cast_lossless, clippy::cast_possible_wrap)]
                out.push(ScalarIr::$variant(*self as $wide));
            }
            fn decode(scalars: &mut Scalars<'_>) -> Option<Self> {
                match scalars.next()? {
                    ScalarIr::$variant(x) => <$t>::try_from(*x).ok(),
                    _ => None,
                }
            }
        }
    )*};
}
int_arg!(Int, i64: i8, i16, i32, i64, isize);
int_arg!(UInt, u64: u8, u16, u32, u64, usize);

impl Arg for bool {
    fn encode(&self, out: &mut Vec<ScalarIr>) {
        out.push(ScalarIr::Bool(*self));
    }
    fn decode(scalars: &mut Scalars<'_>) -> Option<Self> {
        match scalars.next()? {
            ScalarIr::Bool(x) => Some(*x),
            _ => None,
        }
    }
}

impl Arg for char {
    fn encode(&self, out: &mut Vec<ScalarIr>) {
        out.push(ScalarIr::UInt(u64::from(u32::from(*self))));
    }
    fn decode(scalars: &mut Scalars<'_>) -> Option<Self> {
        match scalars.next()? {
            ScalarIr::UInt(x) => char::from_u32(u32::try_from(*x).ok()?),
            _ => None,
        }
    }
}

impl Arg for String {
    fn encode(&self, out: &mut Vec<ScalarIr>) {
        out.push(ScalarIr::UInt(self.chars().count() as u64));
        for c in self.chars() {
            c.encode(out);
        }
    }
    fn decode(scalars: &mut Scalars<'_>) -> Option<Self> {
        let len = usize::decode(scalars)?;
        // No allocation from an untrusted length: each char takes one scalar.
        if len > scalars.rest.len() {
            return None;
        }
        (0..len).map(|_| char::decode(scalars)).collect()
    }
}

impl<T: Arg> Arg for Option<T> {
    fn encode(&self, out: &mut Vec<ScalarIr>) {
        out.push(ScalarIr::Bool(self.is_some()));
        if let Some(value) = self {
            value.encode(out);
        }
    }
    fn decode(scalars: &mut Scalars<'_>) -> Option<Self> {
        if bool::decode(scalars)? {
            Some(Some(T::decode(scalars)?))
        } else {
            Some(None)
        }
    }
}

impl<T: Arg> Arg for Vec<T> {
    fn encode(&self, out: &mut Vec<ScalarIr>) {
        out.push(ScalarIr::UInt(self.len() as u64));
        for item in self {
            item.encode(out);
        }
    }
    fn decode(scalars: &mut Scalars<'_>) -> Option<Self> {
        let len = usize::decode(scalars)?;
        // No allocation from an untrusted length: each item takes at least one scalar.
        if len > scalars.rest.len() {
            return None;
        }
        (0..len).map(|_| T::decode(scalars)).collect()
    }
}

impl<T: Arg, const N: usize> Arg for [T; N] {
    fn encode(&self, out: &mut Vec<ScalarIr>) {
        for item in self {
            item.encode(out);
        }
    }
    fn decode(scalars: &mut Scalars<'_>) -> Option<Self> {
        let items: Vec<T> = (0..N).map(|_| T::decode(scalars)).collect::<Option<_>>()?;
        items.try_into().ok()
    }
}

macro_rules! tuple_arg {
    ($($name:ident),*) => {
        impl<$($name: Arg),*> Arg for ($($name,)*) {
            #[allow(non_snake_case)]
            fn encode(&self, out: &mut Vec<ScalarIr>) {
                let ($($name,)*) = self;
                $($name.encode(out);)*
            }
            fn decode(scalars: &mut Scalars<'_>) -> Option<Self> {
                Some(($($name::decode(scalars)?,)*))
            }
        }
    };
}
tuple_arg!(A);
tuple_arg!(A, B);
tuple_arg!(A, B, C);
tuple_arg!(A, B, C, D);

// --- Ids ---

/// FNV-1a over `text`: the hashes the handshake compares (core's, which the generator uses too).
pub use burn_route_core::hash;

/// The id of the handshake of the manifest whose dispatch code `module` includes:
/// `burn-route/MODULE/handshake`.
pub fn handshake_id(module: &str) -> String {
    format!("burn-route/{module}/handshake")
}

/// What a server answered for one op.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Answer {
    /// The server runs the op, with the client's declaration.
    Served,
    /// The crate's ops are served, but not this one.
    Missing,
    /// The op is served with another declaration.
    OtherVersion,
    /// The handshake failed: the server does not serve the crate's ops at all (or failed).
    Unanswered(String),
}

/// The handshake's answer codes.
const ANSWER_MISSING: f32 = 0.0;
const ANSWER_SERVED: f32 = 1.0;
const ANSWER_OTHER_VERSION: f32 = 2.0;

/// What each (device, op) answered, kept for the process: a server's ops do not change while
/// it runs. (A few entries per device: a linear scan.)
static ANSWERS: Mutex<Vec<(RemoteDevice, &'static RemoteOp, Answer)>> = Mutex::new(Vec::new());

/// Whether `device`'s server runs `remote`'s op, asking it (one round trip) the first time.
///
/// # Errors
///
/// [`RouteError::RemoteNotServed`] when the server does not serve the op, or serves another
/// declaration of it.
pub fn ready(
    op: &'static OpInfo,
    remote: &'static RemoteOp,
    device: &RemoteDevice,
) -> Result<(), RouteError> {
    let known = {
        let answers = ANSWERS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        answers
            .iter()
            .find(|(d, r, _)| d == device && core::ptr::eq(*r, remote))
            .map(|(_, _, served)| served.clone())
    };
    let served = match known {
        Some(served) => served,
        None => {
            let served = ask(remote, device);
            ANSWERS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((device.clone(), remote, served.clone()));
            served
        }
    };
    let problem = match served {
        Answer::Served => return Ok(()),
        Answer::Missing => super::error::RemoteProblem::Missing,
        Answer::OtherVersion => super::error::RemoteProblem::OtherVersion,
        Answer::Unanswered(cause) => super::error::RemoteProblem::NotServed(cause.into()),
    };
    Err(RouteError::RemoteNotServed {
        op: op.name,
        id: remote.id().into(),
        krate: remote.krate,
        serve: remote.serve,
        problem,
    })
}

/// One handshake: the crate's handshake operation with the op's name and id hashes, and its
/// one-element answer read back.
fn ask(remote: &'static RemoteOp, device: &RemoteDevice) -> Answer {
    let client = CustomOpClient::new(device);
    let out = TensorIr::uninit(client.create_empty_handle(), Shape::new([1]), DType::F32);
    let scalars = vec![ScalarIr::UInt(hash(remote.op)), ScalarIr::UInt(remote.hash)];
    let description = CustomOpIr {
        id: handshake_id(remote.module),
        inputs: Vec::new(),
        outputs: vec![out],
        scalars,
    };
    let Some(answer) = client.register(description).pop() else {
        return Answer::Unanswered("the handshake returned no tensor".to_owned());
    };
    match burn_tensor::read_sync(Remote::float_into_data(answer)) {
        Ok(data) => match data.iter::<f32>().next() {
            Some(ANSWER_SERVED) => Answer::Served,
            Some(ANSWER_OTHER_VERSION) => Answer::OtherVersion,
            Some(ANSWER_MISSING) => Answer::Missing,
            other => Answer::Unanswered(format!("the handshake answered {other:?}")),
        },
        // (Burn's text spans lines; the message keeps it on one.)
        Err(err) => Answer::Unanswered(
            err.to_string()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        ),
    }
}

// --- The client side ---

/// One call of an op on Remote, built input by input and output by output, sent as one custom
/// operation.
///
/// ```ignore
/// // fn my_op(x: FloatTensor<Self>, alpha: f32) -> FloatTensor<Self>, on Remote:
/// let mut call = Call::new(&MY_OP);
/// let x = call.input(x);
/// call.arg(&alpha);
/// call.output(TensorKind::Float, x.shape.clone(), x.dtype);
/// call.send().one()
/// ```
pub struct Call {
    remote: &'static RemoteOp,
    client: Option<(CustomOpClient, RemoteDevice)>,
    inputs: Vec<TensorIr>,
    outputs: Vec<TensorIr>,
    scalars: Vec<ScalarIr>,
    groups: Vec<Group>,
}

impl Call {
    /// A call of `remote`'s op; its first tensor input names the device.
    pub fn new(remote: &'static RemoteOp) -> Self {
        Self {
            remote,
            client: None,
            inputs: Vec::new(),
            outputs: Vec::new(),
            scalars: Vec::new(),
            groups: Vec::new(),
        }
    }

    /// A call of an op without tensor inputs, on `device`.
    pub fn on_device(remote: &'static RemoteOp, device: &RemoteDevice) -> Self {
        let mut call = Self::new(remote);
        call.client = Some((CustomOpClient::new(device), device.clone()));
        call
    }

    /// Adds a tensor input (any kind); returns its shape and dtype.
    pub fn input(&mut self, tensor: Primitive) -> TensorSpec {
        if self.client.is_none() {
            let device = burn_backend::TensorMetadata::device(&tensor);
            self.client = Some((CustomOpClient::new(&device), device));
        }
        let ir = tensor.into_ir();
        let spec = TensorSpec::new(ir.shape.clone(), ir.dtype);
        self.inputs.push(ir);
        spec
    }

    /// Adds an `option` input: its presence is recorded, so the server knows which inputs it is
    /// given.
    pub fn input_option(&mut self, tensor: Option<Primitive>) -> Option<TensorSpec> {
        self.scalars.push(ScalarIr::Bool(tensor.is_some()));
        tensor.map(|t| self.input(t))
    }

    /// Adds a `vec` input: its length is recorded.
    pub fn inputs(&mut self, tensors: Vec<Primitive>) -> Vec<TensorSpec> {
        self.scalars.push(ScalarIr::UInt(tensors.len() as u64));
        tensors.into_iter().map(|t| self.input(t)).collect()
    }

    /// Adds a plain argument.
    pub fn arg<T: Arg>(&mut self, value: &T) {
        value.encode(&mut self.scalars);
    }

    fn device(&self) -> &RemoteDevice {
        &self
            .client
            .as_ref()
            .expect("an input or a device names the remote device")
            .1
    }

    /// The device's default dtype for tensors of `kind` (a `dtype = "default"` output).
    pub fn default_dtype(&self, kind: TensorKind) -> DType {
        let settings = get_or_init_device_settings::<Remote>(self.device());
        match kind {
            TensorKind::Float | TensorKind::Quantized => settings.float_dtype.into(),
            TensorKind::Int => settings.int_dtype.into(),
            TensorKind::Bool => settings.bool_dtype.into(),
        }
    }

    fn declare(&mut self, shape: Shape, dtype: DType) {
        let (client, _) = self
            .client
            .as_ref()
            .expect("an input or a device names the remote device");
        let id = client.create_empty_handle();
        self.outputs.push(TensorIr::uninit(id, shape, dtype));
    }

    /// Declares an output of `kind` (the kind is the manifest's; every kind is one primitive
    /// on Remote).
    pub fn output(&mut self, _kind: TensorKind, shape: Shape, dtype: DType) {
        self.groups.push(Group::One);
        self.declare(shape, dtype);
    }

    /// Declares an `option` output: present when `shape` is.
    pub fn output_option(&mut self, _kind: TensorKind, shape: Option<Shape>, dtype: DType) {
        self.groups.push(Group::Option(shape.is_some()));
        if let Some(shape) = shape {
            self.declare(shape, dtype);
        }
    }

    /// Declares a `vec` output: one element per shape.
    pub fn output_vec(&mut self, _kind: TensorKind, shapes: Vec<Shape>, dtype: DType) {
        self.groups.push(Group::Vec(shapes.len()));
        for shape in shapes {
            self.declare(shape, dtype);
        }
    }

    /// Declares the gradient of one float input of a backward kernel, when `wanted`: with the
    /// shape and dtype of `like` (the input itself when the backward pass receives it, else the
    /// incoming gradient; `None`, an absent optional input, declares nothing).
    pub fn gradient(&mut self, wanted: bool, like: Option<&TensorSpec>) {
        let like = like.filter(|_| wanted);
        self.groups.push(Group::Option(like.is_some()));
        if let Some(like) = like {
            self.declare(like.shape.clone(), like.dtype);
        }
    }

    /// Sends the operation; returns its outputs, in the order they were declared.
    pub fn send(self) -> Outputs {
        let Self {
            remote,
            client,
            inputs,
            outputs,
            scalars,
            groups,
        } = self;
        let (client, _) = client.expect("an input or a device names the remote device");
        let description = CustomOpIr {
            id: remote.id(),
            inputs,
            outputs,
            scalars,
        };
        Outputs::new(client.register(description), groups)
    }
}

/// The spec an input with shape contract `rule` against `reference` has, when the rule fixes
/// its shape (`same_as`, `last_dim_of`, `leading_dims_of`): how a backward kernel's client
/// declares the gradient of an input it does not receive. Its dtype is `reference`'s.
pub fn implied(rule: super::ShapeRule, reference: &TensorSpec) -> Option<TensorSpec> {
    let dims = rule.implied(reference.shape.as_slice())?;
    Some(TensorSpec::new(Shape::from(dims.to_vec()), reference.dtype))
}

/// The outputs of a sent call, taken in the order they were declared.
pub type Outputs = super::outputs::Outputs<Primitive>;

// --- The server side ---

/// The kernel call of one op on the server's backend `B`: reads the inputs and arguments from
/// the operation, runs the kernel, registers the outputs.
pub type Handler<B> = fn(&mut Args<'_, B>) -> Result<(), String>;

/// What a server-side handler reads and writes: the operation's inputs and scalars, in the
/// order the client recorded them, and its outputs.
pub struct Args<'a, B: BackendIr> {
    handles: &'a mut HandleContainer<B::Handle>,
    op: &'a CustomOpIr,
    device: &'a DeviceOf<B>,
    input: usize,
    output: usize,
    scalars: Scalars<'a>,
}

impl<'a, B: BackendIr> Args<'a, B> {
    fn next_input(&mut self) -> Result<&'a TensorIr, String> {
        let op: &'a CustomOpIr = self.op;
        let ir = op.inputs.get(self.input).ok_or_else(|| {
            format!(
                "the operation has {} inputs, fewer than the op reads",
                op.inputs.len()
            )
        })?;
        self.input += 1;
        Ok(ir)
    }

    /// The next float input.
    ///
    /// # Errors
    /// When the operation has no more inputs.
    pub fn float(&mut self) -> Result<FloatTensor<B>, String> {
        let ir = self.next_input()?;
        Ok(self.handles.get_float_tensor::<B>(ir))
    }

    /// The next int input.
    ///
    /// # Errors
    /// When the operation has no more inputs.
    pub fn int(&mut self) -> Result<burn_backend::tensor::IntTensor<B>, String> {
        let ir = self.next_input()?;
        Ok(self.handles.get_int_tensor::<B>(ir))
    }

    /// The next bool input.
    ///
    /// # Errors
    /// When the operation has no more inputs.
    pub fn bool(&mut self) -> Result<burn_backend::tensor::BoolTensor<B>, String> {
        let ir = self.next_input()?;
        Ok(self.handles.get_bool_tensor::<B>(ir))
    }

    /// The next quantized input.
    ///
    /// # Errors
    /// When the operation has no more inputs.
    pub fn quantized(&mut self) -> Result<burn_backend::tensor::QuantizedTensor<B>, String> {
        let ir = self.next_input()?;
        Ok(self.handles.get_quantized_tensor::<B>(ir))
    }

    /// The server's device the operation runs on.
    pub fn device(&self) -> DeviceOf<B> {
        self.device.clone()
    }

    /// Whether the next `option` input is present (the client recorded it).
    ///
    /// # Errors
    /// When the scalars do not say.
    fn present(&mut self) -> Result<bool, String> {
        bool::decode(&mut self.scalars)
            .ok_or_else(|| "an `option` input's presence does not decode".to_owned())
    }

    /// The length of the next `vec` input (the client recorded it).
    ///
    /// # Errors
    /// When the scalars do not say.
    fn len(&mut self) -> Result<usize, String> {
        usize::decode(&mut self.scalars)
            .ok_or_else(|| "a `vec` input's length does not decode".to_owned())
    }

    /// The next plain argument, `name` for the error.
    ///
    /// # Errors
    /// When the scalars are not one.
    pub fn arg<T: Arg>(&mut self, name: &str) -> Result<T, String> {
        T::decode(&mut self.scalars).ok_or_else(|| format!("argument `{name}` does not decode"))
    }

    /// The next `option` float input.
    ///
    /// # Errors
    /// When its presence does not decode, or the operation has no more inputs.
    pub fn float_option(&mut self) -> Result<Option<FloatTensor<B>>, String> {
        if self.present()? {
            self.float().map(Some)
        } else {
            Ok(None)
        }
    }

    /// The next `vec` float input.
    ///
    /// # Errors
    /// When its length does not decode, or the operation has too few inputs.
    pub fn float_vec(&mut self) -> Result<Vec<FloatTensor<B>>, String> {
        let len = self.len()?;
        (0..len).map(|_| self.float()).collect()
    }

    /// The next `option` int input.
    ///
    /// # Errors
    /// When its presence does not decode, or the operation has no more inputs.
    pub fn int_option(&mut self) -> Result<Option<burn_backend::tensor::IntTensor<B>>, String> {
        if self.present()? {
            self.int().map(Some)
        } else {
            Ok(None)
        }
    }

    /// The next `vec` int input.
    ///
    /// # Errors
    /// When its length does not decode, or the operation has too few inputs.
    pub fn int_vec(&mut self) -> Result<Vec<burn_backend::tensor::IntTensor<B>>, String> {
        let len = self.len()?;
        (0..len).map(|_| self.int()).collect()
    }

    /// The next `option` bool input.
    ///
    /// # Errors
    /// When its presence does not decode, or the operation has no more inputs.
    pub fn bool_option(&mut self) -> Result<Option<burn_backend::tensor::BoolTensor<B>>, String> {
        if self.present()? {
            self.bool().map(Some)
        } else {
            Ok(None)
        }
    }

    /// The next `vec` bool input.
    ///
    /// # Errors
    /// When its length does not decode, or the operation has too few inputs.
    pub fn bool_vec(&mut self) -> Result<Vec<burn_backend::tensor::BoolTensor<B>>, String> {
        let len = self.len()?;
        (0..len).map(|_| self.bool()).collect()
    }

    /// The next `option` quantized input.
    ///
    /// # Errors
    /// When its presence does not decode, or the operation has no more inputs.
    pub fn quantized_option(
        &mut self,
    ) -> Result<Option<burn_backend::tensor::QuantizedTensor<B>>, String> {
        if self.present()? {
            self.quantized().map(Some)
        } else {
            Ok(None)
        }
    }

    /// The next `vec` quantized input.
    ///
    /// # Errors
    /// When its length does not decode, or the operation has too few inputs.
    pub fn quantized_vec(
        &mut self,
    ) -> Result<Vec<burn_backend::tensor::QuantizedTensor<B>>, String> {
        let len = self.len()?;
        (0..len).map(|_| self.quantized()).collect()
    }

    /// The next declared output, for a tensor of shape `shape` (which must be the declared one).
    fn next_output(&mut self, shape: &Shape) -> Result<burn_ir::TensorId, String> {
        let op: &'a CustomOpIr = self.op;
        let ir = op.outputs.get(self.output).ok_or_else(|| {
            format!(
                "the kernel returned more outputs than the {} declared",
                op.outputs.len()
            )
        })?;
        if ir.shape != *shape {
            return Err(format!(
                "output {} has shape {:?}, but the client declared {:?} from the op's `shape`",
                self.output,
                shape.as_slice(),
                ir.shape.as_slice()
            ));
        }
        self.output += 1;
        Ok(ir.id)
    }

    /// The shape the client declared for the next output.
    fn declared_shape(&self) -> Result<Shape, String> {
        self.op
            .outputs
            .get(self.output)
            .map(|ir| ir.shape.clone())
            .ok_or_else(|| {
                format!(
                    "the kernel returned more outputs than the {} declared",
                    self.op.outputs.len()
                )
            })
    }

    /// Registers the gradient of one float input (a backward kernel's result). With `summed`,
    /// the client declared it with the input's shape, and a gradient of the broadcast shape is
    /// summed back to it here, as the client's backward pass would; otherwise it must have the
    /// declared shape (the incoming gradient's).
    ///
    /// # Errors
    /// When the client declared fewer outputs, or the gradient does not fit its shape.
    pub fn gradient_out(&mut self, gradient: FloatTensor<B>, summed: bool) -> Result<(), String> {
        let declared = self.declared_shape()?;
        let gradient = if summed {
            summed_to::<B>(gradient, &declared)?
        } else {
            gradient
        };
        self.float_out(gradient)
    }

    /// Registers the wanted ones of a backward kernel's `N` gradients ([`Self::gradient_out`]
    /// each, `summed[i]` for input `i`).
    ///
    /// # Errors
    /// When the kernel gave no gradient for a wanted input, or [`Self::gradient_out`] fails.
    pub fn gradients_out<const N: usize>(
        &mut self,
        gradients: [Option<FloatTensor<B>>; N],
        wanted: [bool; N],
        summed: [bool; N],
    ) -> Result<(), String> {
        for (i, gradient) in gradients.into_iter().enumerate() {
            if !wanted[i] {
                continue;
            }
            let gradient = gradient.ok_or_else(|| {
                format!("the backward kernel gave no gradient for float input {i}, which the client asked for")
            })?;
            self.gradient_out(gradient, summed[i])?;
        }
        Ok(())
    }

    /// Registers the next float output.
    ///
    /// # Errors
    /// When the client declared fewer outputs.
    pub fn float_out(&mut self, tensor: FloatTensor<B>) -> Result<(), String> {
        let id = self.next_output(&burn_backend::TensorMetadata::shape(&tensor))?;
        self.handles.register_float_tensor::<B>(&id, tensor);
        Ok(())
    }

    /// Registers the next int output.
    ///
    /// # Errors
    /// When the client declared fewer outputs.
    pub fn int_out(&mut self, tensor: burn_backend::tensor::IntTensor<B>) -> Result<(), String> {
        let id = self.next_output(&burn_backend::TensorMetadata::shape(&tensor))?;
        self.handles.register_int_tensor::<B>(&id, tensor);
        Ok(())
    }

    /// Registers the next bool output.
    ///
    /// # Errors
    /// When the client declared fewer outputs.
    pub fn bool_out(&mut self, tensor: burn_backend::tensor::BoolTensor<B>) -> Result<(), String> {
        let id = self.next_output(&burn_backend::TensorMetadata::shape(&tensor))?;
        self.handles.register_bool_tensor::<B>(&id, tensor);
        Ok(())
    }

    /// Registers the next quantized output.
    ///
    /// # Errors
    /// When the client declared fewer outputs.
    pub fn quantized_out(
        &mut self,
        tensor: burn_backend::tensor::QuantizedTensor<B>,
    ) -> Result<(), String> {
        let id = self.next_output(&burn_backend::TensorMetadata::shape(&tensor))?;
        self.handles.register_quantized_tensor::<B>(&id, tensor);
        Ok(())
    }

    /// Checks that every input, scalar and output was used.
    fn finish(&self) -> Result<(), String> {
        if self.input != self.op.inputs.len() {
            return Err(format!(
                "the operation has {} inputs, the op read {}",
                self.op.inputs.len(),
                self.input
            ));
        }
        if !self.scalars.is_empty() {
            return Err("the operation has arguments the op does not read".to_owned());
        }
        if self.output != self.op.outputs.len() {
            return Err(format!(
                "the client declared {} outputs, the kernel returned {}",
                self.op.outputs.len(),
                self.output
            ));
        }
        Ok(())
    }
}

/// `gradient` summed over the dimensions where `shape` has 1 and it does not (those its input
/// was broadcast along), as the client's backward pass sums a gradient back to its input.
///
/// # Errors
/// When the ranks differ or a dimension is neither equal nor broadcast.
fn summed_to<B: BackendIr>(
    gradient: FloatTensor<B>,
    shape: &Shape,
) -> Result<FloatTensor<B>, String> {
    let have = burn_backend::TensorMetadata::shape(&gradient);
    let fits = have.num_dims() == shape.num_dims()
        && (0..have.num_dims()).all(|d| have[d] == shape[d] || shape[d] == 1);
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
    Ok(gradient)
}

/// Registers a crate's ops on a `RemoteServer` for backend `B`, then its handshake.
pub struct Serve<B: BackendIr> {
    server: RemoteServer,
    module: &'static str,
    served: Vec<(u64, u64)>,
    _backend: core::marker::PhantomData<fn() -> B>,
}

impl<B: BackendIr + 'static> Serve<B> {
    /// Starts registering, on `server`, the ops of the manifest whose dispatch code `module`
    /// (its `module_path!()`) includes.
    pub fn new(server: RemoteServer, module: &'static str) -> Self {
        Self {
            server,
            module,
            served: Vec::new(),
            _backend: core::marker::PhantomData,
        }
    }

    /// Registers `remote`'s op, run by `handler`.
    #[must_use]
    pub fn op(mut self, remote: &'static RemoteOp, handler: Handler<B>) -> Self {
        self.served.push((hash(remote.op), remote.hash));
        self.server =
            self.server
                .with_custom_op::<B, _>(&remote.id(), move |handles, op, device| {
                    run(remote, handles, op, device, handler);
                });
        self
    }

    /// Registers the handshake and returns the server.
    #[must_use]
    pub fn finish(self) -> RemoteServer {
        let served = self.served;
        self.server.with_custom_op::<B, _>(
            &handshake_id(self.module),
            move |handles, op, device| {
                let answer = match op.scalars.as_slice() {
                    [ScalarIr::UInt(name), ScalarIr::UInt(declaration)] => {
                        if served.iter().any(|(n, d)| n == name && d == declaration) {
                            ANSWER_SERVED
                        } else if served.iter().any(|(n, _)| n == name) {
                            ANSWER_OTHER_VERSION
                        } else {
                            ANSWER_MISSING
                        }
                    }
                    _ => f32::NAN,
                };
                let Some(out) = op.outputs.first() else {
                    return;
                };
                let data = TensorData::new(vec![answer], [1]);
                let tensor = B::float_from_data(data.convert_dtype(out.dtype), device);
                handles.register_float_tensor::<B>(&out.id, tensor);
            },
        )
    }
}

/// Runs one op's handler; a failure (an argument that does not decode, outputs that do not
/// match, a kernel that panics) errors the op's outputs with its text instead of taking the
/// server's session down, so the client's read of them returns it.
fn run<B: BackendIr>(
    remote: &RemoteOp,
    handles: &mut HandleContainer<B::Handle>,
    op: &CustomOpIr,
    device: &DeviceOf<B>,
    handler: Handler<B>,
) {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut args = Args {
            handles: &mut *handles,
            op,
            device,
            input: 0,
            output: 0,
            scalars: Scalars::new(&op.scalars),
        };
        handler(&mut args).and_then(|()| args.finish())
    }));
    let reason = match outcome {
        Ok(Ok(())) => return,
        Ok(Err(reason)) => reason,
        Err(payload) => match payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
        {
            Some(message) => format!("the kernel panicked: {message}"),
            None => "the kernel panicked".to_owned(),
        },
    };
    let error = TensorError::new(ExecutionError::generic(format!(
        "op `{}` of crate `{}` failed on the {} server: {reason}. Fix: run the op on local Flex with the same inputs to see its own error, and check that the server and the client were built from the same version of crate `{}`. See {}",
        remote.op,
        remote.krate,
        BackendId::Remote,
        remote.krate,
        burn_route_core::errors::link("remote-op-failed")
    )));
    for out in &op.outputs {
        if !handles.has_handle(&out.id) {
            handles.set_error(out.id, error.clone());
        }
    }
}

/// The backend of `devices` (all of one backend, as a `RemoteServer` requires): Flex, Cube, or
/// `None` for an empty list or one this build cannot name.
pub fn backend_of(devices: &[super::Device]) -> Option<BackendId> {
    let device = devices.first()?;
    let (backend, _) = super::device::describe_device(device.as_dispatch());
    Some(backend)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: Arg + PartialEq + core::fmt::Debug>(value: T) -> Vec<ScalarIr> {
        let mut scalars = Vec::new();
        value.encode(&mut scalars);
        let mut reader = Scalars::new(&scalars);
        assert_eq!(T::decode(&mut reader), Some(value), "{scalars:?}");
        assert!(reader.is_empty(), "every scalar read: {scalars:?}");
        scalars
    }

    #[test]
    fn plain_arguments_travel_exactly() {
        for x in [
            0.1f64,
            -0.0,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            f64::INFINITY,
        ] {
            let scalars = round_trip(x);
            assert!(matches!(scalars[..], [ScalarIr::Float(y)] if y.to_bits() == x.to_bits()));
        }
        round_trip(String::from("naïve ✓"));
        round_trip(vec![String::new(), String::from("a")]);
        let nan = {
            let mut scalars = Vec::new();
            f64::NAN.encode(&mut scalars);
            f64::decode(&mut Scalars::new(&scalars)).expect("decodes")
        };
        assert!(nan.is_nan());
        round_trip(0.1f32);
        round_trip(f32::MIN_POSITIVE / 4.0);
        round_trip(u64::MAX);
        round_trip(i64::MIN);
        round_trip(usize::MAX);
        round_trip(-1isize);
        round_trip(u8::MAX);
        round_trip(i8::MIN);
        round_trip(true);
        round_trip('é');
        // An `Option` keeps its presence apart from its value: `Some(0)` is not `None`.
        assert_eq!(round_trip(None::<u32>), vec![ScalarIr::Bool(false)]);
        assert_eq!(
            round_trip(Some(0u32)),
            vec![ScalarIr::Bool(true), ScalarIr::UInt(0)]
        );
        round_trip(vec![3usize, 0, 7]);
        round_trip(Vec::<f32>::new());
        round_trip((2i32, -0.5f32, vec![Some(1u64), None], (false, 'x')));
    }

    #[test]
    fn scalars_that_are_not_the_type_do_not_decode() {
        let decode_u8 = |scalars: &[ScalarIr]| u8::decode(&mut Scalars::new(scalars));
        assert_eq!(decode_u8(&[ScalarIr::UInt(256)]), None, "out of range");
        assert_eq!(decode_u8(&[ScalarIr::Int(1)]), None, "another variant");
        assert_eq!(decode_u8(&[]), None, "nothing left");
        // A length larger than what is left is refused before anything is allocated.
        let long = [ScalarIr::UInt(u64::MAX)];
        assert_eq!(Vec::<u8>::decode(&mut Scalars::new(&long)), None);
        assert_eq!(
            char::decode(&mut Scalars::new(&[ScalarIr::UInt(0xD800)])),
            None,
            "a surrogate is no char"
        );
    }

    #[test]
    fn hashes_are_fnv1a() {
        // The generator hashes each op's declaration with the same function (core's `hash`);
        // these are FNV-1a's published test values.
        assert_eq!(hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(hash("foobar"), 0x8594_4171_f739_67e8);
    }
}

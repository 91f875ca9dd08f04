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

use std::sync::Mutex;

use burn_backend::ops::FloatTensorOps;
use burn_backend::tensor::{Device as DeviceOf, FloatTensor};
use burn_backend::{DType, ExecutionError, Shape, TensorData};
use burn_dispatch::backends::Remote;
pub use burn_ir::BackendIr;
use burn_ir::{CustomOpIr, HandleContainer, ScalarIr, TensorError, TensorId, TensorIr};
use burn_tensor::remote::CustomOpClient;
pub use burn_tensor::server::RemoteServer;

use super::op::OpInfo;
pub use super::op::RemoteOp;
use super::record::{Recorder, Target};
use super::{BackendId, RouteError, TensorKind};

/// A device of the Remote backend.
pub type RemoteDevice = DeviceOf<Remote>;

/// What every tensor kind is on `Remote`: one primitive type (burn-router's, or burn-fusion's
/// when burn-remote's `fusion` is on).
type Primitive = FloatTensor<Remote>;

mod arg;
mod server;

pub use arg::{Arg, Scalars};
pub use server::{Args, Handler, Serve, backend_of};

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

/// What a [`Call`] records for: a Remote device, whose server runs the op's operation.
pub struct OnRemote;

impl Target for OnRemote {
    type Tensor = Primitive;
    type Client = (CustomOpClient, RemoteDevice);
    /// The op's operation: its id and the crate that serves it.
    type Facts = &'static RemoteOp;

    fn client_of(tensor: &Primitive) -> Self::Client {
        let device = burn_backend::TensorMetadata::device(tensor);
        (CustomOpClient::new(&device), device)
    }

    fn into_ir(tensor: Primitive) -> TensorIr {
        tensor.into_ir()
    }

    fn empty_handle((client, _): &Self::Client) -> TensorId {
        client.create_empty_handle()
    }

    fn default_dtype((_, device): &Self::Client, kind: TensorKind) -> DType {
        super::record::device_default::<Remote>(device, kind)
    }
}

/// One call of an op on Remote, built input by input and output by output: the shared
/// [`Recorder`], started with [`Call::new`] and sent as one custom operation by [`Call::send`].
///
/// ```ignore
/// // fn my_op(x: FloatTensor<Self>, alpha: f32) -> FloatTensor<Self>, on Remote:
/// let mut call = Call::new(&MY_OP);
/// let x = call.input(x).spec();
/// call.arg(&alpha);
/// call.output(TensorKind::Float, "output", x.shape.clone(), x.dtype);
/// call.send().one()
/// ```
pub type Call = Recorder<OnRemote>;

impl Recorder<OnRemote> {
    /// A call of `remote`'s op; its first tensor input names the device.
    pub fn new(remote: &'static RemoteOp) -> Self {
        Self::start(remote.op, remote, None)
    }

    /// A call of an op without tensor inputs, on `device`.
    pub fn on_device(remote: &'static RemoteOp, device: &RemoteDevice) -> Self {
        Self::start(
            remote.op,
            remote,
            Some((CustomOpClient::new(device), device.clone())),
        )
    }

    /// Adds a plain argument, encoded exactly.
    pub fn arg<T: Arg>(&mut self, value: &T) {
        value.encode(&mut self.scalars);
    }

    /// Sends the operation; returns its outputs, in the order they were declared.
    ///
    /// # Panics
    /// When nothing named the device: an op without tensor inputs needs [`Call::on_device`].
    pub fn send(self) -> Outputs {
        let Self {
            facts: remote,
            client,
            inputs,
            outputs,
            scalars,
            groups,
            ..
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

/// The outputs of a sent call, taken in the order they were declared.
pub type Outputs = super::outputs::Outputs<Primitive>;

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

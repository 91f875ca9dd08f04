//! The server side: the generated `serve_remote_ops` registers one [`Handler`] per op on a
//! `RemoteServer` ([`Serve`]), and each reads its operation's inputs and arguments, runs the
//! kernel and registers the outputs ([`Args`]).

use super::*;

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
            crate::rt::record::summed_to::<B>(gradient, &declared)?
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
pub fn backend_of(devices: &[super::super::Device]) -> Option<BackendId> {
    let device = devices.first()?;
    let (backend, _) = super::super::device::describe_device(device.as_dispatch());
    Some(backend)
}

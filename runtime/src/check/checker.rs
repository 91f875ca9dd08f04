//! The checks themselves ([`Checker`]): values on Flex and on every other backend.

use super::*;

/// The drawn inputs of one op, and the calls of its closure.
#[derive(Clone)]
pub(super) struct Checker<'a> {
    pub(super) op: &'a Op,
    /// The seed of the inputs; the weights of the gradient check's loss derive from it.
    #[cfg_attr(not(feature = "autodiff"), allow(dead_code))]
    pub(super) seed: u64,
    /// Per input, per element.
    pub(super) inputs: Vec<Vec<Host>>,
    /// The device values, the policy and gradients are checked on (Flex when the op is routed
    /// to it).
    pub(super) reference: Device,
    /// The dtype of the float inputs (`None`: the device's default).
    pub(super) float_dtype: Option<FloatDType>,
}

impl<'a> Checker<'a> {
    pub(super) fn new(op: &'a Op, reference: Device) -> Self {
        let seed = seed_of(op.name);
        let mut rng = Rng::new(seed);
        let inputs = op
            .inputs
            .iter()
            .map(|input| {
                input
                    .shapes
                    .iter()
                    .map(|shape| draw(input, shape, &mut rng))
                    .collect()
            })
            .collect();
        Self {
            op,
            seed,
            inputs,
            reference,
            float_dtype: None,
        }
    }

    /// The same checker, with its float inputs in `dtype` (`None`: the device's default).
    pub(super) fn in_dtype(self, dtype: Option<FloatDType>) -> Self {
        Self {
            float_dtype: dtype,
            ..self
        }
    }

    /// The declared dtypes against the default one (within [`dtype_tolerance`]), and a call in
    /// an undeclared dtype refused with [`RouteError::UnsupportedDtype`] when the op declares
    /// no fallback. (A fallback's values are [`compare_with`]'s to check.)
    #[track_caller]
    pub(super) fn dtypes<F>(&self, baseline: &[HostLeaf], f: &mut F)
    where
        F: FnMut(&mut Args) -> Result<Vec<Value>, RouteError>,
    {
        let op = self.op;
        for dtype in op.checked_dtypes() {
            if Some(dtype) == self.float_dtype {
                continue;
            }
            let check = format!("values in {} on Flex", dtype_label(dtype));
            let checker = self.clone().in_dtype(Some(dtype));
            let actual = checker.values(&check, &self.reference, None, f);
            let tol = op.value_tolerance.max(dtype_tolerance(dtype));
            if let Err(mismatch) = compare_leaves(&actual, baseline, tol) {
                let fix = mismatch.fix(
                    &format!(
                        "the op's kernel in {} disagrees with its values in the default dtype: \
                         fix the kernel's {} path, or remove \"{}\" from `dtypes`",
                        dtype_label(dtype),
                        dtype_label(dtype),
                        dtype_label(dtype)
                    ),
                    "the value tolerance (`Op::value_tolerance`)",
                    tol,
                );
                fail(op.name, &check, &mismatch.detail, &fix)
            }
        }
        if op.other_dtypes != OtherDtypes::Error {
            return;
        }
        let Some(dtype) = op.undeclared_dtype() else {
            return;
        };
        let check = format!("a call in {} on Flex", dtype_label(dtype));
        let mut args =
            self.clone()
                .in_dtype(Some(dtype))
                .args(&self.inputs, &self.reference, false, None);
        match self.call(&check, f, &mut args) {
            Err(RouteError::UnsupportedDtype { .. }) => {}
            Err(other) => fail(
                op.name,
                &check,
                &format!("the op returned another error than the refused dtype's: {other}"),
                "route the call through the op's generated `try_` function, which refuses an \
                 undeclared dtype before anything else",
            ),
            Ok(_) => fail(
                op.name,
                &check,
                &format!(
                    "the op ran with its float inputs in {}, which its `dtypes` do not list, \
                     and it declares no fallback (`other_dtypes = \"error\"`)",
                    dtype_label(dtype)
                ),
                "call the op through its generated `try_` function, or declare the op check's \
                 dtypes as the manifest does",
            ),
        }
    }

    /// How messages name the reference device.
    pub(super) fn reference_name(&self) -> String {
        if self.reference == Device::flex() {
            "Flex".to_owned()
        } else {
            format!("{:?}", self.reference)
        }
    }

    /// `None` (every input present), then the index of each optional input.
    pub(super) fn variants(&self) -> Vec<Option<usize>> {
        let optional = self.op.inputs.iter().enumerate();
        let optional = optional.filter(|(_, i)| i.container == Container::Option);
        std::iter::once(None)
            .chain(optional.map(|(index, _)| Some(index)))
            .collect()
    }

    pub(super) fn variant_check(&self, check: &str, absent: Option<usize>) -> String {
        match absent {
            None => check.to_owned(),
            Some(i) => format!("{check} with `{}` absent", self.op.inputs[i].name),
        }
    }

    /// The closure's arguments on `device`, from `inputs` (the drawn ones, or a perturbed copy).
    pub(super) fn args(
        &self,
        inputs: &[Vec<Host>],
        device: &Device,
        track: bool,
        absent: Option<usize>,
    ) -> Args {
        let slots = self
            .op
            .inputs
            .iter()
            .zip(inputs)
            .enumerate()
            .map(|(index, (input, hosts))| {
                let tensors = hosts
                    .iter()
                    .map(|host| {
                        let tensor = upload(host, device, self.float_dtype);
                        #[cfg(feature = "autodiff")]
                        if track && input.kind == TensorKind::Float {
                            return Dispatch::float_set_require_grad(tensor, true);
                        }
                        tensor
                    })
                    .collect();
                Slot {
                    name: input.name,
                    kind: input.kind,
                    container: input.container,
                    constructor: input.constructor(),
                    tensors,
                    present: absent != Some(index),
                }
            })
            .collect();
        #[cfg(not(feature = "autodiff"))]
        let _ = track;
        Args {
            op: self.op.name,
            device: device.clone(),
            slots,
        }
    }

    /// Calls the closure, turning a panic inside it into a check failure.
    #[track_caller]
    pub(super) fn call<F>(
        &self,
        check: &str,
        f: &mut F,
        args: &mut Args,
    ) -> Result<Vec<Value>, RouteError>
    where
        F: FnMut(&mut Args) -> Result<Vec<Value>, RouteError>,
    {
        match catch_unwind(AssertUnwindSafe(|| f(args))) {
            Ok(result) => result,
            Err(payload) => {
                let text = panic_text(payload.as_ref());
                if text.starts_with("op check failed:") {
                    resume_unwind(payload);
                }
                fail(
                    self.op.name,
                    check,
                    &format!("the check closure panicked: {text}"),
                    "fix what panicked (the op's kernel, or the closure's use of `Args`), or, if the \
                     op rightly refuses these inputs, change their declared shapes or ranges",
                )
            }
        }
    }

    /// Calls the closure, which must succeed.
    #[track_caller]
    pub(super) fn call_ok<F>(&self, check: &str, f: &mut F, args: &mut Args) -> Vec<Value>
    where
        F: FnMut(&mut Args) -> Result<Vec<Value>, RouteError>,
    {
        self.call(check, f, args).unwrap_or_else(|err| {
            let fix = if matches!(err, RouteError::TrackedInput { .. }) {
                format!(
                    "the op refuses tracked inputs, as a `reject` op does, but the check declares \
                     it `Policy::{:?}`: declare `Policy::Reject` if the manifest does, or change \
                     the op's `autodiff` policy in the manifest",
                    self.op.policy
                )
            } else {
                "follow the error's own fix; if the check's inputs are wrong for the op, change \
                 their declared shapes or ranges"
                    .to_owned()
            };
            fail(
                self.op.name,
                check,
                &format!("the op returned an error: {err}"),
                &fix,
            )
        })
    }

    /// Reads the leaves back, failing the check on a leaf of the wrong kind.
    #[track_caller]
    pub(super) fn read_all(&self, check: &str, leaves: Vec<Leaf>) -> Vec<HostLeaf> {
        leaves
            .into_iter()
            .map(|leaf| {
                read_leaf(leaf).unwrap_or_else(|detail| {
                    fail(
                        self.op.name,
                        check,
                        &detail,
                        "return each output with the `Value` constructor of its kind",
                    )
                })
            })
            .collect()
    }

    /// The outputs of one untracked call on `device`, read back.
    #[track_caller]
    pub(super) fn values<F>(
        &self,
        check: &str,
        device: &Device,
        absent: Option<usize>,
        f: &mut F,
    ) -> Vec<HostLeaf>
    where
        F: FnMut(&mut Args) -> Result<Vec<Value>, RouteError>,
    {
        let mut args = self.args(&self.inputs, device, false, absent);
        // Read before the call, which may take the tensors.
        let inputs: Vec<(&str, Option<DType>)> = args
            .slots
            .iter()
            .map(|s| {
                (
                    s.name,
                    s.tensors.first().filter(|_| s.present).map(|t| t.dtype()),
                )
            })
            .collect();
        let values = self.call_ok(check, f, &mut args);
        let leaves = self.read_all(check, flatten(values));
        self.check_output_dtypes(check, device, &inputs, &leaves);
        leaves
    }

    /// Each [`Op::output_dtype`] against the leaf the call returned: the named input's dtype in
    /// the call (not checked when it is absent), or the device's default of the leaf's kind.
    #[track_caller]
    fn check_output_dtypes(
        &self,
        check: &str,
        device: &Device,
        inputs: &[(&str, Option<DType>)],
        leaves: &[HostLeaf],
    ) {
        let op = self.op;
        let settings = get_or_init_device_settings::<Dispatch>(device.as_dispatch());
        for (leaf, source) in &op.output_dtypes {
            let Some(found) = leaves.get(*leaf) else {
                fail(
                    op.name,
                    check,
                    &format!(
                        "`output_dtype({leaf}, ..)` names output leaf {leaf}, but the op returned \
                         {} leaves",
                        leaves.len()
                    ),
                    "number the leaves from 0 over the returned values flattened in order (one \
                     per tensor or optional tensor, one per `Vec` element)",
                );
            };
            let Some(got) = found.dtype else { continue };
            let (expected, from) = match source {
                OutputDtype::Input(name) => match inputs.iter().find(|(n, _)| n == name) {
                    Some((_, Some(dtype))) => (*dtype, format!("input `{name}`'s")),
                    Some((_, None)) => continue,
                    None => fail(
                        op.name,
                        check,
                        &format!(
                            "`output_dtype({leaf}, OutputDtype::Input({name:?}))` names no \
                                 tensor input of the check"
                        ),
                        "name one of the op's tensor inputs",
                    ),
                },
                OutputDtype::Default => (
                    match found.kind {
                        TensorKind::Float | TensorKind::Quantized => settings.float_dtype.into(),
                        TensorKind::Int => settings.int_dtype.into(),
                        TensorKind::Bool => settings.bool_dtype.into(),
                    },
                    "the device's default".to_owned(),
                ),
            };
            if got != expected {
                fail(
                    op.name,
                    check,
                    &format!(
                        "output leaf {leaf} ({}) has dtype {}, but the manifest declares \
                         {from} dtype, {}",
                        found.name,
                        crate::rt::dtype_name(got),
                        crate::rt::dtype_name(expected)
                    ),
                    "fix the op's dtype (its kernel, or its manifest `dtype`), or the declared \
                     dtype if it is the one that is wrong",
                );
            }
        }
    }

    #[track_caller]
    pub(super) fn check_output_shapes(&self, leaves: &[HostLeaf]) {
        let op = self.op;
        for (leaf, shape) in &op.output_shapes {
            let Some(found) = leaves.get(*leaf) else {
                fail(
                    op.name,
                    "output shapes",
                    &format!(
                        "`output_shape({leaf}, ..)` names output leaf {leaf}, but the op returned \
                         {} leaves",
                        leaves.len()
                    ),
                    "number the leaves from 0 over the returned values flattened in order (one \
                     per tensor or optional tensor, one per `Vec` element)",
                );
            };
            let got = found.value.as_ref().map(|h| &h.shape);
            if got != Some(shape) {
                let got = got.map_or_else(|| "absent (None)".to_owned(), |s| format!("{s:?}"));
                fail(
                    op.name,
                    "output shapes",
                    &format!(
                        "output leaf {leaf} ({}) has shape {got}, but `output_shape` declares \
                         {shape:?}",
                        found.name
                    ),
                    "fix the op's shape computation (its kernel or its manifest `shape`), or the \
                     declared shape if it is the one that is wrong",
                );
            }
        }
    }
}

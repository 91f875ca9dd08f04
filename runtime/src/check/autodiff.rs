//! The policy checks, on `Device::flex().autodiff()`.

use burn_backend::{AutodiffBackend, Scalar};

use super::*;

/// The float leaves' fixed random weights, from the leaves of the plain Flex run: in
/// `±[0.5, 1.5)`, so every output element counts.
fn weights(seed: u64, leaves: &[HostLeaf]) -> Vec<Option<Vec<f32>>> {
    let mut rng = Rng::new(seed ^ 0x5DEE_CE66_D1CE_4E5B);
    leaves
        .iter()
        .map(|leaf| match &leaf.value {
            Some(Host {
                data: Data::Float(v),
                ..
            }) => Some(
                v.iter()
                    .map(|_| {
                        #[allow(clippy::cast_possible_truncation)]
                        let m = (0.5 + rng.unit()) as f32;
                        if rng.next_u64() >> 63 == 1 { m } else { -m }
                    })
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

/// Whether every element of a gradient is zero.
fn is_zero(grad: DispatchTensor) -> Result<bool, String> {
    match read(grad, TensorKind::Float)?.data {
        Data::Float(v) => Ok(v.iter().all(|&g| g == 0.0)),
        _ => unreachable!("a float gradient"),
    }
}

impl Checker<'_> {
    pub(super) fn policy<F>(&self, expected: &[HostLeaf], f: &mut F)
    where
        F: FnMut(&mut Args) -> Result<Vec<Value>, RouteError>,
    {
        if !self.op.inputs.iter().any(|i| i.kind == TensorKind::Float) {
            return; // Nothing to track.
        }
        match self.op.policy {
            Policy::Reject => self.reject(expected, f),
            Policy::Detach => self.detach(expected, f),
            Policy::Differentiable => self.differentiable(expected, f),
        }
    }

    /// The outputs of a call with the inputs on the autodiff device, tracked or not, and
    /// their values checked against the plain Flex run.
    #[track_caller]
    fn tracked_call<F>(
        &self,
        check: &str,
        track: bool,
        expected: &[HostLeaf],
        f: &mut F,
    ) -> (Args, Vec<Leaf>)
    where
        F: FnMut(&mut Args) -> Result<Vec<Value>, RouteError>,
    {
        let device = self.reference.clone().autodiff();
        let mut args = self.args(&self.inputs, &device, track, None);
        let leaves = flatten(self.call_ok(check, f, &mut args));
        let copies = leaves
            .iter()
            .map(|l| Leaf {
                name: l.name.clone(),
                kind: l.kind,
                tensor: l.tensor.clone(),
                variant: l.variant,
            })
            .collect();
        let actual = self.read_all(check, copies);
        if let Err(mismatch) = compare_leaves(&actual, expected, self.op.value_tolerance) {
            let fix = mismatch.fix(
                "the op's autodiff route (its `Autodiff<B, C>` kernel, or the concrete kernel \
                 it runs) must compute what the plain route computes: fix whichever is wrong",
                "the value tolerance (`Op::value_tolerance`)",
                self.op.value_tolerance,
            );
            let detail = format!(
                "the values differ from the untracked Flex run: {}",
                mismatch.detail
            );
            fail(self.op.name, check, &detail, &fix);
        }
        (args, leaves)
    }

    fn reject<F>(&self, expected: &[HostLeaf], f: &mut F)
    where
        F: FnMut(&mut Args) -> Result<Vec<Value>, RouteError>,
    {
        let op = self.op;
        self.tracked_call(
            "policy reject (untracked inputs on Flex autodiff)",
            false,
            expected,
            f,
        );
        let check = "policy reject (tracked inputs on Flex autodiff)";
        let device = self.reference.clone().autodiff();
        let mut args = self.args(&self.inputs, &device, true, None);
        let floats: Vec<&str> = op
            .inputs
            .iter()
            .filter(|i| i.kind == TensorKind::Float)
            .map(|i| i.name)
            .collect();
        match self.call(check, f, &mut args) {
            Err(RouteError::TrackedInput {
                op: name, input, ..
            }) if name == op.name && floats.contains(&input.name) => {}
            Err(err) => fail(
                op.name,
                check,
                &format!(
                    "expected `RouteError::TrackedInput` naming op `{}` and one of its float \
                     inputs {floats:?}, got: {err}",
                    op.name
                ),
                "a `reject` op must refuse a tracked float input with that error: check that \
                 the closure calls this op's `try_` function with the inputs in order",
            ),
            Ok(_) => fail(
                op.name,
                check,
                "the op ran with tracked float inputs and returned `Ok`, but it is declared \
                 `reject`",
                "declare the op's policy as generated code routes it (`Policy::Detach` or \
                 `Policy::Differentiable` if ops.toml says so), or make the op refuse tracked \
                 inputs",
            ),
        }
    }

    fn detach<F>(&self, expected: &[HostLeaf], f: &mut F)
    where
        F: FnMut(&mut Args) -> Result<Vec<Value>, RouteError>,
    {
        let op = self.op;
        let check = "policy detach (tracked inputs on Flex autodiff)";
        let (args, leaves) = self.tracked_call(check, true, expected, f);
        for leaf in &leaves {
            if let (TensorKind::Float, Some(t)) = (leaf.kind, &leaf.tensor)
                && Dispatch::is_tracked(t)
            {
                fail(
                    op.name,
                    check,
                    &format!("{} is tracked, but a `detach` op must detach it", leaf.name),
                    "run the op's concrete kernel on the inputs' inner tensors (as the \
                     generated `detach` route does), or declare it `Policy::Differentiable`",
                );
            }
        }
        // A backward pass from a loss of every output and a zero term of the first tracked
        // input (so there is a graph to run) must give no input a gradient.
        let device = self.reference.clone().autodiff();
        let first = args.slots.iter().find(|s| s.kind == TensorKind::Float);
        let Some(first) = first.and_then(|s| s.tensors.first()) else {
            return;
        };
        let anchor = Dispatch::float_sum(Dispatch::float_mul_scalar(
            first.clone(),
            Scalar::from(0.0f32),
        ));
        let weights = weights(self.seed, expected);
        let loss = weighted_loss(leaves, &weights, &device)
            .map_or(anchor.clone(), |loss| Dispatch::float_add(anchor, loss));
        let grads = Dispatch::backward(loss);
        for (input, slot) in op.inputs.iter().zip(&args.slots) {
            for (j, tensor) in slot.tensors.iter().enumerate() {
                if slot.kind != TensorKind::Float {
                    continue;
                }
                let Some(grad) = Dispatch::grad(tensor, &grads) else {
                    continue;
                };
                match is_zero(grad) {
                    Ok(true) => {}
                    Ok(false) => fail(
                        op.name,
                        check,
                        &format!(
                            "input `{}` got a nonzero gradient through the op, which is \
                             declared `detach`",
                            input.element_name(j)
                        ),
                        "detach the op's outputs from the inputs' graph, or declare it \
                         `Policy::Differentiable`",
                    ),
                    Err(detail) => fail(op.name, check, &detail, "read the gradient"),
                }
            }
        }
    }

    fn differentiable<F>(&self, expected: &[HostLeaf], f: &mut F)
    where
        F: FnMut(&mut Args) -> Result<Vec<Value>, RouteError>,
    {
        let op = self.op;
        let check = "policy differentiable (tracked inputs on Flex autodiff)";
        let (args, leaves) = self.tracked_call(check, true, expected, f);
        if !op.gradients {
            return;
        }
        let check = "gradient check (autodiff against central finite differences)";
        let device = self.reference.clone().autodiff();
        if !leaves.iter().any(|l| {
            l.kind == TensorKind::Float && l.tensor.as_ref().is_some_and(Dispatch::is_tracked)
        }) {
            fail(
                op.name,
                check,
                "no float output is tracked, though every float input is",
                "a `differentiable` op must record its outputs in the autodiff graph (route \
                 tracked inputs to its `Autodiff<B, C>` kernel); if it has no float output to \
                 differentiate, turn the check off (`gradients = false` in the op's `[op.check]`; \
                 `Op::gradients(false)` by hand)",
            );
        }
        let weights = weights(self.seed, expected);
        let loss =
            weighted_loss(leaves, &weights, &device).expect("a tracked float output makes a loss");
        let grads = Dispatch::backward(loss);

        for (index, (input, slot)) in op.inputs.iter().zip(&args.slots).enumerate() {
            if input.kind != TensorKind::Float {
                continue;
            }
            for (j, tensor) in slot.tensors.iter().enumerate() {
                let name = input.element_name(j);
                let grad = Dispatch::grad(tensor, &grads);
                if !input.gradient {
                    let zero = grad.map_or(Ok(true), is_zero);
                    if zero != Ok(true) {
                        fail(
                            op.name,
                            check,
                            &format!(
                                "input `{name}` is marked `no_gradient()` but got a nonzero \
                                 gradient"
                            ),
                            "remove `.no_gradient()` from the input if the op does \
                             differentiate it, or stop its backward pass from giving it one",
                        );
                    }
                    continue;
                }
                let Some(grad) = grad else {
                    fail(
                        op.name,
                        check,
                        &format!("input `{name}` is tracked but got no gradient"),
                        "give every tracked float input its gradient in the op's backward \
                         pass, or declare an input the op legitimately does not \
                         differentiate (`x = \"none\"` among the formulas, `no_gradient = \
                         [\"x\"]` beside a backward function; `Input::no_gradient()` by \
                         hand)",
                    );
                };
                let auto = match read(grad, TensorKind::Float) {
                    Ok(Host {
                        shape,
                        data: Data::Float(v),
                    }) if shape == self.inputs[index][j].shape => v,
                    Ok(Host { shape, .. }) => fail(
                        op.name,
                        check,
                        &format!(
                            "the gradient of input `{name}` has shape {shape:?}, but the \
                             input has shape {:?}",
                            self.inputs[index][j].shape
                        ),
                        "sum the gradient back to the input's shape (over broadcast \
                         dimensions) in the op's backward pass",
                    ),
                    Err(detail) => fail(op.name, check, &detail, "read the gradient"),
                };
                self.finite_differences(check, index, j, &auto, &weights, f);
            }
        }
    }

    /// Compares `auto`, the autodiff gradient of element `j` of input `index`, with
    /// central finite differences of the loss on plain Flex inputs.
    fn finite_differences<F>(
        &self,
        check: &str,
        index: usize,
        j: usize,
        auto: &[f32],
        weights: &[Option<Vec<f32>>],
        f: &mut F,
    ) where
        F: FnMut(&mut Args) -> Result<Vec<Value>, RouteError>,
    {
        let op = self.op;
        let name = op.inputs[index].element_name(j);
        let Data::Float(x) = &self.inputs[index][j].data else {
            unreachable!("a float input");
        };
        let tol = op.tolerance;
        let mut inputs = self.inputs.clone();
        let mut worst: Option<(usize, f64, f64)> = None; // (element, ratio, fd)
        let mut failing = 0;
        for k in 0..x.len() {
            let at = f64::from(x[k]);
            let h = 1e-3 * at.abs().max(1.0);
            #[allow(clippy::cast_possible_truncation)]
            let (plus, minus) = ((at + h) as f32, (at - h) as f32);
            let mut loss_at = |v: f32| {
                if let Data::Float(d) = &mut inputs[index][j].data {
                    d[k] = v;
                }
                self.plain_loss(&inputs, weights, &name, k, f)
            };
            let (up, down) = (loss_at(plus), loss_at(minus));
            if let Data::Float(d) = &mut inputs[index][j].data {
                d[k] = x[k];
            }
            let fd = (up - down) / (f64::from(plus) - f64::from(minus));
            let a = f64::from(auto[k]);
            let allowed = tol * (1.0 + fd.abs());
            let diff = (a - fd).abs();
            let ratio = if diff.is_finite() {
                diff / allowed
            } else {
                f64::INFINITY
            };
            if ratio > 1.0 || ratio.is_nan() {
                failing += 1;
                if worst.is_none_or(|(_, r, _)| ratio > r) {
                    worst = Some((k, ratio, fd));
                }
            }
        }
        let Some((k, _, fd)) = worst else {
            return;
        };
        let shape = &self.inputs[index][j].shape;
        let (lo, hi) = op.inputs[index].value_range().unwrap_or_default();
        #[allow(clippy::cast_possible_truncation)]
        let expected = fd as f32;
        fail(
            op.name,
            check,
            &format!(
                "input `{name}` worst element {k} (index {}, x = {}): got {} from autodiff, \
                 expected {expected} from finite differences (difference {:.3e}, allowed {:.3e} \
                 = {tol} * (1 + |expected|)); {failing} of {} elements are out of \
                 tolerance. Inputs drawn in [{lo}, {hi}) with seed {:#018x}, h = 1e-3 * \
                 max(1, |x|)",
                index_of(k, shape),
                x[k],
                auto[k],
                (f64::from(auto[k]) - fd).abs(),
                tol * (1.0 + fd.abs()),
                x.len(),
                self.seed
            ),
            &format!(
                "correct the op's backward pass (its `Autodiff<B, C>` kernel or `backward` \
                 formula) so it is the derivative of its forward pass; if the op is not \
                 differentiable at these points (a kink, a clamp, a straight-through \
                 estimator), narrow the input's range to avoid them (`ranges` in the op's \
                 `[op.check]`; `Input::range` by hand), or loosen the tolerance (`tolerance` \
                 there; `Op::tolerance`; now {tol})"
            ),
        )
    }

    /// The loss of the outputs of an untracked Flex call on `inputs`, in `f64`.
    fn plain_loss<F>(
        &self,
        inputs: &[Vec<Host>],
        weights: &[Option<Vec<f32>>],
        name: &str,
        k: usize,
        f: &mut F,
    ) -> f64
    where
        F: FnMut(&mut Args) -> Result<Vec<Value>, RouteError>,
    {
        let check = format!("finite differences of input `{name}` element {k}");
        let mut args = self.args(inputs, &self.reference, false, None);
        let values = self.call_ok(&check, f, &mut args);
        let leaves = self.read_all(&check, flatten(values));
        if leaves.len() != weights.len() {
            fail(
                self.op.name,
                &check,
                &format!(
                    "the op returned {} output leaves here but {} on the drawn inputs",
                    leaves.len(),
                    weights.len()
                ),
                "return the same outputs for every input",
            );
        }
        let mut loss = 0.0;
        for (leaf, w) in leaves.iter().zip(weights) {
            if let (
                Some(Host {
                    data: Data::Float(v),
                    ..
                }),
                Some(w),
            ) = (&leaf.value, w)
            {
                if v.len() != w.len() {
                    fail(
                        self.op.name,
                        &check,
                        &format!(
                            "{} has {} elements here but {} on the drawn inputs",
                            leaf.name,
                            v.len(),
                            w.len()
                        ),
                        "keep the output shapes independent of the input values",
                    );
                }
                loss += v
                    .iter()
                    .zip(w)
                    .map(|(&a, &b)| f64::from(a) * f64::from(b))
                    .sum::<f64>();
            }
        }
        loss
    }
}

/// `sum over float leaves of sum(out * w)` on `device`, or `None` without a float leaf.
fn weighted_loss(
    leaves: Vec<Leaf>,
    weights: &[Option<Vec<f32>>],
    device: &Device,
) -> Option<DispatchTensor> {
    let mut loss: Option<DispatchTensor> = None;
    for (leaf, w) in leaves.into_iter().zip(weights) {
        let (TensorKind::Float, Some(out), Some(w)) = (leaf.kind, leaf.tensor, w) else {
            continue;
        };
        let data = TensorData::new(w.clone(), out.shape()).convert_dtype(out.dtype());
        let w = Dispatch::float_from_data(data, device.as_dispatch());
        let term = Dispatch::float_sum(Dispatch::float_mul(out, w));
        loss = Some(match loss {
            None => term,
            Some(loss) => Dispatch::float_add(loss, term),
        });
    }
    loss
}

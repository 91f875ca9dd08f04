//! The machinery behind the `Autodiff<B, C>` implementations the generator writes from a
//! manifest's `backward` (formulas or a function path): everything that is neither gradient
//! math nor a kernel.
//!
//! The generator writes, per op, a value holding what the backward pass needs besides the float
//! inputs (plain arguments, int and bool tensors, outputs it saves) and a [`Derivative`]
//! implementation with the gradient math. [`Tape`] does the rest: it takes the op's float inputs
//! apart, keeps what the backward pass reads (the inputs, the output, or, for an op declared
//! `checkpoint = "recompute"`, only their node ids), registers the node in Burn's graph, and at
//! backward time hands each tracked input its gradient summed back to the input's shape.
//!
//! Generated code names this module `rt::__private::grad`; nothing here is a stable API.

use core::fmt::Debug;

use burn_autodiff::checkpoint::base::Checkpointer;
use burn_autodiff::checkpoint::retro_forward::RetroForward;
use burn_autodiff::checkpoint::state::BackwardStates;
use burn_autodiff::checkpoint::strategy::{CheckpointStrategy, NoCheckpointing};
use burn_autodiff::grads::Gradients;
use burn_autodiff::ops::{Backward, NodeGuard, Ops, OpsKind};
use burn_autodiff::{Autodiff, NodeId};
use burn_backend::tensor::FloatTensor;
use burn_backend::{Backend, DType, FloatDType, Shape, TensorMetadata};

mod formula;

pub use formula::*;

/// A float tensor of `Autodiff<B, C>` (the same type for every checkpoint strategy).
type AutodiffTensor<B> = FloatTensor<Autodiff<B>>;

/// One op's backward pass, as the generator writes it from the manifest: `Self` holds what the
/// pass needs besides the float inputs (plain arguments, int/bool tensors, saved outputs).
///
/// `N` is the number of float inputs (an absent optional input keeps its slot).
pub trait Derivative<B: Backend, const N: usize>: Clone + Debug + Send + 'static {
    /// The op's name, for messages.
    const OP: &'static str;
    /// The float inputs' names, for messages.
    const INPUTS: [&'static str; N];
    /// Which float inputs get a gradient (`"none"` and `no_gradient` inputs do not: they are
    /// never reported tracked to the backward pass, and get nothing registered).
    const GRADIENTS: [bool; N];
    /// Whether it reads the op's float output.
    const OUTPUT: bool;

    /// The gradient of every float input whose `tracked` entry is set, at any shape the
    /// output broadcasts to that input's (it is summed back by the caller); `grad` is the
    /// incoming gradient of the output.
    fn backward(
        self,
        saved: Saved<B, N>,
        grad: FloatTensor<B>,
        tracked: [bool; N],
    ) -> [Option<FloatTensor<B>>; N];
}

/// An op declared `checkpoint = "recompute"`: its forward pass can run again from its float
/// inputs (the rest is in `self`), so its output need not be kept.
pub trait Recompute<B: Backend, const N: usize>: Derivative<B, N> {
    /// The op's float output, from the float inputs (absent optional inputs are `None`).
    fn forward(&self, inputs: Saved<B, N>) -> FloatTensor<B>;
}

/// The float tensors a backward pass (or a recomputation) reads: the inputs it declared
/// reading, and the output.
#[derive(Debug)]
pub struct Saved<B: Backend, const N: usize> {
    inputs: [Option<FloatTensor<B>>; N],
    output: Option<FloatTensor<B>>,
}

/// What [`Saved`] says when asked for a tensor the derivative did not declare: a generator bug.
const UNDECLARED: &str = "burn-route: a generated backward pass read a tensor it did not declare \
     (please report this as a burn-route bug)";

impl<B: Backend, const N: usize> Saved<B, N> {
    /// Float input `index`, which is present (not an absent optional input).
    pub fn input(&mut self, index: usize) -> FloatTensor<B> {
        self.inputs[index].take().expect(UNDECLARED)
    }

    /// Optional float input `index`.
    pub fn optional(&mut self, index: usize) -> Option<FloatTensor<B>> {
        self.inputs[index].take()
    }

    /// The op's float output.
    pub fn output(&mut self) -> FloatTensor<B> {
        self.output.take().expect(UNDECLARED)
    }
}

/// What a tracked node keeps for its backward pass.
#[derive(Clone, Debug)]
enum Kept<B: Backend, const N: usize> {
    /// The tensors themselves (`checkpoint = "keep"`, the default).
    Tensors {
        inputs: [Option<FloatTensor<B>>; N],
        output: Option<FloatTensor<B>>,
    },
    /// The float inputs' node ids: the checkpointer gives the tensors back (recomputing them
    /// when they were not kept). The output is kept when given, else recomputed when the
    /// backward pass reads it (`checkpoint = "recompute"`).
    Checkpointed {
        ids: [Option<NodeId>; N],
        output: Option<FloatTensor<B>>,
    },
}

/// A derivative behind a pointer: Burn's generic node machinery (`OpsPrep`, the step, the
/// retro-forward) is then compiled once per backend and number of inputs, not once per op,
/// which keeps a crate of many declared backward passes quick to build.
trait Erased<B: Backend, const N: usize>: Debug + Send {
    fn clone_box(&self) -> Box<dyn Erased<B, N>>;
    fn op(&self) -> &'static str;
    fn inputs(&self) -> [&'static str; N];
    fn gradients(&self) -> [bool; N];
    fn reads_output(&self) -> bool;
    fn backward(
        self: Box<Self>,
        saved: Saved<B, N>,
        grad: FloatTensor<B>,
        tracked: [bool; N],
    ) -> [Option<FloatTensor<B>>; N];
    /// The output, for a recomputed op (never called for a kept one).
    fn forward(&self, inputs: Saved<B, N>) -> FloatTensor<B>;
}

/// A kept op's derivative.
#[derive(Clone, Debug)]
struct Keep<D>(D);

/// A recomputed op's derivative.
#[derive(Clone, Debug)]
struct Recomputed<D>(D);

/// What both wrappers forward to their derivative.
macro_rules! erased_common {
    () => {
        fn clone_box(&self) -> Box<dyn Erased<B, N>> {
            Box::new(self.clone())
        }
        fn op(&self) -> &'static str {
            D::OP
        }
        fn inputs(&self) -> [&'static str; N] {
            D::INPUTS
        }
        fn gradients(&self) -> [bool; N] {
            D::GRADIENTS
        }
        fn reads_output(&self) -> bool {
            D::OUTPUT
        }
        fn backward(
            self: Box<Self>,
            saved: Saved<B, N>,
            grad: FloatTensor<B>,
            tracked: [bool; N],
        ) -> [Option<FloatTensor<B>>; N] {
            self.0.backward(saved, grad, tracked)
        }
    };
}

impl<B: Backend, D: Derivative<B, N>, const N: usize> Erased<B, N> for Keep<D> {
    erased_common!();
    fn forward(&self, _: Saved<B, N>) -> FloatTensor<B> {
        unreachable!("a kept node is never recomputed")
    }
}

impl<B: Backend, D: Recompute<B, N>, const N: usize> Erased<B, N> for Recomputed<D> {
    erased_common!();
    fn forward(&self, inputs: Saved<B, N>) -> FloatTensor<B> {
        self.0.forward(inputs)
    }
}

/// A boxed derivative, as Burn's node state holds it.
#[derive(Debug)]
struct Boxed<B: Backend, const N: usize>(Box<dyn Erased<B, N>>);

impl<B: Backend, const N: usize> Clone for Boxed<B, N> {
    fn clone(&self) -> Self {
        Self(self.0.clone_box())
    }
}

/// The state of a generated node in Burn's graph.
#[derive(Clone, Debug)]
pub struct State<B: Backend, const N: usize> {
    derivative: Boxed<B, N>,
    kept: Kept<B, N>,
    /// Each float input's shape (empty for an absent optional input).
    shapes: [Shape; N],
    /// Each float input's dtype, which its gradient is cast to (the output's dtype, which the
    /// incoming gradient has, may be another: `dtype = "default"` or another input's).
    dtypes: [DType; N],
    /// Which float inputs the call had.
    present: [bool; N],
}

/// Burn's [`Backward`] for every generated derivative: `R` says whether the op is recomputed.
#[derive(Debug)]
pub struct Node<const R: bool>;

impl<B: Backend, const N: usize, const R: bool> Backward<B, N> for Node<R> {
    type State = State<B, N>;

    fn backward(
        self,
        ops: Ops<Self::State, N>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let Ops {
            parents,
            node,
            state,
        } = ops;
        let derivative = state.derivative.0;
        // The float inputs' one dtype (routing refuses a call that mixes two): an output in
        // another (`dtype = "default"`, a cast) has its gradient, and its value when the
        // backward pass reads it, cast to it, so that the pass computes in one dtype.
        let dtype = (0..N).find(|&i| state.present[i]).map(|i| state.dtypes[i]);
        let in_inputs = |t: FloatTensor<B>| match dtype {
            Some(dtype) if t.dtype() != dtype => B::float_cast(t, FloatDType::from(dtype)),
            _ => t,
        };
        let saved = match state.kept {
            Kept::Tensors { inputs, output } => Saved { inputs, output },
            Kept::Checkpointed { ids, output } => {
                let inputs = ids.map(|id| id.map(|id| checkpointer.retrieve_node_output(id)));
                let output = output.or_else(|| {
                    derivative.reads_output().then(|| {
                        derivative.forward(Saved {
                            inputs: inputs.clone(),
                            output: None,
                        })
                    })
                });
                Saved { inputs, output }
            }
        };
        let saved = Saved {
            output: saved.output.map(in_inputs),
            ..saved
        };
        let parents = parents.map(|p| p.map(|p| p.id));
        let grad = in_inputs(grads.consume::<B>(&node));
        let mut tracked = [false; N];
        let gradients = derivative.gradients();
        for i in 0..N {
            tracked[i] = state.present[i] && parents[i].is_some() && gradients[i];
        }
        let (op, names) = (derivative.op(), derivative.inputs());
        let computed = derivative.backward(saved, grad, tracked);
        for (i, (parent, grad)) in parents.into_iter().zip(computed).enumerate() {
            if let (true, Some(parent), Some(grad)) = (tracked[i], parent, grad) {
                let grad = to_shape::<B>(grad, &state.shapes[i]).unwrap_or_else(|have| {
                    gradient_shape_panic(op, names[i], &have, &state.shapes[i])
                });
                // An output in another dtype than the input (a cast): the gradient goes back to
                // the input's dtype, as Burn's own `cast` gives it.
                let grad = if grad.dtype() == state.dtypes[i] {
                    grad
                } else {
                    B::float_cast(grad, FloatDType::from(state.dtypes[i]))
                };
                grads.register::<B>(parent, grad);
            }
        }
    }
}

/// `grad` at `shape`: summed over the dimensions the forward pass broadcast (where `shape` has
/// 1), expanded over those a reduction kept at 1 (where `grad` has 1).
///
/// # Errors
///
/// `grad`'s shape when the ranks differ or a dimension is neither: the gradient math is wrong
/// for this input.
pub fn to_shape<B: Backend>(grad: FloatTensor<B>, shape: &Shape) -> Result<FloatTensor<B>, Shape> {
    let have = grad.shape();
    if have == *shape {
        return Ok(grad);
    }
    let fits = have.num_dims() == shape.num_dims()
        && (0..have.num_dims()).all(|d| have[d] == shape[d] || have[d] == 1 || shape[d] == 1);
    if !fits {
        return Err(have);
    }
    let mut grad = grad;
    for d in 0..shape.num_dims() {
        if shape[d] == 1 && have[d] != 1 {
            grad = B::float_sum_dim(grad, d);
        }
    }
    if grad.shape() != *shape {
        grad = B::float_expand(grad, shape.clone());
    }
    Ok(grad)
}

/// The panic of a backward pass that gave `input` a gradient of a shape that does not fit.
#[track_caller]
pub(crate) fn gradient_shape_panic(op: &str, input: &str, have: &Shape, shape: &Shape) -> ! {
    panic!(
        "the backward pass of op `{op}` gave input `{input}` a gradient of shape {:?}, but `{input}` \
         has shape {:?} and a gradient must have the input's shape, the output's, or one that \
         broadcasts to it (same rank, each dimension equal or 1). Fix: correct the op's \
         `backward` formula or function for `{input}` (a reduction such as `sum_dim` keeps its \
         dimension with size 1; an input of another rank than the output needs the function \
         form). See {}",
        have.as_slice(),
        shape.as_slice(),
        burn_route_core::errors::link("backward-gradient-shape"),
    )
}

/// An op's float inputs on their way through a generated `Autodiff<B, C>` implementation: their
/// nodes, shapes and what the backward pass keeps of them.
#[derive(Debug)]
pub struct Tape<B: Backend, const N: usize> {
    /// The guards `prepare` takes, one set per output node still to register; an absent
    /// optional input stands in as a fresh untracked leaf. Empty when no float input is present.
    guards: Vec<[NodeGuard; N]>,
    shapes: [Shape; N],
    dtypes: [DType; N],
    present: [bool; N],
    primitives: [Option<FloatTensor<B>>; N],
    /// Copies for the backward pass: the inputs it reads (tracked calls only), or for a
    /// recomputed op every input (the checkpointer decides what it keeps).
    kept: [Option<AutodiffTensor<B>>; N],
    /// The inputs the backward pass reads.
    reads: [bool; N],
}

impl<B: Backend, const N: usize> Tape<B, N> {
    /// Takes the float inputs apart. `reads` are the inputs whose values the backward pass
    /// needs: a tracked call keeps those.
    pub fn new(inputs: [Option<AutodiffTensor<B>>; N], reads: [bool; N]) -> Self {
        Self::with(inputs, reads, false, 1)
    }

    /// [`Tape::new`] for an op with `outputs` float outputs (the float fields of a declared
    /// struct it returns): each is a node of its own in Burn's graph, with the same parents,
    /// registered by [`Tape::finish_part`]. Their backward passes add up in the inputs'
    /// gradients.
    pub fn split(inputs: [Option<AutodiffTensor<B>>; N], reads: [bool; N], outputs: usize) -> Self {
        Self::with(inputs, reads, false, outputs)
    }

    /// [`Tape::new`] for an op declared `checkpoint = "recompute"`, under checkpoint strategy
    /// `C`; `reads` are the inputs its backward pass needs (every input when it reads the
    /// output, which it recomputes from them). Under gradient checkpointing a call keeps every
    /// input's handle until [`Tape::finish_recomputed`] registers them with the checkpointer,
    /// which decides what is kept and what recomputed.
    ///
    /// Without checkpointing (`NoCheckpointing`: no op is recomputed for another) a tracked
    /// call keeps only `reads`, as [`Tape::new`] does. An input held during the forward pass
    /// shares its buffer, which keeps the kernel from working in place: one more allocation and
    /// pass over the data than Burn's own op.
    pub fn recomputed<C: CheckpointStrategy>(
        inputs: [Option<AutodiffTensor<B>>; N],
        reads: [bool; N],
    ) -> Self {
        Self::with(inputs, reads, checkpoints::<C>(), 1)
    }

    fn with(
        inputs: [Option<AutodiffTensor<B>>; N],
        reads: [bool; N],
        all: bool,
        outputs: usize,
    ) -> Self {
        let present = inputs.each_ref().map(Option::is_some);
        let shapes = inputs
            .each_ref()
            .map(|t| t.as_ref().map_or_else(|| Shape::new([0; 0]), |t| t.shape()));
        let dtypes = inputs
            .each_ref()
            .map(|t| t.as_ref().map_or(DType::F32, |t| t.primitive().dtype()));
        let tracked = inputs.iter().flatten().any(AutodiffTensor::is_tracked);
        // An absent optional input stands in the node's parents as a fresh untracked leaf.
        let guards = match inputs.iter().flatten().next() {
            None => Vec::new(),
            Some(anchor) => (0..outputs)
                .map(|_| {
                    inputs.each_ref().map(|t| match t {
                        Some(t) => t.node(),
                        None => AutodiffTensor::<B>::new(B::float_empty(
                            Shape::new([0]),
                            &anchor.primitive().device(),
                            FloatDType::from(anchor.primitive().dtype()),
                        ))
                        .node(),
                    })
                })
                .collect(),
        };
        // A recomputed op hands every input to the checkpointer, tracked or not (an untracked
        // parent makes it compute-bound, as Burn's own ops do).
        let mut kept = [const { None }; N];
        for (i, t) in inputs.iter().enumerate() {
            if all || (tracked && reads[i]) {
                kept[i] = t.clone();
            }
        }
        let primitives = inputs.map(|t| t.map(AutodiffTensor::into_primitive));
        Self {
            guards,
            shapes,
            dtypes,
            present,
            primitives,
            kept,
            reads,
        }
    }

    /// Float input `index`'s primitive, for the forward pass (a present input).
    pub fn input(&mut self, index: usize) -> FloatTensor<B> {
        self.primitives[index].take().expect(UNDECLARED)
    }

    /// Optional float input `index`'s primitive.
    pub fn optional(&mut self, index: usize) -> Option<FloatTensor<B>> {
        self.primitives[index].take()
    }

    /// Registers the node of an op whose backward pass keeps its tensors; returns the output.
    pub fn finish<C: CheckpointStrategy, D: Derivative<B, N>>(
        mut self,
        derivative: D,
        output: FloatTensor<B>,
    ) -> AutodiffTensor<B> {
        self.finish_part::<C, D>(derivative, output)
    }

    /// Registers the node of one float output of a [`Tape::split`] tape, with its own backward
    /// pass; returns the output.
    pub fn finish_part<C: CheckpointStrategy, D: Derivative<B, N>>(
        &mut self,
        derivative: D,
        output: FloatTensor<B>,
    ) -> AutodiffTensor<B> {
        self.finish_kept::<C>(Boxed(Box::new(Keep(derivative))), output)
    }

    fn finish_kept<C: CheckpointStrategy>(
        &mut self,
        derivative: Boxed<B, N>,
        output: FloatTensor<B>,
    ) -> AutodiffTensor<B> {
        let Some(guards) = self.guards.pop() else {
            return AutodiffTensor::new(output);
        };
        match Node::<false>
            .prepare::<C>(guards)
            .compute_bound()
            .stateful()
        {
            // Under gradient checkpointing, the inputs go to the checkpointer, as Burn's own
            // compute-bound ops do: one that a memory-bound op produced is then recomputed for
            // the backward pass rather than kept alive beside what the checkpointer keeps to
            // recompute it (which made a checkpointed training step heavier, not lighter).
            OpsKind::Tracked(mut prep) if checkpoints::<C>() => {
                let ids = self
                    .kept
                    .each_ref()
                    .map(|t| t.as_ref().map(|t| prep.checkpoint(t)));
                let kept_output = derivative.0.reads_output().then(|| output.clone());
                let state = State {
                    derivative,
                    kept: Kept::Checkpointed {
                        ids,
                        output: kept_output,
                    },
                    shapes: self.shapes.clone(),
                    dtypes: self.dtypes,
                    present: self.present,
                };
                prep.finish(state, output)
            }
            OpsKind::Tracked(prep) => {
                // The last node takes the kept inputs; an earlier one (of a split tape) copies.
                let kept = if self.guards.is_empty() {
                    core::mem::replace(&mut self.kept, [const { None }; N])
                } else {
                    self.kept.clone()
                };
                let inputs = kept.map(|t| t.map(AutodiffTensor::into_primitive));
                let kept_output = derivative.0.reads_output().then(|| output.clone());
                let state = State {
                    derivative,
                    kept: Kept::Tensors {
                        inputs,
                        output: kept_output,
                    },
                    shapes: self.shapes.clone(),
                    dtypes: self.dtypes,
                    present: self.present,
                };
                prep.finish(state, output)
            }
            OpsKind::UnTracked(prep) => prep.finish(output),
        }
    }

    /// Registers the node of an op declared `checkpoint = "recompute"`: memory-bound, with a
    /// retro-forward, so that under gradient checkpointing its output is recomputed when needed
    /// instead of kept, and its backward pass gets its inputs from the checkpointer.
    pub fn finish_recomputed<C: CheckpointStrategy, D: Recompute<B, N>>(
        self,
        derivative: D,
        output: FloatTensor<B>,
    ) -> AutodiffTensor<B> {
        self.finish_memory_bound::<C>(Boxed(Box::new(Recomputed(derivative))), output)
    }

    fn finish_memory_bound<C: CheckpointStrategy>(
        mut self,
        derivative: Boxed<B, N>,
        output: FloatTensor<B>,
    ) -> AutodiffTensor<B> {
        let Some(guards) = self.guards.pop() else {
            return AutodiffTensor::new(output);
        };
        // The retro-forward recomputes the output from every input; the backward pass gets back
        // from the checkpointer the inputs it reads (all of them when it reads the output, which
        // it recomputes).
        let ids = self
            .kept
            .each_ref()
            .map(|t| t.as_ref().map(AutodiffTensor::id));
        let retro = Retro::<B, N> {
            derivative: derivative.clone(),
            ids,
        };
        let parents = self.kept.iter().flatten();
        match Node::<true>
            .prepare::<C>(guards)
            .memory_bound()
            .retro_forward(retro)
            .parents(parents)
            .stateful()
        {
            OpsKind::Tracked(mut prep) => {
                let reads_output = derivative.0.reads_output();
                let mut ids = [None; N];
                for (i, t) in self.kept.iter().enumerate() {
                    if let Some(t) = t
                        && (self.reads[i] || reads_output)
                    {
                        ids[i] = Some(prep.checkpoint(t));
                    }
                }
                let state = State {
                    derivative,
                    kept: Kept::Checkpointed { ids, output: None },
                    shapes: self.shapes,
                    dtypes: self.dtypes,
                    present: self.present,
                };
                prep.finish(state, output)
            }
            OpsKind::UnTracked(prep) => prep.finish(output),
        }
    }
}

/// Whether strategy `C` may recompute a memory-bound op for a later one: every strategy but
/// `NoCheckpointing`, under which Burn treats every op as compute-bound. (Hand-written
/// `Autodiff<B, C>` kernels read it too, to keep less under gradient checkpointing.)
pub fn checkpoints<C: CheckpointStrategy>() -> bool {
    core::any::TypeId::of::<C>() != core::any::TypeId::of::<NoCheckpointing>()
}

/// The last step of a hand-written `Autodiff<B, C>` kernel's backward pass: each formed
/// gradient registered for its parent (`parents`: the tracked inputs' node ids, `None` for the
/// others).
pub fn register_formed<B: Backend, const N: usize>(
    parents: [Option<NodeId>; N],
    formed: [Option<FloatTensor<B>>; N],
    grads: &mut Gradients,
) {
    for (parent, formed) in parents.into_iter().zip(formed) {
        if let (Some(parent), Some(formed)) = (parent, formed) {
            grads.register::<B>(parent, formed);
        }
    }
}

/// The retro-forward of a recomputed op: its output, from its inputs' states.
#[derive(Debug)]
struct Retro<B: Backend, const N: usize> {
    derivative: Boxed<B, N>,
    ids: [Option<NodeId>; N],
}

impl<B: Backend, const N: usize> RetroForward for Retro<B, N> {
    fn forward(&self, states: &mut BackwardStates, out_node: NodeId) {
        let inputs = self
            .ids
            .map(|id| id.map(|id| states.get_state::<FloatTensor<B>>(&id)));
        let output = self.derivative.0.forward(Saved {
            inputs,
            output: None,
        });
        states.save(out_node, output);
    }
}

//! `self_attention`: multi-head self-attention with its four projections as one op, whose
//! backward pass follows the gradient-checkpointing strategy.
//!
//! The rows go in chunks of whole sequences (`BackwardKernels::PROJECTION_CHUNKS`: on Flex
//! about 64 KiB of projection-width values a chunk, a GPU every row at once). For each chunk
//! the forward pass forms the queries, keys and values (`x @ q_weight` and the like, split into
//! heads), the attention weights `softmax(q k^T / sqrt(head width))` (causal: a position sees
//! itself and the ones before it), their output `weights @ v`, and its projection by
//! `out_weight`.
//!
//! - Without gradient checkpointing a tracked call keeps each chunk's queries, keys, values and
//!   weights, the tensors Burn's matmuls keep when the block is written with them (those also
//!   keep the heads' output, which `out_weight`'s gradient here rebuilds from the weights and
//!   values). The backward pass reads them phase by phase over every chunk, dropping them as it
//!   goes.
//! - Under `gradient_checkpointing()` it keeps only its inputs, through the checkpointer (which
//!   recomputes an input a memory-bound op made), and its output is kept as a compute-bound op's:
//!   the backward pass rebuilds each chunk's tensors with the same function as the forward pass
//!   and forms that chunk's gradients before the next, so no `[rows, width]` tensor between the
//!   projections is kept or rebuilt whole. Every gradient is formed by the same operations in
//!   the same order as without checkpointing: the same bits.
//!
//! [`self_attention`] is the op with `B`'s primitives (the `Cube` and `Remote` kernels); the
//! `Autodiff<B, C>` kernel (`autodiff`) is hand-written, for the state that depends on the
//! strategy.

use std::ops::Range;

use burn_backend::tensor::FloatTensor;
use burn_backend::{Backend, FloatDType, Scalar, Shape, TensorData, TensorMetadata};

use super::backward::BackwardKernels;
use super::composed;
use super::fused_linear::{Chunks, check_weight, rows_of, zeros};

/// The op's name, in its panics.
const OP: &str = "self_attention";

/// The sizes of one call, checked against each other.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dims {
    batch: usize,
    seq: usize,
    features: usize,
    inner: usize,
    outputs: usize,
    heads: usize,
    causal: bool,
}

impl Dims {
    /// The sizes of `self_attention(x, q_weight, .., out_weight, heads, causal)`; panics with
    /// both shapes where they do not chain (the manifest checks that `k_weight` and `v_weight`
    /// have `q_weight`'s shape).
    pub(crate) fn of(
        x: &impl TensorMetadata,
        q_weight: &impl TensorMetadata,
        out_weight: &impl TensorMetadata,
        heads: usize,
        causal: bool,
    ) -> Self {
        check_weight(OP, ["x", "q_weight"], x, q_weight);
        let (q, out) = (q_weight.shape(), out_weight.shape());
        let inner = q[1];
        assert!(
            heads > 0 && inner % heads == 0,
            "{OP}: `heads` is {heads}, which must be at least 1 and divide the projections' \
             width {inner} (`q_weight` has shape {:?}); pass a divisor of {inner}",
            q.as_slice(),
        );
        assert!(
            out.first() == Some(&inner),
            "{OP}: `out_weight` has shape {:?}, but its rows must be the projections' width \
             {inner} (`q_weight` has shape {:?}); pass it as `[{inner}, outputs]`, as Burn's \
             `Linear` keeps it",
            out.as_slice(),
            q.as_slice(),
        );
        let shape = x.shape();
        Self {
            batch: shape[0],
            seq: shape[1],
            features: shape[2],
            inner,
            outputs: out[1],
            heads,
            causal,
        }
    }

    fn rows(&self) -> usize {
        self.batch * self.seq
    }

    /// Whether the call has no rows, or rows of no width: its output and gradients are zeros
    /// (no product runs on an empty operand).
    fn empty(&self) -> bool {
        self.rows() == 0 || self.features == 0
    }

    /// The factor of the scores: one over the square root of a head's width.
    fn scale(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)] // A head's width is far below 2^52.
        let width = (self.inner / self.heads) as f64;
        1.0 / width.sqrt()
    }

    /// The ranges of sequences (batch entries) in each chunk: with `Chunks::Small`, about 64 KiB
    /// of projection-width `f32` values (or of one row's scores over every head), twice a
    /// projection's chunk, and at least 64 rows, rounded down to whole sequences (one at least).
    /// A chunk here is some forty small ops, whose count a bigger chunk divides, against the
    /// memory a rebuilt chunk takes under checkpointing (the trade as measured in the memory
    /// bench's training step is in `BENCHMARKS.md`).
    fn chunks(&self, chunks: Chunks) -> impl Iterator<Item = Range<usize>> + use<> {
        let width = self.inner.max(self.seq * self.heads).div_ceil(2);
        let sequences = (chunks.rows(self.rows(), width) / self.seq.max(1)).max(1);
        let batch = self.batch;
        (0..batch)
            .step_by(sequences)
            .map(move |first| first..(first + sequences).min(batch))
    }

    /// The rows of the sequences in `sequences`.
    fn rows_of(&self, sequences: &Range<usize>) -> Range<usize> {
        sequences.start * self.seq..sequences.end * self.seq
    }

    /// `t` (`[batch, seq, width]`) as `[rows, width]`, copied once here if it is not contiguous
    /// (each chunk's rows are then a view).
    fn flat<B: Backend>(&self, t: FloatTensor<B>) -> FloatTensor<B> {
        let width = t.shape()[2];
        B::float_reshape(t, Shape::new([self.rows(), width]))
    }

    /// Whether anything before the output projection gets a gradient.
    fn inner_wanted(wanted: [bool; 5]) -> bool {
        wanted[..4].contains(&true)
    }
}

/// The kernels the attention is written with: `B`'s own ([`Own`], in the `Autodiff<B, C>`
/// kernel and Flex's) or Burn's primitives ([`Burns`], the composition that `Cube` and `Remote`
/// run).
pub(crate) trait Kernels<B: Backend> {
    /// `lhs @ rhs`, batched over the leading dimensions.
    fn matmul(lhs: FloatTensor<B>, rhs: FloatTensor<B>) -> FloatTensor<B>;
    /// The softmax over the last dimension.
    fn softmax(x: FloatTensor<B>) -> FloatTensor<B>;
    /// The softmax's input gradient from its output `y` and the incoming gradient.
    fn softmax_backward(y: FloatTensor<B>, grad: FloatTensor<B>) -> FloatTensor<B>;
}

/// Burn's primitives: see [`Kernels`].
pub(crate) struct Burns;

impl<B: Backend> Kernels<B> for Burns {
    fn matmul(lhs: FloatTensor<B>, rhs: FloatTensor<B>) -> FloatTensor<B> {
        B::float_matmul(lhs, rhs)
    }

    fn softmax(x: FloatTensor<B>) -> FloatTensor<B> {
        composed::softmax_last::<B>(x)
    }

    fn softmax_backward(y: FloatTensor<B>, grad: FloatTensor<B>) -> FloatTensor<B> {
        super::backward::generic::softmax_last_backward::<B>(y, grad)
    }
}

/// `B`'s own kernels ([`BackwardKernels::matmul`], `softmax_last` and its backward kernel):
/// see [`Kernels`].
pub(crate) struct Own;

impl<B: BackwardKernels> Kernels<B> for Own {
    fn matmul(lhs: FloatTensor<B>, rhs: FloatTensor<B>) -> FloatTensor<B> {
        B::matmul(lhs, rhs)
    }

    fn softmax(x: FloatTensor<B>) -> FloatTensor<B> {
        B::softmax_last(x)
    }

    fn softmax_backward(y: FloatTensor<B>, grad: FloatTensor<B>) -> FloatTensor<B> {
        B::softmax_last_backward(y, grad)
    }
}

/// `x @ weight` for rows `x` (`[rows, in]`) and a weight `[in, out]`, as Burn's `linear`.
fn linear<B: Backend, K: Kernels<B>>(x: FloatTensor<B>, weight: FloatTensor<B>) -> FloatTensor<B> {
    K::matmul(x, weight)
}

/// The input's gradient of [`linear`]: `grad @ weight^T`.
fn linear_x_backward<B: Backend, K: Kernels<B>>(
    weight: FloatTensor<B>,
    grad: FloatTensor<B>,
) -> FloatTensor<B> {
    K::matmul(grad, B::float_swap_dims(weight, 0, 1))
}

/// The weight's gradient of [`linear`]: `x^T @ grad`.
fn linear_weight_backward<B: Backend, K: Kernels<B>>(
    x: FloatTensor<B>,
    grad: FloatTensor<B>,
) -> FloatTensor<B> {
    K::matmul(B::float_swap_dims(x, 0, 1), grad)
}

/// A chunk's queries, keys and values split into heads (`[sequences, heads, seq, head
/// width]`) and its attention weights (`[sequences, heads, seq, seq]`).
#[derive(Clone, Debug)]
pub(crate) struct Attention<B: Backend> {
    q: FloatTensor<B>,
    k: FloatTensor<B>,
    v: FloatTensor<B>,
    weights: FloatTensor<B>,
}

/// What the backward pass reads of a chunk: its [`Attention`] when anything before the output
/// projection gets a gradient, and the heads' output (`[rows, inner]`) when only `out_weight`
/// does (else `out_weight`'s gradient rebuilds it from the weights and values, one batched
/// product of the attention's sizes, rather than keep a `[rows, inner]` tensor).
#[derive(Clone, Debug)]
pub(crate) struct Chunk<B: Backend> {
    attention: Option<Attention<B>>,
    output: Option<FloatTensor<B>>,
}

/// The heads' output (`[rows, inner]`) of attention `weights` over values `v`.
fn heads_output<B: Backend, K: Kernels<B>>(
    weights: FloatTensor<B>,
    v: FloatTensor<B>,
    d: &Dims,
    sequences: usize,
) -> FloatTensor<B> {
    merge_heads::<B>(K::matmul(weights, v), d, sequences)
}

/// `[rows, inner]` as `[sequences, heads, seq, head width]`.
fn split_heads<B: Backend>(t: FloatTensor<B>, d: &Dims, sequences: usize) -> FloatTensor<B> {
    let shape = Shape::new([sequences, d.seq, d.heads, d.inner / d.heads]);
    B::float_swap_dims(B::float_reshape(t, shape), 1, 2)
}

/// `[sequences, heads, seq, head width]` as `[rows, inner]`.
fn merge_heads<B: Backend>(t: FloatTensor<B>, d: &Dims, sequences: usize) -> FloatTensor<B> {
    let merged = B::float_swap_dims(t, 1, 2);
    B::float_reshape(merged, Shape::new([sequences * d.seq, d.inner]))
}

/// `[1, 1, seq, seq]` in `like`'s dtype: `-inf` above the diagonal (a key after the query),
/// 0 elsewhere, added to the scores. (A float mask rather than a bool one: a bool tensor made
/// from data takes each backend's own bool dtype, which its `from_data` does not convert to.)
fn causal_mask<B: Backend>(d: &Dims, like: &FloatTensor<B>) -> FloatTensor<B> {
    let s = d.seq;
    let bias: Vec<f32> = (0..s * s)
        .map(|i| {
            if i % s > i / s {
                f32::NEG_INFINITY
            } else {
                0.0
            }
        })
        .collect();
    let bias = B::float_from_data(TensorData::new(bias, [1, 1, s, s]), &like.device());
    B::float_cast(bias, FloatDType::from(like.dtype()))
}

/// One chunk's attention, from its rows of `x` (`[rows, features]`), with `K`'s kernels: its
/// queries, keys, values and weights, and the heads' output (`[rows,
/// inner]`), which the output projection takes. The forward pass and the rebuilding of a chunk
/// in the backward pass both run this.
fn chunk_attention<B: Backend, K: Kernels<B>>(
    x: FloatTensor<B>,
    [q_weight, k_weight, v_weight]: [&FloatTensor<B>; 3],
    d: &Dims,
) -> (Attention<B>, FloatTensor<B>) {
    let sequences = x.shape()[0] / d.seq;
    let project =
        |w: &FloatTensor<B>| split_heads::<B>(linear::<B, K>(x.clone(), w.clone()), d, sequences);
    let (q, k, v) = (project(q_weight), project(k_weight), project(v_weight));
    let scores = K::matmul(q.clone(), B::float_swap_dims(k.clone(), 2, 3));
    let mut scores = B::float_mul_scalar(scores, Scalar::from(d.scale()));
    if d.causal {
        scores = B::float_add(scores, causal_mask::<B>(d, &x));
    }
    let weights = K::softmax(scores);
    let output = heads_output::<B, K>(weights.clone(), v.clone(), d, sequences);
    (Attention { q, k, v, weights }, output)
}

/// A chunk between the backward pass's phases, after the output projection's: its
/// [`Attention`] and the gradient of its heads' output (`[sequences, heads, seq, head width]`).
struct Heads<B: Backend> {
    attention: Attention<B>,
    d_heads: FloatTensor<B>,
}

/// What the backward pass forms, and where: the wanted inputs, the weights' gradients summed
/// over the chunks (`[q, k, v, out]`), and `x`'s gradient written a chunk of rows at a time.
struct Formed<B: Backend> {
    wanted: [bool; 5],
    sums: [Option<FloatTensor<B>>; 4],
    d_x: Rows<B>,
}

impl<B: Backend> Formed<B> {
    /// Writes a chunk's rows of `x`'s gradient (summed by [`input_part`]), if formed.
    fn write_x(&mut self, rows: Range<usize>, d_x: Option<FloatTensor<B>>) {
        if let Some(d_x) = d_x {
            self.d_x.write(rows, d_x);
        }
    }

    /// Adds `value` into the sum of weight `index`'s gradient (`value` itself for the first
    /// chunk).
    fn add(&mut self, index: usize, value: FloatTensor<B>) {
        let sum = &mut self.sums[index];
        *sum = Some(match sum.take() {
            Some(sum) => B::float_add(sum, value),
            None => value,
        });
    }
}

/// The output projection's phase of one chunk, from its rows of the incoming gradient
/// (`[rows, outputs]`): `d_out_weight`'s part, and the gradient of the heads' output when
/// anything before the projection is wanted. What the chunk kept is dropped or moved on.
fn output_phase<B: Backend, K: Kernels<B>>(
    chunk: Chunk<B>,
    grad: FloatTensor<B>,
    out_weight: &FloatTensor<B>,
    d: &Dims,
    formed: &mut Formed<B>,
) -> Option<Heads<B>> {
    const KEPT: &str = "kept for what is wanted";
    let sequences = grad.shape()[0] / d.seq;
    if formed.wanted[4] {
        let output = chunk.output.unwrap_or_else(|| {
            let attention = chunk.attention.as_ref().expect(KEPT);
            heads_output::<B, K>(attention.weights.clone(), attention.v.clone(), d, sequences)
        });
        formed.add(3, linear_weight_backward::<B, K>(output, grad.clone()));
    }
    if !Dims::inner_wanted(formed.wanted) {
        return None;
    }
    let d_heads = linear_x_backward::<B, K>(out_weight.clone(), grad);
    Some(Heads {
        attention: chunk.attention.expect(KEPT),
        d_heads: split_heads::<B>(d_heads, d, sequences),
    })
}

/// The attention's phase of one chunk: the gradients of its queries, keys and values, the heads
/// merged (`[rows, inner]`). The chunk's tensors are dropped.
fn attention_phase<B: Backend, K: Kernels<B>>(heads: Heads<B>, d: &Dims) -> [FloatTensor<B>; 3] {
    let Heads {
        attention: Attention { q, k, v, weights },
        d_heads,
    } = heads;
    let sequences = q.shape()[0];
    let d_weights = K::matmul(d_heads.clone(), B::float_swap_dims(v, 2, 3));
    let d_v = K::matmul(B::float_swap_dims(weights.clone(), 2, 3), d_heads);
    let d_scores = K::softmax_backward(weights, d_weights);
    let d_scores = B::float_mul_scalar(d_scores, Scalar::from(d.scale()));
    let d_q = K::matmul(d_scores.clone(), k);
    let d_k = K::matmul(B::float_swap_dims(d_scores, 2, 3), q);
    [d_q, d_k, d_v].map(|g| merge_heads::<B>(g, d, sequences))
}

/// Projection `index`'s part of a chunk's rows of `x`'s gradient, from the gradient of the
/// projection's output `grad` (`[rows, inner]`), added into `sum` (the parts of `q`, `k` and `v`
/// in that order; [`Formed::write_x`] writes the sum).
fn input_part<B: Backend, K: Kernels<B>>(
    sum: &mut Option<FloatTensor<B>>,
    weight: &FloatTensor<B>,
    grad: FloatTensor<B>,
) {
    let part = linear_x_backward::<B, K>(weight.clone(), grad);
    *sum = Some(match sum.take() {
        Some(sum) => B::float_add(sum, part),
        None => part,
    });
}

/// The weight's phase of projection `index` (`q`, `k`, `v`) of one chunk, from the gradient of
/// its output `grad` (`[rows, inner]`) and the chunk's rows of `x` (given when the weight's
/// gradient is wanted): the weight's gradient's part.
fn weight_phase<B: Backend, K: Kernels<B>>(
    index: usize,
    grad: FloatTensor<B>,
    x: Option<FloatTensor<B>>,
    formed: &mut Formed<B>,
) {
    if formed.wanted[index + 1] {
        let x = x.expect("x is kept when a projection's weight gradient is wanted");
        formed.add(index, linear_weight_backward::<B, K>(x, grad));
    }
}

/// Each chunk's result (`[rows, width]`), written into the rows it came from of one `[batch,
/// seq, width]` tensor (the chunk itself when it is every row).
struct Rows<B: Backend> {
    all: Option<FloatTensor<B>>,
    rows: usize,
    width: usize,
}

impl<B: Backend> Rows<B> {
    fn new(d: &Dims, width: usize) -> Self {
        Self {
            all: None,
            rows: d.rows(),
            width,
        }
    }

    fn write(&mut self, range: Range<usize>, value: FloatTensor<B>) {
        self.all = Some(if range.len() == self.rows {
            value
        } else {
            let all = self
                .all
                .take()
                .unwrap_or_else(|| zeros::<B>(Shape::new([self.rows, self.width]), &value));
            B::float_slice_assign(all, &[range.into()], value)
        });
    }

    fn finish(self, d: &Dims) -> Option<FloatTensor<B>> {
        let shape = Shape::new([d.batch, d.seq, self.width]);
        self.all.map(|all| B::float_reshape(all, shape))
    }
}

/// The forward pass in `chunks`: the output, and each chunk's tensors for the backward pass of
/// the inputs `keep` says are wanted (none without it).
fn forward<B: Backend, K: Kernels<B>>(
    x: FloatTensor<B>,
    weights: &[FloatTensor<B>; 4],
    d: &Dims,
    chunks: Chunks,
    keep: Option<[bool; 5]>,
) -> (FloatTensor<B>, Vec<Chunk<B>>) {
    if d.empty() {
        let output = zeros::<B>(Shape::new([d.batch, d.seq, d.outputs]), &x);
        return (output, Vec::new());
    }
    let [q_weight, k_weight, v_weight, out_weight] = weights;
    let x = d.flat::<B>(x);
    let mut output = Rows::<B>::new(d, d.outputs);
    let mut kept = Vec::new();
    for sequences in d.chunks(chunks) {
        let rows = d.rows_of(&sequences);
        let x_rows = rows_of::<B>(&x, rows.clone());
        let (attention, heads) = chunk_attention::<B, K>(x_rows, [q_weight, k_weight, v_weight], d);
        output.write(rows, linear::<B, K>(heads.clone(), out_weight.clone()));
        if let Some(wanted) = keep {
            let inner = Dims::inner_wanted(wanted);
            kept.push(Chunk {
                attention: inner.then_some(attention),
                output: (wanted[4] && !inner).then_some(heads),
            });
        }
    }
    (output.finish(d).expect("a chunk at least"), kept)
}

/// The gradients of the five float inputs (`None` where not wanted), in the chunks of the
/// forward pass, from `x` (when kept or rebuilt: the projections' weight gradients read it),
/// the weights and the incoming gradient `grad`.
///
/// With the chunks' tensors `kept`, each phase runs over every chunk before the next (the
/// output projection's, the attention's, then the projections'), so that what a phase reads
/// is dropped as its gradients are formed, as Burn's graph drops a matmul's operands. Without
/// (under gradient checkpointing), each chunk is rebuilt from `x` and goes through every phase
/// before the next chunk. Each gradient is formed by the same operations in the same order
/// either way, so with the same bits.
#[allow(clippy::too_many_arguments)] // The op's inputs, what was kept, the gradient, what is wanted.
fn backward<B: Backend, K: Kernels<B>>(
    x: Option<FloatTensor<B>>,
    weights: &[FloatTensor<B>; 4],
    d: &Dims,
    chunks: Chunks,
    kept: Option<Vec<Chunk<B>>>,
    grad: FloatTensor<B>,
    wanted: [bool; 5],
) -> [Option<FloatTensor<B>>; 5] {
    if d.empty() {
        let shapes = [Shape::new([d.batch, d.seq, d.features])]
            .into_iter()
            .chain(weights.iter().map(|w| w.shape()));
        let mut out = [const { None }; 5];
        for ((slot, shape), want) in out.iter_mut().zip(shapes).zip(wanted) {
            *slot = want.then(|| zeros::<B>(shape, &grad));
        }
        return out;
    }
    let ranges: Vec<Range<usize>> = d.chunks(chunks).map(|s| d.rows_of(&s)).collect();
    let mut formed = Formed {
        wanted,
        sums: [const { None }; 4],
        d_x: Rows::<B>::new(d, d.features),
    };
    let [q_weight, k_weight, v_weight, out_weight] = weights;
    let projections = [q_weight, k_weight, v_weight];
    let x = x.map(|x| d.flat::<B>(x));
    let x_rows = |rows: &Range<usize>| x.as_ref().map(|x| rows_of::<B>(x, rows.clone()));
    let grad = d.flat::<B>(grad);
    match kept {
        None => {
            for rows in ranges {
                let x_chunk = x_rows(&rows).expect("x is kept to rebuild the chunks");
                let (attention, heads) = chunk_attention::<B, K>(x_chunk.clone(), projections, d);
                let chunk = Chunk {
                    attention: Some(attention),
                    output: Some(heads),
                };
                let grad_rows = rows_of::<B>(&grad, rows.clone());
                let Some(heads) =
                    output_phase::<B, K>(chunk, grad_rows, out_weight, d, &mut formed)
                else {
                    continue;
                };
                let grads = attention_phase::<B, K>(heads, d);
                let mut d_x = None;
                for (index, (grad, w)) in grads.into_iter().zip(projections).enumerate() {
                    let x = Some(x_chunk.clone());
                    weight_phase::<B, K>(index, grad.clone(), x, &mut formed);
                    if wanted[0] {
                        input_part::<B, K>(&mut d_x, w, grad);
                    }
                }
                formed.write_x(rows, d_x);
            }
        }
        Some(kept) => {
            let heads: Vec<Option<Heads<B>>> = kept
                .into_iter()
                .zip(&ranges)
                .map(|(chunk, rows)| {
                    let grad_rows = rows_of::<B>(&grad, rows.clone());
                    output_phase::<B, K>(chunk, grad_rows, out_weight, d, &mut formed)
                })
                .collect();
            drop(grad);
            let mut grads: Vec<[Option<FloatTensor<B>>; 3]> = heads
                .into_iter()
                .flatten()
                .map(|heads| attention_phase::<B, K>(heads, d).map(Some))
                .collect();
            for (chunk, rows) in grads.iter().zip(&ranges).filter(|_| wanted[0]) {
                let mut d_x = None;
                for (grad, w) in chunk.iter().zip(projections) {
                    input_part::<B, K>(&mut d_x, w, grad.clone().expect("formed"));
                }
                formed.write_x(rows.clone(), d_x);
            }
            // Each weight's gradient over every chunk before the next weight's, so that a
            // projection's gradients are dropped before the next weight's sum is made.
            for index in 0..3 {
                for (chunk, rows) in grads.iter_mut().zip(&ranges) {
                    let grad = chunk[index].take().expect("formed");
                    weight_phase::<B, K>(index, grad, x_rows(rows), &mut formed);
                }
            }
        }
    }
    let [d_q, d_k, d_v, d_out] = formed.sums;
    [formed.d_x.finish(d), d_q, d_k, d_v, d_out]
}

/// [`self_attention`](crate::tensor::self_attention) written with `B`'s primitives: the
/// `composition` that `Cube` and `Remote` run, every row at once.
pub fn self_attention<B: Backend>(
    x: FloatTensor<B>,
    q_weight: FloatTensor<B>,
    k_weight: FloatTensor<B>,
    v_weight: FloatTensor<B>,
    out_weight: FloatTensor<B>,
    heads: usize,
    causal: bool,
) -> FloatTensor<B> {
    let d = Dims::of(&x, &q_weight, &out_weight, heads, causal);
    let weights = [q_weight, k_weight, v_weight, out_weight];
    forward::<B, Burns>(x, &weights, &d, Chunks::Whole, None).0
}

/// `self_attention` with `B`'s own kernels ([`Own`]), in `B`'s chunks: Flex's kernel.
pub(crate) fn self_attention_on<B: BackwardKernels>(
    x: FloatTensor<B>,
    weights: [FloatTensor<B>; 4],
    heads: usize,
    causal: bool,
) -> FloatTensor<B> {
    let d = Dims::of(&x, &weights[0], &weights[3], heads, causal);
    forward::<B, Own>(x, &weights, &d, B::PROJECTION_CHUNKS, None).0
}

#[cfg(feature = "autodiff")]
pub(crate) mod autodiff {
    //! The `Autodiff<B, C>` kernel: the state its backward pass keeps depends on the
    //! checkpointing strategy (see the module above).

    use burn_backend::tensor::FloatTensor;

    use super::{Chunk, Dims, Own, backward, forward};
    use crate::kernels::backward::BackwardKernels;
    use crate::rt::__private::grad::{checkpoints, register_formed};
    use crate::rt::autodiff::checkpoint::base::Checkpointer;
    use crate::rt::autodiff::grads::Gradients;
    use crate::rt::autodiff::ops::{Backward, Ops, OpsKind};
    use crate::rt::autodiff::{Autodiff, NodeId};
    use crate::rt::{Backend, CheckpointStrategy};

    /// What the backward pass keeps: the weights, `x` when a projection's weight gradient is
    /// wanted, and each chunk's tensors for what is wanted; or (under gradient checkpointing)
    /// the five inputs' node ids.
    #[derive(Clone, Debug)]
    enum Kept<B: Backend> {
        Tensors {
            x: Option<FloatTensor<B>>,
            weights: [FloatTensor<B>; 4],
            chunks: Vec<Chunk<B>>,
        },
        Checkpointed([NodeId; 5]),
    }

    #[derive(Clone, Debug)]
    struct State<B: Backend> {
        kept: Kept<B>,
        dims: Dims,
    }

    #[derive(Debug)]
    struct SelfAttentionBackward;

    impl<B: BackwardKernels> Backward<B, 5> for SelfAttentionBackward {
        type State = State<B>;

        fn backward(
            self,
            ops: Ops<Self::State, 5>,
            grads: &mut Gradients,
            checkpointer: &mut Checkpointer,
        ) {
            let grad = grads.consume::<B>(&ops.node);
            let wanted = ops.parents.each_ref().map(Option::is_some);
            let State { kept, dims } = ops.state;
            let (x, weights, chunks) = match kept {
                Kept::Tensors { x, weights, chunks } => (x, weights, Some(chunks)),
                Kept::Checkpointed(ids) => {
                    let [x, weights @ ..] =
                        ids.map(|id| checkpointer.retrieve_node_output::<FloatTensor<B>>(id));
                    (Some(x), weights, None)
                }
            };
            let chunking = B::PROJECTION_CHUNKS;
            let formed = backward::<B, Own>(x, &weights, &dims, chunking, chunks, grad, wanted);
            let parents = ops.parents.map(|p| p.map(|p| p.id));
            register_formed::<B, 5>(parents, formed, grads);
        }
    }

    /// The kernel: see the module.
    pub(crate) fn self_attention<B: BackwardKernels, C: CheckpointStrategy>(
        inputs: [FloatTensor<Autodiff<B, C>>; 5],
        heads: usize,
        causal: bool,
    ) -> FloatTensor<Autodiff<B, C>> {
        let dims = Dims::of(
            inputs[0].primitive(),
            inputs[1].primitive(),
            inputs[4].primitive(),
            heads,
            causal,
        );
        let wanted = inputs.each_ref().map(|t| t.is_tracked());
        let parents = inputs.each_ref().map(|t| t.node());
        let chunking = B::PROJECTION_CHUNKS;
        match SelfAttentionBackward
            .prepare::<C>(parents)
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(mut prep) if checkpoints::<C>() => {
                let ids = inputs.each_ref().map(|t| prep.checkpoint(t));
                let [x, weights @ ..] = inputs.map(|t| t.into_primitive());
                let (output, _) = forward::<B, Own>(x, &weights, &dims, chunking, None);
                let kept = Kept::Checkpointed(ids);
                prep.finish(State { kept, dims }, output)
            }
            OpsKind::Tracked(prep) => {
                let [x, weights @ ..] = inputs.map(|t| t.into_primitive());
                let keep_x = wanted[1..4].contains(&true).then(|| x.clone());
                let (output, chunks) =
                    forward::<B, Own>(x, &weights, &dims, chunking, Some(wanted));
                let kept = Kept::Tensors {
                    x: keep_x,
                    weights,
                    chunks,
                };
                prep.finish(State { kept, dims }, output)
            }
            OpsKind::UnTracked(prep) => {
                let [x, weights @ ..] = inputs.map(|t| t.into_primitive());
                prep.finish(super::self_attention_on::<B>(x, weights, heads, causal))
            }
        }
    }
}

//! The machinery of the fused Flex kernels: how they read their inputs, where they write, and on
//! how many threads.
//!
//! - **Any row stride.** [`Rows`] reads an `f32` tensor row by row (a row is the last
//!   dimension) whenever that dimension is contiguous: dense tensors, and the views a transformer
//!   feeds these ops (a slice of a fused projection along the last dimension, a `swap_dims` of a
//!   sequence-first tensor, a broadcast over leading dimensions).
//! - **In place.** [`update_rows`] writes the output over its target input's own buffer when
//!   that buffer is uniquely owned and dense, as Burn's own float ops do; otherwise into a fresh
//!   buffer that is never zero-filled: each piece starts as a copy of the target's values, made
//!   just before the kernel updates it, so the copy is still in cache.
//! - **AVX2 or AVX-512 where the CPU has it.** Each piece of work runs inside [`vectorized`],
//!   so the kernels' loops over [`math`] use eight lanes on an AVX2 CPU instead of SSE2's four;
//!   a kernel written inside [`simd_fn!`] gets sixteen on an AVX-512 CPU. Picked at run time
//!   ([`isa`]); the results are the same bits on every instruction set.
//! - **Parallel when Flex is.** When Flex runs its own loops on rayon ([`PARALLEL`]), large
//!   tensors are cut into pieces of whole rows that the calling thread and rayon's pool share
//!   on every core, the caller working from the start rather than asleep; small ones stay on
//!   the calling thread ([`Work`] says from what size, per kind of kernel). The pieces depend
//!   on the tensor's size only, so reductions (parameter gradients) add the same partial
//!   sums in the same order with or without threads.
//!
//! For a crate's own Flex kernels (also re-exported as `burn_route::flex`):
//!
//! ```
//! use burn_route_runtime::flex::{Work, tensor, update_rows};
//! use burn_route_runtime::rt::backend::Shape;
//!
//! let x = tensor(vec![1.0, -2.0, 3.0, 0.5], Shape::new([2, 2]));
//! // `x` is uniquely owned and dense: the cubes are written over its own buffer.
//! let cubed = update_rows(x, Work::Light, |_first_row, values| {
//!     values.iter_mut().for_each(|v| *v = *v * *v * *v);
//! })
//! .expect("f32 rows");
//! assert_eq!(cubed.as_slice::<f32>().unwrap(), [1.0, -8.0, 27.0, 0.125]);
//! ```

pub mod math;
mod share;
mod vector;

pub use crate::simd_fn;
pub use vector::{Isa, isa, vectorized};

use std::mem::MaybeUninit;

use burn_backend::{DType, Shape, TensorData, TensorMetadata};
use burn_dispatch::backends::flex::FlexTensor;

/// Whether Flex runs its loops on rayon in this build: burn-flex's `rayon` feature, which the
/// application turns on directly or through feature unification (a default `burn` or
/// `burn-tensor` dependency does). burn-flex exposes no flag for it, but the feature also turns
/// on gemm's `rayon`, which adds the `Rayon` variant to `gemm::Parallelism`: the enum has a size
/// exactly then. A compile-time constant, so the sequential build keeps no parallel code.
pub const PARALLEL: bool = size_of::<gemm::Parallelism>() > 0;

/// How much a kernel computes per element, which decides from what size splitting it across
/// threads pays (below its threshold a fused loop stays on the calling thread). Measured with
/// `benches/ops.rs` on the 2-vCPU machine of BENCHMARKS.md, where a sleeping rayon worker
/// starts on a piece some 45 µs after the call hands it one, and works on inputs the calling
/// thread wrote from the other core's cache (a third to twice as slow per piece as the caller).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// A few arithmetic operations per element (`relu(a + b)`, `alpha * x`, a clamp, a mask):
    /// bound by memory bandwidth. Two threads were 1.36x faster than one at 1M elements
    /// (`add_relu`, 300 µs to 221 µs), the threshold.
    Light,
    /// A reduction and a few operations per element of each row (RMS and layer normalisation,
    /// forward and backward), or a hash per few elements: at 64K elements (25 µs) the call is
    /// over before the helper starts; faster on two threads at 1M; the threshold sits between,
    /// at 512K.
    Moderate,
    /// A transcendental function per element (`exp`, `erf`) or a selection: bound by
    /// arithmetic. From 64K elements, the threshold, two threads were faster (`bias_gelu` 73 µs
    /// to 46 µs, `cross_entropy_logits` 69 µs to 42 µs); at 32K the call is about over when the
    /// helper starts.
    Heavy,
}

impl Work {
    /// Elements from which the loop runs on rayon's pool (when [`PARALLEL`]).
    pub fn parallel_from(self) -> usize {
        match self {
            Self::Light => 1 << 20,
            Self::Moderate => 1 << 19,
            Self::Heavy => 1 << 16,
        }
    }
}

/// Elements of one piece of work (whole rows, at least one): the unit the threads share, and
/// the span of one partial sum in reductions.
const PIECE: usize = 1 << 14;

/// Elements of one block inside a piece: small enough that a block copied into a fresh output
/// is still in L1 when the kernel updates it.
const BLOCK: usize = 1 << 11;

/// The rows of an `f32` tensor whose last dimension is contiguous (stride 1, or a single
/// column), with non-negative strides elsewhere. A dense tensor is one span in row-major order.
#[derive(Clone, Copy, Debug)]
pub struct Rows<'a> {
    data: &'a [f32],
    start: usize,
    width: usize,
    count: usize,
    /// The leading dimensions and their strides, when the layout is not dense.
    lead: Option<(&'a [usize], &'a [isize])>,
}

impl<'a> Rows<'a> {
    /// The rows of `t`, or `None` for another dtype, an empty tensor, or a layout whose last
    /// dimension is strided (a transposed matrix) or broadcast.
    pub fn of(t: &'a FlexTensor) -> Option<Self> {
        if t.dtype() != DType::F32 {
            return None;
        }
        let layout = t.layout();
        let dims = layout.shape().as_slice();
        let strides = layout.strides();
        let (width, lead_dims, lead_strides) = match dims.split_last() {
            Some((&width, lead)) => (width, lead, &strides[..lead.len()]),
            None => (1, &[][..], &[][..]),
        };
        let count: usize = lead_dims.iter().product();
        if width * count == 0 {
            return None;
        }
        let data = t.storage::<f32>();
        let start = layout.start_offset();
        if layout.is_contiguous() {
            return Some(Self {
                data,
                start,
                width,
                count,
                lead: None,
            });
        }
        let last_contiguous = width == 1 || strides.last() == Some(&1);
        if !last_contiguous || lead_strides.iter().any(|&s| s < 0) {
            return None;
        }
        Some(Self {
            data,
            start,
            width,
            count,
            lead: Some((lead_dims, lead_strides)),
        })
    }

    /// Elements per row.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Number of rows.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Row `r` (in row-major order of the leading dimensions).
    #[inline]
    pub fn row(&self, r: usize) -> &'a [f32] {
        let offset = match self.lead {
            None => self.start + r * self.width,
            Some((dims, strides)) => {
                let mut rest = r;
                let mut offset = self.start;
                for (&dim, &stride) in dims.iter().zip(strides).rev() {
                    // Non-negative, checked in `of`.
                    offset += (rest % dim) * stride.unsigned_abs();
                    rest /= dim;
                }
                offset
            }
        };
        &self.data[offset..offset + self.width]
    }

    /// Rows `first..first + rows` as one slice, when the layout is dense.
    #[inline]
    fn span(&self, first: usize, rows: usize) -> Option<&'a [f32]> {
        let start = self.start + first * self.width;
        self.lead
            .is_none()
            .then(|| &self.data[start..start + rows * self.width])
    }

    /// Calls `f(offset, part)` over rows `first..first + len / width`, in as few contiguous
    /// stretches as the layout allows (one when dense); `offset` is where the stretch starts
    /// within those rows.
    #[inline]
    pub fn stretches(&self, first: usize, len: usize, mut f: impl FnMut(usize, &'a [f32])) {
        match self.span(first, len / self.width) {
            Some(part) => f(0, part),
            None => {
                for k in 0..len / self.width {
                    f(k * self.width, self.row(first + k));
                }
            }
        }
    }

    /// [`Self::stretches`] of two tensors with the same rows, side by side.
    #[inline]
    pub fn stretches2(
        &self,
        other: &Rows<'a>,
        first: usize,
        len: usize,
        mut f: impl FnMut(usize, &'a [f32], &'a [f32]),
    ) {
        let rows = len / self.width;
        match (self.span(first, rows), other.span(first, rows)) {
            (Some(a), Some(b)) => f(0, a, b),
            _ => {
                for k in 0..rows {
                    f(k * self.width, self.row(first + k), other.row(first + k));
                }
            }
        }
    }

    /// Calls `f(dst_part, src_part)` over `dst` (rows `first..` of an output with this row
    /// width) and the same rows of `self`, in as few contiguous stretches as the layout allows.
    #[inline]
    pub fn zip(&self, first: usize, dst: &mut [f32], mut f: impl FnMut(&mut [f32], &[f32])) {
        self.stretches(first, dst.len(), |offset, src| {
            f(&mut dst[offset..offset + src.len()], src);
        });
    }

    /// Writes rows `first..` into `dst` (which they fill).
    fn copy_into(&self, first: usize, dst: &mut [MaybeUninit<f32>]) {
        let fill = |d: &mut [MaybeUninit<f32>], s: &[f32]| {
            for (d, s) in d.iter_mut().zip(s) {
                d.write(*s);
            }
        };
        match self.span(first, dst.len() / self.width) {
            Some(src) => fill(dst, src),
            None => {
                for (k, d) in dst.chunks_exact_mut(self.width).enumerate() {
                    fill(d, self.row(first + k));
                }
            }
        }
    }
}

/// The `f32` buffer of `t` when a kernel may overwrite it: uniquely owned, dense, no broadcast
/// (see [`is_writable`]); its elements in row-major order.
pub fn writable(t: &mut FlexTensor) -> Option<&mut [f32]> {
    if t.dtype() != DType::F32 || !t.layout().is_dense_unique_storage() || !t.is_unique() {
        return None;
    }
    let (start, end) = t.layout().contiguous_offsets()?;
    t.try_storage_mut::<f32>().map(|s| &mut s[start..end])
}

/// Whether `t` can take its kernel's output in place (see [`update_rows`]).
pub fn is_writable(t: &FlexTensor) -> bool {
    t.dtype() == DType::F32 && t.layout().is_dense_unique_storage() && t.is_unique()
}

/// Rows per piece and per block, for rows of `width` elements.
fn rows_per(width: usize) -> (usize, usize) {
    ((PIECE / width).max(1), (BLOCK / width).max(1))
}

/// One output of a kernel, or a part of it: over a uniquely owned input's buffer (which holds
/// that input's values), or into fresh memory that each block first fills with a copy of the
/// input's rows.
enum Out<'a> {
    Own(&'a mut [f32]),
    Fresh(&'a mut [MaybeUninit<f32>], Rows<'a>),
}

impl Out<'_> {
    fn len(&self) -> usize {
        match self {
            Self::Own(values) => values.len(),
            Self::Fresh(values, _) => values.len(),
        }
    }

    /// Consecutive parts of `len` elements (the last may be shorter).
    fn split(self, len: usize) -> Vec<Self> {
        match self {
            Self::Own(values) => values.chunks_mut(len).map(Out::Own).collect(),
            Self::Fresh(values, rows) => values
                .chunks_mut(len)
                .map(|part| Out::Fresh(part, rows))
                .collect(),
        }
    }

    /// Elements `range` of this part, whose first row is row `first` of the output, holding
    /// the input's values.
    fn block(&mut self, range: std::ops::Range<usize>, first: usize) -> &mut [f32] {
        match self {
            Self::Own(values) => &mut values[range],
            Self::Fresh(values, rows) => {
                let block = &mut values[range];
                rows.copy_into(first, block);
                // SAFETY: `copy_into` wrote every element of `block`, so it holds initialized
                // `f32`s (a `MaybeUninit<f32>` has the layout of an `f32`).
                unsafe { &mut *(std::ptr::from_mut(block) as *mut [f32]) }
            }
        }
    }
}

/// Runs `work(acc, first_row, blocks)` over the outputs `outs` (each `len` elements, rows of
/// `width`), cut into the same pieces of whole rows, each piece with an accumulator from
/// `init`; returns the accumulators in row order. On rayon's pool when Flex runs on it and the
/// outputs are large, else on this thread. Within a piece, `work` gets blocks (see [`BLOCK`])
/// in order; every element of every output is in exactly one block.
fn run<const K: usize, A: Send>(
    outs: [Out<'_>; K],
    len: usize,
    width: usize,
    work_kind: Work,
    init: impl Fn() -> A + Sync,
    work: impl Fn(&mut A, usize, [&mut [f32]; K]) + Sync,
) -> Vec<A> {
    let (piece_rows, block_rows) = rows_per(width);
    let (piece_len, block_len) = (piece_rows * width, block_rows * width);
    let run_piece_body = |index: usize, mut piece: [Out<'_>; K]| {
        let mut acc = init();
        let first = index * piece_rows;
        let piece_len = piece[0].len();
        for start in (0..piece_len).step_by(block_len) {
            let end = (start + block_len).min(piece_len);
            let row = first + start / width;
            work(
                &mut acc,
                row,
                piece.each_mut().map(|out| out.block(start..end, row)),
            );
        }
        acc
    };
    // (The piece's loops compiled for AVX2 where the CPU has it: see `vectorized`.)
    let run_piece =
        |(index, piece): (usize, [Out<'_>; K])| vectorized(|| run_piece_body(index, piece));
    // One piece: no splitting, no allocation (small tensors are most calls).
    if len <= piece_len {
        return vec![run_piece((0, outs))];
    }
    let mut parts = outs.map(|out| out.split(piece_len).into_iter());
    let pieces: Vec<[Out<'_>; K]> = (0..len.div_ceil(piece_len))
        .map(|_| {
            parts
                .each_mut()
                .map(|part| part.next().expect("every output has len elements"))
        })
        .collect();
    if PARALLEL && len >= work_kind.parallel_from() {
        share::share(pieces, |index, piece| run_piece((index, piece)))
    } else {
        pieces.into_iter().enumerate().map(run_piece).collect()
    }
}

/// `f(a, b)` element-wise over the same rows of `a` and `b` into a fresh contiguous buffer,
/// written once (never zero-filled, no copy of an input first): the output of a binary kernel
/// whose inputs are both shared, such as two slices of one projection.
pub fn zip_fresh(
    a: &Rows<'_>,
    b: &Rows<'_>,
    work: Work,
    f: impl Fn(f32, f32) -> f32 + Sync,
) -> Vec<f32> {
    let len = a.count() * a.width();
    let mut out: Vec<f32> = Vec::with_capacity(len);
    fill_pieces(
        &mut out.spare_capacity_mut()[..len],
        a.width(),
        work,
        |first, part| {
            a.stretches2(b, first, part.len(), |offset, a, b| {
                let part = &mut part[offset..offset + a.len()];
                vectorized(|| {
                    for ((o, a), b) in part.iter_mut().zip(a).zip(b) {
                        o.write(f(*a, *b));
                    }
                });
            });
        },
    );
    // SAFETY: `fill_pieces` hands every element of the first `len` to the closure, and
    // `stretches2` covers each part's rows completely, so every element was written.
    unsafe { out.set_len(len) };
    out
}

/// The outputs of a kernel that updates the values of `targets` (the same shape, each `f32`
/// with a contiguous last dimension) row by row: `update(acc, first_row, blocks)` gets the same
/// whole rows of each, holding that target's values, and overwrites them with its output's.
/// Each output is written over its target's own buffer when that buffer is uniquely owned and
/// dense, else into a fresh contiguous buffer (never zero-filled). Also returns the
/// accumulators (one per piece of rows), in row order.
///
/// # Errors
///
/// Gives the targets back when one has no [`Rows`] (another dtype, a strided last dimension,
/// empty) or their shapes differ: the caller composes Flex's own ops instead.
pub fn update_many<const K: usize, A: Send>(
    mut targets: [FlexTensor; K],
    work: Work,
    init: impl Fn() -> A + Sync,
    update: impl Fn(&mut A, usize, [&mut [f32]; K]) + Sync,
) -> Result<([FlexTensor; K], Vec<A>), [FlexTensor; K]> {
    let shape = targets[0].shape();
    let fits = |t: &FlexTensor| Rows::of(t).is_some() && *t.layout().shape() == shape;
    if !targets.iter().all(fits) {
        return Err(targets);
    }
    let width = Rows::of(&targets[0]).expect("checked above").width();
    let len = shape.num_elements();
    let own = targets.each_ref().map(is_writable);
    let mut fresh: [Vec<f32>; K] = own.map(|own| {
        if own {
            Vec::new()
        } else {
            Vec::with_capacity(len)
        }
    });
    let accs = {
        let mut buffers = fresh.each_mut().into_iter();
        let outs = targets.each_mut().map(|target| {
            let buffer = buffers.next().expect("one buffer per target");
            if is_writable(target) {
                Out::Own(writable(target).expect("checked by is_writable"))
            } else {
                let rows = Rows::of(target).expect("checked above");
                Out::Fresh(&mut buffer.spare_capacity_mut()[..len], rows)
            }
        });
        run(outs, len, width, work, init, update)
    };
    let mut buffers = fresh.into_iter().zip(own);
    let outputs = targets.map(|target| {
        let (mut values, own) = buffers.next().expect("one buffer per target");
        if own {
            return target;
        }
        // SAFETY: `run` handed every element of the first `len` of this buffer (its capacity)
        // to `Out::block`, which wrote it.
        unsafe { values.set_len(len) };
        tensor(values, shape.clone())
    });
    Ok((outputs, accs))
}

/// [`update_many`] for one target, with a per-piece accumulator.
///
/// # Errors
///
/// Gives `target` back when it has no [`Rows`].
pub fn update_rows_with<A: Send>(
    target: FlexTensor,
    work: Work,
    init: impl Fn() -> A + Sync,
    update: impl Fn(&mut A, usize, &mut [f32]) + Sync,
) -> Result<(FlexTensor, Vec<A>), FlexTensor> {
    update_many([target], work, init, |acc, first, [rows]| {
        update(acc, first, rows)
    })
    .map(|([out], accs)| (out, accs))
    .map_err(|[target]| target)
}

/// The output of a kernel that updates `target`'s values row by row: `update(first_row, rows)`
/// gets consecutive whole rows that hold `target`'s values and overwrites them with the
/// output's. Written over `target`'s own buffer when it is uniquely owned and dense; else into a
/// fresh contiguous buffer (never zero-filled). In parallel when Flex is and the tensor is
/// large.
///
/// # Errors
///
/// Gives `target` back when it has no [`Rows`]: the caller composes Flex's own ops instead.
pub fn update_rows(
    target: FlexTensor,
    work: Work,
    update: impl Fn(usize, &mut [f32]) + Sync,
) -> Result<FlexTensor, FlexTensor> {
    update_rows_with(target, work, || (), |(), first, rows| update(first, rows)).map(|(t, _)| t)
}

/// `fill(first_row, part)` over `buf` (rows of `width` elements) cut into pieces of whole rows,
/// in parallel like [`update_rows`] (for outputs of another element type, such as a mask).
pub fn fill_pieces<T: Send>(
    buf: &mut [T],
    width: usize,
    work: Work,
    fill: impl Fn(usize, &mut [T]) + Sync,
) {
    let (piece_rows, _) = rows_per(width.max(1));
    let piece = piece_rows * width.max(1);
    if PARALLEL && buf.len() >= work.parallel_from() {
        let parts: Vec<&mut [T]> = buf.chunks_mut(piece).collect();
        share::share(parts, |i, part| vectorized(|| fill(i * piece_rows, part)));
    } else {
        buf.chunks_mut(piece)
            .enumerate()
            .for_each(|(i, part)| vectorized(|| fill(i * piece_rows, part)));
    }
}

/// `f(first_row, rows)` over `count` rows of `width`, returning what each piece gives, in
/// order (for per-row reductions whose output is small: losses, indices).
pub fn map_pieces<R: Send>(
    count: usize,
    width: usize,
    work: Work,
    f: impl Fn(usize, usize) -> R + Sync,
) -> Vec<R> {
    let (piece_rows, _) = rows_per(width.max(1));
    let pieces = count.div_ceil(piece_rows);
    let run = |i: usize| {
        let first = i * piece_rows;
        vectorized(|| f(first, piece_rows.min(count - first)))
    };
    if PARALLEL && count * width >= work.parallel_from() {
        share::share((0..pieces).collect(), |_, i| run(i))
    } else {
        (0..pieces).map(run).collect()
    }
}

/// `f(range)` for contiguous ranges that cover `0..len`, in order: one range per thread of
/// rayon's pool (the calling thread takes one) when Flex runs on rayon ([`PARALLEL`]) and
/// `len × cost` (the elements the work touches) reaches `work`'s threshold; else `f(0..len)` on
/// the calling thread. For a kernel that splits a computation of its own, such as a matrix
/// product by blocks of its output.
pub fn split<R: Send>(
    len: usize,
    cost: usize,
    work: Work,
    f: impl Fn(std::ops::Range<usize>) -> R + Sync,
) -> Vec<R> {
    let parts = rayon::current_num_threads().min(len);
    if !PARALLEL || parts < 2 || len.saturating_mul(cost) < work.parallel_from() {
        return vec![f(0..len)];
    }
    let ranges: Vec<_> = (0..parts)
        .map(|i| len * i / parts..len * (i + 1) / parts)
        .collect();
    share::share(ranges, |_, range| f(range))
}

/// Lanes of the vectorisable reductions: eight `f32` accumulators fill one AVX register or two
/// SSE ones.
const LANES: usize = 8;

/// `sum(f(x))` over `xs`, in eight independent partial sums: a single running `f32` sum is
/// one long dependency chain the compiler may not reorder (float addition is not associative),
/// so it runs at one addition per few cycles; lanes let it vectorise. The order of additions is
/// fixed, so the result is the same on every run.
#[inline(always)]
pub fn sum_by(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0.0_f32; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (lane, x) in lanes.iter_mut().zip(chunk) {
            *lane += f(*x);
        }
    }
    let tail: f32 = chunks.remainder().iter().map(|x| f(*x)).sum();
    lanes.iter().sum::<f32>() + tail
}

/// `sum(f(a, b))` over `a` and `b` side by side, in lanes like [`sum_by`].
#[inline(always)]
pub fn sum_by2(a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32) -> f32 {
    let mut lanes = [0.0_f32; LANES];
    let (mut ca, mut cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    for (x, y) in (&mut ca).zip(&mut cb) {
        for ((lane, x), y) in lanes.iter_mut().zip(x).zip(y) {
            *lane += f(*x, *y);
        }
    }
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| f(*x, *y))
        .sum();
    lanes.iter().sum::<f32>() + tail
}

/// `sum(f(a, b, c))` over three slices side by side, in lanes like [`sum_by`].
#[inline(always)]
pub fn sum_by3(a: &[f32], b: &[f32], c: &[f32], f: impl Fn(f32, f32, f32) -> f32) -> f32 {
    let mut lanes = [0.0_f32; LANES];
    let (mut ca, mut cb, mut cc) = (
        a.chunks_exact(LANES),
        b.chunks_exact(LANES),
        c.chunks_exact(LANES),
    );
    for ((x, y), z) in (&mut ca).zip(&mut cb).zip(&mut cc) {
        for (((lane, x), y), z) in lanes.iter_mut().zip(x).zip(y).zip(z) {
            *lane += f(*x, *y, *z);
        }
    }
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .zip(cc.remainder())
        .map(|((x, y), z)| f(*x, *y, *z))
        .sum();
    lanes.iter().sum::<f32>() + tail
}

/// The largest number of `xs` (`-inf` when empty or all NaN), in lanes like [`sum_by`].
#[inline(always)]
pub fn max_of(xs: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (lane, x) in lanes.iter_mut().zip(chunk) {
            // Not `f32::max`, whose NaN rule does not vectorise; a NaN never wins this compare.
            *lane = if *x > *lane { *x } else { *lane };
        }
    }
    let tail = chunks
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |m, x| if *x > m { *x } else { m });
    lanes.iter().fold(tail, |m, x| if *x > m { *x } else { m })
}

/// `v` when `keep`, else `0.0`, without a branch: a data-dependent branch (a dropout mask, a
/// relu's sign) mispredicts often enough to cost several times a memory pass, and a select on
/// the bits vectorises.
#[inline]
pub fn keep_if(v: f32, keep: bool) -> f32 {
    f32::from_bits(v.to_bits() & u32::from(keep).wrapping_neg())
}

/// A contiguous `f32` Flex tensor from `values`.
pub fn tensor(values: Vec<f32>, shape: Shape) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, shape))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flex(values: Vec<f32>, shape: &[usize]) -> FlexTensor {
        tensor(values, Shape::from(shape.to_vec()))
    }

    /// The detection follows burn-flex's `rayon` feature, which a default `burn-tensor`
    /// dependency turns on, as `--features burn-dispatch/rayon` does. CI says which build it
    /// asked for with `BURN_ROUTE_EXPECT_PARALLEL` (`1` or `0`); unset, nothing is asserted.
    #[test]
    fn parallel_exactly_when_flex_runs_on_rayon() {
        let expected = match std::env::var("BURN_ROUTE_EXPECT_PARALLEL").as_deref() {
            Ok("1") => true,
            Ok("0") => false,
            _ => return,
        };
        assert_eq!(
            PARALLEL, expected,
            "BURN_ROUTE_EXPECT_PARALLEL disagrees with the build"
        );
    }

    #[test]
    fn rows_of_a_sliced_and_a_swapped_view() {
        // [2, 3, 4] with values 0..24.
        let t = flex((0..24).map(|v| v as f32).collect(), &[2, 3, 4]);
        // The last two of every row: strides [12, 4, 1], offset 2.
        let sliced = t.narrow(2, 2, 2);
        let rows = Rows::of(&sliced).expect("last dimension contiguous");
        assert_eq!((rows.width(), rows.count()), (2, 6));
        assert_eq!(rows.row(0), [2.0, 3.0]);
        assert_eq!(rows.row(4), [18.0, 19.0]);
        // Swap the leading dimensions: [3, 2, 4], strides [4, 12, 1].
        let swapped = t.transpose(0, 1);
        let rows = Rows::of(&swapped).expect("last dimension contiguous");
        assert_eq!(rows.row(1), [12.0, 13.0, 14.0, 15.0]);
        assert_eq!(rows.row(2), [4.0, 5.0, 6.0, 7.0]);
        // A transposed matrix has a strided last dimension.
        assert!(Rows::of(&t.transpose(1, 2)).is_none());
    }

    #[test]
    fn updates_in_place_when_unique_and_into_a_copy_when_shared() {
        let t = flex(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]);
        let shared = t.clone();
        let out = update_rows(t, Work::Light, |_, rows| {
            rows.iter_mut().for_each(|v| *v *= 10.0)
        })
        .unwrap();
        assert_eq!(out.as_slice::<f32>().unwrap(), [10.0, 20.0, 30.0, 40.0]);
        assert_eq!(shared.as_slice::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
        drop(shared);
        let ptr = out.storage::<f32>().as_ptr();
        let again = update_rows(out, Work::Light, |_, rows| {
            rows.iter_mut().for_each(|v| *v += 1.0)
        })
        .unwrap();
        assert_eq!(
            again.storage::<f32>().as_ptr(),
            ptr,
            "unique: the same buffer"
        );
        assert_eq!(again.as_slice::<f32>().unwrap(), [11.0, 21.0, 31.0, 41.0]);
    }

    #[test]
    fn blocks_cover_every_row_once_in_order_for_each_output() {
        let width = 3;
        let count = PIECE; // several pieces of several blocks
        let n = count * width;
        #[allow(clippy::cast_precision_loss)]
        let values: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let owned = flex(values.clone(), &[count, width]);
        let source = flex(values, &[count, width]);
        let shared = source.clone(); // not unique: its output goes to a fresh buffer
        let ([a, b], firsts) = update_many(
            [owned, shared],
            Work::Heavy,
            Vec::new,
            |seen, first, [a, b]| {
                seen.push(first);
                let rows = a.chunks_exact_mut(width).zip(b.chunks_exact_mut(width));
                for (k, (a, b)) in rows.enumerate() {
                    #[allow(clippy::cast_precision_loss)]
                    let row = (first + k) as f32;
                    assert_eq!(a[0], row * width as f32, "the target's values");
                    assert_eq!(b[0], row * width as f32, "the target's values");
                    a.iter_mut().for_each(|v| *v = row);
                    b.iter_mut().for_each(|v| *v = -row);
                }
            },
        )
        .unwrap();
        #[allow(clippy::cast_precision_loss)]
        let expected = |sign: f32| {
            (0..n)
                .map(|i| sign * (i / width) as f32)
                .collect::<Vec<_>>()
        };
        assert_eq!(a.as_slice::<f32>().unwrap(), expected(1.0));
        assert_eq!(b.as_slice::<f32>().unwrap(), expected(-1.0));
        #[allow(clippy::cast_precision_loss)]
        let last = (n - 1) as f32;
        assert_eq!(
            source.as_slice::<f32>().unwrap()[n - 1],
            last,
            "shared: untouched"
        );
        let flat: Vec<usize> = firsts.into_iter().flatten().collect();
        assert!(flat.windows(2).all(|w| w[0] < w[1]));
    }
}

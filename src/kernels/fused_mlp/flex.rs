//! `rms_norm_swiglu_mlp` on Flex's `f32` rows (any row stride): the chunks of [`super`], each
//! product written by `gemm` straight into its place. A chunk's norm, projections and product
//! live in scratch buffers made once for the call (the projections in buffers of every row when
//! the forward pass keeps them for the backward pass), each chunk's output (or `dx`) is written into
//! its rows of the result, and the weights' gradients are summed in place across the chunks
//! (`accumulate`), where the composition of Flex's ops made a tensor per step of each chunk and
//! added the chunks' weight gradients pairwise. The arithmetic is
//! [`arith`](super::super::arith)'s, as in the unfused kernels.

use burn_backend::{Shape, TensorMetadata};
use burn_dispatch::backends::Flex;
use burn_dispatch::backends::flex::FlexTensor;

use super::super::arith::{rms_norm_grad_row, rms_norm_row, swiglu, swiglu_grads};
use super::super::fused_linear::Chunks;
use super::super::gemm::{Operand, Out, dense, operand, product};
use super::super::half::{half_dtype, narrow, widen};
use super::Projections;
use crate::flex::{Rows, simd_fn, tensor};

/// The op's `f32` inputs, read in place: `x` as rows of `width`, the norm's weight, and the
/// three projections as `gemm` operands (a transposed weight is read as it is).
pub(crate) struct Inputs<'a> {
    x: Rows<'a>,
    /// `x`'s values when it is dense (its chunks are then read in place).
    dense_x: Option<&'a [f32]>,
    norm: &'a [f32],
    gate: Operand,
    up: Operand,
    down: Operand,
    /// Rows, `x`'s width, the hidden width, the outputs, the rows of a chunk.
    dims: [usize; 5],
    x_shape: Shape,
    eps: f32,
}

impl<'a> Inputs<'a> {
    /// The inputs when each is an `f32` tensor Flex can read in place (`x` by rows of any
    /// stride) and the shapes chain (`check_weights` has panicked on the rest already); `None`
    /// sends the caller to the composition (other dtypes, an `x` whose last dimension is
    /// strided, no rows).
    pub(crate) fn of(
        x: &'a FlexTensor,
        norm_weight: &'a FlexTensor,
        [gate, up, down]: [&FlexTensor; 3],
        eps: f32,
    ) -> Option<Self> {
        let x_shape = x.shape();
        let width = x_shape.last().copied()?;
        let (rows_of_x, norm) = (Rows::of(x)?, dense(norm_weight)?);
        let (gate_shape, down_shape) = (gate.shape(), down.shape());
        let hidden = gate_shape.get(1).copied()?;
        let outputs = down_shape.get(1).copied()?;
        let chained = width > 0
            && norm.len() == width
            && gate_shape.as_slice() == [width, hidden]
            && up.shape() == gate_shape
            && down_shape.as_slice() == [hidden, outputs]
            && rows_of_x.width() == width;
        if !chained {
            return None;
        }
        let rows = rows_of_x.count();
        let step = Chunks::Small.rows(rows, hidden.max(width));
        Some(Self {
            x: rows_of_x,
            dense_x: dense(x),
            norm,
            gate: operand(gate)?,
            up: operand(up)?,
            down: operand(down)?,
            dims: [rows, width, hidden, outputs, step],
            x_shape,
            eps,
        })
    }

    /// `x`'s `n` rows from `first`: in place when `x` is dense, else copied into `scratch`.
    fn x_rows<'s>(&'s self, first: usize, n: usize, scratch: &'s mut Vec<f32>) -> &'s [f32] {
        let width = self.dims[1];
        if let Some(values) = self.dense_x {
            return &values[first * width..(first + n) * width];
        }
        scratch.resize(n * width, 0.0);
        for (i, row) in scratch.chunks_exact_mut(width).enumerate() {
            row.copy_from_slice(self.x.row(first + i));
        }
        scratch
    }

    /// `h = rms_norm(x)` of a chunk's rows `x`, `gate = h @ gate_weight` and `up = h @
    /// up_weight`, into the first rows of the three scratch buffers (rows of `width`, `hidden`,
    /// `hidden`).
    fn project(&self, x: &[f32], [h, gate, up]: [&mut [f32]; 3]) {
        let [_, width, hidden, ..] = self.dims;
        let n = x.len() / width;
        norm_rows(&mut h[..n * width], x, self.norm, self.eps);
        let h = Operand::rows(&*h, width);
        // SAFETY: `gate` and `up` hold at least n × hidden values, `h` n × width, and the
        // weights width × hidden (checked in `of`); nothing else touches the buffers meanwhile.
        unsafe {
            product(
                (n, hidden, width),
                Out::rows(gate, hidden),
                false,
                h,
                self.gate,
            );
            product((n, hidden, width), Out::rows(up, hidden), false, h, self.up);
        }
    }

    /// The op's output, `[.., outputs]` in `x`'s shape.
    pub(crate) fn forward(&self) -> FlexTensor {
        self.run(false).0
    }

    /// The op's output and the gate and up projections of every row (`[rows, hidden]`, each
    /// chunk's written by `gemm` into its rows), for [`backward`](Self::backward) to read.
    pub(crate) fn forward_keeping(&self) -> (FlexTensor, [FlexTensor; 2]) {
        let [rows, _, hidden, ..] = self.dims;
        let (out, [gate, up]) = self.run(true);
        let shape = Shape::new([rows, hidden]);
        (out, [tensor(gate, shape.clone()), tensor(up, shape)])
    }

    /// The forward pass: the output, and the projections' buffers (every row's with `keep`,
    /// else scratch).
    fn run(&self, keep: bool) -> (FlexTensor, [Vec<f32>; 2]) {
        let [rows, width, hidden, outputs, step] = self.dims;
        let mut out = vec![0.0_f32; rows * outputs];
        let mut h = vec![0.0_f32; step * width];
        // The projections: a chunk's in scratch buffers, or every row's when they are kept
        // (the gate's product then in a scratch buffer of its own).
        let kept_rows = if keep { rows } else { step };
        let mut gate = vec![0.0_f32; kept_rows * hidden];
        let mut up = vec![0.0_f32; kept_rows * hidden];
        let mut gated = if keep {
            vec![0.0_f32; step * hidden]
        } else {
            Vec::new()
        };
        let mut x_scratch = Vec::new();
        for first in (0..rows).step_by(step) {
            let n = step.min(rows - first);
            let x = self.x_rows(first, n, &mut x_scratch);
            let at = if keep { first * hidden } else { 0 };
            let (g, u) = (&mut gate[at..at + n * hidden], &mut up[at..at + n * hidden]);
            self.project(x, [&mut h[..], &mut *g, &mut *u]);
            let p = if keep {
                swiglu_into(&mut gated[..n * hidden], g, u);
                &gated[..n * hidden]
            } else {
                swiglu_rows(g, u);
                &*g
            };
            let rows_out = Out::rows(&mut out[first * outputs..], outputs);
            // SAFETY: `out`'s rows `first..first + n` hold n × outputs values, the product n ×
            // hidden and `down_weight` hidden × outputs.
            unsafe {
                product(
                    (n, outputs, hidden),
                    rows_out,
                    false,
                    Operand::rows(p, hidden),
                    self.down,
                );
            }
        }
        let mut shape = self.x_shape.clone();
        let last = shape.num_dims() - 1;
        shape[last] = outputs;
        (tensor(out, shape), [gate, up])
    }

    /// `[dx, dnorm_weight, dgate_weight, dup_weight, ddown_weight]` for the wanted ones, from
    /// `grad` (the output's gradient, contiguous `f32`; `None` otherwise): per chunk, the norm
    /// and both projections are rebuilt, and the weights' gradients summed in place. `kept`, the
    /// projections [`forward_keeping`](Self::forward_keeping) kept (`[rows, hidden]` each), are read instead of
    /// rebuilt, and overwritten with their gradients.
    pub(crate) fn backward(
        &self,
        grad: &FlexTensor,
        [want_x, want_norm, want_gate, want_up, want_down]: [bool; 5],
        mut kept: Option<[&mut [f32]; 2]>,
    ) -> Option<[Option<FlexTensor>; 5]> {
        let [rows, width, hidden, outputs, step] = self.dims;
        let grad = dense(grad).filter(|g| g.len() == rows * outputs)?;
        if kept
            .as_ref()
            .is_some_and(|k| k.iter().any(|p| p.len() != rows * hidden))
        {
            return None;
        }
        let want_input = want_x || want_norm;
        let zeros = |want: bool, len: usize| want.then(|| vec![0.0_f32; len]);
        let mut dx = zeros(want_x, rows * width);
        let mut d_norm = zeros(want_norm, width);
        let mut d_gate = zeros(want_gate, width * hidden);
        let mut d_up = zeros(want_up, width * hidden);
        let mut d_down = zeros(want_down, hidden * outputs);
        let mut h = vec![0.0_f32; step * width];
        // A chunk's projections, when they are rebuilt.
        let scratch = |len: usize| {
            if kept.is_some() {
                Vec::new()
            } else {
                vec![0.0_f32; len]
            }
        };
        let (mut gate, mut up) = (scratch(step * hidden), scratch(step * hidden));
        // The gate's product (for `ddown_weight`) and its gradient.
        let want_grads = want_input || want_gate || want_up;
        let mut product_rows = zeros(want_down, step * hidden).unwrap_or_default();
        let mut d_product = zeros(want_grads, step * hidden).unwrap_or_default();
        // The gradient of the norm's output, when `dx` is not wanted (else it is formed in
        // `dx`'s rows).
        let mut d_h_rows = zeros(want_norm && !want_x, step * width).unwrap_or_default();
        let mut x_scratch = Vec::new();
        for first in (0..rows).step_by(step) {
            let n = step.min(rows - first);
            let accumulate = first > 0;
            let x = self.x_rows(first, n, &mut x_scratch);
            let (g, u) = match kept.as_mut() {
                Some([g, u]) => {
                    if want_gate || want_up {
                        norm_rows(&mut h[..n * width], x, self.norm, self.eps);
                    }
                    let at = first * hidden..(first + n) * hidden;
                    (&mut g[at.clone()], &mut u[at])
                }
                None => {
                    self.project(x, [&mut h[..], &mut gate[..], &mut up[..]]);
                    (&mut gate[..n * hidden], &mut up[..n * hidden])
                }
            };
            let dy = Operand::rows(&grad[first * outputs..], outputs);
            if want_grads {
                let dp = &mut d_product[..n * hidden];
                // SAFETY: dp holds n × hidden values; dy is n × outputs, down_weight^T outputs ×
                // hidden.
                unsafe {
                    product(
                        (n, hidden, outputs),
                        Out::rows(dp, hidden),
                        false,
                        dy,
                        self.down.t(),
                    );
                }
                if want_down {
                    swiglu_and_grads(&mut product_rows[..n * hidden], g, u, dp);
                } else {
                    swiglu_grads_rows(g, u, dp);
                }
            } else if want_down {
                swiglu_into(&mut product_rows[..n * hidden], g, u);
            }
            if let Some(d_down) = d_down.as_mut() {
                // SAFETY: d_down holds hidden × outputs values; p^T is hidden × n, dy n ×
                // outputs.
                unsafe {
                    product(
                        (hidden, outputs, n),
                        Out::rows(d_down, outputs),
                        accumulate,
                        Operand::rows(&product_rows[..n * hidden], hidden).t(),
                        dy,
                    );
                }
            }
            if !want_grads {
                continue;
            }
            let (g, u) = (Operand::rows(g, hidden), Operand::rows(u, hidden));
            let h_t = Operand::rows(&h, width).t();
            for (sum, d) in [(&mut d_gate, g), (&mut d_up, u)] {
                if let Some(sum) = sum.as_mut() {
                    // SAFETY: the sum holds width × hidden values; h^T is width × n, d n ×
                    // hidden.
                    unsafe {
                        product(
                            (width, hidden, n),
                            Out::rows(sum, hidden),
                            accumulate,
                            h_t,
                            d,
                        );
                    }
                }
            }
            if !want_input {
                continue;
            }
            let d_h = match dx.as_mut() {
                Some(dx) => &mut dx[first * width..(first + n) * width],
                None => &mut d_h_rows[..n * width],
            };
            let out = Out::rows(d_h, width);
            // SAFETY: d_h holds n × width values; gate and up (now their gradients) n × hidden,
            // the weights' transposes hidden × width.
            unsafe {
                product((n, width, hidden), out, false, g, self.gate.t());
                product((n, width, hidden), out, true, u, self.up.t());
            }
            norm_grad_rows(d_h, x, self.norm, self.eps, d_norm.as_deref_mut());
        }
        let to_tensor = |values: Option<Vec<f32>>, shape: Shape| values.map(|v| tensor(v, shape));
        Some([
            to_tensor(dx, self.x_shape.clone()),
            to_tensor(d_norm, Shape::new([width])),
            to_tensor(d_gate, Shape::new([width, hidden])),
            to_tensor(d_up, Shape::new([width, hidden])),
            to_tensor(d_down, Shape::new([hidden, outputs])),
        ])
    }
}

/// `rms_norm_swiglu_mlp` on Flex, with the gate and up projections when `keep` (for the
/// `Autodiff<B, C>` kernel without checkpointing): this kernel for `f32` inputs it can read in
/// place, for `f16` and `bf16` on widened copies (the output rounded once back, the
/// projections kept in `f32`, as the backward pass would rebuild them), else the chunked
/// composition of Flex's kernels.
pub(crate) fn on_flex(
    x: FlexTensor,
    norm_weight: FlexTensor,
    [gate_weight, up_weight, down_weight]: [FlexTensor; 3],
    eps: f32,
    keep: bool,
) -> (FlexTensor, Option<Projections<Flex>>) {
    super::check_weights(&x, &gate_weight, &down_weight);
    let inputs = [x, norm_weight, gate_weight, up_weight, down_weight];
    if let Some(dtype) = half_dtype(&inputs.each_ref()) {
        let [x, n, g, u, d] = inputs.map(widen);
        let (out, kept) = on_flex(x, n, [g, u, d], eps, keep);
        return (narrow(out, dtype), kept);
    }
    let [x, norm_weight, gate_weight, up_weight, down_weight] = inputs;
    let weights = [&gate_weight, &up_weight, &down_weight];
    if let Some(inputs) = Inputs::of(&x, &norm_weight, weights, eps) {
        if !keep {
            return (inputs.forward(), None);
        }
        let (out, [gate, up]) = inputs.forward_keeping();
        return (out, Some(Projections { gate, up }));
    }
    let weights = [gate_weight, up_weight, down_weight];
    if keep {
        let (out, kept) = super::rms_norm_swiglu_mlp_keeping_on::<Flex>(
            x,
            norm_weight,
            weights,
            eps,
            Chunks::Small,
        );
        return (out, Some(kept));
    }
    let out = super::rms_norm_swiglu_mlp_on::<Flex>(x, norm_weight, weights, eps, Chunks::Small);
    (out, None)
}

// The row loops, each compiled per instruction set (`simd_fn!`; the same bits on each).

simd_fn! {
    /// `h = rms_norm(x)` row by row (rows of the weight's width).
    fn norm_rows(h: &mut [f32], x: &[f32], weight: &[f32], eps: f32) {
        h.copy_from_slice(x);
        for row in h.chunks_exact_mut(weight.len()) {
            rms_norm_row(row, weight, eps);
        }
    }
}

simd_fn! {
    /// `gate = swiglu(gate, up)`, in place.
    fn swiglu_rows(gate: &mut [f32], up: &[f32]) {
        for (g, u) in gate.iter_mut().zip(up) {
            *g = swiglu(*g, *u);
        }
    }
}

simd_fn! {
    /// `out = swiglu(gate, up)`.
    fn swiglu_into(out: &mut [f32], gate: &[f32], up: &[f32]) {
        for ((o, g), u) in out.iter_mut().zip(gate).zip(up) {
            *o = swiglu(*g, *u);
        }
    }
}

simd_fn! {
    /// `out = swiglu(gate, up)`, then `swiglu`'s gradients for the incoming `grad`: `dgate` over
    /// `gate`, `dup` over `up` (one sigmoid for both).
    fn swiglu_and_grads(out: &mut [f32], gate: &mut [f32], up: &mut [f32], grad: &[f32]) {
        for (((o, g), u), d) in out.iter_mut().zip(gate.iter_mut()).zip(up.iter_mut()).zip(grad) {
            *o = swiglu(*g, *u);
            [*g, *u] = swiglu_grads(*g, *u, *d);
        }
    }
}

simd_fn! {
    /// `swiglu`'s gradients for the incoming `grad`: `dgate` over `gate`, `dup` over `up`.
    fn swiglu_grads_rows(gate: &mut [f32], up: &mut [f32], grad: &[f32]) {
        for ((g, u), d) in gate.iter_mut().zip(up.iter_mut()).zip(grad) {
            [*g, *u] = swiglu_grads(*g, *u, *d);
        }
    }
}

simd_fn! {
    /// The norm's backward pass row by row: `grad` becomes the gradient of `x` in place, and
    /// the weight's gradient, when given, gets each row's share added.
    fn norm_grad_rows(
        grad: &mut [f32],
        x: &[f32],
        weight: &[f32],
        eps: f32,
        weight_grad: Option<&mut [f32]>,
    ) {
        let mut weight_grad = weight_grad;
        let width = weight.len();
        for (d, x) in grad.chunks_exact_mut(width).zip(x.chunks_exact(width)) {
            rms_norm_grad_row(d, x, weight, eps, weight_grad.as_deref_mut());
        }
    }
}

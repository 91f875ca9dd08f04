#![cfg(feature = "autodiff")]
//! `rms_norm_swiglu_mlp` through `Device::flex()`: values against what a Burn user writes
//! (`RmsNorm`'s composition, `module::linear`, `silu(gate) * up`, `module::linear`), gradients of
//! every input against central finite differences of `sum(w * mlp(...))` (in `f64`, where the op
//! runs its composition) and against Burn's autodiff of that composition, at a size whose rows
//! go in several chunks on Flex (the last one short), with some inputs untracked, under gradient
//! checkpointing (the same bits), in half precision, and the weight-shape panics.

use crate::common::{
    Rng, assert_close, assert_only_tracked_gets_its_gradient, finite_difference, panic_message,
    values,
};
use burn_route::rms_norm_swiglu_mlp;
use burn_tensor::activation::silu;
use burn_tensor::module::linear;
use burn_tensor::{DType, Device, FloatDType, Gradients, Tensor, TensorData};

const EPS: f32 = 1e-5;

/// Rows, width, hidden width, outputs.
#[derive(Clone, Copy, Debug)]
struct Dims {
    rows: usize,
    width: usize,
    hidden: usize,
    outputs: usize,
}

/// Small enough for finite differences.
const SMALL: Dims = Dims {
    rows: 6,
    width: 5,
    hidden: 7,
    outputs: 3,
};

/// On Flex a chunk is about 8K hidden-width values: 128 rows of 64, so 300 rows are three
/// chunks, the last one of 44 rows.
const CHUNKED: Dims = Dims {
    rows: 300,
    width: 16,
    hidden: 64,
    outputs: 8,
};

impl Dims {
    /// Each input's shape, in input order: `x`, `norm_weight`, `gate_weight`, `up_weight`,
    /// `down_weight`.
    fn shapes(self) -> [Vec<usize>; 5] {
        let Self {
            rows,
            width,
            hidden,
            outputs,
        } = self;
        [
            vec![rows, width],
            vec![width],
            vec![width, hidden],
            vec![width, hidden],
            vec![hidden, outputs],
        ]
    }

    fn inputs(self, seed: u64) -> Vec<Vec<f32>> {
        let mut rng = Rng::new(seed);
        let shapes = self.shapes();
        shapes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                // A norm weight around 1, the rest around 0.
                let (lo, hi) = if i == 1 { (0.5, 1.5) } else { (-1.0, 1.0) };
                rng.vec(s.iter().product(), lo, hi)
            })
            .collect()
    }

    fn weights(self, seed: u64) -> Vec<f32> {
        Rng::new(seed).vec(self.rows * self.outputs, -1.0, 1.0)
    }
}

/// The inputs on `device` in `dtype`, tracked where `tracked` says.
struct Inputs {
    x: Tensor<2>,
    norm_weight: Tensor<1>,
    gate_weight: Tensor<2>,
    up_weight: Tensor<2>,
    down_weight: Tensor<2>,
}

impl Inputs {
    fn new(
        dims: Dims,
        leaves: &[Vec<f32>],
        device: &Device,
        dtype: FloatDType,
        tracked: &[bool],
    ) -> Self {
        let shapes = dims.shapes();
        let two = |i: usize| {
            let t = Tensor::<2>::from_data(
                TensorData::new(leaves[i].clone(), shapes[i].clone()),
                device,
            )
            .cast(dtype);
            if tracked[i] { t.require_grad() } else { t }
        };
        let norm_weight = Tensor::<1>::from_data(
            TensorData::new(leaves[1].clone(), shapes[1].clone()),
            device,
        )
        .cast(dtype);
        let norm_weight = if tracked[1] {
            norm_weight.require_grad()
        } else {
            norm_weight
        };
        Self {
            x: two(0),
            norm_weight,
            gate_weight: two(2),
            up_weight: two(3),
            down_weight: two(4),
        }
    }

    /// The routed op, or what a Burn user writes.
    fn mlp(&self, routed: bool) -> Tensor<2> {
        let (x, n) = (self.x.clone(), self.norm_weight.clone());
        if routed {
            return rms_norm_swiglu_mlp(
                x,
                n,
                self.gate_weight.clone(),
                self.up_weight.clone(),
                self.down_weight.clone(),
                EPS,
            );
        }
        let inverse = (x.clone().powi_scalar(2).mean_dim(1) + EPS).sqrt().recip();
        let h = x * inverse * n.unsqueeze::<2>();
        let gate = linear(h.clone(), self.gate_weight.clone(), None);
        let up = linear(h, self.up_weight.clone(), None);
        linear(silu(gate) * up, self.down_weight.clone(), None)
    }

    /// Each input's gradient, `None` when it got none.
    fn grads(&self, grads: &Gradients) -> Vec<Option<Vec<f32>>> {
        let two = |t: &Tensor<2>| t.grad(grads).map(|g| values(&g));
        vec![
            two(&self.x),
            self.norm_weight.grad(grads).map(|g| values(&g)),
            two(&self.gate_weight),
            two(&self.up_weight),
            two(&self.down_weight),
        ]
    }
}

/// The values of the op and each input's gradient of `sum(w * mlp(...))`.
fn gradients(
    dims: Dims,
    leaves: &[Vec<f32>],
    w: &[f32],
    tracked: &[bool],
    device: &Device,
    routed: bool,
) -> (Vec<f32>, Vec<Option<Vec<f32>>>) {
    let inputs = Inputs::new(dims, leaves, device, FloatDType::F32, tracked);
    let out = inputs.mlp(routed);
    let weights = Tensor::<2>::from_data(
        TensorData::new(w.to_vec(), [dims.rows, dims.outputs]),
        device,
    );
    let grads = (out.clone() * weights).sum().backward();
    (values(&out), inputs.grads(&grads))
}

/// `sum(w * mlp(...))` in `f64` on the plain device (the op's composition runs there).
fn loss_f64(dims: Dims, leaves: &[Vec<f32>], w: &[f32]) -> f64 {
    let tracked = [false; 5];
    let inputs = Inputs::new(dims, leaves, &Device::flex(), FloatDType::F64, &tracked);
    let out = inputs
        .mlp(true)
        .into_data()
        .convert::<f64>()
        .try_to_vec::<f64>()
        .expect("f64 values");
    out.iter().zip(w).map(|(o, w)| o * f64::from(*w)).sum()
}

#[test]
fn values_and_gradients_match_finite_differences_and_burns_composition() {
    let autodiff = Device::flex().autodiff();
    for (seed, dims) in [(1, SMALL), (2, CHUNKED)] {
        let leaves = dims.inputs(seed);
        let w = dims.weights(seed + 10);
        let all = [true; 5];
        let (out, grads) = gradients(dims, &leaves, &w, &all, &autodiff, true);
        let (out_ref, grads_ref) = gradients(dims, &leaves, &w, &all, &autodiff, false);
        assert_close(&out, &out_ref, 1e-5, &format!("{dims:?}: values"));
        for (i, (g, r)) in grads.iter().zip(&grads_ref).enumerate() {
            let name = format!("{dims:?}: input {i}");
            let (g, r) = (g.as_ref().expect(&name), r.as_ref().expect(&name));
            assert_close(g, r, 1e-4, &format!("{name} against Burn's autodiff"));
            if seed == 1 {
                let fd = finite_difference(
                    |v| {
                        let mut at = leaves.clone();
                        at[i] = v.to_vec();
                        loss_f64(dims, &at, &w)
                    },
                    &leaves[i],
                    1.0 / 128.0,
                );
                assert_close(g, &fd, 1e-3, &format!("{name} against finite differences"));
            }
        }
    }
}

/// `values` of a row-major `[rows, cols]` matrix, transposed.
fn transposed(values: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..cols)
        .flat_map(|c| (0..rows).map(move |r| values[r * cols + c]))
        .collect()
}

/// Flex's kernel reads the weights in place at any strides, and takes `x` of any rank and row
/// stride (a slice along its last dimension); a transposed `x` goes through the composition,
/// and a plain `sum`'s broadcast gradient is made readable first. Each gives the values and
/// gradients of contiguous `[rows, width]` inputs.
#[test]
fn strided_weights_a_strided_or_3d_x_and_a_broadcast_gradient_give_the_same_results() {
    let device = Device::flex().autodiff();
    let dims = CHUNKED;
    let Dims {
        rows,
        width,
        hidden,
        outputs,
    } = dims;
    let leaves = dims.inputs(11);
    let run = |x_layout: usize, weights_transposed: bool, plain_sum: bool| {
        // Tracked leaves as stored; the op's inputs are views of them.
        let leaf = |i: usize, [r, c]: [usize; 2], transpose: bool| {
            let (data, shape) = if transpose {
                (transposed(&leaves[i], r, c), [c, r])
            } else {
                (leaves[i].clone(), [r, c])
            };
            let leaf = Tensor::<2>::from_data(TensorData::new(data, shape), &device).require_grad();
            let view = if transpose {
                leaf.clone().transpose()
            } else {
                leaf.clone()
            };
            (leaf, view)
        };
        let (x, x_view) = if x_layout == 3 {
            // `x` a slice of a wider tensor along its last dimension (rows of stride width + 8).
            let wide: Vec<f32> = leaves[0]
                .chunks_exact(width)
                .flat_map(|row| [&[9.0; 4][..], row, &[9.0; 4][..]].concat())
                .collect();
            let leaf = Tensor::<2>::from_data(TensorData::new(wide, [rows, width + 8]), &device)
                .require_grad();
            (leaf.clone(), leaf.narrow(1, 4, width))
        } else {
            leaf(0, [rows, width], x_layout == 1)
        };
        let norm = Tensor::<1>::from_data(TensorData::new(leaves[1].clone(), [width]), &device)
            .require_grad();
        let (wg, wg_view) = leaf(2, [width, hidden], weights_transposed);
        let (wu, wu_view) = leaf(3, [width, hidden], weights_transposed);
        let (wd, wd_view) = leaf(4, [hidden, outputs], weights_transposed);
        let weights = || (wg_view.clone(), wu_view.clone(), wd_view.clone());
        let out = if x_layout == 2 {
            let (g, u, d) = weights();
            let x = x_view.reshape([3, rows / 3, width]);
            rms_norm_swiglu_mlp(x, norm.clone(), g, u, d, EPS).reshape([rows, outputs])
        } else {
            let (g, u, d) = weights();
            rms_norm_swiglu_mlp(x_view, norm.clone(), g, u, d, EPS)
        };
        let loss = if plain_sum {
            out.clone().sum()
        } else {
            let w =
                Tensor::<2>::from_data(TensorData::new(dims.weights(12), [rows, outputs]), &device);
            (out.clone() * w).sum()
        };
        let grads = loss.backward();
        let stored = |t: &Tensor<2>, [r, c]: [usize; 2], transpose: bool| {
            let g = values(&t.grad(&grads).expect("a gradient"));
            if transpose { transposed(&g, c, r) } else { g }
        };
        let all = vec![
            if x_layout == 3 {
                let g = values(&x.grad(&grads).expect("a gradient"));
                g.chunks_exact(width + 8)
                    .flat_map(|row| row[4..4 + width].to_vec())
                    .collect()
            } else {
                stored(&x, [rows, width], x_layout == 1)
            },
            values(&norm.grad(&grads).expect("a gradient")),
            stored(&wg, [width, hidden], weights_transposed),
            stored(&wu, [width, hidden], weights_transposed),
            stored(&wd, [hidden, outputs], weights_transposed),
        ];
        (values(&out), all)
    };
    for plain_sum in [false, true] {
        let (out, grads) = run(0, false, plain_sum);
        for (x_layout, weights_transposed) in
            [(0, true), (1, false), (2, false), (2, true), (3, false)]
        {
            let what = format!(
                "x layout {x_layout}, weights transposed {weights_transposed}, plain sum {plain_sum}"
            );
            let (o, g) = run(x_layout, weights_transposed, plain_sum);
            assert_close(&o, &out, 1e-5, &format!("{what}: values"));
            for (i, (g, r)) in g.iter().zip(&grads).enumerate() {
                assert_close(g, r, 1e-5, &format!("{what}: input {i}"));
            }
        }
    }
}

#[test]
fn untracked_inputs_get_no_gradient_and_the_others_the_same_one() {
    let autodiff = Device::flex().autodiff();
    for dims in [SMALL, CHUNKED] {
        let leaves = dims.inputs(7);
        let w = dims.weights(8);
        let (_, full) = gradients(dims, &leaves, &w, &[true; 5], &autodiff, true);
        for only in 0..5 {
            let tracked: Vec<bool> = (0..5).map(|i| i == only).collect();
            let (_, some) = gradients(dims, &leaves, &w, &tracked, &autodiff, true);
            assert_only_tracked_gets_its_gradient(&some, &full, only, 1e-6, &format!("{dims:?}"));
        }
    }
}

/// The MLP on a residual stream made by memory-bound ops (`x * 2 + 1`, the residual sum), twice:
/// loss and gradients bit for bit those without checkpointing (which keeps the projections
/// where checkpointing rebuilds them), in `f32` and in `bf16` (whose projections are kept in
/// `f32`, as they are rebuilt).
#[test]
fn checkpointing_gives_the_same_bits() {
    fn run(device: &Device, dtype: FloatDType) -> (Vec<f32>, Vec<Option<Vec<f32>>>) {
        let dims = Dims {
            outputs: CHUNKED.width,
            ..CHUNKED
        };
        let leaves = dims.inputs(9);
        let inputs = Inputs::new(dims, &leaves, device, dtype, &[true; 5]);
        let h = inputs.x.clone() * 2.0 + 1.0;
        let mlp = |x: Tensor<2>| {
            rms_norm_swiglu_mlp(
                x,
                inputs.norm_weight.clone(),
                inputs.gate_weight.clone(),
                inputs.up_weight.clone(),
                inputs.down_weight.clone(),
                EPS,
            )
        };
        let r = h.clone() + mlp(h);
        let r = r.clone() + mlp(r);
        let loss = (r.clone() * r).sum();
        let grads = loss.backward();
        (values(&loss), inputs.grads(&grads))
    }
    for dtype in [FloatDType::F32, FloatDType::BF16] {
        let plain = run(&Device::flex().autodiff(), dtype);
        let checkpointed = run(&Device::flex().autodiff().gradient_checkpointing(), dtype);
        assert_eq!(plain, checkpointed, "{dtype:?}");
    }
}

/// Checkpointing keeps the same bits where the kernels could part: a gradient that reaches the
/// op as a row-strided view (`cat`'s backward pass slices it), at a width where `gemm` blocks a
/// 64-row chunk's products differently from a whole matmul's; and an `x` whose last dimension
/// is strided (the chunked composition, not the `f32` kernel) in 3-d with 32-position
/// sequences (where Burn's `linear` takes a batched matmul), in one chunk.
#[test]
fn checkpointing_gives_the_same_bits_for_sliced_gradients_and_strided_inputs() {
    fn run(device: &Device, x_shape: [usize; 3], swapped: bool) -> Vec<Vec<f32>> {
        let [batch, seq, width] = x_shape;
        let (hidden, outputs) = (48, 8);
        let mut rng = Rng::new(31);
        let mut leaf = |shape: Vec<usize>, lo: f32, hi: f32| {
            let n = shape.iter().product();
            Tensor::<2>::from_data(TensorData::new(rng.vec(n, lo, hi), shape), device)
                .require_grad()
        };
        let x = leaf(vec![batch * seq, width], -1.0, 1.0);
        let norm = leaf(vec![1, width], 0.5, 1.5);
        let [gate, up] = [0; 2].map(|_| leaf(vec![width, hidden], -0.2, 0.2));
        let down = leaf(vec![hidden, outputs], -0.2, 0.2);
        let x3 = if swapped {
            // The same values, read through a view whose last dimension is strided.
            let t = x.clone().reshape([batch, seq, width]).swap_dims(1, 2) * 2.0;
            t.swap_dims(1, 2)
        } else {
            x.clone().reshape([batch, seq, width]) * 2.0
        };
        let out = rms_norm_swiglu_mlp(
            x3,
            norm.clone().reshape([width]),
            gate.clone(),
            up.clone(),
            down.clone(),
            EPS,
        );
        // `cat` with another tensor: the op's gradient arrives as a slice of the sum's.
        let other = out.clone() * 0.5;
        let loss = Tensor::cat(vec![out, other], 2).powi_scalar(2).sum();
        let grads = loss.backward();
        let mut all = vec![values(&loss)];
        for t in [&x, &norm, &gate, &up, &down] {
            all.push(values(&t.grad(&grads).expect("tracked")));
        }
        all
    }
    let cases = [
        ([2, 50, 520], false),
        ([2, 32, 8], true),
        ([3, 64, 24], true),
    ];
    for (shape, swapped) in cases {
        let plain = run(&Device::flex().autodiff(), shape, swapped);
        let checkpointed = run(
            &Device::flex().autodiff().gradient_checkpointing(),
            shape,
            swapped,
        );
        assert_eq!(plain, checkpointed, "{shape:?}, strided x: {swapped}");
    }
}

#[test]
fn half_precision_runs_the_kernels_close_to_f32() {
    let device = Device::flex();
    let leaves = SMALL.inputs(5);
    let tracked = [false; 5];
    let reference = Inputs::new(SMALL, &leaves, &device, FloatDType::F32, &tracked).mlp(false);
    for (dtype, float) in [
        (DType::F16, FloatDType::F16),
        (DType::BF16, FloatDType::BF16),
    ] {
        let out = Inputs::new(SMALL, &leaves, &device, float, &tracked).mlp(true);
        assert_eq!(out.dtype(), dtype);
        assert_close(
            &values(&out),
            &values(&reference),
            5e-2,
            &format!("{dtype:?}"),
        );
    }
}

/// The weights' gradients in `bf16` over many rows (many chunks on Flex) stay as close to the
/// `f32` ones as Burn's composition in `bf16` is: they are summed in `f32` and rounded once
/// (summed across the chunks in `bf16`, their error grew with the rows: the norm weight's 3.7x
/// Burn's here).
#[test]
fn half_precision_weight_gradients_do_not_drift_with_the_rows() {
    let device = Device::flex().autodiff();
    let dims = Dims {
        rows: 8192,
        width: 16,
        hidden: 64,
        outputs: 8,
    };
    let leaves = dims.inputs(21);
    let grads = |dtype: FloatDType, routed: bool| {
        let inputs = Inputs::new(dims, &leaves, &device, dtype, &[true; 5]);
        let g = inputs.mlp(routed).sum().backward();
        inputs.grads(&g)
    };
    let reference = grads(FloatDType::F32, false);
    let error = |got: &[Option<Vec<f32>>], i: usize| {
        let (g, r) = (
            got[i].as_ref().expect("a gradient"),
            reference[i].as_ref().expect("f32"),
        );
        let scale = r.iter().fold(0.0_f32, |m, v| m.max(v.abs()));
        g.iter()
            .zip(r)
            .fold(0.0_f32, |m, (g, r)| m.max((g - r).abs()))
            / scale
    };
    let (routed, burn) = (
        grads(FloatDType::BF16, true),
        grads(FloatDType::BF16, false),
    );
    for i in 1..5 {
        let (ours, theirs) = (error(&routed, i), error(&burn, i));
        assert!(
            ours <= 2.0 * theirs + 1e-3,
            "input {i}: bf16 gradient error {ours:.2e} against Burn's {theirs:.2e}"
        );
    }
}

#[test]
fn weights_that_do_not_chain_panic_with_both_shapes() {
    let device = Device::flex();
    let leaves = SMALL.inputs(6);
    let good = || Inputs::new(SMALL, &leaves, &device, FloatDType::F32, &[false; 5]);
    let message = panic_message(|| {
        let mut inputs = good();
        inputs.gate_weight = inputs.gate_weight.transpose();
        inputs.up_weight = inputs.up_weight.transpose();
        inputs.mlp(true);
    });
    assert_eq!(
        message,
        "rms_norm_swiglu_mlp: `gate_weight` has shape [7, 5], but its rows must be `x`'s width 5 \
         (`x` has shape [6, 5]); pass it as `[5, outputs]`, as Burn's `Linear` keeps it \
         (transpose a `[outputs, 5]` one)"
    );
    let message = panic_message(|| {
        let mut inputs = good();
        inputs.down_weight = inputs.down_weight.transpose();
        inputs.mlp(true);
    });
    assert_eq!(
        message,
        "rms_norm_swiglu_mlp: `down_weight` has shape [3, 7], but its rows must be the hidden \
         width 7 (`gate_weight` has shape [5, 7]); pass it as `[7, outputs]`, as Burn's `Linear` \
         keeps it"
    );
}

/// A batch of no sequences (`[0, seq, width]`): an empty output of the right shape and empty
/// gradients, plain, tracked and checkpointed (Burn's batched matmul on such an `x` reads
/// outside its buffers; the op goes by `x`'s rows).
#[test]
fn a_batch_of_no_sequences_gives_empty_results() {
    for device in [
        Device::flex(),
        Device::flex().autodiff(),
        Device::flex().autodiff().gradient_checkpointing(),
    ] {
        let tracked = device.is_autodiff();
        let leaf = |t: Tensor<2>| if tracked { t.require_grad() } else { t };
        let x = Tensor::<3>::zeros([0, 5, 4], &device);
        let x = if tracked { x.require_grad() } else { x };
        let norm = Tensor::<1>::ones([4], &device);
        let gate = leaf(Tensor::<2>::ones([4, 6], &device));
        let up = Tensor::<2>::ones([4, 6], &device);
        let down = leaf(Tensor::<2>::ones([6, 2], &device));
        let out = rms_norm_swiglu_mlp(x.clone(), norm, gate.clone(), up, down.clone(), EPS);
        assert_eq!(out.dims(), [0, 5, 2], "{device:?}");
        if !tracked {
            continue;
        }
        let grads = out.sum().backward();
        assert_eq!(x.grad(&grads).map(|g| g.dims()), Some([0, 5, 4]));
        let zeros = |t: Option<Tensor<2>>| t.map(|g| values(&g).iter().all(|v| *v == 0.0));
        assert_eq!(zeros(gate.grad(&grads)), Some(true), "{device:?}");
        assert_eq!(zeros(down.grad(&grads)), Some(true), "{device:?}");
    }
}

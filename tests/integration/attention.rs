#![cfg(feature = "autodiff")]
//! `self_attention` through `Device::flex()`: values against the block written with Burn's ops
//! (`module::linear`, `reshape`/`swap_dims` into heads, `matmul`, `softmax`, `mask_fill`),
//! gradients of every input against central finite differences of `sum(w * attention(...))`
//! (in `f64`, where Flex runs the op's chunked kernel in `f64`) and against Burn's autodiff of
//! that composition, causal or not, at a size whose sequences go in several chunks on Flex (the
//! last one short), with some inputs untracked, under gradient checkpointing (the same bits), in
//! half precision, with no rows, and the shape panics.

use crate::common::{
    Rng, assert_close, assert_only_tracked_gets_its_gradient, finite_difference, panic_message,
    values,
};
use burn_route::self_attention;
use burn_tensor::activation::softmax;
use burn_tensor::module::linear;
use burn_tensor::{Bool, DType, Device, FloatDType, Gradients, Tensor, TensorData};

/// Batch, sequence, features, the projections' width, heads, outputs.
#[derive(Clone, Copy, Debug)]
struct Dims {
    batch: usize,
    seq: usize,
    features: usize,
    inner: usize,
    heads: usize,
    outputs: usize,
}

/// Small enough for finite differences.
const SMALL: Dims = Dims {
    batch: 2,
    seq: 3,
    features: 4,
    inner: 6,
    heads: 2,
    outputs: 3,
};

/// On Flex a chunk is about 16K values of the projections' width (at least 64 rows): 512 rows of
/// 32, so 100 sequences of 8 go in chunks of 64 and 36 sequences.
const CHUNKED: Dims = Dims {
    batch: 100,
    seq: 8,
    features: 16,
    inner: 32,
    heads: 4,
    outputs: 8,
};

impl Dims {
    /// Each input's shape, in input order: `x`, `q_weight`, `k_weight`, `v_weight`,
    /// `out_weight`.
    fn shapes(self) -> [Vec<usize>; 5] {
        let w = vec![self.features, self.inner];
        [
            vec![self.batch, self.seq, self.features],
            w.clone(),
            w.clone(),
            w,
            vec![self.inner, self.outputs],
        ]
    }

    fn inputs(self, seed: u64) -> Vec<Vec<f32>> {
        let mut rng = Rng::new(seed);
        self.shapes()
            .iter()
            .map(|s| rng.vec(s.iter().product(), -1.0, 1.0))
            .collect()
    }

    fn weights(self, seed: u64) -> Vec<f32> {
        Rng::new(seed).vec(self.batch * self.seq * self.outputs, -1.0, 1.0)
    }

    fn out_shape(self) -> [usize; 3] {
        [self.batch, self.seq, self.outputs]
    }
}

/// The inputs on `device` in `dtype`, tracked where `tracked` says.
struct Inputs {
    x: Tensor<3>,
    weights: [Tensor<2>; 4],
    heads: usize,
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
        let x = Tensor::<3>::from_data(
            TensorData::new(leaves[0].clone(), shapes[0].clone()),
            device,
        )
        .cast(dtype);
        let x = if tracked[0] { x.require_grad() } else { x };
        let weights = [1, 2, 3, 4].map(|i| {
            let t = Tensor::<2>::from_data(
                TensorData::new(leaves[i].clone(), shapes[i].clone()),
                device,
            )
            .cast(dtype);
            if tracked[i] { t.require_grad() } else { t }
        });
        Self {
            x,
            weights,
            heads: dims.heads,
        }
    }

    /// The routed op on `x`, or the block written with Burn's ops.
    fn attention(&self, x: Tensor<3>, causal: bool, routed: bool) -> Tensor<3> {
        let [wq, wk, wv, wo] = self.weights.clone();
        if routed {
            return self_attention(x, wq, wk, wv, wo, self.heads, causal);
        }
        let [b, s, _] = x.dims();
        let inner = wq.dims()[1];
        let head = inner / self.heads;
        let split = |w: Tensor<2>| {
            linear(x.clone(), w, None)
                .reshape([b, s, self.heads, head])
                .swap_dims(1, 2)
        };
        let (q, k, v) = (split(wq), split(wk), split(wv));
        #[allow(clippy::cast_precision_loss)]
        let mut scores = q.matmul(k.swap_dims(2, 3)) * (1.0 / (head as f32).sqrt());
        if causal {
            let above: Vec<bool> = (0..s * s).map(|i| i % s > i / s).collect();
            let mask =
                Tensor::<4, Bool>::from_data(TensorData::new(above, [1, 1, s, s]), &x.device())
                    .expand([b, self.heads, s, s]);
            scores = scores.mask_fill(mask, f32::NEG_INFINITY);
        }
        let heads = softmax(scores, 3).matmul(v);
        linear(heads.swap_dims(1, 2).reshape([b, s, inner]), wo, None)
    }

    /// Each input's gradient, `None` when it got none.
    fn grads(&self, grads: &Gradients) -> Vec<Option<Vec<f32>>> {
        let mut all = vec![self.x.grad(grads).map(|g| values(&g))];
        all.extend(
            self.weights
                .iter()
                .map(|w| w.grad(grads).map(|g| values(&g))),
        );
        all
    }
}

/// The values of the op and each input's gradient of `sum(w * attention(...))`.
fn gradients(
    dims: Dims,
    leaves: &[Vec<f32>],
    w: &[f32],
    tracked: &[bool],
    causal: bool,
    device: &Device,
    routed: bool,
) -> (Vec<f32>, Vec<Option<Vec<f32>>>) {
    let inputs = Inputs::new(dims, leaves, device, FloatDType::F32, tracked);
    let out = inputs.attention(inputs.x.clone(), causal, routed);
    let weights = Tensor::<3>::from_data(TensorData::new(w.to_vec(), dims.out_shape()), device);
    let grads = (out.clone() * weights).sum().backward();
    (values(&out), inputs.grads(&grads))
}

/// `sum(w * attention(...))` in `f64` on the plain device.
fn loss_f64(dims: Dims, leaves: &[Vec<f32>], w: &[f32], causal: bool) -> f64 {
    let inputs = Inputs::new(dims, leaves, &Device::flex(), FloatDType::F64, &[false; 5]);
    let out = inputs
        .attention(inputs.x.clone(), causal, true)
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
        for causal in [false, true] {
            let leaves = dims.inputs(seed);
            let w = dims.weights(seed + 10);
            let all = [true; 5];
            let (out, grads) = gradients(dims, &leaves, &w, &all, causal, &autodiff, true);
            let (out_ref, grads_ref) = gradients(dims, &leaves, &w, &all, causal, &autodiff, false);
            let what = format!("{dims:?}, causal {causal}");
            assert_close(&out, &out_ref, 1e-5, &format!("{what}: values"));
            for (i, (g, r)) in grads.iter().zip(&grads_ref).enumerate() {
                let name = format!("{what}: input {i}");
                let (g, r) = (g.as_ref().expect(&name), r.as_ref().expect(&name));
                assert_close(g, r, 1e-4, &format!("{name} against Burn's autodiff"));
                if seed == 1 {
                    let fd = finite_difference(
                        |v| {
                            let mut at = leaves.clone();
                            at[i] = v.to_vec();
                            loss_f64(dims, &at, &w, causal)
                        },
                        &leaves[i],
                        1.0 / 128.0,
                    );
                    assert_close(g, &fd, 1e-3, &format!("{name} against finite differences"));
                }
            }
        }
    }
}

/// Causal: the first position sees only itself, so its output is `x[0] @ wv @ wo` whatever
/// the later positions hold.
#[test]
fn a_causal_first_position_sees_only_itself() {
    let device = Device::flex();
    let dims = SMALL;
    let leaves = dims.inputs(3);
    let inputs = Inputs::new(dims, &leaves, &device, FloatDType::F32, &[false; 5]);
    let out = inputs.attention(inputs.x.clone(), true, true);
    let first = inputs.x.clone().narrow(1, 0, 1);
    let [_, _, wv, wo] = inputs.weights.clone();
    let expected = first.matmul(wv.unsqueeze()).matmul(wo.unsqueeze());
    assert_close(
        &values(&out.narrow(1, 0, 1)),
        &values(&expected),
        1e-5,
        "the first position",
    );
}

#[test]
fn untracked_inputs_get_no_gradient_and_the_others_the_same_one() {
    let autodiff = Device::flex().autodiff();
    for dims in [SMALL, CHUNKED] {
        let leaves = dims.inputs(7);
        let w = dims.weights(8);
        let (_, full) = gradients(dims, &leaves, &w, &[true; 5], true, &autodiff, true);
        for only in 0..5 {
            let tracked: Vec<bool> = (0..5).map(|i| i == only).collect();
            let (_, some) = gradients(dims, &leaves, &w, &tracked, true, &autodiff, true);
            assert_only_tracked_gets_its_gradient(&some, &full, only, 1e-6, &format!("{dims:?}"));
        }
    }
}

/// A transposed `x` (a view, not contiguous), transposed weights, and a plain `sum` (whose
/// gradient is a broadcast view) give the values and gradients of contiguous inputs, under
/// checkpointing too.
#[test]
fn views_give_the_same_results() {
    let dims = CHUNKED;
    let leaves = dims.inputs(13);
    let run = |device: &Device, views: bool| {
        let shapes = dims.shapes();
        let x = if views {
            let [b, s, f] = [dims.batch, dims.seq, dims.features];
            let stored: Vec<f32> = (0..b)
                .flat_map(|i| (0..f).flat_map(move |c| (0..s).map(move |r| (i, r, c))))
                .map(|(i, r, c)| leaves[0][(i * s + r) * f + c])
                .collect();
            Tensor::<3>::from_data(TensorData::new(stored, [b, f, s]), device).require_grad()
        } else {
            Tensor::<3>::from_data(
                TensorData::new(leaves[0].clone(), shapes[0].clone()),
                device,
            )
            .require_grad()
        };
        let weights = [1, 2, 3, 4].map(|i| {
            let [r, c] = [shapes[i][0], shapes[i][1]];
            if views {
                let t: Vec<f32> = (0..c)
                    .flat_map(|j| (0..r).map(move |k| (k, j)))
                    .map(|(k, j)| leaves[i][k * c + j])
                    .collect();
                Tensor::<2>::from_data(TensorData::new(t, [c, r]), device).require_grad()
            } else {
                Tensor::<2>::from_data(TensorData::new(leaves[i].clone(), [r, c]), device)
                    .require_grad()
            }
        });
        let view = |w: &Tensor<2>| {
            if views {
                w.clone().transpose()
            } else {
                w.clone()
            }
        };
        let x_in = if views {
            x.clone().swap_dims(1, 2)
        } else {
            x.clone()
        };
        let [wq, wk, wv, wo] = weights.each_ref().map(view);
        let out = self_attention(x_in, wq, wk, wv, wo, dims.heads, true);
        let grads = out.clone().sum().backward();
        let mut all = vec![values(&out)];
        let gx = x.grad(&grads).expect("x's gradient");
        all.push(values(&if views { gx.swap_dims(1, 2) } else { gx }));
        for w in &weights {
            let g = w.grad(&grads).expect("a weight's gradient");
            all.push(values(&if views { g.transpose() } else { g }));
        }
        all
    };
    for device in [
        Device::flex().autodiff(),
        Device::flex().autodiff().gradient_checkpointing(),
    ] {
        let (plain, viewed) = (run(&device, false), run(&device, true));
        for (i, (v, p)) in viewed.iter().zip(&plain).enumerate() {
            assert_close(v, p, 1e-5, &format!("{device:?}: result {i}"));
        }
    }
}

/// Two blocks on a residual stream made by memory-bound ops (`x * 2 + 1`, the residual sums):
/// under checkpointing the op keeps only its inputs and rebuilds the rest, and the loss and
/// gradients are bit for bit those without checkpointing.
#[test]
fn checkpointing_gives_the_same_bits() {
    fn run(device: &Device) -> (Vec<f32>, Vec<Option<Vec<f32>>>) {
        let dims = Dims {
            outputs: CHUNKED.features,
            ..CHUNKED
        };
        let leaves = dims.inputs(9);
        let inputs = Inputs::new(dims, &leaves, device, FloatDType::F32, &[true; 5]);
        let h = inputs.x.clone() * 2.0 + 1.0;
        let r = h.clone() + inputs.attention(h, true, true);
        let r = r.clone() + inputs.attention(r, false, true);
        let loss = (r.clone() * r).sum();
        let grads = loss.backward();
        (values(&loss), inputs.grads(&grads))
    }
    let plain = run(&Device::flex().autodiff());
    let checkpointed = run(&Device::flex().autodiff().gradient_checkpointing());
    assert!(plain.1.iter().all(Option::is_some));
    assert_eq!(plain, checkpointed);
}

#[test]
fn half_precision_is_close_to_f32() {
    let device = Device::flex();
    let leaves = SMALL.inputs(5);
    let tracked = [false; 5];
    let f32s = Inputs::new(SMALL, &leaves, &device, FloatDType::F32, &tracked);
    let reference = f32s.attention(f32s.x.clone(), true, false);
    for (dtype, float) in [
        (DType::F16, FloatDType::F16),
        (DType::BF16, FloatDType::BF16),
    ] {
        let inputs = Inputs::new(SMALL, &leaves, &device, float, &tracked);
        let out = inputs.attention(inputs.x.clone(), true, true);
        assert_eq!(out.dtype(), dtype);
        assert_close(
            &values(&out),
            &values(&reference),
            5e-2,
            &format!("{dtype:?}"),
        );
    }
}

/// No sequences: a `[0, seq, outputs]` output, and zero gradients of the weights' shapes.
#[test]
fn no_rows_give_an_empty_output_and_zero_gradients() {
    let device = Device::flex().autodiff();
    let dims = Dims { batch: 0, ..SMALL };
    let leaves = dims.inputs(4);
    let inputs = Inputs::new(dims, &leaves, &device, FloatDType::F32, &[true; 5]);
    let out = inputs.attention(inputs.x.clone(), true, true);
    assert_eq!(out.dims(), [0, SMALL.seq, SMALL.outputs]);
    let grads = (out.sum() + inputs.weights[0].clone().sum()).backward();
    let got = inputs.grads(&grads);
    assert_eq!(got[0].as_deref(), Some(&[][..]));
    assert!(got[1].as_ref().expect("q_weight").iter().all(|&g| g == 1.0));
    for (i, g) in got.iter().enumerate().skip(2) {
        let g = g.as_ref().expect("a gradient");
        assert_eq!(g.len(), dims.shapes()[i].iter().product::<usize>());
        assert!(g.iter().all(|&g| g == 0.0), "input {i}: {g:?}");
    }
}

#[test]
fn shapes_that_do_not_chain_panic_with_the_shapes() {
    let device = Device::flex();
    let leaves = SMALL.inputs(6);
    let good = || Inputs::new(SMALL, &leaves, &device, FloatDType::F32, &[false; 5]);
    let run = |inputs: Inputs| {
        let _ = inputs.attention(inputs.x.clone(), false, true);
    };
    let message = panic_message(|| {
        let mut inputs = good();
        inputs.heads = 4;
        run(inputs);
    });
    assert_eq!(
        message,
        "self_attention: `heads` is 4, which must be at least 1 and divide the projections' \
         width 6 (`q_weight` has shape [4, 6]); pass a divisor of 6"
    );
    let message = panic_message(|| {
        let mut inputs = good();
        inputs.heads = 0;
        run(inputs);
    });
    assert!(message.starts_with("self_attention: `heads` is 0, which must be at least 1"));
    let message = panic_message(|| {
        let mut inputs = good();
        inputs.weights[3] = inputs.weights[3].clone().transpose();
        run(inputs);
    });
    assert_eq!(
        message,
        "self_attention: `out_weight` has shape [3, 6], but its rows must be the projections' \
         width 6 (`q_weight` has shape [4, 6]); pass it as `[6, outputs]`, as Burn's `Linear` \
         keeps it"
    );
    let message = panic_message(|| {
        let mut inputs = good();
        inputs.weights = inputs.weights.clone().map(|w| w.transpose());
        run(inputs);
    });
    assert_eq!(
        message,
        "self_attention: `q_weight` has shape [6, 4], but its rows must be `x`'s width 4 (`x` \
         has shape [2, 3, 4]); pass it as `[4, outputs]`, as Burn's `Linear` keeps it \
         (transpose a `[outputs, 4]` one)"
    );
}

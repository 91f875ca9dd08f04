//! The same checks for every backend beside Flex: each op's values, and each differentiable op's
//! gradients, on another device against Flex. `tests/integration/cube.rs` runs them on Cube (wgpu),
//! `tests/integration/remote.rs` on a loopback Remote server.
#![allow(dead_code)] // A binary built without `autodiff` does not call the gradient check.

use burn_route::{
    Affine, Fill, add_relu, affine, argmax_last, axpby, bias_gelu, clamp_ste, cross_entropy_logits,
    dequantize_relu, dropout, fill_where, layer_norm, masked_fill_count, moments, nan_to_num,
    rms_norm, rms_norm_swiglu_mlp, round_half_even, scale, self_attention, softmax_last, softplus,
    split_last, sum_all, swiglu, topk_last,
};
use burn_tensor::activation::relu;
use burn_tensor::quantization::QuantScheme;
use burn_tensor::{Device, Int, Tensor, TensorData};

use crate::common::{Rng, assert_close, ints, values};

const TOL: f32 = 1e-4;

/// The same values as a `[rows, cols]` tensor on `device`.
fn on(device: &Device, data: &[f32], shape: [usize; 2]) -> Tensor<2> {
    Tensor::from_data(TensorData::new(data.to_vec(), shape), device)
}

fn row(device: &Device, data: &[f32]) -> Tensor<1> {
    Tensor::from_data(TensorData::new(data.to_vec(), [data.len()]), device)
}

/// Runs `op` on Flex and on `other` with the same inputs and compares the float results.
fn same_on_both(other: &Device, what: &str, op: impl Fn(&Device) -> Vec<f32>) {
    let flex = op(&Device::flex());
    let theirs = op(other);
    assert_close(&theirs, &flex, TOL, &format!("{what} on {other:?}"));
}

const SHAPE: [usize; 2] = [6, 16];

fn inputs(seed: u64) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut rng = Rng::new(seed);
    let n = SHAPE[0] * SHAPE[1];
    (
        rng.vec(n, -2.0, 2.0),
        rng.vec(n, -2.0, 2.0),
        rng.vec(SHAPE[1], 0.5, 1.5),
    )
}

/// Every op's values on `other` against the same op on Flex.
pub fn every_op_gives_the_flex_values(other: &Device) {
    let (a, b, w) = inputs(1);
    same_on_both(other, "add_relu", |d| {
        values(&add_relu(on(d, &a, SHAPE), on(d, &b, SHAPE)))
    });
    same_on_both(other, "scale", |d| values(&scale(on(d, &a, SHAPE), 2.5)));
    same_on_both(other, "axpby", |d| {
        values(&axpby(on(d, &a, SHAPE), Some(on(d, &b, SHAPE)), 2.0, -0.5))
    });
    same_on_both(other, "round_half_even", |d| {
        values(&round_half_even(on(d, &a, SHAPE) * 3.0))
    });
    same_on_both(other, "sum_all", |d| {
        values(&sum_all(vec![on(d, &a, SHAPE), on(d, &b, SHAPE)]))
    });
    same_on_both(other, "split_last", |d| {
        split_last(on(d, &a, SHAPE), vec![4, 12])
            .iter()
            .flat_map(values)
            .collect()
    });
    same_on_both(other, "softplus", |d| {
        values(&softplus(on(d, &a, SHAPE), 1.5))
    });
    same_on_both(other, "bias_gelu", |d| {
        values(&bias_gelu(on(d, &a, SHAPE), row(d, &w)))
    });
    same_on_both(other, "swiglu", |d| {
        values(&swiglu(on(d, &a, SHAPE), on(d, &b, SHAPE)))
    });
    same_on_both(other, "rms_norm", |d| {
        values(&rms_norm(on(d, &a, SHAPE), row(d, &w), 1e-5))
    });
    same_on_both(other, "layer_norm", |d| {
        values(&layer_norm(on(d, &a, SHAPE), row(d, &w), row(d, &w), 1e-5))
    });
    same_on_both(other, "softmax_last", |d| {
        values(&softmax_last(on(d, &a, SHAPE)))
    });
    same_on_both(other, "cross_entropy_logits", |d| {
        let targets = Tensor::<1, Int>::from_data([3, 0, 15, 7, 7, 1], d);
        values(&cross_entropy_logits(on(d, &a, SHAPE), targets))
    });
    same_on_both(other, "dropout", |d| {
        let (out, keep) = dropout(on(d, &a, SHAPE), 0.25, 42);
        // Bool storage differs between backends (native on Flex, u32 on Cube): compare as 0/1.
        let keep = values(&keep.float());
        values(&out).into_iter().chain(keep).collect()
    });
    same_on_both(other, "clamp_ste", |d| {
        values(&clamp_ste(on(d, &a, SHAPE), -0.5, 1.0))
    });
    same_on_both(other, "topk_last values", |d| {
        values(&topk_last(&on(d, &a, SHAPE), 3).0)
    });
    same_on_both(other, "masked_fill_count", |d| {
        let x = on(d, &a, SHAPE);
        let mask = x.clone().greater_elem(0.5);
        let (filled, count) = masked_fill_count(x, &mask, -1.0);
        let mut out = values(&filled);
        out.extend(ints(&count).into_iter().map(|c| c as f32));
        out
    });
    same_on_both(other, "nan_to_num", |d| {
        let x = Tensor::<1>::from_data([1.0, f32::NAN, -3.0, f32::NAN], d);
        let (clean, mask) = nan_to_num(x, 7.0, true);
        let mask = values(&mask.expect("asked for the mask").float());
        values(&clean).into_iter().chain(mask).collect()
    });
    // The ops over declared types.
    same_on_both(other, "affine", |d| {
        let p = Affine {
            scale: row(d, &w).unsqueeze::<2>(),
            shift: Some(on(d, &b, SHAPE)),
        };
        values(&affine(on(d, &a, SHAPE), p))
    });
    same_on_both(other, "moments", |d| {
        let m = moments(on(d, &a, SHAPE));
        values(&m.mean)
            .into_iter()
            .chain(values(&m.variance))
            .collect()
    });
    same_on_both(other, "fill_where", |d| {
        let x = on(d, &a, SHAPE);
        let mask = x.clone().greater_elem(0.5);
        let mut out = values(&fill_where(x.clone(), &mask, Fill::Value(-3.0)));
        out.extend(values(&fill_where(x.clone(), &mask, Fill::Zero)));
        let from = Fill::From(row(d, &w).unsqueeze::<2>());
        out.extend(values(&fill_where(x, &mask, from)));
        out
    });
    // Quantized input: on each backend the op equals `relu(dequantize(q))`, and the backends
    // agree within one int8 quantization step (they may round a value at a step's midpoint
    // differently).
    let dequantized = |d: &Device| {
        let q = on(d, &a, SHAPE).quantize_dynamic(&QuantScheme::default());
        let expected = values(&relu(q.clone().dequantize()));
        let got = values(&dequantize_relu(q));
        assert_close(&got, &expected, TOL, &format!("dequantize_relu on {d:?}"));
        got
    };
    let step = a.iter().fold(0.0f32, |m, v| m.max(v.abs())) / 127.0;
    let flex_values = dequantized(&Device::flex());
    for (i, (theirs, flex)) in dequantized(other).iter().zip(&flex_values).enumerate() {
        assert!(
            (theirs - flex).abs() <= step * 1.01,
            "dequantize_relu on {other:?}: element {i}: {theirs} vs Flex {flex} (step {step})"
        );
    }
    // Index outputs: compare as integers (distinct random values, so no ties).
    let flex = Device::flex();
    assert_eq!(
        ints(&argmax_last(&on(other, &a, SHAPE))),
        ints(&argmax_last(&on(&flex, &a, SHAPE))),
        "argmax_last on {other:?}"
    );
    assert_eq!(
        ints(&topk_last(&on(other, &a, SHAPE), 3).1),
        ints(&topk_last(&on(&flex, &a, SHAPE), 3).1),
        "topk_last indices on {other:?}"
    );
}

/// `grads` (an op's gradients on a device) on `other` without and with gradient checkpointing,
/// against `Autodiff<Flex>`.
fn same_with_and_without_checkpointing(
    other: &Device,
    name: &str,
    grads: impl Fn(&Device) -> Vec<f32>,
) {
    let flex = grads(&Device::flex().autodiff());
    for device in [other.clone(), other.clone().gradient_checkpointing()] {
        assert_close(
            &grads(&device),
            &flex,
            TOL,
            &format!("{name} on {device:?}"),
        );
    }
}

/// A differentiable op applied to the leaves `x`, `y` (both `[rows, cols]`) and `p` (`[cols]`).
type Layer = Box<dyn Fn(Tensor<2>, Tensor<2>, Tensor<1>) -> Tensor<2>>;

/// Gradients of every differentiable op on `other` (an autodiff device) against
/// `Autodiff<Flex>`.
pub fn gradients_match_flex(other: &Device) {
    let (a, b, w) = inputs(2);
    let (_, _, weights) = inputs(3);
    let loss_weights: Vec<f32> = weights.iter().cycle().take(a.len()).copied().collect();
    // d/d(every leaf) of sum(loss_weights * op(leaves)), for one op, on one device.
    let grads = |device: &Device, op: &dyn Fn(Tensor<2>, Tensor<2>, Tensor<1>) -> Tensor<2>| {
        let x = on(device, &a, SHAPE).require_grad();
        let y = on(device, &b, SHAPE).require_grad();
        let p = row(device, &w).require_grad();
        let out = op(x.clone(), y.clone(), p.clone());
        let g = (out * on(device, &loss_weights, SHAPE)).sum().backward();
        let mut all = values(&x.grad(&g).expect("x is a leaf of every op"));
        all.extend(y.grad(&g).map(|t| values(&t)).unwrap_or_default());
        all.extend(p.grad(&g).map(|t| values(&t)).unwrap_or_default());
        all
    };
    let ops: Vec<(&str, Layer)> = vec![
        ("add_relu", Box::new(|x, y, _| add_relu(x, y))),
        ("scale", Box::new(|x, _, _| scale(x, -1.5))),
        ("axpby", Box::new(|x, y, _| axpby(x, Some(y), 0.5, 2.0))),
        ("softplus", Box::new(|x, _, _| softplus(x, 2.0))),
        ("bias_gelu", Box::new(|x, _, p| bias_gelu(x, p))),
        ("swiglu", Box::new(|x, y, _| swiglu(x, y))),
        ("rms_norm", Box::new(|x, _, p| rms_norm(x, p, 1e-5))),
        (
            "layer_norm",
            Box::new(|x, _, p| layer_norm(x, p.clone(), p, 1e-5)),
        ),
        ("softmax_last", Box::new(|x, _, _| softmax_last(x))),
        ("dropout", Box::new(|x, _, _| dropout(x, 0.3, 9).0)),
        ("clamp_ste", Box::new(|x, _, _| clamp_ste(x, -1.0, 1.0))),
        (
            "affine",
            Box::new(|x, y, p| {
                let p = Affine {
                    scale: p.unsqueeze::<2>(),
                    shift: Some(y),
                };
                affine(x, p)
            }),
        ),
        (
            "moments",
            Box::new(|x, _, _| {
                let m = moments(x);
                m.mean + m.variance * 2.0
            }),
        ),
        (
            "fill_where",
            Box::new(|x, _, p| {
                let mask = x.clone().greater_elem(0.5);
                fill_where(x, &mask, Fill::From(p.unsqueeze::<2>()))
            }),
        ),
    ];
    for (name, op) in &ops {
        let flex = grads(&Device::flex().autodiff(), op.as_ref());
        let theirs = grads(other, op.as_ref());
        assert_close(&theirs, &flex, TOL, &format!("{name} on {other:?}"));
    }
    // Cross-entropy: a one-element loss of logits and int targets.
    let ce = |device: &Device| {
        let x = on(device, &a, SHAPE).require_grad();
        let targets = Tensor::<1, Int>::from_data([3, 0, 15, 7, 7, 1], device);
        let g = cross_entropy_logits(x.clone(), targets).backward();
        values(&x.grad(&g).expect("logits grad"))
    };
    assert_close(
        &ce(other),
        &ce(&Device::flex().autodiff()),
        TOL,
        &format!("cross_entropy_logits on {other:?}"),
    );
    // Self-attention on `a`'s rows as two causal sequences of three, with four `[16, 16]`
    // projections, on an input a memory-bound op makes: without and with gradient checkpointing
    // (its hand-written kernel keeps other tensors under each).
    let attention = |device: &Device| {
        let x = Tensor::<3>::from_data(TensorData::new(a.clone(), [2, 3, SHAPE[1]]), device)
            .require_grad();
        let mut rng = Rng::new(4);
        let weights = [0; 4].map(|_| {
            let w = TensorData::new(rng.vec(SHAPE[1] * SHAPE[1], -0.5, 0.5), [SHAPE[1]; 2]);
            Tensor::<2>::from_data(w, device).require_grad()
        });
        let [wq, wk, wv, wo] = weights.clone();
        let out = self_attention(x.clone() * 2.0, wq, wk, wv, wo, 4, true);
        let g = (out.clone() * out).sum().backward();
        let mut all = values(&x.grad(&g).expect("x's gradient"));
        for w in &weights {
            all.extend(values(&w.grad(&g).expect("a weight's gradient")));
        }
        all
    };
    same_with_and_without_checkpointing(other, "self_attention", attention);
    // The MLP one op on `a`'s rows, hidden width 24, on an input a memory-bound op makes:
    // without gradient checkpointing (its hand-written kernel keeps the projections) and with
    // it (it rebuilds them).
    let mlp = |device: &Device| {
        let x = on(device, &a, SHAPE).require_grad();
        let norm = row(device, &w).require_grad();
        let mut rng = Rng::new(5);
        let mut weight = |rows: usize, cols: usize| {
            let w = TensorData::new(rng.vec(rows * cols, -0.5, 0.5), [rows, cols]);
            Tensor::<2>::from_data(w, device).require_grad()
        };
        let weights = [
            weight(SHAPE[1], 24),
            weight(SHAPE[1], 24),
            weight(24, SHAPE[1]),
        ];
        let [gate, up, down] = weights.clone();
        let out = rms_norm_swiglu_mlp(x.clone() * 2.0, norm.clone(), gate, up, down, 1e-5);
        let g = (out.clone() * out).sum().backward();
        let mut all = values(&x.grad(&g).expect("x's gradient"));
        all.extend(values(&norm.grad(&g).expect("the norm weight's gradient")));
        for w in &weights {
            all.extend(values(&w.grad(&g).expect("a weight's gradient")));
        }
        all
    };
    same_with_and_without_checkpointing(other, "rms_norm_swiglu_mlp", mlp);
}

#![cfg(feature = "autodiff")]
//! `rms_norm_linear`, `layer_norm_linear` and `swiglu_linear` through `Device::flex()`: values
//! against what a Burn user writes (the norm or gate with Burn's ops, then
//! `burn_tensor::module::linear`), gradients of every input against central finite differences
//! of `sum(w * op(...))` (in `f64`, where the ops run their compositions) and against Burn's
//! autodiff of that composition, with and without `bias`, with some inputs untracked, under
//! gradient checkpointing (the same bits), in half precision, and the weight-shape panic.

use crate::common::{
    Rng, assert_close, assert_only_tracked_gets_its_gradient, finite_difference, panic_message,
    values,
};
use burn_route::{layer_norm_linear, rms_norm_linear, swiglu_linear};
use burn_tensor::activation::silu;
use burn_tensor::module::{layer_norm, linear};
use burn_tensor::{DType, Device, FloatDType, Gradients, Tensor, TensorData};

const EPS: f32 = 1e-5;
/// The shape of `x` (or `gate` and `up`), and the projection's outputs.
const X: [usize; 3] = [2, 3, 5];
const OUTPUTS: usize = 4;

#[derive(Clone, Copy, Debug)]
enum Op {
    Rms,
    Layer,
    Swiglu,
}

impl Op {
    /// Each tensor input's shape, in input order (`bias` last).
    fn shapes(self) -> Vec<Vec<usize>> {
        let (x, row, w, b) = (X.to_vec(), vec![X[2]], vec![X[2], OUTPUTS], vec![OUTPUTS]);
        match self {
            Self::Rms => vec![x, row, w, b],
            Self::Layer => vec![x, row.clone(), row, w, b],
            Self::Swiglu => vec![x.clone(), x, w, b],
        }
    }

    fn inputs(self, seed: u64) -> Vec<Vec<f32>> {
        let mut rng = Rng::new(seed);
        self.shapes()
            .iter()
            .map(|s| rng.vec(s.iter().product(), -1.0, 1.0))
            .collect()
    }
}

/// The op on tensors `t` (rank 3, 1 or 2 as `Op::shapes` says; `bias` when `with_bias`): the
/// routed op, or the composition a Burn user writes.
fn call(op: Op, t: &[Tensor<3>], params: &Params, with_bias: bool, routed: bool) -> Tensor<3> {
    let bias = with_bias.then(|| params.bias.clone());
    let w = params.weight.clone();
    match (op, routed) {
        (Op::Rms, true) => rms_norm_linear(t[0].clone(), params.rows[0].clone(), w, bias, EPS),
        (Op::Rms, false) => {
            let x = t[0].clone();
            let inverse = (x.clone().powi_scalar(2).mean_dim(2) + EPS).sqrt().recip();
            let h = x * inverse * params.rows[0].clone().unsqueeze::<3>();
            linear(h, w, bias)
        }
        (Op::Layer, true) => layer_norm_linear(
            t[0].clone(),
            params.rows[0].clone(),
            params.rows[1].clone(),
            w,
            bias,
            EPS,
        ),
        (Op::Layer, false) => {
            let h = layer_norm(
                t[0].clone(),
                params.rows[0].clone(),
                Some(params.rows[1].clone()),
                f64::from(EPS),
            );
            linear(h, w, bias)
        }
        (Op::Swiglu, true) => swiglu_linear(t[0].clone(), t[1].clone(), w, bias),
        (Op::Swiglu, false) => linear(silu(t[0].clone()) * t[1].clone(), w, bias),
    }
}

/// The rank-1 and rank-2 inputs of an op.
struct Params {
    rows: Vec<Tensor<1>>,
    weight: Tensor<2>,
    bias: Tensor<1>,
}

/// The op's inputs on `device` in `dtype`, tracked where `tracked` says (in input order).
fn build(
    op: Op,
    leaves: &[Vec<f32>],
    device: &Device,
    dtype: FloatDType,
    tracked: &[bool],
) -> (Vec<Tensor<3>>, Params) {
    let shapes = op.shapes();
    let data = |i: usize| TensorData::new(leaves[i].clone(), shapes[i].clone());
    let track3 = |t: Tensor<3>, i: usize| if tracked[i] { t.require_grad() } else { t };
    let track1 = |t: Tensor<1>, i: usize| if tracked[i] { t.require_grad() } else { t };
    let n = shapes.len();
    let full = match op {
        Op::Swiglu => 2,
        _ => 1,
    };
    let t = (0..full)
        .map(|i| track3(Tensor::<3>::from_data(data(i), device).cast(dtype), i))
        .collect();
    let rows = (full..n - 2)
        .map(|i| track1(Tensor::<1>::from_data(data(i), device).cast(dtype), i))
        .collect();
    let weight = Tensor::<2>::from_data(data(n - 2), device).cast(dtype);
    let weight = if tracked[n - 2] {
        weight.require_grad()
    } else {
        weight
    };
    let bias = track1(
        Tensor::<1>::from_data(data(n - 1), device).cast(dtype),
        n - 1,
    );
    (t, Params { rows, weight, bias })
}

/// Each input's gradient (`None` when untracked) of `sum(w * op(...))`, and the op's values.
fn gradients(
    op: Op,
    leaves: &[Vec<f32>],
    w: &[f32],
    with_bias: bool,
    tracked: &[bool],
    device: &Device,
    routed: bool,
) -> (Vec<f32>, Vec<Option<Vec<f32>>>) {
    let (t, p) = build(op, leaves, device, FloatDType::F32, tracked);
    let out = call(op, &t, &p, with_bias, routed);
    let weights = Tensor::<3>::from_data(TensorData::new(w.to_vec(), X_OUT.to_vec()), device);
    let grads: Gradients = (out.clone() * weights).sum().backward();
    let mut all: Vec<Option<Vec<f32>>> = t
        .iter()
        .map(|t| t.grad(&grads).map(|g| values(&g)))
        .collect();
    all.extend(p.rows.iter().map(|r| r.grad(&grads).map(|g| values(&g))));
    all.push(p.weight.grad(&grads).map(|g| values(&g)));
    all.push(if with_bias {
        p.bias.grad(&grads).map(|g| values(&g))
    } else {
        None
    });
    (values(&out), all)
}

const X_OUT: [usize; 3] = [X[0], X[1], OUTPUTS];

/// `sum(w * op(...))` in `f64` on the plain device (the op's composition runs there).
fn loss_f64(op: Op, leaves: &[Vec<f32>], w: &[f32], with_bias: bool) -> f64 {
    let device = Device::flex();
    let tracked = vec![false; leaves.len()];
    let (t, p) = build(op, leaves, &device, FloatDType::F64, &tracked);
    let out = call(op, &t, &p, with_bias, true)
        .into_data()
        .convert::<f64>()
        .try_to_vec::<f64>()
        .expect("f64 values");
    out.iter().zip(w).map(|(o, w)| o * f64::from(*w)).sum()
}

#[test]
fn values_and_gradients_match_finite_differences_and_burns_composition() {
    let autodiff = Device::flex().autodiff();
    for (seed, op) in [Op::Rms, Op::Layer, Op::Swiglu].into_iter().enumerate() {
        for with_bias in [true, false] {
            let leaves = op.inputs(seed as u64 + 1);
            let w = Rng::new(seed as u64 + 10).vec(X_OUT.iter().product(), -1.0, 1.0);
            let tracked = vec![true; leaves.len()];
            let what = format!("{op:?} (bias: {with_bias})");
            let (out, grads) = gradients(op, &leaves, &w, with_bias, &tracked, &autodiff, true);
            let (out_ref, grads_ref) =
                gradients(op, &leaves, &w, with_bias, &tracked, &autodiff, false);
            assert_close(&out, &out_ref, 1e-5, &format!("{what}: values"));
            for (i, (g, r)) in grads.iter().zip(&grads_ref).enumerate() {
                let name = format!("{what}: input {i}");
                if i == leaves.len() - 1 && !with_bias {
                    assert!(
                        g.is_none() && r.is_none(),
                        "{name}: an absent bias has no gradient"
                    );
                    continue;
                }
                let (g, r) = (g.as_ref().expect(&name), r.as_ref().expect(&name));
                assert_close(g, r, 1e-4, &format!("{name} against Burn's autodiff"));
                let fd = finite_difference(
                    |v| {
                        let mut at = leaves.clone();
                        at[i] = v.to_vec();
                        loss_f64(op, &at, &w, with_bias)
                    },
                    &leaves[i],
                    1.0 / 128.0,
                );
                assert_close(g, &fd, 1e-3, &format!("{name} against finite differences"));
            }
        }
    }
}

#[test]
fn untracked_inputs_get_no_gradient_and_the_others_the_same_one() {
    let autodiff = Device::flex().autodiff();
    for op in [Op::Rms, Op::Layer, Op::Swiglu] {
        let leaves = op.inputs(7);
        let w = Rng::new(8).vec(X_OUT.iter().product(), -1.0, 1.0);
        let all = vec![true; leaves.len()];
        let (_, full) = gradients(op, &leaves, &w, true, &all, &autodiff, true);
        // Only the weight; only the first input (no weight gradient: nothing is recomputed).
        let n = leaves.len();
        for only in [n - 2, 0] {
            let tracked: Vec<bool> = (0..n).map(|i| i == only).collect();
            let (_, some) = gradients(op, &leaves, &w, true, &tracked, &autodiff, true);
            assert_only_tracked_gets_its_gradient(&some, &full, only, 0.0, &format!("{op:?}"));
        }
    }
}

#[test]
fn checkpointing_gives_the_same_bits() {
    let plain = Device::flex().autodiff();
    let checkpointed = Device::flex().autodiff().gradient_checkpointing();
    for op in [Op::Rms, Op::Layer, Op::Swiglu] {
        let leaves = op.inputs(3);
        let w = Rng::new(4).vec(X_OUT.iter().product(), -1.0, 1.0);
        let all = vec![true; leaves.len()];
        let without = gradients(op, &leaves, &w, true, &all, &plain, true);
        let with = gradients(op, &leaves, &w, true, &all, &checkpointed, true);
        assert_eq!(without, with, "{op:?}");
    }
}

#[test]
fn half_precision_runs_the_kernels_close_to_f32() {
    let device = Device::flex();
    for (dtype, float) in [
        (DType::F16, FloatDType::F16),
        (DType::BF16, FloatDType::BF16),
    ] {
        for op in [Op::Rms, Op::Layer, Op::Swiglu] {
            let leaves = op.inputs(5);
            let tracked = vec![false; leaves.len()];
            let (t, p) = build(op, &leaves, &device, float, &tracked);
            let out = call(op, &t, &p, true, true);
            assert_eq!(out.dtype(), dtype, "{op:?}");
            let (t, p) = build(op, &leaves, &device, FloatDType::F32, &tracked);
            let reference = call(op, &t, &p, true, false);
            assert_close(
                &values(&out),
                &values(&reference),
                3e-2,
                &format!("{op:?} {dtype:?}"),
            );
        }
    }
}

#[test]
fn a_weight_whose_rows_are_not_the_inputs_width_panics_with_both_shapes() {
    let device = Device::flex();
    let x = Tensor::<3>::zeros(X, &device);
    let message = panic_message(|| {
        let _ = rms_norm_linear(
            x.clone(),
            Tensor::ones([X[2]], &device),
            Tensor::zeros([OUTPUTS, X[2]], &device),
            None,
            EPS,
        );
    });
    assert_eq!(
        message,
        "rms_norm_linear: `weight` has shape [4, 5], but its rows must be `x`'s width 5 (`x` has \
         shape [2, 3, 5]); pass it as `[5, outputs]`, as Burn's `Linear` keeps it \
         (transpose a `[outputs, 5]` one)"
    );
    let message = panic_message(|| {
        let _ = swiglu_linear(x.clone(), x, Tensor::zeros([3, 2], &device), None);
    });
    assert!(
        message.starts_with(
            "swiglu_linear: `weight` has shape [3, 2], but its rows must be `gate`'s width 5"
        ),
        "{message}"
    );
}

/// 100 rows of 256: on Flex the weight gradient takes 32 rows at a time (four chunks, the last
/// of 4 rows), and `gate` and `up`, made for the call and held by nothing else, take their own
/// gradients; the gradients of the leaves they came from are Burn's all the same.
#[test]
fn many_rows_go_in_chunks_and_inputs_nothing_else_holds_take_their_own_gradients() {
    let device = Device::flex().autodiff();
    let (rows, hidden, outputs) = (100, 256, 8);
    let mut rng = Rng::new(21);
    let mut leaf = |shape: [usize; 2]| {
        let values = rng.vec(shape[0] * shape[1], -1.0, 1.0);
        Tensor::<2>::from_data(TensorData::new(values, shape), &device).require_grad()
    };
    let (g, u, w) = (
        leaf([rows, hidden]),
        leaf([rows, hidden]),
        leaf([hidden, outputs]),
    );
    let (nw, b) = (leaf([1, hidden]), leaf([1, outputs]));
    let weights = leaf([rows, outputs]).detach();
    let grads_of = |out: Tensor<2>, leaves: &[&Tensor<2>]| {
        let grads = (out * weights.clone()).sum().backward();
        leaves
            .iter()
            .map(|t| values(&t.grad(&grads).expect("tracked")))
            .collect::<Vec<_>>()
    };
    let bias = || Some(b.clone().reshape([outputs]));
    let norm = || nw.clone().reshape([hidden]);
    // `swiglu_linear` on fresh `gate` and `up`.
    let (gate, up) = (|| g.clone() * 2.0, || u.clone() * 1.5);
    let routed = grads_of(
        swiglu_linear(gate(), up(), w.clone(), bias()),
        &[&g, &u, &w, &b],
    );
    let burn = grads_of(
        linear(silu(gate()) * up(), w.clone(), bias()),
        &[&g, &u, &w, &b],
    );
    for (i, (r, e)) in routed.iter().zip(&burn).enumerate() {
        assert_close(r, e, 1e-4, &format!("swiglu_linear, gradient {i}"));
    }
    // `rms_norm_linear` and `layer_norm_linear` on a fresh `x`.
    let x = || g.clone() * 2.0;
    let routed = grads_of(
        rms_norm_linear(x(), norm(), w.clone(), bias(), EPS),
        &[&g, &nw, &w, &b],
    );
    let h = {
        let x = x();
        let inverse = (x.clone().powi_scalar(2).mean_dim(1) + EPS).sqrt().recip();
        x * inverse * norm().unsqueeze::<2>()
    };
    let burn = grads_of(linear(h, w.clone(), bias()), &[&g, &nw, &w, &b]);
    for (i, (r, e)) in routed.iter().zip(&burn).enumerate() {
        assert_close(r, e, 1e-4, &format!("rms_norm_linear, gradient {i}"));
    }
    let beta = || u.clone().slice([0..1, 0..hidden]).reshape([hidden]);
    let routed = grads_of(
        layer_norm_linear(x(), norm(), beta(), w.clone(), bias(), EPS),
        &[&g, &nw, &u, &w, &b],
    );
    let h = layer_norm(x(), norm(), Some(beta()), f64::from(EPS));
    let burn = grads_of(linear(h, w.clone(), bias()), &[&g, &nw, &u, &w, &b]);
    for (i, (r, e)) in routed.iter().zip(&burn).enumerate() {
        assert_close(r, e, 1e-4, &format!("layer_norm_linear, gradient {i}"));
    }
}

/// The three ops chained as a SwiGLU MLP and a dense layer read one another's outputs and the
/// outputs of memory-bound ops (`x * 2 + 1`, a residual sum): under gradient checkpointing,
/// `rms_norm_linear` and `layer_norm_linear` (`checkpoint = "recompute"`) are recomputed for
/// the backward passes that read their outputs, and the loss and every gradient are bit for bit
/// those of the run without checkpointing.
#[test]
fn a_checkpointed_mlp_of_the_three_gives_the_same_bits() {
    fn run(device: &Device) -> (Vec<f32>, Vec<Vec<f32>>) {
        let mut rng = Rng::new(49);
        let mut leaf = |dims: [usize; 2]| {
            let values = rng.vec(dims[0] * dims[1], -1.0, 1.0);
            Tensor::<2>::from_data(TensorData::new(values, dims), device).require_grad()
        };
        let (x, w_gate, w_up, w_down, w_dense) = (
            leaf([12, 8]),
            leaf([8, 16]),
            leaf([8, 16]),
            leaf([16, 8]),
            leaf([8, 8]),
        );
        let row = |v: f32| {
            Tensor::<1>::from_data(TensorData::new(vec![v; 8], [8]), device).require_grad()
        };
        let (gain, gamma, beta) = (row(0.75), row(1.25), row(0.1));
        let h = x.clone() * 2.0 + 1.0;
        let project =
            |w: &Tensor<2>| rms_norm_linear(h.clone(), gain.clone(), w.clone(), None, EPS);
        let (gate, up) = (project(&w_gate), project(&w_up));
        let r = h.clone() + swiglu_linear(gate, up, w_down.clone(), None);
        let z = layer_norm_linear(
            r.clone(),
            gamma.clone(),
            beta.clone(),
            w_dense.clone(),
            None,
            EPS,
        );
        let loss = (silu(z) * r).sum();
        let grads = loss.backward();
        let grad2 = |t: &Tensor<2>| values(&t.grad(&grads).expect("a gradient"));
        let grad1 = |t: &Tensor<1>| values(&t.grad(&grads).expect("a gradient"));
        let mut all = [&x, &w_gate, &w_up, &w_down, &w_dense].map(grad2).to_vec();
        all.extend([&gain, &gamma, &beta].map(grad1));
        (values(&loss), all)
    }
    let plain = run(&Device::flex().autodiff());
    let checkpointed = run(&Device::flex().autodiff().gradient_checkpointing());
    assert_eq!(plain.0, checkpointed.0, "the loss");
    for (i, (a, b)) in plain.1.iter().zip(&checkpointed.1).enumerate() {
        assert!(a == b, "gradient {i} differs under checkpointing");
    }
}

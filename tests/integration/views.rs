//! The layouts a transformer feeds the fused ops, forward and backward, against Burn's own
//! composition: `q`, `k`, `v` (or `gate`, `up`) sliced out of one fused projection along the
//! last dimension, and `swap_dims` of a sequence-first tensor. Each runs at a small size and at
//! a size above the fused kernels' parallel threshold, so that a build where Flex runs on rayon
//! (`--features burn-dispatch/rayon,burn-dispatch/simd`) checks the pieces its threads split the rows into.
#![cfg(feature = "autodiff")]

use crate::common::{Rng, assert_close, ints, values};
use burn_tensor::activation::{gelu, log_softmax, relu, silu, softmax};
use burn_tensor::{Device, Int, Tensor, TensorData};

/// `[batch, seq, 3 * hidden]` projections, sliced into three `[batch, seq, hidden]` views.
fn projection(
    rng: &mut Rng,
    device: &Device,
    batch: usize,
    seq: usize,
    hidden: usize,
) -> Tensor<3> {
    let n = batch * seq * 3 * hidden;
    Tensor::from_data(
        TensorData::new(rng.vec(n, -2.0, 2.0), [batch, seq, 3 * hidden]),
        device,
    )
    .require_grad()
}

/// The `i`-th third of the last dimension.
fn third(t: &Tensor<3>, i: usize) -> Tensor<3> {
    let hidden = t.dims()[2] / 3;
    t.clone().narrow(2, i * hidden, hidden)
}

/// A `[seq, batch, hidden]` leaf and its `[batch, seq, hidden]` view.
fn sequence_first(
    rng: &mut Rng,
    device: &Device,
    batch: usize,
    seq: usize,
    hidden: usize,
) -> (Tensor<3>, Tensor<3>) {
    let n = batch * seq * hidden;
    let leaf = Tensor::<3>::from_data(
        TensorData::new(rng.vec(n, -2.0, 2.0), [seq, batch, hidden]),
        device,
    )
    .require_grad();
    let view = leaf.clone().swap_dims(0, 1);
    (leaf, view)
}

fn features(rng: &mut Rng, device: &Device, hidden: usize) -> Tensor<1> {
    Tensor::from_data(TensorData::new(rng.vec(hidden, 0.5, 1.5), [hidden]), device).require_grad()
}

/// Fixed, uneven weights for the loss `sum(out * w)`.
fn weights(dims: [usize; 3], device: &Device) -> Tensor<3> {
    let n = dims.iter().product();
    #[allow(clippy::cast_precision_loss)]
    let w: Vec<f32> = (0..n).map(|i| ((i * 7) % 13) as f32 / 13.0 - 0.3).collect();
    Tensor::from_data(TensorData::new(w, dims), device)
}

/// Runs `op` (ours) and `reference` (Burn's composition) on the same inputs built twice by
/// `inputs` (fresh leaves each time), and compares forward values and every leaf's gradient.
fn compare<L>(
    what: &str,
    inputs: impl Fn() -> (Vec<Tensor<3>>, Vec<Tensor<1>>, L),
    op: impl Fn(&L) -> Tensor<3>,
    reference: impl Fn(&L) -> Tensor<3>,
    tol: f32,
) {
    let device = Device::flex().autodiff();
    let (leaves, params, built) = inputs();
    let ours = op(&built);
    let (ref_leaves, ref_params, ref_built) = inputs();
    let theirs = reference(&ref_built);
    assert_close(
        &values(&ours),
        &values(&theirs),
        tol,
        &format!("{what}: forward"),
    );
    let w = weights(ours.dims(), &device);
    let grads = (ours * w.clone()).sum().backward();
    let ref_grads = (theirs * w).sum().backward();
    for (i, (a, b)) in leaves.iter().zip(&ref_leaves).enumerate() {
        let (a, b) = (
            a.grad(&grads).expect("a gradient"),
            b.grad(&ref_grads).expect("a gradient"),
        );
        assert_eq!(a.dims(), b.dims(), "{what}: leaf {i} gradient shape");
        assert_close(
            &values(&a),
            &values(&b),
            tol,
            &format!("{what}: leaf {i} gradient"),
        );
    }
    for (i, (a, b)) in params.iter().zip(&ref_params).enumerate() {
        // A parameter the op does not use (`beta` of `rms_norm`) has no gradient on either side.
        let (a, b) = match (a.grad(&grads), b.grad(&ref_grads)) {
            (Some(a), Some(b)) => (a, b),
            (None, None) => continue,
            (a, b) => panic!(
                "{what}: parameter {i}: gradient {:?} vs {:?}",
                a.is_some(),
                b.is_some()
            ),
        };
        assert_eq!(a.dims(), b.dims(), "{what}: parameter {i} gradient shape");
        assert_close(
            &values(&a),
            &values(&b),
            tol,
            &format!("{what}: parameter {i} gradient"),
        );
    }
}

/// `[batch, seq, hidden]` of the small and the large case. The large one has 512K elements
/// per view: at the parallel threshold of the row normalisations (`Work::Moderate`) and above
/// that of the `exp`-based kernels, so with Flex on rayon their threaded pieces run.
const SIZES: [(usize, usize, usize); 2] = [(2, 3, 8), (4, 512, 256)];

#[test]
fn elementwise_ops_on_slices_of_a_fused_projection() {
    for (batch, seq, hidden) in SIZES {
        let device = Device::flex().autodiff();
        let seed = (batch * seq * hidden) as u64;
        let inputs = || {
            let proj = projection(&mut Rng::new(seed), &device, batch, seq, hidden);
            let views = [third(&proj, 0), third(&proj, 1), third(&proj, 2)];
            (vec![proj], vec![], views)
        };
        let at = format!("[{batch}, {seq}, {hidden}] of a projection");
        compare(
            &format!("swiglu {at}"),
            inputs,
            |[g, u, _]| burn_route::swiglu(g.clone(), u.clone()),
            |[g, u, _]| silu(g.clone()) * u.clone(),
            1e-5,
        );
        compare(
            &format!("add_relu {at}"),
            inputs,
            |[q, k, _]| burn_route::add_relu(q.clone(), k.clone()),
            |[q, k, _]| relu(q.clone() + k.clone()),
            1e-6,
        );
        compare(
            &format!("axpby {at}"),
            inputs,
            |[q, _, v]| burn_route::axpby(q.clone(), Some(v.clone()), 0.5, -2.0),
            |[q, _, v]| q.clone() * 0.5 + v.clone() * -2.0,
            1e-6,
        );
        compare(
            &format!("scale {at}"),
            inputs,
            |[_, k, _]| burn_route::scale(k.clone(), 3.0),
            |[_, k, _]| k.clone() * 3.0,
            1e-6,
        );
        compare(
            &format!("softmax_last {at}"),
            inputs,
            |[q, _, _]| burn_route::softmax_last(q.clone()),
            |[q, _, _]| softmax(q.clone(), 2),
            1e-5,
        );
        compare(
            &format!("clamp_ste {at}"),
            inputs,
            |[_, _, v]| burn_route::clamp_ste(v.clone(), -1.0, 1.0),
            // The straight-through gradient is the identity's: `v + (clamp(v) - v).detach()`.
            |[_, _, v]| v.clone() + (v.clone().clamp(-1.0, 1.0) - v.clone()).detach(),
            1e-6,
        );
    }
}

#[test]
fn row_ops_on_sequence_first_inputs_swapped_to_batch_first() {
    for (batch, seq, hidden) in SIZES {
        let device = Device::flex().autodiff();
        let seed = (batch + seq + hidden) as u64;
        let inputs = || {
            let mut rng = Rng::new(seed);
            let (leaf, view) = sequence_first(&mut rng, &device, batch, seq, hidden);
            let (gamma, beta) = (
                features(&mut rng, &device, hidden),
                features(&mut rng, &device, hidden),
            );
            (
                vec![leaf],
                vec![gamma.clone(), beta.clone()],
                (view, gamma, beta),
            )
        };
        let at = format!("[{batch}, {seq}, {hidden}] swapped from sequence-first");
        compare(
            &format!("rms_norm {at}"),
            inputs,
            |(x, w, _)| burn_route::rms_norm(x.clone(), w.clone(), 1e-5),
            |(x, w, _)| {
                let r = (x.clone().powi_scalar(2).mean_dim(2) + 1e-5).sqrt().recip();
                x.clone() * r * w.clone().reshape([1, 1, hidden])
            },
            1e-4,
        );
        compare(
            &format!("layer_norm {at}"),
            inputs,
            |(x, g, b)| burn_route::layer_norm(x.clone(), g.clone(), b.clone(), 1e-5),
            |(x, g, b)| {
                let mean = x.clone().mean_dim(2);
                let centered = x.clone() - mean;
                let var = centered.clone().powi_scalar(2).mean_dim(2);
                centered / (var + 1e-5).sqrt() * g.clone().reshape([1, 1, hidden])
                    + b.clone().reshape([1, 1, hidden])
            },
            1e-4,
        );
        compare(
            &format!("bias_gelu {at}"),
            inputs,
            |(x, b, _)| burn_route::bias_gelu(x.clone(), b.clone()),
            |(x, b, _)| gelu(x.clone() + b.clone().reshape([1, 1, hidden])),
            1e-5,
        );
        compare(
            &format!("softmax_last {at}"),
            inputs,
            |(x, _, _)| burn_route::softmax_last(x.clone()),
            |(x, _, _)| softmax(x.clone(), 2),
            1e-5,
        );
    }
}

#[test]
fn cross_entropy_argmax_and_topk_on_a_sliced_logit_matrix() {
    for (rows, classes) in [(3, 5), (1024, 256)] {
        let device = Device::flex().autodiff();
        let values_of_wide = Rng::new(rows as u64).vec(rows * 2 * classes, -2.0, 2.0);
        // The logits are the second half of a `[rows, 2 * classes]` matrix (built twice: the
        // reference gets its own graph).
        let leaf = || {
            Tensor::<2>::from_data(
                TensorData::new(values_of_wide.clone(), [rows, 2 * classes]),
                &device,
            )
            .require_grad()
        };
        let (wide, ref_wide) = (leaf(), leaf());
        let logits = wide.clone().narrow(1, classes, classes);
        let ref_logits = ref_wide.clone().narrow(1, classes, classes);
        #[allow(clippy::cast_possible_truncation, clippy::cast_possible_wrap)]
        let targets: Vec<i64> = (0..rows).map(|r| ((r * 7) % classes) as i64).collect();
        let targets = Tensor::<1, Int>::from_data(TensorData::new(targets, [rows]), &device);
        let loss = burn_route::cross_entropy_logits(logits.clone(), targets.clone());
        let hot = targets.clone().one_hot::<2>(classes).float();
        let reference = -(log_softmax(ref_logits, 1) * hot).sum_dim(1).mean();
        assert_close(
            &values(&loss),
            &values(&reference),
            1e-5,
            "cross-entropy forward",
        );
        let (g, rg) = (loss.backward(), reference.backward());
        assert_close(
            &values(&wide.grad(&g).unwrap()),
            &values(&ref_wide.grad(&rg).unwrap()),
            1e-5,
            "cross-entropy gradient",
        );
        let plain = logits.clone();
        assert_eq!(
            ints(&burn_route::argmax_last(&plain)),
            ints(&plain.clone().argmax(1)),
            "argmax_last"
        );
        let (top, idx) = burn_route::topk_last(&plain, 3);
        let (ref_top, ref_idx) = plain.topk_with_indices(3, 1);
        assert_close(&values(&top), &values(&ref_top), 0.0, "topk values");
        assert_eq!(ints(&idx), ints(&ref_idx), "topk indices");
    }
}

//! Forward values of the fused-layer ops (`bias_gelu`, `swiglu`, `rms_norm`, `layer_norm`,
//! `softmax_last`, `cross_entropy_logits`, `dropout`, `clamp_ste`, `topk_last`) on Flex, against
//! the same computation written with Burn's `Tensor` API.
//!
//! Every op is checked on contiguous `f32` inputs (the fused kernels) and on the same logical
//! values stored as a transposed view, a step-2 slice and a view with a start offset (the
//! fallbacks that compose Flex's own ops), on other float dtypes, through the `Dispatch` level,
//! and for the exact messages of its validation panics.

use crate::common::{Rng, assert_close, ints, panic_message, values};
use burn_route::dispatch;
use burn_route::ops::RoutedOps;
use burn_route::rt::{Dispatch, Flex};
use burn_route::{
    bias_gelu, clamp_ste, cross_entropy_logits, dropout, layer_norm, rms_norm, softmax_last,
    swiglu, topk_last,
};
use burn_tensor::activation::{gelu, log_softmax, silu, softmax};
use burn_tensor::{Bool, DType, Device, Int, Tensor, TensorData, s};

/// Relative (and absolute near zero) tolerance of the `f32` comparisons.
const TOL: f32 = 1e-5;

/// A value no correct kernel reads: it fills the gaps of the strided and offset layouts.
const GARBAGE: f64 = -99.0;

// --- Helpers ---------------------------------------------------------------------------------

fn make<const D: usize>(
    data: Vec<f64>,
    shape: [usize; D],
    dtype: DType,
    device: &Device,
) -> Tensor<D> {
    Tensor::from_data(TensorData::new(data, shape), (device, dtype))
}

fn random<const D: usize>(rng: &mut Rng, shape: [usize; D], lo: f32, hi: f32) -> Tensor<D> {
    let n = shape.iter().product();
    let data = rng.vec(n, lo, hi).into_iter().map(f64::from).collect();
    make(data, shape, DType::F32, &Device::flex())
}

/// Bit patterns, so that NaN compares equal to itself.
fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|v| v.to_bits()).collect()
}

fn values64<const D: usize>(t: &Tensor<D>) -> Vec<f64> {
    t.clone()
        .into_data()
        .convert::<f64>()
        .try_to_vec::<f64>()
        .expect("float data")
}

fn bools<const D: usize>(t: &Tensor<D, Bool>) -> Vec<bool> {
    ints(&t.clone().int()).into_iter().map(|v| v != 0).collect()
}

/// Whether the Flex storage of `t` is contiguous, and its start offset.
fn flex_layout<const D: usize>(t: &Tensor<D>) -> (bool, usize) {
    let flex = t
        .clone()
        .try_into_primitive::<Flex>()
        .expect("a Flex float tensor");
    (flex.is_contiguous(), flex.layout().start_offset())
}

/// The logical values of `t` in several memory layouts: contiguous (the fused kernels), a
/// transposed view of a buffer stored with the last two dimensions swapped, every other element
/// of a buffer twice as wide (a step-2 slice), and the rows of a taller buffer after its first
/// row (contiguous, but with a start offset). Same dtype and device as `t`.
fn layouts<const D: usize>(t: &Tensor<D>) -> Vec<(&'static str, Tensor<D>)> {
    let device = t.device();
    let dtype = t.dtype();
    let shape: [usize; D] = t.dims();
    let data = values64(t);
    let n = data.len();
    let width = shape[D - 1];
    let mut out = vec![("contiguous", t.clone())];

    if D >= 2 {
        let swapped = t.clone().swap_dims(D - 2, D - 1);
        let stored = Tensor::<D>::from_data(swapped.into_data(), (&device, dtype));
        let view = stored.swap_dims(D - 2, D - 1);
        if shape[D - 2] > 1 && shape[D - 1] > 1 {
            assert!(!flex_layout(&view).0, "transposed view must be strided");
        }
        out.push(("transposed", view));
    }

    let mut wide = Vec::with_capacity(2 * n);
    for v in &data {
        wide.push(*v);
        wide.push(GARBAGE);
    }
    let mut wide_shape = shape;
    wide_shape[D - 1] = 2 * width;
    let view = make(wide, wide_shape, dtype, &device).slice_dim(D - 1, s![..;2]);
    if n > 1 {
        assert!(!flex_layout(&view).0, "step-2 view must be strided");
    }
    out.push(("stepped", view));

    let row = n / shape[0];
    let mut tall = vec![GARBAGE; row];
    tall.extend(&data);
    let mut tall_shape = shape;
    tall_shape[0] += 1;
    let view = make(tall, tall_shape, dtype, &device).slice_dim(0, 1..shape[0] + 1);
    if row > 0 {
        assert_eq!(flex_layout(&view), (true, row), "offset view layout");
    }
    out.push(("offset", view));

    for (name, view) in &out {
        assert_eq!(view.dims(), shape, "{name} layout shape");
        assert_eq!(bits(&values64(view)), bits(&data), "{name} layout values");
    }
    out
}

/// Asserts that a kernel left its (shared) input untouched.
fn assert_unchanged<const D: usize>(t: &Tensor<D>, before: &[f64], what: &str) {
    assert_eq!(
        bits(&values64(t)),
        bits(before),
        "{what}: the kernel wrote into its input"
    );
}

/// The `[features]` parameter broadcast over `x`'s leading dimensions.
fn row<const D: usize>(param: Tensor<1>) -> Tensor<D> {
    param.unsqueeze::<D>()
}

// --- References written with Burn's Tensor API -------------------------------------------------

fn ref_bias_gelu<const D: usize>(x: Tensor<D>, bias: Tensor<1>) -> Tensor<D> {
    gelu(x + row::<D>(bias))
}

fn ref_swiglu<const D: usize>(gate: Tensor<D>, up: Tensor<D>) -> Tensor<D> {
    silu(gate) * up
}

fn ref_rms_norm<const D: usize>(x: Tensor<D>, weight: Tensor<1>, eps: f32) -> Tensor<D> {
    let rms = x
        .clone()
        .powf_scalar(2.0)
        .mean_dim(D - 1)
        .add_scalar(eps)
        .sqrt();
    x / rms * row::<D>(weight)
}

fn ref_layer_norm<const D: usize>(
    x: Tensor<D>,
    gamma: Tensor<1>,
    beta: Tensor<1>,
    eps: f32,
) -> Tensor<D> {
    let centered = x.clone() - x.mean_dim(D - 1);
    let var = centered.clone().powf_scalar(2.0).mean_dim(D - 1);
    centered / var.add_scalar(eps).sqrt() * row::<D>(gamma) + row::<D>(beta)
}

fn ref_softmax<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    softmax(x, D - 1)
}

fn ref_cross_entropy(logits: Tensor<2>, targets: Tensor<1, Int>) -> Tensor<1> {
    let [batch, _] = logits.dims();
    let picked = log_softmax(logits, 1).gather(1, targets.reshape([batch, 1]));
    picked.mean().neg()
}

/// `mean(logsumexp(row) - row[target])` in `f64`.
fn hand_cross_entropy(logits: &[f64], classes: usize, targets: &[i64]) -> f64 {
    let total: f64 = logits
        .chunks_exact(classes)
        .zip(targets)
        .map(|(row, &t)| {
            let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let lse = max + row.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
            lse - row[usize::try_from(t).expect("valid target")]
        })
        .sum();
    #[allow(clippy::cast_precision_loss)]
    let batch = targets.len() as f64;
    total / batch
}

/// The `k` largest of every row (last dimension), larger first, ties by lower index.
fn hand_topk(data: &[f64], width: usize, k: usize) -> (Vec<f64>, Vec<i64>) {
    let mut top_values = Vec::new();
    let mut top_indices = Vec::new();
    for row in data.chunks_exact(width) {
        let mut order: Vec<usize> = (0..width).collect();
        order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
        for &i in &order[..k] {
            top_values.push(row[i]);
            top_indices.push(i64::try_from(i).expect("index fits"));
        }
    }
    (top_values, top_indices)
}

fn to_f32(v: &[f64]) -> Vec<f32> {
    #[allow(clippy::cast_possible_truncation)]
    v.iter().map(|&v| v as f32).collect()
}

// --- bias_gelu -------------------------------------------------------------------------------

fn check_bias_gelu<const D: usize>(rng: &mut Rng, shape: [usize; D]) {
    let x = random(rng, shape, -3.0, 3.0);
    let bias = random(rng, [shape[D - 1]], -1.0, 1.0);
    let expected = values(&ref_bias_gelu(x.clone(), bias.clone()));
    for (xl, xv) in layouts(&x) {
        for (bl, bv) in layouts(&bias) {
            let what = format!("bias_gelu {shape:?} x {xl}, bias {bl}");
            let (x_before, b_before) = (values64(&xv), values64(&bv));
            let out = bias_gelu(xv.clone(), bv.clone());
            assert_eq!(out.dims(), shape, "{what}: shape");
            assert_eq!(out.dtype(), DType::F32, "{what}: dtype");
            assert_close(&values(&out), &expected, TOL, &what);
            assert_unchanged(&xv, &x_before, &what);
            assert_unchanged(&bv, &b_before, &what);
        }
    }
}

#[test]
fn bias_gelu_matches_gelu_of_biased_input() {
    let mut rng = Rng::new(101);
    check_bias_gelu(&mut rng, [1, 1]);
    check_bias_gelu(&mut rng, [3, 5]);
    check_bias_gelu(&mut rng, [64, 33]);
    check_bias_gelu(&mut rng, [2, 3, 7]);
    check_bias_gelu(&mut rng, [9]);
}

#[test]
fn bias_gelu_exact_values() {
    let device = Device::flex();
    let x = Tensor::<2>::from_data([[0.0, 1.0, -1.0], [2.0, -2.0, 0.5]], &device);
    let bias = Tensor::<1>::from_data([0.0, 0.0, 0.5], &device);
    // gelu(z) = z * Phi(z): gelu(0) = 0, gelu(1) = 0.8413447, gelu(-1) = -0.15865526,
    // gelu(-0.5) = -0.15426877, gelu(2) = 1.9544997, gelu(-2) = -0.04550028, gelu(1) again.
    assert_close(
        &values(&bias_gelu(x, bias)),
        &[
            0.0,
            0.841_344_7,
            -0.154_268_77,
            1.954_499_7,
            -0.045_500_28,
            0.841_344_7,
        ],
        1e-6,
        "bias_gelu exact",
    );
}

// --- swiglu ----------------------------------------------------------------------------------

fn check_swiglu<const D: usize>(rng: &mut Rng, shape: [usize; D]) {
    let gate = random(rng, shape, -4.0, 4.0);
    let up = random(rng, shape, -2.0, 2.0);
    let expected = values(&ref_swiglu(gate.clone(), up.clone()));
    for (gl, gv) in layouts(&gate) {
        for (ul, uv) in layouts(&up) {
            let what = format!("swiglu {shape:?} gate {gl}, up {ul}");
            let (g_before, u_before) = (values64(&gv), values64(&uv));
            let out = swiglu(gv.clone(), uv.clone());
            assert_eq!(out.dims(), shape, "{what}: shape");
            assert_close(&values(&out), &expected, TOL, &what);
            assert_unchanged(&gv, &g_before, &what);
            assert_unchanged(&uv, &u_before, &what);
        }
    }
    // The same tensor as both inputs: silu(x) * x.
    let what = format!("swiglu {shape:?} (x, x)");
    let expected = values(&ref_swiglu(gate.clone(), gate.clone()));
    assert_close(&values(&swiglu(gate.clone(), gate)), &expected, TOL, &what);
}

#[test]
fn swiglu_matches_silu_times_up() {
    let mut rng = Rng::new(102);
    check_swiglu(&mut rng, [1, 1]);
    check_swiglu(&mut rng, [3, 5]);
    check_swiglu(&mut rng, [64, 33]);
    check_swiglu(&mut rng, [2, 3, 7]);
}

// --- rms_norm --------------------------------------------------------------------------------

fn check_rms_norm<const D: usize>(rng: &mut Rng, shape: [usize; D]) {
    let x = random(rng, shape, -2.0, 2.0);
    let weight = random(rng, [shape[D - 1]], 0.5, 1.5);
    for eps in [1e-5, 0.1] {
        let expected = values(&ref_rms_norm(x.clone(), weight.clone(), eps));
        for (xl, xv) in layouts(&x) {
            for (wl, wv) in layouts(&weight) {
                let what = format!("rms_norm {shape:?} eps {eps} x {xl}, weight {wl}");
                let (x_before, w_before) = (values64(&xv), values64(&wv));
                let out = rms_norm(xv.clone(), wv.clone(), eps);
                assert_eq!(out.dims(), shape, "{what}: shape");
                assert_close(&values(&out), &expected, TOL, &what);
                assert_unchanged(&xv, &x_before, &what);
                assert_unchanged(&wv, &w_before, &what);
            }
        }
    }
}

#[test]
fn rms_norm_matches_x_over_root_mean_square() {
    let mut rng = Rng::new(103);
    check_rms_norm(&mut rng, [1, 1]);
    check_rms_norm(&mut rng, [3, 5]);
    check_rms_norm(&mut rng, [64, 33]);
    check_rms_norm(&mut rng, [2, 3, 7]);
}

#[test]
fn rms_norm_exact_values_and_eps() {
    let device = Device::flex();
    // Row [3, 4]: mean square 12.5; with eps 0 the row becomes [3, 4] / sqrt(12.5).
    let x = Tensor::<2>::from_data([[3.0, 4.0], [0.0, 0.0]], &device);
    let weight = Tensor::<1>::from_data([1.0, 2.0], &device);
    let r = 12.5_f32.sqrt();
    assert_close(
        &values(&rms_norm(x.clone(), weight.clone(), 0.0))[..2],
        &[3.0 / r, 8.0 / r],
        1e-6,
        "rms_norm eps 0",
    );
    // A zero row stays zero (eps keeps it finite); eps enters under the root.
    assert_close(
        &values(&rms_norm(x, weight, 0.5)),
        &[3.0 / 13.0_f32.sqrt(), 8.0 / 13.0_f32.sqrt(), 0.0, 0.0],
        1e-6,
        "rms_norm eps 0.5",
    );
}

// --- layer_norm ------------------------------------------------------------------------------

fn check_layer_norm<const D: usize>(rng: &mut Rng, shape: [usize; D]) {
    let x = random(rng, shape, -2.0, 3.0);
    let gamma = random(rng, [shape[D - 1]], 0.5, 1.5);
    let beta = random(rng, [shape[D - 1]], -1.0, 1.0);
    for eps in [1e-5, 0.1] {
        let expected = values(&ref_layer_norm(x.clone(), gamma.clone(), beta.clone(), eps));
        for (xl, xv) in layouts(&x) {
            for ((gl, gv), (bl, bv)) in layouts(&gamma)
                .into_iter()
                .zip(layouts(&beta).into_iter().rev())
            {
                let what = format!("layer_norm {shape:?} eps {eps} x {xl}, gamma {gl}, beta {bl}");
                let x_before = values64(&xv);
                let out = layer_norm(xv.clone(), gv.clone(), bv.clone(), eps);
                assert_eq!(out.dims(), shape, "{what}: shape");
                assert_close(&values(&out), &expected, TOL, &what);
                assert_unchanged(&xv, &x_before, &what);
            }
        }
    }
}

#[test]
fn layer_norm_matches_standardized_affine() {
    let mut rng = Rng::new(104);
    check_layer_norm(&mut rng, [1, 1]);
    check_layer_norm(&mut rng, [3, 5]);
    check_layer_norm(&mut rng, [64, 33]);
    check_layer_norm(&mut rng, [2, 3, 7]);
}

#[test]
fn layer_norm_uses_the_biased_variance() {
    let device = Device::flex();
    // Row [1, 3]: mean 2, biased variance 1 (the unbiased one would be 2).
    let x = Tensor::<2>::from_data([[1.0, 3.0]], &device);
    let gamma = Tensor::<1>::from_data([1.0, 1.0], &device);
    let beta = Tensor::<1>::from_data([0.0, 10.0], &device);
    assert_close(
        &values(&layer_norm(x.clone(), gamma.clone(), beta.clone(), 0.0)),
        &[-1.0, 11.0],
        1e-6,
        "layer_norm biased variance",
    );
    assert_close(
        &values(&layer_norm(x.transpose().transpose(), gamma, beta, 3.0)),
        &[-0.5, 10.5],
        1e-6,
        "layer_norm eps",
    );
}

// --- softmax_last ----------------------------------------------------------------------------

fn check_softmax<const D: usize>(rng: &mut Rng, shape: [usize; D]) {
    let x = random(rng, shape, -5.0, 5.0);
    let expected = values(&ref_softmax(x.clone()));
    for (xl, xv) in layouts(&x) {
        let what = format!("softmax_last {shape:?} x {xl}");
        let before = values64(&xv);
        let out = softmax_last(xv.clone());
        assert_eq!(out.dims(), shape, "{what}: shape");
        assert_close(&values(&out), &expected, TOL, &what);
        assert_unchanged(&xv, &before, &what);
        for row in values(&out).chunks_exact(shape[D - 1]) {
            assert!(
                (row.iter().sum::<f32>() - 1.0).abs() < 1e-5,
                "{what}: row sum"
            );
        }
    }
}

#[test]
fn softmax_last_matches_burn_softmax() {
    let mut rng = Rng::new(105);
    check_softmax(&mut rng, [1, 1]);
    check_softmax(&mut rng, [3, 5]);
    check_softmax(&mut rng, [64, 33]);
    check_softmax(&mut rng, [2, 3, 7]);
    check_softmax(&mut rng, [6]);
}

#[test]
fn softmax_last_is_stable_for_large_logits() {
    let device = Device::flex();
    // exp(1000) overflows f32: only a max-subtracting softmax gets these right.
    let data = [1000.0, 999.0, 998.0, -1000.0, -1001.0, -1003.0];
    let x = Tensor::<2>::from_data(TensorData::new(data.to_vec(), [2, 3]), &device);
    let mut expected = Vec::new();
    for row in data.chunks_exact(3) {
        let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = row.iter().map(|v| (v - max).exp()).sum();
        expected.extend(row.iter().map(|v| (v - max).exp() / sum));
    }
    for (layout, xv) in layouts(&x) {
        assert_close(
            &values(&softmax_last(xv)),
            &to_f32(&expected),
            TOL,
            &format!("softmax_last large logits, {layout}"),
        );
    }
}

// --- cross_entropy_logits --------------------------------------------------------------------

fn random_targets(rng: &mut Rng, batch: usize, classes: usize) -> Vec<i64> {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    (0..batch)
        .map(|_| (rng.uniform(0.0, classes as f32) as i64).min(classes as i64 - 1))
        .collect()
}

/// The targets in the device's default int dtype, contiguous (read by the fused kernel) and as a
/// step-2 view (the fallback).
fn target_layouts(targets: &[i64], device: &Device) -> Vec<(&'static str, Tensor<1, Int>)> {
    let batch = targets.len();
    let mut wide = Vec::with_capacity(2 * batch);
    for t in targets {
        wide.push(*t);
        wide.push(0);
    }
    let stepped =
        Tensor::<1, Int>::from_data(TensorData::new(wide, [2 * batch]), device).slice(s![..;2]);
    vec![
        (
            "contiguous",
            Tensor::from_data(TensorData::new(targets.to_vec(), [batch]), device),
        ),
        ("stepped", stepped),
    ]
}

#[test]
fn cross_entropy_logits_matches_log_softmax_gather_and_hand_computation() {
    let device = Device::flex();
    let mut rng = Rng::new(106);
    let mut failures = Vec::new();
    for [batch, classes] in [[1, 1], [3, 5], [64, 33], [7, 2]] {
        let logits = random(&mut rng, [batch, classes], -4.0, 4.0);
        let targets = random_targets(&mut rng, batch, classes);
        let hand = hand_cross_entropy(&values64(&logits), classes, &targets);
        let reference = values(&ref_cross_entropy(
            logits.clone(),
            Tensor::from_data(TensorData::new(targets.clone(), [batch]), &device),
        ));
        assert_close(
            &reference,
            &to_f32(&[hand]),
            TOL,
            "Tensor-API reference vs hand",
        );
        for (ll, lv) in layouts(&logits) {
            for (tl, tv) in target_layouts(&targets, &device) {
                let what = format!("[{batch}, {classes}] logits {ll}, targets {tl}");
                let before = values64(&lv);
                match outcome(|| cross_entropy_logits(lv.clone(), tv)) {
                    Ok(out) => {
                        assert_eq!(out.dims(), [1], "{what}: shape");
                        assert_close(&values(&out), &reference, TOL, &what);
                    }
                    Err(message) => failures.push(format!("{what}: panicked: {message}")),
                }
                assert_unchanged(&lv, &before, &what);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "cross_entropy_logits failed for {} input combinations:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn cross_entropy_logits_accepts_i64_and_i32_targets_in_every_layout() {
    // The fused kernel reads `i64` and `i32` targets; the fallback must too, whatever the
    // device's default int dtype.
    let device = Device::flex();
    let mut rng = Rng::new(117);
    let logits = random(&mut rng, [6, 4], -3.0, 3.0);
    let targets = vec![0_i64, 3, 1, 2, 3, 0];
    let hand = to_f32(&[hand_cross_entropy(&values64(&logits), 4, &targets)]);
    let mut failures = Vec::new();
    for dtype in [DType::I64, DType::I32] {
        for (layout, lv) in layouts(&logits) {
            let t = Tensor::<1, Int>::from_data(
                TensorData::new(targets.clone(), [6]),
                (&device, dtype),
            );
            assert_eq!(t.dtype(), dtype);
            let what = format!("{dtype:?} targets, logits {layout}");
            match outcome(|| cross_entropy_logits(lv, t)) {
                Ok(out) => assert_close(&values(&out), &hand, TOL, &what),
                Err(message) => failures.push(format!("{what}: panicked: {message:?}")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} cases panicked:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn cross_entropy_logits_exact_value_and_large_logits() {
    let device = Device::flex();
    // Uniform logits: the loss is ln(classes) whatever the targets.
    let logits = Tensor::<2>::from_data([[2.0, 2.0, 2.0, 2.0], [-1.0, -1.0, -1.0, -1.0]], &device);
    let targets = Tensor::<1, Int>::from_data([3, 0], &device);
    assert_close(
        &values(&cross_entropy_logits(logits, targets)),
        &[4.0_f32.ln()],
        1e-6,
        "uniform logits",
    );
    // exp(500) overflows: only a max-subtracting logsumexp is finite here.
    let data = vec![500.0, 498.0, 0.0, -500.0, -501.0, -499.0];
    let logits = Tensor::<2>::from_data(TensorData::new(data.clone(), [2, 3]), &device);
    let hand = hand_cross_entropy(&data, 3, &[1, 2]);
    for (layout, lv) in layouts(&logits) {
        let targets = Tensor::<1, Int>::from_data([1, 2], &device);
        assert_close(
            &values(&cross_entropy_logits(lv, targets)),
            &to_f32(&[hand]),
            TOL,
            &format!("large logits, {layout}"),
        );
    }
}

const TARGET_5_OF_ROW_1: &str = "cross_entropy_logits: target 5 of row 1 is outside 0..3";
const TARGET_MINUS_1_OF_ROW_0: &str = "cross_entropy_logits: target -1 of row 0 is outside 0..3";

#[test]
fn cross_entropy_logits_panics_on_out_of_range_targets_fused_path() {
    let device = Device::flex();
    let logits = Tensor::<2>::from_data([[0.5, -1.0, 2.0], [0.25, 1.5, -0.5]], &device);
    let too_big = Tensor::<1, Int>::from_data([0, 5], &device);
    assert_eq!(
        panic_message(|| drop(cross_entropy_logits(logits.clone(), too_big))),
        TARGET_5_OF_ROW_1
    );
    let negative = Tensor::<1, Int>::from_data([-1, 0], &device);
    assert_eq!(
        panic_message(|| drop(cross_entropy_logits(logits.clone(), negative))),
        TARGET_MINUS_1_OF_ROW_0
    );
    // `classes` itself is out of range.
    let at_end = Tensor::<1, Int>::from_data([3, 0], &device);
    assert_eq!(
        panic_message(|| drop(cross_entropy_logits(logits, at_end))),
        "cross_entropy_logits: target 3 of row 0 is outside 0..3"
    );
}

#[test]
fn cross_entropy_logits_panics_on_out_of_range_targets_every_layout() {
    let device = Device::flex();
    let logits = Tensor::<2>::from_data([[0.5, -1.0, 2.0], [0.25, 1.5, -0.5]], &device);
    let mut failures = Vec::new();
    for (layout, lv) in layouts(&logits) {
        for (targets, expected) in [
            ([0, 5], TARGET_5_OF_ROW_1),
            ([-1, 0], TARGET_MINUS_1_OF_ROW_0),
        ] {
            for (tl, tv) in target_layouts(&targets, &device) {
                let what = format!("logits {layout}, targets {targets:?} {tl}");
                match outcome(|| cross_entropy_logits(lv.clone(), tv)) {
                    Err(message) if message == expected => {}
                    Err(message) => failures.push(format!("{what}: panicked with {message:?}")),
                    Ok(loss) => failures.push(format!(
                        "{what}: no panic, returned loss {:?}",
                        values(&loss)
                    )),
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "expected the panic {TARGET_5_OF_ROW_1:?} / {TARGET_MINUS_1_OF_ROW_0:?}; {} cases \
         differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// --- dropout ---------------------------------------------------------------------------------

const DROPOUT_SHAPE: [usize; 2] = [100, 1000];

#[test]
fn dropout_statistics_and_scaling() {
    let mut rng = Rng::new(107);
    let x = random(&mut rng, DROPOUT_SHAPE, 0.5, 1.5);
    let xs = values64(&x);
    #[allow(clippy::cast_precision_loss)]
    let n = xs.len() as f64;
    for p in [0.1_f32, 0.25, 0.5, 0.9] {
        let (out, mask) = dropout(x.clone(), p, 42);
        assert_eq!(out.dims(), DROPOUT_SHAPE);
        assert_eq!(mask.dims(), DROPOUT_SHAPE);
        assert_eq!(out.dtype(), DType::F32);
        let keep = bools(&mask);
        let out = values64(&out);
        #[allow(clippy::cast_precision_loss)]
        let kept = keep.iter().filter(|k| **k).count() as f64 / n;
        // Binomial standard deviation at p = 0.5 on 1e5 elements: 0.0016; this is 6 of them.
        assert!(
            (kept - (1.0 - f64::from(p))).abs() < 0.01,
            "p {p}: kept fraction {kept}"
        );
        let scale = 1.0 / (1.0 - f64::from(p));
        for (i, ((o, k), x)) in out.iter().zip(&keep).zip(&xs).enumerate() {
            if *k {
                assert!(
                    (o - x * scale).abs() <= 1e-6 * (x * scale).abs(),
                    "p {p}: element {i} kept as {o}, expected {}",
                    x * scale
                );
            } else {
                assert_eq!(*o, 0.0, "p {p}: element {i} dropped but {o}");
            }
        }
        // Same seed, same mask (and the mask does not depend on the values).
        let (again, mask_again) = dropout(x.clone(), p, 42);
        assert_eq!(bools(&mask_again), keep, "p {p}: same seed");
        assert_eq!(values64(&again), out, "p {p}: same seed output");
        let other_values = random(&mut rng, DROPOUT_SHAPE, -1.0, 1.0);
        assert_eq!(
            bools(&dropout(other_values, p, 42).1),
            keep,
            "p {p}: mask vs values"
        );
        // Another seed: an independent mask, differing in about 2 p (1 - p) of the elements.
        let other = bools(&dropout(x.clone(), p, 43).1);
        #[allow(clippy::cast_precision_loss)]
        let differ = keep.iter().zip(&other).filter(|(a, b)| a != b).count() as f64 / n;
        let expected = 2.0 * f64::from(p) * (1.0 - f64::from(p));
        assert!(
            (differ - expected).abs() < 0.01,
            "p {p}: seeds 42 and 43 differ in {differ}, expected about {expected}"
        );
    }
    assert_unchanged(&x, &xs, "dropout");
}

#[test]
fn dropout_p_zero_keeps_everything_and_p_one_drops_everything() {
    let mut rng = Rng::new(108);
    let x = random(&mut rng, [37, 29], -2.0, 2.0);
    for (layout, xv) in layouts(&x) {
        let (out, mask) = dropout(xv.clone(), 0.0, 7);
        assert_eq!(values64(&out), values64(&x), "p 0, {layout}: output");
        assert!(bools(&mask).iter().all(|k| *k), "p 0, {layout}: mask");
        let (out, mask) = dropout(xv, 1.0, 7);
        assert!(
            values64(&out).iter().all(|v| *v == 0.0),
            "p 1, {layout}: output"
        );
        assert!(bools(&mask).iter().all(|k| !*k), "p 1, {layout}: mask");
    }
}

#[test]
fn dropout_mask_is_the_same_for_every_layout() {
    let mut rng = Rng::new(109);
    for shape in [[1, 1], [3, 5], [64, 33]] {
        let x = random(&mut rng, shape, -2.0, 2.0);
        let (out, mask) = dropout(x.clone(), 0.3, 5);
        let (out, keep) = (values(&out), bools(&mask));
        for (layout, xv) in layouts(&x) {
            let what = format!("dropout {shape:?} {layout}");
            let before = values64(&xv);
            let (o, m) = dropout(xv.clone(), 0.3, 5);
            assert_eq!(m.dims(), shape, "{what}: mask shape");
            assert_eq!(bools(&m), keep, "{what}: mask");
            assert_close(&values(&o), &out, 1e-6, &what);
            assert_unchanged(&xv, &before, &what);
        }
    }
    // Rank 3 too.
    let x = random(&mut rng, [2, 3, 7], -2.0, 2.0);
    let keep = bools(&dropout(x.clone(), 0.5, 9).1);
    for (layout, xv) in layouts(&x) {
        assert_eq!(
            bools(&dropout(xv, 0.5, 9).1),
            keep,
            "dropout [2, 3, 7] {layout}"
        );
    }
}

#[test]
fn dropout_rejects_p_outside_zero_one() {
    let device = Device::flex();
    let x = Tensor::<2>::from_data([[1.0, 2.0], [3.0, 4.0]], &device);
    for (layout, xv) in layouts(&x) {
        for (p, shown) in [
            (1.5_f32, "1.5"),
            (-0.1, "-0.1"),
            (f32::NAN, "NaN"),
            (1.000_001, "1.000001"),
        ] {
            assert_eq!(
                panic_message(|| drop(dropout(xv.clone(), p, 0))),
                format!("dropout: `p` must be a probability in [0, 1], got {shown}"),
                "{layout}"
            );
        }
    }
}

// --- clamp_ste -------------------------------------------------------------------------------

fn check_clamp<const D: usize>(rng: &mut Rng, shape: [usize; D]) {
    let x = random(rng, shape, -3.0, 3.0);
    for (lo, hi) in [(-1.0_f32, 1.0_f32), (0.5, 0.5), (-10.0, 10.0), (0.0, 2.5)] {
        let expected = values(&x.clone().clamp(lo, hi));
        for (xl, xv) in layouts(&x) {
            let what = format!("clamp_ste {shape:?} [{lo}, {hi}] x {xl}");
            let before = values64(&xv);
            let out = clamp_ste(xv.clone(), lo, hi);
            assert_eq!(out.dims(), shape, "{what}: shape");
            assert_close(&values(&out), &expected, 0.0, &what);
            assert_unchanged(&xv, &before, &what);
        }
    }
}

#[test]
fn clamp_ste_matches_clamp() {
    let mut rng = Rng::new(110);
    check_clamp(&mut rng, [1, 1]);
    check_clamp(&mut rng, [3, 5]);
    check_clamp(&mut rng, [64, 33]);
    check_clamp(&mut rng, [2, 3, 7]);
}

/// The light element-wise kernels (`Work::Light`) above the size from which they split across
/// threads when Flex runs on rayon (1M elements; CI runs this file in that build too), with
/// a row count that leaves a short last piece: every element of the output is written, by
/// whichever thread, with the composition's value (the same `f32` operations: bit for bit).
#[test]
fn light_kernels_above_their_parallel_threshold() {
    let shape = [4099, 256];
    let mut rng = Rng::new(111);
    let n = shape[0] * shape[1];
    let (xd, yd): (Vec<f64>, Vec<f64>) = (
        rng.vec(n, -3.0, 3.0).into_iter().map(f64::from).collect(),
        rng.vec(n, -3.0, 3.0).into_iter().map(f64::from).collect(),
    );
    let x = || make(xd.clone(), shape, DType::F32, &Device::flex());
    let y = || make(yd.clone(), shape, DType::F32, &Device::flex());
    let same = |what: &str, out: Tensor<2>, expected: Tensor<2>| {
        assert_eq!(out.dims(), shape, "{what}: shape");
        let (out, expected) = (values(&out), values(&expected));
        let wrong = out
            .iter()
            .zip(&expected)
            .position(|(o, e)| o.to_bits() != e.to_bits());
        if let Some(i) = wrong {
            panic!(
                "{what}: element {i}: got {}, expected {}",
                out[i], expected[i]
            );
        }
    };
    // Fresh inputs are uniquely owned (the output is written over the first one's buffer);
    // with a clone held elsewhere, the output goes to a fresh buffer.
    for shared in [false, true] {
        let (a, b) = (x(), y());
        let held = shared.then(|| (a.clone(), b.clone()));
        same(
            &format!("add_relu, inputs shared: {shared}"),
            burn_route::add_relu(a, b),
            burn_tensor::activation::relu(x() + y()),
        );
        drop(held);
        let (a, b) = (x(), y());
        let held = shared.then(|| (a.clone(), b.clone()));
        same(
            &format!("axpby, inputs shared: {shared}"),
            burn_route::axpby(a, Some(b), 0.5, -2.0),
            x() * 0.5 + y() * -2.0,
        );
        drop(held);
        let a = x();
        let held = shared.then(|| a.clone());
        same(
            &format!("clamp_ste, input shared: {shared}"),
            clamp_ste(a, -1.0, 1.0),
            x().clamp(-1.0, 1.0),
        );
        drop(held);
    }
}

#[test]
fn clamp_ste_leaves_nan_as_nan_and_rejects_lo_above_hi() {
    let device = Device::flex();
    let x = Tensor::<2>::from_data([[f32::NAN, -5.0], [5.0, 0.25]], &device);
    for (layout, xv) in layouts(&x) {
        let out = values(&clamp_ste(xv.clone(), -1.0, 1.0));
        assert!(
            out[0].is_nan(),
            "{layout}: NaN must stay NaN, got {}",
            out[0]
        );
        assert_eq!(out[1..], [-1.0, 1.0, 0.25], "{layout}");
        assert_eq!(
            panic_message(|| drop(clamp_ste(xv.clone(), 2.0, 1.0))),
            "clamp_ste: `lo` (2) must not exceed `hi` (1)",
            "{layout}"
        );
        assert_eq!(
            panic_message(|| drop(clamp_ste(xv.clone(), 0.5, -0.5))),
            "clamp_ste: `lo` (0.5) must not exceed `hi` (-0.5)",
            "{layout}"
        );
    }
}

// --- topk_last -------------------------------------------------------------------------------

/// Random values with distinct elements per row (a shuffled ramp plus a small offset per row).
fn distinct<const D: usize>(rng: &mut Rng, shape: [usize; D]) -> Tensor<D> {
    let width = shape[D - 1];
    let n: usize = shape.iter().product();
    let mut data = Vec::with_capacity(n);
    for _ in 0..n / width {
        let mut row: Vec<f64> = (0..width)
            .map(|i| f64::from(u32::try_from(i).unwrap()))
            .collect();
        for i in (1..width).rev() {
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                clippy::cast_precision_loss
            )]
            let j = (rng.uniform(0.0, (i + 1) as f32) as usize).min(i);
            row.swap(i, j);
        }
        let shift = f64::from(rng.uniform(-3.0, 3.0));
        data.extend(row.into_iter().map(|v| (v - 10.0) * 0.75 + shift));
    }
    make(data, shape, DType::F32, &Device::flex())
}

fn check_topk<const D: usize>(rng: &mut Rng, shape: [usize; D], ties: bool) {
    let width = shape[D - 1];
    let x = if ties {
        // Few distinct values: many ties.
        let n = shape.iter().product();
        #[allow(clippy::cast_possible_truncation)]
        let data = (0..n)
            .map(|_| f64::from(rng.uniform(0.0, 4.0).floor()))
            .collect();
        make(data, shape, DType::F32, &Device::flex())
    } else {
        distinct(rng, shape)
    };
    let data = values64(&x);
    let index_dtype = x.clone().argmax(D - 1).dtype();
    for k in [0, 1, width / 2, width] {
        let (hand_values, hand_indices) = hand_topk(&data, width, k);
        let mut out_shape = shape;
        out_shape[D - 1] = k;
        for (layout, xv) in layouts(&x) {
            let what = format!("topk_last {shape:?} k {k} ties {ties} x {layout}");
            let (v, i) = topk_last(&xv, k);
            assert_eq!(v.dims(), out_shape, "{what}: values shape");
            assert_eq!(i.dims(), out_shape, "{what}: indices shape");
            assert_eq!(i.dtype(), index_dtype, "{what}: index dtype");
            assert_eq!(values64(&v), hand_values, "{what}: values");
            assert_eq!(ints(&i), hand_indices, "{what}: indices");
            assert_eq!(values64(&xv), data, "{what}: input changed");
            if !ties && k > 0 {
                // Burn's own top-k agrees on distinct values.
                let (bv, bi) = xv.clone().topk_with_indices(k, D - 1);
                assert_eq!(values64(&v), values64(&bv), "{what}: vs Burn values");
                assert_eq!(ints(&i), ints(&bi), "{what}: vs Burn indices");
            }
        }
    }
}

#[test]
fn topk_last_matches_sorting_by_hand() {
    let mut rng = Rng::new(111);
    check_topk(&mut rng, [1, 1], false);
    check_topk(&mut rng, [3, 5], false);
    check_topk(&mut rng, [64, 33], false);
    check_topk(&mut rng, [2, 3, 7], false);
    check_topk(&mut rng, [11], false);
}

#[test]
fn topk_last_breaks_ties_by_lower_index() {
    let mut rng = Rng::new(112);
    check_topk(&mut rng, [3, 5], true);
    check_topk(&mut rng, [16, 9], true);
    check_topk(&mut rng, [2, 3, 7], true);
    let device = Device::flex();
    let x = Tensor::<2>::from_data([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0]], &device);
    for (layout, xv) in layouts(&x) {
        let (v, i) = topk_last(&xv, 3);
        assert_eq!(values(&v), [3.0, 3.0, 2.0, 5.0, 5.0, 5.0], "{layout}");
        assert_eq!(ints(&i), [1, 2, 3, 0, 1, 2], "{layout}");
    }
}

#[test]
fn topk_last_rejects_k_above_the_width() {
    let device = Device::flex();
    let x = Tensor::<2>::from_data([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], &device);
    for (layout, xv) in layouts(&x) {
        assert_eq!(
            panic_message(|| drop(topk_last(&xv, 4))),
            "topk_last: `k` (4) exceeds the size of the last dimension (3)",
            "{layout}"
        );
    }
    let wide = Tensor::<3>::zeros([2, 2, 7], &device);
    assert_eq!(
        panic_message(|| drop(topk_last(&wide, 100))),
        "topk_last: `k` (100) exceeds the size of the last dimension (7)"
    );
}

// --- Uniquely owned inputs (the in-place branch of the fused kernels) ------------------------

/// Fresh, uniquely owned copies of `data`: a tensor of its own, and the leading rows of a taller
/// buffer (contiguous, offset 0, storage larger than the view). Moving one into a kernel lets it
/// write in place.
fn owned<const D: usize>(data: &[f64], shape: [usize; D]) -> Vec<(&'static str, Tensor<D>)> {
    let device = Device::flex();
    let own = make(data.to_vec(), shape, DType::F32, &device);
    let mut tall = data.to_vec();
    tall.extend(std::iter::repeat_n(GARBAGE, data.len() / shape[0]));
    let mut tall_shape = shape;
    tall_shape[0] += 1;
    let prefix = make(tall, tall_shape, DType::F32, &device).slice_dim(0, 0..shape[0]);
    assert_eq!(flex_layout(&prefix), (true, 0), "prefix view layout");
    vec![("own buffer", own), ("prefix of a larger buffer", prefix)]
}

#[test]
fn kernels_on_uniquely_owned_inputs_match_the_shared_ones() {
    let mut rng = Rng::new(118);
    for shape in [[1, 1], [3, 5], [64, 33]] {
        let x = random(&mut rng, shape, -2.0, 2.0);
        let y = random(&mut rng, shape, -2.0, 2.0);
        let p1 = random(&mut rng, [shape[1]], 0.5, 1.5);
        let p2 = random(&mut rng, [shape[1]], -1.0, 1.0);
        let data = values64(&x);
        type Kernel<'a> = (&'a str, Box<dyn Fn(Tensor<2>) -> Tensor<2> + 'a>);
        let kernels: Vec<Kernel> = vec![
            ("bias_gelu", Box::new(|x| bias_gelu(x, p2.clone()))),
            ("swiglu", Box::new(|x| swiglu(x, y.clone()))),
            ("rms_norm", Box::new(|x| rms_norm(x, p1.clone(), 1e-5))),
            (
                "layer_norm",
                Box::new(|x| layer_norm(x, p1.clone(), p2.clone(), 1e-5)),
            ),
            ("softmax_last", Box::new(softmax_last)),
            ("dropout", Box::new(|x| dropout(x, 0.3, 8).0)),
            ("clamp_ste", Box::new(|x| clamp_ste(x, -0.5, 1.0))),
        ];
        let references: Vec<Tensor<2>> = vec![
            ref_bias_gelu(x.clone(), p2.clone()),
            ref_swiglu(x.clone(), y.clone()),
            ref_rms_norm(x.clone(), p1.clone(), 1e-5),
            ref_layer_norm(x.clone(), p1.clone(), p2.clone(), 1e-5),
            ref_softmax(x.clone()),
            dropout(x.clone(), 0.3, 8).0,
            x.clone().clamp(-0.5, 1.0),
        ];
        for ((op, kernel), expected) in kernels.iter().zip(&references) {
            let shared = values(&kernel(x.clone()));
            assert_close(
                &shared,
                &values(expected),
                TOL,
                &format!("{op} {shape:?} shared"),
            );
            for (layout, fresh) in owned(&data, shape) {
                assert_eq!(
                    values(&kernel(fresh)),
                    shared,
                    "{op} {shape:?}: uniquely owned input ({layout})"
                );
            }
        }
        // Both swiglu inputs owned.
        for ((gl, gate), (ul, up)) in owned(&data, shape)
            .into_iter()
            .zip(owned(&values64(&y), shape))
        {
            assert_close(
                &values(&swiglu(gate, up)),
                &values(&ref_swiglu(x.clone(), y.clone())),
                TOL,
                &format!("swiglu {shape:?} owned gate ({gl}) and up ({ul})"),
            );
        }
        // Owned logits.
        let targets: Vec<i64> = (0..shape[0])
            .map(|i| i64::try_from(i % shape[1]).unwrap())
            .collect();
        let t = || {
            Tensor::<1, Int>::from_data(
                TensorData::new(targets.clone(), [shape[0]]),
                &Device::flex(),
            )
        };
        let expected = values(&ref_cross_entropy(x.clone(), t()));
        for (layout, fresh) in owned(&data, shape) {
            assert_close(
                &values(&cross_entropy_logits(fresh, t())),
                &expected,
                TOL,
                &format!("cross_entropy_logits {shape:?} owned logits ({layout})"),
            );
        }
    }
}

// --- Other float dtypes ----------------------------------------------------------------------

fn cast<const D: usize>(t: &Tensor<D>, dtype: DType) -> Tensor<D> {
    make(values64(t), t.dims(), dtype, &t.device())
}

/// Every element-wise and row-wise op on `dtype` inputs: the output keeps the dtype and matches
/// the Tensor-API reference computed in that dtype (on the strided layouts too).
fn check_other_dtype(dtype: DType, tol: f32) {
    let mut rng = Rng::new(113);
    let shape = [5, 6];
    let x = cast(&random(&mut rng, shape, -2.0, 2.0), dtype);
    let y = cast(&random(&mut rng, shape, -2.0, 2.0), dtype);
    let p1 = cast(&random(&mut rng, [6], 0.5, 1.5), dtype);
    let p2 = cast(&random(&mut rng, [6], -1.0, 1.0), dtype);
    let d = format!("{dtype:?}");
    let mut cases: Vec<(String, Tensor<2>, Tensor<2>)> = Vec::new();
    for (layout, xv) in layouts(&x) {
        let mut case = |op: &str, out: Tensor<2>, expected: Tensor<2>| {
            cases.push((format!("{d} {op} ({layout} x)"), out, expected));
        };
        case(
            "bias_gelu",
            bias_gelu(xv.clone(), p2.clone()),
            ref_bias_gelu(x.clone(), p2.clone()),
        );
        case(
            "swiglu",
            swiglu(xv.clone(), y.clone()),
            ref_swiglu(x.clone(), y.clone()),
        );
        case(
            "rms_norm",
            rms_norm(xv.clone(), p1.clone(), 1e-3),
            ref_rms_norm(x.clone(), p1.clone(), 1e-3),
        );
        case(
            "layer_norm",
            layer_norm(xv.clone(), p1.clone(), p2.clone(), 1e-3),
            ref_layer_norm(x.clone(), p1.clone(), p2.clone(), 1e-3),
        );
        case(
            "softmax_last",
            softmax_last(xv.clone()),
            ref_softmax(x.clone()),
        );
        case(
            "clamp_ste",
            clamp_ste(xv.clone(), -0.5, 1.0),
            x.clone().clamp(-0.5, 1.0),
        );
        case("topk_last", topk_last(&xv, 3).0, x.clone().topk(3, 1));
    }
    for (what, out, expected) in cases {
        assert_eq!(out.dtype(), dtype, "{what}: dtype");
        assert_eq!(expected.dtype(), dtype, "{what}: reference dtype");
        assert_close(&values(&out), &values(&expected), tol, &what);
    }
    let (_, indices) = topk_last(&x, 3);
    assert_eq!(
        ints(&indices),
        ints(&x.clone().topk_with_indices(3, 1).1),
        "{d} topk indices"
    );
}

#[test]
fn f64_inputs_stay_f64_for_the_elementwise_and_row_ops() {
    check_other_dtype(DType::F64, 1e-6);
}

#[test]
fn f16_inputs_stay_f16_for_the_elementwise_and_row_ops() {
    check_other_dtype(DType::F16, 2e-2);
}

#[test]
fn bf16_inputs_stay_bf16_for_the_elementwise_and_row_ops() {
    check_other_dtype(DType::BF16, 3e-2);
}

/// The float dtypes besides `f32` that Flex stores, with the tolerance of each.
const OTHER_DTYPES: [(DType, f32); 3] =
    [(DType::F64, 1e-6), (DType::F16, 2e-2), (DType::BF16, 2e-2)];

#[test]
fn cross_entropy_logits_on_other_float_dtypes() {
    let device = Device::flex();
    let mut rng = Rng::new(114);
    let logits = random(&mut rng, [4, 6], -3.0, 3.0);
    let targets = vec![0_i64, 5, 2, 3];
    let mut failures = Vec::new();
    for (dtype, tol) in OTHER_DTYPES {
        let lv = cast(&logits, dtype);
        let hand = hand_cross_entropy(&values64(&lv), 6, &targets);
        for (layout, view) in layouts(&lv) {
            let t = Tensor::<1, Int>::from_data(TensorData::new(targets.clone(), [4]), &device);
            let what = format!("{dtype:?} logits, {layout}");
            match outcome(|| cross_entropy_logits(view, t)) {
                Ok(out) => {
                    assert_eq!(out.dtype(), dtype, "{what}: dtype");
                    assert_close(&values(&out), &to_f32(&[hand]), tol, &what);
                }
                Err(message) => failures.push(format!("{what}: panicked: {message:?}")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "cross_entropy_logits must work on every float dtype (it falls back to Flex's ops), \
         or fail with a message naming the op and the dtype; {} cases panicked:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn dropout_on_other_float_dtypes() {
    let mut rng = Rng::new(115);
    let x = random(&mut rng, [20, 30], 0.5, 1.5);
    let keep = bools(&dropout(x.clone(), 0.4, 3).1);
    let mut failures = Vec::new();
    for (dtype, tol) in OTHER_DTYPES {
        let xv = cast(&x, dtype);
        let xs = values64(&xv);
        for (layout, view) in layouts(&xv) {
            let what = format!("{dtype:?} x, {layout}");
            match outcome(|| dropout(view, 0.4, 3)) {
                Ok((out, mask)) => {
                    assert_eq!(out.dtype(), dtype, "{what}: dtype");
                    assert_eq!(bools(&mask), keep, "{what}: mask as for f32");
                    let expected: Vec<f64> = xs
                        .iter()
                        .zip(&keep)
                        .map(|(x, k)| if *k { x / 0.6 } else { 0.0 })
                        .collect();
                    assert_close(&values(&out), &to_f32(&expected), tol, &what);
                }
                Err(message) => failures.push(format!("{what}: panicked: {message:?}")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "dropout must work on every float dtype (it falls back to Flex's ops), or fail with a \
         message naming the op and the dtype; {} cases panicked:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The value of `f`, or the message it panicked with.
fn outcome<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|e| panic_text(&*e))
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

// --- The Dispatch level ----------------------------------------------------------------------

#[test]
fn every_op_runs_through_the_dispatch_level_on_plain_flex() {
    let device = Device::flex();
    let mut rng = Rng::new(116);
    let x = random(&mut rng, [4, 6], -2.0, 2.0);
    let y = random(&mut rng, [4, 6], -2.0, 2.0);
    let p1 = random(&mut rng, [6], 0.5, 1.5);
    let p2 = random(&mut rng, [6], -1.0, 1.0);
    let targets = Tensor::<1, Int>::from_data([0, 5, 2, 3], &device);
    let d = |t: &Tensor<2>| t.clone().into_dispatch();
    let d1 = |t: &Tensor<1>| t.clone().into_dispatch();
    let back = Tensor::<2>::from_dispatch;

    let pairs: Vec<(&str, Tensor<2>, Tensor<2>, Tensor<2>)> = vec![
        (
            "bias_gelu",
            back(<Dispatch as RoutedOps>::bias_gelu(d(&x), d1(&p2))),
            back(dispatch::try_bias_gelu(d(&x), d1(&p2)).expect("routes")),
            ref_bias_gelu(x.clone(), p2.clone()),
        ),
        (
            "swiglu",
            back(<Dispatch as RoutedOps>::swiglu(d(&x), d(&y))),
            back(dispatch::try_swiglu(d(&x), d(&y)).expect("routes")),
            ref_swiglu(x.clone(), y.clone()),
        ),
        (
            "rms_norm",
            back(<Dispatch as RoutedOps>::rms_norm(d(&x), d1(&p1), 1e-5)),
            back(dispatch::try_rms_norm(d(&x), d1(&p1), 1e-5).expect("routes")),
            ref_rms_norm(x.clone(), p1.clone(), 1e-5),
        ),
        (
            "layer_norm",
            back(<Dispatch as RoutedOps>::layer_norm(
                d(&x),
                d1(&p1),
                d1(&p2),
                1e-5,
            )),
            back(dispatch::try_layer_norm(d(&x), d1(&p1), d1(&p2), 1e-5).expect("routes")),
            ref_layer_norm(x.clone(), p1.clone(), p2.clone(), 1e-5),
        ),
        (
            "softmax_last",
            back(<Dispatch as RoutedOps>::softmax_last(d(&x))),
            back(dispatch::try_softmax_last(d(&x)).expect("routes")),
            ref_softmax(x.clone()),
        ),
        (
            "clamp_ste",
            back(<Dispatch as RoutedOps>::clamp_ste(d(&x), -0.5, 0.5)),
            back(dispatch::try_clamp_ste(d(&x), -0.5, 0.5).expect("routes")),
            x.clone().clamp(-0.5, 0.5),
        ),
    ];
    for (op, via_trait, via_try, expected) in pairs {
        assert_close(
            &values(&via_trait),
            &values(&expected),
            TOL,
            &format!("{op} (RoutedOps)"),
        );
        assert_close(
            &values(&via_try),
            &values(&expected),
            TOL,
            &format!("{op} (try_)"),
        );
    }

    let ce = Tensor::<1>::from_dispatch(<Dispatch as RoutedOps>::cross_entropy_logits(
        d(&x),
        targets.clone().into_dispatch(),
    ));
    let ce_try = Tensor::<1>::from_dispatch(
        dispatch::try_cross_entropy_logits(d(&x), targets.clone().into_dispatch()).expect("routes"),
    );
    let expected = values(&ref_cross_entropy(x.clone(), targets));
    assert_close(
        &values(&ce),
        &expected,
        TOL,
        "cross_entropy_logits (RoutedOps)",
    );
    assert_close(
        &values(&ce_try),
        &expected,
        TOL,
        "cross_entropy_logits (try_)",
    );

    let (out, mask) = <Dispatch as RoutedOps>::dropout(d(&x), 0.5, 11);
    let (out_try, mask_try) = dispatch::try_dropout(d(&x), 0.5, 11).expect("routes");
    let (t_out, t_mask) = dropout(x.clone(), 0.5, 11);
    assert_eq!(values(&back(out)), values(&t_out), "dropout (RoutedOps)");
    assert_eq!(values(&back(out_try)), values(&t_out), "dropout (try_)");
    assert_eq!(
        bools(&Tensor::<2, Bool>::from_dispatch(mask)),
        bools(&t_mask)
    );
    assert_eq!(
        bools(&Tensor::<2, Bool>::from_dispatch(mask_try)),
        bools(&t_mask)
    );

    let (v, i) = <Dispatch as RoutedOps>::topk_last(&d(&x), 2);
    let (v_try, i_try) = dispatch::try_topk_last(&d(&x), 2).expect("routes");
    let (bv, bi) = x.clone().topk_with_indices(2, 1);
    assert_eq!(
        values(&back(v)),
        values(&bv),
        "topk_last values (RoutedOps)"
    );
    assert_eq!(values(&back(v_try)), values(&bv), "topk_last values (try_)");
    assert_eq!(ints(&Tensor::<2, Int>::from_dispatch(i)), ints(&bi));
    assert_eq!(ints(&Tensor::<2, Int>::from_dispatch(i_try)), ints(&bi));

    // The validation panics are the kernels' own, whatever the level.
    assert_eq!(
        panic_message(|| drop(<Dispatch as RoutedOps>::clamp_ste(d(&x), 1.0, 0.0))),
        "clamp_ste: `lo` (1) must not exceed `hi` (0)"
    );
    assert_eq!(
        panic_message(|| drop(dispatch::try_dropout(d(&x), 2.0, 0))),
        "dropout: `p` must be a probability in [0, 1], got 2"
    );
    assert_eq!(
        panic_message(|| drop(dispatch::try_topk_last(&d(&x), 7))),
        "topk_last: `k` (7) exceeds the size of the last dimension (6)"
    );
}

#[test]
fn tensor_level_try_functions_return_ok_on_flex() {
    let device = Device::flex();
    let x = Tensor::<2>::from_data([[0.5, -1.0], [2.0, 0.0]], &device);
    let p = Tensor::<1>::from_data([1.0, 0.5], &device);
    let t = Tensor::<1, Int>::from_data([1, 0], &device);
    assert!(burn_route::try_bias_gelu(x.clone(), p.clone()).is_ok());
    assert!(burn_route::try_swiglu(x.clone(), x.clone()).is_ok());
    assert!(burn_route::try_rms_norm(x.clone(), p.clone(), 1e-5).is_ok());
    assert!(burn_route::try_layer_norm(x.clone(), p.clone(), p.clone(), 1e-5).is_ok());
    assert!(burn_route::try_softmax_last(x.clone()).is_ok());
    assert!(burn_route::try_cross_entropy_logits(x.clone(), t).is_ok());
    assert!(burn_route::try_dropout(x.clone(), 0.5, 1).is_ok());
    assert!(burn_route::try_clamp_ste(x.clone(), 0.0, 1.0).is_ok());
    assert!(burn_route::try_topk_last(&x, 1).is_ok());
}

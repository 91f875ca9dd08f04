//! Inputs and Burn baselines shared by `benches/ops.rs` (time) and `benches/memory.rs` (peak
//! heap), so both measure the same calls. Included by those two with `#[path]`.

use burn_tensor::activation::log_softmax;
use burn_tensor::{Device, Distribution, Int, Tensor, TensorData};

use super::common::uniform;

/// Width of the row-wise ops' inputs (`[n / WIDTH, WIDTH]`).
pub const WIDTH: usize = 256;
/// Classes of cross-entropy's logits (`[n / CLASSES, CLASSES]`).
pub const CLASSES: usize = 128;
pub const EPS: f32 = 1e-5;
/// Dropout probability.
pub const P: f32 = 0.1;

/// `[n / width, width]` values uniform in `[-3, 3)`.
pub fn matrix(n: usize, width: usize, seed: u64) -> TensorData {
    TensorData::new(uniform(n, seed, -3.0, 3.0), [n / width, width])
}

/// `[WIDTH]` values uniform in `[lo, hi)`.
pub fn features(seed: u64, lo: f32, hi: f32) -> TensorData {
    TensorData::new(uniform(WIDTH, seed, lo, hi), [WIDTH])
}

/// A fresh tensor (its own buffer) with `data`'s values on `device`.
pub fn float<const D: usize>(data: &TensorData, device: &Device) -> Tensor<D> {
    Tensor::from_data(data.clone(), device)
}

/// A fresh gradient-tracked leaf with `data`'s values on the autodiff `device`.
#[cfg(feature = "autodiff")]
pub fn leaf<const D: usize>(data: &TensorData, device: &Device) -> Tensor<D> {
    float(data, device).require_grad()
}

// --- Burn's `Tensor` API: what a user writes without burn-route. ---

/// `burn::nn::RmsNorm`'s forward.
pub fn rms_norm_burn(x: Tensor<2>, weight: Tensor<1>) -> Tensor<2> {
    x.clone() / (x.square().mean_dim(1) + EPS).sqrt() * weight.unsqueeze::<2>()
}

/// What `burn::nn::LayerNorm` calls: Burn's own `module::layer_norm` (one fused kernel on Flex).
pub fn layer_norm_burn(x: Tensor<2>, gamma: Tensor<1>, beta: Tensor<1>) -> Tensor<2> {
    burn_tensor::module::layer_norm(x, gamma, Some(beta), f64::from(EPS))
}

pub fn cross_entropy_burn(logits: Tensor<2>, targets: Tensor<1, Int>) -> Tensor<1> {
    -log_softmax(logits, 1)
        .gather(1, targets.unsqueeze_dim::<2>(1))
        .mean()
}

pub fn dropout_burn(x: Tensor<2>) -> Tensor<2> {
    let keep = x.random_like(Distribution::Bernoulli(f64::from(1.0 - P)));
    x * keep / (1.0 - P)
}

// --- `linear_cross_entropy` over a large vocabulary. ---

/// Rows, features and classes of `linear_cross_entropy`'s bench: the logits alone are
/// `1,024 × 32,768` `f32`, 128 MiB.
pub const LCE: (usize, usize, usize) = (1024, 512, 32768);

/// `x` `[rows, features]`, the weight as `burn::nn::Linear` keeps it (`[features, classes]`),
/// the bias `[classes]` and the targets `[rows]`.
pub fn lce_inputs() -> (TensorData, TensorData, TensorData, TensorData) {
    let (rows, features, classes) = LCE;
    let targets: Vec<i64> = (0..rows)
        .map(|i| i64::try_from((i * 7919 + 13) % classes).expect("fits"))
        .collect();
    (
        TensorData::new(uniform(rows * features, 21, -1.0, 1.0), [rows, features]),
        TensorData::new(
            uniform(features * classes, 22, -0.05, 0.05),
            [features, classes],
        ),
        TensorData::new(uniform(classes, 23, -0.1, 0.1), [classes]),
        TensorData::new(targets, [rows]),
    )
}

/// What a Burn user writes: `burn::nn::Linear`'s forward (`module::linear`), then the
/// cross-entropy of the logits.
pub fn linear_ce_burn(
    x: Tensor<2>,
    weight: Tensor<2>,
    bias: Tensor<1>,
    targets: Tensor<1, Int>,
) -> Tensor<1> {
    cross_entropy_burn(burn_tensor::module::linear(x, weight, Some(bias)), targets)
}

/// The same loss with burn-route, on the same `Linear` parameters (the weight's transpose is
/// read in place).
pub fn linear_ce_route(
    x: Tensor<2>,
    weight: Tensor<2>,
    bias: Tensor<1>,
    targets: Tensor<1, Int>,
) -> Tensor<1> {
    burn_route::linear_cross_entropy(
        x,
        weight.transpose(),
        Some(bias),
        targets,
        burn_route::CrossEntropyOptions::default(),
    )
}
